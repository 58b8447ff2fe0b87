/*
 * plans/batches/lengths.c — length files and length lists (plans/batches/lengths.h).
 */
#include "plans/batches/lengths.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strutil.h" /* lt_parse_size_why, lt_trim */

/* Append v to the growing array *a (*n used, *cap allocated). */
static void push(int64_t **a, size_t *n, size_t *cap, int64_t v) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        *a = lt_realloc_check(*a, *cap * sizeof **a);
    }
    (*a)[(*n)++] = v;
}

/* One count from text (0 allowed when allow_zero); NULL on success, else why not. */
static const char *parse_count(const char *text, bool allow_zero, int64_t *out) {
    uint64_t v;
    const char *why = NULL;
    if (lt_parse_size_why(text, &v, &why) != LT_OK) return why ? why : "not a token count";
    if (v == 0 && !allow_zero) return "a length must be at least 1";
    if (v > (uint64_t)INT64_MAX / 4) return "too large";
    *out = (int64_t)v;
    return NULL;
}

lt_status lt_lengths_read(const char *path, int64_t **out, size_t *n, lt_error *err) {
    *out = NULL;
    *n = 0;
    bool std_in = strcmp(path, "-") == 0;
    FILE *f = std_in ? stdin : fopen(path, "r");
    if (!f) return lt_fail(err, LT_ERR_IO, path, "cannot open the lengths file: %s", strerror(errno));
    int64_t *a = NULL;
    size_t cnt = 0, cap = 0, lineno = 0;
    char *line = NULL;
    size_t linecap = 0;
    lt_status st = LT_OK;
    while (getline(&line, &linecap, f) >= 0) {
        lineno++;
        char *t = lt_trim(line);
        if (*t == '\0' || *t == '#') continue;
        int64_t v;
        const char *why = parse_count(t, true, &v);
        if (why) {
            char where[4096];
            snprintf(where, sizeof where, "%s:%zu", path, lineno);
            st = lt_fail(err, LT_ERR_INPUT, where, "'%.40s' is not a token count: %s", t, why);
            lt_error_hint(err, "a lengths file holds one positive integer per line (dataprep lengths DIR writes one)");
            break;
        }
        push(&a, &cnt, &cap, v);
    }
    if (st == LT_OK && ferror(f)) st = lt_fail(err, LT_ERR_IO, path, "read error: %s", strerror(errno));
    if (st == LT_OK && cnt == 0) {
        st = lt_fail(err, LT_ERR_INPUT, path, "no lengths in the file");
        lt_error_hint(err, "a lengths file holds one positive integer per line (dataprep lengths DIR writes one)");
    }
    free(line);
    if (!std_in) fclose(f);
    if (st != LT_OK) {
        free(a);
        return st;
    }
    *out = a;
    *n = cnt;
    return LT_OK;
}

lt_status lt_lengths_parse_list(const char *text, const char *what, int64_t **out, size_t *n, lt_error *err) {
    *out = NULL;
    *n = 0;
    char *copy = lt_strdup_check(text);
    int64_t *a = NULL;
    size_t cnt = 0, cap = 0;
    lt_status st = LT_OK;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *t = lt_trim(tok);
        int64_t v;
        const char *why = parse_count(t, false, &v);
        if (why) {
            st = lt_fail(err, LT_ERR_USAGE, what, "'%.40s' is not a length: %s", t, why);
            break;
        }
        push(&a, &cnt, &cap, v);
    }
    if (st == LT_OK && cnt == 0) st = lt_fail(err, LT_ERR_USAGE, what, "no lengths given (want e.g. 1,1,2,4)");
    free(copy);
    if (st != LT_OK) {
        free(a);
        return st;
    }
    *out = a;
    *n = cnt;
    return LT_OK;
}
