/*
 * dataprep/tools.c — the commands that read a dataprep output directory:
 *   cat      documents back as JSON lines (decoded text, source, token count)
 *   lengths  one token count per document, in cat order (the planner's input)
 *   verify   every finished task checked end to end: marker hashes, index, shard, stats
 *   wikitext what the Wikipedia reader makes of a page's wikitext
 * (profile: dataprep/profile_cmd.c; export: dataprep/export.c)
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/dataprep.h"  /* cat_command, lengths_command, verify_command */
#include "dataprep/dataset.h"   /* lt_dataset */
#include "dataprep/shard.h"     /* lt_index_*, lt_shard_* */
#include "dataprep/tokenizer.h" /* lt_tokenizer_decode */
#include "dataprep/wikitext.h"  /* lt_wikitext_to_text */
#include "lib/config.h"         /* lt_config_get_string */
#include "lib/files.h"          /* lt_read_file */
#include "lib/json.h"           /* lt_json writer, lt_json_parse */
#include "lib/log.h"            /* LT_INFO */
#include "lib/sha256.h"         /* lt_sha256_hex */
#include "lib/strutil.h"        /* lt_parse_int64 */

/* Common arguments: DIR, --task I, --doc N, --vocab-dir D. Returns 0 or an exit code. */
typedef struct tool_args {
    const char *dir, *vocab_dir, *tokenizer;
    int64_t task, doc;
} tool_args;

static int parse_tool_args(lt_cli_ctx *ctx, bool allow_task, bool allow_doc, tool_args *ta) {
    memset(ta, 0, sizeof *ta);
    ta->task = ta->doc = -1;
    for (int i = 1; i < ctx->argc; i++) {
        const char *a = ctx->argv[i], *v;
        int missing = 0;
        if (allow_task && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--task", &missing))) {
            if (lt_parse_int64(v, &ta->task) != LT_OK || ta->task < 0) return lt_cli_usage(ctx, "--task wants an integer >= 0");
        } else if (!missing && allow_doc && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--doc", &missing))) {
            if (lt_parse_int64(v, &ta->doc) != LT_OK || ta->doc < 0) return lt_cli_usage(ctx, "--doc wants an integer >= 0");
        } else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--vocab-dir", &missing))) {
            ta->vocab_dir = v;
        } else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--tokenizer", &missing))) {
            ta->tokenizer = v;
        } else if (missing) {
            return lt_cli_usage(ctx, "option '%.200s' needs a value", a);
        } else if (a[0] == '-' && a[1] != '\0') {
            return lt_cli_unknown_option(ctx, a);
        } else if (!ta->dir) {
            ta->dir = a;
        } else {
            return lt_cli_usage(ctx, "unexpected argument '%.200s' (one DIR)", a);
        }
    }
    if (!ta->dir) return lt_cli_usage(ctx, "which directory? give DIR (a dataprep run --out directory)");
    if (!ta->vocab_dir) ta->vocab_dir = lt_config_get_string(ctx->config, "data", "vocab_dir");
    if (!ta->tokenizer) ta->tokenizer = lt_config_get_string(ctx->config, "data", "tokenizer");
    return 0;
}

/* ------------------------------------------------------------------ cat */

static lt_status cat_doc(const lt_dataset_task *tk, lt_shard *sh, const lt_tokenizer *tok, uint64_t doc,
                         char **buf, size_t *cap, lt_json *j, lt_error *err) {
    const uint32_t *ids;
    size_t n;
    lt_status st = lt_shard_doc(sh, doc, &ids, &n, err);
    if (st != LT_OK) return st;
    size_t len = 0;
    st = lt_tokenizer_decode(tok, ids, n, *buf, *cap, &len, err);
    if (st == LT_OK && len > *cap) {
        *cap = len;
        *buf = lt_realloc_check(*buf, *cap);
        st = lt_tokenizer_decode(tok, ids, n, *buf, *cap, &len, err);
    }
    if (st != LT_OK) {
        lt_error_prefix(err, "%s: document %" PRIu64 ": ", tk->shard_path, doc);
        return st;
    }
    lt_index_source src;
    lt_index_doc_source(tk->index, doc, &src);
    const char *file = lt_index_file_path(tk->index, src.file);
    lt_json_reset(j);
    lt_json_object_begin(j);
    lt_json_key(j, "task");
    lt_json_uint(j, tk->task);
    lt_json_key(j, "doc");
    lt_json_uint(j, doc);
    lt_json_key(j, "source");
    size_t sl = strlen(file) + strlen(src.id) + 2;
    char *source = lt_malloc_check(sl);
    snprintf(source, sl, "%s#%s", file, src.id);
    lt_json_string(j, source);
    free(source);
    if (src.name[0]) {
        lt_json_key(j, "name");
        lt_json_string(j, src.name);
    }
    lt_json_key(j, "tokens");
    lt_json_uint(j, n);
    if (src.flags & LT_DOC_TRUNCATED) {
        lt_json_key(j, "truncated");
        lt_json_bool(j, true);
    }
    lt_json_key(j, "text");
    lt_json_string_n(j, *buf, len);
    lt_json_object_end(j);
    return lt_json_fwrite_line(j, stdout, "standard output", err);
}

int cat_command(lt_cli_ctx *ctx) {
    tool_args ta;
    int rc = parse_tool_args(ctx, true, true, &ta);
    if (rc) return rc;
    lt_error err;
    lt_error_clear(&err);
    lt_dataset *ds = NULL;
    lt_status st = lt_dataset_open(&ds, ta.dir, ta.task, &err);
    if (st != LT_OK) return lt_error_exit(&err);
    if (ta.doc >= 0 && ta.task < 0 && ds->num_tasks > 1) {
        lt_dataset_close(ds);
        return lt_cli_usage(ctx, "--doc N counts within a task: give --task I too (the directory has several tasks)");
    }
    lt_tokenizer *tok = NULL;
    const lt_shard_meta *m0 = NULL;
    char *buf = NULL;
    size_t cap = 0;
    lt_json j;
    lt_json_init(&j);
    static char out_buf[1 << 16];
    setvbuf(stdout, out_buf, _IOFBF, sizeof out_buf);
    for (uint32_t t = 0; st == LT_OK && t < ds->num_tasks; t++) {
        const lt_dataset_task *tk = &ds->tasks[t];
        if (!tk->index) continue;
        const lt_shard_meta *m = lt_index_meta(tk->index);
        if (!tok) {
            st = lt_dataset_tokenizer(ds, t, ta.vocab_dir, ta.tokenizer, &tok, &err);
            if (st != LT_OK) break;
            m0 = m;
        } else if (memcmp(m->vocab_sha256, m0->vocab_sha256, 32) != 0) {
            st = lt_fail(&err, LT_ERR_INPUT, tk->index_path, "tasks of this directory use different vocabularies");
            break;
        }
        lt_shard *sh = NULL;
        if ((st = lt_shard_open(&sh, tk->shard_path, tk->index, &err)) != LT_OK) break;
        uint64_t nd = lt_index_n_docs(tk->index);
        if (ta.doc >= 0) {
            if ((uint64_t)ta.doc >= nd)
                st = lt_fail(&err, LT_ERR_USAGE, tk->index_path, "no document %" PRId64 ": task %" PRIu32 " has %" PRIu64,
                             ta.doc, t, nd);
            else
                st = cat_doc(tk, sh, tok, (uint64_t)ta.doc, &buf, &cap, &j, &err);
        } else {
            for (uint64_t d = 0; st == LT_OK && d < nd; d++) st = cat_doc(tk, sh, tok, d, &buf, &cap, &j, &err);
        }
        lt_shard_close(sh);
    }
    if (fflush(stdout) != 0 && st == LT_OK)
        st = lt_fail(&err, LT_ERR_IO, "standard output", "write failed: %s", strerror(errno));
    lt_json_free(&j);
    free(buf);
    lt_tokenizer_free(tok);
    lt_dataset_close(ds);
    return st == LT_OK ? 0 : lt_error_exit(&err);
}

/* ------------------------------------------------------------------ lengths */

int lengths_command(lt_cli_ctx *ctx) {
    tool_args ta;
    int rc = parse_tool_args(ctx, true, false, &ta);
    if (rc) return rc;
    lt_error err;
    lt_error_clear(&err);
    lt_dataset *ds = NULL;
    if (lt_dataset_open(&ds, ta.dir, ta.task, &err) != LT_OK) return lt_error_exit(&err);
    static char out_buf[1 << 16];
    setvbuf(stdout, out_buf, _IOFBF, sizeof out_buf);
    for (uint32_t t = 0; t < ds->num_tasks; t++) {
        const lt_index *ix = ds->tasks[t].index;
        if (!ix) continue;
        uint64_t nd = lt_index_n_docs(ix);
        for (uint64_t d = 0; d < nd; d++) printf("%" PRIu64 "\n", lt_index_doc_len(ix, d));
    }
    lt_status st = LT_OK;
    if (fflush(stdout) != 0) st = lt_fail(&err, LT_ERR_IO, "standard output", "write failed: %s", strerror(errno));
    lt_dataset_close(ds);
    return st == LT_OK ? 0 : lt_error_exit(&err);
}

/* ------------------------------------------------------------------ verify */

/* Check one output file against the marker's {file, bytes, sha256}. */
/* printf into a fixed buffer; a message longer than it is cut (messages only). */
static void say(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *buf, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

static bool verify_output(const char *dir, const lt_jv *outputs, const char *key, const char *expect_name,
                          char *problem, size_t size) {
    const lt_jv *o = lt_jv_get(outputs, key);
    const lt_jv *file = o ? lt_jv_get(o, "file") : NULL, *sha = o ? lt_jv_get(o, "sha256") : NULL;
    int64_t bytes = -1;
    if (!o || !lt_jv_int64(lt_jv_get(o, "bytes"), &bytes) || !file || !sha) {
        say(problem, size, "the marker has no outputs.%s {file, bytes, sha256}", key);
        return false;
    }
    lt_json fj, sj;
    lt_json_init(&fj);
    lt_json_init(&sj);
    lt_json_value(&fj, file);
    lt_json_value(&sj, sha);
    char want_file[512];
    snprintf(want_file, sizeof want_file, "\"%s\"", expect_name);
    bool ok = strcmp(lt_json_cstr(&fj), want_file) == 0;
    if (!ok) say(problem, size, "the marker names %s for %s, expected %s", lt_json_cstr(&fj), key, want_file);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, expect_name);
    char *data = NULL;
    size_t len = 0;
    lt_error err;
    if (ok && lt_read_file(path, &data, &len, &err) != LT_OK) {
        say(problem, size, "%s (%s)", err.what, err.where);
        ok = false;
    }
    if (ok && (int64_t)len != bytes) {
        say(problem, size, "%s has %zu bytes, the marker says %" PRId64, path, len, bytes);
        ok = false;
    }
    if (ok) {
        char hex[LT_SHA256_HEX_LEN + 1], want[LT_SHA256_HEX_LEN + 3];
        lt_sha256_hex(data, len, hex);
        snprintf(want, sizeof want, "\"%s\"", hex);
        if (strcmp(want, lt_json_cstr(&sj)) != 0) {
            say(problem, size, "%s: SHA-256 %.16s... differs from the marker's %.18s...", path, hex, lt_json_cstr(&sj) + 1);
            ok = false;
        }
    }
    free(data);
    lt_json_free(&fj);
    lt_json_free(&sj);
    return ok;
}

/* Every check of one task; returns the number of problems (each reported). */
static size_t verify_task(const lt_dataset *ds, const lt_dataset_task *tk, uint64_t *docs, uint64_t *tokens) {
    size_t problems = 0;
    char problem[1024], msg[1024];
    lt_error err;
    char *text = NULL;
    size_t len = 0;
    lt_jv *marker = NULL, *stats = NULL;
#define PROBLEM(where, ...)                                  \
    do {                                                     \
        snprintf(msg, sizeof msg, __VA_ARGS__);              \
        lt_report(where, NULL, "%s", msg);                   \
        problems++;                                          \
    } while (0)
    if (lt_read_file(tk->done_path, &text, &len, &err) != LT_OK || lt_json_parse(text, len, &marker, &err) != LT_OK) {
        PROBLEM(tk->done_path, "unreadable completion marker: %s", err.what);
        free(text);
        return problems;
    }
    free(text);
    const lt_jv *outputs = lt_jv_get(marker, "outputs");
    if (!verify_output(ds->dir, outputs, "shard", lt_path_base(tk->shard_path), problem, sizeof problem)) PROBLEM(tk->done_path, "%s", problem);
    if (!verify_output(ds->dir, outputs, "index", lt_path_base(tk->index_path), problem, sizeof problem)) PROBLEM(tk->done_path, "%s", problem);
    if (!verify_output(ds->dir, outputs, "stats", lt_path_base(tk->stats_path), problem, sizeof problem)) PROBLEM(tk->done_path, "%s", problem);
    const lt_index *ix = tk->index;
    const lt_shard_meta *m = lt_index_meta(ix);
    if (m->task_id != tk->task || m->num_tasks != ds->num_tasks)
        PROBLEM(tk->index_path, "the index says task %" PRIu32 " of %" PRIu32 ", expected %" PRIu32 " of %" PRIu32,
                m->task_id, m->num_tasks, tk->task, ds->num_tasks);
    if (lt_shard_verify(tk->shard_path, ix, &err) != LT_OK) PROBLEM(err.where[0] ? err.where : tk->shard_path, "%s", err.what);
    int64_t md = -1, mt = -1, sd = -1, stt = -1;
    lt_jv_int64(lt_jv_get(marker, "documents"), &md);
    lt_jv_int64(lt_jv_get(marker, "tokens"), &mt);
    uint64_t nd = lt_index_n_docs(ix), nt = lt_index_n_tokens(ix);
    if (md != (int64_t)nd || mt != (int64_t)nt)
        PROBLEM(tk->done_path, "the marker counts %" PRId64 " documents / %" PRId64 " tokens, the index %" PRIu64 " / %" PRIu64,
                md, mt, nd, nt);
    if (lt_read_file(tk->stats_path, &text, &len, &err) == LT_OK && lt_json_parse(text, len, &stats, &err) == LT_OK) {
        lt_jv_int64(lt_jv_get(stats, "documents"), &sd);
        lt_jv_int64(lt_jv_get(stats, "tokens"), &stt);
        if (sd != (int64_t)nd || stt != (int64_t)nt)
            PROBLEM(tk->stats_path, "the stats count %" PRId64 " documents / %" PRId64 " tokens, the index %" PRIu64 " / %" PRIu64,
                    sd, stt, nd, nt);
    } else {
        PROBLEM(tk->stats_path, "unreadable stats: %s", err.what);
    }
    free(text);
    /* the per-document lengths add up, and the sum of the histogram too */
    uint64_t sum = 0;
    for (uint64_t d = 0; d < nd; d++) sum += lt_index_doc_len(ix, d);
    if (sum != nt) PROBLEM(tk->index_path, "document lengths add up to %" PRIu64 ", not %" PRIu64 " tokens", sum, nt);
#undef PROBLEM
    lt_jv_free(marker);
    lt_jv_free(stats);
    *docs += nd;
    *tokens += nt;
    return problems;
}

int verify_command(lt_cli_ctx *ctx) {
    tool_args ta;
    int rc = parse_tool_args(ctx, true, false, &ta);
    if (rc) return rc;
    lt_error err;
    lt_error_clear(&err);
    lt_dataset *ds = NULL;
    if (lt_dataset_open(&ds, ta.dir, ta.task, &err) != LT_OK) return lt_error_exit(&err);
    size_t problems = 0, checked = 0;
    uint64_t docs = 0, tokens = 0;
    for (uint32_t t = 0; t < ds->num_tasks; t++) {
        const lt_dataset_task *tk = &ds->tasks[t];
        if (!tk->index) continue;
        uint64_t d0 = docs, t0 = tokens;
        size_t p = verify_task(ds, tk, &docs, &tokens);
        problems += p;
        checked++;
        if (p == 0)
            printf("ok task %" PRIu32 ": %" PRIu64 " documents, %" PRIu64 " tokens, %" PRIu64 " frames\n", t, docs - d0,
                   tokens - t0, lt_index_n_frames(tk->index));
        else
            printf("FAILED task %" PRIu32 ": %zu problem%s\n", t, p, p == 1 ? "" : "s");
    }
    printf("%s: %zu task%s checked, %" PRIu64 " documents, %" PRIu64 " tokens, %zu problem%s\n", ds->dir, checked,
           checked == 1 ? "" : "s", docs, tokens, problems, problems == 1 ? "" : "s");
    fflush(stdout);
    lt_dataset_close(ds);
    return problems ? 1 : 0;
}

/* ------------------------------------------------------------------ wikitext */

/* `dataprep wikitext [FILE]`: what the Wikipedia reader makes of a page's wikitext
 * (docs/formats.md), for checking a page by hand and for the round-trip tests. */
int wikitext_command(lt_cli_ctx *ctx) {
    const char *path = NULL;
    for (int i = 1; i < ctx->argc; i++) {
        const char *a = ctx->argv[i];
        if (a[0] == '-' && a[1] != '\0') return lt_cli_unknown_option(ctx, a);
        if (path) return lt_cli_usage(ctx, "one FILE at most (or standard input)");
        path = a;
    }
    lt_error err;
    lt_error_clear(&err);
    char *data = NULL;
    size_t len = 0;
    lt_status st = LT_OK;
    if (path && strcmp(path, "-") != 0) {
        st = lt_read_file(path, &data, &len, &err);
    } else {
        size_t cap = 1 << 16;
        data = lt_malloc_check(cap);
        for (;;) {
            if (len == cap) data = lt_realloc_check(data, cap *= 2);
            size_t got = fread(data + len, 1, cap - len, stdin);
            len += got;
            if (got == 0) break;
        }
        if (ferror(stdin)) st = lt_fail(&err, LT_ERR_IO, "standard input", "read failed: %s", strerror(errno));
    }
    if (st == LT_OK) {
        lt_wikitext_buf out = {0};
        lt_wikitext_to_text(data, len, &out);
        if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len)
            st = lt_fail(&err, LT_ERR_IO, "standard output", "write failed: %s", strerror(errno));
        if (st == LT_OK && fflush(stdout) != 0)
            st = lt_fail(&err, LT_ERR_IO, "standard output", "write failed: %s", strerror(errno));
        lt_wikitext_buf_free(&out);
    }
    free(data);
    return st == LT_OK ? 0 : lt_error_exit(&err);
}
