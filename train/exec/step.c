/*
 * train/exec/step.c — one step of a plan (train/exec/exec.h): the checks, every pipeline
 * this process runs (the ops in their order, what they hold released as soon as nothing
 * reads it), and the step's totals.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/dist/dist.h" /* lt_dist_check_layout */
#include "train/exec/internal.h"

/* Op v of a DP-Merge unit on a member that is not the group's first: skipped (exec.h). */
static bool skipped(const pipe_run *pr, uint32_t v) {
    if (pr->comm) return false; /* each member runs its own shard, in its own process */
    uint32_t smp = lt_plan_op_merged_sample(&pr->r->sched, pr->deps.op[v]);
    return smp != UINT32_MAX && smp < pr->p->n_samples && pr->p->sample_rank[smp] != (int)pr->ri;
}

/* Checks of a pipeline's ops before anything runs. */
static lt_status check_ops(pipe_run *pr, lt_error *err) {
    for (uint32_t v = 0; v < pr->deps.n_ops; v++) {
        const lt_op *op = pr->deps.op[v];
        size_t np;
        const lt_dep *pd = lt_deps_preds(&pr->deps, v, &np);
        for (size_t k = 0; op->part != LT_PART_ALL && pr->comm && k < np; k++)
            if (pd[k].p2p && pr->deps.op[pd[k].op]->layer_begin != op->layer_begin)
                return exec_op_error(pr, v, err, "takes a layer part's input from another layer on another stage: "
                                     "the helix keeps a layer's post-attention and the next layer's pre-attention "
                                     "on one stage (HelixPipe 4.2), and only the parts of one layer cross stages");
        if ((op->part != LT_PART_ALL) != (pr->n_pos != pr->p->pp))
            return exec_op_error(pr, v, err, "mixes layer parts (HelixPipe) and whole layers in one step");
        if (!pr->grads && op->kind != LT_OP_F)
            return exec_op_error(pr, v, err, "is not an F, in a plan run without gradients (a scoring plan)");
        if (op->layer_end > (uint32_t)pr->m->shape.layers || op->layer_begin >= op->layer_end)
            return exec_op_error(pr, v, err, "its layer range is outside the model");
        size_t n;
        const lt_slice *sl = lt_schedule_op_slices(&pr->r->sched, op, &n);
        if (n == 0) return exec_op_error(pr, v, err, "its unit has no slice");
        for (size_t i = 0; i < n; i++)
            if (sl[i].sample < 0 || (size_t)sl[i].sample >= pr->p->n_samples || sl[i].begin < 0 ||
                sl[i].end <= sl[i].begin || sl[i].end > pr->p->lengths[sl[i].sample] || sl[i].end > INT_MAX)
                return exec_op_error(pr, v, err, "a slice of its unit is outside its sample");
    }
    return LT_OK;
}

/* Op v's start and finish (seconds from the step's start) into the step's op times. */
static lt_status record_time(pipe_run *pr, uint32_t v, double start, lt_error *err) {
    lt_exec_stats *es = pr->stats;
    if (es->n_op_times == pr->cap_times) {
        size_t cap = pr->cap_times ? 2 * pr->cap_times : 64;
        lt_measured_op *t = realloc(es->op_times, cap * sizeof *t);
        if (!t) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        es->op_times = t, pr->cap_times = cap;
    }
    int stage;
    size_t idx;
    lt_deps_op_at(&pr->deps, v, &stage, &idx);
    es->op_times[es->n_op_times++] = (lt_measured_op){.dp_rank = pr->r->dp_rank, .stage = stage, .seq = (uint32_t)idx,
                                                      .start_s = start, .finish_s = exec_now() - pr->t0};
    return LT_OK;
}

/* Run pipeline pr->r: its dependency graph, checks, the ops' states and order, then each
 * op this process runs, releasing what no op still reads as it goes. */
static lt_status run_pipeline(pipe_run *pr, lt_error *err) {
    lt_status st = lt_deps_build(&pr->deps, &pr->r->sched, err);
    if (st != LT_OK) {
        lt_error_prefix(err, "step %llu, pipeline %d: ", (unsigned long long)pr->p->step, pr->r->dp_rank);
        return st;
    }
    size_t n = pr->deps.n_ops;
    st = check_ops(pr, err);
    uint32_t *order = malloc((n + 1) * sizeof *order);
    bool *run = calloc(n + 1, sizeof *run);
    if (st == LT_OK && (!order || !run)) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %zu ops", n);
    if (pr->comm) pr->cur_stage = pr->my_stage;
    if (st == LT_OK) st = exec_order(&pr->deps, pr->r, pr->p->step, order, err);
    for (uint32_t v = 0; st == LT_OK && v < n; v++) run[v] = exec_local(pr, v) && !skipped(pr, v);
    if (st == LT_OK) st = exec_ops_setup(pr, run, err);
    if (st == LT_OK && pr->comm) st = exec_chan_build(pr, err);
    if (st == LT_OK) /* readers of each op's buffers here: model-path and activation successors */
        for (uint32_t v = 0; v < n; v++) {
            size_t ns;
            const lt_dep *s = lt_deps_succs(&pr->deps, v, &ns);
            for (size_t k = 0; k < ns; k++) {
                pr->ops[v].refs += (s[k].kind == LT_DEP_PATH || s[k].kind == LT_DEP_ACT) && exec_local(pr, s[k].op);
                pr->ops[v].path_refs += s[k].kind == LT_DEP_PATH && exec_local(pr, s[k].op);
            }
            uint32_t o = exec_local(pr, v) ? exec_shared_acts_of(pr, v) : LT_DEP_NONE; /* (a layer part's) */
            if (o != LT_DEP_NONE) pr->ops[o].refs++;
        }
    /* the K/V rows this process holds, per sample and layer: the largest end of the slices its
     * ops attend over (over processes, a HelixPipe attention stage that runs none of a sample's
     * later slices holds none of their rows; in one process every op is here: the sample) */
    for (uint32_t v = 0; st == LT_OK && pr->comm && v < n; v++) {
        const lt_op *op = pr->deps.op[v];
        if (!exec_local(pr, v) || (op->part != LT_PART_ALL && op->part != LT_PART_ATTN)) continue;
        size_t nsl;
        const lt_slice *sl = lt_schedule_op_slices(&pr->r->sched, op, &nsl);
        for (size_t k = 0; st == LT_OK && k < nsl; k++)
            for (uint32_t l = op->layer_begin; st == LT_OK && l < op->layer_end; l++)
                st = lt_kvctx_bound(pr->kv, sl[k].sample, (int)l, (int)sl[k].end, err);
    }
    pr->last_b = LT_DEP_NONE;
    for (size_t i = 0; st == LT_OK && pr->comm && i < n; i++)
        if (exec_local(pr, order[i]) && pr->deps.op[order[i]]->kind == LT_OP_B) pr->last_b = order[i];
    size_t ns_all = pr->p->n_samples;
    size_t kv_cells = (size_t)pr->m->shape.layers * ns_all;
    pr->kv_last = calloc(kv_cells + 1, sizeof *pr->kv_last);
    if (st == LT_OK && !pr->kv_last) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (size_t i = 0; st == LT_OK && i < kv_cells; i++) pr->kv_last[i] = LT_DEP_NONE;
    /* the op after which a sample's K/V on a stage go: its last B, or without gradients its last F */
    uint8_t frees_kv = pr->grads ? LT_OP_B : LT_OP_F;
    for (size_t i = 0; st == LT_OK && i < n; i++) {
        uint32_t v = order[i];
        if (!run[v] || pr->deps.op[v]->kind != frees_kv) continue;
        size_t nsl;
        const lt_slice *sl = lt_schedule_op_slices(&pr->r->sched, pr->deps.op[v], &nsl);
        for (size_t k = 0; k < nsl; k++)
            for (uint32_t l = pr->deps.op[v]->layer_begin; l < pr->deps.op[v]->layer_end; l++)
                pr->kv_last[(size_t)l * ns_all + (size_t)sl[k].sample] = v;
    }
    for (size_t i = 0; st == LT_OK && i < n; i++) {
        uint32_t v = order[i];
        if (!exec_local(pr, v)) continue;
        if (pr->comm) { /* the receives due now (the next op's too, to overlap with this op); this op's input */
            st = exec_take_recv(pr, v, err);
            if (st != LT_OK) break;
        }
        bool b = pr->deps.op[v]->kind == LT_OP_B;
        if (!run[v]) {
            pr->stats->ops_skipped++;
        } else {
            double start = exec_now() - pr->t0;
            pr->cur_stage = (int)pr->deps.stage[v];
            st = b ? exec_backward(pr, v, err) : exec_forward(pr, v, err);
            pr->stats->ops_run++;
            if (st == LT_OK) st = record_time(pr, v, start, err);
        }
        /* (the sends first: they may pack a sample's dK/dV from the context) */
        if (st == LT_OK && pr->comm) st = exec_send_outputs(pr, v, err);
        if (st == LT_OK && run[v] && pr->deps.op[v]->kind == frees_kv) { /* a sample's last at a layer: its K/V go */
            size_t nsl;
            const lt_op *op = pr->deps.op[v];
            const lt_slice *sl = lt_schedule_op_slices(&pr->r->sched, op, &nsl);
            for (size_t k = 0; k < nsl; k++)
                for (uint32_t l = op->layer_begin; l < op->layer_end; l++)
                    if (pr->kv_last[(size_t)l * ns_all + (size_t)sl[k].sample] == v)
                        (void)lt_kvctx_release(pr->kv, sl[k].sample, (int)l, (int)l + 1);
        }
        /* sends completed by now (their receiver may have run long since: this op waited for
         * its input) release what they read before the drops below look at them */
        if (st == LT_OK && pr->comm) st = exec_poll_sends(pr, false, err);
        size_t np;
        const lt_dep *p = lt_deps_preds(&pr->deps, v, &np);
        bool b_ran = b && run[v];
        for (size_t k = 0; st == LT_OK && k < np; k++) {
            uint32_t f = p[k].op;
            op_state *fo = &pr->ops[f];
            if ((p[k].kind != LT_DEP_PATH && p[k].kind != LT_DEP_ACT) || fo->refs == 0) continue;
            if (p[k].kind == LT_DEP_PATH && fo->path_refs > 0) fo->path_refs--;
            if (--fo->refs == 0) exec_maybe_release(pr, f);
            else if (p[k].kind == LT_DEP_ACT && b_ran) st = exec_drop_consumed(pr, v, f, err); /* another B still reads f */
        }
        uint32_t shared = st == LT_OK ? exec_shared_acts_of(pr, v) : LT_DEP_NONE;
        if (shared != LT_DEP_NONE && pr->ops[shared].refs > 0 && --pr->ops[shared].refs == 0)
            exec_maybe_release(pr, shared);
        if (st == LT_OK) exec_maybe_release(pr, v);
    }
    if (pr->comm) { /* the last sends complete before the buffers go; receives never taken are dropped */
        if (st == LT_OK) st = exec_poll_sends(pr, true, err); /* (after an error the job aborts) */
        exec_transfers_free(pr);
    }
    for (size_t v = 0; pr->ops && v < n; v++) exec_release(pr, (uint32_t)v);
    exec_ops_free(pr);
    free(pr->kv_last), pr->kv_last = NULL;
    free(order), free(run);
    return st;
}

/* ---------------------------------------------------------------- the step */

void lt_exec_stats_free(lt_exec_stats *stats) {
    if (!stats) return;
    free(stats->op_times);
    free(stats->stage_peak_bytes);
    memset(stats, 0, sizeof *stats);
}

/* The pipeline ri of p holds DP rank dp (its first rank, or one of its static CP group). */
static bool holds(const lt_step_plan *p, size_t ri, int dp) {
    const lt_rank_plan *r = &p->ranks[ri];
    return dp >= r->dp_rank && dp < r->dp_rank + (r->cp > 1 ? r->cp : 1);
}

static lt_status exec_step(const lt_llama *m, const lt_step_plan *p, const lt_train_sample *samples,
                           const lt_llama_views *grads, lt_exec_stats *stats, lt_pool *pool, lt_comm *comm,
                           const lt_exec_hooks *eh, lt_error *err) {
    memset(stats, 0, sizeof *stats);
    unsigned long long step = (unsigned long long)p->step;
    if (p->n_samples == 0 || p->n_samples > (size_t)INT_MAX)
        return lt_fail(err, LT_ERR_INPUT, NULL, "step %llu has %zu samples", step, p->n_samples);
    for (size_t i = 0; i < p->n_samples; i++) {
        if (samples[i].len != p->lengths[i])
            return lt_fail(err, LT_ERR_INPUT, NULL, "step %llu, sample %zu: %d tokens read, the plan has %lld", step,
                           i, samples[i].len, (long long)p->lengths[i]);
        stats->tokens += samples[i].len;
    }
    lt_batch b = {.samples = samples, .n_samples = (int)p->n_samples};
    stats->n_predicted = lt_batch_predicted_tokens(&b);
    if (stats->n_predicted != p->n_predicted || p->n_predicted < 1)
        return lt_fail(err, LT_ERR_INPUT, NULL, "step %llu: the samples predict %lld tokens, the plan says %lld", step,
                       (long long)stats->n_predicted, (long long)p->n_predicted);
    for (size_t r = 0; r < p->n_ranks; r++)
        if (p->ranks[r].sched.layers != m->shape.layers || p->ranks[r].sched.stages != p->pp)
            return lt_fail(err, LT_ERR_INPUT, NULL, "step %llu, pipeline %d: %d layers over %d stages, the model has %d "
                           "layers", step, p->ranks[r].dp_rank, p->ranks[r].sched.layers, p->ranks[r].sched.stages,
                           m->shape.layers);
    const lt_comm_layout *lay = comm ? lt_comm_layout_of(comm) : NULL;
    if (lay) {
        lt_status st = lt_dist_check_layout(p, lay, err);
        if (st == LT_OK) st = lt_comm_barrier(comm, err); /* the step starts together (op times share a zero) */
        if (st != LT_OK) return st;
    }
    /* the places each token goes through once: the stages, or HelixPipe's (layer, part) positions */
    bool parts = false;
    for (size_t r = 0; r < p->n_ranks && !parts; r++) parts = lt_schedule_has_parts(&p->ranks[r].sched);
    int n_pos = parts ? 3 * m->shape.layers : p->pp;
    lt_kvctx kv;
    lt_status st = lt_kvctx_init(&kv, m, &b, grads != NULL, err);
    if (st != LT_OK) return st;
    size_t cells = (size_t)n_pos * p->n_samples;
    int64_t *f_tokens = calloc(cells, sizeof *f_tokens), *b_tokens = calloc(cells, sizeof *b_tokens);
    if (!f_tokens || !b_tokens) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    pipe_run pr = {.m = m, .p = p, .b = &b, .grads = grads, .kv = &kv, .pool = pool, .f_tokens = f_tokens,
                   .b_tokens = b_tokens, .stats = stats, .t0 = exec_now(), .comm = comm, .eh = eh, .n_pos = n_pos};
    if (lay) pr.my_dp = lay->dp_rank, pr.my_stage = lay->stage;
    double tp0 = comm ? lt_comm_bytes(comm, LT_COMM_BYTES_TP_ALLGATHER) + lt_comm_bytes(comm, LT_COMM_BYTES_TP_REDUCE_SCATTER)
                      : 0;
    pr.meter = exec_meter(&pr);
    kv.meter = &pr.meter;
    pr.live_stage = calloc((size_t)p->pp, sizeof(size_t));
    pr.peak_stage = calloc((size_t)p->pp, sizeof(size_t));
    stats->stage_peak_bytes = calloc((size_t)p->pp, sizeof(size_t));
    stats->n_stages = p->pp;
    if (st == LT_OK && (!pr.live_stage || !pr.peak_stage || !stats->stage_peak_bytes))
        st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (size_t r = 0; st == LT_OK && r < p->n_ranks; r++) {
        if (lay && !holds(p, r, lay->dp_rank)) continue;
        pr.ri = r, pr.r = &p->ranks[r], pr.live = pr.peak = 0;
        memset(pr.live_stage, 0, (size_t)p->pp * sizeof(size_t));
        memset(pr.peak_stage, 0, (size_t)p->pp * sizeof(size_t));
        st = run_pipeline(&pr, err);
        if (pr.peak > stats->act_bytes_peak) stats->act_bytes_peak = pr.peak;
        for (int g = 0; g < p->pp; g++)
            if (pr.peak_stage[g] > stats->stage_peak_bytes[g]) stats->stage_peak_bytes[g] = pr.peak_stage[g];
    }
    kv.meter = NULL; /* what is left (after an error) is freed uncounted */
    free(pr.live_stage), free(pr.peak_stage);
    if (lay && st == LT_OK) { /* the step's totals over every rank */
        double *peaks = calloc((size_t)p->pp + 1, sizeof *peaks);
        if (!peaks) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        for (int g = 0; peaks && g < p->pp; g++) peaks[g] = (double)stats->stage_peak_bytes[g];
        if (peaks) peaks[p->pp] = (double)stats->act_bytes_peak;
        if (st == LT_OK) st = lt_comm_allreduce(comm, LT_COMM_WORLD, peaks, (size_t)p->pp + 1, LT_COMM_F64, true, err);
        for (int g = 0; st == LT_OK && g < p->pp; g++) stats->stage_peak_bytes[g] = (size_t)peaks[g];
        if (st == LT_OK) stats->act_bytes_peak = (size_t)peaks[p->pp];
        free(peaks);
        if (lay->tp_rank > 0) { /* a TP group runs each op once: its rank 0 counts it */
            memset(f_tokens, 0, cells * sizeof *f_tokens), memset(b_tokens, 0, cells * sizeof *b_tokens);
            stats->loss_sum = 0;
        }
        if (st == LT_OK) st = lt_comm_allreduce(comm, LT_COMM_WORLD, f_tokens, cells, LT_COMM_I64, false, err);
        if (st == LT_OK) st = lt_comm_allreduce(comm, LT_COMM_WORLD, b_tokens, cells, LT_COMM_I64, false, err);
        if (st == LT_OK) st = lt_comm_allreduce(comm, LT_COMM_WORLD, &stats->loss_sum, 1, LT_COMM_F64, false, err);
    }
    /* every token once forward and once backward on every stage (DESIGN.md "Lossless"); without
     * gradients once forward and never backward */
    static const char *const part_names[3] = {"pre-attention", "attention", "post-attention"};
    for (size_t c = 0; st == LT_OK && c < cells; c++) {
        size_t i = c % p->n_samples;
        int at = (int)(c / p->n_samples);
        char where[64];
        if (parts) snprintf(where, sizeof where, "layer %d's %s", at / 3, part_names[at % 3]);
        else snprintf(where, sizeof where, "stage %d", at);
        if (f_tokens[c] != p->lengths[i] || b_tokens[c] != (grads ? p->lengths[i] : 0))
            st = lt_fail(err, LT_ERR_INPUT, NULL, "step %llu, sample %zu (%lld tokens), %s: %lld tokens forwarded "
                         "and %lld backwarded, not each token once%s", step, i, (long long)p->lengths[i], where,
                         (long long)f_tokens[c], (long long)b_tokens[c], grads ? "" : " forward");
    }
    stats->seconds = exec_now() - pr.t0;
    if (comm)
        stats->tp_bytes = lt_comm_bytes(comm, LT_COMM_BYTES_TP_ALLGATHER) +
                          lt_comm_bytes(comm, LT_COMM_BYTES_TP_REDUCE_SCATTER) - tp0;
    lt_deps_free(&pr.deps);
    free(f_tokens), free(b_tokens);
    lt_kvctx_free(&kv);
    return st;
}

lt_status lt_exec_step(const lt_llama *m, const lt_step_plan *p, const lt_train_sample *samples,
                       const lt_llama_views *grads, lt_exec_stats *stats, lt_pool *pool, lt_error *err) {
    return exec_step(m, p, samples, grads, stats, pool, NULL, NULL, err);
}

lt_status lt_exec_step_rank(const lt_llama *m, const lt_step_plan *p, const lt_train_sample *samples,
                            const lt_llama_views *grads, lt_exec_stats *stats, lt_pool *pool, lt_comm *comm,
                            const lt_exec_hooks *hooks, lt_error *err) {
    return exec_step(m, p, samples, grads, stats, pool, comm, hooks, err);
}
