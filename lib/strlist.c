/*
 * lib/strlist.c — growable list of owned strings (see strlist.h).
 */
#include "lib/strlist.h"

#include <stdlib.h>
#include <string.h>

#include "lib/error.h"

void lt_strlist_push(lt_strlist *list, const char *s) {
    if (list->count == list->cap) {
        size_t cap = list->cap ? 2 * list->cap : 16;
        list->items = lt_realloc_check(list->items, cap * sizeof *list->items);
        list->cap = cap;
    }
    list->items[list->count++] = lt_strdup_check(s);
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void lt_strlist_sort_unique(lt_strlist *list) {
    if (list->count < 2) return;
    qsort(list->items, list->count, sizeof *list->items, compare_strings);
    size_t kept = 1;
    for (size_t i = 1; i < list->count; i++) {
        if (strcmp(list->items[i], list->items[kept - 1]) == 0)
            free(list->items[i]);
        else
            list->items[kept++] = list->items[i];
    }
    list->count = kept;
}

void lt_strlist_free(lt_strlist *list) {
    if (list == NULL) return;
    for (size_t i = 0; i < list->count; i++) free(list->items[i]);
    free(list->items);
    list->items = NULL;
    list->count = list->cap = 0;
}
