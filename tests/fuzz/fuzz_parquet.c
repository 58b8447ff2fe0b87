/*
 * tests/fuzz/fuzz_parquet.c — libFuzzer target for the Parquet reader (dataprep/parquet.c,
 * dataprep/parquet_thrift.c, dataprep/reader_parquet.c) over the generic reader (reader.c),
 * through lt_reader_open_mem.
 *
 * Input layout: byte 0 is the variant, the rest the file.
 *   variant & 7        the max_doc_bytes of the capped run: 1, 2, 3, 5, 16, 64, 1000, 0 (default)
 *   (variant >> 3) & 1 format AUTO instead of forced parquet (the file is then left to the
 *                      other targets unless it starts with PAR1)
 *   (variant >> 4) & 3 the column: "text", "code", "a", "" (the empty name)
 *   variant >> 6       the split point of the row groups: k = n * (variant >> 6) / 4
 * Files whose footer claims over 2^20 rows are only opened (reading them is work per row:
 * a run of nulls costs a few bytes for any number of rows; parquet.c bounds rows by 4096 a
 * byte, which is still too slow for a fuzzer's run).
 * Properties:
 *   - no crash, leak, UB, hang or exit; open and next return LT_OK or LT_ERR_INPUT only
 *     (an error from next only as the last call, the reader at EOF after it); every error
 *     has a WHERE naming the file;
 *   - the footer-only open (lt_pq_open without a column) succeeds whenever the reader's
 *     open did, with the same row group count;
 *   - every document is valid UTF-8 of at most the cap; its id is "row=N" with N == record,
 *     strictly increasing; records = docs + null_value skips; the statistics add up;
 *   - the cap does not change which rows are documents, and capped texts are prefixes;
 *   - rows are split by row groups: when the whole file reads without error, the ranges
 *     [0, k) and [k, n) read without error and give exactly the whole file's documents.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/parquet.h" /* lt_pq_open (footer only) */
#include "dataprep/reader.h"
#include "lib/json.h" /* lt_utf8_valid */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NAME "fuzz.parquet"

#define FUZZ_TARGET "fuzz_parquet"
#include "tests/fuzz/fuzz_reader_common.h" /* fail, xmalloc */

typedef struct one_doc {
    char *text;
    size_t len;
    uint64_t record;
} one_doc;

typedef struct run {
    lt_status st;
    bool opened;
    size_t n;
    one_doc *docs;
    uint64_t skips;
} run;

static void on_skip(void *ctx, const char *where, lt_skip_reason reason, const char *message) {
    run *r = ctx;
    if (reason != LT_SKIP_NULL_VALUE) fail("a skip other than null_value", NULL);
    if (strncmp(where, NAME, strlen(NAME)) != 0) fail("skip WHERE does not name the file", NULL);
    if (message == NULL || message[0] == '\0') fail("skip without a message", NULL);
    r->skips++;
}

static void check_error(const lt_error *e, lt_status st) {
    if (st != LT_ERR_INPUT) fail("unexpected status", e);
    if (strncmp(e->where, NAME, strlen(NAME)) != 0) fail("error WHERE does not name the file", e);
    if (e->what[0] == '\0') fail("error without a WHAT", e);
}

static void do_run(run *r, const uint8_t *in, size_t n, lt_format fmt, const char *field, size_t cap, uint32_t rg_begin,
                   uint32_t rg_end) {
    memset(r, 0, sizeof *r);
    lt_reader_opts o = {.format = fmt,
                        .field = field,
                        .max_doc_bytes = cap,
                        .on_skip = on_skip,
                        .skip_ctx = r,
                        .rg_begin = rg_begin,
                        .rg_end = rg_end};
    lt_reader *rd;
    lt_error err;
    r->st = lt_reader_open_mem(&rd, in, n, NAME, &o, &err);
    if (r->st != LT_OK) {
        check_error(&err, r->st);
        return;
    }
    if (lt_reader_format(rd) != LT_FMT_PARQUET) fail("not read as parquet", NULL);
    r->opened = true;
    const size_t eff = cap ? cap : 64u * 1024 * 1024;
    size_t alloc = 0;
    uint64_t bytes = 0, last = 0;
    for (;;) {
        lt_doc d;
        bool eof;
        lt_error e;
        lt_status st = lt_reader_next(rd, &d, &eof, &e);
        if (st != LT_OK) {
            check_error(&e, st);
            r->st = st;
            bool eof2 = false;
            if (lt_reader_next(rd, &d, &eof2, &e) != LT_OK || !eof2) fail("not at EOF after an error", &e);
            break;
        }
        if (eof) break;
        if (d.len > eff) fail("document longer than the cap", NULL);
        if (!lt_utf8_valid(d.text, d.len)) fail("document is not valid UTF-8", NULL);
        char id[32];
        snprintf(id, sizeof id, "row=%llu", (unsigned long long)d.record);
        if (strcmp(id, d.id) != 0 || d.name == NULL || d.name[0] != '\0') fail("id is not row=RECORD", NULL);
        if (d.record <= last) fail("rows do not increase", NULL);
        last = d.record;
        if (r->n == alloc) {
            alloc = alloc * 2 + 8;
            r->docs = realloc(r->docs, alloc * sizeof *r->docs);
            if (r->docs == NULL) fail("out of memory in the harness", NULL);
        }
        one_doc *od = &r->docs[r->n++];
        od->text = xmalloc(d.len);
        memcpy(od->text, d.text, d.len);
        od->len = d.len;
        od->record = d.record;
        bytes += d.len;
    }
    const lt_reader_stats *s = lt_reader_get_stats(rd);
    if (s->docs != r->n || s->text_bytes != bytes) fail("document statistics do not add up", NULL);
    if (s->skipped[LT_SKIP_NULL_VALUE] != r->skips || s->records != s->docs + r->skips)
        fail("records != documents + null skips", NULL);
    lt_reader_close(rd);
}

static void run_free(run *r) {
    for (size_t i = 0; i < r->n; i++) free(r->docs[i].text);
    free(r->docs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 1024 * 1024) return 0;
    static const size_t caps[8] = {1, 2, 3, 5, 16, 64, 1000, 0};
    static const char *const fields[4] = {"text", "code", "a", ""};
    const uint8_t variant = data[0];
    const uint8_t *in = data + 1;
    const size_t n = size - 1;
    const lt_format fmt = (variant >> 3) & 1 ? LT_FMT_AUTO : LT_FMT_PARQUET;
    if (fmt == LT_FMT_AUTO && (n < 4 || memcmp(in, "PAR1", 4) != 0)) return 0; /* another target's */
    const char *field = fields[(variant >> 4) & 3];

    /* the footer alone: first, to leave out files that claim too many rows */
    lt_pq_reader *pq;
    lt_error err;
    lt_status st = lt_pq_open(&pq, NAME, in, n, NULL, 0, 0, &err);
    uint32_t groups = 0;
    if (st != LT_OK) {
        check_error(&err, st);
    } else {
        groups = lt_pq_row_groups(pq);
        const uint64_t rows = lt_pq_rows(pq);
        lt_pq_close(pq);
        if (rows > (1u << 20)) return 0;
    }

    run full, capped;
    do_run(&full, in, n, fmt, field, 0, 0, 0);
    do_run(&capped, in, n, fmt, field, caps[variant & 7], 0, 0);
    if (full.st != capped.st || full.n != capped.n) fail("the cap changed which rows are documents", NULL);
    for (size_t i = 0; i < full.n; i++) {
        const one_doc *a = &capped.docs[i], *b = &full.docs[i];
        if (a->record != b->record) fail("the cap changed a document's row", NULL);
        if (a->len > b->len || memcmp(a->text, b->text, a->len) != 0) fail("capped text is not a prefix", NULL);
    }

    /* the footer alone, and the row group split */
    if (st != LT_OK) {
        if (full.opened) fail("the footer-only open failed where the reader's succeeded", &err);
    } else {
        if (full.opened && full.st == LT_OK) {
            const uint32_t k = (uint32_t)((uint64_t)groups * (variant >> 6) / 4);
            run a, b;
            memset(&a, 0, sizeof a);
            if (k > 0) do_run(&a, in, n, fmt, field, 0, 0, k);
            do_run(&b, in, n, fmt, field, 0, k, groups);
            if (a.st != LT_OK || b.st != LT_OK) fail("a part of a file that reads fine failed", NULL);
            if (a.n + b.n != full.n) fail("the parts' documents are not the whole file's", NULL);
            for (size_t i = 0; i < full.n; i++) {
                const one_doc *p = i < a.n ? &a.docs[i] : &b.docs[i - a.n], *q = &full.docs[i];
                if (p->record != q->record || p->len != q->len || memcmp(p->text, q->text, p->len) != 0)
                    fail("a part's document differs from the whole file's", NULL);
            }
            run_free(&a);
            run_free(&b);
        }
    }
    run_free(&full);
    run_free(&capped);
    return 0;
}
