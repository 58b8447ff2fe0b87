/*
 * plans/strategies/internal.h — what the strategy files share (internal to
 * plans/strategies/).
 *
 * baselines.c holds the planner (plans/strategies/plan.h: the dispatch) and the heuristic
 * strategies; the strategies with MILPs (infinipipe.c, slimpack.c) live in their own files
 * and plug in through the entry points at the end. The helpers they all use live in
 * common.c, below every strategy: baselines.c -> {infinipipe.c, slimpack.c} -> common.c,
 * no circle. Each keeps its scratch in its own state object, made with the planner and
 * reused from step to step (one planner per thread, so one state per thread).
 */
#ifndef LT_STRATEGY_INT_H
#define LT_STRATEGY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"               /* lt_status, lt_error */
#include "plans/cost/cost.h"         /* lt_cost_model, lt_cost_sim_ctx */
#include "plans/strategies/milp.h"   /* lt_milp_status, lt_milp_options */
#include "plans/strategies/packing.h" /* lt_packing */
#include "plans/strategies/plan.h"   /* lt_step_plan, lt_plan_config */
#include "plans/schedule/schedule.h" /* lt_schedule */
#include "plans/schedule/sim.h"      /* lt_sim */

#define LT_GIB 1073741824.0

/* ---------------------------------------------------------------- shared helpers (common.c) */

/* Milliseconds of CLOCK_MONOTONIC. */
double lt_plan_now_ms(void);

/* Max over stages of the gradient synchronisation of cm (plan.h: added to the step time). */
double lt_plan_max_dp_sync(const lt_cost_model *cm);

/* The most layers any stage has: ceil(layers / pp), "full recomputation". */
int lt_plan_max_stage_layers(const lt_cost_model *cm);

/* Recompute the first r layers of every F and B of every stage (Megatron's block method; an
 * op of a stage with fewer layers recomputes all of them); FK ops get 0 (they keep no
 * activations: the rule lt_plan_validate checks). */
void lt_plan_set_recompute(lt_schedule *s, int r);

/* Max over stages of sim's peak memory. */
double lt_plan_max_peak(const lt_sim *sim);

/* The common fields of a plan and n_ranks empty pipelines of cp DP ranks each (dp_rank =
 * r x cp), solver_status "none", no runner-up. */
lt_status lt_plan_start(const lt_plan_config *pc, lt_step_plan *out, lt_strategy s, uint64_t step,
                        const int64_t *lengths, size_t n, size_t n_ranks, int cp, lt_error *err);

/* Simulate s with cm in sim through ctx (lt_cost_sim_costs_prepared). A failure is a bug of
 * a generator: LT_ERR_INTERNAL with the simulator's message. *costs_out (may be NULL) gets
 * the cost table used. */
lt_status lt_plan_simulate(lt_sim *sim, lt_cost_sim_ctx *ctx, const lt_cost_model *cm, const lt_schedule *s,
                           lt_sim_costs *costs_out, lt_error *err);

/* Simulate pipeline rp's schedule and keep what the plan holds of it: every op's start,
 * finish and bytes (act + kv + work of its cost), the time, busy time and peak per stage. */
lt_status lt_plan_finish_rank(lt_sim *sim, lt_cost_sim_ctx *ctx, const lt_cost_model *cm, lt_rank_plan *rp,
                              lt_error *err);

/* Re-simulate every DP-Merge group of out jointly with cm (lt_plan_simulate_group: the
 * merged ops as rendezvous) and keep the joint times as its members' predictions, so a
 * merged op has one start on every member (issue 16 point 6). After lt_plan_finish_rank of
 * every member, before lt_plan_finish. A failure (a deadlock) is a generator's bug:
 * LT_ERR_INTERNAL naming the step and group. */
lt_status lt_plan_simulate_merges(lt_step_plan *out, const lt_cost_model *cm, lt_error *err);

/* The step's predictions (plan.h) from its pipelines plus `sync`, then the memory check:
 * LT_ERR_INPUT naming the pipeline with the highest stage peak over pc's cap, that stage,
 * and the pipeline's longest sample. */
lt_status lt_plan_finish(const lt_plan_config *pc, lt_step_plan *out, double sync, lt_error *err);

/* The MILP options of the config: time limit plan.milp_time_limit, gap plan.milp_gap, node
 * limit plan.milp_max_nodes, log off. */
lt_milp_options lt_plan_milp_options(const lt_plan_config *pc);

/* Record a CBC outcome in out->solver_status, keeping the worst seen this step in the order
 * none < optimal < feasible < timeout < infeasible (unbounded and error count as
 * infeasible: the fallback was used). */
void lt_plan_note_solver(lt_step_plan *out, lt_milp_status st);

/* ---------------------------------------------------------------- strategy entry points */

/* InfiniPipe (plans/strategies/infinipipe.c; InfiniPipe Sec. 3). */
typedef struct lt_infinipipe lt_infinipipe;
lt_status lt_infinipipe_create(lt_infinipipe **out, const lt_plan_config *pc, lt_error *err);
void lt_infinipipe_free(lt_infinipipe *ip); /* NULL-safe */
/* Plan a step (lengths validated by the caller, *out empty). Errors as lt_strategies_plan_step. */
lt_status lt_infinipipe_plan(lt_infinipipe *ip, uint64_t step, const int64_t *lengths, size_t n, lt_step_plan *out,
                             lt_error *err);

/* SlimPack (plans/strategies/slimpack.c; SlimPack Sec. 4). */
typedef struct lt_slimpack lt_slimpack;
lt_status lt_slimpack_create(lt_slimpack **out, const lt_plan_config *pc, lt_error *err);
void lt_slimpack_free(lt_slimpack *sp); /* NULL-safe */
/* cp: the pipelines' context-parallel degree (the baseline's tuned one: dp / cp pipelines of
 * cp DP ranks each); DP-Merge groups g pipelines, CP degree g x cp <= max_cp. */
lt_status lt_slimpack_plan(lt_slimpack *sp, uint64_t step, const int64_t *lengths, size_t n, int cp,
                           lt_step_plan *out, lt_error *err);

/* HelixPipe (plans/strategies/helixpipe.c; HelixPipe 4.2-4.4): with the planner's scratch
 * (sim, ctx, packing). Errors as lt_strategies_plan_step. */
lt_status lt_helixpipe_plan(const lt_plan_config *pc, lt_sim *sim, lt_cost_sim_ctx *ctx, lt_packing *pack,
                            uint64_t step, const int64_t *lengths, size_t n, lt_step_plan *out, lt_error *err);
/* Its micro-batch capacity for `loops` two-fold loops a pipeline: ceil(tokens / (dp x 2 pp x
 * loops)), at least the longest sample, at most context_len. */
int64_t lt_helixpipe_capacity(const int64_t *lengths, size_t n, int dp, int pp, int loops, int64_t context_len);

#endif /* LT_STRATEGY_INT_H */
