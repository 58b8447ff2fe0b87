/*
 * kernels/rope.cu — rotary position embedding in place on bf16 [T, n_heads*hd] rows, the
 * twin of train/cpu/rope.c (Hugging Face rotate_half: element i pairs with i + hd/2):
 *   angle = pos[t] * inv_freq[i], inv_freq the model's (lt_model_rope_inv_freq, lib/model.h:
 *   1 / theta^(2i/hd), or Llama 3.1's scaled frequencies)
 *   forward   x[i] <- x[i] cos - x[i+hd/2] sin,  x[i+hd/2] <- x[i+hd/2] cos + x[i] sin
 *   backward  the same with sin negated (the transpose).
 *
 * inv_freq is computed once on the host (the array the CPU reference reads too) and
 * passed to the kernel by value, so the angles are the CPU's bit for bit; cos/sin are
 * CUDA's accurate cosf/sinf (not the fast intrinsics: angles reach pos ~ 10^5 radians,
 * where __sinf is useless). One thread per (row, i):
 * the pair's cos/sin are computed once and applied to every head
 * (dev/cuda/rope.cu, version 2).
 */
#include <math.h>

#include "kernels/cuda_common.cuh" /* lt_cuda, lt_ld/lt_st */

enum { ROPE_MAX_HALF = 256, ROPE_THREADS = 256 }; /* head dims up to 512 */

struct rope_freqs {
    float inv_freq[ROPE_MAX_HALF]; /* 1 KiB of kernel parameters (the limit is 4 KiB) */
};

__global__ void rope_kernel(lt_bf16 *x, const int32_t *pos, int T, int n_heads, int hd, float sign,
                            const rope_freqs f) {
    int half = hd / 2;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * (size_t)half) return;
    int t = (int)(idx / (size_t)half), i = (int)(idx % (size_t)half);
    float angle = (float)pos[t] * f.inv_freq[i];
    float cs = cosf(angle), sn = sign * sinf(angle);
    lt_bf16 *row = x + (size_t)t * (size_t)n_heads * (size_t)hd;
    for (int h = 0; h < n_heads; h++) {
        lt_bf16 *xh = row + (size_t)h * (size_t)hd;
        float x0 = lt_ld(xh + i), x1 = lt_ld(xh + i + half);
        lt_st(xh + i, x0 * cs - x1 * sn);
        lt_st(xh + i + half, x1 * cs + x0 * sn);
    }
}

static lt_status rope(lt_cuda *c, lt_bf16 *x, const int32_t *pos, int T, int n_heads, int hd, const float *inv_freq,
                      float sign, const char *fn, lt_error *err) {
    LT_CUDA_REQUIRE(T >= 0 && n_heads > 0 && hd > 0 && hd % 2 == 0 && hd / 2 <= ROPE_MAX_HALF && inv_freq, fn,
                    "bad shape T=%d n_heads=%d hd=%d (hd must be even and at most %d) or no frequencies", T, n_heads,
                    hd, 2 * ROPE_MAX_HALF);
    if (T == 0) return LT_OK;
    rope_freqs f;
    for (int i = 0; i < hd / 2; i++) f.inv_freq[i] = inv_freq[i];
    for (int i = hd / 2; i < ROPE_MAX_HALF; i++) f.inv_freq[i] = 0.0f;
    size_t n = (size_t)T * (size_t)(hd / 2);
    unsigned blocks = (unsigned)((n + ROPE_THREADS - 1) / ROPE_THREADS); /* T*256/256 fits unsigned */
    LT_KERNEL(rope_kernel, blocks, ROPE_THREADS, c->stream)(x, pos, T, n_heads, hd, sign, f);
    LT_LAUNCH_CHECK("rope_kernel");
    return LT_OK;
}

extern "C" lt_status lt_cuda_rope_forward(lt_cuda *c, lt_bf16 *x, const int32_t *pos, int T, int n_heads, int hd,
                                          const float *inv_freq, lt_error *err) {
    return rope(c, x, pos, T, n_heads, hd, inv_freq, 1.0f, "lt_cuda_rope_forward", err);
}

extern "C" lt_status lt_cuda_rope_backward(lt_cuda *c, lt_bf16 *dx, const int32_t *pos, int T, int n_heads, int hd,
                                           const float *inv_freq, lt_error *err) {
    return rope(c, dx, pos, T, n_heads, hd, inv_freq, -1.0f, "lt_cuda_rope_backward", err);
}
