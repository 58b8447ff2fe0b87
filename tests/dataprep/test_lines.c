/*
 * tests/dataprep/test_lines.c — record-parallel JSONL decoding (dataprep/reader.h):
 * cutting lines with lt_reader_next_line on one thread and decoding them with
 * lt_line_decode gives exactly what lt_reader_next gives — the same documents (text, id,
 * record, offset, truncation, UTF-8 repairs), the same skips with the same WHERE and
 * reason, in the same order, and the same statistics — on lines that exercise every rule:
 * escapes, invalid UTF-8 inside and outside strings, unpaired surrogates, CRLF, blank
 * lines, bad JSON, a missing field, a non-string field, a line over the line cap,
 * truncation at a code point boundary, a last line without '\n'. Also: lines decoded out
 * of order by several decoders still give each line's own document; damage of the
 * compressed stream ends lt_reader_next_line with LT_ERR_INPUT after the lines before it;
 * a non-JSONL reader has no lines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <zstd.h>

#include "tests/testutil.h"

#include "dataprep/reader.h"

/* What a reading produced, as text: one line per document or skip, then the stats. */
typedef struct transcript {
    char *s;
    size_t n, cap;
} transcript;

static void tr_printf(transcript *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tr_printf(transcript *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    assert_true(k >= 0);
    if (t->n + (size_t)k + 1 > t->cap) {
        t->cap = (t->n + (size_t)k + 1) * 2;
        t->s = realloc(t->s, t->cap);
        assert_non_null(t->s);
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    t->n += (size_t)k;
}

static void tr_doc(transcript *t, const lt_doc *d) {
    tr_printf(t, "doc id=%s name=%s record=%llu offset=%llu truncated=%d orig=%llu repl=%llu len=%zu text=", d->id,
              d->name, (unsigned long long)d->record, (unsigned long long)d->offset, (int)d->truncated,
              (unsigned long long)d->orig_bytes, (unsigned long long)d->utf8_replacements, d->len);
    for (size_t i = 0; i < d->len; i++) tr_printf(t, "%02x", (unsigned char)d->text[i]);
    tr_printf(t, "\n");
}

static void tr_stats(transcript *t, const lt_reader_stats *s) {
    tr_printf(t, "stats records=%llu docs=%llu filtered=%llu truncated=%llu repaired=%llu repl=%llu text=%llu skipped",
              (unsigned long long)s->records, (unsigned long long)s->docs, (unsigned long long)s->filtered,
              (unsigned long long)s->truncated, (unsigned long long)s->repaired_docs,
              (unsigned long long)s->utf8_replacements, (unsigned long long)s->text_bytes);
    for (int r = 0; r < LT_SKIP_N_REASONS; r++) tr_printf(t, " %llu", (unsigned long long)s->skipped[r]);
    tr_printf(t, "\n");
}

static void on_skip(void *ctx, const char *where, lt_skip_reason reason, const char *message) {
    tr_printf(ctx, "skip %s [%s] %s\n", where, lt_skip_reason_key(reason), message);
}

/* The reference: lt_reader_next to the end. Returns the final status. */
static lt_status read_whole(const void *data, size_t len, const char *name, size_t max_doc, transcript *t) {
    lt_reader_opts o = {.format = LT_FMT_AUTO, .max_doc_bytes = max_doc, .on_skip = on_skip, .skip_ctx = t};
    lt_reader *r;
    lt_error err;
    assert_int_equal(lt_reader_open_mem(&r, data, len, name, &o, &err), LT_OK);
    lt_status st;
    for (;;) {
        lt_doc d;
        bool eof;
        st = lt_reader_next(r, &d, &eof, &err);
        if (st != LT_OK || eof) break;
        tr_doc(t, &d);
    }
    tr_stats(t, lt_reader_get_stats(r));
    lt_reader_close(r);
    return st;
}

/* The same file cut into lines, decoded by a decoder of its own. */
static lt_status read_lines(const void *data, size_t len, const char *name, size_t max_doc, transcript *t) {
    lt_reader_opts o = {.format = LT_FMT_AUTO, .max_doc_bytes = max_doc, .on_skip = on_skip, .skip_ctx = t};
    lt_reader *r;
    lt_error err;
    assert_int_equal(lt_reader_open_mem(&r, data, len, name, &o, &err), LT_OK);
    assert_true(lt_reader_has_lines(r));
    lt_line_decoder *dec = lt_line_decoder_new(&o);
    lt_reader_stats stats;
    memset(&stats, 0, sizeof stats);
    lt_status st;
    for (;;) {
        lt_line line;
        bool eof;
        st = lt_reader_next_line(r, &line, &eof, &err);
        if (st != LT_OK || eof) break;
        lt_doc d;
        bool is_doc;
        assert_int_equal(lt_line_decode(dec, name, &line, &stats, &d, &is_doc, &err), LT_OK);
        if (is_doc) tr_doc(t, &d);
    }
    /* the reader itself counted nothing */
    const lt_reader_stats *rs = lt_reader_get_stats(r);
    assert_int_equal(rs->records, 0);
    assert_int_equal(rs->docs, 0);
    tr_stats(t, &stats);
    lt_line_decoder_free(dec);
    lt_reader_close(r);
    return st;
}

static const char *sample_lines(size_t *len) {
    static char buf[8192];
    size_t n = 0;
#define ADD(s) (memcpy(buf + n, (s), sizeof(s) - 1), n += sizeof(s) - 1)
    ADD("{\"text\": \"plain ascii\"}\n");
    ADD("{\"id\": 3, \"text\": \"escapes \\n \\t \\\" \\u00e9 \\ud83d\\ude00\"}\r\n");
    ADD("\n");
    ADD("   \t \r\n");
    ADD("{\"text\": \"bad utf-8 \xff\xfe inside\"}\n");
    ADD("{\"text\": \"lone surrogate \\ud800 here\"}\n");
    ADD("{\"text\": \"unterminated}\n");
    ADD("not json at all\n");
    ADD("{\"other\": \"no text member\"}\n");
    ADD("{\"text\": 42}\n");
    ADD("{\"text\": \"\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\xe7\xac\xa6 cut inside a CJK run "
        "\xe4\xb8\xad\xe6\x96\x87\"}\n");
    ADD("{\"text\": \"");
    for (int i = 0; i < 300; i++) buf[n++] = 'x'; /* over a 64-byte cap: truncated */
    ADD("\"}\n");
    ADD("{\"text\": \"last line, no newline\"}");
#undef ADD
    *len = n;
    return buf;
}

static void test_lines_equal_documents(void **state) {
    (void)state;
    size_t len;
    const char *data = sample_lines(&len);
    const size_t caps[] = {0, 64, 7};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        transcript a = {0}, b = {0};
        assert_int_equal(read_whole(data, len, "s.jsonl", caps[c], &a), LT_OK);
        assert_int_equal(read_lines(data, len, "s.jsonl", caps[c], &b), LT_OK);
        if (a.n != b.n || memcmp(a.s, b.s, a.n) != 0)
            fail_msg("cap %zu:\n--- lt_reader_next:\n%s--- lines:\n%s", caps[c], a.s, b.s);
        /* the case covers what it should: documents, each skip reason of JSONL, truncation */
        assert_non_null(strstr(a.s, "[bad_json]"));
        assert_non_null(strstr(a.s, "[missing_field]"));
        assert_non_null(strstr(a.s, "[field_not_string]"));
        if (caps[c]) assert_non_null(strstr(a.s, "truncated=1"));
        free(a.s);
        free(b.s);
    }
}

/* A line over the line cap (2 x max_doc_bytes + 1 MiB) is cut, flagged and skipped. */
static void test_line_too_long(void **state) {
    (void)state;
    size_t big = (2u << 10) * 2 + (1u << 20) + 100;
    char *data = malloc(big + 64);
    assert_non_null(data);
    size_t n = 0;
    memcpy(data, "{\"text\": \"", 10);
    n = 10;
    memset(data + n, 'y', big);
    n += big;
    memcpy(data + n, "\"}\n{\"text\": \"after\"}\n", 21);
    n += 21;
    transcript a = {0}, b = {0};
    assert_int_equal(read_whole(data, n, "long.jsonl", 2u << 10, &a), LT_OK);
    assert_int_equal(read_lines(data, n, "long.jsonl", 2u << 10, &b), LT_OK);
    assert_string_equal(a.s, b.s);
    assert_non_null(strstr(a.s, "long.jsonl:1 [line_too_long]"));
    free(a.s);
    free(b.s);
    free(data);
}

/* Lines decoded in reverse order by two decoders: each line still gives its own document
 * (a decoder keeps no state from one line to the next that changes the result). */
static void test_decoders_are_independent(void **state) {
    (void)state;
    size_t len;
    const char *data = sample_lines(&len);
    lt_reader_opts o = {.format = LT_FMT_JSONL, .max_doc_bytes = 64};
    lt_reader *r;
    lt_error err;
    assert_int_equal(lt_reader_open_mem(&r, data, len, "s.jsonl", &o, &err), LT_OK);
    enum { MAXL = 32 };
    lt_line lines[MAXL];
    char *copies[MAXL];
    size_t nl = 0;
    for (;;) {
        lt_line line;
        bool eof;
        assert_int_equal(lt_reader_next_line(r, &line, &eof, &err), LT_OK);
        if (eof) break;
        assert_true(nl < MAXL);
        copies[nl] = malloc(line.len + 1);
        assert_non_null(copies[nl]);
        memcpy(copies[nl], line.text, line.len);
        lines[nl] = line;
        lines[nl].text = copies[nl];
        nl++;
    }
    lt_reader_close(r);
    assert_int_equal(nl, 13);
    lt_line_decoder *d1 = lt_line_decoder_new(&o), *d2 = lt_line_decoder_new(&o);
    transcript fwd[MAXL], rev[MAXL];
    memset(fwd, 0, sizeof fwd);
    memset(rev, 0, sizeof rev);
    lt_reader_stats s1, s2;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    for (size_t i = 0; i < nl; i++) {
        lt_doc d;
        bool is_doc;
        assert_int_equal(lt_line_decode(d1, "s.jsonl", &lines[i], &s1, &d, &is_doc, &err), LT_OK);
        if (is_doc) tr_doc(&fwd[i], &d);
        else tr_printf(&fwd[i], "none\n");
    }
    for (size_t i = nl; i-- > 0;) {
        lt_doc d;
        bool is_doc;
        assert_int_equal(lt_line_decode(i % 2 ? d1 : d2, "s.jsonl", &lines[i], &s2, &d, &is_doc, &err), LT_OK);
        if (is_doc) tr_doc(&rev[i], &d);
        else tr_printf(&rev[i], "none\n");
    }
    for (size_t i = 0; i < nl; i++) {
        assert_string_equal(fwd[i].s, rev[i].s);
        free(fwd[i].s);
        free(rev[i].s);
        free(copies[i]);
    }
    assert_memory_equal(&s1, &s2, sizeof s1);
    lt_line_decoder_free(d1);
    lt_line_decoder_free(d2);
}

/* A damaged zstd stream: the lines before the damage, then LT_ERR_INPUT, as for documents. */
static void test_damage_after_lines(void **state) {
    (void)state;
    size_t len;
    const char *data = sample_lines(&len);
    size_t cap = ZSTD_compressBound(len);
    unsigned char *z = malloc(cap + len);
    assert_non_null(z);
    size_t zn = ZSTD_compress(z, cap, data, len, 3);
    assert_false(ZSTD_isError(zn));
    /* a second frame cut short: everything of the first frame comes out, then damage */
    size_t zn2 = ZSTD_compress(z + zn, cap, data, len, 3);
    assert_false(ZSTD_isError(zn2));
    size_t total = zn + zn2 / 2;
    transcript a = {0}, b = {0};
    lt_status sa = read_whole(z, total, "d.jsonl.zst", 0, &a);
    lt_status sb = read_lines(z, total, "d.jsonl.zst", 0, &b);
    assert_int_equal(sa, LT_ERR_INPUT);
    assert_int_equal(sb, LT_ERR_INPUT);
    assert_string_equal(a.s, b.s);
    assert_non_null(strstr(a.s, "doc id=line=11 ")); /* the first frame's documents came out */
    free(a.s);
    free(b.s);
    free(z);
}

static void test_wet_has_no_lines(void **state) {
    (void)state;
    static const char wet[] = "WARC/1.0\r\nWARC-Type: warcinfo\r\nContent-Length: 0\r\n\r\n\r\n\r\n";
    lt_reader_opts o = {.format = LT_FMT_AUTO};
    lt_reader *r;
    lt_error err;
    assert_int_equal(lt_reader_open_mem(&r, wet, sizeof wet - 1, "x.wet", &o, &err), LT_OK);
    assert_false(lt_reader_has_lines(r));
    lt_line line;
    bool eof;
    assert_int_equal(lt_reader_next_line(r, &line, &eof, &err), LT_ERR_INTERNAL);
    lt_reader_close(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_equal_documents),
        cmocka_unit_test(test_line_too_long),
        cmocka_unit_test(test_decoders_are_independent),
        cmocka_unit_test(test_damage_after_lines),
        cmocka_unit_test(test_wet_has_no_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
