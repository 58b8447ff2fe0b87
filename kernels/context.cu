/*
 * kernels/context.cu — the per-rank CUDA context of kernels/cuda.h and the small
 * elementwise kernels: open/close (device, compute and communication streams, cuBLASLt
 * handle, its 32 MiB workspace, the reduction buffer), device memory and copies, the
 * scratch buffer other kernels borrow (lt_cuda_scratch), fp32 <-> bf16 conversion of
 * device arrays, the residual add and the gradient accumulate (bf16 in and out, fp32
 * arithmetic), and the deterministic sum of fp32 rows returned to the host.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/arena.h"         /* lt_arena_alloc, lt_arena_free: the scratch with an arena */
#include "kernels/cuda_common.cuh" /* lt_cuda, LT_CUDA_CHECK, lt_ld/lt_st, lt_block_sum */

/* ---------------------------------------------------------------- errors */

/* The source path without its directories: "kernels/gemm.cu:120" reads better in a report. */
static const char *base_name(const char *file) {
    const char *s = strrchr(file, '/');
    return s != NULL ? s + 1 : file;
}

lt_status lt_cuda_fail_rt(lt_error *err, cudaError_t rc, const char *call, const char *file, int line) {
    return lt_fail(err, LT_ERR_INTERNAL, NULL, "CUDA error %s (%s) in %s at kernels/%s:%d", cudaGetErrorName(rc),
                   cudaGetErrorString(rc), call, base_name(file), line);
}

static const char *blas_status_name(cublasStatus_t rc) {
    switch (rc) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown cuBLAS status";
    }
}

lt_status lt_cuda_fail_blas(lt_error *err, cublasStatus_t rc, const char *call, const char *file, int line) {
    return lt_fail(err, LT_ERR_INTERNAL, NULL, "cuBLAS error %s (%d) in %s at kernels/%s:%d", blas_status_name(rc),
                   (int)rc, call, base_name(file), line);
}

/* ---------------------------------------------------------------- LONGTAIL_CUDA_SYNC */

thread_local lt_cuda_shape lt_cuda_last_shape;

lt_status lt_cuda_sync_check(lt_cuda *c, lt_error *err, const char *file, int line, const char *fmt, ...) {
    cudaError_t rc = cudaStreamSynchronize(c->stream);
    if (rc == cudaSuccess) rc = cudaGetLastError();
    if (rc == cudaSuccess) return LT_OK;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    lt_fail(err, LT_ERR_INTERNAL, NULL, "CUDA error %s (%s) in %s, launched at kernels/%s:%d", cudaGetErrorName(rc),
            cudaGetErrorString(rc), what, base_name(file), line);
    lt_error_hint(err, "LONGTAIL_CUDA_SYNC is set: the stream was synchronized after every kernel, so the failure is "
                       "this launch's (or a copy's queued since the kernel before)");
    return LT_ERR_INTERNAL;
}

/* ---------------------------------------------------------------- open / close */

extern "C" lt_status lt_cuda_open(lt_cuda **out, int device, lt_error *err) {
    *out = NULL;
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess || count == 0)
        return lt_fail(err, LT_ERR_CONFIG, NULL, "no CUDA device: %s",
                       rc != cudaSuccess ? cudaGetErrorString(rc) : "the driver reports 0 devices");
    if (device < 0 || device >= count)
        return lt_fail(err, LT_ERR_CONFIG, NULL, "CUDA device %d does not exist (this node has %d)", device, count);
    lt_cuda *c = (lt_cuda *)calloc(1, sizeof *c);
    if (c == NULL) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the CUDA context");
    c->device = device;
    const char *sync = getenv("LONGTAIL_CUDA_SYNC"); /* the debug mode (kernels/cuda_common.cuh) */
    c->sync_each = sync != NULL && *sync != '\0' && strcmp(sync, "0") != 0;
    lt_status st = LT_OK;
#define OPEN_TRY(call)                                                              \
    do {                                                                            \
        cudaError_t r_ = (call);                                                    \
        if (r_ != cudaSuccess) { st = lt_cuda_fail_rt(err, r_, #call, __FILE__, __LINE__); goto fail; } \
    } while (0)
    OPEN_TRY(cudaSetDevice(device));
    OPEN_TRY(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, device));
    OPEN_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    OPEN_TRY(cudaStreamCreateWithFlags(&c->comm_stream, cudaStreamNonBlocking));
    OPEN_TRY(cudaMalloc(&c->workspace, LT_CUDA_WORKSPACE_BYTES));
    OPEN_TRY(cudaMalloc((void **)&c->reduce, (LT_CUDA_REDUCE_SLOTS + 1) * sizeof(double)));
    OPEN_TRY(cudaMallocHost((void **)&c->host_sum, sizeof(double)));
    OPEN_TRY(cudaMalloc((void **)&c->sums, LT_CUDA_SUM_SLOTS * sizeof(double)));
    OPEN_TRY(cudaEventCreateWithFlags(&c->upload_done, cudaEventDisableTiming));
#undef OPEN_TRY
    {
        cublasStatus_t b = cublasLtCreate(&c->lt);
        if (b != CUBLAS_STATUS_SUCCESS) {
            c->lt = NULL;
            st = lt_cuda_fail_blas(err, b, "cublasLtCreate", __FILE__, __LINE__);
            goto fail;
        }
    }
    *out = c;
    return LT_OK;
fail:
    lt_cuda_close(c);
    return st;
}

extern "C" void lt_cuda_close(lt_cuda *c) {
    if (c == NULL) return;
    cudaSetDevice(c->device);
    if (c->stream != NULL) cudaStreamSynchronize(c->stream);
    lt_cuda_gemm_cache_free(c);
    if (c->lt != NULL) cublasLtDestroy(c->lt);
    cudaFree(c->workspace);
    if (!c->scratch_in_arena) cudaFree(c->scratch); /* an arena block goes with its arena */
    cudaFree(c->reduce);
    cudaFree(c->sums);
    if (c->host_sum != NULL) cudaFreeHost(c->host_sum);
    if (c->staging != NULL) cudaFreeHost(c->staging);
    if (c->upload_done != NULL) cudaEventDestroy(c->upload_done);
    if (c->stream != NULL) cudaStreamDestroy(c->stream);
    if (c->comm_stream != NULL) cudaStreamDestroy(c->comm_stream);
    free(c);
}

extern "C" int lt_cuda_device(const lt_cuda *c) { return c->device; }
extern "C" void *lt_cuda_stream(const lt_cuda *c) { return (void *)c->stream; }
extern "C" void *lt_cuda_comm_stream(const lt_cuda *c) { return (void *)c->comm_stream; }

extern "C" void lt_cuda_get_counts(const lt_cuda *c, lt_cuda_counts *out) { *out = c->counts; }

extern "C" lt_status lt_cuda_sync(lt_cuda *c, lt_error *err) {
    c->counts.syncs++;
    LT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    LT_CUDA_CHECK(cudaGetLastError());
    return LT_OK;
}

extern "C" lt_status lt_cuda_mem_info(lt_cuda *c, size_t *free_bytes, size_t *total_bytes, lt_error *err) {
    LT_CUDA_CHECK(cudaSetDevice(c->device));
    LT_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
    return LT_OK;
}

/* ---------------------------------------------------------------- memory */

extern "C" lt_status lt_cuda_malloc(lt_cuda *c, void **p, size_t bytes, lt_error *err) {
    *p = NULL;
    if (bytes == 0) return LT_OK;
    cudaError_t rc = cudaMalloc(p, bytes);
    if (rc != cudaSuccess) {
        *p = NULL;
        cudaGetLastError(); /* an allocation failure is not sticky: reset the last error so the
                               next launch check does not report it again */
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        return lt_fail(err, rc == cudaErrorMemoryAllocation ? LT_ERR_NOMEM : LT_ERR_INTERNAL, NULL,
                       "cudaMalloc of %zu bytes (%.1f MiB) on device %d failed: %s (%.1f MiB free of %.1f MiB)",
                       bytes, (double)bytes / 1048576.0, c->device, cudaGetErrorString(rc), (double)fr / 1048576.0,
                       (double)tot / 1048576.0);
    }
    c->counts.allocs++;
    return LT_OK;
}

extern "C" void lt_cuda_free(lt_cuda *c, void *p) {
    if (p == NULL) return;
    c->counts.frees++;
    cudaFree(p);
}

lt_status lt_cuda_scratch(lt_cuda *c, size_t bytes, void **dev, lt_error *err) {
    if (bytes <= c->scratch_bytes && c->scratch != NULL) {
        *dev = c->scratch;
        return LT_OK;
    }
    size_t want = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : bytes; /* at least 1 MiB: few regrowths */
    lt_status st = LT_OK;
    if (c->scratch_in_arena) { /* back to the arena: handed out again only to later work on this stream */
        st = lt_arena_free(c->arena, c->scratch, err);
    } else if (c->scratch != NULL) {
        /* Work queued earlier may still read the old buffer: let it finish before freeing. */
        c->counts.syncs++;
        LT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
        lt_cuda_free(c, c->scratch);
    }
    c->scratch = NULL;
    c->scratch_bytes = 0;
    c->scratch_in_arena = false;
    if (st != LT_OK) return st;
    if (c->arena != NULL) {
        st = lt_arena_alloc(c->arena, want, "the kernels' scratch buffer", &c->scratch, err);
        c->scratch_in_arena = st == LT_OK;
    } else {
        st = lt_cuda_malloc(c, &c->scratch, want, err);
    }
    if (st != LT_OK) return st;
    c->scratch_bytes = want;
    *dev = c->scratch;
    return LT_OK;
}

extern "C" void lt_cuda_use_arena(lt_cuda *c, lt_arena *arena) {
    if (c->scratch_in_arena) { /* the old arena's block back to it; the next use takes one anew */
        lt_error e;
        (void)lt_arena_free(c->arena, c->scratch, &e);
        c->scratch = NULL, c->scratch_bytes = 0, c->scratch_in_arena = false;
    }
    c->arena = arena;
}

/* ---------------------------------------------------------------- uploads */

extern "C" lt_status lt_cuda_reserve_upload(lt_cuda *c, size_t bytes, lt_error *err) {
    if (bytes <= c->staging_bytes) return LT_OK;
    if (c->upload_pending) { /* the copy out of the old buffer must have run before it is freed */
        c->counts.waits++;
        LT_CUDA_CHECK(cudaEventSynchronize(c->upload_done));
        c->upload_pending = false;
    }
    if (c->staging != NULL) cudaFreeHost(c->staging), c->counts.frees++;
    c->staging = NULL, c->staging_bytes = 0;
    size_t want = bytes < ((size_t)64 << 10) ? ((size_t)64 << 10) : bytes;
    LT_CUDA_CHECK(cudaMallocHost(&c->staging, want));
    c->counts.allocs++;
    c->staging_bytes = want;
    return LT_OK;
}

extern "C" lt_status lt_cuda_upload(lt_cuda *c, void *dst, const void *host_src, size_t bytes, lt_error *err) {
    if (bytes == 0) return LT_OK;
    c->counts.uploads++;
    if (c->upload_pending) { /* the previous copy out of the staging buffer: waited for only if it has not run */
        cudaError_t q = cudaEventQuery(c->upload_done);
        if (q == cudaErrorNotReady) {
            c->counts.waits++;
            LT_CUDA_CHECK(cudaEventSynchronize(c->upload_done));
        } else if (q != cudaSuccess) {
            return lt_cuda_fail_rt(err, q, "cudaEventQuery", __FILE__, __LINE__);
        }
        c->upload_pending = false;
    }
    lt_status st = lt_cuda_reserve_upload(c, bytes, err);
    if (st != LT_OK) return st;
    memcpy(c->staging, host_src, bytes);
    LT_CUDA_CHECK(cudaMemcpyAsync(dst, c->staging, bytes, cudaMemcpyHostToDevice, c->stream));
    LT_CUDA_CHECK(cudaEventRecord(c->upload_done, c->stream));
    c->upload_pending = true;
    return LT_OK;
}

extern "C" lt_status lt_cuda_memset(lt_cuda *c, void *p, int byte, size_t bytes, lt_error *err) {
    if (bytes == 0) return LT_OK;
    LT_CUDA_CHECK(cudaMemsetAsync(p, byte, bytes, c->stream));
    return LT_OK;
}

extern "C" lt_status lt_cuda_copy_d2d(lt_cuda *c, void *dst, const void *src, size_t bytes, lt_error *err) {
    if (bytes == 0) return LT_OK;
    LT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
    return LT_OK;
}

/* Host copies are ordered after the work queued on the compute stream and return when
 * the host buffer may be reused (h2d) or read (d2h). */
extern "C" lt_status lt_cuda_copy_h2d(lt_cuda *c, void *dst, const void *host_src, size_t bytes, lt_error *err) {
    if (bytes == 0) return LT_OK;
    c->counts.syncs++;
    LT_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, c->stream));
    LT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return LT_OK;
}

extern "C" lt_status lt_cuda_copy_d2h(lt_cuda *c, void *host_dst, const void *src, size_t bytes, lt_error *err) {
    if (bytes == 0) return LT_OK;
    c->counts.syncs++;
    LT_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    LT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return LT_OK;
}

/* ---------------------------------------------------------------- elementwise */

enum { EW_THREADS = 256 };

__global__ void f32_to_bf16_kernel(lt_bf16 *dst, const float *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        lt_st(dst + i, src[i]);
}

__global__ void bf16_to_f32_kernel(float *dst, const lt_bf16 *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = lt_ld(src + i);
}

/* dst = a + b; dst may alias a or b (each element read before it is written, by the
 * same thread). */
__global__ void add_kernel(lt_bf16 *dst, const lt_bf16 *a, const lt_bf16 *b, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        lt_st(dst + i, lt_ld(a + i) + lt_ld(b + i));
}

/* The 8-wide version: n8 groups of 8, every pointer 16-byte aligned. */
__global__ void add8_kernel(lt_bf16 *dst, const lt_bf16 *a, const lt_bf16 *b, size_t n8) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
        lt_bf16x8 x = lt_ld8(a + 8 * i), y = lt_ld8(b + 8 * i);
#pragma unroll
        for (int k = 0; k < 8; k++) x.v[k] += y.v[k];
        lt_st8(dst + 8 * i, x);
    }
}

extern "C" lt_status lt_cuda_f32_to_bf16(lt_cuda *c, lt_bf16 *dst, const float *src, size_t n, lt_error *err) {
    if (n == 0) return LT_OK;
    LT_KERNEL(f32_to_bf16_kernel, lt_cuda_blocks(c, n, EW_THREADS), EW_THREADS, c->stream)(dst, src, n);
    LT_LAUNCH_CHECK("f32_to_bf16_kernel");
    return LT_OK;
}

extern "C" lt_status lt_cuda_bf16_to_f32(lt_cuda *c, float *dst, const lt_bf16 *src, size_t n, lt_error *err) {
    if (n == 0) return LT_OK;
    LT_KERNEL(bf16_to_f32_kernel, lt_cuda_blocks(c, n, EW_THREADS), EW_THREADS, c->stream)(dst, src, n);
    LT_LAUNCH_CHECK("bf16_to_f32_kernel");
    return LT_OK;
}

extern "C" lt_status lt_cuda_add(lt_cuda *c, lt_bf16 *dst, const lt_bf16 *a, const lt_bf16 *b, size_t n,
                                 lt_error *err) {
    if (n == 0) return LT_OK;
    if (n % 8 == 0 && lt_cuda_aligned16(dst) && lt_cuda_aligned16(a) && lt_cuda_aligned16(b)) {
        LT_KERNEL(add8_kernel, lt_cuda_blocks(c, n / 8, EW_THREADS), EW_THREADS, c->stream)(dst, a, b, n / 8);
        LT_LAUNCH_CHECK("add8_kernel");
    } else {
        LT_KERNEL(add_kernel, lt_cuda_blocks(c, n, EW_THREADS), EW_THREADS, c->stream)(dst, a, b, n);
        LT_LAUNCH_CHECK("add_kernel");
    }
    return LT_OK;
}

extern "C" lt_status lt_cuda_accumulate(lt_cuda *c, lt_bf16 *dst, const lt_bf16 *src, size_t n, lt_error *err) {
    return lt_cuda_add(c, dst, dst, src, n, err);
}

/* dst[i] = the G blocks' element i summed in fp32 in block order (one thread per element,
 * so the order is fixed: the bits do not depend on the launch). */
__global__ void sum_blocks_kernel(lt_bf16 *dst, const lt_bf16 *src, int G, size_t stride, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float s = lt_ld(src + i);
        for (int j = 1; j < G; j++) s += lt_ld(src + (size_t)j * stride + i);
        lt_st(dst + i, s);
    }
}

extern "C" lt_status lt_cuda_sum_blocks(lt_cuda *c, lt_bf16 *dst, const lt_bf16 *src, int G, size_t stride, size_t n,
                                        lt_error *err) {
    if (n == 0 || G < 1) return LT_OK;
    LT_KERNEL(sum_blocks_kernel, lt_cuda_blocks(c, n, EW_THREADS), EW_THREADS, c->stream)(dst, src, G, stride, n);
    LT_LAUNCH_CHECK("sum_blocks_kernel");
    return LT_OK;
}

/* ---------------------------------------------------------------- deterministic sums */

/* Stage 1: block b sums x[i] (or x[i]^2) for i = b*threads + tid + k*grid*threads in
 * double, then the block's threads in lt_block_sum's fixed order; partial[b]. The grid
 * depends only on n, so the bits do too. */
__global__ void sum_rows_partial_kernel(double *partial, const float *x, size_t n) {
    __shared__ double sh[LT_BLOCK_SUM_SHARED];
    double s = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += (double)x[i];
    s = lt_block_sum(s, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

/* Stage 2 (one block): the partials in a fixed order into partial[n_partial]. */
__global__ void sum_partials_kernel(double *partial, int n_partial) {
    __shared__ double sh[LT_BLOCK_SUM_SHARED];
    double s = 0.0;
    for (int i = threadIdx.x; i < n_partial; i += blockDim.x) s += partial[i];
    s = lt_block_sum(s, sh);
    if (threadIdx.x == 0) partial[n_partial] = s;
}

/* Stage 2 into a kept sum: the same s, stored (first) or added to *acc (one thread: the
 * additions in launch order). */
__global__ void sum_partials_into_kernel(const double *partial, int n_partial, double *acc, int first) {
    __shared__ double sh[LT_BLOCK_SUM_SHARED];
    double s = 0.0;
    for (int i = threadIdx.x; i < n_partial; i += blockDim.x) s += partial[i];
    s = lt_block_sum(s, sh);
    if (threadIdx.x == 0) *acc = first ? s : *acc + s;
}

/* Blocks of a deterministic sum over n items: a function of n alone (not of the device). */
unsigned lt_cuda_sum_blocks(size_t n) {
    size_t b = (n + (size_t)LT_CUDA_SUM_THREADS * 16 - 1) / ((size_t)LT_CUDA_SUM_THREADS * 16);
    if (b > LT_CUDA_REDUCE_SLOTS) b = LT_CUDA_REDUCE_SLOTS;
    return b == 0 ? 1u : (unsigned)b;
}

/* Stage 2 and the copy to the host, shared with kernels/adamw.cu's sum of squares. */
lt_status lt_cuda_finish_sum(lt_cuda *c, unsigned blocks, double *host_sum, lt_error *err) {
    LT_KERNEL(sum_partials_kernel, 1, 1024, c->stream)(c->reduce, (int)blocks);
    LT_LAUNCH_CHECK("sum_partials_kernel");
    LT_CUDA_CHECK(cudaMemcpyAsync(c->host_sum, c->reduce + blocks, sizeof(double), cudaMemcpyDeviceToHost, c->stream));
    c->counts.syncs++;
    LT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    *host_sum = *c->host_sum;
    return LT_OK;
}

lt_status lt_cuda_finish_sum_into(lt_cuda *c, unsigned blocks, int slot, bool first, lt_error *err) {
    LT_KERNEL(sum_partials_into_kernel, 1, 1024, c->stream)(c->reduce, (int)blocks, c->sums + slot, first ? 1 : 0);
    LT_LAUNCH_CHECK("sum_partials_into_kernel");
    return LT_OK;
}

extern "C" lt_status lt_cuda_read_sum(lt_cuda *c, int slot, double *host_sum, lt_error *err) {
    *host_sum = 0.0;
    LT_CUDA_REQUIRE(slot >= 0 && slot < LT_CUDA_SUM_SLOTS, "lt_cuda_read_sum", "no sum slot %d", slot);
    LT_CUDA_CHECK(cudaMemcpyAsync(c->host_sum, c->sums + slot, sizeof(double), cudaMemcpyDeviceToHost, c->stream));
    c->counts.syncs++;
    LT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    *host_sum = *c->host_sum;
    return LT_OK;
}

extern "C" lt_status lt_cuda_sum_rows(lt_cuda *c, const float *x, size_t n, double *host_sum, lt_error *err) {
    *host_sum = 0.0;
    if (n == 0) return LT_OK;
    unsigned blocks = lt_cuda_sum_blocks(n);
    LT_KERNEL(sum_rows_partial_kernel, blocks, LT_CUDA_SUM_THREADS, c->stream)(c->reduce, x, n);
    LT_LAUNCH_CHECK("sum_rows_partial_kernel");
    return lt_cuda_finish_sum(c, blocks, host_sum, err);
}

extern "C" lt_status lt_cuda_sum_rows_into(lt_cuda *c, const float *x, size_t n, int slot, bool first, lt_error *err) {
    LT_CUDA_REQUIRE(slot >= 0 && slot < LT_CUDA_SUM_SLOTS, "lt_cuda_sum_rows_into", "no sum slot %d", slot);
    unsigned blocks = lt_cuda_sum_blocks(n);
    if (n == 0) { /* the sum 0: stage 2 over one zero partial */
        LT_CUDA_CHECK(cudaMemsetAsync(c->reduce, 0, sizeof(double), c->stream));
    } else {
        LT_KERNEL(sum_rows_partial_kernel, blocks, LT_CUDA_SUM_THREADS, c->stream)(c->reduce, x, n);
        LT_LAUNCH_CHECK("sum_rows_partial_kernel");
    }
    return lt_cuda_finish_sum_into(c, blocks, slot, first, err);
}
