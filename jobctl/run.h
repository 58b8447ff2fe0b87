/*
 * jobctl/run.h — one run of the pipeline: its directory, its stages, their commands and
 * how far each has come.
 *
 * A run is a directory (the run id is its last component; default WORK_DIR/NAME from
 * run.work_dir and run.name, or `--run-dir DIR`) laid out the same under Slurm and
 * locally:
 *
 *     RUN/config.ini        the effective config every stage reads (--config + --set)
 *     RUN/jobctl.db         the run journal (jobctl/journal.h)
 *     RUN/jobctl.lock       held while a jobctl command changes the run
 *     RUN/scripts/STAGE.sbatch   the batch scripts (readable; `cd RUN && sbatch scripts/X`)
 *     RUN/logs/             %x_%A_%a.out (dataprep tasks), %x_%j.out (plan, train)
 *     RUN/data/             dataprep's shards, index, stats, task-IIIII.done markers
 *     RUN/plans.db          the planner's plans
 *     RUN/train/            checkpoints, metrics.jsonl, loss.svg
 *
 * The stages are dataprep (an array of data.num_tasks tasks, default one per input
 * file), plan (planner build) and train (trainer train --db over parallel.dp x
 * parallel.pp x parallel.tp ranks). Each stage's command is one argv (jc_stage_argv), run as written
 * by the local runner and quoted into the batch scripts, so both modes run the same
 * programs with the same arguments. Relative paths of the config (data.input, ...)
 * resolve against the directory jobctl was started in, which the run records (cwd).
 *
 * A stage is complete by its own outputs, never by jobctl's word: a dataprep task by its
 * completion marker, the planner when plans.db holds plan.steps steps, the trainer when
 * metrics.jsonl reaches the last step it will train.
 */
#ifndef LT_JOBCTL_RUN_H
#define LT_JOBCTL_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "jobctl/proc.h" /* jc_argv */
#include "lib/config.h"  /* lt_config */
#include "lib/error.h"   /* lt_status, lt_error */

typedef enum jc_stage { JC_DATAPREP, JC_PLAN, JC_TRAIN, JC_NSTAGES } jc_stage;

/* "dataprep", "plan", "train". */
const char *jc_stage_name(jc_stage s);
/* The stage named `name`, or -1. */
int jc_stage_of(const char *name);

typedef struct jc_run {
    char *dir;              /* absolute run directory */
    char *id;               /* its last component */
    char *cwd;              /* where the config's relative paths resolve */
    char *job_prefix;       /* "lt-NAME": job names are PREFIX-STAGE (NAME made job-name safe) */
    char *config_path;      /* dir/config.ini */
    char *data, *plans, *train, *logs, *scripts; /* dir/data, dir/plans.db, ... */
    char *bin[JC_NSTAGES];  /* dataprep, planner, trainer: absolute paths */
    const lt_config *cfg;   /* the run's effective config (not owned) */
    char *config_text;      /* its dump: what config.ini holds */
    char hash[65];          /* SHA-256 of the effective values (origins aside) */
    int n_inputs;           /* input files (data.input) */
    int n_tasks;            /* dataprep tasks */
    char array_note[200];   /* why n_tasks is not one per input file (a cluster's MaxArraySize), or "" */
    int ranks;              /* trainer processes: parallel.dp x parallel.pp x parallel.tp */
    int tp;                 /* parallel.tp: each node holds whole TP groups */
    int64_t plan_steps;     /* plan.steps */
    int64_t train_steps;    /* the last step the trainer trains: min(train.steps, plan.steps) */
} jc_run;

/* Describe the run of `cfg`: run directory `run_dir` (NULL: WORK_DIR/NAME), relative
 * paths resolved against `cwd` (NULL: the current directory). Checks what can be checked
 * before anything is written: run.name and the values that go into batch-script
 * directives hold no control characters, the input files exist (their count sets the
 * task count), the stage programs are found. Writes nothing. */
lt_status jc_run_init(jc_run *r, const lt_config *cfg, const char *run_dir, const char *cwd, lt_error *err);
/* The same for a run the journal knows: its task count `n_tasks` is taken as recorded
 * (the inputs are not globbed again). */
lt_status jc_run_reopen(jc_run *r, const lt_config *cfg, const char *run_dir, const char *cwd, int n_tasks,
                        lt_error *err);
void jc_run_free(jc_run *r);

/* The run directory named by RUN: a directory holding a journal, else WORK_DIR/RUN
 * (run.work_dir of cfg). Malloc'd absolute path; LT_ERR_USAGE naming both when neither. */
lt_status jc_run_find(const char *run, const lt_config *cfg, char **dir, lt_error *err);

/* A stage's command: the program and its arguments (the dataprep task id is not in it:
 * `--task-id I` is appended per task; the trainer's launcher, srun or mpirun, goes before
 * it). */
void jc_stage_argv(const jc_run *r, jc_stage s, jc_argv *out);

/* Create the run directory and its subdirectories, and write config.ini (atomically). */
lt_status jc_run_create_dirs(const jc_run *r, lt_error *err);

/* ---- progress, from the stages' own outputs */

/* Dataprep tasks whose completion marker exists; done[i] for each (may be NULL). */
int jc_tasks_done(const jc_run *r, bool *done);
/* Steps stored in plans.db (0 when it does not exist yet). */
int64_t jc_steps_planned(const jc_run *r);
/* The trainer's last step line of metrics.jsonl: step (0 when none), loss and tokens/s of
 * that step; when val_loss is non-NULL, the last validation line's loss (train.eval_every)
 * and its step (*val_step; -1 when the file has none). */
int64_t jc_steps_trained(const jc_run *r, double *loss, double *tok_s, double *val_loss, int64_t *val_step);
/* Whether the stage's outputs are complete. */
bool jc_stage_complete(const jc_run *r, jc_stage s);

#endif /* LT_JOBCTL_RUN_H */
