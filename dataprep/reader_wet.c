/*
 * dataprep/reader_wet.c — Common Crawl WET files (WARC/1.0 and /1.1 records), the `wet`
 * backend of reader.h.
 *
 * A record (ISO 28500 / WARC 1.1 section 4):
 *     WARC/1.0 CRLF
 *     Name: value CRLF        ... (header fields; bare LF is accepted too)
 *     CRLF
 *     <exactly Content-Length bytes of block>
 *     CRLF CRLF
 * Records are framed by Content-Length only: a block may contain anything, a line
 * "WARC/1.0" included. Searching for the next "WARC/1." at a line start happens only to
 * get back in step after a bad record (no version line, a malformed or oversized header, a
 * Content-Length that is not a number, a block not followed by CRLF CRLF and a new record);
 * the bytes skipped are reported as that bad record.
 *
 * Only `conversion` records are documents (id = WARC-Record-ID, name = WARC-Target-URI);
 * warcinfo, metadata, ... are counted as filtered. The block is streamed: at most
 * max_doc_bytes + SLACK bytes of it are kept (SLACK lets reader.c see the whole code point
 * at the cap), the rest is read and dropped, and orig_bytes says how long it was.
 *
 * A Content-Length that runs past the end of the stream is a length_overrun skip (the
 * file ends there). A compressed file that is cut short is reported by the source as
 * damage (LT_ERR_INPUT), which ends the file.
 */
#include "dataprep/reader.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define WET_CHUNK (64u * 1024u)         /* read size from the source */
#define WET_HEADER_MAX (64u * 1024u)    /* a header block longer than this is a bad record */
#define WET_BUF (WET_CHUNK + WET_HEADER_MAX + 1)
#define WET_SLACK 4u                    /* one code point past the cap, for reader.c */
#define WET_FIELD_MAX 8192u             /* longest kept id / URI */

typedef struct wet_state {
    lt_reader_core *core;
    char *buf;           /* decompressed input: buf[pos..len) not yet consumed */
    size_t pos, len;
    uint64_t buf_off;    /* decompressed offset of buf[0] */
    bool eof;            /* the source has nothing more */
    char *block;         /* the kept part of the current document's block */
    size_t block_cap;
    uint64_t record;     /* records seen (1-based number of the current one) */
    char id[WET_FIELD_MAX];
    char uri[WET_FIELD_MAX];
} wet_state;

/* ------------------------------------------------------------------ input */

static uint64_t offset_now(const wet_state *w) { return w->buf_off + w->pos; }

/* Try to have at least `want` (<= WET_BUF) bytes in buf[pos..len); fewer only at EOF. */
static lt_status fill(wet_state *w, size_t want, lt_error *err) {
    while (w->len - w->pos < want && !w->eof) {
        if (w->pos > 1) { /* compact, keeping the byte before pos (is pos at a line start?) */
            size_t drop = w->pos - 1;
            memmove(w->buf, w->buf + drop, w->len - drop);
            w->len -= drop;
            w->buf_off += drop;
            w->pos = 1;
        }
        size_t got;
        size_t room = WET_BUF - w->len;
        if (room > WET_CHUNK) room = WET_CHUNK;
        lt_status st = lt_src_read(w->core->src, w->buf + w->len, room, &got, err);
        if (st != LT_OK) return st;
        if (got == 0) w->eof = true;
        w->len += got;
    }
    return LT_OK;
}

static size_t avail(const wet_state *w) { return w->len - w->pos; }

/* ------------------------------------------------------------------ skips and resync */

static void where_of(const wet_state *w, uint64_t off, char *buf, size_t size) {
    snprintf(buf, size, "%s: record %" PRIu64 " at offset %" PRIu64, w->core->path, w->record, off);
}

/* Drop bytes up to the next line that starts with "WARC/1." (or EOF); returns how many. */
static lt_status resync(wet_state *w, uint64_t *skipped, lt_error *err) {
    static const char mark[] = "\nWARC/1.";
    const size_t m = sizeof mark - 1;
    *skipped = 0;
    if (offset_now(w) > 0 && w->buf[w->pos - 1] == '\n') { /* a line start: may be the mark itself */
        lt_status st = fill(w, m - 1, err);
        if (st != LT_OK) return st;
        if (avail(w) >= m - 1 && memcmp(w->buf + w->pos, mark + 1, m - 1) == 0) return LT_OK;
    }
    for (;;) {
        lt_status st = fill(w, m, err);
        if (st != LT_OK) return st;
        if (avail(w) < m) { /* end of the stream */
            *skipped += avail(w);
            w->pos = w->len;
            return LT_OK;
        }
        const char *p = memmem(w->buf + w->pos, avail(w), mark, m);
        if (p != NULL) {
            size_t n = (size_t)(p - (w->buf + w->pos)) + 1; /* keep the line start */
            *skipped += n;
            w->pos += n;
            return LT_OK;
        }
        size_t n = avail(w) - (m - 1); /* the tail might begin a mark */
        *skipped += n;
        w->pos += n;
    }
}

/* A bad record from `start`: get back in step, then report it with the bytes skipped. */
static lt_status bad_record(wet_state *w, uint64_t start, const char *why, lt_error *err) {
    uint64_t skipped;
    if (offset_now(w) == start) w->pos++; /* progress: never find the same record again */
    lt_status st = resync(w, &skipped, err);
    if (st != LT_OK) return st;
    char where[LT_ERROR_WHERE_MAX];
    where_of(w, start, where, sizeof where);
    lt_reader_skip(w->core, where, LT_SKIP_BAD_RECORD, "%s; skipped %" PRIu64 " bytes to the next WARC record", why,
                   offset_now(w) - start);
    (void)skipped;
    return LT_OK;
}

/* ------------------------------------------------------------------ header */

typedef struct wet_header {
    bool has_length, length_ok, has_type, conversion;
    uint64_t length;
    char length_text[32];
} wet_header;

static void copy_field(char *dst, const char *v, size_t n) {
    if (n >= WET_FIELD_MAX) n = WET_FIELD_MAX - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

static void parse_length(wet_header *h, const char *v, size_t n) {
    h->has_length = true;
    h->length_ok = n > 0 && n <= 18;
    uint64_t x = 0;
    for (size_t i = 0; i < n && h->length_ok; i++) {
        if (v[i] < '0' || v[i] > '9') h->length_ok = false;
        else x = x * 10 + (uint64_t)(v[i] - '0');
    }
    h->length = x;
    size_t k = n < sizeof h->length_text - 1 ? n : sizeof h->length_text - 1;
    memcpy(h->length_text, v, k);
    h->length_text[k] = '\0';
}

/* One header line (without its line end): "Name: value". False if malformed. */
static bool header_field(wet_state *w, wet_header *h, const char *line, size_t n) {
    const char *colon = memchr(line, ':', n);
    if (colon == NULL || colon == line) return false;
    size_t nlen = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vlen = n - nlen - 1;
    while (vlen > 0 && (*v == ' ' || *v == '\t')) v++, vlen--;
    while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t')) vlen--;
    /* field names are case-insensitive (WARC 1.1 section 4) */
    if (nlen == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
        if (!h->has_length) parse_length(h, v, vlen);
    } else if (nlen == 9 && strncasecmp(line, "WARC-Type", 9) == 0) {
        if (!h->has_type) h->conversion = vlen == 10 && memcmp(v, "conversion", 10) == 0;
        h->has_type = true;
    } else if (nlen == 14 && strncasecmp(line, "WARC-Record-ID", 14) == 0) {
        copy_field(w->id, v, vlen);
    } else if (nlen == 15 && strncasecmp(line, "WARC-Target-URI", 15) == 0) {
        copy_field(w->uri, v, vlen);
    }
    return true;
}

/* Next line of the header, without its LF or CRLF: *line points into buf (valid until the
 * next fill). *n == SIZE_MAX: no line end within the header limit; *line == NULL: EOF. */
static lt_status next_line(wet_state *w, size_t used, const char **line, size_t *n, lt_error *err) {
    size_t limit = WET_HEADER_MAX - used;
    size_t scanned = 0;
    *line = NULL;
    for (;;) {
        const char *nl = memchr(w->buf + w->pos + scanned, '\n', avail(w) - scanned);
        if (nl != NULL) {
            size_t k = (size_t)(nl - (w->buf + w->pos));
            if (k + 1 > limit) break;
            *line = w->buf + w->pos;
            *n = k > 0 && (*line)[k - 1] == '\r' ? k - 1 : k;
            w->pos += k + 1;
            return LT_OK;
        }
        scanned = avail(w);
        if (scanned >= limit) break;
        if (w->eof) {
            if (scanned == 0) return LT_OK;
            *line = w->buf + w->pos; /* a last line without its end */
            *n = scanned;
            w->pos = w->len;
            return LT_OK;
        }
        lt_status st = fill(w, scanned + 1, err);
        if (st != LT_OK) return st;
    }
    *line = w->buf + w->pos;
    *n = SIZE_MAX;
    return LT_OK;
}

/* ------------------------------------------------------------------ block */

/* Read `length` bytes of block: keep up to `keep` in w->block, drop the rest. *short_by > 0
 * when the stream ended first. */
static lt_status read_block(wet_state *w, uint64_t length, size_t keep, size_t *kept, uint64_t *short_by,
                            lt_error *err) {
    if (keep > length) keep = (size_t)length;
    if (keep > w->block_cap) {
        w->block = lt_realloc_check(w->block, keep);
        w->block_cap = keep;
    }
    uint64_t left = length;
    *kept = 0;
    while (left > 0) {
        if (avail(w) == 0) {
            lt_status st = fill(w, 1, err);
            if (st != LT_OK) return st;
            if (avail(w) == 0) break;
        }
        size_t n = avail(w);
        if (n > left) n = (size_t)left;
        if (*kept < keep) {
            size_t c = keep - *kept < n ? keep - *kept : n;
            memcpy(w->block + *kept, w->buf + w->pos, c);
            *kept += c;
        }
        w->pos += n;
        left -= n;
    }
    *short_by = left;
    return LT_OK;
}

/* After the block: CRLF CRLF (LF LF accepted), or fewer line ends before EOF or the next
 * record's "WARC/". False when something else follows: the Content-Length was wrong.
 * (Junk after a correct CRLF CRLF is the next, bad, record; not this one's fault.) */
static lt_status block_end_ok(wet_state *w, bool *ok, lt_error *err) {
    lt_status st = fill(w, 9, err);
    if (st != LT_OK) return st;
    int ends = 0;
    for (; ends < 2; ends++) {
        if (avail(w) >= 2 && w->buf[w->pos] == '\r' && w->buf[w->pos + 1] == '\n') w->pos += 2;
        else if (avail(w) >= 1 && w->buf[w->pos] == '\n') w->pos += 1;
        else break;
    }
    *ok = ends == 2 || avail(w) == 0 || (avail(w) >= 5 && memcmp(w->buf + w->pos, "WARC/", 5) == 0);
    return LT_OK;
}

/* ------------------------------------------------------------------ records */

static lt_status wet_next(void *state, lt_doc *doc, bool *eof, lt_error *err) {
    wet_state *w = state;
    const size_t cap = w->core->opts->max_doc_bytes;
    const size_t keep = cap <= SIZE_MAX - WET_SLACK ? cap + WET_SLACK : cap;
    lt_status st;
    char where[LT_ERROR_WHERE_MAX];
    *eof = false;
    for (;;) {
        /* blank lines between records (tolerated beyond the CRLF CRLF) */
        for (;;) {
            if ((st = fill(w, 1, err)) != LT_OK) return st;
            if (avail(w) == 0) {
                *eof = true;
                return LT_OK;
            }
            char c = w->buf[w->pos];
            if (c != '\r' && c != '\n') break;
            w->pos++;
        }
        const uint64_t start = offset_now(w);
        w->record++;
        w->core->stats->records++;
        w->id[0] = w->uri[0] = '\0';

        const char *line;
        size_t n, used = 0;
        if ((st = next_line(w, 0, &line, &n, err)) != LT_OK) return st;
        if (line == NULL || n == SIZE_MAX || !((n == 8 && (memcmp(line, "WARC/1.0", 8) == 0 ||
                                                            memcmp(line, "WARC/1.1", 8) == 0)))) {
            if ((st = bad_record(w, start, "expected a WARC/1.0 or WARC/1.1 version line", err)) != LT_OK) return st;
            continue;
        }
        used = n + 2;
        wet_header h;
        memset(&h, 0, sizeof h);
        const char *bad = NULL;
        for (;;) {
            if ((st = next_line(w, used, &line, &n, err)) != LT_OK) return st;
            if (line == NULL) {
                bad = "the file ends inside the WARC header";
                break;
            }
            if (n == SIZE_MAX) {
                bad = "WARC header longer than 64 KiB or without its blank line";
                break;
            }
            used += n + 2;
            if (n == 0) break; /* end of the header */
            if (!header_field(w, &h, line, n)) {
                bad = "malformed WARC header line (expected 'Name: value')";
                break;
            }
        }
        if (bad == NULL && !h.has_length) bad = "WARC header without Content-Length";
        if (bad == NULL && !h.length_ok) {
            char why[128];
            snprintf(why, sizeof why, "Content-Length '%s' is not a number", h.length_text);
            if ((st = bad_record(w, start, why, err)) != LT_OK) return st;
            continue;
        }
        if (bad != NULL) {
            if ((st = bad_record(w, start, bad, err)) != LT_OK) return st;
            continue;
        }

        const bool is_doc = h.has_type && h.conversion;
        size_t kept;
        uint64_t short_by;
        if ((st = read_block(w, h.length, is_doc ? keep : 0, &kept, &short_by, err)) != LT_OK) return st;
        if (short_by > 0) {
            where_of(w, start, where, sizeof where);
            lt_reader_skip(w->core, where, LT_SKIP_LENGTH_OVERRUN,
                           "Content-Length %" PRIu64 " runs past the end of the file (%" PRIu64 " bytes there)",
                           h.length, h.length - short_by);
            *eof = true;
            return LT_OK;
        }
        bool ok;
        if ((st = block_end_ok(w, &ok, err)) != LT_OK) return st;
        if (!ok) {
            char why[160];
            snprintf(why, sizeof why,
                     "the %" PRIu64 " bytes of Content-Length are not followed by CRLF CRLF and a new record "
                     "(wrong Content-Length?)",
                     h.length);
            if ((st = bad_record(w, start, why, err)) != LT_OK) return st;
            continue;
        }
        if (!is_doc) {
            w->core->stats->filtered++;
            continue;
        }
        if (w->id[0] == '\0') snprintf(w->id, sizeof w->id, "record=%" PRIu64, w->record);
        doc->text = w->block;
        doc->len = kept;
        doc->id = w->id;
        doc->name = w->uri;
        doc->record = w->record;
        doc->offset = start;
        doc->orig_bytes = h.length;
        return LT_OK;
    }
}

static lt_status wet_open(void **state, lt_reader_core *core, lt_error *err) {
    (void)err;
    wet_state *w = lt_calloc_check(1, sizeof *w);
    w->core = core;
    w->buf = lt_malloc_check(WET_BUF);
    *state = w;
    return LT_OK;
}

static void wet_close(void *state) {
    wet_state *w = state;
    if (w == NULL) return;
    free(w->buf);
    free(w->block);
    free(w);
}

const lt_reader_backend lt_reader_backend_wet = {"wet", false, wet_open, wet_next, wet_close};
