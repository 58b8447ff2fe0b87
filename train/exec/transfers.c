/*
 * train/exec/transfers.c — stage-to-stage transfers of the distributed engine
 * (train/exec/internal.h).
 *
 * Over the stage channels (train/dist/comm.h): MPI for a host backend's buffers, NCCL on
 * the channel's own communicator and stream for a device backend's (cuda), straight from
 * and into the backend buffers. A channel's transfers match in posting order, so this
 * process posts the receives of each channel in the order its sender sends: a stage sends
 * in the order it runs its ops (exec_order, the same on every rank) and, within an op, in
 * its successors' order (exec_send_outputs). exec_chan_build derives that order here;
 * exec_post_recv posts a channel's earlier receives before the one asked for. Posting
 * early (the next op's receive before this op runs) overlaps the transfer with compute on
 * both paths. A member of a context-parallel group sends and receives its own shard.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/exec/internal.h"

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
             in ? "for" : "from", idx, exec_kind_name(pr->deps.op[v]->kind), pr->deps.op[v]->unit, stage,
             (unsigned long long)pr->p->step);
}



/* Each channel's receives (pr->chan), from the order every stage runs its ops. */
lt_status exec_chan_build(pipe_run *pr, const uint32_t *order, lt_error *err) {
    int pp = pr->p->pp;
    pr->chan = calloc((size_t)pp, sizeof *pr->chan);
    pr->chan_n = calloc((size_t)pp, sizeof *pr->chan_n), pr->chan_next = calloc((size_t)pp, sizeof *pr->chan_next);
    if (!pr->chan || !pr->chan_n || !pr->chan_next) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int pass = 0; pass < 2; pass++) { /* count, then fill */
        for (size_t i = 0; i < pr->deps.n_ops; i++) {
            uint32_t u = order[i];
            if (exec_local(pr, u)) continue;
            size_t ns;
            const lt_dep *s = lt_deps_succs(&pr->deps, u, &ns);
            for (size_t k = 0; k < ns; k++) {
                const lt_dep *d = s[k].p2p && exec_local(pr, s[k].op) ? p2p_pred(pr, s[k].op) : NULL;
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
    const op_state *o = &pr->ops[w];
    int T = lt_unit_tokens(&o->u[o->me]), Tl = lt_unit_sp_rows(pr->m, &o->u[o->me]);
    const lt_backend *be = exec_be(pr);
    size_t bytes = (size_t)Tl * (size_t)pr->m->shape.hidden * be->act_bytes; /* this rank's SP rows */
    if (T == 0) { /* an empty shard: nothing comes (its sender sends nothing either) */
        pr->recv_bytes[w] = SIZE_MAX;
        return LT_OK;
    }
    if (bytes == 0) { /* tokens, none of them this TP rank's: an empty input, nothing sent */
        if (!(pr->recv_buf[w] = be->alloc(be, 1, false)))
            return lt_backend_nomem(be, err, NULL, "out of memory for an empty transfer");
        pr->recv_bytes[w] = 1;
        exec_track(pr, 1);
        return LT_OK;
    }
    if (!(pr->recv_buf[w] = be->alloc(be, bytes, false)))
        return lt_backend_nomem(be, err, NULL, "out of memory for a %zu-byte transfer", bytes);
    pr->recv_bytes[w] = bytes;
    exec_track(pr, bytes);
    char what[160];
    transfer_name(pr, w, true, what, sizeof what);
    return lt_comm_stage_irecv(pr->comm, t, pr->recv_buf[w], bytes, !be->host, what, &pr->recv_req[w], err);
}

/* Post the receive of local op v's input from the stage before (F) or after (B), after
 * every receive its channel delivers earlier. */
lt_status exec_post_recv(pipe_run *pr, uint32_t v, lt_error *err) {
    const lt_dep *d = p2p_pred(pr, v);
    if (!d || pr->recv_bytes[v] != 0) return LT_OK; /* no input to receive, or posted */
    int t = (int)d->stage;
    while (pr->chan_next[t] < pr->chan_n[t]) {
        uint32_t w = pr->chan[t][pr->chan_next[t]++];
        lt_status st = post_one(pr, w, t, err);
        if (st != LT_OK || w == v) return st;
    }
    return exec_op_error(pr, v, err, "receives from a stage that never sends to it");
}

/* Wait for v's input and put it where the op reads its predecessor's output: a forward's
 * input as that op's activations (out only), a backward's as its input gradient. */
lt_status exec_take_recv(pipe_run *pr, uint32_t v, lt_error *err) {
    const lt_dep *d = p2p_pred(pr, v);
    if (!d) return LT_OK;
    lt_status st = exec_post_recv(pr, v, err);
    if (st == LT_OK) st = lt_comm_wait(pr->comm, &pr->recv_req[v], err);
    if (st != LT_OK) return st;
    op_state *o = &pr->ops[v];
    uint32_t from = d->op;
    float *buf = pr->recv_buf[v];
    size_t bytes = pr->recv_bytes[v] == SIZE_MAX ? 0 : pr->recv_bytes[v];
    pr->recv_buf[v] = NULL;
    bool fwd = pr->deps.op[v]->kind != LT_OP_B;
    if (fwd)
        pr->ops[from].acts[o->me] = (lt_acts){.T = buf ? lt_unit_tokens(&o->u[o->me]) : 0,
                                              .l0 = (int)pr->deps.op[v]->layer_begin,
                                              .l1 = (int)pr->deps.op[v]->layer_begin, .out = buf, .buf = buf,
                                              .bytes = bytes, .be = exec_be(pr)};
    else
        pr->ops[from].din[o->me] = buf;
    if (!fwd) pr->ops[from].din_bytes += bytes; /* counted until release(from), as a din made here */
    return LT_OK;
}

/* Post the sends of local op v's output to the stages that read it. */
lt_status exec_send_outputs(pipe_run *pr, uint32_t v, lt_error *err) {
    size_t ns;
    const lt_dep *s = lt_deps_succs(&pr->deps, v, &ns);
    for (size_t k = 0; k < ns; k++) {
        if (!s[k].p2p) continue;
        const op_state *o = &pr->ops[v];
        int Tl = lt_unit_sp_rows(pr->m, &o->u[o->me]); /* this rank's SP rows are what it sends */
        if (Tl == 0) continue;
        bool fwd = pr->deps.op[v]->kind != LT_OP_B;
        const float *buf = fwd ? o->acts[o->me].out : o->din[o->me];
        if (!buf) return exec_op_error(pr, v, err, "has no output to send");
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
        lt_status st = lt_comm_stage_isend(pr->comm, (int)s[k].stage, buf,
                                           (size_t)Tl * (size_t)pr->m->shape.hidden * exec_be(pr)->act_bytes,
                                           !exec_be(pr)->host, what, &ps->req, err);
        if (st != LT_OK) return st;
        pr->n_sends++, pr->sends_of[v]++;
    }
    return LT_OK;
}

/* Release op v's buffers once nothing reads them: no op still to run, no send in flight. */
void exec_maybe_release(pipe_run *pr, uint32_t v) {
    if (pr->ops[v].refs == 0 && (!pr->sends_of || pr->sends_of[v] == 0)) exec_release(pr, v);
}

/* Complete the sends that are done (all of them with `all`), releasing what they read. */
lt_status exec_poll_sends(pipe_run *pr, bool all, lt_error *err) {
    size_t keep = 0;
    lt_status st = LT_OK;
    for (size_t i = 0; i < pr->n_sends; i++) {
        bool done = false;
        if (st == LT_OK) st = all ? lt_comm_wait(pr->comm, &pr->sends[i].req, err) : lt_comm_test(pr->comm, &pr->sends[i].req, &done, err);
        if (st == LT_OK && (all || done)) {
            uint32_t v = pr->sends[i].v;
            pr->sends_of[v]--;
            exec_maybe_release(pr, v);
        } else {
            pr->sends[keep++] = pr->sends[i];
        }
    }
    pr->n_sends = keep;
    return st;
}


void exec_transfers_free(pipe_run *pr) {
    for (size_t v = 0; pr->recv_req && pr->recv_buf && v < pr->deps.n_ops; v++) {
        free(pr->recv_req[v]);
        exec_be(pr)->free(exec_be(pr), pr->recv_buf[v]); /* backend memory */
    }
    free(pr->recv_req), free(pr->recv_buf), free(pr->recv_bytes), free(pr->sends_of), free(pr->sends);
    pr->recv_req = NULL, pr->recv_buf = NULL, pr->recv_bytes = NULL, pr->sends_of = NULL, pr->sends = NULL;
    chan_free(pr);
    pr->n_sends = pr->cap_sends = 0;
}
