/*
 * train/exec/shards.c — each op's members and shards, set up once per pipeline
 * (train/exec/internal.h).
 *
 * An op of a DP-Merge unit (unit cp = G > 1) or of a static context-parallel pipeline
 * (cp = G > 1) runs as G member shards (docs/plans-schema.md "The one CP rule"); every
 * other op as one member, its unit as it is. A backward reads its forward's activations in
 * place when every member's backward shard equals its forward shard (a symmetric schedule,
 * context-parallel or not), and gathers its rows otherwise (an asymmetric schedule's
 * regrouped backward units, SlimPack 4.1.2): where each row comes from is worked out here,
 * once, before any op runs.
 */
#include <stdlib.h>
#include <string.h>

#include "train/exec/internal.h"

/* The context-parallel degree an op runs at: its unit's DP-Merge degree (unit cp > 1), else
 * its pipeline's static degree, else 1. */
static int group_of(const pipe_run *pr, const lt_op *op) {
    const lt_unit *u = lt_schedule_op_unit(&pr->r->sched, op);
    if (u->cp > 1) return u->cp;
    return pr->r->cp > 1 ? pr->r->cp : 1;
}

/* Distributed: the world rank of each of op's G group members on this stage, and which
 * member this process is (a DP-Merge unit: the group's pipelines, sample_rank naming the
 * first; a static context-parallel pipeline: its DP ranks). */
static void member_ranks(const pipe_run *pr, const lt_op *op, int G, int *ranks, int *me) {
    const lt_unit *u = lt_schedule_op_unit(&pr->r->sched, op);
    uint32_t smp = u->cp > 1 ? lt_plan_op_merged_sample(&pr->r->sched, op) : UINT32_MAX;
    if (smp != UINT32_MAX && smp < pr->p->n_samples) {
        int first = pr->p->sample_rank[smp];
        for (int j = 0; j < G; j++)
            ranks[j] = first + j < (int)pr->p->n_ranks ? lt_comm_rank_of(pr->comm, pr->p->ranks[first + j].dp_rank, pr->my_stage)
                                                       : -1;
        *me = (int)pr->ri - first;
        return;
    }
    for (int j = 0; j < G; j++) ranks[j] = lt_comm_rank_of(pr->comm, pr->r->dp_rank + j, pr->my_stage);
    *me = pr->my_dp - pr->r->dp_rank;
}

/* Member g's shard of an op's slices s[0..n) (docs/plans-schema.md "The one CP rule"): each
 * slice [b, e) of len tokens cut into 2G chunks as equal as possible, the first len mod 2G
 * one token longer; member g takes chunks g and 2G - 1 - g (the zigzag split). Empty
 * chunks are left out, so a member may hold nothing. G = 1: the slices as they are (the
 * rule would cut each in two). sl: storage for 2n slices. */
static void shard_of(const lt_slice *s, size_t n, int G, int g, lt_train_slice *sl, lt_train_unit *u) {
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (G == 1) {
            sl[k++] = (lt_train_slice){.sample = s[i].sample, .begin = (int)s[i].begin, .end = (int)s[i].end};
            continue;
        }
        int len = (int)(s[i].end - s[i].begin), base = len / (2 * G), extra = len % (2 * G);
        int chunks[2] = {g, 2 * G - 1 - g};
        for (int c = 0; c < 2; c++) {
            int ch = chunks[c];
            int start = (int)s[i].begin + ch * base + (ch < extra ? ch : extra);
            int size = base + (ch < extra ? 1 : 0);
            if (size > 0) sl[k++] = (lt_train_slice){.sample = s[i].sample, .begin = start, .end = start + size};
        }
    }
    u->slices = sl;
    u->n_slices = k;
}

static bool same_shard(const lt_train_unit *a, const lt_train_unit *b) {
    if (a->n_slices != b->n_slices) return false;
    for (int i = 0; i < a->n_slices; i++)
        if (a->slices[i].sample != b->slices[i].sample || a->slices[i].begin != b->slices[i].begin ||
            a->slices[i].end != b->slices[i].end)
            return false;
    return true;
}

/* Members, shards and per-member holdings of op v. */
static lt_status op_init(pipe_run *pr, uint32_t v, lt_error *err) {
    op_state *o = &pr->ops[v];
    const lt_op *op = pr->deps.op[v];
    int G = o->G = group_of(pr, op);
    o->fwd = LT_DEP_NONE;
    size_t n;
    const lt_slice *s = lt_schedule_op_slices(&pr->r->sched, op, &n);
    o->sl = malloc((2 * n * (size_t)G + 1) * sizeof *o->sl);
    o->u = calloc((size_t)G, sizeof *o->u);
    o->active = calloc((size_t)G, sizeof *o->active);
    o->acts = calloc((size_t)G, sizeof *o->acts);
    o->x_in = calloc((size_t)G, sizeof *o->x_in);
    o->x_bytes = calloc((size_t)G, sizeof *o->x_bytes);
    o->kept = calloc((size_t)G, sizeof *o->kept);
    o->din = calloc((size_t)G, sizeof *o->din);
    if (!o->sl || !o->u || !o->active || !o->acts || !o->x_in || !o->x_bytes || !o->kept || !o->din)
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int g = 0; g < G; g++) {
        shard_of(s, n, G, g, o->sl + (size_t)g * 2 * n, &o->u[g]);
        if (o->u[g].n_slices > 0) o->active[o->n_active++] = g;
    }
    if (!pr->comm || G == 1) return LT_OK;
    /* one member here: the others run in their own processes */
    if (!(o->ranks = malloc((size_t)G * sizeof *o->ranks))) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    member_ranks(pr, op, G, o->ranks, &o->me);
    bool ok = o->me >= 0 && o->me < G;
    for (int j = 0; ok && j < G; j++) ok = o->ranks[j] >= 0;
    if (!ok)
        return lt_fail(err, LT_ERR_INPUT, NULL, "step %llu, pipeline %d: a group of %d its DP ranks do not hold",
                       (unsigned long long)pr->p->step, pr->r->dp_rank, G);
    o->n_active = 0;
    if (o->u[o->me].n_slices > 0) o->active[o->n_active++] = o->me;
    /* the rows whose dK/dV the group's backward sums: per sample, [0, its largest end) */
    size_t cap = 0;
    for (int j = 0; j < G; j++) cap += (size_t)o->u[j].n_slices;
    o->kv_sample = malloc((cap + 1) * sizeof(int)), o->kv_end = malloc((cap + 1) * sizeof(int));
    if (!o->kv_sample || !o->kv_end) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int j = 0; j < G; j++)
        for (int i = 0; i < o->u[j].n_slices; i++) {
            const lt_train_slice *t = &o->u[j].slices[i];
            int k = 0;
            while (k < o->n_kv && o->kv_sample[k] != t->sample) k++;
            if (k == o->n_kv) o->kv_sample[o->n_kv] = t->sample, o->kv_end[o->n_kv++] = t->end;
            else if (t->end > o->kv_end[k]) o->kv_end[k] = t->end;
        }
    return LT_OK;
}

/* Where each row of member g's shard bu of B op v comes from: the forward ops f (v's
 * LT_DEP_ACT predecessors), their member h holding it and its row there as the forward made
 * it; in one order every member computes alike (the sender of rows across processes and
 * their receiver walk the same list). */
static lt_status row_sources(pipe_run *pr, uint32_t v, const lt_train_unit *bu, row_src **out, size_t *n_out,
                             lt_error *err) {
    size_t np, n = 0, cap = (size_t)lt_unit_tokens(bu) + 1;
    const lt_dep *p = lt_deps_preds(&pr->deps, v, &np);
    row_src *rs = malloc(cap * sizeof *rs);
    if (!rs) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (size_t k = 0; k < np; k++) {
        if (p[k].kind != LT_DEP_ACT) continue;
        uint32_t f = p[k].op;
        const op_state *fo = &pr->ops[f];
        for (int h = 0; h < fo->G; h++) {
            const lt_train_unit *su = &fo->u[h];
            int srow = 0;
            for (int j = 0; j < su->n_slices; srow += su->slices[j].end - su->slices[j].begin, j++) {
                int brow = 0;
                for (int i = 0; i < bu->n_slices; brow += bu->slices[i].end - bu->slices[i].begin, i++) {
                    const lt_train_slice *a = &bu->slices[i], *b = &su->slices[j];
                    if (a->sample != b->sample) continue;
                    int lo = a->begin > b->begin ? a->begin : b->begin, hi = a->end < b->end ? a->end : b->end;
                    for (int t = lo; t < hi && n < cap; t++)
                        rs[n++] = (row_src){.f = f, .h = h, .srow = srow + (t - b->begin), .drow = brow + (t - a->begin)};
                }
            }
        }
    }
    *out = rs, *n_out = n;
    if (n != cap - 1)
        return exec_op_error(pr, v, err,
                             pr->ops[v].G > 1 ? "some of its tokens were not forwarded in its group"
                                              : "some of its tokens were not forwarded on its stage");
    return LT_OK;
}

/* B op v (run here): in place, or where its members' rows come from. The forwards it reads
 * must be of its group and must have kept what its recompute needs. */
static lt_status backward_init(pipe_run *pr, uint32_t v, lt_error *err) {
    op_state *o = &pr->ops[v];
    int R = exec_recompute_of(pr->deps.op[v]);
    size_t np, n_act = 0;
    uint32_t f = LT_DEP_NONE;
    const lt_dep *p = lt_deps_preds(&pr->deps, v, &np);
    for (size_t k = 0; k < np; k++) {
        if (p[k].kind != LT_DEP_ACT) continue;
        f = p[k].op, n_act++;
        if (pr->ops[f].G != o->G) return exec_op_error(pr, v, err, "its forward ran outside its group");
        if (exec_recompute_of(pr->deps.op[f]) != R)
            return exec_op_error(pr, v, err, "recomputes another number of layers than its forward kept");
    }
    if (n_act == 0) return exec_op_error(pr, v, err, "no activations of its forward");
    bool in_place = n_act == 1;
    for (int g = 0; in_place && g < o->G; g++) in_place = same_shard(&o->u[g], &pr->ops[f].u[g]);
    if (in_place) {
        o->fwd = f;
        return LT_OK;
    }
    o->rows = calloc((size_t)o->G, sizeof *o->rows);
    o->n_rows = calloc((size_t)o->G, sizeof *o->n_rows);
    if (!o->rows || !o->n_rows) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int g = 0; g < o->G; g++) {
        lt_status st = row_sources(pr, v, &o->u[g], &o->rows[g], &o->n_rows[g], err);
        if (st != LT_OK) return st;
    }
    return LT_OK;
}

lt_status exec_ops_setup(pipe_run *pr, const bool *run, lt_error *err) {
    size_t n = pr->deps.n_ops;
    if (!(pr->ops = calloc(n + 1, sizeof *pr->ops))) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %zu ops", n);
    for (uint32_t v = 0; v < n; v++) {
        lt_status st = op_init(pr, v, err);
        if (st != LT_OK) return st;
    }
    for (uint32_t v = 0; v < n; v++) {
        if (!run[v] || pr->deps.op[v]->kind != LT_OP_B) continue;
        lt_status st = backward_init(pr, v, err);
        if (st != LT_OK) return st;
    }
    return LT_OK;
}

void exec_ops_free(pipe_run *pr) {
    for (size_t v = 0; pr->ops && v < pr->deps.n_ops; v++) {
        op_state *o = &pr->ops[v];
        for (int g = 0; o->rows && g < o->G; g++) free(o->rows[g]);
        free(o->rows), free(o->n_rows);
        free(o->sl), free(o->u), free(o->active), free(o->ranks), free(o->kv_sample), free(o->kv_end);
        free(o->acts), free(o->x_in), free(o->x_bytes), free(o->kept), free(o->din);
        lt_part_grads_free(&o->pg); /* left after an error (else its pre-attention B freed it) */
    }
    free(pr->ops);
    pr->ops = NULL;
}
