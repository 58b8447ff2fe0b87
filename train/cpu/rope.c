/*
 * train/cpu/rope.c — rotary position embedding (Su et al. 2021, RoFormer) in the
 * Hugging Face Llama form: `rotate_half` pairs element i with i + hd/2, and the angles are
 * computed in fp32 exactly as transformers' LlamaRotaryEmbedding does, from the model's
 * inverse frequencies (lt_model_rope_inv_freq, lib/model.h: 1 / theta^((2i)/hd), or Llama
 * 3.1's scaled ones):
 *   angle = pos * inv_freq[i], c = cos(angle), s = sin(angle)
 *   x[i] <- x[i] c - x[i+hd/2] s,   x[i+hd/2] <- x[i+hd/2] c + x[i] s.
 * The backward applies the transpose (rotation by -angle). Threaded over rows; a row's
 * cos/sin are computed once and applied to all of its heads.
 */
#include <math.h>

#include "train/cpu/kernels.h"

typedef struct {
    float *x;
    const int32_t *pos;
    int n_heads, hd;
    const float *inv_freq; /* [hd / 2] */
    float sign; /* +1 forward, -1 backward (the sine flips) */
} rope_ctx;

static void rope_row(size_t t, void *arg) {
    const rope_ctx *a = arg;
    int half = a->hd / 2;
    float *row = a->x + t * (size_t)a->n_heads * a->hd;
    for (int i = 0; i < half; i++) {
        float angle = (float)a->pos[t] * a->inv_freq[i];
        float c = cosf(angle), s = a->sign * sinf(angle);
        for (int h = 0; h < a->n_heads; h++) {
            float *xh = row + (size_t)h * a->hd;
            float x0 = xh[i], x1 = xh[i + half];
            xh[i] = x0 * c - x1 * s;
            xh[i + half] = x1 * c + x0 * s;
        }
    }
}

void lt_rope_forward(float *x, const int32_t *pos, int T, int n_heads, int hd, const float *inv_freq, lt_pool *pool) {
    rope_ctx a = {.x = x, .pos = pos, .n_heads = n_heads, .hd = hd, .inv_freq = inv_freq, .sign = 1.0f};
    lt_kernel_for(pool, (size_t)T, rope_row, &a);
}

void lt_rope_backward(float *dx, const int32_t *pos, int T, int n_heads, int hd, const float *inv_freq,
                      lt_pool *pool) {
    rope_ctx a = {.x = dx, .pos = pos, .n_heads = n_heads, .hd = hd, .inv_freq = inv_freq, .sign = -1.0f};
    lt_kernel_for(pool, (size_t)T, rope_row, &a);
}
