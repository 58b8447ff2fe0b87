/*
 * train/exec/exec.c — one step of a plan, every pipeline and stage in this process
 * (train/exec/exec.h).
 *
 * Per pipeline: the dependency graph of its schedule (plans/schedule/deps.h), an execution order
 * (Kahn's algorithm, ready ops by predicted start), then the ops. Buffers are reference
 * counted by the edges that read them: an F's activations by its model-path and activation
 * successors, a B's input gradient by its model-path successor; each is freed once the
 * last of them has run, so the activations held at once are what the schedule keeps. In an
 * asymmetric schedule (SlimPack 4.1.2) several backward units take rows of one forward
 * unit: after each, the rows it took leave the forward's buffers (kept_rows,
 * lt_acts_keep_rows), and a backward unit copies its rows one layer at a time, just before
 * that layer's backward (lt_acts_alloc_window): what is held is what the simulator prices
 * (plans/schedule/sim.c frees an F's share at each backward that takes it; plans/cost/cost.c prices such
 * a backward's working memory as two layers of its tokens: the window and the gradients).
 *
 * The memory each stage holds is counted as it is allocated and freed (track, untrack: the
 * measured peak, lt_exec_stats.stage_peak_bytes): the buffers made here (activations, kept
 * inputs, windows, input gradients, receive and exchange buffers) where they are made, the
 * K/V context and every pass's working memory (scratch, the fused head's logits block)
 * through an lt_meter (train/model/model.h) that they report to.
 */
#include "train/exec/exec.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plans/schedule/deps.h"     /* lt_deps_build, lt_deps_preds, lt_deps_succs */
#include "plans/schedule/schedule.h" /* lt_schedule_op_slices, lt_op */
#include "train/model/backend.h"  /* lt_backend: where the model's activations live, their element size */
#include "train/dist/comm.h"     /* lt_comm: the distributed engine's transfers */

/* ---------------------------------------------------------------- order */

typedef struct {
    uint32_t *id;
    size_t n;
    const lt_plan_op *pred; /* predicted times: the heap key */
} op_heap;

static bool before(const op_heap *h, uint32_t a, uint32_t b) {
    double sa = h->pred[a].start_s, sb = h->pred[b].start_s;
    return sa < sb || (sa == sb && a < b);
}

static void heap_push(op_heap *h, uint32_t v) {
    size_t i = h->n++;
    h->id[i] = v;
    while (i > 0 && before(h, h->id[i], h->id[(i - 1) / 2])) {
        uint32_t t = h->id[i];
        h->id[i] = h->id[(i - 1) / 2], h->id[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static uint32_t heap_pop(op_heap *h) {
    uint32_t top = h->id[0];
    h->id[0] = h->id[--h->n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && before(h, h->id[l], h->id[m])) m = l;
        if (r < h->n && before(h, h->id[r], h->id[m])) m = r;
        if (m == i) break;
        uint32_t t = h->id[i];
        h->id[i] = h->id[m], h->id[m] = t;
        i = m;
    }
    return top;
}

static const char *kind_name(uint8_t k) { return k == LT_OP_F ? "F" : k == LT_OP_FK ? "FK" : "B"; }

/* order[0..n_ops): every op after its predecessors (ready ops by predicted start). A cycle
 * is LT_ERR_INPUT naming an op that cannot run and one predecessor it waits for. */
static lt_status exec_order(const lt_deps *d, const lt_rank_plan *r, uint64_t step, uint32_t *order, lt_error *err) {
    size_t n = d->n_ops;
    uint32_t *indeg = malloc((n + 1) * sizeof *indeg);
    op_heap h = {.id = malloc((n + 1) * sizeof(uint32_t)), .n = 0, .pred = r->ops};
    if (!indeg || !h.id) {
        free(indeg), free(h.id);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory ordering %zu ops", n);
    }
    for (size_t v = 0; v < n; v++) {
        indeg[v] = d->pred_off[v + 1] - d->pred_off[v];
        if (indeg[v] == 0) heap_push(&h, (uint32_t)v);
    }
    size_t done = 0;
    while (h.n > 0) {
        uint32_t v = heap_pop(&h);
        order[done++] = v;
        size_t ns;
        const lt_dep *s = lt_deps_succs(d, v, &ns);
        for (size_t k = 0; k < ns; k++)
            if (--indeg[s[k].op] == 0) heap_push(&h, s[k].op);
    }
    lt_status st = LT_OK;
    if (done < n) {
        for (size_t v = 0; v < n; v++) {
            if (indeg[v] == 0) continue;
            int stage;
            size_t idx;
            lt_deps_op_at(d, v, &stage, &idx);
            size_t np;
            const lt_dep *p = lt_deps_preds(d, v, &np);
            size_t k = 0;
            while (k + 1 < np && indeg[p[k].op] == 0) k++;
            st = lt_fail(err, LT_ERR_INPUT, NULL,
                         "step %llu, pipeline %d, stage %d, op %zu (%s of unit %u): the ops deadlock: it waits for "
                         "stage %u op %u (%s), which waits in turn (%zu of %zu ops can run)",
                         (unsigned long long)step, r->dp_rank, stage, idx, kind_name(d->op[v]->kind),
                         d->op[v]->unit, (unsigned)p[k].stage, (unsigned)p[k].index,
                         lt_dep_kind_name((lt_dep_kind)p[k].kind), done, n);
            break;
        }
    }
    free(indeg), free(h.id);
    return st;
}

/* ---------------------------------------------------------------- one pipeline */

/* The rows an F op still holds, where several backward units take them (an asymmetric
 * schedule, SlimPack 4.1.2): after each such backward the rows it took are dropped from the
 * F's buffers (lt_acts_keep_rows), so what is held is what the backward units still to run
 * need (DESIGN.md "Trainer engine": activations per slice, not per unit). */
typedef struct kept_rows {
    int T0;      /* rows the forward made */
    int *at;     /* [T0] where row r of the forward's unit is now, -1 once dropped; NULL: all in place */
    bool *taken; /* [T0] a backward that read it has run */
} kept_rows;

static void kept_free(kept_rows *k) {
    free(k->at), free(k->taken);
    memset(k, 0, sizeof *k);
}

/* Row r of the forward's unit in its buffers now (-1: dropped). */
static int row_now(const kept_rows *k, int r) { return k && k->at ? k->at[r] : r; }

typedef struct {
    const lt_llama *m;
    const lt_step_plan *p;
    const lt_batch *b;
    const lt_llama_views *grads;
    lt_kvctx *kv;
    lt_pool *pool;
    size_t ri; /* the pipeline: index into p->ranks */
    const lt_rank_plan *r;
    lt_deps deps;
    lt_acts *acts;   /* [n_ops] forward ops: what they kept (T = 0: none) */
    lt_acts **gacts; /* [n_ops] forward ops of a context-parallel group: one set per member */
    float ***gdin;   /* [n_ops] B ops of a group with layer_begin > 0: per member */
    float ***gxin;   /* [n_ops] F ops of a group with recompute, not on the first stage: each
                        member's kept input */
    size_t **gxin_bytes;
    int *gsize;      /* [n_ops] the group size of gacts[v] / gdin[v] */
    float **din;     /* [n_ops] B ops with layer_begin > 0: the gradient of their input */
    size_t *din_bytes; /* [n_ops] bytes of din[v], or of gdin[v]'s members held here */
    float **x_in;    /* [n_ops] F ops with recompute over a range not starting at layer 0: the
                        input [T, C] of their first (recomputed) layer, all they keep of it */
    uint32_t *refs;  /* [n_ops] readers still to run of acts[v] / din[v] / x_in[v] */
    uint32_t *path_refs; /* [n_ops] ... of them, the model-path readers (the next stage's op) */
    kept_rows *kept;     /* [n_ops] F ops: which rows of acts[v] / x_in[v] are still held */
    kept_rows **gkept;   /* [n_ops] group F ops: the same per member of gacts[v] / gxin[v] */
    int *acts_T;     /* [n_ops] rows of x_in[v] */
    size_t live, peak;               /* bytes held now and at most (track, untrack) */
    size_t *live_stage, *peak_stage; /* [pp] the same per stage of the pipeline */
    int cur_stage;                   /* the stage of the op running */
    lt_meter meter;                  /* the KV context's and the passes' allocations into live */
    int64_t *f_tokens, *b_tokens; /* [pp x n_samples] tokens through each stage, per sample */
    lt_exec_stats *stats;
    double t0;               /* the step's start (now_s) */
    size_t cap_times;
    lt_train_slice *tslices; /* scratch: an op's unit as train slices */
    size_t cap_tslices;
    /* the distributed engine (comm != NULL): this process runs the ops of one stage of one
     * pipeline; model-path edges between stages are transfers */
    lt_comm *comm;
    int my_dp, my_stage;
    lt_comm_req **recv_req;  /* [n_ops] local op v: the receive of its p2p input, once posted */
    float **recv_buf;        /* [n_ops] ... into this buffer (backend memory) */
    size_t *recv_bytes;      /* [n_ops] its bytes once posted (SIZE_MAX: nothing comes); 0: not yet */
    uint32_t *sends_of;      /* [n_ops] sends still reading op v's buffers */
    struct pending_send { uint32_t v; lt_comm_req *req; } *sends;
    size_t n_sends, cap_sends;
    /* the stage channels' receive order (train/dist/comm.h: a channel's transfers match in
     * posting order): chan[t][0..chan_n[t]) the local ops that receive from stage t, in the
     * order stage t sends; chan_next[t] the first not yet posted */
    uint32_t **chan;
    size_t *chan_n, *chan_next;
    uint32_t *kv_last;       /* [pp x n_samples] the last B op over a sample on a stage: after
                                it the sample's K/V context of the stage's layers is freed */
    const lt_exec_hooks *eh; /* distributed: told when a layer's gradients are final */
    uint32_t last_b;         /* ... after this op (the stage's last B), or LT_DEP_NONE */
} pipe_run;

/* The model's backend (train/model/backend.h): the inputs, input gradients and transfers the
 * executor keeps are its buffers, of its element size (4: the CPU fp32 reference, where
 * its alloc/free/copy are calloc/free/memcpy). Transfers and the context-parallel
 * exchanges move them where they live (NCCL for device memory, MPI for host memory), in
 * the backend's bytes; dK/dV are summed by the backend (sum_blocks). */
static const lt_backend *be_of(const pipe_run *pr) { return lt_backend_of(pr->m); }
static size_t act_es(const pipe_run *pr) { return be_of(pr)->act_bytes; }

/* lt_cp_hooks.layer_done of the stage's last B op: the layer's gradients are final. */
static lt_status final_layer(void *ctx, int layer, lt_error *err) {
    const pipe_run *pr = ctx;
    return pr->eh->grads_final(pr->eh->ctx, layer, err);
}

/* Does this process run op v? (every op without the distributed engine) */
static bool local(const pipe_run *pr, uint32_t v) { return !pr->comm || (int)pr->deps.stage[v] == pr->my_stage; }

/* Op v's unit as a train unit (into pr->tslices). */
static lt_status unit_of(pipe_run *pr, const lt_op *op, lt_train_unit *u, lt_error *err) {
    size_t n;
    const lt_slice *sl = lt_schedule_op_slices(&pr->r->sched, op, &n);
    if (n > pr->cap_tslices) {
        lt_train_slice *t = realloc(pr->tslices, n * sizeof *t);
        if (!t) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a %zu-slice unit", n);
        pr->tslices = t, pr->cap_tslices = n;
    }
    for (size_t i = 0; i < n; i++)
        pr->tslices[i] = (lt_train_slice){.sample = sl[i].sample, .begin = (int)sl[i].begin, .end = (int)sl[i].end};
    u->slices = pr->tslices;
    u->n_slices = (int)n;
    return LT_OK;
}

static void count_tokens(pipe_run *pr, int64_t *counts, int stage, const lt_train_unit *u) {
    for (int i = 0; i < u->n_slices; i++)
        counts[(size_t)stage * pr->p->n_samples + (size_t)u->slices[i].sample] += u->slices[i].end - u->slices[i].begin;
}

static void untrack(pipe_run *pr, size_t bytes, int stage);

static void release(pipe_run *pr, uint32_t v) {
    for (int g = 0; pr->gacts[v] && g < pr->gsize[v]; g++) {
        untrack(pr, pr->gacts[v][g].bytes, (int)pr->deps.stage[v]);
        lt_acts_free(&pr->gacts[v][g]);
    }
    for (int g = 0; pr->gdin[v] && g < pr->gsize[v]; g++) be_of(pr)->free(be_of(pr), pr->gdin[v][g]);
    if (pr->din_bytes[v]) untrack(pr, pr->din_bytes[v], (int)pr->deps.stage[v]);
    pr->din_bytes[v] = 0;
    free(pr->gacts[v]), free(pr->gdin[v]);
    pr->gacts[v] = NULL, pr->gdin[v] = NULL;
    if (pr->acts[v].T > 0) {
        untrack(pr, pr->acts[v].bytes, (int)pr->deps.stage[v]);
        lt_acts_free(&pr->acts[v]);
        memset(&pr->acts[v], 0, sizeof pr->acts[v]);
    }
    be_of(pr)->free(be_of(pr), pr->din[v]);
    pr->din[v] = NULL;
    if (pr->x_in[v]) untrack(pr, (size_t)pr->acts_T[v] * (size_t)pr->m->shape.hidden * act_es(pr), (int)pr->deps.stage[v]);
    for (int g = 0; pr->gxin[v] && g < pr->gsize[v]; g++) {
        if (pr->gxin[v][g]) untrack(pr, pr->gxin_bytes[v][g], (int)pr->deps.stage[v]);
        be_of(pr)->free(be_of(pr), pr->gxin[v][g]);
    }
    free(pr->gxin[v]), free(pr->gxin_bytes[v]);
    pr->gxin[v] = NULL, pr->gxin_bytes[v] = NULL;
    be_of(pr)->free(be_of(pr), pr->x_in[v]);
    pr->x_in[v] = NULL;
    kept_free(&pr->kept[v]);
    for (int g = 0; pr->gkept[v] && g < pr->gsize[v]; g++) kept_free(&pr->gkept[v][g]);
    free(pr->gkept[v]);
    pr->gkept[v] = NULL;
}

/* The peer of v's first predecessor edge of `kind`, or LT_DEP_NONE. */
static uint32_t pred_of_kind(const lt_deps *d, uint32_t v, lt_dep_kind kind) {
    size_t n;
    const lt_dep *p = lt_deps_preds(d, v, &n);
    for (size_t k = 0; k < n; k++)
        if (p[k].kind == kind) return p[k].op;
    return LT_DEP_NONE;
}

static lt_status op_error(pipe_run *pr, uint32_t v, lt_error *err, const char *what) {
    int stage;
    size_t idx;
    lt_deps_op_at(&pr->deps, v, &stage, &idx);
    return lt_fail(err, LT_ERR_INPUT, NULL, "step %llu, pipeline %d, stage %d, op %zu (%s of unit %u): %s",
                   (unsigned long long)pr->p->step, pr->r->dp_rank, stage, idx, kind_name(pr->deps.op[v]->kind),
                   pr->deps.op[v]->unit, what);
}

/* The recomputed layers of op v: its recompute_layers, at most its range (FK: none). */
static int recompute_of(const lt_op *op) {
    if (op->kind == LT_OP_FK) return 0;
    int n = (int)(op->layer_end - op->layer_begin);
    return op->recompute_layers < n ? op->recompute_layers : n;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Bytes the running op's stage starts / stops holding. */
static void track(pipe_run *pr, size_t bytes) {
    pr->live += bytes;
    pr->peak = pr->live > pr->peak ? pr->live : pr->peak;
    size_t *l = &pr->live_stage[pr->cur_stage];
    *l += bytes;
    if (*l > pr->peak_stage[pr->cur_stage]) pr->peak_stage[pr->cur_stage] = *l;
}

static void untrack(pipe_run *pr, size_t bytes, int stage) {
    if (pr->comm) stage = pr->my_stage; /* a received buffer of another stage's op is held here */
    pr->live -= bytes;
    pr->live_stage[stage] -= bytes;
}

/* lt_meter: what the KV context and the passes allocate, at the moment they do, counted
 * on the running op's stage. */
static void meter_add(void *ctx, size_t bytes) { track(ctx, bytes); }

static void meter_sub(void *ctx, size_t bytes) {
    pipe_run *pr = ctx;
    untrack(pr, bytes, pr->cur_stage);
}

/* Forward of a unit through pass `pass` into new activations *a (input `in`), counted from
 * their allocation on. */
static lt_status forward_pass(pipe_run *pr, const lt_pass *pass, const lt_train_unit *u, const float *in, lt_acts *a,
                              double *loss, lt_error *err) {
    lt_status st = lt_acts_alloc(a, pr->m, pr->b, u, pass->l0, pass->l1, pass->head, err);
    if (st == LT_OK) track(pr, a->bytes);
    if (st == LT_OK) st = lt_llama_forward(pr->m, pass, pr->b, u, in, pr->kv, a, pr->grads, loss, NULL, pr->pool, err);
    return st;
}

/* F or FK op v. With R = recompute_of(op) > 0 (plans/strategies/plan.h: the first R layers of the
 * op's range), those layers run with scratch activations and only their input is kept
 * (x_in[v]; nothing on the first stage, whose input is the token ids); the other layers
 * keep their activations in acts[v] as without recompute. */
static lt_status run_forward(pipe_run *pr, uint32_t v, lt_error *err) {
    const lt_op *op = pr->deps.op[v];
    int stage = (int)pr->deps.stage[v], layers = pr->m->shape.layers;
    lt_train_unit u;
    lt_status st = unit_of(pr, op, &u, err);
    if (st != LT_OK) return st;
    bool with_loss = op->kind == LT_OP_F;
    int l0 = (int)op->layer_begin, l1 = (int)op->layer_end, R = recompute_of(op);
    const float *in = NULL;
    if (l0 > 0) {
        uint32_t from = pred_of_kind(&pr->deps, v, LT_DEP_PATH);
        if (from == LT_DEP_NONE || pr->acts[from].T == 0) return op_error(pr, v, err, "no input from the stage before");
        in = pr->acts[from].out;
    }
    lt_acts scratch = {0};
    if (R > 0) { /* the recomputed layers: their input kept, their activations dropped */
        int T = lt_unit_tokens(&u);
        if (in) {
            const lt_backend *be = be_of(pr);
            size_t bytes = (size_t)T * (size_t)pr->m->shape.hidden * be->act_bytes;
            if (!(pr->x_in[v] = be->alloc(be, bytes, false))) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
            be->copy(be, pr->x_in[v], in, bytes);
            pr->acts_T[v] = T;
            track(pr, bytes);
        }
        lt_pass pa = {.l0 = l0, .l1 = l0 + R, .embed = l0 == 0, .meter = &pr->meter};
        st = forward_pass(pr, &pa, &u, in, &scratch, NULL, err);
        in = scratch.out;
    }
    lt_pass pass = {.l0 = l0 + R, .l1 = l1, .embed = l0 + R == 0, .head = l1 == layers && with_loss,
                    .meter = &pr->meter};
    pass.loss_scale = pass.head ? (float)(1.0 / (double)pr->p->n_predicted) : 0.0f;
    double loss = 0;
    if (st == LT_OK) st = forward_pass(pr, &pass, &u, in, &pr->acts[v], &loss, err);
    if (scratch.T > 0) untrack(pr, scratch.bytes, pr->cur_stage);
    lt_acts_free(&scratch);
    if (st != LT_OK) return st;
    if (pass.head) pr->stats->loss_sum += loss;
    if (with_loss) count_tokens(pr, pr->f_tokens, stage, &u);
    return LT_OK;
}

/* For each row of B op v's unit (an asymmetric schedule's backward unit), the F op and the
 * row there holding the same token now (kept_rows): from the forward units its LT_DEP_ACT
 * edges name. */
static lt_status map_rows(pipe_run *pr, uint32_t v, const lt_train_unit *u, uint32_t *src_op, int *src_row,
                          lt_error *err) {
    size_t np;
    const lt_dep *p = lt_deps_preds(&pr->deps, v, &np);
    int row0 = 0, filled = 0;
    for (int i = 0; i < u->n_slices; i++) {
        const lt_train_slice *bs = &u->slices[i];
        for (size_t k = 0; k < np; k++) {
            if (p[k].kind != LT_DEP_ACT) continue;
            size_t nf;
            const lt_slice *fs = lt_schedule_op_slices(&pr->r->sched, pr->deps.op[p[k].op], &nf);
            int frow = 0;
            for (size_t j = 0; j < nf; frow += (int)(fs[j].end - fs[j].begin), j++) {
                if (fs[j].sample != bs->sample) continue;
                int lo = bs->begin > fs[j].begin ? bs->begin : (int)fs[j].begin;
                int hi = bs->end < fs[j].end ? bs->end : (int)fs[j].end;
                for (int t = lo; t < hi; t++, filled++) {
                    src_op[row0 + (t - bs->begin)] = p[k].op;
                    src_row[row0 + (t - bs->begin)] = row_now(&pr->kept[p[k].op], frow + (t - (int)fs[j].begin));
                }
            }
        }
        row0 += bs->end - bs->begin;
    }
    if (filled != row0) return op_error(pr, v, err, "some of its tokens were not forwarded on its stage");
    return LT_OK;
}

/* What B op v needs from the forward, for its unit u. The same unit as its F: *a, the F's
 * activations of layers [l0 + R, l1), and for R > 0 the F's kept input of layer l0 in *x
 * (NULL on the first stage). An asymmetric unit: *a = NULL, and where each of its rows is
 * now (*src_op, *src_row: new arrays, see map_rows) for gathering them per layer, and the
 * kept input's rows gathered into *x (*x_owned). */
static lt_status forward_state(pipe_run *pr, uint32_t v, const lt_train_unit *u, int R, lt_acts **a,
                               uint32_t **src_op, int **src_row, float **x, bool *x_owned, lt_error *err) {
    const lt_op *op = pr->deps.op[v];
    int l0 = (int)op->layer_begin, C = pr->m->shape.hidden;
    *a = NULL, *x = NULL, *x_owned = false, *src_op = NULL, *src_row = NULL;
    if (!pr->r->sched.asym) {
        uint32_t f = pr->deps.act_of[v];
        if (f == LT_DEP_NONE || pr->acts[f].T == 0) return op_error(pr, v, err, "no activations of its forward");
        if (recompute_of(pr->deps.op[f]) != R)
            return op_error(pr, v, err, "recomputes another number of layers than its forward kept");
        *a = &pr->acts[f];
        if (R > 0 && l0 > 0) {
            if (!pr->x_in[f]) return op_error(pr, v, err, "its forward kept no input to recompute from");
            *x = pr->x_in[f];
        }
        return LT_OK;
    }
    int T = lt_unit_tokens(u);
    uint32_t *so = *src_op = malloc((size_t)T * sizeof *so);
    int *sr = *src_row = malloc((size_t)T * sizeof *sr);
    lt_status st = so && sr ? map_rows(pr, v, u, so, sr, err) : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int t = 0; st == LT_OK && t < T; t++) {
        const lt_acts *src = &pr->acts[so[t]];
        if (src->T == 0 || sr[t] < 0) st = op_error(pr, v, err, "the activations of its forward unit are gone");
        else if (recompute_of(pr->deps.op[so[t]]) != R)
            st = op_error(pr, v, err, "recomputes another number of layers than a forward it takes rows from kept");
        else if (R > 0 && l0 > 0 && !pr->x_in[so[t]])
            st = op_error(pr, v, err, "a forward it takes rows from kept no input to recompute from");
    }
    if (st == LT_OK && R > 0 && l0 > 0) {
        const lt_backend *be = be_of(pr);
        size_t row = (size_t)C * be->act_bytes; /* a row's bytes */
        if (!(*x = be->alloc(be, (size_t)T * row, false))) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        else *x_owned = true;
        for (int t = 0; st == LT_OK && t < T; t++)
            be->copy(be, (char *)*x + (size_t)t * row, (const char *)pr->x_in[so[t]] + (size_t)sr[t] * row, row);
    }
    return st;
}

/* An asymmetric B op's rows gathered into a window set (lt_acts_alloc_window) one layer at
 * a time, just before that layer's backward (its lt_cp_hooks.layer_begin): row t of the
 * unit is row src_row[t] of acts[src_op[t]]. */
typedef struct row_gather {
    pipe_run *pr;
    const uint32_t *src_op;
    const int *src_row;
    lt_acts *win;
} row_gather;

/* Rows of layers [lo, hi) (and with `head` the head's part) into the window. */
static lt_status gather_rows(const row_gather *g, int lo, int hi, bool head, lt_error *err) {
    lt_status st = LT_OK;
    for (int t = 0; st == LT_OK && t < g->win->T; t++)
        st = lt_acts_copy_row(g->win, t, &g->pr->acts[g->src_op[t]], g->src_row[t], lo, hi, head, g->pr->m, err);
    return st;
}

static lt_status gather_layer(void *ctx, int l, lt_error *err) {
    const row_gather *g = ctx;
    return l >= g->win->l0 && l < g->win->l1 ? gather_rows(g, l, l + 1, false, err) : LT_OK;
}

static lt_status gather_final(void *ctx, int l, lt_error *err) { return final_layer(((row_gather *)ctx)->pr, l, err); }

/* B op v: with R > 0, first the forward of the recomputed layers [l0, l0 + R) again from
 * their kept input (their K/V rewritten with the same values), then the backward of
 * [l0 + R, l1) and of [l0, l0 + R). An asymmetric unit's rows of [l0 + R, l1) are copied
 * from the forward units one layer at a time, before that layer's backward (a window set):
 * one layer's copy is live beside the backward's own scratch (the cost model's two layers). */
static lt_status run_backward(pipe_run *pr, uint32_t v, lt_error *err) {
    const lt_op *op = pr->deps.op[v];
    int stage = (int)pr->deps.stage[v], layers = pr->m->shape.layers;
    lt_train_unit u;
    lt_status st = unit_of(pr, op, &u, err);
    if (st != LT_OK) return st;
    int l0 = (int)op->layer_begin, l1 = (int)op->layer_end, R = recompute_of(op);
    float scale = (float)(1.0 / (double)pr->p->n_predicted);
    lt_pass pb = {.l0 = l0 + R, .l1 = l1, .embed = l0 + R == 0, .head = l1 == layers, .meter = &pr->meter};
    pb.loss_scale = pb.head ? scale : 0.0f;
    const float *dout = NULL;
    if (!pb.head) {
        uint32_t from = pred_of_kind(&pr->deps, v, LT_DEP_PATH);
        if (from == LT_DEP_NONE || !pr->din[from]) return op_error(pr, v, err, "no gradient from the stage after");
        dout = pr->din[from];
    }
    lt_acts win = {0}, redo = {0}, *a = NULL;
    float *x = NULL, *dmid = NULL;
    bool x_owned = false;
    uint32_t *src_op = NULL;
    int *src_row = NULL;
    const lt_backend *be = be_of(pr);
    size_t TC = (size_t)lt_unit_tokens(&u) * (size_t)pr->m->shape.hidden, x_bytes = 0, es = be->act_bytes;
    st = forward_state(pr, v, &u, R, &a, &src_op, &src_row, &x, &x_owned, err);
    if (x_owned) track(pr, x_bytes = TC * es);
    row_gather rg = {.pr = pr, .src_op = src_op, .src_row = src_row, .win = &win};
    if (st == LT_OK && !a) { /* asymmetric: a window over the range; the head's part now (the backward starts from it) */
        st = lt_acts_alloc_window(&win, pr->m, pr->b, &u, l0 + R, l1, pb.head, err);
        if (st == LT_OK) track(pr, win.bytes), a = &win;
        if (st == LT_OK && pb.head) st = gather_rows(&rg, l1, l1, true, err);
    }
    lt_pass pa = {.l0 = l0, .l1 = l0 + R, .embed = l0 == 0, .meter = &pr->meter};
    if (st == LT_OK && R > 0) {
        st = forward_pass(pr, &pa, &u, x, &redo, NULL, err);
        if (st == LT_OK && !(dmid = be->alloc(be, TC * es, true)))
            st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a gradient");
        if (dmid) track(pr, TC * es);
    }
    if (st == LT_OK && l0 > 0 && !(pr->din[v] = be->alloc(be, TC * es, true)))
        st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a %zu-element input gradient", TC);
    if (pr->din[v]) { /* held until the stage before has read it (release) */
        pr->din_bytes[v] = TC * es;
        track(pr, pr->din_bytes[v]);
    }
    bool final = pr->eh && v == pr->last_b;
    lt_cp_hooks fh = {.ctx = pr, .layer_done = final_layer};
    lt_cp_hooks gh = {.ctx = &rg, .layer_begin = gather_layer, .layer_done = final ? gather_final : NULL};
    const lt_cp_hooks *h = final ? &fh : NULL, *hb = a == &win ? &gh : h;
    float *din1 = R > 0 ? dmid : pr->din[v], *din2 = pr->din[v];
    const float *dmid_c = dmid;
    if (st == LT_OK)
        st = lt_llama_backward_group(pr->m, &pb, pr->b, &u, 1, &dout, pr->kv, a, pr->grads, hb, &din1, pr->pool, err);
    if (win.T > 0) untrack(pr, win.bytes, pr->cur_stage);
    lt_acts_free(&win);
    if (st == LT_OK && R > 0)
        st = lt_llama_backward_group(pr->m, &pa, pr->b, &u, 1, &dmid_c, pr->kv, &redo, pr->grads, h, &din2, pr->pool,
                                     err);
    if (redo.T > 0) untrack(pr, redo.bytes, pr->cur_stage);
    lt_acts_free(&redo);
    if (dmid) untrack(pr, TC * es, pr->cur_stage);
    be->free(be, dmid), free(src_op), free(src_row);
    if (x_owned) untrack(pr, x_bytes, pr->cur_stage), be->free(be, x);
    if (st == LT_OK) count_tokens(pr, pr->b_tokens, stage, &u);
    return st;
}

/* ---------------------------------------------------------------- context-parallel groups */

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

/* Member g's shard of an op's unit (docs/plans-schema.md "The one CP rule"): each slice
 * [b, e) of n tokens cut into 2G chunks as equal as possible, the first n mod 2G one token
 * longer; member g takes chunks g and 2G - 1 - g (the zigzag split). Empty chunks are left
 * out, so a member may hold nothing (*u with no slice). sl: storage for 2 x the op's slices. */
static void shard_of(const pipe_run *pr, const lt_op *op, int G, int g, lt_train_slice *sl, lt_train_unit *u) {
    size_t n;
    const lt_slice *s = lt_schedule_op_slices(&pr->r->sched, op, &n);
    int k = 0;
    for (size_t i = 0; i < n; i++) {
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

typedef struct group_units {
    int G, n_active;
    int me;             /* distributed: this process's member (the only active one) */
    int *ranks;         /* distributed: [G] the world rank of each member on this stage */
    lt_train_slice *sl; /* [G][2 x slices] */
    lt_train_unit *u;   /* [G] member shards */
    int *active;        /* [n_active] members holding tokens */
} group_units;

static void group_free(group_units *gu) {
    free(gu->sl), free(gu->u), free(gu->active), free(gu->ranks);
    memset(gu, 0, sizeof *gu);
}

static lt_status group_units_of(const pipe_run *pr, const lt_op *op, int G, group_units *gu, lt_error *err) {
    size_t n;
    (void)lt_schedule_op_slices(&pr->r->sched, op, &n);
    memset(gu, 0, sizeof *gu);
    gu->G = G;
    gu->sl = malloc((2 * n * (size_t)G + 1) * sizeof *gu->sl);
    gu->u = calloc((size_t)G, sizeof *gu->u);
    gu->active = calloc((size_t)G, sizeof *gu->active);
    if (!gu->sl || !gu->u || !gu->active) {
        group_free(gu);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    }
    for (int g = 0; g < G; g++) {
        shard_of(pr, op, G, g, gu->sl + (size_t)g * 2 * n, &gu->u[g]);
        if (gu->u[g].n_slices > 0) gu->active[gu->n_active++] = g;
    }
    if (pr->comm) { /* one member here: the others run in their own processes */
        if (!(gu->ranks = malloc((size_t)G * sizeof *gu->ranks))) {
            group_free(gu);
            return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        }
        member_ranks(pr, op, G, gu->ranks, &gu->me);
        bool ok = gu->me >= 0 && gu->me < G;
        for (int j = 0; ok && j < G; j++) ok = gu->ranks[j] >= 0;
        if (!ok) {
            group_free(gu);
            return lt_fail(err, LT_ERR_INPUT, NULL, "step %llu, pipeline %d: a group of %d its DP ranks do not hold",
                           (unsigned long long)pr->p->step, pr->r->dp_rank, G);
        }
        gu->n_active = 0;
        if (gu->u[gu->me].n_slices > 0) gu->active[gu->n_active++] = gu->me;
    }
    return LT_OK;
}

/* ---------------------------------------------------------------- the K/V exchange across processes
 * (lt_cp_hooks): the members of a group hold disjoint shards; per layer, a ring all-gather
 * of their K/V rows in the forward, and of their dK/dV contributions to every row the
 * group's attention touched ([0, end) of each of its samples) in the backward, summed in
 * member order (the same float sums on every member). Before the backward's attention,
 * every member but the first zeroes those rows, so the sum counts what the earlier
 * (later-slice) backward ops left there once. The rows are packed into backend buffers
 * (be->copy), the ring moves them where they live (NCCL on the device for cuda,
 * lt_comm_dev_ring_allgather; MPI for host memory) in the backend's element size, and the
 * dK/dV sums are taken in fp32 by the backend (be->sum_blocks: one rounding to its
 * elements). On the cpu fp32 backend these are the same bytes and float sums as before. */

typedef struct cp_xchg {
    pipe_run *pr;
    const group_units *gu;
    int n_rows;     /* entries of row_sample / row_end */
    int *row_sample, *row_end; /* per sample of the group's slices: its largest end */
    /* a B op: its members' rows gathered per layer into window sets (group_gather_layer) */
    uint32_t v;
    int R;
    lt_acts *ca;             /* [n_active] the active members' windows */
    const lt_train_unit *cu; /* [n_active] their shards */
    size_t packed;           /* bytes of kv_pack's buffers while they are held */
} cp_xchg;

/* Byte offset into a backend pointer typed float * (its elements may be 2 bytes). */
static float *at_b(const void *base, size_t bytes) { return (float *)((char *)base + bytes); }

/* The ring all-gather of the group's blocks, where the backend's buffers live. */
static lt_status group_ring(cp_xchg *x, const void *mine, const size_t *bytes, void *all, lt_error *err) {
    const group_units *gu = x->gu;
    return (be_of(x->pr)->host ? lt_comm_ring_allgather : lt_comm_dev_ring_allgather)(x->pr->comm, gu->ranks, gu->G,
                                                                                     gu->me, mine, bytes, all, err);
}

/* This member's K/V rows of layer l (grads: its dK/dV of every row in row_sample/row_end)
 * copied into the backend buffer *mine, and the backend buffer *all sized for every
 * member's (bytes[j] each, in the backend's elements: the exchange moves bytes). */
static lt_status kv_pack(cp_xchg *x, int l, bool grads, lt_error *err, char **mine, size_t *bytes, char **all) {
    const group_units *gu = x->gu;
    lt_kvctx *kv = x->pr->kv;
    const lt_backend *be = be_of(x->pr);
    size_t kvd = (size_t)kv->kvd, total = 0, es = be->act_bytes;
    for (int j = 0; j < gu->G; j++) {
        size_t rows = 0;
        if (grads)
            for (int i = 0; i < x->n_rows; i++) rows += (size_t)x->row_end[i];
        else
            rows = (size_t)lt_unit_tokens(&gu->u[j]);
        bytes[j] = rows * kvd * 2 * es;
        total += bytes[j];
    }
    *mine = be->alloc(be, bytes[gu->me] ? bytes[gu->me] : 1, false), *all = be->alloc(be, total ? total : 1, false);
    if (!*mine || !*all) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the K/V exchange");
    x->packed = bytes[gu->me] + total;
    track(x->pr, x->packed);
    char *p = *mine;
    if (grads)
        for (int i = 0; i < x->n_rows; i++) {
            const lt_kv_sample *ks = &kv->s[x->row_sample[i]];
            size_t n = (size_t)x->row_end[i] * kvd * es;
            be->copy(be, p, ks->dk[l], n), p += n;
            be->copy(be, p, ks->dv[l], n), p += n;
        }
    else
        for (int i = 0; i < gu->u[gu->me].n_slices; i++) {
            const lt_train_slice *s = &gu->u[gu->me].slices[i];
            const lt_kv_sample *ks = &kv->s[s->sample];
            size_t n = (size_t)(s->end - s->begin) * kvd * es, o = (size_t)s->begin * kvd * es;
            be->copy(be, p, at_b(ks->k[l], o), n), p += n;
            be->copy(be, p, at_b(ks->v[l], o), n), p += n;
        }
    return be->check(be, err);
}

/* kv_pack's buffers (and the sizes) freed. */
static void kv_pack_free(cp_xchg *x, size_t *bytes, char *mine, char *all) {
    const lt_backend *be = be_of(x->pr);
    untrack(x->pr, x->packed, x->pr->cur_stage);
    x->packed = 0;
    free(bytes), be->free(be, mine), be->free(be, all);
}

static lt_status kv_ready(void *ctx, int l, lt_error *err) {
    cp_xchg *x = ctx;
    const group_units *gu = x->gu;
    lt_kvctx *kv = x->pr->kv;
    const lt_backend *be = be_of(x->pr);
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
                be->copy(be, at_b(ks->k[l], o), p, n);
                be->copy(be, at_b(ks->v[l], o), p + n, n);
            }
            p += 2 * n;
        }
    if (st == LT_OK) st = be->check(be, err);
    if (bytes) kv_pack_free(x, bytes, mine, all);
    return st;
}

static lt_status dkv_begin(void *ctx, int l, lt_error *err) {
    cp_xchg *x = ctx;
    lt_kvctx *kv = x->pr->kv;
    for (int i = 0; i < x->n_rows; i++) { /* a member whose shard is empty still sums */
        lt_status st = lt_kvctx_reserve_grad(kv, x->row_sample[i], l, l + 1, err);
        if (st != LT_OK) return st;
    }
    if (x->gu->me == 0) return LT_OK;
    const lt_backend *be = be_of(x->pr);
    for (int i = 0; i < x->n_rows; i++) {
        const lt_kv_sample *ks = &kv->s[x->row_sample[i]];
        size_t n = (size_t)x->row_end[i] * (size_t)kv->kvd * be->act_bytes;
        be->zero(be, ks->dk[l], n), be->zero(be, ks->dv[l], n);
    }
    return LT_OK;
}

static lt_status x_layer_done(void *ctx, int l, lt_error *err) {
    cp_xchg *x = ctx;
    return final_layer(x->pr, l, err);
}

static lt_status dkv_ready(void *ctx, int l, lt_error *err) {
    cp_xchg *x = ctx;
    const group_units *gu = x->gu;
    const lt_kvctx *kv = x->pr->kv;
    const lt_backend *be = be_of(x->pr);
    size_t *bytes = malloc((size_t)gu->G * sizeof *bytes);
    char *mine = NULL, *all = NULL;
    lt_status st = bytes ? kv_pack(x, l, true, err, &mine, bytes, &all) : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    if (st == LT_OK) st = group_ring(x, mine, bytes, all, err);
    /* the sums in fp32, in member order (the same float sums on every member), rounded once
     * to the backend's elements, straight into dK/dV: member j's element e of the block at
     * element offset o is all[j * block + o + e] */
    size_t block = bytes ? bytes[0] / be->act_bytes : 0, o = 0;
    for (int i = 0; st == LT_OK && i < x->n_rows; i++) {
        const lt_kv_sample *ks = &kv->s[x->row_sample[i]];
        size_t n = (size_t)x->row_end[i] * (size_t)kv->kvd;
        be->sum_blocks(be, ks->dk[l], all + o * be->act_bytes, gu->G, block, n), o += n;
        be->sum_blocks(be, ks->dv[l], all + o * be->act_bytes, gu->G, block, n), o += n;
    }
    if (st == LT_OK) st = be->check(be, err);
    if (bytes) kv_pack_free(x, bytes, mine, all);
    return st;
}

/* The hooks of group op gu: *x is their state, *out = h (distributed only; NULL otherwise,
 * and *h holds only the context). */
static lt_status xchg_init(pipe_run *pr, const group_units *gu, cp_xchg *x, lt_cp_hooks *h, const lt_cp_hooks **out,
                           lt_error *err) {
    memset(x, 0, sizeof *x);
    x->pr = pr, x->gu = gu;
    *h = (lt_cp_hooks){.ctx = x};
    *out = NULL;
    if (!pr->comm) return LT_OK;
    size_t cap = 0;
    for (int j = 0; j < gu->G; j++) cap += (size_t)gu->u[j].n_slices;
    x->row_sample = malloc((cap + 1) * sizeof(int)), x->row_end = malloc((cap + 1) * sizeof(int));
    if (!x->row_sample || !x->row_end) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int j = 0; j < gu->G; j++)
        for (int i = 0; i < gu->u[j].n_slices; i++) {
            const lt_train_slice *s = &gu->u[j].slices[i];
            int k = 0;
            while (k < x->n_rows && x->row_sample[k] != s->sample) k++;
            if (k == x->n_rows) x->row_sample[x->n_rows] = s->sample, x->row_end[x->n_rows++] = s->end;
            else if (s->end > x->row_end[k]) x->row_end[k] = s->end;
        }
    *h = (lt_cp_hooks){.ctx = x, .kv_ready = kv_ready, .dkv_begin = dkv_begin, .dkv_ready = dkv_ready};
    *out = h;
    return LT_OK;
}

/* The hooks of group B op v: the exchange's, and on the stage's last B the final layers. */
static void xchg_final(pipe_run *pr, uint32_t v, lt_cp_hooks *h) {
    if (h && pr->eh && v == pr->last_b) h->layer_done = x_layer_done;
}

static void xchg_free(cp_xchg *x) { free(x->row_sample), free(x->row_end); }

/* Runs pass over the active members of gu: allocates their activations in a[0..n_active)
 * (compact), forward in lockstep. */
static lt_status group_forward(pipe_run *pr, const lt_pass *pass, const group_units *gu, const float **cin,
                               lt_acts *ca, const lt_cp_hooks *hooks, double *loss, lt_error *err) {
    lt_train_unit *cu = calloc((size_t)gu->G, sizeof *cu);
    lt_status st = cu ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int i = 0; st == LT_OK && i < gu->n_active; i++) {
        cu[i] = gu->u[gu->active[i]];
        st = lt_acts_alloc(&ca[i], pr->m, pr->b, &cu[i], pass->l0, pass->l1, pass->head, err);
        track(pr, ca[i].bytes);
    }
    if (st == LT_OK && (gu->n_active > 0 || hooks))
        st = lt_llama_forward_group(pr->m, pass, pr->b, cu, gu->n_active, cin, pr->kv, ca, pr->grads, hooks, loss,
                                    pr->pool, err);
    free(cu);
    return st;
}

/* F or FK op v of a group of G: every member's shard through the op's layers in lockstep
 * (lt_llama_forward_group); the members' activations in gacts[v]. With recompute R > 0 the
 * first R layers run with scratch activations and each member keeps only its input (gxin). */
static lt_status run_forward_group(pipe_run *pr, uint32_t v, int G, lt_error *err) {
    const lt_op *op = pr->deps.op[v];
    int stage = (int)pr->deps.stage[v], layers = pr->m->shape.layers;
    bool with_loss = op->kind == LT_OP_F;
    int l0 = (int)op->layer_begin, l1 = (int)op->layer_end, R = recompute_of(op);
    uint32_t from = LT_DEP_NONE;
    if (l0 > 0) {
        from = pred_of_kind(&pr->deps, v, LT_DEP_PATH);
        if (from == LT_DEP_NONE || !pr->gacts[from] || pr->gsize[from] != G)
            return op_error(pr, v, err, "no input from the stage before");
    }
    group_units gu;
    lt_status st = group_units_of(pr, op, G, &gu, err);
    if (st != LT_OK) return st;
    cp_xchg xc;
    lt_cp_hooks hk;
    const lt_cp_hooks *hooks;
    st = xchg_init(pr, &gu, &xc, &hk, &hooks, err);
    pr->gacts[v] = calloc((size_t)G, sizeof(lt_acts));
    pr->gsize[v] = G;
    lt_acts *ca = calloc((size_t)G, sizeof *ca), *cs = calloc((size_t)G, sizeof *cs);
    const float **cin = calloc((size_t)G, sizeof *cin);
    if (!pr->gacts[v] || !ca || !cs || !cin) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    size_t C = (size_t)pr->m->shape.hidden;
    for (int i = 0; st == LT_OK && i < gu.n_active; i++) {
        int g = gu.active[i];
        cin[i] = from == LT_DEP_NONE ? NULL : pr->gacts[from][g].out;
        if (cin[i] && pr->gacts[from][g].T != lt_unit_tokens(&gu.u[g]))
            st = op_error(pr, v, err, "its input shard does not match its own");
    }
    if (st == LT_OK && R > 0) { /* the recomputed layers: inputs kept, activations dropped */
        if (from != LT_DEP_NONE) {
            pr->gxin[v] = calloc((size_t)G, sizeof(float *));
            pr->gxin_bytes[v] = calloc((size_t)G, sizeof(size_t));
            if (!pr->gxin[v] || !pr->gxin_bytes[v]) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
            const lt_backend *be = be_of(pr);
            for (int i = 0; st == LT_OK && i < gu.n_active; i++) {
                int g = gu.active[i];
                size_t bytes = (size_t)lt_unit_tokens(&gu.u[g]) * C * be->act_bytes;
                if (!(pr->gxin[v][g] = be->alloc(be, bytes ? bytes : 1, false)))
                    st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
                else be->copy(be, pr->gxin[v][g], cin[i], bytes), pr->gxin_bytes[v][g] = bytes, track(pr, bytes);
            }
        }
        lt_pass pa = {.l0 = l0, .l1 = l0 + R, .embed = l0 == 0, .meter = &pr->meter};
        if (st == LT_OK) st = group_forward(pr, &pa, &gu, cin, cs, hooks, NULL, err);
        for (int i = 0; st == LT_OK && i < gu.n_active; i++) cin[i] = cs[i].out;
    }
    lt_pass pass = {.l0 = l0 + R, .l1 = l1, .embed = l0 + R == 0, .head = l1 == layers && with_loss,
                    .meter = &pr->meter};
    pass.loss_scale = pass.head ? (float)(1.0 / (double)pr->p->n_predicted) : 0.0f;
    double loss = 0;
    if (st == LT_OK) st = group_forward(pr, &pass, &gu, cin, ca, hooks, &loss, err);
    for (int i = 0; pr->gacts[v] && ca && i < gu.n_active; i++) pr->gacts[v][gu.active[i]] = ca[i];
    for (int i = 0; cs && i < gu.n_active; i++) {
        untrack(pr, cs[i].bytes, pr->cur_stage);
        lt_acts_free(&cs[i]);
    }
    if (st == LT_OK && pass.head) pr->stats->loss_sum += loss;
    for (int i = 0; st == LT_OK && with_loss && i < gu.n_active; i++)
        count_tokens(pr, pr->f_tokens, stage, &gu.u[gu.active[i]]);
    free(ca), free(cs), free(cin);
    xchg_free(&xc);
    group_free(&gu);
    return st;
}

/* Where each row of member unit bu (a B op v's shard) comes from: the group forward op f
 * (one of v's LT_DEP_ACT predecessors), the member h holding it and its row there now
 * (kept_rows; meaningful where this process holds member h's set); in the
 * one order every member computes alike (the sender of rows across processes and their
 * receiver walk the same list). R: the recompute count every such forward must have kept
 * by; want_x: their kept inputs are needed too. *out is new (free it). */
typedef struct row_src {
    uint32_t f;
    int h, srow, drow;
} row_src;

static lt_status row_sources(pipe_run *pr, uint32_t v, int G, int R, bool want_x, const lt_train_unit *bu,
                             row_src **out, size_t *n_out, lt_error *err) {
    size_t np, n = 0, cap = (size_t)lt_unit_tokens(bu) + 1;
    const lt_dep *p = lt_deps_preds(&pr->deps, v, &np);
    row_src *rs = malloc(cap * sizeof *rs);
    lt_status st = rs ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (size_t k = 0; st == LT_OK && k < np; k++) {
        if (p[k].kind != LT_DEP_ACT) continue;
        uint32_t f = p[k].op;
        if (!pr->gacts[f] || pr->gsize[f] != G) st = op_error(pr, v, err, "its forward ran outside its group");
        else if (recompute_of(pr->deps.op[f]) != R)
            st = op_error(pr, v, err, "recomputes another number of layers than a forward it takes rows from kept");
        else if (want_x && !pr->gxin[f])
            st = op_error(pr, v, err, "a forward it takes rows from kept no input to recompute from");
        group_units fu;
        if (st == LT_OK) st = group_units_of(pr, pr->deps.op[f], G, &fu, err);
        for (int h = 0; st == LT_OK && h < G; h++) {
            const lt_train_unit *su = &fu.u[h];
            int srow = 0;
            for (int j = 0; st == LT_OK && j < su->n_slices; srow += su->slices[j].end - su->slices[j].begin, j++) {
                int brow = 0;
                for (int i = 0; i < bu->n_slices; brow += bu->slices[i].end - bu->slices[i].begin, i++) {
                    const lt_train_slice *a = &bu->slices[i], *b = &su->slices[j];
                    if (a->sample != b->sample) continue;
                    int lo = a->begin > b->begin ? a->begin : b->begin, hi = a->end < b->end ? a->end : b->end;
                    const kept_rows *kr = pr->gkept[f] ? &pr->gkept[f][h] : NULL;
                    for (int t = lo; t < hi && n < cap; t++)
                        rs[n++] = (row_src){.f = f, .h = h, .srow = row_now(kr, srow + (t - b->begin)),
                                            .drow = brow + (t - a->begin)};
                }
            }
        }
        if (st == LT_OK) group_free(&fu);
    }
    if (st == LT_OK && n != cap - 1) st = op_error(pr, v, err, "some of its tokens were not forwarded in its group");
    if (st != LT_OK) free(rs), rs = NULL;
    *out = rs, *n_out = n;
    return st;
}

/* Distributed B op v of a group: send every other member the rows of its backward shard
 * that this member's forward shards hold, and receive the rows of this member's shard that
 * the others hold (recv[h]: member h's rows in row_sources order, each the row of layers
 * [lo, hi) with or without the head's part, lt_acts_pack_row, then with want_x the kept
 * input; counted from here, their bytes added to *recv_bytes for the caller to untrack).
 * The rows are packed in backend memory and exchanged where it lives (NCCL on the device,
 * lt_comm_dev_exchange, or MPI for host memory). */
static lt_status exchange_rows(pipe_run *pr, uint32_t v, const group_units *gu, int R, int lo, int hi, bool head,
                               bool want_x, float **recv, size_t *recv_bytes, lt_error *err) {
    int G = gu->G, me = gu->me;
    const lt_backend *be = be_of(pr);
    size_t xrow = (size_t)pr->m->shape.hidden * be->act_bytes; /* a kept input row's bytes */
    size_t x_floats = want_x ? (xrow + sizeof(float) - 1) / sizeof(float) : 0;
    size_t row_floats = lt_acts_row_floats(pr->m, lo, hi, head) + x_floats;
    float **send = calloc((size_t)G, sizeof *send);
    size_t *sbytes = calloc((size_t)G, sizeof *sbytes), *rbytes = calloc((size_t)G, sizeof *rbytes);
    lt_status st = send && sbytes && rbytes ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int g = 0; st == LT_OK && g < G; g++) {
        row_src *rs;
        size_t n;
        st = row_sources(pr, v, G, R, want_x, &gu->u[g], &rs, &n, err);
        size_t cnt = 0;
        for (size_t i = 0; st == LT_OK && i < n; i++) /* g's rows here (g != me) / my rows elsewhere (g == me) */
            if (g == me ? rs[i].h != me : rs[i].h == me) {
                if (g == me) rbytes[rs[i].h] += row_floats * sizeof(float);
                else cnt++;
            }
        if (st == LT_OK && g != me && cnt > 0) {
            sbytes[g] = cnt * row_floats * sizeof(float);
            float *q = send[g] = be->alloc(be, sbytes[g], false);
            if (!q) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %zu rows to send", cnt);
            else track(pr, sbytes[g]);
            for (size_t i = 0; st == LT_OK && i < n; i++) {
                if (rs[i].h != me) continue;
                st = lt_acts_pack_row(&pr->gacts[rs[i].f][me], rs[i].srow, lo, hi, head, pr->m, q, err);
                q += row_floats - x_floats; /* (a pointer into backend memory: never dereferenced here) */
                if (st == LT_OK && want_x) be->copy(be, q, at_b(pr->gxin[rs[i].f][me], (size_t)rs[i].srow * xrow), xrow);
                q += x_floats;
            }
        }
        free(rs);
    }
    for (int h = 0; st == LT_OK && h < G; h++) {
        if (rbytes[h] > 0 && !(recv[h] = be->alloc(be, rbytes[h], false)))
            st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the rows to receive");
        if (recv[h]) track(pr, rbytes[h]), *recv_bytes += rbytes[h];
    }
    if (st == LT_OK) st = be->check(be, err);
    if (st == LT_OK)
        st = (be->host ? lt_comm_exchange : lt_comm_dev_exchange)(pr->comm, gu->ranks, G, me, (const void *const *)send,
                                                                   sbytes, (void *const *)recv, rbytes, err);
    for (int g = 0; send && g < G; g++)
        if (send[g]) untrack(pr, sbytes[g], pr->cur_stage), be->free(be, send[g]);
    free(send), free(sbytes), free(rbytes);
    return st;
}

/* Member unit bu's rows of layers [lo, hi) (with `head` the head's part) gathered into *dst
 * from the group forward ops that hold its tokens (v's LT_DEP_ACT predecessors, each
 * member's shard), and with x != NULL the rows of their kept inputs (gxin) into x [T, C].
 * R: the recompute count every such forward must have kept by. Distributed, the rows other
 * members hold come from recv (exchange_rows with the same arguments). */
static lt_status gather_group(pipe_run *pr, uint32_t v, int G, int R, const lt_train_unit *bu, int lo, int hi,
                              bool head, float *const *recv, lt_acts *dst, float *x, lt_error *err) {
    const lt_backend *be = be_of(pr);
    size_t n, xrow = (size_t)pr->m->shape.hidden * be->act_bytes; /* a kept input row's bytes */
    size_t x_floats = x ? (xrow + sizeof(float) - 1) / sizeof(float) : 0;
    size_t row_floats = lt_acts_row_floats(pr->m, lo, hi, head) + x_floats;
    row_src *rs;
    lt_status st = row_sources(pr, v, G, R, x != NULL, bu, &rs, &n, err);
    size_t *cursor = st == LT_OK ? calloc((size_t)G, sizeof *cursor) : NULL;
    if (st == LT_OK && !cursor) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (size_t i = 0; st == LT_OK && i < n; i++) {
        int h = rs[i].h, dr = rs[i].drow, sr = rs[i].srow;
        const lt_acts *src = &pr->gacts[rs[i].f][h];
        if (src->T > 0) {
            st = sr >= 0 ? lt_acts_copy_row(dst, dr, src, sr, lo, hi, head, pr->m, err)
                         : op_error(pr, v, err, "a row of its unit was dropped from its forward");
            if (st == LT_OK && x) be->copy(be, at_b(x, (size_t)dr * xrow), at_b(pr->gxin[rs[i].f][h], (size_t)sr * xrow), xrow);
        } else if (recv && recv[h]) { /* held by member h's process */
            const float *q = recv[h] + cursor[h]++ * row_floats;
            st = lt_acts_unpack_row(dst, dr, lo, hi, head, pr->m, q, err);
            if (st == LT_OK && x) be->copy(be, at_b(x, (size_t)dr * xrow), q + row_floats - x_floats, xrow);
        } else {
            st = op_error(pr, v, err, "a row of its unit was forwarded nowhere this process can read");
        }
    }
    free(rs), free(cursor);
    return st;
}

/* Every active member's rows of layers [lo, hi) (with `head` the head's part, with want_x
 * the kept inputs into xs) into its window: from this process's forward shards, and
 * distributed from the other members' (an exchange every member makes alike). */
static lt_status gather_members(cp_xchg *xc, int lo, int hi, bool head, float **xs, lt_error *err) {
    pipe_run *pr = xc->pr;
    const group_units *gu = xc->gu;
    float **recv = calloc((size_t)gu->G, sizeof *recv);
    size_t recv_bytes = 0; /* of recv's buffers, counted while held */
    lt_status st = recv ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    if (st == LT_OK && pr->comm)
        st = exchange_rows(pr, xc->v, gu, xc->R, lo, hi, head, xs != NULL, recv, &recv_bytes, err);
    for (int i = 0; st == LT_OK && i < gu->n_active; i++)
        st = gather_group(pr, xc->v, gu->G, xc->R, &xc->cu[i], lo, hi, head, recv, &xc->ca[i], xs ? xs[i] : NULL, err);
    for (int h = 0; recv && h < gu->G; h++) be_of(pr)->free(be_of(pr), recv[h]);
    untrack(pr, recv_bytes, pr->cur_stage);
    free(recv);
    return st;
}

/* lt_cp_hooks.layer_begin of a group B op: layer l's rows, if l is in the windows' range. */
static lt_status group_gather_layer(void *ctx, int l, lt_error *err) {
    cp_xchg *xc = ctx;
    const pipe_run *pr = xc->pr;
    const lt_op *op = pr->deps.op[xc->v];
    if (l < (int)op->layer_begin + xc->R || l >= (int)op->layer_end) return LT_OK;
    return gather_members(xc, l, l + 1, false, NULL, err);
}

/* B op v of a group of G: every member's shard (of the backward unit, which an asymmetric
 * schedule cuts differently: rows gathered from the forward shards, one layer at a time
 * before that layer's backward, into window sets) backward in lockstep; with recompute
 * R > 0, first the forward of the first R layers again from the kept inputs. */
static lt_status run_backward_group(pipe_run *pr, uint32_t v, int G, lt_error *err) {
    const lt_op *op = pr->deps.op[v];
    int stage = (int)pr->deps.stage[v], layers = pr->m->shape.layers;
    int l0 = (int)op->layer_begin, l1 = (int)op->layer_end, R = recompute_of(op);
    float scale = (float)(1.0 / (double)pr->p->n_predicted);
    lt_pass pb = {.l0 = l0 + R, .l1 = l1, .embed = l0 + R == 0, .head = l1 == layers, .meter = &pr->meter};
    pb.loss_scale = pb.head ? scale : 0.0f;
    lt_pass pa = {.l0 = l0, .l1 = l0 + R, .embed = l0 == 0, .meter = &pr->meter};
    bool want_x = R > 0 && l0 > 0;
    uint32_t from = LT_DEP_NONE;
    if (!pb.head) {
        from = pred_of_kind(&pr->deps, v, LT_DEP_PATH);
        if (from == LT_DEP_NONE || !pr->gdin[from] || pr->gsize[from] != G)
            return op_error(pr, v, err, "no gradient from the stage after");
    }
    group_units gu;
    lt_status st = group_units_of(pr, op, G, &gu, err);
    if (st != LT_OK) return st;
    cp_xchg xc;
    lt_cp_hooks hk;
    const lt_cp_hooks *hooks;
    st = xchg_init(pr, &gu, &xc, &hk, &hooks, err);
    if (hooks) xchg_final(pr, v, &hk);
    lt_acts *ca = calloc((size_t)G, sizeof *ca), *cr = calloc((size_t)G, sizeof *cr);
    lt_train_unit *cu = calloc((size_t)G, sizeof *cu);
    const float **cdout = calloc((size_t)G, sizeof *cdout), **cx = calloc((size_t)G, sizeof *cx);
    float **cdin = calloc((size_t)G, sizeof *cdin), **cmid = calloc((size_t)G, sizeof *cmid);
    float **xs = calloc((size_t)G, sizeof *xs);
    pr->gsize[v] = G;
    if (l0 > 0) pr->gdin[v] = calloc((size_t)G, sizeof(float *));
    if (!ca || !cr || !cu || !cdout || !cx || !cdin || !cmid || !xs || (l0 > 0 && !pr->gdin[v]))
        st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    const lt_backend *be = be_of(pr);
    size_t C = (size_t)pr->m->shape.hidden, es = be->act_bytes;
    for (int i = 0; st == LT_OK && i < gu.n_active; i++) {
        int g = gu.active[i];
        cu[i] = gu.u[g];
        size_t TC = (size_t)lt_unit_tokens(&cu[i]) * C;
        if (want_x && !(xs[i] = be->alloc(be, TC * es, false))) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        else if (want_x) track(pr, TC * es);
        if (st == LT_OK) st = lt_acts_alloc_window(&ca[i], pr->m, pr->b, &cu[i], l0 + R, l1, pb.head, err);
        track(pr, ca[i].bytes);
        cx[i] = xs[i];
        if (st == LT_OK && !pb.head && !(cdout[i] = pr->gdin[from][g]))
            st = op_error(pr, v, err, "no gradient from the stage after for a member");
        if (st == LT_OK && l0 > 0 && !(cdin[i] = pr->gdin[v][g] = be->alloc(be, TC * es, true)))
            st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        if (cdin[i]) { /* held until the stage before has read it (release) */
            pr->din_bytes[v] += TC * es;
            track(pr, TC * es);
        }
        if (st == LT_OK && R > 0 && !(cmid[i] = be->alloc(be, TC * es, true)))
            st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        if (cmid[i]) track(pr, TC * es);
    }
    /* before the first layer: the head's part (the backward starts from it) and the
     * recomputed layers' inputs; then each layer's rows as its backward begins */
    xc.v = v, xc.R = R, xc.ca = ca, xc.cu = cu;
    if (st == LT_OK && (pb.head || want_x)) st = gather_members(&xc, l1, l1, pb.head, want_x ? xs : NULL, err);
    hk.layer_begin = group_gather_layer;
    if (st == LT_OK && R > 0) st = group_forward(pr, &pa, &gu, cx, cr, hooks, NULL, err);
    if (st == LT_OK)
        st = lt_llama_backward_group(pr->m, &pb, pr->b, cu, gu.n_active, pb.head ? NULL : cdout, pr->kv, ca, pr->grads,
                                     &hk, R > 0 ? cmid : (l0 > 0 ? cdin : NULL), pr->pool, err);
    for (int i = 0; ca && i < gu.n_active; i++) {
        untrack(pr, ca[i].bytes, pr->cur_stage);
        lt_acts_free(&ca[i]);
    }
    if (st == LT_OK && R > 0 && (gu.n_active > 0 || hooks))
        st = lt_llama_backward_group(pr->m, &pa, pr->b, cu, gu.n_active, (const float *const *)cmid, pr->kv, cr,
                                     pr->grads, hooks, l0 > 0 ? cdin : NULL, pr->pool, err);
    for (int i = 0; st == LT_OK && i < gu.n_active; i++) count_tokens(pr, pr->b_tokens, stage, &cu[i]);
    for (int i = 0; cr && i < gu.n_active; i++) {
        untrack(pr, cr[i].bytes, pr->cur_stage);
        lt_acts_free(&cr[i]);
        if (cmid && cmid[i]) untrack(pr, (size_t)lt_unit_tokens(&cu[i]) * C * es, pr->cur_stage);
        if (cmid) be->free(be, cmid[i]);
        if (xs && xs[i]) untrack(pr, (size_t)lt_unit_tokens(&cu[i]) * C * es, pr->cur_stage), be->free(be, xs[i]);
    }
    free(ca), free(cr), free(cu), free(cdout), free(cx), free(cdin), free(cmid), free(xs);
    xchg_free(&xc);
    group_free(&gu);
    return st;
}

/* ---------------------------------------------------------------- rows a backward consumed */

/* Mark the rows of fu (an F op's unit, or a member's shard of it) that B op v's unit holds
 * as taken (k: the F's kept rows, set up at the first call); *left: rows not taken. */
static lt_status mark_taken(pipe_run *pr, uint32_t v, const lt_train_unit *fu, kept_rows *k, int *left, lt_error *err) {
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
    *left = 0;
    for (int r = 0; r < k->T0; r++) *left += !k->taken[r];
    return LT_OK;
}

/* Drop the rows marked taken from a (and from its kept input x, [T, C], when there is one,
 * *x_bytes its size): they move out and the buffers shrink (lt_acts_keep_rows). */
static lt_status drop_taken_rows(pipe_run *pr, int stage, kept_rows *k, lt_acts *a, float **x, size_t *x_bytes,
                                 lt_error *err) {
    int *rows = malloc(((size_t)k->T0 + 1) * sizeof *rows), n = 0;
    if (!rows) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int r = 0; r < k->T0; r++)
        if (!k->taken[r] && k->at[r] >= 0) rows[n++] = k->at[r];
    lt_status st = LT_OK;
    if (n > 0 && n < a->T) {
        size_t before = a->bytes;
        st = lt_acts_keep_rows(a, rows, n, pr->m, err);
        untrack(pr, before - a->bytes, stage);
        const lt_backend *be = be_of(pr);
        size_t row = (size_t)pr->m->shape.hidden * be->act_bytes;
        if (st == LT_OK && x && *x) {
            for (int i = 0; i < n; i++) be->copy(be, (char *)*x + (size_t)i * row, (char *)*x + (size_t)rows[i] * row, row);
            /* a smaller block on the host (the allocator keeps it in place); a device buffer
             * is kept whole (its rows beyond n unused until it is freed) */
            float *smaller = be->host ? realloc(*x, (size_t)n * row) : NULL;
            if (smaller) {
                *x = smaller;
                untrack(pr, *x_bytes - (size_t)n * row, stage);
                *x_bytes = (size_t)n * row;
            }
        }
        for (int r = 0, j = 0; st == LT_OK && r < k->T0; r++) k->at[r] = !k->taken[r] && k->at[r] >= 0 ? j++ : -1;
    }
    free(rows);
    return st;
}

/* After B op v: forward op f (an LT_DEP_ACT predecessor that other backward ops still read)
 * no longer holds the rows v took. They are dropped at once unless the next stage still
 * reads f's output (a model-path reader to run, a send in flight): then at the next drop,
 * or with the rest when f is released. */
static lt_status drop_consumed(pipe_run *pr, uint32_t v, uint32_t f, lt_error *err) {
    bool now = pr->path_refs[f] == 0 && !(pr->sends_of && pr->sends_of[f] > 0);
    int stage = (int)pr->deps.stage[f], left;
    size_t C = (size_t)pr->m->shape.hidden;
    lt_status st = LT_OK;
    if (pr->gacts[f]) {
        int G = pr->gsize[f];
        group_units fu;
        if ((st = group_units_of(pr, pr->deps.op[f], G, &fu, err)) != LT_OK) return st;
        if (!pr->gkept[f] && !(pr->gkept[f] = calloc((size_t)G, sizeof *pr->gkept[f])))
            st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        for (int h = 0; st == LT_OK && h < G; h++) {
            if (pr->gacts[f][h].T == 0) continue; /* another process's member, or an empty shard */
            st = mark_taken(pr, v, &fu.u[h], &pr->gkept[f][h], &left, err);
            size_t none = 0, *xb = pr->gxin[f] ? &pr->gxin_bytes[f][h] : &none;
            if (st == LT_OK && now)
                st = drop_taken_rows(pr, stage, &pr->gkept[f][h], &pr->gacts[f][h], pr->gxin[f] ? &pr->gxin[f][h] : NULL,
                                     xb, err);
        }
        group_free(&fu);
    } else if (pr->acts[f].T > 0) {
        lt_train_unit u;
        if ((st = unit_of(pr, pr->deps.op[f], &u, err)) != LT_OK) return st;
        st = mark_taken(pr, v, &u, &pr->kept[f], &left, err);
        size_t xb = (size_t)pr->acts_T[f] * C * act_es(pr);
        if (st == LT_OK && now) st = drop_taken_rows(pr, stage, &pr->kept[f], &pr->acts[f], &pr->x_in[f], &xb, err);
        pr->acts_T[f] = (int)(xb / (C * act_es(pr)));
    }
    return st;
}

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
        if (op->part != LT_PART_ALL)
            return op_error(pr, v, err, "runs a part of a layer (HelixPipe): not executable yet");
        if (op->layer_end > (uint32_t)pr->m->shape.layers || op->layer_begin >= op->layer_end)
            return op_error(pr, v, err, "its layer range is outside the model");
        size_t n;
        const lt_slice *sl = lt_schedule_op_slices(&pr->r->sched, op, &n);
        if (n == 0) return op_error(pr, v, err, "its unit has no slice");
        for (size_t i = 0; i < n; i++)
            if (sl[i].sample < 0 || (size_t)sl[i].sample >= pr->p->n_samples || sl[i].begin < 0 ||
                sl[i].end <= sl[i].begin || sl[i].end > pr->p->lengths[sl[i].sample] || sl[i].end > INT_MAX)
                return op_error(pr, v, err, "a slice of its unit is outside its sample");
    }
    return LT_OK;
}

/* ---------------------------------------------------------------- transfers (distributed) */

/* The tokens this process holds of op's unit: the whole unit, or its member's shard. */
static lt_status local_tokens(const pipe_run *pr, const lt_op *op, int *G, int *me, int *T, lt_error *err) {
    *G = group_of(pr, op), *me = 0;
    if (*G > 1) {
        group_units gu;
        lt_status st = group_units_of(pr, op, *G, &gu, err);
        if (st != LT_OK) return st;
        *me = gu.me, *T = lt_unit_tokens(&gu.u[gu.me]);
        group_free(&gu);
        return LT_OK;
    }
    size_t n;
    const lt_slice *sl = lt_schedule_op_slices(&pr->r->sched, op, &n);
    *T = 0;
    for (size_t i = 0; i < n; i++) *T += (int)(sl[i].end - sl[i].begin);
    return LT_OK;
}

/* v's predecessor across stages (its p2p model-path edge), or NULL. */
static const lt_dep *p2p_pred(const pipe_run *pr, uint32_t v) {
    size_t np;
    const lt_dep *p = lt_deps_preds(&pr->deps, v, &np);
    for (size_t k = 0; k < np; k++)
        if (p[k].p2p) return &p[k];
    return NULL;
}

static void transfer_name(const pipe_run *pr, uint32_t v, bool in, char *buf, size_t n) {
    int stage;
    size_t idx;
    lt_deps_op_at(&pr->deps, v, &stage, &idx);
    bool b = pr->deps.op[v]->kind == LT_OP_B;
    snprintf(buf, n, "the %s %s op %zu (%s of unit %u) of stage %d, step %llu", b ? "gradients" : "activations",
             in ? "for" : "from", idx, kind_name(pr->deps.op[v]->kind), pr->deps.op[v]->unit, stage,
             (unsigned long long)pr->p->step);
}

/* ---------------------------------------------------------------- stage-to-stage transfers
 * Over the stage channels (train/dist/comm.h): MPI for a host backend's buffers, NCCL on the
 * channel's own communicator and stream for a device backend's (cuda), straight from and
 * into the backend buffers. A channel's transfers match in posting order, so this process
 * posts the receives of each channel in the order its sender sends: a stage sends in the
 * order it runs its ops (exec_order, the same on every rank) and, within an op, in its
 * successors' order (send_outputs). chan_build derives that order here; post_recv posts a
 * channel's earlier receives before the one asked for. Posting early (the next op's
 * receive before this op runs) overlaps the transfer with compute on both paths. */

/* Each channel's receives (pr->chan), from the order every stage runs its ops. */
static lt_status chan_build(pipe_run *pr, const uint32_t *order, lt_error *err) {
    int pp = pr->p->pp;
    pr->chan = calloc((size_t)pp, sizeof *pr->chan);
    pr->chan_n = calloc((size_t)pp, sizeof *pr->chan_n), pr->chan_next = calloc((size_t)pp, sizeof *pr->chan_next);
    if (!pr->chan || !pr->chan_n || !pr->chan_next) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int pass = 0; pass < 2; pass++) { /* count, then fill */
        for (size_t i = 0; i < pr->deps.n_ops; i++) {
            uint32_t u = order[i];
            if (local(pr, u)) continue;
            size_t ns;
            const lt_dep *s = lt_deps_succs(&pr->deps, u, &ns);
            for (size_t k = 0; k < ns; k++) {
                const lt_dep *d = s[k].p2p && local(pr, s[k].op) ? p2p_pred(pr, s[k].op) : NULL;
                if (!d || d->op != u) continue;
                int t = (int)pr->deps.stage[u];
                if (pass == 1) pr->chan[t][pr->chan_next[t]++] = s[k].op;
                else pr->chan_n[t]++;
            }
        }
        for (int t = 0; pass == 0 && t < pp; t++)
            if (pr->chan_n[t] && !(pr->chan[t] = malloc(pr->chan_n[t] * sizeof **pr->chan)))
                return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    }
    memset(pr->chan_next, 0, (size_t)pp * sizeof *pr->chan_next);
    return LT_OK;
}

static void chan_free(pipe_run *pr) {
    for (int t = 0; pr->chan && t < pr->p->pp; t++) free(pr->chan[t]);
    free(pr->chan), free(pr->chan_n), free(pr->chan_next);
    pr->chan = NULL, pr->chan_n = pr->chan_next = NULL;
}

/* Post the receive of local op w's input (from stage t, the channel's next). */
static lt_status post_one(pipe_run *pr, uint32_t w, int t, lt_error *err) {
    int G, me, T;
    lt_status st = local_tokens(pr, pr->deps.op[w], &G, &me, &T, err);
    if (st != LT_OK) return st;
    const lt_backend *be = be_of(pr);
    size_t bytes = (size_t)T * (size_t)pr->m->shape.hidden * be->act_bytes;
    if (bytes == 0) { /* an empty shard: nothing comes (its sender sends nothing either) */
        pr->recv_bytes[w] = SIZE_MAX;
        return LT_OK;
    }
    if (!(pr->recv_buf[w] = be->alloc(be, bytes, false)))
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a %zu-byte transfer", bytes);
    pr->recv_bytes[w] = bytes;
    track(pr, bytes);
    char what[160];
    transfer_name(pr, w, true, what, sizeof what);
    return lt_comm_stage_irecv(pr->comm, t, pr->recv_buf[w], bytes, !be->host, what, &pr->recv_req[w], err);
}

/* Post the receive of local op v's input from the stage before (F) or after (B), after
 * every receive its channel delivers earlier. */
static lt_status post_recv(pipe_run *pr, uint32_t v, lt_error *err) {
    const lt_dep *d = p2p_pred(pr, v);
    if (!d || pr->recv_bytes[v] != 0) return LT_OK; /* no input to receive, or posted */
    int t = (int)d->stage;
    while (pr->chan_next[t] < pr->chan_n[t]) {
        uint32_t w = pr->chan[t][pr->chan_next[t]++];
        lt_status st = post_one(pr, w, t, err);
        if (st != LT_OK || w == v) return st;
    }
    return op_error(pr, v, err, "receives from a stage that never sends to it");
}

/* Wait for v's input and put it where the op reads its predecessor's output: a forward's
 * input as that op's activations (out only), a backward's as its input gradient. */
static lt_status take_recv(pipe_run *pr, uint32_t v, lt_error *err) {
    const lt_dep *d = p2p_pred(pr, v);
    if (!d) return LT_OK;
    lt_status st = post_recv(pr, v, err);
    if (st == LT_OK) st = lt_comm_wait(pr->comm, &pr->recv_req[v], err);
    if (st != LT_OK) return st;
    int G, me, T;
    if ((st = local_tokens(pr, pr->deps.op[v], &G, &me, &T, err)) != LT_OK) return st;
    uint32_t from = d->op;
    float *buf = pr->recv_buf[v];
    size_t bytes = pr->recv_bytes[v] == SIZE_MAX ? 0 : pr->recv_bytes[v];
    pr->recv_buf[v] = NULL;
    lt_acts shell = {.T = buf ? T : 0, .l0 = (int)pr->deps.op[v]->layer_begin, .l1 = (int)pr->deps.op[v]->layer_begin,
                     .out = buf, .buf = buf, .bytes = bytes, .be = be_of(pr)};
    bool fwd = pr->deps.op[v]->kind != LT_OP_B;
    if (G > 1) {
        pr->gsize[from] = G;
        if (fwd && !pr->gacts[from] && !(pr->gacts[from] = calloc((size_t)G, sizeof(lt_acts)))) st = LT_ERR_NOMEM;
        if (!fwd && !pr->gdin[from] && !(pr->gdin[from] = calloc((size_t)G, sizeof(float *)))) st = LT_ERR_NOMEM;
        if (st != LT_OK) {
            be_of(pr)->free(be_of(pr), buf);
            return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        }
        if (fwd) pr->gacts[from][me] = shell;
        else pr->gdin[from][me] = buf;
    } else if (fwd) {
        pr->acts[from] = shell;
    } else {
        pr->din[from] = buf;
    }
    if (!fwd) pr->din_bytes[from] += bytes; /* counted until release(from), as a din made here */
    return LT_OK;
}

/* Post the sends of local op v's output to the stages that read it. */
static lt_status send_outputs(pipe_run *pr, uint32_t v, lt_error *err) {
    size_t ns;
    const lt_dep *s = lt_deps_succs(&pr->deps, v, &ns);
    for (size_t k = 0; k < ns; k++) {
        if (!s[k].p2p) continue;
        int G, me, T;
        lt_status st = local_tokens(pr, pr->deps.op[v], &G, &me, &T, err);
        if (st != LT_OK) return st;
        if (T == 0) continue;
        bool fwd = pr->deps.op[v]->kind != LT_OP_B;
        const float *buf = fwd ? (G > 1 ? (pr->gacts[v] ? pr->gacts[v][me].out : NULL) : pr->acts[v].out)
                               : (G > 1 ? (pr->gdin[v] ? pr->gdin[v][me] : NULL) : pr->din[v]);
        if (!buf) return op_error(pr, v, err, "has no output to send");
        if (pr->n_sends == pr->cap_sends) {
            size_t cap = pr->cap_sends ? 2 * pr->cap_sends : 16;
            struct pending_send *t = realloc(pr->sends, cap * sizeof *t);
            if (!t) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
            pr->sends = t, pr->cap_sends = cap;
        }
        char what[160];
        transfer_name(pr, s[k].op, true, what, sizeof what);
        struct pending_send *ps = &pr->sends[pr->n_sends];
        ps->v = v;
        st = lt_comm_stage_isend(pr->comm, (int)s[k].stage, buf, (size_t)T * (size_t)pr->m->shape.hidden * act_es(pr),
                                 !be_of(pr)->host, what, &ps->req, err);
        if (st != LT_OK) return st;
        pr->n_sends++, pr->sends_of[v]++;
    }
    return LT_OK;
}

/* Release op v's buffers once nothing reads them: no op still to run, no send in flight. */
static void maybe_release(pipe_run *pr, uint32_t v) {
    if (pr->refs[v] == 0 && (!pr->sends_of || pr->sends_of[v] == 0)) release(pr, v);
}

/* Complete the sends that are done (all of them with `all`), releasing what they read. */
static lt_status poll_sends(pipe_run *pr, bool all, lt_error *err) {
    size_t keep = 0;
    lt_status st = LT_OK;
    for (size_t i = 0; i < pr->n_sends; i++) {
        bool done = false;
        if (st == LT_OK) st = all ? lt_comm_wait(pr->comm, &pr->sends[i].req, err) : lt_comm_test(pr->comm, &pr->sends[i].req, &done, err);
        if (st == LT_OK && (all || done)) {
            uint32_t v = pr->sends[i].v;
            pr->sends_of[v]--;
            maybe_release(pr, v);
        } else {
            pr->sends[keep++] = pr->sends[i];
        }
    }
    pr->n_sends = keep;
    return st;
}

static lt_status run_pipeline(pipe_run *pr, lt_error *err) {
    lt_status st = lt_deps_build(&pr->deps, &pr->r->sched, err);
    if (st != LT_OK) {
        lt_error_prefix(err, "step %llu, pipeline %d: ", (unsigned long long)pr->p->step, pr->r->dp_rank);
        return st;
    }
    size_t n = pr->deps.n_ops;
    st = check_ops(pr, err);
    uint32_t *order = malloc((n + 1) * sizeof *order);
    pr->acts = calloc(n + 1, sizeof *pr->acts);
    pr->din = calloc(n + 1, sizeof *pr->din);
    pr->din_bytes = calloc(n + 1, sizeof *pr->din_bytes);
    pr->refs = calloc(n + 1, sizeof *pr->refs);
    pr->path_refs = calloc(n + 1, sizeof *pr->path_refs);
    pr->kept = calloc(n + 1, sizeof *pr->kept);
    pr->gkept = calloc(n + 1, sizeof *pr->gkept);
    pr->x_in = calloc(n + 1, sizeof *pr->x_in);
    pr->acts_T = calloc(n + 1, sizeof *pr->acts_T);
    pr->gacts = calloc(n + 1, sizeof *pr->gacts);
    pr->gdin = calloc(n + 1, sizeof *pr->gdin);
    pr->gsize = calloc(n + 1, sizeof *pr->gsize);
    pr->gxin = calloc(n + 1, sizeof *pr->gxin);
    pr->gxin_bytes = calloc(n + 1, sizeof *pr->gxin_bytes);
    if (pr->comm) {
        pr->recv_req = calloc(n + 1, sizeof *pr->recv_req);
        pr->recv_buf = calloc(n + 1, sizeof *pr->recv_buf);
        pr->recv_bytes = calloc(n + 1, sizeof *pr->recv_bytes);
        pr->sends_of = calloc(n + 1, sizeof *pr->sends_of);
        if (st == LT_OK && (!pr->recv_req || !pr->recv_buf || !pr->recv_bytes || !pr->sends_of))
            st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %zu ops", n);
        pr->cur_stage = pr->my_stage;
    }
    if (st == LT_OK && (!order || !pr->acts || !pr->din || !pr->din_bytes || !pr->refs || !pr->path_refs || !pr->kept || !pr->gkept ||
                        !pr->x_in || !pr->acts_T || !pr->gacts || !pr->gdin || !pr->gsize || !pr->gxin ||
                        !pr->gxin_bytes))
        st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %zu ops", n);
    if (st == LT_OK) st = exec_order(&pr->deps, pr->r, pr->p->step, order, err);
    if (st == LT_OK && pr->comm) st = chan_build(pr, order, err);
    if (st == LT_OK) /* readers of each op's buffers here: model-path and activation successors */
        for (uint32_t v = 0; v < n; v++) {
            size_t ns;
            const lt_dep *s = lt_deps_succs(&pr->deps, v, &ns);
            for (size_t k = 0; k < ns; k++) {
                pr->refs[v] += (s[k].kind == LT_DEP_PATH || s[k].kind == LT_DEP_ACT) && local(pr, s[k].op);
                pr->path_refs[v] += s[k].kind == LT_DEP_PATH && local(pr, s[k].op);
            }
        }
    pr->last_b = LT_DEP_NONE;
    for (size_t i = 0; st == LT_OK && pr->comm && i < n; i++)
        if (local(pr, order[i]) && pr->deps.op[order[i]]->kind == LT_OP_B) pr->last_b = order[i];
    size_t ns_all = pr->p->n_samples;
    pr->kv_last = calloc((size_t)pr->p->pp * ns_all + 1, sizeof *pr->kv_last);
    if (st == LT_OK && !pr->kv_last) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (size_t i = 0; st == LT_OK && i < (size_t)pr->p->pp * ns_all; i++) pr->kv_last[i] = LT_DEP_NONE;
    for (size_t i = 0; st == LT_OK && i < n; i++) {
        uint32_t v = order[i];
        if (!local(pr, v) || skipped(pr, v) || pr->deps.op[v]->kind != LT_OP_B) continue;
        size_t nsl;
        const lt_slice *sl = lt_schedule_op_slices(&pr->r->sched, pr->deps.op[v], &nsl);
        for (size_t k = 0; k < nsl; k++) pr->kv_last[(size_t)pr->deps.stage[v] * ns_all + (size_t)sl[k].sample] = v;
    }
    uint32_t next_local = 0; /* distributed: position in order of the next op of this stage */
    for (size_t i = 0; st == LT_OK && i < n; i++) {
        uint32_t v = order[i];
        if (!local(pr, v)) continue;
        if (pr->comm) { /* this op's input; then post the next op's receive, to overlap with this op */
            st = take_recv(pr, v, err);
            for (next_local = (uint32_t)i + 1; next_local < n && !local(pr, order[next_local]); next_local++) {}
            if (st == LT_OK && next_local < n) st = post_recv(pr, order[next_local], err);
            if (st != LT_OK) break;
        }
        if (skipped(pr, v)) {
            pr->stats->ops_skipped++;
        } else {
            double start = now_s() - pr->t0;
            pr->cur_stage = (int)pr->deps.stage[v];
            int G = group_of(pr, pr->deps.op[v]);
            bool b = pr->deps.op[v]->kind == LT_OP_B;
            st = G > 1 ? (b ? run_backward_group(pr, v, G, err) : run_forward_group(pr, v, G, err))
                       : (b ? run_backward(pr, v, err) : run_forward(pr, v, err));
            if (st == LT_OK && b) { /* a sample whose last backward on this stage this was: its K/V go */
                size_t nsl;
                const lt_op *op = pr->deps.op[v];
                const lt_slice *sl = lt_schedule_op_slices(&pr->r->sched, op, &nsl);
                for (size_t k = 0; k < nsl; k++)
                    if (pr->kv_last[(size_t)pr->deps.stage[v] * ns_all + (size_t)sl[k].sample] == v)
                        (void)lt_kvctx_release(pr->kv, sl[k].sample, (int)op->layer_begin, (int)op->layer_end);
            }
            pr->stats->ops_run++;
            lt_exec_stats *es = pr->stats;
            if (es->n_op_times == pr->cap_times) {
                size_t cap = pr->cap_times ? 2 * pr->cap_times : 64;
                lt_measured_op *t = realloc(es->op_times, cap * sizeof *t);
                if (!t && st == LT_OK) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
                if (t) es->op_times = t, pr->cap_times = cap;
            }
            if (es->n_op_times < pr->cap_times) {
                int stage;
                size_t idx;
                lt_deps_op_at(&pr->deps, v, &stage, &idx);
                es->op_times[es->n_op_times++] = (lt_measured_op){.dp_rank = pr->r->dp_rank, .stage = stage,
                                                                  .seq = (uint32_t)idx, .start_s = start,
                                                                  .finish_s = now_s() - pr->t0};
            }
        }
        if (st == LT_OK && pr->comm) st = send_outputs(pr, v, err);
        /* sends completed by now (their receiver may have run long since: this op waited for
         * its input) release what they read before the drops below look at them */
        if (st == LT_OK && pr->comm) st = poll_sends(pr, false, err);
        size_t np;
        const lt_dep *p = lt_deps_preds(&pr->deps, v, &np);
        bool b_ran = pr->deps.op[v]->kind == LT_OP_B && !skipped(pr, v);
        for (size_t k = 0; st == LT_OK && k < np; k++) {
            uint32_t f = p[k].op;
            if ((p[k].kind != LT_DEP_PATH && p[k].kind != LT_DEP_ACT) || pr->refs[f] == 0) continue;
            if (p[k].kind == LT_DEP_PATH && pr->path_refs[f] > 0) pr->path_refs[f]--;
            if (--pr->refs[f] == 0) maybe_release(pr, f);
            else if (p[k].kind == LT_DEP_ACT && b_ran) st = drop_consumed(pr, v, f, err); /* another B still reads f */
        }
        if (st == LT_OK) maybe_release(pr, v);
    }
    if (pr->comm) { /* the last sends complete before the buffers go; receives never taken are dropped */
        if (st == LT_OK) st = poll_sends(pr, true, err); /* (after an error the job aborts) */
        for (size_t v = 0; pr->recv_req && pr->recv_buf && v < n; v++) {
            free(pr->recv_req[v]);
            be_of(pr)->free(be_of(pr), pr->recv_buf[v]); /* backend memory */
        }
        free(pr->recv_req), free(pr->recv_buf), free(pr->recv_bytes), free(pr->sends_of), free(pr->sends);
        pr->recv_req = NULL, pr->recv_buf = NULL, pr->recv_bytes = NULL, pr->sends_of = NULL, pr->sends = NULL;
        chan_free(pr);
        pr->n_sends = pr->cap_sends = 0;
    }
    for (size_t v = 0; pr->acts && pr->din && pr->din_bytes && pr->x_in && pr->acts_T && pr->gacts && pr->gdin && pr->gsize && pr->gxin &&
                            pr->gxin_bytes && pr->kept && pr->gkept && v < n; v++)
        release(pr, (uint32_t)v);
    free(pr->kv_last), pr->kv_last = NULL;
    free(order), free(pr->acts), free(pr->din), free(pr->din_bytes), free(pr->refs), free(pr->path_refs), free(pr->x_in), free(pr->acts_T);
    free(pr->kept), free(pr->gkept);
    free(pr->gacts), free(pr->gdin), free(pr->gsize), free(pr->gxin), free(pr->gxin_bytes);
    pr->acts = NULL, pr->din = NULL, pr->din_bytes = NULL, pr->refs = NULL, pr->path_refs = NULL, pr->x_in = NULL, pr->acts_T = NULL;
    pr->kept = NULL, pr->gkept = NULL;
    pr->gacts = NULL, pr->gdin = NULL, pr->gsize = NULL, pr->gxin = NULL, pr->gxin_bytes = NULL;
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

lt_status lt_exec_check_layout(const lt_step_plan *p, const lt_comm_layout *l, lt_error *err) {
    int dp = 0;
    for (size_t r = 0; r < p->n_ranks; r++) dp += p->ranks[r].cp > 1 ? p->ranks[r].cp : 1;
    if (dp != l->dp || p->pp != l->pp)
        return lt_fail(err, LT_ERR_INPUT, NULL, "step %llu was planned for %d DP ranks x %d stages; this job runs %d x %d "
                       "(parallel.dp, parallel.pp: plan and train with the same layout)",
                       (unsigned long long)p->step, dp, p->pp, l->dp, l->pp);
    return LT_OK;
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
        lt_status st = lt_exec_check_layout(p, lay, err);
        if (st == LT_OK) st = lt_comm_barrier(comm, err); /* the step starts together (op times share a zero) */
        if (st != LT_OK) return st;
    }
    lt_kvctx kv;
    lt_status st = lt_kvctx_init(&kv, m, &b, true, err);
    if (st != LT_OK) return st;
    size_t cells = (size_t)p->pp * p->n_samples;
    int64_t *f_tokens = calloc(cells, sizeof *f_tokens), *b_tokens = calloc(cells, sizeof *b_tokens);
    if (!f_tokens || !b_tokens) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    pipe_run pr = {.m = m, .p = p, .b = &b, .grads = grads, .kv = &kv, .pool = pool, .f_tokens = f_tokens,
                   .b_tokens = b_tokens, .stats = stats, .t0 = now_s(), .comm = comm, .eh = eh};
    if (lay) pr.my_dp = lay->dp_rank, pr.my_stage = lay->stage;
    pr.meter = (lt_meter){.ctx = &pr, .add = meter_add, .sub = meter_sub};
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
        if (st == LT_OK) st = lt_comm_allreduce(comm, LT_COMM_WORLD, f_tokens, cells, LT_COMM_I64, false, err);
        if (st == LT_OK) st = lt_comm_allreduce(comm, LT_COMM_WORLD, b_tokens, cells, LT_COMM_I64, false, err);
        if (st == LT_OK) st = lt_comm_allreduce(comm, LT_COMM_WORLD, &stats->loss_sum, 1, LT_COMM_F64, false, err);
    }
    /* every token once forward and once backward on every stage (DESIGN.md "Lossless") */
    for (size_t c = 0; st == LT_OK && c < cells; c++) {
        size_t i = c % p->n_samples;
        int stage = (int)(c / p->n_samples);
        if (f_tokens[c] != p->lengths[i] || b_tokens[c] != p->lengths[i])
            st = lt_fail(err, LT_ERR_INPUT, NULL, "step %llu, sample %zu (%lld tokens), stage %d: %lld tokens forwarded "
                         "and %lld backwarded, not each token once", step, i, (long long)p->lengths[i], stage,
                         (long long)f_tokens[c], (long long)b_tokens[c]);
    }
    stats->seconds = now_s() - pr.t0;
    lt_deps_free(&pr.deps);
    free(pr.tslices);
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
