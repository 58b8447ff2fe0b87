/*
 * plans/strategies/plan.h — the plan of one training step, and the strategies that make it.
 *
 * A step plan is what the trainer executes and what the plan store (plans/store/store.h) keeps:
 * for every pipeline of the step (one per DP rank, or per context-parallel group of DP
 * ranks) a schedule (plans/schedule/schedule.h: slices, units, per-stage ops), simulated with the
 * cost model (plans/cost/cost.h, plans/schedule/sim.h), with each op's predicted start, finish and
 * bytes. A strategy turns the step's sample lengths into a step plan:
 *
 *   megatron   best-fit-decreasing packing of whole samples into micro-batches of at most
 *              context_len tokens (Krell et al.; SlimPack 6.1 "Best-Fit Packing"), the
 *              micro-batches dealt round-robin over the data-parallel pipelines, 1F1B, with
 *              a static context-parallel degree and recompute depth tuned once per run so
 *              a full context_len micro-batch fits (lt_strategies_create; docs/strategies.md
 *              states the rule)
 *   gpipe      the same micro-batches and tuning under GPipe
 *   seq1f1b    the same micro-batches, each cut into seq1f1b_slices slices of equal
 *              forward FLOPs (Seq1F1B's split), slice-level 1F1B
 *   chunkflow  each pipeline's samples (the same DP split) through ChunkFlow Alg. 1
 *              (chunks of chunk_size) and Alg. 2 (state-aware 1F1B with K); chunk_size and
 *              K fixed by the config or chosen per step by grid search (ChunkFlow 5)
 *   infinipipe InfiniPipe Sec. 3 (plans/strategies/infinipipe.c): Alg. 1 chunks, Eq. 14 grouping into
 *              1F1B pipelines, the Alg. 2 checkpointing MILP; CP degree and N per step
 *   slimpack   SlimPack Sec. 4 (plans/strategies/slimpack.c): FLOPs-balanced DP split with DP-Merge of
 *              outliers (merges), MicroPacks of equal forward FLOPs cut by a MILP, an
 *              asymmetric backward partition of equal backward FLOPs, PackFlow
 *   auto       per step, the fastest of the others under the memory cap (runner_up: the
 *              second fastest)
 *
 * Sample numbering inside a plan: the step's samples are 0..n_samples-1 in the order the
 * sampler gave them (plans/batches/sampler.h); every lt_slice.sample of a plan's schedules is such
 * an index. The store maps them to the sampler's global sample ids.
 *
 * Ownership: a lt_step_plan owns its arrays and schedules; lt_step_plan_free releases them
 * and leaves a zeroed plan, ready for reuse.
 * Thread-safety: a lt_strategies holds scratch space: one per thread. lt_strategies_create is
 * deterministic, so threads that each create one from the same config plan identically.
 */
#ifndef LT_PLAN_H
#define LT_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"               /* lt_status, lt_error */
#include "plans/cost/cost.h"         /* lt_cost_model */
#include "plans/schedule/schedule.h" /* lt_schedule */

/* ---------------------------------------------------------------- strategies */

typedef enum lt_strategy {
    LT_STRATEGY_MEGATRON = 0,
    LT_STRATEGY_GPIPE,
    LT_STRATEGY_SEQ1F1B,
    LT_STRATEGY_CHUNKFLOW,
    LT_STRATEGY_INFINIPIPE,
    LT_STRATEGY_SLIMPACK,
    LT_STRATEGY_HELIXPIPE,
    LT_STRATEGY_AUTO,
    LT_STRATEGY_COUNT
} lt_strategy;

/* "megatron", ... (CONTRACTS.md names); "?" out of range. */
const char *lt_strategy_name(lt_strategy s);
/* Name -> strategy. LT_ERR_USAGE naming `where` (e.g. "--strategy") with the list of names as
 * the hint otherwise. */
lt_status lt_strategy_parse(const char *name, const char *where, lt_strategy *out, lt_error *err);

/* ---------------------------------------------------------------- the step plan */

/* One op of a pipeline's schedule with what the simulator predicts for it. */
typedef struct lt_plan_op {
    double start_s;   /* predicted start, seconds from the step's start */
    double finish_s;  /* predicted finish */
    double mem_bytes; /* bytes the op adds while it runs and keeps for later: its cost's
                         act_bytes + kv_bytes + work_bytes (lt_op_cost) */
} lt_plan_op;

/* One executed op, as the trainer measured it (trainer train --db stores it beside the plan,
 * lt_store_put_measured): its pipeline (dp_rank), stage and position in the stage's list
 * (seq), when it started and finished, seconds from the start of the step's execution. */
typedef struct lt_measured_op {
    int dp_rank, stage;
    uint32_t seq;
    double start_s, finish_s;
} lt_measured_op;

/* One pipeline of a step: the DP rank (or the DP ranks of a context-parallel group) that
 * run one schedule. */
typedef struct lt_rank_plan {
    int dp_rank;         /* the first DP rank of the pipeline's group */
    int cp;              /* DP ranks in the group = context-parallel degree (1 = none): the
                            group is dp_rank .. dp_rank + cp - 1 */
    lt_schedule sched;   /* stages = pp, layers = the model's; slice.sample = step sample index */
    lt_plan_op *ops;     /* [lt_schedule_n_ops(&sched)], op id order (stage-major, as lt_sim) */
    double time_s;       /* the pipeline's simulated step time (lt_sim.step_time) */
    double *stage_busy_s;   /* [pp] compute time per stage */
    double *stage_peak_mem; /* [pp] peak bytes per GPU of each stage (model states included) */
} lt_rank_plan;

/* A DP-Merge group (SlimPack 4.1.1): sample `sample` is trained by the cp consecutive
 * pipelines ranks[first_rank .. first_rank + cp - 1] together with context parallelism of
 * degree cp. Each member's schedule lists the sample's units with unit.cp = cp (the same
 * slices and units in every member, which computes shard k = its position in the group of
 * every slice: 1/cp of the tokens, ring attention over load-balanced causal shards);
 * sample_rank[sample] = first_rank. */
/* Why a sample was DP-Merged (dp_merges.reason; docs/strategies.md "slimpack"): its forward
 * FLOPs exceed a DP rank's capacity (SlimPack 4.1.1's compute outlier), or its activations
 * cannot be held by one rank without recomputation and the cost model prices context
 * parallelism over the group cheaper than that recomputation (4.1.1: "memory and compute
 * outliers need not coincide"). */
typedef enum lt_merge_reason {
    LT_MERGE_FLOPS = 0,  /* 'flops' */
    LT_MERGE_MEMORY = 1, /* 'memory' */
} lt_merge_reason;

/* "flops" or "memory" (NULL for a value out of range). */
const char *lt_merge_reason_name(lt_merge_reason r);

typedef struct lt_dp_merge {
    int32_t sample;  /* step sample index */
    int first_rank;  /* index into ranks[] */
    int cp;          /* members = context-parallel degree, 2..max_cp */
    lt_merge_reason reason;
} lt_dp_merge;

typedef struct lt_step_plan {
    uint64_t step;
    lt_strategy strategy;  /* the strategy that made this plan (auto: the one it picked) */
    size_t n_samples;
    int64_t *lengths;      /* [n_samples] tokens of each sample */
    int64_t n_predicted;   /* the loss denominator: lt_plan_predicted_tokens(lengths, n_samples),
                              the step's tokens that have a next-token target */
    int *sample_rank;      /* [n_samples] index into ranks[] of the pipeline that trains it */
    size_t n_ranks;        /* pipelines (dp / cp for a static CP degree) */
    lt_rank_plan *ranks;   /* [n_ranks], in dp_rank order */
    int pp;                /* stages of every pipeline */
    lt_dp_merge *merges;   /* [n_merges] DP-Merge groups (slimpack), by increasing sample */
    size_t n_merges;
    /* predictions */
    double time_s;         /* max over pipelines of time_s, + the gradient synchronisation
                              (max over stages of lt_cost_dp_sync_time) */
    double bubble_ratio;   /* idle GPU time / (GPUs x time_s): 1 - sum of every pipeline's
                              stage busy / (n_ranks x pp x time_s); counts DP stragglers too */
    double peak_mem;       /* max over pipelines and stages of stage_peak_mem */
    double solve_ms;       /* wall-clock planning time of this step (not deterministic) */
    char params[128];      /* the strategy's choices, "key=value" separated by spaces, e.g.
                              "cp=2 recompute=5" or "chunk_size=32768 k=2" */
    char solver_status[16];/* "none" for the heuristics and when no MILP was solved; else the
                              worst outcome of the step's CBC solves: optimal | feasible |
                              timeout | infeasible (the last two: its fallback heuristic was
                              used; plans/strategies/milp.h, docs/strategies.md) */
    lt_strategy runner_up; /* auto: the second fastest strategy; else LT_STRATEGY_COUNT */
    double runner_up_time_s;
} lt_step_plan;

void lt_step_plan_init(lt_step_plan *p); /* zeroed, runner_up = LT_STRATEGY_COUNT */

/*
 * The loss convention (docs/plans-schema.md, "Loss"). Next-token loss per sample: position
 * t of a sample of length L has target token t + 1 when t + 1 < L; the last token predicts
 * nothing. A sample is what the plan trains: a document truncated to context_len, or one
 * piece of a document split by the sampler (sample_policy = split) — pieces are separate
 * samples, so a piece's last token does NOT predict the next piece's first token (it is in
 * another sample, possibly another step). A slice [b, e) of a sample with e < L predicts
 * token e at its last position: labels come from the sample's tokens, not the slice's, so
 * the unit holding slice [b, e) needs token e (the executor reads it from the sample). Every
 * forward that computes activations for the loss is an F over the model's last layer; FK
 * ops (ChunkFlow's K/V-only pass) compute no loss, and a unit's loss is counted once, by the
 * F matched to its B. With DP-Merge (cp members), each member computes the loss of its own
 * shard's positions; the group's sum is the sample's.
 * The step's loss is the sum over every sample of every pipeline divided by
 * n_predicted = sum over samples of (L_i - 1) (all L_i >= 1): the whole global batch's
 * predicted tokens, so every DP rank divides by the same number and the gradient is the
 * same whatever the DP split (the equivalence invariant of DESIGN.md).
 * A sum past INT64_MAX (only a damaged plan's lengths reach it) gives INT64_MAX.
 */
int64_t lt_plan_predicted_tokens(const int64_t *lengths, size_t n);

/* The number of targets of slice [begin, end) of a sample of `length` tokens:
 * end - begin, less one when end == length (the sample's last token). */
int64_t lt_slice_predicted_tokens(int64_t begin, int64_t end, int64_t length);
void lt_step_plan_free(lt_step_plan *p); /* NULL-safe; leaves it as lt_step_plan_init does */

/*
 * A scoring plan (the validation loss of train.eval_every): documents lengths[0..n) (each 2
 * tokens or more) run forward with no gradient by dp pipelines of pp stages over `layers`
 * layers, so that a model spread over pipeline stages and tensor-parallel ranks scores them
 * where it lives, through the executor (train/exec/exec.h, grads = NULL). Document i goes to
 * pipeline i mod dp as one unit of one slice (whole-document causal attention); each stage
 * runs an F over its layer block (lt_schedule_stage_layers, the split every strategy uses)
 * for each of its pipeline's units in order; no B; predicted starts unit + stage (units of
 * time, not seconds: they only order the ops, as a pipeline's fill does). With `parts`, for
 * a model held as HelixPipe's parts (its stages' tensors where the helix puts them,
 * lt_helix_part_stage): an F per layer part instead, the attention of layer l on its
 * pre-attention's stage, each stage's ops in waves (unit + layer), so a pipeline's units
 * overlap as in a fill; predicted starts in that order. A
 * pipeline may hold no document (n < dp). p is initialized here; LT_ERR_USAGE for a layout
 * no model has, LT_ERR_INPUT for a document of fewer than 2 tokens, LT_ERR_NOMEM.
 */
lt_status lt_plan_scoring(lt_step_plan *p, const int64_t *lengths, size_t n, int dp, int pp, int layers, bool parts,
                          lt_error *err);

/* ---------------------------------------------------------------- DP-Merge lockstep
 * (docs/plans-schema.md, "Lockstep"; docs/simulator.md, "DP-Merge groups"; issue 16.)
 * On each stage the ops of a group's members over the group's units (unit cp > 1 holding
 * the merged sample) form the same sequence on every member; the k-th of them is one
 * collective op of the group, simulated as a rendezvous (lt_sim_run_group). */

/* The sample of the merged unit op runs (its unit has cp > 1), or UINT32_MAX. */
uint32_t lt_plan_op_merged_sample(const lt_schedule *s, const lt_op *op);

/* The rendezvous of every op of group g's members: rdv[j] (j = 0 .. cp - 1, a new array
 * indexed by member j's op id, free() it) maps the k-th merged op of stage st to the
 * rendezvous (the merged ops of the stages before st on member 0) + k, every other op to
 * LT_SIM_SOLO; *n_rdv = the merged ops of one member. LT_ERR_INPUT naming the step, group,
 * stage and pipelines when a member runs a different number of merged ops on a stage (rdv
 * all NULL then). The ops' agreement one by one is lt_plan_validate's to check. */
lt_status lt_plan_group_rendezvous(const lt_step_plan *p, size_t g, uint32_t **rdv, size_t *n_rdv, lt_error *err);

/* Simulate group g's members jointly (lt_sim_run_group with the rendezvous above), member j
 * into sims[j] priced by costs[j] (sims and costs: p->merges[g].cp entries). Errors, a
 * deadlock included, name the step and the group ("step S: DP-Merge group of sample X
 * (pipelines a..b): deadlock: ..."). */
lt_status lt_plan_simulate_group(const lt_step_plan *p, size_t g, lt_sim *sims, const lt_sim_costs *costs,
                                 lt_error *err);

/* ---------------------------------------------------------------- the strategies
 * The plan stage's engine: a config (lt_plan_config) and the strategies made ready from it
 * (lt_strategies), which plan one step at a time. `planner` is the program only. */

typedef struct lt_plan_config {
    lt_cost_model cm;       /* model, hardware, pp, tp, dp, mem_cap (lt_cost_model_from_config) */
    lt_strategy strategy;
    int64_t context_len;    /* plan.context_len: the longest a sample can be */
    int max_cp;             /* parallel.max_cp: largest context-parallel group */
    int64_t chunk_size;     /* plan.chunk_size; 0 = grid search per step */
    int chunkflow_k;        /* plan.chunkflow_k; 0 = grid search per step */
    int seq1f1b_slices;     /* plan.seq1f1b_slices >= 1 */
    int infinipipe_slices;  /* plan.infinipipe_slices: N of InfiniPipe Alg. 1; 0 = tuned per step */
    int micropacks;         /* plan.micropacks: slimpack's m per DP rank (a multiple of pp);
                               0 = searched per step over m = i x pp (SlimPack 5.1) */
    double dp_merge_margin; /* plan.dp_merge_margin: DP-Merge a sample whose forward FLOPs exceed
                               a DP rank's capacity x (1 + margin) (SlimPack 4.1.1) */
    bool no_memory_merge;   /* not a config key: true turns slimpack's memory trigger of DP-Merge
                               off (FLOPs outliers only, as before issue 21), for tests and
                               side-by-side measurements; zero-initialised configs keep it on */
    double milp_time_limit; /* plan.milp_time_limit: seconds per CBC solve; 0 = no limit */
    double milp_gap;        /* plan.milp_gap: relative gap at which CBC stops; 0 = optimal */
    int milp_max_nodes;     /* plan.milp_max_nodes: branch-and-bound nodes per CBC solve; 0 = no
                               limit */
} lt_plan_config;

/* The plan config of a loaded config (lt_cost_model_from_config for cm, the [plan] and
 * [parallel] keys for the rest). LT_ERR_CONFIG naming the key for a bad value. */
lt_status lt_plan_config_from(lt_plan_config *pc, const lt_config *cfg, const char *hardware_dir,
                                 lt_error *err);

typedef struct lt_strategies lt_strategies;

/* The strategies for pc (copied; pc->cm must have cp = 1). Tunes the megatron/gpipe/seq1f1b
 * baseline once (context-parallel degree and recompute depth so that a micro-batch of
 * context_len tokens fits mem_cap; docs/strategies.md): LT_ERR_CONFIG when nothing fits even
 * at max_cp and full recompute, with the memory needed and the cap in the message
 * ("plan.context_len = 1048576 cannot fit ..."). That error is returned here when
 * pc->strategy is megatron, gpipe or seq1f1b; a planner for another strategy is made all
 * the same and returns the error from lt_strategies_plan_step for those three (their params
 * read "untuned"). LT_ERR_CONFIG also for a bad context_len, max_cp, chunk_size,
 * chunkflow_k or seq1f1b_slices. The tuned values are in lt_strategies_params. */
lt_status lt_strategies_create(lt_strategies **out, const lt_plan_config *pc, lt_error *err);
void lt_strategies_free(lt_strategies *p); /* NULL-safe */

/* The run-wide tuning, as "cp=C recompute=R" (R = recomputed layers per stage, of
 * layers/pp; 0 = none), or "untuned" (lt_strategies_create). */
const char *lt_strategies_params(const lt_strategies *p);

/* Plan step `step` whose samples have lengths[0..n) (each 1..context_len) with strategy
 * `s` (usually pc.strategy; compare runs several). *out is freed first, then filled.
 * LT_ERR_INPUT naming the step, the pipeline and the sample when the plan cannot fit the
 * memory cap ("step 17: sample 3 (262144 tokens) on DP rank 2 needs 93.2 GiB on stage 0,
 * over the 80.0 GiB cap": the pipeline and stage of the highest peak, the pipeline's
 * longest sample); LT_ERR_USAGE for a strategy not built yet ("strategy 'slimpack' is not
 * built yet"); LT_ERR_INPUT for a length out of range. On error *out is left empty (as
 * lt_step_plan_init). Deterministic: the same planner config and lengths give the same plan
 * (apart from solve_ms), whatever the planner planned before. */
lt_status lt_strategies_plan_step(lt_strategies *p, lt_strategy s, uint64_t step, const int64_t *lengths, size_t n,
                               lt_step_plan *out, lt_error *err);

#endif /* LT_PLAN_H */
