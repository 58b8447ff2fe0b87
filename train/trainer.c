/*
 * train/trainer.c — the trainer program's command table and `trainer devices`.
 */
#include "train/trainer.h"

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
};

const lt_cli_program trainer_program = {
    "trainer",
    "Execute stored plans: a Llama-style model trained over DP x PP ranks (and context\n"
    "parallelism for DP-Merge groups), CPU fp32 reference or CUDA bf16 kernels.",
    commands, sizeof commands / sizeof commands[0],
};
