/*
 * dev/cuda/emu/cuda_runtime.h — just enough of CUDA to run kernels/attention.cu's device
 * code on the CPU with g++ (dev/cuda/attention_emulated.cpp), for checking its index
 * math, masks, fragment layouts and barriers on a machine without a GPU.
 *
 * A block runs as blockDim.x std::threads; __syncthreads is a std::barrier of the block;
 * the warp collectives (__shfl_xor_sync and the mma.sync emulation in lt_emu_mma) meet on
 * a per-warp barrier, so a collective reached by only part of a warp deadlocks here as it
 * would misbehave on the GPU. Blocks run one after the other; the dynamic shared memory
 * is one buffer (lt_attn::smem, defined by the program). Not a performance model.
 */
#ifndef LT_DEV_EMU_CUDA_RUNTIME_H
#define LT_DEV_EMU_CUDA_RUNTIME_H

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
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
#define __shared__
#define __align__(n)

using std::max;
using std::min;

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint4 {
    unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
inline float __uint_as_float(unsigned u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

typedef int cudaError_t;
enum { cudaSuccess = 0 };

namespace lt_emu {
struct warp_state {
    std::unique_ptr<std::barrier<>> bar;
    float f[32];
    const uint16_t *rows[32];
    uint32_t a[32][4], b[32][2];
};
struct block_state {
    std::unique_ptr<std::barrier<>> bar;
    warp_state warps[32];
};
inline block_state *g_block = nullptr;
inline dim3 g_grid, g_block_dim;
inline thread_local dim3 t_thread, t_block;

/* Runs body() as every thread of every block of `grid` (threads per block: `threads`). */
inline void launch(dim3 grid, int threads, const std::function<void()> &body) {
    g_grid = grid, g_block_dim = dim3((unsigned)threads);
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            block_state b;
            b.bar = std::make_unique<std::barrier<>>(threads);
            for (int w = 0; w < threads / 32; w++) b.warps[w].bar = std::make_unique<std::barrier<>>(32);
            g_block = &b;
            std::vector<std::thread> ts;
            for (int t = 0; t < threads; t++)
                ts.emplace_back([&, t] {
                    t_thread = dim3((unsigned)t), t_block = dim3(bx, by);
                    body();
                });
            for (auto &t : ts) t.join();
            g_block = nullptr;
        }
}
} // namespace lt_emu

#define threadIdx (lt_emu::t_thread)
#define blockIdx (lt_emu::t_block)
#define gridDim (lt_emu::g_grid)
#define blockDim (lt_emu::g_block_dim)

inline void __syncthreads() { lt_emu::g_block->bar->arrive_and_wait(); }

inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
    (void)mask;
    int lane = threadIdx.x & 31;
    lt_emu::warp_state &w = lt_emu::g_block->warps[threadIdx.x >> 5];
    w.f[lane] = v;
    w.bar->arrive_and_wait();
    float r = w.f[lane ^ lane_mask];
    w.bar->arrive_and_wait();
    return r;
}

/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, D = A B + C, from the PTX ISA's
 * fragment layouts (g = lane / 4, t = lane % 4; low half = lower index):
 *   A: a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
 *   B: b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]
 *   C: c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1]
 * Every lane posts its registers, each rebuilds the whole A and B and computes its own
 * four outputs in fp32 (the products of bf16 values are exact in fp32). */
inline void lt_emu_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    int lane = threadIdx.x & 31;
    lt_emu::warp_state &w = lt_emu::g_block->warps[threadIdx.x >> 5];
    for (int i = 0; i < 4; i++) w.a[lane][i] = a[i];
    w.b[lane][0] = b0, w.b[lane][1] = b1;
    w.bar->arrive_and_wait();
    float A[16][16], B[16][8];
    auto lo = [](uint32_t x) { return __uint_as_float(x << 16); };
    auto hi = [](uint32_t x) { return __uint_as_float(x & 0xffff0000u); };
    for (int L = 0; L < 32; L++) {
        int g = L >> 2, t = L & 3;
        A[g][2 * t] = lo(w.a[L][0]), A[g][2 * t + 1] = hi(w.a[L][0]);
        A[g + 8][2 * t] = lo(w.a[L][1]), A[g + 8][2 * t + 1] = hi(w.a[L][1]);
        A[g][2 * t + 8] = lo(w.a[L][2]), A[g][2 * t + 9] = hi(w.a[L][2]);
        A[g + 8][2 * t + 8] = lo(w.a[L][3]), A[g + 8][2 * t + 9] = hi(w.a[L][3]);
        B[2 * t][g] = lo(w.b[L][0]), B[2 * t + 1][g] = hi(w.b[L][0]);
        B[2 * t + 8][g] = lo(w.b[L][1]), B[2 * t + 9][g] = hi(w.b[L][1]);
    }
    w.bar->arrive_and_wait(); /* everyone has read the posted registers */
    int g = lane >> 2, t = lane & 3;
    for (int e = 0; e < 4; e++) {
        int row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
        float s = c[e];
        for (int k = 0; k < 16; k++) s += A[row][k] * B[k][col];
        c[e] = s;
    }
}

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 (PTX ISA): lanes 8i..8i+7 give the
 * row addresses of matrix i (8 b16 each, 16-byte aligned: checked, an abort here is a
 * fault on the GPU); register i of lane l gets matrix i's [l/4][2(l%4)], [l/4][2(l%4)+1],
 * or with .trans [2(l%4)][l/4], [2(l%4)+1][l/4] (low half = the first). */
inline void lt_emu_ldmatrix_x4(uint32_t r[4], const uint16_t *row, bool trans) {
    int lane = threadIdx.x & 31;
    lt_emu::warp_state &w = lt_emu::g_block->warps[threadIdx.x >> 5];
    if (((uintptr_t)row & 15u) != 0) {
        fprintf(stderr, "ldmatrix: lane %d row address %p not 16-byte aligned\n", lane, (const void *)row);
        abort();
    }
    w.rows[lane] = row;
    w.bar->arrive_and_wait();
    int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
        const uint16_t *const *m = &w.rows[8 * i];
        uint32_t lo = trans ? m[2 * t][g] : m[g][2 * t], hi = trans ? m[2 * t + 1][g] : m[g][2 * t + 1];
        r[i] = lo | (hi << 16);
    }
    w.bar->arrive_and_wait();
}

#endif
