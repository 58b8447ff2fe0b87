/*
 * lib/config_schema.c — the key registry: every valid config section and key, its type,
 * default, allowed range or choices, and a one-line help.
 *
 * This table is the single source of truth for what a config may contain: the loader
 * refuses anything else, the dump writes keys in this order, and docs/config.md lists
 * the same keys (keep it in step; tests/lib/test_config.c checks that every key has a
 * row there). Adding a key is one line below. Rules for entries:
 *   - keys are lower_snake_case and grouped under their section, sections in the order
 *     of `sections` (the unit tests check both);
 *   - a default is given as the text a user would write ("80G", "3e-4", "true"), or
 *     NULL for "unset": the stage then derives a value or asks for one;
 *   - ENUM choices are separated by single spaces; the default must be one of them.
 */
#include "lib/config.h"

#include <string.h>

static const lt_config_section sections[] = {
    {"run", "the run as a whole: its name, output root and log level", false},
    {"data", "dataprep: corpus input, tokenizer and sharding", false},
    {"source", "a named corpus source, [source.NAME]: its files, format, text field and mixture weight", true},
    {"model", "the model shape: a preset and/or explicit dimensions", false},
    {"parallel", "the parallel layout: data, pipeline, tensor and DP-Merge degrees", false},
    {"plan", "planner: batch sampling, strategy, hardware profile and memory cap", false},
    {"train", "trainer: optimizer, backend and checkpoints", false},
    {"slurm", "jobctl: Slurm resources and sbatch options", false},
};

/* One line per key. Arguments: section, key, default (NULL = unset), [range | choices], help */
#define STR(s, k, def, help) {s, k, LT_CONFIG_STRING, def, NULL, NULL, NULL, help}
#define INT(s, k, def, min, max, help) {s, k, LT_CONFIG_INT, def, NULL, min, max, help}
#define SIZE(s, k, def, min, max, help) {s, k, LT_CONFIG_SIZE, def, NULL, min, max, help}
#define DBL(s, k, def, min, max, help) {s, k, LT_CONFIG_DOUBLE, def, NULL, min, max, help}
#define BOOL(s, k, def, help) {s, k, LT_CONFIG_BOOL, def, NULL, NULL, NULL, help}
#define ENUM(s, k, def, choices, help) {s, k, LT_CONFIG_ENUM, def, choices, NULL, NULL, help}

static const lt_config_key schema[] = {
    /* [run] */
    STR("run", "name", "longtail", "name of the run: job names, output subdirectory, plan database rows"),
    STR("run", "work_dir", "runs", "output root: stages write under WORK_DIR/NAME unless a more specific directory is set"),
    ENUM("run", "log_level", "info", "error warn info debug", "least severe log messages printed"),

    /* [data] */
    STR("data", "input", NULL, "corpus files: whitespace-separated paths, directories or globs"),
    ENUM("data", "format", "auto", "auto wet jsonl wikixml parquet", "input format; auto decides from each file's name and content"),
    STR("data", "field", "text", "JSONL field or Parquet column holding the document text"),
    STR("data", "encoding", "cl100k_base", "tokenizer: NAME.tiktoken + NAME.json found in the vocab search path"),
    STR("data", "tokenizer", NULL, "a Hugging Face tokenizer.json (byte-level BPE); overrides data.encoding"),
    STR("data", "vocab_dir", NULL, "directory searched first for encoding files (then $LONGTAIL_VOCAB_DIR, then the installed data)"),
    STR("data", "out_dir", NULL, "where shards, index and stats go; unset: WORK_DIR/NAME/data"),
    INT("data", "num_tasks", NULL, "1", NULL, "dataprep tasks (Slurm array size); unset: SLURM_ARRAY_TASK_COUNT, else 1"),
    INT("data", "threads", "0", "0", NULL, "worker threads per task; 0 = one per available CPU"),
    SIZE("data", "max_doc_bytes", "64M", "1", NULL, "documents larger than this many bytes are truncated to it (and counted)"),
    ENUM("data", "eos", "none", "none append", "append: put the encoding's end-of-text token after every document"),
    SIZE("data", "frame_size", "1M", "4K", "1G", "uncompressed bytes per zstd frame of a token shard (frames end at a document end)"),
    INT("data", "zstd_level", "1", "1", "19",
        "zstd compression level of the token shards (3: shards ~8 % smaller for ~1.3x the compression CPU)"),
    BOOL("data", "allow_damaged", "false", "keep going with exit 0 when an input file is damaged (truncated, corrupt, unclosed)"),
    DBL("data", "max_skipped_share", "0.01", "0", "1",
        "a task fails when more than this share of its records is skipped (bad JSON, missing field ...), unless allow_damaged"),
    DBL("data", "holdout", "0", "0", "0.5",
        "share of each source's documents reserved for validation: never sampled for training (chosen from plan.seed)"),

    /* [source.NAME]: one instance per named source (the sampler mixes them by weight) */
    STR("source", "input", NULL, "the source's corpus files: whitespace-separated paths, directories or globs"),
    ENUM("source", "format", "auto", "auto wet jsonl wikixml parquet", "input format of the source's files"),
    STR("source", "field", NULL, "JSONL member or parquet column holding the text; unset: data.field"),
    DBL("source", "weight", "1", "0", NULL, "mixture weight: the source's share of each step's tokens is weight / sum of weights"),
    DBL("source", "holdout", NULL, "0", "0.5", "share of the source's documents reserved for validation; unset: data.holdout"),

    /* [model] */
    STR("model", "preset", NULL, "a named model shape (e.g. tiny, llama-7b, llama-13b); the keys below override its fields"),
    INT("model", "layers", NULL, "1", NULL, "transformer layers"),
    INT("model", "hidden", NULL, "1", NULL, "hidden size (model width)"),
    INT("model", "heads", NULL, "1", NULL, "attention heads"),
    INT("model", "kv_heads", NULL, "1", NULL, "key/value heads (grouped-query attention); unset: = heads"),
    INT("model", "ffn", NULL, "1", NULL, "feed-forward inner size"),
    INT("model", "vocab", NULL, "1", NULL, "vocabulary size, at least data.encoding's; unset: data.encoding's (r50k_base 50257, cl100k_base 100277, o200k_base 200019)"),
    DBL("model", "rope_theta", "10000", "1", NULL, "RoPE base frequency (Llama 2: 10000, Llama 3: 500000)"),
    DBL("model", "norm_eps", "1e-5", "1e-12", "1", "RMSNorm epsilon"),
    BOOL("model", "tie_embeddings", "false", "the LM head shares the token embedding matrix"),
    ENUM("model", "family", "llama", "llama mistral qwen2",
         "architecture family: llama and mistral are the same model (export writes the model_type), qwen2 adds Q/K/V biases"),
    ENUM("model", "rope_scaling", "none", "none llama3", "RoPE frequency scaling: none, or llama3 (Llama 3.1+, the rope_* keys below)"),
    DBL("model", "rope_factor", "8", "1e-6", NULL, "llama3 RoPE scaling: factor slowing the long wavelengths"),
    DBL("model", "rope_low_freq_factor", "1", "1e-6", NULL, "llama3 RoPE scaling: wavelengths above original_max_pos / this are scaled"),
    DBL("model", "rope_high_freq_factor", "4", "1e-6", NULL, "llama3 RoPE scaling: wavelengths below original_max_pos / this are kept"),
    INT("model", "rope_original_max_pos", "8192", "1", NULL, "llama3 RoPE scaling: the context the model was pretrained with"),

    /* [parallel] */
    INT("parallel", "dp", "1", "1", NULL, "data-parallel ranks"),
    INT("parallel", "pp", "1", "1", NULL, "pipeline stages"),
    INT("parallel", "tp", "1", "1", NULL, "tensor-parallel degree inside one stage, with sequence parallelism (a TP group within one node)"),
    INT("parallel", "max_cp", "1", "1", NULL, "largest DP-Merge group (ranks that share one outlier sample); 1 = off"),
    ENUM("parallel", "shard", "none", "none zero1 zero2 fsdp", "model states sharded over the DP ranks: zero1 the optimizer states, zero2 also the gradients, fsdp also the weights"),
    BOOL("parallel", "zero1", "false", "the older spelling of shard = zero1"),

    /* [plan] */
    ENUM("plan", "strategy", "slimpack", "megatron gpipe seq1f1b chunkflow infinipipe slimpack helixpipe auto", "scheduling strategy; auto = best predicted per batch (helixpipe among its candidates only without sharding at dp > 1: a run mixing it with others holds the whole model, not sharded)"),
    INT("plan", "global_batch", NULL, "1", NULL, "samples per step (over all DP ranks); with global_batch_tokens the most a step holds"),
    SIZE("plan", "global_batch_tokens", NULL, "1", NULL,
         "tokens per step: the sampler fills each step to at most this many (at least parallel.dp samples); unset: global_batch samples"),
    SIZE("plan", "context_len", NULL, "1", NULL, "tokens per sample; longer documents are truncated to this"),
    STR("plan", "hardware", "h200", "hardware profile (peak FLOP/s, memory, efficiency curve)"),
    SIZE("plan", "mem", NULL, "1", NULL, "per-GPU memory cap in bytes; unset: the hardware profile's memory"),
    INT("plan", "seed", "1234", "0", NULL, "random seed of batch sampling"),
    INT("plan", "steps", NULL, "1", NULL, "training steps to plan"),
    ENUM("plan", "sample_policy", "truncate", "truncate split", "documents longer than context_len: truncate (the papers) or split into pieces"),
    SIZE("plan", "chunk_size", "0", "0", NULL, "chunkflow: tokens per chunk; 0 = grid search per step"),
    INT("plan", "chunkflow_k", "0", "0", NULL, "chunkflow: chunks of a long sample whose activations are kept (K); 0 = grid search per step"),
    INT("plan", "seq1f1b_slices", "4", "1", NULL, "seq1f1b: slices of equal forward FLOPs per micro-batch"),
    INT("plan", "infinipipe_slices", "0", "0", NULL, "infinipipe: slices of equal backward time the longest sample is split into (N); 0 = tuned per step"),
    INT("plan", "micropacks", "0", "0", NULL, "slimpack: MicroPacks per DP rank (m, a multiple of pp); 0 = searched per step over m = i x pp"),
    DBL("plan", "dp_merge_margin", "0.1", "0", NULL, "slimpack: DP-Merge a sample whose forward FLOPs exceed a DP rank's capacity by more than this fraction"),
    DBL("plan", "milp_time_limit", "0", "0", NULL, "seconds one MILP solve (CBC) may take before its fallback heuristic is used; 0 = no limit (plans then do not depend on the machine's speed)"),
    DBL("plan", "milp_gap", "0.001", "0", NULL, "relative optimality gap at which a MILP solve (CBC) stops; 0 = prove optimality"),
    INT("plan", "milp_max_nodes", "1000", "0", NULL, "branch-and-bound nodes one MILP solve (CBC) may explore: a deterministic effort cap; 0 = no limit"),
    INT("plan", "mlp_chunk", "0", "0", NULL, "chunked MLP (HelixPipe 4.4.2): the MLP's intermediates and their gradients for at most N tokens of a unit at a time, in every backward and in a recomputed post-attention's forward (a lower peak, the same gradients within rounding), priced by the planner and run by the trainer; 0 = a unit's tokens at once"),

    /* [train] */
    DBL("train", "lr", "3e-4", "0", NULL, "peak learning rate"),
    DBL("train", "min_lr", "3e-5", "0", NULL, "learning rate at the end of the cosine decay"),
    INT("train", "warmup_steps", "0", "0", NULL, "steps of linear warm-up from 0 to lr"),
    DBL("train", "weight_decay", "0.1", "0", NULL, "AdamW decoupled weight decay"),
    DBL("train", "grad_clip", "1.0", "0", NULL, "clip the global gradient norm to this; 0 = no clipping"),
    ENUM("train", "backend", "cpu", "cpu cuda", "kernels: cpu (fp32 reference) or cuda (bf16, needs a GPU build)"),
    STR("train", "checkpoint_dir", NULL, "where checkpoints go; unset: WORK_DIR/NAME/checkpoints"),
    INT("train", "checkpoint_every", "0", "0", NULL, "write a checkpoint every N steps; 0 = only at the end"),
    DBL("train", "beta1", "0.9", "0", "1", "AdamW first-moment decay"),
    DBL("train", "beta2", "0.95", "0", "1", "AdamW second-moment decay"),
    DBL("train", "adam_eps", "1e-8", "0", NULL, "AdamW epsilon (added to the root of the second moment)"),
    INT("train", "steps", NULL, "1", NULL, "optimizer steps to train; unset: plan.steps; also the length of the cosine decay (--db: at most the stored steps)"),
    INT("train", "seed", NULL, "0", NULL, "seed of parameter initialization; unset: plan.seed"),
    INT("train", "keep_checkpoints", "3", "1", NULL, "checkpoints kept in checkpoint_dir (older ones are deleted)"),
    INT("train", "threads", "0", "0", NULL, "CPU threads of the fp32 kernels (OpenBLAS and the thread pool); 0 = one per available CPU"),
    INT("train", "batch_docs", "8", "1", NULL, "trainer train --whole: documents per step"),
    INT("train", "eval_every", "0", "0", NULL, "trainer train --db: the validation loss over held-out documents (data.holdout) every N steps, before the first and after the last; 0 = never"),
    INT("train", "eval_docs", "32", "1", NULL, "trainer train: the held-out documents the validation loss scores (the plan file's first N)"),
    DBL("train", "check_tolerance", "1e-4", "0", NULL, "trainer check: the largest relative gradient error a step may show"),
    DBL("train", "check_rank_tolerance", "1e-5", "0", NULL, "trainer check over MPI ranks: the largest relative difference from one process"),
    DBL("train", "comm_timeout_s", "300", "1", NULL, "distributed trainer: the longest a rank waits for another before the job fails"),
    DBL("train", "bucket_mb", "25", "0.001", NULL, "distributed trainer: gradient all-reduce bucket size, MiB"),

    /* [slurm] */
    STR("slurm", "partition", NULL, "sbatch --partition; unset: the cluster's default"),
    STR("slurm", "account", NULL, "sbatch --account; unset: the user's default"),
    STR("slurm", "time", NULL, "wall-clock limit per job in sbatch --time form (e.g. 04:00:00)"),
    INT("slurm", "nodes", "1", "1", NULL, "nodes per training job"),
    INT("slurm", "gpus_per_node", NULL, "0", NULL, "sbatch --gpus-per-node; unset: no GPUs requested"),
    INT("slurm", "cpus_per_task", NULL, "1", NULL, "sbatch --cpus-per-task; unset: the cluster's default"),
    INT("slurm", "max_concurrent", "0", "0", NULL, "most dataprep array tasks running at once (the %N of --array=0-9%N); 0 = no limit"),
    BOOL("slurm", "requeue", "true", "requeue jobs that are preempted or lose a node (sbatch --requeue)"),
    STR("slurm", "mpi", "pmix", "srun --mpi plugin for multi-rank steps"),
    INT("slurm", "signal_seconds", "120", "1", NULL, "the training job gets USR2 this long before its time limit (--signal=B:USR2@N): checkpoint, requeue"),
    STR("slurm", "extra_sbatch", NULL, "further sbatch options, passed as written (e.g. --constraint=h200 --qos=high)"),
};

#undef STR
#undef INT
#undef SIZE
#undef DBL
#undef BOOL
#undef ENUM

const lt_config_key *lt_config_schema(size_t *count) {
    if (count) *count = sizeof schema / sizeof schema[0];
    return schema;
}

const lt_config_section *lt_config_sections(size_t *count) {
    if (count) *count = sizeof sections / sizeof sections[0];
    return sections;
}

const lt_config_key *lt_config_find_key(const char *section, const char *key) {
    if (section == NULL || key == NULL) return NULL;
    for (size_t i = 0; i < sizeof schema / sizeof schema[0]; i++)
        if (strcmp(schema[i].section, section) == 0 && strcmp(schema[i].key, key) == 0)
            return &schema[i];
    return NULL;
}

const char *lt_config_type_name(lt_config_type type) {
    switch (type) {
    case LT_CONFIG_STRING: return "string";
    case LT_CONFIG_INT: return "int";
    case LT_CONFIG_SIZE: return "size";
    case LT_CONFIG_DOUBLE: return "double";
    case LT_CONFIG_BOOL: return "bool";
    case LT_CONFIG_ENUM: return "enum";
    }
    return "unknown";
}
