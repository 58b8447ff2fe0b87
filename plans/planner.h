/*
 * plans/planner.h — the interface of the planner stage (sample batches, build and simulate schedule plans, store them in SQLite).
 *
 * The library's layers: plans/lengths.h (length files), plans/hardware.h and plans/cost.h
 * (the cost model), plans/schedule.h (the schedule representation and its generators),
 * plans/sim.h (the DAG simulator). This header holds the program's command table.
 */
#ifndef LT_PLANNER_H
#define LT_PLANNER_H

#include "lib/cli.h" /* lt_cli_program */

/* The `planner` program: its commands (lib/cli.h runs them). */
extern const lt_cli_program planner_program;

/* `planner simulate` (plans/simulate_cmd.c). */
int simulate_command(lt_cli_ctx *ctx);
/* `planner build` (plans/build_cmd.c). */
int build_command(lt_cli_ctx *ctx);
/* `planner compare` (plans/compare_cmd.c). */
int compare_command(lt_cli_ctx *ctx);
/* `planner show` and `planner validate` (plans/show_cmd.c). */
int show_command(lt_cli_ctx *ctx);
int validate_command(lt_cli_ctx *ctx);

#endif
