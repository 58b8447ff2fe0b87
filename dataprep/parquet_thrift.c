/*
 * dataprep/parquet_thrift.c — the Thrift compact protocol reader (see parquet_thrift.h).
 *
 * Encoding (Apache Thrift doc/specs/thrift-compact-protocol.md):
 *   - integers: i16/i32/i64 as ULEB128 varints of their zigzag form ((n << 1) ^ (n >> 63));
 *     a byte is one raw byte; a double 8 bytes little-endian;
 *   - binary/string: varint length, then the bytes;
 *   - struct: field headers until a STOP byte (0). A header byte holds the field id delta
 *     (high nibble, 1..15, from the previous field of the same struct) and the type (low
 *     nibble); a delta of 0 means the id follows as a zigzag varint i16. A bool field has
 *     no value: its type is 1 (true) or 2 (false);
 *   - list/set: a header byte with the size in the high nibble (15: the size follows as a
 *     varint) and the element type in the low nibble; elements follow (a bool as one byte);
 *   - map: varint size; when not 0, a byte with key type (high) and value type (low), then
 *     the pairs.
 */
#include "dataprep/parquet_thrift.h"

#include <string.h>

static void fail(lt_thrift *t, const char *why, bool short_input) {
    if (!t->failed) {
        t->why = why;
        t->short_input = short_input;
    }
    t->failed = true;
    t->p = t->end;
}

void lt_thrift_init(lt_thrift *t, const void *p, size_t n) {
    memset(t, 0, sizeof *t);
    t->p = p;
    t->end = t->p + n;
}

static size_t left(const lt_thrift *t) { return (size_t)(t->end - t->p); }

static uint8_t read_byte(lt_thrift *t) {
    if (t->failed) return 0;
    if (t->p >= t->end) {
        fail(t, "Thrift data ends inside a value", true);
        return 0;
    }
    return *t->p++;
}

/* ULEB128, at most 10 bytes (64 bits). */
static uint64_t read_varint(lt_thrift *t) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        uint8_t b = read_byte(t);
        if (t->failed) return 0;
        if (shift == 63 && (b & 0x7e) != 0) break; /* more than 64 bits */
        v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) return v;
    }
    fail(t, "Thrift varint longer than 64 bits", false);
    return 0;
}

static int64_t read_zigzag(lt_thrift *t) {
    uint64_t u = read_varint(t);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

bool lt_thrift_field(lt_thrift *t, int16_t *last_id, int16_t *id, int *type) {
    *id = 0;
    *type = LT_TT_STOP;
    uint8_t b = read_byte(t);
    if (t->failed || b == 0) return false;
    int ty = b & 0x0f, delta = b >> 4;
    int64_t fid;
    if (delta != 0) {
        fid = (int64_t)*last_id + delta;
    } else {
        fid = read_zigzag(t);
    }
    if (t->failed) return false;
    if (fid < INT16_MIN || fid > INT16_MAX || ty > LT_TT_UUID) {
        fail(t, ty > LT_TT_UUID ? "unknown Thrift field type" : "Thrift field id out of range", false);
        return false;
    }
    *last_id = (int16_t)fid;
    *id = (int16_t)fid;
    *type = ty;
    return true;
}

int64_t lt_thrift_int(lt_thrift *t, int type) {
    int64_t v;
    switch (type) {
    case LT_TT_BYTE: return (int8_t)read_byte(t);
    case LT_TT_I16:
        v = read_zigzag(t);
        if (v < INT16_MIN || v > INT16_MAX) fail(t, "Thrift i16 out of range", false);
        return t->failed ? 0 : v;
    case LT_TT_I32:
        v = read_zigzag(t);
        if (v < INT32_MIN || v > INT32_MAX) fail(t, "Thrift i32 out of range", false);
        return t->failed ? 0 : v;
    case LT_TT_I64: return read_zigzag(t);
    default: fail(t, "a Thrift field has the wrong type (integer expected)", false); return 0;
    }
}

bool lt_thrift_bool(lt_thrift *t, int type) {
    if (type == LT_TT_TRUE) return true;
    if (type != LT_TT_FALSE) fail(t, "a Thrift field has the wrong type (bool expected)", false);
    return false;
}

void lt_thrift_binary(lt_thrift *t, int type, const uint8_t **p, size_t *n) {
    *p = NULL;
    *n = 0;
    if (type != LT_TT_BINARY) {
        fail(t, "a Thrift field has the wrong type (binary expected)", false);
        return;
    }
    uint64_t len = read_varint(t);
    if (t->failed) return;
    if (len > left(t)) {
        fail(t, "Thrift binary longer than the data left", true);
        return;
    }
    *p = t->p;
    *n = (size_t)len;
    t->p += len;
}

void lt_thrift_list(lt_thrift *t, int type, int *elem_type, uint32_t *n) {
    *elem_type = LT_TT_STOP;
    *n = 0;
    if (type != LT_TT_LIST && type != LT_TT_SET) {
        fail(t, "a Thrift field has the wrong type (list expected)", false);
        return;
    }
    uint8_t b = read_byte(t);
    uint64_t size = b >> 4;
    if (size == 15) size = read_varint(t);
    if (t->failed) return;
    int ety = b & 0x0f;
    if (ety == LT_TT_STOP || ety > LT_TT_UUID) {
        fail(t, "unknown Thrift list element type", false);
        return;
    }
    if (size > left(t)) { /* every element takes at least one byte */
        fail(t, "Thrift list longer than the data left", true);
        return;
    }
    *elem_type = ety;
    *n = (uint32_t)size;
}

static void skip_n(lt_thrift *t, uint64_t n) {
    if (t->failed) return;
    if (n > left(t)) {
        fail(t, "Thrift data ends inside a value", true);
        return;
    }
    t->p += n;
}

static void skip_value(lt_thrift *t, int type, bool in_collection, int depth) {
    if (t->failed) return;
    if (depth > LT_THRIFT_MAX_DEPTH) {
        fail(t, "Thrift values nested too deep", false);
        return;
    }
    switch (type) {
    case LT_TT_TRUE:
    case LT_TT_FALSE:
        if (in_collection) read_byte(t);
        return;
    case LT_TT_BYTE: read_byte(t); return;
    case LT_TT_I16:
    case LT_TT_I32:
    case LT_TT_I64: read_varint(t); return;
    case LT_TT_DOUBLE: skip_n(t, 8); return;
    case LT_TT_UUID: skip_n(t, 16); return;
    case LT_TT_BINARY: skip_n(t, read_varint(t)); return;
    case LT_TT_LIST:
    case LT_TT_SET: {
        int ety;
        uint32_t n;
        lt_thrift_list(t, type, &ety, &n);
        for (uint32_t i = 0; i < n && !t->failed; i++) skip_value(t, ety, true, depth + 1);
        return;
    }
    case LT_TT_MAP: {
        uint64_t n = read_varint(t);
        if (n == 0 || t->failed) return;
        uint8_t kv = read_byte(t);
        int kt = kv >> 4, vt = kv & 0x0f;
        if (kt == LT_TT_STOP || kt > LT_TT_UUID || vt == LT_TT_STOP || vt > LT_TT_UUID) {
            fail(t, "unknown Thrift map key or value type", false);
            return;
        }
        if (n > left(t) / 2) {
            fail(t, "Thrift map longer than the data left", true);
            return;
        }
        for (uint64_t i = 0; i < n && !t->failed; i++) {
            skip_value(t, kt, true, depth + 1);
            skip_value(t, vt, true, depth + 1);
        }
        return;
    }
    case LT_TT_STRUCT: {
        int16_t last = 0, id;
        int ft;
        while (lt_thrift_field(t, &last, &id, &ft)) skip_value(t, ft, false, depth + 1);
        return;
    }
    default: fail(t, "unknown Thrift type", false); return;
    }
}

void lt_thrift_skip(lt_thrift *t, int type, bool in_collection) { skip_value(t, type, in_collection, 0); }
