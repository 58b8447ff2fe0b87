/*
 * dataprep/parquet_thrift.h — a reader of the Thrift compact protocol, the encoding of a
 * Parquet file's footer (FileMetaData) and page headers (PageHeader).
 *
 * Source: Apache Thrift, doc/specs/thrift-compact-protocol.md ("Thrift Compact protocol
 * encoding"); the structs it decodes are those of parquet-format's src/main/thrift/
 * parquet.thrift (dataprep/parquet.c).
 *
 * A cursor over bytes [p, end). Every read checks the bounds; on malformed input or input
 * that ends too soon the cursor is marked failed (and `short_input` when it ran out of
 * bytes, so a page header read in a window can be retried with a larger one), and every
 * later read returns zero. Callers check `failed` once after a struct. Lengths and element
 * counts are checked against the bytes left before anything is sized by them, and
 * lt_thrift_skip() skips any value (nested structs, lists, sets, maps) to a depth limit.
 */
#ifndef LT_DATAPREP_PARQUET_THRIFT_H
#define LT_DATAPREP_PARQUET_THRIFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Compact protocol type codes (thrift-compact-protocol.md, "Struct encoding"). */
enum {
    LT_TT_STOP = 0,
    LT_TT_TRUE = 1, /* a bool field's value is its type: 1 true, 2 false */
    LT_TT_FALSE = 2,
    LT_TT_BYTE = 3,
    LT_TT_I16 = 4,
    LT_TT_I32 = 5,
    LT_TT_I64 = 6,
    LT_TT_DOUBLE = 7,
    LT_TT_BINARY = 8,
    LT_TT_LIST = 9,
    LT_TT_SET = 10,
    LT_TT_MAP = 11,
    LT_TT_STRUCT = 12,
    LT_TT_UUID = 13,
};

#define LT_THRIFT_MAX_DEPTH 32 /* nesting skipped generically; parquet.thrift needs < 10 */

typedef struct lt_thrift {
    const uint8_t *p, *end;
    bool failed;      /* malformed, or ran out of bytes */
    bool short_input; /* it ran out of bytes (the value may be complete in more bytes) */
    const char *why;  /* what failed first (static text) */
} lt_thrift;

void lt_thrift_init(lt_thrift *t, const void *p, size_t n);

/* Next field header of the struct being read: true with *id and *type, or false at the
 * struct's STOP (or on failure). *last_id is the struct's previous field id (start at 0). */
bool lt_thrift_field(lt_thrift *t, int16_t *last_id, int16_t *id, int *type);

/* An integer field of type BYTE, I16, I32 or I64 (zigzag varint); other types fail. */
int64_t lt_thrift_int(lt_thrift *t, int type);
/* A bool field (the value is in its type). */
bool lt_thrift_bool(lt_thrift *t, int type);
/* A BINARY (string) field: *p points into the input. */
void lt_thrift_binary(lt_thrift *t, int type, const uint8_t **p, size_t *n);
/* A LIST or SET header: element type and count (count <= bytes left: every element takes
 * at least one byte). */
void lt_thrift_list(lt_thrift *t, int type, int *elem_type, uint32_t *n);
/* Skip a value of `type` (a struct field's; in_collection: a list/set/map element, where a
 * bool takes one byte). */
void lt_thrift_skip(lt_thrift *t, int type, bool in_collection);

#endif /* LT_DATAPREP_PARQUET_THRIFT_H */
