/*
 * train/model/pass.c — forward and backward of one unit through a range of layers (train/model/model.h),
 * on the model's backend (train/model/backend.h: the CPU fp32 kernels of train/cpu/kernels.h, or
 * bf16 on a GPU). Every buffer of activations, K/V and gradients is the backend's memory:
 * this file never dereferences one; it lays them out and moves rows in BYTES (elements of
 * be->act_bytes, fp32 rstd/lse) and hands them to the backend's ops.
 *
 * Invariants (llm.c's, kept by every function here):
 *   - the forward WRITES activations (acts) and the unit's K/V rows of the KV context;
 *   - the backward ADDS into parameter gradients, into the KV context's dK/dV (rows of
 *     earlier slices included) and into `din`; its scratch is private to the call;
 *   - a call's working memory (scratch, the head's logits block) is told to the pass's
 *     meter while it is held (lt_pass.meter), so the caller's count of the memory a step
 *     holds is the memory it allocated;
 *   - a slice's own dK/dV rows are read only after the attention backward of its unit,
 *     when every later slice of its sample has already run backward (FILO order): that is
 *     what makes any split of a sample into slices give the gradients of the whole sample
 *     (InfiniPipe 2.1, ChunkFlow 4.2).
 */
#include "train/model/model.h"

#include <stdlib.h>
#include <string.h>

#include "train/model/backend.h" /* lt_backend: the ops every buffer and kernel goes through */
#include "train/cpu/kernels.h"   /* lt_attn_segment */

/* What the kernels read for the weight whose fp32 host view is p (train/model/backend.h). */
#define WEIGHT(p) be->weight(be, m, (p))

/* Byte offset arithmetic on a backend pointer typed float * (it may hold 2-byte elements). */
static inline float *at(const void *base, size_t bytes) { return (float *)((char *)base + bytes); }

typedef struct dims {
    int T, C, F, V, nh, nkv, hd, qd, kvd;
} dims;

static dims dims_of(const lt_llama *m, int T) {
    dims d;
    d.T = T;
    d.C = m->shape.hidden;
    d.F = m->shape.ffn;
    d.V = m->shape.vocab;
    d.nh = m->shape.heads;
    d.nkv = m->shape.kv_heads;
    d.hd = m->head_dim;
    d.qd = d.nh * d.hd;
    d.kvd = d.nkv * d.hd;
    return d;
}

/* Bytes one layer keeps for T rows (lt_layer_acts): activation elements of act_bytes, rstd
 * and lse fp32, each array aligned (on the fp32 backend: T C 4 floats + ..., no padding). */
static size_t layer_bytes(const lt_backend *be, const dims *d) {
    size_t T = (size_t)d->T, es = be->act_bytes;
    return lt_backend_span(be, T * (size_t)d->C, es) * 4 + lt_backend_span(be, T, 4) * 2 +
           lt_backend_span(be, T * (size_t)d->qd, es) * 2 + lt_backend_span(be, T * (size_t)d->nh, 4) +
           lt_backend_span(be, T * (size_t)d->F, es) * 3;
}

/* Where a set's arrays lie in a->buf / a->ibuf for a->T rows: every layer of the range in
 * order (a window set: one layer's storage that every layer of the range shares), then out
 * (not in a window set), then the head's dnf_in. Offsets in bytes (a->be's element sizes
 * and alignment). Returns the bytes of buf. */
static size_t lay_out(lt_acts *a, const dims *d, bool head) {
    const lt_backend *be = a->be;
    size_t o = 0, T = (size_t)a->T, es = be->act_bytes;
    size_t TC = lt_backend_span(be, T * d->C, es), TQ = lt_backend_span(be, T * d->qd, es);
    size_t TF = lt_backend_span(be, T * d->F, es), TR = lt_backend_span(be, T, 4);
    size_t TH = lt_backend_span(be, T * d->nh, 4);
    int stored = a->window ? 1 : a->l1 - a->l0;
    for (int l = 0; l < a->l1 - a->l0; l++) {
        lt_layer_acts *L = &a->layer[l];
        if (l >= stored) {
            *L = a->layer[0];
            continue;
        }
        L->x = at(a->buf, o), o += TC;
        L->n1 = at(a->buf, o), o += TC;
        L->rstd1 = at(a->buf, o), o += TR;
        L->q = at(a->buf, o), o += TQ;
        L->att = at(a->buf, o), o += TQ;
        L->lse = at(a->buf, o), o += TH;
        L->x2 = at(a->buf, o), o += TC;
        L->n2 = at(a->buf, o), o += TC;
        L->rstd2 = at(a->buf, o), o += TR;
        L->gate = at(a->buf, o), o += TF;
        L->up = at(a->buf, o), o += TF;
        L->act = at(a->buf, o), o += TF;
    }
    a->out = a->window ? NULL : at(a->buf, o);
    if (!a->window) o += TC;
    a->dnf_in = head ? at(a->buf, o) : NULL;
    if (head) o += TC;
    a->ids = a->ibuf;
    a->pos = a->ibuf + T;
    a->targets = a->ibuf + 2 * T;
    return o;
}

static lt_status acts_alloc(lt_acts *a, const lt_llama *m, const lt_batch *b, const lt_train_unit *u, int l0, int l1,
                            bool head, bool window, lt_error *err) {
    memset(a, 0, sizeof *a);
    lt_status st = lt_unit_check(u, b, m->shape.vocab, err);
    if (st != LT_OK) return st;
    if (l0 < 0 || l1 > m->shape.layers || l0 > l1)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "layer range [%d, %d) outside the model's %d layers", l0, l1,
                       m->shape.layers);
    int T = lt_unit_tokens(u);
    dims d = dims_of(m, T);
    const lt_backend *be = lt_backend_of(m);
    int stored = window ? (l1 > l0 ? 1 : 0) : l1 - l0;
    size_t TCb = lt_backend_span(be, (size_t)T * (size_t)d.C, be->act_bytes); /* a [T, C] array's bytes */
    size_t total = layer_bytes(be, &d) * (size_t)stored + TCb * ((window ? 0u : 1u) + (head ? 1u : 0u));
    a->T = T;
    a->l0 = l0;
    a->l1 = l1;
    a->window = window;
    a->be = be;
    a->buf = be->alloc(be, total ? total : sizeof(float), false);
    a->ibuf = malloc((size_t)T * 3 * sizeof(int32_t));
    a->layer = calloc((size_t)(l1 - l0 > 0 ? l1 - l0 : 1), sizeof *a->layer);
    if (!a->buf || !a->ibuf || !a->layer) {
        lt_acts_free(a);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the activations of a %d-token unit (%.1f MiB on %s)",
                       T, (double)total / 1048576.0, be->name);
    }
    a->bytes = total + (size_t)T * 3 * sizeof(int32_t);
    lay_out(a, &d, head);
    int row = 0;
    for (int i = 0; i < u->n_slices; i++) {
        const lt_train_slice *s = &u->slices[i];
        const lt_train_sample *smp = &b->samples[s->sample];
        for (int t = s->begin; t < s->end; t++, row++) {
            a->ids[row] = smp->tokens[t];
            a->pos[row] = t;
            /* the label convention of train/model/model.h: t predicts t+1 when it exists */
            a->targets[row] = t + 1 < smp->len ? smp->tokens[t + 1] : -1;
        }
    }
    return LT_OK;
}

lt_status lt_acts_alloc(lt_acts *a, const lt_llama *m, const lt_batch *b, const lt_train_unit *u, int l0, int l1,
                        bool head, lt_error *err) {
    return acts_alloc(a, m, b, u, l0, l1, head, false, err);
}

lt_status lt_acts_alloc_window(lt_acts *a, const lt_llama *m, const lt_batch *b, const lt_train_unit *u, int l0,
                               int l1, bool head, lt_error *err) {
    return acts_alloc(a, m, b, u, l0, l1, head, true, err);
}

/* One array of a set: its base and the bytes of one row (row r is at base + r w). */
typedef struct field {
    char *base;
    size_t w;
} field;

enum { LAYER_FIELDS = 12 };

/* The arrays of layer l of a, in the order of lay_out: activation elements of es bytes,
 * rstd and lse fp32. */
static void layer_fields(const lt_acts *a, const dims *d, int l, field *f) {
    const lt_layer_acts *L = &a->layer[l - a->l0];
    size_t es = a->be->act_bytes, C = (size_t)d->C * es, Q = (size_t)d->qd * es, F = (size_t)d->F * es;
    f[0] = (field){(char *)L->x, C}, f[1] = (field){(char *)L->n1, C}, f[2] = (field){(char *)L->rstd1, 4};
    f[3] = (field){(char *)L->q, Q}, f[4] = (field){(char *)L->att, Q};
    f[5] = (field){(char *)L->lse, (size_t)d->nh * 4};
    f[6] = (field){(char *)L->x2, C}, f[7] = (field){(char *)L->n2, C}, f[8] = (field){(char *)L->rstd2, 4};
    f[9] = (field){(char *)L->gate, F}, f[10] = (field){(char *)L->up, F}, f[11] = (field){(char *)L->act, F};
}

/* The head's part of a row (dnf_in). */
static field head_field(const lt_acts *a, const dims *d) {
    return (field){(char *)a->dnf_in, (size_t)d->C * a->be->act_bytes};
}

/* The checks of a row move: [l0, l1) inside a's range, the row inside a, the head's part
 * only where a has one, a window set over one layer at a time. */
static lt_status check_row(const lt_acts *a, int row, int l0, int l1, bool head, const char *what, lt_error *err) {
    if (l0 < a->l0 || l1 > a->l1 || l0 > l1 || row < 0 || row >= a->T || (head && !a->dnf_in) ||
        (a->window && l1 - l0 > 1))
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s row %d of layers [%d, %d)%s of a [%d, %d) %d-row activation set",
                       what, row, l0, l1, head ? " and the head" : "", a->l0, a->l1, a->T);
    return LT_OK;
}

/* Row `row` of layers [l0, l1) of a (and with `head` its dnf_in) to (pack) or from buf, the
 * fields' bytes one after the other (buf is memory of a's backend: be->copy). */
static lt_status row_io(lt_acts *a, int row, const lt_llama *m, int l0, int l1, bool head, char *buf, bool pack,
                        lt_error *err) {
    dims d = dims_of(m, 1);
    field f[LAYER_FIELDS + 1];
    lt_status st = LT_OK;
    for (int l = l0; st == LT_OK && l <= l1; l++) {
        int n = LAYER_FIELDS;
        if (l < l1) layer_fields(a, &d, l, f);
        else if (head) f[0] = head_field(a, &d), n = 1;
        else break;
        for (int i = 0; st == LT_OK && i < n; buf += f[i].w, i++) {
            char *r = f[i].base + (size_t)row * f[i].w;
            if (pack) a->be->copy(a->be, buf, r, f[i].w);
            else a->be->copy(a->be, r, buf, f[i].w);
        }
    }
    return st == LT_OK ? a->be->check(a->be, err) : st;
}

lt_status lt_acts_copy_row(lt_acts *dst, int drow, const lt_acts *src, int srow, int l0, int l1, bool head,
                           const lt_llama *m, lt_error *err) {
    lt_status st = check_row(src, srow, l0, l1, head, "copying", err);
    if (st == LT_OK) st = check_row(dst, drow, l0, l1, head, "copying into", err);
    if (st != LT_OK) return st;
    if (dst->ids[drow] != src->ids[srow] || dst->pos[drow] != src->pos[srow])
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "row %d (token %d at %d) is not row %d (token %d at %d)", drow,
                       dst->ids[drow], dst->pos[drow], srow, src->ids[srow], src->pos[srow]);
    if (dst->be != src->be)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "copying a row between the %s and %s backends", src->be->name,
                       dst->be->name);
    dims d = dims_of(m, 1);
    field fd[LAYER_FIELDS], fs[LAYER_FIELDS];
    for (int l = l0; l <= l1; l++) {
        int n = LAYER_FIELDS;
        if (l < l1) layer_fields(dst, &d, l, fd), layer_fields(src, &d, l, fs);
        else if (head) fd[0] = head_field(dst, &d), fs[0] = head_field(src, &d), n = 1;
        else break;
        for (int i = 0; i < n; i++)
            dst->be->copy(dst->be, fd[i].base + (size_t)drow * fd[i].w, fs[i].base + (size_t)srow * fs[i].w, fd[i].w);
    }
    return LT_OK;
}

/* A row's bytes (the fields of layer_fields and head_field, unpadded); the floats of
 * lt_acts_row_floats are these bytes rounded up to whole floats (equal on fp32). */
static size_t row_bytes(const lt_llama *m, int l0, int l1, bool head) {
    size_t es = lt_backend_of(m)->act_bytes;
    dims d = dims_of(m, 1);
    size_t layer = ((size_t)d.C * 4 + (size_t)d.qd * 2 + (size_t)d.F * 3) * es + (2 + (size_t)d.nh) * 4;
    return (size_t)(l1 - l0) * layer + (head ? (size_t)d.C * es : 0u);
}

size_t lt_acts_row_floats(const lt_llama *m, int l0, int l1, bool head) {
    return (row_bytes(m, l0, l1, head) + sizeof(float) - 1) / sizeof(float);
}

lt_status lt_acts_pack_row(const lt_acts *a, int row, int l0, int l1, bool head, const lt_llama *m, float *buf,
                           lt_error *err) {
    lt_status st = check_row(a, row, l0, l1, head, "packing", err);
    if (st == LT_OK) st = row_io((lt_acts *)a, row, m, l0, l1, head, (char *)buf, true, err);
    return st;
}

lt_status lt_acts_unpack_row(lt_acts *a, int row, int l0, int l1, bool head, const lt_llama *m, const float *buf,
                             lt_error *err) {
    lt_status st = check_row(a, row, l0, l1, head, "unpacking into", err);
    if (st == LT_OK) st = row_io(a, row, m, l0, l1, head, (char *)buf, false, err);
    return st;
}

/* Array i of a set in the order of lay_out (the layers' arrays, out, dnf_in), or none
 * (base NULL) past the last. */
static field field_at(const lt_acts *a, const dims *d, int i) {
    int nl = (a->l1 - a->l0) * LAYER_FIELDS;
    if (i < nl) {
        field f[LAYER_FIELDS];
        layer_fields(a, d, a->l0 + i / LAYER_FIELDS, f);
        return f[i % LAYER_FIELDS];
    }
    if (i == nl) return (field){(char *)a->out, (size_t)d->C * a->be->act_bytes};
    if (i == nl + 1 && a->dnf_in) return head_field(a, d);
    return (field){NULL, 0};
}

lt_status lt_acts_keep_rows(lt_acts *a, const int *rows, int n, const lt_llama *m, lt_error *err) {
    if (a->window || n < 1 || n > a->T)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "keeping %d of the %d rows of an activation set%s", n, a->T,
                       a->window ? " (a window)" : "");
    for (int k = 0; k < n; k++)
        if (rows[k] < (k ? rows[k - 1] + 1 : 0) || rows[k] >= a->T)
            return lt_fail(err, LT_ERR_INTERNAL, NULL, "row %d kept out of order or outside %d rows", rows[k], a->T);
    if (n == a->T) return LT_OK;
    bool head = a->dnf_in != NULL;
    const lt_backend *be = a->be;
    size_t ibytes = (size_t)a->T * 3 * sizeof(int32_t), fbytes = a->bytes - ibytes;
    dims d = dims_of(m, a->T);
    lt_acts old = *a; /* its layer views are lay_out's of a->T rows: keep them */
    lt_layer_acts *old_layer = malloc((size_t)(a->l1 - a->l0 > 0 ? a->l1 - a->l0 : 1) * sizeof *old_layer);
    if (!old_layer) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    memcpy(old_layer, a->layer, (size_t)(a->l1 - a->l0) * sizeof *old_layer);
    old.layer = old_layer;
    /* the new layout over the same buffers: every array starts at or below where it was and
     * every kept row moves down, so moving them in address order overwrites nothing unread */
    a->T = n;
    dims dn = dims_of(m, n);
    size_t total = lay_out(a, &dn, head);
    for (int i = 0;; i++) {
        field fo = field_at(&old, &d, i), fn = field_at(a, &dn, i);
        if (!fo.base) break;
        for (int r = 0; r < n; r++) be->copy(be, fn.base + (size_t)r * fn.w, fo.base + (size_t)rows[r] * fo.w, fn.w);
    }
    free(old_layer);
    int32_t *oi[3] = {old.ids, old.pos, old.targets}, *ni[3] = {a->ids, a->pos, a->targets};
    for (int i = 0; i < 3; i++)
        for (int r = 0; r < n; r++) ni[i][r] = oi[i][rows[r]];
    /* give the rows' memory back: on the host a smaller block (the allocator keeps it in
     * place); elsewhere a new block the kept rows move to */
    float *fb = NULL;
    if (be->host) {
        fb = realloc(a->buf, total);
    } else if ((fb = be->alloc(be, total, false))) {
        be->copy(be, fb, a->buf, total);
        be->free(be, a->buf);
    }
    int32_t *ib = realloc(a->ibuf, (size_t)n * 3 * sizeof(int32_t));
    if (fb) a->buf = fb, fbytes = total;
    if (ib) a->ibuf = ib, ibytes = (size_t)n * 3 * sizeof(int32_t);
    lay_out(a, &dn, head);
    a->bytes = fbytes + ibytes; /* (a block that could not shrink is still held whole) */
    return LT_OK;
}

void lt_acts_free(lt_acts *a) {
    if (!a) return;
    if (a->be) a->be->free(a->be, a->buf);
    else free(a->buf);
    free(a->ibuf);
    free(a->layer);
    memset(a, 0, sizeof *a);
}

/* The attention segments of unit u at layer l: one per slice, reading/writing the sample's
 * context buffers. */
static void segments_of(const lt_train_unit *u, const lt_kvctx *kv, int l, lt_attn_segment *segs) {
    int row = 0;
    for (int i = 0; i < u->n_slices; i++) {
        const lt_train_slice *s = &u->slices[i];
        const lt_kv_sample *ks = &kv->s[s->sample];
        segs[i].row0 = row;
        segs[i].n = s->end - s->begin;
        segs[i].begin = s->begin;
        segs[i].k = ks->k[l];
        segs[i].v = ks->v[l];
        segs[i].dk = kv->with_grad ? ks->dk[l] : NULL;
        segs[i].dv = kv->with_grad ? ks->dv[l] : NULL;
        row += segs[i].n;
    }
}

/* Copy the unit's rows [T, kvd] of `src` into (to_ctx) or out of the context buffers `ctx`
 * (per slice: rows begin..end-1 of its sample). `which`: 0 k, 1 v, 2 dk, 3 dv. In bytes:
 * a row is kvd elements of the context's backend. */
static void ctx_rows(const lt_train_unit *u, const lt_kvctx *kv, int l, int which, float *unit_rows, bool to_ctx) {
    const lt_backend *be = kv->be;
    int row = 0;
    size_t kvd = (size_t)kv->kvd * be->act_bytes;
    for (int i = 0; i < u->n_slices; i++) {
        const lt_train_slice *s = &u->slices[i];
        const lt_kv_sample *ks = &kv->s[s->sample];
        float *base = which == 0 ? ks->k[l] : which == 1 ? ks->v[l] : which == 2 ? ks->dk[l] : ks->dv[l];
        size_t n = (size_t)(s->end - s->begin) * kvd;
        float *c = at(base, (size_t)s->begin * kvd);
        if (to_ctx) be->copy(be, c, at(unit_rows, (size_t)row * kvd), n);
        else be->copy(be, at(unit_rows, (size_t)row * kvd), c, n);
        row += s->end - s->begin;
    }
}

/* The call's working memory, told to the pass's meter (lt_meter) once allocated and before
 * it is freed: what the caller's count of the memory held leaves out otherwise. */
static void held(const lt_pass *pass, size_t bytes) {
    if (pass->meter && bytes) pass->meter->add(pass->meter->ctx, bytes);
}

static void let_go(const lt_pass *pass, size_t bytes) {
    if (pass->meter && bytes) pass->meter->sub(pass->meter->ctx, bytes);
}

/*
 * The head: final RMSNorm, LM head, cross-entropy, over row blocks so the [T, V] logits
 * never exist at once. With loss_scale > 0 its backward runs here too (fused, as llm.c's
 * fused classifier): the logits block becomes dlogits in place, the LM head's gradient is
 * added to grads, and the gradient of the final norm's input goes to acts->dnf_in.
 */
static lt_status head_forward(const lt_llama *m, const lt_pass *pass, lt_acts *a, const lt_llama_views *grads,
                              float *logits_out, lt_pool *pool, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    dims d = dims_of(m, a->T);
    size_t es = be->act_bytes, TC = (size_t)d.T * d.C;
    bool grad = pass->loss_scale > 0;
    int block = lt_fused_head_rows(d.V); /* rows at once: the [rows, V] logits stay near 32 MiB */
    if (block > d.T) block = d.T;
    float *nf = be->alloc(be, TC * es, false);
    float *rstd = be->alloc(be, (size_t)d.T * sizeof(float), false);
    float *logits = be->alloc(be, (size_t)block * (size_t)d.V * es, false);
    float *dnf = grad ? be->alloc(be, TC * es, true) : NULL;
    if (!nf || !rstd || !logits || (grad && !dnf)) {
        be->free(be, nf), be->free(be, rstd), be->free(be, logits), be->free(be, dnf);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the LM head of a %d-token unit (%s)", d.T, be->name);
    }
    size_t bytes = (TC * (grad ? 2u : 1u) + (size_t)block * (size_t)d.V) * es + (size_t)d.T * sizeof(float);
    held(pass, bytes);
    be->rmsnorm_forward(be, nf, rstd, a->out, WEIGHT(m->w.final_norm), d.T, d.C, (float)m->shape.norm_eps, pool);
    double loss = 0;
    int predicting = 0;
    lt_status st = LT_OK;
    for (int r0 = 0; st == LT_OK && r0 < d.T; r0 += block) {
        int rows = d.T - r0 < block ? d.T - r0 : block;
        const float *x = at(nf, (size_t)r0 * d.C * es);
        be->linear_forward(be, logits, x, WEIGHT(m->w.lm_head), rows, d.C, d.V);
        if (logits_out) st = be->to_host_f32(be, logits_out + (size_t)r0 * d.V, logits, (size_t)rows * d.V, err);
        loss += be->xent(be, grad ? logits : NULL, logits, a->targets + r0, rows, d.V, pass->loss_scale, pool);
        for (int r = 0; r < rows; r++) predicting += a->targets[r0 + r] >= 0;
        if (grad)
            be->linear_backward(be, at(dnf, (size_t)r0 * d.C * es), grads->lm_head, logits, x, WEIGHT(m->w.lm_head),
                                rows, d.C, d.V);
    }
    if (st == LT_OK && grad) {
        be->zero(be, a->dnf_in, TC * es);
        be->rmsnorm_backward(be, a->dnf_in, grads->final_norm, dnf, a->out, WEIGHT(m->w.final_norm), rstd, d.T, d.C,
                             pool);
    }
    if (st == LT_OK) st = be->check(be, err);
    a->loss_sum = loss;
    a->n_predicting = predicting;
    let_go(pass, bytes);
    be->free(be, nf), be->free(be, rstd), be->free(be, logits), be->free(be, dnf);
    return st;
}

/* Per-member scratch of a forward: K/V rows of the unit, one residual-branch output, segments. */
typedef struct fwd_scratch {
    float *kbuf, *vbuf, *tmp;
    lt_attn_segment *segs;
    size_t bytes; /* of kbuf, vbuf, tmp (told to the pass's meter) */
} fwd_scratch;

/* Layer l, first half: n1 = rmsnorm(x), q/k/v projections, RoPE, the unit's K/V rows into the
 * context (where every later query of the sample, in any unit or member, reads them). */
static void layer_pre_forward(const lt_llama *m, const lt_train_unit *u, lt_kvctx *kv, lt_acts *a, int l,
                              fwd_scratch *s, lt_pool *pool) {
    const lt_backend *be = lt_backend_of(m);
    dims d = dims_of(m, a->T);
    lt_layer_acts *L = &a->layer[l - a->l0];
    const lt_layer_views *W = &m->w.layer[l];
    float theta = (float)m->shape.rope_theta, eps = (float)m->shape.norm_eps;
    be->rmsnorm_forward(be, L->n1, L->rstd1, L->x, WEIGHT(W->attn_norm), d.T, d.C, eps, pool);
    be->linear_forward(be, L->q, L->n1, WEIGHT(W->wq), d.T, d.C, d.qd);
    be->linear_forward(be, s->kbuf, L->n1, WEIGHT(W->wk), d.T, d.C, d.kvd);
    be->linear_forward(be, s->vbuf, L->n1, WEIGHT(W->wv), d.T, d.C, d.kvd);
    be->rope_forward(be, L->q, a->pos, d.T, d.nh, d.hd, theta, pool);
    be->rope_forward(be, s->kbuf, a->pos, d.T, d.nkv, d.hd, theta, pool);
    ctx_rows(u, kv, l, 0, s->kbuf, true);
    ctx_rows(u, kv, l, 1, s->vbuf, true);
}

/* Layer l, second half: attention over the context, output projection, residual, MLP. */
static void layer_post_forward(const lt_llama *m, const lt_train_unit *u, lt_kvctx *kv, lt_acts *a, int l,
                               fwd_scratch *s, lt_pool *pool) {
    const lt_backend *be = lt_backend_of(m);
    dims d = dims_of(m, a->T);
    size_t TC = (size_t)d.T * d.C;
    lt_layer_acts *L = &a->layer[l - a->l0];
    const lt_layer_views *W = &m->w.layer[l];
    float *next = l + 1 < a->l1 ? a->layer[l + 1 - a->l0].x : a->out;
    float eps = (float)m->shape.norm_eps;
    segments_of(u, kv, l, s->segs);
    be->attention_forward(be, L->att, L->lse, L->q, s->segs, u->n_slices, d.T, d.nh, d.nkv, d.hd, pool);
    be->linear_forward(be, s->tmp, L->att, WEIGHT(W->wo), d.T, d.qd, d.C);
    be->add(be, L->x2, L->x, s->tmp, TC);
    be->rmsnorm_forward(be, L->n2, L->rstd2, L->x2, WEIGHT(W->mlp_norm), d.T, d.C, eps, pool);
    be->linear_forward(be, L->gate, L->n2, WEIGHT(W->wgate), d.T, d.C, d.F);
    be->linear_forward(be, L->up, L->n2, WEIGHT(W->wup), d.T, d.C, d.F);
    be->swiglu_forward(be, L->act, L->gate, L->up, (size_t)d.T * d.F, pool);
    be->linear_forward(be, s->tmp, L->act, WEIGHT(W->wdown), d.T, d.F, d.C);
    be->add(be, next, L->x2, s->tmp, TC);
}

lt_status lt_llama_forward_group(const lt_llama *m, const lt_pass *pass, const lt_batch *b, const lt_train_unit *u,
                                 int G, const float *const *in, lt_kvctx *kv, lt_acts *a,
                                 const lt_llama_views *grads, const lt_cp_hooks *hooks, double *loss_sum,
                                 lt_pool *pool, lt_error *err) {
    (void)b; /* the units' tokens were gathered by lt_acts_alloc */
    if (G < (hooks ? 0 : 1)) return lt_fail(err, LT_ERR_INTERNAL, NULL, "a group of %d units", G);
    for (int g = 0; g < G; g++) {
        if (a[g].l0 != pass->l0 || a[g].l1 != pass->l1 || (pass->head && !a[g].dnf_in) || a[g].window)
            return lt_fail(err, LT_ERR_INTERNAL, NULL, "activations were allocated for another pass");
        for (int i = 0; i < u[g].n_slices; i++) {
            lt_status st = lt_kvctx_reserve(kv, u[g].slices[i].sample, pass->l0, pass->l1, err);
            if (st != LT_OK) return st;
        }
    }
    if (pass->head && pass->loss_scale > 0 && !grads)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "a head with a loss gradient needs gradient buffers");
    const lt_backend *be = lt_backend_of(m);
    size_t es = be->act_bytes;
    fwd_scratch *s = calloc((size_t)G, sizeof *s);
    lt_status st = s || G == 0 ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int g = 0; st == LT_OK && g < G; g++) {
        dims d = dims_of(m, a[g].T);
        size_t TK = (size_t)d.T * d.kvd, TC = (size_t)d.T * d.C;
        s[g].kbuf = be->alloc(be, (TK ? TK : 1) * es, false), s[g].vbuf = be->alloc(be, (TK ? TK : 1) * es, false);
        s[g].tmp = be->alloc(be, (TC ? TC : 1) * es, false);
        s[g].segs = malloc(((size_t)u[g].n_slices + 1) * sizeof *s[g].segs);
        if (!s[g].kbuf || !s[g].vbuf || !s[g].tmp || !s[g].segs) {
            st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a %d-token unit's forward (%s)", d.T, be->name);
            break;
        }
        s[g].bytes = (2 * (TK ? TK : 1) + (TC ? TC : 1)) * es;
        held(pass, s[g].bytes);
    }
    for (int g = 0; st == LT_OK && g < G; g++) {
        size_t TC = (size_t)a[g].T * (size_t)m->shape.hidden;
        float *x = a[g].l1 > a[g].l0 ? a[g].layer[0].x : a[g].out;
        if (pass->embed) be->embed_forward(be, x, a[g].ids, a[g].T, WEIGHT(m->w.embed), m->shape.hidden);
        else be->copy(be, x, in[g], TC * es);
    }
    /* per layer in lockstep: every member's K/V in the context before any member's attention
     * (context parallelism's K/V exchange, Megatron-LM CP / ring attention, in one process).
     * A backend's failure (a GPU launch) is kept by the backend and read after each layer,
     * before a hook hands its buffers to another process. */
    for (int l = pass->l0; st == LT_OK && l < pass->l1; l++) {
        for (int g = 0; g < G; g++) layer_pre_forward(m, &u[g], kv, &a[g], l, &s[g], pool);
        if ((st = be->check(be, err)) != LT_OK) break;
        if (hooks && hooks->kv_ready && (st = hooks->kv_ready(hooks->ctx, l, err)) != LT_OK) break;
        for (int g = 0; g < G; g++) layer_post_forward(m, &u[g], kv, &a[g], l, &s[g], pool);
        if ((st = be->check(be, err)) != LT_OK) break;
    }
    for (int g = 0; s && g < G; g++) {
        if (s[g].bytes) let_go(pass, s[g].bytes);
        be->free(be, s[g].kbuf), be->free(be, s[g].vbuf), be->free(be, s[g].tmp), free(s[g].segs);
    }
    free(s);
    double total = 0;
    for (int g = 0; st == LT_OK && pass->head && g < G; g++) {
        st = head_forward(m, pass, &a[g], grads, NULL, pool, err);
        total += a[g].loss_sum;
    }
    if (st == LT_OK && loss_sum) *loss_sum = total;
    return st;
}

lt_status lt_llama_forward(const lt_llama *m, const lt_pass *pass, const lt_batch *b, const lt_train_unit *u,
                           const float *in, lt_kvctx *kv, lt_acts *a, const lt_llama_views *grads,
                           double *loss_sum, float *logits_out, lt_pool *pool, lt_error *err) {
    if (!logits_out) return lt_llama_forward_group(m, pass, b, u, 1, &in, kv, a, grads, NULL, loss_sum, pool, err);
    /* the logits wanted: the layers as a group of one, then the head with them */
    lt_pass layers = *pass;
    layers.head = false;
    lt_status st = lt_llama_forward_group(m, &layers, b, u, 1, &in, kv, a, grads, NULL, NULL, pool, err);
    if (st == LT_OK && pass->head) {
        if (!a->dnf_in) return lt_fail(err, LT_ERR_INTERNAL, NULL, "activations were allocated for another pass");
        if (pass->loss_scale > 0 && !grads)
            return lt_fail(err, LT_ERR_INTERNAL, NULL, "a head with a loss gradient needs gradient buffers");
        st = head_forward(m, pass, a, grads, logits_out, pool, err);
    }
    if (st == LT_OK && loss_sum) *loss_sum = pass->head ? a->loss_sum : 0;
    return st;
}

/* Per-member scratch of a backward: dx (the residual stream's gradient, carried down the
 * layers), dn, dq, datt, dact, dgate, dup, dk, dv; segments. */
typedef struct bwd_scratch {
    float *buf, *dx, *dn, *dq, *datt, *dact, *dgate, *dup, *dk, *dv;
    lt_attn_segment *segs;
    size_t bytes; /* of buf (told to the pass's meter) */
} bwd_scratch;

/* Layer l backward, second half first: the MLP and the attention (its dK/dV added into the
 * context's gradient buffers for every key the unit's queries saw). dx: d(layer output) in,
 * d x2 out; dq filled. */
static void layer_post_backward(const lt_llama *m, const lt_train_unit *u, lt_kvctx *kv, lt_acts *a,
                                const lt_llama_views *grads, int l, bwd_scratch *s, lt_pool *pool) {
    const lt_backend *be = lt_backend_of(m);
    dims d = dims_of(m, a->T);
    size_t es = be->act_bytes, TF = (size_t)d.T * d.F;
    lt_layer_acts *L = &a->layer[l - a->l0];
    const lt_layer_views *W = &m->w.layer[l];
    const lt_layer_views *G = &grads->layer[l];
    /* MLP branch: x_next = x2 + down(silu(gate(n2)) * up(n2)), n2 = rmsnorm(x2) */
    be->zero(be, s->dact, lt_backend_span(be, TF, es) * 3); /* dact, dgate, dup */
    be->linear_backward(be, s->dact, G->wdown, s->dx, L->act, WEIGHT(W->wdown), d.T, d.F, d.C);
    be->swiglu_backward(be, s->dgate, s->dup, s->dact, L->gate, L->up, TF, pool);
    be->zero(be, s->dn, (size_t)d.T * d.C * es);
    be->linear_backward(be, s->dn, G->wgate, s->dgate, L->n2, WEIGHT(W->wgate), d.T, d.C, d.F);
    be->linear_backward(be, s->dn, G->wup, s->dup, L->n2, WEIGHT(W->wup), d.T, d.C, d.F);
    be->rmsnorm_backward(be, s->dx, G->mlp_norm, s->dn, L->x2, WEIGHT(W->mlp_norm), L->rstd2, d.T, d.C,
                         pool); /* dx = d x2 */
    /* attention branch: x2 = x + o(attention(rope(q(n1)), rope(k(n1)), v(n1))), n1 = rmsnorm(x) */
    be->zero(be, s->dq, lt_backend_span(be, (size_t)d.T * d.qd, es) * 2); /* dq, datt */
    be->linear_backward(be, s->datt, G->wo, s->dx, L->att, WEIGHT(W->wo), d.T, d.qd, d.C);
    segments_of(u, kv, l, s->segs);
    be->attention_backward(be, s->dq, s->datt, L->att, L->lse, L->q, s->segs, u->n_slices, d.T, d.nh, d.nkv, d.hd,
                           pool);
}

/* Layer l backward, first half: the unit's own K/V rows' gradients (complete once every
 * query that saw them ran its attention backward: later slices before, FILO; the other
 * members of a group before, lockstep), RoPE, the projections, the norm. dx: d x2 in,
 * d x (the layer's input) out. */
static void layer_pre_backward(const lt_llama *m, const lt_train_unit *u, lt_kvctx *kv, lt_acts *a,
                               const lt_llama_views *grads, int l, bwd_scratch *s, lt_pool *pool) {
    const lt_backend *be = lt_backend_of(m);
    dims d = dims_of(m, a->T);
    size_t TC = (size_t)d.T * d.C;
    lt_layer_acts *L = &a->layer[l - a->l0];
    const lt_layer_views *W = &m->w.layer[l];
    const lt_layer_views *G = &grads->layer[l];
    float theta = (float)m->shape.rope_theta;
    ctx_rows(u, kv, l, 2, s->dk, false);
    ctx_rows(u, kv, l, 3, s->dv, false);
    be->rope_backward(be, s->dq, a->pos, d.T, d.nh, d.hd, theta, pool);
    be->rope_backward(be, s->dk, a->pos, d.T, d.nkv, d.hd, theta, pool);
    be->zero(be, s->dn, TC * be->act_bytes);
    be->linear_backward(be, s->dn, G->wq, s->dq, L->n1, WEIGHT(W->wq), d.T, d.C, d.qd);
    be->linear_backward(be, s->dn, G->wk, s->dk, L->n1, WEIGHT(W->wk), d.T, d.C, d.kvd);
    be->linear_backward(be, s->dn, G->wv, s->dv, L->n1, WEIGHT(W->wv), d.T, d.C, d.kvd);
    be->rmsnorm_backward(be, s->dx, G->attn_norm, s->dn, L->x, WEIGHT(W->attn_norm), L->rstd1, d.T, d.C,
                         pool); /* dx = d x */
}

lt_status lt_llama_backward_group(const lt_llama *m, const lt_pass *pass, const lt_batch *b, const lt_train_unit *u,
                                  int G, const float *const *dout, lt_kvctx *kv, lt_acts *a,
                                  const lt_llama_views *grads, const lt_cp_hooks *hooks, float *const *din,
                                  lt_pool *pool, lt_error *err) {
    (void)b;
    if (G < (hooks ? 0 : 1)) return lt_fail(err, LT_ERR_INTERNAL, NULL, "a group of %d units", G);
    if (pass->head && !(pass->loss_scale > 0))
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "backward through a head that ran without a loss gradient");
    if (!kv->with_grad) return lt_fail(err, LT_ERR_INTERNAL, NULL, "backward needs a KV context with gradients");
    for (int g = 0; g < G; g++) {
        if (!pass->head && !(dout && dout[g])) return lt_fail(err, LT_ERR_INTERNAL, NULL, "backward of a non-head pass needs dout");
        if (!pass->embed && !(din && din[g]))
            return lt_fail(err, LT_ERR_INTERNAL, NULL, "backward of a pass without embedding needs din");
    }
    const lt_backend *be = lt_backend_of(m);
    size_t es = be->act_bytes;
    bwd_scratch *s = calloc((size_t)G, sizeof *s);
    lt_status st = s || G == 0 ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int g = 0; st == LT_OK && g < G; g++) /* dK/dV at the sample's first backward over these layers */
        for (int i = 0; st == LT_OK && i < u[g].n_slices; i++)
            st = lt_kvctx_reserve_grad(kv, u[g].slices[i].sample, pass->l0, pass->l1, err);
    for (int g = 0; st == LT_OK && g < G; g++) {
        dims d = dims_of(m, a[g].T);
        /* each array's bytes, aligned (on the fp32 backend: its floats x 4, no padding) */
        size_t TC = lt_backend_span(be, (size_t)d.T * d.C, es), TQ = lt_backend_span(be, (size_t)d.T * d.qd, es);
        size_t TF = lt_backend_span(be, (size_t)d.T * d.F, es), TK = lt_backend_span(be, (size_t)d.T * d.kvd, es);
        size_t total = TC * 2 + TQ * 2 + TF * 3 + TK * 2;
        s[g].buf = be->alloc(be, total ? total : es, false);
        s[g].segs = malloc(((size_t)u[g].n_slices + 1) * sizeof *s[g].segs);
        if (!s[g].buf || !s[g].segs) {
            st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a %d-token unit's backward (%s)", d.T, be->name);
            break;
        }
        s[g].bytes = total ? total : es;
        held(pass, s[g].bytes);
        s[g].dx = s[g].buf, s[g].dn = at(s[g].dx, TC), s[g].dq = at(s[g].dn, TC), s[g].datt = at(s[g].dq, TQ);
        s[g].dact = at(s[g].datt, TQ), s[g].dgate = at(s[g].dact, TF), s[g].dup = at(s[g].dgate, TF);
        s[g].dk = at(s[g].dup, TF), s[g].dv = at(s[g].dk, TK);
        be->copy(be, s[g].dx, pass->head ? a[g].dnf_in : dout[g], (size_t)d.T * d.C * es);
    }
    /* per layer in lockstep, the forward's mirror: every member's attention backward before
     * any member reads its own K/V rows' gradients */
    for (int l = pass->l1 - 1; st == LT_OK && l >= pass->l0; l--) {
        if (hooks && hooks->layer_begin && (st = hooks->layer_begin(hooks->ctx, l, err)) != LT_OK) break;
        if (hooks && hooks->dkv_begin && (st = hooks->dkv_begin(hooks->ctx, l, err)) != LT_OK) break;
        for (int g = 0; g < G; g++) layer_post_backward(m, &u[g], kv, &a[g], grads, l, &s[g], pool);
        if ((st = be->check(be, err)) != LT_OK) break;
        if (hooks && hooks->dkv_ready && (st = hooks->dkv_ready(hooks->ctx, l, err)) != LT_OK) break;
        for (int g = 0; g < G; g++) layer_pre_backward(m, &u[g], kv, &a[g], grads, l, &s[g], pool);
        if ((st = be->check(be, err)) != LT_OK) break;
        if (hooks && hooks->layer_done && (st = hooks->layer_done(hooks->ctx, l, err)) != LT_OK) break;
    }
    for (int g = 0; st == LT_OK && g < G; g++) {
        size_t TC = (size_t)a[g].T * (size_t)m->shape.hidden;
        if (pass->embed) be->embed_backward(be, grads->embed, s[g].dx, a[g].ids, a[g].T, m->shape.hidden);
        else be->accumulate(be, din[g], s[g].dx, TC);
    }
    if (st == LT_OK) st = be->check(be, err);
    for (int g = 0; s && g < G; g++) {
        let_go(pass, s[g].bytes);
        be->free(be, s[g].buf), free(s[g].segs);
    }
    free(s);
    return st;
}

lt_status lt_llama_backward(const lt_llama *m, const lt_pass *pass, const lt_batch *b, const lt_train_unit *u,
                            const float *dout, lt_kvctx *kv, lt_acts *a, const lt_llama_views *grads,
                            float *din, lt_pool *pool, lt_error *err) {
    if (!pass->head && !dout) return lt_fail(err, LT_ERR_INTERNAL, NULL, "backward of a non-head pass needs dout");
    return lt_llama_backward_group(m, pass, b, u, 1, &dout, kv, a, grads, NULL, &din, pool, err);
}

lt_status lt_llama_step_units(const lt_llama *m, const lt_batch *b, const lt_train_unit *units, int n_units,
                              float loss_scale, const lt_llama_views *grads, lt_kvctx *kv, double *loss_sum,
                              lt_pool *pool, lt_error *err) {
    lt_kvctx own;
    bool own_kv = kv == NULL;
    bool backward = grads != NULL;
    lt_status st = LT_OK;
    if (own_kv) {
        st = lt_kvctx_init(&own, m, b, backward, err);
        if (st != LT_OK) return st;
        kv = &own;
    } else if (backward && !kv->with_grad) {
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "a step with gradients needs a KV context with gradients");
    }
    if (backward) lt_kvctx_zero_grad(kv);
    lt_pass pass = {.l1 = m->shape.layers, .embed = true, .head = true, .loss_scale = backward ? loss_scale : 0.0f};
    lt_acts *acts = calloc((size_t)(n_units > 0 ? n_units : 1), sizeof *acts);
    if (!acts) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %d units", n_units);
    double total = 0;
    /* forward in unit order; without a backward each unit's activations go at once */
    for (int i = 0; st == LT_OK && i < n_units; i++) {
        st = lt_acts_alloc(&acts[i], m, b, &units[i], 0, m->shape.layers, true, err);
        double loss = 0;
        if (st == LT_OK) st = lt_llama_forward(m, &pass, b, &units[i], NULL, kv, &acts[i], grads, &loss, NULL, pool, err);
        total += loss;
        if (!backward) lt_acts_free(&acts[i]);
    }
    /* backward in reverse unit order (FILO over the slices of each sample) */
    for (int i = n_units - 1; st == LT_OK && backward && i >= 0; i--)
        st = lt_llama_backward(m, &pass, b, &units[i], NULL, kv, &acts[i], grads, NULL, pool, err);
    for (int i = 0; acts && i < n_units; i++) lt_acts_free(&acts[i]);
    free(acts);
    if (own_kv) lt_kvctx_free(&own);
    if (st == LT_OK && loss_sum) *loss_sum = total;
    return st;
}
