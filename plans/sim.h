/*
 * plans/sim.h — the DAG pipeline simulator (SlimPack 4.3, Alg. 1): turns any schedule
 * (plans/schedule.h) and a cost model into step time, bubble ratio, per-stage busy time and
 * peak memory, and the critical path.
 *
 * Vertices are the ops of every stage, (stage, action, unit). Edges are the dependencies
 * of plans/schedule.h: model-path edges between stages carry the P2P transfer time of the
 * op's output (activations forward, their gradients backward); slice and program-order
 * edges carry none. An op starts when all its predecessors are done (plus transfer times)
 * and lasts its duration: the longest path in topological order. A cycle is a deadlock:
 * the run fails with LT_ERR_INPUT naming the ops on one cycle.
 *
 * Memory is an event-driven timeline per stage: the stage's base bytes (model states) all
 * along; an F op holds its activation bytes from its start until the end of the B that
 * consumes them; every forward-family op of a range first holding a slice's keys/values
 * (kv_bytes) keeps them until the last B over that range of the sample's first slice ends;
 * each op holds its work bytes while it runs. The stage's peak is the maximum over time.
 *
 * Costs come from an lt_sim_costs callback table, so the same simulator serves the unit-time
 * model of ChunkFlow Sec. 3 (lt_sim_unit_costs) and the real cost model (plans/cost.h).
 *
 * Thread-safety: lt_sim_run keeps all its state in the lt_sim it is given; several threads
 * may simulate at once with their own lt_sim.
 */
#ifndef LT_SIM_H
#define LT_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/error.h"      /* lt_status, lt_error */
#include "plans/schedule.h" /* lt_schedule, lt_op */

/* What one op costs on its stage. */
typedef struct lt_op_cost {
    double time;      /* duration, seconds (or time units) */
    double act_bytes; /* F: activation bytes kept for its B (0 for FK and B) */
    double kv_bytes;  /* forward-family: key/value bytes of its slices, when first computed */
    double work_bytes;/* transient bytes while it runs */
    double out_bytes; /* bytes it sends to the next op on the model path (activations or grads) */
} lt_op_cost;

typedef struct lt_sim_costs {
    void *ctx;
    /* Cost of op `op` (the index-th op of stage `stage`). */
    void (*op_cost)(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out);
    /* Transfer time of `bytes` from stage `from` to stage `to` (from != to); NULL = free. */
    double (*p2p_time)(void *ctx, int from, int to, double bytes);
    /* Base bytes of a stage (model states); NULL = 0. */
    double (*base_bytes)(void *ctx, int stage);
} lt_sim_costs;

/* The unit-time model (ChunkFlow Sec. 3, CONTRACTS.md `planner simulate`): an F or FK op
 * takes as many time units as its unit has tokens, on every stage whatever its layers; a B
 * twice that; no communication; act_bytes = 1 per F (so peak memory counts in-flight
 * micro-batches), kv_bytes = 0, base 0. */
lt_sim_costs lt_sim_unit_costs(void);

/* A simulation's results and its reusable scratch space. Zero-initialise, call lt_sim_run
 * any number of times, then lt_sim_free. Op ids are global: stage-major, op_id =
 * first_op[stage] + index within the stage. */
typedef struct lt_sim {
    /* results */
    double step_time;    /* latest finish over all ops */
    double bubble_ratio; /* sum over stages of (step_time - busy) / (stages * step_time) */
    int stages;
    size_t n_ops;
    double *busy;        /* [stages] sum of op durations */
    double *peak_mem;    /* [stages] peak bytes (base included) */
    size_t *first_op;    /* [stages + 1] */
    double *start;       /* [n_ops] */
    double *finish;      /* [n_ops] */
    size_t *critical;    /* op ids of one critical path, earliest first */
    size_t n_critical;
    /* scratch (private to sim.c) */
    void *priv;
} lt_sim;

/* Simulate s under `costs`. LT_ERR_INPUT for a malformed schedule (lt_schedule_check) or a
 * deadlock ("deadlock: F3@s1 -> B2@s1 -> ... -> F3@s1"); LT_ERR_NOMEM never (aborts). */
lt_status lt_sim_run(lt_sim *sim, const lt_schedule *s, const lt_sim_costs *costs, lt_error *err);
void lt_sim_free(lt_sim *sim);

/* Op id -> (stage, index). */
void lt_sim_op_at(const lt_sim *sim, size_t id, int *stage, size_t *index);

/* An ASCII timeline like the papers' figures: one row per stage, `width` columns spanning
 * the step, each op drawn with its unit number (F/FK in upper case letters for the op kind
 * is not needed: forward ops as digits, backward ops in a legend-marked style), idle time as
 * '.', followed by a legend. Written to f. */
void lt_sim_print_timeline(FILE *f, const lt_sim *sim, const lt_schedule *s, int width);

/* A Gantt chart as a standalone SVG document: one lane per stage, a box per op coloured by
 * kind and labelled with its name, a time axis, the critical path outlined. Written to f;
 * LT_ERR_IO on a write error. */
lt_status lt_sim_write_svg(FILE *f, const lt_sim *sim, const lt_schedule *s, const char *title, lt_error *err);

#endif /* LT_SIM_H */
