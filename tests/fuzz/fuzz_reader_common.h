/*
 * tests/fuzz/fuzz_reader_common.h — what the corpus-reader fuzz targets share (fuzz_wet.c,
 * fuzz_jsonl_reader.c): the failure report, compressing a payload the way real files are
 * (gzip members, zstd frames, bzip2 streams), and the format the reader will detect.
 * Include once per target after defining FUZZ_TARGET ("fuzz_wet") and NAME (the file
 * name given to the reader).
 */
#ifndef LT_FUZZ_READER_COMMON_H
#define LT_FUZZ_READER_COMMON_H

#include <bzlib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "dataprep/reader.h" /* lt_src_*, lt_format_detect */

#define LT_FUZZ_UNUSED __attribute__((unused))

static LT_FUZZ_UNUSED void fail(const char *what, const lt_error *err) {
    fprintf(stderr, "%s: property violated: %s\n", FUZZ_TARGET, what);
    if (err != NULL)
        fprintf(stderr, "  status=%d what='%s' where='%s'\n", (int)err->status, err->what, err->where);
    abort();
}

static LT_FUZZ_UNUSED void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (p == NULL) fail("out of memory in the harness", NULL);
    return p;
}

/* ------------------------------------------------------------------ compressing the payload */

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static LT_FUZZ_UNUSED void put(buf *b, const void *s, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (b->p == NULL) fail("out of memory in the harness", NULL);
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
}

static LT_FUZZ_UNUSED void gzip_to(buf *b, const uint8_t *s, size_t n) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) fail("deflateInit2", NULL);
    size_t bound = deflateBound(&z, n) + 64;
    unsigned char *tmp = xmalloc(bound);
    z.next_in = (Bytef *)(uintptr_t)s;
    z.avail_in = (uInt)n;
    z.next_out = tmp;
    z.avail_out = (uInt)bound;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) fail("deflate", NULL);
    put(b, tmp, bound - z.avail_out);
    deflateEnd(&z);
    free(tmp);
}

static LT_FUZZ_UNUSED void zstd_to(buf *b, const uint8_t *s, size_t n) {
    size_t bound = ZSTD_compressBound(n);
    unsigned char *tmp = xmalloc(bound);
    size_t k = ZSTD_compress(tmp, bound, s, n, 1);
    if (ZSTD_isError(k)) fail("ZSTD_compress", NULL);
    put(b, tmp, k);
    free(tmp);
}

static LT_FUZZ_UNUSED void bzip2_to(buf *b, const uint8_t *s, size_t n) {
    unsigned int cap = (unsigned int)(n + n / 100 + 700);
    char *tmp = xmalloc(cap);
    if (BZ2_bzBuffToBuffCompress(tmp, &cap, (char *)(uintptr_t)s, (unsigned int)n, 1, 0, 0) != BZ_OK)
        fail("BZ2_bzBuffToBuffCompress", NULL);
    put(b, tmp, cap);
    free(tmp);
}

/* With format AUTO, what the reader will detect (the same peek and rule as reader.c), so
 * that inputs of other formats are left to their own targets before their backend runs. */
static LT_FUZZ_UNUSED lt_format detected_format(const uint8_t *in, size_t n) {
    lt_src *s;
    lt_error err;
    if (lt_src_open_mem(&s, in, n, NAME, &err) != LT_OK) fail("lt_src_open_mem", &err);
    char head[4096];
    size_t got = 0;
    if (lt_src_peek(s, head, sizeof head, &got, &err) != LT_OK) fail("lt_src_peek", &err);
    lt_src_close(s);
    return lt_format_detect(NAME, head, got);
}

#endif /* LT_FUZZ_READER_COMMON_H */
