/*
 * tests/kernels/test_cuda_attention.c — the CUDA attention kernels (kernels/attention.cu)
 * against the CPU reference (train/cpu/attention.c), cmocka.
 *
 * Each case packs varlen segments into a unit: KV context (begin > 0), GQA or MQA, two
 * segments of one sample in one call (aliasing dk/dv, the later positions first), segment
 * lengths that are not multiples of the 64-row blocks, an empty segment, head dims 64 and
 * 128 and the test models' 16 and 32 (run padded to 32), and unit rows
 * that belong to no segment. The inputs are drawn in fp32 and rounded to bf16, so the CPU
 * (fp32) and the GPU (bf16 storage, fp32 accumulation) see the same numbers; the
 * gradient buffers start from nonzero values to check that the backward adds.
 *
 * Tolerances (bf16 has an 8-bit mantissa: one rounding is <= 2^-9 relative):
 *   - out: max |gpu - cpu| <= 2e-2 x max |cpu| over the segments' rows. The kernel rounds
 *     P to bf16 before P V (FlashAttention-2 does the same) and the output once; both
 *     are ~2^-9 relative per term and average out over the keys.
 *   - lse: |gpu - cpu| <= 1e-3 x max(1, |cpu|): it is computed in fp32 from the same bf16
 *     inputs, only the summation order differs.
 *   - dq, dk, dv: the change (result minus the initial value) within 3e-2 x the largest
 *     change of the CPU: P and dS are rounded to bf16 before their products, and the sum
 *     is added into a bf16 buffer (one more rounding of the whole value).
 *   - the backward run twice from the same starting values gives the same bits (no
 *     float atomics anywhere);
 *   - bytes the kernels must not touch (rows in no segment, K/V rows past every query's
 *     view, an empty segment's sample) are compared bit for bit.
 * A kernel with a wrong mask, head mapping or block offset is off by O(0.1..1) of the
 * largest value, far outside these bounds.
 *
 * Without a CUDA build or without a device the GPU checks are skipped with the reason
 * (cmocka's skip: "# SKIP" in TAP); the error paths that need no device always run.
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

#include "kernels/cuda.h"      /* lt_cuda_attention_forward / _backward, context, bf16 */
#include "lib/rng.h"           /* lt_rng: seeded test data */
#include "train/cpu/kernels.h" /* lt_attention_forward / _backward: the reference */
#include "lib/bf16.h"          /* lt_bf16_to_f32 */

#define TOL_OUT 2e-2
#define TOL_LSE 1e-3
#define TOL_GRAD 3e-2

/* ---------------------------------------------------------------- cases */

typedef struct {
    int sample, row0, n, begin;
} seg_spec;

typedef struct {
    const char *name;
    int hd, nh, nkv, T;
    double qscale;   /* q drawn in [-qscale, qscale]: larger = a peakier softmax */
    int n_samples;
    int len[4];      /* rows of each sample's K/V buffers (spare rows past the segments' use) */
    int n_segs;
    seg_spec segs[6];
} attn_case;

/* hd 64, GQA 4:2. Sample A [0, 70) at rows 0..69 and A [70, 110) at rows 201..240 (aliasing
 * dk/dv), sample B [100, 230) at rows 71..200 (100 rows of KV context, 130 queries: 3
 * query blocks, the last partial), sample C with an empty segment; rows 70, 241, 242 are
 * in no segment; A's and B's buffers have spare rows. */
static const attn_case CASE_HD64 = {
    .name = "hd 64, GQA 4:2",
    .hd = 64, .nh = 4, .nkv = 2, .T = 243, .qscale = 1.0,
    .n_samples = 3, .len = {120, 235, 8},
    .n_segs = 4,
    .segs = {{0, 0, 70, 0}, {1, 71, 130, 100}, {0, 201, 40, 70}, {2, 241, 0, 5}},
};

/* hd 128, MQA 2:1, a peaky softmax (the online rescaling moves). Sample A [200, 290) at
 * rows 0..89 BEFORE A [150, 200) at rows 91..140 (aliasing, later positions first), a
 * one-token sample B at row 90; rows 141, 142 in no segment. */
static const attn_case CASE_HD128 = {
    .name = "hd 128, MQA 2:1",
    .hd = 128, .nh = 2, .nkv = 1, .T = 143, .qscale = 3.0,
    .n_samples = 2, .len = {300, 1},
    .n_segs = 3,
    .segs = {{0, 0, 90, 200}, {1, 90, 1, 0}, {0, 91, 50, 150}},
};

/* Longer: a 400-query slice with 1000 rows of context (16 key blocks of 64 for the dK/dV
 * grid, every query block crossing many of them) and a 333-row sample, hd 64, GQA 8:2. */
static const attn_case CASE_LONG = {
    .name = "hd 64, long context",
    .hd = 64, .nh = 8, .nkv = 2, .T = 733, .qscale = 2.0,
    .n_samples = 2, .len = {1400, 333},
    .n_segs = 2,
    .segs = {{0, 0, 400, 1000}, {1, 400, 333, 0}},
};

/* The test models' head dims (kernels run them padded to 32): nano's 16 with GQA 4:2 and
 * KV context and aliasing, small's 32 with GQA 8:4. */
static const attn_case CASE_HD16 = {
    .name = "hd 16 (nano)",
    .hd = 16, .nh = 4, .nkv = 2, .T = 150, .qscale = 2.0,
    .n_samples = 2, .len = {120, 60},
    .n_segs = 3,
    .segs = {{0, 0, 70, 0}, {1, 70, 30, 30}, {0, 100, 50, 70}},
};
static const attn_case CASE_HD32 = {
    .name = "hd 32 (small)",
    .hd = 32, .nh = 8, .nkv = 4, .T = 100, .qscale = 2.0,
    .n_samples = 1, .len = {170},
    .n_segs = 1,
    .segs = {{0, 0, 100, 70}},
};

/* ---------------------------------------------------------------- helpers */

static float *fbuf(size_t n) {
    float *p = calloc(n > 0 ? n : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

static lt_bf16 *hbuf(size_t n) {
    lt_bf16 *p = calloc(n > 0 ? n : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

/* n values in [lo, hi), rounded to bf16: the fp32 copy and the bf16 bits. */
static void rand_bf16(lt_rng *r, float *f, lt_bf16 *b, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) {
        b[i] = lt_bf16_from_f32((float)(lo + (hi - lo) * lt_rng_double(r)));
        f[i] = lt_bf16_to_f32(b[i]);
    }
}

static void *dalloc(lt_cuda *c, size_t bytes) {
    void *p = NULL;
    lt_error err;
    lt_error_clear(&err);
    if (lt_cuda_malloc(c, &p, bytes > 0 ? bytes : 16, &err) != LT_OK) fail_msg("cuda malloc: %s", err.what);
    return p;
}

static void h2d(lt_cuda *c, void *dst, const void *src, size_t bytes) {
    lt_error err;
    lt_error_clear(&err);
    if (lt_cuda_copy_h2d(c, dst, src, bytes, &err) != LT_OK) fail_msg("copy to device: %s", err.what);
}

static void d2h(lt_cuda *c, void *dst, const void *src, size_t bytes) {
    lt_error err;
    lt_error_clear(&err);
    if (lt_cuda_copy_d2h(c, dst, src, bytes, &err) != LT_OK) fail_msg("copy to host: %s", err.what);
}

static void sync_or_fail(lt_cuda *c, const char *what) {
    lt_error err;
    lt_error_clear(&err);
    if (lt_cuda_sync(c, &err) != LT_OK) fail_msg("%s: %s", what, err.what);
}

/* A context on device 0, or a skip naming why there is none. */
static lt_cuda *open_or_skip(void) {
    lt_cuda *c = NULL;
    lt_error err;
    lt_error_clear(&err);
    if (lt_cuda_open(&c, 0, &err) != LT_OK) {
        printf("# skip: %s\n", err.what);
        skip();
    }
    return c;
}

/* Per-row membership: 1 when unit row t is a query row of some segment. */
static char *row_mask(const attn_case *tc) {
    char *in = calloc((size_t)tc->T, 1);
    assert_non_null(in);
    for (int e = 0; e < tc->n_segs; e++)
        for (int i = 0; i < tc->segs[e].n; i++) in[tc->segs[e].row0 + i] = 1;
    return in;
}

/* Rows of sample s's K/V any query sees: max(begin + n) over its segments. */
static int used_rows(const attn_case *tc, int s) {
    int u = 0;
    for (int e = 0; e < tc->n_segs; e++)
        if (tc->segs[e].sample == s && tc->segs[e].n > 0 && tc->segs[e].begin + tc->segs[e].n > u)
            u = tc->segs[e].begin + tc->segs[e].n;
    return u;
}

/* Largest |gpu - ref| relative to the largest |ref - base| over the rows where `use` is
 * set (NULL: all), width `w`; base NULL means 0. The gpu side is bf16. Rows where use is
 * 0 must keep `base_bits` bit for bit (counted in *touched). NaN when a compared gpu value
 * is NaN (fmax would skip it: a kernel that reads or leaves memory nobody wrote must fail). */
static double grad_err(const lt_bf16 *gpu, const float *ref, const float *base, const lt_bf16 *base_bits,
                       const char *use, size_t rows, size_t w, size_t *touched) {
    double worst = 0.0, scale = 1e-30;
    for (size_t t = 0; t < rows; t++)
        for (size_t i = t * w; i < (t + 1) * w; i++) {
            if (use != NULL && !use[t]) {
                if (gpu[i] != base_bits[i]) (*touched)++;
                continue;
            }
            double b = base != NULL ? base[i] : 0.0;
            scale = fmax(scale, fabs(ref[i] - b));
            double d = fabs((double)lt_bf16_to_f32(gpu[i]) - ref[i]);
            worst = isnan(d) || isnan(worst) ? NAN : fmax(worst, d);
        }
    return worst / scale;
}

/* ---------------------------------------------------------------- the comparison */

static void run_case(lt_cuda *c, const attn_case *tc, uint64_t seed) {
    const int T = tc->T, nh = tc->nh, nkv = tc->nkv, hd = tc->hd, S = tc->n_samples;
    const size_t qd = (size_t)nh * hd, kvd = (size_t)nkv * hd, nq = (size_t)T * qd;
    lt_rng r;
    lt_rng_seed(&r, seed);
    lt_error err;
    lt_error_clear(&err);

    /* inputs, fp32 and bf16 */
    float *q = fbuf(nq), *dout = fbuf(nq), *dq0 = fbuf(nq);
    lt_bf16 *hq = hbuf(nq), *hdout = hbuf(nq), *hdq0 = hbuf(nq);
    rand_bf16(&r, q, hq, nq, -tc->qscale, tc->qscale);
    rand_bf16(&r, dout, hdout, nq, -1, 1);
    rand_bf16(&r, dq0, hdq0, nq, -0.05, 0.05);
    float *k[4], *v[4], *dk0[4], *dv0[4], *dk[4], *dv[4];
    lt_bf16 *hk[4], *hv[4], *hdk0[4], *hdv0[4];
    for (int s = 0; s < S; s++) {
        size_t n = (size_t)tc->len[s] * kvd;
        k[s] = fbuf(n), v[s] = fbuf(n), dk0[s] = fbuf(n), dv0[s] = fbuf(n);
        hk[s] = hbuf(n), hv[s] = hbuf(n), hdk0[s] = hbuf(n), hdv0[s] = hbuf(n);
        rand_bf16(&r, k[s], hk[s], n, -1, 1);
        rand_bf16(&r, v[s], hv[s], n, -1, 1);
        rand_bf16(&r, dk0[s], hdk0[s], n, -0.05, 0.05);
        rand_bf16(&r, dv0[s], hdv0[s], n, -0.05, 0.05);
        dk[s] = fbuf(n), dv[s] = fbuf(n);
        memcpy(dk[s], dk0[s], n * sizeof(float));
        memcpy(dv[s], dv0[s], n * sizeof(float));
    }

    /* the CPU reference */
    lt_attn_segment cs[6];
    for (int e = 0; e < tc->n_segs; e++) {
        const seg_spec *p = &tc->segs[e];
        cs[e] = (lt_attn_segment){.row0 = p->row0, .n = p->n, .begin = p->begin, .k = k[p->sample],
                                  .v = v[p->sample], .dk = dk[p->sample], .dv = dv[p->sample]};
    }
    float *out = fbuf(nq), *lse = fbuf((size_t)T * nh), *dq = fbuf(nq);
    memcpy(dq, dq0, nq * sizeof(float));
    lt_attention_forward(out, lse, q, cs, tc->n_segs, nh, nkv, hd, NULL);
    lt_attention_backward(dq, dout, out, lse, q, cs, tc->n_segs, nh, nkv, hd, NULL);

    /* the same on the GPU; out starts as a sentinel (rows in no segment must keep it) */
    lt_bf16 *hout0 = hbuf(nq);
    for (size_t i = 0; i < nq; i++) hout0[i] = lt_bf16_from_f32(7.0f);
    lt_bf16 *d_q = dalloc(c, nq * 2), *d_out = dalloc(c, nq * 2), *d_dout = dalloc(c, nq * 2),
            *d_dq = dalloc(c, nq * 2);
    float *d_lse = dalloc(c, (size_t)T * nh * sizeof(float));
    h2d(c, d_q, hq, nq * 2), h2d(c, d_out, hout0, nq * 2), h2d(c, d_dout, hdout, nq * 2), h2d(c, d_dq, hdq0, nq * 2);
    lt_bf16 *d_k[4], *d_v[4], *d_dk[4], *d_dv[4];
    for (int s = 0; s < S; s++) {
        size_t b = (size_t)tc->len[s] * kvd * 2;
        d_k[s] = dalloc(c, b), d_v[s] = dalloc(c, b), d_dk[s] = dalloc(c, b), d_dv[s] = dalloc(c, b);
        h2d(c, d_k[s], hk[s], b), h2d(c, d_v[s], hv[s], b), h2d(c, d_dk[s], hdk0[s], b), h2d(c, d_dv[s], hdv0[s], b);
    }
    lt_cuda_attn_segment gs[6];
    for (int e = 0; e < tc->n_segs; e++) {
        const seg_spec *p = &tc->segs[e];
        gs[e] = (lt_cuda_attn_segment){.row0 = p->row0, .n = p->n, .begin = p->begin, .k = d_k[p->sample],
                                       .v = d_v[p->sample], .dk = d_dk[p->sample], .dv = d_dv[p->sample]};
    }
    if (lt_cuda_attention_forward(c, d_out, d_lse, d_q, gs, tc->n_segs, T, nh, nkv, hd, &err) != LT_OK)
        fail_msg("%s: forward: %s (%s)", tc->name, err.what, err.where);
    sync_or_fail(c, "forward");
    lt_bf16 *gout = hbuf(nq);
    float *glse = fbuf((size_t)T * nh);
    d2h(c, gout, d_out, nq * 2);
    d2h(c, glse, d_lse, (size_t)T * nh * sizeof(float));

    char *in = row_mask(tc);
    size_t touched = 0;
    double e_out = grad_err(gout, out, NULL, hout0, in, (size_t)T, qd, &touched);
    double e_lse = 0.0;
    for (int t = 0; t < T; t++)
        for (int h = 0; in[t] && h < nh; h++) {
            size_t i = (size_t)t * nh + h;
            double e = fabs(glse[i] - lse[i]) / fmax(1.0, fabs(lse[i]));
            e_lse = isnan(e) || isnan(e_lse) ? NAN : fmax(e_lse, e); /* NaN sticks */
        }
    printf("# %s: forward out err %.2e (tol %.0e), lse err %.2e (tol %.0e)\n", tc->name, e_out, TOL_OUT, e_lse,
           TOL_LSE);
    assert_int_equal(touched, 0);
    assert_true(e_out <= TOL_OUT);
    assert_true(e_lse <= TOL_LSE);

    /* backward from the GPU's own out and lse */
    if (lt_cuda_attention_backward(c, d_dq, d_dout, d_out, d_lse, d_q, gs, tc->n_segs, T, nh, nkv, hd, &err) != LT_OK)
        fail_msg("%s: backward: %s (%s)", tc->name, err.what, err.where);
    sync_or_fail(c, "backward");
    lt_bf16 *gdq = hbuf(nq);
    d2h(c, gdq, d_dq, nq * 2);
    double e_dq = grad_err(gdq, dq, dq0, hdq0, in, (size_t)T, qd, &touched);
    assert_int_equal(touched, 0);
    printf("# %s: backward dq err %.2e", tc->name, e_dq);
    assert_true(e_dq <= TOL_GRAD);
    lt_bf16 *gdk_all[4], *gdv_all[4];
    for (int s = 0; s < S; s++) {
        size_t n = (size_t)tc->len[s] * kvd;
        lt_bf16 *gdk = gdk_all[s] = hbuf(n), *gdv = gdv_all[s] = hbuf(n);
        d2h(c, gdk, d_dk[s], n * 2), d2h(c, gdv, d_dv[s], n * 2);
        int used = used_rows(tc, s);
        char *use = calloc((size_t)tc->len[s], 1);
        assert_non_null(use);
        memset(use, 1, (size_t)used);
        double e_dk = 0.0, e_dv = 0.0;
        if (used > 0) {
            e_dk = grad_err(gdk, dk[s], dk0[s], hdk0[s], use, (size_t)tc->len[s], kvd, &touched);
            e_dv = grad_err(gdv, dv[s], dv0[s], hdv0[s], use, (size_t)tc->len[s], kvd, &touched);
        } else { /* no query sees this sample: its gradients are untouched */
            touched += (size_t)(memcmp(gdk, hdk0[s], n * 2) != 0) + (size_t)(memcmp(gdv, hdv0[s], n * 2) != 0);
        }
        printf(", sample %d dk %.2e dv %.2e", s, e_dk, e_dv);
        assert_int_equal(touched, 0);
        assert_true(e_dk <= TOL_GRAD);
        assert_true(e_dv <= TOL_GRAD);
        free(use);
    }
    printf(" (tol %.0e)\n", TOL_GRAD);

    /* the backward is deterministic (no float atomics: one writer per dq, dk, dv element):
     * the same call from the same starting values gives the same bits */
    h2d(c, d_dq, hdq0, nq * 2);
    for (int s = 0; s < S; s++) {
        size_t b = (size_t)tc->len[s] * kvd * 2;
        h2d(c, d_dk[s], hdk0[s], b), h2d(c, d_dv[s], hdv0[s], b);
    }
    if (lt_cuda_attention_backward(c, d_dq, d_dout, d_out, d_lse, d_q, gs, tc->n_segs, T, nh, nkv, hd, &err) != LT_OK)
        fail_msg("%s: backward again: %s (%s)", tc->name, err.what, err.where);
    sync_or_fail(c, "backward again");
    lt_bf16 *again = hbuf(nq);
    d2h(c, again, d_dq, nq * 2);
    assert_memory_equal(again, gdq, nq * 2);
    free(again);
    for (int s = 0; s < S; s++) {
        size_t n = (size_t)tc->len[s] * kvd;
        lt_bf16 *ak = hbuf(n), *av = hbuf(n);
        d2h(c, ak, d_dk[s], n * 2), d2h(c, av, d_dv[s], n * 2);
        assert_memory_equal(ak, gdk_all[s], n * 2);
        assert_memory_equal(av, gdv_all[s], n * 2);
        free(ak), free(av), free(gdk_all[s]), free(gdv_all[s]);
    }

    for (int s = 0; s < S; s++) {
        lt_cuda_free(c, d_k[s]), lt_cuda_free(c, d_v[s]), lt_cuda_free(c, d_dk[s]), lt_cuda_free(c, d_dv[s]);
        free(k[s]), free(v[s]), free(dk0[s]), free(dv0[s]), free(dk[s]), free(dv[s]);
        free(hk[s]), free(hv[s]), free(hdk0[s]), free(hdv0[s]);
    }
    lt_cuda_free(c, d_q), lt_cuda_free(c, d_out), lt_cuda_free(c, d_dout), lt_cuda_free(c, d_dq);
    lt_cuda_free(c, d_lse);
    free(q), free(dout), free(dq0), free(hq), free(hdout), free(hdq0), free(out), free(lse), free(dq);
    free(hout0), free(gout), free(glse), free(gdq), free(in);
}

/* ---------------------------------------------------------------- tests */

/* No context: both functions fail with a message (in every build). */
static void test_no_context_fails_with_reason(void **state) {
    (void)state;
    lt_error err;
    lt_error_clear(&err);
    lt_cuda_attn_segment s = {0};
    assert_int_not_equal(lt_cuda_attention_forward(NULL, NULL, NULL, NULL, &s, 1, 1, 1, 1, 64, &err), LT_OK);
    assert_true(err.what[0] != '\0');
    lt_error_clear(&err);
    assert_int_not_equal(
        lt_cuda_attention_backward(NULL, NULL, NULL, NULL, NULL, NULL, &s, 1, 1, 1, 1, 64, &err), LT_OK);
    assert_true(err.what[0] != '\0');
}

static void test_hd64_gqa_context_aliasing(void **state) {
    (void)state;
    lt_cuda *c = open_or_skip();
    run_case(c, &CASE_HD64, 21);
    lt_cuda_close(c);
}

static void test_hd128_mqa_peaky_reversed(void **state) {
    (void)state;
    lt_cuda *c = open_or_skip();
    run_case(c, &CASE_HD128, 22);
    lt_cuda_close(c);
}

static void test_small_head_dims(void **state) {
    (void)state;
    lt_cuda *c = open_or_skip();
    run_case(c, &CASE_HD16, 24);
    run_case(c, &CASE_HD32, 25);
    lt_cuda_close(c);
}

static void test_long_context(void **state) {
    (void)state;
    lt_cuda *c = open_or_skip();
    run_case(c, &CASE_LONG, 23);
    lt_cuda_close(c);
}

/* No segments, or only empty ones: nothing runs, nothing changes, LT_OK. An unsupported
 * head dim is a configuration error naming it. */
static void test_empty_call_and_bad_head_dim(void **state) {
    (void)state;
    lt_cuda *c = open_or_skip();
    lt_error err;
    lt_error_clear(&err);
    enum { T = 4, NH = 2, HD = 64 };
    lt_bf16 *d_out = dalloc(c, T * NH * HD * 2);
    float *d_lse = dalloc(c, T * NH * sizeof(float));
    lt_bf16 host[T * NH * HD];
    for (int i = 0; i < T * NH * HD; i++) host[i] = lt_bf16_from_f32(3.0f);
    h2d(c, d_out, host, sizeof host);
    lt_cuda_attn_segment empty = {.row0 = 1, .n = 0, .begin = 2};
    assert_int_equal(lt_cuda_attention_forward(c, d_out, d_lse, d_out, NULL, 0, T, NH, 1, HD, &err), LT_OK);
    assert_int_equal(lt_cuda_attention_forward(c, d_out, d_lse, d_out, &empty, 1, T, NH, 1, HD, &err), LT_OK);
    assert_int_equal(lt_cuda_attention_backward(c, d_out, d_out, d_out, d_lse, d_out, &empty, 1, T, NH, 1, HD, &err),
                     LT_OK);
    sync_or_fail(c, "empty calls");
    lt_bf16 back[T * NH * HD];
    d2h(c, back, d_out, sizeof back);
    assert_memory_equal(back, host, sizeof host);

    lt_cuda_attn_segment one = {.row0 = 0, .n = 1, .begin = 0, .k = d_out, .v = d_out};
    /* head dims run padded up to 128 when a multiple of 8; 136 and 20 are refused */
    assert_int_equal(lt_cuda_attention_forward(c, d_out, d_lse, d_out, &one, 1, T, NH, 1, 136, &err), LT_ERR_CONFIG);
    printf("# hd 136: %s\n", err.what);
    assert_non_null(strstr(err.what, "136"));
    assert_int_equal(lt_cuda_attention_forward(c, d_out, d_lse, d_out, &one, 1, T, NH, 1, 20, &err), LT_ERR_CONFIG);
    /* a segment past the unit's rows is the caller's broken contract */
    lt_cuda_attn_segment past = {.row0 = 3, .n = 2, .begin = 0, .k = d_out, .v = d_out};
    assert_int_equal(lt_cuda_attention_forward(c, d_out, d_lse, d_out, &past, 1, T, NH, 1, HD, &err),
                     LT_ERR_INTERNAL);
    assert_non_null(strstr(err.what, "segment 0"));
    lt_cuda_free(c, d_out), lt_cuda_free(c, d_lse);
    lt_cuda_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_context_fails_with_reason),
        cmocka_unit_test(test_hd64_gqa_context_aliasing),
        cmocka_unit_test(test_hd128_mqa_peaky_reversed),
        cmocka_unit_test(test_small_head_dims),
        cmocka_unit_test(test_long_context),
        cmocka_unit_test(test_empty_call_and_bad_head_dim),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
