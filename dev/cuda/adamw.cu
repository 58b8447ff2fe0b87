/*
 * dev/cuda/adamw.cu — scratch versions of the optimizer kernels (kernels/adamw.cu): AdamW
 * on fp32 master weights writing the bf16 copy, and the gradients' sum of squares, checked
 * against a CPU reference (train/model/optim.c's lt_adamw_update_range, operation for operation)
 * and timed.
 *
 *   adamw v1: the formula as plain float expressions (nvcc contracts a*b + c into fmas:
 *             close to the CPU, not equal)
 *   adamw v2: every operation an explicit round-to-nearest intrinsic (__fmul_rn, ...):
 *             bit-exact with the CPU's x86-64 build (-> kernels/adamw.cu)
 *   sumsq v1: per-block fp32 sums, atomicAdd into one double (the bits depend on the
 *             order blocks finish in)
 *   sumsq v2: per-block partials, then one block adds them in a fixed order:
 *             deterministic (-> kernels/adamw.cu + kernels/context.cu)
 *
 * Build and run:  nvcc -O3 -arch=sm_90 adamw.cu -o adamw && ./adamw [version]
 * Tolerances: adamw v2 bit-exact; v1 1e-6 relative of the largest parameter; sum of
 * squares 1e-5 relative.
 */
#include "common.h"

static const size_t N = (size_t)64 << 20; /* 64 Mi parameters */
static const double LR = 3e-4, BETA1 = 0.9, BETA2 = 0.95, EPS = 1e-8, WD = 0.1;
static const long long STEP = 7;

struct scalars {
    float decay, w1, b2, one_minus_b2, bc2_sqrt, eps, neg_step;
};

static scalars make_scalars(void) { /* train/model/optim.c's, in double then rounded once */
    double bc1 = 1.0 - pow(BETA1, (double)STEP), bc2 = 1.0 - pow(BETA2, (double)STEP);
    scalars k;
    k.w1 = (float)(1.0 - BETA1);
    k.b2 = (float)BETA2;
    k.one_minus_b2 = (float)(1.0 - BETA2);
    k.bc2_sqrt = (float)sqrt(bc2);
    k.eps = (float)EPS;
    k.neg_step = (float)(-(LR / bc1));
    k.decay = (float)(1.0 - LR * WD);
    return k;
}

static float cpu_lerp(float self, float end, float w) {
    if (fabsf(w) < 0.5f) return fmaf(w, end - self, self);
    return fmaf(w - 1.0f, end - self, end);
}

static void cpu_adamw(float *p, const float *g, float *m, float *v, const scalars &k) {
    for (size_t i = 0; i < N; i++) {
        float pi = p[i] * k.decay, gi = g[i];
        float mi = cpu_lerp(m[i], gi, k.w1);
        float vi = v[i] * k.b2 + k.one_minus_b2 * gi * gi;
        float denom = sqrtf(vi) / k.bc2_sqrt + k.eps;
        p[i] = pi + k.neg_step * mi / denom;
        m[i] = mi;
        v[i] = vi;
    }
}

__global__ void adamw_v1(float *p, bf16 *p16, const float *g, float *m, float *v, size_t n, const scalars k) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float pi = p[i] * k.decay, gi = g[i];
        float d = gi - m[i];
        float mi = fabsf(k.w1) < 0.5f ? fmaf(k.w1, d, m[i]) : fmaf(k.w1 - 1.0f, d, gi);
        float vi = v[i] * k.b2 + k.one_minus_b2 * gi * gi;
        float pn = pi + k.neg_step * mi / (sqrtf(vi) / k.bc2_sqrt + k.eps);
        p[i] = pn, p16[i] = __float2bfloat16(pn), m[i] = mi, v[i] = vi;
    }
}

__global__ void adamw_v2(float *p, bf16 *p16, const float *g, float *m, float *v, size_t n, const scalars k) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float pi = __fmul_rn(p[i], k.decay), gi = g[i];
        float d = __fsub_rn(gi, m[i]);
        float mi = fabsf(k.w1) < 0.5f ? fmaf(k.w1, d, m[i]) : fmaf(__fsub_rn(k.w1, 1.0f), d, gi);
        float vi = __fadd_rn(__fmul_rn(v[i], k.b2), __fmul_rn(__fmul_rn(k.one_minus_b2, gi), gi));
        float denom = __fadd_rn(__fdiv_rn(sqrtf(vi), k.bc2_sqrt), k.eps);
        float pn = __fadd_rn(pi, __fdiv_rn(__fmul_rn(k.neg_step, mi), denom));
        p[i] = pn, p16[i] = __float2bfloat16(pn), m[i] = mi, v[i] = vi;
    }
}

static __device__ float block_sum(float x) {
    __shared__ float sh[32];
    __shared__ float out;
    x = warp_sum(x);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = x;
    __syncthreads();
    if (threadIdx.x < 32) {
        float y = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : 0.0f;
        y = warp_sum(y);
        if (threadIdx.x == 0) out = y;
    }
    __syncthreads();
    return out;
}

__global__ void sumsq_v1(double *total, const float *g, size_t n) {
    float s = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += g[i] * g[i];
    s = block_sum(s);
    if (threadIdx.x == 0) atomicAdd(total, (double)s);
}

__global__ void sumsq_partial_v2(double *partial, const float *g, size_t n) {
    float s = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += g[i] * g[i];
    s = block_sum(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = (double)s;
}

__global__ void sumsq_finish_v2(double *partial, int blocks) {
    if (threadIdx.x != 0) return;
    double s = 0.0;
    for (int b = 0; b < blocks; b++) s += partial[b];
    partial[blocks] = s;
}

int main(int argc, char **argv) {
    int want = version_arg(argc, argv);
    scalars k = make_scalars();
    float *p = rand_bf16_values(N, -1, 1), *g = (float *)mallocCheck(N * 4), *m = (float *)mallocCheck(N * 4);
    float *v = (float *)mallocCheck(N * 4);
    for (size_t i = 0; i < N; i++) {
        g[i] = (float)((rand01() - 0.5) * 0.1);
        m[i] = (float)((rand01() - 0.5) * 0.01);
        v[i] = (float)(rand01() * 1e-4);
    }
    float *d_p0 = to_device_f32(p, N), *d_g = to_device_f32(g, N), *d_m0 = to_device_f32(m, N);
    float *d_v0 = to_device_f32(v, N), *d_p, *d_m, *d_v;
    bf16 *d_p16;
    cudaCheck(cudaMalloc(&d_p, N * 4));
    cudaCheck(cudaMalloc(&d_m, N * 4));
    cudaCheck(cudaMalloc(&d_v, N * 4));
    cudaCheck(cudaMalloc(&d_p16, N * 2));
    double ss_ref = 0.0;
    for (size_t i = 0; i < N; i++) ss_ref += (double)g[i] * (double)g[i];
    cpu_adamw(p, g, m, v, k);
    int sms = 0, fails = 0;
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int grid = sms * 32;
    printf("adamw, n=%zu, step %lld\n", N, STEP);
    for (int ver = 1; ver <= 2; ver++) {
        if (want && want != ver) continue;
        auto launch = [&]() {
            if (ver == 1) adamw_v1<<<grid, 256>>>(d_p, d_p16, d_g, d_m, d_v, N, k);
            else adamw_v2<<<grid, 256>>>(d_p, d_p16, d_g, d_m, d_v, N, k);
        };
        cudaCheck(cudaMemcpy(d_p, d_p0, N * 4, cudaMemcpyDeviceToDevice));
        cudaCheck(cudaMemcpy(d_m, d_m0, N * 4, cudaMemcpyDeviceToDevice));
        cudaCheck(cudaMemcpy(d_v, d_v0, N * 4, cudaMemcpyDeviceToDevice));
        launch();
        cudaCheck(cudaDeviceSynchronize());
        float *gp = from_device_f32(d_p, N), *gm = from_device_f32(d_m, N), *gv = from_device_f32(d_v, N);
        double tol = ver == 1 ? 1e-6 : 0.0;
        printf("  adamw v%d%s\n", ver, ver == 2 ? " (must be bit-exact)" : "");
        fails += !validate("master", gp, p, N, 0, tol);
        fails += !validate("m", gm, m, N, 0, tol);
        fails += !validate("v", gv, v, N, 0, tol);
        float ms = time_ms(20, launch);
        printf("    %.3f ms, %.0f GB/s\n", ms, (double)(N * (4 * 4 + 3 * 4 + 2)) / (ms * 1e6));
        free(gp), free(gm), free(gv);
    }
    double *d_sum;
    int blocks = 1024;
    cudaCheck(cudaMalloc(&d_sum, (blocks + 1) * sizeof(double)));
    printf("sum of squares, n=%zu\n", N);
    for (int ver = 1; ver <= 2; ver++) {
        if (want && want != ver) continue;
        auto launch = [&]() {
            if (ver == 1) {
                cudaMemsetAsync(d_sum, 0, sizeof(double));
                sumsq_v1<<<blocks, 256>>>(d_sum, d_g, N);
            } else {
                sumsq_partial_v2<<<blocks, 256>>>(d_sum, d_g, N);
                sumsq_finish_v2<<<1, 32>>>(d_sum, blocks);
            }
        };
        launch();
        double got = 0.0;
        cudaCheck(cudaMemcpy(&got, d_sum + (ver == 1 ? 0 : blocks), sizeof got, cudaMemcpyDeviceToHost));
        int ok = fabs(got - ss_ref) <= 1e-5 * ss_ref;
        printf("  sumsq v%d\n    sum %s  gpu %.12g cpu %.12g\n", ver, ok ? "ok  " : "FAIL", got, ss_ref);
        fails += !ok;
        float ms = time_ms(20, launch);
        printf("    %.3f ms, %.0f GB/s\n", ms, (double)(N * 4) / (ms * 1e6));
    }
    printf("%s\n", fails ? "SOME VERSIONS FAILED" : "all versions match the CPU reference");
    return fails ? 1 : 0;
}
