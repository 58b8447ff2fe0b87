/*
 * train/exec/transfers.c — the transfers between the processes of the distributed engine
 * (train/exec/internal.h).
 *
 * What moves: along the model path between stages, an F's output forward and a B's input
 * gradient backward; for HelixPipe's layer parts (HelixPipe 4.2) the two tensors their
 * boundary needs, packed by the op (exec_part_xfer_bytes: the residual stream and the QKV
 * linear's input, or the attention output). And where two slices of one sample have their
 * attention on two stages (HelixPipe places micro-batch i's attention of layer l on stage
 * (l + i + 1) mod p), the sample's keys and values forward along the slices' K/V edge and
 * their gradients back along the dK/dV edge: rows [0, b) for a slice beginning at b, so each
 * attention stage passes on what it received with its own rows (a chain; the dK/dV added
 * where they arrive, in the order one process adds them: the same bits).
 *
 * Over the stage channels (train/dist/comm.h): MPI for a host backend's buffers, NCCL on
 * the channel's own communicator and stream for a device backend's (cuda), straight from
 * and into the backend buffers. A channel's transfers match in posting order, so this
 * process posts the receives of each channel in the order its sender sends: a stage sends
 * in the order it runs its ops (exec_order, the same on every rank) and, within an op, in
 * its successors' order (exec_send_outputs). lt_deps_channels (plans/schedule/deps.h)
 * derives that order and the op at whose start each receive is posted: the op before its
 * reader, or earlier where its channel delivers it before a receive read earlier. Posting
 * early (the next op's receives before this op runs) overlaps the transfers with compute on
 * both paths; the simulator holds the buffers over the same ops. A member of a
 * context-parallel group sends and receives its own shard.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/exec/internal.h"

/* The op whose predecessor edge has index e (into deps.pred). */
static uint32_t edge_op(const pipe_run *pr, size_t e) {
    size_t lo = 0, hi = pr->deps.n_ops; /* pred_off[lo] <= e < pred_off[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (pr->deps.pred_off[mid] <= e) lo = mid;
        else hi = mid;
    }
    return (uint32_t)lo;
}

static const lt_dep *edge_of(const pipe_run *pr, size_t e) { return &pr->deps.pred[e]; }

/* ---------------------------------------------------------------- what a transfer holds */

int exec_qkv_tensors(const lt_llama *m, lt_layer_views *lv, float **slot[6], size_t n[6]) {
    size_t C = (size_t)m->shape.hidden, qd = (size_t)m->heads_l * (size_t)m->head_dim,
           kvd = (size_t)m->kv_heads_l * (size_t)m->head_dim;
    float **s[6] = {&lv->wq, &lv->wk, &lv->wv, &lv->bq, &lv->bk, &lv->bv};
    size_t e[6] = {qd * C, kvd * C, kvd * C, qd, kvd, kvd};
    for (int k = 0; k < 6; k++) slot[k] = s[k], n[k] = e[k];
    return lt_model_qkv_bias(&m->shape) ? 6 : 3;
}

size_t exec_part_xfer_bytes(const pipe_run *pr, uint32_t v, bool in, size_t *first, size_t *qkv) {
    const lt_op *op = pr->deps.op[v];
    if (first) *first = 0;
    if (qkv) *qkv = 0;
    if (op->part == LT_PART_ALL || !pr->comm) return 0; /* (one process: every part here) */
    bool any = false; /* a model-path edge between stages that way */
    size_t n;
    const lt_dep *d = in ? lt_deps_preds(&pr->deps, v, &n) : lt_deps_succs(&pr->deps, v, &n);
    for (size_t k = 0; k < n && !any; k++) any = d[k].p2p;
    if (!any) return 0;
    /* the boundary crossed, by the part above it: a forward receives across its own part's
     * lower boundary and sends across the next one; a backward the other way round */
    bool fwd = op->kind != LT_OP_B;
    int upper = fwd == in ? (int)op->part : (int)op->part + 1;
    if (upper != LT_PART_ATTN && upper != LT_PART_POST) return 0; /* across layers: refused (step.c) */
    const op_state *o = &pr->ops[v];
    size_t T = (size_t)lt_unit_tokens(&o->u[o->me]), es = exec_be(pr)->act_bytes;
    /* the residual stream and the QKV linear's input: this rank's sequence-parallel rows; the
     * attention output: every token of this TP rank's heads */
    size_t x = (size_t)lt_unit_sp_rows(pr->m, &o->u[o->me]) * (size_t)pr->m->shape.hidden * es;
    size_t second = upper == LT_PART_ATTN ? x : T * (size_t)pr->m->heads_l * (size_t)pr->m->head_dim * es;
    size_t w = 0; /* the Q/K/V weights (the backend's weight elements), their gradients fp32 */
    if (upper == LT_PART_ATTN) {
        lt_layer_views lv = {0};
        float **slot[6];
        size_t elems[6];
        for (int k = 0, nt = exec_qkv_tensors(pr->m, &lv, slot, elems); k < nt; k++)
            w += elems[k] * (fwd ? exec_be(pr)->weight_bytes : sizeof(float));
    }
    if (first) *first = x;
    if (qkv) *qkv = w;
    return x + second + w;
}

/* The samples a K/V transfer between two attention parts carries: `later` holds slice j of
 * each, `earlier` its slice j - 1; per sample the rows [0, b) before slice j (its begin b).
 * Into smp / rows (room for later's slices); their count. */
static int kv_samples(const pipe_run *pr, uint32_t later, uint32_t earlier, int *smp, int *rows) {
    size_t nl, ne;
    const lt_slice *L = lt_schedule_op_slices(&pr->r->sched, pr->deps.op[later], &nl);
    const lt_slice *E = lt_schedule_op_slices(&pr->r->sched, pr->deps.op[earlier], &ne);
    int n = 0;
    for (size_t i = 0; i < nl; i++)
        for (size_t j = 0; L[i].begin > 0 && j < ne; j++)
            if (E[j].sample == L[i].sample && E[j].end == L[i].begin) {
                smp[n] = (int)L[i].sample, rows[n] = (int)L[i].begin, n++;
                break;
            }
    return n;
}

/* The K/V (forward: u sends to w) or dK/dV (backward) of the transfer u -> w of `kind`,
 * between the context and buf: its bytes (buf NULL), or moved out (!to_ctx) or in. */
static lt_status kv_move(pipe_run *pr, uint32_t u, uint32_t w, uint8_t kind, bool to_ctx, void *buf, size_t *bytes,
                         lt_error *err) {
    bool grad = kind == LT_DEP_DKV;
    uint32_t later = grad ? u : w, earlier = grad ? w : u;
    size_t nl;
    (void)lt_schedule_op_slices(&pr->r->sched, pr->deps.op[later], &nl);
    int *smp = malloc((nl + 1) * sizeof *smp), *rows = malloc((nl + 1) * sizeof *rows);
    if (!smp || !rows) {
        free(smp), free(rows);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    }
    int n = kv_samples(pr, later, earlier, smp, rows), l = (int)pr->deps.op[u]->layer_begin;
    lt_status st = LT_OK;
    size_t off = 0;
    for (int i = 0; st == LT_OK && i < n; i++) {
        if (buf) st = lt_kvctx_rows(pr->kv, smp[i], l, rows[i], grad, to_ctx, (char *)buf + off, err);
        off += lt_kvctx_rows_bytes(pr->kv, rows[i]);
    }
    free(smp), free(rows);
    if (bytes) *bytes = off;
    return st;
}

static void transfer_name(const pipe_run *pr, uint32_t v, uint8_t kind, char *buf, size_t n) {
    int stage;
    size_t idx;
    lt_deps_op_at(&pr->deps, v, &stage, &idx);
    bool b = pr->deps.op[v]->kind == LT_OP_B;
    const char *what = kind == LT_DEP_KV ? "keys and values" : kind == LT_DEP_DKV ? "key and value gradients"
                       : b ? "gradients" : "activations";
    snprintf(buf, n, "the %s for op %zu (%s of unit %u) of stage %d, step %llu", what, idx,
             exec_kind_name(pr->deps.op[v]->kind), pr->deps.op[v]->unit, stage, (unsigned long long)pr->p->step);
}

/* The receive state and the channels into this stage (lt_deps_channels). */
lt_status exec_chan_build(pipe_run *pr, lt_error *err) {
    size_t n = pr->deps.n_ops, edges = pr->deps.pred_off[n];
    pr->recv_req = calloc(edges + 1, sizeof *pr->recv_req);
    pr->recv_buf = calloc(edges + 1, sizeof *pr->recv_buf);
    pr->recv_bytes = calloc(edges + 1, sizeof *pr->recv_bytes);
    pr->sends_of = calloc(n + 1, sizeof *pr->sends_of);
    size_t P = (size_t)pr->deps.stages; /* (the plan's pp) */
    pr->chan_off = malloc((P * P + 1) * sizeof *pr->chan_off);
    pr->chan_edges = malloc((edges + 1) * sizeof *pr->chan_edges);
    pr->chan_posts = malloc((edges + 1) * sizeof *pr->chan_posts);
    pr->chan_next = calloc(P, sizeof *pr->chan_next);
    if (!pr->recv_req || !pr->recv_buf || !pr->recv_bytes || !pr->sends_of || !pr->chan_off || !pr->chan_edges ||
        !pr->chan_posts || !pr->chan_next)
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the transfers of %zu ops", n);
    lt_deps_channels(&pr->deps, pr->chan_off, pr->chan_edges, pr->chan_posts);
    for (size_t t = 0; t < P; t++) /* channel t -> here: from its first entry */
        pr->chan_next[t] = pr->chan_off[(size_t)pr->my_stage * P + t];
    return LT_OK;
}

static void chan_free(pipe_run *pr) {
    free(pr->chan_off), free(pr->chan_edges), free(pr->chan_posts), free(pr->chan_next);
    pr->chan_off = pr->chan_edges = pr->chan_posts = NULL, pr->chan_next = NULL;
}

/* Post the receive of edge e (into its local op w, from stage t: the channel's next). */
static lt_status post_one(pipe_run *pr, size_t e, int t, lt_error *err) {
    uint32_t w = edge_op(pr, e);
    const lt_dep *d = edge_of(pr, e);
    const op_state *o = &pr->ops[w];
    const lt_backend *be = exec_be(pr);
    int T = lt_unit_tokens(&o->u[o->me]), Tl = lt_unit_sp_rows(pr->m, &o->u[o->me]);
    size_t bytes = (size_t)Tl * (size_t)pr->m->shape.hidden * be->act_bytes; /* this rank's SP rows */
    lt_status st = LT_OK;
    if (d->kind == LT_DEP_KV || d->kind == LT_DEP_DKV) st = kv_move(pr, d->op, w, d->kind, false, NULL, &bytes, err);
    else if (pr->deps.op[w]->part != LT_PART_ALL) bytes = exec_part_xfer_bytes(pr, w, true, NULL, NULL);
    if (st != LT_OK) return st;
    if (T == 0 || (bytes == 0 && d->kind != LT_DEP_PATH)) { /* nothing comes (its sender sends nothing either) */
        pr->recv_bytes[e] = SIZE_MAX;
        return LT_OK;
    }
    if (bytes == 0) { /* tokens, none of them this TP rank's: an empty input, nothing sent */
        if (!(pr->recv_buf[e] = be->alloc(be, 1, false)))
            return lt_backend_nomem(be, err, NULL, "out of memory for an empty transfer");
        pr->recv_bytes[e] = 1;
        exec_track(pr, 1);
        return LT_OK;
    }
    if (!(pr->recv_buf[e] = be->alloc(be, bytes, false)))
        return lt_backend_nomem(be, err, NULL, "out of memory for a %zu-byte transfer", bytes);
    pr->recv_bytes[e] = bytes;
    exec_track(pr, bytes);
    char what[160];
    transfer_name(pr, w, d->kind, what, sizeof what);
    return lt_comm_stage_irecv(pr->comm, t, pr->recv_buf[e], bytes, !be->host, what, &pr->recv_req[e], err);
}

/* Post, in each channel's order, the receives due at the start of local op v (lt_deps_channels):
 * its own and the next op's, and those their channels deliver before them. */
static lt_status post_due(pipe_run *pr, uint32_t v, lt_error *err) {
    int stage;
    size_t idx, P = (size_t)pr->deps.stages;
    lt_deps_op_at(&pr->deps, v, &stage, &idx);
    for (size_t t = 0; t < P; t++) {
        uint32_t end = pr->chan_off[(size_t)pr->my_stage * P + t + 1];
        while (pr->chan_next[t] < end && pr->chan_posts[pr->chan_next[t]] <= idx) {
            uint32_t k = pr->chan_next[t]++;
            lt_status st = post_one(pr, pr->chan_edges[k], (int)t, err);
            if (st != LT_OK) return st;
        }
    }
    return LT_OK;
}

/* Post the receives due at v's start (post_due), then wait for v's inputs and put each
 * where the op reads it: a forward's input as its predecessor's activations (out only), a
 * backward's as its input gradient, a layer part's two tensors in ops[v].rx, a sample's K/V
 * (dK/dV) into (added into) the context. */
lt_status exec_take_recv(pipe_run *pr, uint32_t v, lt_error *err) {
    lt_status st = post_due(pr, v, err);
    size_t np;
    const lt_dep *p = lt_deps_preds(&pr->deps, v, &np);
    for (size_t j = 0; st == LT_OK && j < np; j++) {
        size_t e = pr->deps.pred_off[v] + j;
        if (!lt_deps_transfer(&pr->deps, v, p, j)) continue;
        if (pr->recv_bytes[e] == 0) return exec_op_error(pr, v, err, "receives from a stage that never sends to it");
        st = lt_comm_wait(pr->comm, &pr->recv_req[e], err);
        if (st != LT_OK) break;
        op_state *o = &pr->ops[v];
        uint32_t from = p[j].op;
        float *buf = pr->recv_buf[e];
        size_t bytes = pr->recv_bytes[e] == SIZE_MAX ? 0 : pr->recv_bytes[e];
        pr->recv_buf[e] = NULL;
        bool fwd = pr->deps.op[v]->kind != LT_OP_B;
        if (p[j].kind == LT_DEP_KV || p[j].kind == LT_DEP_DKV) {
            if (buf) st = kv_move(pr, from, v, p[j].kind, true, buf, NULL, err);
            exec_be(pr)->free(exec_be(pr), buf);
            exec_untrack(pr, bytes, pr->my_stage);
        } else if (pr->deps.op[v]->part != LT_PART_ALL) {
            o->rx = buf, o->rx_bytes = bytes; /* (counted until the op unpacks it, or its release) */
        } else if (fwd) {
            pr->ops[from].acts[o->me] = (lt_acts){.T = buf ? lt_unit_tokens(&o->u[o->me]) : 0,
                                                  .l0 = (int)pr->deps.op[v]->layer_begin,
                                                  .l1 = (int)pr->deps.op[v]->layer_begin, .out = buf, .buf = buf,
                                                  .bytes = bytes, .be = exec_be(pr)};
        } else {
            pr->ops[from].din[o->me] = buf;
            pr->ops[from].din_bytes += bytes; /* counted until release(from), as a din made here */
        }
    }
    return st;
}

/* One more pending send (its slot's index in *i). */
static lt_status send_slot(pipe_run *pr, size_t *i, lt_error *err) {
    if (pr->n_sends == pr->cap_sends) {
        size_t cap = pr->cap_sends ? 2 * pr->cap_sends : 16;
        struct pending_send *t = realloc(pr->sends, cap * sizeof *t);
        if (!t) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        pr->sends = t, pr->cap_sends = cap;
    }
    *i = pr->n_sends;
    pr->sends[*i] = (struct pending_send){.v = LT_DEP_NONE};
    return LT_OK;
}

/* Post the sends of local op v's outputs to the stages that read them (a layer part's
 * packed in ops[v].tx, which the send takes over; a sample's K/V or dK/dV packed here). */
lt_status exec_send_outputs(pipe_run *pr, uint32_t v, lt_error *err) {
    size_t ns;
    const lt_dep *s = lt_deps_succs(&pr->deps, v, &ns);
    const lt_backend *be = exec_be(pr);
    op_state *o = &pr->ops[v];
    for (size_t k = 0; k < ns; k++) {
        if (!lt_deps_transfer(&pr->deps, v, s, k)) continue;
        const void *buf = NULL;
        void *own = NULL;
        size_t bytes = 0;
        lt_status st = LT_OK;
        if (s[k].kind == LT_DEP_KV || s[k].kind == LT_DEP_DKV) { /* packed from the context */
            st = kv_move(pr, v, s[k].op, s[k].kind, false, NULL, &bytes, err);
            if (st != LT_OK) return st;
            if (bytes == 0) continue;
            if (!(own = be->alloc(be, bytes, false)))
                return lt_backend_nomem(be, err, NULL, "out of memory for a %zu-byte K/V transfer", bytes);
            exec_track(pr, bytes);
            if ((st = kv_move(pr, v, s[k].op, s[k].kind, false, own, NULL, err)) != LT_OK) {
                exec_untrack(pr, bytes, pr->my_stage), be->free(be, own);
                return st;
            }
            buf = own;
            pr->stats->kv_transfers++;
        } else if (pr->deps.op[v]->part != LT_PART_ALL) { /* the op packed it */
            if (!o->tx) return exec_op_error(pr, v, err, "has no output to send");
            buf = own = o->tx, bytes = o->tx_bytes;
            o->tx = NULL, o->tx_bytes = 0;
        } else {
            int Tl = lt_unit_sp_rows(pr->m, &o->u[o->me]); /* this rank's SP rows are what it sends */
            if (Tl == 0) continue;
            bool fwd = pr->deps.op[v]->kind != LT_OP_B;
            if (!(buf = fwd ? o->acts[o->me].out : o->din[o->me])) return exec_op_error(pr, v, err, "has no output to send");
            bytes = (size_t)Tl * (size_t)pr->m->shape.hidden * be->act_bytes;
        }
        size_t i = 0;
        if ((st = send_slot(pr, &i, err)) != LT_OK) {
            if (own) exec_untrack(pr, bytes, pr->my_stage), be->free(be, own);
            return st;
        }
        struct pending_send *ps = &pr->sends[i];
        ps->v = v, ps->own = own, ps->own_bytes = own ? bytes : 0;
        pr->n_sends++;
        if (!own) pr->sends_of[v]++;
        char what[160];
        transfer_name(pr, s[k].op, s[k].kind, what, sizeof what);
        st = lt_comm_stage_isend(pr->comm, (int)s[k].stage, buf, bytes, !be->host, what, &ps->req, err);
        if (st != LT_OK) return st;
    }
    return LT_OK;
}

/* Release op v's buffers once nothing reads them: no op still to run, no send in flight. */
void exec_maybe_release(pipe_run *pr, uint32_t v) {
    if (pr->ops[v].refs == 0 && (!pr->sends_of || pr->sends_of[v] == 0)) exec_release(pr, v);
}

/* A completed send: its packed buffer freed, or its op's buffers released if nothing else
 * reads them. */
static void send_done(pipe_run *pr, struct pending_send *ps) {
    if (ps->own) {
        exec_untrack(pr, ps->own_bytes, pr->my_stage);
        exec_be(pr)->free(exec_be(pr), ps->own);
        ps->own = NULL;
        return;
    }
    pr->sends_of[ps->v]--;
    exec_maybe_release(pr, ps->v);
}

/* Complete the sends that are done (all of them with `all`), releasing what they read. */
lt_status exec_poll_sends(pipe_run *pr, bool all, lt_error *err) {
    size_t keep = 0;
    lt_status st = LT_OK;
    for (size_t i = 0; i < pr->n_sends; i++) {
        bool done = false;
        if (st == LT_OK) st = all ? lt_comm_wait(pr->comm, &pr->sends[i].req, err) : lt_comm_test(pr->comm, &pr->sends[i].req, &done, err);
        if (st == LT_OK && (all || done)) send_done(pr, &pr->sends[i]);
        else pr->sends[keep++] = pr->sends[i];
    }
    pr->n_sends = keep;
    return st;
}

void exec_transfers_free(pipe_run *pr) {
    size_t edges = pr->deps.pred_off ? pr->deps.pred_off[pr->deps.n_ops] : 0;
    for (size_t e = 0; pr->recv_req && pr->recv_buf && e < edges; e++) {
        free(pr->recv_req[e]);
        exec_be(pr)->free(exec_be(pr), pr->recv_buf[e]); /* backend memory */
    }
    for (size_t i = 0; i < pr->n_sends; i++) /* (after an error: the job aborts) */
        if (pr->sends[i].own) exec_be(pr)->free(exec_be(pr), pr->sends[i].own);
    free(pr->recv_req), free(pr->recv_buf), free(pr->recv_bytes), free(pr->sends_of), free(pr->sends);
    pr->recv_req = NULL, pr->recv_buf = NULL, pr->recv_bytes = NULL, pr->sends_of = NULL, pr->sends = NULL;
    chan_free(pr);
    pr->n_sends = pr->cap_sends = 0;
}
