/*
 * train/cpu/swiglu.c — the SwiGLU gate of the Llama MLP (Shazeer 2020, "GLU Variants
 * Improve Transformer"; transformers' LlamaMLP: act_fn(gate_proj(x)) * up_proj(x), act_fn =
 * SiLU): out = silu(g) u, silu(g) = g sigmoid(g).
 * Backward: dg += dout u silu'(g), silu'(g) = sigmoid(g) (1 + g (1 - sigmoid(g))); du += dout silu(g).
 * Elementwise, threaded over fixed blocks of elements.
 */
#include <math.h>

#include "train/cpu/kernels.h"

enum { SWIGLU_BLOCK = 4096 }; /* elements per task */

typedef struct {
    float *out, *dgate, *dup;
    const float *gate, *up, *dout;
    size_t n;
} swiglu_ctx;

static float sigmoidf(float g) { return 1.0f / (1.0f + expf(-g)); }

static void swiglu_fwd_block(size_t b, void *arg) {
    const swiglu_ctx *a = arg;
    size_t i1 = (b + 1) * SWIGLU_BLOCK < a->n ? (b + 1) * SWIGLU_BLOCK : a->n;
    for (size_t i = b * SWIGLU_BLOCK; i < i1; i++) a->out[i] = a->gate[i] * sigmoidf(a->gate[i]) * a->up[i];
}

static void swiglu_bwd_block(size_t b, void *arg) {
    const swiglu_ctx *a = arg;
    size_t i1 = (b + 1) * SWIGLU_BLOCK < a->n ? (b + 1) * SWIGLU_BLOCK : a->n;
    for (size_t i = b * SWIGLU_BLOCK; i < i1; i++) {
        float g = a->gate[i], sg = sigmoidf(g);
        a->dgate[i] += a->dout[i] * a->up[i] * sg * (1.0f + g * (1.0f - sg));
        a->dup[i] += a->dout[i] * g * sg;
    }
}

void lt_swiglu_forward(float *out, const float *gate, const float *up, size_t n, lt_pool *pool) {
    swiglu_ctx a = {.out = out, .gate = gate, .up = up, .n = n};
    lt_kernel_for(pool, (n + SWIGLU_BLOCK - 1) / SWIGLU_BLOCK, swiglu_fwd_block, &a);
}

void lt_swiglu_backward(float *dgate, float *dup, const float *dout, const float *gate, const float *up,
                        size_t n, lt_pool *pool) {
    swiglu_ctx a = {.dgate = dgate, .dup = dup, .dout = dout, .gate = gate, .up = up, .n = n};
    lt_kernel_for(pool, (n + SWIGLU_BLOCK - 1) / SWIGLU_BLOCK, swiglu_bwd_block, &a);
}
