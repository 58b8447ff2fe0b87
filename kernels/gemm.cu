/*
 * kernels/gemm.cu — the model's matrix products through cuBLASLt: bf16 A and B, fp32
 * accumulation (CUBLAS_COMPUTE_32F), bf16 or fp32 C/D, beta = 1 to accumulate into the
 * gradient buffers (train/cpu/kernels.h's "backward ADDS" convention).
 *
 * Row-major on the C side, column-major in cuBLAS: a row-major X[R, K] is the
 * column-major X^T[K, R] with leading dimension K, so every product is written as its
 * transpose (llm.c's matmul_forward does the same):
 *   forward  out[T,OUT] = x W^T  ->  out^T[OUT,T] = op_T(W^T[IN,OUT]) x^T[IN,T]     (m=OUT, n=T, k=IN)
 *   dx[T,IN] += dout W           ->  dx^T[IN,T]  += W^T[IN,OUT] dout^T[OUT,T]       (m=IN,  n=T, k=OUT)
 *   dw[OUT,IN] += dout^T x       ->  dw^T[IN,OUT] += x^T[IN,T] op_T(dout^T[OUT,T]) (m=IN, n=OUT, k=T)
 *
 * The algorithm cache: a plan (matmul descriptor, the four layouts, the heuristic's
 * algorithm) per key (m, n, k, leading dimensions, transposes, D type, beta != 0, and the
 * alignment class of each pointer: cuBLASLt's heuristic assumes 256-byte aligned
 * pointers unless told otherwise, so the alignment we promise it is part of the key).
 * A shape seen before costs a linear scan of a few dozen keys and no heuristic call.
 *
 * Leading dimensions: every operand is dense (ld = its row length) but the LM head's
 * logits, whose rows are ld = V rounded up to 64 elements apart (the `ld` of
 * lt_cuda_linear_forward / _backward; train/model/pass.c's head): with V = 50257 (odd) a
 * dense [T, V] D or B would be only 2-byte aligned from its second row on, and cuBLASLt
 * falls back to its slow 2-byte-aligned kernels for the whole product.
 *
 * A linear layer's bias (Qwen2's q/k/v_proj; train/cpu/linear.c's lt_bias_*) is two small
 * kernels at the end: y[t, j] += b[j] (fp32 math, bf16 out), and db[j] += sum_t dy[t, j]
 * made deterministic as kernels/rmsnorm.cu's dw: a fixed chunk of rows per 32 columns into
 * partials[R][n] (R depends on T only), then each column's R partials added in order.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_common.cuh" /* lt_cuda, LT_CUBLAS_CHECK */

typedef struct lt_gemm_key {
    int64_t m, n, k, lda, ldb, ldd;
    int transa, transb; /* 1: op = transpose */
    int d_f32;          /* D (and C) fp32, else bf16 */
    int accumulate;     /* beta = 1 */
    int align_a, align_b, align_d; /* bytes, a power of two <= 256 */
} lt_gemm_key;

struct lt_gemm_plan {
    lt_gemm_key key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
};

/* Largest power of two (<= 256) dividing the address. */
static int align_of(const void *p) {
    uintptr_t u = (uintptr_t)p;
    int a = 1;
    while (a < 256 && (u & (uintptr_t)(2 * a - 1)) == 0) a *= 2;
    return a;
}

static void plan_destroy(struct lt_gemm_plan *p) {
    if (p->desc != NULL) cublasLtMatmulDescDestroy(p->desc);
    if (p->a != NULL) cublasLtMatrixLayoutDestroy(p->a);
    if (p->b != NULL) cublasLtMatrixLayoutDestroy(p->b);
    if (p->d != NULL) cublasLtMatrixLayoutDestroy(p->d);
    memset(p, 0, sizeof *p);
}

void lt_cuda_gemm_cache_free(lt_cuda *c) {
    for (int i = 0; i < c->n_gemm; i++) plan_destroy(&c->gemm[i]);
    free(c->gemm);
    c->gemm = NULL;
    c->n_gemm = c->cap_gemm = 0;
}

extern "C" int lt_cuda_gemm_cache_size(const lt_cuda *c) { return c->n_gemm; }

/* Build the descriptors of `key` and ask the heuristic for its best algorithm. */
static lt_status plan_create(lt_cuda *c, const lt_gemm_key *key, struct lt_gemm_plan *p, lt_error *err) {
    memset(p, 0, sizeof *p);
    p->key = *key;
    lt_status st = LT_OK;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t result;
    int returned = 0;
    cublasOperation_t ta = key->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = key->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType_t dt = key->d_f32 ? CUDA_R_32F : CUDA_R_16BF;
    uint64_t ws = LT_CUDA_WORKSPACE_BYTES;
    uint32_t al_a = (uint32_t)key->align_a, al_b = (uint32_t)key->align_b, al_d = (uint32_t)key->align_d;
#define PLAN_TRY(call)                                                                      \
    do {                                                                                    \
        cublasStatus_t r_ = (call);                                                         \
        if (r_ != CUBLAS_STATUS_SUCCESS) { st = lt_cuda_fail_blas(err, r_, #call, __FILE__, __LINE__); goto fail; } \
    } while (0)
    PLAN_TRY(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    PLAN_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    PLAN_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    /* stored (column-major) shapes: op(A) is m x k, op(B) is k x n */
    PLAN_TRY(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, key->transa ? key->k : key->m,
                                        key->transa ? key->m : key->k, key->lda));
    PLAN_TRY(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, key->transb ? key->n : key->k,
                                        key->transb ? key->k : key->n, key->ldb));
    PLAN_TRY(cublasLtMatrixLayoutCreate(&p->d, dt, key->m, key->n, key->ldd));
    PLAN_TRY(cublasLtMatmulPreferenceCreate(&pref));
    PLAN_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    PLAN_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
    PLAN_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
    PLAN_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof al_d));
    PLAN_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof al_d));
    PLAN_TRY(cublasLtMatmulAlgoGetHeuristic(c->lt, p->desc, p->a, p->b, p->d, p->d, pref, 1, &result, &returned));
#undef PLAN_TRY
    if (returned < 1) {
        st = lt_fail(err, LT_ERR_INTERNAL, "cublasLtMatmulAlgoGetHeuristic",
                     "no cuBLASLt algorithm for m=%lld n=%lld k=%lld (op %c%c, D %s, beta %d, alignment %d/%d/%d bytes)",
                     (long long)key->m, (long long)key->n, (long long)key->k, key->transa ? 'T' : 'N',
                     key->transb ? 'T' : 'N', key->d_f32 ? "fp32" : "bf16", key->accumulate, key->align_a,
                     key->align_b, key->align_d);
        goto fail;
    }
    p->algo = result.algo;
    cublasLtMatmulPreferenceDestroy(pref);
    return LT_OK;
fail:
    if (pref != NULL) cublasLtMatmulPreferenceDestroy(pref);
    plan_destroy(p);
    return st;
}

static lt_status plan_for(lt_cuda *c, const lt_gemm_key *key, struct lt_gemm_plan **out, lt_error *err) {
    for (int i = 0; i < c->n_gemm; i++)
        if (memcmp(&c->gemm[i].key, key, sizeof *key) == 0) {
            *out = &c->gemm[i];
            return LT_OK;
        }
    if (c->n_gemm == c->cap_gemm) {
        int cap = c->cap_gemm ? 2 * c->cap_gemm : 16;
        struct lt_gemm_plan *g = (struct lt_gemm_plan *)realloc(c->gemm, (size_t)cap * sizeof *g);
        if (g == NULL) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the GEMM algorithm cache");
        c->gemm = g;
        c->cap_gemm = cap;
    }
    lt_status st = plan_create(c, key, &c->gemm[c->n_gemm], err);
    if (st != LT_OK) return st;
    *out = &c->gemm[c->n_gemm++];
    return LT_OK;
}

/* D[m,n] (+)= op(A) op(B), column-major, bf16 A/B, D bf16 or fp32. */
static lt_status gemm(lt_cuda *c, int transa, int transb, int64_t m, int64_t n, int64_t k, const lt_bf16 *A,
                      int64_t lda, const lt_bf16 *B, int64_t ldb, void *D, int64_t ldd, int d_f32, int accumulate,
                      lt_error *err) {
    if (m == 0 || n == 0) return LT_OK;
    if (k == 0) { /* an empty sum: D = 0, or D unchanged when accumulating */
        if (accumulate) return LT_OK;
        size_t es = d_f32 ? 4 : 2;
        LT_CUDA_CHECK(cudaMemset2DAsync(D, (size_t)ldd * es, 0, (size_t)m * es, (size_t)n, c->stream));
        return LT_OK;
    }
    lt_gemm_key key;
    memset(&key, 0, sizeof key); /* the key is compared with memcmp: padding zeroed */
    key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb, key.ldd = ldd;
    key.transa = transa, key.transb = transb, key.d_f32 = d_f32, key.accumulate = accumulate;
    key.align_a = align_of(A), key.align_b = align_of(B), key.align_d = align_of(D);
    struct lt_gemm_plan *p = NULL;
    lt_status st = plan_for(c, &key, &p, err);
    if (st != LT_OK) return st;
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    LT_CUBLAS_CHECK(cublasLtMatmul(c->lt, p->desc, &alpha, A, p->a, B, p->b, &beta, D, p->d, D, p->d, &p->algo,
                                   c->workspace, LT_CUDA_WORKSPACE_BYTES, c->stream));
    if (c->sync_each) /* the debug mode LONGTAIL_CUDA_SYNC (kernels/cuda_common.cuh) */
        return lt_cuda_sync_check(c, err, __FILE__, __LINE__, "cublasLtMatmul m=%lld n=%lld k=%lld (op %c%c, D %s%s)",
                                  (long long)m, (long long)n, (long long)k, transa ? 'T' : 'N', transb ? 'T' : 'N',
                                  d_f32 ? "fp32" : "bf16", accumulate ? ", accumulating" : "");
    return LT_OK;
}

#define CHECK_DIMS(fn, T, IN, OUT) \
    LT_CUDA_REQUIRE((T) >= 0 && (IN) >= 0 && (OUT) >= 0, fn, "negative shape T=%d IN=%d OUT=%d", (T), (IN), (OUT))

#define CHECK_LD(fn, ld, OUT) \
    LT_CUDA_REQUIRE((ld) >= (OUT) && (ld) >= 1, fn, "row stride ld=%d below OUT=%d", (ld), (OUT))

/* ld: out's row stride (the LM head's padded logits rows; OUT for a dense [T, OUT]); the
 * GEMM writes columns [0, OUT) of each row and never touches [OUT, ld). */
extern "C" lt_status lt_cuda_linear_forward(lt_cuda *c, lt_bf16 *out, const lt_bf16 *x, const lt_bf16 *w, int T,
                                            int IN, int OUT, int ld, lt_error *err) {
    CHECK_DIMS("lt_cuda_linear_forward", T, IN, OUT);
    CHECK_LD("lt_cuda_linear_forward", ld, OUT);
    return gemm(c, 1, 0, OUT, T, IN, w, IN, x, IN, out, ld, 0, 0, err);
}

/* ld: dout's row stride; its columns [OUT, ld) are never read (k = OUT for dx, m = OUT
 * rows of op(B) for dw). */
extern "C" lt_status lt_cuda_linear_backward(lt_cuda *c, lt_bf16 *dx, float *dw, const lt_bf16 *dout,
                                             const lt_bf16 *x, const lt_bf16 *w, int T, int IN, int OUT, int ld,
                                             lt_error *err) {
    CHECK_DIMS("lt_cuda_linear_backward", T, IN, OUT);
    CHECK_LD("lt_cuda_linear_backward", ld, OUT);
    lt_status st;
    if (dx != NULL && (st = gemm(c, 0, 0, IN, T, OUT, w, IN, dout, ld, dx, IN, 0, 1, err)) != LT_OK) return st;
    if (dw != NULL && (st = gemm(c, 0, 1, IN, OUT, T, x, IN, dout, ld, dw, IN, 1, 1, err)) != LT_OK) return st;
    return LT_OK;
}

extern "C" lt_status lt_cuda_gemm_bf16(lt_cuda *c, lt_bf16 *C, const lt_bf16 *A, const lt_bf16 *B, int M, int N,
                                       int K, lt_error *err) {
    CHECK_DIMS("lt_cuda_gemm_bf16", M, K, N);
    return gemm(c, 1, 0, N, M, K, B, K, A, K, C, N, 0, 0, err);
}

/* ---------------------------------------------------------------- bias */

enum { BIAS_THREADS = 256, BIAS_COLS = 32, BIAS_ROWS = 8, BIAS_MAX_CHUNKS = 128, BIAS_ROWS_PER_CHUNK = 64 };

__global__ void bias_forward_kernel(lt_bf16 *y, const lt_bf16 *b, size_t total, int n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        lt_st(y + i, lt_ld(y + i) + lt_ld(b + i % (size_t)n));
}

/* Block (bx, by): columns bx*32 .. +32, rows [T by / R, T (by+1) / R); thread (tx, ty) sums
 * rows ty, ty+8, ... of column bx*32+tx; the 8 sums are added in ty order. */
__global__ void bias_grad_partial_kernel(float *partial, const lt_bf16 *dy, int T, int n) {
    __shared__ float sh[BIAS_ROWS][BIAS_COLS + 1];
    int j = blockIdx.x * BIAS_COLS + threadIdx.x;
    int R = gridDim.y;
    int t0 = (int)((int64_t)T * blockIdx.y / R), t1 = (int)((int64_t)T * (blockIdx.y + 1) / R);
    float s = 0.0f;
    if (j < n)
        for (int t = t0 + threadIdx.y; t < t1; t += BIAS_ROWS) s += lt_ld(dy + (size_t)t * (size_t)n + (size_t)j);
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && j < n) {
        float total = 0.0f;
        for (int k = 0; k < BIAS_ROWS; k++) total += sh[k][threadIdx.x];
        partial[(size_t)blockIdx.y * (size_t)n + (size_t)j] = total;
    }
}

__global__ void bias_grad_finish_kernel(float *db, const float *partial, int R, int n) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    float s = 0.0f;
    for (int r = 0; r < R; r++) s += partial[(size_t)r * (size_t)n + (size_t)j];
    db[j] += s;
}

extern "C" lt_status lt_cuda_bias_forward(lt_cuda *c, lt_bf16 *y, const lt_bf16 *b, int T, int n, lt_error *err) {
    LT_CUDA_REQUIRE(T >= 0 && n > 0, "lt_cuda_bias_forward", "bad shape T=%d n=%d", T, n);
    if (T == 0) return LT_OK;
    size_t total = (size_t)T * (size_t)n;
    LT_KERNEL(bias_forward_kernel, lt_cuda_blocks(c, total, BIAS_THREADS), BIAS_THREADS, c->stream)(y, b, total, n);
    LT_LAUNCH_CHECK("bias_forward_kernel");
    return LT_OK;
}

extern "C" lt_status lt_cuda_bias_backward(lt_cuda *c, float *db, const lt_bf16 *dy, int T, int n, lt_error *err) {
    LT_CUDA_REQUIRE(T >= 0 && n > 0, "lt_cuda_bias_backward", "bad shape T=%d n=%d", T, n);
    if (T == 0) return LT_OK;
    int R = (T + BIAS_ROWS_PER_CHUNK - 1) / BIAS_ROWS_PER_CHUNK; /* a function of T only: deterministic */
    if (R > BIAS_MAX_CHUNKS) R = BIAS_MAX_CHUNKS;
    void *partial = NULL;
    lt_status st = lt_cuda_scratch(c, (size_t)R * (size_t)n * sizeof(float), &partial, err);
    if (st != LT_OK) return st;
    dim3 grid((unsigned)((n + BIAS_COLS - 1) / BIAS_COLS), (unsigned)R), block(BIAS_COLS, BIAS_ROWS);
    LT_KERNEL(bias_grad_partial_kernel, grid, block, c->stream)((float *)partial, dy, T, n);
    LT_LAUNCH_CHECK("bias_grad_partial_kernel");
    LT_KERNEL(bias_grad_finish_kernel, (unsigned)((n + 255) / 256), 256, c->stream)(db, (const float *)partial, R, n);
    LT_LAUNCH_CHECK("bias_grad_finish_kernel");
    return LT_OK;
}
