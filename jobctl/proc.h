/*
 * jobctl/proc.h — running other programs without a shell.
 *
 * jobctl never hands a command line to `system` or `sh -c`: every program (sbatch,
 * squeue, the stage programs) runs through fork + execvp with its arguments as an argv
 * array, so no config value can be interpreted by a shell (issue 19, "Safety"). The
 * argv arrays of the stages are built once (jobctl/run.h) and either executed here
 * (local runs) or quoted into batch scripts (jobctl/script.h).
 *
 * Thread-safety: none needed (jobctl is single-threaded); the functions fork.
 */
#ifndef LT_JOBCTL_PROC_H
#define LT_JOBCTL_PROC_H

#include <stdbool.h>
#include <sys/types.h>

#include "lib/error.h" /* lt_status, lt_error */

/* An argv under construction (NULL-terminated at all times; owns its strings). */
typedef struct jc_argv {
    char **v;
    size_t n, cap;
} jc_argv;

void jc_argv_push(jc_argv *a, const char *s);
void jc_argv_pushf(jc_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jc_argv_extend(jc_argv *a, const jc_argv *b);
void jc_argv_free(jc_argv *a);

/* The exit status of a finished child as one number: its exit code, or 128 + the signal
 * that killed it (the shell's convention). */
int jc_wait_status(int wstatus);

/* Run argv[0] (searched in PATH) with stdin from /dev/null, in directory `cwd` (NULL: the
 * current one), and wait. Its stdout is captured into *out and its stderr into *errout
 * (malloc'd, NUL-terminated; either pointer may be NULL to discard that stream).
 * *status is jc_wait_status's number. LT_ERR_IO when the program cannot be started
 * (not found: the error names it); a non-zero exit is not an error here. */
lt_status jc_run_capture(char *const argv[], const char *cwd, char **out, char **errout, int *status, lt_error *err);

/* Start argv in the background in its own process group, in `cwd`, with stdin from
 * /dev/null and stdout + stderr into a new pipe whose read end is *out_fd (close-on-
 * exec). `env` (may be NULL) lists "NAME=VALUE" settings added to the child's
 * environment, and `unset` (may be NULL) names variables removed from it. */
lt_status jc_spawn(char *const argv[], const char *cwd, char *const env[], char *const unset[], pid_t *pid,
                   int *out_fd, lt_error *err);

/* Whether PROGRAM can be found in PATH (as execvp would). */
bool jc_in_path(const char *program);

#endif /* LT_JOBCTL_PROC_H */
