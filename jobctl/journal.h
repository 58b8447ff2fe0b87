/*
 * jobctl/journal.h — the run journal: a small SQLite file, RUN/jobctl.db, that remembers
 * what jobctl did for a run, so that `status`, `cancel`, `logs` and `resume` work after
 * jobctl (or the machine) restarts, and two submissions of one run never run a stage
 * twice.
 *
 * Tables (application_id 'LTJC'):
 *   run(id, dir, config_hash, cwd, mode, created, n_tasks)  one row: the run, the SHA-256
 *        of its effective config, the directory its relative paths resolve against, how it
 *        runs ('slurm' or 'local') and its dataprep task count
 *   jobs(seq, stage, job_id, tasks, submitted, state)  every submission of a stage, oldest
 *        first: Slurm's job id (local runs: 'local-PID'), the array tasks it covers
 *        ('' = not an array), and the last state seen (Slurm's names: PENDING, RUNNING,
 *        COMPLETED, FAILED, CANCELLED, ...)
 *   events(seq, time, stage, what)  what happened, for people
 * Times are UTC, ISO 8601.
 *
 * Changes to a run are serialized by an exclusive lock on RUN/jobctl.lock (jc_lock_run),
 * held from reading the state to recording the submission.
 */
#ifndef LT_JOBCTL_JOURNAL_H
#define LT_JOBCTL_JOURNAL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "jobctl/run.h"   /* jc_run, jc_stage */
#include "jobctl/slurm.h" /* jc_state_final */
#include "lib/error.h"  /* lt_status, lt_error */

typedef struct jc_job {
    int64_t seq;
    int stage;          /* jc_stage */
    char job_id[64];
    char tasks[256];
    char submitted[32];
    char state[32];
} jc_job;

typedef struct jc_run_row {
    char id[256];
    char config_hash[65];
    char mode[16];
    char created[32];
    char *cwd; /* malloc'd */
    int n_tasks;
} jc_run_row;

/* Take the run's lock (blocks while another jobctl holds it); returns the fd to pass to
 * jc_unlock_run. */
lt_status jc_lock_run(const char *dir, int *fd, lt_error *err);
void jc_unlock_run(int fd);

/* Open DIR/jobctl.db (create: make it when missing). */
lt_status jc_journal_open(const char *dir, bool create, sqlite3 **db, lt_error *err);

/* The run row (LT_ERR_INPUT when the journal has none). */
lt_status jc_journal_run(sqlite3 *db, jc_run_row *row, lt_error *err);

/* Record the run when the journal is new; else check that it is the same run: another
 * config hash is refused (LT_ERR_USAGE, hint: another run.name or --run-dir), and so is
 * another mode while a stage of the recorded one is still active. */
lt_status jc_journal_begin_run(sqlite3 *db, const jc_run *r, const char *mode, lt_error *err);
/* Switch the run's mode ('slurm' / 'local'). */
lt_status jc_journal_set_mode(sqlite3 *db, const char *mode, lt_error *err);

/* Record a submission; *seq is its row (may be NULL). */
lt_status jc_journal_add_job(sqlite3 *db, jc_stage s, const char *job_id, const char *tasks, const char *state,
                             int64_t *seq, lt_error *err);
lt_status jc_journal_set_state(sqlite3 *db, int64_t seq, const char *state, lt_error *err);

/* Every job row, oldest first (*jobs malloc'd). */
lt_status jc_journal_jobs(sqlite3 *db, jc_job **jobs, size_t *n, lt_error *err);

/* Append an event (printf-formatted). Failures are logged, not returned: an event is
 * for people, and losing one must not stop a submission. */
void jc_journal_event(sqlite3 *db, const char *stage, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The current UTC time as ISO 8601 (2026-11-25T16:30:50Z). */
void jc_now_iso(char buf[32]);

#endif /* LT_JOBCTL_JOURNAL_H */
