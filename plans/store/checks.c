/*
 * plans/store/checks.c — the raw-row checks of one stored step (lt_store_check_rows), which
 * lt_store_validate runs before it reads the step back, so that a broken row is named as
 * such rather than as whatever the reader would make of it.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "plans/store/internal.h" /* store_query, store_step_row, store_step_fail, store_not_stored */

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
                    return store_step_fail(err, st->path, step,
                                           "table units_slices: tokens [%" PRId64 ", %" PRId64 ") of sample idx %zu "
                                           "(sample_id %" PRId64 ") are not covered in the %s pass%s",
                                           next, v[j].begin, smp, r->ids[smp], pass, on);
                if (v[j].begin < next)
                    return store_step_fail(err, st->path, step,
                                           "table units_slices: tokens [%" PRId64 ", %" PRId64 ") of sample idx %zu "
                                           "(sample_id %" PRId64 ") are covered twice in the %s pass%s "
                                           "(row dp_rank %" PRId64 ", unit %" PRId64 ", seq %" PRId64 ")",
                                           v[j].begin, v[j].end < next ? v[j].end : next, smp, r->ids[smp], pass, on,
                                           v[j].dp, v[j].unit, v[j].seq);
                next = v[j].end;
            }
            if (next != r->len[smp])
                return store_step_fail(err, st->path, step,
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
                    return store_step_fail(err, st->path, step,
                                           "table units_slices: DP-merged sample idx %zu (sample_id %" PRId64 ") "
                                           "has other token ranges on dp_rank %" PRId64 " than on dp_rank %" PRId64
                                           " in the %s pass (the members of a group hold the same slices)",
                                           smp, r->ids[smp], want_dp, r->pipes[r->mpos[smp]], pass);
            }
        }
    }
    return LT_OK;
}

lt_status lt_store_check_rows(lt_store *st, uint64_t step, lt_error *err) {
    if (step > (uint64_t)INT64_MAX) return store_not_stored(st, step, err);
    sqlite3_stmt *q;
    lt_status s;
    int rc;
    int64_t want_samples = 0, want_tokens = 0, want_predicted = 0;
    if ((s = store_query(st, Q_GET_STEP, &q, err)) != LT_OK) return s;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    rc = store_step_row(st, q, "steps", &s, err);
    if (rc == SQLITE_ROW) {
        want_samples = sqlite3_column_int64(q, 1);
        want_tokens = sqlite3_column_int64(q, 2);
        want_predicted = sqlite3_column_int64(q, 11);
    }
    sqlite3_reset(q);
    if (rc == SQLITE_DONE) return store_not_stored(st, step, err);
    if (rc != SQLITE_ROW) return s;

    /* the samples: count, sum, length and dp_rank by idx */
    raw_step R;
    memset(&R, 0, sizeof R);
    size_t cap = 0, scap = 0, pcap = 0;
    int64_t tokens = 0, predicted = 0;
    raw_slice *v = NULL;
    if ((s = store_query(st, Q_GET_SAMPLES, &q, err)) != LT_OK) return s;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    while ((rc = store_step_row(st, q, "step_samples", &s, err)) == SQLITE_ROW) {
        if (R.n == cap) {
            cap = cap ? 2 * cap : 512;
            R.len = lt_realloc_check(R.len, cap * sizeof *R.len);
            R.dp = lt_realloc_check(R.dp, cap * sizeof *R.dp);
            R.ids = lt_realloc_check(R.ids, cap * sizeof *R.ids);
        }
        if (sqlite3_column_int64(q, 0) != (int64_t)R.n) {
            s = store_step_fail(err, st->path, step, "table step_samples: row idx %" PRId64 " where idx %zu comes next",
                                (int64_t)sqlite3_column_int64(q, 0), R.n);
            goto out;
        }
        R.ids[R.n] = sqlite3_column_int64(q, 1);
        R.len[R.n] = sqlite3_column_int64(q, 2);
        R.dp[R.n] = sqlite3_column_int64(q, 3);
        if (R.len[R.n] < 1 || __builtin_add_overflow(tokens, R.len[R.n], &tokens)) {
            s = store_step_fail(err, st->path, step, "table step_samples: row idx %zu has length %" PRId64 "%s",
                                R.n, R.len[R.n],
                                R.len[R.n] < 1 ? " (at least 1 expected)" : ", the step's lengths sum past 2^63");
            goto out;
        }
        predicted += R.len[R.n] - 1;
        R.n++;
    }
    if (rc != SQLITE_DONE) goto out;
    sqlite3_reset(q);
    if ((int64_t)R.n != want_samples) {
        s = store_step_fail(err, st->path, step,
                            "step_summary says n_samples %" PRId64 ", table step_samples has %zu rows",
                            want_samples, R.n);
        goto out;
    }
    if (tokens != want_tokens) {
        s = store_step_fail(err, st->path, step,
                            "step_summary says n_tokens %" PRId64 ", the samples' lengths sum to %" PRId64,
                            want_tokens, tokens);
        goto out;
    }
    if (predicted != want_predicted) {
        s = store_step_fail(err, st->path, step,
                            "step_summary says n_predicted %" PRId64 ", the samples' lengths give %" PRId64
                            " (sum of length - 1: the loss denominator)",
                            want_predicted, predicted);
        goto out;
    }

    /* the pipelines' dp_ranks (increasing), for the groups */
    if ((s = store_query(st, Q_GET_PIPELINES, &q, err)) != LT_OK) goto out;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    while ((rc = store_step_row(st, q, "pipelines", &s, err)) == SQLITE_ROW) {
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
    if ((s = store_query(st, Q_GET_MERGES, &q, err)) != LT_OK) goto out;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    while ((rc = store_step_row(st, q, "dp_merges", &s, err)) == SQLITE_ROW) {
        int64_t idx = sqlite3_column_int64(q, 0), id = sqlite3_column_int64(q, 1), dp = sqlite3_column_int64(q, 2),
                cp = sqlite3_column_int64(q, 3);
        if (idx < 0 || (uint64_t)idx >= R.n) {
            s = store_step_fail(err, st->path, step,
                                "table dp_merges: row sample idx %" PRId64 ", the step has %zu samples", idx, R.n);
            goto out;
        }
        if (id != R.ids[idx]) {
            s = store_step_fail(err, st->path, step,
                                "table dp_merges: sample idx %" PRId64 " has sample_id %" PRId64
                                ", step_samples says %" PRId64,
                                idx, id, R.ids[idx]);
            goto out;
        }
        if (dp != R.dp[idx]) {
            s = store_step_fail(err, st->path, step,
                                "table dp_merges: sample idx %" PRId64 " (sample_id %" PRId64
                                ") is merged from dp_rank %" PRId64 ", step_samples puts it on dp_rank %" PRId64,
                                idx, id, dp, R.dp[idx]);
            goto out;
        }
        size_t pos = raw_pipe(&R, dp);
        if (pos == R.n_pipes || cp < 2 || (uint64_t)cp > R.n_pipes - pos) {
            s = store_step_fail(err, st->path, step,
                                "table dp_merges: the group of sample idx %" PRId64 " (sample_id %" PRId64 "), %" PRId64
                                " pipelines from dp_rank %" PRId64 ", is not within the step's pipelines "
                                "(%zu from there)",
                                idx, id, cp, dp, pos == R.n_pipes ? (size_t)0 : R.n_pipes - pos);
            goto out;
        }
        R.mcp[idx] = cp;
        R.mpos[idx] = pos;
    }
    if (rc != SQLITE_DONE) goto out;
    sqlite3_reset(q);

    /* the slices: each on a pipeline of its sample, with its sample's cp */
    if ((s = store_query(st, Q_GET_SLICES, &q, err)) != LT_OK) goto out;
    sqlite3_bind_int64(q, 2, (int64_t)step);
    while ((rc = store_step_row(st, q, "units_slices", &s, err)) == SQLITE_ROW) {
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
#define ROW_FAIL(...)                                          \
    do {                                                       \
        s = store_step_fail(err, st->path, step, __VA_ARGS__); \
        goto out;                                              \
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
