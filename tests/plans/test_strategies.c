/*
 * tests/plans/test_strategies.c — the planner (plans/strategies/plan.h, plans/strategies/baselines.c), its packing
 * helpers (plans/strategies/packing.h) and the cost model's context parallelism (plans/cost/cost.h).
 *
 * Without arguments: runs the tests. With a mode argument:
 *   test_strategies --bench LENGTHS_FILE STRATEGY STEPS [CONTEXT [MEM_GIB]]
 *       plans STEPS steps sampled from LENGTHS_FILE (truncate, global batch 512, seed 1234,
 *       context 128K by default) for llama-13b, dp 8, pp 4, tp 4, max_cp 8, ZeRO-1 on h200
 *       (mem: the profile's HBM, or MEM_GIB) and prints the planning time per step: the
 *       mean wall clock, and the median and mean of the process's CPU time per step
 *       (CLOCK_PROCESS_CPUTIME_ID: one thread plans, so this is one core's time, and it
 *       does not grow when other processes share the cores). BENCH_VERBOSE=1 in the
 *       environment: each step's params and predicted time too; BENCH_NO_MEMORY_MERGE=1:
 *       slimpack's memory trigger of DP-Merge off (lt_plan_config.no_memory_merge).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/model.h"
#include "plans/cost/cost.h"
#include "plans/cost/hardware.h"
#include "plans/strategies/packing.h"
#include "plans/strategies/plan.h"
#include "plans/strategies/internal.h" /* lt_helixpipe_capacity */
#include "plans/batches/sampler.h"
#include "plans/schedule/schedule.h"
#include "plans/schedule/sim.h"
#include "plans/store/validate.h" /* lt_plan_validate */
#include "tests/plans/plan_fixture.h"
#include "tests/testutil.h"       /* lt_test_now_ms, lt_test_cmp_double (bench mode) */

static int bench(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s --bench LENGTHS_FILE STRATEGY STEPS [CONTEXT [MEM_GIB]]\n", argv[0]);
        return 2;
    }
    find_dirs();
    lt_error err;
    lt_strategy strat;
    if (lt_strategy_parse(argv[3], "STRATEGY", &strat, &err) != LT_OK) {
        fprintf(stderr, "%s\n", err.what);
        return 2;
    }
    long steps = strtol(argv[4], NULL, 10);
    int64_t context = argc > 5 ? strtoll(argv[5], NULL, 10) : 131072;
    double mem = argc > 6 ? strtod(argv[6], NULL) : 0;
    lt_corpus *corpus = NULL;
    lt_sampler *sampler = NULL;
    if (!bench_sampler(argv[2], context, &corpus, &sampler)) return 1;
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, context, 8, mem);
    pc.strategy = strat;
    pc.no_memory_merge = getenv("BENCH_NO_MEMORY_MERGE") != NULL;
    double *cpu = calloc(steps > 0 ? (size_t)steps : 1, sizeof *cpu);
    if (!cpu) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    double t0 = lt_test_now_ms();
    lt_strategies *pl = NULL;
    if (lt_strategies_create(&pl, &pc, &err) != LT_OK) {
        fprintf(stderr, "planner: %s\nhint: %s\n", err.what, err.hint);
        return 1;
    }
    double t_create = lt_test_now_ms() - t0;
    int64_t lengths[512];
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    double plan_ms = 0, step_time = 0, bubble = 0;
    long failed = 0;
    char first_error[600] = "";
    for (long t = 0; t < steps; t++) {
        if (lt_sampler_step_lengths(sampler, (uint64_t)t, lengths, &err) != LT_OK) {
            fprintf(stderr, "sampler: %s\n", err.what);
            return 1;
        }
        double a = lt_test_now_ms(), c = lt_test_cpu_ms();
        lt_status st = lt_strategies_plan_step(pl, strat, (uint64_t)t, lengths, 512, &plan, &err);
        plan_ms += lt_test_now_ms() - a;
        cpu[t] = lt_test_cpu_ms() - c;
        if (st != LT_OK) {
            if (failed++ == 0) snprintf(first_error, sizeof first_error, "%s", err.what);
            continue;
        }
        step_time += plan.time_s;
        bubble += plan.bubble_ratio;
        if (getenv("BENCH_VERBOSE")) printf("step %ld: %s, %.3f s\n", t, plan.params, plan.time_s);
    }
    long ok = steps - failed;
    printf("%s: %ld steps, context %" PRId64 ", mem %.1f GiB, tuning \"%s\" (%.1f ms)\n", argv[3], steps, context,
           pc.cm.mem_cap / GIB, lt_strategies_params(pl), t_create);
    printf("  %.3f ms per step planning; %ld planned, %ld failed%s%s\n", plan_ms / (double)(steps ? steps : 1), ok,
           failed, failed ? ": " : "", first_error);
    double cpu_sum = 0;
    for (long t = 0; t < steps; t++) cpu_sum += cpu[t];
    qsort(cpu, (size_t)steps, sizeof *cpu, lt_test_cmp_double);
    double median = steps == 0 ? 0 : steps % 2 ? cpu[steps / 2] : (cpu[steps / 2 - 1] + cpu[steps / 2]) / 2;
    printf("  CPU time per step: median %.1f ms, mean %.1f ms, max %.1f ms\n", median,
           cpu_sum / (double)(steps ? steps : 1), steps ? cpu[steps - 1] : 0.0);
    free(cpu);
    if (ok) printf("  mean step time %.3f s, mean bubble %.2f %%\n", step_time / ok, 100 * bubble / ok);
    lt_step_plan_free(&plan);
    lt_strategies_free(pl);
    lt_sampler_free(sampler);
    lt_corpus_free(corpus);
    return 0;
}

/* ---------------------------------------------------------------- small helpers */

static void assert_close(double got, double want, double rel) {
    if (!(fabs(got - want) <= rel * fabs(want) + 1e-300))
        fail_msg("got %.17g, want %.17g (relative %g)", got, want, rel);
}

/* ---------------------------------------------------------------- the cost model: CP */

/* A profile where numbers are easy by hand: 100 TFLOPS, GEMMs at 40 % of peak at 500
 * tokens and 80 % at 1000, attention at 25 % everywhere, 100 GB/s + 5 us inside a node,
 * 10 GB/s + 10 us across. */
static lt_hardware hand_hw(int gpus_per_node, const char *attention) {
    char text[1024];
    snprintf(text, sizeof text,
             "peak_bf16_tflops = 100\nhbm_gib = 80\nhbm_gbps = 1000\ngpus_per_node = %d\n"
             "p2p_intra_gbps = 100\np2p_intra_latency_us = 5\np2p_inter_gbps = 10\np2p_inter_latency_us = 10\n"
             "gemm_efficiency = 500:0.4, 1000:0.8\nattention_efficiency = %s\n",
             gpus_per_node, attention);
    lt_hardware hw;
    lt_error err;
    if (lt_hardware_parse(&hw, text, "hand", "hand", &err) != LT_OK) fail_msg("profile: %s", err.what);
    return hw;
}

/* 4 layers, h = 64, 4 heads (hd 16, K/V 64 wide), GELU MLP of 128, vocab 100. */
static const lt_model_shape hand_model = {"hand", 4, 64, 4, 4, 128, 100, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};

static lt_cost_model hand_cm(int gpus_per_node, int dp, int cp, const char *attention) {
    lt_hardware hw = hand_hw(gpus_per_node, attention);
    lt_cost_model cm;
    lt_error err;
    if (lt_cost_model_init(&cm, &hand_model, &hw, 2, 1, dp, &err) != LT_OK) fail_msg("%s", err.what);
    assert_int_equal(cm.cp, 1);
    if (lt_cost_model_set_cp(&cm, cp, &err) != LT_OK) fail_msg("%s", err.what);
    return cm;
}

/*
 * Stage 0 of 2 (layers 0, 1) runs the slice [0, 1000) with cp = 2: each GPU holds 500
 * tokens. By hand, per layer: GEMMs 2*500*64*(64 + 128) + 2*500*(64*64 + 2*64*128) =
 * 32,768,000 FLOPs; attention 2*64*1000^2 / 2 = 64,000,000; K/V ring, one transfer of
 * 500 x 2 x 64 x 2 = 128,000 bytes: 5 us + 1.28 us.
 */
static void test_cost_cp_by_hand(void **state) {
    (void)state;
    lt_cost_model cm = hand_cm(8, 2, 2, "1K:0.25");
    assert_int_equal(cm.cp, 2);
    assert_int_equal(cm.stages_per_node, 8); /* 8 GPUs / tp 1: the CP members are DP ranks (TP, PP, DP) */
    lt_slice sl = {0, 0, 1000};
    lt_op f = {.kind = LT_OP_F, .part = LT_PART_ALL, .unit = 0, .layer_begin = 0, .layer_end = 2};
    lt_op_estimate e;
    lt_cost_op(&cm, &sl, 1, NULL, &f, &e);
    assert_close(e.flops.linear, 65536000.0, 1e-12);
    assert_close(e.flops.attention, 128000000.0, 1e-12);
    assert_close(e.gemm_time, 65536000.0 / (1e14 * 0.4), 1e-12); /* looked up at 500 tokens, not 1000 */
    assert_close(e.attention_time, 128e6 / 2.5e13, 1e-12);
    assert_close(e.cp_ring_time, 2 * (5e-6 + 1.28e-6), 1e-12); /* 2 layers x (c - 1) transfers */
    assert_close(e.cp_comm_time, 2 * 6.28e-6 - 5.12e-6, 1e-9);
    assert_close(e.cost.time, 1.6384e-6 + 5.12e-6 + 7.44e-6, 1e-9);
    assert_close(e.cost.act_bytes, 500.0 * 2 * (6 * 64 + 128 + 256) * 2, 1e-12); /* 768 elements per token-layer */
    assert_close(e.cost.kv_bytes, 0, 0);
    assert_close(e.cost.work_bytes, 0, 0);
    assert_close(e.cost.out_bytes, 500.0 * 64 * 2, 1e-12);
    /* where the ring runs: the members are DP ranks tp x pp = 2 ranks apart (ranks ordered
     * TP, PP, DP, the trainer's), so a group of 2 spans 4 ranks: intra-node on 4 GPUs per
     * node, over the network (10 us + 128,000 B at 10 GB/s) on 2 */
    lt_op_estimate e4, e2;
    lt_cost_model c4 = hand_cm(4, 2, 2, "1K:0.25"), c2 = hand_cm(2, 2, 2, "1K:0.25");
    lt_cost_op(&c4, &sl, 1, NULL, &f, &e4);
    lt_cost_op(&c2, &sl, 1, NULL, &f, &e2);
    assert_close(e4.cp_ring_time, 2 * (5e-6 + 1.28e-6), 1e-12);
    assert_close(e2.cp_ring_time, 2 * (10e-6 + 12.8e-6), 1e-12);

    /* B recomputing 1 of its 2 layers: GEMMs 2 x 65.536M + 32.768M, attention (2.5 x 2 + 1)
     * x 64M, ring 2 x 2 + 1 passes */
    lt_op b = f;
    b.kind = LT_OP_B;
    b.recompute_layers = 1;
    lt_cost_op(&cm, &sl, 1, NULL, &b, &e);
    assert_close(e.gemm_time, 163840000.0 / 4e13, 1e-12);
    assert_close(e.attention_time, 384e6 / 2.5e13, 1e-12);
    assert_close(e.cp_ring_time, 5 * 6.28e-6, 1e-12);
    assert_close(e.cp_comm_time, 5 * 6.28e-6 - 1.536e-5, 1e-9);
    assert_close(e.cost.time, 4.096e-6 + 1.536e-5 + 1.604e-5, 1e-9);
    assert_close(e.cost.work_bytes, 2 * 500.0 * 1536, 1e-12); /* one layer re-made + its gradients */
    assert_close(e.cost.out_bytes, 0, 0);                    /* stage 0 sends no input gradient */

    /* a slice whose K/V later slices use: act without K, V; K, V and their gradients apart */
    bool keep = true;
    lt_cost_op(&cm, &sl, 1, &keep, &f, &e);
    assert_close(e.cost.act_bytes, 500.0 * 2 * (6 * 64 + 256) * 2, 1e-12);
    assert_close(e.cost.kv_bytes, 500.0 * 2 * (2 * 2 * 64) * 2, 1e-12);

    /* the same op without CP: twice the FLOPs, GEMMs at 80 %, no ring */
    lt_cost_model c1 = hand_cm(8, 2, 1, "1K:0.25");
    lt_cost_op(&c1, &sl, 1, NULL, &f, &e);
    assert_close(e.flops.linear, 2 * 65536000.0, 1e-12);
    assert_close(e.gemm_time, 131072000.0 / 8e13, 1e-12);
    assert_close(e.cp_ring_time, 0, 0);
    assert_close(e.cost.time, 131072000.0 / 8e13 + 256e6 / 2.5e13, 1e-12);
    assert_int_equal(c1.stages_per_node, 8);

    /* across nodes (1 GPU per node): 10 us + 128,000 / 10 GB/s per transfer */
    lt_cost_model ci = hand_cm(1, 2, 2, "1K:0.25");
    assert_int_equal(ci.stages_per_node, 1);
    lt_cost_op(&ci, &sl, 1, NULL, &f, &e);
    assert_close(e.cp_ring_time, 2 * (10e-6 + 12.8e-6), 1e-12);
    assert_close(e.cp_comm_time, 2 * 22.8e-6 - 5.12e-6, 1e-9);

    /* a long slice: the attention hides the ring completely */
    lt_slice lg = {0, 0, 100000};
    lt_cost_op(&cm, &lg, 1, NULL, &f, &e);
    assert_close(e.cp_ring_time, 2 * (5e-6 + 12.8e6 / 1e11), 1e-12);
    assert_close(e.cp_comm_time, 0, 0);
    assert_close(e.cost.time, e.gemm_time + e.attention_time, 1e-15);
}

/* Attention efficiency at the per-GPU causal length sqrt((end^2 - begin^2) / c): the slice
 * [600, 1000) has 640,000 = 800^2, with cp = 4 400^2 per GPU. */
static void test_cost_cp_attention_lookup(void **state) {
    (void)state;
    lt_cost_model c4 = hand_cm(8, 4, 4, "400:0.2, 800:0.4"), c1 = hand_cm(8, 4, 1, "400:0.2, 800:0.4");
    lt_slice sl = {0, 600, 1000};
    lt_op f = {.kind = LT_OP_F, .part = LT_PART_ALL, .unit = 0, .layer_begin = 1, .layer_end = 2};
    lt_op_estimate e1, e4;
    lt_cost_op(&c1, &sl, 1, NULL, &f, &e1);
    lt_cost_op(&c4, &sl, 1, NULL, &f, &e4);
    assert_close(e1.attention_time, 2.0 * 64 * 640000 / (1e14 * 0.4), 1e-12);
    assert_close(e4.attention_time, 2.0 * 64 * 640000 / 4 / (1e14 * 0.2), 1e-12);
    assert_close(e4.flops.attention, e1.flops.attention / 4, 1e-15);
    assert_close(e4.flops.linear, e1.flops.linear / 4, 1e-15);
    assert_close(lt_cost_head_flops(&c4, 400), lt_cost_head_flops(&c1, 400) / 4, 1e-15);
}

static void test_cost_set_cp_rejects_bad_degrees(void **state) {
    (void)state;
    lt_cost_model cm = hand_cm(8, 6, 1, "1K:0.25");
    lt_error err;
    assert_int_equal(lt_cost_model_set_cp(&cm, 4, &err), LT_ERR_CONFIG); /* 4 does not divide dp = 6 */
    assert_non_null(strstr(err.what, "dp = 6"));
    assert_int_equal(lt_cost_model_set_cp(&cm, 0, &err), LT_ERR_CONFIG);
    assert_int_equal(cm.cp, 1);
    assert_int_equal(cm.stages_per_node, 8);
    /* the CP degree leaves the placement of stages alone: ranks ordered TP, PP, DP */
    assert_int_equal(lt_cost_model_set_cp(&cm, 3, &err), LT_OK);
    assert_int_equal(cm.stages_per_node, 8);
    assert_int_equal(lt_cost_model_set_cp(&cm, 6, &err), LT_OK);
    assert_int_equal(cm.stages_per_node, 8);
}

/* ---------------------------------------------------------------- packing */

static void expect_bins(const lt_packing *pk, const char *const *want, size_t n_want) {
    assert_int_equal(pk->n_bins, n_want);
    for (size_t b = 0; b < n_want; b++) {
        char got[256] = "";
        for (size_t i = pk->bin_start[b]; i < pk->bin_start[b + 1]; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%u", i > pk->bin_start[b] ? " " : "",
                     pk->members[i]);
        if (strcmp(got, want[b]) != 0) fail_msg("bin %zu: got {%s}, want {%s}", b, got, want[b]);
    }
}

static void test_best_fit_decreasing_by_hand(void **state) {
    (void)state;
    lt_packing pk;
    lt_packing_init(&pk);
    /* capacity 10: 8 opens bin 0, 5 bin 1, 4 joins bin 1 (9), 1 fits both and goes to the
     * fuller bin 1 (first fit would take bin 0) */
    const int64_t a[] = {8, 4, 5, 1};
    lt_pack_best_fit_decreasing(&pk, a, 4, 10);
    expect_bins(&pk, (const char *const[]){"0", "1 2 3"}, 2);
    assert_int_equal(pk.bin_tokens[0], 8);
    assert_int_equal(pk.bin_tokens[1], 10);
    /* equal lengths by index; equal loads to the bin made first: 6(0) bin 0, 6(1) bin 1,
     * 3(2) to bin 0 (tie), 3(3) to bin 1 (bin 0 has 9), 2(4) to a new bin 2 */
    const int64_t b[] = {6, 6, 3, 3, 2};
    lt_pack_best_fit_decreasing(&pk, b, 5, 10);
    expect_bins(&pk, (const char *const[]){"0 2", "1 3", "4"}, 3);
    /* a longer list (bins reused): capacity 10, sorted 7 6 5 4 3 2 1 (indices 3 0 5 1 2 4 6):
     * 7 -> b0; 6 -> b1; 5 -> b2; 4 -> b1 (10); 3 -> b0 (10); 2 -> b2 (7); 1 -> b2 (8) */
    const int64_t c[] = {6, 4, 3, 7, 2, 5, 1};
    lt_pack_best_fit_decreasing(&pk, c, 7, 10);
    expect_bins(&pk, (const char *const[]){"2 3", "0 1", "4 5 6"}, 3);
    assert_int_equal(pk.bin_tokens[2], 8);
    /* nothing to pack */
    lt_pack_best_fit_decreasing(&pk, c, 0, 10);
    assert_int_equal(pk.n_bins, 0);
    lt_packing_free(&pk);
}

static void expect_cuts(const int64_t *docs, size_t n, double lin, double quad, int k, const int64_t *want) {
    int64_t cuts[16];
    lt_split_equal_cost(docs, n, lin, quad, k, cuts);
    for (int j = 0; j <= k; j++)
        if (cuts[j] != want[j]) fail_msg("cut %d: got %" PRId64 ", want %" PRId64, j, cuts[j], want[j]);
}

static void test_equal_cost_cuts_by_hand(void **state) {
    (void)state;
    /* linear only: 10 tokens in 4: targets 2.5, 5, 7.5; ties to the lower position */
    expect_cuts((const int64_t[]){10}, 1, 1, 0, 4, (const int64_t[]){0, 2, 5, 7, 10});
    /* quadratic: cost x^2 of 4 tokens, half = 8: 3^2 = 9 is nearer than 2^2 = 4 */
    expect_cuts((const int64_t[]){4}, 1, 0, 1, 2, (const int64_t[]){0, 3, 4});
    /* 10 tokens, x^2, in 5: targets 20, 40, 60, 80 -> 4 (16), 6 (36), 8 (64), 9 (81) */
    expect_cuts((const int64_t[]){10}, 1, 0, 1, 5, (const int64_t[]){0, 4, 6, 8, 9, 10});
    /* two documents of 2 (cost 4 each) in 4: targets 2, 4, 6 -> 1, 2, 2 + 1 */
    expect_cuts((const int64_t[]){2, 2}, 2, 0, 1, 4, (const int64_t[]){0, 1, 2, 3, 4});
    /* 3 tokens, x^2, in 3: targets 3 and 6 both round to 2; pieces kept non-empty */
    expect_cuts((const int64_t[]){3}, 1, 0, 1, 3, (const int64_t[]){0, 1, 2, 3});
    /* linear + quadratic: 1 x + 1 x^2 over 8 tokens = 72, halves at 36: x = 5.52 -> 6 (42)
     * vs 5 (30): 5 is 6 away, 6 is 6 away: the lower */
    expect_cuts((const int64_t[]){8}, 1, 1, 1, 2, (const int64_t[]){0, 5, 8});
}

/* ---------------------------------------------------------------- the reference deal */

/* Best-fit decreasing written out again for the checks: bin_of[i] for every sample, bins
 * numbered in creation order. Returns the number of bins. */
static size_t ref_bfd(const int64_t *len, size_t n, int64_t cap, size_t *bin_of) {
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    int64_t *load = malloc((n ? n : 1) * sizeof *load);
    for (size_t i = 0; i < n; i++) order[i] = i;
    for (size_t i = 1; i < n; i++) { /* insertion sort: longer first, then lower index */
        size_t v = order[i], j = i;
        while (j > 0 && len[order[j - 1]] < len[v]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
    size_t bins = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k], best = SIZE_MAX;
        for (size_t b = 0; b < bins; b++)
            if (load[b] + len[i] <= cap && (best == SIZE_MAX || load[b] > load[best])) best = b;
        if (best == SIZE_MAX) {
            best = bins++;
            load[best] = 0;
        }
        load[best] += len[i];
        bin_of[i] = best;
    }
    free(order);
    free(load);
    return bins;
}

/* One layer's forward FLOPs of tokens [b, e) of a sample, per GPU (tp t, cp c), from the
 * model's dimensions (docs/cost-model.md), for the seq1f1b check. */
static double layer_flops(const lt_cost_model *cm, int cp, double b, double e) {
    double h = cm->model.hidden, t = cm->tp, hd = h / cm->model.heads;
    double kvl = hd * ((cm->model.kv_heads + cm->tp - 1) / cm->tp), m = cm->model.gated_ffn ? 3 : 2;
    double lin = 2 * h * (h / t + 2 * kvl) + 2 * (h / t * h + m * h * cm->model.ffn / t);
    return ((e - b) * lin + 2 * (h / t) * (e * e - b * b)) / cp;
}

/* helixpipe's deal written out again: bins (bin_of, n_bins from ref_bfd) by decreasing cost
 * (one layer's forward FLOPs of their samples, layer_flops; ties: the lower bin), each to the
 * pipeline of the least cost so far (ties: the lower pipeline). pipe_of[b] for every bin. */
static void ref_deal(const lt_cost_model *cm, const int64_t *len, size_t n, const size_t *bin_of, size_t n_bins,
                     int dp, int *pipe_of) {
    double *cost = calloc(n_bins + 1, sizeof *cost), *load = calloc((size_t)dp, sizeof *load);
    size_t *order = malloc((n_bins + 1) * sizeof *order);
    assert_true(cost && load && order);
    for (size_t i = 0; i < n; i++) cost[bin_of[i]] += layer_flops(cm, 1, 0, (double)len[i]);
    for (size_t b = 0; b < n_bins; b++) order[b] = b;
    for (size_t i = 1; i < n_bins; i++)
        for (size_t j = i; j > 0 && cost[order[j]] > cost[order[j - 1]]; j--) {
            size_t t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    for (size_t k = 0; k < n_bins; k++) {
        int r = 0;
        for (int q = 1; q < dp; q++)
            if (load[q] < load[r]) r = q;
        load[r] += cost[order[k]];
        pipe_of[order[k]] = r;
    }
    free(cost), free(load), free(order);
}

/* ---------------------------------------------------------------- plan invariants */

/* Every check of a successful plan of `lengths` with the planner config pc. */
static void check_plan(const lt_plan_config *pc, lt_strategy strat, uint64_t step, const int64_t *lengths, size_t n,
                       const lt_step_plan *plan) {
    const lt_cost_model *cm = &pc->cm;
    int pp = cm->pp;
    assert_int_equal(plan->step, step);
    assert_int_equal(plan->strategy, strat);
    assert_int_equal(plan->n_samples, n);
    assert_int_equal(plan->pp, pp);
    assert_string_equal(plan->solver_status, "none");
    assert_int_equal(plan->runner_up, LT_STRATEGY_COUNT);
    assert_true(plan->solve_ms >= 0);
    for (size_t i = 0; i < n; i++) assert_int_equal(plan->lengths[i], lengths[i]);

    /* the layout */
    int cp = strat == LT_STRATEGY_CHUNKFLOW ? 1 : (int)param_of(plan->params, "cp");
    long rc = param_of(plan->params, "recompute");
    if (strat != LT_STRATEGY_CHUNKFLOW) assert_true(rc >= 0);
    assert_true(cp >= 1 && cp <= pc->max_cp && cm->dp % cp == 0);
    size_t n_ranks = (size_t)(cm->dp / cp);
    assert_int_equal(plan->n_ranks, n_ranks);
    lt_cost_model cmc = *cm;
    lt_error err;
    if (lt_cost_model_set_cp(&cmc, cp, &err) != LT_OK) fail_msg("%s", err.what);

    /* the deal: best-fit-decreasing bins round-robin over the pipelines */
    size_t *bin_of = malloc((n ? n : 1) * sizeof *bin_of);
    size_t n_bins = ref_bfd(lengths, n, pc->context_len, bin_of);
    for (size_t i = 0; i < n; i++) assert_int_equal(plan->sample_rank[i], (int)(bin_of[i] % n_ranks));

    /* coverage: every sample's [0, len) exactly once, in token order, on its pipeline */
    int64_t *next = calloc(n ? n : 1, sizeof *next);
    double busy = 0, longest = 0, peak = 0;
    int64_t chunk = param_of(plan->params, "chunk_size");
    for (size_t r = 0; r < n_ranks; r++) {
        const lt_rank_plan *rp = &plan->ranks[r];
        const lt_schedule *s = &rp->sched;
        assert_int_equal(rp->dp_rank, (int)r * cp);
        assert_int_equal(rp->cp, cp);
        assert_int_equal(s->stages, pp);
        assert_int_equal(s->layers, cm->model.layers);
        assert_int_equal(lt_schedule_check(s, &err), LT_OK);
        for (size_t j = 0; j < s->n_slices; j++) {
            const lt_slice *sl = &s->slices[j];
            assert_true(sl->sample >= 0 && (size_t)sl->sample < n);
            assert_int_equal(plan->sample_rank[sl->sample], (int)r);
            assert_int_equal(sl->begin, next[sl->sample]); /* contiguous, in token order */
            assert_true(sl->end > sl->begin && sl->end <= lengths[sl->sample]);
            next[sl->sample] = sl->end;
        }
        /* the units: megatron/gpipe one per bin (its samples in index order); seq1f1b
         * min(4, tokens) pieces per bin of equal FLOPs; chunkflow chunks of chunk_size */
        size_t u = 0;
        for (size_t b = r; b < n_bins && strat != LT_STRATEGY_CHUNKFLOW; b += n_ranks) {
            int64_t tokens = 0;
            for (size_t i = 0; i < n; i++)
                if (bin_of[i] == b) tokens += lengths[i];
            int64_t cut = tokens < pc->seq1f1b_slices ? tokens : pc->seq1f1b_slices;
            size_t pieces = strat == LT_STRATEGY_SEQ1F1B ? (size_t)cut : 1;
            double cost[64], total = 0, top = 0;
            assert_true(pieces <= 64);
            size_t want_sample = 0;
            for (size_t k = 0; k < pieces; k++, u++) {
                assert_true(u < s->n_units);
                const lt_unit *un = &s->units[u];
                cost[k] = 0;
                for (uint32_t q = 0; q < un->n_slices; q++) {
                    const lt_slice *sl = &s->slices[un->first_slice + q];
                    assert_int_equal(bin_of[sl->sample], b);
                    assert_true((size_t)sl->sample >= want_sample); /* samples in index order */
                    want_sample = (size_t)sl->sample;
                    cost[k] += layer_flops(cm, cp, (double)sl->begin, (double)sl->end);
                    double last = layer_flops(cm, cp, (double)lengths[sl->sample] - 1, (double)lengths[sl->sample]);
                    if (last > top) top = last;
                }
                total += cost[k];
            }
            for (size_t k = 0; k < pieces; k++) /* Seq1F1B's split: equal within one token's FLOPs */
                if (!(fabs(cost[k] - total / (double)pieces) <= top * (1 + 1e-9)))
                    fail_msg("bin %zu piece %zu: %.6g FLOPs, mean %.6g, one token %.6g", b, k, cost[k],
                             total / (double)pieces, top);
        }
        if (strat != LT_STRATEGY_CHUNKFLOW) assert_int_equal(u, s->n_units);
        else {
            assert_true(chunk > 0);
            for (size_t v = 0; v < s->n_units; v++) {
                const lt_unit *un = &s->units[v];
                int64_t tokens = lt_schedule_unit_tokens(s, (uint32_t)v);
                assert_true(tokens <= chunk);
                for (uint32_t q = 0; q < un->n_slices; q++) { /* long samples in chunks of chunk_size */
                    const lt_slice *sl = &s->slices[un->first_slice + q];
                    int64_t len = lengths[sl->sample];
                    if (len <= chunk) assert_true(sl->begin == 0 && sl->end == len);
                    else assert_true(sl->begin % chunk == 0 && (sl->end == len || sl->end - sl->begin == chunk));
                }
            }
        }
        /* ops: whole stage blocks, each unit forwarded (F once, FK at most once) and
         * backwarded once per stage, the recompute depth of the params */
        unsigned char *seen = calloc(s->n_units ? 3 * s->n_units : 1, 1);
        for (int st = 0; st < pp; st++) {
            uint32_t lb, le;
            lt_schedule_stage_layers(s->layers, pp, st, &lb, &le);
            memset(seen, 0, s->n_units ? 3 * s->n_units : 1);
            for (size_t i = 0; i < s->stage[st].n; i++) {
                const lt_op *op = &s->stage[st].ops[i];
                assert_int_equal(op->part, LT_PART_ALL);
                assert_int_equal(op->layer_begin, lb);
                assert_int_equal(op->layer_end, le);
                long want_rc = rc < 0 ? 0 : (rc < (long)(le - lb) ? rc : (long)(le - lb));
                assert_int_equal(op->recompute_layers, want_rc);
                seen[3 * op->unit + op->kind]++;
            }
            for (size_t v = 0; v < s->n_units; v++) {
                assert_int_equal(seen[3 * v + LT_OP_F], 1);
                assert_int_equal(seen[3 * v + LT_OP_B], 1);
                assert_true(seen[3 * v + LT_OP_FK] <= (strat == LT_STRATEGY_CHUNKFLOW ? 1 : 0));
            }
        }
        free(seen);
        /* predictions: the simulator run again on the plan's schedule with the cost model */
        lt_sim sim;
        memset(&sim, 0, sizeof sim);
        lt_sim_costs costs = lt_cost_sim_costs(&cmc);
        if (lt_sim_run(&sim, s, &costs, &err) != LT_OK) fail_msg("re-simulating rank %zu: %s", r, err.what);
        assert_close(rp->time_s, sim.step_time, 0); /* the same costs: the same numbers */
        size_t id = 0;
        for (int st = 0; st < pp; st++) {
            assert_close(rp->stage_busy_s[st], sim.busy[st], 0);
            assert_close(rp->stage_peak_mem[st], sim.peak_mem[st], 0);
            assert_true(rp->stage_peak_mem[st] <= cm->mem_cap);
            busy += rp->stage_busy_s[st];
            if (rp->stage_peak_mem[st] > peak) peak = rp->stage_peak_mem[st];
            for (size_t i = 0; i < s->stage[st].n; i++, id++) {
                const lt_plan_op *po = &rp->ops[id];
                assert_true(isfinite(po->start_s) && isfinite(po->finish_s) && isfinite(po->mem_bytes));
                assert_true(po->start_s >= 0 && po->finish_s >= po->start_s && po->mem_bytes >= 0);
                assert_true(rp->time_s >= po->finish_s);
                assert_close(po->start_s, sim.start[id], 0);
                assert_close(po->finish_s, sim.finish[id], 0);
                lt_op_estimate e;
                lt_cost_schedule_op(&cmc, s, &s->stage[st].ops[i], &e);
                assert_close(po->mem_bytes, e.cost.act_bytes + e.cost.kv_bytes + e.cost.work_bytes, 0);
            }
        }
        lt_sim_free(&sim);
        if (rp->time_s > longest) longest = rp->time_s;
    }
    for (size_t i = 0; i < n; i++) assert_int_equal(next[i], lengths[i]);
    /* the step: slowest pipeline + gradient synchronisation; bubble; peak */
    double sync = 0;
    for (int st = 0; st < pp; st++)
        if (lt_cost_dp_sync_time(&cmc, st) > sync) sync = lt_cost_dp_sync_time(&cmc, st);
    assert_close(plan->time_s, longest + sync, 1e-12);
    assert_true(plan->time_s >= longest);
    assert_close(plan->bubble_ratio, 1 - busy / ((double)n_ranks * pp * plan->time_s), 1e-9);
    assert_true(plan->bubble_ratio >= 0 && plan->bubble_ratio <= 1);
    assert_close(plan->peak_mem, peak, 0);
    free(next);
    free(bin_of);
}

/* Two plans equal in every field but solve_ms. */
static void assert_plans_equal(const lt_step_plan *a, const lt_step_plan *b) {
    assert_int_equal(a->step, b->step);
    assert_int_equal(a->strategy, b->strategy);
    assert_int_equal(a->n_samples, b->n_samples);
    assert_memory_equal(a->lengths, b->lengths, a->n_samples * sizeof *a->lengths);
    assert_memory_equal(a->sample_rank, b->sample_rank, a->n_samples * sizeof *a->sample_rank);
    assert_int_equal(a->n_ranks, b->n_ranks);
    assert_int_equal(a->pp, b->pp);
    assert_memory_equal(&a->time_s, &b->time_s, sizeof a->time_s);
    assert_memory_equal(&a->bubble_ratio, &b->bubble_ratio, sizeof a->bubble_ratio);
    assert_memory_equal(&a->peak_mem, &b->peak_mem, sizeof a->peak_mem);
    assert_string_equal(a->params, b->params);
    assert_string_equal(a->solver_status, b->solver_status);
    assert_int_equal(a->runner_up, b->runner_up);
    assert_memory_equal(&a->runner_up_time_s, &b->runner_up_time_s, sizeof a->runner_up_time_s);
    for (size_t r = 0; r < a->n_ranks; r++) {
        const lt_rank_plan *x = &a->ranks[r], *y = &b->ranks[r];
        assert_int_equal(x->dp_rank, y->dp_rank);
        assert_int_equal(x->cp, y->cp);
        assert_int_equal(x->sched.n_slices, y->sched.n_slices);
        assert_int_equal(x->sched.n_units, y->sched.n_units);
        for (size_t j = 0; j < x->sched.n_slices; j++) {
            assert_int_equal(x->sched.slices[j].sample, y->sched.slices[j].sample);
            assert_int_equal(x->sched.slices[j].begin, y->sched.slices[j].begin);
            assert_int_equal(x->sched.slices[j].end, y->sched.slices[j].end);
        }
        assert_memory_equal(x->sched.units, y->sched.units, x->sched.n_units * sizeof *x->sched.units);
        for (int st = 0; st < a->pp; st++) {
            assert_int_equal(x->sched.stage[st].n, y->sched.stage[st].n);
            assert_memory_equal(x->sched.stage[st].ops, y->sched.stage[st].ops,
                                x->sched.stage[st].n * sizeof *x->sched.stage[st].ops);
        }
        size_t n_ops = lt_schedule_n_ops(&x->sched);
        assert_memory_equal(x->ops, y->ops, n_ops * sizeof *x->ops);
        assert_memory_equal(&x->time_s, &y->time_s, sizeof x->time_s);
        assert_memory_equal(x->stage_busy_s, y->stage_busy_s, (size_t)a->pp * sizeof *x->stage_busy_s);
        assert_memory_equal(x->stage_peak_mem, y->stage_peak_mem, (size_t)a->pp * sizeof *x->stage_peak_mem);
    }
}

/* The memory error's shape (plan.h) for a step that does not fit; the sample it names is the
 * longest on the pipeline it names. */
static void check_memory_error(const lt_error *err, uint64_t step, const int64_t *lengths, size_t n, int cp,
                               size_t n_ranks, int64_t context) {
    unsigned long long st;
    size_t smp;
    long long tokens;
    int rank, stage;
    double need, cap;
    int got = sscanf(err->what,
                     "step %llu: sample %zu (%lld tokens) on DP rank %d needs %lf GiB on stage %d, over the %lf GiB cap",
                     &st, &smp, &tokens, &rank, &need, &stage, &cap);
    if (got != 7) fail_msg("unexpected memory error: %s", err->what);
    assert_int_equal(st, step);
    assert_true(smp < n);
    assert_int_equal(tokens, lengths[smp]);
    assert_true(need > cap);
    assert_int_equal(rank % cp, 0);
    size_t *bin_of = malloc(n * sizeof *bin_of);
    ref_bfd(lengths, n, context, bin_of);
    size_t r = (size_t)rank / (size_t)cp;
    assert_int_equal(bin_of[smp] % n_ranks, r);
    for (size_t i = 0; i < n; i++)
        if (bin_of[i] % n_ranks == r) /* the longest, the lowest index among equals */
            assert_true(lengths[i] < lengths[smp] || (lengths[i] == lengths[smp] && i >= smp));
    free(bin_of);
}

/* ---------------------------------------------------------------- the tuning */

/* Peak memory of the tuning's reference pipeline built here from the rule of
 * docs/strategies.md: 1F1B over pp micro-batches of one context_len sample each, every op
 * recomputing min(r, its layers), cost model with cp = c. */
static double reference_peak(const lt_plan_config *pc, int c, int r, double *time) {
    lt_cost_model cm = pc->cm;
    lt_error err;
    if (lt_cost_model_set_cp(&cm, c, &err) != LT_OK) fail_msg("%s", err.what);
    lt_schedule s;
    assert_int_equal(lt_schedule_init(&s, cm.pp, cm.model.layers, &err), LT_OK);
    for (int i = 0; i < cm.pp; i++) lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, i, 0, pc->context_len), 1);
    lt_sched_1f1b(&s, NULL, s.n_units);
    for (int st = 0; st < s.stages; st++)
        for (size_t i = 0; i < s.stage[st].n; i++) {
            lt_op *op = &s.stage[st].ops[i];
            int n = (int)(op->layer_end - op->layer_begin);
            op->recompute_layers = (uint16_t)(r < n ? r : n);
        }
    lt_sim sim;
    memset(&sim, 0, sizeof sim);
    lt_sim_costs costs = lt_cost_sim_costs(&cm);
    if (lt_sim_run(&sim, &s, &costs, &err) != LT_OK) fail_msg("%s", err.what);
    double peak = 0;
    for (int st = 0; st < sim.stages; st++)
        if (sim.peak_mem[st] > peak) peak = sim.peak_mem[st];
    if (time) {
        double sync = 0;
        for (int st = 0; st < cm.pp; st++)
            if (lt_cost_dp_sync_time(&cm, st) > sync) sync = lt_cost_dp_sync_time(&cm, st);
        *time = sim.step_time + sync;
    }
    lt_sim_free(&sim);
    lt_schedule_free(&s);
    return peak;
}

/* A cap where cp = 1 cannot fit even with full recomputation but cp = 2 fits from some
 * depth R > 0 on (found here from the reference pipeline): the tuning must pick cp = 2
 * with depth R, the least that fits. */
static void test_tuning_picks_cp2_and_least_recompute(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = config_of("llama-7b", 4, 4, 2, 262144, 2, 0);
    int full = 8; /* 32 layers / 4 stages */
    double p1 = reference_peak(&pc, 1, full, NULL);
    int R = -1;
    double pR = 0, pR1 = 0;
    for (int r = 0; r <= full && R < 0; r++) {
        double pk = reference_peak(&pc, 2, r, NULL);
        if (pk < p1) {
            R = r;
            pR = pk;
        } else
            pR1 = pk;
    }
    if (R < 1) fail_msg("precondition: cp = 2 fits below cp = 1's need at depth %d", R);
    double above = pR1 < p1 ? pR1 : p1; /* the least of what depth R - 1 and cp = 1 need */
    pc.cm.mem_cap = (pR + above) / 2;
    lt_strategies *p = planner_of(&pc);
    char want[64];
    snprintf(want, sizeof want, "cp=2 recompute=%d", R);
    assert_string_equal(lt_strategies_params(p), want);
    lt_strategies_free(p);
    /* the cap exactly what depth R needs: still fits (peak <= cap) */
    pc.cm.mem_cap = pR;
    p = planner_of(&pc);
    assert_string_equal(lt_strategies_params(p), want);
    lt_strategies_free(p);
    /* a little less: depth R + 1 */
    pc.cm.mem_cap = pR * (1 - 1e-9);
    p = planner_of(&pc);
    snprintf(want, sizeof want, "cp=2 recompute=%d", R + 1);
    assert_string_equal(lt_strategies_params(p), want);
    lt_strategies_free(p);
}

/* Several degrees fit: the least reference step time x cp, ties to the smaller cp. */
static void test_tuning_minimises_gpu_time(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 131072, 8, 80);
    double best = 0;
    int best_c = 0, best_r = 0;
    for (int c = 1; c <= 8; c *= 2) {
        for (int r = 0; r <= 10; r++) {
            double t;
            if (reference_peak(&pc, c, r, &t) > pc.cm.mem_cap) continue;
            if (best_c == 0 || t * c < best) {
                best = t * c;
                best_c = c;
                best_r = r;
            }
            break;
        }
    }
    assert_true(best_c > 0);
    char want[64];
    snprintf(want, sizeof want, "cp=%d recompute=%d", best_c, best_r);
    lt_strategies *p = planner_of(&pc);
    assert_string_equal(lt_strategies_params(p), want);
    lt_strategies_free(p);
    /* max_cp bounds the degrees tried; 1 leaves only recomputation */
    pc.max_cp = 1;
    best_r = -1;
    for (int r = 0; r <= 10 && best_r < 0; r++)
        if (reference_peak(&pc, 1, r, NULL) <= pc.cm.mem_cap) best_r = r;
    assert_true(best_r > 0);
    snprintf(want, sizeof want, "cp=1 recompute=%d", best_r);
    p = planner_of(&pc);
    assert_string_equal(lt_strategies_params(p), want);
    lt_strategies_free(p);
}

static void test_context_that_cannot_fit_is_a_config_error(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = config_of("llama-7b", 2, 2, 1, 4194304, 1, 40);
    lt_strategies *p = (lt_strategies *)&pc; /* must be set to NULL on failure */
    lt_error err;
    assert_int_equal(lt_strategies_create(&p, &pc, &err), LT_ERR_CONFIG);
    assert_null(p);
    assert_non_null(strstr(err.what, "plan.context_len = 4194304 cannot fit"));
    assert_non_null(strstr(err.what, "cp = 1 and full recomputation"));
    assert_non_null(strstr(err.what, "over the 40.0 GiB cap"));
    assert_non_null(strstr(err.hint, "parallel.max_cp"));
    /* the memory it names is the reference pipeline's at cp = 1, full recomputation */
    char want[64];
    snprintf(want, sizeof want, "needs %.1f GiB", reference_peak(&pc, 1, 16, NULL) / GIB);
    assert_non_null(strstr(err.what, want));
    /* a chunkflow planner is made all the same; the baselines answer the error */
    pc.strategy = LT_STRATEGY_CHUNKFLOW;
    pc.context_len = 131072;
    pc.cm.mem_cap = lt_cost_model_states_bytes(&pc.cm, 0) + pc.cm.reserved_bytes + 8 * GIB;
    assert_int_equal(lt_strategies_create(&p, &pc, &err), LT_OK);
    int64_t len[2] = {100, 200};
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    assert_int_equal(lt_strategies_plan_step(p, LT_STRATEGY_MEGATRON, 0, len, 2, &plan, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "cannot fit"));
    assert_int_equal(lt_strategies_plan_step(p, LT_STRATEGY_CHUNKFLOW, 0, len, 2, &plan, &err), LT_OK);
    lt_step_plan_free(&plan);
    lt_strategies_free(p);
}

static void test_usage_and_input_errors(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = config_of("llama-7b", 2, 2, 1, 8192, 1, 0);
    lt_strategies *p = planner_of(&pc);
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_error err;
    int64_t len[3] = {100, 8192, 5};
    assert_int_equal(lt_strategies_plan_step(p, LT_STRATEGY_COUNT, 0, len, 3, &plan, &err), LT_ERR_USAGE);
    assert_string_equal(err.what, "unknown strategy 8");
    len[2] = 8193;
    assert_int_equal(lt_strategies_plan_step(p, LT_STRATEGY_MEGATRON, 7, len, 3, &plan, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "step 7: sample 2 has 8193 tokens"));
    len[2] = 0;
    assert_int_equal(lt_strategies_plan_step(p, LT_STRATEGY_CHUNKFLOW, 7, len, 3, &plan, &err), LT_ERR_INPUT);
    assert_null(plan.ranks);
    /* a bad config */
    pc.seq1f1b_slices = 0;
    lt_strategies *q = NULL;
    assert_int_equal(lt_strategies_create(&q, &pc, &err), LT_ERR_CONFIG);
    lt_strategies_free(p);
}

/* Fewer micro-batches than pipelines: the others get empty schedules (time 0). */
static void test_idle_pipelines(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = config_of("llama-7b", 8, 2, 1, 8192, 1, 0);
    lt_strategies *p = planner_of(&pc);
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_error err;
    int64_t len[3] = {5000, 4000, 3000}; /* bins {0}, {1}, {2} */
    for (int s = 0; s <= LT_STRATEGY_CHUNKFLOW; s++) {
        if (lt_strategies_plan_step(p, (lt_strategy)s, 3, len, 3, &plan, &err) != LT_OK) fail_msg("%s", err.what);
        check_plan(&pc, (lt_strategy)s, 3, len, 3, &plan);
        assert_int_equal(plan.n_ranks, 8);
        for (size_t r = 3; r < 8; r++) {
            assert_int_equal(plan.ranks[r].sched.n_units, 0);
            assert_true(plan.ranks[r].time_s == 0);
        }
        assert_true(plan.bubble_ratio > 0.5); /* 5 of 8 pipelines idle */
    }
    /* no samples at all: every pipeline idle, the step only synchronises gradients */
    for (int s = 0; s <= LT_STRATEGY_CHUNKFLOW; s++) {
        if (lt_strategies_plan_step(p, (lt_strategy)s, 5, NULL, 0, &plan, &err) != LT_OK) fail_msg("%s", err.what);
        check_plan(&pc, (lt_strategy)s, 5, NULL, 0, &plan);
        assert_true(plan.bubble_ratio == 1.0);
    }
    /* context 6000, a grid of ChunkSize 4096 and 6000; samples that no two share a
     * micro-batch, each one chunk at either size: every pair gives the same plan, and the
     * tie goes to the larger ChunkSize, then the smaller K */
    lt_strategies_free(p);
    pc.context_len = 6000;
    p = planner_of(&pc);
    int64_t single[3] = {3500, 3400, 3300};
    if (lt_strategies_plan_step(p, LT_STRATEGY_CHUNKFLOW, 4, single, 3, &plan, &err) != LT_OK) fail_msg("%s", err.what);
    assert_string_equal(plan.params, "chunk_size=6000 k=1");
    check_plan(&pc, LT_STRATEGY_CHUNKFLOW, 4, single, 3, &plan);
    lt_step_plan_free(&plan);
    lt_strategies_free(p);
}

/* ---------------------------------------------------------------- every corpus */

/* Two steps of every lengths file planned by every strategy with configs big and small:
 * every invariant (check_plan), and a second planner makes the same plans. gpipe keeps all
 * of a pipeline's micro-batches in flight, so it may not fit the cap the baseline was tuned
 * for: then the error must have the documented shape and name the right sample. */
static void test_invariants_on_every_corpus(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    lt_plan_config configs[3];
    configs[0] = config_of("llama-13b", 8, 4, 4, 131072, 8, 80);
    configs[1] = config_of("llama-13b", 8, 4, 4, 65536, 8, 80);
    configs[2] = config_of("llama-7b", 2, 2, 1, 32768, 2, 0);
    int64_t lengths[512];
    lt_step_plan a, b;
    lt_step_plan_init(&a);
    lt_step_plan_init(&b);
    int gpipe_ok = 0, gpipe_failed = 0;
    for (size_t c = 0; c < 3; c++) {
        lt_strategies *p1 = planner_of(&configs[c]), *p2 = planner_of(&configs[c]);
        for (size_t f = 0; f < sizeof corpora / sizeof corpora[0]; f++) {
            corpus_steps cs = open_steps(corpora[f], configs[c].context_len);
            for (uint64_t t = 0; t < 2; t++) {
                uint64_t step = t * 97 + c;
                step_lengths(&cs, step, lengths);
                for (int s = 0; s <= LT_STRATEGY_CHUNKFLOW; s++) {
                    lt_error err;
                    lt_status st = lt_strategies_plan_step(p1, (lt_strategy)s, step, lengths, 512, &a, &err);
                    if (st != LT_OK && s == LT_STRATEGY_GPIPE && st == LT_ERR_INPUT) {
                        int cp = (int)param_of(lt_strategies_params(p1), "cp");
                        check_memory_error(&err, step, lengths, 512, cp, (size_t)(configs[c].cm.dp / cp),
                                           configs[c].context_len);
                        assert_null(a.ranks);
                        gpipe_failed++;
                        continue;
                    }
                    if (st != LT_OK) fail_msg("%s config %zu step %" PRIu64 " %s: %s", corpora[f], c, step,
                                              lt_strategy_name((lt_strategy)s), err.what);
                    if (s == LT_STRATEGY_GPIPE) gpipe_ok++;
                    check_plan(&configs[c], (lt_strategy)s, step, lengths, 512, &a);
                    /* a fresh planner (no history) gives the same plan */
                    if (lt_strategies_plan_step(p2, (lt_strategy)s, step, lengths, 512, &b, &err) != LT_OK)
                        fail_msg("second planner: %s", err.what);
                    assert_plans_equal(&a, &b);
                    lt_strategies_free(p2);
                    p2 = planner_of(&configs[c]);
                }
            }
            close_steps(&cs);
        }
        lt_strategies_free(p1);
        lt_strategies_free(p2);
    }
    print_message("gpipe: %d plans, %d over the cap\n", gpipe_ok, gpipe_failed);
    assert_true(gpipe_ok > 0);
    lt_step_plan_free(&a);
    lt_step_plan_free(&b);
}

/* ---------------------------------------------------------------- chunkflow */

/* The grid's choice has the least step time among the (ChunkSize, K) pairs that fit
 * without recomputation, each planned here with a config that fixes it (ties: larger
 * ChunkSize, then smaller K). */
static void test_chunkflow_grid_picks_the_fastest_fitting_pair(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    static const int64_t sizes[] = {4096, 8192, 16384, 32768, 65536, 131072};
    static const int ks[] = {1, 2, 4, 8};
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 131072, 8, 80);
    pc.strategy = LT_STRATEGY_CHUNKFLOW;
    corpus_steps cs = open_steps("commoncrawl.txt", pc.context_len);
    int64_t lengths[512];
    lt_step_plan plan, fixed;
    lt_step_plan_init(&plan);
    lt_step_plan_init(&fixed);
    lt_error err;
    int misfits = 0;
    for (uint64_t step = 3; step < 5; step++) {
        step_lengths(&cs, step, lengths);
        lt_strategies *p = planner_of(&pc);
        if (lt_strategies_plan_step(p, LT_STRATEGY_CHUNKFLOW, step, lengths, 512, &plan, &err) != LT_OK)
            fail_msg("%s", err.what);
        lt_strategies_free(p);
        long got_size = param_of(plan.params, "chunk_size"), got_k = param_of(plan.params, "k");
        assert_int_equal(param_of(plan.params, "recompute"), -1);
        double best = 0;
        long best_size = 0, best_k = 0;
        for (size_t i = 0; i < 6; i++)
            for (size_t j = 0; j < 4; j++) {
                lt_plan_config fc = pc;
                fc.chunk_size = sizes[i];
                fc.chunkflow_k = ks[j];
                lt_strategies *q = planner_of(&fc);
                lt_status st = lt_strategies_plan_step(q, LT_STRATEGY_CHUNKFLOW, step, lengths, 512, &fixed, &err);
                lt_strategies_free(q);
                if (st != LT_OK || param_of(fixed.params, "recompute") > 0) { /* does not fit at recompute 0 */
                    misfits++;
                    continue;
                }
                check_plan(&fc, LT_STRATEGY_CHUNKFLOW, step, lengths, 512, &fixed);
                if (sizes[i] == got_size && ks[j] == got_k) assert_close(fixed.time_s, plan.time_s, 0);
                if (best_size == 0 || fixed.time_s < best ||
                    (fixed.time_s == best && (sizes[i] > best_size || (sizes[i] == best_size && ks[j] < best_k)))) {
                    best = fixed.time_s;
                    best_size = sizes[i];
                    best_k = ks[j];
                }
            }
        assert_int_equal(got_size, best_size);
        assert_int_equal(got_k, best_k);
        assert_close(plan.time_s, best, 0);
    }
    assert_true(misfits > 0); /* the cap matters in this setting: the test is not vacuous */
    lt_step_plan_free(&plan);
    lt_step_plan_free(&fixed);
    close_steps(&cs);
}

/* A cap just above the model states: no chunk fits even with full recomputation; the error
 * names the step, the pipeline and its longest sample. */
static void test_chunkflow_memory_error(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 131072, 8, 0);
    pc.strategy = LT_STRATEGY_CHUNKFLOW;
    double base = 0;
    for (int st = 0; st < pc.cm.pp; st++) {
        double b = lt_cost_model_states_bytes(&pc.cm, st) + pc.cm.reserved_bytes;
        if (b > base) base = b;
    }
    pc.cm.mem_cap = base + 0.25 * GIB;
    corpus_steps cs = open_steps("commoncrawl.txt", pc.context_len);
    int64_t lengths[512];
    step_lengths(&cs, 17, lengths);
    lt_strategies *p = planner_of(&pc); /* the baseline cannot be tuned: kept for its requests */
    assert_string_equal(lt_strategies_params(p), "untuned");
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_error err;
    assert_int_equal(lt_strategies_plan_step(p, LT_STRATEGY_CHUNKFLOW, 17, lengths, 512, &plan, &err), LT_ERR_INPUT);
    check_memory_error(&err, 17, lengths, 512, 1, 8, pc.context_len);
    assert_null(plan.ranks);
    /* fixed (ChunkSize, K) that do not fit: the same error */
    pc.chunk_size = 4096;
    pc.chunkflow_k = 1;
    lt_strategies *q = planner_of(&pc);
    assert_int_equal(lt_strategies_plan_step(q, LT_STRATEGY_CHUNKFLOW, 17, lengths, 512, &plan, &err), LT_ERR_INPUT);
    check_memory_error(&err, 17, lengths, 512, 1, 8, pc.context_len);
    lt_strategies_free(q);
    lt_strategies_free(p);
    close_steps(&cs);
}

/* Chunkflow falls back to full recomputation when no pair fits without it. */
static void test_chunkflow_recompute_fallback(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = config_of("llama-7b", 2, 2, 1, 32768, 1, 0);
    pc.strategy = LT_STRATEGY_CHUNKFLOW;
    pc.chunk_size = 32768;
    pc.chunkflow_k = 1;
    int64_t len[2] = {32768, 32768};
    /* the cap: between what one 32K chunk needs with full recomputation and without */
    lt_plan_config probe = pc;
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_error err;
    lt_strategies *p = planner_of(&probe);
    if (lt_strategies_plan_step(p, LT_STRATEGY_CHUNKFLOW, 0, len, 2, &plan, &err) != LT_OK) fail_msg("%s", err.what);
    double need0 = plan.peak_mem;
    assert_int_equal(param_of(plan.params, "recompute"), -1);
    lt_strategies_free(p);
    pc.cm.mem_cap = need0 - 1;
    p = planner_of(&pc);
    if (lt_strategies_plan_step(p, LT_STRATEGY_CHUNKFLOW, 0, len, 2, &plan, &err) != LT_OK) fail_msg("%s", err.what);
    assert_string_equal(plan.params, "chunk_size=32768 k=1 recompute=16");
    check_plan(&pc, LT_STRATEGY_CHUNKFLOW, 0, len, 2, &plan);
    lt_strategies_free(p);
    lt_step_plan_free(&plan);
}

/* ---------------------------------------------------------------- auto */

/* auto at the paper settings (llama-13b, DP 8 x PP 4 x TP 4, max_cp 8, 80 GiB, 64K context)
 * on two steps of every corpus: its plan holds every invariant (lt_plan_validate) and is
 * the plan of the strategy it names; no strategy that can plan the step on its own is
 * faster (relative 1e-9; a strategy over the memory cap is skipped); the runner-up is
 * another strategy, no faster than auto's pick and the fastest of the rest. MILPs without a
 * time limit: a solve stopped by the clock would depend on the machine's speed. */
/* ---------------------------------------------------------------- helixpipe */

/* helixpipe (HelixPipe 4.2-4.4.1) on every corpus: valid plans (lt_plan_validate), the
 * deal of best-fit-decreasing bins by cost (lt_helixpipe_capacity, ref_deal), every pipeline's micro-batches a multiple of
 * 2 pp with every op a layer part, recomputation (without attention) only where the plan
 * says so, and the same plan from a fresh planner; a short step split into micro-batches by slicing; a cap nothing fits. */
static void test_helixpipe_plans(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 32768, 8, 80); /* (at 64K stage 0 needs ~95 GiB without zero1) */
    pc.strategy = LT_STRATEGY_HELIXPIPE;
    int64_t lengths[512];
    lt_step_plan a, b;
    lt_step_plan_init(&a);
    lt_step_plan_init(&b);
    lt_error err;
    size_t *bin_of = malloc(512 * sizeof *bin_of);
    int *pipe_of = malloc(512 * sizeof *pipe_of);
    assert_non_null(bin_of), assert_non_null(pipe_of);
    int recomputed = 0;
    for (size_t f = 0; f < sizeof corpora / sizeof corpora[0]; f++) {
        corpus_steps cs = open_steps(corpora[f], pc.context_len);
        step_lengths(&cs, 5, lengths);
        lt_strategies *p1 = planner_of(&pc), *p2 = planner_of(&pc);
        if (lt_strategies_plan_step(p1, LT_STRATEGY_HELIXPIPE, 5, lengths, 512, &a, &err) != LT_OK)
            fail_msg("%s: %s", corpora[f], err.what);
        if (lt_plan_validate(&a, pc.cm.mem_cap, &err) != LT_OK) fail_msg("%s: lt_plan_validate: %s", corpora[f], err.what);
        assert_int_equal(a.strategy, LT_STRATEGY_HELIXPIPE);
        assert_true(a.time_s >= lt_cost_step_bound(&pc.cm, lengths, 512, pc.context_len));
        assert_int_equal(a.n_ranks, (size_t)pc.cm.dp);
        /* the deal: best-fit-decreasing bins of the step's tokens over dp x 2 pp x k (at least
         * the longest sample, at most the context), by cost (ref_deal), for one of k = 1, 2, 4 */
        int64_t total = 0, longest = 0;
        for (size_t i = 0; i < 512; i++) total += lengths[i], longest = lengths[i] > longest ? lengths[i] : longest;
        bool dealt = false;
        for (int k = 1; k <= 4 && !dealt; k *= 2) {
            int64_t cap = (total + 2 * 8 * 4 * k - 1) / (2 * 8 * 4 * k);
            cap = cap < longest ? longest : cap > pc.context_len ? pc.context_len : cap;
            assert_int_equal(lt_helixpipe_capacity(lengths, 512, 8, 4, k, pc.context_len), cap);
            size_t n_bins = ref_bfd(lengths, 512, cap, bin_of);
            ref_deal(&pc.cm, lengths, 512, bin_of, n_bins, pc.cm.dp, pipe_of);
            dealt = true;
            for (size_t i = 0; i < 512 && dealt; i++) dealt = a.sample_rank[i] == pipe_of[bin_of[i]];
        }
        assert_true(dealt);
        long folds = param_of(a.params, "folds"), rc = param_of(a.params, "recompute");
        assert_true(folds == 1 || folds == 2);
        assert_true(param_of(a.params, "rounds") >= 1);
        recomputed += rc == 1;
        for (size_t r = 0; r < a.n_ranks; r++) {
            const lt_schedule *s = &a.ranks[r].sched;
            assert_int_equal(s->n_units % (size_t)(2 * pc.cm.pp), 0);
            for (int g = 0; g < s->stages; g++)
                for (size_t i = 0; i < s->stage[g].n; i++) {
                    const lt_op *op = &s->stage[g].ops[i];
                    assert_int_not_equal(op->part, LT_PART_ALL);
                    if (!rc) assert_int_equal(op->recompute_layers, 0); /* (rc: some pipelines recompute) */
                    if (op->part == LT_PART_ATTN) assert_int_equal(op->recompute_layers, 0);
                }
        }
        if (lt_strategies_plan_step(p2, LT_STRATEGY_HELIXPIPE, 5, lengths, 512, &b, &err) != LT_OK)
            fail_msg("second planner: %s", err.what);
        assert_plans_equal(&a, &b);
        lt_strategies_free(p1), lt_strategies_free(p2);
        close_steps(&cs);
    }
    print_message("helixpipe: %d of %zu corpora recompute\n", recomputed, sizeof corpora / sizeof corpora[0]);
    /* one pipeline, 2 samples, pp 4: 8 micro-batches, the samples cut into slices in token order
     * (200 GiB: every stage holds the whole model's states, as the trainer runs helixpipe) */
    lt_plan_config one = config_of("llama-7b", 1, 4, 1, 32768, 1, 200);
    one.strategy = LT_STRATEGY_HELIXPIPE; /* (the baselines' tuning may fail under the cap below) */
    lt_strategies *p = planner_of(&one);
    int64_t two[2] = {30000, 100};
    if (lt_strategies_plan_step(p, LT_STRATEGY_HELIXPIPE, 1, two, 2, &a, &err) != LT_OK) fail_msg("%s", err.what);
    if (lt_plan_validate(&a, one.cm.mem_cap, &err) != LT_OK) fail_msg("lt_plan_validate: %s", err.what);
    const lt_schedule *s = &a.ranks[0].sched;
    assert_int_equal(s->n_units, 8);
    int64_t next[2] = {0, 0};
    for (size_t u = 0; u < s->n_units; u++)
        for (uint32_t k = 0; k < s->units[u].n_slices; k++) {
            const lt_slice *sl = &s->slices[s->units[u].first_slice + k];
            assert_int_equal(sl->begin, next[sl->sample]); /* in token order, no gap */
            next[sl->sample] = sl->end;
        }
    assert_int_equal(next[0], 30000), assert_int_equal(next[1], 100);
    /* a cap nothing fits: the memory error names the step */
    lt_strategies_free(p);
    one.cm.mem_cap = 1e6;
    p = planner_of(&one);
    assert_int_equal(lt_strategies_plan_step(p, LT_STRATEGY_HELIXPIPE, 1, two, 2, &a, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "step 1"));
    lt_strategies_free(p);
    free(bin_of), free(pipe_of);
    lt_step_plan_free(&a), lt_step_plan_free(&b);
}

/* The stage of unit u's attention of layer 0 in pipeline schedule s (-1: none). */
static int attn_stage(const lt_schedule *s, uint32_t u) {
    for (int g = 0; g < s->stages; g++)
        for (size_t i = 0; i < s->stage[g].n; i++) {
            const lt_op *op = &s->stage[g].ops[i];
            if (op->kind == LT_OP_F && op->part == LT_PART_ATTN && op->layer_begin == 0 && op->unit == u) return g;
        }
    return -1;
}

/* Under the two-fold FILO schedule a sample's slices start at an even micro-batch, so that
 * each pair of them shares a slot and its attention stage (helixpipe.c align_runs): on
 * github's long tail at 128K (the paper setting, a cap everything fits), every run of
 * micro-batches holding one sample's slices starts at an even unit of a two-fold pipeline
 * (units 2j and 2j + 1 attending on one stage), and its slices attend on (r + 1) / 2 stages.
 * Without the alignment step 1 has a run at unit 3 (measured with the deal by cost; with
 * the round-robin deal before it, step 0 had two). */
static void test_helixpipe_slices_share_slots(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 131072, 8, 400);
    pc.strategy = LT_STRATEGY_HELIXPIPE;
    lt_strategies *p = planner_of(&pc);
    corpus_steps cs = open_steps("github.txt", pc.context_len);
    int64_t lengths[512];
    lt_step_plan a;
    lt_step_plan_init(&a);
    lt_error err;
    int runs = 0, two_fold = 0;
    for (uint64_t t = 0; t < 4; t++) {
        step_lengths(&cs, t, lengths);
        if (lt_strategies_plan_step(p, LT_STRATEGY_HELIXPIPE, t, lengths, 512, &a, &err) != LT_OK)
            fail_msg("step %" PRIu64 ": %s", t, err.what);
        for (size_t r = 0; r < a.n_ranks; r++) {
            const lt_schedule *s = &a.ranks[r].sched;
            if (s->n_units < 2 || attn_stage(s, 0) != attn_stage(s, 1)) continue; /* naive FILO */
            two_fold++;
            for (uint32_t u = 0; u < s->n_units;) {
                /* the run from u: units whose first slice continues the sample of the last slice before */
                uint32_t e = u + 1;
                while (e < s->n_units) {
                    const lt_unit *x = &s->units[e - 1], *y = &s->units[e];
                    const lt_slice *last = &s->slices[x->first_slice + x->n_slices - 1], *first = &s->slices[y->first_slice];
                    if (first->sample != last->sample || first->begin != last->end) break;
                    e++;
                }
                if (e - u >= 2) {
                    runs++;
                    if (u % 2 != 0) fail_msg("step %" PRIu64 ", pipeline %zu: a run of %u slices at unit %u", t, r, e - u, u);
                    int stages = 1;
                    for (uint32_t k = u + 1; k < e; k++) stages += attn_stage(s, k) != attn_stage(s, k - 1);
                    assert_int_equal(stages, (int)(e - u + 1) / 2);
                }
                u = e;
            }
        }
    }
    print_message("helixpipe slots: %d runs of slices in %d two-fold pipelines\n", runs, two_fold);
    assert_true(runs > 0);
    lt_step_plan_free(&a);
    close_steps(&cs);
    lt_strategies_free(p);
}

/* github at 128K, the paper setting and its 80 GiB: steps whose pipelines fit no FILO round
 * size with their bins split together (a 131K sample beside another 131K bin: the sample's
 * slices fill every round) plan with each bin split on its own, a round each (helixpipe.c
 * split_pipe, per_bin): valid, under the cap, in two rounds or more. Without it step 2 is
 * over the cap (121.2 GiB, docs/PERFORMANCE.md "HelixPipe's bins as rounds"). */
static void test_helixpipe_rounds_per_bin(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 131072, 8, 80);
    pc.strategy = LT_STRATEGY_HELIXPIPE;
    lt_strategies *p = planner_of(&pc);
    corpus_steps cs = open_steps("github.txt", pc.context_len);
    int64_t lengths[512];
    lt_step_plan a;
    lt_step_plan_init(&a);
    lt_error err;
    int per_bin_steps = 0;
    for (uint64_t t = 0; t < 4; t++) {
        step_lengths(&cs, t, lengths);
        if (lt_strategies_plan_step(p, LT_STRATEGY_HELIXPIPE, t, lengths, 512, &a, &err) != LT_OK)
            fail_msg("step %" PRIu64 ": %s", t, err.what);
        if (lt_plan_validate(&a, pc.cm.mem_cap, &err) != LT_OK) fail_msg("step %" PRIu64 ": %s", t, err.what);
        assert_true(a.peak_mem <= pc.cm.mem_cap);
        if (param_of(a.params, "per_bin") > 0) {
            per_bin_steps++;
            assert_true(param_of(a.params, "rounds") >= 2);
        }
    }
    assert_true(per_bin_steps > 0);
    lt_step_plan_free(&a);
    close_steps(&cs);
    lt_strategies_free(p);
}

static void test_auto_is_the_fastest_on_every_corpus(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 65536, 8, 80);
    pc.milp_time_limit = 0;
    lt_strategies *p = planner_of(&pc);
    int64_t lengths[512];
    lt_step_plan a, alone;
    lt_step_plan_init(&a);
    lt_step_plan_init(&alone);
    const double rel = 1e-9;
    for (size_t f = 0; f < sizeof corpora / sizeof corpora[0]; f++) {
        corpus_steps cs = open_steps(corpora[f], pc.context_len);
        char picks[160] = "";
        for (uint64_t t = 0; t < 2; t++) {
            uint64_t step = 3 + 150 * t;
            step_lengths(&cs, step, lengths);
            double time_of[LT_STRATEGY_AUTO];
            bool ok[LT_STRATEGY_AUTO];
            lt_error err;
            for (int s = 0; s < LT_STRATEGY_AUTO; s++) {
                ok[s] = false;
                if (s == LT_STRATEGY_HELIXPIPE) continue; /* not among auto's candidates yet (baselines.c) */
                lt_status st = lt_strategies_plan_step(p, (lt_strategy)s, step, lengths, 512, &alone, &err);
                ok[s] = st == LT_OK;
                if (st == LT_ERR_INPUT) continue; /* over the memory cap */
                if (st != LT_OK) fail_msg("%s step %" PRIu64 " %s: %s", corpora[f], step,
                                          lt_strategy_name((lt_strategy)s), err.what);
                time_of[s] = alone.time_s;
                /* no plan beats the step's lower bound (lt_cost_step_bound) */
                double bound = lt_cost_step_bound(&pc.cm, lengths, 512, pc.context_len);
                if (!(alone.time_s >= bound))
                    fail_msg("%s step %" PRIu64 " %s: %.6f s under the lower bound %.6f s", corpora[f], step,
                             lt_strategy_name((lt_strategy)s), alone.time_s, bound);
            }
            if (lt_strategies_plan_step(p, LT_STRATEGY_AUTO, step, lengths, 512, &a, &err) != LT_OK)
                fail_msg("%s step %" PRIu64 " auto: %s", corpora[f], step, err.what);
            if (lt_plan_validate(&a, pc.cm.mem_cap, &err) != LT_OK)
                fail_msg("%s step %" PRIu64 " auto: lt_plan_validate: %s", corpora[f], step, err.what);
            assert_int_equal(a.step, step);
            assert_true(a.strategy < LT_STRATEGY_AUTO && ok[a.strategy]);
            assert_close(a.time_s, time_of[a.strategy], rel);
            for (int s = 0; s < LT_STRATEGY_AUTO; s++)
                if (ok[s] && !(a.time_s <= time_of[s] * (1 + rel)))
                    fail_msg("%s step %" PRIu64 ": auto picked %s (%.6f s) but %s takes %.6f s", corpora[f], step,
                             lt_strategy_name(a.strategy), a.time_s, lt_strategy_name((lt_strategy)s), time_of[s]);
            /* the runner-up: another strategy, the fastest of the rest */
            assert_true(a.runner_up < LT_STRATEGY_AUTO && a.runner_up != a.strategy && ok[a.runner_up]);
            assert_true(a.runner_up_time_s >= a.time_s * (1 - rel));
            assert_close(a.runner_up_time_s, time_of[a.runner_up], rel);
            for (int s = 0; s < LT_STRATEGY_AUTO; s++)
                if (ok[s] && s != (int)a.strategy) assert_true(a.runner_up_time_s <= time_of[s] * (1 + rel));
            size_t len = strlen(picks);
            snprintf(picks + len, sizeof picks - len, "%sstep %" PRIu64 " %s (runner-up %s)", t ? ", " : "", step,
                     lt_strategy_name(a.strategy), lt_strategy_name(a.runner_up));
        }
        print_message("auto on %s: %s\n", corpora[f], picks);
        close_steps(&cs);
    }
    lt_step_plan_free(&a);
    lt_step_plan_free(&alone);
    lt_strategies_free(p);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--bench") == 0) return bench(argc, argv);
    find_dirs();
    unsetenv("LONGTAIL_HARDWARE_DIR");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cost_cp_by_hand),
        cmocka_unit_test(test_cost_cp_attention_lookup),
        cmocka_unit_test(test_cost_set_cp_rejects_bad_degrees),
        cmocka_unit_test(test_best_fit_decreasing_by_hand),
        cmocka_unit_test(test_equal_cost_cuts_by_hand),
        cmocka_unit_test(test_tuning_picks_cp2_and_least_recompute),
        cmocka_unit_test(test_tuning_minimises_gpu_time),
        cmocka_unit_test(test_context_that_cannot_fit_is_a_config_error),
        cmocka_unit_test(test_usage_and_input_errors),
        cmocka_unit_test(test_idle_pipelines),
        cmocka_unit_test(test_invariants_on_every_corpus),
        cmocka_unit_test(test_chunkflow_grid_picks_the_fastest_fitting_pair),
        cmocka_unit_test(test_chunkflow_memory_error),
        cmocka_unit_test(test_chunkflow_recompute_fallback),
        cmocka_unit_test(test_helixpipe_plans),
        cmocka_unit_test(test_helixpipe_slices_share_slots),
        cmocka_unit_test(test_helixpipe_rounds_per_bin),
        cmocka_unit_test(test_auto_is_the_fastest_on_every_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
