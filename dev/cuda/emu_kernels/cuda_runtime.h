/*
 * dev/cuda/emu_kernels/cuda_runtime.h — enough of the CUDA runtime to run the
 * non-attention kernels of kernels/ (context.cu, gemm.cu, embed.cu, rmsnorm.cu, rope.cu,
 * swiglu.cu, xent.cu, adamw.cu) on the CPU with g++ -DLT_CUDA_EMULATE, so that
 * tests/kernels/test_cuda_kernels runs against them where no GPU exists
 * (dev/cuda/emulate_kernels.sh). It checks index math, bounds, barriers, warp
 * collectives and the host wrappers' logic; it says nothing about speed, launch limits,
 * alignment faults, or the real hardware's rounding of expf/sinf (the host libm's here).
 *
 * Device memory is host memory (malloc); streams are synchronous; a block runs as
 * blockDim.x * blockDim.y std::threads (x fastest, as CUDA numbers them), __syncthreads
 * is a std::barrier of the block, __shfl_xor_sync meets on a per-warp barrier (warp =
 * linear thread id / 32), so a collective reached by part of a warp deadlocks here as it
 * would misbehave on the GPU. Blocks run one after the other; `__shared__` variables are
 * function statics (one block at a time, so one copy suffices).
 */
#ifndef LT_EMU_KERNELS_CUDA_RUNTIME_H
#define LT_EMU_KERNELS_CUDA_RUNTIME_H

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <math.h>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct int4 {
    int x, y, z, w;
};

/* ---------------------------------------------------------------- runtime API */
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInvalidValue = 1 };
typedef void *cudaStream_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount };
enum { cudaStreamNonBlocking = 1 };
inline const char *cudaGetErrorString(cudaError_t e) { return e == 0 ? "no error" : "emulated error"; }
inline const char *cudaGetErrorName(cudaError_t e) { return e == 0 ? "cudaSuccess" : "cudaErrorEmulated"; }
inline cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int) { *v = 2; return cudaSuccess; }
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = (void *)1; return cudaSuccess; }
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
inline cudaError_t cudaMalloc(void **p, size_t n) {
    *p = std::aligned_alloc(256, (n + 255) / 256 * 256); /* cudaMalloc's alignment */
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
template <typename T>
inline cudaError_t cudaMalloc(T **p, size_t n) { return cudaMalloc((void **)p, n); }
inline cudaError_t cudaMallocHost(void **p, size_t n) { return cudaMalloc(p, n); }
template <typename T>
inline cudaError_t cudaMallocHost(T **p, size_t n) { return cudaMalloc((void **)p, n); }
inline cudaError_t cudaFree(void *p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaFreeHost(void *p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaMemGetInfo(size_t *f, size_t *t) { *f = *t = (size_t)1 << 30; return cudaSuccess; }
inline cudaError_t cudaMemsetAsync(void *p, int b, size_t n, cudaStream_t) { std::memset(p, b, n); return cudaSuccess; }
inline cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int b, size_t w, size_t h, cudaStream_t) {
    for (size_t r = 0; r < h; r++) std::memset((char *)p + r * pitch, b, w);
    return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t) {
    std::memmove(d, s, n);
    return cudaSuccess;
}
/* events: the streams are synchronous, so every recorded event has completed */
typedef void *cudaEvent_t;
enum { cudaErrorNotReady = 600, cudaEventDisableTiming = 2 };
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { *e = (void *)1; return cudaSuccess; }
inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }

/* ---------------------------------------------------------------- threads */
namespace lt_emu {
struct warp_state {
    std::unique_ptr<std::barrier<>> bar;
    double v[32];
};
struct block_state {
    std::unique_ptr<std::barrier<>> bar;
    std::vector<warp_state> warps;
};
inline block_state *g_block = nullptr;
inline dim3 g_grid, g_block_dim;
inline thread_local dim3 t_thread, t_block;
inline thread_local int t_linear;

inline void launch(dim3 grid, dim3 block, const std::function<void()> &body) {
    g_grid = grid, g_block_dim = block;
    int threads = (int)(block.x * block.y * block.z);
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            block_state b;
            b.bar = std::make_unique<std::barrier<>>(threads);
            b.warps.resize((size_t)(threads + 31) / 32);
            for (auto &w : b.warps) w.bar = std::make_unique<std::barrier<>>(32);
            g_block = &b;
            std::vector<std::thread> ts;
            for (int t = 0; t < threads; t++)
                ts.emplace_back([&, t] {
                    t_linear = t;
                    t_thread = dim3((unsigned)t % block.x, (unsigned)t / block.x % block.y);
                    t_block = dim3(bx, by);
                    body();
                });
            for (auto &t : ts) t.join();
            g_block = nullptr;
        }
}

/* LT_KERNEL(k, grid, block, stream)(args...) of kernels/cuda_common.cuh */
template <typename F>
struct launcher {
    F *fn;
    dim3 grid, block;
    launcher(F *f, dim3 g, dim3 b) : fn(f), grid(g), block(b) {}
    template <typename... A>
    void operator()(A... args) const {
        launch(grid, block, [&] { fn(args...); });
    }
};
} // namespace lt_emu

#define threadIdx (lt_emu::t_thread)
#define blockIdx (lt_emu::t_block)
#define gridDim (lt_emu::g_grid)
#define blockDim (lt_emu::g_block_dim)

inline void __syncthreads() { lt_emu::g_block->bar->arrive_and_wait(); }

template <typename T>
inline T __shfl_xor_sync(unsigned, T v, int lane_mask) {
    int lane = lt_emu::t_linear & 31;
    lt_emu::warp_state &w = lt_emu::g_block->warps[(size_t)(lt_emu::t_linear >> 5)];
    w.v[lane] = (double)v; /* float and double both round-trip exactly */
    w.bar->arrive_and_wait();
    T r = (T)w.v[lane ^ lane_mask];
    w.bar->arrive_and_wait();
    return r;
}

/* the round-to-nearest intrinsics: plain IEEE operations (build with -ffp-contract=off) */
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }

#endif
