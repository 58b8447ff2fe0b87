/*
 * train/cmd/cmd.h — the interface of the trainer stage's program (execute stored plans over
 * DP x PP (x CP) ranks): its command table (train/cmd/trainer.c), its commands (one file each
 * under train/cmd/) and the helpers they share (train/cmd/common.c): the config's seed, model,
 * context length and thread count, a checkpoint checked against the config, the backend and
 * the communicator of a launched job, the plan file checked against the model and a plan's
 * samples read from the data.
 */
#ifndef LT_TRAIN_CMD_H
#define LT_TRAIN_CMD_H

#include <stdint.h>

#include "lib/cli.h"           /* lt_cli_ctx, lt_cli_program */
#include "lib/error.h"         /* lt_status, lt_error */
#include "lib/model.h"         /* lt_model_shape */
#include "train/io/ckpt.h"     /* lt_ckpt_state */
#include "train/dist/comm.h"   /* lt_comm */
#include "train/model/model.h" /* lt_llama */
#include "train/model/optim.h" /* lt_adamw */
#include "plans/cost/cost.h"   /* lt_cost_model */
#include "plans/store/store.h" /* lt_store, lt_step_plan, lt_sample */
#include "train/io/docs.h"     /* lt_docs */

/* The `trainer` program: its commands (lib/cli.h runs them; train/cmd/trainer.c). */
extern const lt_cli_program trainer_program;

/* ------------------------------------------------------------------ the commands */

int init_command(lt_cli_ctx *ctx);      /* trainer init --out CKPT (train/cmd/init.c) */
int hf_export_command(lt_cli_ctx *ctx); /* trainer export CKPT --hf DIR (train/cmd/init.c) */
int hf_import_command(lt_cli_ctx *ctx); /* trainer import --hf DIR --out CKPT (train/cmd/init.c) */
int eval_command(lt_cli_ctx *ctx);      /* train/cmd/eval.c */
int generate_command(lt_cli_ctx *ctx);  /* train/cmd/generate.c */
int train_command(lt_cli_ctx *ctx);     /* train/cmd/train.c */
int check_command(lt_cli_ctx *ctx);     /* train/cmd/check.c */
/* trainer calibrate --out FILE.ini: a hardware profile of this machine (train/cmd/calibrate.c) */
int calibrate_command(lt_cli_ctx *ctx);

/* ------------------------------------------------------------------ the loss over documents (train/cmd/eval.c) */

/* The summed next-token loss (*loss_sum) and predicted tokens (*predicted) of model m (its
 * whole layers, on its backend) over the documents src[i], i = part, part + parts, ... < n
 * (0 <= part < parts: one DP rank's share), each read from the shards of `docs` as tokens
 * [offset, offset + length) and run as one unit: whole-document causal attention, no
 * gradient. `trainer eval` and the validation loss of `trainer train` (train.eval_every)
 * both use it. Errors name the document. */
lt_status lt_cmd_docs_loss(const lt_llama *m, lt_docs *docs, const lt_sample *src, size_t n, int part, int parts,
                           lt_pool *pool, double *loss_sum, int64_t *predicted, lt_error *err);

/* ------------------------------------------------------------------ shared (train/cmd/common.c) */

/* The seed of parameter initialization and of the training stream: train.seed, else
 * plan.seed (which has a default). */
uint64_t lt_cmd_seed(const lt_cli_ctx *ctx);

/* The config's model (lt_model_from_config). A run that names no model at all (neither
 * --config nor any model.* key) is LT_ERR_USAGE rather than a silent llama-7b. */
lt_status lt_cmd_model_shape(const lt_cli_ctx *ctx, lt_model_shape *shape, lt_error *err);

/* plan.context_len, or 0 when unset (no truncation). */
int64_t lt_cmd_context_len(const lt_cli_ctx *ctx);
/* train.threads (0 = one per CPU). */
int lt_cmd_threads(const lt_cli_ctx *ctx);
/* plan.mlp_chunk (0 = none) of the run's config: train --whole's lt_llama.mlp_chunk (a run of
 * plans takes their config's, what the planner priced). */
int lt_cmd_mlp_chunk(const lt_cli_ctx *ctx);

/* Read checkpoint `ckpt` (moments into opt when non-NULL, state into st when non-NULL);
 * when the config sets [model] keys, the checkpoint's dimensions must match them. */
lt_status lt_cmd_load_model(const lt_cli_ctx *ctx, const char *ckpt, lt_llama *m, lt_adamw *opt, lt_ckpt_state *st,
                            lt_error *err);
/* A launched rank's part of the model (lt_llama_create_part's arguments). */
typedef struct lt_cmd_part {
    int tp, tp_rank;
    lt_llama_part held; /* its stage's layers; HelixPipe's part of its stage (every step a
                           HelixPipe plan); the whole model (auto mixes HelixPipe's steps with
                           others': train/dist/dist.h lt_dist.helix) */
    bool helix;         /* the plans hold a HelixPipe step (its helix sends between any two stages) */
} lt_cmd_part;
/* lt_cmd_load_model for a rank's part: from a checkpoint in parts, only that part is read
 * (lt_ckpt_dist_read_stage) and *is_part says so; any other checkpoint is read whole
 * (*is_part false: the caller takes its part, lt_cmd_rank_part). part NULL: whole. */
lt_status lt_cmd_load_part(const lt_cli_ctx *ctx, const char *ckpt, const lt_cmd_part *part, lt_llama *m,
                           lt_adamw *opt, lt_ckpt_state *st, bool *is_part, lt_error *err);

/* train.backend: NULL in *be for cpu; for cuda the rank's GPU (SLURM_LOCALID, else
 * OMPI_COMM_WORLD_LOCAL_RANK, else 0) opened (train/model/backend.h), or LT_ERR_CONFIG
 * "train.backend = cuda: <lt_cuda_open's reason>" at the key's origin (exit 2). */
struct lt_backend;
lt_status lt_cmd_open_backend(const lt_cli_ctx *ctx, struct lt_backend **be, lt_error *err);
/* The same for a rank of a launched job (comm distributed; NULL or a world of one: as
 * above): the GPU lt_comm_pick_device names, and NCCL attached to comm on its streams
 * (lt_comm_attach_device, collective over the world). The caller lt_comm_finalize's comm
 * before lt_backend_cuda_close (the NCCL communicators use the backend's streams). */
struct lt_comm;
/* any_stage: the GPU's stage channels join any two stages (a run whose plans hold a HelixPipe
 * step, lt_cmd_plans_helix), else neighbours only. */
lt_status lt_cmd_open_backend_on(const lt_cli_ctx *ctx, struct lt_comm *comm, bool any_stage, struct lt_backend **be,
                                 lt_error *err);
/* Whether the plans of db hold a HelixPipe step (its helix sends between any two stages), and
 * *parts whether every step is one: then each rank holds HelixPipe's part of its stage
 * (lt_llama_helix_part); a run that mixes them with other strategies' steps (auto) holds the
 * whole model on every rank (train/dist/dist.h lt_dist.helix). parts may be NULL. */
lt_status lt_cmd_plans_helix(const char *db, bool *helix, bool *parts, lt_error *err);
/* The device arena (lt_backend_cuda_reserve) of a GPU command without plan-based sizing
 * (trainer check, calibrate): `share` of the device's free memory, taken once the model
 * states are on it, so that no pass buffer is a cudaMalloc (and no free a cudaFree, which
 * waits for the whole device) inside a step, as in train --db. The rest stays free for
 * NCCL's buffers and the driver. `what` names the command in the error. */
#define LT_CMD_GPU_ARENA_SHARE 0.85
lt_status lt_cmd_gpu_arena(struct lt_backend *be, double share, const char *what, lt_error *err);
/* For the commands that run on the CPU only (generate, calibrate): LT_OK for cpu; cuda is
 * LT_ERR_CONFIG with the reason it cannot open, or saying the command is CPU-only. */
lt_status lt_cmd_backend(const lt_cli_ctx *ctx, lt_error *err);

/* The distributed engine's communicator when a launcher started this process (mpirun,
 * srun --mpi=pmix: train/dist/comm.h), checked against parallel.dp x pp x tp, with
 * train.comm_timeout_s; *comm = NULL otherwise (one process runs every rank's ops). */
lt_status lt_cmd_comm(const lt_cli_ctx *ctx, lt_comm **comm, lt_error *err);
/* A launched job's rank holds its own part only (DESIGN.md): replace the whole model m (and
 * opt's whole moments, when opt is non-NULL) by this rank's part of them, `held` (its
 * stage's layers, the embedding on the first stage, the final norm and LM head on the last;
 * or HelixPipe's part of its stage), each tensor its TP rank's shard (lt_llama_create_part,
 * lt_llama_copy_shard);
 * with tp > 1 its collectives `ops` over comm's TP group (lt_dist_tp_ops, over NCCL when
 * comm has a device attached; ops must outlive m). A no-op with comm = NULL. */
lt_status lt_cmd_rank_part(lt_comm *comm, lt_llama *m, lt_adamw *opt, lt_tp_ops *ops, const lt_llama_part *held,
                           lt_error *err);
/* A distributed rank's error: printed with the rank's coordinates, then the job ends
 * (lt_comm_abort, exit status 1). A no-op with comm = NULL. */
void lt_cmd_comm_fail(lt_comm *comm, const lt_error *err);

/* Open the plan file `db` into *store and check that model m has the dimensions of the
 * [model] stored with the plans (LT_ERR_CONFIG naming the first that differs and `db`) and
 * that they were built for this job's tensor parallelism tp (parallel.tp, naming both);
 * the store's errors otherwise. *store is set even on a failed check (lt_store_close it). */
lt_status lt_cmd_open_plans(const char *db, const lt_llama *m, int tp, lt_store **store, lt_error *err);
/* The cost model for counting (lt_cost_counts_from_config: no hardware profile, which the
 * counts do not depend on and a compute node may lack) of the config stored in the open
 * plan file `store` (`db` its path, for errors). */
lt_status lt_cmd_plans_counts(lt_store *store, const char *db, lt_cost_model *cm, lt_error *err);
/* The tokens of plan p's samples (out[i], malloc'd: the caller frees each), read from the
 * shards of `docs` by their sources src[i]; errors name the step, sample and source. */
lt_status lt_cmd_load_plan_samples(lt_docs *docs, const lt_step_plan *p, const lt_sample *src, lt_train_sample *out,
                                   lt_error *err);

#endif /* LT_TRAIN_CMD_H */
