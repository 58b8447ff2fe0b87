/*
 * jobctl/slurm.h — Slurm through its command-line tools (DESIGN.md: `sbatch --parsable`,
 * `squeue`/`scontrol`, `scancel`; `sacct` only where accounting exists), never libslurm,
 * whose ABI changes every release. Every tool runs through jobctl/proc.h (no shell).
 */
#ifndef LT_JOBCTL_SLURM_H
#define LT_JOBCTL_SLURM_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/error.h" /* lt_status, lt_error */

/* Whether the Slurm client tools are here (sbatch in PATH). */
bool jc_slurm_available(void);

/* The cluster's MaxArraySize (`scontrol show config`: array task ids run 0..N-1), or 0 when
 * scontrol does not answer. */
int jc_slurm_max_array_size(void);
/* The number in "MaxArraySize = N" of a `scontrol show config` text, or 0 (tests). */
int jc_slurm_parse_max_array_size(const char *text);

/* `sbatch --parsable [--dependency=DEP] SCRIPT` run in directory `cwd`: *job_id is the
 * new job's id. A failing sbatch is LT_ERR_IO carrying its message. */
lt_status jc_sbatch(const char *cwd, const char *script, const char *dependency, char job_id[64], lt_error *err);

/* One array task's (or a plain job's) state as Slurm reports it. */
typedef struct jc_task_state {
    char task[32];   /* array task id or range ("3", "4-7"); "" for a plain job */
    char state[32];  /* PENDING, RUNNING, COMPLETED, FAILED, ... */
    char reason[64]; /* why pending (Dependency, BeginTime, ...), "None" */
    int exit_code;   /* the job's exit code once finished */
} jc_task_state;

/* The states of job `job_id` (an array: one entry per task record), from `scontrol show
 * job`, else `sacct` when the cluster keeps accounting. *n = 0 when Slurm no longer knows
 * the job (finished and purged, no accounting). */
lt_status jc_slurm_states(const char *job_id, jc_task_state **states, size_t *n, lt_error *err);

/* Parse the output of `scontrol show job -o ID` (one line per job or array-task record)
 * into *states (appended; *n counts them). `text` is modified. */
void jc_slurm_parse_show_job(char *text, jc_task_state **states, size_t *n);

/* Parse `sacct -n -P -X -o JobID,State,ExitCode` lines ("5_2|CANCELLED by 0|0:15"). */
void jc_slurm_parse_sacct(char *text, jc_task_state **states, size_t *n);

/* Whether a Slurm job state is final (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...); jobctl's
 * own ABORTED and LOST are final too. */
bool jc_state_final(const char *state);

/* One state for the whole job: a running or pending task makes it RUNNING or PENDING; a
 * failed, cancelled or timed-out task its state; else COMPLETED. "" when n is 0. */
const char *jc_slurm_overall(const jc_task_state *states, size_t n);

/* `scancel ID...`. */
lt_status jc_scancel(char *const ids[], size_t n, lt_error *err);

#endif /* LT_JOBCTL_SLURM_H */
