/*
 * tests/fuzz/fuzz_wikixml.c — libFuzzer target for the MediaWiki XML reader (the wikixml
 * backend of dataprep/reader.h, with dataprep/source.c and the wikitext converter).
 *
 * Input layout: byte 0 picks max_doc_bytes (byte % 4: the default, 7, 64, 1024 — so the
 * ASCII digits '0'..'3' select it in seed files); the rest is the file, read with
 * lt_reader_open_mem and format wikixml (a bz2/gzip/zstd magic is decompressed).
 * Inputs shorter than 1 byte are ignored.
 *
 * Checked, over all documents until the end or an error:
 *   - no crash, leak, UB, exit or hang;
 *   - the status is LT_OK, or LT_ERR_INPUT (malformed XML, damaged compression) with a
 *     WHAT and a WHERE that begins with the file name; after it the reader is at EOF;
 *   - every document is valid UTF-8, at most max_doc_bytes long, truncated iff
 *     orig_bytes > len; its id is "page=" + digits; its record numbers increase; its
 *     offset lies inside the decompressed input seen so far;
 *   - the statistics add up: docs as returned, docs + filtered + bad pages <= records.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/reader.h"
#include "lib/json.h" /* lt_utf8_valid */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const lt_error *err) {
    fprintf(stderr, "fuzz_wikixml: property violated: %s\n", what);
    if (err != NULL)
        fprintf(stderr, "  status=%d what='%s' where='%s'\n", (int)err->status, err->what, err->where);
    abort();
}

static void count_skip(void *ctx, const char *where, lt_skip_reason reason, const char *message) {
    if (reason != LT_SKIP_BAD_PAGE) fail("a skip reason other than bad_page", NULL);
    if (strncmp(where, "fuzz.xml: page ", 15) != 0 || message[0] == '\0') fail("malformed skip report", NULL);
    (*(uint64_t *)ctx)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const size_t caps[4] = {0, 7, 64, 1024};
    lt_reader_opts o = {0};
    o.format = LT_FMT_WIKIXML;
    o.max_doc_bytes = caps[data[0] % 4];
    uint64_t skips = 0;
    o.on_skip = count_skip;
    o.skip_ctx = &skips;
    lt_reader *r;
    lt_error err;
    lt_status st = lt_reader_open_mem(&r, data + 1, size - 1, "fuzz.xml", &o, &err);
    if (st != LT_OK) {
        if (st != LT_ERR_INPUT) fail("open failed with a status other than LT_ERR_INPUT", &err);
        return 0;
    }
    uint64_t docs = 0, last_record = 0;
    for (;;) {
        lt_doc d;
        bool eof;
        st = lt_reader_next(r, &d, &eof, &err);
        if (st != LT_OK) {
            if (st != LT_ERR_INPUT || err.status != st || err.what[0] == '\0' ||
                strncmp(err.where, "fuzz.xml", 8) != 0)
                fail("malformed error", &err);
            if (lt_reader_next(r, &d, &eof, &err) != LT_OK || !eof) fail("not at EOF after an error", &err);
            break;
        }
        if (eof) break;
        docs++;
        if (!lt_utf8_valid(d.text, d.len)) fail("document text is not valid UTF-8", NULL);
        if (o.max_doc_bytes != 0 && d.len > o.max_doc_bytes) fail("document longer than max_doc_bytes", NULL);
        if (d.truncated != (d.orig_bytes > d.len)) fail("truncated disagrees with orig_bytes", NULL);
        if (strncmp(d.id, "page=", 5) != 0 || d.id[5] == '\0' || strspn(d.id + 5, "0123456789") != strlen(d.id + 5))
            fail("id is not page=DIGITS", NULL);
        if (d.record <= last_record) fail("record numbers do not increase", NULL);
        last_record = d.record;
        if (d.offset >= lt_src_offset(lt_reader_source(r))) fail("offset past the bytes read", NULL);
    }
    const lt_reader_stats *s = lt_reader_get_stats(r);
    if (s->docs != docs) fail("stats.docs differs from the documents returned", NULL);
    if (s->skipped[LT_SKIP_BAD_PAGE] != skips) fail("stats count other skips than reported", NULL);
    if (s->docs + s->filtered + skips > s->records) fail("more pages accounted for than seen", NULL);
    lt_reader_close(r);
    return 0;
}
