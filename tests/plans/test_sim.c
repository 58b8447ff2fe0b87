/*
 * tests/plans/test_sim.c — unit tests for the DAG pipeline simulator (plans/schedule/sim.h) and the
 * schedule tables (plans/schedule/schedule.h) (cmocka).
 *
 * Covers: hand-computed tiny schedules (1 stage; GPipe and 1F1B on 2 stages x 2 micro-
 * batches, with and without P2P time; memory peaks with base, work, activation and K/V
 * bytes; the critical path), the bubble (P - 1) / (m + P - 1) and peak in-flight
 * activations of GPipe and 1F1B over a grid of P and m, ChunkFlow Fig. 2's 57.14 % bubble,
 * deadlocks (B before F, crossed slice orders forward and backward, a cycle over two stages,
 * a long cycle cut short), slices of one sample over two units (forward in order, backward
 * reversed, across stages), instances (FK then F then B: B matches the F), partial-layer
 * ops over two stages with P2P time, K/V held on one stage until a B of another, property
 * tests on random schedules against an independent oracle (times, memory, critical path,
 * lt_sim reuse), malformed schedules and costs, the ASCII timeline and the SVG chart;
 * asymmetric schedules (SlimPack 4.1.2, 4.2): a backward partition regrouping the forward
 * one, every start and finish, the critical path and the memory (activations and K/V freed
 * in proportion to tokens) by hand, the deadlock of a non-FILO backward order, and the
 * errors of B ops whose forwards are missing or elsewhere.
 * Builds its schedules itself (tiny GPipe / 1F1B builders below), never with the
 * generators of plans/schedule/generators.c.
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

#include "lib/rng.h"
#include "plans/schedule/schedule.h"
#include "plans/schedule/sim.h"

/* ---- helpers ---- */

static void sched_init(lt_schedule *s, int stages, int layers) {
    lt_error err;
    assert_int_equal(lt_schedule_init(s, stages, layers, &err), LT_OK);
}

/* A unit holding one whole sample of `tokens` tokens. */
static uint32_t add_sample(lt_schedule *s, int32_t sample, int64_t tokens) {
    uint32_t j = lt_schedule_add_slice(s, sample, 0, tokens);
    return lt_schedule_add_unit(s, j, 1);
}

/* GPipe (pipeline reference page): all forwards in order, then all backwards reversed. */
static void build_gpipe(lt_schedule *s, uint32_t m) {
    for (int st = 0; st < s->stages; st++) {
        for (uint32_t i = 0; i < m; i++) lt_schedule_add_stage_op(s, st, LT_OP_F, i, 0);
        for (uint32_t i = m; i-- > 0;) lt_schedule_add_stage_op(s, st, LT_OP_B, i, 0);
    }
}

/* 1F1B (PipeDream-flush): min(P - s - 1, m) warm-up forwards, then one F one B, then drain. */
static void build_1f1b(lt_schedule *s, uint32_t m) {
    int P = s->stages;
    for (int st = 0; st < P; st++) {
        uint32_t w = (uint32_t)(P - st - 1) < m ? (uint32_t)(P - st - 1) : m, f = 0, b = 0;
        while (f < w) lt_schedule_add_stage_op(s, st, LT_OP_F, f++, 0);
        while (f < m) {
            lt_schedule_add_stage_op(s, st, LT_OP_F, f++, 0);
            lt_schedule_add_stage_op(s, st, LT_OP_B, b++, 0);
        }
        while (b < m) lt_schedule_add_stage_op(s, st, LT_OP_B, b++, 0);
    }
}

static void add_part_op(lt_schedule *s, int stage, lt_op_kind kind, uint32_t unit, lt_op_part part,
                        uint32_t layer) {
    lt_op op = {.kind = (uint8_t)kind, .part = (uint8_t)part, .unit = unit, .layer_begin = layer,
                .layer_end = layer + 1};
    lt_schedule_add_op(s, stage, op);
}

static void run_ok(lt_sim *sim, const lt_schedule *s, const lt_sim_costs *c) {
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_sim_run(sim, s, c, &err);
    if (st != LT_OK) fprintf(stderr, "lt_sim_run: %s\n", err.what);
    assert_int_equal(st, LT_OK);
}

/* Runs a schedule expected to fail; returns the message. */
static const char *run_fail(lt_sim *sim, const lt_schedule *s, const lt_sim_costs *c, lt_error *err) {
    lt_error_clear(err);
    assert_int_equal(lt_sim_run(sim, s, c, err), LT_ERR_INPUT);
    return err->what;
}

static void assert_contains(const char *text, const char *want) {
    if (!strstr(text, want)) fail_msg("\"%s\" does not contain \"%s\"", text, want);
}

static size_t id_of(const lt_sim *sim, int stage, size_t index) { return sim->first_op[stage] + index; }

static void assert_near(double got, double want) {
    if (fabs(got - want) > 1e-9 * (1 + fabs(want))) fail_msg("got %.17g, want %.17g", got, want);
}

/* Asserts op (stage, index) runs over [start, finish). */
static void assert_op(const lt_sim *sim, int stage, size_t index, double start, double finish) {
    size_t v = id_of(sim, stage, index);
    if (fabs(sim->start[v] - start) > 1e-12 || fabs(sim->finish[v] - finish) > 1e-12)
        fail_msg("op %zu of stage %d runs [%g, %g), want [%g, %g)", index, stage, sim->start[v], sim->finish[v], start,
                 finish);
}

/* A cost table for hand-computed cases: every F/FK takes tf, every B tb (whatever the
 * tokens); fixed bytes; P2P time = p2p_per_byte x bytes; base bytes per stage. */
typedef struct fixed_costs {
    double tf, tb, act, kv, work, out;
    double p2p_per_byte;
    double base[4];
    int p2p_calls;
} fixed_costs;

static void fixed_op_cost(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    (void)s;
    (void)stage;
    const fixed_costs *c = ctx;
    out->time = op->kind == LT_OP_B ? c->tb : c->tf;
    out->act_bytes = op->kind == LT_OP_F ? c->act : 0;
    out->kv_bytes = op->kind == LT_OP_B ? 0 : c->kv;
    out->work_bytes = c->work;
    out->out_bytes = c->out;
}

static double fixed_p2p(void *ctx, int from, int to, double bytes) {
    fixed_costs *c = ctx;
    assert_true(from != to);
    c->p2p_calls++;
    return c->p2p_per_byte * bytes;
}

static double fixed_base(void *ctx, int stage) { return ((const fixed_costs *)ctx)->base[stage]; }

static lt_sim_costs fixed(fixed_costs *c) {
    return (lt_sim_costs){.ctx = c, .op_cost = fixed_op_cost, .p2p_time = fixed_p2p, .base_bytes = fixed_base};
}

static void assert_critical(const lt_sim *sim, const size_t *want, size_t n) {
    assert_int_equal(sim->n_critical, n);
    for (size_t i = 0; i < n; i++)
        if (sim->critical[i] != want[i]) fail_msg("critical[%zu] = %zu, want %zu", i, sim->critical[i], want[i]);
}

/* ---- hand-computed cases (unit-time model: F = tokens, B = 2 x tokens) ---- */

/* One stage, units of 1 and 3 tokens, F0 B0 F1 B1: F0 [0,1) B0 [1,3) F1 [3,6) B1 [6,12). */
static void test_one_stage(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 1, 4);
    add_sample(&s, 0, 1);
    add_sample(&s, 1, 3);
    lt_schedule_add_stage_op(&s, 0, LT_OP_F, 0, 0);
    lt_schedule_add_stage_op(&s, 0, LT_OP_B, 0, 0);
    lt_schedule_add_stage_op(&s, 0, LT_OP_F, 1, 0);
    lt_schedule_add_stage_op(&s, 0, LT_OP_B, 1, 0);
    lt_sim sim = {0};
    lt_sim_costs c = lt_sim_unit_costs();
    run_ok(&sim, &s, &c);
    assert_op(&sim, 0, 0, 0, 1);
    assert_op(&sim, 0, 1, 1, 3);
    assert_op(&sim, 0, 2, 3, 6);
    assert_op(&sim, 0, 3, 6, 12);
    assert_near(sim.step_time, 12);
    assert_near(sim.bubble_ratio, 0);
    assert_near(sim.busy[0], 12);
    assert_near(sim.peak_mem[0], 1); /* one micro-batch in flight at a time */
    assert_near(sim.end_mem[0], 0);
    assert_critical(&sim, (const size_t[]){0, 1, 2, 3}, 4);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* GPipe, 2 stages x 2 micro-batches of 1 token (F = 1, B = 2):
 *   s0: F0 [0,1) F1 [1,2)                     B1 [5,7) B0 [7,9)
 *   s1:          F0 [1,2) F1 [2,3) B1 [3,5) B0 [5,7)
 * step 9, busy 6 per stage, bubble 6 / 18 = 1/3 = (P-1)/(m+P-1); two F in flight on each
 * stage. Critical path: F0@s0 F1@s0 F1@s1 B1@s1 B0@s1 B0@s0 (ids 0 1 5 6 7 3). */
static void test_gpipe_2x2(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    add_sample(&s, 0, 1);
    add_sample(&s, 1, 1);
    build_gpipe(&s, 2);
    lt_sim sim = {0};
    lt_sim_costs c = lt_sim_unit_costs();
    run_ok(&sim, &s, &c);
    assert_op(&sim, 0, 0, 0, 1);
    assert_op(&sim, 0, 1, 1, 2);
    assert_op(&sim, 0, 2, 5, 7);
    assert_op(&sim, 0, 3, 7, 9);
    assert_op(&sim, 1, 0, 1, 2);
    assert_op(&sim, 1, 1, 2, 3);
    assert_op(&sim, 1, 2, 3, 5);
    assert_op(&sim, 1, 3, 5, 7);
    assert_near(sim.step_time, 9);
    assert_near(sim.bubble_ratio, 1.0 / 3);
    assert_near(sim.busy[0], 6);
    assert_near(sim.busy[1], 6);
    assert_near(sim.peak_mem[0], 2);
    assert_near(sim.peak_mem[1], 2);
    assert_critical(&sim, (const size_t[]){0, 1, 5, 6, 7, 3}, 6);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* 1F1B, 2 stages x 2 micro-batches of 1 token:
 *   s0: F0 [0,1) F1 [1,2)          B0 [4,6)   B1 [7,9)
 *   s1:          F0 [1,2) B0 [2,4) F1 [4,5) B1 [5,7)
 * step 9 (1F1B has GPipe's bubble), but stage 1 holds one micro-batch, stage 0 two.
 * Critical path: F0@s0 F0@s1 B0@s1 F1@s1 B1@s1 B1@s0 (ids 0 4 5 6 7 3). */
static void test_1f1b_2x2(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    add_sample(&s, 0, 1);
    add_sample(&s, 1, 1);
    build_1f1b(&s, 2);
    lt_sim sim = {0};
    lt_sim_costs c = lt_sim_unit_costs();
    run_ok(&sim, &s, &c);
    assert_op(&sim, 0, 0, 0, 1);
    assert_op(&sim, 0, 1, 1, 2);
    assert_op(&sim, 0, 2, 4, 6);
    assert_op(&sim, 0, 3, 7, 9);
    assert_op(&sim, 1, 0, 1, 2);
    assert_op(&sim, 1, 1, 2, 4);
    assert_op(&sim, 1, 2, 4, 5);
    assert_op(&sim, 1, 3, 5, 7);
    assert_near(sim.step_time, 9);
    assert_near(sim.bubble_ratio, 1.0 / 3);
    assert_near(sim.peak_mem[0], 2);
    assert_near(sim.peak_mem[1], 1);
    assert_near(sim.end_mem[0], 0);
    assert_near(sim.end_mem[1], 0);
    assert_critical(&sim, (const size_t[]){0, 4, 5, 6, 7, 3}, 6);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* GPipe 2 x 2 with F = 1, B = 2, every op sending 1 byte, P2P 0.5 per byte:
 *   s0: F0 [0,1) F1 [1,2)                                    B1 [6,8)   B0 [8,10)
 *   s1:        F0 [1.5,2.5) F1 [2.5,3.5) B1 [3.5,5.5) B0 [5.5,7.5)
 * (B1@s0 waits 5.5 + 0.5). step 10, bubble (4 + 4) / 20 = 0.4; four transfers. */
static void test_p2p_time(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    add_sample(&s, 0, 1);
    add_sample(&s, 1, 1);
    build_gpipe(&s, 2);
    fixed_costs fc = {.tf = 1, .tb = 2, .out = 1, .p2p_per_byte = 0.5};
    lt_sim_costs c = fixed(&fc);
    lt_sim sim = {0};
    run_ok(&sim, &s, &c);
    assert_op(&sim, 0, 0, 0, 1);
    assert_op(&sim, 0, 1, 1, 2);
    assert_op(&sim, 0, 2, 6, 8);
    assert_op(&sim, 0, 3, 8, 10);
    assert_op(&sim, 1, 0, 1.5, 2.5);
    assert_op(&sim, 1, 1, 2.5, 3.5);
    assert_op(&sim, 1, 2, 3.5, 5.5);
    assert_op(&sim, 1, 3, 5.5, 7.5);
    assert_near(sim.step_time, 10);
    assert_near(sim.bubble_ratio, 0.4);
    assert_int_equal(fc.p2p_calls, 4);
    /* B0@s0 starts at 8 both after B0@s1 + transfer and after B1@s0: the model path wins */
    assert_critical(&sim, (const size_t[]){0, 1, 5, 6, 7, 3}, 6);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* 1F1B 2 x 2 with base bytes {100, 200}, act 10 per F, work 3 per op: stage 0 holds two F
 * (100 + 2 x 10 + 3 while F1 runs), stage 1 one (200 + 10 + 3); both end at their base. */
static void test_memory_peaks(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    add_sample(&s, 0, 1);
    add_sample(&s, 1, 1);
    build_1f1b(&s, 2);
    fixed_costs fc = {.tf = 1, .tb = 2, .act = 10, .work = 3, .base = {100, 200}};
    lt_sim_costs c = fixed(&fc);
    lt_sim sim = {0};
    run_ok(&sim, &s, &c);
    assert_near(sim.peak_mem[0], 123);
    assert_near(sim.peak_mem[1], 213);
    assert_near(sim.end_mem[0], 100);
    assert_near(sim.end_mem[1], 200);
    /* GPipe holds both on both stages */
    lt_schedule_clear(&s);
    add_sample(&s, 0, 1);
    add_sample(&s, 1, 1);
    build_gpipe(&s, 2);
    run_ok(&sim, &s, &c);
    assert_near(sim.peak_mem[0], 123);
    assert_near(sim.peak_mem[1], 223);
    /* an F without a B keeps its activations to the end */
    lt_schedule_clear(&s);
    add_sample(&s, 0, 1);
    lt_schedule_add_stage_op(&s, 0, LT_OP_F, 0, 0);
    lt_schedule_add_stage_op(&s, 1, LT_OP_F, 0, 0);
    run_ok(&sim, &s, &c);
    assert_near(sim.end_mem[0], 110);
    assert_near(sim.end_mem[1], 210);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* No ops: step 0, no bubble, memory = base. */
static void test_empty(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    fixed_costs fc = {.base = {5, 7}};
    lt_sim_costs c = fixed(&fc);
    lt_sim sim = {0};
    run_ok(&sim, &s, &c);
    assert_int_equal(sim.n_ops, 0);
    assert_near(sim.step_time, 0);
    assert_near(sim.bubble_ratio, 0);
    assert_near(sim.peak_mem[1], 7);
    assert_int_equal(sim.n_critical, 0);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* ---- GPipe and 1F1B over a grid of P and m ---- */

static void test_grid(void **state) {
    (void)state;
    lt_sim sim = {0}; /* one lt_sim for every run: scratch reused across sizes */
    lt_sim_costs c = lt_sim_unit_costs();
    for (int P = 1; P <= 6; P++) {
        for (uint32_t m = 1; m <= 12; m++) {
            for (int kind = 0; kind < 2; kind++) {
                lt_schedule s;
                sched_init(&s, P, 2 * P + 1);
                for (uint32_t i = 0; i < m; i++) add_sample(&s, (int32_t)i, 5);
                if (kind == 0)
                    build_gpipe(&s, m);
                else
                    build_1f1b(&s, m);
                run_ok(&sim, &s, &c);
                /* (m + P - 1) x (F + B) with F = 5, B = 10 */
                assert_near(sim.step_time, 15.0 * (m + (uint32_t)P - 1));
                assert_near(sim.bubble_ratio, (double)(P - 1) / (m + (uint32_t)P - 1));
                for (int st = 0; st < P; st++) {
                    double want = kind == 0 ? m : ((uint32_t)(P - st) < m ? (uint32_t)(P - st) : m);
                    if (sim.peak_mem[st] != want)
                        fail_msg("%s P=%d m=%u stage %d: peak %g, want %g", kind ? "1F1B" : "GPipe", P, m, st,
                                 sim.peak_mem[st], want);
                    assert_near(sim.end_mem[st], 0);
                    assert_near(sim.busy[st], 15.0 * m);
                }
                lt_schedule_free(&s);
            }
        }
    }
    lt_sim_free(&sim);
}

/* ChunkFlow Sec. 3, Fig. 2: 1F1B over sequences of 1, 1, 2 and 4 units on 4 stages: bubbles
 * are 57.14 % (4/7) of the time; 42.8 % (3/7) for four equal sequences. */
static void test_chunkflow_fig2(void **state) {
    (void)state;
    static const int64_t lens[2][4] = {{4, 2, 1, 1}, {1, 1, 1, 1}};
    static const double want[2] = {4.0 / 7, 3.0 / 7};
    lt_sim sim = {0};
    lt_sim_costs c = lt_sim_unit_costs();
    for (int k = 0; k < 2; k++) {
        lt_schedule s;
        sched_init(&s, 4, 4);
        for (int i = 0; i < 4; i++) add_sample(&s, i, lens[k][i]);
        build_1f1b(&s, 4);
        run_ok(&sim, &s, &c);
        assert_near(sim.bubble_ratio, want[k]);
        lt_schedule_free(&s);
    }
    lt_sim_free(&sim);
}

/* ---- deadlocks ---- */

/* The last stage runs B0 before F0: B0 waits for its activations, F0 for B0 (stage order). */
static void test_deadlock_b_before_f(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    add_sample(&s, 0, 1);
    lt_schedule_add_stage_op(&s, 0, LT_OP_F, 0, 0);
    lt_schedule_add_stage_op(&s, 0, LT_OP_B, 0, 0);
    lt_schedule_add_stage_op(&s, 1, LT_OP_B, 0, 0);
    lt_schedule_add_stage_op(&s, 1, LT_OP_F, 0, 0);
    lt_sim sim = {0};
    lt_sim_costs c = lt_sim_unit_costs();
    lt_error err;
    const char *what = run_fail(&sim, &s, &c, &err);
    assert_string_equal(what, "deadlock: B0@s1 waits for F0@s1 (activations) waits for B0@s1 (stage order)");
    assert_true(err.hint[0] != '\0');
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* A cycle through both stages: s1 runs F1 before F0, s0 runs B0 before F1. */
static void test_deadlock_two_stages(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    add_sample(&s, 0, 1);
    add_sample(&s, 1, 1);
    lt_schedule_add_stage_op(&s, 0, LT_OP_F, 0, 0);
    lt_schedule_add_stage_op(&s, 0, LT_OP_B, 0, 0);
    lt_schedule_add_stage_op(&s, 0, LT_OP_F, 1, 0);
    lt_schedule_add_stage_op(&s, 0, LT_OP_B, 1, 0);
    lt_schedule_add_stage_op(&s, 1, LT_OP_F, 1, 0);
    lt_schedule_add_stage_op(&s, 1, LT_OP_F, 0, 0);
    lt_schedule_add_stage_op(&s, 1, LT_OP_B, 0, 0);
    lt_schedule_add_stage_op(&s, 1, LT_OP_B, 1, 0);
    lt_sim sim = {0};
    lt_sim_costs c = lt_sim_unit_costs();
    lt_error err;
    const char *what = run_fail(&sim, &s, &c, &err);
    assert_string_equal(what, "deadlock: B0@s0 waits for B0@s1 (model path) waits for F0@s1 (activations) waits for "
                              "F1@s1 (stage order) waits for F1@s0 (model path) waits for B0@s0 (stage order)");
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* Two samples a, b of two slices each, a unit per slice (a0 a1 b0 b1 = units 0 1 2 3). */
static void add_two_split_samples(lt_schedule *s) {
    for (int32_t smp = 0; smp < 2; smp++) {
        uint32_t j = lt_schedule_add_slice(s, smp, 0, 4);
        lt_schedule_add_unit(s, j, 1);
        j = lt_schedule_add_slice(s, smp, 4, 8);
        lt_schedule_add_unit(s, j, 1);
    }
}

/* Slice orders crossed: forward of b1 before b0's, then backward of a0 before a1's. */
static void test_deadlock_slice_order(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 1, 1);
    add_two_split_samples(&s);
    static const uint32_t fwd_crossed[4] = {0, 3, 2, 1}, bwd_ok[4] = {3, 2, 1, 0};
    for (int i = 0; i < 4; i++) lt_schedule_add_stage_op(&s, 0, LT_OP_F, fwd_crossed[i], 0);
    for (int i = 0; i < 4; i++) lt_schedule_add_stage_op(&s, 0, LT_OP_B, bwd_ok[i], 0);
    lt_sim sim = {0};
    lt_sim_costs c = lt_sim_unit_costs();
    lt_error err;
    const char *what = run_fail(&sim, &s, &c, &err);
    assert_string_equal(what, "deadlock: F3@s0 waits for F2@s0 (slice keys/values) waits for F3@s0 (stage order)");

    lt_schedule_clear(&s);
    add_two_split_samples(&s);
    static const uint32_t fwd_ok[4] = {0, 2, 1, 3}, bwd_crossed[4] = {3, 0, 1, 2};
    for (int i = 0; i < 4; i++) lt_schedule_add_stage_op(&s, 0, LT_OP_F, fwd_ok[i], 0);
    for (int i = 0; i < 4; i++) lt_schedule_add_stage_op(&s, 0, LT_OP_B, bwd_crossed[i], 0);
    what = run_fail(&sim, &s, &c, &err);
    assert_string_equal(what,
                        "deadlock: B0@s0 waits for B1@s0 (slice key/value gradients) waits for B0@s0 (stage order)");

    /* the same with both orders right simulates */
    lt_schedule_clear(&s);
    add_two_split_samples(&s);
    for (int i = 0; i < 4; i++) lt_schedule_add_stage_op(&s, 0, LT_OP_F, fwd_ok[i], 0);
    for (int i = 0; i < 4; i++) lt_schedule_add_stage_op(&s, 0, LT_OP_B, bwd_ok[i], 0);
    run_ok(&sim, &s, &c);
    assert_near(sim.step_time, 4 * 4 + 4 * 8);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* A cycle of 201 ops: the message is cut, says how long the cycle is and fits. */
static void test_deadlock_long_cycle(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 1, 1);
    for (uint32_t i = 0; i < 200; i++) add_sample(&s, (int32_t)i, 1);
    for (uint32_t i = 0; i < 200; i++) lt_schedule_add_stage_op(&s, 0, LT_OP_B, i, 0);
    for (uint32_t i = 0; i < 200; i++) lt_schedule_add_stage_op(&s, 0, LT_OP_F, i, 0);
    lt_sim sim = {0};
    lt_sim_costs c = lt_sim_unit_costs();
    lt_error err;
    const char *what = run_fail(&sim, &s, &c, &err);
    assert_contains(what, "deadlock: ");
    assert_contains(what, "... (a cycle of 201 ops)");
    assert_true(strlen(what) < LT_ERROR_WHAT_MAX - 1);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* ---- slices, instances, partial layers ---- */

/* Costs 1, except F0.attn and B1.attn (10); act 1 per F. */
static void slice_op_cost(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    (void)ctx;
    (void)s;
    (void)stage;
    bool slow = op->part == LT_PART_ATTN &&
                ((op->kind == LT_OP_F && op->unit == 0) || (op->kind == LT_OP_B && op->unit == 1));
    out->time = slow ? 10 : 1;
    out->act_bytes = op->kind == LT_OP_F ? 1 : 0;
}

static void test_slices_by_parts(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    for (int64_t b = 0; b < 8; b += 4) lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, 7, b, b + 4), 1);
    /* layer 1 (the model's end) whole on stage 0 after layer 0's parts */
    lt_op f1 = {.kind = LT_OP_F, .part = LT_PART_ALL, .layer_begin = 1, .layer_end = 2};
    add_part_op(&s, 0, LT_OP_F, 0, LT_PART_PRE, 0);
    add_part_op(&s, 0, LT_OP_F, 1, LT_PART_PRE, 0);
    add_part_op(&s, 0, LT_OP_F, 0, LT_PART_ATTN, 0);
    add_part_op(&s, 0, LT_OP_F, 0, LT_PART_POST, 0);
    add_part_op(&s, 0, LT_OP_F, 1, LT_PART_POST, 0);
    f1.unit = 0, lt_schedule_add_op(&s, 0, f1);
    f1.unit = 1, lt_schedule_add_op(&s, 0, f1);
    f1.kind = LT_OP_B;
    f1.unit = 1, lt_schedule_add_op(&s, 0, f1);
    f1.unit = 0, lt_schedule_add_op(&s, 0, f1);
    add_part_op(&s, 0, LT_OP_B, 1, LT_PART_POST, 0);
    add_part_op(&s, 0, LT_OP_B, 0, LT_PART_POST, 0);
    add_part_op(&s, 0, LT_OP_B, 0, LT_PART_ATTN, 0);
    add_part_op(&s, 0, LT_OP_B, 1, LT_PART_PRE, 0);
    add_part_op(&s, 0, LT_OP_B, 0, LT_PART_PRE, 0);
    add_part_op(&s, 1, LT_OP_F, 1, LT_PART_ATTN, 0);
    add_part_op(&s, 1, LT_OP_B, 1, LT_PART_ATTN, 0);
    /* Costs 1 except F0.attn and B1.attn (10), no transfer time:
     *   s0: F0.pre [0,1) F1.pre [1,2) F0.attn [2,12) F0.post [12,13) F1.post [13,14)
     *       F0 L1 [14,15) F1 L1 [15,16) B1 L1 [16,17) B0 L1 [17,18) B1.post [18,19)
     *       B0.post [19,20) B0.attn [29,30) B1.pre [30,31) B0.pre [31,32)
     *   s1: F1.attn [12,13): after u0's keys/values (F0.attn, 12), not just F1.pre (2);
     *       B1.attn [19,29)
     * F0 L1 waits F0.post; B0.post waits B1.post (dK/dV), B0.attn waits B1.attn (29). */
    lt_sim sim = {0};
    lt_sim_costs c = {.op_cost = slice_op_cost};
    run_ok(&sim, &s, &c);
    static const double want0[14][2] = {{0, 1},   {1, 2},   {2, 12},  {12, 13}, {13, 14}, {14, 15}, {15, 16},
                                        {16, 17}, {17, 18}, {18, 19}, {19, 20}, {29, 30}, {30, 31}, {31, 32}};
    for (size_t i = 0; i < 14; i++) assert_op(&sim, 0, i, want0[i][0], want0[i][1]);
    assert_op(&sim, 1, 0, 12, 13);
    assert_op(&sim, 1, 1, 19, 29);
    assert_near(sim.step_time, 32);
    assert_near(sim.end_mem[0], 0);
    assert_near(sim.end_mem[1], 0);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* Parts' bytes: activations PRE 1, ATTN 10, POST 100 per F; working bytes 1000 in the
 * attention's F, 2000 in its B; nothing sent. */
static void part_bytes_cost(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    (void)ctx;
    (void)s;
    (void)stage;
    out->time = 1;
    static const double act[4] = {0, 1, 10, 100};
    out->act_bytes = op->kind == LT_OP_F ? act[op->part] : 0;
    if (op->part == LT_PART_ATTN) out->work_bytes = op->kind == LT_OP_F ? 1000 : 2000;
}

/* The layer parts of one (unit, layer) on one stage share their activations, as the trainer
 * keeps them (sim.h "Layer parts"): made by the first F there, freed by its B, the last of
 * their B ops there. Layer 0's pre-attention on stage 0, its attention and post-attention on
 * stage 1, then layer 1 whole there (no bytes). Stage 1: ATTN F [10 + 100 kept, 1000 working] POST F, POST B (the post-
 * attention's 100 still kept), ATTN B [110 kept, 2000 working]: the peak 2110 (2010 were
 * each part's freed by its own B), at ATTN B; everything freed after it. */
static void test_layer_parts_share_activations(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, 0, 0, 4), 1);
    add_part_op(&s, 0, LT_OP_F, 0, LT_PART_PRE, 0);
    add_part_op(&s, 0, LT_OP_B, 0, LT_PART_PRE, 0);
    add_part_op(&s, 1, LT_OP_F, 0, LT_PART_ATTN, 0);
    add_part_op(&s, 1, LT_OP_F, 0, LT_PART_POST, 0);
    add_part_op(&s, 1, LT_OP_F, 0, LT_PART_ALL, 1);
    add_part_op(&s, 1, LT_OP_B, 0, LT_PART_ALL, 1);
    add_part_op(&s, 1, LT_OP_B, 0, LT_PART_POST, 0);
    add_part_op(&s, 1, LT_OP_B, 0, LT_PART_ATTN, 0);
    lt_sim sim = {0};
    lt_sim_costs c = {.op_cost = part_bytes_cost};
    run_ok(&sim, &s, &c);
    assert_near(sim.peak_mem[1], 2110);
    assert_near(sim.end_mem[1], 0);
    assert_near(sim.peak_mem[0], 1);
    assert_near(sim.end_mem[0], 0);
    /* the attention on stage 0 with its pre-attention: the two share theirs (11 from the
     * pre-attention's F on), the post-attention alone on stage 1 */
    lt_schedule_clear(&s);
    lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, 0, 0, 4), 1);
    add_part_op(&s, 0, LT_OP_F, 0, LT_PART_PRE, 0);
    add_part_op(&s, 0, LT_OP_F, 0, LT_PART_ATTN, 0);
    add_part_op(&s, 0, LT_OP_B, 0, LT_PART_ATTN, 0);
    add_part_op(&s, 0, LT_OP_B, 0, LT_PART_PRE, 0);
    add_part_op(&s, 1, LT_OP_F, 0, LT_PART_POST, 0);
    add_part_op(&s, 1, LT_OP_F, 0, LT_PART_ALL, 1);
    add_part_op(&s, 1, LT_OP_B, 0, LT_PART_ALL, 1);
    add_part_op(&s, 1, LT_OP_B, 0, LT_PART_POST, 0);
    run_ok(&sim, &s, &c);
    assert_near(sim.peak_mem[0], 11 + 2000);
    assert_near(sim.end_mem[0], 0);
    assert_near(sim.peak_mem[1], 100);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* K/V bytes of a sample's two slices (units 0 and 1): each attention F holds kv_bytes 10 and
 * unit 1's also kv_in_bytes *ctx (the earlier slice's K/V); activations 1 per F. */
static void kv_in_cost(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    (void)s;
    (void)stage;
    out->time = 1;
    out->act_bytes = op->kind == LT_OP_F ? 1 : 0;
    if (op->kind == LT_OP_F && op->part == LT_PART_ATTN) {
        out->kv_bytes = 10;
        if (op->unit == 1) out->kv_in_bytes = *(const double *)ctx;
    }
}

/* The run's stage peaks with unit 1's kv_in_bytes 0 and 1000: their differences. */
static void kv_in_peaks(const lt_schedule *s, double diff[2]) {
    double kv_in[2] = {0, 1000}, peak[2][2];
    for (int k = 0; k < 2; k++) {
        lt_sim sim = {0};
        lt_sim_costs c = {.ctx = &kv_in[k], .op_cost = kv_in_cost};
        run_ok(&sim, s, &c);
        for (int st = 0; st < 2; st++) {
            peak[k][st] = sim.peak_mem[st];
            assert_near(sim.end_mem[st], 0); /* (freed with the attention's B) */
        }
        lt_sim_free(&sim);
    }
    for (int st = 0; st < 2; st++) diff[st] = peak[1][st] - peak[0][st];
}

/* Keys and values from another stage (sim.h): a sample in two slices (units 0, 1), layer 0
 * in parts, layer 1 whole on stage 1. With the later slice's attention on stage 1 and the
 * earlier's on stage 0 (a K/V edge between stages, HelixPipe's), stage 1 holds the later
 * attention's kv_in_bytes (1000) over its span; with both attentions on stage 0, that stage
 * holds the earlier tokens' K/V already and kv_in_bytes are not held anywhere. */
static void test_kv_from_another_stage(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    for (int same = 0; same < 2; same++) {
        lt_schedule_clear(&s);
        for (int i = 0; i < 2; i++) lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, 0, 2 * i, 2 * i + 2), 1);
        int a1 = same ? 0 : 1; /* unit 1's attention stage */
        add_part_op(&s, 0, LT_OP_F, 0, LT_PART_PRE, 0);
        add_part_op(&s, 0, LT_OP_F, 0, LT_PART_ATTN, 0);
        add_part_op(&s, 0, LT_OP_F, 1, LT_PART_PRE, 0);
        add_part_op(&s, a1, LT_OP_F, 1, LT_PART_ATTN, 0);
        for (uint32_t u = 0; u < 2; u++) {
            add_part_op(&s, 1, LT_OP_F, u, LT_PART_POST, 0);
            add_part_op(&s, 1, LT_OP_F, u, LT_PART_ALL, 1);
        }
        for (uint32_t u = 2; u-- > 0;) {
            add_part_op(&s, 1, LT_OP_B, u, LT_PART_ALL, 1);
            add_part_op(&s, 1, LT_OP_B, u, LT_PART_POST, 0);
            if (u == 1) add_part_op(&s, a1, LT_OP_B, 1, LT_PART_ATTN, 0);
        }
        add_part_op(&s, 0, LT_OP_B, 1, LT_PART_PRE, 0);
        add_part_op(&s, 0, LT_OP_B, 0, LT_PART_ATTN, 0);
        add_part_op(&s, 0, LT_OP_B, 0, LT_PART_PRE, 0);
        double diff[2];
        kv_in_peaks(&s, diff);
        assert_near(diff[0], 0);
        assert_near(diff[1], same ? 0 : 1000);
    }
    lt_schedule_free(&s);
}

/* ChunkFlow Alg. 2 with K = 1 on chunks c0, c1 of one sample (1 token each), 2 stages, each
 * stage running FK0 F1 B1 F0 B0 (F = 1, B = 2):
 *   s0: FK0 [0,1) F1 [1,2)                  B1 [5,7) F0 [7,8)          B0 [11,13)
 *   s1:          FK0 [1,2) F1 [2,3) B1 [3,5)                  F0 [8,9) B0 [9,11)
 * F0@s1 is the second forward of (c0, stage 1's layers): it waits for the second of stage 0
 * (F0@s0, 8), not the first (FK0@s0). B0 consumes F0's activations, not FK0's. Memory with
 * act 1 per F and kv 10 per forward: FK0's K/V (10) + F1's act and K/V (11) = 21, K/V held
 * until B0 (F0's kv ignored: a second instance), and everything freed at the end. */
static void test_instances_chunkflow(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    for (int64_t b = 0; b < 2; b++) lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, 0, b, b + 1), 1);
    for (int st = 0; st < 2; st++) {
        lt_schedule_add_stage_op(&s, st, LT_OP_FK, 0, 0);
        lt_schedule_add_stage_op(&s, st, LT_OP_F, 1, 0);
        lt_schedule_add_stage_op(&s, st, LT_OP_B, 1, 0);
        lt_schedule_add_stage_op(&s, st, LT_OP_F, 0, 0);
        lt_schedule_add_stage_op(&s, st, LT_OP_B, 0, 0);
    }
    lt_sim sim = {0};
    lt_sim_costs uc = lt_sim_unit_costs();
    run_ok(&sim, &s, &uc);
    assert_op(&sim, 0, 0, 0, 1);
    assert_op(&sim, 0, 1, 1, 2);
    assert_op(&sim, 0, 2, 5, 7);
    assert_op(&sim, 0, 3, 7, 8);
    assert_op(&sim, 0, 4, 11, 13);
    assert_op(&sim, 1, 0, 1, 2);
    assert_op(&sim, 1, 1, 2, 3);
    assert_op(&sim, 1, 2, 3, 5);
    assert_op(&sim, 1, 3, 8, 9);
    assert_op(&sim, 1, 4, 9, 11);
    assert_near(sim.step_time, 13);

    fixed_costs fc = {.tf = 1, .tb = 2, .act = 1, .kv = 10};
    lt_sim_costs c = fixed(&fc);
    run_ok(&sim, &s, &c);
    for (int st = 0; st < 2; st++) {
        assert_near(sim.peak_mem[st], 21);
        assert_near(sim.end_mem[st], 0);
    }
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* Keys/values of a forward held on its stage until the last B over its range ends on
 * another stage: c0's FK on stage 0 (K/V 10), its F and B on stage 1, all over the whole model.
 * Stage 0 then runs F1 of another sample: with FK0 taking 5, B0@s1 has ended (at 3) before
 * F1 starts, so stage 0 peaks at 11 (F1's act + K/V); with FK0 taking 2 the K/V is still
 * held: 21. */
static void far_kv_cost(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    (void)s;
    out->time = op->kind == LT_OP_B ? 2 : (stage == 0 && op->kind == LT_OP_FK) ? *(const double *)ctx : 1;
    out->act_bytes = op->kind == LT_OP_F ? 1 : 0;
    out->kv_bytes = op->kind == LT_OP_B ? 0 : 10;
}

static void test_kv_freed_by_other_stage(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    add_sample(&s, 0, 1);
    add_sample(&s, 1, 1);
    lt_op op = {.kind = LT_OP_FK, .unit = 0, .layer_begin = 0, .layer_end = 2}; /* the whole model */
    lt_schedule_add_op(&s, 0, op);
    op.kind = LT_OP_F, op.unit = 1;
    lt_schedule_add_op(&s, 0, op);
    op.kind = LT_OP_B;
    lt_schedule_add_op(&s, 0, op);
    op.unit = 0, op.kind = LT_OP_F;
    lt_schedule_add_op(&s, 1, op);
    op.kind = LT_OP_B;
    lt_schedule_add_op(&s, 1, op);
    lt_sim sim = {0};
    double fk_time = 5;
    lt_sim_costs c = {.ctx = &fk_time, .op_cost = far_kv_cost};
    run_ok(&sim, &s, &c);
    assert_op(&sim, 1, 1, 1, 3);
    assert_op(&sim, 0, 1, 5, 6);
    assert_near(sim.peak_mem[0], 11);
    assert_near(sim.peak_mem[1], 1);
    assert_near(sim.end_mem[0], 0);
    fk_time = 2;
    run_ok(&sim, &s, &c);
    assert_near(sim.peak_mem[0], 21);
    assert_near(sim.end_mem[0], 0);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* Partial-layer ops (HelixPipe 4.2): layer 0 in parts, pre and post on stage 0, attention on
 * stage 1; layer 1 whole on stage 1. Every op 1 (B 2), sends 1 byte, P2P 0.5 per byte:
 *   s0: F.pre [0,1)             F.post [3,4)                       B.post [8,10)               B.pre [13,15)
 *   s1:       F.attn [1.5,2.5)            F L1 [4.5,5.5) B L1 [5.5,7.5)          B.attn [10.5,12.5)
 * The critical path is the whole chain. */
static void test_partial_layers(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    add_sample(&s, 0, 1);
    add_part_op(&s, 0, LT_OP_F, 0, LT_PART_PRE, 0);
    add_part_op(&s, 0, LT_OP_F, 0, LT_PART_POST, 0);
    add_part_op(&s, 0, LT_OP_B, 0, LT_PART_POST, 0);
    add_part_op(&s, 0, LT_OP_B, 0, LT_PART_PRE, 0);
    add_part_op(&s, 1, LT_OP_F, 0, LT_PART_ATTN, 0);
    lt_schedule_add_stage_op(&s, 1, LT_OP_F, 0, 0); /* layer 1 */
    lt_schedule_add_stage_op(&s, 1, LT_OP_B, 0, 0);
    add_part_op(&s, 1, LT_OP_B, 0, LT_PART_ATTN, 0);
    fixed_costs fc = {.tf = 1, .tb = 2, .out = 1, .p2p_per_byte = 0.5};
    lt_sim_costs c = fixed(&fc);
    lt_sim sim = {0};
    run_ok(&sim, &s, &c);
    assert_op(&sim, 0, 0, 0, 1);
    assert_op(&sim, 1, 0, 1.5, 2.5);
    assert_op(&sim, 0, 1, 3, 4);
    assert_op(&sim, 1, 1, 4.5, 5.5);
    assert_op(&sim, 1, 2, 5.5, 7.5);
    assert_op(&sim, 0, 2, 8, 10);
    assert_op(&sim, 1, 3, 10.5, 12.5);
    assert_op(&sim, 0, 3, 13, 15);
    assert_near(sim.step_time, 15);
    assert_int_equal(fc.p2p_calls, 6);
    assert_critical(&sim, (const size_t[]){0, 4, 1, 5, 6, 2, 7, 3}, 8);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* ---- asymmetric schedules (SlimPack 4.1.2, 4.2) ---- */

static char *capture_timeline(const lt_sim *sim, const lt_schedule *s, int width); /* below, with the output */

/*
 * A backward partition regrouping the forward one, 2 stages of one layer each. Samples A (id
 * 0, 6 tokens), B (1, 2), C (2, 2), D (3, 6).
 *   forward units   u0 = A[0,4)  u1 = A[4,6) B[0,2)  u2 = C[0,2) D[0,6)       (4, 4, 8 tokens)
 *   backward units  v0 = A[3,6) B[0,2)  v1 = A[0,3) C[0,2)  v2 = D[0,6)       (5, 5, 6 tokens)
 * bslice table (token order per sample): 0 A[0,3)  1 C  2 A[3,6)  3 B  4 D; v0 = bslices 2-3,
 * v1 = 0-1, v2 = 4. Tokens of each bunit in each forward unit: v0: u0 1 (A[3,4)), u1 4;
 * v1: u0 3, u2 2; v2: u2 6.
 * Op lists (PackFlow's, v0 waiting for u1):  s0: F0 F1 F2 B0 B1 B2   s1: F0 F1 B0 F2 B1 B2
 */
static void asym_partitions(lt_schedule *s) {
    lt_schedule_add_unit(s, lt_schedule_add_slice(s, 0, 0, 4), 1);
    lt_schedule_add_slice(s, 0, 4, 6);
    lt_schedule_add_slice(s, 1, 0, 2);
    lt_schedule_add_unit(s, 1, 2);
    lt_schedule_add_slice(s, 2, 0, 2);
    lt_schedule_add_slice(s, 3, 0, 6);
    lt_schedule_add_unit(s, 3, 2);
    lt_schedule_add_bslice(s, 0, 0, 3);
    lt_schedule_add_bslice(s, 2, 0, 2);
    lt_schedule_add_bslice(s, 0, 3, 6);
    lt_schedule_add_bslice(s, 1, 0, 2);
    lt_schedule_add_bslice(s, 3, 0, 6);
    lt_schedule_add_bunit(s, 2, 2);
    lt_schedule_add_bunit(s, 0, 2);
    lt_schedule_add_bunit(s, 4, 1);
}

/* Stage st's ops from a string of kind letters and unit numbers, "F0 F1 B0". */
static void add_ops(lt_schedule *s, int st, const char *list) {
    for (const char *c = list; *c; c++) {
        if (*c == ' ') continue;
        lt_op_kind k = *c == 'B' ? LT_OP_B : LT_OP_F;
        c++;
        lt_schedule_add_stage_op(s, st, k, (uint32_t)(*c - '0'), 0);
    }
}

static void asym_schedule(lt_schedule *s) {
    sched_init(s, 2, 2);
    asym_partitions(s);
    add_ops(s, 0, "F0 F1 F2 B0 B1 B2");
    add_ops(s, 1, "F0 F1 B0 F2 B1 B2");
}

/*
 * Unit time (F = its unit's tokens, B = 2 x its bunit's tokens: F0 4, F1 4, F2 8, B0 10,
 * B1 10, B2 12), by the rules of plans/schedule/schedule.h's "Asymmetric schedules":
 *   s0: F0 [0,4)  F1 [4,8) (A's keys/values from F0)  F2 [8,16)
 *       B0 [22,32)  after B0@s1 (model path)
 *       B1 [40,50)  after B1@s1 (model path) and B0@s0 (v0 holds A's next bslice)
 *       B2 [52,64)  after B2@s1
 *   s1: F0 [4,8)  F1 [8,12)
 *       B0 [12,22)  after F0@s1 and F1@s1 (its tokens are in u0 and u1: the last is at 12)
 *       F2 [22,30)  stage order
 *       B1 [30,40)  after F0@s1, F2@s1 (30) and B0@s1 (22, dK/dV of A[3,6))
 *       B2 [40,52)  after F2@s1 and the stage
 * Step 64, busy 48 per stage, bubble 32 / 128. The critical path from B2@s0 back: B2@s1,
 * B1@s1 (stage order and F2@s1 at 40: B1@s1), F2@s1 (activations, first at 30), B0@s1
 * (stage order), F1@s1 (activations), F1@s0 (model path), F0@s0 (keys/values):
 * ids 0 1 7 8 9 10 11 5.
 */
static void test_asym_times(void **state) {
    (void)state;
    lt_schedule s;
    asym_schedule(&s);
    lt_sim sim = {0};
    lt_sim_costs c = lt_sim_unit_costs();
    run_ok(&sim, &s, &c);
    const double want[2][6][2] = {{{0, 4}, {4, 8}, {8, 16}, {22, 32}, {40, 50}, {52, 64}},
                                  {{4, 8}, {8, 12}, {12, 22}, {22, 30}, {30, 40}, {40, 52}}};
    for (int st = 0; st < 2; st++)
        for (size_t i = 0; i < 6; i++) assert_op(&sim, st, i, want[st][i][0], want[st][i][1]);
    assert_near(sim.step_time, 64);
    assert_near(sim.busy[0], 48);
    assert_near(sim.busy[1], 48);
    assert_near(sim.bubble_ratio, 32.0 / 128);
    assert_critical(&sim, (const size_t[]){0, 1, 7, 8, 9, 10, 11, 5}, 8);
    /* every F's one activation unit is freed by its B ops: unit-time memory ends at 0 */
    assert_near(sim.end_mem[0], 0);
    assert_near(sim.end_mem[1], 0);
    /* the timeline names bunits for B ops */
    char *tl = capture_timeline(&sim, &s, 64);
    assert_contains(tl, "\ns0     0---1---2-------......0=========........1=========..2===========\n");
    assert_contains(tl, "\ns1     ....0---1---0=========2-------1=========2===========............\n");
    assert_contains(tl, "B: bunit then '='");
    free(tl);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* Memory in tokens: an F holds act_bytes = its tokens and kv_bytes = half of them, a B
 * nothing; base 100 on s0, 200 on s1; times as in test_asym_times. */
static void token_bytes_cost(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    (void)ctx, (void)stage;
    double t = (double)lt_schedule_op_tokens(s, op);
    out->time = op->kind == LT_OP_B ? 2 * t : t;
    out->act_bytes = op->kind == LT_OP_F ? t : 0;
    out->kv_bytes = op->kind == LT_OP_F ? t / 2 : 0;
}

static double token_bytes_base(void *ctx, int stage) {
    (void)ctx;
    return stage == 0 ? 100 : 200;
}

/*
 * Each F holds 1.5 x its tokens: u0 6, u1 6, u2 12. A B frees, of each F it takes
 * activations from, the share of that F's unit's tokens it covers (the last taker the rest):
 *   s1: F0 206, F1 212; B0 frees 6 x 1/4 of u0 and all of u1 (its only taker): 204.5;
 *       F2 216.5 (the peak: u0's 4.5 left, u2); B1 frees u0's rest 4.5 and 12 x 2/8 of
 *       u2: 209; B2 frees u2's rest 9: 200.
 *   s0: F0 106, F1 112, F2 124 (the peak), then 116.5, 109, 100.
 * Freeing u0 whole at B0 would give s1 a peak of 212, keeping it whole until B1 218.
 * Without v1 and v2's B ops, B0 is u0's last taker and frees all of it; u2, which no B
 * takes, stays held (12).
 */
static void test_asym_memory(void **state) {
    (void)state;
    lt_schedule s;
    asym_schedule(&s);
    lt_sim sim = {0};
    lt_sim_costs c = {.op_cost = token_bytes_cost, .base_bytes = token_bytes_base};
    run_ok(&sim, &s, &c);
    assert_near(sim.step_time, 64);
    assert_near(sim.peak_mem[0], 124);
    assert_near(sim.peak_mem[1], 216.5);
    assert_near(sim.end_mem[0], 100);
    assert_near(sim.end_mem[1], 200);
    for (int st = 0; st < 2; st++) s.stage[st].n = 4; /* F0 F1 F2 B0 / F0 F1 B0 F2 */
    run_ok(&sim, &s, &c);
    assert_near(sim.end_mem[0], 100 + 12);
    assert_near(sim.end_mem[1], 200 + 12);
    assert_near(sim.peak_mem[1], 212); /* F2 after B0 freed u0 and u1 whole */
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* v1 (A's head) before v0 (A's tail) on every stage: v1's B waits for v0's dK/dV, which the
 * stage runs after it. */
static void test_asym_deadlock_not_filo(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    asym_partitions(&s);
    add_ops(&s, 0, "F0 F1 F2 B1 B0 B2");
    add_ops(&s, 1, "F0 F1 F2 B1 B0 B2");
    lt_sim sim = {0};
    lt_sim_costs c = lt_sim_unit_costs();
    lt_error err;
    assert_string_equal(run_fail(&sim, &s, &c, &err),
                        "deadlock: B1@s1 waits for B0@s1 (slice key/value gradients) waits for B1@s1 (stage order)");
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* Malformed asymmetric schedules: LT_ERR_INPUT naming the op and what it lacks. */
static void test_asym_malformed(void **state) {
    (void)state;
    lt_sim sim = {0};
    lt_sim_costs c = lt_sim_unit_costs();
    lt_error err;
    lt_schedule s;
    /* stage 1 never runs F2: B1@s1 lacks u2's activations */
    sched_init(&s, 2, 2);
    asym_partitions(&s);
    add_ops(&s, 0, "F0 F1 F2 B0 B1");
    add_ops(&s, 1, "F0 F1 B0 B1");
    assert_contains(run_fail(&sim, &s, &c, &err),
                    "B1@s1 waits for its activations: the F of unit 2 over its layers, which is not in the schedule");
    /* stage 1 lacks B0: B0@s0 has no model-path predecessor */
    lt_schedule_clear(&s);
    asym_partitions(&s);
    add_ops(&s, 0, "F0 F1 F2 B0");
    add_ops(&s, 1, "F0 F1 F2");
    assert_contains(run_fail(&sim, &s, &c, &err), "B0@s0 waits for the B of bunit 0 beginning at layer 1 (instance 0)");
    /* activations produced on another stage */
    lt_schedule_clear(&s);
    lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, 0, 0, 2), 1);
    lt_schedule_add_bunit(&s, lt_schedule_add_bslice(&s, 0, 0, 2), 1);
    lt_schedule_add_op(&s, 0, (lt_op){.kind = LT_OP_F, .unit = 0, .layer_begin = 0, .layer_end = 2});
    lt_schedule_add_op(&s, 1, (lt_op){.kind = LT_OP_B, .unit = 0, .layer_begin = 0, .layer_end = 2});
    assert_contains(run_fail(&sim, &s, &c, &err), "B0@s1 consumes the activations of F0@s0 on another stage");
    /* a bunit whose tokens no forward unit holds */
    lt_schedule_clear(&s);
    lt_schedule_add_slice(&s, 0, 0, 2);
    lt_schedule_add_bunit(&s, lt_schedule_add_bslice(&s, 0, 0, 2), 1);
    lt_schedule_add_stage_op(&s, 1, LT_OP_B, 0, 0);
    assert_contains(run_fail(&sim, &s, &c, &err),
                    "B0@s1 waits for its activations: a forward unit holding the tokens of bunit 0");
    /* lt_schedule_check's rules come first */
    lt_schedule_clear(&s);
    asym_partitions(&s);
    add_ops(&s, 0, "F0 F1 F2 B3");
    assert_contains(run_fail(&sim, &s, &c, &err), "stage 0 op 3: bunit 3 of 3");
    /* the same lt_sim then runs a good asymmetric schedule, and a symmetric one */
    lt_schedule_free(&s);
    asym_schedule(&s);
    run_ok(&sim, &s, &c);
    assert_near(sim.step_time, 64);
    lt_schedule_clear(&s);
    add_sample(&s, 0, 1);
    add_sample(&s, 1, 1);
    build_gpipe(&s, 2);
    run_ok(&sim, &s, &c);
    assert_near(sim.step_time, 9);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* ---- malformed schedules and costs ---- */

static double nan_p2p(void *ctx, int from, int to, double bytes) {
    (void)ctx, (void)from, (void)to, (void)bytes;
    return NAN;
}

static void negative_time(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    (void)ctx, (void)s, (void)stage;
    out->time = op->kind == LT_OP_B ? -1 : 1;
}

static void test_malformed(void **state) {
    (void)state;
    lt_sim sim = {0};
    lt_sim_costs uc = lt_sim_unit_costs();
    lt_error err;
    lt_schedule s;
    sched_init(&s, 2, 4);

    /* lt_schedule_check: unit out of range, bad layers, empty slice, slices out of order */
    add_sample(&s, 0, 4);
    lt_schedule_add_stage_op(&s, 0, LT_OP_F, 3, 0);
    assert_contains(run_fail(&sim, &s, &uc, &err), "unit 3 of 1");
    lt_schedule_clear(&s);
    add_sample(&s, 0, 4);
    lt_schedule_add_op(&s, 1, (lt_op){.kind = LT_OP_F, .layer_begin = 2, .layer_end = 5});
    assert_contains(run_fail(&sim, &s, &uc, &err), "layers [2, 5) of 4");
    lt_schedule_clear(&s);
    lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, 0, 4, 4), 1);
    assert_contains(run_fail(&sim, &s, &uc, &err), "empty");
    lt_schedule_clear(&s);
    lt_schedule_add_slice(&s, 0, 4, 8);
    lt_schedule_add_slice(&s, 0, 0, 4);
    lt_schedule_add_unit(&s, 0, 2);
    assert_contains(run_fail(&sim, &s, &uc, &err), "out of token order");

    /* a slice in two units */
    lt_schedule_clear(&s);
    lt_schedule_add_slice(&s, 0, 0, 4);
    lt_schedule_add_unit(&s, 0, 1);
    lt_schedule_add_unit(&s, 0, 1);
    assert_contains(run_fail(&sim, &s, &uc, &err), "slice 0 is in units 0 and 1");

    /* overlapping unequal ranges of one unit */
    lt_schedule_clear(&s);
    add_sample(&s, 0, 4);
    lt_schedule_add_op(&s, 0, (lt_op){.kind = LT_OP_F, .layer_begin = 0, .layer_end = 2});
    lt_schedule_add_op(&s, 1, (lt_op){.kind = LT_OP_F, .layer_begin = 1, .layer_end = 4});
    assert_contains(run_fail(&sim, &s, &uc, &err), "overlapping");

    /* a B without its F; an F whose model-path predecessor is missing */
    lt_schedule_clear(&s);
    add_sample(&s, 0, 4);
    lt_schedule_add_stage_op(&s, 1, LT_OP_F, 0, 0);
    assert_contains(run_fail(&sim, &s, &uc, &err), "F0@s1 waits for the forward of unit 0 ending at layer 2");
    lt_schedule_clear(&s);
    add_sample(&s, 0, 4);
    lt_schedule_add_stage_op(&s, 0, LT_OP_F, 0, 0);
    lt_schedule_add_stage_op(&s, 0, LT_OP_B, 0, 0);
    assert_contains(run_fail(&sim, &s, &uc, &err), "B0@s0 waits for the B of unit 0 beginning at layer 2");
    lt_schedule_clear(&s);
    add_sample(&s, 0, 4);
    lt_schedule_add_stage_op(&s, 0, LT_OP_FK, 0, 0);
    lt_schedule_add_stage_op(&s, 1, LT_OP_F, 0, 0);
    lt_schedule_add_stage_op(&s, 1, LT_OP_B, 0, 0);
    lt_schedule_add_stage_op(&s, 0, LT_OP_B, 0, 0);
    assert_contains(run_fail(&sim, &s, &uc, &err), "B0@s0 waits for its activations");
    /* a B whose F is on another stage */
    lt_schedule_clear(&s);
    add_sample(&s, 0, 4);
    lt_schedule_add_op(&s, 0, (lt_op){.kind = LT_OP_F, .layer_begin = 0, .layer_end = 4});
    lt_schedule_add_op(&s, 1, (lt_op){.kind = LT_OP_B, .layer_begin = 0, .layer_end = 4});
    assert_contains(run_fail(&sim, &s, &uc, &err), "B0@s1 consumes the activations of F0@s0 on another stage");
    /* a missing slice neighbour's op over the same range */
    lt_schedule_clear(&s);
    lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, 0, 0, 4), 1);
    lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, 0, 4, 8), 1);
    lt_schedule_add_stage_op(&s, 0, LT_OP_F, 1, 0);
    assert_contains(run_fail(&sim, &s, &uc, &err), "F1@s0 waits for a forward of unit 0 (previous slice)");

    /* costs: negative time, NaN transfer */
    lt_schedule_clear(&s);
    add_sample(&s, 0, 4);
    build_gpipe(&s, 1);
    lt_sim_costs neg = {.op_cost = negative_time};
    assert_contains(run_fail(&sim, &s, &neg, &err), "time of B0@s0 is -1");
    lt_sim_costs nanc = uc;
    nanc.p2p_time = nan_p2p;
    assert_contains(run_fail(&sim, &s, &nanc, &err), "transfer");
    /* after failures the same lt_sim still simulates */
    run_ok(&sim, &s, &uc);
    assert_near(sim.step_time, 4 + 4 + 8 + 8);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* ---- contention (sim.h, "Contention"): rates worked out by hand from the fluid model ---- */

/* Asserts op (stage, index) runs over [start, finish) within the fixed point's tolerance. */
static void assert_op_near(const lt_sim *sim, int stage, size_t index, double start, double finish) {
    size_t v = id_of(sim, stage, index);
    if (fabs(sim->start[v] - start) > 1e-7 || fabs(sim->finish[v] - finish) > 1e-7)
        fail_msg("op %zu of stage %d runs [%.12g, %.12g), want [%g, %g)", index, stage, sim->start[v], sim->finish[v],
                 start, finish);
}

/* GPipe 2 x 2 in unit time (test_gpipe_2x2) with c = 0.1: two ops computing at once each run
 * at 1 / 1.1. F1@s0 and F0@s1 both start at 1 with work 1: both end at 2.1; F1@s1 then runs
 * alone [2.1, 3.1), B1@s1 [3.1, 5.1); B1@s0 and B0@s1, work 2 each, together [5.1, 7.3);
 * B0@s0 alone [7.3, 9.3). Unequal micro-batches (1 and 2 tokens: F 1 and 2, B 2 and 4):
 * F1@s0 (work 2) beside F0@s1 (work 1) from 1: F0@s1 ends at 2.1, when F1@s0 has done 1 of
 * its 2, the rest alone: 3.1; F1@s1 [3.1, 5.1), B1@s1 [5.1, 9.1); B1@s0 (4) beside B0@s1 (2)
 * from 9.1: B0@s1 ends at 11.3, B1@s0 has 2 left: 13.3; B0@s0 [13.3, 15.3). On two nodes
 * (one stage per node) nothing changes; a stage's ops run by two devices in lockstep (its TP
 * pair) run at 1 / 1.1 all along. */
static void test_contention(void **state) {
    (void)state;
    lt_sim sim = {0};
    lt_schedule s;
    sched_init(&s, 2, 2);
    add_sample(&s, 0, 1);
    add_sample(&s, 1, 1);
    build_gpipe(&s, 2);
    lt_sim_costs c = lt_sim_unit_costs();
    c.contention = 0.1;
    run_ok(&sim, &s, &c);
    assert_op_near(&sim, 0, 0, 0, 1);
    assert_op_near(&sim, 0, 1, 1, 2.1);
    assert_op_near(&sim, 1, 0, 1, 2.1);
    assert_op_near(&sim, 1, 1, 2.1, 3.1);
    assert_op_near(&sim, 1, 2, 3.1, 5.1);
    assert_op_near(&sim, 0, 2, 5.1, 7.3);
    assert_op_near(&sim, 1, 3, 5.1, 7.3);
    assert_op_near(&sim, 0, 3, 7.3, 9.3);
    assert_true(fabs(sim.step_time - 9.3) < 1e-7);
    assert_true(fabs(sim.busy[0] - 6.3) < 1e-7 && fabs(sim.busy[1] - 6.3) < 1e-7);
    /* one stage per node: no contention */
    c.stages_per_node = 1;
    run_ok(&sim, &s, &c);
    assert_near(sim.step_time, 9);
    assert_near(sim.busy[0], 6);
    /* two devices per stage in lockstep, each stage on its own node: every op 1.1x */
    c.lockstep = 2;
    run_ok(&sim, &s, &c);
    assert_true(fabs(sim.step_time - 9.9) < 1e-7);
    lt_schedule_free(&s);

    sched_init(&s, 2, 2);
    add_sample(&s, 0, 1);
    add_sample(&s, 1, 2);
    build_gpipe(&s, 2);
    c = lt_sim_unit_costs();
    c.contention = 0.1;
    run_ok(&sim, &s, &c);
    assert_op_near(&sim, 0, 1, 1, 3.1);
    assert_op_near(&sim, 1, 0, 1, 2.1);
    assert_op_near(&sim, 1, 1, 3.1, 5.1);
    assert_op_near(&sim, 1, 2, 5.1, 9.1);
    assert_op_near(&sim, 1, 3, 9.1, 11.3);
    assert_op_near(&sim, 0, 2, 9.1, 13.3);
    assert_op_near(&sim, 0, 3, 13.3, 15.3);
    /* out of range */
    lt_error err;
    c.contention = 1.5;
    assert_contains(run_fail(&sim, &s, &c, &err), "contention 1.5");
    c.contention = NAN;
    assert_contains(run_fail(&sim, &s, &c, &err), "must be from 0 to 1");
    c.contention = 0.1;
    c.lockstep = -1;
    assert_contains(run_fail(&sim, &s, &c, &err), "lockstep -1");
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* lt_schedule_init's usage errors, lt_op_name, lt_op_positions, lt_sim_op_at, unit costs. */
static void test_tables(void **state) {
    (void)state;
    lt_schedule s;
    lt_error err;
    assert_int_equal(lt_schedule_init(&s, 0, 4, &err), LT_ERR_USAGE);
    assert_int_equal(lt_schedule_init(&s, 3, 2, &err), LT_ERR_USAGE);
    sched_init(&s, 3, 7);
    uint32_t b, e;
    lt_schedule_stage_layers(7, 3, 0, &b, &e);
    assert_true(b == 0 && e == 3);
    lt_schedule_stage_layers(7, 3, 2, &b, &e);
    assert_true(b == 5 && e == 7);
    char name[64];
    lt_op op = {.kind = LT_OP_FK, .part = LT_PART_ATTN, .unit = 12, .layer_begin = 5, .layer_end = 6};
    assert_string_equal(lt_op_name(&op, name, sizeof name), "FK12.attn@L5");
    lt_op_positions(&op, &b, &e);
    assert_true(b == 16 && e == 17);
    op.part = LT_PART_ALL;
    op.layer_end = 7;
    lt_op_positions(&op, &b, &e);
    assert_true(b == 15 && e == 21);

    /* unit costs: tokens of the unit, B twice, act 1 per F only */
    lt_schedule_add_slice(&s, 0, 0, 3);
    lt_schedule_add_slice(&s, 1, 0, 4);
    lt_schedule_add_unit(&s, 0, 2);
    lt_sim_costs c = lt_sim_unit_costs();
    lt_op_cost oc = {0};
    lt_op f = {.kind = LT_OP_F, .unit = 0, .layer_begin = 0, .layer_end = 1};
    c.op_cost(c.ctx, &s, 0, &f, &oc);
    assert_near(oc.time, 7);
    assert_near(oc.act_bytes, 1);
    f.kind = LT_OP_B;
    memset(&oc, 0, sizeof oc);
    c.op_cost(c.ctx, &s, 0, &f, &oc);
    assert_near(oc.time, 14);
    assert_near(oc.act_bytes, 0);
    f.kind = LT_OP_FK;
    c.op_cost(c.ctx, &s, 0, &f, &oc);
    assert_near(oc.time, 7);
    assert_near(oc.act_bytes, 0);
    assert_null(c.p2p_time);
    assert_null(c.base_bytes);

    lt_sim sim = {.stages = 3, .first_op = (size_t[]){0, 2, 2, 5}};
    int st;
    size_t idx;
    lt_sim_op_at(&sim, 1, &st, &idx);
    assert_true(st == 0 && idx == 1);
    lt_sim_op_at(&sim, 2, &st, &idx); /* stage 1 is empty */
    assert_true(st == 2 && idx == 0);
    lt_sim_op_at(&sim, 4, &st, &idx);
    assert_true(st == 2 && idx == 2);
    lt_schedule_free(&s);
}

/* ---- output ---- */

static char *capture_timeline(const lt_sim *sim, const lt_schedule *s, int width) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    lt_sim_print_timeline(f, sim, s, width);
    fclose(f);
    return buf;
}

static void test_timeline(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    add_sample(&s, 0, 1);
    add_sample(&s, 1, 1);
    build_gpipe(&s, 2);
    lt_sim sim = {0};
    lt_sim_costs c = lt_sim_unit_costs();
    run_ok(&sim, &s, &c);
    char *t = capture_timeline(&sim, &s, 18);
    static const char want[] =
        "time   0         5\n"
        "       +---------+-------+\n"
        "s0     0-1-......1===0===\n"
        "s1     ..0-1-1===0===....\n"
        "       F: unit then '-'  FK: unit then '~'  B: unit then '='  idle '.'  (step 9, 1 column = 0.5)\n";
    assert_string_equal(t, want);
    free(t);

    /* FK drawn with '~'; a number that does not fit is left out; an op shorter than half a
     * column takes an idle column; width clamped to 10 (step 19, 1 column = 1.9):
     *   s0: FK11 [0,1) F10 [1,10); s1: FK11 [1,2) F10 [10,19) */
    lt_schedule_clear(&s);
    for (int i = 0; i < 12; i++) add_sample(&s, i, i == 10 ? 9 : 1);
    lt_schedule_add_stage_op(&s, 0, LT_OP_FK, 11, 0);
    lt_schedule_add_stage_op(&s, 0, LT_OP_F, 10, 0);
    lt_schedule_add_stage_op(&s, 1, LT_OP_FK, 11, 0);
    lt_schedule_add_stage_op(&s, 1, LT_OP_F, 10, 0);
    run_ok(&sim, &s, &c);
    t = capture_timeline(&sim, &s, 3);
    assert_contains(t, "\ns0     ~10--.....\n");
    assert_contains(t, "\ns1     .~...10---\n");
    assert_contains(t, "(step 19, 1 column = 1.9)\n");
    free(t);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

static size_t count(const char *text, const char *what) {
    size_t n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

static void test_svg(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    add_sample(&s, 0, 1);
    add_sample(&s, 1, 1);
    build_1f1b(&s, 2);
    lt_sim sim = {0};
    lt_sim_costs c = lt_sim_unit_costs();
    run_ok(&sim, &s, &c);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    lt_error err;
    assert_int_equal(lt_sim_write_svg(f, &sim, &s, "1F1B <P=2> & \"m=2\"\x01", &err), LT_OK);
    fclose(f);
    assert_true(strncmp(buf, "<?xml", 5) == 0);
    assert_contains(buf, "<svg xmlns=\"http://www.w3.org/2000/svg\"");
    assert_contains(buf, "1F1B &lt;P=2&gt; &amp; &quot;m=2&quot;?</text>");
    assert_true(strstr(buf, "</svg>\n") == buf + len - 7);
    assert_int_equal(count(buf, "<title>"), 8);
    assert_int_equal(count(buf, "(critical path)</title>"), 6);
    assert_int_equal(count(buf, "fill=\"#f28e2b\" stroke"), 4); /* B boxes */
    assert_contains(buf, ">B1@s0: 7 to 9 (critical path)</title>");
    /* ticks at 0, 1, ..., 9 */
    assert_contains(buf, ">9</text>");
    free(buf);

    FILE *full = fopen("/dev/full", "w");
    if (full) {
        assert_int_equal(lt_sim_write_svg(full, &sim, &s, NULL, &err), LT_ERR_IO);
        fclose(full);
    }
    lt_sim_free(&sim);
    lt_schedule_free(&s);
}

/* ---- property tests on random schedules ---- */

enum { MAX_P = 5, MAX_UNITS = 24, MAX_OPS = 3 * MAX_P * MAX_UNITS };

/* A random schedule: samples cut into slices, slices interleaved in the table and grouped
 * into units, each unit run F over every stage (after an FK pass over every stage for some:
 * ChunkFlow), then B back; the stages' op lists are a random topological order of the
 * dependencies below, computed here independently of plans/schedule/sim.c. */
typedef struct rand_op {
    int stage;
    size_t index;   /* in the stage's list */
    lt_op_kind kind;
    uint32_t unit;
    int npred;
    int pred[2 + MAX_UNITS]; /* indices into ops[] */
    bool path[2 + MAX_UNITS]; /* a model-path edge (transfer time between stages) */
} rand_op;

typedef struct rand_sched {
    lt_schedule s;
    int P;
    size_t n_ops;
    rand_op ops[MAX_OPS];
    int fk[MAX_UNITS][MAX_P], f[MAX_UNITS][MAX_P], b[MAX_UNITS][MAX_P]; /* op index or -1 */
    bool has_fk[MAX_UNITS];
    lt_op_cost cost[MAX_P][3 * MAX_UNITS]; /* by stage and index */
    double base[MAX_P];
    int order[MAX_OPS]; /* the topological order the lists were built from */
    int at[MAX_P][3 * MAX_UNITS]; /* stage, index -> op */
} rand_sched;

static void rand_op_cost(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    const rand_sched *r = ctx;
    *out = r->cost[stage][op - s->stage[stage].ops];
}

static double rand_p2p(void *ctx, int from, int to, double bytes) {
    (void)ctx;
    return 0.01 * bytes + 0.05 * abs(from - to);
}

static double rand_base(void *ctx, int stage) { return ((const rand_sched *)ctx)->base[stage]; }

static void add_pred(rand_op *o, int q, bool path) {
    o->pred[o->npred] = q;
    o->path[o->npred++] = path;
}

static void build_random(rand_sched *r, lt_rng *rng) {
    int P = 1 + (int)lt_rng_below(rng, MAX_P);
    r->P = P;
    sched_init(&r->s, P, P + (int)lt_rng_below(rng, 4));
    /* samples of 1-4 slices, interleaved at random in the table (token order per sample) */
    int n_samples = 1 + (int)lt_rng_below(rng, 8), left[8], next_tok[8];
    int total = 0;
    for (int i = 0; i < n_samples; i++) {
        left[i] = 1 + (int)lt_rng_below(rng, 4);
        next_tok[i] = 0;
        total += left[i];
    }
    /* units: runs of up to 3 slices; a sample's slices share a unit only when adjacent */
    uint32_t unit_first = 0, unit_n = 0;
    int32_t unit_samples[3];
    uint32_t max_len = 1 + (uint32_t)lt_rng_below(rng, 3);
    while (total > 0) {
        int smp;
        do smp = (int)lt_rng_below(rng, (uint64_t)n_samples);
        while (left[smp] == 0);
        int len = 1 + (int)lt_rng_below(rng, 50);
        bool clash = false;
        for (uint32_t i = 0; i + 1 < unit_n; i++) clash |= unit_samples[i] == smp;
        if (unit_n == max_len || clash || (unit_n && r->s.n_units + 1 >= MAX_UNITS)) {
            if (r->s.n_units + 1 >= MAX_UNITS) break;
            lt_schedule_add_unit(&r->s, unit_first, unit_n);
            unit_n = 0;
            max_len = 1 + (uint32_t)lt_rng_below(rng, 3);
        }
        uint32_t j = lt_schedule_add_slice(&r->s, smp, next_tok[smp], next_tok[smp] + len);
        next_tok[smp] += len;
        left[smp]--;
        total--;
        if (unit_n == 0) unit_first = j;
        unit_samples[unit_n++] = smp;
    }
    if (unit_n) lt_schedule_add_unit(&r->s, unit_first, unit_n);
    size_t nu = r->s.n_units;

    /* prev[u][v]: unit v holds the slice before one of u's slices (of the same sample) */
    static bool prev[MAX_UNITS][MAX_UNITS];
    memset(prev, 0, sizeof prev);
    for (size_t u = 0; u < nu; u++)
        for (uint32_t j = r->s.units[u].first_slice; j < r->s.units[u].first_slice + r->s.units[u].n_slices; j++)
            for (uint32_t q = j; q-- > 0;)
                if (r->s.slices[q].sample == r->s.slices[j].sample) {
                    for (size_t v = 0; v < nu; v++)
                        if (v != u && q >= r->s.units[v].first_slice &&
                            q < r->s.units[v].first_slice + r->s.units[v].n_slices)
                            prev[u][v] = true;
                    break;
                }

    /* ops and their dependencies (plans/schedule/schedule.h's rules for this layout) */
    size_t n = 0;
    for (size_t u = 0; u < nu; u++) {
        r->has_fk[u] = lt_rng_below(rng, 10) < 3;
        for (int st = 0; st < P; st++) {
            r->fk[u][st] = r->has_fk[u] ? (int)n++ : -1;
            r->f[u][st] = (int)n++;
            r->b[u][st] = (int)n++;
        }
    }
    r->n_ops = n;
    for (size_t u = 0; u < nu; u++) {
        for (int st = 0; st < P; st++) {
            int first = r->has_fk[u] ? r->fk[u][st] : r->f[u][st];
            if (r->has_fk[u]) {
                rand_op *o = &r->ops[r->fk[u][st]];
                *o = (rand_op){.stage = st, .kind = LT_OP_FK, .unit = (uint32_t)u};
                if (st > 0) add_pred(o, r->fk[u][st - 1], true);
            }
            rand_op *o = &r->ops[r->f[u][st]];
            *o = (rand_op){.stage = st, .kind = LT_OP_F, .unit = (uint32_t)u};
            if (st > 0) add_pred(o, r->f[u][st - 1], true);
            if (r->has_fk[u]) add_pred(o, r->fk[u][st], false); /* the FK pass first: instance 0 */
            for (size_t v = 0; v < nu; v++)
                if (prev[u][v]) add_pred(&r->ops[first], r->has_fk[v] ? r->fk[v][st] : r->f[v][st], false);
            o = &r->ops[r->b[u][st]];
            *o = (rand_op){.stage = st, .kind = LT_OP_B, .unit = (uint32_t)u};
            add_pred(o, r->f[u][st], false);
            if (st + 1 < P) add_pred(o, r->b[u][st + 1], true);
            for (size_t v = 0; v < nu; v++)
                if (prev[v][u]) add_pred(o, r->b[v][st], false);
        }
    }
    /* a random topological order -> the stages' lists (Kahn's algorithm, random pick) */
    static int waiting[MAX_OPS], ready[MAX_OPS], succ_off[MAX_OPS + 1], succ[MAX_OPS * (2 + MAX_UNITS)];
    memset(succ_off, 0, sizeof succ_off);
    for (size_t i = 0; i < n; i++)
        for (int e = 0; e < r->ops[i].npred; e++) succ_off[r->ops[i].pred[e] + 1]++;
    for (size_t i = 0; i < n; i++) succ_off[i + 1] += succ_off[i];
    for (size_t i = 0; i < n; i++) waiting[i] = succ_off[i]; /* fill cursors for now */
    for (size_t i = 0; i < n; i++)
        for (int e = 0; e < r->ops[i].npred; e++) succ[waiting[r->ops[i].pred[e]]++] = (int)i;
    size_t n_ready = 0;
    for (size_t i = 0; i < n; i++) {
        waiting[i] = r->ops[i].npred;
        if (!waiting[i]) ready[n_ready++] = (int)i;
    }
    for (size_t k = 0; k < n; k++) {
        assert_true(n_ready > 0);
        size_t pick = (size_t)lt_rng_below(rng, n_ready);
        int i = ready[pick];
        ready[pick] = ready[--n_ready];
        r->order[k] = i;
        rand_op *o = &r->ops[i];
        o->index = r->s.stage[o->stage].n;
        r->at[o->stage][o->index] = i;
        uint32_t lb, le;
        lt_schedule_stage_layers(r->s.layers, P, o->stage, &lb, &le);
        lt_schedule_add_op(&r->s, o->stage, (lt_op){.kind = (uint8_t)o->kind, .unit = o->unit, .layer_begin = lb,
                                                      .layer_end = le});
        for (int e = succ_off[i]; e < succ_off[i + 1]; e++)
            if (--waiting[succ[e]] == 0) ready[n_ready++] = succ[e];
    }
    /* random costs, some zero */
    for (size_t i = 0; i < n; i++) {
        lt_op_cost *c = &r->cost[r->ops[i].stage][r->ops[i].index];
        c->time = lt_rng_below(rng, 10) == 0 ? 0 : 0.01 + 3 * lt_rng_double(rng);
        c->act_bytes = r->ops[i].kind == LT_OP_F ? (double)lt_rng_below(rng, 100) : 0;
        c->kv_bytes = r->ops[i].kind == LT_OP_B ? 0 : (double)lt_rng_below(rng, 20);
        c->work_bytes = (double)lt_rng_below(rng, 30);
        c->out_bytes = (double)lt_rng_below(rng, 50);
    }
    for (int st = 0; st < P; st++) r->base[st] = (double)lt_rng_below(rng, 1000);
}

static double transfer_of(const rand_sched *r, const rand_op *from, const rand_op *to, bool path) {
    if (!path || from->stage == to->stage) return 0;
    return rand_p2p(NULL, from->stage, to->stage, r->cost[from->stage][from->index].out_bytes);
}

/* A transfer buffer: bytes held on a stage from the op at index `from` through the op at `to`. */
typedef struct xfer_item {
    int stage;
    size_t from, to;
    double bytes;
} xfer_item;

/* The oracle: start times in the generation order, memory by brute force (for each op, the
 * bytes held right after it allocates: base + every item allocated at or before it in its
 * stage's order and freed at or after it). */
static void check_random(const rand_sched *r, const lt_sim *sim) {
    const lt_schedule *s = &r->s;
    static double start[MAX_OPS], finish[MAX_OPS];
    for (size_t k = 0; k < r->n_ops; k++) {
        int i = r->order[k];
        const rand_op *o = &r->ops[i];
        double t = 0;
        for (int e = 0; e < o->npred; e++) {
            const rand_op *q = &r->ops[o->pred[e]];
            double ready = finish[o->pred[e]] + transfer_of(r, q, o, o->path[e]);
            if (ready > t) t = ready;
        }
        if (o->index > 0 && finish[r->at[o->stage][o->index - 1]] > t) t = finish[r->at[o->stage][o->index - 1]];
        start[i] = t;
        finish[i] = t + r->cost[o->stage][o->index].time;
    }
    double step = 0;
    for (size_t i = 0; i < r->n_ops; i++) {
        const rand_op *o = &r->ops[i];
        size_t v = id_of(sim, o->stage, o->index);
        assert_near(sim->start[v], start[i]);
        assert_near(sim->finish[v], finish[i]);
        if (finish[i] > step) step = finish[i];
    }
    assert_near(sim->step_time, step);

    /* step >= every stage's busy time and every unit's own chain */
    for (int st = 0; st < r->P; st++) assert_true(sim->step_time >= sim->busy[st] - 1e-9);
    for (size_t u = 0; u < s->n_units; u++) {
        double chain = 0;
        for (int st = 0; st < r->P; st++) {
            chain += r->cost[st][r->ops[r->f[u][st]].index].time + r->cost[st][r->ops[r->b[u][st]].index].time;
            if (st > 0)
                chain += transfer_of(r, &r->ops[r->f[u][st - 1]], &r->ops[r->f[u][st]], true) +
                         transfer_of(r, &r->ops[r->b[u][st]], &r->ops[r->b[u][st - 1]], true);
        }
        assert_true(sim->step_time >= chain - 1e-9);
    }
    assert_true(sim->bubble_ratio >= 0 && sim->bubble_ratio < 1);

    /* transfer buffers (sim.h "Transfer buffers"), found the slow way: every model-path edge
     * q -> w between two stages, in the order q's stage sends them (its ops in order); the
     * receive from the op before w (or w, the first), earlier where one after it on its
     * channel is read earlier, to w; an FK's or B's send from q to the first op of q's stage
     * ending after the receive is posted and the bytes have moved (the stage's last op) */
    static xfer_item item[2 * MAX_OPS];
    size_t n_items = 0;
    for (int st = 0; st < r->P; st++)
        for (int t = 0; t < r->P; t++) {
            if (t == st) continue;
            int chan_w[MAX_OPS], chan_q[MAX_OPS];
            size_t k = 0;
            for (size_t iq = 0; iq < s->stage[t].n; iq++)
                for (size_t w = 0; w < r->n_ops; w++)
                    for (int e = 0; e < r->ops[w].npred; e++)
                        if (r->ops[w].stage == st && r->ops[w].path[e] && r->ops[w].pred[e] == r->at[t][iq])
                            chan_w[k] = (int)w, chan_q[k++] = r->at[t][iq];
            for (size_t j = 0; j < k; j++) {
                size_t post = SIZE_MAX;
                for (size_t i = j; i < k; i++) {
                    size_t want = r->ops[chan_w[i]].index > 0 ? r->ops[chan_w[i]].index - 1 : 0;
                    if (want < post) post = want;
                }
                const rand_op *q = &r->ops[chan_q[j]], *w = &r->ops[chan_w[j]];
                double bytes = r->cost[t][q->index].out_bytes;
                if (bytes == 0) continue;
                item[n_items++] = (xfer_item){st, post, w->index, bytes};
                if (q->kind == LT_OP_F) continue;
                double done = fmax(finish[chan_q[j]], start[r->at[st][post]]) + transfer_of(r, q, w, true);
                size_t x = q->index;
                while (x + 1 < s->stage[t].n && finish[r->at[t][x]] < done) x++;
                item[n_items++] = (xfer_item){t, q->index, x, bytes};
            }
        }

    /* memory */
    for (int st = 0; st < r->P; st++) {
        size_t nst = s->stage[st].n;
        double peak = r->base[st];
        for (size_t at = 0; at < nst; at++) {
            double live = r->base[st];
            for (size_t i = 0; i < n_items; i++)
                if (item[i].stage == st && item[i].from <= at && at <= item[i].to) live += item[i].bytes;
            for (size_t i = 0; i <= at; i++) {
                const rand_op *o = &r->ops[r->at[st][i]];
                const lt_op_cost *c = &r->cost[st][o->index];
                size_t freed_at = r->ops[r->b[o->unit][st]].index; /* its B, the last over its range */
                if (o->index == at) live += c->work_bytes;
                if (o->kind == LT_OP_F && freed_at >= at) live += c->act_bytes;
                bool first = o->kind == LT_OP_FK || !r->has_fk[o->unit];
                if (first && o->kind != LT_OP_B && freed_at >= at) live += c->kv_bytes;
            }
            if (live > peak) peak = live;
        }
        assert_near(sim->peak_mem[st], peak);
        assert_near(sim->end_mem[st], r->base[st]);
    }

    /* critical path: starts at 0, ends at the step, each op starts when its predecessor on
     * the path has finished and its data has arrived */
    assert_true(sim->n_critical >= 1);
    assert_near(sim->start[sim->critical[0]], 0);
    assert_near(sim->finish[sim->critical[sim->n_critical - 1]], sim->step_time);
    for (size_t k = 1; k < sim->n_critical; k++) {
        size_t a = sim->critical[k - 1], b = sim->critical[k];
        int sa, sb;
        size_t ia, ib;
        lt_sim_op_at(sim, a, &sa, &ia);
        lt_sim_op_at(sim, b, &sb, &ib);
        double gap = sim->start[b] - sim->finish[a];
        double comm = sa == sb ? 0 : rand_p2p(NULL, sa, sb, r->cost[sa][ia].out_bytes);
        if (fabs(gap - comm) > 1e-9) fail_msg("critical path gap %g between ops %zu and %zu, want %g", gap, a, b, comm);
    }
}

static void test_random_schedules(void **state) {
    (void)state;
    rand_sched *r = calloc(1, sizeof *r);
    assert_non_null(r);
    lt_rng rng;
    lt_rng_seed(&rng, 20250101);
    lt_sim reused = {0};
    FILE *devnull = fopen("/dev/null", "w");
    assert_non_null(devnull);
    for (int iter = 0; iter < 300; iter++) {
        memset(r, 0, sizeof *r);
        build_random(r, &rng);
        lt_sim_costs c = {.ctx = r, .op_cost = rand_op_cost, .p2p_time = rand_p2p, .base_bytes = rand_base};
        run_ok(&reused, &r->s, &c);
        check_random(r, &reused);
        /* a fresh lt_sim gives bit-identical results */
        lt_sim fresh = {0};
        run_ok(&fresh, &r->s, &c);
        assert_int_equal(fresh.n_ops, reused.n_ops);
        assert_memory_equal(fresh.start, reused.start, fresh.n_ops * sizeof(double));
        assert_memory_equal(fresh.finish, reused.finish, fresh.n_ops * sizeof(double));
        assert_memory_equal(fresh.peak_mem, reused.peak_mem, (size_t)r->P * sizeof(double));
        assert_int_equal(fresh.n_critical, reused.n_critical);
        assert_memory_equal(fresh.critical, reused.critical, fresh.n_critical * sizeof(size_t));
        assert_true(fresh.step_time == reused.step_time && fresh.bubble_ratio == reused.bubble_ratio);
        lt_sim_print_timeline(devnull, &fresh, &r->s, 80);
        lt_error err;
        assert_int_equal(lt_sim_write_svg(devnull, &fresh, &r->s, "random", &err), LT_OK);
        lt_sim_free(&fresh);
        lt_schedule_free(&r->s);
    }
    fclose(devnull);
    lt_sim_free(&reused);
    free(r);
}

/* ================================================================== DP-Merge groups */

/* Two one-stage members under the unit-time model (issue 16 point 6). A: u0 = 5 tokens,
 * u1 = 2 (the merged sample); B: u0 = 2 (the merged sample), u1 = 3. Each runs F0 F1 B1 B0.
 * Merged ops: A's F1 with B's F0 (rendezvous 0), A's B1 with B's B0 (rendezvous 1).
 * By hand: rendezvous 0 is ready at 5 on A (after F0), at 0 on B: both start at 5.
 *   A: F0 [0,5]  F1 [5,7]  B1 [16,20] B0 [20,30]
 *   B: F0 [5,7]  F1 [7,10] B1 [10,16] B0 [16,20]
 * Rendezvous 1 is ready at 7 on A (F1 done) and at 16 on B (B1 done): 16. Alone, B's F0
 * would start at 0 and A's B1 at 7. */
static void group_members(lt_schedule *a, lt_schedule *b) {
    sched_init(a, 1, 1);
    sched_init(b, 1, 1);
    add_sample(a, 0, 5);
    add_sample(a, 1, 2);
    add_sample(b, 1, 2);
    add_sample(b, 2, 3);
    lt_schedule *m[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        lt_schedule_add_stage_op(m[k], 0, LT_OP_F, 0, 0);
        lt_schedule_add_stage_op(m[k], 0, LT_OP_F, 1, 0);
        lt_schedule_add_stage_op(m[k], 0, LT_OP_B, 1, 0);
        lt_schedule_add_stage_op(m[k], 0, LT_OP_B, 0, 0);
    }
}

static void test_group_rendezvous_by_hand(void **state) {
    (void)state;
    lt_schedule a, b;
    group_members(&a, &b);
    const lt_schedule *s[2] = {&a, &b};
    lt_sim sims[2];
    memset(sims, 0, sizeof sims);
    lt_sim_costs c[2] = {lt_sim_unit_costs(), lt_sim_unit_costs()};
    const uint32_t ra[4] = {LT_SIM_SOLO, 0, 1, LT_SIM_SOLO}, rb[4] = {0, LT_SIM_SOLO, LT_SIM_SOLO, 1};
    const uint32_t *rdv[2] = {ra, rb};
    lt_error err;
    assert_int_equal(lt_sim_run_group(sims, s, c, 2, rdv, 2, NULL, &err), LT_OK);
    const double sa[4] = {0, 5, 16, 20}, fa[4] = {5, 7, 20, 30}, sb[4] = {5, 7, 10, 16}, fb[4] = {7, 10, 16, 20};
    for (int i = 0; i < 4; i++) {
        assert_true(sims[0].start[i] == sa[i] && sims[0].finish[i] == fa[i]);
        assert_true(sims[1].start[i] == sb[i] && sims[1].finish[i] == fb[i]);
    }
    assert_true(sims[0].step_time == 30 && sims[1].step_time == 20);
    assert_true(sims[0].busy[0] == 21 && sims[1].busy[0] == 15);
    assert_true(sims[0].peak_mem[0] == 2 && sims[1].peak_mem[0] == 2); /* two F in flight */
    assert_true(sims[0].end_mem[0] == 0 && sims[1].end_mem[0] == 0);
    /* A's critical path ends (at its start) where B's B1 held the rendezvous: B1 then B0 */
    assert_int_equal(sims[0].n_critical, 2);
    assert_int_equal(sims[0].critical[0], 2);
    assert_int_equal(sims[0].critical[1], 3);
    /* without rendezvous, each member as lt_sim_run has it */
    const uint32_t *none[2] = {NULL, NULL};
    assert_int_equal(lt_sim_run_group(sims, s, c, 2, none, 0, NULL, &err), LT_OK);
    lt_sim alone = {0};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(lt_sim_run(&alone, s[k], &c[k], &err), LT_OK);
        assert_true(alone.step_time == sims[k].step_time);
        for (int i = 0; i < 4; i++) assert_true(alone.start[i] == sims[k].start[i]);
    }
    assert_true(sims[1].start[0] == 0 && sims[0].start[2] == 7);
    /* a rendezvous index out of range */
    const uint32_t bad[4] = {LT_SIM_SOLO, 2, LT_SIM_SOLO, LT_SIM_SOLO};
    const uint32_t *rbad[2] = {bad, NULL};
    assert_int_equal(lt_sim_run_group(sims, s, c, 2, rbad, 2, NULL, &err), LT_ERR_INPUT);
    lt_sim_free(&alone);
    lt_sim_free(&sims[0]);
    lt_sim_free(&sims[1]);
    lt_schedule_free(&a);
    lt_schedule_free(&b);
}

/* Members that run two merged ops in opposite orders deadlock across pipelines, though each
 * alone runs to the end: A's F1 and B's F0 are one collective, A's F0 and B's F1 another,
 * so B's F0 waits for A's F0's rendezvous, which waits for B's F0 (stage order). */
static void test_group_deadlock(void **state) {
    (void)state;
    lt_schedule a, b;
    group_members(&a, &b);
    const lt_schedule *s[2] = {&a, &b};
    lt_sim sims[2];
    memset(sims, 0, sizeof sims);
    lt_sim_costs c[2] = {lt_sim_unit_costs(), lt_sim_unit_costs()};
    const uint32_t ra[4] = {0, 1, LT_SIM_SOLO, LT_SIM_SOLO}, rb[4] = {1, 0, LT_SIM_SOLO, LT_SIM_SOLO};
    const uint32_t *rdv[2] = {ra, rb};
    const int labels[2] = {4, 5};
    lt_error err;
    lt_error_clear(&err);
    assert_int_equal(lt_sim_run_group(sims, s, c, 2, rdv, 2, labels, &err), LT_ERR_INPUT);
    print_message("%s\n", err.what);
    assert_contains(err.what, "deadlock: ");
    assert_contains(err.what, "(rendezvous)");
    assert_contains(err.what, "F0@s0 of pipeline 4");
    assert_contains(err.what, "F0@s0 of pipeline 5");
    assert_contains(err.hint, "DP-Merge group");
    for (int k = 0; k < 2; k++) assert_int_equal(lt_sim_run(&sims[k], s[k], &c[k], &err), LT_OK);
    lt_sim_free(&sims[0]);
    lt_sim_free(&sims[1]);
    lt_schedule_free(&a);
    lt_schedule_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_stage),
        cmocka_unit_test(test_gpipe_2x2),
        cmocka_unit_test(test_1f1b_2x2),
        cmocka_unit_test(test_p2p_time),
        cmocka_unit_test(test_memory_peaks),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_grid),
        cmocka_unit_test(test_chunkflow_fig2),
        cmocka_unit_test(test_deadlock_b_before_f),
        cmocka_unit_test(test_deadlock_two_stages),
        cmocka_unit_test(test_deadlock_slice_order),
        cmocka_unit_test(test_deadlock_long_cycle),
        cmocka_unit_test(test_slices_by_parts),
        cmocka_unit_test(test_layer_parts_share_activations),
        cmocka_unit_test(test_kv_from_another_stage),
        cmocka_unit_test(test_instances_chunkflow),
        cmocka_unit_test(test_kv_freed_by_other_stage),
        cmocka_unit_test(test_partial_layers),
        cmocka_unit_test(test_asym_times),
        cmocka_unit_test(test_asym_memory),
        cmocka_unit_test(test_asym_deadlock_not_filo),
        cmocka_unit_test(test_asym_malformed),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_contention),
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_timeline),
        cmocka_unit_test(test_svg),
        cmocka_unit_test(test_random_schedules),
        cmocka_unit_test(test_group_rendezvous_by_hand),
        cmocka_unit_test(test_group_deadlock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
