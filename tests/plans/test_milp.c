/*
 * tests/plans/test_milp.c — unit tests for plans/milp (cmocka).
 *
 * Every optimum is known independently of CBC: small problems are solved here by brute
 * force (all subsets, all permutations, all integer points of a box), and every solution the
 * wrapper reports is checked against the rows, bounds and integrality by a checker written
 * here. The timeout test accepts FEASIBLE (with a valid solution) or TIMEOUT, as CBC may or
 * may not find a solution before it first looks at the clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/rng.h" /* lt_rng_seed, lt_rng_below */
#include "plans/strategies/milp.h"

#define EPS 1e-6

/* ---- helpers ------------------------------------------------------------------------ */

/* x meets bounds, integrality and rows (the test's own check, independent of milp.c). */
static void assert_feasible(const lt_milp_problem *p, const double *x) {
    for (int j = 0; j < p->n_vars; j++) {
        double lb = p->lb ? p->lb[j] : 0.0, ub = p->ub ? p->ub[j] : INFINITY;
        if (x[j] < lb - EPS || x[j] > ub + EPS) fail_msg("x[%d] = %g outside [%g, %g]", j, x[j], lb, ub);
        if (p->is_int && p->is_int[j] && fabs(x[j] - round(x[j])) > EPS)
            fail_msg("x[%d] = %g not integral", j, x[j]);
    }
    for (int r = 0; r < p->n_rows; r++) {
        double a = 0;
        for (int k = p->row_start[r]; k < p->row_start[r + 1]; k++) a += p->value[k] * x[p->col_index[k]];
        double lo = p->row_lb ? p->row_lb[r] : -INFINITY, hi = p->row_ub ? p->row_ub[r] : INFINITY;
        if (a < lo - EPS * fmax(1, fabs(lo)) || a > hi + EPS * fmax(1, fabs(hi)))
            fail_msg("row %d: activity %g outside [%g, %g]", r, a, lo, hi);
    }
}

static double dot(const double *a, const double *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static lt_milp_result solve_ok(const lt_milp_problem *p, const lt_milp_options *opt, double *x) {
    lt_milp_result res;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_milp_solve(p, opt, x, &res, &err);
    if (st != LT_OK) fail_msg("lt_milp_solve: %s (%s) hint: %s", err.what, err.where, err.hint);
    assert_true(res.wall_ms >= 0);
    if (res.has_solution) {
        assert_true(res.status == LT_MILP_OPTIMAL || res.status == LT_MILP_FEASIBLE);
        assert_feasible(p, x);
        if (p->obj) assert_true(fabs(res.objective - dot(p->obj, x, p->n_vars)) < 1e-9 * fmax(1, fabs(res.objective)));
        /* The bound is on the right side of the objective. */
        if (!isnan(res.best_bound)) {
            double tol = 1e-6 * fmax(1, fabs(res.objective));
            if (p->maximize) assert_true(res.best_bound >= res.objective - tol);
            else assert_true(res.best_bound <= res.objective + tol);
        }
    } else {
        assert_true(isnan(res.objective));
    }
    return res;
}

/* ---- a knapsack (brute force over all subsets) ------------------------------------------ */

#define KN 12
static const double kn_weight[KN] = {23, 31, 29, 44, 53, 38, 63, 85, 89, 82, 17, 41};
static const double kn_value[KN] = {92, 57, 49, 68, 60, 43, 67, 84, 87, 72, 35, 51};
static const double kn_cap = 265;

typedef struct knapsack {
    double lb[KN], ub[KN];
    bool is_int[KN];
    int row_start[2], col_index[KN];
    double row_ub[1];
    lt_milp_problem p;
} knapsack;

static void knapsack_init(knapsack *k) {
    memset(k, 0, sizeof *k);
    for (int j = 0; j < KN; j++) {
        k->lb[j] = 0;
        k->ub[j] = 1;
        k->is_int[j] = true;
        k->col_index[j] = j;
    }
    k->row_start[0] = 0;
    k->row_start[1] = KN;
    k->row_ub[0] = kn_cap;
    k->p = (lt_milp_problem){.n_vars = KN, .lb = k->lb, .ub = k->ub, .obj = kn_value, .is_int = k->is_int,
                             .maximize = true, .n_rows = 1, .row_start = k->row_start,
                             .col_index = k->col_index, .value = kn_weight, .row_lb = NULL,
                             .row_ub = k->row_ub};
}

static double knapsack_brute(void) {
    double best = 0;
    for (unsigned s = 0; s < (1u << KN); s++) {
        double w = 0, v = 0;
        for (int j = 0; j < KN; j++)
            if (s & (1u << j)) w += kn_weight[j], v += kn_value[j];
        if (w <= kn_cap && v > best) best = v;
    }
    return best;
}

static void test_knapsack(void **state) {
    (void)state;
    knapsack k;
    knapsack_init(&k);
    double x[KN];
    lt_milp_result r = solve_ok(&k.p, NULL, x);
    assert_int_equal(r.status, LT_MILP_OPTIMAL);
    assert_false(r.time_limited);
    assert_true(r.has_solution);
    assert_true(fabs(r.objective - knapsack_brute()) < EPS);
    if (!isnan(r.best_bound)) assert_true(fabs(r.best_bound - r.objective) < 1e-3 * r.objective);
}

/* A warm start (the optimum, then an infeasible point) changes nothing in the answer. */
static void test_knapsack_warm_start(void **state) {
    (void)state;
    knapsack k;
    knapsack_init(&k);
    double x[KN], x0[KN];
    lt_milp_result r = solve_ok(&k.p, NULL, x0);
    lt_milp_options opt = {.initial_solution = x0};
    lt_milp_result r2 = solve_ok(&k.p, &opt, x);
    assert_int_equal(r2.status, LT_MILP_OPTIMAL);
    assert_true(fabs(r2.objective - r.objective) < EPS);
    double ones[KN];
    for (int j = 0; j < KN; j++) ones[j] = 1; /* over capacity */
    opt.initial_solution = ones;
    r2 = solve_ok(&k.p, &opt, x);
    assert_int_equal(r2.status, LT_MILP_OPTIMAL);
    assert_true(fabs(r2.objective - r.objective) < EPS);
}

/* rel_gap = 0.5: the answer is within the gap of the optimum. */
static void test_knapsack_gap(void **state) {
    (void)state;
    knapsack k;
    knapsack_init(&k);
    double x[KN];
    lt_milp_options opt = {.rel_gap = 0.5};
    lt_milp_result r = solve_ok(&k.p, &opt, x);
    assert_true(r.status == LT_MILP_OPTIMAL || r.status == LT_MILP_FEASIBLE);
    assert_true(r.objective >= knapsack_brute() / 1.5 - EPS);
}

/* ---- integrality matters: max y, -x + y <= 1, 3x + 2y <= 12, 2x + 3y <= 12 ---------- */
/* LP optimum (1.8, 2.8) with y = 2.8; integer optimum y = 2. */

static void fractional_problem(lt_milp_problem *p, bool integer, bool is_int[2]) {
    static const double obj[2] = {0, 1};
    static const int row_start[4] = {0, 2, 4, 6};
    static const int col_index[6] = {0, 1, 0, 1, 0, 1};
    static const double value[6] = {-1, 1, 3, 2, 2, 3};
    static const double row_ub[3] = {1, 12, 12};
    is_int[0] = is_int[1] = integer;
    *p = (lt_milp_problem){.n_vars = 2, .obj = obj, .is_int = is_int, .maximize = true, .n_rows = 3,
                           .row_start = row_start, .col_index = col_index, .value = value,
                           .row_ub = row_ub};
}

static void test_integrality_matters(void **state) {
    (void)state;
    lt_milp_problem p;
    bool is_int[2];
    double x[2];
    fractional_problem(&p, true, is_int);
    lt_milp_result r = solve_ok(&p, NULL, x);
    assert_int_equal(r.status, LT_MILP_OPTIMAL);
    assert_true(fabs(r.objective - 2) < EPS);
    /* The same problem continuous: the LP optimum. */
    fractional_problem(&p, false, is_int);
    r = solve_ok(&p, NULL, x);
    assert_int_equal(r.status, LT_MILP_OPTIMAL);
    assert_true(fabs(r.objective - 2.8) < EPS);
    assert_true(fabs(x[0] - 1.8) < EPS && fabs(x[1] - 2.8) < EPS);
}

/* ---- a 3x3 assignment problem (brute force over the 6 permutations) ------------------ */

static const double as_cost[3][3] = {{9, 2, 7}, {6, 4, 3}, {5, 8, 1}};

typedef struct assignment {
    double obj[9], ub[9], value[18], rhs[6];
    bool is_int[9];
    int row_start[7], col_index[18];
    lt_milp_problem p;
} assignment;

static void assignment_init(assignment *a, const double cost[3][3]) {
    memset(a, 0, sizeof *a);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            a->obj[i * 3 + j] = cost[i][j];
            a->ub[i * 3 + j] = 1;
            a->is_int[i * 3 + j] = true;
        }
    int k = 0;
    for (int r = 0; r < 6; r++) { /* rows 0..2: worker i does one job; 3..5: job j done once */
        a->row_start[r] = k;
        for (int t = 0; t < 3; t++) {
            a->col_index[k] = r < 3 ? r * 3 + t : t * 3 + (r - 3);
            a->value[k++] = 1;
        }
        a->rhs[r] = 1;
    }
    a->row_start[6] = k;
    a->p = (lt_milp_problem){.n_vars = 9, .ub = a->ub, .obj = a->obj, .is_int = a->is_int, .n_rows = 6,
                             .row_start = a->row_start, .col_index = a->col_index, .value = a->value,
                             .row_lb = a->rhs, .row_ub = a->rhs};
}

static double assignment_brute(const double cost[3][3]) {
    static const int perm[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    double best = INFINITY;
    for (int q = 0; q < 6; q++) {
        double c = cost[0][perm[q][0]] + cost[1][perm[q][1]] + cost[2][perm[q][2]];
        if (c < best) best = c;
    }
    return best;
}

static void test_assignment(void **state) {
    (void)state;
    assignment a;
    assignment_init(&a, as_cost);
    double x[9];
    lt_milp_result r = solve_ok(&a.p, NULL, x);
    assert_int_equal(r.status, LT_MILP_OPTIMAL);
    assert_true(fabs(r.objective - assignment_brute(as_cost)) < EPS);
}

/* ---- infeasible, unbounded, trivially bounded --------------------------------------- */

static void test_infeasible(void **state) {
    (void)state;
    static const double ub[2] = {1, 1};
    static const bool is_int[2] = {true, true};
    static const int row_start[2] = {0, 2}, col_index[2] = {0, 1};
    static const double value[2] = {1, 1}, row_lb[1] = {3};
    lt_milp_problem p = {.n_vars = 2, .ub = ub, .is_int = is_int, .n_rows = 1, .row_start = row_start,
                         .col_index = col_index, .value = value, .row_lb = row_lb};
    double x[2] = {-7, -7};
    lt_milp_result r = solve_ok(&p, NULL, x);
    assert_int_equal(r.status, LT_MILP_INFEASIBLE);
    assert_false(r.has_solution);
    assert_true(x[0] == -7 && x[1] == -7); /* untouched */
    /* The same continuous: an infeasible LP (no branch-and-bound). */
    lt_milp_problem lp = p;
    lp.is_int = NULL;
    r = solve_ok(&lp, NULL, x);
    assert_int_equal(r.status, LT_MILP_INFEASIBLE);
    /* Integrality alone makes it infeasible: 2x = 1. */
    static const int rs1[2] = {0, 1}, ci1[1] = {0};
    static const double v1[1] = {2}, rhs1[1] = {1};
    lt_milp_problem q = {.n_vars = 1, .ub = ub, .is_int = is_int, .n_rows = 1, .row_start = rs1,
                         .col_index = ci1, .value = v1, .row_lb = rhs1, .row_ub = rhs1};
    r = solve_ok(&q, NULL, x);
    assert_int_equal(r.status, LT_MILP_INFEASIBLE);
}

static void test_unbounded(void **state) {
    (void)state;
    /* min -x - y with x - y <= 1, x, y >= 0 continuous: unbounded. */
    static const double obj[2] = {-1, -1};
    static const int row_start[2] = {0, 2}, col_index[2] = {0, 1};
    static const double value[2] = {1, -1}, row_ub[1] = {1};
    lt_milp_problem p = {.n_vars = 2, .obj = obj, .n_rows = 1, .row_start = row_start,
                         .col_index = col_index, .value = value, .row_ub = row_ub};
    double x[2];
    lt_milp_result r = solve_ok(&p, NULL, x);
    assert_int_equal(r.status, LT_MILP_UNBOUNDED);
    assert_false(r.has_solution);
    /* The same with integer variables. */
    static const bool is_int[2] = {true, true};
    p.is_int = is_int;
    r = solve_ok(&p, NULL, x);
    assert_int_equal(r.status, LT_MILP_UNBOUNDED);
}

static void test_trivially_bounded(void **state) {
    (void)state;
    /* No rows; every variable pushed to the bound its objective favours. */
    static const double lb[3] = {-2, 1, -LT_MILP_INF}, ub[3] = {5, 1, 4}, obj[3] = {1, 7, -1};
    static const bool is_int[3] = {true, false, true};
    lt_milp_problem p = {.n_vars = 3, .lb = lb, .ub = ub, .obj = obj, .is_int = is_int};
    double x[3];
    lt_milp_result r = solve_ok(&p, NULL, x);
    assert_int_equal(r.status, LT_MILP_OPTIMAL);
    assert_true(fabs(x[0] + 2) < EPS && fabs(x[1] - 1) < EPS && fabs(x[2] - 4) < EPS);
    assert_true(fabs(r.objective - (-2 + 7 - 4)) < EPS);
}

/* ---- equality rows (brute force over the integer box) ------------------------------ */

static void test_equality_rows(void **state) {
    (void)state;
    /* min 3a + 2b + c - 4d, a + b + c + d = 11, a - b + 2d = 1, 2a + c <= 9, all in 0..6 int. */
    static const double ub[4] = {6, 6, 6, 6}, obj[4] = {3, 2, 1, -4};
    static const bool is_int[4] = {true, true, true, true};
    static const int row_start[4] = {0, 4, 7, 9};
    static const int col_index[9] = {0, 1, 2, 3, 0, 1, 3, 0, 2};
    static const double value[9] = {1, 1, 1, 1, 1, -1, 2, 2, 1};
    static const double row_lb[3] = {11, 1, -LT_MILP_INF}, row_ub[3] = {11, 1, 9};
    lt_milp_problem p = {.n_vars = 4, .ub = ub, .obj = obj, .is_int = is_int, .n_rows = 3,
                         .row_start = row_start, .col_index = col_index, .value = value,
                         .row_lb = row_lb, .row_ub = row_ub};
    double best = INFINITY;
    for (int a = 0; a <= 6; a++)
        for (int b = 0; b <= 6; b++)
            for (int c = 0; c <= 6; c++)
                for (int d = 0; d <= 6; d++)
                    if (a + b + c + d == 11 && a - b + 2 * d == 1 && 2 * a + c <= 9)
                        best = fmin(best, 3 * a + 2 * b + c - 4 * d);
    assert_true(isfinite(best));
    double x[4];
    lt_milp_result r = solve_ok(&p, NULL, x);
    assert_int_equal(r.status, LT_MILP_OPTIMAL);
    assert_true(fabs(r.objective - best) < EPS);
}

/* ---- a time limit too small to finish ---------------------------------------------- */

/* A random multi-dimensional knapsack: N binaries, M capacity rows, maximize value. */
#define TN 150
#define TM 8
static void random_mkp(lt_milp_problem *p, double *obj, double *ub, bool *is_int, int *row_start,
                       int *col_index, double *value, double *row_ub) {
    lt_rng rng;
    lt_rng_seed(&rng, 20240607);
    for (int j = 0; j < TN; j++) {
        obj[j] = 100 + (double)lt_rng_below(&rng, 900);
        ub[j] = 1;
        is_int[j] = true;
    }
    for (int r = 0; r < TM; r++) {
        row_start[r] = r * TN;
        double sum = 0;
        for (int j = 0; j < TN; j++) {
            col_index[r * TN + j] = j;
            value[r * TN + j] = 10 + (double)lt_rng_below(&rng, 990);
            sum += value[r * TN + j];
        }
        row_ub[r] = floor(sum / 2);
    }
    row_start[TM] = TM * TN;
    *p = (lt_milp_problem){.n_vars = TN, .ub = ub, .obj = obj, .is_int = is_int, .maximize = true,
                           .n_rows = TM, .row_start = row_start, .col_index = col_index, .value = value,
                           .row_ub = row_ub};
}

static void test_time_limit(void **state) {
    (void)state;
    static double obj[TN], ub[TN], value[TM * TN], row_ub[TM], x[TN];
    static bool is_int[TN];
    static int row_start[TM + 1], col_index[TM * TN];
    lt_milp_problem p;
    random_mkp(&p, obj, ub, is_int, row_start, col_index, value, row_ub);
    static const double limits[] = {1e-6, 0.05};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        lt_milp_options opt = {.time_limit_s = limits[i]};
        lt_milp_result r = solve_ok(&p, &opt, x); /* checks any reported solution */
        print_message("time limit %g s: %s, objective %g, bound %g, %.1f ms\n", limits[i],
                      lt_milp_status_name(r.status), r.objective, r.best_bound, r.wall_ms);
        assert_true(r.status == LT_MILP_FEASIBLE || r.status == LT_MILP_TIMEOUT);
        assert_true(r.has_solution == (r.status == LT_MILP_FEASIBLE));
        assert_true(r.time_limited);
        assert_true(r.wall_ms < 5000);
    }
    /* A node limit stops it too, without the clock: "timeout" or a feasible incumbent. */
    lt_milp_options nodes = {.max_nodes = 2};
    lt_milp_result rn = solve_ok(&p, &nodes, x);
    print_message("node limit 2: %s, objective %g, bound %g\n", lt_milp_status_name(rn.status), rn.objective,
                  rn.best_bound);
    assert_true(rn.status == LT_MILP_FEASIBLE || rn.status == LT_MILP_TIMEOUT);
    assert_false(rn.time_limited);
    /* A warm-started solve stopped by the clock (CBC 2.10.8 crashed on some of these): the
     * start survives as the incumbent. */
    static double start[TN];
    lt_milp_options warm = {.time_limit_s = 1e-4, .initial_solution = start}; /* x = 0 fits */
    for (int k = 0; k < 20; k++) {
        lt_milp_result rw = solve_ok(&p, &warm, x);
        assert_true(rw.status == LT_MILP_FEASIBLE || rw.status == LT_MILP_TIMEOUT);
        assert_true(rw.time_limited);
    }
    /* A loose gap stops the search early: a solution within the gap of the bound. */
    lt_milp_options opt = {.time_limit_s = 20, .rel_gap = 0.02};
    lt_milp_result r = solve_ok(&p, &opt, x);
    print_message("rel_gap 0.02: %s, objective %g, bound %g, %.1f ms\n", lt_milp_status_name(r.status),
                  r.objective, r.best_bound, r.wall_ms);
    assert_true(r.status == LT_MILP_FEASIBLE || r.status == LT_MILP_OPTIMAL);
    assert_true(r.best_bound - r.objective <= 0.02 * r.objective + EPS);
}

/* ---- silence ------------------------------------------------------------------------ */

static void test_silent_by_default(void **state) {
    (void)state;
    char path[] = "/tmp/lt_test_milp_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fd, STDOUT_FILENO) >= 0);
    knapsack k;
    knapsack_init(&k);
    double x[KN];
    lt_milp_result r;
    lt_error err;
    lt_status st = lt_milp_solve(&k.p, NULL, x, &r, &err);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    off_t size = lseek(fd, 0, SEEK_END);
    close(fd);
    unlink(path);
    assert_int_equal(st, LT_OK);
    assert_int_equal(size, 0);
}

/* ---- input validation --------------------------------------------------------------- */

static void expect_usage(const lt_milp_problem *p, const lt_milp_options *opt, const char *where) {
    double x[16];
    lt_milp_result r;
    lt_error err;
    lt_error_clear(&err);
    assert_int_equal(lt_milp_solve(p, opt, x, &r, &err), LT_ERR_USAGE);
    assert_int_equal(err.status, LT_ERR_USAGE);
    if (!strstr(err.where, where)) fail_msg("where '%s' does not name '%s' (%s)", err.where, where, err.what);
}

static void test_validation(void **state) {
    (void)state;
    knapsack k;
    knapsack_init(&k);
    lt_milp_problem p = k.p;
    p.n_vars = 0;
    expect_usage(&p, NULL, "lt_milp_solve");
    p = k.p;
    p.n_rows = -1;
    expect_usage(&p, NULL, "lt_milp_solve");

    k.lb[3] = NAN;
    expect_usage(&k.p, NULL, "variable 3");
    k.lb[3] = 2; /* > ub = 1 */
    expect_usage(&k.p, NULL, "variable 3");
    k.lb[3] = LT_MILP_INF;
    expect_usage(&k.p, NULL, "variable 3");
    k.lb[3] = 0;
    k.ub[5] = -LT_MILP_INF;
    expect_usage(&k.p, NULL, "variable 5");
    k.ub[5] = 1;

    double obj[KN];
    memcpy(obj, kn_value, sizeof obj);
    obj[7] = NAN;
    p = k.p;
    p.obj = obj;
    expect_usage(&p, NULL, "variable 7");

    k.col_index[4] = KN; /* out of range */
    expect_usage(&k.p, NULL, "row 0");
    k.col_index[4] = 3; /* repeats column 3 */
    expect_usage(&k.p, NULL, "row 0");
    k.col_index[4] = 4;
    double value[KN];
    memcpy(value, kn_weight, sizeof value);
    value[2] = INFINITY;
    p = k.p;
    p.value = value;
    expect_usage(&p, NULL, "row 0");

    k.row_ub[0] = NAN;
    expect_usage(&k.p, NULL, "row 0");
    k.row_ub[0] = kn_cap;
    double row_lb[1] = {kn_cap + 1};
    p = k.p;
    p.row_lb = row_lb;
    expect_usage(&p, NULL, "row 0");
    k.row_start[1] = -1;
    expect_usage(&k.p, NULL, "row 0");
    k.row_start[1] = KN;
    k.row_start[0] = 1;
    expect_usage(&k.p, NULL, "row 0");
    k.row_start[0] = 0;
    p = k.p;
    p.row_start = NULL;
    expect_usage(&p, NULL, "lt_milp_solve");

    lt_milp_options opt = {.time_limit_s = -1};
    expect_usage(&k.p, &opt, "lt_milp_options");
    opt = (lt_milp_options){.rel_gap = NAN};
    expect_usage(&k.p, &opt, "lt_milp_options");
    opt = (lt_milp_options){.max_nodes = -1};
    expect_usage(&k.p, &opt, "lt_milp_options");
    double x0[KN] = {0};
    x0[9] = INFINITY;
    opt = (lt_milp_options){.initial_solution = x0};
    expect_usage(&k.p, &opt, "variable 9");

    /* After all that the untouched problem still solves. */
    double x[KN];
    lt_milp_result r = solve_ok(&k.p, NULL, x);
    assert_int_equal(r.status, LT_MILP_OPTIMAL);
}

static void test_status_names(void **state) {
    (void)state;
    assert_string_equal(lt_milp_status_name(LT_MILP_OPTIMAL), "optimal");
    assert_string_equal(lt_milp_status_name(LT_MILP_FEASIBLE), "feasible");
    assert_string_equal(lt_milp_status_name(LT_MILP_TIMEOUT), "timeout");
    assert_string_equal(lt_milp_status_name(LT_MILP_INFEASIBLE), "infeasible");
    assert_string_equal(lt_milp_status_name(LT_MILP_UNBOUNDED), "unbounded");
    assert_string_equal(lt_milp_status_name(LT_MILP_ERROR), "error");
    assert_string_equal(lt_milp_status_name((lt_milp_status)99), "?");
}

/* ---- concurrent solves --------------------------------------------------------------- */

typedef struct thread_job {
    int id;
    double knapsack_obj[5], assignment_obj[5];
    int status_ok;
} thread_job;

static void *thread_main(void *arg) {
    thread_job *job = arg;
    job->status_ok = 1;
    for (int it = 0; it < 5; it++) {
        knapsack k;
        knapsack_init(&k);
        double x[KN];
        lt_milp_result r;
        lt_error err;
        if (lt_milp_solve(&k.p, NULL, x, &r, &err) != LT_OK || r.status != LT_MILP_OPTIMAL) job->status_ok = 0;
        job->knapsack_obj[it] = r.objective;
        /* Each thread its own cost matrix (a rotation of the rows). */
        double cost[3][3];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) cost[i][j] = as_cost[(i + job->id) % 3][j] + job->id;
        assignment a;
        assignment_init(&a, cost);
        double y[9];
        if (lt_milp_solve(&a.p, NULL, y, &r, &err) != LT_OK || r.status != LT_MILP_OPTIMAL) job->status_ok = 0;
        job->assignment_obj[it] = r.objective;
    }
    return NULL;
}

static void test_concurrent(void **state) {
    (void)state;
    enum { T = 4 };
    pthread_t th[T];
    thread_job jobs[T];
    for (int t = 0; t < T; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].id = t;
        assert_int_equal(pthread_create(&th[t], NULL, thread_main, &jobs[t]), 0);
    }
    for (int t = 0; t < T; t++) assert_int_equal(pthread_join(th[t], NULL), 0);
    double kbest = knapsack_brute();
    for (int t = 0; t < T; t++) {
        assert_true(jobs[t].status_ok);
        double cost[3][3];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) cost[i][j] = as_cost[(i + t) % 3][j] + t;
        double abest = assignment_brute(cost);
        for (int it = 0; it < 5; it++) {
            assert_true(fabs(jobs[t].knapsack_obj[it] - kbest) < EPS);
            assert_true(fabs(jobs[t].assignment_obj[it] - abest) < EPS);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_knapsack),
        cmocka_unit_test(test_knapsack_warm_start),
        cmocka_unit_test(test_knapsack_gap),
        cmocka_unit_test(test_integrality_matters),
        cmocka_unit_test(test_assignment),
        cmocka_unit_test(test_infeasible),
        cmocka_unit_test(test_unbounded),
        cmocka_unit_test(test_trivially_bounded),
        cmocka_unit_test(test_equality_rows),
        cmocka_unit_test(test_time_limit),
        cmocka_unit_test(test_silent_by_default),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
