/*
 * plans/schedule.h — the one schedule representation of every strategy (SlimPack 4.3,
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
 * Dependencies are not stored: the simulator (plans/sim.h) derives them from the tables,
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
 *     and with the k-th F (not FK) of its range.
 *   - Slices (causal attention across the slices of one sample; ChunkFlow 4.2, Seq1F1B):
 *     the first forward-family op over a range of the unit holding slice j of a sample waits
 *     for the first forward-family op over the same range of the unit holding slice j - 1
 *     (its keys/values); the B over a range of the unit holding slice j waits for the last
 *     B over that range of the unit holding slice j + 1 (dK/dV flow backwards). Slices of
 *     one sample appear in token order in the slice table; a sample's slices never share
 *     a unit unless they are adjacent (then the dependency is internal to the unit).
 *   - Program order: an op starts after the previous op of its stage finishes.
 *
 * Thread-safety: a schedule is plain data; one writer at a time, any number of readers.
 */
#ifndef LT_SCHEDULE_H
#define LT_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/error.h" /* lt_status, lt_error */

/* A token range of one sample (InfiniPipe 3.1: a slice s_i of chunk {C, S}). */
typedef struct lt_slice {
    int32_t sample; /* sample id, >= 0 (the caller's numbering) */
    int64_t begin;  /* first token; also the attention context C before the slice */
    int64_t end;    /* one past the last token; end > begin */
} lt_slice;

/* What one op processes: slices [first_slice, first_slice + n_slices) of the slice table. */
typedef struct lt_unit {
    uint32_t first_slice;
    uint32_t n_slices;
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
    LT_PART_PRE = 1,  /* norm + QKV projection of layer layer_begin (layer_end = layer_begin + 1) */
    LT_PART_ATTN = 2, /* the attention core of layer layer_begin */
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

typedef struct lt_schedule {
    int stages; /* pipeline stages P >= 1 */
    int layers; /* model layers L >= stages */
    lt_slice *slices;
    size_t n_slices, cap_slices;
    lt_unit *units;
    size_t n_units, cap_units;
    lt_stage_ops *stage; /* [stages] */
} lt_schedule;

/* An empty schedule of P stages over L layers. LT_ERR_USAGE when P < 1 or L < P. */
lt_status lt_schedule_init(lt_schedule *s, int stages, int layers, lt_error *err);
void lt_schedule_free(lt_schedule *s);
/* Drops every slice, unit and op; keeps stages, layers and the allocations. */
void lt_schedule_clear(lt_schedule *s);

/* Append a slice; returns its index. Aborts with a message on allocation failure. */
uint32_t lt_schedule_add_slice(lt_schedule *s, int32_t sample, int64_t begin, int64_t end);
/* Append a unit over the last n slices added; returns its index. */
uint32_t lt_schedule_add_unit(lt_schedule *s, uint32_t first_slice, uint32_t n_slices);
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

/* Total tokens of unit u. */
int64_t lt_schedule_unit_tokens(const lt_schedule *s, uint32_t u);
/* Total ops over all stages. */
size_t lt_schedule_n_ops(const lt_schedule *s);

/* Structural checks: indices in range, slices non-empty and in token order per sample, each
 * unit's slices a valid range, op layer ranges valid. LT_ERR_INPUT naming the first fault.
 * (Dependency cycles are the simulator's to find: lt_sim_run reports a deadlock.) */
lt_status lt_schedule_check(const lt_schedule *s, lt_error *err);

/* Short name of an op for messages and timelines: "F3", "FK3", "B3", with the part
 * ("F3.attn@L5") when part != ALL. Writes at most n bytes; returns buf. */
const char *lt_op_name(const lt_op *op, char *buf, size_t n);

/* ---- Generators (plans/schedule_gen.c) ----
 * Each appends ops over units already in the schedule, listed in `order` (n unit indices,
 * the micro-batch order; NULL = 0..n_units-1). Stages are numbered 0..P-1, stage 0 first.
 * Each cites the paper whose schedule it builds; lt_schedule_check holds on the result and
 * the simulator finds no deadlock when the units were built as the generator expects. */

/* GPipe: every stage runs all forwards in order, then all backwards in reverse order
 * (pipeline reference page). Peak in-flight activations m on every stage. */
void lt_sched_gpipe(lt_schedule *s, const uint32_t *order, size_t n);

/* 1F1B (PipeDream-flush / Megatron): stage s runs min(P - s - 1, m) warm-up forwards, then
 * alternates one forward and one backward, then drains the backwards; backwards in forward
 * order. Peak in-flight activations min(P - s, m). */
void lt_sched_1f1b(lt_schedule *s, const uint32_t *order, size_t n);

/* Slice-level 1F1B (Seq1F1B): like 1F1B over the units, but the backwards of the units of
 * one sample run in reverse (FILO within a sample), so slice j's backward follows slice
 * j + 1's. Units holding slices of several samples keep their place. */
void lt_sched_seq1f1b(lt_schedule *s, const uint32_t *order, size_t n);

/* ChunkFlow's state-aware 1F1B (Alg. 2 + Sec. 4.3) with parameter K >= 1: units are the
 * chunks; a group of N > K chunks of one sample runs FK over its first N - K chunks, F over
 * the last K, B over those K in reverse, then re-runs F + B over the first N - K chunks in
 * reverse order; standalone chunks are groups of one. The resulting forward and backward
 * streams are interleaved 1F1B-style. */
void lt_sched_chunkflow(lt_schedule *s, const uint32_t *order, size_t n, int k);

/* Several 1F1B pipelines in sequence (InfiniPipe 3.3.1): group g is units
 * order[group_start[g] .. group_start[g+1]) (group_start[n_groups] = n). */
void lt_sched_multi_1f1b(lt_schedule *s, const uint32_t *order, size_t n, const size_t *group_start,
                         size_t n_groups);

/* HelixPipe's attention-parallel partition with the two-fold FILO schedule (HelixPipe 4.2,
 * 4.3, Table 2) for uniform batches: m must be a multiple of 2P. Ops are per layer part. */
lt_status lt_sched_helixpipe(lt_schedule *s, const uint32_t *order, size_t n, lt_error *err);

#endif /* LT_SCHEDULE_H */
