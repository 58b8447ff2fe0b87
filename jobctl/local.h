/*
 * jobctl/local.h — the pipeline without Slurm (`jobctl run --local`, `jobctl resume` of a
 * local run): the same stages, commands, run directory and completion rules as the Slurm
 * path (jobctl/run.h), executed here.
 *
 *   dataprep  its unfinished tasks, at most slurm.max_concurrent at once (0: one per CPU),
 *             each `dataprep run ... --task-id I` (with data.threads = 0, the CPUs shared
 *             among the running tasks; the shards are the same for any thread count)
 *   plan      planner build
 *   train     the trainer in one process when dp x pp = 1, else under
 *             `mpirun -n DPxPP --oversubscribe` (as root, with Open MPI's
 *             OMPI_ALLOW_RUN_AS_ROOT settings)
 *
 * Each program's output goes to its log in RUN/logs (lt-NAME-STAGE_local[_I].out, appended)
 * and, line by line with a [stage] prefix, to stderr: the progress shown all the way.
 * SIGINT / SIGTERM stop the running stage (its process groups) and mark it CANCELLED;
 * SIGUSR2 is passed to the trainer, which checkpoints after its step and exits 75, and so
 * does jobctl (resume continues). The journal records each stage as a job 'local-PID'.
 */
#ifndef LT_JOBCTL_LOCAL_H
#define LT_JOBCTL_LOCAL_H

#include <sqlite3.h>

#include "jobctl/run.h" /* jc_run */

/* Run the stages in `mask` (bit s = stage s) that are not complete, in order. Returns the
 * exit status for jobctl: 0 all done, 1 a stage failed (named on stderr), 75 the trainer
 * stopped for preemption, 128 + N stopped by signal N. */
int jc_run_local(const jc_run *r, sqlite3 *journal, unsigned mask);

#endif /* LT_JOBCTL_LOCAL_H */
