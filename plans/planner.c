/*
 * plans/planner.c — the planner program's command table.
 */
#include "plans/planner.h"

static const lt_cli_command commands[] = {
    {"simulate",
     "--schedule gpipe|1f1b|seq1f1b|chunkflow|multi-1f1b|helixpipe [--stages P]\n"
     "        (--unit-lengths L1,L2,... | --lengths L1,L2,... | --lengths-file FILE)\n"
     "        [--order given|longest-first|shortest-first] [--slices K] [--chunk-size C] [--k K]\n"
     "        [--groups N1,N2,...] [--layers L] [--model NAME] [--hardware NAME] [--hardware-dir DIR]\n"
     "        [--width W] [--no-timeline] [--critical-path] [--svg FILE]",
     "simulate one pipeline schedule: step time, bubble ratio, per-stage busy time and memory",
     "The samples are the lengths given, in the order given (or --order). The schedule decides\n"
     "how they become units and in which order each stage runs them:\n"
     "  gpipe, 1f1b    one unit (micro-batch) per sample; GPipe or 1F1B order\n"
     "  seq1f1b        each sample cut into --slices K slices (default 2) of equal tokens;\n"
     "                 slice-level 1F1B, backward FILO within a sample (Seq1F1B)\n"
     "  chunkflow      ChunkFlow Alg. 1 chunks of --chunk-size C (samples longer than C split,\n"
     "                 shorter ones packed into the fewest chunks), state-aware 1F1B with\n"
     "                 --k K (Alg. 2; default 1)\n"
     "  multi-1f1b     1F1B pipelines in sequence over --groups N1,N2,... units (InfiniPipe 3.3.1)\n"
     "  helixpipe      attention-parallel partition, two-fold FILO (HelixPipe 4.2-4.3)\n"
     "\n"
     "--unit-lengths: the unit-time model of ChunkFlow Sec. 3 (CONTRACTS.md): a forward takes\n"
     "as many time units as its unit's length on every stage, a backward twice that, no\n"
     "communication; peak memory is counted in micro-batches in flight. --stages is required;\n"
     "--layers defaults to the stages (2 x stages for helixpipe).\n"
     "--lengths / --lengths-file: token counts timed by the cost model (docs/cost-model.md) of\n"
     "the config's [model] (or --model), plan.hardware (or --hardware), parallel.tp/dp and\n"
     "parallel.pp (or --stages); times in milliseconds, memory in GiB.\n"
     "\n"
     "Prints a summary per stage, --critical-path, an ASCII timeline (unless --no-timeline),\n"
     "writes a Gantt chart with --svg FILE, and ends with the line\n"
     "  step_time=T bubble_ratio=R\n"
     "where R = idle time of all stages / (stages x step time). A schedule that deadlocks is\n"
     "an error naming the ops on the cycle (exit 1).",
     simulate_command},
};

const lt_cli_program planner_program = {
    "planner",
    "Precompute training plans: sample global batches from the length index, schedule\n"
    "them with a strategy (megatron, seq1f1b, chunkflow, infinipipe, slimpack, ...),\n"
    "simulate them and store every step's plan in SQLite.",
    commands, sizeof commands / sizeof commands[0],
};
