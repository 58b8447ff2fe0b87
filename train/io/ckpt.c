/*
 * train/io/ckpt.c — checkpoint files: writer, checked reader, naming, latest and pruning
 * (train/io/ckpt.h has the layout).
 *
 * Floats are stored little-endian; on a little-endian host the arrays are written, read
 * and hashed in place, on a big-endian one through a converting buffer, so the file and
 * its checksums are the same everywhere.
 */
#include "train/io/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h> /* XXH64: header and payload checksums */

#include "lib/bytes.h" /* lt_put_le32, lt_get_le32, lt_put_le_floats, ...: the format's little-endian fields */
#include "lib/files.h" /* lt_atomic_open, lt_atomic_commit, lt_atomic_abort, lt_fsync_dir */

/* Header field offsets (ckpt.h). */
enum {
    OFF_MAGIC = 0,
    OFF_VERSION = 8,
    OFF_HEADER_BYTES = 12,
    OFF_NAME = 16,
    NAME_BYTES = 32,
    OFF_DIMS = 48, /* 8 x i32 */
    OFF_ROPE_THETA = 80,
    OFF_NORM_EPS = 88,
    OFF_STEP = 96,
    OFF_RNG_KEY = 104,
    OFF_RNG_CTR = 120,
    OFF_RNG_BUF = 152,
    OFF_RNG_POS = 184,
    OFF_HAS_OPT = 188,
    OFF_DATA_POS = 192,
    OFF_DATA_EPOCH = 200,
    OFF_N_PARAMS = 208,
    OFF_ADAM_T = 216,
    OFF_PARAMS_HASH = 224,
    OFF_MOMENTS_HASH = 232,
    OFF_HEADER_HASH = 248,
    /* version 2 */
    OFF_FAMILY = 256,
    OFF_ROPE_SCALING = 260,
    OFF_ROPE_FACTOR = 264,
    OFF_ROPE_LOW = 272,
    OFF_ROPE_HIGH = 280,
    OFF_ROPE_ORIG = 288,
    OFF_V2_HASH = 312,
};

/* Does the model need version 2's fields (ckpt.h)? */
static bool needs_v2(const lt_model_shape *s) {
    return s->family != LT_FAMILY_LLAMA || s->rope_scaling != LT_ROPE_NONE;
}

#define DAMAGED_HINT "the file is damaged; resume from an earlier checkpoint (train.keep_checkpoints are kept)"

/* ------------------------------------------------------------------ little-endian bytes */

static bool host_is_little_endian(void) {
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

#define CONV_FLOATS 16384

/* Feed the little-endian bytes of x[0..n) to a hash state. */
static void hash_floats(XXH64_state_t *h, const float *x, size_t n) {
    if (host_is_little_endian()) {
        XXH64_update(h, x, n * sizeof(float));
        return;
    }
    uint8_t buf[4 * CONV_FLOATS];
    for (size_t i = 0; i < n; i += CONV_FLOATS) {
        size_t k = n - i < CONV_FLOATS ? n - i : CONV_FLOATS;
        lt_put_le_floats(buf, x + i, k);
        XXH64_update(h, buf, 4 * k);
    }
}

static uint64_t hash_arrays(const float *a, const float *b, size_t n) {
    XXH64_state_t *h = XXH64_createState();
    LT_CHECK_ALLOC(h);
    XXH64_reset(h, 0);
    hash_floats(h, a, n);
    if (b) hash_floats(h, b, n);
    uint64_t d = XXH64_digest(h);
    XXH64_freeState(h);
    return d;
}

static bool write_floats(FILE *f, const float *x, size_t n) {
    if (host_is_little_endian()) return fwrite(x, sizeof(float), n, f) == n;
    uint8_t buf[4 * CONV_FLOATS];
    for (size_t i = 0; i < n; i += CONV_FLOATS) {
        size_t k = n - i < CONV_FLOATS ? n - i : CONV_FLOATS;
        lt_put_le_floats(buf, x + i, k);
        if (fwrite(buf, 4, k, f) != k) return false;
    }
    return true;
}

/* Read n little-endian floats into x (converted in place on a big-endian host). */
static bool read_floats(FILE *f, float *x, size_t n) {
    if (fread(x, sizeof(float), n, f) != n) return false;
    if (!host_is_little_endian()) {
        for (size_t i = 0; i < n; i++) {
            uint32_t u = lt_get_le32((const uint8_t *)&x[i]);
            memcpy(&x[i], &u, 4);
        }
    }
    return true;
}

/* ------------------------------------------------------------------ writer */

/* The header (h: LT_CKPT_HEADER_BYTES_V2 bytes); returns its length, 256 (version 1) or
 * 320 (version 2). */
static size_t encode_header(uint8_t h[LT_CKPT_HEADER_BYTES_V2], const lt_llama *m, const lt_adamw *opt,
                            const lt_ckpt_state *st, uint64_t params_hash, uint64_t moments_hash) {
    const lt_model_shape *s = &m->shape;
    bool v2 = needs_v2(s);
    size_t bytes = v2 ? LT_CKPT_HEADER_BYTES_V2 : LT_CKPT_HEADER_BYTES;
    memset(h, 0, LT_CKPT_HEADER_BYTES_V2);
    memcpy(h + OFF_MAGIC, LT_CKPT_MAGIC, 8);
    lt_put_le32(h + OFF_VERSION, v2 ? 2u : 1u);
    lt_put_le32(h + OFF_HEADER_BYTES, (uint32_t)bytes);
    if (s->name) {
        size_t nl = strlen(s->name);
        memcpy(h + OFF_NAME, s->name, nl < NAME_BYTES - 1 ? nl : NAME_BYTES - 1);
    }
    int32_t dims[8] = {s->layers, s->hidden, s->heads, s->kv_heads, s->ffn, s->vocab, s->tie_embeddings ? 1 : 0,
                       s->gated_ffn ? 1 : 0};
    for (int i = 0; i < 8; i++) lt_put_le32(h + OFF_DIMS + 4 * i, (uint32_t)dims[i]);
    lt_put_le_f64(h + OFF_ROPE_THETA, lt_model_rope_theta(s));
    lt_put_le_f64(h + OFF_NORM_EPS, lt_model_norm_eps(s));
    lt_put_le64(h + OFF_STEP, (uint64_t)st->step);
    for (int i = 0; i < 2; i++) lt_put_le64(h + OFF_RNG_KEY + 8 * i, st->rng.key[i]);
    for (int i = 0; i < 4; i++) lt_put_le64(h + OFF_RNG_CTR + 8 * i, st->rng.ctr[i]);
    for (int i = 0; i < 4; i++) lt_put_le64(h + OFF_RNG_BUF + 8 * i, st->rng.buf[i]);
    lt_put_le32(h + OFF_RNG_POS, (uint32_t)st->rng.pos);
    lt_put_le32(h + OFF_HAS_OPT, opt ? 1u : 0u);
    lt_put_le64(h + OFF_DATA_POS, st->data_pos);
    lt_put_le64(h + OFF_DATA_EPOCH, st->data_epoch);
    lt_put_le64(h + OFF_N_PARAMS, (uint64_t)m->n_params);
    lt_put_le64(h + OFF_ADAM_T, opt ? (uint64_t)opt->t : 0);
    lt_put_le64(h + OFF_PARAMS_HASH, params_hash);
    lt_put_le64(h + OFF_MOMENTS_HASH, moments_hash);
    lt_put_le64(h + OFF_HEADER_HASH, XXH64(h, OFF_HEADER_HASH, 0));
    if (v2) {
        lt_put_le32(h + OFF_FAMILY, (uint32_t)s->family);
        lt_put_le32(h + OFF_ROPE_SCALING, (uint32_t)s->rope_scaling);
        if (s->rope_scaling == LT_ROPE_LLAMA3) {
            lt_put_le_f64(h + OFF_ROPE_FACTOR, s->rope_factor);
            lt_put_le_f64(h + OFF_ROPE_LOW, s->rope_low_freq_factor);
            lt_put_le_f64(h + OFF_ROPE_HIGH, s->rope_high_freq_factor);
            lt_put_le32(h + OFF_ROPE_ORIG, (uint32_t)s->rope_original_max_pos);
        }
        lt_put_le64(h + OFF_V2_HASH, XXH64(h + LT_CKPT_HEADER_BYTES, OFF_V2_HASH - LT_CKPT_HEADER_BYTES, 0));
    }
    return bytes;
}

lt_status lt_ckpt_write(const char *path, const lt_llama *m, const lt_adamw *opt, const lt_ckpt_state *st,
                        lt_error *err) {
    if (opt && opt->n != m->n_params)
        return lt_fail(err, LT_ERR_INTERNAL, path, "optimizer state of %zu parameters for a model of %zu", opt->n,
                       m->n_params);
    uint8_t h[LT_CKPT_HEADER_BYTES_V2];
    uint64_t ph = hash_arrays(m->params, NULL, m->n_params);
    uint64_t mh = opt ? hash_arrays(opt->m, opt->v, opt->n) : 0;
    size_t hbytes = encode_header(h, m, opt, st, ph, mh);

    lt_atomic_file af;
    lt_status s = lt_atomic_open(&af, path, err);
    if (s != LT_OK) return s;
    bool ok = fwrite(h, 1, hbytes, af.fp) == hbytes && write_floats(af.fp, m->params, m->n_params);
    if (ok && opt) ok = write_floats(af.fp, opt->m, opt->n) && write_floats(af.fp, opt->v, opt->n);
    if (!ok) {
        int e = errno;
        lt_atomic_abort(&af);
        lt_fail(err, LT_ERR_IO, path, "cannot write the checkpoint: %s", strerror(e));
        lt_error_hint(err, "is the disk full? a checkpoint of %zu parameters takes %.1f MiB", m->n_params,
                      (double)m->n_params * 4.0 * (opt ? 3 : 1) / 1048576.0 + LT_CKPT_HEADER_BYTES / 1048576.0);
        return LT_ERR_IO;
    }
    return lt_atomic_commit(&af, err);
}

/* ------------------------------------------------------------------ reader */

typedef struct header {
    lt_ckpt_info info;
    uint64_t params_hash, moments_hash;
    uint64_t file_bytes;
} header;

/* Parameter count of a valid Llama shape (the tensor table of train/model/model.c), in 64 bits. */
static uint64_t shape_params(const lt_model_shape *s) {
    uint64_t C = (uint64_t)s->hidden, F = (uint64_t)s->ffn, V = (uint64_t)s->vocab;
    uint64_t hd = C / (uint64_t)s->heads;
    uint64_t qd = hd * (uint64_t)s->heads, kvd = hd * (uint64_t)s->kv_heads;
    uint64_t per_layer = 2 * C + qd * C + 2 * kvd * C + C * qd + 3 * F * C + (lt_model_qkv_bias(s) ? qd + 2 * kvd : 0);
    return V * C + (uint64_t)s->layers * per_layer + C + (s->tie_embeddings ? 0 : V * C);
}

/* Open `path`, read and check the header (everything but the payload). *fp_out (when
 * non-NULL) is left open just after the header. */
static lt_status read_header(const char *path, header *hd, FILE **fp_out, lt_error *err) {
    memset(hd, 0, sizeof *hd);
    if (fp_out) *fp_out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        lt_fail(err, LT_ERR_IO, path, "cannot open the checkpoint: %s", strerror(e));
        if (e == ENOENT) lt_error_hint(err, "write one with `trainer init --config FILE --out CKPT`");
        return LT_ERR_IO;
    }
    lt_status st = LT_OK;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = lt_fail(err, LT_ERR_IO, path, "not a regular file");
        goto fail;
    }
    hd->file_bytes = (uint64_t)sb.st_size;
    uint8_t h[LT_CKPT_HEADER_BYTES_V2];
    memset(h, 0, sizeof h);
    size_t got = fread(h, 1, LT_CKPT_HEADER_BYTES, f);
    if (got < 8 || memcmp(h, LT_CKPT_MAGIC, 8) != 0) {
        st = lt_fail(err, LT_ERR_INPUT, path, "not a trainer checkpoint (the file does not start with \"%s\")",
                     LT_CKPT_MAGIC);
        lt_error_hint(err, "checkpoints are written by `trainer init`, `trainer import` and `trainer train`; for a "
                           "Hugging Face model directory use `trainer import --hf DIR --out CKPT`");
        goto fail;
    }
    if (got < 16) {
        st = lt_fail(err, LT_ERR_INPUT, path, "truncated checkpoint: expected at least %d bytes, the file has %zu",
                     LT_CKPT_HEADER_BYTES, got);
        lt_error_hint(err, DAMAGED_HINT);
        goto fail;
    }
    uint32_t version = lt_get_le32(h + OFF_VERSION);
    if (version > LT_CKPT_VERSION) {
        st = lt_fail(err, LT_ERR_VERSION, path, "checkpoint version %" PRIu32 " is newer than this trainer reads (%d)",
                     version, LT_CKPT_VERSION);
        lt_error_hint(err, "read it with the longtail version that wrote it, or a newer one");
        goto fail;
    }
    uint32_t hbytes = version == 2 ? LT_CKPT_HEADER_BYTES_V2 : LT_CKPT_HEADER_BYTES;
    if (version == 0 || lt_get_le32(h + OFF_HEADER_BYTES) != hbytes) {
        st = lt_fail(err, LT_ERR_INPUT, path, "invalid checkpoint header (version %" PRIu32 ", header bytes %" PRIu32
                     ", expected version 1 with %d or 2 with %d)", version, lt_get_le32(h + OFF_HEADER_BYTES),
                     LT_CKPT_HEADER_BYTES, LT_CKPT_HEADER_BYTES_V2);
        lt_error_hint(err, DAMAGED_HINT);
        goto fail;
    }
    if (got == LT_CKPT_HEADER_BYTES && hbytes > LT_CKPT_HEADER_BYTES)
        got += fread(h + LT_CKPT_HEADER_BYTES, 1, hbytes - LT_CKPT_HEADER_BYTES, f);
    if (got < hbytes) {
        st = lt_fail(err, LT_ERR_INPUT, path,
                     "truncated checkpoint: expected at least %" PRIu32 " bytes, the file has %" PRIu64, hbytes,
                     hd->file_bytes);
        lt_error_hint(err, DAMAGED_HINT);
        goto fail;
    }
    if (lt_get_le64(h + OFF_HEADER_HASH) != XXH64(h, OFF_HEADER_HASH, 0) ||
        (version == 2 &&
         lt_get_le64(h + OFF_V2_HASH) != XXH64(h + LT_CKPT_HEADER_BYTES, OFF_V2_HASH - LT_CKPT_HEADER_BYTES, 0))) {
        st = lt_fail(err, LT_ERR_INPUT, path, "checkpoint header checksum mismatch: the header is damaged");
        lt_error_hint(err, DAMAGED_HINT);
        goto fail;
    }

    lt_ckpt_info *in = &hd->info;
    char name[NAME_BYTES + 1];
    memcpy(name, h + OFF_NAME, NAME_BYTES);
    name[NAME_BYTES] = '\0';
    lt_model_shape *s = &in->shape;
    int32_t dims[8];
    for (int i = 0; i < 8; i++) dims[i] = (int32_t)lt_get_le32(h + OFF_DIMS + 4 * i);
    s->name = lt_ckpt_model_name(name);
    s->layers = dims[0];
    s->hidden = dims[1];
    s->heads = dims[2];
    s->kv_heads = dims[3];
    s->ffn = dims[4];
    s->vocab = dims[5];
    s->tie_embeddings = dims[6];
    s->gated_ffn = dims[7];
    s->rope_theta = lt_get_le_f64(h + OFF_ROPE_THETA);
    s->norm_eps = lt_get_le_f64(h + OFF_NORM_EPS);
    if (version == 2) { /* (version 1: zeros, a Llama without RoPE scaling) */
        s->family = (int)(int32_t)lt_get_le32(h + OFF_FAMILY);
        s->rope_scaling = (int)(int32_t)lt_get_le32(h + OFF_ROPE_SCALING);
        s->rope_factor = lt_get_le_f64(h + OFF_ROPE_FACTOR);
        s->rope_low_freq_factor = lt_get_le_f64(h + OFF_ROPE_LOW);
        s->rope_high_freq_factor = lt_get_le_f64(h + OFF_ROPE_HIGH);
        s->rope_original_max_pos = (int)(int32_t)lt_get_le32(h + OFF_ROPE_ORIG);
    }
    lt_error verr;
    if (lt_model_validate(s, &verr) != LT_OK) {
        st = lt_fail(err, LT_ERR_INPUT, path, "invalid model dimensions in the checkpoint: %s", verr.what);
        lt_error_hint(err, DAMAGED_HINT);
        goto fail;
    }
    if ((dims[6] != 0 && dims[6] != 1) || dims[7] != 1 || !(isfinite(s->rope_theta) && s->rope_theta > 0) ||
        !(isfinite(s->norm_eps) && s->norm_eps > 0) || (s->hidden / s->heads) % 2 != 0) {
        st = lt_fail(err, LT_ERR_INPUT, path,
                     "invalid model in the checkpoint: tie_embeddings %d, gated_ffn %d, rope_theta %g, norm_eps %g, "
                     "head dimension %d (a Llama model has a SwiGLU MLP, positive finite rope_theta and norm_eps, "
                     "an even head dimension)", dims[6], dims[7], s->rope_theta, s->norm_eps, s->hidden / s->heads);
        lt_error_hint(err, DAMAGED_HINT);
        goto fail;
    }
    in->state.step = (int64_t)lt_get_le64(h + OFF_STEP);
    for (int i = 0; i < 2; i++) in->state.rng.key[i] = lt_get_le64(h + OFF_RNG_KEY + 8 * i);
    for (int i = 0; i < 4; i++) in->state.rng.ctr[i] = lt_get_le64(h + OFF_RNG_CTR + 8 * i);
    for (int i = 0; i < 4; i++) in->state.rng.buf[i] = lt_get_le64(h + OFF_RNG_BUF + 8 * i);
    in->state.rng.pos = (int)(int32_t)lt_get_le32(h + OFF_RNG_POS);
    in->state.data_pos = lt_get_le64(h + OFF_DATA_POS);
    in->state.data_epoch = lt_get_le64(h + OFF_DATA_EPOCH);
    uint32_t has_opt = lt_get_le32(h + OFF_HAS_OPT);
    in->n_params = lt_get_le64(h + OFF_N_PARAMS);
    in->adam_t = (int64_t)lt_get_le64(h + OFF_ADAM_T);
    hd->params_hash = lt_get_le64(h + OFF_PARAMS_HASH);
    hd->moments_hash = lt_get_le64(h + OFF_MOMENTS_HASH);
    if (in->state.step < 0 || in->adam_t < 0 || in->state.rng.pos < 0 || in->state.rng.pos > 4 || has_opt > 1) {
        st = lt_fail(err, LT_ERR_INPUT, path,
                     "invalid training state in the checkpoint: step %" PRId64 ", AdamW t %" PRId64
                     ", rng position %d, has_optimizer %" PRIu32, in->state.step, in->adam_t, in->state.rng.pos,
                     has_opt);
        lt_error_hint(err, DAMAGED_HINT);
        goto fail;
    }
    in->has_optimizer = (int)has_opt;
    /* dimensions that pass lt_model_validate can still overflow 64 bits: bound them first */
    double approx = (double)s->vocab * s->hidden * 2 +
                    (double)s->layers * ((double)s->hidden * s->hidden * 4 + 3.0 * s->ffn * s->hidden);
    if (approx > 1e15) {
        st = lt_fail(err, LT_ERR_INPUT, path, "invalid model in the checkpoint: about %.3g parameters", approx);
        lt_error_hint(err, DAMAGED_HINT);
        goto fail;
    }
    uint64_t want = shape_params(s);
    if (in->n_params != want) {
        st = lt_fail(err, LT_ERR_INPUT, path,
                     "the checkpoint says %" PRIu64 " parameters, its model dimensions make %" PRIu64, in->n_params,
                     want);
        lt_error_hint(err, DAMAGED_HINT);
        goto fail;
    }
    /* 64-bit size arithmetic: n_params of any valid int dimensions is far below 2^60 */
    uint64_t expect = hbytes + 4 * in->n_params * (has_opt ? 3 : 1);
    if (hd->file_bytes < expect) {
        st = lt_fail(err, LT_ERR_INPUT, path,
                     "truncated checkpoint: expected %" PRIu64 " bytes (%" PRIu64 " parameters%s), the file has %" PRIu64,
                     expect, in->n_params, has_opt ? " and AdamW moments" : "", hd->file_bytes);
        lt_error_hint(err, "the write was cut short or the copy is incomplete; " DAMAGED_HINT);
        goto fail;
    }
    if (hd->file_bytes > expect) {
        st = lt_fail(err, LT_ERR_INPUT, path,
                     "the checkpoint has %" PRIu64 " bytes, %" PRIu64 " more than its header accounts for (%" PRIu64 ")",
                     hd->file_bytes, hd->file_bytes - expect, expect);
        lt_error_hint(err, DAMAGED_HINT);
        goto fail;
    }
    if (fp_out) {
        *fp_out = f;
        return LT_OK;
    }
    fclose(f);
    return LT_OK;
fail:
    fclose(f);
    return st;
}

lt_status lt_ckpt_peek(const char *path, lt_ckpt_info *info, lt_error *err) {
    if (lt_ckpt_is_dist(path)) return lt_ckpt_dist_peek(path, info, err);
    header hd;
    lt_status st = read_header(path, &hd, NULL, err);
    if (st == LT_OK) *info = hd.info;
    return st;
}

/* The first non-finite value of params, named by tensor and index. */
static lt_status check_finite(const char *path, const lt_llama *m, lt_error *err) {
    for (int i = 0; i < m->n_tensors; i++) {
        const lt_tensor_info *t = &m->tensors[i];
        const float *p = m->params + t->offset;
        size_t n = (size_t)t->rows * (size_t)t->cols;
        for (size_t j = 0; j < n; j++) {
            if (isfinite(p[j])) continue;
            lt_fail(err, LT_ERR_INPUT, path, "parameter %s[%zu] (row %zu, column %zu) is %s", t->name, j,
                    j / (size_t)t->cols, j % (size_t)t->cols, isnan(p[j]) ? "NaN" : "infinite");
            lt_error_hint(err, "training diverged before this checkpoint was written: resume from an earlier one, "
                               "lower train.lr or keep train.grad_clip on");
            return LT_ERR_INPUT;
        }
    }
    return LT_OK;
}

lt_status lt_ckpt_read(const char *path, lt_llama *m, lt_adamw *opt, lt_ckpt_state *st_out, lt_error *err) {
    if (lt_ckpt_is_dist(path)) return lt_ckpt_dist_read(path, m, opt, st_out, err);
    memset(m, 0, sizeof *m);
    if (opt) memset(opt, 0, sizeof *opt);
    header hd;
    FILE *f = NULL;
    lt_status st = read_header(path, &hd, &f, err);
    if (st != LT_OK) return st;
    if ((st = lt_llama_create(m, &hd.info.shape, err)) != LT_OK) {
        lt_error_prefix(err, "the checkpoint's model: ");
        goto fail;
    }
    if (m->n_params != hd.info.n_params) { /* shape_params mirrors the tensor table */
        st = lt_fail(err, LT_ERR_INTERNAL, path, "the model has %zu parameters, the header %" PRIu64, m->n_params,
                     hd.info.n_params);
        goto fail;
    }
    if (!read_floats(f, m->params, m->n_params)) {
        st = lt_fail(err, LT_ERR_IO, path, "cannot read the parameters: %s", ferror(f) ? strerror(errno) : "short read");
        goto fail;
    }
    if (hash_arrays(m->params, NULL, m->n_params) != hd.params_hash) {
        st = lt_fail(err, LT_ERR_INPUT, path, "checksum mismatch in the parameters: the file is damaged");
        lt_error_hint(err, DAMAGED_HINT);
        goto fail;
    }
    if ((st = check_finite(path, m, err)) != LT_OK) goto fail;
    if (opt) {
        if ((st = lt_adamw_init(opt, m->n_params, err)) != LT_OK) goto fail;
        if (hd.info.has_optimizer) {
            if (!read_floats(f, opt->m, opt->n) || !read_floats(f, opt->v, opt->n)) {
                st = lt_fail(err, LT_ERR_IO, path, "cannot read the AdamW moments: %s",
                             ferror(f) ? strerror(errno) : "short read");
                goto fail;
            }
            if (hash_arrays(opt->m, opt->v, opt->n) != hd.moments_hash) {
                st = lt_fail(err, LT_ERR_INPUT, path, "checksum mismatch in the AdamW moments: the file is damaged");
                lt_error_hint(err, DAMAGED_HINT);
                goto fail;
            }
            for (size_t i = 0; i < opt->n; i++) {
                if (isfinite(opt->m[i]) && isfinite(opt->v[i]) && opt->v[i] >= 0.0f) continue;
                st = lt_fail(err, LT_ERR_INPUT, path, "AdamW moment %zu is invalid (m = %g, v = %g)", i,
                             (double)opt->m[i], (double)opt->v[i]);
                lt_error_hint(err, "training diverged before this checkpoint was written: resume from an earlier one");
                goto fail;
            }
            opt->t = hd.info.adam_t;
        }
    }
    fclose(f);
    if (st_out) *st_out = hd.info.state;
    return LT_OK;
fail:
    fclose(f);
    lt_llama_free(m);
    if (opt) lt_adamw_free(opt);
    return st;
}

/* ------------------------------------------------------------------ shape check */

lt_status lt_ckpt_check_shape(const lt_model_shape *ckpt, const lt_model_shape *want, const char *path,
                              lt_error *err) {
    struct { const char *key; int a, b; } ints[] = {
        {"layers", ckpt->layers, want->layers}, {"hidden", ckpt->hidden, want->hidden},
        {"heads", ckpt->heads, want->heads},    {"kv_heads", ckpt->kv_heads, want->kv_heads},
        {"ffn", ckpt->ffn, want->ffn},          {"vocab", ckpt->vocab, want->vocab},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (ints[i].a == ints[i].b) continue;
        lt_fail(err, LT_ERR_CONFIG, path, "the checkpoint's model has %s = %d, the config's model.%s is %d",
                ints[i].key, ints[i].a, ints[i].key, ints[i].b);
        lt_error_hint(err, "to continue from this checkpoint use --set model.%s=%d; to start a new model write a "
                           "fresh checkpoint with `trainer init`", ints[i].key, ints[i].a);
        return LT_ERR_CONFIG;
    }
    int ta = ckpt->tie_embeddings ? 1 : 0, tb = want->tie_embeddings ? 1 : 0;
    if (ta != tb) {
        lt_fail(err, LT_ERR_CONFIG, path, "the checkpoint's model has tie_embeddings = %s, the config's %s",
                ta ? "true" : "false", tb ? "true" : "false");
        lt_error_hint(err, "to continue from this checkpoint use --set model.tie_embeddings=%s; to start a new model "
                           "write a fresh checkpoint with `trainer init`", ta ? "true" : "false");
        return LT_ERR_CONFIG;
    }
    struct { const char *key; double a, b; } dbls[] = {
        {"rope_theta", lt_model_rope_theta(ckpt), lt_model_rope_theta(want)},
        {"norm_eps", lt_model_norm_eps(ckpt), lt_model_norm_eps(want)},
    };
    for (size_t i = 0; i < sizeof dbls / sizeof dbls[0]; i++) {
        if (dbls[i].a == dbls[i].b) continue;
        lt_fail(err, LT_ERR_CONFIG, path, "the checkpoint's model has %s = %.17g, the config's model.%s is %.17g",
                dbls[i].key, dbls[i].a, dbls[i].key, dbls[i].b);
        lt_error_hint(err, "to continue from this checkpoint use --set model.%s=%.17g; to start a new model write a "
                           "fresh checkpoint with `trainer init`", dbls[i].key, dbls[i].a);
        return LT_ERR_CONFIG;
    }
    return LT_OK;
}

/* ------------------------------------------------------------------ directory of checkpoints */

char *lt_ckpt_path(const char *dir, int64_t step) {
    size_t n = strlen(dir) + 40;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/ckpt-%08lld.bin", dir, (long long)step);
    return p;
}

/* The step of a checkpoint name "ckpt-DIGITS.bin" (a file) or "ckpt-DIGITS.d" (parts), or -1. */
static int64_t step_of_name(const char *name) {
    if (strncmp(name, "ckpt-", 5) != 0) return -1;
    const char *d = name + 5;
    size_t nd = strspn(d, "0123456789");
    if (nd == 0 || nd > 18 || (strcmp(d + nd, ".bin") != 0 && strcmp(d + nd, ".d") != 0)) return -1;
    int64_t v = 0;
    for (size_t i = 0; i < nd; i++) v = v * 10 + (d[i] - '0');
    return v;
}

typedef struct ckpt_entry {
    int64_t step;
    char *name;
    bool incomplete; /* parts without their manifest: never read, pruned */
} ckpt_entry;

static char *join(const char *dir, const char *name);

static int by_step_desc(const void *a, const void *b) {
    const ckpt_entry *x = a, *y = b;
    if (x->incomplete != y->incomplete) return x->incomplete ? 1 : -1; /* complete ones first */
    return x->step < y->step ? 1 : x->step > y->step ? -1 : strcmp(x->name, y->name);
}

static void free_entries(ckpt_entry *e, size_t n) {
    for (size_t i = 0; i < n; i++) free(e[i].name);
    free(e);
}

/* The checkpoints of dir, newest first. A missing directory has none. */
static lt_status list_ckpts(const char *dir, ckpt_entry **out, size_t *n_out, lt_error *err) {
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return LT_OK;
        return lt_fail(err, LT_ERR_IO, dir, "cannot read the checkpoint directory: %s", strerror(errno));
    }
    ckpt_entry *e = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int64_t step = step_of_name(de->d_name);
        if (step < 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            ckpt_entry *ne = realloc(e, cap * sizeof *e);
            if (!ne) goto nomem;
            e = ne;
        }
        e[n].step = step;
        e[n].name = strdup(de->d_name);
        if (!e[n].name) goto nomem;
        e[n].incomplete = false;
        if (strstr(e[n].name, ".d")) {
            char *p = join(dir, e[n].name);
            if (!p) goto nomem;
            e[n].incomplete = !lt_ckpt_dist_complete(p);
            free(p);
        }
        n++;
    }
    closedir(d);
    if (n) qsort(e, n, sizeof *e, by_step_desc);
    *out = e;
    *n_out = n;
    return LT_OK;
nomem:
    closedir(d);
    free_entries(e, n);
    return lt_fail(err, LT_ERR_NOMEM, dir, "out of memory listing checkpoints");
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

lt_status lt_ckpt_latest(const char *dir, char **path_out, lt_error *err) {
    *path_out = NULL;
    ckpt_entry *e;
    size_t n;
    lt_status st = list_ckpts(dir, &e, &n, err);
    if (st != LT_OK || n == 0 || e[0].incomplete) {
        if (st == LT_OK) free_entries(e, n);
        return st;
    }
    *path_out = join(dir, e[0].name);
    free_entries(e, n);
    if (!*path_out) return lt_fail(err, LT_ERR_NOMEM, dir, "out of memory");
    return LT_OK;
}

lt_status lt_ckpt_prune(const char *dir, int keep, lt_error *err) {
    if (keep < 1) keep = 1;
    ckpt_entry *e;
    size_t n;
    lt_status st = list_ckpts(dir, &e, &n, err);
    if (st != LT_OK) return st;
    bool removed = false;
    for (size_t i = (size_t)keep; i < n && st == LT_OK; i++) {
        char *p = join(dir, e[i].name);
        if (p && lt_ckpt_is_dist(p)) { /* parts: the directory's files, then the directory */
            DIR *d = opendir(p);
            struct dirent *de;
            while (d && (de = readdir(d)) != NULL) {
                if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2]))) continue;
                char *f = join(p, de->d_name);
                if (f) unlink(f);
                free(f);
            }
            if (d) closedir(d);
            if (rmdir(p) != 0 && errno != ENOENT)
                st = lt_fail(err, LT_ERR_IO, p, "cannot delete an old checkpoint: %s", strerror(errno));
            else removed = true;
        } else if (!p) {
            st = lt_fail(err, LT_ERR_NOMEM, dir, "out of memory");
        } else if (unlink(p) != 0 && errno != ENOENT) {
            st = lt_fail(err, LT_ERR_IO, p, "cannot delete an old checkpoint: %s", strerror(errno));
        } else {
            removed = true;
        }
        free(p);
    }
    free_entries(e, n);
    if (st == LT_OK && removed) st = lt_fsync_dir(dir, err);
    return st;
}
