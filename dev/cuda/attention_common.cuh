/*
 * dev/cuda/attention_common.cuh — what the attention scratch benchmarks share
 * (dev/cuda/attention_forward.cu, attention_backward.cu): the varlen check case and the
 * benchmark unit, host data rounded to bf16, the CPU reference (plain C in double, the
 * math of train/cpu/attention.c: per-sample causal mask, GQA h -> h / (nh / nkv),
 * scale 1/sqrt(hd), KV context rows 0..begin+n-1), cudaEvent timing, the causal FLOP
 * count, and the cuBLAS bf16 GEMM the attention is compared with.
 *
 * FLOP convention (FlashAttention's): forward = 4 * hd * nh * (visible (query, key)
 * pairs) — two matmuls, QK^T and PV, 2 FLOPs per multiply-add — and backward = 2.5 x
 * the forward (five matmuls instead of two). The masked-out half of the square is not
 * counted. Our backward recomputes QK^T and dO V^T in its separate dQ pass (7 matmuls);
 * those extra FLOPs are NOT counted, so its TFLOP/s are "useful" FLOP/s.
 *
 * The library's kernels come from kernels/attention.cu itself (included with
 * LT_ATTENTION_KERNELS_ONLY), so the benchmark measures exactly the code that ships.
 */
#ifndef LT_DEV_ATTENTION_COMMON_CUH
#define LT_DEV_ATTENTION_COMMON_CUH

#define LT_ATTENTION_KERNELS_ONLY
#include "kernels/attention.cu" /* lt_attn::: plan_build, launch_forward/_backward, kernels */

#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

/* ---------------------------------------------------------------- checks with file:line */

static void cuda_check(cudaError_t rc, const char *what, const char *file, int line) {
    if (rc != cudaSuccess) {
        fprintf(stderr, "[CUDA ERROR] at %s:%d: %s: %s\n", file, line, what, cudaGetErrorString(rc));
        exit(EXIT_FAILURE);
    }
}
#define cudaCheck(x) cuda_check((x), #x, __FILE__, __LINE__)
static void cublas_check(cublasStatus_t rc, const char *what, const char *file, int line) {
    if (rc != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "[cuBLAS ERROR] at %s:%d: %s: status %d\n", file, line, what, (int)rc);
        exit(EXIT_FAILURE);
    }
}
#define cublasCheck(x) cublas_check((x), #x, __FILE__, __LINE__)
static void *xmalloc(size_t n) {
    void *p = malloc(n > 0 ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "out of host memory (%zu bytes)\n", n);
        exit(EXIT_FAILURE);
    }
    return p;
}

/* ---------------------------------------------------------------- bf16 on the host */

static uint16_t h_to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float h_from_bf16(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

__device__ __forceinline__ float h_from_bf16_dev(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }
__device__ __forceinline__ uint16_t h_to_bf16_dev(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }

static uint64_t bench_rng = 0x243f6a8885a308d3ull;
static double urand(void) { /* splitmix64 -> [0, 1) */
    uint64_t z = (bench_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

/* ---------------------------------------------------------------- a unit of segments */

struct seg_spec {
    int sample, row0, n, begin;
};

/* Host and device copies of one unit: q, dout [T, nh*hd]; per sample k, v [len, nkv*hd];
 * inputs drawn in [-1, 1) (q in [-qscale, qscale)) and rounded to bf16. */
struct unit {
    int T, nh, nkv, hd, n_samples, n_segs;
    std::vector<int> len;
    std::vector<seg_spec> segs;
    std::vector<float> q, dout;
    std::vector<std::vector<float>> k, v;
    uint16_t *d_q, *d_dout, *d_out, *d_dq;
    float *d_lse;
    std::vector<uint16_t *> d_k, d_v, d_dk, d_dv;
    std::vector<lt_cuda_attn_segment> gsegs;
};

static void upload_bf16(uint16_t **d, const std::vector<float> &x, std::vector<float> *rounded) {
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); i++) h[i] = h_to_bf16(x[i]);
    if (rounded != NULL)
        for (size_t i = 0; i < x.size(); i++) (*rounded)[i] = h_from_bf16(h[i]);
    cudaCheck(cudaMalloc((void **)d, h.size() * 2 + 16));
    cudaCheck(cudaMemcpy(*d, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
}

static void unit_init(unit *u, int T, int nh, int nkv, int hd, const std::vector<int> &len,
                      const std::vector<seg_spec> &segs, double qscale) {
    u->T = T, u->nh = nh, u->nkv = nkv, u->hd = hd, u->len = len, u->segs = segs;
    u->n_samples = (int)len.size(), u->n_segs = (int)segs.size();
    size_t nq = (size_t)T * nh * hd, kvd = (size_t)nkv * hd;
    u->q.resize(nq), u->dout.resize(nq);
    for (size_t i = 0; i < nq; i++) u->q[i] = (float)(qscale * (2 * urand() - 1)), u->dout[i] = (float)(2 * urand() - 1);
    upload_bf16(&u->d_q, u->q, &u->q);
    upload_bf16(&u->d_dout, u->dout, &u->dout);
    cudaCheck(cudaMalloc((void **)&u->d_out, nq * 2 + 16));
    cudaCheck(cudaMalloc((void **)&u->d_dq, nq * 2 + 16));
    cudaCheck(cudaMalloc((void **)&u->d_lse, (size_t)T * nh * sizeof(float) + 16));
    u->k.resize(len.size()), u->v.resize(len.size());
    u->d_k.resize(len.size()), u->d_v.resize(len.size()), u->d_dk.resize(len.size()), u->d_dv.resize(len.size());
    for (size_t s = 0; s < len.size(); s++) {
        size_t n = (size_t)len[s] * kvd;
        u->k[s].resize(n), u->v[s].resize(n);
        for (size_t i = 0; i < n; i++) u->k[s][i] = (float)(2 * urand() - 1), u->v[s][i] = (float)(2 * urand() - 1);
        upload_bf16(&u->d_k[s], u->k[s], &u->k[s]);
        upload_bf16(&u->d_v[s], u->v[s], &u->v[s]);
        cudaCheck(cudaMalloc((void **)&u->d_dk[s], n * 2 + 16));
        cudaCheck(cudaMalloc((void **)&u->d_dv[s], n * 2 + 16));
    }
    for (const seg_spec &p : segs) {
        lt_cuda_attn_segment g;
        g.row0 = p.row0, g.n = p.n, g.begin = p.begin;
        g.k = u->d_k[p.sample], g.v = u->d_v[p.sample], g.dk = u->d_dk[p.sample], g.dv = u->d_dv[p.sample];
        u->gsegs.push_back(g);
    }
}

static void unit_zero_grads(unit *u) {
    size_t nq = (size_t)u->T * u->nh * u->hd, kvd = (size_t)u->nkv * u->hd;
    cudaCheck(cudaMemset(u->d_dq, 0, nq * 2));
    for (int s = 0; s < u->n_samples; s++) {
        cudaCheck(cudaMemset(u->d_dk[s], 0, (size_t)u->len[s] * kvd * 2));
        cudaCheck(cudaMemset(u->d_dv[s], 0, (size_t)u->len[s] * kvd * 2));
    }
}

static void unit_free(unit *u) {
    cudaFree(u->d_q), cudaFree(u->d_dout), cudaFree(u->d_out), cudaFree(u->d_dq), cudaFree(u->d_lse);
    for (int s = 0; s < u->n_samples; s++) cudaFree(u->d_k[s]), cudaFree(u->d_v[s]), cudaFree(u->d_dk[s]), cudaFree(u->d_dv[s]);
}

/* The check case: varlen with KV context, GQA, two segments of one sample in one call. */
static void check_unit(unit *u, int hd) {
    /* sample A [0, 300) at rows 0..299, sample B [500, 700) at rows 301..500 (500 rows of
     * context), sample A [300, 377) at rows 501..577; row 300 in no segment */
    unit_init(u, 578, 8, 2, hd, {377, 700}, {{0, 0, 300, 0}, {1, 301, 200, 500}, {0, 501, 77, 300}}, 2.0);
}

/* The benchmark unit: one slice of n tokens after `begin` tokens of KV context. */
static void bench_unit(unit *u, int n, int begin, int nh, int nkv, int hd) {
    unit_init(u, n, nh, nkv, hd, {begin + n}, {{0, 0, n, begin}}, 1.0);
}

/* (query, key) pairs the mask lets through: sum over rows of (position + 1). */
static double visible_pairs(const unit *u) {
    double s = 0;
    for (const seg_spec &p : u->segs) s += (double)p.n * p.begin + (double)p.n * (p.n + 1) / 2.0;
    return s;
}
static double fwd_flops(const unit *u) { return 4.0 * u->hd * u->nh * visible_pairs(u); }

/* ---------------------------------------------------------------- CPU reference (double) */

/* out, lse of every segment row (other rows untouched), and with want_grad the gradients
 * dq [T, qd], dk/dv per sample, from dout: train/cpu/attention.c's math in double. */
static void cpu_reference(const unit *u, std::vector<double> &out, std::vector<double> &lse, bool want_grad,
                          std::vector<double> &dq, std::vector<std::vector<double>> &dk,
                          std::vector<std::vector<double>> &dv) {
    const int nh = u->nh, hd = u->hd, grp = u->nh / u->nkv;
    const size_t qd = (size_t)nh * hd, kvd = (size_t)u->nkv * hd;
    const double scale = 1.0 / sqrt((double)hd);
    out.assign((size_t)u->T * qd, 0.0), lse.assign((size_t)u->T * nh, 0.0);
    dq.assign((size_t)u->T * qd, 0.0);
    dk.assign(u->n_samples, {}), dv.assign(u->n_samples, {});
    for (int s = 0; s < u->n_samples; s++) dk[s].assign((size_t)u->len[s] * kvd, 0.0), dv[s] = dk[s];
    std::vector<double> p;
    for (const seg_spec &sg : u->segs) {
        const float *K = u->k[sg.sample].data(), *V = u->v[sg.sample].data();
        for (int i = 0; i < sg.n; i++) {
            const size_t row = (size_t)sg.row0 + i;
            const int pos = sg.begin + i;
            p.assign((size_t)pos + 1, 0.0);
            for (int h = 0; h < nh; h++) {
                const int g = h / grp;
                const float *q = &u->q[row * qd + (size_t)h * hd];
                double m = -INFINITY, l = 0;
                for (int j = 0; j <= pos; j++) {
                    double d = 0;
                    for (int c = 0; c < hd; c++) d += (double)q[c] * K[(size_t)j * kvd + (size_t)g * hd + c];
                    p[j] = d * scale;
                    m = fmax(m, p[j]);
                }
                for (int j = 0; j <= pos; j++) l += exp(p[j] - m);
                double *o = &out[row * qd + (size_t)h * hd];
                for (int j = 0; j <= pos; j++) {
                    p[j] = exp(p[j] - m) / l;
                    for (int c = 0; c < hd; c++) o[c] += p[j] * V[(size_t)j * kvd + (size_t)g * hd + c];
                }
                lse[row * nh + h] = m + log(l);
                if (!want_grad) continue;
                /* D = dout . out; dP_j = dout . v_j; dS_j = P_j (dP_j - D) */
                const float *dO = &u->dout[row * qd + (size_t)h * hd];
                double D = 0;
                for (int c = 0; c < hd; c++) D += dO[c] * o[c];
                for (int j = 0; j <= pos; j++) {
                    double dp = 0;
                    for (int c = 0; c < hd; c++) dp += (double)dO[c] * V[(size_t)j * kvd + (size_t)g * hd + c];
                    double ds = p[j] * (dp - D);
                    for (int c = 0; c < hd; c++) {
                        dq[row * qd + (size_t)h * hd + c] += scale * ds * K[(size_t)j * kvd + (size_t)g * hd + c];
                        dk[sg.sample][(size_t)j * kvd + (size_t)g * hd + c] += scale * ds * q[c];
                        dv[sg.sample][(size_t)j * kvd + (size_t)g * hd + c] += p[j] * dO[c];
                    }
                }
            }
        }
    }
}

/* max |got - ref| / max |ref| over the listed rows of a bf16 device tensor [rows, w]. */
static double rel_err_rows(const uint16_t *dev, const std::vector<double> &ref, size_t w,
                           const std::vector<char> &use) {
    std::vector<uint16_t> h(ref.size());
    cudaCheck(cudaMemcpy(h.data(), dev, h.size() * 2, cudaMemcpyDeviceToHost));
    double worst = 0, scale = 1e-30;
    for (size_t t = 0; t < use.size(); t++) {
        if (!use[t]) continue;
        for (size_t i = t * w; i < (t + 1) * w; i++) {
            scale = fmax(scale, fabs(ref[i]));
            worst = fmax(worst, fabs(h_from_bf16(h[i]) - ref[i]));
        }
    }
    return worst / scale;
}

static std::vector<char> segment_rows(const unit *u) {
    std::vector<char> use((size_t)u->T, 0);
    for (const seg_spec &p : u->segs)
        for (int i = 0; i < p.n; i++) use[(size_t)p.row0 + i] = 1;
    return use;
}

/* ---------------------------------------------------------------- timing and the GEMM */

/* Mean milliseconds of fn() over reps runs after `warmup` runs (cudaEvent on stream 0). */
template <class F>
static float time_ms(F fn, int warmup, int reps) {
    for (int i = 0; i < warmup; i++) fn();
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    cudaCheck(cudaEventRecord(a));
    for (int i = 0; i < reps; i++) fn();
    cudaCheck(cudaEventRecord(b));
    cudaCheck(cudaEventSynchronize(b));
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, a, b));
    cudaCheck(cudaGetLastError());
    cudaEventDestroy(a), cudaEventDestroy(b);
    return ms / reps;
}

/* TFLOP/s of cuBLAS's bf16 GEMM C[M,N] = A[M,K] B[N,K]^T (fp32 accumulation, bf16 out):
 * the yardstick the issue compares attention with (target: attention >= 60 % of it). */
static double gemm_tflops(int M, int N, int K) {
    cublasHandle_t h;
    cublasCheck(cublasCreate(&h));
    uint16_t *A, *B, *C;
    cudaCheck(cudaMalloc((void **)&A, (size_t)M * K * 2));
    cudaCheck(cudaMalloc((void **)&B, (size_t)N * K * 2));
    cudaCheck(cudaMalloc((void **)&C, (size_t)M * N * 2));
    cudaCheck(cudaMemset(A, 0x3c, (size_t)M * K * 2)); /* bf16 0x3c3c ~ 0.0115: finite */
    cudaCheck(cudaMemset(B, 0x3c, (size_t)N * K * 2));
    const float one = 1.0f, zero = 0.0f;
    /* column-major view: C^T[N,M] = B[N,K] (K-major, "T") x A^T[K,M] */
    auto run = [&] {
        cublasCheck(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16BF, K, A, CUDA_R_16BF, K,
                                 &zero, C, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    float ms = time_ms(run, 3, 20);
    cudaFree(A), cudaFree(B), cudaFree(C);
    cublasDestroy(h);
    return 2.0 * M * N * (double)K / (ms * 1e-3) / 1e12;
}

static void print_device(void) {
    cudaDeviceProp p;
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&p, dev));
    printf("device: %s (sm_%d%d, %d SMs)\n", p.name, p.major, p.minor, p.multiProcessorCount);
}

#endif
