/*
 * jobctl/proc.c — fork + execvp with captured output (jobctl/proc.h).
 */
#include "jobctl/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void jc_argv_push(jc_argv *a, const char *s) {
    if (a->n + 2 > a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->v = lt_realloc_check(a->v, a->cap * sizeof *a->v);
    }
    a->v[a->n++] = lt_strdup_check(s);
    a->v[a->n] = NULL;
}

void jc_argv_pushf(jc_argv *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) lt_die("out of memory");
    jc_argv_push(a, s);
    free(s);
}

void jc_argv_extend(jc_argv *a, const jc_argv *b) {
    for (size_t i = 0; i < b->n; i++) jc_argv_push(a, b->v[i]);
}

void jc_argv_free(jc_argv *a) {
    for (size_t i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    a->v = NULL, a->n = a->cap = 0;
}

int jc_wait_status(int ws) {
    if (WIFEXITED(ws)) return WEXITSTATUS(ws);
    if (WIFSIGNALED(ws)) return 128 + WTERMSIG(ws);
    return 255;
}

bool jc_in_path(const char *program) {
    if (strchr(program, '/')) return access(program, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    char buf[4096];
    for (const char *p = path;;) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n + strlen(program) + 2 < sizeof buf) {
            snprintf(buf, sizeof buf, "%.*s/%s", (int)n, n ? p : ".", program);
            struct stat st;
            if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0) return true;
        }
        if (!e) return false;
        p = e + 1;
    }
}

/* In the child: report why exec failed on the pipe `fd` (the parent reads it) and exit 127. */
static void exec_or_report(char *const argv[], const char *cwd, int fd) {
    if (cwd && chdir(cwd) != 0) {
        int e = -errno; /* negative: the directory, not the program */
        (void)!write(fd, &e, sizeof e);
        _exit(126);
    }
    execvp(argv[0], argv);
    int e = errno;
    (void)!write(fd, &e, sizeof e);
    _exit(127);
}

/* A pipe for exec errors: the write end closes on a successful exec. */
static lt_status exec_pipe(int p[2], lt_error *err) {
    if (pipe2(p, O_CLOEXEC) != 0) return lt_fail(err, LT_ERR_IO, NULL, "pipe: %s", strerror(errno));
    return LT_OK;
}

/* After fork: whether the child's exec worked (reads the exec-error pipe). */
static lt_status exec_result(int rd, char *const argv[], const char *cwd, lt_error *err) {
    int e = 0;
    ssize_t n;
    do n = read(rd, &e, sizeof e);
    while (n < 0 && errno == EINTR);
    close(rd);
    if (n == (ssize_t)sizeof e) {
        if (e < 0) return lt_fail(err, LT_ERR_IO, cwd, "cannot enter the directory: %s", strerror(-e));
        lt_fail(err, LT_ERR_IO, NULL, "cannot run '%s': %s", argv[0], strerror(e));
        if (e == ENOENT) lt_error_hint(err, "is it installed and on PATH?");
        return LT_ERR_IO;
    }
    return LT_OK;
}

/* Append what fd holds to a growing buffer; false at end of file. */
static bool drain(int fd, char **buf, size_t *len, size_t *cap) {
    char tmp[4096];
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) return false;
    if (*len + (size_t)n + 1 > *cap) {
        *cap = (*len + (size_t)n + 1) * 2;
        *buf = lt_realloc_check(*buf, *cap);
    }
    memcpy(*buf + *len, tmp, (size_t)n);
    *len += (size_t)n;
    (*buf)[*len] = '\0';
    return true;
}

lt_status jc_run_capture(char *const argv[], const char *cwd, char **out, char **errout, int *status, lt_error *err) {
    int po[2], pe[2], px[2];
    if (out) *out = NULL;
    if (errout) *errout = NULL;
    if (pipe2(po, O_CLOEXEC) != 0) return lt_fail(err, LT_ERR_IO, NULL, "pipe: %s", strerror(errno));
    if (pipe2(pe, O_CLOEXEC) != 0) {
        close(po[0]), close(po[1]);
        return lt_fail(err, LT_ERR_IO, NULL, "pipe: %s", strerror(errno));
    }
    if (exec_pipe(px, err) != LT_OK) {
        close(po[0]), close(po[1]), close(pe[0]), close(pe[1]);
        return LT_ERR_IO;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(po[0]), close(po[1]), close(pe[0]), close(pe[1]), close(px[0]), close(px[1]);
        return lt_fail(err, LT_ERR_IO, NULL, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        signal(SIGPIPE, SIG_DFL);
        exec_or_report(argv, cwd, px[1]);
    }
    close(po[1]), close(pe[1]), close(px[1]);
    lt_status st = exec_result(px[0], argv, cwd, err);
    char *bo = NULL, *be = NULL;
    size_t lo = 0, co = 0, le = 0, ce = 0;
    bool open_o = true, open_e = true;
    while (open_o || open_e) {
        struct pollfd pf[2] = {{.fd = open_o ? po[0] : -1, .events = POLLIN}, {.fd = open_e ? pe[0] : -1, .events = POLLIN}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (open_o && (pf[0].revents & (POLLIN | POLLHUP | POLLERR))) open_o = drain(po[0], &bo, &lo, &co);
        if (open_e && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) open_e = drain(pe[0], &be, &le, &ce);
    }
    close(po[0]), close(pe[0]);
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
    *status = jc_wait_status(ws);
    if (!bo) bo = lt_strdup_check("");
    if (!be) be = lt_strdup_check("");
    if (out) *out = bo;
    else free(bo);
    if (errout) *errout = be;
    else free(be);
    return st;
}

lt_status jc_spawn(char *const argv[], const char *cwd, char *const env[], char *const unset[], pid_t *pid_out,
                   int *out_fd, lt_error *err) {
    int po[2], px[2];
    if (pipe2(po, O_CLOEXEC) != 0) return lt_fail(err, LT_ERR_IO, NULL, "pipe: %s", strerror(errno));
    if (exec_pipe(px, err) != LT_OK) {
        close(po[0]), close(po[1]);
        return LT_ERR_IO;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(po[0]), close(po[1]), close(px[0]), close(px[1]);
        return lt_fail(err, LT_ERR_IO, NULL, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(po[1], 1);
        dup2(po[1], 2);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGUSR2, SIG_DFL);
        for (size_t i = 0; unset && unset[i]; i++) unsetenv(unset[i]);
        for (size_t i = 0; env && env[i]; i++) putenv(env[i]);
        exec_or_report(argv, cwd, px[1]);
    }
    setpgid(pid, pid); /* both sides, so the group exists before either goes on */
    close(po[1]), close(px[1]);
    lt_status st = exec_result(px[0], argv, cwd, err);
    if (st != LT_OK) {
        close(po[0]);
        int ws;
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
        return st;
    }
    *pid_out = pid;
    *out_fd = po[0];
    return LT_OK;
}
