/*
 * kernels/cuda_common.cuh — what every kernels/ .cu file shares: the context struct behind
 * kernels/cuda.h's opaque lt_cuda, error checks that turn cudaError_t / cublasStatus_t
 * into lt_fail naming the call, bf16 load/store helpers (scalar and 8-wide vectors),
 * warp and block reductions, and the launch-size helpers.
 *
 * Invariants every file keeps (stated once here):
 *   - every kernel runs on c->stream; nothing here synchronizes except lt_cuda_sync and
 *     the functions that return a value to the host;
 *   - indices into tensors are size_t (a [T, V] logits buffer passes 2^31 elements);
 *   - a vectorized path (8 bf16 = 16 bytes per load) is taken only when the row width is
 *     a multiple of 8 AND every pointer involved is 16-byte aligned (lt_cuda_aligned16);
 *     otherwise the scalar path of the same kernel runs, never a misaligned load;
 *   - the CUDA device is per host thread: lt_cuda_open selects c->device on the opening
 *     thread, and nothing here selects it again, so a context is used from the thread
 *     that opened it (one rank = one thread = one GPU, as the engine runs);
 *   - reductions whose result is kept (norm weight gradients, embedding gradients, sums
 *     returned to the host) combine partial values in an order that depends only on the
 *     shapes, never on scheduling: no float atomics (the same bits on every run).
 * Only .cu files include this (it needs nvcc); the C side sees kernels/cuda.h.
 */
#ifndef LT_KERNELS_CUDA_COMMON_CUH
#define LT_KERNELS_CUDA_COMMON_CUH

#include <cublasLt.h>      /* cublasLtHandle_t, cublasStatus_t */
#include <cuda_bf16.h>     /* __nv_bfloat16, __float2bfloat16 (round to nearest even) */
#include <cuda_runtime.h>  /* cudaStream_t, cudaError_t */
#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda.h"  /* lt_cuda, lt_bf16, the public functions */

/* ---------------------------------------------------------------- the context */

struct lt_gemm_plan; /* kernels/gemm.cu: one cached cuBLASLt algorithm and its descriptors */

enum {
    LT_CUDA_WORKSPACE_BYTES = 32 << 20, /* cuBLASLt workspace (Hopper kernels want >= 32 MiB) */
    LT_CUDA_REDUCE_SLOTS = 1024,        /* per-block partials of lt_cuda_sum_rows / _sum_squares */
};

struct lt_cuda {
    int device;
    int sm_count;                  /* multiprocessors, to size grid-stride launches */
    cudaStream_t stream;           /* every kernel and async copy */
    cudaStream_t comm_stream;      /* NCCL's (the engine's); no kernel of ours runs there */
    cublasLtHandle_t lt;           /* cuBLASLt handle */
    void *workspace;               /* LT_CUDA_WORKSPACE_BYTES of device memory for cuBLASLt */
    struct lt_gemm_plan *gemm;     /* the algorithm cache (kernels/gemm.cu) */
    int n_gemm, cap_gemm;
    void *scratch;                 /* lt_cuda_scratch's buffer */
    size_t scratch_bytes;
    double *reduce;                /* [LT_CUDA_REDUCE_SLOTS + 1] doubles: block partials, then the sum */
    double *host_sum;              /* pinned host double the sum is copied to */
    double *sums;                  /* [LT_CUDA_SUM_SLOTS] device doubles (lt_cuda_sum_rows_into) */
    struct lt_arena *arena;        /* lt_cuda_use_arena: where the scratch comes from (NULL: cudaMalloc) */
    bool scratch_in_arena;         /* the scratch is an arena block (never cudaFree'd) */
    void *staging;                 /* pinned host buffer of lt_cuda_upload */
    size_t staging_bytes;
    cudaEvent_t upload_done;       /* recorded after the last upload's copy out of staging */
    bool upload_pending;           /* upload_done was recorded and not yet waited for */
    lt_cuda_counts counts;         /* lt_cuda_get_counts */
    bool sync_each;                /* LONGTAIL_CUDA_SYNC: synchronize and check after every launch */
};

/*
 * Device scratch memory of at least `bytes`, owned by the context (attention's segment
 * lists, RMSNorm's per-block dw partials, the embedding backward's sort buffers).
 * The pointer is valid until the next lt_cuda_scratch call on the same context, and only
 * for work queued on c->stream (stream order is what makes reuse safe: a later kernel
 * reusing the buffer runs after the earlier one). Growing it synchronizes the stream
 * and reallocates, or with an arena (lt_cuda_use_arena) swaps arena blocks without waiting;
 * the buffer only grows. Not thread-safe (one context per thread).
 */
lt_status lt_cuda_scratch(lt_cuda *c, size_t bytes, void **dev, lt_error *err);

/* Deterministic sums returned to the host (kernels/context.cu): the number of blocks a
 * first-stage kernel writing c->reduce[0..blocks) uses for n items (a function of n
 * alone, at most LT_CUDA_REDUCE_SLOTS, 256 threads each), and the second stage: add the
 * partials in a fixed order, copy the double to *host_sum, synchronize the stream. */
enum { LT_CUDA_SUM_THREADS = 256 };
unsigned lt_cuda_sum_blocks(size_t n);
lt_status lt_cuda_finish_sum(lt_cuda *c, unsigned blocks, double *host_sum, lt_error *err);
/* The second stage into c->sums[slot] (stored when first, else added), without waiting. */
lt_status lt_cuda_finish_sum_into(lt_cuda *c, unsigned blocks, int slot, bool first, lt_error *err);

/* The GEMM cache's destructor (kernels/gemm.cu), called by lt_cuda_close. */
void lt_cuda_gemm_cache_free(lt_cuda *c);

/* ---------------------------------------------------------------- errors */

/* A failed CUDA runtime call as an lt_error: WHAT names the error, WHERE the call and line. */
lt_status lt_cuda_fail_rt(lt_error *err, cudaError_t rc, const char *call, const char *file, int line);
/* The same for cuBLAS(Lt) statuses. */
lt_status lt_cuda_fail_blas(lt_error *err, cublasStatus_t rc, const char *call, const char *file, int line);

/* Evaluate a cudaError_t expression; on failure return the lt_status from the function. */
#define LT_CUDA_CHECK(call)                                                              \
    do {                                                                                 \
        cudaError_t lt_rc_ = (call);                                                     \
        if (lt_rc_ != cudaSuccess) return lt_cuda_fail_rt(err, lt_rc_, #call, __FILE__, __LINE__); \
    } while (0)

/* Evaluate a cublasStatus_t expression; on failure return. */
#define LT_CUBLAS_CHECK(call)                                                              \
    do {                                                                                   \
        cublasStatus_t lt_rc_ = (call);                                                    \
        if (lt_rc_ != CUBLAS_STATUS_SUCCESS) return lt_cuda_fail_blas(err, lt_rc_, #call, __FILE__, __LINE__); \
    } while (0)

/*
 * The debug mode LONGTAIL_CUDA_SYNC=1 (docs/gpu.md; read by lt_cuda_open into c->sync_each).
 * CUDA reports an execution error (an illegal address, a trap) at the next call that
 * synchronizes, and keeps it sticky: by default it surfaces under whatever call came later,
 * another kernel's name included. In the debug mode every launch (LT_LAUNCH_CHECK, the
 * attention kernels, cuBLASLt's matmul, CUB's sort) is followed by lt_cuda_sync_check: the
 * compute stream is synchronized and an error is reported under that launch, WHAT naming
 * it and its shape (printf-formatted only on failure). Slow; off by default, where nothing
 * synchronizes (LT_KERNEL only notes the shape it launches with: two stores).
 */
lt_status lt_cuda_sync_check(lt_cuda *c, lt_error *err, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The grid and block LT_KERNEL last launched with on this thread (the debug mode's report). */
struct lt_cuda_shape {
    dim3 grid, block;
};
extern thread_local lt_cuda_shape lt_cuda_last_shape;
static inline dim3 lt_cuda_grid(dim3 g) { return lt_cuda_last_shape.grid = g; }
static inline dim3 lt_cuda_block(dim3 b) { return lt_cuda_last_shape.block = b; }

/* After a launch: a bad configuration (grid, shared memory) shows up here, naming the
 * kernel; execution errors surface at the next lt_cuda_sync (kernels/cuda.h), or here with
 * the launch's shape in the debug mode. Needs the context `c` in scope. */
#define LT_LAUNCH_CHECK(kernel_name)                                                    \
    do {                                                                                \
        cudaError_t lt_rc_ = cudaGetLastError();                                        \
        if (lt_rc_ != cudaSuccess) return lt_cuda_fail_rt(err, lt_rc_, "launch of " kernel_name, __FILE__, __LINE__); \
        if (c->sync_each) {                                                             \
            const lt_cuda_shape lt_sh_ = lt_cuda_last_shape;                            \
            lt_status lt_st_ = lt_cuda_sync_check(c, err, __FILE__, __LINE__, "%s, grid (%u, %u, %u), block (%u, %u, %u)", \
                                                  kernel_name, lt_sh_.grid.x, lt_sh_.grid.y, lt_sh_.grid.z, \
                                                  lt_sh_.block.x, lt_sh_.block.y, lt_sh_.block.z); \
            if (lt_st_ != LT_OK) return lt_st_;                                         \
        }                                                                               \
    } while (0)

/* Argument checks of the wrappers: LT_ERR_INTERNAL (a caller's broken contract) naming
 * the function and the bad value. */
#define LT_CUDA_REQUIRE(cond, fn, ...)                                        \
    do {                                                                      \
        if (!(cond)) return lt_fail(err, LT_ERR_INTERNAL, fn, __VA_ARGS__);   \
    } while (0)

/* ---------------------------------------------------------------- launches */

/* LT_KERNEL(kernel, grid, block, stream)(args...): a launch on `stream` with no dynamic
 * shared memory. Written as a macro so that dev/cuda/emu_kernels (the kernels run on the
 * CPU with g++, one std::thread per CUDA thread, to check index math and barriers where
 * no GPU exists) can compile the same source: there LT_CUDA_EMULATE is defined and the
 * launch runs the grid on the host. The grid and block pass through lt_cuda_grid /
 * lt_cuda_block, which keep them for the debug mode's report (LT_LAUNCH_CHECK). */
#ifdef LT_CUDA_EMULATE
#define LT_KERNEL(kernel, grid, block, stream) lt_emu::launcher(kernel, lt_cuda_grid(grid), lt_cuda_block(block))
#else
#define LT_KERNEL(kernel, grid, block, stream) kernel<<<lt_cuda_grid(grid), lt_cuda_block(block), 0, (stream)>>>
#endif

/* ---------------------------------------------------------------- launch sizes */

/* Blocks for a grid-stride loop over n items with `threads` per block: enough to fill the
 * device (32 blocks per SM), never more than the items need, at least 1. */
static inline unsigned lt_cuda_blocks(const lt_cuda *c, size_t n, int threads) {
    size_t need = (n + (size_t)threads - 1) / (size_t)threads;
    size_t cap = (size_t)(c->sm_count > 0 ? c->sm_count : 1) * 32;
    if (need > cap) need = cap;
    return need == 0 ? 1u : (unsigned)need;
}

/* 16-byte alignment of a pointer (the vectorized paths' requirement). */
static inline bool lt_cuda_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* ---------------------------------------------------------------- bf16 on the device */

typedef __nv_bfloat16 bf16;

static __device__ __forceinline__ float lt_ld(const lt_bf16 *p) {
    return __bfloat162float(*reinterpret_cast<const bf16 *>(p));
}
static __device__ __forceinline__ void lt_st(lt_bf16 *p, float x) {
    *reinterpret_cast<bf16 *>(p) = __float2bfloat16(x); /* round to nearest even */
}

/* 8 bf16 in one 16-byte load/store (caller guarantees 16-byte alignment). */
struct lt_bf16x8 {
    float v[8];
};
static __device__ __forceinline__ lt_bf16x8 lt_ld8(const lt_bf16 *p) {
    int4 raw = *reinterpret_cast<const int4 *>(p);
    const bf16 *h = reinterpret_cast<const bf16 *>(&raw);
    lt_bf16x8 r;
#pragma unroll
    for (int k = 0; k < 8; k++) r.v[k] = __bfloat162float(h[k]);
    return r;
}
static __device__ __forceinline__ void lt_st8(lt_bf16 *p, const lt_bf16x8 &x) {
    int4 raw;
    bf16 *h = reinterpret_cast<bf16 *>(&raw);
#pragma unroll
    for (int k = 0; k < 8; k++) h[k] = __float2bfloat16(x.v[k]);
    *reinterpret_cast<int4 *>(p) = raw;
}

/* ---------------------------------------------------------------- reductions */

/* Sum over the 32 lanes of a warp; every lane gets the result. The butterfly order is
 * fixed, so the result is the same on every run. */
template <typename T>
static __device__ __forceinline__ T lt_warp_sum(T x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
static __device__ __forceinline__ float lt_warp_max(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

/* Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread
 * gets the result. `shared` holds 33 values of T (LT_BLOCK_SUM_SHARED). Fixed order: warp
 * sums, then warp 0 sums the warps' values. Contains __syncthreads: call from every
 * thread of the block. */
#define LT_BLOCK_SUM_SHARED 33
template <typename T>
static __device__ T lt_block_sum(T x, T *shared) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    x = lt_warp_sum(x);
    __syncthreads(); /* shared may still be read by a previous call */
    if (lane == 0) shared[warp] = x;
    __syncthreads();
    if (warp == 0) {
        T y = lane < n_warps ? shared[lane] : T(0);
        y = lt_warp_sum(y);
        if (lane == 0) shared[32] = y;
    }
    __syncthreads();
    return shared[32];
}

#endif /* LT_KERNELS_CUDA_COMMON_CUH */
