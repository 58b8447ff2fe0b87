/*
 * dataprep/reader.c — the generic part of the reader interface (see reader.h): format names
 * and detection, opening the decompressing source, and what every document gets whatever
 * its format — UTF-8 repair, truncation at a code point boundary, the statistics.
 *
 * The backends (reader_wet.c, reader_jsonl.c, reader_wikixml.c, reader_parquet.c) only frame
 * records (and report the records they skip through reader_skip.c, below them and this file); they
 * hand back raw bytes, which may be invalid UTF-8 and longer than the cap (by at most a few
 * bytes when they streamed the rest away: then they set orig_bytes). Here the document is
 * repaired and cut in one pass so that the rule is the same for all formats:
 *
 *   the returned text = the longest prefix of sanitize(raw) that is at most max_doc_bytes
 *   long and ends at a code point boundary, where sanitize() replaces each maximal
 *   ill-formed subpart by U+FFFD (lib/json.h); replacements are counted in that prefix.
 *
 * The common case (valid UTF-8, under the cap) returns the backend's bytes without a copy.
 * A backend that already repaired while decoding (JSON strings: lib/json.h replaces
 * invalid UTF-8 and unpaired surrogate escapes) reports those in raw utf8_replacements;
 * they are added to the count (for a cut document: at most the U+FFFD in the kept part).
 */
#include "dataprep/reader.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h" /* lt_utf8_next, lt_utf8_valid */

#define READER_DEFAULT_MAX_DOC (64u * 1024u * 1024u)
#define READER_DETECT_BYTES 4096u

struct lt_reader {
    lt_reader_opts opts; /* a copy, with the defaults filled in */
    char *field;         /* owned copy of opts.field */
    char *path;
    lt_format format;
    lt_reader_core core;
    lt_reader_stats stats;
    const lt_reader_backend *backend;
    void *state;
    char *out; /* repaired text of the current document (slow path) */
    size_t out_cap;
    bool at_eof;
};

struct lt_line_decoder {
    lt_reader_opts opts; /* a copy, with the defaults filled in */
    char *field;
    lt_jsonl_reader jr;
    char id[32];
    char *out;
    size_t out_cap;
};

/* ------------------------------------------------------------------ names */

const char *lt_format_name(lt_format f) {
    switch (f) {
    case LT_FMT_AUTO: return "auto";
    case LT_FMT_WET: return "wet";
    case LT_FMT_JSONL: return "jsonl";
    case LT_FMT_WIKIXML: return "wikixml";
    case LT_FMT_PARQUET: return "parquet";
    }
    return "unknown";
}

lt_status lt_format_parse(const char *name, lt_format *out) {
    static const lt_format all[] = {LT_FMT_AUTO, LT_FMT_WET, LT_FMT_JSONL, LT_FMT_WIKIXML, LT_FMT_PARQUET};
    for (size_t i = 0; name != NULL && i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(name, lt_format_name(all[i])) == 0) {
            *out = all[i];
            return LT_OK;
        }
    }
    return LT_ERR_USAGE;
}

const char *lt_skip_reason_key(lt_skip_reason r) {
    switch (r) {
    case LT_SKIP_BAD_JSON: return "bad_json";
    case LT_SKIP_MISSING_FIELD: return "missing_field";
    case LT_SKIP_NOT_STRING: return "field_not_string";
    case LT_SKIP_LINE_TOO_LONG: return "line_too_long";
    case LT_SKIP_BAD_RECORD: return "bad_record";
    case LT_SKIP_LENGTH_OVERRUN: return "length_overrun";
    case LT_SKIP_BAD_PAGE: return "bad_page";
    case LT_SKIP_NULL_VALUE: return "null_value";
    case LT_SKIP_N_REASONS: break;
    }
    return "unknown";
}

/* ------------------------------------------------------------------ detection */

static bool ends_with(const char *s, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static lt_format detect_by_name(const char *path) {
    if (path == NULL) return LT_FMT_AUTO;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    /* the compression suffix says nothing about the format: drop it */
    static const char *const codec_ext[] = {".gz", ".zst", ".zstd", ".bz2"};
    for (size_t i = 0; i < sizeof codec_ext / sizeof codec_ext[0]; i++) {
        if (ends_with(base, n, codec_ext[i])) {
            n -= strlen(codec_ext[i]);
            break;
        }
    }
    if (ends_with(base, n, ".wet") || ends_with(base, n, ".warc")) return LT_FMT_WET;
    if (ends_with(base, n, ".xml")) return LT_FMT_WIKIXML;
    if (ends_with(base, n, ".jsonl") || ends_with(base, n, ".json")) return LT_FMT_JSONL;
    if (ends_with(base, n, ".parquet")) return LT_FMT_PARQUET;
    return LT_FMT_AUTO;
}

lt_format lt_format_detect(const char *path, const char *head, size_t head_len) {
    size_t i = 0;
    if (head != NULL) {
        /* Parquet's magic (parquet-format README.md "File Format"): never after a BOM */
        if (head_len >= 4 && memcmp(head, "PAR1", 4) == 0) return LT_FMT_PARQUET;
        if (head_len >= 3 && memcmp(head, "\xEF\xBB\xBF", 3) == 0) i = 3; /* UTF-8 BOM */
        while (i < head_len && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n')) i++;
        if (i < head_len) {
            if (head_len - i >= 5 && memcmp(head + i, "WARC/", 5) == 0) return LT_FMT_WET;
            if (head[i] == '<') return LT_FMT_WIKIXML;
            if (head[i] == '{') return LT_FMT_JSONL;
        }
    }
    return detect_by_name(path);
}

/* ------------------------------------------------------------------ open / close */

static const lt_reader_backend *backend_for(lt_format f) {
    switch (f) {
    case LT_FMT_WET: return &lt_reader_backend_wet;
    case LT_FMT_JSONL: return &lt_reader_backend_jsonl;
    case LT_FMT_WIKIXML: return &lt_reader_backend_wikixml;
    case LT_FMT_PARQUET: return &lt_reader_backend_parquet;
    case LT_FMT_AUTO: break;
    }
    return NULL;
}

/* Take ownership of `src` (closed on failure). mem: lt_reader_open_mem's buffer (or NULL). */
static lt_status reader_start(lt_reader **out, lt_src *src, const char *path, const void *mem, size_t mem_len,
                              const lt_reader_opts *opts, lt_error *err) {
    lt_reader *r = lt_calloc_check(1, sizeof *r);
    if (opts != NULL) r->opts = *opts;
    r->field = lt_strdup_check(r->opts.field != NULL ? r->opts.field : "text");
    r->opts.field = r->field;
    if (r->opts.max_doc_bytes == 0) r->opts.max_doc_bytes = READER_DEFAULT_MAX_DOC;
    r->path = lt_strdup_check(path);
    r->core.src = src;
    r->core.opts = &r->opts;
    r->core.stats = &r->stats;
    r->core.path = r->path;
    r->core.mem = mem;
    r->core.mem_len = mem_len;

    lt_status st = LT_OK;
    r->format = r->opts.format;
    if (r->format == LT_FMT_AUTO) {
        char head[READER_DETECT_BYTES];
        size_t got = 0;
        if ((st = lt_src_peek(src, head, sizeof head, &got, err)) != LT_OK) goto fail;
        r->format = lt_format_detect(path, head, got);
        if (r->format == LT_FMT_AUTO) {
            st = lt_fail(err, LT_ERR_INPUT, path, "cannot tell the format of this file");
            lt_error_hint(err, "it does not start like Parquet (PAR1), WET (WARC/), JSONL ({) or wiki XML (<) and "
                               "its name does not end in .parquet, .wet, .jsonl, .json or .xml; pass --format "
                               "parquet|wet|jsonl|wikixml");
            goto fail;
        }
    }
    if (r->format == LT_FMT_PARQUET && lt_src_codec(src) != LT_CODEC_NONE) {
        /* read by offset from the file itself: a compressed whole cannot be */
        st = lt_fail(err, LT_ERR_INPUT, path, "a Parquet file compressed as a whole (%s)",
                     lt_codec_name(lt_src_codec(src)));
        lt_error_hint(err, "decompress it first; Parquet compresses its pages itself (snappy, zstd, gzip)");
        goto fail;
    }
    r->backend = backend_for(r->format);
    if (r->backend == NULL) {
        st = lt_fail(err, LT_ERR_INTERNAL, path, "no reader for format %d", (int)r->format);
        goto fail;
    }
    if ((st = r->backend->open(&r->state, &r->core, err)) != LT_OK) {
        r->backend = NULL; /* nothing to close */
        goto fail;
    }
    *out = r;
    return LT_OK;
fail:
    lt_reader_close(r);
    return st;
}

lt_status lt_reader_open(lt_reader **out, const char *path, const lt_reader_opts *opts, lt_error *err) {
    *out = NULL;
    lt_src *src;
    lt_status st = lt_src_open(&src, path, err);
    if (st != LT_OK) return st;
    return reader_start(out, src, path, NULL, 0, opts, err);
}

lt_status lt_reader_open_mem(lt_reader **out, const void *data, size_t len, const char *name,
                             const lt_reader_opts *opts, lt_error *err) {
    *out = NULL;
    lt_src *src;
    lt_status st = lt_src_open_mem(&src, data, len, name, err);
    if (st != LT_OK) return st;
    return reader_start(out, src, name ? name : "", data != NULL ? data : "", len, opts, err);
}

void lt_reader_close(lt_reader *r) {
    if (r == NULL) return;
    if (r->backend != NULL) r->backend->close(r->state);
    lt_src_close(r->core.src);
    free(r->out);
    free(r->field);
    free(r->path);
    free(r);
}

lt_format lt_reader_format(const lt_reader *r) { return r->format; }
const lt_reader_stats *lt_reader_get_stats(const lt_reader *r) { return &r->stats; }
const lt_src *lt_reader_source(const lt_reader *r) { return r->core.src; }

/* ------------------------------------------------------------------ repair + truncation */

/* The rule of the file comment, in its slow form: sequence by sequence. Writes into r->out;
 * returns the output length, *used the raw bytes consumed, *repl the replacements. */
static size_t repair_slow(char **out, size_t *out_cap, const char *text, size_t len, size_t cap, size_t *used,
                          uint64_t *repl) {
    size_t need = len <= cap / 3 ? 3 * len : cap;
    if (need > *out_cap) {
        *out = lt_realloc_check(*out, need);
        *out_cap = need;
    }
    size_t i = 0, o = 0;
    *repl = 0;
    while (i < len) {
        int32_t cp;
        size_t n = lt_utf8_next(text + i, len - i, &cp);
        size_t w = cp == LT_UTF8_INVALID ? 3 : n;
        if (w > cap - o) break;
        if (cp == LT_UTF8_INVALID) {
            memcpy(*out + o, "\xEF\xBF\xBD", 3);
            (*repl)++;
        } else {
            memcpy(*out + o, text + i, n);
        }
        o += w;
        i += n;
    }
    *used = i;
    return o;
}

/* The fast form: valid UTF-8 up to a boundary at or before the cap, and the sequence there
 * (if any) valid and reaching past the cap. Returns false when the slow form is needed. */
static bool repair_fast(const char *text, size_t len, size_t cap, bool known_valid, size_t *keep) {
    size_t k = len;
    if (len > cap) {
        k = cap;
        for (int back = 0; back < 3 && k > 0 && ((unsigned char)text[k] & 0xC0) == 0x80; back++) k--;
        if (k < cap) {
            int32_t cp;
            size_t n = lt_utf8_next(text + k, len - k, &cp);
            if (cp == LT_UTF8_INVALID || k + n <= cap) return false;
        }
    }
    if (!known_valid && !lt_utf8_valid(text, k)) return false;
    *keep = k;
    return true;
}

/* What every document gets (the file comment's rule): repair, cut, count. */
static void finish_doc(char **out, size_t *out_cap, size_t cap, bool text_is_utf8, const lt_doc *raw,
                       lt_reader_stats *stats, lt_doc *doc) {
    const char *text = raw->text != NULL ? raw->text : "";
    size_t keep, used;
    uint64_t repl = 0;
    if (repair_fast(text, raw->len, cap, text_is_utf8, &keep)) {
        doc->text = text;
        doc->len = keep;
        used = keep;
    } else {
        doc->len = repair_slow(out, out_cap, text, raw->len, cap, &used, &repl);
        doc->text = *out;
    }
    doc->id = raw->id != NULL ? raw->id : "";
    doc->name = raw->name != NULL ? raw->name : "";
    doc->record = raw->record;
    doc->offset = raw->offset;
    doc->orig_bytes = raw->orig_bytes > raw->len ? raw->orig_bytes : raw->len;
    doc->truncated = used < raw->len || doc->orig_bytes > raw->len;
    if (raw->utf8_replacements > 0) {
        /* repairs the backend made while decoding (JSON strings): exact unless the text was
         * cut, then at most the U+FFFD left in the kept part */
        uint64_t before = raw->utf8_replacements;
        if (used < raw->len) {
            uint64_t left = 0;
            for (const char *p = doc->text, *e = doc->text + doc->len;
                 (p = memmem(p, (size_t)(e - p), "\xEF\xBF\xBD", 3)) != NULL; p += 3)
                left++;
            if (left < before) before = left;
        }
        repl += before;
    }
    doc->utf8_replacements = repl;

    stats->docs++;
    stats->text_bytes += doc->len;
    if (doc->truncated) stats->truncated++;
    if (repl > 0) stats->repaired_docs++;
    stats->utf8_replacements += repl;
}

lt_status lt_reader_next(lt_reader *r, lt_doc *doc, bool *eof, lt_error *err) {
    memset(doc, 0, sizeof *doc);
    *eof = true;
    if (r->at_eof) return LT_OK;
    lt_doc raw;
    memset(&raw, 0, sizeof raw);
    bool end = true;
    lt_status st = r->backend->next(r->state, &raw, &end, err);
    if (st != LT_OK || end) {
        r->at_eof = true;
        return st;
    }
    finish_doc(&r->out, &r->out_cap, r->opts.max_doc_bytes, r->backend->text_is_utf8, &raw, &r->stats, doc);
    *eof = false;
    return LT_OK;
}

/* ------------------------------------------------------------------ lines (JSONL) */

bool lt_reader_has_lines(const lt_reader *r) { return r->backend == &lt_reader_backend_jsonl; }

lt_status lt_reader_next_line(lt_reader *r, lt_line *line, bool *eof, lt_error *err) {
    memset(line, 0, sizeof *line);
    *eof = true;
    if (r->at_eof) return LT_OK;
    if (!lt_reader_has_lines(r)) {
        r->at_eof = true;
        return lt_fail(err, LT_ERR_INTERNAL, r->path, "a %s file has no lines to cut", lt_format_name(r->format));
    }
    lt_status st = lt_jsonl_next_line(r->state, line, eof, err);
    if (st != LT_OK || *eof) r->at_eof = true;
    return st;
}

lt_line_decoder *lt_line_decoder_new(const lt_reader_opts *opts) {
    lt_line_decoder *d = lt_calloc_check(1, sizeof *d);
    if (opts != NULL) d->opts = *opts;
    d->field = lt_strdup_check(d->opts.field != NULL ? d->opts.field : "text");
    d->opts.field = d->field;
    if (d->opts.max_doc_bytes == 0) d->opts.max_doc_bytes = READER_DEFAULT_MAX_DOC;
    lt_jsonl_reader_init(&d->jr);
    return d;
}

lt_status lt_line_decode(lt_line_decoder *d, const char *path, const lt_line *line, lt_reader_stats *stats,
                         lt_doc *doc, bool *is_doc, lt_error *err) {
    lt_reader_core core = {.src = NULL, .opts = &d->opts, .stats = stats, .path = path};
    lt_doc raw;
    memset(&raw, 0, sizeof raw);
    memset(doc, 0, sizeof *doc);
    lt_status st = lt_jsonl_decode_line(&d->jr, d->id, &core, line, &raw, is_doc, err);
    if (st != LT_OK || !*is_doc) return st;
    finish_doc(&d->out, &d->out_cap, d->opts.max_doc_bytes, lt_reader_backend_jsonl.text_is_utf8, &raw, stats,
               doc);
    return LT_OK;
}

void lt_line_decoder_free(lt_line_decoder *d) {
    if (d == NULL) return;
    lt_jsonl_reader_free(&d->jr);
    free(d->out);
    free(d->field);
    free(d);
}
