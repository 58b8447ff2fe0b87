/*
 * tests/dataprep/test_readers.c — the decompressing source (dataprep/source.h) and the
 * corpus readers (dataprep/reader.h) for WET and JSONL: every codec read back exactly
 * (multi-member gzip, multi-frame zstd with skippable frames, multistream bzip2, plain),
 * damage per codec reported with its compressed offset after the bytes before it, peek;
 * WET framing by Content-Length, record kinds, LF headers, overruns, bad records and
 * resynchronisation, truncation of a huge record in bounded memory; JSONL escapes, field
 * choice, each skip reason with its line, CRLF, blank lines, overlong lines, UTF-8 repair
 * and truncation at a code point boundary; format detection and forcing; the shared corpus
 * files (../shared/corpus or $LONGTAIL_SHARED, skipped when absent).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <bzlib.h>
#include <zlib.h>
#include <zstd.h>

#include "tests/testutil.h"

#include "dataprep/reader.h"
#include "dataprep/source.h"

static char root[256];

static int setup(void **state) {
    (void)state;
    return lt_test_tmpdir_create(root, sizeof root, "readers");
}

static int teardown(void **state) {
    (void)state;
    return lt_test_tmpdir_remove(root);
}

/* ================================================================ byte buffers */

typedef struct bytes {
    unsigned char *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *s, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        b->p = realloc(b->p, cap);
        assert_non_null(b->p);
        b->cap = cap;
    }
    if (n > 0) memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void puts_(bytes *b, const char *s) { put(b, s, strlen(s)); }

static void putf(bytes *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(bytes *b, const char *fmt, ...) {
    char tmp[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof tmp);
    put(b, tmp, (size_t)n);
}

static void bytes_free(bytes *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* Pseudo-random text that compresses a little (so members span several deflate blocks). */
static void random_text(bytes *b, size_t n, uint32_t seed) {
    static const char *const words[] = {"alpha ", "beta ", "gamma\n", "delta ", "\xC3\xA9t\xC3\xA9 ", "x", "\xE2\x82\xAC "};
    uint32_t s = seed * 2654435761u + 1;
    size_t start = b->n;
    while (b->n - start < n) {
        s = s * 1103515245u + 12345u;
        const char *w = words[(s >> 16) % 7];
        size_t k = strlen(w);
        if (b->n - start + k > n) k = n - (b->n - start);
        put(b, w, k);
    }
}

/* ---------------------------------------------------------------- compressors */

static void gzip_member(bytes *out, const void *data, size_t n) {
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t bound = deflateBound(&z, n) + 64;
    unsigned char *tmp = malloc(bound);
    assert_non_null(tmp);
    z.next_in = (Bytef *)(uintptr_t)data;
    z.avail_in = (uInt)n;
    z.next_out = tmp;
    z.avail_out = (uInt)bound;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    put(out, tmp, bound - z.avail_out);
    deflateEnd(&z);
    free(tmp);
}

static void zstd_frame(bytes *out, const void *data, size_t n) {
    size_t bound = ZSTD_compressBound(n);
    unsigned char *tmp = malloc(bound);
    assert_non_null(tmp);
    ZSTD_CCtx *c = ZSTD_createCCtx();
    assert_non_null(c);
    assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1))); /* as zstd(1) writes */
    size_t k = ZSTD_compress2(c, tmp, bound, data, n);
    ZSTD_freeCCtx(c);
    assert_false(ZSTD_isError(k));
    put(out, tmp, k);
    free(tmp);
}

static void zstd_skippable(bytes *out, size_t n) {
    unsigned char h[8] = {0x5A, 0x2A, 0x4D, 0x18, (unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16),
                          (unsigned char)(n >> 24)};
    put(out, h, 8);
    for (size_t i = 0; i < n; i++) put(out, "S", 1);
}

static void bzip2_stream(bytes *out, const void *data, size_t n) {
    unsigned int cap = (unsigned int)(n + n / 100 + 700);
    char *tmp = malloc(cap);
    assert_non_null(tmp);
    assert_int_equal(BZ2_bzBuffToBuffCompress(tmp, &cap, (char *)(uintptr_t)data, (unsigned int)n, 1, 0, 0), BZ_OK);
    put(out, tmp, cap);
    free(tmp);
}

typedef void (*compress_fn)(bytes *out, const void *data, size_t n);

/* ---------------------------------------------------------------- files */

static void path_in(char *buf, size_t size, const char *name) { snprintf(buf, size, "%s/%s", root, name); }

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n > 0) assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Read a whole source in `step`-byte reads. Returns the status of the last read. */
static lt_status src_read_all(lt_src *s, size_t step, bytes *out, lt_error *err) {
    unsigned char *buf = malloc(step);
    assert_non_null(buf);
    lt_status st;
    for (;;) {
        size_t got;
        st = lt_src_read(s, buf, step, &got, err);
        if (st != LT_OK || got == 0) break;
        put(out, buf, got);
    }
    free(buf);
    return st;
}

/* Decode `data` from memory and from a file; both must succeed and give `expect`. */
static void expect_decodes(const bytes *data, const bytes *expect, lt_codec codec, const char *file) {
    for (int from_file = 0; from_file < 2; from_file++) {
        for (size_t step = 1; step <= 1u << 20; step *= 97) {
            if (step == 1 && expect->n > 100000) continue; /* byte by byte: small inputs only */
            lt_src *s;
            lt_error err;
            if (from_file) {
                char p[512];
                path_in(p, sizeof p, file);
                write_file(p, data->p, data->n);
                assert_int_equal(lt_src_open(&s, p, &err), LT_OK);
                assert_int_equal(lt_src_raw_size(s), data->n);
            } else {
                assert_int_equal(lt_src_open_mem(&s, data->p, data->n, file, &err), LT_OK);
            }
            assert_int_equal(lt_src_codec(s), codec);
            bytes got = {0};
            lt_status st = src_read_all(s, step, &got, &err);
            if (st != LT_OK) fail_msg("%s: %s (%s)", file, err.what, err.where);
            assert_int_equal(got.n, expect->n);
            if (got.n) assert_memory_equal(got.p, expect->p, got.n);
            assert_int_equal(lt_src_offset(s), expect->n);
            assert_int_equal(lt_src_raw_offset(s), data->n);
            bytes_free(&got);
            lt_src_close(s);
        }
    }
}

/* ================================================================ source: round trips */

static void test_codec_names(void **state) {
    (void)state;
    assert_string_equal(lt_codec_name(LT_CODEC_NONE), "none");
    assert_string_equal(lt_codec_name(LT_CODEC_GZIP), "gzip");
    assert_string_equal(lt_codec_name(LT_CODEC_ZSTD), "zstd");
    assert_string_equal(lt_codec_name(LT_CODEC_BZIP2), "bzip2");
}

static void test_plain_round_trip(void **state) {
    (void)state;
    bytes text = {0};
    random_text(&text, 700000, 1); /* more than the 256 KiB input window */
    expect_decodes(&text, &text, LT_CODEC_NONE, "plain.txt");
    bytes small = {0};
    puts_(&small, "BZ"); /* shorter than any magic */
    expect_decodes(&small, &small, LT_CODEC_NONE, "short.txt");
    bytes_free(&text);
    bytes_free(&small);
}

static void test_empty_file_is_empty_stream(void **state) {
    (void)state;
    bytes empty = {0};
    expect_decodes(&empty, &empty, LT_CODEC_NONE, "empty.txt");
    lt_src *s;
    lt_error err;
    assert_int_equal(lt_src_open_mem(&s, NULL, 0, "null", &err), LT_OK);
    char c;
    size_t got = 1;
    assert_int_equal(lt_src_peek(s, &c, 1, &got, &err), LT_OK);
    assert_int_equal(got, 0);
    lt_src_close(s);
}

static void test_gzip_multi_member(void **state) {
    (void)state;
    bytes a = {0}, b = {0}, data = {0}, expect = {0};
    random_text(&a, 400000, 2);
    random_text(&b, 1000, 3);
    gzip_member(&data, a.p, a.n);
    gzip_member(&data, b.p, b.n);
    gzip_member(&data, "", 0); /* an empty member is still a member */
    gzip_member(&data, a.p, 10);
    put(&expect, a.p, a.n);
    put(&expect, b.p, b.n);
    put(&expect, a.p, 10);
    expect_decodes(&data, &expect, LT_CODEC_GZIP, "multi.gz");
    bytes_free(&a), bytes_free(&b), bytes_free(&data), bytes_free(&expect);
}

static void test_zstd_multi_frame(void **state) {
    (void)state;
    bytes a = {0}, data = {0}, expect = {0};
    random_text(&a, 500000, 4);
    zstd_skippable(&data, 5); /* a file may start with a skippable frame */
    zstd_frame(&data, a.p, a.n);
    zstd_skippable(&data, 300);
    zstd_frame(&data, "tail", 4);
    zstd_frame(&data, "", 0);
    put(&expect, a.p, a.n);
    put(&expect, "tail", 4);
    expect_decodes(&data, &expect, LT_CODEC_ZSTD, "multi.zst");
    bytes_free(&a), bytes_free(&data), bytes_free(&expect);
}

static void test_bzip2_multistream(void **state) {
    (void)state;
    bytes a = {0}, data = {0}, expect = {0};
    random_text(&a, 300000, 5); /* several 100k blocks */
    bzip2_stream(&data, a.p, a.n);
    bzip2_stream(&data, "second", 6);
    bzip2_stream(&data, a.p, 1000);
    put(&expect, a.p, a.n);
    put(&expect, "second", 6);
    put(&expect, a.p, 1000);
    expect_decodes(&data, &expect, LT_CODEC_BZIP2, "multi.bz2");
    bytes_free(&a), bytes_free(&data), bytes_free(&expect);
}

/* ================================================================ source: damage */

/* Decoding `data` fails with LT_ERR_INPUT whose WHAT contains `what` and whose WHERE is
 * "NAME: compressed offset N" (N <= size); at least `min_ok` bytes come before, the first
 * min_ok of `full` (all of them a prefix of `full` when `exact`: corrupt data may decode
 * to wrong bytes before a checksum catches it). */
static void expect_damage(const bytes *data, const bytes *full, size_t min_ok, bool exact, const char *what) {
    for (size_t step = 7; step <= 1u << 20; step *= 499) {
        lt_src *s;
        lt_error err;
        assert_int_equal(lt_src_open_mem(&s, data->p, data->n, "bad.bin", &err), LT_OK);
        bytes got = {0};
        lt_status st = src_read_all(s, step, &got, &err);
        assert_int_equal(st, LT_ERR_INPUT);
        if (strstr(err.what, what) == NULL) fail_msg("expected '%s' in '%s'", what, err.what);
        unsigned long long off;
        assert_int_equal(sscanf(err.where, "bad.bin: compressed offset %llu", &off), 1);
        assert_true(off <= data->n);
        assert_true(got.n >= min_ok);
        if (min_ok) assert_memory_equal(got.p, full->p, min_ok);
        if (exact) {
            assert_true(got.n <= full->n);
            if (got.n) assert_memory_equal(got.p, full->p, got.n);
        }
        /* after the error the stream stays at its end */
        size_t n;
        char c;
        assert_int_equal(lt_src_read(s, &c, 1, &n, &err), LT_OK);
        assert_int_equal(n, 0);
        bytes_free(&got);
        lt_src_close(s);
    }
}

static void damage_cases(compress_fn compress, const char *truncated_what, const char *corrupt_what,
                         const char *trailing_what) {
    bytes first = {0}, second = {0}, data = {0}, full = {0};
    random_text(&first, 50000, 6);
    random_text(&second, 200000, 7);
    compress(&data, first.p, first.n);
    size_t first_end = data.n;
    compress(&data, second.p, second.n);
    put(&full, first.p, first.n);
    put(&full, second.p, second.n);

    /* truncated inside the second unit */
    bytes cut = {0};
    put(&cut, data.p, first_end + (data.n - first_end) / 2);
    expect_damage(&cut, &full, first.n, true, truncated_what);
    /* truncated just after the magic of the second unit */
    cut.n = first_end + 4;
    expect_damage(&cut, &full, first.n, true, truncated_what);

    /* a corrupt byte in the middle of the second unit's data */
    bytes bad = {0};
    put(&bad, data.p, data.n);
    size_t at = first_end + (data.n - first_end) / 2;
    for (int k = 0; k < 16; k++) bad.p[at + (size_t)k] ^= 0x5A;
    expect_damage(&bad, &full, first.n, false, corrupt_what);

    /* bytes after the last unit that do not start another one */
    bytes trail = {0};
    put(&trail, data.p, data.n);
    puts_(&trail, "garbage after the end");
    expect_damage(&trail, &full, full.n, true, trailing_what);

    bytes_free(&first), bytes_free(&second), bytes_free(&data), bytes_free(&full);
    bytes_free(&cut), bytes_free(&bad), bytes_free(&trail);
}

static void test_gzip_damage(void **state) {
    (void)state;
    damage_cases(gzip_member, "truncated gzip stream", "corrupt gzip data", "last gzip member is not another");
}

static void test_zstd_damage(void **state) {
    (void)state;
    damage_cases(zstd_frame, "truncated zstd frame", "corrupt zstd data", "last zstd frame is not another");
}

static void test_bzip2_damage(void **state) {
    (void)state;
    damage_cases(bzip2_stream, "truncated bzip2 stream", "corrupt bzip2 data", "last bzip2 stream is not another");
}

static void test_unreadable_files(void **state) {
    (void)state;
    lt_src *s;
    lt_error err;
    char p[512];
    path_in(p, sizeof p, "does-not-exist.gz");
    assert_int_equal(lt_src_open(&s, p, &err), LT_ERR_IO);
    assert_null(s);
    assert_string_equal(err.where, p);
    assert_non_null(strstr(err.what, "No such file"));
    assert_int_equal(lt_src_open(&s, root, &err), LT_ERR_IO); /* a directory */
    assert_int_equal(lt_src_open(&s, "-", &err), LT_ERR_USAGE);
    lt_reader *r;
    assert_int_equal(lt_reader_open(&r, p, NULL, &err), LT_ERR_IO);
    assert_null(r);
}

/* ================================================================ source: peek */

static void test_peek(void **state) {
    (void)state;
    bytes text = {0}, data = {0};
    random_text(&text, 200000, 8);
    gzip_member(&data, text.p, 1000);
    gzip_member(&data, text.p + 1000, text.n - 1000);
    lt_src *s;
    lt_error err;
    assert_int_equal(lt_src_open_mem(&s, data.p, data.n, "peek.gz", &err), LT_OK);
    char buf[70000];
    size_t got;
    assert_int_equal(lt_src_peek(s, buf, 10, &got, &err), LT_OK);
    assert_int_equal(got, 10);
    assert_memory_equal(buf, text.p, 10);
    assert_int_equal(lt_src_offset(s), 0);
    assert_int_equal(lt_src_peek(s, buf, 65536, &got, &err), LT_OK); /* across the member end */
    assert_int_equal(got, 65536);
    assert_memory_equal(buf, text.p, 65536);
    assert_int_equal(lt_src_peek(s, buf, 65537, &got, &err), LT_ERR_INTERNAL); /* over the cap */
    assert_int_equal(lt_src_read(s, buf, 5, &got, &err), LT_OK);
    assert_int_equal(got, 5);
    assert_memory_equal(buf, text.p, 5);
    assert_int_equal(lt_src_peek(s, buf, 100, &got, &err), LT_OK); /* after a read: from there */
    assert_memory_equal(buf, text.p + 5, 100);
    bytes rest = {0};
    put(&rest, buf, 0);
    assert_int_equal(src_read_all(s, 3000, &rest, &err), LT_OK);
    assert_int_equal(rest.n, text.n - 5);
    assert_memory_equal(rest.p, text.p + 5, rest.n);
    lt_src_close(s);

    /* damage met by a peek is reported by the read after the bytes before it */
    data.n -= 20;
    assert_int_equal(lt_src_open_mem(&s, data.p, 1500, "peekcut.gz", &err), LT_OK);
    assert_int_equal(lt_src_peek(s, buf, 65536, &got, &err), LT_OK);
    assert_true(got >= 1000 && got < 65536);
    bytes all = {0};
    assert_int_equal(src_read_all(s, 100, &all, &err), LT_ERR_INPUT);
    assert_true(all.n >= got);
    assert_memory_equal(all.p, text.p, all.n);
    assert_non_null(strstr(err.where, "compressed offset 1500"));
    lt_src_close(s);
    bytes_free(&text), bytes_free(&data), bytes_free(&rest), bytes_free(&all);
}

/* ================================================================ reader harness */

#define MAX_SKIPS 64

typedef struct skip_log {
    size_t n;
    lt_skip_reason reason[MAX_SKIPS];
    char where[MAX_SKIPS][256];
    char msg[MAX_SKIPS][512];
} skip_log;

static void log_skip(void *ctx, const char *where, lt_skip_reason reason, const char *message) {
    skip_log *l = ctx;
    assert_true(l->n < MAX_SKIPS);
    l->reason[l->n] = reason;
    snprintf(l->where[l->n], sizeof l->where[0], "%s", where);
    snprintf(l->msg[l->n], sizeof l->msg[0], "%s", message);
    l->n++;
}

#define MAX_DOCS 64

typedef struct read_result {
    lt_status st;
    lt_error err;
    lt_format format;
    size_t n;
    char *text[MAX_DOCS];
    size_t len[MAX_DOCS];
    char id[MAX_DOCS][128];
    char name[MAX_DOCS][128];
    lt_doc doc[MAX_DOCS];
    lt_reader_stats stats;
    skip_log skips;
} read_result;

static void read_doc_list(lt_reader *r, read_result *res) {
    res->format = lt_reader_format(r);
    for (;;) {
        lt_doc d;
        bool eof;
        res->st = lt_reader_next(r, &d, &eof, &res->err);
        if (res->st != LT_OK || eof) break;
        assert_true(res->n < MAX_DOCS);
        res->text[res->n] = malloc(d.len + 1);
        assert_non_null(res->text[res->n]);
        memcpy(res->text[res->n], d.text, d.len);
        res->text[res->n][d.len] = '\0';
        res->len[res->n] = d.len;
        snprintf(res->id[res->n], sizeof res->id[0], "%s", d.id);
        snprintf(res->name[res->n], sizeof res->name[0], "%s", d.name);
        res->doc[res->n] = d;
        res->n++;
    }
    /* after the end (or an error) the reader stays at its end */
    lt_doc d;
    bool eof = false;
    lt_error e2;
    assert_int_equal(lt_reader_next(r, &d, &eof, &e2), LT_OK);
    assert_true(eof);
    res->stats = *lt_reader_get_stats(r);
}

static read_result *read_mem(const void *data, size_t n, const char *name, lt_format fmt, const char *field,
                             size_t max_doc) {
    read_result *res = calloc(1, sizeof *res);
    assert_non_null(res);
    lt_reader_opts o = {.format = fmt, .field = field, .max_doc_bytes = max_doc, .on_skip = log_skip,
                        .skip_ctx = &res->skips};
    lt_reader *r;
    res->st = lt_reader_open_mem(&r, data, n, name, &o, &res->err);
    if (res->st != LT_OK) return res;
    read_doc_list(r, res);
    lt_reader_close(r);
    return res;
}

static read_result *read_path(const char *path, lt_format fmt, const char *field, size_t max_doc) {
    read_result *res = calloc(1, sizeof *res);
    assert_non_null(res);
    lt_reader_opts o = {.format = fmt, .field = field, .max_doc_bytes = max_doc, .on_skip = log_skip,
                        .skip_ctx = &res->skips};
    lt_reader *r;
    res->st = lt_reader_open(&r, path, &o, &res->err);
    if (res->st != LT_OK) return res;
    read_doc_list(r, res);
    lt_reader_close(r);
    return res;
}

static void result_free(read_result *res) {
    for (size_t i = 0; i < res->n; i++) free(res->text[i]);
    free(res);
}

static void expect_ok(const read_result *res) {
    if (res->st != LT_OK) fail_msg("reader failed: %s (%s)", res->err.what, res->err.where);
}

/* ================================================================ WET */

/* One WARC record; `eol` is "\r\n" or "\n" for the header; the block is framed by its
 * exact length and followed by CRLF CRLF. */
static void warc_record(bytes *b, const char *eol, const char *type, const char *id, const char *uri,
                        const void *block, size_t n) {
    putf(b, "WARC/1.0%sWARC-Type: %s%s", eol, type, eol);
    if (uri) putf(b, "WARC-Target-URI: %s%s", uri, eol);
    putf(b, "WARC-Date: 2024-05-20T00:00:00Z%s", eol);
    if (id) putf(b, "WARC-Record-ID: %s%s", id, eol);
    putf(b, "Content-Type: text/plain%sContent-Length: %zu%s%s", eol, n, eol, eol);
    put(b, block, n);
    puts_(b, "\r\n\r\n");
}

static void test_wet_framing_by_length(void **state) {
    (void)state;
    bytes b = {0};
    const char *info = "software: test\r\n";
    warc_record(&b, "\r\n", "warcinfo", "<urn:uuid:0>", NULL, info, strlen(info));
    /* a block that looks like records inside must stay one document */
    const char *tricky = "first line\r\n\r\nWARC/1.0\r\nWARC-Type: conversion\r\nContent-Length: 3\r\n\r\nabc\r\n\r\nend";
    warc_record(&b, "\r\n", "conversion", "<urn:uuid:1>", "https://a.example/", tricky, strlen(tricky));
    warc_record(&b, "\r\n", "metadata", "<urn:uuid:2>", "https://a.example/", "x: y", 4);
    warc_record(&b, "\r\n", "conversion", "<urn:uuid:3>", "https://b.example/", "", 0);
    warc_record(&b, "\r\n", "conversion", "<urn:uuid:4>", "https://c.example/", "no newline", 10);
    read_result *res = read_mem(b.p, b.n, "t.warc.wet", LT_FMT_AUTO, NULL, 0);
    expect_ok(res);
    assert_int_equal(res->format, LT_FMT_WET);
    assert_int_equal(res->n, 3);
    assert_string_equal(res->text[0], tricky);
    assert_string_equal(res->id[0], "<urn:uuid:1>");
    assert_string_equal(res->name[0], "https://a.example/");
    assert_int_equal(res->doc[0].record, 2);
    assert_int_equal(res->len[1], 0);
    assert_string_equal(res->id[1], "<urn:uuid:3>");
    assert_string_equal(res->text[2], "no newline");
    assert_int_equal(res->doc[2].record, 5);
    assert_int_equal(res->stats.records, 5);
    assert_int_equal(res->stats.docs, 3);
    assert_int_equal(res->stats.filtered, 2);
    assert_int_equal(res->skips.n, 0);
    /* the offset of a record is where its version line starts */
    assert_memory_equal(b.p + res->doc[2].offset, "WARC/1.0\r\nWARC-Type: conversion", 31);
    result_free(res);
    bytes_free(&b);
}

static void test_wet_lf_headers_and_variants(void **state) {
    (void)state;
    bytes b = {0};
    warc_record(&b, "\n", "conversion", "<urn:uuid:lf>", "https://lf.example/", "lf body", 7);
    /* WARC/1.1, lower-case names, extra spaces, no blank line between records */
    puts_(&b, "WARC/1.1\r\nwarc-type:   conversion  \r\ncontent-length: 5\r\nwarc-record-id: <id11>\r\n\r\nhello");
    puts_(&b, "\r\n\r\n\r\n");
    warc_record(&b, "\r\n", "conversion", NULL, NULL, "anon", 4); /* no id, no URI */
    read_result *res = read_mem(b.p, b.n, "x", LT_FMT_WET, NULL, 0);
    expect_ok(res);
    assert_int_equal(res->n, 3);
    assert_string_equal(res->text[0], "lf body");
    assert_string_equal(res->id[0], "<urn:uuid:lf>");
    assert_string_equal(res->text[1], "hello");
    assert_string_equal(res->id[1], "<id11>");
    assert_string_equal(res->name[1], "");
    assert_string_equal(res->text[2], "anon");
    assert_string_equal(res->id[2], "record=3");
    assert_int_equal(res->skips.n, 0);
    result_free(res);
    bytes_free(&b);
}

static void test_wet_length_overrun(void **state) {
    (void)state;
    bytes b = {0};
    warc_record(&b, "\r\n", "conversion", "<a>", "u", "good", 4);
    size_t second = b.n;
    puts_(&b, "WARC/1.0\r\nWARC-Type: conversion\r\nContent-Length: 99999\r\n\r\nshort body\r\n\r\n");
    read_result *res = read_mem(b.p, b.n, "over.wet", LT_FMT_AUTO, NULL, 0);
    expect_ok(res);
    assert_int_equal(res->n, 1);
    assert_string_equal(res->text[0], "good");
    assert_int_equal(res->skips.n, 1);
    assert_int_equal(res->skips.reason[0], LT_SKIP_LENGTH_OVERRUN);
    char where[256];
    snprintf(where, sizeof where, "over.wet: record 2 at offset %zu", second);
    assert_string_equal(res->skips.where[0], where);
    assert_non_null(strstr(res->skips.msg[0], "99999"));
    assert_int_equal(res->stats.skipped[LT_SKIP_LENGTH_OVERRUN], 1);
    assert_int_equal(res->stats.records, 2);
    result_free(res);
    bytes_free(&b);
}

static void test_wet_bad_records_resync(void **state) {
    (void)state;
    bytes b = {0};
    warc_record(&b, "\r\n", "conversion", "<1>", "u1", "one", 3);
    size_t bad1 = b.n;
    puts_(&b, "WARC/1.0\r\nWARC-Type: conversion\r\nContent-Length: 12x\r\n\r\nbody of bad\r\n\r\n");
    warc_record(&b, "\r\n", "conversion", "<2>", "u2", "two", 3);
    size_t bad2 = b.n;
    puts_(&b, "garbage that is not a record\nmore garbage WARC/1.0 not at a line start\n");
    warc_record(&b, "\r\n", "conversion", "<3>", "u3", "three", 5);
    size_t bad3 = b.n;
    /* Content-Length too short: the block is not followed by CRLF CRLF + a record */
    puts_(&b, "WARC/1.0\r\nWARC-Type: conversion\r\nContent-Length: 2\r\n\r\nlonger than two\r\n\r\n");
    warc_record(&b, "\r\n", "conversion", "<4>", "u4", "four", 4);
    size_t bad4 = b.n;
    puts_(&b, "WARC/1.0\r\nWARC-Type: conversion\r\nno colon here\r\nContent-Length: 1\r\n\r\nx\r\n\r\n");
    size_t bad5 = b.n;
    puts_(&b, "WARC/1.0\r\nWARC-Type: conversion\r\n\r\nno length\r\n\r\n");
    warc_record(&b, "\r\n", "conversion", "<5>", "u5", "five", 4);
    read_result *res = read_mem(b.p, b.n, "bad.wet", LT_FMT_WET, NULL, 0);
    expect_ok(res);
    assert_int_equal(res->n, 5);
    const char *want[] = {"one", "two", "three", "four", "five"};
    for (size_t i = 0; i < 5; i++) assert_string_equal(res->text[i], want[i]);
    assert_int_equal(res->skips.n, 5);
    size_t offs[] = {bad1, bad2, bad3, bad4, bad5};
    uint64_t recs[] = {2, 4, 6, 8, 9};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(res->skips.reason[i], LT_SKIP_BAD_RECORD);
        char where[256];
        snprintf(where, sizeof where, "bad.wet: record %llu at offset %zu", (unsigned long long)recs[i], offs[i]);
        assert_string_equal(res->skips.where[i], where);
    }
    assert_non_null(strstr(res->skips.msg[0], "'12x' is not a number"));
    assert_non_null(strstr(res->skips.msg[1], "version line"));
    assert_non_null(strstr(res->skips.msg[2], "CRLF CRLF"));
    assert_non_null(strstr(res->skips.msg[3], "Name: value"));
    assert_non_null(strstr(res->skips.msg[4], "without Content-Length"));
    assert_int_equal(res->stats.skipped[LT_SKIP_BAD_RECORD], 5);
    result_free(res);
    bytes_free(&b);

    /* an oversized header and a header cut by the end of the file */
    bytes h = {0};
    puts_(&h, "WARC/1.0\r\nX-Big: ");
    for (int i = 0; i < 70000; i++) puts_(&h, "y");
    puts_(&h, "\r\nContent-Length: 1\r\n\r\nz\r\n\r\n");
    warc_record(&h, "\r\n", "conversion", "<ok>", "u", "ok", 2);
    puts_(&h, "WARC/1.0\r\nWARC-Type: conv");
    res = read_mem(h.p, h.n, "hdr.wet", LT_FMT_WET, NULL, 0);
    expect_ok(res);
    assert_int_equal(res->n, 1);
    assert_string_equal(res->text[0], "ok");
    assert_int_equal(res->skips.n, 2);
    assert_non_null(strstr(res->skips.msg[0], "64 KiB"));
    assert_non_null(strstr(res->skips.msg[1], "ends inside the WARC header"));
    result_free(res);
    bytes_free(&h);
}

static long max_rss_kib(void) {
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss;
}

/* A 64 MiB record in a gzip file, read with a 1 MiB cap: the reader keeps ~1 MiB. */
static void test_wet_huge_record_bounded(void **state) {
    (void)state;
    const size_t body = 64u << 20, cap = 1u << 20;
    bytes gz = {0};
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    unsigned char out[1 << 16];
    bytes head = {0};
    putf(&head, "WARC/1.0\r\nWARC-Type: conversion\r\nWARC-Record-ID: <big>\r\nContent-Length: %zu\r\n\r\n", body);
    char chunk[4096];
    for (size_t i = 0; i < sizeof chunk; i++) chunk[i] = "0123456789abcde\xE2\x82\xAC"[i % 18];
    size_t fed = 0;
    int phase = 0; /* 0 header, 1 body, 2 trailer + next record, 3 finish */
    bytes tail = {0};
    puts_(&tail, "\r\n\r\n");
    warc_record(&tail, "\r\n", "conversion", "<small>", "u", "after", 5);
    for (;;) {
        const void *in;
        size_t n;
        int flush = Z_NO_FLUSH;
        if (phase == 0) in = head.p, n = head.n, phase = 1;
        else if (phase == 1) {
            n = body - fed < sizeof chunk ? body - fed : sizeof chunk;
            in = chunk;
            fed += n;
            if (fed == body) phase = 2;
        } else if (phase == 2) in = tail.p, n = tail.n, phase = 3;
        else in = "", n = 0, flush = Z_FINISH;
        z.next_in = (Bytef *)(uintptr_t)in;
        z.avail_in = (uInt)n;
        int ret;
        do {
            z.next_out = out;
            z.avail_out = sizeof out;
            ret = deflate(&z, flush);
            put(&gz, out, sizeof out - z.avail_out);
        } while (z.avail_out == 0);
        if (flush == Z_FINISH) {
            assert_int_equal(ret, Z_STREAM_END);
            break;
        }
    }
    deflateEnd(&z);
    char p[512];
    path_in(p, sizeof p, "big.warc.wet.gz");
    write_file(p, gz.p, gz.n);
    bytes_free(&gz);

    long before = max_rss_kib();
    read_result *res = read_path(p, LT_FMT_AUTO, NULL, cap);
    long grew = max_rss_kib() - before;
    expect_ok(res);
    assert_int_equal(res->n, 2);
    assert_true(res->doc[0].truncated);
    assert_int_equal(res->doc[0].orig_bytes, body);
    assert_true(res->len[0] <= cap && res->len[0] > cap - 4);
    assert_memory_equal(res->text[0], chunk, 100);
    assert_int_equal(res->doc[0].utf8_replacements, 0); /* the euro sign at the cap is not split */
    assert_string_equal(res->text[1], "after");
    assert_int_equal(res->stats.truncated, 1);
    if (grew > 32 * 1024) fail_msg("reading a 64 MiB record with a 1 MiB cap grew the RSS by %ld KiB", grew);
    result_free(res);
    bytes_free(&head), bytes_free(&tail);
}

static void test_wet_invalid_utf8_repaired(void **state) {
    (void)state;
    bytes b = {0};
    const char body[] = "bad \xFF\xFE bytes \xE2\x82 end";
    warc_record(&b, "\r\n", "conversion", "<u>", "u", body, sizeof body - 1);
    read_result *res = read_mem(b.p, b.n, "u.wet", LT_FMT_WET, NULL, 0);
    expect_ok(res);
    assert_int_equal(res->n, 1);
    assert_string_equal(res->text[0], "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes \xEF\xBF\xBD end");
    assert_int_equal(res->doc[0].utf8_replacements, 3);
    assert_int_equal(res->stats.repaired_docs, 1);
    assert_int_equal(res->stats.utf8_replacements, 3);
    result_free(res);
    bytes_free(&b);
}

/* ================================================================ JSONL */

static void test_jsonl_escapes_and_field(void **state) {
    (void)state;
    const char *in = "{\"id\": 1, \"text\": \"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\" \\n\\t\\\\\", \"code\": \"int x;\"}\n"
                     "{\"text\": \"lone \\ud800 surrogate\", \"code\": \"y\"}\r\n"
                     "\n"
                     "   \t \r\n"
                     "{\"text\": \"last, no newline\", \"code\": \"z\"}";
    read_result *res = read_mem(in, strlen(in), "e.jsonl", LT_FMT_AUTO, NULL, 0);
    expect_ok(res);
    assert_int_equal(res->format, LT_FMT_JSONL);
    assert_int_equal(res->n, 3);
    assert_string_equal(res->text[0], "caf\xC3\xA9 \xF0\x9F\x98\x80 \"q\" \n\t\\");
    assert_string_equal(res->id[0], "line=1");
    assert_string_equal(res->name[0], "");
    assert_int_equal(res->doc[0].utf8_replacements, 0);
    assert_string_equal(res->text[1], "lone \xEF\xBF\xBD surrogate");
    assert_int_equal(res->doc[1].utf8_replacements, 1);
    assert_string_equal(res->text[2], "last, no newline");
    assert_string_equal(res->id[2], "line=5");
    assert_int_equal(res->doc[2].record, 5);
    assert_int_equal(res->stats.filtered, 2); /* the blank lines */
    assert_int_equal(res->stats.records, 5);
    assert_int_equal(res->skips.n, 0);
    /* the offset of a record is where its line starts */
    assert_memory_equal(in + res->doc[1].offset, "{\"text\": \"lone", 14);
    result_free(res);

    res = read_mem(in, strlen(in), "e.jsonl", LT_FMT_JSONL, "code", 0);
    expect_ok(res);
    assert_int_equal(res->n, 3);
    assert_string_equal(res->text[0], "int x;");
    assert_string_equal(res->text[1], "y");
    assert_string_equal(res->text[2], "z");
    result_free(res);
}

static void test_jsonl_skip_reasons(void **state) {
    (void)state;
    const char *in = "{\"text\": \"good line one\"}\n"
                     "{\"text\": \"unterminated \n"
                     "{not json}\n"
                     "{\"notext\": 1, \"code\": \"int x;\", \"path\": \"a.c\"}\n"
                     "{\"text\": \"invalid utf8 \xFF\xFE here\"}\n"
                     "{\"text\": 42}\n"
                     "\n"
                     "[\"an array\"]\r\n"
                     "{\"text\": {\"nested\": \"object\"}, \"x\": 1}\n"
                     "{\"nested\": {\"text\": \"not top level\"}}\n"
                     "{\"text\": \"good line two\"}\r\n";
    read_result *res = read_mem(in, strlen(in), "m.jsonl", LT_FMT_AUTO, NULL, 0);
    expect_ok(res);
    assert_int_equal(res->n, 3);
    assert_string_equal(res->text[0], "good line one");
    assert_string_equal(res->text[1], "invalid utf8 \xEF\xBF\xBD\xEF\xBF\xBD here");
    assert_int_equal(res->doc[1].utf8_replacements, 2);
    assert_string_equal(res->id[1], "line=5");
    assert_string_equal(res->text[2], "good line two");
    assert_string_equal(res->id[2], "line=11");
    struct {
        const char *where;
        lt_skip_reason reason;
        const char *msg;
    } want[] = {
        {"m.jsonl:2", LT_SKIP_BAD_JSON, "unterminated string (column 10)"},
        {"m.jsonl:3", LT_SKIP_BAD_JSON, "(column 2)"},
        {"m.jsonl:4", LT_SKIP_MISSING_FIELD, "no member 'text' (members: notext, code, path; longest string: code)"},
        {"m.jsonl:6", LT_SKIP_NOT_STRING, "is a number"},
        {"m.jsonl:8", LT_SKIP_BAD_JSON, "(column 1)"},
        {"m.jsonl:9", LT_SKIP_NOT_STRING, "is an object"},
        {"m.jsonl:10", LT_SKIP_MISSING_FIELD, "no member 'text' (members: nested)"},
    };
    assert_int_equal(res->skips.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < res->skips.n; i++) {
        assert_string_equal(res->skips.where[i], want[i].where);
        assert_int_equal(res->skips.reason[i], want[i].reason);
        if (strstr(res->skips.msg[i], want[i].msg) == NULL)
            fail_msg("skip %zu: expected '%s' in '%s'", i, want[i].msg, res->skips.msg[i]);
    }
    assert_int_equal(res->stats.skipped[LT_SKIP_BAD_JSON], 3);
    assert_int_equal(res->stats.skipped[LT_SKIP_MISSING_FIELD], 2);
    assert_int_equal(res->stats.skipped[LT_SKIP_NOT_STRING], 2);
    assert_int_equal(res->stats.filtered, 1);
    assert_int_equal(res->stats.records, 11);
    assert_int_equal(res->stats.docs, 3);
    assert_int_equal(res->stats.repaired_docs, 1);
    assert_int_equal(res->stats.utf8_replacements, 2);
    result_free(res);
}

static void test_jsonl_line_too_long(void **state) {
    (void)state;
    const size_t cap = 10, line_max = 2 * cap + (1u << 20);
    bytes b = {0};
    puts_(&b, "{\"text\": \"before\"}\n{\"text\": \"");
    for (size_t i = 0; i < line_max; i++) put(&b, "a", 1);
    puts_(&b, "\"}\n{\"text\": \"after\"}\n");
    /* a line exactly at the cap is still read */
    puts_(&b, "{\"text\": \"");
    for (size_t i = 0; i < line_max - 12; i++) put(&b, "b", 1);
    puts_(&b, "\"}\n");
    read_result *res = read_mem(b.p, b.n, "long.jsonl", LT_FMT_JSONL, NULL, cap);
    expect_ok(res);
    assert_int_equal(res->n, 3);
    assert_string_equal(res->text[0], "before");
    assert_string_equal(res->text[1], "after");
    assert_string_equal(res->id[1], "line=3");
    assert_int_equal(res->len[2], cap);
    assert_true(res->doc[2].truncated);
    assert_int_equal(res->doc[2].orig_bytes, line_max - 12);
    assert_int_equal(res->skips.n, 1);
    assert_int_equal(res->skips.reason[0], LT_SKIP_LINE_TOO_LONG);
    assert_string_equal(res->skips.where[0], "long.jsonl:2");
    assert_int_equal(res->stats.skipped[LT_SKIP_LINE_TOO_LONG], 1);
    result_free(res);
    bytes_free(&b);
}

static void test_truncation_at_utf8_boundary(void **state) {
    (void)state;
    /* "ab" + euro sign (3 bytes) + "c": caps 2..6 */
    const char *in = "{\"text\": \"ab\xE2\x82\xAC" "c\"}\n";
    struct {
        size_t cap, len;
        bool truncated;
    } cases[] = {{1, 1, true}, {2, 2, true}, {3, 2, true}, {4, 2, true}, {5, 5, true}, {6, 6, false}, {7, 6, false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        read_result *res = read_mem(in, strlen(in), "t.jsonl", LT_FMT_JSONL, NULL, cases[i].cap);
        expect_ok(res);
        assert_int_equal(res->n, 1);
        assert_int_equal(res->len[0], cases[i].len);
        assert_memory_equal(res->text[0], "ab\xE2\x82\xAC" "c", cases[i].len);
        assert_int_equal(res->doc[0].truncated, cases[i].truncated);
        assert_int_equal(res->doc[0].orig_bytes, 6);
        assert_int_equal(res->doc[0].utf8_replacements, 0);
        assert_int_equal(res->stats.truncated, cases[i].truncated ? 1 : 0);
        result_free(res);
    }
    /* invalid bytes near the cap: each U+FFFD is whole and counted only when kept */
    bytes b = {0};
    const char raw[] = "a\xFF\xFE" "b";
    warc_record(&b, "\r\n", "conversion", "<x>", "u", raw, 4);
    struct {
        size_t cap, len, repl;
    } bad[] = {{1, 1, 0}, {3, 1, 0}, {4, 4, 1}, {6, 4, 1}, {7, 7, 2}, {8, 8, 2}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        read_result *res = read_mem(b.p, b.n, "t.wet", LT_FMT_WET, NULL, bad[i].cap);
        expect_ok(res);
        assert_int_equal(res->n, 1);
        assert_int_equal(res->len[0], bad[i].len);
        assert_memory_equal(res->text[0], "a\xEF\xBF\xBD\xEF\xBF\xBD" "b", bad[i].len);
        assert_int_equal(res->doc[0].utf8_replacements, bad[i].repl);
        assert_int_equal(res->doc[0].truncated, bad[i].cap < 8);
        assert_int_equal(res->doc[0].orig_bytes, 4);
        result_free(res);
    }
    bytes_free(&b);
}

static void test_jsonl_compressed_and_damaged(void **state) {
    (void)state;
    bytes text = {0}, data = {0};
    for (int i = 1; i <= 60; i++) putf(&text, "{\"text\": \"document %d\"}\n", i);
    zstd_frame(&data, text.p, text.n / 2 + 3); /* the frame boundary falls inside a line */
    zstd_frame(&data, text.p + text.n / 2 + 3, text.n - text.n / 2 - 3);
    read_result *res = read_mem(data.p, data.n, "c.jsonl.zst", LT_FMT_AUTO, NULL, 0);
    expect_ok(res);
    assert_int_equal(res->n, 60);
    assert_string_equal(res->text[59], "document 60");
    result_free(res);
    bytes_free(&text);

    /* 40 lines, cut inside the second of two gzip members */
    for (int i = 1; i <= 40; i++) putf(&text, "{\"text\": \"document %d\"}\n", i);
    bytes gz = {0};
    gzip_member(&gz, text.p, text.n / 2);
    size_t first = gz.n;
    gzip_member(&gz, text.p + text.n / 2, text.n - text.n / 2);
    gz.n = first + (gz.n - first) / 2;
    res = read_mem(gz.p, gz.n, "cut.jsonl.gz", LT_FMT_AUTO, NULL, 0);
    assert_int_equal(res->st, LT_ERR_INPUT);
    assert_non_null(strstr(res->err.what, "truncated gzip"));
    assert_non_null(strstr(res->err.where, "cut.jsonl.gz: compressed offset"));
    assert_true(res->n >= 19); /* every line of the first member */
    for (size_t i = 0; i < res->n; i++) {
        char want[64];
        snprintf(want, sizeof want, "document %zu", i + 1);
        assert_string_equal(res->text[i], want);
    }
    result_free(res);
    bytes_free(&text), bytes_free(&data), bytes_free(&gz);
}

/* ================================================================ detection */

static void test_format_names_and_keys(void **state) {
    (void)state;
    lt_format f;
    const lt_format all[] = {LT_FMT_AUTO, LT_FMT_WET, LT_FMT_JSONL, LT_FMT_WIKIXML, LT_FMT_PARQUET};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(lt_format_parse(lt_format_name(all[i]), &f), LT_OK);
        assert_int_equal(f, all[i]);
    }
    assert_int_equal(lt_format_parse("json", &f), LT_ERR_USAGE);
    assert_int_equal(lt_format_parse(NULL, &f), LT_ERR_USAGE);
    const char *keys[] = {"bad_json", "missing_field", "field_not_string", "line_too_long",
                          "bad_record", "length_overrun", "bad_page", "null_value"};
    assert_int_equal(sizeof keys / sizeof keys[0], LT_SKIP_N_REASONS);
    for (int r = 0; r < LT_SKIP_N_REASONS; r++) assert_string_equal(lt_skip_reason_key((lt_skip_reason)r), keys[r]);
}

static void test_detection(void **state) {
    (void)state;
    assert_int_equal(lt_format_detect("x", "WARC/1.0\r\n", 10), LT_FMT_WET);
    assert_int_equal(lt_format_detect("x.jsonl", "WARC/1.0\r\n", 10), LT_FMT_WET); /* content first */
    assert_int_equal(lt_format_detect("x", "<mediawiki", 10), LT_FMT_WIKIXML);
    assert_int_equal(lt_format_detect("x", "{\"a\":1}", 7), LT_FMT_JSONL);
    assert_int_equal(lt_format_detect("x", " \r\n\t{", 5), LT_FMT_JSONL);
    assert_int_equal(lt_format_detect("x", "\xEF\xBB\xBF{", 4), LT_FMT_JSONL);
    assert_int_equal(lt_format_detect("x", "PAR1\x15\x04", 6), LT_FMT_PARQUET);
    assert_int_equal(lt_format_detect("x.jsonl", "PAR1", 4), LT_FMT_PARQUET); /* content first */
    assert_int_equal(lt_format_detect("x", " PAR1", 5), LT_FMT_AUTO);        /* the magic is at byte 0 */
    assert_int_equal(lt_format_detect("d/train-00000-of-00002.parquet", "", 0), LT_FMT_PARQUET);
    assert_int_equal(lt_format_detect("x", "hello", 5), LT_FMT_AUTO);
    assert_int_equal(lt_format_detect("x", "", 0), LT_FMT_AUTO);
    assert_int_equal(lt_format_detect(NULL, NULL, 0), LT_FMT_AUTO);
    /* by name when the content says nothing */
    assert_int_equal(lt_format_detect("d/CC-1.warc.wet.gz", "junk", 4), LT_FMT_WET);
    assert_int_equal(lt_format_detect("a.wet", "", 0), LT_FMT_WET);
    assert_int_equal(lt_format_detect("dir.xml/enwiki.xml.bz2", "", 0), LT_FMT_WIKIXML);
    assert_int_equal(lt_format_detect("x.jsonl.zst", "", 0), LT_FMT_JSONL);
    assert_int_equal(lt_format_detect("x.json.gz", "", 0), LT_FMT_JSONL);
    assert_int_equal(lt_format_detect("x.jsonl/other.txt", "", 0), LT_FMT_AUTO);
    assert_int_equal(lt_format_detect("x.gz", "", 0), LT_FMT_AUTO);

    /* an empty .jsonl file: no documents */
    read_result *res = read_mem("", 0, "empty.jsonl", LT_FMT_AUTO, NULL, 0);
    expect_ok(res);
    assert_int_equal(res->format, LT_FMT_JSONL);
    assert_int_equal(res->n, 0);
    result_free(res);
    /* undecidable: an input error with a hint */
    res = read_mem("hello\n", 6, "notes.txt", LT_FMT_AUTO, NULL, 0);
    assert_int_equal(res->st, LT_ERR_INPUT);
    assert_string_equal(res->err.what, "cannot tell the format of this file");
    assert_string_equal(res->err.where, "notes.txt");
    assert_non_null(strstr(res->err.hint, "--format"));
    result_free(res);
    /* detection looks through the compression */
    bytes gz = {0};
    const char *line = "{\"text\": \"zipped\"}\n";
    gzip_member(&gz, line, strlen(line));
    res = read_mem(gz.p, gz.n, "noext", LT_FMT_AUTO, NULL, 0);
    expect_ok(res);
    assert_int_equal(res->format, LT_FMT_JSONL);
    assert_int_equal(res->n, 1);
    assert_string_equal(res->text[0], "zipped");
    result_free(res);
    /* --format forces: the same bytes read as WET are a bad record */
    res = read_mem(gz.p, gz.n, "noext", LT_FMT_WET, NULL, 0);
    expect_ok(res);
    assert_int_equal(res->format, LT_FMT_WET);
    assert_int_equal(res->n, 0);
    assert_int_equal(res->stats.skipped[LT_SKIP_BAD_RECORD], 1);
    result_free(res);
    /* and undecidable content is read when the format is given */
    res = read_mem("hello\n", 6, "notes.txt", LT_FMT_JSONL, NULL, 0);
    expect_ok(res);
    assert_int_equal(res->stats.skipped[LT_SKIP_BAD_JSON], 1);
    result_free(res);
    bytes_free(&gz);
}

/* ================================================================ the shared corpus */

static char *shared_corpus(void) {
    char buf[4096];
    const char *env = getenv("LONGTAIL_SHARED");
    if (env != NULL && env[0] != '\0') {
        snprintf(buf, sizeof buf, "%s/corpus", env);
        return access(buf, R_OK) == 0 ? strdup(buf) : NULL;
    }
    const char *roots[] = {getenv("top_srcdir"), getenv("srcdir"), ".", "..", "../.."};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        if (roots[i] == NULL) continue;
        snprintf(buf, sizeof buf, "%s/../shared/corpus", roots[i]);
        if (access(buf, R_OK) == 0) return strdup(buf);
    }
    return NULL;
}

static void test_shared_corpus(void **state) {
    (void)state;
    char *dir = shared_corpus();
    if (dir == NULL) {
        printf("# skip: no ../shared/corpus from $top_srcdir (set LONGTAIL_SHARED)\n");
        skip();
    }
    char p[4200];
    struct {
        const char *file;
        lt_format format;
        const char *field;
        lt_status st;
        uint64_t docs, filtered;
        int reason; /* the one skip reason expected, or -1 */
        uint64_t skipped;
        const char *what; /* for an error */
    } cases[] = {
        {"cc/CC-MAIN-20240520-00000.warc.wet.gz", LT_FMT_WET, NULL, LT_OK, 47, 1, -1, 0, NULL},
        {"cc/CC-MAIN-20240520-00001.warc.wet.gz", LT_FMT_WET, NULL, LT_OK, 46, 1, -1, 0, NULL},
        {"cc/CC-MAIN-20240520-00002.warc.wet.gz", LT_FMT_WET, NULL, LT_OK, 46, 1, -1, 0, NULL},
        {"jsonl/mixed-0.jsonl.gz", LT_FMT_JSONL, NULL, LT_OK, 0, 0, -1, 0, NULL},
        {"github/github-code-00000.jsonl.zst", LT_FMT_JSONL, "code", LT_OK, 0, 0, -1, 0, NULL},
        {"bad/empty.jsonl", LT_FMT_JSONL, NULL, LT_OK, 0, 0, -1, 0, NULL},
        {"bad/mixed-lines.jsonl", LT_FMT_JSONL, NULL, LT_OK, 3, 1, -1, 0, NULL},
        {"bad/wrong-length.warc.wet.gz", LT_FMT_WET, NULL, LT_OK, 0, 0, LT_SKIP_LENGTH_OVERRUN, 1, NULL},
        {"bad/not-gzip.warc.wet.gz", LT_FMT_WET, NULL, LT_OK, 0, 0, LT_SKIP_BAD_RECORD, 1, NULL},
        {"bad/truncated.warc.wet.gz", LT_FMT_WET, NULL, LT_ERR_INPUT, 18, 1, -1, 0, "truncated gzip stream"},
        {"bad/corrupt.jsonl.zst", LT_FMT_JSONL, NULL, LT_ERR_INPUT, 0, 0, -1, 0, "corrupt zstd data"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, cases[i].file);
        if (access(p, R_OK) != 0) {
            printf("# skip: %s missing\n", p);
            continue;
        }
        /* the harness keeps up to MAX_DOCS documents: count the big files here */
        lt_reader_opts o = {.format = LT_FMT_AUTO, .field = cases[i].field};
        lt_reader *r;
        lt_error err;
        assert_int_equal(lt_reader_open(&r, p, &o, &err), LT_OK);
        assert_int_equal(lt_reader_format(r), cases[i].format);
        lt_doc d;
        bool eof;
        lt_status st;
        uint64_t docs = 0;
        while ((st = lt_reader_next(r, &d, &eof, &err)) == LT_OK && !eof) {
            docs++;
            assert_true(d.len > 0 || cases[i].format == LT_FMT_JSONL);
        }
        const lt_reader_stats *s = lt_reader_get_stats(r);
        if (st != cases[i].st) fail_msg("%s: status %d: %s (%s)", cases[i].file, (int)st, err.what, err.where);
        if (cases[i].what != NULL) {
            assert_non_null(strstr(err.what, cases[i].what));
            assert_non_null(strstr(err.where, ": compressed offset "));
        }
        if (cases[i].docs > 0) assert_int_equal(docs, cases[i].docs);
        else if (strstr(cases[i].file, "bad/") == NULL) assert_true(docs > 0 && docs == s->records);
        assert_int_equal(s->docs, docs);
        assert_int_equal(s->filtered, cases[i].filtered);
        uint64_t skipped = 0;
        for (int k = 0; k < LT_SKIP_N_REASONS; k++) skipped += s->skipped[k];
        if (cases[i].reason >= 0) {
            assert_int_equal(s->skipped[cases[i].reason], cases[i].skipped);
            assert_int_equal(skipped, cases[i].skipped);
        } else if (strcmp(cases[i].file, "bad/mixed-lines.jsonl") == 0) {
            assert_int_equal(skipped, 4);
        } else {
            assert_int_equal(skipped, 0);
        }
        lt_reader_close(r);
    }
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wet_huge_record_bounded), /* first: it measures the peak RSS */
        cmocka_unit_test(test_codec_names),
        cmocka_unit_test(test_plain_round_trip),
        cmocka_unit_test(test_empty_file_is_empty_stream),
        cmocka_unit_test(test_gzip_multi_member),
        cmocka_unit_test(test_zstd_multi_frame),
        cmocka_unit_test(test_bzip2_multistream),
        cmocka_unit_test(test_gzip_damage),
        cmocka_unit_test(test_zstd_damage),
        cmocka_unit_test(test_bzip2_damage),
        cmocka_unit_test(test_unreadable_files),
        cmocka_unit_test(test_peek),
        cmocka_unit_test(test_wet_framing_by_length),
        cmocka_unit_test(test_wet_lf_headers_and_variants),
        cmocka_unit_test(test_wet_length_overrun),
        cmocka_unit_test(test_wet_bad_records_resync),
        cmocka_unit_test(test_wet_invalid_utf8_repaired),
        cmocka_unit_test(test_jsonl_escapes_and_field),
        cmocka_unit_test(test_jsonl_skip_reasons),
        cmocka_unit_test(test_jsonl_line_too_long),
        cmocka_unit_test(test_truncation_at_utf8_boundary),
        cmocka_unit_test(test_jsonl_compressed_and_damaged),
        cmocka_unit_test(test_format_names_and_keys),
        cmocka_unit_test(test_detection),
        cmocka_unit_test(test_shared_corpus),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
