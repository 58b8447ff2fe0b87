/*
 * tests/fuzz/fuzz_slurm.c — libFuzzer target: jobctl's readers of Slurm's output
 * (jobctl/slurm.c): `scontrol show job -o` lines and `sacct -P` lines, then the overall
 * state of what they held. Input: any bytes (as the tools' stdout).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobctl/slurm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *a = malloc(size + 1), *b = malloc(size + 1);
    if (!a || !b) {
        free(a), free(b);
        return 0;
    }
    memcpy(a, data, size), a[size] = '\0';
    memcpy(b, data, size), b[size] = '\0';
    jc_task_state *st = NULL;
    size_t n = 0;
    jc_slurm_parse_show_job(a, &st, &n);
    jc_slurm_parse_sacct(b, &st, &n);
    const char *all = jc_slurm_overall(st, n);
    if (n > 0 && !*all) abort(); /* records always give a state */
    for (size_t i = 0; i < n; i++)
        if (!st[i].state[0] || strlen(st[i].task) >= sizeof st[i].task) abort();
    free(st), free(a), free(b);
    return 0;
}
