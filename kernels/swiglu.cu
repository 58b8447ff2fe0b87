/*
 * kernels/swiglu.cu — the SwiGLU gate of the Llama MLP on bf16 vectors, the twin of
 * train/cpu/swiglu.c (fp32 math):
 *   forward   out = silu(g) u,  silu(g) = g sigmoid(g),  sigmoid(g) = 1 / (1 + exp(-g))
 *   backward  dg += dout u sigmoid(g) (1 + g (1 - sigmoid(g))),  du += dout silu(g)
 * Elementwise, grid-stride; 8 elements per thread-step when n % 8 == 0 and every pointer
 * is 16-byte aligned (dev/cuda/swiglu.cu, version 2), one otherwise.
 */
#include "kernels/cuda_common.cuh" /* lt_cuda, lt_ld8/lt_st8, lt_cuda_blocks */

enum { SWIGLU_THREADS = 256 };

static __device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

__global__ void swiglu_forward_kernel(lt_bf16 *out, const lt_bf16 *gate, const lt_bf16 *up, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = lt_ld(gate + i);
        lt_st(out + i, g * sigmoid(g) * lt_ld(up + i));
    }
}

__global__ void swiglu_forward8_kernel(lt_bf16 *out, const lt_bf16 *gate, const lt_bf16 *up, size_t n8) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
        lt_bf16x8 g = lt_ld8(gate + 8 * i), u = lt_ld8(up + 8 * i), o;
#pragma unroll
        for (int k = 0; k < 8; k++) o.v[k] = g.v[k] * sigmoid(g.v[k]) * u.v[k];
        lt_st8(out + 8 * i, o);
    }
}

__global__ void swiglu_backward_kernel(lt_bf16 *dgate, lt_bf16 *dup, const lt_bf16 *dout, const lt_bf16 *gate,
                                       const lt_bf16 *up, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = lt_ld(gate + i), sg = sigmoid(g), d = lt_ld(dout + i);
        lt_st(dgate + i, lt_ld(dgate + i) + d * lt_ld(up + i) * sg * (1.0f + g * (1.0f - sg)));
        lt_st(dup + i, lt_ld(dup + i) + d * g * sg);
    }
}

__global__ void swiglu_backward8_kernel(lt_bf16 *dgate, lt_bf16 *dup, const lt_bf16 *dout, const lt_bf16 *gate,
                                        const lt_bf16 *up, size_t n8) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
        lt_bf16x8 g = lt_ld8(gate + 8 * i), u = lt_ld8(up + 8 * i), d = lt_ld8(dout + 8 * i);
        lt_bf16x8 dg = lt_ld8(dgate + 8 * i), du = lt_ld8(dup + 8 * i);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float sg = sigmoid(g.v[k]);
            dg.v[k] += d.v[k] * u.v[k] * sg * (1.0f + g.v[k] * (1.0f - sg));
            du.v[k] += d.v[k] * g.v[k] * sg;
        }
        lt_st8(dgate + 8 * i, dg);
        lt_st8(dup + 8 * i, du);
    }
}

extern "C" lt_status lt_cuda_swiglu_forward(lt_cuda *c, lt_bf16 *out, const lt_bf16 *gate, const lt_bf16 *up,
                                            size_t n, lt_error *err) {
    if (n == 0) return LT_OK;
    if (n % 8 == 0 && lt_cuda_aligned16(out) && lt_cuda_aligned16(gate) && lt_cuda_aligned16(up)) {
        LT_KERNEL(swiglu_forward8_kernel, lt_cuda_blocks(c, n / 8, SWIGLU_THREADS), SWIGLU_THREADS, c->stream)(out, gate,
                                                                                                          up, n / 8);
        LT_LAUNCH_CHECK("swiglu_forward8_kernel");
    } else {
        LT_KERNEL(swiglu_forward_kernel, lt_cuda_blocks(c, n, SWIGLU_THREADS), SWIGLU_THREADS, c->stream)(out, gate, up,
                                                                                                     n);
        LT_LAUNCH_CHECK("swiglu_forward_kernel");
    }
    return LT_OK;
}

extern "C" lt_status lt_cuda_swiglu_backward(lt_cuda *c, lt_bf16 *dgate, lt_bf16 *dup, const lt_bf16 *dout,
                                             const lt_bf16 *gate, const lt_bf16 *up, size_t n, lt_error *err) {
    if (n == 0) return LT_OK;
    if (n % 8 == 0 && lt_cuda_aligned16(dgate) && lt_cuda_aligned16(dup) && lt_cuda_aligned16(dout) &&
        lt_cuda_aligned16(gate) && lt_cuda_aligned16(up)) {
        LT_KERNEL(swiglu_backward8_kernel, lt_cuda_blocks(c, n / 8, SWIGLU_THREADS), SWIGLU_THREADS, c->stream)(
            dgate, dup, dout, gate, up, n / 8);
        LT_LAUNCH_CHECK("swiglu_backward8_kernel");
    } else {
        LT_KERNEL(swiglu_backward_kernel, lt_cuda_blocks(c, n, SWIGLU_THREADS), SWIGLU_THREADS, c->stream)(
            dgate, dup, dout, gate, up, n);
        LT_LAUNCH_CHECK("swiglu_backward_kernel");
    }
    return LT_OK;
}
