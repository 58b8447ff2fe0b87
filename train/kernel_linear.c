/*
 * train/kernel_linear.c — the bias-free linear layer of Llama (torch.nn.Linear with the
 * Hugging Face [out, in] weight layout): y = x W^T; backward dx += dy W, dW += dy^T x.
 * Each is one cblas_sgemm (OpenBLAS; its own threads, not the lt_pool).
 */
#include <cblas.h> /* cblas_sgemm */

#include "train/kernels.h"

void lt_linear_forward(float *out, const float *x, const float *w, int T, int IN, int OUT) {
    if (T <= 0 || OUT <= 0) return;
    if (IN <= 0) { /* an empty sum: BLAS would reject lda = 0 */
        for (size_t i = 0; i < (size_t)T * OUT; i++) out[i] = 0.0f;
        return;
    }
    /* out[T,OUT] = x[T,IN] * W[OUT,IN]^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, OUT, IN, 1.0f, x, IN, w, IN, 0.0f, out, OUT);
}

void lt_linear_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, int T,
                        int IN, int OUT) {
    if (T <= 0 || IN <= 0 || OUT <= 0) return; /* nothing to add */
    /* dx[T,IN] += dout[T,OUT] * W[OUT,IN] */
    if (dx != NULL)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, IN, OUT, 1.0f, dout, OUT, w, IN, 1.0f, dx,
                    IN);
    /* dW[OUT,IN] += dout[T,OUT]^T * x[T,IN] */
    if (dw != NULL)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OUT, IN, T, 1.0f, dout, OUT, x, IN, 1.0f, dw,
                    IN);
}
