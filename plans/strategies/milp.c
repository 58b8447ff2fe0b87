/*
 * plans/strategies/milp.c — the MILP wrapper over CBC's C interface (plans/strategies/milp.h states the contract
 * and the status mapping; docs/milp.md the details).
 *
 * Flow: validate the arrays (no lock) -> take the process-wide lock -> transpose the rows
 * into the compressed-column form Cbc_loadProblem takes -> set bounds, integrality, sense,
 * options, warm start -> Cbc_solve -> map the status, check and copy the solution -> free
 * the model -> unlock.
 */
#include "plans/strategies/milp.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <Cbc_C_Interface.h> /* Cbc_newModel, Cbc_loadProblem, Cbc_solve, Cbc_is*, ... */

/* CBC's driver (CbcMain1 under Cbc_solve) keeps static state: one solve at a time. */
static pthread_mutex_t milp_lock = PTHREAD_MUTEX_INITIALIZER;

const char *lt_milp_status_name(lt_milp_status s) {
    switch (s) {
    case LT_MILP_OPTIMAL: return "optimal";
    case LT_MILP_FEASIBLE: return "feasible";
    case LT_MILP_TIMEOUT: return "timeout";
    case LT_MILP_INFEASIBLE: return "infeasible";
    case LT_MILP_UNBOUNDED: return "unbounded";
    case LT_MILP_ERROR: return "error";
    }
    return "?";
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---------------------------------------------------------------- validation */

static double var_lb(const lt_milp_problem *p, int j) { return p->lb ? p->lb[j] : 0.0; }
static double var_ub(const lt_milp_problem *p, int j) { return p->ub ? p->ub[j] : LT_MILP_INF; }
static double row_lo(const lt_milp_problem *p, int r) { return p->row_lb ? p->row_lb[r] : -LT_MILP_INF; }
static double row_hi(const lt_milp_problem *p, int r) { return p->row_ub ? p->row_ub[r] : LT_MILP_INF; }

static lt_status validate(const lt_milp_problem *p, const lt_milp_options *opt, const double *x,
                          const lt_milp_result *result, lt_error *err) {
    if (!p || !opt || !x || !result)
        return lt_fail(err, LT_ERR_USAGE, "lt_milp_solve", "NULL problem, solution or result");
    if (p->n_vars < 1)
        return lt_fail(err, LT_ERR_USAGE, "lt_milp_solve", "n_vars = %d: need at least one variable",
                       p->n_vars);
    if (p->n_rows < 0)
        return lt_fail(err, LT_ERR_USAGE, "lt_milp_solve", "n_rows = %d is negative", p->n_rows);
    char where[64];
    for (int j = 0; j < p->n_vars; j++) {
        snprintf(where, sizeof where, "variable %d", j);
        double lb = var_lb(p, j), ub = var_ub(p, j);
        if (isnan(lb) || isnan(ub)) return lt_fail(err, LT_ERR_USAGE, where, "bound is NaN");
        if (lb == LT_MILP_INF) return lt_fail(err, LT_ERR_USAGE, where, "lower bound is +inf");
        if (ub == -LT_MILP_INF) return lt_fail(err, LT_ERR_USAGE, where, "upper bound is -inf");
        if (lb > ub)
            return lt_fail(err, LT_ERR_USAGE, where, "lower bound %g > upper bound %g", lb, ub);
        if (p->obj && !isfinite(p->obj[j]))
            return lt_fail(err, LT_ERR_USAGE, where, "objective coefficient %g is not finite",
                           p->obj[j]);
        if (opt->initial_solution && !isfinite(opt->initial_solution[j]))
            return lt_fail(err, LT_ERR_USAGE, where, "initial solution value %g is not finite",
                           opt->initial_solution[j]);
    }
    if (p->n_rows > 0 && (!p->row_start || !p->col_index || !p->value))
        return lt_fail(err, LT_ERR_USAGE, "lt_milp_solve",
                       "%d rows but row_start, col_index or value is NULL", p->n_rows);
    if (p->n_rows > 0 && p->row_start[0] != 0)
        return lt_fail(err, LT_ERR_USAGE, "row 0", "row_start[0] = %d, must be 0", p->row_start[0]);
    /* A column's last row seen, to catch a column repeated within one row. */
    int *seen = lt_malloc_check((size_t)p->n_vars * sizeof *seen);
    for (int j = 0; j < p->n_vars; j++) seen[j] = -1;
    lt_status st = LT_OK;
    for (int r = 0; r < p->n_rows && st == LT_OK; r++) {
        snprintf(where, sizeof where, "row %d", r);
        double lo = row_lo(p, r), hi = row_hi(p, r);
        if (isnan(lo) || isnan(hi)) st = lt_fail(err, LT_ERR_USAGE, where, "row bound is NaN");
        else if (lo == LT_MILP_INF) st = lt_fail(err, LT_ERR_USAGE, where, "row lower bound is +inf");
        else if (hi == -LT_MILP_INF) st = lt_fail(err, LT_ERR_USAGE, where, "row upper bound is -inf");
        else if (lo > hi)
            st = lt_fail(err, LT_ERR_USAGE, where, "row lower bound %g > row upper bound %g", lo, hi);
        else if (p->row_start[r + 1] < p->row_start[r])
            st = lt_fail(err, LT_ERR_USAGE, where, "row_start[%d] = %d < row_start[%d] = %d", r + 1,
                         p->row_start[r + 1], r, p->row_start[r]);
        for (int k = p->row_start[r]; k < p->row_start[r + 1] && st == LT_OK; k++) {
            int j = p->col_index[k];
            if (j < 0 || j >= p->n_vars)
                st = lt_fail(err, LT_ERR_USAGE, where, "column index %d (entry %d) out of [0, %d)", j,
                             k, p->n_vars);
            else if (!isfinite(p->value[k]))
                st = lt_fail(err, LT_ERR_USAGE, where, "coefficient of variable %d is %g", j,
                             p->value[k]);
            else if (seen[j] == r)
                st = lt_fail(err, LT_ERR_USAGE, where, "variable %d appears twice", j);
            else seen[j] = r;
        }
    }
    free(seen);
    if (st != LT_OK) return st;
    if (opt->max_nodes < 0)
        return lt_fail(err, LT_ERR_USAGE, "lt_milp_options", "max_nodes = %d: need >= 0", opt->max_nodes);
    if (!(opt->time_limit_s >= 0) || isinf(opt->time_limit_s))
        return lt_fail(err, LT_ERR_USAGE, "lt_milp_options", "time_limit_s = %g: need >= 0 and finite",
                       opt->time_limit_s);
    if (!(opt->rel_gap >= 0) || isinf(opt->rel_gap))
        return lt_fail(err, LT_ERR_USAGE, "lt_milp_options", "rel_gap = %g: need >= 0 and finite",
                       opt->rel_gap);
    return LT_OK;
}

/* ---------------------------------------------------------------- solution check */

/* Whether x meets bounds, integrality and rows within LT_MILP_FEAS_TOL (relative to the
 * size of the bound for large bounds). */
static int solution_ok(const lt_milp_problem *p, const double *x) {
    for (int j = 0; j < p->n_vars; j++) {
        double tol = LT_MILP_FEAS_TOL * fmax(1.0, fabs(x[j]));
        if (!isfinite(x[j]) || x[j] < var_lb(p, j) - tol || x[j] > var_ub(p, j) + tol) return 0;
        if (p->is_int && p->is_int[j] && fabs(x[j] - nearbyint(x[j])) > tol) return 0;
    }
    for (int r = 0; r < p->n_rows; r++) {
        double a = 0.0, mag = 1.0;
        for (int k = p->row_start[r]; k < p->row_start[r + 1]; k++) {
            a += p->value[k] * x[p->col_index[k]];
            mag = fmax(mag, fabs(p->value[k] * x[p->col_index[k]]));
        }
        double tol = LT_MILP_FEAS_TOL * mag;
        if (a < row_lo(p, r) - tol || a > row_hi(p, r) + tol) return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- the solve */

/* Build the CBC model of p (rows transposed to compressed columns). Returns NULL only when
 * Cbc_newModel does. */
static Cbc_Model *build_model(const lt_milp_problem *p, const lt_milp_options *opt) {
    int n = p->n_vars, m = p->n_rows;
    int nnz = m > 0 ? p->row_start[m] : 0;
    CoinBigIndex *start = lt_calloc_check((size_t)n + 1, sizeof *start);
    int *index = lt_malloc_check((size_t)(nnz > 0 ? nnz : 1) * sizeof *index);
    double *value = lt_malloc_check((size_t)(nnz > 0 ? nnz : 1) * sizeof *value);
    double *lb = lt_malloc_check((size_t)n * sizeof *lb);
    double *ub = lt_malloc_check((size_t)n * sizeof *ub);
    double *obj = lt_calloc_check((size_t)n, sizeof *obj);
    double *rlb = lt_malloc_check((size_t)(m > 0 ? m : 1) * sizeof *rlb);
    double *rub = lt_malloc_check((size_t)(m > 0 ? m : 1) * sizeof *rub);
    /* Counting sort of the entries by column; rows stay ascending within a column. */
    for (int k = 0; k < nnz; k++) start[p->col_index[k] + 1]++;
    for (int j = 0; j < n; j++) start[j + 1] += start[j];
    CoinBigIndex *fill = lt_malloc_check((size_t)n * sizeof *fill);
    memcpy(fill, start, (size_t)n * sizeof *fill);
    for (int r = 0; r < m; r++)
        for (int k = p->row_start[r]; k < p->row_start[r + 1]; k++) {
            CoinBigIndex at = fill[p->col_index[k]]++;
            index[at] = r;
            value[at] = p->value[k];
        }
    free(fill);
    /* CBC's infinity is COIN_DBL_MAX; it treats |bound| >= 1e30 as infinite, and IEEE
     * infinities compare the same. Pass them through. */
    for (int j = 0; j < n; j++) {
        lb[j] = var_lb(p, j);
        ub[j] = var_ub(p, j);
        if (p->obj) obj[j] = p->obj[j];
    }
    for (int r = 0; r < m; r++) {
        rlb[r] = row_lo(p, r);
        rub[r] = row_hi(p, r);
    }
    Cbc_Model *model = Cbc_newModel();
    if (model) {
        Cbc_loadProblem(model, n, m, start, index, value, lb, ub, obj, rlb, rub);
        for (int j = 0; j < n; j++)
            if (p->is_int && p->is_int[j]) Cbc_setInteger(model, j);
        Cbc_setObjSense(model, p->maximize ? -1.0 : 1.0);
        /* Silence: the log level of the model and of the driver's "log" parameter. */
        Cbc_setLogLevel(model, opt->log ? 1 : 0);
        Cbc_setParameter(model, "log", opt->log ? "1" : "0");
        Cbc_setParameter(model, "slog", opt->log ? "1" : "0");
        char buf[64];
        if (opt->time_limit_s > 0) {
            /* CBC 2.10.8 segfaults in CglPreProcess::postProcess (NULL read inside
             * Cbc_solve) when the clock stops a warm-started solve at the wrong moment
             * (seen with limits of 1e-4..3e-2 s). Such a solve runs without preprocessing:
             * safe, but slower (about 1.5x on slimpack's cut MILPs). Node limits and
             * unlimited solves keep it. */
            if (opt->initial_solution) Cbc_setParameter(model, "preprocess", "off");
            Cbc_setMaximumSeconds(model, opt->time_limit_s);
            snprintf(buf, sizeof buf, "%.17g", opt->time_limit_s);
            Cbc_setParameter(model, "sec", buf);
        }
        if (opt->max_nodes > 0) {
            Cbc_setMaximumNodes(model, opt->max_nodes);
            snprintf(buf, sizeof buf, "%d", opt->max_nodes);
            Cbc_setParameter(model, "maxN", buf);
        }
        if (opt->rel_gap > 0) {
            Cbc_setAllowableFractionGap(model, opt->rel_gap);
            snprintf(buf, sizeof buf, "%.17g", opt->rel_gap);
            Cbc_setParameter(model, "ratio", buf);
        }
        if (opt->initial_solution) {
            int *idx = lt_malloc_check((size_t)n * sizeof *idx);
            for (int j = 0; j < n; j++) idx[j] = j;
            Cbc_setMIPStartI(model, n, idx, opt->initial_solution);
            free(idx);
        }
    }
    free(start);
    free(index);
    free(value);
    free(lb);
    free(ub);
    free(obj);
    free(rlb);
    free(rub);
    return model;
}

lt_status lt_milp_solve(const lt_milp_problem *p, const lt_milp_options *opt, double *x,
                        lt_milp_result *result, lt_error *err) {
    static const lt_milp_options defaults = {0};
    if (!opt) opt = &defaults;
    lt_status st = validate(p, opt, x, result, err);
    if (st != LT_OK) return st;
    result->status = LT_MILP_ERROR;
    result->has_solution = false;
    result->objective = NAN;
    result->best_bound = NAN;
    result->wall_ms = 0.0;
    result->time_limited = false;

    double t0 = now_ms();
    pthread_mutex_lock(&milp_lock);
    double t_locked = now_ms();
    Cbc_Model *model = build_model(p, opt);
    if (!model) {
        pthread_mutex_unlock(&milp_lock);
        return lt_fail(err, LT_ERR_NOMEM, "lt_milp_solve", "Cbc_newModel failed");
    }
    Cbc_solve(model);

    const double *sol = Cbc_bestSolution(model);
    /* A problem without integer variables is an LP: CBC keeps its answer as the column
     * solution, not always as a "best solution". */
    if (!sol && Cbc_isProvenOptimal(model)) sol = Cbc_getColSolution(model);
    int secondary = Cbc_secondaryStatus(model);
    result->time_limited = opt->time_limit_s > 0 && (Cbc_isSecondsLimitReached(model) || secondary == 4);
    lt_milp_status ms;
    if (Cbc_isAbandoned(model)) ms = LT_MILP_ERROR;
    /* Stopped by the clock before any solution: CBC 2.10 may then also say "proven
     * infeasible" (seen with a 1e-9 s limit on a feasible problem); nothing was proven. */
    else if (!sol && result->time_limited) ms = LT_MILP_TIMEOUT;
    /* ... and without saying the clock stopped it (seen when the limit fell inside
     * preprocessing): a claim of infeasibility made at or past the limit proves nothing. */
    else if (!sol && opt->time_limit_s > 0 && now_ms() - t_locked >= 1e3 * opt->time_limit_s) {
        result->time_limited = true;
        ms = LT_MILP_TIMEOUT;
    }
    else if (Cbc_isProvenInfeasible(model))
        /* CBC 2.10 quirk: when branch-and-bound never ran (status -1: no integer variables,
         * or the first LP ended the solve), an unbounded (dual infeasible) LP is reported as
         * "proven infeasible"; only the initial solve's primal infeasibility tells them apart. */
        ms = Cbc_status(model) == -1 && !Cbc_isInitialSolveProvenPrimalInfeasible(model)
                 ? LT_MILP_UNBOUNDED
                 : LT_MILP_INFEASIBLE;
    else if (Cbc_isContinuousUnbounded(model)) ms = LT_MILP_UNBOUNDED;
    else if (sol && Cbc_isProvenOptimal(model) && secondary != 2) ms = LT_MILP_OPTIMAL;
    else if (sol) ms = LT_MILP_FEASIBLE;
    else if (Cbc_isSecondsLimitReached(model) || secondary == 4) ms = LT_MILP_TIMEOUT;
    else if (opt->max_nodes > 0 && Cbc_isNodeLimitReached(model)) ms = LT_MILP_TIMEOUT;
    else ms = LT_MILP_ERROR;

    int bad_solution = 0;
    if (ms == LT_MILP_OPTIMAL || ms == LT_MILP_FEASIBLE) {
        if (solution_ok(p, sol)) {
            double o = 0.0;
            for (int j = 0; j < p->n_vars; j++) {
                x[j] = sol[j];
                if (p->obj) o += p->obj[j] * sol[j];
            }
            result->has_solution = true;
            result->objective = o;
        } else {
            bad_solution = 1;
            ms = LT_MILP_ERROR;
        }
    }
    double bound = Cbc_getBestPossibleObjValue(model);
    if (isfinite(bound) && fabs(bound) < 1e30 && ms != LT_MILP_INFEASIBLE) result->best_bound = bound;
    int cbc_status = Cbc_status(model);
    Cbc_deleteModel(model);
    pthread_mutex_unlock(&milp_lock);
    result->status = ms;
    result->wall_ms = now_ms() - t0;

    if (ms == LT_MILP_ERROR) {
        if (bad_solution)
            lt_fail(err, LT_ERR_INTERNAL, "lt_milp_solve",
                    "CBC reported a solution that breaks a constraint (tolerance %g)",
                    LT_MILP_FEAS_TOL);
        else
            lt_fail(err, LT_ERR_INTERNAL, "lt_milp_solve",
                    "CBC stopped without a result (status %d, secondary status %d)", cbc_status,
                    secondary);
        lt_error_hint(err, "the problem may be badly scaled; run it with options.log = true "
                           "to see CBC's log");
        return LT_ERR_INTERNAL;
    }
    return LT_OK;
}
