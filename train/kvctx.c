/*
 * train/kvctx.c — the KV context of a step's samples (train/model.h): per sample and
 * layer, the post-RoPE keys and values every forward slice appends and later slices read
 * (InfiniPipe 2.1, ChunkFlow 4.2), and their gradients, which backward slices accumulate
 * in reverse slice order.
 */
#include "train/model.h"

#include <stdlib.h>
#include <string.h>

lt_status lt_kvctx_init(lt_kvctx *c, const lt_llama *m, const lt_batch *b, bool with_grad, lt_error *err) {
    memset(c, 0, sizeof *c);
    c->layers = m->shape.layers;
    c->kvd = m->shape.kv_heads * m->head_dim;
    c->with_grad = with_grad;
    c->l0 = 0, c->l1 = c->layers;
    c->n_samples = b->n_samples;
    c->s = calloc((size_t)(b->n_samples > 0 ? b->n_samples : 1), sizeof *c->s);
    if (!c->s) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the KV context of %d samples", b->n_samples);
    for (int i = 0; i < b->n_samples; i++) c->s[i].len = b->samples[i].len;
    return LT_OK;
}

void lt_kvctx_set_layers(lt_kvctx *c, int l0, int l1) { c->l0 = l0, c->l1 = l1; }

lt_status lt_kvctx_reserve(lt_kvctx *c, int sample, lt_error *err) {
    if (sample < 0 || sample >= c->n_samples)
        return lt_fail(err, LT_ERR_INTERNAL, "kv context", "sample %d outside [0, %d)", sample, c->n_samples);
    lt_kv_sample *s = &c->s[sample];
    if (s->block) return LT_OK;
    size_t per = (size_t)s->len * (size_t)c->kvd;
    size_t arrays = c->with_grad ? 4 : 2;
    s->block = calloc(per * arrays * (size_t)(c->l1 - c->l0), sizeof(float));
    float **ptrs = calloc((size_t)c->layers * 4, sizeof *ptrs);
    if (!s->block || !ptrs) {
        free(s->block);
        free(ptrs);
        s->block = NULL;
        return lt_fail(err, LT_ERR_NOMEM, "kv context", "out of memory for sample %d's K/V (%d tokens x %d layers)",
                       sample, s->len, c->layers);
    }
    s->k = ptrs;
    s->v = ptrs + c->layers;
    s->dk = ptrs + 2 * c->layers;
    s->dv = ptrs + 3 * c->layers;
    for (int l = c->l0; l < c->l1; l++) {
        float *base = s->block + (size_t)(l - c->l0) * arrays * per;
        s->k[l] = base;
        s->v[l] = base + per;
        s->dk[l] = c->with_grad ? base + 2 * per : NULL;
        s->dv[l] = c->with_grad ? base + 3 * per : NULL;
    }
    return LT_OK;
}

void lt_kvctx_zero_grad(lt_kvctx *c) {
    if (!c->with_grad) return;
    size_t layer_floats;
    for (int i = 0; i < c->n_samples; i++) {
        lt_kv_sample *s = &c->s[i];
        if (!s->block) continue;
        layer_floats = (size_t)s->len * (size_t)c->kvd;
        for (int l = c->l0; l < c->l1; l++) {
            memset(s->dk[l], 0, layer_floats * sizeof(float));
            memset(s->dv[l], 0, layer_floats * sizeof(float));
        }
    }
}

void lt_kvctx_free(lt_kvctx *c) {
    if (!c) return;
    for (int i = 0; i < c->n_samples && c->s; i++) {
        free(c->s[i].block);
        free(c->s[i].k); /* the pointer array (k, v, dk, dv share it) */
    }
    free(c->s);
    memset(c, 0, sizeof *c);
}

size_t lt_kvctx_bytes(const lt_kvctx *c) {
    size_t bytes = 0;
    for (int i = 0; i < c->n_samples; i++)
        if (c->s[i].block)
            bytes += (size_t)c->s[i].len * (size_t)c->kvd * (c->with_grad ? 4u : 2u) * (size_t)(c->l1 - c->l0) * sizeof(float);
    return bytes;
}
