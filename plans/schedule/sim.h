/*
 * plans/schedule/sim.h — the DAG pipeline simulator (SlimPack 4.3, Alg. 1): turns any schedule
 * (plans/schedule/schedule.h) and a cost model into step time, bubble ratio, per-stage busy time and
 * peak memory, and the critical path. docs/simulator.md has the long version.
 *
 * Vertices are the ops of every stage, (stage, action, unit) (SlimPack 4.3.1). Edges are
 * the dependencies of plans/schedule/schedule.h, derived from the tables by plans/schedule/deps.h
 * (lt_deps_build: the one definition, which the trainer executes too):
 *   model path   F/FK of a unit after the op of the same unit (and instance) ending where
 *                it begins; B after the B starting where it ends, or, at the model's end,
 *                after the F ending there. Between two stages the edge carries the P2P
 *                time of the sender's out_bytes (activations forward, gradients backward).
 *   activations  every B after the k-th F (not FK) of its unit and range, on its own stage.
 *   slices       the first forward of a range of the unit holding slice j after the first
 *                forward of that range of the unit holding slice j - 1 of the same sample
 *                (keys/values); a B after the last B of that range of the unit holding
 *                slice j + 1 (dK/dV). No transfer time.
 *   stage order  each op after the previous op of its stage. No transfer time.
 * The k-th instance of (unit, class, range) counts ops in op-id order (below), class being
 * forward family (F and FK together) or B; "the k-th F" counts F ops only.
 *
 * An op starts when all its predecessors are finished (plus transfer times) and lasts its
 * duration: Start(v) = max(0, max over edges (u, v) of Finish(u) + transfer), Finish(v) =
 * Start(v) + w(v), computed in a topological order (SlimPack Eqs. 1-2, Alg. 1). A cycle is
 * a deadlock: the run fails with LT_ERR_INPUT and a message naming the ops of one cycle,
 * each with the reason it waits for the next:
 *   "deadlock: B1@s1 waits for F1@s1 (activations) waits for B1@s1 (stage order)"
 * (an op is written lt_op_name()@s<stage>; long cycles are cut with "...").
 *
 * Memory (SlimPack 4.3.3) is an event-driven timeline per stage, on that stage:
 *   - the stage's base bytes (model states) all along;
 *   - an F op's act_bytes from its start until the end of the B matched to it (the k-th B
 *     of its unit and range consumes the k-th F); FK and B ops hold no act_bytes;
 *   - the kv_bytes of the FIRST forward-family op of a (unit, range) from its start until
 *     the end of the last B of that (unit, range); later instances (ChunkFlow's F after FK)
 *     reuse those keys/values and their kv_bytes are ignored. This is exact for causal
 *     attention: slice j's keys/values are read by the backwards of slices >= j, and the
 *     slice edges put slice j's own backward last among them;
 *   - each op's work_bytes while it runs.
 * Keys and values from another stage: a forward-family op with a K/V edge from an op on
 * another stage (plans/schedule/deps.h: HelixPipe's attention parts, a sliced sample's
 * slices attending on different stages) holds its kv_in_bytes with its kv_bytes, the same
 * span: the earlier tokens' keys and values it receives and attends to, and their
 * gradients, which its backward makes and sends back. With every K/V edge inside a stage
 * (every other schedule) kv_in_bytes are not held: that stage holds them already.
 * Events at equal times are taken in stage order, an op's frees after its allocations; an F
 * with no B (or a forward with no B over its range) holds its bytes to the end. So after a
 * complete schedule (every F matched by a B) end_mem equals the base.
 *
 * Transfer buffers (what a distributed executor holds for its transfers, as the trainer
 * does: train/exec/transfers.c). Each model-path edge u -> w between two stages carries
 * u's out_bytes, held:
 *   - on w's stage, from the start of the op at which the receive is posted (lt_deps_channels:
 *     the op before w, or earlier where w's channel delivers it before a receive read
 *     earlier) through w;
 *   - on u's stage, unless u is an F of whole layers (whose output is the activations it
 *     keeps), from u's start through the first op of u's stage ending once the send is done:
 *     the later of u's finish and the receive's posting, plus the transfer time (at the
 *     latest the stage's last op: the executor waits for its sends at the end of a step).
 * Both are freed after the op named, so end_mem still equals the base. K/V transfers between
 * HelixPipe's attention stages hold buffers too; they are not priced here (their bytes are
 * no op's out_bytes). Schedules whose ops send nothing (the unit-time model) skip all this.
 *
 * Layer parts (HelixPipe's ops over a part of one layer): the parts of one (unit, layer) on
 * one stage share one set of activations, as the trainer keeps them (train/exec/passes.c):
 * the first F of them there (the one whose model-path predecessor is on another stage or of
 * another layer) allocates the act_bytes of all of them, and its B, the last of their B ops
 * there, frees them all. A part whose layer has no other part on its stage is its own.
 *
 * Asymmetric schedules (plans/schedule/schedule.h, "Asymmetric schedules"; SlimPack 4.1.2, 4.2): B
 * ops run bunits (op->unit indexes the bunit table; "B3" in names, timelines and messages
 * is bunit 3). A B over bunit v and range r waits, instead of the symmetric B edges, for
 * the first F over r of every forward unit holding a token of v (activations, on the B's
 * own stage), the B of v starting where it ends (model path; none at the model's end), and
 * the last B over r of the bunit holding the next bslice of each of its samples (slice
 * key/value gradients). Memory: the first F over r of unit u holds act_bytes + kv_bytes
 * until the B ops taking its activations free them, each a share in proportion to the
 * tokens of u it covers, the last one (in stage order) what is left. Forward ops keep the
 * rules above. The forward units of each bunit come from lt_schedule_bunit_overlaps, once
 * per run.
 *
 * Contention (lt_sim_costs.contention = c > 0; a CPU's cores sharing caches, memory bandwidth
 * and the clock; 0 on GPUs): an op computes at the rate 1 / (1 + c x k(t)), k(t) the devices
 * of its node computing beside it at time t: the lockstep - 1 others of its own stage, and
 * lockstep for every other stage of the node busy at t (an op running). So an op of work w
 * (its cost's time) lasts D with w = the integral over [start, start + D) of dt / (1 + c
 * k(t)), i.e. D = w + c x integral of k / (1 + c k) dt: after the longest path, each op's
 * duration is recomputed from the others' intervals and the longest path walked again, until
 * no duration moves by more than 1e-9 of the step (at most 64 walks; k(t) is exact where it
 * is piecewise constant, as between two ops' boundaries). busy is then the sum of these
 * durations. A DP-Merge group (lt_sim_run_group) is priced without contention.
 *
 * Costs come from an lt_sim_costs callback table, so the same simulator serves the unit-time
 * model of ChunkFlow Sec. 3 (lt_sim_unit_costs) and the real cost model (plans/cost/cost.h).
 *
 * Performance: O(n log k) for n ops and k ops per unit (binary searches inside a unit's
 * ops, no hash of ops; an asymmetric schedule adds one O((S + B) log(S + B)) sweep over its
 * S slices and B bslices), memory linear in ops; a 100,000-op schedule simulates in a few
 * milliseconds (bench/plans). Scratch space is kept in the lt_sim and reused by later runs.
 *
 * Thread-safety: lt_sim_run keeps all its state in the lt_sim it is given; several threads
 * may simulate at once with their own lt_sim (the schedule is only read; the callbacks must
 * then be thread-safe too).
 */
#ifndef LT_SIM_H
#define LT_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/error.h"               /* lt_status, lt_error */
#include "plans/schedule/deps.h"     /* lt_deps: the edges below, as an API */
#include "plans/schedule/schedule.h" /* lt_schedule, lt_op */

/* What one op costs on its stage. All fields finite and >= 0 (else lt_sim_run fails). */
typedef struct lt_op_cost {
    double time;      /* duration, seconds (or time units) */
    double act_bytes; /* F: activation bytes kept for its B (ignored for FK and B) */
    double kv_bytes;  /* forward-family: key/value bytes of its slices, when first computed */
    double kv_in_bytes; /* forward-family: the key/value bytes (gradients included) of its
                           slices' earlier tokens, held where it runs as kv_bytes are when a
                           K/V edge brings them from another stage (HelixPipe's attention
                           parts: "Keys and values from another stage" below); 0: none */
    double work_bytes;/* transient bytes while it runs */
    double out_bytes; /* bytes it sends to the next op on the model path (activations or grads) */
} lt_op_cost;

typedef struct lt_sim_costs {
    void *ctx;
    /* Cost of op `op` on stage `stage`; *out is zeroed before the call. */
    void (*op_cost)(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out);
    /* Transfer time of `bytes` from stage `from` to stage `to` (from != to); NULL = free. */
    double (*p2p_time)(void *ctx, int from, int to, double bytes);
    /* Base bytes of a stage (model states); NULL = 0. */
    double (*base_bytes)(void *ctx, int stage);
    /* Contention (see "Contention" above): the devices of a node slow each other down by
     * `contention` per device computing beside them (0: not at all, the default; at most 1);
     * `lockstep` devices run each stage's ops together (its TP ranks and the DP replicas of
     * the node; 0 means 1); stages_per_node consecutive stages share a node (0: all). */
    double contention;
    int lockstep;
    int stages_per_node;
} lt_sim_costs;

/* The unit-time model (ChunkFlow Sec. 3, CONTRACTS.md `planner simulate`): an F or FK op
 * takes as many time units as its unit has tokens, on every stage whatever its layers; a B
 * twice its unit's (its bunit's, in an asymmetric schedule: lt_schedule_op_tokens); no
 * communication; act_bytes = 1 per F (so peak memory counts in-flight
 * micro-batches), kv_bytes = 0, work_bytes = 0, base 0. */
lt_sim_costs lt_sim_unit_costs(void);

/* A simulation's results and its reusable scratch space. Zero-initialise, call lt_sim_run
 * any number of times, then lt_sim_free. Op ids are global: stage-major, op_id =
 * first_op[stage] + index within the stage. The arrays belong to the lt_sim and are valid
 * until the next lt_sim_run or lt_sim_free; after a failed run only the error is meaningful. */
typedef struct lt_sim {
    /* results */
    double step_time;    /* latest finish over all ops (0 without ops) */
    double bubble_ratio; /* sum over stages of (step_time - busy) / (stages * step_time)
                            (ChunkFlow Eq. 1); 0 when step_time is 0 */
    int stages;
    size_t n_ops;
    double *busy;        /* [stages] sum of op durations */
    double *peak_mem;    /* [stages] peak bytes (base included) */
    double *end_mem;     /* [stages] bytes still held after the last op (base + never freed) */
    size_t *first_op;    /* [stages + 1] */
    double *start;       /* [n_ops] */
    double *finish;      /* [n_ops] */
    size_t *critical;    /* op ids of one critical path, earliest first: from the op finishing
                            last (lowest id among ties), back through the predecessor that set
                            each start (the first in the order model path, activations, slices,
                            stage order among ties), to an op starting at 0 */
    size_t n_critical;
    /* scratch (private to sim.c) */
    void *priv;
} lt_sim;

/* Simulate s under `costs`. LT_ERR_INPUT for a malformed schedule (lt_schedule_check; a
 * slice in two units; forward or backward ops of one unit over overlapping, unequal layer
 * ranges; an op whose model-path predecessor, a B whose F, or an op whose slice neighbour's
 * op over the same range is missing; a B whose F runs on another stage; in an asymmetric
 * schedule, a bunit none of whose tokens is in a forward unit), for a cost that is
 * negative or not finite, and for a deadlock (see above). Aborts on allocation failure. */
lt_status lt_sim_run(lt_sim *sim, const lt_schedule *s, const lt_sim_costs *costs, lt_error *err);
void lt_sim_free(lt_sim *sim);

/*
 * A DP-Merge group simulated as one joint graph (SlimPack 4.1.1; docs/simulator.md,
 * "DP-Merge groups"; issue 16 point 6). Its members' merged ops are collectives: the k-th
 * merged op of a stage is one op of the whole group, so it starts on every member at once,
 * at the latest of the members' ready times (each member's predecessors, with their
 * transfer times), and lasts on each member its own duration (the same on all of them when
 * they price the same slices at the same degree, as the lockstep rule makes them). The
 * members' graphs (plans/schedule/deps.h) are joined by one vertex per rendezvous, of duration 0,
 * whose predecessors are those of every op it joins, and which is the only predecessor of
 * each of them. A cycle in the joint graph is a deadlock across the members (or within
 * one), reported as lt_sim_run does with each op named "F3@s1 of pipeline P" (P =
 * labels[m], or m when labels is NULL) and a rendezvous as "the rendezvous of <op>",
 * waiting "(rendezvous)".
 *
 * sims[m] gets member m's results as lt_sim_run would give them, but with the joint times:
 * start, finish, busy, peak and end memory, step_time (its own last finish), bubble ratio,
 * and a critical path that ends (at its start) where another member's op set a rendezvous.
 * rendezvous[m][id] (id = member m's op id) is the rendezvous of that op, < n_rendezvous,
 * or LT_SIM_SOLO; rendezvous[m] may be NULL (no merged op). costs[m] prices member m.
 * Errors as lt_sim_run, those of one member prefixed "pipeline P: "; LT_ERR_INPUT for a
 * rendezvous index >= n_rendezvous. Aborts on allocation failure.
 */
#define LT_SIM_SOLO UINT32_MAX
lt_status lt_sim_run_group(lt_sim *sims, const lt_schedule *const *s, const lt_sim_costs *costs, size_t members,
                           const uint32_t *const *rendezvous, size_t n_rendezvous, const int *labels,
                           lt_error *err);

/* Op id -> (stage, index). */
void lt_sim_op_at(const lt_sim *sim, size_t id, int *stage, size_t *index);

/* The dependency graph (plans/schedule/deps.h) the latest successful lt_sim_run priced: the same op
 * ids; valid until the next lt_sim_run or lt_sim_free. NULL before any run. */
const lt_deps *lt_sim_deps(const lt_sim *sim);

/* An ASCII timeline in the style of the papers' figures, `width` columns (clamped to
 * [10, 10000]) spanning the step, each column step_time / width long:
 *
 *     time   0         5
 *            +---------+-------+
 *     s0     0-1-......1===0===
 *     s1     ..0-1-1===0===....
 *            F: unit then '-'  FK: unit then '~'  B: unit then '='  idle '.'  (step 9, 1 column = 0.5)
 *
 * (GPipe, 2 stages x 2 micro-batches, unit-time model, width 18.)
 * The first two lines are the scale: a '+' every 10 columns and at the end, the time at each
 * labelled tick. Then one row per stage, "s<stage>" in a 7-character margin. An op covers
 * the columns from round(start / column) to round(finish / column); it is drawn as its unit
 * number followed by its kind's fill character, or only fill characters when the number does
 * not fit; an op shorter than half a column takes one column if that column is idle. Idle
 * columns are '.'. The last line is the legend ("B: bunit then '='" for an asymmetric
 * schedule, whose B numbers are bunits). Written to f. */
void lt_sim_print_timeline(FILE *f, const lt_sim *sim, const lt_schedule *s, int width);

/* A Gantt chart as a standalone SVG document: one lane per stage, a box per op coloured by
 * kind (F blue, FK light blue, B orange) and labelled with its name when it fits (every box
 * has a tooltip: name, stage, start, finish), a time axis with ticks, the critical path
 * outlined in red, a legend ("B backward (bunit)" for an asymmetric schedule). The title
 * (may be NULL) is escaped. Written to f; LT_ERR_IO on a write error. */
lt_status lt_sim_write_svg(FILE *f, const lt_sim *sim, const lt_schedule *s, const char *title, lt_error *err);

#endif /* LT_SIM_H */
