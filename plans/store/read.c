/*
 * plans/store/read.c — reading a plan database back: the stored steps (lt_store_steps) and
 * one step's plan and samples (lt_store_get_step), every row checked for what the plan
 * needs (store.h lists the refusals).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "plans/store/internal.h" /* store_query, store_step_row, store_step_fail, store_parse_stage_ops */

lt_status lt_store_steps(lt_store *st, uint64_t **steps, size_t *n, lt_error *err) {
    *steps = NULL;
    *n = 0;
    sqlite3_stmt *q;
    lt_status s = store_query(st, Q_STEP_LIST, &q, err);
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

lt_status lt_store_count_strategy(lt_store *st, const char *strategy, int64_t *n, lt_error *err) {
    *n = 0;
    sqlite3_stmt *q;
    lt_status s = store_query(st, Q_STEP_STRATEGY_COUNT, &q, err);
    if (s != LT_OK) return s;
    sqlite3_bind_text(q, 2, strategy, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW) *n = sqlite3_column_int64(q, 0);
    else s = lt_db_fail(st->db, err, "cannot read table steps");
    sqlite3_reset(q);
    return s;
}

/* LT_ERR_INPUT for step `step` not stored, with the stored range as the hint. */
lt_status store_not_stored(lt_store *st, uint64_t step, lt_error *err) {
    sqlite3_stmt *q;
    lt_status s = store_query(st, Q_STEP_RANGE, &q, err);
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
            s = store_step_fail(err, path, step,
                                "table units_slices: dp_rank %d passes %s unit %" PRId64 " seq %" PRId64
                                ": slice %" PRId64 " (the pass's %zu rows hold slices 0 .. %zu, each once)",
                                dp_rank, passes, w->unit, w->seq, w->slice, n, n ? n - 1 : 0);
        else if (w->seq > 0 && w->slice != pr->v[i - 1].slice + 1)
            s = store_step_fail(err, path, step,
                                "table units_slices: dp_rank %d passes %s unit %" PRId64 " seq %" PRId64
                                ": slice %" PRId64 " after slice %" PRId64 " (a unit's slices are consecutive in "
                                "the slice table)",
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
#define ROWS_BAD(...)                                          \
    do {                                                       \
        s = store_step_fail(err, st->path, step, __VA_ARGS__); \
        goto out;                                              \
    } while (0)
    sqlite3_stmt *q;
    lt_status s = store_query(st, Q_GET_SLICES, &q, err);
    if (s != LT_OK) return s;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    int cur = -1;
    int64_t cur_unit = -1, next_seq = 0;
    char cur_pass[3] = "";
    bool saw_fb = false, saw_f = false, saw_b = false;
    pass_rows pr = {0};
    for (;;) {
        int rc = store_step_row(st, q, "units_slices", &s, err);
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
#define BAD(...)                                               \
    do {                                                       \
        s = store_step_fail(err, st->path, step, __VA_ARGS__); \
        goto done;                                             \
    } while (0)

    /* steps */
    if ((s = store_query(st, Q_GET_STEP, &q, err)) != LT_OK) return s;
    sqlite3_bind_int64(q, 2, st_step);
    rc = store_step_row(st, q, "steps", &s, err);
    if (rc == SQLITE_DONE) {
        sqlite3_reset(q);
        return store_not_stored(st, step, err);
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
    if ((s = store_query(st, Q_GET_PIPELINES, &q, err)) != LT_OK) goto done;
    sqlite3_bind_int64(q, 2, st_step);
    size_t cap = 0;
    while ((rc = store_step_row(st, q, "pipelines", &s, err)) == SQLITE_ROW) {
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
    if ((s = store_query(st, Q_GET_SAMPLES, &q, err)) != LT_OK) goto done;
    sqlite3_bind_int64(q, 2, st_step);
    size_t rows = 0;
    while ((rc = store_step_row(st, q, "step_samples", &s, err)) == SQLITE_ROW) {
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
    if ((s = store_query(st, Q_GET_MERGES, &q, err)) != LT_OK) goto done;
    sqlite3_bind_int64(q, 2, st_step);
    size_t cap_m = 0;
    while ((rc = store_step_row(st, q, "dp_merges", &s, err)) == SQLITE_ROW) {
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
    if ((s = store_query(st, Q_GET_STAGES, &q, err)) != LT_OK) goto done_pred;
    sqlite3_bind_int64(q, 2, st_step);
    rows = 0;
    while ((rc = store_step_row(st, q, "stages", &s, err)) == SQLITE_ROW) {
        int64_t dp = sqlite3_column_int64(q, 0), g = sqlite3_column_int64(q, 1);
        size_t r = rows / (size_t)st->pp;
        if (r >= p->n_ranks || p->ranks[r].dp_rank != dp || g != (int64_t)(rows % (size_t)st->pp)) {
            s = store_step_fail(err, st->path, step,
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
            s = store_step_fail(err, st->path, step,
                                "table stages: dp_rank %" PRId64 " stage %" PRId64 " has layers [%" PRId64 ", %" PRId64
                                "), stage %" PRId64 " of %d over %d layers is [%u, %u)",
                                dp, g, have_lb, have_le, g, st->pp, st->layers, lb, le);
            goto done_pred;
        }
        const char *text = (const char *)sqlite3_column_text(q, 7);
        size_t len = (size_t)sqlite3_column_bytes(q, 7);
        ops_where at = {st->path, step, dp, (int)g};
        if ((s = store_parse_stage_ops(&at, text, len, sqlite3_column_int64(q, 6), lb, le, &p->ranks[r].sched, &pred[r],
                                       err)) != LT_OK)
            goto done_pred;
        rows++;
    }
    if (rc != SQLITE_DONE) goto done_pred;
    sqlite3_reset(q);
    if (rows != p->n_ranks * (size_t)st->pp) {
        s = store_step_fail(err, st->path, step, "table stages: %zu rows for %zu pipelines of %d stages", rows,
                            p->n_ranks, st->pp);
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
    if (step > (uint64_t)INT64_MAX) return store_not_stored(st, step, err);
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
