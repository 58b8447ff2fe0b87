/*
 * plans/store/schema.c — the plan database's schema: its tables and views (version 4, made by
 * the migrations below; docs/plans-schema.md), and the check that refuses a file of an
 * older schema before lt_db_open would migrate it.
 */
#include <sqlite3.h>
#include <stdbool.h>

#include "plans/store/internal.h" /* store_plan_schema, store_check_schema_version */

/* Version 2 (version 1 had no unit cp, no backward partitions and no DP-Merge groups; its
 * files are refused, not migrated: store_check_schema_version). (Version 1 was itself changed
 * in place once, when the ops table, a row per op, became the op list column stages.ops: no
 * file of that layout left the machine it was built on.) Column order of the views:
 * CONTRACTS.md's columns first, then extras. stages is a rowid table, unlike the other
 * keyed tables: a row holds a stage's op
 * list (~10 KB for a 128K-context ChunkFlow stage), and an index B-tree (WITHOUT ROWID) keeps
 * at most ~8 KB of a row on its 32 KiB page, the rest on an overflow page of its own: 1.16
 * MB per such step instead of 0.42 MB. Its key is then an index beside it (32 entries a
 * step). plan_ops expands the op lists with json_each (the ops encoding, ops_text.c). plan_slices
 * is a UNION ALL of the two passes (not a join with a two-row table), so that a
 * filter on step reaches each arm and searches the keys instead of scanning the file. The
 * CHECKs are cheap per row: "x = 'a' OR x = 'b'" rather than "x IN ('a', 'b')", which SQLite
 * 3.40 evaluates through an ephemeral index built on every insert (that took more than
 * half of the write time in the benchmark). units_slices rows: 'FB' for the units of a
 * symmetric schedule, 'F' (units, slices) and 'B' (bunits, bslices) for an asymmetric one;
 * cp is the row's unit's cp, 0 stored as 1 (the two mean the same: no DP-Merge), so it reads
 * back as 1; slice is the row's position in the pipeline's slice table of its pass (slices,
 * or bslices for 'B'), so that the tables come back in their order. dp_merges keeps the
 * step's sample index (idx, the key) and, for queries, its sampler id. */
static const char schema_v2[] =
    "CREATE TABLE runs (\n"
    "  run_id INTEGER PRIMARY KEY CHECK (run_id >= 1),\n"
    "  name TEXT NOT NULL,\n"
    "  strategy TEXT NOT NULL,\n"
    "  config TEXT NOT NULL,\n"
    "  fingerprint TEXT NOT NULL,\n"
    "  input TEXT NOT NULL,\n"
    "  sample_policy TEXT NOT NULL,\n"
    "  context_len INTEGER NOT NULL CHECK (context_len >= 1),\n"
    "  global_batch INTEGER NOT NULL CHECK (global_batch >= 1),\n"
    "  seed INTEGER NOT NULL,\n"
    "  dp INTEGER NOT NULL CHECK (dp >= 1),\n"
    "  pp INTEGER NOT NULL CHECK (pp >= 1),\n"
    "  tp INTEGER NOT NULL CHECK (tp >= 1),\n"
    "  layers INTEGER NOT NULL CHECK (layers >= pp),\n"
    "  mem_cap_bytes INTEGER NOT NULL CHECK (mem_cap_bytes >= 0),\n"
    "  tuning TEXT NOT NULL,\n"
    "  n_samples_total INTEGER NOT NULL CHECK (n_samples_total >= 0),\n"
    "  longtail_version TEXT NOT NULL\n"
    ") STRICT;\n"
    "CREATE TABLE steps (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs (run_id),\n"
    "  step INTEGER NOT NULL CHECK (step >= 0),\n"
    "  strategy TEXT NOT NULL,\n"
    "  n_samples INTEGER NOT NULL CHECK (n_samples >= 0),\n"
    "  n_tokens INTEGER NOT NULL CHECK (n_tokens >= 0),\n"
    "  predicted_ms REAL NOT NULL,\n"
    "  bubble_ratio REAL NOT NULL,\n"
    "  peak_mem_bytes REAL NOT NULL,\n"
    "  solve_ms REAL,\n"
    "  params TEXT NOT NULL,\n"
    "  solver_status TEXT NOT NULL CHECK (solver_status = 'none' OR solver_status = 'optimal' OR\n"
    "    solver_status = 'feasible' OR solver_status = 'timeout' OR solver_status = 'infeasible'),\n"
    "  runner_up TEXT,\n"
    "  runner_up_ms REAL,\n"
    "  PRIMARY KEY (run_id, step)\n"
    ") STRICT, WITHOUT ROWID;\n"
    "CREATE TABLE step_samples (\n"
    "  run_id INTEGER NOT NULL,\n"
    "  step INTEGER NOT NULL,\n"
    "  idx INTEGER NOT NULL CHECK (idx >= 0),\n"
    "  sample_id INTEGER NOT NULL CHECK (sample_id >= 0),\n"
    "  length INTEGER NOT NULL CHECK (length >= 1),\n"
    "  dp_rank INTEGER NOT NULL CHECK (dp_rank >= 0),\n"
    "  task INTEGER NOT NULL CHECK (task >= 0),\n"
    "  doc INTEGER NOT NULL CHECK (doc >= 0),\n"
    "  tok INTEGER NOT NULL CHECK (tok >= 0),\n"
    "  PRIMARY KEY (run_id, step, idx),\n"
    "  FOREIGN KEY (run_id, step) REFERENCES steps (run_id, step)\n"
    ") STRICT, WITHOUT ROWID;\n"
    "CREATE TABLE pipelines (\n"
    "  run_id INTEGER NOT NULL,\n"
    "  step INTEGER NOT NULL,\n"
    "  dp_rank INTEGER NOT NULL CHECK (dp_rank >= 0),\n"
    "  cp INTEGER NOT NULL CHECK (cp >= 1),\n"
    "  predicted_ms REAL NOT NULL,\n"
    "  PRIMARY KEY (run_id, step, dp_rank),\n"
    "  FOREIGN KEY (run_id, step) REFERENCES steps (run_id, step)\n"
    ") STRICT, WITHOUT ROWID;\n"
    "CREATE TABLE stages (\n"
    "  run_id INTEGER NOT NULL,\n"
    "  step INTEGER NOT NULL,\n"
    "  dp_rank INTEGER NOT NULL,\n"
    "  stage INTEGER NOT NULL CHECK (stage >= 0),\n"
    "  busy_ms REAL NOT NULL,\n"
    "  peak_mem_bytes REAL NOT NULL,\n"
    "  layer_begin INTEGER NOT NULL CHECK (layer_begin >= 0),\n"
    "  layer_end INTEGER NOT NULL,\n"
    "  n_ops INTEGER NOT NULL CHECK (n_ops >= 0),\n"
    "  ops TEXT NOT NULL,\n"
    "  CHECK (layer_begin < layer_end),\n"
    "  PRIMARY KEY (run_id, step, dp_rank, stage),\n"
    "  FOREIGN KEY (run_id, step, dp_rank) REFERENCES pipelines (run_id, step, dp_rank)\n"
    ") STRICT;\n"
    "CREATE TABLE units_slices (\n"
    "  run_id INTEGER NOT NULL,\n"
    "  step INTEGER NOT NULL,\n"
    "  dp_rank INTEGER NOT NULL,\n"
    "  passes TEXT NOT NULL CHECK (passes = 'FB' OR passes = 'F' OR passes = 'B'),\n"
    "  unit INTEGER NOT NULL CHECK (unit >= 0),\n"
    "  seq INTEGER NOT NULL CHECK (seq >= 0),\n"
    "  idx INTEGER NOT NULL CHECK (idx >= 0),\n"
    "  tok_begin INTEGER NOT NULL CHECK (tok_begin >= 0),\n"
    "  tok_end INTEGER NOT NULL,\n"
    "  cp INTEGER NOT NULL DEFAULT 1 CHECK (cp >= 1),\n"
    "  slice INTEGER NOT NULL CHECK (slice >= 0),\n"
    "  CHECK (tok_begin < tok_end),\n"
    "  PRIMARY KEY (run_id, step, dp_rank, passes, unit, seq),\n"
    "  FOREIGN KEY (run_id, step, dp_rank) REFERENCES pipelines (run_id, step, dp_rank),\n"
    "  FOREIGN KEY (run_id, step, idx) REFERENCES step_samples (run_id, step, idx)\n"
    ") STRICT, WITHOUT ROWID;\n"
    "CREATE TABLE dp_merges (\n"
    "  run_id INTEGER NOT NULL,\n"
    "  step INTEGER NOT NULL,\n"
    "  idx INTEGER NOT NULL CHECK (idx >= 0),\n"
    "  sample_id INTEGER NOT NULL CHECK (sample_id >= 0),\n"
    "  dp_rank INTEGER NOT NULL CHECK (dp_rank >= 0),\n"
    "  cp INTEGER NOT NULL CHECK (cp >= 2),\n"
    "  PRIMARY KEY (run_id, step, idx),\n"
    "  FOREIGN KEY (run_id, step, idx) REFERENCES step_samples (run_id, step, idx),\n"
    "  FOREIGN KEY (run_id, step, dp_rank) REFERENCES pipelines (run_id, step, dp_rank)\n"
    ") STRICT, WITHOUT ROWID;\n"
    "CREATE VIEW step_summary AS\n"
    "  SELECT run_id, step, strategy, n_samples, n_tokens, predicted_ms, bubble_ratio,\n"
    "         peak_mem_bytes, solve_ms, params, solver_status, runner_up, runner_up_ms\n"
    "  FROM steps;\n"
    "CREATE VIEW plan_slices AS\n"
    "  SELECT u.run_id, u.step, u.dp_rank, 'F' AS pass, u.unit, u.seq, s.sample_id, u.tok_begin,\n"
    "         u.tok_end, u.idx, u.cp\n"
    "  FROM units_slices AS u\n"
    "  JOIN step_samples AS s ON s.run_id = u.run_id AND s.step = u.step AND s.idx = u.idx\n"
    "  WHERE u.passes <> 'B'\n"
    "  UNION ALL\n"
    "  SELECT u.run_id, u.step, u.dp_rank, 'B' AS pass, u.unit, u.seq, s.sample_id, u.tok_begin,\n"
    "         u.tok_end, u.idx, u.cp\n"
    "  FROM units_slices AS u\n"
    "  JOIN step_samples AS s ON s.run_id = u.run_id AND s.step = u.step AND s.idx = u.idx\n"
    "  WHERE u.passes <> 'F';\n"
    "CREATE VIEW plan_ops AS\n"
    "  SELECT g.run_id, g.step, g.dp_rank, g.stage, o.key AS seq,\n"
    "         CASE o.value ->> 0 WHEN 0 THEN 'F' WHEN 1 THEN 'FK' WHEN 2 THEN 'B' END AS kind,\n"
    "         o.value ->> 1 AS unit, o.value ->> 2 AS recompute_layers,\n"
    "         coalesce(o.value ->> 6, g.layer_begin) AS layer_begin,\n"
    "         coalesce(o.value ->> 7, g.layer_end) AS layer_end,\n"
    "         CASE coalesce(o.value ->> 8, 0) WHEN 0 THEN 'all' WHEN 1 THEN 'pre' WHEN 2 THEN 'attn'\n"
    "           WHEN 3 THEN 'post' END AS part,\n"
    "         (o.value ->> 3) / 1e6 AS start_ms, (o.value ->> 4) / 1e6 AS finish_ms,\n"
    "         CAST(o.value ->> 5 AS REAL) AS mem_bytes\n"
    "  FROM stages AS g, json_each(g.ops) AS o;\n"
    "CREATE VIEW samples AS\n"
    "  SELECT s.run_id, s.step, s.sample_id, s.length, s.dp_rank,\n"
    "         'task=' || s.task || ',doc=' || s.doc || ',tok=' || s.tok AS source, s.idx, s.task, s.doc, s.tok,\n"
    "         coalesce(m.cp, 1) AS merge_cp\n"
    "  FROM step_samples AS s\n"
    "  LEFT JOIN dp_merges AS m ON m.run_id = s.run_id AND m.step = s.step AND m.idx = s.idx;\n"
    "CREATE VIEW stage_timeline AS\n"
    "  SELECT g.run_id, g.step, g.dp_rank, g.stage, g.busy_ms, s.predicted_ms - g.busy_ms AS idle_ms,\n"
    "         g.peak_mem_bytes, r.mem_cap_bytes - g.peak_mem_bytes AS headroom_bytes\n"
    "  FROM stages AS g\n"
    "  JOIN steps AS s ON s.run_id = g.run_id AND s.step = g.step\n"
    "  JOIN runs AS r ON r.run_id = g.run_id;\n"
    "CREATE VIEW dp_balance AS\n"
    "  SELECT run_id, step, count(*) AS pipelines, min(predicted_ms) AS min_ms,\n"
    "         max(predicted_ms) AS max_ms, avg(predicted_ms) AS mean_ms,\n"
    "         max(predicted_ms) / avg(predicted_ms) AS imbalance\n"
    "  FROM pipelines GROUP BY run_id, step;\n";

/* Version 3 (issue 16, plans an executor can run): steps.n_predicted, the loss denominator
 * (lt_plan_predicted_tokens: the tokens of the step that have a next-token target), shown
 * by step_summary. A version-2 file is refused, not migrated (store_check_schema_version): its
 * plans predate the rules an executor relies on (recompute placement, DP-Merge agreement). */
static const char schema_v3[] =
    "ALTER TABLE steps ADD COLUMN n_predicted INTEGER NOT NULL DEFAULT 0 CHECK (n_predicted >= 0);\n"
    "DROP VIEW step_summary;\n"
    "CREATE VIEW step_summary AS\n"
    "  SELECT run_id, step, strategy, n_samples, n_tokens, predicted_ms, bubble_ratio,\n"
    "         peak_mem_bytes, solve_ms, params, solver_status, runner_up, runner_up_ms, n_predicted\n"
    "  FROM steps;\n";

/* Version 4 (issue 21, DP-Merge for memory outliers): dp_merges.reason, why slimpack merged
 * the sample: 'flops' (its forward FLOPs exceed a DP rank's capacity, SlimPack 4.1.1) or
 * 'memory' (one rank could hold it only by recomputing, and context parallelism over the
 * group is priced cheaper). Every group of a version-3 file was a FLOPs merge, so the
 * column's default is 'flops'; still, a version-3 file is refused like the older ones
 * (store_check_schema_version: a plan file is rebuilt, never migrated in place, and a read-only
 * reader such as the trainer could not migrate it anyway). */
static const char schema_v4[] =
    "ALTER TABLE dp_merges ADD COLUMN reason TEXT NOT NULL DEFAULT 'flops'\n"
    "  CHECK (reason = 'flops' OR reason = 'memory');\n";

/* Version 5 (issue 32, named sources mixed by weight): source_ranges, the documents of
 * each named source ([source.NAME]; '' the unnamed data.input) as ranges [doc_begin,
 * doc_end) of a dataprep task, written once per run; sample_sources gives each sample of
 * a step its source (the range holding its document: an index seek on the key), and
 * step_sources the samples and tokens of each source in each step. */
static const char schema_v5[] =
    "CREATE TABLE source_ranges (\n"
    "  run_id INTEGER NOT NULL,\n"
    "  task INTEGER NOT NULL CHECK (task >= 0),\n"
    "  doc_begin INTEGER NOT NULL CHECK (doc_begin >= 0),\n"
    "  doc_end INTEGER NOT NULL CHECK (doc_end > doc_begin),\n"
    "  source TEXT NOT NULL,\n"
    "  PRIMARY KEY (run_id, task, doc_begin),\n"
    "  FOREIGN KEY (run_id) REFERENCES runs (run_id)\n"
    ") STRICT, WITHOUT ROWID;\n"
    "CREATE VIEW sample_sources AS\n"
    "  SELECT s.run_id, s.step, s.idx, s.sample_id, s.length, s.dp_rank, s.task, s.doc,\n"
    "         (SELECT r.source FROM source_ranges AS r\n"
    "          WHERE r.run_id = s.run_id AND r.task = s.task AND r.doc_begin <= s.doc AND r.doc_end > s.doc\n"
    "          ORDER BY r.doc_begin DESC LIMIT 1) AS source\n"
    "  FROM step_samples AS s;\n"
    "CREATE VIEW step_sources AS\n"
    "  SELECT run_id, step, source, count(*) AS n_samples, sum(length) AS n_tokens\n"
    "  FROM sample_sources GROUP BY run_id, step, source;\n";

/* Migration 0 (to version 1) does nothing, migration 1 creates the version-2 schema,
 * migrations 2, 3 and 4 add versions 3, 4 and 5: a new file runs them all. Files of
 * versions 1 to 3 are refused before lt_db_open would migrate them
 * (store_check_schema_version). A version-4 file is still a plan file: its plans are
 * complete, only the sources are missing (they were all the unnamed data.input then).
 * A reader opens it as it is (PLAN_READ_VERSION; the source functions answer "no
 * sources"), a resumed build migrates it (the ranges are then written). */
#define PLAN_SCHEMA_VERSION 5
#define PLAN_READ_VERSION 4
static const char retired_v1[] = "-- version 1: refused, not migrated (store_check_schema_version)\n";
static const char *const plan_migrations[PLAN_SCHEMA_VERSION] = {retired_v1, schema_v2, schema_v3, schema_v4,
                                                                 schema_v5};

const lt_db_schema store_plan_schema = {
    LT_PLAN_DB_APPLICATION_ID,
    "longtail plan database",
    plan_migrations,
    (int)(sizeof plan_migrations / sizeof plan_migrations[0]),
    PLAN_READ_VERSION,
};

/* One integer PRAGMA of an open database; false when it cannot be read. */
static bool pragma_value(sqlite3 *db, const char *sql, int *out) {
    sqlite3_stmt *q = NULL;
    bool ok = sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK && q && sqlite3_step(q) == SQLITE_ROW;
    if (ok) *out = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    return ok;
}

/* Refuse a plan file of an older schema before lt_db_open would migrate it (versions 1-3:
 * version-1 files have no unit cp, backward partitions or DP-Merge groups, version 2 no loss
 * denominator, version 3 no DP-Merge reason; version 4, without sources, is read as it is
 * and migrated by a resumed build), and no migration (a build is
 * cheap to redo, a half-understood plan is not). LT_ERR_VERSION naming path. Anything else
 * (no file, not SQLite, another application_id, a newer version) is lt_db_open's to report. */
lt_status store_check_schema_version(const char *path, lt_error *err) {
    sqlite3 *db = NULL;
    int app = 0, version = 0;
    bool known = false;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK)
        known = pragma_value(db, "PRAGMA application_id", &app) && pragma_value(db, "PRAGMA user_version", &version);
    sqlite3_close(db);
    if (!known || app != LT_PLAN_DB_APPLICATION_ID || version < 1 || version >= PLAN_READ_VERSION) return LT_OK;
    lt_fail(err, LT_ERR_VERSION, path,
            "the plan database was built by an older planner (schema version %d, this planner's is %d); rebuild it",
            version, PLAN_SCHEMA_VERSION);
    lt_error_hint(err, "delete %s and rerun 'planner build' (or give another --db)", path);
    return LT_ERR_VERSION;
}
