/*
 * dev/cuda/embed_backward.cu — scratch versions of the embedding gradient
 * dwte[ids[t]] += dout[t] (kernels/embed.cu), fp32 gradient from bf16 dout, checked
 * against the CPU reference (train/cpu/embed.c: rows added in t order) and timed, on two
 * id sets: long-tailed ids (a few repeat a lot) and one id repeated T times (the old 1B
 * benchmark corpus, one word over and over).
 * Every version is deterministic (no float atomics: the same bits on every run).
 *
 *   v1: one thread per column c, looping over all T tokens in order (C threads in all:
 *       a few SMs busy); bit-exact
 *   v2: stable radix sort of (id, t) pairs (CUB), then one block per run of equal ids
 *       adds the run's rows in t order; bit-exact, but a run is one block: T copies of
 *       one id run on one SM
 *   v3: v2's sort, runs cut into pieces of 64 sorted positions from the run's start and
 *       columns into chunks of 512, one block per (piece, chunk): piece 0 adds into the
 *       dwte row, later pieces into partial rows that a second kernel adds in piece order
 *       (-> kernels/embed.cu); bit-exact for runs of <= 64 tokens, else the fp32 rounding
 *       of a different (fixed) grouping
 *
 * Build and run:  nvcc -O3 -arch=sm_90 embed_backward.cu -o embed_backward && ./embed_backward [version]
 * Tolerance: v1, v2 bit-exact; v3 1e-5 of the largest |dwte| (summation grouping only).
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

enum { PIECE = 64, COLS = 512 };

__device__ int run_start_v3(const int *key, int p) {
    int lo = 0, hi = p, id = key[p];
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (key[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

__global__ void embed_bwd_pieces_v3(float *dwte, float *partial, const bf16 *dout, const int *key, const int *order) {
    int p = blockIdx.x, id = key[p];
    int rs = p > 0 && key[p - 1] == id ? run_start_v3(key, p) : p;
    if ((p - rs) % PIECE != 0) return;
    int q = p + 1;
    while (q < T && q < p + PIECE && key[q] == id) q++;
    int c0 = blockIdx.y * COLS, c1 = c0 + COLS < C ? c0 + COLS : C;
    float *row = p == rs ? dwte + (size_t)id * C : partial + (size_t)(p / PIECE) * C;
    for (int c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
        float acc = p == rs ? row[c] : 0.0f;
        for (int r = p; r < q; r++) acc += __bfloat162float(dout[(size_t)order[r] * C + c]);
        row[c] = acc;
    }
}

__global__ void embed_bwd_combine_v3(float *dwte, const float *partial, const int *key) {
    __shared__ int start;
    if (threadIdx.x == 0) start = -1;
    __syncthreads();
    int p = blockIdx.x * PIECE + threadIdx.x;
    if (threadIdx.x < PIECE && p < T && (p == 0 || key[p - 1] != key[p]) && p + PIECE < T && key[p + PIECE] == key[p])
        start = p;
    __syncthreads();
    p = start;
    if (p < 0) return;
    int id = key[p], c0 = blockIdx.y * COLS, c1 = c0 + COLS < C ? c0 + COLS : C;
    for (int c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
        float acc = dwte[(size_t)id * C + c];
        for (int q = p + PIECE; q < T && key[q] == id; q += PIECE) acc += partial[(size_t)(q / PIECE) * C + c];
        dwte[(size_t)id * C + c] = acc;
    }
}

static int run_set(int want, const int *ids, const char *what);

int main(int argc, char **argv) {
    int want = version_arg(argc, argv);
    int *ids = (int *)mallocCheck(T * sizeof(int));
    for (int t = 0; t < T; t++) { /* long-tailed ids: a few tokens repeat a lot */
        double u = rand01();
        ids[t] = (int)(u * u * u * (V - 1));
    }
    int fails = run_set(want, ids, "long-tailed ids");
    for (int t = 0; t < T; t++) ids[t] = 464; /* one word, T times */
    fails += run_set(want, ids, "one id repeated");
    printf("%s\n", fails ? "SOME VERSIONS FAILED" : "all versions match the CPU reference");
    free(ids);
    return fails ? 1 : 0;
}

static int run_set(int want, const int *ids, const char *what) {
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
    float *d_partial;
    cudaCheck(cudaMalloc(&d_partial, (size_t)ceil_div(T, PIECE) * C * 4));
    int fails = 0;
    printf("embedding backward, T=%d C=%d V=%d, %s\n", T, C, V, what);
    for (int v = 1; v <= 3; v++) {
        if (want && want != v) continue;
        auto launch = [&]() {
            if (v == 1) {
                embed_bwd_v1<<<ceil_div(C, 128), 128>>>(d_dw, d_dout, d_ids);
            } else {
                iota<<<ceil_div(T, 256), 256>>>(d_order_in, T);
                cudaCheck(cub::DeviceRadixSort::SortPairs(d_temp, temp_bytes, d_ids, d_key, d_order_in, d_order, T));
                if (v == 2) {
                    embed_bwd_runs_v2<<<T, 256>>>(d_dw, d_dout, d_key, d_order);
                } else {
                    embed_bwd_pieces_v3<<<dim3(T, ceil_div(C, COLS)), 256>>>(d_dw, d_partial, d_dout, d_key, d_order);
                    embed_bwd_combine_v3<<<dim3(ceil_div(T, PIECE), ceil_div(C, COLS)), 256>>>(d_dw, d_partial, d_key);
                }
            }
        };
        cudaCheck(cudaMemcpy(d_dw, d_dw0, (size_t)V * C * 4, cudaMemcpyDeviceToDevice));
        launch();
        cudaCheck(cudaDeviceSynchronize());
        float *got = from_device_f32(d_dw, (size_t)V * C);
        printf("  v%d\n", v);
        fails += !validate("dwte", got, ref, (size_t)V * C, 0, v == 3 ? 1e-5 : 0);
        float ms = time_ms(10, launch);
        printf("    %.3f ms, %.0f GB/s (dout read, touched dwte rows read and written)\n", ms,
               (double)((size_t)T * C * (2 + 8)) / (ms * 1e6));
        free(got);
    }
    free(dout), free(dw0), free(ref);
    cudaCheck(cudaFree(d_dout)), cudaCheck(cudaFree(d_dw0)), cudaCheck(cudaFree(d_dw)), cudaCheck(cudaFree(d_ids));
    cudaCheck(cudaFree(d_order_in)), cudaCheck(cudaFree(d_key)), cudaCheck(cudaFree(d_order));
    cudaCheck(cudaFree(d_temp)), cudaCheck(cudaFree(d_partial));
    return fails;
}
