/*
 * jobctl/cmd_submit.c — `jobctl submit`, `jobctl resume` and `jobctl run`: putting a run's
 * unfinished stages to work, as Slurm jobs chained by afterok or here (jobctl/local.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobctl/cmd.h"
#include "jobctl/jobctl.h"
#include "jobctl/local.h"  /* jc_run_local */
#include "jobctl/script.h" /* jc_stage_script */
#include "jobctl/slurm.h"  /* jc_sbatch */
#include "lib/files.h"     /* lt_write_file_atomic */

/* --stages a,b,c -> a mask of stages; 0 on a bad name (reported). */
static unsigned parse_stages(const lt_cli_ctx *ctx, const char *list, int *rc) {
    unsigned mask = 0;
    char *copy = lt_strdup_check(list), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int s = jc_stage_of(t);
        if (s < 0) {
            *rc = lt_cli_usage(ctx, "--stages: unknown stage '%s' (the stages: dataprep, plan, train)", t);
            free(copy);
            return 0;
        }
        mask |= 1u << s;
    }
    free(copy);
    if (!mask) *rc = lt_cli_usage(ctx, "--stages names no stage");
    return mask;
}

typedef enum { ACT_DONE, ACT_ACTIVE, ACT_SUBMIT, ACT_LEAVE } action;

/* Submit the run's stages in `mask` that are neither complete nor pending/running, each
 * `afterok` on the stage before it when that one is still to run. With dry_run, print the
 * scripts instead and touch nothing. Returns the exit status. */
static int submit_run(const jc_run *r, sqlite3 *db, unsigned mask, bool dry_run, bool parsable) {
    jc_stage_view v[JC_NSTAGES];
    if (db) jc_view_stages(r, db, v);
    else {
        memset(v, 0, sizeof v);
        for (int s = 0; s < JC_NSTAGES; s++) v[s].complete = jc_stage_complete(r, (jc_stage)s);
    }
    action act[JC_NSTAGES];
    bool upstream_missing = false;
    for (int s = 0; s < JC_NSTAGES; s++) {
        if (v[s].complete && !jc_view_active(&v[s])) act[s] = ACT_DONE;
        else if (jc_view_active(&v[s])) act[s] = ACT_ACTIVE;
        else if (mask & (1u << s)) act[s] = ACT_SUBMIT;
        else act[s] = ACT_LEAVE;
        if (act[s] == ACT_SUBMIT && upstream_missing) {
            fprintf(stderr, "jobctl: error: stage %s needs the outputs of an earlier stage that is neither complete nor "
                            "submitted (%s)\nhint: add it to --stages\n",
                    jc_stage_name((jc_stage)s), r->dir);
            return 2;
        }
        if (act[s] == ACT_LEAVE) upstream_missing = true;
    }
    char submitted[JC_NSTAGES][64];
    int n_sub = 0;
    char dep[80] = "";
    lt_error err;
    int rc = 0;
    if (!parsable && !dry_run) printf("run %s (%s)\n", r->id, r->dir);
    if (!parsable && !dry_run && r->array_note[0]) printf("  note: %s\n", r->array_note);
    for (int s = 0; s < JC_NSTAGES && rc == 0; s++) {
        const char *name = jc_stage_name((jc_stage)s);
        if (act[s] == ACT_DONE) {
            if (!parsable) printf("  %-9s complete, skipped\n", name);
            dep[0] = '\0';
            continue;
        }
        if (act[s] == ACT_ACTIVE) {
            if (!parsable) printf("  %-9s already submitted: job %s (%s)\n", name, v[s].job.job_id, v[s].state);
            snprintf(dep, sizeof dep, "afterok:%s", v[s].job.job_id);
            continue;
        }
        if (act[s] == ACT_LEAVE) {
            dep[0] = '\0';
            continue;
        }
        char *tasks = NULL;
        if (s == JC_DATAPREP) {
            bool *want = lt_calloc_check((size_t)r->n_tasks, sizeof *want);
            jc_tasks_done(r, want);
            for (int i = 0; i < r->n_tasks; i++) want[i] = !want[i];
            tasks = jc_task_list(want, r->n_tasks);
            free(want);
        }
        char *text = jc_stage_script(r, (jc_stage)s, tasks);
        char *rel = NULL, *path = NULL;
        if (asprintf(&rel, "scripts/%s.sbatch", name) < 0 || asprintf(&path, "%s/%s", r->dir, rel) < 0)
            lt_die("out of memory");
        if (dry_run) {
            if (s == JC_DATAPREP && r->array_note[0]) printf("# ==== note: %s\n", r->array_note);
            printf("# ==== %s: cd %s && sbatch --parsable%s%s %s\n", name, "RUN_DIR", dep[0] ? " --dependency=" : "",
                   dep[0] ? dep : "", rel);
            fputs(text, stdout);
            snprintf(dep, sizeof dep, "afterok:<%s>", name);
        } else {
            char id[64];
            lt_status st = lt_write_file_atomic(path, text, strlen(text), &err);
            if (st == LT_OK) st = jc_sbatch(r->dir, rel, dep, id, &err);
            if (st == LT_OK) st = jc_journal_add_job(db, (jc_stage)s, id, tasks, "PENDING", NULL, &err);
            if (st != LT_OK) {
                lt_error_print(&err, NULL);
                rc = lt_exit_code(st);
                if (n_sub > 0) { /* no half-submitted pipeline */
                    char *ids[JC_NSTAGES];
                    for (int k = 0; k < n_sub; k++) ids[k] = submitted[k];
                    lt_error e2;
                    if (jc_scancel(ids, (size_t)n_sub, &e2) != LT_OK) lt_error_print(&e2, NULL);
                    fprintf(stderr, "jobctl: cancelled the %d job%s this submission had made\n", n_sub, n_sub == 1 ? "" : "s");
                    jc_job *jobs = NULL;
                    size_t nj = 0;
                    if (jc_journal_jobs(db, &jobs, &nj, &e2) == LT_OK)
                        for (size_t k = 0; k < nj; k++)
                            for (int m = 0; m < n_sub; m++)
                                if (strcmp(jobs[k].job_id, submitted[m]) == 0) jc_journal_set_state(db, jobs[k].seq, "CANCELLED", &e2);
                    free(jobs);
                }
                jc_journal_event(db, name, "submission failed: %s; nothing of it left queued", err.what);
            } else {
                snprintf(submitted[n_sub++], 64, "%s", id);
                jc_journal_event(db, name, "submitted job %s%s%s%s%s", id, tasks ? " tasks " : "", tasks ? tasks : "",
                                 dep[0] ? " " : "", dep);
                if (parsable) printf("%s\n", id);
                else
                    printf("  %-9s job %s%s%s%s%s\n", name, id, tasks ? ", tasks " : "", tasks ? tasks : "",
                           dep[0] ? ", " : "", dep);
                snprintf(dep, sizeof dep, "afterok:%s", id);
            }
        }
        free(tasks), free(text), free(rel), free(path);
    }
    if (rc == 0 && !parsable && !dry_run) {
        printf("follow it: jobctl status %s%s\n", r->dir, n_sub ? "" : " (nothing was left to submit)");
    }
    fflush(stdout);
    return rc;
}

typedef struct submit_args {
    const char *run_dir, *stages;
    bool dry_run, parsable, local, wait;
} submit_args;

static int parse_args(const lt_cli_ctx *ctx, submit_args *a, bool run_cmd) {
    memset(a, 0, sizeof *a);
    for (int i = 1; i < ctx->argc; i++) {
        int missing = 0;
        const char *v;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--run-dir", &missing))) a->run_dir = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--stages", &missing))) a->stages = v;
        else if (missing) return lt_cli_usage(ctx, "%s needs a value", ctx->argv[i]);
        else if (!run_cmd && strcmp(ctx->argv[i], "--dry-run") == 0) a->dry_run = true;
        else if (!run_cmd && strcmp(ctx->argv[i], "--parsable") == 0) a->parsable = true;
        else if (run_cmd && strcmp(ctx->argv[i], "--local") == 0) a->local = true;
        else return lt_cli_unknown_option(ctx, ctx->argv[i]);
    }
    return 0;
}

/* Slurm refuses an array larger than the cluster's MaxArraySize (Common Crawl alone is
 * ~90,000 WET files): without data.num_tasks the files are grouped into at most that many
 * tasks (dataprep's task I takes files I, I + N, ...), and the dry run says so; an explicit
 * data.num_tasks above it is an error. */
static lt_status fit_array(jc_run *r, const lt_config *cfg, lt_error *err) {
    int max = jc_slurm_max_array_size();
    const char *from = "MaxArraySize of scontrol show config";
    if (max <= 0) {
        max = 1001;
        from = "Slurm's default MaxArraySize; scontrol did not answer";
    }
    if (r->n_tasks <= max) return LT_OK;
    if (lt_config_is_set(cfg, "data", "num_tasks")) {
        lt_status st = lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, "data", "num_tasks"),
                               "data.num_tasks = %d is more than the cluster's array limit of %d tasks (%s)", r->n_tasks,
                               max, from);
        lt_error_hint(err, "lower data.num_tasks, or leave it unset to group the input files into %d tasks", max);
        return st;
    }
    snprintf(r->array_note, sizeof r->array_note, "%d input files grouped into %d dataprep tasks (%s: %d)", r->n_inputs,
             max, from, max);
    r->n_tasks = max;
    return LT_OK;
}

/* A new run of the config (or the same run again): its directory, journal and lock. */
static int with_new_run(const lt_cli_ctx *ctx, const submit_args *a, const char *mode,
                        int (*body)(const jc_run *, sqlite3 *, const submit_args *, unsigned)) {
    int rc = 0;
    unsigned mask = a->stages ? parse_stages(ctx, a->stages, &rc) : (1u << JC_NSTAGES) - 1;
    if (rc) return rc;
    jc_run r;
    lt_error err;
    lt_status st = jc_run_init(&r, ctx->config, a->run_dir, NULL, &err);
    if (st == LT_OK && strcmp(mode, "slurm") == 0 && !a->dry_run && !jc_slurm_available()) {
        st = lt_fail(&err, LT_ERR_USAGE, NULL, "sbatch is not on PATH: this machine cannot submit Slurm jobs");
        lt_error_hint(&err, "run the pipeline here with 'jobctl run --local'");
    }
    if (st == LT_OK && strcmp(mode, "slurm") == 0) st = fit_array(&r, ctx->config, &err);
    if (st != LT_OK) {
        jc_run_free(&r);
        return lt_error_exit(&err);
    }
    if (a->dry_run) {
        rc = submit_run(&r, NULL, mask, true, false);
        jc_run_free(&r);
        return rc;
    }
    int lock = -1;
    sqlite3 *db = NULL;
    st = jc_run_create_dirs(&r, &err);
    if (st == LT_OK) st = jc_lock_run(r.dir, &lock, &err);
    if (st == LT_OK) st = jc_journal_open(r.dir, true, &db, &err);
    if (st == LT_OK) st = jc_journal_begin_run(db, &r, mode, &err);
    rc = st == LT_OK ? body(&r, db, a, mask) : lt_error_exit(&err);
    sqlite3_close(db);
    jc_unlock_run(lock);
    jc_run_free(&r);
    return rc;
}

static int submit_body(const jc_run *r, sqlite3 *db, const submit_args *a, unsigned mask) {
    return submit_run(r, db, mask, a->dry_run, a->parsable);
}

static int local_body(const jc_run *r, sqlite3 *db, const submit_args *a, unsigned mask) {
    (void)a;
    fprintf(stderr, "jobctl: run %s (%s), locally: %d dataprep task%s, %lld plan steps, %lld training steps on %d rank%s\n",
            r->id, r->dir, r->n_tasks, r->n_tasks == 1 ? "" : "s", (long long)r->plan_steps, (long long)r->train_steps,
            r->ranks, r->ranks == 1 ? "" : "s");
    int rc = jc_run_local(r, db, mask);
    if (rc == 0) fprintf(stderr, "jobctl: run %s complete: %s\n", r->id, r->dir);
    else if (rc == 75) fprintf(stderr, "jobctl: run %s stopped at a checkpoint; continue with: jobctl resume %s\n", r->id, r->dir);
    return rc;
}

/* Slurm, waiting: follow the stages until none is pending or running. */
static int follow_body(const jc_run *r, sqlite3 *db, const submit_args *a, unsigned mask) {
    (void)a;
    int rc = submit_run(r, db, mask, false, false);
    if (rc) return rc;
    return jc_follow(r, db);
}

int jc_cmd_submit(lt_cli_ctx *ctx) {
    submit_args a;
    int rc = parse_args(ctx, &a, false);
    return rc ? rc : with_new_run(ctx, &a, "slurm", submit_body);
}

int jc_cmd_run(lt_cli_ctx *ctx) {
    submit_args a;
    int rc = parse_args(ctx, &a, true);
    if (rc) return rc;
    if (!a.local && !jc_slurm_available()) {
        fprintf(stderr, "jobctl: no Slurm here (sbatch is not on PATH): running locally\n");
        a.local = true;
    }
    return with_new_run(ctx, &a, a.local ? "local" : "slurm", a.local ? local_body : follow_body);
}

int jc_cmd_resume(lt_cli_ctx *ctx) {
    const char *name = NULL, *stages = NULL;
    bool local = false;
    for (int i = 1; i < ctx->argc; i++) {
        int missing = 0;
        const char *v;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--stages", &missing))) stages = v;
        else if (missing) return lt_cli_usage(ctx, "%s needs a value", ctx->argv[i]);
        else if (strcmp(ctx->argv[i], "--local") == 0) local = true;
        else if (ctx->argv[i][0] == '-') return lt_cli_unknown_option(ctx, ctx->argv[i]);
        else if (!name) name = ctx->argv[i];
        else return lt_cli_usage(ctx, "one run at a time ('%s' and '%s')", name, ctx->argv[i]);
    }
    if (!name) return lt_cli_usage(ctx, "which run? (jobctl resume RUN; 'jobctl list' shows them)");
    int rc = 0;
    unsigned mask = stages ? parse_stages(ctx, stages, &rc) : (1u << JC_NSTAGES) - 1;
    if (rc) return rc;
    jc_open_run o;
    lt_error err;
    if (jc_open_existing(ctx, name, &o, &err) != LT_OK) return lt_error_exit(&err);
    if (strcmp(o.row.mode, "local") == 0) local = true;
    if (!local && !jc_slurm_available()) {
        fprintf(stderr, "jobctl: no Slurm here (sbatch is not on PATH): resuming locally\n");
        local = true;
    }
    int lock = -1;
    lt_status st = jc_lock_run(o.run.dir, &lock, &err);
    if (st == LT_OK) st = jc_journal_set_mode(o.db, local ? "local" : "slurm", &err);
    if (st != LT_OK) rc = lt_error_exit(&err);
    else {
        jc_journal_event(o.db, NULL, "resume (%s)", local ? "local" : "slurm");
        submit_args a = {.local = local};
        rc = local ? local_body(&o.run, o.db, &a, mask) : submit_run(&o.run, o.db, mask, false, false);
    }
    jc_unlock_run(lock);
    jc_close_existing(&o);
    return rc;
}
