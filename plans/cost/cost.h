/*
 * plans/cost/cost.h — the cost model of the planner: FLOPs, time, memory and P2P traffic of one
 * pipeline op (a unit of slices through a range of layers, plans/schedule/schedule.h), for a model
 * shape (lib/model.h), a hardware profile (plans/cost/hardware.h) and a parallel layout (PP, TP,
 * DP, ZeRO-1). Every strategy and the simulator (plans/schedule/sim.h, through lt_cost_sim_costs)
 * price schedules with it. docs/cost-model.md derives every formula; in short:
 *
 * FLOPs (multiply-add = 2), per GPU, forward, per layer (InfiniPipe 3.1.2 Eq. 1; SlimPack
 * 2.1.1; HelixPipe Table 1), h = hidden, kv = key/value width, f = ffn, V = vocab, t = TP:
 *   QKV projection                            2 T h (h + 2 kv) / t (K/V heads replicate
 *                                             once t > kv_heads)
 *   attention core (QK^T and AV, causal)      2 h (end^2 - begin^2) / t per slice [begin, end)
 *   post-attention (output projection + MLP)  2 T (h h + m h f) / t,  m = 3 SwiGLU / 2 GELU
 *   LM head (after the last layer)            2 T h V / t;  the embedding lookup: 0
 * The attention term is the continuous form of sum over the slice's tokens i of 4 h (i + 1)
 * (token i attends to i + 1 keys): slices of one sample add up exactly to the whole sample.
 * Backward = 2 x the GEMM part + 2.5 x the attention part (SlimPack 2.2.2); B also re-runs
 * the forward of its recompute_layers layers (InfiniPipe Eq. 11).
 *
 * Time = GEMM FLOPs / (peak x gemm_efficiency(unit tokens)) + sum over slices of attention
 * FLOPs / (peak x attention_efficiency(sqrt(end^2 - begin^2))) + TP collectives
 * (2 all-gathers + 2 reduce-scatters per layer, Megatron sequence parallelism, HelixPipe 2.2).
 * The backward's time is its forward's times the profile's bwd_gemm_factor and
 * bwd_attention_factor (default: the FLOP ratios 2 and 2.5; trainer calibrate fits them on a
 * CPU); the LM head runs on the profile's head_efficiency curve when it has one. A fused
 * head (the profile's logit_bytes = 0: the CPU trainer's, llm.c's way) computes its backward
 * during the F over the model's end, so that F carries the head's forward + backward and the
 * B over the end none of it (FLOPs and time).
 * HelixPipe's layer parts (plans/schedule/schedule.h lt_op_part) split a layer as the trainer
 * runs them (train/model/model.h lt_llama_forward_part): PRE the first norm (no GEMM), ATTN
 * the QKV projection and the attention core (HelixPipe 4.2 moves the QKV linear to the
 * attention, sending its input and weights, 2bsh + 3h^2, instead of Q, K and V), POST the
 * output projection and the MLP.
 *
 * Memory per GPU (bf16 activations, flash attention: no T^2 term; Korthikanti et al. /
 * HelixPipe Table 1: 16 h elements per token per GPT layer; TP with sequence parallelism
 * divides all of it by t): see lt_cost_act_elems. Model states: 2 bytes bf16 weights + 4
 * fp32 gradients + 12 fp32 master weights and Adam moments = 18 bytes per parameter, the
 * 12 divided by DP under ZeRO-1 (Megatron-LM's distributed optimizer: 6 + 12/d); an fp32
 * backend (the profile's act_bytes >= 4: the CPU trainer) 4 + 4 + 8 = 16 (no master copy).
 * The profile may set each of these bytes, the loss's logit bytes and the reserved memory
 * (plans/cost/hardware.h, the optional keys).
 * Keys/values of a slice that later slices of its sample attend to are kept with their
 * gradients whatever the recomputation (InfiniPipe 3.1.4, Eqs. 5, 9, 10).
 *
 * Context parallelism (cp = c > 1; Megatron CP, ring attention): every op's tokens are
 * spread over c GPUs, so per GPU all of the above is divided by c, and ops with attention
 * add the part of the K/V ring exchange that their attention does not hide.
 *
 * DP-Merge units (SlimPack 4.1.1; plans/schedule/schedule.h lt_unit.cp): an op of a schedule whose
 * unit (bunit, for a B of an asymmetric schedule) has cp = g > 1 is priced as if cm->cp
 * were g: FLOPs, activation, K/V and work bytes, TP collective tokens and P2P payloads
 * divided by g, the GEMM efficiency at tokens / g, the attention efficiency at
 * sqrt((end^2 - begin^2) / g), the exposed K/V ring of g - 1 transfers per layer pass
 * (intra-node when tp x g <= gpus_per_node). g need not divide dp (a DP-Merge group is any
 * 2..max_cp of the dp ranks, not a CP layout of the model). g replaces the model's own cp
 * c (it does not multiply it): a unit with g > 1 is spread over g GPUs per stage in all;
 * a unit with cp 0 or 1 runs at c. The transfer time of its P2P payload uses the model's
 * stages_per_node: the simulator's p2p_time callback does not know the op, and the
 * pipelines of a DP-Merge group keep their own ranks (only what they carry shrinks).
 * lt_cost_op itself prices at cm->cp; lt_cost_schedule_op and both bridges apply the rule.
 *
 * Thread-safety: an initialised lt_cost_model is read-only; every function only reads it
 * (the callbacks of both bridges too, so simulations may run in parallel); preparing an
 * lt_cost_sim_ctx writes that ctx only.
 */
#ifndef LT_COST_H
#define LT_COST_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/config.h"              /* lt_config */
#include "lib/error.h"               /* lt_status, lt_error */
#include "lib/model.h"               /* lt_model_shape, lt_helix_part_stage */
#include "plans/cost/hardware.h"     /* lt_hardware, lt_hardware_efficiency, lt_hardware_fill_defaults */
#include "plans/schedule/schedule.h" /* lt_slice, lt_op, lt_schedule */
#include "plans/schedule/sim.h"      /* lt_sim_costs, lt_op_cost */

/* How a stage's model states are sharded over its dp ranks (parallel.shard; ZeRO, Rajbhandari
 * et al. 2020 5; FSDP2 as the PP reference runs it). Every mode keeps a stage's parameters
 * and gradients whole for the step: its micro-batches' gradients accumulate into them, and
 * our DP ranks run different numbers of micro-batches (the long tail), so no per-micro-batch
 * collective can match across them (docs/cost-model.md "Sharded data parallelism").
 *   NONE  every rank holds every model state; gradients all-reduced.
 *   ZERO1 the optimizer states (AdamW moments; the fp32 master on a GPU) in 1/dp blocks;
 *         gradients reduce-scattered, each rank updates its block, the weights all-gathered.
 *   ZERO2 also the gradients: after the step's reduce-scatter a rank keeps its block only.
 *   FSDP  also the weights (ZeRO-3 with reshard_after_forward = false, the PP reference's
 *         default): between steps a rank holds 1/dp of everything; the weights are
 *         all-gathered before the step's first forward, the gradients reduce-scattered after
 *         its last backward. */
typedef enum lt_shard { LT_SHARD_NONE, LT_SHARD_ZERO1, LT_SHARD_ZERO2, LT_SHARD_FSDP, LT_SHARD_COUNT } lt_shard;

/* "none", "zero1", "zero2", "fsdp". */
const char *lt_shard_name(lt_shard s);
/* parallel.shard, with parallel.zero1 = true (the older key) meaning zero1 beside shard =
 * none (its default) or zero1: LT_ERR_CONFIG naming both beside zero2 or fsdp. */
lt_status lt_shard_from_config(const lt_config *cfg, lt_shard *out, lt_error *err);

typedef struct lt_cost_model {
    lt_model_shape model;
    lt_hardware hw;
    int pp, tp, dp;          /* pipeline stages, tensor-parallel degree, data-parallel ranks */
    int cp;                  /* context-parallel degree c (1 = none; lt_cost_model_set_cp): the
                                tokens of every op are spread over c GPUs of c DP ranks
                                (Megatron context parallelism, ring attention over load-balanced
                                causal chunks). Per GPU, FLOPs, activation, K/V and work bytes, TP
                                collective tokens and P2P payloads are divided by c, the GEMM
                                efficiency is looked up at tokens / c, and each op with attention
                                pays the part of the K/V ring exchange its attention does not hide
                                (docs/cost-model.md, "Context parallelism"). The gradient
                                synchronisation and ZeRO-1 still span all dp ranks (CP peers hold
                                the same weights; Megatron reduces over the DP x CP group) */
    lt_shard shard;          /* how the model states are sharded over the dp ranks (lt_shard) */
    /* precision (bytes); lt_cost_model_init takes them from the profile (its optional keys,
       plans/cost/hardware.h), with the defaults shown (GPU mixed precision; fp32 where the
       profile's act_bytes >= 4) */
    double weight_bytes;     /* 2: bf16 weights; 4 (fp32) when act_bytes >= 4 */
    double grad_bytes;       /* 4: fp32 gradient accumulation (Megatron main_grad) */
    double optim_bytes;      /* 12: fp32 master weights + Adam m and v; 8 (m and v: the fp32
                                weights are the master copy) when act_bytes >= 4; / dp under
                                ZeRO-1 */
    double act_bytes;        /* bytes of activations, keys/values and their gradients: the
                                profile's act_bytes, 2 (bf16) unless it says otherwise (4 for
                                the CPU fp32 trainer's profiles) */
    double logit_bytes;      /* 4: fp32 softmax of the loss kept for its backward (Megatron's
                                vocab-parallel cross entropy computes in fp32); 0: a fused
                                head (the CPU trainer's), which keeps no logits and whose
                                transient logits (work bytes) are not priced either: it makes
                                and consumes them in bounded row blocks */
    /* backward / forward FLOP ratios (SlimPack 2.2.2) */
    double bwd_gemm_factor;  /* 2.0: input and weight gradients */
    double bwd_attn_factor;  /* 2.5: FlashAttention recomputes the scores */
    /* backward / forward time ratios at one efficiency: the profile's bwd_gemm_factor and
       bwd_attention_factor, by default the FLOP ratios above (a CPU's backward runs at
       another rate than its forward: trainer calibrate measures them) */
    double bwd_gemm_time_factor;
    double bwd_attn_time_factor;
    /* layout */
    int stages_per_node;     /* consecutive stages per node: max(1, gpus_per_node / tp)
                                (ranks ordered TP, then PP, then DP, the trainer's order: a
                                context-parallel group is DP ranks, tp x pp apart); P2P
                                between stages of one node is intra-node */
    int head_stage;          /* stage holding the LM head's weights: pp - 1 (HelixPipe puts
                                the last post-attention, hence the head, on stage 0) */
    bool helix_parts;        /* HelixPipe's partition (4.2): a stage holds the states of the
                                layer parts the helix puts on it (layer l's first norm and
                                Q/K/V on stage l mod pp, its output projection, second norm
                                and MLP on (l + 1) mod pp, the last layer's on 0), the
                                embedding, final norm and head on stage 0; an attention away from
                                its pre-attention's stage keeps the Q/K/V weights sent with
                                its input until its backward, which makes their gradients
                                (fp32) and sends them back (train/model/model.h
                                lt_llama.helix_pp); set by the helixpipe strategy on its copy */
    bool whole_model;        /* every stage holds the whole model's states (the layers, the
                                embedding, the final norm and head): a run whose plans mix
                                HelixPipe's steps with other strategies' (auto), as the
                                trainer runs it (train/dist/dist.h lt_dist.helix) */
    double reserved_bytes;   /* per GPU beyond model states and activations: CUDA context,
                                NCCL buffers, cuBLAS workspace, allocator slack; 2 GiB
                                [assumed] (the profile's reserved_gib: 0 on a CPU) */
    double mem_cap;          /* per-GPU memory the planner may fill: plan.mem, else the
                                profile's HBM */
    int mlp_chunk;           /* the chunked MLP (HelixPipe 4.4.2; plan.mlp_chunk; 0: none): a unit
                                of more tokens per GPU makes the MLP's intermediates and their
                                gradients mlp_chunk rows at a time (train/model/model.h
                                lt_llama.mlp_chunk), so its backward's working memory holds
                                mlp_chunk rows of them, and a recomputed post-attention's
                                (forward and recompute) too; that recompute stops after the
                                MLP's norm and its backward remakes each chunk's gate and up:
                                the down projection is not recomputed, nor its TP collectives
                                (lt_cost_tp_collectives) */
} lt_cost_model;

/* Set up cm for model m (validated) on hardware hw with the given layout and the defaults
 * above (the bytes and reserved_bytes: hw's, lt_hardware_fill_defaults filling in what a
 * profile built in code leaves unset). LT_ERR_CONFIG (WHERE "[parallel]") when pp, tp or dp < 1, pp >
 * layers, tp does not divide the attention heads, the K/V heads or the MLP width (the
 * trainer's split), or tp > 1 does not divide the profile's gpus_per_node (a TP group would
 * span nodes). hw NULL: a model for counting only (parameters per stage, model-state and TP
 * bytes, lt_cost_tp_collectives), one node per TP group, no times (its hardware is zero). */
lt_status lt_cost_model_init(lt_cost_model *cm, const lt_model_shape *m, const lt_hardware *hw, int pp, int tp,
                             int dp, lt_error *err);

/* The same from a config: [model] (lt_model_from_config), [parallel] pp tp dp shard (zero1),
 * [plan] hardware (lt_hardware_load with hardware_dir, may be NULL) and mem. cp = 1 (the
 * planner chooses the context-parallel degree, parallel.max_cp bounding it). */
lt_status lt_cost_model_from_config(lt_cost_model *cm, const lt_config *cfg, const char *hardware_dir,
                                    lt_error *err);

/* The same without the hardware profile (lt_cost_model_init's hw NULL): for the counts a
 * run can be checked against where no profile is installed (trainer check). */
lt_status lt_cost_counts_from_config(lt_cost_model *cm, const lt_config *cfg, lt_error *err);

/* Set the context-parallel degree to cp (stages_per_node stays gpus_per_node / tp: the CP
 * members are DP ranks of other pipelines, ranks ordered TP, PP, DP). LT_ERR_CONFIG (WHERE "[parallel]") when cp < 1 or cp does not divide dp (a CP group is
 * made of DP ranks); cm is unchanged then. */
lt_status lt_cost_model_set_cp(lt_cost_model *cm, int cp, lt_error *err);

/* ------------------------------------------------------------------ FLOPs (per GPU)
 * Per GPU of a TP x CP group: with context parallelism c each GPU runs 1 / c of them (ring
 * attention with load-balanced causal chunks gives every GPU the same share of the causal
 * attention work). */

/* Forward GEMM FLOPs of one layer's `part` for `tokens` tokens (ALL = ATTN + POST: the QKV
 * projection in ATTN, the rest in POST; PRE: 0). */
double lt_cost_linear_flops(const lt_cost_model *cm, lt_op_part part, double tokens);
/* Forward attention FLOPs of one layer for the slice [begin, end): 2 h (end^2 - begin^2) / (t c). */
double lt_cost_attention_flops(const lt_cost_model *cm, double begin, double end);
/* Forward FLOPs of the LM head for `tokens` tokens: 2 tokens h V / (t c). */
double lt_cost_head_flops(const lt_cost_model *cm, double tokens);

/* Forward FLOPs of an op's slices over its range (its layers or layer part, plus the LM head
 * when the range ends the model), and of the part of it that B recomputes. */
typedef struct lt_op_flops {
    double linear;              /* GEMMs: projections, MLP, LM head */
    double head;                /* the LM head's part of linear (0 unless the range ends the
                                   model) */
    double attention;           /* causal attention core */
    double recompute_linear;    /* the forward of the op's recompute_layers layers */
    double recompute_attention;
} lt_op_flops;

void lt_cost_op_flops(const lt_cost_model *cm, const lt_slice *slices, size_t n, const lt_op *op,
                      lt_op_flops *out);

/* FLOPs an op of `kind` executes: F, FK: linear + attention; B: bwd_gemm_factor x linear +
 * bwd_attn_factor x attention + recompute_linear + recompute_attention. A fused head
 * (logit_bytes 0) moves the head's backward, bwd_gemm_factor x head, from B to F. */
double lt_cost_executed_flops(const lt_cost_model *cm, const lt_op_flops *f, lt_op_kind kind);

/* ------------------------------------------------------------------ memory */

/* Activation elements per token per GPU of one layer `part` that an F keeps for its B.
 * With hq = h / t (TP splits heads, sequence parallelism the rest), kv2 = K and V of one GPU
 * (2 x ceil(kv_heads / t) heads; Megatron replicates K/V heads when t exceeds them), mlp = 3f/t
 * SwiGLU (gate and up outputs, down input) or 2f/t GELU:
 *   ALL   full 6hq + kv2 + mlp (16h for GPT at t = 1: HelixPipe Table 1); recomputed: hq
 *   PRE   hq (the norm's input), recomputed or not
 *   ATTN  full 3hq + kv2 (QKV input, Q, K, V, output: HelixPipe 4.2 moves the QKV linear
 *         here); recomputed 2hq + kv2 (its input and output, 4.4.1; K and V stay)
 *   POST  full 3hq + mlp (attention output, norm input, MLP input, MLP intermediates);
 *         recomputed 2hq (attention output, residual)
 * kv_separate: the slice's K and V are held as kv_bytes instead (no kv2 here). */
double lt_cost_act_elems(const lt_cost_model *cm, lt_op_part part, bool recomputed, bool kv_separate);
/* The same in bytes: act_elems x act_bytes. */
double lt_cost_act_bytes_per_token(const lt_cost_model *cm, lt_op_part part, bool recomputed, bool kv_separate);
/* Bytes per token per layer per GPU held for a slice whose keys/values later slices use:
 * K, V and their gradients (InfiniPipe Eq. 5 M_dkv and Eq. 9). */
double lt_cost_kv_bytes_per_token(const lt_cost_model *cm);

/* Parameters per GPU of one transformer layer (matrices / t, norms replicated). */
double lt_cost_layer_params(const lt_cost_model *cm);
/* Parameters per GPU of stage `stage` under the uniform layer split (lt_schedule_stage_layers):
 * its layers, the embedding on stage 0, the final norm and LM head on head_stage; with
 * helix_parts HelixPipe's part of the stage; with whole_model every stage's are the whole
 * model's. */
double lt_cost_stage_params(const lt_cost_model *cm, int stage);
/* Model-state bytes of a stage during a step, its peak (docs/cost-model.md "Memory"):
 * params x (weight + grad + optim) with optim / dp under every sharded mode, and under fsdp
 * the rank's block of the weights beside their gathered whole where the weights are their
 * own master (weight_bytes >= 4: the CPU trainer's fp32). */
double lt_cost_model_states_bytes(const lt_cost_model *cm, int stage);
/* The model-state bytes a rank of the stage holds between steps (after the update): as
 * during the step without sharding and with zero1; zero2 drops the gradients; fsdp holds
 * 1/dp of the master weights and the optimizer states. */
double lt_cost_model_states_held_bytes(const lt_cost_model *cm, int stage);

/* ------------------------------------------------------------------ communication */

/* The node of a pipeline stage: stage / stages_per_node. */
int lt_cost_stage_node(const lt_cost_model *cm, int stage);
/* P2P time of `bytes` from stage `from` to `to` (InfiniPipe Eq. 2 with f = 1): latency +
 * bytes / bandwidth, intra-node when both stages are on one node; 0 for bytes <= 0. */
double lt_cost_p2p_time(const lt_cost_model *cm, int from, int to, double bytes);
/* Time of the TP collectives of one op-range pass over `tokens` tokens: `collectives` ring
 * all-gathers/reduce-scatters of tokens x h x act_bytes each; 0 when tp = 1. */
double lt_cost_tp_comm_time(const lt_cost_model *cm, double tokens, int collectives);
/* The TP all-gathers and reduce-scatters of op (each of the op's tokens x h x act_bytes) as
 * the trainer runs them (cost.c part_collectives: per layer 4 forward, 6 backward, the
 * recomputed layers' forward again, the embedding's and the fused head's; a recomputed
 * post-attention with a chunked MLP, more than mlp_chunk `tokens` per GPU, recomputes up to
 * the MLP's norm only: 1); 0 when tp = 1. */
int lt_cost_tp_collectives(const lt_cost_model *cm, const lt_op *op, double tokens);
/* The bytes one TP rank sends in them, as a ring sends them: collectives x (tp - 1) / tp x
 * the op's tokens (over slices[0..n), per CP member: / cp) x h x act_bytes. What the
 * trainer's communicator counts (train/dist/comm.h lt_comm_bytes). */
double lt_cost_tp_bytes(const lt_cost_model *cm, const lt_slice *slices, size_t n, const lt_op *op, int cp);
/* Gradient synchronisation of a stage in a step over its dp ranks (0 when dp = 1): a ring
 * all-reduce of its gradients without sharding; a reduce-scatter of the gradients and an
 * all-gather of the weights (weight_bytes) under zero1, zero2 and fsdp (fsdp's all-gather
 * before the step's first forward, the others' after the update). */
double lt_cost_dp_sync_time(const lt_cost_model *cm, int stage);
/* The bytes one DP rank of the stage sends in that synchronisation, as a ring sends them:
 * 2 (dp - 1) / dp x params x grad_bytes without sharding, (dp - 1) / dp x params x
 * (grad_bytes + weight_bytes) with it; what the trainer's communicator counts (train/dist/comm.h
 * lt_comm_bytes, its DP kinds). 0 when dp = 1. */
double lt_cost_dp_bytes(const lt_cost_model *cm, int stage);

/* ------------------------------------------------------------------ ops */

typedef struct lt_op_estimate {
    lt_op_flops flops;     /* forward FLOPs of the op's range */
    double executed_flops; /* what this op runs (lt_cost_executed_flops) */
    double gemm_time;      /* seconds of GEMMs (the LM head's included) */
    double attention_time; /* seconds of attention */
    double tp_comm_time;   /* seconds of TP collectives */
    double cp_ring_time;   /* seconds of the CP ring exchange of keys/values (0 when cp = 1) */
    double cp_comm_time;   /* the part of it the attention does not hide:
                              max(0, cp_ring_time - attention_time) */
    lt_op_cost cost;       /* for the simulator: time (gemm + attention + tp_comm + cp_comm),
                              act, kv, work, out */
} lt_op_estimate;

/*
 * Everything about one op over `slices` (its unit's slices). keeps_kv[i] says whether later
 * slices of slice i's sample attend to its keys/values (NULL: no slice's). The op's range is
 * taken against cm->model.layers: it holds the embedding when it starts at position 0, the
 * LM head (and the loss) when it ends at the end of the model. In cost:
 *   time        compute (F, FK: forward; B: backward + recompute; with a fused head, the F
 *               over the model's end also the head's backward and the B none of the head)
 *               + TP collectives + the
 *               exposed CP ring exchange (cp > 1, ops with attention: per layer pass c - 1
 *               transfers of the GPU's K and V, tokens / c x 2 kv x act_bytes; F and FK one
 *               pass per layer, B two per layer (K/V and dK/dV) plus one per recomputed layer;
 *               intra-node when tp x pp x cp <= gpus_per_node: the members are DP ranks)
 *   act_bytes   F only: activations of its layers (recomputed layers keep their input) and
 *               the head's inputs and softmax (logit_bytes per vocab entry; none when 0)
 *   kv_bytes    F, FK over ALL or ATTN: tokens of keeps_kv slices x layers x kv bytes/token
 *               (an ATTN part: of every slice of a sliced sample)
 *   kv_in_bytes F over ATTN: the tokens before each slice of a sliced sample x layers x kv
 *               bytes/token (HelixPipe: held where the earlier slices attend elsewhere)
 *   work_bytes  transient: one layer's full activations when they are dropped (FK, recomputed
 *               F) or re-made (B: recompute + gradients), the logits of the head (act_bytes
 *               per vocab entry; with logit_bytes 0, a fused head, only in its F and one
 *               block of lt_fused_head_rows rows: lib/model.h); as a symmetric schedule's B
 *               (lt_cost_schedule_op adds an asymmetric B's window)
 *   out_bytes   F, FK: the output activations (0 at the model's end); B: the gradients of
 *               its input (0 at position 0); per GPU (sequence-parallel shards)
 * Bytes are per GPU: with cp = c each GPU holds tokens / c of every slice.
 */
void lt_cost_op(const lt_cost_model *cm, const lt_slice *slices, size_t n, const bool *keeps_kv, const lt_op *op,
                lt_op_estimate *out);

/* lt_cost_op for an op of schedule s, over the slices it runs (lt_schedule_op_slices: a B of
 * an asymmetric schedule runs its bunit's bslices) at its unit's context-parallel degree
 * (DP-Merge units above): keeps_kv[i] is true when the slice table holds a later slice of
 * the same sample (a scan of the later slices: O(slices) per slice of a forward op; B ops
 * and ops without attention do not depend on it and get NULL). A B of an asymmetric
 * schedule gathers its rows from the forward units into a one-layer window, a layer at a
 * time: its work_bytes hold one layer more (none when it recomputes its whole range).
 * s->layers must equal the model's layers (a programming error otherwise: it dies with
 * file:line). */
void lt_cost_schedule_op(const lt_cost_model *cm, const lt_schedule *s, const lt_op *op, lt_op_estimate *out);

/* The bridge to the simulator: op_cost = lt_cost_schedule_op's cost, p2p_time =
 * lt_cost_p2p_time, base_bytes = model states + reserved_bytes; contention = the profile's
 * compute_contention among the stages of a node (stages_per_node), each stage's ops run by
 * lockstep = tp x the DP replicas of its node (ranks ordered TP, PP, DP: max(1, min(dp,
 * gpus_per_node / (tp x pp)))). ctx points to cm, which must outlive the returned table. */
lt_sim_costs lt_cost_sim_costs(const lt_cost_model *cm);

/* The bridge for simulating one schedule many times (a planner's search): the K/V flags of
 * s's slice table (and bslice table) are computed once, in O(slices log slices), instead of
 * by a scan per op, and so are the slices' attention efficiencies, each at the degree of
 * the unit holding it (the same values: costs are identical to lt_cost_sim_costs's).
 * The flags hold for s as it is now: call again after changing its tables (the callbacks
 * fall back to scanning when handed another schedule, or one whose slice or bslice count
 * changed, but cannot see in-place edits). ctx must be zero-initialised before the first
 * call, outlive the returned table, and be freed with lt_cost_sim_ctx_free. */
typedef struct lt_cost_sim_ctx {
    const lt_cost_model *cm;
    const lt_schedule *s; /* the schedule prepared for */
    size_t n_slices;      /* its slice count then */
    bool *keeps_kv;       /* [n_slices]: a later slice of the same sample exists */
    double *attn_eff;     /* [n_slices]: the slice's attention efficiency under cm, at the
                             context-parallel degree of its unit */
    size_t n_bslices;     /* asymmetric schedules: its bslice count then (0 otherwise) */
    bool *bkeeps_kv;      /* [n_bslices]: a later bslice of the same sample exists (passed
                             to the B ops; a B's cost does not depend on it today) */
    double *battn_eff;    /* [n_bslices]: as attn_eff, at the degree of its bunit */
} lt_cost_sim_ctx;

lt_sim_costs lt_cost_sim_costs_prepared(lt_cost_sim_ctx *ctx, const lt_cost_model *cm, const lt_schedule *s);
void lt_cost_sim_ctx_free(lt_cost_sim_ctx *ctx);

/*
 * The lower bound of a step's time (docs/strategies.md "The lower bound"): the step's compute
 * spread evenly over the dp x pp TP groups, with no bubble and no exposed communication (no TP
 * collective, CP ring, P2P transfer or DP synchronisation):
 *   sum over samples of [ forward + backward + forced recompute ] / (dp x pp),
 * each sample's forward through every layer and the head priced as the cost model prices it
 * at cp = 1 (per GPU of a TP group: FLOPs / t), its GEMMs (and head) at the best efficiency of
 * the profile's curves up to context_len tokens (packing can do no better), its attention at
 * the efficiency of its own length; the backward by the profile's time factors; the forced
 * recompute: the fewest layers r of the fullest stage (ceil(L / pp) layers) with which the
 * sample alone in flight fits the cap (model states of the fullest stage, the reserved bytes,
 * its activations), each of the pp stages re-running r layers' forward (r = all when even that
 * does not fit: context parallelism, whose compute is the same). Seconds.
 */
double lt_cost_step_bound(const lt_cost_model *cm, const int64_t *lengths, size_t n, int64_t context_len);

#endif /* LT_COST_H */
