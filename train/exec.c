/*
 * train/exec.c — one step of a plan, every pipeline and stage in this process
 * (train/exec.h).
 *
 * Per pipeline: the dependency graph of its schedule (plans/deps.h), an execution order
 * (Kahn's algorithm, ready ops by predicted start), then the ops. Buffers are reference
 * counted by the edges that read them: an F's activations by its model-path and activation
 * successors, a B's input gradient by its model-path successor; each is freed once the
 * last of them has run, so the activations held at once are what the schedule keeps.
 */
#include "train/exec.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plans/deps.h"     /* lt_deps_build, lt_deps_preds, lt_deps_succs */
#include "plans/schedule.h" /* lt_schedule_op_slices, lt_op */

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
    float **x_in;    /* [n_ops] F ops with recompute over a range not starting at layer 0: the
                        input [T, C] of their first (recomputed) layer, all they keep of it */
    uint32_t *refs;  /* [n_ops] readers still to run of acts[v] / din[v] / x_in[v] */
    int *acts_T;     /* [n_ops] rows of x_in[v] */
    size_t live, peak;
    size_t *live_stage, *peak_stage; /* [pp] the same per stage of the pipeline */
    int cur_stage;                   /* the stage of the op running */
    int64_t *f_tokens, *b_tokens; /* [pp x n_samples] tokens through each stage, per sample */
    lt_exec_stats *stats;
    double t0;               /* the step's start (now_s) */
    size_t cap_times;
    lt_train_slice *tslices; /* scratch: an op's unit as train slices */
    size_t cap_tslices;
} pipe_run;

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
    for (int g = 0; pr->gdin[v] && g < pr->gsize[v]; g++) free(pr->gdin[v][g]);
    free(pr->gacts[v]), free(pr->gdin[v]);
    pr->gacts[v] = NULL, pr->gdin[v] = NULL;
    if (pr->acts[v].T > 0) {
        untrack(pr, pr->acts[v].bytes, (int)pr->deps.stage[v]);
        lt_acts_free(&pr->acts[v]);
        memset(&pr->acts[v], 0, sizeof pr->acts[v]);
    }
    free(pr->din[v]);
    pr->din[v] = NULL;
    if (pr->x_in[v]) untrack(pr, (size_t)pr->acts_T[v] * (size_t)pr->m->shape.hidden * sizeof(float), (int)pr->deps.stage[v]);
    for (int g = 0; pr->gxin[v] && g < pr->gsize[v]; g++) {
        if (pr->gxin[v][g]) untrack(pr, pr->gxin_bytes[v][g], (int)pr->deps.stage[v]);
        free(pr->gxin[v][g]);
    }
    free(pr->gxin[v]), free(pr->gxin_bytes[v]);
    pr->gxin[v] = NULL, pr->gxin_bytes[v] = NULL;
    free(pr->x_in[v]);
    pr->x_in[v] = NULL;
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
    pr->live -= bytes;
    pr->live_stage[stage] -= bytes;
}

/* Forward of a unit through pass `pass` into new activations *a (input `in`). */
static lt_status forward_pass(pipe_run *pr, const lt_pass *pass, const lt_train_unit *u, const float *in, lt_acts *a,
                              double *loss, lt_error *err) {
    lt_status st = lt_acts_alloc(a, pr->m, pr->b, u, pass->l0, pass->l1, pass->head, err);
    if (st == LT_OK) st = lt_llama_forward(pr->m, pass, pr->b, u, in, pr->kv, a, pr->grads, loss, NULL, pr->pool, err);
    return st;
}

/* F or FK op v. With R = recompute_of(op) > 0 (plans/plan.h: the first R layers of the
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
            size_t bytes = (size_t)T * (size_t)pr->m->shape.hidden * sizeof(float);
            if (!(pr->x_in[v] = malloc(bytes))) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
            memcpy(pr->x_in[v], in, bytes);
            pr->acts_T[v] = T;
            track(pr, bytes);
        }
        lt_pass pa = {.l0 = l0, .l1 = l0 + R, .embed = l0 == 0};
        st = forward_pass(pr, &pa, &u, in, &scratch, NULL, err);
        track(pr, scratch.bytes);
        in = scratch.out;
    }
    lt_pass pass = {.l0 = l0 + R, .l1 = l1, .embed = l0 + R == 0, .head = l1 == layers && with_loss};
    pass.loss_scale = pass.head ? (float)(1.0 / (double)pr->p->n_predicted) : 0.0f;
    double loss = 0;
    if (st == LT_OK) st = forward_pass(pr, &pass, &u, in, &pr->acts[v], &loss, err);
    if (pr->acts[v].T > 0) track(pr, pr->acts[v].bytes);
    if (scratch.T > 0) untrack(pr, scratch.bytes, pr->cur_stage);
    lt_acts_free(&scratch);
    if (st != LT_OK) return st;
    if (pass.head) pr->stats->loss_sum += loss;
    if (with_loss) count_tokens(pr, pr->f_tokens, stage, &u);
    return LT_OK;
}

/* For each row of B op v's unit (an asymmetric schedule's backward unit), the F op and the
 * row there holding the same token: from the forward units its LT_DEP_ACT edges name. */
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
                    src_row[row0 + (t - bs->begin)] = frow + (t - (int)fs[j].begin);
                }
            }
        }
        row0 += bs->end - bs->begin;
    }
    if (filled != row0) return op_error(pr, v, err, "some of its tokens were not forwarded on its stage");
    return LT_OK;
}

/* What B op v needs from the forward, for its unit u: the activations of layers
 * [l0 + R, l1) in *a (acts of its F, or for an asymmetric unit rows gathered into
 * *gathered), and for R > 0 the input of layer l0 in *x (the F's kept x_in, or gathered;
 * NULL on the first stage). */
static lt_status forward_state(pipe_run *pr, uint32_t v, const lt_train_unit *u, int R, bool head, lt_acts **a,
                               lt_acts *gathered, float **x, bool *x_owned, lt_error *err) {
    const lt_op *op = pr->deps.op[v];
    int l0 = (int)op->layer_begin, C = pr->m->shape.hidden;
    *x = NULL, *x_owned = false;
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
    uint32_t *src_op = malloc((size_t)T * sizeof *src_op);
    int *src_row = malloc((size_t)T * sizeof *src_row);
    lt_status st = src_op && src_row ? map_rows(pr, v, u, src_op, src_row, err)
                                     : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int t = 0; st == LT_OK && t < T; t++) {
        const lt_acts *src = &pr->acts[src_op[t]];
        if (src->T == 0) st = op_error(pr, v, err, "the activations of its forward unit are gone");
        else if (recompute_of(pr->deps.op[src_op[t]]) != R)
            st = op_error(pr, v, err, "recomputes another number of layers than a forward it takes rows from kept");
        else if (R > 0 && l0 > 0 && !pr->x_in[src_op[t]])
            st = op_error(pr, v, err, "a forward it takes rows from kept no input to recompute from");
    }
    if (st == LT_OK) st = lt_acts_alloc(gathered, pr->m, pr->b, u, l0 + R, (int)op->layer_end, head, err);
    for (int t = 0; st == LT_OK && t < T; t++)
        st = lt_acts_copy_row(gathered, t, &pr->acts[src_op[t]], src_row[t], pr->m, err);
    if (st == LT_OK && R > 0 && l0 > 0) {
        if (!(*x = malloc((size_t)T * (size_t)C * sizeof(float)))) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        else *x_owned = true;
        for (int t = 0; st == LT_OK && t < T; t++)
            memcpy(*x + (size_t)t * C, pr->x_in[src_op[t]] + (size_t)src_row[t] * C, (size_t)C * sizeof(float));
    }
    free(src_op), free(src_row);
    *a = gathered;
    return st;
}

/* B op v: with R > 0, first the forward of the recomputed layers [l0, l0 + R) again from
 * their kept input (their K/V rewritten with the same values), then the backward of
 * [l0 + R, l1) and of [l0, l0 + R). */
static lt_status run_backward(pipe_run *pr, uint32_t v, lt_error *err) {
    const lt_op *op = pr->deps.op[v];
    int stage = (int)pr->deps.stage[v], layers = pr->m->shape.layers;
    lt_train_unit u;
    lt_status st = unit_of(pr, op, &u, err);
    if (st != LT_OK) return st;
    int l0 = (int)op->layer_begin, l1 = (int)op->layer_end, R = recompute_of(op);
    float scale = (float)(1.0 / (double)pr->p->n_predicted);
    lt_pass pb = {.l0 = l0 + R, .l1 = l1, .embed = l0 + R == 0, .head = l1 == layers};
    pb.loss_scale = pb.head ? scale : 0.0f;
    const float *dout = NULL;
    if (!pb.head) {
        uint32_t from = pred_of_kind(&pr->deps, v, LT_DEP_PATH);
        if (from == LT_DEP_NONE || !pr->din[from]) return op_error(pr, v, err, "no gradient from the stage after");
        dout = pr->din[from];
    }
    lt_acts gathered = {0}, redo = {0}, *a = NULL;
    float *x = NULL, *dmid = NULL;
    bool x_owned = false;
    st = forward_state(pr, v, &u, R, pb.head, &a, &gathered, &x, &x_owned, err);
    if (gathered.T > 0) track(pr, gathered.bytes);
    size_t TC = (size_t)lt_unit_tokens(&u) * (size_t)pr->m->shape.hidden;
    lt_pass pa = {.l0 = l0, .l1 = l0 + R, .embed = l0 == 0};
    if (st == LT_OK && R > 0) {
        st = forward_pass(pr, &pa, &u, x, &redo, NULL, err);
        track(pr, redo.bytes);
        if (st == LT_OK && !(dmid = calloc(TC, sizeof(float))))
            st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a gradient");
    }
    if (st == LT_OK && l0 > 0 && !(pr->din[v] = calloc(TC, sizeof(float))))
        st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a %zu-float input gradient", TC);
    if (st == LT_OK)
        st = lt_llama_backward(pr->m, &pb, pr->b, &u, dout, pr->kv, a, pr->grads, R > 0 ? dmid : pr->din[v], pr->pool,
                               err);
    if (st == LT_OK && R > 0)
        st = lt_llama_backward(pr->m, &pa, pr->b, &u, dmid, pr->kv, &redo, pr->grads, pr->din[v], pr->pool, err);
    if (gathered.T > 0) untrack(pr, gathered.bytes, pr->cur_stage);
    if (redo.T > 0) untrack(pr, redo.bytes, pr->cur_stage);
    lt_acts_free(&gathered), lt_acts_free(&redo);
    free(dmid);
    if (x_owned) free(x);
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
    lt_train_slice *sl; /* [G][2 x slices] */
    lt_train_unit *u;   /* [G] member shards */
    int *active;        /* [n_active] members holding tokens */
} group_units;

static void group_free(group_units *gu) {
    free(gu->sl), free(gu->u), free(gu->active);
    memset(gu, 0, sizeof *gu);
}

static lt_status group_units_of(const pipe_run *pr, const lt_op *op, int G, group_units *gu, lt_error *err) {
    size_t n;
    (void)lt_schedule_op_slices(&pr->r->sched, op, &n);
    gu->G = G, gu->n_active = 0;
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
    return LT_OK;
}

/* Runs pass over the active members of gu: allocates their activations in a[0..n_active)
 * (compact), forward in lockstep. */
static lt_status group_forward(pipe_run *pr, const lt_pass *pass, const group_units *gu, const float **cin,
                               lt_acts *ca, double *loss, lt_error *err) {
    lt_train_unit *cu = calloc((size_t)gu->G, sizeof *cu);
    lt_status st = cu ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int i = 0; st == LT_OK && i < gu->n_active; i++) {
        cu[i] = gu->u[gu->active[i]];
        st = lt_acts_alloc(&ca[i], pr->m, pr->b, &cu[i], pass->l0, pass->l1, pass->head, err);
        track(pr, ca[i].bytes);
    }
    if (st == LT_OK && gu->n_active > 0)
        st = lt_llama_forward_group(pr->m, pass, pr->b, cu, gu->n_active, cin, pr->kv, ca, pr->grads, loss, pr->pool,
                                    err);
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
            for (int i = 0; st == LT_OK && i < gu.n_active; i++) {
                int g = gu.active[i];
                size_t bytes = (size_t)lt_unit_tokens(&gu.u[g]) * C * sizeof(float);
                if (!(pr->gxin[v][g] = malloc(bytes))) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
                else memcpy(pr->gxin[v][g], cin[i], bytes), pr->gxin_bytes[v][g] = bytes, track(pr, bytes);
            }
        }
        lt_pass pa = {.l0 = l0, .l1 = l0 + R, .embed = l0 == 0};
        if (st == LT_OK) st = group_forward(pr, &pa, &gu, cin, cs, NULL, err);
        for (int i = 0; st == LT_OK && i < gu.n_active; i++) cin[i] = cs[i].out;
    }
    lt_pass pass = {.l0 = l0 + R, .l1 = l1, .embed = l0 + R == 0, .head = l1 == layers && with_loss};
    pass.loss_scale = pass.head ? (float)(1.0 / (double)pr->p->n_predicted) : 0.0f;
    double loss = 0;
    if (st == LT_OK) st = group_forward(pr, &pass, &gu, cin, ca, &loss, err);
    for (int i = 0; pr->gacts[v] && ca && i < gu.n_active; i++) pr->gacts[v][gu.active[i]] = ca[i];
    for (int i = 0; cs && i < gu.n_active; i++) {
        untrack(pr, cs[i].bytes, pr->cur_stage);
        lt_acts_free(&cs[i]);
    }
    if (st == LT_OK && pass.head) pr->stats->loss_sum += loss;
    for (int i = 0; st == LT_OK && with_loss && i < gu.n_active; i++)
        count_tokens(pr, pr->f_tokens, stage, &gu.u[gu.active[i]]);
    free(ca), free(cs), free(cin);
    group_free(&gu);
    return st;
}

/* Member unit bu's activations over [l0, l1) gathered into *dst from the group forward ops
 * that hold its tokens (v's LT_DEP_ACT predecessors, each member's shard), and with x != NULL
 * the rows of their kept inputs (gxin) into x [T, C]. R: the recompute count every such
 * forward must have kept by. */
static lt_status gather_group(pipe_run *pr, uint32_t v, int G, int R, const lt_train_unit *bu, int l0, bool head,
                              lt_acts *dst, float *x, lt_error *err) {
    const lt_op *op = pr->deps.op[v];
    lt_status st = lt_acts_alloc(dst, pr->m, pr->b, bu, l0, (int)op->layer_end, head, err);
    if (st != LT_OK) return st;
    size_t np, C = (size_t)pr->m->shape.hidden;
    const lt_dep *p = lt_deps_preds(&pr->deps, v, &np);
    int filled = 0;
    for (size_t k = 0; st == LT_OK && k < np; k++) {
        if (p[k].kind != LT_DEP_ACT) continue;
        uint32_t f = p[k].op;
        if (!pr->gacts[f] || pr->gsize[f] != G) return op_error(pr, v, err, "its forward ran outside its group");
        if (recompute_of(pr->deps.op[f]) != R)
            return op_error(pr, v, err, "recomputes another number of layers than a forward it takes rows from kept");
        if (x && !pr->gxin[f]) return op_error(pr, v, err, "a forward it takes rows from kept no input to recompute from");
        group_units fu;
        st = group_units_of(pr, pr->deps.op[f], G, &fu, err);
        for (int h = 0; st == LT_OK && h < G; h++) {
            const lt_train_unit *su = &fu.u[h];
            int srow = 0;
            for (int j = 0; st == LT_OK && j < su->n_slices; srow += su->slices[j].end - su->slices[j].begin, j++) {
                int brow = 0;
                for (int i = 0; st == LT_OK && i < bu->n_slices; brow += bu->slices[i].end - bu->slices[i].begin, i++) {
                    const lt_train_slice *a = &bu->slices[i], *b = &su->slices[j];
                    if (a->sample != b->sample) continue;
                    int lo = a->begin > b->begin ? a->begin : b->begin, hi = a->end < b->end ? a->end : b->end;
                    for (int t = lo; st == LT_OK && t < hi; t++, filled++) {
                        int dr = brow + (t - a->begin), sr = srow + (t - b->begin);
                        st = lt_acts_copy_row(dst, dr, &pr->gacts[f][h], sr, pr->m, err);
                        if (st == LT_OK && x)
                            memcpy(x + (size_t)dr * C, pr->gxin[f][h] + (size_t)sr * C, C * sizeof(float));
                    }
                }
            }
        }
        group_free(&fu);
    }
    if (st == LT_OK && filled != dst->T) return op_error(pr, v, err, "some of its tokens were not forwarded in its group");
    return st;
}

/* B op v of a group of G: every member's shard (of the backward unit, which an asymmetric
 * schedule cuts differently: rows gathered from the forward shards) backward in lockstep;
 * with recompute R > 0, first the forward of the first R layers again from the kept inputs. */
static lt_status run_backward_group(pipe_run *pr, uint32_t v, int G, lt_error *err) {
    const lt_op *op = pr->deps.op[v];
    int stage = (int)pr->deps.stage[v], layers = pr->m->shape.layers;
    int l0 = (int)op->layer_begin, l1 = (int)op->layer_end, R = recompute_of(op);
    float scale = (float)(1.0 / (double)pr->p->n_predicted);
    lt_pass pb = {.l0 = l0 + R, .l1 = l1, .embed = l0 + R == 0, .head = l1 == layers};
    pb.loss_scale = pb.head ? scale : 0.0f;
    lt_pass pa = {.l0 = l0, .l1 = l0 + R, .embed = l0 == 0};
    uint32_t from = LT_DEP_NONE;
    if (!pb.head) {
        from = pred_of_kind(&pr->deps, v, LT_DEP_PATH);
        if (from == LT_DEP_NONE || !pr->gdin[from] || pr->gsize[from] != G)
            return op_error(pr, v, err, "no gradient from the stage after");
    }
    group_units gu;
    lt_status st = group_units_of(pr, op, G, &gu, err);
    if (st != LT_OK) return st;
    lt_acts *ca = calloc((size_t)G, sizeof *ca), *cr = calloc((size_t)G, sizeof *cr);
    lt_train_unit *cu = calloc((size_t)G, sizeof *cu);
    const float **cdout = calloc((size_t)G, sizeof *cdout), **cx = calloc((size_t)G, sizeof *cx);
    float **cdin = calloc((size_t)G, sizeof *cdin), **cmid = calloc((size_t)G, sizeof *cmid);
    float **xs = calloc((size_t)G, sizeof *xs);
    pr->gsize[v] = G;
    if (l0 > 0) pr->gdin[v] = calloc((size_t)G, sizeof(float *));
    if (!ca || !cr || !cu || !cdout || !cx || !cdin || !cmid || !xs || (l0 > 0 && !pr->gdin[v]))
        st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    size_t C = (size_t)pr->m->shape.hidden;
    for (int i = 0; st == LT_OK && i < gu.n_active; i++) {
        int g = gu.active[i];
        cu[i] = gu.u[g];
        size_t TC = (size_t)lt_unit_tokens(&cu[i]) * C;
        if (R > 0 && l0 > 0 && !(xs[i] = malloc(TC * sizeof(float))))
            st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        if (st == LT_OK) st = gather_group(pr, v, G, R, &cu[i], l0 + R, pb.head, &ca[i], xs[i], err);
        track(pr, ca[i].bytes);
        cx[i] = xs[i];
        if (st == LT_OK && !pb.head && !(cdout[i] = pr->gdin[from][g]))
            st = op_error(pr, v, err, "no gradient from the stage after for a member");
        if (st == LT_OK && l0 > 0 && !(cdin[i] = pr->gdin[v][g] = calloc(TC, sizeof(float))))
            st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        if (st == LT_OK && R > 0 && !(cmid[i] = calloc(TC, sizeof(float))))
            st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    }
    if (st == LT_OK && R > 0) st = group_forward(pr, &pa, &gu, cx, cr, NULL, err);
    if (st == LT_OK && gu.n_active > 0)
        st = lt_llama_backward_group(pr->m, &pb, pr->b, cu, gu.n_active, pb.head ? NULL : cdout, pr->kv, ca, pr->grads,
                                     R > 0 ? cmid : (l0 > 0 ? cdin : NULL), pr->pool, err);
    if (st == LT_OK && R > 0 && gu.n_active > 0)
        st = lt_llama_backward_group(pr->m, &pa, pr->b, cu, gu.n_active, (const float *const *)cmid, pr->kv, cr,
                                     pr->grads, l0 > 0 ? cdin : NULL, pr->pool, err);
    for (int i = 0; st == LT_OK && i < gu.n_active; i++) count_tokens(pr, pr->b_tokens, stage, &cu[i]);
    for (int i = 0; ca && cr && i < gu.n_active; i++) {
        untrack(pr, ca[i].bytes + cr[i].bytes, pr->cur_stage);
        lt_acts_free(&ca[i]), lt_acts_free(&cr[i]);
        if (cmid) free(cmid[i]);
        if (xs) free(xs[i]);
    }
    free(ca), free(cr), free(cu), free(cdout), free(cx), free(cdin), free(cmid), free(xs);
    group_free(&gu);
    return st;
}

/* Op v of a DP-Merge unit on a member that is not the group's first: skipped (exec.h). */
static bool skipped(const pipe_run *pr, uint32_t v) {
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

static lt_status run_pipeline(pipe_run *pr, lt_error *err) {
    lt_status st = lt_deps_build(&pr->deps, &pr->r->sched, err);
    if (st != LT_OK) {
        lt_error_prefix(err, "step %llu, pipeline %d", (unsigned long long)pr->p->step, pr->r->dp_rank);
        return st;
    }
    size_t n = pr->deps.n_ops;
    st = check_ops(pr, err);
    uint32_t *order = malloc((n + 1) * sizeof *order);
    pr->acts = calloc(n + 1, sizeof *pr->acts);
    pr->din = calloc(n + 1, sizeof *pr->din);
    pr->refs = calloc(n + 1, sizeof *pr->refs);
    pr->x_in = calloc(n + 1, sizeof *pr->x_in);
    pr->acts_T = calloc(n + 1, sizeof *pr->acts_T);
    pr->gacts = calloc(n + 1, sizeof *pr->gacts);
    pr->gdin = calloc(n + 1, sizeof *pr->gdin);
    pr->gsize = calloc(n + 1, sizeof *pr->gsize);
    pr->gxin = calloc(n + 1, sizeof *pr->gxin);
    pr->gxin_bytes = calloc(n + 1, sizeof *pr->gxin_bytes);
    if (st == LT_OK && (!order || !pr->acts || !pr->din || !pr->refs || !pr->x_in || !pr->acts_T || !pr->gacts ||
                        !pr->gdin || !pr->gsize || !pr->gxin || !pr->gxin_bytes))
        st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %zu ops", n);
    if (st == LT_OK) st = exec_order(&pr->deps, pr->r, pr->p->step, order, err);
    if (st == LT_OK) /* readers of each op's buffers: model-path and activation successors */
        for (uint32_t v = 0; v < n; v++) {
            size_t ns;
            const lt_dep *s = lt_deps_succs(&pr->deps, v, &ns);
            for (size_t k = 0; k < ns; k++) pr->refs[v] += s[k].kind == LT_DEP_PATH || s[k].kind == LT_DEP_ACT;
        }
    for (size_t i = 0; st == LT_OK && i < n; i++) {
        uint32_t v = order[i];
        if (skipped(pr, v)) {
            pr->stats->ops_skipped++;
        } else {
            double start = now_s() - pr->t0;
            pr->cur_stage = (int)pr->deps.stage[v];
            int G = group_of(pr, pr->deps.op[v]);
            bool b = pr->deps.op[v]->kind == LT_OP_B;
            st = G > 1 ? (b ? run_backward_group(pr, v, G, err) : run_forward_group(pr, v, G, err))
                       : (b ? run_backward(pr, v, err) : run_forward(pr, v, err));
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
        size_t np;
        const lt_dep *p = lt_deps_preds(&pr->deps, v, &np);
        for (size_t k = 0; st == LT_OK && k < np; k++)
            if ((p[k].kind == LT_DEP_PATH || p[k].kind == LT_DEP_ACT) && --pr->refs[p[k].op] == 0)
                release(pr, p[k].op);
        if (pr->refs[v] == 0) release(pr, v);
    }
    for (size_t v = 0; pr->acts && pr->din && pr->x_in && pr->acts_T && pr->gacts && pr->gdin && pr->gsize && pr->gxin &&
                            pr->gxin_bytes && v < n; v++)
        release(pr, (uint32_t)v);
    free(order), free(pr->acts), free(pr->din), free(pr->refs), free(pr->x_in), free(pr->acts_T);
    free(pr->gacts), free(pr->gdin), free(pr->gsize), free(pr->gxin), free(pr->gxin_bytes);
    pr->acts = NULL, pr->din = NULL, pr->refs = NULL, pr->x_in = NULL, pr->acts_T = NULL;
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

lt_status lt_exec_step(const lt_llama *m, const lt_step_plan *p, const lt_train_sample *samples,
                       const lt_llama_views *grads, lt_exec_stats *stats, lt_pool *pool, lt_error *err) {
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
    lt_kvctx kv;
    lt_status st = lt_kvctx_init(&kv, m, &b, true, err);
    if (st != LT_OK) return st;
    size_t cells = (size_t)p->pp * p->n_samples;
    int64_t *f_tokens = calloc(cells, sizeof *f_tokens), *b_tokens = calloc(cells, sizeof *b_tokens);
    if (!f_tokens || !b_tokens) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    pipe_run pr = {.m = m, .p = p, .b = &b, .grads = grads, .kv = &kv, .pool = pool, .f_tokens = f_tokens,
                   .b_tokens = b_tokens, .stats = stats, .t0 = now_s()};
    pr.live_stage = calloc((size_t)p->pp, sizeof(size_t));
    pr.peak_stage = calloc((size_t)p->pp, sizeof(size_t));
    stats->stage_peak_bytes = calloc((size_t)p->pp, sizeof(size_t));
    stats->n_stages = p->pp;
    if (st == LT_OK && (!pr.live_stage || !pr.peak_stage || !stats->stage_peak_bytes))
        st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (size_t r = 0; st == LT_OK && r < p->n_ranks; r++) {
        pr.ri = r, pr.r = &p->ranks[r], pr.live = pr.peak = 0;
        memset(pr.live_stage, 0, (size_t)p->pp * sizeof(size_t));
        memset(pr.peak_stage, 0, (size_t)p->pp * sizeof(size_t));
        st = run_pipeline(&pr, err);
        if (pr.peak > stats->act_bytes_peak) stats->act_bytes_peak = pr.peak;
        for (int g = 0; g < p->pp; g++)
            if (pr.peak_stage[g] > stats->stage_peak_bytes[g]) stats->stage_peak_bytes[g] = pr.peak_stage[g];
    }
    free(pr.live_stage), free(pr.peak_stage);
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
