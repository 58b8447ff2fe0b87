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
 *
 *   bench_kernels --shapes [SECONDS]
 *
 * the shapes a long-context run of the ~1B Llama meets (hidden 2048, 32 heads, 4 KV heads,
 * head dim 64, FFN 5632, r50k's V = 50257), each timed over a few runs through the entry
 * points the trainer's pass calls (train/model/pass.c), one key=value line each:
 *   layer_gemm   the layer's seven linears (wq wk wv wo wgate wup wdown) on an 8K-token
 *                unit, forward (lt_cuda_linear_forward) and backward (dx and the fp32 dW,
 *                lt_cuda_linear_backward); then `layer_gemms` for the seven together;
 *   lm_head      the fused LM head of an 8K unit as the pass runs it: blocks of
 *                lt_fused_head_rows(V) rows (166), logits rows padded to ld = V rounded up
 *                to 64 (the CUDA backend's lt_backend_logits_ld), the GEMM, the
 *                cross-entropy in place, the backward GEMMs, the loss summed on the device;
 *                FLOPs 6 T V C; the mean loss must be finite and near ln V;
 *   attention    one causal sample of T = 8K (the base), 64K, 128K and 256K tokens, forward
 *                and backward (FLOPs as above); out and lse of two rows (the last and one in
 *                the middle) x two heads checked against a double-precision reference on
 *                the host (out within 2e-2 of its norm, lse within 1e-3 relative); after
 *                a warm-up, 3 timed runs, or 1 when a run takes over a second.
 * A shape whose predicted time (the last one's, scaled by (T / T_last)^2) does not fit in
 * what is left of SECONDS (default 60), or whose buffers do not fit in the device's free
 * memory, is printed as skipped with the reason. The last line sums it up:
 *   shapes: layer_gemm_tflops=L lm_head_tflops=H attn8k_tflops=A ... attn256k_tflops=A|skipped
 * Each line is flushed as printed (a run stopped from outside keeps what it measured).
 *
 * Exit 1 on any error (named) or a failed check, 2 on bad arguments.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda.h" /* lt_cuda_*, lt_bf16 */
#include "lib/model.h"    /* lt_fused_head_rows: the LM head's block rows, as the pass */

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

/* ---------------------------------------------------------------- --shapes */

enum { SH_T = 8192, SH_C = 2048, SH_NH = 32, SH_NKV = 4, SH_HD = 64, SH_F = 5632, SH_V = 50257 };
enum { SH_KVD = SH_NKV * SH_HD, SH_QD = SH_NH * SH_HD };
/* The attention's inputs repeat every PERIOD rows (drawn once on the host, copied on the
 * device): a prime, so that a kernel reading a row at a wrong power-of-two offset reads
 * other values, and the host reference needs only these rows. */
#define PERIOD 4093

/* Device buffers of one phase, freed together. */
typedef struct dev_bufs {
    lt_cuda *c;
    void *p[16];
    int n;
} dev_bufs;

static lt_status dev_alloc(dev_bufs *b, void **p, size_t bytes, lt_error *err) {
    if (b->n == (int)(sizeof b->p / sizeof b->p[0]))
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "bench_kernels: too many buffers in one phase");
    lt_status st = lt_cuda_malloc(b->c, p, bytes, err);
    if (st == LT_OK) b->p[b->n++] = *p;
    return st;
}

static void dev_free_all(dev_bufs *b) {
    while (b->n > 0) lt_cuda_free(b->c, b->p[--b->n]);
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* d[rows, width] bf16 = the rows of a [PERIOD, width] host draw (uniform in [-scale, scale],
 * a fixed LCG), row r being draw row r % PERIOD; the draw is kept in *host (fp32) when host
 * is not NULL. */
static lt_status fill_periodic(lt_cuda *c, lt_bf16 *d, size_t rows, size_t width, float scale, unsigned seed,
                               float **host, lt_error *err) {
    size_t p = rows < PERIOD ? rows : PERIOD, n = p * width;
    lt_bf16 *h = malloc(n * sizeof *h);
    float *hf = host ? malloc(n * sizeof *hf) : NULL;
    if (!h || (host && !hf)) {
        free(h), free(hf);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %zu host values", n);
    }
    unsigned s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        h[i] = lt_bf16_from_f32(scale * ((float)(s >> 8) / (float)(1u << 24) * 2.0f - 1.0f));
        if (hf) hf[i] = lt_bf16_to_f32(h[i]); /* what the device holds, exactly */
    }
    lt_status st = lt_cuda_copy_h2d(c, d, h, n * sizeof *h, err);
    free(h);
    /* double the filled prefix (a multiple of PERIOD rows) until every row is written */
    for (size_t done = p; st == LT_OK && done < rows; done *= 2) {
        size_t more = rows - done < done ? rows - done : done;
        st = lt_cuda_copy_d2d(c, d + done * width, d, more * width * sizeof *d, err);
    }
    if (host && st == LT_OK) *host = hf;
    else free(hf);
    return st;
}

/* The layer's seven linears on an SH_T-token unit, forward and backward; *tflops: all seven. */
static lt_status shapes_layer(lt_cuda *c, double *tflops, lt_error *err) {
    static const struct {
        const char *name;
        int in, out;
    } lin[] = {{"wq", SH_C, SH_QD},   {"wk", SH_C, SH_KVD}, {"wv", SH_C, SH_KVD}, {"wo", SH_QD, SH_C},
               {"wgate", SH_C, SH_F}, {"wup", SH_C, SH_F},  {"wdown", SH_F, SH_C}};
    enum { WARM = 2, N = 10 };
    dev_bufs b = {.c = c};
    lt_bf16 *x = NULL, *w = NULL, *y = NULL, *dy = NULL, *dx = NULL;
    float *dw = NULL;
    size_t wide = (size_t)SH_T * SH_F; /* the widest activation: [T, F] */
    lt_status st = dev_alloc(&b, (void **)&x, wide * sizeof *x, err);
    if (st == LT_OK) st = dev_alloc(&b, (void **)&w, (size_t)SH_F * SH_C * sizeof *w, err);
    if (st == LT_OK) st = dev_alloc(&b, (void **)&y, wide * sizeof *y, err);
    if (st == LT_OK) st = dev_alloc(&b, (void **)&dy, wide * sizeof *dy, err);
    if (st == LT_OK) st = dev_alloc(&b, (void **)&dx, wide * sizeof *dx, err);
    if (st == LT_OK) st = dev_alloc(&b, (void **)&dw, (size_t)SH_F * SH_C * sizeof *dw, err);
    if (st == LT_OK) st = fill_periodic(c, x, SH_T, SH_F, 1.0f, 11, NULL, err);
    if (st == LT_OK) st = fill_periodic(c, w, SH_F, SH_C, 0.02f, 12, NULL, err);
    if (st == LT_OK) st = fill_periodic(c, dy, SH_T, SH_F, 0.01f, 13, NULL, err);
    if (st == LT_OK) st = lt_cuda_memset(c, dx, 0, wide * sizeof *dx, err);
    if (st == LT_OK) st = lt_cuda_memset(c, dw, 0, (size_t)SH_F * SH_C * sizeof *dw, err);
    double total_ms = 0, total_flops = 0;
    for (size_t i = 0; st == LT_OK && i < sizeof lin / sizeof lin[0]; i++) {
        int in = lin[i].in, out = lin[i].out;
        double tf[N], tb[N];
        for (int r = 0; st == LT_OK && r < WARM + N; r++) {
            double t0 = now_s();
            st = lt_cuda_linear_forward(c, y, x, w, SH_T, in, out, out, err);
            if (st == LT_OK) st = lt_cuda_sync(c, err);
            double t1 = now_s();
            if (st == LT_OK) st = lt_cuda_linear_backward(c, dx, dw, dy, x, w, SH_T, in, out, out, err);
            if (st == LT_OK) st = lt_cuda_sync(c, err);
            double t2 = now_s();
            if (r >= WARM) tf[r - WARM] = t1 - t0, tb[r - WARM] = t2 - t1;
        }
        if (st != LT_OK) break;
        double mf = median(tf, N), mb = median(tb, N), flops = 2.0 * SH_T * in * (double)out;
        printf("layer_gemm name=%s T=%d in=%d out=%d fwd_ms=%.3f bwd_ms=%.3f fwd_tflops=%.1f bwd_tflops=%.1f\n",
               lin[i].name, SH_T, in, out, mf * 1e3, mb * 1e3, flops / mf * 1e-12, 2 * flops / mb * 1e-12);
        total_ms += (mf + mb) * 1e3, total_flops += 3 * flops;
    }
    if (st == LT_OK) {
        *tflops = total_flops / total_ms * 1e-9;
        printf("layer_gemms T=%d ms=%.3f tflops=%.1f (the seven linears, forward + backward)\n", SH_T, total_ms,
               *tflops);
    }
    dev_free_all(&b);
    return st;
}

/* The fused LM head of an SH_T-token unit as the pass runs it (head_forward): per block of
 * rows the GEMM into padded logits, the cross-entropy in place, the backward GEMMs. Timed
 * three ways (the GEMMs alone, with the cross-entropy, whole) so that the parts are the
 * differences. */
static lt_status shapes_head(lt_cuda *c, double *tflops, lt_error *err) {
    enum { WARM = 1, N = 4 };
    int block = lt_fused_head_rows(SH_V), ld = (SH_V + 63) / 64 * 64;
    dev_bufs b = {.c = c};
    lt_bf16 *x = NULL, *w = NULL, *logits = NULL, *dx = NULL;
    float *dw = NULL, *row_loss = NULL;
    int32_t *targets = NULL, *ht = malloc((size_t)SH_T * sizeof *ht);
    lt_status st = ht ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    if (st == LT_OK) st = dev_alloc(&b, (void **)&x, (size_t)SH_T * SH_C * sizeof *x, err);
    if (st == LT_OK) st = dev_alloc(&b, (void **)&w, (size_t)SH_V * SH_C * sizeof *w, err);
    if (st == LT_OK) st = dev_alloc(&b, (void **)&logits, (size_t)block * ld * sizeof *logits, err);
    if (st == LT_OK) st = dev_alloc(&b, (void **)&dx, (size_t)SH_T * SH_C * sizeof *dx, err);
    if (st == LT_OK) st = dev_alloc(&b, (void **)&dw, (size_t)SH_V * SH_C * sizeof *dw, err);
    if (st == LT_OK) st = dev_alloc(&b, (void **)&row_loss, (size_t)SH_T * sizeof *row_loss, err);
    if (st == LT_OK) st = dev_alloc(&b, (void **)&targets, (size_t)SH_T * sizeof *targets, err);
    if (st == LT_OK) st = fill_periodic(c, x, SH_T, SH_C, 1.0f, 21, NULL, err);
    if (st == LT_OK) st = fill_periodic(c, w, SH_V, SH_C, 0.02f, 22, NULL, err);
    if (st == LT_OK) st = lt_cuda_memset(c, dx, 0, (size_t)SH_T * SH_C * sizeof *dx, err);
    if (st == LT_OK) st = lt_cuda_memset(c, dw, 0, (size_t)SH_V * SH_C * sizeof *dw, err);
    unsigned s = 23;
    for (int t = 0; ht && t < SH_T; t++) s = s * 1664525u + 1013904223u, ht[t] = (int32_t)((s >> 8) % SH_V);
    if (st == LT_OK) st = lt_cuda_copy_h2d(c, targets, ht, (size_t)SH_T * sizeof *ht, err);
    double med[3] = {0, 0, 0}, loss = 0;
    for (int mode = 0; st == LT_OK && mode < 3; mode++) {
        double t[N];
        for (int r = 0; st == LT_OK && r < WARM + N; r++) {
            double t0 = now_s();
            for (int r0 = 0; st == LT_OK && r0 < SH_T; r0 += block) {
                int rows = SH_T - r0 < block ? SH_T - r0 : block;
                const lt_bf16 *xb = x + (size_t)r0 * SH_C;
                st = lt_cuda_linear_forward(c, logits, xb, w, rows, SH_C, SH_V, ld, err);
                if (st == LT_OK && mode >= 1)
                    st = lt_cuda_xent_forward_backward(c, mode == 2 ? logits : NULL, logits, targets + r0, rows, SH_V,
                                                       ld, 1.0f / SH_T, row_loss + r0, err);
                if (st == LT_OK && mode >= 1)
                    st = lt_cuda_sum_rows_into(c, row_loss + r0, (size_t)rows, LT_CUDA_SUM_LOSS, r0 == 0, err);
                if (st == LT_OK && mode == 2)
                    st = lt_cuda_linear_backward(c, dx + (size_t)r0 * SH_C, dw, logits, xb, w, rows, SH_C, SH_V, ld,
                                                 err);
            }
            if (st == LT_OK && mode >= 1) st = lt_cuda_read_sum(c, LT_CUDA_SUM_LOSS, &loss, err);
            if (st == LT_OK) st = lt_cuda_sync(c, err);
            if (r >= WARM) t[r - WARM] = now_s() - t0;
        }
        if (st == LT_OK) med[mode] = median(t, N);
    }
    if (st == LT_OK) {
        double mean = loss / SH_T, lnv = log((double)SH_V);
        *tflops = 6.0 * SH_T * (double)SH_V * SH_C / med[2] * 1e-12;
        printf("lm_head T=%d V=%d ld=%d C=%d block=%d gemm_fwd_ms=%.3f xent_ms=%.3f bwd_ms=%.3f ms=%.3f tflops=%.1f "
               "loss=%.4f ln_v=%.4f\n",
               SH_T, SH_V, ld, SH_C, block, med[0] * 1e3, (med[1] - med[0]) * 1e3, (med[2] - med[1]) * 1e3,
               med[2] * 1e3, *tflops, mean, lnv);
        /* logits of std ~0.5 (x in [-1, 1], w in [-0.02, 0.02], C = 2048): ln V plus a little */
        if (!isfinite(mean) || mean < lnv - 1 || mean > lnv + 2)
            st = lt_fail(err, LT_ERR_INTERNAL, NULL,
                         "lm_head: the mean loss %.4f is not near ln V = %.4f (wrong logits or cross-entropy at "
                         "ld = %d)", mean, lnv, ld);
    }
    dev_free_all(&b);
    free(ht);
    return st;
}

/* out and lse of query row t, head h, of one causal sample whose inputs are the periodic
 * draws q, k, v ([PERIOD, width] fp32) against a double-precision reference: *e_out =
 * |out - ref| / |ref| over the head's hd values, *e_lse = |lse - ref| / max(1, |ref|); a NaN
 * makes them infinite. */
static void attn_reference_err(const float *q, const float *k, const float *v, int t, int h, const lt_bf16 *out,
                               float lse, double *e_out, double *e_lse) {
    int g = h / (SH_NH / SH_NKV);
    const float *qr = q + (size_t)(t % PERIOD) * SH_QD + (size_t)h * SH_HD;
    double scale = 1.0 / sqrt((double)SH_HD), m = -INFINITY, l = 0, o[SH_HD] = {0};
    for (int j = 0; j <= t; j++) { /* online softmax over the visible keys */
        const float *kr = k + (size_t)(j % PERIOD) * SH_KVD + (size_t)g * SH_HD;
        const float *vr = v + (size_t)(j % PERIOD) * SH_KVD + (size_t)g * SH_HD;
        double sc = 0;
        for (int d = 0; d < SH_HD; d++) sc += (double)qr[d] * kr[d];
        sc *= scale;
        double mn = sc > m ? sc : m, a = exp(m - mn), p = exp(sc - mn);
        l = l * a + p;
        for (int d = 0; d < SH_HD; d++) o[d] = o[d] * a + p * vr[d];
        m = mn;
    }
    double num = 0, den = 0;
    for (int d = 0; d < SH_HD; d++) {
        double r = o[d] / l, e = lt_bf16_to_f32(out[d]) - r;
        num += e * e, den += r * r;
    }
    double ref_lse = m + log(l);
    *e_out = sqrt(num / (den > 0 ? den : 1e-300));
    *e_lse = fabs((double)lse - ref_lse) / (fabs(ref_lse) > 1 ? fabs(ref_lse) : 1);
    if (!isfinite(*e_out)) *e_out = INFINITY;
    if (!isfinite(*e_lse)) *e_lse = INFINITY;
}

/* Attention of one causal sample of each length in lens (ascending), forward and backward,
 * within what is left before `deadline`; tflops[i] < 0: skipped. */
static lt_status shapes_attention(lt_cuda *c, const int *lens, int n_lens, double deadline, double *tflops,
                                  lt_error *err) {
    enum { MAX_RUNS = 3 };
    dev_bufs b = {.c = c};
    for (int i = 0; i < n_lens; i++) tflops[i] = -1;
    /* the buffers of the longest length that fits in 90 % of the free memory (the kernels'
     * own scratch comes on top: the rest) */
    size_t free_b = 0, total_b = 0, per_row = 4 * (size_t)SH_QD * 2 + 4 * (size_t)SH_KVD * 2 + SH_NH * 4;
    lt_status st = lt_cuda_mem_info(c, &free_b, &total_b, err);
    int fit = n_lens;
    while (st == LT_OK && fit > 0 && (size_t)lens[fit - 1] * per_row * 2 > free_b / 10 * 9) fit--;
    int Tmax = fit > 0 ? lens[fit - 1] : 0;
    lt_bf16 *q = NULL, *out = NULL, *dq = NULL, *dout = NULL, *k = NULL, *v = NULL, *dk = NULL, *dv = NULL;
    float *lse = NULL, *hq = NULL, *hk = NULL, *hv = NULL;
    size_t nq = (size_t)Tmax * SH_QD, nkv = (size_t)Tmax * SH_KVD;
    if (st == LT_OK && Tmax > 0) {
        st = dev_alloc(&b, (void **)&q, nq * sizeof *q, err);
        if (st == LT_OK) st = dev_alloc(&b, (void **)&out, nq * sizeof *out, err);
        if (st == LT_OK) st = dev_alloc(&b, (void **)&dq, nq * sizeof *dq, err);
        if (st == LT_OK) st = dev_alloc(&b, (void **)&dout, nq * sizeof *dout, err);
        if (st == LT_OK) st = dev_alloc(&b, (void **)&k, nkv * sizeof *k, err);
        if (st == LT_OK) st = dev_alloc(&b, (void **)&v, nkv * sizeof *v, err);
        if (st == LT_OK) st = dev_alloc(&b, (void **)&dk, nkv * sizeof *dk, err);
        if (st == LT_OK) st = dev_alloc(&b, (void **)&dv, nkv * sizeof *dv, err);
        if (st == LT_OK) st = dev_alloc(&b, (void **)&lse, (size_t)Tmax * SH_NH * sizeof *lse, err);
        if (st == LT_OK) st = fill_periodic(c, q, Tmax, SH_QD, 2.0f, 31, &hq, err);
        if (st == LT_OK) st = fill_periodic(c, k, Tmax, SH_KVD, 1.0f, 32, &hk, err);
        if (st == LT_OK) st = fill_periodic(c, v, Tmax, SH_KVD, 1.0f, 33, &hv, err);
        if (st == LT_OK) st = fill_periodic(c, dout, Tmax, SH_QD, 0.01f, 34, NULL, err);
        if (st == LT_OK) st = lt_cuda_memset(c, dq, 0, nq * sizeof *dq, err);
        if (st == LT_OK) st = lt_cuda_memset(c, dk, 0, nkv * sizeof *dk, err);
        if (st == LT_OK) st = lt_cuda_memset(c, dv, 0, nkv * sizeof *dv, err);
        if (st == LT_OK) st = lt_cuda_sync(c, err);
    }
    double last_T = 0, last_iter = 0; /* the previous length's fwd+bwd seconds */
    for (int i = 0; st == LT_OK && i < n_lens; i++) {
        int T = lens[i];
        double left = deadline - now_s();
        if (i >= fit) {
            printf("attention T=%d samples=1 nh=%d nkv=%d hd=%d skipped=memory (%.1f GiB of buffers, %.1f GiB free)\n",
                   T, SH_NH, SH_NKV, SH_HD, (double)T * per_row / (1 << 30), (double)free_b / (1 << 30));
            continue;
        }
        double predicted = last_T > 0 ? last_iter * ((double)T / last_T) * ((double)T / last_T) : 0;
        if (predicted * 1.2 > left) {
            printf("attention T=%d samples=1 nh=%d nkv=%d hd=%d skipped=time (predicted %.1f s a run, %.1f s left)\n",
                   T, SH_NH, SH_NKV, SH_HD, predicted, left);
            continue;
        }
        lt_cuda_attn_segment seg = {.row0 = 0, .n = T, .begin = 0, .k = k, .v = v, .dk = dk, .dv = dv};
        double tf[MAX_RUNS + 1], tb[MAX_RUNS + 1];
        int runs = 0; /* timed runs after the warm-up (run 0) */
        for (int r = 0; st == LT_OK && r <= MAX_RUNS; r++) {
            /* 3 timed runs; 1 once a run takes a second (long enough to time once) */
            if (r > 0 && (deadline - now_s()) < 1.2 * (tf[0] + tb[0])) break;
            if (r > 1 && tf[0] + tb[0] > 1.0) break;
            double t0 = now_s();
            st = lt_cuda_attention_forward(c, out, lse, q, &seg, 1, T, SH_NH, SH_NKV, SH_HD, err);
            if (st == LT_OK) st = lt_cuda_sync(c, err);
            double t1 = now_s();
            if (st == LT_OK)
                st = lt_cuda_attention_backward(c, dq, dout, out, lse, q, &seg, 1, T, SH_NH, SH_NKV, SH_HD, err);
            if (st == LT_OK) st = lt_cuda_sync(c, err);
            double t2 = now_s();
            tf[r] = t1 - t0, tb[r] = t2 - t1, runs = r;
        }
        if (st != LT_OK) {
            fprintf(stderr, "bench_kernels: attention at T = %d failed (next line)\n", T);
            break;
        }
        /* the medians of the timed runs; with none, the warm-up's (first-launch costs in it) */
        double mf = runs ? median(tf + 1, runs) : tf[0], mb = runs ? median(tb + 1, runs) : tb[0];
        double fwd_flops = 4.0 * SH_NH * SH_HD * ((double)T * (T + 1) / 2);
        /* the check: two rows x two heads against the host's double-precision reference */
        int rows[2] = {T - 1, T / 2 + 3}, heads[2] = {0, SH_NH - 1};
        double worst_out = 0, worst_lse = 0;
        for (int ri = 0; st == LT_OK && ri < 2; ri++)
            for (int hi = 0; st == LT_OK && hi < 2; hi++) {
                lt_bf16 o[SH_HD];
                float l = 0;
                size_t row = (size_t)rows[ri];
                st = lt_cuda_copy_d2h(c, o, out + row * SH_QD + (size_t)heads[hi] * SH_HD, sizeof o, err);
                if (st == LT_OK) st = lt_cuda_copy_d2h(c, &l, lse + row * SH_NH + heads[hi], sizeof l, err);
                double eo = 0, el = 0;
                if (st == LT_OK) attn_reference_err(hq, hk, hv, rows[ri], heads[hi], o, l, &eo, &el);
                worst_out = eo > worst_out ? eo : worst_out, worst_lse = el > worst_lse ? el : worst_lse;
            }
        if (st != LT_OK) break;
        tflops[i] = 3.5 * fwd_flops / (mf + mb) * 1e-12;
        printf("attention T=%d samples=1 nh=%d nkv=%d hd=%d runs=%d fwd_ms=%.3f bwd_ms=%.3f fwd_tflops=%.1f "
               "fwdbwd_tflops=%.1f out_rel_err=%.2e lse_rel_err=%.2e\n",
               T, SH_NH, SH_NKV, SH_HD, runs, mf * 1e3, mb * 1e3, fwd_flops / mf * 1e-12, tflops[i], worst_out,
               worst_lse);
        if (!(worst_out <= 2e-2) || !(worst_lse <= 1e-3)) {
            st = lt_fail(err, LT_ERR_INTERNAL, NULL,
                         "attention at T = %d differs from the double-precision reference at rows %d and %d, heads 0 "
                         "and %d: out by %.2e (allowed 2e-2), lse by %.2e (allowed 1e-3), relative",
                         T, rows[0], rows[1], SH_NH - 1, worst_out, worst_lse);
            break;
        }
        last_T = T, last_iter = mf + mb;
    }
    free(hq), free(hk), free(hv);
    dev_free_all(&b);
    return st;
}

static int shapes_main(int argc, char **argv) {
    double seconds = 60;
    if (argc > 3 || (argc == 3 && (seconds = strtod(argv[2], NULL)) <= 0)) {
        fprintf(stderr, "usage: bench_kernels --shapes [SECONDS]   (SECONDS > 0, default 60)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* each line out as printed: a run stopped keeps them */
    double deadline = now_s() + seconds;
    static const int lens[] = {8192, 65536, 131072, 262144};
    enum { N_LENS = sizeof lens / sizeof lens[0] };
    double layer = 0, head = 0, attn[N_LENS];
    lt_error err;
    lt_error_clear(&err);
    lt_cuda *c = NULL;
    if (lt_cuda_open(&c, 0, &err) != LT_OK) return die(&err);
    lt_status st = shapes_layer(c, &layer, &err);
    if (st == LT_OK) st = shapes_head(c, &head, &err);
    if (st == LT_OK) st = shapes_attention(c, lens, N_LENS, deadline, attn, &err);
    if (st == LT_OK) {
        printf("shapes: layer_gemm_tflops=%.1f lm_head_tflops=%.1f", layer, head);
        for (int i = 0; i < N_LENS; i++) {
            if (attn[i] >= 0) printf(" attn%dk_tflops=%.1f", lens[i] / 1024, attn[i]);
            else printf(" attn%dk_tflops=skipped", lens[i] / 1024);
        }
        printf("\n");
    }
    lt_cuda_close(c);
    return st == LT_OK ? 0 : die(&err);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--shapes") == 0) return shapes_main(argc, argv);
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
