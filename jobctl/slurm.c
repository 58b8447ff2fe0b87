/*
 * jobctl/slurm.c — sbatch, scontrol, sacct and scancel (jobctl/slurm.h).
 */
#include "jobctl/slurm.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobctl/proc.h"    /* jc_run_capture, jc_argv */
#include "lib/strutil.h"    /* lt_trim */

bool jc_slurm_available(void) { return jc_in_path("sbatch"); }

/* The first line of a tool's stderr, for an error message. */
static const char *first_line(char *s) {
    char *nl = strchr(s, '\n');
    if (nl) *nl = '\0';
    return lt_trim(s);
}

lt_status jc_sbatch(const char *cwd, const char *script, const char *dependency, char job_id[64], lt_error *err) {
    jc_argv a = {0};
    jc_argv_push(&a, "sbatch");
    jc_argv_push(&a, "--parsable");
    if (dependency && *dependency) jc_argv_pushf(&a, "--dependency=%s", dependency);
    jc_argv_push(&a, script);
    char *out = NULL, *eo = NULL;
    int status = 0;
    lt_status st = jc_run_capture(a.v, cwd, &out, &eo, &status, err);
    if (st == LT_OK && status != 0)
        st = lt_fail(err, LT_ERR_IO, script, "sbatch failed (exit %d): %s", status, first_line(eo));
    if (st == LT_OK) {
        /* --parsable: "JOBID" or "JOBID;CLUSTER" */
        char *id = lt_trim(out);
        id[strcspn(id, ";\n")] = '\0';
        if (!*id || strspn(id, "0123456789") != strlen(id) || strlen(id) >= 64)
            st = lt_fail(err, LT_ERR_IO, script, "sbatch printed no job id: '%s'", first_line(out));
        else snprintf(job_id, 64, "%s", id);
    }
    free(out), free(eo);
    jc_argv_free(&a);
    return st;
}

/* The value of KEY= in a `scontrol show job -o` line (at its start or after a blank, up to
 * the next blank). */
static void field(const char *line, const char *key, char *dst, size_t cap) {
    size_t kl = strlen(key);
    const char *p = NULL;
    for (const char *q = line; (q = strstr(q, key)) != NULL; q++) {
        if ((q == line || q[-1] == ' ') && q[kl] == '=') {
            p = q + kl + 1;
            break;
        }
    }
    dst[0] = '\0';
    if (!p) return;
    size_t n = strcspn(p, " \n");
    snprintf(dst, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
}

static void push_state(jc_task_state **v, size_t *n, size_t *cap, const char *task, const char *state,
                       const char *reason, int code) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        *v = lt_realloc_check(*v, *cap * sizeof **v);
    }
    jc_task_state *t = &(*v)[(*n)++];
    snprintf(t->task, sizeof t->task, "%s", task);
    snprintf(t->state, sizeof t->state, "%s", state);
    snprintf(t->reason, sizeof t->reason, "%s", reason);
    t->exit_code = code;
}

int jc_slurm_parse_max_array_size(const char *text) {
    const char *p = text ? strstr(text, "MaxArraySize") : NULL;
    if (!p) return 0;
    p += strlen("MaxArraySize");
    while (*p == ' ' || *p == '\t' || *p == '=') p++;
    long v = strtol(p, NULL, 10);
    return v > 0 && v < INT_MAX ? (int)v : 0;
}

int jc_slurm_max_array_size(void) {
    char *const argv[] = {"scontrol", "show", "config", NULL};
    char *out = NULL;
    int status = 1, n = 0;
    if (jc_run_capture(argv, NULL, &out, NULL, &status, NULL) == LT_OK && status == 0) n = jc_slurm_parse_max_array_size(out);
    free(out);
    return n;
}

static bool accounting(void) {
    char *const argv[] = {"scontrol", "show", "config", NULL};
    char *out = NULL;
    int status = 1;
    bool yes = false;
    if (jc_run_capture(argv, NULL, &out, NULL, &status, NULL) == LT_OK && status == 0) {
        const char *p = strstr(out, "AccountingStorageType");
        if (p) { /* its line does not say accounting_storage/none */
            const char *nl = strchr(p, '\n');
            const char *none = strstr(p, "accounting_storage/none");
            yes = !(none && (!nl || none < nl));
        }
    }
    free(out);
    return yes;
}

void jc_slurm_parse_show_job(char *text, jc_task_state **states, size_t *n) {
    size_t cap = *n;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char task[32], state[32], reason[64], code[32];
        field(line, "ArrayTaskId", task, sizeof task);
        field(line, "JobState", state, sizeof state);
        field(line, "Reason", reason, sizeof reason);
        field(line, "ExitCode", code, sizeof code);
        if (state[0]) push_state(states, n, &cap, task, state, reason, atoi(code));
    }
}

void jc_slurm_parse_sacct(char *text, jc_task_state **states, size_t *n) {
    size_t cap = *n;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *id = line, *state = strchr(line, '|'), *code;
        if (!state) continue;
        *state++ = '\0';
        if ((code = strchr(state, '|'))) *code++ = '\0';
        char *us = strchr(id, '_');
        state[strcspn(state, " ")] = '\0'; /* "CANCELLED by 0" -> CANCELLED */
        if (*state) push_state(states, n, &cap, us ? us + 1 : "", state, "", code ? atoi(code) : 0);
    }
}

lt_status jc_slurm_states(const char *job_id, jc_task_state **states, size_t *n, lt_error *err) {
    *states = NULL, *n = 0;
    char *const argv[] = {"scontrol", "show", "job", "-o", (char *)job_id, NULL};
    char *out = NULL, *eo = NULL;
    int status = 0;
    lt_status st = jc_run_capture(argv, NULL, &out, &eo, &status, err);
    if (st != LT_OK) return st;
    if (status == 0) jc_slurm_parse_show_job(out, states, n);
    free(out), free(eo);
    if (*n > 0 || !accounting()) return LT_OK;
    char *const sa[] = {"sacct", "-n", "-P", "-X", "-j", (char *)job_id, "-o", "JobID,State,ExitCode", NULL};
    st = jc_run_capture(sa, NULL, &out, &eo, &status, err);
    if (st != LT_OK) return st;
    if (status == 0) jc_slurm_parse_sacct(out, states, n);
    free(out), free(eo);
    return LT_OK;
}

bool jc_state_final(const char *s) {
    static const char *const active[] = {"PENDING", "RUNNING", "SUBMITTED", "CONFIGURING", "COMPLETING", "REQUEUED",
                                         "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SUSPENDED", "STOPPED", "SIGNALING",
                                         "STAGE_OUT", "RESV_DEL_HOLD", "PREEMPTED_REQUEUE", "SPECIAL_EXIT"};
    for (size_t i = 0; i < sizeof active / sizeof active[0]; i++)
        if (strcmp(s, active[i]) == 0) return false;
    return true;
}

const char *jc_slurm_overall(const jc_task_state *s, size_t n) {
    if (n == 0) return "";
    for (size_t i = 0; i < n; i++)
        if (strcmp(s[i].state, "RUNNING") == 0 || strcmp(s[i].state, "COMPLETING") == 0) return "RUNNING";
    for (size_t i = 0; i < n; i++)
        if (!jc_state_final(s[i].state)) return s[i].state;
    for (size_t i = 0; i < n; i++)
        if (strcmp(s[i].state, "COMPLETED") != 0) return s[i].state;
    return "COMPLETED";
}

lt_status jc_scancel(char *const ids[], size_t n, lt_error *err) {
    if (n == 0) return LT_OK;
    jc_argv a = {0};
    jc_argv_push(&a, "scancel");
    for (size_t i = 0; i < n; i++) jc_argv_push(&a, ids[i]);
    char *eo = NULL;
    int status = 0;
    lt_status st = jc_run_capture(a.v, NULL, NULL, &eo, &status, err);
    if (st == LT_OK && status != 0) st = lt_fail(err, LT_ERR_IO, NULL, "scancel failed (exit %d): %s", status, first_line(eo));
    free(eo);
    jc_argv_free(&a);
    return st;
}
