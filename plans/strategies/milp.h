/*
 * plans/strategies/milp.h — one small wrapper over COIN-OR CBC: solve a mixed-integer linear program
 * given as plain arrays.
 *
 * The InfiniPipe and SlimPack strategies state their partitioning problems as MILPs; this
 * module is the only place that talks to CBC (its C interface, Cbc_C_Interface.h), so the
 * strategies see arrays in and a status, an objective and a solution vector out.
 *
 * The problem:
 *
 *     minimize (or maximize)   obj . x
 *     subject to               row_lb[r] <= sum_k value[k] * x[col_index[k]] <= row_ub[r]
 *                                           (k in row_start[r] .. row_start[r+1]-1)
 *                              lb[j] <= x[j] <= ub[j],   x[j] integer where is_int[j]
 *
 * Unbounded sides are LT_MILP_INF / -LT_MILP_INF (IEEE infinities). An equality row has
 * row_lb == row_ub.
 *
 * Status mapping (docs/milp.md; CBC 2.10's Cbc_* calls after Cbc_solve, checked in order):
 *
 *   Cbc_isAbandoned                              -> LT_MILP_ERROR (and LT_ERR_INTERNAL)
 *   Cbc_isProvenInfeasible                       -> LT_MILP_INFEASIBLE, except when
 *     branch-and-bound never ran (Cbc_status -1)     LT_MILP_UNBOUNDED (CBC 2.10 reports an
 *     and the initial LP is not primal infeasible     unbounded LP as "proven infeasible")
 *   Cbc_isContinuousUnbounded                    -> LT_MILP_UNBOUNDED (the LP relaxation is
 *                                                   unbounded; no integer solution is claimed)
 *   Cbc_isProvenOptimal with a solution, search
 *     not stopped by the gap (secondary status 2) -> LT_MILP_OPTIMAL
 *   a solution (Cbc_bestSolution != NULL) but
 *     optimality not proven: time limit, or the
 *     options' relative gap or node limit
 *     stopped the search                          -> LT_MILP_FEASIBLE
 *   the node limit reached, no solution          -> LT_MILP_TIMEOUT
 *   Cbc_isSecondsLimitReached, no solution        -> LT_MILP_TIMEOUT (checked before
 *                                                   "proven infeasible": CBC 2.10 may claim
 *                                                   that too when the clock stopped it)
 *
 * result->time_limited says whether the clock stopped the search, whatever the status: a
 * FEASIBLE result with time_limited holds CBC's incumbent, which may be only the warm start.
 * Warm-started, time-limited solves run without CBC's preprocessing (see build_model).
 *   anything else                                -> LT_MILP_ERROR (and LT_ERR_INTERNAL)
 *
 * A solution is reported only when CBC holds an integer-feasible one; the wrapper checks it
 * against the rows, the bounds and integrality (with LT_MILP_FEAS_TOL) before copying it.
 *
 * Thread-safety: CBC's command-line driver (CbcMain1, under Cbc_solve) keeps process-wide
 * state, so lt_milp_solve holds one process-wide mutex from building the CBC model to
 * freeing it: solves from many threads are safe and run one at a time. Input validation
 * runs outside the lock.
 */
#ifndef LT_MILP_H
#define LT_MILP_H

#include <math.h> /* INFINITY */
#include <stdbool.h>

#include "lib/error.h" /* lt_status, lt_error */

/* The unbounded side of a bound or a row: lb = -LT_MILP_INF, ub = LT_MILP_INF. */
#define LT_MILP_INF ((double)INFINITY)

/* Absolute tolerance of the wrapper's own check of a reported solution (rows, bounds,
 * integrality). CBC's primal and integer tolerances are tighter (1e-7, 1e-6 relative). */
#define LT_MILP_FEAS_TOL 1e-6

typedef enum lt_milp_status {
    LT_MILP_OPTIMAL = 0, /* a solution, proven optimal (within CBC's own tolerances) */
    LT_MILP_FEASIBLE,    /* a solution, optimality not proven: time limit or rel_gap stop */
    LT_MILP_TIMEOUT,     /* the time or node limit was reached with no feasible solution */
    LT_MILP_INFEASIBLE,  /* proven infeasible */
    LT_MILP_UNBOUNDED,   /* the LP relaxation is unbounded */
    LT_MILP_ERROR,       /* CBC gave up (numerical trouble) or ended in an unknown state */
} lt_milp_status;

/* "optimal", "feasible", "timeout", "infeasible", "unbounded", "error" (the plan store's
 * solver_status column); "?" out of range. */
const char *lt_milp_status_name(lt_milp_status s);

/* The problem: arrays owned by the caller, read only during lt_milp_solve. */
typedef struct lt_milp_problem {
    int n_vars;              /* >= 1 */
    const double *lb;        /* [n_vars]; NULL = all 0 */
    const double *ub;        /* [n_vars]; NULL = all LT_MILP_INF */
    const double *obj;       /* [n_vars]; NULL = all 0 (a feasibility problem) */
    const bool *is_int;      /* [n_vars]; NULL = all continuous */
    bool maximize;           /* false: minimize obj . x */
    int n_rows;              /* >= 0 */
    const int *row_start;    /* [n_rows + 1], row_start[0] = 0, non-decreasing; NULL when
                                n_rows = 0 */
    const int *col_index;    /* [row_start[n_rows]]: each in [0, n_vars), no repeats in a row */
    const double *value;     /* [row_start[n_rows]], finite */
    const double *row_lb;    /* [n_rows]; NULL = all -LT_MILP_INF */
    const double *row_ub;    /* [n_rows]; NULL = all LT_MILP_INF */
} lt_milp_problem;

/* Options; a zeroed struct gives the defaults. */
typedef struct lt_milp_options {
    double time_limit_s;            /* > 0: stop after this many seconds; 0 = no limit */
    double rel_gap;                 /* > 0: stop once |best - bound| <= rel_gap * |best|
                                       (Cbc_setAllowableFractionGap); 0 = prove optimality */
    int max_nodes;                  /* > 0: stop after this many branch-and-bound nodes (a
                                       deterministic effort cap; FEASIBLE when it stops the
                                       search with a solution); 0 = no limit */
    bool log;                       /* true: let CBC print its log to stdout; default silent */
    const double *initial_solution; /* [n_vars] or NULL: a warm start handed to CBC with
                                       Cbc_setMIPStartI (CBC checks it and ignores it when
                                       it is infeasible) */
} lt_milp_options;

typedef struct lt_milp_result {
    lt_milp_status status;
    bool has_solution;  /* true for OPTIMAL and FEASIBLE: x holds the solution */
    double objective;   /* obj . x when has_solution, else NAN */
    double best_bound;  /* CBC's bound on the optimum (a lower bound when minimizing, an
                           upper bound when maximizing); NAN when CBC has none */
    bool time_limited;  /* options.time_limit_s stopped the search (any status) */
    double wall_ms;     /* wall time of the solve: lock held, model built, solved, freed */
} lt_milp_result;

/*
 * Solve `p`. `opt` may be NULL (defaults). `x` [p->n_vars] receives the solution when
 * result->has_solution and is left untouched otherwise. Every outcome of the search
 * (optimal, infeasible, timeout, ...) returns LT_OK with result->status saying which.
 * Returns LT_ERR_USAGE naming the variable or row for a malformed problem or options
 * (sizes, NaN, lb > ub, a column index out of range or repeated in a row, ...), and
 * LT_ERR_INTERNAL (result->status = LT_MILP_ERROR) when CBC gives up.
 */
lt_status lt_milp_solve(const lt_milp_problem *p, const lt_milp_options *opt, double *x,
                        lt_milp_result *result, lt_error *err);

#endif /* LT_MILP_H */
