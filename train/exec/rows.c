/*
 * train/exec/rows.c — a backward's rows gathered from the forwards that hold them
 * (train/exec/internal.h).
 *
 * A backward unit cut differently from its forward units (an asymmetric schedule,
 * SlimPack 4.1.2) takes its activations row by row from the forward shards that hold its
 * tokens (where each row comes from: shards.c), into a window set one layer at a time just
 * before that layer's backward (lt_acts_alloc_window): one layer's copy is live beside the
 * backward's own scratch (the cost model's two layers). A group spread over processes
 * first exchanges the rows its members hold for one another: every member sends every
 * other the rows of that member's shard it holds, and receives those of its own shard the
 * others hold, packed in backend memory and moved where it lives (NCCL on the device,
 * lt_comm_dev_exchange, or MPI for host memory).
 */
#include <stdlib.h>

#include "train/exec/internal.h"

static const char NO_INPUT[] = "a forward it takes rows from kept no input to recompute from";

/* Distributed B op v of a group: send every other member the rows of its shard that this
 * member's forward shards hold, and receive the rows of this member's shard that the
 * others hold (recv[h]: member h's rows in the rows' order, each the row of layers
 * [lo, hi) with or without the head's part, lt_acts_pack_row, then with want_x the kept
 * input; counted from here, their bytes added to *recv_bytes for the caller to untrack). */
static lt_status exchange_rows(pipe_run *pr, uint32_t v, int lo, int hi, bool head, bool want_x, float **recv,
                               size_t *recv_bytes, lt_error *err) {
    const op_state *o = &pr->ops[v];
    int G = o->G, me = o->me;
    const lt_backend *be = exec_be(pr);
    size_t xrow = (size_t)pr->m->shape.hidden * be->act_bytes; /* a kept input row's bytes */
    size_t x_floats = want_x ? (xrow + sizeof(float) - 1) / sizeof(float) : 0;
    size_t row_floats = lt_acts_row_floats(pr->m, lo, hi, head) + x_floats;
    float **send = calloc((size_t)G, sizeof *send);
    size_t *sbytes = calloc((size_t)G, sizeof *sbytes), *rbytes = calloc((size_t)G, sizeof *rbytes);
    lt_status st = send && sbytes && rbytes ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (int g = 0; st == LT_OK && g < G; g++) {
        const row_src *rs = o->rows[g];
        size_t n = o->n_rows[g], cnt = 0;
        for (size_t i = 0; i < n; i++) /* g's rows here (g != me) / my rows elsewhere (g == me) */
            if (g == me ? rs[i].h != me : rs[i].h == me) {
                if (g == me) rbytes[rs[i].h] += row_floats * sizeof(float);
                else cnt++;
            }
        if (g == me || cnt == 0) continue;
        sbytes[g] = cnt * row_floats * sizeof(float);
        float *q = send[g] = be->alloc(be, sbytes[g], false);
        if (!q) st = lt_backend_nomem(be, err, NULL, "out of memory for %zu rows to send", cnt);
        else exec_track(pr, sbytes[g]);
        for (size_t i = 0; st == LT_OK && i < n; i++) {
            if (rs[i].h != me) continue;
            const op_state *fo = &pr->ops[rs[i].f];
            int srow = exec_row_now(&fo->kept[me], rs[i].srow);
            st = lt_acts_pack_row(&fo->acts[me], srow, lo, hi, head, pr->m, q, err);
            q += row_floats - x_floats; /* (a pointer into backend memory: never dereferenced here) */
            if (st == LT_OK && want_x && !fo->x_in[me]) st = exec_op_error(pr, v, err, NO_INPUT);
            int xr = lt_acts_sp_row(&fo->acts[me], srow); /* the kept input holds the SP rows */
            if (st == LT_OK && want_x && xr >= 0) be->copy(be, q, exec_at(fo->x_in[me], (size_t)xr * xrow), xrow);
            q += x_floats;
        }
    }
    for (int h = 0; st == LT_OK && h < G; h++) {
        if (rbytes[h] > 0 && !(recv[h] = be->alloc(be, rbytes[h], false)))
            st = lt_backend_nomem(be, err, NULL, "out of memory for the rows to receive");
        if (recv[h]) exec_track(pr, rbytes[h]), *recv_bytes += rbytes[h];
    }
    if (st == LT_OK) st = be->check(be, err);
    if (st == LT_OK)
        st = (be->host ? lt_comm_exchange : lt_comm_dev_exchange)(pr->comm, o->ranks, G, me, (const void *const *)send,
                                                                   sbytes, (void *const *)recv, rbytes, err);
    for (int g = 0; send && g < G; g++)
        if (send[g]) exec_untrack(pr, sbytes[g], pr->cur_stage), be->free(be, send[g]);
    free(send), free(sbytes), free(rbytes);
    return st;
}

/* Member g's rows of layers [lo, hi) (with `head` the head's part) into *dst, and with
 * x != NULL the rows of the kept inputs into x (this TP rank's SP rows of dst, [Tl, C]): from the forward shards held here,
 * or from recv (exchange_rows with the same arguments). */
static lt_status gather_member(pipe_run *pr, uint32_t v, int g, int lo, int hi, bool head, float *const *recv,
                               lt_acts *dst, float *x, lt_error *err) {
    const op_state *o = &pr->ops[v];
    const lt_backend *be = exec_be(pr);
    size_t xrow = (size_t)pr->m->shape.hidden * be->act_bytes; /* a kept input row's bytes */
    size_t x_floats = x ? (xrow + sizeof(float) - 1) / sizeof(float) : 0;
    size_t row_floats = lt_acts_row_floats(pr->m, lo, hi, head) + x_floats;
    size_t *cursor = calloc((size_t)o->G, sizeof *cursor);
    lt_status st = cursor ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (size_t i = 0; st == LT_OK && i < o->n_rows[g]; i++) {
        const row_src *rs = &o->rows[g][i];
        const op_state *fo = &pr->ops[rs->f];
        int h = rs->h, dr = rs->drow;
        const lt_acts *src = &fo->acts[h];
        if (src->T > 0) {
            int sr = exec_row_now(&fo->kept[h], rs->srow);
            st = sr >= 0 ? lt_acts_copy_row(dst, dr, src, sr, lo, hi, head, pr->m, err)
                         : exec_op_error(pr, v, err, "a row of its unit was dropped from its forward");
            if (st == LT_OK && x && !fo->x_in[h]) st = exec_op_error(pr, v, err, NO_INPUT);
            int dx = st == LT_OK ? lt_acts_sp_row(dst, dr) : -1, sx = st == LT_OK ? lt_acts_sp_row(src, sr) : -1;
            if (st == LT_OK && x && dx >= 0 && sx >= 0)
                be->copy(be, exec_at(x, (size_t)dx * xrow), exec_at(fo->x_in[h], (size_t)sx * xrow), xrow);
        } else if (recv && recv[h]) { /* held by member h's process */
            const float *q = recv[h] + cursor[h]++ * row_floats;
            st = lt_acts_unpack_row(dst, dr, lo, hi, head, pr->m, q, err);
            int dx = lt_acts_sp_row(dst, dr);
            if (st == LT_OK && x && dx >= 0) be->copy(be, exec_at(x, (size_t)dx * xrow), q + row_floats - x_floats, xrow);
        } else {
            st = exec_op_error(pr, v, err,
                               pr->comm ? "a row of its unit was forwarded nowhere this process can read"
                                        : "the activations of its forward unit are gone");
        }
    }
    free(cursor);
    return st;
}

lt_status exec_gather_rows(pipe_run *pr, uint32_t v, int lo, int hi, bool head, lt_acts *win, float **xs,
                           lt_error *err) {
    const op_state *o = &pr->ops[v];
    float **recv = calloc((size_t)o->G, sizeof *recv);
    size_t recv_bytes = 0; /* of recv's buffers, counted while held */
    lt_status st = recv ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    if (st == LT_OK && pr->comm && o->G > 1) st = exchange_rows(pr, v, lo, hi, head, xs != NULL, recv, &recv_bytes, err);
    for (int i = 0; st == LT_OK && i < o->n_active; i++)
        st = gather_member(pr, v, o->active[i], lo, hi, head, recv, &win[i], xs ? xs[i] : NULL, err);
    for (int h = 0; recv && h < o->G; h++) exec_be(pr)->free(exec_be(pr), recv[h]);
    exec_untrack(pr, recv_bytes, pr->cur_stage);
    free(recv);
    return st;
}
