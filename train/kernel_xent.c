/*
 * train/kernel_xent.c — softmax cross-entropy of the LM head (torch.nn.functional.
 * cross_entropy with reduction "sum" and ignore_index for targets < 0), fused with its
 * gradient as llm.c's crossentropy_softmax_backward does:
 *   loss_t = log sum_v exp(l_v - m) + m - l_target     (m = max_v l_v: stable log-sum-exp)
 *   dlogits[t, v] = scale (softmax(l)_v - [v == target])
 * The exponentials are summed in double. Rows are split into a FIXED number of blocks
 * (independent of the pool) whose partial losses are added in block order, so the returned
 * sum is the same for every thread count.
 */
#include <math.h>

#include "train/kernels.h"

enum { XENT_BLOCKS = 64 };

typedef struct {
    float *dlogits;
    const float *logits;
    const int32_t *targets;
    int T, V;
    float scale;
    double partial[XENT_BLOCKS];
} xent_ctx;

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
    float m = l[0];
    for (int v = 1; v < a->V; v++) m = l[v] > m ? l[v] : m;
    double sum = 0.0;
    for (int v = 0; v < a->V; v++) sum += (double)expf(l[v] - m);
    double loss = log(sum) + (double)m - (double)l[target];
    if (dl != NULL) {
        float inv = (float)(1.0 / sum);
        for (int v = 0; v < a->V; v++) {
            float p = expf(l[v] - m) * inv;
            dl[v] = a->scale * (p - (v == target ? 1.0f : 0.0f));
        }
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
