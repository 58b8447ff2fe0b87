/*
 * train/io/safetensors.h — reader and writer of the safetensors format (Hugging Face,
 * https://github.com/huggingface/safetensors), the weights file of a Hugging Face model
 * directory (train/io/hf.h builds on it).
 *
 * Format: an 8-byte little-endian unsigned header length N, N bytes of UTF-8 JSON, then the
 * data area. The JSON is one object: each member but "__metadata__" describes a tensor
 *     "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}
 * with [BEGIN, END) a byte range of the data area (little-endian elements, row-major);
 * "__metadata__" (optional) is an object of string values.
 *
 * The reader checks everything and accepts exactly what the reference implementation's
 * Metadata::validate accepts, with the dtypes this trainer can use (a file it accepts loads
 * with the `safetensors` package):
 *   - 8 <= file size; N <= file size - 8 and N <= LT_SAFETENSORS_MAX_HEADER (100 MB);
 *   - the header is valid UTF-8 and one JSON object (lib/json.h) starting with '{'; tensor
 *     names are unique and free of NUL characters; every entry is an object with one string
 *     "dtype", one "shape" array of at most LT_SAFETENSORS_MAX_DIMS non-negative integers
 *     and one "data_offsets" array of two integers 0 <= BEGIN <= END (integers written as
 *     plain digits: "2", not "2.0" or "2e0"); other members of an entry are ignored (as the
 *     reference does); "__metadata__" appears at most once and
 *     is an object of string values with NUL-free keys;
 *   - dtype F32, F16 or BF16 (any other is refused by name: I64, F64, F8_E4M3, ...);
 *   - END - BEGIN == product(shape) * dtype size, computed without overflow;
 *   - the tensors, ordered by offset, tile the data area: no overlap, no gap, and the last
 *     ends where the file ends.
 * Every violation is LT_ERR_INPUT whose WHAT names the tensor and the rule, WHERE the file
 * (or the caller's name for a memory buffer). LT_ERR_NOMEM when memory runs out.
 *
 * The writer takes tensors as (name, shape, const float *data), writes F32 in the given
 * order, the JSON compact with "__metadata__" first (string pairs), padded with spaces to
 * a multiple of 8 bytes as the reference does, through a temporary file renamed into
 * place (lib/files.h).
 *
 * Ownership: lt_safetensors_parse borrows the caller's buffer (it must outlive the
 * object); lt_safetensors_open maps the file (or reads it) and owns the mapping. Tensor
 * names, shapes and metadata belong to the object until lt_safetensors_close.
 * Thread-safety: an opened object is read-only and may be read from several threads.
 */
#ifndef LT_TRAIN_SAFETENSORS_H
#define LT_TRAIN_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h" /* lt_status, lt_error */
#include "lib/json.h"  /* lt_jv (the parsed header) */

#define LT_SAFETENSORS_MAX_HEADER (100u * 1000u * 1000u) /* bytes; the reference's limit */
#define LT_SAFETENSORS_MAX_DIMS 16

typedef enum lt_safetensors_dtype {
    LT_SAFETENSORS_F32,
    LT_SAFETENSORS_F16,
    LT_SAFETENSORS_BF16,
} lt_safetensors_dtype;

/* One tensor of a file. */
typedef struct lt_safetensors_tensor {
    const char *name;           /* NUL-terminated (owned by the file object) */
    lt_safetensors_dtype dtype;
    int ndim;                   /* 0 for a scalar */
    int64_t shape[LT_SAFETENSORS_MAX_DIMS];
    uint64_t n_elems;           /* product of the shape (1 for a scalar) */
    uint64_t begin, end;        /* byte range in the data area */
    const uint8_t *data;        /* the tensor's first byte (no alignment guaranteed) */
} lt_safetensors_tensor;

typedef struct lt_safetensors {
    size_t n_tensors;
    lt_safetensors_tensor *tensors; /* in header order */
    size_t n_meta;
    const char **meta_keys, **meta_values; /* __metadata__, in header order */
    /* private */
    lt_jv *doc;               /* the parsed header, owner of names and metadata */
    const uint8_t *bytes;     /* the whole file */
    size_t size;
    void *owned;              /* mapping or buffer of an opened file, else NULL */
    bool mapped;
    char *where;              /* the name used in errors */
} lt_safetensors;

/* Parse a whole safetensors file held in memory (borrowed). `where` names it in errors
 * (NULL: "<memory>"). On error the object is zeroed and holds nothing. */
lt_status lt_safetensors_parse(lt_safetensors *st, const void *bytes, size_t size, const char *where,
                               lt_error *err);

/* Open and parse the file at `path` (memory-mapped, read whole when mapping fails).
 * Errors: LT_ERR_IO (cannot open/read), as lt_safetensors_parse. */
lt_status lt_safetensors_open(lt_safetensors *st, const char *path, lt_error *err);

/* Release everything; NULL-safe, idempotent (the object is zeroed). */
void lt_safetensors_close(lt_safetensors *st);

/* The tensor called `name`, or NULL. */
const lt_safetensors_tensor *lt_safetensors_find(const lt_safetensors *st, const char *name);

/* The value of __metadata__ key `key` (the last one when the JSON repeats it), or NULL. */
const char *lt_safetensors_meta(const lt_safetensors *st, const char *key);

/* "F32", "F16", "BF16". */
const char *lt_safetensors_dtype_name(lt_safetensors_dtype d);

/* Copy tensor t into out[0..t->n_elems) as fp32 (F16 and BF16 widened exactly). */
void lt_safetensors_to_f32(const lt_safetensors_tensor *t, float *out);

/* IEEE half bits -> float (exact; bfloat16's is lt_bf16_to_f32, lib/bf16.h). */
float lt_f16_to_f32(uint16_t h);

/* A tensor to write: `ndim` dims in `shape`, row-major fp32 `data` of product(shape) floats. */
typedef struct lt_safetensors_out {
    const char *name;
    int ndim;
    int64_t shape[LT_SAFETENSORS_MAX_DIMS];
    const float *data;
} lt_safetensors_out;

/* Write `n` tensors (F32, this order) and `n_meta` metadata pairs (meta[2i] = key,
 * meta[2i+1] = value; may be NULL when n_meta is 0) to `path` atomically.
 * Errors: LT_ERR_IO naming the path; LT_ERR_INTERNAL for a duplicate or empty-dims misuse. */
lt_status lt_safetensors_write(const char *path, const lt_safetensors_out *tensors, size_t n,
                               const char *const *meta, size_t n_meta, lt_error *err);

#endif /* LT_TRAIN_SAFETENSORS_H */
