/*
 * train/exec/ring.c — the K/V exchange of a context-parallel group spread over processes
 * (train/exec/internal.h; lt_cp_hooks, train/model/model.h).
 *
 * The members of a group hold disjoint shards; per layer, a ring all-gather of their K/V
 * rows in the forward, and of their dK/dV contributions to every row the group's attention
 * touched ([0, end) of each of its samples) in the backward, summed in member order (the
 * same float sums on every member). Before the backward's attention, every member but the
 * first zeroes those rows, so the sum counts what the earlier (later-slice) backward ops
 * left there once. The rows are packed into backend buffers (be->copy), the ring moves
 * them where they live (NCCL on the device for cuda, lt_comm_dev_ring_allgather; MPI for
 * host memory) in the backend's element size, and the dK/dV sums are taken in fp32 by the
 * backend (be->sum_blocks: one rounding to its elements). In one process the members share
 * the context and need no exchange (no hooks).
 */
#include <stdlib.h>

#include "train/exec/internal.h"

/* The ring all-gather of the group's blocks, where the backend's buffers live. */
static lt_status group_ring(exec_ring *x, const void *mine, const size_t *bytes, void *all, lt_error *err) {
    const op_state *gu = x->o;
    return (exec_be(x->pr)->host ? lt_comm_ring_allgather : lt_comm_dev_ring_allgather)(x->pr->comm, gu->ranks, gu->G,
                                                                                     gu->me, mine, bytes, all, err);
}

/* This member's K/V rows of layer l (grads: its dK/dV of every row in row_sample/row_end)
 * copied into the backend buffer *mine, and the backend buffer *all sized for every
 * member's (bytes[j] each, in the backend's elements: the exchange moves bytes). */
static lt_status kv_pack(exec_ring *x, int l, bool grads, lt_error *err, char **mine, size_t *bytes, char **all) {
    const op_state *gu = x->o;
    lt_kvctx *kv = x->pr->kv;
    const lt_backend *be = exec_be(x->pr);
    size_t kvd = (size_t)kv->kvd, total = 0, es = be->act_bytes;
    for (int j = 0; j < gu->G; j++) {
        size_t rows = 0;
        if (grads)
            for (int i = 0; i < x->o->n_kv; i++) rows += (size_t)x->o->kv_end[i];
        else
            rows = (size_t)lt_unit_tokens(&gu->u[j]);
        bytes[j] = rows * kvd * 2 * es;
        total += bytes[j];
    }
    *mine = be->alloc(be, bytes[gu->me] ? bytes[gu->me] : 1, false), *all = be->alloc(be, total ? total : 1, false);
    if (!*mine || !*all) return lt_backend_nomem(be, err, NULL, "out of memory for the K/V exchange");
    x->packed = bytes[gu->me] + total;
    exec_track(x->pr, x->packed);
    char *p = *mine;
    if (grads)
        for (int i = 0; i < x->o->n_kv; i++) {
            const lt_kv_sample *ks = &kv->s[x->o->kv_sample[i]];
            size_t n = (size_t)x->o->kv_end[i] * kvd * es;
            be->copy(be, p, ks->dk[l], n), p += n;
            be->copy(be, p, ks->dv[l], n), p += n;
        }
    else
        for (int i = 0; i < gu->u[gu->me].n_slices; i++) {
            const lt_train_slice *s = &gu->u[gu->me].slices[i];
            const lt_kv_sample *ks = &kv->s[s->sample];
            size_t n = (size_t)(s->end - s->begin) * kvd * es, o = (size_t)s->begin * kvd * es;
            be->copy(be, p, exec_at(ks->k[l], o), n), p += n;
            be->copy(be, p, exec_at(ks->v[l], o), n), p += n;
        }
    return be->check(be, err);
}

/* kv_pack's buffers (and the sizes) freed. */
static void kv_pack_free(exec_ring *x, size_t *bytes, char *mine, char *all) {
    const lt_backend *be = exec_be(x->pr);
    exec_untrack(x->pr, x->packed, x->pr->cur_stage);
    x->packed = 0;
    free(bytes), be->free(be, mine), be->free(be, all);
}

static lt_status kv_ready(void *ctx, int l, lt_error *err) {
    exec_ring *x = ctx;
    const op_state *gu = x->o;
    lt_kvctx *kv = x->pr->kv;
    const lt_backend *be = exec_be(x->pr);
    size_t *bytes = malloc((size_t)gu->G * sizeof *bytes), kvd = (size_t)kv->kvd, es = be->act_bytes;
    char *mine = NULL, *all = NULL;
    lt_status st = bytes ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int j = 0; st == LT_OK && j < gu->G; j++)
        for (int i = 0; st == LT_OK && i < gu->u[j].n_slices; i++)
            st = lt_kvctx_reserve(kv, gu->u[j].slices[i].sample, l, l + 1, err);
    if (st == LT_OK) st = kv_pack(x, l, false, err, &mine, bytes, &all);
    if (st == LT_OK) st = group_ring(x, mine, bytes, all, err);
    const char *p = all;
    for (int j = 0; st == LT_OK && j < gu->G; j++)
        for (int i = 0; i < gu->u[j].n_slices; i++) {
            const lt_train_slice *s = &gu->u[j].slices[i];
            const lt_kv_sample *ks = &kv->s[s->sample];
            size_t n = (size_t)(s->end - s->begin) * kvd * es, o = (size_t)s->begin * kvd * es;
            if (j != gu->me) {
                be->copy(be, exec_at(ks->k[l], o), p, n);
                be->copy(be, exec_at(ks->v[l], o), p + n, n);
            }
            p += 2 * n;
        }
    if (st == LT_OK) st = be->check(be, err);
    if (bytes) kv_pack_free(x, bytes, mine, all);
    return st;
}

static lt_status dkv_begin(void *ctx, int l, lt_error *err) {
    exec_ring *x = ctx;
    lt_kvctx *kv = x->pr->kv;
    for (int i = 0; i < x->o->n_kv; i++) { /* a member whose shard is empty still sums */
        lt_status st = lt_kvctx_reserve_grad(kv, x->o->kv_sample[i], l, l + 1, err);
        if (st != LT_OK) return st;
    }
    if (x->o->me == 0) return LT_OK;
    const lt_backend *be = exec_be(x->pr);
    for (int i = 0; i < x->o->n_kv; i++) {
        const lt_kv_sample *ks = &kv->s[x->o->kv_sample[i]];
        size_t n = (size_t)x->o->kv_end[i] * (size_t)kv->kvd * be->act_bytes;
        be->zero(be, ks->dk[l], n), be->zero(be, ks->dv[l], n);
    }
    return LT_OK;
}

static lt_status dkv_ready(void *ctx, int l, lt_error *err) {
    exec_ring *x = ctx;
    const op_state *gu = x->o;
    const lt_kvctx *kv = x->pr->kv;
    const lt_backend *be = exec_be(x->pr);
    size_t *bytes = malloc((size_t)gu->G * sizeof *bytes);
    char *mine = NULL, *all = NULL;
    lt_status st = bytes ? kv_pack(x, l, true, err, &mine, bytes, &all) : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    if (st == LT_OK) st = group_ring(x, mine, bytes, all, err);
    /* the sums in fp32, in member order (the same float sums on every member), rounded once
     * to the backend's elements, straight into dK/dV: member j's element e of the block at
     * element offset o is all[j * block + o + e] */
    size_t block = bytes ? bytes[0] / be->act_bytes : 0, o = 0;
    for (int i = 0; st == LT_OK && i < x->o->n_kv; i++) {
        const lt_kv_sample *ks = &kv->s[x->o->kv_sample[i]];
        size_t n = (size_t)x->o->kv_end[i] * (size_t)kv->kvd;
        be->sum_blocks(be, ks->dk[l], all + o * be->act_bytes, gu->G, block, n), o += n;
        be->sum_blocks(be, ks->dv[l], all + o * be->act_bytes, gu->G, block, n), o += n;
    }
    if (st == LT_OK) st = be->check(be, err);
    if (bytes) kv_pack_free(x, bytes, mine, all);
    return st;
}

/* lt_cp_hooks.weights: the engine's (lt_exec_hooks.weights_needed). */
static lt_status weights(void *ctx, int l, lt_error *err) {
    const exec_ring *x = ctx;
    return x->pr->eh->weights_needed(x->pr->eh->ctx, l, err);
}

void exec_ring_hooks(pipe_run *pr, uint32_t v, exec_ring *ctx, lt_cp_hooks *h) {
    *ctx = (exec_ring){.pr = pr, .o = &pr->ops[v]};
    *h = (lt_cp_hooks){.ctx = ctx};
    if (pr->comm && ctx->o->G > 1) h->kv_ready = kv_ready, h->dkv_begin = dkv_begin, h->dkv_ready = dkv_ready;
    if (pr->eh && pr->eh->weights_needed) h->weights = weights;
}
