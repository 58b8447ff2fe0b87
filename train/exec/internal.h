/*
 * train/exec/internal.h — what the executor's files share (internal to train/exec/).
 *
 * The executor runs one pipeline at a time (pipe_run): the dependency graph of its
 * schedule, an order of its ops, and per op an op_state set up once before any op runs.
 * There is one op path: every op is a context-parallel group of G members, each member a
 * shard of the op's unit (docs/plans-schema.md "The one CP rule"); an op outside any
 * group is a group of one whose member is the unit as it is. The files, each calling only
 * the ones above it in this list:
 *   state.c      what each op holds (activations, kept inputs, input gradients, the rows
 *                still held), its release, and the memory count (track / untrack)
 *   order.c      the order ops run in (Kahn's algorithm, ready ops by predicted start)
 *   shards.c     each op's members and shards, and where a backward's rows come from,
 *                computed once when the pipeline is set up
 *   ring.c       the K/V and dK/dV exchange of a group spread over processes (lt_cp_hooks)
 *   rows.c       a backward's rows gathered from the forwards that hold them (and, spread
 *                over processes, exchanged between the members)
 *   transfers.c  the transfers between processes: the model path between stages (a
 *                layer part's two tensors), a sample's K/V between attention stages
 *   passes.c     the F / FK and B ops: the model's group passes over the members
 *   step.c       a step: checks, the pipelines, the totals (train/exec/exec.h)
 */
#ifndef LT_TRAIN_EXEC_INTERNAL_H
#define LT_TRAIN_EXEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plans/schedule/deps.h" /* lt_deps */
#include "train/exec/exec.h"     /* lt_exec_stats, lt_exec_hooks */
#include "train/model/backend.h" /* lt_backend */

/* The rows an F op's member still holds, where several backward units take them (an
 * asymmetric schedule, SlimPack 4.1.2): after each such backward the rows it took are
 * dropped from the member's buffers (lt_acts_keep_rows), so what is held is what the
 * backward units still to run need (activations per slice, not per unit). */
typedef struct kept_rows {
    int T0;      /* rows the forward made */
    int *at;     /* [T0] where row r of the forward's shard is now, -1 once dropped; NULL: all in place */
    bool *taken; /* [T0] a backward that read it has run */
} kept_rows;

/* Row r of the forward's shard in its buffers now (-1: dropped). */
static inline int exec_row_now(const kept_rows *k, int r) { return k && k->at ? k->at[r] : r; }

/* Where row drow of a B member's shard comes from: row srow (as the forward made it;
 * exec_row_now says where it is now) of member h of forward op f. */
typedef struct row_src {
    uint32_t f;
    int h, srow, drow;
} row_src;

/* One op as this process runs it. Set up once per pipeline (shards.c), before any op runs. */
typedef struct op_state {
    int G;                /* members: the op's context-parallel degree, 1 outside any group */
    int me;               /* distributed: the member this process runs (0 otherwise) */
    int *ranks;           /* distributed, G > 1: [G] the world rank of each member on this stage */
    lt_train_unit *u;     /* [G] the members' shards (G = 1: the op's unit as it is) */
    lt_train_slice *sl;   /* their slices */
    int n_active, *active; /* the members run here that hold tokens, in member order */
    /* distributed, G > 1: per sample of the group's slices, its largest end (the rows
     * whose dK/dV the group's backward sums) */
    int n_kv, *kv_sample, *kv_end;
    /* B ops run here: fwd, the F whose activations every member reads in place (its
     * shards equal this op's); LT_DEP_NONE: the rows are gathered, rows[g][0..n_rows[g])
     * saying where member g's come from (in one order every member computes alike) */
    uint32_t fwd;
    row_src **rows;
    size_t *n_rows;
    /* what the op holds, per member (T = 0 / NULL: nothing, or another process's member) */
    lt_acts *acts;     /* [G] F / FK: the activations kept (a received input: `out` only) */
    float **x_in;      /* [G] F / FK with recompute, not on the first stage: the kept input [T, C] */
    size_t *x_bytes;   /* [G] bytes of x_in */
    kept_rows *kept;   /* [G] F / FK: which rows of acts / x_in are still held */
    float **din;       /* [G] B with layer_begin > 0: the gradient of its input */
    size_t din_bytes;  /* bytes of din's buffers held here */
    lt_part_grads pg;   /* HelixPipe: the part gradients of its (unit, layer) on this process,
                           made by its first B here (the post-attention, or the one that
                           received them) and freed by its last */
    /* HelixPipe's layer parts across processes (transfers.c): the two tensors received from
     * another stage until the op unpacks them (rx), and the two it sends, packed (tx) */
    float *rx, *tx;
    size_t rx_bytes, tx_bytes;
    /* an attention F that received its layer's Q/K/V weights with its inputs (HelixPipe 4.2:
     * this stage does not hold them): them, in the order of exec_qkv_tensors, until its B has
     * run (backend memory of weight_bytes elements) */
    void *wqkv;
    size_t wqkv_bytes;
    uint32_t refs;      /* readers still to run of the op's buffers */
    uint32_t path_refs; /* ... of them, the model-path readers (the next stage's op) */
} op_state;

typedef struct pipe_run {
    const lt_llama *m;
    const lt_step_plan *p;
    const lt_batch *b;
    const lt_llama_views *grads;
    lt_kvctx *kv;
    lt_pool *pool;
    size_t ri; /* the pipeline: index into p->ranks */
    const lt_rank_plan *r;
    lt_deps deps;
    op_state *ops;                   /* [n_ops] */
    size_t live, peak;               /* bytes held now and at most (track, untrack) */
    size_t *live_stage, *peak_stage; /* [pp] the same per stage of the pipeline */
    int cur_stage;                   /* the stage of the op running */
    lt_meter meter;                  /* the KV context's and the passes' allocations into live */
    int64_t *f_tokens, *b_tokens;    /* [n_pos x n_samples] tokens through each place, per sample */
    int n_pos;                       /* places counted: the stages (pp), or with HelixPipe's layer
                                        parts each (layer, part) position (3 x layers) */
    lt_exec_stats *stats;
    double t0; /* the step's start (exec_now) */
    size_t cap_times;
    /* the distributed engine (comm != NULL): this process runs the ops of one stage of one
     * pipeline; model-path edges between stages are transfers */
    lt_comm *comm;
    int my_dp, my_stage;
    /* the transfers into local ops, one per predecessor edge that is one (transfers.c: the
     * model path between stages; HelixPipe's K/V and dK/dV between attention stages),
     * indexed by the edge's place in deps.pred */
    lt_comm_req **recv_req; /* [edges] the receive, once posted */
    float **recv_buf;       /* [edges] ... into this buffer (backend memory) */
    size_t *recv_bytes;     /* [edges] its bytes once posted (SIZE_MAX: nothing comes); 0: not yet */
    uint32_t *sends_of;     /* [n_ops] sends still reading op v's buffers */
    struct pending_send {
        uint32_t v;
        lt_comm_req *req;
        void *own;        /* a buffer packed for the send, freed when it completes (NULL: v's) */
        size_t own_bytes;
    } *sends;
    size_t n_sends, cap_sends;
    /* the stage channels' receive order (train/dist/comm.h: a channel's transfers match in
     * posting order; lt_deps_channels): channel t -> here is entries [chan_off[here * pp +
     * t], chan_off[here * pp + t + 1]) of chan_edges (the edges, as recv_req, in the order
     * stage t sends) and chan_posts (the index of the local op at whose start each is
     * posted); chan_next[t] its first entry not yet posted */
    uint32_t *chan_off, *chan_edges, *chan_posts, *chan_next;
    uint32_t *kv_last;       /* [layers x n_samples] the last B op over a sample at a layer: after
                                it the sample's K/V context of the stage's layers is freed */
    const lt_exec_hooks *eh; /* distributed: told when a layer's gradients are final */
    uint32_t last_b;         /* ... after this op (the stage's last B), or LT_DEP_NONE */
} pipe_run;

/* ---------------------------------------------------------------- state.c */

/* The model's backend (train/model/backend.h): the inputs, input gradients and transfers
 * the executor keeps are its buffers, of its element size (4: the CPU fp32 reference). */
static inline const lt_backend *exec_be(const pipe_run *pr) { return lt_backend_of(pr->m); }
/* Byte offset into a backend pointer typed float * (its elements may be 2 bytes). */
static inline float *exec_at(const void *base, size_t bytes) { return (float *)((char *)base + bytes); }

const char *exec_kind_name(uint8_t kind);
/* LT_ERR_INPUT naming the step, pipeline, stage and op v, and `what`. */
lt_status exec_op_error(pipe_run *pr, uint32_t v, lt_error *err, const char *what);
/* The recomputed layers of op: its recompute_layers, at most its range (FK: none). */
int exec_recompute_of(const lt_op *op);
/* The peer of v's first predecessor edge of `kind`, or LT_DEP_NONE. */
uint32_t exec_pred_of_kind(const lt_deps *d, uint32_t v, lt_dep_kind kind);
/* Does this process run op v? (every op without the distributed engine) */
bool exec_local(const pipe_run *pr, uint32_t v);
double exec_now(void);
/* Bytes the running op's stage starts holding / stage `stage` stops holding. */
void exec_track(pipe_run *pr, size_t bytes);
void exec_untrack(pipe_run *pr, size_t bytes, int stage);
/* The lt_meter of pr (what the KV context and the passes allocate, on the running op's stage). */
lt_meter exec_meter(pipe_run *pr);
/* lt_cp_hooks.layer_done of the stage's last B op (ctx = pr): the layer's gradients are final. */
lt_status exec_final_layer(void *ctx, int layer, lt_error *err);
/* Tokens of each member shard through place `at` (exec_place_of), per sample, into counts. */
void exec_count_tokens(pipe_run *pr, int64_t *counts, int at, const lt_train_unit *u, int n);
/* The place op v's tokens count at: its stage, or for HelixPipe's layer part its position
 * 3 x layer + part - 1 (pr->n_pos). */
int exec_place_of(const pipe_run *pr, uint32_t v);
/* Free what op v holds (its members' buffers), uncounting them. */
void exec_release(pipe_run *pr, uint32_t v);
/* After B op v: forward op f (an LT_DEP_ACT predecessor that other backward ops still read)
 * no longer holds the rows v took (now, or at a later drop or its release if the next
 * stage still reads f's output). */
lt_status exec_drop_consumed(pipe_run *pr, uint32_t v, uint32_t f, lt_error *err);

/* ---------------------------------------------------------------- order.c */

/* order[0..n_ops): every op after its predecessors (ready ops by predicted start). A cycle
 * is LT_ERR_INPUT naming an op that cannot run and one predecessor it waits for. */
lt_status exec_order(const lt_deps *d, const lt_rank_plan *r, uint64_t step, uint32_t *order, lt_error *err);

/* ---------------------------------------------------------------- shards.c */

/* Set up every op's state (pr->ops): members, shards, the distributed members' ranks, and
 * for each B op run here whether it reads its forward in place or where its rows come
 * from. run[v]: op v runs in this process (local and not skipped). */
lt_status exec_ops_setup(pipe_run *pr, const bool *run, lt_error *err);
/* Free pr->ops (after every op's buffers were released). */
void exec_ops_free(pipe_run *pr);

/* ---------------------------------------------------------------- ring.c */

/* The hooks of op v's group spread over processes (distributed, G > 1): the K/V and dK/dV
 * ring exchange per layer. ctx is filled and must outlive the calls. */
typedef struct exec_ring {
    pipe_run *pr;
    const op_state *o;
    size_t packed; /* bytes of the exchange's buffers while they are held */
} exec_ring;
void exec_ring_hooks(pipe_run *pr, uint32_t v, exec_ring *ctx, lt_cp_hooks *h);

/* ---------------------------------------------------------------- rows.c */

/* Every active member's rows of layers [lo, hi) of B op v (with `head` the head's part,
 * with xs the kept inputs of its recomputed layers) into its window win[i]: from this
 * process's forward shards, and distributed from the other members' (an exchange every
 * member makes alike). */
lt_status exec_gather_rows(pipe_run *pr, uint32_t v, int lo, int hi, bool head, lt_acts *win, float **xs,
                           lt_error *err);

/* ---------------------------------------------------------------- transfers.c */

/* The receive state and the channels into this stage (lt_deps_channels). */
lt_status exec_chan_build(pipe_run *pr, lt_error *err);
/* A layer part's transfer (HelixPipe 4.2) into op v (in) or out of it: its bytes, *first
 * those of its first tensor (the residual stream x, or its gradient), the second being n1
 * (dn1) across the pre-attention | attention boundary, att (datt) across attention |
 * post-attention; across the pre-attention | attention boundary the layer's Q/K/V weights
 * follow them (their gradients in the backward: *qkv their bytes, may be NULL), as the
 * paper sends them. 0 when v has none that way (in one process: never). */
size_t exec_part_xfer_bytes(const pipe_run *pr, uint32_t v, bool in, size_t *first, size_t *qkv);
/* The Q/K/V tensors of a layer as HelixPipe's transfers carry them, in this order: the slots
 * of their views in `lv` (the weights' or their gradients'), each one's elements on this TP
 * rank in n; their count (3, or 6 with Q/K/V biases). */
int exec_qkv_tensors(const lt_llama *m, lt_layer_views *lv, float **slot[6], size_t n[6]);
/* Post the receives due at v's start (lt_deps_channels), then wait for v's inputs and put each
 * where the op reads it: a predecessor's output (a layer part's in ops[v].rx), a sample's K/V
 * or dK/dV in the context. */
lt_status exec_take_recv(pipe_run *pr, uint32_t v, lt_error *err);
/* Post the sends of local op v's outputs to the stages that read them (a layer part's
 * packed in ops[v].tx, which the sends take over). */
lt_status exec_send_outputs(pipe_run *pr, uint32_t v, lt_error *err);
/* Complete the sends that are done (all of them with `all`), releasing what they read. */
lt_status exec_poll_sends(pipe_run *pr, bool all, lt_error *err);
/* Release op v's buffers once nothing reads them: no op still to run, no send in flight. */
void exec_maybe_release(pipe_run *pr, uint32_t v);
/* The transfers' state freed (the receives never taken dropped). */
void exec_transfers_free(pipe_run *pr);

/* ---------------------------------------------------------------- passes.c */

/* Op v (F / FK, B): a whole-layer op through the model's group passes, or one of HelixPipe's
 * layer parts (op->part != LT_PART_ALL: lt_llama_forward_part / lt_llama_backward_part; a
 * group of one; the layer's activations here live in the state of its first F here, its
 * part gradients in its first B's here; a recomputed post-attention keeps its inputs and
 * runs its forward again before its backward, a recomputed pre-attention runs as keeping). */
lt_status exec_forward(pipe_run *pr, uint32_t v, lt_error *err);
lt_status exec_backward(pipe_run *pr, uint32_t v, lt_error *err);
/* The F op holding the activations layer-part F op v reads its input from, when that is
 * not v's model-path predecessor itself: the first F here of the predecessor's layer (v a
 * later part of that layer, or the next layer's pre-attention reading its output). Each
 * such reader holds a reference to it, so that a plan without B ops (a scoring plan) keeps
 * them until the last has read them. LT_DEP_NONE for any other op. */
uint32_t exec_shared_acts_of(const pipe_run *pr, uint32_t v);

#endif /* LT_TRAIN_EXEC_INTERNAL_H */
