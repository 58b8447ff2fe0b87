/*
 * dev/cuda/swiglu.cu — scratch versions of the SwiGLU kernels (kernels/swiglu.cu),
 * forward and backward on bf16 vectors, checked against a CPU fp32 reference
 * (train/cpu/swiglu.c: out = silu(g) u; dg += dout u s (1 + g (1 - s)), du += dout silu(g))
 * and timed.
 *
 *   v1: one element per thread, grid-stride
 *   v2: 8 elements per thread (16-byte loads/stores), grid-stride (-> kernels/swiglu.cu)
 *
 * Build and run:  nvcc -O3 -arch=sm_90 swiglu.cu -o swiglu && ./swiglu [version]
 * Tolerance (bf16 out): 2^-8 |ref| + 1e-3 max|ref| (CUDA's expf is within 2 ulp).
 */
#include "common.h"

static const size_t N = (size_t)8192 * 8192; /* T x F of a ~1B model's unit of 8K tokens */

static float sigm(float g) { return 1.0f / (1.0f + expf(-g)); }
static __device__ __forceinline__ float sigm_d(float g) { return 1.0f / (1.0f + expf(-g)); }

__global__ void fwd_v1(bf16 *out, const bf16 *g, const bf16 *u, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = __bfloat162float(g[i]);
        out[i] = __float2bfloat16(x * sigm_d(x) * __bfloat162float(u[i]));
    }
}

__global__ void fwd_v2(bf16 *out, const bf16 *g, const bf16 *u, size_t n8) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
        f8 a = ld8(g + 8 * i), b = ld8(u + 8 * i), o;
        for (int k = 0; k < 8; k++) o.v[k] = a.v[k] * sigm_d(a.v[k]) * b.v[k];
        st8(out + 8 * i, o);
    }
}

__global__ void bwd_v1(bf16 *dg, bf16 *du, const bf16 *dout, const bf16 *g, const bf16 *u, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = __bfloat162float(g[i]), s = sigm_d(x), d = __bfloat162float(dout[i]);
        dg[i] = __float2bfloat16(__bfloat162float(dg[i]) + d * __bfloat162float(u[i]) * s * (1.0f + x * (1.0f - s)));
        du[i] = __float2bfloat16(__bfloat162float(du[i]) + d * x * s);
    }
}

__global__ void bwd_v2(bf16 *dg, bf16 *du, const bf16 *dout, const bf16 *g, const bf16 *u, size_t n8) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
        f8 a = ld8(g + 8 * i), b = ld8(u + 8 * i), d = ld8(dout + 8 * i), x = ld8(dg + 8 * i), y = ld8(du + 8 * i);
        for (int k = 0; k < 8; k++) {
            float s = sigm_d(a.v[k]);
            x.v[k] += d.v[k] * b.v[k] * s * (1.0f + a.v[k] * (1.0f - s));
            y.v[k] += d.v[k] * a.v[k] * s;
        }
        st8(dg + 8 * i, x);
        st8(du + 8 * i, y);
    }
}

int main(int argc, char **argv) {
    int want = version_arg(argc, argv);
    int sms = 0;
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    float *g = rand_bf16_values(N, -6, 6), *u = rand_bf16_values(N, -2, 2), *dout = rand_bf16_values(N, -1, 1);
    float *dg0 = rand_bf16_values(N, -1, 1), *du0 = rand_bf16_values(N, -1, 1);
    float *ref = (float *)mallocCheck(N * 4), *rdg = (float *)mallocCheck(N * 4), *rdu = (float *)mallocCheck(N * 4);
    for (size_t i = 0; i < N; i++) {
        float s = sigm(g[i]);
        ref[i] = g[i] * s * u[i];
        rdg[i] = dg0[i] + dout[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
        rdu[i] = du0[i] + dout[i] * g[i] * s;
    }
    bf16 *d_g = to_device_bf16(g, N), *d_u = to_device_bf16(u, N), *d_dout = to_device_bf16(dout, N);
    bf16 *d_dg0 = to_device_bf16(dg0, N), *d_du0 = to_device_bf16(du0, N), *d_out, *d_dg, *d_du;
    cudaCheck(cudaMalloc(&d_out, N * 2));
    cudaCheck(cudaMalloc(&d_dg, N * 2));
    cudaCheck(cudaMalloc(&d_du, N * 2));
    int grid = sms * 32, fails = 0;
    printf("swiglu, n=%zu\n", N);
    for (int v = 1; v <= 2; v++) {
        if (want && want != v) continue;
        auto fwd = [&]() {
            if (v == 1) fwd_v1<<<grid, 256>>>(d_out, d_g, d_u, N);
            else fwd_v2<<<grid, 256>>>(d_out, d_g, d_u, N / 8);
        };
        auto bwd = [&]() {
            if (v == 1) bwd_v1<<<grid, 256>>>(d_dg, d_du, d_dout, d_g, d_u, N);
            else bwd_v2<<<grid, 256>>>(d_dg, d_du, d_dout, d_g, d_u, N / 8);
        };
        fwd();
        cudaCheck(cudaMemcpy(d_dg, d_dg0, N * 2, cudaMemcpyDeviceToDevice));
        cudaCheck(cudaMemcpy(d_du, d_du0, N * 2, cudaMemcpyDeviceToDevice));
        bwd();
        cudaCheck(cudaDeviceSynchronize());
        float *out = from_device_bf16(d_out, N), *gdg = from_device_bf16(d_dg, N), *gdu = from_device_bf16(d_du, N);
        printf("  v%d\n", v);
        fails += !validate("out", out, ref, N, 1.0 / 256, 1e-3);
        fails += !validate("dgate", gdg, rdg, N, 1.0 / 256, 1e-3);
        fails += !validate("dup", gdu, rdu, N, 1.0 / 256, 1e-3);
        float ms_f = time_ms(20, fwd), ms_b = time_ms(20, bwd);
        printf("    forward %.3f ms, %.0f GB/s; backward %.3f ms, %.0f GB/s\n", ms_f, (double)(3 * N * 2) / (ms_f * 1e6),
               ms_b, (double)(7 * N * 2) / (ms_b * 1e6));
        free(out), free(gdg), free(gdu);
    }
    printf("%s\n", fails ? "SOME VERSIONS FAILED" : "all versions match the CPU reference");
    return fails ? 1 : 0;
}
