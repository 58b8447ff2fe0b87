/*
 * dev/cuda/gemm.cu — the linear layers' GEMM, C[M,N] = A[M,K] B[N,K]^T (bf16 in and out,
 * fp32 accumulation: a row-major linear forward, out = x W^T), through two libraries:
 *
 *   v1: cuBLAS cublasGemmEx, CUBLAS_GEMM_DEFAULT (no workspace or algorithm choice)
 *   v2: cuBLASLt with a 32 MiB workspace and the algorithm of
 *       cublasLtMatmulAlgoGetHeuristic (-> kernels/gemm.cu, which caches it per shape)
 *
 * Each is checked on 512 sampled elements of every shape against a CPU dot product in
 * double of the same bf16 inputs, and timed (TFLOP/s = 2 M N K / time). The shapes are a
 * ~1B Llama's (hidden 2048, FFN 8192, vocabulary 128256) on a unit of 8K tokens.
 *
 * Build and run:  nvcc -O3 -arch=sm_90 gemm.cu -lcublas -lcublasLt -o gemm && ./gemm [version]
 * Tolerance: 2^-8 |ref| + 2e-3 max|ref| (bf16 output rounding plus fp32 summation order).
 */
#include <cublasLt.h>
#include <cublas_v2.h>

#include "common.h"

static void blas_check(cublasStatus_t rc, const char *call, int line) {
    if (rc != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "error: cuBLAS status %d in %s (gemm.cu:%d)\n", (int)rc, call, line);
        exit(1);
    }
}
#define cublasCheck(call) blas_check((call), #call, __LINE__)

struct shape {
    int M, N, K;
    const char *name;
};

int main(int argc, char **argv) {
    int want = version_arg(argc, argv);
    const shape shapes[] = {
        {8192, 2048, 2048, "attention out (T x C x C)"},
        {8192, 8192, 2048, "MLP up/gate (T x F x C)"},
        {8192, 2048, 8192, "MLP down (T x C x F)"},
        {8192, 128256, 2048, "LM head (T x V x C)"},
        {1000, 1000, 1000, "odd sizes"},
    };
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    cublasCheck(cublasCreate(&blas));
    cublasCheck(cublasLtCreate(&lt));
    void *workspace;
    const size_t ws = 32 << 20;
    cudaCheck(cudaMalloc(&workspace, ws));
    int fails = 0;
    for (const shape &s : shapes) {
        size_t na = (size_t)s.M * s.K, nb = (size_t)s.N * s.K, nc = (size_t)s.M * s.N;
        float *A = rand_bf16_values(na, -1, 1), *B = rand_bf16_values(nb, -1, 1);
        bf16 *dA = to_device_bf16(A, na), *dB = to_device_bf16(B, nb), *dC;
        cudaCheck(cudaMalloc(&dC, nc * 2));
        printf("%s: M=%d N=%d K=%d\n", s.name, s.M, s.N, s.K);
        /* column-major: C^T[N,M] = B^T... as op(B)[N,K] x A^T[K,M]: m = N, n = M, k = K */
        const float alpha = 1.0f, beta = 0.0f;
        cublasLtMatmulDesc_t desc;
        cublasLtMatrixLayout_t la, lb, lc;
        cublasLtMatmulAlgo_t algo;
        cublasOperation_t tT = CUBLAS_OP_T, tN = CUBLAS_OP_N;
        cublasCheck(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &tT, sizeof tT));
        cublasCheck(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tN, sizeof tN));
        cublasCheck(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.K, s.N, s.K));
        cublasCheck(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.K, s.M, s.K));
        cublasCheck(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, s.N, s.M, s.N));
        cublasLtMatmulPreference_t pref;
        cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
        cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
        cublasLtMatmulHeuristicResult_t res;
        int returned = 0;
        cublasCheck(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &res, &returned));
        if (returned < 1) {
            fprintf(stderr, "error: no cuBLASLt algorithm for this shape\n");
            return 1;
        }
        algo = res.algo;
        for (int v = 1; v <= 2; v++) {
            if (want && want != v) continue;
            auto launch = [&]() {
                if (v == 1)
                    cublasCheck(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, s.N, s.M, s.K, &alpha, dB, CUDA_R_16BF, s.K,
                                             dA, CUDA_R_16BF, s.K, &beta, dC, CUDA_R_16BF, s.N, CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT));
                else
                    cublasCheck(cublasLtMatmul(lt, desc, &alpha, dB, la, dA, lb, &beta, dC, lc, dC, lc, &algo,
                                               workspace, ws, 0));
            };
            cudaCheck(cudaMemset(dC, 0, nc * 2));
            launch();
            cudaCheck(cudaDeviceSynchronize());
            float *Cg = from_device_bf16(dC, nc);
            enum { SAMPLES = 512 };
            float got[SAMPLES], ref[SAMPLES];
            for (int k = 0; k < SAMPLES; k++) {
                size_t i = (size_t)(rand01() * s.M), j = (size_t)(rand01() * s.N);
                double acc = 0.0;
                for (int q = 0; q < s.K; q++) acc += (double)A[i * s.K + q] * (double)B[j * s.K + q];
                got[k] = Cg[i * s.N + j], ref[k] = (float)acc;
            }
            printf("  v%d (%s)\n", v, v == 1 ? "cublasGemmEx default" : "cuBLASLt heuristic");
            fails += !validate("C samples", got, ref, SAMPLES, 1.0 / 256, 2e-3);
            float ms = time_ms(10, launch);
            printf("    %.3f ms, %.1f TFLOP/s\n", ms, 2.0 * s.M * (double)s.N * s.K / (ms * 1e9));
            free(Cg);
        }
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(lc);
        cublasLtMatmulDescDestroy(desc);
        cudaCheck(cudaFree(dA));
        cudaCheck(cudaFree(dB));
        cudaCheck(cudaFree(dC));
        free(A), free(B);
    }
    printf("%s\n", fails ? "SOME VERSIONS FAILED" : "all versions match the CPU reference");
    return fails ? 1 : 0;
}
