/*
 * train/cpu/xent.c — softmax cross-entropy of the LM head (torch.nn.functional.
 * cross_entropy with reduction "sum" and ignore_index for targets < 0), fused with its
 * gradient as llm.c's crossentropy_softmax_backward does:
 *   loss_t = log sum_v exp(l_v - m) + m - l_target     (m = max_v l_v: stable log-sum-exp)
 *   dlogits[t, v] = scale (softmax(l)_v - [v == target])
 * The exponentials (lt_vexpf, vectorized: train/cpu/simd.h) are summed in double. Rows are split into a FIXED number of blocks
 * (independent of the pool) whose partial losses are added in block order, so the returned
 * sum is the same for every thread count.
 */
#include <math.h>

#include "train/cpu/simd.h" /* lt_vexpf, LT_VECTOR_CLONES */
#include "train/cpu/kernels.h"

enum { XENT_BLOCKS = 64 };

typedef struct {
    float *dlogits;
    const float *logits;
    const int32_t *targets;
    int T, V;
    float scale;
    double partial[XENT_BLOCKS];
} xent_ctx;

/* max_v l[v] */
LT_VECTOR_CLONES static float row_max(const float *l, int V) {
    float m = l[0];
#pragma omp simd reduction(max : m)
    for (int v = 1; v < V; v++) m = l[v] > m ? l[v] : m;
    return m;
}

/* sum_v exp(l[v] - m), in double */
LT_VECTOR_CLONES static double row_expsum(const float *l, int V, float m) {
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; v++) sum += (double)lt_vexpf(l[v] - m);
    return sum;
}

/* dl[v] = scale softmax(l)_v (the target's -scale is added by the caller); dl may be l */
LT_VECTOR_CLONES static void row_softmax_grad(float *dl, const float *l, int V, float m, float inv, float scale) {
#pragma omp simd
    for (int v = 0; v < V; v++) dl[v] = scale * (lt_vexpf(l[v] - m) * inv);
}

/* One row; in place allowed (dl == l): every logit is read before its slot is written. */
static double xent_row(const xent_ctx *a, int t) {
    const float *l = a->logits + (size_t)t * a->V;
    float *dl = a->dlogits != NULL ? a->dlogits + (size_t)t * a->V : NULL;
    int target = a->targets[t];
    if (target < 0) {
        if (dl != NULL)
            for (int v = 0; v < a->V; v++) dl[v] = 0.0f;
        return 0.0;
    }
    float m = row_max(l, a->V);
    double sum = row_expsum(l, a->V, m);
    double loss = log(sum) + (double)m - (double)l[target];
    if (dl != NULL) {
        float inv = (float)(1.0 / sum);
        float p_target = lt_vexpf(l[target] - m) * inv; /* read before the in-place loop overwrites it */
        row_softmax_grad(dl, l, a->V, m, inv, a->scale);
        dl[target] = a->scale * (p_target - 1.0f);
    }
    return loss;
}

static void xent_block(size_t b, void *arg) {
    xent_ctx *a = arg;
    int t0 = (int)((int64_t)a->T * (int64_t)b / XENT_BLOCKS);
    int t1 = (int)((int64_t)a->T * (int64_t)(b + 1) / XENT_BLOCKS);
    double s = 0.0;
    for (int t = t0; t < t1; t++) s += xent_row(a, t);
    a->partial[b] = s;
}

double lt_xent_forward_backward(float *dlogits, const float *logits, const int32_t *targets, int T, int V,
                                float scale, lt_pool *pool) {
    xent_ctx a = {.dlogits = dlogits, .logits = logits, .targets = targets, .T = T, .V = V, .scale = scale};
    lt_kernel_for(pool, XENT_BLOCKS, xent_block, &a);
    double loss = 0.0;
    for (int b = 0; b < XENT_BLOCKS; b++) loss += a.partial[b];
    return loss;
}

/* ---------------------------------------------------------------- vocab-parallel (TP) */
/* Megatron-LM's vocab-parallel cross-entropy (Shoeybi et al. 2019 3): each rank holds the
 * logits of its vocabulary rows [v0, v0 + V); the caller all-reduces the statistics
 * between the steps (max, then sums), so no rank ever holds a whole row of logits. */

void lt_xent_tp_max(float *rowmax, const float *logits, int T, int V) {
    for (int t = 0; t < T; t++) rowmax[t] = row_max(logits + (size_t)t * V, V);
}

void lt_xent_tp_sums(float *sums, const float *logits, const float *rowmax, const int32_t *targets, int v0, int T,
                     int V) {
    for (int t = 0; t < T; t++) {
        const float *l = logits + (size_t)t * V;
        sums[t] = (float)row_expsum(l, V, rowmax[t]);
        int k = targets[t] - v0;
        sums[T + t] = targets[t] >= 0 && k >= 0 && k < V ? l[k] : 0.0f;
    }
}

double lt_xent_tp_finish(float *dlogits, const float *logits, const float *rowmax, const float *sums,
                         const int32_t *targets, int v0, int T, int V, float scale) {
    double loss = 0.0;
    for (int t = 0; t < T; t++) {
        const float *l = logits + (size_t)t * V;
        float *dl = dlogits ? dlogits + (size_t)t * V : NULL;
        if (targets[t] < 0) {
            for (int v = 0; dl && v < V; v++) dl[v] = 0.0f;
            continue;
        }
        double sum = (double)sums[t];
        loss += log(sum) + (double)rowmax[t] - (double)sums[T + t];
        if (dl) {
            row_softmax_grad(dl, l, V, rowmax[t], (float)(1.0 / sum), scale);
            int k = targets[t] - v0;
            if (k >= 0 && k < V) dl[k] -= scale;
        }
    }
    return loss;
}
