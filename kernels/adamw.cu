/*
 * kernels/adamw.cu — the optimizer's kernels: the sum of squares of the fp32 gradients
 * (global-norm clipping), their scaling, and AdamW on fp32 master weights writing the
 * bf16 copy the other kernels read.
 *
 * The AdamW update is train/model/optim.c's lt_adamw_update_range operation for operation
 * (torch.optim.AdamW's order, see optim.c's header):
 *   p  = p * (1 - lr wd)                       (decay; 1 for vectors)
 *   m  = lerp(m, g, 1 - beta1)                 (torch's lerp: fma(w, g - m, m) for |w| < 0.5)
 *   v  = v beta2 + (1 - beta2) g g
 *   p  = p + (-lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps),   bc_i = 1 - beta_i^t
 * with the per-step scalars computed on the host in double and rounded to float once,
 * as the CPU does. nvcc would contract a*b + c into an fma (the CPU's x86-64 baseline
 * build does not), so every operation is an explicit round-to-nearest intrinsic
 * (__fmul_rn, __fadd_rn, __fdiv_rn; sqrtf is IEEE without fast math): the GPU's master
 * weights, m and v equal the CPU's bit for bit on the same inputs.
 *
 * The sum of squares is deterministic: fp32 per thread and block, the blocks' partials
 * added in double in a fixed order (kernels/context.cu's two-stage sum).
 */
#include <math.h>

#include "kernels/cuda_common.cuh" /* lt_cuda, lt_block_sum, lt_cuda_finish_sum */

enum { ADAMW_THREADS = 256 };

__global__ void sum_squares_partial_kernel(double *partial, const float *g, size_t n) {
    __shared__ float sh[LT_BLOCK_SUM_SHARED];
    float s = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += g[i] * g[i];
    s = lt_block_sum(s, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = (double)s;
}

__global__ void scale_kernel(float *g, size_t n, float s) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        g[i] *= s;
}

__global__ void accumulate_f32_kernel(float *dst, const float *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] += src[i];
}

struct adamw_scalars {
    float decay, w1, b2, one_minus_b2, bc2_sqrt, eps, neg_step;
};

/* torch_lerp of train/model/optim.c without contraction. */
static __device__ __forceinline__ float lerp_rn(float self, float end, float w) {
    float d = __fsub_rn(end, self);
    if (fabsf(w) < 0.5f) return fmaf(w, d, self);
    return fmaf(__fsub_rn(w, 1.0f), d, end);
}

__global__ void adamw_kernel(float *p, lt_bf16 *p16, const float *g, float *m, float *v, size_t n,
                             const adamw_scalars k) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float pi = __fmul_rn(p[i], k.decay);
        float gi = g[i];
        float mi = lerp_rn(m[i], gi, k.w1);
        float vi = __fadd_rn(__fmul_rn(v[i], k.b2), __fmul_rn(__fmul_rn(k.one_minus_b2, gi), gi));
        float denom = __fadd_rn(__fdiv_rn(sqrtf(vi), k.bc2_sqrt), k.eps);
        float pn = __fadd_rn(pi, __fdiv_rn(__fmul_rn(k.neg_step, mi), denom));
        p[i] = pn;
        lt_st(p16 + i, pn);
        m[i] = mi;
        v[i] = vi;
    }
}

extern "C" lt_status lt_cuda_sum_squares(lt_cuda *c, const float *g, size_t n, double *host_sum, lt_error *err) {
    *host_sum = 0.0;
    if (n == 0) return LT_OK;
    unsigned blocks = lt_cuda_sum_blocks(n);
    LT_KERNEL(sum_squares_partial_kernel, blocks, LT_CUDA_SUM_THREADS, c->stream)(c->reduce, g, n);
    LT_LAUNCH_CHECK("sum_squares_partial_kernel");
    return lt_cuda_finish_sum(c, blocks, host_sum, err);
}

extern "C" lt_status lt_cuda_sum_squares_into(lt_cuda *c, const float *g, size_t n, int slot, bool first,
                                               lt_error *err) {
    LT_CUDA_REQUIRE(slot >= 0 && slot < LT_CUDA_SUM_SLOTS, "lt_cuda_sum_squares_into", "no sum slot %d", slot);
    unsigned blocks = lt_cuda_sum_blocks(n);
    if (n == 0) { /* the sum 0: stage 2 over one zero partial */
        LT_CUDA_CHECK(cudaMemsetAsync(c->reduce, 0, sizeof(double), c->stream));
    } else {
        LT_KERNEL(sum_squares_partial_kernel, blocks, LT_CUDA_SUM_THREADS, c->stream)(c->reduce, g, n);
        LT_LAUNCH_CHECK("sum_squares_partial_kernel");
    }
    return lt_cuda_finish_sum_into(c, blocks, slot, first, err);
}

extern "C" lt_status lt_cuda_scale(lt_cuda *c, float *g, size_t n, float s, lt_error *err) {
    if (n == 0) return LT_OK;
    LT_KERNEL(scale_kernel, lt_cuda_blocks(c, n, ADAMW_THREADS), ADAMW_THREADS, c->stream)(g, n, s);
    LT_LAUNCH_CHECK("scale_kernel");
    return LT_OK;
}

extern "C" lt_status lt_cuda_accumulate_f32(lt_cuda *c, float *dst, const float *src, size_t n, lt_error *err) {
    if (n == 0) return LT_OK;
    LT_KERNEL(accumulate_f32_kernel, lt_cuda_blocks(c, n, ADAMW_THREADS), ADAMW_THREADS, c->stream)(dst, src, n);
    LT_LAUNCH_CHECK("accumulate_f32_kernel");
    return LT_OK;
}

extern "C" lt_status lt_cuda_adamw(lt_cuda *c, float *master, lt_bf16 *bf16_copy, const float *grad, float *m,
                                   float *v, size_t n, double lr, double beta1, double beta2, double eps,
                                   double decay, int64_t t, lt_error *err) {
    LT_CUDA_REQUIRE(t >= 1, "lt_cuda_adamw", "step t=%lld: t counts updates and is at least 1", (long long)t);
    if (n == 0) return LT_OK;
    /* exactly lt_adamw_update_range's scalars */
    double bc1 = 1.0 - pow(beta1, (double)t);
    double bc2 = 1.0 - pow(beta2, (double)t);
    adamw_scalars k;
    k.w1 = (float)(1.0 - beta1);
    k.b2 = (float)beta2;
    k.one_minus_b2 = (float)(1.0 - beta2);
    k.bc2_sqrt = (float)sqrt(bc2);
    k.eps = (float)eps;
    k.neg_step = (float)(-(lr / bc1));
    k.decay = decay != 0.0 ? (float)(1.0 - lr * decay) : 1.0f;
    LT_KERNEL(adamw_kernel, lt_cuda_blocks(c, n, ADAMW_THREADS), ADAMW_THREADS, c->stream)(master, bf16_copy, grad, m, v,
                                                                                       n, k);
    LT_LAUNCH_CHECK("adamw_kernel");
    return LT_OK;
}
