/*
 * plans/cmd/compare.c — `planner compare`: plan the same steps with several strategies and
 * print their predictions side by side (CONTRACTS.md).
 *
 *   planner compare --config FILE --lengths FILE --strategies A,B,... [--steps N]
 *                   [--format table|tsv] [--threads T] [--hardware-dir DIR]
 *
 * Every strategy plans the same sampled steps. megatron is always planned (it is the
 * reference of the speedup column) and printed only when listed. A row averages over the
 * steps: predicted step time, bubble ratio and planning time are means, peak memory is the
 * maximum over the steps (what the GPUs must hold), speedup = megatron's mean time / the
 * strategy's. A strategy that fails on a step (a plan over the memory cap) gets no averages:
 * its row says so, the first error is printed, and the exit status is 1.
 *
 * The table (not the TSV, whose columns are a contract) adds, per strategy:
 *   plan_ms_p50  the median planning time per step (the mean is plan_ms/step);
 *   cv_fwd       how evenly the step's forward work is cut into units: per pipeline, the
 *                coefficient of variation (population std / mean) of its units' forward
 *                times ("on a specific device", SlimPack Fig. 14-16), averaged over the
 *                pipelines, then over the steps. A unit's forward time is what the simulator's cost
 *                bridge (lt_cost_sim_costs_prepared) prices for an F of the unit over stage
 *                0's layers without recomputation, at the pipeline's (or the DP-Merge
 *                unit's) context-parallel degree: its compute time on one stage, TP
 *                collectives and the exposed CP ring included;
 *   cv_bwd       the same for B ops over the backward units (an asymmetric schedule's
 *                bunits, else the units), recompute_layers 0;
 *   merges       DP-Merge groups (SlimPack 4.1.1) summed over the steps;
 *   x_bound      the mean predicted step time over the mean of the steps' lower bounds
 *                (lt_cost_step_bound, docs/strategies.md "The lower bound": the step's
 *                compute spread over every GPU, no bubble, no exposed communication): how far
 *                from any schedule's best the strategy is ("1.08x" = 8 % to win at most).
 * Under the table, for auto, a line counting the strategies it picked over the steps.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cli.h"               /* lt_cli_ctx, lt_cli_option_value, lt_cli_usage */
#include "lib/log.h"               /* lt_log_enabled (--quiet is a common option) */
#include "plans/cost/cost.h"       /* lt_cost_sim_costs_prepared, lt_cost_model_set_cp */
#include "plans/strategies/plan.h" /* lt_strategy_*, lt_step_plan */
#include "plans/cmd/planner.h"     /* compare_command, planner_load_corpus, planner_parse_strategies */
#include "plans/batches/steps.h"   /* lt_plan_steps */

typedef struct compare_args {
    const char *lengths, *strategies, *format, *hardware_dir;
    int64_t steps, threads;
    bool quiet;
} compare_args;

static int parse_args(lt_cli_ctx *ctx, compare_args *a) {
    memset(a, 0, sizeof *a);
    const planner_option opts[] = {
        {"--lengths", &a->lengths, NULL, 0},          {"--strategies", &a->strategies, NULL, 0},
        {"--format", &a->format, NULL, 0},            {"--hardware-dir", &a->hardware_dir, NULL, 0},
        {"--steps", NULL, &a->steps, 100000000},      {"--threads", NULL, &a->threads, 100000000},
    };
    for (int i = 1; i < ctx->argc; i++) {
        const char *arg = ctx->argv[i];
        int taken = planner_take_option(ctx, &i, opts, sizeof opts / sizeof opts[0]);
        if (taken > 1) return taken;
        if (taken) continue;
        if (arg[0] == '-') return lt_cli_unknown_option(ctx, arg);
        else return lt_cli_usage(ctx, "unexpected argument '%.200s'", arg);
    }
    a->quiet = !lt_log_enabled(LT_LOG_INFO); /* -q / --quiet (lib/cli.h) sets the log level to warn */
    if (!a->lengths) return lt_cli_usage(ctx, "give the lengths: --lengths FILE (one token count per line)");
    if (!a->strategies) return lt_cli_usage(ctx, "which strategies? give --strategies A,B,... (e.g. megatron,chunkflow)");
    if (!a->format) a->format = "table";
    if (strcmp(a->format, "table") != 0 && strcmp(a->format, "tsv") != 0)
        return lt_cli_usage(ctx, "--format '%.40s': want table or tsv", a->format);
    return 0;
}

/* Per strategy, per step results, summed in step order at the end (so the averages do not
 * depend on the thread count). */
typedef struct strat_result {
    lt_strategy strategy;
    bool shown;     /* listed by the user */
    double *time_s, *bubble, *peak, *solve_ms; /* [n_steps] */
    double *cv_fwd, *cv_bwd;                    /* [n_steps] unit balance (step_unit_cv) */
    size_t merges;                              /* DP-Merge groups over the steps */
    size_t picked[LT_STRATEGY_COUNT];           /* steps per plan.strategy (auto: its pick) */
    bool failed;
    uint64_t fail_step;
    lt_error fail_err;
    char params[128]; /* of the last step planned */
} strat_result;

typedef struct compare_state {
    strat_result *res;
    size_t n;
    const lt_cost_model *cm; /* the run's, cp = 1 */
    int64_t context_len;
    double *bound;           /* [n_steps] each step's lower bound (lt_cost_step_bound) */
    lt_cost_sim_ctx cost;    /* the simulator's bridge, prepared per pipeline */
    double *times;           /* scratch: unit times of a step */
    size_t cap_times;
} compare_state;

/* Coefficient of variation of v[0..n): population standard deviation / mean (0 when n is 0
 * or the mean is not positive). Two passes, for accuracy. */
static double coeff_of_variation(const double *v, size_t n) {
    if (n == 0) return 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    double mu = sum / (double)n, ss = 0;
    if (!(mu > 0)) return 0;
    for (size_t i = 0; i < n; i++) ss += (v[i] - mu) * (v[i] - mu);
    return sqrt(ss / (double)n) / mu;
}

/* The balance of p's F (kind LT_OP_F) or B (LT_OP_B) units: per pipeline, the coefficient of
 * variation of its units' times, each priced as a whole-stage op over stage 0's layers
 * without recomputation by the simulator's cost bridge at the pipeline's context-parallel
 * degree (a DP-Merge unit at its own, as the bridge does); then the mean over the pipelines
 * that have units. Per pipeline, as SlimPack's Fig. 14-16 measure "on a specific device":
 * ranks may choose different numbers of packs. B ops run the backward units of an
 * asymmetric schedule. */
static lt_status step_unit_cv(compare_state *c, const lt_step_plan *p, lt_op_kind kind, double *cv, lt_error *err) {
    double sum = 0;
    size_t pipelines = 0;
    for (size_t r = 0; r < p->n_ranks; r++) {
        const lt_rank_plan *rp = &p->ranks[r];
        const lt_schedule *s = &rp->sched;
        size_t units = kind == LT_OP_B && s->asym ? s->n_bunits : s->n_units;
        if (units == 0) continue;
        lt_cost_model cm = *c->cm;
        lt_status st = lt_cost_model_set_cp(&cm, rp->cp, err);
        if (st != LT_OK) return st;
        if (units > c->cap_times) {
            c->cap_times = 2 * units;
            c->times = lt_realloc_check(c->times, c->cap_times * sizeof *c->times);
        }
        uint32_t layer_begin, layer_end;
        lt_schedule_stage_layers(s->layers, s->stages, 0, &layer_begin, &layer_end);
        lt_sim_costs costs = lt_cost_sim_costs_prepared(&c->cost, &cm, s);
        for (size_t u = 0; u < units; u++) {
            lt_op op = {(uint8_t)kind, LT_PART_ALL, 0, (uint32_t)u, layer_begin, layer_end};
            lt_op_cost oc;
            memset(&oc, 0, sizeof oc);
            costs.op_cost(costs.ctx, s, 0, &op, &oc);
            c->times[u] = oc.time;
        }
        sum += coeff_of_variation(c->times, units);
        pipelines++;
    }
    *cv = pipelines ? sum / (double)pipelines : 0;
    return LT_OK;
}

static lt_status collect(void *ctx, const lt_planned_step *ps, lt_error *err) {
    compare_state *c = ctx;
    for (size_t k = 0; k < c->n; k++) /* the step's bound, from the lengths of any plan of it */
        if (ps->status[k] == LT_OK) {
            c->bound[ps->index] = lt_cost_step_bound(c->cm, ps->plans[k].lengths, ps->plans[k].n_samples, c->context_len);
            break;
        }
    for (size_t k = 0; k < c->n; k++) {
        strat_result *r = &c->res[k];
        if (ps->status[k] != LT_OK) {
            if (!r->failed) {
                r->failed = true;
                r->fail_step = ps->step;
                r->fail_err = ps->errors[k];
            }
            continue;
        }
        const lt_step_plan *p = &ps->plans[k];
        r->time_s[ps->index] = p->time_s;
        r->bubble[ps->index] = p->bubble_ratio;
        r->peak[ps->index] = p->peak_mem;
        r->solve_ms[ps->index] = p->solve_ms;
        snprintf(r->params, sizeof r->params, "%s", p->params);
        lt_status st = step_unit_cv(c, p, LT_OP_F, &r->cv_fwd[ps->index], err);
        if (st == LT_OK) st = step_unit_cv(c, p, LT_OP_B, &r->cv_bwd[ps->index], err);
        if (st != LT_OK) return st;
        r->merges += p->n_merges;
        if ((unsigned)p->strategy < LT_STRATEGY_COUNT) r->picked[p->strategy]++;
    }
    return LT_OK;
}

static double mean(const double *v, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += v[i];
    return n ? s / (double)n : 0.0;
}

static double max_of(const double *v, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] > m) m = v[i];
    return m;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (the mean of the two middle values when n is even; 0 when n is 0). */
static double median(const double *v, size_t n) {
    if (n == 0) return 0;
    double *w = lt_malloc_check(n * sizeof *w);
    memcpy(w, v, n * sizeof *w);
    qsort(w, n, sizeof *w, cmp_double);
    double m = n % 2 ? w[n / 2] : 0.5 * (w[n / 2 - 1] + w[n / 2]);
    free(w);
    return m;
}

/* "auto picked: slimpack 7, infinipipe 3": the strategies r's plans were made with, most
 * picked first (ties in strategy order). */
static void print_picks(const strat_result *r) {
    printf("%s picked:", lt_strategy_name(r->strategy));
    bool done[LT_STRATEGY_COUNT] = {false};
    for (const char *sep = " ";; sep = ", ") {
        int best = -1;
        for (int s = 0; s < LT_STRATEGY_COUNT; s++)
            if (!done[s] && r->picked[s] && (best < 0 || r->picked[s] > r->picked[best])) best = s;
        if (best < 0) break;
        done[best] = true;
        printf("%s%s %zu", sep, lt_strategy_name((lt_strategy)best), r->picked[best]);
    }
    printf("\n");
}

/* Parse "A,B,..." into res (megatron added, unshown, when missing). */
static int parse_strategies(const lt_cli_ctx *ctx, const char *list, strat_result **out, size_t *n) {
    lt_strategy listed[LT_STRATEGY_COUNT];
    size_t count = 0;
    int rc = planner_parse_strategies(ctx, "--strategies", list, listed, &count);
    if (rc) return rc;
    strat_result *res = lt_calloc_check(LT_STRATEGY_COUNT + 1, sizeof *res);
    bool has_megatron = false;
    for (size_t k = 0; k < count; k++) {
        res[k].strategy = listed[k];
        res[k].shown = true;
        has_megatron |= listed[k] == LT_STRATEGY_MEGATRON;
    }
    if (!has_megatron) res[count++].strategy = LT_STRATEGY_MEGATRON;
    *out = res;
    *n = count;
    return 0;
}

int compare_command(lt_cli_ctx *ctx) {
    compare_args a;
    int rc = parse_args(ctx, &a);
    if (rc) return rc;
    strat_result *res = NULL;
    size_t n = 0;
    if ((rc = parse_strategies(ctx, a.strategies, &res, &n)) != 0) return rc;

    lt_error err;
    lt_error_clear(&err);
    lt_plan_config pc;
    lt_sampler_config sc = {0};
    lt_corpus *corpus = NULL;
    uint64_t *steps = NULL;
    lt_strategy *strategies = lt_calloc_check(n, sizeof *strategies);
    int64_t n_steps = a.steps;
    lt_status st = lt_plan_config_from(&pc, ctx->config, a.hardware_dir, &err);
    if (st == LT_OK && !n_steps) st = lt_config_get_int(ctx->config, "plan", "steps", &n_steps, &err);
    if (st == LT_OK) st = planner_sampler_config(ctx->config, &pc, &sc, &err);
    if (st == LT_OK) st = planner_load_corpus(NULL, a.lengths, &corpus, &err);
    if (st == LT_OK && n_steps > 100000000)
        st = lt_fail(&err, LT_ERR_USAGE, NULL, "%" PRId64 " steps: compare plans at most 100,000,000", n_steps);
    if (st != LT_OK) goto out;

    steps = lt_malloc_check((size_t)n_steps * sizeof *steps);
    for (int64_t t = 0; t < n_steps; t++) steps[t] = (uint64_t)t;
    for (size_t k = 0; k < n; k++) {
        strategies[k] = res[k].strategy;
        res[k].time_s = lt_calloc_check((size_t)n_steps, sizeof(double));
        res[k].bubble = lt_calloc_check((size_t)n_steps, sizeof(double));
        res[k].peak = lt_calloc_check((size_t)n_steps, sizeof(double));
        res[k].solve_ms = lt_calloc_check((size_t)n_steps, sizeof(double));
        res[k].cv_fwd = lt_calloc_check((size_t)n_steps, sizeof(double));
        res[k].cv_bwd = lt_calloc_check((size_t)n_steps, sizeof(double));
    }
    if (!a.quiet)
        fprintf(stderr, "planner: comparing %zu strateg%s over %" PRId64 " steps of %" PRId64 " samples <= %" PRId64
                " tokens from %s\n", n, n == 1 ? "y" : "ies", n_steps, sc.global_batch, sc.context_len, a.lengths);
    compare_state cs = {res, n, &pc.cm, pc.context_len, lt_calloc_check((size_t)n_steps, sizeof(double)), {0}, NULL, 0};
    st = lt_plan_steps(corpus, &sc, &pc, strategies, n, steps, (size_t)n_steps, (int)a.threads, collect, &cs, &err);
    lt_cost_sim_ctx_free(&cs.cost);
    free(cs.times);
    double bound = 0;
    for (int64_t t = 0; t < n_steps; t++) bound += cs.bound[t];
    bound = n_steps ? bound / (double)n_steps : 0;
    free(cs.bound);
    if (st != LT_OK) goto out;

    size_t ns = (size_t)n_steps;
    double ref = 0;
    bool ref_ok = false;
    for (size_t k = 0; k < n; k++)
        if (res[k].strategy == LT_STRATEGY_MEGATRON && !res[k].failed) {
            ref = mean(res[k].time_s, ns);
            ref_ok = true;
        }
    bool tsv = strcmp(a.format, "tsv") == 0;
    if (tsv)
        printf("strategy\tpredicted_ms\tbubble_ratio\tpeak_mem_bytes\tspeedup_vs_megatron\tplan_ms_per_step\n");
    else
        printf("%-11s %13s %8s %14s %9s %8s %14s %12s %7s %7s %7s  %s\n", "strategy", "predicted_ms", "bubble",
               "peak_mem_GiB", "speedup", "x_bound", "plan_ms/step", "plan_ms_p50", "cv_fwd", "cv_bwd", "merges",
               "choices (last step)");
    int failures = 0;
    for (size_t k = 0; k < n; k++) {
        strat_result *r = &res[k];
        if (!r->shown) continue;
        const char *name = lt_strategy_name(r->strategy);
        if (r->failed) {
            failures++;
            if (tsv) printf("%s\tnan\tnan\tnan\tnan\tnan\n", name);
            else printf("%-11s failed at step %" PRIu64 ": %s\n", name, r->fail_step, r->fail_err.what);
            continue;
        }
        double t = mean(r->time_s, ns), speedup = ref_ok && t > 0 ? ref / t : NAN;
        if (tsv)
            printf("%s\t%.3f\t%.4f\t%.0f\t%.3f\t%.3f\n", name, 1e3 * t, mean(r->bubble, ns), max_of(r->peak, ns),
                   speedup, mean(r->solve_ms, ns));
        else
            printf("%-11s %13.1f %8.3f %14.1f %8.2fx %7.2fx %14.2f %12.2f %7.3f %7.3f %7zu  %s\n", name, 1e3 * t,
                   mean(r->bubble, ns), max_of(r->peak, ns) / 1073741824.0, speedup, bound > 0 ? t / bound : NAN,
                   mean(r->solve_ms, ns), median(r->solve_ms, ns), mean(r->cv_fwd, ns), mean(r->cv_bwd, ns),
                   r->merges, r->params);
    }
    for (size_t k = 0; k < n && !tsv; k++)
        if (res[k].shown && !res[k].failed && res[k].strategy == LT_STRATEGY_AUTO) print_picks(&res[k]);
    for (size_t k = 0; k < n; k++)
        if (res[k].failed && (res[k].shown || !ref_ok)) {
            lt_error_print(&res[k].fail_err, NULL);
            if (!res[k].shown) failures++;
        }
    if (!ref_ok && !tsv) printf("(no speedup: megatron failed)\n");
    st = failures ? LT_ERR_INPUT : LT_OK;
    rc = failures ? 1 : 0;

out:
    if (st != LT_OK && rc == 0) {
        lt_error_print(&err, NULL);
        rc = lt_exit_code(st);
    }
    for (size_t k = 0; k < n; k++) {
        free(res[k].time_s);
        free(res[k].bubble);
        free(res[k].peak);
        free(res[k].solve_ms);
        free(res[k].cv_fwd);
        free(res[k].cv_bwd);
    }
    free(res);
    free(strategies);
    free(steps);
    planner_sampler_config_clear(&sc);
    lt_corpus_free(corpus);
    return rc;
}
