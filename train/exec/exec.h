/*
 * train/exec/exec.h — the plan executor: one step of a stored plan
 * (plans/strategies/plan.h), in an order the plan's dependencies allow
 * (plans/schedule/deps.h, the rules the simulator priced): every pipeline and stage of it
 * in this process (lt_exec_step), or one (DP rank, stage) of the distributed engine, with
 * the tensors of the edges between stages moved between processes (lt_exec_step_rank).
 * How the executor is built: train/exec/internal.h.
 *
 * What an op does (DESIGN.md "Trainer engine"; the plan's rules in docs/plans-schema.md):
 *   F  unit u through its layers [l0, l1): the embedding when l0 = 0, else the output of
 *      the forward of u that ends at l0 (its model-path predecessor); keeps its
 *      activations; writes its slices' K/V into the step's KV context (per sample, per
 *      layer); over the model's last layer it also computes the loss of u's rows and the
 *      head's gradients (fused, loss scale 1 / n_predicted of the whole step).
 *   FK forward keeping only K/V (ChunkFlow Alg. 2): like F, but no loss (the loss is the
 *      later F's, plans/strategies/plan.h "loss convention").
 *   B  backward of u through [l0, l1): the gradient of its output comes from the B of u
 *      that starts at l1 (or the fused head); the activations are those of u's F on the
 *      same stage, read in place; where the backward unit is cut differently (an
 *      asymmetric schedule, SlimPack 4.1.2) its rows are gathered from the forward units
 *      that hold its tokens (lt_acts_copy_row), one layer at a time just before that
 *      layer's backward, so any regrouping works and one layer's copy is live; once it has
 *      run, the forward units drop the rows it took (lt_acts_keep_rows). dK/dV go into the KV context's gradient buffers (FILO across
 *      the slices of a sample, which the dependencies order).
 * Ops run when their predecessors have run; among ready ops the one the plan predicts to
 * start first goes first. The order of every pipeline is computed before any op runs, so a
 * plan whose ops cannot all run (a cycle: a deadlock) is refused before a gradient is
 * touched, naming the step, pipeline, stage and op.
 *
 * Recompute (plans/strategies/plan.h: recompute_layers R of an op = the first R layers of
 * its range): the F runs those layers with scratch activations and keeps only their input (the
 * token ids on the first stage); its B runs their forward again from that input (writing
 * the same K/V into the context), then the backward of the whole range. A backward unit
 * cut inside a forward slice recomputes only its own rows, attending to the kept K/V of
 * the slice's earlier tokens. The gradients are bit-identical to a run
 * without recompute when the units are the same (the same forward on the same rows).
 *
 * Context parallelism (docs/plans-schema.md "The one CP rule"): an op of a DP-Merge unit
 * (unit cp = G > 1) or of a static context-parallel pipeline (cp = G > 1) runs as G member
 * shards (each slice cut into 2G chunks, member k taking chunks k and 2G - 1 - k) in
 * per-layer lockstep; every other op is a group of one, its unit as it is (one op path).
 * The members run through the model's group passes (lt_llama_forward_group /
 * lt_llama_backward_group: the K/V exchange of ring attention, through the shared context
 * in one process, round the members' ring across processes). The group's op runs where the first member
 * meets it; the other members' copies of a DP-Merge op are skipped (lt_exec_stats
 * .ops_skipped), their shards having run in the group. Recompute applies to group ops as
 * to the others, per member.
 */
#ifndef LT_TRAIN_EXEC_H
#define LT_TRAIN_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"             /* lt_status, lt_error */
#include "lib/threadpool.h"        /* lt_pool */
#include "plans/strategies/plan.h" /* lt_step_plan, lt_measured_op */
#include "train/dist/comm.h"       /* lt_comm */
#include "train/model/model.h"     /* lt_llama, lt_train_sample, lt_llama_views */

/* What a step executed, for checks and progress lines. */
typedef struct lt_exec_stats {
    double loss_sum;       /* summed cross-entropy of every predicted token (divide by n_predicted) */
    int64_t n_predicted;   /* the plan's loss denominator (checked against the samples) */
    int64_t tokens;        /* tokens of the step's samples */
    size_t ops_run;        /* ops executed (skipped DP-Merge member ops not counted) */
    size_t ops_skipped;    /* DP-Merge ops of non-first members */
    size_t act_bytes_peak; /* largest bytes held at once by one pipeline (its stages together;
                              what stage_peak_bytes counts) */
    size_t *stage_peak_bytes; /* [n_stages] per stage, the largest bytes one pipeline's stage
                                 held at once, counted as they are allocated and freed:
                                 activations (kept inputs, recomputed layers, a backward's
                                 window), the K/V context and its gradients, input gradients
                                 and received buffers until read, the buffers of a CP group's
                                 exchanges, and each pass's working memory (forward and
                                 backward scratch, the fused head's logits block); not the
                                 model states, nor bookkeeping of a few bytes per row */
    int n_stages;
    double seconds;        /* wall time of the whole step */
    lt_measured_op *op_times; /* [n_op_times] every executed op: pipeline, stage, position, and
                                 start / finish in seconds from the step's start (the ops of all
                                 pipelines one after another: this process runs them serially) */
    size_t n_op_times;
    int64_t kv_transfers;  /* distributed: this rank's sends of a sample's K/V or dK/dV to
                              another stage (HelixPipe's attention of two slices of a sample
                              on two stages: train/exec/transfers.c) */
    double tp_bytes;       /* distributed with tensor parallelism: the bytes this rank sent in the
                              step's TP all-gathers and reduce-scatters (train/dist/comm.h
                              lt_comm_bytes: what plans/cost/cost.h lt_cost_tp_bytes prices) */
} lt_exec_stats;

/* Free stats->op_times and stage_peak_bytes (NULL-safe; stats is left zeroed). */
void lt_exec_stats_free(lt_exec_stats *stats);

/*
 * Execute step plan p on model m: samples[i] holds the tokens of the plan's sample i
 * (p->lengths[i] of them). The parameter gradients of the whole step (every pipeline, the
 * sum a DP all-reduce would give) are ADDED into grads, scaled by 1 / p->n_predicted.
 * Checks before running: the plan's layers and stages against m, the samples' lengths and
 * n_predicted against the plan, a unit with an empty slice, a plan mixing HelixPipe layer
 * parts and whole layers, the dependency graph (lt_deps_build) and its order (a cycle is a
 * deadlock); during the run: every token of every sample forwarded (F) and backwarded (B)
 * exactly once on every stage.
 * grads == NULL runs the plan without gradients (a scoring plan, plans/strategies/plan.h
 * lt_plan_scoring: the validation loss): every op must be an F (else refused by name), the
 * loss is summed but no head gradient made, the K/V context has no gradients and a sample's
 * K/V on a stage go after its last F there; every token forwarded once on every stage, none
 * backwarded. Errors: LT_ERR_INPUT naming the step, pipeline (dp_rank),
 * stage and op, or the sample; LT_ERR_NOMEM. *stats is overwritten (its op_times are new:
 * lt_exec_stats_free them, also after an error).
 */
lt_status lt_exec_step(const lt_llama *m, const lt_step_plan *p, const lt_train_sample *samples,
                       const lt_llama_views *grads, lt_exec_stats *stats, lt_pool *pool, lt_error *err);

/*
 * The distributed engine's step: this process is rank (dp_rank, stage) of comm's layout
 * (train/dist/comm.h) and runs only the ops of its stage in the pipeline that holds its DP rank
 * (for a DP-Merge or static context-parallel group: its own member's shards), in the same
 * order as lt_exec_step. Inputs from the neighbouring stages arrive as point-to-point
 * transfers (the receive of the next op posted before the current op runs), outputs leave
 * as non-blocking sends; a group's K/V and dK/dV go round its members' ring per layer
 * (lt_cp_hooks). HelixPipe's layer parts run on the stages their ops name, a part's two
 * tensors and a sample's K/V between attention stages moved alike (train/exec/transfers.c). Its gradients (this stage's parameters, this pipeline's samples) are added
 * into grads; the DP reduction is the caller's (train/dist/dist.h). stats: loss_sum, the token
 * checks, stage_peak_bytes and act_bytes_peak are totals over every rank (all ranks call
 * this for the same step); op_times are this rank's. grads == NULL: as lt_exec_step's. The plan's DP x PP must be the job's.
 * hooks (may be NULL): grads_final(layer) is called as soon as a layer's parameter
 * gradients on this rank are final for the step (during the stage's last B op, layer by
 * layer from the top), so the DP all-reduce of each layer overlaps the backward of the
 * layers below it; weights_needed(layer) (may be NULL) before any pass reads layer l's
 * weights (every F, FK and B op, recompute included; every layer part's op), so fsdp
 * gathers a layer's weights as it is first needed and prefetches the next.
 */
typedef struct lt_exec_hooks {
    void *ctx;
    lt_status (*grads_final)(void *ctx, int layer, lt_error *err);
    lt_status (*weights_needed)(void *ctx, int layer, lt_error *err);
} lt_exec_hooks;
lt_status lt_exec_step_rank(const lt_llama *m, const lt_step_plan *p, const lt_train_sample *samples,
                            const lt_llama_views *grads, lt_exec_stats *stats, lt_pool *pool, lt_comm *comm,
                            const lt_exec_hooks *hooks, lt_error *err);

#endif /* LT_TRAIN_EXEC_H */
