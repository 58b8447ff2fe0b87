/*
 * train/cmd/cmd.h — the trainer's model-file commands (init, export, import; train/cmd/init.c)
 * and the helpers they share with the other command files. The model-running commands
 * (eval, generate, train) are declared in train/cmd/commands.h; the table that dispatches all
 * of them is train/cmd/trainer.c.
 */
#ifndef LT_TRAIN_CMD_H
#define LT_TRAIN_CMD_H

#include <stdint.h>

#include "lib/cli.h"   /* lt_cli_ctx */
#include "lib/error.h" /* lt_status, lt_error */
#include "lib/model.h" /* lt_model_shape */

int init_command(lt_cli_ctx *ctx);   /* trainer init --out CKPT */
int export_command(lt_cli_ctx *ctx); /* trainer export CKPT --hf DIR */
int import_command(lt_cli_ctx *ctx); /* trainer import --hf DIR --out CKPT */
/* trainer calibrate --out FILE.ini: a hardware profile of this machine (train/cmd/calibrate.c) */
int calibrate_command(lt_cli_ctx *ctx);

/* The seed of parameter initialization and of the training stream: train.seed, else
 * plan.seed (which has a default). */
uint64_t lt_cmd_seed(const lt_cli_ctx *ctx);

/* The config's model (lt_model_from_config). A run that names no model at all (neither
 * --config nor any model.* key) is LT_ERR_USAGE rather than a silent llama-7b. */
lt_status lt_cmd_model_shape(const lt_cli_ctx *ctx, lt_model_shape *shape, lt_error *err);

#endif /* LT_TRAIN_CMD_H */
