/*
 * train/dist/dist.h — what the distributed engine does around a step (DESIGN.md "Trainer
 * engine", "at the end of the step"): which parameters a stage owns, the DP reduction of
 * their gradients (bucketed non-blocking all-reduces), the tied embedding's sum between the
 * first and the last stage, the global gradient norm and clipping, the AdamW update of the
 * owned tensors, and gathering tensors to rank 0 (the oracle, checkpoints' manifests).
 *
 * A rank's model is its part (lt_llama_create_stage): its stage's tensors, the layers its plan ops run, the embedding on the first
 * stage, the final norm and LM head on the last, each its TP rank's shard; a tied embedding
 * lives on both ends, updated identically from the same summed gradient (Megatron's
 * embedding group). Of a whole model a stage owns only those tensors; the others are stale
 * there and never read.
 *
 * Thread-safety: one thread per process (train/dist/comm.h).
 */
#ifndef LT_TRAIN_DIST_H
#define LT_TRAIN_DIST_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/error.h"             /* lt_status, lt_error */
#include "plans/cost/cost.h"       /* lt_shard: the sharding modes the planner prices */
#include "plans/strategies/plan.h" /* lt_step_plan */
#include "train/dist/comm.h"       /* lt_comm */
#include "train/model/model.h"     /* lt_llama */
#include "train/model/optim.h"     /* lt_adamw, lt_optim_config */

typedef struct lt_dist {
    lt_comm *comm;
    int stage, pp, dp_rank, dp;
    int tp, tp_rank;      /* the stage's tensor-parallel group (train/model/model.h lt_llama.tp) */
    float *rep;           /* tp > 1: the replicated tensors' gradients, packed for their TP sum */
    size_t rep_floats;
    int l0, l1;           /* this stage's layers [l0, l1) */
    int n_tensors;
    bool *mine;           /* [n_tensors] the tensors this stage owns (updates) */
    bool *counted;        /* [n_tensors] owned and counted in the global norm here (a tied
                             embedding on the first stage only) */
    size_t bucket_floats; /* all-reduce bucket size */
    /* the owned tensors as ranges of the buffer, and as one flat run of owned_floats */
    size_t (*range)[2];
    int n_ranges;
    size_t owned_floats;
    /* Sharded data parallelism (parallel.shard, plans/cost/cost.h lt_shard; off at dp = 1):
     * DP rank r updates flat elements [displs[r], displs[r] + counts[r]) and holds only their
     * AdamW moments (m, v); the others' come by all-gather. zero2 releases the gradients
     * between steps, fsdp the weights too, keeping its block of them (ps) */
    lt_shard shard;
    bool sharded;         /* shard != none and dp > 1 */
    int *counts, *displs; /* [dp] */
    bool inplace;         /* the owned elements are one range from 0 (a rank's part): the
                             collectives run on the buffers themselves, no scratch */
    float *flat;          /* [owned_floats] scratch, where not inplace */
    float *m, *v;         /* [counts[dp_rank]] this rank's moments */
    float *ps;            /* fsdp: [counts[dp_rank]] this rank's block of the weights */
    bool released;        /* lt_dist_release ran, lt_dist_unshard not yet */
    /* the step's all-reduces in flight (posted layer by layer during the last backward) */
    lt_comm_req **req;
    size_t n_req, cap_req;
    size_t (*rs_move)[3]; /* sharded, per req: the range's start, this rank's place and count */
    int *rs_counts;       /* sharded, per req: [dp] the range's per-rank counts (MPI reads them
                             until the request completes) */
    /* fsdp in place: the weights gathered layer by layer as the step first needs them
     * (lt_dist_layer_weights), the next layer's all-gather posted meanwhile */
    bool per_layer, layers_pending;
    bool *whole;          /* [layers] layer l's weights whole this step */
    lt_comm_req *ag_req;  /* the all-gather in flight, of layer ag_layer (-1: none) */
    int ag_layer;
    int *ag_counts, *ag_displs; /* [dp] its counts and displacements */
    bool *layer_posted;   /* [layers] */
    float *grads;         /* the buffer they reduce */
    bool device_grads;    /* grads are device memory: the reductions go over NCCL */
    /* A run whose plans mix HelixPipe's steps (layer parts: a stage runs the pre- and
     * post-attention of some layers and the attention of any) with other strategies' (auto),
     * seen as a model holding every layer on a rank of a pipeline (pp > 1): every rank holds
     * the whole model, each tensor owned (updated, counted, checkpointed) by the stage the
     * helix puts its part on (lt_llama_helix_stage); the gradients summed over every rank
     * after the step (no per-layer posting), the updated tensors sent from their owners to
     * the pipeline's other stages. Any plan of the run executes on it. Under TP the same with
     * this TP rank's shard of the whole model: the sums over its DP ranks and stages, then
     * the replicated tensors' over TP. On the GPU the sums and the exchange go over NCCL
     * (lt_dist_helix_weights). shard = none (refused otherwise, by name). A run of
     * HelixPipe's plans only holds its stage's part instead (helix_parts). */
    bool helix;
    /* A run of HelixPipe's plans only: the rank holds HelixPipe's part of its stage
     * (train/model/model.h lt_llama.helix_pp) and owns every tensor of it; the Q/K/V weights
     * of the layers whose attention it runs without holding them come with the activations
     * and their gradients go back (train/exec), so the step ends as any stage's: the sums
     * over its DP ranks (a tied embedding and its head are both on stage 0), after the step
     * (a layer's Q/K/V gradients come from the attentions' stages). Sharded as any stage's
     * part (every mode; in place): fsdp gathers a layer's tensors held here as the first
     * part op of that layer needs them, the next layer with tensors here prefetched. */
    bool helix_parts;
    const lt_llama *model;
    /* sharded on the GPU (zero1 only: Megatron's distributed optimizer): dp equal blocks of
     * `block` floats (the last ones padded; counts / displs above are their unpadded parts),
     * this rank's fp32 master and moments of its block on the device; the gradients and the
     * bf16 copy are device buffers of dp x block elements (lt_dist_device_floats) */
    size_t block;
    float *dmaster, *dm, *dv;
    struct lt_backend *be; /* ... their backend */
} lt_dist;

/* The plan's layout (DP ranks, counting a static CP pipeline's members, x stages) against
 * the job's; a mismatch names both. Every rank checks it before anything else of a step
 * (lt_dist_init, lt_dist_check_plan, lt_exec_step_rank), so that each reports the layout,
 * not a consequence of it. */
lt_status lt_dist_check_layout(const lt_step_plan *p, const lt_comm_layout *l, lt_error *err);

/* The layers [*l0, *l1) plan p runs on `stage` (the same in every pipeline), or
 * LT_ERR_INPUT naming the step and stage when the pipelines split the layers differently;
 * for a HelixPipe plan (layer parts) every layer (lt_dist.helix). */
lt_status lt_dist_stage_layers(const lt_step_plan *p, int stage, int *l0, int *l1, lt_error *err);

/* The ownership of this rank's stage from plan p (the layers of its ops on that stage in
 * every pipeline: they must agree). Errors: LT_ERR_INPUT naming the step and stage when the
 * pipelines split the layers differently, LT_ERR_NOMEM. */
lt_status lt_dist_init(lt_dist *d, lt_comm *c, const lt_llama *m, const lt_step_plan *p, double bucket_mb,
                       lt_shard shard, lt_error *err);
/* Sharded: take this rank's shard of opt's (whole) moments, then free opt's arrays (opt->t
 * stays: the step count). Without sharding a no-op. */
lt_status lt_dist_take_moments(lt_dist *d, lt_adamw *opt, lt_error *err);
/* Sharded: the whole moments of the owned tensors (every DP rank's shard, by all-gather)
 * into out->m / out->v (new arrays of n_params floats; the rest zero) for a checkpoint.
 * Collective over the DP ranks of the stage. */
lt_status lt_dist_gather_moments(const lt_dist *d, const lt_llama *m, const lt_adamw *opt, lt_adamw *out,
                                 lt_error *err);
/* Parameters stage `stage` of plan p holds (its layers; the embedding on the first stage; the
 * final norm and LM head on the last; a tied embedding on both ends; a HelixPipe plan's:
 * HelixPipe's part of the stage with helix_parts, lt_dist.helix_parts, else the whole model,
 * lt_dist.helix), 0 on error. m: a table of the whole model (its TP rank's shapes). */
size_t lt_dist_stage_params(const lt_llama *m, const lt_step_plan *p, int stage, bool helix_parts);

/* LT_OK when plan p gives this stage the layers it owns (a later step must not move layers
 * between stages); else LT_ERR_INPUT naming the step. */
lt_status lt_dist_check_plan(const lt_dist *d, const lt_step_plan *p, lt_error *err);
void lt_dist_free(lt_dist *d); /* NULL-safe; zeroed */

/* Sum the owned tensors' gradients over the DP ranks (buckets of bucket_floats, all posted,
 * then waited), then the tied embedding over the first and last stage. Sharded (parallel.shard): the tied
 * sum first, then a reduce-scatter: only this rank's shard of grads is summed (and read
 * after). */
lt_status lt_dist_reduce_grads(lt_dist *d, const lt_llama *m, float *grads, lt_error *err);

/* Post the DP all-reduce of layer `layer`'s tensors now (their gradients are final: the
 * lt_exec_hooks.grads_final of lt_exec_step_rank, ctx = d after lt_dist_bind), so it runs
 * while the backward goes on; lt_dist_reduce_grads posts the rest and waits for all.
 * Sharded on the CPU: the layer's replicated tensors summed over the TP group first, then
 * its reduce-scatter posted (each DP rank receiving the layer range's intersection with its
 * block). Sharded on the GPU: nothing (one reduce-scatter after the step). */
lt_status lt_dist_layer_final(void *d, int layer, lt_error *err);
/* Which gradient buffer lt_dist_layer_final reduces, for model m. */
void lt_dist_bind(lt_dist *d, const lt_llama *m, float *grads);
/* The CUDA backend (a model whose backend is not host memory, seen by lt_dist_init): the
 * gradient buffers given to lt_dist_bind, lt_dist_layer_final and lt_dist_reduce_grads are
 * device memory (fp32, the tensor table's layout), reduced with lt_comm_dev_iallreduce in
 * the same buckets and order as on the host (the communicator must have a device
 * attached). Clipping and AdamW on the device are the backend's (kernels/cuda.h); only
 * their scalars cross ranks, over MPI. Sharded, zero1 only: the gradients reduce-scattered
 * over NCCL in equal blocks, each DP rank's block updated with its own fp32 master and
 * moments, the bf16 copy all-gathered (lt_backend_cuda_upload_sharded); zero2 and fsdp are
 * refused by lt_dist_init (LT_ERR_CONFIG). */
void lt_dist_set_device_grads(lt_dist *d, bool on);
/* The elements the device gradient buffer and bf16 copy need for model m on this rank's
 * layout and shard mode (dp x the block when sharded on the GPU, else n_params): what
 * train/cmd allocates before lt_dist_init. */
size_t lt_dist_device_floats(const lt_llama *m, int dp, lt_shard shard);
/* Device sharded: the fp32 master whole into m->params (each DP rank's block, gathered over
 * MPI), for a checkpoint. Collective over the stage's DP ranks. Otherwise a no-op. */
lt_status lt_dist_download(const lt_dist *d, lt_llama *m, lt_error *err);

/* The global L2 norm of the gradients (every owned tensor once, summed over the stages) and
 * torch's clip_grad_norm_ with max_norm (<= 0: only measure) on the owned tensors. */
lt_status lt_dist_clip(const lt_dist *d, const lt_llama *m, float *grads, double max_norm, double *norm,
                       lt_error *err);

/* HelixPipe on the GPU (d->helix; the update of the owned tensors done on the device by
 * lt_backend_cuda_adamw_tensors): each tensor's updated fp32 master from its owner to the
 * pipeline's other stages over NCCL (the others zeroed, then summed: the owner's bits), then
 * the bf16 copy rewritten from it. LT_OK at once outside a HelixPipe run. */
struct lt_backend;
lt_status lt_dist_helix_weights(const lt_dist *d, struct lt_backend *be, const lt_llama *m, lt_error *err);

/* One AdamW step of the owned tensors (lt_adamw_step_tensors); sharded: of this rank's
 * shard, then the updated parameters all-gathered over the DP ranks, except under fsdp:
 * its block is kept and the whole is gathered before the next use (lt_dist_unshard). */
lt_status lt_dist_adamw(lt_dist *d, lt_adamw *o, const lt_llama *m, float *params, const float *grads,
                        double lr, const lt_optim_config *oc, lt_error *err);

/* Between steps (after the update and any checkpoint), sharded: the pages of the step's
 * scratch go back to the system; zero2 and fsdp those of the whole gradients (grads, m's
 * layout) too; fsdp keeps its block of the weights and returns the pages of their whole
 * (params) as well (madvise MADV_DONTNEED: the buffers stay mapped and read as zeros).
 * Without sharding a no-op. */
lt_status lt_dist_release(lt_dist *d, const lt_llama *m, float *params, float *grads, lt_error *err);
/* Before a checkpoint and at the end of a run: fsdp all-gathers the weights from the DP
 * ranks' blocks into params (from lt_dist_init on, the weights are sharded and each update
 * leaves the whole stale), waiting for any layer still in flight. Otherwise a no-op.
 * Collective over the stage's DP ranks. */
lt_status lt_dist_unshard(lt_dist *d, const lt_llama *m, float *params, lt_error *err);
/* Before each step's first forward: fsdp gathers the tensors outside the layers (the
 * embedding, the final norm and head) now and posts the all-gather of the stage's first
 * layer; each layer's weights are then waited for as a pass first needs them
 * (lt_dist_layer_weights, the lt_exec_hooks.weights_needed of lt_exec_step_rank, ctx = d),
 * which posts the next layer's (FSDP2's prefetch, one layer ahead, in layer order on every
 * DP rank). Without per-layer gathering (not in place) the weights are gathered whole
 * here; without fsdp a no-op. */
lt_status lt_dist_step_begin(lt_dist *d, const lt_llama *m, float *params, lt_error *err);
lt_status lt_dist_layer_weights(void *d, int layer, lt_error *err);
/* The model-state bytes this rank holds between steps (after lt_dist_release): weights,
 * gradients and moments as the mode keeps them, of its n_params parameters; what
 * lt_cost_model_states_held_bytes prices. */
double lt_dist_held_bytes(const lt_dist *d, size_t n_params);

/* Rank 0 receives into `whole` (a buffer laid out as the whole model `full`, tp = 1) the
 * owned tensors of every stage from its DP rank 0, every TP rank's shard in its place (the
 * tensors a stage owns are overwritten; with pp = 1 and tp = 1, rank 0 owns all). Each
 * rank sends from buf, laid out as its own m. Collective: every rank calls it; full and
 * whole matter on rank 0 only. */
lt_status lt_dist_gather(const lt_dist *d, const lt_llama *m, const float *buf, const lt_llama *full, float *whole,
                         lt_error *err);

/* Tensor parallelism: every TP rank of the stage gets in `whole` (laid out as the whole
 * model `full`) the whole of each tensor it owns, from the shards in buf (m's layout) of
 * the group's ranks (an all-gather per tensor). Collective over the TP group. How a
 * stage's checkpoint part is written whatever tp: the same bytes as at tp = 1. */
lt_status lt_dist_tp_assemble(const lt_dist *d, const lt_llama *m, const float *buf, const lt_llama *full,
                              float *whole, lt_error *err);

/* The tensor-parallel collectives of model.h (lt_tp_ops) over c's TP group: how the
 * executor's model shard talks to its group. Host memory over MPI, or with `device` device
 * memory over NCCL (lt_comm_dev_tp_*). */
void lt_dist_tp_ops(lt_comm *c, bool device, lt_tp_ops *ops);

#endif /* LT_TRAIN_DIST_H */
