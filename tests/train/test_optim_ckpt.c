/*
 * tests/train/test_optim_ckpt.c — the optimizer (train/model/optim.h) and checkpoints
 * (train/io/ckpt.h).
 *
 * Optimizer: the learning rate at hand-computed points of warm-up and cosine decay; the
 * [train] keys read from a config; clipping against a hand-computed norm (3-4-12-0 has
 * norm 13); two AdamW steps on three parameters (a 2-element matrix, decayed, and a
 * 1-element norm weight, not decayed) against the formula evaluated here in double.
 * Checkpoints: bit-exact round trip of parameters, moments, step, random stream and data
 * position; parameters-only files; every kind of damage (empty, wrong magic, newer version,
 * truncated, trailing bytes, a flipped header or payload byte, NaN parameter, invalid
 * dimensions, wrong parameter count) gives its status and a message naming the problem; a
 * checkpoint against a config of other dimensions; naming, latest and pruning.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <xxhash.h>

#include "tests/testutil.h"

#include "lib/config.h"
#include "lib/files.h" /* lt_read_file */
#include "lib/model.h"
#include "lib/rng.h"
#include "train/io/ckpt.h"
#include "train/model/model.h"
#include "train/model/optim.h"

static char root[256];

static int setup(void **state) {
    (void)state;
    return lt_test_tmpdir_create(root, sizeof root, "optim-ckpt");
}

static int teardown(void **state) {
    (void)state;
    return lt_test_tmpdir_remove(root);
}

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", root, name); }

/* ------------------------------------------------------------------ learning rate */

static void test_lr_schedule(void **state) {
    (void)state;
    lt_optim_config oc = {.lr = 1e-3, .min_lr = 1e-4, .warmup_steps = 10, .total_steps = 110};
    /* warm-up: lr (step + 1) / 10 */
    assert_float_equal(lt_lr_at(&oc, 0), 1e-4, 1e-15);
    assert_float_equal(lt_lr_at(&oc, 4), 5e-4, 1e-15);
    assert_float_equal(lt_lr_at(&oc, 9), 1e-3, 1e-15);
    /* cosine over [10, 110): progress 0 -> lr, 0.25 -> min + 0.45e-3 (1 + cos(pi/4)),
     * 0.5 -> min + 0.45e-3, 1 -> min_lr, and min_lr after the end */
    assert_float_equal(lt_lr_at(&oc, 10), 1e-3, 1e-15);
    assert_float_equal(lt_lr_at(&oc, 35), 1e-4 + 0.45e-3 * (1.0 + 0.70710678118654752), 1e-15);
    assert_float_equal(lt_lr_at(&oc, 60), 5.5e-4, 1e-15);
    assert_float_equal(lt_lr_at(&oc, 110), 1e-4, 1e-15);
    assert_float_equal(lt_lr_at(&oc, 5000), 1e-4, 1e-15);
    /* no warm-up: the first step runs at lr */
    lt_optim_config nw = {.lr = 2e-3, .min_lr = 0, .warmup_steps = 0, .total_steps = 4};
    assert_float_equal(lt_lr_at(&nw, 0), 2e-3, 1e-15);
    assert_float_equal(lt_lr_at(&nw, 2), 1e-3, 1e-15); /* progress 0.5 */
    /* total <= warmup: decay span of 1 step */
    lt_optim_config short_run = {.lr = 1.0, .min_lr = 0.5, .warmup_steps = 5, .total_steps = 3};
    assert_float_equal(lt_lr_at(&short_run, 4), 1.0, 1e-15);
    assert_float_equal(lt_lr_at(&short_run, 5), 1.0, 1e-15);
    assert_float_equal(lt_lr_at(&short_run, 6), 0.5, 1e-15);
}

static void test_optim_config(void **state) {
    (void)state;
    lt_config *cfg = lt_config_new();
    assert_non_null(cfg);
    lt_error err;
    lt_optim_config oc;
    /* schema defaults, no steps anywhere: 1000 */
    assert_int_equal(lt_config_set_value(cfg, "plan", "steps", "", NULL, &err), LT_OK);
    assert_int_equal(lt_optim_config_from(cfg, &oc, &err), LT_OK);
    assert_float_equal(oc.lr, 3e-4, 0);
    assert_float_equal(oc.min_lr, 3e-5, 0);
    assert_float_equal(oc.weight_decay, 0.1, 0);
    assert_float_equal(oc.beta1, 0.9, 0);
    assert_float_equal(oc.beta2, 0.95, 0);
    assert_float_equal(oc.eps, 1e-8, 0);
    assert_float_equal(oc.grad_clip, 1.0, 0);
    assert_int_equal(oc.warmup_steps, 0);
    assert_int_equal(oc.total_steps, 1000);
    /* plan.steps, then train.steps over it */
    assert_int_equal(lt_config_set(cfg, "plan.steps=77", &err), LT_OK);
    assert_int_equal(lt_optim_config_from(cfg, &oc, &err), LT_OK);
    assert_int_equal(oc.total_steps, 77);
    assert_int_equal(lt_config_set(cfg, "train.steps=50", &err), LT_OK);
    assert_int_equal(lt_config_set(cfg, "train.warmup_steps=5", &err), LT_OK);
    assert_int_equal(lt_config_set(cfg, "train.adam_eps=1e-6", &err), LT_OK);
    assert_int_equal(lt_optim_config_from(cfg, &oc, &err), LT_OK);
    assert_int_equal(oc.total_steps, 50);
    assert_int_equal(oc.warmup_steps, 5);
    assert_float_equal(oc.eps, 1e-6, 0);
    /* min_lr above lr */
    assert_int_equal(lt_config_set(cfg, "train.min_lr=1", &err), LT_OK);
    assert_int_equal(lt_optim_config_from(cfg, &oc, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "min_lr"));
    assert_int_equal(err.where[0] != '\0', 1);
    lt_config_free(cfg);
}

/* ------------------------------------------------------------------ clipping */

static void test_clip(void **state) {
    (void)state;
    float g[4] = {3, 4, 0, 12}; /* norm 13 */
    assert_float_equal(lt_grad_norm(g, 4), 13.0, 1e-12);
    /* above the norm: untouched */
    assert_float_equal(lt_clip_grads(g, 4, 100.0), 13.0, 1e-12);
    assert_true(g[0] == 3 && g[1] == 4 && g[2] == 0 && g[3] == 12);
    /* off */
    assert_float_equal(lt_clip_grads(g, 4, 0.0), 13.0, 1e-12);
    assert_true(g[3] == 12);
    /* to 6.5: every gradient times (float)(6.5 / (13 + 1e-6)), about one half */
    float c = (float)(6.5 / (13.0 + 1e-6));
    assert_float_equal(lt_clip_grads(g, 4, 6.5), 13.0, 1e-12);
    assert_true(g[0] == 3 * c && g[1] == 4 * c && g[2] == 0 && g[3] == 12 * c);
    assert_float_equal(lt_grad_norm(g, 4), 6.5, 1e-5);
}

/* ------------------------------------------------------------------ AdamW */

/* A stand-in model: a 2x1 matrix (decayed) then a 1x1 norm weight (not decayed). */
static void fake_model(lt_llama *m, lt_tensor_info t[2]) {
    memset(m, 0, sizeof *m);
    memset(t, 0, 2 * sizeof *t);
    snprintf(t[0].name, sizeof t[0].name, "model.layers.0.mlp.up_proj.weight");
    t[0].rows = 2;
    t[0].cols = 1;
    t[0].offset = 0;
    snprintf(t[1].name, sizeof t[1].name, "model.norm.weight");
    t[1].rows = 1;
    t[1].cols = 1;
    t[1].offset = 2;
    m->tensors = t;
    m->n_tensors = 2;
    m->n_params = 3;
}

static void test_adamw_steps(void **state) {
    (void)state;
    lt_llama m;
    lt_tensor_info t[2];
    fake_model(&m, t);
    lt_optim_config oc = {.lr = 0.1, .min_lr = 0, .weight_decay = 0.5, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    float p[3] = {1.0f, -2.0f, 0.5f};
    const float g1[3] = {0.5f, -0.25f, 2.0f}, g2[3] = {-1.0f, 0.75f, 0.125f};
    lt_error err;
    lt_adamw o;
    assert_int_equal(lt_adamw_init(&o, 3, &err), LT_OK);
    assert_true(o.m[0] == 0 && o.v[2] == 0 && o.t == 0);

    /* The reference, in double (torch.optim.AdamW, decoupled decay):
     *   p *= 1 - lr wd (matrices only); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
     *   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps) */
    double ep[3] = {1.0, -2.0, 0.5}, em[3] = {0}, ev[3] = {0};
    const float *gs[2] = {g1, g2};
    double lrs[2] = {0.1, 0.05};
    for (int step = 0; step < 2; step++) {
        lt_adamw_step(&o, &m, p, gs[step], lrs[step], &oc);
        int tt = step + 1;
        for (int i = 0; i < 3; i++) {
            double g = gs[step][i];
            if (i < 2) ep[i] *= 1.0 - lrs[step] * oc.weight_decay;
            em[i] = oc.beta1 * em[i] + (1 - oc.beta1) * g;
            ev[i] = oc.beta2 * ev[i] + (1 - oc.beta2) * g * g;
            double bc1 = 1 - pow(oc.beta1, tt), bc2 = 1 - pow(oc.beta2, tt);
            ep[i] -= lrs[step] / bc1 * em[i] / (sqrt(ev[i]) / sqrt(bc2) + oc.eps);
        }
        assert_int_equal(o.t, tt);
        for (int i = 0; i < 3; i++) {
            assert_float_equal(p[i], ep[i], 1e-6 * fabs(ep[i]) + 1e-7);
            assert_float_equal(o.m[i], em[i], 1e-6 * fabs(em[i]) + 1e-9);
            assert_float_equal(o.v[i], ev[i], 1e-6 * fabs(ev[i]) + 1e-12);
        }
    }
    /* after the first step, with m_hat = g and v_hat = g^2: p = p (1 - lr wd) - lr sign(g)
     * to within eps — spelled out for element 0 of step 1: 1 * 0.95 - 0.1 = 0.85 */
    lt_adamw_free(&o);
    assert_null(o.m);
    float q[3] = {1.0f, -2.0f, 0.5f};
    assert_int_equal(lt_adamw_init(&o, 3, &err), LT_OK);
    lt_adamw_step(&o, &m, q, g1, 0.1, &oc);
    assert_float_equal(q[0], 0.85, 1e-6);
    assert_float_equal(q[1], -2.0 * 0.95 + 0.1, 1e-6);
    assert_float_equal(q[2], 0.5 - 0.1, 1e-6); /* norm weight: no decay */
    lt_adamw_free(&o);
}

/* ------------------------------------------------------------------ checkpoints */

/* A small Llama (nano, vocab 64) with initialized parameters. */
static void small_model(lt_llama *m, int tie) {
    lt_model_shape s = *lt_model_preset("nano");
    s.vocab = 64;
    s.tie_embeddings = tie;
    lt_error err;
    assert_int_equal(lt_llama_create(m, &s, &err), LT_OK);
    lt_llama_init(m, 7);
}

static void random_state(lt_ckpt_state *st, lt_adamw *o, size_t n) {
    lt_error err;
    memset(st, 0, sizeof *st);
    lt_rng_seed(&st->rng, 99);
    for (int i = 0; i < 5; i++) (void)lt_rng_u64(&st->rng); /* mid-block: pos 1 */
    st->step = 17;
    st->data_pos = 12345;
    st->data_epoch = 2;
    assert_int_equal(lt_adamw_init(o, n, &err), LT_OK);
    lt_rng r;
    lt_rng_seed(&r, 5);
    for (size_t i = 0; i < n; i++) {
        o->m[i] = (float)lt_rng_normal(&r);
        o->v[i] = (float)lt_rng_double(&r);
    }
    o->t = 17;
}

static void test_ckpt_roundtrip(void **state) {
    (void)state;
    for (int tie = 0; tie <= 1; tie++) {
        lt_llama m, r;
        lt_adamw o, ro;
        lt_ckpt_state st, rst;
        lt_error err;
        small_model(&m, tie);
        random_state(&st, &o, m.n_params);
        char path[320];
        path_in(path, sizeof path, tie ? "tied.bin" : "untied.bin");
        assert_int_equal(lt_ckpt_write(path, &m, &o, &st, &err), LT_OK);
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal((size_t)sb.st_size, LT_CKPT_HEADER_BYTES + 12 * m.n_params);

        assert_int_equal(lt_ckpt_read(path, &r, &ro, &rst, &err), LT_OK);
        assert_int_equal(r.n_params, m.n_params);
        assert_int_equal(r.shape.layers, 2);
        assert_int_equal(r.shape.vocab, 64);
        assert_int_equal(r.shape.tie_embeddings, tie);
        assert_float_equal(r.shape.rope_theta, 10000.0, 0);
        assert_float_equal(r.shape.norm_eps, 1e-5, 0);
        assert_memory_equal(r.params, m.params, m.n_params * sizeof(float));
        assert_memory_equal(ro.m, o.m, m.n_params * sizeof(float));
        assert_memory_equal(ro.v, o.v, m.n_params * sizeof(float));
        assert_int_equal(ro.t, 17);
        assert_int_equal(rst.step, 17);
        assert_int_equal(rst.data_pos, 12345);
        assert_int_equal(rst.data_epoch, 2);
        assert_memory_equal(&rst.rng.key, &st.rng.key, sizeof st.rng.key);
        assert_memory_equal(&rst.rng.ctr, &st.rng.ctr, sizeof st.rng.ctr);
        assert_memory_equal(&rst.rng.buf, &st.rng.buf, sizeof st.rng.buf);
        assert_int_equal(rst.rng.pos, st.rng.pos);
        /* the resumed stream continues where the saved one stood */
        for (int i = 0; i < 9; i++) assert_true(lt_rng_u64(&rst.rng) == lt_rng_u64(&st.rng));

        lt_ckpt_info info;
        assert_int_equal(lt_ckpt_peek(path, &info, &err), LT_OK);
        assert_int_equal(info.has_optimizer, 1);
        assert_int_equal(info.n_params, m.n_params);
        assert_int_equal(info.adam_t, 17);

        /* parameters only: reading with an optimizer gives zero moments and t = 0 */
        lt_llama_free(&r);
        lt_adamw_free(&ro);
        assert_int_equal(lt_ckpt_write(path, &m, NULL, &st, &err), LT_OK);
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal((size_t)sb.st_size, LT_CKPT_HEADER_BYTES + 4 * m.n_params);
        assert_int_equal(lt_ckpt_read(path, &r, &ro, NULL, &err), LT_OK);
        assert_memory_equal(r.params, m.params, m.n_params * sizeof(float));
        assert_int_equal(ro.t, 0);
        for (size_t i = 0; i < ro.n; i++) assert_true(ro.m[i] == 0 && ro.v[i] == 0);
        lt_llama_free(&r);
        lt_adamw_free(&ro);
        /* and a full checkpoint read without the optimizer */
        assert_int_equal(lt_ckpt_write(path, &m, &o, &st, &err), LT_OK);
        assert_int_equal(lt_ckpt_read(path, &r, NULL, NULL, &err), LT_OK);
        assert_memory_equal(r.params, m.params, m.n_params * sizeof(float));
        lt_llama_free(&r);
        lt_adamw_free(&o);
        lt_llama_free(&m);
    }
}

/* ---- damaged files: written by hand from a good one */

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void spit(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* A Qwen2 model with llama3 RoPE scaling is written as version 2 (a 320-byte header) and
 * read back with its family and scaling; damage to the extension is caught by its checksum. */
static void test_ckpt_v2_families(void **state) {
    (void)state;
    lt_model_shape s = *lt_model_preset("nano");
    s.vocab = 64;
    s.family = LT_FAMILY_QWEN2;
    s.rope_scaling = LT_ROPE_LLAMA3;
    s.rope_factor = 8.0, s.rope_low_freq_factor = 1.0, s.rope_high_freq_factor = 4.0;
    s.rope_original_max_pos = 8192;
    lt_llama m, r;
    lt_error err;
    assert_int_equal(lt_llama_create(&m, &s, &err), LT_OK);
    lt_llama_init(&m, 3);
    m.w.layer[0].bq[1] = 0.5f;
    lt_ckpt_state st;
    memset(&st, 0, sizeof st);
    char path[320];
    path_in(path, sizeof path, "qwen2.bin");
    assert_int_equal(lt_ckpt_write(path, &m, NULL, &st, &err), LT_OK);
    uint8_t *b = NULL;
    size_t n = 0;
    assert_int_equal(lt_read_file(path, (char **)&b, &n, &err), LT_OK);
    assert_int_equal(n, LT_CKPT_HEADER_BYTES_V2 + 4 * m.n_params);
    assert_int_equal(b[8], 2);   /* version */
    assert_int_equal(b[12], 64); /* header bytes 320 = 0x140, little-endian */
    assert_int_equal(b[13], 1);
    assert_int_equal(lt_ckpt_read(path, &r, NULL, NULL, &err), LT_OK);
    assert_int_equal(r.shape.family, LT_FAMILY_QWEN2);
    assert_int_equal(r.shape.rope_scaling, LT_ROPE_LLAMA3);
    assert_float_equal(r.shape.rope_factor, 8.0, 0);
    assert_float_equal(r.shape.rope_low_freq_factor, 1.0, 0);
    assert_float_equal(r.shape.rope_high_freq_factor, 4.0, 0);
    assert_int_equal(r.shape.rope_original_max_pos, 8192);
    assert_int_equal(r.n_params, m.n_params);
    assert_memory_equal(r.params, m.params, m.n_params * sizeof(float));
    assert_memory_equal(r.rope_inv_freq, m.rope_inv_freq, (size_t)m.head_dim / 2 * sizeof(float));
    lt_llama_free(&r);
    /* a byte of the extension flipped: the header is damaged */
    b[264] ^= 0x01;
    path_in(path, sizeof path, "qwen2-bad.bin");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
    assert_int_not_equal(lt_ckpt_read(path, &r, NULL, NULL, &err), LT_OK);
    assert_non_null(strstr(err.what, "checksum"));
    free(b);
    lt_llama_free(&m);
}

static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Recompute the header checksum (bytes [0, 248) at 248), as a careful forger would. */
static void reseal_header(uint8_t *b) { put64(b + 248, XXH64(b, 248, 0)); }

/* Read `bytes` as a checkpoint: expect `status` and every string of the NULL-terminated
 * list in WHAT (WHERE must be the path). */
static void expect_bad(const uint8_t *bytes, size_t n, lt_status status, ...) {
    char path[320];
    path_in(path, sizeof path, "bad.bin");
    spit(path, bytes, n);
    lt_llama m;
    lt_adamw o;
    lt_error err;
    lt_status st = lt_ckpt_read(path, &m, &o, NULL, &err);
    if (st != status) fail_msg("status %d, expected %d: %s (%s)", st, status, err.what, err.where);
    assert_string_equal(err.where, path);
    assert_true(err.hint[0] != '\0');
    assert_null(m.params);
    assert_null(o.m);
    va_list ap;
    va_start(ap, status);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
        if (!strstr(err.what, s)) fail_msg("'%s' not in '%s'", s, err.what);
    va_end(ap);
}

static void test_ckpt_damage(void **state) {
    (void)state;
    lt_llama m;
    lt_adamw o;
    lt_ckpt_state st;
    lt_error err;
    small_model(&m, 0);
    random_state(&st, &o, m.n_params);
    char good[320];
    path_in(good, sizeof good, "good.bin");
    assert_int_equal(lt_ckpt_write(good, &m, &o, &st, &err), LT_OK);
    size_t n;
    uint8_t *b = slurp(good, &n);
    uint8_t *c = malloc(n + 16);
    assert_non_null(c);
#define FRESH() memcpy(c, b, n)

    expect_bad(c, 0, LT_ERR_INPUT, "not a trainer checkpoint", NULL);
    FRESH();
    c[3] = 'X';
    expect_bad(c, n, LT_ERR_INPUT, "not a trainer checkpoint", "LTCKPT01", NULL);
    FRESH();
    put32(c + 8, 3);
    expect_bad(c, n, LT_ERR_VERSION, "version 3", "newer", NULL);
    FRESH();
    put32(c + 8, 2); /* version 2 with version 1's header size */
    reseal_header(c);
    expect_bad(c, n, LT_ERR_INPUT, "invalid checkpoint header", "version 2", NULL);
    FRESH();
    expect_bad(c, 100, LT_ERR_INPUT, "truncated", NULL);
    char want[64];
    snprintf(want, sizeof want, "expected %zu bytes", n);
    FRESH();
    expect_bad(c, n - 100, LT_ERR_INPUT, "truncated", want, "the file has", NULL);
    FRESH();
    memset(c + n, 0, 16);
    expect_bad(c, n + 16, LT_ERR_INPUT, "16 more than its header accounts for", NULL);
    FRESH();
    c[96] ^= 1; /* the step: caught by the header checksum */
    expect_bad(c, n, LT_ERR_INPUT, "header checksum", NULL);
    FRESH();
    c[LT_CKPT_HEADER_BYTES + 1000] ^= 0x10; /* a parameter byte */
    expect_bad(c, n, LT_ERR_INPUT, "checksum mismatch in the parameters", NULL);
    FRESH();
    c[n - 3] ^= 0x01; /* a byte of v */
    expect_bad(c, n, LT_ERR_INPUT, "checksum mismatch in the AdamW moments", NULL);

    /* NaN at index 5 of the 3rd tensor (layer 0's q_proj), checksums recomputed */
    FRESH();
    const lt_tensor_info *q = &m.tensors[2];
    assert_string_equal(q->name, "model.layers.0.self_attn.q_proj.weight");
    float nan = NAN;
    memcpy(c + LT_CKPT_HEADER_BYTES + 4 * (q->offset + 5), &nan, 4);
    put64(c + 224, XXH64(c + LT_CKPT_HEADER_BYTES, 4 * m.n_params, 0));
    reseal_header(c);
    expect_bad(c, n, LT_ERR_INPUT, "model.layers.0.self_attn.q_proj.weight[5]", "NaN", NULL);

    /* dimensions: 3 heads do not divide hidden 64 */
    FRESH();
    put32(c + 48 + 8, 3);
    reseal_header(c);
    expect_bad(c, n, LT_ERR_INPUT, "invalid model dimensions", NULL);
    /* a parameter count that the dimensions do not make */
    FRESH();
    put64(c + 208, m.n_params + 1);
    reseal_header(c);
    expect_bad(c, n, LT_ERR_INPUT, "parameters", "dimensions make", NULL);
    /* a random stream position outside 0..4 */
    FRESH();
    put32(c + 184, 9);
    reseal_header(c);
    expect_bad(c, n, LT_ERR_INPUT, "rng position 9", NULL);

    /* the config's model differs */
    lt_model_shape want_shape = m.shape;
    assert_int_equal(lt_ckpt_check_shape(&m.shape, &want_shape, good, &err), LT_OK);
    want_shape.hidden = 128;
    assert_int_equal(lt_ckpt_check_shape(&m.shape, &want_shape, good, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "hidden = 64"));
    assert_non_null(strstr(err.what, "128"));
    assert_string_equal(err.where, good);
    assert_non_null(strstr(err.hint, "--set model.hidden=64"));
    assert_non_null(strstr(err.hint, "trainer init"));
    want_shape = m.shape;
    want_shape.tie_embeddings = 1;
    assert_int_equal(lt_ckpt_check_shape(&m.shape, &want_shape, good, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "tie_embeddings"));
    want_shape = m.shape;
    want_shape.rope_theta = 500000;
    assert_int_equal(lt_ckpt_check_shape(&m.shape, &want_shape, good, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "rope_theta"));
    want_shape = m.shape;
    want_shape.rope_theta = 0; /* the default, 10000 */
    assert_int_equal(lt_ckpt_check_shape(&m.shape, &want_shape, good, &err), LT_OK);

    /* missing file */
    char none[320];
    path_in(none, sizeof none, "none.bin");
    lt_llama r;
    assert_int_equal(lt_ckpt_read(none, &r, NULL, NULL, &err), LT_ERR_IO);
    assert_string_equal(err.where, none);
#undef FRESH
    free(c);
    free(b);
    lt_adamw_free(&o);
    lt_llama_free(&m);
}

/* ------------------------------------------------------------------ directory */

static void touch(const char *dir, const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
}

static int exists(const char *dir, const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static void test_ckpt_dir(void **state) {
    (void)state;
    char *p = lt_ckpt_path("runs/x", 42);
    assert_string_equal(p, "runs/x/ckpt-00000042.bin");
    free(p);
    p = lt_ckpt_path("d", 123456789);
    assert_string_equal(p, "d/ckpt-123456789.bin");
    free(p);

    char dir[320];
    path_in(dir, sizeof dir, "ckpts");
    lt_error err;
    char *latest = (char *)1;
    assert_int_equal(lt_ckpt_latest(dir, &latest, &err), LT_OK); /* no directory yet */
    assert_null(latest);
    assert_int_equal(mkdir(dir, 0777), 0);
    assert_int_equal(lt_ckpt_latest(dir, &latest, &err), LT_OK);
    assert_null(latest);
    const char *names[] = {"ckpt-00000001.bin", "ckpt-00000005.bin", "ckpt-00000020.bin", "ckpt-00000003.bin",
                           "ckpt-00000100.bin.tmp", ".ckpt-00000200.bin.tmp.a1b2c3", "ckpt-abc.bin", "notes.txt"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) touch(dir, names[i]);
    assert_int_equal(lt_ckpt_latest(dir, &latest, &err), LT_OK);
    char want[400];
    snprintf(want, sizeof want, "%s/ckpt-00000020.bin", dir);
    assert_string_equal(latest, want);
    free(latest);

    assert_int_equal(lt_ckpt_prune(dir, 2, &err), LT_OK);
    assert_true(exists(dir, "ckpt-00000020.bin") && exists(dir, "ckpt-00000005.bin"));
    assert_false(exists(dir, "ckpt-00000003.bin") || exists(dir, "ckpt-00000001.bin"));
    /* other names are left alone */
    assert_true(exists(dir, "ckpt-00000100.bin.tmp") && exists(dir, ".ckpt-00000200.bin.tmp.a1b2c3") &&
                exists(dir, "ckpt-abc.bin") && exists(dir, "notes.txt"));
    assert_int_equal(lt_ckpt_prune(dir, 1, &err), LT_OK);
    assert_true(exists(dir, "ckpt-00000020.bin"));
    assert_false(exists(dir, "ckpt-00000005.bin"));
    /* keeping more than there are deletes nothing */
    assert_int_equal(lt_ckpt_prune(dir, 5, &err), LT_OK);
    assert_true(exists(dir, "ckpt-00000020.bin"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lr_schedule),    cmocka_unit_test(test_optim_config),
        cmocka_unit_test(test_clip),           cmocka_unit_test(test_adamw_steps),
        cmocka_unit_test(test_ckpt_roundtrip), cmocka_unit_test(test_ckpt_damage),
        cmocka_unit_test(test_ckpt_dir),        cmocka_unit_test(test_ckpt_v2_families),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
