/*
 * dataprep/dataset.c — open a dataprep output directory (see dataset.h).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/dataset.h"
#include "dataprep/hf_tokenizer.h" /* lt_hf_tokenizer_load */
#include "dataprep/tokenizer.h"    /* lt_tokenizer_load_encoding, lt_tokenizer_vocab_sha256 */
#include "lib/files.h"             /* lt_read_file */
#include "lib/json.h"              /* lt_json_parse */
#include "lib/sha256.h"            /* lt_sha256_digest_hex */

/* "task-00012.done" -> 12 */
static bool done_name(const char *name, uint32_t *task) {
    unsigned long v;
    int n = 0;
    if (strncmp(name, "task-", 5) != 0) return false;
    if (sscanf(name + 5, "%lu.done%n", &v, &n) != 1 || n == 0 || name[5 + n] != '\0') return false;
    if (v > UINT32_MAX) return false;
    *task = (uint32_t)v;
    return true;
}

static lt_status read_marker(const char *path, uint32_t task, uint32_t *num_tasks, lt_error *err) {
    char *text;
    size_t len;
    lt_status st = lt_read_file(path, &text, &len, err);
    if (st != LT_OK) return st;
    lt_jv *v = NULL;
    st = lt_json_parse(text, len, &v, err);
    free(text);
    if (st != LT_OK) {
        lt_error_prefix(err, "%s: ", path);
        return st;
    }
    int64_t t = -1, n = -1;
    if (!lt_jv_int64(lt_jv_get(v, "task"), &t) || !lt_jv_int64(lt_jv_get(v, "num_tasks"), &n) || n <= 0 ||
        n > UINT32_MAX || t != (int64_t)task)
        st = lt_fail(err, LT_ERR_INPUT, path, "not a dataprep completion marker (task/num_tasks missing or wrong)");
    else *num_tasks = (uint32_t)n;
    lt_jv_free(v);
    return st;
}

lt_status lt_dataset_open(lt_dataset **out, const char *dir, int64_t want_task, lt_error *err) {
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return lt_fail(err, errno == ENOENT ? LT_ERR_INPUT : LT_ERR_IO, dir, "cannot open directory: %s",
                           strerror(errno));
    uint32_t n = 0;
    bool have = false;
    char *first_marker = NULL;
    lt_status st = LT_OK;
    struct dirent *e;
    while (st == LT_OK && (e = readdir(d)) != NULL) {
        uint32_t t, nt = 0;
        if (!done_name(e->d_name, &t)) continue;
        char *p = lt_task_path(dir, t, "done");
        st = read_marker(p, t, &nt, err);
        if (st == LT_OK && have && nt != n)
            st = lt_fail(err, LT_ERR_INPUT, p, "this marker says %" PRIu32 " tasks, %s says %" PRIu32, nt,
                         first_marker, n);
        if (st == LT_OK && !have) {
            have = true;
            n = nt;
            first_marker = lt_strdup_check(p);
        }
        free(p);
    }
    closedir(d);
    free(first_marker);
    if (st != LT_OK) return st;
    if (!have) {
        st = lt_fail(err, LT_ERR_INPUT, dir, "no finished dataprep task in this directory");
        lt_error_hint(err, "a task is finished when its task-IIIII.done marker exists: run 'dataprep run --out DIR'");
        return st;
    }
    lt_dataset *ds = lt_calloc_check(1, sizeof *ds);
    ds->dir = lt_strdup_check(dir);
    ds->num_tasks = n;
    ds->tasks = lt_calloc_check(n, sizeof *ds->tasks);
    char missing[256] = "";
    size_t n_missing = 0;
    for (uint32_t t = 0; t < n; t++) {
        lt_dataset_task *tk = &ds->tasks[t];
        tk->task = t;
        tk->index_path = lt_task_path(dir, t, "index");
        tk->shard_path = lt_task_path(dir, t, "tokens.zst");
        tk->stats_path = lt_task_path(dir, t, "stats.json");
        tk->done_path = lt_task_path(dir, t, "done");
        bool wanted = want_task < 0 || (int64_t)t == want_task;
        if (!wanted) continue;
        FILE *f = fopen(tk->done_path, "rb");
        if (!f) {
            size_t l = strlen(missing);
            if (n_missing < 8 && l < sizeof missing - 16) snprintf(missing + l, sizeof missing - l, "%s%" PRIu32, l ? ", " : "", t);
            n_missing++;
            continue;
        }
        fclose(f);
    }
    if (want_task >= 0 && (uint64_t)want_task >= n) {
        st = lt_fail(err, LT_ERR_USAGE, dir, "there is no task %" PRId64 ": the directory has %" PRIu32 " tasks",
                     want_task, n);
    } else if (n_missing) {
        st = lt_fail(err, LT_ERR_INPUT, dir, "%zu of %" PRIu32 " tasks not finished (task %s%s)", n_missing,
                     want_task < 0 ? n : 1, missing, n_missing > 8 ? ", ..." : "");
        lt_error_hint(err, "run (or rerun) those dataprep tasks; finished ones are skipped");
    }
    for (uint32_t t = 0; st == LT_OK && t < n; t++) {
        if (want_task >= 0 && (int64_t)t != want_task) continue;
        st = lt_index_open(&ds->tasks[t].index, ds->tasks[t].index_path, err);
    }
    if (st != LT_OK) {
        lt_dataset_close(ds);
        return st;
    }
    *out = ds;
    return LT_OK;
}

void lt_dataset_close(lt_dataset *ds) {
    if (!ds) return;
    for (uint32_t t = 0; t < ds->num_tasks; t++) {
        lt_dataset_task *tk = &ds->tasks[t];
        lt_index_close(tk->index);
        free(tk->index_path);
        free(tk->shard_path);
        free(tk->stats_path);
        free(tk->done_path);
    }
    free(ds->tasks);
    free(ds->dir);
    free(ds);
}

lt_status lt_dataset_tokenizer(const lt_dataset *ds, uint32_t task, const char *vocab_dir, const char *tokenizer_json,
                               lt_tokenizer **out, lt_error *err) {
    LT_CHECK(task < ds->num_tasks && ds->tasks[task].index);
    const lt_dataset_task *tk = &ds->tasks[task];
    return lt_task_tokenizer(lt_index_meta(tk->index), tk->index_path, tk->stats_path, vocab_dir, tokenizer_json, out,
                             err);
}

lt_status lt_task_tokenizer(const lt_shard_meta *m, const char *index_path, const char *stats_path,
                            const char *vocab_dir, const char *tokenizer_json, lt_tokenizer **out, lt_error *err) {
    *out = NULL;
    char *recorded = NULL;
    if (!tokenizer_json) { /* the tokenizer.json the run recorded, if any */
        char *text;
        size_t len;
        lt_error e;
        if (lt_read_file(stats_path, &text, &len, &e) == LT_OK) {
            lt_jv *v = NULL;
            if (lt_json_parse(text, len, &v, NULL) == LT_OK) {
                const lt_jv *t = lt_jv_get(lt_jv_get(v, "settings"), "tokenizer");
                if (t && t->type == LT_JV_STRING) recorded = lt_strdup_check(t->text);
            }
            lt_jv_free(v);
            free(text);
        }
        tokenizer_json = recorded;
    }
    lt_status st = tokenizer_json ? lt_hf_tokenizer_load(out, tokenizer_json, LT_PRETOK_ENGINE_AUTO, err)
                                  : lt_tokenizer_load_encoding(out, m->encoding, vocab_dir, LT_PRETOK_ENGINE_AUTO, err);
    if (st == LT_OK) {
        char hex[LT_SHA256_HEX_LEN + 1];
        lt_sha256_digest_hex(m->vocab_sha256, hex);
        if (strcmp(hex, lt_tokenizer_vocab_sha256(*out)) != 0) {
            st = lt_fail(err, LT_ERR_INPUT, index_path,
                         "the shards were made with another %s vocabulary (sha256 %.12s..., found %.12s...)",
                         m->encoding, hex, lt_tokenizer_vocab_sha256(*out));
            lt_error_hint(err, tokenizer_json ? "give the tokenizer.json the shards were made with (--tokenizer FILE)"
                                              : "point --vocab-dir at the vocabulary the shards were made with");
            lt_tokenizer_free(*out);
            *out = NULL;
        }
    }
    free(recorded);
    return st;
}
