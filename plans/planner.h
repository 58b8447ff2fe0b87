/*
 * plans/planner.h — the interface of the planner stage (sample batches, build and simulate schedule plans, store them in SQLite).
 *
 * The cost model, simulator, strategies and plan store join this library with the
 * planner issues; for now it holds the program's command table.
 */
#ifndef LT_PLANNER_H
#define LT_PLANNER_H

#include "lib/cli.h" /* lt_cli_program */

/* The `planner` program: its commands (lib/cli.h runs them). */
extern const lt_cli_program planner_program;

#endif
