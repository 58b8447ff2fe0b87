/*
 * train/model/model.c — the Llama parameter buffer: its tensor table (Hugging Face names, the
 * order of checkpoints and exports), views, deterministic initialization; units and the
 * loss denominator (train/model/model.h).
 */
#include "train/model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/rng.h" /* lt_rng_seed, lt_rng_split, lt_rng_normal */

/* Append tensor number `index` of the whole model's table to t (its shard: `split` and the
 * shard's extent along it, [first, first + n), of the whole rows x cols); returns the offset
 * after it. */
static size_t add_tensor(lt_tensor_info *t, int *n, int index, const char *name, int layer, int rows, int cols,
                         int split, int first, int count, size_t offset) {
    lt_tensor_info *ti = &t[(*n)++];
    snprintf(ti->name, sizeof ti->name, "%s", name);
    ti->index = index;
    ti->layer = layer;
    ti->full_rows = rows;
    ti->full_cols = cols;
    ti->split = split;
    ti->first = split == LT_SPLIT_NONE ? 0 : first;
    ti->rows = split == LT_SPLIT_ROWS ? count : rows;
    ti->cols = split == LT_SPLIT_COLS ? count : cols;
    ti->offset = offset;
    return offset + (size_t)ti->rows * (size_t)ti->cols;
}

/* Tensors of one layer in the table: the 9 of Llama (HF order), then Qwen2's three Q/K/V
 * biases (after the matrices, so a model without biases has the same table, init streams
 * and checkpoints as before). */
#define LLAMA_TENSORS_PER_LAYER 9
#define MAX_TENSORS_PER_LAYER 12
static int tensors_per_layer(const lt_model_shape *s) {
    return lt_model_qkv_bias(s) ? MAX_TENSORS_PER_LAYER : LLAMA_TENSORS_PER_LAYER;
}

/* Is tensor `i` of a layer's (the per-layer table order below) one the pre-attention part
 * reads: the first norm, Q/K/V and their biases (HelixPipe 4.2)? */
static bool pre_attention(int i) { return i <= 3 || i >= LLAMA_TENSORS_PER_LAYER; }

/* Does m hold tensor `i` of `layer` (layer -1: the embedding when `embed`, else the final
 * norm or LM head)? A HelixPipe part holds the tensors of the parts the helix puts on its
 * stage (lt_helix_part_stage; lt_llama_part). */
static bool holds(const lt_llama *m, int layer, int i, bool embed) {
    if (layer >= 0 && m->helix_pp > 0)
        return lt_helix_part_stage(layer, pre_attention(i), m->shape.layers, m->helix_pp) == m->helix_stage;
    if (layer >= 0) return layer >= m->l0 && layer < m->l1;
    if (embed) return m->has_embed || (m->has_head && m->shape.tie_embeddings);
    return m->has_head;
}

/* The tensor table: embedding, per layer (HF order within a layer), final norm, LM head;
 * each tensor the shard of TP rank m->tp_rank (Megatron-LM's split, model.h), only those of
 * m's part (holds). */
static size_t build_table(const lt_llama *m, lt_tensor_info *t, int *n) {
    const lt_model_shape *s = &m->shape;
    int C = s->hidden, F = s->ffn, V = s->vocab, hd = m->head_dim, r = m->tp_rank;
    int qd = s->heads * hd, kvd = s->kv_heads * hd, qdl = m->heads_l * hd, kvdl = m->kv_heads_l * hd;
    int vsplit = m->tp > 1 ? LT_SPLIT_ROWS : LT_SPLIT_NONE, idx = 0;
    size_t off = 0;
    char name[64];
    *n = 0;
    if (holds(m, -1, 0, true))
        off = add_tensor(t, n, idx, "model.embed_tokens.weight", -1, V, C, vsplit, m->vocab0, m->vocab_l, off);
    idx++;
    for (int l = 0; l < s->layers; l++) {
        /* a Q/K/V bias is a [1, out] vector split like its weight's rows: by columns, the
         * same heads as the weight's shard (column-parallel) */
        struct { const char *suffix; int rows, cols, split, first, count; } per[] = {
            {"input_layernorm.weight", 1, C, LT_SPLIT_NONE, 0, 0},
            {"self_attn.q_proj.weight", qd, C, LT_SPLIT_ROWS, r * qdl, qdl},
            {"self_attn.k_proj.weight", kvd, C, LT_SPLIT_ROWS, r * kvdl, kvdl},
            {"self_attn.v_proj.weight", kvd, C, LT_SPLIT_ROWS, r * kvdl, kvdl},
            {"self_attn.o_proj.weight", C, qd, LT_SPLIT_COLS, r * qdl, qdl},
            {"post_attention_layernorm.weight", 1, C, LT_SPLIT_NONE, 0, 0},
            {"mlp.gate_proj.weight", F, C, LT_SPLIT_ROWS, r * m->ffn_l, m->ffn_l},
            {"mlp.up_proj.weight", F, C, LT_SPLIT_ROWS, r * m->ffn_l, m->ffn_l},
            {"mlp.down_proj.weight", C, F, LT_SPLIT_COLS, r * m->ffn_l, m->ffn_l},
            {"self_attn.q_proj.bias", 1, qd, LT_SPLIT_COLS, r * qdl, qdl},
            {"self_attn.k_proj.bias", 1, kvd, LT_SPLIT_COLS, r * kvdl, kvdl},
            {"self_attn.v_proj.bias", 1, kvd, LT_SPLIT_COLS, r * kvdl, kvdl},
        };
        for (size_t i = 0; i < (size_t)tensors_per_layer(s); i++, idx++) {
            if (!holds(m, l, (int)i, false)) continue;
            snprintf(name, sizeof name, "model.layers.%d.%s", l, per[i].suffix);
            off = add_tensor(t, n, idx, name, l, per[i].rows, per[i].cols, m->tp > 1 ? per[i].split : LT_SPLIT_NONE,
                             per[i].first, per[i].count, off);
        }
    }
    if (holds(m, -1, 0, false)) off = add_tensor(t, n, idx, "model.norm.weight", -1, 1, C, LT_SPLIT_NONE, 0, 0, off);
    idx++;
    if (!s->tie_embeddings && holds(m, -1, 0, false))
        off = add_tensor(t, n, idx, "lm_head.weight", -1, V, C, vsplit, m->vocab0, m->vocab_l, off);
    return off;
}


/* Rank `rank`'s rows of `whole` vocabulary rows over tp ranks: balanced, the first
 * whole mod tp ranks one more. */
static void vocab_rows(int whole, int tp, int rank, int *first, int *count) {
    int base = whole / tp, extra = whole % tp;
    *first = rank * base + (rank < extra ? rank : extra);
    *count = base + (rank < extra ? 1 : 0);
}

/* The shard sizes of TP rank `rank` of `tp` (model.h), or LT_ERR_CONFIG naming parallel.tp. */
static lt_status tp_dims(lt_llama *m, int tp, int rank, lt_error *err) {
    const lt_model_shape *s = &m->shape;
    const char *what = s->heads % tp ? "attention heads" : s->kv_heads % tp ? "key/value heads"
                       : s->ffn % tp ? "MLP width (ffn)" : NULL;
    int n = s->heads % tp ? s->heads : s->kv_heads % tp ? s->kv_heads : s->ffn;
    if (tp > 256) return lt_fail(err, LT_ERR_CONFIG, "[parallel]", "parallel.tp = %d is above 256", tp);
    if (tp < 1 || rank < 0 || rank >= tp)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "tensor-parallel rank %d of %d", rank, tp);
    if (what) {
        lt_fail(err, LT_ERR_CONFIG, "[parallel]", "parallel.tp = %d does not divide the model's %d %s", tp, n, what);
        if (s->kv_heads % tp && tp % s->kv_heads == 0)
            lt_error_hint(err, "K/V heads are split over the TP ranks, never replicated (Megatron's replication "
                               "for tp > kv_heads is not implemented): use parallel.tp <= %d", s->kv_heads);
        return LT_ERR_CONFIG;
    }
    if (tp > s->vocab)
        return lt_fail(err, LT_ERR_CONFIG, "[parallel]", "parallel.tp = %d exceeds the vocabulary (%d)", tp, s->vocab);
    m->tp = tp, m->tp_rank = rank;
    m->heads_l = s->heads / tp, m->kv_heads_l = s->kv_heads / tp, m->ffn_l = s->ffn / tp;
    vocab_rows(s->vocab, tp, rank, &m->vocab0, &m->vocab_l);
    return LT_OK;
}

lt_status lt_llama_create(lt_llama *m, const lt_model_shape *shape, lt_error *err) {
    return lt_llama_create_tp(m, shape, 1, 0, err);
}

lt_status lt_llama_create_tp(lt_llama *m, const lt_model_shape *shape, int tp, int rank, lt_error *err) {
    return lt_llama_create_stage(m, shape, tp, rank, 0, shape->layers, true, true, err);
}

lt_status lt_llama_create_table(lt_llama *m, const lt_model_shape *shape, int tp, int rank, lt_error *err) {
    lt_status st = lt_llama_create_stage(m, shape, tp, rank, 0, shape->layers, true, true, err);
    if (st == LT_OK) {
        free(m->params);
        m->params = NULL;
        lt_llama_views_of(m, NULL, m->layer_store, &m->w);
    }
    return st;
}

const lt_tensor_info *lt_llama_tensor_by_index(const lt_llama *m, int index) {
    if (index >= 0 && index < m->n_tensors && m->tensors[index].index == index) return &m->tensors[index]; /* whole */
    for (int i = 0; i < m->n_tensors; i++) /* (table order is index order) */
        if (m->tensors[i].index == index) return &m->tensors[i];
    return NULL;
}

lt_status lt_llama_create_stage(lt_llama *m, const lt_model_shape *shape, int tp, int rank, int l0, int l1, bool first,
                                bool last, lt_error *err) {
    lt_llama_part part = {.l0 = l0, .l1 = l1, .first = first, .last = last};
    return lt_llama_create_part(m, shape, tp, rank, &part, err);
}

bool lt_llama_pre_attention_tensor(const lt_llama *m, const lt_tensor_info *t) {
    return t->layer >= 0 && pre_attention((t->index - 1) % tensors_per_layer(&m->shape));
}

int lt_llama_helix_stage(const lt_llama *m, const lt_tensor_info *t, int pp) {
    if (t->layer >= 0) return lt_helix_part_stage(t->layer, lt_llama_pre_attention_tensor(m, t), m->shape.layers, pp);
    return 0; /* the embedding (layer 0's pre-attention), the final norm and head (the last post-attention) */
}

lt_llama_part lt_llama_helix_part(int layers, int stage, int pp) {
    return (lt_llama_part){.l0 = 0, .l1 = layers, .first = stage == 0, .last = stage == 0,
                           .helix_pp = pp, .helix_stage = stage};
}

lt_status lt_llama_create_part(lt_llama *m, const lt_model_shape *shape, int tp, int rank, const lt_llama_part *part,
                               lt_error *err) {
    int l0 = part->l0, l1 = part->l1;
    memset(m, 0, sizeof *m);
    lt_status st = lt_model_validate(shape, err);
    if (st != LT_OK) return st;
    if (!shape->gated_ffn)
        return lt_fail(err, LT_ERR_CONFIG, "[model]", "the trainer runs Llama models (SwiGLU MLP); '%s' has a GELU MLP",
                       shape->name ? shape->name : "custom");
    m->shape = *shape;
    m->shape.rope_theta = lt_model_rope_theta(shape);
    m->shape.norm_eps = lt_model_norm_eps(shape);
    m->shape.tie_embeddings = shape->tie_embeddings ? 1 : 0;
    m->head_dim = shape->hidden / shape->heads;
    if (m->head_dim % 2 != 0)
        return lt_fail(err, LT_ERR_CONFIG, "[model]", "head dimension hidden/heads = %d must be even (RoPE rotates pairs)",
                       m->head_dim);
    if ((st = tp_dims(m, tp, rank, err)) != LT_OK) {
        memset(m, 0, sizeof *m);
        return st;
    }
    if (l0 < 0 || l1 > shape->layers || l0 > l1) {
        memset(m, 0, sizeof *m);
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "a part of layers [%d, %d) of a %d-layer model", l0, l1,
                       shape->layers);
    }
    if (part->helix_pp < 0 || (part->helix_pp > 0 && (part->helix_stage < 0 || part->helix_stage >= part->helix_pp))) {
        memset(m, 0, sizeof *m);
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "HelixPipe stage %d of %d", part->helix_stage, part->helix_pp);
    }
    m->l0 = l0, m->l1 = l1, m->has_embed = part->first, m->has_head = part->last;
    m->helix_pp = part->helix_pp, m->helix_stage = part->helix_stage;
    int max_tensors = 3 + tensors_per_layer(shape) * shape->layers;
    m->tensors = calloc((size_t)max_tensors, sizeof *m->tensors);
    m->layer_store = calloc((size_t)shape->layers * 2, sizeof *m->layer_store);
    m->rope_inv_freq = calloc((size_t)m->head_dim / 2, sizeof *m->rope_inv_freq);
    if (!m->tensors || !m->layer_store || !m->rope_inv_freq) {
        lt_llama_free(m);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the model's tensor table");
    }
    lt_model_rope_inv_freq(&m->shape, m->head_dim, m->rope_inv_freq);
    m->n_params = build_table(m, m->tensors, &m->n_tensors);
    { /* the whole model's floats: every tensor, whole */
        size_t C = (size_t)shape->hidden, F = (size_t)shape->ffn, V = (size_t)shape->vocab;
        size_t qd = (size_t)shape->heads * (size_t)m->head_dim, kvd = (size_t)shape->kv_heads * (size_t)m->head_dim;
        size_t layer = 2 * C + qd * C + 2 * kvd * C + C * qd + 3 * F * C;
        if (lt_model_qkv_bias(shape)) layer += qd + 2 * kvd; /* Q/K/V biases */
        m->n_params_whole = V * C * (shape->tie_embeddings ? 1u : 2u) + (size_t)shape->layers * layer + C;
    }
    m->params = calloc(m->n_params ? m->n_params : 1, sizeof(float));
    if (!m->params) {
        size_t n = m->n_params;
        lt_llama_free(m);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %zu parameters (%.1f MiB)", n,
                       (double)n * 4.0 / 1048576.0);
    }
    lt_llama_views_of(m, m->params, m->layer_store, &m->w);
    return LT_OK;
}

void lt_llama_shard_extent(const lt_llama *m, const lt_tensor_info *t, int rank, int *first, int *count) {
    int whole = t->split == LT_SPLIT_COLS ? t->full_cols : t->full_rows;
    if (t->split == LT_SPLIT_NONE) {
        *first = 0, *count = whole;
    } else if (t->layer < 0) { /* vocabulary rows */
        vocab_rows(whole, m->tp, rank, first, count);
    } else { /* heads and MLP columns: tp divides them */
        *count = whole / m->tp, *first = rank * *count;
    }
}

size_t lt_llama_shard_floats(const lt_llama *m, const lt_tensor_info *t, int rank) {
    int first, count;
    lt_llama_shard_extent(m, t, rank, &first, &count);
    return (size_t)(t->split == LT_SPLIT_ROWS ? count : t->full_rows) *
           (size_t)(t->split == LT_SPLIT_COLS ? count : t->full_cols);
}

void lt_llama_shard_tensor(const lt_llama *m, const lt_tensor_info *t, int rank, float *whole, float *shard,
                           bool to_whole) {
    int first, count;
    lt_llama_shard_extent(m, t, rank, &first, &count);
    int rows = t->split == LT_SPLIT_ROWS ? count : t->full_rows, cols = t->split == LT_SPLIT_COLS ? count : t->full_cols;
    if (t->split == LT_SPLIT_COLS) {
        for (int r = 0; r < rows; r++) {
            float *w = whole + (size_t)r * t->full_cols + first, *s = shard + (size_t)r * cols;
            if (to_whole) memcpy(w, s, (size_t)cols * sizeof *w);
            else memcpy(s, w, (size_t)cols * sizeof *w);
        }
        return;
    }
    float *w = whole + (t->split == LT_SPLIT_ROWS ? (size_t)first * (size_t)cols : 0);
    if (to_whole) memcpy(w, shard, (size_t)rows * (size_t)cols * sizeof *w);
    else memcpy(shard, w, (size_t)rows * (size_t)cols * sizeof *w);
}

void lt_llama_shard_io(const lt_llama *m, const lt_tensor_info *t, int rank, const lt_llama *full, float *full_buf,
                       float *shard, bool to_full) {
    const lt_tensor_info *f = lt_llama_tensor_by_index(full, t->index);
    if (f) lt_llama_shard_tensor(m, t, rank, full_buf + f->offset, shard, to_full); /* (else: nothing to place) */
}

void lt_llama_copy_shard(const lt_llama *full, const float *src, const lt_llama *part, float *dst) {
    for (int i = 0; i < part->n_tensors; i++) /* (shard_io only reads full's buffer here) */
        lt_llama_shard_io(part, &part->tensors[i], part->tp_rank, full, (float *)src, dst + part->tensors[i].offset,
                          false);
}

void lt_llama_free(lt_llama *m) {
    if (!m) return;
    free(m->tensors);
    free(m->layer_store);
    free(m->rope_inv_freq);
    free(m->params);
    memset(m, 0, sizeof *m);
}

void lt_llama_views_of(const lt_llama *m, float *buf, lt_layer_views *layer_views, lt_llama_views *out) {
    memset(out, 0, sizeof *out);
    memset(layer_views, 0, (size_t)m->shape.layers * sizeof *layer_views);
    out->layer = layer_views;
    int per = tensors_per_layer(&m->shape), after = 1 + per * m->shape.layers;
    for (int i = 0; buf && i < m->n_tensors; i++) { /* the held tensors; the others stay NULL */
        const lt_tensor_info *t = &m->tensors[i];
        float *p = buf + t->offset;
        if (t->index == 0) {
            out->embed = p;
        } else if (t->index < after) {
            lt_layer_views *v = &layer_views[(t->index - 1) / per];
            float **slot[MAX_TENSORS_PER_LAYER] = {&v->attn_norm, &v->wq, &v->wk, &v->wv, &v->wo, &v->mlp_norm,
                                                   &v->wgate, &v->wup, &v->wdown, &v->bq, &v->bk, &v->bv};
            *slot[(t->index - 1) % per] = p;
        } else if (t->index == after) {
            out->final_norm = p;
        } else {
            out->lm_head = p;
        }
    }
    if (m->shape.tie_embeddings && m->has_head) out->lm_head = out->embed;
}

const lt_tensor_info *lt_llama_find_tensor(const lt_llama *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

/* Every element of the whole tensor is drawn in order from the tensor's stream and the
 * shard keeps its own: the same values whatever the tensor-parallel layout. */
void lt_llama_init(lt_llama *m, uint64_t seed) {
    lt_rng root;
    lt_rng_seed(&root, seed);
    double resid_scale = 1.0 / sqrt(2.0 * m->shape.layers);
    for (int i = 0; i < m->n_tensors; i++) {
        const lt_tensor_info *t = &m->tensors[i];
        float *p = m->params + t->offset;
        if (t->full_rows == 1) { /* norm weights 1, biases 0 */
            float v = strstr(t->name, ".bias") ? 0.0f : 1.0f;
            for (int j = 0; j < t->cols; j++) p[j] = v;
            continue;
        }
        lt_rng r;
        lt_rng_split(&r, &root, (uint64_t)t->index);
        double sd = 0.02;
        if (strstr(t->name, "o_proj") || strstr(t->name, "down_proj")) sd *= resid_scale;
        int r0 = t->split == LT_SPLIT_ROWS ? t->first : 0, c0 = t->split == LT_SPLIT_COLS ? t->first : 0;
        for (int row = 0; row < t->full_rows; row++)
            for (int col = 0; col < t->full_cols; col++) {
                float v = (float)(sd * lt_rng_normal(&r));
                if (row >= r0 && row < r0 + t->rows && col >= c0 && col < c0 + t->cols)
                    p[(size_t)(row - r0) * t->cols + (col - c0)] = v;
            }
    }
}

int lt_unit_tokens(const lt_train_unit *u) {
    int T = 0;
    for (int i = 0; i < u->n_slices; i++) T += u->slices[i].end - u->slices[i].begin;
    return T;
}

int64_t lt_batch_predicted_tokens(const lt_batch *b) {
    int64_t n = 0;
    for (int i = 0; i < b->n_samples; i++)
        if (b->samples[i].len > 1) n += b->samples[i].len - 1;
    return n;
}

lt_status lt_unit_check(const lt_train_unit *u, const lt_batch *b, int vocab, lt_error *err) {
    if (u->n_slices <= 0) return lt_fail(err, LT_ERR_INPUT, "unit", "the unit has no slices");
    for (int i = 0; i < u->n_slices; i++) {
        const lt_train_slice *s = &u->slices[i];
        if (s->sample < 0 || s->sample >= b->n_samples)
            return lt_fail(err, LT_ERR_INPUT, "unit", "slice %d names sample %d, the batch has %d", i, s->sample,
                           b->n_samples);
        const lt_train_sample *smp = &b->samples[s->sample];
        if (s->begin < 0 || s->begin >= s->end || s->end > smp->len)
            return lt_fail(err, LT_ERR_INPUT, "unit", "slice %d [%d, %d) is not a token range of sample %d (length %d)",
                           i, s->begin, s->end, s->sample, smp->len);
        for (int t = s->begin; t < s->end; t++) {
            if (smp->tokens[t] < 0 || smp->tokens[t] >= vocab) {
                lt_fail(err, LT_ERR_INPUT, "unit", "sample %d token %d has id %d, outside the vocabulary [0, %d)",
                        s->sample, t, (int)smp->tokens[t], vocab);
                lt_error_hint(err, "the data was tokenized with a larger vocabulary than model.vocab: data.encoding "
                                   "must name the data's encoding (model.vocab defaults to its size, lib/model.h)");
                return LT_ERR_INPUT;
            }
        }
        /* the next token (the label of the slice's last row) must be in range too */
        if (s->end < smp->len && (smp->tokens[s->end] < 0 || smp->tokens[s->end] >= vocab))
            return lt_fail(err, LT_ERR_INPUT, "unit", "sample %d token %d has id %d, outside the vocabulary [0, %d)",
                           s->sample, s->end, (int)smp->tokens[s->end], vocab);
    }
    return LT_OK;
}
