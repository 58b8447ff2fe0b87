/*
 * train/io/safetensors.c — safetensors reader (every field bound-checked) and writer
 * (train/io/safetensors.h).
 *
 * The rules follow the reference implementation (safetensors/src/tensor.rs:
 * SafeTensors::read_metadata and Metadata::validate): header length bounded by the file
 * and by 100 MB, the header one JSON object, tensors sorted by their offsets must start
 * where the previous one ended, their byte size must be product(shape) * dtype size, and
 * the last must end at the end of the file.
 */
#include "train/io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/bf16.h"  /* lt_bf16_to_f32: BF16 tensors widened */
#include "lib/bytes.h" /* lt_get_le16, lt_get_le64, lt_put_le64, lt_get_le_floats, lt_put_le_floats */
#include "lib/files.h" /* lt_atomic_open, lt_atomic_commit, lt_atomic_abort */

#define METADATA_KEY "__metadata__"

static const struct {
    const char *name;
    lt_safetensors_dtype dtype;
    unsigned size;
} dtypes[] = {
    {"F32", LT_SAFETENSORS_F32, 4},
    {"F16", LT_SAFETENSORS_F16, 2},
    {"BF16", LT_SAFETENSORS_BF16, 2},
};

/* Every dtype of the format, to tell "valid but unsupported" from "unknown". */
static const char *const known_dtypes[] = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16", "U16",
                                           "F16",  "BF16", "I32", "U32",     "F32",     "F64",     "I64", "U64",
                                           "F4",   "F6_E2M3", "F6_E3M2", "C64"};

const char *lt_safetensors_dtype_name(lt_safetensors_dtype d) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dtype == d) return dtypes[i].name;
    return "?";
}

static unsigned dtype_size(lt_safetensors_dtype d) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dtype == d) return dtypes[i].size;
    return 0;
}

/* ------------------------------------------------------------------ conversion */

float lt_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
    if (exp == 0x1f) { /* Inf / NaN (payload kept) */
        u = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) { /* normal: rebias 15 -> 127 */
        u = sign | ((exp + 112u) << 23) | (mant << 13);
    } else if (mant == 0) { /* +-0 */
        u = sign;
    } else { /* subnormal: normalize */
        int e = -1;
        do {
            e++;
            mant <<= 1;
        } while ((mant & 0x400u) == 0);
        u = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void lt_safetensors_to_f32(const lt_safetensors_tensor *t, float *out) {
    const uint8_t *p = t->data;
    size_t n = (size_t)t->n_elems;
    switch (t->dtype) {
    case LT_SAFETENSORS_F32:
        lt_get_le_floats(out, p, n);
        break;
    case LT_SAFETENSORS_F16:
        for (size_t i = 0; i < n; i++) out[i] = lt_f16_to_f32(lt_get_le16(p + 2 * i));
        break;
    case LT_SAFETENSORS_BF16:
        for (size_t i = 0; i < n; i++) out[i] = lt_bf16_to_f32(lt_get_le16(p + 2 * i));
        break;
    }
}

/* ------------------------------------------------------------------ reader */

void lt_safetensors_close(lt_safetensors *st) {
    if (!st) return;
    free(st->tensors);
    free(st->meta_keys);
    free(st->meta_values);
    lt_jv_free(st->doc);
    if (st->owned) {
        if (st->mapped) munmap(st->owned, st->size);
        else free(st->owned);
    }
    free(st->where);
    memset(st, 0, sizeof *st);
}

/* Printable form of a (possibly long) name for messages. */
#define NAME_FMT "'%.200s'"

static lt_status bad(lt_safetensors *st, lt_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static lt_status bad(lt_safetensors *st, lt_error *err, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    lt_fail(err, LT_ERR_INPUT, st->where, "%s", what);
    lt_error_hint(err, "not a valid safetensors file (https://github.com/huggingface/safetensors#format); was it "
                       "cut short or written by something else?");
    return LT_ERR_INPUT;
}

/* A JSON number written as a plain non-negative integer ("12", not "12.0", "1.2e1" or "-0":
 * the reference reads these fields as usize) that fits int64. */
static bool plain_uint(const lt_jv *v, int64_t *out) {
    if (v->type != LT_JV_NUMBER || v->len == 0 || strspn(v->text, "0123456789") != v->len) return false;
    return lt_jv_int64(v, out);
}

/* One tensor entry: `v` is the value of member `name`. */
static lt_status parse_entry(lt_safetensors *st, const char *name, const lt_jv *v, uint64_t data_len,
                             lt_safetensors_tensor *t, lt_error *err) {
    if (v->type != LT_JV_OBJECT)
        return bad(st, err, "tensor " NAME_FMT " is described by %s, expected an object", name,
                   lt_jv_type_name(v->type));
    static const char *const fields[] = {"dtype", "shape", "data_offsets"};
    for (size_t f = 0; f < 3; f++) {
        size_t seen = 0;
        for (size_t k = 0; k < v->n; k++) seen += strcmp(v->keys[k], fields[f]) == 0;
        if (seen > 1) return bad(st, err, "tensor " NAME_FMT " has \"%s\" %zu times", name, fields[f], seen);
    }
    const lt_jv *dt = lt_jv_get(v, "dtype"), *sh = lt_jv_get(v, "shape"), *off = lt_jv_get(v, "data_offsets");
    if (!dt || !sh || !off)
        return bad(st, err, "tensor " NAME_FMT " has no \"%s\"", name, !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    if (dt->type != LT_JV_STRING)
        return bad(st, err, "tensor " NAME_FMT ": \"dtype\" is %s, expected a string", name, lt_jv_type_name(dt->type));
    t->name = name;
    bool found = false;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        if (strcmp(dt->text, dtypes[i].name) == 0 && dt->len == strlen(dtypes[i].name)) {
            t->dtype = dtypes[i].dtype;
            found = true;
        }
    }
    if (!found) {
        bool known = false;
        for (size_t i = 0; i < sizeof known_dtypes / sizeof known_dtypes[0]; i++)
            if (strcmp(dt->text, known_dtypes[i]) == 0) known = true;
        lt_fail(err, LT_ERR_INPUT, st->where, "tensor " NAME_FMT " has dtype '%.40s', %s", name, dt->text,
                known ? "which the trainer does not read" : "which is not a safetensors dtype");
        lt_error_hint(err, "the trainer reads F32, F16 and BF16 tensors; convert the model (e.g. "
                           "model.to(torch.float32).save_pretrained(DIR))");
        return LT_ERR_INPUT;
    }
    if (sh->type != LT_JV_ARRAY)
        return bad(st, err, "tensor " NAME_FMT ": \"shape\" is %s, expected an array", name, lt_jv_type_name(sh->type));
    if (sh->n > LT_SAFETENSORS_MAX_DIMS)
        return bad(st, err, "tensor " NAME_FMT " has %zu dimensions, at most %d are supported", name, sh->n,
                   LT_SAFETENSORS_MAX_DIMS);
    t->ndim = (int)sh->n;
    uint64_t count = 1;
    bool overflow = false;
    for (size_t i = 0; i < sh->n; i++) {
        int64_t d;
        if (!plain_uint(&sh->items[i], &d))
            return bad(st, err, "tensor " NAME_FMT ": shape[%zu] is not a non-negative integer", name, i);
        t->shape[i] = d;
        if (d != 0 && count > UINT64_MAX / (uint64_t)d) overflow = true;
        else count *= (uint64_t)d;
    }
    /* a zero dimension makes the product 0 whatever overflowed before it */
    for (size_t i = 0; i < sh->n; i++) {
        if (t->shape[i] == 0) {
            overflow = false;
            count = 0;
        }
    }
    unsigned esz = dtype_size(t->dtype);
    if (overflow || count > UINT64_MAX / esz)
        return bad(st, err, "tensor " NAME_FMT ": the product of its shape overflows 64 bits", name);
    t->n_elems = count;
    if (off->type != LT_JV_ARRAY || off->n != 2)
        return bad(st, err, "tensor " NAME_FMT ": \"data_offsets\" must be an array [BEGIN, END]", name);
    int64_t b, e;
    if (!plain_uint(&off->items[0], &b) || !plain_uint(&off->items[1], &e))
        return bad(st, err, "tensor " NAME_FMT ": \"data_offsets\" must be two non-negative integers", name);
    if (e < b) return bad(st, err, "tensor " NAME_FMT ": data_offsets [%" PRId64 ", %" PRId64 "] end before they begin",
                          name, b, e);
    if ((uint64_t)e > data_len)
        return bad(st, err,
                   "tensor " NAME_FMT ": data_offsets [%" PRId64 ", %" PRId64 "] reach past the data area (%" PRIu64
                   " bytes)", name, b, e, data_len);
    t->begin = (uint64_t)b;
    t->end = (uint64_t)e;
    if (t->end - t->begin != count * esz)
        return bad(st, err,
                   "tensor " NAME_FMT ": %" PRIu64 " bytes at data_offsets, its shape and dtype %s make %" PRIu64, name,
                   t->end - t->begin, lt_safetensors_dtype_name(t->dtype), count * esz);
    return LT_OK;
}

static int by_name(const void *a, const void *b) {
    const lt_safetensors_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static int by_offset(const void *a, const void *b) {
    const lt_safetensors_tensor *const *x = a, *const *y = b;
    if ((*x)->begin != (*y)->begin) return (*x)->begin < (*y)->begin ? -1 : 1;
    if ((*x)->end != (*y)->end) return (*x)->end < (*y)->end ? -1 : 1;
    return strcmp((*x)->name, (*y)->name);
}

/* Names unique, tensors tiling [0, data_len). */
static lt_status check_layout(lt_safetensors *st, uint64_t data_len, lt_error *err) {
    size_t n = st->n_tensors;
    if (n == 0) {
        if (data_len != 0)
            return bad(st, err, "the file has no tensors but %" PRIu64 " bytes after the header", data_len);
        return LT_OK;
    }
    const lt_safetensors_tensor **order = malloc(n * sizeof *order);
    if (!order) return lt_fail(err, LT_ERR_NOMEM, st->where, "out of memory");
    for (size_t i = 0; i < n; i++) order[i] = &st->tensors[i];
    lt_status rc = LT_OK;
    qsort(order, n, sizeof *order, by_name);
    for (size_t i = 1; i < n && rc == LT_OK; i++)
        if (strcmp(order[i - 1]->name, order[i]->name) == 0)
            rc = bad(st, err, "tensor " NAME_FMT " is described twice in the header", order[i]->name);
    if (rc == LT_OK) {
        qsort(order, n, sizeof *order, by_offset);
        uint64_t at = 0;
        for (size_t i = 0; i < n && rc == LT_OK; i++) {
            const lt_safetensors_tensor *t = order[i];
            if (t->begin < at)
                rc = bad(st, err, "tensor " NAME_FMT " [%" PRIu64 ", %" PRIu64 ") overlaps tensor " NAME_FMT
                         " (which ends at %" PRIu64 ")", t->name, t->begin, t->end, order[i - 1]->name, at);
            else if (t->begin > at)
                rc = bad(st, err, "a gap of %" PRIu64 " bytes in the data area before tensor " NAME_FMT
                         " (data_offsets begin at %" PRIu64 ")", t->begin - at, t->name, t->begin);
            at = t->end;
        }
        if (rc == LT_OK && at != data_len)
            rc = bad(st, err, "the tensors end at byte %" PRIu64 " of the data area, the file has %" PRIu64
                     " (%" PRIu64 " bytes unaccounted for)", at, data_len, data_len - at);
    }
    free(order);
    return rc;
}

static lt_status parse_header(lt_safetensors *st, lt_error *err) {
    if (st->size < 8)
        return bad(st, err, "the file has %zu bytes, too short for the 8-byte header length", st->size);
    uint64_t n = lt_get_le64(st->bytes);
    if (n > st->size - 8)
        return bad(st, err, "the header length %" PRIu64 " reaches past the end of the file (%zu bytes)", n, st->size);
    if (n > LT_SAFETENSORS_MAX_HEADER)
        return bad(st, err, "the header length %" PRIu64 " is above the limit of %u bytes", n,
                   LT_SAFETENSORS_MAX_HEADER);
    const char *text = (const char *)st->bytes + 8;
    if (!lt_utf8_valid(text, (size_t)n)) return bad(st, err, "the header is not valid UTF-8");
    if (n == 0 || text[0] != '{') /* the reference insists on an object first thing */
        return bad(st, err, "the header does not start with '{': not a JSON object");
    lt_error jerr;
    lt_status s = lt_json_parse(text, (size_t)n, &st->doc, &jerr);
    if (s == LT_ERR_NOMEM) return lt_fail(err, LT_ERR_NOMEM, st->where, "out of memory parsing the header");
    if (s != LT_OK) return bad(st, err, "the header is not valid JSON: %s at %s", jerr.what, jerr.where);
    const lt_jv *doc = st->doc;
    if (doc->type != LT_JV_OBJECT)
        return bad(st, err, "the header is %s, expected a JSON object", lt_jv_type_name(doc->type));
    uint64_t data_len = (uint64_t)st->size - 8 - n;
    const uint8_t *data = st->bytes + 8 + n;

    size_t n_meta_entries = 0;
    for (size_t i = 0; i < doc->n; i++)
        if (strcmp(doc->keys[i], METADATA_KEY) == 0 && doc->key_lens[i] == strlen(METADATA_KEY)) n_meta_entries++;
    if (n_meta_entries > 1) return bad(st, err, "\"" METADATA_KEY "\" appears %zu times in the header", n_meta_entries);
    size_t nt = doc->n - n_meta_entries;
    st->tensors = calloc(nt ? nt : 1, sizeof *st->tensors);
    if (!st->tensors) return lt_fail(err, LT_ERR_NOMEM, st->where, "out of memory");
    for (size_t i = 0; i < doc->n; i++) {
        const char *name = doc->keys[i];
        if (doc->key_lens[i] != strlen(name))
            return bad(st, err, "a tensor name contains a NUL character (" NAME_FMT "...)", name);
        const lt_jv *v = &doc->items[i];
        if (strcmp(name, METADATA_KEY) == 0) {
            if (v->type != LT_JV_OBJECT)
                return bad(st, err, "\"" METADATA_KEY "\" is %s, expected an object of strings",
                           lt_jv_type_name(v->type));
            st->meta_keys = calloc(v->n ? v->n : 1, sizeof *st->meta_keys);
            st->meta_values = calloc(v->n ? v->n : 1, sizeof *st->meta_values);
            if (!st->meta_keys || !st->meta_values) return lt_fail(err, LT_ERR_NOMEM, st->where, "out of memory");
            for (size_t k = 0; k < v->n; k++) {
                if (v->key_lens[k] != strlen(v->keys[k]))
                    return bad(st, err, "a \"" METADATA_KEY "\" key contains a NUL character (" NAME_FMT "...)",
                               v->keys[k]);
                if (v->items[k].type != LT_JV_STRING)
                    return bad(st, err, "\"" METADATA_KEY "\" member " NAME_FMT " is %s, expected a string",
                               v->keys[k], lt_jv_type_name(v->items[k].type));
                st->meta_keys[k] = v->keys[k];
                st->meta_values[k] = v->items[k].text;
            }
            st->n_meta = v->n;
            continue;
        }
        lt_safetensors_tensor *t = &st->tensors[st->n_tensors];
        lt_status ps = parse_entry(st, name, v, data_len, t, err);
        if (ps != LT_OK) return ps;
        t->data = data + t->begin;
        st->n_tensors++;
    }
    return check_layout(st, data_len, err);
}

lt_status lt_safetensors_parse(lt_safetensors *st, const void *bytes, size_t size, const char *where,
                               lt_error *err) {
    memset(st, 0, sizeof *st);
    st->where = strdup(where ? where : "<memory>");
    if (!st->where) return lt_fail(err, LT_ERR_NOMEM, where, "out of memory");
    st->bytes = bytes;
    st->size = size;
    lt_status s = parse_header(st, err);
    if (s != LT_OK) lt_safetensors_close(st);
    return s;
}

lt_status lt_safetensors_open(lt_safetensors *st, const char *path, lt_error *err) {
    memset(st, 0, sizeof *st);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return lt_fail(err, LT_ERR_IO, path, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int e = errno;
        close(fd);
        return lt_fail(err, LT_ERR_IO, path, "not a regular file%s%s", e ? ": " : "", e ? strerror(e) : "");
    }
    size_t size = (size_t)sb.st_size;
    void *buf = NULL;
    bool mapped = false;
    if (size > 0) {
        buf = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (buf != MAP_FAILED) {
            mapped = true;
        } else { /* e.g. a file system without mmap: read it */
            buf = malloc(size);
            if (!buf) {
                close(fd);
                return lt_fail(err, LT_ERR_NOMEM, path, "out of memory for a %zu-byte file", size);
            }
            size_t got = 0;
            while (got < size) {
                ssize_t r = read(fd, (char *)buf + got, size - got);
                if (r < 0 && errno == EINTR) continue;
                if (r <= 0) {
                    int e = errno;
                    free(buf);
                    close(fd);
                    return lt_fail(err, LT_ERR_IO, path, "cannot read: %s", r < 0 ? strerror(e) : "file shrank");
                }
                got += (size_t)r;
            }
        }
    }
    close(fd);
    lt_status s = lt_safetensors_parse(st, buf, size, path, err);
    if (s != LT_OK) {
        if (mapped) munmap(buf, size);
        else free(buf);
        return s;
    }
    st->owned = buf;
    st->mapped = mapped;
    return LT_OK;
}

const lt_safetensors_tensor *lt_safetensors_find(const lt_safetensors *st, const char *name) {
    for (size_t i = 0; i < st->n_tensors; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

const char *lt_safetensors_meta(const lt_safetensors *st, const char *key) {
    for (size_t i = st->n_meta; i-- > 0;) /* the last of duplicates, as a JSON map reads them */
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

/* ------------------------------------------------------------------ writer */

static bool write_f32le(FILE *f, const float *x, size_t n) {
    uint8_t buf[4 * 4096];
    for (size_t i = 0; i < n; i += 4096) {
        size_t k = n - i < 4096 ? n - i : 4096;
        lt_put_le_floats(buf, x + i, k);
        if (fwrite(buf, 4, k, f) != k) return false;
    }
    return true;
}

lt_status lt_safetensors_write(const char *path, const lt_safetensors_out *tensors, size_t n,
                               const char *const *meta, size_t n_meta, lt_error *err) {
    lt_json j;
    lt_json_init(&j);
    lt_json_object_begin(&j);
    if (n_meta > 0) {
        lt_json_key(&j, METADATA_KEY);
        lt_json_object_begin(&j);
        for (size_t i = 0; i < n_meta; i++) {
            lt_json_key(&j, meta[2 * i]);
            lt_json_string(&j, meta[2 * i + 1]);
        }
        lt_json_object_end(&j);
    }
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const lt_safetensors_out *t = &tensors[i];
        if (t->ndim < 0 || t->ndim > LT_SAFETENSORS_MAX_DIMS || strcmp(t->name, METADATA_KEY) == 0) {
            lt_json_free(&j);
            return lt_fail(err, LT_ERR_INTERNAL, path, "tensor '%s': invalid name or %d dimensions", t->name, t->ndim);
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(tensors[k].name, t->name) == 0) {
                lt_json_free(&j);
                return lt_fail(err, LT_ERR_INTERNAL, path, "tensor '%s' given twice", t->name);
            }
        }
        uint64_t count = 1;
        lt_json_key(&j, t->name);
        lt_json_object_begin(&j);
        lt_json_key(&j, "dtype");
        lt_json_string(&j, "F32");
        lt_json_key(&j, "shape");
        lt_json_array_begin(&j);
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0) {
                lt_json_free(&j);
                return lt_fail(err, LT_ERR_INTERNAL, path, "tensor '%s': negative dimension", t->name);
            }
            lt_json_int(&j, t->shape[d]);
            count *= (uint64_t)t->shape[d];
        }
        lt_json_array_end(&j);
        lt_json_key(&j, "data_offsets");
        lt_json_array_begin(&j);
        lt_json_uint(&j, at);
        lt_json_uint(&j, at + 4 * count);
        lt_json_array_end(&j);
        lt_json_object_end(&j);
        at += 4 * count;
    }
    lt_json_object_end(&j);
    size_t hlen = j.len, pad = (8 - hlen % 8) % 8; /* spaces, as the reference pads */
    uint8_t lenbuf[8];
    uint64_t total = hlen + pad;
    lt_put_le64(lenbuf, total);

    lt_atomic_file af;
    lt_status s = lt_atomic_open(&af, path, err);
    if (s != LT_OK) {
        lt_json_free(&j);
        return s;
    }
    bool ok = fwrite(lenbuf, 1, 8, af.fp) == 8 && fwrite(lt_json_cstr(&j), 1, hlen, af.fp) == hlen;
    for (size_t i = 0; ok && i < pad; i++) ok = fputc(' ', af.fp) != EOF;
    for (size_t i = 0; ok && i < n; i++) {
        uint64_t count = 1;
        for (int d = 0; d < tensors[i].ndim; d++) count *= (uint64_t)tensors[i].shape[d];
        ok = write_f32le(af.fp, tensors[i].data, (size_t)count);
    }
    lt_json_free(&j);
    if (!ok) {
        int e = errno;
        lt_atomic_abort(&af);
        return lt_fail(err, LT_ERR_IO, path, "cannot write: %s", strerror(e));
    }
    return lt_atomic_commit(&af, err);
}
