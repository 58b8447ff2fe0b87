/*
 * train/cpu/linear.c — the linear layer (torch.nn.Linear with the Hugging Face [out, in]
 * weight layout): y = x W^T; backward dx += dy W, dW += dy^T x. Each is one cblas_sgemm
 * (OpenBLAS; its own threads, not the lt_pool). Llama's layers have no bias; Qwen2's Q/K/V
 * projections add one (lt_bias_forward / _backward, plain loops: O(T n)).
 *
 * lt_linear_timing (train/cpu/kernels.h) times the sgemm calls for bench/trainer; off, it costs
 * one relaxed atomic load per call.
 */
#include <cblas.h>     /* cblas_sgemm */
#include <stdatomic.h> /* atomic_bool, atomic_uint_least64_t */
#include <time.h>      /* clock_gettime */

#include "train/cpu/kernels.h"

static atomic_bool timing_on;
static atomic_uint_least64_t timing_ns;

void lt_linear_timing(bool on) { atomic_store_explicit(&timing_on, on, memory_order_relaxed); }

double lt_linear_seconds(void) { return (double)atomic_load(&timing_ns) * 1e-9; }

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 0 when timing is off, else the start time (never 0: CLOCK_MONOTONIC has run since boot) */
static uint64_t timing_start(void) {
    return atomic_load_explicit(&timing_on, memory_order_relaxed) ? now_ns() : 0;
}

static void timing_stop(uint64_t t0) {
    if (t0 != 0) atomic_fetch_add(&timing_ns, now_ns() - t0);
}

void lt_linear_forward(float *out, const float *x, const float *w, int T, int IN, int OUT) {
    if (T <= 0 || OUT <= 0) return;
    if (IN <= 0) { /* an empty sum: BLAS would reject lda = 0 */
        for (size_t i = 0; i < (size_t)T * OUT; i++) out[i] = 0.0f;
        return;
    }
    uint64_t t0 = timing_start();
    /* out[T,OUT] = x[T,IN] * W[OUT,IN]^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, OUT, IN, 1.0f, x, IN, w, IN, 0.0f, out, OUT);
    timing_stop(t0);
}

void lt_linear_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, int T,
                        int IN, int OUT) {
    if (T <= 0 || IN <= 0 || OUT <= 0) return; /* nothing to add */
    uint64_t t0 = timing_start();
    /* dx[T,IN] += dout[T,OUT] * W[OUT,IN] */
    if (dx != NULL)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, IN, OUT, 1.0f, dout, OUT, w, IN, 1.0f, dx,
                    IN);
    /* dW[OUT,IN] += dout[T,OUT]^T * x[T,IN] */
    if (dw != NULL)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OUT, IN, T, 1.0f, dout, OUT, x, IN, 1.0f, dw,
                    IN);
    timing_stop(t0);
}

void lt_bias_forward(float *y, const float *b, int T, int n) {
    for (int t = 0; t < T; t++) {
        float *row = y + (size_t)t * (size_t)n;
        for (int j = 0; j < n; j++) row[j] += b[j];
    }
}

void lt_bias_backward(float *db, const float *dy, int T, int n) {
    for (int t = 0; t < T; t++) {
        const float *row = dy + (size_t)t * (size_t)n;
        for (int j = 0; j < n; j++) db[j] += row[j];
    }
}
