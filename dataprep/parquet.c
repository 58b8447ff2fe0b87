/*
 * dataprep/parquet.c — one string column of a Parquet file, row by row (see parquet.h).
 *
 * Three layers, top to bottom in this file:
 *   - the byte-range accessor (pq_read): file bytes [off, off+n) from a file (pread into a
 *     buffer of the caller's) or a memory buffer (a pointer into it), checked against the
 *     file size;
 *   - the footer (parquet-format README.md "File Format"; parquet.thrift FileMetaData,
 *     SchemaElement, RowGroup, ColumnChunk, ColumnMetaData): the schema is walked to find
 *     the top-level column and its leaf index (a RowGroup's `columns` are the schema's
 *     leaves in depth-first order), then only that column's chunk is kept per row group;
 *   - the pages of a column chunk (parquet.thrift PageHeader, DataPageHeader,
 *     DataPageHeaderV2, DictionaryPageHeader; Encodings.md): one page at a time is read,
 *     decompressed and decoded value by value.
 *
 * Data page layouts (parquet-format README.md "Data Pages", "Nulls"; DataPageHeaderV2 in
 * parquet.thrift). For a flat column the repetition levels are absent (max level 0) and the
 * definition levels present only when the column is OPTIONAL (max level 1, bit width 1):
 *   v1: the whole page is compressed; inside: [u32 length, RLE/bit-packed hybrid def
 *       levels] values;
 *   v2: rep levels, def levels (hybrid without the length prefix; their byte lengths are in
 *       the header) are never compressed; only the values after them are (is_compressed).
 * The values (parquet-format Encodings.md): PLAIN BYTE_ARRAY is a u32 little-endian length
 * and the bytes, value after value; PLAIN_DICTIONARY / RLE_DICTIONARY is one byte of bit
 * width, then the dictionary indices in the RLE/bit-packed hybrid; the dictionary page
 * (the first page of the chunk, if any) holds the dictionary's values PLAIN-encoded.
 * A null row has definition level 0 and no value.
 *
 * Checks that keep a damaged file from crashing, hanging or allocating without bound:
 * every offset and length against the file size and its column chunk; the footer length
 * against PQ_FOOTER_MAX; list sizes against the bytes left (parquet_thrift.c); a page's
 * uncompressed size against what its codec really produces (the output buffer grows as
 * output comes, so a lying header cannot make a large allocation); dictionary indices
 * against the dictionary's size; the values of a row group's pages against its rows.
 */
#include "dataprep/parquet.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <snappy-c.h> /* snappy_uncompress, snappy_validate_compressed_buffer */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h> /* inflate (GZIP pages) */
#include <zstd.h> /* ZSTD_decompressStream */

#include "dataprep/parquet_thrift.h" /* lt_thrift_* */

#define PQ_FOOTER_MAX (256u << 20) /* a FileMetaData larger than this is refused */
#define PQ_SCHEMA_MAX (1u << 20)   /* schema elements (columns and groups) */
#define PQ_SCHEMA_DEPTH_MAX 64u    /* nesting of schema groups */
/* The first read of a page header; a longer one (statistics) is read again 4x larger ... */
#ifndef PQ_HEADER_WINDOW
#define PQ_HEADER_WINDOW (1u << 10)
#endif
#define PQ_HEADER_MAX (16u << 20) /* ... grown (statistics can be long) up to this */
#define PQ_NAMES_MAX 400u         /* the column list in messages */
/* A run of nulls (or of one dictionary index) costs a few bytes for any number of rows, so
 * the rows a footer claims are not bounded by the file's size; reading them is work per
 * row. This bound keeps a small forged file from claiming billions of rows. */
#define PQ_ROWS_PER_BYTE 4096u

/* parquet.thrift enums */
enum { PQ_BYTE_ARRAY = 6 };                                                                /* Type */
enum { PQ_REQUIRED = 0, PQ_OPTIONAL = 1, PQ_REPEATED = 2 };                                /* FieldRepetitionType */
enum { PQ_UNCOMPRESSED = 0, PQ_SNAPPY = 1, PQ_GZIP = 2, PQ_ZSTD = 6 };                     /* CompressionCodec */
enum { PQ_DATA_PAGE = 0, PQ_INDEX_PAGE = 1, PQ_DICTIONARY_PAGE = 2, PQ_DATA_PAGE_V2 = 3 }; /* PageType */
enum { PQ_PLAIN = 0, PQ_PLAIN_DICTIONARY = 2, PQ_RLE = 3, PQ_RLE_DICTIONARY = 8 };         /* Encoding */

static const char *type_name(int64_t t) {
    static const char *const names[] = {"BOOLEAN", "INT32",  "INT64",      "INT96",
                                        "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
    return t >= 0 && t < 8 ? names[t] : "UNKNOWN";
}
static const char *codec_name(int64_t c) {
    static const char *const names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
    return c >= 0 && c < 8 ? names[c] : "UNKNOWN";
}
static const char *encoding_name(int64_t e) {
    static const char *const names[] = {
        "PLAIN",          "GROUP_VAR_INT",       "PLAIN_DICTIONARY",        "RLE",
        "BIT_PACKED",     "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
        "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
    return e >= 0 && e < 10 ? names[e] : "UNKNOWN";
}

typedef struct pq_buf {
    uint8_t *p;
    size_t cap;
} pq_buf;

/* The column chunk of one row group (ColumnChunk + ColumnMetaData). */
typedef struct pq_group {
    uint64_t rows;      /* RowGroup.num_rows */
    uint64_t first_row; /* 0-based, in the file */
    uint64_t chunk_start, chunk_len;
    uint64_t values; /* ColumnMetaData.num_values */
    int codec;
} pq_group;

/* RLE/bit-packed hybrid decoder (Encodings.md "Run Length Encoding / Bit-Packing Hybrid"):
 *   run := bit-packed-run | rle-run
 *   bit-packed-run := varint(groups << 1 | 1), groups x 8 values of `width` bits, packed
 *                     from the least significant bit of each byte on
 *   rle-run := varint(count << 1), the value in ceil(width / 8) bytes little-endian */
typedef struct pq_rle {
    const uint8_t *p, *end;
    int width;     /* 0..32 */
    uint64_t left; /* values left in the current run */
    bool packed;
    uint32_t value;      /* of an RLE run */
    const uint8_t *bits; /* of a bit-packed run */
    uint64_t bit, bits_len;
} pq_rle;

typedef struct pq_slice {
    const uint8_t *p;
    uint32_t n;
} pq_slice;

typedef struct pq_page_header {
    int64_t type, uncompressed, compressed;
    bool has_type, has_sizes;
    bool has_v1, has_v2, has_dict;
    int64_t num_values, encoding, def_encoding;    /* v1 and dict (num_values, encoding) */
    int64_t num_nulls, num_rows, def_len, rep_len; /* v2 */
    bool v2_compressed;
} pq_page_header;

struct lt_pq_reader {
    char *name;
    int fd; /* -1 for a memory buffer */
    const uint8_t *mem;
    uint64_t size;
    uint64_t meta_start; /* first byte of the FileMetaData */
    uint64_t n_rows;
    uint32_t n_groups;

    /* the column (NULL: footer only) */
    char *column;
    int max_def; /* 0 REQUIRED, 1 OPTIONAL */
    pq_group *groups;
    uint32_t g, g_end;
    bool in_group, done;

    /* the row group being read */
    uint64_t pos, chunk_end; /* next page header; end of the column chunk */
    uint64_t rows_left, row;
    bool seen_data_page;
    pq_buf hdr, dict_raw, dict_out, raw, out;
    pq_slice *dict;
    uint32_t dict_n;
    bool has_dict;
    ZSTD_DCtx *zd;

    /* the data page being read */
    uint64_t page_off;  /* 0: none yet in this row group */
    uint64_t page_left; /* values (rows) left in it */
    bool page_v2;
    uint64_t page_nulls, nulls_seen;
    bool has_def;
    pq_rle def;
    bool page_dict;
    pq_rle idx;
    const uint8_t *vp, *ve; /* PLAIN values left */
};

/* ------------------------------------------------------------------ errors */

static lt_status damage(lt_pq_reader *r, lt_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A damaged file: LT_ERR_INPUT, WHERE naming the footer or the row group and page. */
static lt_status damage(lt_pq_reader *r, lt_error *err, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX], where[LT_ERROR_WHERE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!r->in_group)
        snprintf(where, sizeof where, "%s: footer", r->name);
    else if (r->page_off == 0)
        snprintf(where, sizeof where, "%s: row group %" PRIu32 ", column chunk at offset %" PRIu64, r->name, r->g,
                 r->pos);
    else
        snprintf(where, sizeof where, "%s: row group %" PRIu32 ", page at offset %" PRIu64, r->name, r->g, r->page_off);
    r->done = true;
    return lt_fail(err, LT_ERR_INPUT, where, "%s", what);
}

/* ------------------------------------------------------------------ byte ranges */

static void buf_reserve(pq_buf *b, size_t n) {
    if (n <= b->cap) return;
    b->p = lt_realloc_check(b->p, n);
    b->cap = n;
}

/* File bytes [off, off+n): *out points into the memory buffer, or into b (read). */
static lt_status pq_read(lt_pq_reader *r, uint64_t off, size_t n, pq_buf *b, const uint8_t **out, lt_error *err) {
    *out = NULL;
    if (off > r->size || n > r->size - off)
        return damage(r, err, "bytes %" PRIu64 "..%" PRIu64 " are past the end of the file (%" PRIu64 " bytes)", off,
                      off + n, r->size);
    if (r->mem != NULL) {
        *out = r->mem + off;
        return LT_OK;
    }
    buf_reserve(b, n ? n : 1);
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(r->fd, b->p + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            r->done = true;
            return lt_fail(err, LT_ERR_IO, r->name, "read failed at offset %" PRIu64 ": %s", off + got,
                           strerror(errno));
        }
        if (k == 0) {
            r->done = true;
            return lt_fail(err, LT_ERR_IO, r->name,
                           "the file is shorter than when it was opened (changed while read?)");
        }
        got += (size_t)k;
    }
    *out = b->p;
    return LT_OK;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ------------------------------------------------------------------ footer */

typedef struct pq_elem { /* SchemaElement: what the column lookup needs */
    const uint8_t *name;
    size_t name_len;
    int64_t type, rep, children;
    bool has_type;
} pq_elem;

static void parse_schema_element(lt_thrift *t, pq_elem *e) {
    memset(e, 0, sizeof *e);
    int16_t last = 0, id;
    int ty;
    while (lt_thrift_field(t, &last, &id, &ty)) {
        switch (id) {
        case 1: e->type = lt_thrift_int(t, ty), e->has_type = true; break;
        case 3: e->rep = lt_thrift_int(t, ty); break;
        case 4: lt_thrift_binary(t, ty, &e->name, &e->name_len); break;
        case 5: e->children = lt_thrift_int(t, ty); break;
        default: lt_thrift_skip(t, ty, false); break;
        }
    }
}

static bool name_is(const pq_elem *e, const char *s) {
    return e->name != NULL && strlen(s) == e->name_len && memcmp(e->name, s, e->name_len) == 0;
}

/* Find the top-level column r->column in the flattened schema (element 0 is the root;
 * each group is followed by its children, depth first): its leaf index and max
 * definition level, or an error naming the columns there are. */
static lt_status find_column(lt_pq_reader *r, const pq_elem *el, uint32_t n, uint32_t *leaf_out, uint32_t *n_leaves,
                             lt_error *err) {
    int64_t stack[PQ_SCHEMA_DEPTH_MAX];
    uint32_t depth = 0, leaf = 0;
    const pq_elem *found = NULL, *suggest = NULL;
    char names[PQ_NAMES_MAX + 8] = "";
    size_t names_len = 0;
    if (el[0].children < 0 || (uint64_t)el[0].children > n - 1)
        return damage(r, err, "the schema's root has %" PRId64 " children but %" PRIu32 " elements follow",
                      el[0].children, n - 1);
    if (el[0].children > 0) stack[depth++] = el[0].children;
    for (uint32_t i = 1; i < n; i++) {
        const pq_elem *e = &el[i];
        if (depth == 0) return damage(r, err, "the schema has more elements than its groups hold");
        stack[depth - 1]--;
        const bool top = depth == 1;
        if (top && names_len < PQ_NAMES_MAX) { /* the column list for messages */
            int k = snprintf(names + names_len, PQ_NAMES_MAX - names_len, "%s%.*s", names_len ? ", " : "",
                             (int)(e->name_len > 100 ? 100 : e->name_len), e->name ? (const char *)e->name : "");
            if (k > 0) names_len += (size_t)k;
            if (names_len >= PQ_NAMES_MAX) { /* cut: say so (names has room for it) */
                names_len = PQ_NAMES_MAX;
                memcpy(names + PQ_NAMES_MAX - 1, ", ...", 6);
            }
        }
        if (e->children < 0 || (uint64_t)e->children > n)
            return damage(r, err, "a schema group has %" PRId64 " children", e->children);
        if (e->children > 0) {
            if (top && name_is(e, r->column) && found == NULL) found = e;
            if (depth == PQ_SCHEMA_DEPTH_MAX) return damage(r, err, "the schema nests groups too deep");
            stack[depth++] = e->children;
        } else {
            if (top && name_is(e, r->column) && found == NULL) {
                found = e;
                *leaf_out = leaf;
            }
            if (top && suggest == NULL && e->has_type && e->type == PQ_BYTE_ARRAY && e->rep != PQ_REPEATED) suggest = e;
            leaf++;
        }
        while (depth > 0 && stack[depth - 1] == 0) depth--;
    }
    if (depth != 0) return damage(r, err, "the schema ends inside a group");
    *n_leaves = leaf;
    char hint[LT_ERROR_HINT_MAX];
    if (suggest != NULL)
        snprintf(hint, sizeof hint, "set field = %.*s (--field, data.field) to read that string column",
                 (int)(suggest->name_len > 200 ? 200 : suggest->name_len), (const char *)suggest->name);
    else
        snprintf(hint, sizeof hint, "the file has no top-level string (BYTE_ARRAY) column to read");
    lt_status st = LT_OK;
    if (found == NULL)
        st = lt_fail(err, LT_ERR_INPUT, r->name, "no column '%s' in this Parquet file (columns are: %s)", r->column,
                     names);
    else if (found->children > 0)
        st = lt_fail(err, LT_ERR_INPUT, r->name,
                     "column '%s' is a nested group of %" PRId64 " fields, not a string (columns are: %s)", r->column,
                     found->children, names);
    else if (found->rep == PQ_REPEATED)
        st = lt_fail(err, LT_ERR_INPUT, r->name,
                     "column '%s' is repeated (a list), not one string per row (columns are: %s)", r->column, names);
    else if (!found->has_type || found->type != PQ_BYTE_ARRAY)
        st = lt_fail(err, LT_ERR_INPUT, r->name,
                     "column '%s' has physical type %s, not BYTE_ARRAY (a string) (columns are: %s)", r->column,
                     type_name(found->type), names);
    if (st != LT_OK) {
        lt_error_hint(err, "%s", hint);
        r->done = true;
        return st;
    }
    r->max_def = found->rep == PQ_OPTIONAL ? 1 : 0;
    return LT_OK;
}

/* ColumnMetaData of our column: type, path, codec, counts and where its pages are. */
static lt_status parse_column_meta(lt_pq_reader *r, lt_thrift *t, pq_group *g, uint32_t gi, lt_error *err) {
    int16_t last = 0, id;
    int ty;
    int64_t type = -1, codec = -1, num_values = -1, total = -1, data_off = -1, dict_off = -1;
    bool path_ok = false;
    while (lt_thrift_field(t, &last, &id, &ty)) {
        switch (id) {
        case 1: type = lt_thrift_int(t, ty); break;
        case 3: {
            int ety;
            uint32_t n;
            lt_thrift_list(t, ty, &ety, &n);
            for (uint32_t i = 0; i < n && !t->failed; i++) {
                const uint8_t *p;
                size_t len;
                lt_thrift_binary(t, ety, &p, &len);
                path_ok = n == 1 && len == strlen(r->column) && memcmp(p, r->column, len) == 0;
            }
            break;
        }
        case 4: codec = lt_thrift_int(t, ty); break;
        case 5: num_values = lt_thrift_int(t, ty); break;
        case 7: total = lt_thrift_int(t, ty); break;
        case 9: data_off = lt_thrift_int(t, ty); break;
        case 11: dict_off = lt_thrift_int(t, ty); break;
        default: lt_thrift_skip(t, ty, false); break;
        }
    }
    if (t->failed) return damage(r, err, "bad Thrift in row group %" PRIu32 "'s column metadata: %s", gi, t->why);
    if (!path_ok)
        return damage(r, err,
                      "row group %" PRIu32 ": the column chunk's path is not '%s' (schema and row group disagree)", gi,
                      r->column);
    if (type != PQ_BYTE_ARRAY)
        return damage(r, err, "row group %" PRIu32 ": the column chunk has type %s, the schema BYTE_ARRAY", gi,
                      type_name(type));
    if (num_values == 0) { /* an empty row group: pyarrow writes no data page offset */
        g->codec = (int)codec;
        return LT_OK;
    }
    if (num_values < 0 || total < 0 || data_off < 4)
        return damage(r, err, "row group %" PRIu32 ": the column chunk's counts or offsets are missing or negative",
                      gi);
    uint64_t start = (uint64_t)data_off;
    if (dict_off > 0 && dict_off < data_off) start = (uint64_t)dict_off;
    if (start < 4 || start > r->meta_start || (uint64_t)total > r->meta_start - start)
        return damage(r, err,
                      "row group %" PRIu32 ": the column chunk (%" PRId64 " bytes at offset %" PRIu64
                      ") overlaps the footer or the file's start",
                      gi, total, start);
    g->chunk_start = start;
    g->chunk_len = (uint64_t)total;
    g->values = (uint64_t)num_values;
    g->codec = (int)codec;
    return LT_OK;
}

/* ColumnChunk: only within this file, with its metadata. */
static lt_status parse_column_chunk(lt_pq_reader *r, lt_thrift *t, pq_group *g, uint32_t gi, lt_error *err) {
    int16_t last = 0, id;
    int ty;
    bool has_meta = false;
    while (lt_thrift_field(t, &last, &id, &ty)) {
        if (id == 1) {
            const uint8_t *p;
            size_t n;
            lt_thrift_binary(t, ty, &p, &n);
            if (n > 0 && !t->failed)
                return damage(r, err,
                              "row group %" PRIu32 ": the column chunk is in another file (%.*s); not supported", gi,
                              (int)(n > 200 ? 200 : n), (const char *)p);
        } else if (id == 3 && ty == LT_TT_STRUCT) {
            lt_status st = parse_column_meta(r, t, g, gi, err);
            if (st != LT_OK) return st;
            has_meta = true;
        } else {
            lt_thrift_skip(t, ty, false);
        }
    }
    if (t->failed) return damage(r, err, "bad Thrift in row group %" PRIu32 "'s column chunk: %s", gi, t->why);
    if (!has_meta)
        return damage(r, err, "row group %" PRIu32 ": the column chunk has no metadata (an encrypted file?)", gi);
    return LT_OK;
}

/* FileMetaData.row_groups (a list of RowGroup at t): counts, and our column's chunk. */
static lt_status parse_row_groups(lt_pq_reader *r, lt_thrift *t, int list_type, uint32_t leaf, uint32_t n_leaves,
                                  lt_error *err) {
    int ety;
    uint32_t n;
    lt_thrift_list(t, list_type, &ety, &n);
    if (!t->failed && ety != LT_TT_STRUCT) return damage(r, err, "FileMetaData.row_groups is not a list of structs");
    size_t cap = 0;
    uint64_t sum = 0;
    for (uint32_t gi = 0; gi < n && !t->failed; gi++) {
        pq_group g;
        memset(&g, 0, sizeof g);
        bool has_rows = false, has_chunk = false;
        uint32_t n_cols = 0;
        int64_t rows = 0;
        int16_t last = 0, id;
        int ty;
        while (lt_thrift_field(t, &last, &id, &ty)) {
            if (id == 1) {
                int cty;
                lt_thrift_list(t, ty, &cty, &n_cols);
                if (!t->failed && cty != LT_TT_STRUCT)
                    return damage(r, err, "row group %" PRIu32 ": columns is not a list of structs", gi);
                for (uint32_t j = 0; j < n_cols && !t->failed; j++) {
                    if (r->column != NULL && j == leaf) {
                        lt_status st = parse_column_chunk(r, t, &g, gi, err);
                        if (st != LT_OK) return st;
                        has_chunk = true;
                    } else {
                        lt_thrift_skip(t, LT_TT_STRUCT, true);
                    }
                }
            } else if (id == 3) {
                rows = lt_thrift_int(t, ty);
                has_rows = true;
            } else {
                lt_thrift_skip(t, ty, false);
            }
        }
        if (t->failed) break;
        if (!has_rows || rows < 0) return damage(r, err, "row group %" PRIu32 " has no row count", gi);
        if (sum > (uint64_t)INT64_MAX - (uint64_t)rows) return damage(r, err, "the row counts overflow");
        if (r->column != NULL) {
            if (n_cols != n_leaves)
                return damage(r, err,
                              "row group %" PRIu32 " has %" PRIu32 " column chunks, the schema %" PRIu32 " columns", gi,
                              n_cols, n_leaves);
            if (!has_chunk) return damage(r, err, "row group %" PRIu32 " has no chunk for column '%s'", gi, r->column);
            if (g.values != (uint64_t)rows)
                return damage(r, err,
                              "row group %" PRIu32 " has %" PRId64 " rows but its column chunk %" PRIu64
                              " values (counts disagree)",
                              gi, rows, g.values);
            g.rows = (uint64_t)rows;
            g.first_row = sum;
            if (r->n_groups == cap) {
                cap = cap ? 2 * cap : 16;
                r->groups = lt_realloc_check(r->groups, cap * sizeof *r->groups);
            }
            r->groups[r->n_groups] = g;
        }
        r->n_groups++;
        sum += (uint64_t)rows;
    }
    if (t->failed) return damage(r, err, "bad Thrift in the row groups: %s", t->why);
    if (sum != r->n_rows)
        return damage(r, err, "the row groups hold %" PRIu64 " rows, the footer says %" PRIu64 " (counts disagree)",
                      sum, r->n_rows);
    return LT_OK;
}

static lt_status read_footer(lt_pq_reader *r, lt_error *err) {
    if (r->size < 12)
        return damage(r, err, "%" PRIu64 " bytes is too short for a Parquet file (magic, footer, magic)", r->size);
    const uint8_t *p;
    lt_status st = pq_read(r, 0, 4, &r->hdr, &p, err);
    if (st != LT_OK) return st;
    if (memcmp(p, "PAR1", 4) != 0) return damage(r, err, "the file does not start with the Parquet magic PAR1");
    if ((st = pq_read(r, r->size - 8, 8, &r->hdr, &p, err)) != LT_OK) return st;
    if (memcmp(p + 4, "PARE", 4) == 0) return damage(r, err, "an encrypted Parquet file (PARE); not supported");
    if (memcmp(p + 4, "PAR1", 4) != 0)
        return damage(r, err, "the file does not end with the Parquet magic PAR1 (truncated or not Parquet)");
    uint32_t len = le32(p);
    if (len == 0 || len > r->size - 12)
        return damage(r, err, "the footer length %" PRIu32 " does not fit in the file (%" PRIu64 " bytes)", len,
                      r->size);
    if (len > PQ_FOOTER_MAX)
        return damage(r, err, "a footer of %" PRIu32 " bytes is over the limit of %u", len, PQ_FOOTER_MAX);
    r->meta_start = r->size - 8 - len;
    const uint8_t *meta;
    if ((st = pq_read(r, r->meta_start, len, &r->raw, &meta, err)) != LT_OK) return st;

    /* FileMetaData: 2 schema, 3 num_rows, 4 row_groups (read once the schema is known) */
    lt_thrift t;
    lt_thrift_init(&t, meta, len);
    pq_elem *el = NULL;
    uint32_t n_el = 0;
    bool has_schema = false, has_rows = false;
    int64_t num_rows = 0;
    const uint8_t *rg_at = NULL;
    int rg_type = 0;
    int16_t last = 0, id;
    int ty;
    while (lt_thrift_field(&t, &last, &id, &ty)) {
        if (id == 2 && !has_schema) {
            int ety;
            uint32_t n;
            lt_thrift_list(&t, ty, &ety, &n);
            if (!t.failed && (ety != LT_TT_STRUCT || n == 0 || n > PQ_SCHEMA_MAX)) {
                free(el);
                return damage(r, err, "the schema is not a list of 1..%u elements", PQ_SCHEMA_MAX);
            }
            if (n > 0 && !t.failed) el = lt_malloc_check((size_t)n * sizeof *el);
            for (uint32_t i = 0; i < n && !t.failed; i++) parse_schema_element(&t, &el[i]);
            n_el = n;
            has_schema = true;
        } else if (id == 3) {
            num_rows = lt_thrift_int(&t, ty);
            has_rows = true;
        } else if (id == 4 && rg_at == NULL) {
            rg_at = t.p;
            rg_type = ty;
            lt_thrift_skip(&t, ty, false);
        } else {
            lt_thrift_skip(&t, ty, false);
        }
    }
    if (t.failed || !has_schema || !has_rows || num_rows < 0 || rg_at == NULL) {
        free(el);
        if (t.failed) return damage(r, err, "bad Thrift in the footer: %s", t.why);
        return damage(r, err, "the footer lacks %s",
                      !has_schema                 ? "the schema"
                      : !has_rows || num_rows < 0 ? "the row count"
                                                  : "the row groups");
    }
    r->n_rows = (uint64_t)num_rows;
    if (r->n_rows / PQ_ROWS_PER_BYTE > r->size) {
        free(el);
        return damage(r, err, "the footer claims %" PRIu64 " rows in %" PRIu64 " bytes (over %u rows a byte)",
                      r->n_rows, r->size, PQ_ROWS_PER_BYTE);
    }
    uint32_t leaf = 0, n_leaves = 0;
    if (r->column != NULL) {
        st = find_column(r, el, n_el, &leaf, &n_leaves, err);
        if (st != LT_OK) {
            free(el);
            return st;
        }
    }
    free(el); /* the names pointed into meta; nothing of them is kept */
    lt_thrift_init(&t, rg_at, (size_t)(meta + len - rg_at));
    return parse_row_groups(r, &t, rg_type, leaf, n_leaves, err);
}

/* ------------------------------------------------------------------ open / close */

lt_status lt_pq_open(lt_pq_reader **out, const char *path, const void *mem, size_t mem_len, const char *column,
                     uint32_t rg_begin, uint32_t rg_end, lt_error *err) {
    *out = NULL;
    lt_pq_reader *r = lt_calloc_check(1, sizeof *r);
    r->name = lt_strdup_check(path ? path : "");
    r->fd = -1;
    if (column != NULL) r->column = lt_strdup_check(column);
    lt_status st = LT_OK;
    if (mem != NULL || path == NULL) {
        r->mem = mem != NULL ? mem : (const uint8_t *)"";
        r->size = mem != NULL ? mem_len : 0;
    } else {
        r->fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat sb;
        if (r->fd < 0) {
            st = lt_fail(err, LT_ERR_IO, path, "cannot open: %s", strerror(errno));
            goto fail;
        }
        if (fstat(r->fd, &sb) != 0) {
            st = lt_fail(err, LT_ERR_IO, path, "cannot stat: %s", strerror(errno));
            goto fail;
        }
        if (!S_ISREG(sb.st_mode)) {
            st = lt_fail(err, LT_ERR_IO, path, "cannot read as a Parquet file: %s",
                         S_ISDIR(sb.st_mode) ? strerror(EISDIR) : "not a regular file (Parquet needs random access)");
            goto fail;
        }
        r->size = (uint64_t)sb.st_size;
    }
    if ((st = read_footer(r, err)) != LT_OK) goto fail;
    if (column != NULL) {
        if (rg_end == 0) rg_end = r->n_groups;
        if (rg_begin > rg_end || rg_end > r->n_groups) {
            st = lt_fail(err, LT_ERR_INPUT, path,
                         "row groups %" PRIu32 "..%" PRIu32 " asked for, the file has %" PRIu32
                         " (changed since it was split?)",
                         rg_begin, rg_end, r->n_groups);
            goto fail;
        }
        r->g = rg_begin;
        r->g_end = rg_end;
        if (r->g < r->g_end) r->row = r->groups[r->g].first_row;
    } else {
        r->done = true;
    }
    free(r->raw.p); /* the footer's bytes */
    r->raw.p = NULL;
    r->raw.cap = 0;
    *out = r;
    return LT_OK;
fail:
    lt_pq_close(r);
    return st;
}

uint32_t lt_pq_row_groups(const lt_pq_reader *r) { return r->n_groups; }
uint64_t lt_pq_rows(const lt_pq_reader *r) { return r->n_rows; }

void lt_pq_close(lt_pq_reader *r) {
    if (r == NULL) return;
    if (r->fd >= 0) close(r->fd);
    ZSTD_freeDCtx(r->zd);
    free(r->hdr.p);
    free(r->dict_raw.p);
    free(r->dict_out.p);
    free(r->raw.p);
    free(r->out.p);
    free(r->dict);
    free(r->groups);
    free(r->column);
    free(r->name);
    free(r);
}

/* ------------------------------------------------------------------ decompression */

/* Grow `out` to hold at least `need` bytes (keeping its contents), for codecs whose output
 * is produced piece by piece: memory follows what the data really holds. */
static void grow_for(pq_buf *out, size_t need, size_t limit) {
    size_t cap = out->cap ? out->cap : 64u << 10;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (cap > limit) cap = limit;
    buf_reserve(out, cap);
}

/* Decompress one page's compressed bytes src[0..n) that must give exactly `want` bytes.
 * *res points at the result (src itself when uncompressed). */
static lt_status decompress(lt_pq_reader *r, int codec, const uint8_t *src, size_t n, size_t want, pq_buf *out,
                            const uint8_t **res, lt_error *err) {
    *res = src;
    if (n == 0 && want == 0) return LT_OK; /* an empty part (v2 values of an all-null page) */
    if (codec == PQ_UNCOMPRESSED) {
        if (n != want) return damage(r, err, "an uncompressed page of %zu bytes says it holds %zu", n, want);
        return LT_OK;
    }
    const size_t limit = want + 1; /* one more byte shows output past the declared size */
    if (codec == PQ_SNAPPY) {
        size_t ulen = 0;
        if (snappy_validate_compressed_buffer((const char *)src, n) != SNAPPY_OK ||
            snappy_uncompressed_length((const char *)src, n, &ulen) != SNAPPY_OK)
            return damage(r, err, "the page's snappy data is corrupt");
        if (ulen != want) return damage(r, err, "the page decompresses to %zu bytes, its header says %zu", ulen, want);
        buf_reserve(out, want ? want : 1);
        if (snappy_uncompress((const char *)src, n, (char *)out->p, &ulen) != SNAPPY_OK || ulen != want)
            return damage(r, err, "the page's snappy data is corrupt");
        *res = out->p;
        return LT_OK;
    }
    size_t got = 0;
    if (codec == PQ_GZIP) {
        z_stream z;
        memset(&z, 0, sizeof z);
        if (inflateInit2(&z, 32 + MAX_WBITS) != Z_OK) /* 32: a gzip or a zlib header */
            return lt_fail(err, LT_ERR_NOMEM, r->name, "cannot initialise zlib");
        z.next_in = (Bytef *)(uintptr_t)src;
        z.avail_in = (uInt)(n > UINT32_MAX ? UINT32_MAX : n);
        int ret = Z_OK;
        while (ret != Z_STREAM_END) {
            if (got == out->cap) grow_for(out, got + 1, limit);
            if (got == out->cap) break; /* more than want + 1 */
            z.next_out = out->p + got;
            z.avail_out = (uInt)(out->cap - got > UINT32_MAX ? UINT32_MAX : out->cap - got);
            uInt before = z.avail_out;
            ret = inflate(&z, Z_NO_FLUSH);
            got += before - z.avail_out;
            if (ret == Z_STREAM_END) break;
            if (ret == Z_BUF_ERROR && z.avail_out > 0) break; /* input used up: truncated */
            if (ret != Z_OK && ret != Z_BUF_ERROR) break;
        }
        inflateEnd(&z);
        if (ret == Z_MEM_ERROR) return lt_fail(err, LT_ERR_NOMEM, r->name, "zlib: out of memory");
        if (ret != Z_STREAM_END) return damage(r, err, "the page's gzip data is corrupt or truncated");
    } else if (codec == PQ_ZSTD) {
        if (r->zd == NULL && (r->zd = ZSTD_createDCtx()) == NULL)
            return lt_fail(err, LT_ERR_NOMEM, r->name, "cannot initialise zstd");
        ZSTD_DCtx_reset(r->zd, ZSTD_reset_session_only);
        ZSTD_inBuffer in = {src, n, 0};
        size_t ret = 1;
        for (;;) {
            if (got == out->cap) grow_for(out, got + 1, limit);
            if (got == out->cap) break;
            ZSTD_outBuffer ob = {out->p + got, out->cap - got, 0};
            const size_t in_before = in.pos;
            ret = ZSTD_decompressStream(r->zd, &ob, &in);
            got += ob.pos;
            if (ZSTD_isError(ret)) return damage(r, err, "the page's zstd data is corrupt: %s", ZSTD_getErrorName(ret));
            if (ret == 0 && in.pos == in.size) break;      /* every frame complete */
            if (ob.pos == 0 && in.pos == in_before) break; /* no progress: input used up */
        }
        if (ret != 0 || in.pos != in.size) return damage(r, err, "the page's zstd data is truncated or too long");
    } else {
        return damage(r, err, "compression codec %s is not supported (SNAPPY, GZIP, ZSTD or UNCOMPRESSED are)",
                      codec_name(codec));
    }
    if (got != want)
        return damage(r, err, "the page decompresses to %s%zu bytes, its header says %zu",
                      got > want ? "more than " : "", got > want ? want : got, want);
    *res = out->p;
    return LT_OK;
}

/* ------------------------------------------------------------------ values */

static void rle_init(pq_rle *d, const uint8_t *p, size_t n, int width) {
    memset(d, 0, sizeof *d);
    d->p = p;
    d->end = p + n;
    d->width = width;
}

/* The next value of the hybrid; false when the data ends early or is corrupt. */
static bool rle_next(pq_rle *d, uint32_t *v) {
    while (d->left == 0) {
        uint64_t h = 0;
        for (int shift = 0;; shift += 7) {
            if (d->p >= d->end || shift > 35) return false;
            uint8_t b = *d->p++;
            h |= (uint64_t)(b & 0x7f) << shift;
            if ((b & 0x80) == 0) break;
        }
        if (h & 1) { /* bit-packed: (h >> 1) groups of 8 values */
            uint64_t bytes = (h >> 1) * (uint64_t)d->width, avail = (uint64_t)(d->end - d->p);
            d->packed = true;
            d->left = (h >> 1) * 8;
            d->bits = d->p;
            d->bit = 0;
            d->bits_len = bytes < avail ? bytes : avail; /* a last run may be cut short */
            d->p += d->bits_len;
        } else {
            size_t nb = ((size_t)d->width + 7) / 8;
            if ((size_t)(d->end - d->p) < nb) return false;
            uint32_t val = 0;
            for (size_t i = 0; i < nb; i++) val |= (uint32_t)d->p[i] << (8 * i);
            d->p += nb;
            if (d->width < 32 && (val >> d->width) != 0) return false;
            d->packed = false;
            d->left = h >> 1;
            d->value = val;
        }
    }
    if (!d->packed) {
        *v = d->value;
    } else if (d->width == 0) {
        *v = 0;
    } else {
        if (d->bit + (uint64_t)d->width > d->bits_len * 8) return false;
        uint64_t byte = d->bit >> 3, acc = 0;
        for (uint64_t i = 0; i < 5 && byte + i < d->bits_len; i++) acc |= (uint64_t)d->bits[byte + i] << (8 * i);
        *v = (uint32_t)((acc >> (d->bit & 7)) & ((1ull << d->width) - 1));
        d->bit += (uint64_t)d->width;
    }
    d->left--;
    return true;
}

/* One PLAIN BYTE_ARRAY value from [*p, end). */
static bool plain_next(const uint8_t **p, const uint8_t *end, const uint8_t **val, size_t *len) {
    if (end - *p < 4) return false;
    uint32_t n = le32(*p);
    if ((size_t)(end - *p) - 4 < n) return false;
    *val = *p + 4;
    *len = n;
    *p += 4 + (size_t)n;
    return true;
}

/* ------------------------------------------------------------------ pages */

static void parse_page_header(lt_thrift *t, pq_page_header *h) {
    memset(h, 0, sizeof *h);
    h->v2_compressed = true; /* DataPageHeaderV2.is_compressed defaults to true */
    int16_t last = 0, id;
    int ty;
    bool has_unc = false, has_comp = false;
    while (lt_thrift_field(t, &last, &id, &ty)) {
        if (id == 1) {
            h->type = lt_thrift_int(t, ty);
            h->has_type = true;
        } else if (id == 2) {
            h->uncompressed = lt_thrift_int(t, ty);
            has_unc = true;
        } else if (id == 3) {
            h->compressed = lt_thrift_int(t, ty);
            has_comp = true;
        } else if ((id == 5 || id == 7 || id == 8) && ty == LT_TT_STRUCT) {
            /* 5 DataPageHeader, 7 DictionaryPageHeader, 8 DataPageHeaderV2 */
            int16_t l2 = 0, f;
            int t2;
            while (lt_thrift_field(t, &l2, &f, &t2)) {
                if (f == 1)
                    h->num_values = lt_thrift_int(t, t2);
                else if (f == 2 && id != 8)
                    h->encoding = lt_thrift_int(t, t2);
                else if (f == 3 && id == 5)
                    h->def_encoding = lt_thrift_int(t, t2);
                else if (f == 2 && id == 8)
                    h->num_nulls = lt_thrift_int(t, t2);
                else if (f == 3 && id == 8)
                    h->num_rows = lt_thrift_int(t, t2);
                else if (f == 4 && id == 8)
                    h->encoding = lt_thrift_int(t, t2);
                else if (f == 5 && id == 8)
                    h->def_len = lt_thrift_int(t, t2);
                else if (f == 6 && id == 8)
                    h->rep_len = lt_thrift_int(t, t2);
                else if (f == 7 && id == 8)
                    h->v2_compressed = lt_thrift_bool(t, t2);
                else
                    lt_thrift_skip(t, t2, false);
            }
            h->has_v1 |= id == 5;
            h->has_dict |= id == 7;
            h->has_v2 |= id == 8;
        } else {
            lt_thrift_skip(t, ty, false);
        }
    }
    h->has_sizes = has_unc && has_comp;
}

/* Set up the page's values (after its levels) for its encoding. */
static lt_status start_values(lt_pq_reader *r, int64_t encoding, const uint8_t *p, size_t n, lt_error *err) {
    if (encoding == PQ_PLAIN) {
        r->page_dict = false;
        r->vp = p;
        r->ve = p + n;
        return LT_OK;
    }
    if (encoding == PQ_PLAIN_DICTIONARY || encoding == PQ_RLE_DICTIONARY) {
        if (!r->has_dict)
            return damage(r, err, "a dictionary-encoded page, but the column chunk has no dictionary page");
        int width = 0;
        if (n > 0) {
            width = p[0];
            p++, n--;
        }
        if (width > 32) return damage(r, err, "dictionary indices of %d bits (at most 32)", width);
        r->page_dict = true;
        rle_init(&r->idx, p, n, width);
        return LT_OK;
    }
    return damage(r, err, "encoding %s is not supported for string columns (PLAIN and dictionary encodings are)",
                  encoding_name(encoding));
}

static lt_status load_dictionary(lt_pq_reader *r, const pq_page_header *h, uint64_t data_off, lt_error *err) {
    const pq_group *g = &r->groups[r->g];
    if (r->seen_data_page || r->has_dict) return damage(r, err, "a dictionary page after the chunk's first page");
    if (h->encoding != PQ_PLAIN && h->encoding != PQ_PLAIN_DICTIONARY)
        return damage(r, err, "a dictionary page in encoding %s (PLAIN expected)", encoding_name(h->encoding));
    const uint8_t *raw, *data;
    lt_status st = pq_read(r, data_off, (size_t)h->compressed, &r->dict_raw, &raw, err);
    if (st != LT_OK) return st;
    if ((st = decompress(r, g->codec, raw, (size_t)h->compressed, (size_t)h->uncompressed, &r->dict_out, &data, err)) !=
        LT_OK)
        return st;
    size_t n = (size_t)h->uncompressed;
    if (h->num_values < 0 || (uint64_t)h->num_values > n / 4)
        return damage(r, err, "a dictionary of %" PRId64 " values in %zu bytes", h->num_values, n);
    r->dict = lt_realloc_check(r->dict, ((size_t)h->num_values + 1) * sizeof *r->dict);
    const uint8_t *p = data, *end = data + n;
    for (int64_t i = 0; i < h->num_values; i++) {
        const uint8_t *v;
        size_t len;
        if (!plain_next(&p, end, &v, &len))
            return damage(r, err, "the dictionary page ends inside value %" PRId64 " of %" PRId64, i, h->num_values);
        r->dict[i].p = v;
        r->dict[i].n = (uint32_t)len;
    }
    r->dict_n = (uint32_t)h->num_values;
    r->has_dict = true;
    return LT_OK;
}

static lt_status load_data_page(lt_pq_reader *r, const pq_page_header *h, uint64_t data_off, lt_error *err) {
    const pq_group *g = &r->groups[r->g];
    const size_t comp = (size_t)h->compressed, unc = (size_t)h->uncompressed;
    const uint8_t *raw, *data;
    lt_status st = pq_read(r, data_off, comp, &r->raw, &raw, err);
    if (st != LT_OK) return st;
    r->seen_data_page = true;
    r->has_def = r->max_def > 0;
    if (h->type == PQ_DATA_PAGE) {
        if (!h->has_v1) return damage(r, err, "a data page without its DataPageHeader");
        if ((st = decompress(r, g->codec, raw, comp, unc, &r->out, &data, err)) != LT_OK) return st;
        size_t n = unc;
        if (r->has_def) {
            if (h->def_encoding != PQ_RLE)
                return damage(r, err, "definition levels in encoding %s (RLE expected)",
                              encoding_name(h->def_encoding));
            if (n < 4 || le32(data) > n - 4) return damage(r, err, "the definition levels run past the page");
            size_t dl = le32(data);
            rle_init(&r->def, data + 4, dl, 1);
            data += 4 + dl;
            n -= 4 + dl;
        }
        r->page_v2 = false;
        if ((st = start_values(r, h->encoding, data, n, err)) != LT_OK) return st;
    } else {
        if (!h->has_v2) return damage(r, err, "a data page v2 without its DataPageHeaderV2");
        if (h->def_len < 0 || h->rep_len < 0 || (uint64_t)h->def_len + (uint64_t)h->rep_len > comp ||
            (uint64_t)h->def_len + (uint64_t)h->rep_len > unc)
            return damage(r, err, "level lengths %" PRId64 " + %" PRId64 " do not fit in the page", h->rep_len,
                          h->def_len);
        if (h->rep_len != 0) return damage(r, err, "repetition levels in a flat column");
        if (h->num_nulls < 0 || h->num_nulls > h->num_values || h->num_rows != h->num_values)
            return damage(r, err,
                          "the page's counts disagree (%" PRId64 " values, %" PRId64 " nulls, %" PRId64 " rows)",
                          h->num_values, h->num_nulls, h->num_rows);
        const size_t lv = (size_t)h->def_len;
        if (r->has_def) rle_init(&r->def, raw, lv, 1);
        const int codec = h->v2_compressed ? g->codec : PQ_UNCOMPRESSED;
        if ((st = decompress(r, codec, raw + lv, comp - lv, unc - lv, &r->out, &data, err)) != LT_OK) return st;
        r->page_v2 = true;
        r->page_nulls = (uint64_t)h->num_nulls;
        if ((st = start_values(r, h->encoding, data, unc - lv, err)) != LT_OK) return st;
    }
    if (h->num_values < 0) return damage(r, err, "a page of %" PRId64 " values", h->num_values);
    r->page_left = (uint64_t)h->num_values;
    r->nulls_seen = 0;
    return LT_OK;
}

/* Read the page at r->pos: a data page sets page_left; a dictionary page the dictionary. */
static lt_status load_page(lt_pq_reader *r, lt_error *err) {
    const pq_group *g = &r->groups[r->g];
    if (r->pos >= r->chunk_end)
        return damage(r, err, "the column chunk ends after %" PRIu64 " of the row group's %" PRIu64 " rows",
                      g->rows - r->rows_left, g->rows);
    r->page_off = r->pos;
    const uint64_t room = r->chunk_end - r->pos;
    size_t window = room < PQ_HEADER_WINDOW ? (size_t)room : PQ_HEADER_WINDOW;
    pq_page_header h;
    lt_thrift t;
    for (;;) {
        const uint8_t *p;
        lt_status st = pq_read(r, r->pos, window, &r->hdr, &p, err);
        if (st != LT_OK) return st;
        lt_thrift_init(&t, p, window);
        parse_page_header(&t, &h);
        if (!t.failed) {
            window = (size_t)(t.p - p);
            break;
        }
        if (!t.short_input || window == room || window >= PQ_HEADER_MAX)
            return damage(r, err, "bad page header: %s", t.why);
        window = room / 4 < window ? (size_t)room : window * 4;
        if (window > PQ_HEADER_MAX) window = PQ_HEADER_MAX;
    }
    if (!h.has_type || !h.has_sizes || h.compressed < 0 || h.uncompressed < 0)
        return damage(r, err, "a page header without its type or sizes");
    const uint64_t data_off = r->pos + window;
    if ((uint64_t)h.compressed > r->chunk_end - data_off)
        return damage(r, err, "a page of %" PRId64 " bytes runs past the end of the column chunk", h.compressed);
    r->pos = data_off + (uint64_t)h.compressed;
    switch (h.type) {
    case PQ_INDEX_PAGE: return LT_OK;
    case PQ_DICTIONARY_PAGE:
        if (!h.has_dict) return damage(r, err, "a dictionary page without its DictionaryPageHeader");
        return load_dictionary(r, &h, data_off, err);
    case PQ_DATA_PAGE:
    case PQ_DATA_PAGE_V2: return load_data_page(r, &h, data_off, err);
    default: return damage(r, err, "page type %" PRId64 " is not supported", h.type);
    }
}

static void start_group(lt_pq_reader *r) {
    const pq_group *g = &r->groups[r->g];
    r->in_group = true;
    r->pos = g->chunk_start;
    r->chunk_end = g->chunk_start + g->chunk_len;
    r->rows_left = g->rows;
    r->row = g->first_row;
    r->seen_data_page = r->has_dict = r->page_v2 = false;
    r->dict_n = 0;
    r->page_off = 0;
    r->page_left = 0;
}

lt_status lt_pq_next(lt_pq_reader *r, lt_pq_value *v, bool *eof, lt_error *err) {
    memset(v, 0, sizeof *v);
    *eof = true;
    lt_status st;
    while (!r->done) {
        if (!r->in_group) {
            if (r->g >= r->g_end) {
                r->done = true;
                break;
            }
            start_group(r);
            continue;
        }
        if (r->page_left == 0) { /* the page is done: check it, go on */
            if (r->page_v2 && r->nulls_seen != r->page_nulls)
                return damage(r, err, "the page has %" PRIu64 " nulls, its header says %" PRIu64 " (counts disagree)",
                              r->nulls_seen, r->page_nulls);
            r->page_v2 = false;
            if (r->rows_left == 0) {
                r->in_group = false;
                r->g++;
                continue;
            }
            if ((st = load_page(r, err)) != LT_OK) return st;
            continue;
        }
        if (r->rows_left == 0)
            return damage(r, err, "the pages hold more values than the row group's %" PRIu64 " rows",
                          r->groups[r->g].rows);
        uint32_t def = 1;
        if (r->has_def) {
            if (!rle_next(&r->def, &def)) return damage(r, err, "the definition levels end early or are corrupt");
            if (def > 1) return damage(r, err, "definition level %" PRIu32 " over the column's maximum 1", def);
        }
        r->page_left--;
        r->rows_left--;
        v->row = r->row++;
        v->row_group = r->g;
        v->page_offset = r->page_off;
        if (def == 0) {
            v->is_null = true;
            r->nulls_seen++;
        } else if (r->page_dict) {
            uint32_t i;
            if (!rle_next(&r->idx, &i)) return damage(r, err, "the dictionary indices end early or are corrupt");
            if (i >= r->dict_n)
                return damage(r, err,
                              "dictionary index %" PRIu32 " out of range (the dictionary has %" PRIu32 " values)", i,
                              r->dict_n);
            v->bytes = r->dict[i].p;
            v->len = r->dict[i].n;
        } else if (!plain_next(&r->vp, r->ve, &v->bytes, &v->len)) {
            return damage(r, err, "the page's values end early or are corrupt (row %" PRIu64 ")", v->row + 1);
        }
        *eof = false;
        return LT_OK;
    }
    return LT_OK;
}
