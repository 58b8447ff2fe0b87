/*
 * plans/store/store.c — the plan database (plans/store/store.h; docs/plans-schema.md): the schema, the
 * writer (one transaction on a temporary file renamed over the target) and the reader.
 *
 * Writing is the hot path of `planner build` (10,000 steps in well under a minute on 2
 * cores; a ChunkFlow step at 128K context has ~1,650 rows and ~7,600 ops), so: one
 * transaction, prepared statements kept for the whole run, rows inserted in primary-key
 * order (every keyed table is keyed by (run_id, step, ...), so a step's rows append at the
 * right edge of each B-tree), integers where the value is one, and, on the temporary file
 * only, journal_mode=OFF + synchronous=OFF. Ops are not rows: each stage's op list is one
 * JSON array in its stages row (docs/plans-schema.md, "The ops encoding"), written by the
 * formatter below and read back by the strict parser below; one row per op cost 69 s and
 * 4.8 GB per 10,000 such steps (22 s and 4.2 GB now). Durability comes at commit: COMMIT, close, fsync the
 * file, rename it over the target, fsync the directory. With the journal off a failed
 * statement cannot be rolled back; a put that fails half-way marks the store failed, and
 * commit then refuses (the caller aborts; the temporary file is deleted and the target never
 * saw anything).
 *
 * Times: the tables hold milliseconds (the views' unit) as REAL = seconds x 1e3, read back
 * as ms / 1e3; the ops' times are integer nanoseconds (llround(seconds x 1e9)), read back as
 * ns / 1e9 (the plan_ops view shows ns / 1e6 ms). Both round trips are monotone, so every
 * ordering within one encoding survives them (finish >= start, a stage's ops in time order);
 * the one comparison across the two, an op's finish <= its pipeline's time, is kept by the
 * writer: an op time t <= the pipeline's time T is stored as at most the largest ns that
 * reads back (in seconds and in the view's ms) <= what T reads back as. An op time moves by
 * less than 1 ns.
 */
#include "plans/store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buildconfig.h"  /* PACKAGE_VERSION */
#include "lib/config.h"   /* lt_config_find_key (typed comparison of config values) */
#include "lib/db.h"       /* lt_db_open, lt_db_exec, lt_db_prepare, lt_db_fail */
#include "lib/files.h"    /* lt_fsync_dir */
#include "lib/strutil.h"  /* lt_parse_int64, lt_parse_size, lt_parse_double, lt_parse_bool */

/* ------------------------------------------------------------------ schema */

/* Version 2 (version 1 had no unit cp, no backward partitions and no DP-Merge groups; its
 * files are refused, not migrated: check_schema_version). (Version 1 was itself changed in
 * place once, when the ops table, a row per op, became the op list column stages.ops: no
 * file of that layout left the machine it was built on.) Column order of the views:
 * CONTRACTS.md's columns first, then extras. stages is a rowid table, unlike the other
 * keyed tables: a row holds a stage's op
 * list (~10 KB for a 128K-context ChunkFlow stage), and an index B-tree (WITHOUT ROWID) keeps
 * at most ~8 KB of a row on its 32 KiB page, the rest on an overflow page of its own: 1.16
 * MB per such step instead of 0.42 MB. Its key is then an index beside it (32 entries a
 * step). plan_ops expands the op lists with json_each (the ops encoding below). plan_slices
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
 * by step_summary. A version-2 file is refused, not migrated (check_schema_version): its
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
 * (check_schema_version: a plan file is rebuilt, never migrated in place, and a read-only
 * reader such as the trainer could not migrate it anyway). */
static const char schema_v4[] =
    "ALTER TABLE dp_merges ADD COLUMN reason TEXT NOT NULL DEFAULT 'flops'\n"
    "  CHECK (reason = 'flops' OR reason = 'memory');\n";

/* Migration 0 (to version 1) does nothing, migration 1 creates the version-2 schema,
 * migration 2 adds version 3's column and migration 3 version 4's: a new file runs all
 * four. Files of versions 1 to 3 are refused before lt_db_open would migrate them
 * (check_schema_version). */
#define PLAN_SCHEMA_VERSION 4
static const char retired_v1[] = "-- version 1: refused, not migrated (check_schema_version)\n";
static const char *const plan_migrations[PLAN_SCHEMA_VERSION] = {retired_v1, schema_v2, schema_v3, schema_v4};

static const lt_db_schema plan_schema = {
    LT_PLAN_DB_APPLICATION_ID,
    "longtail plan database",
    plan_migrations,
    (int)(sizeof plan_migrations / sizeof plan_migrations[0]),
};

/* ------------------------------------------------------------------ the store */

/* The prepared statements, made on first use and kept until the store closes. */
enum {
    Q_HAS_STEP,
    Q_INS_STEP,
    Q_INS_SAMPLE,
    Q_INS_PIPELINE,
    Q_INS_STAGE,
    Q_INS_SLICE,
    Q_INS_MERGE,
    Q_STEP_LIST,
    Q_STEP_RANGE,
    Q_GET_STEP,
    Q_GET_PIPELINES,
    Q_GET_STAGES,
    Q_GET_SAMPLES,
    Q_GET_SLICES,
    Q_GET_MERGES,
    Q_RUN,
    Q_COUNT
};

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

struct lt_store {
    sqlite3 *db;
    char *path;    /* the target (writer) or the file read */
    char *tmp;     /* the temporary file being written; NULL for a reader */
    bool timings;  /* store solve_ms */
    bool failed;   /* a put failed half-way: only abort is left */
    int64_t run_id;
    int pp, layers; /* of the run: the shape of every schedule */
    double mem_cap;
    sqlite3_stmt *q[Q_COUNT];
    struct batcher *batch; /* [B_COUNT], writers only */
    char *json;            /* the ops text of the stage being written (writers only) */
    size_t json_cap;
};

/* The run of every file this code writes (store.h: one run per file). */
#define RUN_ID 1

/* An op time as read back from its stored nanoseconds (the top of the file); op times are
 * stored only within +-MAX_OP_TIME_S (their nanoseconds fit 18 digits). */
#define MAX_OP_TIME_S 1e9
static inline double ns_to_s(int64_t ns) { return (double)ns / 1e9; }

static lt_status query(lt_store *st, int which, sqlite3_stmt **out, lt_error *err) {
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

static void finalize_batches(lt_store *st);

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
    lt_status s = query(st, Q_RUN, &q, err);
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

/* Multi-row inserts for the two big tables (samples and slices: ~1,100 to ~1,600 of a
 * step's rows): BATCH rows per INSERT statement halve the per-row cost of stepping a
 * statement. A step's rows are flushed at the end of its put; the remainder (< BATCH rows
 * per table) goes through the single-row statements. Rows keep their key order. */
enum { BATCH = 32, MAX_COLS = 11 };
enum { C_INT, C_TEXT };
enum { B_SAMPLES, B_SLICES, B_COUNT };

typedef struct cell {
    int type;
    int64_t i;
    const char *t; /* static text */
} cell;

struct batcher {
    sqlite3_stmt *many;
    size_t n; /* rows pending */
    cell rows[BATCH][MAX_COLS];
};

static const struct {
    int one;          /* the single-row statement */
    int cols;
    const char *table;
    const char *head; /* "INSERT INTO t (cols) VALUES " */
} batch_def[B_COUNT] = {
    {Q_INS_SAMPLE, 9, "step_samples",
     "INSERT INTO step_samples (run_id, step, idx, sample_id, length, dp_rank, task, doc, tok) VALUES "},
    {Q_INS_SLICE, 11, "units_slices",
     "INSERT INTO units_slices (run_id, step, dp_rank, passes, unit, seq, idx, tok_begin, tok_end, cp, slice) "
     "VALUES "},
};

static void finalize_batches(lt_store *st) {
    for (int b = 0; st->batch && b < B_COUNT; b++) {
        sqlite3_finalize(st->batch[b].many);
        st->batch[b].many = NULL;
        st->batch[b].n = 0;
    }
}

static inline void cell_int(cell *c, int64_t v) { c->type = C_INT, c->i = v; }
static inline void cell_text(cell *c, const char *v) { c->type = C_TEXT, c->t = v; }

static void bind_cell(sqlite3_stmt *q, int i, const cell *c) {
    if (c->type == C_INT) sqlite3_bind_int64(q, i, c->i);
    else sqlite3_bind_text(q, i, c->t, -1, SQLITE_STATIC);
}

static lt_status run_insert(lt_store *st, sqlite3_stmt *q, const char *table, uint64_t step, lt_error *err);

/* Write the pending rows of batcher b. */
static lt_status batch_flush(lt_store *st, int b, uint64_t step, lt_error *err) {
    struct batcher *bt = &st->batch[b];
    const int cols = batch_def[b].cols;
    lt_status s = LT_OK;
    if (bt->n == BATCH) {
        if (!bt->many) {
            size_t cap = strlen(batch_def[b].head) + (size_t)BATCH * (2 + 2 * (size_t)cols) + 1;
            char *sql = lt_malloc_check(cap), *w = sql + snprintf(sql, cap, "%s", batch_def[b].head);
            for (int r = 0; r < BATCH; r++) {
                *w++ = r ? ',' : ' ';
                *w++ = '(';
                for (int c = 0; c < cols; c++) {
                    if (c) *w++ = ',';
                    *w++ = '?';
                }
                *w++ = ')';
            }
            *w = '\0';
            s = lt_db_prepare(st->db, sql, &bt->many, err);
            free(sql);
            if (s != LT_OK) return s;
        }
        for (int r = 0; r < BATCH; r++)
            for (int c = 0; c < cols; c++) bind_cell(bt->many, r * cols + c + 1, &bt->rows[r][c]);
        s = run_insert(st, bt->many, batch_def[b].table, step, err);
    } else {
        for (size_t r = 0; r < bt->n && s == LT_OK; r++) {
            sqlite3_stmt *q;
            if ((s = query(st, batch_def[b].one, &q, err)) != LT_OK) break;
            for (int c = 0; c < cols; c++) bind_cell(q, c + 1, &bt->rows[r][c]);
            s = run_insert(st, q, batch_def[b].table, step, err);
        }
    }
    bt->n = 0;
    return s;
}

/* The cells of the next row of batcher b (fill them, then batch_add). */
static inline cell *batch_row(lt_store *st, int b) { return st->batch[b].rows[st->batch[b].n]; }

static inline lt_status batch_add(lt_store *st, int b, uint64_t step, lt_error *err) {
    return ++st->batch[b].n == BATCH ? batch_flush(st, b, step, err) : LT_OK;
}

/* ------------------------------------------------------------------ comparing configs */

/* One "key = value" of a lt_config_dump text; value NULL for "; key =" (no value). */
typedef struct cfg_entry {
    char section[32];
    char key[64];
    char *value;
} cfg_entry;

typedef struct cfg_list {
    cfg_entry *v;
    size_t n, cap;
} cfg_list;

static void cfg_list_free(cfg_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i].value);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static bool is_key_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

/* Whether the plan-relevant part of the config holds section.key: [model], [parallel] and
 * [plan] except plan.steps (resuming to more steps is the point of resuming). */
static bool plan_relevant(const char *section, const char *key) {
    if (strcmp(section, "plan") == 0) return strcmp(key, "steps") != 0;
    return strcmp(section, "model") == 0 || strcmp(section, "parallel") == 0;
}

/* Parse the plan-relevant entries of a dump, values without their "; origin" comments. */
static void cfg_parse(const char *text, cfg_list *out) {
    memset(out, 0, sizeof *out);
    char section[32] = "";
    const char *p = text ? text : "";
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *line = p;
        p = eol ? eol + 1 : p + len;
        while (len > 0 && (line[0] == ' ' || line[0] == '\t')) line++, len--;
        while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\t' || line[len - 1] == '\r')) len--;
        if (len == 0) continue;
        if (line[0] == '[') {
            size_t n = 1;
            while (n < len && line[n] != ']') n++;
            snprintf(section, sizeof section, "%.*s", (int)(n - 1), line + 1);
            continue;
        }
        const char *key = line, *value = NULL;
        size_t klen = 0, vlen = 0;
        bool unset = false;
        if (line[0] == ';' || line[0] == '#') {
            /* "; key =": a key without a value; any other comment is skipped */
            size_t i = 1;
            while (i < len && line[i] == ' ') i++;
            key = line + i;
            while (i < len && is_key_char(line[i])) i++, klen++;
            if (klen == 0 || len - i != 2 || strncmp(line + i, " =", 2) != 0) continue;
            unset = true;
        } else {
            while (klen < len && is_key_char(line[klen])) klen++;
            size_t i = klen;
            while (i < len && line[i] == ' ') i++;
            if (klen == 0 || i >= len || line[i] != '=') continue;
            i++;
            while (i < len && line[i] == ' ') i++;
            value = line + i;
            vlen = len - i;
            /* a ';' after a blank starts the origin comment (values cannot hold one) */
            for (size_t j = 1; j < vlen; j++) {
                if (value[j] == ';' && (value[j - 1] == ' ' || value[j - 1] == '\t')) {
                    vlen = j;
                    break;
                }
            }
            while (vlen > 0 && (value[vlen - 1] == ' ' || value[vlen - 1] == '\t')) vlen--;
        }
        if (klen >= sizeof out->v[0].key) continue;
        cfg_entry e;
        memset(&e, 0, sizeof e);
        snprintf(e.section, sizeof e.section, "%s", section);
        memcpy(e.key, key, klen);
        if (!plan_relevant(e.section, e.key)) continue;
        if (!unset) {
            e.value = lt_malloc_check(vlen + 1);
            memcpy(e.value, value, vlen);
            e.value[vlen] = '\0';
        }
        if (out->n == out->cap) {
            out->cap = out->cap ? 2 * out->cap : 64;
            out->v = lt_realloc_check(out->v, out->cap * sizeof *out->v);
        }
        out->v[out->n++] = e;
    }
}

/* Equal values: the same text, or the same typed value of the key ("256K" = "262144"). */
static bool cfg_values_equal(const char *section, const char *key, const char *a, const char *b) {
    if (!a || !b) return a == b;
    if (strcmp(a, b) == 0) return true;
    const lt_config_key *k = lt_config_find_key(section, key);
    if (!k) return false;
    switch (k->type) {
    case LT_CONFIG_INT: {
        int64_t x, y;
        return lt_parse_int64(a, &x) == LT_OK && lt_parse_int64(b, &y) == LT_OK && x == y;
    }
    case LT_CONFIG_SIZE: {
        uint64_t x, y;
        return lt_parse_size(a, &x) == LT_OK && lt_parse_size(b, &y) == LT_OK && x == y;
    }
    case LT_CONFIG_DOUBLE: {
        double x, y;
        return lt_parse_double(a, &x) == LT_OK && lt_parse_double(b, &y) == LT_OK && x == y;
    }
    case LT_CONFIG_BOOL: {
        bool x, y;
        return lt_parse_bool(a, &x) == LT_OK && lt_parse_bool(b, &y) == LT_OK && x == y;
    }
    default: return false;
    }
}

static const cfg_entry *cfg_find(const cfg_list *l, const char *section, const char *key) {
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].section, section) == 0 && strcmp(l->v[i].key, key) == 0) return &l->v[i];
    return NULL;
}

static lt_status refuse(lt_error *err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static lt_status refuse(lt_error *err, const char *path, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    lt_fail(err, LT_ERR_CONFIG, path, "%s %s", path, what);
    lt_error_hint(err, "give another --db, or delete %s to plan from scratch", path);
    return LT_ERR_CONFIG;
}

/* Whether the stored run is the run `run` resumes: the plan-relevant config values,
 * fingerprint, strategy, sample policy and tuning. LT_ERR_CONFIG naming the first difference. */
static lt_status same_run(const lt_run_info *have, const lt_run_info *run, const char *path, lt_error *err) {
    cfg_list a, b;
    cfg_parse(run->config, &a);
    cfg_parse(have->config, &b);
    lt_status s = LT_OK;
    for (size_t i = 0; i < a.n && s == LT_OK; i++) {
        const cfg_entry *e = &a.v[i], *f = cfg_find(&b, e->section, e->key);
        const char *fv = f ? f->value : NULL;
        if (!f) { /* a key the file's writer did not know had its default there */
            const lt_config_key *k = lt_config_find_key(e->section, e->key);
            fv = k ? k->def : NULL;
        }
        if (!cfg_values_equal(e->section, e->key, e->value, fv))
            s = refuse(err, path, "was built from a different config: [%s] %s = %s here, %s in the file", e->section,
                       e->key, e->value ? e->value : "(no value)", fv ? fv : "(no value)");
    }
    for (size_t i = 0; i < b.n && s == LT_OK; i++) {
        const cfg_entry *f = &b.v[i];
        if (!cfg_find(&a, f->section, f->key) && f->value)
            s = refuse(err, path, "was built from a different config: [%s] %s = (no value) here, %s in the file",
                       f->section, f->key, f->value);
    }
    cfg_list_free(&a);
    cfg_list_free(&b);
    if (s != LT_OK) return s;
#define SAME(field, what)                                                                                      \
    do {                                                                                                        \
        const char *x = run->field ? run->field : "", *y = have->field ? have->field : "";                     \
        if (strcmp(x, y) != 0) return refuse(err, path, "was built " what ": %s here, %s in the file", x, y); \
    } while (0)
    SAME(fingerprint, "from different input data (corpus fingerprint)");
    SAME(strategy, "with another strategy");
    SAME(sample_policy, "with another sample policy");
    SAME(tuning, "with another tuning");
#undef SAME
    return LT_OK;
}

/* ------------------------------------------------------------------ writing */

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
 * denominator, version 3 no DP-Merge reason), and no migration (a build is
 * cheap to redo, a half-understood plan is not). LT_ERR_VERSION naming path. Anything else
 * (no file, not SQLite, another application_id, a newer version) is lt_db_open's to report. */
static lt_status check_schema_version(const char *path, lt_error *err) {
    sqlite3 *db = NULL;
    int app = 0, version = 0;
    bool known = false;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK)
        known = pragma_value(db, "PRAGMA application_id", &app) && pragma_value(db, "PRAGMA user_version", &version);
    sqlite3_close(db);
    if (!known || app != LT_PLAN_DB_APPLICATION_ID || version < 1 || version >= PLAN_SCHEMA_VERSION) return LT_OK;
    lt_fail(err, LT_ERR_VERSION, path,
            "the plan database was built by an older planner (schema version %d, this planner's is %d); rebuild it",
            version, PLAN_SCHEMA_VERSION);
    lt_error_hint(err, "delete %s and rerun 'planner build' (or give another --db)", path);
    return LT_ERR_VERSION;
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
        s = check_schema_version(path, err);
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
    s = lt_db_open(&st->db, st->tmp, &plan_schema, LT_DB_CREATE, err);
    if (s != LT_OK) retarget_error(err, st->tmp, path);
    /* Fast writing on the private temporary file (see the top of this file); foreign keys
     * are declared for documentation and PRAGMA foreign_key_check, not enforced here. */
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
                s = same_run(&have, run, path, err);
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

lt_status lt_store_has_step(lt_store *st, uint64_t step, bool *has, lt_error *err) {
    *has = false;
    if (step > (uint64_t)INT64_MAX) return LT_OK;
    sqlite3_stmt *q;
    lt_status s = query(st, Q_HAS_STEP, &q, err);
    if (s != LT_OK) return s;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) *has = true;
    else if (rc != SQLITE_DONE) s = lt_db_fail(st->db, err, "cannot read table steps");
    sqlite3_reset(q);
    return s;
}

/* Run an insert bound by the caller; on failure the store is spoilt (no journal to undo). */
static lt_status run_insert(lt_store *st, sqlite3_stmt *q, const char *table, uint64_t step, lt_error *err) {
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    if (rc == SQLITE_DONE) return LT_OK;
    st->failed = true;
    char what[96];
    snprintf(what, sizeof what, "cannot store step %" PRIu64 " in table %s", step, table);
    lt_status s = lt_db_fail(st->db, err, what);
    if ((rc & 0xff) == SQLITE_CONSTRAINT) {
        if (err) err->status = LT_ERR_INPUT;
        s = LT_ERR_INPUT;
        lt_error_hint(err, "the plan breaks a constraint of the schema (docs/plans-schema.md)");
    }
    return s;
}

/* What put_step needs of a plan before it writes anything (a half-written step cannot be
 * undone): the run's shape, pipelines in dp_rank order, sample indices in range. */
static lt_status check_putable(const lt_store *st, const lt_step_plan *p, const lt_sample *samples, lt_error *err) {
#define BAD(...) return lt_fail(err, LT_ERR_INTERNAL, st->path, __VA_ARGS__)
    if (p->step > (uint64_t)INT64_MAX) BAD("step %" PRIu64 " is out of range", p->step);
    if (p->pp != st->pp)
        BAD("step %" PRIu64 ": the plan has %d pipeline stages, the run %d", p->step, p->pp, st->pp);
    if (p->n_samples > 0 && (!p->lengths || !p->sample_rank || !samples))
        BAD("step %" PRIu64 ": the plan's lengths, sample_rank or the samples are missing", p->step);
    if (p->n_ranks > 0 && !p->ranks) BAD("step %" PRIu64 ": the plan has no pipelines array", p->step);
    for (size_t r = 0; r < p->n_ranks; r++) {
        const lt_rank_plan *rp = &p->ranks[r];
        if (rp->sched.stages != st->pp || rp->sched.layers != st->layers)
            BAD("step %" PRIu64 ", pipeline %zu: a schedule of %d stages x %d layers, the run has %d x %d", p->step, r,
                rp->sched.stages, rp->sched.layers, st->pp, st->layers);
        if (rp->dp_rank < 0 || rp->cp < 1 || (r > 0 && rp->dp_rank <= p->ranks[r - 1].dp_rank))
            BAD("step %" PRIu64 ", pipeline %zu: dp_rank %d, cp %d (pipelines must be in increasing dp_rank order)",
                p->step, r, rp->dp_rank, rp->cp);
        if (!rp->stage_busy_s || !rp->stage_peak_mem || (lt_schedule_n_ops(&rp->sched) > 0 && !rp->ops))
            BAD("step %" PRIu64 ", pipeline %zu: predictions missing (ops, stage_busy_s or stage_peak_mem)", p->step,
                r);
        for (size_t u = 0; u < rp->sched.n_units; u++) {
            const lt_unit *un = &rp->sched.units[u];
            if ((size_t)un->first_slice + un->n_slices > rp->sched.n_slices)
                BAD("step %" PRIu64 ", pipeline %zu: unit %zu names slices past the slice table", p->step, r, u);
        }
        for (size_t u = 0; rp->sched.asym && u < rp->sched.n_bunits; u++) {
            const lt_unit *un = &rp->sched.bunits[u];
            if ((size_t)un->first_slice + un->n_slices > rp->sched.n_bslices)
                BAD("step %" PRIu64 ", pipeline %zu: backward unit %zu names bslices past the bslice table", p->step,
                    r, u);
        }
        /* the rows of an asymmetric schedule are its 'F' and 'B' units: with one pass's units
         * missing it would read back as another (symmetric) schedule */
        if (rp->sched.asym && (rp->sched.n_units == 0) != (rp->sched.n_bunits == 0))
            BAD("step %" PRIu64 ", pipeline %zu: an asymmetric schedule of %zu forward and %zu backward units", p->step,
                r, rp->sched.n_units, rp->sched.n_bunits);
        for (int s = 0; s < rp->sched.stages; s++)
            for (size_t i = 0; i < rp->sched.stage[s].n; i++)
                if (rp->sched.stage[s].ops[i].kind > LT_OP_B || rp->sched.stage[s].ops[i].part > LT_PART_POST)
                    BAD("step %" PRIu64 ", pipeline %zu, stage %d: op %zu has an unknown kind or part", p->step, r, s,
                        i);
    }
    for (size_t i = 0; i < p->n_samples; i++) {
        if (p->sample_rank[i] < 0 || (size_t)p->sample_rank[i] >= p->n_ranks)
            BAD("step %" PRIu64 ": sample %zu is on pipeline %d of %zu", p->step, i, p->sample_rank[i], p->n_ranks);
        if (samples[i].length != p->lengths[i])
            BAD("step %" PRIu64 ": sample %zu has %" PRId64 " tokens in the plan, %" PRId64 " in the samples", p->step,
                i, p->lengths[i], samples[i].length);
        if (samples[i].id > (uint64_t)INT64_MAX || samples[i].doc > (uint64_t)INT64_MAX)
            BAD("step %" PRIu64 ": sample %zu: id or document out of range", p->step, i);
    }
    /* DP-Merge groups: what their rows need (the key is the sample, the dp_rank the first
     * member's); the rest of their rules is lt_plan_validate's */
    if (p->n_merges > 0 && !p->merges) BAD("step %" PRIu64 ": the plan has no merges array", p->step);
    for (size_t k = 0; k < p->n_merges; k++) {
        const lt_dp_merge *m = &p->merges[k];
        if (m->sample < 0 || (size_t)m->sample >= p->n_samples || m->first_rank < 0 ||
            (size_t)m->first_rank >= p->n_ranks || m->cp < 2 || !lt_merge_reason_name(m->reason))
            BAD("step %" PRIu64 ": DP-Merge group %zu: sample %" PRId32 " of %zu, first pipeline %d of %zu, cp %d, "
                "reason %d",
                p->step, k, m->sample, p->n_samples, m->first_rank, p->n_ranks, m->cp, (int)m->reason);
        if (k > 0 && m->sample <= p->merges[k - 1].sample)
            BAD("step %" PRIu64 ": DP-Merge groups not in increasing sample order (sample %" PRId32 " after %" PRId32
                ")",
                p->step, m->sample, p->merges[k - 1].sample);
    }
#undef BAD
    return LT_OK;
}

/* ------------------------------------------------------------------ the ops encoding: writing
 *
 * A stage's op list is one JSON array in stages.ops, an element per op in list order (seq =
 * the element's index), no blanks:
 *   [kind, unit, recompute_layers, start_ns, finish_ns, mem_bytes]
 *       an op over the stage's whole layer block (stages.layer_begin, layer_end), part 'all':
 *       every op of every strategy but HelixPipe;
 *   [kind, unit, recompute_layers, start_ns, finish_ns, mem_bytes, layer_begin, layer_end, part]
 *       any other op.
 * kind 0 F, 1 FK, 2 B; part 0 all, 1 pre, 2 attn, 3 post; start_ns and finish_ns integer
 * nanoseconds from the step's start (op_time_ns); mem_bytes an integer when it is one
 * (below 2^53), else the shortest %.15g, %.16g or %.17g that reads back exactly. Measured on
 * 128K-context ChunkFlow steps (docs/plans-schema.md): a time in integer nanoseconds takes
 * 10.2 characters on average, in %.17g seconds 17.0; the list averages 42 bytes an op, where
 * %.17g seconds would make it 56. */

/* The longest element: 9 numbers (at most 20 characters each, 24 for mem_bytes), 8 commas,
 * the brackets and the comma before the next element. */
#define MAX_OP_TEXT 224

static const char digit_pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                  "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                  "8081828384858687888990919293949596979899";

static char *put_u64(char *w, uint64_t v) {
    char buf[20];
    char *b = buf + sizeof buf;
    while (v >= 100) {
        unsigned d = (unsigned)(v % 100) * 2;
        v /= 100;
        *--b = digit_pairs[d + 1];
        *--b = digit_pairs[d];
    }
    if (v >= 10) {
        unsigned d = (unsigned)v * 2;
        *--b = digit_pairs[d + 1];
        *--b = digit_pairs[d];
    } else {
        *--b = (char)('0' + v);
    }
    size_t n = (size_t)(buf + sizeof buf - b);
    memcpy(w, b, n);
    return w + n;
}

static char *put_i64(char *w, int64_t v) {
    if (v >= 0) return put_u64(w, (uint64_t)v);
    *w++ = '-';
    return put_u64(w, (uint64_t)0 - (uint64_t)v);
}

/* A finite byte count, exactly. */
static char *put_bytes(char *w, double v) {
    if (v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(int64_t)v) return put_i64(w, (int64_t)v);
    char buf[32];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    size_t n = strlen(buf);
    memcpy(w, buf, n);
    return w + n;
}

/* The stored nanoseconds of op time t (seconds, finite, |t| < MAX_OP_TIME_S) of a pipeline
 * whose predicted time is pipe_s: the nearest, except that when t <= pipe_s the result
 * reads back (ns_to_s, and ns / 1e6 ms in plan_ops) no later than pipe_s does
 * (pipelines.predicted_ms = pipe_s x 1e3, read back / 1e3), so that the validator's
 * "finish <= the pipeline's time" survives the two roundings. Monotone in t. */
static int64_t op_time_ns(double t, double pipe_s) {
    int64_t ns = llround(t * 1e9);
    if (t <= pipe_s) {
        const double pipe_ms = pipe_s * 1e3, pipe_back = pipe_ms / 1e3;
        while (ns > 0 && (ns_to_s(ns) > pipe_back || (double)ns / 1e6 > pipe_ms)) ns--;
    }
    return ns;
}

/* Format stage g's op list (predictions po[0..n)) into st->json; returns its length. */
static size_t format_stage_ops(lt_store *st, const lt_schedule *sc, int g, const lt_plan_op *po, double pipe_s) {
    const lt_stage_ops *so = &sc->stage[g];
    uint32_t lb, le;
    lt_schedule_stage_layers(sc->layers, sc->stages, g, &lb, &le);
    size_t need = 2 + so->n * MAX_OP_TEXT + 1;
    if (need > st->json_cap) {
        st->json_cap = need > 2 * st->json_cap ? need : 2 * st->json_cap;
        st->json = lt_realloc_check(st->json, st->json_cap);
    }
    char *w = st->json;
    *w++ = '[';
    for (size_t i = 0; i < so->n; i++) {
        const lt_op *op = &so->ops[i];
        if (i) *w++ = ',';
        *w++ = '[';
        *w++ = (char)('0' + op->kind);
        *w++ = ',';
        w = put_u64(w, op->unit);
        *w++ = ',';
        w = put_u64(w, op->recompute_layers);
        *w++ = ',';
        w = put_i64(w, op_time_ns(po[i].start_s, pipe_s));
        *w++ = ',';
        w = put_i64(w, op_time_ns(po[i].finish_s, pipe_s));
        *w++ = ',';
        w = put_bytes(w, po[i].mem_bytes);
        if (op->part != LT_PART_ALL || op->layer_begin != lb || op->layer_end != le) {
            *w++ = ',';
            w = put_u64(w, op->layer_begin);
            *w++ = ',';
            w = put_u64(w, op->layer_end);
            *w++ = ',';
            *w++ = (char)('0' + op->part);
        }
        *w++ = ']';
    }
    *w++ = ']';
    return (size_t)(w - st->json);
}

/* Whether every prediction of p fits the ops encoding: times finite and within
 * MAX_OP_TIME_S (their nanoseconds fit 18 digits), byte counts finite. LT_ERR_INPUT
 * naming the op otherwise, before anything is written. */
static lt_status check_storable(const lt_store *st, const lt_step_plan *p, lt_error *err) {
    for (size_t r = 0; r < p->n_ranks; r++) {
        const lt_rank_plan *rp = &p->ranks[r];
        size_t id = 0;
        for (int g = 0; g < rp->sched.stages; g++) {
            for (size_t i = 0; i < rp->sched.stage[g].n; i++, id++) {
                const lt_plan_op *po = &rp->ops[id];
                if (fabs(po->start_s) < MAX_OP_TIME_S && fabs(po->finish_s) < MAX_OP_TIME_S && isfinite(po->mem_bytes))
                    continue;
                char name[64];
                lt_op_name(&rp->sched.stage[g].ops[i], name, sizeof name);
                lt_fail(err, LT_ERR_INPUT, st->path,
                        "step %" PRIu64 ", pipeline %zu (dp_rank %d), stage %d, op %zu (%s): predicted start %g s, "
                        "finish %g s, memory %g bytes cannot be stored (times finite and within %g s, memory finite)",
                        p->step, r, rp->dp_rank, g, i, name, po->start_s, po->finish_s, po->mem_bytes, MAX_OP_TIME_S);
                lt_error_hint(err, "a bug in the strategy's predictions; 'planner build' stored nothing of this step");
                return LT_ERR_INPUT;
            }
        }
    }
    return LT_OK;
}

/* The units_slices rows of units[0..n) over the slice table sl, pass `passes`: a row per
 * slice, in unit then seq order, each with its unit's cp (0 stored as 1) and its position
 * in the slice table (which need not follow the units: SlimPack numbers its backward units
 * in execution order and lays their bslices out in token order). */
static lt_status put_units(lt_store *st, uint64_t step, int dp_rank, const char *passes, const lt_unit *units, size_t n,
                           const lt_slice *sl, lt_error *err) {
    for (size_t u = 0; u < n; u++) {
        const lt_unit *un = &units[u];
        for (uint32_t k = 0; k < un->n_slices; k++) {
            const lt_slice *x = &sl[un->first_slice + k];
            cell *c = batch_row(st, B_SLICES);
            cell_int(&c[0], st->run_id);
            cell_int(&c[1], (int64_t)step);
            cell_int(&c[2], dp_rank);
            cell_text(&c[3], passes);
            cell_int(&c[4], (int64_t)u);
            cell_int(&c[5], k);
            cell_int(&c[6], x->sample);
            cell_int(&c[7], x->begin);
            cell_int(&c[8], x->end);
            cell_int(&c[9], un->cp > 1 ? un->cp : 1);
            cell_int(&c[10], (int64_t)un->first_slice + k);
            lt_status s = batch_add(st, B_SLICES, step, err);
            if (s != LT_OK) return s;
        }
    }
    return LT_OK;
}

lt_status lt_store_put_step(lt_store *st, const lt_step_plan *p, const lt_sample *samples, lt_error *err) {
    if (!st->tmp) return lt_fail(err, LT_ERR_INTERNAL, st->path, "lt_store_put_step on a store opened for reading");
    if (st->failed)
        return lt_fail(err, LT_ERR_INTERNAL, st->path, "lt_store_put_step after a failed put (abort the store)");
    lt_status s = check_putable(st, p, samples, err);
    if (s == LT_OK) s = check_storable(st, p, err);
    if (s != LT_OK) return s;
    bool has;
    if ((s = lt_store_has_step(st, p->step, &has, err)) != LT_OK) return s;
    if (has) return lt_fail(err, LT_ERR_INTERNAL, st->path, "step %" PRIu64 " is already stored", p->step);

    const int64_t step = (int64_t)p->step;
    sqlite3_stmt *q;
    int64_t tokens = 0;
    for (size_t i = 0; i < p->n_samples; i++) tokens += p->lengths[i];

    if ((s = query(st, Q_INS_STEP, &q, err)) != LT_OK) return s;
    sqlite3_bind_int64(q, 2, step);
    sqlite3_bind_text(q, 3, lt_strategy_name(p->strategy), -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 4, (int64_t)p->n_samples);
    sqlite3_bind_int64(q, 5, tokens);
    sqlite3_bind_double(q, 6, p->time_s * 1e3);
    sqlite3_bind_double(q, 7, p->bubble_ratio);
    sqlite3_bind_double(q, 8, p->peak_mem);
    if (st->timings) sqlite3_bind_double(q, 9, p->solve_ms);
    sqlite3_bind_text(q, 10, p->params, (int)strnlen(p->params, sizeof p->params), SQLITE_STATIC);
    sqlite3_bind_text(q, 11, p->solver_status, (int)strnlen(p->solver_status, sizeof p->solver_status),
                      SQLITE_STATIC);
    if ((unsigned)p->runner_up < LT_STRATEGY_COUNT) {
        sqlite3_bind_text(q, 12, lt_strategy_name(p->runner_up), -1, SQLITE_STATIC);
        sqlite3_bind_double(q, 13, p->runner_up_time_s * 1e3);
    }
    sqlite3_bind_int64(q, 14, lt_plan_predicted_tokens(p->lengths, p->n_samples));
    if ((s = run_insert(st, q, "steps", p->step, err)) != LT_OK) return s;

    for (size_t i = 0; i < p->n_samples; i++) {
        const lt_sample *sm = &samples[i];
        cell *c = batch_row(st, B_SAMPLES);
        cell_int(&c[0], st->run_id);
        cell_int(&c[1], step);
        cell_int(&c[2], (int64_t)i);
        cell_int(&c[3], (int64_t)sm->id);
        cell_int(&c[4], p->lengths[i]);
        cell_int(&c[5], p->ranks[p->sample_rank[i]].dp_rank);
        cell_int(&c[6], sm->task);
        cell_int(&c[7], (int64_t)sm->doc);
        cell_int(&c[8], sm->offset);
        if ((s = batch_add(st, B_SAMPLES, p->step, err)) != LT_OK) return s;
    }

    for (size_t r = 0; r < p->n_ranks; r++) {
        const lt_rank_plan *rp = &p->ranks[r];
        const lt_schedule *sc = &rp->sched;
        if ((s = query(st, Q_INS_PIPELINE, &q, err)) != LT_OK) return s;
        sqlite3_bind_int64(q, 2, step);
        sqlite3_bind_int(q, 3, rp->dp_rank);
        sqlite3_bind_int(q, 4, rp->cp);
        sqlite3_bind_double(q, 5, rp->time_s * 1e3);
        if ((s = run_insert(st, q, "pipelines", p->step, err)) != LT_OK) return s;

        /* the stages, each with its op list as one JSON text (the ops encoding above) */
        if ((s = query(st, Q_INS_STAGE, &q, err)) != LT_OK) return s;
        sqlite3_bind_int64(q, 2, step);
        sqlite3_bind_int(q, 3, rp->dp_rank);
        size_t id = 0;
        for (int g = 0; g < sc->stages; g++) {
            uint32_t lb, le;
            lt_schedule_stage_layers(sc->layers, sc->stages, g, &lb, &le);
            size_t len = format_stage_ops(st, sc, g, rp->ops ? rp->ops + id : NULL, rp->time_s);
            id += sc->stage[g].n;
            sqlite3_bind_int(q, 4, g);
            sqlite3_bind_double(q, 5, rp->stage_busy_s[g] * 1e3);
            sqlite3_bind_double(q, 6, rp->stage_peak_mem[g]);
            sqlite3_bind_int64(q, 7, lb);
            sqlite3_bind_int64(q, 8, le);
            sqlite3_bind_int64(q, 9, (int64_t)sc->stage[g].n);
            sqlite3_bind_text(q, 10, st->json, (int)len, SQLITE_STATIC);
            if ((s = run_insert(st, q, "stages", p->step, err)) != LT_OK) return s;
        }

        /* the units: 'FB' rows for a symmetric schedule; an asymmetric one's 'B' rows (bunits)
         * then its 'F' rows (units), in key order */
        if (sc->asym) {
            if ((s = put_units(st, p->step, rp->dp_rank, "B", sc->bunits, sc->n_bunits, sc->bslices, err)) != LT_OK)
                return s;
            if ((s = put_units(st, p->step, rp->dp_rank, "F", sc->units, sc->n_units, sc->slices, err)) != LT_OK)
                return s;
        } else if ((s = put_units(st, p->step, rp->dp_rank, "FB", sc->units, sc->n_units, sc->slices, err)) != LT_OK) {
            return s;
        }
    }
    for (size_t k = 0; k < p->n_merges; k++) {
        const lt_dp_merge *m = &p->merges[k];
        if ((s = query(st, Q_INS_MERGE, &q, err)) != LT_OK) return s;
        sqlite3_bind_int64(q, 2, step);
        sqlite3_bind_int64(q, 3, m->sample);
        sqlite3_bind_int64(q, 4, (int64_t)samples[m->sample].id);
        sqlite3_bind_int(q, 5, p->ranks[m->first_rank].dp_rank);
        sqlite3_bind_int(q, 6, m->cp);
        sqlite3_bind_text(q, 7, lt_merge_reason_name(m->reason), -1, SQLITE_STATIC);
        if ((s = run_insert(st, q, "dp_merges", p->step, err)) != LT_OK) return s;
    }
    for (int b = 0; b < B_COUNT; b++)
        if ((s = batch_flush(st, b, p->step, err)) != LT_OK) return s;
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
    lt_status s = check_schema_version(path, err);
    if (s == LT_OK) s = lt_db_open(&st->db, path, &plan_schema, LT_DB_READONLY, err);
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

lt_status lt_store_run_info(lt_store *st, lt_run_info *out, lt_error *err) { return read_run(st, out, err); }

lt_status lt_store_steps(lt_store *st, uint64_t **steps, size_t *n, lt_error *err) {
    *steps = NULL;
    *n = 0;
    sqlite3_stmt *q;
    lt_status s = query(st, Q_STEP_LIST, &q, err);
    if (s != LT_OK) return s;
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            *steps = lt_realloc_check(*steps, cap * sizeof **steps);
        }
        (*steps)[(*n)++] = (uint64_t)sqlite3_column_int64(q, 0);
    }
    if (rc != SQLITE_DONE) {
        s = lt_db_fail(st->db, err, "cannot read table steps");
        free(*steps);
        *steps = NULL;
        *n = 0;
    }
    sqlite3_reset(q);
    return s;
}

/* LT_ERR_INPUT for step `step` not stored, with the stored range as the hint. */
static lt_status not_stored(lt_store *st, uint64_t step, lt_error *err) {
    sqlite3_stmt *q;
    lt_status s = query(st, Q_STEP_RANGE, &q, err);
    if (s != LT_OK) return s;
    int64_t lo = 0, hi = 0, count = 0;
    if (sqlite3_step(q) == SQLITE_ROW) {
        lo = sqlite3_column_int64(q, 0);
        hi = sqlite3_column_int64(q, 1);
        count = sqlite3_column_int64(q, 2);
    }
    sqlite3_reset(q);
    lt_fail(err, LT_ERR_INPUT, st->path, "step %" PRIu64 " is not stored", step);
    if (count == 0)
        lt_error_hint(err, "the file holds no steps yet");
    else if (hi - lo + 1 == count)
        lt_error_hint(err, "the file holds steps %" PRId64 "..%" PRId64, lo, hi);
    else
        lt_error_hint(err, "the file holds %" PRId64 " steps between %" PRId64 " and %" PRId64
                           " ('sqlite3 FILE \"SELECT step FROM steps\"' lists them)",
                      count, lo, hi);
    return LT_ERR_INPUT;
}

/* A growing array of op predictions for one pipeline. */
typedef struct pred_buf {
    lt_plan_op *v;
    size_t n, cap;
} pred_buf;

/* The pipeline index of dp_rank in p->ranks (sorted), or -1. */
static int rank_index(const lt_step_plan *p, int64_t dp_rank) {
    size_t lo = 0, hi = p->n_ranks;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->ranks[mid].dp_rank < dp_rank) lo = mid + 1;
        else hi = mid;
    }
    return lo < p->n_ranks && p->ranks[lo].dp_rank == dp_rank ? (int)lo : -1;
}

/* Step a reading query; SQLITE_ROW or SQLITE_DONE, else an I/O error is filled. */
static int step_row(lt_store *st, sqlite3_stmt *q, const char *table, lt_status *s, lt_error *err) {
    int rc = sqlite3_step(q);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        char what[64];
        snprintf(what, sizeof what, "cannot read table %s", table);
        *s = lt_db_fail(st->db, err, what);
    }
    return rc;
}

/* LT_ERR_INPUT "step N: WHAT" naming the file. */
static lt_status step_fail(lt_error *err, const char *path, uint64_t step, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static lt_status step_fail(lt_error *err, const char *path, uint64_t step, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return lt_fail(err, LT_ERR_INPUT, path, "step %" PRIu64 ": %s", step, what);
}

/* ------------------------------------------------------------------ the ops encoding: parsing */

/* Where an op list comes from, for messages. */
typedef struct ops_where {
    const char *path;
    uint64_t step;
    int64_t dp_rank;
    int stage;
} ops_where;

static lt_status ops_fail(lt_error *err, const ops_where *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static lt_status ops_fail(lt_error *err, const ops_where *at, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    lt_status s = step_fail(err, at->path, at->step, "table stages: dp_rank %" PRId64 " stage %d: ops: %s",
                            at->dp_rank, at->stage, what);
    lt_error_hint(err, "the file was modified or damaged after 'planner build' wrote it; rebuild it "
                       "(docs/plans-schema.md, \"The ops encoding\")");
    return s;
}

/* A cursor over the ops text. The parser is strict: JSON (RFC 8259) arrays and numbers
 * only, in the shape of the encoding; blanks between tokens are allowed (a hand-edited or
 * pretty-printed list stays readable), anything else is an error naming the byte. */
typedef struct jcur {
    const char *s;
    size_t i, n;
} jcur;

static inline void j_blanks(jcur *c) {
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\n' || c->s[c->i] == '\t' || c->s[c->i] == '\r'))
        c->i++;
}

/* The next character after blanks, consumed when it is ch. */
static inline bool j_take(jcur *c, char ch) {
    j_blanks(c);
    if (c->i < c->n && c->s[c->i] == ch) {
        c->i++;
        return true;
    }
    return false;
}

static inline bool j_digit(const jcur *c, size_t i) { return i < c->n && c->s[i] >= '0' && c->s[i] <= '9'; }

/* The JSON number at the cursor: its extent [*b, c->i), whether it has a fraction or an
 * exponent, and its integer value when it has neither and fits 18 digits. false when no
 * JSON number starts here. */
static bool j_number(jcur *c, size_t *b, bool *integral, int64_t *iv, bool *fits) {
    j_blanks(c);
    size_t i = c->i;
    *b = i;
    bool neg = i < c->n && c->s[i] == '-';
    if (neg) i++;
    if (!j_digit(c, i)) return false;
    uint64_t v = 0;
    int digits = 0;
    if (c->s[i] == '0') {
        i++;
        digits = 1;
    } else {
        while (j_digit(c, i)) {
            if (digits < 18) v = 10 * v + (uint64_t)(c->s[i] - '0');
            digits++;
            i++;
        }
    }
    *integral = true;
    if (i < c->n && c->s[i] == '.') {
        *integral = false;
        if (!j_digit(c, ++i)) return false;
        while (j_digit(c, i)) i++;
    }
    if (i < c->n && (c->s[i] == 'e' || c->s[i] == 'E')) {
        *integral = false;
        i++;
        if (i < c->n && (c->s[i] == '+' || c->s[i] == '-')) i++;
        if (!j_digit(c, i)) return false;
        while (j_digit(c, i)) i++;
    }
    c->i = i;
    *fits = *integral && digits <= 18;
    *iv = neg ? -(int64_t)v : (int64_t)v;
    return true;
}

/* Value k of an op: the names for messages. */
static const char *const op_field[9] = {"kind",    "unit",      "recompute_layers", "start",
                                        "finish",  "mem_bytes", "layer_begin",      "layer_end",
                                        "part"};

/* Parse the op list of one stage (text[0..len), n_ops elements, the stage's layer block
 * [lb, le)) onto stage at->stage of sc and its predictions onto pb. */
static lt_status parse_stage_ops(const ops_where *at, const char *text, size_t len, int64_t n_ops, uint32_t lb,
                                 uint32_t le, lt_schedule *sc, pred_buf *pb, lt_error *err) {
    jcur c = {text ? text : "", 0, text ? len : 0};
    size_t n = 0;
#define MALFORMED(expect) \
    return ops_fail(err, at, "malformed at byte %zu (op %zu): expected %s", c.i, n, expect)
    if (!j_take(&c, '[')) MALFORMED("'[' (a JSON array of ops)");
    if (!j_take(&c, ']')) {
        do {
            if (!j_take(&c, '['))
                MALFORMED("'[' (an op: [kind, unit, recompute_layers, start, finish, mem_bytes, ...])");
            int64_t v[9];
            double mem = 0;
            int k = 0;
            for (;; k++) {
                if (k > 0 && !j_take(&c, ',')) {
                    if (j_take(&c, ']')) break;
                    MALFORMED("',' or ']'");
                }
                if (k == 9)
                    return ops_fail(err, at, "op %zu has more than 9 values (6, or 9 for an op with its own layers)",
                                    n);
                size_t b;
                bool integral, fits;
                if (!j_number(&c, &b, &integral, &v[k], &fits)) MALFORMED("a number");
                if (k == 5) { /* mem_bytes: any finite number */
                    if (fits && v[k] > -9007199254740992 && v[k] < 9007199254740992) {
                        mem = (double)v[k];
                    } else {
                        char num[64];
                        if (c.i - b >= sizeof num)
                            return ops_fail(err, at, "op %zu: mem_bytes has %zu characters (at most 63)", n, c.i - b);
                        memcpy(num, c.s + b, c.i - b);
                        num[c.i - b] = '\0';
                        mem = strtod(num, NULL);
                        if (!isfinite(mem)) return ops_fail(err, at, "op %zu: mem_bytes %s is out of range", n, num);
                    }
                } else if (!fits) {
                    return ops_fail(err, at, "op %zu: %s '%.*s' is not an integer of at most 18 digits", n,
                                    op_field[k], (int)(c.i - b), c.s + b);
                }
            }
            if (k != 6 && k != 9)
                return ops_fail(err, at, "op %zu has %d values (6, or 9 for an op with its own layers)", n, k);
            if (v[0] < 0 || v[0] > LT_OP_B)
                return ops_fail(err, at, "op %zu: kind %" PRId64 " (0 F, 1 FK or 2 B)", n, v[0]);
            const bool bwd = sc->asym && v[0] == LT_OP_B; /* runs a unit of the backward partition */
            const size_t n_units = bwd ? sc->n_bunits : sc->n_units;
            if (v[1] < 0 || (uint64_t)v[1] >= n_units)
                return ops_fail(err, at, "op %zu runs %sunit %" PRId64 ", the pipeline has %zu %sunits in units_slices",
                                n, bwd ? "backward " : "", v[1], n_units, bwd ? "backward " : "");
            if (v[2] < 0 || v[2] > UINT16_MAX)
                return ops_fail(err, at, "op %zu: recompute_layers %" PRId64 " out of range", n, v[2]);
            lt_op op = {.kind = (uint8_t)v[0],
                        .part = LT_PART_ALL,
                        .recompute_layers = (uint16_t)v[2],
                        .unit = (uint32_t)v[1],
                        .layer_begin = lb,
                        .layer_end = le};
            if (k == 9) {
                if (v[6] < 0 || v[6] > UINT32_MAX || v[7] < 0 || v[7] > UINT32_MAX)
                    return ops_fail(err, at, "op %zu: layers [%" PRId64 ", %" PRId64 ") out of range", n, v[6], v[7]);
                if (v[8] < 0 || v[8] > LT_PART_POST)
                    return ops_fail(err, at, "op %zu: part %" PRId64 " (0 all, 1 pre, 2 attn or 3 post)", n, v[8]);
                op.layer_begin = (uint32_t)v[6];
                op.layer_end = (uint32_t)v[7];
                op.part = (uint8_t)v[8];
            }
            lt_schedule_add_op(sc, at->stage, op);
            if (pb->n == pb->cap) {
                pb->cap = pb->cap ? 2 * pb->cap : 256;
                pb->v = lt_realloc_check(pb->v, pb->cap * sizeof *pb->v);
            }
            pb->v[pb->n++] = (lt_plan_op){ns_to_s(v[3]), ns_to_s(v[4]), mem};
            n++;
        } while (j_take(&c, ','));
        if (!j_take(&c, ']')) MALFORMED("',' or ']'");
    }
    j_blanks(&c);
    if (c.i != c.n) MALFORMED("the end of the text after the array");
#undef MALFORMED
    if ((int64_t)n != n_ops) return ops_fail(err, at, "n_ops says %" PRId64 ", the array holds %zu ops", n_ops, n);
    return LT_OK;
}

/* The rows of one pass of one pipeline (read_step), before they are laid out. */
typedef struct pass_row {
    int64_t unit, seq, slice, idx, begin, end, cp;
} pass_row;

typedef struct pass_rows {
    pass_row *v;
    size_t n, cap;
} pass_rows;

/* Lay the rows of pass `passes` of pipeline dp_rank (in unit, seq order, numbered and
 * checked) out onto sc: the slices at their stored positions (the slice table for 'F' and
 * 'FB', the bslice table for 'B'), then the units over them. The positions must be 0 ..
 * rows-1, each once, and a unit's slices consecutive; LT_ERR_INPUT naming the row if not. */
static lt_status place_pass(const char *path, uint64_t step, int dp_rank, const char *passes, pass_rows *pr,
                            lt_schedule *sc, lt_error *err) {
    const bool backward = strcmp(passes, "B") == 0;
    const size_t n = pr->n;
    size_t *at = lt_malloc_check((n ? n : 1) * sizeof *at); /* slice position -> row */
    for (size_t i = 0; i < n; i++) at[i] = SIZE_MAX;
    lt_status s = LT_OK;
    for (size_t i = 0; i < n && s == LT_OK; i++) {
        const pass_row *w = &pr->v[i];
        if (w->slice < 0 || (uint64_t)w->slice >= n || at[w->slice] != SIZE_MAX)
            s = step_fail(err, path, step,
                          "table units_slices: dp_rank %d passes %s unit %" PRId64 " seq %" PRId64 ": slice %" PRId64
                          " (the pass's %zu rows hold slices 0 .. %zu, each once)",
                          dp_rank, passes, w->unit, w->seq, w->slice, n, n ? n - 1 : 0);
        else if (w->seq > 0 && w->slice != pr->v[i - 1].slice + 1)
            s = step_fail(err, path, step,
                          "table units_slices: dp_rank %d passes %s unit %" PRId64 " seq %" PRId64 ": slice %" PRId64
                          " after slice %" PRId64 " (a unit's slices are consecutive in the slice table)",
                          dp_rank, passes, w->unit, w->seq, w->slice, pr->v[i - 1].slice);
        else
            at[w->slice] = i;
    }
    for (size_t k = 0; k < n && s == LT_OK; k++) {
        const pass_row *w = &pr->v[at[k]];
        if (backward) lt_schedule_add_bslice(sc, (int32_t)w->idx, w->begin, w->end);
        else lt_schedule_add_slice(sc, (int32_t)w->idx, w->begin, w->end);
    }
    for (size_t i = 0; i < n && s == LT_OK; i++) {
        const pass_row *w = &pr->v[i];
        if (w->seq != 0) continue;
        size_t count = 1;
        while (i + count < n && pr->v[i + count].seq != 0) count++;
        uint32_t u = backward ? lt_schedule_add_bunit(sc, (uint32_t)w->slice, (uint32_t)count)
                              : lt_schedule_add_unit(sc, (uint32_t)w->slice, (uint32_t)count);
        (backward ? sc->bunits : sc->units)[u].cp = (uint16_t)w->cp;
    }
    free(at);
    return s;
}

/* Read the units_slices rows of step `step` onto the schedules of p (its pipelines made,
 * n_samples known): per pipeline, either 'FB' rows (a symmetric schedule) or 'B' and 'F'
 * rows (an asymmetric one: bunits and bslices, then units and slices); per pass units 0,
 * 1, ... each with slices seq 0, 1, ..., all rows of a unit with the same cp. A pass's rows
 * are gathered, then laid out by place_pass. */
static lt_status read_units(lt_store *st, uint64_t step, lt_step_plan *p, lt_error *err) {
#define ROWS_BAD(...)                                    \
    do {                                                 \
        s = step_fail(err, st->path, step, __VA_ARGS__); \
        goto out;                                        \
    } while (0)
    sqlite3_stmt *q;
    lt_status s = query(st, Q_GET_SLICES, &q, err);
    if (s != LT_OK) return s;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    int cur = -1;
    int64_t cur_unit = -1, next_seq = 0;
    char cur_pass[3] = "";
    bool saw_fb = false, saw_f = false, saw_b = false;
    pass_rows pr = {0};
    for (;;) {
        int rc = step_row(st, q, "units_slices", &s, err);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) goto out;
        int64_t dp = 0, unit = 0, seq = 0, idx = 0, b = 0, e = 0, cp = 0, slice = 0;
        const char *passes = "";
        int r = -1;
        if (rc == SQLITE_ROW) {
            dp = sqlite3_column_int64(q, 0), unit = sqlite3_column_int64(q, 2), seq = sqlite3_column_int64(q, 3);
            idx = sqlite3_column_int64(q, 4), b = sqlite3_column_int64(q, 5), e = sqlite3_column_int64(q, 6);
            cp = sqlite3_column_int64(q, 7), slice = sqlite3_column_int64(q, 8);
            passes = (const char *)sqlite3_column_text(q, 1);
            if (!passes || (strcmp(passes, "FB") != 0 && strcmp(passes, "F") != 0 && strcmp(passes, "B") != 0))
                ROWS_BAD("table units_slices: dp_rank %" PRId64 " unit %" PRId64 " has passes '%s' ('FB', 'F' or 'B')",
                         dp, unit, passes ? passes : "");
            r = rank_index(p, dp);
            if (r < 0) ROWS_BAD("table units_slices: dp_rank %" PRId64 " has no pipeline", dp);
        }
        /* the end of a pass's rows: lay them out */
        if (cur >= 0 && (r != cur || strcmp(passes, cur_pass) != 0)) {
            if ((s = place_pass(st->path, step, p->ranks[cur].dp_rank, cur_pass, &pr, &p->ranks[cur].sched, err)) !=
                LT_OK)
                goto out;
            pr.n = 0;
        }
        if (cur >= 0 && r != cur && saw_f != saw_b)
            ROWS_BAD("table units_slices: dp_rank %d has '%s' rows but no '%s' rows (an asymmetric schedule has both)",
                     p->ranks[cur].dp_rank, saw_f ? "F" : "B", saw_f ? "B" : "F");
        if (rc == SQLITE_DONE) break;
        if (r != cur) {
            cur = r;
            cur_pass[0] = '\0';
            saw_fb = saw_f = saw_b = false;
        }
        if (strcmp(passes, cur_pass) != 0) {
            memcpy(cur_pass, passes, strlen(passes) + 1); /* "FB", "F" or "B" */
            cur_unit = -1;
            saw_fb |= passes[1] != '\0';
            saw_f |= strcmp(passes, "F") == 0;
            saw_b |= strcmp(passes, "B") == 0;
            if (saw_fb && (saw_f || saw_b))
                ROWS_BAD("table units_slices: dp_rank %" PRId64 " has both 'FB' rows and 'F'/'B' rows (a pipeline's "
                         "schedule is symmetric or asymmetric)",
                         dp);
        }
        if (cp < 1 || cp > UINT16_MAX)
            ROWS_BAD("table units_slices: dp_rank %" PRId64 " passes %s unit %" PRId64 " seq %" PRId64 ": cp %" PRId64
                     " out of range",
                     dp, passes, unit, seq, cp);
        if (unit != cur_unit) {
            if (unit != cur_unit + 1 || seq != 0)
                ROWS_BAD("table units_slices: dp_rank %" PRId64 " passes %s unit %" PRId64 " seq %" PRId64
                         " (units must be numbered 0, 1, ... and slices from seq 0)",
                         dp, passes, unit, seq);
            cur_unit = unit;
            next_seq = 0;
        }
        if (seq != next_seq)
            ROWS_BAD("table units_slices: dp_rank %" PRId64 " passes %s unit %" PRId64 " is missing seq %" PRId64, dp,
                     passes, unit, next_seq);
        if (idx < 0 || (uint64_t)idx >= p->n_samples || b < 0 || e <= b)
            ROWS_BAD("table units_slices: dp_rank %" PRId64 " passes %s unit %" PRId64 " seq %" PRId64
                     ": sample %" PRId64 " tokens [%" PRId64 ", %" PRId64 ") out of range",
                     dp, passes, unit, seq, idx, b, e);
        if (seq > 0 && cp != pr.v[pr.n - 1].cp)
            ROWS_BAD("table units_slices: dp_rank %" PRId64 " passes %s unit %" PRId64 ": seq %" PRId64
                     " has cp %" PRId64 ", seq 0 has cp %" PRId64 " (a unit has one cp)",
                     dp, passes, unit, seq, cp, pr.v[pr.n - 1].cp);
        if (pr.n == pr.cap) {
            pr.cap = pr.cap ? 2 * pr.cap : 256;
            pr.v = lt_realloc_check(pr.v, pr.cap * sizeof *pr.v);
        }
        pr.v[pr.n++] = (pass_row){unit, seq, slice, idx, b, e, cp};
        next_seq++;
    }
out:
    free(pr.v);
    sqlite3_reset(q);
    return s;
#undef ROWS_BAD
}

static lt_status read_step(lt_store *st, uint64_t step, lt_step_plan *p, lt_sample **samples_out, lt_error *err) {
    const int64_t st_step = (int64_t)step;
    sqlite3_stmt *q;
    lt_status s;
    int rc;
#define BAD(...)                                   \
    do {                                           \
        s = step_fail(err, st->path, step, __VA_ARGS__); \
        goto done;                                 \
    } while (0)

    /* steps */
    if ((s = query(st, Q_GET_STEP, &q, err)) != LT_OK) return s;
    sqlite3_bind_int64(q, 2, st_step);
    rc = step_row(st, q, "steps", &s, err);
    if (rc == SQLITE_DONE) {
        sqlite3_reset(q);
        return not_stored(st, step, err);
    }
    if (rc != SQLITE_ROW) goto done;
    p->step = step;
    p->pp = st->pp;
    const unsigned char *name = sqlite3_column_text(q, 0);
    int strat = -1;
    for (int i = 0; name && i < LT_STRATEGY_COUNT; i++)
        if (strcmp((const char *)name, lt_strategy_name((lt_strategy)i)) == 0) strat = i;
    if (strat < 0) BAD("table steps: unknown strategy '%s'", name ? (const char *)name : "");
    p->strategy = (lt_strategy)strat;
    int64_t n_samples = sqlite3_column_int64(q, 1);
    if (n_samples < 0 || n_samples > (int64_t)INT32_MAX) BAD("table steps: n_samples %" PRId64, n_samples);
    p->n_samples = (size_t)n_samples;
    p->time_s = sqlite3_column_double(q, 3) / 1e3;
    p->bubble_ratio = sqlite3_column_double(q, 4);
    p->peak_mem = sqlite3_column_double(q, 5);
    p->solve_ms = sqlite3_column_type(q, 6) == SQLITE_NULL ? 0 : sqlite3_column_double(q, 6);
    snprintf(p->params, sizeof p->params, "%s",
             sqlite3_column_text(q, 7) ? (const char *)sqlite3_column_text(q, 7) : "");
    snprintf(p->solver_status, sizeof p->solver_status, "%s",
             sqlite3_column_text(q, 8) ? (const char *)sqlite3_column_text(q, 8) : "");
    p->runner_up = LT_STRATEGY_COUNT;
    if (sqlite3_column_type(q, 9) != SQLITE_NULL) {
        const unsigned char *ru = sqlite3_column_text(q, 9);
        for (int i = 0; i < LT_STRATEGY_COUNT; i++)
            if (strcmp((const char *)ru, lt_strategy_name((lt_strategy)i)) == 0) p->runner_up = (lt_strategy)i;
        if (p->runner_up == LT_STRATEGY_COUNT) BAD("table steps: unknown runner_up '%s'", (const char *)ru);
        p->runner_up_time_s = sqlite3_column_double(q, 10) / 1e3;
    }
    p->n_predicted = sqlite3_column_int64(q, 11);
    sqlite3_reset(q);

    /* pipelines */
    if ((s = query(st, Q_GET_PIPELINES, &q, err)) != LT_OK) goto done;
    sqlite3_bind_int64(q, 2, st_step);
    size_t cap = 0;
    while ((rc = step_row(st, q, "pipelines", &s, err)) == SQLITE_ROW) {
        if (p->n_ranks == cap) {
            cap = cap ? 2 * cap : 8;
            p->ranks = lt_realloc_check(p->ranks, cap * sizeof *p->ranks);
        }
        lt_rank_plan *rp = &p->ranks[p->n_ranks];
        memset(rp, 0, sizeof *rp);
        rp->dp_rank = sqlite3_column_int(q, 0);
        rp->cp = sqlite3_column_int(q, 1);
        rp->time_s = sqlite3_column_double(q, 2) / 1e3;
        rp->stage_busy_s = lt_calloc_check((size_t)st->pp, sizeof *rp->stage_busy_s);
        rp->stage_peak_mem = lt_calloc_check((size_t)st->pp, sizeof *rp->stage_peak_mem);
        p->n_ranks++;
        if (lt_schedule_init(&rp->sched, st->pp, st->layers, err) != LT_OK) BAD("table runs: bad shape");
    }
    if (rc != SQLITE_DONE) goto done;
    sqlite3_reset(q);
    if (p->n_ranks == 0 && p->n_samples > 0) BAD("table pipelines: no rows for a step with samples");

    /* samples; the arrays grow with the rows (up to n_samples), so a damaged n_samples
     * cannot make the reader allocate for rows that are not there */
    size_t cap_s = 1;
    p->lengths = lt_calloc_check(1, sizeof *p->lengths);
    p->sample_rank = lt_calloc_check(1, sizeof *p->sample_rank);
    lt_sample *smp = samples_out ? lt_calloc_check(1, sizeof *smp) : NULL;
    if (samples_out) *samples_out = smp;
    if ((s = query(st, Q_GET_SAMPLES, &q, err)) != LT_OK) goto done;
    sqlite3_bind_int64(q, 2, st_step);
    size_t rows = 0;
    while ((rc = step_row(st, q, "step_samples", &s, err)) == SQLITE_ROW) {
        int64_t idx = sqlite3_column_int64(q, 0), dp = sqlite3_column_int64(q, 3);
        if (idx != (int64_t)rows || rows >= p->n_samples)
            BAD("table step_samples: row idx %" PRId64 " (want idx 0..%zu, one each)", idx,
                p->n_samples ? p->n_samples - 1 : 0);
        if (rows == cap_s) {
            cap_s = 2 * cap_s < p->n_samples ? 2 * cap_s : p->n_samples;
            p->lengths = lt_realloc_check(p->lengths, cap_s * sizeof *p->lengths);
            p->sample_rank = lt_realloc_check(p->sample_rank, cap_s * sizeof *p->sample_rank);
            if (smp) *samples_out = smp = lt_realloc_check(smp, cap_s * sizeof *smp);
        }
        int r = rank_index(p, dp);
        if (r < 0)
            BAD("table step_samples: sample %" PRId64 " is on dp_rank %" PRId64 ", which has no pipeline", idx, dp);
        p->lengths[rows] = sqlite3_column_int64(q, 2);
        p->sample_rank[rows] = r;
        if (smp) {
            smp[rows].id = (uint64_t)sqlite3_column_int64(q, 1);
            smp[rows].length = p->lengths[rows];
            smp[rows].task = (uint32_t)sqlite3_column_int64(q, 4);
            smp[rows].doc = (uint64_t)sqlite3_column_int64(q, 5);
            smp[rows].offset = sqlite3_column_int64(q, 6);
            smp[rows].corpus_doc = 0; /* not stored: the sampler's corpus index is not needed to find it */
        }
        rows++;
    }
    if (rc != SQLITE_DONE) goto done;
    sqlite3_reset(q);
    if (rows != p->n_samples) BAD("table step_samples: %zu rows, table steps says n_samples %zu", rows, p->n_samples);

    if ((s = read_units(st, step, p, err)) != LT_OK) goto done;

    /* dp_merges: the step's DP-Merge groups, by sample */
    if ((s = query(st, Q_GET_MERGES, &q, err)) != LT_OK) goto done;
    sqlite3_bind_int64(q, 2, st_step);
    size_t cap_m = 0;
    while ((rc = step_row(st, q, "dp_merges", &s, err)) == SQLITE_ROW) {
        int64_t idx = sqlite3_column_int64(q, 0), dp = sqlite3_column_int64(q, 2), cp = sqlite3_column_int64(q, 3);
        if (idx < 0 || (uint64_t)idx >= p->n_samples)
            BAD("table dp_merges: sample idx %" PRId64 ", the step has %zu samples", idx, p->n_samples);
        int r = rank_index(p, dp);
        if (r < 0) BAD("table dp_merges: sample idx %" PRId64 " is merged from dp_rank %" PRId64 ", which has no pipeline",
                       idx, dp);
        if (cp < 2 || cp > (int64_t)p->n_ranks)
            BAD("table dp_merges: sample idx %" PRId64 ": cp %" PRId64 " (2 to the step's %zu pipelines)", idx, cp,
                p->n_ranks);
        /* the CHECK admits only these two; a file edited without it is corrupt all the same */
        const char *why = (const char *)sqlite3_column_text(q, 4);
        lt_merge_reason reason = LT_MERGE_FLOPS;
        if (why && strcmp(why, "memory") == 0) reason = LT_MERGE_MEMORY;
        else if (!why || strcmp(why, "flops") != 0)
            BAD("table dp_merges: sample idx %" PRId64 ": reason '%s' (want 'flops' or 'memory')", idx,
                why ? why : "NULL");
        if (p->n_merges == cap_m) {
            cap_m = cap_m ? 2 * cap_m : 4;
            p->merges = lt_realloc_check(p->merges, cap_m * sizeof *p->merges);
        }
        p->merges[p->n_merges++] =
            (lt_dp_merge){.sample = (int32_t)idx, .first_rank = r, .cp = (int)cp, .reason = reason};
    }
    if (rc != SQLITE_DONE) goto done;
    sqlite3_reset(q);

    /* stages: exactly stages 0..pp-1 of every pipeline, in order, each with its op list
     * (op-id order is stage-major, so the predictions append in order) */
    pred_buf *pred = lt_calloc_check(p->n_ranks ? p->n_ranks : 1, sizeof *pred);
    if ((s = query(st, Q_GET_STAGES, &q, err)) != LT_OK) goto done_pred;
    sqlite3_bind_int64(q, 2, st_step);
    rows = 0;
    while ((rc = step_row(st, q, "stages", &s, err)) == SQLITE_ROW) {
        int64_t dp = sqlite3_column_int64(q, 0), g = sqlite3_column_int64(q, 1);
        size_t r = rows / (size_t)st->pp;
        if (r >= p->n_ranks || p->ranks[r].dp_rank != dp || g != (int64_t)(rows % (size_t)st->pp)) {
            s = step_fail(err, st->path, step,
                          "table stages: row (dp_rank %" PRId64 ", stage %" PRId64 ") is unexpected: want stages "
                          "0..%d of every pipeline",
                          dp, g, st->pp - 1);
            goto done_pred;
        }
        p->ranks[r].stage_busy_s[g] = sqlite3_column_double(q, 2) / 1e3;
        p->ranks[r].stage_peak_mem[g] = sqlite3_column_double(q, 3);
        uint32_t lb, le;
        lt_schedule_stage_layers(st->layers, st->pp, (int)g, &lb, &le);
        int64_t have_lb = sqlite3_column_int64(q, 4), have_le = sqlite3_column_int64(q, 5);
        if (have_lb != (int64_t)lb || have_le != (int64_t)le) {
            s = step_fail(err, st->path, step,
                          "table stages: dp_rank %" PRId64 " stage %" PRId64 " has layers [%" PRId64 ", %" PRId64
                          "), stage %" PRId64 " of %d over %d layers is [%u, %u)",
                          dp, g, have_lb, have_le, g, st->pp, st->layers, lb, le);
            goto done_pred;
        }
        const char *text = (const char *)sqlite3_column_text(q, 7);
        size_t len = (size_t)sqlite3_column_bytes(q, 7);
        ops_where at = {st->path, step, dp, (int)g};
        if ((s = parse_stage_ops(&at, text, len, sqlite3_column_int64(q, 6), lb, le, &p->ranks[r].sched, &pred[r],
                                 err)) != LT_OK)
            goto done_pred;
        rows++;
    }
    if (rc != SQLITE_DONE) goto done_pred;
    sqlite3_reset(q);
    if (rows != p->n_ranks * (size_t)st->pp) {
        s = step_fail(err, st->path, step, "table stages: %zu rows for %zu pipelines of %d stages", rows, p->n_ranks,
                      st->pp);
        goto done_pred;
    }
    for (size_t r = 0; r < p->n_ranks; r++) {
        p->ranks[r].ops = pred[r].v ? pred[r].v : lt_calloc_check(1, sizeof(lt_plan_op));
        pred[r].v = NULL;
    }
done_pred:
    for (size_t r = 0; r < p->n_ranks; r++) free(pred[r].v);
    free(pred);
done:
    if (q) sqlite3_reset(q);
    return s;
#undef BAD
}

lt_status lt_store_get_step(lt_store *st, uint64_t step, lt_step_plan *out, lt_sample **samples, lt_error *err) {
    lt_step_plan_free(out);
    if (samples) *samples = NULL;
    if (step > (uint64_t)INT64_MAX) return not_stored(st, step, err);
    lt_status s = read_step(st, step, out, samples, err);
    if (s != LT_OK) {
        lt_step_plan_free(out);
        if (samples) {
            free(*samples);
            *samples = NULL;
        }
    }
    return s;
}

/* ------------------------------------------------------------------ raw rows (lt_store_validate) */

/* The raw-row checks of one stored step, for lt_store_validate (plans/store/validate.c; this
 * prototype is in store.h): the steps row's n_samples and n_tokens equal the step_samples
 * rows' count and sum; every dp_merges row names a sample of the step by idx and sample_id,
 * on its step_samples dp_rank, with a group of cp pipelines from there; per pass, the rows
 * of units_slices cover every sample's tokens exactly once on the sample's dp_rank, or, for
 * a DP-merged sample, exactly once on every dp_rank of its group with the same token ranges
 * on each, and nowhere else; a row's cp is its sample's group cp (1 when not merged).
 * LT_ERR_INPUT naming the table. The stages rows' op lists are checked by the reader, which
 * lt_store_validate runs next (one parse per list): well-formed, n_ops elements, the run's
 * layer block, units of the pipeline, kinds and parts known. */

typedef struct raw_slice {
    int64_t dp, unit, seq, idx, begin, end, cp;
    char passes[4];
} raw_slice;

static int cmp_raw(const void *a, const void *b) {
    const raw_slice *x = a, *y = b;
    if (x->idx != y->idx) return x->idx < y->idx ? -1 : 1;
    if (x->dp != y->dp) return x->dp < y->dp ? -1 : 1;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* The raw rows of one step (lt_store_check_rows' working set). */
typedef struct raw_step {
    size_t n;                    /* samples */
    int64_t *len, *dp, *ids;     /* [n] step_samples by idx */
    int64_t *mcp;                /* [n] the sample's DP-Merge cp, 1 when not merged */
    size_t *mpos;                /* [n] merged: the position in pipes of the group's first member */
    int64_t *pipes;              /* [n_pipes] the pipelines' dp_ranks, increasing */
    size_t n_pipes;
    raw_slice *sl;               /* units_slices rows */
    size_t ns;
} raw_step;

static void raw_step_free(raw_step *r) {
    free(r->len);
    free(r->dp);
    free(r->ids);
    free(r->mcp);
    free(r->mpos);
    free(r->pipes);
    free(r->sl);
}

/* The position of dp_rank in r->pipes, or r->n_pipes. */
static size_t raw_pipe(const raw_step *r, int64_t dp_rank) {
    size_t lo = 0, hi = r->n_pipes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->pipes[mid] < dp_rank) lo = mid + 1;
        else hi = mid;
    }
    return lo < r->n_pipes && r->pipes[lo] == dp_rank ? lo : r->n_pipes;
}

/* Whether dp_rank is one of the pipelines that train sample idx (its own, or its group's). */
static bool raw_member(const raw_step *r, int64_t idx, int64_t dp_rank) {
    if (r->mcp[idx] == 1) return dp_rank == r->dp[idx];
    size_t k = raw_pipe(r, dp_rank);
    return k < r->n_pipes && k >= r->mpos[idx] && k < r->mpos[idx] + (size_t)r->mcp[idx];
}

/* Per pass, the rows v[0..m) (sorted by cmp_raw) against the samples: each sample covered
 * exactly once on each of its pipelines, the pipelines of a group with equal ranges. */
static lt_status raw_coverage(lt_store *st, uint64_t step, const raw_step *r, const raw_slice *v, size_t m,
                              const char *pass, lt_error *err) {
    size_t j = 0;
    for (size_t smp = 0; smp < r->n; smp++) {
        const bool merged = r->mcp[smp] > 1;
        const size_t members = merged ? (size_t)r->mcp[smp] : 1;
        size_t first_j = j, first_n = 0; /* the first member's rows, for the comparison */
        for (size_t k = 0; k < members; k++) {
            const int64_t want_dp = merged ? r->pipes[r->mpos[smp] + k] : r->dp[smp];
            char on[48] = "";
            if (merged) snprintf(on, sizeof on, " on dp_rank %" PRId64, want_dp);
            int64_t next = 0;
            const size_t j0 = j;
            for (; j < m && v[j].idx == (int64_t)smp && v[j].dp == want_dp; j++) {
                if (v[j].begin > next)
                    return step_fail(err, st->path, step,
                                     "table units_slices: tokens [%" PRId64 ", %" PRId64 ") of sample idx %zu "
                                     "(sample_id %" PRId64 ") are not covered in the %s pass%s",
                                     next, v[j].begin, smp, r->ids[smp], pass, on);
                if (v[j].begin < next)
                    return step_fail(err, st->path, step,
                                     "table units_slices: tokens [%" PRId64 ", %" PRId64 ") of sample idx %zu "
                                     "(sample_id %" PRId64 ") are covered twice in the %s pass%s (row dp_rank %" PRId64
                                     ", unit %" PRId64 ", seq %" PRId64 ")",
                                     v[j].begin, v[j].end < next ? v[j].end : next, smp, r->ids[smp], pass, on,
                                     v[j].dp, v[j].unit, v[j].seq);
                next = v[j].end;
            }
            if (next != r->len[smp])
                return step_fail(err, st->path, step,
                                 "table units_slices: sample idx %zu (sample_id %" PRId64 ") has %" PRId64
                                 " tokens, the %s pass covers [0, %" PRId64 ")%s",
                                 smp, r->ids[smp], r->len[smp], pass, next, on);
            if (k == 0) {
                first_n = j - j0;
            } else {
                bool same = j - j0 == first_n;
                for (size_t i = 0; same && i < first_n; i++)
                    same = v[j0 + i].begin == v[first_j + i].begin && v[j0 + i].end == v[first_j + i].end;
                if (!same)
                    return step_fail(err, st->path, step,
                                     "table units_slices: DP-merged sample idx %zu (sample_id %" PRId64 ") has other "
                                     "token ranges on dp_rank %" PRId64 " than on dp_rank %" PRId64
                                     " in the %s pass (the members of a group hold the same slices)",
                                     smp, r->ids[smp], want_dp, r->pipes[r->mpos[smp]], pass);
            }
        }
    }
    return LT_OK;
}

lt_status lt_store_check_rows(lt_store *st, uint64_t step, lt_error *err) {
    if (step > (uint64_t)INT64_MAX) return not_stored(st, step, err);
    sqlite3_stmt *q;
    lt_status s;
    int rc;
    int64_t want_samples = 0, want_tokens = 0, want_predicted = 0;
    if ((s = query(st, Q_GET_STEP, &q, err)) != LT_OK) return s;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    rc = step_row(st, q, "steps", &s, err);
    if (rc == SQLITE_ROW) {
        want_samples = sqlite3_column_int64(q, 1);
        want_tokens = sqlite3_column_int64(q, 2);
        want_predicted = sqlite3_column_int64(q, 11);
    }
    sqlite3_reset(q);
    if (rc == SQLITE_DONE) return not_stored(st, step, err);
    if (rc != SQLITE_ROW) return s;

    /* the samples: count, sum, length and dp_rank by idx */
    raw_step R;
    memset(&R, 0, sizeof R);
    size_t cap = 0, scap = 0, pcap = 0;
    int64_t tokens = 0, predicted = 0;
    raw_slice *v = NULL;
    if ((s = query(st, Q_GET_SAMPLES, &q, err)) != LT_OK) return s;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    while ((rc = step_row(st, q, "step_samples", &s, err)) == SQLITE_ROW) {
        if (R.n == cap) {
            cap = cap ? 2 * cap : 512;
            R.len = lt_realloc_check(R.len, cap * sizeof *R.len);
            R.dp = lt_realloc_check(R.dp, cap * sizeof *R.dp);
            R.ids = lt_realloc_check(R.ids, cap * sizeof *R.ids);
        }
        if (sqlite3_column_int64(q, 0) != (int64_t)R.n) {
            s = step_fail(err, st->path, step, "table step_samples: row idx %" PRId64 " where idx %zu comes next",
                          (int64_t)sqlite3_column_int64(q, 0), R.n);
            goto out;
        }
        R.ids[R.n] = sqlite3_column_int64(q, 1);
        R.len[R.n] = sqlite3_column_int64(q, 2);
        R.dp[R.n] = sqlite3_column_int64(q, 3);
        if (R.len[R.n] < 1 || __builtin_add_overflow(tokens, R.len[R.n], &tokens)) {
            s = step_fail(err, st->path, step,
                          "table step_samples: row idx %zu has length %" PRId64 "%s", R.n, R.len[R.n],
                          R.len[R.n] < 1 ? " (at least 1 expected)" : ", the step's lengths sum past 2^63");
            goto out;
        }
        predicted += R.len[R.n] - 1;
        R.n++;
    }
    if (rc != SQLITE_DONE) goto out;
    sqlite3_reset(q);
    if ((int64_t)R.n != want_samples) {
        s = step_fail(err, st->path, step, "step_summary says n_samples %" PRId64 ", table step_samples has %zu rows",
                      want_samples, R.n);
        goto out;
    }
    if (tokens != want_tokens) {
        s = step_fail(err, st->path, step,
                      "step_summary says n_tokens %" PRId64 ", the samples' lengths sum to %" PRId64, want_tokens,
                      tokens);
        goto out;
    }
    if (predicted != want_predicted) {
        s = step_fail(err, st->path, step,
                      "step_summary says n_predicted %" PRId64 ", the samples' lengths give %" PRId64
                      " (sum of length - 1: the loss denominator)",
                      want_predicted, predicted);
        goto out;
    }

    /* the pipelines' dp_ranks (increasing), for the groups */
    if ((s = query(st, Q_GET_PIPELINES, &q, err)) != LT_OK) goto out;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    while ((rc = step_row(st, q, "pipelines", &s, err)) == SQLITE_ROW) {
        if (R.n_pipes == pcap) {
            pcap = pcap ? 2 * pcap : 16;
            R.pipes = lt_realloc_check(R.pipes, pcap * sizeof *R.pipes);
        }
        R.pipes[R.n_pipes++] = sqlite3_column_int64(q, 0);
    }
    if (rc != SQLITE_DONE) goto out;
    sqlite3_reset(q);

    /* the DP-Merge groups */
    R.mcp = lt_malloc_check((R.n ? R.n : 1) * sizeof *R.mcp);
    R.mpos = lt_calloc_check(R.n ? R.n : 1, sizeof *R.mpos);
    for (size_t i = 0; i < R.n; i++) R.mcp[i] = 1;
    if ((s = query(st, Q_GET_MERGES, &q, err)) != LT_OK) goto out;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    while ((rc = step_row(st, q, "dp_merges", &s, err)) == SQLITE_ROW) {
        int64_t idx = sqlite3_column_int64(q, 0), id = sqlite3_column_int64(q, 1), dp = sqlite3_column_int64(q, 2),
                cp = sqlite3_column_int64(q, 3);
        if (idx < 0 || (uint64_t)idx >= R.n) {
            s = step_fail(err, st->path, step, "table dp_merges: row sample idx %" PRId64 ", the step has %zu samples",
                          idx, R.n);
            goto out;
        }
        if (id != R.ids[idx]) {
            s = step_fail(err, st->path, step,
                          "table dp_merges: sample idx %" PRId64 " has sample_id %" PRId64 ", step_samples says %" PRId64,
                          idx, id, R.ids[idx]);
            goto out;
        }
        if (dp != R.dp[idx]) {
            s = step_fail(err, st->path, step,
                          "table dp_merges: sample idx %" PRId64 " (sample_id %" PRId64 ") is merged from dp_rank %" PRId64
                          ", step_samples puts it on dp_rank %" PRId64,
                          idx, id, dp, R.dp[idx]);
            goto out;
        }
        size_t pos = raw_pipe(&R, dp);
        if (pos == R.n_pipes || cp < 2 || (uint64_t)cp > R.n_pipes - pos) {
            s = step_fail(err, st->path, step,
                          "table dp_merges: the group of sample idx %" PRId64 " (sample_id %" PRId64 "), %" PRId64
                          " pipelines from dp_rank %" PRId64 ", is not within the step's pipelines (%zu from there)",
                          idx, id, cp, dp, pos == R.n_pipes ? (size_t)0 : R.n_pipes - pos);
            goto out;
        }
        R.mcp[idx] = cp;
        R.mpos[idx] = pos;
    }
    if (rc != SQLITE_DONE) goto out;
    sqlite3_reset(q);

    /* the slices: each on a pipeline of its sample, with its sample's cp */
    if ((s = query(st, Q_GET_SLICES, &q, err)) != LT_OK) goto out;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    while ((rc = step_row(st, q, "units_slices", &s, err)) == SQLITE_ROW) {
        if (R.ns == scap) {
            scap = scap ? 2 * scap : 1024;
            R.sl = lt_realloc_check(R.sl, scap * sizeof *R.sl);
        }
        raw_slice *r = &R.sl[R.ns++];
        r->dp = sqlite3_column_int64(q, 0);
        snprintf(r->passes, sizeof r->passes, "%s",
                 sqlite3_column_text(q, 1) ? (const char *)sqlite3_column_text(q, 1) : "");
        r->unit = sqlite3_column_int64(q, 2);
        r->seq = sqlite3_column_int64(q, 3);
        r->idx = sqlite3_column_int64(q, 4);
        r->begin = sqlite3_column_int64(q, 5);
        r->end = sqlite3_column_int64(q, 6);
        r->cp = sqlite3_column_int64(q, 7);
#define ROW_FAIL(...)                                     \
    do {                                                  \
        s = step_fail(err, st->path, step, __VA_ARGS__); \
        goto out;                                         \
    } while (0)
        if (r->idx < 0 || (uint64_t)r->idx >= R.n)
            ROW_FAIL("table units_slices: row (dp_rank %" PRId64 ", passes %s, unit %" PRId64 ", seq %" PRId64
                     ") names sample idx %" PRId64 ", the step has %zu samples",
                     r->dp, r->passes, r->unit, r->seq, r->idx, R.n);
        const int64_t gcp = R.mcp[r->idx];
        if (!raw_member(&R, r->idx, r->dp)) {
            if (gcp == 1)
                ROW_FAIL("table units_slices: row (dp_rank %" PRId64 ", passes %s, unit %" PRId64 ", seq %" PRId64
                         ") holds tokens of sample idx %" PRId64 ", which step_samples puts on dp_rank %" PRId64,
                         r->dp, r->passes, r->unit, r->seq, r->idx, R.dp[r->idx]);
            ROW_FAIL("table units_slices: row (dp_rank %" PRId64 ", passes %s, unit %" PRId64 ", seq %" PRId64
                     ") holds tokens of sample idx %" PRId64 ", which dp_merges merges over the %" PRId64
                     " pipelines from dp_rank %" PRId64,
                     r->dp, r->passes, r->unit, r->seq, r->idx, gcp, R.dp[r->idx]);
        }
        if (r->cp != gcp) {
            if (gcp == 1)
                ROW_FAIL("table units_slices: row (dp_rank %" PRId64 ", passes %s, unit %" PRId64 ", seq %" PRId64
                         ") has cp %" PRId64 ", but sample idx %" PRId64 " (sample_id %" PRId64
                         ") is not DP-merged (no dp_merges row: cp 1)",
                         r->dp, r->passes, r->unit, r->seq, r->cp, r->idx, R.ids[r->idx]);
            ROW_FAIL("table units_slices: row (dp_rank %" PRId64 ", passes %s, unit %" PRId64 ", seq %" PRId64
                     ") has cp %" PRId64 ", but sample idx %" PRId64 " (sample_id %" PRId64
                     ") is DP-merged with cp %" PRId64,
                     r->dp, r->passes, r->unit, r->seq, r->cp, r->idx, R.ids[r->idx], gcp);
        }
#undef ROW_FAIL
    }
    if (rc != SQLITE_DONE) goto out;
    sqlite3_reset(q);

    static const char *const pass_name[2] = {"forward", "backward"};
    v = lt_malloc_check((R.ns ? R.ns : 1) * sizeof *v);
    for (int pass = 0; pass < 2 && s == LT_OK; pass++) {
        size_t m = 0;
        for (size_t i = 0; i < R.ns; i++)
            if (strchr(R.sl[i].passes, pass == 0 ? 'F' : 'B')) v[m++] = R.sl[i];
        qsort(v, m, sizeof *v, cmp_raw);
        s = raw_coverage(st, step, &R, v, m, pass_name[pass], err);
    }
out:
    sqlite3_reset(q);
    free(v);
    raw_step_free(&R);
    return s;
}

/* ------------------------------------------------------------------ measured (lt_store_put_measured) */

/* The trainer's tables: added to a version-3 file on first use, so the schema version and
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
    lt_status s = check_schema_version(path, err);
    sqlite3 *db = NULL;
    if (s == LT_OK) s = lt_db_open(&db, path, &plan_schema, 0, err);
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
