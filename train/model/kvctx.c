/*
 * train/model/kvctx.c — the KV context of a step's samples (train/model/model.h): per sample and
 * layer, the post-RoPE keys and values every forward slice appends and later slices read
 * (InfiniPipe 2.1, ChunkFlow 4.2), and their gradients, which backward slices accumulate
 * in reverse slice order. Buffers are per (sample, layer), of the sample's length or of the
 * rows the executor bounds them to (lt_kvctx_bound): K and V at the first forward
 * over the layer, dK and dV at the first backward, all freed by lt_kvctx_release once the
 * sample's last backward over those layers has run. A meter (lt_kvctx.meter) is told of
 * each buffer as it is allocated and freed.
 */
#include "train/model/model.h"

#include <stdlib.h>
#include <string.h>

#include "train/model/backend.h" /* lt_backend: where the buffers live, their element size */

lt_status lt_kvctx_init(lt_kvctx *c, const lt_llama *m, const lt_batch *b, bool with_grad, lt_error *err) {
    memset(c, 0, sizeof *c);
    c->layers = m->shape.layers;
    c->kvd = m->kv_heads_l * m->head_dim; /* this tensor-parallel rank's K/V heads */
    c->with_grad = with_grad;
    c->be = lt_backend_of(m);
    c->n_samples = b->n_samples;
    c->s = calloc((size_t)(b->n_samples > 0 ? b->n_samples : 1), sizeof *c->s);
    if (!c->s) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the KV context of %d samples", b->n_samples);
    for (int i = 0; i < b->n_samples; i++) c->s[i].len = b->samples[i].len;
    return LT_OK;
}

/* Sample i's pointer arrays (k, v, dk, dv: layers each, NULL entries) and row bounds (0). */
static lt_status ptrs(lt_kvctx *c, int sample, lt_error *err) {
    if (sample < 0 || sample >= c->n_samples)
        return lt_fail(err, LT_ERR_INTERNAL, "kv context", "sample %d outside [0, %d)", sample, c->n_samples);
    lt_kv_sample *s = &c->s[sample];
    if (s->k) return LT_OK;
    float **p = calloc((size_t)c->layers * 4, sizeof *p);
    int *rows = calloc((size_t)c->layers, sizeof *rows);
    if (!p || !rows) {
        free(p), free(rows);
        return lt_fail(err, LT_ERR_NOMEM, "kv context", "out of memory");
    }
    s->k = p, s->v = p + c->layers, s->dk = p + 2 * c->layers, s->dv = p + 3 * c->layers, s->rows = rows;
    return LT_OK;
}

/* The rows layer l's buffers of s hold: its bound, else the sample's length. */
static size_t held_rows(const lt_kv_sample *s, int l) {
    return (size_t)(s->rows && s->rows[l] > 0 ? s->rows[l] : s->len);
}

/* Bytes of layer l's K and V (or dK and dV) of s. */
static size_t pair_bytes(const lt_kvctx *c, const lt_kv_sample *s, int l) {
    return held_rows(s, l) * (size_t)c->kvd * 2 * c->be->act_bytes;
}

lt_status lt_kvctx_bound(lt_kvctx *c, int sample, int l, int rows, lt_error *err) {
    lt_status st = ptrs(c, sample, err);
    if (st != LT_OK) return st;
    lt_kv_sample *s = &c->s[sample];
    if (l < 0 || l >= c->layers || rows < 1 || rows > s->len)
        return lt_fail(err, LT_ERR_INTERNAL, "kv context", "a bound of %d rows for sample %d (%d tokens), layer %d",
                       rows, sample, s->len, l);
    if (rows <= s->rows[l]) return LT_OK;
    if (s->k[l] || s->dk[l])
        return lt_fail(err, LT_ERR_INTERNAL, "kv context", "sample %d's layer %d holds %d rows already, %d asked",
                       sample, l, s->rows[l] > 0 ? s->rows[l] : s->len, rows);
    s->rows[l] = rows;
    return LT_OK;
}

/* Layers [l0, l1) of sample i: K and V (grad = false) or dK and dV (grad = true), zeroed. */
static lt_status reserve(lt_kvctx *c, int sample, int l0, int l1, bool grad, lt_error *err) {
    lt_status st = ptrs(c, sample, err);
    if (st != LT_OK) return st;
    lt_kv_sample *s = &c->s[sample];
    float **a = grad ? s->dk : s->k, **b = grad ? s->dv : s->v;
    size_t es = c->be->act_bytes;
    for (int l = l0 < 0 ? 0 : l0; l < l1 && l < c->layers; l++) {
        if (a[l]) continue;
        size_t per = pair_bytes(c, s, l) / 2;
        if (!(a[l] = c->be->alloc(c->be, 2 * per + es, true)))
            return lt_backend_nomem(c->be, err, "kv context", "out of memory for sample %d's %s (%zu tokens, layer %d)",
                                    sample, grad ? "dK/dV" : "K/V", held_rows(s, l), l);
        b[l] = (float *)((char *)a[l] + per); /* one allocation per layer: a[l] owns it */
        if (c->meter) c->meter->add(c->meter->ctx, 2 * per);
    }
    return LT_OK;
}

lt_status lt_kvctx_reserve(lt_kvctx *c, int sample, int l0, int l1, lt_error *err) {
    return reserve(c, sample, l0, l1, false, err);
}

lt_status lt_kvctx_reserve_grad(lt_kvctx *c, int sample, int l0, int l1, lt_error *err) {
    if (!c->with_grad) return lt_fail(err, LT_ERR_INTERNAL, "kv context", "a context without gradients");
    return reserve(c, sample, l0, l1, true, err);
}

size_t lt_kvctx_release(lt_kvctx *c, int sample, int l0, int l1) {
    if (sample < 0 || sample >= c->n_samples || !c->s[sample].k) return 0;
    lt_kv_sample *s = &c->s[sample];
    size_t bytes = 0;
    for (int l = l0 < 0 ? 0 : l0; l < l1 && l < c->layers; l++) {
        size_t per = pair_bytes(c, s, l), held = (s->k[l] ? per : 0) + (s->dk[l] ? per : 0);
        if (c->meter && held) c->meter->sub(c->meter->ctx, held);
        bytes += held;
        c->be->free(c->be, s->k[l]), c->be->free(c->be, s->dk[l]);
        s->k[l] = s->v[l] = s->dk[l] = s->dv[l] = NULL;
    }
    return bytes;
}

void lt_kvctx_zero_grad(lt_kvctx *c) {
    for (int i = 0; i < c->n_samples; i++) {
        lt_kv_sample *s = &c->s[i];
        for (int l = 0; s->dk && l < c->layers; l++)
            if (s->dk[l]) c->be->zero(c->be, s->dk[l], pair_bytes(c, s, l));
    }
}

void lt_kvctx_free(lt_kvctx *c) {
    if (!c) return;
    for (int i = 0; i < c->n_samples && c->s; i++) {
        lt_kvctx_release(c, i, 0, c->layers);
        free(c->s[i].k), free(c->s[i].rows); /* the pointer array (k, v, dk, dv share it), the bounds */
    }
    free(c->s);
    memset(c, 0, sizeof *c);
}

size_t lt_kvctx_bytes(const lt_kvctx *c) {
    size_t bytes = 0;
    for (int i = 0; i < c->n_samples; i++) {
        const lt_kv_sample *s = &c->s[i];
        for (int l = 0; s->k && l < c->layers; l++) bytes += (size_t)((s->k[l] != NULL) + (s->dk[l] != NULL)) * pair_bytes(c, s, l);
    }
    return bytes;
}

size_t lt_kvctx_rows_bytes(const lt_kvctx *c, int rows) {
    return 2 * (size_t)(rows > 0 ? rows : 0) * (size_t)c->kvd * c->be->act_bytes;
}

lt_status lt_kvctx_rows(lt_kvctx *c, int sample, int l, int rows, bool grad, bool to_ctx, void *buf, lt_error *err) {
    if (sample < 0 || sample >= c->n_samples || l < 0 || l >= c->layers || rows < 0 ||
        (size_t)rows > held_rows(&c->s[sample], l))
        return lt_fail(err, LT_ERR_INTERNAL, "kv context", "rows [0, %d) of sample %d, layer %d: outside the context",
                       rows, sample, l);
    lt_status st = LT_OK;
    if (to_ctx) st = grad ? lt_kvctx_reserve_grad(c, sample, l, l + 1, err) : lt_kvctx_reserve(c, sample, l, l + 1, err);
    if (st != LT_OK) return st;
    lt_kv_sample *s = &c->s[sample];
    float *k = s->k ? (grad ? s->dk[l] : s->k[l]) : NULL, *v = s->k ? (grad ? s->dv[l] : s->v[l]) : NULL;
    if (!k) return lt_fail(err, LT_ERR_INTERNAL, "kv context", "sample %d's %s of layer %d were never made", sample,
                           grad ? "dK/dV" : "K/V", l);
    const lt_backend *be = c->be;
    size_t n = (size_t)rows * (size_t)c->kvd, bytes = n * be->act_bytes;
    char *half = (char *)buf + bytes;
    if (!to_ctx) {
        be->copy(be, buf, k, bytes), be->copy(be, half, v, bytes);
        if (grad) be->zero(be, k, bytes), be->zero(be, v, bytes); /* (handed on: the header) */
    } else if (grad) {
        be->accumulate(be, k, buf, n), be->accumulate(be, v, half, n);
    } else {
        be->copy(be, k, buf, bytes), be->copy(be, v, half, bytes);
    }
    return LT_OK;
}
