/*
 * jobctl/cmd_track.c — `jobctl status`, `cancel`, `logs` and `list`: following runs that are
 * queued, running or done.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jobctl/cmd.h"
#include "jobctl/jobctl.h"
#include "jobctl/slurm.h" /* jc_scancel */
#include "lib/files.h"    /* lt_path_base */
#include "lib/json.h"     /* lt_json */

/* ---------------------------------------------------------------- status */

static void job_text(const jc_stage_view *v, char *buf, size_t cap) {
    if (!v->has_job) snprintf(buf, cap, "-");
    else if (v->job.tasks[0]) snprintf(buf, cap, "%s [%s]", v->job.job_id, v->job.tasks);
    else snprintf(buf, cap, "%s", v->job.job_id);
}

static void progress_text(jc_stage s, const jc_stage_view *v, char *buf, size_t cap) {
    int n = 0;
    if (s == JC_DATAPREP) {
        n = snprintf(buf, cap, "%d/%d tasks done", v->tasks_done, v->tasks);
        if (v->tasks_running) n += snprintf(buf + n, cap - (size_t)n, ", %d running", v->tasks_running);
        if (v->tasks_pending) n += snprintf(buf + n, cap - (size_t)n, ", %d pending", v->tasks_pending);
    } else if (s == JC_PLAN) {
        n = snprintf(buf, cap, "%lld/%lld steps planned", (long long)v->steps_done, (long long)v->steps);
    } else {
        n = snprintf(buf, cap, "step %lld/%lld", (long long)v->steps_done, (long long)v->steps);
        if (v->steps_done > 0) n += snprintf(buf + n, cap - (size_t)n, ", loss %.4f, %.0f tok/s", v->loss, v->tok_s);
        if (s == JC_TRAIN && v->val_step >= 0 && (size_t)n < cap)
            n += snprintf(buf + n, cap - (size_t)n, ", val %.4f at step %lld", v->val_loss, (long long)v->val_step);
    }
    if (v->reason[0] && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, " (%s)", v->reason);
}

static void print_table(const jc_stage_view *v, FILE *f) {
    fprintf(f, "%-9s %-16s %-11s %s\n", "STAGE", "JOB", "STATE", "PROGRESS");
    for (int s = 0; s < JC_NSTAGES; s++) {
        char job[300], prog[256];
        job_text(&v[s], job, sizeof job);
        progress_text((jc_stage)s, &v[s], prog, sizeof prog);
        fprintf(f, "%-9s %-16s %-11s %s\n", jc_stage_name((jc_stage)s), job, v[s].state, prog);
    }
}

static void print_json(const jc_open_run *o, const jc_stage_view *v) {
    lt_json j;
    lt_json_init(&j);
    lt_json_object_begin(&j);
    lt_json_key(&j, "run"), lt_json_string(&j, o->run.id);
    lt_json_key(&j, "dir"), lt_json_string(&j, o->run.dir);
    lt_json_key(&j, "mode"), lt_json_string(&j, o->row.mode);
    lt_json_key(&j, "created"), lt_json_string(&j, o->row.created);
    lt_json_key(&j, "config_hash"), lt_json_string(&j, o->row.config_hash);
    lt_json_key(&j, "stages");
    lt_json_array_begin(&j);
    for (int s = 0; s < JC_NSTAGES; s++) {
        lt_json_object_begin(&j);
        lt_json_key(&j, "stage"), lt_json_string(&j, jc_stage_name((jc_stage)s));
        lt_json_key(&j, "job");
        if (v[s].has_job) lt_json_string(&j, v[s].job.job_id);
        else lt_json_null(&j);
        if (s == JC_DATAPREP) lt_json_key(&j, "array"), lt_json_string(&j, v[s].job.tasks);
        lt_json_key(&j, "state"), lt_json_string(&j, v[s].state);
        lt_json_key(&j, "reason"), lt_json_string(&j, v[s].reason);
        lt_json_key(&j, "complete"), lt_json_bool(&j, v[s].complete);
        if (s == JC_DATAPREP) {
            lt_json_key(&j, "tasks"), lt_json_int(&j, v[s].tasks);
            lt_json_key(&j, "tasks_done"), lt_json_int(&j, v[s].tasks_done);
            lt_json_key(&j, "tasks_running"), lt_json_int(&j, v[s].tasks_running);
            lt_json_key(&j, "tasks_pending"), lt_json_int(&j, v[s].tasks_pending);
        } else {
            lt_json_key(&j, "steps"), lt_json_int(&j, v[s].steps);
            lt_json_key(&j, "steps_done"), lt_json_int(&j, v[s].steps_done);
        }
        if (s == JC_TRAIN && v[s].steps_done > 0) {
            lt_json_key(&j, "loss"), lt_json_double(&j, v[s].loss);
            lt_json_key(&j, "tok_s"), lt_json_double(&j, v[s].tok_s);
        }
        if (s == JC_TRAIN && v[s].val_step >= 0) { /* train.eval_every: the last validation loss */
            lt_json_key(&j, "val_loss"), lt_json_double(&j, v[s].val_loss);
            lt_json_key(&j, "val_step"), lt_json_int(&j, v[s].val_step);
        }
        lt_json_object_end(&j);
    }
    lt_json_array_end(&j);
    lt_json_object_end(&j);
    lt_error err;
    if (lt_json_fwrite_line(&j, stdout, "stdout", &err) != LT_OK) lt_error_print(&err, NULL);
    lt_json_free(&j);
}

/* The run named by the command's one positional argument (default: run.work_dir/run.name). */
static int open_named(lt_cli_ctx *ctx, const char *name, jc_open_run *o) {
    lt_error err;
    if (!name) name = lt_config_get_string(ctx->config, "run", "name");
    if (jc_open_existing(ctx, name, o, &err) != LT_OK) return lt_error_exit(&err);
    return 0;
}

int jc_cmd_status(lt_cli_ctx *ctx) {
    const char *name = NULL, *format = "table";
    for (int i = 1; i < ctx->argc; i++) {
        int missing = 0;
        const char *v;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--format", &missing))) format = v;
        else if (missing) return lt_cli_usage(ctx, "%s needs a value", ctx->argv[i]);
        else if (ctx->argv[i][0] == '-') return lt_cli_unknown_option(ctx, ctx->argv[i]);
        else if (!name) name = ctx->argv[i];
        else return lt_cli_usage(ctx, "one run at a time ('%s' and '%s')", name, ctx->argv[i]);
    }
    if (strcmp(format, "table") != 0 && strcmp(format, "json") != 0)
        return lt_cli_usage(ctx, "--format is table or json, not '%s'", format);
    jc_open_run o;
    int rc = open_named(ctx, name, &o);
    if (rc) return rc;
    jc_stage_view v[JC_NSTAGES];
    jc_view_stages(&o.run, o.db, v);
    if (strcmp(format, "json") == 0) {
        print_json(&o, v);
    } else {
        printf("run %s: %s (%s, created %s, config %.12s)\n", o.run.id, o.run.dir, o.row.mode, o.row.created,
               o.row.config_hash);
        print_table(v, stdout);
    }
    jc_close_existing(&o);
    return 0;
}

int jc_follow(const jc_run *r, sqlite3 *db) {
    char last[4096] = "", last_states[256] = "";
    time_t shown = 0;
    for (;;) {
        jc_stage_view v[JC_NSTAGES];
        jc_view_stages(r, db, v);
        char *text = NULL, states[256];
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        LT_CHECK_ALLOC(f);
        print_table(v, f);
        if (fclose(f) != 0) lt_die("out of memory");
        snprintf(states, sizeof states, "%s %s %s", v[0].state, v[1].state, v[2].state);
        /* the table when a state changes, else its progress at most every 10 s */
        if (strcmp(states, last_states) != 0 || (strcmp(text, last) != 0 && time(NULL) - shown >= 10)) {
            char now[32];
            jc_now_iso(now);
            fprintf(stderr, "jobctl: %s\n%s", now, text);
            snprintf(last, sizeof last, "%s", text);
            snprintf(last_states, sizeof last_states, "%s", states);
            shown = time(NULL);
        }
        free(text);
        bool active = false, all = true;
        for (int s = 0; s < JC_NSTAGES; s++) active |= jc_view_active(&v[s]), all &= v[s].complete;
        if (!active) {
            if (all) return 0;
            for (int s = 0; s < JC_NSTAGES; s++)
                if (!v[s].complete)
                    fprintf(stderr, "jobctl: error: stage %s is not complete (%s): 'jobctl logs %s --stage %s'\n",
                            jc_stage_name((jc_stage)s), v[s].state, r->dir, jc_stage_name((jc_stage)s));
            return 1;
        }
        sleep(2);
    }
}

/* ---------------------------------------------------------------- cancel */

int jc_cmd_cancel(lt_cli_ctx *ctx) {
    const char *name = NULL;
    for (int i = 1; i < ctx->argc; i++) {
        if (ctx->argv[i][0] == '-') return lt_cli_unknown_option(ctx, ctx->argv[i]);
        if (name) return lt_cli_usage(ctx, "one run at a time ('%s' and '%s')", name, ctx->argv[i]);
        name = ctx->argv[i];
    }
    if (!name) return lt_cli_usage(ctx, "which run? (jobctl cancel RUN; 'jobctl list' shows them)");
    jc_open_run o;
    int rc = open_named(ctx, name, &o);
    if (rc) return rc;
    jc_stage_view v[JC_NSTAGES];
    jc_view_stages(&o.run, o.db, v);
    char *ids[JC_NSTAGES];
    size_t n = 0, local = 0;
    lt_error err;
    for (int s = 0; s < JC_NSTAGES; s++) {
        if (!jc_view_active(&v[s])) continue;
        if (strncmp(v[s].job.job_id, "local-", 6) == 0) {
            long pid = strtol(v[s].job.job_id + 6, NULL, 10);
            if (pid > 0 && kill((pid_t)pid, SIGTERM) == 0)
                printf("stopping the local runner (pid %ld) of %s\n", pid, jc_stage_name((jc_stage)s)), local++;
            continue; /* the runner records the stage's end itself */
        }
        ids[n++] = v[s].job.job_id;
    }
    if (n > 0 && jc_scancel(ids, n, &err) != LT_OK) rc = lt_error_exit(&err);
    for (int s = 0; s < JC_NSTAGES && rc == 0; s++) {
        if (!jc_view_active(&v[s]) || strncmp(v[s].job.job_id, "local-", 6) == 0) continue;
        jc_journal_set_state(o.db, v[s].job.seq, "CANCELLED", &err);
        jc_journal_event(o.db, jc_stage_name((jc_stage)s), "job %s cancelled (jobctl cancel)", v[s].job.job_id);
        printf("cancelled %s job %s\n", jc_stage_name((jc_stage)s), v[s].job.job_id);
    }
    if (rc == 0 && n == 0 && local == 0) printf("run %s: nothing is pending or running\n", o.run.id);
    jc_close_existing(&o);
    return rc;
}

/* ---------------------------------------------------------------- logs */

typedef struct log_file {
    char *path;
    off_t shown;
} log_file;

/* The run's log files of `stage` (all stages when < 0) and array task `task` (any when
 * < 0), in job order; appends the new ones to *files. */
static void scan_logs(const jc_run *r, int stage, int task, log_file **files, size_t *n) {
    struct dirent **ents = NULL;
    int m = scandir(r->logs, &ents, NULL, versionsort);
    for (int i = 0; i < m; i++) {
        const char *nm = ents[i]->d_name;
        bool match = false;
        for (int s = 0; s < JC_NSTAGES && !match; s++) {
            if (stage >= 0 && s != stage) continue;
            char pre[300];
            snprintf(pre, sizeof pre, "%s-%s_", r->job_prefix, jc_stage_name((jc_stage)s));
            match = strncmp(nm, pre, strlen(pre)) == 0 && strlen(nm) > 4 && strcmp(nm + strlen(nm) - 4, ".out") == 0;
        }
        if (match && task >= 0) { /* ..._TASK.out */
            char suf[32];
            snprintf(suf, sizeof suf, "_%d.out", task);
            match = strlen(nm) > strlen(suf) && strcmp(nm + strlen(nm) - strlen(suf), suf) == 0;
        }
        bool known = false;
        for (size_t k = 0; k < *n && match; k++) known |= strcmp(lt_path_base((*files)[k].path), nm) == 0;
        if (match && !known) {
            *files = lt_realloc_check(*files, (*n + 1) * sizeof **files);
            if (asprintf(&(*files)[*n].path, "%s/%s", r->logs, nm) < 0) lt_die("out of memory");
            (*files)[*n].shown = 0;
            (*n)++;
        }
        free(ents[i]);
    }
    free(ents);
}

/* Print what log f holds past what was shown; a header when it is not the last one shown. */
static void show_new(log_file *f, const char **last) {
    FILE *in = fopen(f->path, "r");
    if (!in) return;
    if (fseeko(in, f->shown, SEEK_SET) == 0) {
        char buf[8192];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, in)) > 0) {
            if (*last != f->path) printf("==> %s <==\n", f->path), *last = f->path;
            fwrite(buf, 1, got, stdout);
            f->shown += (off_t)got;
        }
    }
    fclose(in);
    fflush(stdout);
}

int jc_cmd_logs(lt_cli_ctx *ctx) {
    const char *name = NULL, *stage_s = NULL, *task_s = NULL;
    bool follow = false;
    for (int i = 1; i < ctx->argc; i++) {
        int missing = 0;
        const char *v;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--stage", &missing))) stage_s = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--task", &missing))) task_s = v;
        else if (missing) return lt_cli_usage(ctx, "%s needs a value", ctx->argv[i]);
        else if (strcmp(ctx->argv[i], "--follow") == 0 || strcmp(ctx->argv[i], "-f") == 0) follow = true;
        else if (ctx->argv[i][0] == '-') return lt_cli_unknown_option(ctx, ctx->argv[i]);
        else if (!name) name = ctx->argv[i];
        else return lt_cli_usage(ctx, "one run at a time ('%s' and '%s')", name, ctx->argv[i]);
    }
    int stage = -1, task = -1;
    if (stage_s && (stage = jc_stage_of(stage_s)) < 0)
        return lt_cli_usage(ctx, "--stage: unknown stage '%s' (dataprep, plan, train)", stage_s);
    if (task_s) {
        char *end;
        long t = strtol(task_s, &end, 10);
        if (*end || t < 0 || end == task_s) return lt_cli_usage(ctx, "--task wants a task number, not '%s'", task_s);
        task = (int)t;
        if (stage < 0) stage = JC_DATAPREP;
    }
    jc_open_run o;
    int rc = open_named(ctx, name, &o);
    if (rc) return rc;
    log_file *files = NULL;
    size_t n = 0;
    const char *last = NULL;
    for (int quiet_rounds = 0;;) {
        scan_logs(&o.run, stage, task, &files, &n);
        for (size_t i = 0; i < n; i++) show_new(&files[i], &last);
        if (!follow) break;
        jc_stage_view v[JC_NSTAGES];
        jc_view_stages(&o.run, o.db, v);
        bool active = false;
        for (int s = 0; s < JC_NSTAGES; s++) active |= (stage < 0 || s == stage) && jc_view_active(&v[s]);
        quiet_rounds = active ? 0 : quiet_rounds + 1;
        if (quiet_rounds >= 2) break; /* one more look after the jobs ended: their last lines */
        usleep(500 * 1000);
    }
    if (n == 0) fprintf(stderr, "jobctl: no logs yet in %s%s%s\n", o.run.logs, stage >= 0 ? " for stage " : "",
                        stage >= 0 ? jc_stage_name((jc_stage)stage) : "");
    for (size_t i = 0; i < n; i++) free(files[i].path);
    free(files);
    jc_close_existing(&o);
    return 0;
}

/* ---------------------------------------------------------------- list */

int jc_cmd_list(lt_cli_ctx *ctx) {
    for (int i = 1; i < ctx->argc; i++) return lt_cli_unknown_option(ctx, ctx->argv[i]);
    const char *wd = lt_config_get_string(ctx->config, "run", "work_dir");
    if (!wd) wd = "runs";
    struct dirent **ents = NULL;
    int m = scandir(wd, &ents, NULL, versionsort);
    if (m < 0) {
        if (errno == ENOENT) {
            printf("no runs under %s (run.work_dir)\n", wd);
            return 0;
        }
        lt_report(wd, NULL, "cannot list run.work_dir: %s", strerror(errno));
        return 1;
    }
    int shown = 0;
    for (int i = 0; i < m; i++) {
        char *dir = NULL, *jdb = NULL;
        if (ents[i]->d_name[0] != '.' && asprintf(&dir, "%s/%s", wd, ents[i]->d_name) >= 0 &&
            asprintf(&jdb, "%s/jobctl.db", dir) >= 0 && access(jdb, F_OK) == 0) {
            sqlite3 *db = NULL;
            jc_run_row row;
            jc_job *jobs = NULL;
            size_t nj = 0;
            lt_error err;
            if (jc_journal_open(dir, false, &db, &err) == LT_OK && jc_journal_run(db, &row, &err) == LT_OK) {
                if (!shown++) printf("%-20s %-6s %-21s %s\n", "RUN", "MODE", "CREATED", "STAGES (last known state)");
                printf("%-20s %-6s %-21s", row.id, row.mode, row.created);
                const char *states[JC_NSTAGES] = {"-", "-", "-"};
                if (jc_journal_jobs(db, &jobs, &nj, &err) == LT_OK)
                    for (size_t k = 0; k < nj; k++)
                        if (jobs[k].stage >= 0 && jobs[k].stage < JC_NSTAGES) states[jobs[k].stage] = jobs[k].state;
                for (int s = 0; s < JC_NSTAGES; s++) printf(" %s=%s", jc_stage_name((jc_stage)s), states[s]);
                printf("\n");
                free(row.cwd), free(jobs);
            } else {
                lt_error_print(&err, NULL);
            }
            sqlite3_close(db);
        }
        free(dir), free(jdb), free(ents[i]);
    }
    free(ents);
    if (!shown) printf("no runs under %s (run.work_dir)\n", wd);
    return 0;
}
