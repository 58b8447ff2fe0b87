/*
 * train/cmd/train.c — `trainer train`: the optimizer loop, over one of two batch sources.
 *   --db PLANS  the stored plans, step by step in their order (DESIGN.md: the plans are the
 *               single source of truth): each step's samples read from the shards by their
 *               source, the plan executed in this process (train/exec/exec.h);
 *   --whole     whole documents of a dataprep output: each step takes the next
 *               train.batch_docs documents in `dataprep cat` order (wrapping around: a new
 *               epoch), each truncated at plan.context_len and run as its own unit.
 * Either way the loss is normalized by the step's predicted tokens (train/model/model.h), then
 * global-norm clipping, the warmup + cosine learning rate and AdamW (train/model/optim.h).
 * With --db the schedule's length is the stored steps: train.steps (else plan.steps) may be
 * fewer (the run stops there, where the cosine ends) but not more (refused: a schedule
 * longer than the plans would never decay to train.min_lr); with neither key set it is the
 * stored step count.
 *
 * Validation (--db, train.eval_every = N > 0): before the first step, every N steps and
 * after the last one, the mean next-token loss over the first train.eval_docs held-out
 * documents of the plan file (data.holdout; lt_store_heldout), each whole from its start,
 * no gradient, with the current weights (lt_cmd_docs_loss, the code of `trainer eval
 * --heldout`): `val=` on the step's progress line (a line `step=0 val=...` before the first
 * step), a validation line in metrics.jsonl, the second curve of loss.svg. The documents
 * run through the plan executor as a forward-only scoring plan (lt_plan_scoring) of the
 * job's layout: document i on DP rank i mod dp, each stage's layers on its ranks, each TP
 * rank its heads, so every layout and shard mode scores its model where it lives (fsdp
 * gathers its weights first, as for a checkpoint). A plan file without held-out documents
 * (an older planner, or data.holdout = 0) is refused.
 *
 * Checkpoints go to --out DIR (else train.checkpoint_dir, else WORK_DIR/NAME/checkpoints)
 * every train.checkpoint_every steps and at the end, the newest train.keep_checkpoints
 * kept. --resume continues from the newest one there: the data position, step, optimizer
 * moments and random stream are in the checkpoint, so a resumed run is bit-identical to
 * one that never stopped (tests/train/cli.sh compares the files). With --db, the step count
 * is the position in the stored steps, and each step appends one JSON object to
 * OUT/metrics.jsonl; OUT/loss.svg (the loss curve) is rewritten at every checkpoint and at
 * the end.
 *
 * Under a launcher (mpirun, srun --mpi=pmix; train/dist/comm.h) --db runs as one rank of the
 * distributed engine: this process executes the ops of its stage of its DP rank's pipeline
 * (lt_exec_step_rank), the gradients are summed over the DP ranks (train/dist/dist.h), the
 * global norm clipped and each stage's tensors updated; rank 0 prints, keeps the metrics
 * and writes the measured times; checkpoints are written in parts, one per stage, with a
 * manifest last (train/io/ckpt.h).
 *
 * SIGUSR2 (Slurm's warning before preemption: sbatch --signal=B:USR2@T, scancel --signal)
 * finishes the step under way, writes a checkpoint and exits with status 75 (EX_TEMPFAIL),
 * which jobctl turns into a requeue; --resume continues from it. Distributed, the ranks
 * agree on the signal after each step (an all-reduce), so they stop at the same step.
 */
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/cli.h"             /* lt_cli_option_value */
#include "lib/config.h"          /* lt_config_get_* */
#include "lib/files.h"           /* lt_mkdir_p */
#include "lib/log.h"             /* LT_INFO */
#include "train/io/ckpt.h"       /* lt_ckpt_* */
#include "train/cmd/cmd.h"       /* train_command, lt_cmd_* */
#include "train/cpu/threads.h"   /* lt_cpu_init */
#include "train/dist/dist.h"     /* lt_dist_* */
#include "train/io/docs.h"       /* lt_docs_* */
#include "train/model/backend.h" /* lt_backend_cuda_*: train.backend = cuda */
#include "train/exec/exec.h"     /* lt_exec_step */
#include "train/io/metrics.h"    /* lt_metrics_append, lt_metrics_svg */
#include "train/model/optim.h"   /* lt_optim_config, lt_adamw */
#include "plans/cost/cost.h"     /* lt_shard, lt_cost_counts_from_config: model states as the planner prices them */
#include "plans/store/store.h"   /* lt_store_open, lt_store_get_step, lt_store_steps */

typedef struct train_args {
    const char *data, *out, *init, *db;
    long long steps; /* stop when this many steps are done; 0 = the schedule's total */
    bool whole, resume;
    bool resume_if_any; /* --resume-if-any: resume when there is a checkpoint, else start fresh */
} train_args;

static int parse(lt_cli_ctx *ctx, train_args *a) {
    memset(a, 0, sizeof *a);
    for (int i = 1; i < ctx->argc; i++) {
        int missing = 0;
        const char *v;
        char *end;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--data", &missing))) a->data = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--db", &missing))) a->db = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--out", &missing))) a->out = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--init", &missing))) a->init = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--steps", &missing))) {
            a->steps = strtoll(v, &end, 10);
            if (*end || a->steps < 1) return lt_cli_usage(ctx, "--steps wants a positive count, got '%.100s'", v);
        } else if (missing) return lt_cli_usage(ctx, "%s needs a value", ctx->argv[i]);
        else if (strcmp(ctx->argv[i], "--whole") == 0) a->whole = true;
        else if (strcmp(ctx->argv[i], "--resume") == 0) a->resume = true;
        else if (strcmp(ctx->argv[i], "--resume-if-any") == 0) a->resume = a->resume_if_any = true;
        else if (ctx->argv[i][0] == '-') return lt_cli_unknown_option(ctx, ctx->argv[i]);
        else return lt_cli_usage(ctx, "unexpected argument '%.200s'", ctx->argv[i]);
    }
    if (!a->whole && !a->db)
        return lt_cli_usage(ctx, "what to train on? give --db PLANS.db (stored plans) or --whole (whole documents "
                                 "of --data DIR)");
    if (a->whole && a->db) return lt_cli_usage(ctx, "--whole and --db exclude each other");
    if (!a->data)
        return lt_cli_usage(ctx, a->db ? "which data? give --data DIR (the dataprep output the plans were built from)"
                                       : "which documents? give --data DIR (a dataprep output)");
    if (a->init && a->resume) return lt_cli_usage(ctx, "--init and --resume exclude each other");
    if (a->resume_if_any && a->whole) return lt_cli_usage(ctx, "--resume-if-any goes with --db (a jobctl run)");
    return 0;
}

/* The checkpoint directory (malloc'd). */
static char *checkpoint_dir(const lt_cli_ctx *ctx, const train_args *a) {
    if (a->out) return strdup(a->out);
    const char *d = lt_config_get_string(ctx->config, "train", "checkpoint_dir");
    if (d) return strdup(d);
    const char *work = lt_config_get_string(ctx->config, "run", "work_dir");
    const char *name = lt_config_get_string(ctx->config, "run", "name");
    size_t n = strlen(work ? work : "runs") + strlen(name ? name : "longtail") + 16;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s/checkpoints", work ? work : "runs", name ? name : "longtail");
    return p;
}

/* The model, optimizer and state to start from: a resumed checkpoint, an --init one, or a
 * fresh initialization from the config. */
static lt_status start_state(const lt_cli_ctx *ctx, const train_args *a, const char *dir, const lt_cmd_part *part,
                             lt_llama *m, lt_adamw *opt, lt_ckpt_state *st, bool *is_part, lt_error *err) {
    memset(st, 0, sizeof *st);
    *is_part = false;
    if (a->resume) {
        char *latest = NULL;
        lt_status s = lt_ckpt_latest(dir, &latest, err);
        if (s != LT_OK) return s;
        if (latest) {
            s = lt_cmd_load_part(ctx, latest, part, m, opt, st, is_part, err);
            if (s == LT_OK) LT_INFO("resuming from %s at step %" PRId64, latest, st->step);
            free(latest);
            return s;
        }
        if (!a->resume_if_any) {
            lt_fail(err, LT_ERR_USAGE, dir, "--resume: no checkpoint to resume from");
            lt_error_hint(err, "start without --resume (or give --init CKPT)");
            return LT_ERR_USAGE;
        }
        LT_INFO("no checkpoint in %s yet: starting from step 0", dir); /* --resume-if-any */
    }
    int64_t seed;
    if (lt_config_get_int(ctx->config, "train", "seed", &seed, NULL) != LT_OK &&
        lt_config_get_int(ctx->config, "plan", "seed", &seed, err) != LT_OK)
        return LT_ERR_CONFIG;
    lt_rng_seed(&st->rng, (uint64_t)seed);
    lt_status s;
    if (a->init) {
        lt_ckpt_state ignored;
        s = lt_cmd_load_part(ctx, a->init, part, m, NULL, &ignored, is_part, err);
    } else { /* a part initialized alone holds the values of the whole's (lt_llama_init is layout-free) */
        lt_model_shape shape;
        s = lt_cmd_model_shape(ctx, &shape, err); /* no model named at all: a usage error */
        if (s == LT_OK && part)
            s = lt_llama_create_part(m, &shape, part->tp, part->tp_rank, &part->held, err);
        else if (s == LT_OK) s = lt_llama_create(m, &shape, err);
        if (s == LT_OK) lt_llama_init(m, (uint64_t)seed);
        *is_part = s == LT_OK && part;
    }
    if (s == LT_OK) s = lt_adamw_init(opt, m->n_params, err);
    return s;
}

/* What one step trained on, for its progress line and the metrics. */
typedef struct step_result {
    double loss_sum;      /* summed cross-entropy (divide by n_predicted) */
    int64_t n_predicted;  /* the loss denominator */
    int64_t tokens;       /* tokens of the step's samples */
    uint64_t plan_step;   /* --db: the stored step executed */
    double predicted_ms;  /* --db: the plan's predicted step time */
    double predicted_peak, measured_peak; /* --db: the plan's peak bytes of a stage; measured: the meter's with
                                             the states counted (the CPU), the arena's peak + the states
                                             allocated (the GPU) */
    double device_used;                   /* the GPU: rank 0's device memory in use (cudaMemGetInfo) */
} step_result;

/* The loop's state and the batch source (--whole: docs; --db: store + docs). */
typedef struct train_loop {
    const lt_llama *m;
    bool helix_parts;  /* every stored step a HelixPipe plan: a rank of a launched run holds its
                          stage's part (lt_cmd_plans_helix), what a stage's measured model
                          states count, in one process too */
    lt_llama_views *g; /* gradient views */
    float *grads;      /* ... of this buffer */
    double bucket_mb;  /* train.bucket_mb */
    lt_pool *pool;
    lt_docs *docs;
    int64_t batch_docs;
    /* --whole */
    lt_train_sample *samples;
    int32_t **tokens;
    lt_train_slice *slices;
    lt_train_unit *units;
    int n;
    /* --db */
    lt_store *store;
    const char *db_path;
    uint64_t *steps; /* stored step numbers, in order */
    size_t n_steps;
    /* distributed (--db under a launcher) */
    lt_comm *comm;
    lt_dist dist;
    bool dist_ready, rank0;
    lt_shard shard;     /* parallel.shard */
    lt_cost_model held; /* counts only, the CPU trainer's bytes: model states between steps */
    bool held_shown, gpu_states_shown;
    bool gpu_sharded; /* train.backend = cuda with parallel.shard = zero1 at dp > 1 */
    double dp_worst; /* the DP bytes each step sent against lt_cost_dp_bytes: largest error */
    int dp_steps;
    lt_adamw *opt; /* the optimizer (sharded: it hands its moments to dist) */
    lt_backend *be; /* train.backend = cuda: the GPU (NULL: the CPU fp32 reference) */
    lt_llama table; /* distributed: the whole model's tensor table (no parameters), at this
                       rank's tp: every stage's parameter count for the measured memory */
    /* validation (train.eval_every > 0, --db): the held-out documents scored */
    int64_t eval_every;
    lt_sample *val_docs;
    size_t n_val;
    int eval_dp, eval_pp; /* the scoring plan's layout: the job's, or in one process the plans' */
} train_loop;

/* The exit status of a run stopped by SIGUSR2 after its checkpoint (EX_TEMPFAIL): jobctl
 * requeues the job. */
#define PREEMPTED_EXIT 75
static volatile sig_atomic_t preempt_signal;
static void on_usr2(int sig) {
    (void)sig;
    preempt_signal = 1;
}

static void batch_clear(train_loop *b) {
    for (int i = 0; i < b->n; i++) free(b->tokens[i]);
    b->n = 0;
}

/* --whole: the next batch_docs documents, one unit each, into the gradients. */
static lt_status whole_step(train_loop *L, lt_ckpt_state *st, step_result *r, lt_error *err) {
    lt_status s = LT_OK;
    uint64_t count = lt_docs_count(L->docs);
    for (int i = 0; i < L->batch_docs; i++) {
        int len;
        s = lt_docs_get(L->docs, st->data_pos, &L->tokens[i], &len, err);
        if (s != LT_OK) break;
        L->samples[i] = (lt_train_sample){L->tokens[i], len};
        L->slices[i] = (lt_train_slice){i, 0, len};
        L->units[i] = (lt_train_unit){&L->slices[i], 1};
        L->n = i + 1;
        if (++st->data_pos == count) st->data_pos = 0, st->data_epoch++;
    }
    if (s == LT_OK) {
        /* one-token documents predict nothing: keep them out of the units */
        lt_train_unit *units = L->units;
        int n_units = 0;
        for (int i = 0; i < L->n; i++)
            if (L->samples[i].len >= 2) units[n_units++] = L->units[i];
        lt_batch batch = {L->samples, L->n};
        r->n_predicted = lt_batch_predicted_tokens(&batch);
        for (int i = 0; i < L->n; i++) r->tokens += L->samples[i].len;
        if (r->n_predicted > 0)
            s = lt_llama_step_units(L->m, &batch, units, n_units, (float)(1.0 / (double)r->n_predicted), L->g, NULL,
                                    &r->loss_sum, L->pool, err);
    }
    batch_clear(L);
    return s;
}

/* The working memory the planner leaves out, as a share of the arena: a layer's forward and
 * backward scratch, the kernels' scratch buffer, the units' bound ids, fragmentation. */
#define GPU_ARENA_SLACK 0.10
#define GPU_ARENA_SLACK_MIN (256.0 * 1048576.0)

/* The model-state bytes the plans priced for what this process holds (a rank: its stage;
 * one process: every stage), which live outside the arena (allocated once at upload). */
static double planned_states(const train_loop *L) {
    const lt_comm_layout *lay = L->comm ? lt_comm_layout_of(L->comm) : NULL;
    if (!L->held.pp) /* no stage table: the process's parameters at the trainer's bytes */
        return (double)L->m->n_params * (L->held.weight_bytes + L->held.grad_bytes + L->held.optim_bytes);
    if (lay) return lt_cost_model_states_bytes(&L->held, lay->stage);
    double v = 0;
    for (int g = 0; g < L->held.pp; g++) v += lt_cost_model_states_bytes(&L->held, g);
    return v;
}

/* The device arena (kernels/arena.h; issue 20 "Memory"): one block per process that every
 * pass allocation of the run comes from (lt_backend_cuda_reserve), sized before the first
 * step from the plan's memory model: the largest predicted need over the steps this run
 * executes [from, to) (a rank: its stage's predicted peak; one process: a pipeline's stages
 * together), less the model states the prediction includes (they live outside the arena:
 * counted once, not twice, about 18 bytes a parameter), plus the fused head's logits block
 * in the backend's elements and GPU_ARENA_SLACK of the activations (at least
 * GPU_ARENA_SLACK_MIN) for the working memory the planner leaves out. A plan that would
 * not fit fails here, before any step, naming the stage, the predicted and the free GiB; a
 * step that outgrows the arena fails with the arena's LT_ERR_NOMEM. */
static lt_status gpu_arena(train_loop *L, int64_t from, int64_t to, lt_error *err) {
    const lt_comm_layout *lay = L->comm ? lt_comm_layout_of(L->comm) : NULL;
    double need = 0, pred = 0;
    uint64_t at = 0;
    int at_stage = 0, at_pipe = 0;
    lt_status s = LT_OK;
    for (int64_t i = from; s == LT_OK && i < to; i++) {
        lt_step_plan p;
        lt_step_plan_init(&p);
        lt_sample *src = NULL;
        s = lt_store_get_step(L->store, L->steps[i], &p, &src, err);
        for (size_t r = 0; s == LT_OK && r < p.n_ranks; r++) {
            const double *peak = p.ranks[r].stage_peak_mem;
            int first = p.ranks[r].dp_rank, n = p.ranks[r].cp > 1 ? p.ranks[r].cp : 1, g0 = 0;
            double v = 0;
            if (!peak) continue;
            if (lay) { /* this rank's stage, in the pipeline holding its DP rank */
                if (lay->dp_rank < first || lay->dp_rank >= first + n) continue;
                v = peak[lay->stage], g0 = lay->stage;
            } else { /* every stage of the pipeline on the one GPU */
                for (int g = 0; g < p.pp; g++) {
                    v += peak[g];
                    if (peak[g] > peak[g0]) g0 = g;
                }
            }
            if (v > pred) pred = v, at = p.step, at_stage = g0, at_pipe = first;
        }
        free(src);
        lt_step_plan_free(&p);
    }
    if (s != LT_OK) return s;
    if (!(pred > 0))
        return lt_fail(err, LT_ERR_INPUT, L->db_path, "steps %lld..%lld predict no stage peak memory: the device "
                       "arena cannot be sized from them", (long long)from, (long long)to - 1);
    const lt_llama *m = L->m;
    double states = planned_states(L), acts = pred > states ? pred - states : 0.0;
    double slack = acts * GPU_ARENA_SLACK > GPU_ARENA_SLACK_MIN ? acts * GPU_ARENA_SLACK : GPU_ARENA_SLACK_MIN;
    need = acts + slack +
           (double)lt_fused_head_rows(m->shape.vocab) * (double)lt_backend_logits_ld(L->be, m->shape.vocab) *
               (double)L->be->act_bytes; /* the logits rows padded (train/model/pass.c's head) */
    char what[200];
    if (lay)
        snprintf(what, sizeof what, "stage %d of pipeline %d, plan step %llu (the largest of steps %lld..%lld)",
                 lay->stage, lay->dp_rank, (unsigned long long)at, (long long)from, (long long)to - 1);
    else
        snprintf(what, sizeof what, "pipeline %d's stages on one GPU (stage %d the largest), plan step %llu (the "
                 "largest of steps %lld..%lld)", at_pipe, at_stage, (unsigned long long)at, (long long)from,
                 (long long)to - 1);
    s = lt_backend_cuda_reserve(L->be, (size_t)need, what, err);
    if (s == LT_OK && L->rank0)
        LT_INFO("device arena: %.3f GiB (the plans' largest predicted need %.3f GiB less its model states %.3f GiB, "
                "which live outside it, + %.3f GiB slack + the head's logits block)",
                need / 1073741824.0, pred / 1073741824.0, states / 1073741824.0, slack / 1073741824.0);
    return s;
}

static int op_key_cmp(const void *a, const void *b) {
    const lt_measured_op *x = a, *y = b;
    if (x->dp_rank != y->dp_rank) return x->dp_rank < y->dp_rank ? -1 : 1;
    if (x->stage != y->stage) return x->stage < y->stage ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* One row per op: a context-parallel group's op (static CP, DP-Merge) runs on every member
 * rank, and each reports it under the plan's (dp_rank, stage, seq). The op spans from the
 * first member's start to the last member's finish (its successors wait for all of them).
 * Sorts t[0..n) by key; returns the rows kept. */
static size_t merge_group_ops(lt_measured_op *t, size_t n) {
    if (n < 2) return n;
    qsort(t, n, sizeof *t, op_key_cmp);
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        if (op_key_cmp(&t[k], &t[i]) == 0) {
            if (t[i].start_s < t[k].start_s) t[k].start_s = t[i].start_s;
            if (t[i].finish_s > t[k].finish_s) t[k].finish_s = t[i].finish_s;
        } else {
            t[++k] = t[i];
        }
    }
    return k + 1;
}

/* The GPU's measured peak of a step, per stage the largest of its ranks: the arena's peak
 * since the step began (every pass buffer, the kernels' scratch, the bound ids) plus the
 * model states as allocated (lt_backend_cuda_states_bytes), device memory both, not the
 * host meter's count. One process holding a pipeline's stages has one arena for all: its
 * measure is the whole, stored for a one-stage plan only (the meter's per stage stays
 * otherwise). *device_used: rank 0's device memory in use, cudaMemGetInfo (the context,
 * cuBLASLt's workspace and the arena's whole reservation included). */
static lt_status gpu_measured(train_loop *L, lt_exec_stats *es, double *peak, double *device_used, lt_error *err) {
    double mine = (double)lt_backend_cuda_peak(L->be) + (double)lt_backend_cuda_states_bytes(L->be);
    size_t free_b = 0, total_b = 0;
    lt_status s = lt_backend_cuda_mem(L->be, &free_b, &total_b, err);
    if (s != LT_OK) return s;
    *device_used = (double)(total_b - free_b);
    int n = es->n_stages;
    if (!L->comm && n != 1) return LT_OK;
    double *v = calloc((size_t)n + 1, sizeof *v);
    if (!v) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    int stage = L->comm ? lt_comm_layout_of(L->comm)->stage : 0;
    if (stage < n) v[stage] = mine;
    if (L->comm) s = lt_comm_allreduce(L->comm, LT_COMM_WORLD, v, (size_t)n, LT_COMM_F64, true, err);
    for (int g = 0; s == LT_OK && L->rank0 && g < n; g++) {
        es->stage_peak_bytes[g] = (size_t)v[g];
        if (g == 0 || v[g] > *peak) *peak = v[g];
    }
    free(v);
    return s;
}

/* --db: stored step number st->step of the plan file, executed, into the gradients. */
static lt_status plan_step(train_loop *L, lt_ckpt_state *st, step_result *r, lt_error *err) {
    uint64_t step = L->steps[st->step];
    lt_step_plan p;
    lt_step_plan_init(&p);
    lt_sample *src = NULL;
    lt_train_sample *smp = NULL;
    lt_status s = lt_store_get_step(L->store, step, &p, &src, err);
    if (s == LT_OK && !(smp = calloc(p.n_samples + 1, sizeof *smp))) s = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    if (s == LT_OK) s = lt_cmd_load_plan_samples(L->docs, &p, src, smp, err);
    lt_exec_stats es = {0};
    if (L->be) lt_backend_cuda_reset_peak(L->be); /* the arena's peak of this step */
    if (s == LT_OK && L->comm) {
        if (L->dist_ready) {
            s = lt_dist_check_plan(&L->dist, &p, err);
        } else {
            s = lt_dist_init(&L->dist, L->comm, L->m, &p, L->bucket_mb, L->shard, err);
            if (s == LT_OK) s = lt_dist_take_moments(&L->dist, L->opt, err); /* sharded: this rank's shard only */
            if (s == LT_OK && L->rank0 && L->dist.sharded)
                LT_INFO("parallel.shard = %s: each DP rank holds the AdamW moments of 1/%d of its stage's parameters%s",
                        lt_shard_name(L->dist.shard), L->dist.dp,
                        L->dist.shard == LT_SHARD_FSDP    ? ", and between steps 1/dp of its weights, no gradients"
                        : L->dist.shard == LT_SHARD_ZERO2 ? ", and no gradients between steps"
                                                          : "");
            L->dist_ready = s == LT_OK;
        }
        lt_exec_hooks hooks = {.ctx = &L->dist, .grads_final = lt_dist_layer_final,
                               .weights_needed = L->dist.per_layer ? lt_dist_layer_weights : NULL};
        /* fsdp: the weights outside the layers now, each layer's as it is first needed */
        if (s == LT_OK) s = lt_dist_step_begin(&L->dist, L->m, L->m->params, err);
        if (s == LT_OK) lt_dist_bind(&L->dist, L->m, L->grads);
        if (s == LT_OK) lt_dist_set_device_grads(&L->dist, L->be != NULL); /* NCCL all-reduces, bucketed */
        if (s == LT_OK) s = lt_exec_step_rank(L->m, &p, smp, L->g, &es, L->pool, L->comm, &hooks, err);
        if (s == LT_OK) s = lt_dist_reduce_grads(&L->dist, L->m, L->grads, err);
    } else if (s == LT_OK) {
        s = lt_exec_step(L->m, &p, smp, L->g, &es, L->pool, err);
    }
    void *times = NULL; /* distributed: every rank's op times, on rank 0 */
    size_t n_times = es.n_op_times;
    if (s == LT_OK && L->comm) {
        size_t *lens = L->rank0 ? calloc((size_t)lt_comm_layout_of(L->comm)->world, sizeof *lens) : NULL;
        s = L->rank0 && !lens ? lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory")
                              : lt_comm_gather_bytes(L->comm, es.op_times, es.n_op_times * sizeof(lt_measured_op),
                                                     &times, lens, err);
        if (s == LT_OK && lens) n_times = 0;
        for (int k = 0; s == LT_OK && lens && k < lt_comm_layout_of(L->comm)->world; k++)
            n_times += lens[k] / sizeof(lt_measured_op);
        if (s == LT_OK && lens && times) n_times = merge_group_ops(times, n_times);
        free(lens);
    }
    if (s == LT_OK) {
        r->loss_sum = es.loss_sum, r->n_predicted = es.n_predicted, r->tokens = es.tokens;
        r->plan_step = step, r->predicted_ms = p.time_s * 1e3;
        st->data_pos = st->step + 1; /* the next stored step: a record, the plans decide the data */
        /* predicted vs measured, beside the plan (docs/plans-schema.md "What the trainer measured"):
         * a stage's bytes are its activations, K/V context and transfers at their peak, plus
         * the model states of its tensors as this trainer keeps them (fp32 weights and
         * gradients, AdamW's two moments: over dp with ZeRO-1; on the GPU also the bf16 copy
         * the kernels read, 2 bytes more), what the planner prices. On the GPU the meter
         * counts the passes' device allocations in device bytes (2 per bf16 element). */
        /* this trainer's bytes a parameter (held_model: the CPU's or the GPU's) */
        double peak = 0, per_param = L->held.weight_bytes + L->held.grad_bytes, optim = L->held.optim_bytes;
        for (int g = 0; L->rank0 && g < es.n_stages; g++) {
            double zdp = L->comm && L->dist.sharded ? (double)L->dist.dp : 1.0;
            /* fsdp: the block of the weights kept beside their gathered whole (lt_cost_model_states_bytes) */
            double block = L->comm && L->dist.shard == LT_SHARD_FSDP ? L->held.weight_bytes / zdp : 0.0;
            const lt_llama *tm = L->table.n_tensors ? &L->table : L->m; /* every stage's tensors */
            es.stage_peak_bytes[g] += (size_t)((double)lt_dist_stage_params(tm, &p, g, L->helix_parts) * (per_param + optim / zdp + block));
            if ((double)es.stage_peak_bytes[g] > peak) peak = (double)es.stage_peak_bytes[g];
        }
        if (L->be) s = gpu_measured(L, &es, &peak, &r->device_used, err);
        r->predicted_peak = p.peak_mem, r->measured_peak = peak;
        if (L->rank0)
            s = lt_store_put_measured(L->db_path, step, times ? times : es.op_times, n_times, es.seconds, peak,
                                      es.stage_peak_bytes, es.n_stages, err);
    }
    free(times);
    lt_exec_stats_free(&es);
    for (size_t i = 0; smp && i < p.n_samples; i++) free((void *)smp[i].tokens);
    free(smp), free(src);
    lt_step_plan_free(&p);
    return s;
}

static lt_status save(const train_loop *L, const char *dir, const lt_llama *m, const lt_adamw *opt,
                      const lt_ckpt_state *st, int keep, lt_error *err) {
    if (L->comm && L->dist_ready) { /* in parts, a manifest last (train/io/ckpt.h) */
        lt_adamw whole = {0}; /* sharded: the stage's moments from its DP ranks' shards */
        lt_status s = L->dist.sharded ? lt_dist_gather_moments(&L->dist, m, opt, &whole, err) : LT_OK;
        const lt_adamw *o = L->dist.sharded ? &whole : opt;
        /* tensor parallelism: the stage's writer takes the whole tensors from its TP group,
         * so a part holds the bytes a tp = 1 run writes (any tp resumes from it) */
        lt_llama full = {0};
        lt_adamw fo = {0};
        bool assemble = L->dist.tp > 1 && L->dist.dp_rank == 0;
        if (s == LT_OK && assemble) /* the stage's tensors at tp = 1 */
            s = lt_llama_create_part(&full, &m->shape, 1, 0, &(lt_llama_part){.l0 = m->l0, .l1 = m->l1,
                                     .first = m->has_embed, .last = m->has_head, .helix_pp = m->helix_pp,
                                     .helix_stage = m->helix_stage}, err);
        if (s == LT_OK && assemble) s = lt_adamw_init(&fo, full.n_params, err);
        if (s == LT_OK && assemble) {
            fo.t = o->t;
            s = lt_dist_tp_assemble(&L->dist, m, m->params, &full, full.params, err);
            if (s == LT_OK) s = lt_dist_tp_assemble(&L->dist, m, o->m, &full, fo.m, err);
            if (s == LT_OK) s = lt_dist_tp_assemble(&L->dist, m, o->v, &full, fo.v, err);
        }
        if (s == LT_OK) s = lt_ckpt_dist_write(&L->dist, dir, assemble ? &full : m, assemble ? &fo : o, st, err);
        lt_adamw_free(&whole), lt_adamw_free(&fo);
        lt_llama_free(&full);
        if (s == LT_OK && L->rank0) LT_INFO("wrote checkpoint %s/ckpt-%08lld.d (%d parts)", dir, (long long)st->step,
                                            L->dist.pp);
        if (s == LT_OK && L->rank0) s = lt_ckpt_prune(dir, keep, err);
        return s;
    }
    if (L->comm && !L->rank0) return LT_OK; /* no step ran: rank 0 writes the one file */
    if (m->n_params != m->n_params_whole) { /* ... of a whole model only: the checkpoint it started from stands */
        LT_INFO("no step ran: no checkpoint written (rank 0 holds its part only)");
        return LT_OK;
    }
    char *path = lt_ckpt_path(dir, st->step);
    if (!path) return lt_fail(err, LT_ERR_NOMEM, dir, "out of memory");
    lt_status s = lt_ckpt_write(path, m, opt, st, err);
    if (s == LT_OK) LT_INFO("wrote checkpoint %s", path);
    free(path);
    if (s == LT_OK) s = lt_ckpt_prune(dir, keep, err);
    return s;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* What rank 0 holds, said once (of the model's `whole` parameters). */
static void held_line(const lt_llama *m, size_t whole, const lt_cmd_part *part) {
    const char *tp = m->tp > 1 ? ", its TP shard" : "";
    if (m->helix_pp > 0)
        LT_INFO("each rank holds its own part: rank 0 has %zu of the model's %zu parameters (HelixPipe's part of stage "
                "0: the tensors of the layer parts the helix puts there%s; the Q/K/V weights of the others' layers "
                "come with the activations)", m->n_params, whole, tp);
    else if (part->helix)
        LT_INFO("HelixPipe's plans mixed with other strategies' steps: every rank holds the whole model (rank 0 has "
                "%zu of its %zu parameters%s), each tensor owned by its part's stage", m->n_params, whole, tp);
    else
        LT_INFO("each rank holds its own part: rank 0 has %zu of the model's %zu parameters (stage 0's layers "
                "%d..%d%s)", m->n_params, whole, m->l0, m->l1 - 1, tp);
}

/* Distributed: the whole model (and moments) replaced by this rank's part (stage_of_plans). */
static lt_status rank_part(train_loop *L, lt_llama *m, lt_adamw *opt, lt_tp_ops *ops, const lt_cmd_part *part,
                           lt_error *err) {
    size_t whole = m->n_params;
    lt_status s = lt_cmd_rank_part(L->comm, m, opt, ops, &part->held, err);
    if (s == LT_OK && L->rank0) held_line(m, whole, part);
    return s;
}

/* The plans' cost model for counting (lt_cost_counts_from_config) with this trainer's bytes:
 * on the CPU fp32 weights and gradients, AdamW's two moments; on the GPU (train.backend =
 * cuda) the bf16 copy, fp32 gradients, and 12 bytes of fp32 master and moments (the GPU
 * profiles' weight_bytes, grad_bytes, optim_bytes). The plans' shard mode must be this
 * run's: their memory check priced it. */
static lt_status held_model(train_loop *L, const lt_config *run_cfg, lt_error *err) {
    lt_status s = lt_cmd_plans_counts(L->store, L->db_path, &L->held, err);
    if (s == LT_OK && L->held.shard != L->shard) {
        bool old_key = L->shard == LT_SHARD_ZERO1 && !strcmp(lt_config_get_string(run_cfg, "parallel", "shard"), "none");
        const char *key = old_key ? "zero1" : "shard";
        s = lt_fail(err, LT_ERR_CONFIG, lt_config_origin(run_cfg, "parallel", key),
                    "parallel.shard = %s, but the plans of %s were made for parallel.shard = %s", lt_shard_name(L->shard),
                    L->db_path, lt_shard_name(L->held.shard));
        lt_error_hint(err, "plan and train with the same parallel.shard: its memory is part of each plan");
    }
    const char *backend = lt_config_get_string(run_cfg, "train", "backend");
    bool gpu = backend && strcmp(backend, "cuda") == 0;
    if (s == LT_OK) L->held.weight_bytes = gpu ? 2 : 4, L->held.grad_bytes = 4, L->held.optim_bytes = gpu ? 12 : 8;
    return s;
}

/* The bytes this rank has sent in DP collectives (lt_comm_bytes). */
static double dp_bytes(const lt_comm *c) {
    return c ? lt_comm_bytes(c, LT_COMM_BYTES_DP_ALLREDUCE) + lt_comm_bytes(c, LT_COMM_BYTES_DP_REDUCE_SCATTER) +
                   lt_comm_bytes(c, LT_COMM_BYTES_DP_ALLGATHER)
             : 0.0;
}

/* Rank 0's DP bytes of a step against the cost model's (lt_cost_dp_bytes of its stage): the
 * first step's logged, the largest error kept for the end. */
static void dp_check(train_loop *L, double sent) {
    /* (plans mixing HelixPipe's steps with others' sum the whole model over every rank,
     * lt_dist.helix: a synchronisation no plan prices, so none is compared) */
    if (!L->rank0 || L->dist.dp < 2 || L->dist.helix) return;
    double want = lt_cost_dp_bytes(&L->held, 0), e = want > 0 ? fabs(sent - want) / want : 1.0;
    if (L->dp_steps++ == 0)
        LT_INFO("DP traffic of a step (parallel.shard = %s): rank 0 sent %.0f bytes in its gradient synchronisation, "
                "the cost model %.0f", lt_shard_name(L->dist.shard), sent, want);
    if (e > L->dp_worst) L->dp_worst = e;
}

/* This process's resident memory (/proc/self/statm), 0 where it cannot be read. */
static double resident_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    int got = f ? fscanf(f, "%llu %llu", &size, &resident) : 0;
    if (f) fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return got == 2 && page > 0 ? (double)resident * (double)page : 0.0;
}

/* Between steps: what the shard mode releases (lt_dist_release); the first time, rank 0's
 * model-state bytes then against the cost model's (lt_cost_model_states_held_bytes). */
static lt_status release(train_loop *L, lt_llama *m, float *grads, lt_error *err) {
    bool show = L->dist.sharded && !L->held_shown && L->rank0 && L->held.pp && !L->be; /* (the GPU's: gpu_states) */
    double rss0 = show ? resident_bytes() : 0;
    lt_status s = lt_dist_release(&L->dist, m, m->params, grads, err);
    if (s != LT_OK || !show) return s;
    L->held_shown = true;
    double held = lt_dist_held_bytes(&L->dist, m->n_params), want = lt_cost_model_states_held_bytes(&L->held, 0);
    LT_INFO("model states between steps (parallel.shard = %s): rank 0 holds %.0f bytes, the cost model %.0f; "
            "held_rel_err=%.3e; its resident memory fell by %.0f bytes releasing the step's buffers",
            lt_shard_name(L->dist.shard), held, want, want > 0 ? fabs(held - want) / want : 1.0, rss0 - resident_bytes());
    return s;
}

/* The GPU's fp32 master (and, unsharded, its moments) back to the host before a checkpoint;
 * zero1: the master's DP blocks gathered (lt_dist_download), the moments' gathered by save. */
static lt_status download(train_loop *L, lt_llama *m, lt_adamw *opt, lt_error *err) {
    if (!L->be) return LT_OK;
    if (L->gpu_sharded) return lt_dist_download(&L->dist, m, err); /* (no step yet: the host copy is the start) */
    lt_status s = lt_backend_cuda_download(L->be, m, err);
    if (s == LT_OK) s = lt_backend_cuda_download_moments(L->be, opt, err);
    return s;
}

/* After the first step on the GPU: rank 0's model-state bytes allocated on its device (the
 * bf16 copy, the gradients, the fp32 master and moments whole or its zero1 block) against
 * the cost model's (lt_cost_model_states_bytes of its stage). */
static void gpu_states(train_loop *L) {
    L->gpu_states_shown = true;
    if (!L->held.pp) return;
    double have = (double)lt_backend_cuda_states_bytes(L->be), want = lt_cost_model_states_bytes(&L->held, 0);
    LT_INFO("model states on the GPU (parallel.shard = %s): rank 0 allocated %.0f bytes, the cost model %.0f; "
            "gpu_states_rel_err=%.3e", lt_shard_name(L->dist.shard), have, want,
            want > 0 ? fabs(have - want) / want : 1.0);
}

/* A launched rank's part (its stage in the plans' first stored step: the engine never
 * moves layers between stages), known before the model is read, so that only the part is
 * read or initialized. */
static lt_status stage_of_plans(const char *db, lt_comm *comm, lt_cmd_part *part, lt_error *err) {
    const lt_comm_layout *l = lt_comm_layout_of(comm);
    lt_store *store = NULL;
    uint64_t *steps = NULL;
    size_t n = 0;
    lt_step_plan p;
    lt_step_plan_init(&p);
    lt_sample *src = NULL;
    lt_status s = lt_store_open(&store, db, err);
    if (s == LT_OK) s = lt_store_steps(store, &steps, &n, err);
    if (s == LT_OK && n == 0) s = lt_fail(err, LT_ERR_INPUT, db, "the plan file holds no step");
    if (s == LT_OK) s = lt_store_get_step(store, steps[0], &p, &src, err);
    /* the layout first: a plan for another one is refused as such, not by its stage's layers */
    if (s == LT_OK) s = lt_dist_check_layout(&p, l, err);
    *part = (lt_cmd_part){.tp = l->tp > 0 ? l->tp : 1, .tp_rank = l->tp_rank,
                          .held = {.first = l->stage == 0, .last = l->stage == l->pp - 1}};
    if (s == LT_OK) s = lt_dist_stage_layers(&p, l->stage, &part->held.l0, &part->held.l1, err);
    /* HelixPipe: every step one, HelixPipe's part of the stage; mixed with other strategies'
     * steps (auto), the whole model (lt_dist.helix) */
    bool helix = false, parts = false;
    if (s == LT_OK) s = lt_cmd_plans_helix(db, &helix, &parts, err);
    part->helix = s == LT_OK && helix && l->pp > 1;
    if (part->helix && parts) part->held = lt_llama_helix_part((int)p.ranks[0].sched.layers, l->stage, l->pp);
    else if (part->helix) part->held = (lt_llama_part){.l0 = 0, .l1 = p.ranks[0].sched.layers, .first = true, .last = true};
    free(src), free(steps);
    lt_step_plan_free(&p);
    lt_store_close(store);
    return s;
}

/* --db: open the plans, check them against the model, list their steps. */
static lt_status open_plans(const char *db, const lt_llama *m, int tp, const lt_config *cfg, train_loop *L,
                            lt_error *err) {
    L->db_path = db;
    lt_status s = lt_cmd_open_plans(db, m, tp, &L->store, err);
    if (s == LT_OK) s = lt_store_steps(L->store, &L->steps, &L->n_steps, err);
    bool any_helix = false;
    if (s == LT_OK) s = lt_cmd_plans_helix(db, &any_helix, &L->helix_parts, err);
    if (s == LT_OK) s = held_model(L, cfg, err);
    /* (HelixPipe: a rank holds its stage's part, or mixed with other strategies' steps the
     * whole model: what lt_cost_stage_params counts, as trainer check's) */
    L->held.helix_parts = L->helix_parts, L->held.whole_model = any_helix && !L->helix_parts;
    if (s == LT_OK && L->n_steps == 0) s = lt_fail(err, LT_ERR_INPUT, db, "the plan file holds no step");
    return s;
}

/* --db: the schedule's length against the stored steps (the file's comment). */
static lt_status schedule_of_plans(const lt_config *cfg, lt_optim_config *oc, const train_loop *L, lt_error *err) {
    bool train_set = lt_config_is_set(cfg, "train", "steps");
    if (!train_set && !lt_config_is_set(cfg, "plan", "steps")) {
        oc->total_steps = (int64_t)L->n_steps;
        return LT_OK;
    }
    if (oc->total_steps <= (int64_t)L->n_steps) return LT_OK;
    const char *key = train_set ? "train.steps" : "plan.steps (train.steps unset)";
    lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, train_set ? "train" : "plan", "steps"),
            "%s = %" PRId64 " is more than the %zu steps stored in %s: the cosine schedule would never reach "
            "train.min_lr", key, oc->total_steps, L->n_steps, L->db_path);
    lt_error_hint(err, "set train.steps = %zu (or fewer), or plan the missing steps (planner build with plan.steps = %"
                  PRId64 " resumes the file)", L->n_steps, oc->total_steps);
    return LT_ERR_CONFIG;
}

/* train.eval_every and train.eval_docs, and with eval_every > 0 the held-out documents of the
 * plan file into L->val_docs (the file's comment: what is refused). */
static lt_status eval_setup(const lt_config *cfg, const train_args *a, train_loop *L, lt_error *err) {
    int64_t docs = 32;
    L->eval_every = 0;
    lt_config_get_int(cfg, "train", "eval_every", &L->eval_every, NULL);
    lt_config_get_int(cfg, "train", "eval_docs", &docs, NULL);
    if (L->eval_every <= 0) return LT_OK;
    const char *where = lt_config_origin(cfg, "train", "eval_every");
    if (!a->db) {
        lt_fail(err, LT_ERR_CONFIG, where, "train.eval_every = %" PRId64 " scores the plan file's held-out documents: "
                "it needs --db PLANS", L->eval_every);
        lt_error_hint(err, "set train.eval_every = 0 for --whole");
        return LT_ERR_CONFIG;
    }
    if (L->comm) {
        L->eval_dp = lt_comm_layout_of(L->comm)->dp, L->eval_pp = lt_comm_layout_of(L->comm)->pp;
    } else { /* one process: the pipelines of the stored plans (the first step's layout) */
        lt_step_plan p;
        lt_step_plan_init(&p);
        lt_sample *src = NULL;
        lt_status s = L->n_steps ? lt_store_get_step(L->store, L->steps[0], &p, &src, err) : LT_OK;
        L->eval_dp = 0, L->eval_pp = p.pp > 0 ? p.pp : 1;
        for (size_t r = 0; r < p.n_ranks; r++) L->eval_dp += p.ranks[r].cp > 1 ? p.ranks[r].cp : 1;
        if (L->eval_dp < 1) L->eval_dp = 1;
        free(src);
        lt_step_plan_free(&p);
        if (s != LT_OK) return s;
    }
    bool present = false;
    lt_status s = lt_store_heldout(L->store, &present, &L->val_docs, &L->n_val, err);
    if (s == LT_OK && (!present || L->n_val == 0)) {
        s = lt_fail(err, LT_ERR_CONFIG, where, "train.eval_every = %" PRId64 ", but %s holds %s", L->eval_every,
                    L->db_path, present ? "no held-out document (built with data.holdout = 0)"
                                        : "no held-out set (built by a planner before data.holdout)");
        lt_error_hint(err, "rebuild the plans with data.holdout > 0 (e.g. 0.01), or set train.eval_every = 0");
    }
    if (s == LT_OK && (int64_t)L->n_val > docs) L->n_val = (size_t)docs;
    return s;
}

/* The validation loss of the current weights (eval_setup's documents): *val the mean, *tokens
 * its denominator. The documents of 2 tokens or more go through the executor as a scoring
 * plan (lt_plan_scoring: forward only, document i on pipeline i mod dp), so the model is
 * scored where it lives, whatever the layout: its stages on their ranks, each TP rank its
 * heads. fsdp first gathers the weights the update left sharded (as a checkpoint does).
 * Collective under a launcher: every rank calls it at the same step. */
static lt_status validation(train_loop *L, double *val, int64_t *tokens, lt_error *err) {
    size_t n = 0;
    int64_t *len = calloc(L->n_val + 1, sizeof *len);
    size_t *which = calloc(L->n_val + 1, sizeof *which);
    lt_train_sample *smp = calloc(L->n_val + 1, sizeof *smp);
    lt_status s = len && which && smp ? LT_OK : lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (size_t i = 0; s == LT_OK && i < L->n_val; i++) {
        if (L->val_docs[i].length > INT32_MAX)
            s = lt_fail(err, LT_ERR_INPUT, L->db_path, "held-out document %zu (task=%" PRIu32 ",doc=%" PRIu64 "): %" PRId64
                        " tokens", i, L->val_docs[i].task, L->val_docs[i].doc, L->val_docs[i].length);
        else if (L->val_docs[i].length >= 2) /* (shorter ones predict nothing) */
            which[n] = i, len[n++] = L->val_docs[i].length;
    }
    if (s == LT_OK && n == 0) {
        s = lt_fail(err, LT_ERR_INPUT, L->db_path, "none of the %zu held-out documents scored has 2 tokens or more",
                    L->n_val);
        lt_error_hint(err, "raise train.eval_docs or data.holdout");
    }
    lt_step_plan p;
    lt_step_plan_init(&p);
    if (s == LT_OK) s = lt_plan_scoring(&p, len, n, L->eval_dp, L->eval_pp, L->m->shape.layers,
                                               L->helix_parts && L->comm && L->eval_pp > 1, err);
    for (size_t k = 0; s == LT_OK && k < n; k++) {
        const lt_sample *d = &L->val_docs[which[k]];
        int32_t *t = NULL;
        s = lt_docs_get_piece(L->docs, d->task, d->doc, d->offset, d->length, &t, err);
        if (s != LT_OK)
            lt_error_prefix(err, "held-out document %zu (task=%" PRIu32 ",doc=%" PRIu64 "): ", which[k], d->task, d->doc);
        smp[k] = (lt_train_sample){.tokens = t, .len = (int)d->length};
    }
    if (s == LT_OK && L->dist_ready) s = lt_dist_unshard(&L->dist, L->m, L->m->params, err); /* fsdp */
    lt_exec_stats es = {0};
    if (s == LT_OK && L->comm) s = lt_exec_step_rank(L->m, &p, smp, NULL, &es, L->pool, L->comm, NULL, err);
    else if (s == LT_OK) s = lt_exec_step(L->m, &p, smp, NULL, &es, L->pool, err);
    if (s == LT_OK) *val = es.loss_sum / (double)es.n_predicted, *tokens = es.n_predicted;
    else lt_error_prefix(err, "validation: ");
    lt_exec_stats_free(&es);
    for (size_t k = 0; smp && k < n; k++) free((void *)smp[k].tokens);
    free(smp), free(which), free(len);
    lt_step_plan_free(&p);
    return s;
}

int train_command(lt_cli_ctx *ctx) {
    train_args a;
    int rc = parse(ctx, &a);
    if (rc) return rc;
    lt_error err;
    lt_optim_config oc;
    lt_status s = lt_optim_config_from(ctx->config, &oc, &err);
    if (s != LT_OK) return lt_error_exit(&err);
    int64_t batch_docs = 8, every = 0, keep = 3;
    lt_config_get_int(ctx->config, "train", "batch_docs", &batch_docs, NULL);
    lt_config_get_int(ctx->config, "train", "checkpoint_every", &every, NULL);
    lt_config_get_int(ctx->config, "train", "keep_checkpoints", &keep, NULL);
    int64_t stop = a.steps > 0 ? a.steps : oc.total_steps;
    lt_comm *comm = NULL;
    if ((s = lt_cmd_comm(ctx, &comm, &err)) != LT_OK) return lt_error_exit(&err);
    if (comm && a.whole) {
        lt_comm_finalize(comm);
        return lt_cli_usage(ctx, "--whole trains in one process: start it without mpirun/srun, or train --db on "
                                 "plans for parallel.dp x parallel.pp ranks");
    }
    bool rank0 = !comm || lt_comm_layout_of(comm)->rank == 0;
    struct sigaction sa = {.sa_handler = on_usr2};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
    char *dir = checkpoint_dir(ctx, &a);
    if (!dir) return lt_error_exit(&err);
    lt_llama m;
    memset(&m, 0, sizeof m);
    lt_adamw opt;
    memset(&opt, 0, sizeof opt);
    lt_ckpt_state st;
    train_loop L = {.m = &m, .batch_docs = batch_docs, .comm = comm, .rank0 = rank0, .bucket_mb = 25};
    lt_config_get_double(ctx->config, "train", "bucket_mb", &L.bucket_mb, NULL);
    L.opt = &opt;
    float *grads = NULL;
    lt_layer_views *glv = NULL;
    lt_backend *be = NULL; /* train.backend = cuda: the GPU's (NULL: the CPU fp32 reference) */
    int threads = 1;
    s = lt_shard_from_config(ctx->config, &L.shard, &err);
    if (s == LT_OK) s = lt_mkdir_p(dir, 0777, &err);
    /* a launched rank reads or initializes its own part only */
    lt_cmd_part part;
    bool parted = s == LT_OK && comm && a.db, is_part = false;
    if (parted) s = stage_of_plans(a.db, comm, &part, &err);
    if (s == LT_OK) s = start_state(ctx, &a, dir, parted ? &part : NULL, &m, &opt, &st, &is_part, &err);
    if (s == LT_OK) s = lt_docs_open(&L.docs, a.data, a.db ? 0 : lt_cmd_context_len(ctx), &err);
    if (s == LT_OK && lt_docs_count(L.docs) == 0) s = lt_fail(&err, LT_ERR_INPUT, a.data, "the dataprep output has no document");
    int tp = comm ? lt_comm_layout_of(comm)->tp : 1;
    if (s == LT_OK && a.db) s = open_plans(a.db, &m, tp, ctx->config, &L, &err);
    if (s == LT_OK && a.db) s = schedule_of_plans(ctx->config, &oc, &L, &err);
    if (s == LT_OK && a.db && a.steps == 0) stop = oc.total_steps;
    if (s == LT_OK && a.db && (int64_t)L.n_steps < stop) stop = (int64_t)L.n_steps; /* every stored step, no more */
    if (s == LT_OK) s = eval_setup(ctx->config, &a, &L, &err);
    /* a resumed run logs its redone steps again (from step 0: its validation at step 0 too) */
    if (s == LT_OK && a.db && rank0) s = lt_metrics_trim(dir, st.step > 0 ? st.step : -1, &err);
    /* the GPU shards with zero1 only: zero2 and fsdp release whole buffers between steps,
     * which the device's allocation-once memory (the arena, the states) does not do */
    const char *backend = lt_config_get_string(ctx->config, "train", "backend");
    if (s == LT_OK && backend && !strcmp(backend, "cuda") && comm && L.shard != LT_SHARD_NONE &&
        L.shard != LT_SHARD_ZERO1)
        s = lt_fail(&err, LT_ERR_CONFIG, lt_config_origin(ctx->config, "parallel", "shard"),
                    "parallel.shard = %s runs on the CPU backend only; train.backend = cuda shards with zero1",
                    lt_shard_name(L.shard));
    /* under a launcher: the rank's GPU, and NCCL attached for the gradient all-reduces */
    /* (HelixPipe's helix: the GPU's stage channels join any two stages) */
    if (s == LT_OK) s = lt_cmd_open_backend_on(ctx, comm, parted && part.helix, &be, &err);
    int dp = comm ? lt_comm_layout_of(comm)->dp : 1;
    bool gpu_sharded = be && comm && a.db && L.shard == LT_SHARD_ZERO1 && dp > 1;
    L.gpu_sharded = gpu_sharded;
    /* a rank holds its own part only: its stage's tensors, its TP shard of them, and their
     * gradients and moments, on the CPU or on its GPU */
    lt_tp_ops tpo;
    if (s == LT_OK && is_part) { /* read or initialized as this rank's part */
        if (tp > 1) lt_dist_tp_ops(comm, be != NULL, &tpo), m.tp_ops = &tpo;
        if (rank0) held_line(&m, m.n_params_whole, &part);
    } else if (s == LT_OK && parted && st.step < stop) { /* read whole (a single-file checkpoint) */
        s = rank_part(&L, &m, &opt, &tpo, &part, &err);
    }
    if (s == LT_OK && comm && a.db) s = lt_llama_create_table(&L.table, &m.shape, tp, comm ? lt_comm_layout_of(comm)->tp_rank : 0, &err);
    m.mlp_chunk = a.db ? L.held.mlp_chunk : lt_cmd_mlp_chunk(ctx); /* the plans': what the planner priced */
    L.be = be;
    /* the model to the GPU: fp32 master + bf16 copy, and the moments of a resumed run;
     * zero1: the bf16 copy only (padded to the DP blocks), master and moments being the
     * DP ranks' blocks (lt_dist_init, lt_dist_take_moments) */
    size_t dev_floats = lt_dist_device_floats(&m, gpu_sharded ? dp : 1, gpu_sharded ? L.shard : LT_SHARD_NONE);
    if (s == LT_OK && gpu_sharded) s = lt_backend_cuda_upload_sharded(be, &m, dev_floats, &err);
    if (s == LT_OK && be && !gpu_sharded) s = lt_backend_cuda_upload(be, &m, &err);
    if (s == LT_OK && be && !gpu_sharded) s = lt_backend_cuda_upload_moments(be, &opt, &err);
    if (s == LT_OK) s = lt_cpu_init(lt_cmd_threads(ctx), &L.pool, &threads, &err);
    if (s == LT_OK) {
        L.samples = calloc((size_t)batch_docs, sizeof *L.samples);
        L.tokens = calloc((size_t)batch_docs, sizeof *L.tokens);
        L.slices = calloc((size_t)batch_docs, sizeof *L.slices);
        L.units = calloc((size_t)batch_docs, sizeof *L.units);
        if (be) s = lt_backend_cuda_grads(be, dev_floats, &grads, &err); /* fp32 gradients on the device */
        else grads = calloc(m.n_params, sizeof *grads);
        glv = calloc((size_t)m.shape.layers, sizeof *glv);
        if (s == LT_OK && (!L.samples || !L.tokens || !L.slices || !L.units || !grads || !glv))
            s = lt_fail(&err, LT_ERR_NOMEM, NULL, "out of memory for a training step");
    }
    /* the GPU's arena for the plans' steps, once the model states are on the device */
    if (s == LT_OK && be && a.db && st.step < stop) s = gpu_arena(&L, st.step, stop, &err);
    if (s == LT_OK && comm && rank0)
        LT_INFO("%d ranks: parallel.dp = %d x parallel.pp = %d, one process per (DP rank, stage)",
                lt_comm_layout_of(comm)->world, lt_comm_layout_of(comm)->dp, lt_comm_layout_of(comm)->pp);
    if (s == LT_OK && a.db && rank0)
        LT_INFO("training %s (%zu parameters) on the plans of %s (%zu steps) with the data of %s: steps %" PRId64
                "..%" PRId64 ", %d threads, checkpoints in %s",
                m.shape.name ? m.shape.name : "model", m.n_params_whole, a.db, L.n_steps, a.data, st.step, stop, threads, dir);
    else if (s == LT_OK && rank0)
        LT_INFO("training %s (%zu parameters) on %s: steps %" PRId64 "..%" PRId64 ", %" PRId64 " documents a step, "
                "%d threads, checkpoints in %s",
                m.shape.name ? m.shape.name : "model", m.n_params_whole, a.data, st.step, stop, batch_docs, threads, dir);
    lt_llama_views g;
    if (s == LT_OK) lt_llama_views_of(&m, grads, glv, &g);
    L.g = &g, L.grads = grads;
    bool preempted = false;
    double val = 0;
    int64_t val_tokens = 0;
    if (s == LT_OK && L.n_val && st.step == 0 && stop > 0) { /* the starting point (a resumed run logged it) */
        s = validation(&L, &val, &val_tokens, &err);
        if (s == LT_OK && rank0) {
            printf("step=0 val=%.6f val_tokens=%" PRId64 " val_docs=%zu\n", val, val_tokens, L.n_val);
            fflush(stdout);
            s = lt_metrics_append_val(dir, 0, val, val_tokens, (int64_t)L.n_val, &err);
        }
    }
    while (s == LT_OK && st.step < stop) {
        double t0 = now_s();
        step_result r = {0};
        double lr = lt_lr_at(&oc, st.step);
        double dp_sent = dp_bytes(comm);
        if (be) be->zero(be, grads, dev_floats * sizeof *grads);
        else memset(grads, 0, m.n_params * sizeof *grads);
        s = a.db ? plan_step(&L, &st, &r, &err) : whole_step(&L, &st, &r, &err);
        if (s != LT_OK) break;
        double norm;
        if (be && L.comm) { /* each stage its tensors on its GPU; the norm's scalars over MPI */
            s = lt_dist_clip(&L.dist, &m, grads, oc.grad_clip, &norm, &err);
            if (s == LT_OK && gpu_sharded) s = lt_dist_adamw(&L.dist, &opt, &m, m.params, grads, lr, &oc, &err);
            else if (s == LT_OK) s = lt_backend_cuda_adamw_tensors(be, &m, grads, lr, ++opt.t, &oc, L.dist.mine, &err);
            if (s == LT_OK && !gpu_sharded) s = lt_dist_helix_weights(&L.dist, be, &m, &err); /* (HelixPipe) */
            if (s == LT_OK && L.rank0 && !L.gpu_states_shown) gpu_states(&L);
            if (s != LT_OK) break;
        } else if (be) { /* clipping and AdamW on the device (fp32 master, m, v; the bf16 copy rewritten) */
            s = lt_backend_cuda_clip(be, grads, m.n_params, oc.grad_clip, &norm, &err);
            if (s == LT_OK) s = lt_backend_cuda_adamw(be, &m, grads, lr, ++opt.t, &oc, &err);
            if (s != LT_OK) break;
        } else if (L.comm) { /* each stage its tensors; the norm over every stage */
            s = lt_dist_clip(&L.dist, &m, grads, oc.grad_clip, &norm, &err);
            if (s != LT_OK) break;
            s = lt_dist_adamw(&L.dist, &opt, &m, m.params, grads, lr, &oc, &err);
            if (s != LT_OK) break;
        } else {
            norm = lt_clip_grads(grads, m.n_params, oc.grad_clip);
            lt_adamw_step(&opt, &m, m.params, grads, lr, &oc);
        }
        if (L.dist_ready && L.held.pp) dp_check(&L, dp_bytes(comm) - dp_sent); /* (MPI's or NCCL's) */
        st.step++;
        double dt = now_s() - t0;
        double loss = r.n_predicted > 0 ? r.loss_sum / (double)r.n_predicted : 0;
        /* validation every eval_every steps and after the last (not part of the step's time) */
        bool evaluated = L.n_val && (st.step % L.eval_every == 0 || st.step == stop);
        if (evaluated && (s = validation(&L, &val, &val_tokens, &err)) != LT_OK) break;
        char val_text[64] = "";
        if (evaluated) snprintf(val_text, sizeof val_text, " val=%.6f", val);
        if (!rank0) {
        } else if (a.db) {
            printf("step=%" PRId64 " loss=%.6f lr=%.4e grad_norm=%.4f tokens=%" PRId64 " tok/s=%.0f plan_step=%" PRIu64
                   " predicted_ms=%.3f measured_ms=%.1f%s\n",
                   st.step, loss, lr, norm, r.tokens, dt > 0 ? (double)r.tokens / dt : 0.0, r.plan_step,
                   r.predicted_ms, dt * 1e3, val_text);
            if (be) /* the GPU: the plan's memory model against the arena's measured peak, per step */
                printf("step=%" PRId64 " predicted_peak_gib=%.3f measured_peak_gib=%.3f device_used_gib=%.3f (the "
                       "largest stage: its arena's peak + the model states allocated; rank 0's device memory in "
                       "use)\n", st.step, r.predicted_peak / 1073741824.0, r.measured_peak / 1073741824.0,
                       r.device_used / 1073741824.0);
            lt_metrics_row row = {.step = st.step, .plan_step = r.plan_step, .loss = loss, .lr = lr, .grad_norm = norm,
                                  .tokens = r.tokens, .n_predicted = r.n_predicted, .seconds = dt,
                                  .predicted_ms = r.predicted_ms};
            s = lt_metrics_append(dir, &row, &err);
            if (s == LT_OK && evaluated) s = lt_metrics_append_val(dir, st.step, val, val_tokens, (int64_t)L.n_val, &err);
        } else {
            printf("step=%" PRId64 " loss=%.6f lr=%.4e grad_norm=%.4f tokens=%" PRId64 " tok/s=%.0f\n", st.step, loss,
                   lr, norm, r.tokens, dt > 0 ? (double)r.tokens / dt : 0.0);
        }
        fflush(stdout);
        int64_t sig = preempt_signal; /* the ranks agree: all stop after this step, or none */
        if (s == LT_OK && comm) s = lt_comm_allreduce(comm, LT_COMM_WORLD, &sig, 1, LT_COMM_I64, true, &err);
        if (s == LT_OK && sig && st.step < stop) {
            preempted = true;
            break;
        }
        if (s == LT_OK && every > 0 && st.step % every == 0 && st.step < stop) {
            s = download(&L, &m, &opt, &err); /* the GPU's fp32 master (and moments) for the checkpoint */
            if (s == LT_OK && L.dist_ready) s = lt_dist_unshard(&L.dist, &m, m.params, &err); /* fsdp */
            if (s == LT_OK) s = save(&L, dir, &m, &opt, &st, (int)keep, &err);
            if (s == LT_OK && a.db && rank0) s = lt_metrics_svg(dir, &err);
        }
        if (s == LT_OK && L.dist_ready && st.step < stop) s = release(&L, &m, grads, &err); /* zero2, fsdp */
    }
    if (s == LT_OK && L.dist_ready) s = lt_dist_unshard(&L.dist, &m, m.params, &err);
    if (s == LT_OK && L.dp_steps > 0)
        LT_INFO("DP traffic against the cost model over %d steps: dp_bytes_rel_err=%.3e (the largest)", L.dp_steps,
                L.dp_worst);
    if (s == LT_OK) s = download(&L, &m, &opt, &err);
    if (s == LT_OK) s = save(&L, dir, &m, &opt, &st, (int)keep, &err);
    if (s == LT_OK && a.db && rank0) s = lt_metrics_svg(dir, &err);
    if (s == LT_OK && preempted && rank0)
        fprintf(stderr, "trainer: SIGUSR2: stopped after step %" PRId64 " with its checkpoint in %s; exit status %d "
                "asks for a requeue (continue with --resume)\n", st.step, dir, PREEMPTED_EXIT);
    batch_clear(&L);
    if (be) lt_backend_cuda_free_grads(be, grads);
    else free(grads);
    free(L.samples), free(L.tokens), free(L.slices), free(L.units), free(glv), free(L.steps), free(L.val_docs);
    lt_store_close(L.store);
    lt_pool_destroy(L.pool);
    lt_docs_close(L.docs);
    lt_adamw_free(&opt);
    lt_llama_free(&m);
    lt_llama_free(&L.table);
    lt_dist_free(&L.dist);
    free(dir);
    if (s != LT_OK) lt_cmd_comm_fail(comm, &err); /* distributed: ends every rank */
    lt_comm_finalize(comm); /* its NCCL communicators first: they use the backend's streams */
    lt_backend_cuda_close(be);
    if (s != LT_OK) return lt_error_exit(&err);
    return preempted ? PREEMPTED_EXIT : 0;
}
