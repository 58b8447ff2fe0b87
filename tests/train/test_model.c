/*
 * tests/train/test_model.c — the trainer's model (train/model/model.h) on its own: the tensor
 * table, deterministic init, unit checks and labels, and the equivalences the executor
 * relies on: any split of a batch into units (whole, packed, sliced with KV context) and
 * any split of the layers into stages gives the same loss and gradients; threads change
 * nothing; a forward's rows kept (lt_acts_keep_rows) and a backward's activations filled
 * one layer at a time into a window set give the same rows and bit-identical gradients;
 * what a pass and a KV context report to a meter (lt_meter) is what they allocate;
 * HelixPipe's layer parts (lt_llama_forward_part / lt_llama_backward_part: pre-attention,
 * attention with the QKV linear, post-attention), each layer of each unit in its own
 * activations, give bit-identical loss and gradients to whole layers, on sliced units, tied
 * or not, layer-major or unit-major.
 * PyTorch parity of the same model is tests/train/torch_parity.py.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/rng.h"
#include "lib/threadpool.h"
#include "train/model/model.h"

static lt_model_shape test_shape(void) {
    lt_model_shape s = *lt_model_preset("nano");
    s.vocab = 61;
    return s;
}

/* A model with random weights (larger than the init's, so every path matters). */
static void make_model(lt_llama *m, int tied) {
    lt_model_shape s = test_shape();
    s.tie_embeddings = tied;
    lt_error err;
    assert_int_equal(lt_llama_create(m, &s, &err), LT_OK);
    lt_rng r;
    lt_rng_seed(&r, 99);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] = (float)(0.1 * lt_rng_normal(&r));
    for (int t = 0; t < m->n_tensors; t++)
        if (m->tensors[t].rows == 1)
            for (int c = 0; c < m->tensors[t].cols; c++) m->params[m->tensors[t].offset + c] += 1.0f;
}

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

/* Gradients (and the loss) of the batch split into `units`, through stages of layers
 * split at `cut` (cut == layers: one stage). */
static double grads_of(const lt_llama *m, const lt_train_unit *units, int n_units, int cut, lt_pool *pool, float *gbuf) {
    lt_error err;
    memset(gbuf, 0, m->n_params * sizeof(float));
    lt_layer_views lv[8];
    lt_llama_views g;
    lt_llama_views_of(m, gbuf, lv, &g);
    float scale = (float)(1.0 / (double)lt_batch_predicted_tokens(&batch));
    if (cut == m->shape.layers) {
        double loss;
        assert_int_equal(lt_llama_step_units(m, &batch, units, n_units, scale, &g, NULL, &loss, pool, &err), LT_OK);
        return loss;
    }
    /* two stages in one process: stage 0 = embedding + layers [0, cut), stage 1 = the rest + head */
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
        assert_int_equal(lt_llama_forward(m, &p0, &batch, &units[i], NULL, &kv, &a0[i], &g, &l, NULL, pool, &err), LT_OK);
        assert_int_equal(lt_llama_forward(m, &p1, &batch, &units[i], a0[i].out, &kv, &a1[i], &g, &l, NULL, pool, &err),
                         LT_OK);
        loss += l;
    }
    for (int i = n_units - 1; i >= 0; i--) {
        size_t TC = (size_t)a1[i].T * (size_t)m->shape.hidden;
        float *din = calloc(TC, sizeof(float));
        assert_non_null(din);
        assert_int_equal(lt_llama_backward(m, &p1, &batch, &units[i], NULL, &kv, &a1[i], &g, din, pool, &err), LT_OK);
        assert_int_equal(lt_llama_backward(m, &p0, &batch, &units[i], din, &kv, &a0[i], &g, NULL, pool, &err), LT_OK);
        free(din);
        lt_acts_free(&a0[i]);
        lt_acts_free(&a1[i]);
    }
    lt_kvctx_free(&kv);
    return loss;
}

/* max |a - b| / max |b|; NaN when any element is (so that the `<=` checks fail on it) */
static double max_rel(const float *a, const float *b, size_t n) {
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (isnan(d)) return NAN;
        if (d > diff) diff = d;
        if (fabs(b[i]) > scale) scale = fabs(b[i]);
    }
    return diff / scale;
}

/* The batch three ways: whole samples, packed differently, sliced with KV context. */
static const lt_train_slice whole[] = {{0, 0, 11}, {1, 0, 5}, {2, 0, 37}, {3, 0, 1}};
static const lt_train_slice packed_a[] = {{2, 0, 37}, {1, 0, 5}}, packed_b[] = {{3, 0, 1}, {0, 0, 11}};
static const lt_train_slice sliced_a[] = {{2, 0, 4}, {0, 0, 6}}, sliced_b[] = {{0, 6, 11}, {2, 4, 20}, {1, 0, 2}},
                      sliced_c[] = {{2, 20, 21}, {1, 2, 5}}, sliced_d[] = {{3, 0, 1}, {2, 21, 37}};

static void split_three_ways_same_gradients(void **state) {
    (void)state;
    make_batch();
    for (int tied = 0; tied <= 1; tied++) {
        lt_llama m;
        make_model(&m, tied);
        float *g_whole = malloc(m.n_params * sizeof(float)), *g = malloc(m.n_params * sizeof(float));
        assert_non_null(g_whole);
        assert_non_null(g);
        lt_train_unit u_whole[] = {{&whole[0], 1}, {&whole[1], 1}, {&whole[2], 1}, {&whole[3], 1}};
        lt_train_unit u_packed[] = {{packed_a, 2}, {packed_b, 2}};
        lt_train_unit u_sliced[] = {{sliced_a, 2}, {sliced_b, 3}, {sliced_c, 2}, {sliced_d, 2}};
        double l_whole = grads_of(&m, u_whole, 4, m.shape.layers, NULL, g_whole);
        double l = grads_of(&m, u_packed, 2, m.shape.layers, NULL, g);
        assert_true(fabs(l - l_whole) <= 1e-5 * fabs(l_whole));
        assert_true(max_rel(g, g_whole, m.n_params) <= 1e-5);
        l = grads_of(&m, u_sliced, 4, m.shape.layers, NULL, g);
        assert_true(fabs(l - l_whole) <= 1e-5 * fabs(l_whole));
        assert_true(max_rel(g, g_whole, m.n_params) <= 1e-5);
        /* and a gradient that is not zero everywhere (a test that could not fail otherwise) */
        double norm = 0;
        for (size_t i = 0; i < m.n_params; i++) norm += (double)g_whole[i] * g_whole[i];
        assert_true(norm > 1e-6);
        free(g_whole), free(g);
        lt_llama_free(&m);
    }
}

/* Two pipeline stages in one process (layers split at 1) = one stage. */
static void layer_split_same_gradients(void **state) {
    (void)state;
    make_batch();
    lt_llama m;
    make_model(&m, 0);
    float *g1 = malloc(m.n_params * sizeof(float)), *g2 = malloc(m.n_params * sizeof(float));
    assert_non_null(g1);
    assert_non_null(g2);
    lt_train_unit u_sliced[] = {{sliced_a, 2}, {sliced_b, 3}, {sliced_c, 2}, {sliced_d, 2}};
    double l1 = grads_of(&m, u_sliced, 4, m.shape.layers, NULL, g1);
    double l2 = grads_of(&m, u_sliced, 4, 1, NULL, g2);
    assert_true(l1 == l2);
    assert_memory_equal(g1, g2, m.n_params * sizeof(float));
    free(g1), free(g2);
    lt_llama_free(&m);
}

/* Loss and gradients of the batch split into `units`, every layer of every unit run as
 * HelixPipe's three parts, each (unit, layer) in its own single-layer activations: forward
 * PRE, ATTN, POST (unit-major, or layer-major with the units in order inside a layer), then
 * backward POST, ATTN, PRE in the reverse order (FILO over a sample's slices). */
static double grads_by_parts(const lt_llama *m, const lt_train_unit *units, int n_units, bool layer_major,
                             lt_pool *pool, float *gbuf) {
    lt_error err;
    memset(gbuf, 0, m->n_params * sizeof(float));
    lt_layer_views lv[8];
    lt_llama_views g;
    lt_llama_views_of(m, gbuf, lv, &g);
    float scale = (float)(1.0 / (double)lt_batch_predicted_tokens(&batch));
    int L = m->shape.layers;
    lt_kvctx kv;
    assert_int_equal(lt_kvctx_init(&kv, m, &batch, true, &err), LT_OK);
    lt_acts a[8][8];
    lt_part_grads pg[8][8];
    double loss = 0;
    for (int k = 0; k < n_units * L; k++) {
        int i = layer_major ? k % n_units : k / L, l = layer_major ? k / n_units : k % L;
        assert_int_equal(lt_acts_alloc(&a[i][l], m, &batch, &units[i], l, l + 1, l == L - 1, &err), LT_OK);
        for (int part = LT_LAYER_PRE; part <= LT_LAYER_POST; part++) {
            lt_pass p = {.l0 = l, .l1 = l + 1, .embed = l == 0 && part == LT_LAYER_PRE,
                         .head = l == L - 1 && part == LT_LAYER_POST, .loss_scale = scale};
            double ls = 0;
            lt_status st = lt_llama_forward_part(m, &p, (lt_layer_part)part, &units[i], l ? a[i][l - 1].out : NULL, &kv,
                                                 &a[i][l], &g, &ls, pool, &err);
            if (st != LT_OK) fail_msg("forward part %d of layer %d, unit %d: %s", part, l, i, err.what);
            loss += ls;
        }
    }
    for (int k = n_units * L - 1; k >= 0; k--) {
        int i = layer_major ? k % n_units : k / L, l = layer_major ? k / n_units : k % L;
        assert_int_equal(lt_part_grads_alloc(&pg[i][l], m, &a[i][l], &err), LT_OK);
        for (int part = LT_LAYER_POST; part >= LT_LAYER_PRE; part--) {
            lt_pass p = {.l0 = l, .l1 = l + 1, .embed = l == 0 && part == LT_LAYER_PRE,
                         .head = l == L - 1 && part == LT_LAYER_POST, .loss_scale = scale};
            /* POST's dout: the next layer's input gradient (its PRE's din: pg dres of layer l + 1
             * holds d x of that layer once its PRE ran, added into din = a zeroed buffer here) */
            const float *dout = l + 1 < L ? pg[i][l + 1].dres : NULL;
            float *din = NULL;
            if (part == LT_LAYER_PRE && l > 0) din = pg[i][l].dn1; /* (reused: PRE is dn1's last reader) */
            lt_status st;
            if (din) { /* din += d x: a fresh buffer for it */
                size_t TC = (size_t)a[i][l].Tl * (size_t)m->shape.hidden;
                float *d = calloc(TC, sizeof(float));
                assert_non_null(d);
                st = lt_llama_backward_part(m, &p, (lt_layer_part)part, &units[i], dout, &kv, &a[i][l], &g,
                                            &pg[i][l], d, pool, &err);
                memcpy(pg[i][l].dres, d, TC * sizeof(float)); /* dres now d x: layer l - 1's dout */
                free(d);
            } else {
                st = lt_llama_backward_part(m, &p, (lt_layer_part)part, &units[i], dout, &kv, &a[i][l], &g, &pg[i][l],
                                            NULL, pool, &err);
            }
            if (st != LT_OK) fail_msg("backward part %d of layer %d, unit %d: %s", part, l, i, err.what);
        }
        if (l + 1 < L) lt_part_grads_free(&pg[i][l + 1]);
        if (l == 0) lt_part_grads_free(&pg[i][0]);
    }
    for (int i = 0; i < n_units; i++)
        for (int l = 0; l < L; l++) lt_acts_free(&a[i][l]);
    lt_kvctx_free(&kv);
    return loss;
}

static void layer_parts_same_gradients(void **state) {
    (void)state;
    make_batch();
    for (int tied = 0; tied <= 1; tied++) {
        lt_llama m;
        make_model(&m, tied);
        float *g1 = malloc(m.n_params * sizeof(float)), *g2 = malloc(m.n_params * sizeof(float));
        assert_non_null(g1);
        assert_non_null(g2);
        lt_train_unit u_sliced[] = {{sliced_a, 2}, {sliced_b, 3}, {sliced_c, 2}, {sliced_d, 2}};
        double l1 = grads_of(&m, u_sliced, 4, m.shape.layers, NULL, g1);
        for (int lm = 0; lm <= 1; lm++) {
            double l2 = grads_by_parts(&m, u_sliced, 4, lm, NULL, g2);
            if (l1 != l2) fail_msg("tied %d, layer-major %d: loss %.9g by parts, %.9g whole", tied, lm, l2, l1);
            if (memcmp(g1, g2, m.n_params * sizeof(float)))
                fail_msg("tied %d, layer-major %d: gradients differ by %.3g (rel)", tied, lm, max_rel(g2, g1, m.n_params));
        }
        double norm = 0;
        for (size_t i = 0; i < m.n_params; i++) norm += (double)g2[i] * g2[i];
        assert_true(norm > 1e-6);
        free(g1), free(g2);
        lt_llama_free(&m);
    }
}

/* A 2-thread pool gives bit-identical loss and gradients. */
static void threads_change_nothing(void **state) {
    (void)state;
    make_batch();
    lt_llama m;
    make_model(&m, 0);
    lt_pool *pool;
    lt_error err;
    assert_int_equal(lt_pool_create(&pool, 2, &err), LT_OK);
    float *g1 = malloc(m.n_params * sizeof(float)), *g2 = malloc(m.n_params * sizeof(float));
    assert_non_null(g1);
    assert_non_null(g2);
    lt_train_unit u_sliced[] = {{sliced_a, 2}, {sliced_b, 3}, {sliced_c, 2}, {sliced_d, 2}};
    double l1 = grads_of(&m, u_sliced, 4, m.shape.layers, NULL, g1);
    double l2 = grads_of(&m, u_sliced, 4, m.shape.layers, pool, g2);
    assert_true(l1 == l2);
    assert_memory_equal(g1, g2, m.n_params * sizeof(float));
    lt_pool_destroy(pool);
    free(g1), free(g2);
    lt_llama_free(&m);
}

/* The tensor table: Hugging Face names, contiguous, tied drops lm_head. */
static void tensor_table(void **state) {
    (void)state;
    lt_llama m, t;
    make_model(&m, 0);
    make_model(&t, 1);
    lt_model_shape s = test_shape();
    size_t C = (size_t)s.hidden, V = (size_t)s.vocab, F = (size_t)s.ffn, kvd = (size_t)s.kv_heads * (C / (size_t)s.heads);
    size_t per_layer = 2 * C + C * C * 2 + 2 * kvd * C + 3 * F * C;
    assert_int_equal(m.n_params, V * C * 2 + C + (size_t)s.layers * per_layer);
    assert_int_equal(t.n_params, m.n_params - V * C);
    assert_int_equal(m.n_tensors, 3 + 9 * s.layers);
    size_t off = 0;
    for (int i = 0; i < m.n_tensors; i++) {
        assert_int_equal(m.tensors[i].offset, off);
        off += (size_t)m.tensors[i].rows * (size_t)m.tensors[i].cols;
    }
    const lt_tensor_info *k = lt_llama_find_tensor(&m, "model.layers.1.self_attn.k_proj.weight");
    assert_non_null(k);
    assert_int_equal(k->rows, (int)kvd);
    assert_ptr_equal(m.w.layer[1].wk, m.params + k->offset);
    assert_null(lt_llama_find_tensor(&t, "lm_head.weight"));
    assert_ptr_equal(t.w.lm_head, t.w.embed);
    lt_llama_free(&m);
    lt_llama_free(&t);
}

/* Qwen2: the three Q/K/V biases after each layer's Llama tensors (a model without them keeps
 * its table, init and checkpoints), [1, out] vectors, initialized to 0, viewed as bq/bk/bv;
 * the parameter counts agree (lib/model.h's lt_model_params, the model's own). */
static void qwen2_bias_tensors(void **state) {
    (void)state;
    lt_model_shape s = test_shape();
    s.family = LT_FAMILY_QWEN2;
    lt_llama m, plain;
    lt_error err;
    assert_int_equal(lt_llama_create(&m, &s, &err), LT_OK);
    make_model(&plain, 0);
    size_t C = (size_t)s.hidden, kvd = (size_t)s.kv_heads * (C / (size_t)s.heads);
    assert_int_equal(m.n_tensors, 3 + 12 * s.layers);
    assert_int_equal(m.n_params, plain.n_params + (size_t)s.layers * (C + 2 * kvd));
    assert_int_equal(m.n_params, m.n_params_whole);
    s.tie_embeddings = 0;
    assert_float_equal(lt_model_params(&s), (double)m.n_params, 0.5); /* untied: the formula's case */
    static const char *const want[12] = {"input_layernorm.weight", "self_attn.q_proj.weight",
                                         "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                                         "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                                         "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                                         "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"};
    for (int l = 0; l < s.layers; l++)
        for (int i = 0; i < 12; i++) {
            char name[64];
            snprintf(name, sizeof name, "model.layers.%d.%s", l, want[i]);
            assert_string_equal(m.tensors[1 + 12 * l + i].name, name);
        }
    const lt_tensor_info *bq = lt_llama_find_tensor(&m, "model.layers.1.self_attn.q_proj.bias");
    const lt_tensor_info *bk = lt_llama_find_tensor(&m, "model.layers.1.self_attn.k_proj.bias");
    assert_non_null(bq);
    assert_non_null(bk);
    assert_int_equal(bq->rows, 1);
    assert_int_equal(bq->cols, (int)C);
    assert_int_equal(bk->cols, (int)kvd);
    assert_ptr_equal(m.w.layer[1].bq, m.params + bq->offset);
    assert_ptr_equal(m.w.layer[1].bk, m.params + bk->offset);
    assert_null(plain.w.layer[1].bq);
    /* layer 0's Llama tensors draw the same init as a model without biases (their places
     * in the table are the same); the biases start at 0 */
    lt_llama_init(&m, 5);
    lt_llama_init(&plain, 5);
    const lt_tensor_info *wq = lt_llama_find_tensor(&m, "model.layers.0.self_attn.q_proj.weight");
    assert_memory_equal(m.params + wq->offset, plain.w.layer[0].wq, (size_t)wq->rows * wq->cols * sizeof(float));
    for (int j = 0; j < bq->cols; j++) assert_true(m.w.layer[1].bq[j] == 0.0f);
    lt_llama_free(&m);
    lt_llama_free(&plain);
}

static void init_is_deterministic(void **state) {
    (void)state;
    lt_model_shape s = test_shape();
    lt_llama a, b, c;
    lt_error err;
    assert_int_equal(lt_llama_create(&a, &s, &err), LT_OK);
    assert_int_equal(lt_llama_create(&b, &s, &err), LT_OK);
    assert_int_equal(lt_llama_create(&c, &s, &err), LT_OK);
    lt_llama_init(&a, 1234);
    lt_llama_init(&b, 1234);
    lt_llama_init(&c, 1235);
    assert_memory_equal(a.params, b.params, a.n_params * sizeof(float));
    assert_true(memcmp(a.params, c.params, a.n_params * sizeof(float)) != 0);
    assert_true(a.w.final_norm[0] == 1.0f);
    double sum2 = 0;
    size_t n = (size_t)s.vocab * (size_t)s.hidden;
    for (size_t i = 0; i < n; i++) sum2 += (double)a.w.embed[i] * a.w.embed[i];
    double sd = sqrt(sum2 / (double)n);
    assert_true(sd > 0.018 && sd < 0.022); /* N(0, 0.02^2) */
    lt_llama_free(&a), lt_llama_free(&b), lt_llama_free(&c);
}

static void labels_and_bad_units(void **state) {
    (void)state;
    make_batch();
    lt_llama m;
    make_model(&m, 0);
    lt_error err;
    /* the label convention: a slice ending inside its sample predicts the next token */
    lt_train_slice sl[] = {{2, 3, 9}, {3, 0, 1}};
    lt_train_unit u = {sl, 2};
    lt_acts a;
    assert_int_equal(lt_acts_alloc(&a, &m, &batch, &u, 0, 2, true, &err), LT_OK);
    assert_int_equal(a.T, 7);
    for (int r = 0; r < 6; r++) {
        assert_int_equal(a.pos[r], 3 + r);
        assert_int_equal(a.targets[r], tokens[2][4 + r]);
    }
    assert_int_equal(a.targets[6], -1); /* a one-token sample predicts nothing */
    lt_acts_free(&a);
    assert_int_equal(lt_batch_predicted_tokens(&batch), 10 + 4 + 36 + 0);
    /* bad slices and out-of-vocabulary tokens are refused with the reason */
    lt_train_slice bad[] = {{2, 30, 38}};
    lt_train_unit ub = {bad, 1};
    assert_int_equal(lt_acts_alloc(&a, &m, &batch, &ub, 0, 2, true, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "not a token range"));
    lt_train_slice bad2[] = {{7, 0, 1}};
    ub.slices = bad2;
    assert_int_equal(lt_acts_alloc(&a, &m, &batch, &ub, 0, 2, true, &err), LT_ERR_INPUT);
    tokens[0][3] = 61;
    lt_train_slice ok[] = {{0, 0, 11}};
    ub.slices = ok;
    assert_int_equal(lt_acts_alloc(&a, &m, &batch, &ub, 0, 2, true, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "outside the vocabulary"));
    lt_llama_free(&m);
}

/* A window set filled layer by layer from a whole set, as the executor gathers an
 * asymmetric backward unit's rows (lt_cp_hooks.layer_begin). */
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

static void rows_kept_and_windows(void **state) {
    (void)state;
    make_batch();
    lt_llama m;
    make_model(&m, 0);
    lt_error err;
    int L = m.shape.layers;
    size_t C = (size_t)m.shape.hidden, n = m.n_params;
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
    assert_int_equal(lt_llama_forward(&m, &pass, &batch, &u, NULL, &kv, &a, &vf, NULL, NULL, NULL, &err), LT_OK);
    /* the backward over the whole set, and over a window filled before each layer */
    assert_int_equal(lt_llama_backward(&m, &pass, &batch, &u, NULL, &kv, &a, &v1, NULL, NULL, &err), LT_OK);
    lt_kvctx_zero_grad(&kv);
    assert_int_equal(lt_acts_alloc_window(&w, &m, &batch, &u, 0, L, true, &err), LT_OK);
    size_t layer = lt_acts_row_floats(&m, 0, 1, false);
    assert_int_equal(w.bytes, 37 * ((layer + C) * sizeof(float) + 3 * sizeof(int32_t))); /* one layer + dnf_in */
    assert_null(w.out);
    assert_int_equal(lt_acts_copy_row(&w, 0, &a, 0, 0, 2, false, &m, &err), LT_ERR_INTERNAL); /* one layer at a time */
    for (int t = 0; t < w.T; t++) assert_int_equal(lt_acts_copy_row(&w, t, &a, t, L, L, true, &m, &err), LT_OK);
    window_fill wf = {&a, &w, &m, 0};
    lt_cp_hooks h = {.ctx = &wf, .layer_begin = fill_layer};
    assert_int_equal(lt_llama_backward_group(&m, &pass, &batch, &u, 1, NULL, &kv, &w, &v2, &h, NULL, NULL, &err), LT_OK);
    assert_int_equal(wf.calls, L);
    assert_memory_equal(g1, g2, n * sizeof(float));
    /* a forward over a window is refused */
    assert_int_equal(lt_llama_forward(&m, &pass, &batch, &u, NULL, &kv, &w, &vf, NULL, NULL, NULL, &err), LT_ERR_INTERNAL);
    lt_acts_free(&w);
    /* keep rows 0, 5, 6, 36: each array's rows as they were, the buffers the 4 rows' size */
    int keep[] = {0, 5, 6, 36};
    size_t rf = lt_acts_row_floats(&m, 0, L, true);
    float *before = malloc(4 * (rf + C) * sizeof(float)), *after = malloc((rf + C) * sizeof(float));
    assert_true(before && after);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(lt_acts_pack_row(&a, keep[k], 0, L, true, &m, before + (size_t)k * (rf + C), &err), LT_OK);
        memcpy(before + (size_t)k * (rf + C) + rf, a.out + (size_t)keep[k] * C, C * sizeof(float));
    }
    int unordered[] = {5, 0};
    assert_int_equal(lt_acts_keep_rows(&a, unordered, 2, &m, &err), LT_ERR_INTERNAL);
    assert_int_equal(lt_acts_keep_rows(&a, keep, 4, &m, &err), LT_OK);
    assert_int_equal(a.T, 4);
    assert_int_equal(a.bytes, 4 * ((rf + C) * sizeof(float) + 3 * sizeof(int32_t))); /* rows of L layers, dnf_in, out */
    for (int k = 0; k < 4; k++) {
        assert_int_equal(a.pos[k], keep[k]);
        assert_int_equal(a.ids[k], tokens[2][keep[k]]);
        assert_int_equal(a.targets[k], keep[k] + 1 < 37 ? tokens[2][keep[k] + 1] : -1);
        assert_int_equal(lt_acts_pack_row(&a, k, 0, L, true, &m, after, &err), LT_OK);
        memcpy(after + rf, a.out + (size_t)k * C, C * sizeof(float));
        assert_memory_equal(after, before + (size_t)k * (rf + C), (rf + C) * sizeof(float));
    }
    free(before), free(after), free(gf), free(g1), free(g2);
    lt_acts_free(&a);
    lt_kvctx_free(&kv);
    lt_llama_free(&m);
}

/* A meter (lt_meter) as the executor keeps one: bytes held now and at most. */
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
    assert_true(bytes <= c->live); /* nothing freed that was not counted */
    c->live -= bytes;
}

/* What a pass and a KV context report to a meter, from the shapes: the K/V (and dK/dV) of
 * every layer as they are reserved, until released; a forward's scratch (K and V rows, a
 * residual-branch buffer) while its layers run, then the fused head's (the normed input,
 * its gradient, the rstd and a logits block of every row: fewer than the block's rows), a
 * backward's gradient scratch; each call gives back all it reported. */
static void working_memory_metered(void **state) {
    (void)state;
    make_batch();
    lt_llama m;
    make_model(&m, 0);
    lt_error err;
    int L = m.shape.layers;
    size_t T = 37, C = (size_t)m.shape.hidden, F = (size_t)m.shape.ffn, V = (size_t)m.shape.vocab;
    size_t hd = C / (size_t)m.shape.heads, qd = hd * (size_t)m.shape.heads, kvd = hd * (size_t)m.shape.kv_heads;
    lt_train_unit u = {&whole[2], 1}; /* 37 tokens */
    float *g = calloc(m.n_params, sizeof(float));
    assert_non_null(g);
    lt_layer_views lv[8];
    lt_llama_views v;
    lt_llama_views_of(&m, g, lv, &v);
    count c = {0};
    lt_meter meter = {.ctx = &c, .add = count_add, .sub = count_sub};
    lt_kvctx kv;
    assert_int_equal(lt_kvctx_init(&kv, &m, &batch, true, &err), LT_OK);
    assert_null(kv.meter);
    kv.meter = &meter;
    lt_pass pass = {.l0 = 0, .l1 = L, .embed = true, .head = true, .loss_scale = 0.01f, .meter = &meter};
    lt_acts a;
    assert_int_equal(lt_acts_alloc(&a, &m, &batch, &u, 0, L, true, &err), LT_OK);
    size_t kv_bytes = T * 2 * kvd * sizeof(float) * (size_t)L; /* K and V of every layer */
    size_t fwd = T * (2 * kvd + C) * sizeof(float), head = (T * (2 * C + 1 + V)) * sizeof(float);
    assert_int_equal(lt_llama_forward(&m, &pass, &batch, &u, NULL, &kv, &a, &v, NULL, NULL, NULL, &err), LT_OK);
    assert_int_equal(c.live, kv_bytes);
    assert_int_equal(c.live, lt_kvctx_bytes(&kv));
    assert_int_equal(c.peak, kv_bytes + (fwd > head ? fwd : head));
    c.peak = 0;
    size_t bwd = T * (2 * C + 2 * qd + 3 * F + 2 * kvd) * sizeof(float);
    assert_int_equal(lt_llama_backward(&m, &pass, &batch, &u, NULL, &kv, &a, &v, NULL, NULL, &err), LT_OK);
    assert_int_equal(c.live, 2 * kv_bytes); /* and the dK/dV */
    assert_int_equal(c.peak, 2 * kv_bytes + bwd);
    assert_int_equal(lt_kvctx_release(&kv, 2, 0, L), 2 * kv_bytes);
    assert_int_equal(c.live, 0);
    lt_acts_free(&a);
    lt_kvctx_free(&kv);
    free(g);
    lt_llama_free(&m);
}

/* Loss and gradients of units sliced_a then sliced_b (samples 0, 1, 2 cut at 6, 2 and 4, 20),
 * forward then backward in reverse, whole model, in a context with sample 2's K/V bounded to
 * the 20 rows these slices reach (bound) or at its 37 tokens. */
static double sliced_pair(const lt_llama *m, bool bound, float *gbuf, size_t *kv_peak) {
    lt_error err;
    int L = m->shape.layers;
    memset(gbuf, 0, m->n_params * sizeof(float));
    lt_layer_views lv[8];
    lt_llama_views g;
    lt_llama_views_of(m, gbuf, lv, &g);
    count c = {0};
    lt_meter meter = {.ctx = &c, .add = count_add, .sub = count_sub};
    lt_kvctx kv;
    assert_int_equal(lt_kvctx_init(&kv, m, &batch, true, &err), LT_OK);
    for (int l = 0; bound && l < L; l++) {
        assert_int_equal(lt_kvctx_bound(&kv, 2, l, 4, &err), LT_OK);
        assert_int_equal(lt_kvctx_bound(&kv, 2, l, 20, &err), LT_OK); /* raised */
        assert_int_equal(lt_kvctx_bound(&kv, 2, l, 4, &err), LT_OK);  /* never lowered */
    }
    lt_pass pass = {.l0 = 0, .l1 = L, .embed = true, .head = true, .loss_scale = 0.01f};
    lt_train_unit u[2] = {{sliced_a, 2}, {sliced_b, 3}};
    lt_acts a[2];
    double loss = 0;
    kv.meter = &meter;
    for (int i = 0; i < 2; i++) {
        double l = 0;
        assert_int_equal(lt_acts_alloc(&a[i], m, &batch, &u[i], 0, L, true, &err), LT_OK);
        assert_int_equal(lt_llama_forward(m, &pass, &batch, &u[i], NULL, &kv, &a[i], &g, &l, NULL, NULL, &err), LT_OK);
        loss += l;
    }
    for (int i = 1; i >= 0; i--)
        assert_int_equal(lt_llama_backward(m, &pass, &batch, &u[i], NULL, &kv, &a[i], &g, NULL, NULL, &err), LT_OK);
    *kv_peak = c.peak;
    assert_int_equal(c.live, lt_kvctx_bytes(&kv));
    kv.meter = NULL;
    for (int i = 0; i < 2; i++) lt_acts_free(&a[i]);
    lt_kvctx_free(&kv);
    return loss;
}

/* A context bounded to the rows its slices reach (lt_kvctx_bound, the executor's bound on a
 * HelixPipe attention stage) holds only those, gives the unbounded context's loss and
 * gradients bit for bit, and refuses rows past the bound and a bound raised too late;
 * dK/dV rows taken out (sent to the earlier slice's stage) are zero after. */
static void kv_bound_holds_its_rows(void **state) {
    (void)state;
    make_batch();
    lt_llama m;
    make_model(&m, 0);
    lt_error err;
    int L = m.shape.layers;
    size_t row = 2 * (size_t)(m.shape.hidden / m.shape.heads) * (size_t)m.shape.kv_heads * sizeof(float); /* K + V */
    float *g0 = calloc(m.n_params, sizeof(float)), *g1 = calloc(m.n_params, sizeof(float));
    assert_non_null(g0), assert_non_null(g1);
    size_t peak0, peak1;
    double l0 = sliced_pair(&m, false, g0, &peak0), l1 = sliced_pair(&m, true, g1, &peak1);
    assert_true(l0 == l1);
    assert_memory_equal(g0, g1, m.n_params * sizeof(float));
    /* K/V and dK/dV of every layer, sample 2 at 37 rows or at 20; samples 0 and 1 whole */
    size_t others = (size_t)(whole[0].end + whole[1].end) * row * 2 * (size_t)L;
    assert_int_equal(peak0, others + 37 * row * 2 * (size_t)L);
    assert_int_equal(peak1, others + 20 * row * 2 * (size_t)L);

    lt_kvctx kv;
    assert_int_equal(lt_kvctx_init(&kv, &m, &batch, true, &err), LT_OK);
    assert_int_equal(lt_kvctx_bound(&kv, 2, 0, 0, &err), LT_ERR_INTERNAL);  /* no rows */
    assert_int_equal(lt_kvctx_bound(&kv, 2, 0, 38, &err), LT_ERR_INTERNAL); /* past the sample */
    assert_int_equal(lt_kvctx_bound(&kv, 2, L, 4, &err), LT_ERR_INTERNAL);  /* no such layer */
    assert_int_equal(lt_kvctx_bound(&kv, 2, 0, 20, &err), LT_OK);
    assert_int_equal(lt_kvctx_reserve(&kv, 2, 0, 1, &err), LT_OK);
    assert_int_equal(lt_kvctx_bytes(&kv), 20 * row);
    assert_int_equal(lt_kvctx_bound(&kv, 2, 0, 21, &err), LT_ERR_INTERNAL); /* reserved at 20 */
    assert_non_null(strstr(err.what, "holds 20 rows already"));
    void *buf = malloc(lt_kvctx_rows_bytes(&kv, 21));
    assert_non_null(buf);
    assert_int_equal(lt_kvctx_rows(&kv, 2, 0, 20, false, false, buf, &err), LT_OK);
    assert_int_equal(lt_kvctx_rows(&kv, 2, 0, 21, false, false, buf, &err), LT_ERR_INTERNAL);
    /* dK/dV rows added in, taken out (the sum handed on), then zero where they were */
    size_t n = lt_kvctx_rows_bytes(&kv, 8) / sizeof(float);
    float *ones = buf;
    for (size_t i = 0; i < n; i++) ones[i] = 1.0f;
    assert_int_equal(lt_kvctx_rows(&kv, 2, 0, 8, true, true, ones, &err), LT_OK);
    assert_int_equal(lt_kvctx_rows(&kv, 2, 0, 8, true, true, ones, &err), LT_OK);
    memset(buf, 0, lt_kvctx_rows_bytes(&kv, 8));
    assert_int_equal(lt_kvctx_rows(&kv, 2, 0, 8, true, false, buf, &err), LT_OK);
    for (size_t i = 0; i < n; i++) assert_true(ones[i] == 2.0f);
    assert_int_equal(lt_kvctx_rows(&kv, 2, 0, 8, true, false, buf, &err), LT_OK);
    for (size_t i = 0; i < n; i++) assert_true(ones[i] == 0.0f);
    assert_int_equal(lt_kvctx_release(&kv, 2, 0, L), 2 * 20 * row); /* K/V and dK/dV */
    free(buf);
    lt_kvctx_free(&kv);
    free(g0), free(g1);
    lt_llama_free(&m);
}

static void gelu_models_refused(void **state) {
    (void)state;
    lt_llama m;
    lt_error err;
    assert_int_equal(lt_llama_create(&m, lt_model_preset("gpt-1.3b"), &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "SwiGLU"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tensor_table),
        cmocka_unit_test(qwen2_bias_tensors),
        cmocka_unit_test(init_is_deterministic),
        cmocka_unit_test(labels_and_bad_units),
        cmocka_unit_test(split_three_ways_same_gradients),
        cmocka_unit_test(layer_split_same_gradients),
        cmocka_unit_test(layer_parts_same_gradients),
        cmocka_unit_test(threads_change_nothing),
        cmocka_unit_test(rows_kept_and_windows),
        cmocka_unit_test(working_memory_metered),
        cmocka_unit_test(kv_bound_holds_its_rows),
        cmocka_unit_test(gelu_models_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
