/*
 * plans/store/store.c — the lt_store object (plans/store/store.h): creating a plan database
 * for writing (lt_store_begin: one transaction on a temporary file), committing it
 * (synced, then renamed over the target) or aborting, opening one to read, the run row;
 * and what every file of the store shares: the prepared statements and the error helpers.
 *
 * Durability comes at commit: COMMIT, close, fsync the file, rename it over the target,
 * fsync the directory. While it is written the temporary file alone has journal_mode=OFF
 * and synchronous=OFF; with the journal off a failed statement cannot be rolled back, so a
 * put that fails half-way marks the store failed and commit refuses (the caller aborts; the
 * temporary file is deleted and the target never saw anything).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buildconfig.h"          /* PACKAGE_VERSION */
#include "lib/files.h"            /* lt_fsync_dir */
#include "plans/store/internal.h" /* struct lt_store, store_same_run, store_check_schema_version */

/* ------------------------------------------------------------------ statements and errors */

/* The SQL of every prepared statement (internal.h's Q_*). */
static const char *const query_sql[Q_COUNT] = {
    [Q_HAS_STEP] = "SELECT 1 FROM steps WHERE run_id = ?1 AND step = ?2",
    [Q_INS_STEP] = "INSERT INTO steps (run_id, step, strategy, n_samples, n_tokens, predicted_ms, bubble_ratio, "
                   "peak_mem_bytes, solve_ms, params, solver_status, runner_up, runner_up_ms, n_predicted) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    [Q_INS_SAMPLE] = "INSERT INTO step_samples (run_id, step, idx, sample_id, length, dp_rank, task, doc, tok) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [Q_INS_PIPELINE] = "INSERT INTO pipelines (run_id, step, dp_rank, cp, predicted_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
    [Q_INS_STAGE] = "INSERT INTO stages (run_id, step, dp_rank, stage, busy_ms, peak_mem_bytes, layer_begin, "
                    "layer_end, n_ops, ops) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [Q_INS_SLICE] = "INSERT INTO units_slices (run_id, step, dp_rank, passes, unit, seq, idx, tok_begin, tok_end, "
                    "cp, slice) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    [Q_INS_MERGE] = "INSERT INTO dp_merges (run_id, step, idx, sample_id, dp_rank, cp, reason) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [Q_STEP_LIST] = "SELECT step FROM steps WHERE run_id = ?1 ORDER BY step",
    [Q_STEP_RANGE] = "SELECT min(step), max(step), count(*) FROM steps WHERE run_id = ?1",
    [Q_STEP_STRATEGY_COUNT] = "SELECT count(*) FROM steps WHERE run_id = ?1 AND strategy = ?2",
    [Q_GET_STEP] = "SELECT strategy, n_samples, n_tokens, predicted_ms, bubble_ratio, peak_mem_bytes, solve_ms, "
                   "params, solver_status, runner_up, runner_up_ms, n_predicted FROM steps WHERE run_id = ?1 AND step = ?2",
    [Q_GET_PIPELINES] = "SELECT dp_rank, cp, predicted_ms FROM pipelines WHERE run_id = ?1 AND step = ?2 "
                        "ORDER BY dp_rank",
    [Q_GET_STAGES] = "SELECT dp_rank, stage, busy_ms, peak_mem_bytes, layer_begin, layer_end, n_ops, ops FROM stages "
                     "WHERE run_id = ?1 AND step = ?2 ORDER BY dp_rank, stage",
    [Q_GET_SAMPLES] = "SELECT idx, sample_id, length, dp_rank, task, doc, tok FROM step_samples "
                      "WHERE run_id = ?1 AND step = ?2 ORDER BY idx",
    [Q_GET_SLICES] = "SELECT dp_rank, passes, unit, seq, idx, tok_begin, tok_end, cp, slice FROM units_slices "
                     "WHERE run_id = ?1 AND step = ?2 ORDER BY dp_rank, passes, unit, seq",
    [Q_GET_MERGES] =
        "SELECT idx, sample_id, dp_rank, cp, reason FROM dp_merges WHERE run_id = ?1 AND step = ?2 ORDER BY idx",
    [Q_RUN] = "SELECT name, strategy, config, fingerprint, input, sample_policy, context_len, global_batch, seed, "
              "dp, pp, tp, layers, mem_cap_bytes, tuning, n_samples_total, longtail_version "
              "FROM runs WHERE run_id = ?1",
};

/* Statement `which`, made on first use; reset, its bindings cleared and ?1 bound to the run. */
lt_status store_query(lt_store *st, int which, sqlite3_stmt **out, lt_error *err) {
    if (!st->q[which]) {
        lt_status s = lt_db_prepare(st->db, query_sql[which], &st->q[which], err);
        if (s != LT_OK) return s;
    }
    sqlite3_reset(st->q[which]);
    sqlite3_clear_bindings(st->q[which]);
    sqlite3_bind_int64(st->q[which], 1, st->run_id);
    *out = st->q[which];
    return LT_OK;
}

/* Step a reading query; SQLITE_ROW or SQLITE_DONE, else an I/O error is filled. */
int store_step_row(lt_store *st, sqlite3_stmt *q, const char *table, lt_status *s, lt_error *err) {
    int rc = sqlite3_step(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        char what[64];
        snprintf(what, sizeof what, "cannot read table %s", table);
        *s = lt_db_fail(st->db, err, what);
    }
    return rc;
}

/* LT_ERR_INPUT "step N: WHAT" naming the file. */
lt_status store_step_fail(lt_error *err, const char *path, uint64_t step, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return lt_fail(err, LT_ERR_INPUT, path, "step %" PRIu64 ": %s", step, what);
}

/* ------------------------------------------------------------------ the store */

/* The multi-row insert statements of a writer (write.c's batches). */
static void finalize_batches(lt_store *st) {
    for (int b = 0; st->batch && b < B_COUNT; b++) {
        sqlite3_finalize(st->batch[b].many);
        st->batch[b].many = NULL;
        st->batch[b].n = 0;
    }
}

static void close_db(lt_store *st) {
    for (int i = 0; i < Q_COUNT; i++) {
        sqlite3_finalize(st->q[i]);
        st->q[i] = NULL;
    }
    finalize_batches(st);
    if (st->db) sqlite3_close_v2(st->db);
    st->db = NULL;
}

static void store_free(lt_store *st) {
    if (!st) return;
    close_db(st);
    free(st->batch);
    free(st->json);
    free(st->path);
    free(st->tmp);
    free(st);
}

/* Remove the temporary file and what SQLite may have left beside it. */
static void remove_tmp(const char *tmp) {
    if (!tmp) return;
    static const char *const suffix[] = {"", "-journal", "-wal", "-shm"};
    size_t n = strlen(tmp) + 16;
    char *name = lt_malloc_check(n);
    if (!name) return; /* (never: lt_malloc_check exits) */
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
        snprintf(name, n, "%s%s", tmp, suffix[i]);
        unlink(name);
    }
    free(name);
}

/* An lt_db_open error on the temporary file reads as one on the target. */
static void retarget_error(lt_error *err, const char *tmp, const char *path) {
    if (err && strcmp(err->where, tmp) == 0) snprintf(err->where, sizeof err->where, "%s", path);
}

/* ------------------------------------------------------------------ the run */

static char *dup_column(sqlite3_stmt *q, int col) {
    const unsigned char *t = sqlite3_column_text(q, col);
    return lt_strdup_check(t ? (const char *)t : "");
}

void lt_run_info_free(lt_run_info *r) {
    if (!r) return;
    free(r->name);
    free(r->strategy);
    free(r->config);
    free(r->fingerprint);
    free(r->input);
    free(r->sample_policy);
    free(r->tuning);
    free(r->version);
    memset(r, 0, sizeof *r);
}

/* The stored run into *out (strings allocated); LT_ERR_INPUT when the file holds none. */
static lt_status read_run(lt_store *st, lt_run_info *out, lt_error *err) {
    memset(out, 0, sizeof *out);
    sqlite3_stmt *q;
    lt_status s = store_query(st, Q_RUN, &q, err);
    if (s != LT_OK) return s;
    int rc = sqlite3_step(q);
    if (rc == SQLITE_DONE) {
        sqlite3_reset(q);
        lt_fail(err, LT_ERR_INPUT, st->path, "the plan database holds no run (table runs is empty)");
        lt_error_hint(err, "rebuild it with 'planner build'");
        return LT_ERR_INPUT;
    }
    if (rc != SQLITE_ROW) {
        s = lt_db_fail(st->db, err, "cannot read table runs");
        sqlite3_reset(q);
        return s;
    }
    out->name = dup_column(q, 0);
    out->strategy = dup_column(q, 1);
    out->config = dup_column(q, 2);
    out->fingerprint = dup_column(q, 3);
    out->input = dup_column(q, 4);
    out->sample_policy = dup_column(q, 5);
    out->context_len = sqlite3_column_int64(q, 6);
    out->global_batch = sqlite3_column_int64(q, 7);
    out->seed = sqlite3_column_int64(q, 8);
    out->dp = sqlite3_column_int(q, 9);
    out->pp = sqlite3_column_int(q, 10);
    out->tp = sqlite3_column_int(q, 11);
    out->layers = sqlite3_column_int(q, 12);
    out->mem_cap = (double)sqlite3_column_int64(q, 13);
    out->tuning = dup_column(q, 14);
    out->n_samples_total = (uint64_t)sqlite3_column_int64(q, 15);
    out->version = dup_column(q, 16);
    sqlite3_reset(q);
    return LT_OK;
}

/* Cache the run's shape (pp, layers, memory cap) in the store. */
static lt_status load_run_shape(lt_store *st, lt_error *err) {
    lt_run_info r;
    lt_status s = read_run(st, &r, err);
    if (s != LT_OK) return s;
    st->pp = r.pp;
    st->layers = r.layers;
    st->mem_cap = r.mem_cap;
    lt_run_info_free(&r);
    if (st->pp < 1 || st->layers < st->pp)
        return lt_fail(err, LT_ERR_INPUT, st->path, "table runs: %d pipeline stages over %d layers", st->pp,
                       st->layers);
    return LT_OK;
}

/* The runs row of a new file. */
static lt_status insert_run(lt_store *st, const lt_run_info *run, lt_error *err) {
    sqlite3_stmt *q;
    lt_status s = lt_db_prepare(st->db,
                                "INSERT INTO runs (run_id, name, strategy, config, fingerprint, input, sample_policy, "
                                "context_len, global_batch, seed, dp, pp, tp, layers, mem_cap_bytes, tuning, "
                                "n_samples_total, longtail_version) "
                                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
                                "?18)",
                                &q, err);
    if (s != LT_OK) return s;
    const char *text[] = {run->name,  run->strategy,     run->config, run->fingerprint,
                          run->input, run->sample_policy};
    sqlite3_bind_int64(q, 1, st->run_id);
    for (int i = 0; i < 6; i++) sqlite3_bind_text(q, 2 + i, text[i] ? text[i] : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 8, run->context_len);
    sqlite3_bind_int64(q, 9, run->global_batch);
    sqlite3_bind_int64(q, 10, run->seed);
    sqlite3_bind_int(q, 11, run->dp);
    sqlite3_bind_int(q, 12, run->pp);
    sqlite3_bind_int(q, 13, run->tp);
    sqlite3_bind_int(q, 14, run->layers);
    sqlite3_bind_int64(q, 15, isfinite(run->mem_cap) && run->mem_cap > 0 ? llround(run->mem_cap) : 0);
    sqlite3_bind_text(q, 16, run->tuning ? run->tuning : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 17, (int64_t)run->n_samples_total);
    sqlite3_bind_text(q, 18, run->version ? run->version : PACKAGE_VERSION, -1, SQLITE_STATIC);
    if (sqlite3_step(q) != SQLITE_DONE) {
        s = lt_db_fail(st->db, err, "cannot store the run");
        lt_error_hint(err, "the run info breaks a constraint of table runs (docs/plans-schema.md)");
    }
    sqlite3_finalize(q);
    return s;
}

lt_status lt_store_run_info(lt_store *st, lt_run_info *out, lt_error *err) { return read_run(st, out, err); }

/* ------------------------------------------------------------------ writing: begin, commit, abort */

/* Copy `from` to the new file `to` (same permission bits), checking every call. */
static lt_status copy_file(const char *from, const char *to, lt_error *err) {
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) return lt_fail(err, LT_ERR_IO, from, "cannot open the plan database: %s", strerror(errno));
    struct stat sb;
    if (fstat(in, &sb) != 0) {
        lt_status s = lt_fail(err, LT_ERR_IO, from, "cannot stat the plan database: %s", strerror(errno));
        close(in);
        return s;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(in);
        return lt_fail(err, LT_ERR_IO, from, "the plan database is not a regular file");
    }
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) {
        lt_status s = lt_fail(err, LT_ERR_IO, to, "cannot create the temporary plan database: %s", strerror(errno));
        close(in);
        return s;
    }
    enum { BUF = 1 << 20 };
    char *buf = lt_malloc_check(BUF);
    lt_status s = LT_OK;
    for (;;) {
        ssize_t n = read(in, buf, BUF);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            s = lt_fail(err, LT_ERR_IO, from, "cannot read the plan database: %s", strerror(errno));
            break;
        }
        if (n == 0) break;
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) {
                s = lt_fail(err, LT_ERR_IO, to, "cannot write the temporary plan database: %s", strerror(errno));
                break;
            }
            done += w;
        }
        if (s != LT_OK) break;
    }
    free(buf);
    if (s == LT_OK && fchmod(out, sb.st_mode & 07777) != 0)
        s = lt_fail(err, LT_ERR_IO, to, "cannot set the permissions of the temporary plan database: %s",
                    strerror(errno));
    if (close(out) != 0 && s == LT_OK)
        s = lt_fail(err, LT_ERR_IO, to, "cannot write the temporary plan database: %s", strerror(errno));
    close(in);
    if (s != LT_OK) unlink(to);
    return s;
}

/* Give the new, empty database at tmp its page size before the schema is created (VACUUM
 * writes the header of an empty file). PLAN_PAGE_SIZE: larger pages make shallower B-trees
 * for the millions of small rows of a build. */
#ifndef PLAN_PAGE_SIZE
#define PLAN_PAGE_SIZE 32768
#endif
static lt_status set_page_size(const char *tmp, const char *path, lt_error *err) {
    sqlite3 *db = NULL;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA page_size = %d; VACUUM;", PLAN_PAGE_SIZE);
    lt_status s = LT_OK;
    if (sqlite3_open_v2(tmp, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
        sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        s = lt_fail(err, LT_ERR_IO, path, "cannot create the plan database: %s",
                    db ? sqlite3_errmsg(db) : "out of memory");
    if (db && sqlite3_close(db) != SQLITE_OK && s == LT_OK)
        s = lt_fail(err, LT_ERR_IO, path, "cannot create the plan database: %s", sqlite3_errmsg(db));
    return s;
}

lt_status lt_store_begin(lt_store **out, const char *path, const lt_run_info *run, bool timings, lt_error *err) {
    *out = NULL;
    if (!path || !*path) return lt_fail(err, LT_ERR_USAGE, NULL, "no plan database path given");
    if (!run || !run->config || !run->fingerprint || !run->strategy)
        return lt_fail(err, LT_ERR_INTERNAL, path, "lt_store_begin: the run needs its config, fingerprint, strategy");
    lt_store *st = lt_calloc_check(1, sizeof *st);
    st->path = lt_strdup_check(path);
    st->run_id = RUN_ID;
    st->timings = timings;
    st->batch = lt_calloc_check(B_COUNT, sizeof *st->batch);
    size_t n = strlen(path) + 32;
    st->tmp = lt_malloc_check(n);
    snprintf(st->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    remove_tmp(st->tmp); /* a stale file of a killed writer that had our pid */

    struct stat sb;
    int found = stat(path, &sb);
    bool resume = found == 0 && sb.st_size > 0; /* an empty file is a new database */
    lt_status s = LT_OK;
    if (found != 0 && errno != ENOENT) {
        s = lt_fail(err, LT_ERR_IO, path, "cannot open the plan database: %s", strerror(errno));
    } else if (resume) {
        s = store_check_schema_version(path, err);
        if (s == LT_OK) s = copy_file(path, st->tmp, err);
    } else {
        /* create the temporary ourselves: a missing directory or a permission error is
         * reported with the system's reason, naming the target */
        int fd = open(st->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0) {
            s = lt_fail(err, LT_ERR_IO, path, "cannot create the plan database: %s", strerror(errno));
            if (errno == ENOENT) lt_error_hint(err, "the directory of %s does not exist; create it first", path);
        } else {
            close(fd);
            s = set_page_size(st->tmp, path, err);
        }
    }
    if (s != LT_OK) {
        free(st->tmp);
        st->tmp = NULL; /* nothing of ours to remove (copy_file cleans up after itself) */
        store_free(st);
        return s;
    }
    s = lt_db_open(&st->db, st->tmp, &store_plan_schema, LT_DB_CREATE, err);
    if (s != LT_OK) retarget_error(err, st->tmp, path);
    /* Fast writing on the private temporary file (the top of this file and of write.c);
     * foreign keys are declared for documentation and PRAGMA foreign_key_check, not
     * enforced here. */
    if (s == LT_OK)
        s = lt_db_exec(st->db,
                       "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA locking_mode = EXCLUSIVE; "
                       "PRAGMA foreign_keys = OFF; PRAGMA cache_size = -65536; BEGIN;",
                       err);
    if (s == LT_OK) {
        if (resume) {
            lt_run_info have;
            s = read_run(st, &have, err);
            if (s == LT_OK) {
                s = store_same_run(&have, run, path, err);
                lt_run_info_free(&have);
            }
        } else {
            s = insert_run(st, run, err);
        }
    }
    if (s == LT_OK) s = load_run_shape(st, err);
    if (s != LT_OK) {
        retarget_error(err, st->tmp, path);
        lt_store_abort(st);
        return s;
    }
    *out = st;
    return LT_OK;
}

/* The directory part of a path ("." when it has none). */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return lt_strdup_check(".");
    if (slash == path) return lt_strdup_check("/");
    char *d = lt_malloc_check((size_t)(slash - path) + 1);
    memcpy(d, path, (size_t)(slash - path));
    d[slash - path] = '\0';
    return d;
}

lt_status lt_store_commit(lt_store *st, lt_error *err) {
    if (!st) return lt_fail(err, LT_ERR_INTERNAL, NULL, "lt_store_commit without a store");
    if (!st->tmp) {
        lt_status s = lt_fail(err, LT_ERR_INTERNAL, st->path, "lt_store_commit on a store opened for reading");
        store_free(st);
        return s;
    }
    if (st->failed) {
        lt_status s = lt_fail(err, LT_ERR_INTERNAL, st->path, "a step failed to store; nothing was written");
        lt_store_abort(st);
        return s;
    }
    /* Planner statistics (a sample of each index, deterministic) so that queries filtering
     * on step alone use the (run_id, step, ...) keys by skip-scan. */
    lt_status s = lt_db_exec(st->db, "PRAGMA analysis_limit = 1000; ANALYZE; COMMIT;", err);
    if (s != LT_OK) {
        retarget_error(err, st->tmp, st->path);
        lt_error_prefix(err, "committing the plans: ");
        lt_store_abort(st);
        return s;
    }
    for (int i = 0; i < Q_COUNT; i++) {
        sqlite3_finalize(st->q[i]);
        st->q[i] = NULL;
    }
    finalize_batches(st);
    if (sqlite3_close(st->db) != SQLITE_OK) {
        s = lt_db_fail(st->db, err, "cannot close the temporary plan database");
        lt_store_abort(st);
        return s;
    }
    st->db = NULL;
    /* synchronous was off while writing: make the data durable before it gets its name */
    int fd = open(st->tmp, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        s = lt_fail(err, LT_ERR_IO, st->tmp, "cannot sync the plan database: %s", strerror(errno));
        if (fd >= 0) close(fd);
        lt_store_abort(st);
        return s;
    }
    if (close(fd) != 0) {
        s = lt_fail(err, LT_ERR_IO, st->tmp, "cannot sync the plan database: %s", strerror(errno));
        lt_store_abort(st);
        return s;
    }
    if (rename(st->tmp, st->path) != 0) {
        s = lt_fail(err, LT_ERR_IO, st->path, "cannot rename %s over the plan database: %s", st->tmp,
                    strerror(errno));
        lt_store_abort(st);
        return s;
    }
    char *dir = dir_of(st->path);
    s = lt_fsync_dir(dir, err);
    free(dir);
    free(st->tmp);
    st->tmp = NULL;
    store_free(st);
    return s;
}

void lt_store_abort(lt_store *st) {
    if (!st) return;
    close_db(st);
    remove_tmp(st->tmp);
    store_free(st);
}

/* ------------------------------------------------------------------ reading */

lt_status lt_store_open(lt_store **out, const char *path, lt_error *err) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        lt_status s = lt_fail(err, LT_ERR_IO, path, "cannot open the plan database: %s", strerror(errno));
        if (errno == ENOENT) lt_error_hint(err, "check the path; 'planner build --db FILE' writes one");
        return s;
    }
    if (!S_ISREG(sb.st_mode)) return lt_fail(err, LT_ERR_IO, path, "the plan database is not a regular file");
    lt_store *st = lt_calloc_check(1, sizeof *st);
    st->path = lt_strdup_check(path);
    st->run_id = RUN_ID;
    lt_status s = store_check_schema_version(path, err);
    if (s == LT_OK) s = lt_db_open(&st->db, path, &store_plan_schema, LT_DB_READONLY, err);
    if (s == LT_OK) s = load_run_shape(st, err);
    if (s != LT_OK) {
        store_free(st);
        return s;
    }
    *out = st;
    return LT_OK;
}

void lt_store_close(lt_store *st) {
    if (!st) return;
    if (st->tmp) {
        lt_store_abort(st);
        return;
    }
    store_free(st);
}
