/*
 * train/model/optim.h — the optimizer of the trainer: AdamW (decoupled weight decay) over the
 * model's one contiguous parameter buffer, the learning-rate schedule (linear warm-up,
 * then cosine decay to min_lr) and global gradient-norm clipping.
 *
 * Reference semantics (what tests/train/torch_parity.py compares against):
 *   - lt_clip_grads is torch.nn.utils.clip_grad_norm_(params, max_norm): the global L2 norm
 *     of all gradients, coef = max_norm / (norm + 1e-6), gradients scaled by coef when it
 *     is below 1. The norm is accumulated in double (torch accumulates per tensor in float
 *     and then takes the norm of the norms: the two agree to float rounding).
 *   - lt_adamw_step is torch.optim.AdamW (single-tensor CPU path, amsgrad=False,
 *     maximize=False) applied with TWO parameter groups: weight_decay on every matrix
 *     (tensor rows > 1: projections, embedding, LM head) and 0 on the norm weights
 *     (rows == 1). Per element, in float, in torch's order:
 *         p = p * (float)(1 - lr wd)                         (decay before the update)
 *         m = lerp(m, g, (float)(1 - beta1))                 (torch's lerp_, see optim.c)
 *         v = v * (float)beta2 + (float)(1 - beta2) * g * g
 *         denom = sqrt(v) / (float)sqrt(1 - beta2^t) + (float)eps
 *         p = p + (float)(-lr / (1 - beta1^t)) * m / denom
 *     with t incremented before use (the first step has t = 1). The scalar factors are
 *     computed in double and rounded once to float, as PyTorch does with Python floats.
 *   - lt_lr_at(step) with a 0-based step: warm-up lr * (step + 1) / warmup for
 *     step < warmup, then cosine from lr to min_lr over [warmup, total_steps):
 *         progress = clamp((step - warmup) / max(1, total - warmup), 0, 1)
 *         lr_t = min_lr + 0.5 (lr - min_lr) (1 + cos(pi progress))
 *     (llm.c's get_learning_rate, with nanoGPT's min_lr floor).
 *
 * Memory: lt_adamw owns its two moment buffers (n floats each, the parameter layout, so
 * lt_llama_views_of maps them to named tensors). Thread-safety: none needed; one
 * optimizer per process (each rank steps its own copy of the parameters).
 */
#ifndef LT_TRAIN_OPTIM_H
#define LT_TRAIN_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/config.h"        /* lt_config */
#include "lib/error.h"         /* lt_status, lt_error */
#include "train/model/model.h" /* lt_llama (its tensor table picks the decayed tensors) */

/* Optimizer and schedule settings ([train] section, docs/config.md). */
typedef struct lt_optim_config {
    double lr;            /* peak learning rate (train.lr) */
    double min_lr;        /* end of the cosine decay (train.min_lr) */
    double weight_decay;  /* decoupled decay of matrices (train.weight_decay) */
    double beta1, beta2;  /* moment decays (train.beta1, train.beta2) */
    double eps;           /* added to sqrt(v_hat) (train.adam_eps) */
    double grad_clip;     /* global-norm clip; 0 = off (train.grad_clip) */
    int64_t warmup_steps; /* train.warmup_steps */
    int64_t total_steps;  /* train.steps, else plan.steps, else 1000 */
} lt_optim_config;

/* Read the [train] keys lr, min_lr, warmup_steps, weight_decay, grad_clip, beta1, beta2,
 * adam_eps and steps (unset: plan.steps; both unset: 1000). Values were range-checked by
 * the config schema; min_lr > lr is an LT_ERR_CONFIG naming both keys. */
lt_status lt_optim_config_from(const lt_config *cfg, lt_optim_config *oc, lt_error *err);

/* Learning rate of 0-based optimizer step `step` (formula above). */
double lt_lr_at(const lt_optim_config *oc, int64_t step);

/* AdamW state: the first and second moments of every parameter, and the step count t
 * (the number of updates applied so far). */
typedef struct lt_adamw {
    size_t n;
    float *m, *v; /* [n] each */
    int64_t t;
} lt_adamw;

/* Allocate zeroed moments for n parameters, t = 0. Errors: LT_ERR_NOMEM. */
lt_status lt_adamw_init(lt_adamw *o, size_t n, lt_error *err);
void lt_adamw_free(lt_adamw *o); /* NULL-safe; o is zeroed */

/* Global L2 norm of g[0..n), accumulated in double. */
double lt_grad_norm(const float *g, size_t n);

/* The factor clipping scales the gradients by (when below 1): max_norm / (norm + 1e-6), or
 * 1 when max_norm <= 0 (only measuring). Every clipping path calls it (CPU, distributed,
 * GPU), so they scale alike. */
double lt_clip_coef(double norm, double max_norm);

/* Clip g in place to global norm max_norm (torch.nn.utils.clip_grad_norm_ semantics, see
 * above); max_norm <= 0 only measures. Returns the norm BEFORE clipping. */
double lt_clip_grads(float *g, size_t n, double max_norm);

/* One AdamW update of params[0..o->n) (o->n == m->n_params) with gradients `grads` and
 * learning rate `lr` (the caller takes it from lt_lr_at); o->t is incremented first.
 * Weight decay applies to tensors with rows > 1 only (m->tensors). */
void lt_adamw_step(lt_adamw *o, const lt_llama *m, float *params, const float *grads, double lr,
                   const lt_optim_config *oc);
/* The update of elements [begin, end) of the parameter buffer with their moments at
 * mm[0..), vv[0..) (ZeRO-1: a DP rank's shard of the moments); t is NOT incremented (the
 * caller does o->t++ once per step first). */
void lt_adamw_update_range(const lt_adamw *o, const lt_llama *m, float *params, const float *grads, double lr,
                           const lt_optim_config *oc, size_t begin, size_t end, float *mm, float *vv);
/* The same for the tensors i with mine[i] only (a pipeline stage's; NULL = all): the
 * elements of the others are untouched, t is incremented once. */
void lt_adamw_step_tensors(lt_adamw *o, const lt_llama *m, float *params, const float *grads, double lr,
                           const lt_optim_config *oc, const bool *mine);

#endif /* LT_TRAIN_OPTIM_H */
