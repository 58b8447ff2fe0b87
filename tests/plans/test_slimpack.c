/*
 * tests/plans/test_slimpack.c — the slimpack strategy (plans/strategies/slimpack.c; SlimPack Sec. 4).
 *
 * Every check here is computed independently of plans/strategies/slimpack.c: coverage and order from
 * the plan's tables, FLOPs from the model's dimensions, the DP-Merge group size from the
 * rule of SlimPack 4.1.1 written out here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <cmocka.h>

#include "plans/schedule/schedule.h"
#include "tests/plans/plan_fixture.h"

/* The token ranges of sample x in one pass of rank plan rp (F: slices, B: bslices of an
 * asymmetric schedule), with the cp of their units: they must tile [0, len) exactly. */
static void check_cover(const lt_rank_plan *rp, int32_t x, int64_t len, bool backward, int want_cp) {
    const lt_schedule *s = &rp->sched;
    const lt_slice *tab = backward && s->asym ? s->bslices : s->slices;
    const lt_unit *units = backward && s->asym ? s->bunits : s->units;
    size_t nu = backward && s->asym ? s->n_bunits : s->n_units;
    int64_t covered = 0, next = 0;
    /* the slices of x in table order (token order, schedule.h) */
    size_t nt = backward && s->asym ? s->n_bslices : s->n_slices;
    for (size_t i = 0; i < nt; i++) {
        if (tab[i].sample != x) continue;
        if (tab[i].begin != next) fail_msg("sample %d %s: gap or overlap at token %" PRId64, x, backward ? "B" : "F", next);
        next = tab[i].end;
        covered += tab[i].end - tab[i].begin;
        /* its unit's cp */
        int cp = -1;
        for (size_t u = 0; u < nu; u++)
            if (i >= units[u].first_slice && i < units[u].first_slice + units[u].n_slices) {
                if (cp != -1) fail_msg("slice %zu in two units", i);
                cp = units[u].cp > 1 ? units[u].cp : 1;
            }
        if (cp != want_cp) fail_msg("sample %d: a unit of cp %d, want %d", x, cp, want_cp);
    }
    if (covered != len || next != len) fail_msg("sample %d %s: %" PRId64 " of %" PRId64 " tokens", x, backward ? "B" : "F", covered, len);
}

/* Does rank plan rp hold any token of sample x (either pass)? */
static bool holds(const lt_rank_plan *rp, int32_t x) {
    for (size_t i = 0; i < rp->sched.n_slices; i++)
        if (rp->sched.slices[i].sample == x) return true;
    for (size_t i = 0; i < rp->sched.n_bslices; i++)
        if (rp->sched.bslices[i].sample == x) return true;
    return false;
}

static double sample_flops(const lt_cost_model *cm, double T);

/* Every invariant of a slimpack plan. */
static void check_plan(const lt_plan_config *pc, const int64_t *len, size_t n, const lt_step_plan *plan) {
    const lt_cost_model *cm = &pc->cm;
    /* a group's reason against the FLOPs rule of SlimPack 4.1.1 written out here: 'flops'
     * exactly for a sample over a rank's capacity x (1 + margin), 'memory' for one under */
    double total = 0;
    for (size_t i = 0; i < n; i++) total += sample_flops(cm, (double)len[i]);
    double cap = total / cm->dp;
    assert_int_equal(plan->strategy, LT_STRATEGY_SLIMPACK);
    assert_int_equal(plan->n_ranks, (size_t)cm->dp);
    assert_true(strcmp(plan->solver_status, "none") == 0 || strcmp(plan->solver_status, "optimal") == 0 ||
                strcmp(plan->solver_status, "feasible") == 0 || strcmp(plan->solver_status, "timeout") == 0 ||
                strcmp(plan->solver_status, "infeasible") == 0);
    /* DP-Merge groups */
    int *group_of = malloc((n ? n : 1) * sizeof *group_of);
    for (size_t i = 0; i < n; i++) group_of[i] = -1;
    for (size_t g = 0; g < plan->n_merges; g++) {
        const lt_dp_merge *m = &plan->merges[g];
        assert_true(m->sample >= 0 && (size_t)m->sample < n);
        assert_true(m->cp >= 2 && m->cp <= pc->max_cp && m->first_rank + m->cp <= cm->dp);
        assert_int_equal(plan->sample_rank[m->sample], m->first_rank);
        assert_true(m->reason == LT_MERGE_FLOPS || m->reason == LT_MERGE_MEMORY);
        bool over = sample_flops(cm, (double)len[m->sample]) > cap * (1 + pc->dp_merge_margin);
        if (over != (m->reason == LT_MERGE_FLOPS))
            fail_msg("sample %d (%" PRId64 " tokens): reason %s, FLOPs %s the capacity", m->sample, len[m->sample],
                     m->reason == LT_MERGE_FLOPS ? "flops" : "memory", over ? "over" : "within");
        if (g > 0) assert_true(plan->merges[g - 1].sample < m->sample);
        group_of[m->sample] = (int)g;
    }
    for (size_t r = 0; r < plan->n_ranks; r++) {
        const lt_rank_plan *rp = &plan->ranks[r];
        const lt_schedule *s = &rp->sched;
        assert_int_equal(rp->dp_rank, (int)r);
        assert_int_equal(rp->cp, 1);
        if (s->n_units) assert_true(s->asym);
        /* every forward unit F once and every bunit B once on every stage, no FK */
        for (int st = 0; st < s->stages; st++) {
            unsigned char *f = calloc(s->n_units + 1, 1), *b = calloc(s->n_bunits + 1, 1);
            for (size_t i = 0; i < s->stage[st].n; i++) {
                const lt_op *op = &s->stage[st].ops[i];
                assert_true(op->kind == LT_OP_F || op->kind == LT_OP_B);
                if (op->kind == LT_OP_F) f[op->unit]++;
                else b[op->unit]++;
            }
            for (size_t u = 0; u < s->n_units; u++) assert_int_equal(f[u], 1);
            for (size_t u = 0; u < s->n_bunits; u++) assert_int_equal(b[u], 1);
            free(f);
            free(b);
            /* FILO within a sample: its B ops' bslices in execution order go down in tokens;
             * its F ops' slices go up */
            int64_t *lastb = malloc((n ? n : 1) * sizeof *lastb), *lastf = malloc((n ? n : 1) * sizeof *lastf);
            for (size_t i = 0; i < n; i++) lastb[i] = INT64_MAX, lastf[i] = -1;
            for (size_t i = 0; i < s->stage[st].n; i++) {
                const lt_op *op = &s->stage[st].ops[i];
                size_t k;
                const lt_slice *sl = lt_schedule_op_slices(s, op, &k);
                for (size_t j = 0; j < k; j++) {
                    int32_t x = sl[j].sample;
                    if (op->kind == LT_OP_B) {
                        if (!(sl[j].end <= lastb[x])) fail_msg("rank %zu stage %d: B of sample %d not FILO", r, st, x);
                        lastb[x] = sl[j].begin;
                    } else {
                        if (!(sl[j].begin >= lastf[x])) fail_msg("rank %zu stage %d: F of sample %d out of order", r, st, x);
                        lastf[x] = sl[j].end;
                    }
                }
            }
            free(lastb);
            free(lastf);
            assert_true(rp->stage_peak_mem[st] <= cm->mem_cap);
        }
    }
    /* coverage: a merged sample once per pass in every member (units of cp = g), nowhere
     * else; any other sample once per pass on its rank, nowhere else */
    for (size_t i = 0; i < n; i++) {
        int g = group_of[i];
        int first = g >= 0 ? plan->merges[g].first_rank : plan->sample_rank[i];
        int count = g >= 0 ? plan->merges[g].cp : 1;
        for (size_t r = 0; r < plan->n_ranks; r++) {
            bool member = (int)r >= first && (int)r < first + count;
            if (!member) {
                if (holds(&plan->ranks[r], (int32_t)i)) fail_msg("sample %zu on rank %zu, not its own", i, r);
                continue;
            }
            check_cover(&plan->ranks[r], (int32_t)i, len[i], false, count);
            check_cover(&plan->ranks[r], (int32_t)i, len[i], true, count);
        }
    }
    assert_true(plan->peak_mem <= cm->mem_cap);
    free(group_of);
}

static void assert_same_plan(const lt_step_plan *a, const lt_step_plan *b) {
    assert_true(a->time_s == b->time_s);
    assert_string_equal(a->params, b->params);
    assert_int_equal(a->n_merges, b->n_merges);
    for (size_t r = 0; r < a->n_ranks; r++) {
        const lt_schedule *x = &a->ranks[r].sched, *y = &b->ranks[r].sched;
        assert_int_equal(x->n_slices, y->n_slices);
        assert_int_equal(x->n_bslices, y->n_bslices);
        for (size_t i = 0; i < x->n_slices; i++) { /* field by field: lt_slice has padding */
            assert_int_equal(x->slices[i].sample, y->slices[i].sample);
            assert_int_equal(x->slices[i].begin, y->slices[i].begin);
            assert_int_equal(x->slices[i].end, y->slices[i].end);
        }
        for (size_t i = 0; i < x->n_bslices; i++) {
            assert_int_equal(x->bslices[i].sample, y->bslices[i].sample);
            assert_int_equal(x->bslices[i].begin, y->bslices[i].begin);
            assert_int_equal(x->bslices[i].end, y->bslices[i].end);
        }
    }
}

/* Two steps of every lengths file, two layouts: every invariant, and a fresh planner makes
 * the same plan. */
/* Steps planned per length file and config: 2; 1 under AddressSanitizer, where this test
 * program took about half of the sanitizer run (7.5 of 14.5 minutes in CI; the default
 * build plans both steps). */
#ifdef __SANITIZE_ADDRESS__
#define STEPS_PER_CORPUS 1
#else
#define STEPS_PER_CORPUS 2
#endif

static void test_invariants_on_every_corpus(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    lt_plan_config configs[2] = {config_of("llama-13b", 8, 4, 4, 65536, 8, 80),
                                    config_of("llama-7b", 2, 2, 1, 32768, 2, 0)};
    /* no time limit: a solve stopped by the clock depends on the machine's load, and the
     * plans must be compared as deterministic (docs/strategies.md) */
    configs[0].milp_time_limit = configs[1].milp_time_limit = 0;
    int64_t lengths[512];
    int reasons[2] = {0, 0}; /* groups by reason: flops, memory */
    lt_step_plan a, b;
    lt_step_plan_init(&a);
    lt_step_plan_init(&b);
    for (size_t c = 0; c < 2; c++) {
        for (size_t f = 0; f < sizeof corpora / sizeof corpora[0]; f++) {
            corpus_steps cs = open_steps(corpora[f], configs[c].context_len);
            for (uint64_t t = 0; t < STEPS_PER_CORPUS; t++) {
                uint64_t step = t * 97 + c;
                step_lengths(&cs, step, lengths);
                lt_strategies *p1 = planner_of(&configs[c]), *p2 = planner_of(&configs[c]);
                lt_error err;
                if (lt_strategies_plan_step(p1, LT_STRATEGY_SLIMPACK, step, lengths, 512, &a, &err) != LT_OK)
                    fail_msg("%s config %zu step %" PRIu64 ": %s", corpora[f], c, step, err.what);
                check_plan(&configs[c], lengths, 512, &a);
                for (size_t g = 0; g < a.n_merges; g++) reasons[a.merges[g].reason == LT_MERGE_MEMORY]++;
                if (lt_strategies_plan_step(p2, LT_STRATEGY_SLIMPACK, step, lengths, 512, &b, &err) != LT_OK)
                    fail_msg("second planner: %s", err.what);
                assert_same_plan(&a, &b);
                lt_strategies_free(p1);
                lt_strategies_free(p2);
            }
            close_steps(&cs);
        }
    }
    print_message("DP-Merge groups over all corpora and configs: %d flops, %d memory\n", reasons[0], reasons[1]);
    lt_step_plan_free(&a);
    lt_step_plan_free(&b);
}

/* Forward FLOPs of a whole sample from the model's dimensions (docs/cost-model.md): per
 * layer 2 T h (h + 2 kv) / t + 2 T (h h + 3 h f) / t + 2 h T^2 / t, plus the LM head 2 T h V / t. */
static double sample_flops(const lt_cost_model *cm, double T) {
    double h = cm->model.hidden, t = cm->tp, hd = h / cm->model.heads, f = cm->model.ffn;
    double kv = hd * cm->model.kv_heads; /* kv_heads >= tp in these presets */
    double m = cm->model.gated_ffn ? 3 : 2;
    double layer = 2 * T * h * (h + 2 * kv) / t + 2 * T * (h * h + m * h * f) / t + 2 * h * T * T / t;
    return cm->model.layers * layer + 2 * T * h * cm->model.vocab / t;
}

/* One 1M-token outlier among 511 short samples: a DP-Merge group of the smallest g with
 * f / g <= C (the per-rank capacity), whose members each cover the outlier once per pass
 * with units of CP degree g (each computes 1/g of every slice: together, once), and whose
 * other samples are nowhere else. */
static void test_dp_merge_of_a_1m_outlier(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 1048576, 8, 80);
    int64_t len[512];
    uint64_t x = 12345;
    double total = 0;
    for (size_t i = 0; i < 512; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        len[i] = i == 7 ? 1048576 : 500 + (int64_t)((x >> 33) % 7500);
        total += sample_flops(&pc.cm, (double)len[i]);
    }
    double cap = total / 8, f = sample_flops(&pc.cm, 1048576.0);
    int g = 2;
    while (g < 8 && f / g > cap) g++;
    lt_strategies *p = planner_of(&pc);
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_error err;
    if (lt_strategies_plan_step(p, LT_STRATEGY_SLIMPACK, 3, len, 512, &plan, &err) != LT_OK) fail_msg("%s", err.what);
    check_plan(&pc, len, 512, &plan);
    assert_int_equal(plan.n_merges, 1);
    assert_int_equal(plan.merges[0].sample, 7);
    assert_int_equal(plan.merges[0].cp, g);
    assert_int_equal(plan.merges[0].reason, LT_MERGE_FLOPS);
    print_message("1M outlier: DP-Merge over %d ranks (f / C = %.2f), predicted %.1f s, %s\n", g, f / cap,
                  plan.time_s, plan.params);
    /* the members' units of the outlier are the same slices in every member */
    int first = plan.merges[0].first_rank;
    for (int k = 1; k < g; k++) {
        const lt_schedule *a = &plan.ranks[first].sched, *b = &plan.ranks[first + k].sched;
        size_t na = 0, nb = 0;
        for (size_t i = 0; i < a->n_slices; i++) na += a->slices[i].sample == 7;
        for (size_t i = 0; i < b->n_slices; i++) nb += b->slices[i].sample == 7;
        assert_int_equal(na, nb);
        for (size_t i = 0, j = 0; i < a->n_slices; i++) {
            if (a->slices[i].sample != 7) continue;
            while (b->slices[j].sample != 7) j++;
            assert_int_equal(a->slices[i].begin, b->slices[j].begin);
            assert_int_equal(a->slices[i].end, b->slices[j].end);
            j++;
        }
    }
    /* without the outlier nothing merges: DP-Merge is for real outliers only */
    len[7] = 4000;
    if (lt_strategies_plan_step(p, LT_STRATEGY_SLIMPACK, 3, len, 512, &plan, &err) != LT_OK) fail_msg("%s", err.what);
    check_plan(&pc, len, 512, &plan);
    assert_int_equal(plan.n_merges, 0);
    lt_step_plan_free(&plan);
    lt_strategies_free(p);
}

/* The largest recompute depth of any op of rank plan rp. */
static int max_recompute(const lt_rank_plan *rp) {
    int d = 0;
    for (int st = 0; st < rp->sched.stages; st++)
        for (size_t i = 0; i < rp->sched.stage[st].n; i++)
            if (rp->sched.stage[st].ops[i].recompute_layers > d) d = rp->sched.stage[st].ops[i].recompute_layers;
    return d;
}

/* A memory-only outlier (issue 21): a 200K-token sample among 511 of 16K-48K tokens is no
 * FLOPs outlier (its forward FLOPs are under a rank's capacity, checked here from the
 * model's dimensions), but one rank cannot hold its activations at 80 GiB without
 * recomputing. The plan spreads it over a DP-Merge group with reason 'memory' whose ranks
 * recompute nothing; with the memory trigger off (FLOPs outliers only, as before) the same
 * batch has no group and the outlier's rank recomputes, and its predicted step is slower. */
static void test_dp_merge_of_a_memory_outlier(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 262144, 8, 80);
    enum { N = 4096 };
    static int64_t len[N];
    uint64_t x = 777;
    double total = 0;
    for (size_t i = 0; i < N; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        len[i] = i == 11 ? 204800 : 1024 + (int64_t)((x >> 33) % 3072);
        total += sample_flops(&pc.cm, (double)len[i]);
    }
    double cap = total / 8, f = sample_flops(&pc.cm, 204800.0);
    assert_true(f < cap * (1 + pc.dp_merge_margin)); /* not a FLOPs outlier */
    lt_strategies *p = planner_of(&pc);
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_error err;
    if (lt_strategies_plan_step(p, LT_STRATEGY_SLIMPACK, 4, len, N, &plan, &err) != LT_OK) fail_msg("%s", err.what);
    check_plan(&pc, len, N, &plan);
    print_message("memory outlier (f / C = %.2f): %zu group(s), predicted %.2f s, %s\n", f / cap, plan.n_merges,
                  plan.time_s, plan.params);
    assert_int_equal(plan.n_merges, 1);
    const lt_dp_merge *m = &plan.merges[0];
    assert_int_equal(m->sample, 11);
    assert_int_equal(m->reason, LT_MERGE_MEMORY);
    for (int k = 0; k < m->cp; k++) {
        print_message("  member %d (pipeline %d): recompute %d\n", k, m->first_rank + k,
                      max_recompute(&plan.ranks[m->first_rank + k]));
        assert_int_equal(max_recompute(&plan.ranks[m->first_rank + k]), 0);
    }
    double with = plan.time_s;
    lt_strategies_free(p);
    /* the FLOPs trigger alone: no group, the outlier's rank recomputes */
    pc.no_memory_merge = true;
    p = planner_of(&pc);
    if (lt_strategies_plan_step(p, LT_STRATEGY_SLIMPACK, 4, len, N, &plan, &err) != LT_OK) fail_msg("%s", err.what);
    check_plan(&pc, len, N, &plan);
    print_message("FLOPs trigger only: %zu group(s), predicted %.2f s, %s; outlier's rank recomputes %d\n",
                  plan.n_merges, plan.time_s, plan.params, max_recompute(&plan.ranks[plan.sample_rank[11]]));
    assert_int_equal(plan.n_merges, 0);
    assert_true(max_recompute(&plan.ranks[plan.sample_rank[11]]) > 0);
    assert_true(with < plan.time_s);
    lt_step_plan_free(&plan);
    lt_strategies_free(p);
}

/* Backward FLOPs of tokens [b, e) of a sample, per layer, from the dimensions (2x GEMMs,
 * 2.5x attention). */
static double bwd_flops(const lt_cost_model *cm, double b, double e) {
    double h = cm->model.hidden, t = cm->tp, hd = h / cm->model.heads, f = cm->model.ffn;
    double kv = hd * cm->model.kv_heads, m = cm->model.gated_ffn ? 3 : 2;
    double lin = 2 * h * (h + 2 * kv) / t + 2 * (h * h + m * h * f) / t;
    return 2 * lin * (e - b) + 2.5 * 2 * h * (e * e - b * b) / t;
}

static double cv(const double *v, size_t n) {
    double s = 0, q = 0;
    for (size_t i = 0; i < n; i++) s += v[i];
    double mean = s / n;
    for (size_t i = 0; i < n; i++) q += (v[i] - mean) * (v[i] - mean);
    return sqrt(q / n) / mean;
}

/* The asymmetric partition: the backward MicroPacks cut where the forward ones do not, and
 * balance backward FLOPs better than the forward packs would (SlimPack 4.1.2). */
static void test_asymmetric_backward_partition(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = config_of("llama-7b", 1, 2, 1, 65536, 1, 0);
    pc.micropacks = 8;
    int64_t len[6] = {60000, 9000, 5000, 3000, 2000, 1000};
    lt_strategies *p = planner_of(&pc);
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_error err;
    if (lt_strategies_plan_step(p, LT_STRATEGY_SLIMPACK, 0, len, 6, &plan, &err) != LT_OK) fail_msg("%s", err.what);
    check_plan(&pc, len, 6, &plan);
    const lt_schedule *s = &plan.ranks[0].sched;
    assert_int_equal(s->n_units, 8);
    assert_int_equal(s->n_bunits, 8);
    /* some backward cut is not a forward cut */
    bool differs = false;
    for (size_t i = 0; i < s->n_bslices; i++) {
        bool found = false;
        for (size_t j = 0; j < s->n_slices; j++)
            found |= s->slices[j].sample == s->bslices[i].sample && s->slices[j].begin == s->bslices[i].begin;
        differs |= !found;
    }
    assert_true(differs);
    /* backward FLOPs per bunit vs per forward unit */
    double fb[8], bb[8];
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t u = 0; u < 8; u++) {
            const lt_unit *un = pass ? &s->bunits[u] : &s->units[u];
            const lt_slice *tab = pass ? s->bslices : s->slices;
            double v = 0;
            for (uint32_t k = 0; k < un->n_slices; k++)
                v += bwd_flops(&pc.cm, (double)tab[un->first_slice + k].begin, (double)tab[un->first_slice + k].end);
            (pass ? bb : fb)[u] = v;
        }
    print_message("CV of backward FLOPs: forward packs %.3f, backward packs %.3f\n", cv(fb, 8), cv(bb, 8));
    assert_true(cv(bb, 8) < 0.02);
    assert_true(cv(bb, 8) < cv(fb, 8) / 2);
    lt_step_plan_free(&plan);
    lt_strategies_free(p);
}

/* A time limit too short for CBC: the step says so and the fallback plan is complete. */
static void test_solver_fallback(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 65536, 8, 80);
    int64_t lengths[512];
    corpus_steps cs = open_steps("commoncrawl.txt", pc.context_len);
    step_lengths(&cs, 5, lengths);
    close_steps(&cs);
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_error err;
    lt_strategies *p = planner_of(&pc);
    if (lt_strategies_plan_step(p, LT_STRATEGY_SLIMPACK, 5, lengths, 512, &plan, &err) != LT_OK) fail_msg("%s", err.what);
    assert_true(strcmp(plan.solver_status, "optimal") == 0 || strcmp(plan.solver_status, "feasible") == 0);
    lt_strategies_free(p);
    pc.milp_time_limit = 1e-9;
    p = planner_of(&pc);
    if (lt_strategies_plan_step(p, LT_STRATEGY_SLIMPACK, 5, lengths, 512, &plan, &err) != LT_OK) fail_msg("%s", err.what);
    print_message("time limit 1e-9 s: solver_status %s\n", plan.solver_status);
    assert_string_equal(plan.solver_status, "timeout");
    check_plan(&pc, lengths, 512, &plan);
    lt_step_plan_free(&plan);
    lt_strategies_free(p);
}

int main(void) {
    find_dirs();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_asymmetric_backward_partition),
        cmocka_unit_test(test_dp_merge_of_a_1m_outlier),
        cmocka_unit_test(test_dp_merge_of_a_memory_outlier),
        cmocka_unit_test(test_solver_fallback),
        cmocka_unit_test(test_invariants_on_every_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
