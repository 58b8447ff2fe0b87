/*
 * plans/schedule/deps.h — the dependencies of a schedule's ops: the one definition of who waits for
 * whom, used by the simulator (plans/schedule/sim.h) to price a schedule and by the trainer to
 * execute it (which ops to receive from, send to, and wait for).
 *
 * The rules are plans/schedule/schedule.h's ("Dependencies are not stored", "Asymmetric
 * schedules"); this module derives them from a schedule's tables once, as an explicit
 * graph over op ids. Op ids are global and stage-major: id = first_op[stage] + the op's
 * index in that stage's list (the same numbering as lt_sim and lt_rank_plan.ops). Every
 * op has a list of predecessors (the ops it waits for) and of successors (the ops that
 * wait for it), each edge naming the op at its other end, that op's stage and index, the
 * reason (lt_dep_kind) and whether it crosses stages:
 *
 *   LT_DEP_PATH   model path (HelixPipe 4.2 positions; SlimPack 4.3.1 data edges): a
 *                 forward after the forward of the same unit and instance ending where it
 *                 begins; a B after the B of the same unit starting where it ends (at the
 *                 model's end, after the F ending there, when that is not the activation F
 *                 itself). When the two ops run on different stages this edge IS the
 *                 point-to-point transfer: activations forward (the predecessor's output
 *                 tokens x hidden) or gradients backward. p2p = true exactly then.
 *   LT_DEP_ACT    a B after the F whose activations it consumes, always on its own stage
 *                 (in an asymmetric schedule, the first F over its range of every forward
 *                 unit holding its tokens; `share` is the fraction of that F's unit's
 *                 tokens the B covers, SlimPack 4.1.2).
 *   LT_DEP_KV     the first forward of a range of the unit holding slice j after the first
 *                 forward of that range of the unit holding slice j - 1 of the same sample
 *                 (its keys/values: ChunkFlow 4.2, InfiniPipe 2.1). Same stage whenever the
 *                 two units' ops over that range run on one stage (every strategy's plans);
 *                 p2p is false: a K/V context is stage-local state, never sent.
 *   LT_DEP_DKV    a B after the last B over its range of the unit holding the next slice of
 *                 one of its samples (dK/dV flow backwards, FILO within a sample).
 *   LT_DEP_STAGE  program order: the previous op of the stage.
 *
 * Predecessors are listed in the order model path, activations, slices, stage order (the
 * simulator's critical path breaks ties by it); successors by increasing op id.
 *
 * Executing a stage's op list in order with these edges is deadlock-free exactly when
 * lt_sim_run finds no cycle. An executor of stage s: before op v, receive one tensor for
 * each predecessor edge with p2p (from that edge's stage); after v, send one for each
 * successor edge with p2p (to that edge's stage). The pairs match: an edge (u -> v) is in
 * u's successors and v's predecessors, so both ends know its peer stage and op.
 *
 * Thread-safety: a lt_deps is built by one thread, then read by any number.
 */
#ifndef LT_DEPS_H
#define LT_DEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"               /* lt_status, lt_error */
#include "plans/schedule/schedule.h" /* lt_schedule, lt_op */

#define LT_DEP_NONE UINT32_MAX

typedef enum lt_dep_kind {
    LT_DEP_PATH = 0,
    LT_DEP_ACT = 1,
    LT_DEP_KV = 2,
    LT_DEP_DKV = 3,
    LT_DEP_STAGE = 4,
} lt_dep_kind;

/* One edge as seen from one of its ends: the op at the other end. */
typedef struct lt_dep {
    uint32_t op;    /* global op id of the peer */
    uint32_t index; /* the peer's index in its stage's op list */
    uint16_t stage; /* the peer's stage */
    uint8_t kind;   /* lt_dep_kind */
    uint8_t p2p;    /* 1: a model-path edge between two stages (a send/receive pair) */
    double share;   /* LT_DEP_ACT of an asymmetric B: the share of the F's unit it covers
                       (0 < share <= 1); 1 for a symmetric B's activations; else 0 */
} lt_dep;

typedef struct lt_deps {
    int stages;
    size_t n_ops;
    size_t *first_op;     /* [stages + 1] */
    const lt_op **op;     /* [n_ops] pointers into the schedule (valid while it is unchanged) */
    uint32_t *stage;      /* [n_ops] */
    uint32_t *instance;   /* [n_ops] the op's instance number within (unit, class, range),
                             class = forward family (F, FK) or B (schedule.h "Instances") */
    uint32_t *pred_off;   /* [n_ops + 1] into pred */
    lt_dep *pred;
    uint32_t *succ_off;   /* [n_ops + 1] into succ */
    lt_dep *succ;
    uint32_t *act_of;     /* [n_ops] B of a symmetric schedule: the F whose activations it
                             consumes (its LT_DEP_ACT edge); LT_DEP_NONE otherwise */
    uint32_t *kv_last_b;  /* [n_ops] the first forward-family op of a (unit, range): the last B
                             over that (unit, range) in op-id order, after which its slices'
                             keys/values are dead; LT_DEP_NONE otherwise (and in an asymmetric
                             schedule, where the B ops name bunits: see the ACT shares) */
    uint32_t *kv_of;      /* [n_ops] a B that is some forward's kv_last_b on the same stage:
                             that forward; LT_DEP_NONE otherwise */
    void *priv;           /* scratch, reused by the next build */
} lt_deps;

/* Derive the dependency graph of s into d (zero-initialised the first time; reused after).
 * LT_ERR_INPUT, naming the op, for what lt_sim_run refuses as malformed: lt_schedule_check,
 * a slice in two units, ops of one unit over overlapping unequal ranges, a missing
 * model-path / activation / slice-neighbour op, a B whose F runs on another stage, an
 * asymmetric bunit none of whose tokens is forwarded. Cycles are NOT looked for here
 * (lt_sim_run reports them as deadlocks). Aborts on allocation failure. */
lt_status lt_deps_build(lt_deps *d, const lt_schedule *s, lt_error *err);
void lt_deps_free(lt_deps *d); /* NULL-safe; leaves d zeroed */

/* id = first_op[stage] + index. */
size_t lt_deps_op_id(const lt_deps *d, int stage, size_t index);
/* Op id -> (stage, index). */
void lt_deps_op_at(const lt_deps *d, size_t id, int *stage, size_t *index);

/* The predecessors / successors of op id: a pointer into d and their count. */
const lt_dep *lt_deps_preds(const lt_deps *d, size_t id, size_t *n);
const lt_dep *lt_deps_succs(const lt_deps *d, size_t id, size_t *n);

/*
 * Transfers: what an executor sends and receives between its stages. Every p2p edge, and a
 * K/V (dK/dV) edge between two attention parts (LT_PART_ATTN) on different stages (HelixPipe
 * places micro-batch i's attention of layer l on stage (l + i + 1) mod p, 4.2: the sample's
 * keys and values follow it). Several edges between the same two ops of one kind (units that
 * share several sliced samples) are one transfer, carried on the first of them.
 * lt_deps_transfer: is list[k] (op id's predecessors or successors) such a transfer.
 *
 * Channels: the transfers from stage `from` to stage `to` match in the order `from` sends
 * them: its ops in order, each op's successors in order. The receiver posts (and allocates
 * the buffer of) each receive at the start of the op before the op reading it (the stage's
 * first op: at its own start), to overlap the transfer with that op, and in channel order, so
 * a receive read late is posted early when a receive after it on its channel is read early:
 * post[k] = the least over j >= k of want[j], want[j] = max(0, index of j's reader - 1).
 * lt_deps_channels gives every channel at once: channel (from, to) is entries
 * [off[to * stages + from], off[to * stages + from + 1]) of edges (each transfer's
 * predecessor-edge index into d->pred, at the receiving op) and post (the index in `to`'s op
 * list of the op at whose start it is posted); off has stages^2 + 1 entries, edges and post
 * room for one per predecessor edge. Returns the number of transfers. The trainer posts its
 * receives by it (train/exec/transfers.c) and the simulator holds their buffers by it
 * (plans/schedule/sim.h, "Transfer buffers"). O(ops + edges + stages^2); aborts on
 * allocation failure.
 */
bool lt_deps_transfer(const lt_deps *d, size_t id, const lt_dep *list, size_t k);
size_t lt_deps_channels(const lt_deps *d, uint32_t *off, uint32_t *edges, uint32_t *post);

/* "model path", "activations", "slice keys/values", "slice key/value gradients",
 * "stage order"; "?" out of range. */
const char *lt_dep_kind_name(lt_dep_kind k);

#endif /* LT_DEPS_H */
