/*
 * tests/fuzz/fuzz_wet.c — libFuzzer target for the WET reader (dataprep/reader_wet.c) over
 * the decompressing source (dataprep/source.c) and the generic reader (reader.c).
 *
 * Input layout: byte 0 is the variant, the rest the payload. Inputs shorter than 1 byte
 * are ignored.
 *   variant & 3    how the payload reaches the reader: 0 as is, format forced to wet;
 *                  1 as is, format AUTO (the payload's own magic picks the codec: a fuzzed
 *                  gzip/zstd/bzip2 stream, or plain text detected by content or name;
 *                  content detected as another format is left to that format's target);
 *                  2 gzip'd by the harness in two members, forced wet; 3 zstd'd in two
 *                  frames (even variant >> 7) or bzip2'd (odd), forced wet.
 *   variant >> 2   (& 7) the max_doc_bytes of the capped run: 1, 2, 3, 4, 5, 7, 64, 1000.
 * Properties, for a run with that cap and a run with the default cap:
 *   - no crash, leak, UB or exit; open and next return LT_OK or LT_ERR_INPUT only (an
 *     error only from next and only as the last call; damage names "compressed offset");
 *   - every document is valid UTF-8 of at most the cap, id and name NUL-terminated;
 *     not truncated and not repaired => orig_bytes == len;
 *   - the statistics add up: docs, text_bytes, truncated, repaired_docs, replacements as
 *     summed over the documents; records = docs + filtered + skipped (+1 when damage cut a
 *     record); every skip has a WHERE naming the file and a known reason;
 *   - framing does not depend on the cap: both runs give the same documents (ids, names,
 *     records, offsets, orig_bytes), and each capped text is a prefix of the full one.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bzlib.h>
#include <zlib.h>
#include <zstd.h>

#include "dataprep/reader.h"
#include "lib/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NAME "fuzz.warc.wet"

#define FUZZ_TARGET "fuzz_wet"
#include "tests/fuzz/fuzz_reader_common.h" /* fail, xmalloc, buf, gzip_to, zstd_to, bzip2_to, detected_format */

/* ------------------------------------------------------------------ one run */

typedef struct one_doc {
    char *text;
    size_t len;
    char *id, *name;
    uint64_t record, offset, orig_bytes, repl;
    bool truncated;
} one_doc;

typedef struct run {
    lt_status st;
    size_t n;
    one_doc *docs;
    lt_reader_stats stats;
    uint64_t skips;
} run;

static void on_skip(void *ctx, const char *where, lt_skip_reason reason, const char *message) {
    run *r = ctx;
    if (reason >= LT_SKIP_N_REASONS) fail("unknown skip reason", NULL);
    if (strncmp(where, NAME, strlen(NAME)) != 0) fail("skip WHERE does not name the file", NULL);
    if (message == NULL || message[0] == '\0') fail("skip without a message", NULL);
    r->skips++;
}

static char *dup_n(const char *s, size_t n) {
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static void do_run(run *r, const uint8_t *in, size_t n, lt_format fmt, size_t cap) {
    memset(r, 0, sizeof *r);
    lt_reader_opts o = {.format = fmt, .max_doc_bytes = cap, .on_skip = on_skip, .skip_ctx = r};
    lt_reader *rd;
    lt_error err;
    r->st = lt_reader_open_mem(&rd, in, n, NAME, &o, &err);
    if (r->st != LT_OK) {
        if (r->st != LT_ERR_INPUT) fail("open: unexpected status", &err);
        if (fmt != LT_FMT_AUTO) fail("open failed with a forced format", &err);
        return;
    }
    if (fmt != LT_FMT_AUTO && lt_reader_format(rd) != fmt) fail("forced format not used", NULL);
    if (lt_reader_format(rd) != LT_FMT_WET) { /* AUTO chose another format: its own target */
        lt_reader_close(rd);
        return;
    }
    const size_t eff = cap ? cap : 64u * 1024 * 1024;
    size_t alloc = 0;
    uint64_t bytes = 0, trunc = 0, repaired = 0, repl = 0;
    for (;;) {
        lt_doc d;
        bool eof;
        lt_error e;
        lt_status st = lt_reader_next(rd, &d, &eof, &e);
        if (st != LT_OK) {
            if (st != LT_ERR_INPUT) fail("next: unexpected status", &e);
            if (strstr(e.where, "compressed offset") == NULL) fail("damage without a compressed offset", &e);
            r->st = st;
            bool eof2 = false;
            if (lt_reader_next(rd, &d, &eof2, &e) != LT_OK || !eof2) fail("not at EOF after an error", &e);
            break;
        }
        if (eof) break;
        if (d.len > eff) fail("document longer than the cap", NULL);
        if (!lt_utf8_valid(d.text, d.len)) fail("document is not valid UTF-8", NULL);
        if (d.id == NULL || d.name == NULL) fail("NULL id or name", NULL);
        if (!d.truncated && d.utf8_replacements == 0 && d.orig_bytes != d.len) fail("orig_bytes != len", NULL);
        if (d.truncated && d.orig_bytes == 0) fail("truncated from nothing", NULL);
        if (r->n == alloc) {
            alloc = alloc * 2 + 8;
            r->docs = realloc(r->docs, alloc * sizeof *r->docs);
            if (r->docs == NULL) fail("out of memory in the harness", NULL);
        }
        one_doc *od = &r->docs[r->n++];
        od->text = dup_n(d.text, d.len);
        od->len = d.len;
        od->id = dup_n(d.id, strlen(d.id));
        od->name = dup_n(d.name, strlen(d.name));
        od->record = d.record;
        od->offset = d.offset;
        od->orig_bytes = d.orig_bytes;
        od->truncated = d.truncated;
        od->repl = d.utf8_replacements;
        bytes += d.len;
        trunc += d.truncated;
        repaired += d.utf8_replacements > 0;
        repl += d.utf8_replacements;
    }
    r->stats = *lt_reader_get_stats(rd);
    const lt_reader_stats *s = &r->stats;
    if (s->docs != r->n || s->text_bytes != bytes || s->truncated != trunc || s->repaired_docs != repaired ||
        s->utf8_replacements != repl)
        fail("document statistics do not add up", NULL);
    uint64_t skipped = 0;
    for (int k = 0; k < LT_SKIP_N_REASONS; k++) skipped += s->skipped[k];
    if (skipped != r->skips) fail("skips counted != skips reported", NULL);
    uint64_t accounted = s->docs + s->filtered + skipped;
    if (s->records < accounted || s->records > accounted + (r->st != LT_OK)) fail("records do not add up", NULL);
    lt_reader_close(rd);
}

static void run_free(run *r) {
    for (size_t i = 0; i < r->n; i++) free(r->docs[i].text), free(r->docs[i].id), free(r->docs[i].name);
    free(r->docs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 1024 * 1024) return 0;
    static const size_t caps[8] = {1, 2, 3, 4, 5, 7, 64, 1000};
    const uint8_t variant = data[0];
    const uint8_t *payload = data + 1;
    size_t n = size - 1;
    lt_format fmt = (variant & 3) == 1 ? LT_FMT_AUTO : LT_FMT_WET;
    buf packed = {0};
    if ((variant & 3) == 2) {
        gzip_to(&packed, payload, n / 2);
        gzip_to(&packed, payload + n / 2, n - n / 2);
    } else if ((variant & 3) == 3) {
        if (variant >> 7) {
            bzip2_to(&packed, payload, n / 3);
            bzip2_to(&packed, payload + n / 3, n - n / 3);
        } else {
            zstd_to(&packed, payload, n / 3);
            zstd_to(&packed, payload + n / 3, n - n / 3);
        }
    }
    const uint8_t *in = packed.p ? packed.p : payload;
    size_t in_n = packed.p ? packed.n : n;
    if (fmt == LT_FMT_AUTO && detected_format(in, in_n) != LT_FMT_WET) return 0; /* another target's */

    run capped, full;
    do_run(&capped, in, in_n, fmt, caps[(variant >> 2) & 7]);
    do_run(&full, in, in_n, fmt, 0);
    if (packed.p != NULL && (capped.st != LT_OK || full.st != LT_OK)) fail("a stream the harness packed is damaged", NULL);
    if (capped.st != full.st || capped.n != full.n) fail("the cap changed the framing", NULL);
    for (size_t i = 0; i < full.n; i++) {
        const one_doc *a = &capped.docs[i], *b = &full.docs[i];
        if (strcmp(a->id, b->id) != 0 || strcmp(a->name, b->name) != 0 || a->record != b->record ||
            a->offset != b->offset || a->orig_bytes != b->orig_bytes)
            fail("the cap changed a document's locator", NULL);
        if (a->len > b->len || memcmp(a->text, b->text, a->len) != 0) fail("capped text is not a prefix", NULL);
        if (a->repl > b->repl) fail("capped text has more replacements", NULL);
        if (!a->truncated && (a->len != b->len)) fail("shorter text not marked truncated", NULL);
    }
    run_free(&capped);
    run_free(&full);
    free(packed.p);
    return 0;
}
