/*
 * train/commands.h — the trainer's model-running commands (eval, generate, train) and what
 * they share: loading a checkpoint checked against the config, the context length and the
 * thread count of the config. The table that dispatches them is train/trainer.c.
 */
#ifndef LT_TRAIN_COMMANDS_H
#define LT_TRAIN_COMMANDS_H

#include <stdint.h>

#include "lib/cli.h"     /* lt_cli_ctx */
#include "train/ckpt.h"  /* lt_ckpt_state */
#include "train/model.h" /* lt_llama */
#include "train/optim.h" /* lt_adamw */
#include "plans/store.h" /* lt_run_info */

int eval_command(lt_cli_ctx *ctx);     /* train/cmd_eval.c */
int generate_command(lt_cli_ctx *ctx); /* train/cmd_generate.c */
int train_command(lt_cli_ctx *ctx);    /* train/cmd_train.c */
int check_command(lt_cli_ctx *ctx);    /* train/cmd_check.c */

/* Read checkpoint `ckpt` (moments into opt when non-NULL, state into st when non-NULL);
 * when the config sets [model] keys, the checkpoint's dimensions must match them. */
lt_status lt_cmd_load_model(const lt_cli_ctx *ctx, const char *ckpt, lt_llama *m, lt_adamw *opt, lt_ckpt_state *st,
                            lt_error *err);
/* plan.context_len, or 0 when unset (no truncation). */
int64_t lt_cmd_context_len(const lt_cli_ctx *ctx);
/* train.threads (0 = one per CPU). */
int lt_cmd_threads(const lt_cli_ctx *ctx);
/* LT_OK for train.backend = cpu; any other backend is LT_ERR_CONFIG naming the key's origin
 * (only the CPU backend exists yet). */
lt_status lt_cmd_backend(const lt_cli_ctx *ctx, lt_error *err);
/* LT_OK when model m has the dimensions of the [model] stored with the plans (run->config
 * and run->layers); else LT_ERR_CONFIG naming the first that differs and `db`. */
lt_status lt_cmd_check_plans_model(const lt_run_info *run, const char *db, const lt_llama *m, lt_error *err);

#endif /* LT_TRAIN_COMMANDS_H */
