/*
 * jobctl/jobctl.h — the interface of the jobctl stage: the pipeline dataprep -> planner ->
 * trainer as Slurm jobs (sbatch arrays, afterok dependencies, tracking, cancel, requeue on
 * preemption, resume) or run here without Slurm, with one run directory and journal for
 * both (docs/jobctl.md).
 *
 * The library: jobctl/run.h (a run, its stages and commands, their progress), script.h
 * (batch scripts), slurm.h (the Slurm tools), journal.h (the run journal), local.h (the
 * local runner), proc.h (programs run without a shell), cmd.h (what the commands share).
 */
#ifndef LT_JOBCTL_H
#define LT_JOBCTL_H

#include "lib/cli.h" /* lt_cli_program, lt_cli_command */

/* The `jobctl` program: its commands (lib/cli.h runs them). */
extern const lt_cli_program jobctl_program;

/* The commands (jobctl/cmd_submit.c, jobctl/cmd_track.c): each returns its exit status. */
int jc_cmd_submit(lt_cli_ctx *ctx);
int jc_cmd_run(lt_cli_ctx *ctx);
int jc_cmd_resume(lt_cli_ctx *ctx);
int jc_cmd_status(lt_cli_ctx *ctx);
int jc_cmd_cancel(lt_cli_ctx *ctx);
int jc_cmd_logs(lt_cli_ctx *ctx);
int jc_cmd_list(lt_cli_ctx *ctx);

#endif
