/*
 * train/dist/dist.c — ownership, gradient reduction, clipping, update and gathering of a
 * pipeline stage's parameters (train/dist/dist.h).
 */
#include "train/dist/dist.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plans/schedule/schedule.h" /* lt_schedule, lt_stage_ops, lt_op */
#include "train/model/backend.h"     /* lt_backend_cuda_sum_squares, _scale: the norm of device gradients */

static bool is_embed(const lt_llama *m, const lt_tensor_info *t) {
    (void)m;
    return t->index == 0; /* the first of the whole model's table */
}

/* The layers plan p runs on `stage` (the same in every pipeline), or an error. */
lt_status lt_dist_stage_layers(const lt_step_plan *p, int stage, int *l0, int *l1, lt_error *err) {
    *l0 = -1, *l1 = -1;
    for (size_t r = 0; r < p->n_ranks; r++)
        if (lt_schedule_has_parts(&p->ranks[r].sched)) { /* HelixPipe: every stage holds every layer (lt_dist.helix) */
            *l0 = 0, *l1 = p->ranks[r].sched.layers;
            return LT_OK;
        }
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

/* Does the stage with layers [l0, l1) (first / last of the pipeline) own tensor t? */
static bool owns(const lt_llama *m, const lt_tensor_info *t, int l0, int l1, bool first, bool last) {
    if (t->layer >= 0) return t->layer >= l0 && t->layer < l1;
    if (is_embed(m, t)) return first || (last && m->shape.tie_embeddings);
    return last; /* final norm, LM head */
}

size_t lt_dist_stage_params(const lt_llama *m, const lt_step_plan *p, int stage, bool helix_parts) {
    int l0, l1;
    lt_error err;
    if (lt_dist_stage_layers(p, stage, &l0, &l1, &err) != LT_OK) return 0;
    bool parts = false; /* HelixPipe: its part of the stage, or (mixed) the whole model (lt_dist.helix) */
    for (size_t r = 0; r < p->n_ranks; r++) parts |= lt_schedule_has_parts(&p->ranks[r].sched);
    bool whole = parts && !helix_parts;
    size_t n = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const lt_tensor_info *t = &m->tensors[i];
        bool held = parts && helix_parts ? lt_llama_helix_stage(m, t, p->pp) == stage
                                         : owns(m, t, l0, l1, whole || stage == 0, whole || stage == p->pp - 1);
        if (held) n += (size_t)t->rows * (size_t)t->cols;
    }
    return n;
}

lt_status lt_dist_check_layout(const lt_step_plan *p, const lt_comm_layout *l, lt_error *err) {
    int dp = 0;
    for (size_t r = 0; r < p->n_ranks; r++) dp += p->ranks[r].cp > 1 ? p->ranks[r].cp : 1;
    if (dp != l->dp || p->pp != l->pp)
        return lt_fail(err, LT_ERR_INPUT, NULL, "step %llu was planned for %d DP ranks x %d stages; this job runs %d x %d "
                       "(parallel.dp, parallel.pp: plan and train with the same layout)",
                       (unsigned long long)p->step, dp, p->pp, l->dp, l->pp);
    return LT_OK;
}

/* flat <-> buffer over the owned ranges */
static void pack(const lt_dist *d, const float *buf, float *flat) {
    for (int k = 0; k < d->n_ranges; k++) {
        size_t n = d->range[k][1] - d->range[k][0];
        memcpy(flat, buf + d->range[k][0], n * sizeof(float)), flat += n;
    }
}
static void unpack(const lt_dist *d, const float *flat, float *buf) {
    for (int k = 0; k < d->n_ranges; k++) {
        size_t n = d->range[k][1] - d->range[k][0];
        memcpy(buf + d->range[k][0], flat, n * sizeof(float)), flat += n;
    }
}
size_t lt_dist_device_floats(const lt_llama *m, int dp, lt_shard shard) {
    if (dp < 2 || shard == LT_SHARD_NONE) return m->n_params;
    return (m->n_params + (size_t)dp - 1) / (size_t)dp * (size_t)dp;
}

/* lt_dist_init's sharded layout on the GPU: the part's parameters (every one owned: one
 * range from 0) in dp equal blocks; this rank's fp32 master and moments of its block on the
 * device (taken from the host by lt_dist_take_moments). */
static lt_status device_shards(lt_dist *d, const lt_llama *m, lt_error *err) {
    if (d->shard != LT_SHARD_ZERO1) {
        lt_dist_free(d);
        return lt_fail(err, LT_ERR_CONFIG, "parallel.shard", "parallel.shard = %s runs on the CPU backend only; "
                       "train.backend = cuda shards with zero1 (the gradients' and weights' buffers stay whole on "
                       "the GPU through a step)", lt_shard_name(d->shard));
    }
    if (d->n_ranges != 1 || d->range[0][0] != 0 || d->owned_floats != m->n_params) {
        lt_dist_free(d);
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: a sharded GPU rank holds its stage's part only (it holds %zu "
                       "parameters, owns %zu)", lt_comm_who(d->comm), m->n_params, d->owned_floats);
    }
    size_t n = m->n_params;
    d->block = lt_dist_device_floats(m, d->dp, d->shard) / (size_t)d->dp;
    d->counts = calloc((size_t)d->dp, sizeof *d->counts), d->displs = calloc((size_t)d->dp, sizeof *d->displs);
    d->inplace = true;
    if (!d->counts || !d->displs || d->block > (size_t)INT32_MAX || n > (size_t)INT32_MAX) {
        lt_dist_free(d);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for zero1's shards");
    }
    for (int r = 0; r < d->dp; r++) {
        size_t b = (size_t)r * d->block, e = b + d->block < n ? b + d->block : n;
        d->displs[r] = (int)(b < n ? b : n), d->counts[r] = (int)(e > b ? e - b : 0);
    }
    size_t mine = (size_t)d->counts[d->dp_rank];
    d->m = calloc(mine + 1, sizeof *d->m), d->v = calloc(mine + 1, sizeof *d->v); /* (checkpoints' staging) */
    lt_backend *be = (lt_backend *)lt_backend_of(m);
    lt_status st = d->m && d->v ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for zero1's moments");
    if (st == LT_OK) st = lt_backend_cuda_grads(be, mine, &d->dmaster, err);
    if (st == LT_OK) st = lt_backend_cuda_grads(be, mine, &d->dm, err);
    if (st == LT_OK) st = lt_backend_cuda_grads(be, mine, &d->dv, err);
    if (st == LT_OK) {
        d->be = be;
        st = be->from_host(be, d->dmaster, m->params + d->displs[d->dp_rank], mine * sizeof(float), err);
    }
    if (st != LT_OK) lt_dist_free(d);
    return st;
}

/* The flat run of buf's owned elements: buf itself in place, else packed into d->flat
 * (flat_done writes it back). */
static float *flat_of(const lt_dist *d, float *buf) {
    if (d->inplace) return buf;
    pack(d, buf, d->flat);
    return d->flat;
}
static void flat_done(const lt_dist *d, const float *flat, float *buf) {
    if (!d->inplace) unpack(d, flat, buf);
}


lt_status lt_dist_init(lt_dist *d, lt_comm *c, const lt_llama *m, const lt_step_plan *p, double bucket_mb,
                       lt_shard shard, lt_error *err) {
    memset(d, 0, sizeof *d);
    const lt_comm_layout *l = lt_comm_layout_of(c);
    d->comm = c, d->stage = l->stage, d->pp = l->pp, d->dp_rank = l->dp_rank, d->dp = l->dp;
    d->tp = l->tp > 0 ? l->tp : 1, d->tp_rank = l->tp_rank;
    if (m->tp != d->tp || m->tp_rank != d->tp_rank)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: a model of TP rank %d of %d on a rank of TP rank %d of %d",
                       lt_comm_who(c), m->tp_rank, m->tp, d->tp_rank, d->tp);
    lt_status st = lt_dist_check_layout(p, l, err);
    if (st == LT_OK) st = lt_dist_stage_layers(p, d->stage, &d->l0, &d->l1, err);
    if (st != LT_OK) return st;
    d->n_tensors = m->n_tensors;
    d->mine = calloc((size_t)m->n_tensors, sizeof *d->mine);
    d->counted = calloc((size_t)m->n_tensors, sizeof *d->counted);
    if (!d->mine || !d->counted) {
        lt_dist_free(d);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    }
    bool first = d->stage == 0, last = d->stage == d->pp - 1;
    bool parts = false;
    for (size_t r = 0; r < p->n_ranks; r++) parts |= lt_schedule_has_parts(&p->ranks[r].sched);
    /* HelixPipe's part of the stage (train/model/model.h lt_llama.helix_pp), or the whole
     * model on a rank of a pipeline: a run mixing HelixPipe's plans with others' (train/cmd) */
    d->helix_parts = d->pp > 1 && m->helix_pp == d->pp && m->helix_stage == d->stage;
    d->helix = !d->helix_parts && d->pp > 1 && m->helix_pp == 0 && m->l0 == 0 && m->l1 == m->shape.layers &&
               m->has_embed && m->has_head;
    if (parts && !d->helix && !d->helix_parts) {
        lt_dist_free(d);
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "step %llu is a HelixPipe plan (layer parts): every rank needs "
                       "HelixPipe's part of its stage or the whole model", (unsigned long long)p->step);
    }
    if (d->helix && d->dp > 1 && shard != LT_SHARD_NONE) { /* (a run of HelixPipe's plans only shards its parts) */
        lt_dist_free(d);
        return lt_fail(err, LT_ERR_CONFIG, "parallel.shard", "plans mixing HelixPipe's steps with other strategies' "
                       "run with parallel.shard = none (every rank holds the whole model, each tensor updated by "
                       "the stage the helix puts it on); a run of HelixPipe's plans alone shards its stages' parts");
    }
    d->l0 = d->helix || d->helix_parts ? 0 : d->l0, d->l1 = d->helix || d->helix_parts ? m->shape.layers : d->l1;
    /* a tied embedding counts in the norm once: on the first stage; a tensor replicated over
     * the TP group (the norms) once: on TP rank 0 */
    for (int i = 0; i < m->n_tensors; i++) {
        const lt_tensor_info *t = &m->tensors[i];
        /* (HelixPipe's part: every tensor it holds is its own) */
        d->mine[i] = d->helix ? lt_llama_helix_stage(m, t, d->pp) == d->stage
                              : d->helix_parts || owns(m, t, d->l0, d->l1, first, last);
        d->counted[i] = d->mine[i] && (!is_embed(m, t) || first) && (t->split != LT_SPLIT_NONE || d->tp_rank == 0);
        if (d->mine[i] && d->tp > 1 && t->split == LT_SPLIT_NONE) d->rep_floats += (size_t)t->rows * (size_t)t->cols;
    }
    if (d->rep_floats && !(d->rep = malloc(d->rep_floats * sizeof *d->rep))) {
        lt_dist_free(d);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    }
    double f = bucket_mb * 1048576.0 / sizeof(float);
    d->bucket_floats = f < 1024 ? 1024 : (size_t)f;
    /* owned ranges (tensors are laid out in table order, so runs of owned tensors coalesce) */
    d->range = calloc((size_t)m->n_tensors + 1, sizeof *d->range);
    if (!d->range) {
        lt_dist_free(d);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    }
    for (int i = 0; i < m->n_tensors; i++) {
        if (!d->mine[i]) continue;
        size_t b = m->tensors[i].offset, e = b + (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
        if (d->n_ranges > 0 && d->range[d->n_ranges - 1][1] == b) d->range[d->n_ranges - 1][1] = e;
        else d->range[d->n_ranges][0] = b, d->range[d->n_ranges++][1] = e;
        d->owned_floats += e - b;
    }
    d->shard = d->dp > 1 ? shard : LT_SHARD_NONE;
    d->sharded = d->shard != LT_SHARD_NONE;
    d->device_grads = !lt_backend_of(m)->host;
    d->layer_posted = calloc((size_t)m->shape.layers + 1, sizeof *d->layer_posted);
    if (!d->layer_posted) {
        lt_dist_free(d);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    }
    if (!d->sharded) return LT_OK;
    if (d->device_grads) return device_shards(d, m, err);
    d->counts = calloc((size_t)d->dp, sizeof *d->counts), d->displs = calloc((size_t)d->dp, sizeof *d->displs);
    d->inplace = d->n_ranges == 1 && d->range[0][0] == 0; /* (always for a rank's part) */
    if (!d->inplace) d->flat = malloc((d->owned_floats + 1) * sizeof *d->flat);
    d->per_layer = d->inplace && shard == LT_SHARD_FSDP;
    d->ag_layer = -1;
    if (d->per_layer) {
        d->whole = calloc((size_t)m->shape.layers + 1, sizeof *d->whole);
        d->ag_counts = calloc((size_t)d->dp, sizeof *d->ag_counts), d->ag_displs = calloc((size_t)d->dp, sizeof *d->ag_displs);
    }
    if (!d->counts || !d->displs || (!d->inplace && !d->flat) || (d->per_layer && (!d->whole || !d->ag_counts ||
        !d->ag_displs)) || d->owned_floats > (size_t)INT32_MAX) {
        lt_dist_free(d);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %s's shards", lt_shard_name(d->shard));
    }
    for (int r = 0; r < d->dp; r++) { /* equal blocks, the first ones one element longer */
        size_t base = d->owned_floats / (size_t)d->dp, extra = d->owned_floats % (size_t)d->dp;
        d->counts[r] = (int)(base + ((size_t)r < extra));
        d->displs[r] = r ? d->displs[r - 1] + d->counts[r - 1] : 0;
    }
    size_t mine = (size_t)d->counts[d->dp_rank];
    d->m = calloc(mine + 1, sizeof *d->m), d->v = calloc(mine + 1, sizeof *d->v);
    if (d->shard == LT_SHARD_FSDP) d->ps = malloc((mine + 1) * sizeof *d->ps);
    if (!d->m || !d->v || (d->shard == LT_SHARD_FSDP && !d->ps)) {
        lt_dist_free(d);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %s's moments", lt_shard_name(d->shard));
    }
    if (d->shard == LT_SHARD_FSDP) { /* the weights start sharded: this rank's block, gathered before each step */
        const float *w = flat_of(d, m->params);
        memcpy(d->ps, w + d->displs[d->dp_rank], mine * sizeof *d->ps);
        d->released = true;
    }
    return LT_OK;
}

/* Call fn(ctx, begin, end, flat_offset) for the buffer ranges of flat elements [lo, hi). */
static void for_flat(const lt_dist *d, size_t lo, size_t hi, void (*fn)(void *, size_t, size_t, size_t), void *ctx) {
    size_t at = 0;
    for (int k = 0; k < d->n_ranges && at < hi; k++) {
        size_t n = d->range[k][1] - d->range[k][0], a = at > lo ? at : lo, b = at + n < hi ? at + n : hi;
        if (a < b) fn(ctx, d->range[k][0] + (a - at), d->range[k][0] + (b - at), a - lo);
        at += n;
    }
}

lt_status lt_dist_take_moments(lt_dist *d, lt_adamw *opt, lt_error *err) {
    if (!d->sharded) return LT_OK;
    if (d->dmaster) { /* the GPU: this rank's block of the moments to the device */
        size_t lo = (size_t)d->displs[d->dp_rank], n = (size_t)d->counts[d->dp_rank];
        lt_status st = d->be->from_host(d->be, d->dm, opt->m + lo, n * sizeof(float), err);
        if (st == LT_OK) st = d->be->from_host(d->be, d->dv, opt->v + lo, n * sizeof(float), err);
        if (st != LT_OK) return st;
        free(opt->m), free(opt->v);
        opt->m = opt->v = NULL;
        return LT_OK;
    }
    memcpy(d->m, flat_of(d, opt->m) + d->displs[d->dp_rank], (size_t)d->counts[d->dp_rank] * sizeof(float));
    memcpy(d->v, flat_of(d, opt->v) + d->displs[d->dp_rank], (size_t)d->counts[d->dp_rank] * sizeof(float));
    free(opt->m), free(opt->v);
    opt->m = opt->v = NULL;
    return LT_OK;
}

lt_status lt_dist_gather_moments(const lt_dist *d, const lt_llama *m, const lt_adamw *opt, lt_adamw *out,
                                 lt_error *err) {
    memset(out, 0, sizeof *out);
    lt_status st = lt_adamw_init(out, m->n_params, err);
    out->t = opt->t;
    size_t mine_n = (size_t)d->counts[d->dp_rank] * sizeof(float);
    if (st == LT_OK && d->dmaster) /* the GPU's blocks to the host first */
        st = d->be->to_host(d->be, d->m, d->dm, mine_n, err);
    if (st == LT_OK && d->dmaster) st = d->be->to_host(d->be, d->v, d->dv, mine_n, err);
    const float *mine[2] = {d->m, d->v};
    float *dst[2] = {out->m, out->v};
    for (int a = 0; st == LT_OK && a < 2; a++) {
        float *f = d->inplace ? dst[a] : d->flat;
        memcpy(f + d->displs[d->dp_rank], mine[a], (size_t)d->counts[d->dp_rank] * sizeof(float));
        st = lt_comm_allgather_dp(d->comm, f, d->counts, d->displs, err);
        if (st == LT_OK) flat_done(d, f, dst[a]);
    }
    if (st != LT_OK) lt_adamw_free(out);
    return st;
}

lt_status lt_dist_check_plan(const lt_dist *d, const lt_step_plan *p, lt_error *err) {
    int l0, l1;
    lt_status st = lt_dist_check_layout(p, lt_comm_layout_of(d->comm), err);
    if (st == LT_OK) st = lt_dist_stage_layers(p, d->stage, &l0, &l1, err);
    if (st == LT_OK && !d->helix && (l0 != d->l0 || l1 != d->l1)) /* (helix: every layer held, any plan runs) */
        st = lt_fail(err, LT_ERR_INPUT, NULL, "step %llu puts layers %d..%d on stage %d, which holds layers %d..%d: the "
                     "engine does not move layers between stages", (unsigned long long)p->step, l0, l1 - 1, d->stage,
                     d->l0, d->l1 - 1);
    return st;
}

void lt_dist_free(lt_dist *d) {
    if (!d) return;
    if (d->be) {
        lt_backend_cuda_free_grads(d->be, d->dmaster);
        lt_backend_cuda_free_grads(d->be, d->dm);
        lt_backend_cuda_free_grads(d->be, d->dv);
    }
    free(d->req), free(d->layer_posted), free(d->rep), free(d->rs_move), free(d->rs_counts);
    free(d->whole), free(d->ag_counts), free(d->ag_displs), free(d->ag_req);
    free(d->mine), free(d->counted), free(d->range), free(d->counts), free(d->displs), free(d->flat), free(d->m),
        free(d->v), free(d->ps);
    memset(d, 0, sizeof *d);
}

static lt_status reduce_tied(const lt_dist *d, const lt_llama *m, float *grads, lt_error *err) {
    if (d->helix_parts) return LT_OK; /* (HelixPipe's part: the embedding and the head both on stage 0) */
    if (d->pp > 1 && m->shape.tie_embeddings && (d->stage == 0 || d->stage == d->pp - 1))
        return (d->device_grads ? lt_comm_dev_allreduce : lt_comm_allreduce)(
            d->comm, LT_COMM_TIED, grads + (m->w.embed - m->params),
            (size_t)m->tensors[0].rows * (size_t)m->tensors[0].cols, LT_COMM_F32, false, err); /* (this TP rank's rows) */
    return LT_OK;
}

/* Tensor parallelism: the gradients of the tensors every TP rank holds whole (the norms,
 * each rank's sum over its sequence-parallel rows) summed over the group, packed into one
 * all-reduce (Megatron-LM's all-reduce of the sequence-parallel LayerNorm gradients). */
/* Which replicated tensors: `layer` >= 0 that layer's, -1 every one outside the layers
 * posted already (lt_dist_layer_final, sharded). */
static bool rep_wanted(const lt_dist *d, const lt_llama *m, int i, int layer) {
    const lt_tensor_info *t = &m->tensors[i];
    if (!d->mine[i] || t->split != LT_SPLIT_NONE) return false;
    if (layer >= 0) return t->layer == layer;
    return t->layer < 0 || !d->layer_posted[t->layer];
}

static lt_status reduce_tp_replicated(const lt_dist *d, const lt_llama *m, float *grads, int layer, lt_error *err) {
    if (d->tp < 2 || d->rep_floats == 0) return LT_OK;
    if (d->device_grads) { /* on the device: one all-reduce per tensor in place (the norms: small), posted, then waited */
        lt_comm_req **req = calloc((size_t)m->n_tensors + 1, sizeof *req);
        if (!req) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        lt_status st = LT_OK;
        int n = 0;
        for (int i = 0; st == LT_OK && i < m->n_tensors; i++)
            if (rep_wanted(d, m, i, layer))
                st = lt_comm_dev_iallreduce(d->comm, LT_COMM_TP, grads + m->tensors[i].offset,
                                            (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols, LT_COMM_F32, false,
                                            "a replicated tensor's gradient", &req[n++], err);
        for (int k = 0; k < n; k++) {
            lt_status s2 = st == LT_OK ? lt_comm_wait(d->comm, &req[k], err) : LT_OK;
            if (st == LT_OK) st = s2;
        }
        free(req); /* (after a failure the job ends: the requests left are abandoned, as lt_comm_wait's) */
        return st;
    }
    float *p = d->rep;
    for (int i = 0; i < m->n_tensors; i++)
        if (rep_wanted(d, m, i, layer)) {
            size_t n = (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
            memcpy(p, grads + m->tensors[i].offset, n * sizeof *p), p += n;
        }
    lt_status st = p > d->rep ? lt_comm_allreduce(d->comm, LT_COMM_TP, d->rep, (size_t)(p - d->rep), LT_COMM_F32, false,
                                                  err)
                              : LT_OK;
    p = d->rep;
    for (int i = 0; st == LT_OK && i < m->n_tensors; i++)
        if (rep_wanted(d, m, i, layer)) {
            size_t n = (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
            memcpy(grads + m->tensors[i].offset, p, n * sizeof *p), p += n;
        }
    return st;
}

/* Post the all-reduce of buffer floats [lo, hi) in buckets, last first. */
static lt_status post_range(lt_dist *d, float *grads, size_t lo0, size_t hi, lt_error *err) {
    lt_status st = LT_OK;
    while (st == LT_OK && hi > lo0) {
        size_t lo = hi - lo0 > d->bucket_floats ? hi - d->bucket_floats : lo0;
        if (d->n_req == d->cap_req) {
            size_t cap = d->cap_req ? 2 * d->cap_req : 16;
            lt_comm_req **t = realloc(d->req, cap * sizeof *t);
            if (!t) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
            d->req = t, d->cap_req = cap;
        }
        char what[96];
        snprintf(what, sizeof what, "gradient bucket %zu of stage %d", d->n_req, d->stage);
        st = d->device_grads ? lt_comm_dev_iallreduce(d->comm, LT_COMM_DP, grads + lo, hi - lo, LT_COMM_F32, false, what,
                                                      &d->req[d->n_req], err)
                             : lt_comm_iallreduce(d->comm, LT_COMM_DP, grads + lo, hi - lo, LT_COMM_F32, what,
                                                  &d->req[d->n_req], err);
        if (st == LT_OK) d->n_req++;
        hi = lo;
    }
    return st;
}

void lt_dist_bind(lt_dist *d, const lt_llama *m, float *grads) { d->model = m, d->grads = grads; }
void lt_dist_set_device_grads(lt_dist *d, bool on) { d->device_grads = on; }

/* Sharded, in place: the per-rank counts (and displacements from lo, displs non-NULL) of
 * buffer floats [lo, hi), each DP rank's share being the range's intersection with its
 * block; this rank's is [*at, *at + *n). */
static void range_counts(const lt_dist *d, size_t lo, size_t hi, int *counts, int *displs, size_t *at, size_t *n) {
    *at = lo, *n = 0;
    for (int r = 0; r < d->dp; r++) {
        size_t b = (size_t)d->displs[r], e = b + (size_t)d->counts[r];
        b = b > lo ? b : lo, e = e < hi ? e : hi;
        if (e < b) e = b;
        counts[r] = (int)(e - b);
        if (displs) displs[r] = (int)(b > hi ? hi - lo : b - lo);
        if (r == d->dp_rank) *at = b, *n = e - b;
    }
}

/* Owned tensors outside the layers (layers false) or outside the layers posted already
 * (layers true: lt_dist_layer_final's, sharded): the next run of such tensors from tensor
 * i on, as the buffer range [*lo, *hi); returns the index after it (n_tensors: none left,
 * the range empty). */
static int next_run(const lt_dist *d, const lt_llama *m, int i, bool layers, size_t *lo, size_t *hi) {
#define RUN_WANTED(k) \
    (d->mine[k] && (m->tensors[k].layer < 0 || (layers && !d->layer_posted[m->tensors[k].layer])))
    *lo = *hi = 0;
    while (i < m->n_tensors && !RUN_WANTED(i)) i++;
    if (i == m->n_tensors) return i;
    int j = i;
    while (j + 1 < m->n_tensors && RUN_WANTED(j + 1)) j++;
#undef RUN_WANTED
    *lo = m->tensors[i].offset, *hi = m->tensors[j].offset + (size_t)m->tensors[j].rows * (size_t)m->tensors[j].cols;
    return j + 1;
}

/* The buffer range [*lo, *hi) of layer l's owned tensors (empty: *lo >= *hi). */
static void layer_range(const lt_dist *d, const lt_llama *m, int layer, size_t *lo, size_t *hi) {
    *lo = SIZE_MAX, *hi = 0;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].layer == layer && d->mine[i]) {
            size_t b = m->tensors[i].offset, e = b + (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
            *lo = b < *lo ? b : *lo, *hi = e > *hi ? e : *hi;
        }
}

/* fsdp per layer: post the all-gather of params [lo, hi) (this rank's piece from its block
 * first), as d->ag_req. */
static lt_status post_ag(lt_dist *d, float *params, size_t lo, size_t hi, const char *what, lt_error *err) {
    size_t at, n;
    range_counts(d, lo, hi, d->ag_counts, d->ag_displs, &at, &n);
    memcpy(params + at, d->ps + (at - (size_t)d->displs[d->dp_rank]), n * sizeof *params);
    return lt_comm_iallgather_dp(d->comm, params + lo, d->ag_counts, d->ag_displs, what, &d->ag_req, err);
}

/* fsdp per layer: every layer up to `layer` whole (the one in flight waited, the others
 * posted and waited in layer order), then the next one's posted (the prefetch). */
static lt_status gather_through(lt_dist *d, const lt_llama *m, float *params, int layer, lt_error *err) {
    lt_status st = LT_OK;
    char what[96];
    for (int l = d->l0; st == LT_OK && l <= layer && l < d->l1; l++) {
        if (d->whole[l]) continue;
        size_t lo, hi;
        layer_range(d, m, l, &lo, &hi);
        snprintf(what, sizeof what, "the weights of layer %d (all-gather over the DP ranks of stage %d)", l, d->stage);
        if (d->ag_layer != l && lo < hi) st = post_ag(d, params, lo, hi, what, err);
        if (st == LT_OK) st = lt_comm_wait(d->comm, &d->ag_req, err);
        d->ag_layer = -1;
        d->whole[l] = st == LT_OK;
    }
    /* the next layer with weights here (HelixPipe's part holds some layers' only) */
    for (int next = layer + 1; st == LT_OK && next >= d->l0 && next < d->l1 && d->ag_layer < 0; next++) {
        if (d->whole[next]) continue;
        size_t lo, hi;
        layer_range(d, m, next, &lo, &hi);
        if (lo >= hi) {
            d->whole[next] = true;
            continue;
        }
        snprintf(what, sizeof what, "the weights of layer %d (all-gather over the DP ranks of stage %d)", next, d->stage);
        st = post_ag(d, params, lo, hi, what, err);
        if (st == LT_OK) d->ag_layer = next;
    }
    bool all = true;
    for (int l = d->l0; l < d->l1; l++) all = all && d->whole[l];
    d->layers_pending = st != LT_OK || !all;
    return st;
}

lt_status lt_dist_layer_weights(void *ctx, int layer, lt_error *err) {
    lt_dist *d = ctx;
    if (!d->layers_pending || layer < d->l0 || layer >= d->l1 || d->whole[layer]) return LT_OK;
    return gather_through(d, d->model, d->model->params, layer, err);
}

lt_status lt_dist_step_begin(lt_dist *d, const lt_llama *m, float *params, lt_error *err) {
    if (!d->released) return LT_OK;
    if (!d->per_layer) return lt_dist_unshard(d, m, params, err);
    /* the tensors outside the layers now, in runs (in table order on every DP rank) */
    lt_status st = LT_OK;
    size_t lo, hi;
    for (int i = next_run(d, m, 0, false, &lo, &hi); st == LT_OK && lo < hi; i = next_run(d, m, i, false, &lo, &hi)) {
        st = post_ag(d, params, lo, hi, "the weights outside the layers (all-gather over the DP ranks)", err);
        if (st == LT_OK) st = lt_comm_wait(d->comm, &d->ag_req, err);
    }
    memset(d->whole, 0, (size_t)m->shape.layers * sizeof *d->whole);
    d->released = false, d->layers_pending = true, d->ag_layer = -1;
    if (st == LT_OK) st = gather_through(d, m, params, d->l0 - 1, err); /* posts the first layer's */
    return st;
}

/* Sharded, in place: post the DP reduce-scatter of buffer floats [lo, hi): DP rank r
 * receives the sum of the range's intersection with its block, at grads + lo (MPI's
 * in-place form), moved to its place once waited (sharded_rest). */
static lt_status post_rs(lt_dist *d, float *grads, size_t lo, size_t hi, lt_error *err) {
    if (d->n_req == d->cap_req) {
        size_t cap = d->cap_req ? 2 * d->cap_req : 16;
        lt_comm_req **t = realloc(d->req, cap * sizeof *t);
        if (t) d->req = t;
        size_t (*mv)[3] = t ? realloc(d->rs_move, cap * sizeof *mv) : NULL;
        if (mv) d->rs_move = mv;
        int *cn = mv ? realloc(d->rs_counts, cap * (size_t)d->dp * sizeof *cn) : NULL;
        if (!t || !mv || !cn) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        d->rs_counts = cn, d->cap_req = cap;
    }
    int *counts = d->rs_counts + d->n_req * (size_t)d->dp;
    size_t at, n;
    range_counts(d, lo, hi, counts, NULL, &at, &n);
    char what[96];
    snprintf(what, sizeof what, "gradient reduce-scatter %zu of stage %d", d->n_req, d->stage);
    lt_status st = lt_comm_ireduce_scatter_dp(d->comm, grads + lo, counts, what, &d->req[d->n_req], err);
    if (st == LT_OK) {
        d->rs_move[d->n_req][0] = lo, d->rs_move[d->n_req][1] = at, d->rs_move[d->n_req][2] = n;
        d->n_req++;
    }
    return st;
}

/* lt_dist_reduce_grads, sharded in place: the TP sums of the replicated tensors and the tied
 * embedding's sum not done yet, the reduce-scatter of every owned range not posted during
 * the backward (runs of tensors outside the posted layers), then every one waited and its
 * block moved where it belongs (the rest of grads is stale: never read). */
static lt_status sharded_rest(lt_dist *d, const lt_llama *m, float *grads, lt_error *err) {
    lt_status st = d->layers_pending ? gather_through(d, m, m->params, d->l1 - 1, err) : LT_OK;
    if (st == LT_OK) st = reduce_tp_replicated(d, m, grads, -1, err);
    if (st == LT_OK) st = reduce_tied(d, m, grads, err);
    size_t lo, hi;
    for (int i = next_run(d, m, 0, true, &lo, &hi); st == LT_OK && lo < hi; i = next_run(d, m, i, true, &lo, &hi))
        st = post_rs(d, grads, lo, hi, err);
    for (size_t k = 0; k < d->n_req; k++) {
        lt_status s2 = st == LT_OK ? lt_comm_wait(d->comm, &d->req[k], err) : LT_OK;
        if (st == LT_OK) st = s2;
        if (st == LT_OK) memmove(grads + d->rs_move[k][1], grads + d->rs_move[k][0], d->rs_move[k][2] * sizeof *grads);
    }
    d->n_req = 0;
    memset(d->layer_posted, 0, (size_t)m->shape.layers * sizeof *d->layer_posted);
    return st;
}

lt_status lt_dist_layer_final(void *ctx, int layer, lt_error *err) {
    lt_dist *d = ctx;
    const lt_llama *m = d->model;
    /* (HelixPipe: after the step, a layer's Q/K/V gradients come from the attentions' stages) */
    if (d->helix || d->helix_parts || d->dp < 2 || !m || layer < d->l0 || layer >= d->l1 || d->layer_posted[layer])
        return LT_OK;
    if (d->sharded && (!d->inplace || d->device_grads)) return LT_OK; /* (one reduce-scatter after the step) */
    size_t lo, hi;
    layer_range(d, m, layer, &lo, &hi);
    lt_status st = LT_OK;
    if (d->sharded) { /* the layer's TP sums first (sums commute), then its reduce-scatter */
        /* (fsdp: every all-gather of the step before any reduce-scatter, on every DP rank) */
        if (d->layers_pending) st = gather_through(d, m, m->params, d->l1 - 1, err);
        if (st == LT_OK) st = reduce_tp_replicated(d, m, d->grads, layer, err);
        d->layer_posted[layer] = true;
        if (st == LT_OK && lo < hi) st = post_rs(d, d->grads, lo, hi, err);
    } else {
        d->layer_posted[layer] = true;
        st = lo < hi ? post_range(d, d->grads, lo, hi, err) : LT_OK;
    }
    for (size_t k = 0; st == LT_OK && k < d->n_req; k++) { /* let the earlier ones progress (MPI moves them in its calls) */
        bool done;
        st = lt_comm_test(d->comm, &d->req[k], &done, err);
    }
    return st;
}

/* Sum buf[0, n) over `group` in place, in buckets of d->bucket_floats (device memory: one
 * NCCL all-reduce). */
static lt_status allreduce_buckets(const lt_dist *d, lt_comm_group group, float *buf, size_t n, bool device,
                                   lt_error *err) {
    if (device) return lt_comm_dev_allreduce(d->comm, group, buf, n, LT_COMM_F32, false, err);
    lt_status st = LT_OK;
    for (size_t lo = 0; st == LT_OK && lo < n; lo += d->bucket_floats)
        st = lt_comm_allreduce(d->comm, group, buf + lo, n - lo < d->bucket_floats ? n - lo : d->bucket_floats,
                               LT_COMM_F32, false, err);
    return st;
}

lt_status lt_dist_reduce_grads(lt_dist *d, const lt_llama *m, float *grads, lt_error *err) {
    lt_status st = LT_OK;
    if (d->helix) { /* every stage's share of every tensor (a layer's Q/K/V on every attention stage), every DP rank's */
        bool dev = d->device_grads; /* (on the GPU over NCCL) */
        if (d->tp == 1) return allreduce_buckets(d, LT_COMM_WORLD, grads, m->n_params, dev, err);
        /* under TP the ranks of one TP rank: its DP ranks, then its stages (sums commute);
         * then the replicated tensors' sums over the TP group, on their owner stage */
        if (d->dp > 1) st = allreduce_buckets(d, LT_COMM_DP, grads, m->n_params, dev, err);
        if (st == LT_OK) st = allreduce_buckets(d, LT_COMM_PIPELINE, grads, m->n_params, dev, err);
        if (st == LT_OK) st = reduce_tp_replicated(d, m, grads, -1, err);
        return st;
    }
    if (d->sharded && d->device_grads) { /* the TP and tied sums, then NCCL's in-place reduce-scatter of the blocks */
        st = reduce_tp_replicated(d, m, grads, -1, err);
        if (st == LT_OK) st = reduce_tied(d, m, grads, err);
        if (st == LT_OK)
            st = lt_comm_dev_dp_blocks(d->comm, false, grads, d->block, sizeof(float), m->n_params * sizeof(float), err);
        return st;
    }
    if (d->sharded && d->inplace) return sharded_rest(d, m, grads, err);
    if (d->sharded) { /* the TP and tied sums first (sums commute), then each DP rank its block */
        st = reduce_tp_replicated(d, m, grads, -1, err);
        if (st == LT_OK) st = reduce_tied(d, m, grads, err);
        float *f = st == LT_OK ? flat_of(d, grads) : NULL;
        if (st == LT_OK) st = lt_comm_reduce_scatter_dp(d->comm, f, d->counts, err);
        if (st == LT_OK) /* the summed block back where it belongs */
            memmove(f + d->displs[d->dp_rank], f, (size_t)d->counts[d->dp_rank] * sizeof(float));
        if (st == LT_OK) flat_done(d, f, grads); /* (the other blocks are stale: never read) */
        return st;
    }
    if (d->dp > 1) { /* what the last backward did not post: runs of owned tensors, last first */
        for (int i = m->n_tensors - 1; st == LT_OK && i >= 0;) {
            bool want = d->mine[i] && !(m->tensors[i].layer >= 0 && d->layer_posted[m->tensors[i].layer]);
            if (!want) {
                i--;
                continue;
            }
            size_t end = m->tensors[i].offset + (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
            int j = i;
            while (j > 0 && d->mine[j - 1] && !(m->tensors[j - 1].layer >= 0 && d->layer_posted[m->tensors[j - 1].layer]))
                j--;
            st = post_range(d, grads, m->tensors[j].offset, end, err);
            i = j - 1;
        }
        for (size_t k = 0; k < d->n_req; k++) {
            lt_status s2 = st == LT_OK ? lt_comm_wait(d->comm, &d->req[k], err) : LT_OK;
            if (st == LT_OK) st = s2;
        }
        d->n_req = 0;
        memset(d->layer_posted, 0, (size_t)m->shape.layers * sizeof *d->layer_posted);
    }
    if (st == LT_OK) st = reduce_tied(d, m, grads, err);
    if (st == LT_OK) st = reduce_tp_replicated(d, m, grads, -1, err);
    return st;
}

/* Sharding helpers over this rank's block: the counted sum of squares, the clip, the update. */
typedef struct zctx {
    const lt_dist *d;
    const lt_llama *m;
    float *params, *grads;
    double sq;
    float coef;
    const lt_adamw *o;
    double lr;
    const lt_optim_config *oc;
} zctx;

static void z_sq(void *ctx, size_t b, size_t e, size_t f) {
    zctx *z = ctx;
    (void)f;
    for (int i = 0; i < z->m->n_tensors; i++) { /* a tied embedding counts on the first stage only */
        if (!z->d->counted[i]) continue;
        size_t lo = z->m->tensors[i].offset, hi = lo + (size_t)z->m->tensors[i].rows * (size_t)z->m->tensors[i].cols;
        for (size_t k = lo > b ? lo : b; k < (hi < e ? hi : e); k++) z->sq += (double)z->grads[k] * (double)z->grads[k];
    }
}
static void z_clip(void *ctx, size_t b, size_t e, size_t f) {
    zctx *z = ctx;
    (void)f;
    for (size_t i = b; i < e; i++) z->grads[i] *= z->coef;
}
static void z_adam(void *ctx, size_t b, size_t e, size_t f) {
    zctx *z = ctx;
    lt_adamw_update_range(z->o, z->m, z->params, z->grads, z->lr, z->oc, b, e, z->d->m + f, z->d->v + f);
}

/* lt_dist_clip on device gradients (lt_dist_set_device_grads; no sharding there): the sum of
 * squares of each counted tensor on the device, summed on the host in tensor order, the
 * pipeline's sum over MPI, and the owned tensors scaled on the device. */
static lt_status device_clip(const lt_dist *d, const lt_llama *m, float *grads, double max_norm, double *norm,
                             lt_error *err) {
    const lt_backend *be = lt_backend_of(m);
    /* sharded: this rank's block [lo, hi) of each tensor (the blocks of every DP rank, TP
     * rank and stage make the whole); else the tensors whole */
    size_t lo = d->sharded ? (size_t)d->displs[d->dp_rank] : 0;
    size_t hi = d->sharded ? lo + (size_t)d->counts[d->dp_rank] : SIZE_MAX;
    double sq = 0;
    /* every counted tensor's range summed on the device and read back once (one wait, not
     * one a tensor), in tensor order: the bits of adding the tensors' sums one by one */
    size_t *off = malloc(((size_t)m->n_tensors + 1) * 2 * sizeof *off), *len = off ? off + m->n_tensors + 1 : NULL;
    if (!off) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %d tensor ranges", m->n_tensors);
    int n = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        if (!d->counted[i]) continue;
        const lt_tensor_info *t = &m->tensors[i];
        size_t b = t->offset, e = b + (size_t)t->rows * (size_t)t->cols;
        b = b > lo ? b : lo, e = e < hi ? e : hi;
        if (b < e) off[n] = b, len[n++] = e - b;
    }
    lt_status st = lt_backend_cuda_sum_squares_ranges(be, grads, off, len, n, &sq, err);
    free(off);
    if (st == LT_OK) st = lt_comm_allreduce(d->comm, d->sharded ? LT_COMM_WORLD : LT_COMM_PIPELINE, &sq, 1, LT_COMM_F64,
                                            false, err);
    if (st == LT_OK && !d->sharded && d->tp > 1) st = lt_comm_allreduce(d->comm, LT_COMM_TP, &sq, 1, LT_COMM_F64, false, err);
    if (st != LT_OK) return st;
    *norm = sqrt(sq);
    double coef = lt_clip_coef(*norm, max_norm);
    for (int i = 0; coef < 1.0 && st == LT_OK && i < m->n_tensors; i++) {
        if (!d->mine[i]) continue;
        const lt_tensor_info *t = &m->tensors[i];
        size_t b = t->offset, e = b + (size_t)t->rows * (size_t)t->cols;
        b = b > lo ? b : lo, e = e < hi ? e : hi;
        if (b < e) st = lt_backend_cuda_scale(be, grads + b, e - b, (float)coef, err);
    }
    return st;
}

lt_status lt_dist_clip(const lt_dist *d, const lt_llama *m, float *grads, double max_norm, double *norm,
                       lt_error *err) {
    double sq = 0;
    size_t lo = d->sharded ? (size_t)d->displs[d->dp_rank] : 0, hi = d->sharded ? lo + (size_t)d->counts[d->dp_rank] : 0;
    if (d->device_grads) /* the CUDA backend's gradients: its reductions, then the same scalars */
        return device_clip(d, m, grads, max_norm, norm, err);
    if (d->sharded) { /* this rank's block; the blocks of every DP rank and stage make the whole */
        zctx z = {.d = d, .m = m, .grads = grads};
        for_flat(d, lo, hi, z_sq, &z);
        sq = z.sq;
    } else {
        for (int i = 0; i < m->n_tensors; i++) {
            if (!d->counted[i]) continue;
            const lt_tensor_info *t = &m->tensors[i];
            double n = lt_grad_norm(grads + t->offset, (size_t)t->rows * (size_t)t->cols);
            sq += n * n;
        }
    }
    /* every stage's (and TP shard's) part once: the shards' blocks span the world */
    lt_status st = lt_comm_allreduce(d->comm, d->sharded ? LT_COMM_WORLD : LT_COMM_PIPELINE, &sq, 1, LT_COMM_F64, false,
                                     err);
    if (st == LT_OK && !d->sharded && d->tp > 1) st = lt_comm_allreduce(d->comm, LT_COMM_TP, &sq, 1, LT_COMM_F64, false, err);
    if (st != LT_OK) return st;
    *norm = sqrt(sq);
    double coef = lt_clip_coef(*norm, max_norm);
    if (coef < 1.0 && d->sharded) {
        zctx z = {.d = d, .m = m, .grads = grads, .coef = (float)coef};
        for_flat(d, lo, hi, z_clip, &z);
    } else if (coef < 1.0) {
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

lt_status lt_dist_adamw(lt_dist *d, lt_adamw *o, const lt_llama *m, float *params, const float *grads,
                        double lr, const lt_optim_config *oc, lt_error *err) {
    if (!d->sharded) {
        lt_adamw_step_tensors(o, m, params, grads, lr, oc, d->mine);
        if (!d->helix) return LT_OK;
        /* HelixPipe: each tensor from its owner to the pipeline's other stages (the others
         * zeroed, then summed: the owner's bits, as a broadcast; the paper sends the QKV
         * weights with the activations, 4.2) */
        for (int i = 0; i < m->n_tensors; i++)
            if (!d->mine[i]) memset(params + m->tensors[i].offset, 0, (size_t)m->tensors[i].rows * m->tensors[i].cols * sizeof(float));
        return allreduce_buckets(d, LT_COMM_PIPELINE, params, m->n_params, false, err);
    }
    o->t++;
    size_t lo = (size_t)d->displs[d->dp_rank], hi = lo + (size_t)d->counts[d->dp_rank];
    if (d->dmaster) { /* the GPU: the block's update writes its bf16 copy, which the DP ranks all-gather */
        lt_status st = lt_backend_cuda_adamw_block(d->be, m, grads, lo, hi, d->dmaster, d->dm, d->dv, lr, o->t, oc, err);
        if (st == LT_OK)
            st = lt_comm_dev_dp_blocks(d->comm, true, lt_backend_cuda_weights16(d->be), d->block, sizeof(lt_bf16),
                                       m->n_params * sizeof(lt_bf16), err);
        return st;
    }
    zctx z = {.d = d, .m = m, .params = params, .grads = (float *)grads, .o = o, .lr = lr, .oc = oc};
    for_flat(d, lo, hi, z_adam, &z);
    float *f = flat_of(d, params);
    if (d->shard == LT_SHARD_FSDP) { /* the updated block kept; the whole gathered before the next use */
        memcpy(d->ps, f + lo, (hi - lo) * sizeof *d->ps);
        d->released = true;
        return LT_OK;
    }
    lt_status st = lt_comm_allgather_dp(d->comm, f, d->counts, d->displs, err); /* every DP rank's updated block */
    if (st == LT_OK) flat_done(d, f, params);
    return st;
}

lt_status lt_dist_helix_weights(const lt_dist *d, lt_backend *be, const lt_llama *m, lt_error *err) {
    if (!d->helix) return LT_OK;
    float *master = lt_backend_cuda_master(be);
    if (!master) return lt_fail(err, LT_ERR_INTERNAL, NULL, "HelixPipe's weights: no whole fp32 master on the device");
    /* as lt_dist_adamw on the host: each tensor from its owner (the others zeroed, then summed
     * over the pipeline's stages: the owner's bits), then the bf16 copy the kernels read */
    for (int i = 0; i < m->n_tensors; i++)
        if (!d->mine[i])
            be->zero(be, master + m->tensors[i].offset, (size_t)m->tensors[i].rows * m->tensors[i].cols * sizeof(float));
    lt_status st = allreduce_buckets(d, LT_COMM_PIPELINE, master, m->n_params, true, err);
    if (st == LT_OK) st = lt_backend_cuda_refresh16(be, m, err);
    return st;
}

/* Return the whole pages inside buf[0, n) to the system (they read as zeros after). */
static lt_status release_pages(const lt_dist *d, float *buf, size_t n, const char *what, lt_error *err) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || !buf || n == 0) return LT_OK;
    uintptr_t a = ((uintptr_t)buf + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    uintptr_t b = ((uintptr_t)(buf + n)) / (uintptr_t)page * (uintptr_t)page;
    if (b > a && madvise((void *)a, b - a, MADV_DONTNEED) != 0)
        return lt_fail(err, LT_ERR_IO, NULL, "%s: releasing the %s between steps (madvise): %s", lt_comm_who(d->comm),
                       what, strerror(errno));
    return LT_OK;
}

lt_status lt_dist_release(lt_dist *d, const lt_llama *m, float *params, float *grads, lt_error *err) {
    if (!d->sharded || d->dmaster) return LT_OK; /* (the GPU shards zero1 only: nothing to release) */
    lt_status st = d->shard == LT_SHARD_ZERO1 ? LT_OK : release_pages(d, grads, m->n_params, "gradients", err);
    if (st == LT_OK && d->shard == LT_SHARD_FSDP) { /* (its block is in ps since the update) */
        st = release_pages(d, params, m->n_params, "weights", err);
        d->released = true;
    }
    if (st == LT_OK && !d->inplace) st = release_pages(d, d->flat, d->owned_floats, "scratch", err);
    return st;
}

lt_status lt_dist_unshard(lt_dist *d, const lt_llama *m, float *params, lt_error *err) {
    if (d->layers_pending) return gather_through(d, m, params, d->l1 - 1, err);
    if (!d->released) return LT_OK;
    float *f = d->inplace ? params : d->flat;
    memcpy(f + d->displs[d->dp_rank], d->ps, (size_t)d->counts[d->dp_rank] * sizeof *d->ps);
    lt_status st = lt_comm_allgather_dp(d->comm, f, d->counts, d->displs, err);
    if (st == LT_OK) flat_done(d, f, params);
    d->released = st != LT_OK;
    return st;
}

lt_status lt_dist_download(const lt_dist *d, lt_llama *m, lt_error *err) {
    if (!d->dmaster) return LT_OK;
    size_t mine = (size_t)d->counts[d->dp_rank];
    /* (in place: the part's owned elements are m->params itself) */
    lt_status st = d->be->to_host(d->be, m->params + d->displs[d->dp_rank], d->dmaster, mine * sizeof(float), err);
    if (st == LT_OK) st = lt_comm_allgather_dp(d->comm, m->params, d->counts, d->displs, err);
    return st;
}

double lt_dist_held_bytes(const lt_dist *d, size_t n_params) {
    double n = (double)n_params, block = d->sharded ? (double)d->counts[d->dp_rank] : n, f = sizeof(float);
    double moments = 2.0 * block * f; /* AdamW m and v: the fp32 weights are the master copy */
    switch (d->shard) {
    case LT_SHARD_FSDP: return moments + block * f; /* the weights' block */
    case LT_SHARD_ZERO2: return moments + n * f;    /* the weights whole */
    default: return moments + 2.0 * n * f;          /* the weights and the gradients whole */
    }
}

lt_status lt_dist_gather(const lt_dist *d, const lt_llama *m, const float *buf, const lt_llama *full, float *whole,
                         lt_error *err) {
    /* blob: int32 TP rank, int32 count, int32 tensor indices, then their floats in that
     * order (a replicated tensor from TP rank 0 only) */
    size_t floats = 0;
    int32_t count = 0, tpr = d->tp_rank;
    const lt_comm_layout *l = lt_comm_layout_of(d->comm);
    bool sends = d->dp_rank == 0;
    bool *send = calloc((size_t)m->n_tensors + 1, sizeof *send);
    if (!send) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int i = 0; sends && i < m->n_tensors; i++)
        if (d->mine[i] && (m->tensors[i].split != LT_SPLIT_NONE || d->tp_rank == 0))
            send[i] = true, count++, floats += (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
    size_t bytes = sizeof(int32_t) * (2 + (size_t)count) + floats * sizeof(float);
    char *blob = malloc(bytes);
    if (!blob) {
        free(send);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    }
    memcpy(blob, &tpr, sizeof tpr), memcpy(blob + sizeof tpr, &count, sizeof count);
    char *p = blob + 2 * sizeof(int32_t), *q = blob + sizeof(int32_t) * (2 + (size_t)count);
    for (int32_t i = 0; i < m->n_tensors; i++) {
        if (!send[i]) continue;
        size_t n = (size_t)m->tensors[i].rows * (size_t)m->tensors[i].cols;
        int32_t index = m->tensors[i].index; /* the tensor's place in the whole model */
        memcpy(p, &index, sizeof index), p += sizeof index;
        memcpy(q, buf + m->tensors[i].offset, n * sizeof(float)), q += n * sizeof(float);
    }
    free(send);
    size_t *lens = l->rank == 0 ? calloc((size_t)l->world, sizeof *lens) : NULL;
    void *all = NULL;
    lt_status st = l->rank == 0 && !lens ? lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory") : LT_OK;
    /* rank 0 places every rank's shards by the whole model's table at its tp (shapes and
     * splits; its own part may hold none of another stage's tensors) */
    lt_llama table = {0};
    if (st == LT_OK && l->rank == 0) st = lt_llama_create_table(&table, &m->shape, m->tp, 0, err);
    if (st == LT_OK) st = lt_comm_gather_bytes(d->comm, blob, bytes, &all, lens, err);
    free(blob);
    const char *at = all;
    for (int r = 0; st == LT_OK && l->rank == 0 && r < l->world; at += lens[r], r++) {
        int32_t c, from;
        if (lens[r] < 2 * sizeof c) {
            st = lt_fail(err, LT_ERR_INTERNAL, NULL, "rank %d sent %zu bytes", r, lens[r]);
            break;
        }
        memcpy(&from, at, sizeof from), memcpy(&c, at + sizeof from, sizeof c);
        const char *ip = at + 2 * sizeof c, *fp = at + sizeof c * (2 + (size_t)c);
        for (int32_t k = 0; k < c; k++) {
            int32_t i;
            memcpy(&i, ip, sizeof i), ip += sizeof i;
            if (i < 0 || i >= table.n_tensors || from < 0 || from >= m->tp) {
                st = lt_fail(err, LT_ERR_INTERNAL, NULL, "rank %d sent tensor %d of TP rank %d", r, i, from);
                break;
            }
            const lt_tensor_info *t = &table.tensors[i]; /* (a whole table: position = index) */
            size_t n = lt_llama_shard_floats(&table, t, from);
            float *tmp = malloc((n ? n : 1) * sizeof *tmp); /* (the blob's floats may be unaligned) */
            if (!tmp) {
                st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
                break;
            }
            memcpy(tmp, fp, n * sizeof(float)), fp += n * sizeof(float);
            lt_llama_shard_io(&table, t, from, full, whole, tmp, true);
            free(tmp);
        }
    }
    lt_llama_free(&table);
    free(all), free(lens);
    return st;
}

lt_status lt_dist_tp_assemble(const lt_dist *d, const lt_llama *m, const float *buf, const lt_llama *full,
                              float *whole, lt_error *err) {
    size_t most = 0; /* the largest shard: the all-gather's block */
    for (int i = 0; i < m->n_tensors; i++)
        for (int r = 0; d->mine[i] && r < d->tp; r++) {
            size_t n = lt_llama_shard_floats(m, &m->tensors[i], r);
            most = n > most ? n : most;
        }
    float *blocks = malloc(((size_t)d->tp * most + 1) * sizeof *blocks);
    if (!blocks) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for assembling the stage's tensors");
    lt_status st = LT_OK;
    for (int i = 0; st == LT_OK && i < m->n_tensors; i++) {
        if (!d->mine[i]) continue;
        const lt_tensor_info *t = &m->tensors[i];
        if (t->split == LT_SPLIT_NONE || d->tp == 1) { /* whole here */
            lt_llama_shard_io(m, t, d->tp_rank, full, whole, (float *)buf + t->offset, true);
            continue;
        }
        memcpy(blocks + (size_t)d->tp_rank * most, buf + t->offset, (size_t)t->rows * (size_t)t->cols * sizeof *blocks);
        st = lt_comm_tp_allgather(d->comm, blocks, most * sizeof *blocks, most * sizeof *blocks * (size_t)d->tp, err);
        for (int r = 0; st == LT_OK && r < d->tp; r++) lt_llama_shard_io(m, t, r, full, whole, blocks + (size_t)r * most, true);
    }
    free(blocks);
    return st;
}

/* ---------------------------------------------------------------- the TP group's collectives */

static lt_status tp_all_gather(void *ctx, void *all, size_t block, size_t whole, lt_error *err) {
    return lt_comm_tp_allgather(ctx, all, block, whole, err);
}

/* A posted reduce-scatter on host memory: fp32 elements in place; bf16 ones (the cpu-bf16
 * test backend's) widened to fp32, summed, and rounded back once at the end, as NCCL's bf16
 * reduce-scatter sums. */
typedef struct tp_pending {
    lt_comm_req *req;
    float *f;    /* the fp32 elements reduced (all itself for fp32) */
    uint16_t *b; /* bf16: the caller's block array */
    size_t n;
} tp_pending;

static lt_status tp_wait(void *ctx, void *pending, lt_error *err) {
    tp_pending *p = pending;
    int r = lt_comm_layout_of(ctx)->tp_rank;
    bool posted = p->req != NULL;
    lt_status st = lt_comm_wait(ctx, &p->req, err);
    /* MPI leaves the sum at the start of the buffer (lt_comm_tp_ireduce_scatter) */
    const float *sum = posted ? p->f : p->f + (size_t)r * p->n;
    if (st == LT_OK && p->b)
        for (size_t i = 0; i < p->n; i++) p->b[(size_t)r * p->n + i] = lt_bf16_from_f32(sum[i]);
    else if (st == LT_OK && sum != p->f + (size_t)r * p->n)
        memmove(p->f + (size_t)r * p->n, sum, p->n * sizeof *p->f);
    if (p->b) free(p->f);
    free(p);
    return st;
}

static lt_status tp_reduce_scatter_post(void *ctx, void *all, size_t n, size_t es, size_t whole, void **pending,
                                        lt_error *err) {
    *pending = NULL;
    if (es != sizeof(float) && es != 2)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: a TP reduce-scatter of %zu-byte elements", lt_comm_who(ctx), es);
    tp_pending *p = calloc(1, sizeof *p);
    size_t total = n * (size_t)lt_comm_layout_of(ctx)->tp;
    if (p && es == 2) { /* (cpu-bf16) */
        p->b = all;
        p->f = malloc((total ? total : 1) * sizeof *p->f);
        for (size_t i = 0; p->f && i < total; i++) p->f[i] = lt_bf16_to_f32(p->b[i]);
    } else if (p) {
        p->f = all;
    }
    if (!p || !p->f) {
        if (p && p->b) free(p->f);
        free(p);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a TP reduce-scatter");
    }
    p->n = n;
    lt_status st = lt_comm_tp_ireduce_scatter(ctx, p->f, n, whole, &p->req, err);
    if (st != LT_OK) {
        if (p->b) free(p->f);
        free(p);
        return st;
    }
    *pending = p;
    return LT_OK;
}

static lt_status tp_reduce_scatter(void *ctx, void *all, size_t n, size_t es, size_t whole, lt_error *err) {
    void *p;
    lt_status st = tp_reduce_scatter_post(ctx, all, n, es, whole, &p, err);
    return st == LT_OK ? tp_wait(ctx, p, err) : st;
}

static lt_status tp_all_reduce(void *ctx, float *buf, size_t n, bool max, lt_error *err) {
    return lt_comm_allreduce(ctx, LT_COMM_TP, buf, n, LT_COMM_F32, max, err);
}

/* ... on device memory, over NCCL */
static lt_status tp_dev_all_gather(void *ctx, void *all, size_t block, size_t whole, lt_error *err) {
    return lt_comm_dev_tp_allgather(ctx, all, block, whole, err);
}

static lt_status tp_dev_reduce_scatter(void *ctx, void *all, size_t n, size_t es, size_t whole, lt_error *err) {
    return lt_comm_dev_tp_reduce_scatter(ctx, all, n, es, whole, err);
}

static lt_status tp_dev_all_reduce(void *ctx, float *buf, size_t n, bool max, lt_error *err) {
    return lt_comm_dev_allreduce(ctx, LT_COMM_TP, buf, n, LT_COMM_F32, max, err);
}

static lt_status tp_dev_reduce_scatter_post(void *ctx, void *all, size_t n, size_t es, size_t whole, void **pending,
                                            lt_error *err) {
    lt_comm_req *req = NULL;
    lt_status st = lt_comm_dev_tp_ireduce_scatter(ctx, all, n, es, whole, &req, err);
    *pending = req;
    return st;
}

static lt_status tp_dev_wait(void *ctx, void *pending, lt_error *err) {
    lt_comm_req *req = pending;
    return lt_comm_wait(ctx, &req, err);
}

void lt_dist_tp_ops(lt_comm *c, bool device, lt_tp_ops *ops) {
    if (device)
        *ops = (lt_tp_ops){.ctx = c, .all_gather = tp_dev_all_gather, .reduce_scatter = tp_dev_reduce_scatter,
                           .all_reduce = tp_dev_all_reduce, .reduce_scatter_post = tp_dev_reduce_scatter_post,
                           .wait = tp_dev_wait};
    else
        *ops = (lt_tp_ops){.ctx = c, .all_gather = tp_all_gather, .reduce_scatter = tp_reduce_scatter,
                           .all_reduce = tp_all_reduce, .reduce_scatter_post = tp_reduce_scatter_post,
                           .wait = tp_wait};
}
