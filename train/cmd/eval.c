/*
 * train/cmd/eval.c — `trainer eval`: mean next-token loss of a checkpoint over the first N
 * documents of a dataprep output, each document whole (one unit per document, truncated
 * at plan.context_len), in `dataprep cat` order. Last line: `loss=L tokens=T` (T =
 * predicted tokens: a document of n tokens predicts n - 1).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cli.h"      /* lt_cli_ctx, lt_cli_option_value */
#include "lib/config.h"   /* lt_config_get_size */
#include "lib/log.h"      /* lt_log_enabled */
#include "lib/progress.h" /* lt_progress_* */
#include "train/model/backend.h" /* lt_backend_cuda_open, _upload, _close */
#include "train/io/ckpt.h"   /* lt_ckpt_read, lt_ckpt_check_shape */
#include "train/cmd/commands.h" /* eval_command, lt_cmd_* */
#include "train/cpu/threads.h"    /* lt_cpu_init */
#include "train/io/docs.h"   /* lt_docs_* */
#include "train/model/model.h"  /* lt_llama_forward */

/* The checkpoint's model, checked against the config's [model] when the config sets one. */
lt_status lt_cmd_load_model(const lt_cli_ctx *ctx, const char *ckpt, lt_llama *m, lt_adamw *opt, lt_ckpt_state *st,
                            lt_error *err) {
    lt_ckpt_state local;
    lt_status s = lt_ckpt_read(ckpt, m, opt, st ? st : &local, err);
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

/* The rank's GPU: its local rank on the node (Slurm's, else Open MPI's), else 0. */
static int local_device(void) {
    const char *v = getenv("SLURM_LOCALID");
    if (!v) v = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    char *end;
    long d = v ? strtol(v, &end, 10) : 0;
    return v && *end == '\0' && d >= 0 && d < 1024 ? (int)d : 0;
}

lt_status lt_cmd_open_backend(const lt_cli_ctx *ctx, lt_backend **be, lt_error *err) {
    return lt_cmd_open_backend_on(ctx, NULL, be, err);
}

lt_status lt_cmd_open_backend_on(const lt_cli_ctx *ctx, lt_comm *comm, lt_backend **be, lt_error *err) {
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
        lt_status st = lt_comm_attach_device(comm, device, compute, comm_stream, err);
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

lt_status lt_cmd_comm(const lt_cli_ctx *ctx, lt_comm **comm, lt_error *err) {
    *comm = NULL;
    if (!lt_comm_launched()) return lt_comm_check_launch(err);
    int64_t dp = 1, pp = 1;
    double timeout = 300;
    lt_status st = lt_config_get_int(ctx->config, "parallel", "dp", &dp, err);
    if (st == LT_OK) st = lt_config_get_int(ctx->config, "parallel", "pp", &pp, err);
    if (st == LT_OK) st = lt_config_get_double(ctx->config, "train", "comm_timeout_s", &timeout, err);
    if (st == LT_OK) st = lt_comm_init(comm, (int)dp, (int)pp, timeout, err);
    return st;
}

void lt_cmd_comm_fail(lt_comm *comm, const lt_error *err) {
    if (!comm || !lt_comm_layout_of(comm)->distributed) return;
    lt_error e = *err;
    lt_error_prefix(&e, "%s: ", lt_comm_who(comm));
    lt_error_print(&e, stderr);
    lt_comm_abort(comm, lt_exit_code(e.status), "stopping every rank of the job (MPI_Abort)");
}

int eval_command(lt_cli_ctx *ctx) {
    const char *ckpt = NULL, *data = NULL, *docs_arg = NULL;
    for (int i = 1; i < ctx->argc; i++) {
        int missing = 0;
        const char *v;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--ckpt", &missing))) ckpt = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--data", &missing))) data = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--docs", &missing))) docs_arg = v;
        else if (missing) return lt_cli_usage(ctx, "%s needs a value", ctx->argv[i]);
        else if (ctx->argv[i][0] == '-') return lt_cli_unknown_option(ctx, ctx->argv[i]);
        else return lt_cli_usage(ctx, "unexpected argument '%.200s'", ctx->argv[i]);
    }
    if (!ckpt) return lt_cli_usage(ctx, "which model? give --ckpt CKPT");
    if (!data) return lt_cli_usage(ctx, "which documents? give --data DIR (a dataprep output)");
    long long n_docs = 100;
    if (docs_arg) {
        char *end;
        n_docs = strtoll(docs_arg, &end, 10);
        if (*end || n_docs < 1) return lt_cli_usage(ctx, "--docs wants a positive count, got '%.100s'", docs_arg);
    }
    lt_error err;
    lt_llama m;
    lt_status st = lt_cmd_load_model(ctx, ckpt, &m, NULL, NULL, &err);
    if (st != LT_OK) return lt_error_exit(&err);
    lt_docs *docs = NULL;
    lt_pool *pool = NULL;
    int threads;
    lt_backend *be = NULL;
    st = lt_docs_open(&docs, data, lt_cmd_context_len(ctx), &err);
    if (st == LT_OK) st = lt_cmd_open_backend(ctx, &be, &err);
    if (st == LT_OK && be) st = lt_backend_cuda_upload(be, &m, &err); /* the passes read its bf16 copy */
    if (st == LT_OK) st = lt_cpu_init(lt_cmd_threads(ctx), &pool, &threads, &err);
    if (st != LT_OK) {
        lt_docs_close(docs);
        lt_llama_free(&m);
        lt_backend_cuda_close(be);
        return lt_error_exit(&err);
    }
    uint64_t n = lt_docs_count(docs) < (uint64_t)n_docs ? lt_docs_count(docs) : (uint64_t)n_docs;
    lt_progress_options po = {NULL, -1, 0, NULL, NULL, !lt_log_enabled(LT_LOG_INFO)};
    lt_progress *prog = lt_progress_start_opts("eval", n, "docs", &po);
    double loss = 0;
    int64_t predicted = 0;
    for (uint64_t i = 0; st == LT_OK && i < n; i++) {
        int32_t *tokens;
        int len;
        st = lt_docs_get(docs, i, &tokens, &len, &err);
        if (st != LT_OK) break;
        if (len >= 2) {
            lt_train_sample s = {tokens, len};
            lt_batch b = {&s, 1};
            lt_train_slice sl = {0, 0, len};
            lt_train_unit u = {&sl, 1};
            double l = 0;
            st = lt_llama_step_units(&m, &b, &u, 1, 0.0f, NULL, NULL, &l, pool, &err);
            if (st != LT_OK) snprintf(err.where, sizeof err.where, "%.300s document %" PRIu64, data, i);
            loss += l;
            predicted += len - 1;
        }
        free(tokens);
        lt_progress_add(prog, 1);
    }
    lt_progress_finish(prog);
    lt_pool_destroy(pool);
    lt_docs_close(docs);
    lt_llama_free(&m);
    lt_backend_cuda_close(be);
    if (st != LT_OK) return lt_error_exit(&err);
    if (predicted == 0) {
        lt_fail(&err, LT_ERR_INPUT, data, "no document with at least 2 tokens among the first %" PRIu64, n);
        return lt_error_exit(&err);
    }
    printf("docs=%" PRIu64 "\n", n);
    printf("loss=%.6f tokens=%" PRId64 "\n", loss / (double)predicted, predicted);
    return 0;
}
