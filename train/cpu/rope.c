/*
 * train/cpu/rope.c — rotary position embedding (Su et al. 2021, RoFormer) in the
 * Hugging Face Llama form: `rotate_half` pairs element i with i + hd/2, and the angles are
 * computed in fp32 exactly as transformers' LlamaRotaryEmbedding does:
 *   inv_freq[i] = 1 / theta^((2i)/hd), angle = pos * inv_freq[i], c = cos(angle), s = sin(angle)
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
    float theta;
    float sign; /* +1 forward, -1 backward (the sine flips) */
} rope_ctx;

static void rope_row(size_t t, void *arg) {
    const rope_ctx *a = arg;
    int half = a->hd / 2;
    float *row = a->x + t * (size_t)a->n_heads * a->hd;
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)a->hd;
        float inv_freq = 1.0f / powf(a->theta, e);
        float angle = (float)a->pos[t] * inv_freq;
        float c = cosf(angle), s = a->sign * sinf(angle);
        for (int h = 0; h < a->n_heads; h++) {
            float *xh = row + (size_t)h * a->hd;
            float x0 = xh[i], x1 = xh[i + half];
            xh[i] = x0 * c - x1 * s;
            xh[i + half] = x1 * c + x0 * s;
        }
    }
}

void lt_rope_forward(float *x, const int32_t *pos, int T, int n_heads, int hd, float theta, lt_pool *pool) {
    rope_ctx a = {.x = x, .pos = pos, .n_heads = n_heads, .hd = hd, .theta = theta, .sign = 1.0f};
    lt_kernel_for(pool, (size_t)T, rope_row, &a);
}

void lt_rope_backward(float *dx, const int32_t *pos, int T, int n_heads, int hd, float theta, lt_pool *pool) {
    rope_ctx a = {.x = dx, .pos = pos, .n_heads = n_heads, .hd = hd, .theta = theta, .sign = -1.0f};
    lt_kernel_for(pool, (size_t)T, rope_row, &a);
}
