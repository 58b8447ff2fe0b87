/*
 * jobctl/jobctl.h — the interface of the jobctl stage (submit, track, cancel and requeue the pipeline under Slurm).
 *
 * Job submission and tracking join this library with the jobctl issue; for now it
 * holds the program's command table.
 */
#ifndef LT_JOBCTL_H
#define LT_JOBCTL_H

#include "lib/cli.h" /* lt_cli_program */

/* The `jobctl` program: its commands (lib/cli.h runs them). */
extern const lt_cli_program jobctl_program;

#endif
