/*
 * plans/planner.c — the planner program's command table.
 */
#include "plans/planner.h"

const lt_cli_program planner_program = {
    "planner",
    "Precompute training plans: sample global batches from the length index, schedule\n"
    "them with a strategy (megatron, seq1f1b, chunkflow, infinipipe, slimpack, ...),\n"
    "simulate them and store every step's plan in SQLite.",
    NULL, 0,
};
