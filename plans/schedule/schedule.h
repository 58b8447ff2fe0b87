/*
 * plans/schedule/schedule.h — the one schedule representation of every strategy (SlimPack 4.3,
 * ChunkFlow 4.3, InfiniPipe 3.3, HelixPipe 4.3), and the generators of the classic
 * pipeline schedules over it.
 *
 * A schedule is three tables:
 *   slices  the token range [begin, end) of one sample. Its attention context is the
 *           sample's earlier tokens: C = begin (InfiniPipe 3.1 "chunk {C, S}").
 *   units   what one F or B op processes at once (a micro-batch, a chunk, a MicroPack): a
 *           run of consecutive slices of the slice table. A unit may mix slices of several
 *           samples (packing) and hold a slice of a long sample (splitting).
 *   ops     per pipeline stage, the ordered instruction list that stage executes. An op runs
 *           one unit through the layers [layer_begin, layer_end) of the model (whole layers,
 *           or one part of one layer for HelixPipe's attention-parallel partition).
 *
 * Dependencies are not stored: the simulator (plans/schedule/sim.h) derives them from the tables,
 * with these rules, which every generator must respect.
 *   - Model path. Each layer has three parts, in order pre-attention, attention,
 *     post-attention (HelixPipe 4.2); position p = 3 * layer + part. An op covers the
 *     positions [pos_begin, pos_end) (lt_op_positions). The forward-family ops (F, FK) of
 *     unit u chain along the path: the op of u starting at position b waits for the op of
 *     u ending at b, on whatever stage it ran (a P2P transfer when the stages differ). The
 *     backward ops chain the other way: the B of u ending at e waits for the B of u
 *     starting at e; the B ending at the end of the model waits for u's F ending there.
 *     Every B also waits for the F of the same unit and range on its own stage (its
 *     activations).
 *   - Instances. A unit may be forwarded more than once over the same range (ChunkFlow
 *     Alg. 2 runs FK, then later F again before B). The k-th forward-family op of (unit,
 *     range) chains with the k-th of the neighbouring range; the k-th B with the k-th B,
 *     and with the k-th F (not FK) of its range. Instances count in op-id order (stage 0's
 *     list, then stage 1's, ...), which is list order when they share a stage. Ranges of one
 *     unit's forward-family ops are equal or disjoint, and so are those of its B ops.
 *   - Slices (causal attention across the slices of one sample; ChunkFlow 4.2, Seq1F1B):
 *     the first forward-family op over a range of the unit holding slice j of a sample waits
 *     for the first forward-family op over the same range of the unit holding slice j - 1
 *     (its keys/values); the B over a range of the unit holding slice j waits for the last
 *     B over that range of the unit holding slice j + 1 (dK/dV flow backwards). Slices of
 *     one sample appear in token order in the slice table; a slice is in at most one unit;
 *     a sample's slices never share a unit unless they are adjacent (then the dependency
 *     is internal to the unit).
 *   - Program order: an op starts after the previous op of its stage finishes.
 *
 * Thread-safety: a schedule is plain data; one writer at a time, any number of readers.
 */
#ifndef LT_SCHEDULE_H
#define LT_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h" /* lt_status, lt_error */

/* A token range of one sample (InfiniPipe 3.1: a slice s_i of chunk {C, S}). */
typedef struct lt_slice {
    int32_t sample; /* sample id, >= 0 (the caller's numbering) */
    int64_t begin;  /* first token; also the attention context C before the slice */
    int64_t end;    /* one past the last token; end > begin */
} lt_slice;

/* What one op processes: slices [first_slice, first_slice + n_slices) of the slice table
 * (of the backward slice table for the units of an asymmetric schedule's backward
 * partition, below). */
typedef struct lt_unit {
    uint32_t first_slice;
    uint32_t n_slices;
    uint16_t cp; /* context-parallel degree of this unit beyond the pipeline's own: 0 or 1 =
                    none; g > 1 = the unit's tokens are spread over the g pipelines of a
                    DP-Merge group (SlimPack 4.1.1), each of which lists the same unit and
                    computes 1/g of every slice (ring attention over load-balanced causal
                    shards); the cost model prices it as CP of degree g (plans/cost/cost.h) */
    uint16_t reserved; /* 0 */
} lt_unit;

typedef enum lt_op_kind {
    LT_OP_F = 0,  /* forward, keeping what B needs (activations, or only the inputs of the
                     recompute_layers recomputed layers) */
    LT_OP_FK = 1, /* forward keeping only its slices' keys/values, activations dropped
                     (ChunkFlow Alg. 2, first pass over the first N - K chunks) */
    LT_OP_B = 2,  /* backward: input and weight gradients; first re-runs the forward of its
                     recompute_layers layers */
} lt_op_kind;

/* The part of a layer an op runs (HelixPipe 4.2 attention-parallel partition). */
typedef enum lt_op_part {
    LT_PART_ALL = 0,  /* whole layers [layer_begin, layer_end) */
    LT_PART_PRE = 1,  /* the first norm of layer layer_begin (layer_end = layer_begin + 1) */
    LT_PART_ATTN = 2, /* its QKV projection and attention core (4.2 moves the QKV linear here) */
    LT_PART_POST = 3, /* output projection + MLP of layer layer_begin */
} lt_op_part;

typedef struct lt_op {
    uint8_t kind;              /* lt_op_kind */
    uint8_t part;              /* lt_op_part */
    uint16_t recompute_layers; /* of this op's layers, how many B recomputes (0 = none) */
    uint32_t unit;             /* index into the unit table */
    uint32_t layer_begin;      /* model layers [layer_begin, layer_end) */
    uint32_t layer_end;
} lt_op;

typedef struct lt_stage_ops {
    lt_op *ops;
    size_t n, cap;
} lt_stage_ops;

/*
 * Asymmetric schedules (SlimPack 4.1.2, 4.2: backward MicroPacks regroup the slices of the
 * forward MicroPacks so that each carries an equal backward workload). An asymmetric
 * schedule has a second pair of tables, the backward partition: bslices (token ranges,
 * cut where the backward pass wants them, which need not be where the forward cut) and
 * bunits (runs of consecutive bslices). Its B ops name bunits; its F ops name units (FK is
 * not used with a backward partition). A symmetric schedule (asym = false, the default)
 * has empty backward tables and its B ops name units, as before.
 *
 * Rules of the backward partition (checked by lt_schedule_check):
 *   - per sample, the bslices cover exactly the tokens the slices cover, and appear in the
 *     bslice table in token order without overlapping (like the slices);
 *   - every bunit is a non-empty run of bslices; a bslice is in at most one bunit;
 *   - bunit.cp is the cp of the forward units that hold its tokens (a DP-Merge unit's
 *     tokens are regrouped only with tokens of the same group; cp 0 and 1 are the same).
 * Dependencies of a B over bunit v, range r, stage s (replacing the symmetric ones):
 *   - activations: after the first F (in op-id order) over range r of every forward unit
 *     that holds a token of v (lt_schedule_bunit_overlaps); that F must run on stage s (its
 *     activations are produced there), and a bunit none of whose tokens is in a forward
 *     unit is an error;
 *   - model path: after the B of v starting where it ends (as before: the k-th B of (v,
 *     range) with the k-th B of v starting at its end); at the model's end, the activation
 *     edges above (the Fs there);
 *   - slices: after the last B over range r of the bunit holding bslice j + 1 of the same
 *     sample, where v holds bslice j (dK/dV flow backwards: FILO within a sample).
 * Forward ops keep the symmetric rules (over the slice table).
 * Memory: the first F over range r of forward unit u holds act_bytes + kv_bytes from its
 * start; each B over range r of a bunit that covers x of u's T tokens frees (act_bytes +
 * kv_bytes) x x / T of it at its end (activations and keys/values are linear in tokens; the
 * last such B, in its stage's order, frees the rest, so a complete schedule ends at the
 * base). A later F over the same range of u has no B and holds its act_bytes to the end.
 */
typedef struct lt_schedule {
    int stages; /* pipeline stages P >= 1 */
    int layers; /* model layers L >= stages */
    lt_slice *slices;
    size_t n_slices, cap_slices;
    lt_unit *units;
    size_t n_units, cap_units;
    lt_stage_ops *stage; /* [stages] */
    /* the backward partition (asymmetric schedules only) */
    bool asym;           /* set by the first lt_schedule_add_bslice / _add_bunit */
    lt_slice *bslices;
    size_t n_bslices, cap_bslices;
    lt_unit *bunits;
    size_t n_bunits, cap_bunits;
} lt_schedule;

/* An empty schedule of P stages over L layers. LT_ERR_USAGE when P < 1 or L < P. */
lt_status lt_schedule_init(lt_schedule *s, int stages, int layers, lt_error *err);
void lt_schedule_free(lt_schedule *s);
/* Drops every slice, unit and op and the backward partition (asym = false); keeps stages,
 * layers and the allocations. */
void lt_schedule_clear(lt_schedule *s);

/* Append a slice; returns its index. Aborts with a message on allocation failure. */
uint32_t lt_schedule_add_slice(lt_schedule *s, int32_t sample, int64_t begin, int64_t end);
/* Append a unit over the last n slices added; returns its index. */
uint32_t lt_schedule_add_unit(lt_schedule *s, uint32_t first_slice, uint32_t n_slices);
/* The backward partition of an asymmetric schedule (set asym): append a bslice / a bunit
 * over bslices [first_bslice, first_bslice + n). Return the index. */
uint32_t lt_schedule_add_bslice(lt_schedule *s, int32_t sample, int64_t begin, int64_t end);
uint32_t lt_schedule_add_bunit(lt_schedule *s, uint32_t first_bslice, uint32_t n_bslices);

/* The unit an op runs: s->bunits[op->unit] for a B of an asymmetric schedule, else
 * s->units[op->unit]; and the slice table its first_slice indexes (bslices or slices). */
const lt_unit *lt_schedule_op_unit(const lt_schedule *s, const lt_op *op);
const lt_slice *lt_schedule_op_slices(const lt_schedule *s, const lt_op *op, size_t *n_slices_of_op);

/* The forward units holding the tokens of each bunit of an asymmetric schedule, by a sweep
 * over each sample's slices and bslices in token order: for bunit v, entries [(*off)[v],
 * (*off)[v + 1]) of *units and *tokens name each such forward unit once (in the order the
 * sweep meets them: by sample, then token) with how many of v's tokens it holds. New
 * arrays, free() them (*off has n_bunits + 1 entries). Assumes the token-order rules of
 * lt_schedule_check for slices and bslices; a slice in no unit or a bslice in no bunit is
 * skipped, a slice in several units (a bslice in several bunits) counts for the first.
 * O((S + B) log(S + B)) for S slices and B bslices. */
void lt_schedule_bunit_overlaps(const lt_schedule *s, uint32_t **off, uint32_t **units, int64_t **tokens);

/* Append an op to stage's list. */
void lt_schedule_add_op(lt_schedule *s, int stage, lt_op op);
/* An op of `kind` over the whole layer block of `stage` (lt_schedule_stage_layers). */
void lt_schedule_add_stage_op(lt_schedule *s, int stage, lt_op_kind kind, uint32_t unit, uint16_t recompute_layers);

/* The layer block [*begin, *end) of stage s when L layers are split over P stages as evenly
 * as possible, the first L mod P stages taking one layer more (Megatron's uniform split). */
void lt_schedule_stage_layers(int layers, int stages, int s, uint32_t *begin, uint32_t *end);

/* Path positions [*pb, *pe) of an op (position = 3 * layer + part - 1; PART_ALL covers
 * 3 * layer_begin .. 3 * layer_end). */
void lt_op_positions(const lt_op *op, uint32_t *pb, uint32_t *pe);

/* Total tokens of unit u (of the forward units). */
int64_t lt_schedule_unit_tokens(const lt_schedule *s, uint32_t u);
/* Total tokens of the unit an op runs (lt_schedule_op_unit). */
int64_t lt_schedule_op_tokens(const lt_schedule *s, const lt_op *op);
/* Total ops over all stages. */
size_t lt_schedule_n_ops(const lt_schedule *s);
/* Does any op run a part of a layer (HelixPipe's attention-parallel partition)? */
bool lt_schedule_has_parts(const lt_schedule *s);

/* The slice indices sorted by sample, then table order (= token order within a sample):
 * a new array of n_slices entries (at least one allocated), free() it. */
uint32_t *lt_schedule_slices_by_sample(const lt_schedule *s);
/* The same for the bslice table of an asymmetric schedule (n_bslices entries). */
uint32_t *lt_schedule_bslices_by_sample(const lt_schedule *s);

/* Structural checks: indices in range, slices non-empty and in token order per sample, each
 * unit's slices a valid range and reserved 0, op layer ranges valid; for an asymmetric
 * schedule the rules of the backward partition above, no FK and every B naming a bunit
 * (a symmetric one has empty backward tables). LT_ERR_INPUT naming the first fault.
 * (Dependency cycles are the simulator's to find: lt_sim_run reports a deadlock.) */
lt_status lt_schedule_check(const lt_schedule *s, lt_error *err);

/* Short name of an op for messages and timelines: "F3", "FK3", "B3", with the part
 * ("F3.attn@L5") when part != ALL. The number is op->unit: in an asymmetric schedule "B3"
 * is bunit 3, "F3" unit 3. Writes at most n bytes; returns buf. */
const char *lt_op_name(const lt_op *op, char *buf, size_t n);

/* ---- Generators (plans/schedule/generators.c; docs/schedules.md) ----
 *
 * Units from sample lengths. Sample i of lengths[0..n) gets sample id i; every length must be
 * > 0 (a programming error otherwise: LT_CHECK). Units and slices are appended.
 */

/* One unit per sample, the whole sample (a micro-batch per sample). */
void lt_sched_units_whole(lt_schedule *s, const int64_t *lengths, size_t n);

/* Each sample split into min(k, length) slices of equal token counts (the first length mod k
 * one token longer), one unit per slice, in sample then token order (Seq1F1B's slicing).
 * Seq1F1B itself cuts slices of equal FLOPs (later slices shorter, their attention context
 * being longer); that needs the cost model, so this helper is exact only for the unit-time
 * model, where an op's time is its token count. k >= 1. */
void lt_sched_units_sliced(lt_schedule *s, const int64_t *lengths, size_t n, int k);

/* ChunkFlow Alg. 1 (4.1) with ChunkSize = chunk_size > 0: a sample longer than ChunkSize is
 * cut into ChunkSize pieces (the last one the remainder), one unit each, those units first
 * in sample order (Alg. 1 lines 5-7); the other samples (length <= ChunkSize) are packed
 * into the fewest chunks of at most ChunkSize tokens, one unit per chunk holding whole
 * samples. The fewest: bin counts from ceil(total / ChunkSize) up are tried (Alg. 1 line 8's
 * loop, minus the counts the volume rules out) with an exact backtracking search, until one
 * fits or the count first-fit decreasing reaches; the search gives up on a count after
 * 2,000,000 steps, so for large batches the answer may be first-fit decreasing's (at most
 * 11/9 OPT + 6/9 bins) rather than the minimum. Chunk samples in increasing sample order.
 * Time O(n log n + n * chunks) plus the bounded search. */
void lt_sched_units_chunked(lt_schedule *s, const int64_t *lengths, size_t n, int64_t chunk_size);

/* lt_sched_units_chunked with the exact search's budget per bin count given: `budget` steps
 * (>= 0; 0 = first-fit decreasing's packing whenever it is not already at the volume bound).
 * For a planner's inner loop (the chunkflow grid search of plans/strategies/baselines.c packs every
 * pipeline of a step at up to 6 chunk sizes): on shared/lengths at 128K context, 8
 * pipelines of 64 samples, a budget of 20,000 gives the chunk count of 2,000,000 in over
 * 99 % of the packings at 1/6 to 1/14 of the time. lt_sched_units_chunked is this with
 * 2,000,000. */
void lt_sched_units_chunked_budget(lt_schedule *s, const int64_t *lengths, size_t n, int64_t chunk_size,
                                   long budget);

/*
 * Schedules. Each appends ops over units already in the schedule, listed in `order` (n
 * distinct unit indices, the micro-batch order; NULL = 0..n-1). Stages are numbered
 * 0..P-1, stage 0 first. Each cites the paper whose schedule it builds; lt_schedule_check
 * holds on the result and the simulator finds no deadlock when the units were built as the
 * generator expects (stated per generator). All but HelixPipe use whole-stage ops
 * (lt_schedule_add_stage_op, recompute_layers 0).
 *
 * The 1F1B family (1F1B, Seq1F1B, ChunkFlow, multi-1F1B) share one merge of a forward
 * stream and a backward stream, the same on every stage: stage s issues, before its j-th
 * backward, f_s(j) = min(#forwards, max(f_s(j-1) + 1, need(j) + P - s - 1)) forwards
 * (f_s(-1) = P - s - 1), need(j) being how many forwards of the stream it takes to reach
 * the forwards of backwards 0..j. That is Megatron's warm-up / steady / cool-down for
 * whole units, and for a sample of N slices it keeps P - s - 1 + N units in flight on stage
 * s: InfiniPipe Eq. 7's chunks window |W_p| = d_p - p + N_prefill (p from 1).
 */

/* GPipe: every stage runs all forwards in order, then all backwards in reverse order
 * (pipeline reference page). Peak in-flight activations m on every stage. Any units
 * (reverse order is FILO within every sample). */
void lt_sched_gpipe(lt_schedule *s, const uint32_t *order, size_t n);

/* 1F1B (PipeDream-flush / Megatron): stage s runs min(P - s - 1, m) warm-up forwards, then
 * alternates one forward and one backward, then drains the backwards; backwards in forward
 * order. Peak in-flight activations min(P - s, m). Units holding whole samples (a sample
 * split over several units deadlocks: its first slice's backward would precede its last's;
 * use lt_sched_seq1f1b). */
void lt_sched_1f1b(lt_schedule *s, const uint32_t *order, size_t n);

/* Slice-level 1F1B (Seq1F1B; InfiniPipe 2, Fig. 1a): units that share a sample form a
 * dependent group (a long sample's slices, with whatever short samples were packed beside
 * one of them); forwards in `order`, and the backwards of a group all at once where its
 * last unit is, in reverse (FILO within a sample: slice j's backward after slice j + 1's).
 * A group of one (whole samples) keeps its place, so on whole units this is 1F1B. The units
 * of a sample must be in token order in `order`. */
void lt_sched_seq1f1b(lt_schedule *s, const uint32_t *order, size_t n);

/* ChunkFlow's state-aware 1F1B (Alg. 2 + Sec. 4.3) with parameter K >= 1: units are the
 * chunks (lt_sched_units_chunked), groups as in lt_sched_seq1f1b. A group of N > K chunks
 * runs FK over its first N - K chunks and F over the last K, B over those K in reverse,
 * then F + B again over the first N - K chunks in reverse order (Alg. 2 lines 24-29 list
 * them in increasing order, which cannot work: chunk i's backward needs chunk i + 1's dK/dV,
 * 4.2); groups of N <= K run F over all, then B in reverse. Forward stream: the chunks in
 * `order` (FK or F), a group's re-run forwards right after its last chunk; backward stream:
 * a group's backwards at its last chunk; merged 1F1B-style as above. */
void lt_sched_chunkflow(lt_schedule *s, const uint32_t *order, size_t n, int k);

/* PackFlow (SlimPack 4.2, Figs. 5, 8, 9): 1F1B over an asymmetric schedule. The forward
 * stream is the forward units in `forder` (nf distinct unit indices; NULL = 0..nf-1), the
 * backward stream the bunits in `border` (nb; NULL = 0..nb-1), merged by the 1F1B rule
 * above with need(j) = 1 + the largest position in the forward stream of a forward unit
 * holding a token of backward units border[0..j]. A backward MicroPack whose slices are
 * not all forwarded yet thus waits for more forwards: the "extra forward MicroPack" of
 * Fig. 9. Whole-stage ops, F and B only. The caller lists each sample's forward units in
 * token order in forder and orders border FILO within every sample (a sample's later tokens
 * first); then the simulator finds no deadlock. Every bunit of border must hold tokens of
 * forward units, all of them in forder (LT_CHECK). On a schedule whose backward partition
 * equals the forward one, with lt_sched_seq1f1b's backward order as border, this is
 * lt_sched_seq1f1b's op lists. */
void lt_sched_packflow(lt_schedule *s, const uint32_t *forder, size_t nf, const uint32_t *border, size_t nb);

/* Several 1F1B pipelines in sequence (InfiniPipe 3.3.1): group g is units
 * order[group_start[g] .. group_start[g+1]) (group_start[0] = 0, group_start[n_groups] = n),
 * each a lt_sched_seq1f1b pipeline, appended one after the other on every stage. The next
 * pipeline starts on stage 0 after that stage's last backward of the previous one, which
 * is the previous pipeline's last op anywhere: pipelines do not overlap (as in the paper),
 * and the step time is the sum of the pipelines' times. A sample's units must all be in
 * one group. */
void lt_sched_multi_1f1b(lt_schedule *s, const uint32_t *order, size_t n, const size_t *group_start,
                         size_t n_groups);

/* HelixPipe's attention-parallel partition with the `folds`-fold FILO schedule (HelixPipe
 * 4.2, 4.3, Table 2) for uniform batches: m = n must be a multiple of folds * P
 * (LT_ERR_USAGE otherwise); folds = 1 is the naive FILO schedule, 2 the two-fold one. Ops are
 * per layer part: the pre-attention of layer l and the post-attention of layer l - 1 on
 * stage l mod P, the post-attention of the last layer on stage 0, the attention of slot j
 * of a loop (micro-batches folds*j .. folds*j + folds - 1 of the loop's folds * P) of layer l
 * on stage (l + j + 1) mod P. Every forward of every loop, then every backward, each
 * stage's backwards in the reverse of its forwards' order (FILO). recompute != 0 sets
 * recompute_layers = 1 on the pre- and post-attention ops ("recomputation without
 * attention", 4.4.1). Any L >= P; the bubble of Table 2 needs P | L. */
lt_status lt_sched_helixpipe_folds(lt_schedule *s, const uint32_t *order, size_t n, int folds, int recompute,
                                   lt_error *err);

/* The two-fold FILO schedule without recomputation: lt_sched_helixpipe_folds(s, order, n,
 * 2, 0, err). */
lt_status lt_sched_helixpipe(lt_schedule *s, const uint32_t *order, size_t n, lt_error *err);

#endif /* LT_SCHEDULE_H */
