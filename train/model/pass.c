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
    int T, Tl, C, F, V, nh, nkv, hd, qd, kvd;
} dims;

/* A unit of T rows, Tl of them this rank's sequence-parallel rows; the widths are this
 * tensor-parallel rank's (its heads, K/V heads, MLP columns and vocabulary rows). */
static dims dims_of(const lt_llama *m, int T, int Tl) {
    dims d;
    d.T = T;
    d.Tl = Tl;
    d.C = m->shape.hidden;
    d.F = m->ffn_l;
    d.V = m->vocab_l;
    d.nh = m->heads_l;
    d.nkv = m->kv_heads_l;
    d.hd = m->head_dim;
    d.qd = d.nh * d.hd;
    d.kvd = d.nkv * d.hd;
    return d;
}

/* The arrays a layer part keeps (lt_acts_alloc_parts), by lt_layer_part bit: the
 * pre-attention its input and the first norm's output and statistics; the attention the
 * norm's output (the QKV linear's input), Q, its output and log-sum-exps; the
 * post-attention its inputs (the residual, the attention output) and the rest of the layer. */
enum { KEEP_X = 1, KEEP_N1 = 2, KEEP_Q = 4, KEEP_ATT = 8, KEEP_POST = 16, KEEP_OUT = 32, KEEP_ALL = 63 };
static unsigned kept_arrays(unsigned parts) {
    if (!parts) return KEEP_ALL;
    unsigned k = 0;
    if (parts & (1u << LT_LAYER_PRE)) k |= KEEP_X | KEEP_N1;
    if (parts & (1u << LT_LAYER_ATTN)) k |= KEEP_N1 | KEEP_Q | KEEP_ATT;
    if (parts & (1u << LT_LAYER_POST)) k |= KEEP_X | KEEP_ATT | KEEP_POST | KEEP_OUT;
    if (parts & LT_ACTS_X_OUTSIDE) k &= ~(unsigned)KEEP_X;
    if (parts & LT_ACTS_POST_RECOMPUTED) k &= ~(unsigned)KEEP_POST;
    return k;
}

/* Rows of the MLP's intermediates at a time for a unit of T rows (lt_llama.mlp_chunk). */
static int mlp_rows(const lt_llama *m, int T) { return m->mlp_chunk > 0 && m->mlp_chunk < T ? m->mlp_chunk : T; }

/* Bytes of a post-attention's arrays past its inputs: x2, n2, rstd2, and gate, up, act for
 * `frows` rows (T, or a chunk's). */
static size_t post_bytes(const lt_backend *be, const dims *d, int frows) {
    size_t es = be->act_bytes;
    return 2 * lt_backend_span(be, (size_t)d->Tl * (size_t)d->C, es) + lt_backend_span(be, (size_t)d->Tl, 4) +
           3 * lt_backend_span(be, (size_t)frows * (size_t)d->F, es);
}

/* Bytes one layer keeps (lt_layer_acts; `keep`: kept_arrays): activation elements of
 * act_bytes, rstd and lse fp32, each array aligned (on the fp32 backend with tp = 1: T C 4
 * floats + ..., no padding). */
static size_t layer_bytes(const lt_backend *be, const dims *d, unsigned keep) {
    size_t T = (size_t)d->T, Tl = (size_t)d->Tl, es = be->act_bytes;
    size_t TC = lt_backend_span(be, Tl * (size_t)d->C, es), TR = lt_backend_span(be, Tl, 4);
    size_t TQ = lt_backend_span(be, T * (size_t)d->qd, es);
    return (keep & KEEP_X ? TC : 0) + (keep & KEEP_N1 ? TC + TR : 0) + (keep & KEEP_Q ? TQ : 0) +
           (keep & KEEP_ATT ? TQ : 0) + (keep & KEEP_Q ? lt_backend_span(be, T * (size_t)d->nh, 4) : 0) +
           (keep & KEEP_POST ? post_bytes(be, d, d->T) : 0);
}

/* Where a set's arrays lie in a->buf / a->ibuf for a->T rows (a->Tl SP rows): every layer
 * of the range in order (a window set: one layer's storage that every layer of the range
 * shares), then out (not in a window set), then the head's dnf_in; the arrays a->parts' layer
 * parts do not keep are NULL. Offsets in bytes (a->be's element sizes and alignment).
 * Returns the bytes of buf. */
static size_t lay_out(lt_acts *a, const dims *d, bool head) {
    const lt_backend *be = a->be;
    size_t o = 0, T = (size_t)a->T, Tl = (size_t)a->Tl, es = be->act_bytes;
    size_t TC = lt_backend_span(be, Tl * d->C, es), TQ = lt_backend_span(be, T * d->qd, es);
    size_t TF = lt_backend_span(be, T * d->F, es), TR = lt_backend_span(be, Tl, 4);
    size_t TH = lt_backend_span(be, T * d->nh, 4);
    unsigned k = kept_arrays(a->parts);
#define TAKE(want, bytes) ((want) ? (o += (bytes), at(a->buf, o - (bytes))) : NULL)
    int stored = a->window ? 1 : a->l1 - a->l0;
    for (int l = 0; l < a->l1 - a->l0; l++) {
        lt_layer_acts *L = &a->layer[l];
        if (l >= stored) {
            *L = a->layer[0];
            continue;
        }
        L->x = TAKE(k & KEEP_X, TC);
        L->n1 = TAKE(k & KEEP_N1, TC);
        L->rstd1 = TAKE(k & KEEP_N1, TR);
        L->q = TAKE(k & KEEP_Q, TQ);
        L->att = TAKE(k & KEEP_ATT, TQ);
        L->lse = TAKE(k & KEEP_Q, TH);
        L->x2 = TAKE(k & KEEP_POST, TC);
        L->n2 = TAKE(k & KEEP_POST, TC);
        L->rstd2 = TAKE(k & KEEP_POST, TR);
        L->gate = TAKE(k & KEEP_POST, TF);
        L->up = TAKE(k & KEEP_POST, TF);
        L->act = TAKE(k & KEEP_POST, TF);
    }
#undef TAKE
    a->mlp_rows = a->T; /* (a recomputed post-attention's scratch: lt_acts_part_scratch) */
    a->out = a->window || !(k & KEEP_OUT) ? NULL : at(a->buf, o);
    if (!a->window && (k & KEEP_OUT)) o += TC;
    a->dnf_in = head ? at(a->buf, o) : NULL;
    if (head) o += TC;
    a->ids = a->ibuf;
    a->pos = a->ibuf + T;
    a->targets = a->ibuf + 2 * T;
    a->lrow = a->ibuf_sp;
    a->slot = a->ibuf_sp ? a->ibuf_sp + T : NULL;
    return o;
}

/* Row r's index among this rank's SP rows (-1: another rank's), and its slot in a gathered
 * [tp, N] array (train/model/model.h); the identity with tp = 1. */
static inline int lrow_of(const lt_acts *a, int r) { return a->lrow ? a->lrow[r] : r; }

/* The sequence-parallel split of a set's rows (model.h: row r goes to rank pos[r] mod tp):
 * a->Tl, a->N, and with tp > 1 lrow and slot. */
static void sp_split(lt_acts *a, const lt_llama *m) {
    if (m->tp == 1) {
        a->Tl = a->N = a->T;
        return;
    }
    int cnt[256] = {0}; /* tp <= 256: lt_llama_create_tp */
    for (int r = 0; r < a->T; r++) {
        int o = a->pos[r] % m->tp;
        a->lrow[r] = o == m->tp_rank ? cnt[o] : -1;
        a->slot[r] = cnt[o]++; /* the owner's block is added below, once N is known */
    }
    a->N = 0;
    for (int o = 0; o < m->tp; o++) a->N = cnt[o] > a->N ? cnt[o] : a->N;
    a->Tl = cnt[m->tp_rank];
    for (int r = 0; r < a->T; r++) a->slot[r] += (a->pos[r] % m->tp) * a->N;
}

int lt_acts_sp_row(const lt_acts *a, int row) { return lrow_of(a, row); }

int lt_unit_sp_rows(const lt_llama *m, const lt_train_unit *u) {
    if (m->tp == 1) return lt_unit_tokens(u);
    int n = 0;
    for (int i = 0; i < u->n_slices; i++)
        for (int t = u->slices[i].begin; t < u->slices[i].end; t++) n += t % m->tp == m->tp_rank;
    return n;
}

static lt_status acts_alloc(lt_acts *a, const lt_llama *m, const lt_batch *b, const lt_train_unit *u, int l0, int l1,
                            bool head, bool window, unsigned parts, lt_error *err) {
    memset(a, 0, sizeof *a);
    lt_status st = lt_unit_check(u, b, m->shape.vocab, err);
    if (st != LT_OK) return st;
    if (l0 < 0 || l1 > m->shape.layers || l0 > l1)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "layer range [%d, %d) outside the model's %d layers", l0, l1,
                       m->shape.layers);
    int T = lt_unit_tokens(u), Tl = lt_unit_sp_rows(m, u);
    dims d = dims_of(m, T, Tl);
    const lt_backend *be = lt_backend_of(m);
    int stored = window ? (l1 > l0 ? 1 : 0) : l1 - l0;
    unsigned keep = kept_arrays(parts);
    size_t TCb = lt_backend_span(be, (size_t)Tl * (size_t)d.C, be->act_bytes); /* an SP [Tl, C] array's bytes */
    size_t total = layer_bytes(be, &d, keep) * (size_t)stored +
                   TCb * ((window || !(keep & KEEP_OUT) ? 0u : 1u) + (head ? 1u : 0u));
    size_t ibytes = (size_t)T * 3 * sizeof(int32_t), spbytes = m->tp > 1 ? (size_t)T * 2 * sizeof(int32_t) : 0;
    a->T = T;
    a->Tl = Tl;
    a->l0 = l0;
    a->l1 = l1;
    a->window = window;
    a->parts = parts;
    a->be = be;
    a->buf = be->alloc(be, total ? total : sizeof(float), false);
    a->ibuf = malloc(ibytes);
    a->ibuf_sp = spbytes ? malloc(spbytes) : NULL;
    a->layer = calloc((size_t)(l1 - l0 > 0 ? l1 - l0 : 1), sizeof *a->layer);
    if (!a->buf || !a->ibuf || (spbytes && !a->ibuf_sp) || !a->layer) {
        lt_acts_free(a);
        return lt_backend_nomem(be, err, NULL, "out of memory for the activations of a %d-token unit (%.1f MiB on %s)",
                                T, (double)total / 1048576.0, be->name);
    }
    a->bytes = total + ibytes + spbytes;
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
    sp_split(a, m);
    return LT_OK;
}

lt_status lt_acts_alloc(lt_acts *a, const lt_llama *m, const lt_batch *b, const lt_train_unit *u, int l0, int l1,
                        bool head, lt_error *err) {
    return acts_alloc(a, m, b, u, l0, l1, head, false, 0, err);
}

lt_status lt_acts_alloc_window(lt_acts *a, const lt_llama *m, const lt_batch *b, const lt_train_unit *u, int l0,
                               int l1, bool head, lt_error *err) {
    return acts_alloc(a, m, b, u, l0, l1, head, true, 0, err);
}

lt_status lt_acts_alloc_parts(lt_acts *a, const lt_llama *m, const lt_batch *b, const lt_train_unit *u, int l,
                              bool head, unsigned parts, lt_error *err) {
    unsigned all = (1u << LT_LAYER_PRE) | (1u << LT_LAYER_ATTN) | (1u << LT_LAYER_POST);
    if (!(parts & all) || parts & ~(all | LT_ACTS_X_OUTSIDE | LT_ACTS_POST_RECOMPUTED) ||
        ((parts & LT_ACTS_POST_RECOMPUTED) && !(parts & (1u << LT_LAYER_POST))))
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "layer parts 0x%x: not a set of pre, attention and post", parts);
    if (head && !(parts & (1u << LT_LAYER_POST)))
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "the head goes with a post-attention part");
    return acts_alloc(a, m, b, u, l, l + 1, head, false, parts, err);
}

/* One array of a set: its base, the bytes of one row (row r is at base + r w), and whether
 * it holds this rank's SP rows only (row r at base + lrow[r] w; absent when lrow[r] < 0). */
typedef struct field {
    char *base;
    size_t w;
    bool sp;
} field;

enum { LAYER_FIELDS = 12 };

/* The arrays of layer l of a, in the order of lay_out: activation elements of es bytes,
 * rstd and lse fp32. */
static void layer_fields(const lt_acts *a, const dims *d, int l, field *f) {
    const lt_layer_acts *L = &a->layer[l - a->l0];
    size_t es = a->be->act_bytes, C = (size_t)d->C * es, Q = (size_t)d->qd * es, F = (size_t)d->F * es;
    f[0] = (field){(char *)L->x, C, true}, f[1] = (field){(char *)L->n1, C, true};
    f[2] = (field){(char *)L->rstd1, 4, true};
    f[3] = (field){(char *)L->q, Q, false}, f[4] = (field){(char *)L->att, Q, false};
    f[5] = (field){(char *)L->lse, (size_t)d->nh * 4, false};
    f[6] = (field){(char *)L->x2, C, true}, f[7] = (field){(char *)L->n2, C, true};
    f[8] = (field){(char *)L->rstd2, 4, true};
    f[9] = (field){(char *)L->gate, F, false}, f[10] = (field){(char *)L->up, F, false};
    f[11] = (field){(char *)L->act, F, false};
}

/* The head's part of a row (dnf_in). */
static field head_field(const lt_acts *a, const dims *d) {
    return (field){(char *)a->dnf_in, (size_t)d->C * a->be->act_bytes, true};
}

/* Where row r of field f is, or NULL when it is another rank's SP row. */
static char *row_at(const lt_acts *a, const field *f, int r) {
    int k = f->sp ? lrow_of(a, r) : r;
    return k < 0 ? NULL : f->base + (size_t)k * f->w;
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
 * fields' bytes one after the other (buf is memory of a's backend: be->copy); an SP field
 * of another rank's row keeps its place in buf, unused. */
static lt_status row_io(lt_acts *a, int row, const lt_llama *m, int l0, int l1, bool head, char *buf, bool pack,
                        lt_error *err) {
    dims d = dims_of(m, 1, 1);
    field f[LAYER_FIELDS + 1];
    for (int l = l0; l <= l1; l++) {
        int n = LAYER_FIELDS;
        if (l < l1) layer_fields(a, &d, l, f);
        else if (head) f[0] = head_field(a, &d), n = 1;
        else break;
        for (int i = 0; i < n; buf += f[i].w, i++) {
            char *r = row_at(a, &f[i], row);
            if (!r) continue;
            if (pack) a->be->copy(a->be, buf, r, f[i].w);
            else a->be->copy(a->be, r, buf, f[i].w);
        }
    }
    return a->be->check(a->be, err);
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
    dims d = dims_of(m, 1, 1);
    field fd[LAYER_FIELDS], fs[LAYER_FIELDS];
    for (int l = l0; l <= l1; l++) {
        int n = LAYER_FIELDS;
        if (l < l1) layer_fields(dst, &d, l, fd), layer_fields(src, &d, l, fs);
        else if (head) fd[0] = head_field(dst, &d), fs[0] = head_field(src, &d), n = 1;
        else break;
        for (int i = 0; i < n; i++) {
            char *to = row_at(dst, &fd[i], drow);
            const char *from = row_at(src, &fs[i], srow);
            if (to && from) dst->be->copy(dst->be, to, from, fd[i].w); /* the same token: both or neither */
        }
    }
    return LT_OK;
}

/* A row's bytes (the fields of layer_fields and head_field, unpadded; an SP field's too,
 * whichever rank holds the row); the floats of lt_acts_row_floats are these bytes rounded
 * up to whole floats (equal on fp32). */
static size_t row_bytes(const lt_llama *m, int l0, int l1, bool head) {
    size_t es = lt_backend_of(m)->act_bytes;
    dims d = dims_of(m, 1, 1);
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
    if (i == nl) return (field){(char *)a->out, (size_t)d->C * a->be->act_bytes, true};
    if (i == nl + 1 && a->dnf_in) return head_field(a, d);
    return (field){NULL, 0, false};
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
    size_t ibytes = (size_t)a->T * 3 * sizeof(int32_t), spbytes = a->ibuf_sp ? (size_t)a->T * 2 * sizeof(int32_t) : 0;
    size_t fbytes = a->bytes - ibytes - spbytes;
    dims d = dims_of(m, a->T, a->Tl);
    lt_acts old = *a; /* its layer views are lay_out's of a->T rows: keep them */
    lt_layer_acts *old_layer = malloc((size_t)(a->l1 - a->l0 > 0 ? a->l1 - a->l0 : 1) * sizeof *old_layer);
    int32_t *old_lrow = a->lrow ? malloc((size_t)a->T * sizeof *old_lrow) : NULL;
    if (!old_layer || (a->lrow && !old_lrow)) {
        free(old_layer), free(old_lrow);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    }
    memcpy(old_layer, a->layer, (size_t)(a->l1 - a->l0) * sizeof *old_layer);
    if (old_lrow) memcpy(old_lrow, a->lrow, (size_t)a->T * sizeof *old_lrow);
    old.layer = old_layer;
    old.lrow = old_lrow;
    /* the kept rows' ids, positions, targets, and their SP split (rows[k] >= k: in place) */
    for (int k = 0; k < n; k++) {
        a->ids[k] = old.ids[rows[k]];
        a->pos[k] = old.pos[rows[k]];
        a->targets[k] = old.targets[rows[k]];
    }
    memmove(a->ibuf + n, a->pos, (size_t)n * sizeof(int32_t));
    memmove(a->ibuf + 2 * (size_t)n, a->targets, (size_t)n * sizeof(int32_t));
    a->T = n;
    a->ids = a->ibuf, a->pos = a->ibuf + n, a->targets = a->ibuf + 2 * (size_t)n;
    if (a->lrow) a->slot = a->lrow + n;
    sp_split(a, m);
    /* the new layout over the same buffers: every array starts at or below where it was and
     * every kept row moves down, so moving them in address order overwrites nothing unread */
    dims dn = dims_of(m, n, a->Tl);
    size_t total = lay_out(a, &dn, head);
    for (int i = 0;; i++) {
        field fo = field_at(&old, &d, i), fn = field_at(a, &dn, i);
        if (!fo.base) break;
        for (int r = 0; r < n; r++) {
            char *to = row_at(a, &fn, r);
            const char *from = row_at(&old, &fo, rows[r]);
            if (to && from) be->copy(be, to, from, fn.w);
        }
    }
    free(old_layer), free(old_lrow);
    /* give the rows' memory back: on the host a smaller block (the allocator keeps it in
     * place); elsewhere a new block the kept rows move to */
    float *fb = NULL;
    if (be->host) {
        fb = realloc(a->buf, total);
    } else if ((fb = be->alloc(be, total, false))) {
        be->copy(be, fb, a->buf, total);
        be->free(be, a->buf);
    } else if (be->alloc_failure) {
        be->alloc_failure(be, NULL); /* not an error (the whole block is kept): its reason dropped */
    }
    int32_t *ib = realloc(a->ibuf, (size_t)n * 3 * sizeof(int32_t));
    int32_t *sb = a->ibuf_sp ? realloc(a->ibuf_sp, (size_t)n * 2 * sizeof(int32_t)) : NULL;
    if (fb) a->buf = fb, fbytes = total;
    if (ib) a->ibuf = ib, ibytes = (size_t)n * 3 * sizeof(int32_t);
    if (sb) a->ibuf_sp = sb, spbytes = (size_t)n * 2 * sizeof(int32_t);
    lay_out(a, &dn, head);
    a->bytes = fbytes + ibytes + spbytes; /* (a block that could not shrink is still held whole) */
    return LT_OK;
}

lt_status lt_acts_part_scratch(lt_acts *a, const lt_llama *m, bool alloc, bool for_backward, size_t *bytes,
                               lt_error *err) {
    const lt_backend *be = a->be;
    lt_layer_acts *L = a->layer;
    if (!alloc) {
        if (a->scratch) be->free(be, a->scratch);
        a->scratch = NULL, a->scratch_bytes = 0;
        a->mlp_rows = a->T, a->mlp_in_backward = false;
        L->x2 = L->n2 = L->rstd2 = L->gate = L->up = L->act = NULL;
        if (bytes) *bytes = 0;
        return LT_OK;
    }
    if (!(a->parts & LT_ACTS_POST_RECOMPUTED) || a->scratch)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "post-attention scratch for a set that keeps its arrays, or twice");
    dims d = dims_of(m, a->T, a->Tl);
    size_t es = be->act_bytes, TC = lt_backend_span(be, (size_t)a->Tl * (size_t)d.C, es);
    int rows = mlp_rows(m, a->T);
    size_t TR = lt_backend_span(be, (size_t)a->Tl, 4), TF = lt_backend_span(be, (size_t)rows * (size_t)d.F, es);
    size_t total = post_bytes(be, &d, rows), o = 0;
    if (!(a->scratch = be->alloc(be, total ? total : es, false)))
        return lt_backend_nomem(be, err, NULL, "out of memory for a recomputed post-attention of %d tokens", a->T);
    a->scratch_bytes = total;
    a->mlp_rows = rows;
    a->mlp_in_backward = for_backward && rows < a->T;
    L->x2 = at(a->scratch, o), o += TC;
    L->n2 = at(a->scratch, o), o += TC;
    L->rstd2 = at(a->scratch, o), o += TR;
    L->gate = at(a->scratch, o), o += TF;
    L->up = at(a->scratch, o), o += TF;
    L->act = at(a->scratch, o);
    if (bytes) *bytes = total;
    return LT_OK;
}

void lt_acts_free(lt_acts *a) {
    if (!a) return;
    if (a->be) a->be->free(a->be, a->scratch);
    if (a->be) a->be->free(a->be, a->buf);
    else free(a->buf);
    free(a->ibuf);
    free(a->ibuf_sp);
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

/* ---------------------------------------------------------------- tensor parallelism
 * Megatron-LM's sequence parallelism (Korthikanti et al. 2022 4.2.2, Fig. 5): between the
 * blocks a rank holds its SP rows of the residual stream (model.h's lt_layer_acts); an
 * all-gather brings every row of the normed input before a column-parallel GEMM (its
 * conjugate in the backward: a reduce-scatter of the input's gradient), and a reduce-scatter
 * sums a row-parallel GEMM's partial outputs into the SP rows after it (its conjugate: an
 * all-gather of the output's gradient). Both go through a [tp, N] block array (tp_pad):
 * rank o's SP rows in block o, padded to the group's largest count N, placed by a->slot.
 * With tp = 1 none of this runs: the full arrays are the SP arrays themselves. */

/* full[T, w bytes] in unit order = every rank's SP rows of `local` ([Tl, w], this rank's). */
static lt_status sp_gather(const lt_llama *m, const lt_acts *a, void *full, const void *local, size_t w, void *pad,
                           lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    size_t block = (size_t)a->N * w;
    be->copy(be, (char *)pad + (size_t)m->tp_rank * block, local, (size_t)a->Tl * w);
    lt_status st = m->tp_ops->all_gather(m->tp_ops->ctx, pad, block, (size_t)a->T * w, err);
    for (int r = 0; st == LT_OK && r < a->T; r++)
        be->copy(be, (char *)full + (size_t)r * w, (char *)pad + (size_t)a->slot[r] * w, w);
    return st;
}

/* local[Tl, width] = the sum over the ranks of their partial `full` [T, width] rows that
 * are this rank's SP rows (elements of es bytes), in two halves so that work independent of
 * it runs while the group sums: _post puts the rows into the block array and posts the
 * collective (*pending: for _finish; NULL where the ops have no posted form and it ran at
 * once), _finish waits for it and takes this rank's rows. */
static lt_status sp_reduce_scatter_post(const lt_llama *m, const lt_acts *a, const void *full, size_t width, size_t es,
                                        void *pad, void **pending, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    size_t w = width * es, block = (size_t)a->N * w;
    *pending = NULL;
    be->zero(be, pad, block * (size_t)m->tp);
    for (int r = 0; r < a->T; r++)
        be->copy(be, (char *)pad + (size_t)a->slot[r] * w, (const char *)full + (size_t)r * w, w);
    const lt_tp_ops *o = m->tp_ops;
    if (o->reduce_scatter_post && o->wait)
        return o->reduce_scatter_post(o->ctx, pad, (size_t)a->N * width, es, (size_t)a->T * w, pending, err);
    return o->reduce_scatter(o->ctx, pad, (size_t)a->N * width, es, (size_t)a->T * w, err);
}

static lt_status sp_reduce_scatter_finish(const lt_llama *m, const lt_acts *a, void *local, size_t width, size_t es,
                                          void *pad, void *pending, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    size_t w = width * es, block = (size_t)a->N * w;
    lt_status st = pending ? m->tp_ops->wait(m->tp_ops->ctx, pending, err) : LT_OK;
    if (st == LT_OK) be->copy(be, local, (char *)pad + (size_t)m->tp_rank * block, (size_t)a->Tl * w);
    return st;
}

static lt_status sp_reduce_scatter(const lt_llama *m, const lt_acts *a, void *local, const void *full, size_t width,
                                   size_t es, void *pad, lt_error *err) {
    void *pending;
    lt_status st = sp_reduce_scatter_post(m, a, full, width, es, pad, &pending, err);
    return st == LT_OK ? sp_reduce_scatter_finish(m, a, local, width, es, pad, pending, err) : st;
}

/* Bytes of the [tp, N] block array of a set's [*, C] rows. */
static size_t tp_pad_bytes(const lt_llama *m, const lt_acts *a) {
    return (size_t)m->tp * (size_t)a->N * (size_t)m->shape.hidden * lt_backend_of(m)->act_bytes;
}

/* The vocab-parallel embedding's ids (host): a token of this rank's rows [vocab0, vocab0 +
 * vocab_l) as its row there, any other -1 (a zero row: train/cpu/kernels.h). */
static int32_t *local_ids(const lt_llama *m, const lt_acts *a) {
    int32_t *ids = malloc((size_t)(a->T > 0 ? a->T : 1) * sizeof *ids);
    for (int r = 0; ids && r < a->T; r++) {
        int k = a->ids[r] - m->vocab0;
        ids[r] = k >= 0 && k < m->vocab_l ? k : -1;
    }
    return ids;
}

/*
 * The head: final RMSNorm, LM head, cross-entropy, over row blocks so the [T, V] logits
 * never exist at once. With loss_scale > 0 its backward runs here too (fused, as llm.c's
 * fused classifier): the logits block becomes dlogits in place, the LM head's gradient is
 * added to grads, and the gradient of the final norm's input goes to acts->dnf_in.
 * Tensor-parallel: the normed SP rows are all-gathered, each rank computes the logits of
 * its vocabulary rows, the cross-entropy's row maxima and sums are all-reduced over the
 * group (Megatron's vocab-parallel cross-entropy: no rank holds a whole row of logits), and
 * the final norm's input gradient, partial per rank, is reduce-scattered into SP rows.
 * The logits block's rows are ld = V rounded up to the backend's logits_pad apart (64 on
 * the GPU: an odd V such as GPT-2's 50257 would leave rows 2-byte aligned, the GEMMs and
 * the cross-entropy on their slow paths); the padding columns are never written or read.
 */
static lt_status head_forward(const lt_llama *m, const lt_pass *pass, lt_acts *a, const lt_llama_views *grads,
                              float *logits_out, lt_pool *pool, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    dims d = dims_of(m, a->T, a->Tl);
    size_t es = be->act_bytes, TC = (size_t)d.Tl * d.C, FC = (size_t)d.T * d.C;
    bool grad = pass->loss_scale > 0, tp = m->tp > 1;
    if (tp && logits_out)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "the logits of a tensor-parallel rank are its vocabulary rows only");
    int block = lt_fused_head_rows(m->shape.vocab); /* rows at once: the [rows, V] logits stay near 32 MiB */
    if (block > d.T) block = d.T;
    if (block < 1) block = 1;
    float *nf = be->alloc(be, (TC ? TC : 1) * es, false);
    float *rstd = be->alloc(be, (size_t)(d.Tl ? d.Tl : 1) * sizeof(float), false);
    int ld = lt_backend_logits_ld(be, d.V); /* the logits rows' stride (padded) */
    float *logits = be->alloc(be, (size_t)block * (size_t)ld * es, false);
    float *dnf = grad ? be->alloc(be, (TC ? TC : 1) * es, true) : NULL;
    /* tensor-parallel: every row's normed input, its partial gradient, the block array, the
     * cross-entropy's statistics (rowmax, sums, target logits) */
    size_t pad_bytes = tp ? tp_pad_bytes(m, a) : 0, stat_bytes = tp ? (size_t)block * 3 * sizeof(float) : 0;
    float *nff = tp ? be->alloc(be, FC * es, false) : nf;
    float *dnff = tp && grad ? be->alloc(be, FC * es, true) : dnf;
    float *pad = tp ? be->alloc(be, pad_bytes ? pad_bytes : es, false) : NULL;
    float *stats = tp ? be->alloc(be, stat_bytes, false) : NULL;
    if (!nf || !rstd || !logits || (grad && !dnf) || !nff || (grad && !dnff) || (tp && (!pad || !stats))) {
        be->free(be, nf), be->free(be, rstd), be->free(be, logits), be->free(be, dnf);
        if (tp) be->free(be, nff), be->free(be, dnff), be->free(be, pad), be->free(be, stats);
        return lt_backend_nomem(be, err, NULL, "out of memory for the LM head of a %d-token unit (%s)", d.T, be->name);
    }
    size_t bytes = (TC * (grad ? 2u : 1u) + (size_t)block * (size_t)ld) * es + (size_t)d.Tl * sizeof(float);
    if (tp) bytes += FC * es * (grad ? 2u : 1u) + pad_bytes + stat_bytes;
    held(pass, bytes);
    be->rmsnorm_forward(be, nf, rstd, a->out, WEIGHT(m->w.final_norm), d.Tl, d.C, (float)m->shape.norm_eps, pool);
    lt_status st = tp ? sp_gather(m, a, nff, nf, (size_t)d.C * es, pad, err) : LT_OK;
    double loss = 0;
    int predicting = 0;
    for (int r0 = 0; st == LT_OK && r0 < d.T; r0 += block) {
        int rows = d.T - r0 < block ? d.T - r0 : block;
        const float *x = at(nff, (size_t)r0 * d.C * es);
        const int32_t *tg = a->targets + r0;
        be->linear_forward_ld(be, logits, x, WEIGHT(m->w.lm_head), rows, d.C, d.V, ld);
        if (logits_out && ld == d.V)
            st = be->to_host_f32(be, logits_out + (size_t)r0 * d.V, logits, (size_t)rows * d.V, err);
        for (int r = 0; logits_out && ld != d.V && st == LT_OK && r < rows; r++) /* the padding left behind */
            st = be->to_host_f32(be, logits_out + (size_t)(r0 + r) * d.V, at(logits, (size_t)r * ld * es), d.V, err);
        if (!tp) {
            loss += be->xent(be, grad ? logits : NULL, logits, tg, rows, d.V, ld, pass->loss_scale, pool);
        } else {
            float *rowmax = stats, *sums = stats + block;
            be->xent_tp_max(be, rowmax, logits, rows, d.V, ld);
            if ((st = be->check(be, err)) == LT_OK) st = m->tp_ops->all_reduce(m->tp_ops->ctx, rowmax, (size_t)rows, true, err);
            if (st == LT_OK) be->xent_tp_sums(be, sums, logits, rowmax, tg, m->vocab0, rows, d.V, ld);
            if (st == LT_OK && (st = be->check(be, err)) == LT_OK)
                st = m->tp_ops->all_reduce(m->tp_ops->ctx, sums, 2 * (size_t)rows, false, err);
            if (st == LT_OK)
                loss += be->xent_tp_finish(be, grad ? logits : NULL, logits, rowmax, sums, tg, m->vocab0, rows, d.V,
                                           ld, pass->loss_scale);
        }
        for (int r = 0; r < rows; r++) predicting += tg[r] >= 0;
        if (st == LT_OK && grad)
            be->linear_backward_ld(be, at(dnff, (size_t)r0 * d.C * es), grads->lm_head, logits, x,
                                   WEIGHT(m->w.lm_head), rows, d.C, d.V, ld);
    }
    if (st == LT_OK && grad && tp) st = sp_reduce_scatter(m, a, dnf, dnff, (size_t)d.C, es, pad, err);
    if (st == LT_OK && grad) {
        be->zero(be, a->dnf_in, TC * es);
        be->rmsnorm_backward(be, a->dnf_in, grads->final_norm, dnf, a->out, WEIGHT(m->w.final_norm), rstd, d.Tl, d.C,
                             pool);
    }
    if (be->take_loss) loss += be->take_loss(be); /* kept on the device (the GPU): one read a unit */
    if (st == LT_OK) st = be->check(be, err);
    a->loss_sum = loss;
    a->n_predicting = predicting;
    let_go(pass, bytes);
    be->free(be, nf), be->free(be, rstd), be->free(be, logits), be->free(be, dnf);
    if (tp) be->free(be, nff), be->free(be, dnff), be->free(be, pad), be->free(be, stats);
    return st;
}

/* Per-member scratch of a forward: K/V rows of the unit, one residual-branch output (SP
 * rows), segments; tensor-parallel: the gathered normed input and a row-parallel GEMM's
 * partial output (every row) and the block array. */
typedef struct fwd_scratch {
    float *kbuf, *vbuf, *tmp, *full, *part, *pad;
    lt_attn_segment *segs;
    size_t bytes; /* of the buffers (told to the pass's meter) */
} fwd_scratch;

/* Layer l's pieces (the whole layer is norm1, qkv, then, after every member's K/V are in the
 * context, attention and o_mlp; HelixPipe's parts, lt_llama_forward_part: PRE = norm1, ATTN =
 * qkv + attention, POST = o_mlp, as HelixPipe 4.2 moves the QKV linear to the attention). */

/* n1 = rmsnorm(x) (SP rows). */
static void norm1_forward(const lt_llama *m, lt_acts *a, int l, lt_pool *pool) {
    const lt_backend *be = lt_backend_of(m);
    lt_layer_acts *L = &a->layer[l - a->l0];
    be->rmsnorm_forward(be, L->n1, L->rstd1, L->x, WEIGHT(m->w.layer[l].attn_norm), a->Tl, m->shape.hidden,
                        (float)m->shape.norm_eps, pool);
}

/* q/k/v projections of n1 (every row gathered under TP), RoPE, the unit's K/V rows into the
 * context (where every later query of the sample, in any unit or member, reads them). */
static lt_status qkv_forward(const lt_llama *m, const lt_train_unit *u, lt_kvctx *kv, lt_acts *a, int l,
                             fwd_scratch *s, lt_pool *pool, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    dims d = dims_of(m, a->T, a->Tl);
    lt_layer_acts *L = &a->layer[l - a->l0];
    const lt_layer_views *W = &m->w.layer[l];
    const float *n1 = L->n1;
    if (m->tp > 1) {
        lt_status st = sp_gather(m, a, s->full, L->n1, (size_t)d.C * be->act_bytes, s->pad, err);
        if (st != LT_OK) return st;
        n1 = s->full;
    }
    be->linear_forward(be, L->q, n1, WEIGHT(W->wq), d.T, d.C, d.qd);
    be->linear_forward(be, s->kbuf, n1, WEIGHT(W->wk), d.T, d.C, d.kvd);
    be->linear_forward(be, s->vbuf, n1, WEIGHT(W->wv), d.T, d.C, d.kvd);
    if (W->bq) { /* Qwen2: q/k/v = n Wq^T + b before RoPE (this TP rank's heads' biases) */
        be->bias_forward(be, L->q, WEIGHT(W->bq), d.T, d.qd);
        be->bias_forward(be, s->kbuf, WEIGHT(W->bk), d.T, d.kvd);
        be->bias_forward(be, s->vbuf, WEIGHT(W->bv), d.T, d.kvd);
    }
    be->rope_forward(be, L->q, a->pos, d.T, d.nh, d.hd, m->rope_inv_freq, pool);
    be->rope_forward(be, s->kbuf, a->pos, d.T, d.nkv, d.hd, m->rope_inv_freq, pool);
    ctx_rows(u, kv, l, 0, s->kbuf, true);
    ctx_rows(u, kv, l, 1, s->vbuf, true);
    return LT_OK;
}

/* Layer l, first half: norm1 and qkv. */
static lt_status layer_pre_forward(const lt_llama *m, const lt_train_unit *u, lt_kvctx *kv, lt_acts *a, int l,
                                   fwd_scratch *s, lt_pool *pool, lt_error *err) {
    norm1_forward(m, a, l, pool);
    return qkv_forward(m, u, kv, a, l, s, pool, err);
}

/* A row-parallel GEMM's output into s->tmp (SP rows): out = x W^T over every row, summed
 * over the group into this rank's rows (tp = 1: straight into tmp). */
static lt_status row_parallel(const lt_llama *m, const lt_acts *a, fwd_scratch *s, const float *x, const float *w,
                              int in, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    int C = m->shape.hidden;
    be->linear_forward(be, m->tp > 1 ? s->part : s->tmp, x, w, a->T, in, C);
    return m->tp > 1 ? sp_reduce_scatter(m, a, s->tmp, s->part, (size_t)C, be->act_bytes, s->pad, err) : LT_OK;
}

/* The attention of the unit's queries over the context: att, lse. */
static void attention_forward(const lt_llama *m, const lt_train_unit *u, lt_kvctx *kv, lt_acts *a, int l,
                              fwd_scratch *s, lt_pool *pool) {
    const lt_backend *be = lt_backend_of(m);
    dims d = dims_of(m, a->T, a->Tl);
    lt_layer_acts *L = &a->layer[l - a->l0];
    segments_of(u, kv, l, s->segs);
    be->attention_forward(be, L->att, L->lse, L->q, s->segs, u->n_slices, d.T, d.nh, d.nkv, d.hd, pool);
}

/* Output projection, residual, MLP: the layer's output (the next layer's x, or a->out). */
static lt_status o_mlp_forward(const lt_llama *m, lt_acts *a, int l, fwd_scratch *s, lt_pool *pool, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    dims d = dims_of(m, a->T, a->Tl);
    size_t TC = (size_t)d.Tl * d.C;
    lt_layer_acts *L = &a->layer[l - a->l0];
    const lt_layer_views *W = &m->w.layer[l];
    float *next = l + 1 < a->l1 ? a->layer[l + 1 - a->l0].x : a->out;
    float eps = (float)m->shape.norm_eps;
    lt_status st = row_parallel(m, a, s, L->att, WEIGHT(W->wo), d.qd, err);
    if (st != LT_OK) return st;
    be->add(be, L->x2, L->x, s->tmp, TC);
    be->rmsnorm_forward(be, L->n2, L->rstd2, L->x2, WEIGHT(W->mlp_norm), d.Tl, d.C, eps, pool);
    if (a->mlp_in_backward) return LT_OK; /* the backward remakes the MLP's chunks (lt_acts_part_scratch) */
    const float *n2 = L->n2;
    if (m->tp > 1) {
        if ((st = sp_gather(m, a, s->full, L->n2, (size_t)d.C * be->act_bytes, s->pad, err)) != LT_OK) return st;
        n2 = s->full;
    }
    /* gate, up, act for mlp_rows rows at a time (every row, or the chunked MLP of HelixPipe
     * 4.4.2): each chunk's rows of the down projection's output (every row under TP, summed
     * over the group after the last chunk: row_parallel's reduce-scatter) */
    size_t es = be->act_bytes;
    float *down = m->tp > 1 ? s->part : s->tmp;
    for (int r0 = 0; r0 < d.T; r0 += a->mlp_rows) {
        int n = d.T - r0 < a->mlp_rows ? d.T - r0 : a->mlp_rows;
        const float *x = at(n2, (size_t)r0 * d.C * es);
        be->linear_forward(be, L->gate, x, WEIGHT(W->wgate), n, d.C, d.F);
        be->linear_forward(be, L->up, x, WEIGHT(W->wup), n, d.C, d.F);
        be->swiglu_forward(be, L->act, L->gate, L->up, (size_t)n * d.F, pool);
        be->linear_forward(be, at(down, (size_t)r0 * d.C * es), L->act, WEIGHT(W->wdown), n, d.F, d.C);
    }
    if (m->tp > 1 && (st = sp_reduce_scatter(m, a, s->tmp, s->part, (size_t)d.C, es, s->pad, err)) != LT_OK)
        return st;
    be->add(be, next, L->x2, s->tmp, TC);
    return LT_OK;
}

/* Layer l, second half: attention over the context, then o_mlp. */
static lt_status layer_post_forward(const lt_llama *m, const lt_train_unit *u, lt_kvctx *kv, lt_acts *a, int l,
                                    fwd_scratch *s, lt_pool *pool, lt_error *err) {
    attention_forward(m, u, kv, a, l, s, pool);
    return o_mlp_forward(m, a, l, s, pool, err);
}

/* The pass's part of a model: its layers (and embedding, head) held; tensor parallelism
 * needs the group's collectives and a backend with the vocab-parallel cross-entropy. */
static lt_status check_tp(const lt_llama *m, const lt_pass *pass, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    if (pass->l0 < m->l0 || pass->l1 > m->l1 || (pass->embed && !m->has_embed) || (pass->head && !m->has_head))
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "a pass over layers [%d, %d)%s%s of a model part holding [%d, %d)%s%s",
                       pass->l0, pass->l1, pass->embed ? " with the embedding" : "", pass->head ? " with the head" : "",
                       m->l0, m->l1, m->has_embed ? " and the embedding" : "", m->has_head ? " and the head" : "");
    if (m->tp > 1 && !m->tp_ops)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "a tensor-parallel rank without its group's collectives");
    if (m->tp > 1 && !be->xent_tp_max)
        return lt_fail(err, LT_ERR_CONFIG, "[parallel]", "parallel.tp = %d: the %s backend has no tensor-parallel "
                       "kernels yet (the CPU fp32 backend has)", m->tp, be->name);
    return LT_OK;
}

/* A member's embedding (SP rows of x) from its token ids: vocab-parallel under TP, each
 * rank's rows of the table summed into the SP rows. */
static lt_status embed_forward(const lt_llama *m, lt_acts *a, float *x, fwd_scratch *s, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    if (m->tp == 1) {
        be->embed_forward(be, x, a->ids, a->T, WEIGHT(m->w.embed), m->shape.hidden);
        return LT_OK;
    }
    int32_t *ids = local_ids(m, a);
    if (!ids) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    be->embed_forward(be, s->part, ids, a->T, WEIGHT(m->w.embed), m->shape.hidden);
    free(ids);
    return sp_reduce_scatter(m, a, x, s->part, (size_t)m->shape.hidden, be->act_bytes, s->pad, err);
}

/* A member's forward scratch (fwd_scratch), told to the pass's meter. */
static lt_status fwd_scratch_alloc(const lt_llama *m, const lt_pass *pass, const lt_train_unit *u, const lt_acts *a,
                                   fwd_scratch *s, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    size_t es = be->act_bytes;
    bool tp = m->tp > 1;
    dims d = dims_of(m, a->T, a->Tl);
    size_t TK = (size_t)d.T * d.kvd, TC = (size_t)d.Tl * d.C, FC = tp ? (size_t)d.T * d.C : 0;
    size_t PB = tp ? tp_pad_bytes(m, a) : 0;
    memset(s, 0, sizeof *s);
    s->kbuf = be->alloc(be, (TK ? TK : 1) * es, false), s->vbuf = be->alloc(be, (TK ? TK : 1) * es, false);
    s->tmp = be->alloc(be, (TC ? TC : 1) * es, false);
    if (tp) {
        s->full = be->alloc(be, (FC ? FC : 1) * es, false), s->part = be->alloc(be, (FC ? FC : 1) * es, false);
        s->pad = be->alloc(be, PB ? PB : es, false);
    }
    s->segs = malloc(((size_t)u->n_slices + 1) * sizeof *s->segs);
    if (!s->kbuf || !s->vbuf || !s->tmp || !s->segs || (tp && (!s->full || !s->part || !s->pad)))
        return lt_backend_nomem(be, err, NULL, "out of memory for a %d-token unit's forward (%s)", d.T, be->name);
    s->bytes = (2 * (TK ? TK : 1) + (TC ? TC : 1)) * es + (tp ? 2 * (FC ? FC : 1) * es + (PB ? PB : es) : 0);
    held(pass, s->bytes);
    return LT_OK;
}

static void fwd_scratch_free(const lt_llama *m, const lt_pass *pass, fwd_scratch *s) {
    const lt_backend *be = lt_backend_of(m);
    if (s->bytes) let_go(pass, s->bytes);
    be->free(be, s->kbuf), be->free(be, s->vbuf), be->free(be, s->tmp), free(s->segs);
    if (m->tp > 1) be->free(be, s->full), be->free(be, s->part), be->free(be, s->pad);
    memset(s, 0, sizeof *s);
}

/* The members' ids, positions and targets (a->ibuf, unchanged during a pass) handed to the
 * backend for the pass: on the GPU one upload a unit, read by every layer's RoPE and every
 * head block, not one per call. */
static void bind_rows(const lt_backend *be, const lt_acts *a, int G) {
    for (int g = 0; be->bind_ints && g < G; g++) be->bind_ints(be, a[g].ibuf, 3 * (size_t)a[g].T);
}

static void unbind_rows(const lt_backend *be, const lt_acts *a, int G) {
    for (int g = 0; be->unbind_ints && g < G; g++) be->unbind_ints(be, a[g].ibuf);
}

/* A backend's failures known so far, read between layers without waiting for the GPU (its
 * check, which waits, ends each pass): a kernel's execution error shows at the pass's end,
 * or at once under LONGTAIL_CUDA_SYNC=1. */
static lt_status layer_status(const lt_backend *be, lt_error *err) {
    return be->poll ? be->poll(be, err) : be->check(be, err);
}

lt_status lt_llama_forward_group(const lt_llama *m, const lt_pass *pass, const lt_batch *b, const lt_train_unit *u,
                                 int G, const float *const *in, lt_kvctx *kv, lt_acts *a,
                                 const lt_llama_views *grads, const lt_cp_hooks *hooks, double *loss_sum,
                                 lt_pool *pool, lt_error *err) {
    (void)b; /* the units' tokens were gathered by lt_acts_alloc */
    if (G < (hooks ? 0 : 1)) return lt_fail(err, LT_ERR_INTERNAL, NULL, "a group of %d units", G);
    lt_status st = check_tp(m, pass, err);
    if (st != LT_OK) return st;
    for (int g = 0; g < G; g++) {
        if (a[g].l0 != pass->l0 || a[g].l1 != pass->l1 || (pass->head && !a[g].dnf_in) || a[g].window || a[g].parts)
            return lt_fail(err, LT_ERR_INTERNAL, NULL, "activations were allocated for another pass");
        for (int i = 0; i < u[g].n_slices; i++) {
            st = lt_kvctx_reserve(kv, u[g].slices[i].sample, pass->l0, pass->l1, err);
            if (st != LT_OK) return st;
        }
    }
    if (pass->head && pass->loss_scale > 0 && !grads)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "a head with a loss gradient needs gradient buffers");
    const lt_backend *be = lt_backend_of(m);
    size_t es = be->act_bytes;
    fwd_scratch *s = calloc((size_t)G, sizeof *s);
    st = s || G == 0 ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    bind_rows(be, a, G);
    for (int g = 0; st == LT_OK && g < G; g++) st = fwd_scratch_alloc(m, pass, &u[g], &a[g], &s[g], err);
    for (int g = 0; st == LT_OK && g < G; g++) {
        size_t TC = (size_t)a[g].Tl * (size_t)m->shape.hidden;
        float *x = a[g].l1 > a[g].l0 ? a[g].layer[0].x : a[g].out;
        if (pass->embed) st = embed_forward(m, &a[g], x, &s[g], err);
        else be->copy(be, x, in[g], TC * es);
    }
    /* per layer in lockstep: every member's K/V in the context before any member's attention
     * (context parallelism's K/V exchange, Megatron-LM CP / ring attention, in one process).
     * A backend's failure (a GPU launch) is kept by the backend and read after each half
     * layer, before a hook hands its buffers to another process; without waiting: a device
     * hook orders itself after the queued kernels (train/dist/comm.h), and the pass waits
     * once, at its end (the head's check, or the one below). */
    for (int l = pass->l0; st == LT_OK && l < pass->l1; l++) {
        if (hooks && hooks->weights && (st = hooks->weights(hooks->ctx, l, err)) != LT_OK) break;
        for (int g = 0; st == LT_OK && g < G; g++) st = layer_pre_forward(m, &u[g], kv, &a[g], l, &s[g], pool, err);
        if (st != LT_OK || (st = layer_status(be, err)) != LT_OK) break;
        if (hooks && hooks->kv_ready && (st = hooks->kv_ready(hooks->ctx, l, err)) != LT_OK) break;
        for (int g = 0; st == LT_OK && g < G; g++) st = layer_post_forward(m, &u[g], kv, &a[g], l, &s[g], pool, err);
        if (st != LT_OK || (st = layer_status(be, err)) != LT_OK) break;
    }
    for (int g = 0; s && g < G; g++) fwd_scratch_free(m, pass, &s[g]);
    free(s);
    double total = 0;
    for (int g = 0; st == LT_OK && pass->head && g < G; g++) {
        st = head_forward(m, pass, &a[g], grads, NULL, pool, err);
        total += a[g].loss_sum;
    }
    if (st == LT_OK && !pass->head) st = be->check(be, err);
    unbind_rows(be, a, G);
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
 * layers: SP rows), dn (SP rows), dq, datt, dact, dgate, dup, dk, dv; segments;
 * tensor-parallel: `full` (a gathered gradient or normed input: every row), `part` (a
 * column-parallel GEMM's partial input gradient: every row) and the block array. With
 * tp = 1 full is dx and part is dn. */
typedef struct bwd_scratch {
    float *buf, *dx, *dn, *dq, *datt, *dact, *dgate, *dup, *dk, *dv, *full, *part, *pad;
    float *full2; /* tensor-parallel with a chunked MLP: the gathered normed input beside the
                     gathered gradient in full (every row; NULL otherwise) */
    lt_attn_segment *segs;
    size_t bytes; /* of buf (told to the pass's meter) */
} bwd_scratch;

/* s->full = every row of the SP array `local` ([*, C]); tp = 1: s->full is local itself. */
static lt_status gather_c(const lt_llama *m, const lt_acts *a, bwd_scratch *s, const float *local, const float **full,
                          lt_error *err) {
    if (m->tp == 1) {
        *full = local;
        return LT_OK;
    }
    *full = s->full;
    return sp_gather(m, a, s->full, local, (size_t)m->shape.hidden * lt_backend_of(m)->act_bytes, s->pad, err);
}

/* The input gradient of column-parallel GEMMs and their weight gradients (the n projections
 * of `full`, the normed input, to dy[i] by w[i] of OUT[i] rows, into g[i]): s->dn = this
 * rank's SP rows of the group's summed input gradient s->part. Tensor-parallel, the
 * reduce-scatter runs while the weight gradients are computed (Megatron-LM's overlap: the
 * input gradient first, its collective posted, the dW GEMMs, then the wait); tp = 1: s->part
 * is s->dn, each GEMM's backward in one call. */
static lt_status column_backward(const lt_llama *m, const lt_acts *a, bwd_scratch *s, const float *full, int n,
                                 float *const *g, const void *const *dy, const float *const *w, const int *out,
                                 lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    int T = a->T, C = m->shape.hidden;
    size_t es = be->act_bytes;
    be->zero(be, s->part, (size_t)T * C * es);
    if (m->tp == 1) {
        for (int i = 0; i < n; i++) be->linear_backward(be, s->part, g[i], dy[i], full, WEIGHT(w[i]), T, C, out[i]);
        return LT_OK;
    }
    for (int i = 0; i < n; i++) be->linear_backward(be, s->part, NULL, dy[i], full, WEIGHT(w[i]), T, C, out[i]);
    void *pending = NULL;
    lt_status st = sp_reduce_scatter_post(m, a, s->part, (size_t)C, es, s->pad, &pending, err);
    if (st != LT_OK) return st;
    for (int i = 0; i < n; i++) be->linear_backward(be, NULL, g[i], dy[i], full, WEIGHT(w[i]), T, C, out[i]);
    return sp_reduce_scatter_finish(m, a, s->dn, (size_t)C, es, s->pad, pending, err);
}

/* Layer l backward, in the forward's pieces reversed (HelixPipe's parts,
 * lt_llama_backward_part: POST = o_mlp, ATTN = attention + qkv, PRE = norm1). */

/* The MLP and the output projection: dx holds d(layer output) in and d x2 out (the residual
 * stream's gradient); datt = the attention output's gradient. */
static lt_status o_mlp_backward(const lt_llama *m, lt_acts *a, const lt_llama_views *grads, int l, bwd_scratch *s,
                                lt_pool *pool, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    dims d = dims_of(m, a->T, a->Tl);
    size_t es = be->act_bytes, TF = (size_t)d.T * d.F;
    lt_layer_acts *L = &a->layer[l - a->l0];
    const lt_layer_views *W = &m->w.layer[l];
    const lt_layer_views *G = &grads->layer[l];
    const float *full;
    /* MLP branch: x_next = x2 + down(silu(gate(n2)) * up(n2)), n2 = rmsnorm(x2) */
    lt_status st = gather_c(m, a, s, s->dx, &full, err);
    if (st != LT_OK) return st;
    int R = mlp_rows(m, d.T);
    if (R >= d.T) { /* every row at once (the arrays the forward kept, or its recompute made) */
        be->zero(be, s->dact, lt_backend_span(be, TF, es) * 3); /* dact, dgate, dup */
        be->linear_backward(be, s->dact, G->wdown, full, L->act, WEIGHT(W->wdown), d.T, d.F, d.C);
        be->swiglu_backward(be, s->dgate, s->dup, s->dact, L->gate, L->up, TF, pool);
        if ((st = gather_c(m, a, s, L->n2, &full, err)) != LT_OK) return st;
        float *const mg[2] = {G->wgate, G->wup};
        const void *const mdy[2] = {s->dgate, s->dup};
        const float *const mw[2] = {W->wgate, W->wup};
        const int mout[2] = {d.F, d.F};
        if ((st = column_backward(m, a, s, full, 2, mg, mdy, mw, mout, err)) != LT_OK) return st;
    } else { /* the chunked MLP (HelixPipe 4.4.2): R rows of gate, up, act (kept, or remade here
                from the normed input when the forward dropped them) and of their gradients at a
                time; the normed input's gradient summed over the group after the last chunk */
        const float *n2 = L->n2;
        if (m->tp > 1) {
            if ((st = sp_gather(m, a, s->full2, L->n2, (size_t)d.C * es, s->pad, err)) != LT_OK) return st;
            n2 = s->full2;
        }
        bool kept = a->mlp_rows >= d.T;
        be->zero(be, s->part, (size_t)d.T * d.C * es);
        for (int r0 = 0; r0 < d.T; r0 += R) {
            int n = d.T - r0 < R ? d.T - r0 : R;
            size_t nf = (size_t)n * d.F, fo = kept ? (size_t)r0 * d.F * es : 0, co = (size_t)r0 * d.C * es;
            const float *x = at(n2, co), *dy = at(full, co);
            float *gate = at(L->gate, fo), *up = at(L->up, fo), *act = at(L->act, fo);
            if (!kept) {
                be->linear_forward(be, gate, x, WEIGHT(W->wgate), n, d.C, d.F);
                be->linear_forward(be, up, x, WEIGHT(W->wup), n, d.C, d.F);
                be->swiglu_forward(be, act, gate, up, nf, pool);
            }
            be->zero(be, s->dact, nf * es);
            be->zero(be, s->dgate, nf * es);
            be->zero(be, s->dup, nf * es);
            be->linear_backward(be, s->dact, G->wdown, dy, act, WEIGHT(W->wdown), n, d.F, d.C);
            be->swiglu_backward(be, s->dgate, s->dup, s->dact, gate, up, nf, pool);
            be->linear_backward(be, at(s->part, co), G->wgate, s->dgate, x, WEIGHT(W->wgate), n, d.C, d.F);
            be->linear_backward(be, at(s->part, co), G->wup, s->dup, x, WEIGHT(W->wup), n, d.C, d.F);
        }
        if (m->tp > 1 && (st = sp_reduce_scatter(m, a, s->dn, s->part, (size_t)d.C, es, s->pad, err)) != LT_OK)
            return st;
    }
    be->rmsnorm_backward(be, s->dx, G->mlp_norm, s->dn, L->x2, WEIGHT(W->mlp_norm), L->rstd2, d.Tl, d.C,
                         pool); /* dx = d x2 */
    /* x2 = x + o(att): the output projection's backward */
    if ((st = gather_c(m, a, s, s->dx, &full, err)) != LT_OK) return st;
    be->zero(be, s->datt, lt_backend_span(be, (size_t)d.T * d.qd, es));
    be->linear_backward(be, s->datt, G->wo, full, L->att, WEIGHT(W->wo), d.T, d.qd, d.C);
    return LT_OK;
}

/* The attention's backward: dq from datt, the unit's queries' dK/dV added into the context's
 * gradient buffers for every key they saw. */
static void attention_backward(const lt_llama *m, const lt_train_unit *u, lt_kvctx *kv, lt_acts *a, int l,
                               bwd_scratch *s, lt_pool *pool) {
    const lt_backend *be = lt_backend_of(m);
    dims d = dims_of(m, a->T, a->Tl);
    lt_layer_acts *L = &a->layer[l - a->l0];
    be->zero(be, s->dq, lt_backend_span(be, (size_t)d.T * d.qd, be->act_bytes));
    segments_of(u, kv, l, s->segs);
    be->attention_backward(be, s->dq, s->datt, L->att, L->lse, L->q, s->segs, u->n_slices, d.T, d.nh, d.nkv, d.hd,
                           pool);
}

/* Layer l backward, second half first: o_mlp and the attention. */
static lt_status layer_post_backward(const lt_llama *m, const lt_train_unit *u, lt_kvctx *kv, lt_acts *a,
                                     const lt_llama_views *grads, int l, bwd_scratch *s, lt_pool *pool, lt_error *err) {
    lt_status st = o_mlp_backward(m, a, grads, l, s, pool, err);
    if (st == LT_OK) attention_backward(m, u, kv, a, l, s, pool);
    return st;
}

/* The unit's own K/V rows' gradients (complete once every query that saw them ran its
 * attention backward: later slices before, FILO; the other members of a group before,
 * lockstep), RoPE, the biases, the projections: dn = the normed input's gradient (SP rows). */
static lt_status qkv_backward(const lt_llama *m, const lt_train_unit *u, lt_kvctx *kv, lt_acts *a,
                              const lt_llama_views *grads, int l, bwd_scratch *s, lt_pool *pool, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    dims d = dims_of(m, a->T, a->Tl);
    lt_layer_acts *L = &a->layer[l - a->l0];
    const lt_layer_views *W = &m->w.layer[l];
    const lt_layer_views *G = &grads->layer[l];
    ctx_rows(u, kv, l, 2, s->dk, false);
    ctx_rows(u, kv, l, 3, s->dv, false);
    be->rope_backward(be, s->dq, a->pos, d.T, d.nh, d.hd, m->rope_inv_freq, pool);
    be->rope_backward(be, s->dk, a->pos, d.T, d.nkv, d.hd, m->rope_inv_freq, pool);
    if (W->bq) { /* the biases' gradients: column sums over every row (the rank's heads: no TP sum) */
        be->bias_backward(be, G->bq, s->dq, d.T, d.qd);
        be->bias_backward(be, G->bk, s->dk, d.T, d.kvd);
        be->bias_backward(be, G->bv, s->dv, d.T, d.kvd);
    }
    const float *full;
    lt_status st = gather_c(m, a, s, L->n1, &full, err);
    if (st != LT_OK) return st;
    float *const ag[3] = {G->wq, G->wk, G->wv};
    const void *const ady[3] = {s->dq, s->dk, s->dv};
    const float *const aw[3] = {W->wq, W->wk, W->wv};
    const int aout[3] = {d.qd, d.kvd, d.kvd};
    return column_backward(m, a, s, full, 3, ag, ady, aw, aout, err);
}

/* The first norm: dx (d x2 in) += its gradient through rmsnorm = d x, the layer input's. */
static void norm1_backward(const lt_llama *m, lt_acts *a, const lt_llama_views *grads, int l, bwd_scratch *s,
                           lt_pool *pool) {
    const lt_backend *be = lt_backend_of(m);
    lt_layer_acts *L = &a->layer[l - a->l0];
    be->rmsnorm_backward(be, s->dx, grads->layer[l].attn_norm, s->dn, L->x, WEIGHT(m->w.layer[l].attn_norm), L->rstd1,
                         a->Tl, m->shape.hidden, pool); /* dx = d x */
}

/* Layer l backward, first half: qkv and norm1. dx: d x2 in, d x (the layer's input) out. */
static lt_status layer_pre_backward(const lt_llama *m, const lt_train_unit *u, lt_kvctx *kv, lt_acts *a,
                                    const lt_llama_views *grads, int l, bwd_scratch *s, lt_pool *pool, lt_error *err) {
    lt_status st = qkv_backward(m, u, kv, a, grads, l, s, pool, err);
    if (st == LT_OK) norm1_backward(m, a, grads, l, s, pool);
    return st;
}

/* A member's embedding gradient from dx (its SP rows): every row gathered under TP, each
 * rank adding into its vocabulary rows. */
static lt_status embed_backward(const lt_llama *m, lt_acts *a, const lt_llama_views *grads, bwd_scratch *s,
                                lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    if (m->tp == 1) {
        be->embed_backward(be, grads->embed, s->dx, a->ids, a->T, m->shape.hidden);
        return LT_OK;
    }
    const float *full;
    lt_status st = gather_c(m, a, s, s->dx, &full, err);
    int32_t *ids = st == LT_OK ? local_ids(m, a) : NULL;
    if (st == LT_OK && !ids) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    if (st == LT_OK) be->embed_backward(be, grads->embed, full, ids, a->T, m->shape.hidden);
    free(ids);
    return st;
}

/* A member's backward scratch (bwd_scratch, one allocation), told to the pass's meter: a
 * whole layer's (part 0), or the arrays one layer part's backward reads beside its part
 * gradients (lt_llama_backward_part): the MLP's for a post-attention, dQ, dK and dV for an
 * attention, none for a pre-attention (the tensor-parallel buffers in every case). */
static lt_status bwd_scratch_alloc(const lt_llama *m, const lt_pass *pass, const lt_train_unit *u, const lt_acts *a,
                                   int part, bwd_scratch *s, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    size_t es = be->act_bytes;
    bool tp = m->tp > 1;
    dims d = dims_of(m, a->T, a->Tl);
    /* each array's bytes, aligned (on the fp32 backend: its floats x 4, no padding) */
    size_t TC = lt_backend_span(be, (size_t)d.Tl * d.C, es), TQ = lt_backend_span(be, (size_t)d.T * d.qd, es);
    /* the MLP's gradients for a chunk's rows (lt_llama.mlp_chunk), or every row */
    int R = mlp_rows(m, d.T);
    size_t TF = lt_backend_span(be, (size_t)R * d.F, es), TK = lt_backend_span(be, (size_t)d.T * d.kvd, es);
    size_t FC = tp ? lt_backend_span(be, (size_t)d.T * d.C, es) : 0, FC2 = tp && R < d.T ? FC : 0;
    size_t PB = tp ? lt_backend_span(be, tp_pad_bytes(m, a), 1) : 0;
    /* a part's dx, dn and datt are its part gradients' (lt_part_grads) */
    bool whole = part == 0, attn = whole || part == LT_LAYER_ATTN;
    size_t TX = whole ? TC : 0, TA = whole ? TQ : 0; /* dx and dn; datt */
    TQ = attn ? TQ : 0, TK = attn ? TK : 0;          /* dq; dk and dv */
    TF = whole || part == LT_LAYER_POST ? TF : 0;    /* dact, dgate and dup */
    size_t total = TX * 2 + TQ + TA + TF * 3 + TK * 2 + FC * 2 + FC2 + PB;
    memset(s, 0, sizeof *s);
    s->buf = be->alloc(be, total ? total : es, false);
    s->segs = malloc(((size_t)u->n_slices + 1) * sizeof *s->segs);
    if (!s->buf || !s->segs) {
        be->free(be, s->buf), free(s->segs);
        memset(s, 0, sizeof *s);
        return lt_backend_nomem(be, err, NULL, "out of memory for a %d-token unit's backward (%s)", d.T, be->name);
    }
    s->bytes = total ? total : es;
    held(pass, s->bytes);
    s->dx = s->buf, s->dn = at(s->dx, TX), s->dq = at(s->dn, TX), s->datt = at(s->dq, TQ);
    s->dact = at(s->datt, TA), s->dgate = at(s->dact, TF), s->dup = at(s->dgate, TF);
    s->dk = at(s->dup, TF), s->dv = at(s->dk, TK);
    if (tp) s->full = at(s->dv, TK), s->part = at(s->full, FC), s->full2 = FC2 ? at(s->part, FC) : NULL,
            s->pad = at(s->part, FC + FC2);
    else s->full = s->dx, s->part = s->dn;
    if (!whole) { /* what a part's backward has not got: none (so a read of it fails at once) */
        s->dx = s->dn = s->datt = NULL;
        if (!TQ) s->dq = NULL;
        if (!TF) s->dact = s->dgate = s->dup = NULL;
        if (!TK) s->dk = s->dv = NULL;
    }
    return LT_OK;
}

static void bwd_scratch_free(const lt_llama *m, const lt_pass *pass, bwd_scratch *s) {
    const lt_backend *be = lt_backend_of(m);
    if (s->bytes) let_go(pass, s->bytes);
    be->free(be, s->buf), free(s->segs);
    memset(s, 0, sizeof *s);
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
        if (a[g].parts) return lt_fail(err, LT_ERR_INTERNAL, NULL, "a whole-layer backward of a layer part's activations");
    }
    lt_status st = check_tp(m, pass, err);
    if (st != LT_OK) return st;
    const lt_backend *be = lt_backend_of(m);
    size_t es = be->act_bytes;
    bwd_scratch *s = calloc((size_t)G, sizeof *s);
    st = s || G == 0 ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    bind_rows(be, a, G);
    for (int g = 0; st == LT_OK && g < G; g++) /* dK/dV at the sample's first backward over these layers */
        for (int i = 0; st == LT_OK && i < u[g].n_slices; i++)
            st = lt_kvctx_reserve_grad(kv, u[g].slices[i].sample, pass->l0, pass->l1, err);
    for (int g = 0; st == LT_OK && g < G; g++) {
        st = bwd_scratch_alloc(m, pass, &u[g], &a[g], 0, &s[g], err);
        if (st == LT_OK) be->copy(be, s[g].dx, pass->head ? a[g].dnf_in : dout[g], (size_t)a[g].Tl * m->shape.hidden * es);
    }
    /* per layer in lockstep, the forward's mirror: every member's attention backward before
     * any member reads its own K/V rows' gradients */
    for (int l = pass->l1 - 1; st == LT_OK && l >= pass->l0; l--) {
        if (hooks && hooks->weights && (st = hooks->weights(hooks->ctx, l, err)) != LT_OK) break;
        if (hooks && hooks->layer_begin && (st = hooks->layer_begin(hooks->ctx, l, err)) != LT_OK) break;
        if (hooks && hooks->dkv_begin && (st = hooks->dkv_begin(hooks->ctx, l, err)) != LT_OK) break;
        for (int g = 0; st == LT_OK && g < G; g++)
            st = layer_post_backward(m, &u[g], kv, &a[g], grads, l, &s[g], pool, err);
        if (st != LT_OK || (st = layer_status(be, err)) != LT_OK) break;
        if (hooks && hooks->dkv_ready && (st = hooks->dkv_ready(hooks->ctx, l, err)) != LT_OK) break;
        for (int g = 0; st == LT_OK && g < G; g++)
            st = layer_pre_backward(m, &u[g], kv, &a[g], grads, l, &s[g], pool, err);
        if (st != LT_OK || (st = layer_status(be, err)) != LT_OK) break;
        if (hooks && hooks->layer_done && (st = hooks->layer_done(hooks->ctx, l, err)) != LT_OK) break;
    }
    for (int g = 0; st == LT_OK && g < G; g++) {
        size_t TC = (size_t)a[g].Tl * (size_t)m->shape.hidden;
        if (pass->embed) st = embed_backward(m, &a[g], grads, &s[g], err);
        else be->accumulate(be, din[g], s[g].dx, TC);
    }
    if (st == LT_OK) st = be->check(be, err);
    unbind_rows(be, a, G);
    for (int g = 0; s && g < G; g++) bwd_scratch_free(m, pass, &s[g]);
    free(s);
    return st;
}

lt_status lt_llama_backward(const lt_llama *m, const lt_pass *pass, const lt_batch *b, const lt_train_unit *u,
                            const float *dout, lt_kvctx *kv, lt_acts *a, const lt_llama_views *grads,
                            float *din, lt_pool *pool, lt_error *err) {
    if (!pass->head && !dout) return lt_fail(err, LT_ERR_INTERNAL, NULL, "backward of a non-head pass needs dout");
    return lt_llama_backward_group(m, pass, b, u, 1, &dout, kv, a, grads, NULL, &din, pool, err);
}

/* ---------------------------------------------------------------- HelixPipe's parts
 * (train/model/model.h lt_llama_forward_part): the pieces of a layer above, one part a call. */

/* The checks of a part pass: one layer, acts of that layer, the embedding with PRE only and
 * the head with POST only. */
static lt_status part_check(const lt_llama *m, const lt_pass *pass, lt_layer_part part, const lt_acts *a,
                            lt_error *err) {
    if (part < LT_LAYER_PRE || part > LT_LAYER_POST)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "layer part %d: not pre, attention or post", (int)part);
    if (pass->l1 != pass->l0 + 1 || a->l0 != pass->l0 || a->l1 != pass->l1 || a->window || (pass->head && !a->dnf_in))
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "a layer part's pass is one layer, its activations that layer's");
    if (a->parts && !(a->parts & (1u << part)))
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "layer part %d with activations kept for parts 0x%x", (int)part,
                       a->parts);
    if ((pass->embed && part != LT_LAYER_PRE) || (pass->head && part != LT_LAYER_POST))
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "the embedding goes with a pre-attention part, the head with a "
                       "post-attention one");
    const lt_layer_views *W = &m->w.layer[pass->l0]; /* (a HelixPipe part holds some parts' tensors only) */
    if (!(part == LT_LAYER_PRE ? W->attn_norm : part == LT_LAYER_ATTN ? W->wq : W->wo))
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "the %s part of layer %d on a model part without its weights",
                       part == LT_LAYER_PRE ? "pre-attention" : part == LT_LAYER_ATTN ? "attention" : "post-attention",
                       pass->l0);
    return check_tp(m, pass, err);
}

lt_status lt_llama_forward_part(const lt_llama *m, const lt_pass *pass, lt_layer_part part, const lt_train_unit *u,
                                const float *in, lt_kvctx *kv, lt_acts *a, const lt_llama_views *grads,
                                double *loss_sum, lt_pool *pool, lt_error *err) {
    lt_status st = part_check(m, pass, part, a, err);
    if (st != LT_OK) return st;
    if (pass->head && pass->loss_scale > 0 && !grads)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "a head with a loss gradient needs gradient buffers");
    if (part == LT_LAYER_PRE && !pass->embed && !in)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "a pre-attention part without the embedding needs its input");
    const lt_backend *be = lt_backend_of(m);
    int l = pass->l0;
    for (int i = 0; part == LT_LAYER_ATTN && st == LT_OK && i < u->n_slices; i++)
        st = lt_kvctx_reserve(kv, u->slices[i].sample, l, l + 1, err);
    fwd_scratch s = {0};
    bind_rows(be, a, 1);
    if (st == LT_OK && (part != LT_LAYER_PRE || (pass->embed && m->tp > 1))) st = fwd_scratch_alloc(m, pass, u, a, &s, err);
    if (st == LT_OK && part == LT_LAYER_PRE) { /* x = the embedding or the input, n1 = rmsnorm(x) */
        if (pass->embed) st = embed_forward(m, a, a->layer[0].x, &s, err);
        else if (a->layer[0].x != in) be->copy(be, a->layer[0].x, in, (size_t)a->Tl * (size_t)m->shape.hidden * be->act_bytes);
        if (st == LT_OK) norm1_forward(m, a, l, pool);
    } else if (st == LT_OK && part == LT_LAYER_ATTN) { /* the QKV linear moved here (HelixPipe 4.2) */
        st = qkv_forward(m, u, kv, a, l, &s, pool, err);
        if (st == LT_OK) attention_forward(m, u, kv, a, l, &s, pool);
    } else if (st == LT_OK) {
        st = o_mlp_forward(m, a, l, &s, pool, err);
    }
    if (st == LT_OK) st = be->check(be, err);
    fwd_scratch_free(m, pass, &s);
    if (st == LT_OK && pass->head) st = head_forward(m, pass, a, grads, NULL, pool, err);
    unbind_rows(be, a, 1);
    if (st == LT_OK && loss_sum) *loss_sum = pass->head ? a->loss_sum : 0;
    return st;
}

size_t lt_part_grads_bytes(const lt_llama *m, const lt_acts *a) {
    const lt_backend *be = lt_backend_of(m);
    size_t es = be->act_bytes, TC = lt_backend_span(be, (size_t)a->Tl * (size_t)m->shape.hidden, es);
    return 2 * TC + lt_backend_span(be, (size_t)a->T * (size_t)m->heads_l * (size_t)m->head_dim, es);
}

lt_status lt_part_grads_alloc(lt_part_grads *g, const lt_llama *m, const lt_acts *a, lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    size_t es = be->act_bytes, TC = lt_backend_span(be, (size_t)a->Tl * (size_t)m->shape.hidden, es);
    memset(g, 0, sizeof *g);
    g->bytes = lt_part_grads_bytes(m, a);
    g->buf = be->alloc(be, g->bytes ? g->bytes : es, true);
    if (!g->buf) return lt_backend_nomem(be, err, NULL, "out of memory for a %d-token unit's part gradients", a->T);
    g->be = be;
    g->dres = g->buf, g->dn1 = at(g->buf, TC), g->datt = at(g->buf, 2 * TC);
    return LT_OK;
}

void lt_part_grads_free(lt_part_grads *g) {
    if (g->buf) g->be->free(g->be, g->buf);
    memset(g, 0, sizeof *g);
}

lt_status lt_llama_backward_part(const lt_llama *m, const lt_pass *pass, lt_layer_part part, const lt_train_unit *u,
                                 const float *dout, lt_kvctx *kv, lt_acts *a, const lt_llama_views *grads,
                                 const lt_part_grads *pg, float *din, lt_pool *pool, lt_error *err) {
    lt_status st = part_check(m, pass, part, a, err);
    if (st != LT_OK) return st;
    if (pass->head && !(pass->loss_scale > 0))
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "backward through a head that ran without a loss gradient");
    if (!kv->with_grad) return lt_fail(err, LT_ERR_INTERNAL, NULL, "backward needs a KV context with gradients");
    if (part == LT_LAYER_POST && !pass->head && !dout)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "a post-attention part's backward needs dout");
    if (part == LT_LAYER_PRE && !pass->embed && !din)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "a pre-attention part's backward without the embedding needs din");
    if (!pg || !pg->buf) return lt_fail(err, LT_ERR_INTERNAL, NULL, "a layer part's backward needs its part gradients");
    const lt_backend *be = lt_backend_of(m);
    int l = pass->l0;
    size_t TC = (size_t)a->Tl * (size_t)m->shape.hidden;
    for (int i = 0; part == LT_LAYER_ATTN && st == LT_OK && i < u->n_slices; i++)
        st = lt_kvctx_reserve_grad(kv, u->slices[i].sample, l, l + 1, err);
    bwd_scratch s;
    memset(&s, 0, sizeof s);
    bind_rows(be, a, 1);
    if (st == LT_OK) st = bwd_scratch_alloc(m, pass, u, a, (int)part, &s, err);
    if (st == LT_OK) { /* what crosses the parts lives in pg (with tp = 1 full and part alias dx and dn) */
        s.dx = pg->dres, s.dn = pg->dn1, s.datt = pg->datt;
        if (m->tp == 1) s.full = s.dx, s.part = s.dn;
    }
    if (st == LT_OK && part == LT_LAYER_POST) { /* dres = d x2, datt */
        be->copy(be, s.dx, pass->head ? a->dnf_in : dout, TC * be->act_bytes);
        st = o_mlp_backward(m, a, grads, l, &s, pool, err);
    } else if (st == LT_OK && part == LT_LAYER_ATTN) { /* dn1 (dres passes by) */
        attention_backward(m, u, kv, a, l, &s, pool);
        st = qkv_backward(m, u, kv, a, grads, l, &s, pool, err);
    } else if (st == LT_OK) { /* d x = dres + the norm's; the embedding's gradient, or din */
        norm1_backward(m, a, grads, l, &s, pool);
        if (pass->embed) st = embed_backward(m, a, grads, &s, err);
        else be->accumulate(be, din, s.dx, TC);
    }
    if (st == LT_OK) st = be->check(be, err);
    unbind_rows(be, a, 1);
    bwd_scratch_free(m, pass, &s);
    return st;
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
