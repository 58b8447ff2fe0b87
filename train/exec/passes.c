/*
 * train/exec/passes.c — the ops: F / FK and B of a unit through a stage's layers, over the
 * op's members (train/exec/internal.h; what each op does: train/exec/exec.h).
 *
 * One path for every op: the members this process runs go through the model's group
 * passes in per-layer lockstep (lt_llama_forward_group / lt_llama_backward_group); an op
 * outside any group is one member, a group spread over processes adds the ring's hooks
 * (ring.c). A backward reads its forward's activations in place where its shards equal the
 * forward's, and otherwise gathers its rows into window sets one layer at a time (rows.c).
 *
 * Recompute (plans/strategies/plan.h: recompute_layers R of an op = the first R layers of
 * its range): the F runs those layers with scratch activations and keeps only their input
 * (x_in; nothing on the first stage, whose input is the token ids); its B runs their
 * forward again from that input (writing the same K/V into the context), then the backward
 * of [l0 + R, l1) and of [l0, l0 + R).
 */
#include <stdlib.h>
#include <string.h>

#include "train/exec/internal.h"

/* Runs pass over n members cu[0..n): allocates their activations in a[0..n), counted from
 * their allocation on, and runs the forward in lockstep (hooks: a group spread over
 * processes, where n may be 0). */
static lt_status members_forward(pipe_run *pr, const lt_pass *pass, const lt_train_unit *cu, int n,
                                 const float *const *cin, lt_acts *a, const lt_cp_hooks *hooks, double *loss,
                                 lt_error *err) {
    lt_status st = LT_OK;
    for (int i = 0; st == LT_OK && i < n; i++) {
        st = lt_acts_alloc(&a[i], pr->m, pr->b, &cu[i], pass->l0, pass->l1, pass->head, err);
        exec_track(pr, a[i].bytes);
    }
    if (st == LT_OK && (n > 0 || hooks))
        st = lt_llama_forward_group(pr->m, pass, pr->b, cu, n, cin, pr->kv, a, pr->grads, hooks, loss, pr->pool, err);
    return st;
}

/* ---------------------------------------------------------------- HelixPipe's layer parts
 * (HelixPipe 4.2: the pre-attention of layer l, its attention, its post-attention, each an op
 * that may run on its own stage). The parts of (unit, layer) that run in one process share
 * one set of single-layer activations, made by the first of them there: the pre-attention F,
 * or the part that received the layer's tensors from another stage (the residual stream
 * and the QKV linear's input, or the attention output: exec_part_xfer_bytes), freed when its
 * B has run (the last of the layer's readers there). Likewise the gradients that cross the
 * parts in the backward (lt_part_grads) live with the first B of the layer there (the
 * post-attention, or the one that received them) until the last has read them or sent them
 * on. In one process every part is local: the pre-attention F and the post-attention B. */

/* Is v's model-path predecessor another layer part of its layer in this process? */
static bool part_pred_here(const pipe_run *pr, uint32_t v, uint32_t *from) {
    *from = exec_pred_of_kind(&pr->deps, v, LT_DEP_PATH);
    return *from != LT_DEP_NONE && exec_local(pr, *from) &&
           pr->deps.op[*from]->layer_begin == pr->deps.op[v]->layer_begin;
}

/* The op whose state holds the activations of v's (unit, layer) here: back along the model
 * path (a B from its F) while the part before runs here. */
static uint32_t acts_owner(const pipe_run *pr, uint32_t v) {
    if (pr->deps.op[v]->kind == LT_OP_B) v = exec_pred_of_kind(&pr->deps, v, LT_DEP_ACT);
    uint32_t from;
    while (v != LT_DEP_NONE && pr->deps.op[v]->part != LT_PART_PRE && part_pred_here(pr, v, &from)) v = from;
    return v;
}

uint32_t exec_shared_acts_of(const pipe_run *pr, uint32_t v) {
    if (pr->deps.op[v]->kind == LT_OP_B || pr->deps.op[v]->part == LT_PART_ALL) return LT_DEP_NONE;
    uint32_t from = exec_pred_of_kind(&pr->deps, v, LT_DEP_PATH); /* its input's op, if here */
    if (from == LT_DEP_NONE || !exec_local(pr, from)) return LT_DEP_NONE;
    uint32_t owner = acts_owner(pr, from);
    return owner != from ? owner : LT_DEP_NONE; /* (the one right before holds its own by the model path) */
}

/* ... and the one holding its part gradients (B ops). */
static uint32_t grads_owner(const pipe_run *pr, uint32_t v) {
    uint32_t from;
    while (pr->deps.op[v]->part != LT_PART_POST && part_pred_here(pr, v, &from)) v = from;
    return v;
}

/* The parts of F op v's (unit, layer) that run here from v on (v owning the layer's
 * activations): along the model path while the layer's next part runs here; with
 * LT_ACTS_POST_RECOMPUTED when its post-attention is recomputed. */
static unsigned parts_here(const pipe_run *pr, uint32_t v) {
    unsigned parts = 0;
    while (v != LT_DEP_NONE) {
        parts |= 1u << pr->deps.op[v]->part;
        if (pr->deps.op[v]->part == LT_PART_POST && exec_recompute_of(pr->deps.op[v]) > 0) parts |= LT_ACTS_POST_RECOMPUTED;
        size_t ns;
        const lt_dep *s = lt_deps_succs(&pr->deps, v, &ns);
        uint32_t next = LT_DEP_NONE;
        for (size_t k = 0; k < ns && next == LT_DEP_NONE; k++)
            if (s[k].kind == LT_DEP_PATH && pr->deps.op[s[k].op]->kind != LT_OP_B && exec_local(pr, s[k].op) &&
                pr->deps.op[s[k].op]->layer_begin == pr->deps.op[v]->layer_begin)
                next = s[k].op;
        v = next;
    }
    return parts;
}

/* The part op's layer activations here, or NULL. */
static lt_acts *part_acts(pipe_run *pr, uint32_t v) {
    v = acts_owner(pr, v);
    if (v == LT_DEP_NONE || !pr->ops[v].acts || pr->ops[v].acts[0].T == 0) return NULL;
    return &pr->ops[v].acts[0];
}

/* The pass of a part op of layer l: the embedding with the first pre-attention, the head (a
 * loss and, with gradients, its scale) with the last post-attention. */
static lt_pass part_pass(pipe_run *pr, const lt_op *op) {
    int l = (int)op->layer_begin, L = pr->m->shape.layers;
    lt_pass p = {.l0 = l, .l1 = l + 1, .embed = l == 0 && op->part == LT_PART_PRE,
                 .head = l == L - 1 && op->part == LT_PART_POST, .meter = &pr->meter};
    p.loss_scale = p.head && pr->grads ? (float)(1.0 / (double)pr->p->n_predicted) : 0.0f;
    return p;
}

/* The checks every part op passes (what is not executable yet, refused by name), then the
 * engine's weights_needed for its layer (fsdp gathers the layer's tensors held here, if
 * not yet whole: lt_exec_hooks). */
static lt_status part_check(pipe_run *pr, uint32_t v, lt_error *err) {
    const lt_op *op = pr->deps.op[v];
    if (pr->ops[v].G != 1) return exec_op_error(pr, v, err, "a layer part (HelixPipe) in a context-parallel group");
    if (op->kind == LT_OP_FK) return exec_op_error(pr, v, err, "a K/V-only forward of a layer part");
    if (op->layer_end != op->layer_begin + 1) return exec_op_error(pr, v, err, "a layer part spans more than one layer");
    if (op->part == LT_PART_ATTN && op->recompute_layers != 0)
        return exec_op_error(pr, v, err, "a recomputed attention part (HelixPipe recomputes without attention, 4.4.1)");
    /* recomputation without attention (HelixPipe 4.4.1, recompute_layers = 1 on the pre- and
     * post-attention parts): a recomputed post-attention keeps its inputs only and runs its
     * forward again before its backward (part_backward); a recomputed pre-attention runs as
     * one that keeps its arrays (the first norm's output, which the attention keeps anyway
     * where it runs on the same stage, and its statistics) */
    if (pr->eh && pr->eh->weights_needed) return pr->eh->weights_needed(pr->eh->ctx, (int)op->layer_begin, err);
    return LT_OK;
}

/* ---------------------------------------------------------------- the Q/K/V weights sent
 * HelixPipe sends the QKV linear's weights with its input from the pre-attention's stage,
 * which holds them (4.2), to the attention's, and their gradients back: an attention F that
 * receives them keeps them (wqkv) until its B has run, which makes their gradients into a
 * buffer of its own and sends them with the input gradients; the pre-attention's B adds them
 * into the stage's gradients. */

/* The model (and gradient views, *g) attention op v of layer l runs with: pr->m's where the
 * layer's Q/K/V are here; where its F received them, pr->m with layer l's Q/K/V views on
 * them (and, dw non-NULL, the gradient views on dw, fp32). am holds the copies. */
typedef struct attn_model {
    lt_llama m;
    lt_llama_views g;
    lt_layer_views *lw; /* [2 x layers] the copies of the weights' and the gradients' layer views */
} attn_model;

static lt_status attn_model_of(pipe_run *pr, uint32_t v, float *dw, attn_model *am, const lt_llama **m,
                               const lt_llama_views **g, lt_error *err) {
    *m = pr->m, *g = pr->grads;
    const op_state *f = &pr->ops[acts_owner(pr, v)];
    if (pr->deps.op[v]->part != LT_PART_ATTN || !f->wqkv) return LT_OK;
    int l = (int)pr->deps.op[v]->layer_begin, L = pr->m->shape.layers;
    if (!(am->lw = malloc(2 * (size_t)L * sizeof *am->lw))) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    am->m = *pr->m;
    memcpy(am->lw, pr->m->w.layer, (size_t)L * sizeof *am->lw);
    am->m.w.layer = am->lw;
    float **slot[6];
    size_t n[6], at = 0, wb = exec_be(pr)->weight_bytes;
    int nt = exec_qkv_tensors(pr->m, &am->lw[l], slot, n);
    for (int k = 0; k < nt; at += n[k] * wb, k++) *slot[k] = exec_at(f->wqkv, at);
    *m = &am->m;
    if (dw && pr->grads) {
        am->g = *pr->grads;
        memcpy(am->lw + L, pr->grads->layer, (size_t)L * sizeof *am->lw);
        am->g.layer = am->lw + L;
        exec_qkv_tensors(pr->m, &am->g.layer[l], slot, n);
        for (int k = 0, e = 0; k < nt; e += (int)n[k], k++) *slot[k] = dw + e;
        *g = &am->g;
    }
    return LT_OK;
}

/* Pack what part op v sends to another stage (the first tensor a, the second b, and across
 * the pre-attention | attention boundary the Q/K/V weights: the model's, or the gradients in
 * dw) into its tx (a NULL: the first is there already, passed through from what v received). */
static lt_status part_pack(pipe_run *pr, uint32_t v, void *a, void *b, const float *dw, lt_error *err) {
    op_state *o = &pr->ops[v];
    const lt_backend *be = exec_be(pr);
    size_t first, qkv, bytes = exec_part_xfer_bytes(pr, v, false, &first, &qkv);
    if (bytes == 0) return LT_OK; /* its successor runs here */
    if (!o->tx && !(o->tx = be->alloc(be, bytes, false)))
        return lt_backend_nomem(be, err, NULL, "out of memory for a %zu-byte layer part transfer", bytes);
    if (!o->tx_bytes) o->tx_bytes = bytes, exec_track(pr, bytes);
    if (a) be->copy(be, o->tx, a, first);
    be->copy(be, (char *)o->tx + first, b, bytes - first - qkv);
    if (qkv == 0) return LT_OK;
    if (pr->deps.op[v]->kind == LT_OP_B) { /* the gradients, fp32 */
        if (!dw) return exec_op_error(pr, v, err, "has no Q/K/V weight gradients to send");
        be->copy(be, (char *)o->tx + (bytes - qkv), dw, qkv);
        return LT_OK;
    }
    lt_layer_views lv = pr->m->w.layer[pr->deps.op[v]->layer_begin];
    float **slot[6];
    size_t n[6], at = bytes - qkv;
    for (int k = 0, nt = exec_qkv_tensors(pr->m, &lv, slot, n); k < nt; at += n[k] * be->weight_bytes, k++) {
        if (!*slot[k]) return exec_op_error(pr, v, err, "sends Q/K/V weights its stage does not hold");
        be->copy(be, (char *)o->tx + at, be->weight(be, pr->m, *slot[k]), n[k] * be->weight_bytes);
    }
    return LT_OK;
}

/* Unpack what part op v received (its rx) into a and b, and free it; the Q/K/V weights that
 * follow them kept in v's wqkv (an attention F), or their gradients added into the layer's
 * (a pre-attention B). a NULL (an attention part whose layer's residual is kept on neither
 * side here): the first tensor goes straight into the op's tx, passed on to the
 * post-attention's stage. */
static lt_status part_unpack(pipe_run *pr, uint32_t v, void *a, void *b, lt_error *err) {
    op_state *o = &pr->ops[v];
    const lt_backend *be = exec_be(pr);
    size_t first, qkv, bytes = exec_part_xfer_bytes(pr, v, true, &first, &qkv);
    if (!o->rx || bytes != o->rx_bytes) return exec_op_error(pr, v, err, "no input from the stage before");
    const char *w = (const char *)o->rx + (bytes - qkv);
    if (qkv && pr->deps.op[v]->kind != LT_OP_B) { /* the weights, kept until the B has run */
        if (!(o->wqkv = be->alloc(be, qkv, false)))
            return lt_backend_nomem(be, err, NULL, "out of memory for %zu bytes of Q/K/V weights", qkv);
        o->wqkv_bytes = qkv;
        exec_track(pr, qkv);
        be->copy(be, o->wqkv, w, qkv);
    } else if (qkv) { /* their gradients, into the layer's */
        if (!pr->grads) return exec_op_error(pr, v, err, "receives Q/K/V weight gradients without gradient buffers");
        lt_layer_views lv = pr->grads->layer[pr->deps.op[v]->layer_begin];
        float **slot[6];
        size_t n[6];
        for (int k = 0, nt = exec_qkv_tensors(pr->m, &lv, slot, n); k < nt; w += n[k] * sizeof(float), k++) {
            if (!*slot[k]) return exec_op_error(pr, v, err, "receives Q/K/V weight gradients its stage does not hold");
            be->accumulate_f32(be, *slot[k], (const float *)w, n[k]);
        }
    }
    if (!a) { /* the residual passes through */
        size_t out_first, out_bytes = exec_part_xfer_bytes(pr, v, false, &out_first, NULL);
        if (out_bytes == 0 || out_first != first) return exec_op_error(pr, v, err, "keeps no residual and sends none");
        if (!(o->tx = be->alloc(be, out_bytes, false)))
            return lt_backend_nomem(be, err, NULL, "out of memory for a %zu-byte layer part transfer", out_bytes);
        o->tx_bytes = out_bytes;
        exec_track(pr, out_bytes);
        be->copy(be, o->tx, o->rx, first);
    } else {
        be->copy(be, a, o->rx, first);
    }
    be->copy(be, b, (char *)o->rx + first, bytes - first - qkv);
    exec_untrack(pr, o->rx_bytes, pr->cur_stage);
    be->free(be, o->rx);
    o->rx = NULL, o->rx_bytes = 0;
    return LT_OK;
}

static lt_status part_forward(pipe_run *pr, uint32_t v, lt_error *err) {
    op_state *o = &pr->ops[v];
    const lt_op *op = pr->deps.op[v];
    int l = (int)op->layer_begin, L = pr->m->shape.layers;
    lt_status st = part_check(pr, v, err);
    if (st != LT_OK) return st;
    uint32_t from = exec_pred_of_kind(&pr->deps, v, LT_DEP_PATH);
    const float *in = NULL;
    lt_acts *a;
    if (op->part == LT_PART_PRE && l > 0) { /* the layer before's output, made here */
        const lt_acts *prev = from == LT_DEP_NONE || !exec_local(pr, from) ? NULL : part_acts(pr, from);
        if (!prev) return exec_op_error(pr, v, err, "no input from the layer before");
        in = prev->out;
    }
    /* the layer input x read where it is, not kept again: a pre-attention's is the layer
     * before's output (held until this layer's pre-attention B has read it: its B runs
     * before the layer before's); a post-attention alone here reads it from the transfer
     * (its backward does not read x) */
    bool post_rc = op->part == LT_PART_POST && exec_recompute_of(op) > 0; /* (its recompute reads x) */
    /* (without gradients, a scoring plan's, nothing holds the layer before's output: x copied) */
    bool pre_in_place = op->part == LT_PART_PRE && l > 0 && pr->grads;
    bool x_in_place = pre_in_place || (op->part == LT_PART_POST && !post_rc);
    if (acts_owner(pr, v) == v) { /* the layer's activations here start with this part: those of its parts here */
        unsigned parts = parts_here(pr, v) | (x_in_place ? LT_ACTS_X_OUTSIDE : 0u);
        st = lt_acts_alloc_parts(&o->acts[0], pr->m, pr->b, &o->u[0], l, l == L - 1 && (parts & (1u << LT_PART_POST)),
                                 parts, err);
        exec_track(pr, o->acts[0].bytes);
        if (st != LT_OK) return st;
        a = &o->acts[0];
        lt_layer_acts *la = &a->layer[0];
        if (pre_in_place) la->x = (float *)in;
        if (op->part == LT_PART_ATTN) st = part_unpack(pr, v, la->x, la->n1, err);
        if (op->part == LT_PART_POST && post_rc) st = part_unpack(pr, v, la->x, la->att, err);
        else if (op->part == LT_PART_POST) { /* x stays in the received buffer until the forward has run */
            size_t first, bytes = exec_part_xfer_bytes(pr, v, true, &first, NULL);
            if (!o->rx || bytes != o->rx_bytes) return exec_op_error(pr, v, err, "no input from the stage before");
            la->x = o->rx;
            exec_be(pr)->copy(exec_be(pr), la->att, (char *)o->rx + first, bytes - first);
        }
        if (st != LT_OK) return st;
    } else if (!(a = part_acts(pr, v))) {
        return exec_op_error(pr, v, err, "no activations of its layer's earlier parts");
    }
    lt_pass pass = part_pass(pr, op);
    double loss = 0;
    size_t scratch = 0; /* a recomputed post-attention's arrays, for this forward only */
    if (post_rc) {
        st = lt_acts_part_scratch(a, pr->m, true, false, &scratch, err);
        exec_track(pr, scratch);
    }
    attn_model am = {0};
    const lt_llama *m;
    const lt_llama_views *g;
    if (st == LT_OK) st = attn_model_of(pr, v, NULL, &am, &m, &g, err);
    if (st == LT_OK)
        st = lt_llama_forward_part(m, &pass, (lt_layer_part)op->part, &o->u[0], in, pr->kv, a, g, &loss, pr->pool, err);
    free(am.lw);
    if (post_rc) exec_untrack(pr, scratch, pr->cur_stage), lt_acts_part_scratch(a, pr->m, false, false, NULL, NULL);
    if (o->rx && a->layer[0].x == o->rx) { /* a post-attention's x read from its transfer: done with it */
        exec_untrack(pr, o->rx_bytes, pr->cur_stage);
        exec_be(pr)->free(exec_be(pr), o->rx);
        o->rx = NULL, o->rx_bytes = 0, a->layer[0].x = NULL;
    }
    if (st == LT_OK && pass.head) pr->stats->loss_sum += loss;
    if (st == LT_OK && op->part != LT_PART_POST) /* to another stage: x and n1, or x (if kept here) and att */
        st = part_pack(pr, v, o->tx ? NULL : a->layer[0].x, op->part == LT_PART_PRE ? a->layer[0].n1 : a->layer[0].att,
                       NULL, err);
    if (st == LT_OK) exec_count_tokens(pr, pr->f_tokens, exec_place_of(pr, v), &o->u[0], 1);
    return st;
}

static lt_status part_backward(pipe_run *pr, uint32_t v, lt_error *err) {
    op_state *o = &pr->ops[v];
    const lt_op *op = pr->deps.op[v];
    int l = (int)op->layer_begin;
    lt_status st = part_check(pr, v, err);
    if (st != LT_OK) return st;
    lt_acts *a = part_acts(pr, v);
    if (!a) return exec_op_error(pr, v, err, "no activations of its forward");
    lt_pass pass = part_pass(pr, op);
    uint32_t from = exec_pred_of_kind(&pr->deps, v, LT_DEP_PATH);
    uint32_t owner = grads_owner(pr, v);
    lt_part_grads *pg = &pr->ops[owner].pg;
    const float *dout = NULL;
    if (op->part == LT_PART_POST && !pass.head && (from == LT_DEP_NONE || !(dout = pr->ops[from].din[0])))
        return exec_op_error(pr, v, err, "no gradient from the layer after");
    if (owner == v) { /* the part gradients here start with this part: made, or received (dres and datt, or dn1) */
        if ((st = lt_part_grads_alloc(pg, pr->m, a, err)) != LT_OK) return st;
        exec_track(pr, pg->bytes);
        if (op->part == LT_PART_ATTN) st = part_unpack(pr, v, pg->dres, pg->datt, err);
        else if (op->part == LT_PART_PRE) st = part_unpack(pr, v, pg->dres, pg->dn1, err);
        if (st != LT_OK) return st;
    } else if (!pg->buf) {
        return exec_op_error(pr, v, err, "no part gradients from its post-attention backward");
    }
    float *din = NULL;
    if (op->part == LT_PART_PRE && l > 0) { /* held until the layer before's post-attention B read it */
        size_t bytes = (size_t)a->Tl * (size_t)pr->m->shape.hidden * exec_be(pr)->act_bytes;
        if (!(din = o->din[0] = exec_be(pr)->alloc(exec_be(pr), bytes, true)))
            return lt_backend_nomem(exec_be(pr), err, NULL, "out of memory for a %zu-byte input gradient", bytes);
        o->din_bytes += bytes, exec_track(pr, bytes);
    }
    /* a recomputed post-attention: its forward again from the kept inputs (without the
     * head, whose gradients its forward made), the same arrays bit for bit */
    bool post_rc = op->part == LT_PART_POST && exec_recompute_of(op) > 0;
    size_t scratch = 0;
    if (post_rc) {
        lt_pass rp = pass;
        rp.head = false, rp.loss_scale = 0;
        st = lt_acts_part_scratch(a, pr->m, true, true, &scratch, err);
        exec_track(pr, scratch);
        if (st == LT_OK)
            st = lt_llama_forward_part(pr->m, &rp, LT_LAYER_POST, &o->u[0], NULL, pr->kv, a, NULL, NULL, pr->pool, err);
    }
    /* an attention whose Q/K/V came from another stage: their gradients into a buffer of its
     * own, sent back with dres and dn1 */
    float *dw = NULL;
    size_t dw_bytes = 0;
    if (st == LT_OK && op->part == LT_PART_ATTN && pr->ops[acts_owner(pr, v)].wqkv) {
        exec_part_xfer_bytes(pr, v, false, NULL, &dw_bytes);
        if (!(dw = exec_be(pr)->alloc(exec_be(pr), dw_bytes ? dw_bytes : 1, true)))
            return lt_backend_nomem(exec_be(pr), err, NULL, "out of memory for %zu bytes of Q/K/V gradients", dw_bytes);
        exec_track(pr, dw_bytes);
    }
    attn_model am = {0};
    const lt_llama *m;
    const lt_llama_views *g;
    if (st == LT_OK) st = attn_model_of(pr, v, dw, &am, &m, &g, err);
    if (st == LT_OK)
        st = lt_llama_backward_part(m, &pass, (lt_layer_part)op->part, &o->u[0], dout, pr->kv, a, g, pg, din, pr->pool,
                                    err);
    free(am.lw);
    if (post_rc) exec_untrack(pr, scratch, pr->cur_stage), lt_acts_part_scratch(a, pr->m, false, false, NULL, NULL);
    bool sent = false;
    if (st == LT_OK && op->part != LT_PART_PRE) { /* to another stage: dres and datt, or dres and dn1 (and dW) */
        st = part_pack(pr, v, pg->dres, op->part == LT_PART_POST ? pg->datt : pg->dn1, dw, err);
        sent = o->tx != NULL;
    }
    if (dw) exec_untrack(pr, dw_bytes, pr->cur_stage), exec_be(pr)->free(exec_be(pr), dw);
    if (op->part == LT_PART_PRE || sent) { /* the part gradients' last reader here */
        exec_untrack(pr, pg->bytes, (int)pr->deps.stage[owner]);
        lt_part_grads_free(pg);
    }
    if (st == LT_OK) exec_count_tokens(pr, pr->b_tokens, exec_place_of(pr, v), &o->u[0], 1);
    return st;
}

/* F or FK op v: each member's shard through the op's layers; the activations kept in
 * ops[v].acts. With R > 0 the first R layers run with scratch activations and each member
 * keeps only their input (x_in). */
lt_status exec_forward(pipe_run *pr, uint32_t v, lt_error *err) {
    if (pr->deps.op[v]->part != LT_PART_ALL) return part_forward(pr, v, err);
    op_state *o = &pr->ops[v];
    const lt_op *op = pr->deps.op[v];
    int layers = pr->m->shape.layers, G = o->G, n = o->n_active;
    bool with_loss = op->kind == LT_OP_F;
    int l0 = (int)op->layer_begin, l1 = (int)op->layer_end, R = exec_recompute_of(op);
    uint32_t from = LT_DEP_NONE;
    if (l0 > 0) {
        from = exec_pred_of_kind(&pr->deps, v, LT_DEP_PATH);
        if (from == LT_DEP_NONE || pr->ops[from].G != G) return exec_op_error(pr, v, err, "no input from the stage before");
    }
    exec_ring ring;
    lt_cp_hooks hk;
    exec_ring_hooks(pr, v, &ring, &hk);
    const lt_cp_hooks *hooks = hk.kv_ready || hk.weights ? &hk : NULL;
    lt_train_unit *cu = calloc((size_t)G, sizeof *cu);
    lt_acts *ca = calloc((size_t)G, sizeof *ca), *cs = calloc((size_t)G, sizeof *cs);
    const float **cin = calloc((size_t)G, sizeof *cin);
    lt_status st = cu && ca && cs && cin ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    const lt_backend *be = exec_be(pr);
    size_t C = (size_t)pr->m->shape.hidden;
    for (int i = 0; st == LT_OK && i < n; i++) {
        cu[i] = o->u[o->active[i]];
        if (from == LT_DEP_NONE) continue;
        const lt_acts *in = &pr->ops[from].acts[o->active[i]];
        if (in->T == 0) st = exec_op_error(pr, v, err, "no input from the stage before");
        else if (in->T != lt_unit_tokens(&cu[i])) st = exec_op_error(pr, v, err, "its input shard does not match its own");
        else cin[i] = in->out;
    }
    if (st == LT_OK && R > 0) { /* the recomputed layers: inputs kept, activations dropped */
        for (int i = 0; st == LT_OK && from != LT_DEP_NONE && i < n; i++) {
            int g = o->active[i];
            size_t bytes = (size_t)lt_unit_sp_rows(pr->m, &cu[i]) * C * be->act_bytes; /* this rank's SP rows */
            if (!(o->x_in[g] = be->alloc(be, bytes ? bytes : 1, false)))
                st = lt_backend_nomem(be, err, NULL, "out of memory for a %zu-byte kept input", bytes);
            else be->copy(be, o->x_in[g], cin[i], bytes), o->x_bytes[g] = bytes, exec_track(pr, bytes);
        }
        lt_pass pa = {.l0 = l0, .l1 = l0 + R, .embed = l0 == 0, .meter = &pr->meter};
        if (st == LT_OK) st = members_forward(pr, &pa, cu, n, cin, cs, hooks, NULL, err);
        for (int i = 0; st == LT_OK && i < n; i++) cin[i] = cs[i].out;
    }
    lt_pass pass = {.l0 = l0 + R, .l1 = l1, .embed = l0 + R == 0, .head = l1 == layers && with_loss,
                    .meter = &pr->meter};
    pass.loss_scale = pass.head && pr->grads ? (float)(1.0 / (double)pr->p->n_predicted) : 0.0f; /* (no gradient: 0) */
    double loss = 0;
    if (st == LT_OK) st = members_forward(pr, &pass, cu, n, cin, ca, hooks, &loss, err);
    for (int i = 0; ca && i < n; i++) o->acts[o->active[i]] = ca[i]; /* (released with the op, also after an error) */
    for (int i = 0; cs && i < n; i++) {
        exec_untrack(pr, cs[i].bytes, pr->cur_stage);
        lt_acts_free(&cs[i]);
    }
    if (st == LT_OK && pass.head) pr->stats->loss_sum += loss;
    if (st == LT_OK && with_loss) exec_count_tokens(pr, pr->f_tokens, exec_place_of(pr, v), cu, n);
    free(cu), free(ca), free(cs), free(cin);
    return st;
}

/* The hooks' context of a B op: the ring's (first: its hooks read it as theirs), the op,
 * and the windows its rows are gathered into. */
typedef struct bwd_hooks {
    exec_ring ring;
    pipe_run *pr;
    uint32_t v;
    int R;
    lt_acts *win;
} bwd_hooks;

/* lt_cp_hooks.layer_begin of a gathering B op: layer l's rows, if l is in the windows' range. */
static lt_status gather_layer(void *ctx, int l, lt_error *err) {
    bwd_hooks *b = ctx;
    const lt_op *op = b->pr->deps.op[b->v];
    if (l < (int)op->layer_begin + b->R || l >= (int)op->layer_end) return LT_OK;
    return exec_gather_rows(b->pr, b->v, l, l + 1, false, b->win, NULL, err);
}

/* lt_cp_hooks.layer_done of the stage's last B op. */
static lt_status final_layer(void *ctx, int l, lt_error *err) { return exec_final_layer(((bwd_hooks *)ctx)->pr, l, err); }

/* B op v: each member's shard backward, its activations read in place from its forward or
 * its rows gathered (one layer at a time, before that layer's backward, into a window
 * set: one layer's copy is live beside the backward's own scratch); with recompute R > 0,
 * first the forward of the first R layers again from the kept inputs. */
lt_status exec_backward(pipe_run *pr, uint32_t v, lt_error *err) {
    if (pr->deps.op[v]->part != LT_PART_ALL) return part_backward(pr, v, err);
    op_state *o = &pr->ops[v];
    const lt_op *op = pr->deps.op[v];
    int layers = pr->m->shape.layers, G = o->G, n = o->n_active;
    int l0 = (int)op->layer_begin, l1 = (int)op->layer_end, R = exec_recompute_of(op);
    lt_pass pb = {.l0 = l0 + R, .l1 = l1, .embed = l0 + R == 0, .head = l1 == layers, .meter = &pr->meter};
    pb.loss_scale = pb.head ? (float)(1.0 / (double)pr->p->n_predicted) : 0.0f;
    lt_pass pa = {.l0 = l0, .l1 = l0 + R, .embed = l0 == 0, .meter = &pr->meter};
    bool want_x = R > 0 && l0 > 0, gather = o->fwd == LT_DEP_NONE;
    uint32_t from = LT_DEP_NONE;
    if (!pb.head) {
        from = exec_pred_of_kind(&pr->deps, v, LT_DEP_PATH);
        if (from == LT_DEP_NONE || pr->ops[from].G != G)
            return exec_op_error(pr, v, err, "no gradient from the stage after");
    }
    lt_train_unit *cu = calloc((size_t)G, sizeof *cu);
    lt_acts *ca = calloc((size_t)G, sizeof *ca), *cr = calloc((size_t)G, sizeof *cr);
    const float **cdout = calloc((size_t)G, sizeof *cdout), **cx = calloc((size_t)G, sizeof *cx);
    float **cdin = calloc((size_t)G, sizeof *cdin), **cmid = calloc((size_t)G, sizeof *cmid);
    float **xs = calloc((size_t)G, sizeof *xs);
    lt_status st = cu && ca && cr && cdout && cx && cdin && cmid && xs ? LT_OK
                                                                         : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    const lt_backend *be = exec_be(pr);
    size_t C = (size_t)pr->m->shape.hidden, es = be->act_bytes;
    for (int i = 0; st == LT_OK && i < n; i++) {
        int g = o->active[i];
        cu[i] = o->u[g];
        size_t TC = (size_t)lt_unit_sp_rows(pr->m, &cu[i]) * C; /* [*, C]: this rank's SP rows */
        if (!pb.head && !(cdout[i] = pr->ops[from].din[g])) {
            st = exec_op_error(pr, v, err, "no gradient from the stage after");
        } else if (gather) { /* the kept inputs' rows and a window over the range */
            if (want_x && !(xs[i] = be->alloc(be, TC * es, false)))
                st = lt_backend_nomem(be, err, NULL, "out of memory for a %zu-byte kept input", TC * es);
            else if (want_x) exec_track(pr, TC * es);
            if (st == LT_OK) st = lt_acts_alloc_window(&ca[i], pr->m, pr->b, &cu[i], l0 + R, l1, pb.head, err);
            exec_track(pr, ca[i].bytes);
            cx[i] = xs[i];
        } else { /* the forward's, in place */
            const op_state *f = &pr->ops[o->fwd];
            if (f->acts[g].T == 0 || f->kept[g].at) st = exec_op_error(pr, v, err, "no activations of its forward");
            else if (want_x && !f->x_in[g]) st = exec_op_error(pr, v, err, "its forward kept no input to recompute from");
            else ca[i] = f->acts[g], cx[i] = f->x_in[g];
        }
    }
    /* before the first layer: the head's part of the rows (the backward starts from it) and
     * the recomputed layers' inputs; then each layer's rows as its backward begins */
    if (st == LT_OK && gather && (pb.head || want_x))
        st = exec_gather_rows(pr, v, l1, l1, pb.head, ca, want_x ? xs : NULL, err);
    bwd_hooks bh = {.pr = pr, .v = v, .R = R, .win = ca};
    lt_cp_hooks ring;
    exec_ring_hooks(pr, v, &bh.ring, &ring);
    ring.ctx = &bh;
    lt_cp_hooks hf = ring, hb = ring; /* the recompute's passes, the range's backward */
    if (pr->eh && v == pr->last_b) hf.layer_done = hb.layer_done = final_layer;
    if (gather) hb.layer_begin = gather_layer;
    const lt_cp_hooks *kvh = ring.kv_ready || ring.weights ? &ring : NULL;
    const lt_cp_hooks *hfp = hf.kv_ready || hf.layer_done || hf.weights ? &hf : NULL;
    const lt_cp_hooks *hbp = hb.kv_ready || hb.layer_done || hb.layer_begin || hb.weights ? &hb : NULL;
    if (st == LT_OK && R > 0) st = members_forward(pr, &pa, cu, n, cx, cr, kvh, NULL, err);
    for (int i = 0; st == LT_OK && R > 0 && i < n; i++) {
        size_t TC = (size_t)lt_unit_sp_rows(pr->m, &cu[i]) * C; /* [*, C]: this rank's SP rows */
        if (!(cmid[i] = be->alloc(be, TC * es, true))) st = lt_backend_nomem(be, err, NULL, "out of memory for a gradient");
        else exec_track(pr, TC * es);
    }
    for (int i = 0; st == LT_OK && l0 > 0 && i < n; i++) { /* held until the stage before has read it (release) */
        size_t TC = (size_t)lt_unit_sp_rows(pr->m, &cu[i]) * C; /* [*, C]: this rank's SP rows */
        if (!(cdin[i] = o->din[o->active[i]] = be->alloc(be, TC * es, true)))
            st = lt_backend_nomem(be, err, NULL, "out of memory for a %zu-element input gradient", TC);
        else o->din_bytes += TC * es, exec_track(pr, TC * es);
    }
    if (st == LT_OK)
        st = lt_llama_backward_group(pr->m, &pb, pr->b, cu, n, pb.head ? NULL : cdout, pr->kv, ca, pr->grads, hbp,
                                     R > 0 ? cmid : (l0 > 0 ? cdin : NULL), pr->pool, err);
    for (int i = 0; gather && ca && i < n; i++) {
        exec_untrack(pr, ca[i].bytes, pr->cur_stage);
        lt_acts_free(&ca[i]);
    }
    if (st == LT_OK && R > 0 && (n > 0 || hfp))
        st = lt_llama_backward_group(pr->m, &pa, pr->b, cu, n, (const float *const *)cmid, pr->kv, cr, pr->grads, hfp,
                                     l0 > 0 ? cdin : NULL, pr->pool, err);
    if (st == LT_OK) exec_count_tokens(pr, pr->b_tokens, exec_place_of(pr, v), cu, n);
    for (int i = 0; cu && cr && i < n; i++) {
        exec_untrack(pr, cr[i].bytes, pr->cur_stage);
        lt_acts_free(&cr[i]);
        size_t TC = (size_t)lt_unit_sp_rows(pr->m, &cu[i]) * C; /* [*, C]: this rank's SP rows */
        if (cmid && cmid[i]) exec_untrack(pr, TC * es, pr->cur_stage), be->free(be, cmid[i]);
        if (xs && xs[i]) exec_untrack(pr, TC * es, pr->cur_stage), be->free(be, xs[i]);
    }
    free(cu), free(ca), free(cr), free(cdout), free(cx), free(cdin), free(cmid), free(xs);
    return st;
}
