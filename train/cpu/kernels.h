/*
 * train/cpu/kernels.h — the CPU fp32 reference kernels of the Llama model, forward and backward.
 *
 * One file per kernel family in this folder; their CUDA bf16 twins are in kernels/
 * (kernels/cuda.h). These are the reference every faster path is checked against: plain C, no
 * intrinsics; the matrix products (the attention's tiles too) go through CBLAS (OpenBLAS),
 * everything else is threaded over rows with lib/threadpool (a NULL pool runs on the
 * calling thread). The softmax and cross-entropy loops are written to vectorize
 * (train/cpu/simd.h: `#pragma omp simd`, an exp without a libm call, builds for
 * AVX-512 / AVX2 / baseline picked at load time).
 *
 * Conventions (llm.c's, stated once for every function below)
 *   - Tensors are row-major fp32. A "unit" is a token stream of T rows (the packed slices
 *     of one micro-batch); row t is one token. Widths: C = hidden, F = ffn, V = vocab,
 *     nh = query heads, nkv = key/value heads, hd = head dim, qd = nh*hd, kvd = nkv*hd.
 *   - Forward functions WRITE (=) their outputs.
 *   - Backward functions ADD (+=) into every gradient they produce — of activations and of
 *     parameters alike — so a residual branch, a parameter shared by several units, or a
 *     KV context read by several slices accumulates naturally. Callers zero the buffers.
 *   - Linear weights use the Hugging Face layout [out, in]: y = x W^T.
 *   - Nothing allocates, nothing fails: shapes are the caller's contract.
 */
#ifndef LT_TRAIN_KERNELS_H
#define LT_TRAIN_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/threadpool.h" /* lt_pool, lt_pool_parallel_for */

/* fn(i, arg) for i in [0, n): on `pool`, or serially on the calling thread when pool is
 * NULL. The kernels' one way to thread; every kernel partitions its work so that each
 * output element is written by exactly one i, hence results never depend on the pool. */
static inline void lt_kernel_for(lt_pool *pool, size_t n, void (*fn)(size_t i, void *arg), void *arg) {
    if (pool == NULL || n <= 1) {
        for (size_t i = 0; i < n; i++) fn(i, arg);
        return;
    }
    /* LT_OK whenever every fn(i) ran (lib/threadpool.h), which it always does with fn != NULL */
    (void)lt_pool_parallel_for(pool, n, fn, arg, NULL);
}

/* ---------------------------------------------------------------- embedding (embed.c) */
/* out[t] = wte[ids[t]] for t < T; a row of zeros where ids[t] < 0 (a token whose
 * embedding row another tensor-parallel rank holds: the vocab-parallel embedding). */
void lt_embed_forward(float *out, const int32_t *ids, int T, const float *wte, int C);
/* dwte[ids[t]] += dout[t], nothing where ids[t] < 0. Rows repeat across tokens, so this
 * runs serially per row. */
void lt_embed_backward(float *dwte, const float *dout, const int32_t *ids, int T, int C);

/* ---------------------------------------------------------------- RMSNorm (rmsnorm.c) */
/* Llama RMSNorm: rstd[t] = 1 / sqrt(mean_c x[t,c]^2 + eps); out[t,c] = x[t,c] rstd[t] w[c].
 * rstd is saved for the backward. */
void lt_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int T, int C, float eps,
                        lt_pool *pool);
/* dx += d/dx, dw += d/dw of the forward above, given dout and the saved rstd. */
void lt_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                         const float *rstd, int T, int C, lt_pool *pool);

/* ---------------------------------------------------------------- linear (linear.c) */
/* out[T,OUT] = x[T,IN] W^T, W is [OUT,IN]. No bias (Llama has none; Qwen2's Q/K/V biases
 * are lt_bias_forward after it). One cblas_sgemm. */
void lt_linear_forward(float *out, const float *x, const float *w, int T, int IN, int OUT);
/* dx[T,IN] += dout W; dw[OUT,IN] += dout^T x. Either of dx, dw may be NULL (not wanted). */
void lt_linear_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, int T,
                        int IN, int OUT);
/* Timing hook for benchmarks (bench/trainer: the GEMM share of a step). While on, the wall
 * time (CLOCK_MONOTONIC) spent inside the cblas_sgemm calls of the two functions above is
 * summed into a process-wide counter; lt_linear_seconds() reads the sum (never reset: take
 * differences). Off by default, and then a call costs one relaxed atomic load. Thread-safe;
 * calls running at the same time on several threads would each add their own time. */
void lt_linear_timing(bool on);
double lt_linear_seconds(void);
/* A linear layer's bias (Qwen2's q/k/v_proj, torch.nn.Linear's y = x W^T + b):
 * forward y[t, j] += b[j]; backward db[j] += sum over t of dy[t, j] (the column sums,
 * summed over t in row order, fp32). */
void lt_bias_forward(float *y, const float *b, int T, int n);
void lt_bias_backward(float *db, const float *dy, int T, int n);

/* ---------------------------------------------------------------- RoPE (rope.c) */
/* Rotary position embedding, Hugging Face `rotate_half` convention, in place on x[T, n*hd]:
 * for head j, i < hd/2, angle a = pos[t] * inv_freq[i] with the model's inverse frequencies
 * inv_freq[0 .. hd/2) (lt_model_rope_inv_freq, lib/model.h: 1 / theta^(2i/hd), or Llama 3.1's
 * scaled ones):
 *   x[i]        <- x[i] cos a - x[i+hd/2] sin a
 *   x[i+hd/2]   <- x[i+hd/2] cos a + x[i] sin a
 * computed in fp32 the way transformers' LlamaRotaryEmbedding does (inv_freq, the angle
 * and cos/sin in float), so logits match a `transformers` model. pos[t] is the token's
 * absolute position in its sample (a slice starting at token b has positions b, b+1, ...). */
void lt_rope_forward(float *x, const int32_t *pos, int T, int n_heads, int hd, const float *inv_freq, lt_pool *pool);
/* The transpose (rotation by -a), in place on dx: the gradient of the input from the
 * gradient of the output. Not "+=": it transforms a buffer the caller owns. */
void lt_rope_backward(float *dx, const int32_t *pos, int T, int n_heads, int hd, const float *inv_freq,
                      lt_pool *pool);

/* ---------------------------------------------------------------- attention (attention.c) */
/*
 * Causal grouped-query attention over a packed unit, with document masking and KV context.
 *
 * A segment is the rows of the unit that belong to one slice (sample, [begin, end)): its
 * query rows are q[row0 .. row0+n), at absolute positions begin .. begin+n-1 of the
 * sample. Its keys/values are the SAMPLE's context buffers k, v ([>= begin+n, kvd] each,
 * post-RoPE keys), holding positions 0 .. begin+n-1: the rows earlier slices (the KV
 * context, InfiniPipe 2.1 / ChunkFlow 4.2) and this slice wrote. Query row at position p
 * attends to keys 0..p of its own sample only (per-document causal mask); query head h
 * reads key/value head h / (nh / nkv) (GQA). Scale 1/sqrt(hd).
 *
 * The forward saves lse[row, h] = log-sum-exp of the row's scaled scores (FlashAttention-2
 * keeps the same statistic) so the backward recomputes the probabilities instead of
 * storing the T x T matrix.
 */
typedef struct lt_attn_segment {
    int row0;       /* first row of the segment in q / out / lse (unit rows) */
    int n;          /* rows (the slice's tokens) */
    int begin;      /* absolute position of the first row in its sample */
    const float *k; /* the sample's keys   [begin+n, kvd] (row = position) */
    const float *v; /* the sample's values [begin+n, kvd] */
    float *dk;      /* backward: += gradient of k rows 0..begin+n-1 (the context's too) */
    float *dv;      /* backward: += gradient of v rows 0..begin+n-1 */
} lt_attn_segment;

/* out[row, h*hd..] = softmax(q k^T / sqrt(hd)) v over the segment's visible keys; lse saved.
 * q and out are [T, nh*hd]; lse is [T, nh]. */
void lt_attention_forward(float *out, float *lse, const float *q, const lt_attn_segment *segs, int n_segs,
                          int nh, int nkv, int hd, lt_pool *pool);
/* dq += ..., seg.dk/dv += ... (rows 0..begin+n-1 of each segment's sample), from dout and
 * the forward's out and lse. Segments of the same sample may appear in one call: their
 * dk/dv buffers alias and the function accumulates without races. */
void lt_attention_backward(float *dq, const float *dout, const float *out, const float *lse, const float *q,
                           const lt_attn_segment *segs, int n_segs, int nh, int nkv, int hd, lt_pool *pool);

/* ---------------------------------------------------------------- SwiGLU (swiglu.c) */
/* out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)), for i < n. */
void lt_swiglu_forward(float *out, const float *gate, const float *up, size_t n, lt_pool *pool);
/* dgate += dout * up * silu'(gate); dup += dout * silu(gate). */
void lt_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                        size_t n, lt_pool *pool);

/* ---------------------------------------------------------------- cross-entropy (xent.c) */
/*
 * Softmax cross-entropy of logits[T, V] against targets[T] (a target < 0: the row predicts
 * nothing — a sample's last token). Returns the SUM of -log softmax(logits[t])[target[t]]
 * over the predicting rows, accumulated in double (callers normalize by the global
 * batch's predicted tokens, so any split of a step into units sums to the same loss).
 *
 * With dlogits != NULL, also writes dlogits[t] = scale * (softmax(logits[t]) - onehot)
 * for predicting rows and 0 for the others (=, not +=; dlogits may equal logits: in place).
 * scale is 1/N of the global batch.
 */
double lt_xent_forward_backward(float *dlogits, const float *logits, const int32_t *targets, int T, int V,
                                float scale, lt_pool *pool);

/* The vocab-parallel cross-entropy of tensor parallelism (Megatron-LM): logits[T, V] are
 * this rank's vocabulary rows [v0, v0 + V) of the whole rows; targets are whole-vocabulary
 * ids. The caller max-reduces rowmax over the group between the first two calls and
 * sum-reduces sums[0..2T) between the last two:
 *   lt_xent_tp_max     rowmax[t] = the largest local logit of row t;
 *   lt_xent_tp_sums    sums[t] = sum_v exp(l[t, v] - rowmax[t]) (rowmax: the group's),
 *                      sums[T + t] = the target's logit when this rank holds it, else 0;
 *   lt_xent_tp_finish  the summed loss of the predicting rows, and with dlogits (may be
 *                      logits) dlogits = scale (softmax - onehot) of the local columns. */
void lt_xent_tp_max(float *rowmax, const float *logits, int T, int V);
void lt_xent_tp_sums(float *sums, const float *logits, const float *rowmax, const int32_t *targets, int v0, int T,
                     int V);
double lt_xent_tp_finish(float *dlogits, const float *logits, const float *rowmax, const float *sums,
                         const int32_t *targets, int v0, int T, int V, float scale);

#endif /* LT_TRAIN_KERNELS_H */
