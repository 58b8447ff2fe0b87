/*
 * train/dist.c — ownership, gradient reduction, clipping, update and gathering of a
 * pipeline stage's parameters (train/dist.h).
 */
#include "train/dist.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plans/schedule.h" /* lt_schedule, lt_stage_ops, lt_op */

static bool is_embed(const lt_llama *m, const lt_tensor_info *t) { return t->offset == (size_t)(m->w.embed - m->params); }

/* The layers plan p runs on `stage` (the same in every pipeline), or an error. */
static lt_status stage_layers(const lt_step_plan *p, int stage, int *l0, int *l1, lt_error *err) {
    *l0 = -1, *l1 = -1;
    for (size_t r = 0; r < p->n_ranks; r++) {
        const lt_schedule *s = &p->ranks[r].sched;
        int a = INT32_MAX, b = -1;
        if (stage >= s->stages) break;
        const lt_stage_ops *so = &s->stage[stage];
        for (size_t i = 0; i < so->n; i++) {
            const lt_op *op = &so->ops[i];
            if ((int)op->layer_begin < a) a = (int)op->layer_begin;
            if ((int)op->layer_end > b) b = (int)op->layer_end;
        }
        if (b < 0) continue; /* no op on this stage in this pipeline */
        if (*l1 >= 0 && (a != *l0 || b != *l1))
            return lt_fail(err, LT_ERR_INPUT, NULL, "step %llu: stage %d runs layers %d..%d in one pipeline and %d..%d in "
                           "pipeline %d: the engine needs one layer split", (unsigned long long)p->step, stage, *l0,
                           *l1 - 1, a, b - 1, p->ranks[r].dp_rank);
        *l0 = a, *l1 = b;
    }
    if (*l1 < 0) return lt_fail(err, LT_ERR_INPUT, NULL, "step %llu: no op runs on stage %d", (unsigned long long)p->step, stage);
    return LT_OK;
}

lt_status lt_dist_init(lt_dist *d, lt_comm *c, const lt_llama *m, const lt_step_plan *p, double bucket_mb,
                       lt_error *err) {
    memset(d, 0, sizeof *d);
    const lt_comm_layout *l = lt_comm_layout_of(c);
    d->comm = c, d->stage = l->stage, d->pp = l->pp, d->dp_rank = l->dp_rank, d->dp = l->dp;
    lt_status st = stage_layers(p, d->stage, &d->l0, &d->l1, err);
    if (st != LT_OK) return st;
    d->n_tensors = m->n_tensors;
    d->mine = calloc((size_t)m->n_tensors, sizeof *d->mine);
    d->counted = calloc((size_t)m->n_tensors, sizeof *d->counted);
    if (!d->mine || !d->counted) {
        lt_dist_free(d);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    }
    bool first = d->stage == 0, last = d->stage == d->pp - 1;
    for (int i = 0; i < m->n_tensors; i++) {
        const lt_tensor_info *t = &m->tensors[i];
        if (t->layer >= 0) d->mine[i] = d->counted[i] = t->layer >= d->l0 && t->layer < d->l1;
        else if (is_embed(m, t)) d->mine[i] = first || (last && m->shape.tie_embeddings), d->counted[i] = first;
        else d->mine[i] = d->counted[i] = last; /* final norm, LM head */
    }
    double f = bucket_mb * 1048576.0 / sizeof(float);
    d->bucket_floats = f < 1024 ? 1024 : (size_t)f;
    return LT_OK;
}

lt_status lt_dist_check_plan(const lt_dist *d, const lt_step_plan *p, lt_error *err) {
    int l0, l1;
    lt_status st = stage_layers(p, d->stage, &l0, &l1, err);
    if (st == LT_OK && (l0 != d->l0 || l1 != d->l1))
        st = lt_fail(err, LT_ERR_INPUT, NULL, "step %llu puts layers %d..%d on stage %d, which holds layers %d..%d: the "
                     "engine does not move layers between stages", (unsigned long long)p->step, l0, l1 - 1, d->stage,
                     d->l0, d->l1 - 1);
    return st;
}

void lt_dist_free(lt_dist *d) {
    if (!d) return;
    free(d->mine), free(d->counted);
    memset(d, 0, sizeof *d);
}

lt_status lt_dist_reduce_grads(const lt_dist *d, const lt_llama *m, float *grads, lt_error *err) {
    lt_status st = LT_OK;
    if (d->dp > 1) {
        /* owned tensors as contiguous runs, cut into buckets, last layers first (the order
         * the backward finishes them) */
        size_t cap = 16, n = 0;
        lt_comm_req **req = malloc(cap * sizeof *req);
        if (!req) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        for (int i = m->n_tensors - 1; st == LT_OK && i >= 0;) {
            if (!d->mine[i]) {
                i--;
                continue;
            }
            size_t end = m->tensors[i].offset + (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
            int j = i;
            while (j > 0 && d->mine[j - 1]) j--;
            size_t begin = m->tensors[j].offset;
            for (size_t hi = end; st == LT_OK && hi > begin;) {
                size_t lo = hi - begin > d->bucket_floats ? hi - d->bucket_floats : begin;
                if (n == cap) {
                    lt_comm_req **t = realloc(req, 2 * cap * sizeof *t);
                    if (!t) {
                        st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
                        break;
                    }
                    req = t, cap *= 2;
                }
                char what[96];
                snprintf(what, sizeof what, "gradient bucket %zu of stage %d", n, d->stage);
                st = lt_comm_iallreduce(d->comm, LT_COMM_DP, grads + lo, hi - lo, LT_COMM_F32, what, &req[n], err);
                if (st == LT_OK) n++;
                hi = lo;
            }
            i = j - 1;
        }
        for (size_t k = 0; k < n; k++) {
            lt_status s2 = lt_comm_wait(d->comm, &req[k], err);
            if (st == LT_OK) st = s2;
        }
        free(req);
    }
    if (st == LT_OK && d->pp > 1 && m->shape.tie_embeddings && (d->stage == 0 || d->stage == d->pp - 1))
        st = lt_comm_allreduce(d->comm, LT_COMM_TIED, m->w.embed == m->params ? grads : grads + (m->w.embed - m->params),
                               (size_t)m->shape.vocab * (size_t)m->shape.hidden, LT_COMM_F32, false, err);
    return st;
}

lt_status lt_dist_clip(const lt_dist *d, const lt_llama *m, float *grads, double max_norm, double *norm,
                       lt_error *err) {
    double sq = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        if (!d->counted[i]) continue;
        const lt_tensor_info *t = &m->tensors[i];
        double n = lt_grad_norm(grads + t->offset, (size_t)t->rows * (size_t)t->cols);
        sq += n * n;
    }
    lt_status st = lt_comm_allreduce(d->comm, LT_COMM_PIPELINE, &sq, 1, LT_COMM_F64, false, err);
    if (st != LT_OK) return st;
    *norm = sqrt(sq);
    if (max_norm <= 0) return LT_OK;
    double coef = max_norm / (*norm + 1e-6); /* torch.nn.utils.clip_grad_norm_ (optim.h) */
    if (coef < 1.0) {
        float c = (float)coef;
        for (int i = 0; i < m->n_tensors; i++) {
            if (!d->mine[i]) continue;
            const lt_tensor_info *t = &m->tensors[i];
            float *g = grads + t->offset;
            for (size_t k = 0, n = (size_t)t->rows * (size_t)t->cols; k < n; k++) g[k] *= c;
        }
    }
    return LT_OK;
}

void lt_dist_adamw(const lt_dist *d, lt_adamw *o, const lt_llama *m, float *params, const float *grads, double lr,
                   const lt_optim_config *oc) {
    lt_adamw_step_tensors(o, m, params, grads, lr, oc, d->mine);
}

lt_status lt_dist_gather(const lt_dist *d, const lt_llama *m, float *buf, lt_error *err) {
    /* blob: int32 count, int32 tensor indices, then their floats in that order */
    size_t floats = 0;
    int32_t count = 0;
    bool sends = d->dp_rank == 0 && lt_comm_layout_of(d->comm)->rank != 0;
    for (int i = 0; sends && i < m->n_tensors; i++)
        if (d->mine[i]) count++, floats += (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
    size_t bytes = sizeof(int32_t) * (1 + (size_t)count) + floats * sizeof(float);
    char *blob = malloc(bytes);
    if (!blob) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    memcpy(blob, &count, sizeof count);
    char *p = blob + sizeof(int32_t), *q = blob + sizeof(int32_t) * (1 + (size_t)count);
    for (int32_t i = 0; sends && i < m->n_tensors; i++) {
        if (!d->mine[i]) continue;
        size_t n = (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
        memcpy(p, &i, sizeof i), p += sizeof i;
        memcpy(q, buf + m->tensors[i].offset, n * sizeof(float)), q += n * sizeof(float);
    }
    const lt_comm_layout *l = lt_comm_layout_of(d->comm);
    size_t *lens = l->rank == 0 ? calloc((size_t)l->world, sizeof *lens) : NULL;
    void *all = NULL;
    lt_status st = l->rank == 0 && !lens ? lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory") : LT_OK;
    if (st == LT_OK) st = lt_comm_gather_bytes(d->comm, blob, bytes, &all, lens, err);
    free(blob);
    const char *at = all;
    for (int r = 0; st == LT_OK && l->rank == 0 && r < l->world; at += lens[r], r++) {
        int32_t c;
        if (lens[r] < sizeof c) {
            st = lt_fail(err, LT_ERR_INTERNAL, NULL, "rank %d sent %zu bytes", r, lens[r]);
            break;
        }
        memcpy(&c, at, sizeof c);
        const char *ip = at + sizeof c, *fp = at + sizeof c * (1 + (size_t)c);
        for (int32_t k = 0; k < c; k++) {
            int32_t i;
            memcpy(&i, ip, sizeof i), ip += sizeof i;
            if (i < 0 || i >= m->n_tensors) {
                st = lt_fail(err, LT_ERR_INTERNAL, NULL, "rank %d sent tensor %d", r, i);
                break;
            }
            size_t n = (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
            memcpy(buf + m->tensors[i].offset, fp, n * sizeof(float)), fp += n * sizeof(float);
        }
    }
    free(all), free(lens);
    return st;
}
