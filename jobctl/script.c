/*
 * jobctl/script.c — batch scripts of the stages (jobctl/script.h).
 */
#include "jobctl/script.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buildconfig.h" /* PACKAGE_VERSION */

char *jc_shell_quote(const char *s) {
    bool plain = *s != '\0';
    for (const char *p = s; *p && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%", *p) != NULL;
    if (plain) return lt_strdup_check(s);
    size_t n = 2;
    for (const char *p = s; *p; p++) n += *p == '\'' ? 4 : 1;
    char *q = lt_malloc_check(n + 1), *o = q;
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') memcpy(o, "'\\''", 4), o += 4;
        else *o++ = *p;
    }
    *o++ = '\'';
    *o = '\0';
    return q;
}

/* Append `argv` to f, each word quoted, separated by spaces. */
static void put_argv(FILE *f, const jc_argv *a) {
    for (size_t i = 0; i < a->n; i++) {
        char *q = jc_shell_quote(a->v[i]);
        fprintf(f, "%s%s", i ? " " : "", q);
        free(q);
    }
}

static void directive(FILE *f, const lt_config *cfg, const char *key, const char *option) {
    const char *v = lt_config_get_string(cfg, "slurm", key);
    if (v && *v) fprintf(f, "#SBATCH --%s=%s\n", option, v);
}

static int64_t int_key(const lt_config *cfg, const char *section, const char *key, int64_t def) {
    int64_t v = def;
    if (lt_config_is_set(cfg, section, key)) lt_config_get_int(cfg, section, key, &v, NULL);
    return v;
}

char *jc_stage_script(const jc_run *r, jc_stage s, const char *tasks) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    LT_CHECK_ALLOC(f);
    const lt_config *cfg = r->cfg;
    const char *name = jc_stage_name(s);
    bool requeue = true;
    lt_config_get_bool(cfg, "slurm", "requeue", &requeue, NULL);
    fprintf(f, "#!/bin/bash\n");
    fprintf(f, "# longtail run %s, stage %s: written by jobctl %s (docs/jobctl.md).\n", r->id, name, PACKAGE_VERSION);
    fprintf(f, "# Paths in the directives are relative to the run directory; to submit it by hand:\n");
    fprintf(f, "#   cd RUN_DIR && sbatch%s scripts/%s.sbatch\n", s == JC_DATAPREP ? "" : " [--dependency=afterok:JOBID]",
            name);
    fprintf(f, "#SBATCH --job-name=%s-%s\n", r->job_prefix, name);
    fprintf(f, "#SBATCH --output=logs/%%x_%s.out\n", s == JC_DATAPREP ? "%A_%a" : "%j");
    fprintf(f, "#SBATCH --open-mode=append\n");
    fprintf(f, "#SBATCH %s\n", requeue ? "--requeue" : "--no-requeue");
    directive(f, cfg, "partition", "partition");
    directive(f, cfg, "account", "account");
    directive(f, cfg, "time", "time");
    if (lt_config_is_set(cfg, "slurm", "cpus_per_task"))
        fprintf(f, "#SBATCH --cpus-per-task=%lld\n", (long long)int_key(cfg, "slurm", "cpus_per_task", 1));
    if (s == JC_DATAPREP) {
        int64_t m = int_key(cfg, "slurm", "max_concurrent", 0);
        if (m > 0) fprintf(f, "#SBATCH --array=%s%%%lld\n", tasks, (long long)m);
        else fprintf(f, "#SBATCH --array=%s\n", tasks);
    }
    if (s == JC_TRAIN) {
        fprintf(f, "#SBATCH --nodes=%lld\n", (long long)int_key(cfg, "slurm", "nodes", 1));
        fprintf(f, "#SBATCH --ntasks=%d\n", r->ranks);
        int64_t nodes = int_key(cfg, "slurm", "nodes", 1);
        if (nodes > 1) /* equal nodes of whole TP groups (jobctl/run.c checked it) */
            fprintf(f, "#SBATCH --ntasks-per-node=%lld\n", (long long)(r->ranks / nodes));
        if (lt_config_is_set(cfg, "slurm", "gpus_per_node"))
            fprintf(f, "#SBATCH --gpus-per-node=%lld\n", (long long)int_key(cfg, "slurm", "gpus_per_node", 0));
        fprintf(f, "#SBATCH --signal=B:USR2@%lld\n", (long long)int_key(cfg, "slurm", "signal_seconds", 120));
    }
    const char *extra = lt_config_get_string(cfg, "slurm", "extra_sbatch");
    if (extra && *extra) fprintf(f, "#SBATCH %s\n", extra);
    fprintf(f, "set -u\n");
    char *cwd = jc_shell_quote(r->cwd);
    fprintf(f, "cd -- %s || exit 1 # the config's relative paths resolve here\n", cwd);
    free(cwd);
    fprintf(f, "echo \"jobctl: %s-%s, job ${SLURM_JOB_ID:-?}%s on $(hostname), restart "
               "${SLURM_RESTART_COUNT:-0}, $(date -u +%%FT%%TZ)\"\n",
            r->job_prefix, name, s == JC_DATAPREP ? " task ${SLURM_ARRAY_TASK_ID:-?}" : "");
    jc_argv cmd = {0};
    jc_stage_argv(r, s, &cmd);
    if (s == JC_DATAPREP) {
        fprintf(f, "exec ");
        put_argv(f, &cmd);
        fprintf(f, " --task-id \"$SLURM_ARRAY_TASK_ID\"\n");
    } else if (s == JC_PLAN) {
        fprintf(f, "exec ");
        put_argv(f, &cmd);
        fprintf(f, "\n");
    } else {
        const char *mpi = lt_config_get_string(cfg, "slurm", "mpi");
        jc_argv launch = {0};
        jc_argv_push(&launch, "srun");
        jc_argv_pushf(&launch, "--mpi=%s", mpi && *mpi ? mpi : "pmix");
        jc_argv_pushf(&launch, "--ntasks=%d", r->ranks);
        jc_argv_extend(&launch, &cmd);
        fprintf(f, "# Slurm's preemption warning (USR2, to this shell) goes on to srun, which passes it to\n"
                   "# the ranks: the trainer finishes its step, checkpoints and exits %d.\n",
                JC_PREEMPTED_EXIT);
        fprintf(f, "pid=\ntrap 'echo \"jobctl: USR2 (preemption warning): the trainer checkpoints after its step\"; "
                   "[ -n \"$pid\" ] && kill -USR2 \"$pid\" 2>/dev/null' USR2\n");
        put_argv(f, &launch);
        fprintf(f, " &\npid=$!\n");
        fprintf(f, "while kill -0 \"$pid\" 2>/dev/null; do wait \"$pid\"; done\n");
        fprintf(f, "wait \"$pid\"; rc=$?\n");
        if (requeue)
            fprintf(f, "if [ \"$rc\" = %d ]; then\n"
                       "  echo \"jobctl: the trainer stopped at its checkpoint; requeueing job $SLURM_JOB_ID\"\n"
                       "  scontrol requeue \"$SLURM_JOB_ID\" && exit 0\n"
                       "fi\n",
                    JC_PREEMPTED_EXIT);
        fprintf(f, "exit \"$rc\"\n");
        jc_argv_free(&launch);
    }
    jc_argv_free(&cmd);
    if (fclose(f) != 0) lt_die("out of memory");
    return text;
}
