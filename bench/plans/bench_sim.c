/*
 * bench/plans/bench_sim.c — how fast the DAG pipeline simulator (plans/schedule/sim.h) runs on a
 * schedule of 100,000 ops, the size it meets inside every strategy's search loop; the
 * target is under 50 ms per simulation on one core (issue "[4/6] Cost model and DAG
 * pipeline simulator").
 *
 * The schedule: P = 8 stages, 6,250 units, 1F1B at the slice level (Seq1F1B): samples of
 * 1 to 4 slices (a unit per slice; every fifth sample short and packed with the next into
 * one unit), each stage running its warm-up forwards, then one F one B, the backwards of one
 * sample's units reversed (slice j + 1 before slice j), then the drain. 2 x 8 x 6,250 =
 * 100,000 ops; every slice edge of plans/schedule/schedule.h is exercised.
 *
 * It simulates that schedule RUNS times (default 50) with one lt_sim (scratch reused, as a
 * search loop does) under three cost models: the unit-time model (lt_sim_unit_costs), a
 * callback doing a cost model's arithmetic per op (linear + causal-attention FLOPs of each
 * slice with its context, activation and K/V bytes, P2P latency + bytes / bandwidth), and
 * the project's cost model (plans/cost/cost.h, llama-7b on the h200 profile, TP 1, the bridge
 * prepared once as a planner's search does), and prints the best and median milliseconds,
 * the peak RSS, and one machine-readable line:
 *
 *   bench_sim ops=100000 stages=8 units=6250 runs=50 unit_best_ms=... unit_median_ms=...
 *     model_best_ms=... model_median_ms=... cost_best_ms=... cost_median_ms=...
 *     build_ms=... peak_rss_kib=...
 *
 * Usage: bench_sim [RUNS [HARDWARE_PROFILE]]   (default etc/hardware/h200.ini: run it from
 * the source tree, or give the profile's path)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "lib/error.h"               /* lt_error, lt_error_print */
#include "lib/model.h"               /* lt_model_preset */
#include "plans/cost/cost.h"         /* lt_cost_model, lt_cost_sim_costs_prepared */
#include "plans/cost/hardware.h"     /* lt_hardware_load */
#include "plans/schedule/schedule.h" /* lt_schedule, lt_schedule_add_* */
#include "plans/schedule/sim.h"      /* lt_sim_run, lt_sim_unit_costs */

enum { STAGES = 8, LAYERS = 32, UNITS = 6250 };

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Units and their group (the units of one sample's slices, in slice order). */
static void build_units(lt_schedule *s, uint32_t *group_of) {
    int32_t sample = 0;
    uint32_t group = 0;
    while (s->n_units < UNITS) {
        if (sample % 5 == 4 && s->n_units + 1 < UNITS) { /* two short samples packed in one unit */
            uint32_t j = lt_schedule_add_slice(s, sample++, 0, 700);
            lt_schedule_add_slice(s, sample++, 0, 1300);
            group_of[lt_schedule_add_unit(s, j, 2)] = group++;
            continue;
        }
        int n_slices = 1 + sample % 4;
        for (int k = 0; k < n_slices && s->n_units < UNITS; k++) {
            uint32_t j = lt_schedule_add_slice(s, sample, (int64_t)k * 2048, (int64_t)(k + 1) * 2048);
            group_of[lt_schedule_add_unit(s, j, 1)] = group;
        }
        sample++;
        group++;
    }
}

/* Slice-level 1F1B: forwards in unit order; backwards in unit order with each group
 * reversed; a stage issues a B once its F has run there and P - stage forwards, plus the
 * other units of the B's group, are in flight (or all forwards are issued). */
static void build_seq1f1b(lt_schedule *s, const uint32_t *group_of) {
    uint32_t *bwd = malloc(UNITS * sizeof *bwd);
    if (!bwd) lt_die("out of memory");
    for (uint32_t i = 0; i < UNITS;) {
        uint32_t e = i;
        while (e < UNITS && group_of[e] == group_of[i]) e++;
        for (uint32_t k = 0; k < e - i; k++) bwd[i + k] = e - 1 - k;
        i = e;
    }
    for (int st = 0; st < STAGES; st++) {
        uint32_t f = 0, b = 0;
        while (b < UNITS) {
            /* the backward group of bwd[b] starts at unit first; warm up its extra units too */
            uint32_t first = bwd[b];
            while (first > 0 && group_of[first - 1] == group_of[bwd[b]]) first--;
            uint32_t quota = (uint32_t)(STAGES - st) + (bwd[b] - first);
            if (f < UNITS && !(bwd[b] < f && f - b >= quota))
                lt_schedule_add_stage_op(s, st, LT_OP_F, f++, 0);
            else
                lt_schedule_add_stage_op(s, st, LT_OP_B, bwd[b++], 0);
        }
    }
    free(bwd);
}

/* A cost model's arithmetic (DESIGN.md "Cost model and simulator"): per slice, linear FLOPs
 * per token and causal attention over its context; backward 2x linear + 2.5x attention. */
typedef struct model_costs {
    double linear_flops_per_token, attn_flops, flops_per_s;
    double act_bytes_per_token, kv_bytes_per_token, hidden_bytes;
    double latency_s, bandwidth;
} model_costs;

static void model_op_cost(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    (void)stage;
    const model_costs *m = ctx;
    const lt_unit *u = &s->units[op->unit];
    double tokens = 0, attn = 0;
    for (uint32_t i = 0; i < u->n_slices; i++) {
        const lt_slice *sl = &s->slices[u->first_slice + i];
        double c = (double)sl->begin, n = (double)(sl->end - sl->begin);
        tokens += n;
        attn += (c + n) * (c + n) - c * c;
    }
    double layers = op->layer_end - op->layer_begin;
    double lin = layers * m->linear_flops_per_token * tokens, att = layers * m->attn_flops * attn;
    out->time = (op->kind == LT_OP_B ? 2 * lin + 2.5 * att : lin + att) / m->flops_per_s;
    out->act_bytes = op->kind == LT_OP_F ? layers * m->act_bytes_per_token * tokens : 0;
    out->kv_bytes = op->kind == LT_OP_B ? 0 : layers * m->kv_bytes_per_token * tokens;
    out->work_bytes = 4 * m->hidden_bytes * tokens;
    out->out_bytes = m->hidden_bytes * tokens;
}

static double model_p2p(void *ctx, int from, int to, double bytes) {
    (void)from, (void)to;
    const model_costs *m = ctx;
    return m->latency_s + bytes / m->bandwidth;
}

static double model_base(void *ctx, int stage) {
    (void)ctx;
    return 13e9 * 16 / STAGES + (stage == 0 ? 1e9 : 0);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Simulate RUNS times; best and median ms into out[0], out[1]. */
static int time_runs(lt_sim *sim, const lt_schedule *s, const lt_sim_costs *c, int runs, double out[2]) {
    double *ms = malloc((size_t)runs * sizeof *ms);
    if (!ms) lt_die("out of memory");
    for (int i = 0; i < runs; i++) {
        lt_error err;
        double t0 = now_ms();
        lt_status st = lt_sim_run(sim, s, c, &err);
        ms[i] = now_ms() - t0;
        if (st) {
            lt_error_print(&err, stderr);
            free(ms);
            return 1;
        }
    }
    qsort(ms, (size_t)runs, sizeof *ms, cmp_double);
    out[0] = ms[0];
    out[1] = ms[runs / 2];
    free(ms);
    return 0;
}

int main(int argc, char **argv) {
    lt_set_program("bench_sim");
    int runs = argc > 1 ? atoi(argv[1]) : 50;
    if (runs < 1) {
        fprintf(stderr, "usage: bench_sim [RUNS [HARDWARE_PROFILE]]\n");
        return 2;
    }
    double t0 = now_ms();
    lt_schedule s;
    lt_error err;
    if (lt_schedule_init(&s, STAGES, LAYERS, &err)) return lt_error_exit(&err);
    uint32_t *group_of = malloc(UNITS * sizeof *group_of);
    if (!group_of) lt_die("out of memory");
    build_units(&s, group_of);
    build_seq1f1b(&s, group_of);
    free(group_of);
    double build_ms = now_ms() - t0;

    lt_sim sim = {0};
    lt_sim_costs unit = lt_sim_unit_costs();
    model_costs mc = {.linear_flops_per_token = 2 * 3 * 5120 * 5120 * 4.0, /* 13B-ish layer */
                      .attn_flops = 2 * 2 * 5120.0,
                      .flops_per_s = 989e12 * 0.5,
                      .act_bytes_per_token = 34 * 5120.0,
                      .kv_bytes_per_token = 2 * 2 * 5120.0,
                      .hidden_bytes = 2 * 5120.0,
                      .latency_s = 20e-6,
                      .bandwidth = 25e9};
    lt_sim_costs model = {.ctx = &mc, .op_cost = model_op_cost, .p2p_time = model_p2p, .base_bytes = model_base};
    double u[2], m[2];
    if (time_runs(&sim, &s, &unit, runs, u)) return 1;
    double unit_step = sim.step_time, unit_bubble = sim.bubble_ratio, unit_peak = sim.peak_mem[0];
    if (time_runs(&sim, &s, &model, runs, m)) return 1;
    double model_step = sim.step_time, model_bubble = sim.bubble_ratio, model_peak = sim.peak_mem[0];

    lt_hardware hw;
    lt_cost_model cm;
    lt_cost_sim_ctx cctx = {0};
    const lt_model_shape *shape = lt_model_preset("llama-7b"); /* 32 layers = LAYERS */
    if (lt_hardware_load(&hw, argc > 2 ? argv[2] : "etc/hardware/h200.ini", NULL, &err) ||
        lt_cost_model_init(&cm, shape, &hw, STAGES, 1, 1, &err))
        return lt_error_exit(&err);
    double c[2];
    double prep0 = now_ms();
    lt_sim_costs real = lt_cost_sim_costs_prepared(&cctx, &cm, &s);
    double prep_ms = now_ms() - prep0;
    if (time_runs(&sim, &s, &real, runs, c)) return 1;

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("schedule: %d stages, %d layers, %zu units, %zu slices, %zu ops (slice-level 1F1B), built in %.1f ms\n",
           STAGES, LAYERS, s.n_units, s.n_slices, lt_schedule_n_ops(&s), build_ms);
    printf("unit-time model:  best %.2f ms, median %.2f ms per simulation (step %.0f units, bubble %.4f, "
           "stage 0 peak %.0f in flight)\n",
           u[0], u[1], unit_step, unit_bubble, unit_peak);
    printf("cost-model costs: best %.2f ms, median %.2f ms per simulation (step %.3f s, bubble %.4f, "
           "stage 0 peak %.2f GB)\n",
           m[0], m[1], model_step, model_bubble, model_peak / 1e9);
    printf("plans/cost/cost.h:     best %.2f ms, median %.2f ms per simulation (llama-7b on %s, step %.3f s, bubble "
           "%.4f, stage 0 peak %.2f GB; bridge prepared in %.1f ms)\n",
           c[0], c[1], hw.name, sim.step_time, sim.bubble_ratio, sim.peak_mem[0] / 1e9, prep_ms);
    printf("peak RSS %ld KiB, %d runs each\n", ru.ru_maxrss, runs);
    printf("bench_sim ops=%zu stages=%d units=%zu runs=%d unit_best_ms=%.3f unit_median_ms=%.3f "
           "model_best_ms=%.3f model_median_ms=%.3f cost_best_ms=%.3f cost_median_ms=%.3f build_ms=%.1f "
           "peak_rss_kib=%ld\n",
           lt_schedule_n_ops(&s), STAGES, s.n_units, runs, u[0], u[1], m[0], m[1], c[0], c[1], build_ms,
           ru.ru_maxrss);
    lt_cost_sim_ctx_free(&cctx);
    lt_sim_free(&sim);
    lt_schedule_free(&s);
    return 0;
}
