/*
 * dev/cuda/common.h — what the scratch kernel benchmarks share (llm.c's dev/cuda/common.h
 * habit): check macros that exit with file:line, host bf16 conversions (round to nearest
 * even, as lib/bf16.c), seeded random inputs, device upload/download, validation
 * against a CPU reference with a stated tolerance, and cudaEvent timing.
 *
 * These are standalone programs, not part of the library: they exit on the first error
 * (a scratch tool, not a library: kernels/ reports errors as values instead).
 */
#ifndef LT_DEV_CUDA_COMMON_H
#define LT_DEV_CUDA_COMMON_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef __nv_bfloat16 bf16;

/* ---------------------------------------------------------------- checks */

static inline void cuda_check(cudaError_t rc, const char *call, const char *file, int line) {
    if (rc != cudaSuccess) {
        fprintf(stderr, "error: CUDA %s in %s (%s:%d)\n", cudaGetErrorString(rc), call, file, line);
        exit(1);
    }
}
#define cudaCheck(call) cuda_check((call), #call, __FILE__, __LINE__)

static inline void *host_alloc(size_t bytes, const char *file, int line) {
    void *p = malloc(bytes > 0 ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "error: out of memory for %zu bytes (%s:%d)\n", bytes, file, line);
        exit(1);
    }
    return p;
}
#define mallocCheck(bytes) host_alloc((bytes), __FILE__, __LINE__)

/* ---------------------------------------------------------------- bf16 on the host */

static inline uint16_t f2bf(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float bf2f(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---------------------------------------------------------------- inputs */

static uint64_t rng_state = 0x853c49e6748fea9bULL;
static inline double rand01(void) { /* xorshift64*: reproducible, good enough for test data */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}

/* n floats in [lo, hi) rounded to bf16 values: the CPU reference sees the GPU's inputs. */
static inline float *rand_bf16_values(size_t n, double lo, double hi) {
    float *x = (float *)mallocCheck(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = bf2f(f2bf((float)(lo + (hi - lo) * rand01())));
    return x;
}

static inline bf16 *to_device_bf16(const float *x, size_t n) {
    uint16_t *h = (uint16_t *)mallocCheck(n * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = f2bf(x[i]);
    bf16 *d;
    cudaCheck(cudaMalloc(&d, n * sizeof *d + 16));
    cudaCheck(cudaMemcpy(d, h, n * sizeof *h, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

static inline float *to_device_f32(const float *x, size_t n) {
    float *d;
    cudaCheck(cudaMalloc(&d, n * sizeof *d + 16));
    cudaCheck(cudaMemcpy(d, x, n * sizeof *x, cudaMemcpyHostToDevice));
    return d;
}

static inline float *from_device_bf16(const bf16 *d, size_t n) {
    uint16_t *h = (uint16_t *)mallocCheck(n * sizeof *h);
    cudaCheck(cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost));
    float *x = (float *)mallocCheck(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = bf2f(h[i]);
    free(h);
    return x;
}

static inline float *from_device_f32(const float *d, size_t n) {
    float *x = (float *)mallocCheck(n * sizeof *x);
    cudaCheck(cudaMemcpy(x, d, n * sizeof *x, cudaMemcpyDeviceToHost));
    return x;
}

/* ---------------------------------------------------------------- validation */

/* Every element within rel |ref| + abs_of_max max|ref|; prints the worst element. Returns
 * 1 when it passes, 0 otherwise (the caller reports the version as FAIL and goes on). */
static inline int validate(const char *what, const float *got, const float *ref, size_t n, double rel, double abs_of_max) {
    double maxref = 0.0;
    for (size_t i = 0; i < n; i++) maxref = fmax(maxref, fabs((double)ref[i]));
    double worst = 0.0;
    size_t worst_i = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        double bound = rel * fabs((double)ref[i]) + abs_of_max * maxref;
        if (!(d <= bound)) {
            if (ok)
                printf("    %s[%zu]: got %.7g want %.7g (|d| %.3g > bound %.3g)\n", what, i, (double)got[i],
                       (double)ref[i], d, bound);
            ok = 0;
        }
        if (d > worst) worst = d, worst_i = i;
    }
    printf("    %-14s %s  max |d| = %.3g at %zu (max |ref| %.3g)\n", what, ok ? "ok  " : "FAIL", worst, worst_i, maxref);
    return ok;
}

/* ---------------------------------------------------------------- timing */

/* Mean milliseconds of `reps` runs of launch() after one warm-up, by cudaEvents. */
template <typename F>
static float time_ms(int reps, F launch) {
    launch();
    cudaCheck(cudaGetLastError());
    cudaCheck(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    cudaCheck(cudaEventRecord(a));
    for (int i = 0; i < reps; i++) launch();
    cudaCheck(cudaEventRecord(b));
    cudaCheck(cudaEventSynchronize(b));
    cudaCheck(cudaGetLastError());
    float ms = 0.0f;
    cudaCheck(cudaEventElapsedTime(&ms, a, b));
    cudaCheck(cudaEventDestroy(a));
    cudaCheck(cudaEventDestroy(b));
    return ms / (float)reps;
}

static inline int ceil_div(long long a, long long b) { return (int)((a + b - 1) / b); }

/* The version to run: argv[1] if given (0 = all). */
static inline int version_arg(int argc, char **argv) { return argc > 1 ? atoi(argv[1]) : 0; }

/* 8 bf16 as one 16-byte vector (16-byte aligned addresses only). */
struct f8 {
    float v[8];
};
static __device__ __forceinline__ f8 ld8(const bf16 *p) {
    int4 raw = *reinterpret_cast<const int4 *>(p);
    const bf16 *h = reinterpret_cast<const bf16 *>(&raw);
    f8 r;
#pragma unroll
    for (int k = 0; k < 8; k++) r.v[k] = __bfloat162float(h[k]);
    return r;
}
static __device__ __forceinline__ void st8(bf16 *p, const f8 &x) {
    int4 raw;
    bf16 *h = reinterpret_cast<bf16 *>(&raw);
#pragma unroll
    for (int k = 0; k < 8; k++) h[k] = __float2bfloat16(x.v[k]);
    *reinterpret_cast<int4 *>(p) = raw;
}
static __device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

#endif /* LT_DEV_CUDA_COMMON_H */
