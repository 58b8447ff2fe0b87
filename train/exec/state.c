/*
 * train/exec/state.c — what each op of a pipeline holds, and the memory count
 * (train/exec/internal.h).
 *
 * Buffers are reference counted by the edges that read them: an F's activations by its
 * model-path and activation successors, a B's input gradient by its model-path successor;
 * each is freed once the last of them has run, so the activations held at once are what
 * the schedule keeps. In an asymmetric schedule (SlimPack 4.1.2) several backward units
 * take rows of one forward unit: after each, the rows it took leave the forward's buffers
 * (kept_rows, lt_acts_keep_rows), so what is held is what the simulator prices
 * (plans/schedule/sim.c frees an F's share at each backward that takes it).
 *
 * The memory each stage holds is counted as it is allocated and freed (exec_track,
 * exec_untrack: the measured peak, lt_exec_stats.stage_peak_bytes): the buffers the
 * executor makes where it makes them, the K/V context and every pass's working memory
 * through an lt_meter (train/model/model.h) that they report to.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train/exec/internal.h"

const char *exec_kind_name(uint8_t k) { return k == LT_OP_F ? "F" : k == LT_OP_FK ? "FK" : "B"; }

lt_status exec_op_error(pipe_run *pr, uint32_t v, lt_error *err, const char *what) {
    int stage;
    size_t idx;
    lt_deps_op_at(&pr->deps, v, &stage, &idx);
    return lt_fail(err, LT_ERR_INPUT, NULL, "step %llu, pipeline %d, stage %d, op %zu (%s of unit %u): %s",
                   (unsigned long long)pr->p->step, pr->r->dp_rank, stage, idx, exec_kind_name(pr->deps.op[v]->kind),
                   pr->deps.op[v]->unit, what);
}

int exec_recompute_of(const lt_op *op) {
    if (op->kind == LT_OP_FK) return 0;
    int n = (int)(op->layer_end - op->layer_begin);
    return op->recompute_layers < n ? op->recompute_layers : n;
}

uint32_t exec_pred_of_kind(const lt_deps *d, uint32_t v, lt_dep_kind kind) {
    size_t n;
    const lt_dep *p = lt_deps_preds(d, v, &n);
    for (size_t k = 0; k < n; k++)
        if (p[k].kind == kind) return p[k].op;
    return LT_DEP_NONE;
}

bool exec_local(const pipe_run *pr, uint32_t v) { return !pr->comm || (int)pr->deps.stage[v] == pr->my_stage; }

double exec_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void exec_track(pipe_run *pr, size_t bytes) {
    pr->live += bytes;
    pr->peak = pr->live > pr->peak ? pr->live : pr->peak;
    size_t *l = &pr->live_stage[pr->cur_stage];
    *l += bytes;
    if (*l > pr->peak_stage[pr->cur_stage]) pr->peak_stage[pr->cur_stage] = *l;
}

void exec_untrack(pipe_run *pr, size_t bytes, int stage) {
    if (pr->comm) stage = pr->my_stage; /* a received buffer of another stage's op is held here */
    pr->live -= bytes;
    pr->live_stage[stage] -= bytes;
}

static void meter_add(void *ctx, size_t bytes) { exec_track(ctx, bytes); }

static void meter_sub(void *ctx, size_t bytes) {
    pipe_run *pr = ctx;
    exec_untrack(pr, bytes, pr->cur_stage);
}

lt_meter exec_meter(pipe_run *pr) { return (lt_meter){.ctx = pr, .add = meter_add, .sub = meter_sub}; }

lt_status exec_final_layer(void *ctx, int layer, lt_error *err) {
    const pipe_run *pr = ctx;
    return pr->eh->grads_final(pr->eh->ctx, layer, err);
}

void exec_count_tokens(pipe_run *pr, int64_t *counts, int at, const lt_train_unit *u, int n) {
    for (int g = 0; g < n; g++)
        for (int i = 0; i < u[g].n_slices; i++)
            counts[(size_t)at * pr->p->n_samples + (size_t)u[g].slices[i].sample] +=
                u[g].slices[i].end - u[g].slices[i].begin;
}

int exec_place_of(const pipe_run *pr, uint32_t v) {
    const lt_op *op = pr->deps.op[v];
    if (op->part == LT_PART_ALL) return (int)pr->deps.stage[v];
    return 3 * (int)op->layer_begin + (int)op->part - 1;
}

static void kept_free(kept_rows *k) {
    free(k->at), free(k->taken);
    memset(k, 0, sizeof *k);
}

void exec_release(pipe_run *pr, uint32_t v) {
    op_state *o = &pr->ops[v];
    const lt_backend *be = exec_be(pr);
    int stage = (int)pr->deps.stage[v];
    for (int g = 0; o->acts && o->din && o->x_in && o->x_bytes && o->kept && g < o->G; g++) {
        if (o->acts[g].T > 0 || o->acts[g].bytes > 0) {
            exec_untrack(pr, o->acts[g].bytes, stage);
            lt_acts_free(&o->acts[g]);
            memset(&o->acts[g], 0, sizeof o->acts[g]);
        }
        be->free(be, o->din[g]);
        o->din[g] = NULL;
        if (o->x_in[g]) exec_untrack(pr, o->x_bytes[g], stage);
        be->free(be, o->x_in[g]);
        o->x_in[g] = NULL, o->x_bytes[g] = 0;
        kept_free(&o->kept[g]);
    }
    if (o->din_bytes) exec_untrack(pr, o->din_bytes, stage);
    o->din_bytes = 0;
    if (o->rx) exec_untrack(pr, o->rx_bytes, stage), be->free(be, o->rx);
    if (o->tx) exec_untrack(pr, o->tx_bytes, stage), be->free(be, o->tx);
    if (o->wqkv) exec_untrack(pr, o->wqkv_bytes, stage), be->free(be, o->wqkv);
    o->wqkv = NULL, o->wqkv_bytes = 0;
    o->rx = o->tx = NULL, o->rx_bytes = o->tx_bytes = 0; /* (o->pg is not the op's readers' but its layer's pre-attention B's to free) */
}

/* ---------------------------------------------------------------- rows a backward consumed */

/* Mark the rows of fu (a member's shard of an F op) that B op v's unit holds as taken (k:
 * the member's kept rows, set up at the first call). */
static lt_status mark_taken(pipe_run *pr, uint32_t v, const lt_train_unit *fu, kept_rows *k, lt_error *err) {
    int T = lt_unit_tokens(fu);
    if (!k->taken) {
        k->T0 = T;
        k->taken = calloc((size_t)T + 1, sizeof *k->taken);
        k->at = malloc(((size_t)T + 1) * sizeof *k->at);
        if (!k->taken || !k->at) {
            kept_free(k);
            return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        }
        for (int r = 0; r < T; r++) k->at[r] = r;
    }
    size_t nb;
    const lt_slice *bs = lt_schedule_op_slices(&pr->r->sched, pr->deps.op[v], &nb);
    int row = 0;
    for (int i = 0; i < fu->n_slices; row += fu->slices[i].end - fu->slices[i].begin, i++) {
        const lt_train_slice *fs = &fu->slices[i];
        for (size_t j = 0; j < nb; j++) {
            if (bs[j].sample != fs->sample) continue;
            int lo = fs->begin > (int)bs[j].begin ? fs->begin : (int)bs[j].begin;
            int hi = fs->end < (int)bs[j].end ? fs->end : (int)bs[j].end;
            for (int t = lo; t < hi; t++) k->taken[row + (t - fs->begin)] = true;
        }
    }
    return LT_OK;
}

/* Drop the rows marked taken from a (and from its kept input x, [Tl, C], when there is one,
 * *x_bytes its size): they move out and the buffers shrink (lt_acts_keep_rows). */
static lt_status drop_taken_rows(pipe_run *pr, int stage, kept_rows *k, lt_acts *a, float **x, size_t *x_bytes,
                                 lt_error *err) {
    int *rows = malloc(((size_t)k->T0 + 1) * sizeof *rows), n = 0;
    if (!rows) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int r = 0; r < k->T0; r++)
        if (!k->taken[r] && k->at[r] >= 0) rows[n++] = k->at[r];
    lt_status st = LT_OK;
    if (n > 0 && n < a->T) {
        /* the kept input holds the SP rows ([Tl, C]): the kept ones' places there, before
         * the split changes (xs[j]: the j-th kept SP row's old place, in order) */
        int *xs = malloc(((size_t)n + 1) * sizeof *xs), nx = 0;
        if (!xs) {
            free(rows);
            return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        }
        for (int i = 0; i < n; i++)
            if (lt_acts_sp_row(a, rows[i]) >= 0) xs[nx++] = lt_acts_sp_row(a, rows[i]);
        size_t before = a->bytes;
        st = lt_acts_keep_rows(a, rows, n, pr->m, err);
        exec_untrack(pr, before - a->bytes, stage);
        const lt_backend *be = exec_be(pr);
        size_t row = (size_t)pr->m->shape.hidden * be->act_bytes;
        if (st == LT_OK && *x) {
            for (int i = 0; i < nx; i++) be->copy(be, (char *)*x + (size_t)i * row, (char *)*x + (size_t)xs[i] * row, row);
            /* a smaller block on the host (the allocator keeps it in place); a device buffer
             * is kept whole (its rows beyond n unused until it is freed) */
            float *smaller = be->host && nx > 0 ? realloc(*x, (size_t)nx * row) : NULL;
            if (smaller) {
                *x = smaller;
                exec_untrack(pr, *x_bytes - (size_t)nx * row, stage);
                *x_bytes = (size_t)nx * row;
            }
        }
        free(xs);
        for (int r = 0, j = 0; st == LT_OK && r < k->T0; r++) k->at[r] = !k->taken[r] && k->at[r] >= 0 ? j++ : -1;
    }
    free(rows);
    return st;
}

/* The rows are dropped at once unless the next stage still reads f's output (a model-path
 * reader to run, a send in flight): then at the next drop, or with the rest when f is
 * released. */
lt_status exec_drop_consumed(pipe_run *pr, uint32_t v, uint32_t f, lt_error *err) {
    bool now = pr->ops[f].path_refs == 0 && !(pr->sends_of && pr->sends_of[f] > 0);
    op_state *o = &pr->ops[f];
    int stage = (int)pr->deps.stage[f];
    lt_status st = LT_OK;
    for (int h = 0; st == LT_OK && h < o->G; h++) {
        if (o->acts[h].T == 0) continue; /* another process's member, or an empty shard */
        st = mark_taken(pr, v, &o->u[h], &o->kept[h], err);
        if (st == LT_OK && now)
            st = drop_taken_rows(pr, stage, &o->kept[h], &o->acts[h], &o->x_in[h], &o->x_bytes[h], err);
    }
    return st;
}
