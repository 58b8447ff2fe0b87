/*
 * tests/kernels/test_cuda_kernels.c — the CUDA bf16 kernels of kernels/cuda.h (all but
 * attention, which tests/kernels/test_cuda_attention.c covers) against the CPU fp32
 * reference of train/cpu/kernels.h and train/model/optim.c, cmocka.
 *
 * Inputs are drawn in fp32 and rounded to bf16 on the host (lt_bf16_from_f32), so the CPU
 * and the GPU compute from the same numbers; gradient buffers start nonzero, to check
 * that the backward functions add. Both the 8-wide vector paths (widths % 8 == 0, 16-byte
 * aligned) and the scalar fallbacks (odd widths, a pointer one element off) run.
 *
 * Tolerances. A bf16 rounding is <= 2^-9 relative; "bf16 out" below means
 *   |gpu - cpu| <= 2^-8 |cpu| + A max|cpu|   (one rounding, twice over, plus A for the
 * fp32 summation order), per element:
 *   kernel                 output             bound
 *   f32<->bf16, add        bf16               bit-exact (same fp32 op, same rounding)
 *   embed fwd              bf16 rows          bit-exact (a copy)
 *   embed bwd              dwte fp32          bit-exact for runs of <= 64 equal ids (same adds in
 *                                             the same t order); ids < 0 (another TP rank's
 *                                             tokens): zero rows, no gradient; longer runs
 *                                             (pieces of 64 summed apart): 1e-5 of max|cpu|, and
 *                                             the same bits on a second run
 *   linear fwd / gemm      bf16 out           bf16 out, A = 2e-3 (fp32 sums of exact products, K <= 96)
 *   linear bwd dx          bf16 (+=)          bf16 out, A = 2e-3
 *   linear bwd dw          fp32 (+=)          |d| <= 1e-4 max|cpu| (fp32 accumulation order only)
 *   rmsnorm fwd out        bf16               bf16 out, A = 1e-3; rstd fp32: 1e-4 relative
 *   rmsnorm bwd dx         bf16 (+=)          bf16 out, A = 4e-3 (r g w - k x cancels)
 *   rmsnorm bwd dw         fp32 (+=)          |d| <= 1e-4 max|cpu|
 *   rope fwd / bwd         bf16               bf16 out, A = 1e-3 (same angles; CUDA cosf/sinf <= 2 ulp),
 *                                             with plain and Llama 3.1 (llama3-scaled) frequencies
 *   bias fwd               bf16               bf16 out, A = 1e-3
 *   bias bwd db            fp32 (+=)          |d| <= 1e-5 max|cpu| (summation order only), and the
 *                                             same bits on a second run (deterministic)
 *   swiglu fwd / bwd       bf16               bf16 out, A = 1e-3 (CUDA expf <= 2 ulp)
 *   xent row loss          fp32               1e-4 relative (fp32 online sums vs the CPU's double)
 *   xent dlogits           bf16               bf16 out, A = 1e-3
 *   xent / sum_rows total  double             1e-4 relative
 *   xent, target >= V      loss, dlogits row  NaN (the other rows as above)
 *   LM head, rows ld apart the logits rows V rounded up to 64 apart (V = 203, 50257), the
 *                          padding NaN: linear fwd / xent / xent_tp / linear bwd as above on
 *                          the dense rows, the padding never written (still NaN) nor read
 *                          (no NaN reaches a loss or gradient)
 *   xent_tp (a TP group of 3 vocabulary slices in one process, the statistics combined on
 *            the host as the group's all-reduces would; a target in every slice):
 *            rowmax bit-exact (a max of the same values); sums vs lt_xent_tp_sums: the exp
 *            sums 1e-5 relative (fp32 vs the CPU's double), the target logits bit-exact;
 *            the row losses (the same bits on every rank) and their total against
 *            lt_xent_forward_backward on the whole rows 1e-4 relative, each rank's total
 *            against lt_xent_tp_finish 1e-4 relative; each slice's dlogits against those
 *            columns of the whole dlogits and against lt_xent_tp_finish's bf16 out,
 *            A = 1e-3; a loss-only call leaves the logits and gives the same row losses
 *   sum_squares            double             1e-5 relative (fp32 per block), and the same
 *                                             bits on a second run
 *   scale                  fp32               bit-exact
 *   adamw master, m, v     fp32               bit-exact vs lt_adamw_update_range (no fma
 *                                             contraction on either side); bf16 copy ==
 *                                             lt_bf16_from_f32(master)
 * A wrong index, stride, sign or missing "+=" is off by O(max|cpu|), far outside these.
 *
 * Without a CUDA build or a device, every GPU test skips with the reason (printed as
 * "# skip: ..." and cmocka's SKIP). The host bf16 conversions and the "no device gives a
 * reason" test run in every build.
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

#include "kernels/cuda.h"        /* the kernels under test, lt_bf16 conversions */
#include "lib/rng.h"             /* lt_rng: seeded test data */
#include "train/model/backend.h" /* lt_backend_cpu_bf16: the host reference of sum_blocks */
#include "train/cpu/kernels.h"   /* the CPU reference kernels */
#include "train/model/model.h"   /* lt_llama, lt_tensor_info (AdamW's decay per tensor) */
#include "train/model/optim.h"   /* lt_adamw_update_range, lt_grad_norm */

/* ---------------------------------------------------------------- context */

static lt_cuda *g_cuda;
static char g_why[LT_ERROR_WHAT_MAX + 64];

static int open_context(void **state) {
    (void)state;
    lt_error err;
    lt_error_clear(&err);
    if (lt_cuda_open(&g_cuda, 0, &err) != LT_OK) {
        g_cuda = NULL;
        snprintf(g_why, sizeof g_why, "%s", err.what);
    }
    return 0;
}

static int close_context(void **state) {
    (void)state;
    lt_cuda_close(g_cuda);
    g_cuda = NULL;
    return 0;
}

static void need_gpu(void) {
    if (g_cuda == NULL) {
        printf("# skip: %s\n", g_why);
        skip();
    }
}

/* fail with the error's text when a call did not succeed */
#define OK(call)                                                                   \
    do {                                                                           \
        lt_error e_;                                                               \
        lt_error_clear(&e_);                                                       \
        lt_error *err = &e_;                                                       \
        if ((call) != LT_OK) fail_msg("%s: %s (%s)", #call, e_.what, e_.where);    \
        (void)err;                                                                 \
    } while (0)

/* ---------------------------------------------------------------- host/device helpers */

static float *fbuf(size_t n) {
    float *p = calloc(n > 0 ? n : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

/* n fp32 values in [lo, hi), rounded to bf16 values (so both sides see the same numbers) */
static float *rand_bf16_values(lt_rng *r, size_t n, double lo, double hi) {
    float *p = fbuf(n);
    for (size_t i = 0; i < n; i++)
        p[i] = lt_bf16_to_f32(lt_bf16_from_f32((float)(lo + (hi - lo) * lt_rng_double(r))));
    return p;
}

static void *dalloc(size_t bytes) {
    void *p = NULL;
    lt_error err;
    if (lt_cuda_malloc(g_cuda, &p, bytes > 0 ? bytes : 16, &err) != LT_OK) fail_msg("%s", err.what);
    return p;
}

/* A bf16 device copy of x[0..n) (the values must already be bf16 values). `pad` extra
 * leading elements make the returned pointer 2 bytes off the allocation's alignment (the
 * scalar fallbacks); *base receives the pointer to free. */
static lt_bf16 *up_bf16_at(const float *x, size_t n, int pad, void **base) {
    lt_bf16 *h = calloc(n + (size_t)pad + 1, sizeof *h);
    assert_non_null(h);
    for (size_t i = 0; i < n; i++) h[i + (size_t)pad] = lt_bf16_from_f32(x[i]);
    lt_bf16 *d = dalloc((n + (size_t)pad) * sizeof *d);
    OK(lt_cuda_copy_h2d(g_cuda, d, h, (n + (size_t)pad) * sizeof *h, err));
    free(h);
    *base = d;
    return d + pad;
}

static lt_bf16 *up_bf16(const float *x, size_t n) {
    void *base;
    return up_bf16_at(x, n, 0, &base);
}

static float *down_bf16(const lt_bf16 *d, size_t n) {
    lt_bf16 *h = calloc(n + 1, sizeof *h);
    assert_non_null(h);
    OK(lt_cuda_copy_d2h(g_cuda, h, d, n * sizeof *h, err));
    float *x = fbuf(n);
    for (size_t i = 0; i < n; i++) x[i] = lt_bf16_to_f32(h[i]);
    free(h);
    return x;
}

static float *up_f32(const float *x, size_t n) {
    float *d = dalloc(n * sizeof *d);
    OK(lt_cuda_copy_h2d(g_cuda, d, x, n * sizeof *x, err));
    return d;
}

static float *down_f32(const float *d, size_t n) {
    float *x = fbuf(n);
    OK(lt_cuda_copy_d2h(g_cuda, x, d, n * sizeof *x, err));
    return x;
}

static int32_t *up_i32(const int32_t *x, size_t n) {
    int32_t *d = dalloc(n * sizeof *d);
    OK(lt_cuda_copy_h2d(g_cuda, d, x, n * sizeof *x, err));
    return d;
}

static void dfree(void *p) { lt_cuda_free(g_cuda, p); }

static double max_abs(const float *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}

/* |gpu - cpu| <= rel |cpu| + abs_of_max max|cpu| for every element; names the first miss. */
static void expect_close(const char *what, const float *gpu, const float *cpu, size_t n, double rel,
                         double abs_of_max) {
    double bound0 = abs_of_max * max_abs(cpu, n);
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)gpu[i] - (double)cpu[i]);
        if (!(d <= rel * fabs((double)cpu[i]) + bound0))
            fail_msg("%s[%zu]: gpu %.9g cpu %.9g (|d| = %.3g > %.3g |cpu| + %.3g)", what, i, (double)gpu[i],
                     (double)cpu[i], d, rel, bound0);
    }
}

static void expect_bits(const char *what, const float *gpu, const float *cpu, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&gpu[i], &cpu[i], sizeof(float)) != 0)
            fail_msg("%s[%zu]: gpu %.9g cpu %.9g differ in bits", what, i, (double)gpu[i], (double)cpu[i]);
}

#define BF16_REL (1.0 / 256.0) /* 2^-8: one bf16 rounding (2^-9) twice over */

/* ---------------------------------------------------------------- host bf16 (every build) */

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_host_bf16_conversions(void **state) {
    (void)state;
    /* fp32 bits -> expected bf16 bits, derived by hand: keep the high half, round the low
     * half 0x8000 (a tie) to the even high half */
    static const struct { uint32_t f; uint16_t b; const char *why; } cases[] = {
        {0x3f800000u, 0x3f80, "1.0 exact"},
        {0xbf800000u, 0xbf80, "-1.0 exact"},
        {0x3f807fffu, 0x3f80, "below half: down"},
        {0x3f808000u, 0x3f80, "tie, 0x3f80 even: down"},
        {0x3f808001u, 0x3f81, "above half: up"},
        {0x3f818000u, 0x3f82, "tie, 0x3f81 odd: up to even"},
        {0xbf818000u, 0xbf82, "negative tie to even"},
        {0x3fffffffu, 0x4000, "carry into the exponent"},
        {0x7f7f7fffu, 0x7f7f, "largest below the last half step"},
        {0x7f7fffffu, 0x7f80, "FLT_MAX rounds to +inf"},
        {0x7f800000u, 0x7f80, "+inf"},
        {0xff800000u, 0xff80, "-inf"},
        {0x7fc00000u, 0x7fc0, "quiet NaN"},
        {0x7f800001u, 0x7fc0, "signalling NaN with a low payload stays NaN (not inf)"},
        {0xffc00001u, 0xffc0, "negative NaN keeps its sign"},
        {0x7fffffffu, 0x7fff, "NaN with all payload bits: no carry into the sign"},
        {0x00000000u, 0x0000, "+0"},
        {0x80000000u, 0x8000, "-0"},
        {0x00000001u, 0x0000, "smallest subnormal rounds to 0"},
        {0x80000001u, 0x8000, "to -0"},
        {0x00008000u, 0x0000, "subnormal tie to even 0"},
        {0x00018000u, 0x0002, "subnormal tie to even 2"},
        {0x00010000u, 0x0001, "smallest bf16 subnormal exact"},
        {0x007fffffu, 0x0080, "largest subnormal rounds up to the smallest normal"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lt_bf16 got = lt_bf16_from_f32(u2f(cases[i].f));
        if (got != cases[i].b)
            fail_msg("lt_bf16_from_f32(0x%08x) = 0x%04x, want 0x%04x (%s)", cases[i].f, got, cases[i].b, cases[i].why);
    }
    /* bf16 -> fp32 is the bits shifted up */
    assert_int_equal(f2u(lt_bf16_to_f32(0x3f80)), 0x3f800000u);
    assert_int_equal(f2u(lt_bf16_to_f32(0x0001)), 0x00010000u);
    assert_int_equal(f2u(lt_bf16_to_f32(0xff80)), 0xff800000u);
    assert_true(isnan(lt_bf16_to_f32(0x7fc0)));
    /* every bf16 value survives the round trip; NaNs stay NaN */
    for (uint32_t b = 0; b <= 0xffffu; b++) {
        float f = lt_bf16_to_f32((lt_bf16)b);
        lt_bf16 back = lt_bf16_from_f32(f);
        if (isnan(f)) {
            if (!isnan(lt_bf16_to_f32(back))) fail_msg("NaN 0x%04x came back as 0x%04x", b, back);
        } else if (back != (lt_bf16)b) {
            fail_msg("0x%04x came back as 0x%04x", b, back);
        }
    }
}

static void test_open_without_device_reports_reason(void **state) {
    (void)state;
    lt_cuda *c = NULL;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_cuda_open(&c, 0, &err);
    if (st != LT_OK) {
        assert_null(c);
        assert_int_equal(st, LT_ERR_CONFIG);
        assert_true(err.what[0] != '\0'); /* "built without CUDA" or "no CUDA device: ..." */
        printf("# lt_cuda_open: %s\n", err.what);
    } else {
        assert_non_null(c);
        assert_int_equal(lt_cuda_device(c), 0);
        assert_non_null(lt_cuda_stream(c));
        lt_cuda_close(c);
        /* a device that does not exist is refused by name */
        lt_error_clear(&err);
        assert_int_equal(lt_cuda_open(&c, 1 << 20, &err), LT_ERR_CONFIG);
        assert_null(c);
    }
}

/* ---------------------------------------------------------------- conversions, add */

static void test_conversions_and_add(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 11);
    const size_t n = 1003; /* odd: the scalar add path */
    float *x = fbuf(n);
    for (size_t i = 0; i < n; i++) x[i] = (float)((lt_rng_double(&r) - 0.5) * 1e3);
    float *dx = up_f32(x, n);
    lt_bf16 *db = dalloc(n * sizeof *db);
    OK(lt_cuda_f32_to_bf16(g_cuda, db, dx, n, err));
    float *back = down_bf16(db, n), *want = fbuf(n);
    for (size_t i = 0; i < n; i++) want[i] = lt_bf16_to_f32(lt_bf16_from_f32(x[i]));
    expect_bits("f32_to_bf16", back, want, n);
    float *df = dalloc(n * sizeof *df);
    OK(lt_cuda_bf16_to_f32(g_cuda, df, db, n, err));
    float *f = down_f32(df, n);
    expect_bits("bf16_to_f32", f, want, n);
    /* add and accumulate, odd n (scalar) and n % 8 == 0 (vector) */
    for (int pass = 0; pass < 2; pass++) {
        size_t m = pass == 0 ? n : 1000;
        float *a = rand_bf16_values(&r, m, -4, 4), *b = rand_bf16_values(&r, m, -4, 4), *sum = fbuf(m);
        for (size_t i = 0; i < m; i++) sum[i] = lt_bf16_to_f32(lt_bf16_from_f32(a[i] + b[i]));
        lt_bf16 *da = up_bf16(a, m), *dbb = up_bf16(b, m), *dd = dalloc(m * sizeof *dd);
        OK(lt_cuda_add(g_cuda, dd, da, dbb, m, err));
        float *got = down_bf16(dd, m);
        expect_bits("add", got, sum, m);
        OK(lt_cuda_accumulate(g_cuda, da, dbb, m, err)); /* a += b */
        float *got2 = down_bf16(da, m);
        expect_bits("accumulate", got2, sum, m);
        free(a), free(b), free(sum), free(got), free(got2);
        dfree(da), dfree(dbb), dfree(dd);
    }
    dfree(dx), dfree(db), dfree(df);
    free(x), free(back), free(want), free(f);
}

/* The context-parallel dK/dV sums: G member blocks of n elements, stride apart, summed in
 * fp32 in member order: bit for bit the cpu-bf16 backend's (train/model/backend_cpu.c), whose
 * sums train/exec/ring.c takes on the CPU. G = 1 is a copy. */
static void test_sum_blocks(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 12);
    const lt_backend *host = lt_backend_cpu_bf16();
    const int Gs[] = {1, 2, 3, 5};
    for (size_t gi = 0; gi < sizeof Gs / sizeof Gs[0]; gi++) {
        int G = Gs[gi];
        size_t n = 517, stride = 600; /* a gap between the blocks stays unread */
        float *a = rand_bf16_values(&r, (size_t)G * stride, -8, 8);
        lt_bf16 *h = malloc((size_t)G * stride * sizeof *h), *hw = malloc(n * sizeof *hw);
        assert_non_null(h), assert_non_null(hw);
        for (size_t i = 0; i < (size_t)G * stride; i++) h[i] = lt_bf16_from_f32(a[i]);
        host->sum_blocks(host, hw, h, G, stride, n);
        float *want = fbuf(n);
        for (size_t i = 0; i < n; i++) want[i] = lt_bf16_to_f32(hw[i]);
        lt_bf16 *ds = up_bf16(a, (size_t)G * stride), *dd = dalloc(n * sizeof *dd);
        OK(lt_cuda_sum_blocks(g_cuda, dd, ds, G, stride, n, err));
        float *got = down_bf16(dd, n);
        expect_bits("sum_blocks", got, want, n);
        free(a), free(h), free(hw), free(want), free(got);
        dfree(ds), dfree(dd);
    }
}

/* ---------------------------------------------------------------- GEMM */

static void test_linear_matches_cpu_and_cache(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 21);
    const int shapes[][3] = {{64, 96, 48}, {37, 40, 24}, {5, 8, 3}}; /* T, IN, OUT; the last two not multiples of 8 */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int T = shapes[s][0], IN = shapes[s][1], OUT = shapes[s][2];
        size_t nx = (size_t)T * IN, nw = (size_t)OUT * IN, no = (size_t)T * OUT;
        float *x = rand_bf16_values(&r, nx, -1, 1), *w = rand_bf16_values(&r, nw, -1, 1);
        float *dout = rand_bf16_values(&r, no, -1, 1);
        float *dx0 = rand_bf16_values(&r, nx, -1, 1), *dw0 = rand_bf16_values(&r, nw, -1, 1);
        lt_bf16 *d_x = up_bf16(x, nx), *d_w = up_bf16(w, nw), *d_out = dalloc(no * 2), *d_dout = up_bf16(dout, no);
        lt_bf16 *d_dx = up_bf16(dx0, nx);
        float *d_dw = up_f32(dw0, nw);
        int before = lt_cuda_gemm_cache_size(g_cuda);
        OK(lt_cuda_linear_forward(g_cuda, d_out, d_x, d_w, T, IN, OUT, OUT, err));
        int after_one = lt_cuda_gemm_cache_size(g_cuda);
        OK(lt_cuda_linear_forward(g_cuda, d_out, d_x, d_w, T, IN, OUT, OUT, err));
        assert_int_equal(lt_cuda_gemm_cache_size(g_cuda), after_one); /* a repeated shape costs no new plan */
        assert_true(after_one <= before + 1);
        float *out = down_bf16(d_out, no), *ref = fbuf(no);
        lt_linear_forward(ref, x, w, T, IN, OUT);
        expect_close("linear_forward", out, ref, no, BF16_REL, 2e-3);
        /* the plain GEMM is the same product */
        lt_bf16 *d_c = dalloc(no * 2);
        OK(lt_cuda_gemm_bf16(g_cuda, d_c, d_x, d_w, T, OUT, IN, err));
        float *cg = down_bf16(d_c, no);
        expect_close("gemm_bf16", cg, ref, no, BF16_REL, 2e-3);
        /* backward adds into dx (bf16) and dw (fp32) */
        OK(lt_cuda_linear_backward(g_cuda, d_dx, d_dw, d_dout, d_x, d_w, T, IN, OUT, OUT, err));
        int plans = lt_cuda_gemm_cache_size(g_cuda);
        float *rdx = fbuf(nx), *rdw = fbuf(nw);
        memcpy(rdx, dx0, nx * sizeof *rdx);
        memcpy(rdw, dw0, nw * sizeof *rdw);
        lt_linear_backward(rdx, rdw, dout, x, w, T, IN, OUT);
        float *gdx = down_bf16(d_dx, nx), *gdw = down_f32(d_dw, nw);
        expect_close("linear_backward dx", gdx, rdx, nx, BF16_REL, 2e-3);
        expect_close("linear_backward dw", gdw, rdw, nw, 0.0, 1e-4);
        /* dx only, dw only: no new plans (same keys), and NULL means untouched */
        OK(lt_cuda_linear_backward(g_cuda, NULL, d_dw, d_dout, d_x, d_w, T, IN, OUT, OUT, err));
        OK(lt_cuda_linear_backward(g_cuda, d_dx, NULL, d_dout, d_x, d_w, T, IN, OUT, OUT, err));
        assert_int_equal(lt_cuda_gemm_cache_size(g_cuda), plans);
        free(x), free(w), free(dout), free(dx0), free(dw0), free(out), free(ref), free(cg), free(rdx), free(rdw);
        free(gdx), free(gdw);
        dfree(d_x), dfree(d_w), dfree(d_out), dfree(d_dout), dfree(d_dx), dfree(d_dw), dfree(d_c);
    }
}

/* The algorithm promised to cuBLASLt depends on the pointers' alignment (part of the
 * cache key): the same shape with a 2-byte-aligned input gets its own plan and is still
 * right, and the aligned call after it reuses the first plan. */
static void test_linear_alignment_is_part_of_the_key(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 23);
    const int T = 16, IN = 32, OUT = 24;
    size_t nx = (size_t)T * IN, nw = (size_t)OUT * IN, no = (size_t)T * OUT;
    float *x = rand_bf16_values(&r, nx, -1, 1), *w = rand_bf16_values(&r, nw, -1, 1), *ref = fbuf(no);
    lt_linear_forward(ref, x, w, T, IN, OUT);
    void *base_x, *base_o;
    lt_bf16 *d_x = up_bf16(x, nx), *d_w = up_bf16(w, nw), *d_out = dalloc(no * 2);
    lt_bf16 *d_x1 = up_bf16_at(x, nx, 1, &base_x), *d_out1 = up_bf16_at(ref, no, 1, &base_o);
    OK(lt_cuda_linear_forward(g_cuda, d_out, d_x, d_w, T, IN, OUT, OUT, err));
    int plans = lt_cuda_gemm_cache_size(g_cuda);
    OK(lt_cuda_linear_forward(g_cuda, d_out1, d_x1, d_w, T, IN, OUT, OUT, err));
    assert_int_equal(lt_cuda_gemm_cache_size(g_cuda), plans + 1);
    OK(lt_cuda_linear_forward(g_cuda, d_out, d_x, d_w, T, IN, OUT, OUT, err));
    assert_int_equal(lt_cuda_gemm_cache_size(g_cuda), plans + 1);
    float *got = down_bf16(d_out, no), *got1 = down_bf16(d_out1, no);
    expect_close("linear_forward (aligned)", got, ref, no, BF16_REL, 2e-3);
    expect_close("linear_forward (2-byte aligned)", got1, ref, no, BF16_REL, 2e-3);
    free(x), free(w), free(ref), free(got), free(got1);
    dfree(d_x), dfree(d_w), dfree(d_out), dfree(base_x), dfree(base_o);
}

/* ---------------------------------------------------------------- embedding */

static void test_embed(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 31);
    const int V = 50, T = 300;
    const int widths[] = {64, 36}; /* vector and scalar paths */
    for (int k = 0; k < 2; k++) {
        int C = widths[k];
        int32_t *ids = malloc((size_t)T * sizeof *ids);
        assert_non_null(ids);
        for (int t = 0; t < T; t++) ids[t] = (int32_t)(lt_rng_double(&r) * 10); /* ids repeat: runs */
        ids[T - 1] = V - 1;
        for (int t = 0; t < T; t += 7) ids[t] = -1; /* another TP rank's tokens: zero rows, no gradient */
        float *wte = rand_bf16_values(&r, (size_t)V * C, -1, 1), *dout = rand_bf16_values(&r, (size_t)T * C, -1, 1);
        /* the sums must round for the order of the adds to show: full fp32 mantissas in
         * dwte, dout scaled by powers of two from 2^-8 to 2^8 (still bf16 values) */
        float *dwte0 = fbuf((size_t)V * C);
        for (size_t i = 0; i < (size_t)V * C; i++) dwte0[i] = (float)(2.0 * lt_rng_double(&r) - 1.0);
        for (size_t i = 0; i < (size_t)T * C; i++) dout[i] = ldexpf(dout[i], (int)(lt_rng_double(&r) * 17) - 8);
        int32_t *d_ids = up_i32(ids, (size_t)T);
        lt_bf16 *d_wte = up_bf16(wte, (size_t)V * C), *d_out = dalloc((size_t)T * C * 2),
                *d_dout = up_bf16(dout, (size_t)T * C);
        float *d_dwte = up_f32(dwte0, (size_t)V * C);
        OK(lt_cuda_embed_forward(g_cuda, d_out, d_ids, T, d_wte, C, err));
        float *out = down_bf16(d_out, (size_t)T * C), *ref = fbuf((size_t)T * C);
        lt_embed_forward(ref, ids, T, wte, C);
        expect_bits("embed_forward", out, ref, (size_t)T * C);
        OK(lt_cuda_embed_backward(g_cuda, d_dwte, d_dout, d_ids, T, C, err));
        float *g = down_f32(d_dwte, (size_t)V * C), *rg = fbuf((size_t)V * C);
        memcpy(rg, dwte0, (size_t)V * C * sizeof *rg);
        lt_embed_backward(rg, dout, ids, T, C);
        expect_bits("embed_backward", g, rg, (size_t)V * C);
        free(ids), free(wte), free(dout), free(dwte0), free(out), free(ref), free(g), free(rg);
        dfree(d_ids), dfree(d_wte), dfree(d_out), dfree(d_dout), dfree(d_dwte);
    }
}

/* Long runs of one id (kernels/embed.cu: runs cut into pieces of 64 sorted tokens, the
 * later pieces summed into partial rows added in piece order): a unit of one repeated id
 * (300 tokens: 5 pieces), and mixes with runs of 64 tokens (one piece), 65 (two: the second
 * of one token) and over 100, short runs and another TP rank's tokens (-1), over 64 columns
 * and over 600 (two column chunks of 512, the second partial). Every row against the CPU
 * within 1e-5 of the largest |dwte| (the grouping of a long run's fp32 adds), the rows of
 * runs of <= 64 tokens bit-exact, and a second run from the same start the same bits. */
static void test_embed_backward_long_runs(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 37);
    enum { V = 20 };
    const struct {
        int T, C, mix;
    } cases[] = {{300, 64, 0}, {330, 64, 1}, {260, 600, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int T = cases[k].T, C = cases[k].C;
        size_t nd = (size_t)T * C, nw = (size_t)V * C;
        int32_t *ids = malloc((size_t)T * sizeof *ids);
        assert_non_null(ids);
        if (!cases[k].mix) {
            for (int t = 0; t < T; t++) ids[t] = 7;
        } else { /* 20 scattered tokens, 64 x id 5, 65 x id 6, the rest (> 100) id 3; shuffled */
            int t = 0;
            for (; t < 20; t++) {
                int v = (int)(lt_rng_double(&r) * V);
                ids[t] = t % 6 == 0 ? -1 : (v == 3 || v == 5 || v == 6 ? 0 : v);
            }
            for (int i = 0; i < 64; i++) ids[t++] = 5;
            for (int i = 0; i < 65; i++) ids[t++] = 6;
            while (t < T) ids[t++] = 3;
            for (int i = T - 1; i > 0; i--) {
                int j = (int)(lt_rng_double(&r) * (i + 1));
                int32_t x = ids[i];
                ids[i] = ids[j], ids[j] = x;
            }
        }
        float *dout = rand_bf16_values(&r, nd, -1, 1), *dwte0 = fbuf(nw);
        for (size_t i = 0; i < nw; i++) dwte0[i] = (float)(2.0 * lt_rng_double(&r) - 1.0);
        int32_t *d_ids = up_i32(ids, (size_t)T);
        lt_bf16 *d_dout = up_bf16(dout, nd);
        float *d_dwte = up_f32(dwte0, nw);
        OK(lt_cuda_embed_backward(g_cuda, d_dwte, d_dout, d_ids, T, C, err));
        float *g = down_f32(d_dwte, nw);
        OK(lt_cuda_copy_h2d(g_cuda, d_dwte, dwte0, nw * sizeof *dwte0, err));
        OK(lt_cuda_embed_backward(g_cuda, d_dwte, d_dout, d_ids, T, C, err));
        float *g2 = down_f32(d_dwte, nw), *rg = fbuf(nw);
        expect_bits("embed_backward, a second run", g2, g, nw);
        memcpy(rg, dwte0, nw * sizeof *rg);
        lt_embed_backward(rg, dout, ids, T, C);
        expect_close("embed_backward (long runs)", g, rg, nw, 0.0, 1e-5);
        int count[V] = {0}, longest = 0;
        for (int t = 0; t < T; t++)
            if (ids[t] >= 0) count[ids[t]]++;
        for (int v = 0; v < V; v++) {
            if (count[v] > longest) longest = count[v];
            if (count[v] <= 64) expect_bits("embed_backward (a run of <= 64 tokens)", g + (size_t)v * C,
                                            rg + (size_t)v * C, (size_t)C);
        }
        assert_true(longest > 100);
        free(ids), free(dout), free(dwte0), free(g), free(g2), free(rg);
        dfree(d_ids), dfree(d_dout), dfree(d_dwte);
    }
}

/* ---------------------------------------------------------------- RMSNorm */

static void test_rmsnorm(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 41);
    const int T = 77;
    const int widths[] = {256, 36};
    for (int k = 0; k < 2; k++) {
        int C = widths[k];
        size_t n = (size_t)T * C;
        float *x = rand_bf16_values(&r, n, -2, 2), *w = rand_bf16_values(&r, (size_t)C, 0.5, 1.5);
        float *dout = rand_bf16_values(&r, n, -1, 1), *dx0 = rand_bf16_values(&r, n, -0.5, 0.5);
        float *dw0 = rand_bf16_values(&r, (size_t)C, -1, 1);
        lt_bf16 *d_x = up_bf16(x, n), *d_w = up_bf16(w, (size_t)C), *d_out = dalloc(n * 2);
        lt_bf16 *d_dout = up_bf16(dout, n), *d_dx = up_bf16(dx0, n);
        float *d_rstd = dalloc((size_t)T * 4), *d_dw = up_f32(dw0, (size_t)C);
        OK(lt_cuda_rmsnorm_forward(g_cuda, d_out, d_rstd, d_x, d_w, T, C, 1e-5f, err));
        float *out = down_bf16(d_out, n), *rstd = down_f32(d_rstd, (size_t)T);
        float *ref = fbuf(n), *rrstd = fbuf((size_t)T);
        lt_rmsnorm_forward(ref, rrstd, x, w, T, C, 1e-5f, NULL);
        expect_close("rmsnorm_forward out", out, ref, n, BF16_REL, 1e-3);
        expect_close("rmsnorm_forward rstd", rstd, rrstd, (size_t)T, 1e-4, 0.0);
        /* the backward from the CPU's rstd, so only the backward is measured */
        OK(lt_cuda_copy_h2d(g_cuda, d_rstd, rrstd, (size_t)T * 4, err));
        OK(lt_cuda_rmsnorm_backward(g_cuda, d_dx, d_dw, d_dout, d_x, d_w, d_rstd, T, C, err));
        float *gdx = down_bf16(d_dx, n), *gdw = down_f32(d_dw, (size_t)C);
        float *rdx = fbuf(n), *rdw = fbuf((size_t)C);
        memcpy(rdx, dx0, n * 4);
        memcpy(rdw, dw0, (size_t)C * 4);
        lt_rmsnorm_backward(rdx, rdw, dout, x, w, rrstd, T, C, NULL);
        expect_close("rmsnorm_backward dx", gdx, rdx, n, BF16_REL, 4e-3);
        expect_close("rmsnorm_backward dw", gdw, rdw, (size_t)C, 0.0, 1e-4);
        /* dw is deterministic: a second identical call adds the same bits again */
        float *d_dw2 = up_f32(dw0, (size_t)C);
        OK(lt_cuda_rmsnorm_backward(g_cuda, NULL, d_dw2, d_dout, d_x, d_w, d_rstd, T, C, err));
        float *gdw2 = down_f32(d_dw2, (size_t)C);
        expect_bits("rmsnorm_backward dw (second run)", gdw2, gdw, (size_t)C);
        free(x), free(w), free(dout), free(dx0), free(dw0), free(out), free(rstd), free(ref), free(rrstd);
        free(gdx), free(gdw), free(rdx), free(rdw), free(gdw2);
        dfree(d_x), dfree(d_w), dfree(d_out), dfree(d_dout), dfree(d_dx), dfree(d_rstd), dfree(d_dw), dfree(d_dw2);
    }
}

/* ---------------------------------------------------------------- bias (Qwen2's Q/K/V) */

static void test_bias(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 53);
    /* n not a multiple of the 32-column blocks; T over several 64-row chunks */
    const int T = 300, n = 72;
    size_t tn = (size_t)T * n;
    float *y = rand_bf16_values(&r, tn, -1, 1), *b = rand_bf16_values(&r, (size_t)n, -2, 2);
    float *dy = rand_bf16_values(&r, tn, -1, 1), *db0 = rand_bf16_values(&r, (size_t)n, -1, 1);
    lt_bf16 *d_y = up_bf16(y, tn), *d_b = up_bf16(b, (size_t)n), *d_dy = up_bf16(dy, tn);
    float *ref = fbuf(tn);
    memcpy(ref, y, tn * 4);
    OK(lt_cuda_bias_forward(g_cuda, d_y, d_b, T, n, err));
    lt_bias_forward(ref, b, T, n);
    float *got = down_bf16(d_y, tn);
    expect_close("bias_forward", got, ref, tn, BF16_REL, 1e-3);
    /* db += column sums, onto a nonzero gradient; twice: the same bits */
    float *rdb = fbuf((size_t)n);
    memcpy(rdb, db0, (size_t)n * 4);
    lt_bias_backward(rdb, dy, T, n);
    float *gdb[2];
    for (int k = 0; k < 2; k++) {
        float *d_db = up_f32(db0, (size_t)n);
        OK(lt_cuda_bias_backward(g_cuda, d_db, d_dy, T, n, err));
        gdb[k] = down_f32(d_db, (size_t)n);
        dfree(d_db);
    }
    expect_close("bias_backward db", gdb[0], rdb, (size_t)n, 0.0, 1e-5);
    expect_bits("bias_backward db (second run)", gdb[1], gdb[0], (size_t)n);
    lt_error e;
    lt_error_clear(&e);
    assert_int_not_equal(lt_cuda_bias_forward(g_cuda, d_y, d_b, T, 0, &e), LT_OK);
    assert_non_null(strstr(e.where, "lt_cuda_bias_forward"));
    free(y), free(b), free(dy), free(db0), free(ref), free(got), free(rdb), free(gdb[0]), free(gdb[1]);
    dfree(d_y), dfree(d_b), dfree(d_dy);
}

/* ---------------------------------------------------------------- RoPE */

static void test_rope(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 51);
    const int T = 40, nh = 3, hd = 64;
    size_t n = (size_t)T * nh * hd;
    int32_t pos[40];
    for (int t = 0; t < T; t++) pos[t] = t < 20 ? t : 3000 + 37 * t; /* a slice deep in its sample */
    float *x = rand_bf16_values(&r, n, -1, 1);
    int32_t *d_pos = up_i32(pos, (size_t)T);
    /* the plain frequencies (theta 10000) and Llama 3.1's scaled ones (theta 500000, factor
     * 8, low 1, high 4, original context 64: every one of the three bands at hd 64) */
    lt_model_shape plain = {.rope_theta = 10000.0};
    lt_model_shape llama3 = {.rope_theta = 500000.0, .rope_scaling = LT_ROPE_LLAMA3, .rope_factor = 8.0,
                             .rope_low_freq_factor = 1.0, .rope_high_freq_factor = 4.0, .rope_original_max_pos = 64};
    float freqs[2][32];
    lt_model_rope_inv_freq(&plain, hd, freqs[0]);
    lt_model_rope_inv_freq(&llama3, hd, freqs[1]);
    for (int dir = 0; dir < 4; dir++) {
        const float *f = freqs[dir / 2];
        lt_bf16 *d_x = up_bf16(x, n);
        float *ref = fbuf(n);
        memcpy(ref, x, n * 4);
        if (dir % 2 == 0) {
            OK(lt_cuda_rope_forward(g_cuda, d_x, d_pos, T, nh, hd, f, err));
            lt_rope_forward(ref, pos, T, nh, hd, f, NULL);
        } else {
            OK(lt_cuda_rope_backward(g_cuda, d_x, d_pos, T, nh, hd, f, err));
            lt_rope_backward(ref, pos, T, nh, hd, f, NULL);
        }
        float *got = down_bf16(d_x, n);
        static const char *const what[] = {"rope_forward", "rope_backward", "rope_forward (llama3)",
                                           "rope_backward (llama3)"};
        expect_close(what[dir], got, ref, n, BF16_REL, 1e-3);
        free(ref), free(got);
        dfree(d_x);
    }
    /* an odd head dimension is refused by name, not run */
    lt_error err;
    lt_error_clear(&err);
    assert_int_not_equal(lt_cuda_rope_forward(g_cuda, NULL, d_pos, T, nh, 63, freqs[0], &err), LT_OK);
    assert_non_null(strstr(err.where, "lt_cuda_rope_forward"));
    free(x);
    dfree(d_pos);
}

/* ---------------------------------------------------------------- SwiGLU */

static void test_swiglu(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 61);
    for (int k = 0; k < 3; k++) {
        size_t n = k == 1 ? 1001 : 4096; /* vector, odd length, misaligned pointers */
        int pad = k == 2 ? 1 : 0;
        float *g = rand_bf16_values(&r, n, -6, 6), *u = rand_bf16_values(&r, n, -2, 2);
        float *dout = rand_bf16_values(&r, n, -1, 1), *dg0 = rand_bf16_values(&r, n, -1, 1);
        float *du0 = rand_bf16_values(&r, n, -1, 1);
        void *b1, *b2, *b3, *b4, *b5, *b6;
        lt_bf16 *d_g = up_bf16_at(g, n, pad, &b1), *d_u = up_bf16_at(u, n, pad, &b2);
        lt_bf16 *d_dout = up_bf16_at(dout, n, pad, &b3), *d_dg = up_bf16_at(dg0, n, pad, &b4);
        lt_bf16 *d_du = up_bf16_at(du0, n, pad, &b5), *d_out = up_bf16_at(du0, n, pad, &b6);
        OK(lt_cuda_swiglu_forward(g_cuda, d_out, d_g, d_u, n, err));
        float *out = down_bf16(d_out, n), *ref = fbuf(n);
        lt_swiglu_forward(ref, g, u, n, NULL);
        expect_close("swiglu_forward", out, ref, n, BF16_REL, 1e-3);
        OK(lt_cuda_swiglu_backward(g_cuda, d_dg, d_du, d_dout, d_g, d_u, n, err));
        float *gdg = down_bf16(d_dg, n), *gdu = down_bf16(d_du, n), *rdg = fbuf(n), *rdu = fbuf(n);
        memcpy(rdg, dg0, n * 4);
        memcpy(rdu, du0, n * 4);
        lt_swiglu_backward(rdg, rdu, dout, g, u, n, NULL);
        expect_close("swiglu_backward dgate", gdg, rdg, n, BF16_REL, 1e-3);
        expect_close("swiglu_backward dup", gdu, rdu, n, BF16_REL, 1e-3);
        free(g), free(u), free(dout), free(dg0), free(du0), free(out), free(ref), free(gdg), free(gdu), free(rdg),
            free(rdu);
        dfree(b1), dfree(b2), dfree(b3), dfree(b4), dfree(b5), dfree(b6);
    }
}

/* ---------------------------------------------------------------- cross-entropy */

static void test_xent(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 71);
    const int T = 23;
    const int vocabs[] = {1000, 1001}; /* vector, scalar */
    for (int k = 0; k < 2; k++) {
        int V = vocabs[k];
        size_t n = (size_t)T * V;
        float *l = rand_bf16_values(&r, n, -8, 8);
        int32_t tg[23];
        for (int t = 0; t < T; t++) tg[t] = (int32_t)(lt_rng_double(&r) * V);
        tg[4] = -1, tg[T - 1] = -1; /* rows that predict nothing */
        tg[7] = V - 1, tg[8] = 0;
        const float scale = 1.0f / 19.0f;
        lt_bf16 *d_l = up_bf16(l, n);
        int32_t *d_tg = up_i32(tg, (size_t)T);
        float *d_loss = dalloc((size_t)T * 4);
        /* the loss alone first (dlogits NULL): the logits stay as they were */
        OK(lt_cuda_xent_forward_backward(g_cuda, NULL, d_l, d_tg, T, V, V, scale, d_loss, err));
        float *l_after = down_bf16(d_l, n), *loss_only = down_f32(d_loss, (size_t)T);
        expect_bits("xent logits after a loss-only call", l_after, l, n);
        OK(lt_cuda_xent_forward_backward(g_cuda, d_l, d_l, d_tg, T, V, V, scale, d_loss, err)); /* in place */
        float *dl = down_bf16(d_l, n), *loss = down_f32(d_loss, (size_t)T);
        double total = 0.0;
        OK(lt_cuda_sum_rows(g_cuda, d_loss, (size_t)T, &total, err));
        /* CPU: per row (for the row losses), then the whole (for the total) */
        float *rdl = fbuf(n);
        double rtotal = 0.0;
        for (int t = 0; t < T; t++) {
            double lt = lt_xent_forward_backward(rdl + (size_t)t * V, l + (size_t)t * V, &tg[t], 1, V, scale, NULL);
            rtotal += lt;
            if (tg[t] < 0) {
                assert_true(loss[t] == 0.0f);
                for (int v = 0; v < V; v++) assert_true(dl[(size_t)t * V + v] == 0.0f);
            } else if (!(fabs((double)loss[t] - lt) <= 1e-4 * fabs(lt) + 1e-6)) {
                fail_msg("xent row %d loss: gpu %.9g cpu %.9g", t, (double)loss[t], lt);
            }
        }
        expect_close("xent dlogits", dl, rdl, n, BF16_REL, 1e-3);
        expect_bits("xent loss-only row losses", loss_only, loss, (size_t)T);
        if (!(fabs(total - rtotal) <= 1e-4 * fabs(rtotal))) fail_msg("xent total: gpu %.12g cpu %.12g", total, rtotal);
        free(l), free(dl), free(loss), free(rdl), free(l_after), free(loss_only);
        dfree(d_l), dfree(d_tg), dfree(d_loss);
    }
}

/* The vocabulary-parallel cross-entropy: a group of G ranks simulated in one process, each
 * holding the columns [v0, v0 + Vr) of the whole [T, V] logits; the statistics the group
 * all-reduces (the maximum, then the sums) combined on the host between the kernels. */
static void test_xent_tp(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 79);
    enum { T = 19, G = 3 };
    const int vocabs[] = {48 * G, 1001}; /* every slice vector-wide; slices of 334, 334, 333 (scalar) */
    for (int k = 0; k < 2; k++) {
        int V = vocabs[k];
        size_t n = (size_t)T * V;
        float *l = rand_bf16_values(&r, n, -8, 8), *rdl = fbuf(n);
        int32_t tg[T];
        for (int t = 0; t < T; t++) tg[t] = (int32_t)(lt_rng_double(&r) * V);
        tg[2] = -1, tg[T - 1] = -1, tg[5] = 0, tg[6] = V - 1; /* no prediction; the ends of the vocabulary */
        int border = V / G + (V % G > 0); /* where slice 1 begins (the slices below) */
        tg[7] = V / 2, tg[8] = border - 1, tg[9] = border; /* the middle slice; either side of a border */
        const float scale = 1.0f / 17.0f;
        /* the whole rows on the CPU: per row (the row losses), then together (the total) */
        double rloss[T];
        for (int t = 0; t < T; t++)
            rloss[t] = lt_xent_forward_backward(rdl + (size_t)t * V, l + (size_t)t * V, &tg[t], 1, V, scale, NULL);
        double rtotal = lt_xent_forward_backward(rdl, l, tg, T, V, scale, NULL);
        int32_t *d_tg = up_i32(tg, (size_t)T);
        lt_bf16 *d_l[G];
        float *d_max[G], *d_sums[G], *d_loss[G];
        int v0[G], vr[G];
        float gmax[T], gsums[2 * T], *slice[G];
        for (int t = 0; t < T; t++) gmax[t] = -INFINITY, gsums[t] = 0.0f, gsums[T + t] = 0.0f;
        for (int g = 0; g < G; g++) {
            v0[g] = g * (V / G) + (g < V % G ? g : V % G);
            vr[g] = V / G + (g < V % G);
            slice[g] = fbuf((size_t)T * vr[g]);
            for (int t = 0; t < T; t++)
                memcpy(slice[g] + (size_t)t * vr[g], l + (size_t)t * V + v0[g], (size_t)vr[g] * 4);
            d_l[g] = up_bf16(slice[g], (size_t)T * vr[g]);
            d_max[g] = dalloc((size_t)T * 4), d_sums[g] = dalloc((size_t)2 * T * 4), d_loss[g] = dalloc((size_t)T * 4);
            OK(lt_cuda_xent_tp_max(g_cuda, d_max[g], d_l[g], T, vr[g], vr[g], err));
            float *mx = down_f32(d_max[g], (size_t)T), ref[T];
            lt_xent_tp_max(ref, slice[g], T, vr[g]);
            expect_bits("xent_tp_max", mx, ref, (size_t)T);
            for (int t = 0; t < T; t++) gmax[t] = fmaxf(gmax[t], mx[t]); /* the group's maximum all-reduce */
            free(mx);
        }
        float *d_gmax = up_f32(gmax, (size_t)T);
        int held[T]; /* how many ranks hold row t's target: exactly one when it has one */
        for (int t = 0; t < T; t++) held[t] = 0;
        for (int g = 0; g < G; g++) {
            OK(lt_cuda_xent_tp_sums(g_cuda, d_sums[g], d_l[g], d_gmax, d_tg, v0[g], T, vr[g], vr[g], err));
            float *sm = down_f32(d_sums[g], (size_t)2 * T), ref[2 * T];
            lt_xent_tp_sums(ref, slice[g], gmax, tg, v0[g], T, vr[g]);
            /* the exponentials' sums: fp32 block sums vs the CPU's double; the target's
             * logit: a copy */
            expect_close("xent_tp_sums (exp sums)", sm, ref, (size_t)T, 1e-5, 0.0);
            expect_bits("xent_tp_sums (target logits)", sm + T, ref + T, (size_t)T);
            for (int t = 0; t < T; t++) held[t] += tg[t] >= v0[g] && tg[t] < v0[g] + vr[g];
            for (int t = 0; t < 2 * T; t++) gsums[t] += sm[t]; /* the group's sum all-reduce */
            free(sm);
        }
        for (int t = 0; t < T; t++) assert_int_equal(held[t], tg[t] >= 0 ? 1 : 0);
        float *d_gsums = up_f32(gsums, (size_t)2 * T);
        double total = 0.0;
        float loss_t[T]; /* rank 0's row losses; every rank's must be the same bits */
        for (int g = 0; g < G; g++) {
            size_t ng = (size_t)T * vr[g];
            /* the losses alone first: the logits unchanged, the same row losses after */
            OK(lt_cuda_xent_tp_finish(g_cuda, NULL, d_l[g], d_gmax, d_gsums, d_tg, v0[g], T, vr[g], vr[g], scale,
                                      d_loss[g], err));
            float *only = down_f32(d_loss[g], (size_t)T), *before = down_bf16(d_l[g], ng);
            OK(lt_cuda_xent_tp_finish(g_cuda, d_l[g], d_l[g], d_gmax, d_gsums, d_tg, v0[g], T, vr[g], vr[g], scale,
                                      d_loss[g], err)); /* in place */
            float *loss = down_f32(d_loss[g], (size_t)T), *dl = down_bf16(d_l[g], ng), *want = fbuf(ng);
            expect_bits("xent_tp loss-only row losses", only, loss, (size_t)T);
            for (int t = 0; t < T; t++) memcpy(want + (size_t)t * vr[g], rdl + (size_t)t * V + v0[g], (size_t)vr[g] * 4);
            expect_close("xent_tp dlogits (a slice)", dl, want, ng, BF16_REL, 1e-3);
            /* the CPU twin on the same slice and the same group statistics */
            float *rdl_g = fbuf(ng);
            double rsum = lt_xent_tp_finish(rdl_g, slice[g], gmax, gsums, tg, v0[g], T, vr[g], scale), sum = 0.0;
            expect_close("xent_tp dlogits vs lt_xent_tp_finish", dl, rdl_g, ng, BF16_REL, 1e-3);
            for (int t = 0; t < T; t++) {
                /* every rank computes the row's whole loss from the group's sums */
                if (g == 0) loss_t[t] = loss[t];
                else if (memcmp(&loss_t[t], &loss[t], sizeof(float)) != 0)
                    fail_msg("xent_tp row %d loss: rank %d %.9g, rank 0 %.9g", t, g, (double)loss[t], (double)loss_t[t]);
                if (tg[t] < 0) {
                    assert_true(loss[t] == 0.0f);
                    for (int v = 0; v < vr[g]; v++) assert_true(dl[(size_t)t * vr[g] + v] == 0.0f);
                } else if (!(fabs((double)loss[t] - rloss[t]) <= 1e-4 * fabs(rloss[t]) + 1e-6)) {
                    fail_msg("xent_tp row %d loss (rank %d): gpu %.9g cpu %.9g", t, g, (double)loss[t], rloss[t]);
                }
                sum += loss[t];
            }
            if (!(fabs(sum - rsum) <= 1e-4 * fabs(rsum)))
                fail_msg("xent_tp rank %d: gpu %.12g lt_xent_tp_finish %.12g", g, sum, rsum);
            expect_bits("xent_tp logits after a loss-only call", before, slice[g], ng);
            free(only), free(before), free(loss), free(dl), free(want), free(rdl_g);
        }
        for (int t = 0; t < T; t++) total += loss_t[t];
        if (!(fabs(total - rtotal) <= 1e-4 * fabs(rtotal))) fail_msg("xent_tp total: gpu %.12g cpu %.12g", total, rtotal);
        for (int g = 0; g < G; g++) dfree(d_l[g]), dfree(d_max[g]), dfree(d_sums[g]), dfree(d_loss[g]), free(slice[g]);
        dfree(d_tg), dfree(d_gmax), dfree(d_gsums);
        free(l), free(rdl);
    }
}

/* A target outside the vocabulary (a caller's broken contract the kernel cannot report)
 * poisons the row: NaN loss and NaN gradient, so the step's loss shows it; the other
 * rows are unaffected. */
static void test_xent_target_out_of_range_is_nan(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 73);
    const int T = 2, V = 16;
    float *l = rand_bf16_values(&r, (size_t)T * V, -3, 3), *rdl = fbuf(V);
    int32_t tg[2] = {V, 3};
    lt_bf16 *d_l = up_bf16(l, (size_t)T * V);
    int32_t *d_tg = up_i32(tg, 2);
    float *d_loss = dalloc(2 * 4);
    OK(lt_cuda_xent_forward_backward(g_cuda, d_l, d_l, d_tg, T, V, V, 0.5f, d_loss, err));
    float *dl = down_bf16(d_l, (size_t)T * V), *loss = down_f32(d_loss, 2);
    assert_true(isnan(loss[0]));
    for (int v = 0; v < V; v++) assert_true(isnan(dl[v]));
    double want = lt_xent_forward_backward(rdl, l + V, &tg[1], 1, V, 0.5f, NULL);
    assert_true(fabs((double)loss[1] - want) <= 1e-4 * fabs(want) + 1e-6);
    expect_close("xent dlogits (valid row)", dl + V, rdl, (size_t)V, BF16_REL, 1e-3);
    free(l), free(rdl), free(dl), free(loss);
    dfree(d_l), dfree(d_tg), dfree(d_loss);
}

/* ---------------------------------------------------------------- the LM head's padded rows */

/* Columns [V, ld) of T rows ld apart must still hold the padding's fill (bf16 `fill`: NaN,
 * or a huge finite value that a read would put in a max or a sum); rows [0, V) copied
 * densely into dense[T, V]. */
static void padding_untouched(const char *what, const float *rows, float *dense, int T, int V, int ld,
                              uint16_t fill) {
    float want = lt_bf16_to_f32(fill);
    for (int t = 0; t < T; t++) {
        for (int v = V; v < ld; v++) {
            float x = rows[(size_t)t * ld + v];
            if (isnan(want) ? !isnan(x) : x != want)
                fail_msg("%s: padding column %d of row %d written (%.9g)", what, v, t, (double)x);
        }
        memcpy(dense + (size_t)t * V, rows + (size_t)t * ld, (size_t)V * sizeof *dense);
    }
}

/* The LM head with its logits rows ld = V rounded up to 64 elements apart (train/model/pass.c)
 * and the padding NaN (then, for reads that skip a NaN, 0x7F7F: 3.4e38): the forward GEMM
 * leaves the padding alone, the cross-entropy neither reads it (row losses and dlogits those
 * of the dense rows on the CPU, 1e-4 relative and bf16 out, A = 1e-3) nor writes it, and the
 * backward GEMMs do not read it (dx, dw as the CPU's on the dense dlogits); the same for the
 * vocabulary-parallel kernels of a one-rank group. V = 203 (small and odd: 8-wide body,
 * scalar tail) and GPT-2's 50257. */
static void test_head_padded_rows(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 83);
    enum { TMAX = 13, C = 32 };
    const int vocabs[] = {203, 203, 50257, 50257}, rows[] = {TMAX, TMAX, 3, 3};
    for (int k = 0; k < 4; k++) {
        int V = vocabs[k], ld = (V + 63) / 64 * 64, T = rows[k], fill = k % 2 ? 0x7F : 0xFF;
        uint16_t fill16 = (uint16_t)(fill << 8 | fill);
        size_t nx = (size_t)T * C, nw = (size_t)V * C, nl = (size_t)T * ld, nd = (size_t)T * V;
        float *x = rand_bf16_values(&r, nx, -1, 1), *w = rand_bf16_values(&r, nw, -1, 1);
        float *dx0 = rand_bf16_values(&r, nx, -1, 1), *dw0 = rand_bf16_values(&r, nw, -1, 1);
        int32_t tg[TMAX];
        for (int t = 0; t < T; t++) tg[t] = (int32_t)(lt_rng_double(&r) * V);
        tg[1] = -1, tg[T - 1] = V - 1; /* a row without a target; the last logit */
        const float scale = 1.0f / 11.0f;
        lt_bf16 *d_x = up_bf16(x, nx), *d_w = up_bf16(w, nw), *d_l = dalloc(nl * 2), *d_dx = up_bf16(dx0, nx);
        int32_t *d_tg = up_i32(tg, (size_t)T);
        float *d_loss = dalloc((size_t)T * 4), *d_dw = up_f32(dw0, nw);
        float *d_max = dalloc((size_t)T * 4), *d_sums = dalloc((size_t)2 * T * 4);
        /* the forward: only the V columns of each row written */
        OK(lt_cuda_memset(g_cuda, d_l, fill, nl * 2, err)); /* bf16 0xFFFF (NaN) or 0x7F7F */
        OK(lt_cuda_linear_forward(g_cuda, d_l, d_x, d_w, T, C, V, ld, err));
        float *got = down_bf16(d_l, nl), *l = fbuf(nd), *ref = fbuf(nd);
        padding_untouched("linear_forward (rows ld apart)", got, l, T, V, ld, fill16);
        lt_linear_forward(ref, x, w, T, C, V);
        expect_close("linear_forward (rows ld apart)", l, ref, nd, BF16_REL, 2e-3);
        /* the cross-entropy against the CPU's on the same (dense) logits */
        float *rdl = fbuf(nd), *rdx = fbuf(nx), *rdw = fbuf(nw);
        double rloss[TMAX];
        for (int t = 0; t < T; t++)
            rloss[t] = lt_xent_forward_backward(rdl + (size_t)t * V, l + (size_t)t * V, &tg[t], 1, V, scale, NULL);
        OK(lt_cuda_xent_forward_backward(g_cuda, NULL, d_l, d_tg, T, V, ld, scale, d_loss, err));
        float *only = down_f32(d_loss, (size_t)T);
        OK(lt_cuda_xent_forward_backward(g_cuda, d_l, d_l, d_tg, T, V, ld, scale, d_loss, err)); /* in place */
        float *loss = down_f32(d_loss, (size_t)T), *gdl_rows = down_bf16(d_l, nl), *gdl = fbuf(nd);
        expect_bits("xent loss-only row losses (rows ld apart)", only, loss, (size_t)T);
        padding_untouched("xent dlogits (rows ld apart)", gdl_rows, gdl, T, V, ld, fill16);
        for (int t = 0; t < T; t++)
            if (!(fabs((double)loss[t] - rloss[t]) <= 1e-4 * fabs(rloss[t]) + 1e-6))
                fail_msg("xent row %d loss (V %d, ld %d): gpu %.9g cpu %.9g", t, V, ld, (double)loss[t], rloss[t]);
        expect_close("xent dlogits (rows ld apart)", gdl, rdl, nd, BF16_REL, 1e-3);
        /* the backward through the padded dlogits (their NaN padding unread) against the
         * CPU's on the GPU's dense bf16 dlogits */
        OK(lt_cuda_linear_backward(g_cuda, d_dx, d_dw, d_l, d_x, d_w, T, C, V, ld, err));
        memcpy(rdx, dx0, nx * sizeof *rdx), memcpy(rdw, dw0, nw * sizeof *rdw);
        lt_linear_backward(rdx, rdw, gdl, x, w, T, C, V);
        float *gdx = down_bf16(d_dx, nx), *gdw = down_f32(d_dw, nw);
        expect_close("linear_backward dx (dout rows ld apart)", gdx, rdx, nx, BF16_REL, 2e-3);
        expect_close("linear_backward dw (dout rows ld apart)", gdw, rdw, nw, 0.0, 1e-4);
        /* the vocabulary-parallel kernels of a one-rank group on fresh padded logits */
        OK(lt_cuda_memset(g_cuda, d_l, fill, nl * 2, err));
        OK(lt_cuda_linear_forward(g_cuda, d_l, d_x, d_w, T, C, V, ld, err));
        OK(lt_cuda_xent_tp_max(g_cuda, d_max, d_l, T, V, ld, err));
        float *mx = down_f32(d_max, (size_t)T), rmx[TMAX], rsm[2 * TMAX];
        lt_xent_tp_max(rmx, l, T, V);
        expect_bits("xent_tp_max (rows ld apart)", mx, rmx, (size_t)T);
        OK(lt_cuda_xent_tp_sums(g_cuda, d_sums, d_l, d_max, d_tg, 0, T, V, ld, err));
        float *sm = down_f32(d_sums, (size_t)2 * T);
        lt_xent_tp_sums(rsm, l, rmx, tg, 0, T, V);
        expect_close("xent_tp_sums (rows ld apart)", sm, rsm, (size_t)T, 1e-5, 0.0);
        expect_bits("xent_tp_sums target logits (rows ld apart)", sm + T, rsm + T, (size_t)T);
        OK(lt_cuda_xent_tp_finish(g_cuda, d_l, d_l, d_max, d_sums, d_tg, 0, T, V, ld, scale, d_loss, err));
        float *tloss = down_f32(d_loss, (size_t)T), *tdl_rows = down_bf16(d_l, nl), *tdl = fbuf(nd);
        padding_untouched("xent_tp_finish dlogits (rows ld apart)", tdl_rows, tdl, T, V, ld, fill16);
        for (int t = 0; t < T; t++)
            if (!(fabs((double)tloss[t] - rloss[t]) <= 1e-4 * fabs(rloss[t]) + 1e-6))
                fail_msg("xent_tp row %d loss (V %d, ld %d): gpu %.9g cpu %.9g", t, V, ld, (double)tloss[t], rloss[t]);
        expect_close("xent_tp dlogits (rows ld apart)", tdl, rdl, nd, BF16_REL, 1e-3);
        free(x), free(w), free(dx0), free(dw0), free(got), free(l), free(ref), free(rdl), free(rdx), free(rdw);
        free(only), free(loss), free(gdl_rows), free(gdl), free(gdx), free(gdw), free(mx), free(sm), free(tloss);
        free(tdl_rows), free(tdl);
        dfree(d_x), dfree(d_w), dfree(d_l), dfree(d_dx), dfree(d_tg), dfree(d_loss), dfree(d_dw), dfree(d_max);
        dfree(d_sums);
    }
}

/* ---------------------------------------------------------------- optimizer */

static void test_sum_squares_and_scale(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 81);
    const size_t n = 1000003;
    float *g = fbuf(n);
    for (size_t i = 0; i < n; i++) g[i] = (float)(lt_rng_double(&r) - 0.5);
    float *d_g = up_f32(g, n);
    double s1 = 0, s2 = 0;
    OK(lt_cuda_sum_squares(g_cuda, d_g, n, &s1, err));
    OK(lt_cuda_sum_squares(g_cuda, d_g, n, &s2, err));
    double ref = lt_grad_norm(g, n);
    ref *= ref;
    if (!(fabs(s1 - ref) <= 1e-5 * ref)) fail_msg("sum_squares: gpu %.12g cpu %.12g", s1, ref);
    assert_memory_equal(&s1, &s2, sizeof s1); /* deterministic */
    OK(lt_cuda_scale(g_cuda, d_g, n, 0.37f, err));
    float *got = down_f32(d_g, n);
    for (size_t i = 0; i < n; i++) g[i] *= 0.37f;
    expect_bits("scale", got, g, n);
    free(g), free(got);
    dfree(d_g);
}

static void test_adamw_matches_cpu_bit_for_bit(void **state) {
    (void)state;
    need_gpu();
    lt_rng r;
    lt_rng_seed(&r, 91);
    /* a two-tensor "model": a [6, 50] matrix (decayed) and a [1, 77] vector (not) */
    lt_tensor_info tensors[2];
    memset(tensors, 0, sizeof tensors);
    tensors[0].rows = 6, tensors[0].cols = 50, tensors[0].offset = 0;
    tensors[1].rows = 1, tensors[1].cols = 77, tensors[1].offset = 300;
    lt_llama model;
    memset(&model, 0, sizeof model);
    model.n_tensors = 2, model.tensors = tensors, model.n_params = 377;
    const size_t n = 377;
    lt_optim_config oc;
    memset(&oc, 0, sizeof oc);
    oc.beta1 = 0.9, oc.beta2 = 0.95, oc.eps = 1e-8, oc.weight_decay = 0.1;
    double lr = 3e-4;
    float *p = rand_bf16_values(&r, n, -1, 1), *m = fbuf(n), *v = fbuf(n);
    float *d_p = up_f32(p, n), *d_m = up_f32(m, n), *d_v = up_f32(v, n), *d_g = dalloc(n * 4);
    lt_bf16 *d_p16 = dalloc(n * 2);
    lt_adamw o;
    memset(&o, 0, sizeof o);
    for (int step = 1; step <= 3; step++) {
        float *g = rand_bf16_values(&r, n, -0.1, 0.1);
        OK(lt_cuda_copy_h2d(g_cuda, d_g, g, n * 4, err));
        o.t = step;
        lt_adamw_update_range(&o, &model, p, g, lr, &oc, 0, n, m, v);
        OK(lt_cuda_adamw(g_cuda, d_p, d_p16, d_g, d_m, d_v, 300, lr, oc.beta1, oc.beta2, oc.eps, oc.weight_decay,
                         step, err));
        OK(lt_cuda_adamw(g_cuda, d_p + 300, d_p16 + 300, d_g + 300, d_m + 300, d_v + 300, 77, lr, oc.beta1, oc.beta2,
                         oc.eps, 0.0, step, err));
        float *gp = down_f32(d_p, n), *gm = down_f32(d_m, n), *gv = down_f32(d_v, n), *gp16 = down_bf16(d_p16, n);
        expect_bits("adamw master", gp, p, n);
        expect_bits("adamw m", gm, m, n);
        expect_bits("adamw v", gv, v, n);
        for (size_t i = 0; i < n; i++) p[i] = lt_bf16_to_f32(lt_bf16_from_f32(p[i]));
        expect_bits("adamw bf16 copy", gp16, p, n);
        OK(lt_cuda_copy_d2h(g_cuda, p, d_p, n * 4, err)); /* the unrounded master again */
        free(g), free(gp), free(gm), free(gv), free(gp16);
    }
    free(p), free(m), free(v);
    dfree(d_p), dfree(d_m), dfree(d_v), dfree(d_g), dfree(d_p16);
}

/* ---------------------------------------------------------------- the backend's step
 * (train/model/backend_cuda.c over these kernels; under the emulation, its host logic on
 * the CPU). A unit's ops as the pass queues them: the unit's ids, positions and targets
 * bound once, the embedding, two layers' RoPE and RMSNorm (whose backward borrows the
 * kernels' scratch), an overlapping copy, the head's cross-entropy in two row blocks, the
 * loss taken once; then the gradient norm over three ranges. Step 1 may allocate (the
 * scratch's first block, the pinned staging); step 2 must allocate and free nothing, upload
 * once (the bound arrays) and wait three times (the loss, the pass's check, the norm),
 * whatever the number of layers and blocks. The loss against the CPU's, the norm bit for
 * bit against the per-range sums. */
static void test_backend_step_waits_and_allocations(void **state) {
    (void)state;
    need_gpu();
    lt_backend *be = NULL;
    OK(lt_backend_cuda_open(&be, 0, err));
    OK(lt_backend_cuda_reserve(be, (size_t)32 << 20, "the test", err));
    enum { T = 40, V = 53, C = 16, NH = 2, HD = 8, BLOCK = 20 };
    int ld = lt_backend_logits_ld(be, V);
    lt_rng r;
    lt_rng_seed(&r, 34);
    int32_t ibuf[3 * T]; /* ids | positions | targets, as lt_acts lays them out */
    for (int t = 0; t < T; t++) {
        ibuf[t] = (int32_t)(lt_rng_double(&r) * V);
        ibuf[T + t] = t;
        ibuf[2 * T + t] = t % 7 == 3 ? -1 : (int32_t)(lt_rng_double(&r) * V);
    }
    float *hw = rand_bf16_values(&r, (size_t)V * C, -1, 1), *hl = rand_bf16_values(&r, (size_t)T * V, -3, 3);
    float *hn = rand_bf16_values(&r, C, 0.5, 1.5), *hg = rand_bf16_values(&r, 1000, -1, 1);
    float inv_freq[HD / 2];
    for (int i = 0; i < HD / 2; i++) inv_freq[i] = (float)pow(10000.0, -2.0 * i / HD);
    /* the step's buffers, from the arena, and their contents before the counting starts */
    void *wte = be->alloc(be, (size_t)V * C * 2, false), *x = be->alloc(be, (size_t)T * C * 2, false);
    void *nrm = be->alloc(be, (size_t)T * C * 2, false), *q = be->alloc(be, (size_t)T * NH * HD * 2, false);
    void *w = be->alloc(be, (size_t)C * 2, false), *dx = be->alloc(be, (size_t)T * C * 2, true);
    void *logits = be->alloc(be, (size_t)T * ld * 2, false);
    float *rstd = be->alloc(be, (size_t)T * 4, false), *dw = be->alloc(be, (size_t)C * 4, true);
    float *g = be->alloc(be, 1000 * 4, false);
    assert_true(wte && x && nrm && q && w && dx && logits && rstd && dw && g);
    OK(be->from_host_f32(be, wte, hw, (size_t)V * C, err));
    OK(be->from_host_f32(be, w, hn, C, err));
    OK(be->from_host(be, g, hg, 1000 * sizeof(float), err));
    double cpu_loss = 0;
    for (int b = 0; b < T; b += BLOCK) { /* the reference: each block's rows, dense */
        float *dl = fbuf((size_t)BLOCK * V);
        cpu_loss += lt_xent_forward_backward(dl, hl + (size_t)b * V, ibuf + 2 * T + b, BLOCK, V, 0.0f, NULL);
        free(dl);
    }
    size_t off[3] = {0, 100, 700}, len[3] = {100, 500, 300};
    double want_sq = 0;
    for (int i = 0; i < 3; i++) {
        double one = 0;
        OK(lt_backend_cuda_sum_squares(be, g + off[i], len[i], &one, err));
        want_sq += one;
    }
    lt_cuda_counts c0, c1;
    for (int step = 1; step <= 2; step++) {
        for (int t = 0; t < T; t++) /* the logits as the head's GEMM would leave them (rows ld apart) */
            OK(be->from_host_f32(be, (char *)logits + (size_t)t * ld * 2, hl + (size_t)t * V, V, err));
        lt_backend_cuda_counts(be, &c0);
        be->bind_ints(be, ibuf, 3 * (size_t)T);
        be->embed_forward(be, x, ibuf, T, wte, C);
        for (int l = 0; l < 2; l++) {
            be->rope_forward(be, q, ibuf + T, T, NH, HD, inv_freq, NULL);
            be->rmsnorm_forward(be, nrm, rstd, x, w, T, C, 1e-5f, NULL);
            be->rmsnorm_backward(be, dx, dw, nrm, x, w, rstd, T, C, NULL);
            OK(be->poll(be, err));
        }
        be->copy(be, (char *)dx + 2 * C, dx, (size_t)(T - 2) * C * 2); /* overlapping: through a block */
        double loss = 0;
        for (int b = 0; b < T; b += BLOCK)
            loss += be->xent(be, NULL, (char *)logits + (size_t)b * ld * 2, ibuf + 2 * T + b, BLOCK, V, ld, 0.0f, NULL);
        assert_true(loss == 0.0); /* kept on the device ... */
        loss += be->take_loss(be); /* ... until taken, once */
        be->rope_backward(be, q, ibuf + T, T, NH, HD, inv_freq, NULL);
        be->unbind_ints(be, ibuf);
        OK(be->check(be, err));
        double sq = 0;
        OK(lt_backend_cuda_sum_squares_ranges(be, g, off, len, 3, &sq, err));
        lt_backend_cuda_counts(be, &c1);
        printf("# step %d: %llu waits for the stream, %llu upload(s), %llu upload waits, %llu allocations, %llu "
               "frees; loss %.6f (cpu %.6f)\n", step, (unsigned long long)(c1.syncs - c0.syncs),
               (unsigned long long)(c1.uploads - c0.uploads), (unsigned long long)(c1.waits - c0.waits),
               (unsigned long long)(c1.allocs - c0.allocs), (unsigned long long)(c1.frees - c0.frees), loss, cpu_loss);
        assert_true(fabs(loss - cpu_loss) <= 1e-4 * fabs(cpu_loss));
        assert_true(sq == want_sq); /* the same additions in the same order */
        if (step == 2) {
            assert_int_equal(c1.allocs - c0.allocs, 0);
            assert_int_equal(c1.frees - c0.frees, 0);
            assert_int_equal(c1.uploads - c0.uploads, 1);
            assert_int_equal(c1.syncs - c0.syncs, 3);
        }
    }
    void *bufs[] = {wte, x, nrm, q, w, dx, logits, rstd, dw, g};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->free(be, bufs[i]);
    free(hw), free(hl), free(hn), free(hg);
    lt_backend_cuda_close(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_bf16_conversions),
        cmocka_unit_test(test_open_without_device_reports_reason),
        cmocka_unit_test(test_conversions_and_add),
        cmocka_unit_test(test_sum_blocks),
        cmocka_unit_test(test_linear_matches_cpu_and_cache),
        cmocka_unit_test(test_linear_alignment_is_part_of_the_key),
        cmocka_unit_test(test_embed),
        cmocka_unit_test(test_embed_backward_long_runs),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_bias),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_xent),
        cmocka_unit_test(test_xent_tp),
        cmocka_unit_test(test_xent_target_out_of_range_is_nan),
        cmocka_unit_test(test_head_padded_rows),
        cmocka_unit_test(test_sum_squares_and_scale),
        cmocka_unit_test(test_adamw_matches_cpu_bit_for_bit),
        cmocka_unit_test(test_backend_step_waits_and_allocations),
    };
    return cmocka_run_group_tests(tests, open_context, close_context);
}
