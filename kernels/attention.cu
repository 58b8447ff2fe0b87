/*
 * kernels/attention.cu — causal GQA attention over a packed unit on the GPU (bf16 in and
 * out, fp32 softmax and accumulation), forward and backward: the twin of
 * train/cpu/attention.c (the CPU reference, whose semantics these follow exactly).
 *
 * A segment (kernels/cuda.h, lt_cuda_attn_segment) is a slice: query rows [row0, row0+n) of
 * the unit at absolute positions begin .. begin+n-1 of its sample; its keys/values are the
 * sample's context buffers, rows 0 .. begin+n-1 (KV context, InfiniPipe 2.1 / ChunkFlow
 * 4.2). The query at position p sees keys 0..p of its own sample (per-document causal
 * mask); query head h reads kv head h / (nh / nkv) (GQA); scale 1/sqrt(hd).
 *
 * Algorithm: FlashAttention-2 (Dao 2023).
 *   forward  (Alg. 1): one thread block per (query block of 64 rows of a segment, query
 *            head); each of its 4 warps owns 16 query rows and keeps them, their running
 *            max m and sum l and their output in registers while the block streams the
 *            visible key/value tiles through shared memory, double-buffered with cp.async
 *            (the next tile is in flight while this one is computed; online softmax, Sec. 3.1:
 *            the output is rescaled only by exp(m_old - m_new) and divided by l once at
 *            the end). lse = m + log(l) is saved per (row, head). Key tiles past the
 *            block's last position are never loaded (causal skipping, Sec. 3.1); a warp
 *            whose rows all precede a tile skips its math.
 *   backward (Alg. 2): three kernels.
 *            1. D[row, h] = rowsum(dO * O) (Alg. 2 line 4), fp32, into the scratch buffer.
 *            2. dK/dV: one block per (key block of 64 rows of a SAMPLE, kv head). Its 4
 *               warps own 16 keys each and keep dK, dV for them in fp32 registers while
 *               the block loops over every query head of the kv head's group and every
 *               query block of every segment of that sample in the call that can see the
 *               key block (Alg. 2's loop over i, with the causal skip of query blocks
 *               entirely before the keys; the next step's Q and dO tiles are copied
 *               with cp.async while this one is computed). Each (key row, kv head) of dK/dV has exactly
 *               one writer, which adds its fp32 sums into the bf16 buffer once at the end:
 *               no atomics, and segments of one sample (which alias dk/dv) are handled by
 *               the same block.
 *            3. dQ: a separate pass, one block per (query block, head) like the forward,
 *               recomputing S and dP for its rows and accumulating dQ in registers
 *               (K/V tiles double-buffered as in the forward)
 *               (the "separate dQ pass" variant instead of Alg. 2's atomicAdd into a
 *               global fp32 dQ). Why: every dq element then has one writer, so the
 *               result is the same bits on every run (kernels/cuda_common.cuh's rule for
 *               kept reductions), and no [T, nh*hd] fp32 scratch is needed (at 256K rows x
 *               4096 columns that would be 4 GiB). The price: S = QK^T and dP = dO V^T are
 *               computed twice, 7 tile products instead of 5 (the FLOP count we report
 *               still counts 5, so the measured TFLOP/s carry the cost honestly).
 *
 * Tensor cores: every tile product is mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
 * (inline PTX; sm_80 and later, so sm_90 runs it). Fragment layouts, from the PTX ISA
 * ("Matrix Fragments for mma.m16n8k16 with floating point type"), with
 * g = lane / 4 (the "groupID") and t = lane % 4 ("threadID_in_group"); a .b32 register
 * holds two bf16, the lower column/row index in the low 16 bits:
 *   A (16 x 16, row-major, 4 regs):  a0 = A[g][2t, 2t+1]      a1 = A[g+8][2t, 2t+1]
 *                                    a2 = A[g][2t+8, 2t+9]    a3 = A[g+8][2t+8, 2t+9]
 *   B (16 x 8, K x N, 2 regs):       b0 = B[2t, 2t+1][g]      b1 = B[2t+8, 2t+9][g]
 *   C/D (16 x 8, fp32, 4 regs):      c0, c1 = C[g][2t, 2t+1]  c2, c3 = C[g+8][2t, 2t+1]
 * Consequences used below:
 *   - S = Q K^T takes B[d][j] = K[j][d]: b0 is two adjacent bf16 of K's row j = g, which
 *     is what ldmatrix (non-transposed) delivers from 8 rows of K; the same for
 *     dP = dO V^T with V, and for the A fragments of K and V in the dK/dV kernel.
 *   - P V takes B[j][d] = V[j][d]: b0 = V[2t][g], V[2t+1][g], a column pair: ldmatrix
 *     .trans from 8 rows of V (likewise dS K, P^T dO, dS^T Q).
 *   - Q and dO of the forward / dQ kernels are loaded once per block straight from global
 *     memory into A fragments (32-bit loads).
 *   - The C fragments of two adjacent n-tiles (columns 16k..16k+7 and 16k+8..16k+15) are
 *     exactly the A fragment of k-step k after packing pairs to bf16 (c0c1 -> a0, c2c3 ->
 *     a1 of the first tile, -> a2, a3 of the second): P and dS go from the accumulator
 *     of one product to the A operand of the next without touching shared memory.
 *   - A row's values are spread over the 4 lanes of a quad (same g): row max and sums
 *     reduce with __shfl_xor 1 and 2.
 * Shared-memory tiles are [rows][HD + 8] bf16: the 8 halfwords of padding make the row
 * stride HD/2 + 4 words, so the 8 row addresses of one ldmatrix phase (16 bytes each)
 * start at banks 4r (r = 0..7) and cover the 32 banks once: no conflicts; rows stay
 * 16-byte aligned for ldmatrix and the 16-byte tile stores.
 *
 * Supported: hd a multiple of 8 from 8 to 128. The kernels are templated on HD = 32, 64
 * and 128 (the Llama sizes are 64 and 128; the test models' 16 and 32); a call runs on
 * the smallest that holds its hd, the columns past hd loaded as zeros and never stored
 * (hd 96 costs what 128 does). Any other head dim fails with a clear error
 * (LT_ERR_CONFIG); there is no slow fallback kernel. All tensors 16-byte aligned (the
 * arena's 256-byte alignment gives it; checked). Segment lengths need not be multiples
 * of the block sizes: rows past a segment's end are loaded as zeros, masked and never
 * stored; offsets are size_t (units of hundreds of thousands of rows).
 *
 * This file compiles alone into the library; dev/cuda/attention_*.cu include it with
 * LT_ATTENTION_KERNELS_ONLY defined to benchmark the same kernels without a context, and
 * dev/cuda/attention_emulated.cpp also defines LT_ATTENTION_EMULATE to run the device
 * code on the CPU (g++, one std::thread per CUDA thread, mma.sync emulated from the
 * layouts above) against the CPU reference: the check available without a GPU.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifndef LT_ATTENTION_KERNELS_ONLY
#include "kernels/cuda_common.cuh" /* lt_cuda, lt_cuda_scratch, LT_CUDA_CHECK, LT_LAUNCH_CHECK */
#endif
#include "kernels/cuda.h" /* lt_bf16, lt_cuda_attn_segment */

namespace lt_attn {

constexpr int WARPS = 4, THREADS = WARPS * 32;
constexpr int ROWS = WARPS * 16; /* query rows of a forward / dQ block, keys of a dK/dV block */
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

/* One segment as the kernels see it (copied to the device by the host wrappers). */
struct seg {
    int row0, n, begin; /* as lt_cuda_attn_segment */
    int qblk0;          /* first query block of this segment in the grid's x order */
    const uint16_t *k, *v;
    uint16_t *dk, *dv;
};

/* A group of segments sharing dk/dv (one sample's slices in the call): the dK/dV kernel's
 * unit of ownership. Its segments are segs[seg0 .. seg0+nseg). */
struct group {
    int seg0, nseg;
    int kv_len; /* key rows any of its queries sees: max(begin + n) */
    int kblk0;  /* first key block of this group in the dK/dV grid's x order */
};

/* ---------------------------------------------------------------- device helpers */

__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#ifdef LT_ATTENTION_EMULATE /* dev/cuda/attention_emulated.cpp: the same layouts on the CPU */
    lt_emu_mma(c, a, b0, b1);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

/* Two floats as a bf16 pair (round to nearest even), lo in the low half. */
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    uint32_t a = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
    uint32_t b = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
    return a | (b << 16);
}
__device__ __forceinline__ float bf_lo(uint32_t x) { return __uint_as_float(x << 16); }
__device__ __forceinline__ float bf_hi(uint32_t x) { return __uint_as_float(x & 0xffff0000u); }

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: four 8 x 8 bf16 matrices from shared
 * memory; lanes 8i .. 8i+7 give the addresses of matrix i's rows (16 bytes each, 16-byte
 * aligned). Register i of lane l gets matrix i's elements [l/4][2(l%4)], [l/4][2(l%4)+1]
 * or, with .trans, [2(l%4)][l/4], [2(l%4)+1][l/4] (PTX ISA, "Warp-level matrix load
 * instruction: ldmatrix"). That is an A/B fragment quarter of mma.m16n8k16 (the layouts
 * in the header comment): non-transposed rows of K give B of Q K^T; .trans rows of V give
 * B of P V. */
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const uint16_t *row) {
#ifdef LT_ATTENTION_EMULATE
    lt_emu_ldmatrix_x4(r, row, false);
#else
    uint32_t a = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const uint16_t *row) {
#ifdef LT_ATTENTION_EMULATE
    lt_emu_ldmatrix_x4(r, row, true);
#else
    uint32_t a = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}
/* Lane l's row address for the B fragments of two k-steps (ks, ks+1) of n-tile rows
 * r0 .. r0+7 of a [.][LD] tile read as B[k][n] = tile[n][k] (K in Q K^T): matrices
 * (cols 16ks, 16ks+8, 16ks+16, 16ks+24) -> b0, b1 of ks, b0, b1 of ks+1. */
template <int LD>
__device__ __forceinline__ const uint16_t *b_rows(const uint16_t *tile, int r0, int ks, int lane) {
    return tile + (r0 + (lane & 7)) * LD + ks * 16 + (lane >> 3) * 8;
}
/* Lane l's row address for the B fragments of two n-tiles (i, i+1) of k-step kk of a
 * [.][LD] tile read as B[k][n] = tile[k][n] (V in P V), with .trans: matrices (rows
 * 16kk..+7 and 16kk+8..+15, at columns 8i, then 8i+8) -> b0, b1 of i, b0, b1 of i+1. */
template <int LD>
__device__ __forceinline__ const uint16_t *bt_rows(const uint16_t *tile, int kk, int i, int lane) {
    return tile + (kk * 16 + (lane & 15)) * LD + (i + (lane >> 4)) * 8;
}
/* Lane l's row address for the A fragment (a0..a3) of rows r0 .. r0+15, k-step ks. */
template <int LD>
__device__ __forceinline__ const uint16_t *a_rows(const uint16_t *tile, int r0, int ks, int lane) {
    return tile + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + ks * 16 + (lane >> 4) * 8;
}

/* 32-bit load of two adjacent bf16 (4-byte aligned: even column, even row stride). */
__device__ __forceinline__ uint32_t ld32(const uint16_t *p) { return *reinterpret_cast<const uint32_t *>(p); }

/* Rows [r0, r0 + rows) of a global [*, ld] bf16 matrix (hd columns from base) into a
 * [rows][HD+8] shared tile; rows at or past `valid` and columns hd .. HD-1 (a head dim
 * below the template's, padded) are zeros. 16-byte vectors (pointers
 * and ld checked by the host). Called by all THREADS threads. */
template <int HD>
__device__ __forceinline__ void load_tile(uint16_t *s, const uint16_t *base, size_t ld, int r0, int rows,
                                          int valid, int hd) {
    constexpr int LD = HD + 8, VEC = HD / 8;
    for (int c = threadIdx.x; c < rows * VEC; c += THREADS) {
        int r = c / VEC, cc = c % VEC;
        uint4 x = make_uint4(0, 0, 0, 0);
        if (r0 + r < valid && cc * 8 < hd) x = *reinterpret_cast<const uint4 *>(base + (size_t)(r0 + r) * ld + (size_t)cc * 8);
        *reinterpret_cast<uint4 *>(s + r * LD + cc * 8) = x;
    }
}

/* 16 bytes global -> shared without passing through registers (cp.async.cg, sm_80+),
 * completing at cp_async_wait; valid == false writes 16 zero bytes (src-size 0: nothing
 * is read from src). */
__device__ __forceinline__ void cp_async16(uint16_t *dst, const uint16_t *src, bool valid) {
#ifdef LT_ATTENTION_EMULATE /* synchronous: the emulation checks the barriers, not the timing */
    if (valid) memcpy(dst, src, 16);
    else memset(dst, 0, 16);
#else
    uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#ifndef LT_ATTENTION_EMULATE
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
/* Wait until at most N of this thread's committed copy groups are still in flight. */
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#ifndef LT_ATTENTION_EMULATE
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/* load_tile's asynchronous twin (same layout and zero rows), for double buffering. */
template <int HD>
__device__ __forceinline__ void async_tile(uint16_t *s, const uint16_t *base, size_t ld, int r0, int rows,
                                           int valid, int hd) {
    constexpr int LD = HD + 8, VEC = HD / 8;
    for (int c = threadIdx.x; c < rows * VEC; c += THREADS) {
        int r = c / VEC, cc = c % VEC;
        bool ok = r0 + r < valid && cc * 8 < hd;
        cp_async16(s + r * LD + cc * 8, ok ? base + (size_t)(r0 + r) * ld + (size_t)cc * 8 : base, ok);
    }
}

/* A fragments of 16 rows x HD of a row-major global matrix (rows past `valid` and columns
 * past hd: zeros). */
template <int HD>
__device__ __forceinline__ void load_a_global(uint32_t f[HD / 16][4], const uint16_t *base, size_t ld, int r,
                                              int valid, int hd) {
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    const uint16_t *ra = base + (size_t)(r + g) * ld, *rb = base + (size_t)(r + g + 8) * ld;
    bool va = r + g < valid, vb = r + g + 8 < valid;
#pragma unroll
    for (int ks = 0; ks < HD / 16; ks++) {
        int c = ks * 16 + 2 * t;
        bool c0 = c < hd, c8 = c + 8 < hd; /* hd is a multiple of 8: c, c+1 agree */
        f[ks][0] = va && c0 ? ld32(ra + c) : 0u;
        f[ks][1] = vb && c0 ? ld32(rb + c) : 0u;
        f[ks][2] = va && c8 ? ld32(ra + c + 8) : 0u;
        f[ks][3] = vb && c8 ? ld32(rb + c + 8) : 0u;
    }
}

/* The segment whose [first, first + blocks) range holds block x (binary search over the
 * ascending first-block field; seg s spans [first(s), first(s+1))). */
__device__ __forceinline__ int find_seg(const seg *segs, int n, int x) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (segs[mid].qblk0 <= x) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}
__device__ __forceinline__ int find_group(const group *gs, int n, int x) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (gs[mid].kblk0 <= x) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* ---------------------------------------------------------------- forward (Alg. 1) */

/* Shared memory of the forward and dQ kernels: two stages (double buffering) of a K and a
 * V tile [BK][HD+8]: stage s holds K at s * 2 BK LD and V at (2s + 1) BK LD halfwords. */
template <int HD, int BK>
constexpr size_t fwd_smem() {
    return (size_t)4 * BK * (HD + 8) * sizeof(uint16_t);
}

/* __launch_bounds__(THREADS, 2): without the minimum of 2 blocks per SM, ptxas capped the
 * hd 64 instance at 128 registers and spilled (28 bytes); with it, 176 and no spill. */
template <int HD, int BK>
__global__ void __launch_bounds__(THREADS, 2) fwd_kernel(uint16_t *__restrict__ out, float *__restrict__ lse,
                                                      const uint16_t *__restrict__ q, const seg *__restrict__ segs,
                                                      int n_segs, int nh, int nkv, int hd, float scale_log2) {
    constexpr int LD = HD + 8;
    extern __shared__ __align__(16) uint16_t smem[];
    uint16_t *Ks = smem, *Vs = smem + BK * LD;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = blockIdx.y, kvh = h / (nh / nkv);
    const size_t qd = (size_t)nh * hd, kvd = (size_t)nkv * hd;

    /* the last blocks (longest key ranges) first: they start while short ones fill in */
    const int bx = (int)gridDim.x - 1 - (int)blockIdx.x;
    const seg sg = segs[find_seg(segs, n_segs, bx)];
    const int i0 = (bx - sg.qblk0) * ROWS;
    const int rows = min(ROWS, sg.n - i0);
    const int p0 = sg.begin + i0; /* position of the block's first row */
    const int kend = p0 + rows;   /* keys [0, kend) are visible to some row of the block */
    const size_t r0 = (size_t)sg.row0 + (size_t)i0;

    uint32_t qf[HD / 16][4];
    load_a_global<HD>(qf, q + r0 * qd + (size_t)h * hd, qd, warp * 16, rows, hd);

    /* the last key each of my two rows sees; rows past the segment's end are clamped to
     * the block's last key so they stay finite (they are never stored) */
    const int lim_a = min(p0 + warp * 16 + g, kend - 1), lim_b = min(p0 + warp * 16 + g + 8, kend - 1);
    const int warp_last = min(p0 + warp * 16 + 15, kend - 1);

    float o[HD / 8][4];
#pragma unroll
    for (int i = 0; i < HD / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f; /* l: this lane's part */

    const uint16_t *kbase = sg.k + (size_t)kvh * hd, *vbase = sg.v + (size_t)kvh * hd;
    /* double buffering: tile it+1 is copied (cp.async) while tile it is computed */
    const int n_tiles = (kend + BK - 1) / BK;
    async_tile<HD>(Ks, kbase, kvd, 0, BK, kend, hd);
    async_tile<HD>(Vs, vbase, kvd, 0, BK, kend, hd);
    cp_async_commit();
    for (int it = 0; it < n_tiles; it++) {
        const int kb0 = it * BK;
        const uint16_t *Kc = Ks + (it & 1) * 2 * BK * LD, *Vc = Vs + (it & 1) * 2 * BK * LD;
        __syncthreads(); /* every warp is done with tile it-1, whose stage the next copy fills */
        if (it + 1 < n_tiles) {
            async_tile<HD>(Ks + ((it + 1) & 1) * 2 * BK * LD, kbase, kvd, kb0 + BK, BK, kend, hd);
            async_tile<HD>(Vs + ((it + 1) & 1) * 2 * BK * LD, vbase, kvd, kb0 + BK, BK, kend, hd);
        }
        cp_async_commit(); /* possibly empty: keeps "all but the newest group" = tile it */
        cp_async_wait<1>(); /* this thread's copies of tile it have landed */
        __syncthreads();    /* and everyone's */
        if (kb0 > warp_last) continue; /* the whole tile is in my rows' future */

        /* S = Q K^T (16 x BK per warp) */
        float s[BK / 8][4];
#pragma unroll
        for (int nt = 0; nt < BK / 8; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < HD / 16; ks += 2) {
                uint32_t b[4];
                ldsm_x4(b, b_rows<LD>(Kc, nt * 8, ks, lane));
                mma16816(s[nt], qf[ks], b[0], b[1]);
                mma16816(s[nt], qf[ks + 1], b[2], b[3]);
            }
        }
        /* scale (log2 domain), mask, row max */
        float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < BK / 8; nt++) {
            int j = kb0 + nt * 8 + 2 * t;
            s[nt][0] = j <= lim_a ? s[nt][0] * scale_log2 : -INFINITY;
            s[nt][1] = j + 1 <= lim_a ? s[nt][1] * scale_log2 : -INFINITY;
            s[nt][2] = j <= lim_b ? s[nt][2] * scale_log2 : -INFINITY;
            s[nt][3] = j + 1 <= lim_b ? s[nt][3] * scale_log2 : -INFINITY;
            mx_a = fmaxf(mx_a, fmaxf(s[nt][0], s[nt][1]));
            mx_b = fmaxf(mx_b, fmaxf(s[nt][2], s[nt][3]));
        }
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
        /* Key 0 is in the first tile and visible to every row, so after it m is finite; a
         * row whose keys in this tile are all masked keeps its m (mx = -inf). */
        const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
        const float al_a = exp2f(m_a - mn_a), al_b = exp2f(m_b - mn_b); /* 0 on the first tile */
        m_a = mn_a, m_b = mn_b;
        float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
        for (int nt = 0; nt < BK / 8; nt++) {
            s[nt][0] = exp2f(s[nt][0] - mn_a);
            s[nt][1] = exp2f(s[nt][1] - mn_a);
            s[nt][2] = exp2f(s[nt][2] - mn_b);
            s[nt][3] = exp2f(s[nt][3] - mn_b);
            sum_a += s[nt][0] + s[nt][1];
            sum_b += s[nt][2] + s[nt][3];
        }
        l_a = l_a * al_a + sum_a, l_b = l_b * al_b + sum_b;
#pragma unroll
        for (int i = 0; i < HD / 8; i++) {
            o[i][0] *= al_a, o[i][1] *= al_a;
            o[i][2] *= al_b, o[i][3] *= al_b;
        }
        /* O += P V: P's accumulator fragments are its A fragments (header comment) */
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            uint32_t pa[4] = {pack2(s[2 * kk][0], s[2 * kk][1]), pack2(s[2 * kk][2], s[2 * kk][3]),
                              pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int i = 0; i < HD / 8; i += 2) {
                uint32_t b[4];
                ldsm_x4_t(b, bt_rows<LD>(Vc, kk, i, lane));
                mma16816(o[i], pa, b[0], b[1]);
                mma16816(o[i + 1], pa, b[2], b[3]);
            }
        }
    }

    /* the row sums over the quad, then O / l and lse = (m + log2 l) ln 2 */
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 1);
    l_a += __shfl_xor_sync(0xffffffffu, l_a, 2);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 1);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, 2);
    const int ra = warp * 16 + g, rb = ra + 8;
    const float inv_a = 1.0f / l_a, inv_b = 1.0f / l_b;
    uint16_t *oa = out + (r0 + (size_t)ra) * qd + (size_t)h * hd + 2 * t;
    uint16_t *ob = out + (r0 + (size_t)rb) * qd + (size_t)h * hd + 2 * t;
#pragma unroll
    for (int i = 0; i < HD / 8; i++) {
        if (i * 8 >= hd) break; /* padded columns (hd below the template's HD) */
        if (ra < rows) *reinterpret_cast<uint32_t *>(oa + i * 8) = pack2(o[i][0] * inv_a, o[i][1] * inv_a);
        if (rb < rows) *reinterpret_cast<uint32_t *>(ob + i * 8) = pack2(o[i][2] * inv_b, o[i][3] * inv_b);
    }
    if (t == 0) {
        if (ra < rows) lse[(r0 + (size_t)ra) * nh + h] = (m_a + log2f(l_a)) * LN2;
        if (rb < rows) lse[(r0 + (size_t)rb) * nh + h] = (m_b + log2f(l_b)) * LN2;
    }
}

/* ---------------------------------------------------------------- backward (Alg. 2) */

/* D[row, h] = sum_d dO[row, h, d] O[row, h, d] (fp32), one warp per (row, head), rows
 * [0, T); rows outside every segment get a value nobody reads. */
template <int HD>
__global__ void __launch_bounds__(THREADS) dot_kernel(float *__restrict__ D, const uint16_t *__restrict__ dout,
                                                      const uint16_t *__restrict__ out, size_t rows_heads, int hd) {
    size_t w = (size_t)blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (w >= rows_heads) return;
    const int lane = threadIdx.x & 31;
    const size_t off = w * (size_t)hd; /* row-major [T, nh, hd]: (row, head) w starts at w * hd */
    float s = 0.0f;
#pragma unroll
    for (int d = 2 * lane; d < HD; d += 64) {
        if (d >= hd) break;
        uint32_t x = ld32(dout + off + d), y = ld32(out + off + d);
        s += bf_lo(x) * bf_lo(y) + bf_hi(x) * bf_hi(y);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) D[w] = s;
}

/* dQ pass: one block per (query block, head), as the forward; dq += scale dS K. */
template <int HD, int BK>
__global__ void __launch_bounds__(THREADS) dq_kernel(uint16_t *__restrict__ dq, const uint16_t *__restrict__ dout,
                                                     const float *__restrict__ lse, const float *__restrict__ D,
                                                     const uint16_t *__restrict__ q, const seg *__restrict__ segs,
                                                     int n_segs, int nh, int nkv, int hd, float scale,
                                                     float scale_log2) {
    constexpr int LD = HD + 8;
    extern __shared__ __align__(16) uint16_t smem[];
    uint16_t *Ks = smem, *Vs = smem + BK * LD;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h = blockIdx.y, kvh = h / (nh / nkv);
    const size_t qd = (size_t)nh * hd, kvd = (size_t)nkv * hd;

    const int bx = (int)gridDim.x - 1 - (int)blockIdx.x;
    const seg sg = segs[find_seg(segs, n_segs, bx)];
    const int i0 = (bx - sg.qblk0) * ROWS;
    const int rows = min(ROWS, sg.n - i0);
    const int p0 = sg.begin + i0, kend = p0 + rows;
    const size_t r0 = (size_t)sg.row0 + (size_t)i0;

    uint32_t qf[HD / 16][4], df[HD / 16][4];
    load_a_global<HD>(qf, q + r0 * qd + (size_t)h * hd, qd, warp * 16, rows, hd);
    load_a_global<HD>(df, dout + r0 * qd + (size_t)h * hd, qd, warp * 16, rows, hd);

    const int ra = warp * 16 + g, rb = ra + 8;
    const int lim_a = min(p0 + ra, kend - 1), lim_b = min(p0 + rb, kend - 1);
    const int warp_last = min(p0 + warp * 16 + 15, kend - 1);
    /* lse in the log2 domain, D; rows past the end: anything finite (masked out below
     * only by their zero dO and Q, so keep them finite) */
    const float lse_a = ra < rows ? lse[(r0 + (size_t)ra) * nh + h] * LOG2E : 0.0f;
    const float lse_b = rb < rows ? lse[(r0 + (size_t)rb) * nh + h] * LOG2E : 0.0f;
    const float D_a = ra < rows ? D[(r0 + (size_t)ra) * nh + h] : 0.0f;
    const float D_b = rb < rows ? D[(r0 + (size_t)rb) * nh + h] : 0.0f;

    float acc[HD / 8][4];
#pragma unroll
    for (int i = 0; i < HD / 8; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;

    const uint16_t *kbase = sg.k + (size_t)kvh * hd, *vbase = sg.v + (size_t)kvh * hd;
    /* double buffering: tile it+1 is copied (cp.async) while tile it is computed */
    const int n_tiles = (kend + BK - 1) / BK;
    async_tile<HD>(Ks, kbase, kvd, 0, BK, kend, hd);
    async_tile<HD>(Vs, vbase, kvd, 0, BK, kend, hd);
    cp_async_commit();
    for (int it = 0; it < n_tiles; it++) {
        const int kb0 = it * BK;
        const uint16_t *Kc = Ks + (it & 1) * 2 * BK * LD, *Vc = Vs + (it & 1) * 2 * BK * LD;
        __syncthreads(); /* every warp is done with tile it-1, whose stage the next copy fills */
        if (it + 1 < n_tiles) {
            async_tile<HD>(Ks + ((it + 1) & 1) * 2 * BK * LD, kbase, kvd, kb0 + BK, BK, kend, hd);
            async_tile<HD>(Vs + ((it + 1) & 1) * 2 * BK * LD, vbase, kvd, kb0 + BK, BK, kend, hd);
        }
        cp_async_commit(); /* possibly empty: keeps "all but the newest group" = tile it */
        cp_async_wait<1>(); /* this thread's copies of tile it have landed */
        __syncthreads();    /* and everyone's */
        if (kb0 > warp_last) continue; /* the whole tile is in my rows' future */

        float s[BK / 8][4], dp[BK / 8][4];
#pragma unroll
        for (int nt = 0; nt < BK / 8; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
            dp[nt][0] = dp[nt][1] = dp[nt][2] = dp[nt][3] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < HD / 16; ks += 2) {
                uint32_t bk[4], bv[4];
                ldsm_x4(bk, b_rows<LD>(Kc, nt * 8, ks, lane));
                ldsm_x4(bv, b_rows<LD>(Vc, nt * 8, ks, lane));
                mma16816(s[nt], qf[ks], bk[0], bk[1]); /* S = Q K^T */
                mma16816(s[nt], qf[ks + 1], bk[2], bk[3]);
                mma16816(dp[nt], df[ks], bv[0], bv[1]); /* dP = dO V^T */
                mma16816(dp[nt], df[ks + 1], bv[2], bv[3]);
            }
        }
        /* P = exp(S - lse) on visible keys, 0 elsewhere; dS = P (dP - D) (Alg. 2 l. 11-13) */
#pragma unroll
        for (int nt = 0; nt < BK / 8; nt++) {
            int j = kb0 + nt * 8 + 2 * t;
            float p0a = j <= lim_a ? exp2f(s[nt][0] * scale_log2 - lse_a) : 0.0f;
            float p1a = j + 1 <= lim_a ? exp2f(s[nt][1] * scale_log2 - lse_a) : 0.0f;
            float p0b = j <= lim_b ? exp2f(s[nt][2] * scale_log2 - lse_b) : 0.0f;
            float p1b = j + 1 <= lim_b ? exp2f(s[nt][3] * scale_log2 - lse_b) : 0.0f;
            s[nt][0] = p0a * (dp[nt][0] - D_a);
            s[nt][1] = p1a * (dp[nt][1] - D_a);
            s[nt][2] = p0b * (dp[nt][2] - D_b);
            s[nt][3] = p1b * (dp[nt][3] - D_b);
        }
        /* dQ += dS K (the scale is applied once at the end) */
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            uint32_t a[4] = {pack2(s[2 * kk][0], s[2 * kk][1]), pack2(s[2 * kk][2], s[2 * kk][3]),
                             pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int i = 0; i < HD / 8; i += 2) {
                uint32_t b[4];
                ldsm_x4_t(b, bt_rows<LD>(Kc, kk, i, lane));
                mma16816(acc[i], a, b[0], b[1]);
                mma16816(acc[i + 1], a, b[2], b[3]);
            }
        }
    }

    /* dq += scale dQ: this block is the only writer of its rows' head columns */
    uint16_t *qa = dq + (r0 + (size_t)ra) * qd + (size_t)h * hd + 2 * t;
    uint16_t *qb = dq + (r0 + (size_t)rb) * qd + (size_t)h * hd + 2 * t;
#pragma unroll
    for (int i = 0; i < HD / 8; i++) {
        if (i * 8 >= hd) break; /* padded columns */
        if (ra < rows) {
            uint32_t old = ld32(qa + i * 8);
            *reinterpret_cast<uint32_t *>(qa + i * 8) =
                pack2(bf_lo(old) + scale * acc[i][0], bf_hi(old) + scale * acc[i][1]);
        }
        if (rb < rows) {
            uint32_t old = ld32(qb + i * 8);
            *reinterpret_cast<uint32_t *>(qb + i * 8) =
                pack2(bf_lo(old) + scale * acc[i][2], bf_hi(old) + scale * acc[i][3]);
        }
    }
}

/* Shared memory of the dK/dV kernel: K, V [ROWS][HD+8]; two stages (double buffering) of
 * Q, dO [BQ][HD+8] and of lse, D [BQ]. */
template <int HD, int BQ>
constexpr size_t dkdv_smem() {
    return (size_t)(2 * ROWS + 4 * BQ) * (HD + 8) * sizeof(uint16_t) + (size_t)4 * BQ * sizeof(float);
}

/* dK/dV: one block per (key block of ROWS keys of a group, kv head). Warp w owns keys
 * kb0 + 16w .. +15 and computes the transposed tiles S^T = K Q^T and dP^T = V dO^T
 * (keys as the M dimension), so P^T and dS^T come out as A fragments of
 * dV += P^T dO and dK += dS^T Q (Alg. 2 lines 12 and 14). */
template <int HD, int BQ>
__global__ void __launch_bounds__(THREADS, 2) dkdv_kernel(const uint16_t *__restrict__ dout,
                                                       const float *__restrict__ lse, const float *__restrict__ D,
                                                       const uint16_t *__restrict__ q, const seg *__restrict__ segs,
                                                       const group *__restrict__ groups, int n_groups, int nh,
                                                       int nkv, int hd, float scale, float scale_log2) {
    constexpr int LD = HD + 8;
    extern __shared__ __align__(16) uint16_t smem[];
    uint16_t *Ks = smem, *Vs = Ks + ROWS * LD, *Qs = Vs + ROWS * LD, *Os = Qs + 2 * BQ * LD;
    float *lse_s = reinterpret_cast<float *>(Os + 2 * BQ * LD), *D_s = lse_s + 2 * BQ;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int kvh = blockIdx.y, group_size = nh / nkv;
    const size_t qd = (size_t)nh * hd, kvd = (size_t)nkv * hd;

    const group gr = groups[find_group(groups, n_groups, (int)blockIdx.x)];
    const int kb0 = ((int)blockIdx.x - gr.kblk0) * ROWS;
    const int kw = kb0 + warp * 16;         /* my warp's first key */
    const int key_a = kw + g, key_b = key_a + 8; /* my two key rows */

    float dk[HD / 8][4], dv[HD / 8][4];
#pragma unroll
    for (int i = 0; i < HD / 8; i++) {
        dk[i][0] = dk[i][1] = dk[i][2] = dk[i][3] = 0.0f;
        dv[i][0] = dv[i][1] = dv[i][2] = dv[i][3] = 0.0f;
    }

    for (int si = gr.seg0; si < gr.seg0 + gr.nseg; si++) {
        const seg sg = segs[si];
        const int seg_end = sg.begin + sg.n; /* this segment's queries see keys [0, seg_end) */
        if (kb0 >= seg_end) continue;        /* block-uniform: no query of it sees my keys */
        __syncthreads();                     /* the previous segment's tiles are consumed */
        load_tile<HD>(Ks, sg.k + (size_t)kvh * hd, kvd, kb0, ROWS, seg_end, hd);
        load_tile<HD>(Vs, sg.v + (size_t)kvh * hd, kvd, kb0, ROWS, seg_end, hd);
        /* the first query block with a row at position >= kb0 (earlier ones see none of
         * the keys: causal skip) */
        const int qb_first = kb0 > sg.begin ? (kb0 - sg.begin) / BQ : 0;
        const int n_qb = (sg.n + BQ - 1) / BQ;
        /* the (query head, query block) steps of this segment, it = 0 .. n_it-1: head
         * kvh * group_size + it / nq, block qb_first + it % nq (nq >= 1: kb0 < seg_end).
         * Step it+1's Q and dO are copied (cp.async) into the other stage while step it is
         * computed; lse and D (BQ values each) are plain stores into that stage. */
        const int nq = n_qb - qb_first, n_it = group_size * nq;
        auto issue = [&](int it, int st) {
            const int h = kvh * group_size + it / nq, qb = qb_first + it % nq;
            const int i0 = qb * BQ, rows = min(BQ, sg.n - i0);
            const size_t r0 = (size_t)sg.row0 + (size_t)i0;
            async_tile<HD>(Qs + st * BQ * LD, q + r0 * qd + (size_t)h * hd, qd, 0, BQ, rows, hd);
            async_tile<HD>(Os + st * BQ * LD, dout + r0 * qd + (size_t)h * hd, qd, 0, BQ, rows, hd);
            for (int r = threadIdx.x; r < BQ; r += THREADS) {
                lse_s[st * BQ + r] = r < rows ? lse[(r0 + (size_t)r) * nh + h] * LOG2E : 0.0f;
                D_s[st * BQ + r] = r < rows ? D[(r0 + (size_t)r) * nh + h] : 0.0f;
            }
            cp_async_commit();
        };
        issue(0, 0);
        for (int it = 0; it < n_it; it++) {
            {
                __syncthreads(); /* the other stage was read at step it-1: free to refill */
                if (it + 1 < n_it) issue(it + 1, (it + 1) & 1);
                else cp_async_commit(); /* empty: "all but the newest group" = step it */
                cp_async_wait<1>();     /* my copies of step it have landed */
                __syncthreads();        /* and everyone's (and K/V, lse, D stores) */
                const int st = it & 1, qb = qb_first + it % nq;
                const int i0 = qb * BQ, rows = min(BQ, sg.n - i0), p0 = sg.begin + i0;
                const uint16_t *Qc = Qs + st * BQ * LD, *Oc = Os + st * BQ * LD;
                const float *lse_c = lse_s + st * BQ, *D_c = D_s + st * BQ;
                if (kw > p0 + rows - 1) continue; /* my 16 keys are after every query here */

                /* S^T = K Q^T, dP^T = V dO^T (16 keys x BQ queries) */
                float s[BQ / 8][4], dp[BQ / 8][4];
#pragma unroll
                for (int nt = 0; nt < BQ / 8; nt++) {
                    s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
                    dp[nt][0] = dp[nt][1] = dp[nt][2] = dp[nt][3] = 0.0f;
                }
#pragma unroll
                for (int ks = 0; ks < HD / 16; ks += 2) {
                    uint32_t kf0[4], kf1[4], vf0[4], vf1[4];
                    ldsm_x4(kf0, a_rows<LD>(Ks, warp * 16, ks, lane));
                    ldsm_x4(kf1, a_rows<LD>(Ks, warp * 16, ks + 1, lane));
                    ldsm_x4(vf0, a_rows<LD>(Vs, warp * 16, ks, lane));
                    ldsm_x4(vf1, a_rows<LD>(Vs, warp * 16, ks + 1, lane));
#pragma unroll
                    for (int nt = 0; nt < BQ / 8; nt++) {
                        uint32_t bq[4], bo[4];
                        ldsm_x4(bq, b_rows<LD>(Qc, nt * 8, ks, lane));
                        ldsm_x4(bo, b_rows<LD>(Oc, nt * 8, ks, lane));
                        mma16816(s[nt], kf0, bq[0], bq[1]);
                        mma16816(s[nt], kf1, bq[2], bq[3]);
                        mma16816(dp[nt], vf0, bo[0], bo[1]);
                        mma16816(dp[nt], vf1, bo[2], bo[3]);
                    }
                }
                /* P^T and dS^T; element (key, query) is visible when key <= the query's
                 * position and the query row exists. s keeps P^T, dp becomes dS^T. */
#pragma unroll
                for (int nt = 0; nt < BQ / 8; nt++) {
                    const int c = nt * 8 + 2 * t; /* query column in the block */
                    const float l0 = lse_c[c], l1 = lse_c[c + 1], d0 = D_c[c], d1 = D_c[c + 1];
                    const bool v0 = c < rows, v1 = c + 1 < rows;
                    const int pq0 = p0 + c, pq1 = p0 + c + 1;
                    float pa0 = v0 && key_a <= pq0 ? exp2f(s[nt][0] * scale_log2 - l0) : 0.0f;
                    float pa1 = v1 && key_a <= pq1 ? exp2f(s[nt][1] * scale_log2 - l1) : 0.0f;
                    float pb0 = v0 && key_b <= pq0 ? exp2f(s[nt][2] * scale_log2 - l0) : 0.0f;
                    float pb1 = v1 && key_b <= pq1 ? exp2f(s[nt][3] * scale_log2 - l1) : 0.0f;
                    s[nt][0] = pa0, s[nt][1] = pa1, s[nt][2] = pb0, s[nt][3] = pb1;
                    dp[nt][0] = pa0 * (dp[nt][0] - d0);
                    dp[nt][1] = pa1 * (dp[nt][1] - d1);
                    dp[nt][2] = pb0 * (dp[nt][2] - d0);
                    dp[nt][3] = pb1 * (dp[nt][3] - d1);
                }
                /* dV += P^T dO, dK += dS^T Q (k = the query dimension) */
#pragma unroll
                for (int kk = 0; kk < BQ / 16; kk++) {
                    uint32_t pa[4] = {pack2(s[2 * kk][0], s[2 * kk][1]), pack2(s[2 * kk][2], s[2 * kk][3]),
                                      pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                      pack2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
                    uint32_t da[4] = {pack2(dp[2 * kk][0], dp[2 * kk][1]), pack2(dp[2 * kk][2], dp[2 * kk][3]),
                                      pack2(dp[2 * kk + 1][0], dp[2 * kk + 1][1]),
                                      pack2(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
#pragma unroll
                    for (int i = 0; i < HD / 8; i += 2) {
                        uint32_t bo[4], bq[4];
                        ldsm_x4_t(bo, bt_rows<LD>(Oc, kk, i, lane));
                        ldsm_x4_t(bq, bt_rows<LD>(Qc, kk, i, lane));
                        mma16816(dv[i], pa, bo[0], bo[1]);
                        mma16816(dv[i + 1], pa, bo[2], bo[3]);
                        mma16816(dk[i], da, bq[0], bq[1]);
                        mma16816(dk[i + 1], da, bq[2], bq[3]);
                    }
                }
            }
        }
    }

    /* dk += scale dK, dv += dV for my key rows that exist (< the group's kv_len): the one
     * write of these elements in this call */
    const seg first = segs[gr.seg0];
    const size_t col = (size_t)kvh * hd + 2 * t;
#pragma unroll
    for (int i = 0; i < HD / 8; i++) {
        if (i * 8 >= hd) break; /* padded columns */
        if (key_a < gr.kv_len) {
            uint16_t *pk = first.dk + (size_t)key_a * kvd + col + i * 8;
            uint16_t *pv = first.dv + (size_t)key_a * kvd + col + i * 8;
            uint32_t ok = ld32(pk), ov = ld32(pv);
            *reinterpret_cast<uint32_t *>(pk) = pack2(bf_lo(ok) + scale * dk[i][0], bf_hi(ok) + scale * dk[i][1]);
            *reinterpret_cast<uint32_t *>(pv) = pack2(bf_lo(ov) + dv[i][0], bf_hi(ov) + dv[i][1]);
        }
        if (key_b < gr.kv_len) {
            uint16_t *pk = first.dk + (size_t)key_b * kvd + col + i * 8;
            uint16_t *pv = first.dv + (size_t)key_b * kvd + col + i * 8;
            uint32_t ok = ld32(pk), ov = ld32(pv);
            *reinterpret_cast<uint32_t *>(pk) = pack2(bf_lo(ok) + scale * dk[i][2], bf_hi(ok) + scale * dk[i][3]);
            *reinterpret_cast<uint32_t *>(pv) = pack2(bf_lo(ov) + dv[i][2], bf_hi(ov) + dv[i][3]);
        }
    }
}

/* ---------------------------------------------------------------- tile sizes per head dim */

/* BK: keys per tile of the forward / dQ kernels; BQ: queries per step of the dK/dV kernel.
 * Chosen so the fp32 accumulators stay in registers (check with -Xptxas -v): at hd 128 the
 * dQ and dK/dV kernels hold two HD-wide accumulators or operand sets and take 32-wide
 * tiles. HD is the template's head dim; a call's hd (a multiple of 8) runs on the smallest
 * of 32, 64, 128 that holds it, its columns past hd padded with zeros (padded_hd). */
template <int HD>
struct tiles;
template <>
struct tiles<32> {
    static constexpr int FWD_BK = 64, DQ_BK = 64, DKDV_BQ = 64;
};
template <>
struct tiles<64> {
    static constexpr int FWD_BK = 64, DQ_BK = 64, DKDV_BQ = 64;
};
template <>
struct tiles<128> {
    static constexpr int FWD_BK = 64, DQ_BK = 32, DKDV_BQ = 32;
};

/* The template head dim a call's hd runs on; 0 when none does (hd not a multiple of 8 in
 * [8, 128]). */
static inline int padded_hd(int hd) {
    if (hd < 8 || hd > 128 || hd % 8 != 0) return 0;
    return hd <= 32 ? 32 : hd <= 64 ? 64 : 128;
}

/* ---------------------------------------------------------------- launches */
#ifndef LT_ATTENTION_EMULATE

/* What a launch function last launched (or was about to), for the report of the debug mode
 * LONGTAIL_CUDA_SYNC (kernels/cuda_common.cuh): the kernel, its grid, THREADS threads a
 * block, its dynamic shared memory. */
struct launch_note {
    const char *kernel;
    dim3 grid;
    size_t smem;
};

/* Keep what is about to be launched in *at (when given). */
static inline void note_launch(launch_note *at, const char *kernel, dim3 grid, size_t smem) {
    if (at != nullptr) *at = launch_note{kernel, grid, smem};
}

/* A launch's error; with `sync` (the debug mode) the stream's once the launch has run. */
static inline cudaError_t launched(cudaStream_t st, bool sync) {
    cudaError_t rc = cudaGetLastError();
    if (rc == cudaSuccess && sync) rc = cudaStreamSynchronize(st);
    return rc;
}

/* The forward over n_segs device segments (qblk0 filled, total query blocks q_blocks > 0).
 * at / sync: the debug mode's (above); the benchmarks leave them out. */
template <int HD>
cudaError_t launch_forward(cudaStream_t st, uint16_t *out, float *lse, const uint16_t *q, const seg *segs,
                           int n_segs, int q_blocks, int nh, int nkv, int hd, launch_note *at = nullptr,
                           bool sync = false) {
    constexpr int BK = tiles<HD>::FWD_BK;
    const size_t sm = fwd_smem<HD, BK>();
    const dim3 grid((unsigned)q_blocks, (unsigned)nh);
    note_launch(at, "fwd_kernel", grid, sm);
    cudaError_t rc = cudaFuncSetAttribute(fwd_kernel<HD, BK>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
    if (rc != cudaSuccess) return rc;
    const float scale = 1.0f / sqrtf((float)hd);
    fwd_kernel<HD, BK><<<grid, THREADS, sm, st>>>(out, lse, q, segs, n_segs, nh, nkv, hd, scale * LOG2E);
    return launched(st, sync);
}

/* The backward: D, then dQ and dK/dV (independent of each other, both after D). */
template <int HD>
cudaError_t launch_backward(cudaStream_t st, uint16_t *dq, const uint16_t *dout, const uint16_t *out,
                            const float *lse, const uint16_t *q, float *D, size_t T, const seg *segs, int n_segs,
                            int q_blocks, const group *groups, int n_groups, int k_blocks, int nh, int nkv,
                            int hd, launch_note *at = nullptr, bool sync = false) {
    constexpr int DQ_BK = tiles<HD>::DQ_BK, BQ = tiles<HD>::DKDV_BQ;
    const float scale = 1.0f / sqrtf((float)hd);
    const size_t rows_heads = T * (size_t)nh;
    const dim3 dot_grid((unsigned)((rows_heads + WARPS - 1) / WARPS));
    note_launch(at, "dot_kernel", dot_grid, 0);
    dot_kernel<HD><<<dot_grid, THREADS, 0, st>>>(D, dout, out, rows_heads, hd);
    cudaError_t rc = launched(st, sync);
    if (rc != cudaSuccess) return rc;

    const size_t sm_dq = fwd_smem<HD, DQ_BK>();
    const dim3 dq_grid((unsigned)q_blocks, (unsigned)nh);
    note_launch(at, "dq_kernel", dq_grid, sm_dq);
    rc = cudaFuncSetAttribute(dq_kernel<HD, DQ_BK>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm_dq);
    if (rc != cudaSuccess) return rc;
    dq_kernel<HD, DQ_BK><<<dq_grid, THREADS, sm_dq, st>>>(dq, dout, lse, D, q, segs, n_segs, nh, nkv, hd, scale,
                                                          scale * LOG2E);
    rc = launched(st, sync);
    if (rc != cudaSuccess) return rc;

    const size_t sm_kv = dkdv_smem<HD, BQ>();
    const dim3 kv_grid((unsigned)k_blocks, (unsigned)nkv);
    note_launch(at, "dkdv_kernel", kv_grid, sm_kv);
    rc = cudaFuncSetAttribute(dkdv_kernel<HD, BQ>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm_kv);
    if (rc != cudaSuccess) return rc;
    dkdv_kernel<HD, BQ><<<kv_grid, THREADS, sm_kv, st>>>(dout, lse, D, q, segs, groups, n_groups, nh, nkv, hd, scale,
                                                          scale * LOG2E);
    return launched(st, sync);
}

#endif /* LT_ATTENTION_EMULATE */

/* ---------------------------------------------------------------- host-side plan */

/* The device-side description of a call, built on the host: segments (empty ones dropped)
 * ordered by group, each group's segments contiguous and in call order. */
struct plan {
    seg *segs;
    group *groups;
    int n_segs, n_groups;
    int q_blocks, k_blocks; /* grid sizes; 0 when there is nothing to compute */
};

static void plan_free(plan *p) {
    free(p->segs);
    free(p->groups);
    p->segs = NULL, p->groups = NULL;
}

static const char PLAN_NOMEM[] = "out of host memory for the segment list";

/* Validates the call and builds the plan. Returns NULL on success, or a static message
 * with the offending segment index in *bad (-1 when not about one segment). */
static const char *plan_build(plan *p, const lt_cuda_attn_segment *in, int n_in, int T, int nh, int nkv, int hd,
                              bool backward, int *bad) {
    *p = plan{};
    *bad = -1;
    if (padded_hd(hd) == 0) return "head dim not supported by the CUDA attention kernel (a multiple of 8 from 8 to 128 is)";
    if (nh <= 0 || nkv <= 0 || nh % nkv != 0) return "nh must be a positive multiple of nkv";
    if (T < 0 || n_in < 0 || (n_in > 0 && in == NULL)) return "negative T or n_segs, or NULL segments";
    if (n_in == 0) return NULL;
    /* pageable on purpose: plan_upload frees them right after its cudaMemcpyAsync (see there) */
    p->segs = (seg *)malloc((size_t)n_in * sizeof(seg));
    p->groups = (group *)malloc((size_t)n_in * sizeof(group));
    int *owner = (int *)malloc((size_t)n_in * sizeof(int));
    if (p->segs == NULL || p->groups == NULL || owner == NULL) {
        free(owner);
        plan_free(p);
        return PLAN_NOMEM;
    }
    const char *why = NULL;
    for (int i = 0; i < n_in && why == NULL; i++) {
        const lt_cuda_attn_segment *s = &in[i];
        owner[i] = i;
        *bad = i;
        if (s->n < 0 || s->begin < 0 || s->row0 < 0 || (long long)s->row0 + s->n > T ||
            (long long)s->begin + s->n > INT32_MAX)
            why = "segment rows out of range (row0, n, begin against T)";
        else if (s->n > 0 && (s->k == NULL || s->v == NULL))
            why = "segment without keys/values";
        else if (s->n > 0 && (((uintptr_t)s->k | (uintptr_t)s->v) & 15u) != 0)
            why = "segment keys/values not 16-byte aligned";
        else if (backward && s->n > 0 &&
                 (s->dk == NULL || s->dv == NULL || (((uintptr_t)s->dk | (uintptr_t)s->dv) & 15u) != 0))
            why = "segment dk/dv missing or not 16-byte aligned";
        if (why != NULL) break;
        *bad = -1;
        if (!backward || s->n == 0) continue;
        /* CPU reference's grouping: segments sharing dk or dv accumulate into the same
         * rows; here they must share both (one sample's buffers) */
        for (int j = 0; j < i; j++) {
            if (in[j].n == 0) continue;
            bool same_k = in[j].dk == s->dk, same_v = in[j].dv == s->dv;
            if (same_k != same_v) {
                why = "segments share dk but not dv (or dv but not dk)";
                *bad = i;
                break;
            }
            if (same_k) {
                owner[i] = owner[j];
                break;
            }
        }
    }
    if (why == NULL) {
        /* segments with rows, grouped by owner in order of the owners' first appearance */
        int ns = 0, ng = 0, qb = 0, kb = 0;
        for (int lead = 0; lead < n_in; lead++) {
            if (in[lead].n == 0 || owner[lead] != lead) continue;
            group gr = {ns, 0, 0, kb};
            for (int i = lead; i < n_in; i++) {
                if (in[i].n == 0 || owner[i] != lead) continue;
                const lt_cuda_attn_segment *s = &in[i];
                seg d;
                d.row0 = s->row0, d.n = s->n, d.begin = s->begin, d.qblk0 = qb;
                d.k = s->k, d.v = s->v, d.dk = s->dk, d.dv = s->dv;
                p->segs[ns++] = d;
                gr.nseg++;
                qb += (s->n + ROWS - 1) / ROWS;
                if (s->begin + s->n > gr.kv_len) gr.kv_len = s->begin + s->n;
            }
            kb += (gr.kv_len + ROWS - 1) / ROWS;
            p->groups[ng++] = gr;
        }
        p->n_segs = ns, p->n_groups = ng, p->q_blocks = qb, p->k_blocks = kb;
    }
    free(owner);
    if (why != NULL) plan_free(p);
    return why;
}

} // namespace lt_attn

#ifndef LT_ATTENTION_KERNELS_ONLY

using namespace lt_attn;

/* Copy the plan's segments and groups into the context's scratch (with room for `extra`
 * bytes after them, 256-aligned) on the compute stream. */
static lt_status plan_upload(lt_cuda *c, const plan *p, size_t extra, seg **dsegs, group **dgroups, void **dextra,
                             lt_error *err) {
    size_t sb = ((size_t)p->n_segs * sizeof(seg) + 255) & ~(size_t)255;
    size_t gb = ((size_t)p->n_groups * sizeof(group) + 255) & ~(size_t)255;
    void *base = NULL;
    lt_status st = lt_cuda_scratch(c, sb + gb + extra, &base, err);
    if (st != LT_OK) return st;
    *dsegs = (seg *)base;
    *dgroups = (group *)((char *)base + sb);
    if (dextra != NULL) *dextra = (char *)base + sb + gb;
    /* The source is PAGEABLE (plan_build's malloc) and the callers free it as soon as this
     * returns. Safe: the DMA engine cannot read pageable memory, so the runtime stages such
     * a copy through its own pinned buffer and returns once the pageable bytes are copied
     * there (CUDA Runtime API, "API synchronization behavior": pageable host-to-device copies
     * return once "the pageable buffer has been copied to the staging memory"; the Async
     * forms "might be synchronous" for pageable memory, the staging being that part). It
     * would NOT be safe from pinned memory (cudaMallocHost / cudaHostAlloc /
     * cudaHostRegister): that copy is truly asynchronous and its source must live until the
     * stream has run it (an event, or the next lt_cuda_sync). Keep plan_build's lists on
     * malloc, or move the free after such a wait. */
    LT_CUDA_CHECK(cudaMemcpyAsync(*dsegs, p->segs, (size_t)p->n_segs * sizeof(seg), cudaMemcpyHostToDevice, c->stream));
    LT_CUDA_CHECK(
        cudaMemcpyAsync(*dgroups, p->groups, (size_t)p->n_groups * sizeof(group), cudaMemcpyHostToDevice, c->stream));
    return LT_OK;
}

static bool misaligned(const void *p) { return ((uintptr_t)p & 15u) != 0; }

/* The debug mode's report (LONGTAIL_CUDA_SYNC: the stream synchronized after each kernel):
 * the error under the kernel that made it, with its launch shape. */
static lt_status launch_failed(lt_error *err, cudaError_t rc, const launch_note *at, int HD, const char *call) {
    lt_fail(err, LT_ERR_INTERNAL, NULL,
            "CUDA error %s (%s) in %s<%d> of %s, grid (%u, %u, %u), block %d, %zu bytes of dynamic shared memory",
            cudaGetErrorName(rc), cudaGetErrorString(rc), at->kernel ? at->kernel : "?", HD, call, at->grid.x,
            at->grid.y, at->grid.z, THREADS, at->smem);
    lt_error_hint(err, "LONGTAIL_CUDA_SYNC is set: the stream was synchronized after every kernel, so the failure is "
                       "this launch's (or a copy's queued since the kernel before)");
    return LT_ERR_INTERNAL;
}

extern "C" lt_status lt_cuda_attention_forward(lt_cuda *c, lt_bf16 *out, float *lse, const lt_bf16 *q,
                                               const lt_cuda_attn_segment *segs, int n_segs, int T, int nh, int nkv,
                                               int hd, lt_error *err) {
    const char *fn = "lt_cuda_attention_forward";
    if (c == NULL) return lt_fail(err, LT_ERR_INTERNAL, fn, "no CUDA context");
    plan p;
    int bad = -1;
    const char *why = plan_build(&p, segs, n_segs, T, nh, nkv, hd, false, &bad);
    if (why != NULL) {
        if (padded_hd(hd) == 0) return lt_fail(err, LT_ERR_CONFIG, fn, "head dim %d: %s", hd, why);
        if (why == PLAN_NOMEM) return lt_fail(err, LT_ERR_NOMEM, fn, "%s (%d segments)", why, n_segs);
        if (bad >= 0) return lt_fail(err, LT_ERR_INTERNAL, fn, "segment %d of %d: %s", bad, n_segs, why);
        return lt_fail(err, LT_ERR_INTERNAL, fn, "%s (T %d, nh %d, nkv %d, n_segs %d)", why, T, nh, nkv, n_segs);
    }
    if (p.q_blocks == 0) { /* nothing to compute (no segment has rows) */
        plan_free(&p);
        return LT_OK;
    }
    if (out == NULL || lse == NULL || q == NULL || misaligned(out) || misaligned(q)) {
        plan_free(&p);
        return lt_fail(err, LT_ERR_INTERNAL, fn, "out, lse or q missing or not 16-byte aligned");
    }
    seg *dsegs = NULL;
    group *dgroups = NULL;
    lt_status st = plan_upload(c, &p, 0, &dsegs, &dgroups, NULL, err);
    if (st == LT_OK) {
        const int HD = padded_hd(hd);
        launch_note at{}, *atp = c->sync_each ? &at : nullptr; /* the debug mode's (LONGTAIL_CUDA_SYNC) */
        cudaError_t rc =
            HD == 32   ? launch_forward<32>(c->stream, out, lse, q, dsegs, p.n_segs, p.q_blocks, nh, nkv, hd, atp,
                                            c->sync_each)
            : HD == 64 ? launch_forward<64>(c->stream, out, lse, q, dsegs, p.n_segs, p.q_blocks, nh, nkv, hd, atp,
                                            c->sync_each)
                       : launch_forward<128>(c->stream, out, lse, q, dsegs, p.n_segs, p.q_blocks, nh, nkv, hd, atp,
                                             c->sync_each);
        if (rc != cudaSuccess && atp != nullptr) st = launch_failed(err, rc, &at, HD, "attention forward");
        else if (rc != cudaSuccess) st = lt_cuda_fail_rt(err, rc, "launch of attention forward", __FILE__, __LINE__);
    }
    plan_free(&p);
    return st;
}

extern "C" lt_status lt_cuda_attention_backward(lt_cuda *c, lt_bf16 *dq, const lt_bf16 *dout, const lt_bf16 *out,
                                                const float *lse, const lt_bf16 *q, const lt_cuda_attn_segment *segs,
                                                int n_segs, int T, int nh, int nkv, int hd, lt_error *err) {
    const char *fn = "lt_cuda_attention_backward";
    if (c == NULL) return lt_fail(err, LT_ERR_INTERNAL, fn, "no CUDA context");
    plan p;
    int bad = -1;
    const char *why = plan_build(&p, segs, n_segs, T, nh, nkv, hd, true, &bad);
    if (why != NULL) {
        if (padded_hd(hd) == 0) return lt_fail(err, LT_ERR_CONFIG, fn, "head dim %d: %s", hd, why);
        if (why == PLAN_NOMEM) return lt_fail(err, LT_ERR_NOMEM, fn, "%s (%d segments)", why, n_segs);
        if (bad >= 0) return lt_fail(err, LT_ERR_INTERNAL, fn, "segment %d of %d: %s", bad, n_segs, why);
        return lt_fail(err, LT_ERR_INTERNAL, fn, "%s (T %d, nh %d, nkv %d, n_segs %d)", why, T, nh, nkv, n_segs);
    }
    if (p.q_blocks == 0) {
        plan_free(&p);
        return LT_OK;
    }
    if (dq == NULL || dout == NULL || out == NULL || lse == NULL || q == NULL || misaligned(dq) ||
        misaligned(dout) || misaligned(out) || misaligned(q)) {
        plan_free(&p);
        return lt_fail(err, LT_ERR_INTERNAL, fn, "dq, dout, out, lse or q missing or not 16-byte aligned");
    }
    seg *dsegs = NULL;
    group *dgroups = NULL;
    void *dD = NULL;
    lt_status st = plan_upload(c, &p, (size_t)T * (size_t)nh * sizeof(float), &dsegs, &dgroups, &dD, err);
    if (st == LT_OK) {
        const int HD = padded_hd(hd);
        float *D = (float *)dD;
        launch_note at{}, *atp = c->sync_each ? &at : nullptr; /* the debug mode's (LONGTAIL_CUDA_SYNC) */
        cudaError_t rc =
            HD == 32   ? launch_backward<32>(c->stream, dq, dout, out, lse, q, D, (size_t)T, dsegs, p.n_segs,
                                             p.q_blocks, dgroups, p.n_groups, p.k_blocks, nh, nkv, hd, atp,
                                             c->sync_each)
            : HD == 64 ? launch_backward<64>(c->stream, dq, dout, out, lse, q, D, (size_t)T, dsegs, p.n_segs,
                                             p.q_blocks, dgroups, p.n_groups, p.k_blocks, nh, nkv, hd, atp,
                                             c->sync_each)
                       : launch_backward<128>(c->stream, dq, dout, out, lse, q, D, (size_t)T, dsegs, p.n_segs,
                                              p.q_blocks, dgroups, p.n_groups, p.k_blocks, nh, nkv, hd, atp,
                                              c->sync_each);
        if (rc != cudaSuccess && atp != nullptr) st = launch_failed(err, rc, &at, HD, "attention backward");
        else if (rc != cudaSuccess) st = lt_cuda_fail_rt(err, rc, "launch of attention backward", __FILE__, __LINE__);
    }
    plan_free(&p);
    return st;
}

#endif /* LT_ATTENTION_KERNELS_ONLY */
