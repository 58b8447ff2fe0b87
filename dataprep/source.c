/*
 * dataprep/source.c — a corpus file as a stream of decompressed bytes (see source.h).
 *
 * Layout: one fixed input window (256 KiB read(2) chunks from a file, or the caller's
 * whole buffer for lt_src_open_mem), one codec state (zlib / zstd / libbz2), and a small
 * lookahead buffer (up to 64 KiB) that lt_src_peek fills and lt_src_read drains first.
 * Memory is therefore bounded whatever the file size.
 *
 * Invariants:
 *   - raw offset = raw_base (file offset of in[0]) + in_pos: bytes handed to the codec.
 *   - an error met while filling the lookahead is kept in `pending` and reported by the
 *     lt_src_read that finds the lookahead empty, so every byte decoded before the damage
 *     reaches the caller first (source.h); after that the stream stays at end-of-file.
 *   - multi-member gzip, multi-frame zstd and multistream bzip2 are read to the end, as
 *     zcat / zstdcat / bzcat do; bytes after the last member that do not start another
 *     member are damage (zcat warns about them; a corpus reader must not go quiet).
 */
#include "dataprep/source.h"

#include <bzlib.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#define SRC_IN_BUF (256u * 1024u)   /* read(2) chunk for files */
#define SRC_PEEK_MAX (64u * 1024u)  /* lt_src_peek cap (source.h) */

struct lt_src {
    char *name;
    int fd;                       /* -1 for a memory source */
    const unsigned char *mem;     /* memory source: the whole input */
    size_t mem_len;

    unsigned char *buf;           /* file source: the input window */
    const unsigned char *in;      /* current input window (buf or mem) */
    size_t in_len, in_pos;
    uint64_t raw_base;            /* file offset of in[0] */
    uint64_t raw_size;
    bool in_eof;                  /* nothing more to read after in[in_len) */

    lt_codec codec;
    bool codec_live;              /* the codec state below is initialised */
    bool unit_active;             /* inside a gzip member / zstd frame / bzip2 stream */
    bool unit_next;               /* a member/frame/stream ended: check the next one's magic */
    z_stream z;
    ZSTD_DCtx *zd;
    bz_stream bz;

    unsigned char *peek;          /* lookahead: bytes peek[peek_pos..peek_len) */
    size_t peek_pos, peek_len;

    uint64_t out_off;             /* decompressed bytes returned by lt_src_read */
    bool done;                    /* the decoder is at end (or failed) */
    bool has_pending;             /* an error to report once the lookahead is drained */
    lt_error pending;
};

const char *lt_codec_name(lt_codec c) {
    switch (c) {
    case LT_CODEC_NONE: return "none";
    case LT_CODEC_GZIP: return "gzip";
    case LT_CODEC_ZSTD: return "zstd";
    case LT_CODEC_BZIP2: return "bzip2";
    }
    return "unknown";
}

lt_codec lt_src_codec(const lt_src *s) { return s->codec; }
uint64_t lt_src_raw_offset(const lt_src *s) { return s->raw_base + s->in_pos; }
uint64_t lt_src_raw_size(const lt_src *s) { return s->raw_size; }
uint64_t lt_src_offset(const lt_src *s) { return s->out_off; }
const char *lt_src_name(const lt_src *s) { return s->name; }

/* ------------------------------------------------------------------ input window */

/* Make new input available when the window is used up. LT_OK with in_pos < in_len, or
 * with in_eof set when the file has nothing more. */
static lt_status fill_input(lt_src *s, lt_error *err) {
    if (s->in_pos < s->in_len || s->in_eof) return LT_OK;
    if (s->fd < 0) { /* memory: the whole buffer was the only window */
        s->in_eof = true;
        return LT_OK;
    }
    s->raw_base += s->in_len;
    s->in_len = s->in_pos = 0;
    while (s->in_len < SRC_IN_BUF) {
        ssize_t n = read(s->fd, s->buf + s->in_len, SRC_IN_BUF - s->in_len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return lt_fail(err, LT_ERR_IO, s->name, "read failed: %s", strerror(errno));
        }
        if (n == 0) {
            s->in_eof = true;
            break;
        }
        s->in_len += (size_t)n;
        break; /* one read per window: large enough, and no stall on slow devices */
    }
    return LT_OK;
}

/* ------------------------------------------------------------------ damage */

static lt_status damage(lt_src *s, lt_error *err, const char *what) {
    char where[LT_ERROR_WHERE_MAX];
    snprintf(where, sizeof where, "%s: compressed offset %" PRIu64, s->name, lt_src_raw_offset(s));
    return lt_fail(err, LT_ERR_INPUT, where, "%s", what);
}

/* ------------------------------------------------------------------ codecs */

static lt_status codec_init(lt_src *s, lt_error *err) {
    switch (s->codec) {
    case LT_CODEC_NONE: break;
    case LT_CODEC_GZIP:
        memset(&s->z, 0, sizeof s->z);
        if (inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK)
            return lt_fail(err, LT_ERR_NOMEM, s->name, "cannot initialise zlib");
        break;
    case LT_CODEC_ZSTD:
        s->zd = ZSTD_createDCtx();
        if (s->zd == NULL) return lt_fail(err, LT_ERR_NOMEM, s->name, "cannot initialise zstd");
        break;
    case LT_CODEC_BZIP2:
        memset(&s->bz, 0, sizeof s->bz);
        if (BZ2_bzDecompressInit(&s->bz, 0, 0) != BZ_OK)
            return lt_fail(err, LT_ERR_NOMEM, s->name, "cannot initialise libbz2");
        break;
    }
    s->codec_live = true;
    return LT_OK;
}

static void codec_end(lt_src *s) {
    if (!s->codec_live) return;
    switch (s->codec) {
    case LT_CODEC_NONE: break;
    case LT_CODEC_GZIP: inflateEnd(&s->z); break;
    case LT_CODEC_ZSTD: ZSTD_freeDCtx(s->zd); s->zd = NULL; break;
    case LT_CODEC_BZIP2: BZ2_bzDecompressEnd(&s->bz); break;
    }
    s->codec_live = false;
}

static lt_codec sniff(const unsigned char *b, size_t n);

/* After a member/frame/stream, more input must start another one (as zcat, zstdcat and
 * bzcat read on); anything else is trailing garbage, named as such. Only the bytes in the
 * window are looked at: a magic split by the window end is left to the decoder. */
static lt_status check_next_unit(lt_src *s, lt_error *err) {
    if (!s->unit_next) return LT_OK;
    s->unit_next = false;
    size_t avail = s->in_len - s->in_pos;
    size_t need = s->codec == LT_CODEC_GZIP ? 2 : 4;
    if (avail < need || sniff(s->in + s->in_pos, avail) == s->codec) return LT_OK;
    char what[LT_ERROR_WHAT_MAX];
    snprintf(what, sizeof what, "trailing data after the last %s %s is not another one", lt_codec_name(s->codec),
             s->codec == LT_CODEC_GZIP ? "member" : s->codec == LT_CODEC_ZSTD ? "frame" : "stream");
    return damage(s, err, what);
}

/* Each decoder: decode into out[0..cap) (cap > 0); *got > 0, or *got == 0 with s->done at
 * the end of the stream; damage is an LT_ERR_INPUT (the caller marks the stream done). */

static lt_status decode_none(lt_src *s, unsigned char *out, size_t cap, size_t *got, lt_error *err) {
    lt_status st = fill_input(s, err);
    if (st != LT_OK) return st;
    size_t n = s->in_len - s->in_pos;
    if (n == 0) {
        s->done = true;
        return LT_OK;
    }
    if (n > cap) n = cap;
    memcpy(out, s->in + s->in_pos, n);
    s->in_pos += n;
    *got = n;
    return LT_OK;
}

static lt_status decode_gzip(lt_src *s, unsigned char *out, size_t cap, size_t *got, lt_error *err) {
    for (;;) {
        lt_status st = fill_input(s, err);
        if (st != LT_OK) return st;
        size_t avail = s->in_len - s->in_pos;
        if (!s->unit_active && avail == 0) {
            s->done = true;
            return LT_OK;
        }
        if ((st = check_next_unit(s, err)) != LT_OK) return st;
        s->unit_active = true;
        s->z.next_in = (Bytef *)(uintptr_t)(s->in + s->in_pos);
        s->z.avail_in = avail > UINT_MAX ? UINT_MAX : (uInt)avail;
        s->z.next_out = out;
        s->z.avail_out = cap > UINT_MAX ? UINT_MAX : (uInt)cap;
        uInt in0 = s->z.avail_in, out0 = s->z.avail_out;
        int ret = inflate(&s->z, Z_NO_FLUSH);
        s->in_pos += in0 - s->z.avail_in;
        size_t produced = out0 - s->z.avail_out;
        if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT) {
            char what[LT_ERROR_WHAT_MAX];
            snprintf(what, sizeof what, "corrupt gzip data: %s", s->z.msg ? s->z.msg : "invalid data");
            return damage(s, err, what);
        }
        if (ret == Z_MEM_ERROR) return lt_fail(err, LT_ERR_NOMEM, s->name, "zlib: out of memory");
        if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR)
            return lt_fail(err, LT_ERR_INTERNAL, s->name, "zlib inflate returned %d", ret);
        if (ret == Z_STREAM_END) { /* member complete; another may follow (as zcat reads) */
            s->unit_active = false;
            s->unit_next = true;
            if (inflateReset(&s->z) != Z_OK) return lt_fail(err, LT_ERR_INTERNAL, s->name, "inflateReset failed");
        }
        if (produced > 0) {
            *got = produced;
            return LT_OK;
        }
        if (avail == 0 && ret != Z_STREAM_END) /* inflate has nothing left and the file ended */
            return damage(s, err, "truncated gzip stream (file ends inside a member)");
    }
}

static lt_status decode_zstd(lt_src *s, unsigned char *out, size_t cap, size_t *got, lt_error *err) {
    for (;;) {
        lt_status st = fill_input(s, err);
        if (st != LT_OK) return st;
        size_t avail = s->in_len - s->in_pos;
        if (!s->unit_active && avail == 0) {
            s->done = true;
            return LT_OK;
        }
        if ((st = check_next_unit(s, err)) != LT_OK) return st;
        ZSTD_inBuffer in = {s->in + s->in_pos, avail, 0};
        ZSTD_outBuffer ob = {out, cap, 0};
        size_t ret = ZSTD_decompressStream(s->zd, &ob, &in);
        s->in_pos += in.pos;
        if (ZSTD_isError(ret)) {
            char what[LT_ERROR_WHAT_MAX];
            snprintf(what, sizeof what, "corrupt zstd data: %s", ZSTD_getErrorName(ret));
            return damage(s, err, what);
        }
        if (in.pos > 0 || ob.pos > 0) s->unit_active = ret != 0;
        if (ret == 0 && (in.pos > 0 || ob.pos > 0)) s->unit_next = true; /* frame complete */
        if (ob.pos > 0) {
            *got = ob.pos;
            return LT_OK;
        }
        if (in.pos == 0 && avail == 0) /* no progress and no more input (fill_input saw EOF) */
            return damage(s, err, "truncated zstd frame (file ends inside a frame)");
        if (in.pos == 0 && ret != 0 && avail > 0)
            return lt_fail(err, LT_ERR_INTERNAL, s->name, "zstd made no progress");
    }
}

static lt_status decode_bzip2(lt_src *s, unsigned char *out, size_t cap, size_t *got, lt_error *err) {
    for (;;) {
        lt_status st = fill_input(s, err);
        if (st != LT_OK) return st;
        size_t avail = s->in_len - s->in_pos;
        if (!s->unit_active && avail == 0) {
            s->done = true;
            return LT_OK;
        }
        if ((st = check_next_unit(s, err)) != LT_OK) return st;
        if (!s->codec_live && (st = codec_init(s, err)) != LT_OK) return st;
        s->unit_active = true;
        s->bz.next_in = (char *)(uintptr_t)(s->in + s->in_pos);
        s->bz.avail_in = avail > UINT_MAX ? UINT_MAX : (unsigned)avail;
        s->bz.next_out = (char *)out;
        s->bz.avail_out = cap > UINT_MAX ? UINT_MAX : (unsigned)cap;
        unsigned in0 = s->bz.avail_in, out0 = s->bz.avail_out;
        int ret = BZ2_bzDecompress(&s->bz);
        s->in_pos += in0 - s->bz.avail_in;
        size_t produced = out0 - s->bz.avail_out;
        if (ret == BZ_DATA_ERROR_MAGIC) return damage(s, err, "corrupt bzip2 data: bad stream header");
        if (ret == BZ_DATA_ERROR) return damage(s, err, "corrupt bzip2 data");
        if (ret == BZ_MEM_ERROR) return lt_fail(err, LT_ERR_NOMEM, s->name, "libbz2: out of memory");
        if (ret != BZ_OK && ret != BZ_STREAM_END)
            return lt_fail(err, LT_ERR_INTERNAL, s->name, "BZ2_bzDecompress returned %d", ret);
        if (ret == BZ_STREAM_END) { /* stream complete; multistream files go on (as bzcat) */
            s->unit_active = false;
            s->unit_next = true;
            codec_end(s); /* re-initialised lazily if more input follows */
        }
        if (produced > 0) {
            *got = produced;
            return LT_OK;
        }
        if (ret == BZ_OK && in0 == s->bz.avail_in) {
            if (avail == 0) /* no progress and no more input (fill_input saw EOF) */
                return damage(s, err, "truncated bzip2 stream (file ends inside a stream)");
            return lt_fail(err, LT_ERR_INTERNAL, s->name, "libbz2 made no progress");
        }
    }
}

/* Decode the next bytes into out[0..cap); *got == 0 only at the end. Errors mark the
 * stream done. */
static lt_status decode(lt_src *s, unsigned char *out, size_t cap, size_t *got, lt_error *err) {
    *got = 0;
    if (s->done || cap == 0) return LT_OK;
    lt_status st = LT_OK;
    switch (s->codec) {
    case LT_CODEC_NONE: st = decode_none(s, out, cap, got, err); break;
    case LT_CODEC_GZIP: st = decode_gzip(s, out, cap, got, err); break;
    case LT_CODEC_ZSTD: st = decode_zstd(s, out, cap, got, err); break;
    case LT_CODEC_BZIP2: st = decode_bzip2(s, out, cap, got, err); break;
    }
    if (st != LT_OK) {
        *got = 0;
        s->done = true;
    }
    return st;
}

/* ------------------------------------------------------------------ open / close */

static lt_codec sniff(const unsigned char *b, size_t n) {
    if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) return LT_CODEC_GZIP;
    if (n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd) return LT_CODEC_ZSTD;
    /* a zstd file may begin with a skippable frame (magic 0x184D2A50..5F, little-endian) */
    if (n >= 4 && (b[0] & 0xf0) == 0x50 && b[1] == 0x2a && b[2] == 0x4d && b[3] == 0x18) return LT_CODEC_ZSTD;
    if (n >= 4 && b[0] == 'B' && b[1] == 'Z' && b[2] == 'h' && b[3] >= '1' && b[3] <= '9') return LT_CODEC_BZIP2;
    return LT_CODEC_NONE;
}

static lt_src *src_new(const char *name) {
    lt_src *s = lt_calloc_check(1, sizeof *s);
    s->name = lt_strdup_check(name ? name : "");
    s->fd = -1;
    return s;
}

static lt_status src_start(lt_src *s, lt_error *err) {
    lt_status st = fill_input(s, err);
    if (st != LT_OK) return st;
    /* read(2) may return a short first chunk: the magic needs up to 4 bytes */
    if (s->fd >= 0) {
        while (s->in_len < 4 && !s->in_eof) {
            ssize_t n = read(s->fd, s->buf + s->in_len, SRC_IN_BUF - s->in_len);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return lt_fail(err, LT_ERR_IO, s->name, "read failed: %s", strerror(errno));
            if (n == 0) s->in_eof = true;
            s->in_len += (size_t)(n > 0 ? n : 0);
        }
    }
    s->codec = sniff(s->in, s->in_len);
    if (s->codec != LT_CODEC_NONE) return codec_init(s, err);
    return LT_OK;
}

lt_status lt_src_open(lt_src **out, const char *path, lt_error *err) {
    *out = NULL;
    if (path == NULL || strcmp(path, "-") == 0)
        return lt_fail(err, LT_ERR_USAGE, path ? path : "", "standard input is not accepted as a corpus file");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return lt_fail(err, LT_ERR_IO, path, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return lt_fail(err, LT_ERR_IO, path, "cannot stat: %s", strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        return lt_fail(err, LT_ERR_IO, path, "cannot read: %s", strerror(EISDIR));
    }
    lt_src *s = src_new(path);
    s->fd = fd;
    s->raw_size = S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0;
    s->buf = lt_malloc_check(SRC_IN_BUF);
    s->in = s->buf;
    lt_status st = src_start(s, err);
    if (st != LT_OK) {
        lt_src_close(s);
        return st;
    }
    *out = s;
    return LT_OK;
}

lt_status lt_src_open_mem(lt_src **out, const void *data, size_t len, const char *name, lt_error *err) {
    *out = NULL;
    if (data == NULL && len > 0) return lt_fail(err, LT_ERR_INTERNAL, name, "lt_src_open_mem: NULL data");
    lt_src *s = src_new(name);
    s->mem = data != NULL ? data : (const unsigned char *)"";
    s->mem_len = len;
    s->in = s->mem;
    s->in_len = len;
    s->in_eof = true;
    s->raw_size = len;
    lt_status st = src_start(s, err);
    if (st != LT_OK) {
        lt_src_close(s);
        return st;
    }
    *out = s;
    return LT_OK;
}

void lt_src_close(lt_src *s) {
    if (s == NULL) return;
    codec_end(s);
    if (s->fd >= 0) close(s->fd);
    free(s->buf);
    free(s->peek);
    free(s->name);
    free(s);
}

/* ------------------------------------------------------------------ read / peek */

lt_status lt_src_peek(lt_src *s, void *buf, size_t cap, size_t *got, lt_error *err) {
    *got = 0;
    if (cap > SRC_PEEK_MAX)
        return lt_fail(err, LT_ERR_INTERNAL, s->name, "lt_src_peek: %zu bytes asked, at most %u", cap,
                       SRC_PEEK_MAX);
    if (s->peek == NULL) s->peek = lt_malloc_check(SRC_PEEK_MAX);
    if (s->peek_pos > 0) { /* keep the lookahead at the front */
        memmove(s->peek, s->peek + s->peek_pos, s->peek_len - s->peek_pos);
        s->peek_len -= s->peek_pos;
        s->peek_pos = 0;
    }
    while (s->peek_len < cap && !s->done) {
        size_t n;
        lt_error e;
        lt_error_clear(&e);
        lt_status st = decode(s, s->peek + s->peek_len, cap - s->peek_len, &n, &e);
        if (st != LT_OK) { /* reported by lt_src_read once the lookahead is consumed */
            s->pending = e;
            s->pending.status = st;
            s->has_pending = true;
            break;
        }
        s->peek_len += n;
    }
    size_t n = s->peek_len < cap ? s->peek_len : cap;
    memcpy(buf, s->peek, n);
    *got = n;
    return LT_OK;
}

lt_status lt_src_read(lt_src *s, void *buf, size_t cap, size_t *got, lt_error *err) {
    *got = 0;
    if (cap == 0) return LT_OK;
    if (s->peek_pos < s->peek_len) {
        size_t n = s->peek_len - s->peek_pos;
        if (n > cap) n = cap;
        memcpy(buf, s->peek + s->peek_pos, n);
        s->peek_pos += n;
        s->out_off += n;
        *got = n;
        return LT_OK;
    }
    if (s->has_pending) {
        s->has_pending = false;
        if (err != NULL) *err = s->pending;
        return s->pending.status;
    }
    lt_status st = decode(s, buf, cap, got, err);
    s->out_off += *got;
    return st;
}
