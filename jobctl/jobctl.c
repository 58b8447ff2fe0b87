/*
 * jobctl/jobctl.c — the jobctl program's command table.
 */
#include "jobctl/jobctl.h"

const lt_cli_program jobctl_program = {
    "jobctl",
    "Run the pipeline (dataprep -> planner -> trainer) as Slurm jobs: sbatch arrays with\n"
    "afterok dependencies, tracking, cancel and requeue; or locally without Slurm.",
    NULL, 0,
};
