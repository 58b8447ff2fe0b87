/*
 * jobctl/script.h — the batch scripts of a run's stages (RUN/scripts/STAGE.sbatch).
 *
 * A script is plain bash that a person can read and submit again by hand
 * (`cd RUN && sbatch [--dependency=afterok:ID] scripts/STAGE.sbatch`): #SBATCH directives
 * from [slurm] and [parallel], then the stage's command (jobctl/run.h's argv) with every
 * argument single-quoted. Directive paths are relative to the run directory (jobctl
 * submits from there), so no path has to survive Slurm's directive parser; the values that
 * do go into directives hold no control characters (jc_run_init refuses them), so a
 * config value can never start a shell command. The dependency is not in the script: it
 * is an sbatch argument of each submission.
 *
 *   dataprep  --array=TASKS[%slurm.max_concurrent], logs/%x_%A_%a.out, one task each:
 *             dataprep run ... --task-id "$SLURM_ARRAY_TASK_ID"
 *   plan      logs/%x_%j.out: planner build ...
 *   train     logs/%x_%j.out, --nodes, --ntasks = dp x pp, --gpus-per-node,
 *             --signal=B:USR2@slurm.signal_seconds, --requeue --open-mode=append:
 *             srun --mpi=slurm.mpi trainer train ... --resume-if-any, in the background;
 *             the script forwards USR2 (Slurm's preemption warning) to srun, which
 *             forwards it to the ranks; the trainer checkpoints after its step and exits
 *             75, and the script requeues the job (scontrol requeue), which continues
 *             from the checkpoint.
 */
#ifndef LT_JOBCTL_SCRIPT_H
#define LT_JOBCTL_SCRIPT_H

#include "jobctl/run.h" /* jc_run, jc_stage */

/* `s` as one bash word: single-quoted, each ' written as '\'' (a plain word of safe
 * characters stays as it is). Malloc'd. */
char *jc_shell_quote(const char *s);

/* The script of stage s; `tasks` is the dataprep array's task list ("0-7", "1,3"), NULL
 * for the other stages. Malloc'd text. */
char *jc_stage_script(const jc_run *r, jc_stage s, const char *tasks);

/* The trainer's exit status after SIGUSR2 and its checkpoint (train/cmd/train.c). */
#define JC_PREEMPTED_EXIT 75

#endif /* LT_JOBCTL_SCRIPT_H */
