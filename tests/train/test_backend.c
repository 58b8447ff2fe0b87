/*
 * tests/train/test_backend.c — the pass's backend abstraction (train/model/backend.h) on the CPU:
 * the "cpu-bf16" test backend stores activations, K/V and their gradients as 2-byte bf16
 * elements, so every element-size path the GPU backend's host logic takes (the activation
 * layout, row copies, window sets, lt_acts_keep_rows, pack/unpack, the K/V context's rows,
 * the fused head's row blocks, the meter's byte counts) runs here without a GPU. Checked:
 *   - bf16 rounding (nearest even, NaN kept);
 *   - LONGTAIL_POISON (on in the test suite): fresh non-zeroed buffers of both CPU backends
 *     read as NaN, so every pass test here reads no memory it never wrote;
 *   - gradients and loss of a batch whole / packed / sliced (KV context) and over two
 *     stages agree with the fp32 reference within a bf16 tolerance: per tensor,
 *     ||g_bf16 - g_fp32|| <= BF16_TOL ||g_fp32|| (BF16_TOL = 3e-2; measured 1.9e-2 at
 *     worst), the loss to 1e-2 relative; and they are NOT the
 *     fp32 bits (the emulation rounds: a test that could not fail otherwise);
 *   - row moves with 2-byte elements are exact: a backward over a window filled row by row
 *     gives the gradients of the backward over the whole set bit for bit, kept rows pack to
 *     the bytes they packed to before, and a set's bytes are the 2-byte layout's;
 *   - a meter counts the bf16 bytes (K/V at 2 bytes an element);
 *   - the executor (train/exec/exec.h) on the bf16 backend: a 2-stage pipeline with recompute and
 *     asymmetric backward units (rows gathered per layer, kept rows dropped, inputs kept for
 *     recompute, input gradients between stages, all in 2-byte elements) gives the fp32
 *     reference's gradients within BF16_TOL, and so does the same plan as a static
 *     context-parallel pipeline of 2 and 3 members in one process (cp 3: a member's shard
 *     empty), whose group moves its rows and kept inputs in 2-byte elements;
 *   - an allocation failure's error carries the backend's reason where it keeps one (the
 *     CUDA arena's, here a stand-in: lt_backend_nomem);
 *   - the CUDA backend where it cannot open: LT_ERR_CONFIG with the reason.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/rng.h"
#include "plans/strategies/plan.h"   /* lt_step_plan */
#include "plans/schedule/schedule.h" /* lt_schedule_* */
#include "train/model/backend.h"
#include "train/exec/exec.h"         /* lt_exec_step */
#include "train/model/model.h"

#define BF16_TOL 3e-2 /* measured worst: 1.9e-2 (k_proj, its dK accumulated in bf16 context rows) */

/* qwen2: a Qwen2 model (Q/K/V biases) with llama3-scaled RoPE frequencies */
static void make_model_vocab(lt_llama *m, int tied, bool qwen2, int vocab, const lt_backend *be) {
    lt_model_shape s = *lt_model_preset("nano");
    s.vocab = vocab;
    s.tie_embeddings = tied;
    if (qwen2) {
        s.family = LT_FAMILY_QWEN2;
        s.rope_theta = 500000.0;
        s.rope_scaling = LT_ROPE_LLAMA3;
        s.rope_factor = 8.0, s.rope_low_freq_factor = 1.0, s.rope_high_freq_factor = 4.0;
        s.rope_original_max_pos = 1024;
    }
    lt_error err;
    assert_int_equal(lt_llama_create(m, &s, &err), LT_OK);
    lt_rng r;
    lt_rng_seed(&r, 99);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] = (float)(0.1 * lt_rng_normal(&r));
    for (int t = 0; t < m->n_tensors; t++) /* norm weights around 1 (biases stay around 0) */
        if (m->tensors[t].rows == 1 && !strstr(m->tensors[t].name, ".bias"))
            for (int c = 0; c < m->tensors[t].cols; c++) m->params[m->tensors[t].offset + c] += 1.0f;
    m->backend = be;
}

static void make_model_family(lt_llama *m, int tied, bool qwen2, const lt_backend *be) {
    make_model_vocab(m, tied, qwen2, 61, be);
}

static void make_model(lt_llama *m, int tied, const lt_backend *be) { make_model_family(m, tied, false, be); }

enum { N_SAMPLES = 4 };
static const int lengths[N_SAMPLES] = {11, 5, 37, 1};
static int32_t tokens[N_SAMPLES][40];
static lt_train_sample samples[N_SAMPLES];
static lt_batch batch = {samples, N_SAMPLES};

static void make_batch(void) {
    lt_rng r;
    lt_rng_seed(&r, 7);
    for (int i = 0; i < N_SAMPLES; i++) {
        for (int t = 0; t < lengths[i]; t++) tokens[i][t] = (int32_t)lt_rng_below(&r, 61);
        samples[i].tokens = tokens[i];
        samples[i].len = lengths[i];
    }
}

static const lt_train_slice whole[] = {{0, 0, 11}, {1, 0, 5}, {2, 0, 37}, {3, 0, 1}};
static const lt_train_slice packed_a[] = {{2, 0, 37}, {1, 0, 5}}, packed_b[] = {{3, 0, 1}, {0, 0, 11}};
static const lt_train_slice sliced_a[] = {{2, 0, 4}, {0, 0, 6}}, sliced_b[] = {{0, 6, 11}, {2, 4, 20}, {1, 0, 2}},
                            sliced_c[] = {{2, 20, 21}, {1, 2, 5}}, sliced_d[] = {{3, 0, 1}, {2, 21, 37}};

/* Gradients and loss of the batch split into units, through layers split at cut (cut ==
 * layers: one stage); the second stage's input and din travel in the backend's elements. */
static double grads_of(const lt_llama *m, const lt_train_unit *units, int n_units, int cut, float *gbuf) {
    lt_error err;
    memset(gbuf, 0, m->n_params * sizeof(float));
    lt_layer_views lv[8];
    lt_llama_views g;
    lt_llama_views_of(m, gbuf, lv, &g);
    float scale = (float)(1.0 / (double)lt_batch_predicted_tokens(&batch));
    if (cut == m->shape.layers) {
        double loss;
        assert_int_equal(lt_llama_step_units(m, &batch, units, n_units, scale, &g, NULL, &loss, NULL, &err), LT_OK);
        return loss;
    }
    const lt_backend *be = lt_backend_of(m);
    lt_kvctx kv;
    assert_int_equal(lt_kvctx_init(&kv, m, &batch, true, &err), LT_OK);
    lt_pass p0 = {.l0 = 0, .l1 = cut, .embed = true, .loss_scale = scale};
    lt_pass p1 = {.l0 = cut, .l1 = m->shape.layers, .head = true, .loss_scale = scale};
    lt_acts a0[8], a1[8];
    double loss = 0;
    for (int i = 0; i < n_units; i++) {
        assert_int_equal(lt_acts_alloc(&a0[i], m, &batch, &units[i], 0, cut, false, &err), LT_OK);
        assert_int_equal(lt_acts_alloc(&a1[i], m, &batch, &units[i], cut, m->shape.layers, true, &err), LT_OK);
        double l;
        assert_int_equal(lt_llama_forward(m, &p0, &batch, &units[i], NULL, &kv, &a0[i], &g, &l, NULL, NULL, &err), LT_OK);
        assert_int_equal(lt_llama_forward(m, &p1, &batch, &units[i], a0[i].out, &kv, &a1[i], &g, &l, NULL, NULL, &err),
                         LT_OK);
        loss += l;
    }
    for (int i = n_units - 1; i >= 0; i--) {
        size_t TC = (size_t)a1[i].T * (size_t)m->shape.hidden;
        float *din = be->alloc(be, TC * be->act_bytes, true);
        assert_non_null(din);
        assert_int_equal(lt_llama_backward(m, &p1, &batch, &units[i], NULL, &kv, &a1[i], &g, din, NULL, &err), LT_OK);
        assert_int_equal(lt_llama_backward(m, &p0, &batch, &units[i], din, &kv, &a0[i], &g, NULL, NULL, &err), LT_OK);
        be->free(be, din);
        lt_acts_free(&a0[i]);
        lt_acts_free(&a1[i]);
    }
    lt_kvctx_free(&kv);
    return loss;
}

/* Largest per-tensor relative error ||a - b|| / ||b|| over the model's tensors (the
 * tensor named in *worst). */
static double worst_tensor_rel(const lt_llama *m, const float *a, const float *b, const char **worst) {
    double w = 0;
    for (int t = 0; t < m->n_tensors; t++) {
        const lt_tensor_info *ti = &m->tensors[t];
        size_t n = (size_t)ti->rows * (size_t)ti->cols;
        double d2 = 0, b2 = 0;
        for (size_t i = 0; i < n; i++) {
            double d = (double)a[ti->offset + i] - b[ti->offset + i];
            d2 += d * d, b2 += (double)b[ti->offset + i] * b[ti->offset + i];
        }
        double r = b2 > 0 ? sqrt(d2 / b2) : sqrt(d2);
        if (isnan(r)) { /* a NaN gradient (`r > w` would skip it) fails every `<=` check */
            *worst = ti->name;
            return NAN;
        }
        if (r > w) w = r, *worst = ti->name;
    }
    return w;
}

static void bf16_rounding(void **state) {
    (void)state;
    assert_int_equal(lt_bf16_from_f32(1.0f), 0x3f80);
    assert_true(lt_bf16_to_f32(0x3f80) == 1.0f);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0) */
    assert_int_equal(lt_bf16_from_f32(1.0f + 0x1p-8f), 0x3f80);
    /* 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up to even */
    assert_int_equal(lt_bf16_from_f32(1.0f + 3 * 0x1p-8f), 0x3f82);
    assert_int_equal(lt_bf16_from_f32(-2.0f), 0xc000);
    assert_true(isnan(lt_bf16_to_f32(lt_bf16_from_f32(NAN))));
}

/* The batch whole, packed and sliced, and over two stages, in bf16 storage vs fp32. */
static void bf16_gradients_near_fp32(void **state) {
    (void)state;
    make_batch();
    for (int variant = 0; variant <= 2; variant++) { /* untied, tied, tied Qwen2 (biases, llama3 RoPE) */
        int tied = variant >= 1;
        lt_llama m32, m16;
        make_model_family(&m32, tied, variant == 2, NULL);
        make_model_family(&m16, tied, variant == 2, lt_backend_cpu_bf16());
        size_t n = m32.n_params;
        float *ref = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
        assert_true(ref && g);
        lt_train_unit u_whole[] = {{&whole[0], 1}, {&whole[1], 1}, {&whole[2], 1}, {&whole[3], 1}};
        lt_train_unit u_packed[] = {{packed_a, 2}, {packed_b, 2}};
        lt_train_unit u_sliced[] = {{sliced_a, 2}, {sliced_b, 3}, {sliced_c, 2}, {sliced_d, 2}};
        double l_ref = grads_of(&m32, u_whole, 4, m32.shape.layers, ref);
        struct {
            const char *what;
            lt_train_unit *u;
            int n_units, cut;
        } cases[] = {{"whole", u_whole, 4, m16.shape.layers},
                     {"packed", u_packed, 2, m16.shape.layers},
                     {"sliced", u_sliced, 4, m16.shape.layers},
                     {"sliced, two stages", u_sliced, 4, 1}};
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            double l = grads_of(&m16, cases[c].u, cases[c].n_units, cases[c].cut, g);
            const char *worst = "";
            double rel = worst_tensor_rel(&m16, g, ref, &worst);
            print_message("cpu-bf16 %s (tied %d%s): loss %.6f vs fp32 %.6f, worst tensor %s rel %.2e\n",
                          cases[c].what, tied, variant == 2 ? ", qwen2" : "", l, l_ref, worst, rel);
            assert_true(fabs(l - l_ref) <= 1e-2 * fabs(l_ref));
            assert_true(rel <= BF16_TOL);
            assert_true(rel > 0); /* bf16 storage changed something: the emulation is on */
        }
        free(ref), free(g);
        lt_llama_free(&m32);
        lt_llama_free(&m16);
    }
}

/* A window set filled row by row before each layer (lt_cp_hooks.layer_begin). */
typedef struct window_fill {
    const lt_acts *src;
    lt_acts *win;
    const lt_llama *m;
    int calls;
} window_fill;

static lt_status fill_layer(void *ctx, int l, lt_error *err) {
    window_fill *w = ctx;
    w->calls++;
    for (int t = 0; t < w->win->T; t++) {
        lt_status st = lt_acts_copy_row(w->win, t, w->src, t, l, l + 1, false, w->m, err);
        if (st != LT_OK) return st;
    }
    return LT_OK;
}

/* Row moves with 2-byte elements are exact, and the sets' bytes are the bf16 layout's. */
static void bf16_rows_windows_and_kept_rows(void **state) {
    (void)state;
    make_batch();
    lt_llama m;
    make_model(&m, 0, lt_backend_cpu_bf16());
    const lt_backend *be = lt_backend_of(&m);
    assert_int_equal(be->act_bytes, 2);
    lt_error err;
    int L = m.shape.layers;
    size_t C = (size_t)m.shape.hidden, F = (size_t)m.shape.ffn, n = m.n_params;
    size_t nh = (size_t)m.shape.heads, qd = (size_t)m.head_dim * nh;
    lt_train_unit u = {&whole[2], 1}; /* 37 tokens */
    float *gf = calloc(n, sizeof(float)), *g1 = calloc(n, sizeof(float)), *g2 = calloc(n, sizeof(float));
    assert_true(gf && g1 && g2);
    lt_layer_views lv[3][8];
    lt_llama_views vf, v1, v2;
    lt_llama_views_of(&m, gf, lv[0], &vf), lt_llama_views_of(&m, g1, lv[1], &v1), lt_llama_views_of(&m, g2, lv[2], &v2);
    lt_kvctx kv;
    assert_int_equal(lt_kvctx_init(&kv, &m, &batch, true, &err), LT_OK);
    lt_pass pass = {.l0 = 0, .l1 = L, .embed = true, .head = true, .loss_scale = 0.01f};
    lt_acts a, w;
    assert_int_equal(lt_acts_alloc(&a, &m, &batch, &u, 0, L, true, &err), LT_OK);
    /* the 2-byte layout: each array padded to the backend's 16-byte alignment */
    size_t T = 37, al = be->align;
#define SPAN(elems, es) (((size_t)(elems) * (es) + al - 1) / al * al)
    size_t layer = SPAN(T * C, 2) * 4 + SPAN(T, 4) * 2 + SPAN(T * qd, 2) * 2 + SPAN(T * nh, 4) + SPAN(T * F, 2) * 3;
    assert_int_equal(a.bytes, layer * (size_t)L + SPAN(T * C, 2) * 2 + T * 3 * sizeof(int32_t));
    assert_int_equal(lt_llama_forward(&m, &pass, &batch, &u, NULL, &kv, &a, &vf, NULL, NULL, NULL, &err), LT_OK);
    assert_int_equal(lt_llama_backward(&m, &pass, &batch, &u, NULL, &kv, &a, &v1, NULL, NULL, &err), LT_OK);
    lt_kvctx_zero_grad(&kv);
    assert_int_equal(lt_acts_alloc_window(&w, &m, &batch, &u, 0, L, true, &err), LT_OK);
    assert_int_equal(w.bytes, layer + SPAN(T * C, 2) + T * 3 * sizeof(int32_t)); /* one layer + dnf_in */
    for (int t = 0; t < w.T; t++) assert_int_equal(lt_acts_copy_row(&w, t, &a, t, L, L, true, &m, &err), LT_OK);
    window_fill wf = {&a, &w, &m, 0};
    lt_cp_hooks h = {.ctx = &wf, .layer_begin = fill_layer};
    assert_int_equal(lt_llama_backward_group(&m, &pass, &batch, &u, 1, NULL, &kv, &w, &v2, &h, NULL, NULL, &err), LT_OK);
    assert_int_equal(wf.calls, L);
    assert_memory_equal(g1, g2, n * sizeof(float));
    lt_acts_free(&w);
    /* a packed row is the 2-byte elements and the fp32 statistics: fewer floats than fp32's */
    size_t rf = lt_acts_row_floats(&m, 0, L, true);
    size_t row_bytes = ((4 * C + 2 * qd + 3 * F) * 2 + (2 + nh) * 4) * (size_t)L + C * 2;
    assert_int_equal(rf, (row_bytes + 3) / 4);
    int keep[] = {0, 5, 6, 36};
    size_t ob = C * 2; /* out's row, moved by keep_rows though not packed */
    char *before = calloc(4, rf * 4 + ob), *after = calloc(1, rf * 4 + ob);
    assert_true(before && after);
    for (int k = 0; k < 4; k++) {
        char *p = before + (size_t)k * (rf * 4 + ob);
        assert_int_equal(lt_acts_pack_row(&a, keep[k], 0, L, true, &m, (float *)p, &err), LT_OK);
        memcpy(p + rf * 4, (char *)a.out + (size_t)keep[k] * ob, ob);
    }
    assert_int_equal(lt_acts_keep_rows(&a, keep, 4, &m, &err), LT_OK);
    assert_int_equal(a.T, 4);
    T = 4;
    layer = SPAN(T * C, 2) * 4 + SPAN(T, 4) * 2 + SPAN(T * qd, 2) * 2 + SPAN(T * nh, 4) + SPAN(T * F, 2) * 3;
    assert_int_equal(a.bytes, layer * (size_t)L + SPAN(T * C, 2) * 2 + T * 3 * sizeof(int32_t));
    for (int k = 0; k < 4; k++) {
        assert_int_equal(a.pos[k], keep[k]);
        assert_int_equal(lt_acts_pack_row(&a, k, 0, L, true, &m, (float *)after, &err), LT_OK);
        memcpy(after + rf * 4, (char *)a.out + (size_t)k * ob, ob);
        assert_memory_equal(after, before + (size_t)k * (rf * 4 + ob), rf * 4 + ob);
    }
    /* unpack into another row and pack it again: the same bytes */
    assert_int_equal(lt_acts_unpack_row(&a, 1, 0, L, true, &m, (const float *)before, &err), LT_OK);
    assert_int_equal(lt_acts_pack_row(&a, 1, 0, L, true, &m, (float *)after, &err), LT_OK);
    assert_memory_equal(after, before, rf * 4);
#undef SPAN
    free(before), free(after), free(gf), free(g1), free(g2);
    lt_acts_free(&a);
    lt_kvctx_free(&kv);
    lt_llama_free(&m);
}

typedef struct count {
    size_t live, peak;
} count;

static void count_add(void *ctx, size_t bytes) {
    count *c = ctx;
    c->live += bytes;
    if (c->live > c->peak) c->peak = c->live;
}

static void count_sub(void *ctx, size_t bytes) {
    count *c = ctx;
    assert_true(bytes <= c->live);
    c->live -= bytes;
}

/* The K/V context and a pass's scratch counted in 2-byte elements; logits out as fp32. */
static void bf16_meter_and_logits(void **state) {
    (void)state;
    make_batch();
    lt_llama m, m32;
    make_model(&m, 0, lt_backend_cpu_bf16());
    make_model(&m32, 0, NULL);
    lt_error err;
    int L = m.shape.layers;
    size_t T = 37, C = (size_t)m.shape.hidden, V = (size_t)m.shape.vocab;
    size_t kvd = (size_t)m.head_dim * (size_t)m.shape.kv_heads;
    lt_train_unit u = {&whole[2], 1};
    float *g = calloc(m.n_params, sizeof(float));
    float *lg = malloc(T * V * sizeof(float)), *lg32 = malloc(T * V * sizeof(float));
    assert_true(g && lg && lg32);
    lt_layer_views lv[8];
    lt_llama_views v;
    lt_llama_views_of(&m, g, lv, &v);
    count c = {0};
    lt_meter meter = {.ctx = &c, .add = count_add, .sub = count_sub};
    lt_kvctx kv, kv32;
    assert_int_equal(lt_kvctx_init(&kv, &m, &batch, true, &err), LT_OK);
    assert_int_equal(lt_kvctx_init(&kv32, &m32, &batch, false, &err), LT_OK);
    kv.meter = &meter;
    lt_pass pass = {.l0 = 0, .l1 = L, .embed = true, .head = true, .loss_scale = 0.01f, .meter = &meter};
    lt_pass eval = {.l0 = 0, .l1 = L, .embed = true, .head = true};
    lt_acts a, a32;
    assert_int_equal(lt_acts_alloc(&a, &m, &batch, &u, 0, L, true, &err), LT_OK);
    assert_int_equal(lt_acts_alloc(&a32, &m32, &batch, &u, 0, L, true, &err), LT_OK);
    double loss, loss32;
    assert_int_equal(lt_llama_forward(&m, &pass, &batch, &u, NULL, &kv, &a, &v, &loss, lg, NULL, &err), LT_OK);
    assert_int_equal(lt_llama_forward(&m32, &eval, &batch, &u, NULL, &kv32, &a32, NULL, &loss32, lg32, NULL, &err),
                     LT_OK);
    size_t kv_bytes = T * 2 * kvd * 2 * (size_t)L;
    assert_int_equal(c.live, kv_bytes);
    assert_int_equal(c.live, lt_kvctx_bytes(&kv));
    size_t ld = (size_t)lt_backend_logits_ld(lt_backend_cpu_bf16(), (int)V); /* the logits rows, padded */
    assert_int_equal(ld, 64);
    size_t fwd = T * (2 * kvd + C) * 2, head = T * (2 * C + ld) * 2 + T * 4;
    assert_int_equal(c.peak, kv_bytes + (fwd > head ? fwd : head));
    /* logits come back as fp32 near the reference's (bf16: about 3 significant digits) */
    double d = 0, s = 0;
    size_t nans = 0; /* (fmax skips them) */
    for (size_t i = 0; i < T * V; i++) {
        d = fmax(d, fabs((double)lg[i] - lg32[i])), s = fmax(s, fabs((double)lg32[i]));
        if (isnan(lg[i])) nans++;
    }
    assert_int_equal(nans, 0);
    print_message("cpu-bf16 logits: max |diff| %.3e of max |logit| %.3e; loss %.6f vs %.6f\n", d, s, loss, loss32);
    assert_true(s > 0 && d <= 3e-2 * s);
    assert_true(fabs(loss - loss32) <= 1e-2 * fabs(loss32));
    assert_int_equal(lt_kvctx_release(&kv, 2, 0, L), kv_bytes);
    assert_int_equal(c.live, 0);
    lt_acts_free(&a), lt_acts_free(&a32);
    lt_kvctx_free(&kv), lt_kvctx_free(&kv32);
    free(g), free(lg), free(lg32);
    lt_llama_free(&m), lt_llama_free(&m32);
}

/* The LM head's logits rows padded: cpu-bf16 lays them out as the GPU does (V rounded up to
 * 64 elements, kernels/gemm.cu), the padding NaN under LONGTAIL_POISON (set here too, for a
 * run by hand). With an odd vocabulary, a small one and GPT-2's 50257, the batch's loss and
 * every gradient (packed units, and sliced over two stages) are the fp32 reference's (dense
 * rows) within the bf16 tolerance, none NaN: the padding never counts as a logit. */
static void bf16_odd_vocab_padded_head(void **state) {
    (void)state;
    setenv("LONGTAIL_POISON", "1", 1);
    make_batch();
    const int vocabs[] = {61, 50257};
    for (int k = 0; k < 2; k++) {
        int V = vocabs[k];
        assert_int_equal(lt_backend_logits_ld(lt_backend_cpu_bf16(), V), (V + 63) / 64 * 64);
        assert_true(lt_backend_logits_ld(lt_backend_cpu_bf16(), V) > V);
        assert_int_equal(lt_backend_logits_ld(lt_backend_cpu(), V), V); /* the reference stays dense */
        lt_llama m32, m16;
        make_model_vocab(&m32, 0, false, V, NULL);
        make_model_vocab(&m16, 0, false, V, lt_backend_cpu_bf16());
        size_t n = m32.n_params;
        float *ref = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
        assert_true(ref && g);
        lt_train_unit u_whole[] = {{&whole[0], 1}, {&whole[1], 1}, {&whole[2], 1}, {&whole[3], 1}};
        lt_train_unit u_packed[] = {{packed_a, 2}, {packed_b, 2}};
        lt_train_unit u_sliced[] = {{sliced_a, 2}, {sliced_b, 3}, {sliced_c, 2}, {sliced_d, 2}};
        double l_ref = grads_of(&m32, u_whole, 4, m32.shape.layers, ref);
        for (int c = 0; c < 2; c++) {
            double l = c == 0 ? grads_of(&m16, u_packed, 2, m16.shape.layers, g) : grads_of(&m16, u_sliced, 4, 1, g);
            const char *worst = "";
            double rel = worst_tensor_rel(&m16, g, ref, &worst);
            print_message("cpu-bf16, V %d (logits rows %d apart), %s: loss %.6f vs %.6f, worst %s rel %.2e\n", V,
                          lt_backend_logits_ld(lt_backend_cpu_bf16(), V), c == 0 ? "packed" : "sliced, two stages", l,
                          l_ref, worst, rel);
            assert_true(rel <= BF16_TOL && rel > 0);
            assert_true(fabs(l - l_ref) <= 1e-2 * fabs(l_ref));
        }
        free(ref), free(g);
        lt_llama_free(&m32), lt_llama_free(&m16);
    }
}

/* ---------------------------------------------------------------- the executor in bf16 */

/* tests/train/test_exec.c's hand-made plan: one pipeline of 2 stages over the batch's
 * samples 0 (11 tokens), 1 (5) and 2 (37): forward units u0 = samples 0 + 1, u1 = sample 2
 * [0, 15), u2 = [15, 37); with `asym` backward units b0 = sample 2 [30, 37), b1 = [5, 30),
 * b2 = samples 0, 1 and sample 2 [0, 5); recompute r0 / r1 layers on stage 0 / 1. */
static void exec_plan(lt_step_plan *p, int layers, bool asym, uint16_t r0, uint16_t r1, uint16_t cp) {
    lt_step_plan_init(p);
    p->step = 1;
    p->n_samples = 3;
    p->lengths = calloc(3, sizeof *p->lengths);
    p->sample_rank = calloc(3, sizeof *p->sample_rank);
    p->n_ranks = 1;
    p->ranks = calloc(1, sizeof *p->ranks);
    assert_true(p->lengths && p->sample_rank && p->ranks);
    for (int i = 0; i < 3; i++) p->lengths[i] = lengths[i];
    p->n_predicted = lt_plan_predicted_tokens(p->lengths, 3);
    p->pp = 2;
    lt_rank_plan *r = &p->ranks[0];
    r->cp = cp;
    assert_int_equal(lt_schedule_init(&r->sched, 2, layers, NULL), LT_OK);
    r->ops = calloc(12, sizeof *r->ops);
    assert_non_null(r->ops);
    lt_schedule *s = &r->sched;
    lt_schedule_add_slice(s, 0, 0, 11), lt_schedule_add_slice(s, 1, 0, 5), lt_schedule_add_unit(s, 0, 2);
    lt_schedule_add_slice(s, 2, 0, 15), lt_schedule_add_unit(s, 2, 1);
    lt_schedule_add_slice(s, 2, 15, 37), lt_schedule_add_unit(s, 3, 1);
    if (asym) {
        lt_schedule_add_bslice(s, 0, 0, 11), lt_schedule_add_bslice(s, 1, 0, 5), lt_schedule_add_bslice(s, 2, 0, 5);
        lt_schedule_add_bslice(s, 2, 5, 30), lt_schedule_add_bslice(s, 2, 30, 37);
        lt_schedule_add_bunit(s, 4, 1), lt_schedule_add_bunit(s, 3, 1), lt_schedule_add_bunit(s, 0, 3);
    }
    for (int st = 0; st < 2; st++) {
        uint16_t rc = st == 0 ? r0 : r1;
        for (uint32_t u = 0; u < 3; u++) lt_schedule_add_stage_op(s, st, LT_OP_F, u, rc);
        for (uint32_t k = 0; k < 3; k++) lt_schedule_add_stage_op(s, st, LT_OP_B, asym ? k : 2 - k, rc);
    }
}

static void bf16_executor_near_fp32(void **state) {
    (void)state;
    make_batch();
    lt_llama m32, m16;
    make_model(&m32, 0, NULL);
    make_model(&m16, 0, lt_backend_cpu_bf16());
    size_t n = m32.n_params;
    float *ref = calloc(n, sizeof(float)), *g = calloc(n, sizeof(float)), *g32 = calloc(n, sizeof(float));
    assert_true(ref && g && g32);
    lt_layer_views lv[3][8];
    lt_llama_views vref, vg, vg32;
    lt_llama_views_of(&m32, ref, lv[0], &vref), lt_llama_views_of(&m16, g, lv[1], &vg);
    lt_llama_views_of(&m32, g32, lv[2], &vg32);
    lt_batch three = {samples, 3};
    lt_train_unit u_whole[] = {{&whole[0], 1}, {&whole[1], 1}, {&whole[2], 1}};
    float scale = (float)(1.0 / (double)lt_batch_predicted_tokens(&three));
    double l_ref;
    lt_error err;
    assert_int_equal(lt_llama_step_units(&m32, &three, u_whole, 3, scale, &vref, NULL, &l_ref, NULL, &err), LT_OK);
    /* cp 2 and 3: a static context-parallel pipeline in one process (every member local: the
     * group's forward in lockstep, regrouped backward rows and kept inputs moved in 2-byte
     * elements); cp 3 leaves a member's shard of the 2-slice unit empty */
    for (int cp = 1; cp <= 3; cp++)
    for (int asym = 0; asym <= 1; asym++)
        for (int rc = 0; rc <= 1; rc++) {
            lt_step_plan p;
            exec_plan(&p, m16.shape.layers, asym, (uint16_t)rc, (uint16_t)rc, (uint16_t)cp);
            lt_exec_stats es = {0}, es32 = {0};
            memset(g, 0, n * sizeof(float)), memset(g32, 0, n * sizeof(float));
            lt_status st = lt_exec_step(&m16, &p, samples, &vg, &es, NULL, &err);
            if (st != LT_OK) fail_msg("lt_exec_step on cpu-bf16: %s (%s)", err.what, err.where);
            assert_int_equal(lt_exec_step(&m32, &p, samples, &vg32, &es32, NULL, &err), LT_OK);
            const char *worst = "";
            double rel = worst_tensor_rel(&m16, g, ref, &worst);
            print_message("cpu-bf16 executor (cp %d, asym %d, recompute %d): loss %.6f vs %.6f, worst %s rel %.2e; "
                          "stage 0 peak %zu B vs fp32 %zu B\n", cp, asym, rc, es.loss_sum, l_ref, worst, rel,
                          es.stage_peak_bytes[0], es32.stage_peak_bytes[0]);
            assert_true(rel <= BF16_TOL && rel > 0);
            assert_true(fabs(es.loss_sum - l_ref) <= 1e-2 * fabs(l_ref));
            /* 2-byte activations: the measured peak is well under fp32's (rstd, lse and
             * the ints stay 4 bytes) */
            assert_true(es.stage_peak_bytes[0] < es32.stage_peak_bytes[0] * 3 / 4);
            lt_exec_stats_free(&es), lt_exec_stats_free(&es32);
            lt_step_plan_free(&p);
        }
    free(ref), free(g), free(g32);
    lt_llama_free(&m32), lt_llama_free(&m16);
}

/* LONGTAIL_POISON (set by the test suite, Makefile.am): a fresh buffer not asked zeroed
 * reads as NaN on both CPU backends, in fp32 and in bf16, and a zeroed one as zeros, so a
 * pass that reads what it never wrote fails in these tests as it would on the GPU's reused
 * arena. Fails when the suite's environment lost the switch, so it cannot silently stop. */
static void fresh_buffers_poisoned(void **state) {
    (void)state;
    const char *v = getenv("LONGTAIL_POISON");
    if (!v || strcmp(v, "1") != 0)
        fail_msg("LONGTAIL_POISON is not 1 here: the test suite sets it (Makefile.am AM_TESTS_ENVIRONMENT); "
                 "run this program by hand with LONGTAIL_POISON=1");
    enum { N = 37 }; /* odd: no size the allocator rounds to */
    const lt_backend *bes[] = {lt_backend_cpu(), lt_backend_cpu_bf16()};
    for (int b = 0; b < 2; b++) {
        const lt_backend *be = bes[b];
        void *p = be->alloc(be, N * be->act_bytes, false), *z = be->alloc(be, N * be->act_bytes, true);
        float f[N];
        assert_true(p && z);
        lt_error err;
        assert_int_equal(be->to_host_f32(be, f, p, N, &err), LT_OK);
        for (int i = 0; i < N; i++) assert_true(isnan(f[i]));
        assert_int_equal(be->to_host_f32(be, f, z, N, &err), LT_OK);
        for (int i = 0; i < N; i++) assert_true(f[i] == 0.0f);
        be->free(be, p), be->free(be, z);
    }
}

/* A backend that keeps an allocation failure's reason, as the CUDA arena does. */
static bool kept_reason = true;
static bool reason_stub(const lt_backend *be, lt_error *why) {
    (void)be;
    bool had = kept_reason;
    if (had && why) {
        lt_fail(why, LT_ERR_NOMEM, NULL, "the device arena cannot hold 512 bytes for a pass buffer: 256 of its 1024 "
                                         "bytes are free");
        lt_error_hint(why, "lower plan.mem");
    }
    kept_reason = false;
    return had;
}

/* lt_backend_nomem: the caller's WHAT, then the backend's reason (taken once) with its
 * hint; on the CPU (no reason kept) the caller's WHAT alone. */
static void nomem_carries_the_backends_reason(void **state) {
    (void)state;
    lt_error err;
    assert_int_equal(lt_backend_nomem(lt_backend_cpu(), &err, "kv context", "out of memory for %d rows", 7),
                     LT_ERR_NOMEM);
    assert_string_equal(err.what, "out of memory for 7 rows");
    assert_string_equal(err.where, "kv context");
    lt_backend arena = *lt_backend_cpu();
    arena.alloc_failure = reason_stub;
    assert_int_equal(lt_backend_nomem(&arena, &err, NULL, "out of memory for a %d-token unit", 9), LT_ERR_NOMEM);
    assert_string_equal(err.what, "out of memory for a 9-token unit: the device arena cannot hold 512 bytes for a "
                                  "pass buffer: 256 of its 1024 bytes are free");
    assert_string_equal(err.hint, "lower plan.mem");
    /* taken: the next failure without a reason says only what it was for */
    assert_int_equal(lt_backend_nomem(&arena, &err, NULL, "out of memory"), LT_ERR_NOMEM);
    assert_string_equal(err.what, "out of memory");
    assert_string_equal(err.hint, "");
}

/* The CUDA backend where it cannot open (a build without CUDA, or no device): LT_ERR_CONFIG
 * with lt_cuda_open's reason and nothing opened; on a machine with a GPU it opens (and the
 * rest is scripts/gpu-check.sh's). */
static void cuda_backend_refuses_without_device(void **state) {
    (void)state;
    lt_backend *be = (lt_backend *)1;
    lt_error err;
    lt_status st = lt_backend_cuda_open(&be, 0, &err);
    if (st == LT_OK) {
        assert_non_null(be);
        assert_string_equal(be->name, "cuda");
        assert_int_equal(be->act_bytes, 2);
        lt_backend_cuda_close(be);
        skip();
    }
    assert_int_equal(st, LT_ERR_CONFIG);
    assert_null(be);
    assert_true(strstr(err.what, "built without CUDA") || strstr(err.what, "no CUDA device"));
    lt_backend_cuda_close(NULL); /* NULL-safe */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bf16_rounding),
        cmocka_unit_test(fresh_buffers_poisoned),
        cmocka_unit_test(nomem_carries_the_backends_reason),
        cmocka_unit_test(bf16_gradients_near_fp32),
        cmocka_unit_test(bf16_rows_windows_and_kept_rows),
        cmocka_unit_test(bf16_meter_and_logits),
        cmocka_unit_test(bf16_odd_vocab_padded_head),
        cmocka_unit_test(bf16_executor_near_fp32),
        cmocka_unit_test(cuda_backend_refuses_without_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
