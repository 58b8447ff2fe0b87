/*
 * tests/lib/test_config.c — unit tests for lib/config (cmocka).
 *
 * What is checked: the schema is well formed and every default is valid; defaults; loading
 * a file with every type; every kind of bad value, unknown section/key, duplicate key and
 * syntax error, with the exact WHAT, WHERE and HINT of the error; --set (overrides, bad
 * forms); origins; the dump's exact text, its determinism, and dump -> reload giving the
 * same values; the demo config etc/longtail.ini and the key table of docs/config.md
 * against the schema (found through $top_srcdir, which `make check` exports; skipped when
 * the source tree cannot be found).
 *
 * Expected texts are written out by hand from the contract in lib/config.h. Temporary
 * files are created with mkstemp under /tmp and removed by each test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/config.h"
#include "lib/strutil.h"

/* ------------------------------------------------------------------ helpers */

/* Write `len` bytes to a new temporary file; returns its malloc'd path. */
static char *write_temp_bytes(const char *content, size_t len) {
    char *path = strdup("/tmp/lt_test_config_XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, content + done, len - done);
        assert_true(n > 0);
        done += (size_t)n;
    }
    assert_int_equal(close(fd), 0);
    return path;
}

static char *write_temp(const char *content) { return write_temp_bytes(content, strlen(content)); }

static void remove_temp(char *path) {
    if (path == NULL) return;
    unlink(path);
    free(path);
}

/* "PATH:LINE" */
static const char *at(const char *path, int line) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s:%d", path, line);
    return buf;
}

static void check_error(const lt_error *e, lt_status got, lt_status status, const char *what,
                        const char *where, const char *hint, int line) {
    if (got != status || e->status != status)
        fail_msg("line %d: status %s (err %s), expected %s; what: %s", line, lt_status_name(got),
                 lt_status_name(e->status), lt_status_name(status), e->what);
    if (strcmp(e->what, what) != 0)
        fail_msg("line %d: what\n  got:      %s\n  expected: %s", line, e->what, what);
    if (strcmp(e->where, where) != 0)
        fail_msg("line %d: where\n  got:      %s\n  expected: %s", line, e->where, where);
    if (strcmp(e->hint, hint) != 0)
        fail_msg("line %d: hint\n  got:      %s\n  expected: %s", line, e->hint, hint);
}
/* `got` is evaluated first, so WHERE may use a path that the call itself sets */
#define CHECK_ERROR(e, got, status, what, where, hint)                                 \
    do {                                                                              \
        lt_status got_ = (got);                                                       \
        check_error((e), got_, (status), (what), (where), (hint), __LINE__);          \
    } while (0)

/* Load `content` from a temporary file into a fresh config; returns the status, the
 * error in *e and the path (caller removes) in *path_out. */
static lt_status load_text(lt_config *cfg, const char *content, lt_error *e, char **path_out) {
    char *path = write_temp(content);
    lt_error_clear(e);
    lt_status st = lt_config_load_file(cfg, path, e);
    *path_out = path;
    return st;
}

static int64_t get_int(const lt_config *cfg, const char *s, const char *k) {
    int64_t v = -424242;
    lt_error e;
    lt_error_clear(&e);
    if (lt_config_get_int(cfg, s, k, &v, &e) != LT_OK) fail_msg("%s.%s: %s", s, k, e.what);
    return v;
}

static uint64_t get_size(const lt_config *cfg, const char *s, const char *k) {
    uint64_t v = 424242;
    lt_error e;
    lt_error_clear(&e);
    if (lt_config_get_size(cfg, s, k, &v, &e) != LT_OK) fail_msg("%s.%s: %s", s, k, e.what);
    return v;
}

static double get_double(const lt_config *cfg, const char *s, const char *k) {
    double v = -4.2;
    lt_error e;
    lt_error_clear(&e);
    if (lt_config_get_double(cfg, s, k, &v, &e) != LT_OK) fail_msg("%s.%s: %s", s, k, e.what);
    return v;
}

static bool get_bool(const lt_config *cfg, const char *s, const char *k) {
    bool v = false;
    lt_error e;
    lt_error_clear(&e);
    if (lt_config_get_bool(cfg, s, k, &v, &e) != LT_OK) fail_msg("%s.%s: %s", s, k, e.what);
    return v;
}

/* A file of the source tree, via $top_srcdir or the usual build directories; NULL if
 * not found (malloc'd). */
static char *source_file(const char *rel) {
    const char *roots[] = {getenv("top_srcdir"), getenv("srcdir"), ".", "..", "../.."};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        if (roots[i] == NULL) continue;
        char buf[4096];
        snprintf(buf, sizeof buf, "%s/%s", roots[i], rel);
        if (access(buf, R_OK) == 0) return strdup(buf);
    }
    return NULL;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* ------------------------------------------------------------------ schema */

static bool is_lower_snake(const char *s) {
    if (!(s[0] >= 'a' && s[0] <= 'z')) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) return false;
    return s[strlen(s) - 1] != '_';
}

static void test_schema_well_formed(void **state) {
    (void)state;
    size_t nsec, n;
    const lt_config_section *secs = lt_config_sections(&nsec);
    const lt_config_key *keys = lt_config_schema(&n);
    static const char *expected_sections[] = {"run",  "data",  "source", "model", "parallel",
                                              "plan", "train", "slurm"};
    assert_int_equal(nsec, 8);
    for (size_t i = 0; i < nsec; i++) {
        assert_string_equal(secs[i].name, expected_sections[i]);
        assert_true(secs[i].help != NULL && secs[i].help[0] != '\0');
    }
    assert_true(n >= 40);

    size_t sec = 0;
    for (size_t i = 0; i < n; i++) {
        const lt_config_key *k = &keys[i];
        /* grouped by section, sections in order */
        while (sec < nsec && strcmp(secs[sec].name, k->section) != 0) sec++;
        if (sec == nsec) fail_msg("key %s.%s: section out of order or unknown", k->section, k->key);
        if (!is_lower_snake(k->key))
            fail_msg("key %s.%s is not lower_snake_case", k->section, k->key);
        if (k->help == NULL || k->help[0] == '\0')
            fail_msg("key %s.%s has no help", k->section, k->key);
        for (size_t j = 0; j < i; j++)
            if (strcmp(keys[j].section, k->section) == 0 && strcmp(keys[j].key, k->key) == 0)
                fail_msg("key %s.%s is listed twice", k->section, k->key);
        assert_ptr_equal(lt_config_find_key(k->section, k->key), k);
        /* choices only for enums, ranges only for numbers, and all of them valid */
        if (k->type == LT_CONFIG_ENUM) {
            assert_non_null(k->choices);
            assert_true(k->def != NULL);
        } else {
            assert_null(k->choices);
        }
        if (k->type != LT_CONFIG_INT && k->type != LT_CONFIG_SIZE && k->type != LT_CONFIG_DOUBLE) {
            assert_null(k->min);
            assert_null(k->max);
        }
        const char *bounds[] = {k->min, k->max};
        for (int b = 0; b < 2; b++) {
            if (bounds[b] == NULL) continue;
            int64_t iv;
            uint64_t uv;
            double dv;
            lt_status st = k->type == LT_CONFIG_INT    ? lt_parse_int64(bounds[b], &iv)
                           : k->type == LT_CONFIG_SIZE ? lt_parse_size(bounds[b], &uv)
                                                       : lt_parse_double(bounds[b], &dv);
            if (st != LT_OK) fail_msg("key %s.%s: bad bound '%s'", k->section, k->key, bounds[b]);
        }
    }
    /* every default validates: lt_config_new succeeds and holds each one as written */
    lt_config *cfg = lt_config_new();
    assert_non_null(cfg);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(keys[i].section, "source") == 0) continue; /* per [source.NAME]: test_named_sections */
        const char *v = lt_config_get_string(cfg, keys[i].section, keys[i].key);
        if (keys[i].def == NULL)
            assert_null(v);
        else
            assert_string_equal(v, keys[i].def);
    }
    lt_config_free(cfg);

    assert_null(lt_config_find_key("plan", "nokey"));
    assert_null(lt_config_find_key("nosection", "steps"));
    assert_null(lt_config_find_key(NULL, "steps"));
    assert_string_equal(lt_config_type_name(LT_CONFIG_STRING), "string");
    assert_string_equal(lt_config_type_name(LT_CONFIG_INT), "int");
    assert_string_equal(lt_config_type_name(LT_CONFIG_SIZE), "size");
    assert_string_equal(lt_config_type_name(LT_CONFIG_DOUBLE), "double");
    assert_string_equal(lt_config_type_name(LT_CONFIG_BOOL), "bool");
    assert_string_equal(lt_config_type_name(LT_CONFIG_ENUM), "enum");
}

/* The minimum keys of CONTRACTS.md exist with the right types. */
static void test_schema_contract_keys(void **state) {
    (void)state;
    static const struct {
        const char *section, *key;
        lt_config_type type;
    } need[] = {
        {"model", "preset", LT_CONFIG_STRING},   {"model", "layers", LT_CONFIG_INT},
        {"model", "hidden", LT_CONFIG_INT},      {"model", "heads", LT_CONFIG_INT},
        {"model", "kv_heads", LT_CONFIG_INT},    {"model", "ffn", LT_CONFIG_INT},
        {"model", "vocab", LT_CONFIG_INT},       {"parallel", "dp", LT_CONFIG_INT},
        {"parallel", "pp", LT_CONFIG_INT},       {"parallel", "tp", LT_CONFIG_INT},
        {"parallel", "max_cp", LT_CONFIG_INT},   {"plan", "strategy", LT_CONFIG_ENUM},
        {"plan", "global_batch", LT_CONFIG_INT}, {"plan", "context_len", LT_CONFIG_SIZE},
        {"plan", "hardware", LT_CONFIG_STRING},  {"plan", "mem", LT_CONFIG_SIZE},
        {"plan", "seed", LT_CONFIG_INT},         {"plan", "steps", LT_CONFIG_INT},
        {"run", "log_level", LT_CONFIG_ENUM},    {"data", "max_doc_bytes", LT_CONFIG_SIZE},
        {"train", "lr", LT_CONFIG_DOUBLE},       {"train", "backend", LT_CONFIG_ENUM},
        {"slurm", "requeue", LT_CONFIG_BOOL},    {"slurm", "max_concurrent", LT_CONFIG_INT},
        {"parallel", "zero1", LT_CONFIG_BOOL},   {"parallel", "shard", LT_CONFIG_ENUM},
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        const lt_config_key *k = lt_config_find_key(need[i].section, need[i].key);
        if (k == NULL) fail_msg("missing key %s.%s", need[i].section, need[i].key);
        assert_int_equal(k->type, need[i].type);
    }
    assert_string_equal(lt_config_find_key("plan", "strategy")->choices,
                        "megatron gpipe seq1f1b chunkflow infinipipe slimpack helixpipe auto");
    assert_string_equal(lt_config_find_key("data", "format")->choices, "auto wet jsonl wikixml parquet");
    assert_string_equal(lt_config_find_key("run", "log_level")->choices, "error warn info debug");
    assert_string_equal(lt_config_find_key("train", "backend")->choices, "cpu cuda");
}

/* ------------------------------------------------------------------ defaults and getters */

static void test_defaults(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    assert_non_null(cfg);
    assert_string_equal(lt_config_get_string(cfg, "run", "name"), "longtail");
    assert_string_equal(lt_config_get_string(cfg, "run", "log_level"), "info");
    assert_string_equal(lt_config_get_string(cfg, "plan", "strategy"), "slimpack");
    assert_string_equal(lt_config_get_string(cfg, "data", "encoding"), "cl100k_base");
    assert_string_equal(lt_config_get_string(cfg, "slurm", "mpi"), "pmix");
    assert_int_equal(get_int(cfg, "parallel", "dp"), 1);
    assert_int_equal(get_int(cfg, "plan", "seed"), 1234);
    assert_int_equal(get_size(cfg, "data", "max_doc_bytes"), 64 * 1024 * 1024);
    assert_true(get_double(cfg, "train", "lr") == 3e-4);
    assert_true(get_double(cfg, "train", "weight_decay") == 0.1);
    assert_true(get_bool(cfg, "slurm", "requeue"));
    assert_true(lt_config_is_set(cfg, "plan", "hardware"));
    assert_false(lt_config_is_set(cfg, "model", "layers"));
    assert_false(lt_config_is_set(cfg, "plan", "steps"));
    assert_string_equal(lt_config_origin(cfg, "plan", "seed"), "default");
    assert_string_equal(lt_config_origin(cfg, "model", "layers"), "default");
    lt_config_free(cfg);
    lt_config_free(NULL); /* NULL-safe */
}

static void test_getter_errors(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    assert_non_null(cfg);
    lt_error e;
    int64_t i = 5;
    uint64_t u = 5;
    double d = 5;
    bool b = true;

    lt_error_clear(&e);
    CHECK_ERROR(&e, lt_config_get_int(cfg, "model", "layers", &i, &e), LT_ERR_CONFIG,
                "no value for model.layers", "",
                "set layers in section [model] of the config, or pass --set model.layers=VALUE");
    assert_int_equal(i, 5);
    lt_error_clear(&e);
    CHECK_ERROR(
        &e, lt_config_get_size(cfg, "plan", "context_len", &u, &e), LT_ERR_CONFIG,
        "no value for plan.context_len", "",
        "set context_len in section [plan] of the config, or pass --set plan.context_len=VALUE");

    /* programming errors: not in the schema, or another type */
    lt_error_clear(&e);
    CHECK_ERROR(&e, lt_config_get_int(cfg, "plan", "nokey", &i, &e), LT_ERR_INTERNAL,
                "no config key plan.nokey", "", "");
    lt_error_clear(&e);
    CHECK_ERROR(&e, lt_config_get_int(cfg, "plan", "context_len", &i, &e), LT_ERR_INTERNAL,
                "config key plan.context_len is of type size, not int", "", "");
    lt_error_clear(&e);
    CHECK_ERROR(&e, lt_config_get_size(cfg, "parallel", "dp", &u, &e), LT_ERR_INTERNAL,
                "config key parallel.dp is of type int, not size", "", "");
    lt_error_clear(&e);
    CHECK_ERROR(&e, lt_config_get_double(cfg, "slurm", "requeue", &d, &e), LT_ERR_INTERNAL,
                "config key slurm.requeue is of type bool, not double", "", "");
    lt_error_clear(&e);
    CHECK_ERROR(&e, lt_config_get_bool(cfg, "train", "lr", &b, &e), LT_ERR_INTERNAL,
                "config key train.lr is of type double, not bool", "", "");
    lt_error_clear(&e);
    CHECK_ERROR(&e, lt_config_get_int(cfg, "plan", "strategy", &i, &e), LT_ERR_INTERNAL,
                "config key plan.strategy is of type enum, not int", "", "");
    assert_int_equal(i, 5);
    assert_int_equal(u, 5);
    assert_true(d == 5);
    assert_true(b);
    /* a NULL error is fine */
    assert_int_equal(lt_config_get_int(cfg, "plan", "nokey", &i, NULL), LT_ERR_INTERNAL);

    assert_null(lt_config_get_string(cfg, "plan", "nokey"));
    assert_null(lt_config_get_string(cfg, "nosection", "steps"));
    assert_false(lt_config_is_set(cfg, "plan", "nokey"));
    assert_null(lt_config_origin(cfg, "plan", "nokey"));
    lt_config_free(cfg);
}

/* ------------------------------------------------------------------ loading */

static void test_load_every_type(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    lt_error e;
    char *path;
    const char *text =
        "; a test config\n"                                       /* 1 */
        "# another comment\n"                                     /* 2 */
        "\n"                                                      /* 3 */
        "[run]\n"                                                 /* 4 */
        "name = my run   ; blanks inside a value are kept\n"      /* 5 */
        "[data]\n"                                                /* 6 */
        "input = /data/a/*.jsonl  /data/b/*.gz\n"                 /* 7 */
        "field = text # is not a comment\n"                       /* 8 */
        "max_doc_bytes = 1.5M\n"                                  /* 9 */
        "threads = 16\n"                                          /* 10 */
        "format = jsonl\n"                                        /* 11 */
        "[plan]\n"                                                /* 12 */
        "strategy = chunkflow\n"                                  /* 13 */
        "context_len = 256K\n"                                    /* 14 */
        "mem = 80g\n"                                             /* 15 */
        "seed = 0\n"                                              /* 16 */
        "[train]\n"                                               /* 17 */
        "lr = 1e-3\n"                                             /* 18 */
        "grad_clip = 0\n"                                         /* 19 */
        "[slurm]\n"                                               /* 20 */
        "requeue = no\n"                                          /* 21 */
        "time = 04:00:00\n"                                       /* 22 */
        "extra_sbatch = --constraint=h200 --qos=high\n"           /* 23 */
        "[plan]\n"                                                /* 24: a section again */
        "steps: 12\n"                                             /* 25: name: value */
        "    global_batch = 64\n"                                 /* 26: indented */
        "[model]\n"                                               /* 27 */
        "preset = llama-13b\n"                                    /* 28 */
        "layers = 40\n";                                          /* 29 */
    assert_int_equal(load_text(cfg, text, &e, &path), LT_OK);
    assert_string_equal(lt_config_get_string(cfg, "run", "name"), "my run");
    assert_string_equal(lt_config_get_string(cfg, "data", "input"),
                        "/data/a/*.jsonl  /data/b/*.gz");
    assert_string_equal(lt_config_get_string(cfg, "data", "field"), "text # is not a comment");
    assert_int_equal(get_size(cfg, "data", "max_doc_bytes"), 1572864);
    assert_string_equal(lt_config_get_string(cfg, "data", "max_doc_bytes"), "1.5M");
    assert_int_equal(get_int(cfg, "data", "threads"), 16);
    assert_string_equal(lt_config_get_string(cfg, "data", "format"), "jsonl");
    assert_string_equal(lt_config_get_string(cfg, "plan", "strategy"), "chunkflow");
    assert_int_equal(get_size(cfg, "plan", "context_len"), 262144);
    assert_int_equal(get_size(cfg, "plan", "mem"), UINT64_C(85899345920));
    assert_int_equal(get_int(cfg, "plan", "seed"), 0);
    assert_true(get_double(cfg, "train", "lr") == 1e-3);
    assert_true(get_double(cfg, "train", "grad_clip") == 0.0);
    assert_false(get_bool(cfg, "slurm", "requeue"));
    assert_string_equal(lt_config_get_string(cfg, "slurm", "time"), "04:00:00");
    assert_string_equal(lt_config_get_string(cfg, "slurm", "extra_sbatch"),
                        "--constraint=h200 --qos=high");
    assert_int_equal(get_int(cfg, "plan", "steps"), 12);
    assert_int_equal(get_int(cfg, "plan", "global_batch"), 64);
    assert_string_equal(lt_config_get_string(cfg, "model", "preset"), "llama-13b");
    assert_int_equal(get_int(cfg, "model", "layers"), 40);
    /* untouched keys keep their defaults */
    assert_string_equal(lt_config_get_string(cfg, "plan", "hardware"), "h200");
    assert_int_equal(get_int(cfg, "parallel", "pp"), 1);
    /* origins */
    assert_string_equal(lt_config_origin(cfg, "run", "name"), at(path, 5));
    assert_string_equal(lt_config_origin(cfg, "plan", "context_len"), at(path, 14));
    assert_string_equal(lt_config_origin(cfg, "plan", "steps"), at(path, 25));
    assert_string_equal(lt_config_origin(cfg, "plan", "global_batch"), at(path, 26));
    assert_string_equal(lt_config_origin(cfg, "model", "layers"), at(path, 29));
    assert_string_equal(lt_config_origin(cfg, "plan", "hardware"), "default");
    remove_temp(path);
    lt_config_free(cfg);
}

static void test_load_crlf_bom_tabs(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    lt_error e;
    char *path;
    assert_int_equal(load_text(cfg, "\xEF\xBB\xBF[plan]\r\n  steps = 3\r\n\tseed=7\r\n\r\n"
                                    "mem = 2T ; a comment\r\n",
                               &e, &path),
                     LT_OK);
    assert_int_equal(get_int(cfg, "plan", "steps"), 3);
    assert_int_equal(get_int(cfg, "plan", "seed"), 7);
    assert_int_equal(get_size(cfg, "plan", "mem"), UINT64_C(2199023255552));
    assert_string_equal(lt_config_get_string(cfg, "plan", "mem"), "2T");
    assert_string_equal(lt_config_origin(cfg, "plan", "steps"), at(path, 2));
    assert_string_equal(lt_config_origin(cfg, "plan", "seed"), at(path, 3));
    assert_string_equal(lt_config_origin(cfg, "plan", "mem"), at(path, 5));
    remove_temp(path);
    lt_config_free(cfg);
}

/* One bad value per case, always on line 2 under the section header on line 1. */
static void test_bad_values(void **state) {
    (void)state;
    static const char size_hint[] =
        "sizes are integers with an optional K, M, G or T suffix (powers of 1024)";
    static const char int_hint[] = "integers are plain decimal numbers without a suffix, e.g. 8";
    static const char num_hint[] = "numbers are decimal, e.g. 0.1 or 3e-4";
    static const struct {
        const char *text, *what, *hint;
    } cases[] = {
        {"[parallel]\ndp = eight\n", "invalid integer 'eight' for parallel.dp", int_hint},
        {"[parallel]\ndp = 8K\n", "invalid integer '8K' for parallel.dp",
         "parallel.dp is a plain integer: write it without a K, M, G or T suffix"},
        {"[parallel]\ndp = 1.0\n", "invalid integer '1.0' for parallel.dp", int_hint},
        {"[plan]\nseed = 9223372036854775808\n",
         "invalid integer '9223372036854775808' for plan.seed: out of range",
         "integers are between -9223372036854775808 and 9223372036854775807"},
        {"[parallel]\ndp = 0\n", "invalid integer '0' for parallel.dp: must be at least 1",
         "parallel.dp: data-parallel ranks"},
        {"[plan]\nseed = -1\n", "invalid integer '-1' for plan.seed: must be at least 0",
         "plan.seed: random seed of batch sampling"},
        {"[plan]\nmem = eighty\n", "invalid size 'eighty' for plan.mem", size_hint},
        {"[plan]\nmem = 80GB\n", "invalid size '80GB' for plan.mem", size_hint},
        {"[plan]\nmem = -1G\n", "invalid size '-1G' for plan.mem", size_hint},
        {"[plan]\ncontext_len = 1.3K\n",
         "invalid size '1.3K' for plan.context_len: not a whole number", size_hint},
        {"[plan]\ncontext_len = 99999999999T\n",
         "invalid size '99999999999T' for plan.context_len: too large",
         "sizes are at most 2^63 - 1 (just under 8388608T)"},
        {"[plan]\ncontext_len = 0\n", "invalid size '0' for plan.context_len: must be at least 1",
         "plan.context_len: tokens per sample; longer documents are truncated to this"},
        {"[train]\nlr = fast\n", "invalid number 'fast' for train.lr", num_hint},
        {"[train]\nlr = inf\n", "invalid number 'inf' for train.lr", num_hint},
        {"[train]\nlr = 1e999\n", "invalid number '1e999' for train.lr: out of range", num_hint},
        {"[train]\nlr = -0.1\n", "invalid number '-0.1' for train.lr: must be at least 0",
         "train.lr: peak learning rate"},
        {"[slurm]\nrequeue = maybe\n", "invalid boolean 'maybe' for slurm.requeue",
         "booleans are true/false, yes/no, on/off or 1/0"},
        {"[plan]\nstrategy = slimpak\n", "invalid choice 'slimpak' for plan.strategy",
         "did you mean 'slimpack'? choices: megatron gpipe seq1f1b chunkflow infinipipe slimpack "
         "helixpipe auto"},
        {"[plan]\nstrategy = Megatron\n", "invalid choice 'Megatron' for plan.strategy",
         "did you mean 'megatron'? choices: megatron gpipe seq1f1b chunkflow infinipipe slimpack "
         "helixpipe auto"},
        {"[plan]\nstrategy = zero-bubble\n", "invalid choice 'zero-bubble' for plan.strategy",
         "choices: megatron gpipe seq1f1b chunkflow infinipipe slimpack helixpipe auto"},
        {"[run]\nlog_level = warning\n", "invalid choice 'warning' for run.log_level",
         "choices: error warn info debug"},
        {"[run]\nname = a\x01z\n", "invalid value for run.name: it contains a control character",
         "values are one line of text"},
        {"[plan]\nseed =\n", "empty value for plan.seed",
         "plan.seed always has a value (default 1234); leave the key out to use the default"},
        {"[plan]\nstrategy = ; nothing\n", "empty value for plan.strategy",
         "plan.strategy always has a value (default slimpack); leave the key out to use the "
         "default"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lt_config *cfg = lt_config_new();
        lt_error e;
        char *path;
        lt_status st = load_text(cfg, cases[i].text, &e, &path);
        check_error(&e, st, LT_ERR_CONFIG, cases[i].what, at(path, 2), cases[i].hint, (int)i);
        remove_temp(path);
        lt_config_free(cfg);
    }
}

static void test_long_value_line_and_nul(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    lt_error e;
    char *path;
    /* a value longer than 2048 bytes on a line that is still allowed */
    char *text = malloc(8200);
    assert_non_null(text);
    strcpy(text, "[data]\ninput = ");
    memset(text + strlen(text), 'x', 2049);
    strcpy(text + 15 + 2049, "\n");
    CHECK_ERROR(&e, load_text(cfg, text, &e, &path), LT_ERR_CONFIG,
                "value for data.input is too long (2049 bytes; at most 2048)", at(path, 2), "");
    remove_temp(path);
    /* exactly 2048 is fine */
    strcpy(text + 15 + 2048, "\n");
    assert_int_equal(load_text(cfg, text, &e, &path), LT_OK);
    assert_int_equal(strlen(lt_config_get_string(cfg, "data", "input")), 2048);
    remove_temp(path);
    /* a line over 4000 bytes: "input = " + 4001 */
    strcpy(text, "[data]\ninput = ");
    memset(text + 15, 'y', 4001);
    strcpy(text + 15 + 4001, "\n");
    CHECK_ERROR(&e, load_text(cfg, text, &e, &path), LT_ERR_CONFIG,
                "line is too long (4009 bytes; at most 4000)", at(path, 2), "");
    remove_temp(path);
    free(text);
    /* still the 2048-byte value: failed loads change nothing */
    assert_int_equal(strlen(lt_config_get_string(cfg, "data", "input")), 2048);

    /* a NUL byte */
    static const char nul[] = "[plan]\nsteps = 1\0\n";
    path = write_temp_bytes(nul, sizeof nul - 1);
    lt_error_clear(&e);
    CHECK_ERROR(&e, lt_config_load_file(cfg, path, &e), LT_ERR_CONFIG, "line contains a NUL byte",
                at(path, 2), "a config is a text file");
    remove_temp(path);
    lt_config_free(cfg);
}

static void test_unknown_section(void **state) {
    (void)state;
    static const char all[] = "sections: [run] [data] [source.NAME] [model] [parallel] [plan] [train] [slurm]";
    static const struct {
        const char *text, *what, *hint;
        int line;
    } cases[] = {
        {"[plna]\nsteps = 1\n", "unknown section [plna]",
         "did you mean [plan]? sections: [run] [data] [source.NAME] [model] [parallel] [plan] [train] [slurm]",
         1},
        /* an unknown section without keys is still an error */
        {"[run]\nname = x\n\n[plna]\n", "unknown section [plna]",
         "did you mean [plan]? sections: [run] [data] [source.NAME] [model] [parallel] [plan] [train] [slurm]",
         4},
        {"[Plan]\n", "unknown section [Plan]",
         "did you mean [plan]? sections: [run] [data] [source.NAME] [model] [parallel] [plan] [train] [slurm]",
         1},
        {"; x\n[zzz]\nsteps = 1\n", "unknown section [zzz]", all, 2},
        {"[]\n", "unknown section []", all, 1},
        {"[ plan ]\n", "unknown section [ plan ]",
         "did you mean [plan]? sections: [run] [data] [source.NAME] [model] [parallel] [plan] [train] [slurm]",
         1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lt_config *cfg = lt_config_new();
        lt_error e;
        char *path;
        lt_status st = load_text(cfg, cases[i].text, &e, &path);
        check_error(&e, st, LT_ERR_CONFIG, cases[i].what, at(path, cases[i].line), cases[i].hint,
                    (int)i);
        remove_temp(path);
        lt_config_free(cfg);
    }
}

static void test_unknown_key(void **state) {
    (void)state;
    static const struct {
        const char *text, *what, *hint;
    } cases[] = {
        {"[plan]\ncontxt_len = 4K\n", "unknown key 'contxt_len' in section [plan]",
         "did you mean 'context_len'?"},
        {"[plan]\nseeds = 1\n", "unknown key 'seeds' in section [plan]", "did you mean 'seed'?"},
        {"[slurm]\nnode = 2\n", "unknown key 'node' in section [slurm]", "did you mean 'nodes'?"},
        /* a key of another section: suggested with its section */
        {"[run]\npartition = gpu\n", "unknown key 'partition' in section [run]",
         "did you mean 'slurm.partition'?"},
        {"[plan]\ndp = 8\n", "unknown key 'dp' in section [plan]", "did you mean 'parallel.dp'?"},
        {"[data]\ncontext_length = 4K\n", "unknown key 'context_length' in section [data]",
         "did you mean 'plan.context_len'?"},
        /* nothing close: the keys of the section */
        {"[plan]\nzzzzzz = 1\n", "unknown key 'zzzzzz' in section [plan]",
         "keys of [plan]: strategy global_batch global_batch_tokens context_len hardware mem seed steps sample_policy chunk_size chunkflow_k seq1f1b_slices infinipipe_slices micropacks dp_merge_margin milp_time_limit milp_gap milp_max_nodes mlp_chunk"},
        {"[parallel]\nx = 1\n", "unknown key 'x' in section [parallel]",
         "keys of [parallel]: dp pp tp max_cp shard zero1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lt_config *cfg = lt_config_new();
        lt_error e;
        char *path;
        lt_status st = load_text(cfg, cases[i].text, &e, &path);
        check_error(&e, st, LT_ERR_CONFIG, cases[i].what, at(path, 2), cases[i].hint, (int)i);
        remove_temp(path);
        lt_config_free(cfg);
    }
}

static void test_key_outside_section(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    lt_error e;
    char *path;
    CHECK_ERROR(&e, load_text(cfg, "steps = 3\n[plan]\n", &e, &path), LT_ERR_CONFIG,
                "key 'steps' is outside any section", at(path, 1), "put it under [plan]");
    remove_temp(path);
    CHECK_ERROR(&e, load_text(cfg, "; c\nfoo = 1\n", &e, &path), LT_ERR_CONFIG,
                "key 'foo' is outside any section", at(path, 2),
                "start with a section header such as [run]");
    remove_temp(path);
    lt_config_free(cfg);
}

static void test_duplicate_key(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    lt_error e;
    char *path;
    CHECK_ERROR(
        &e,
        load_text(cfg, "[plan]\nsteps = 1\n; c\n[run]\nname = x\n[plan]\nsteps = 2\n", &e, &path),
        LT_ERR_CONFIG, "duplicate key 'steps' in section [plan], first given at line 2",
        at(path, 7), "give each key once per file; --set plan.steps=VALUE overrides it");
    remove_temp(path);
    assert_false(lt_config_is_set(cfg, "plan", "steps"));
    assert_string_equal(lt_config_get_string(cfg, "run", "name"), "longtail");

    /* a repeated section is fine */
    assert_int_equal(
        load_text(cfg, "[plan]\nsteps = 1\n[run]\nname = x\n[plan]\nseed = 2\n", &e, &path), LT_OK);
    remove_temp(path);
    assert_int_equal(get_int(cfg, "plan", "steps"), 1);
    assert_int_equal(get_int(cfg, "plan", "seed"), 2);

    /* the same key in a second file: the later file wins */
    char *path2;
    assert_int_equal(load_text(cfg, "[plan]\nsteps = 5\n", &e, &path2), LT_OK);
    assert_int_equal(get_int(cfg, "plan", "steps"), 5);
    assert_string_equal(lt_config_origin(cfg, "plan", "steps"), at(path2, 2));
    assert_int_equal(get_int(cfg, "plan", "seed"), 2);
    remove_temp(path2);
    lt_config_free(cfg);
}

static void test_syntax_errors(void **state) {
    (void)state;
    static const char hint[] =
        "a line is a [section] header, key = value, or a comment starting with ; or #";
    lt_config *cfg = lt_config_new();
    lt_error e;
    char *path;
    CHECK_ERROR(
        &e, load_text(cfg, "[plan]\n; comment\n\nsteps = 1\ncontextlen 4K\nseed = 3\n", &e, &path),
        LT_ERR_CONFIG, "syntax error: 'contextlen 4K' is not a 'key = value' line", at(path, 5),
        hint);
    remove_temp(path);
    CHECK_ERROR(&e, load_text(cfg, "[run]\nname = x\n[plan\nsteps = 1\n", &e, &path), LT_ERR_CONFIG,
                "syntax error: '[plan' has no closing ']'", at(path, 3), hint);
    remove_temp(path);
    CHECK_ERROR(&e, load_text(cfg, "[plan]\n= 5\n", &e, &path), LT_ERR_CONFIG,
                "missing key name before '='", at(path, 2), hint);
    remove_temp(path);
    /* nothing of the failed loads was applied */
    assert_false(lt_config_is_set(cfg, "plan", "steps"));
    assert_string_equal(lt_config_get_string(cfg, "run", "name"), "longtail");
    lt_config_free(cfg);
}

static void test_missing_file_and_directory(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    lt_error e;
    char *dir = strdup("/tmp/lt_test_config_dir_XXXXXX");
    assert_non_null(mkdtemp(dir));
    char missing[512];
    snprintf(missing, sizeof missing, "%s/none.ini", dir);
    lt_error_clear(&e);
    CHECK_ERROR(&e, lt_config_load_file(cfg, missing, &e), LT_ERR_IO,
                "cannot open config file: No such file or directory", missing,
                "check the path given to --config");
    lt_error_clear(&e);
    CHECK_ERROR(&e, lt_config_load_file(cfg, dir, &e), LT_ERR_IO,
                "cannot read config file: Is a directory", dir, "");
    assert_int_equal(rmdir(dir), 0);
    free(dir);
    lt_config_free(cfg);
}

static void test_failed_load_changes_nothing(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    lt_error e;
    char *path;
    assert_int_equal(load_text(cfg, "[plan]\nsteps = 5\n", &e, &path), LT_OK);
    remove_temp(path);
    char *before = lt_config_dump_string(cfg);
    assert_non_null(before);
    CHECK_ERROR(&e, load_text(cfg, "[plan]\nsteps = 6\nseed = 1\nmem = lots\n", &e, &path),
                LT_ERR_CONFIG, "invalid size 'lots' for plan.mem", at(path, 4),
                "sizes are integers with an optional K, M, G or T suffix (powers of 1024)");
    remove_temp(path);
    char *after = lt_config_dump_string(cfg);
    assert_non_null(after);
    assert_string_equal(before, after);
    assert_int_equal(get_int(cfg, "plan", "steps"), 5);
    free(before);
    free(after);
    lt_config_free(cfg);
}

static void test_load_string(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    lt_error e;
    lt_error_clear(&e);
    assert_int_equal(
        lt_config_load_string(cfg, "[plan]\nsteps = 4\n\n[run]\nname = s", "run 3 config", &e),
        LT_OK);
    assert_int_equal(get_int(cfg, "plan", "steps"), 4);
    assert_string_equal(lt_config_get_string(cfg, "run", "name"), "s"); /* last line without \n */
    assert_string_equal(lt_config_origin(cfg, "run", "name"), "run 3 config:5");
    lt_error_clear(&e);
    CHECK_ERROR(&e, lt_config_load_string(cfg, "[plan]\nsteps = x\n", NULL, &e), LT_ERR_CONFIG,
                "invalid integer 'x' for plan.steps", "<string>:2",
                "integers are plain decimal numbers without a suffix, e.g. 8");
    assert_int_equal(lt_config_load_string(cfg, "", "empty", &e), LT_OK);
    assert_int_equal(get_int(cfg, "plan", "steps"), 4);
    lt_config_free(cfg);
}

/* ------------------------------------------------------------------ --set */

static void test_set_overrides_file(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    lt_error e;
    char *path;
    assert_int_equal(
        load_text(cfg, "[plan]\nsteps = 10\ncontext_len = 4K\n[model]\npreset = tiny\n", &e, &path),
        LT_OK);
    lt_error_clear(&e);
    assert_int_equal(lt_config_set(cfg, "plan.steps=20", &e), LT_OK);
    assert_int_equal(get_int(cfg, "plan", "steps"), 20);
    assert_string_equal(lt_config_origin(cfg, "plan", "steps"), "--set");
    assert_string_equal(lt_config_origin(cfg, "plan", "context_len"), at(path, 3));
    /* blanks around the parts are dropped */
    assert_int_equal(lt_config_set(cfg, " plan . steps = 30 ", &e), LT_OK);
    assert_int_equal(get_int(cfg, "plan", "steps"), 30);
    /* the value may contain '=' */
    assert_int_equal(lt_config_set(cfg, "slurm.extra_sbatch=--constraint=h200 --qos=high", &e),
                     LT_OK);
    assert_string_equal(lt_config_get_string(cfg, "slurm", "extra_sbatch"),
                        "--constraint=h200 --qos=high");
    /* sizes with suffixes, and the later --set wins */
    assert_int_equal(lt_config_set(cfg, "plan.context_len=256K", &e), LT_OK);
    assert_int_equal(lt_config_set(cfg, "plan.context_len=1.5M", &e), LT_OK);
    assert_int_equal(get_size(cfg, "plan", "context_len"), 1572864);
    assert_string_equal(lt_config_get_string(cfg, "plan", "context_len"), "1.5M");
    /* an empty value clears a key without a default */
    assert_int_equal(lt_config_set(cfg, "model.preset=", &e), LT_OK);
    assert_false(lt_config_is_set(cfg, "model", "preset"));
    assert_null(lt_config_get_string(cfg, "model", "preset"));
    assert_string_equal(lt_config_origin(cfg, "model", "preset"), "--set");
    /* booleans in every spelling */
    assert_int_equal(lt_config_set(cfg, "slurm.requeue=off", &e), LT_OK);
    assert_false(get_bool(cfg, "slurm", "requeue"));
    assert_int_equal(lt_config_set(cfg, "slurm.requeue=YES", &e), LT_OK);
    assert_true(get_bool(cfg, "slurm", "requeue"));
    remove_temp(path);
    lt_config_free(cfg);
}

static void test_set_bad_forms(void **state) {
    (void)state;
    static const char size_hint[] =
        "sizes are integers with an optional K, M, G or T suffix (powers of 1024)";
    static const struct {
        const char *assignment;
        lt_status status;
        const char *what, *where, *hint;
    } cases[] = {
        {"plan.context_len", LT_ERR_USAGE,
         "--set expects section.key=value, got 'plan.context_len'", "--set plan.context_len",
         "write --set plan.context_len=VALUE"},
        {"nosection=1", LT_ERR_USAGE, "--set expects section.key=value, got 'nosection=1'",
         "--set nosection=1", "name the key with its section, e.g. --set plan.steps=100"},
        {"steps=100", LT_ERR_USAGE, "--set expects section.key=value, got 'steps=100'",
         "--set steps=100", "did you mean --set plan.steps=100?"},
        {"plan.=5", LT_ERR_USAGE, "--set expects section.key=value, got 'plan.=5'", "--set plan.=5",
         "name the key with its section, e.g. --set plan.steps=100"},
        {".steps=5", LT_ERR_USAGE, "--set expects section.key=value, got '.steps=5'",
         "--set .steps=5", "name the key with its section, e.g. --set plan.steps=100"},
        {"", LT_ERR_USAGE, "--set expects section.key=value, got ''", "--set ",
         "for example --set plan.steps=100"},
        {"steps", LT_ERR_USAGE, "--set expects section.key=value, got 'steps'", "--set steps",
         "for example --set plan.steps=100"},
        {"plan.contxt_len=8K", LT_ERR_CONFIG, "unknown key 'contxt_len' in section [plan]",
         "--set plan.contxt_len=8K", "did you mean 'context_len'?"},
        {"plan.nodes=2", LT_ERR_CONFIG, "unknown key 'nodes' in section [plan]",
         "--set plan.nodes=2", "did you mean 'slurm.nodes'?"},
        {"plna.steps=1", LT_ERR_CONFIG, "unknown section [plna]", "--set plna.steps=1",
         "did you mean [plan]? sections: [run] [data] [source.NAME] [model] [parallel] [plan] [train] [slurm]"},
        {"plan.mem=eighty", LT_ERR_CONFIG, "invalid size 'eighty' for plan.mem",
         "--set plan.mem=eighty", size_hint},
        {"plan.context_len=99999999999T", LT_ERR_CONFIG,
         "invalid size '99999999999T' for plan.context_len: too large",
         "--set plan.context_len=99999999999T", "sizes are at most 2^63 - 1 (just under 8388608T)"},
        {"plan.seed=", LT_ERR_CONFIG, "empty value for plan.seed", "--set plan.seed=",
         "plan.seed always has a value (default 1234); leave the key out to use the default"},
        {"data.input=a ;b", LT_ERR_CONFIG,
         "invalid value 'a ;b' for data.input: a ';' at the start or after a blank starts a "
         "comment",
         "--set data.input=a ;b", "remove the blank before the ';'"},
        {"data.input=;b", LT_ERR_CONFIG,
         "invalid value ';b' for data.input: a ';' at the start or after a blank starts a comment",
         "--set data.input=;b", "remove the blank before the ';'"},
        {"plan.strategy=fast", LT_ERR_CONFIG, "invalid choice 'fast' for plan.strategy",
         "--set plan.strategy=fast",
         "choices: megatron gpipe seq1f1b chunkflow infinipipe slimpack helixpipe auto"},
    };
    lt_config *cfg = lt_config_new();
    char *before = lt_config_dump_string(cfg);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lt_error e;
        lt_error_clear(&e);
        lt_status st = lt_config_set(cfg, cases[i].assignment, &e);
        check_error(&e, st, cases[i].status, cases[i].what, cases[i].where, cases[i].hint, (int)i);
    }
    /* nothing was changed by the failures */
    char *after = lt_config_dump_string(cfg);
    assert_non_null(before);
    assert_non_null(after);
    assert_string_equal(before, after);
    free(before);
    free(after);
    lt_config_free(cfg);
}

/* [source.NAME]: instances of the template section, each with its own keys, in files and
 * --set, dumped as their own sections and loaded back equal; a plain [source], a bad name
 * and an unknown key are errors. */
static void test_named_sections(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    assert_non_null(cfg);
    assert_int_equal(lt_config_n_named(cfg, "source"), 0);
    lt_error e;
    char *path;
    lt_status st = load_text(cfg,
                             "[source.web]\ninput = cc/*.wet.gz\nweight = 67\n\n[source.code]\n"
                             "input = gh.jsonl\nfield = code\nweight = 4.5\n[source.web]\nformat = wet\n",
                             &e, &path);
    remove_temp(path);
    assert_int_equal(st, LT_OK);
    assert_int_equal(lt_config_n_named(cfg, "source"), 2);
    assert_string_equal(lt_config_named(cfg, "source", 0), "web");
    assert_string_equal(lt_config_named(cfg, "source", 1), "code");
    assert_null(lt_config_named(cfg, "source", 2));
    assert_int_equal(lt_config_n_named(cfg, "data"), 0);
    assert_string_equal(lt_config_get_string(cfg, "source.web", "input"), "cc/*.wet.gz");
    assert_string_equal(lt_config_get_string(cfg, "source.web", "format"), "wet");
    assert_string_equal(lt_config_get_string(cfg, "source.code", "format"), "auto"); /* default */
    assert_null(lt_config_get_string(cfg, "source.web", "field"));                 /* unset */
    double w = 0;
    assert_int_equal(lt_config_get_double(cfg, "source.code", "weight", &w, NULL), LT_OK);
    assert_true(w == 4.5);
    assert_int_equal(lt_config_set(cfg, "source.code.weight=9", &e), LT_OK);
    assert_int_equal(lt_config_get_double(cfg, "source.code", "weight", &w, NULL), LT_OK);
    assert_true(w == 9);
    assert_string_equal(lt_config_origin(cfg, "source.code", "weight"), "--set");
    assert_int_equal(lt_config_set(cfg, "source.wiki.input=wiki.xml.bz2", &e), LT_OK); /* a new one */
    assert_int_equal(lt_config_n_named(cfg, "source"), 3);
    assert_int_equal(lt_config_get_double(cfg, "source.wiki", "weight", &w, NULL), LT_OK);
    assert_true(w == 1); /* the template's default */

    /* dump and load back: equal, and a different weight is not */
    char *text = lt_config_dump_string(cfg);
    assert_non_null(strstr(text, "\n[source.code]\ninput = gh.jsonl"));
    lt_config *back = lt_config_new();
    assert_int_equal(lt_config_load_string(back, text, "dump", &e), LT_OK);
    assert_true(lt_config_equal(cfg, back));
    assert_int_equal(lt_config_set(back, "source.wiki.weight=2", &e), LT_OK);
    assert_false(lt_config_equal(cfg, back));
    free(text);
    lt_config_free(back);

    /* errors; a failed load leaves the instances as they were */
    static const struct {
        const char *text, *what;
    } bad[] = {
        {"[source]\ninput = x\n", "section [source] needs a name: [source.NAME]"},
        {"[source.Web]\ninput = x\n", "section [source.Web] needs a name: [source.NAME]"},
        {"[source.]\ninput = x\n", "section [source.] needs a name: [source.NAME]"},
        {"[source.new]\ninput = x\nwieght = 2\n", "unknown key 'wieght' in section [source]"},
        {"[source.new]\nweight = -1\n", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st = load_text(cfg, bad[i].text, &e, &path);
        remove_temp(path);
        assert_int_equal(st, LT_ERR_CONFIG);
        if (bad[i].what && strcmp(e.what, bad[i].what) != 0) fail_msg("case %zu: what = '%s'", i, e.what);
        assert_int_equal(lt_config_n_named(cfg, "source"), 3);
    }
    assert_int_equal(lt_config_set(cfg, "source.new.wieght=2", &e), LT_ERR_CONFIG);
    lt_config_free(cfg);
}

static void test_set_value_origin(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    lt_error e;
    lt_error_clear(&e);
    assert_int_equal(lt_config_set_value(cfg, "plan", "steps", "7", "env LONGTAIL_STEPS", &e),
                     LT_OK);
    assert_int_equal(get_int(cfg, "plan", "steps"), 7);
    assert_string_equal(lt_config_origin(cfg, "plan", "steps"), "env LONGTAIL_STEPS");
    assert_int_equal(lt_config_set_value(cfg, "plan", "seed", "8", NULL, &e), LT_OK);
    assert_string_equal(lt_config_origin(cfg, "plan", "seed"), "api");
    CHECK_ERROR(&e, lt_config_set_value(cfg, "parallel", "pp", "two", "env LONGTAIL_PP", &e),
                LT_ERR_CONFIG, "invalid integer 'two' for parallel.pp", "env LONGTAIL_PP",
                "integers are plain decimal numbers without a suffix, e.g. 8");
    lt_error_clear(&e);
    CHECK_ERROR(&e, lt_config_set_value(cfg, "run", "name", "a\nb", "api call", &e), LT_ERR_CONFIG,
                "invalid value for run.name: it contains a control character", "api call",
                "values are one line of text");
    lt_error_clear(&e);
    CHECK_ERROR(&e, lt_config_set_value(cfg, "plan", "stepz", "1", "x", &e), LT_ERR_CONFIG,
                "unknown key 'stepz' in section [plan]", "x", "did you mean 'steps'?");
    assert_int_equal(get_int(cfg, "parallel", "pp"), 1);
    lt_config_free(cfg);
}

/* ------------------------------------------------------------------ dump */

static lt_config *dump_fixture(void) {
    lt_config *cfg = lt_config_new();
    assert_non_null(cfg);
    lt_error e;
    lt_error_clear(&e);
    assert_int_equal(
        lt_config_load_string(
            cfg, "[plan]\nstrategy = megatron\nsteps = 10\n[slurm]\nrequeue = no\n", "x.ini", &e),
        LT_OK);
    assert_int_equal(lt_config_set(cfg, "plan.context_len=4K", &e), LT_OK);
    assert_int_equal(
        lt_config_set(cfg, "data.input=/data/cc/*.warc.wet.gz /data/github/*.jsonl.zst", &e),
        LT_OK);
    assert_int_equal(lt_config_set_value(cfg, "model", "preset", "tiny", "env LONGTAIL_PRESET", &e),
                     LT_OK);
    return cfg;
}

/* Written out by hand from the format in lib/config.h: schema order, "key = value" padded
 * to column 40 (two blanks when longer) before the origin comment, "; key =" when unset. */
static const char expected_dump[] =
        "; longtail configuration: the effective values, loadable with --config\n"
        "; (each value's origin follows it; \"; key =\" marks a key without a value)\n"
        "\n"
        "[run]\n"
        "name = longtail                         ; default\n"
        "work_dir = runs                         ; default\n"
        "log_level = info                        ; default\n"
        "\n"
        "[data]\n"
        "input = /data/cc/*.warc.wet.gz /data/github/*.jsonl.zst  ; --set\n"
        "format = auto                           ; default\n"
        "field = text                            ; default\n"
        "encoding = cl100k_base                  ; default\n"
        "; tokenizer =\n"
        "; vocab_dir =\n"
        "; out_dir =\n"
        "; num_tasks =\n"
        "threads = 0                             ; default\n"
        "max_doc_bytes = 64M                     ; default\n"
        "eos = none                              ; default\n"
        "frame_size = 1M                         ; default\n"
        "zstd_level = 1                          ; default\n"
        "allow_damaged = false                   ; default\n"
        "max_skipped_share = 0.01                ; default\n"
        "holdout = 0                             ; default\n"
        "\n"
        "; [source.NAME]: none\n"
        "\n"
        "[model]\n"
        "preset = tiny                           ; env LONGTAIL_PRESET\n"
        "; layers =\n"
        "; hidden =\n"
        "; heads =\n"
        "; kv_heads =\n"
        "; ffn =\n"
        "; vocab =\n"
        "rope_theta = 10000                      ; default\n"
        "norm_eps = 1e-5                         ; default\n"
        "tie_embeddings = false                  ; default\n"
        "family = llama                          ; default\n"
        "rope_scaling = none                     ; default\n"
        "rope_factor = 8                         ; default\n"
        "rope_low_freq_factor = 1                ; default\n"
        "rope_high_freq_factor = 4               ; default\n"
        "rope_original_max_pos = 8192            ; default\n"
        "\n"
        "[parallel]\n"
        "dp = 1                                  ; default\n"
        "pp = 1                                  ; default\n"
        "tp = 1                                  ; default\n"
        "max_cp = 1                              ; default\n"
        "shard = none                            ; default\n"
        "zero1 = false                           ; default\n"
        "\n"
        "[plan]\n"
        "strategy = megatron                     ; from x.ini:2\n"
        "; global_batch =\n"
        "; global_batch_tokens =\n"
        "context_len = 4K                        ; --set\n"
        "hardware = h200                         ; default\n"
        "; mem =\n"
        "seed = 1234                             ; default\n"
        "steps = 10                              ; from x.ini:3\n"
        "sample_policy = truncate                ; default\n"
        "chunk_size = 0                          ; default\n"
        "chunkflow_k = 0                         ; default\n"
        "seq1f1b_slices = 4                      ; default\n"
        "infinipipe_slices = 0                   ; default\n"
        "micropacks = 0                          ; default\n"
        "dp_merge_margin = 0.1                   ; default\n"
        "milp_time_limit = 0                     ; default\n"
        "milp_gap = 0.001                        ; default\n"
        "milp_max_nodes = 1000                   ; default\n"
        "mlp_chunk = 0                           ; default\n"
        "\n"
        "[train]\n"
        "lr = 3e-4                               ; default\n"
        "min_lr = 3e-5                           ; default\n"
        "warmup_steps = 0                        ; default\n"
        "weight_decay = 0.1                      ; default\n"
        "grad_clip = 1.0                         ; default\n"
        "backend = cpu                           ; default\n"
        "; checkpoint_dir =\n"
        "checkpoint_every = 0                    ; default\n"
        "beta1 = 0.9                             ; default\n"
        "beta2 = 0.95                            ; default\n"
        "adam_eps = 1e-8                         ; default\n"
        "; steps =\n"
        "; seed =\n"
        "keep_checkpoints = 3                    ; default\n"
        "threads = 0                             ; default\n"
        "batch_docs = 8                          ; default\n"
        "eval_every = 0                          ; default\n"
        "eval_docs = 32                          ; default\n"
        "check_tolerance = 1e-4                  ; default\n"
        "check_rank_tolerance = 1e-5             ; default\n"
        "comm_timeout_s = 300                    ; default\n"
        "bucket_mb = 25                          ; default\n"
        "\n"
        "[slurm]\n"
        "; partition =\n"
        "; account =\n"
        "; time =\n"
        "nodes = 1                               ; default\n"
        "; gpus_per_node =\n"
        "; cpus_per_task =\n"
        "max_concurrent = 0                      ; default\n"
        "requeue = no                            ; from x.ini:5\n"
        "mpi = pmix                              ; default\n"
        "signal_seconds = 120                    ; default\n"
        "; extra_sbatch =\n"
    ;

static void test_dump_exact_text(void **state) {
    (void)state;
    lt_config *cfg = dump_fixture();
    char *text = lt_config_dump_string(cfg);
    assert_non_null(text);
    assert_string_equal(text, expected_dump);
    /* deterministic: the same config, or another built the same way, dumps the same */
    char *again = lt_config_dump_string(cfg);
    lt_config *twin = dump_fixture();
    char *twin_text = lt_config_dump_string(twin);
    assert_string_equal(text, again);
    assert_string_equal(text, twin_text);
    free(text);
    free(again);
    free(twin_text);
    lt_config_free(twin);
    lt_config_free(cfg);
}

static void test_dump_reload_round_trip(void **state) {
    (void)state;
    lt_config *a = lt_config_new();
    lt_error e;
    char *path;
    assert_int_equal(
        load_text(a,
                  "[run]\nname = round trip\n[plan]\nstrategy = infinipipe\n"
                  "context_len = 1.5G\nmem = 80g\nsteps = 3\n[train]\nlr = 0.00025\n"
                  "backend = cuda\n[slurm]\nrequeue = yes\ntime = 1-00:00:00\n"
                  "[data]\nfield = text # hash kept\ninput = a;b  c=d\n[model]\npreset = x\n",
                  &e, &path),
        LT_OK);
    remove_temp(path);
    assert_int_equal(lt_config_set(a, "parallel.dp=16", &e), LT_OK);
    assert_int_equal(lt_config_set(a, "model.preset=", &e), LT_OK);
    assert_int_equal(lt_config_set(a, "model.layers=40", &e), LT_OK);
    assert_int_equal(lt_config_set(a, "slurm.extra_sbatch=--qos=high --comment=\"x y\"", &e),
                     LT_OK);

    /* dump -> file -> load into a fresh config: the same effective values */
    char *text_a = lt_config_dump_string(a);
    assert_non_null(text_a);
    char *dump_path = write_temp(text_a);
    lt_config *b = lt_config_new();
    lt_error_clear(&e);
    if (lt_config_load_file(b, dump_path, &e) != LT_OK)
        fail_msg("reload: %s (%s)", e.what, e.where);
    assert_true(lt_config_equal(a, b));
    assert_string_equal(lt_config_get_string(b, "run", "name"), "round trip");
    assert_string_equal(lt_config_get_string(b, "plan", "strategy"), "infinipipe");
    assert_int_equal(get_size(b, "plan", "context_len"), UINT64_C(1610612736));
    assert_string_equal(lt_config_get_string(b, "plan", "context_len"), "1.5G");
    assert_int_equal(get_size(b, "plan", "mem"), UINT64_C(85899345920));
    assert_true(get_double(b, "train", "lr") == 0.00025);
    assert_true(get_bool(b, "slurm", "requeue"));
    assert_string_equal(lt_config_get_string(b, "slurm", "time"), "1-00:00:00");
    assert_string_equal(lt_config_get_string(b, "data", "field"), "text # hash kept");
    assert_string_equal(lt_config_get_string(b, "data", "input"), "a;b  c=d");
    assert_string_equal(lt_config_get_string(b, "slurm", "extra_sbatch"),
                        "--qos=high --comment=\"x y\"");
    assert_false(lt_config_is_set(b, "model", "preset"));
    assert_int_equal(get_int(b, "model", "layers"), 40);
    assert_int_equal(get_int(b, "parallel", "dp"), 16);
    assert_int_equal(get_int(b, "plan", "seed"), 1234);

    /* dumping the reloaded config and loading that from the same path is a fixed point:
     * the layout is the same, so even the origins ("PATH:LINE") come out the same */
    char *text_b = lt_config_dump_string(b);
    assert_non_null(text_b);
    FILE *f = fopen(dump_path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text_b, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    lt_config *c = lt_config_new();
    assert_int_equal(lt_config_load_file(c, dump_path, &e), LT_OK);
    assert_true(lt_config_equal(b, c));
    char *text_c = lt_config_dump_string(c);
    assert_non_null(text_c);
    assert_string_equal(text_b, text_c);
    remove_temp(dump_path);

    /* equality is about values: a different value breaks it */
    assert_int_equal(lt_config_set(c, "plan.mem=81G", &e), LT_OK);
    assert_false(lt_config_equal(b, c));
    assert_int_equal(lt_config_set(c, "plan.mem=82944M", &e), LT_OK); /* = 81G exactly */
    assert_false(lt_config_equal(b, c));
    assert_int_equal(lt_config_set(c, "plan.mem=81920M", &e), LT_OK); /* = 80G */
    assert_true(lt_config_equal(b, c));
    assert_int_equal(lt_config_set(c, "model.preset=tiny", &e), LT_OK);
    assert_false(lt_config_equal(b, c));

    free(text_a);
    free(text_b);
    free(text_c);
    lt_config_free(a);
    lt_config_free(b);
    lt_config_free(c);
}

static void test_dump_to_stream(void **state) {
    (void)state;
    lt_config *cfg = dump_fixture();
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(lt_config_dump(cfg, f), LT_OK);
    rewind(f);
    char buf[sizeof expected_dump + 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    assert_string_equal(buf, expected_dump);
    fclose(f);
    /* a failing stream is an I/O error */
    FILE *full = fopen("/dev/full", "w");
    if (full != NULL) {
        assert_int_equal(lt_config_dump(cfg, full), LT_ERR_IO);
        fclose(full);
    }
    lt_config_free(cfg);
}

/* ------------------------------------------------------------------ the shipped files */

static void test_demo_config_loads(void **state) {
    (void)state;
    char *path = source_file("etc/longtail.ini");
    if (path == NULL) {
        skip();
        return;
    }
    lt_config *cfg = lt_config_new();
    lt_error e;
    lt_error_clear(&e);
    if (lt_config_load_file(cfg, path, &e) != LT_OK) fail_msg("%s: %s (%s)", path, e.what, e.where);
    assert_string_equal(lt_config_get_string(cfg, "model", "preset"), "nano");
    assert_int_equal(get_int(cfg, "model", "vocab"), 50257);
    assert_string_equal(lt_config_get_string(cfg, "data", "encoding"), "r50k_base");
    assert_int_equal(get_int(cfg, "parallel", "dp"), 1);
    assert_int_equal(get_int(cfg, "parallel", "pp"), 2);
    assert_int_equal(get_int(cfg, "parallel", "tp"), 1);
    assert_string_equal(lt_config_get_string(cfg, "plan", "strategy"), "slimpack");
    assert_int_equal(get_size(cfg, "plan", "context_len"), 256);
    assert_int_equal(get_int(cfg, "plan", "global_batch"), 8);
    assert_int_equal(get_int(cfg, "plan", "steps"), 300);
    assert_string_equal(lt_config_get_string(cfg, "plan", "hardware"), "h200");
    assert_int_equal(get_size(cfg, "plan", "mem"), UINT64_C(85899345920));
    assert_int_equal(get_int(cfg, "plan", "seed"), 1234);
    assert_string_equal(lt_config_get_string(cfg, "train", "backend"), "cpu");

    /* it documents every key: each appears as "key = " or "; key = " at a line start */
    char *text = slurp(path);
    size_t n;
    const lt_config_key *keys = lt_config_schema(&n);
    for (size_t i = 0; i < n; i++) {
        char active[128], commented[128];
        snprintf(active, sizeof active, "\n%s = ", keys[i].key);
        snprintf(commented, sizeof commented, "\n; %s = ", keys[i].key);
        if (strstr(text, active) == NULL && strstr(text, commented) == NULL)
            fail_msg("etc/longtail.ini does not mention %s.%s", keys[i].section, keys[i].key);
    }
    size_t nsec;
    const lt_config_section *secs = lt_config_sections(&nsec);
    for (size_t i = 0; i < nsec; i++) {
        char header[64];
        snprintf(header, sizeof header, secs[i].named ? "\n; [%s." : "\n[%s]\n", secs[i].name);
        if (strstr(text, header) == NULL && !(secs[i].named && strstr(text, header + 2) != NULL))
            fail_msg("etc/longtail.ini has no [%s]", secs[i].name);
    }
    free(text);
    free(path);
    lt_config_free(cfg);
}

/* docs/config.md has, for every key, the row
 *   | SECTION | `KEY` | TYPE | DEFAULT | help |
 * with TYPE "enum: CHOICES", "TYPE, >= MIN", "TYPE, MIN..MAX", "TYPE, <= MAX" or "TYPE", and
 * DEFAULT "`TEXT`" or "(unset)". */
static void test_docs_table_matches_schema(void **state) {
    (void)state;
    char *path = source_file("docs/config.md");
    if (path == NULL) {
        skip();
        return;
    }
    char *text = slurp(path);
    size_t n;
    const lt_config_key *keys = lt_config_schema(&n);
    for (size_t i = 0; i < n; i++) {
        const lt_config_key *k = &keys[i];
        char type[256], def[256], row[1024];
        const char *tn = lt_config_type_name(k->type);
        if (k->type == LT_CONFIG_ENUM)
            snprintf(type, sizeof type, "enum: %s", k->choices);
        else if (k->min && k->max)
            snprintf(type, sizeof type, "%s, %s..%s", tn, k->min, k->max);
        else if (k->min)
            snprintf(type, sizeof type, "%s, >= %s", tn, k->min);
        else if (k->max)
            snprintf(type, sizeof type, "%s, <= %s", tn, k->max);
        else
            snprintf(type, sizeof type, "%s", tn);
        if (k->def)
            snprintf(def, sizeof def, "`%s`", k->def);
        else
            snprintf(def, sizeof def, "(unset)");
        snprintf(row, sizeof row, "\n| %s | `%s` | %s | %s | %s |\n", k->section, k->key, type, def,
                 k->help);
        if (strstr(text, row) == NULL) fail_msg("docs/config.md lacks the row%s", row);
    }
    free(text);
    free(path);
}

/* Found by fuzz_config: a value with outer blanks given through the API would not come
 * back from the dump; a second BOM hid an unknown section header. */
static void test_fuzz_regressions(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    assert_non_null(cfg);
    lt_error e;
    assert_int_equal(lt_config_set_value(cfg, "run", "name", " padded", "api", &e), LT_ERR_CONFIG);
    assert_non_null(strstr(e.what, "starts or ends with a blank"));
    assert_int_equal(lt_config_set_value(cfg, "run", "name", "padded ", "api", &e), LT_ERR_CONFIG);
    assert_int_equal(lt_config_set_value(cfg, "run", "name", "in side", "api", &e), LT_OK);
    assert_int_equal(lt_config_load_string(cfg, "\xEF\xBB\xBF\xEF\xBB\xBF[bogus]\n", "bom.ini", &e),
                     LT_ERR_CONFIG);
    assert_int_equal(lt_config_load_string(cfg, "\xEF\xBB\xBF[plan]\nsteps = 2\n", "bom.ini", &e),
                     LT_OK);
    lt_config_free(cfg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_regressions),
        cmocka_unit_test(test_schema_well_formed),
        cmocka_unit_test(test_schema_contract_keys),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_getter_errors),
        cmocka_unit_test(test_load_every_type),
        cmocka_unit_test(test_load_crlf_bom_tabs),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_long_value_line_and_nul),
        cmocka_unit_test(test_unknown_section),
        cmocka_unit_test(test_unknown_key),
        cmocka_unit_test(test_key_outside_section),
        cmocka_unit_test(test_duplicate_key),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_missing_file_and_directory),
        cmocka_unit_test(test_failed_load_changes_nothing),
        cmocka_unit_test(test_load_string),
        cmocka_unit_test(test_set_overrides_file),
        cmocka_unit_test(test_set_bad_forms),
        cmocka_unit_test(test_set_value_origin),
        cmocka_unit_test(test_named_sections),
        cmocka_unit_test(test_dump_exact_text),
        cmocka_unit_test(test_dump_reload_round_trip),
        cmocka_unit_test(test_dump_to_stream),
        cmocka_unit_test(test_demo_config_loads),
        cmocka_unit_test(test_docs_table_matches_schema),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
