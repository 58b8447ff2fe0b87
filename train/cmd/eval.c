/*
 * train/cmd/eval.c — the mean next-token loss of a model over whole documents, one code
 * path for `trainer eval` and the validation loss of `trainer train` (train.eval_every):
 * each document run from its start as one unit (whole-document causal attention, truncated
 * at plan.context_len), no gradient, its summed cross-entropy and predicted tokens added up
 * (a document of n tokens predicts n - 1; one of fewer than 2 tokens predicts nothing).
 *
 * `trainer eval --ckpt CKPT` scores the first N documents of a dataprep output (--data
 * DIR, in `dataprep cat` order), or with --db PLANS --heldout the first N held-out
 * documents of a plan file (data.holdout: table heldout, docs/plans-schema.md) read from
 * --data DIR. Last line: `loss=L tokens=T` (T = predicted tokens).
 */
#include <inttypes.h>
#include <stdbool.h>
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
#include "train/model/model.h"   /* lt_llama_step_units */
#include "plans/store/store.h"   /* lt_store_open, lt_store_heldout */

/* One document's summed next-token loss (added to *loss_sum) and predicted tokens (to
 * *predicted): one unit over the whole document, no gradient. */
static lt_status doc_loss(const lt_llama *m, int32_t *tokens, int len, lt_pool *pool, double *loss_sum,
                          int64_t *predicted, lt_error *err) {
    if (len < 2) return LT_OK;
    lt_train_sample s = {tokens, len};
    lt_batch b = {&s, 1};
    lt_train_slice sl = {0, 0, len};
    lt_train_unit u = {&sl, 1};
    double l = 0;
    lt_status st = lt_llama_step_units(m, &b, &u, 1, 0.0f, NULL, NULL, &l, pool, err);
    if (st == LT_OK) *loss_sum += l, *predicted += len - 1;
    return st;
}

lt_status lt_cmd_docs_loss(const lt_llama *m, lt_docs *docs, const lt_sample *src, size_t n, int part, int parts,
                           lt_pool *pool, double *loss_sum, int64_t *predicted, lt_error *err) {
    *loss_sum = 0;
    *predicted = 0;
    lt_status st = LT_OK;
    for (size_t i = (size_t)part; st == LT_OK && i < n; i += (size_t)parts) {
        int32_t *tokens = NULL;
        if (src[i].length > INT32_MAX)
            return lt_fail(err, LT_ERR_INPUT, NULL, "held-out document %zu (task=%" PRIu32 ",doc=%" PRIu64 "): %" PRId64
                           " tokens", i, src[i].task, src[i].doc, src[i].length);
        st = lt_docs_get_piece(docs, src[i].task, src[i].doc, src[i].offset, src[i].length, &tokens, err);
        if (st == LT_OK) st = doc_loss(m, tokens, (int)src[i].length, pool, loss_sum, predicted, err);
        free(tokens);
    }
    return st;
}

/* --db PLANS --heldout: the first n_docs held-out documents (*docs malloc'd, *n of them). */
static lt_status heldout_docs(const char *db, long long n_docs, int64_t context_len, lt_sample **docs, size_t *n,
                              lt_error *err) {
    lt_store *store = NULL;
    bool present = false;
    lt_status st = lt_store_open(&store, db, err);
    if (st == LT_OK) st = lt_store_heldout(store, &present, docs, n, err);
    lt_store_close(store);
    if (st == LT_OK && (!present || *n == 0)) {
        st = lt_fail(err, LT_ERR_INPUT, db, "the plan file holds %s", present ? "no held-out document (data.holdout = 0)"
                                                                              : "no held-out set (an older planner)");
        lt_error_hint(err, "set data.holdout (e.g. 0.01) and rebuild the plans with 'planner build'");
    }
    if (st == LT_OK && *n > (size_t)n_docs) *n = (size_t)n_docs;
    /* a run with a shorter plan.context_len than the plans' reads less of each document */
    for (size_t i = 0; st == LT_OK && context_len > 0 && i < *n; i++)
        if ((*docs)[i].length > context_len) (*docs)[i].length = context_len;
    return st;
}

int eval_command(lt_cli_ctx *ctx) {
    const char *ckpt = NULL, *data = NULL, *docs_arg = NULL, *db = NULL;
    bool heldout = false;
    for (int i = 1; i < ctx->argc; i++) {
        int missing = 0;
        const char *v;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--ckpt", &missing))) ckpt = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--data", &missing))) data = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--docs", &missing))) docs_arg = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--db", &missing))) db = v;
        else if (strcmp(ctx->argv[i], "--heldout") == 0) heldout = true;
        else if (missing) return lt_cli_usage(ctx, "%s needs a value", ctx->argv[i]);
        else if (ctx->argv[i][0] == '-') return lt_cli_unknown_option(ctx, ctx->argv[i]);
        else return lt_cli_usage(ctx, "unexpected argument '%.200s'", ctx->argv[i]);
    }
    if (!ckpt) return lt_cli_usage(ctx, "which model? give --ckpt CKPT");
    if (!data) return lt_cli_usage(ctx, "which documents? give --data DIR (a dataprep output)");
    if (heldout != (db != NULL))
        return lt_cli_usage(ctx, "--db PLANS and --heldout go together (the plan file's held-out documents)");
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
    lt_sample *held = NULL; /* --heldout: the documents */
    size_t n_held = 0;
    if (heldout) st = heldout_docs(db, n_docs, lt_cmd_context_len(ctx), &held, &n_held, &err);
    uint64_t n = heldout ? n_held : lt_docs_count(docs) < (uint64_t)n_docs ? lt_docs_count(docs) : (uint64_t)n_docs;
    lt_progress_options po = {NULL, -1, 0, NULL, NULL, !lt_log_enabled(LT_LOG_INFO)};
    lt_progress *prog = lt_progress_start_opts("eval", n, "docs", &po);
    double loss = 0;
    int64_t predicted = 0;
    for (uint64_t i = 0; st == LT_OK && i < n; i++) {
        double l = 0;
        int64_t p = 0;
        if (heldout) {
            st = lt_cmd_docs_loss(&m, docs, held + i, 1, 0, 1, pool, &l, &p, &err);
        } else {
            int32_t *tokens = NULL;
            int len;
            st = lt_docs_get(docs, i, &tokens, &len, &err);
            if (st == LT_OK) st = doc_loss(&m, tokens, len, pool, &l, &p, &err);
            if (st != LT_OK) snprintf(err.where, sizeof err.where, "%.300s document %" PRIu64, data, i);
            free(tokens);
        }
        loss += l, predicted += p;
        lt_progress_add(prog, 1);
    }
    free(held);
    lt_progress_finish(prog);
    lt_pool_destroy(pool);
    lt_docs_close(docs);
    lt_llama_free(&m);
    lt_backend_cuda_close(be);
    if (st != LT_OK) return lt_error_exit(&err);
    if (predicted == 0) {
        lt_fail(&err, LT_ERR_INPUT, heldout ? db : data, "no document with at least 2 tokens among the first %" PRIu64,
                n);
        return lt_error_exit(&err);
    }
    printf("docs=%" PRIu64 "\n", n);
    printf("loss=%.6f tokens=%" PRId64 "\n", loss / (double)predicted, predicted);
    return 0;
}
