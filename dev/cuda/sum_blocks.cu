/*
 * dev/cuda/sum_blocks.cu — scratch versions of the context-parallel dK/dV sum
 * (kernels/context.cu lt_cuda_sum_blocks): G member blocks of n bf16 elements, `stride`
 * apart, summed in fp32 in member order and rounded once, checked against a CPU reference
 * computed the same way (train/model/backend_cpu.c bf16_sum_blocks) and timed.
 *
 *   v1: one element per thread, grid-stride (-> kernels/context.cu: any n, any alignment)
 *   v2: 8 elements per thread (16-byte loads/stores), n and stride multiples of 8
 *
 * Build and run:  nvcc -O3 -arch=sm_90 sum_blocks.cu -o sum_blocks && ./sum_blocks [version]
 * Tolerance: none. Both versions add the same fp32 values in the same order, so they must
 * equal the reference bit for bit (validate with zero tolerance).
 */
#include "common.h"

/* a group of 4 members, each holding dK and dV of 32K rows of a 1024-wide K/V (8 heads of
 * 128): the rows a ~1B model's CP group sums per layer at a 32K context */
static const int G = 4;
static const size_t N = (size_t)2 * 32768 * 1024;

__global__ void sum_v1(bf16 *dst, const bf16 *src, int g, size_t stride, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float s = __bfloat162float(src[i]);
        for (int j = 1; j < g; j++) s += __bfloat162float(src[(size_t)j * stride + i]);
        dst[i] = __float2bfloat16(s);
    }
}

__global__ void sum_v2(bf16 *dst, const bf16 *src, int g, size_t stride, size_t n8) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
        f8 s = ld8(src + 8 * i);
        for (int j = 1; j < g; j++) {
            f8 x = ld8(src + (size_t)j * stride + 8 * i);
            for (int k = 0; k < 8; k++) s.v[k] += x.v[k];
        }
        st8(dst + 8 * i, s);
    }
}

int main(int argc, char **argv) {
    int want = version_arg(argc, argv);
    int sms = 0;
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    float *src = rand_bf16_values((size_t)G * N, -4, 4), *ref = (float *)mallocCheck(N * 4);
    for (size_t i = 0; i < N; i++) {
        float s = src[i];
        for (int j = 1; j < G; j++) s += src[(size_t)j * N + i];
        ref[i] = __bfloat162float(__float2bfloat16(s)); /* rounded once, as the kernels do */
    }
    bf16 *d_src = to_device_bf16(src, (size_t)G * N), *d_dst;
    cudaCheck(cudaMalloc(&d_dst, N * 2));
    int grid = sms * 32, fails = 0;
    printf("sum_blocks, G=%d, n=%zu\n", G, N);
    for (int v = 1; v <= 2; v++) {
        if (want && want != v) continue;
        auto run = [&]() {
            if (v == 1) sum_v1<<<grid, 256>>>(d_dst, d_src, G, N, N);
            else sum_v2<<<grid, 256>>>(d_dst, d_src, G, N, N / 8);
        };
        run();
        cudaCheck(cudaDeviceSynchronize());
        float *got = from_device_bf16(d_dst, N);
        printf("  v%d\n", v);
        fails += !validate("sum", got, ref, N, 0, 0);
        float ms = time_ms(20, run);
        printf("    %.3f ms, %.0f GB/s\n", ms, (double)((G + 1) * N * 2) / (ms * 1e6));
        free(got);
    }
    printf("%s\n", fails ? "SOME VERSIONS FAILED" : "all versions match the CPU reference");
    return fails ? 1 : 0;
}
