/*
 * train/cpu/rmsnorm.c — Llama RMSNorm (Zhang & Sennrich 2019; transformers'
 * LlamaRMSNorm, computed in fp32): rstd = 1/sqrt(mean(x^2) + eps), out = x * rstd * w.
 *
 * Backward, with g = dout * w and r = rstd:
 *   dx[c] += r g[c] - r^3 x[c] (sum_j g[j] x[j]) / C
 *   dw[c] += sum_t dout[t,c] x[t,c] r[t]
 * dx is threaded over rows; dw (a sum over rows) over column blocks, each block summing
 * the rows in order, so the result is the same for every thread count.
 */
#include <math.h>

#include "train/cpu/kernels.h"

typedef struct {
    float *out, *rstd, *dx, *dw;
    const float *x, *w, *dout, *rstd_in;
    int T, C;
    float eps;
} rms_ctx;

static void rms_fwd_row(size_t t, void *arg) {
    const rms_ctx *a = arg;
    const float *x = a->x + t * (size_t)a->C;
    float *o = a->out + t * (size_t)a->C;
    float ss = 0.0f;
    for (int c = 0; c < a->C; c++) ss += x[c] * x[c];
    float r = 1.0f / sqrtf(ss / (float)a->C + a->eps);
    a->rstd[t] = r;
    for (int c = 0; c < a->C; c++) o[c] = x[c] * r * a->w[c];
}

void lt_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int T, int C, float eps,
                        lt_pool *pool) {
    rms_ctx a = {.out = out, .rstd = rstd, .x = x, .w = w, .T = T, .C = C, .eps = eps};
    lt_kernel_for(pool, (size_t)T, rms_fwd_row, &a);
}

static void rms_bwd_dx_row(size_t t, void *arg) {
    const rms_ctx *a = arg;
    const float *x = a->x + t * (size_t)a->C;
    const float *g = a->dout + t * (size_t)a->C;
    float *dx = a->dx + t * (size_t)a->C;
    float r = a->rstd_in[t];
    float dot = 0.0f; /* sum_j dout[j] w[j] x[j] */
    for (int c = 0; c < a->C; c++) dot += g[c] * a->w[c] * x[c];
    float k = r * r * r * dot / (float)a->C;
    for (int c = 0; c < a->C; c++) dx[c] += r * g[c] * a->w[c] - k * x[c];
}

enum { RMS_DW_COLS = 64 }; /* columns per dw task */

static void rms_bwd_dw_block(size_t b, void *arg) {
    const rms_ctx *a = arg;
    int c0 = (int)b * RMS_DW_COLS;
    int c1 = c0 + RMS_DW_COLS < a->C ? c0 + RMS_DW_COLS : a->C;
    for (int c = c0; c < c1; c++) {
        float s = 0.0f;
        for (int t = 0; t < a->T; t++) {
            size_t i = (size_t)t * a->C + c;
            s += a->dout[i] * a->x[i] * a->rstd_in[t];
        }
        a->dw[c] += s;
    }
}

void lt_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                         const float *rstd, int T, int C, lt_pool *pool) {
    rms_ctx a = {.dx = dx, .dw = dw, .dout = dout, .x = x, .w = w, .rstd_in = rstd, .T = T, .C = C};
    lt_kernel_for(pool, (size_t)T, rms_bwd_dx_row, &a);
    lt_kernel_for(pool, (size_t)(C + RMS_DW_COLS - 1) / RMS_DW_COLS, rms_bwd_dw_block, &a);
}
