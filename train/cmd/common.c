/*
 * train/cmd/common.c — what the trainer's commands share (train/cmd/cmd.h): the config's
 * seed, model, context length and thread count; a checkpoint loaded and checked against the
 * config; the backend (train.backend) and the communicator of a launched job; the plan file
 * checked against the model, and a plan's samples read from the data.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cli.h"             /* lt_cli_ctx */
#include "lib/config.h"          /* lt_config_get_*, lt_config_is_set, lt_config_origin */
#include "lib/model.h"           /* lt_model_from_config */
#include "train/cmd/cmd.h"       /* lt_cmd_* */
#include "train/dist/comm.h"     /* lt_comm_init, lt_comm_pick_device, lt_comm_attach_device, lt_comm_abort */
#include "train/dist/dist.h"     /* lt_dist_tp_ops */
#include "train/io/ckpt.h"       /* lt_ckpt_read, lt_ckpt_check_shape */
#include "train/io/docs.h"       /* lt_docs_get_piece */
#include "train/model/backend.h" /* lt_backend_cuda_open, _streams, _close */
#include "plans/store/store.h"   /* lt_store_open, lt_store_run_info, lt_store_count_strategy */

/* ------------------------------------------------------------------ the config */

uint64_t lt_cmd_seed(const lt_cli_ctx *ctx) {
    int64_t seed = 1234;
    if (lt_config_is_set(ctx->config, "train", "seed"))
        lt_config_get_int(ctx->config, "train", "seed", &seed, NULL);
    else
        lt_config_get_int(ctx->config, "plan", "seed", &seed, NULL);
    return (uint64_t)seed;
}

lt_status lt_cmd_model_shape(const lt_cli_ctx *ctx, lt_model_shape *shape, lt_error *err) {
    static const char *const keys[] = {"preset", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab"};
    bool any = ctx->config_path != NULL;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) any |= lt_config_is_set(ctx->config, "model", keys[k]);
    if (!any) {
        lt_fail(err, LT_ERR_USAGE, NULL, "which model? no --config and no model.* key given");
        lt_error_hint(err, "give --config FILE with a [model] section, or --set model.preset=NAME (e.g. nano)");
        return LT_ERR_USAGE;
    }
    return lt_model_from_config(ctx->config, NULL, shape, err);
}

int64_t lt_cmd_context_len(const lt_cli_ctx *ctx) {
    uint64_t v = 0;
    if (!lt_config_is_set(ctx->config, "plan", "context_len") ||
        lt_config_get_size(ctx->config, "plan", "context_len", &v, NULL) != LT_OK)
        return 0;
    return v > (uint64_t)INT32_MAX ? INT32_MAX : (int64_t)v;
}

int lt_cmd_threads(const lt_cli_ctx *ctx) {
    int64_t t = 0;
    if (lt_config_get_int(ctx->config, "train", "threads", &t, NULL) != LT_OK) t = 0;
    return (int)t;
}

int lt_cmd_mlp_chunk(const lt_cli_ctx *ctx) {
    int64_t c = 0;
    if (lt_config_get_int(ctx->config, "plan", "mlp_chunk", &c, NULL) != LT_OK || c < 0) c = 0;
    return c > INT32_MAX ? INT32_MAX : (int)c;
}

/* ------------------------------------------------------------------ the model and the backend */

/* The checkpoint's model, checked against the config's [model] when the config sets one. */
lt_status lt_cmd_load_model(const lt_cli_ctx *ctx, const char *ckpt, lt_llama *m, lt_adamw *opt, lt_ckpt_state *st,
                            lt_error *err) {
    bool is_part;
    return lt_cmd_load_part(ctx, ckpt, NULL, m, opt, st, &is_part, err);
}

lt_status lt_cmd_load_part(const lt_cli_ctx *ctx, const char *ckpt, const lt_cmd_part *part, lt_llama *m,
                           lt_adamw *opt, lt_ckpt_state *st, bool *is_part, lt_error *err) {
    lt_ckpt_state local;
    *is_part = part && lt_ckpt_is_dist(ckpt);
    lt_status s = *is_part ? lt_ckpt_dist_read_stage(ckpt, part->tp, part->tp_rank, &part->held, m, opt,
                                                     st ? st : &local, err)
                           : lt_ckpt_read(ckpt, m, opt, st ? st : &local, err);
    if (s != LT_OK) return s;
    static const char *const keys[] = {"preset", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab"};
    bool any = false;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) any |= lt_config_is_set(ctx->config, "model", keys[k]);
    if (!any) return LT_OK;
    lt_model_shape want;
    s = lt_model_from_config(ctx->config, NULL, &want, err);
    if (s == LT_OK) s = lt_ckpt_check_shape(&m->shape, &want, ckpt, err);
    if (s != LT_OK) {
        lt_llama_free(m);
        if (opt) lt_adamw_free(opt);
    }
    return s;
}

/* The rank's GPU: its local rank on the node (Slurm's, else Open MPI's), else 0. */
static int local_device(void) {
    const char *v = getenv("SLURM_LOCALID");
    if (!v) v = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    char *end;
    long d = v ? strtol(v, &end, 10) : 0;
    return v && *end == '\0' && d >= 0 && d < 1024 ? (int)d : 0;
}

lt_status lt_cmd_open_backend(const lt_cli_ctx *ctx, lt_backend **be, lt_error *err) {
    return lt_cmd_open_backend_on(ctx, NULL, false, be, err);
}

lt_status lt_cmd_plans_helix(const char *db, bool *helix, bool *parts, lt_error *err) {
    *helix = false;
    if (parts) *parts = false;
    lt_store *store = NULL;
    int64_t n = 0;
    uint64_t *steps = NULL;
    size_t n_steps = 0;
    lt_status st = lt_store_open(&store, db, err);
    if (st == LT_OK) st = lt_store_count_strategy(store, lt_strategy_name(LT_STRATEGY_HELIXPIPE), &n, err);
    if (st == LT_OK) st = lt_store_steps(store, &steps, &n_steps, err);
    lt_store_close(store);
    free(steps);
    *helix = st == LT_OK && n > 0;
    if (parts) *parts = *helix && (size_t)n == n_steps;
    return st;
}

lt_status lt_cmd_open_backend_on(const lt_cli_ctx *ctx, lt_comm *comm, bool any_stage, lt_backend **be,
                                 lt_error *err) {
    *be = NULL;
    const char *b = lt_config_get_string(ctx->config, "train", "backend");
    if (b == NULL || strcmp(b, "cpu") == 0) return LT_OK;
    lt_error why;
    bool ranks = comm && lt_comm_layout_of(comm)->distributed;
    int device = local_device();
    if (ranks && lt_comm_pick_device(comm, &device, err) != LT_OK) return LT_ERR_CONFIG;
    if (lt_backend_cuda_open(be, device, &why) == LT_OK) {
        if (!ranks) return LT_OK;
        /* NCCL beside MPI (train/dist/comm.h "device buffers"): collective over the world */
        void *compute, *comm_stream;
        lt_backend_cuda_streams(*be, &compute, &comm_stream);
        lt_status st = lt_comm_attach_device(comm, device, compute, comm_stream, any_stage, err);
        if (st != LT_OK) {
            lt_backend_cuda_close(*be);
            *be = NULL;
        }
        return st;
    }
    /* one line naming the key and lt_cuda_open's reason; exit 2 (a configuration this
     * build or machine cannot run) */
    lt_fail(err, LT_ERR_CONFIG, lt_config_origin(ctx->config, "train", "backend"), "train.backend = %s: %s (GPU %d)", b,
            why.what, device);
    lt_error_hint(err, "%s", why.hint[0] ? why.hint : "set train.backend = cpu (the default), or run on a GPU node");
    return LT_ERR_CONFIG;
}

lt_status lt_cmd_gpu_arena(lt_backend *be, double share, const char *what, lt_error *err) {
    size_t free_b = 0, total_b = 0;
    lt_status st = lt_backend_cuda_mem(be, &free_b, &total_b, err);
    if (st == LT_OK) st = lt_backend_cuda_reserve(be, (size_t)((double)free_b * share), what, err);
    return st;
}

lt_status lt_cmd_backend(const lt_cli_ctx *ctx, lt_error *err) {
    lt_backend *be;
    lt_status st = lt_cmd_open_backend(ctx, &be, err);
    if (st != LT_OK || !be) return st;
    lt_backend_cuda_close(be);
    lt_fail(err, LT_ERR_CONFIG, lt_config_origin(ctx->config, "train", "backend"),
            "train.backend = cuda: this command runs on the CPU only so far (train, eval and check run on the GPU)");
    lt_error_hint(err, "set train.backend = cpu (the default) for it");
    return LT_ERR_CONFIG;
}

/* ------------------------------------------------------------------ the ranks of a launched job */

lt_status lt_cmd_comm(const lt_cli_ctx *ctx, lt_comm **comm, lt_error *err) {
    *comm = NULL;
    if (!lt_comm_launched()) return lt_comm_check_launch(err);
    int64_t dp = 1, pp = 1, tp = 1;
    double timeout = 300;
    lt_status st = lt_config_get_int(ctx->config, "parallel", "dp", &dp, err);
    if (st == LT_OK) st = lt_config_get_int(ctx->config, "parallel", "pp", &pp, err);
    if (st == LT_OK) st = lt_config_get_int(ctx->config, "parallel", "tp", &tp, err);
    if (st == LT_OK) st = lt_config_get_double(ctx->config, "train", "comm_timeout_s", &timeout, err);
    if (st == LT_OK) st = lt_comm_init(comm, (int)dp, (int)pp, (int)tp, timeout, err);
    return st;
}

lt_status lt_cmd_rank_part(lt_comm *comm, lt_llama *m, lt_adamw *opt, lt_tp_ops *ops, const lt_llama_part *held,
                           lt_error *err) {
    const lt_comm_layout *l = comm ? lt_comm_layout_of(comm) : NULL;
    if (!l) return LT_OK;
    lt_llama part;
    lt_adamw po = {0};
    lt_status st = lt_llama_create_part(&part, &m->shape, l->tp, l->tp_rank, held, err);
    if (st == LT_OK && opt) st = lt_adamw_init(&po, part.n_params, err);
    if (st != LT_OK) {
        lt_llama_free(&part);
        return st;
    }
    lt_llama_copy_shard(m, m->params, &part, part.params);
    if (opt) {
        lt_llama_copy_shard(m, opt->m, &part, po.m);
        lt_llama_copy_shard(m, opt->v, &part, po.v);
        po.t = opt->t;
        lt_adamw_free(opt);
        *opt = po;
    }
    if (l->tp > 1) lt_dist_tp_ops(comm, lt_comm_has_device(comm), ops), part.tp_ops = ops; /* (the GPU's: NCCL) */
    lt_llama_free(m);
    *m = part;
    return LT_OK;
}

void lt_cmd_comm_fail(lt_comm *comm, const lt_error *err) {
    if (!comm || !lt_comm_layout_of(comm)->distributed) return;
    lt_error e = *err;
    lt_error_prefix(&e, "%s: ", lt_comm_who(comm));
    lt_error_print(&e, stderr);
    lt_comm_abort(comm, lt_exit_code(e.status), "stopping every rank of the job (MPI_Abort)");
}

/* ------------------------------------------------------------------ the plans */

/* LT_OK when model m has the dimensions of the [model] stored with the plans. */
static lt_status check_plans_model(const lt_run_info *run, const char *db, const lt_llama *m, int tp, lt_error *err) {
    lt_config *cfg = lt_config_new();
    if (!cfg) return lt_fail(err, LT_ERR_NOMEM, db, "out of memory");
    lt_model_shape want;
    lt_status st = lt_config_load_string(cfg, run->config ? run->config : "", db, err);
    if (st == LT_OK) st = lt_model_from_config(cfg, NULL, &want, err);
    lt_config_free(cfg);
    if (st != LT_OK) {
        lt_error_prefix(err, "the config stored in the plan file");
        return st;
    }
    const char *names[] = {"layers", "hidden", "heads", "kv_heads", "ffn", "vocab"};
    int plan[] = {want.layers, want.hidden, want.heads, want.kv_heads, want.ffn, want.vocab};
    int ours[] = {m->shape.layers, m->shape.hidden, m->shape.heads, m->shape.kv_heads, m->shape.ffn, m->shape.vocab};
    for (int i = 0; i < 6; i++)
        if (plan[i] != ours[i] || (i == 0 && run->layers != ours[0])) {
            lt_fail(err, LT_ERR_CONFIG, db, "the plans are for a model with %s = %d, this model has %d", names[i],
                    i == 0 ? run->layers : plan[i], ours[i]);
            lt_error_hint(err, "use the [model] the plans were built with (sqlite3 %s \"SELECT config FROM runs\")", db);
            return LT_ERR_CONFIG;
        }
    if (run->tp != tp) {
        /* a tp > 1 plan run at tp = 1 would look like it worked: every rank would hold whole
         * layers and none of the plan's TP collectives would happen */
        lt_fail(err, LT_ERR_CONFIG, db, "the plans are for parallel.tp = %d; this job runs tensor parallelism of %d%s",
                run->tp, tp, tp == 1 ? " (one process per DP rank and stage)" : "");
        lt_error_hint(err, "train with the layout the plans were built for: parallel.tp = %d and dp x pp x tp "
                           "processes (mpirun -n / srun -n)", run->tp);
        return LT_ERR_CONFIG;
    }
    return LT_OK;
}

lt_status lt_cmd_open_plans(const char *db, const lt_llama *m, int tp, lt_store **store, lt_error *err) {
    lt_status st = lt_store_open(store, db, err);
    lt_run_info run = {0};
    if (st == LT_OK) st = lt_store_run_info(*store, &run, err);
    if (st == LT_OK) st = check_plans_model(&run, db, m, tp, err);
    lt_run_info_free(&run);
    return st;
}

lt_status lt_cmd_plans_counts(lt_store *store, const char *db, lt_cost_model *cm, lt_error *err) {
    lt_run_info run = {0};
    lt_config *cfg = lt_config_new();
    lt_status st = cfg ? lt_store_run_info(store, &run, err) : lt_fail(err, LT_ERR_NOMEM, db, "out of memory");
    if (st == LT_OK) st = lt_config_load_string(cfg, run.config ? run.config : "", db, err);
    if (st == LT_OK) st = lt_cost_counts_from_config(cm, cfg, err);
    if (st != LT_OK) lt_error_prefix(err, "the cost model of the plans' config: ");
    lt_run_info_free(&run);
    lt_config_free(cfg);
    return st;
}

lt_status lt_cmd_load_plan_samples(lt_docs *docs, const lt_step_plan *p, const lt_sample *src, lt_train_sample *out,
                                   lt_error *err) {
    for (size_t i = 0; i < p->n_samples; i++) {
        int32_t *tokens;
        lt_status st = lt_docs_get_piece(docs, src[i].task, src[i].doc, src[i].offset, src[i].length, &tokens, err);
        if (st != LT_OK) {
            lt_error_prefix(err, "step %" PRIu64 ", sample %zu (task=%u,doc=%" PRIu64 ",tok=%" PRId64 "): ", p->step, i,
                            src[i].task, src[i].doc, src[i].offset);
            return st;
        }
        out[i] = (lt_train_sample){.tokens = tokens, .len = (int)src[i].length};
    }
    return LT_OK;
}
