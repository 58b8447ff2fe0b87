/*
 * train/kernel_attention.c — causal grouped-query attention over packed segments with a
 * per-document mask and KV context (train/kernels.h), fp32 reference.
 *
 * Forward (Vaswani et al. 2017; Llama GQA, Ainslie et al. 2023: query head h reads kv head
 * h / (nh / nkv)): for the query row at position p of its sample, s_j = q . k_j / sqrt(hd)
 * for j = 0..p, out = sum_j softmax(s)_j v_j, lse = log sum_j exp(s_j). Two passes over the
 * keys (max, then exp-sum and the weighted values), so nothing is allocated: the row max is
 * subtracted before exp (numerically stable softmax).
 *
 * Backward (FlashAttention-2, Dao 2023, Algorithm 2), recomputing P from the saved lse:
 *   D = dout . out,  P_j = exp(s_j - lse),  dP_j = dout . v_j,  dS_j = P_j (dP_j - D)
 *   dq += scale sum_j dS_j k_j,  dk_j += scale dS_j q,  dv_j += P_j dout.
 *
 * Threads. Forward: one task per (segment, query head); each owns its out rows and lse
 * entries. Backward: one task per (group of segments sharing dk/dv buffers, kv head): the
 * segments of one sample alias their dk/dv, and a kv head's columns are written only by its
 * query heads, so every dk/dv element has one owner, which adds in a fixed order. The
 * result is bit-identical for every thread count.
 */
#include <math.h>

#include "train/kernels.h"

typedef struct {
    float *out, *lse, *dq;
    const float *q, *dout, *out_in, *lse_in;
    const lt_attn_segment *segs;
    int n_segs, nh, nkv, hd;
    float scale;
} attn_ctx;

static float dot(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Forward of one (segment, query head). */
static void attn_fwd_task(size_t task, void *arg) {
    const attn_ctx *a = arg;
    const lt_attn_segment *sg = &a->segs[task / (size_t)a->nh];
    int h = (int)(task % (size_t)a->nh);
    int g = h / (a->nh / a->nkv);
    int qd = a->nh * a->hd, kvd = a->nkv * a->hd;
    for (int i = 0; i < sg->n; i++) {
        int row = sg->row0 + i, p = sg->begin + i;
        const float *q = a->q + (size_t)row * qd + (size_t)h * a->hd;
        float *o = a->out + (size_t)row * qd + (size_t)h * a->hd;
        float m = -INFINITY;
        for (int j = 0; j <= p; j++) {
            float s = a->scale * dot(q, sg->k + (size_t)j * kvd + (size_t)g * a->hd, a->hd);
            m = s > m ? s : m;
        }
        for (int d = 0; d < a->hd; d++) o[d] = 0.0f;
        float sum = 0.0f;
        for (int j = 0; j <= p; j++) {
            float s = a->scale * dot(q, sg->k + (size_t)j * kvd + (size_t)g * a->hd, a->hd);
            float e = expf(s - m);
            const float *v = sg->v + (size_t)j * kvd + (size_t)g * a->hd;
            sum += e;
            for (int d = 0; d < a->hd; d++) o[d] += e * v[d];
        }
        for (int d = 0; d < a->hd; d++) o[d] /= sum;
        a->lse[(size_t)row * a->nh + h] = m + logf(sum);
    }
}

void lt_attention_forward(float *out, float *lse, const float *q, const lt_attn_segment *segs, int n_segs,
                          int nh, int nkv, int hd, lt_pool *pool) {
    attn_ctx a = {.out = out, .lse = lse, .q = q, .segs = segs, .n_segs = n_segs, .nh = nh, .nkv = nkv,
                  .hd = hd, .scale = 1.0f / sqrtf((float)hd)};
    lt_kernel_for(pool, (size_t)n_segs * (size_t)nh, attn_fwd_task, &a);
}

static int shares_grad(const lt_attn_segment *x, const lt_attn_segment *y) {
    return x->dk == y->dk || x->dv == y->dv;
}

/* Backward of one (segment, query head h of kv head g). */
static void attn_bwd_segment_head(const attn_ctx *a, const lt_attn_segment *sg, int h, int g) {
    int qd = a->nh * a->hd, kvd = a->nkv * a->hd;
    for (int i = 0; i < sg->n; i++) {
        int row = sg->row0 + i, p = sg->begin + i;
        size_t qo = (size_t)row * qd + (size_t)h * a->hd;
        const float *q = a->q + qo, *dout = a->dout + qo, *o = a->out_in + qo;
        float *dq = a->dq + qo;
        float lse = a->lse_in[(size_t)row * a->nh + h];
        float D = dot(dout, o, a->hd);
        for (int j = 0; j <= p; j++) {
            size_t ko = (size_t)j * kvd + (size_t)g * a->hd;
            const float *k = sg->k + ko, *v = sg->v + ko;
            float P = expf(a->scale * dot(q, k, a->hd) - lse);
            float dS = P * (dot(dout, v, a->hd) - D);
            float *dk = sg->dk + ko, *dv = sg->dv + ko;
            for (int d = 0; d < a->hd; d++) {
                dq[d] += a->scale * dS * k[d];
                dk[d] += a->scale * dS * q[d];
                dv[d] += P * dout[d];
            }
        }
    }
}

/* Backward of (segment group led by segment s, kv head g). Segment s leads when no earlier
 * segment shares its dk/dv; the task then handles s and every later segment sharing them. */
static void attn_bwd_task(size_t task, void *arg) {
    const attn_ctx *a = arg;
    int s = (int)(task / (size_t)a->nkv), g = (int)(task % (size_t)a->nkv);
    const lt_attn_segment *lead = &a->segs[s];
    for (int e = 0; e < s; e++)
        if (shares_grad(&a->segs[e], lead)) return; /* an earlier task owns this group */
    int group = a->nh / a->nkv;
    for (int e = s; e < a->n_segs; e++) {
        if (!shares_grad(&a->segs[e], lead)) continue;
        for (int h = g * group; h < (g + 1) * group; h++) attn_bwd_segment_head(a, &a->segs[e], h, g);
    }
}

void lt_attention_backward(float *dq, const float *dout, const float *out, const float *lse, const float *q,
                           const lt_attn_segment *segs, int n_segs, int nh, int nkv, int hd, lt_pool *pool) {
    attn_ctx a = {.dq = dq, .dout = dout, .out_in = out, .lse_in = lse, .q = q, .segs = segs,
                  .n_segs = n_segs, .nh = nh, .nkv = nkv, .hd = hd, .scale = 1.0f / sqrtf((float)hd)};
    lt_kernel_for(pool, (size_t)n_segs * (size_t)nkv, attn_bwd_task, &a);
}
