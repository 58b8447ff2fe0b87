/*
 * tests/testutil.c — helpers shared by the unit tests (see testutil.h).
 */
#include "tests/testutil.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int lt_test_in_child(void (*fn)(void *arg), void *arg, char *err, size_t err_size) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        fn(arg);
        fflush(NULL);
        _exit(0);
    }
    close(fds[1]);
    size_t used = 0;
    char sink[256];
    for (;;) {
        char *dst = (err && used + 1 < err_size) ? err + used : sink;
        size_t room = (err && used + 1 < err_size) ? err_size - used - 1 : sizeof sink;
        ssize_t n = read(fds[0], dst, room);
        if (n <= 0) break;
        if (dst != sink) used += (size_t)n;
    }
    if (err && err_size > 0) err[used] = '\0';
    close(fds[0]);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

int lt_test_tmpdir_create(char *dir, size_t size, const char *name) {
    int n = snprintf(dir, size, "/tmp/lt-test-%s-XXXXXX", name);
    if (n < 0 || (size_t)n >= size) return -1;
    return mkdtemp(dir) ? 0 : -1;
}

int lt_test_tmpdir_remove(const char *dir) {
    if (strncmp(dir, "/tmp/lt-test-", 13) != 0 || strchr(dir, '\'') != NULL) return -1; /* never anything else */
    char cmd[512];
    int n = snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (n < 0 || (size_t)n >= sizeof cmd) return -1;
    return system(cmd) == 0 ? 0 : -1;
}

size_t lt_test_where_to_offset(const char *where, const char *text, size_t n) {
    unsigned long line = 0, column = 0;
    char tail;
    if (sscanf(where, "line %lu, column %lu%c", &line, &column, &tail) != 2 || line < 1 || column < 1)
        return SIZE_MAX;
    size_t start = 0;
    for (unsigned long l = 1; l < line; l++) {
        const char *nl = memchr(text + start, '\n', n - start);
        if (nl == NULL) return SIZE_MAX;
        start = (size_t)(nl - text) + 1;
    }
    const char *nl = memchr(text + start, '\n', n - start);
    size_t line_end = nl != NULL ? (size_t)(nl - text) : n; /* the '\n' itself is column end + 1 */
    if (column - 1 > line_end - start) return SIZE_MAX;
    return start + column - 1;
}

static double clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double lt_test_now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }
double lt_test_cpu_ms(void) { return clock_ms(CLOCK_PROCESS_CPUTIME_ID); }

int lt_test_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
