/*
 * dev/cuda/embed_backward.cu — scratch versions of the embedding gradient
 * dwte[ids[t]] += dout[t] (kernels/embed.cu), fp32 gradient from bf16 dout, checked
 * against the CPU reference (train/cpu/embed.c: rows added in t order) and timed.
 * Every version is deterministic (no float atomics), so each must equal the CPU bit for
 * bit: each dwte element's adds happen in t order in one thread.
 *
 *   v1: one thread per column c, looping over all T tokens in order (C threads in all:
 *       a few SMs busy)
 *   v2: stable radix sort of (id, t) pairs (CUB), then one block per run of equal ids
 *       adds the run's rows in t order (-> kernels/embed.cu)
 *
 * Build and run:  nvcc -O3 -arch=sm_90 embed_backward.cu -o embed_backward && ./embed_backward [version]
 * Tolerance: bit-exact.
 */
#include <cub/cub.cuh>

#include "common.h"

static const int T = 8192, C = 2048, V = 32000;

__global__ void embed_bwd_v1(float *dwte, const bf16 *dout, const int *ids) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int t = 0; t < T; t++) dwte[(size_t)ids[t] * C + c] += __bfloat162float(dout[(size_t)t * C + c]);
}

__global__ void iota(int *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = i;
}

__global__ void embed_bwd_runs_v2(float *dwte, const bf16 *dout, const int *key, const int *order) {
    int p = blockIdx.x;
    if (p > 0 && key[p] == key[p - 1]) return;
    int q = p + 1;
    while (q < T && key[q] == key[p]) q++;
    float *row = dwte + (size_t)key[p] * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = row[c];
        for (int r = p; r < q; r++) acc += __bfloat162float(dout[(size_t)order[r] * C + c]);
        row[c] = acc;
    }
}

int main(int argc, char **argv) {
    int want = version_arg(argc, argv);
    int *ids = (int *)mallocCheck(T * sizeof(int));
    for (int t = 0; t < T; t++) { /* long-tailed ids: a few tokens repeat a lot */
        double u = rand01();
        ids[t] = (int)(u * u * u * (V - 1));
    }
    float *dout = rand_bf16_values((size_t)T * C, -1, 1), *dw0 = rand_bf16_values((size_t)V * C, -1, 1);
    float *ref = (float *)mallocCheck((size_t)V * C * 4);
    memcpy(ref, dw0, (size_t)V * C * 4);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) ref[(size_t)ids[t] * C + c] += dout[(size_t)t * C + c];
    bf16 *d_dout = to_device_bf16(dout, (size_t)T * C);
    float *d_dw0 = to_device_f32(dw0, (size_t)V * C), *d_dw;
    cudaCheck(cudaMalloc(&d_dw, (size_t)V * C * 4));
    int *d_ids, *d_order_in, *d_key, *d_order;
    cudaCheck(cudaMalloc(&d_ids, T * sizeof(int)));
    cudaCheck(cudaMemcpy(d_ids, ids, T * sizeof(int), cudaMemcpyHostToDevice));
    cudaCheck(cudaMalloc(&d_order_in, T * sizeof(int)));
    cudaCheck(cudaMalloc(&d_key, T * sizeof(int)));
    cudaCheck(cudaMalloc(&d_order, T * sizeof(int)));
    size_t temp_bytes = 0;
    cudaCheck(cub::DeviceRadixSort::SortPairs(NULL, temp_bytes, d_ids, d_key, d_order_in, d_order, T));
    void *d_temp;
    cudaCheck(cudaMalloc(&d_temp, temp_bytes));
    int fails = 0;
    printf("embedding backward, T=%d C=%d V=%d\n", T, C, V);
    for (int v = 1; v <= 2; v++) {
        if (want && want != v) continue;
        auto launch = [&]() {
            if (v == 1) {
                embed_bwd_v1<<<ceil_div(C, 128), 128>>>(d_dw, d_dout, d_ids);
            } else {
                iota<<<ceil_div(T, 256), 256>>>(d_order_in, T);
                cudaCheck(cub::DeviceRadixSort::SortPairs(d_temp, temp_bytes, d_ids, d_key, d_order_in, d_order, T));
                embed_bwd_runs_v2<<<T, 256>>>(d_dw, d_dout, d_key, d_order);
            }
        };
        cudaCheck(cudaMemcpy(d_dw, d_dw0, (size_t)V * C * 4, cudaMemcpyDeviceToDevice));
        launch();
        cudaCheck(cudaDeviceSynchronize());
        float *got = from_device_f32(d_dw, (size_t)V * C);
        printf("  v%d\n", v);
        fails += !validate("dwte", got, ref, (size_t)V * C, 0, 0);
        float ms = time_ms(10, launch);
        printf("    %.3f ms, %.0f GB/s (dout read, touched dwte rows read and written)\n", ms,
               (double)((size_t)T * C * (2 + 8)) / (ms * 1e6));
        free(got);
    }
    printf("%s\n", fails ? "SOME VERSIONS FAILED" : "all versions match the CPU reference");
    return fails ? 1 : 0;
}
