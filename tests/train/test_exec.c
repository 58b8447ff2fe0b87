/*
 * tests/train/test_exec.c — the plan executor (train/exec/exec.h) on hand-built step plans (cmocka).
 *
 * A 4-layer model, three samples (20, 7 and 45 tokens; the 45-token one in two forward
 * slices [0, 15) and [15, 45) with KV context), two pipeline stages of two layers:
 *   - symmetric units, 1F1B-like order: the gradients equal every sample run whole
 *     (lt_llama_step_units) within 1e-5; with recompute (1 layer on stage 0, both on stage
 *     1) they are bit-identical to without, and fewer activation bytes are held;
 *   - asymmetric backward units (SlimPack 4.1.2) cutting inside the forward slices
 *     ([30, 45), [5, 30), then the rest), without and with recompute: within 1e-5 of whole;
 *   - what an asymmetric step holds: each stage's measured peak equals, byte for byte, the
 *     forward rows not yet consumed by a backward plus one layer of the running backward's
 *     rows plus the K/V context plus the backward's working memory (its gradient scratch
 *     and, off the first stage, its input gradient) (a forward unit held whole until its
 *     last backward, or a backward's rows copied for all its layers at once, would give
 *     more);
 *   - two pipelines (DP 2) sharing the samples: the sum equals whole;
 *   - context parallelism: the plan run by a static CP group of 2 and of 3 (a member with an
 *     empty shard), with recompute (bit-identical, fewer bytes), the asymmetric schedule
 *     under CP 2 with and without recompute, and sample 2's units DP-merged over 2: zigzag
 *     shards in per-layer lockstep, within 1e-5 of whole;
 *   - HelixPipe (4.2, 4.3): the attention-parallel partition's layer-part ops of the naive and
 *     two-fold FILO schedules (lt_sched_helixpipe_folds) over 2 and 4 stages, on four
 *     micro-batches (sample 2 sliced in two with K/V context): within 1e-5 of whole, every
 *     (layer, part) position forwarded and backwarded once; with recomputation without
 *     attention (4.4.1) bit-identical;
 *   - the chunked MLP (4.4.2, 8 rows at a time): whole layers, with recompute, and HelixPipe's
 *     parts with recomputation without attention, within 1e-5 of whole, fewer bytes held;
 *   - a scoring plan (lt_plan_scoring, the validation loss: forward only, grads = NULL) of the
 *     three samples at dp 1 and 2, pp 1 and 2, and as HelixPipe's layer parts (each attention
 *     on its pre-attention's stage) at pp 1 to 3: the loss equals every sample run whole
 *     without gradients (lt_llama_step_units) within 1e-6, no token backwarded, a K/V
 *     context without gradients; a B op in a plan run without gradients, and a scoring
 *     document of one token, are refused;
 *   - refusals, naming the step: a unit no op forwards (tokens not processed once), a plan
 *     whose samples have other lengths, backward ops out of FILO order (a deadlock), a
 *     recompute count that differs between a B and its F.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/rng.h"                 /* lt_rng: test tokens */
#include "lib/threadpool.h"          /* lt_pool */
#include "plans/strategies/plan.h"   /* lt_step_plan */
#include "plans/schedule/schedule.h" /* lt_schedule_* */
#include "train/exec/exec.h"

enum { LAYERS = 4, VOCAB = 97, NS = 3 };
static const int LEN[NS] = {20, 7, 45};

typedef struct fixture {
    lt_llama m;
    int32_t *tok[NS];
    lt_train_sample smp[NS];
    float *ref, *got, *got2;
    lt_layer_views lv[3][LAYERS];
    lt_llama_views vref, vgot, vgot2;
    int64_t n_predicted;
    lt_pool *pool;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    lt_model_shape shape = {.name = "exec-test", .layers = LAYERS, .hidden = 32, .heads = 4, .kv_heads = 2,
                            .ffn = 64, .vocab = VOCAB, .gated_ffn = 1};
    assert_int_equal(lt_llama_create(&f->m, &shape, NULL), LT_OK);
    lt_llama_init(&f->m, 7);
    lt_rng r;
    lt_rng_seed(&r, 3);
    f->n_predicted = 0;
    for (int i = 0; i < NS; i++) {
        f->tok[i] = malloc(sizeof(int32_t) * (size_t)LEN[i]);
        assert_non_null(f->tok[i]);
        for (int t = 0; t < LEN[i]; t++) f->tok[i][t] = (int32_t)lt_rng_below(&r, VOCAB);
        f->smp[i] = (lt_train_sample){.tokens = f->tok[i], .len = LEN[i]};
        f->n_predicted += LEN[i] - 1;
    }
    f->ref = calloc(f->m.n_params, sizeof(float));
    f->got = calloc(f->m.n_params, sizeof(float));
    f->got2 = calloc(f->m.n_params, sizeof(float));
    assert_true(f->ref && f->got && f->got2);
    lt_llama_views_of(&f->m, f->ref, f->lv[0], &f->vref);
    lt_llama_views_of(&f->m, f->got, f->lv[1], &f->vgot);
    lt_llama_views_of(&f->m, f->got2, f->lv[2], &f->vgot2);
    assert_int_equal(lt_pool_create(&f->pool, 2, NULL), LT_OK);
    /* the reference: every sample whole, one unit each */
    lt_train_slice whole[NS];
    lt_train_unit units[NS];
    for (int i = 0; i < NS; i++) {
        whole[i] = (lt_train_slice){.sample = i, .begin = 0, .end = LEN[i]};
        units[i] = (lt_train_unit){.slices = &whole[i], .n_slices = 1};
    }
    lt_batch b = {.samples = f->smp, .n_samples = NS};
    double loss;
    assert_int_equal(lt_llama_step_units(&f->m, &b, units, NS, (float)(1.0 / (double)f->n_predicted), &f->vref, NULL,
                                         &loss, f->pool, NULL),
                     LT_OK);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    for (int i = 0; i < NS; i++) free(f->tok[i]);
    free(f->ref), free(f->got), free(f->got2);
    lt_llama_free(&f->m);
    lt_pool_destroy(f->pool);
    free(f);
    return 0;
}

/* max over tensors of max |a - b| / max |b|; NaN when any element is (a read of memory
 * nobody wrote, NaN under LONGTAIL_POISON, must fail the `<=` checks, not be skipped) */
static double max_rel(const fixture *f, const float *a, const float *b) {
    double worst = 0;
    for (int t = 0; t < f->m.n_tensors; t++) {
        const lt_tensor_info *ti = &f->m.tensors[t];
        double d = 0, s = 1e-30;
        for (size_t i = ti->offset; i < ti->offset + (size_t)ti->rows * ti->cols; i++) {
            double x = fabs((double)a[i] - b[i]);
            if (isnan(x)) return NAN;
            d = fmax(d, x);
            s = fmax(s, fabs((double)b[i]));
        }
        worst = fmax(worst, d / s);
    }
    return worst;
}

/* ---------------------------------------------------------------- plans by hand */

/* The forward units of every pipeline: u0 = sample 0 + sample 1, u1 = sample 2 [0, 15),
 * u2 = sample 2 [15, 45). Samples in `own` (bitmask) only; returns the unit count. */
static void add_forward_units(lt_schedule *s) {
    lt_schedule_add_slice(s, 0, 0, 20);
    lt_schedule_add_slice(s, 1, 0, 7);
    lt_schedule_add_unit(s, 0, 2);
    lt_schedule_add_slice(s, 2, 0, 15);
    lt_schedule_add_unit(s, 2, 1);
    lt_schedule_add_slice(s, 2, 15, 45);
    lt_schedule_add_unit(s, 3, 1);
}

/* Backward units cutting inside the forward slices: b0 = sample 2 [30, 45), b1 = [5, 30),
 * b2 = sample 0 + sample 1 + sample 2 [0, 5) (bslices in token order per sample). */
static void add_backward_units(lt_schedule *s) {
    lt_schedule_add_bslice(s, 0, 0, 20);
    lt_schedule_add_bslice(s, 1, 0, 7);
    lt_schedule_add_bslice(s, 2, 0, 5);
    lt_schedule_add_bslice(s, 2, 5, 30);
    lt_schedule_add_bslice(s, 2, 30, 45);
    lt_schedule_add_bunit(s, 4, 1); /* b0 */
    lt_schedule_add_bunit(s, 3, 1); /* b1 */
    lt_schedule_add_bunit(s, 0, 3); /* b2 */
}

static void op(lt_schedule *s, int stage, lt_op_kind kind, uint32_t unit, uint16_t recompute) {
    lt_schedule_add_stage_op(s, stage, kind, unit, recompute);
}

/* A plan of one pipeline of 2 stages over the fixture's samples, with no unit or op yet. */
static lt_rank_plan *plan_one_rank(lt_step_plan *p) {
    lt_step_plan_init(p);
    p->step = 5;
    p->n_samples = NS;
    p->lengths = calloc(NS, sizeof *p->lengths);
    p->sample_rank = calloc(NS, sizeof *p->sample_rank);
    p->n_ranks = 1;
    p->ranks = calloc(1, sizeof *p->ranks);
    assert_true(p->lengths && p->sample_rank && p->ranks);
    for (int i = 0; i < NS; i++) p->lengths[i] = LEN[i];
    p->n_predicted = lt_plan_predicted_tokens(p->lengths, NS);
    p->pp = 2;
    lt_rank_plan *r = &p->ranks[0];
    r->cp = 1;
    assert_int_equal(lt_schedule_init(&r->sched, 2, LAYERS, NULL), LT_OK);
    r->ops = calloc(12, sizeof *r->ops); /* predictions: all 0, ties broken by op id */
    assert_non_null(r->ops);
    return r;
}

/* One pipeline, 2 stages: F u0 u1 u2 then B of the three (reverse order: FILO) on each
 * stage; recompute r0 layers on stage 0, r1 on stage 1; asym: backward units b0, b1, b2. */
static void one_pipeline(lt_step_plan *p, bool asym, uint16_t r0, uint16_t r1, bool break_filo) {
    lt_rank_plan *r = plan_one_rank(p);
    add_forward_units(&r->sched);
    if (asym) add_backward_units(&r->sched);
    for (int st = 0; st < 2; st++) {
        uint16_t rc = st == 0 ? r0 : r1;
        for (uint32_t u = 0; u < 3; u++) op(&r->sched, st, LT_OP_F, u, rc);
        /* symmetric: B u2, u1, u0; asym: B b0, b1, b2 (the later tokens first) */
        uint32_t order[3] = {2, 1, 0};
        if (asym) order[0] = 0, order[1] = 1, order[2] = 2;
        if (break_filo && st == 0) { uint32_t t = order[0]; order[0] = order[1], order[1] = t; }
        for (int k = 0; k < 3; k++) op(&r->sched, st, LT_OP_B, order[k], rc);
    }
}

/* ---------------------------------------------------------------- tests */

static void run_plan(fixture *f, const lt_step_plan *p, float *g, const lt_llama_views *v, lt_exec_stats *es) {
    memset(g, 0, f->m.n_params * sizeof(float));
    lt_error err;
    lt_status st = lt_exec_step(&f->m, p, f->smp, v, es, f->pool, &err);
    if (st != LT_OK) fail_msg("lt_exec_step: %s (%s)", err.what, err.where);
    assert_int_equal(es->n_predicted, f->n_predicted);
    assert_int_equal(es->n_op_times, es->ops_run);
    for (size_t i = 0; i < es->n_op_times; i++) {
        assert_true(es->op_times[i].finish_s >= es->op_times[i].start_s);
        if (i > 0) assert_true(es->op_times[i].start_s >= es->op_times[i - 1].finish_s);
    }
    free(es->op_times), free(es->stage_peak_bytes); /* the counts stay for the caller */
    es->op_times = NULL, es->n_op_times = 0, es->stage_peak_bytes = NULL;
}

static void test_symmetric_and_recompute(void **state) {
    fixture *f = *state;
    lt_step_plan p;
    lt_exec_stats a, b;
    one_pipeline(&p, false, 0, 0, false);
    run_plan(f, &p, f->got, &f->vgot, &a);
    lt_step_plan_free(&p);
    assert_true(max_rel(f, f->got, f->ref) <= 1e-5);
    assert_int_equal(a.ops_run, 12);
    one_pipeline(&p, false, 1, 2, false);
    run_plan(f, &p, f->got2, &f->vgot2, &b);
    lt_step_plan_free(&p);
    /* recompute re-runs the same forward on the same rows: the same bits */
    assert_memory_equal(f->got2, f->got, f->m.n_params * sizeof(float));
    assert_true(b.act_bytes_peak < a.act_bytes_peak);
    assert_true(fabs(a.loss_sum - b.loss_sum) == 0.0);
}

static void test_asymmetric_backward_units(void **state) {
    fixture *f = *state;
    lt_step_plan p;
    lt_exec_stats a;
    for (int rc = 0; rc <= 1; rc++) {
        one_pipeline(&p, true, (uint16_t)rc, (uint16_t)(2 * rc), false);
        run_plan(f, &p, f->got, &f->vgot, &a);
        lt_step_plan_free(&p);
        double e = max_rel(f, f->got, f->ref);
        if (!(e <= 1e-5)) fail_msg("asymmetric, recompute %d: rel err %.3e", rc, e);
    }
}

/* What an asymmetric step holds, stage by stage. Forward units u0 = samples 0 and 1 (27
 * tokens), u1 = sample 2 [0, 20), u2 = sample 2 [20, 45); backward units b0 = sample 2
 * [40, 45), b1 = [5, 40) (15 rows of u1, 20 of u2), b2 = samples 0, 1 and sample 2 [0, 5).
 * On each stage F u0 u1 u2, B b0 b1 b2. The peak comes while b1 runs its layers: u0's 27
 * rows, u1's 20 and the 20 of u2 that b0 left (67 forward rows, b0's 5 were dropped after
 * it), one layer of b1's 35 rows (gathered per layer), the K/V of every sample (72 tokens)
 * and the dK/dV of sample 2 (45, made by b0), b1's backward scratch for its 35 rows, and on
 * stage 1 the gradient of its input that b1 makes there for stage 0 (35 rows; stage 0's b1
 * reads stage 1's, counted on stage 1, and makes none: it ends at the embedding). Bytes per
 * token, from the model's shape: */
static void test_asymmetric_memory(void **state) {
    fixture *f = *state;
    lt_step_plan p;
    lt_rank_plan *r = plan_one_rank(&p);
    lt_schedule *s = &r->sched;
    lt_schedule_add_slice(s, 0, 0, 20), lt_schedule_add_slice(s, 1, 0, 7), lt_schedule_add_unit(s, 0, 2);
    lt_schedule_add_slice(s, 2, 0, 20), lt_schedule_add_unit(s, 2, 1);
    lt_schedule_add_slice(s, 2, 20, 45), lt_schedule_add_unit(s, 3, 1);
    lt_schedule_add_bslice(s, 0, 0, 20), lt_schedule_add_bslice(s, 1, 0, 7), lt_schedule_add_bslice(s, 2, 0, 5);
    lt_schedule_add_bslice(s, 2, 5, 40), lt_schedule_add_bslice(s, 2, 40, 45);
    lt_schedule_add_bunit(s, 4, 1), lt_schedule_add_bunit(s, 3, 1), lt_schedule_add_bunit(s, 0, 3);
    for (int st = 0; st < 2; st++)
        for (uint32_t k = 0; k < 6; k++) op(s, st, k < 3 ? LT_OP_F : LT_OP_B, k % 3, 0);
    lt_exec_stats es;
    memset(f->got, 0, f->m.n_params * sizeof(float));
    lt_error err;
    if (lt_exec_step(&f->m, &p, f->smp, &f->vgot, &es, f->pool, &err) != LT_OK) fail_msg("%s", err.what);
    lt_step_plan_free(&p);
    assert_true(max_rel(f, f->got, f->ref) <= 1e-5);
    const lt_model_shape *sh = &f->m.shape;
    size_t C = (size_t)sh->hidden, qd = C, nh = (size_t)sh->heads, F = (size_t)sh->ffn;
    size_t kvd = (size_t)sh->kv_heads * (C / nh);
    /* one layer: x, n1, x2, n2 [C]; rstd1, rstd2; q, att [qd]; lse [heads]; gate, up, act [F] */
    size_t layer = 4 * C + 2 + 2 * qd + nh + 3 * F;
    /* a backward's scratch: dx, dn [C]; dq, datt [qd]; dact, dgate, dup [F]; dk, dv [kvd] */
    size_t scratch = (2 * C + 2 * qd + 3 * F + 2 * kvd) * sizeof(float);
    size_t ints = 3 * sizeof(int32_t);     /* token id, position, target */
    size_t kv = 2 * kvd * sizeof(float) * 2; /* K and V (or dK and dV) of the stage's 2 layers */
    assert_int_equal(es.n_stages, 2);
    for (int st = 0; st < 2; st++) {
        size_t head = st == 1 ? C : 0; /* the last stage keeps the head's dnf_in [C] */
        size_t fwd = (2 * layer + C + head) * sizeof(float) + ints; /* 2 layers, out [C] */
        size_t win = (layer + head) * sizeof(float) + ints;          /* one layer, no out */
        size_t din = st == 1 ? C * sizeof(float) : 0;
        size_t want = 67 * fwd + 35 * win + (72 + 45) * kv + 35 * (scratch + din);
        /* forward units held whole until their last backward, b1's rows gathered for both
         * layers at once: 72 forward rows and 35 whole rows */
        size_t whole = 72 * fwd + 35 * fwd + (72 + 45) * kv + 35 * (scratch + din);
        if (es.stage_peak_bytes[st] != want)
            fail_msg("stage %d: peak %zu bytes, want %zu (whole units and all-layer gathers: %zu; without the "
                     "backward's working memory: %zu)",
                     st, es.stage_peak_bytes[st], want, whole, want - 35 * (scratch + din));
        assert_true(want < whole);
    }
    lt_exec_stats_free(&es);
}

/* Two pipelines: samples 0 and 1 on the first, sample 2 (two slices) on the second. */
static void test_two_pipelines(void **state) {
    fixture *f = *state;
    lt_step_plan p;
    lt_step_plan_init(&p);
    p.step = 1, p.n_samples = NS, p.pp = 2, p.n_ranks = 2;
    p.lengths = calloc(NS, sizeof *p.lengths);
    p.sample_rank = calloc(NS, sizeof *p.sample_rank);
    p.ranks = calloc(2, sizeof *p.ranks);
    assert_true(p.lengths && p.sample_rank && p.ranks);
    for (int i = 0; i < NS; i++) p.lengths[i] = LEN[i];
    p.sample_rank[2] = 1;
    p.n_predicted = lt_plan_predicted_tokens(p.lengths, NS);
    for (int r = 0; r < 2; r++) {
        lt_rank_plan *rp = &p.ranks[r];
        rp->dp_rank = r, rp->cp = 1;
        assert_int_equal(lt_schedule_init(&rp->sched, 2, LAYERS, NULL), LT_OK);
        if (r == 0) {
            lt_schedule_add_slice(&rp->sched, 0, 0, 20);
            lt_schedule_add_unit(&rp->sched, 0, 1);
            lt_schedule_add_slice(&rp->sched, 1, 0, 7);
            lt_schedule_add_unit(&rp->sched, 1, 1);
        } else {
            lt_schedule_add_slice(&rp->sched, 2, 0, 15);
            lt_schedule_add_unit(&rp->sched, 0, 1);
            lt_schedule_add_slice(&rp->sched, 2, 15, 45);
            lt_schedule_add_unit(&rp->sched, 1, 1);
        }
        for (int st = 0; st < 2; st++) {
            op(&rp->sched, st, LT_OP_F, 0, 0), op(&rp->sched, st, LT_OP_F, 1, 0);
            op(&rp->sched, st, LT_OP_B, 1, 0), op(&rp->sched, st, LT_OP_B, 0, 0);
        }
        rp->ops = calloc(8, sizeof *rp->ops);
        assert_non_null(rp->ops);
    }
    lt_exec_stats a;
    run_plan(f, &p, f->got, &f->vgot, &a);
    lt_step_plan_free(&p);
    assert_true(max_rel(f, f->got, f->ref) <= 1e-5);
}

/* Context parallelism: the whole one-pipeline plan run by a static CP group of `cp` ranks
 * (every op's units cut into the zigzag shards and run in per-layer lockstep), and DP-Merge
 * units (unit cp = 2). */
static void test_context_parallel(void **state) {
    fixture *f = *state;
    lt_step_plan p;
    lt_exec_stats a;
    for (int cp = 2; cp <= 3; cp++) { /* 3: 6 chunks of 7 tokens, one empty: a member with nothing */
        one_pipeline(&p, false, 0, 0, false);
        p.ranks[0].cp = cp;
        run_plan(f, &p, f->got, &f->vgot, &a);
        lt_step_plan_free(&p);
        double e = max_rel(f, f->got, f->ref);
        if (!(e <= 1e-5)) fail_msg("static cp %d: rel err %.3e", cp, e);
    }
    /* static CP 2 with recompute: bit-identical to without (the same group forward again) */
    one_pipeline(&p, false, 0, 0, false);
    p.ranks[0].cp = 2;
    run_plan(f, &p, f->got, &f->vgot, &a);
    lt_step_plan_free(&p);
    one_pipeline(&p, false, 1, 2, false);
    p.ranks[0].cp = 2;
    lt_exec_stats b;
    run_plan(f, &p, f->got2, &f->vgot2, &b);
    lt_step_plan_free(&p);
    assert_memory_equal(f->got2, f->got, f->m.n_params * sizeof(float));
    assert_true(b.act_bytes_peak < a.act_bytes_peak);
    /* static CP 2 of the asymmetric schedule (backward shards gathered from the forward
     * shards), without and with recompute */
    for (int rc = 0; rc <= 1; rc++) {
        one_pipeline(&p, true, (uint16_t)rc, (uint16_t)(2 * rc), false);
        p.ranks[0].cp = 2;
        run_plan(f, &p, f->got, &f->vgot, &a);
        lt_step_plan_free(&p);
        double e = max_rel(f, f->got, f->ref);
        if (!(e <= 1e-5)) fail_msg("static cp 2, asymmetric, recompute %d: rel err %.3e", rc, e);
    }
    /* sample 2's two units DP-merged over 2 (unit cp = 2; the asymmetric case runs in
     * tests/train/oracle.sh on slimpack's plans) */
    one_pipeline(&p, false, 0, 0, false);
    p.ranks[0].sched.units[1].cp = p.ranks[0].sched.units[2].cp = 2;
    run_plan(f, &p, f->got, &f->vgot, &a);
    lt_step_plan_free(&p);
    double e = max_rel(f, f->got, f->ref);
    if (!(e <= 1e-5)) fail_msg("DP-Merge units: rel err %.3e", e);
}

static void expect_refusal(fixture *f, lt_step_plan *p, const char *needle) {
    lt_error err;
    lt_exec_stats es;
    memset(f->got, 0, f->m.n_params * sizeof(float));
    lt_status st = lt_exec_step(&f->m, p, f->smp, &f->vgot, &es, f->pool, &err);
    lt_exec_stats_free(&es);
    assert_int_equal(st, LT_ERR_INPUT);
    if (!strstr(err.what, needle)) fail_msg("error '%s' lacks '%s'", err.what, needle);
    lt_step_plan_free(p);
}

static void test_refusals(void **state) {
    fixture *f = *state;
    lt_step_plan p;
    /* FILO broken on stage 0: B u1 before B u2 (u2 holds the later slice of sample 2) */
    one_pipeline(&p, false, 0, 0, true);
    expect_refusal(f, &p, "step 5, pipeline 0, stage 0");
    one_pipeline(&p, false, 0, 0, true);
    expect_refusal(f, &p, "deadlock");
    /* a sample of another length than the plan says */
    one_pipeline(&p, false, 0, 0, false);
    p.lengths[1] = 8;
    expect_refusal(f, &p, "step 5, sample 1: 7 tokens read, the plan has 8");
    /* a unit no op runs: drop u0's F and B from both stages (its tokens are never processed) */
    one_pipeline(&p, false, 0, 0, false);
    for (int st = 0; st < 2; st++) {
        lt_stage_ops *so = &p.ranks[0].sched.stage[st];
        size_t k = 0;
        for (size_t i = 0; i < so->n; i++)
            if (so->ops[i].unit != 0) so->ops[k++] = so->ops[i];
        so->n = k;
    }
    expect_refusal(f, &p, "step 5, sample 0 (20 tokens), stage 0: 0 tokens forwarded and 0 backwarded");
    /* a B recomputing another number of layers than its F kept */
    one_pipeline(&p, false, 1, 0, false);
    p.ranks[0].sched.stage[0].ops[3].recompute_layers = 0; /* B u2 on stage 0 */
    expect_refusal(f, &p, "recomputes another number of layers");
}

/* One pipeline of P stages over four micro-batches (samples 0 and 1 whole, sample 2 in two
 * slices with K/V context) in HelixPipe's `folds`-fold FILO schedule, with recompute or not;
 * predictions all 0 (ties: op id order). */
static lt_rank_plan *helix_plan(lt_step_plan *p, int P, int folds, int recompute) {
    lt_rank_plan *r = plan_one_rank(p);
    p->pp = P;
    lt_schedule_free(&r->sched);
    assert_int_equal(lt_schedule_init(&r->sched, P, LAYERS, NULL), LT_OK);
    lt_schedule_add_slice(&r->sched, 0, 0, 20), lt_schedule_add_unit(&r->sched, 0, 1);
    lt_schedule_add_slice(&r->sched, 1, 0, 7), lt_schedule_add_unit(&r->sched, 1, 1);
    lt_schedule_add_slice(&r->sched, 2, 0, 15), lt_schedule_add_unit(&r->sched, 2, 1);
    lt_schedule_add_slice(&r->sched, 2, 15, 45), lt_schedule_add_unit(&r->sched, 3, 1);
    lt_error err;
    assert_int_equal(lt_sched_helixpipe_folds(&r->sched, NULL, 4, folds, recompute, &err), LT_OK);
    free(r->ops);
    r->ops = calloc(lt_schedule_n_ops(&r->sched) + 1, sizeof *r->ops);
    assert_non_null(r->ops);
    return r;
}

/* HelixPipe's schedules: layer-part ops, one process. */
static void test_helixpipe(void **state) {
    fixture *f = *state;
    static const int layouts[][2] = {{2, 1}, {2, 2}, {4, 1}}; /* stages, folds: 4 micro-batches */
    for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
        int P = layouts[k][0], folds = layouts[k][1];
        lt_step_plan p;
        lt_rank_plan *r = helix_plan(&p, P, folds, 0);
        lt_exec_stats es;
        run_plan(f, &p, f->got, &f->vgot, &es);
        double rel = max_rel(f, f->got, f->ref);
        if (!(rel <= 1e-5)) fail_msg("%d stages, %d folds: gradients %.3g from whole", P, folds, rel);
        assert_int_equal(es.ops_run, lt_schedule_n_ops(&r->sched));
        lt_step_plan_free(&p);
        /* with recomputation without attention (4.4.1): the same gradients bit for bit (the
         * post-attention's forward run again from its kept inputs), less memory held */
        size_t kept = es.act_bytes_peak;
        helix_plan(&p, P, folds, 1);
        run_plan(f, &p, f->got2, &f->vgot2, &es);
        assert_memory_equal(f->got2, f->got, f->m.n_params * sizeof(float));
        if (!(es.act_bytes_peak < kept))
            fail_msg("%d stages, %d folds: %zu bytes at the peak with recomputation, %zu without", P, folds,
                     es.act_bytes_peak, kept);
        lt_step_plan_free(&p);
    }
    /* layer parts over processes: tests/train/dist.sh (this test runs in one process) */
}

/* The chunked MLP (HelixPipe 4.4.2, lt_llama.mlp_chunk = 8: the 20- and 45-token units in
 * chunks): megatron-like whole layers (kept arrays read a chunk at a time in the backward)
 * and HelixPipe's parts with recomputation without attention (the post-attention's MLP
 * remade chunk by chunk in its backward) give the gradients of every sample run whole within
 * 1e-5, and hold fewer bytes at the peak than the same plans unchunked. */
static void test_chunked_mlp(void **state) {
    fixture *f = *state;
    for (int k = 0; k < 3; k++) {
        lt_step_plan p;
        lt_exec_stats plain, chunked;
        if (k == 0) one_pipeline(&p, false, 0, 0, false);
        else if (k == 1) one_pipeline(&p, false, 1, 2, false);
        else helix_plan(&p, 2, 1, 1);
        run_plan(f, &p, f->got, &f->vgot, &plain);
        f->m.mlp_chunk = 8;
        run_plan(f, &p, f->got2, &f->vgot2, &chunked);
        f->m.mlp_chunk = 0;
        lt_step_plan_free(&p);
        double rel = max_rel(f, f->got2, f->ref);
        if (!(rel <= 1e-5)) fail_msg("plan %d: chunked gradients %.3g from whole", k, rel);
        if (!(chunked.act_bytes_peak < plain.act_bytes_peak))
            fail_msg("plan %d: %zu bytes at the peak in chunks, %zu without", k, chunked.act_bytes_peak,
                     plain.act_bytes_peak);
        assert_true(fabs(plain.loss_sum - chunked.loss_sum) <= 1e-6 * fabs(plain.loss_sum));
    }
}

/* A scoring plan: forward only, every layout gives the loss of the samples run whole. */
static void test_scoring(void **state) {
    fixture *f = *state;
    lt_train_slice whole[NS];
    lt_train_unit units[NS];
    for (int i = 0; i < NS; i++) {
        whole[i] = (lt_train_slice){.sample = i, .begin = 0, .end = LEN[i]};
        units[i] = (lt_train_unit){.slices = &whole[i], .n_slices = 1};
    }
    lt_batch b = {.samples = f->smp, .n_samples = NS};
    double want = 0;
    assert_int_equal(lt_llama_step_units(&f->m, &b, units, NS, 0.0f, NULL, NULL, &want, f->pool, NULL), LT_OK);
    int64_t len[NS];
    for (int i = 0; i < NS; i++) len[i] = LEN[i];
    /* with parts: HelixPipe's layer parts (a model held as its parts), every op one part */
    for (int parts = 0; parts <= 1; parts++)
    for (int dp = 1; dp <= 2; dp++)
        for (int pp = 1; pp <= 2 + parts; pp++) {
            lt_step_plan p;
            lt_error err;
            assert_int_equal(lt_plan_scoring(&p, len, NS, dp, pp, LAYERS, parts, &err), LT_OK);
            assert_int_equal(p.n_predicted, f->n_predicted);
            assert_int_equal(lt_schedule_has_parts(&p.ranks[0].sched), parts);
            lt_exec_stats es;
            lt_status st = lt_exec_step(&f->m, &p, f->smp, NULL, &es, f->pool, &err);
            if (st != LT_OK) fail_msg("parts %d dp %d pp %d: %s", parts, dp, pp, err.what);
            assert_int_equal(es.n_predicted, f->n_predicted);
            assert_int_equal(es.ops_run, (size_t)(parts ? NS * 3 * LAYERS : NS * pp));
            if (fabs(es.loss_sum - want) > 1e-6 * fabs(want))
                fail_msg("parts %d dp %d pp %d: loss %.9g, whole %.9g", parts, dp, pp, es.loss_sum, want);
            lt_exec_stats_free(&es);
            /* a B op in it is refused: a plan run without gradients has only F ops */
            if (!parts && dp == 1 && pp == 2) {
                lt_schedule_add_stage_op(&p.ranks[0].sched, 1, LT_OP_B, 0, 0);
                st = lt_exec_step(&f->m, &p, f->smp, NULL, &es, f->pool, &err);
                lt_exec_stats_free(&es);
                assert_int_equal(st, LT_ERR_INPUT);
                if (!strstr(err.what, "not an F, in a plan run without gradients"))
                    fail_msg("B in a scoring plan: '%s'", err.what);
            }
            lt_step_plan_free(&p);
        }
    /* a document of one token predicts nothing: not a scoring document */
    lt_step_plan p;
    lt_error err;
    int64_t one[2] = {5, 1};
    assert_int_equal(lt_plan_scoring(&p, one, 2, 1, 1, LAYERS, false, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "scoring document 1 has 1 tokens"));
    assert_int_equal(lt_plan_scoring(&p, one, 1, 1, 5, LAYERS, false, &err), LT_ERR_USAGE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_symmetric_and_recompute),
        cmocka_unit_test(test_asymmetric_backward_units),
        cmocka_unit_test(test_asymmetric_memory),
        cmocka_unit_test(test_two_pipelines),
        cmocka_unit_test(test_context_parallel),
        cmocka_unit_test(test_helixpipe),
        cmocka_unit_test(test_chunked_mlp),
        cmocka_unit_test(test_scoring),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
