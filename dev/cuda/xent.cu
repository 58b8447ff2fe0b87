/*
 * dev/cuda/xent.cu — scratch versions of the fused softmax cross-entropy (kernels/xent.cu)
 * over bf16 logits [T, V], in place, checked against a CPU reference (train/cpu/xent.c:
 * loss = log sum exp(l - m) + m - l_target, dlogits = scale (softmax - onehot); rows with
 * target < 0: loss 0, gradient 0) and timed.
 *
 *   v1: one block per row, three passes over the row (max, sum of exponentials, gradient)
 *   v2: one block per row, online softmax: one pass keeps each thread's running max and
 *       rescaled sum, the block merges the pairs; then the gradient pass
 *   v3: v2 with 8 logits per 16-byte load (-> kernels/xent.cu)
 *
 * Build and run:  nvcc -O3 -arch=sm_90 xent.cu -o xent && ./xent [version]
 * Tolerances: row loss 1e-4 relative; dlogits (bf16) 2^-8 |ref| + 1e-3 max|ref|.
 */
#include "common.h"

static const int T = 2048, V = 128256; /* Llama 3's vocabulary */
static const int THREADS = 512;

static void cpu_xent(float *dl, float *loss, const float *l, const int *tg, float scale) {
    for (int t = 0; t < T; t++) {
        const float *r = l + (size_t)t * V;
        float *d = dl + (size_t)t * V;
        if (tg[t] < 0) {
            loss[t] = 0.0f;
            for (int v = 0; v < V; v++) d[v] = 0.0f;
            continue;
        }
        float m = r[0];
        for (int v = 1; v < V; v++) m = r[v] > m ? r[v] : m;
        double sum = 0.0;
        for (int v = 0; v < V; v++) sum += (double)expf(r[v] - m);
        loss[t] = (float)(log(sum) + (double)m - (double)r[tg[t]]);
        float inv = (float)(1.0 / sum);
        for (int v = 0; v < V; v++) d[v] = scale * (expf(r[v] - m) * inv);
        d[tg[t]] = scale * (expf(r[tg[t]] - m) * inv - 1.0f);
    }
}

/* block-wide max / sum through shared memory (blockDim.x = THREADS) */
static __device__ float block_reduce(float x, bool is_max) {
    __shared__ float sh[32];
    __shared__ float out;
    for (int o = 16; o > 0; o >>= 1) {
        float y = __shfl_xor_sync(0xffffffffu, x, o);
        x = is_max ? fmaxf(x, y) : x + y;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[warp] = x;
    __syncthreads();
    if (warp == 0) {
        float y = lane < (int)(blockDim.x >> 5) ? sh[lane] : (is_max ? -INFINITY : 0.0f);
        for (int o = 16; o > 0; o >>= 1) {
            float z = __shfl_xor_sync(0xffffffffu, y, o);
            y = is_max ? fmaxf(y, z) : y + z;
        }
        if (lane == 0) out = y;
    }
    __syncthreads();
    return out;
}

__global__ void xent_v1(bf16 *dl, const bf16 *l, const int *tg, float scale, float *loss) {
    const bf16 *r = l + (size_t)blockIdx.x * V;
    bf16 *d = dl + (size_t)blockIdx.x * V;
    int target = tg[blockIdx.x];
    if (target < 0) {
        for (int v = threadIdx.x; v < V; v += blockDim.x) d[v] = __float2bfloat16(0.0f);
        if (threadIdx.x == 0) loss[blockIdx.x] = 0.0f;
        return;
    }
    float lt = __bfloat162float(r[target]);
    float m = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, __bfloat162float(r[v]));
    m = block_reduce(m, true);
    float s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) s += expf(__bfloat162float(r[v]) - m);
    s = block_reduce(s, false);
    float inv = 1.0f / s;
    if (threadIdx.x == 0) loss[blockIdx.x] = (float)(log((double)s) + (double)m - (double)lt);
    float gt = scale * (expf(lt - m) * inv - 1.0f);
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        d[v] = __float2bfloat16(v == target ? gt : scale * (expf(__bfloat162float(r[v]) - m) * inv));
}

struct ms {
    float m, s;
};
static __device__ ms merge(ms a, ms b) {
    float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return a;
    ms r = {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
    return r;
}
static __device__ void add(ms &a, float x) {
    if (x > a.m) {
        a.s = a.s * expf(a.m - x) + 1.0f;
        a.m = x;
    } else {
        a.s += expf(x - a.m);
    }
}
static __device__ ms block_merge(ms a) {
    __shared__ float sm[32], ss[32];
    __shared__ ms total;
    for (int o = 16; o > 0; o >>= 1) {
        ms b = {__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)};
        a = merge(a, b);
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) sm[warp] = a.m, ss[warp] = a.s;
    __syncthreads();
    if (warp == 0) {
        ms b = {lane < (int)(blockDim.x >> 5) ? sm[lane] : -INFINITY, lane < (int)(blockDim.x >> 5) ? ss[lane] : 0.0f};
        for (int o = 16; o > 0; o >>= 1) {
            ms c = {__shfl_xor_sync(0xffffffffu, b.m, o), __shfl_xor_sync(0xffffffffu, b.s, o)};
            b = merge(b, c);
        }
        if (lane == 0) total = b;
    }
    __syncthreads();
    return total;
}

template <bool VEC>
__global__ void xent_online(bf16 *dl, const bf16 *l, const int *tg, float scale, float *loss) {
    const bf16 *r = l + (size_t)blockIdx.x * V;
    bf16 *d = dl + (size_t)blockIdx.x * V;
    int target = tg[blockIdx.x];
    if (target < 0) {
        for (int v = threadIdx.x; v < V; v += blockDim.x) d[v] = __float2bfloat16(0.0f);
        if (threadIdx.x == 0) loss[blockIdx.x] = 0.0f;
        return;
    }
    float lt = __bfloat162float(r[target]);
    ms a = {-INFINITY, 0.0f};
    if (VEC) {
        for (int v = 8 * threadIdx.x; v < V; v += 8 * blockDim.x) {
            f8 x = ld8(r + v);
            for (int k = 0; k < 8; k++) add(a, x.v[k]);
        }
    } else {
        for (int v = threadIdx.x; v < V; v += blockDim.x) add(a, __bfloat162float(r[v]));
    }
    a = block_merge(a);
    float inv = 1.0f / a.s;
    if (threadIdx.x == 0) loss[blockIdx.x] = (float)(log((double)a.s) + (double)a.m - (double)lt);
    float gt = scale * (expf(lt - a.m) * inv - 1.0f);
    if (VEC) {
        for (int v = 8 * threadIdx.x; v < V; v += 8 * blockDim.x) {
            f8 x = ld8(r + v);
            for (int k = 0; k < 8; k++) x.v[k] = v + k == target ? gt : scale * (expf(x.v[k] - a.m) * inv);
            st8(d + v, x);
        }
    } else {
        for (int v = threadIdx.x; v < V; v += blockDim.x)
            d[v] = __float2bfloat16(v == target ? gt : scale * (expf(__bfloat162float(r[v]) - a.m) * inv));
    }
}

int main(int argc, char **argv) {
    int want = version_arg(argc, argv);
    size_t n = (size_t)T * V;
    float *l = rand_bf16_values(n, -10, 10);
    int *tg = (int *)mallocCheck(T * sizeof(int));
    for (int t = 0; t < T; t++) tg[t] = t % 97 == 96 ? -1 : (int)(rand01() * V);
    const float scale = 1.0f / (float)T;
    float *ref = (float *)mallocCheck(n * 4), *rloss = (float *)mallocCheck(T * 4);
    cpu_xent(ref, rloss, l, tg, scale);
    bf16 *d_l0 = to_device_bf16(l, n), *d_l;
    cudaCheck(cudaMalloc(&d_l, n * 2));
    int *d_tg;
    float *d_loss;
    cudaCheck(cudaMalloc(&d_tg, T * sizeof(int)));
    cudaCheck(cudaMemcpy(d_tg, tg, T * sizeof(int), cudaMemcpyHostToDevice));
    cudaCheck(cudaMalloc(&d_loss, T * 4));
    int fails = 0;
    printf("cross-entropy (in place), T=%d V=%d\n", T, V);
    for (int v = 1; v <= 3; v++) {
        if (want && want != v) continue;
        auto launch = [&]() {
            if (v == 1) xent_v1<<<T, THREADS>>>(d_l, d_l, d_tg, scale, d_loss);
            else if (v == 2) xent_online<false><<<T, THREADS>>>(d_l, d_l, d_tg, scale, d_loss);
            else xent_online<true><<<T, THREADS>>>(d_l, d_l, d_tg, scale, d_loss);
        };
        cudaCheck(cudaMemcpy(d_l, d_l0, n * 2, cudaMemcpyDeviceToDevice));
        launch();
        cudaCheck(cudaDeviceSynchronize());
        float *dl = from_device_bf16(d_l, n), *loss = from_device_f32(d_loss, T);
        printf("  v%d\n", v);
        fails += !validate("row loss", loss, rloss, T, 1e-4, 0);
        fails += !validate("dlogits", dl, ref, n, 1.0 / 256, 1e-3);
        /* timed out of place from the pristine logits (in place would feed gradients back) */
        auto timed = [&]() {
            if (v == 1) xent_v1<<<T, THREADS>>>(d_l, d_l0, d_tg, scale, d_loss);
            else if (v == 2) xent_online<false><<<T, THREADS>>>(d_l, d_l0, d_tg, scale, d_loss);
            else xent_online<true><<<T, THREADS>>>(d_l, d_l0, d_tg, scale, d_loss);
        };
        float ms = time_ms(10, timed);
        printf("    %.3f ms, %.0f GB/s (logits read once + gradient written)\n", ms, (double)(2 * n * 2) / (ms * 1e6));
        free(dl), free(loss);
    }
    printf("%s\n", fails ? "SOME VERSIONS FAILED" : "all versions match the CPU reference");
    return fails ? 1 : 0;
}
