/*
 * jobctl/local.c — the pipeline run here, without Slurm (jobctl/local.h).
 */
#include "jobctl/local.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jobctl/journal.h" /* jc_journal_* */
#include "jobctl/script.h"  /* JC_PREEMPTED_EXIT */
#include "lib/log.h"        /* LT_INFO */

static volatile sig_atomic_t got_signal; /* the last INT, TERM or USR2 received */

static void on_signal(int sig) { got_signal = sig; }

typedef struct child {
    pid_t pid;
    int fd;       /* its stdout + stderr; -1 once at end of file */
    FILE *log;
    char prefix[48];
    char *line;   /* a partial line not yet shown */
    size_t len, cap;
    int status;
} child;

/* Show the complete lines of what child c wrote (and write all of it to its log). */
static void pass_output(child *c, const char *data, size_t n) {
    if (c->log) fwrite(data, 1, n, c->log);
    for (size_t i = 0; i < n; i++) {
        char ch = data[i] == '\r' ? '\n' : data[i]; /* progress bars redraw with \r */
        if (c->len + 2 > c->cap) {
            c->cap = c->cap ? 2 * c->cap : 256;
            c->line = lt_realloc_check(c->line, c->cap);
        }
        if (ch == '\n') {
            if (c->len > 0) fprintf(stderr, "%s%.*s\n", c->prefix, (int)c->len, c->line);
            c->len = 0;
        } else {
            c->line[c->len++] = ch;
        }
    }
}

static void finish_child(child *c) {
    if (c->len > 0) fprintf(stderr, "%s%.*s\n", c->prefix, (int)c->len, c->line);
    c->len = 0;
    if (c->log) fflush(c->log);
    int ws = 0;
    while (waitpid(c->pid, &ws, 0) < 0 && errno == EINTR) {}
    c->status = jc_wait_status(ws);
}

/* Run n commands, at most P at once; each writes to logs[i] with prefixes[i] on stderr.
 * Returns 0, the first failing command's status (*failed = its index), or 128 + a signal
 * that stopped them. */
static int run_pool(const jc_argv *cmds, char *const *logs, char *const *prefixes, int n, int P, char *const *env,
                    int *failed) {
    child *c = lt_calloc_check((size_t)n, sizeof *c);
    int next = 0, running = 0, result = 0;
    bool stopping = false;
    *failed = -1;
    while ((next < n && !stopping) || running > 0) {
        while (!stopping && running < P && next < n) {
            child *k = &c[next];
            lt_error err;
            snprintf(k->prefix, sizeof k->prefix, "%s", prefixes[next]);
            if (!(k->log = fopen(logs[next], "a"))) LT_WARN("cannot open the log %s: %s", logs[next], strerror(errno));
            if (jc_spawn(cmds[next].v, NULL, env, NULL, &k->pid, &k->fd, &err) != LT_OK) {
                lt_error_print(&err, NULL);
                if (k->log) fclose(k->log);
                k->log = NULL, k->fd = -1, k->pid = 0;
                result = 1, *failed = next, stopping = true;
                break;
            }
            next++, running++;
        }
        struct pollfd *pf = lt_calloc_check((size_t)n, sizeof *pf);
        for (int i = 0; i < n; i++) pf[i] = (struct pollfd){.fd = c[i].pid > 0 && c[i].fd >= 0 ? c[i].fd : -1, .events = POLLIN};
        int pr = poll(pf, (nfds_t)n, 250);
        for (int i = 0; pr > 0 && i < n; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[8192];
            ssize_t got = read(c[i].fd, buf, sizeof buf);
            if (got > 0) {
                pass_output(&c[i], buf, (size_t)got);
                continue;
            }
            if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            close(c[i].fd);
            c[i].fd = -1;
            finish_child(&c[i]);
            if (c[i].log) fclose(c[i].log);
            c[i].log = NULL;
            running--;
            if (c[i].status != 0 && result == 0) {
                result = c[i].status, *failed = i;
                stopping = true; /* the stage has failed: start no more of it */
            }
        }
        free(pf);
        int sig = got_signal;
        if (sig) {
            got_signal = 0;
            for (int i = 0; i < n; i++)
                if (c[i].pid > 0 && c[i].fd >= 0) kill(-c[i].pid, sig == SIGUSR2 ? SIGUSR2 : SIGTERM);
            if (sig != SIGUSR2) {
                stopping = true;
                if (result == 0) result = 128 + sig;
            } else {
                fprintf(stderr, "jobctl: SIGUSR2: passed to the running stage (the trainer checkpoints after its step)\n");
            }
        }
    }
    for (int i = 0; i < n; i++) free(c[i].line);
    free(c);
    return result;
}

static char *log_path(const jc_run *r, jc_stage s, int task) {
    char *p = NULL;
    int rc = task >= 0 ? asprintf(&p, "%s/%s-%s_local_%d.out", r->logs, r->job_prefix, jc_stage_name(s), task)
                       : asprintf(&p, "%s/%s-%s_local.out", r->logs, r->job_prefix, jc_stage_name(s));
    if (rc < 0) lt_die("out of memory");
    return p;
}

static long cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

/* One stage: its commands, run through the pool; the journal follows. */
static int run_stage(const jc_run *r, sqlite3 *db, jc_stage s) {
    int n = 0;
    jc_argv *cmds = NULL;
    char **logs = NULL, **prefixes = NULL;
    int P = 1;
    char *env[3] = {NULL, NULL, NULL};
    if (s == JC_DATAPREP) {
        bool *done = lt_calloc_check((size_t)r->n_tasks, sizeof *done);
        jc_tasks_done(r, done);
        cmds = lt_calloc_check((size_t)r->n_tasks, sizeof *cmds);
        logs = lt_calloc_check((size_t)r->n_tasks, sizeof *logs);
        prefixes = lt_calloc_check((size_t)r->n_tasks, sizeof *prefixes);
        int64_t maxc = 0, threads = 0;
        lt_config_get_int(r->cfg, "slurm", "max_concurrent", &maxc, NULL);
        lt_config_get_int(r->cfg, "data", "threads", &threads, NULL);
        int todo = r->n_tasks - jc_tasks_done(r, NULL);
        P = maxc > 0 ? (int)maxc : (int)cpus();
        if (P > todo) P = todo > 0 ? todo : 1;
        for (int i = 0; i < r->n_tasks; i++) {
            if (done[i]) continue;
            jc_stage_argv(r, s, &cmds[n]);
            jc_argv_push(&cmds[n], "--task-id");
            jc_argv_pushf(&cmds[n], "%d", i);
            if (threads == 0) { /* the CPUs shared among the tasks running at once */
                jc_argv_push(&cmds[n], "--threads");
                jc_argv_pushf(&cmds[n], "%ld", cpus() / P > 0 ? cpus() / P : 1);
            }
            logs[n] = log_path(r, s, i);
            if (asprintf(&prefixes[n], "[dataprep %d] ", i) < 0) lt_die("out of memory");
            n++;
        }
        free(done);
    } else {
        cmds = lt_calloc_check(1, sizeof *cmds);
        logs = lt_calloc_check(1, sizeof *logs);
        prefixes = lt_calloc_check(1, sizeof *prefixes);
        if (s == JC_TRAIN && r->ranks > 1) {
            jc_argv_push(&cmds[0], "mpirun");
            jc_argv_push(&cmds[0], "-n");
            jc_argv_pushf(&cmds[0], "%d", r->ranks);
            jc_argv_push(&cmds[0], "--oversubscribe");
            if (geteuid() == 0) env[0] = "OMPI_ALLOW_RUN_AS_ROOT=1", env[1] = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
        }
        jc_argv c = {0};
        jc_stage_argv(r, s, &c);
        jc_argv_extend(&cmds[0], &c);
        jc_argv_free(&c);
        logs[0] = log_path(r, s, -1);
        if (asprintf(&prefixes[0], "[%s] ", jc_stage_name(s)) < 0) lt_die("out of memory");
        n = 1;
    }
    char id[64];
    snprintf(id, sizeof id, "local-%ld", (long)getpid());
    int64_t seq = 0;
    lt_error err;
    if (jc_journal_add_job(db, s, id, NULL, "RUNNING", &seq, &err) != LT_OK) lt_error_print(&err, NULL);
    fprintf(stderr, "jobctl: %s: %d command%s%s, logs in %s\n", jc_stage_name(s), n, n == 1 ? "" : "s",
            s == JC_DATAPREP ? (P > 1 ? " in parallel" : "") : "", r->logs);
    int failed = -1;
    int rc = run_pool(cmds, logs, prefixes, n, P, env, &failed);
    const char *state = rc == 0 ? "COMPLETED"
                        : rc == JC_PREEMPTED_EXIT && s == JC_TRAIN ? "PREEMPTED"
                        : rc > 128 ? "CANCELLED" : "FAILED";
    if (rc == 0 && !jc_stage_complete(r, s)) {
        fprintf(stderr, "jobctl: error: %s exited 0 but its outputs are not complete (%s)\n", jc_stage_name(s), r->dir);
        state = "FAILED", rc = 1;
    }
    if (jc_journal_set_state(db, seq, state, &err) != LT_OK) lt_error_print(&err, NULL);
    jc_journal_event(db, jc_stage_name(s), "local %s: %s (exit %d)", id, state, rc);
    if (rc != 0 && rc != JC_PREEMPTED_EXIT && rc < 128 && failed >= 0)
        fprintf(stderr, "jobctl: error: %s failed (exit %d): see %s\n", jc_stage_name(s), rc, logs[failed]);
    for (int i = 0; i < n; i++) jc_argv_free(&cmds[i]), free(logs[i]), free(prefixes[i]);
    free(cmds), free(logs), free(prefixes);
    return rc;
}

int jc_run_local(const jc_run *r, sqlite3 *db, unsigned mask) {
    struct sigaction sa = {0}, old[3];
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    int sigs[3] = {SIGINT, SIGTERM, SIGUSR2};
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, &old[i]);
    got_signal = 0;
    int rc = 0;
    for (int s = 0; s < JC_NSTAGES && rc == 0; s++) {
        if (!(mask & (1u << s))) continue;
        if (jc_stage_complete(r, (jc_stage)s)) {
            fprintf(stderr, "jobctl: %s: complete, skipped\n", jc_stage_name((jc_stage)s));
            continue;
        }
        rc = run_stage(r, db, (jc_stage)s);
    }
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
    if (rc == 0) rc = got_signal ? 128 + got_signal : 0;
    return rc;
}
