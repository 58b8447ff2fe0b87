/*
 * jobctl/journal.c — the run journal in SQLite (jobctl/journal.h).
 */
#include "jobctl/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "lib/db.h"  /* lt_db_open */
#include "lib/log.h" /* LT_WARN */

static const char *const journal_migrations[] = {
    "CREATE TABLE run(id TEXT NOT NULL, dir TEXT NOT NULL, config_hash TEXT NOT NULL, cwd TEXT NOT NULL,"
    " mode TEXT NOT NULL, created TEXT NOT NULL, n_tasks INTEGER NOT NULL);"
    "CREATE TABLE jobs(seq INTEGER PRIMARY KEY, stage TEXT NOT NULL, job_id TEXT NOT NULL,"
    " tasks TEXT NOT NULL DEFAULT '', submitted TEXT NOT NULL, state TEXT NOT NULL);"
    "CREATE TABLE events(seq INTEGER PRIMARY KEY, time TEXT NOT NULL, stage TEXT NOT NULL DEFAULT '',"
    " what TEXT NOT NULL);",
};

static const lt_db_schema journal_schema = {
    0x4C544A43, /* 'LTJC' */
    "longtail run journal",
    journal_migrations,
    (int)(sizeof journal_migrations / sizeof journal_migrations[0]),
    0, /* a read-only open wants the current version */
};

lt_status jc_lock_run(const char *dir, int *fd, lt_error *err) {
    char *p = NULL;
    if (asprintf(&p, "%s/jobctl.lock", dir) < 0) lt_die("out of memory");
    int f = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (f < 0) {
        lt_fail(err, LT_ERR_IO, p, "cannot open the run's lock file: %s", strerror(errno));
        free(p);
        return LT_ERR_IO;
    }
    bool busy = flock(f, LOCK_EX | LOCK_NB) != 0;
    if (busy && errno == EWOULDBLOCK) {
        fprintf(stderr, "jobctl: another jobctl is working on %s: waiting for it to finish\n", dir);
        while ((busy = flock(f, LOCK_EX) != 0) && errno == EINTR) {}
    }
    if (busy) {
        lt_fail(err, LT_ERR_IO, p, "cannot lock the run: %s", strerror(errno));
        free(p), close(f);
        return LT_ERR_IO;
    }
    free(p);
    *fd = f;
    return LT_OK;
}

void jc_unlock_run(int fd) {
    if (fd >= 0) close(fd); /* closing drops the flock */
}

lt_status jc_journal_open(const char *dir, bool create, sqlite3 **db, lt_error *err) {
    char *p = NULL;
    if (asprintf(&p, "%s/jobctl.db", dir) < 0) lt_die("out of memory");
    lt_status st = lt_db_open(db, p, &journal_schema, create ? LT_DB_CREATE : 0, err);
    free(p);
    return st;
}

void jc_now_iso(char buf[32]) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void copy_col(char *dst, size_t cap, sqlite3_stmt *q, int col) {
    const unsigned char *t = sqlite3_column_text(q, col);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

lt_status jc_journal_run(sqlite3 *db, jc_run_row *row, lt_error *err) {
    sqlite3_stmt *q = NULL;
    memset(row, 0, sizeof *row);
    lt_status st = lt_db_prepare(db, "SELECT id, config_hash, mode, created, cwd, n_tasks FROM run LIMIT 1", &q, err);
    if (st != LT_OK) return st;
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        copy_col(row->id, sizeof row->id, q, 0);
        copy_col(row->config_hash, sizeof row->config_hash, q, 1);
        copy_col(row->mode, sizeof row->mode, q, 2);
        copy_col(row->created, sizeof row->created, q, 3);
        const unsigned char *c = sqlite3_column_text(q, 4);
        row->cwd = lt_strdup_check(c ? (const char *)c : "/");
        row->n_tasks = sqlite3_column_int(q, 5);
    } else if (rc == SQLITE_DONE) {
        st = lt_fail(err, LT_ERR_INPUT, NULL, "the run journal holds no run");
    } else {
        st = lt_db_fail(db, err, "reading the run journal");
    }
    sqlite3_finalize(q);
    return st;
}

lt_status jc_journal_begin_run(sqlite3 *db, const jc_run *r, const char *mode, lt_error *err) {
    jc_run_row row;
    lt_error e2;
    if (jc_journal_run(db, &row, &e2) == LT_OK) {
        lt_status st = LT_OK;
        if (strcmp(row.config_hash, r->hash) != 0) {
            st = lt_fail(err, LT_ERR_USAGE, r->dir, "run '%s' was submitted with another config (created %s)", row.id,
                         row.created);
            lt_error_hint(err, "compare with %s; choose another run.name or --run-dir for a new run", r->config_path);
        }
        free(row.cwd);
        if (st == LT_OK && strcmp(row.mode, mode) != 0) st = jc_journal_set_mode(db, mode, err);
        return st;
    }
    sqlite3_stmt *q = NULL;
    char now[32];
    jc_now_iso(now);
    lt_status st = lt_db_prepare(db, "INSERT INTO run(id, dir, config_hash, cwd, mode, created, n_tasks) VALUES(?,?,?,?,?,?,?)", &q, err);
    if (st != LT_OK) return st;
    sqlite3_bind_text(q, 1, r->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, r->dir, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, r->hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 4, r->cwd, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 5, mode, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 6, now, -1, SQLITE_STATIC);
    sqlite3_bind_int(q, 7, r->n_tasks);
    if (sqlite3_step(q) != SQLITE_DONE) st = lt_db_fail(db, err, "recording the run");
    sqlite3_finalize(q);
    return st;
}

lt_status jc_journal_set_mode(sqlite3 *db, const char *mode, lt_error *err) {
    sqlite3_stmt *q = NULL;
    lt_status st = lt_db_prepare(db, "UPDATE run SET mode = ?", &q, err);
    if (st != LT_OK) return st;
    sqlite3_bind_text(q, 1, mode, -1, SQLITE_STATIC);
    if (sqlite3_step(q) != SQLITE_DONE) st = lt_db_fail(db, err, "recording the run's mode");
    sqlite3_finalize(q);
    return st;
}

lt_status jc_journal_add_job(sqlite3 *db, jc_stage s, const char *job_id, const char *tasks, const char *state,
                             int64_t *seq, lt_error *err) {
    sqlite3_stmt *q = NULL;
    char now[32];
    jc_now_iso(now);
    lt_status st = lt_db_prepare(db, "INSERT INTO jobs(stage, job_id, tasks, submitted, state) VALUES(?,?,?,?,?)", &q, err);
    if (st != LT_OK) return st;
    sqlite3_bind_text(q, 1, jc_stage_name(s), -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, job_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, tasks ? tasks : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 4, now, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 5, state, -1, SQLITE_STATIC);
    if (sqlite3_step(q) != SQLITE_DONE) st = lt_db_fail(db, err, "recording a job");
    else if (seq) *seq = sqlite3_last_insert_rowid(db);
    sqlite3_finalize(q);
    return st;
}

lt_status jc_journal_set_state(sqlite3 *db, int64_t seq, const char *state, lt_error *err) {
    sqlite3_stmt *q = NULL;
    lt_status st = lt_db_prepare(db, "UPDATE jobs SET state = ? WHERE seq = ? AND state <> ?", &q, err);
    if (st != LT_OK) return st;
    sqlite3_bind_text(q, 1, state, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, seq);
    sqlite3_bind_text(q, 3, state, -1, SQLITE_STATIC);
    if (sqlite3_step(q) != SQLITE_DONE) st = lt_db_fail(db, err, "recording a job's state");
    sqlite3_finalize(q);
    return st;
}

lt_status jc_journal_jobs(sqlite3 *db, jc_job **jobs, size_t *n, lt_error *err) {
    sqlite3_stmt *q = NULL;
    *jobs = NULL, *n = 0;
    lt_status st = lt_db_prepare(db, "SELECT seq, stage, job_id, tasks, submitted, state FROM jobs ORDER BY seq", &q, err);
    if (st != LT_OK) return st;
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            *jobs = lt_realloc_check(*jobs, cap * sizeof **jobs);
        }
        jc_job *j = &(*jobs)[(*n)++];
        memset(j, 0, sizeof *j);
        j->seq = sqlite3_column_int64(q, 0);
        const unsigned char *sn = sqlite3_column_text(q, 1);
        j->stage = jc_stage_of(sn ? (const char *)sn : "");
        copy_col(j->job_id, sizeof j->job_id, q, 2);
        copy_col(j->tasks, sizeof j->tasks, q, 3);
        copy_col(j->submitted, sizeof j->submitted, q, 4);
        copy_col(j->state, sizeof j->state, q, 5);
    }
    if (rc != SQLITE_DONE) st = lt_db_fail(db, err, "reading the run's jobs");
    sqlite3_finalize(q);
    return st;
}

void jc_journal_event(sqlite3 *db, const char *stage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *what = NULL;
    int n = vasprintf(&what, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    char now[32];
    jc_now_iso(now);
    sqlite3_stmt *q = NULL;
    lt_error err;
    if (lt_db_prepare(db, "INSERT INTO events(time, stage, what) VALUES(?,?,?)", &q, &err) == LT_OK) {
        sqlite3_bind_text(q, 1, now, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, stage ? stage : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 3, what, -1, SQLITE_STATIC);
        if (sqlite3_step(q) != SQLITE_DONE) LT_WARN("could not record an event in the run journal: %s", sqlite3_errmsg(db));
    }
    sqlite3_finalize(q);
    free(what);
}
