/*
 * bench/gpu/bench_kernels.c — attention forward + backward throughput beside a cuBLASLt
 * GEMM's, in the same run on the same GPU (issue 20: "attention forward+backward
 * throughput reported in TFLOP/s beside a cuBLASLt GEMM's; target: attention >= 60 % of
 * the GEMM's"), through kernels/cuda.h as the trainer calls them.
 *
 *   bench_kernels [T [SAMPLES [NH [NKV [HD [GEMM_N [GEMM_K]]]]]]]
 *
 * defaults: a unit of T = 8192 tokens packed from SAMPLES = 1 causal sample (4: four of
 * 2048), the ~1B Llama's attention (NH = 32 heads, NKV = 4 KV heads, HD = 64) and its MLP
 * up-projection as the GEMM (T x GEMM_N x GEMM_K = 8192 x 5632 x 2048).
 *
 * FLOPs counted (the FlashAttention papers' convention, causal half): attention forward =
 * 4 x NH x HD x sum over samples of n(n+1)/2 (QK^T and PV), backward = 2.5 x forward (five
 * matrix products to the forward's two), GEMM = 2 x M x N x K. Time: the median of 20 runs
 * after 3 warm-ups, each run ended by lt_cuda_sync (host clock; the ops take milliseconds,
 * the synchronisation microseconds). Prints one line per op and a last line
 *   attn_tflops=A gemm_tflops=G ratio=R
 * Exit 1 on any error (named), 2 on bad arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda.h" /* lt_cuda_*, lt_bf16 */

#define WARMUP 3
#define RUNS 20

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int die(const lt_error *err) {
    fprintf(stderr, "bench_kernels: error: %s%s%s\n", err->what, err->hint[0] ? "\nhint: " : "", err->hint);
    return 1;
}

/* A device buffer of n bf16 values, uniform in [-scale, scale] (a fixed LCG: the same data
 * every run). */
static lt_status random_bf16(lt_cuda *c, lt_bf16 **d, size_t n, float scale, unsigned seed, lt_error *err) {
    lt_bf16 *h = malloc(n * sizeof *h);
    if (!h) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %zu host values", n);
    unsigned s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        h[i] = lt_bf16_from_f32(scale * ((float)(s >> 8) / (float)(1u << 24) * 2.0f - 1.0f));
    }
    lt_status st = lt_cuda_malloc(c, (void **)d, n * sizeof **d, err);
    if (st == LT_OK) st = lt_cuda_copy_h2d(c, *d, h, n * sizeof *h, err);
    free(h);
    return st;
}

typedef struct attn_args {
    lt_cuda *c;
    lt_bf16 *out, *q, *dq, *dout;
    float *lse;
    lt_cuda_attn_segment *segs;
    int n_segs, T, nh, nkv, hd;
    bool backward;
} attn_args;

static lt_status run_attn(attn_args *a, lt_error *err) {
    lt_status st = lt_cuda_attention_forward(a->c, a->out, a->lse, a->q, a->segs, a->n_segs, a->T, a->nh, a->nkv,
                                             a->hd, err);
    if (st == LT_OK && a->backward)
        st = lt_cuda_attention_backward(a->c, a->dq, a->dout, a->out, a->lse, a->q, a->segs, a->n_segs, a->T, a->nh,
                                        a->nkv, a->hd, err);
    return st == LT_OK ? lt_cuda_sync(a->c, err) : st;
}

int main(int argc, char **argv) {
    long v[7] = {8192, 1, 32, 4, 64, 5632, 2048};
    for (int i = 1; i < argc && i <= 7; i++) {
        char *end;
        v[i - 1] = strtol(argv[i], &end, 10);
        if (*end || v[i - 1] <= 0 || v[i - 1] > (1L << 20)) {
            fprintf(stderr, "bench_kernels: error: argument %d ('%s') must be a positive count\n"
                            "usage: bench_kernels [T [SAMPLES [NH [NKV [HD [GEMM_N [GEMM_K]]]]]]]\n", i, argv[i]);
            return 2;
        }
    }
    int T = (int)v[0], S = (int)v[1], nh = (int)v[2], nkv = (int)v[3], hd = (int)v[4], GN = (int)v[5], GK = (int)v[6];
    if (S > T || nh % nkv) {
        fprintf(stderr, "bench_kernels: error: SAMPLES <= T and NH a multiple of NKV, got %d, %d, %d, %d\n", S, T, nh,
                nkv);
        return 2;
    }
    lt_error err;
    lt_error_clear(&err);
    lt_cuda *c = NULL;
    if (lt_cuda_open(&c, 0, &err) != LT_OK) return die(&err);
    int kvd = nkv * hd, qd = nh * hd;
    lt_bf16 *q = NULL, *out = NULL, *dq = NULL, *dout = NULL, *k = NULL, *vv = NULL, *dk = NULL, *dv = NULL;
    lt_bf16 *A = NULL, *B = NULL, *C = NULL;
    float *lse = NULL;
    lt_cuda_attn_segment *segs = calloc((size_t)S, sizeof *segs);
    lt_status st = segs ? LT_OK : lt_fail(&err, LT_ERR_NOMEM, NULL, "out of memory");
    /* one K/V buffer for the unit; sample j's rows are its own slice of it, with no context */
    if (st == LT_OK) st = random_bf16(c, &q, (size_t)T * qd, 1.0f, 1, &err);
    if (st == LT_OK) st = random_bf16(c, &k, (size_t)T * kvd, 1.0f, 2, &err);
    if (st == LT_OK) st = random_bf16(c, &vv, (size_t)T * kvd, 1.0f, 3, &err);
    if (st == LT_OK) st = random_bf16(c, &dout, (size_t)T * qd, 0.01f, 4, &err);
    if (st == LT_OK) st = lt_cuda_malloc(c, (void **)&out, (size_t)T * qd * sizeof *out, &err);
    if (st == LT_OK) st = lt_cuda_malloc(c, (void **)&dq, (size_t)T * qd * sizeof *dq, &err);
    if (st == LT_OK) st = lt_cuda_malloc(c, (void **)&dk, (size_t)T * kvd * sizeof *dk, &err);
    if (st == LT_OK) st = lt_cuda_malloc(c, (void **)&dv, (size_t)T * kvd * sizeof *dv, &err);
    if (st == LT_OK) st = lt_cuda_malloc(c, (void **)&lse, (size_t)T * nh * sizeof *lse, &err);
    if (st == LT_OK) st = lt_cuda_memset(c, dq, 0, (size_t)T * qd * sizeof *dq, &err);
    if (st == LT_OK) st = lt_cuda_memset(c, dk, 0, (size_t)T * kvd * sizeof *dk, &err);
    if (st == LT_OK) st = lt_cuda_memset(c, dv, 0, (size_t)T * kvd * sizeof *dv, &err);
    double attn_fwd_flops = 0;
    for (int j = 0, row = 0; st == LT_OK && j < S; j++) {
        int n = T / S + (j < T % S);
        segs[j] = (lt_cuda_attn_segment){.row0 = row, .n = n, .begin = 0, .k = k + (size_t)row * kvd,
                                         .v = vv + (size_t)row * kvd, .dk = dk + (size_t)row * kvd,
                                         .dv = dv + (size_t)row * kvd};
        attn_fwd_flops += 4.0 * nh * hd * ((double)n * (n + 1) / 2);
        row += n;
    }
    /* the GEMM: C[T, GN] = A[T, GK] B[GN, GK]^T */
    if (st == LT_OK) st = random_bf16(c, &A, (size_t)T * GK, 1.0f, 5, &err);
    if (st == LT_OK) st = random_bf16(c, &B, (size_t)GN * GK, 0.02f, 6, &err);
    if (st == LT_OK) st = lt_cuda_malloc(c, (void **)&C, (size_t)T * GN * sizeof *C, &err);
    double t_fwd[RUNS], t_both[RUNS], t_gemm[RUNS];
    attn_args a = {c, out, q, dq, dout, lse, segs, S, T, nh, nkv, hd, false};
    for (int r = 0; st == LT_OK && r < WARMUP + RUNS; r++) {
        double t0 = now_s();
        a.backward = false;
        st = run_attn(&a, &err);
        double t1 = now_s();
        a.backward = true;
        if (st == LT_OK) st = run_attn(&a, &err);
        double t2 = now_s();
        if (st == LT_OK) st = lt_cuda_gemm_bf16(c, C, A, B, T, GN, GK, &err);
        if (st == LT_OK) st = lt_cuda_sync(c, &err);
        double t3 = now_s();
        if (r >= WARMUP) t_fwd[r - WARMUP] = t1 - t0, t_both[r - WARMUP] = t2 - t1, t_gemm[r - WARMUP] = t3 - t2;
    }
    if (st != LT_OK) {
        lt_cuda_close(c);
        return die(&err);
    }
    qsort(t_fwd, RUNS, sizeof(double), cmp_double);
    qsort(t_both, RUNS, sizeof(double), cmp_double);
    qsort(t_gemm, RUNS, sizeof(double), cmp_double);
    double mf = t_fwd[RUNS / 2], mb = t_both[RUNS / 2], mg = t_gemm[RUNS / 2];
    double attn_both_flops = 3.5 * attn_fwd_flops, gemm_flops = 2.0 * T * (double)GN * GK;
    double fwd_tf = attn_fwd_flops / mf * 1e-12, both_tf = attn_both_flops / mb * 1e-12, gemm_tf = gemm_flops / mg * 1e-12;
    printf("attention forward   T=%d samples=%d nh=%d nkv=%d hd=%d: %.3f ms, %.1f TFLOP/s\n", T, S, nh, nkv, hd,
           mf * 1e3, fwd_tf);
    printf("attention fwd+bwd   (backward = 2.5 x forward FLOPs): %.3f ms, %.1f TFLOP/s\n", mb * 1e3, both_tf);
    printf("cuBLASLt GEMM       %d x %d x %d: %.3f ms, %.1f TFLOP/s\n", T, GN, GK, mg * 1e3, gemm_tf);
    printf("attn_tflops=%.1f gemm_tflops=%.1f ratio=%.3f\n", both_tf, gemm_tf, both_tf / gemm_tf);
    lt_cuda_free(c, q), lt_cuda_free(c, out), lt_cuda_free(c, dq), lt_cuda_free(c, dout), lt_cuda_free(c, k);
    lt_cuda_free(c, vv), lt_cuda_free(c, dk), lt_cuda_free(c, dv), lt_cuda_free(c, lse), lt_cuda_free(c, A);
    lt_cuda_free(c, B), lt_cuda_free(c, C);
    free(segs);
    lt_cuda_close(c);
    return 0;
}
