/*
 * train/cpu/attention.c — causal grouped-query attention over packed segments with a
 * per-document mask and KV context (train/cpu/kernels.h), fp32 reference.
 *
 * Forward (Vaswani et al. 2017; Llama GQA, Ainslie et al. 2023: query head h reads kv head
 * h / (nh / nkv)): for the query row at position p of its sample, s_j = q . k_j / sqrt(hd)
 * for j = 0..p, out = sum_j softmax(s)_j v_j, lse = log sum_j exp(s_j).
 *
 * Backward (FlashAttention-2, Dao 2023, Algorithm 2), recomputing P from the saved lse:
 *   D = dout . out,  P_j = exp(s_j - lse),  dP_j = dout . v_j,  dS_j = P_j (dP_j - D)
 *   dq += scale sum_j dS_j k_j,  dk_j += scale dS_j q,  dv_j += P_j dout.
 *
 * Tiling (FlashAttention-2 Sec. 3.1, on the CPU): a segment's query rows are taken QB at a
 * time and its visible keys KB at a time; every product of a (query block, key block) tile
 * is one cblas_sgemm (OpenBLAS; the strided head columns of q, k, v, out are passed as
 * leading dimensions, nothing is copied), the softmax runs on the QB x KB score tile on the
 * stack. The forward keeps a running row max and sum (online softmax, Milakov & Gimelshein
 * 2018) and rescales the output rows when the max grows, so the T x T matrix never exists.
 * Key blocks past a query block's last position are skipped; the diagonal block is masked.
 *
 * Threads. Forward: one task per (segment, query head, query block); each owns its out rows
 * and lse entries. Backward: one task per (group of segments sharing dk/dv buffers, kv head):
 * the segments of one sample alias their dk/dv, and a kv head's columns are written only by
 * its query heads, so every dk/dv element has one owner, which adds in a fixed order. Inside
 * the pool's tasks OpenBLAS runs single-threaded (set for the call, restored after), so the
 * result is bit-identical for every pool size (the linear layers' GEMMs, outside this file,
 * run on OpenBLAS's own threads, whose count can change their last bits: a run is
 * reproducible bit for bit with the same train.threads on the same kind of CPU).
 */
#include <cblas.h> /* cblas_sgemm, openblas_get_num_threads, openblas_set_num_threads */
#include <math.h>
#include <string.h>

#include "train/cpu/simd.h" /* lt_vexpf, LT_VECTOR_CLONES */
#include "train/cpu/kernels.h"

enum {
    QB = 64,  /* query rows per tile */
    KB = 256, /* keys per tile: a score tile is QB x KB floats (64 KiB) */
};

typedef struct {
    float *out, *lse, *dq;
    const float *q, *dout, *out_in, *lse_in;
    const lt_attn_segment *segs;
    int n_segs, nh, nkv, hd;
    float scale;
} attn_ctx;

static int blocks_of(int n) { return (n + QB - 1) / QB; }

/* Keys of the tile's row r visible to it: key positions kb0 .. p (p = the row's position),
 * clipped to the tile's kn keys; 0 or less when the row sees none of the tile. */
static int visible(int p, int kb0, int kn) {
    int v = p + 1 - kb0;
    return v < kn ? v : kn;
}

/* S[rows, kn] = scale q_rows k_tile^T: one GEMM over the strided head columns. */
static void scores(float *S, const float *q0, int ldq, const float *k0, int ldk, int rows, int kn, int hd,
                   float scale) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, kn, hd, scale, q0, ldq, k0, ldk, 0.0f, S, KB);
}

/* One row of a forward score tile, online softmax: s[0, vis) become exp(s - m') with m' the
 * row's new running max, s[vis, kn) (keys in the row's future) 0; *m = m', *l = the running
 * sum rescaled to m' plus this tile's. Returns the factor exp(m - m') by which the row's
 * output so far must be rescaled (0 before the first visible key, when m = -inf). */
LT_VECTOR_CLONES static float softmax_tile_row(float *s, int vis, int kn, float *m, float *l) {
    if (vis <= 0) { /* the whole tile is in this row's future */
        memset(s, 0, (size_t)kn * sizeof(float));
        return 1.0f;
    }
    float mt = *m, sum = 0.0f;
#pragma omp simd reduction(max : mt)
    for (int j = 0; j < vis; j++) mt = s[j] > mt ? s[j] : mt;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < vis; j++) {
        s[j] = lt_vexpf(s[j] - mt);
        sum += s[j];
    }
    for (int j = vis; j < kn; j++) s[j] = 0.0f;
    float alpha = *m == -INFINITY ? 0.0f : expf(*m - mt);
    *l = *l * alpha + sum, *m = mt;
    return alpha;
}

/* Forward of query block b of (segment sg, query head h). */
static void attn_fwd_block(const attn_ctx *a, const lt_attn_segment *sg, int h, int b) {
    int g = h / (a->nh / a->nkv), hd = a->hd;
    int qd = a->nh * hd, kvd = a->nkv * hd;
    int i0 = b * QB, rows = sg->n - i0 < QB ? sg->n - i0 : QB;
    int p0 = sg->begin + i0;        /* the first row's position */
    int kend = p0 + rows;           /* keys [0, kend) are visible to some row */
    size_t r0 = (size_t)sg->row0 + (size_t)i0;
    const float *q0 = a->q + r0 * qd + (size_t)h * hd;
    float *o0 = a->out + r0 * qd + (size_t)h * hd;
    float S[QB * KB], m[QB], l[QB];
    for (int r = 0; r < rows; r++) {
        m[r] = -INFINITY, l[r] = 0.0f;
        memset(o0 + (size_t)r * qd, 0, (size_t)hd * sizeof(float));
    }
    for (int kb0 = 0; kb0 < kend; kb0 += KB) {
        int kn = kend - kb0 < KB ? kend - kb0 : KB;
        const float *k0 = sg->k + (size_t)kb0 * kvd + (size_t)g * hd;
        const float *v0 = sg->v + (size_t)kb0 * kvd + (size_t)g * hd;
        scores(S, q0, qd, k0, kvd, rows, kn, hd, a->scale);
        for (int r = 0; r < rows; r++) {
            float alpha = softmax_tile_row(S + (size_t)r * KB, visible(p0 + r, kb0, kn), kn, &m[r], &l[r]);
            if (alpha != 1.0f) {
                float *o = o0 + (size_t)r * qd;
                for (int d = 0; d < hd; d++) o[d] *= alpha;
            }
        }
        /* out_rows += P v_tile */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, kn, 1.0f, S, KB, v0, kvd, 1.0f, o0, qd);
    }
    for (int r = 0; r < rows; r++) {
        float *o = o0 + (size_t)r * qd;
        for (int d = 0; d < hd; d++) o[d] /= l[r];
        a->lse[(r0 + (size_t)r) * a->nh + h] = m[r] + logf(l[r]);
    }
}

/* Task i: the i-th (segment, query head, query block), segments in order. */
static void attn_fwd_task(size_t task, void *arg) {
    const attn_ctx *a = arg;
    for (int s = 0; s < a->n_segs; s++) {
        size_t n = (size_t)blocks_of(a->segs[s].n) * (size_t)a->nh;
        if (task < n) {
            attn_fwd_block(a, &a->segs[s], (int)(task % (size_t)a->nh), (int)(task / (size_t)a->nh));
            return;
        }
        task -= n;
    }
}

/* OpenBLAS single-threaded while the pool's tasks call it (see the header comment). */
static int blas_single(void) {
    int saved = openblas_get_num_threads();
    if (saved != 1) openblas_set_num_threads(1);
    return saved;
}

static void blas_restore(int saved) {
    if (saved != 1) openblas_set_num_threads(saved);
}

void lt_attention_forward(float *out, float *lse, const float *q, const lt_attn_segment *segs, int n_segs,
                          int nh, int nkv, int hd, lt_pool *pool) {
    attn_ctx a = {.out = out, .lse = lse, .q = q, .segs = segs, .n_segs = n_segs, .nh = nh, .nkv = nkv,
                  .hd = hd, .scale = 1.0f / sqrtf((float)hd)};
    size_t tasks = 0;
    for (int s = 0; s < n_segs; s++) tasks += (size_t)blocks_of(segs[s].n) * (size_t)nh;
    int saved = blas_single();
    lt_kernel_for(pool, tasks, attn_fwd_task, &a);
    blas_restore(saved);
}

static int shares_grad(const lt_attn_segment *x, const lt_attn_segment *y) {
    return x->dk == y->dk || x->dv == y->dv;
}

/* One row of a backward tile: p[j] = P_j = exp(s_j - lse), dp[j] = scale dS_j = scale P_j
 * (dP_j - D) for the vis visible keys, both 0 for the keys in the row's future. */
LT_VECTOR_CLONES static void grad_tile_row(float *p, float *dp, int vis, int kn, float lse, float D,
                                           float scale) {
    if (vis < 0) vis = 0;
#pragma omp simd
    for (int j = 0; j < vis; j++) {
        p[j] = lt_vexpf(p[j] - lse);
        dp[j] = scale * p[j] * (dp[j] - D);
    }
    for (int j = vis; j < kn; j++) p[j] = dp[j] = 0.0f;
}

/* Backward of query block b of (segment sg, query head h of kv head g). */
static void attn_bwd_block(const attn_ctx *a, const lt_attn_segment *sg, int h, int g, int b) {
    int hd = a->hd, qd = a->nh * hd, kvd = a->nkv * hd;
    int i0 = b * QB, rows = sg->n - i0 < QB ? sg->n - i0 : QB;
    int p0 = sg->begin + i0, kend = p0 + rows;
    size_t r0 = (size_t)sg->row0 + (size_t)i0, qo = r0 * qd + (size_t)h * hd;
    const float *q0 = a->q + qo, *do0 = a->dout + qo, *o0 = a->out_in + qo;
    float *dq0 = a->dq + qo;
    float P[QB * KB], dP[QB * KB], D[QB], lse[QB];
    for (int r = 0; r < rows; r++) {
        const float *x = do0 + (size_t)r * qd, *y = o0 + (size_t)r * qd;
        float s = 0.0f;
        for (int d = 0; d < hd; d++) s += x[d] * y[d];
        D[r] = s, lse[r] = a->lse_in[(r0 + (size_t)r) * a->nh + h];
    }
    for (int kb0 = 0; kb0 < kend; kb0 += KB) {
        int kn = kend - kb0 < KB ? kend - kb0 : KB;
        size_t ko = (size_t)kb0 * kvd + (size_t)g * hd;
        const float *k0 = sg->k + ko, *v0 = sg->v + ko;
        scores(P, q0, qd, k0, kvd, rows, kn, hd, a->scale);
        /* dP = dout_rows v_tile^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, kn, hd, 1.0f, do0, qd, v0, kvd, 0.0f, dP, KB);
        for (int r = 0; r < rows; r++)
            grad_tile_row(P + (size_t)r * KB, dP + (size_t)r * KB, visible(p0 + r, kb0, kn), kn, lse[r], D[r],
                          a->scale);
        /* dq_rows += (scale dS) k_tile; dk_tile += (scale dS)^T q_rows; dv_tile += P^T dout_rows */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, kn, 1.0f, dP, KB, k0, kvd, 1.0f, dq0, qd);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kn, hd, rows, 1.0f, dP, KB, q0, qd, 1.0f, sg->dk + ko,
                    kvd);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kn, hd, rows, 1.0f, P, KB, do0, qd, 1.0f, sg->dv + ko,
                    kvd);
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
        const lt_attn_segment *sg = &a->segs[e];
        if (!shares_grad(sg, lead)) continue;
        for (int h = g * group; h < (g + 1) * group; h++)
            for (int b = 0; b < blocks_of(sg->n); b++) attn_bwd_block(a, sg, h, g, b);
    }
}

void lt_attention_backward(float *dq, const float *dout, const float *out, const float *lse, const float *q,
                           const lt_attn_segment *segs, int n_segs, int nh, int nkv, int hd, lt_pool *pool) {
    attn_ctx a = {.dq = dq, .dout = dout, .out_in = out, .lse_in = lse, .q = q, .segs = segs,
                  .n_segs = n_segs, .nh = nh, .nkv = nkv, .hd = hd, .scale = 1.0f / sqrtf((float)hd)};
    int saved = blas_single();
    lt_kernel_for(pool, (size_t)n_segs * (size_t)nkv, attn_bwd_task, &a);
    blas_restore(saved);
}
