/*
 * plans/store/validate.h — checking plans against the invariants every strategy promises,
 * one plan (lt_plan_validate) or every step of a plan database (lt_store_validate, `planner
 * validate`), and printing one step for people (lt_plan_print, `planner show`).
 * Implemented in plans/store/validate.c over the store's public interface (store.h).
 */
#ifndef LT_STORE_VALIDATE_H
#define LT_STORE_VALIDATE_H

#include <stddef.h>
#include <stdio.h>

#include "lib/error.h"             /* lt_status, lt_error */
#include "plans/batches/sampler.h" /* lt_sample */
#include "plans/store/store.h"     /* lt_store, lt_store_check_rows */
#include "plans/strategies/plan.h" /* lt_step_plan */

/* Check one plan against the invariants every strategy promises; LT_ERR_INPUT naming the
 * step, pipeline, stage or sample and the rule broken:
 *   - coverage: for each pass (forward: the units of F/FK ops; backward: of B ops, the
 *     bunits over bslices of an asymmetric schedule), each sample's tokens [0, length) are
 *     covered exactly once by the slices of units that pass runs, on the pipeline
 *     sample_rank[] names, and no slice belongs to another step's sample (index <
 *     n_samples);
 *   - DP-Merge (SlimPack 4.1.1): merges by strictly increasing sample, each of 2 <= cp
 *     pipelines first_rank .. first_rank + cp - 1 within the step, sample_rank[sample] ==
 *     first_rank; a merged sample covered exactly once in each pass by every member, with
 *     the same slices on each, in units of cp == the group's cp, and by no other pipeline;
 *     a sample not merged in no unit of cp > 1 (cp 0 counts as 1);
 *   - solver_status one of none, optimal, feasible, timeout, infeasible;
 *   - slice order: lt_schedule_check (slices of a sample in token order, valid ranges);
 *   - every unit is forwarded and backwarded on every stage's layers exactly once (FK
 *     followed by a re-forward counts once), recompute_layers <= the op's layers; in an
 *     asymmetric schedule every unit forwarded and every bunit backwarded exactly once;
 *   - dependencies acyclic: lt_sim_run under lt_sim_unit_costs finds no deadlock;
 *   - memory: every stage_peak_mem <= mem_cap (naming the stage and the amount over);
 *   - predictions: finite, >= 0, finish >= start, a stage's ops in time order, time_s >=
 *     every op's finish.
 * Samples are named by their index in the step (the samples view's idx), pipelines by
 * index and dp_rank, units of the backward partition as "backward unit". mem_cap <= 0 (or
 * not finite): no memory check. WHERE is left empty (the caller knows the file). */
lt_status lt_plan_validate(const lt_step_plan *p, double mem_cap, lt_error *err);

/* lt_plan_validate on every stored step, plus the raw rows (lt_store_check_rows: per-pass
 * coverage over units_slices, DP-Merge groups and cp, step_summary totals equal to the
 * samples' sums; before each step's plan is
 * read, so a broken row is named as such; the op lists are checked by reading the step,
 * lt_store_get_step). mem_cap is the run's. Stops at the first fault;
 * *checked (may be NULL) counts the steps found valid before it.
 * progress (may be NULL) is called every 100 steps and at the end with (done, total). */
lt_status lt_store_validate(lt_store *st, void (*progress)(void *ctx, size_t done, size_t total), void *ctx,
                            size_t *checked, lt_error *err);

/* `planner show`: the step's summary (strategy, predicted time, bubble, peak memory, params,
 * solver status, "(a MILP fell back to its heuristic)" for timeout/infeasible, the runner-up
 * when set), its samples (index, sample id, length, pipeline, source), its DP-Merge groups
 * ("sample 17 (idx 3, 1048576 tokens): DP-Merge over DP ranks 0-3, cp=4 (pipelines 0-3)";
 * without samples "sample idx 3 (...)"), per pipeline its units (slices as
 * "idx[begin:end)", ", cp=G" for a DP-Merge unit; an asymmetric schedule's forward units as
 * "F unit", then its backward units as "B unit"), and an ASCII timeline per pipeline
 * (lt_sim_print_timeline of the stored predictions, `width` columns). Prints any plan the
 * reader accepts, valid or not. */
void lt_plan_print(FILE *f, const lt_step_plan *p, const lt_sample *samples, int width);

#endif /* LT_STORE_VALIDATE_H */
