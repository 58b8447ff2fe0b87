/*
 * plans/store/config.c — whether a stored run is the run `planner build` resumes
 * (lt_store_begin on an existing file): the plan-relevant values of the two runs'
 * config dumps, compared by value, then the fingerprint, strategy, sample policy and
 * tuning; the first difference is the refusal's message.
 *
 * The dumps are read by a small parser of their own (cfg_parse), not by lib/config.h's
 * loader, because the comparison must not depend on this build's schema accepting the
 * stored text: a dump written by another planner version may hold keys this one does not
 * know (ignored unless plan-relevant, then a difference), values its schema would now
 * refuse, or "; key =" (no value) for a key whose default this version sets (a
 * difference, where a load would fill the default in and find none).
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config.h"           /* lt_config_find_key (typed comparison of config values) */
#include "lib/strutil.h"          /* lt_parse_int64, lt_parse_size, lt_parse_double, lt_parse_bool */
#include "plans/store/internal.h" /* store_same_run */

/* One "key = value" of a lt_config_dump text; value NULL for "; key =" (no value). */
typedef struct cfg_entry {
    char section[64]; /* "source." + a name of up to 48 */
    char key[64];
    char *value;
} cfg_entry;

typedef struct cfg_list {
    cfg_entry *v;
    size_t n, cap;
} cfg_list;

static void cfg_list_free(cfg_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i].value);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static bool is_key_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

/* Whether the plan-relevant part of the config holds section.key: [model], [parallel] and
 * [plan] except plan.steps (resuming to more steps is the point of resuming), the
 * held-out shares data.holdout and [source.NAME] holdout, and the sources' weights. */
static bool plan_relevant(const char *section, const char *key) {
    if (strcmp(section, "plan") == 0) return strcmp(key, "steps") != 0;
    /* the held-out documents: steps planned with another set could sample a held-out one;
     * the mixture's weights: the steps depend on every step before them */
    if (strncmp(section, "source.", 7) == 0) return strcmp(key, "holdout") == 0 || strcmp(key, "weight") == 0;
    if (strcmp(key, "holdout") == 0) return strcmp(section, "data") == 0;
    return strcmp(section, "model") == 0 || strcmp(section, "parallel") == 0;
}

/* Parse the plan-relevant entries of a dump, values without their "; origin" comments. */
static void cfg_parse(const char *text, cfg_list *out) {
    memset(out, 0, sizeof *out);
    char section[64] = "";
    const char *p = text ? text : "";
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *line = p;
        p = eol ? eol + 1 : p + len;
        while (len > 0 && (line[0] == ' ' || line[0] == '\t')) line++, len--;
        while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\t' || line[len - 1] == '\r')) len--;
        if (len == 0) continue;
        if (line[0] == '[') {
            size_t n = 1;
            while (n < len && line[n] != ']') n++;
            snprintf(section, sizeof section, "%.*s", (int)(n - 1), line + 1);
            continue;
        }
        const char *key = line, *value = NULL;
        size_t klen = 0, vlen = 0;
        bool unset = false;
        if (line[0] == ';' || line[0] == '#') {
            /* "; key =": a key without a value; any other comment is skipped */
            size_t i = 1;
            while (i < len && line[i] == ' ') i++;
            key = line + i;
            while (i < len && is_key_char(line[i])) i++, klen++;
            if (klen == 0 || len - i != 2 || strncmp(line + i, " =", 2) != 0) continue;
            unset = true;
        } else {
            while (klen < len && is_key_char(line[klen])) klen++;
            size_t i = klen;
            while (i < len && line[i] == ' ') i++;
            if (klen == 0 || i >= len || line[i] != '=') continue;
            i++;
            while (i < len && line[i] == ' ') i++;
            value = line + i;
            vlen = len - i;
            /* a ';' after a blank starts the origin comment (values cannot hold one) */
            for (size_t j = 1; j < vlen; j++) {
                if (value[j] == ';' && (value[j - 1] == ' ' || value[j - 1] == '\t')) {
                    vlen = j;
                    break;
                }
            }
            while (vlen > 0 && (value[vlen - 1] == ' ' || value[vlen - 1] == '\t')) vlen--;
        }
        if (klen >= sizeof out->v[0].key) continue;
        cfg_entry e;
        memset(&e, 0, sizeof e);
        snprintf(e.section, sizeof e.section, "%s", section);
        memcpy(e.key, key, klen);
        if (!plan_relevant(e.section, e.key)) continue;
        if (!unset) {
            e.value = lt_malloc_check(vlen + 1);
            memcpy(e.value, value, vlen);
            e.value[vlen] = '\0';
        }
        if (out->n == out->cap) {
            out->cap = out->cap ? 2 * out->cap : 64;
            out->v = lt_realloc_check(out->v, out->cap * sizeof *out->v);
        }
        out->v[out->n++] = e;
    }
}

/* Equal values: the same text, or the same typed value of the key ("256K" = "262144"). */
static bool cfg_values_equal(const char *section, const char *key, const char *a, const char *b) {
    if (!a || !b) return a == b;
    if (strcmp(a, b) == 0) return true;
    const lt_config_key *k = lt_config_find_key(section, key);
    if (!k) return false;
    switch (k->type) {
    case LT_CONFIG_INT: {
        int64_t x, y;
        return lt_parse_int64(a, &x) == LT_OK && lt_parse_int64(b, &y) == LT_OK && x == y;
    }
    case LT_CONFIG_SIZE: {
        uint64_t x, y;
        return lt_parse_size(a, &x) == LT_OK && lt_parse_size(b, &y) == LT_OK && x == y;
    }
    case LT_CONFIG_DOUBLE: {
        double x, y;
        return lt_parse_double(a, &x) == LT_OK && lt_parse_double(b, &y) == LT_OK && x == y;
    }
    case LT_CONFIG_BOOL: {
        bool x, y;
        return lt_parse_bool(a, &x) == LT_OK && lt_parse_bool(b, &y) == LT_OK && x == y;
    }
    default: return false;
    }
}

static const cfg_entry *cfg_find(const cfg_list *l, const char *section, const char *key) {
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].section, section) == 0 && strcmp(l->v[i].key, key) == 0) return &l->v[i];
    return NULL;
}

static lt_status refuse(lt_error *err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static lt_status refuse(lt_error *err, const char *path, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    lt_fail(err, LT_ERR_CONFIG, path, "%s %s", path, what);
    lt_error_hint(err, "give another --db, or delete %s to plan from scratch", path);
    return LT_ERR_CONFIG;
}

/* The stored run against the run `run` resumes (internal.h): the config values first, in the
 * order of run's dump, then a value only the file has, then the other fields. */
lt_status store_same_run(const lt_run_info *have, const lt_run_info *run, const char *path, lt_error *err) {
    cfg_list a, b;
    cfg_parse(run->config, &a);
    cfg_parse(have->config, &b);
    lt_status s = LT_OK;
    for (size_t i = 0; i < a.n && s == LT_OK; i++) {
        const cfg_entry *e = &a.v[i], *f = cfg_find(&b, e->section, e->key);
        const char *fv = f ? f->value : NULL;
        if (!f) { /* a key the file's writer did not know had its default there */
            const lt_config_key *k = lt_config_find_key(e->section, e->key);
            fv = k ? k->def : NULL;
        }
        if (!cfg_values_equal(e->section, e->key, e->value, fv))
            s = refuse(err, path, "was built from a different config: [%s] %s = %s here, %s in the file", e->section,
                       e->key, e->value ? e->value : "(no value)", fv ? fv : "(no value)");
    }
    for (size_t i = 0; i < b.n && s == LT_OK; i++) {
        const cfg_entry *f = &b.v[i];
        if (!cfg_find(&a, f->section, f->key) && f->value)
            s = refuse(err, path, "was built from a different config: [%s] %s = (no value) here, %s in the file",
                       f->section, f->key, f->value);
    }
    cfg_list_free(&a);
    cfg_list_free(&b);
    if (s != LT_OK) return s;
#define SAME(field, what)                                                                                      \
    do {                                                                                                        \
        const char *x = run->field ? run->field : "", *y = have->field ? have->field : "";                     \
        if (strcmp(x, y) != 0) return refuse(err, path, "was built " what ": %s here, %s in the file", x, y); \
    } while (0)
    SAME(fingerprint, "from different input data (corpus fingerprint)");
    SAME(strategy, "with another strategy");
    SAME(sample_policy, "with another sample policy");
    SAME(tuning, "with another tuning");
#undef SAME
    return LT_OK;
}
