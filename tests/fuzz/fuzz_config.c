/*
 * tests/fuzz/fuzz_config.c — libFuzzer target for the INI config parser (lib/config.h).
 *
 * The input is arbitrary bytes, read as the text of a config file. Every input goes
 * through three paths, each on its own fresh config:
 *   1. lt_config_load_string on a NUL-terminated copy (the text ends at the first NUL);
 *   2. lt_config_load_file on the exact bytes (NULs included), through an in-memory file
 *      (memfd, opened as /proc/self/fd/N: no file system is touched);
 *   3. each line of the input (split at '\n'; the first 32) as one lt_config_set("section.key=value");
 *   4. the same lines through lt_config_set_value(SECTION, KEY, VALUE) (split at the first
 *      '=' and the first '.' before it, nothing trimmed): the path env vars and API callers
 *      use, "validated like a file value".
 * What is checked (a violation calls abort(), which libFuzzer reports as a crash; a crash,
 * a sanitizer report, a hang over -timeout and an exit() through LT_CHECK are failures):
 *   - no crash, no leak, no undefined behaviour, no exit;
 *   - an error is a value: the status returned equals err.status, it is LT_ERR_CONFIG (or
 *     LT_ERR_USAGE for a malformed --set), never LT_ERR_INTERNAL; WHAT is non-empty; WHERE
 *     names the source ("NAME:LINE" for a load, "--set ..." for a set);
 *   - a failing load or set leaves the config exactly as it was (its dump, origins
 *     included, is byte-identical before and after);
 *   - load_string and load_file agree on text without NUL bytes (same status, WHAT, HINT
 *     and line number);
 *   - after any successful load or set: every getter agrees with lt_config_is_set (typed
 *     getters return LT_OK exactly for set keys, LT_ERR_CONFIG otherwise) and ENUM values
 *     are one of their choices;
 *   - the dump reloads: lt_config_dump_string -> lt_config_load_string on a fresh config
 *     succeeds and lt_config_equal holds (also when reloaded over the config itself);
 *   - loading the same successful text twice is fine (duplicates are per file) and
 *     changes no value;
 *   - only one UTF-8 byte order mark is skipped: a text starting with two loads (or fails)
 *     like the same text with the second replaced by U+200B.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/config.h"
#include "lib/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_NAME "fuzz.ini"

static void fail(const char *what, const lt_error *err, const char *extra) {
    fprintf(stderr, "fuzz_config: property violated: %s\n", what);
    if (err != NULL)
        fprintf(stderr, "  status=%d what='%s' where='%s' hint='%s'\n", (int)err->status, err->what,
                err->where, err->hint);
    if (extra != NULL) fprintf(stderr, "  %s\n", extra);
    abort();
}

static char *dump_or_die(const lt_config *cfg) {
    char *text = lt_config_dump_string(cfg);
    if (text == NULL) fail("lt_config_dump_string returned NULL", NULL, NULL);
    return text;
}

static lt_config *new_or_die(void) {
    lt_config *cfg = lt_config_new();
    if (cfg == NULL) fail("lt_config_new returned NULL", NULL, NULL);
    return cfg;
}

/* The error of a failed call is well formed. */
static void check_error(lt_status st, const lt_error *err, bool usage_ok, const char *where_prefix) {
    if (st != err->status) fail("returned status differs from err.status", err, NULL);
    if (st != LT_ERR_CONFIG && !(usage_ok && st == LT_ERR_USAGE))
        fail("unexpected status for bad input (want config/usage)", err, NULL);
    if (err->what[0] == '\0') fail("error without WHAT", err, NULL);
    if (strncmp(err->where, where_prefix, strlen(where_prefix)) != 0)
        fail("WHERE does not name the source", err, where_prefix);
}

/* Getters agree with lt_config_is_set; enum values are among the choices. */
static void check_getters(const lt_config *cfg) {
    size_t n;
    const lt_config_key *schema = lt_config_schema(&n);
    for (size_t i = 0; i < n; i++) {
        const lt_config_key *k = &schema[i];
        const char *raw = lt_config_get_string(cfg, k->section, k->key);
        bool set = lt_config_is_set(cfg, k->section, k->key);
        if ((raw != NULL) != set) fail("get_string and is_set disagree", NULL, k->key);
        if (lt_config_origin(cfg, k->section, k->key) == NULL) fail("no origin", NULL, k->key);
        lt_error e;
        lt_error_clear(&e);
        lt_status st = LT_OK;
        int64_t i64;
        uint64_t u64;
        double d;
        bool b;
        switch (k->type) {
        case LT_CONFIG_STRING: continue;
        case LT_CONFIG_ENUM: {
            if (raw == NULL) continue;
            size_t len = strlen(raw);
            bool found = false;
            for (const char *p = k->choices; *p;) {
                const char *end = strchr(p, ' ');
                size_t m = end ? (size_t)(end - p) : strlen(p);
                if (m == len && memcmp(p, raw, m) == 0) found = true;
                if (end == NULL) break;
                p = end + 1;
            }
            if (!found) fail("enum value is not one of the choices", NULL, raw);
            continue;
        }
        case LT_CONFIG_INT: st = lt_config_get_int(cfg, k->section, k->key, &i64, &e); break;
        case LT_CONFIG_SIZE:
            st = lt_config_get_size(cfg, k->section, k->key, &u64, &e);
            if (st == LT_OK && u64 > (uint64_t)INT64_MAX) fail("size above INT64_MAX", NULL, raw);
            break;
        case LT_CONFIG_DOUBLE:
            st = lt_config_get_double(cfg, k->section, k->key, &d, &e);
            if (st == LT_OK && !(d - d == 0.0)) fail("double value not finite", NULL, raw);
            break;
        case LT_CONFIG_BOOL: st = lt_config_get_bool(cfg, k->section, k->key, &b, &e); break;
        }
        if (set ? st != LT_OK : st != LT_ERR_CONFIG) fail("typed getter disagrees with is_set", &e, k->key);
    }
}

/* "section.key: 'A' vs 'B'" for the first key whose text differs (for reports). */
static const char *first_difference(const lt_config *a, const lt_config *b) {
    static char msg[LT_CONFIG_VALUE_MAX * 2 + 256];
    size_t n;
    const lt_config_key *schema = lt_config_schema(&n);
    for (size_t i = 0; i < n; i++) {
        const char *x = lt_config_get_string(a, schema[i].section, schema[i].key);
        const char *y = lt_config_get_string(b, schema[i].section, schema[i].key);
        if ((x == NULL) != (y == NULL) || (x != NULL && strcmp(x, y) != 0)) {
            snprintf(msg, sizeof msg, "%s.%s: '%s' became '%s'", schema[i].section, schema[i].key,
                     x ? x : "(unset)", y ? y : "(unset)");
            return msg;
        }
    }
    return "(the texts are equal; the typed values differ)";
}

/* The dump of `cfg` loads into a fresh config (and over `cfg` itself) to equal values. */
static void check_dump_reloads(lt_config *cfg) {
    char *text = dump_or_die(cfg);
    lt_config *fresh = new_or_die();
    lt_error e;
    lt_error_clear(&e);
    lt_status st = lt_config_load_string(fresh, text, "dump.ini", &e);
    if (st != LT_OK) fail("the dump does not reload", &e, text);
    if (!lt_config_equal(cfg, fresh))
        fail("the reloaded dump differs (lt_config_equal)", NULL, first_difference(cfg, fresh));
    /* the dump of the reloaded config reloads too (a fixed point of the values) */
    char *again = dump_or_die(fresh);
    lt_config *third = new_or_die();
    st = lt_config_load_string(third, again, "dump2.ini", &e);
    if (st != LT_OK) fail("the dump of the reloaded dump does not reload", &e, again);
    if (!lt_config_equal(cfg, third)) fail("second reload differs", NULL, first_difference(cfg, third));
    /* reloading over the config itself changes no value */
    st = lt_config_load_string(cfg, text, "dump.ini", &e);
    if (st != LT_OK) fail("the dump does not reload over its own config", &e, text);
    if (!lt_config_equal(cfg, fresh))
        fail("dump reloaded over itself changed values", NULL, first_difference(fresh, cfg));
    lt_config_free(third);
    lt_config_free(fresh);
    free(again);
    free(text);
}

/* A failing call left cfg as `before` (its dump text). */
static void check_unchanged(const lt_config *cfg, const char *before, const char *what) {
    char *after = dump_or_die(cfg);
    if (strcmp(before, after) != 0) fail(what, NULL, after);
    free(after);
}

/* The "LINE" of "NAME:LINE" (or -1). */
static long where_line(const char *where) {
    const char *colon = strrchr(where, ':');
    if (colon == NULL) return -1;
    return strtol(colon + 1, NULL, 10);
}

/* Path 1: lt_config_load_string. Returns the status; fills *err. */
static lt_status fuzz_load_string(const char *text, lt_error *err) {
    lt_config *cfg = new_or_die();
    char *before = dump_or_die(cfg);
    lt_error_clear(err);
    lt_status st = lt_config_load_string(cfg, text, FUZZ_NAME, err);
    if (st != LT_OK) {
        check_error(st, err, false, FUZZ_NAME);
        check_unchanged(cfg, before, "a failing load changed the config");
    } else {
        check_getters(cfg);
        /* the same text loaded again on top: no duplicate errors across loads */
        lt_config *once = new_or_die();
        lt_error e2;
        if (lt_config_load_string(once, text, FUZZ_NAME, &e2) != LT_OK)
            fail("the same text failed on a second fresh config", &e2, NULL);
        if (lt_config_load_string(cfg, text, FUZZ_NAME, &e2) != LT_OK)
            fail("loading the same text twice failed", &e2, NULL);
        if (!lt_config_equal(cfg, once)) fail("loading the same text twice changed values", NULL, NULL);
        lt_config_free(once);
        check_dump_reloads(cfg);
    }
    free(before);
    lt_config_free(cfg);
    return st;
}

/* Path 2: lt_config_load_file on the exact bytes, through a memfd. */
static void fuzz_load_file(const uint8_t *data, size_t size, bool compare, lt_status st_string,
                           const lt_error *err_string) {
    int fd = memfd_create("fuzz_config", MFD_CLOEXEC);
    if (fd < 0) return; /* no memfd here: this path is skipped */
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) {
            close(fd);
            return;
        }
        done += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    lt_config *cfg = new_or_die();
    char *before = dump_or_die(cfg);
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_config_load_file(cfg, path, &err);
    if (st == LT_ERR_IO) { /* /proc not mounted: nothing to learn from this input here */
        free(before);
        lt_config_free(cfg);
        close(fd);
        return;
    }
    if (st != LT_OK) {
        check_error(st, &err, false, path);
        check_unchanged(cfg, before, "a failing file load changed the config");
    } else {
        check_getters(cfg);
        check_dump_reloads(cfg);
    }
    if (compare) {
        if (st != st_string) fail("load_file and load_string disagree on the status", &err, err_string->what);
        if (st != LT_OK) {
            if (strcmp(err.what, err_string->what) != 0 || strcmp(err.hint, err_string->hint) != 0)
                fail("load_file and load_string give different errors", &err, err_string->what);
            if (where_line(err.where) != where_line(err_string->where))
                fail("load_file and load_string give different lines", &err, err_string->where);
        }
    }
    free(before);
    lt_config_free(cfg);
    close(fd);
}

/* Path 3: every line as one --set assignment, applied in order on one config. */
static void fuzz_set_lines(const char *text) {
    lt_config *cfg = new_or_die();
    char *copy = strdup(text);
    if (copy == NULL) fail("out of memory in the harness", NULL, NULL);
    char *line = copy;
    bool any_ok = false;
    char *before = dump_or_die(cfg); /* the dump of cfg as it is now */
    for (int count = 0; line != NULL && count < 32; count++) {
        char *nl = strchr(line, '\n');
        if (nl != NULL) *nl = '\0';
        lt_error err;
        lt_error_clear(&err);
        lt_status st = lt_config_set(cfg, line, &err);
        if (st != LT_OK) {
            check_error(st, &err, true, "--set ");
            check_unchanged(cfg, before, "a failing --set changed the config");
        } else {
            any_ok = true;
            free(before);
            before = dump_or_die(cfg);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(before);
    if (any_ok) {
        check_getters(cfg);
        check_dump_reloads(cfg);
    }
    free(copy);
    lt_config_free(cfg);
}

/*
 * Path 4: the same lines through lt_config_set_value, the path of every value (env vars,
 * API callers): "SECTION.KEY=VALUE" split at the first '=' and the first '.', nothing
 * trimmed. Its values are "validated like a file value" and must survive the dump too.
 */
static void fuzz_set_value_lines(const char *text) {
    lt_config *cfg = new_or_die();
    char *copy = strdup(text);
    if (copy == NULL) fail("out of memory in the harness", NULL, NULL);
    char *line = copy;
    bool any_ok = false;
    char *before = dump_or_die(cfg);
    for (int count = 0; line != NULL && count < 32; count++) {
        char *nl = strchr(line, '\n');
        if (nl != NULL) *nl = '\0';
        char *eq = strchr(line, '=');
        char *dot = eq ? memchr(line, '.', (size_t)(eq - line)) : NULL;
        if (dot != NULL) {
            *eq = '\0';
            *dot = '\0';
            lt_error err;
            lt_error_clear(&err);
            lt_status st = lt_config_set_value(cfg, line, dot + 1, eq + 1, "fuzz origin", &err);
            if (st != LT_OK) {
                check_error(st, &err, false, "fuzz origin");
                check_unchanged(cfg, before, "a failing lt_config_set_value changed the config");
            } else {
                any_ok = true;
                free(before);
                before = dump_or_die(cfg);
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    free(before);
    if (any_ok) {
        check_getters(cfg);
        check_dump_reloads(cfg);
    }
    free(copy);
    lt_config_free(cfg);
}

/*
 * Only ONE byte order mark is skipped: a second U+FEFF at the start of line 1 is content,
 * so the text must load (or fail) exactly as when that second U+FEFF is replaced by another
 * non-blank character of the same length (U+200B).
 */
static void check_second_bom(const char *text, lt_status st_string) {
    static const char bom[] = "\xEF\xBB\xBF";
    if (strncmp(text, bom, 3) != 0 || strncmp(text + 3, bom, 3) != 0) return;
    char *v = strdup(text);
    if (v == NULL) fail("out of memory in the harness", NULL, NULL);
    memcpy(v + 3, "\xE2\x80\x8B", 3);
    lt_config *cfg = new_or_die();
    lt_error err;
    lt_status st = lt_config_load_string(cfg, v, FUZZ_NAME, &err);
    if ((st == LT_OK) != (st_string == LT_OK))
        fail("a second BOM on line 1 is skipped (it must count as content, like U+200B)", &err, NULL);
    lt_config_free(cfg);
    free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 64 * 1024) return 0; /* long inputs add nothing but time */
    char *text = malloc(size + 1);
    if (text == NULL) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    bool has_nul = memchr(data, '\0', size) != NULL;

    lt_error err_string;
    lt_status st_string = fuzz_load_string(text, &err_string);
    fuzz_load_file(data, size, !has_nul, st_string, &err_string);
    fuzz_set_lines(text);
    fuzz_set_value_lines(text);
    check_second_bom(text, st_string);

    free(text);
    return 0;
}
