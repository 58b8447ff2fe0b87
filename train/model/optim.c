/*
 * train/model/optim.c — AdamW, the warm-up + cosine learning-rate schedule and global-norm
 * gradient clipping (train/model/optim.h).
 *
 * Floating point follows PyTorch's CPU kernels so that tests/train/torch_parity.py can hold
 * the two to tight tolerances: every per-element operation is a float operation in the
 * order torch.optim.AdamW issues them; scalars (1 - lr wd, 1 - beta1, the bias corrections)
 * are computed in double and rounded to float once, as a Python float becomes a float
 * scalar inside a float tensor kernel. torch's lerp_ (the first-moment update) computes
 * fma(w, end - self, self) for w < 0.5 in its vectorized loop (ATen/native/Lerp.h,
 * lerp_vec), so we use fmaf there.
 */
#include "train/model/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LT_PI 3.14159265358979323846 /* M_PI is not ISO C */

lt_status lt_optim_config_from(const lt_config *cfg, lt_optim_config *oc, lt_error *err) {
    memset(oc, 0, sizeof *oc);
    struct { const char *key; double *out; } dbl[] = {
        {"lr", &oc->lr},       {"min_lr", &oc->min_lr},     {"weight_decay", &oc->weight_decay},
        {"beta1", &oc->beta1}, {"beta2", &oc->beta2},       {"adam_eps", &oc->eps},
        {"grad_clip", &oc->grad_clip},
    };
    lt_status st;
    for (size_t i = 0; i < sizeof dbl / sizeof dbl[0]; i++)
        if ((st = lt_config_get_double(cfg, "train", dbl[i].key, dbl[i].out, err)) != LT_OK) return st;
    if ((st = lt_config_get_int(cfg, "train", "warmup_steps", &oc->warmup_steps, err)) != LT_OK) return st;
    oc->total_steps = 1000;
    if (lt_config_is_set(cfg, "train", "steps")) {
        if ((st = lt_config_get_int(cfg, "train", "steps", &oc->total_steps, err)) != LT_OK) return st;
    } else if (lt_config_is_set(cfg, "plan", "steps")) {
        if ((st = lt_config_get_int(cfg, "plan", "steps", &oc->total_steps, err)) != LT_OK) return st;
    }
    if (oc->min_lr > oc->lr) {
        lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, "train", "min_lr"),
                "train.min_lr = %g is above train.lr = %g", oc->min_lr, oc->lr);
        lt_error_hint(err, "the cosine schedule decays from lr down to min_lr: set min_lr <= lr");
        return LT_ERR_CONFIG;
    }
    return LT_OK;
}

double lt_lr_at(const lt_optim_config *oc, int64_t step) {
    if (step < 0) step = 0;
    if (step < oc->warmup_steps) return oc->lr * (double)(step + 1) / (double)oc->warmup_steps;
    int64_t span = oc->total_steps - oc->warmup_steps;
    if (span < 1) span = 1;
    double progress = (double)(step - oc->warmup_steps) / (double)span;
    if (progress > 1.0) progress = 1.0;
    if (progress < 0.0) progress = 0.0;
    return oc->min_lr + 0.5 * (oc->lr - oc->min_lr) * (1.0 + cos(LT_PI * progress));
}

lt_status lt_adamw_init(lt_adamw *o, size_t n, lt_error *err) {
    memset(o, 0, sizeof *o);
    o->m = calloc(n ? n : 1, sizeof(float));
    o->v = calloc(n ? n : 1, sizeof(float));
    if (!o->m || !o->v) {
        lt_adamw_free(o);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the AdamW moments of %zu parameters (%.1f MiB)", n,
                       (double)n * 8.0 / 1048576.0);
    }
    o->n = n;
    return LT_OK;
}

void lt_adamw_free(lt_adamw *o) {
    if (!o) return;
    free(o->m);
    free(o->v);
    memset(o, 0, sizeof *o);
}

double lt_grad_norm(const float *g, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)g[i] * (double)g[i];
    return sqrt(s);
}

double lt_clip_coef(double norm, double max_norm) {
    return max_norm > 0.0 ? max_norm / (norm + 1e-6) : 1.0; /* torch.nn.utils.clip_grad_norm_ */
}

double lt_clip_grads(float *g, size_t n, double max_norm) {
    double norm = lt_grad_norm(g, n);
    double coef = lt_clip_coef(norm, max_norm);
    if (coef < 1.0) {
        float c = (float)coef;
        for (size_t i = 0; i < n; i++) g[i] *= c;
    }
    return norm;
}

/* ATen/native/Lerp.h: self + w (end - self) for |w| < 0.5 (fused in the vectorized loop),
 * end - (end - self)(1 - w) otherwise. */
static inline float torch_lerp(float self, float end, float w) {
    if (fabsf(w) < 0.5f) return fmaf(w, end - self, self);
    return fmaf(w - 1.0f, end - self, end);
}

/* The per-element update of one tensor (see optim.h for the formula). */
static void adamw_range(float *p, const float *g, float *m, float *v, size_t n, float decay, float w1, float b2,
                        float one_minus_b2, float bc2_sqrt, float eps, float neg_step) {
    for (size_t i = 0; i < n; i++) {
        float pi = p[i] * decay;
        float gi = g[i];
        float mi = torch_lerp(m[i], gi, w1);
        float vi = v[i] * b2 + one_minus_b2 * gi * gi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p[i] = pi + neg_step * mi / denom;
        m[i] = mi;
        v[i] = vi;
    }
}

void lt_adamw_step(lt_adamw *o, const lt_llama *m, float *params, const float *grads, double lr,
                   const lt_optim_config *oc) {
    lt_adamw_step_tensors(o, m, params, grads, lr, oc, NULL);
}

void lt_adamw_update_range(const lt_adamw *o, const lt_llama *m, float *params, const float *grads, double lr,
                           const lt_optim_config *oc, size_t begin, size_t end, float *mm, float *vv) {
    double bc1 = 1.0 - pow(oc->beta1, (double)o->t);
    double bc2 = 1.0 - pow(oc->beta2, (double)o->t);
    float w1 = (float)(1.0 - oc->beta1);
    float b2 = (float)oc->beta2, one_minus_b2 = (float)(1.0 - oc->beta2);
    float bc2_sqrt = (float)sqrt(bc2), eps = (float)oc->eps;
    float neg_step = (float)(-(lr / bc1));
    float decay_on = (float)(1.0 - lr * oc->weight_decay);
    for (int i = 0; i < m->n_tensors; i++) {
        const lt_tensor_info *t = &m->tensors[i];
        size_t lo = t->offset, hi = t->offset + (size_t)t->rows * (size_t)t->cols;
        if (lo < begin) lo = begin;
        if (hi > end) hi = end;
        if (lo >= hi) continue;
        float decay = t->rows > 1 ? decay_on : 1.0f; /* no decay of norm weights */
        adamw_range(params + lo, grads + lo, mm + (lo - begin), vv + (lo - begin), hi - lo, decay, w1, b2, one_minus_b2,
                    bc2_sqrt, eps, neg_step);
    }
}

void lt_adamw_step_tensors(lt_adamw *o, const lt_llama *m, float *params, const float *grads, double lr,
                           const lt_optim_config *oc, const bool *mine) {
    o->t++;
    if (!mine) {
        lt_adamw_update_range(o, m, params, grads, lr, oc, 0, m->n_params, o->m, o->v);
        return;
    }
    for (int i = 0; i < m->n_tensors; i++) {
        if (!mine[i]) continue;
        size_t off = m->tensors[i].offset, n = (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
        lt_adamw_update_range(o, m, params, grads, lr, oc, off, off + n, o->m + off, o->v + off);
    }
}
