/*
 * tests/fuzz/fuzz_safetensors.c — libFuzzer target for the safetensors reader and writer
 * (train/io/safetensors.h).
 *
 * The input is a whole safetensors file, parsed from memory with lt_safetensors_parse.
 * What is checked (abort() on a violation):
 *   - no crash, leak, UB or exit; the status is LT_OK or LT_ERR_INPUT; an error names the
 *     buffer (WHERE), says what (WHAT) and leaves the object empty;
 *   - an accepted file is what train/io/safetensors.h promises, re-checked here independently:
 *     the 8-byte length fits the file, every tensor's dtype is F32/F16/BF16, its byte range
 *     lies in the data area and has product(shape) * dtype size bytes, the tensors ordered
 *     by offset tile the data area exactly, names are unique NUL-terminated strings that
 *     lt_safetensors_find finds, metadata keys are found by lt_safetensors_meta;
 *   - conversion: lt_safetensors_to_f32 of an F32 tensor is its little-endian bytes, of a
 *     BF16 tensor the bits shifted up, of an F16 tensor a float with the same sign and an
 *     exactly representable value;
 *   - round trip: the accepted tensors, widened to fp32, written with lt_safetensors_write
 *     (to a private temporary directory, tmpfs when there is one) read back with the same
 *     names, order, shapes, metadata and bit-identical values.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/files.h"
#include "train/io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_safetensors: property violated: %s\n", what);
    if (detail) fprintf(stderr, "  %s\n", detail);
    abort();
}

static char dir[256];

static const char *tmpdir(void) {
    if (dir[0]) return dir;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    snprintf(dir, sizeof dir, "%s/lt-fuzz-safetensors-XXXXXX", base);
    if (!mkdtemp(dir)) fail("cannot create a temporary directory", dir);
    return dir;
}

static unsigned esize(lt_safetensors_dtype d) { return d == LT_SAFETENSORS_F32 ? 4 : 2; }

static int by_begin(const void *a, const void *b) {
    const lt_safetensors_tensor *const *x = a, *const *y = b;
    if ((*x)->begin != (*y)->begin) return (*x)->begin < (*y)->begin ? -1 : 1;
    return (*x)->end < (*y)->end ? -1 : (*x)->end > (*y)->end;
}

static void check_accepted(const lt_safetensors *st, const uint8_t *data, size_t size) {
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | data[i];
    if (size < 8 || hlen > size - 8) fail("accepted a header length beyond the file", NULL);
    uint64_t data_len = size - 8 - hlen;
    const uint8_t *area = data + 8 + hlen;
    const lt_safetensors_tensor **order = malloc((st->n_tensors + 1) * sizeof *order);
    if (!order) abort();
    for (size_t i = 0; i < st->n_tensors; i++) {
        const lt_safetensors_tensor *t = &st->tensors[i];
        if (t->dtype != LT_SAFETENSORS_F32 && t->dtype != LT_SAFETENSORS_F16 && t->dtype != LT_SAFETENSORS_BF16)
            fail("accepted an unsupported dtype", t->name);
        if (t->ndim < 0 || t->ndim > LT_SAFETENSORS_MAX_DIMS) fail("bad ndim", t->name);
        uint64_t count = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0) fail("negative dimension accepted", t->name);
            count *= (uint64_t)t->shape[d]; /* cannot overflow: the byte size fits the data area */
        }
        if (count != t->n_elems) fail("n_elems is not the product of the shape", t->name);
        if (t->begin > t->end || t->end > data_len) fail("byte range outside the data area", t->name);
        if (t->end - t->begin != count * esize(t->dtype)) fail("byte size != product(shape) * dtype size", t->name);
        if (t->data != area + t->begin) fail("data pointer is not area + begin", t->name);
        (void)strlen(t->name);
        if (lt_safetensors_find(st, t->name) != t) fail("find does not return the tensor of that name", t->name);
        order[i] = t;
    }
    qsort(order, st->n_tensors, sizeof *order, by_begin);
    uint64_t at = 0;
    for (size_t i = 0; i < st->n_tensors; i++) {
        if (order[i]->begin != at) fail("tensors do not tile the data area (overlap or gap)", order[i]->name);
        at = order[i]->end;
    }
    if (at != data_len) fail("the data area is longer than the tensors", NULL);
    free(order);
    for (size_t i = 0; i < st->n_meta; i++) {
        const char *v = lt_safetensors_meta(st, st->meta_keys[i]);
        if (!v) fail("metadata key not found", st->meta_keys[i]);
    }
}

/* Widen every tensor; check the conversions; returns the fp32 copies (one malloc each). */
static float **widen(const lt_safetensors *st) {
    float **out = calloc(st->n_tensors + 1, sizeof *out);
    if (!out) abort();
    for (size_t i = 0; i < st->n_tensors; i++) {
        const lt_safetensors_tensor *t = &st->tensors[i];
        out[i] = malloc((size_t)t->n_elems * sizeof(float) + 1);
        if (!out[i]) abort();
        lt_safetensors_to_f32(t, out[i]);
        for (uint64_t k = 0; k < t->n_elems; k++) {
            uint32_t bits;
            memcpy(&bits, &out[i][k], 4);
            if (t->dtype == LT_SAFETENSORS_F32) {
                const uint8_t *p = t->data + 4 * k;
                uint32_t le = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
                if (bits != le) fail("F32 conversion is not the little-endian bytes", t->name);
            } else {
                const uint8_t *p = t->data + 2 * k;
                uint16_t h = (uint16_t)(p[0] | p[1] << 8);
                if (t->dtype == LT_SAFETENSORS_BF16 && bits != (uint32_t)h << 16)
                    fail("BF16 conversion is not the bits shifted up", t->name);
                if (t->dtype == LT_SAFETENSORS_F16) {
                    if ((bits >> 31) != (uint32_t)(h >> 15)) fail("F16 conversion lost the sign", t->name);
                    if ((bits & 0x1fffu) != 0 && (bits & 0x7f800000u) != 0x7f800000u)
                        fail("F16 conversion has more mantissa bits than a half", t->name);
                }
            }
        }
    }
    return out;
}

static void roundtrip(const lt_safetensors *st, float **vals) {
    size_t n = st->n_tensors;
    lt_safetensors_out *outs = calloc(n + 1, sizeof *outs);
    const char **meta = calloc(2 * st->n_meta + 1, sizeof *meta);
    if (!outs || !meta) abort();
    for (size_t i = 0; i < n; i++) {
        outs[i].name = st->tensors[i].name;
        outs[i].ndim = st->tensors[i].ndim;
        memcpy(outs[i].shape, st->tensors[i].shape, sizeof outs[i].shape);
        outs[i].data = vals[i];
    }
    /* metadata: the reader keeps duplicates' order; write each key once (the last value) */
    size_t nm = 0;
    for (size_t i = 0; i < st->n_meta; i++) {
        bool later = false;
        for (size_t k = i + 1; k < st->n_meta; k++) later |= strcmp(st->meta_keys[i], st->meta_keys[k]) == 0;
        if (later) continue;
        meta[2 * nm] = st->meta_keys[i];
        meta[2 * nm + 1] = st->meta_values[i];
        nm++;
    }
    char path[320];
    snprintf(path, sizeof path, "%s/rt.safetensors", tmpdir());
    lt_error err;
    if (lt_safetensors_write(path, outs, n, meta, nm, &err) != LT_OK) fail("writing the accepted tensors failed", err.what);
    lt_safetensors back;
    if (lt_safetensors_open(&back, path, &err) != LT_OK) fail("the writer's file is refused", err.what);
    if (back.n_tensors != n) fail("round trip changed the tensor count", NULL);
    for (size_t i = 0; i < n; i++) {
        const lt_safetensors_tensor *t = &back.tensors[i];
        if (strcmp(t->name, outs[i].name) != 0) fail("round trip changed a name or the order", t->name);
        if (t->dtype != LT_SAFETENSORS_F32 || t->ndim != outs[i].ndim ||
            memcmp(t->shape, outs[i].shape, sizeof t->shape) != 0)
            fail("round trip changed a dtype or shape", t->name);
        float *again = malloc((size_t)t->n_elems * sizeof(float) + 1);
        if (!again) abort();
        lt_safetensors_to_f32(t, again);
        if (memcmp(again, vals[i], (size_t)t->n_elems * sizeof(float)) != 0) fail("round trip changed values", t->name);
        free(again);
    }
    for (size_t i = 0; i < nm; i++) {
        const char *v = lt_safetensors_meta(&back, meta[2 * i]);
        /* values with a NUL are cut there by the C-string writer */
        if (!v || strcmp(v, meta[2 * i + 1]) != 0) fail("round trip changed metadata", meta[2 * i]);
    }
    lt_safetensors_close(&back);
    unlink(path);
    free(outs);
    free(meta);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    lt_safetensors st;
    lt_error err;
    memset(&err, 0, sizeof err);
    lt_status s = lt_safetensors_parse(&st, data, size, "fuzz.safetensors", &err);
    if (s != LT_OK) {
        if (s != LT_ERR_INPUT) fail("status is neither LT_OK nor LT_ERR_INPUT", err.what);
        if (err.status != s) fail("err.status differs from the returned status", NULL);
        if (strcmp(err.where, "fuzz.safetensors") != 0) fail("error WHERE is not the buffer's name", err.where);
        if (err.what[0] == '\0') fail("error without WHAT", NULL);
        if (st.n_tensors || st.tensors || st.doc) fail("a failed parse left state behind", NULL);
        return 0;
    }
    check_accepted(&st, data, size);
    float **vals = widen(&st);
    roundtrip(&st, vals);
    for (size_t i = 0; i < st.n_tensors; i++) free(vals[i]);
    free(vals);
    lt_safetensors_close(&st);
    return 0;
}
