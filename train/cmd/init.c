/*
 * train/cmd/init.c — the commands that make and convert model files:
 *
 *   trainer init --config FILE [--set k=v]... --out CKPT
 *       a fresh model of the config's [model], initialized with train.seed (else
 *       plan.seed), as a step-0 checkpoint with zero AdamW moments
 *   trainer export CKPT --hf DIR
 *       a Hugging Face LlamaForCausalLM directory (config.json, model.safetensors)
 *   trainer import --hf DIR --out CKPT
 *       a Hugging Face directory as a step-0 checkpoint of parameters only
 *
 * Each prints one line on success: `wrote PATH: MODEL NPARAMS parameters`.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lib/cli.h"              /* lt_cli_option_value, lt_cli_usage, lt_cli_unknown_option */
#include "lib/config.h"           /* lt_config_get_size, lt_config_is_set */
#include "lib/log.h"              /* LT_INFO */
#include "lib/rng.h"              /* lt_rng_seed */
#include "train/io/ckpt.h"        /* lt_ckpt_write, lt_ckpt_read */
#include "train/cmd/cmd.h"        /* init_command, hf_export_command, hf_import_command */
#include "train/io/hf.h"          /* lt_hf_export, lt_hf_import */
#include "train/model/model.h"    /* lt_llama_create, lt_llama_init */
#include "train/model/optim.h"    /* lt_adamw_init */
#include "train/io/safetensors.h" /* lt_safetensors_dtype_name */

/* Options of the three commands: --out, --hf, and at most one positional argument. */
typedef struct file_args {
    const char *out, *hf, *positional;
} file_args;

static int parse(lt_cli_ctx *ctx, file_args *a, bool want_out, bool want_hf, bool want_positional) {
    memset(a, 0, sizeof *a);
    for (int i = 1; i < ctx->argc; i++) {
        int missing = 0;
        const char *v;
        if (want_out && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--out", &missing))) a->out = v;
        else if (!missing && want_hf && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--hf", &missing)))
            a->hf = v;
        else if (missing) return lt_cli_usage(ctx, "%s needs a value", ctx->argv[i]);
        else if (ctx->argv[i][0] == '-' && ctx->argv[i][1] != '\0') return lt_cli_unknown_option(ctx, ctx->argv[i]);
        else if (want_positional && !a->positional) a->positional = ctx->argv[i];
        else return lt_cli_usage(ctx, "unexpected argument '%.200s'", ctx->argv[i]);
    }
    return 0;
}

/* The step-0 state every new checkpoint starts with: the training stream seeded from the
 * run's seed, nothing consumed. */
static void fresh_state(const lt_cli_ctx *ctx, lt_ckpt_state *st) {
    memset(st, 0, sizeof *st);
    lt_rng_seed(&st->rng, lt_cmd_seed(ctx));
}

int init_command(lt_cli_ctx *ctx) {
    file_args a;
    int rc = parse(ctx, &a, true, false, false);
    if (rc) return rc;
    if (!a.out) return lt_cli_usage(ctx, "where does the checkpoint go? give --out CKPT");
    lt_error err;
    lt_model_shape shape;
    lt_status s = lt_cmd_model_shape(ctx, &shape, &err);
    if (s != LT_OK) return lt_error_exit(&err);
    lt_llama m;
    lt_adamw opt = {0};
    if ((s = lt_llama_create(&m, &shape, &err)) != LT_OK) return lt_error_exit(&err);
    lt_llama_init(&m, lt_cmd_seed(ctx));
    lt_ckpt_state st;
    fresh_state(ctx, &st);
    s = lt_adamw_init(&opt, m.n_params, &err);
    if (s == LT_OK) s = lt_ckpt_write(a.out, &m, &opt, &st, &err);
    if (s == LT_OK) printf("wrote %s: %s %zu parameters\n", a.out, m.shape.name ? m.shape.name : "custom", m.n_params);
    lt_adamw_free(&opt);
    lt_llama_free(&m);
    return s == LT_OK ? 0 : lt_error_exit(&err);
}

int hf_export_command(lt_cli_ctx *ctx) {
    file_args a;
    int rc = parse(ctx, &a, false, true, true);
    if (rc) return rc;
    if (!a.positional) return lt_cli_usage(ctx, "which checkpoint? give it as the argument: export CKPT --hf DIR");
    if (!a.hf) return lt_cli_usage(ctx, "where does the model go? give --hf DIR");
    lt_error err;
    int64_t max_pos = 0;
    uint64_t ctx_len = 0;
    if (lt_config_is_set(ctx->config, "plan", "context_len") &&
        lt_config_get_size(ctx->config, "plan", "context_len", &ctx_len, NULL) == LT_OK && ctx_len <= INT32_MAX)
        max_pos = (int64_t)ctx_len;
    lt_llama m;
    lt_status s = lt_ckpt_read(a.positional, &m, NULL, NULL, &err);
    if (s != LT_OK) return lt_error_exit(&err);
    s = lt_hf_export(&m, a.hf, max_pos, &err);
    if (s == LT_OK) printf("wrote %s: %s %zu parameters\n", a.hf, m.shape.name ? m.shape.name : "custom", m.n_params);
    lt_llama_free(&m);
    return s == LT_OK ? 0 : lt_error_exit(&err);
}

int hf_import_command(lt_cli_ctx *ctx) {
    file_args a;
    int rc = parse(ctx, &a, true, true, false);
    if (rc) return rc;
    if (!a.hf) return lt_cli_usage(ctx, "which model? give --hf DIR (a Hugging Face model directory)");
    if (!a.out) return lt_cli_usage(ctx, "where does the checkpoint go? give --out CKPT");
    lt_error err;
    lt_llama m;
    lt_hf_import_info info;
    lt_status s = lt_hf_import(a.hf, &m, &info, &err);
    if (s != LT_OK) return lt_error_exit(&err);
    for (int d = LT_SAFETENSORS_F16; d <= LT_SAFETENSORS_BF16; d++)
        if (info.dtypes & (1u << d))
            LT_INFO("import: %s tensors widened to fp32 (exact)", lt_safetensors_dtype_name((lt_safetensors_dtype)d));
    if (info.n_ignored)
        LT_INFO("import: ignored %zu tensor%s that the model does not have (first: %s)", info.n_ignored,
                info.n_ignored == 1 ? "" : "s", info.first_ignored);
    lt_ckpt_state st;
    fresh_state(ctx, &st);
    s = lt_ckpt_write(a.out, &m, NULL, &st, &err);
    if (s == LT_OK) printf("wrote %s: %s %zu parameters\n", a.out, m.shape.name ? m.shape.name : "custom", m.n_params);
    lt_llama_free(&m);
    return s == LT_OK ? 0 : lt_error_exit(&err);
}
