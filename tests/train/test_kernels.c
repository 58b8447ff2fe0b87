/*
 * tests/train/test_kernels.c — unit tests for the CPU fp32 reference kernels (train/cpu/kernels.h, cmocka).
 *
 * Covers, on small random shapes:
 *   - every backward against central finite differences of its forward: the analytic gradient
 *     of a random linear functional L = sum(w * out) (accumulated in double) vs
 *     (L(x + eps) - L(x - eps)) / 2eps, eps = 2e-3, per element within 1e-2 relative;
 *   - embedding forward is a row copy; linear forward equals a naive triple loop;
 *   - RoPE: position 0 is the identity, forward matches the rotation written out, backward
 *     undoes forward;
 *   - attention: forward and lse match a double-precision softmax with an explicit mask;
 *     a segment with KV context [begin, end) gives the rows of the whole sequence [0, end);
 *     one call with two aliasing segments of a sample gives the gradients of the whole sample;
 *   - attention across the kernel's tiles (64-row query blocks, 256-key blocks, online
 *     softmax): a 410-row slice with 290 keys of context matches the double reference,
 *     equals the whole sequence's rows, its split backward equals the whole one, and a
 *     2-thread pool is bit-identical to none;
 *   - lt_vexpf (train/cpu/simd.h) within 2 x 2^-24 relative of exp over [-87, 88];
 *   - cross-entropy: loss equals -log softmax in double, target -1 rows add no loss and get
 *     zero gradient, in place equals out of place;
 *   - every threaded kernel is bit-identical with a 2-thread pool and with a NULL pool.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/model.h"      /* lt_model_rope_inv_freq */
#include "lib/rng.h"        /* lt_rng: seeded test data */
#include "lib/threadpool.h" /* lt_pool */
#include "train/cpu/simd.h" /* lt_vexpf */
#include "train/cpu/kernels.h"

/* ---------------------------------------------------------------- helpers */

/* Central-difference step: 2e-3 keeps the fp32 rounding of L / 2eps (the dominant error; ~1e-4
 * absolute at 1e-3) well inside the tolerance while the O(eps^2) truncation stays negligible. */
#define FD_EPS 2e-3
#define FD_RTOL 1e-2

static float *fbuf(size_t n) {
    float *p = calloc(n > 0 ? n : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

static void fill(lt_rng *r, float *x, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * lt_rng_double(r));
}

static float *rand_buf(lt_rng *r, size_t n, double lo, double hi) {
    float *p = fbuf(n);
    fill(r, p, n, lo, hi);
    return p;
}

static float *copy_buf(const float *x, size_t n) {
    float *p = fbuf(n);
    memcpy(p, x, n * sizeof *p);
    return p;
}

static double weighted_sum(const float *w, const float *out, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)w[i] * (double)out[i];
    return s;
}

static lt_pool *make_pool(int n) {
    lt_pool *p = NULL;
    lt_error err;
    lt_error_clear(&err);
    assert_int_equal(lt_pool_create(&p, n, &err), LT_OK);
    return p;
}

/* One input of a finite-difference check: its values (perturbed in place) and the analytic
 * gradient of L with respect to them. */
typedef struct fd_input {
    const char *name;
    float *x;
    const float *grad;
    size_t n;
} fd_input;

/* L(ctx): recomputes the forward from the current inputs. */
typedef double (*fd_fn)(void *ctx);

/*
 * Central differences of L for every element of every input against the analytic gradient.
 * An element passes when |numeric - analytic| <= FD_RTOL * max(|analytic|, 0.1 * the input's
 * largest |analytic|): relative for the elements that matter, and an absolute floor at 1e-3 of
 * the largest for tiny ones (fp32 rounding of L divided by 2 eps is ~5e-5 absolute here).
 * Returns the worst error / allowed ratio (< 1 passes) and fails the test above 1.
 */
static double fd_check(const char *what, fd_fn f, void *ctx, const fd_input *in, int n_in) {
    double worst = 0.0;
    for (int k = 0; k < n_in; k++) {
        double max_abs = 0.0;
        for (size_t i = 0; i < in[k].n; i++) max_abs = fmax(max_abs, fabs((double)in[k].grad[i]));
        assert_true(max_abs > 0.0); /* a vanishing gradient would check nothing */
        for (size_t i = 0; i < in[k].n; i++) {
            float x0 = in[k].x[i];
            float xp = x0 + (float)FD_EPS, xm = x0 - (float)FD_EPS;
            in[k].x[i] = xp;
            double lp = f(ctx);
            in[k].x[i] = xm;
            double lm = f(ctx);
            in[k].x[i] = x0;
            double num = (lp - lm) / ((double)xp - (double)xm);
            double ana = in[k].grad[i];
            double allowed = FD_RTOL * fmax(fabs(ana), 0.1 * max_abs);
            double ratio = fabs(num - ana) / allowed;
            if (ratio > 1.0)
                fprintf(stderr, "%s: d/d%s[%zu]: analytic %.6g, numeric %.6g\n", what, in[k].name, i, ana,
                        num);
            worst = fmax(worst, ratio);
        }
    }
    assert_true(worst <= 1.0);
    return worst;
}

/* ---------------------------------------------------------------- embedding */

typedef struct {
    const int32_t *ids;
    int T, C;
    float *wte, *out;
    const float *w;
} embed_fd;

static double embed_L(void *arg) {
    embed_fd *c = arg;
    lt_embed_forward(c->out, c->ids, c->T, c->wte, c->C);
    return weighted_sum(c->w, c->out, (size_t)c->T * c->C);
}

static void test_embed(void **state) {
    (void)state;
    enum { T = 7, C = 16, V = 5 };
    const int32_t ids[T] = {3, 0, 3, 4, 1, 3, 0}; /* repeats: the backward accumulates */
    lt_rng r;
    lt_rng_seed(&r, 1);
    float *wte = rand_buf(&r, (size_t)V * C, -1, 1), *out = fbuf((size_t)T * C);
    lt_embed_forward(out, ids, T, wte, C);
    for (int t = 0; t < T; t++) assert_memory_equal(out + t * C, wte + ids[t] * C, C * sizeof(float));

    float *w = rand_buf(&r, (size_t)T * C, -1, 1), *dwte = fbuf((size_t)V * C);
    lt_embed_backward(dwte, w, ids, T, C);
    /* row 2 is never looked up: its gradient stays zero */
    for (int c = 0; c < C; c++) assert_true(dwte[2 * C + c] == 0.0f);
    embed_fd ctx = {ids, T, C, wte, out, w};
    fd_input in[] = {{"wte", wte, dwte, (size_t)V * C}};
    fd_check("embed", embed_L, &ctx, in, 1);
    free(wte), free(out), free(w), free(dwte);
}

/* ---------------------------------------------------------------- RMSNorm */

typedef struct {
    int T, C;
    float *x, *g, *out, *rstd;
    const float *w;
} rms_fd;

static double rms_L(void *arg) {
    rms_fd *c = arg;
    lt_rmsnorm_forward(c->out, c->rstd, c->x, c->g, c->T, c->C, 1e-5f, NULL);
    return weighted_sum(c->w, c->out, (size_t)c->T * c->C);
}

static void test_rmsnorm_grad(void **state) {
    (void)state;
    enum { T = 7, C = 16 };
    lt_rng r;
    lt_rng_seed(&r, 2);
    float *x = rand_buf(&r, T * C, -1, 1), *g = rand_buf(&r, C, 0.5, 1.5), *w = rand_buf(&r, T * C, -1, 1);
    float *out = fbuf(T * C), *rstd = fbuf(T), *dx = fbuf(T * C), *dg = fbuf(C);
    lt_rmsnorm_forward(out, rstd, x, g, T, C, 1e-5f, NULL);
    /* forward against the definition in double */
    for (int t = 0; t < T; t++) {
        double ss = 0.0;
        for (int c = 0; c < C; c++) ss += (double)x[t * C + c] * x[t * C + c];
        double rs = 1.0 / sqrt(ss / C + 1e-5);
        assert_float_equal(rstd[t], rs, 1e-6 * rs);
        for (int c = 0; c < C; c++) assert_float_equal(out[t * C + c], x[t * C + c] * rs * g[c], 1e-5);
    }
    lt_rmsnorm_backward(dx, dg, w, x, g, rstd, T, C, NULL);
    rms_fd ctx = {T, C, x, g, out, rstd, w};
    fd_input in[] = {{"x", x, dx, T * C}, {"w", g, dg, C}};
    fd_check("rmsnorm", rms_L, &ctx, in, 2);
    free(x), free(g), free(w), free(out), free(rstd), free(dx), free(dg);
}

/* ---------------------------------------------------------------- linear */

typedef struct {
    int T, IN, OUT;
    float *x, *wt, *out;
    const float *w;
} lin_fd;

static double lin_L(void *arg) {
    lin_fd *c = arg;
    lt_linear_forward(c->out, c->x, c->wt, c->T, c->IN, c->OUT);
    return weighted_sum(c->w, c->out, (size_t)c->T * c->OUT);
}

static void test_linear_forward_naive(void **state) {
    (void)state;
    enum { T = 7, IN = 16, OUT = 11 };
    lt_rng r;
    lt_rng_seed(&r, 3);
    float *x = rand_buf(&r, T * IN, -1, 1), *wt = rand_buf(&r, OUT * IN, -1, 1), *out = fbuf(T * OUT);
    lt_linear_forward(out, x, wt, T, IN, OUT);
    for (int t = 0; t < T; t++)
        for (int o = 0; o < OUT; o++) {
            double s = 0.0;
            for (int i = 0; i < IN; i++) s += (double)x[t * IN + i] * wt[o * IN + i];
            assert_float_equal(out[t * OUT + o], s, 1e-5);
        }
    free(x), free(wt), free(out);
}

static void test_linear_grad(void **state) {
    (void)state;
    enum { T = 7, IN = 16, OUT = 11 };
    lt_rng r;
    lt_rng_seed(&r, 4);
    float *x = rand_buf(&r, T * IN, -1, 1), *wt = rand_buf(&r, OUT * IN, -1, 1);
    float *w = rand_buf(&r, T * OUT, -1, 1);
    float *out = fbuf(T * OUT), *dx = fbuf(T * IN), *dw = fbuf(OUT * IN);
    lt_linear_backward(dx, dw, w, x, wt, T, IN, OUT);
    lin_fd ctx = {T, IN, OUT, x, wt, out, w};
    fd_input in[] = {{"x", x, dx, T * IN}, {"W", wt, dw, OUT * IN}};
    fd_check("linear", lin_L, &ctx, in, 2);

    /* += semantics, and either gradient may be skipped */
    float *dx2 = copy_buf(dx, T * IN), *dw2 = copy_buf(dw, OUT * IN);
    lt_linear_backward(dx2, NULL, w, x, wt, T, IN, OUT);
    lt_linear_backward(NULL, dw2, w, x, wt, T, IN, OUT);
    for (int i = 0; i < T * IN; i++) assert_float_equal(dx2[i], 2.0f * dx[i], 1e-5);
    for (int i = 0; i < OUT * IN; i++) assert_float_equal(dw2[i], 2.0f * dw[i], 1e-5);
    free(x), free(wt), free(w), free(out), free(dx), free(dw), free(dx2), free(dw2);
}

/* ---------------------------------------------------------------- RoPE */

typedef struct {
    int T, nh, hd;
    const int32_t *pos;
    float *x, *y;
    const float *w;
    const float *inv_freq;
} rope_fd;

static double rope_L(void *arg) {
    rope_fd *c = arg;
    size_t n = (size_t)c->T * c->nh * c->hd;
    memcpy(c->y, c->x, n * sizeof *c->y);
    lt_rope_forward(c->y, c->pos, c->T, c->nh, c->hd, c->inv_freq, NULL);
    return weighted_sum(c->w, c->y, n);
}

/* The plain inverse frequencies of base theta (lt_model_rope_inv_freq without scaling). */
static void plain_inv_freq(float theta, int hd, float *f) {
    lt_model_shape s = {.rope_theta = theta};
    lt_model_rope_inv_freq(&s, hd, f);
}

static void test_rope(void **state) {
    (void)state;
    enum { T = 7, NH = 2, HD = 8, N = T * NH * HD };
    const int32_t pos[T] = {0, 1, 2, 5, 17, 300, 4095};
    const float theta = 10000.0f;
    float freq[HD / 2];
    plain_inv_freq(theta, HD, freq);
    lt_rng r;
    lt_rng_seed(&r, 5);
    float *x = rand_buf(&r, N, -1, 1), *y = copy_buf(x, N);
    lt_rope_forward(y, pos, T, NH, HD, freq, NULL);
    /* position 0: identity, bit for bit */
    assert_memory_equal(y, x, NH * HD * sizeof(float));
    /* the rotation written out, angles in double */
    for (int t = 0; t < T; t++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < HD / 2; i++) {
                double a = pos[t] / pow(theta, 2.0 * i / HD);
                const float *xr = x + (t * NH + h) * HD;
                double e0 = xr[i] * cos(a) - xr[i + HD / 2] * sin(a);
                double e1 = xr[i + HD / 2] * cos(a) + xr[i] * sin(a);
                /* float angles of positions up to 4095 are off by ~pos * 2^-24 rad */
                assert_float_equal(y[(t * NH + h) * HD + i], e0, 2e-3);
                assert_float_equal(y[(t * NH + h) * HD + i + HD / 2], e1, 2e-3);
            }
    /* backward is the inverse rotation */
    float *z = copy_buf(y, N);
    lt_rope_backward(z, pos, T, NH, HD, freq, NULL);
    for (int i = 0; i < N; i++) assert_float_equal(z[i], x[i], 1e-6);

    /* and the gradient of the forward */
    float *w = rand_buf(&r, N, -1, 1), *g = copy_buf(w, N);
    lt_rope_backward(g, pos, T, NH, HD, freq, NULL);
    rope_fd ctx = {T, NH, HD, pos, x, y, w, freq};
    fd_input in[] = {{"x", x, g, N}};
    fd_check("rope", rope_L, &ctx, in, 1);
    free(x), free(y), free(z), free(w), free(g);
}

/* Llama 3.1's scaled frequencies (lib/model.h) against the rule written out in double
 * (Meta's reference apply_scaling: wavelengths above L / low slowed by `factor`, below
 * L / high kept, between interpolated); the fp32 operation order of transformers that
 * lt_model_rope_inv_freq follows is checked end to end by tests/train/hf_reference.py. */
static void test_rope_llama3_frequencies(void **state) {
    (void)state;
    enum { HD = 128 };
    lt_model_shape s = {.rope_theta = 500000.0, .rope_scaling = LT_ROPE_LLAMA3, .rope_factor = 8.0,
                        .rope_low_freq_factor = 1.0, .rope_high_freq_factor = 4.0, .rope_original_max_pos = 8192};
    float f[HD / 2], plain[HD / 2];
    lt_model_rope_inv_freq(&s, HD, f);
    plain_inv_freq(500000.0f, HD, plain);
    int kept = 0, slowed = 0, between = 0;
    for (int i = 0; i < HD / 2; i++) {
        double base = 1.0 / pow(500000.0, 2.0 * i / HD), wavelen = 2.0 * M_PI / base, want;
        if (wavelen < 8192.0 / 4.0) {
            want = base, kept++;
            assert_memory_equal(&f[i], &plain[i], sizeof(float)); /* untouched, bit for bit */
        } else if (wavelen > 8192.0 / 1.0) {
            want = base / 8.0, slowed++;
        } else {
            double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
            want = (1.0 - smooth) * base / 8.0 + smooth * base, between++;
        }
        assert_float_equal(f[i], want, 1e-6 * want);
    }
    assert_true(kept > 0 && slowed > 0 && between > 0); /* every band is exercised */
    /* no scaling: the plain frequencies */
    s.rope_scaling = LT_ROPE_NONE;
    lt_model_rope_inv_freq(&s, HD, f);
    assert_memory_equal(f, plain, sizeof f);
}

/* A bias: y += b per row; db += column sums. */
static void test_bias(void **state) {
    (void)state;
    enum { T = 5, N = 3 };
    float y[T * N], b[N] = {1.5f, -2.0f, 0.25f}, db[N] = {1.0f, 0.0f, -1.0f};
    for (int i = 0; i < T * N; i++) y[i] = (float)i;
    lt_bias_forward(y, b, T, N);
    for (int i = 0; i < T * N; i++) assert_float_equal(y[i], (float)i + b[i % N], 0.0);
    lt_bias_backward(db, y, T, N);
    for (int j = 0; j < N; j++) {
        double s = j == 0 ? 1.0 : j == 1 ? 0.0 : -1.0;
        for (int t = 0; t < T; t++) s += y[t * N + j];
        assert_float_equal(db[j], s, 1e-5);
    }
}

/* ---------------------------------------------------------------- attention */

/* Test geometry: nh = 4, nkv = 2, hd = 8 (GQA, 2 query heads per kv head). */
enum { NH = 4, NKV = 2, HD = 8, QD = NH * HD, KVD = NKV * HD };

typedef struct {
    int T, n_segs;
    lt_attn_segment segs[4];
    float *q, *out, *lse;
    const float *w;
} attn_fd;

static double attn_L(void *arg) {
    attn_fd *c = arg;
    lt_attention_forward(c->out, c->lse, c->q, c->segs, c->n_segs, NH, NKV, HD, NULL);
    return weighted_sum(c->w, c->out, (size_t)c->T * QD);
}

/* Reference forward in double with an explicit per-segment causal mask. */
static void attn_reference(double *out, double *lse, const float *q, const lt_attn_segment *s, int n_segs) {
    static double sc[1024];
    for (int e = 0; e < n_segs; e++)
        for (int i = 0; i < s[e].n; i++)
            for (int h = 0; h < NH; h++) {
                int row = s[e].row0 + i, g = h / (NH / NKV), L = s[e].begin + s[e].n;
                assert_true(L <= 1024);
                double m = -INFINITY, sum = 0.0;
                for (int j = 0; j < L; j++) {
                    if (j > s[e].begin + i) { /* masked: the future of this query */
                        sc[j] = -INFINITY;
                        continue;
                    }
                    double d = 0.0;
                    for (int k = 0; k < HD; k++)
                        d += (double)q[row * QD + h * HD + k] * s[e].k[j * KVD + g * HD + k];
                    sc[j] = d / sqrt((double)HD);
                    m = fmax(m, sc[j]);
                }
                for (int j = 0; j < L; j++) sum += exp(sc[j] - m);
                for (int k = 0; k < HD; k++) {
                    double o = 0.0;
                    for (int j = 0; j < L; j++) o += exp(sc[j] - m) / sum * s[e].v[j * KVD + g * HD + k];
                    out[row * QD + h * HD + k] = o;
                }
                lse[row * NH + h] = m + log(sum);
            }
}

/* Runs forward, compares it with the double reference, runs backward and checks every
 * gradient (q and each distinct k/v buffer) by finite differences. */
static void attn_grad_case(const char *what, int T, lt_attn_segment *segs, int n_segs, float **kbufs,
                           float **vbufs, float **dkbufs, float **dvbufs, const int *kv_rows, int n_samples,
                           lt_rng *r) {
    float *q = rand_buf(r, (size_t)T * QD, -1, 1), *w = rand_buf(r, (size_t)T * QD, -1, 1);
    float *out = fbuf((size_t)T * QD), *lse = fbuf((size_t)T * NH), *dq = fbuf((size_t)T * QD);
    lt_attention_forward(out, lse, q, segs, n_segs, NH, NKV, HD, NULL);
    double *rout = calloc((size_t)T * QD, sizeof *rout), *rlse = calloc((size_t)T * NH, sizeof *rlse);
    assert_non_null(rout);
    assert_non_null(rlse);
    attn_reference(rout, rlse, q, segs, n_segs);
    for (int i = 0; i < T * QD; i++) assert_float_equal(out[i], rout[i], 1e-5);
    for (int i = 0; i < T * NH; i++) assert_float_equal(lse[i], rlse[i], 1e-5);

    lt_attention_backward(dq, w, out, lse, q, segs, n_segs, NH, NKV, HD, NULL);
    attn_fd ctx = {.T = T, .n_segs = n_segs, .q = q, .out = out, .lse = lse, .w = w};
    memcpy(ctx.segs, segs, (size_t)n_segs * sizeof *segs);
    fd_input in[1 + 2 * 4];
    int n_in = 0;
    in[n_in++] = (fd_input){"q", q, dq, (size_t)T * QD};
    for (int s = 0; s < n_samples; s++) {
        in[n_in++] = (fd_input){"k", kbufs[s], dkbufs[s], (size_t)kv_rows[s] * KVD};
        in[n_in++] = (fd_input){"v", vbufs[s], dvbufs[s], (size_t)kv_rows[s] * KVD};
    }
    fd_check(what, attn_L, &ctx, in, n_in);
    free(q), free(w), free(out), free(lse), free(dq), free(rout), free(rlse);
}

/* Two segments: sample B [0, 4) at rows 0..3, then sample A [2, 5) at rows 4..6 whose
 * keys 0..1 are KV context written by an earlier slice. */
static void test_attention_grad_context(void **state) {
    (void)state;
    lt_rng r;
    lt_rng_seed(&r, 6);
    int rows[2] = {5, 4}; /* sample A, sample B */
    float *k[2], *v[2], *dk[2], *dv[2];
    for (int s = 0; s < 2; s++) {
        k[s] = rand_buf(&r, (size_t)rows[s] * KVD, -1, 1), v[s] = rand_buf(&r, (size_t)rows[s] * KVD, -1, 1);
        dk[s] = fbuf((size_t)rows[s] * KVD), dv[s] = fbuf((size_t)rows[s] * KVD);
    }
    lt_attn_segment segs[2] = {
        {.row0 = 0, .n = 4, .begin = 0, .k = k[1], .v = v[1], .dk = dk[1], .dv = dv[1]},
        {.row0 = 4, .n = 3, .begin = 2, .k = k[0], .v = v[0], .dk = dk[0], .dv = dv[0]},
    };
    attn_grad_case("attention (KV context)", 7, segs, 2, k, v, dk, dv, rows, 2, &r);
    for (int s = 0; s < 2; s++) free(k[s]), free(v[s]), free(dk[s]), free(dv[s]);
}

/* Three segments, two of them of the same sample in one call (aliasing dk/dv): sample A
 * [0, 2) at rows 0..1, sample B [0, 3) at rows 2..4, sample A [2, 5) at rows 5..7. */
static void test_attention_grad_aliasing(void **state) {
    (void)state;
    lt_rng r;
    lt_rng_seed(&r, 7);
    int rows[2] = {5, 3};
    float *k[2], *v[2], *dk[2], *dv[2];
    for (int s = 0; s < 2; s++) {
        k[s] = rand_buf(&r, (size_t)rows[s] * KVD, -1, 1), v[s] = rand_buf(&r, (size_t)rows[s] * KVD, -1, 1);
        dk[s] = fbuf((size_t)rows[s] * KVD), dv[s] = fbuf((size_t)rows[s] * KVD);
    }
    lt_attn_segment segs[3] = {
        {.row0 = 0, .n = 2, .begin = 0, .k = k[0], .v = v[0], .dk = dk[0], .dv = dv[0]},
        {.row0 = 2, .n = 3, .begin = 0, .k = k[1], .v = v[1], .dk = dk[1], .dv = dv[1]},
        {.row0 = 5, .n = 3, .begin = 2, .k = k[0], .v = v[0], .dk = dk[0], .dv = dv[0]},
    };
    attn_grad_case("attention (aliasing segments)", 8, segs, 3, k, v, dk, dv, rows, 2, &r);
    for (int s = 0; s < 2; s++) free(k[s]), free(v[s]), free(dk[s]), free(dv[s]);
}

/* A slice [4, 6) reading keys 0..3 as KV context gives the rows of the whole sample [0, 6);
 * the sample split into [0, 4) + [4, 6) in one backward call gives its whole gradients. */
static void test_attention_context_equals_whole(void **state) {
    (void)state;
    enum { L = 6, B = 4 };
    lt_rng r;
    lt_rng_seed(&r, 8);
    float *q = rand_buf(&r, L * QD, -1, 1);
    float *k = rand_buf(&r, L * KVD, -1, 1), *v = rand_buf(&r, L * KVD, -1, 1);
    float *dout = rand_buf(&r, L * QD, -1, 1);
    float *out = fbuf(L * QD), *lse = fbuf(L * NH), *out2 = fbuf(L * QD), *lse2 = fbuf(L * NH);
    float *dq = fbuf(L * QD), *dk = fbuf(L * KVD), *dv = fbuf(L * KVD);
    float *dq2 = fbuf(L * QD), *dk2 = fbuf(L * KVD), *dv2 = fbuf(L * KVD);
    lt_attn_segment whole = {.row0 = 0, .n = L, .begin = 0, .k = k, .v = v, .dk = dk, .dv = dv};
    lt_attention_forward(out, lse, q, &whole, 1, NH, NKV, HD, NULL);

    /* the slice alone: its queries are rows B..L-1 of the sample, at unit rows 0.. */
    lt_attn_segment tail = {.row0 = 0, .n = L - B, .begin = B, .k = k, .v = v, .dk = dk2, .dv = dv2};
    lt_attention_forward(out2, lse2, q + B * QD, &tail, 1, NH, NKV, HD, NULL);
    for (int i = 0; i < (L - B) * QD; i++) assert_float_equal(out2[i], out[B * QD + i], 1e-6);
    for (int i = 0; i < (L - B) * NH; i++) assert_float_equal(lse2[i], lse[B * NH + i], 1e-6);

    /* backward: whole vs the two slices in one call (aliasing dk/dv), in reverse order */
    lt_attention_backward(dq, dout, out, lse, q, &whole, 1, NH, NKV, HD, NULL);
    lt_attn_segment split[2] = {
        {.row0 = B, .n = L - B, .begin = B, .k = k, .v = v, .dk = dk2, .dv = dv2},
        {.row0 = 0, .n = B, .begin = 0, .k = k, .v = v, .dk = dk2, .dv = dv2},
    };
    lt_attention_backward(dq2, dout, out, lse, q, split, 2, NH, NKV, HD, NULL);
    for (int i = 0; i < L * QD; i++) assert_float_equal(dq2[i], dq[i], 1e-6);
    for (int i = 0; i < L * KVD; i++) assert_float_equal(dk2[i], dk[i], 1e-5);
    for (int i = 0; i < L * KVD; i++) assert_float_equal(dv2[i], dv[i], 1e-5);
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(out2), free(lse2);
    free(dq), free(dk), free(dv), free(dq2), free(dk2), free(dv2);
}


static double max_rel_diff(const float *a, const float *b, size_t n) {
    double worst = 0.0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)b[i]));
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    return worst / scale;
}

/* The same checks at a size that crosses the kernel's tiles (train/cpu/attention.c:
 * query blocks of 64 rows, key blocks of 256): sample of L = 700 tokens, slice [290, 700)
 * = 7 query blocks over up to 3 key blocks. q is scaled up so that the softmax is peaked and
 * the running max really moves between key blocks (the online rescaling is exercised). */
static void test_attention_tiles(void **state) {
    (void)state;
    enum { L = 700, B = 290 };
    lt_rng r;
    lt_rng_seed(&r, 11);
    float *q = rand_buf(&r, L * QD, -4, 4);
    float *k = rand_buf(&r, L * KVD, -1, 1), *v = rand_buf(&r, L * KVD, -1, 1);
    float *dout = rand_buf(&r, L * QD, -1, 1);
    float *out = fbuf(L * QD), *lse = fbuf(L * NH), *out2 = fbuf(L * QD), *lse2 = fbuf(L * NH);
    float *dq = fbuf(L * QD), *dk = fbuf(L * KVD), *dv = fbuf(L * KVD);
    float *dq2 = fbuf(L * QD), *dk2 = fbuf(L * KVD), *dv2 = fbuf(L * KVD);
    double *rout = malloc(sizeof(double) * L * QD), *rlse = malloc(sizeof(double) * L * NH);
    assert_non_null(rout), assert_non_null(rlse);

    /* forward of the slice with its context against the double reference */
    lt_attn_segment tail = {.row0 = 0, .n = L - B, .begin = B, .k = k, .v = v, .dk = dk2, .dv = dv2};
    lt_attention_forward(out2, lse2, q + B * QD, &tail, 1, NH, NKV, HD, NULL);
    attn_reference(rout, rlse, q + B * QD, &tail, 1);
    for (int i = 0; i < (L - B) * QD; i++) assert_true(fabs(out2[i] - rout[i]) <= 1e-5);
    for (int i = 0; i < (L - B) * NH; i++) assert_true(fabs(lse2[i] - rlse[i]) <= 1e-5 * fmax(1.0, fabs(rlse[i])));

    /* the whole sample's rows B.. equal the slice's */
    lt_attn_segment whole = {.row0 = 0, .n = L, .begin = 0, .k = k, .v = v, .dk = dk, .dv = dv};
    lt_attention_forward(out, lse, q, &whole, 1, NH, NKV, HD, NULL);
    assert_true(max_rel_diff(out2, out + B * QD, (size_t)(L - B) * QD) <= 1e-6);
    assert_true(max_rel_diff(lse2, lse + B * NH, (size_t)(L - B) * NH) <= 1e-6);

    /* backward: whole vs the two slices in one call (aliasing dk/dv) */
    lt_attention_backward(dq, dout, out, lse, q, &whole, 1, NH, NKV, HD, NULL);
    lt_attn_segment split[2] = {
        {.row0 = B, .n = L - B, .begin = B, .k = k, .v = v, .dk = dk2, .dv = dv2},
        {.row0 = 0, .n = B, .begin = 0, .k = k, .v = v, .dk = dk2, .dv = dv2},
    };
    lt_attention_backward(dq2, dout, out, lse, q, split, 2, NH, NKV, HD, NULL);
    assert_true(max_rel_diff(dq2, dq, (size_t)L * QD) <= 1e-5);
    assert_true(max_rel_diff(dk2, dk, (size_t)L * KVD) <= 1e-5);
    assert_true(max_rel_diff(dv2, dv, (size_t)L * KVD) <= 1e-5);

    /* a 2-thread pool gives the same bits */
    lt_pool *pool = NULL;
    assert_int_equal(lt_pool_create(&pool, 2, NULL), LT_OK);
    memset(dq2, 0, sizeof(float) * L * QD), memset(dk2, 0, sizeof(float) * L * KVD);
    memset(dv2, 0, sizeof(float) * L * KVD);
    lt_attention_forward(out2, lse2, q, &whole, 1, NH, NKV, HD, pool);
    assert_memory_equal(out2, out, sizeof(float) * L * QD);
    assert_memory_equal(lse2, lse, sizeof(float) * L * NH);
    whole.dk = dk2, whole.dv = dv2;
    lt_attention_backward(dq2, dout, out, lse, q, &whole, 1, NH, NKV, HD, pool);
    assert_memory_equal(dq2, dq, sizeof(float) * L * QD);
    assert_memory_equal(dk2, dk, sizeof(float) * L * KVD);
    assert_memory_equal(dv2, dv, sizeof(float) * L * KVD);
    lt_pool_destroy(pool);
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(out2), free(lse2);
    free(dq), free(dk), free(dv), free(dq2), free(dk2), free(dv2), free(rout), free(rlse);
}

/* lt_vexpf against exp in double on every 61st float of [-87, 88] (~16 M values) and at the
 * clamps; the bound is 2 x 2^-24 relative (the polynomial's ~1.4 ulp, measured exhaustively
 * when it was written). */
static void test_vexpf(void **state) {
    (void)state;
    double worst = 0.0;
    uint32_t lo, hi;
    float flo = -87.0f, fhi = 88.0f;
    memcpy(&lo, &flo, 4), memcpy(&hi, &fhi, 4);
    /* negative floats: bits from 0x80000000 up to lo; positive: 0 up to hi */
    for (uint64_t b = 0x80000000u; b <= lo; b += 61) {
        uint32_t u = (uint32_t)b;
        float x;
        memcpy(&x, &u, 4);
        worst = fmax(worst, fabs(lt_vexpf(x) - exp((double)x)) / exp((double)x));
    }
    for (uint64_t b = 0; b <= hi; b += 61) {
        uint32_t u = (uint32_t)b;
        float x;
        memcpy(&x, &u, 4);
        worst = fmax(worst, fabs(lt_vexpf(x) - exp((double)x)) / exp((double)x));
    }
    assert_true(worst <= 2.0 * 5.9604644775390625e-8);
    assert_true(lt_vexpf(-1000.0f) >= 0.0f && lt_vexpf(-1000.0f) <= 1e-37f);
    assert_true(isfinite(lt_vexpf(1000.0f)));
    assert_true(lt_vexpf(0.0f) == 1.0f);
}

/* ---------------------------------------------------------------- SwiGLU */

typedef struct {
    size_t n;
    float *gate, *up, *out;
    const float *w;
} swiglu_fd;

static double swiglu_L(void *arg) {
    swiglu_fd *c = arg;
    lt_swiglu_forward(c->out, c->gate, c->up, c->n, NULL);
    return weighted_sum(c->w, c->out, c->n);
}

static void test_swiglu_grad(void **state) {
    (void)state;
    enum { N = 7 * 16 };
    lt_rng r;
    lt_rng_seed(&r, 9);
    float *gate = rand_buf(&r, N, -4, 4), *up = rand_buf(&r, N, -1, 1), *w = rand_buf(&r, N, -1, 1);
    float *out = fbuf(N), *dg = fbuf(N), *du = fbuf(N);
    lt_swiglu_forward(out, gate, up, N, NULL);
    for (int i = 0; i < N; i++)
        assert_float_equal(out[i], (double)gate[i] / (1.0 + exp(-(double)gate[i])) * up[i], 1e-6);
    lt_swiglu_backward(dg, du, w, gate, up, N, NULL);
    swiglu_fd ctx = {N, gate, up, out, w};
    fd_input in[] = {{"gate", gate, dg, N}, {"up", up, du, N}};
    fd_check("swiglu", swiglu_L, &ctx, in, 2);
    free(gate), free(up), free(w), free(out), free(dg), free(du);
}

/* ---------------------------------------------------------------- cross-entropy */

typedef struct {
    int T, V;
    float *logits;
    const int32_t *targets;
    float scale;
} xent_fd;

static double xent_L(void *arg) {
    xent_fd *c = arg;
    return c->scale * lt_xent_forward_backward(NULL, c->logits, c->targets, c->T, c->V, c->scale, NULL);
}

static void test_xent(void **state) {
    (void)state;
    enum { T = 7, V = 16 };
    const int32_t targets[T] = {3, -1, 0, 15, 7, 7, -1};
    const float scale = 0.2f;
    lt_rng r;
    lt_rng_seed(&r, 10);
    float *logits = rand_buf(&r, T * V, -3, 3), *dl = fbuf(T * V);
    logits[4 * V + 2] = 100.0f; /* a large logit: exp would overflow without the max */
    double loss = lt_xent_forward_backward(dl, logits, targets, T, V, scale, NULL);
    double ref = 0.0;
    for (int t = 0; t < T; t++) {
        if (targets[t] < 0) {
            for (int v = 0; v < V; v++) assert_true(dl[t * V + v] == 0.0f);
            continue;
        }
        double m = -INFINITY, s = 0.0;
        for (int v = 0; v < V; v++) m = fmax(m, logits[t * V + v]);
        for (int v = 0; v < V; v++) s += exp((double)logits[t * V + v] - m);
        ref += -(logits[t * V + targets[t]] - m - log(s));
        for (int v = 0; v < V; v++) {
            double p = exp((double)logits[t * V + v] - m) / s;
            assert_float_equal(dl[t * V + v], scale * (p - (v == targets[t])), 1e-6);
        }
    }
    assert_true(isfinite(loss));
    assert_float_equal(loss, ref, 1e-5 * ref);
    /* a row that predicts nothing adds no loss, whatever its logits */
    float *l2 = copy_buf(logits, T * V);
    for (int v = 0; v < V; v++) l2[1 * V + v] = 1000.0f * (float)v;
    assert_true(lt_xent_forward_backward(NULL, l2, targets, T, V, scale, NULL) == loss);

    /* in place equals out of place */
    float *inplace = copy_buf(logits, T * V);
    assert_true(lt_xent_forward_backward(inplace, inplace, targets, T, V, scale, NULL) == loss);
    assert_memory_equal(inplace, dl, T * V * sizeof(float));

    /* dlogits is the gradient of scale * loss: finite differences */
    logits[4 * V + 2] = 1.0f;
    lt_xent_forward_backward(dl, logits, targets, T, V, scale, NULL);
    xent_fd ctx = {T, V, logits, targets, scale};
    fd_input in[] = {{"logits", logits, dl, T * V}};
    fd_check("xent", xent_L, &ctx, in, 1);
    free(logits), free(dl), free(l2), free(inplace);
}

/* ---------------------------------------------------------------- threads */

/* Every kernel that takes a pool: a 2-thread pool gives the NULL pool's bits. Shapes are
 * large enough for several tasks per kernel (rmsnorm dw blocks of 64 columns, SwiGLU
 * blocks of 4096, xent's 64 row blocks). */
static void test_threads_bit_identical(void **state) {
    (void)state;
    enum { T = 37, C = 150, N = 3 * 4096 + 17, V = 50 };
    lt_pool *pool = make_pool(2);
    lt_rng r;
    lt_rng_seed(&r, 11);
    float *x = rand_buf(&r, T * C, -1, 1), *g = rand_buf(&r, C, 0.5, 1.5), *dout = rand_buf(&r, T * C, -1, 1);
    float *o[2], *rs[2], *dx[2], *dg[2];
    for (int p = 0; p < 2; p++) {
        lt_pool *use = p ? pool : NULL;
        o[p] = fbuf(T * C), rs[p] = fbuf(T), dx[p] = fbuf(T * C), dg[p] = fbuf(C);
        lt_rmsnorm_forward(o[p], rs[p], x, g, T, C, 1e-5f, use);
        lt_rmsnorm_backward(dx[p], dg[p], dout, x, g, rs[p], T, C, use);
    }
    assert_memory_equal(o[0], o[1], T * C * sizeof(float));
    assert_memory_equal(rs[0], rs[1], T * sizeof(float));
    assert_memory_equal(dx[0], dx[1], T * C * sizeof(float));
    assert_memory_equal(dg[0], dg[1], C * sizeof(float));
    for (int p = 0; p < 2; p++) free(o[p]), free(rs[p]), free(dx[p]), free(dg[p]);

    /* RoPE: the T x C buffer as 5 heads of 30 */
    int32_t pos[T];
    for (int t = 0; t < T; t++) pos[t] = (t * 7) % 23;
    float *y0 = copy_buf(x, T * C), *y1 = copy_buf(x, T * C), freq30[15];
    plain_inv_freq(500000.0f, 30, freq30);
    lt_rope_forward(y0, pos, T, 5, 30, freq30, NULL);
    lt_rope_forward(y1, pos, T, 5, 30, freq30, pool);
    assert_memory_equal(y0, y1, T * C * sizeof(float));
    lt_rope_backward(y0, pos, T, 5, 30, freq30, NULL);
    lt_rope_backward(y1, pos, T, 5, 30, freq30, pool);
    assert_memory_equal(y0, y1, T * C * sizeof(float));
    free(y0), free(y1), free(x), free(g), free(dout);

    /* SwiGLU */
    float *ga = rand_buf(&r, N, -4, 4), *up = rand_buf(&r, N, -1, 1), *d = rand_buf(&r, N, -1, 1);
    float *so[2], *sdg[2], *sdu[2];
    for (int p = 0; p < 2; p++) {
        so[p] = fbuf(N), sdg[p] = fbuf(N), sdu[p] = fbuf(N);
        lt_swiglu_forward(so[p], ga, up, N, p ? pool : NULL);
        lt_swiglu_backward(sdg[p], sdu[p], d, ga, up, N, p ? pool : NULL);
    }
    assert_memory_equal(so[0], so[1], N * sizeof(float));
    assert_memory_equal(sdg[0], sdg[1], N * sizeof(float));
    assert_memory_equal(sdu[0], sdu[1], N * sizeof(float));
    for (int p = 0; p < 2; p++) free(so[p]), free(sdg[p]), free(sdu[p]);
    free(ga), free(up), free(d);

    /* cross-entropy, T = 137 rows over 64 blocks */
    enum { XT = 137 };
    int32_t tg[XT];
    for (int t = 0; t < XT; t++) tg[t] = t % 9 == 8 ? -1 : (int32_t)lt_rng_below(&r, V);
    float *lg = rand_buf(&r, XT * V, -5, 5), *xd[2];
    double loss[2];
    for (int p = 0; p < 2; p++) {
        xd[p] = fbuf(XT * V);
        loss[p] = lt_xent_forward_backward(xd[p], lg, tg, XT, V, 1.0f / XT, p ? pool : NULL);
    }
    assert_memory_equal(&loss[0], &loss[1], sizeof(double));
    assert_memory_equal(xd[0], xd[1], XT * V * sizeof(float));
    free(xd[0]), free(xd[1]), free(lg);

    /* attention: three samples, one split into two aliasing segments with KV context */
    enum { AT = 4 + 6 + 3 + 5 };
    int rows[3] = {9, 6, 5};
    float *k[3], *v[3];
    for (int s = 0; s < 3; s++)
        k[s] = rand_buf(&r, (size_t)rows[s] * KVD, -1, 1), v[s] = rand_buf(&r, (size_t)rows[s] * KVD, -1, 1);
    float *q = rand_buf(&r, AT * QD, -1, 1), *ado = rand_buf(&r, AT * QD, -1, 1);
    float *ao[2], *al[2], *adq[2], *adk[2][3], *adv[2][3];
    for (int p = 0; p < 2; p++) {
        for (int s = 0; s < 3; s++) {
            adk[p][s] = fbuf((size_t)rows[s] * KVD);
            adv[p][s] = fbuf((size_t)rows[s] * KVD);
        }
        lt_attn_segment segs[4] = {
            {.row0 = 0, .n = 4, .begin = 0, .k = k[0], .v = v[0], .dk = adk[p][0], .dv = adv[p][0]},
            {.row0 = 4, .n = 6, .begin = 0, .k = k[1], .v = v[1], .dk = adk[p][1], .dv = adv[p][1]},
            {.row0 = 10, .n = 3, .begin = 2, .k = k[2], .v = v[2], .dk = adk[p][2], .dv = adv[p][2]},
            {.row0 = 13, .n = 5, .begin = 4, .k = k[0], .v = v[0], .dk = adk[p][0], .dv = adv[p][0]},
        };
        ao[p] = fbuf(AT * QD), al[p] = fbuf(AT * NH), adq[p] = fbuf(AT * QD);
        lt_attention_forward(ao[p], al[p], q, segs, 4, NH, NKV, HD, p ? pool : NULL);
        lt_attention_backward(adq[p], ado, ao[p], al[p], q, segs, 4, NH, NKV, HD, p ? pool : NULL);
    }
    assert_memory_equal(ao[0], ao[1], AT * QD * sizeof(float));
    assert_memory_equal(al[0], al[1], AT * NH * sizeof(float));
    assert_memory_equal(adq[0], adq[1], AT * QD * sizeof(float));
    for (int s = 0; s < 3; s++) {
        assert_memory_equal(adk[0][s], adk[1][s], (size_t)rows[s] * KVD * sizeof(float));
        assert_memory_equal(adv[0][s], adv[1][s], (size_t)rows[s] * KVD * sizeof(float));
    }
    for (int p = 0; p < 2; p++) {
        free(ao[p]), free(al[p]), free(adq[p]);
        for (int s = 0; s < 3; s++) free(adk[p][s]), free(adv[p][s]);
    }
    for (int s = 0; s < 3; s++) free(k[s]), free(v[s]);
    free(q), free(ado);
    lt_pool_destroy(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embed),
        cmocka_unit_test(test_rmsnorm_grad),
        cmocka_unit_test(test_linear_forward_naive),
        cmocka_unit_test(test_linear_grad),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_rope_llama3_frequencies),
        cmocka_unit_test(test_bias),
        cmocka_unit_test(test_attention_grad_context),
        cmocka_unit_test(test_attention_grad_aliasing),
        cmocka_unit_test(test_attention_context_equals_whole),
        cmocka_unit_test(test_attention_tiles),
        cmocka_unit_test(test_vexpf),
        cmocka_unit_test(test_swiglu_grad),
        cmocka_unit_test(test_xent),
        cmocka_unit_test(test_threads_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
