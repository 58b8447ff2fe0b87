/*
 * dev/cuda/rope.cu — scratch versions of the RoPE kernel (kernels/rope.cu), in place on
 * bf16 [T, nh*hd], checked against a CPU fp32 reference (train/cpu/rope.c's formula:
 * inv_freq = 1/theta^(2i/hd) in float, angle = pos * inv_freq, rotate_half pairs i, i+hd/2)
 * and timed. The inv_freq table is computed on the host with the CPU's expression and
 * passed by value, so the angles are the CPU's bit for bit.
 *
 *   v1: one thread per (row, head, i): cos/sin recomputed for every head
 *   v2: one thread per (row, i): cos/sin once, applied to every head (-> kernels/rope.cu)
 *
 * Build and run:  nvcc -O3 -arch=sm_90 rope.cu -o rope && ./rope [version]
 * Tolerance (bf16 out): 2^-8 |ref| + 1e-3 max|ref| (CUDA's cosf/sinf are within 2 ulp).
 */
#include "common.h"

static const int T = 8192, NH = 32, HD = 64;
static const float THETA = 500000.0f;

struct freqs {
    float inv_freq[HD / 2];
};

static void cpu_rope(float *x, const int *pos) {
    int half = HD / 2;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            float e = (float)(2 * i) / (float)HD;
            float inv = 1.0f / powf(THETA, e);
            float a = (float)pos[t] * inv, c = cosf(a), s = sinf(a);
            for (int h = 0; h < NH; h++) {
                float *xh = x + (size_t)t * NH * HD + (size_t)h * HD;
                float x0 = xh[i], x1 = xh[i + half];
                xh[i] = x0 * c - x1 * s;
                xh[i + half] = x1 * c + x0 * s;
            }
        }
}

__global__ void rope_v1(bf16 *x, const int *pos, const freqs f) {
    int half = HD / 2;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * NH * half) return;
    int i = (int)(idx % half), h = (int)(idx / half % NH), t = (int)(idx / half / NH);
    float a = (float)pos[t] * f.inv_freq[i], c = cosf(a), s = sinf(a);
    bf16 *xh = x + (size_t)t * NH * HD + (size_t)h * HD;
    float x0 = __bfloat162float(xh[i]), x1 = __bfloat162float(xh[i + half]);
    xh[i] = __float2bfloat16(x0 * c - x1 * s);
    xh[i + half] = __float2bfloat16(x1 * c + x0 * s);
}

__global__ void rope_v2(bf16 *x, const int *pos, const freqs f) {
    int half = HD / 2;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * half) return;
    int t = (int)(idx / half), i = (int)(idx % half);
    float a = (float)pos[t] * f.inv_freq[i], c = cosf(a), s = sinf(a);
    bf16 *row = x + (size_t)t * NH * HD;
    for (int h = 0; h < NH; h++) {
        bf16 *xh = row + (size_t)h * HD;
        float x0 = __bfloat162float(xh[i]), x1 = __bfloat162float(xh[i + half]);
        xh[i] = __float2bfloat16(x0 * c - x1 * s);
        xh[i + half] = __float2bfloat16(x1 * c + x0 * s);
    }
}

int main(int argc, char **argv) {
    int want = version_arg(argc, argv);
    size_t n = (size_t)T * NH * HD;
    float *x = rand_bf16_values(n, -1, 1), *ref = (float *)mallocCheck(n * 4);
    int *pos = (int *)mallocCheck(T * sizeof(int));
    for (int t = 0; t < T; t++) pos[t] = t < T / 2 ? t : 100000 + t; /* a slice deep in a long sample */
    memcpy(ref, x, n * 4);
    cpu_rope(ref, pos);
    freqs f;
    for (int i = 0; i < HD / 2; i++) f.inv_freq[i] = 1.0f / powf(THETA, (float)(2 * i) / (float)HD);
    int *d_pos;
    cudaCheck(cudaMalloc(&d_pos, T * sizeof(int)));
    cudaCheck(cudaMemcpy(d_pos, pos, T * sizeof(int), cudaMemcpyHostToDevice));
    bf16 *d_x = to_device_bf16(x, n), *d_x0 = to_device_bf16(x, n);
    int fails = 0;
    printf("rope forward, T=%d heads=%d hd=%d\n", T, NH, HD);
    for (int v = 1; v <= 2; v++) {
        if (want && want != v) continue;
        auto launch = [&]() {
            if (v == 1) rope_v1<<<ceil_div((long long)T * NH * HD / 2, 256), 256>>>(d_x, d_pos, f);
            else rope_v2<<<ceil_div((long long)T * HD / 2, 256), 256>>>(d_x, d_pos, f);
        };
        cudaCheck(cudaMemcpy(d_x, d_x0, n * 2, cudaMemcpyDeviceToDevice));
        launch();
        cudaCheck(cudaDeviceSynchronize());
        float *got = from_device_bf16(d_x, n);
        printf("  v%d\n", v);
        fails += !validate("x", got, ref, n, 1.0 / 256, 1e-3);
        float ms = time_ms(20, launch); /* rotates further each run: only the time matters */
        printf("    %.3f ms, %.0f GB/s\n", ms, (double)(2 * n * 2) / (ms * 1e6));
        free(got);
    }
    printf("%s\n", fails ? "SOME VERSIONS FAILED" : "all versions match the CPU reference");
    return fails ? 1 : 0;
}
