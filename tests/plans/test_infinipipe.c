/*
 * tests/plans/test_infinipipe.c — the infinipipe strategy (plans/strategies/infinipipe.c; InfiniPipe
 * Sec. 3): the mesh and Alg. 1 on hand-made inputs, Eq. 14's grouping and Alg. 2's MILP
 * against brute force, the CBC fallback, and every plan invariant on shared/lengths.
 *
 * The file includes plans/strategies/infinipipe.c itself, so that the strategy's internal steps (the
 * mesh, the chunking, the grouping, the rows and solvers of the checkpointing MILP) are
 * tested one by one; the linker then takes the strategy's entry points from this object
 * instead of libplans.a's copy of the same file.
 *
 * Without arguments: runs the tests. With --bench LENGTHS_FILE STEPS [CONTEXT [MEM_GIB]]: plans
 * STEPS steps (truncate, global batch 512, seed 1234, context 256K by default) for the paper
 * config (llama-13b, dp 8, pp 4, tp 4, max_cp 8, ZeRO-1, h200 capped at 80 GiB) and prints
 * the planning time per step (median, mean, max), one line per step with BENCH_VERBOSE=1.
 */
#include "plans/strategies/infinipipe.c" /* the strategy under test, statics included */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/model.h"             /* lt_model_preset */
#include "plans/cost/hardware.h"   /* lt_hardware_load, lt_hardware_parse */
#include "plans/strategies/plan.h" /* lt_strategies_* */
#include "plans/batches/sampler.h" /* lt_sampler_* */
#include "plans/store/validate.h"  /* lt_plan_validate */
#include "tests/plans/plan_fixture.h"
#include "tests/testutil.h"        /* lt_test_now_ms, lt_test_cmp_double (bench mode) */

/* A planner config for the model `m` on h200 with the given layout, mem_cap in GiB (0 = HBM),
 * strategy infinipipe, the config's MILP defaults (plan_fixture.h). */
static lt_plan_config config_for(const lt_model_shape *m, int dp, int pp, int tp, int64_t context, int max_cp,
                                    double mem_gib) {
    lt_plan_config pc = config_of_shape(m, dp, pp, tp, context, max_cp, mem_gib);
    pc.strategy = LT_STRATEGY_INFINIPIPE;
    return pc;
}

/* The paper config (etc/paper-llama13b.ini): llama-13b, dp 8, pp 4, tp 4, max_cp 8, 80 GiB. */
static lt_plan_config paper_config(int64_t context) {
    return config_for(lt_model_preset("llama-13b"), 8, 4, 4, context, 8, 80);
}

static lt_infinipipe *state_of(const lt_plan_config *pc) {
    lt_infinipipe *ip = NULL;
    lt_error err;
    if (lt_infinipipe_create(&ip, pc, &err) != LT_OK) fail_msg("lt_infinipipe_create: %s", err.what);
    return ip;
}

/* Backward time of one layer over the slice [b, e), straight from the cost model. */
static double bwd_time_of(const lt_cost_model *cm, int64_t b, int64_t e) {
    lt_slice sl = {7, b, e};
    lt_op op = {.kind = LT_OP_B, .part = LT_PART_ALL, .layer_begin = 0, .layer_end = 1};
    lt_op_estimate est;
    lt_cost_op(cm, &sl, 1, NULL, &op, &est);
    return est.cost.time;
}

/* The samples 0..n-1 as one pipeline's members. */
static uint32_t *members_of(size_t n) {
    uint32_t *m = malloc((n ? n : 1) * sizeof *m);
    for (size_t i = 0; i < n; i++) m[i] = (uint32_t)i;
    return m;
}

/* ---------------------------------------------------------------- Alg. 1: the mesh */

/* Line 1: the longest sample cut into N slices whose backward times (cost model, priced here
 * independently) are equal: each within 0.2 % of their mean, the bounds strictly increasing
 * from 0 to the length. Later slices are shorter (their attention has more context). */
static void test_mesh_slices_have_equal_backward_time(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = paper_config(262144);
    const int64_t longs[] = {262144, 100000, 20000};
    const int ns[] = {1, 2, 5, 8, 16, 32};
    for (int c = 1; c <= 2; c *= 2) {
        lt_cost_model cm = pc.cm;
        lt_error err;
        if (lt_cost_model_set_cp(&cm, c, &err) != LT_OK) fail_msg("%s", err.what);
        for (size_t li = 0; li < 3; li++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                int n = ns[ni];
                int64_t b[33];
                mesh_split(&cm, longs[li], n, b);
                assert_int_equal(b[0], 0);
                assert_int_equal(b[n], longs[li]);
                double t[32], mean = 0;
                for (int j = 0; j < n; j++) {
                    assert_true(b[j + 1] > b[j]);
                    t[j] = bwd_time_of(&cm, b[j], b[j + 1]);
                    mean += t[j] / n;
                }
                for (int j = 0; j < n; j++)
                    if (!(fabs(t[j] - mean) <= 2e-3 * mean))
                        fail_msg("cp %d, %" PRId64 " tokens, N = %d: slice %d takes %.6g s, mean %.6g", c, longs[li],
                                 n, j, t[j], mean);
                if (n > 1 && longs[li] > 50000) assert_true(b[1] - b[0] > b[n] - b[n - 1]);
            }
    }
}

/* ---------------------------------------------------------------- Alg. 1: chunking */

/* Lines 3-16 written out again, plainly, on the items chunk_pipeline makes: the bucket of
 * every sample, the final T_t and the perturbations. */
typedef struct ref_packing {
    int32_t bucket_of[64]; /* by sample */
    double t_t;
    int perturbations;
} ref_packing;

static void ref_pack(const lt_cost_model *cm, const ip_alg1 *a, const int64_t *len, size_t n, ref_packing *out) {
    double rate = linear_rate(cm, a->t_m, false);
    double bt[64], it[64];
    int64_t bk[64], tok[64], first[64];
    int nb = 0;
    assert_true(n <= 64);
    /* tails first, in sample order: one bucket each */
    for (size_t i = 0; i < n; i++) {
        int j = 0;
        while (len[i] > a->bounds[j + 1]) j++;
        first[i] = a->bounds[j];
        tok[i] = len[i] - first[i];
        it[i] = item_time(cm, rate, first[i], len[i]);
        out->bucket_of[i] = -1;
        if (j > 0) {
            bt[nb] = it[i];
            bk[nb] = tok[i];
            out->bucket_of[i] = nb++;
        }
    }
    out->t_t = a->t_t0;
    out->perturbations = 0;
    /* shorts by time, longest first (then tokens, then index): selection, O(n^2) */
    bool done[64] = {false};
    for (;;) {
        int pick = -1;
        for (size_t i = 0; i < n; i++) {
            if (done[i] || out->bucket_of[i] >= 0) continue;
            if (pick < 0 || it[i] > it[pick] || (it[i] == it[pick] && tok[i] > tok[pick])) pick = (int)i;
        }
        if (pick < 0) break;
        done[pick] = true;
        int64_t mn = INT64_MAX;
        for (int b = 0; b < nb; b++) mn = bk[b] < mn ? bk[b] : mn;
        if (nb == 0 || mn + tok[pick] > a->t_m) {
            bt[nb] = it[pick];
            bk[nb] = tok[pick];
            out->bucket_of[pick] = nb++;
            continue;
        }
        for (;;) {
            int best = -1;
            for (int b = 0; b < nb; b++)
                if (bt[b] + it[pick] <= out->t_t && bk[b] + tok[pick] <= a->t_m &&
                    (best < 0 || bt[b] / (double)bk[b] < bt[best] / (double)bk[best]))
                    best = b;
            if (best >= 0) {
                bt[best] += it[pick];
                bk[best] += tok[pick];
                out->bucket_of[pick] = best;
                break;
            }
            double m = INFINITY;
            for (int b = 0; b < nb; b++)
                if (bk[b] + tok[pick] <= a->t_m && bt[b] < m) m = bt[b];
            out->t_t = m + it[pick];
            out->perturbations++;
        }
    }
}

/* The checks of one chunking of samples len[0..n) (one pipeline) with N = n_mesh. */
static void check_chunking(lt_infinipipe *ip, const lt_cost_model *cm, const int64_t *len, size_t n, int n_mesh,
                           bool want_perturbation) {
    uint32_t *mem = members_of(n);
    lt_schedule s;
    lt_error err;
    if (lt_schedule_init(&s, cm->pp, cm->model.layers, &err) != LT_OK) fail_msg("%s", err.what);
    chunk_pipeline(ip, cm, mem, n, len, n_mesh, &s);
    const ip_alg1 *a = &ip->alg1;
    assert_int_equal(a->n, n_mesh);
    assert_int_equal(lt_schedule_check(&s, &err), LT_OK);
    double rate = linear_rate(cm, a->t_m, false);
    int64_t tm = 0;
    for (int j = 0; j < n_mesh; j++) tm = a->bounds[j + 1] - a->bounds[j] > tm ? a->bounds[j + 1] - a->bounds[j] : tm;
    assert_int_equal(a->t_m, tm);
    /* coverage and the split along the mesh */
    int64_t next[64] = {0};
    int unit_of_sample[64];
    size_t n_tails = 0, n_split = 0;
    for (size_t i = 0; i < n; i++) unit_of_sample[i] = -1;
    for (size_t u = 0; u < s.n_units; u++) {
        const lt_unit *un = &s.units[u];
        int64_t tokens = 0;
        double time = 0;
        int tails = 0;
        for (uint32_t k = 0; k < un->n_slices; k++) {
            const lt_slice *sl = &s.slices[un->first_slice + k];
            assert_true(sl->sample >= 0 && (size_t)sl->sample < n);
            assert_int_equal(sl->begin, next[sl->sample]); /* token order */
            next[sl->sample] = sl->end;
            tokens += sl->end - sl->begin;
            time += item_time(cm, rate, sl->begin, sl->end);
            int64_t l = len[sl->sample];
            bool is_long = l > a->bounds[1];
            if (!is_long) {
                assert_true(sl->begin == 0 && sl->end == l); /* short samples whole */
            } else if (sl->end < l) { /* a split chunk: one mesh slice, alone */
                int j = 0;
                while (a->bounds[j] < sl->begin) j++;
                assert_int_equal(a->bounds[j], sl->begin);
                assert_int_equal(a->bounds[j + 1], sl->end);
                assert_int_equal(un->n_slices, 1);
                n_split++;
            } else { /* the tail: from a mesh bound to the end, within the next mesh slice */
                int j = 0;
                while (a->bounds[j] < sl->begin) j++;
                assert_int_equal(a->bounds[j], sl->begin);
                assert_true(l <= a->bounds[j + 1]);
                assert_true(j >= 1);
                assert_int_equal(k, 0); /* the tail first in its chunk */
                tails++;
                n_tails++;
            }
            if (sl->end == l) unit_of_sample[sl->sample] = (int)u;
        }
        assert_true(tails <= 1); /* InfiniPipe 3.1.1: no two tails share a chunk */
        assert_true(tokens <= a->t_m);            /* the token threshold */
        assert_true(time <= a->t_t * (1 + 1e-12)); /* the (perturbed) time threshold */
        if (u > 0) assert_true(ip->unit_class[u] <= ip->unit_class[u - 1]); /* longer first */
    }
    for (size_t i = 0; i < n; i++) assert_int_equal(next[i], len[i]);
    assert_int_equal(n_split, a->n_split);
    assert_int_equal(n_tails, a->n_hybrid + a->n_tail_alone);
    assert_int_equal(s.n_units, a->n_split + a->n_hybrid + a->n_tail_alone + a->n_batched);
    /* the packing of lines 3-16 equals the reference's: the same partition of the samples'
     * last slices into chunks, the same final T_t */
    ref_packing ref;
    ref_pack(cm, a, len, n, &ref);
    assert_int_equal(ref.perturbations, a->perturbations);
    assert_true(ref.t_t == a->t_t);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            assert_int_equal(ref.bucket_of[i] == ref.bucket_of[j], unit_of_sample[i] == unit_of_sample[j]);
    if (want_perturbation) {
        assert_true(a->perturbations > 0);
        assert_true(a->t_t > a->t_t0);
    }
    lt_schedule_free(&s);
    free(mem);
}

/* Long samples split along the mesh into split chunks and a tail; the short ones packed with
 * the tails (hybrid chunks) and with each other (batched) by lines 3-16, both thresholds
 * held; checked against a plain rewrite of the packing. */
static void test_alg1_splits_along_the_mesh_and_packs(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = paper_config(262144);
    lt_infinipipe *ip = state_of(&pc);
    const int64_t len[] = {200000, 150000, 120001, 60000, 30000, 16000, 9000, 8000, 4000, 3000, 2000, 2000,
                           1500,   1000,   700,    500,   300,   200,   100,  100,  64,   50,   20,   8};
    size_t n = sizeof len / sizeof len[0];
    const int ns[] = {1, 2, 4, 8};
    for (size_t k = 0; k < 4; k++) {
        check_chunking(ip, &ip->cms[0], len, n, ns[k], false);
        if (ns[k] == 1) assert_true(ip->alg1.n_batched >= 2 && ip->alg1.n_split == 0); /* no mesh: all packed */
    }
    check_chunking(ip, &ip->cms[1], len, n, 4, false); /* cp = 2 */
    /* the 200000-token sample with N = 4: four mesh slices, its tail the last one, alone or
     * hybrid; the 150000 one cut like it up to its tail */
    lt_schedule s;
    lt_error err;
    assert_int_equal(lt_schedule_init(&s, 4, 40, &err), LT_OK);
    uint32_t *mem = members_of(n);
    chunk_pipeline(ip, &ip->cms[0], mem, n, len, 4, &s);
    assert_true(ip->alg1.n_hybrid >= 1);
    assert_int_equal(s.slices[0].sample, 0); /* the longest first, mesh slice 0 */
    assert_int_equal(s.slices[0].end, ip->alg1.bounds[1]);
    assert_int_equal(ip->unit_class[0], 4);
    free(mem);
    lt_schedule_free(&s);
    lt_infinipipe_free(ip);
}

/* Line 16: a long sample whose tail is as slow as a mesh slice, and short samples that fit
 * its bucket's tokens but not its time: T_t is raised (and then held). */
static void test_alg1_perturbs_the_time_threshold(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = paper_config(262144);
    lt_infinipipe *ip = state_of(&pc);
    const int64_t len[] = {131072, 131072, 131072, 20000, 12000, 9000, 7000, 5000, 3000, 1000};
    check_chunking(ip, &ip->cms[0], len, sizeof len / sizeof len[0], 4, true);
    const int64_t len2[] = {65536, 3000, 2900, 2800, 2700, 2600, 2500, 2400, 2300, 2200, 2100, 2000};
    check_chunking(ip, &ip->cms[0], len2, sizeof len2 / sizeof len2[0], 8, true);
    lt_infinipipe_free(ip);
}

/* ---------------------------------------------------------------- Eq. 14 */

/* One pipeline's chunks (Alg. 1) and coefficients in s, ready for the grouping. */
static void prepare_pipeline(lt_infinipipe *ip, const lt_cost_model *cm, const int64_t *len, size_t n, int n_mesh,
                             lt_schedule *s) {
    lt_error err;
    if (lt_schedule_init(s, cm->pp, cm->model.layers, &err) != LT_OK) fail_msg("%s", err.what);
    uint32_t *mem = members_of(n);
    chunk_pipeline(ip, cm, mem, n, len, n_mesh, s);
    unit_coefficients(ip, cm, s);
    free(mem);
}

/* The most any stage's window needs with C = 0, over the stage's room (GiB), for the 1F1B
 * pipeline of all of s's units: how tight the memory is. */
static double worst_window_need(lt_infinipipe *ip, lt_schedule *s) {
    double saved[16];
    int pp = s->stages;
    for (int st = 0; st < pp; st++) {
        saved[st] = ip->stage_room[st];
        ip->stage_room[st] = 0;
    }
    clear_ops(s);
    lt_sched_seq1f1b(s, ip->ident, s->n_units);
    ckpt_rows(ip, s, 0, (uint32_t)s->n_units);
    double worst = 0;
    for (int r = 0; r < ip->rows.n_rows; r++) worst = ip->rows.need[r] > worst ? ip->rows.need[r] : worst;
    for (int st = 0; st < pp; st++) ip->stage_room[st] = saved[st];
    return worst;
}

/* Eq. 14's dynamic programme finds the grouping of least sum of delta + T_ckpt among all
 * groupings of the classes into consecutive 1F1B pipelines (brute force over the 2^(m-1)
 * compositions, T_ckpt priced by the same function), at several memory pressures; at the
 * tightest ones the optimum splits the pipeline. */
static void test_grouping_matches_brute_force(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = paper_config(262144);
    lt_infinipipe *ip = state_of(&pc);
    const lt_cost_model *cm = &ip->cms[0];
    const int64_t len[] = {240000, 200000, 150000, 90000, 40000, 20000, 8000, 6000, 3000, 1000, 500};
    size_t n = sizeof len / sizeof len[0];
    lt_schedule s;
    prepare_pipeline(ip, cm, len, n, 8, &s);
    double worst = worst_window_need(ip, &s);
    assert_true(worst > 0);
    size_t m = 0;
    size_t cs[64];
    for (size_t u = 0; u < s.n_units; u++)
        if (u == 0 || ip->unit_class[u] != ip->unit_class[u - 1]) cs[m++] = u;
    cs[m] = s.n_units;
    assert_true(m >= 4 && m <= 12);
    double delta = 0;
    for (size_t u = 0; u < s.n_units; u++) delta += ip->unit_fwd[u] + ip->unit_bwd[u];
    delta = (s.stages - 1) * delta / (double)s.n_units;
    const double fractions[] = {1.2, 0.8, 0.6, 0.45, 0.35, 0.25};
    int split = 0, feasible = 0;
    ip_pipe pipe;
    memset(&pipe, 0, sizeof pipe);
    for (size_t f = 0; f < sizeof fractions / sizeof fractions[0]; f++) {
        for (int st = 0; st < s.stages; st++) ip->stage_room[st] = fractions[f] * worst;
        /* brute force: every composition of the m classes */
        double best = INFINITY;
        for (unsigned mask = 0; mask < (1u << (m - 1)); mask++) {
            double cost = 0;
            size_t a = 0;
            for (size_t b = 1; b <= m && isfinite(cost); b++) {
                if (b < m && !(mask & (1u << (b - 1)))) continue;
                cost += delta + group_ckpt_time(ip, &s, (uint32_t)cs[a], (uint32_t)cs[b]);
                a = b;
            }
            if (cost < best) best = cost;
        }
        bool ok = group_sequences(ip, &s, &pipe);
        assert_int_equal(ok, isfinite(best));
        if (!ok) continue;
        feasible++;
        double got = 0;
        for (size_t g = 0; g < pipe.n_groups; g++) {
            assert_true(g == 0 || pipe.group_start[g] > pipe.group_start[g - 1]);
            got += delta + group_ckpt_time(ip, &s, (uint32_t)pipe.group_start[g], (uint32_t)pipe.group_start[g + 1]);
        }
        assert_int_equal(pipe.group_start[0], 0);
        assert_int_equal(pipe.group_start[pipe.n_groups], s.n_units);
        if (!(fabs(got - best) <= 1e-12 * best))
            fail_msg("room %.2f x: grouping costs %.9g, best %.9g", fractions[f], got, best);
        if (pipe.n_groups > 1) split++;
    }
    print_message("grouping: %d of 6 pressures feasible, %d split into several 1F1B pipelines\n", feasible, split);
    assert_true(feasible >= 3);
    assert_true(split >= 1);
    free(pipe.group_start);
    lt_schedule_free(&s);
    lt_infinipipe_free(ip);
}

/* ---------------------------------------------------------------- Alg. 2 */

/* A 4-layer model with llama-13b's width: pp 2 gives 2 layers per stage, so that every C of
 * a small pipeline can be enumerated. */
static const lt_model_shape four_layers = {"four", 4, 5120, 40, 40, 13824, 32000, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};

/* The rows again, from the op list (the windows of Eq. 7 read directly: after each F that
 * a B follows, the units forwarded and not backwarded on that stage), compared with
 * ckpt_rows'; then the least sum C over every C in [0, ub]^(n + pp - 1) satisfying them. */
static int brute_force_ckpt(lt_infinipipe *ip, const lt_schedule *s, double *best_x) {
    int pp = s->stages;
    size_t n = s->n_units;
    int nv = (int)n + pp - 1;
    int bpos[64];
    int nb = 0;
    for (size_t i = 0; i < s->stage[0].n; i++)
        if (s->stage[0].ops[i].kind == LT_OP_B) bpos[s->stage[0].ops[i].unit] = nb++;
    /* the windows' rows: (units, stage, need) */
    int win_units[256][64], win_n[256], win_stage[256];
    double win_need[256];
    int nw = 0;
    for (int st = 0; st < pp; st++) {
        bool in[64] = {false};
        for (size_t i = 0; i < s->stage[st].n; i++) {
            const lt_op *op = &s->stage[st].ops[i];
            if (op->kind == LT_OP_F) {
                in[op->unit] = true;
                continue;
            }
            if (i > 0 && s->stage[st].ops[i - 1].kind == LT_OP_F) {
                double need = -ip->stage_room[st], w = 0;
                win_n[nw] = 0;
                for (size_t u = 0; u < n; u++)
                    if (in[u]) {
                        need += ip->coef_i[(size_t)st * ip->cap_units + u];
                        double cw = ip->coef_w[(size_t)st * ip->cap_units + u];
                        w = cw > w ? cw : w;
                        win_units[nw][win_n[nw]++] = (int)u;
                    }
                need += w;
                if (need > IP_EPS) {
                    win_need[nw] = need;
                    win_stage[nw++] = st;
                    assert_true(nw < 256);
                }
            }
            in[op->unit] = false;
        }
    }
    assert_int_equal(nw, ip->rows.n_rows);
    for (int r = 0; r < nw; r++) {
        assert_true(fabs(win_need[r] - ip->rows.need[r]) <= 1e-12 * fabs(win_need[r]) + 1e-15);
        assert_int_equal(win_n[r], ip->rows.row_start[r + 1] - ip->rows.row_start[r]);
    }
    /* enumerate */
    int ub[64], x[64];
    long combos = 1;
    for (int v = 0; v < nv; v++) {
        ub[v] = (int)ip->rows.ub[v];
        combos *= ub[v] + 1;
        x[v] = 0;
    }
    assert_true(combos <= 2000000);
    int best = -1;
    for (long c = 0; c < combos; c++) {
        long k = c;
        int sum = 0;
        for (int v = 0; v < nv; v++) {
            x[v] = (int)(k % (ub[v] + 1));
            k /= ub[v] + 1;
            sum += x[v];
        }
        if (best >= 0 && sum >= best) continue;
        bool ok = true;
        for (int r = 0; r < nw && ok; r++) {
            double cover = 0;
            int st = win_stage[r];
            for (int q = 0; q < win_n[r]; q++) {
                int u = win_units[r][q];
                cover += ip->coef_f[(size_t)st * ip->cap_units + (size_t)u] * x[bpos[u] + pp - 1 - st];
            }
            ok = cover >= win_need[r] - IP_EPS;
        }
        if (ok) {
            best = sum;
            for (int v = 0; v < nv; v++) best_x[v] = x[v];
        }
    }
    return best;
}

/* Alg. 2 on tiny pipelines (n + d_p - 1 <= 8 variables of 0..2 layers): CBC's optimum equals
 * the least sum C of the enumeration, the greedy fallback is feasible and no better; and the
 * simulator, with CBC's recomputation applied, stays under the cap the rows were written for
 * (the rows are a conservative model of its memory). */
static void test_ckpt_milp_matches_brute_force(void **state) {
    (void)state;
    NEED_HW();
    const int64_t cases[][4] = {{60000, 30000, 0, 0}, {90000, 20000, 5000, 0}, {50000, 50000, 0, 0}};
    const int meshes[] = {3, 2, 2};
    const double pressures[] = {0.3, 0.55, 0.8};
    int solved = 0;
    for (size_t c = 0; c < 3; c++) {
        int64_t len[4];
        size_t n = 0;
        while (n < 4 && cases[c][n] > 0) {
            len[n] = cases[c][n];
            n++;
        }
        for (size_t pi = 0; pi < 3; pi++) {
            /* first with room for everything: the peak at C = 0 and at full recompute */
            lt_plan_config pc = config_for(&four_layers, 1, 2, 4, 131072, 1, 1000);
            lt_infinipipe *ip = state_of(&pc);
            lt_schedule s;
            prepare_pipeline(ip, &ip->cms[0], len, n, meshes[c], &s);
            assert_true(s.n_units + 1 <= 8);
            clear_ops(&s);
            lt_sched_seq1f1b(&s, ip->ident, s.n_units);
            lt_sim sim;
            memset(&sim, 0, sizeof sim);
            lt_sim_costs costs = lt_cost_sim_costs(&ip->cms[0]);
            lt_error err;
            if (lt_sim_run(&sim, &s, &costs, &err) != LT_OK) fail_msg("%s", err.what);
            double peak0 = lt_plan_max_peak(&sim);
            lt_plan_set_recompute(&s, 2);
            if (lt_sim_run(&sim, &s, &costs, &err) != LT_OK) fail_msg("%s", err.what);
            double peak_full = lt_plan_max_peak(&sim);
            assert_true(peak_full < peak0);
            lt_schedule_free(&s);
            lt_infinipipe_free(ip);
            /* then a cap between the two */
            pc.cm.mem_cap = peak_full + pressures[pi] * (peak0 - peak_full);
            ip = state_of(&pc);
            costs = lt_cost_sim_costs(&ip->cms[0]); /* the new state's model (the old one is freed) */
            prepare_pipeline(ip, &ip->cms[0], len, n, meshes[c], &s);
            clear_ops(&s);
            lt_sched_seq1f1b(&s, ip->ident, s.n_units);
            bool feasible = ckpt_rows(ip, &s, 0, (uint32_t)s.n_units);
            double bx[64];
            int best = brute_force_ckpt(ip, &s, bx);
            if (!feasible) {
                assert_int_equal(best, -1);
            } else {
                assert_true(best >= 0);
                reserve_x(ip, (size_t)ip->rows.n_vars);
                int greedy = ip->rows.n_rows ? ckpt_greedy(ip, ip->x) : 0;
                assert_true(greedy >= best);
                if (ip->rows.n_rows > 0) {
                    lt_milp_status ms;
                    bool has;
                    assert_int_equal(ckpt_cbc(ip, ip->x_cbc, &ms, &has, &err), LT_OK);
                    assert_int_equal(ms, LT_MILP_OPTIMAL);
                    assert_true(has);
                    double sum = 0;
                    for (int v = 0; v < ip->rows.n_vars; v++) sum += ip->x_cbc[v];
                    assert_int_equal((int)sum, best);
                    solved++;
                    apply_ckpt(ip, &s, 0, (uint32_t)s.n_units, ip->x_cbc);
                } else {
                    assert_int_equal(best, 0);
                    lt_plan_set_recompute(&s, 0);
                }
                if (lt_sim_run(&sim, &s, &costs, &err) != LT_OK) fail_msg("%s", err.what);
                assert_true(lt_plan_max_peak(&sim) <= pc.cm.mem_cap);
                /* F and B of a unit recompute the same layers on a stage */
                for (int st = 0; st < 2; st++) {
                    int rc[64];
                    for (size_t i = 0; i < s.stage[st].n; i++)
                        if (s.stage[st].ops[i].kind == LT_OP_F)
                            rc[s.stage[st].ops[i].unit] = s.stage[st].ops[i].recompute_layers;
                    for (size_t i = 0; i < s.stage[st].n; i++)
                        if (s.stage[st].ops[i].kind == LT_OP_B)
                            assert_int_equal(rc[s.stage[st].ops[i].unit], s.stage[st].ops[i].recompute_layers);
                }
            }
            lt_sim_free(&sim);
            lt_schedule_free(&s);
            lt_infinipipe_free(ip);
        }
    }
    print_message("MILP: %d instances solved by CBC, all at the enumerated optimum\n", solved);
    assert_true(solved >= 4);
}

/* CBC on rows that full recomputation cannot cover answers infeasible, and the greedy cover
 * says so too (ckpt_rows rules such groups out before any solve). */
static void test_ckpt_infeasible_rows(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = config_for(&four_layers, 1, 2, 4, 131072, 1, 1000);
    lt_infinipipe *ip = state_of(&pc);
    ip_rows *r = &ip->rows;
    rows_reserve(r, 3, 2, 4);
    r->n_vars = 3;
    r->n_rows = 2;
    r->ub[0] = r->ub[1] = r->ub[2] = 2;
    r->row_start[0] = 0;
    r->col[0] = 0, r->val[0] = 1.0, r->col[1] = 1, r->val[1] = 0.5;
    r->row_start[1] = 2;
    r->col[2] = 2, r->val[2] = 1.0, r->col[3] = 1, r->val[3] = 1.0;
    r->row_start[2] = 4;
    r->need[0] = 2.5; /* 1 x 2 + 0.5 x 2 = 3 >= 2.5: coverable */
    r->need[1] = 4.5; /* 2 + 2 = 4 < 4.5: not */
    reserve_x(ip, 3);
    assert_int_equal(ckpt_greedy(ip, ip->x), -1);
    lt_milp_status ms;
    bool has;
    lt_error err;
    assert_int_equal(ckpt_cbc(ip, ip->x_cbc, &ms, &has, &err), LT_OK);
    assert_int_equal(ms, LT_MILP_INFEASIBLE);
    assert_false(has);
    r->need[1] = 3.5; /* coverable now: row 1 needs x1 = x2 = 2, then row 0 x0 >= 1.5: the
                         optimum is (2, 2, 2), sum 6 */
    assert_int_equal(ckpt_cbc(ip, ip->x_cbc, &ms, &has, &err), LT_OK);
    assert_int_equal(ms, LT_MILP_OPTIMAL);
    assert_true(has);
    assert_true(ip->x_cbc[0] + ip->x_cbc[1] + ip->x_cbc[2] == 6);
    assert_int_equal(ckpt_greedy(ip, ip->x), 6);
    lt_infinipipe_free(ip);
}

/* ---------------------------------------------------------------- plan invariants */

/* Every invariant of an infinipipe plan of lengths[0..n) under pc. */
static void check_plan(const lt_plan_config *pc, uint64_t step, const int64_t *lengths, size_t n,
                       const lt_step_plan *plan) {
    const lt_cost_model *cm = &pc->cm;
    int pp = cm->pp;
    lt_error err;
    assert_int_equal(plan->step, step);
    assert_int_equal(plan->strategy, LT_STRATEGY_INFINIPIPE);
    assert_int_equal(plan->n_samples, n);
    assert_int_equal(plan->pp, pp);
    assert_int_equal(plan->runner_up, LT_STRATEGY_COUNT);
    assert_true(strcmp(plan->solver_status, "none") == 0 || strcmp(plan->solver_status, "optimal") == 0 ||
                strcmp(plan->solver_status, "feasible") == 0 || strcmp(plan->solver_status, "timeout") == 0);
    if (lt_plan_validate(plan, cm->mem_cap, &err) != LT_OK) fail_msg("lt_plan_validate: %s", err.what);
    int cp = (int)param_of(plan->params, "cp");
    assert_true(cp >= 1 && cp <= pc->max_cp && cm->dp % cp == 0);
    assert_true(param_of(plan->params, "n") >= 1);
    assert_true(param_of(plan->params, "groups") >= 1 || n == 0);
    long recompute = param_of(plan->params, "recompute");
    assert_true(recompute >= 0);
    assert_true(strlen(plan->params) < sizeof plan->params - 1);
    size_t n_ranks = (size_t)(cm->dp / cp);
    assert_int_equal(plan->n_ranks, n_ranks);
    lt_cost_model cmc = *cm;
    if (lt_cost_model_set_cp(&cmc, cp, &err) != LT_OK) fail_msg("%s", err.what);
    int64_t *next = calloc(n ? n : 1, sizeof *next);
    long any_recompute = 0;
    for (size_t r = 0; r < n_ranks; r++) {
        const lt_rank_plan *rp = &plan->ranks[r];
        const lt_schedule *s = &rp->sched;
        assert_int_equal(rp->dp_rank, (int)r * cp);
        assert_int_equal(rp->cp, cp);
        /* coverage: every sample's tokens once, in token order, on its pipeline */
        for (size_t j = 0; j < s->n_slices; j++) {
            const lt_slice *sl = &s->slices[j];
            assert_true(sl->sample >= 0 && (size_t)sl->sample < n);
            assert_int_equal(plan->sample_rank[sl->sample], (int)r);
            assert_int_equal(sl->begin, next[sl->sample]);
            next[sl->sample] = sl->end;
        }
        /* each unit F once and B once per stage, whole stages, F and B recomputing the same
         * layers, at most the stage's */
        int *f_rc = malloc((s->n_units ? s->n_units : 1) * sizeof *f_rc);
        int *seen = calloc(s->n_units ? 3 * s->n_units : 1, sizeof *seen);
        for (int st = 0; st < pp; st++) {
            uint32_t lb, le;
            lt_schedule_stage_layers(s->layers, pp, st, &lb, &le);
            memset(seen, 0, (s->n_units ? 3 * s->n_units : 1) * sizeof *seen);
            for (size_t i = 0; i < s->stage[st].n; i++) {
                const lt_op *op = &s->stage[st].ops[i];
                assert_int_equal(op->part, LT_PART_ALL);
                assert_int_equal(op->layer_begin, lb);
                assert_int_equal(op->layer_end, le);
                assert_true(op->recompute_layers <= le - lb);
                any_recompute += op->recompute_layers;
                if (op->kind == LT_OP_F) f_rc[op->unit] = op->recompute_layers;
                else assert_int_equal(f_rc[op->unit], op->recompute_layers); /* its F came first */
                seen[3 * op->unit + op->kind]++;
            }
            for (size_t v = 0; v < s->n_units; v++) {
                assert_int_equal(seen[3 * v + LT_OP_F], 1);
                assert_int_equal(seen[3 * v + LT_OP_B], 1);
                assert_int_equal(seen[3 * v + LT_OP_FK], 0);
            }
        }
        free(seen);
        free(f_rc);
        /* the predictions are the simulator's on this schedule with the cost model at cp */
        lt_sim sim;
        memset(&sim, 0, sizeof sim);
        lt_sim_costs costs = lt_cost_sim_costs(&cmc);
        if (lt_sim_run(&sim, s, &costs, &err) != LT_OK) fail_msg("re-simulating rank %zu: %s", r, err.what);
        assert_true(rp->time_s == sim.step_time);
        for (int st = 0; st < pp; st++) {
            assert_true(rp->stage_peak_mem[st] == sim.peak_mem[st]);
            assert_true(rp->stage_peak_mem[st] <= cm->mem_cap);
            assert_true(rp->stage_busy_s[st] == sim.busy[st]);
        }
        lt_sim_free(&sim);
    }
    for (size_t i = 0; i < n; i++) assert_int_equal(next[i], lengths[i]);
    if (recompute == 0) assert_true(any_recompute == 0 || param_of(plan->params, "raised") > 0);
    assert_true(plan->peak_mem <= cm->mem_cap);
    free(next);
}

static void assert_plans_equal(const lt_step_plan *a, const lt_step_plan *b) {
    assert_int_equal(a->n_samples, b->n_samples);
    assert_memory_equal(a->sample_rank, b->sample_rank, a->n_samples * sizeof *a->sample_rank);
    assert_int_equal(a->n_ranks, b->n_ranks);
    assert_memory_equal(&a->time_s, &b->time_s, sizeof a->time_s);
    assert_memory_equal(&a->peak_mem, &b->peak_mem, sizeof a->peak_mem);
    assert_memory_equal(&a->bubble_ratio, &b->bubble_ratio, sizeof a->bubble_ratio);
    assert_string_equal(a->params, b->params);
    assert_string_equal(a->solver_status, b->solver_status);
    for (size_t r = 0; r < a->n_ranks; r++) {
        const lt_schedule *x = &a->ranks[r].sched, *y = &b->ranks[r].sched;
        assert_int_equal(x->n_slices, y->n_slices);
        assert_int_equal(x->n_units, y->n_units);
        for (size_t j = 0; j < x->n_slices; j++) { /* (lt_slice has padding) */
            assert_int_equal(x->slices[j].sample, y->slices[j].sample);
            assert_int_equal(x->slices[j].begin, y->slices[j].begin);
            assert_int_equal(x->slices[j].end, y->slices[j].end);
        }
        assert_memory_equal(x->units, y->units, x->n_units * sizeof *x->units);
        for (int st = 0; st < a->pp; st++) {
            assert_int_equal(x->stage[st].n, y->stage[st].n);
            assert_memory_equal(x->stage[st].ops, y->stage[st].ops, x->stage[st].n * sizeof *x->stage[st].ops);
        }
        assert_memory_equal(a->ranks[r].ops, b->ranks[r].ops, lt_schedule_n_ops(x) * sizeof *a->ranks[r].ops);
    }
}

/* Two steps of every lengths file at 64K, 128K and 256K with the paper config: every
 * invariant, lt_plan_validate, and a second, fresh planner makes the same plan. */
static void test_invariants_on_every_corpus(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    const int64_t contexts[] = {65536, 131072, 262144};
    int64_t lengths[512];
    lt_step_plan a, b;
    lt_step_plan_init(&a);
    lt_step_plan_init(&b);
    int with_solves = 0, plans = 0;
    for (size_t c = 0; c < 3; c++) {
        lt_plan_config pc = paper_config(contexts[c]);
        lt_strategies *p1 = planner_of(&pc);
        for (size_t f = 0; f < sizeof corpora / sizeof corpora[0]; f++) {
            corpus_steps cs = open_steps(corpora[f], pc.context_len);
            for (uint64_t t = 0; t < 2; t++) {
                uint64_t step = t * 97 + c;
                lt_error err;
                if (lt_sampler_step_lengths(cs.sampler, step, lengths, &err) != LT_OK) fail_msg("%s", err.what);
                if (lt_strategies_plan_step(p1, LT_STRATEGY_INFINIPIPE, step, lengths, 512, &a, &err) != LT_OK)
                    fail_msg("%s, context %" PRId64 ", step %" PRIu64 ": %s", corpora[f], pc.context_len, step,
                             err.what);
                check_plan(&pc, step, lengths, 512, &a);
                plans++;
                if (strcmp(a.solver_status, "none") != 0) with_solves++;
                lt_strategies *p2 = planner_of(&pc);
                if (lt_strategies_plan_step(p2, LT_STRATEGY_INFINIPIPE, step, lengths, 512, &b, &err) != LT_OK)
                    fail_msg("second planner: %s", err.what);
                assert_plans_equal(&a, &b);
                lt_strategies_free(p2);
            }
            close_steps(&cs);
        }
        lt_strategies_free(p1);
    }
    print_message("%d plans, %d with CBC solves\n", plans, with_solves);
    lt_step_plan_free(&a);
    lt_step_plan_free(&b);
}

/* A step with 256K-token samples and no context parallelism (max_cp 1) needs recomputation:
 * with the default time limit CBC solves it; with 1e-9 s CBC times out (or returns its first
 * heuristic solution), the greedy cover is used, and the plan still fits. */
static void test_fallback_when_cbc_times_out(void **state) {
    (void)state;
    NEED_HW();
    int64_t lengths[64];
    for (size_t i = 0; i < 64; i++) lengths[i] = i < 8 ? 262144 - (int64_t)i * 1000 : 3000 + (int64_t)i * 100;
    lt_plan_config pc = config_for(lt_model_preset("llama-13b"), 8, 4, 4, 262144, 1, 80);
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_error err;
    lt_strategies *p = planner_of(&pc);
    if (lt_strategies_plan_step(p, LT_STRATEGY_INFINIPIPE, 5, lengths, 64, &plan, &err) != LT_OK)
        fail_msg("%s", err.what);
    check_plan(&pc, 5, lengths, 64, &plan);
    assert_true(param_of(plan.params, "recompute") > 0);
    assert_true(strcmp(plan.solver_status, "optimal") == 0 || strcmp(plan.solver_status, "feasible") == 0);
    lt_strategies_free(p);
    pc.milp_time_limit = 1e-9;
    p = planner_of(&pc);
    if (lt_strategies_plan_step(p, LT_STRATEGY_INFINIPIPE, 5, lengths, 64, &plan, &err) != LT_OK)
        fail_msg("%s", err.what);
    check_plan(&pc, 5, lengths, 64, &plan);
    print_message("with a 1e-9 s limit: %s, %s\n", plan.solver_status, plan.params);
    assert_true(strcmp(plan.solver_status, "timeout") == 0 || strcmp(plan.solver_status, "feasible") == 0);
    assert_true(param_of(plan.params, "recompute") > 0);
    lt_strategies_free(p);
    lt_step_plan_free(&plan);
}

/* plan.infinipipe_slices = N fixes N (capped by the pipeline's longest sample). */
static void test_fixed_slices(void **state) {
    (void)state;
    NEED_HW();
    int64_t lengths[40];
    for (size_t i = 0; i < 40; i++) lengths[i] = i < 4 ? 100000 : 2 + (int64_t)i * 37;
    lt_plan_config pc = paper_config(131072);
    pc.infinipipe_slices = 6;
    lt_strategies *p = planner_of(&pc);
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_error err;
    if (lt_strategies_plan_step(p, LT_STRATEGY_INFINIPIPE, 0, lengths, 40, &plan, &err) != LT_OK)
        fail_msg("%s", err.what);
    check_plan(&pc, 0, lengths, 40, &plan);
    const char *q = strstr(plan.params, " n=");
    assert_non_null(q);
    for (q += 3; *q && *q != ' '; q++) assert_true(*q == '6' || *q == '/');
    lt_strategies_free(p);
    lt_step_plan_free(&plan);
}

/* Nothing fits a 7 GiB cap (the model states and the reserve alone take about 7.7): the
 * memory error of every strategy (plan.h), the plan left empty. An empty step plans to
 * nothing. */
static void test_memory_error_and_empty_step(void **state) {
    (void)state;
    NEED_HW();
    int64_t lengths[16];
    for (size_t i = 0; i < 16; i++) lengths[i] = 30000 + (int64_t)i;
    lt_plan_config pc = paper_config(65536);
    pc.cm.mem_cap = 7 * GIB;
    lt_strategies *p = planner_of(&pc);
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_error err;
    assert_int_equal(lt_strategies_plan_step(p, LT_STRATEGY_INFINIPIPE, 3, lengths, 16, &plan, &err), LT_ERR_INPUT);
    unsigned long long st;
    size_t smp;
    long long tokens;
    int rank, stage;
    double need, cap;
    int got = sscanf(err.what,
                     "step %llu: sample %zu (%lld tokens) on DP rank %d needs %lf GiB on stage %d, over the %lf "
                     "GiB cap",
                     &st, &smp, &tokens, &rank, &need, &stage, &cap);
    if (got != 7) fail_msg("unexpected memory error: %s", err.what);
    assert_int_equal(st, 3);
    assert_true(smp < 16);
    assert_int_equal(tokens, lengths[smp]);
    assert_true(need > cap && cap == 7.0);
    assert_true(rank >= 0 && rank < 8 && stage >= 0 && stage < 4);
    assert_null(plan.ranks);
    lt_strategies_free(p);
    pc = paper_config(65536);
    p = planner_of(&pc);
    assert_int_equal(lt_strategies_plan_step(p, LT_STRATEGY_INFINIPIPE, 4, lengths, 0, &plan, &err), LT_OK);
    assert_true(plan.time_s >= 0);
    assert_string_equal(plan.solver_status, "none");
    lt_strategies_free(p);
    lt_step_plan_free(&plan);
}

static void test_name(void **state) {
    (void)state;
    lt_strategy s;
    assert_int_equal(lt_strategy_parse("infinipipe", "test", &s, NULL), LT_OK);
    assert_string_equal(lt_strategy_name(s), "infinipipe");
}

/* ---------------------------------------------------------------- bench */

static int bench(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s --bench LENGTHS_FILE STEPS [CONTEXT [MEM_GIB]]\n", argv[0]);
        return 2;
    }
    find_dirs();
    lt_error err;
    long steps = strtol(argv[3], NULL, 10);
    int64_t context = argc > 4 ? strtoll(argv[4], NULL, 10) : 262144;
    double mem = argc > 5 ? strtod(argv[5], NULL) : 80;
    if (steps < 1) steps = 1;
    lt_corpus *corpus = NULL;
    lt_sampler *sampler = NULL;
    if (!bench_sampler(argv[2], context, &corpus, &sampler)) return 1;
    lt_plan_config pc = config_for(lt_model_preset("llama-13b"), 8, 4, 4, context, 8, mem);
    lt_strategies *pl = NULL;
    if (lt_strategies_create(&pl, &pc, &err) != LT_OK) {
        fprintf(stderr, "planner: %s\n", err.what);
        return 1;
    }
    int64_t lengths[512];
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    double *ms = malloc((size_t)steps * sizeof *ms), total = 0, time_s = 0;
    long failed = 0;
    for (long t = 0; t < steps; t++) {
        if (lt_sampler_step_lengths(sampler, (uint64_t)t, lengths, &err) != LT_OK) return 1;
        double a = lt_test_now_ms();
        lt_status st = lt_strategies_plan_step(pl, LT_STRATEGY_INFINIPIPE, (uint64_t)t, lengths, 512, &plan, &err);
        ms[t] = lt_test_now_ms() - a;
        total += ms[t];
        if (st != LT_OK) {
            failed++;
            continue;
        }
        time_s += plan.time_s;
        if (getenv("BENCH_VERBOSE"))
            printf("step %ld: %.3f s, %s, %s, %.1f ms\n", t, plan.time_s, plan.params, plan.solver_status, ms[t]);
    }
    qsort(ms, (size_t)steps, sizeof *ms, lt_test_cmp_double);
    printf("infinipipe: %ld steps, context %" PRId64 ", mem %.0f GiB: planning median %.1f ms, mean %.1f ms, max %.1f "
           "ms; mean step time %.3f s; %ld failed\n",
           steps, context, mem, ms[steps / 2], total / (double)steps, ms[steps - 1],
           steps > failed ? time_s / (double)(steps - failed) : 0.0, failed);
    free(ms);
    lt_step_plan_free(&plan);
    lt_strategies_free(pl);
    lt_sampler_free(sampler);
    lt_corpus_free(corpus);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--bench") == 0) return bench(argc, argv);
    find_dirs();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name),
        cmocka_unit_test(test_mesh_slices_have_equal_backward_time),
        cmocka_unit_test(test_alg1_splits_along_the_mesh_and_packs),
        cmocka_unit_test(test_alg1_perturbs_the_time_threshold),
        cmocka_unit_test(test_grouping_matches_brute_force),
        cmocka_unit_test(test_ckpt_milp_matches_brute_force),
        cmocka_unit_test(test_ckpt_infeasible_rows),
        cmocka_unit_test(test_fixed_slices),
        cmocka_unit_test(test_memory_error_and_empty_step),
        cmocka_unit_test(test_fallback_when_cbc_times_out),
        cmocka_unit_test(test_invariants_on_every_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
