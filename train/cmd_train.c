/*
 * train/cmd_train.c — `trainer train --whole`: training on whole documents of a dataprep
 * output in one process, before the plan executor exists ([wave 2, 3/7] replaces the data
 * path with stored plans). Each step takes the next train.batch_docs documents in `dataprep
 * cat` order (wrapping around: a new epoch), each truncated at plan.context_len and run as
 * its own unit; the loss is normalized by the step's predicted tokens (train/model.h);
 * then global-norm clipping, the warmup + cosine learning rate and AdamW (train/optim.h).
 *
 * Checkpoints go to --out DIR (else train.checkpoint_dir, else WORK_DIR/NAME/checkpoints)
 * every train.checkpoint_every steps and at the end, the newest train.keep_checkpoints
 * kept. --resume continues from the newest one there: the data position, step, optimizer
 * moments and random stream are in the checkpoint, so a resumed run is bit-identical to
 * one that never stopped (tests/train/cli.sh compares the files).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/cli.h"        /* lt_cli_option_value */
#include "lib/config.h"     /* lt_config_get_* */
#include "lib/files.h"      /* lt_mkdir_p */
#include "lib/log.h"        /* LT_INFO */
#include "train/ckpt.h"     /* lt_ckpt_* */
#include "train/commands.h" /* train_command, lt_cmd_* */
#include "train/cmd.h"      /* lt_cmd_model_shape */
#include "train/cpu.h"      /* lt_cpu_init */
#include "train/docs.h"     /* lt_docs_* */
#include "train/optim.h"    /* lt_optim_config, lt_adamw */

typedef struct train_args {
    const char *data, *out, *init;
    long long steps; /* stop when this many steps are done; 0 = the schedule's total */
    bool whole, resume;
} train_args;

static int parse(lt_cli_ctx *ctx, train_args *a) {
    memset(a, 0, sizeof *a);
    for (int i = 1; i < ctx->argc; i++) {
        int missing = 0;
        const char *v;
        char *end;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--data", &missing))) a->data = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--out", &missing))) a->out = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--init", &missing))) a->init = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--steps", &missing))) {
            a->steps = strtoll(v, &end, 10);
            if (*end || a->steps < 1) return lt_cli_usage(ctx, "--steps wants a positive count, got '%.100s'", v);
        } else if (missing) return lt_cli_usage(ctx, "%s needs a value", ctx->argv[i]);
        else if (strcmp(ctx->argv[i], "--whole") == 0) a->whole = true;
        else if (strcmp(ctx->argv[i], "--resume") == 0) a->resume = true;
        else if (ctx->argv[i][0] == '-') return lt_cli_unknown_option(ctx, ctx->argv[i]);
        else return lt_cli_usage(ctx, "unexpected argument '%.200s'", ctx->argv[i]);
    }
    if (!a->whole)
        return lt_cli_usage(ctx, "training from stored plans arrives with the plan executor; today give --whole "
                                 "(whole documents of --data DIR in one process)");
    if (!a->data) return lt_cli_usage(ctx, "which documents? give --data DIR (a dataprep output)");
    if (a->init && a->resume) return lt_cli_usage(ctx, "--init and --resume exclude each other");
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
static lt_status start_state(const lt_cli_ctx *ctx, const train_args *a, const char *dir, lt_llama *m, lt_adamw *opt,
                             lt_ckpt_state *st, lt_error *err) {
    memset(st, 0, sizeof *st);
    if (a->resume) {
        char *latest = NULL;
        lt_status s = lt_ckpt_latest(dir, &latest, err);
        if (s != LT_OK) return s;
        if (!latest) {
            lt_fail(err, LT_ERR_USAGE, dir, "--resume: no checkpoint to resume from");
            lt_error_hint(err, "start without --resume (or give --init CKPT)");
            return LT_ERR_USAGE;
        }
        s = lt_cmd_load_model(ctx, latest, m, opt, st, err);
        if (s == LT_OK) LT_INFO("resuming from %s at step %" PRId64, latest, st->step);
        free(latest);
        return s;
    }
    int64_t seed;
    if (lt_config_get_int(ctx->config, "train", "seed", &seed, NULL) != LT_OK &&
        lt_config_get_int(ctx->config, "plan", "seed", &seed, err) != LT_OK)
        return LT_ERR_CONFIG;
    lt_rng_seed(&st->rng, (uint64_t)seed);
    lt_status s;
    if (a->init) {
        lt_ckpt_state ignored;
        s = lt_cmd_load_model(ctx, a->init, m, NULL, &ignored, err);
    } else {
        lt_model_shape shape;
        s = lt_cmd_model_shape(ctx, &shape, err); /* no model named at all: a usage error */
        if (s == LT_OK) s = lt_llama_create(m, &shape, err);
        if (s == LT_OK) lt_llama_init(m, (uint64_t)seed);
    }
    if (s == LT_OK) s = lt_adamw_init(opt, m->n_params, err);
    return s;
}

typedef struct step_batch {
    lt_train_sample *samples;
    int32_t **tokens;
    lt_train_slice *slices;
    lt_train_unit *units;
    int n;
} step_batch;

static void batch_clear(step_batch *b) {
    for (int i = 0; i < b->n; i++) free(b->tokens[i]);
    b->n = 0;
}

static lt_status save(const char *dir, const lt_llama *m, const lt_adamw *opt, const lt_ckpt_state *st, int keep,
                      lt_error *err) {
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
    char *dir = checkpoint_dir(ctx, &a);
    if (!dir) return lt_error_exit(&err);
    lt_llama m;
    memset(&m, 0, sizeof m);
    lt_adamw opt;
    memset(&opt, 0, sizeof opt);
    lt_ckpt_state st;
    lt_docs *docs = NULL;
    lt_pool *pool = NULL;
    step_batch b = {0};
    float *grads = NULL;
    lt_layer_views *glv = NULL;
    int threads = 1;
    s = lt_mkdir_p(dir, 0777, &err);
    if (s == LT_OK) s = start_state(ctx, &a, dir, &m, &opt, &st, &err);
    if (s == LT_OK) s = lt_docs_open(&docs, a.data, lt_cmd_context_len(ctx), &err);
    if (s == LT_OK && lt_docs_count(docs) == 0) s = lt_fail(&err, LT_ERR_INPUT, a.data, "the dataprep output has no document");
    if (s == LT_OK) s = lt_cmd_backend(ctx, &err);
    if (s == LT_OK) s = lt_cpu_init(lt_cmd_threads(ctx), &pool, &threads, &err);
    if (s == LT_OK) {
        b.samples = calloc((size_t)batch_docs, sizeof *b.samples);
        b.tokens = calloc((size_t)batch_docs, sizeof *b.tokens);
        b.slices = calloc((size_t)batch_docs, sizeof *b.slices);
        b.units = calloc((size_t)batch_docs, sizeof *b.units);
        grads = calloc(m.n_params, sizeof *grads);
        glv = calloc((size_t)m.shape.layers, sizeof *glv);
        if (!b.samples || !b.tokens || !b.slices || !b.units || !grads || !glv)
            s = lt_fail(&err, LT_ERR_NOMEM, NULL, "out of memory for a training step");
    }
    if (s == LT_OK)
        LT_INFO("training %s (%zu parameters) on %s: steps %" PRId64 "..%" PRId64 ", %" PRId64 " documents a step, "
                "%d threads, checkpoints in %s",
                m.shape.name ? m.shape.name : "model", m.n_params, a.data, st.step, stop, batch_docs, threads, dir);
    lt_llama_views g;
    if (s == LT_OK) lt_llama_views_of(&m, grads, glv, &g);
    uint64_t count = docs ? lt_docs_count(docs) : 0;
    double last_loss = 0;
    while (s == LT_OK && st.step < stop) {
        double t0 = now_s();
        /* the step's documents */
        for (int i = 0; s == LT_OK && i < batch_docs; i++) {
            int len;
            s = lt_docs_get(docs, st.data_pos, &b.tokens[i], &len, &err);
            if (s != LT_OK) break;
            b.samples[i] = (lt_train_sample){b.tokens[i], len};
            b.slices[i] = (lt_train_slice){i, 0, len};
            b.units[i] = (lt_train_unit){&b.slices[i], 1};
            b.n = i + 1;
            if (++st.data_pos == count) st.data_pos = 0, st.data_epoch++;
        }
        if (s != LT_OK) break;
        /* one-token documents predict nothing: keep them out of the units */
        lt_train_unit *units = b.units;
        int n_units = 0;
        for (int i = 0; i < b.n; i++)
            if (b.samples[i].len >= 2) units[n_units++] = b.units[i];
        lt_batch batch = {b.samples, b.n};
        int64_t N = lt_batch_predicted_tokens(&batch);
        double loss = 0, norm = 0, lr = lt_lr_at(&oc, st.step);
        memset(grads, 0, m.n_params * sizeof *grads);
        if (N > 0)
            s = lt_llama_step_units(&m, &batch, units, n_units, (float)(1.0 / (double)N), &g, NULL, &loss, pool, &err);
        if (s != LT_OK) break;
        norm = lt_clip_grads(grads, m.n_params, oc.grad_clip);
        lt_adamw_step(&opt, &m, m.params, grads, lr, &oc);
        st.step++;
        double dt = now_s() - t0;
        last_loss = N > 0 ? loss / (double)N : 0;
        int64_t tokens = 0;
        for (int i = 0; i < b.n; i++) tokens += b.samples[i].len;
        printf("step=%" PRId64 " loss=%.6f lr=%.4e grad_norm=%.4f tokens=%" PRId64 " tok/s=%.0f\n", st.step, last_loss,
               lr, norm, tokens, dt > 0 ? (double)tokens / dt : 0.0);
        fflush(stdout);
        batch_clear(&b);
        if (every > 0 && st.step % every == 0 && st.step < stop) s = save(dir, &m, &opt, &st, (int)keep, &err);
    }
    if (s == LT_OK) s = save(dir, &m, &opt, &st, (int)keep, &err);
    batch_clear(&b);
    free(b.samples), free(b.tokens), free(b.slices), free(b.units), free(grads), free(glv);
    lt_pool_destroy(pool);
    lt_docs_close(docs);
    lt_adamw_free(&opt);
    lt_llama_free(&m);
    free(dir);
    return s == LT_OK ? 0 : lt_error_exit(&err);
}
