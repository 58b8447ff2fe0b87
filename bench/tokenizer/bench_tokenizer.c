/*
 * bench/tokenizer/bench_tokenizer.c — throughput of lt_tokenizer_encode (dataprep/tokenizer.h)
 * on a set of documents, single-threaded and on T threads; the longtail half of
 * bench/tokenizer (bench_tiktoken.py is the peer half, run.sh runs both).
 *
 *     bench_tokenizer --encoding NAME [--vocab-dir DIR] (--jsonl FILE | --text FILE)
 *                     [--threads 1,2] [--samples 5] [--min-sample-s 0.2] [--label NAME]
 *                     [--engine auto|pcre2] [--memos forget|fresh] [--start chars|bytes]
 *                     [--spin-reference]
 *
 * --jsonl FILE: one document per line, its "text" field (lib/json.h lt_jsonl_reader_get);
 * --text FILE: the whole file is one document (the 1 MiB single-piece cases).
 *
 * Method (the same in bench_tiktoken.py):
 *   1. check pass: encode every document once, single thread; the token count and the
 *      SHA-256 of all ids (each as 4 bytes little-endian, documents in file order) identify
 *      the work, so run.sh can check that tiktoken produced the same ids;
 *   2. warm-up pass, which also calibrates `rounds`: passes over the whole set per sample,
 *      enough for a sample to last --min-sample-s;
 *   3. --samples samples for each thread count, the thread counts interleaved (sample k of
 *      T=1, then of T=2, ...) so that both share the machine's noise; a sample is timed with
 *      clock_gettime(CLOCK_MONOTONIC) from the first worker's start (after a barrier that
 *      releases them together) to the last worker's end.
 * Every pass starts with empty memos (the tokenizer's per-thread memos of recent pieces and
 * pair merges must not carry over from one pass over the set to the next, or repeated
 * passes would time a warm memo that a real run over new text never has). --memos says how:
 *   forget (default)  each worker keeps its scratch and calls lt_tok_scratch_forget when it
 *                     starts on the next pass (inside the timing: an O(1) epoch step), so
 *                     the memos are empty but their memory is as cache-warm as in a long
 *                     run (dataprep keeps one scratch per thread for all its documents);
 *   fresh             a new scratch per pass and worker, made and bound before the sample
 *                     (outside the timing): empty memos whose memory has gone cold in the
 *                     meantime, a handicap a real run never has; on a small set (a few KB)
 *                     most of a pass is then cache misses on them (cjk: 3x slower).
 * On T threads each worker has its own lt_tok_scratch and output buffer and takes the next
 * document from a shared atomic counter over the documents sorted by decreasing size
 * (largest first keeps the threads' loads even); the tokenizer itself is shared read-only.
 *
 * --start bytes: merge every piece from its bytes (lt_tokenizer_set_char_start false), the
 * peer of the default `chars` (from whole characters where that gives the same ids); the
 * ids are the same, so is ids_sha256.
 *
 * --spin-reference: after each encoding sample, a sample of the same machinery running a
 * register-only loop (no memory traffic) sized to last about as long on one thread, its
 * work split evenly over the T threads. Its scaling is what the machine delivered to ideal
 * parallel work at that moment: on a shared virtual machine whose other tenants take a core,
 * the spin loop scales < 2x as well, and the tokenizer's scaling is read against it.
 *
 * Output: one line of key=value pairs per thread count (MB = 1e6 bytes of input text):
 *     bench=longtail set=english encoding=cl100k_base engine=cl100k threads=1 docs=120
 *     bytes=1152244 tokens=... ids_sha256=... memos=forget start=chars rounds=4 samples=5 best_s=...
 *     median_s=... mb_per_s=... tokens_per_s=... idsum=...
 * best_s and median_s are per pass over the set; mb_per_s and tokens_per_s use best_s;
 * idsum (the sum of all ids encoded while timing, mod 2^64) keeps the work observable.
 * With --spin-reference, also bench=spin lines: threads, best_s, median_s (per sample) and
 * iters_per_s (loop iterations per second of the best sample).
 * Exit status: 0; 1 when loading or encoding fails; 2 bad usage.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_barrier_t, strtok_r under any -std */
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataprep/tokenizer.h" /* lt_tokenizer_*, lt_tok_scratch_* */
#include "lib/error.h"          /* lt_error, lt_fail, lt_*_check */
#include "lib/files.h"          /* lt_read_file */
#include "lib/json.h"           /* lt_jsonl_reader_get */
#include "lib/sha256.h"         /* lt_sha256_* */

#define MAX_THREAD_COUNTS 8

typedef struct document {
    char *text;
    size_t len;
} document;

typedef struct corpus {
    document *docs;
    size_t n;
    size_t bytes;
    size_t *order; /* document indices, largest first (the threads' work queue) */
} corpus;

typedef struct options {
    const char *encoding, *vocab_dir, *jsonl, *text, *label;
    lt_pretok_engine engine;
    size_t thread_counts[MAX_THREAD_COUNTS];
    size_t n_thread_counts;
    size_t samples;
    double min_sample_s;
    bool spin_reference;
    bool fresh_memos; /* --memos fresh */
    bool bytes_start; /* --start bytes */
} options;

/* One worker's state, reused across samples. */
typedef struct worker {
    const lt_tokenizer *tok;
    const corpus *c;
    lt_tok_scratch *scratch;  /* in use: `base` or one of `fresh` */
    lt_tok_scratch *base;     /* the check pass's, and every pass's under --memos forget */
    lt_tok_scratch **fresh;   /* --memos fresh: one new scratch per pass of a sample (see run_sample) */
    size_t nfresh;
    bool forget;              /* --memos forget */
    uint32_t *ids;
    size_t cap;
    atomic_size_t *next; /* shared: the next position in c->order */
    pthread_barrier_t *start;
    size_t rounds;
    uint64_t spin_iters; /* nonzero: a spin-reference sample of this many iterations */
    uint64_t idsum, tokens;
    double t_start, t_end; /* this worker's share of the sample, CLOCK_MONOTONIC */
    lt_status status;
    lt_error err;
} worker;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Encode one document into w->ids (growing it when the first guess is short). */
static lt_status encode_doc(worker *w, const document *d, lt_encode_info *info) {
    lt_status st = lt_tokenizer_encode(w->tok, w->scratch, d->text, d->len, w->ids, w->cap, info, &w->err);
    if (st == LT_OK && info->n_tokens > w->cap) {
        w->cap = info->n_tokens;
        w->ids = lt_realloc_check(w->ids, w->cap * sizeof *w->ids);
        st = lt_tokenizer_encode(w->tok, w->scratch, d->text, d->len, w->ids, w->cap, info, &w->err);
    }
    return st;
}

/* A worker's sample: `rounds` passes, each taking documents from the shared queue until it
 * is empty; the queue counts on across rounds (position p is document order[p % n]). */
static void *worker_run(void *arg) {
    worker *w = arg;
    const corpus *c = w->c;
    size_t total = w->rounds * c->n, pass = SIZE_MAX;
    pthread_barrier_wait(w->start);
    w->t_start = now_s();
    if (w->spin_iters) { /* a dependent multiply-add chain in a register */
        uint64_t x = (uint64_t)(uintptr_t)w;
        for (uint64_t i = 0; i < w->spin_iters; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            __asm__ volatile("" : "+r"(x));
        }
        w->idsum = x;
        w->t_end = now_s();
        return NULL;
    }
    for (;;) {
        size_t p = atomic_fetch_add_explicit(w->next, 1, memory_order_relaxed);
        if (p >= total) break;
        /* every pass starts with empty memos */
        if (!w->forget) {
            w->scratch = w->fresh[p / c->n];
        } else if (p / c->n != pass) {
            pass = p / c->n;
            lt_tok_scratch_forget(w->scratch);
        }
        lt_encode_info info;
        if ((w->status = encode_doc(w, &c->docs[c->order[p % c->n]], &info)) != LT_OK) break;
        w->tokens += info.n_tokens;
        for (size_t i = 0; i < info.n_tokens; i++) w->idsum += w->ids[i];
    }
    w->t_end = now_s();
    return NULL;
}

/* Time one sample: `rounds` passes over the corpus on `nthreads` threads (or, when
 * spin_total > 0, spin_total iterations of the spin loop split over them). */
static lt_status run_sample(worker *ws, size_t nthreads, size_t rounds, uint64_t spin_total, double *seconds,
                            uint64_t *idsum, uint64_t *tokens, lt_error *err) {
    pthread_t th[64];
    pthread_barrier_t start;
    atomic_size_t next;
    atomic_init(&next, 0);
    if (pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1) != 0)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "pthread_barrier_init failed");
    /* Fresh scratches, one per pass and worker, bound to the tokenizer outside the timing:
     * the tokenizer's per-thread memos (recent pieces, pair merges) must not carry over from
     * one pass over the set to the next, or repeated passes would time a warm memo that a
     * real run over new text never has. */
    for (size_t t = 0; t < nthreads && !spin_total && !ws[t].forget; t++) {
        for (size_t k = 0; k < ws[t].nfresh; k++) lt_tok_scratch_free(ws[t].fresh[k]);
        ws[t].fresh = lt_realloc_check(ws[t].fresh, rounds * sizeof *ws[t].fresh);
        ws[t].nfresh = rounds;
        for (size_t k = 0; k < rounds; k++) {
            ws[t].fresh[k] = lt_tok_scratch_new();
            LT_CHECK_ALLOC(ws[t].fresh[k]);
            lt_encode_info info;
            lt_status st = lt_tokenizer_encode(ws[t].tok, ws[t].fresh[k], "", 0, NULL, 0, &info, err);
            if (st != LT_OK) return st;
        }
    }
    for (size_t t = 0; t < nthreads; t++) {
        ws[t].next = &next;
        ws[t].start = &start;
        ws[t].rounds = rounds;
        ws[t].spin_iters = spin_total / nthreads;
        ws[t].idsum = ws[t].tokens = 0;
        ws[t].status = LT_OK;
        int rc = pthread_create(&th[t], NULL, worker_run, &ws[t]);
        if (rc != 0) lt_die("pthread_create: %s", strerror(rc));
    }
    pthread_barrier_wait(&start);
    for (size_t t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&start);
    /* from the first worker's start to the last one's end (the main thread's own wake-up
     * after the barrier may come late) */
    double first = ws[0].t_start, last = ws[0].t_end;
    *idsum = *tokens = 0;
    for (size_t t = 0; t < nthreads; t++) {
        if (ws[t].t_start < first) first = ws[t].t_start;
        if (ws[t].t_end > last) last = ws[t].t_end;
        if (ws[t].status != LT_OK) {
            *err = ws[t].err;
            return ws[t].status;
        }
        *idsum += ws[t].idsum;
        *tokens += ws[t].tokens;
    }
    *seconds = last - first;
    return LT_OK;
}

/* ------------------------------------------------------------------ input */

static void add_doc(corpus *c, size_t *cap, const char *text, size_t len) {
    if (c->n == *cap) {
        *cap = *cap ? 2 * *cap : 256;
        c->docs = lt_realloc_check(c->docs, *cap * sizeof *c->docs);
    }
    char *copy = lt_malloc_check(len + 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    c->docs[c->n++] = (document){copy, len};
    c->bytes += len;
}

static lt_status read_jsonl(corpus *c, const char *path, lt_error *err) {
    char *data;
    size_t size, cap = 0;
    lt_status st = lt_read_file(path, &data, &size, err);
    if (st != LT_OK) return st;
    lt_jsonl_reader rd;
    lt_jsonl_reader_init(&rd);
    size_t line = 0;
    for (size_t pos = 0; pos < size && st == LT_OK;) {
        const char *nl = memchr(data + pos, '\n', size - pos);
        size_t end = nl ? (size_t)(nl - data) : size;
        line++;
        if (end > pos) {
            const char *text;
            size_t len;
            st = lt_jsonl_reader_get(&rd, data + pos, end - pos, "text", &text, &len, err);
            if (st != LT_OK) {
                lt_error_prefix(err, "%s:%zu: ", path, line);
            } else if (text == NULL) {
                st = lt_fail(err, LT_ERR_INPUT, NULL, "%s:%zu: no \"text\" field", path, line);
            } else {
                add_doc(c, &cap, text, len);
            }
        }
        pos = end + 1;
    }
    lt_jsonl_reader_free(&rd);
    free(data);
    if (st == LT_OK && c->n == 0) st = lt_fail(err, LT_ERR_INPUT, path, "no documents");
    return st;
}

static lt_status read_text(corpus *c, const char *path, lt_error *err) {
    char *data;
    size_t size, cap = 0;
    lt_status st = lt_read_file(path, &data, &size, err);
    if (st != LT_OK) return st;
    add_doc(c, &cap, data, size);
    free(data);
    return LT_OK;
}

static const corpus *sort_corpus;
static int by_size_desc(const void *a, const void *b) {
    size_t x = sort_corpus->docs[*(const size_t *)a].len, y = sort_corpus->docs[*(const size_t *)b].len;
    if (x != y) return x > y ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static void order_corpus(corpus *c) {
    c->order = lt_malloc_check(c->n * sizeof *c->order);
    for (size_t i = 0; i < c->n; i++) c->order[i] = i;
    sort_corpus = c;
    qsort(c->order, c->n, sizeof *c->order, by_size_desc);
}

/* ------------------------------------------------------------------ options */

static int usage(const char *msg) {
    if (msg) fprintf(stderr, "bench_tokenizer: error: %s\n", msg);
    fprintf(stderr,
            "usage: bench_tokenizer --encoding NAME [--vocab-dir DIR] (--jsonl FILE | --text FILE)\n"
            "                       [--threads 1,2] [--samples N] [--min-sample-s S] [--label NAME]\n"
            "                       [--engine auto|pcre2] [--memos forget|fresh] [--start chars|bytes]\n"
            "                       [--spin-reference]\n");
    return LT_EXIT_USAGE;
}

static bool parse_size(const char *s, size_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v == 0 || v > 1000000) return false;
    *out = (size_t)v;
    return true;
}

static int parse_options(int argc, char **argv, options *o) {
    *o = (options){.label = "-", .samples = 5, .min_sample_s = 0.2, .thread_counts = {1}, .n_thread_counts = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(NULL);
            exit(0);
        }
        if (strcmp(a, "--spin-reference") == 0) { /* the one option without a value */
            o->spin_reference = true;
            continue;
        }
        if (i + 1 >= argc) return usage("an option is missing its value");
        const char *v = argv[++i];
        if (strcmp(a, "--encoding") == 0) o->encoding = v;
        else if (strcmp(a, "--vocab-dir") == 0) o->vocab_dir = v;
        else if (strcmp(a, "--jsonl") == 0) o->jsonl = v;
        else if (strcmp(a, "--text") == 0) o->text = v;
        else if (strcmp(a, "--label") == 0) o->label = v;

        else if (strcmp(a, "--start") == 0) {
            if (strcmp(v, "chars") == 0) o->bytes_start = false;
            else if (strcmp(v, "bytes") == 0) o->bytes_start = true;
            else return usage("--start is chars or bytes");
        } else if (strcmp(a, "--memos") == 0) {
            if (strcmp(v, "forget") == 0) o->fresh_memos = false;
            else if (strcmp(v, "fresh") == 0) o->fresh_memos = true;
            else return usage("--memos is forget or fresh");
        } else if (strcmp(a, "--engine") == 0) {
            if (strcmp(v, "auto") == 0) o->engine = LT_PRETOK_ENGINE_AUTO;
            else if (strcmp(v, "pcre2") == 0) o->engine = LT_PRETOK_ENGINE_PCRE2;
            else return usage("--engine is auto or pcre2");
        } else if (strcmp(a, "--samples") == 0) {
            if (!parse_size(v, &o->samples)) return usage("--samples is a positive integer");
        } else if (strcmp(a, "--min-sample-s") == 0) {
            char *end;
            o->min_sample_s = strtod(v, &end);
            if (*end || !(o->min_sample_s >= 0 && o->min_sample_s < 3600)) return usage("bad --min-sample-s");
        } else if (strcmp(a, "--threads") == 0) {
            o->n_thread_counts = 0;
            char buf[128];
            snprintf(buf, sizeof buf, "%s", v);
            for (char *save = NULL, *tk = strtok_r(buf, ",", &save); tk; tk = strtok_r(NULL, ",", &save)) {
                if (o->n_thread_counts == MAX_THREAD_COUNTS) return usage("too many --threads values");
                size_t t;
                if (!parse_size(tk, &t) || t > 64) return usage("--threads is a list of 1..64");
                o->thread_counts[o->n_thread_counts++] = t;
            }
            if (o->n_thread_counts == 0) return usage("--threads is a list of 1..64");
        } else {
            fprintf(stderr, "bench_tokenizer: error: unknown option '%s'\n", a);
            return usage(NULL);
        }
    }
    if (!o->encoding) return usage("--encoding is required");
    if (!o->jsonl == !o->text) return usage("give one of --jsonl FILE and --text FILE");
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
    lt_set_program("bench_tokenizer");
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc) return rc;
    lt_error err;
    lt_error_clear(&err);
    lt_tokenizer *tok;
    lt_status st = lt_tokenizer_load_encoding(&tok, o.encoding, o.vocab_dir, o.engine, &err);
    if (st != LT_OK) return lt_error_exit(&err);
    lt_tokenizer_set_char_start(tok, !o.bytes_start);
    corpus c = {0};
    st = o.jsonl ? read_jsonl(&c, o.jsonl, &err) : read_text(&c, o.text, &err);
    if (st != LT_OK) return lt_error_exit(&err);
    order_corpus(&c);

    size_t max_threads = 1;
    for (size_t k = 0; k < o.n_thread_counts; k++)
        if (o.thread_counts[k] > max_threads) max_threads = o.thread_counts[k];
    size_t largest = c.docs[c.order[0]].len;
    worker *ws = lt_calloc_check(max_threads, sizeof *ws);
    for (size_t t = 0; t < max_threads; t++) {
        ws[t].tok = tok;
        ws[t].c = &c;
        ws[t].scratch = ws[t].base = lt_tok_scratch_new();
        LT_CHECK_ALLOC(ws[t].scratch);
        ws[t].forget = !o.fresh_memos;
        ws[t].cap = largest + 16; /* valid UTF-8 text has at most one token per byte */
        ws[t].ids = lt_malloc_check(ws[t].cap * sizeof *ws[t].ids);
    }

    /* 1. check pass, in file order: what the work is (compared with tiktoken's). */
    lt_sha256 h;
    lt_sha256_init(&h);
    uint64_t tokens = 0;
    for (size_t i = 0; i < c.n; i++) {
        lt_encode_info info;
        if ((st = encode_doc(&ws[0], &c.docs[i], &info)) != LT_OK) return lt_error_exit(&ws[0].err);
        tokens += info.n_tokens;
        for (size_t k = 0; k < info.n_tokens; k++) {
            uint32_t v = ws[0].ids[k];
            unsigned char le[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                                   (unsigned char)(v >> 24)};
            lt_sha256_update(&h, le, 4);
        }
    }
    char ids_sha[LT_SHA256_HEX_LEN + 1];
    lt_sha256_final_hex(&h, ids_sha);

    /* 2. warm-up (every worker's buffers grow to their final size) and calibration. */
    double secs;
    uint64_t idsum, tok_count;
    if ((st = run_sample(ws, max_threads, 1, 0, &secs, &idsum, &tok_count, &err)) != LT_OK) return lt_error_exit(&err);
    if ((st = run_sample(ws, 1, 1, 0, &secs, &idsum, &tok_count, &err)) != LT_OK) return lt_error_exit(&err);
    size_t rounds = 1;
    if (secs > 0 && secs < o.min_sample_s) rounds = (size_t)(o.min_sample_s / secs) + 1;
    uint64_t spin_total = 0; /* iterations lasting about one encoding sample on one thread */
    if (o.spin_reference) {
        double sample_s = secs * (double)rounds, spin_s;
        uint64_t probe = 10000000;
        if ((st = run_sample(ws, 1, 1, probe, &spin_s, &idsum, &tok_count, &err)) != LT_OK) return lt_error_exit(&err);
        spin_total = (uint64_t)((double)probe * sample_s / (spin_s > 0 ? spin_s : 1e-9)) + 1;
    }

    /* 3. samples, thread counts interleaved. */
    double *times = lt_calloc_check(o.n_thread_counts * o.samples, sizeof *times);
    double *spin_times = lt_calloc_check(o.n_thread_counts * o.samples, sizeof *spin_times);
    uint64_t sums[MAX_THREAD_COUNTS] = {0};
    for (size_t s = 0; s < o.samples; s++) {
        for (size_t k = 0; k < o.n_thread_counts; k++) {
            st = run_sample(ws, o.thread_counts[k], rounds, 0, &secs, &idsum, &tok_count, &err);
            if (st != LT_OK) return lt_error_exit(&err);
            if (tok_count != tokens * rounds)
                lt_die("sample of %zu threads encoded %" PRIu64 " tokens, expected %" PRIu64, o.thread_counts[k],
                       tok_count, tokens * rounds);
            times[k * o.samples + s] = secs / (double)rounds;
            sums[k] += idsum;
            if (spin_total) {
                st = run_sample(ws, o.thread_counts[k], 1, spin_total, &secs, &idsum, &tok_count, &err);
                if (st != LT_OK) return lt_error_exit(&err);
                spin_times[k * o.samples + s] = secs;
            }
        }
    }
    for (size_t k = 0; k < o.n_thread_counts; k++) {
        double *t = times + k * o.samples;
        qsort(t, o.samples, sizeof *t, cmp_double);
        double best = t[0];
        double median = o.samples % 2 ? t[o.samples / 2] : 0.5 * (t[o.samples / 2 - 1] + t[o.samples / 2]);
        printf("bench=longtail set=%s encoding=%s engine=%s threads=%zu docs=%zu bytes=%zu tokens=%" PRIu64
               " ids_sha256=%s memos=%s start=%s rounds=%zu samples=%zu best_s=%.6f median_s=%.6f mb_per_s=%.3f"
               " tokens_per_s=%.0f idsum=%" PRIu64 "\n",
               o.label, lt_tokenizer_name(tok), lt_tokenizer_engine(tok), o.thread_counts[k], c.n, c.bytes,
               tokens, ids_sha, o.fresh_memos ? "fresh" : "forget", o.bytes_start ? "bytes" : "chars", rounds,
               o.samples, best, median, (double)c.bytes / best / 1e6,
               (double)tokens / best, sums[k]);
        if (!spin_total) continue;
        t = spin_times + k * o.samples;
        qsort(t, o.samples, sizeof *t, cmp_double);
        median = o.samples % 2 ? t[o.samples / 2] : 0.5 * (t[o.samples / 2 - 1] + t[o.samples / 2]);
        printf("bench=spin set=%s encoding=%s threads=%zu iters=%" PRIu64 " samples=%zu best_s=%.6f median_s=%.6f"
               " iters_per_s=%.0f\n",
               o.label, lt_tokenizer_name(tok), o.thread_counts[k], spin_total, o.samples, t[0], median,
               (double)spin_total / t[0]);
    }
    fflush(stdout);

    free(spin_times);
    free(times);
    for (size_t t = 0; t < max_threads; t++) {
        lt_tok_scratch_free(ws[t].base);
        for (size_t k = 0; k < ws[t].nfresh; k++) lt_tok_scratch_free(ws[t].fresh[k]);
        free(ws[t].fresh);
        free(ws[t].ids);
    }
    free(ws);
    for (size_t i = 0; i < c.n; i++) free(c.docs[i].text);
    free(c.docs);
    free(c.order);
    lt_tokenizer_free(tok);
    return 0;
}
