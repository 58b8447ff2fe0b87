/*
 * tests/plans/test_exec_rules.c — the rules that make a plan executable (issue 16;
 * docs/plans-schema.md "Executing a plan"): the loss convention and denominator, recompute
 * placement (F/B agreement, FK = 0), the DP-Merge group rules; each on hand-built or
 * hand-broken plans, and on every strategy's plans over the shared length distributions.
 */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "plan_fixture.h"
#include "plans/schedule/deps.h"
#include "plans/schedule/sim.h"
#include "plans/store/validate.h" /* lt_plan_validate */

static void assert_contains(const char *text, const char *want) {
    if (!strstr(text, want)) fail_msg("\"%s\" does not contain \"%s\"", text, want);
}

static void plan_ok(lt_strategies *p, lt_strategy s, uint64_t step, const int64_t *len, size_t n, lt_step_plan *out) {
    lt_error err;
    if (lt_strategies_plan_step(p, s, step, len, n, out, &err) != LT_OK)
        fail_msg("%s step %" PRIu64 ": %s", lt_strategy_name(s), step, err.what);
}

static const char *validate_fail(const lt_step_plan *p) {
    static lt_error err;
    lt_error_clear(&err);
    assert_int_equal(lt_plan_validate(p, 0, &err), LT_ERR_INPUT);
    return err.what;
}

static void validate_ok(const lt_step_plan *p, double cap) {
    lt_error err;
    if (lt_plan_validate(p, cap, &err) != LT_OK) fail_msg("step %" PRIu64 ": %s", p->step, err.what);
}

/* ---------------------------------------------------------------- loss */

static void test_loss_convention(void **state) {
    (void)state;
    int64_t len[4] = {1, 5, 3, 2};
    assert_int_equal(lt_plan_predicted_tokens(len, 4), 0 + 4 + 2 + 1);
    assert_int_equal(lt_plan_predicted_tokens(NULL, 0), 0);
    /* a slice predicts one target per token but the sample's last */
    assert_int_equal(lt_slice_predicted_tokens(0, 4, 10), 4);  /* its last position predicts token 4 */
    assert_int_equal(lt_slice_predicted_tokens(4, 10, 10), 5); /* ends the sample */
    assert_int_equal(lt_slice_predicted_tokens(0, 1, 1), 0);
    /* the slices of a sample add up to the sample's L - 1, however it is cut */
    int64_t cuts[5] = {0, 3, 4, 9, 12}, sum = 0;
    for (int i = 0; i < 4; i++) sum += lt_slice_predicted_tokens(cuts[i], cuts[i + 1], 12);
    assert_int_equal(sum, 11);
    /* a document split into pieces of 6 and 6 (two samples) predicts 5 + 5, not 11: a piece's
     * last token does not predict the next piece's first */
    int64_t pieces[2] = {6, 6};
    assert_int_equal(lt_plan_predicted_tokens(pieces, 2), 10);
}

/* A plan with a wrong denominator, a B that disagrees with its F on recompute, an FK with
 * recompute: each refused, naming what. */
static void test_loss_and_recompute_refused(void **state) {
    (void)state;
    NEED_HW();
    lt_plan_config pc = config_of("llama-7b", 2, 2, 1, 32768, 2, 0);
    pc.strategy = LT_STRATEGY_CHUNKFLOW;
    pc.chunk_size = 4096;
    pc.chunkflow_k = 1;
    lt_strategies *p = planner_of(&pc);
    int64_t len[4] = {20000, 3000, 700, 9000};
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    plan_ok(p, LT_STRATEGY_MEGATRON, 3, len, 4, &plan);
    validate_ok(&plan, 0);
    assert_int_equal(plan.n_predicted, 19999 + 2999 + 699 + 8999);
    plan.n_predicted++;
    assert_contains(validate_fail(&plan), "loss denominator n_predicted is 32697, the samples give 32696");
    plan.n_predicted--;
    /* a B recomputing one layer more than its F kept inputs for */
    lt_schedule *s = &plan.ranks[0].sched;
    for (size_t i = 0; i < s->stage[1].n; i++) {
        if (s->stage[1].ops[i].kind == LT_OP_B) {
            s->stage[1].ops[i].recompute_layers = (uint16_t)(s->stage[1].ops[i].recompute_layers ? 0 : 1);
            break;
        }
    }
    const char *msg = validate_fail(&plan);
    assert_contains(msg, "step 3, pipeline 0 (dp_rank 0): stage 1: B");
    assert_contains(msg, "F and B must agree");

    /* chunkflow with K = 1 over a 20000-token sample in 4096 chunks: FK ops, all with R = 0 */
    plan_ok(p, LT_STRATEGY_CHUNKFLOW, 3, len, 4, &plan);
    validate_ok(&plan, 0);
    bool found = false;
    for (size_t r = 0; r < plan.n_ranks && !found; r++) {
        lt_schedule *c = &plan.ranks[r].sched;
        for (int g = 0; g < c->stages && !found; g++)
            for (size_t i = 0; i < c->stage[g].n && !found; i++)
                if (c->stage[g].ops[i].kind == LT_OP_FK) {
                    assert_int_equal(c->stage[g].ops[i].recompute_layers, 0);
                    c->stage[g].ops[i].recompute_layers = 1;
                    found = true;
                }
    }
    assert_true(found);
    assert_contains(validate_fail(&plan), "FK with recompute_layers 1 (FK keeps no activations: 0)");

    /* helixpipe: its attention parts never recompute (HelixPipe 4.4.1); one that does is refused */
    plan_ok(p, LT_STRATEGY_HELIXPIPE, 3, len, 4, &plan);
    validate_ok(&plan, 0);
    found = false;
    for (size_t r = 0; r < plan.n_ranks && !found; r++) {
        lt_schedule *c = &plan.ranks[r].sched;
        for (int g = 0; g < c->stages && !found; g++)
            for (size_t i = 0; i < c->stage[g].n && !found; i++)
                if (c->stage[g].ops[i].part == LT_PART_ATTN && c->stage[g].ops[i].kind == LT_OP_F) {
                    assert_int_equal(c->stage[g].ops[i].recompute_layers, 0);
                    c->stage[g].ops[i].recompute_layers = 1;
                    found = true;
                }
    }
    assert_true(found);
    assert_contains(validate_fail(&plan), "an attention part with recompute_layers 1 (HelixPipe recomputes without "
                                          "attention, 4.4.1: 0)");
    lt_step_plan_free(&plan);
    lt_strategies_free(p);
}

/* ---------------------------------------------------------------- every strategy */

/* Every strategy's plans of one step of every shared length file: valid (all executability
 * rules included), the denominator right, FK without recompute, every B agreeing with its
 * F (via the dependency API), and the in-order execution of the graph deadlock-free. */
static void test_every_strategy_on_every_corpus(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 65536, 8, 80);
    lt_strategies *p = planner_of(&pc);
    int64_t lengths[512];
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_sim sim = {0};
    lt_sim_costs uc = lt_sim_unit_costs();
    size_t plans = 0, merges = 0;
    for (size_t f = 0; f < sizeof corpora / sizeof corpora[0]; f++) {
        corpus_steps cs = open_steps(corpora[f], pc.context_len);
        uint64_t step = 11 + f;
        step_lengths(&cs, step, lengths);
        int64_t want = 0;
        for (size_t i = 0; i < 512; i++) want += lengths[i] - 1;
        for (int s = 0; s < LT_STRATEGY_AUTO; s++) {
            lt_error err;
            lt_status st = lt_strategies_plan_step(p, (lt_strategy)s, step, lengths, 512, &plan, &err);
            /* may not fit: gpipe (test_strategies), helixpipe (every stage holds the whole
             * model's states, as the trainer runs it) */
            if (st != LT_OK && (s == LT_STRATEGY_GPIPE || s == LT_STRATEGY_HELIXPIPE)) continue;
            if (st != LT_OK) fail_msg("%s %s: %s", corpora[f], lt_strategy_name((lt_strategy)s), err.what);
            validate_ok(&plan, pc.cm.mem_cap);
            assert_int_equal(plan.n_predicted, want);
            merges += plan.n_merges;
            for (size_t r = 0; r < plan.n_ranks; r++) {
                if (lt_sim_run(&sim, &plan.ranks[r].sched, &uc, &err) != LT_OK) fail_msg("%s", err.what);
                const lt_deps *d = lt_sim_deps(&sim);
                for (size_t v = 0; v < d->n_ops; v++) {
                    if (d->op[v]->kind == LT_OP_FK) assert_int_equal(d->op[v]->recompute_layers, 0);
                    size_t n;
                    const lt_dep *e = lt_deps_preds(d, v, &n);
                    for (size_t i = 0; i < n; i++) {
                        if (e[i].kind == LT_DEP_ACT)
                            assert_int_equal(d->op[e[i].op]->recompute_layers, d->op[v]->recompute_layers);
                        if (e[i].p2p) assert_int_not_equal(e[i].stage, d->stage[v]);
                    }
                }
            }
            plans++;
        }
        close_steps(&cs);
    }
    print_message("%zu plans, %zu DP-Merge groups\n", plans, merges);
    assert_true(plans >= 5 * 5);
    lt_sim_free(&sim);
    lt_step_plan_free(&plan);
    lt_strategies_free(p);
}

/* ---------------------------------------------------------------- DP-Merge */

/* A slimpack plan with DP-Merge groups is valid; a member that runs two merged ops in
 * another order, or two groups that share a pipeline, are refused naming the step and the
 * group. */
static void test_dp_merge_members_must_agree(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 131072, 8, 80);
    lt_strategies *pl = planner_of(&pc);
    int64_t lengths[512];
    corpus_steps cs = open_steps("github.txt", pc.context_len);
    step_lengths(&cs, 1, lengths);
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    plan_ok(pl, LT_STRATEGY_SLIMPACK, 1, lengths, 512, &plan);
    assert_true(plan.n_merges >= 1);
    validate_ok(&plan, pc.cm.mem_cap);
    /* swap the first two merged ops of stage 0 on the group's second member */
    const lt_dp_merge *m = &plan.merges[0];
    lt_schedule *s = &plan.ranks[m->first_rank + 1].sched;
    size_t first = SIZE_MAX, second = SIZE_MAX;
    for (size_t i = 0; i < s->stage[0].n && second == SIZE_MAX; i++) {
        const lt_unit *u = lt_schedule_op_unit(s, &s->stage[0].ops[i]);
        if (u->cp > 1 && s->stage[0].ops[i].kind == LT_OP_F) {
            if (first == SIZE_MAX)
                first = i;
            else
                second = i;
        }
    }
    assert_true(second != SIZE_MAX);
    lt_op t = s->stage[0].ops[first];
    s->stage[0].ops[first] = s->stage[0].ops[second];
    s->stage[0].ops[second] = t;
    char want[128];
    snprintf(want, sizeof want, "step 1: DP-Merge group of sample %d (pipelines %d..%d): on stage 0, merged op",
             m->sample, m->first_rank, m->first_rank + m->cp - 1);
    const char *msg = validate_fail(&plan);
    assert_contains(msg, want);
    assert_contains(msg, "members must run the same units in the same order");
    s->stage[0].ops[second] = s->stage[0].ops[first];
    s->stage[0].ops[first] = t;
    validate_ok(&plan, pc.cm.mem_cap);
    /* two groups over the same pipelines */
    if (plan.n_merges >= 2) {
        plan.merges[1].first_rank = plan.merges[0].first_rank;
        plan.sample_rank[plan.merges[1].sample] = plan.merges[0].first_rank;
        plan.merges[1].cp = plan.merges[0].cp;
        /* refused; the coverage rule (a merged sample on its group only) speaks first here,
         * the disjointness rule stands behind it for groups whose coverage is consistent */
        assert_contains(validate_fail(&plan), "DP-Merge group");
    } else {
        lt_dp_merge *grown = realloc(plan.merges, 2 * sizeof *grown);
        assert_non_null(grown);
        plan.merges = grown;
        int32_t other = plan.merges[0].sample == 0 ? 1 : 0;
        plan.merges[1] = plan.merges[0];
        plan.merges[1].sample = other;
        if (other < plan.merges[0].sample) {
            lt_dp_merge x = plan.merges[0];
            plan.merges[0] = plan.merges[1];
            plan.merges[1] = x;
        }
        plan.n_merges = 2;
        const char *why = validate_fail(&plan); /* refused by an earlier rule or by disjointness */
        assert_non_null(why);
    }
    lt_step_plan_free(&plan);
    close_steps(&cs);
    lt_strategies_free(pl);
}

/* ---------------------------------------------------------------- issue 16 points 4 and 6 */

/* The K/V tokens forward op f of s keeps, found by scanning (docs/cost-model.md, "Backward
 * cuts inside a slice"): a slice keeps its K/V when a later forward slice of its sample
 * exists, or when a backward unit starts strictly inside it. *interior counts the slices
 * kept for the second reason only. */
static double kept_kv_tokens(const lt_schedule *s, const lt_op *f, size_t *interior) {
    const lt_unit *u = lt_schedule_op_unit(s, f);
    double t = 0;
    for (uint32_t i = 0; i < u->n_slices; i++) {
        const lt_slice *x = &s->slices[u->first_slice + i];
        bool later = false, cut = false;
        for (size_t j = 0; j < s->n_slices; j++)
            later = later || (s->slices[j].sample == x->sample && s->slices[j].begin >= x->end);
        for (size_t j = 0; s->asym && j < s->n_bslices; j++)
            cut = cut || (s->bslices[j].sample == x->sample && s->bslices[j].begin > x->begin &&
                          s->bslices[j].begin < x->end);
        if (later || cut) t += (double)(x->end - x->begin);
        if (cut && !later) ++*interior;
    }
    return t;
}

/* Slimpack's plan of `step` under the lowest memory cap of 36, 32, ... 12 GiB it can plan
 * (the first step of a corpus whose cap forces recomputation); false when none. */
static bool plan_at_low_cap(const lt_plan_config *base, uint64_t step, const int64_t *lengths, lt_step_plan *out,
                            double *cap) {
    bool any = false;
    lt_step_plan trial;
    lt_step_plan_init(&trial);
    for (int gib = 36; gib >= 12; gib -= 4) {
        lt_plan_config pc = *base;
        pc.cm.mem_cap = gib * GIB;
        lt_strategies *p = planner_of(&pc);
        lt_error err;
        lt_status st = lt_strategies_plan_step(p, LT_STRATEGY_SLIMPACK, step, lengths, 512, &trial, &err);
        lt_strategies_free(p);
        if (st != LT_OK) break;
        lt_step_plan_free(out);
        *out = trial;
        lt_step_plan_init(&trial);
        *cap = pc.cm.mem_cap;
        any = true;
    }
    lt_step_plan_free(&trial);
    return any;
}

/* Point 4 on slimpack plans whose memory cap forces recomputation (the lowest of 36, 32 .. 12
 * GiB that plans), one step of every shared length file: every forward over whole layers
 * keeps exactly the K/V of its slices that a later forward or an interior backward cut
 * needs (priced as kv_bytes, within the op's stored bytes), some slices are kept for an
 * interior cut, recompute is on, and the plans are valid under their cap. */
static void test_slimpack_recompute_keeps_cut_kv(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 65536, 8, 80);
    int64_t lengths[512];
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    size_t interior_all = 0;
    for (size_t fi = 0; fi < sizeof corpora / sizeof corpora[0]; fi++) {
        corpus_steps cs = open_steps(corpora[fi], pc.context_len);
        step_lengths(&cs, 3 + fi, lengths);
        double cap = 0;
        if (!plan_at_low_cap(&pc, 3 + fi, lengths, &plan, &cap)) fail_msg("%s: no plan at 36 GiB", corpora[fi]);
        validate_ok(&plan, cap);
        size_t interior = 0, recomputed = 0;
        for (size_t r = 0; r < plan.n_ranks; r++) {
            const lt_rank_plan *rp = &plan.ranks[r];
            const lt_schedule *s = &rp->sched;
            size_t id = 0;
            for (int g = 0; g < s->stages; g++)
                for (size_t i = 0; i < s->stage[g].n; i++, id++) {
                    const lt_op *op = &s->stage[g].ops[i];
                    if (op->recompute_layers > 0) recomputed++;
                    if (op->kind != LT_OP_F || op->part != LT_PART_ALL) continue;
                    const lt_unit *u = lt_schedule_op_unit(s, op);
                    double g_cp = u->cp > 1 ? u->cp : 1;
                    double want = kept_kv_tokens(s, op, &interior) / g_cp * (op->layer_end - op->layer_begin) *
                                  lt_cost_kv_bytes_per_token(&pc.cm);
                    lt_op_estimate est;
                    lt_cost_schedule_op(&pc.cm, s, op, &est);
                    if (!(fabs(est.cost.kv_bytes - want) <= 1e-9 * want))
                        fail_msg("%s pipeline %zu stage %d op %zu: kv_bytes %.0f, want %.0f", corpora[fi], r, g, i,
                                 est.cost.kv_bytes, want);
                    assert_true(rp->ops[id].mem_bytes >= want);
                }
        }
        print_message("%s at %.0f GiB: %zu slices keep K/V for an interior backward cut, %zu ops recompute\n",
                      corpora[fi], cap / GIB, interior, recomputed);
        assert_true(recomputed > 0);
        interior_all += interior;
        close_steps(&cs);
    }
    assert_true(interior_all > 0);
    lt_step_plan_free(&plan);
}

/* Point 6 on slimpack plans of every shared length file (context 128K, where outliers are
 * DP-merged): every merged op starts at the same time on every member of its group; no op
 * starts earlier than when its pipeline is simulated alone (a rendezvous only waits), and a
 * member's predicted time is at least its time alone. Then a member's merged op moved by
 * 2 ns is refused, naming the step and the group. */
static void test_dp_merge_lockstep_times(void **state) {
    (void)state;
    NEED_HW();
    NEED_LENGTHS();
    lt_plan_config pc = config_of("llama-13b", 8, 4, 4, 131072, 8, 80);
    lt_strategies *p = planner_of(&pc);
    int64_t lengths[512];
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_sim alone = {0};
    lt_sim_costs costs = lt_cost_sim_costs(&pc.cm);
    lt_error err;
    size_t groups = 0, merged_ops = 0, delayed = 0;
    for (size_t fi = 0; fi < sizeof corpora / sizeof corpora[0]; fi++) {
        corpus_steps cs = open_steps(corpora[fi], pc.context_len);
        for (uint64_t step = 1; step <= 2; step++) {
            step_lengths(&cs, step, lengths);
            plan_ok(p, LT_STRATEGY_SLIMPACK, step, lengths, 512, &plan);
            validate_ok(&plan, pc.cm.mem_cap);
            for (size_t gi = 0; gi < plan.n_merges; gi++) {
                const lt_dp_merge *m = &plan.merges[gi];
                groups++;
                const lt_rank_plan *ref = &plan.ranks[m->first_rank];
                for (int j = 0; j < m->cp; j++) {
                    const lt_rank_plan *rp = &plan.ranks[m->first_rank + j];
                    assert_int_equal(lt_sim_run(&alone, &rp->sched, &costs, &err), LT_OK);
                    assert_true(rp->time_s >= alone.step_time * (1 - 1e-12));
                    for (size_t id = 0; id < alone.n_ops; id++) {
                        assert_true(rp->ops[id].start_s >= alone.start[id] * (1 - 1e-12));
                        if (rp->ops[id].start_s > alone.start[id] * (1 + 1e-9)) delayed++;
                    }
                    /* the k-th merged op of each stage: the same start as on the first member */
                    for (int g = 0; g < rp->sched.stages; g++) {
                        size_t a = 0, b = 0, ida = ref->sched.stage[g].n, idb = rp->sched.stage[g].n;
                        (void)ida, (void)idb;
                        size_t base_a = 0, base_b = 0;
                        for (int q = 0; q < g; q++) base_a += ref->sched.stage[q].n, base_b += rp->sched.stage[q].n;
                        for (;;) {
                            while (a < ref->sched.stage[g].n &&
                                   lt_schedule_op_unit(&ref->sched, &ref->sched.stage[g].ops[a])->cp <= 1)
                                a++;
                            while (b < rp->sched.stage[g].n &&
                                   lt_schedule_op_unit(&rp->sched, &rp->sched.stage[g].ops[b])->cp <= 1)
                                b++;
                            if (a >= ref->sched.stage[g].n || b >= rp->sched.stage[g].n) break;
                            assert_true(ref->ops[base_a + a].start_s == rp->ops[base_b + b].start_s);
                            if (j > 0) merged_ops++;
                            a++, b++;
                        }
                        assert_true(a >= ref->sched.stage[g].n && b >= rp->sched.stage[g].n);
                    }
                }
            }
        }
        close_steps(&cs);
    }
    print_message("%zu DP-Merge groups, %zu merged ops compared, %zu ops later than alone\n", groups, merged_ops,
                  delayed);
    assert_true(groups > 0 && merged_ops > 0);
    /* a member whose merged op starts 2 ns later than on the others */
    corpus_steps cs = open_steps("github.txt", pc.context_len);
    step_lengths(&cs, 1, lengths);
    plan_ok(p, LT_STRATEGY_SLIMPACK, 1, lengths, 512, &plan);
    assert_true(plan.n_merges >= 1);
    const lt_dp_merge *m = &plan.merges[0];
    lt_rank_plan *rp = &plan.ranks[m->first_rank + 1];
    size_t last = SIZE_MAX; /* the last merged op of the last stage: nothing after it on the stage */
    int pp = rp->sched.stages;
    size_t base = 0;
    for (int q = 0; q + 1 < pp; q++) base += rp->sched.stage[q].n;
    for (size_t i = 0; i < rp->sched.stage[pp - 1].n; i++)
        if (lt_schedule_op_unit(&rp->sched, &rp->sched.stage[pp - 1].ops[i])->cp > 1) last = i;
    assert_true(last != SIZE_MAX);
    rp->ops[base + last].start_s += 2e-9;
    char want[160];
    snprintf(want, sizeof want, "step 1: DP-Merge group of sample %d (pipelines %d..%d): on stage %d, merged op",
             m->sample, m->first_rank, m->first_rank + m->cp - 1, pp - 1);
    const char *msg = validate_fail(&plan);
    assert_contains(msg, want);
    assert_contains(msg, "it starts at once on every member");
    rp->ops[base + last].start_s -= 2e-9;
    validate_ok(&plan, pc.cm.mem_cap);
    close_steps(&cs);
    lt_sim_free(&alone);
    lt_step_plan_free(&plan);
    lt_strategies_free(p);
}

int main(void) {
    find_dirs();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_convention),
        cmocka_unit_test(test_loss_and_recompute_refused),
        cmocka_unit_test(test_every_strategy_on_every_corpus),
        cmocka_unit_test(test_dp_merge_members_must_agree),
        cmocka_unit_test(test_slimpack_recompute_keeps_cut_kv),
        cmocka_unit_test(test_dp_merge_lockstep_times),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
