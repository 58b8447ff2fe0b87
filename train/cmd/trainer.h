/*
 * train/cmd/trainer.h — the interface of the trainer stage (execute stored plans over DP x PP (x CP) ranks).
 *
 * The model, the CPU reference and CUDA kernels' host side and the engine join this
 * library with the trainer issue; for now it holds the command table and `devices`.
 */
#ifndef LT_TRAINER_H
#define LT_TRAINER_H

#include "lib/cli.h" /* lt_cli_program */

/* The `trainer` program: its commands (lib/cli.h runs them). */
extern const lt_cli_program trainer_program;

#endif
