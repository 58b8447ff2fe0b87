/*
 * dataprep/run.c — `dataprep run`: one task of a corpus → token shard + index + stats +
 * completion marker (CONTRACTS.md; layouts in docs/formats.md).
 *
 * Task I of N takes files [I::N] of the sorted, duplicate-free input list, so a Slurm
 * array splits a corpus with no coordination. Every stage runs beside the others, and all
 * but the ordered append run on several threads (T = --threads):
 *
 *   readers (R)       files -> batches of ~1 MiB of text, a batch from one file only.
 *                     R = min(T, 8, files): each reader takes the next unread file, so
 *                     several files decompress at once. For JSONL the reader only cuts
 *                     lines (reader.h, record-parallel decoding), and decodes a batch itself
 *                     while the workers have decoded work waiting (reader_should_decode)
 *                     or when far ahead of them (reader_help); WET and wiki XML
 *                     records are framed and decoded here, each frame depending on the last.
 *   workers (T)       a batch at a time, the earliest file's first: decode its JSONL lines
 *                     (JSON, UTF-8 repair, truncation), then tokenize (own lt_tok_scratch)
 *   writer (main)     the files in task order, each file's batches in reading order ->
 *                     shard writer, which cuts frames and hands them to
 *   compressors (T)   zstd frames compressed independently (dataprep/shard.h), appended
 *                     by the writer in frame order
 *
 * Nothing that reaches an output depends on which thread did what: batches are cut by
 * the reader of their file alone, frames by the writer, skipped records travel with the
 * batches: shard, index, stats and marker are byte-identical for any --threads
 * (tests/dataprep/threads.sh). Profile that led here (bench/dataprep, 1 tokenizer thread,
 * perf, commit 8bdaa67): tokenizer 55 % of the CPU, writer 26 % (zstd 14 %, the shard's
 * SHA-256 6 %), reader 19 % (JSON scanning and unescaping 11 %, zstd decompression 4 %):
 * one reader and one writer would cap the run near 2-3 tokenizer threads' rate.
 *
 * Memory is bounded by a budget of text bytes in flight (batches not yet written), shared
 * by the readers: each waits when its share is used up, so a slow writer or tokenizer never
 * lets the queues grow (a line batch counts twice: lines and decoded text). The compressors
 * hold at most 2T + 1 frames. Outputs appear in this order, each atomically (temp + fsync +
 * rename, lib/files.h): shard, index, stats, marker. The marker (task-IIIII.done) says the
 * task is complete; without it the task is redone on the next run, and with it the task is
 * skipped unless --force (or refused when it was made with other settings). Same inputs
 * and settings give byte-identical shard, index, stats and marker: the timings go to a
 * separate file (task-IIIII.timings.json), the only output that differs between two runs.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dataprep/dataprep.h"  /* run_command */
#include "dataprep/hf_tokenizer.h" /* lt_hf_tokenizer_load (data.tokenizer) */
#include "dataprep/profile.h"   /* lt_profile_bucket_* (the length histogram) */
#include "dataprep/reader.h"    /* lt_reader_* */
#include "dataprep/shard.h"     /* lt_shard_writer_*, lt_task_path */
#include "dataprep/tokenizer.h" /* lt_tokenizer_* */
#include "lib/config.h"         /* lt_config_get_* */
#include "lib/files.h"          /* lt_glob_inputs, lt_mkdir_p, lt_write_file_atomic */
#include "lib/json.h"           /* lt_json writer and parser */
#include "lib/log.h"            /* LT_INFO, LT_WARN */
#include "lib/progress.h"       /* lt_progress */
#include "lib/sha256.h"         /* lt_sha256_hex */
#include "lib/strlist.h"        /* lt_strlist */
#include "lib/strutil.h"        /* lt_parse_int64 */
#include "lib/threadpool.h"      /* lt_pool_default_threads */

#define BATCH_TEXT_BYTES (1u << 20) /* a batch closes past this much text ... */
#define BATCH_MAX_DOCS 4096u        /* ... or this many documents */
#define SKIP_EXAMPLES_MAX 100       /* skipped records listed in the stats (all are counted) */
#define SKIP_WARNINGS_MAX 20        /* skipped records logged one by one */

/* ------------------------------------------------------------------ settings */

/* A named source ([source.NAME]) or the unnamed data.input (name ""): what its files are
 * read with. Every source is tokenized with the run's one encoding. */
typedef struct run_source {
    const char *name;
    lt_format format;
    const char *field;
} run_source;

typedef struct run_settings {
    lt_strlist inputs;    /* all inputs, sorted */
    uint32_t *input_src;  /* per input: its source (index into sources) */
    lt_strlist files;     /* this task's: inputs[task::num_tasks] */
    uint32_t *file_src;   /* per task file: its source */
    uint32_t *file_rg;    /* per task file: Parquet row groups [file_rg[2i], file_rg[2i+1]); NULL: whole files */
    run_source *sources;
    size_t n_sources;
    bool named;           /* some source has a name: the outputs record them */
    double max_skipped_share;
    const char *out_dir;
    uint32_t task, num_tasks;
    int threads;
    lt_format format;
    const char *field;
    uint64_t max_doc_bytes;
    const char *encoding, *vocab_dir;
    const char *tokenizer; /* data.tokenizer: a tokenizer.json, used instead of encoding when set */
    lt_eos_policy eos;
    int zstd_level;
    uint64_t frame_bytes;
    bool force, allow_damaged;
} run_settings;

/* ------------------------------------------------------------------ the pipeline */

typedef struct pdoc {
    uint32_t file, flags;
    size_t text_off, text_len;
    size_t id_off, name_off; /* in batch->strs */
    size_t ids_off, n_ids;   /* in batch->ids, after tokenization */
    uint64_t utf8_replacements;
    /* a JSONL line not decoded yet (a line batch, before its worker decodes it) */
    uint64_t line_no;
    bool too_long;
} pdoc;

/* A skipped record on its way to the stats: skips travel with the batches, so that the
 * writer sees them in input order whichever thread found them (the reader's thread for WET
 * and wiki XML, a worker for a JSONL line) and the stats are the same for any --threads. */
typedef struct skip_rec {
    char *where, *message;
    lt_skip_reason reason;
} skip_rec;

typedef struct skip_list {
    skip_rec *recs; /* the first SKIP_EXAMPLES_MAX */
    size_t n, cap;
    uint64_t dropped; /* beyond those: counted only */
} skip_list;

static void skip_list_add(skip_list *l, const char *where, lt_skip_reason reason, const char *message) {
    if (l->n >= SKIP_EXAMPLES_MAX) {
        l->dropped++;
        return;
    }
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->recs = lt_realloc_check(l->recs, l->cap * sizeof *l->recs);
    }
    skip_rec *r = &l->recs[l->n++];
    r->where = lt_strdup_check(where);
    r->message = lt_strdup_check(message);
    r->reason = reason;
}

static void skip_list_clear(skip_list *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->recs[i].where);
        free(l->recs[i].message);
    }
    l->n = 0;
    l->dropped = 0;
}

/* Move everything of `from` to the end of `to` (from is left empty). */
static void skip_list_move(skip_list *to, skip_list *from) {
    for (size_t i = 0; i < from->n; i++) {
        skip_rec *r = &from->recs[i];
        if (to->n >= SKIP_EXAMPLES_MAX) {
            to->dropped++;
            free(r->where);
            free(r->message);
            continue;
        }
        if (to->n == to->cap) {
            to->cap = to->cap ? 2 * to->cap : 8;
            to->recs = lt_realloc_check(to->recs, to->cap * sizeof *to->recs);
        }
        to->recs[to->n++] = *r;
    }
    to->dropped += from->dropped;
    from->n = 0;
    from->dropped = 0;
}

static void reader_stats_add(lt_reader_stats *to, const lt_reader_stats *from) {
    to->records += from->records;
    to->docs += from->docs;
    for (int r = 0; r < LT_SKIP_N_REASONS; r++) to->skipped[r] += from->skipped[r];
    to->filtered += from->filtered;
    to->truncated += from->truncated;
    to->repaired_docs += from->repaired_docs;
    to->utf8_replacements += from->utf8_replacements;
    to->text_bytes += from->text_bytes;
}

typedef struct batch {
    struct batch *next_work, *next_order;
    char *text;
    size_t text_len, text_cap;
    char *strs;
    size_t strs_len, strs_cap;
    pdoc *docs;
    size_t n_docs, docs_cap;
    uint32_t *ids;
    size_t ids_len, ids_cap;
    size_t budget_bytes; /* what it holds against the in-flight budget */
    /* A line batch holds raw JSONL lines; a worker (or its reader) decodes them
     * into documents (dtext, then swapped with text) before tokenizing, counting in stats. */
    bool lines;
    uint32_t file;           /* every batch holds documents (or lines) of one file */
    struct file_reader *reader; /* whose budget it counts against */
    char *dtext;
    size_t dtext_len, dtext_cap;
    lt_reader_stats stats;
    skip_list skips; /* in input order */
    bool done;
    lt_status st;
    lt_error err;
} batch;

/* What the reader learned about one file. */
typedef struct file_result {
    uint64_t size;
    lt_format format;
    lt_codec codec;
    lt_reader_stats stats;
    bool read;                     /* opened and read (to the end or to damage) */
    bool damaged;
    char damage_where[LT_ERROR_WHERE_MAX];
    char damage_what[LT_ERROR_WHAT_MAX];
    char damage_hint[LT_ERROR_HINT_MAX]; /* the reader's hint, if any (a Parquet column to read) */
    uint64_t tokens;               /* filled by the writer */
} file_result;

typedef struct skip_example {
    char *where, *message;
    lt_skip_reason reason;
} skip_example;

/* One reader thread: it takes the next unread file of the task, reads it to the end, and
 * takes the next; its batches count against its own share of the in-flight budget, so
 * that a reader ahead of the writer never holds up the one the writer waits for. */
typedef struct file_reader {
    struct pipeline *pl;
    pthread_t thread;
    size_t inflight, budget; /* bytes of its batches not yet written; its share (under pl->mu) */
    skip_list pending_skips; /* bad records it found, not yet attached to a batch */
    lt_line_decoder **decs;  /* one per source: to decode line batches when it is well ahead (reader_help) */
    struct batch *decoding;
    double cpu_decode;
} file_reader;

/* The batches of one file, in reading order, until the writer takes them. */
typedef struct file_queue {
    batch *head, *tail;
    bool read; /* its reader has submitted all of them */
} file_queue;

typedef struct pipeline {
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv, space_cv;
    batch *work;        /* batches to tokenize (any order: workers pick the earliest file) */
    batch *spare;       /* written batches kept for reuse (their buffers stay allocated) */
    size_t n_spare;
    file_queue *queues; /* one per task file */
    size_t next_file;   /* the next file a reader takes */
    size_t write_file;  /* the file the writer is at */
    int n_readers, readers_done;
    size_t n_work;      /* batches in `work` */
    size_t n_undecoded; /* of which line batches not decoded yet */
    bool abort;
    lt_status reader_st;
    lt_error reader_err;
    /* CPU seconds per stage, all its threads (the timings file): the serial stages' rates
     * bound the run whatever the number of tokenizer threads */
    double cpu_readers, cpu_decode, cpu_tokenize;

    const run_settings *rs;
    const lt_tokenizer *tok;
    lt_reader_opts ropts;
    file_result *results; /* one per task file */
    lt_reader_stats *line_stats; /* per task file: what was decoded of its lines (the writer adds) */
    uint64_t done_raw_before; /* raw bytes of files finished (progress) */

    skip_example examples[SKIP_EXAMPLES_MAX];
    size_t n_examples;
    uint64_t n_skips;
    lt_progress *prog;
} pipeline;

/* CPU seconds of the calling thread. */
static double thread_cpu_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static batch *batch_new(void) {
    batch *b = lt_calloc_check(1, sizeof *b);
    return b;
}

static void batch_free(batch *b) {
    if (!b) return;
    free(b->text);
    free(b->strs);
    free(b->docs);
    free(b->ids);
    free(b->dtext);
    skip_list_clear(&b->skips);
    free(b->skips.recs);
    free(b);
}

static size_t grow(size_t have, size_t need) {
    size_t cap = have ? have : 256;
    while (cap < need) cap *= 2;
    return cap;
}

static size_t batch_put_str(batch *b, const char *s) {
    size_t n = strlen(s) + 1, off = b->strs_len;
    if (off + n > b->strs_cap) {
        b->strs_cap = grow(b->strs_cap, off + n);
        b->strs = lt_realloc_check(b->strs, b->strs_cap);
    }
    memcpy(b->strs + off, s, n);
    b->strs_len += n;
    return off;
}

static void batch_add_doc(batch *b, uint32_t file, const lt_doc *d) {
    if (b->n_docs == b->docs_cap) {
        b->docs_cap = grow(b->docs_cap, b->n_docs + 1);
        b->docs = lt_realloc_check(b->docs, b->docs_cap * sizeof *b->docs);
    }
    if (b->text_len + d->len > b->text_cap) {
        b->text_cap = grow(b->text_cap, b->text_len + d->len);
        b->text = lt_realloc_check(b->text, b->text_cap);
    }
    pdoc *p = &b->docs[b->n_docs++];
    memset(p, 0, sizeof *p);
    p->file = file;
    p->flags = (d->truncated ? LT_DOC_TRUNCATED : 0u) | (d->utf8_replacements ? LT_DOC_REPAIRED : 0u);
    p->utf8_replacements = d->utf8_replacements;
    p->text_off = b->text_len;
    p->text_len = d->len;
    if (d->len) memcpy(b->text + b->text_len, d->text, d->len);
    b->text_len += d->len;
    p->id_off = batch_put_str(b, d->id ? d->id : "");
    p->name_off = batch_put_str(b, d->name ? d->name : "");
}

/* A raw JSONL line into a line batch (the reader's thread). */
static void batch_add_line(batch *b, uint32_t file, const lt_line *l) {
    if (b->n_docs == b->docs_cap) {
        b->docs_cap = grow(b->docs_cap, b->n_docs + 1);
        b->docs = lt_realloc_check(b->docs, b->docs_cap * sizeof *b->docs);
    }
    if (b->text_len + l->len > b->text_cap) {
        b->text_cap = grow(b->text_cap, b->text_len + l->len);
        b->text = lt_realloc_check(b->text, b->text_cap);
    }
    pdoc *p = &b->docs[b->n_docs++];
    memset(p, 0, sizeof *p);
    p->file = file;
    p->text_off = b->text_len;
    p->text_len = l->len;
    p->line_no = l->line_no;
    p->too_long = l->too_long;
    if (l->len) memcpy(b->text + b->text_len, l->text, l->len);
    b->text_len += l->len;
}

/* A worker's skip collector: the batch it is decoding. */
static void on_line_skip(void *ctx, const char *where, lt_skip_reason reason, const char *message) {
    batch **cur = ctx;
    skip_list_add(&(*cur)->skips, where, reason, message);
}

/* Decode a line batch into documents, in place (a worker's job): the documents replace the
 * lines in docs[], their texts go to dtext, which then becomes the batch's text. */
static void batch_decode_lines(batch *b, const pipeline *pl, lt_line_decoder *const *decs) {
    const char *path = pl->rs->files.items[b->file];
    lt_line_decoder *dec = decs[pl->rs->file_src[b->file]]; /* the file's source's field */
    size_t out = 0, empty = batch_put_str(b, "");
    b->dtext_len = 0;
    for (size_t i = 0; i < b->n_docs; i++) {
        const pdoc *p = &b->docs[i];
        lt_line line = {.text = b->text + p->text_off, .len = p->text_len, .line_no = p->line_no,
                        .too_long = p->too_long};
        uint32_t file = p->file;
        lt_doc d;
        bool is_doc = false;
        b->st = lt_line_decode(dec, path, &line, &b->stats, &d, &is_doc, &b->err);
        if (b->st != LT_OK) return;
        if (!is_doc) continue;
        if (b->dtext_len + d.len > b->dtext_cap) {
            b->dtext_cap = grow(b->dtext_cap, b->dtext_len + d.len);
            b->dtext = lt_realloc_check(b->dtext, b->dtext_cap);
        }
        pdoc *q = &b->docs[out++]; /* out <= i: line i has been read */
        memset(q, 0, sizeof *q);
        q->file = file;
        q->flags = (d.truncated ? LT_DOC_TRUNCATED : 0u) | (d.utf8_replacements ? LT_DOC_REPAIRED : 0u);
        q->utf8_replacements = d.utf8_replacements;
        q->text_off = b->dtext_len;
        q->text_len = d.len;
        if (d.len) memcpy(b->dtext + b->dtext_len, d.text, d.len);
        b->dtext_len += d.len;
        q->id_off = batch_put_str(b, d.id);
        q->name_off = empty;
    }
    b->n_docs = out;
    char *t = b->text;
    size_t cap = b->text_cap;
    b->text = b->dtext;
    b->text_cap = b->dtext_cap;
    b->text_len = b->dtext_len;
    b->dtext = t;
    b->dtext_cap = cap;
    b->dtext_len = 0;
    b->lines = false;
}

/* Tokenize every document of a batch (a worker's job). The reader's documents are valid
 * UTF-8 (reader.h), so the tokenizer need not check again, and byte-level BPE gives at most
 * one token per byte: text_len ids always suffice. */
static void batch_tokenize(batch *b, const lt_tokenizer *tok, lt_tok_scratch *scratch) {
    size_t need = b->text_len ? b->text_len : 1;
    if (need > b->ids_cap) {
        b->ids_cap = need;
        b->ids = lt_realloc_check(b->ids, b->ids_cap * sizeof *b->ids);
    }
    b->ids_len = 0;
    for (size_t i = 0; i < b->n_docs && b->st == LT_OK; i++) {
        pdoc *p = &b->docs[i];
        lt_encode_info info;
        b->st = lt_tokenizer_encode_utf8(tok, scratch, b->text + p->text_off, p->text_len, b->ids + b->ids_len,
                                    b->ids_cap - b->ids_len, &info, &b->err);
        if (b->st == LT_OK && info.n_tokens > b->ids_cap - b->ids_len)
            b->st = lt_fail(&b->err, LT_ERR_INTERNAL, NULL, "more tokens (%zu) than bytes (%zu) in a document",
                            info.n_tokens, p->text_len);
        if (b->st != LT_OK) break;
        p->ids_off = b->ids_len;
        p->n_ids = info.n_tokens;
        b->ids_len += info.n_tokens;
    }
}

/* Reader side: hand a filled batch to the workers and to its file's queue, waiting while
 * the reader's share of the budget is used up (one batch always goes: a document larger
 * than the share still passes, alone). */
static size_t batch_budget(const batch *b) {
    /* a line batch will also hold its decoded text, about as long as its lines */
    return (b->lines ? 2 : 1) * b->text_len + b->strs_len + b->n_docs * sizeof(pdoc);
}

static bool pipeline_submit(pipeline *pl, file_reader *rd, batch *b) {
    if (!b->budget_bytes) b->budget_bytes = batch_budget(b); /* else set before the reader decoded it */
    b->reader = rd;
    skip_list_move(&b->skips, &rd->pending_skips);
    pthread_mutex_lock(&pl->mu);
    while (!pl->abort && rd->inflight > 0 && rd->inflight + b->budget_bytes > rd->budget)
        pthread_cond_wait(&pl->space_cv, &pl->mu);
    bool ok = !pl->abort;
    if (ok) {
        rd->inflight += b->budget_bytes;
        b->next_work = pl->work;
        pl->work = b;
        pl->n_work++;
        pl->n_undecoded += b->lines;
        file_queue *q = &pl->queues[b->file];
        if (q->tail) q->tail->next_order = b;
        else q->head = b;
        q->tail = b;
        pthread_cond_signal(&pl->work_cv);
    }
    pthread_mutex_unlock(&pl->mu);
    if (!ok) batch_free(b);
    return ok;
}

/* Worker side (under pl->mu): the waiting batch of the earliest file, first submitted
 * first: the writer needs those before any other. */
static batch *pipeline_take_work(pipeline *pl) {
    batch **best = NULL;
    for (batch **pp = &pl->work; *pp; pp = &(*pp)->next_work)
        if (!best || (*pp)->file <= (*best)->file) best = pp; /* the list is newest first */
    if (!best) return NULL;
    batch *b = *best;
    *best = b->next_work;
    b->next_work = NULL;
    pl->n_work--;
    pl->n_undecoded -= b->lines;
    return b;
}

/* Reader side: decode a line batch on the reader's thread (its skips go to the batch). */
static void reader_decode(file_reader *rd, batch *b) {
    double c0 = thread_cpu_s();
    rd->decoding = b;
    batch_decode_lines(b, rd->pl, rd->decs);
    rd->decoding = NULL;
    rd->cpu_decode += thread_cpu_s() - c0;
}

/* Reader side, a line batch just filled: whether the reader decodes it before submitting.
 * Yes while the workers have a decoded batch each waiting: they do not need this one soon,
 * and decoding it here leaves them only tokenizing (T = 1 on 2 cores, bench/dataprep
 * 2026-11-26: 0.85-0.89 of the tokenizer alone, against 0.77-0.78 when the worker decoded;
 * the reader's core had room). No while they are short of work: a worker then decodes it,
 * in parallel with the reader cutting the next batch. */
static bool reader_should_decode(pipeline *pl) {
    pthread_mutex_lock(&pl->mu);
    bool yes = pl->n_work - pl->n_undecoded >= (size_t)pl->rs->threads;
    pthread_mutex_unlock(&pl->mu);
    return yes;
}

/* A reader well ahead of the workers (2T line batches waiting to be decoded) decodes the
 * newest one itself: its spare time rather than a worker's, which matters when the cores
 * are few (a one-file task on 2 cores: decoding is ~15 % of a worker's work). A reader that
 * is the bottleneck never gets this far ahead. The documents are the same whoever decodes
 * them. */
static void reader_help(pipeline *pl, file_reader *rd) {
    batch *b = NULL;
    pthread_mutex_lock(&pl->mu);
    if (!pl->abort && pl->n_undecoded >= 2 * (size_t)pl->rs->threads) {
        for (batch **pp = &pl->work; *pp; pp = &(*pp)->next_work) {
            if ((*pp)->lines) { /* the newest: the list is newest first */
                b = *pp;
                *pp = b->next_work;
                b->next_work = NULL;
                pl->n_work--;
                pl->n_undecoded--;
                break;
            }
        }
    }
    pthread_mutex_unlock(&pl->mu);
    if (!b) return;
    reader_decode(rd, b);
    pthread_mutex_lock(&pl->mu);
    b->next_work = pl->work; /* back, decoded: a worker tokenizes it */
    pl->work = b;
    pl->n_work++;
    pthread_cond_signal(&pl->work_cv);
    pthread_mutex_unlock(&pl->mu);
}

/* Reader side: an empty batch, reusing a written one when there is one (no page faults
 * for fresh buffers on every batch). */
static batch *pipeline_take_batch(pipeline *pl, uint32_t file) {
    pthread_mutex_lock(&pl->mu);
    batch *b = pl->spare;
    if (b) {
        pl->spare = b->next_order;
        pl->n_spare--;
    }
    pthread_mutex_unlock(&pl->mu);
    if (!b) b = batch_new();
    b->file = file;
    b->next_work = b->next_order = NULL;
    b->text_len = b->strs_len = b->n_docs = b->ids_len = b->budget_bytes = b->dtext_len = 0;
    b->lines = false;
    memset(&b->stats, 0, sizeof b->stats);
    skip_list_clear(&b->skips);
    b->done = false;
    b->st = LT_OK;
    lt_error_clear(&b->err);
    return b;
}

/* Writer side: keep a written batch for reuse (a few per thread), else free it. */
static void pipeline_recycle(pipeline *pl, batch *b) {
    pthread_mutex_lock(&pl->mu);
    bool keep = pl->n_spare < (size_t)pl->rs->threads + 4 && b->text_cap <= 4u * BATCH_TEXT_BYTES &&
                b->dtext_cap <= 4u * BATCH_TEXT_BYTES;
    if (keep) {
        b->next_order = pl->spare;
        pl->spare = b;
        pl->n_spare++;
    }
    pthread_mutex_unlock(&pl->mu);
    if (!keep) batch_free(b);
}

/* The reader's thread found a bad record: it goes with the next batch submitted. */
static void on_skip(void *ctx, const char *where, lt_skip_reason reason, const char *message) {
    file_reader *rd = ctx;
    skip_list_add(&rd->pending_skips, where, reason, message);
}

/* The writer's thread, in input order: log the first few, keep the first examples. */
static void record_skip(pipeline *pl, const char *where, lt_skip_reason reason, const char *message) {
    pl->n_skips++;
    if (pl->n_skips <= SKIP_WARNINGS_MAX)
        LT_WARN("skipped a record: %s (%s) [%s]", message, where, lt_skip_reason_key(reason));
    else if (pl->n_skips == SKIP_WARNINGS_MAX + 1)
        LT_WARN("more records skipped; the stats file lists the first %d and counts all", SKIP_EXAMPLES_MAX);
    if (pl->n_examples < SKIP_EXAMPLES_MAX) {
        skip_example *e = &pl->examples[pl->n_examples++];
        e->where = lt_strdup_check(where);
        e->message = lt_strdup_check(message);
        e->reason = reason;
    }
}

/* Read one file into batches (its own: a batch never spans files). Damage ends the file
 * (recorded), I/O errors end the task. Returns LT_OK also when the run was aborted (the
 * writer has the error). */
static lt_status read_file(pipeline *pl, file_reader *rd, uint32_t fi, lt_error *err) {
    const char *path = pl->rs->files.items[fi];
    file_result *fr = &pl->results[fi];
    const run_source *src = &pl->rs->sources[pl->rs->file_src[fi]];
    lt_reader_opts ropts = pl->ropts;
    ropts.format = src->format;
    ropts.field = src->field;
    ropts.skip_ctx = rd;
    if (pl->rs->file_rg) {
        ropts.rg_begin = pl->rs->file_rg[2 * fi];
        ropts.rg_end = pl->rs->file_rg[2 * fi + 1];
    }
    lt_reader *r = NULL;
    lt_status st = lt_reader_open(&r, path, &ropts, err);
    if (st != LT_OK) {
        if (st == LT_ERR_INPUT) { /* cannot tell the format, not compressed as named, no such column ... */
            fr->damaged = true;
            snprintf(fr->damage_where, sizeof fr->damage_where, "%s", err->where[0] ? err->where : path);
            snprintf(fr->damage_what, sizeof fr->damage_what, "%s", err->what);
            snprintf(fr->damage_hint, sizeof fr->damage_hint, "%s", err->hint);
            lt_error_clear(err);
            return LT_OK;
        }
        return st;
    }
    fr->format = lt_reader_format(r);
    fr->codec = lt_src_codec(lt_reader_source(r));
    /* JSONL: only cut lines here; the workers decode them (reader.h, record-parallel
     * decoding), counting its statistics per batch. */
    const bool lines = lt_reader_has_lines(r);
    uint64_t reported_raw = 0, n_lines = 0;
    batch *cur = NULL;
    bool aborted = false;
    for (;;) {
        bool eof = false;
        if (lines) {
            lt_line line;
            st = lt_reader_next_line(r, &line, &eof, err);
            if (st != LT_OK || eof) break;
            n_lines++;
            if (!cur) {
                cur = pipeline_take_batch(pl, fi);
                cur->lines = true;
            }
            batch_add_line(cur, fi, &line);
        } else {
            lt_doc d;
            st = lt_reader_next(r, &d, &eof, err);
            if (st != LT_OK || eof) break;
            if (!cur) cur = pipeline_take_batch(pl, fi);
            batch_add_doc(cur, fi, &d);
        }
        if (cur->text_len >= BATCH_TEXT_BYTES || cur->n_docs >= BATCH_MAX_DOCS) {
            batch *b = cur;
            cur = NULL;
            if (lines && reader_should_decode(pl)) {
                b->budget_bytes = batch_budget(b); /* it holds the lines' buffer still */
                reader_decode(rd, b);
            }
            if (!pipeline_submit(pl, rd, b)) {
                aborted = true;
                break;
            }
            if (lines) reader_help(pl, rd);
        }
        uint64_t raw = lt_src_raw_offset(lt_reader_source(r));
        if (raw > reported_raw) {
            lt_progress_add(pl->prog, raw - reported_raw);
            reported_raw = raw;
        }
    }
    if (aborted) {
        lt_reader_close(r);
        return LT_OK;
    }
    if (st == LT_OK || st == LT_ERR_INPUT) {
        /* the rest, and the skips found after the last document (on an empty batch) */
        if (!cur && (rd->pending_skips.n || rd->pending_skips.dropped)) cur = pipeline_take_batch(pl, fi);
        if (cur && !pipeline_submit(pl, rd, cur)) {
            lt_reader_close(r);
            return LT_OK;
        }
    } else {
        batch_free(cur);
    }
    fr->stats = *lt_reader_get_stats(r);
    fr->read = true;
    if (st == LT_ERR_INPUT) {
        fr->damaged = true;
        snprintf(fr->damage_where, sizeof fr->damage_where, "%s", err->where[0] ? err->where : path);
        snprintf(fr->damage_what, sizeof fr->damage_what, "%s", err->what);
        if (lines)
            LT_WARN("damaged input: %s (%s); the %" PRIu64 " lines before the damage are kept", err->what,
                    fr->damage_where, n_lines);
        else
            LT_WARN("damaged input: %s (%s); %" PRIu64 " documents before the damage are kept", err->what,
                    fr->damage_where, fr->stats.docs);
        lt_error_clear(err);
        st = LT_OK;
    }
    if (fr->size > reported_raw) lt_progress_add(pl->prog, fr->size - reported_raw);
    lt_reader_close(r);
    return st;
}

/* A line decoder per source (each with its source's field), reporting skips to the batch
 * *decoding points to. */
static lt_line_decoder **line_decoders_new(const pipeline *pl, batch **decoding) {
    const run_settings *rs = pl->rs;
    lt_line_decoder **decs = lt_calloc_check(rs->n_sources, sizeof *decs);
    for (size_t i = 0; i < rs->n_sources; i++) {
        lt_reader_opts o = pl->ropts;
        o.format = rs->sources[i].format;
        o.field = rs->sources[i].field;
        o.on_skip = on_line_skip;
        o.skip_ctx = decoding;
        decs[i] = lt_line_decoder_new(&o);
    }
    return decs;
}

static void line_decoders_free(const pipeline *pl, lt_line_decoder **decs) {
    if (!decs) return;
    for (size_t i = 0; i < pl->rs->n_sources; i++) lt_line_decoder_free(decs[i]);
    free(decs);
}

static void *reader_main(void *arg) {
    file_reader *rd = arg;
    pipeline *pl = rd->pl;
    lt_status st = LT_OK;
    lt_error err;
    lt_error_clear(&err);
    rd->decs = line_decoders_new(pl, &rd->decoding);
    for (;;) {
        pthread_mutex_lock(&pl->mu);
        size_t fi = pl->abort ? pl->rs->files.count : pl->next_file++;
        pthread_mutex_unlock(&pl->mu);
        if (fi >= pl->rs->files.count) break;
        LT_DEBUG("reading %s", pl->rs->files.items[fi]);
        st = read_file(pl, rd, (uint32_t)fi, &err);
        skip_list_clear(&rd->pending_skips); /* left only after an I/O error or an abort */
        pthread_mutex_lock(&pl->mu);
        pl->queues[fi].read = true;
        if (st != LT_OK && !pl->abort) {
            pl->reader_st = st;
            pl->reader_err = err;
            pl->abort = true;
            pthread_cond_broadcast(&pl->space_cv);
        }
        pthread_cond_broadcast(&pl->done_cv);
        pthread_mutex_unlock(&pl->mu);
        if (st != LT_OK) break;
    }
    line_decoders_free(pl, rd->decs);
    rd->decs = NULL;
    pthread_mutex_lock(&pl->mu);
    pl->cpu_readers += thread_cpu_s() - rd->cpu_decode;
    pl->cpu_decode += rd->cpu_decode;
    pl->readers_done++;
    pthread_cond_broadcast(&pl->work_cv);
    pthread_cond_broadcast(&pl->done_cv);
    pthread_mutex_unlock(&pl->mu);
    return NULL;
}

static void *worker_main(void *arg) {
    pipeline *pl = arg;
    lt_tok_scratch *scratch = lt_tok_scratch_new();
    if (!scratch) lt_malloc_check(SIZE_MAX); /* reports out of memory and exits */
    batch *decoding = NULL; /* the batch whose lines are being decoded: skips go to it */
    lt_line_decoder **decs = line_decoders_new(pl, &decoding);
    double cpu_decode = 0, cpu_tokenize = 0;
    for (;;) {
        pthread_mutex_lock(&pl->mu);
        while (!pl->work && pl->readers_done < pl->n_readers && !pl->abort)
            pthread_cond_wait(&pl->work_cv, &pl->mu);
        batch *b = pl->abort ? NULL : pipeline_take_work(pl);
        pthread_mutex_unlock(&pl->mu);
        if (!b) break;
        double c0 = thread_cpu_s();
        if (b->lines) {
            decoding = b;
            batch_decode_lines(b, pl, decs);
            decoding = NULL;
        }
        double c1 = thread_cpu_s();
        if (b->st == LT_OK) batch_tokenize(b, pl->tok, scratch);
        cpu_decode += c1 - c0;
        cpu_tokenize += thread_cpu_s() - c1;
        pthread_mutex_lock(&pl->mu);
        b->done = true;
        pthread_cond_broadcast(&pl->done_cv);
        pthread_mutex_unlock(&pl->mu);
    }
    lt_tok_scratch_free(scratch);
    line_decoders_free(pl, decs);
    pthread_mutex_lock(&pl->mu);
    pl->cpu_decode += cpu_decode;
    pl->cpu_tokenize += cpu_tokenize;
    pthread_mutex_unlock(&pl->mu);
    return NULL;
}

/* ------------------------------------------------------------------ length histogram */

#define HIST_BUCKETS LT_PROFILE_N_BUCKETS /* the buckets of `dataprep profile` */

typedef struct run_totals {
    uint64_t docs, tokens, text_bytes, max_doc_tokens;
    uint64_t hist_docs[HIST_BUCKETS], hist_tokens[HIST_BUCKETS];
} run_totals;

/* The writer: the files in task order, each file's batches in reading order, into the
 * shard. */
static lt_status write_batches(pipeline *pl, lt_shard_writer *w, run_totals *tot, lt_error *err) {
    lt_status st = LT_OK;
    for (;;) {
        batch *b = NULL;
        pthread_mutex_lock(&pl->mu);
        while (!pl->abort && pl->write_file < pl->rs->files.count) {
            file_queue *q = &pl->queues[pl->write_file];
            if (q->head && q->head->done) {
                b = q->head;
                q->head = b->next_order;
                if (!q->head) q->tail = NULL;
                break;
            }
            if (!q->head && q->read) {
                pl->write_file++;
                continue;
            }
            pthread_cond_wait(&pl->done_cv, &pl->mu);
        }
        pthread_mutex_unlock(&pl->mu);
        if (!b) break;
        if (b->st != LT_OK) {
            *err = b->err;
            st = b->st;
        }
        for (size_t i = 0; i < b->skips.n; i++)
            record_skip(pl, b->skips.recs[i].where, b->skips.recs[i].reason, b->skips.recs[i].message);
        pl->n_skips += b->skips.dropped;
        skip_list_clear(&b->skips);
        if (b->stats.records) reader_stats_add(&pl->line_stats[b->file], &b->stats);
        for (size_t i = 0; st == LT_OK && i < b->n_docs; i++) {
            const pdoc *p = &b->docs[i];
            st = lt_shard_writer_add_doc(w, p->file, b->strs + p->id_off, b->strs + p->name_off, p->flags,
                                         b->ids + p->ids_off, p->n_ids, err);
            uint64_t n = p->n_ids + (pl->rs->eos == LT_EOS_APPEND);
            tot->docs++;
            tot->tokens += n;
            tot->text_bytes += p->text_len;
            if (n > tot->max_doc_tokens) tot->max_doc_tokens = n;
            size_t hb = lt_profile_bucket_of(n);
            tot->hist_docs[hb]++;
            tot->hist_tokens[hb] += n;
            pl->results[p->file].tokens += n;
        }
        lt_progress_add_extra(pl->prog, 0, b->n_docs);
        lt_progress_add_extra(pl->prog, 1, b->text_len);
        lt_progress_add_extra(pl->prog, 2, b->ids_len);
        pthread_mutex_lock(&pl->mu);
        b->reader->inflight -= b->budget_bytes;
        if (st != LT_OK) pl->abort = true;
        pthread_cond_broadcast(&pl->space_cv);
        pthread_cond_broadcast(&pl->work_cv);
        pthread_mutex_unlock(&pl->mu);
        pipeline_recycle(pl, b);
        if (st != LT_OK) break;
    }
    return st;
}

/* ------------------------------------------------------------------ stats, marker */

/* The settings that decide a task's output; stored in the stats and the marker, and
 * compared on a rerun (a finished task made with other settings is not silently kept). */
static void settings_json(lt_json *j, const run_settings *rs, const lt_tokenizer *tok, const file_result *res) {
    lt_json_object_begin(j);
    lt_json_key(j, "task");
    lt_json_uint(j, rs->task);
    lt_json_key(j, "num_tasks");
    lt_json_uint(j, rs->num_tasks);
    lt_json_key(j, "encoding");
    lt_json_string(j, lt_tokenizer_name(tok));
    lt_json_key(j, "vocab_sha256");
    lt_json_string(j, lt_tokenizer_vocab_sha256(tok));
    if (rs->tokenizer) { /* a tokenizer.json: where the tools find it again (dataset.h) */
        lt_json_key(j, "tokenizer");
        lt_json_string(j, rs->tokenizer);
    }
    lt_json_key(j, "format");
    lt_json_string(j, lt_format_name(rs->format));
    lt_json_key(j, "field");
    lt_json_string(j, rs->field);
    if (rs->named) { /* [source.NAME] sections: how each source's files are read */
        lt_json_key(j, "sources");
        lt_json_array_begin(j);
        for (size_t i = 0; i < rs->n_sources; i++) {
            lt_json_object_begin(j);
            lt_json_key(j, "name");
            lt_json_string(j, rs->sources[i].name);
            lt_json_key(j, "format");
            lt_json_string(j, lt_format_name(rs->sources[i].format));
            lt_json_key(j, "field");
            lt_json_string(j, rs->sources[i].field);
            lt_json_object_end(j);
        }
        lt_json_array_end(j);
    }
    lt_json_key(j, "max_doc_bytes");
    lt_json_uint(j, rs->max_doc_bytes);
    lt_json_key(j, "eos");
    lt_json_string(j, rs->eos == LT_EOS_APPEND ? "append" : "none");
    lt_json_key(j, "frame_size");
    lt_json_uint(j, rs->frame_bytes);
    lt_json_key(j, "zstd_level");
    lt_json_int(j, rs->zstd_level);
    lt_json_key(j, "inputs");
    lt_json_array_begin(j);
    for (size_t i = 0; i < rs->files.count; i++) {
        lt_json_object_begin(j);
        lt_json_key(j, "path");
        lt_json_string(j, rs->files.items[i]);
        lt_json_key(j, "bytes");
        lt_json_uint(j, res[i].size);
        if (rs->named) {
            lt_json_key(j, "source");
            lt_json_string(j, rs->sources[rs->file_src[i]].name);
        }
        if (rs->file_rg) { /* a Parquet file split by row groups: this task's share */
            lt_json_key(j, "row_groups");
            lt_json_array_begin(j);
            lt_json_uint(j, rs->file_rg[2 * i]);
            lt_json_uint(j, rs->file_rg[2 * i + 1]);
            lt_json_array_end(j);
        }
        lt_json_object_end(j);
    }
    lt_json_array_end(j);
    lt_json_object_end(j);
}

static void skip_counts_json(lt_json *j, const uint64_t *skipped) {
    uint64_t total = 0;
    for (int r = 0; r < LT_SKIP_N_REASONS; r++) total += skipped[r];
    lt_json_object_begin(j);
    lt_json_key(j, "total");
    lt_json_uint(j, total);
    for (int r = 0; r < LT_SKIP_N_REASONS; r++) {
        lt_json_key(j, lt_skip_reason_key((lt_skip_reason)r));
        lt_json_uint(j, skipped[r]);
    }
    lt_json_object_end(j);
}

static void file_stat_json(lt_json *j, const char *name, const char *file, uint64_t bytes, const uint8_t *sha) {
    char hex[LT_SHA256_HEX_LEN + 1];
    lt_sha256_digest_hex(sha, hex);
    lt_json_key(j, name);
    lt_json_object_begin(j);
    lt_json_key(j, "file");
    lt_json_string(j, file);
    lt_json_key(j, "bytes");
    lt_json_uint(j, bytes);
    lt_json_key(j, "sha256");
    lt_json_string(j, hex);
    lt_json_object_end(j);
}

static void stats_json(lt_json *j, const pipeline *pl, const run_settings *rs, const lt_tokenizer *tok,
                       const run_totals *tot, const lt_shard_summary *sum, const char *shard_path,
                       const char *index_path) {
    uint64_t skipped[LT_SKIP_N_REASONS] = {0};
    uint64_t filtered = 0, truncated = 0, repaired = 0, repl = 0, records = 0, input_bytes = 0, damaged = 0;
    for (size_t i = 0; i < rs->files.count; i++) {
        const file_result *fr = &pl->results[i];
        for (int r = 0; r < LT_SKIP_N_REASONS; r++) skipped[r] += fr->stats.skipped[r];
        filtered += fr->stats.filtered;
        truncated += fr->stats.truncated;
        repaired += fr->stats.repaired_docs;
        repl += fr->stats.utf8_replacements;
        records += fr->stats.records;
        input_bytes += fr->size;
        damaged += fr->damaged;
    }
    lt_json_object_begin(j);
    lt_json_key(j, "stats_version");
    lt_json_int(j, 1);
    lt_json_key(j, "settings");
    settings_json(j, rs, tok, pl->results);
    lt_json_key(j, "documents");
    lt_json_uint(j, tot->docs);
    lt_json_key(j, "tokens");
    lt_json_uint(j, tot->tokens);
    lt_json_key(j, "text_bytes");
    lt_json_uint(j, tot->text_bytes);
    lt_json_key(j, "input_bytes");
    lt_json_uint(j, input_bytes);
    lt_json_key(j, "records");
    lt_json_uint(j, records);
    lt_json_key(j, "filtered");
    lt_json_uint(j, filtered);
    lt_json_key(j, "skipped");
    skip_counts_json(j, skipped);
    lt_json_key(j, "skipped_examples");
    lt_json_array_begin(j);
    for (size_t i = 0; i < pl->n_examples; i++) {
        lt_json_object_begin(j);
        lt_json_key(j, "where");
        lt_json_string(j, pl->examples[i].where);
        lt_json_key(j, "reason");
        lt_json_string(j, lt_skip_reason_key(pl->examples[i].reason));
        lt_json_key(j, "message");
        lt_json_string(j, pl->examples[i].message);
        lt_json_object_end(j);
    }
    lt_json_array_end(j);
    lt_json_key(j, "truncated_documents");
    lt_json_uint(j, truncated);
    lt_json_key(j, "repaired_documents");
    lt_json_uint(j, repaired);
    lt_json_key(j, "utf8_replacements");
    lt_json_uint(j, repl);
    lt_json_key(j, "damaged_files");
    lt_json_uint(j, damaged);
    lt_json_key(j, "max_document_tokens");
    lt_json_uint(j, tot->max_doc_tokens);
    if (rs->named) { /* per source: this task's share of it */
        lt_json_key(j, "sources");
        lt_json_array_begin(j);
        for (size_t k = 0; k < rs->n_sources; k++) {
            uint64_t files = 0, docs = 0, tokens = 0, recs = 0, skips = 0, bytes = 0;
            for (size_t i = 0; i < rs->files.count; i++) {
                if (rs->file_src[i] != k) continue;
                const file_result *fr = &pl->results[i];
                files++;
                docs += fr->stats.docs;
                tokens += fr->tokens;
                recs += fr->stats.records;
                bytes += fr->stats.text_bytes;
                for (int r = 0; r < LT_SKIP_N_REASONS; r++) skips += fr->stats.skipped[r];
            }
            lt_json_object_begin(j);
            lt_json_key(j, "name");
            lt_json_string(j, rs->sources[k].name);
            lt_json_key(j, "files");
            lt_json_uint(j, files);
            lt_json_key(j, "records");
            lt_json_uint(j, recs);
            lt_json_key(j, "documents");
            lt_json_uint(j, docs);
            lt_json_key(j, "tokens");
            lt_json_uint(j, tokens);
            lt_json_key(j, "text_bytes");
            lt_json_uint(j, bytes);
            lt_json_key(j, "skipped");
            lt_json_uint(j, skips);
            lt_json_object_end(j);
        }
        lt_json_array_end(j);
    }
    lt_json_key(j, "length_histogram");
    lt_json_array_begin(j);
    for (size_t b = 0; b < HIST_BUCKETS; b++) {
        lt_json_object_begin(j);
        lt_json_key(j, "bucket");
        lt_json_string(j, lt_profile_bucket_label(b));
        lt_json_key(j, "min_tokens");
        lt_json_uint(j, lt_profile_bucket_min(b));
        lt_json_key(j, "max_tokens");
        if (b + 1 == HIST_BUCKETS) lt_json_null(j);
        else lt_json_uint(j, lt_profile_bucket_max(b));
        lt_json_key(j, "documents");
        lt_json_uint(j, tot->hist_docs[b]);
        lt_json_key(j, "tokens");
        lt_json_uint(j, tot->hist_tokens[b]);
        lt_json_object_end(j);
    }
    lt_json_array_end(j);
    lt_json_key(j, "files");
    lt_json_array_begin(j);
    for (size_t i = 0; i < rs->files.count; i++) {
        const file_result *fr = &pl->results[i];
        lt_json_object_begin(j);
        lt_json_key(j, "path");
        lt_json_string(j, rs->files.items[i]);
        if (rs->named) {
            lt_json_key(j, "source");
            lt_json_string(j, rs->sources[rs->file_src[i]].name);
        }
        lt_json_key(j, "bytes");
        lt_json_uint(j, fr->size);
        lt_json_key(j, "format");
        lt_json_string(j, fr->read ? lt_format_name(fr->format) : "unknown");
        lt_json_key(j, "compression");
        lt_json_string(j, fr->read ? lt_codec_name(fr->codec) : "unknown");
        lt_json_key(j, "records");
        lt_json_uint(j, fr->stats.records);
        lt_json_key(j, "documents");
        lt_json_uint(j, fr->stats.docs);
        lt_json_key(j, "tokens");
        lt_json_uint(j, fr->tokens);
        lt_json_key(j, "text_bytes");
        lt_json_uint(j, fr->stats.text_bytes);
        lt_json_key(j, "filtered");
        lt_json_uint(j, fr->stats.filtered);
        lt_json_key(j, "skipped");
        skip_counts_json(j, fr->stats.skipped);
        lt_json_key(j, "truncated_documents");
        lt_json_uint(j, fr->stats.truncated);
        lt_json_key(j, "repaired_documents");
        lt_json_uint(j, fr->stats.repaired_docs);
        lt_json_key(j, "utf8_replacements");
        lt_json_uint(j, fr->stats.utf8_replacements);
        lt_json_key(j, "damage");
        if (fr->damaged) {
            lt_json_object_begin(j);
            lt_json_key(j, "where");
            lt_json_string(j, fr->damage_where);
            lt_json_key(j, "error");
            lt_json_string(j, fr->damage_what);
            lt_json_object_end(j);
        } else {
            lt_json_null(j);
        }
        lt_json_object_end(j);
    }
    lt_json_array_end(j);
    lt_json_key(j, "outputs");
    lt_json_object_begin(j);
    file_stat_json(j, "shard", lt_path_base(shard_path), sum->shard_bytes, sum->shard_sha256);
    file_stat_json(j, "index", lt_path_base(index_path), sum->index_bytes, sum->index_sha256);
    lt_json_key(j, "frames");
    lt_json_uint(j, sum->n_frames);
    lt_json_object_end(j);
    lt_json_object_end(j);
}

/* Write a JSON document (plus a newline) atomically. */
static lt_status write_json_file(const char *path, const lt_json *j, uint8_t sha[32], uint64_t *bytes,
                                 lt_error *err) {
    const char *text = lt_json_cstr(j);
    size_t n = strlen(text);
    char *buf = lt_malloc_check(n + 2);
    memcpy(buf, text, n);
    buf[n++] = '\n';
    lt_status st = lt_write_file_atomic(path, buf, n, err);
    if (sha) {
        lt_sha256 h;
        lt_sha256_init(&h);
        lt_sha256_update(&h, buf, n);
        lt_sha256_final(&h, sha);
    }
    if (bytes) *bytes = n;
    free(buf);
    return st;
}

/* ------------------------------------------------------------------ resume */

typedef enum { DONE_NONE, DONE_SAME, DONE_OTHER } done_state;

/* Is the task finished already, with these settings? On DONE_OTHER, `diff` names the
 * first setting that differs. */
static lt_status check_done(const char *done_path, const lt_json *settings, done_state *out, char *diff,
                            size_t diff_size, lt_error *err) {
    *out = DONE_NONE;
    struct stat sb;
    if (stat(done_path, &sb) != 0) {
        if (errno == ENOENT) return LT_OK;
        return lt_fail(err, LT_ERR_IO, done_path, "cannot stat: %s", strerror(errno));
    }
    char *text;
    size_t len;
    lt_status st = lt_read_file(done_path, &text, &len, err);
    if (st != LT_OK) return st;
    lt_jv *old = NULL, *cur = NULL;
    st = lt_json_parse(text, len, &old, err);
    free(text);
    if (st != LT_OK) {
        lt_error_prefix(err, "%s: ", done_path);
        lt_error_hint(err, "a damaged completion marker: delete it (the task is then redone) or use --force");
        return st;
    }
    const char *ctext = lt_json_cstr(settings);
    st = lt_json_parse(ctext, strlen(ctext), &cur, err);
    if (st != LT_OK) {
        lt_jv_free(old);
        return st;
    }
    const lt_jv *os = lt_jv_get(old, "settings");
    if (os && lt_jv_equal(os, cur)) {
        *out = DONE_SAME;
    } else {
        *out = DONE_OTHER;
        snprintf(diff, diff_size, "settings");
        static const char *const keys[] = {"task", "num_tasks", "encoding", "vocab_sha256", "format", "field",
                                           "sources", "max_doc_bytes", "eos", "frame_size", "zstd_level", "inputs"};
        for (size_t k = 0; os && k < sizeof keys / sizeof keys[0]; k++) {
            const lt_jv *a = lt_jv_get(os, keys[k]), *b = lt_jv_get(cur, keys[k]);
            if ((!a) != (!b) || (a && !lt_jv_equal(a, b))) {
                snprintf(diff, diff_size, "%s", keys[k]);
                break;
            }
        }
    }
    lt_jv_free(old);
    lt_jv_free(cur);
    return LT_OK;
}

/* ------------------------------------------------------------------ the task */

/* The hint for a file whose records all miss the field: from the first skip message of
 * the file, which names the record's members and its longest string (reader_jsonl.c). */
static void field_hint(const pipeline *pl, const run_settings *rs, size_t fi, char *hint, size_t cap) {
    const char *path = rs->files.items[fi], *msg = NULL;
    size_t pl_len = strlen(path);
    for (size_t i = 0; i < pl->n_examples && !msg; i++)
        if (strncmp(pl->examples[i].where, path, pl_len) == 0 && pl->examples[i].where[pl_len] == ':') msg = pl->examples[i].message;
    hint[0] = '\0';
    if (!msg) return;
    const char *members = strstr(msg, "(members: "), *longest = strstr(msg, "longest string: ");
    if (!members) return;
    members += strlen("(members: ");
    size_t mlen = strcspn(members, ";)");
    const char *name = rs->sources[rs->file_src[fi]].name;
    if (longest) {
        longest += strlen("longest string: ");
        size_t llen = strcspn(longest, ")");
        if (name[0])
            snprintf(hint, cap, "records have members %.*s: set field = %.*s for source %s", (int)mlen, members,
                     (int)llen, longest, name);
        else
            snprintf(hint, cap, "records have members %.*s: set data.field = %.*s (or --field %.*s)", (int)mlen,
                     members, (int)llen, longest, (int)llen, longest);
    } else {
        snprintf(hint, cap, "records have members %.*s: name the text member with %s", (int)mlen, members,
                 name[0] ? "the source's field" : "data.field");
    }
}

/* What a task read must be worth keeping: no file whose records were all skipped, no
 * source without a document, at most max_skipped_share of the records skipped (Parquet
 * nulls, text that is missing rather than broken, do not count there). Each problem is
 * reported; the status names the first. */
static lt_status check_yield(const pipeline *pl, const run_settings *rs, lt_error *err) {
    lt_status st = LT_OK;
    size_t problems = 0;
    uint64_t records = 0, skipped = 0, by_reason[LT_SKIP_N_REASONS] = {0};
    for (size_t i = 0; i < rs->files.count; i++) {
        const file_result *fr = &pl->results[i];
        uint64_t sk = 0;
        int top = 0;
        for (int r = 0; r < LT_SKIP_N_REASONS; r++) {
            sk += fr->stats.skipped[r];
            by_reason[r] += fr->stats.skipped[r];
            if (fr->stats.skipped[r] > fr->stats.skipped[top]) top = r;
        }
        records += fr->stats.records;
        skipped += sk - fr->stats.skipped[LT_SKIP_NULL_VALUE]; /* a null is missing text, not a bad record */
        if (!fr->read || fr->damaged || fr->stats.docs > 0 || sk == 0) continue;
        char hint[LT_ERROR_HINT_MAX];
        field_hint(pl, rs, i, hint, sizeof hint);
        const char *name = rs->sources[rs->file_src[i]].name;
        lt_report(rs->files.items[i], hint[0] ? hint : NULL,
                  "no document: all %" PRIu64 " records were skipped (%" PRIu64 " %s)%s%s", sk,
                  fr->stats.skipped[top], lt_skip_reason_key((lt_skip_reason)top), name[0] ? ", source " : "", name);
        problems++;
    }
    for (size_t k = 0; k < rs->n_sources; k++) {
        uint64_t files = 0, docs = 0;
        for (size_t i = 0; i < rs->files.count; i++)
            if (rs->file_src[i] == k) {
                files++;
                docs += pl->results[i].stats.docs;
            }
        if (files == 0 || docs > 0 || !rs->sources[k].name[0]) continue;
        char hint[128];
        snprintf(hint, sizeof hint, "check its input, format and field in [source.%s]", rs->sources[k].name);
        lt_report(rs->out_dir, hint, "source %s has no document in this task's %" PRIu64 " file%s",
                  rs->sources[k].name, files, files == 1 ? "" : "s");
        problems++;
    }
    if (problems) {
        st = lt_fail(err, LT_ERR_INPUT, rs->out_dir, "%zu input problem%s (above); the task is not marked done", problems,
                     problems == 1 ? "" : "s");
        lt_error_hint(err, "the task's stats.json lists the skipped records; data.allow_damaged keeps the task anyway");
    }
    if (st == LT_OK && records > 0 && (double)skipped > rs->max_skipped_share * (double)records) {
        int top = 0;
        by_reason[LT_SKIP_NULL_VALUE] = 0;
        for (int r = 1; r < LT_SKIP_N_REASONS; r++)
            if (by_reason[r] > by_reason[top]) top = r;
        st = lt_fail(err, LT_ERR_INPUT, rs->out_dir,
                     "%" PRIu64 " of %" PRIu64 " records skipped (%.2f %%, most %s), more than data.max_skipped_share "
                     "(%.2f %%)",
                     skipped, records, 100.0 * (double)skipped / (double)records, lt_skip_reason_key((lt_skip_reason)top),
                     100.0 * rs->max_skipped_share);
        lt_error_hint(err, "the task's stats.json lists the first skipped records; raise data.max_skipped_share or set "
                           "data.allow_damaged to keep the task");
    }
    return st;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void hex_to_bytes(const char *hex, uint8_t out[32]) {
    memset(out, 0, 32);
    for (int i = 0; i < 32 && hex[2 * i] && hex[2 * i + 1]; i++) {
        unsigned v = 0;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

/* Remove a file (ENOENT is fine) and make the removal durable. */
static lt_status remove_durably(const char *path, const char *dir, lt_error *err) {
    if (unlink(path) != 0) {
        if (errno == ENOENT) return LT_OK;
        return lt_fail(err, LT_ERR_IO, path, "cannot remove: %s", strerror(errno));
    }
    return lt_fsync_dir(dir, err);
}

static lt_status run_task(run_settings *rs, lt_error *err) {
    double t0 = now_s();
    lt_status st = lt_mkdir_p(rs->out_dir, 0777, err);
    if (st != LT_OK) {
        lt_error_prefix(err, "cannot create the output directory %s: ", rs->out_dir);
        lt_error_hint(err, "--out (data.out_dir) must be a directory you can write");
        return st;
    }
    if (access(rs->out_dir, W_OK | X_OK) != 0) {
        st = lt_fail(err, LT_ERR_IO, rs->out_dir, "output directory is not writable: %s", strerror(errno));
        lt_error_hint(err, "--out (data.out_dir) must be a directory you can write");
        return st;
    }
    /* Only this task's leftovers: the other tasks of the array may be writing next to it. */
    size_t stale = 0;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "task-%05" PRIu32 ".", rs->task);
    if ((st = lt_remove_stale_temps_of(rs->out_dir, prefix, &stale, err)) != LT_OK) return st;
    if (stale) LT_INFO("removed %zu temporary file%s left by an interrupted run", stale, stale == 1 ? "" : "s");

    lt_tokenizer *tok = NULL;
    st = rs->tokenizer ? lt_hf_tokenizer_load(&tok, rs->tokenizer, LT_PRETOK_ENGINE_AUTO, err)
                       : lt_tokenizer_load_encoding(&tok, rs->encoding, rs->vocab_dir, LT_PRETOK_ENGINE_AUTO, err);
    if (st != LT_OK) return st;
    double t_loaded = now_s();

    pipeline pl;
    memset(&pl, 0, sizeof pl);
    pl.rs = rs;
    pl.tok = tok;
    pl.results = lt_calloc_check(rs->files.count ? rs->files.count : 1, sizeof *pl.results);
    pl.line_stats = lt_calloc_check(rs->files.count ? rs->files.count : 1, sizeof *pl.line_stats);
    uint64_t total_bytes = 0;
    for (size_t i = 0; i < rs->files.count; i++) {
        struct stat sb;
        if (stat(rs->files.items[i], &sb) != 0) {
            st = lt_fail(err, LT_ERR_IO, rs->files.items[i], "cannot read input: %s", strerror(errno));
            goto out;
        }
        pl.results[i].size = (uint64_t)sb.st_size;
        total_bytes += (uint64_t)sb.st_size;
    }

    char *shard_path = lt_task_path(rs->out_dir, rs->task, "tokens.zst");
    char *index_path = lt_task_path(rs->out_dir, rs->task, "index");
    char *stats_path = lt_task_path(rs->out_dir, rs->task, "stats.json");
    char *done_path = lt_task_path(rs->out_dir, rs->task, "done");
    char *timings_path = lt_task_path(rs->out_dir, rs->task, "timings.json");

    lt_json settings;
    lt_json_init(&settings);
    settings_json(&settings, rs, tok, pl.results);
    done_state ds;
    char diff[64];
    st = check_done(done_path, &settings, &ds, diff, sizeof diff, err);
    if (st == LT_OK && ds != DONE_NONE && !rs->force) {
        if (ds == DONE_SAME) {
            LT_INFO("task %" PRIu32 " of %" PRIu32 " is already done (%s); --force redoes it", rs->task,
                    rs->num_tasks, done_path);
        } else {
            st = lt_fail(err, LT_ERR_USAGE, done_path,
                         "task %" PRIu32 " in this directory was made with other settings (%s differs)", rs->task,
                         diff);
            lt_error_hint(err, "write to another --out directory, or --force to redo the task with these settings");
        }
        goto out_paths;
    }
    /* From here on the task is being redone: first withdraw the old marker, so that a
     * kill during the redo never leaves a marker next to a mix of old and new files. */
    if (st == LT_OK) st = remove_durably(done_path, rs->out_dir, err);
    if (st != LT_OK) goto out_paths;

    lt_shard_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.n_vocab = lt_tokenizer_n_vocab(tok);
    meta.token_width = meta.n_vocab <= 65536 ? 2 : 4;
    hex_to_bytes(lt_tokenizer_vocab_sha256(tok), meta.vocab_sha256);
    snprintf(meta.encoding, sizeof meta.encoding, "%s", lt_tokenizer_name(tok));
    meta.eos = rs->eos;
    if (rs->eos == LT_EOS_APPEND) {
        int64_t id = lt_tokenizer_eos_id(tok);
        if (id < 0) {
            st = lt_fail(err, LT_ERR_CONFIG, "data.eos", "tokenizer %s has no <|endoftext|> or <|end_of_text|> token to append",
                         lt_tokenizer_name(tok));
            goto out_paths;
        }
        meta.eos_id = (uint32_t)id;
    }
    meta.task_id = rs->task;
    meta.num_tasks = rs->num_tasks;
    meta.zstd_level = rs->zstd_level;
    meta.frame_bytes = (size_t)rs->frame_bytes;

    lt_shard_writer *w = NULL;
    if ((st = lt_shard_writer_open(&w, rs->out_dir, &meta, err)) != LT_OK) goto out_paths;
    /* zstd compression of the ids costs about half of tokenization at level 1-3: on the
     * writer's thread alone it would cap the run at ~2 tokenizer threads' rate */
    if ((st = lt_shard_writer_set_threads(w, rs->threads, err)) != LT_OK) {
        lt_shard_writer_free(w);
        goto out_paths;
    }
    for (size_t i = 0; i < rs->files.count && st == LT_OK; i++) {
        uint32_t idx;
        st = lt_shard_writer_add_source_file(w, rs->files.items[i], pl.results[i].size,
                                             rs->sources[rs->file_src[i]].name, &idx, err);
    }

    LT_INFO("task %" PRIu32 " of %" PRIu32 ": %zu of %zu input file%s (%.1f MB), %s, %d tokenizer thread%s -> %s",
            rs->task, rs->num_tasks, rs->files.count, rs->inputs.count, rs->inputs.count == 1 ? "" : "s",
            (double)total_bytes / 1e6, lt_tokenizer_name(tok), rs->threads, rs->threads == 1 ? "" : "s",
            rs->out_dir);

    pl.ropts.format = rs->format;
    pl.ropts.field = rs->field;
    pl.ropts.max_doc_bytes = (size_t)rs->max_doc_bytes;
    pl.ropts.on_skip = on_skip; /* skip_ctx: each reader its own */
    /* In flight: 8 MiB of text per tokenizer thread (4 JSONL line batches, which count
     * twice), at most 256 MiB. A larger document still passes, alone (pipeline_submit).
     * bench/dataprep, 2026-11-26: the same throughput at T = 1, 2 as the former floor of
     * two of the largest documents (129 MiB with the defaults), at a quarter of the peak
     * RSS (48 against 167-290 MB); 4 MiB per thread starved the worker at T = 1 (-20 %). */
    size_t budget = (size_t)8 * (size_t)rs->threads * BATCH_TEXT_BYTES;
    if (budget > (size_t)256 << 20) budget = (size_t)256 << 20;
    /* Several files are read at once (a gzip or bzip2 stream decodes on one core only, at
     * about 1x to 0.2x a tokenizer thread's rate): up to one reader per tokenizer thread,
     * at most 8, never more than files. They share the budget: the bound on text in
     * flight stays `budget` plus at most one over-sized batch per reader. */
    pl.n_readers = rs->threads < 8 ? rs->threads : 8;
    if ((size_t)pl.n_readers > rs->files.count) pl.n_readers = (int)rs->files.count;
    if (pl.n_readers < 1) pl.n_readers = 1;
    file_reader *readers = lt_calloc_check((size_t)pl.n_readers, sizeof *readers);
    for (int i = 0; i < pl.n_readers; i++) {
        readers[i].pl = &pl;
        readers[i].budget = budget / (size_t)pl.n_readers;
    }
    pl.queues = lt_calloc_check(rs->files.count ? rs->files.count : 1, sizeof *pl.queues);
    pthread_mutex_init(&pl.mu, NULL);
    pthread_cond_init(&pl.work_cv, NULL);
    pthread_cond_init(&pl.done_cv, NULL);
    pthread_cond_init(&pl.space_cv, NULL);
    pl.prog = lt_progress_start("dataprep run", total_bytes, "input bytes");
    lt_progress_extra(pl.prog, 0, "docs", 1);
    lt_progress_extra(pl.prog, 1, "MB", 1e6);
    lt_progress_extra(pl.prog, 2, "tokens", 1);

    run_totals tot;
    memset(&tot, 0, sizeof tot);
    double cpu_writer0 = thread_cpu_s();
    pthread_t *workers = lt_calloc_check((size_t)rs->threads, sizeof *workers);
    int started = 0, readers_started = 0;
    for (; readers_started < pl.n_readers; readers_started++)
        if (pthread_create(&readers[readers_started].thread, NULL, reader_main, &readers[readers_started]) != 0)
            break;
    if (readers_started < pl.n_readers) {
        pthread_mutex_lock(&pl.mu);
        pl.abort = true;
        pthread_cond_broadcast(&pl.space_cv);
        pthread_mutex_unlock(&pl.mu);
        st = lt_fail(err, LT_ERR_INTERNAL, NULL, "cannot start %d reader threads (started %d)", pl.n_readers,
                     readers_started);
    } else {
        for (; started < rs->threads; started++)
            if (pthread_create(&workers[started], NULL, worker_main, &pl) != 0) break;
        if (started == 0) {
            pthread_mutex_lock(&pl.mu);
            pl.abort = true;
            pthread_cond_broadcast(&pl.space_cv);
            pthread_mutex_unlock(&pl.mu);
            st = lt_fail(err, LT_ERR_INTERNAL, NULL, "cannot start tokenizer threads");
        } else {
            st = write_batches(&pl, w, &tot, err);
        }
        for (int i = 0; i < started; i++) pthread_join(workers[i], NULL);
    }
    for (int i = 0; i < readers_started; i++) pthread_join(readers[i].thread, NULL);
    free(workers);
    pthread_mutex_destroy(&pl.mu);
    pthread_cond_destroy(&pl.work_cv);
    pthread_cond_destroy(&pl.done_cv);
    pthread_cond_destroy(&pl.space_cv);
    /* batches left after an abort, and the spares */
    for (size_t f = 0; f < rs->files.count; f++) {
        for (batch *b = pl.queues[f].head; b;) {
            batch *n = b->next_order;
            batch_free(b);
            b = n;
        }
    }
    free(pl.queues);
    pl.queues = NULL;
    for (batch *b = pl.spare; b;) {
        batch *n = b->next_order;
        batch_free(b);
        b = n;
    }
    /* what the workers decoded of the JSONL files joins what their readers counted */
    for (size_t i = 0; i < rs->files.count; i++) reader_stats_add(&pl.results[i].stats, &pl.line_stats[i]);
    for (int i = 0; i < pl.n_readers; i++) {
        skip_list_clear(&readers[i].pending_skips);
        free(readers[i].pending_skips.recs);
    }
    free(readers);
    if (st == LT_OK && pl.reader_st != LT_OK) {
        st = pl.reader_st;
        *err = pl.reader_err;
    }
    lt_progress_finish(pl.prog);
    pl.prog = NULL;
    double t_read = now_s();

    lt_shard_summary sum;
    memset(&sum, 0, sizeof sum);
    if (st == LT_OK) st = lt_shard_writer_finish(w, &sum, err);
    double cpu_writer = thread_cpu_s() - cpu_writer0;
    lt_shard_writer_free(w);
    w = NULL;

    size_t n_damaged = 0;
    for (size_t i = 0; i < rs->files.count; i++) n_damaged += pl.results[i].damaged;
    uint8_t stats_sha[32];
    uint64_t stats_bytes = 0;
    if (st == LT_OK) {
        lt_json j;
        lt_json_init(&j);
        stats_json(&j, &pl, rs, tok, &tot, &sum, shard_path, index_path);
        st = write_json_file(stats_path, &j, stats_sha, &stats_bytes, err);
        lt_json_free(&j);
    }
    if (st == LT_OK && !rs->allow_damaged) st = check_yield(&pl, rs, err);
    if (st == LT_OK && n_damaged && !rs->allow_damaged) {
        /* The documents before the damage are in the shard, but the task is not done. */
        for (size_t i = 0; i < rs->files.count; i++)
            if (pl.results[i].damaged)
                lt_report(pl.results[i].damage_where, pl.results[i].damage_hint[0] ? pl.results[i].damage_hint : NULL,
                          "damaged input: %s", pl.results[i].damage_what);
        st = lt_fail(err, LT_ERR_INPUT, rs->out_dir,
                     "%zu damaged input file%s; the documents before the damage are in the shard, the task is not "
                     "marked done",
                     n_damaged, n_damaged == 1 ? "" : "s");
        lt_error_hint(err, "--allow-damaged (data.allow_damaged) accepts the damaged files as they are");
    }
    if (st == LT_OK) {
        lt_json j;
        lt_json_init(&j);
        lt_json_object_begin(&j);
        lt_json_key(&j, "done_version");
        lt_json_int(&j, 1);
        lt_json_key(&j, "task");
        lt_json_uint(&j, rs->task);
        lt_json_key(&j, "num_tasks");
        lt_json_uint(&j, rs->num_tasks);
        lt_json_key(&j, "documents");
        lt_json_uint(&j, tot.docs);
        lt_json_key(&j, "tokens");
        lt_json_uint(&j, tot.tokens);
        lt_json_key(&j, "damaged_files");
        lt_json_uint(&j, n_damaged);
        lt_json_key(&j, "outputs");
        lt_json_object_begin(&j);
        file_stat_json(&j, "shard", lt_path_base(shard_path), sum.shard_bytes, sum.shard_sha256);
        file_stat_json(&j, "index", lt_path_base(index_path), sum.index_bytes, sum.index_sha256);
        file_stat_json(&j, "stats", lt_path_base(stats_path), stats_bytes, stats_sha);
        lt_json_object_end(&j);
        lt_json_key(&j, "settings");
        settings_json(&j, rs, tok, pl.results);
        lt_json_object_end(&j);
        st = write_json_file(done_path, &j, NULL, NULL, err);
        lt_json_free(&j);
    }
    double t_end = now_s();
    if (st == LT_OK || (st == LT_ERR_INPUT && n_damaged)) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double el = t_end - t_loaded > 1e-9 ? t_end - t_loaded : 1e-9; /* rates: without the vocabulary load */
        lt_json j;
        lt_json_init(&j);
        lt_json_object_begin(&j);
        lt_json_key(&j, "elapsed_s");
        lt_json_double(&j, t_end - t0);
        lt_json_key(&j, "load_s");
        lt_json_double(&j, t_loaded - t0);
        lt_json_key(&j, "process_s");
        lt_json_double(&j, t_end - t_loaded);
        lt_json_key(&j, "pipeline_s");
        lt_json_double(&j, t_read - t_loaded);
        lt_json_key(&j, "finish_s");
        lt_json_double(&j, t_end - t_read);
        lt_json_key(&j, "threads");
        lt_json_int(&j, rs->threads);
        lt_json_key(&j, "documents");
        lt_json_uint(&j, tot.docs);
        lt_json_key(&j, "text_bytes");
        lt_json_uint(&j, tot.text_bytes);
        lt_json_key(&j, "tokens");
        lt_json_uint(&j, tot.tokens);
        lt_json_key(&j, "documents_per_s");
        lt_json_double(&j, (double)tot.docs / el);
        lt_json_key(&j, "text_mb_per_s");
        lt_json_double(&j, (double)tot.text_bytes / 1e6 / el);
        lt_json_key(&j, "tokens_per_s");
        lt_json_double(&j, (double)tot.tokens / el);
        lt_json_key(&j, "cpu_s"); /* per stage, all its threads; writer: frames, index (and the shard's hash
                                   * when it has no thread of its own) */
        lt_json_object_begin(&j);
        lt_json_key(&j, "readers");
        lt_json_double(&j, pl.cpu_readers);
        lt_json_key(&j, "decode");
        lt_json_double(&j, pl.cpu_decode);
        lt_json_key(&j, "tokenize");
        lt_json_double(&j, pl.cpu_tokenize);
        lt_json_key(&j, "compress");
        lt_json_double(&j, sum.compress_cpu_s);
        lt_json_key(&j, "hash");
        lt_json_double(&j, sum.hash_cpu_s);
        lt_json_key(&j, "writer");
        lt_json_double(&j, cpu_writer);
        lt_json_object_end(&j);
        lt_json_key(&j, "peak_rss_bytes");
        lt_json_uint(&j, (uint64_t)ru.ru_maxrss * 1024u);
        lt_json_object_end(&j);
        lt_error terr;
        if (write_json_file(timings_path, &j, NULL, NULL, &terr) != LT_OK) lt_error_print(&terr, stderr);
        lt_json_free(&j);
        LT_INFO("task %" PRIu32 " of %" PRIu32 ": %" PRIu64 " documents, %" PRIu64 " tokens, %" PRIu64
                " frames, %.1f MB shard in %.1f s (%.2f MB/s of text, %.0f tokens/s), peak RSS %.0f MB",
                rs->task, rs->num_tasks, tot.docs, tot.tokens, sum.n_frames, (double)sum.shard_bytes / 1e6, el,
                (double)tot.text_bytes / 1e6 / el, (double)tot.tokens / el, (double)ru.ru_maxrss / 1024.0);
    }

out_paths:
    lt_json_free(&settings);
    free(shard_path);
    free(index_path);
    free(stats_path);
    free(done_path);
    free(timings_path);
out:
    for (size_t i = 0; i < pl.n_examples; i++) {
        free(pl.examples[i].where);
        free(pl.examples[i].message);
    }
    free(pl.results);
    free(pl.line_stats);
    lt_tokenizer_free(tok);
    return st;
}

/* ------------------------------------------------------------------ the command */

/* A task number from an option or the environment: a decimal uint32. */
static bool parse_u32(const char *s, uint32_t *out) {
    int64_t v;
    if (!s || lt_parse_int64(s, &v) != LT_OK || v < 0 || v > (int64_t)UINT32_MAX) return false;
    *out = (uint32_t)v;
    return true;
}

/* Split a whitespace-separated config value into `out`. */
static void split_words(const char *s, lt_strlist *out) {
    while (s && *s) {
        while (*s == ' ' || *s == '\t') s++;
        const char *e = s;
        while (*e && *e != ' ' && *e != '\t') e++;
        if (e > s) {
            char *w = lt_malloc_check((size_t)(e - s) + 1);
            memcpy(w, s, (size_t)(e - s));
            w[e - s] = '\0';
            lt_strlist_push(out, w);
            free(w);
        }
        s = e;
    }
}

typedef struct tagged_path {
    const char *path;
    uint32_t src;
} tagged_path;

static int cmp_tagged_path(const void *a, const void *b) {
    const tagged_path *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    return c ? c : (x->src > y->src) - (x->src < y->src);
}

/* The run's sources and its sorted input list, each input tagged with its source: the
 * unnamed one (--input, or data.input; format and field from the options or [data]) when it
 * has inputs, then each [source.NAME] in the order the config names them. A file in two
 * sources is an error, and so is a named source without a file. */
static lt_status gather_sources(run_settings *rs, const lt_config *cfg, const lt_strlist *unnamed, size_t n_named,
                                lt_error *err) {
    rs->sources = lt_calloc_check(n_named + 1, sizeof *rs->sources);
    lt_strlist all = LT_STRLIST_INIT;
    uint32_t *all_src = NULL;
    size_t n_all = 0;
    lt_status st = LT_OK;
    for (size_t k = 0; k <= n_named && st == LT_OK; k++) {
        lt_strlist words = LT_STRLIST_INIT, files = LT_STRLIST_INIT;
        run_source src = {"", rs->format, rs->field};
        char sec[80] = "data";
        if (k == 0) {
            for (size_t i = 0; i < unnamed->count; i++) lt_strlist_push(&words, unnamed->items[i]);
        } else {
            src.name = lt_config_named(cfg, "source", k - 1);
            snprintf(sec, sizeof sec, "source.%s", src.name);
            split_words(lt_config_get_string(cfg, sec, "input"), &words);
            const char *f = lt_config_get_string(cfg, sec, "format"), *fld = lt_config_get_string(cfg, sec, "field");
            if (lt_format_parse(f ? f : "auto", &src.format) != LT_OK)
                st = lt_fail(err, LT_ERR_CONFIG, sec, "unknown format '%.40s'", f);
            if (fld) src.field = fld;
            if (st == LT_OK && words.count == 0) {
                st = lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, sec, "weight"), "[%s] has no input", sec);
                lt_error_hint(err, "give its files: input = PATH... under [%s]", sec);
            }
        }
        if (st == LT_OK && words.count > 0) {
            st = lt_glob_inputs((const char *const *)words.items, words.count, &files, err);
            if (st != LT_OK) {
                lt_error_prefix(err, "%s%s: ", k ? "source " : "", k ? src.name : "data.input");
                if (!err->hint[0]) lt_error_hint(err, "inputs are files, directories, globs or @LISTFILE");
            }
        }
        if (st == LT_OK && words.count > 0) {
            uint32_t idx = (uint32_t)rs->n_sources;
            rs->sources[rs->n_sources++] = src;
            all_src = lt_realloc_check(all_src, (n_all + files.count + 1) * sizeof *all_src);
            for (size_t i = 0; i < files.count; i++) {
                lt_strlist_push(&all, files.items[i]);
                all_src[n_all++] = idx;
            }
        }
        lt_strlist_free(&words);
        lt_strlist_free(&files);
    }
    for (size_t i = 0; i < rs->n_sources; i++) rs->named |= rs->sources[i].name[0] != '\0';
    /* sorted by path (the task split's order), each path once */
    tagged_path *order = lt_malloc_check((n_all ? n_all : 1) * sizeof *order);
    for (size_t i = 0; i < n_all; i++) order[i] = (tagged_path){all.items[i], all_src[i]};
    qsort(order, n_all, sizeof *order, cmp_tagged_path);
    rs->input_src = lt_malloc_check((n_all ? n_all : 1) * sizeof *rs->input_src);
    for (size_t i = 0; st == LT_OK && i < n_all; i++) {
        const char *path = order[i].path;
        if (i > 0 && strcmp(path, order[i - 1].path) == 0) {
            const char *a = rs->sources[order[i - 1].src].name, *b = rs->sources[order[i].src].name;
            st = lt_fail(err, LT_ERR_CONFIG, path, "the file belongs to two sources: %s and %s", a[0] ? a : "data.input",
                         b[0] ? b : "data.input");
            lt_error_hint(err, "each file belongs to one source: narrow the inputs' globs");
            break;
        }
        rs->input_src[rs->inputs.count] = order[i].src;
        lt_strlist_push(&rs->inputs, path);
    }
    free(order);
    free(all_src);
    lt_strlist_free(&all);
    return st;
}

/* Whether `path` is a Parquet file: its first 4 bytes are "PAR1" (a Parquet file is never
 * compressed as a whole). */
static bool is_parquet(const char *path) {
    FILE *f = fopen(path, "rb");
    char head[4] = {0};
    bool yes = f && fread(head, 1, 4, f) == 4 && memcmp(head, "PAR1", 4) == 0;
    if (f) fclose(f);
    return yes;
}

/* With fewer input files than tasks, whole files would leave tasks idle: the work is cut
 * into units, a Parquet file's row groups one unit each and any other file one unit, and
 * task I takes the I-th of N contiguous runs of them, [I U / N, (I+1) U / N) - so each
 * task reads whole row groups, of few files. Without a Parquet file nothing changes
 * (rs->file_rg stays NULL: the [I::N] split). Only the footers are read, and only when
 * files < tasks. */
static lt_status split_row_groups(run_settings *rs, lt_error *err) {
    size_t nf = rs->inputs.count;
    uint32_t *groups = lt_calloc_check(nf ? nf : 1, sizeof *groups);
    bool any = false;
    uint64_t units = 0;
    for (size_t i = 0; i < nf; i++) {
        groups[i] = 1;
        lt_format f = rs->sources[rs->input_src[i]].format;
        if (f == LT_FMT_PARQUET || (f == LT_FMT_AUTO && is_parquet(rs->inputs.items[i]))) {
            uint64_t rows;
            lt_status st = lt_parquet_row_groups(rs->inputs.items[i], &groups[i], &rows, err);
            if (st != LT_OK) {
                free(groups);
                return st;
            }
            any = true;
        }
        units += groups[i];
    }
    if (!any) {
        free(groups);
        return LT_OK;
    }
    uint64_t lo = units * rs->task / rs->num_tasks, hi = units * (rs->task + 1) / rs->num_tasks, u = 0;
    /* a Parquet file without row groups is no unit: the last task takes it whole (its
     * footer still checked, its stats still counted) */
    rs->file_src = lt_calloc_check(nf + 1, sizeof *rs->file_src);
    rs->file_rg = lt_calloc_check(2 * (nf + 1), sizeof *rs->file_rg);
    for (size_t i = 0; i < nf; i++) {
        uint64_t b = u > lo ? u : lo, e = u + groups[i] < hi ? u + groups[i] : hi;
        if (b < e) { /* this task's units of file i: its row groups [b - u, e - u) */
            size_t k = rs->files.count;
            rs->file_src[k] = rs->input_src[i];
            rs->file_rg[2 * k] = (uint32_t)(b - u);
            rs->file_rg[2 * k + 1] = (uint32_t)(e - u);
            lt_strlist_push(&rs->files, rs->inputs.items[i]);
        }
        else if (groups[i] == 0 && rs->task + 1 == rs->num_tasks) {
            size_t k = rs->files.count;
            rs->file_src[k] = rs->input_src[i];
            rs->file_rg[2 * k] = rs->file_rg[2 * k + 1] = 0; /* [0, to the last): none */
            lt_strlist_push(&rs->files, rs->inputs.items[i]);
        }
        u += groups[i];
    }
    LT_INFO("%zu input file%s for %" PRIu32 " tasks: Parquet files split by row groups (%" PRIu64 " units); task %" PRIu32
            " takes units [%" PRIu64 ", %" PRIu64 ")",
            nf, nf == 1 ? "" : "s", rs->num_tasks, units, rs->task, lo, hi);
    free(groups);
    return LT_OK;
}

int run_command(lt_cli_ctx *ctx) {
    run_settings rs;
    memset(&rs, 0, sizeof rs);
    lt_strlist args = LT_STRLIST_INIT;
    const char *format = NULL, *task_s = NULL, *ntasks_s = NULL, *threads_s = NULL, *eos_s = NULL;
    int rc = 0;
    for (int i = 1; i < ctx->argc && !rc; i++) {
        const char *a = ctx->argv[i], *v;
        int missing = 0;
        if (strcmp(a, "--input") == 0 || strncmp(a, "--input=", 8) == 0) {
            if (a[7] == '=') lt_strlist_push(&args, a + 8);
            size_t before = args.count;
            while (a[7] != '=' && i + 1 < ctx->argc && strncmp(ctx->argv[i + 1], "--", 2) != 0)
                lt_strlist_push(&args, ctx->argv[++i]);
            if (a[7] != '=' && args.count == before) rc = lt_cli_usage(ctx, "--input needs at least one PATH");
        } else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--format", &missing))) format = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--field", &missing))) rs.field = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--encoding", &missing))) rs.encoding = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--vocab-dir", &missing))) rs.vocab_dir = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--out", &missing))) rs.out_dir = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--task-id", &missing))) task_s = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--num-tasks", &missing))) ntasks_s = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--threads", &missing))) threads_s = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--eos", &missing))) eos_s = v;
        else if (missing) {
            rc = lt_cli_usage(ctx, "option '%.200s' needs a value", a);
        } else if (strcmp(a, "--force") == 0) rs.force = true;
        else if (strcmp(a, "--allow-damaged") == 0) rs.allow_damaged = true;
        else if (a[0] == '-' && a[1] != '\0') rc = lt_cli_unknown_option(ctx, a);
        else {
            rc = lt_cli_usage(ctx, "unexpected argument '%.200s' (input paths go after --input)", a);
        }
    }
    lt_error err;
    lt_error_clear(&err);
    const lt_config *cfg = ctx->config;
    /* --input: one unnamed source; else data.input (unnamed, if set) and the [source.NAME]s */
    const bool cli_inputs = args.count > 0;
    const size_t n_named = cli_inputs ? 0 : lt_config_n_named(cfg, "source");
    if (!rc && args.count == 0) split_words(lt_config_get_string(cfg, "data", "input"), &args);
    if (!rc && args.count == 0 && n_named == 0)
        rc = lt_cli_usage(ctx, "no input: give --input PATH... (or data.input, or [source.NAME] sections, in the config)");
    /* format, field, encoding */
    if (!format) format = lt_config_get_string(cfg, "data", "format");
    if (!rc && lt_format_parse(format ? format : "auto", &rs.format) != LT_OK) {
        rc = lt_cli_usage(ctx, "unknown --format '%.100s' (auto, wet, jsonl, wikixml or parquet)", format);
    }
    if (!rs.field) rs.field = lt_config_get_string(cfg, "data", "field");
    if (!rs.field) rs.field = "text";
    if (!rs.encoding) rs.tokenizer = lt_config_get_string(cfg, "data", "tokenizer"); /* --encoding wins */
    if (!rs.encoding) rs.encoding = lt_config_get_string(cfg, "data", "encoding");
    if (!rs.vocab_dir) rs.vocab_dir = lt_config_get_string(cfg, "data", "vocab_dir");
    if (!rc && !rs.encoding) rc = lt_cli_usage(ctx, "no encoding: give --encoding NAME (or data.encoding)");
    /* output directory: --out, data.out_dir, WORK_DIR/NAME/data */
    char *out_default = NULL;
    if (!rs.out_dir) rs.out_dir = lt_config_get_string(cfg, "data", "out_dir");
    if (!rs.out_dir) {
        const char *wd = lt_config_get_string(cfg, "run", "work_dir"), *name = lt_config_get_string(cfg, "run", "name");
        size_t n = strlen(wd ? wd : "runs") + strlen(name ? name : "longtail") + 8;
        out_default = lt_malloc_check(n);
        snprintf(out_default, n, "%s/%s/data", wd ? wd : "runs", name ? name : "longtail");
        rs.out_dir = out_default;
    }
    /* task I of N: options, else the Slurm array, else data.num_tasks / task 0 */
    const char *env_id = getenv("SLURM_ARRAY_TASK_ID"), *env_n = getenv("SLURM_ARRAY_TASK_COUNT"),
               *env_min = getenv("SLURM_ARRAY_TASK_MIN");
    rs.task = 0;
    rs.num_tasks = 1;
    if (!rc) {
        int64_t cfg_n = 0;
        bool cfg_has_n = lt_config_is_set(cfg, "data", "num_tasks") &&
                         lt_config_get_int(cfg, "data", "num_tasks", &cfg_n, NULL) == LT_OK;
        if (ntasks_s) {
            if (!parse_u32(ntasks_s, &rs.num_tasks) || rs.num_tasks == 0) rc = lt_cli_usage(ctx, "--num-tasks wants a positive integer");
        } else if (env_n) {
            if (!parse_u32(env_n, &rs.num_tasks) || rs.num_tasks == 0) rc = lt_cli_usage(ctx, "SLURM_ARRAY_TASK_COUNT is not a positive integer");
            else if (cfg_has_n && (uint64_t)cfg_n != rs.num_tasks) {
                rc = lt_cli_usage(ctx, "the Slurm array has %" PRIu32 " tasks but data.num_tasks is %" PRId64,
                         rs.num_tasks, cfg_n);
            }
        } else if (cfg_has_n) {
            rs.num_tasks = (uint32_t)cfg_n;
        }
        if (!rc && task_s) {
            if (!parse_u32(task_s, &rs.task)) rc = lt_cli_usage(ctx, "--task-id wants an integer >= 0");
        } else if (!rc && env_id) {
            uint32_t id = 0, min = 0;
            if (!parse_u32(env_id, &id) || (env_min && !parse_u32(env_min, &min)) || id < min)
                rc = lt_cli_usage(ctx, "SLURM_ARRAY_TASK_ID is not an integer >= SLURM_ARRAY_TASK_MIN");
            rs.task = id - min;
        } else if (!rc && rs.num_tasks > 1) {
            rc = lt_cli_usage(ctx, "several tasks but no task id: give --task-id I (or run as a Slurm array)");
        }
        if (!rc && rs.task >= rs.num_tasks) {
            rc = lt_cli_usage(ctx, "task %" PRIu32 " does not exist: there are %" PRIu32 " tasks (0..%" PRIu32 ")",
                     rs.task, rs.num_tasks, rs.num_tasks - 1);
        }
    }
    /* threads, sizes, policies */
    int64_t threads = 0;
    if (!rc && threads_s) {
        if (lt_parse_int64(threads_s, &threads) != LT_OK || threads < 0 || threads > 1024)
            rc = lt_cli_usage(ctx, "--threads wants an integer 0..1024 (0 = one per CPU)");
    } else if (!rc) {
        lt_config_get_int(cfg, "data", "threads", &threads, NULL);
    }
    rs.threads = threads > 0 ? (int)threads : lt_pool_default_threads();
    bool allow = false;
    if (!rc && lt_config_get_bool(cfg, "data", "allow_damaged", &allow, NULL) == LT_OK && allow) rs.allow_damaged = true;
    int64_t level = 1; /* the schema's default (lib/config_schema.c) always answers first */
    if (!rc) {
        lt_config_get_size(cfg, "data", "max_doc_bytes", &rs.max_doc_bytes, NULL);
        lt_config_get_size(cfg, "data", "frame_size", &rs.frame_bytes, NULL);
        lt_config_get_int(cfg, "data", "zstd_level", &level, NULL);
        rs.zstd_level = (int)level;
        if (rs.max_doc_bytes == 0) rs.max_doc_bytes = (uint64_t)64 << 20;
        if (rs.frame_bytes == 0) rs.frame_bytes = LT_SHARD_FRAME_BYTES_DEFAULT;
        if (!eos_s) eos_s = lt_config_get_string(cfg, "data", "eos");
        if (!eos_s || strcmp(eos_s, "none") == 0) rs.eos = LT_EOS_NONE;
        else if (strcmp(eos_s, "append") == 0) rs.eos = LT_EOS_APPEND;
        else rc = lt_cli_usage(ctx, "--eos is none or append");
    }
    if (!rc) lt_config_get_double(cfg, "data", "max_skipped_share", &rs.max_skipped_share, NULL);
    /* the sources, the input list and this task's share */
    lt_status st = LT_OK;
    if (!rc) {
        st = gather_sources(&rs, cfg, &args, n_named, &err);
        if (st != LT_OK) rc = lt_error_exit(&err);
    }
    if (!rc && rs.inputs.count < rs.num_tasks) {
        st = split_row_groups(&rs, &err); /* fewer files than tasks: Parquet files by row groups */
        if (st != LT_OK) rc = lt_error_exit(&err);
    }
    if (!rc && !rs.file_rg) {
        rs.file_src = lt_calloc_check(rs.inputs.count / rs.num_tasks + 1, sizeof *rs.file_src);
        for (size_t i = rs.task; i < rs.inputs.count; i += rs.num_tasks) {
            rs.file_src[rs.files.count] = rs.input_src[i];
            lt_strlist_push(&rs.files, rs.inputs.items[i]);
        }
    }
    if (!rc) {
        if (rs.files.count == 0)
            LT_WARN("task %" PRIu32 " of %" PRIu32 " has no input file (%zu inputs): it writes an empty shard",
                    rs.task, rs.num_tasks, rs.inputs.count);
        st = run_task(&rs, &err);
        if (st != LT_OK) rc = lt_error_exit(&err);
    }
    lt_strlist_free(&args);
    lt_strlist_free(&rs.inputs);
    lt_strlist_free(&rs.files);
    free(rs.input_src);
    free(rs.file_src);
    free(rs.file_rg);
    free(rs.sources);
    free(out_default);
    return rc;
}
