/*
 * plans/batches/steps.h — plan many steps on several threads, delivered in step order.
 *
 * `planner build` and `planner compare` both sample steps (plans/batches/sampler.h) and plan each
 * with one or more strategies (plans/strategies/plan.h). lt_plan_steps runs that on `threads` worker
 * threads, each with its own sampler and planners over the shared corpus (both are
 * deterministic, so the plans do not depend on the thread count), and hands the results to
 * a callback on the calling thread in the order of `steps[]`. A bounded window (4 steps per
 * thread) keeps memory flat however many steps there are.
 *
 * Errors: a strategy failing on a step (e.g. over the memory cap) is not an error of
 * lt_plan_steps: the callback gets that strategy's status and message and decides. When
 * the callback returns non-LT_OK, the workers stop and lt_plan_steps returns that status
 * (its err filled by the callback). Setup failures (sampler, planner) return at once.
 */
#ifndef LT_STEPS_H
#define LT_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"             /* lt_status, lt_error */
#include "plans/strategies/plan.h" /* lt_plan_config, lt_step_plan, lt_strategy */
#include "plans/batches/sampler.h" /* lt_corpus, lt_sampler_config, lt_sample */

/* One planned step: for strategy k of the request, status[k] and, when LT_OK, plans[k]
 * (else errors[k] says why). samples[0..n_samples) are the step's samples. Everything is
 * owned by lt_plan_steps and valid only during the callback. */
typedef struct lt_planned_step {
    uint64_t step;
    size_t index;             /* position in steps[] */
    size_t n_samples;
    const lt_sample *samples;
    const lt_status *status;  /* [n_strategies] */
    const lt_error *errors;   /* [n_strategies] */
    lt_step_plan *plans;      /* [n_strategies]; the callback may modify them */
} lt_planned_step;

typedef lt_status (*lt_step_callback)(void *ctx, const lt_planned_step *ps, lt_error *err);

/* Plan steps[0..n_steps) with strategies[0..n_strategies) (n_strategies >= 1), on `threads`
 * threads (<= 0: one per CPU the process may use; 1: on the calling thread), calling cb for
 * each step in order. */
lt_status lt_plan_steps(const lt_corpus *corpus, const lt_sampler_config *sc, const lt_plan_config *pc,
                        const lt_strategy *strategies, size_t n_strategies, const uint64_t *steps, size_t n_steps,
                        int threads, lt_step_callback cb, void *cb_ctx, lt_error *err);

/* The threads lt_plan_steps uses for `threads` (resolves <= 0 to the CPU count). */
int lt_plan_steps_threads(int threads);

#endif /* LT_STEPS_H */
