/*
 * plans/store/write.c — writing a step's plan (lt_store_put_step) on a store that
 * lt_store_begin opened, and asking whether a step is stored (lt_store_has_step).
 *
 * Writing is the hot path of `planner build` (10,000 steps in well under a minute on 2
 * cores; a ChunkFlow step at 128K context has ~1,650 rows and ~7,600 ops), so: one
 * transaction, prepared statements kept for the whole run, rows inserted in primary-key
 * order (every keyed table is keyed by (run_id, step, ...), so a step's rows append at the
 * right edge of each B-tree), multi-row inserts for the two big tables, integers where the
 * value is one, and each stage's op list as one text (plans/store/ops_text.c). The file has
 * no journal while it is written (plans/store/store.c), so a failed statement cannot be
 * rolled back: a put that fails half-way marks the store failed, and commit then refuses.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plans/store/internal.h" /* store_query, store_format_stage_ops, the batches */

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

/* Multi-row inserts for the two big tables (samples and slices: ~1,100 to ~1,600 of a
 * step's rows): BATCH rows per INSERT statement halve the per-row cost of stepping a
 * statement. A step's rows are flushed at the end of its put; the remainder (< BATCH rows
 * per table) goes through the single-row statements. Rows keep their key order. */
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

static inline void cell_int(cell *c, int64_t v) { c->type = C_INT, c->i = v; }
static inline void cell_text(cell *c, const char *v) { c->type = C_TEXT, c->t = v; }

static void bind_cell(sqlite3_stmt *q, int i, const cell *c) {
    if (c->type == C_INT) sqlite3_bind_int64(q, i, c->i);
    else sqlite3_bind_text(q, i, c->t, -1, SQLITE_STATIC);
}

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
            if ((s = store_query(st, batch_def[b].one, &q, err)) != LT_OK) break;
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

lt_status lt_store_has_step(lt_store *st, uint64_t step, bool *has, lt_error *err) {
    *has = false;
    if (step > (uint64_t)INT64_MAX) return LT_OK;
    sqlite3_stmt *q;
    lt_status s = store_query(st, Q_HAS_STEP, &q, err);
    if (s != LT_OK) return s;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) *has = true;
    else if (rc != SQLITE_DONE) s = lt_db_fail(st->db, err, "cannot read table steps");
    sqlite3_reset(q);
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

    if ((s = store_query(st, Q_INS_STEP, &q, err)) != LT_OK) return s;
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
        if ((s = store_query(st, Q_INS_PIPELINE, &q, err)) != LT_OK) return s;
        sqlite3_bind_int64(q, 2, step);
        sqlite3_bind_int(q, 3, rp->dp_rank);
        sqlite3_bind_int(q, 4, rp->cp);
        sqlite3_bind_double(q, 5, rp->time_s * 1e3);
        if ((s = run_insert(st, q, "pipelines", p->step, err)) != LT_OK) return s;

        /* the stages, each with its op list as one JSON text (the ops encoding, ops_text.c) */
        if ((s = store_query(st, Q_INS_STAGE, &q, err)) != LT_OK) return s;
        sqlite3_bind_int64(q, 2, step);
        sqlite3_bind_int(q, 3, rp->dp_rank);
        size_t id = 0;
        for (int g = 0; g < sc->stages; g++) {
            uint32_t lb, le;
            lt_schedule_stage_layers(sc->layers, sc->stages, g, &lb, &le);
            size_t len = store_format_stage_ops(st, sc, g, rp->ops ? rp->ops + id : NULL, rp->time_s);
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
        if ((s = store_query(st, Q_INS_MERGE, &q, err)) != LT_OK) return s;
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
