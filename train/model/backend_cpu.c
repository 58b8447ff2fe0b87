/*
 * train/model/backend_cpu.c — the CPU backends of train/model/backend.h:
 *   - "cpu": fp32 host buffers, each op one call of train/cpu/kernels.h (the reference; the
 *     pass through it gives the bytes it gave when it called the kernels itself);
 *   - "cpu-bf16": for tests only. Activations, K/V and their gradients are stored as bf16
 *     (2-byte elements); each op widens its inputs to fp32, runs the same fp32 kernel and
 *     rounds its outputs back to bf16 (round to nearest even). Weights stay fp32 and the
 *     arithmetic is the reference's, so what it checks is the HOST logic a bf16 backend
 *     needs (layouts, row moves, K/V rows, element sizes), and that gradients survive bf16
 *     storage within a bf16 tolerance; it says nothing about the GPU kernels themselves.
 *     Its LM head logits rows are padded as the GPU's (logits_pad 64, the padding poisoned
 *     under LONGTAIL_POISON), so the pass's padded layout runs in the tests.
 */
#include "train/model/backend.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/cpu/kernels.h" /* lt_embed_*, lt_rmsnorm_*, lt_linear_*, lt_rope_*, lt_attention_*, lt_swiglu_*, lt_xent_* */
#include "train/model/model.h" /* lt_llama */

/* ---------------------------------------------------------------- shared host memory ops */

/* LONGTAIL_POISON set and not "0" (the test suite sets it, Makefile.am; docs/testing.md):
 * fresh buffers not asked zeroed are filled with 0xFF bytes, a NaN in fp32 (0xFFFFFFFF) and
 * in bf16 (0xFFFF). malloc's fresh pages read as zeros where the GPU's reused arena blocks
 * hold garbage, so without it a pass that reads what it never wrote passes on the CPU by
 * luck; with it that read shows as NaN. Read at every allocation (tests may set it). */
static bool poisoning(void) {
    const char *v = getenv("LONGTAIL_POISON");
    return v && *v && strcmp(v, "0") != 0;
}

static void *host_alloc(const lt_backend *be, size_t bytes, bool zeroed) {
    (void)be;
    if (zeroed) return calloc(bytes ? bytes : 1, 1);
    void *p = malloc(bytes ? bytes : 1);
    if (p && poisoning()) memset(p, 0xFF, bytes ? bytes : 1);
    return p;
}
static void host_free(const lt_backend *be, void *p) { (void)be, free(p); }
static void host_zero(const lt_backend *be, void *p, size_t bytes) { (void)be, memset(p, 0, bytes); }
static void host_copy(const lt_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (dst != src && bytes) memmove(dst, src, bytes);
}
static lt_status host_to_host(const lt_backend *be, void *dst, const void *src, size_t bytes, lt_error *err) {
    (void)be, (void)err;
    if (bytes) memcpy(dst, src, bytes);
    return LT_OK;
}
static const void *host_weight(const lt_backend *be, const lt_llama *m, const float *view) {
    (void)be, (void)m;
    return view;
}

/* ---------------------------------------------------------------- fp32: the reference */

static lt_status f32_check(const lt_backend *be, lt_error *err) { return (void)be, (void)err, LT_OK; }
static lt_status f32_to_f32(const lt_backend *be, float *dst, const void *src, size_t n, lt_error *err) {
    return host_to_host(be, dst, src, n * sizeof(float), err);
}
static lt_status f32_from_f32(const lt_backend *be, void *dst, const float *src, size_t n, lt_error *err) {
    return host_to_host(be, dst, src, n * sizeof(float), err);
}
static void f32_add(const lt_backend *be, void *dst, const void *a, const void *b, size_t n) {
    (void)be;
    float *d = dst;
    const float *x = a, *y = b;
    for (size_t i = 0; i < n; i++) d[i] = x[i] + y[i];
}
static void f32_accumulate(const lt_backend *be, void *dst, const void *src, size_t n) {
    (void)be;
    float *d = dst;
    const float *s = src;
    for (size_t i = 0; i < n; i++) d[i] += s[i];
}
static void f32_accumulate_f32(const lt_backend *be, float *dst, const float *src, size_t n) {
    f32_accumulate(be, dst, src, n);
}
static void f32_sum_blocks(const lt_backend *be, void *dst, const void *src, int G, size_t stride, size_t n) {
    (void)be;
    float *d = dst;
    const float *a = src;
    for (size_t i = 0; i < n; i++) {
        float s = a[i];
        for (int j = 1; j < G; j++) s += a[(size_t)j * stride + i];
        d[i] = s;
    }
}
static void f32_embed_forward(const lt_backend *be, void *out, const int32_t *ids, int T, const void *wte, int C) {
    (void)be, lt_embed_forward(out, ids, T, wte, C);
}
static void f32_embed_backward(const lt_backend *be, float *dwte, const void *dout, const int32_t *ids, int T, int C) {
    (void)be, lt_embed_backward(dwte, dout, ids, T, C);
}
static void f32_rmsnorm_forward(const lt_backend *be, void *out, float *rstd, const void *x, const void *w, int T,
                                int C, float eps, lt_pool *pool) {
    (void)be, lt_rmsnorm_forward(out, rstd, x, w, T, C, eps, pool);
}
static void f32_rmsnorm_backward(const lt_backend *be, void *dx, float *dw, const void *dout, const void *x,
                                 const void *w, const float *rstd, int T, int C, lt_pool *pool) {
    (void)be, lt_rmsnorm_backward(dx, dw, dout, x, w, rstd, T, C, pool);
}
static void f32_linear_forward(const lt_backend *be, void *out, const void *x, const void *w, int T, int IN, int OUT) {
    (void)be, lt_linear_forward(out, x, w, T, IN, OUT);
}
static void f32_linear_backward(const lt_backend *be, void *dx, float *dw, const void *dout, const void *x,
                                const void *w, int T, int IN, int OUT) {
    (void)be, lt_linear_backward(dx, dw, dout, x, w, T, IN, OUT);
}
/* Rows ld apart: the reference keeps its logits dense (logits_pad 1), so ld > OUT only
 * reaches it from a caller that pads itself; row by row, simple rather than fast. */
static void f32_linear_forward_ld(const lt_backend *be, void *out, const void *x, const void *w, int T, int IN,
                                  int OUT, int ld) {
    if (ld == OUT) return f32_linear_forward(be, out, x, w, T, IN, OUT);
    for (int t = 0; t < T; t++)
        lt_linear_forward((float *)out + (size_t)t * ld, (const float *)x + (size_t)t * IN, w, 1, IN, OUT);
}
static void f32_linear_backward_ld(const lt_backend *be, void *dx, float *dw, const void *dout, const void *x,
                                   const void *w, int T, int IN, int OUT, int ld) {
    if (ld == OUT) return f32_linear_backward(be, dx, dw, dout, x, w, T, IN, OUT);
    for (int t = 0; t < T; t++)
        lt_linear_backward(dx ? (float *)dx + (size_t)t * IN : NULL, dw, (const float *)dout + (size_t)t * ld,
                           (const float *)x + (size_t)t * IN, w, 1, IN, OUT);
}
static void f32_bias_forward(const lt_backend *be, void *y, const void *b, int T, int n) {
    (void)be, lt_bias_forward(y, b, T, n);
}
static void f32_bias_backward(const lt_backend *be, float *db, const void *dy, int T, int n) {
    (void)be, lt_bias_backward(db, dy, T, n);
}
static void f32_rope_forward(const lt_backend *be, void *x, const int32_t *pos, int T, int nh, int hd,
                             const float *inv_freq, lt_pool *pool) {
    (void)be, lt_rope_forward(x, pos, T, nh, hd, inv_freq, pool);
}
static void f32_rope_backward(const lt_backend *be, void *dx, const int32_t *pos, int T, int nh, int hd,
                              const float *inv_freq, lt_pool *pool) {
    (void)be, lt_rope_backward(dx, pos, T, nh, hd, inv_freq, pool);
}
static void f32_attention_forward(const lt_backend *be, void *out, float *lse, const void *q,
                                  const lt_attn_segment *segs, int n_segs, int T, int nh, int nkv, int hd,
                                  lt_pool *pool) {
    (void)be, (void)T, lt_attention_forward(out, lse, q, segs, n_segs, nh, nkv, hd, pool);
}
static void f32_attention_backward(const lt_backend *be, void *dq, const void *dout, const void *out,
                                   const float *lse, const void *q, const lt_attn_segment *segs, int n_segs, int T,
                                   int nh, int nkv, int hd, lt_pool *pool) {
    (void)be, (void)T, lt_attention_backward(dq, dout, out, lse, q, segs, n_segs, nh, nkv, hd, pool);
}
static void f32_swiglu_forward(const lt_backend *be, void *out, const void *gate, const void *up, size_t n,
                               lt_pool *pool) {
    (void)be, lt_swiglu_forward(out, gate, up, n, pool);
}
static void f32_swiglu_backward(const lt_backend *be, void *dgate, void *dup, const void *dout, const void *gate,
                                const void *up, size_t n, lt_pool *pool) {
    (void)be, lt_swiglu_backward(dgate, dup, dout, gate, up, n, pool);
}
/* The cross-entropies over rows ld apart: dense (ld == V) in one call as before, else a row
 * at a time (the reference's rows are dense; see f32_linear_forward_ld). */
static double f32_xent(const lt_backend *be, void *dlogits, const void *logits, const int32_t *targets, int T, int V,
                       int ld, float scale, lt_pool *pool) {
    (void)be;
    if (ld == V) return lt_xent_forward_backward(dlogits, logits, targets, T, V, scale, pool);
    double loss = 0;
    for (int t = 0; t < T; t++)
        loss += lt_xent_forward_backward(dlogits ? (float *)dlogits + (size_t)t * ld : NULL,
                                         (const float *)logits + (size_t)t * ld, targets + t, 1, V, scale, NULL);
    return loss;
}

static void f32_xent_tp_max(const lt_backend *be, float *rowmax, const void *logits, int T, int V, int ld) {
    (void)be;
    if (ld == V) return lt_xent_tp_max(rowmax, logits, T, V);
    for (int t = 0; t < T; t++) lt_xent_tp_max(rowmax + t, (const float *)logits + (size_t)t * ld, 1, V);
}
static void f32_xent_tp_sums(const lt_backend *be, float *sums, const void *logits, const float *rowmax,
                             const int32_t *targets, int v0, int T, int V, int ld) {
    (void)be;
    if (ld == V) return lt_xent_tp_sums(sums, logits, rowmax, targets, v0, T, V);
    for (int t = 0; t < T; t++) { /* sums of one row: [exp sum, target logit] */
        float two[2];
        lt_xent_tp_sums(two, (const float *)logits + (size_t)t * ld, rowmax + t, targets + t, v0, 1, V);
        sums[t] = two[0], sums[(size_t)T + t] = two[1];
    }
}
static double f32_xent_tp_finish(const lt_backend *be, void *dlogits, const void *logits, const float *rowmax,
                                 const float *sums, const int32_t *targets, int v0, int T, int V, int ld, float scale) {
    (void)be;
    if (ld == V) return lt_xent_tp_finish(dlogits, logits, rowmax, sums, targets, v0, T, V, scale);
    double loss = 0;
    for (int t = 0; t < T; t++) {
        float two[2] = {sums[t], sums[(size_t)T + t]};
        loss += lt_xent_tp_finish(dlogits ? (float *)dlogits + (size_t)t * ld : NULL,
                                  (const float *)logits + (size_t)t * ld, rowmax + t, two, targets + t, v0, 1, V,
                                  scale);
    }
    return loss;
}

static const lt_backend cpu_f32 = {
    .name = "cpu", .act_bytes = sizeof(float), .weight_bytes = sizeof(float), .align = sizeof(float), .logits_pad = 1, .host = true,
    .alloc = host_alloc, .free = host_free, .zero = host_zero, .copy = host_copy,
    .to_host = host_to_host, .from_host = host_to_host, .to_host_f32 = f32_to_f32, .from_host_f32 = f32_from_f32,
    .check = f32_check, .add = f32_add, .accumulate = f32_accumulate, .accumulate_f32 = f32_accumulate_f32, .sum_blocks = f32_sum_blocks, .weight = host_weight,
    .embed_forward = f32_embed_forward, .embed_backward = f32_embed_backward,
    .rmsnorm_forward = f32_rmsnorm_forward, .rmsnorm_backward = f32_rmsnorm_backward,
    .linear_forward = f32_linear_forward, .linear_backward = f32_linear_backward,
    .linear_forward_ld = f32_linear_forward_ld, .linear_backward_ld = f32_linear_backward_ld,
    .bias_forward = f32_bias_forward, .bias_backward = f32_bias_backward,
    .rope_forward = f32_rope_forward, .rope_backward = f32_rope_backward,
    .attention_forward = f32_attention_forward, .attention_backward = f32_attention_backward,
    .swiglu_forward = f32_swiglu_forward, .swiglu_backward = f32_swiglu_backward, .xent = f32_xent,
    .xent_tp_max = f32_xent_tp_max, .xent_tp_sums = f32_xent_tp_sums, .xent_tp_finish = f32_xent_tp_finish,
};

const lt_backend *lt_backend_cpu(void) { return &cpu_f32; }

const lt_backend *lt_backend_of(const lt_llama *m) { return m && m->backend ? m->backend : &cpu_f32; }

/* every backend's (train/model/backend.h) */
lt_status lt_backend_nomem(const lt_backend *be, lt_error *err, const char *where, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    lt_error why;
    if (!be || !be->alloc_failure || !be->alloc_failure(be, &why)) return lt_fail(err, LT_ERR_NOMEM, where, "%s", what);
    lt_fail(err, LT_ERR_NOMEM, where, "%s: %s", what, why.what);
    if (why.hint[0]) lt_error_hint(err, "%s", why.hint);
    return LT_ERR_NOMEM;
}

/* ---------------------------------------------------------------- bf16 storage (tests) */

/* The emulation's first failure (an allocation of a widened copy): its sticky error. */
static lt_status bf16_failed = LT_OK;

static float *widen(const void *p, size_t n) {
    if (!p) return NULL;
    float *f = malloc((n ? n : 1) * sizeof(float));
    if (!f) {
        bf16_failed = LT_ERR_NOMEM;
        return NULL;
    }
    const uint16_t *b = p;
    for (size_t i = 0; i < n; i++) f[i] = lt_bf16_to_f32(b[i]);
    return f;
}

/* Round f back into p (when both exist) and free f. */
static void narrow(void *p, float *f, size_t n) {
    if (p && f) {
        uint16_t *b = p;
        for (size_t i = 0; i < n; i++) b[i] = lt_bf16_from_f32(f[i]);
    }
    free(f);
}

/* A widened output that the kernel only writes: no need to read the old values (poisoned
 * like a fresh buffer, so an element the kernel leaves unwritten shows as NaN here too). */
static float *scratch(const void *p, size_t n) {
    if (!p) return NULL;
    float *f = malloc((n ? n : 1) * sizeof(float));
    if (!f) bf16_failed = LT_ERR_NOMEM;
    else if (poisoning()) memset(f, 0xFF, (n ? n : 1) * sizeof(float));
    return f;
}

static lt_status bf16_check(const lt_backend *be, lt_error *err) {
    (void)be;
    if (bf16_failed == LT_OK) return LT_OK;
    bf16_failed = LT_OK;
    return lt_fail(err, LT_ERR_NOMEM, "cpu-bf16 backend", "out of memory for a widened fp32 copy");
}
static lt_status bf16_to_f32(const lt_backend *be, float *dst, const void *src, size_t n, lt_error *err) {
    (void)be, (void)err;
    const uint16_t *b = src;
    for (size_t i = 0; i < n; i++) dst[i] = lt_bf16_to_f32(b[i]);
    return LT_OK;
}
static lt_status bf16_from_f32(const lt_backend *be, void *dst, const float *src, size_t n, lt_error *err) {
    (void)be, (void)err;
    uint16_t *b = dst;
    for (size_t i = 0; i < n; i++) b[i] = lt_bf16_from_f32(src[i]);
    return LT_OK;
}
static void bf16_add(const lt_backend *be, void *dst, const void *a, const void *b, size_t n) {
    (void)be;
    uint16_t *d = dst;
    const uint16_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        d[i] = lt_bf16_from_f32(lt_bf16_to_f32(x[i]) + lt_bf16_to_f32(y[i]));
}
static void bf16_accumulate(const lt_backend *be, void *dst, const void *src, size_t n) {
    bf16_add(be, dst, dst, src, n);
}
static void bf16_sum_blocks(const lt_backend *be, void *dst, const void *src, int G, size_t stride, size_t n) {
    (void)be;
    uint16_t *d = dst;
    const uint16_t *a = src;
    for (size_t i = 0; i < n; i++) {
        float s = lt_bf16_to_f32(a[i]);
        for (int j = 1; j < G; j++) s += lt_bf16_to_f32(a[(size_t)j * stride + i]);
        d[i] = lt_bf16_from_f32(s);
    }
}

/* every widened copy so far exists (else ops are skipped, the failure kept) */
static bool ok(void) { return bf16_failed == LT_OK; }

/* T rows of V bf16 elements, `ld` apart, widened into dense fp32 [T, V]: the padding
 * columns [V, ld) of the LM head's logits are never read. */
static float *widen_rows(const void *p, int T, int V, int ld) {
    if (ld == V || !p) return widen(p, (size_t)T * (size_t)V);
    size_t n = (size_t)T * (size_t)V;
    float *f = malloc((n ? n : 1) * sizeof(float));
    if (!f) {
        bf16_failed = LT_ERR_NOMEM;
        return NULL;
    }
    const uint16_t *b = p;
    for (int t = 0; t < T; t++)
        for (int v = 0; v < V; v++) f[(size_t)t * V + v] = lt_bf16_to_f32(b[(size_t)t * ld + v]);
    return f;
}

/* Dense fp32 [T, V] rounded back into rows `ld` apart (the padding left as it was), f freed. */
static void narrow_rows(void *p, float *f, int T, int V, int ld) {
    if (ld == V) return narrow(p, f, (size_t)T * (size_t)V);
    if (p && f) {
        uint16_t *b = p;
        for (int t = 0; t < T; t++)
            for (int v = 0; v < V; v++) b[(size_t)t * ld + v] = lt_bf16_from_f32(f[(size_t)t * V + v]);
    }
    free(f);
}

static void bf16_embed_forward(const lt_backend *be, void *out, const int32_t *ids, int T, const void *wte, int C) {
    (void)be;
    size_t n = (size_t)T * (size_t)C;
    float *o = scratch(out, n);
    if (o) lt_embed_forward(o, ids, T, wte, C);
    narrow(out, o, n);
}
static void bf16_embed_backward(const lt_backend *be, float *dwte, const void *dout, const int32_t *ids, int T, int C) {
    (void)be;
    float *d = widen(dout, (size_t)T * (size_t)C);
    if (d) lt_embed_backward(dwte, d, ids, T, C);
    free(d);
}
static void bf16_rmsnorm_forward(const lt_backend *be, void *out, float *rstd, const void *x, const void *w, int T,
                                 int C, float eps, lt_pool *pool) {
    (void)be;
    size_t n = (size_t)T * (size_t)C;
    float *xf = widen(x, n), *o = scratch(out, n);
    if (xf && o) lt_rmsnorm_forward(o, rstd, xf, w, T, C, eps, pool);
    narrow(out, o, n), free(xf);
}
static void bf16_rmsnorm_backward(const lt_backend *be, void *dx, float *dw, const void *dout, const void *x,
                                  const void *w, const float *rstd, int T, int C, lt_pool *pool) {
    (void)be;
    size_t n = (size_t)T * (size_t)C;
    float *dxf = widen(dx, n), *df = widen(dout, n), *xf = widen(x, n);
    if (dxf && df && xf) lt_rmsnorm_backward(dxf, dw, df, xf, w, rstd, T, C, pool);
    narrow(dx, dxf, n), free(df), free(xf);
}
static void bf16_linear_forward_ld(const lt_backend *be, void *out, const void *x, const void *w, int T, int IN,
                                   int OUT, int ld) {
    (void)be;
    float *xf = widen(x, (size_t)T * IN), *o = scratch(out, (size_t)T * OUT);
    if (xf && o) lt_linear_forward(o, xf, w, T, IN, OUT);
    narrow_rows(out, o, T, OUT, ld), free(xf);
}
static void bf16_linear_backward_ld(const lt_backend *be, void *dx, float *dw, const void *dout, const void *x,
                                    const void *w, int T, int IN, int OUT, int ld) {
    (void)be;
    float *dxf = widen(dx, (size_t)T * IN), *df = widen_rows(dout, T, OUT, ld), *xf = widen(x, (size_t)T * IN);
    if (ok() && df && xf) lt_linear_backward(dxf, dw, df, xf, w, T, IN, OUT);
    narrow(dx, dxf, (size_t)T * IN), free(df), free(xf);
}
static void bf16_linear_forward(const lt_backend *be, void *out, const void *x, const void *w, int T, int IN,
                                int OUT) {
    bf16_linear_forward_ld(be, out, x, w, T, IN, OUT, OUT);
}
static void bf16_linear_backward(const lt_backend *be, void *dx, float *dw, const void *dout, const void *x,
                                 const void *w, int T, int IN, int OUT) {
    bf16_linear_backward_ld(be, dx, dw, dout, x, w, T, IN, OUT, OUT);
}
static void bf16_bias_forward(const lt_backend *be, void *y, const void *b, int T, int n) {
    (void)be;
    float *yf = widen(y, (size_t)T * n);
    if (yf) lt_bias_forward(yf, b, T, n);
    narrow(y, yf, (size_t)T * n);
}
static void bf16_bias_backward(const lt_backend *be, float *db, const void *dy, int T, int n) {
    (void)be;
    float *df = widen(dy, (size_t)T * n);
    if (df) lt_bias_backward(db, df, T, n);
    free(df);
}
static void bf16_rope(void *x, const int32_t *pos, int T, int nh, int hd, const float *inv_freq, lt_pool *pool,
                      bool fwd) {
    size_t n = (size_t)T * (size_t)nh * (size_t)hd;
    float *f = widen(x, n);
    if (f && fwd) lt_rope_forward(f, pos, T, nh, hd, inv_freq, pool);
    if (f && !fwd) lt_rope_backward(f, pos, T, nh, hd, inv_freq, pool);
    narrow(x, f, n);
}
static void bf16_rope_forward(const lt_backend *be, void *x, const int32_t *pos, int T, int nh, int hd,
                              const float *inv_freq, lt_pool *pool) {
    (void)be, bf16_rope(x, pos, T, nh, hd, inv_freq, pool, true);
}
static void bf16_rope_backward(const lt_backend *be, void *dx, const int32_t *pos, int T, int nh, int hd,
                               const float *inv_freq, lt_pool *pool) {
    (void)be, bf16_rope(dx, pos, T, nh, hd, inv_freq, pool, false);
}

/* The segments' context buffers widened: segments of one sample share their buffers (the
 * kernel accumulates dK/dV of aliased segments), so each distinct buffer is widened once,
 * over the longest prefix any of its segments reads, and written back once. */
typedef struct wide_segs {
    lt_attn_segment *s; /* fp32 twins of the segments */
    float **f;          /* [4 n] widened k, v, dk, dv of segment i (shared by aliases) */
    size_t *rows;       /* [n] rows widened for the buffers first seen at segment i (0: alias) */
} wide_segs;

static bool widen_segs(wide_segs *w, const lt_attn_segment *segs, int n, int kvd, bool grad) {
    w->s = calloc((size_t)n + 1, sizeof *w->s);
    w->f = calloc(4 * (size_t)n + 1, sizeof *w->f);
    w->rows = calloc((size_t)n + 1, sizeof *w->rows);
    if (!w->s || !w->f || !w->rows) return bf16_failed = LT_ERR_NOMEM, false;
    for (int i = 0; i < n; i++) {
        int first = i;
        for (int j = 0; j < i; j++)
            if (segs[j].k == segs[i].k) {
                first = j;
                break;
            }
        size_t need = (size_t)segs[i].begin + (size_t)segs[i].n;
        if (need > w->rows[first]) w->rows[first] = need;
    }
    for (int i = 0; i < n; i++) {
        int first = i;
        for (int j = 0; j < i; j++)
            if (segs[j].k == segs[i].k) {
                first = j;
                break;
            }
        if (first == i) {
            size_t e = w->rows[i] * (size_t)kvd;
            const void *src[4] = {segs[i].k, segs[i].v, grad ? segs[i].dk : NULL, grad ? segs[i].dv : NULL};
            for (int b = 0; b < 4; b++)
                if (src[b] && !(w->f[4 * i + b] = widen(src[b], e))) return false;
        } else {
            for (int b = 0; b < 4; b++) w->f[4 * i + b] = w->f[4 * first + b];
        }
        w->s[i] = segs[i];
        w->s[i].k = w->f[4 * i], w->s[i].v = w->f[4 * i + 1];
        w->s[i].dk = w->f[4 * i + 2], w->s[i].dv = w->f[4 * i + 3];
    }
    return true;
}

/* Write dK/dV back (write_grad) and free the widened buffers. */
static void drop_segs(wide_segs *w, const lt_attn_segment *segs, int n, int kvd, bool write_grad) {
    for (int i = 0; w->f && w->rows && i < n; i++) {
        if (!w->rows[i]) continue; /* an alias: freed with its first segment */
        size_t e = w->rows[i] * (size_t)kvd;
        if (write_grad && bf16_failed == LT_OK) {
            narrow(segs[i].dk, w->f[4 * i + 2], e), w->f[4 * i + 2] = NULL;
            narrow(segs[i].dv, w->f[4 * i + 3], e), w->f[4 * i + 3] = NULL;
        }
        for (int b = 0; b < 4; b++) free(w->f[4 * i + b]);
    }
    free(w->s), free(w->f), free(w->rows);
}

static void bf16_attention_forward(const lt_backend *be, void *out, float *lse, const void *q,
                                   const lt_attn_segment *segs, int n_segs, int T, int nh, int nkv, int hd,
                                   lt_pool *pool) {
    (void)be;
    size_t n = (size_t)T * (size_t)nh * (size_t)hd;
    wide_segs w = {0};
    float *qf = widen(q, n), *o = scratch(out, n);
    if (widen_segs(&w, segs, n_segs, nkv * hd, false) && qf && o)
        lt_attention_forward(o, lse, qf, w.s, n_segs, nh, nkv, hd, pool);
    drop_segs(&w, segs, n_segs, nkv * hd, false);
    narrow(out, o, n), free(qf);
}
static void bf16_attention_backward(const lt_backend *be, void *dq, const void *dout, const void *out,
                                    const float *lse, const void *q, const lt_attn_segment *segs, int n_segs, int T,
                                    int nh, int nkv, int hd, lt_pool *pool) {
    (void)be;
    size_t n = (size_t)T * (size_t)nh * (size_t)hd;
    wide_segs w = {0};
    float *dqf = widen(dq, n), *df = widen(dout, n), *of = widen(out, n), *qf = widen(q, n);
    if (widen_segs(&w, segs, n_segs, nkv * hd, true) && dqf && df && of && qf)
        lt_attention_backward(dqf, df, of, lse, qf, w.s, n_segs, nh, nkv, hd, pool);
    drop_segs(&w, segs, n_segs, nkv * hd, true);
    narrow(dq, dqf, n), free(df), free(of), free(qf);
}
static void bf16_swiglu_forward(const lt_backend *be, void *out, const void *gate, const void *up, size_t n,
                                lt_pool *pool) {
    (void)be;
    float *g = widen(gate, n), *u = widen(up, n), *o = scratch(out, n);
    if (g && u && o) lt_swiglu_forward(o, g, u, n, pool);
    narrow(out, o, n), free(g), free(u);
}
static void bf16_swiglu_backward(const lt_backend *be, void *dgate, void *dup, const void *dout, const void *gate,
                                 const void *up, size_t n, lt_pool *pool) {
    (void)be;
    float *dg = widen(dgate, n), *du = widen(dup, n), *df = widen(dout, n), *g = widen(gate, n), *u = widen(up, n);
    if (dg && du && df && g && u) lt_swiglu_backward(dg, du, df, g, u, n, pool);
    narrow(dgate, dg, n), narrow(dup, du, n), free(df), free(g), free(u);
}
static double bf16_xent(const lt_backend *be, void *dlogits, const void *logits, const int32_t *targets, int T, int V,
                        int ld, float scale, lt_pool *pool) {
    (void)be;
    float *l = widen_rows(logits, T, V, ld);
    double loss = 0;
    if (l) loss = lt_xent_forward_backward(dlogits ? l : NULL, l, targets, T, V, scale, pool);
    if (dlogits && l) narrow_rows(dlogits, l, T, V, ld);
    else free(l);
    return loss;
}

static void bf16_xent_tp_max(const lt_backend *be, float *rowmax, const void *logits, int T, int V, int ld) {
    (void)be;
    float *l = widen_rows(logits, T, V, ld);
    if (l) lt_xent_tp_max(rowmax, l, T, V);
    free(l);
}
static void bf16_xent_tp_sums(const lt_backend *be, float *sums, const void *logits, const float *rowmax,
                              const int32_t *targets, int v0, int T, int V, int ld) {
    (void)be;
    float *l = widen_rows(logits, T, V, ld);
    if (l) lt_xent_tp_sums(sums, l, rowmax, targets, v0, T, V);
    free(l);
}
static double bf16_xent_tp_finish(const lt_backend *be, void *dlogits, const void *logits, const float *rowmax,
                                  const float *sums, const int32_t *targets, int v0, int T, int V, int ld, float scale) {
    (void)be;
    float *l = widen_rows(logits, T, V, ld);
    double loss = 0;
    if (l) loss = lt_xent_tp_finish(dlogits ? l : NULL, l, rowmax, sums, targets, v0, T, V, scale);
    if (dlogits && l) narrow_rows(dlogits, l, T, V, ld);
    else free(l);
    return loss;
}

static const lt_backend cpu_bf16 = {
    .name = "cpu-bf16", .act_bytes = 2, .weight_bytes = sizeof(float), .align = 16, .logits_pad = 64, .host = true,
    .alloc = host_alloc, .free = host_free, .zero = host_zero, .copy = host_copy,
    .to_host = host_to_host, .from_host = host_to_host, .to_host_f32 = bf16_to_f32, .from_host_f32 = bf16_from_f32,
    .check = bf16_check, .add = bf16_add, .accumulate = bf16_accumulate, .accumulate_f32 = f32_accumulate_f32, .sum_blocks = bf16_sum_blocks, .weight = host_weight,
    .embed_forward = bf16_embed_forward, .embed_backward = bf16_embed_backward,
    .rmsnorm_forward = bf16_rmsnorm_forward, .rmsnorm_backward = bf16_rmsnorm_backward,
    .linear_forward = bf16_linear_forward, .linear_backward = bf16_linear_backward,
    .linear_forward_ld = bf16_linear_forward_ld, .linear_backward_ld = bf16_linear_backward_ld,
    .bias_forward = bf16_bias_forward, .bias_backward = bf16_bias_backward,
    .rope_forward = bf16_rope_forward, .rope_backward = bf16_rope_backward,
    .attention_forward = bf16_attention_forward, .attention_backward = bf16_attention_backward,
    .swiglu_forward = bf16_swiglu_forward, .swiglu_backward = bf16_swiglu_backward, .xent = bf16_xent,
    .xent_tp_max = bf16_xent_tp_max, .xent_tp_sums = bf16_xent_tp_sums, .xent_tp_finish = bf16_xent_tp_finish,
};

const lt_backend *lt_backend_cpu_bf16(void) { return &cpu_bf16; }
