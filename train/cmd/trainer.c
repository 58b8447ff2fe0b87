/*
 * train/cmd/trainer.c — the trainer program's command table (trainer_program, train/cmd/cmd.h),
 * which dispatches every command of train/cmd/, and `trainer devices`.
 */
#include "train/cmd/cmd.h" /* trainer_program, the *_command functions */

#include <stdio.h>

#include "kernels/gpu.h" /* lt_gpu_built, lt_gpu_device_count, lt_gpu_device_info */

/* `trainer devices`: which GPU path this build has and which devices it sees. */
static int devices_command(lt_cli_ctx *ctx) {
    if (ctx->argc > 1) return lt_cli_unknown_option(ctx, ctx->argv[1]);
    printf("cuda_built=%s\n", lt_gpu_built() ? "yes" : "no");
    char why[256] = "";
    int n = lt_gpu_device_count(why, sizeof why);
    printf("devices=%d\n", n);
    if (n == 0) printf("reason=%s\n", why);
    for (int d = 0; d < n; d++) {
        char name[256];
        int major = 0, minor = 0;
        lt_error err;
        if (lt_gpu_device_info(d, name, sizeof name, &major, &minor, &err) != LT_OK)
            return lt_error_exit(&err);
        printf("device.%d=%s sm_%d%d\n", d, name, major, minor);
    }
    return 0;
}

static const lt_cli_command commands[] = {
    {"devices", "", "show the CUDA devices this build can use (or why none)",
     "Prints key=value lines: cuda_built, devices, and per device its name and compute\n"
     "capability; without a device, the reason. The CPU fp32 path needs no device.\n",
     devices_command},
    {"init", "--config FILE [--set K=V]... --out CKPT", "a fresh model of the config's [model] as a step-0 checkpoint",
     "Initializes the parameters with train.seed (else plan.seed): matrices ~ N(0, 0.02^2), output\n"
     "projections scaled by 1/sqrt(2 layers), norm weights 1. The checkpoint holds zero AdamW moments.\n"
     "Prints: wrote CKPT: MODEL NPARAMS parameters\n",
     init_command},
    {"export", "CKPT --hf DIR", "write a checkpoint as a Hugging Face LlamaForCausalLM directory",
     "Writes DIR/config.json and DIR/model.safetensors (F32) that transformers loads with\n"
     "LlamaForCausalLM.from_pretrained(DIR); max_position_embeddings is plan.context_len when set.\n"
     "Prints: wrote DIR: MODEL NPARAMS parameters\n",
     hf_export_command},
    {"import", "--hf DIR --out CKPT", "a Hugging Face Llama model directory as a step-0 checkpoint",
     "Reads DIR/config.json and DIR/model.safetensors or the shards of model.safetensors.index.json\n"
     "(F32, F16 or BF16, widened exactly); refuses RoPE scaling, biases and non-Llama models by name.\n"
     "Writes the parameters only (step 0). Prints: wrote CKPT: MODEL NPARAMS parameters\n",
     hf_import_command},
    {"eval", "--ckpt CKPT --data DIR [--docs N] [--db PLANS --heldout]", "mean next-token loss of a checkpoint over whole documents",
     "Scores the first N documents (default 100) of a dataprep output, each whole (truncated at\n"
     "plan.context_len), in `dataprep cat` order. With --db PLANS --heldout: the first N held-out\n"
     "documents of the plan file (data.holdout), in its order, read from DIR: what `trainer train`'s\n"
     "validation loss (train.eval_every) scores. Last line: loss=L tokens=T (T = predicted tokens).\n",
     eval_command},
    {"generate", "--ckpt CKPT (--encoding NAME | --tokenizer FILE.json) --prompt TEXT [--max-tokens N] [--temperature T] [--seed S]",
     "text from a checkpoint (KV cache; temperature 0 = greedy)",
     "Prints the prompt followed by up to N (default 64) generated tokens, decoded; stops early at\n"
     "<|endoftext|>. --temperature 0 (default) picks the most likely token; T > 0 samples from\n"
     "softmax(logits / T) with a stream seeded by --seed (default 1234). --vocab-dir DIR as dataprep.\n",
     generate_command},
    {"train", "(--db PLANS | --whole) --data DIR [--init CKPT | --resume | --resume-if-any] [--out DIR] [--steps N]",
     "train on stored plans (one process, or one per rank under mpirun/srun) or on whole documents",
     "--db PLANS: runs the stored steps in order, each plan executed in this process (every\n"
     "pipeline and stage) on its samples read from --data DIR; prints per step\n"
     "step=S loss=L lr=LR grad_norm=G tokens=T tok/s=R plan_step=P predicted_ms=PM measured_ms=MM\n"
     "and appends it to DIR/metrics.jsonl; DIR/loss.svg draws the loss curve. --whole: each step\n"
     "takes the next train.batch_docs documents (truncated at plan.context_len), one unit each\n"
     "(the line ends at tok/s). AdamW with warmup + cosine decay ([train]). Checkpoints go to --out\n"
     "DIR (else train.checkpoint_dir, else WORK_DIR/NAME/checkpoints) every train.checkpoint_every\n"
     "steps and at the end; --resume continues bit-exactly from the newest (--resume-if-any: if there\n"
     "is one, else from step 0, as jobctl's batch scripts do). --steps N stops after\n"
     "step N (the schedule still spans train.steps); --db stops after the last stored step.\n"
     "Under mpirun -n / srun --mpi=pmix -n (parallel.dp x parallel.pp processes) --db runs one\n"
     "process per (DP rank, stage): checkpoints in parts (DIR/ckpt-N.d), rank 0 prints.\n"
     "SIGUSR2: checkpoint after the current step, exit 75 (requeue; continue with --resume).\n",
     train_command},
    {"check", "--config FILE --db PLANS --data DIR [--steps LIST] [--ckpt CKPT]",
     "the gradient-equivalence oracle: a plan's gradients against every sample whole",
     "For each step (all stored steps, or --steps 0,100,200), executes the plan in this process\n"
     "(every pipeline and stage, the strategy's slices, packing and backward regrouping) and runs\n"
     "every sample whole in one unit each; both scale by 1 / the step's predicted tokens. The model:\n"
     "--ckpt CKPT, else the config's [model] initialized with train.seed (else plan.seed). Prints\n"
     "per step one line per parameter tensor (step=S tensor=NAME rel_err=E, max |diff| / max |ref|)\n"
     "and a summary (step=S strategy=... loss=L ref_loss=R loss_diff=D max_rel_err=E worst=NAME ...);\n"
     "last line: max_rel_err=E steps=N. Exit 1 when E > train.check_tolerance (default 1e-4).\n"
     "Under mpirun/srun (parallel.dp x parallel.pp processes) the plan runs one process per (DP rank,\n"
     "stage) and rank 0 also compares the ranks' gradients with one process (rank_rel_err, over\n"
     "train.check_rank_tolerance = 1e-5 exits 1); last line: max_rel_err=E rank_rel_err=R ranks=N steps=S.\n",
     check_command},
    {"calibrate",
     "--config FILE [--set K=V]... (--out FILE.ini | --check PROFILE) [--tokens LIST] [--repeat N] [--mem-gib G]\n"
     "    [--ranks-per-node N]",
     "measure this CPU and write a hardware profile the cost model reproduces",
     "Times, for each token count T (--tokens 64,128,4K; default 64, 128, ... 8192 while the run\n"
     "stays near a minute), one transformer layer of the config's [model] forward + backward on a\n"
     "causal sample of T tokens, and the attention core alone (median of --repeat N runs, default\n"
     "5, on train.threads threads); the GEMM part is the layer less the attention. Writes --out\n"
     "FILE.ini, a profile for plan.hardware: peak_bf16_tflops = the best fp32 rate measured (so\n"
     "fractions stay <= 1), one point per T on each efficiency curve such that the cost model's\n"
     "F + B of that layer takes the measured time, act_bytes = 4 (fp32), hbm_gib = the RAM (or\n"
     "--mem-gib G), hbm_gbps = a measured copy, gpus_per_node = --ranks-per-node N (default 1), P2P\n"
     "from an MPI ping-pong of ranks 0 and 1 under mpirun -n 2, else a memcpy in one process (the\n"
     "inter-node values repeat the intra-node ones, marked not measured). The file is loaded back\n"
     "and priced; per T: tokens=T layer_ms=M attention_ms=A gemm_ms=G predicted_ms=P ... rel_err=E,\n"
     "then bytes_per_token (trainer vs cost model), last line: max_rel_err=E points=N.\n"
     "--check PROFILE prices the measurements with an existing profile instead (nothing written).\n",
     calibrate_command},
};

const lt_cli_program trainer_program = {
    "trainer",
    "Execute stored plans: a Llama-style model trained over DP x PP ranks (and context\n"
    "parallelism for DP-Merge groups), CPU fp32 reference or CUDA bf16 kernels.",
    commands, sizeof commands / sizeof commands[0],
};
