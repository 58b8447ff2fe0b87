/*
 * plans/store/internal.h — what the plan store's files share (internal to plans/store/).
 *
 * The files, each calling only the ones below it in this list (no two call each other):
 *   validate.c   the plan invariants and `planner show`'s printing (validate.h), through
 *                store.h only
 *   checks.c     the raw-row checks of a stored step (lt_store_check_rows)
 *   read.c       reading steps back (lt_store_steps, lt_store_get_step)
 *   write.c      writing steps (lt_store_put_step, lt_store_has_step), rows in batches
 *   ops_text.c   the ops encoding of stages.ops: the encoder and the strict parser
 *   store.c      the lt_store object: begin / commit / abort (a temporary file renamed
 *                over the target), open / close, the run row; the prepared statements
 *                and the error helpers the files above share
 *   measured.c   the trainer's measured times (lt_store_put_measured)
 *   sources.c    the documents' named sources (lt_store_put_sources, lt_store_sample_sources)
 *   heldout.c    the held-out documents (lt_store_put_heldout, lt_store_heldout)
 *   config.c     whether a stored run is the run a build resumes (the configs compared)
 *   schema.c     the tables and views, their migrations, the schema version check
 */
#ifndef LT_STORE_INTERNAL_H
#define LT_STORE_INTERNAL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/db.h"            /* lt_db_schema, lt_db_open, lt_db_exec, lt_db_prepare, lt_db_fail */
#include "lib/error.h"         /* lt_status, lt_error */
#include "plans/store/store.h" /* lt_store, lt_run_info, lt_step_plan */

/* The run of every file this code writes (store.h: one run per file). */
#define RUN_ID 1

/* An op time as read back from its stored nanoseconds (plans/store/ops_text.c); op times
 * are stored only within +-MAX_OP_TIME_S (their nanoseconds fit 18 digits). */
#define MAX_OP_TIME_S 1e9
static inline double ns_to_s(int64_t ns) { return (double)ns / 1e9; }

/* ---------------------------------------------------------------- the store (store.c) */

/* The prepared statements (store.c's query_sql), made on first use and kept until the
 * store closes. */
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
    Q_STEP_STRATEGY_COUNT,
    Q_GET_STEP,
    Q_GET_PIPELINES,
    Q_GET_STAGES,
    Q_GET_SAMPLES,
    Q_GET_SLICES,
    Q_GET_MERGES,
    Q_RUN,
    Q_COUNT
};

/* Multi-row inserts for the two big tables (write.c): a batcher holds up to BATCH pending
 * rows of one table and the statement that inserts BATCH rows at once. Here because the
 * store makes them and finalizes their statements. */
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

/* Statement `which`, made on first use; reset, its bindings cleared and ?1 bound to the run. */
lt_status store_query(lt_store *st, int which, sqlite3_stmt **out, lt_error *err);

/* Step a reading query; SQLITE_ROW or SQLITE_DONE, else an I/O error is filled. */
int store_step_row(lt_store *st, sqlite3_stmt *q, const char *table, lt_status *s, lt_error *err);

/* LT_ERR_INPUT "step N: WHAT" naming the file. */
lt_status store_step_fail(lt_error *err, const char *path, uint64_t step, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---------------------------------------------------------------- the ops encoding (ops_text.c) */

/* A growing array of op predictions for one pipeline. */
typedef struct pred_buf {
    lt_plan_op *v;
    size_t n, cap;
} pred_buf;

/* Where an op list comes from, for messages. */
typedef struct ops_where {
    const char *path;
    uint64_t step;
    int64_t dp_rank;
    int stage;
} ops_where;

/* Format stage g's op list (predictions po[0..n)) into st->json; returns its length. */
size_t store_format_stage_ops(lt_store *st, const lt_schedule *sc, int g, const lt_plan_op *po, double pipe_s);

/* Parse the op list of one stage (text[0..len), n_ops elements, the stage's layer block
 * [lb, le)) onto stage at->stage of sc and its predictions onto pb. */
lt_status store_parse_stage_ops(const ops_where *at, const char *text, size_t len, int64_t n_ops, uint32_t lb,
                                uint32_t le, lt_schedule *sc, pred_buf *pb, lt_error *err);

/* ---------------------------------------------------------------- reading (read.c) */

/* LT_ERR_INPUT for step `step` not stored, with the stored range as the hint. */
lt_status store_not_stored(lt_store *st, uint64_t step, lt_error *err);

/* ---------------------------------------------------------------- resuming (config.c) */

/* Whether the stored run `have` is the run `run` resumes: the plan-relevant config values,
 * fingerprint, strategy, sample policy and tuning. LT_ERR_CONFIG naming the first
 * difference, WHERE path. */
lt_status store_same_run(const lt_run_info *have, const lt_run_info *run, const char *path, lt_error *err);

/* ---------------------------------------------------------------- the schema (schema.c) */

/* The plan database's schema for lt_db_open (its migrations make version 4). */
extern const lt_db_schema store_plan_schema;

/* LT_ERR_VERSION naming path when it is a plan file of an older schema version (refused,
 * not migrated); LT_OK for anything else, which lt_db_open then judges. */
lt_status store_check_schema_version(const char *path, lt_error *err);

#endif /* LT_STORE_INTERNAL_H */
