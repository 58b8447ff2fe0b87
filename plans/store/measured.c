/*
 * plans/store/measured.c — what the trainer measured (lt_store_put_measured): the op
 * times, step time and peak memory of an executed step, in their own tables beside its
 * plan (docs/plans-schema.md, "What the trainer measured").
 */
#include <sqlite3.h>
#include <stdio.h>

#include "plans/store/internal.h" /* store_plan_schema, store_check_schema_version, RUN_ID */

/* The trainer's tables: added to a plan file on first use, so the schema version and
 * everything the planner reads stay as they are. */
static const char measured_schema[] =
    "CREATE TABLE IF NOT EXISTS measured_steps (\n"
    "  run_id INTEGER NOT NULL, step INTEGER NOT NULL,\n"
    "  measured_ms REAL NOT NULL CHECK (measured_ms >= 0), peak_bytes REAL NOT NULL CHECK (peak_bytes >= 0),\n"
    "  PRIMARY KEY (run_id, step)) STRICT;\n"
    "CREATE TABLE IF NOT EXISTS measured_ops (\n"
    "  run_id INTEGER NOT NULL, step INTEGER NOT NULL, dp_rank INTEGER NOT NULL, stage INTEGER NOT NULL,\n"
    "  seq INTEGER NOT NULL, start_ms REAL NOT NULL, finish_ms REAL NOT NULL CHECK (finish_ms >= start_ms),\n"
    "  PRIMARY KEY (run_id, step, dp_rank, stage, seq)) STRICT;\n"
    "CREATE TABLE IF NOT EXISTS measured_stages (\n"
    "  run_id INTEGER NOT NULL, step INTEGER NOT NULL, stage INTEGER NOT NULL,\n"
    "  peak_bytes REAL NOT NULL CHECK (peak_bytes >= 0),\n"
    "  PRIMARY KEY (run_id, step, stage)) STRICT;\n"
    "CREATE VIEW IF NOT EXISTS step_measured AS\n"
    "  SELECT m.run_id, m.step, m.measured_ms, s.predicted_ms, m.peak_bytes\n"
    "  FROM measured_steps AS m JOIN steps AS s ON s.run_id = m.run_id AND s.step = m.step;\n";

lt_status lt_store_put_measured(const char *path, uint64_t step, const lt_measured_op *ops, size_t n,
                                double measured_s, double peak_bytes, const size_t *stage_peak_bytes, int n_stages,
                                lt_error *err) {
    lt_status s = store_check_schema_version(path, err);
    sqlite3 *db = NULL;
    if (s == LT_OK) s = lt_db_open(&db, path, &store_plan_schema, 0, err);
    if (s != LT_OK) return s;
    sqlite3_stmt *has = NULL, *put_step = NULL, *put_op = NULL;
    s = lt_db_exec(db, "BEGIN IMMEDIATE", err);
    if (s == LT_OK) s = lt_db_exec(db, measured_schema, err);
    if (s == LT_OK) s = lt_db_prepare(db, "SELECT count(*) FROM steps WHERE run_id = ?1 AND step = ?2", &has, err);
    if (s == LT_OK) {
        sqlite3_bind_int64(has, 1, RUN_ID);
        sqlite3_bind_int64(has, 2, (sqlite3_int64)step);
        if (sqlite3_step(has) != SQLITE_ROW) s = lt_db_fail(db, err, "reading steps");
        else if (sqlite3_column_int64(has, 0) != 1)
            s = lt_fail(err, LT_ERR_INPUT, path, "step %llu is not stored", (unsigned long long)step);
    }
    char del[320];
    snprintf(del, sizeof del, "DELETE FROM measured_ops WHERE run_id = %d AND step = %lld; "
             "DELETE FROM measured_stages WHERE run_id = %d AND step = %lld; "
             "DELETE FROM measured_steps WHERE run_id = %d AND step = %lld", RUN_ID, (long long)step, RUN_ID,
             (long long)step, RUN_ID, (long long)step);
    if (s == LT_OK) s = lt_db_exec(db, del, err);
    if (s == LT_OK) s = lt_db_prepare(db, "INSERT INTO measured_steps VALUES (?1, ?2, ?3, ?4)", &put_step, err);
    if (s == LT_OK) {
        sqlite3_bind_int64(put_step, 1, RUN_ID);
        sqlite3_bind_int64(put_step, 2, (sqlite3_int64)step);
        sqlite3_bind_double(put_step, 3, measured_s * 1e3);
        sqlite3_bind_double(put_step, 4, peak_bytes);
        if (sqlite3_step(put_step) != SQLITE_DONE) s = lt_db_fail(db, err, "writing measured_steps");
    }
    if (s == LT_OK) s = lt_db_prepare(db, "INSERT INTO measured_ops VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", &put_op, err);
    for (size_t i = 0; s == LT_OK && i < n; i++) {
        sqlite3_reset(put_op);
        sqlite3_bind_int64(put_op, 1, RUN_ID);
        sqlite3_bind_int64(put_op, 2, (sqlite3_int64)step);
        sqlite3_bind_int(put_op, 3, ops[i].dp_rank);
        sqlite3_bind_int(put_op, 4, ops[i].stage);
        sqlite3_bind_int64(put_op, 5, ops[i].seq);
        sqlite3_bind_double(put_op, 6, ops[i].start_s * 1e3);
        sqlite3_bind_double(put_op, 7, ops[i].finish_s * 1e3);
        if (sqlite3_step(put_op) != SQLITE_DONE) s = lt_db_fail(db, err, "writing measured_ops");
    }
    sqlite3_stmt *put_stage = NULL;
    if (s == LT_OK) s = lt_db_prepare(db, "INSERT INTO measured_stages VALUES (?1, ?2, ?3, ?4)", &put_stage, err);
    for (int g = 0; s == LT_OK && g < n_stages; g++) {
        sqlite3_reset(put_stage);
        sqlite3_bind_int64(put_stage, 1, RUN_ID);
        sqlite3_bind_int64(put_stage, 2, (sqlite3_int64)step);
        sqlite3_bind_int(put_stage, 3, g);
        sqlite3_bind_double(put_stage, 4, (double)stage_peak_bytes[g]);
        if (sqlite3_step(put_stage) != SQLITE_DONE) s = lt_db_fail(db, err, "writing measured_stages");
    }
    sqlite3_finalize(put_stage);
    sqlite3_finalize(has), sqlite3_finalize(put_step), sqlite3_finalize(put_op);
    if (s == LT_OK) s = lt_db_exec(db, "COMMIT", err);
    else (void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    lt_db_close(db);
    if (s != LT_OK) lt_error_prefix(err, "recording the measured times of step %llu", (unsigned long long)step);
    return s;
}
