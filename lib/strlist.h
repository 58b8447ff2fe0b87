/*
 * lib/strlist.h — a growable list of owned strings (input file lists, argument lists).
 * The list owns its strings; lt_strlist_free frees them. Not thread-safe.
 */
#ifndef LT_STRLIST_H
#define LT_STRLIST_H

#include <stddef.h>

typedef struct lt_strlist {
    char **items;
    size_t count;
    size_t cap;
} lt_strlist;

#define LT_STRLIST_INIT {NULL, 0, 0}

/* Append a copy of `s` (dies with file:line on out of memory). */
void lt_strlist_push(lt_strlist *list, const char *s);
/* Sort bytewise (strcmp: the same order on every machine and locale) and drop duplicates. */
void lt_strlist_sort_unique(lt_strlist *list);
void lt_strlist_free(lt_strlist *list);

#endif /* LT_STRLIST_H */
