/*
 * train/model/backend_cuda.c — the CUDA backend of train/model/backend.h over kernels/cuda.h: the pass's
 * buffers in device memory, bf16 activations / K / V and their gradients, fp32 rstd, lse and
 * parameter gradients; the model's parameters as an fp32 master copy beside the bf16 copy
 * the kernels read, AdamW (fp32 master, m, v) and gradient-norm clipping on the device.
 *
 * Plain C, compiled in every build: without CUDA, kernels/cuda_none.c makes lt_cuda_open
 * fail with "built without CUDA" and lt_backend_cuda_open returns that error, so nothing
 * below is reached. NOTHING HERE HAS RUN ON A GPU YET (no device was lent to this work):
 * it compiles against kernels/cuda.h and follows its contract; the host logic it shares
 * with the CPU backends (layouts, row moves, K/V rows in 2-byte elements) is what
 * tests/train/test_backend.c runs through the cpu-bf16 backend.
 *
 * Ordering: every op is queued on the context's compute stream (kernels/cuda.h); host
 * copies synchronize; `check` synchronizes the stream and reports the first failure, `poll`
 * reports it without waiting (the pass polls after every half layer and checks once, at
 * its end). Host arrays (token ids, positions, targets) reach the device by lt_cuda_upload
 * (pinned staging, no wait): a unit's bound once for its pass (bind_ints), others staged
 * into an op block per call. The cross-entropy's sums stay on the device until take_loss.
 *
 * Memory: with an arena (lt_backend_cuda_reserve: one cudaMalloc sized by the caller from
 * the plan's predicted peak) the pass's allocations, the op blocks (staged ints, row
 * losses, overlapping copies) and the kernels' scratch are arena blocks, so a step never
 * calls cudaMalloc or cudaFree and the arena's peak is the measured device peak; without
 * one they are plain cudaMallocs and kept buffers. Parameters, master, moments and
 * gradients are allocated once, outside it. lt_backend_cuda_counts says what a step did.
 */
#include "train/model/backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/arena.h"     /* lt_arena_*: the step's device memory */
#include "kernels/cuda.h"      /* lt_cuda_*: context, memory, kernels */
#include "train/model/model.h" /* lt_llama */
#include "train/model/optim.h" /* lt_optim_config */

typedef struct cuda_state {
    lt_backend be; /* first: be.ctx points back here */
    lt_cuda *cu;
    lt_arena *arena;
    void *arena_base;
    lt_status failed; /* the first failure of an op (sticky), its message in first */
    lt_error first;
    bool alloc_failed; /* the last failed alloc's reason, until lt_backend_nomem takes it */
    lt_error alloc_why;
    /* without an arena, the kept op buffers (op_block) */
    int32_t *ints; /* device staging for host int arrays outside a binding */
    size_t ints_cap;
    float *row_loss; /* xent's per-row losses */
    size_t row_loss_cap;
    void *tmp; /* overlapping copies go through it */
    size_t tmp_cap;
    /* the units' host int arrays bound to device copies (bind_ints), a few at once */
    struct ints_binding {
        const int32_t *host;
        size_t n;
        int32_t *dev;
    } *bound;
    int n_bound, cap_bound;
    bool loss_pending; /* the LT_CUDA_SUM_LOSS slot holds sums not yet taken (take_loss) */
    /* the model on the device (lt_backend_cuda_upload) */
    const float *host_params; /* m->params: weight views are offsets into it */
    size_t n_params;
    lt_bf16 *w16;                 /* n_params, or more (lt_backend_cuda_upload_sharded's padding) */
    float *master, *mom1, *mom2;  /* NULL when sharded (the DP shards hold them) */
    size_t states_bytes;          /* model-state bytes allocated (lt_backend_cuda_states_bytes) */
} cuda_state;

static cuda_state *state_of(const lt_backend *be) { return (cuda_state *)be->ctx; }

/* Keep the first failure; later ops are skipped until `check` reports it. */
static void note(cuda_state *s, lt_status st, const lt_error *e) {
    if (st != LT_OK && s->failed == LT_OK) s->failed = st, s->first = *e;
}

#define RUN(s, call)                                                                                                   \
    do {                                                                                                               \
        if ((s)->failed == LT_OK) {                                                                                    \
            lt_error e_;                                                                                               \
            lt_status st_ = (call);                                                                                    \
            note((s), st_, &e_);                                                                                       \
        }                                                                                                              \
    } while (0)

/* A device buffer of at least `bytes` kept in *p (grown by reallocation). */
static bool grow(cuda_state *s, void **p, size_t *cap, size_t bytes) {
    if (bytes <= *cap) return true;
    lt_error e;
    lt_status st = lt_cuda_sync(s->cu, &e); /* the old buffer may still be read by queued work */
    if (st == LT_OK) {
        lt_cuda_free(s->cu, *p), *p = NULL, *cap = 0;
        st = lt_cuda_malloc(s->cu, p, bytes, &e);
    }
    note(s, st, &e);
    if (st == LT_OK) *cap = bytes;
    return st == LT_OK;
}

/* A device block of `bytes` for one op (staged ints, row losses, an overlapping copy): with
 * an arena, an arena block that op_done gives back as soon as the op is queued (the arena
 * hands it out again only to later work on the stream, which runs after the op: no wait and
 * no cudaMalloc in a step); without one, the buffer *keep, kept and grown by reallocation.
 * NULL after a failure (kept). */
static void *op_block(cuda_state *s, void **keep, size_t *cap, size_t bytes) {
    if (s->failed != LT_OK) return NULL;
    if (!s->arena) return grow(s, keep, cap, bytes ? bytes : 1) ? *keep : NULL;
    void *p = NULL;
    lt_error e;
    lt_status st = lt_arena_alloc(s->arena, bytes ? bytes : 1, "a kernel's staging buffer", &p, &e);
    note(s, st, &e);
    return st == LT_OK ? p : NULL;
}

static void op_done(cuda_state *s, void *block) {
    if (!s->arena || !block) return;
    lt_error e;
    note(s, lt_arena_free(s->arena, block, &e), &e);
}

/* T host ints as a device array: inside a bound range (bind_ints), its copy, uploaded once
 * a unit; else staged into an op block (*block, for op_done) by an asynchronous upload
 * (stream-ordered: queued kernels reading the block's earlier contents run before the
 * copy). NULL after a failure (kept). */
static const int32_t *stage_ints(cuda_state *s, const int32_t *host, int T, void **block) {
    *block = NULL;
    if (s->failed != LT_OK) return NULL;
    for (int i = 0; i < s->n_bound; i++) {
        const struct ints_binding *b = &s->bound[i];
        if (host >= b->host && host + T <= b->host + b->n) return b->dev + (host - b->host);
    }
    int32_t *d = op_block(s, (void **)&s->ints, &s->ints_cap, (size_t)(T > 0 ? T : 1) * sizeof(int32_t));
    if (!d) return NULL;
    *block = d;
    lt_error e;
    lt_status st = lt_cuda_upload(s->cu, d, host, (size_t)T * sizeof(int32_t), &e);
    note(s, st, &e);
    return st == LT_OK ? d : NULL;
}

static void cu_bind_ints(const lt_backend *be, const int32_t *host, size_t n) {
    cuda_state *s = state_of(be);
    if (s->failed != LT_OK || n == 0) return;
    if (s->n_bound == s->cap_bound) {
        int cap = s->cap_bound ? 2 * s->cap_bound : 4;
        struct ints_binding *b = realloc(s->bound, (size_t)cap * sizeof *b);
        lt_error e;
        if (!b) {
            note(s, lt_fail(&e, LT_ERR_NOMEM, "cuda backend", "out of memory for %d bindings", cap), &e);
            return;
        }
        s->bound = b, s->cap_bound = cap;
    }
    void *d = NULL;
    lt_error e;
    lt_status st = s->arena ? lt_arena_alloc(s->arena, n * sizeof(int32_t), "a unit's token ids, positions and targets",
                                             &d, &e)
                            : lt_cuda_malloc(s->cu, &d, n * sizeof(int32_t), &e);
    if (st == LT_OK) st = lt_cuda_upload(s->cu, d, host, n * sizeof(int32_t), &e);
    if (st != LT_OK) {
        note(s, st, &e);
        if (d && s->arena) (void)lt_arena_free(s->arena, d, &e);
        else lt_cuda_free(s->cu, d);
        return;
    }
    s->bound[s->n_bound++] = (struct ints_binding){.host = host, .n = n, .dev = d};
}

static void cu_unbind_ints(const lt_backend *be, const int32_t *host) {
    cuda_state *s = state_of(be);
    for (int i = 0; i < s->n_bound; i++) {
        if (s->bound[i].host != host) continue;
        void *d = s->bound[i].dev;
        s->bound[i] = s->bound[--s->n_bound];
        if (s->arena) { /* stream order: queued kernels still reading it run before its next user */
            lt_error e;
            note(s, lt_arena_free(s->arena, d, &e), &e);
        } else {
            lt_cuda_free(s->cu, d); /* cudaFree synchronizes */
        }
        return;
    }
}

/* ---------------------------------------------------------------- memory */

static void *cu_alloc(const lt_backend *be, size_t bytes, bool zeroed) {
    cuda_state *s = state_of(be);
    void *p = NULL;
    lt_error e;
    lt_status st = s->arena ? lt_arena_alloc(s->arena, bytes, "a pass buffer", &p, &e)
                            : lt_cuda_malloc(s->cu, &p, bytes ? bytes : 1, &e);
    if (st != LT_OK) { /* the caller names what it was allocating, lt_backend_nomem adds why */
        s->alloc_failed = true, s->alloc_why = e;
        return NULL;
    }
    if (zeroed) RUN(s, lt_cuda_memset(s->cu, p, 0, bytes, &e_));
    return p;
}

static bool cu_alloc_failure(const lt_backend *be, lt_error *why) {
    cuda_state *s = state_of(be);
    bool had = s->alloc_failed;
    if (had && why) *why = s->alloc_why;
    s->alloc_failed = false;
    return had;
}

static void cu_free(const lt_backend *be, void *p) {
    cuda_state *s = state_of(be);
    if (!p) return;
    if (s->arena) {
        /* the block may still be read by queued kernels: the arena hands it out again only
         * to later work on the same stream, which runs after them (stream order) */
        lt_error e;
        note(s, lt_arena_free(s->arena, p, &e), &e);
    } else {
        lt_cuda_free(s->cu, p); /* cudaFree synchronizes */
    }
}

static void cu_zero(const lt_backend *be, void *p, size_t bytes) {
    cuda_state *s = state_of(be);
    RUN(s, lt_cuda_memset(s->cu, p, 0, bytes, &e_));
}

static void cu_copy(const lt_backend *be, void *dst, const void *src, size_t bytes) {
    cuda_state *s = state_of(be);
    if (dst == src || bytes == 0) return;
    const char *d = dst, *r = src;
    if (d < r + bytes && r < d + bytes) { /* overlap (lt_acts_keep_rows): through the scratch */
        void *tmp = op_block(s, &s->tmp, &s->tmp_cap, bytes);
        if (!tmp) return;
        RUN(s, lt_cuda_copy_d2d(s->cu, tmp, src, bytes, &e_));
        RUN(s, lt_cuda_copy_d2d(s->cu, dst, tmp, bytes, &e_));
        op_done(s, tmp);
        return;
    }
    RUN(s, lt_cuda_copy_d2d(s->cu, dst, src, bytes, &e_));
}

static lt_status cu_to_host(const lt_backend *be, void *host, const void *src, size_t bytes, lt_error *err) {
    return lt_cuda_copy_d2h(state_of(be)->cu, host, src, bytes, err);
}

static lt_status cu_from_host(const lt_backend *be, void *dst, const void *host, size_t bytes, lt_error *err) {
    return lt_cuda_copy_h2d(state_of(be)->cu, dst, host, bytes, err);
}

static lt_status cu_to_host_f32(const lt_backend *be, float *host, const void *src, size_t n, lt_error *err) {
    lt_bf16 *b = malloc((n ? n : 1) * sizeof *b);
    if (!b) return lt_fail(err, LT_ERR_NOMEM, "cuda backend", "out of memory for %zu bf16 values", n);
    lt_status st = lt_cuda_copy_d2h(state_of(be)->cu, b, src, n * sizeof *b, err);
    for (size_t i = 0; st == LT_OK && i < n; i++) host[i] = lt_bf16_to_f32(b[i]);
    free(b);
    return st;
}

static lt_status cu_from_host_f32(const lt_backend *be, void *dst, const float *host, size_t n, lt_error *err) {
    lt_bf16 *b = malloc((n ? n : 1) * sizeof *b);
    if (!b) return lt_fail(err, LT_ERR_NOMEM, "cuda backend", "out of memory for %zu bf16 values", n);
    for (size_t i = 0; i < n; i++) b[i] = lt_bf16_from_f32(host[i]);
    lt_status st = lt_cuda_copy_h2d(state_of(be)->cu, dst, b, n * sizeof *b, err);
    free(b);
    return st;
}

/* The kept failure, reported once (the caller fails the step). */
static lt_status cu_poll(const lt_backend *be, lt_error *err) {
    cuda_state *s = state_of(be);
    if (s->failed == LT_OK) return LT_OK;
    lt_status st = s->failed;
    if (err) *err = s->first;
    s->failed = LT_OK;
    return st;
}

static lt_status cu_check(const lt_backend *be, lt_error *err) {
    cuda_state *s = state_of(be);
    if (s->failed == LT_OK) {
        lt_error e;
        note(s, lt_cuda_sync(s->cu, &e), &e);
    }
    if (s->failed == LT_OK) return LT_OK;
    lt_status st = s->failed;
    if (err) *err = s->first;
    s->failed = LT_OK; /* reported once; the caller fails the step */
    return st;
}

/* ---------------------------------------------------------------- kernels */

static void cu_add(const lt_backend *be, void *dst, const void *a, const void *b, size_t n) {
    cuda_state *s = state_of(be);
    RUN(s, lt_cuda_add(s->cu, dst, a, b, n, &e_));
}

static void cu_accumulate(const lt_backend *be, void *dst, const void *src, size_t n) {
    cuda_state *s = state_of(be);
    RUN(s, lt_cuda_accumulate(s->cu, dst, src, n, &e_));
}

static void cu_accumulate_f32(const lt_backend *be, float *dst, const float *src, size_t n) {
    cuda_state *s = state_of(be);
    RUN(s, lt_cuda_accumulate_f32(s->cu, dst, src, n, &e_));
}

static void cu_sum_blocks(const lt_backend *be, void *dst, const void *src, int G, size_t stride, size_t n) {
    cuda_state *s = state_of(be);
    RUN(s, lt_cuda_sum_blocks(s->cu, dst, src, G, stride, n, &e_));
}

static const void *cu_weight(const lt_backend *be, const lt_llama *m, const float *view) {
    cuda_state *s = state_of(be);
    (void)m;
    uintptr_t v = (uintptr_t)view, lo = (uintptr_t)s->host_params, hi = (uintptr_t)(s->host_params + s->n_params);
    if (v < lo || v >= hi)
        return view; /* not a view of the model's: weights in device memory already, bf16 (HelixPipe's Q/K/V
                        from another stage, train/exec) */
    return s->w16 + (view - s->host_params); /* the same element of the bf16 device copy */
}

static void cu_embed_forward(const lt_backend *be, void *out, const int32_t *ids, int T, const void *wte, int C) {
    cuda_state *s = state_of(be);
    void *blk;
    const int32_t *d = stage_ints(s, ids, T, &blk);
    if (d) RUN(s, lt_cuda_embed_forward(s->cu, out, d, T, wte, C, &e_));
    op_done(s, blk);
}

static void cu_embed_backward(const lt_backend *be, float *dwte, const void *dout, const int32_t *ids, int T, int C) {
    cuda_state *s = state_of(be);
    void *blk;
    const int32_t *d = stage_ints(s, ids, T, &blk);
    if (d) RUN(s, lt_cuda_embed_backward(s->cu, dwte, dout, d, T, C, &e_));
    op_done(s, blk);
}

static void cu_rmsnorm_forward(const lt_backend *be, void *out, float *rstd, const void *x, const void *w, int T, int C,
                               float eps, lt_pool *pool) {
    cuda_state *s = state_of(be);
    (void)pool;
    RUN(s, lt_cuda_rmsnorm_forward(s->cu, out, rstd, x, w, T, C, eps, &e_));
}

static void cu_rmsnorm_backward(const lt_backend *be, void *dx, float *dw, const void *dout, const void *x,
                                const void *w, const float *rstd, int T, int C, lt_pool *pool) {
    cuda_state *s = state_of(be);
    (void)pool;
    RUN(s, lt_cuda_rmsnorm_backward(s->cu, dx, dw, dout, x, w, rstd, T, C, &e_));
}

static void cu_linear_forward_ld(const lt_backend *be, void *out, const void *x, const void *w, int T, int IN,
                                 int OUT, int ld) {
    cuda_state *s = state_of(be);
    RUN(s, lt_cuda_linear_forward(s->cu, out, x, w, T, IN, OUT, ld, &e_));
}

static void cu_linear_forward(const lt_backend *be, void *out, const void *x, const void *w, int T, int IN, int OUT) {
    cu_linear_forward_ld(be, out, x, w, T, IN, OUT, OUT);
}

static void cu_linear_backward(const lt_backend *be, void *dx, float *dw, const void *dout, const void *x,
                               const void *w, int T, int IN, int OUT) {
    cuda_state *s = state_of(be);
    RUN(s, lt_cuda_linear_backward(s->cu, dx, dw, dout, x, w, T, IN, OUT, OUT, &e_));
}

static void cu_linear_backward_ld(const lt_backend *be, void *dx, float *dw, const void *dout, const void *x,
                                  const void *w, int T, int IN, int OUT, int ld) {
    cuda_state *s = state_of(be);
    RUN(s, lt_cuda_linear_backward(s->cu, dx, dw, dout, x, w, T, IN, OUT, ld, &e_));
}

static void cu_bias_forward(const lt_backend *be, void *y, const void *b, int T, int n) {
    cuda_state *s = state_of(be);
    RUN(s, lt_cuda_bias_forward(s->cu, y, b, T, n, &e_));
}

static void cu_bias_backward(const lt_backend *be, float *db, const void *dy, int T, int n) {
    cuda_state *s = state_of(be);
    RUN(s, lt_cuda_bias_backward(s->cu, db, dy, T, n, &e_));
}

static void cu_rope_forward(const lt_backend *be, void *x, const int32_t *pos, int T, int nh, int hd,
                            const float *inv_freq, lt_pool *pool) {
    cuda_state *s = state_of(be);
    (void)pool;
    void *blk;
    const int32_t *d = stage_ints(s, pos, T, &blk);
    if (d) RUN(s, lt_cuda_rope_forward(s->cu, x, d, T, nh, hd, inv_freq, &e_));
    op_done(s, blk);
}

static void cu_rope_backward(const lt_backend *be, void *dx, const int32_t *pos, int T, int nh, int hd,
                             const float *inv_freq, lt_pool *pool) {
    cuda_state *s = state_of(be);
    (void)pool;
    void *blk;
    const int32_t *d = stage_ints(s, pos, T, &blk);
    if (d) RUN(s, lt_cuda_rope_backward(s->cu, dx, d, T, nh, hd, inv_freq, &e_));
    op_done(s, blk);
}

/* The pass's segments (train/cpu/kernels.h) as kernels/cuda.h's: the same fields, bf16 pointers. */
static lt_cuda_attn_segment *cuda_segments(cuda_state *s, const lt_attn_segment *segs, int n) {
    lt_cuda_attn_segment *c = malloc(((size_t)n + 1) * sizeof *c);
    if (!c) {
        lt_error e;
        note(s, lt_fail(&e, LT_ERR_NOMEM, "cuda backend", "out of memory for %d attention segments", n), &e);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        c[i] = (lt_cuda_attn_segment){.row0 = segs[i].row0, .n = segs[i].n, .begin = segs[i].begin,
                                      .k = (const lt_bf16 *)segs[i].k, .v = (const lt_bf16 *)segs[i].v,
                                      .dk = (lt_bf16 *)segs[i].dk, .dv = (lt_bf16 *)segs[i].dv};
    return c;
}

static void cu_attention_forward(const lt_backend *be, void *out, float *lse, const void *q,
                                 const lt_attn_segment *segs, int n_segs, int T, int nh, int nkv, int hd,
                                 lt_pool *pool) {
    cuda_state *s = state_of(be);
    (void)pool;
    lt_cuda_attn_segment *c = cuda_segments(s, segs, n_segs);
    if (c) RUN(s, lt_cuda_attention_forward(s->cu, out, lse, q, c, n_segs, T, nh, nkv, hd, &e_));
    free(c); /* the kernels copied them (kernels/cuda.h) */
}

static void cu_attention_backward(const lt_backend *be, void *dq, const void *dout, const void *out, const float *lse,
                                  const void *q, const lt_attn_segment *segs, int n_segs, int T, int nh, int nkv,
                                  int hd, lt_pool *pool) {
    cuda_state *s = state_of(be);
    (void)pool;
    lt_cuda_attn_segment *c = cuda_segments(s, segs, n_segs);
    if (c) RUN(s, lt_cuda_attention_backward(s->cu, dq, dout, out, lse, q, c, n_segs, T, nh, nkv, hd, &e_));
    free(c);
}

static void cu_swiglu_forward(const lt_backend *be, void *out, const void *gate, const void *up, size_t n,
                              lt_pool *pool) {
    cuda_state *s = state_of(be);
    (void)pool;
    RUN(s, lt_cuda_swiglu_forward(s->cu, out, gate, up, n, &e_));
}

static void cu_swiglu_backward(const lt_backend *be, void *dgate, void *dup, const void *dout, const void *gate,
                               const void *up, size_t n, lt_pool *pool) {
    cuda_state *s = state_of(be);
    (void)pool;
    RUN(s, lt_cuda_swiglu_backward(s->cu, dgate, dup, dout, gate, up, n, &e_));
}

/* The rows' summed loss added on the device (lt_cuda_sum_rows_into: no wait); a unit's head
 * reads the total once (take_loss), not once a row block. */
static void add_loss(cuda_state *s, const float *rows, int T) {
    if (!rows || s->failed != LT_OK) return;
    RUN(s, lt_cuda_sum_rows_into(s->cu, rows, (size_t)T, LT_CUDA_SUM_LOSS, !s->loss_pending, &e_));
    if (s->failed == LT_OK) s->loss_pending = true;
}

static double cu_take_loss(const lt_backend *be) {
    cuda_state *s = state_of(be);
    double sum = 0;
    if (s->loss_pending) RUN(s, lt_cuda_read_sum(s->cu, LT_CUDA_SUM_LOSS, &sum, &e_));
    s->loss_pending = false;
    return s->failed == LT_OK ? sum : 0;
}

static double cu_xent(const lt_backend *be, void *dlogits, const void *logits, const int32_t *targets, int T, int V,
                      int ld, float scale, lt_pool *pool) {
    cuda_state *s = state_of(be);
    (void)pool;
    void *blk;
    const int32_t *d = stage_ints(s, targets, T, &blk);
    float *rows = d ? op_block(s, (void **)&s->row_loss, &s->row_loss_cap, (size_t)T * sizeof(float)) : NULL;
    /* without a gradient the kernel still writes dlogits: into the logits block, which the
     * head does not read again (in place is allowed) */
    if (rows) RUN(s, lt_cuda_xent_forward_backward(s->cu, dlogits ? dlogits : (lt_bf16 *)logits, logits, d, T, V, ld,
                                                   dlogits ? scale : 0.0f, rows, &e_));
    add_loss(s, rows, T);
    op_done(s, rows), op_done(s, blk);
    return 0; /* the sum stays on the device until take_loss */
}

/* The vocabulary-parallel cross-entropy (kernels/cuda.h lt_cuda_xent_tp_*): the statistics
 * stay on the device; the pass all-reduces them over the TP group in between. */
static void cu_xent_tp_max(const lt_backend *be, float *rowmax, const void *logits, int T, int V, int ld) {
    cuda_state *s = state_of(be);
    RUN(s, lt_cuda_xent_tp_max(s->cu, rowmax, logits, T, V, ld, &e_));
}

static void cu_xent_tp_sums(const lt_backend *be, float *sums, const void *logits, const float *rowmax,
                            const int32_t *targets, int v0, int T, int V, int ld) {
    cuda_state *s = state_of(be);
    void *blk;
    const int32_t *d = stage_ints(s, targets, T, &blk);
    if (d) RUN(s, lt_cuda_xent_tp_sums(s->cu, sums, logits, rowmax, d, v0, T, V, ld, &e_));
    op_done(s, blk);
}

static double cu_xent_tp_finish(const lt_backend *be, void *dlogits, const void *logits, const float *rowmax,
                                const float *sums, const int32_t *targets, int v0, int T, int V, int ld,
                                float scale) {
    cuda_state *s = state_of(be);
    void *blk;
    const int32_t *d = stage_ints(s, targets, T, &blk);
    float *rows = d ? op_block(s, (void **)&s->row_loss, &s->row_loss_cap, (size_t)T * sizeof(float)) : NULL;
    if (rows) RUN(s, lt_cuda_xent_tp_finish(s->cu, dlogits, logits, rowmax, sums, d, v0, T, V, ld, scale, rows, &e_));
    add_loss(s, rows, T);
    op_done(s, rows), op_done(s, blk);
    return 0; /* the sum stays on the device until take_loss */
}

/* ---------------------------------------------------------------- open, model, optimizer */

lt_status lt_backend_cuda_open(lt_backend **out, int device, lt_error *err) {
    *out = NULL;
    cuda_state *s = calloc(1, sizeof *s);
    if (!s) return lt_fail(err, LT_ERR_NOMEM, "cuda backend", "out of memory");
    lt_status st = lt_cuda_open(&s->cu, device, err);
    if (st != LT_OK) {
        free(s);
        return st;
    }
    s->be = (lt_backend){
        .name = "cuda", .act_bytes = 2, .weight_bytes = 2, .align = LT_ARENA_ALIGN, .logits_pad = 64, .host = false, .ctx = s,
        .alloc = cu_alloc, .alloc_failure = cu_alloc_failure, .free = cu_free, .zero = cu_zero, .copy = cu_copy,
        .to_host = cu_to_host, .from_host = cu_from_host, .to_host_f32 = cu_to_host_f32,
        .from_host_f32 = cu_from_host_f32, .check = cu_check, .poll = cu_poll,
        .bind_ints = cu_bind_ints, .unbind_ints = cu_unbind_ints, .take_loss = cu_take_loss,
        .add = cu_add, .accumulate = cu_accumulate, .accumulate_f32 = cu_accumulate_f32,
        .sum_blocks = cu_sum_blocks,
        .weight = cu_weight, .embed_forward = cu_embed_forward, .embed_backward = cu_embed_backward,
        .rmsnorm_forward = cu_rmsnorm_forward, .rmsnorm_backward = cu_rmsnorm_backward,
        .linear_forward = cu_linear_forward, .linear_backward = cu_linear_backward,
        .linear_forward_ld = cu_linear_forward_ld, .linear_backward_ld = cu_linear_backward_ld,
        .bias_forward = cu_bias_forward, .bias_backward = cu_bias_backward,
        .rope_forward = cu_rope_forward, .rope_backward = cu_rope_backward,
        .attention_forward = cu_attention_forward, .attention_backward = cu_attention_backward,
        .swiglu_forward = cu_swiglu_forward, .swiglu_backward = cu_swiglu_backward, .xent = cu_xent,
        .xent_tp_max = cu_xent_tp_max, .xent_tp_sums = cu_xent_tp_sums, .xent_tp_finish = cu_xent_tp_finish,
    };
    *out = &s->be;
    return LT_OK;
}

void lt_backend_cuda_close(lt_backend *be) {
    if (!be) return;
    cuda_state *s = state_of(be);
    lt_error e;
    (void)lt_cuda_sync(s->cu, &e); /* nothing queued may still use what is freed below */
    for (int i = 0; i < s->n_bound; i++)
        if (!s->arena) lt_cuda_free(s->cu, s->bound[i].dev); /* (arena blocks go with it) */
    free(s->bound);
    lt_cuda_use_arena(s->cu, NULL); /* the scratch's block back before the arena goes */
    lt_arena_destroy(s->arena);
    lt_cuda_free(s->cu, s->arena_base);
    lt_cuda_free(s->cu, s->ints), lt_cuda_free(s->cu, s->row_loss), lt_cuda_free(s->cu, s->tmp);
    lt_cuda_free(s->cu, s->w16), lt_cuda_free(s->cu, s->master);
    lt_cuda_free(s->cu, s->mom1), lt_cuda_free(s->cu, s->mom2);
    lt_cuda_close(s->cu);
    free(s);
}

lt_status lt_backend_cuda_mem(const lt_backend *be, size_t *free_bytes, size_t *total_bytes, lt_error *err) {
    return lt_cuda_mem_info(state_of(be)->cu, free_bytes, total_bytes, err);
}

lt_status lt_backend_cuda_reserve(lt_backend *be, size_t bytes, const char *what, lt_error *err) {
    cuda_state *s = state_of(be);
    if (s->arena) return lt_fail(err, LT_ERR_INTERNAL, "cuda backend", "an arena was reserved already");
    size_t free_b = 0, total_b = 0;
    lt_status st = lt_cuda_mem_info(s->cu, &free_b, &total_b, err);
    if (st != LT_OK) return st;
    if (bytes > free_b) {
        lt_fail(err, LT_ERR_CONFIG, what,
                "predicted peak %.2f GiB does not fit the %.2f GiB free on GPU %d (of %.2f GiB)",
                (double)bytes / 1073741824.0, (double)free_b / 1073741824.0, lt_cuda_device(s->cu),
                (double)total_b / 1073741824.0);
        lt_error_hint(err, "plan with a lower plan.mem, or more pipeline stages");
        return LT_ERR_CONFIG;
    }
    st = lt_cuda_malloc(s->cu, &s->arena_base, bytes, err);
    if (st == LT_OK) st = lt_arena_create(&s->arena, s->arena_base, bytes, err);
    if (st != LT_OK) {
        lt_cuda_free(s->cu, s->arena_base), s->arena_base = NULL;
        return st;
    }
    /* from here on a step allocates nothing outside the arena: the kernels' scratch comes
     * from it, the op buffers kept so far go (their users take arena blocks), and the
     * pinned staging of the uploads is sized for a unit's ids, positions and targets at
     * the arena's scale (a 256K-token unit: 3 MiB; it grows, counted, if ever short) */
    lt_cuda_use_arena(s->cu, s->arena);
    st = lt_cuda_sync(s->cu, err);
    if (st != LT_OK) return st;
    lt_cuda_free(s->cu, s->ints), lt_cuda_free(s->cu, s->row_loss), lt_cuda_free(s->cu, s->tmp);
    s->ints = NULL, s->row_loss = NULL, s->tmp = NULL, s->ints_cap = s->row_loss_cap = s->tmp_cap = 0;
    return lt_cuda_reserve_upload(s->cu, (size_t)3 << 20, err);
}

size_t lt_backend_cuda_peak(const lt_backend *be) {
    const cuda_state *s = state_of(be);
    return s->arena ? lt_arena_peak(s->arena) : 0;
}

void lt_backend_cuda_reset_peak(lt_backend *be) {
    cuda_state *s = state_of(be);
    if (s->arena) lt_arena_reset_peak(s->arena);
}

void lt_backend_cuda_counts(const lt_backend *be, lt_cuda_counts *out) { lt_cuda_get_counts(state_of(be)->cu, out); }

/* The moments on the device, zeroed when new. */
static lt_status moments(cuda_state *s, size_t n, lt_error *err) {
    if (s->mom1) return LT_OK;
    if (!s->master)
        return lt_fail(err, LT_ERR_INTERNAL, "cuda backend", "whole AdamW moments for a model uploaded sharded (its DP "
                       "shards hold them)");
    lt_status st = lt_cuda_malloc(s->cu, (void **)&s->mom1, n * sizeof(float), err);
    if (st == LT_OK) st = lt_cuda_malloc(s->cu, (void **)&s->mom2, n * sizeof(float), err);
    if (st == LT_OK) s->states_bytes += 2 * n * sizeof(float);
    if (st == LT_OK) st = lt_cuda_memset(s->cu, s->mom1, 0, n * sizeof(float), err);
    if (st == LT_OK) st = lt_cuda_memset(s->cu, s->mom2, 0, n * sizeof(float), err);
    return st;
}

lt_status lt_backend_cuda_upload(lt_backend *be, lt_llama *m, lt_error *err) {
    cuda_state *s = state_of(be);
    size_t n = m->n_params;
    if (!s->master) {
        lt_status st = lt_cuda_malloc(s->cu, (void **)&s->master, n * sizeof(float), err);
        if (st == LT_OK) st = lt_cuda_malloc(s->cu, (void **)&s->w16, n * sizeof(lt_bf16), err);
        if (st != LT_OK) return st;
        s->states_bytes += n * (sizeof(float) + sizeof(lt_bf16));
    } else if (s->n_params != n) {
        return lt_fail(err, LT_ERR_INTERNAL, "cuda backend", "a model of %zu parameters uploaded over one of %zu", n,
                       s->n_params);
    }
    s->n_params = n;
    s->host_params = m->params;
    lt_status st = lt_cuda_copy_h2d(s->cu, s->master, m->params, n * sizeof(float), err);
    if (st == LT_OK) st = lt_cuda_f32_to_bf16(s->cu, s->w16, s->master, n, err);
    if (st == LT_OK) st = lt_cuda_sync(s->cu, err);
    if (st == LT_OK) m->backend = be;
    return st;
}

lt_status lt_backend_cuda_upload_sharded(lt_backend *be, lt_llama *m, size_t n_alloc, lt_error *err) {
    cuda_state *s = state_of(be);
    size_t n = m->n_params;
    if (s->w16 || n_alloc < n)
        return lt_fail(err, LT_ERR_INTERNAL, "cuda backend", "a sharded upload of %zu parameters into %zu (%s)", n,
                       n_alloc, s->w16 ? "a model is on the device already" : "too few");
    /* the bf16 copy made on the host and sent once: no fp32 whole ever on the device */
    lt_bf16 *h = malloc((n_alloc ? n_alloc : 1) * sizeof *h);
    if (!h) return lt_fail(err, LT_ERR_NOMEM, "cuda backend", "out of memory for the bf16 copy of %zu parameters", n);
    for (size_t i = 0; i < n_alloc; i++) h[i] = i < n ? lt_bf16_from_f32(m->params[i]) : 0;
    lt_status st = lt_cuda_malloc(s->cu, (void **)&s->w16, n_alloc * sizeof(lt_bf16), err);
    if (st == LT_OK) st = lt_cuda_copy_h2d(s->cu, s->w16, h, n_alloc * sizeof(lt_bf16), err);
    free(h);
    if (st != LT_OK) return st;
    s->states_bytes += n_alloc * sizeof(lt_bf16);
    s->n_params = n;
    s->host_params = m->params;
    m->backend = be;
    return LT_OK;
}

lt_bf16 *lt_backend_cuda_weights16(const lt_backend *be) { return state_of(be)->w16; }

size_t lt_backend_cuda_states_bytes(const lt_backend *be) { return state_of(be)->states_bytes; }

lt_status lt_backend_cuda_adamw_block(lt_backend *be, const lt_llama *m, const float *grads, size_t lo, size_t hi,
                                      float *master, float *mom1, float *mom2, double lr, int64_t t,
                                      const lt_optim_config *oc, lt_error *err) {
    cuda_state *s = state_of(be);
    lt_status st = LT_OK;
    /* per tensor piece: decay on matrices only (train/model/optim.h's two parameter groups) */
    for (int i = 0; st == LT_OK && i < m->n_tensors; i++) {
        const lt_tensor_info *ti = &m->tensors[i];
        size_t b = ti->offset, e = b + (size_t)ti->rows * (size_t)ti->cols;
        b = b > lo ? b : lo, e = e < hi ? e : hi;
        if (b >= e) continue;
        st = lt_cuda_adamw(s->cu, master + (b - lo), s->w16 + b, grads + b, mom1 + (b - lo), mom2 + (b - lo), e - b, lr,
                           oc->beta1, oc->beta2, oc->eps, ti->rows > 1 ? oc->weight_decay : 0.0, t, err);
    }
    return st;
}

float *lt_backend_cuda_master(const lt_backend *be) { return state_of(be)->master; }

lt_status lt_backend_cuda_refresh16(lt_backend *be, const lt_llama *m, lt_error *err) {
    cuda_state *s = state_of(be);
    if (!s->master || s->n_params != m->n_params)
        return lt_fail(err, LT_ERR_INTERNAL, "cuda backend", "no model of %zu parameters on the device", m->n_params);
    return lt_cuda_f32_to_bf16(s->cu, s->w16, s->master, m->n_params, err);
}

lt_status lt_backend_cuda_download(lt_backend *be, lt_llama *m, lt_error *err) {
    cuda_state *s = state_of(be);
    if (!s->master || s->n_params != m->n_params)
        return lt_fail(err, LT_ERR_INTERNAL, "cuda backend", "no model of %zu parameters on the device", m->n_params);
    return lt_cuda_copy_d2h(s->cu, m->params, s->master, m->n_params * sizeof(float), err);
}

lt_status lt_backend_cuda_upload_moments(lt_backend *be, const lt_adamw *opt, lt_error *err) {
    cuda_state *s = state_of(be);
    if (opt->n != s->n_params)
        return lt_fail(err, LT_ERR_INTERNAL, "cuda backend", "moments of %zu parameters for a model of %zu", opt->n,
                       s->n_params);
    lt_status st = moments(s, opt->n, err);
    if (st == LT_OK) st = lt_cuda_copy_h2d(s->cu, s->mom1, opt->m, opt->n * sizeof(float), err);
    if (st == LT_OK) st = lt_cuda_copy_h2d(s->cu, s->mom2, opt->v, opt->n * sizeof(float), err);
    return st;
}

lt_status lt_backend_cuda_download_moments(lt_backend *be, lt_adamw *opt, lt_error *err) {
    cuda_state *s = state_of(be);
    if (!s->mom1 || opt->n != s->n_params)
        return lt_fail(err, LT_ERR_INTERNAL, "cuda backend", "no moments of %zu parameters on the device", opt->n);
    lt_status st = lt_cuda_copy_d2h(s->cu, opt->m, s->mom1, opt->n * sizeof(float), err);
    if (st == LT_OK) st = lt_cuda_copy_d2h(s->cu, opt->v, s->mom2, opt->n * sizeof(float), err);
    return st;
}

lt_status lt_backend_cuda_grads(lt_backend *be, size_t n, float **grads, lt_error *err) {
    cuda_state *s = state_of(be);
    lt_status st = lt_cuda_malloc(s->cu, (void **)grads, (n ? n : 1) * sizeof(float), err);
    if (st == LT_OK) st = lt_cuda_memset(s->cu, *grads, 0, n * sizeof(float), err);
    if (st == LT_OK) s->states_bytes += n * sizeof(float);
    return st;
}

void lt_backend_cuda_free_grads(lt_backend *be, float *grads) { lt_cuda_free(state_of(be)->cu, grads); }

lt_status lt_backend_cuda_clip(lt_backend *be, float *grads, size_t n, double max_norm, double *norm, lt_error *err) {
    cuda_state *s = state_of(be);
    double sq = 0;
    lt_status st = lt_cuda_sum_squares(s->cu, grads, n, &sq, err);
    if (st != LT_OK) return st;
    *norm = sqrt(sq);
    double coef = lt_clip_coef(*norm, max_norm); /* train/model/optim.h, applied below 1 */
    if (coef < 1.0) st = lt_cuda_scale(s->cu, grads, n, (float)coef, err);
    return st;
}

void lt_backend_cuda_streams(const lt_backend *be, void **compute, void **comm) {
    const cuda_state *s = state_of(be);
    *compute = lt_cuda_stream(s->cu), *comm = lt_cuda_comm_stream(s->cu);
}

lt_status lt_backend_cuda_sum_squares(const lt_backend *be, const float *g, size_t n, double *sq, lt_error *err) {
    return lt_cuda_sum_squares(state_of(be)->cu, g, n, sq, err);
}

lt_status lt_backend_cuda_sum_squares_ranges(const lt_backend *be, const float *g, const size_t *off,
                                             const size_t *len, int n, double *sq, lt_error *err) {
    lt_cuda *cu = state_of(be)->cu;
    lt_status st = LT_OK;
    bool any = false;
    *sq = 0;
    for (int i = 0; st == LT_OK && i < n; i++)
        if (len[i] > 0) st = lt_cuda_sum_squares_into(cu, g + off[i], len[i], LT_CUDA_SUM_NORM, !any, err), any = true;
    if (st == LT_OK && any) st = lt_cuda_read_sum(cu, LT_CUDA_SUM_NORM, sq, err);
    return st;
}

lt_status lt_backend_cuda_scale(const lt_backend *be, float *g, size_t n, float coef, lt_error *err) {
    return lt_cuda_scale(state_of(be)->cu, g, n, coef, err);
}

lt_status lt_backend_cuda_adamw(lt_backend *be, const lt_llama *m, const float *grads, double lr, int64_t t,
                                const lt_optim_config *oc, lt_error *err) {
    return lt_backend_cuda_adamw_tensors(be, m, grads, lr, t, oc, NULL, err);
}

lt_status lt_backend_cuda_adamw_tensors(lt_backend *be, const lt_llama *m, const float *grads, double lr, int64_t t,
                                        const lt_optim_config *oc, const bool *mine, lt_error *err) {
    cuda_state *s = state_of(be);
    lt_status st = moments(s, m->n_params, err);
    for (int i = 0; st == LT_OK && i < m->n_tensors; i++) {
        if (mine && !mine[i]) continue; /* another stage's tensor: stale here, never read */
        size_t o = m->tensors[i].offset, e = o + (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
        st = lt_backend_cuda_adamw_block(be, m, grads, o, e, s->master + o, s->mom1 + o, s->mom2 + o, lr, t, oc, err);
    }
    if (st == LT_OK) st = lt_cuda_sync(s->cu, err);
    return st;
}
