/*
 * plans/store/heldout.c — the held-out documents of a plan file (data.holdout): the
 * documents the sampler reserved for validation, which no step samples, written by
 * `planner build` in the plans' transaction (lt_store_put_heldout) and read by the trainer
 * and `trainer eval --heldout` (lt_store_heldout). Table heldout and view heldout_sources
 * (docs/plans-schema.md "Held-out documents").
 *
 * The table is created when the planner first writes it (CREATE ... IF NOT EXISTS, as
 * measured.c does for the trainer's tables), not by a schema migration: a plan file of an
 * earlier planner keeps schema version 5 and stays usable; it simply has no held-out set
 * (lt_store_heldout says so, *present false). Every build of this planner writes the table,
 * with no rows when data.holdout = 0.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "plans/store/internal.h" /* lt_store, lt_db_prepare, lt_db_exec, lt_db_fail */

/* idx = the document's position in the held-out order (lt_sampler_heldout's i); length =
 * the tokens a validation pass reads from its start, min(document length, context_len).
 * heldout_sources adds the document's named source (source_ranges, schema version 5). */
static const char heldout_schema[] =
    "CREATE TABLE IF NOT EXISTS heldout (\n"
    "  run_id INTEGER NOT NULL,\n"
    "  idx INTEGER NOT NULL CHECK (idx >= 0),\n"
    "  task INTEGER NOT NULL CHECK (task >= 0),\n"
    "  doc INTEGER NOT NULL CHECK (doc >= 0),\n"
    "  length INTEGER NOT NULL CHECK (length >= 1),\n"
    "  PRIMARY KEY (run_id, idx),\n"
    "  FOREIGN KEY (run_id) REFERENCES runs (run_id)\n"
    ") STRICT, WITHOUT ROWID;\n"
    "CREATE VIEW IF NOT EXISTS heldout_sources AS\n"
    "  SELECT h.run_id, h.idx, h.task, h.doc, h.length,\n"
    "         (SELECT r.source FROM source_ranges AS r\n"
    "          WHERE r.run_id = h.run_id AND r.task = h.task AND r.doc_begin <= h.doc AND r.doc_end > h.doc\n"
    "          ORDER BY r.doc_begin DESC LIMIT 1) AS source\n"
    "  FROM heldout AS h;\n";

lt_status lt_store_put_heldout(lt_store *st, const lt_sample *docs, size_t n, lt_error *err) {
    if (!st || !st->tmp) return lt_fail(err, LT_ERR_INTERNAL, NULL, "lt_store_put_heldout on a store opened for reading");
    if (st->failed)
        return lt_fail(err, LT_ERR_INTERNAL, st->path, "lt_store_put_heldout after a failed put (abort the store)");
    for (size_t i = 0; i < n; i++)
        if (docs[i].length < 1 || docs[i].doc > (uint64_t)INT64_MAX || docs[i].offset != 0)
            return lt_fail(err, LT_ERR_INTERNAL, st->path,
                           "held-out document %zu: task %" PRIu32 ", doc %" PRIu64 ", offset %" PRId64
                           ", length %" PRId64 " (a whole document's start, at least one token)",
                           i, docs[i].task, docs[i].doc, docs[i].offset, docs[i].length);
    sqlite3_stmt *q = NULL, *del = NULL;
    lt_status s = lt_db_exec(st->db, heldout_schema, err);
    /* a resumed build writes the same set again: replaced whole */
    if (s == LT_OK) s = lt_db_prepare(st->db, "DELETE FROM heldout WHERE run_id = ?1", &del, err);
    if (s == LT_OK) {
        sqlite3_bind_int64(del, 1, st->run_id);
        if (sqlite3_step(del) != SQLITE_DONE) s = lt_db_fail(st->db, err, "cannot write table heldout");
    }
    if (s == LT_OK)
        s = lt_db_prepare(st->db, "INSERT INTO heldout (run_id, idx, task, doc, length) VALUES (?1, ?2, ?3, ?4, ?5)",
                          &q, err);
    for (size_t i = 0; s == LT_OK && i < n; i++) {
        sqlite3_reset(q);
        sqlite3_bind_int64(q, 1, st->run_id);
        sqlite3_bind_int64(q, 2, (int64_t)i);
        sqlite3_bind_int64(q, 3, docs[i].task);
        sqlite3_bind_int64(q, 4, (int64_t)docs[i].doc);
        sqlite3_bind_int64(q, 5, docs[i].length);
        if (sqlite3_step(q) != SQLITE_DONE) s = lt_db_fail(st->db, err, "cannot write table heldout");
    }
    sqlite3_finalize(q);
    sqlite3_finalize(del);
    if (s != LT_OK) st->failed = true;
    return s;
}

lt_status lt_store_heldout(lt_store *st, bool *present, lt_sample **docs, size_t *n, lt_error *err) {
    *present = false;
    *docs = NULL;
    *n = 0;
    sqlite3_stmt *q = NULL;
    lt_status s = lt_db_prepare(st->db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'heldout'",
                                &q, err);
    if (s != LT_OK) return s;
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) *present = sqlite3_column_int(q, 0) > 0;
    else s = lt_db_fail(st->db, err, "cannot read the schema (sqlite_schema)");
    sqlite3_finalize(q);
    q = NULL;
    if (s != LT_OK || !*present) return s;
    s = lt_db_prepare(st->db, "SELECT idx, task, doc, length FROM heldout WHERE run_id = ?1 ORDER BY idx", &q, err);
    if (s != LT_OK) return s;
    sqlite3_bind_int64(q, 1, st->run_id);
    size_t cap = 0;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        int64_t idx = sqlite3_column_int64(q, 0), task = sqlite3_column_int64(q, 1);
        int64_t doc = sqlite3_column_int64(q, 2), len = sqlite3_column_int64(q, 3);
        if (idx != (int64_t)*n || task < 0 || task > (int64_t)UINT32_MAX || doc < 0 || len < 1) {
            s = lt_fail(err, LT_ERR_INPUT, st->path,
                        "table heldout, row %zu: idx %" PRId64 ", task %" PRId64 ", doc %" PRId64 ", length %" PRId64
                        " (idx must number the rows 0, 1, ...; task, doc >= 0; length >= 1)",
                        *n, idx, task, doc, len);
            lt_error_hint(err, "the file was changed by hand? rebuild it with 'planner build'");
            break;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            *docs = lt_realloc_check(*docs, cap * sizeof **docs);
        }
        (*docs)[(*n)++] = (lt_sample){.id = UINT64_MAX, .task = (uint32_t)task, .doc = (uint64_t)doc, .length = len};
    }
    if (s == LT_OK && rc != SQLITE_DONE) s = lt_db_fail(st->db, err, "cannot read table heldout");
    sqlite3_finalize(q);
    if (s != LT_OK) {
        free(*docs);
        *docs = NULL;
        *n = 0;
    }
    return s;
}
