/*
 * jobctl/cmd.h — what the jobctl commands share: opening a run by name, and the state of
 * its stages (from the journal, Slurm or the local runner, and the stages' own outputs).
 */
#ifndef LT_JOBCTL_CMD_H
#define LT_JOBCTL_CMD_H

#include <sqlite3.h>
#include <stdbool.h>

#include "jobctl/journal.h" /* jc_job, jc_run_row */
#include "jobctl/run.h"     /* jc_run */
#include "lib/cli.h"        /* lt_cli_ctx */

/* An existing run, opened by its directory or id. */
typedef struct jc_open_run {
    jc_run run;
    lt_config *cfg; /* loaded from RUN/config.ini */
    sqlite3 *db;    /* the journal */
    jc_run_row row;
} jc_open_run;

lt_status jc_open_existing(const lt_cli_ctx *ctx, const char *name, jc_open_run *o, lt_error *err);
void jc_close_existing(jc_open_run *o);

/* One stage as `status` shows it. */
typedef struct jc_stage_view {
    bool has_job;
    jc_job job;          /* the stage's newest job */
    char state[32];      /* Slurm's state, COMPLETED by the outputs, ABORTED, LOST, or "-" */
    char reason[64];     /* why pending ("" when none) */
    int tasks, tasks_done, tasks_running, tasks_pending; /* dataprep */
    int64_t steps, steps_done;                           /* plan: planned; train: trained */
    double loss, tok_s;                                  /* train: the last step's */
    double val_loss;     /* train: the last validation loss (train.eval_every) ... */
    int64_t val_step;    /* ... at this step; -1 when none */
    bool complete;       /* by the outputs */
} jc_stage_view;

/* The stages' views, refreshing the journal's states from Slurm (slurm runs) or from
 * whether the local runner still lives (local runs). */
void jc_view_stages(const jc_run *r, sqlite3 *db, jc_stage_view v[JC_NSTAGES]);

/* Whether a view's job is still pending or running. */
bool jc_view_active(const jc_stage_view *v);

/* Print the stages' progress whenever it changes until none is pending or running.
 * Returns 0 when every stage is complete, else 1 (the stages that are not, named). */
int jc_follow(const jc_run *r, sqlite3 *db);

/* "0-3", "1,4-6": the indices with want[i] set, as an --array list. Malloc'd. */
char *jc_task_list(const bool *want, int n);

#endif /* LT_JOBCTL_CMD_H */
