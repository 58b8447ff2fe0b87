/*
 * kernels/xent.cu — softmax cross-entropy over bf16 logit rows [T, V], fused with its
 * gradient, the twin of train/cpu/xent.c (llm.c's fused classifier):
 *   loss_t        = log sum_v exp(l_v - m) + m - l_target        (m = max_v l_v)
 *   dlogits[t, v] = scale (softmax(l)_v - [v == target])          (written in place)
 * Rows with target < 0 predict nothing: loss 0, gradient row 0. dlogits NULL: the losses
 * only (evaluation), as the CPU reference allows. A target >= V (a broken
 * caller contract the kernel cannot report) gives a NaN loss and a NaN gradient row, so
 * the step's loss shows it.
 *
 * One block per row, fp32 math (dev/cuda/xent.cu, version 3): a single pass over the row
 * keeps each thread's running max and its sum of exponentials rescaled to that max
 * (the online softmax of Milakov & Gimelshein 2018, also FlashAttention's), the block
 * merges the (max, sum) pairs in a fixed order, then a second pass writes the gradient.
 * In place is safe: a thread writes only the elements it read itself, and the target's
 * logit is read by every thread before the block's first barrier. Rows are `ld` elements
 * apart (ld >= V): the LM head pads its logits rows to a multiple of 64 (train/model/pass.c,
 * kernels/gemm.cu), and the columns [V, ld) are neither read nor written, so whatever they
 * hold never reaches the max, the sum or the gradient. 8 logits per load when ld % 8 == 0
 * and the rows are 16-byte aligned, the last V % 8 one at a time (V = 50257 keeps the
 * 8-wide path). The per-row losses go to row_loss (fp32); the host adds them with
 * lt_cuda_sum_rows (deterministic).
 *
 * The vocabulary-parallel form (Megatron-LM's, Shoeybi et al. 2019 3; the twins of
 * train/cpu/xent.c's lt_xent_tp_*): a tensor-parallel rank holds the logits of its
 * vocabulary rows [v0, v0 + V) only, and the row statistics cross the group between three
 * kernels, one block per row each: _max (the local row maximum), _sums (the exponentials'
 * sum against the group's maximum, and the target's logit where this rank holds it), and
 * _finish (the loss from the group's sums, and the gradient of the local columns). The
 * block reductions are the same fixed-order merges as above (a max is a (max, 0) pair, a
 * sum against a common maximum a (M, s) pair), so the result is the same bits every run.
 */
#include <math.h>

#include "kernels/cuda_common.cuh" /* lt_cuda, lt_ld8, lt_st8 */

enum { XENT_THREADS = 512 };

struct max_sum {
    float m, s; /* running max and sum_v exp(l_v - m) */
};

static __device__ __forceinline__ max_sum ms_merge(max_sum a, max_sum b) {
    float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return a; /* both empty */
    max_sum r;
    r.m = m;
    r.s = a.s * expf(a.m - m) + b.s * expf(b.m - m);
    return r;
}

static __device__ __forceinline__ void ms_add(max_sum &a, float x) {
    if (x > a.m) {
        a.s = a.s * expf(a.m - x) + 1.0f; /* expf(-inf) = 0 on the first element */
        a.m = x;
    } else if (x > -INFINITY) {
        a.s += expf(x - a.m);
    }
}

/* Every thread gets the block's (max, sum); fixed merge order (warp butterflies, then
 * warp 0 over the warps). */
static __device__ max_sum ms_block(max_sum a) {
    __shared__ float sm[32], ss[32];
    __shared__ max_sum total;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        max_sum b;
        b.m = __shfl_xor_sync(0xffffffffu, a.m, o);
        b.s = __shfl_xor_sync(0xffffffffu, a.s, o);
        a = ms_merge(a, b);
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    if (lane == 0) sm[warp] = a.m, ss[warp] = a.s;
    __syncthreads();
    if (warp == 0) {
        max_sum b;
        b.m = lane < n_warps ? sm[lane] : -INFINITY;
        b.s = lane < n_warps ? ss[lane] : 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            max_sum d;
            d.m = __shfl_xor_sync(0xffffffffu, b.m, o);
            d.s = __shfl_xor_sync(0xffffffffu, b.s, o);
            b = ms_merge(b, d);
        }
        if (lane == 0) total = b;
    }
    __syncthreads();
    return total;
}

/* The columns of a row a thread visits: VEC, 8 at a time over [0, V & ~7) (16-byte loads:
 * the row starts at a multiple of 8 elements), then one at a time over the tail [V & ~7,
 * V); scalar, one at a time over [0, V). Columns [V, ld) are padding (the LM head's rows,
 * kernels/gemm.cu): never read, never written. */
#define FOR_VEC(v, V) for (int v = 8 * (int)threadIdx.x; v < ((V) & ~7); v += 8 * (int)blockDim.x)
#define FOR_TAIL(v, VEC, V) for (int v = ((VEC) ? ((V) & ~7) : 0) + (int)threadIdx.x; v < (V); v += (int)blockDim.x)

template <bool VEC>
__global__ void __launch_bounds__(XENT_THREADS) xent_kernel(lt_bf16 *dlogits, const lt_bf16 *logits,
                                                            const int32_t *targets, int V, int ld, float scale,
                                                            float *row_loss) {
    size_t off = (size_t)blockIdx.x * (size_t)ld;
    const lt_bf16 *l = logits + off;
    lt_bf16 *dl = dlogits != NULL ? dlogits + off : NULL; /* NULL: the loss only */
    int target = targets[blockIdx.x];
    if (target < 0) {
        if (dl != NULL)
            for (int v = threadIdx.x; v < V; v += blockDim.x) lt_st(dl + v, 0.0f);
        if (threadIdx.x == 0) row_loss[blockIdx.x] = 0.0f;
        return;
    }
    bool bad = target >= V;
    float lt = bad ? NAN : lt_ld(l + target); /* read before any thread writes (barrier below) */
    max_sum a = {-INFINITY, 0.0f};
    if (VEC) {
        FOR_VEC(v, V) {
            lt_bf16x8 x = lt_ld8(l + v);
#pragma unroll
            for (int k = 0; k < 8; k++) ms_add(a, x.v[k]);
        }
    }
    FOR_TAIL(v, VEC, V) ms_add(a, lt_ld(l + v));
    a = ms_block(a);
    float inv = 1.0f / a.s;
    if (threadIdx.x == 0) row_loss[blockIdx.x] = (float)(log((double)a.s) + (double)a.m - (double)lt);
    float p_target = expf(lt - a.m) * inv;
    float g_target = scale * (p_target - 1.0f);
    if (dl == NULL) return;
    if (VEC) {
        FOR_VEC(v, V) {
            lt_bf16x8 x = lt_ld8(l + v);
#pragma unroll
            for (int k = 0; k < 8; k++)
                x.v[k] = (v + k == target || bad) ? g_target : scale * (expf(x.v[k] - a.m) * inv);
            lt_st8(dl + v, x);
        }
    }
    FOR_TAIL(v, VEC, V) lt_st(dl + v, (v == target || bad) ? g_target : scale * (expf(lt_ld(l + v) - a.m) * inv));
}

/* The 8-wide path: rows ld elements apart with ld % 8 == 0 and 16-byte aligned bases (V
 * itself may be odd: its tail is read one at a time). */
static bool xent_vec(int ld, const void *a, const void *b) {
    return ld % 8 == 0 && (a == NULL || lt_cuda_aligned16(a)) && lt_cuda_aligned16(b);
}

#define CHECK_SHAPE(fn, T, V, ld)                                                                                 \
    LT_CUDA_REQUIRE((T) >= 0 && (V) > 0 && (ld) >= (V), fn, "bad shape T=%d V=%d ld=%d (ld >= V)", (T), (V), (ld))

extern "C" lt_status lt_cuda_xent_forward_backward(lt_cuda *c, lt_bf16 *dlogits, const lt_bf16 *logits,
                                                   const int32_t *targets, int T, int V, int ld, float scale,
                                                   float *row_loss, lt_error *err) {
    CHECK_SHAPE("lt_cuda_xent_forward_backward", T, V, ld);
    LT_CUDA_REQUIRE(row_loss != NULL, "lt_cuda_xent_forward_backward", "row_loss is required");
    if (T == 0) return LT_OK;
    if (xent_vec(ld, dlogits, logits)) {
        LT_KERNEL(xent_kernel<true>, T, XENT_THREADS, c->stream)(dlogits, logits, targets, V, ld, scale, row_loss);
        LT_LAUNCH_CHECK("xent_kernel<vec>");
    } else {
        LT_KERNEL(xent_kernel<false>, T, XENT_THREADS, c->stream)(dlogits, logits, targets, V, ld, scale, row_loss);
        LT_LAUNCH_CHECK("xent_kernel");
    }
    return LT_OK;
}

/* ---------------------------------------------------------------- vocabulary-parallel */

template <bool VEC>
__global__ void __launch_bounds__(XENT_THREADS) xent_tp_max_kernel(float *rowmax, const lt_bf16 *logits, int V,
                                                                   int ld) {
    const lt_bf16 *l = logits + (size_t)blockIdx.x * (size_t)ld;
    max_sum a = {-INFINITY, 0.0f};
    if (VEC) {
        FOR_VEC(v, V) {
            lt_bf16x8 x = lt_ld8(l + v);
#pragma unroll
            for (int k = 0; k < 8; k++) a.m = fmaxf(a.m, x.v[k]);
        }
    }
    FOR_TAIL(v, VEC, V) a.m = fmaxf(a.m, lt_ld(l + v));
    a = ms_block(a);
    if (threadIdx.x == 0) rowmax[blockIdx.x] = a.m;
}

template <bool VEC>
__global__ void __launch_bounds__(XENT_THREADS) xent_tp_sums_kernel(float *sums, const lt_bf16 *logits,
                                                                    const float *rowmax, const int32_t *targets,
                                                                    int v0, int T, int V, int ld) {
    size_t t = blockIdx.x;
    const lt_bf16 *l = logits + t * (size_t)ld;
    float M = rowmax[t];
    max_sum a = {M, 0.0f}; /* every pair at the group's maximum: the merges add the sums */
    if (VEC) {
        FOR_VEC(v, V) {
            lt_bf16x8 x = lt_ld8(l + v);
#pragma unroll
            for (int k = 0; k < 8; k++) a.s += expf(x.v[k] - M);
        }
    }
    FOR_TAIL(v, VEC, V) a.s += expf(lt_ld(l + v) - M);
    a = ms_block(a);
    if (threadIdx.x == 0) {
        int target = targets[t], k = target - v0;
        sums[t] = a.s;
        sums[(size_t)T + t] = target >= 0 && k >= 0 && k < V ? lt_ld(l + k) : 0.0f;
    }
}

/* In place is safe: a thread writes only the elements it read itself. */
template <bool VEC>
__global__ void __launch_bounds__(XENT_THREADS) xent_tp_finish_kernel(lt_bf16 *dlogits, const lt_bf16 *logits,
                                                                      const float *rowmax, const float *sums,
                                                                      const int32_t *targets, int v0, int T, int V,
                                                                      int ld, float scale, float *row_loss) {
    size_t t = blockIdx.x, off = t * (size_t)ld;
    const lt_bf16 *l = logits + off;
    lt_bf16 *dl = dlogits != NULL ? dlogits + off : NULL;
    int target = targets[t], k = target - v0;
    if (target < 0) {
        if (dl != NULL)
            for (int v = threadIdx.x; v < V; v += blockDim.x) lt_st(dl + v, 0.0f);
        if (threadIdx.x == 0) row_loss[t] = 0.0f;
        return;
    }
    float M = rowmax[t], inv = 1.0f / sums[t];
    if (threadIdx.x == 0) row_loss[t] = (float)(log((double)sums[t]) + (double)M - (double)sums[(size_t)T + t]);
    if (dl == NULL) return;
    if (VEC) {
        FOR_VEC(v, V) {
            lt_bf16x8 x = lt_ld8(l + v);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                float g = scale * (expf(x.v[j] - M) * inv);
                x.v[j] = v + j == k ? g - scale : g;
            }
            lt_st8(dl + v, x);
        }
    }
    FOR_TAIL(v, VEC, V) {
        float g = scale * (expf(lt_ld(l + v) - M) * inv);
        lt_st(dl + v, v == k ? g - scale : g);
    }
}

extern "C" lt_status lt_cuda_xent_tp_max(lt_cuda *c, float *rowmax, const lt_bf16 *logits, int T, int V, int ld,
                                         lt_error *err) {
    CHECK_SHAPE("lt_cuda_xent_tp_max", T, V, ld);
    if (T == 0) return LT_OK;
    if (xent_vec(ld, NULL, logits)) {
        LT_KERNEL(xent_tp_max_kernel<true>, T, XENT_THREADS, c->stream)(rowmax, logits, V, ld);
        LT_LAUNCH_CHECK("xent_tp_max_kernel<vec>");
    } else {
        LT_KERNEL(xent_tp_max_kernel<false>, T, XENT_THREADS, c->stream)(rowmax, logits, V, ld);
        LT_LAUNCH_CHECK("xent_tp_max_kernel");
    }
    return LT_OK;
}

extern "C" lt_status lt_cuda_xent_tp_sums(lt_cuda *c, float *sums, const lt_bf16 *logits, const float *rowmax,
                                          const int32_t *targets, int v0, int T, int V, int ld, lt_error *err) {
    CHECK_SHAPE("lt_cuda_xent_tp_sums", T, V, ld);
    LT_CUDA_REQUIRE(v0 >= 0, "lt_cuda_xent_tp_sums", "bad vocabulary offset v0=%d", v0);
    if (T == 0) return LT_OK;
    if (xent_vec(ld, NULL, logits)) {
        LT_KERNEL(xent_tp_sums_kernel<true>, T, XENT_THREADS, c->stream)(sums, logits, rowmax, targets, v0, T, V, ld);
        LT_LAUNCH_CHECK("xent_tp_sums_kernel<vec>");
    } else {
        LT_KERNEL(xent_tp_sums_kernel<false>, T, XENT_THREADS, c->stream)(sums, logits, rowmax, targets, v0, T, V,
                                                                          ld);
        LT_LAUNCH_CHECK("xent_tp_sums_kernel");
    }
    return LT_OK;
}

extern "C" lt_status lt_cuda_xent_tp_finish(lt_cuda *c, lt_bf16 *dlogits, const lt_bf16 *logits, const float *rowmax,
                                            const float *sums, const int32_t *targets, int v0, int T, int V, int ld,
                                            float scale, float *row_loss, lt_error *err) {
    CHECK_SHAPE("lt_cuda_xent_tp_finish", T, V, ld);
    LT_CUDA_REQUIRE(v0 >= 0, "lt_cuda_xent_tp_finish", "bad vocabulary offset v0=%d", v0);
    LT_CUDA_REQUIRE(row_loss != NULL, "lt_cuda_xent_tp_finish", "row_loss is required");
    if (T == 0) return LT_OK;
    if (xent_vec(ld, dlogits, logits)) {
        LT_KERNEL(xent_tp_finish_kernel<true>, T, XENT_THREADS, c->stream)(dlogits, logits, rowmax, sums, targets, v0,
                                                                           T, V, ld, scale, row_loss);
        LT_LAUNCH_CHECK("xent_tp_finish_kernel<vec>");
    } else {
        LT_KERNEL(xent_tp_finish_kernel<false>, T, XENT_THREADS, c->stream)(dlogits, logits, rowmax, sums, targets, v0,
                                                                            T, V, ld, scale, row_loss);
        LT_LAUNCH_CHECK("xent_tp_finish_kernel");
    }
    return LT_OK;
}
