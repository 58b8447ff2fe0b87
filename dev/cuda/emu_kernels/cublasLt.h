/*
 * dev/cuda/emu_kernels/cublasLt.h — the part of cuBLASLt kernels/gemm.cu uses, for the
 * emulated kernels (see cuda_runtime.h): descriptors are plain structs and
 * cublasLtMatmul is a naive column-major D = alpha op(A) op(B) + beta C in fp32 (bf16 or
 * fp32 C/D), which refuses (CUBLAS_STATUS_INVALID_VALUE) layouts inconsistent with the
 * transposes and shapes and pointers less aligned than the heuristic was promised, so a
 * wrong leading dimension, transpose or cache key in gemm.cu shows up as an error or a
 * wrong product.
 */
#ifndef LT_EMU_KERNELS_CUBLASLT_H
#define LT_EMU_KERNELS_CUBLASLT_H

#include <cstdint>
#include <cstring>

#include "cuda_bf16.h"
#include "cuda_runtime.h"

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16,
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4 } cublasLtMatmulDescAttributes_t;
typedef enum {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
} cublasLtMatmulPreferenceAttributes_t;

struct lt_emu_handle {
    int dummy;
};
struct lt_emu_desc {
    int transa, transb;
};
struct lt_emu_layout {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
};
struct lt_emu_pref {
    uint32_t align[4]; /* A, B, C, D */
};
typedef lt_emu_handle *cublasLtHandle_t;
typedef lt_emu_desc *cublasLtMatmulDesc_t;
typedef lt_emu_layout *cublasLtMatrixLayout_t;
typedef lt_emu_pref *cublasLtMatmulPreference_t;
typedef struct {
    uint32_t align[4];
} cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
} cublasLtMatmulHeuristicResult_t;

inline int lt_emu_heuristic_calls = 0; /* how often the heuristic ran (the cache's job is to keep it low) */

inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) { *h = new lt_emu_handle(); return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t, cudaDataType_t) {
    *d = new lt_emu_desc();
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { delete d; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                                     const void *v, size_t n) {
    if (n != sizeof(cublasOperation_t)) return CUBLAS_STATUS_INVALID_VALUE;
    cublasOperation_t op;
    std::memcpy(&op, v, n);
    (a == CUBLASLT_MATMUL_DESC_TRANSA ? d->transa : d->transb) = op == CUBLAS_OP_T;
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t t, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
    if (ld < (int64_t)rows || ld < 1) return CUBLAS_STATUS_INVALID_VALUE; /* column-major: ld >= rows */
    *l = new lt_emu_layout{t, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { delete l; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = new lt_emu_pref{{256, 256, 256, 256}};
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { delete p; return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                           cublasLtMatmulPreferenceAttributes_t a, const void *v,
                                                           size_t n) {
    if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return n == 8 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
    if (n != 4) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&p->align[a - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], v, 4);
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                                     cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                                     cublasLtMatrixLayout_t, cublasLtMatmulPreference_t p, int want,
                                                     cublasLtMatmulHeuristicResult_t *r, int *returned) {
    lt_emu_heuristic_calls++;
    if (want < 1) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(r->algo.align, p->align, sizeof p->align);
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

inline float lt_emu_get(const void *p, cudaDataType_t t, size_t i) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                                     cublasLtMatrixLayout_t la, const void *B, cublasLtMatrixLayout_t lb,
                                     const void *beta, const void *C, cublasLtMatrixLayout_t lc, void *D,
                                     cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t *algo, void *, size_t,
                                     cudaStream_t) {
    uint64_t m = ld->rows, n = ld->cols;
    uint64_t k = d->transa ? la->rows : la->cols;
    uint64_t am = d->transa ? la->cols : la->rows;
    uint64_t bk = d->transb ? lb->cols : lb->rows, bn = d->transb ? lb->rows : lb->cols;
    if (am != m || bk != k || bn != n || lc->rows != m || lc->cols != n || lc->type != ld->type)
        return CUBLAS_STATUS_INVALID_VALUE;
    const void *ptr[4] = {A, B, C, D};
    for (int i = 0; i < 4; i++)
        if ((uintptr_t)ptr[i] % algo->align[i] != 0) return CUBLAS_STATUS_INVALID_VALUE; /* promised more */
    float al, be;
    std::memcpy(&al, alpha, 4);
    std::memcpy(&be, beta, 4);
    for (uint64_t j = 0; j < n; j++)
        for (uint64_t i = 0; i < m; i++) {
            float s = 0.0f;
            for (uint64_t l = 0; l < k; l++) {
                size_t ia = d->transa ? l + i * (size_t)la->ld : i + l * (size_t)la->ld;
                size_t ib = d->transb ? j + l * (size_t)lb->ld : l + j * (size_t)lb->ld;
                s += lt_emu_get(A, la->type, ia) * lt_emu_get(B, lb->type, ib);
            }
            size_t ic = i + j * (size_t)lc->ld, id = i + j * (size_t)ld->ld;
            float v = al * s + (be != 0.0f ? be * lt_emu_get(C, lc->type, ic) : 0.0f);
            if (ld->type == CUDA_R_32F) ((float *)D)[id] = v;
            else ((__nv_bfloat16 *)D)[id] = __float2bfloat16(v);
        }
    return CUBLAS_STATUS_SUCCESS;
}

#endif
