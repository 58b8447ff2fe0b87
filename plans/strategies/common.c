/*
 * plans/strategies/common.c — the helpers every strategy shares (plans/strategies/internal.h, "shared
 * helpers"): recompute placement, simulation of a generated schedule, the step plan's
 * common fields and predictions, MILP options and solver bookkeeping.
 *
 * The strategies (plans/strategies/baselines.c's heuristics, plans/strategies/infinipipe.c, plans/strategies/slimpack.c)
 * depend down on this file; the registry in plans/strategies/baselines.c calls the strategies. Nothing
 * here knows a strategy.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/error.h"          /* lt_fail, lt_error_hint, lt_malloc_check */
#include "plans/schedule/sim.h" /* lt_sim_run */
#include "plans/strategies/internal.h"

#define GIB LT_GIB

double lt_plan_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double lt_plan_max_dp_sync(const lt_cost_model *cm) {
    double m = 0;
    for (int st = 0; st < cm->pp; st++) {
        double t = lt_cost_dp_sync_time(cm, st);
        if (t > m) m = t;
    }
    return m;
}

/* Layers of stage st under the uniform split (lt_schedule_stage_layers). */
static int stage_layers(const lt_schedule *s, int st) {
    uint32_t b, e;
    lt_schedule_stage_layers(s->layers, s->stages, st, &b, &e);
    return (int)(e - b);
}

int lt_plan_max_stage_layers(const lt_cost_model *cm) { return (cm->model.layers + cm->pp - 1) / cm->pp; }

void lt_plan_set_recompute(lt_schedule *s, int r) {
    for (int st = 0; st < s->stages; st++) {
        int n = stage_layers(s, st);
        uint16_t rc = (uint16_t)(r < n ? r : n);
        for (size_t i = 0; i < s->stage[st].n; i++) /* FK keeps no activations: nothing to recompute */
            s->stage[st].ops[i].recompute_layers = s->stage[st].ops[i].kind == LT_OP_FK ? 0 : rc;
    }
}

double lt_plan_max_peak(const lt_sim *sim) {
    double m = 0;
    for (int st = 0; st < sim->stages; st++)
        if (sim->peak_mem[st] > m) m = sim->peak_mem[st];
    return m;
}

lt_status lt_plan_simulate(lt_sim *sim, lt_cost_sim_ctx *ctx, const lt_cost_model *cm, const lt_schedule *s,
                           lt_sim_costs *costs_out, lt_error *err) {
    lt_sim_costs costs = lt_cost_sim_costs_prepared(ctx, cm, s);
    lt_status st = lt_sim_run(sim, s, &costs, err);
    if (st != LT_OK) {
        if (err) {
            err->status = LT_ERR_INTERNAL;
            lt_error_prefix(err, "planner: simulating a generated schedule: ");
        }
        return LT_ERR_INTERNAL;
    }
    if (costs_out) *costs_out = costs;
    return LT_OK;
}

/* ---------------------------------------------------------------- the step plan */

lt_status lt_plan_start(const lt_plan_config *pc, lt_step_plan *out, lt_strategy s, uint64_t step,
                        const int64_t *lengths, size_t n, size_t n_ranks, int cp, lt_error *err) {
    const lt_cost_model *cm = &pc->cm;
    out->step = step;
    out->strategy = s;
    out->n_samples = n;
    out->lengths = lt_malloc_check((n ? n : 1) * sizeof *out->lengths);
    if (n) memcpy(out->lengths, lengths, n * sizeof *lengths);
    out->n_predicted = lt_plan_predicted_tokens(lengths, n);
    out->sample_rank = lt_calloc_check(n ? n : 1, sizeof *out->sample_rank);
    out->pp = cm->pp;
    out->ranks = lt_calloc_check(n_ranks ? n_ranks : 1, sizeof *out->ranks);
    out->n_ranks = n_ranks;
    for (size_t r = 0; r < n_ranks; r++) {
        lt_rank_plan *rp = &out->ranks[r];
        rp->dp_rank = (int)r * cp;
        rp->cp = cp;
        lt_status st = lt_schedule_init(&rp->sched, cm->pp, cm->model.layers, err);
        if (st != LT_OK) return st;
    }
    snprintf(out->solver_status, sizeof out->solver_status, "none");
    out->runner_up = LT_STRATEGY_COUNT;
    out->runner_up_time_s = 0;
    return LT_OK;
}

lt_status lt_plan_finish_rank(lt_sim *sim, lt_cost_sim_ctx *ctx, const lt_cost_model *cm, lt_rank_plan *rp,
                              lt_error *err) {
    lt_sim_costs costs;
    lt_status st = lt_plan_simulate(sim, ctx, cm, &rp->sched, &costs, err);
    if (st != LT_OK) return st;
    int pp = rp->sched.stages;
    rp->ops = lt_malloc_check((sim->n_ops ? sim->n_ops : 1) * sizeof *rp->ops);
    for (int s = 0; s < pp; s++) {
        for (size_t i = 0; i < rp->sched.stage[s].n; i++) {
            size_t id = sim->first_op[s] + i;
            lt_op_cost c;
            memset(&c, 0, sizeof c);
            costs.op_cost(costs.ctx, &rp->sched, s, &rp->sched.stage[s].ops[i], &c);
            rp->ops[id] = (lt_plan_op){sim->start[id], sim->finish[id], c.act_bytes + c.kv_bytes + c.work_bytes};
        }
    }
    rp->time_s = sim->step_time;
    rp->stage_busy_s = lt_malloc_check((size_t)pp * sizeof *rp->stage_busy_s);
    rp->stage_peak_mem = lt_malloc_check((size_t)pp * sizeof *rp->stage_peak_mem);
    memcpy(rp->stage_busy_s, sim->busy, (size_t)pp * sizeof *rp->stage_busy_s);
    memcpy(rp->stage_peak_mem, sim->peak_mem, (size_t)pp * sizeof *rp->stage_peak_mem);
    return LT_OK;
}

/* Group g's joint times into its members' predictions (op start and finish, pipeline
 * time, stage peaks; busy time and op bytes do not depend on timing). */
static void keep_group_times(lt_step_plan *out, const lt_dp_merge *m, const lt_sim *sims) {
    for (int j = 0; j < m->cp; j++) {
        lt_rank_plan *rp = &out->ranks[m->first_rank + j];
        const lt_sim *sim = &sims[j];
        for (size_t id = 0; id < sim->n_ops; id++) {
            rp->ops[id].start_s = sim->start[id];
            rp->ops[id].finish_s = sim->finish[id];
        }
        rp->time_s = sim->step_time;
        memcpy(rp->stage_peak_mem, sim->peak_mem, (size_t)out->pp * sizeof *rp->stage_peak_mem);
    }
}

lt_status lt_plan_simulate_merges(lt_step_plan *out, const lt_cost_model *cm, lt_error *err) {
    lt_status st = LT_OK;
    for (size_t g = 0; g < out->n_merges && st == LT_OK; g++) {
        const lt_dp_merge *m = &out->merges[g];
        lt_sim *sims = lt_calloc_check((size_t)m->cp, sizeof *sims);
        lt_sim_costs *costs = lt_malloc_check((size_t)m->cp * sizeof *costs);
        for (int j = 0; j < m->cp; j++) costs[j] = lt_cost_sim_costs(cm);
        st = lt_plan_simulate_group(out, g, sims, costs, err);
        if (st == LT_OK) keep_group_times(out, m, sims);
        else if (err) { /* the members were generated by a strategy: its bug */
            err->status = LT_ERR_INTERNAL;
            lt_error_prefix(err, "planner: simulating a DP-Merge group: ");
            st = LT_ERR_INTERNAL;
        }
        for (int j = 0; j < m->cp; j++) lt_sim_free(&sims[j]);
        free(sims);
        free(costs);
    }
    return st;
}

/* The longest sample of pipeline r (the lowest index among equals), or SIZE_MAX. */
static size_t longest_sample_of(const lt_step_plan *out, size_t r) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < out->n_samples; i++)
        if ((size_t)out->sample_rank[i] == r && (best == SIZE_MAX || out->lengths[i] > out->lengths[best])) best = i;
    return best;
}

lt_status lt_plan_finish(const lt_plan_config *pc, lt_step_plan *out, double sync, lt_error *err) {
    double longest = 0, busy = 0, peak = 0;
    size_t worst_r = 0;
    int worst_s = 0;
    for (size_t r = 0; r < out->n_ranks; r++) {
        const lt_rank_plan *rp = &out->ranks[r];
        if (rp->time_s > longest) longest = rp->time_s;
        for (int s = 0; s < out->pp; s++) {
            busy += rp->stage_busy_s[s];
            if (rp->stage_peak_mem[s] > peak) {
                peak = rp->stage_peak_mem[s];
                worst_r = r;
                worst_s = s;
            }
        }
    }
    out->time_s = longest + sync;
    out->bubble_ratio = out->time_s > 0 ? 1.0 - busy / ((double)out->n_ranks * out->pp * out->time_s) : 0.0;
    out->peak_mem = peak;
    double cap = pc->cm.mem_cap;
    if (!(peak > cap)) return LT_OK;
    const lt_rank_plan *rp = &out->ranks[worst_r];
    size_t smp = longest_sample_of(out, worst_r);
    if (smp == SIZE_MAX)
        lt_fail(err, LT_ERR_INPUT, NULL,
                "step %" PRIu64 ": DP rank %d needs %.1f GiB on stage %d, over the %.1f GiB cap", out->step,
                rp->dp_rank, peak / GIB, worst_s, cap / GIB);
    else
        lt_fail(err, LT_ERR_INPUT, NULL,
                "step %" PRIu64 ": sample %zu (%" PRId64 " tokens) on DP rank %d needs %.1f GiB on stage %d, over the "
                "%.1f GiB cap",
                out->step, smp, out->lengths[smp], rp->dp_rank, peak / GIB, worst_s, cap / GIB);
    lt_error_hint(err, "raise plan.mem, parallel.pp or parallel.tp, or lower plan.context_len");
    return LT_ERR_INPUT;
}

lt_milp_options lt_plan_milp_options(const lt_plan_config *pc) {
    lt_milp_options o = {.time_limit_s = pc->milp_time_limit,
                         .rel_gap = pc->milp_gap,
                         .max_nodes = pc->milp_max_nodes,
                         .log = false};
    return o;
}

/* The order of lt_plan_note_solver: "none" < optimal < feasible < timeout < infeasible. */
static int solver_rank(const char *name) {
    static const char *const order[] = {"none", "optimal", "feasible", "timeout", "infeasible"};
    for (int i = 0; i < 5; i++)
        if (strcmp(name, order[i]) == 0) return i;
    return 0;
}

void lt_plan_note_solver(lt_step_plan *out, lt_milp_status st) {
    const char *name = st == LT_MILP_OPTIMAL || st == LT_MILP_FEASIBLE || st == LT_MILP_TIMEOUT
                           ? lt_milp_status_name(st)
                           : "infeasible";
    if (solver_rank(name) > solver_rank(out->solver_status))
        snprintf(out->solver_status, sizeof out->solver_status, "%s", name);
}

