/*
 * plans/cmd/planner.c — the planner program's command table.
 */
#include "plans/cmd/planner.h"

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
     "--unit-lengths: the unit-time model of ChunkFlow Sec. 3 (docs/simulator.md): a forward takes\n"
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
    {"build",
     "(--data DIR | --lengths FILE) --db FILE [--strategy NAME] [--steps N] [--threads T]\n"
     "        [--hardware-dir DIR] [--no-timings]",
     "plan every training step and store the plans in a SQLite database",
     "Samples global batches (plan.global_batch samples of at most plan.context_len tokens,\n"
     "seeded by plan.seed, docs/sampler.md) from a dataprep output directory (--data) or a\n"
     "lengths file (--lengths, one token count per line), plans each of the first N steps\n"
     "(--steps, default plan.steps) with the strategy (--strategy, default plan.strategy;\n"
     "docs/strategies.md), and writes them to --db FILE (docs/plans-schema.md) in one\n"
     "transaction on a temporary file renamed over FILE at the end.\n"
     "An existing FILE is resumed: the steps it holds are kept and not planned again; a FILE\n"
     "built from another config ([model], [parallel], [plan] other than steps) or other data\n"
     "is refused. --threads T plans T steps at once (default: one per CPU); the database is\n"
     "the same whatever T. --no-timings leaves solve_ms NULL, so that the same inputs give a\n"
     "byte-identical file. Progress goes to stderr (-q: none).",
     build_command},
    {"compare",
     "--lengths FILE --strategies A,B,... [--steps N] [--format table|tsv] [--threads T]\n"
     "        [--hardware-dir DIR]",
     "plan the same steps with several strategies and compare the predictions",
     "Plans the first N steps (default plan.steps) sampled from FILE with every strategy\n"
     "named and prints one row per strategy, averaged over the steps: predicted step time,\n"
     "bubble ratio, peak memory per GPU, speedup over megatron (planned as the reference\n"
     "even when not listed), planning time per step. --format tsv prints the header\n"
     "  strategy predicted_ms bubble_ratio peak_mem_bytes speedup_vs_megatron plan_ms_per_step\n"
     "(tab-separated) then one row per strategy.\n"
     "The table (the default format) also has plan_ms_p50 (median planning ms per step),\n"
     "cv_fwd and cv_bwd (the balance of the units: per step, std / mean of the forward and of\n"
     "the backward compute time on stage 0 of every unit of every pipeline, averaged over the\n"
     "steps; docs/strategies.md), merges (DP-Merge groups over all steps) and the choices of\n"
     "the last step; for auto a line under it counts the strategies it picked.",
     compare_command},
    {"layout",
     "--lengths FILE --gpus N [--strategies A,B,...] [--shard none,zero1,...] [--steps K]\n"
     "        [--max-candidates M] [--time-limit S] [--format table|tsv] [--threads T] [--hardware-dir DIR]",
     "rank the parallel layouts (tp, pp, dp, sharding, strategy) of N GPUs by predicted step time",
     "Enumerates the layouts of N GPUs for the config's [model] on plan.hardware: tp dividing\n"
     "the attention heads, the K/V heads, the MLP width and gpus_per_node; pp with tp x pp\n"
     "dividing N and at most the layers; dp = N / (tp x pp), at most plan.global_batch; each\n"
     "parallel.shard mode of --shard (none, zero1, zero2, fsdp; default none,zero1; only the first at dp 1) and\n"
     "each strategy of --strategies (default megatron,seq1f1b,chunkflow,infinipipe,slimpack).\n"
     "Each candidate whose model states fit the cap (plan.mem, else the profile's memory)\n"
     "plans the same K sampled steps (--steps, default 4; plan.seed) as `planner compare`\n"
     "would. The context-parallel degree is the strategy's choice, up to parallel.max_cp.\n"
     "Prints the planned candidates fastest first: tp, pp, dp, the largest cp used, shard\n"
     "mode, strategy, mean predicted step ms, MFU (3 x forward model FLOPs / N x peak x\n"
     "time), peak memory per GPU and the cap (GiB), the strategy's choices; then the refused\n"
     "ones (over the cap in every shard mode, or not planable) with the reason: the memory\n"
     "needed and the cap.\n"
     "--format tsv prints one tab-separated row per candidate under the header\n"
     "  status tp pp dp max_cp shard strategy predicted_ms mfu peak_mem_bytes mem_cap_bytes detail\n"
     "(status ok, ranked, then refused and not_planned). At most --max-candidates M\n"
     "(default 200) are planned, and none after --time-limit S seconds (default 600); the\n"
     "rest are listed as not planned. Progress goes to stderr (-q: none). Exit 0 when a\n"
     "candidate was planned, 1 when none was.",
     layout_command},
    {"show",
     "--db FILE --step N [--width W]",
     "print one stored step: samples, units and an ASCII timeline per pipeline",
     NULL,
     show_command},
    {"validate",
     "--db FILE [--quiet]",
     "check every stored plan: token coverage per pass, slice order, dependencies, memory",
     "Checks every step of FILE against the invariants of every plan (docs/plans-schema.md,\n"
     "\"Invariants\"): each sample's tokens covered exactly once in the forward and in the\n"
     "backward pass, slices of a sample in token order, op dependencies acyclic, every\n"
     "stage's predicted peak memory under the run's cap. Exit 0 when all hold, else 1 with\n"
     "the first fault (step, pipeline, stage or sample, and the rule).",
     validate_command},
};

const lt_cli_program planner_program = {
    "planner",
    "Precompute training plans: sample global batches from the length index, schedule\n"
    "them with a strategy (megatron, seq1f1b, chunkflow, infinipipe, slimpack, ...),\n"
    "simulate them and store every step's plan in SQLite.",
    commands, sizeof commands / sizeof commands[0],
};
