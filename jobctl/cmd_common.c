/*
 * jobctl/cmd_common.c — opening runs and viewing their stages (jobctl/cmd.h).
 */
#include "jobctl/cmd.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobctl/slurm.h" /* jc_slurm_states */

lt_status jc_open_existing(const lt_cli_ctx *ctx, const char *name, jc_open_run *o, lt_error *err) {
    memset(o, 0, sizeof *o);
    char *dir = NULL, *cfg_path = NULL;
    lt_status st = jc_run_find(name, ctx->config, &dir, err);
    if (st == LT_OK) st = jc_journal_open(dir, false, &o->db, err);
    if (st == LT_OK) st = jc_journal_run(o->db, &o->row, err);
    if (st == LT_OK && !(o->cfg = lt_config_new())) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    if (st == LT_OK && asprintf(&cfg_path, "%s/config.ini", dir) < 0) lt_die("out of memory");
    if (st == LT_OK) st = lt_config_load_file(o->cfg, cfg_path, err);
    if (st == LT_OK) st = jc_run_reopen(&o->run, o->cfg, dir, o->row.cwd, o->row.n_tasks, err);
    free(dir), free(cfg_path);
    if (st != LT_OK) jc_close_existing(o);
    return st;
}

void jc_close_existing(jc_open_run *o) {
    jc_run_free(&o->run);
    lt_config_free(o->cfg);
    sqlite3_close(o->db);
    free(o->row.cwd);
    memset(o, 0, sizeof *o);
}

char *jc_task_list(const bool *want, int n) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    LT_CHECK_ALLOC(f);
    bool first = true;
    for (int i = 0; i < n;) {
        if (!want[i]) {
            i++;
            continue;
        }
        int j = i;
        while (j + 1 < n && want[j + 1]) j++;
        fprintf(f, "%s%d", first ? "" : ",", i);
        if (j > i) fprintf(f, "-%d", j);
        first = false;
        i = j + 1;
    }
    if (fclose(f) != 0) lt_die("out of memory");
    return text;
}

/* Refresh the state of job j from Slurm or the local runner; the journal follows. */
static void refresh(const jc_run *r, sqlite3 *db, jc_stage_view *v) {
    jc_job *j = &v->job;
    snprintf(v->state, sizeof v->state, "%s", j->state);
    if (jc_state_final(j->state)) return;
    lt_error err;
    if (strncmp(j->job_id, "local-", 6) == 0) {
        long pid = strtol(j->job_id + 6, NULL, 10);
        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM)) return;
        snprintf(v->state, sizeof v->state, "ABORTED"); /* the runner is gone without saying how it ended */
    } else {
        jc_task_state *ts = NULL;
        size_t n = 0;
        if (jc_slurm_states(j->job_id, &ts, &n, &err) != LT_OK) {
            lt_error_print(&err, NULL);
            return;
        }
        if (n == 0) {
            snprintf(v->state, sizeof v->state, "%s", jc_stage_complete(r, (jc_stage)j->stage) ? "COMPLETED" : "LOST");
        } else {
            snprintf(v->state, sizeof v->state, "%s", jc_slurm_overall(ts, n));
            for (size_t i = 0; i < n; i++) {
                if (strcmp(ts[i].state, "RUNNING") == 0) v->tasks_running++;
                if (strcmp(ts[i].state, "PENDING") == 0) {
                    /* a pending range "3-7" counts its tasks */
                    int a = 0, b = 0;
                    v->tasks_pending += sscanf(ts[i].task, "%d-%d", &a, &b) == 2 && b >= a ? b - a + 1 : 1;
                    if (ts[i].reason[0] && strcmp(ts[i].reason, "None") != 0)
                        snprintf(v->reason, sizeof v->reason, "%s", ts[i].reason);
                }
            }
        }
        free(ts);
    }
    if (strcmp(v->state, j->state) != 0) {
        if (jc_journal_set_state(db, j->seq, v->state, &err) != LT_OK) lt_error_print(&err, NULL);
        else if (jc_state_final(v->state))
            jc_journal_event(db, jc_stage_name((jc_stage)j->stage), "job %s: %s", j->job_id, v->state);
        snprintf(j->state, sizeof j->state, "%s", v->state);
    }
}

void jc_view_stages(const jc_run *r, sqlite3 *db, jc_stage_view v[JC_NSTAGES]) {
    memset(v, 0, JC_NSTAGES * sizeof *v);
    jc_job *jobs = NULL;
    size_t n = 0;
    lt_error err;
    if (jc_journal_jobs(db, &jobs, &n, &err) != LT_OK) lt_error_print(&err, NULL);
    for (size_t i = 0; i < n; i++)
        if (jobs[i].stage >= 0 && jobs[i].stage < JC_NSTAGES) v[jobs[i].stage].job = jobs[i], v[jobs[i].stage].has_job = true;
    free(jobs);
    for (int s = 0; s < JC_NSTAGES; s++) {
        jc_stage_view *w = &v[s];
        w->complete = jc_stage_complete(r, (jc_stage)s);
        if (w->has_job) refresh(r, db, w);
        else snprintf(w->state, sizeof w->state, "%s", w->complete ? "COMPLETED" : "-");
    }
    v[JC_DATAPREP].tasks = r->n_tasks;
    v[JC_DATAPREP].tasks_done = jc_tasks_done(r, NULL);
    v[JC_PLAN].steps = r->plan_steps;
    v[JC_PLAN].steps_done = jc_steps_planned(r);
    v[JC_TRAIN].steps = r->train_steps;
    v[JC_TRAIN].steps_done = jc_steps_trained(r, &v[JC_TRAIN].loss, &v[JC_TRAIN].tok_s, &v[JC_TRAIN].val_loss,
                                              &v[JC_TRAIN].val_step);
}

bool jc_view_active(const jc_stage_view *v) { return v->has_job && !jc_state_final(v->state); }
