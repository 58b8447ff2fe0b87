/*
 * dev/cuda/rmsnorm.cu — scratch versions of the RMSNorm kernels (kernels/rmsnorm.cu),
 * forward and backward, each checked against a CPU fp32 reference (the formulas of
 * train/cpu/rmsnorm.c) on bf16 inputs and timed.
 *
 *   forward  v1: one thread per row (naive: a warp reads 32 rows C apart, uncoalesced)
 *            v2: one warp per row, 8 bf16 per 16-byte load (-> kernels/rmsnorm.cu)
 *   backward v1: one thread per row for dx; one thread per column looping every row for dw
 *            v2: one warp per row for dx (vectorized); dw in two deterministic stages
 *                (row chunks x 32 columns -> partials, then the partials in order)
 *                (-> kernels/rmsnorm.cu)
 *
 * Build and run:  nvcc -O3 -arch=sm_90 rmsnorm.cu -o rmsnorm && ./rmsnorm [version]
 * Tolerances: out, dx (bf16): 2^-8 |ref| + 4e-3 max|ref|; rstd, dw (fp32): 1e-4 max|ref|.
 */
#include "common.h"

static const int T = 8192, C = 2048;
static const float EPS = 1e-5f;

/* ---------------------------------------------------------------- CPU reference */

static void cpu_forward(float *out, float *rstd, const float *x, const float *w) {
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * C;
        float ss = 0.0f;
        for (int c = 0; c < C; c++) ss += xr[c] * xr[c];
        float r = 1.0f / sqrtf(ss / (float)C + EPS);
        rstd[t] = r;
        for (int c = 0; c < C; c++) out[(size_t)t * C + c] = xr[c] * r * w[c];
    }
}

static void cpu_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd) {
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * C, *g = dout + (size_t)t * C;
        float r = rstd[t], dot = 0.0f;
        for (int c = 0; c < C; c++) dot += g[c] * w[c] * xr[c];
        float k = r * r * r * dot / (float)C;
        for (int c = 0; c < C; c++) dx[(size_t)t * C + c] += r * g[c] * w[c] - k * xr[c];
    }
    for (int c = 0; c < C; c++) {
        float s = 0.0f;
        for (int t = 0; t < T; t++) s += dout[(size_t)t * C + c] * x[(size_t)t * C + c] * rstd[t];
        dw[c] += s;
    }
}

/* ---------------------------------------------------------------- forward versions */

__global__ void forward_v1(bf16 *out, float *rstd, const bf16 *x, const bf16 *w) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const bf16 *xr = x + (size_t)t * C;
    float ss = 0.0f;
    for (int c = 0; c < C; c++) ss += __bfloat162float(xr[c]) * __bfloat162float(xr[c]);
    float r = 1.0f / sqrtf(ss / (float)C + EPS);
    rstd[t] = r;
    for (int c = 0; c < C; c++)
        out[(size_t)t * C + c] = __float2bfloat16(__bfloat162float(xr[c]) * r * __bfloat162float(w[c]));
}

__global__ void forward_v2(bf16 *out, float *rstd, const bf16 *x, const bf16 *w) {
    int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (t >= T) return;
    const bf16 *xr = x + (size_t)t * C;
    float ss = 0.0f;
    for (int c = 8 * lane; c < C; c += 256) {
        f8 v = ld8(xr + c);
        for (int k = 0; k < 8; k++) ss += v.v[k] * v.v[k];
    }
    ss = warp_sum(ss);
    float r = 1.0f / sqrtf(ss / (float)C + EPS);
    if (lane == 0) rstd[t] = r;
    for (int c = 8 * lane; c < C; c += 256) {
        f8 v = ld8(xr + c), wv = ld8(w + c);
        for (int k = 0; k < 8; k++) v.v[k] = v.v[k] * r * wv.v[k];
        st8(out + (size_t)t * C + c, v);
    }
}

/* ---------------------------------------------------------------- backward versions */

__global__ void backward_dx_v1(bf16 *dx, const bf16 *dout, const bf16 *x, const bf16 *w, const float *rstd) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    size_t o = (size_t)t * C;
    float r = rstd[t], dot = 0.0f;
    for (int c = 0; c < C; c++)
        dot += __bfloat162float(dout[o + c]) * __bfloat162float(w[c]) * __bfloat162float(x[o + c]);
    float k = r * r * r * dot / (float)C;
    for (int c = 0; c < C; c++)
        dx[o + c] = __float2bfloat16(__bfloat162float(dx[o + c]) +
                                     r * __bfloat162float(dout[o + c]) * __bfloat162float(w[c]) -
                                     k * __bfloat162float(x[o + c]));
}

__global__ void backward_dw_v1(float *dw, const bf16 *dout, const bf16 *x, const float *rstd) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s = 0.0f;
    for (int t = 0; t < T; t++)
        s += __bfloat162float(dout[(size_t)t * C + c]) * __bfloat162float(x[(size_t)t * C + c]) * rstd[t];
    dw[c] += s;
}

__global__ void backward_dx_v2(bf16 *dx, const bf16 *dout, const bf16 *x, const bf16 *w, const float *rstd) {
    int t = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (t >= T) return;
    size_t o = (size_t)t * C;
    float r = rstd[t], dot = 0.0f;
    for (int c = 8 * lane; c < C; c += 256) {
        f8 g = ld8(dout + o + c), wv = ld8(w + c), xv = ld8(x + o + c);
        for (int k = 0; k < 8; k++) dot += g.v[k] * wv.v[k] * xv.v[k];
    }
    dot = warp_sum(dot);
    float kk = r * r * r * dot / (float)C;
    for (int c = 8 * lane; c < C; c += 256) {
        f8 g = ld8(dout + o + c), wv = ld8(w + c), xv = ld8(x + o + c), d = ld8(dx + o + c);
        for (int k = 0; k < 8; k++) d.v[k] += r * g.v[k] * wv.v[k] - kk * xv.v[k];
        st8(dx + o + c, d);
    }
}

enum { DW_COLS = 32, DW_ROWS = 8, DW_CHUNKS = 128 };

__global__ void backward_dw_partial_v2(float *partial, const bf16 *dout, const bf16 *x, const float *rstd) {
    __shared__ float sh[DW_ROWS][DW_COLS + 1];
    int c = blockIdx.x * DW_COLS + threadIdx.x, R = gridDim.y;
    int t0 = (int)((long long)T * blockIdx.y / R), t1 = (int)((long long)T * (blockIdx.y + 1) / R);
    float s = 0.0f;
    if (c < C)
        for (int t = t0 + threadIdx.y; t < t1; t += DW_ROWS)
            s += __bfloat162float(dout[(size_t)t * C + c]) * __bfloat162float(x[(size_t)t * C + c]) * rstd[t];
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float total = 0.0f;
        for (int k = 0; k < DW_ROWS; k++) total += sh[k][threadIdx.x];
        partial[(size_t)blockIdx.y * C + c] = total;
    }
}

__global__ void backward_dw_finish_v2(float *dw, const float *partial, int R) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float s = 0.0f;
    for (int r = 0; r < R; r++) s += partial[(size_t)r * C + c];
    dw[c] += s;
}

int main(int argc, char **argv) {
    int want = version_arg(argc, argv);
    size_t n = (size_t)T * C;
    float *x = rand_bf16_values(n, -2, 2), *w = rand_bf16_values(C, 0.5, 1.5), *dout = rand_bf16_values(n, -1, 1);
    float *dx0 = rand_bf16_values(n, -0.5, 0.5), *dw0 = rand_bf16_values(C, -1, 1);
    float *ref = (float *)mallocCheck(n * 4), *rrstd = (float *)mallocCheck(T * 4);
    float *rdx = (float *)mallocCheck(n * 4), *rdw = (float *)mallocCheck(C * 4);
    cpu_forward(ref, rrstd, x, w);
    memcpy(rdx, dx0, n * 4);
    memcpy(rdw, dw0, C * 4);
    cpu_backward(rdx, rdw, dout, x, w, rrstd);

    bf16 *d_x = to_device_bf16(x, n), *d_w = to_device_bf16(w, C), *d_dout = to_device_bf16(dout, n);
    bf16 *d_out, *d_dx;
    float *d_rstd, *d_dw, *d_partial;
    cudaCheck(cudaMalloc(&d_out, n * 2));
    cudaCheck(cudaMalloc(&d_rstd, T * 4));
    cudaCheck(cudaMalloc(&d_partial, (size_t)DW_CHUNKS * C * 4));
    d_dx = to_device_bf16(dx0, n);
    d_dw = to_device_f32(dw0, C);
    int fails = 0;

    printf("rmsnorm forward, T=%d C=%d\n", T, C);
    for (int v = 1; v <= 2; v++) {
        if (want && want != v) continue;
        auto launch = [&]() {
            if (v == 1) forward_v1<<<ceil_div(T, 128), 128>>>(d_out, d_rstd, d_x, d_w);
            else forward_v2<<<ceil_div(T, 8), 256>>>(d_out, d_rstd, d_x, d_w);
        };
        launch();
        cudaCheck(cudaDeviceSynchronize());
        float *out = from_device_bf16(d_out, n), *rs = from_device_f32(d_rstd, T);
        printf("  v%d\n", v);
        fails += !validate("out", out, ref, n, 1.0 / 256, 4e-3);
        fails += !validate("rstd", rs, rrstd, T, 0, 1e-4);
        float ms = time_ms(20, launch);
        printf("    %.3f ms, %.0f GB/s\n", ms, (double)(2 * n * 2 + C * 2 + T * 4) / (ms * 1e6));
        free(out), free(rs);
    }

    printf("rmsnorm backward, T=%d C=%d\n", T, C);
    cudaCheck(cudaMemcpy(d_rstd, rrstd, T * 4, cudaMemcpyHostToDevice));
    for (int v = 1; v <= 2; v++) {
        if (want && want != v) continue;
        auto launch = [&]() {
            if (v == 1) {
                backward_dx_v1<<<ceil_div(T, 128), 128>>>(d_dx, d_dout, d_x, d_w, d_rstd);
                backward_dw_v1<<<ceil_div(C, 128), 128>>>(d_dw, d_dout, d_x, d_rstd);
            } else {
                backward_dx_v2<<<ceil_div(T, 8), 256>>>(d_dx, d_dout, d_x, d_w, d_rstd);
                int R = ceil_div(T, 64) < DW_CHUNKS ? ceil_div(T, 64) : DW_CHUNKS;
                backward_dw_partial_v2<<<dim3(ceil_div(C, DW_COLS), R), dim3(DW_COLS, DW_ROWS)>>>(d_partial, d_dout,
                                                                                                  d_x, d_rstd);
                backward_dw_finish_v2<<<ceil_div(C, 256), 256>>>(d_dw, d_partial, R);
            }
        };
        /* one checked run from the initial gradients (the backward adds) */
        bf16 *fresh_dx = to_device_bf16(dx0, n);
        cudaCheck(cudaMemcpy(d_dx, fresh_dx, n * 2, cudaMemcpyDeviceToDevice));
        cudaCheck(cudaMemcpy(d_dw, dw0, C * 4, cudaMemcpyHostToDevice));
        cudaCheck(cudaFree(fresh_dx));
        launch();
        cudaCheck(cudaDeviceSynchronize());
        float *gdx = from_device_bf16(d_dx, n), *gdw = from_device_f32(d_dw, C);
        printf("  v%d\n", v);
        fails += !validate("dx", gdx, rdx, n, 1.0 / 256, 4e-3);
        fails += !validate("dw", gdw, rdw, C, 0, 1e-4);
        float ms = time_ms(20, launch); /* keeps adding: only the time matters here */
        printf("    %.3f ms, %.0f GB/s (dx pass + dw pass)\n", ms, (double)(5 * n * 2 + C * 8 + T * 8) / (ms * 1e6));
        free(gdx), free(gdw);
    }
    printf("%s\n", fails ? "SOME VERSIONS FAILED" : "all versions match the CPU reference");
    return fails ? 1 : 0;
}
