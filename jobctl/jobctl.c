/*
 * jobctl/jobctl.c — the jobctl program's command table.
 */
#include "jobctl/jobctl.h"

static const lt_cli_command commands[] = {
    {
    "submit", "[--run-dir DIR] [--stages dataprep,plan,train] [--dry-run] [--parsable]",
    "submit the pipeline to Slurm: a dataprep array, the planner afterok, the trainer afterok",
    "Writes one batch script per stage into RUN/scripts (RUN = --run-dir, else run.work_dir/run.name)\n"
    "and submits them with sbatch --parsable: dataprep as an array of data.num_tasks tasks (default:\n"
    "one per input file; at most slurm.max_concurrent at once), the planner --dependency=afterok on\n"
    "it, the trainer afterok on the planner over parallel.dp x pp x tp ranks (srun --mpi=slurm.mpi;\n"
    "--signal=B:USR2@slurm.signal_seconds and --requeue: preempted, it checkpoints and requeues).\n"
    "Stages already complete (by their outputs) or still pending/running are not submitted again, so\n"
    "submitting the same run twice never runs a stage twice; another config for the same run is\n"
    "refused. If any sbatch fails, the jobs this submission made are cancelled and jobctl exits 1.\n"
    "Prints the run and its job ids (--parsable: only the new job ids, one per line); --dry-run prints\n"
    "the scripts and submits nothing. docs/jobctl.md.",
    jc_cmd_submit,
    },
    {
    "status", "[RUN] [--format table|json]",
    "the run's stages: job ids, Slurm states, array progress, steps planned and trained",
    "RUN is a run directory or a run id under run.work_dir (default: run.name). Per stage: its newest\n"
    "job, the state Slurm reports (scontrol, else sacct where the cluster keeps accounting; once Slurm\n"
    "has forgotten a job, the journal's last state, or COMPLETED by the stage's outputs), and the stage's\n"
    "own progress: dataprep tasks done (completion markers), steps planned (plans.db), the training\n"
    "step with its loss and tokens/s (metrics.jsonl). --format json prints one JSON object.",
    jc_cmd_status,
    },
    {
    "logs", "[RUN] [--stage S] [--task I] [--follow]",
    "print the run's job logs (RUN/logs), of one stage or array task; --follow until the jobs end", NULL, jc_cmd_logs,
    },
    {
    "cancel", "RUN", "cancel the run's pending and running jobs (scancel; a local run: its runner)", NULL, jc_cmd_cancel,
    },
    {
    "resume", "RUN [--stages dataprep,plan,train] [--local]",
    "put what is not complete of a run to work again (finished tasks and plans are skipped)",
    "RUN is a run directory or a run id under run.work_dir. Submits again (or, for a local run, runs\n"
    "again) every stage whose outputs are incomplete and that is not pending or running: only the\n"
    "dataprep tasks without a completion marker, the planner (which keeps the steps it stored), and\n"
    "the trainer, which continues from its newest checkpoint.",
    jc_cmd_resume,
    },
    {
    "list", "", "the runs under run.work_dir, with the last known state of each stage", NULL, jc_cmd_list,
    },
    {
    "run", "[--local] [--run-dir DIR] [--stages dataprep,plan,train]",
    "run the pipeline and wait for it: here (--local, or when there is no Slurm) or as Slurm jobs",
    "--local runs the same stages with the same commands and run directory as 'submit', on this\n"
    "machine: the unfinished dataprep tasks in parallel (slurm.max_concurrent, default one per CPU),\n"
    "the planner, then the trainer (mpirun -n DPxPPxTP when dp x pp x tp > 1). Output goes to RUN/logs and,\n"
    "prefixed by stage, to stderr. SIGUSR2 makes the trainer checkpoint and stop (exit 75: continue\n"
    "with 'jobctl resume RUN'). Without --local, submits to Slurm as 'submit' does and follows the\n"
    "jobs until they end. Exit status 0 when every stage completed.",
    jc_cmd_run,
    },
};

const lt_cli_program jobctl_program = {
    "jobctl",
    "Run the pipeline (dataprep -> planner -> trainer) as Slurm jobs: sbatch arrays with\n"
    "afterok dependencies, tracking, cancel and requeue; or locally without Slurm.",
    commands,
    sizeof commands / sizeof commands[0],
};
