/*
 * tests/train/test_tp.c — tensor parallelism with sequence parallelism in the model
 * (train/model/model.h lt_llama_create_tp, train/model/pass.c) against the whole model:
 * tp ranks run as threads of one process, their collectives (lt_tp_ops) through shared
 * memory, and every rank's loss and every shard of its gradients must equal the whole
 * model's within 1e-5 (the replicated norms' gradients summed over the ranks, as the
 * trainer's TP all-reduce will). The batch has sliced samples (K/V context across units)
 * and units whose tokens tp does not divide; the vocabulary (61) is not a multiple of tp.
 * A Qwen2 model (Q/K/V biases, column-parallel like their weights) with llama3-scaled RoPE
 * likewise. Also: the layout-independent init, the shard copy, the refusals of lt_llama_create_tp,
 * rows kept (lt_acts_keep_rows) on a TP rank giving the rows of its SP split, and a
 * pipeline stage's part (lt_llama_create_stage).
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/rng.h"
#include "train/model/model.h"

enum { MAX_TP = 4 };

/* ---------------------------------------------------------------- the group's collectives */

typedef struct group {
    int tp;
    pthread_barrier_t bar;
    void *bufs[MAX_TP];
} group;

typedef struct rank_ctx {
    group *g;
    int rank;
} rank_ctx;

static lt_status t_all_gather(void *ctx, void *all, size_t block, size_t whole, lt_error *err) {
    (void)err, (void)whole;
    rank_ctx *c = ctx;
    group *g = c->g;
    g->bufs[c->rank] = all;
    pthread_barrier_wait(&g->bar);
    for (int o = 0; o < g->tp; o++)
        if (o != c->rank) memcpy((char *)all + (size_t)o * block, (char *)g->bufs[o] + (size_t)o * block, block);
    pthread_barrier_wait(&g->bar);
    return LT_OK;
}

static lt_status t_reduce_scatter(void *ctx, void *all, size_t n, size_t es, size_t whole, lt_error *err) {
    (void)whole;
    rank_ctx *c = ctx;
    group *g = c->g;
    if (es != sizeof(float)) return lt_fail(err, LT_ERR_INTERNAL, NULL, "test collectives sum fp32 only");
    float *sum = calloc(n ? n : 1, sizeof *sum);
    assert_non_null(sum);
    g->bufs[c->rank] = all;
    pthread_barrier_wait(&g->bar);
    for (int o = 0; o < g->tp; o++) /* in rank order: the same bits on every rank */
        for (size_t i = 0; i < n; i++) sum[i] += ((float *)g->bufs[o])[(size_t)c->rank * n + i];
    pthread_barrier_wait(&g->bar);
    memcpy((float *)all + (size_t)c->rank * n, sum, n * sizeof *sum);
    free(sum);
    return LT_OK;
}

static lt_status t_all_reduce(void *ctx, float *buf, size_t n, bool max, lt_error *err) {
    (void)err;
    rank_ctx *c = ctx;
    group *g = c->g;
    float *r = malloc((n ? n : 1) * sizeof *r);
    assert_non_null(r);
    g->bufs[c->rank] = buf;
    pthread_barrier_wait(&g->bar);
    for (size_t i = 0; i < n; i++) {
        float v = ((float *)g->bufs[0])[i];
        for (int o = 1; o < g->tp; o++) {
            float w = ((float *)g->bufs[o])[i];
            v = max ? (w > v ? w : v) : v + w;
        }
        r[i] = v;
    }
    pthread_barrier_wait(&g->bar);
    memcpy(buf, r, n * sizeof *r);
    free(r);
    return LT_OK;
}

/* ---------------------------------------------------------------- model and batch */

static lt_model_shape shape_of(int kv_heads, int tied) {
    lt_model_shape s = *lt_model_preset("nano"); /* 2 layers, hidden 64, 4 heads, ffn 192 */
    s.vocab = 61;
    s.kv_heads = kv_heads;
    s.tie_embeddings = tied;
    return s;
}

/* Random weights (larger than the init's), norms around 1. */
static void randomize(lt_llama *m) {
    lt_rng r;
    lt_rng_seed(&r, 99);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] = (float)(0.1 * lt_rng_normal(&r));
    for (int t = 0; t < m->n_tensors; t++)
        if (m->tensors[t].full_rows == 1)
            for (int c = 0; c < m->tensors[t].cols; c++) m->params[m->tensors[t].offset + c] += 1.0f;
}

enum { N_SAMPLES = 3 };
static const int lengths[N_SAMPLES] = {13, 7, 21};
static int32_t tokens[N_SAMPLES][32];
static lt_train_sample samples[N_SAMPLES];
static lt_batch batch = {samples, N_SAMPLES};
/* unit 0 packs samples 0 and 1 whole; sample 2 is sliced over units 1 and 2 (the second
 * reads the first's K/V); 20, 9 and 12 tokens */
static const lt_train_slice u0s[] = {{0, 0, 13}, {1, 0, 7}}, u1s[] = {{2, 0, 9}}, u2s[] = {{2, 9, 21}};
static const lt_train_unit units[] = {{u0s, 2}, {u1s, 1}, {u2s, 1}};

static void make_batch(void) {
    lt_rng r;
    lt_rng_seed(&r, 7);
    for (int i = 0; i < N_SAMPLES; i++) {
        for (int t = 0; t < lengths[i]; t++) tokens[i][t] = (int32_t)lt_rng_below(&r, 61);
        samples[i].tokens = tokens[i];
        samples[i].len = lengths[i];
    }
}

/* One step (forward and backward of every unit) of model m: its loss and gradients. */
static void step(const lt_llama *m, double *loss, float **grads) {
    lt_error err;
    *grads = calloc(m->n_params, sizeof **grads);
    lt_layer_views *lv = calloc((size_t)m->shape.layers, sizeof *lv);
    assert_non_null(*grads);
    assert_non_null(lv);
    lt_llama_views g;
    lt_llama_views_of(m, *grads, lv, &g);
    float scale = 1.0f / (float)lt_batch_predicted_tokens(&batch);
    lt_status st = lt_llama_step_units(m, &batch, units, 3, scale, &g, NULL, loss, NULL, &err);
    if (st != LT_OK) fail_msg("%s", err.what);
    free(lv);
}

typedef struct rank_run {
    rank_ctx ctx;
    lt_tp_ops ops;
    lt_llama m;
    double loss;
    float *grads;
} rank_run;

static void *run_rank(void *arg) {
    rank_run *r = arg;
    step(&r->m, &r->loss, &r->grads);
    return NULL;
}

/* The whole model's step against tp ranks' (threads): loss and gradients within 1e-5.
 * qwen2: a Qwen2 model (Q/K/V biases, split like their weights' rows) with Llama 3.1's
 * scaled RoPE frequencies. */
static void check_tp_family(int tp, int kv_heads, int tied, bool qwen2) {
    make_batch();
    lt_model_shape s = shape_of(kv_heads, tied);
    if (qwen2) {
        s.family = LT_FAMILY_QWEN2;
        s.rope_theta = 500000.0;
        s.rope_scaling = LT_ROPE_LLAMA3;
        s.rope_factor = 8.0, s.rope_low_freq_factor = 1.0, s.rope_high_freq_factor = 4.0;
        s.rope_original_max_pos = 1024;
    }
    lt_error err;
    lt_llama full;
    assert_int_equal(lt_llama_create(&full, &s, &err), LT_OK);
    randomize(&full);
    double loss_ref;
    float *ref;
    step(&full, &loss_ref, &ref);

    group g = {.tp = tp};
    pthread_barrier_init(&g.bar, NULL, (unsigned)tp);
    rank_run run[MAX_TP];
    pthread_t th[MAX_TP];
    for (int r = 0; r < tp; r++) {
        memset(&run[r], 0, sizeof run[r]);
        run[r].ctx = (rank_ctx){&g, r};
        run[r].ops = (lt_tp_ops){.ctx = &run[r].ctx, .all_gather = t_all_gather, .reduce_scatter = t_reduce_scatter,
                                 .all_reduce = t_all_reduce}; /* (no posted form: the blocking path) */
        lt_status st = lt_llama_create_tp(&run[r].m, &s, tp, r, &err);
        if (st != LT_OK) fail_msg("%s", err.what);
        run[r].m.tp_ops = &run[r].ops;
        lt_llama_copy_shard(&full, full.params, &run[r].m, run[r].m.params);
        assert_true(run[r].m.n_params < full.n_params);
    }
    for (int r = 0; r < tp; r++) assert_int_equal(pthread_create(&th[r], NULL, run_rank, &run[r]), 0);
    for (int r = 0; r < tp; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&g.bar);

    /* every rank: the whole loss (the vocab-parallel cross-entropy's sums are the group's) */
    for (int r = 0; r < tp; r++)
        if (!(fabs(run[r].loss - loss_ref) <= 1e-5 * fabs(loss_ref)))
            fail_msg("tp %d rank %d: loss %.9g, the whole model's %.9g", tp, r, run[r].loss, loss_ref);
    /* sharded tensors: each rank's shard of the whole gradient; replicated ones (the norms)
     * summed over the ranks (each saw its SP rows only) */
    double worst = 0;
    for (int t = 0; t < full.n_tensors; t++) {
        const lt_tensor_info *ft = &full.tensors[t];
        size_t n = (size_t)ft->rows * ft->cols;
        double scale = 0;
        for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(ref[ft->offset + i]));
        if (run[0].m.tensors[t].split == LT_SPLIT_NONE) {
            for (size_t i = 0; i < n; i++) {
                double sum = 0;
                for (int r = 0; r < tp; r++) sum += run[r].grads[run[r].m.tensors[t].offset + i];
                double e = fabs(sum - ref[ft->offset + i]) / scale;
                worst = isnan(e) || isnan(worst) ? NAN : fmax(worst, e); /* NaN sticks (fmax skips it) */
            }
            continue;
        }
        for (int r = 0; r < tp; r++) {
            const lt_tensor_info *rt = &run[r].m.tensors[t];
            float *want = calloc(run[r].m.n_params, sizeof *want);
            assert_non_null(want);
            lt_llama_copy_shard(&full, ref, &run[r].m, want);
            for (size_t i = 0; i < (size_t)rt->rows * rt->cols; i++) {
                double e = fabs(run[r].grads[rt->offset + i] - want[rt->offset + i]) / scale;
                worst = isnan(e) || isnan(worst) ? NAN : fmax(worst, e);
            }
            free(want);
        }
    }
    if (!(worst <= 1e-5)) fail_msg("tp %d: gradients differ from the whole model's by %.3g (relative)", tp, worst);
    for (int r = 0; r < tp; r++) free(run[r].grads), lt_llama_free(&run[r].m);
    free(ref);
    lt_llama_free(&full);
}

static void check_tp(int tp, int kv_heads, int tied) { check_tp_family(tp, kv_heads, tied, false); }

static void test_tp2_qwen2(void **state) {
    (void)state;
    check_tp_family(2, 2, 1, true);
}

static void test_tp2_gqa(void **state) {
    (void)state;
    check_tp(2, 2, 0);
}

static void test_tp2_tied(void **state) {
    (void)state;
    check_tp(2, 4, 1);
}

static void test_tp4(void **state) {
    (void)state;
    check_tp(4, 4, 0);
}

/* tp = 1 through lt_llama_create_tp is the whole model, and the TP ranks' init is the
 * whole init's shards: the parameters do not depend on the layout. */
static void test_init_layout_free(void **state) {
    (void)state;
    lt_model_shape s = shape_of(4, 0);
    lt_error err;
    lt_llama full, part;
    assert_int_equal(lt_llama_create(&full, &s, &err), LT_OK);
    lt_llama_init(&full, 5);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(lt_llama_create_tp(&part, &s, 4, r, &err), LT_OK);
        lt_llama_init(&part, 5);
        float *want = calloc(part.n_params, sizeof *want);
        assert_non_null(want);
        lt_llama_copy_shard(&full, full.params, &part, want);
        assert_memory_equal(want, part.params, part.n_params * sizeof *want);
        /* the vocabulary rows of the ranks tile [0, 61): 16 15 15 15 */
        assert_int_equal(part.vocab_l, r == 0 ? 16 : 15);
        assert_int_equal(part.vocab0, r == 0 ? 0 : 16 + 15 * (r - 1));
        free(want);
        lt_llama_free(&part);
    }
    lt_llama_free(&full);
}

static void test_refusals(void **state) {
    (void)state;
    lt_error err;
    lt_llama m;
    lt_model_shape s = shape_of(2, 0);
    assert_int_equal(lt_llama_create_tp(&m, &s, 4, 0, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "parallel.tp = 4 does not divide the model's 2 key/value heads"));
    assert_non_null(strstr(err.hint, "never replicated"));
    s = shape_of(4, 0);
    assert_int_equal(lt_llama_create_tp(&m, &s, 3, 0, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "parallel.tp = 3 does not divide the model's 4 attention heads"));
    s.ffn = 190;
    assert_int_equal(lt_llama_create_tp(&m, &s, 4, 0, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "MLP width"));
}

/* A TP rank's activation set keeps its SP split when rows are dropped: the kept rows'
 * positions decide which are its own, in order, and their SP arrays move with them. */
static void test_keep_rows_sp(void **state) {
    (void)state;
    make_batch();
    lt_model_shape s = shape_of(4, 0);
    lt_error err;
    lt_llama m;
    assert_int_equal(lt_llama_create_tp(&m, &s, 2, 1, &err), LT_OK);
    lt_acts a;
    assert_int_equal(lt_acts_alloc(&a, &m, &batch, &units[0], 0, 2, false, &err), LT_OK);
    assert_int_equal(a.T, 20);
    /* sample 0 positions 0..12 then sample 1 0..6: odd positions are rank 1's: 6 + 3 */
    assert_int_equal(a.Tl, 9);
    assert_int_equal(a.N, 11);
    for (int r = 0; r < a.T; r++) {
        float v = (float)r;
        if (a.lrow[r] >= 0) a.layer[1].x2[(size_t)a.lrow[r] * 64] = v; /* a mark per SP row */
        a.layer[0].q[(size_t)r * 32] = v;                            /* and per row (qd 32 on the rank) */
    }
    int keep[] = {1, 2, 5, 14, 19};
    assert_int_equal(lt_acts_keep_rows(&a, keep, 5, &m, &err), LT_OK);
    assert_int_equal(a.T, 5);
    assert_int_equal(a.Tl, 3); /* positions 1, 2, 5, 1, 6: rows 0, 2 and 3 are odd, 1 and 4 even */
    for (int k = 0; k < 5; k++) assert_true(a.layer[0].q[(size_t)k * 32] == (float)keep[k]);
    int own = 0;
    for (int k = 0; k < 5; k++) {
        if (a.pos[k] % 2 != 1) {
            assert_int_equal(a.lrow[k], -1);
            continue;
        }
        assert_int_equal(a.lrow[k], own);
        assert_true(a.layer[1].x2[(size_t)own * 64] == (float)keep[k]);
        own++;
    }
    lt_acts_free(&a);
    lt_llama_free(&m);
}

/* A pipeline stage's part (lt_llama_create_stage): only its tensors (the rest's views NULL,
 * a pass outside it refused), the parts of a 2-stage x tp 2 split tile the whole model, and
 * a unit run through the two stages' parts, each from its shard of the whole parameters,
 * gives the whole model's loss and, per part, its shard of the whole gradients. */
static void test_stage_parts(void **state) {
    (void)state;
    make_batch();
    lt_model_shape s = shape_of(4, 0);
    lt_error err;
    lt_llama full;
    assert_int_equal(lt_llama_create(&full, &s, &err), LT_OK);
    randomize(&full);
    size_t total = 0;
    for (int st = 0; st < 2; st++)
        for (int r = 0; r < 2; r++) {
            lt_llama p;
            assert_int_equal(lt_llama_create_stage(&p, &s, 2, r, st, st + 1, st == 0, st == 1, &err), LT_OK);
            assert_true((p.w.embed != NULL) == (st == 0) && (p.w.lm_head != NULL) == (st == 1));
            assert_true(p.w.layer[st].wq != NULL && p.w.layer[1 - st].wq == NULL);
            assert_int_equal(p.n_params_whole, full.n_params);
            /* the replicated norms are in every TP rank's part: count them once */
            for (int i = 0; i < p.n_tensors; i++)
                if (p.tensors[i].split != LT_SPLIT_NONE || r == 0)
                    total += (size_t)p.tensors[i].rows * (size_t)p.tensors[i].cols;
            lt_llama_free(&p);
        }
    assert_int_equal(total, full.n_params);

    /* the whole step at tp 1 through two stage parts against the whole model */
    double loss_ref;
    float *ref;
    step(&full, &loss_ref, &ref);
    lt_llama part[2];
    float *g[2];
    lt_layer_views *lv[2];
    lt_llama_views gv[2];
    for (int st = 0; st < 2; st++) {
        assert_int_equal(lt_llama_create_stage(&part[st], &s, 1, 0, st, st + 1, st == 0, st == 1, &err), LT_OK);
        lt_llama_copy_shard(&full, full.params, &part[st], part[st].params);
        g[st] = calloc(part[st].n_params, sizeof *g[st]);
        lv[st] = calloc(2, sizeof *lv[st]);
        assert_non_null(g[st]);
        assert_non_null(lv[st]);
        lt_llama_views_of(&part[st], g[st], lv[st], &gv[st]);
    }
    lt_kvctx kv;
    assert_int_equal(lt_kvctx_init(&kv, &full, &batch, true, &err), LT_OK);
    float scale = 1.0f / (float)lt_batch_predicted_tokens(&batch);
    lt_pass p0 = {.l0 = 0, .l1 = 1, .embed = true}, p1 = {.l0 = 1, .l1 = 2, .head = true, .loss_scale = scale};
    lt_acts a0[3], a1[3];
    double loss = 0;
    for (int u = 0; u < 3; u++) { /* forward in unit order, each stage its part */
        double l = 0;
        assert_int_equal(lt_acts_alloc(&a0[u], &part[0], &batch, &units[u], 0, 1, false, &err), LT_OK);
        assert_int_equal(lt_acts_alloc(&a1[u], &part[1], &batch, &units[u], 1, 2, true, &err), LT_OK);
        assert_int_equal(lt_llama_forward(&part[0], &p0, &batch, &units[u], NULL, &kv, &a0[u], &gv[0], NULL, NULL,
                                          NULL, &err), LT_OK);
        assert_int_equal(lt_llama_forward(&part[1], &p1, &batch, &units[u], a0[u].out, &kv, &a1[u], &gv[1], &l, NULL,
                                          NULL, &err), LT_OK);
        loss += l;
    }
    lt_kvctx_zero_grad(&kv);
    for (int u = 2; u >= 0; u--) { /* backward in reverse, the stage after first */
        float *din = calloc((size_t)a0[u].T * 64, sizeof *din);
        assert_non_null(din);
        assert_int_equal(lt_llama_backward(&part[1], &p1, &batch, &units[u], NULL, &kv, &a1[u], &gv[1], din, NULL, &err),
                         LT_OK);
        assert_int_equal(lt_llama_backward(&part[0], &p0, &batch, &units[u], din, &kv, &a0[u], &gv[0], NULL, NULL, &err),
                         LT_OK);
        free(din);
        lt_acts_free(&a0[u]), lt_acts_free(&a1[u]);
    }
    assert_true(fabs(loss - loss_ref) <= 1e-6 * fabs(loss_ref));
    for (int st = 0; st < 2; st++) {
        float *want = calloc(part[st].n_params, sizeof *want);
        assert_non_null(want);
        lt_llama_copy_shard(&full, ref, &part[st], want);
        double worst = 0, big = 0;
        for (size_t i = 0; i < part[st].n_params; i++) {
            double e = fabs(g[st][i] - want[i]);
            worst = isnan(e) || isnan(worst) ? NAN : fmax(worst, e), big = fmax(big, fabs(want[i])); /* NaN sticks */
        }
        if (!(worst <= 1e-5 * big)) fail_msg("stage %d part: gradients differ by %.3g of %.3g", st, worst, big);
        free(want);
    }
    /* a pass outside a part is refused, naming both */
    lt_acts a;
    assert_int_equal(lt_acts_alloc(&a, &part[0], &batch, &units[0], 1, 2, false, &err), LT_OK);
    lt_pass outside = {.l0 = 1, .l1 = 2};
    float *in = calloc((size_t)a.T * 64, sizeof *in);
    assert_non_null(in);
    assert_int_equal(lt_llama_forward(&part[0], &outside, &batch, &units[0], in, &kv, &a, NULL, NULL, NULL, NULL, &err),
                     LT_ERR_INTERNAL);
    assert_non_null(strstr(err.what, "of a model part holding [0, 1)"));
    free(in);
    lt_acts_free(&a);
    lt_kvctx_free(&kv);
    for (int st = 0; st < 2; st++) free(g[st]), free(lv[st]), lt_llama_free(&part[st]);
    free(ref);
    lt_llama_free(&full);
}

/* HelixPipe's parts (lt_llama_helix_part, HelixPipe 4.2): stage s holds layer l's first norm
 * and Q/K/V where l mod p = s, its O, second norm and MLP where (l + 1) mod p = s (the last
 * layer's on stage 0), the embedding, final norm and head on stage 0. The parts of p stages x
 * tp 2 tile the whole model (the replicated norms counted once), lt_llama_helix_stage names
 * the stage that holds each tensor, and a part pass on a stage without its weights is
 * refused. */
static void test_helix_parts(void **state) {
    (void)state;
    make_batch();
    lt_error err;
    for (int tied = 0; tied < 2; tied++)
        for (int pp = 2; pp <= 3; pp++) {
            lt_model_shape s = shape_of(4, tied); /* 2 layers: at pp 3, stage 2 holds nothing */
            lt_llama full;
            assert_int_equal(lt_llama_create(&full, &s, &err), LT_OK);
            size_t total = 0;
            for (int st = 0; st < pp; st++)
                for (int r = 0; r < 2; r++) {
                    lt_llama p;
                    lt_llama_part held = lt_llama_helix_part(s.layers, st, pp);
                    assert_int_equal(lt_llama_create_part(&p, &s, 2, r, &held, &err), LT_OK);
                    for (int l = 0; l < s.layers; l++) {
                        assert_true((p.w.layer[l].wq != NULL) == (l % pp == st));
                        assert_true((p.w.layer[l].attn_norm != NULL) == (l % pp == st));
                        int post = l == s.layers - 1 ? 0 : (l + 1) % pp;
                        assert_true((p.w.layer[l].wo != NULL) == (post == st));
                        assert_true((p.w.layer[l].wdown != NULL) == (post == st));
                    }
                    assert_true((p.w.lm_head != NULL) == (st == 0) && (p.w.embed != NULL) == (st == 0));
                    for (int i = 0; i < p.n_tensors; i++) {
                        const lt_tensor_info *t = &p.tensors[i];
                        assert_int_equal(lt_llama_helix_stage(&p, t, pp), st);
                        if (t->split != LT_SPLIT_NONE || r == 0) total += (size_t)t->rows * (size_t)t->cols;
                    }
                    if (st == 0 && r == 0) { /* layer 1's pre-attention is on stage 1: refused here */
                        lt_acts a;
                        assert_int_equal(lt_acts_alloc(&a, &p, &batch, &units[0], 1, 2, false, &err), LT_OK);
                        float *in = calloc((size_t)a.T * 64, sizeof *in);
                        assert_non_null(in);
                        lt_pass pre = {.l0 = 1, .l1 = 2};
                        assert_int_equal(lt_llama_forward_part(&p, &pre, LT_LAYER_PRE, &units[0], in, NULL, &a, NULL,
                                                               NULL, NULL, &err),
                                         LT_ERR_INTERNAL);
                        assert_non_null(strstr(err.what, "pre-attention part of layer 1 on a model part without its "
                                                         "weights"));
                        free(in);
                        lt_acts_free(&a);
                    }
                    lt_llama_free(&p);
                }
            if (total != full.n_params)
                fail_msg("tied %d pp %d: the parts hold %zu of %zu parameters", tied, pp, total, full.n_params);
            lt_llama_free(&full);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tp2_gqa),          cmocka_unit_test(test_tp2_tied),
        cmocka_unit_test(test_tp2_qwen2),
        cmocka_unit_test(test_tp4),              cmocka_unit_test(test_init_layout_free),
        cmocka_unit_test(test_refusals),         cmocka_unit_test(test_keep_rows_sp),
        cmocka_unit_test(test_stage_parts),      cmocka_unit_test(test_helix_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
