/*
 * kernels/rmsnorm.cu — Llama RMSNorm over bf16 rows, the twin of train/cpu/rmsnorm.c
 * (fp32 math, bf16 in and out, rstd saved in fp32):
 *   forward   rstd[t] = 1/sqrt(mean_c x[t,c]^2 + eps), out[t,c] = x[t,c] rstd[t] w[c]
 *   backward  dx[t,c] += r g[c] w[c] - r^3 x[t,c] (sum_j g[j] w[j] x[j]) / C    (r = rstd[t], g = dout)
 *             dw[c]   += sum_t dout[t,c] x[t,c] r[t]                           (fp32)
 *
 * One warp per row for the forward and dx (dev/cuda/rmsnorm.cu, version 2: the row's C
 * values are read 8 at a time, C % 8 == 0 and 16-byte aligned rows, else the scalar loop
 * of the same kernel). dw is deterministic: a first kernel sums a fixed chunk of rows per
 * 32 columns into partials[R][C] (R depends on T only), a second adds the R partials of
 * each column in order into dw — no atomics.
 */
#include "kernels/cuda_common.cuh" /* lt_cuda, lt_ld8, lt_warp_sum, lt_cuda_scratch */

enum { RMS_THREADS = 256, RMS_ROWS_PER_BLOCK = RMS_THREADS / 32 };
enum { DW_COLS = 32, DW_ROWS = 8, DW_MAX_CHUNKS = 128, DW_ROWS_PER_CHUNK = 64 };

template <bool VEC>
__global__ void rmsnorm_forward_kernel(lt_bf16 *out, float *rstd, const lt_bf16 *x, const lt_bf16 *w, int T, int C,
                                       float eps) {
    int t = blockIdx.x * RMS_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (t >= T) return; /* the whole warp leaves together */
    const lt_bf16 *xr = x + (size_t)t * (size_t)C;
    lt_bf16 *o = out + (size_t)t * (size_t)C;
    float ss = 0.0f;
    if (VEC) {
        for (int c = 8 * lane; c < C; c += 8 * 32) {
            lt_bf16x8 v = lt_ld8(xr + c);
#pragma unroll
            for (int k = 0; k < 8; k++) ss += v.v[k] * v.v[k];
        }
    } else {
        for (int c = lane; c < C; c += 32) {
            float v = lt_ld(xr + c);
            ss += v * v;
        }
    }
    ss = lt_warp_sum(ss);
    float r = 1.0f / sqrtf(ss / (float)C + eps);
    if (lane == 0) rstd[t] = r;
    if (VEC) {
        for (int c = 8 * lane; c < C; c += 8 * 32) {
            lt_bf16x8 v = lt_ld8(xr + c), wv = lt_ld8(w + c);
#pragma unroll
            for (int k = 0; k < 8; k++) v.v[k] = v.v[k] * r * wv.v[k];
            lt_st8(o + c, v);
        }
    } else {
        for (int c = lane; c < C; c += 32) lt_st(o + c, lt_ld(xr + c) * r * lt_ld(w + c));
    }
}

template <bool VEC>
__global__ void rmsnorm_backward_dx_kernel(lt_bf16 *dx, const lt_bf16 *dout, const lt_bf16 *x, const lt_bf16 *w,
                                           const float *rstd, int T, int C) {
    int t = blockIdx.x * RMS_ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (t >= T) return;
    size_t off = (size_t)t * (size_t)C;
    const lt_bf16 *xr = x + off, *g = dout + off;
    lt_bf16 *d = dx + off;
    float r = rstd[t];
    float dot = 0.0f;
    if (VEC) {
        for (int c = 8 * lane; c < C; c += 8 * 32) {
            lt_bf16x8 gv = lt_ld8(g + c), wv = lt_ld8(w + c), xv = lt_ld8(xr + c);
#pragma unroll
            for (int k = 0; k < 8; k++) dot += gv.v[k] * wv.v[k] * xv.v[k];
        }
    } else {
        for (int c = lane; c < C; c += 32) dot += lt_ld(g + c) * lt_ld(w + c) * lt_ld(xr + c);
    }
    dot = lt_warp_sum(dot);
    float kk = r * r * r * dot / (float)C;
    if (VEC) {
        for (int c = 8 * lane; c < C; c += 8 * 32) {
            lt_bf16x8 gv = lt_ld8(g + c), wv = lt_ld8(w + c), xv = lt_ld8(xr + c), dv = lt_ld8(d + c);
#pragma unroll
            for (int k = 0; k < 8; k++) dv.v[k] += r * gv.v[k] * wv.v[k] - kk * xv.v[k];
            lt_st8(d + c, dv);
        }
    } else {
        for (int c = lane; c < C; c += 32)
            lt_st(d + c, lt_ld(d + c) + r * lt_ld(g + c) * lt_ld(w + c) - kk * lt_ld(xr + c));
    }
}

/* Block (bx, by): columns bx*32 .. +32, rows [T by / R, T (by+1) / R); thread (tx, ty)
 * sums rows ty, ty+8, ... of column bx*32+tx; the 8 sums are added in ty order. */
__global__ void rmsnorm_dw_partial_kernel(float *partial, const lt_bf16 *dout, const lt_bf16 *x, const float *rstd,
                                          int T, int C) {
    __shared__ float sh[DW_ROWS][DW_COLS + 1];
    int c = blockIdx.x * DW_COLS + threadIdx.x;
    int R = gridDim.y;
    int t0 = (int)((int64_t)T * blockIdx.y / R), t1 = (int)((int64_t)T * (blockIdx.y + 1) / R);
    float s = 0.0f;
    if (c < C)
        for (int t = t0 + threadIdx.y; t < t1; t += DW_ROWS) {
            size_t i = (size_t)t * (size_t)C + (size_t)c;
            s += lt_ld(dout + i) * lt_ld(x + i) * rstd[t];
        }
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float total = 0.0f;
        for (int k = 0; k < DW_ROWS; k++) total += sh[k][threadIdx.x];
        partial[(size_t)blockIdx.y * (size_t)C + (size_t)c] = total;
    }
}

__global__ void rmsnorm_dw_finish_kernel(float *dw, const float *partial, int R, int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s = 0.0f;
    for (int r = 0; r < R; r++) s += partial[(size_t)r * (size_t)C + (size_t)c];
    dw[c] += s;
}

/* Row vectors of 8 need C % 8 == 0 and 16-byte aligned bases (then every row is). */
static bool vec_ok(int C, const void *a, const void *b, const void *d, const void *e) {
    return C % 8 == 0 && lt_cuda_aligned16(a) && lt_cuda_aligned16(b) && lt_cuda_aligned16(d) &&
           (e == NULL || lt_cuda_aligned16(e));
}

extern "C" lt_status lt_cuda_rmsnorm_forward(lt_cuda *c, lt_bf16 *out, float *rstd, const lt_bf16 *x,
                                             const lt_bf16 *w, int T, int C, float eps, lt_error *err) {
    LT_CUDA_REQUIRE(T >= 0 && C > 0, "lt_cuda_rmsnorm_forward", "bad shape T=%d C=%d", T, C);
    if (T == 0) return LT_OK;
    unsigned blocks = (unsigned)((T + RMS_ROWS_PER_BLOCK - 1) / RMS_ROWS_PER_BLOCK);
    if (vec_ok(C, out, x, w, NULL)) {
        LT_KERNEL(rmsnorm_forward_kernel<true>, blocks, RMS_THREADS, c->stream)(out, rstd, x, w, T, C, eps);
        LT_LAUNCH_CHECK("rmsnorm_forward_kernel<vec>");
    } else {
        LT_KERNEL(rmsnorm_forward_kernel<false>, blocks, RMS_THREADS, c->stream)(out, rstd, x, w, T, C, eps);
        LT_LAUNCH_CHECK("rmsnorm_forward_kernel");
    }
    return LT_OK;
}

extern "C" lt_status lt_cuda_rmsnorm_backward(lt_cuda *c, lt_bf16 *dx, float *dw, const lt_bf16 *dout,
                                              const lt_bf16 *x, const lt_bf16 *w, const float *rstd, int T, int C,
                                              lt_error *err) {
    LT_CUDA_REQUIRE(T >= 0 && C > 0, "lt_cuda_rmsnorm_backward", "bad shape T=%d C=%d", T, C);
    if (T == 0) return LT_OK;
    unsigned blocks = (unsigned)((T + RMS_ROWS_PER_BLOCK - 1) / RMS_ROWS_PER_BLOCK);
    if (dx != NULL) {
        if (vec_ok(C, dx, dout, x, w)) {
            LT_KERNEL(rmsnorm_backward_dx_kernel<true>, blocks, RMS_THREADS, c->stream)(dx, dout, x, w, rstd, T, C);
            LT_LAUNCH_CHECK("rmsnorm_backward_dx_kernel<vec>");
        } else {
            LT_KERNEL(rmsnorm_backward_dx_kernel<false>, blocks, RMS_THREADS, c->stream)(dx, dout, x, w, rstd, T, C);
            LT_LAUNCH_CHECK("rmsnorm_backward_dx_kernel");
        }
    }
    if (dw != NULL) {
        int R = (T + DW_ROWS_PER_CHUNK - 1) / DW_ROWS_PER_CHUNK; /* a function of T only: deterministic */
        if (R > DW_MAX_CHUNKS) R = DW_MAX_CHUNKS;
        void *partial = NULL;
        lt_status st = lt_cuda_scratch(c, (size_t)R * (size_t)C * sizeof(float), &partial, err);
        if (st != LT_OK) return st;
        dim3 grid((unsigned)((C + DW_COLS - 1) / DW_COLS), (unsigned)R), block(DW_COLS, DW_ROWS);
        LT_KERNEL(rmsnorm_dw_partial_kernel, grid, block, c->stream)((float *)partial, dout, x, rstd, T, C);
        LT_LAUNCH_CHECK("rmsnorm_dw_partial_kernel");
        LT_KERNEL(rmsnorm_dw_finish_kernel, (unsigned)((C + 255) / 256), 256, c->stream)(dw, (const float *)partial, R, C);
        LT_LAUNCH_CHECK("rmsnorm_dw_finish_kernel");
    }
    return LT_OK;
}
