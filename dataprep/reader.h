/*
 * dataprep/reader.h — one reader interface for every corpus format.
 *
 * A reader turns one input file into a sequence of documents (UTF-8 text plus a source
 * locator), streaming: memory stays bounded by a few times opts.max_doc_bytes whatever
 * the file size. Formats (docs/formats.md):
 *   wet      Common Crawl WET (.warc.wet[.gz]): WARC records framed by Content-Length;
 *            only `conversion` records are documents; locator id = WARC-Record-ID,
 *            name = WARC-Target-URI.
 *   jsonl    one JSON object per line (plain/.gz/.zst/.bz2); the document is the string
 *            member opts.field; locator id = "line=N" (1-based), name empty.
 *   wikixml  MediaWiki pages-articles XML (plain/.bz2 multistream); namespace 0 pages
 *            that are not redirects; wikitext converted to plain text (dataprep/wikitext.h);
 *            locator id = "page=ID", name = the page title.
 *   parquet  Apache Parquet (never compressed as a whole; its pages may be): the string
 *            column opts.field of every row group (or of [rg_begin, rg_end)); a row is a
 *            record, a null value a skipped one (null_value); locator id = "row=N"
 *            (1-based in the file), name empty. Read by offset (the footer is at the end),
 *            not through lt_src (dataprep/parquet.h).
 * LT_FMT_AUTO decides from the decompressed content's first bytes ("PAR1" -> parquet,
 * "WARC/" -> wet, "<" -> wikixml, "{" or whitespace then "{" -> jsonl) and falls back to
 * the file name (.parquet, .wet, .xml, .jsonl/.json); lt_format_detect() says which and why.
 *
 * Every document returned is valid UTF-8: invalid bytes are replaced by U+FFFD per maximal
 * invalid subsequence (Python's errors="replace"), counted in doc->utf8_replacements.
 * A document longer than opts.max_doc_bytes is cut at the last UTF-8 boundary at or
 * before the cap, with doc->truncated set and doc->orig_bytes its full length.
 *
 * Bad records (a broken JSON line, a missing or non-string field, a WET record whose
 * Content-Length overruns the file, a malformed WARC header, ...) are skipped: the reader
 * calls opts.on_skip (if set) with WHERE = "PATH:RECORD" (e.g. "x.jsonl:12",
 * "y.warc.wet.gz: record 7 at offset 1234") and a short REASON key + message, counts them
 * in lt_reader_stats, and goes on. Damage to the file itself (compression errors,
 * unclosed XML, a truncated last record) ends the file: lt_reader_next() returns
 * LT_ERR_INPUT with WHERE = "PATH: offset N" after every document before the damage has
 * been returned. An unreadable file is LT_ERR_IO.
 *
 * Thread-safety: one reader belongs to one thread; doc->text stays valid until the next
 * lt_reader_next() or lt_reader_close() on the same reader.
 */
#ifndef LT_DATAPREP_READER_H
#define LT_DATAPREP_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataprep/source.h" /* lt_src */
#include "lib/error.h"       /* lt_status, lt_error */

typedef enum lt_format { LT_FMT_AUTO, LT_FMT_WET, LT_FMT_JSONL, LT_FMT_WIKIXML, LT_FMT_PARQUET } lt_format;

const char *lt_format_name(lt_format f);                  /* "auto", "wet", "jsonl", "wikixml", "parquet" */
lt_status lt_format_parse(const char *name, lt_format *out); /* inverse; LT_ERR_USAGE if unknown */

/* Decide the format of a stream from its first decompressed bytes `head` and the file
 * name; returns LT_FMT_AUTO when undecidable (the reader then reports an input error). */
lt_format lt_format_detect(const char *path, const char *head, size_t head_len);

/* Skip reasons (stable keys in the stats JSON). */
typedef enum lt_skip_reason {
    LT_SKIP_BAD_JSON,      /* "bad_json": a line that is not a JSON object */
    LT_SKIP_MISSING_FIELD, /* "missing_field": no member opts.field */
    LT_SKIP_NOT_STRING,    /* "field_not_string": the member is not a string */
    LT_SKIP_LINE_TOO_LONG, /* "line_too_long": a JSONL line over the line cap (see below) */
    LT_SKIP_BAD_RECORD,    /* "bad_record": malformed WARC header / record framing */
    LT_SKIP_LENGTH_OVERRUN,/* "length_overrun": Content-Length beyond the next record/EOF */
    LT_SKIP_BAD_PAGE,      /* "bad_page": a wiki <page> without id or text */
    LT_SKIP_NULL_VALUE,    /* "null_value": a Parquet row whose column value is null */
    LT_SKIP_N_REASONS
} lt_skip_reason;
const char *lt_skip_reason_key(lt_skip_reason r);

typedef void (*lt_skip_fn)(void *ctx, const char *where, lt_skip_reason reason, const char *message);

typedef struct lt_reader_opts {
    lt_format format;     /* LT_FMT_AUTO: detect per file */
    const char *field;    /* JSONL text member, Parquet column; NULL = "text" */
    size_t max_doc_bytes; /* truncation cap (data.max_doc_bytes); 0 = 64 MiB.  A JSONL line
                             longer than 2 x max_doc_bytes + 1 MiB is skipped (line_too_long) */
    lt_skip_fn on_skip;   /* may be NULL */
    void *skip_ctx;
    uint32_t rg_begin, rg_end; /* Parquet: read row groups [rg_begin, rg_end) only (rg_end 0:
                                  to the last); rows keep their numbers in the file. A split
                                  comes from lt_parquet_row_groups(); other formats ignore it */
} lt_reader_opts;

typedef struct lt_doc {
    const char *text;         /* UTF-8, not NUL-terminated; owned by the reader */
    size_t len;
    const char *id;           /* locator: "line=12", "page=290", "<urn:uuid:...>"; NUL-terminated */
    const char *name;         /* URI (wet), title (wikixml), "" (jsonl) */
    uint64_t record;          /* 1-based record/line/page ordinal in the file */
    uint64_t offset;          /* decompressed byte offset where the record starts */
    bool truncated;           /* cut to max_doc_bytes */
    uint64_t orig_bytes;      /* length before truncation */
    uint64_t utf8_replacements;
} lt_doc;

typedef struct lt_reader_stats {
    uint64_t records;                      /* records/lines/pages seen */
    uint64_t docs;                         /* documents returned */
    uint64_t skipped[LT_SKIP_N_REASONS];   /* bad records by reason */
    uint64_t filtered;                     /* valid records that are not documents by design
                                              (WET non-conversion records, wiki non-ns0 and
                                              redirect pages, blank JSONL lines) */
    uint64_t truncated;                    /* documents cut to the cap */
    uint64_t repaired_docs;                /* documents with >= 1 U+FFFD replacement */
    uint64_t utf8_replacements;
    uint64_t text_bytes;                   /* bytes of document text returned */
} lt_reader_stats;

typedef struct lt_reader lt_reader;

lt_status lt_reader_open(lt_reader **out, const char *path, const lt_reader_opts *opts, lt_error *err);
/* Same over a memory buffer (tests, fuzzers); format AUTO is allowed. */
lt_status lt_reader_open_mem(lt_reader **out, const void *data, size_t len, const char *name,
                             const lt_reader_opts *opts, lt_error *err);

/* Next document: LT_OK with *eof=false and *doc filled, or LT_OK with *eof=true at the end,
 * or an error (damage: LT_ERR_INPUT; I/O: LT_ERR_IO) after which the reader is at EOF. */
lt_status lt_reader_next(lt_reader *r, lt_doc *doc, bool *eof, lt_error *err);

lt_format lt_reader_format(const lt_reader *r);       /* the detected or forced format */
const lt_reader_stats *lt_reader_get_stats(const lt_reader *r);
const lt_src *lt_reader_source(const lt_reader *r);   /* progress: raw offset / size */
void lt_reader_close(lt_reader *r);                    /* NULL-safe */

/* A Parquet file's row groups and rows, from its footer only (to split a file between
 * tasks by whole row groups: lt_reader_opts.rg_begin/rg_end). A damaged footer is
 * LT_ERR_INPUT, an unreadable file LT_ERR_IO. (dataprep/reader_parquet.c) */
lt_status lt_parquet_row_groups(const char *path, uint32_t *n_groups, uint64_t *n_rows, lt_error *err);

/* ---- record-parallel decoding (JSONL) ------------------------------------------------
 * A JSONL line is a record on its own, so the thread that owns the reader need only cut the
 * stream into lines (a memchr), while turning a line into a document (JSON decoding,
 * UTF-8 repair, truncation: most of a reader's time) may run on any number of threads:
 *   the reader's thread:  lt_reader_next_line() in place of lt_reader_next()
 *   any thread:           lt_line_decode() with a decoder of its own
 * Decoding the lines in order gives exactly lt_reader_next()'s documents, skips and
 * statistics; the statistics (records included) go to lt_line_decode's `stats`, and
 * lt_reader_get_stats() counts nothing for lines taken this way. Damage of the file still
 * ends lt_reader_next_line() with LT_ERR_INPUT after every line before it. */
typedef struct lt_line {
    const char *text;  /* without the '\n'; owned by the reader, valid until its next call */
    size_t len;
    uint64_t line_no;  /* 1-based */
    uint64_t offset;   /* decompressed offset of the line's first byte */
    bool too_long;     /* over the line cap (see max_doc_bytes): consumed, not kept, len 0 */
} lt_line;

/* True when the file is JSONL: lt_reader_next_line() may then be used. */
bool lt_reader_has_lines(const lt_reader *r);
lt_status lt_reader_next_line(lt_reader *r, lt_line *line, bool *eof, lt_error *err);

typedef struct lt_line_decoder lt_line_decoder;
/* A decoder with the reader's options (field, max_doc_bytes, on_skip + skip_ctx: skips are
 * reported through them, from the decoding thread). Belongs to one thread. */
lt_line_decoder *lt_line_decoder_new(const lt_reader_opts *opts);
/* Decode one line of file `path`: *is_doc true and *doc filled (doc->text valid until the
 * next call on d), or false when the line is no document (blank: counted filtered; bad:
 * skipped). Errors: only out-of-the-ordinary ones (not a bad line: that is a skip). */
lt_status lt_line_decode(lt_line_decoder *d, const char *path, const lt_line *line, lt_reader_stats *stats,
                         lt_doc *doc, bool *is_doc, lt_error *err);
void lt_line_decoder_free(lt_line_decoder *d); /* NULL-safe */

/* ---- backends (dataprep/reader_*.c), used by reader.c only ---------------------------- */

/* Shared state a backend fills; reader.c owns it and applies UTF-8 repair + truncation. */
typedef struct lt_reader_core {
    lt_src *src;
    const lt_reader_opts *opts;
    lt_reader_stats *stats;
    const char *path;         /* for messages */
    const void *mem;          /* lt_reader_open_mem's buffer, NULL for a file: for a backend that
                                 reads by offset (parquet) rather than through src */
    size_t mem_len;
} lt_reader_core;

/* A backend yields raw documents (text may be invalid UTF-8 and longer than the cap only
 * by what it could not avoid reading; reader.c repairs/truncates). */
typedef struct lt_reader_backend {
    const char *name;
    bool text_is_utf8; /* its texts are valid UTF-8 already (JSONL: the JSON decoder repairs
                          strings), so reader.c need not validate them again */
    lt_status (*open)(void **state, lt_reader_core *core, lt_error *err);
    /* On LT_OK with *eof=false, *doc holds text/len/id/name/record/offset (orig_bytes may
     * be set if the backend already dropped bytes past the cap; utf8_replacements if its
     * decoder already replaced invalid UTF-8, e.g. inside JSON strings: reader.c adds it). */
    lt_status (*next)(void *state, lt_doc *doc, bool *eof, lt_error *err);
    void (*close)(void *state);
} lt_reader_backend;

extern const lt_reader_backend lt_reader_backend_wet;     /* dataprep/reader_wet.c */
extern const lt_reader_backend lt_reader_backend_jsonl;   /* dataprep/reader_jsonl.c */
extern const lt_reader_backend lt_reader_backend_wikixml; /* dataprep/reader_wikixml.c */
extern const lt_reader_backend lt_reader_backend_parquet; /* dataprep/reader_parquet.c */

/* The JSONL backend's two steps (reader_jsonl.c): cut the next line of the backend state,
 * decode a line with a JSON reader and an id buffer of the caller's (any thread). */
struct lt_jsonl_reader;
lt_status lt_jsonl_next_line(void *state, lt_line *line, bool *eof, lt_error *err);
lt_status lt_jsonl_decode_line(struct lt_jsonl_reader *jr, char id[32], lt_reader_core *core, const lt_line *line,
                               lt_doc *doc, bool *is_doc, lt_error *err);

/* Report a skipped record through core->opts->on_skip and count it (printf-formatted;
 * dataprep/reader_skip.c). */
void lt_reader_skip(lt_reader_core *core, const char *where, lt_skip_reason reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* LT_DATAPREP_READER_H */
