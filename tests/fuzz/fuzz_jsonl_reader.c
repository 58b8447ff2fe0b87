/*
 * tests/fuzz/fuzz_jsonl_reader.c — libFuzzer target for the JSONL reader
 * (dataprep/reader_jsonl.c) over the decompressing source (dataprep/source.c) and the
 * generic reader (reader.c). (fuzz_jsonl.c fuzzes the one-line parser of lib/json.)
 *
 * Input layout: byte 0 is the variant, the rest the payload.
 *   variant & 3    0: the payload as is, format forced to jsonl; 1: as is, format AUTO
 *                  (its own magic picks the codec; content detected as another format is
 *                  left to that format's target); 2: gzip'd by the harness (two members),
 *                  forced; 3: zstd'd by the harness (two frames), forced.
 *   variant >> 2   (& 3) the field: "text", "code", "", "\xC3\xA9".
 *   variant >> 4   (& 7) the max_doc_bytes of the capped run: 1, 2, 3, 4, 5, 7, 64, 1000.
 * Properties:
 *   - no crash, leak, UB or exit; statuses are LT_OK or LT_ERR_INPUT (damage, from next only,
 *     named with "compressed offset");
 *   - the reader agrees with an independent split of the decompressed text into lines
 *     (on '\n', one '\r' stripped, whitespace-only lines filtered) each read with
 *     lt_jsonl_get_string: the same documents in order (the full run's text equals
 *     sanitize(value)), ids "line=N", skips on exactly the other non-blank lines, with
 *     WHERE "NAME:N" and a reason matching the parser's verdict (absent -> missing_field;
 *     field_not_string only where the parser reports the member's type);
 *   - every document is valid UTF-8 of at most the cap; the capped text is a prefix of the
 *     full one; statistics add up (docs, text_bytes, truncated, records = lines).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>
#include <zstd.h>

#include "dataprep/reader.h"
#include "lib/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NAME "fuzz.jsonl"
#define MAX_SKIPS 4096

#define FUZZ_TARGET "fuzz_jsonl_reader"
#include "tests/fuzz/fuzz_reader_common.h" /* fail, xmalloc, buf, gzip_to, zstd_to, bzip2_to, detected_format */

/* ------------------------------------------------------------------ one run */

typedef struct one_doc {
    char *text;
    size_t len;
    uint64_t record;
    bool truncated;
} one_doc;

typedef struct run {
    lt_status st;
    bool other_format;
    size_t n;
    one_doc *docs;
    lt_reader_stats stats;
    size_t nskips;
    uint64_t skip_line[MAX_SKIPS];
    lt_skip_reason skip_reason[MAX_SKIPS];
} run;

static void on_skip(void *ctx, const char *where, lt_skip_reason reason, const char *message) {
    run *r = ctx;
    if (reason >= LT_SKIP_N_REASONS) fail("unknown skip reason", NULL);
    if (message == NULL || message[0] == '\0') fail("skip without a message", NULL);
    unsigned long long line;
    char tail;
    if (sscanf(where, NAME ":%llu%c", &line, &tail) != 1) fail("skip WHERE is not NAME:LINE", NULL);
    if (r->nskips < MAX_SKIPS) {
        r->skip_line[r->nskips] = line;
        r->skip_reason[r->nskips] = reason;
    }
    r->nskips++;
}

static char *dup_n(const char *s, size_t n) {
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static void do_run(run *r, const uint8_t *in, size_t n, lt_format fmt, const char *field, size_t cap,
                   buf *decoded) {
    memset(r, 0, sizeof *r);
    lt_reader_opts o = {.format = fmt, .field = field, .max_doc_bytes = cap, .on_skip = on_skip, .skip_ctx = r};
    lt_reader *rd;
    lt_error err;
    r->st = lt_reader_open_mem(&rd, in, n, NAME, &o, &err);
    if (r->st != LT_OK) {
        if (r->st != LT_ERR_INPUT || fmt != LT_FMT_AUTO) fail("open: unexpected status", &err);
        r->other_format = true;
        return;
    }
    if (lt_reader_format(rd) != LT_FMT_JSONL) {
        if (fmt != LT_FMT_AUTO) fail("forced format not used", NULL);
        r->other_format = true;
        lt_reader_close(rd);
        return;
    }
    const size_t eff = cap ? cap : 64u * 1024 * 1024;
    size_t alloc = 0;
    uint64_t bytes = 0, trunc = 0;
    for (;;) {
        lt_doc d;
        bool eof;
        lt_error e;
        lt_status st = lt_reader_next(rd, &d, &eof, &e);
        if (st != LT_OK) {
            if (st != LT_ERR_INPUT) fail("next: unexpected status", &e);
            if (strstr(e.where, "compressed offset") == NULL) fail("damage without a compressed offset", &e);
            r->st = st;
            break;
        }
        if (eof) break;
        if (d.len > eff) fail("document longer than the cap", NULL);
        if (!lt_utf8_valid(d.text, d.len)) fail("document is not valid UTF-8", NULL);
        char id[32];
        snprintf(id, sizeof id, "line=%llu", (unsigned long long)d.record);
        if (strcmp(d.id, id) != 0 || strcmp(d.name, "") != 0) fail("bad locator", NULL);
        if (r->n == alloc) {
            alloc = alloc * 2 + 8;
            r->docs = realloc(r->docs, alloc * sizeof *r->docs);
            if (r->docs == NULL) fail("out of memory in the harness", NULL);
        }
        one_doc *od = &r->docs[r->n++];
        od->text = dup_n(d.text, d.len);
        od->len = d.len;
        od->record = d.record;
        od->truncated = d.truncated;
        bytes += d.len;
        trunc += d.truncated;
    }
    r->stats = *lt_reader_get_stats(rd);
    if (r->stats.docs != r->n || r->stats.text_bytes != bytes || r->stats.truncated != trunc)
        fail("document statistics do not add up", NULL);
    if (decoded != NULL) { /* the decompressed bytes, for the independent split */
        lt_src *s;
        if (lt_src_open_mem(&s, in, n, NAME, &err) != LT_OK) fail("lt_src_open_mem", &err);
        unsigned char tmp[4096];
        size_t got;
        while (lt_src_read(s, tmp, sizeof tmp, &got, &err) == LT_OK && got > 0) put(decoded, tmp, got);
        lt_src_close(s);
    }
    lt_reader_close(rd);
}

static void run_free(run *r) {
    for (size_t i = 0; i < r->n; i++) free(r->docs[i].text);
    free(r->docs);
}

static bool blank(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return false;
    return true;
}

/* The independent split: walk the lines of `text` and check them against the full run. */
static void check_lines(const run *r, const buf *text, const char *field) {
    size_t pos = 0, d = 0, k = 0;
    uint64_t line = 0, records = 0, filtered = 0;
    while (pos < text->n) {
        const unsigned char *p = text->p + pos;
        const unsigned char *nl = memchr(p, '\n', text->n - pos);
        size_t len = nl ? (size_t)(nl - p) : text->n - pos;
        pos += nl ? len + 1 : len;
        line++;
        records++;
        if (len > 0 && p[len - 1] == '\r') len--;
        if (blank(p, len)) {
            filtered++;
            continue;
        }
        char *val;
        size_t vlen;
        lt_error e;
        lt_status st = lt_jsonl_get_string((const char *)p, len, field, &val, &vlen, &e);
        if (st == LT_OK && val != NULL) {
            if (d >= r->n || r->docs[d].record != line) fail("a document line was not returned", NULL);
            char *clean = xmalloc(LT_UTF8_SANITIZE_MAX(vlen));
            size_t clen = lt_utf8_sanitize(val, vlen, clean, NULL);
            if (clen != r->docs[d].len || memcmp(clean, r->docs[d].text, clen) != 0)
                fail("document text differs from the line's value", NULL);
            free(clean);
            free(val);
            d++;
            continue;
        }
        if (st != LT_OK && st != LT_ERR_INPUT) fail("lt_jsonl_get_string: unexpected status", &e);
        if (k >= r->nskips || r->skip_line[k] != line) fail("a bad line was not reported", NULL);
        lt_skip_reason reason = r->skip_reason[k];
        if (st == LT_OK && reason != LT_SKIP_MISSING_FIELD) fail("absent field not missing_field", NULL);
        if (st != LT_OK && reason != LT_SKIP_BAD_JSON && reason != LT_SKIP_NOT_STRING) fail("parse error reason", &e);
        /* field_not_string only where the parser says so (a line that is also broken further
         * on is bad_json: the parser stops at the first verdict) */
        if (reason == LT_SKIP_NOT_STRING && strncmp(e.what, "value of key", 12) != 0)
            fail("field_not_string where the parser found a syntax error", &e);
        k++;
    }
    if (d != r->n || k != r->nskips) fail("more documents or skips than lines", NULL);
    if (r->stats.records != records || r->stats.filtered != filtered) fail("records/filtered do not add up", NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 1024 * 1024) return 0;
    static const size_t caps[8] = {1, 2, 3, 4, 5, 7, 64, 1000};
    static const char *const fields[4] = {"text", "code", "", "\xC3\xA9"};
    const uint8_t variant = data[0];
    const uint8_t *payload = data + 1;
    size_t n = size - 1;
    lt_format fmt = (variant & 3) == 1 ? LT_FMT_AUTO : LT_FMT_JSONL;
    const char *field = fields[(variant >> 2) & 3];
    buf packed = {0};
    if ((variant & 3) == 2) {
        gzip_to(&packed, payload, n / 2);
        gzip_to(&packed, payload + n / 2, n - n / 2);
    } else if ((variant & 3) == 3) {
        zstd_to(&packed, payload, n / 3);
        zstd_to(&packed, payload + n / 3, n - n / 3);
    }
    const uint8_t *in = packed.p ? packed.p : payload;
    size_t in_n = packed.p ? packed.n : n;
    if (fmt == LT_FMT_AUTO && detected_format(in, in_n) != LT_FMT_JSONL) return 0; /* another target's */

    run *capped = xmalloc(sizeof *capped), *full = xmalloc(sizeof *full);
    buf text = {0};
    do_run(capped, in, in_n, fmt, field, caps[(variant >> 4) & 7], NULL);
    do_run(full, in, in_n, fmt, field, 0, &text);
    if (capped->other_format != full->other_format) fail("detection is not deterministic", NULL);
    if (!full->other_format) {
        if (packed.p != NULL && full->st != LT_OK) fail("a stream the harness packed is damaged", NULL);
        if (capped->st != full->st || capped->n != full->n) fail("the cap changed the lines", NULL);
        for (size_t i = 0; i < full->n; i++) {
            const one_doc *a = &capped->docs[i], *b = &full->docs[i];
            if (a->record != b->record) fail("the cap changed a document's line", NULL);
            if (a->len > b->len || memcmp(a->text, b->text, a->len) != 0) fail("capped text is not a prefix", NULL);
            if (!a->truncated && a->len != b->len) fail("shorter text not marked truncated", NULL);
        }
        if (full->st == LT_OK && full->nskips <= MAX_SKIPS) check_lines(full, &text, field);
    }
    run_free(capped);
    run_free(full);
    free(capped);
    free(full);
    free(text.p);
    free(packed.p);
    return 0;
}
