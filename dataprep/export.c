/*
 * dataprep/export.c — `dataprep export DIR --format llmc|megatron --out OUTDIR [--task I]
 * [--eos-id N] [--vocab-dir DIR] [--tokenizer FILE]`: the token shards of a `dataprep run`
 * output directory
 * in the layouts two trainers read directly (docs/formats.md, "Exports").
 *
 *   llmc      OUTDIR/task-IIIII.bin as karpathy/llm.c dev/data/data_common.py
 *             write_datafile: 256 x int32 header {magic, version, n_tokens, 0...}, then the
 *             tokens; "gpt-2" (20240520, version 1, uint16) for token width 2, "llama-3"
 *             (20240801, version 7, uint32) for width 4. Documents are separated by the
 *             end-of-text token (lt_tokenizer_eos_id: <|endoftext|>, or Llama 3's
 *             <|end_of_text|>): when the run appended EOS (index eos policy) the stream is
 *             written as is (doc EOS doc EOS ...); otherwise EOT is put before every
 *             document, as llm.c's fineweb.py does (EOT doc EOT doc ...), its id from
 *             --eos-id or from the tokenizer the task was made with (lt_task_tokenizer: a
 *             run's recorded tokenizer.json, --tokenizer, or its encoding's vocabulary).
 *   megatron  OUTDIR/task-IIIII.bin (the tokens, uint16 for width 2 else int32) and .idx as
 *             NVIDIA/Megatron-LM megatron/core/datasets/indexed_dataset.py _IndexWriter:
 *             "MMIDIDX\0\0", u64 1, u8 dtype code (8 uint16, 4 int32), u64 sequence count,
 *             u64 document count, int32 lengths[seq], int64 byte pointers[seq], int64
 *             document_indices[n_docs + 1]. One sequence per non-empty document (an empty
 *             document adds no sequence, as IndexedDatasetBuilder.add_document with no
 *             lengths); tokens exactly as in the shard (EOS present only if the run
 *             appended it).
 * Only complete tasks (task-IIIII.done present) are exported; incomplete ones are named in
 * a warning; no complete task is an error.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataprep/dataprep.h"  /* export_command */
#include "dataprep/dataset.h"   /* lt_task_tokenizer: the tokenizer a task was made with */
#include "dataprep/shard.h"     /* lt_index_*, lt_shard_* */
#include "dataprep/tokenizer.h" /* lt_tokenizer_eos_id: the document separator for llm.c */
#include "lib/config.h"         /* lt_config_get_string */
#include "lib/files.h"          /* lt_atomic_*, lt_mkdir_p */
#include "lib/log.h"            /* LT_INFO, LT_WARN */

/* llm.c dev/data/data_common.py HEADERS_INFO */
#define LLMC_HEADER_INTS 256
#define LLMC_MAGIC_GPT2 20240520
#define LLMC_VERSION_GPT2 1
#define LLMC_MAGIC_LLAMA3 20240801
#define LLMC_VERSION_LLAMA3 7
/* Megatron-LM indexed_dataset.py: _INDEX_HEADER, version, DType codes */
static const char MEGATRON_MAGIC[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
#define MEGATRON_DTYPE_INT32 4
#define MEGATRON_DTYPE_UINT16 8

typedef enum export_format { FORMAT_LLMC, FORMAT_MEGATRON } export_format;

/* ---- buffered little-endian output through an atomic file ------------------------- */

typedef struct out_file {
    lt_atomic_file af;
    uint8_t buf[1 << 16];
    size_t used;
    uint64_t bytes;
    lt_status st;
    lt_error *err;
} out_file;

static void out_flush(out_file *o) {
    if (o->st == LT_OK && o->used && fwrite(o->buf, 1, o->used, o->af.fp) != o->used)
        o->st = lt_fail(o->err, LT_ERR_IO, o->af.path, "write failed: %s", strerror(errno));
    o->used = 0;
}

static void out_put(out_file *o, uint64_t v, int bytes) {
    if (o->used + 8 > sizeof o->buf) out_flush(o);
    for (int i = 0; i < bytes; i++) o->buf[o->used++] = (uint8_t)(v >> (8 * i));
    o->bytes += (uint64_t)bytes;
}

static lt_status out_open(out_file *o, const char *path, lt_error *err) {
    memset(&o->af, 0, sizeof o->af);
    o->used = 0;
    o->bytes = 0;
    o->st = LT_OK;
    o->err = err;
    return lt_atomic_open(&o->af, path, err);
}

static lt_status out_commit(out_file *o) {
    out_flush(o);
    if (o->st != LT_OK) {
        lt_atomic_abort(&o->af);
        return o->st;
    }
    return lt_atomic_commit(&o->af, o->err);
}

/* ---- the tasks of a run directory ------------------------------------------------- */

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The task ids with a task-IIIII.index in dir, sorted. */
static lt_status list_tasks(const char *dir, uint32_t **out, size_t *n, lt_error *err) {
    DIR *d = opendir(dir);
    if (!d) return lt_fail(err, LT_ERR_IO, dir, "cannot open directory: %s", strerror(errno));
    uint32_t *tasks = NULL;
    size_t count = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (strncmp(name, "task-", 5) != 0) continue;
        char *end;
        errno = 0;
        unsigned long t = strtoul(name + 5, &end, 10);
        if (end == name + 5 || errno || t > UINT32_MAX || strcmp(end, ".index") != 0) continue;
        /* exactly the name the writer gives (no "task-3.index" or "+3") */
        char *canon = lt_task_path(".", (uint32_t)t, "index");
        bool same = strcmp(canon + 2, name) == 0;
        free(canon);
        if (!same) continue;
        if (count == cap) tasks = lt_realloc_check(tasks, (cap = cap ? 2 * cap : 64) * sizeof *tasks);
        tasks[count++] = (uint32_t)t;
    }
    closedir(d);
    if (count) qsort(tasks, count, sizeof *tasks, cmp_u32);
    *out = tasks;
    *n = count;
    return LT_OK;
}

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* ---- the end-of-text token for llm.c when the run did not append EOS ------------- */

typedef struct eos_source {
    bool given; /* --eos-id */
    uint32_t id;
    const char *vocab_dir, *tokenizer; /* --vocab-dir (data.vocab_dir), --tokenizer (data.tokenizer) */
    char encoding[32];  /* the encoding resolved last */
    uint8_t sha256[32]; /* and its vocabulary */
    bool resolved;
} eos_source;

static lt_status resolve_eos(eos_source *es, const lt_shard_meta *m, const char *index_path, const char *stats_path,
                             uint32_t *eos, lt_error *err) {
    if (es->given) {
        *eos = es->id;
    } else if (!(es->resolved && strcmp(es->encoding, m->encoding) == 0 &&
                 memcmp(es->sha256, m->vocab_sha256, 32) == 0)) {
        lt_tokenizer *tok;
        lt_status st = lt_task_tokenizer(m, index_path, stats_path, es->vocab_dir, es->tokenizer, &tok, err);
        if (st != LT_OK) {
            lt_error_prefix(err, "finding the end-of-text token of %s: ", m->encoding);
            lt_error_hint(err, "give the separator with --eos-id N, or the vocabulary with --vocab-dir DIR "
                               "(a tokenizer.json with --tokenizer FILE)");
            return st;
        }
        int64_t id = lt_tokenizer_eos_id(tok);
        lt_tokenizer_free(tok);
        if (id < 0) {
            st = lt_fail(err, LT_ERR_INPUT, index_path, "tokenizer %s has no <|endoftext|> or <|end_of_text|> token",
                         m->encoding);
            lt_error_hint(err, "give the document separator with --eos-id N");
            return st;
        }
        memcpy(es->encoding, m->encoding, sizeof es->encoding);
        memcpy(es->sha256, m->vocab_sha256, 32);
        es->id = (uint32_t)id;
        es->resolved = true;
        *eos = es->id;
    } else {
        *eos = es->id;
    }
    if (m->token_width == 2 && *eos > 0xFFFFu)
        return lt_fail(err, LT_ERR_USAGE, NULL, "--eos-id %" PRIu32 " does not fit the uint16 tokens of %s", *eos,
                       index_path);
    return LT_OK;
}

/* ---- writers ---------------------------------------------------------------------- */

/* Every document's ids into o, each preceded by `eos` when `insert`. */
static lt_status put_documents(out_file *o, lt_shard *sh, uint64_t n_docs, bool insert, uint32_t eos, int width,
                               lt_error *err) {
    for (uint64_t d = 0; d < n_docs && o->st == LT_OK; d++) {
        const uint32_t *ids;
        size_t n;
        lt_status st = lt_shard_doc(sh, d, &ids, &n, err);
        if (st != LT_OK) return st;
        if (insert) out_put(o, eos, width);
        for (size_t k = 0; k < n; k++) out_put(o, ids[k], width);
    }
    return LT_OK;
}

/* Commit o after writing went well (adding its size to *written), else drop it. */
static lt_status out_finish(out_file *o, lt_status st, uint64_t *written) {
    if (st != LT_OK) {
        lt_atomic_abort(&o->af);
        return st;
    }
    st = out_commit(o);
    *written += o->bytes;
    return st;
}

static lt_status export_llmc(const lt_index *ix, lt_shard *sh, const char *index_path, const char *stats_path,
                             const char *out_path, eos_source *es, uint64_t *written, lt_error *err) {
    const lt_shard_meta *m = lt_index_meta(ix);
    const uint64_t n_docs = lt_index_n_docs(ix);
    const bool insert = m->eos == LT_EOS_NONE;
    uint32_t eos = 0;
    if (insert) {
        lt_status st = resolve_eos(es, m, index_path, stats_path, &eos, err);
        if (st != LT_OK) return st;
    }
    const uint64_t ntok = lt_index_n_tokens(ix) + (insert ? n_docs : 0);
    if (ntok > INT32_MAX) {
        lt_status st = lt_fail(err, LT_ERR_INPUT, index_path,
                               "%" PRIu64 " tokens: more than llm.c's int32 header can count (2^31 - 1)", ntok);
        lt_error_hint(err, "split the corpus into more tasks (dataprep run --num-tasks)");
        return st;
    }
    if (ntok == 0) LT_WARN("export: %s has no tokens; llm.c's loader refuses an empty .bin", out_path);
    const int width = (int)m->token_width;
    out_file *o = lt_malloc_check(sizeof *o);
    lt_status st = out_open(o, out_path, err);
    if (st != LT_OK) {
        free(o);
        return st;
    }
    out_put(o, (uint32_t)(width == 2 ? LLMC_MAGIC_GPT2 : LLMC_MAGIC_LLAMA3), 4);
    out_put(o, (uint32_t)(width == 2 ? LLMC_VERSION_GPT2 : LLMC_VERSION_LLAMA3), 4);
    out_put(o, (uint32_t)ntok, 4);
    for (int i = 3; i < LLMC_HEADER_INTS; i++) out_put(o, 0, 4);
    st = out_finish(o, put_documents(o, sh, n_docs, insert, eos, width, err), written);
    free(o);
    return st;
}

static lt_status export_megatron(const lt_index *ix, lt_shard *sh, const char *index_path, const char *bin_path,
                                 const char *idx_path, uint64_t *written, lt_error *err) {
    const lt_shard_meta *m = lt_index_meta(ix);
    const uint64_t n_docs = lt_index_n_docs(ix);
    const int width = (int)m->token_width;
    if (width == 4 && m->n_vocab > (uint32_t)INT32_MAX + 1u)
        return lt_fail(err, LT_ERR_INPUT, index_path,
                       "vocabulary of %" PRIu32 " tokens: ids do not fit Megatron's int32 tokens", m->n_vocab);
    uint64_t n_seq = 0;
    for (uint64_t d = 0; d < n_docs; d++) {
        uint64_t len = lt_index_doc_len(ix, d);
        if (len > INT32_MAX)
            return lt_fail(err, LT_ERR_INPUT, index_path,
                           "document %" PRIu64 " has %" PRIu64 " tokens, more than Megatron's int32 lengths", d, len);
        n_seq += len > 0;
    }
    out_file *o = lt_malloc_check(sizeof *o);
    lt_status st = out_open(o, bin_path, err);
    if (st != LT_OK) {
        free(o);
        return st;
    }
    st = out_finish(o, put_documents(o, sh, n_docs, false, 0, width, err), written);
    if (st != LT_OK) {
        free(o);
        return st;
    }
    st = out_open(o, idx_path, err);
    if (st != LT_OK) {
        free(o);
        return st;
    }
    for (size_t i = 0; i < sizeof MEGATRON_MAGIC; i++) out_put(o, (uint8_t)MEGATRON_MAGIC[i], 1);
    out_put(o, 1, 8); /* version */
    out_put(o, width == 2 ? MEGATRON_DTYPE_UINT16 : MEGATRON_DTYPE_INT32, 1);
    out_put(o, n_seq, 8);
    out_put(o, n_docs + 1, 8);
    for (uint64_t d = 0; d < n_docs; d++) { /* sequence lengths */
        uint64_t len = lt_index_doc_len(ix, d);
        if (len) out_put(o, len, 4);
    }
    for (uint64_t d = 0, ptr = 0; d < n_docs; d++) { /* sequence byte offsets in the .bin */
        uint64_t len = lt_index_doc_len(ix, d);
        if (!len) continue;
        out_put(o, ptr, 8);
        ptr += len * (uint64_t)width;
    }
    out_put(o, 0, 8); /* document_indices: the sequence count before each document, and the total */
    for (uint64_t d = 0, seq = 0; d < n_docs; d++) {
        seq += lt_index_doc_len(ix, d) > 0;
        out_put(o, seq, 8);
    }
    st = out_commit(o);
    *written += o->bytes;
    free(o);
    return st;
}

/* ---- the command ------------------------------------------------------------------ */

static lt_status export_task(const char *dir, uint32_t task, export_format fmt, const char *out_dir,
                             eos_source *es, lt_error *err) {
    char *index_path = lt_task_path(dir, task, "index"), *shard_path = lt_task_path(dir, task, "tokens.zst");
    char *bin_path = lt_task_path(out_dir, task, "bin"), *idx_path = lt_task_path(out_dir, task, "idx");
    char *stats_path = lt_task_path(dir, task, "stats.json");
    lt_index *ix = NULL;
    lt_shard *sh = NULL;
    uint64_t written = 0;
    lt_status st = lt_index_open(&ix, index_path, err);
    if (st == LT_OK) st = lt_shard_open(&sh, shard_path, ix, err);
    if (st == LT_OK)
        st = fmt == FORMAT_LLMC ? export_llmc(ix, sh, index_path, stats_path, bin_path, es, &written, err)
                                : export_megatron(ix, sh, index_path, bin_path, idx_path, &written, err);
    if (st == LT_OK)
        LT_INFO("export: task %" PRIu32 ": %" PRIu64 " documents, %" PRIu64 " tokens -> %s%s (%.1f MB)", task,
                lt_index_n_docs(ix), lt_index_n_tokens(ix), bin_path, fmt == FORMAT_MEGATRON ? " + .idx" : "",
                (double)written / 1e6);
    lt_shard_close(sh);
    lt_index_close(ix);
    free(index_path);
    free(shard_path);
    free(bin_path);
    free(idx_path);
    free(stats_path);
    return st;
}

int export_command(lt_cli_ctx *ctx) {
    const char *dir = NULL, *format = NULL, *out_dir = NULL, *task_arg = NULL, *eos_arg = NULL, *vocab_dir = NULL,
               *tokenizer = NULL;
    for (int i = 1; i < ctx->argc; i++) {
        const char *a = ctx->argv[i], *v;
        int missing = 0;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--format", &missing))) format = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--out", &missing))) out_dir = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--task", &missing))) task_arg = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--eos-id", &missing))) eos_arg = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--vocab-dir", &missing))) vocab_dir = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--tokenizer", &missing))) tokenizer = v;
        else if (missing) {
            return lt_cli_usage(ctx, "option '%.200s' needs a value", a);
        } else if (a[0] == '-' && a[1] != '\0') {
            return lt_cli_unknown_option(ctx, a);
        } else if (dir) {
            return lt_cli_usage(ctx, "one output directory of `dataprep run` (DIR) is expected");
        } else {
            dir = a;
        }
    }
    if (!dir) return lt_cli_usage(ctx, "missing DIR (an output directory of `dataprep run`)");
    if (!format) return lt_cli_usage(ctx, "missing --format llmc|megatron");
    export_format fmt;
    if (strcmp(format, "llmc") == 0) fmt = FORMAT_LLMC;
    else if (strcmp(format, "megatron") == 0) fmt = FORMAT_MEGATRON;
    else return lt_cli_usage(ctx, "--format is llmc or megatron");
    if (!out_dir) return lt_cli_usage(ctx, "missing --out OUTDIR");
    bool one_task = task_arg != NULL;
    uint32_t only = 0;
    eos_source es = {0};
    char *end;
    if (task_arg) {
        errno = 0;
        unsigned long t = strtoul(task_arg, &end, 10);
        if (!*task_arg || *end || errno || t > UINT32_MAX || task_arg[0] == '-')
            return lt_cli_usage(ctx, "--task wants a task number (0, 1, ...)");
        only = (uint32_t)t;
    }
    if (eos_arg) {
        errno = 0;
        unsigned long t = strtoul(eos_arg, &end, 10);
        if (!*eos_arg || *end || errno || t > UINT32_MAX || eos_arg[0] == '-')
            return lt_cli_usage(ctx, "--eos-id wants a token id");
        es.given = true;
        es.id = (uint32_t)t;
    }
    es.vocab_dir = vocab_dir ? vocab_dir : lt_config_get_string(ctx->config, "data", "vocab_dir");
    es.tokenizer = tokenizer ? tokenizer : lt_config_get_string(ctx->config, "data", "tokenizer");

    lt_error err;
    lt_error_clear(&err);
    uint32_t *tasks = NULL;
    size_t n_tasks = 0, n_done = 0, n_incomplete = 0;
    lt_status st = list_tasks(dir, &tasks, &n_tasks, &err);
    uint32_t *todo = lt_malloc_check((n_tasks + 1) * sizeof *todo);
    for (size_t k = 0; k < n_tasks && st == LT_OK; k++) {
        if (one_task && tasks[k] != only) continue;
        char *done = lt_task_path(dir, tasks[k], "done");
        if (file_exists(done)) {
            todo[n_done++] = tasks[k];
        } else {
            n_incomplete++;
            if (one_task) {
                st = lt_fail(&err, LT_ERR_INPUT, done, "task %" PRIu32 " is not complete (no completion marker)",
                             tasks[k]);
                lt_error_hint(&err, "run (or rerun) that task of `dataprep run` first");
            } else {
                LT_WARN("export: task %" PRIu32 " is not complete (no %s); skipped", tasks[k], done);
            }
        }
        free(done);
    }
    if (st == LT_OK && n_done == 0) {
        if (one_task && n_incomplete == 0)
            st = lt_fail(&err, LT_ERR_INPUT, dir, "no task %" PRIu32 " here (no task-%05" PRIu32 ".index)", only, only);
        else
            st = lt_fail(&err, LT_ERR_INPUT, dir, "no complete task to export (%zu incomplete)", n_incomplete);
        lt_error_hint(&err, "DIR is the --out of `dataprep run`; a task is complete when task-NNNNN.done exists");
    }
    if (st == LT_OK) st = lt_mkdir_p(out_dir, 0777, &err);
    if (st == LT_OK)
        LT_INFO("export: %zu task%s of %s as %s into %s", n_done, n_done == 1 ? "" : "s", dir, format, out_dir);
    for (size_t k = 0; k < n_done && st == LT_OK; k++) st = export_task(dir, todo[k], fmt, out_dir, &es, &err);
    if (st == LT_OK && n_incomplete)
        LT_WARN("export: %zu incomplete task%s left out", n_incomplete, n_incomplete == 1 ? "" : "s");
    free(tasks);
    free(todo);
    return st == LT_OK ? 0 : lt_error_exit(&err);
}
