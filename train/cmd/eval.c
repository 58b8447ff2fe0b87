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

#include "lib/cli.h"             /* lt_cli_ctx, lt_cli_option_value */
#include "lib/log.h"             /* lt_log_enabled */
#include "lib/progress.h"        /* lt_progress_* */
#include "train/model/backend.h" /* lt_backend_cuda_upload, _close */
#include "train/cmd/cmd.h"       /* eval_command, lt_cmd_* */
#include "train/cpu/threads.h"   /* lt_cpu_init */
#include "train/io/docs.h"       /* lt_docs_* */
#include "train/model/model.h"   /* lt_llama_forward */

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
