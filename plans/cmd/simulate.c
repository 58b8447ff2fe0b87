/*
 * plans/cmd/simulate.c — `planner simulate`: the DAG simulator on its own (CONTRACTS.md).
 *
 * Two modes:
 *   unit time   --unit-lengths L1,L2,...: each Li is one sample of Li time units; an F takes
 *               as many units as its unit holds, a B twice that, no communication (the model
 *               of ChunkFlow Sec. 3; lt_sim_unit_costs).
 *   cost model  --lengths L1,... or --lengths-file FILE: samples of that many tokens, timed
 *               by the cost model (plans/cost/cost.h) of the config's [model], [parallel] and
 *               plan.hardware (or --model / --hardware).
 * The schedule (--schedule) decides how samples become units (whole, sliced, chunked) and
 * the op order per stage (plans/schedule/schedule.h generators). Prints a summary per stage, an
 * ASCII timeline and, last, the line "step_time=T bubble_ratio=R" (T in time units, or in
 * milliseconds in the cost-model mode).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cli.h"                 /* lt_cli_ctx, lt_cli_option_value, lt_cli_usage */
#include "lib/files.h"               /* lt_atomic_file */
#include "lib/model.h"               /* lt_model_from_config */
#include "lib/strutil.h"             /* lt_parse_int64 */
#include "plans/cost/cost.h"         /* lt_cost_model, lt_cost_sim_costs */
#include "plans/cost/hardware.h"     /* lt_hardware_load */
#include "plans/batches/lengths.h"   /* lt_lengths_read, lt_lengths_parse_list */
#include "plans/cmd/planner.h"       /* simulate_command */
#include "plans/schedule/schedule.h" /* lt_schedule, lt_sched_* */
#include "plans/schedule/sim.h"      /* lt_sim_run */

typedef enum sched_kind { S_GPIPE, S_1F1B, S_SEQ1F1B, S_CHUNKFLOW, S_MULTI_1F1B, S_HELIXPIPE } sched_kind;

static const char *const sched_names[] = {"gpipe", "1f1b", "seq1f1b", "chunkflow", "multi-1f1b", "helixpipe"};
#define N_SCHEDS (sizeof sched_names / sizeof sched_names[0])

typedef struct sim_args {
    sched_kind kind;
    int stages, layers;   /* 0 = default */
    const char *unit_lengths, *lengths, *lengths_file;
    int64_t slices, chunk_size, k;
    const char *groups, *order, *svg, *model, *hardware, *hardware_dir;
    int width;
    bool no_timeline, critical;
} sim_args;

/* qsort_r comparator of sample indices by length, longest first when *desc; ties keep the
 * given order. */
typedef struct by_length {
    const int64_t *lens;
    bool desc;
} by_length;

static int cmp_by_length(const void *a, const void *b, void *arg) {
    const by_length *k = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (k->lens[i] != k->lens[j]) return (k->lens[i] < k->lens[j]) == k->desc ? 1 : -1;
    return (i > j) - (i < j);
}

/* Reorder lens[] in place per `order`: "given" (as listed), "longest-first", "shortest-first". */
static int apply_order(const lt_cli_ctx *ctx, const char *order, int64_t *lens, size_t n) {
    if (!order || strcmp(order, "given") == 0) return 0;
    by_length key = {lens, strcmp(order, "longest-first") == 0};
    if (!key.desc && strcmp(order, "shortest-first") != 0)
        return lt_cli_usage(ctx, "--order '%.40s': want given, longest-first or shortest-first", order);
    size_t *idx = lt_malloc_check(n * sizeof *idx);
    int64_t *copy = lt_malloc_check(n * sizeof *copy);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    qsort_r(idx, n, sizeof *idx, cmp_by_length, &key);
    for (size_t i = 0; i < n; i++) copy[i] = lens[idx[i]];
    memcpy(lens, copy, n * sizeof *lens);
    free(copy);
    free(idx);
    return 0;
}

static int parse_args(lt_cli_ctx *ctx, sim_args *a) {
    memset(a, 0, sizeof *a);
    a->kind = (sched_kind)-1;
    a->width = 100;
    a->slices = 2;
    a->k = 1;
    for (int i = 1; i < ctx->argc; i++) {
        const char *arg = ctx->argv[i], *v;
        int missing = 0;
        int64_t num;
        struct {
            const char *name;
            const char **str;
            int64_t *num;
        } opts[] = {
            {"--schedule", NULL, NULL},          {"--stages", NULL, NULL},
            {"--layers", NULL, NULL},            {"--unit-lengths", &a->unit_lengths, NULL},
            {"--lengths", &a->lengths, NULL},    {"--lengths-file", &a->lengths_file, NULL},
            {"--slices", NULL, &a->slices},      {"--chunk-size", NULL, &a->chunk_size},
            {"--k", NULL, &a->k},                {"--groups", &a->groups, NULL},
            {"--order", &a->order, NULL},        {"--svg", &a->svg, NULL},
            {"--model", &a->model, NULL},        {"--hardware", &a->hardware, NULL},
            {"--hardware-dir", &a->hardware_dir, NULL}, {"--width", NULL, NULL},
        };
        bool matched = false;
        for (size_t o = 0; o < sizeof opts / sizeof opts[0] && !matched && !missing; o++) {
            if (!(v = lt_cli_option_value(ctx->argc, ctx->argv, &i, opts[o].name, &missing))) continue;
            matched = true;
            const char *name = opts[o].name;
            if (opts[o].str) {
                *opts[o].str = v;
            } else if (strcmp(name, "--schedule") == 0) {
                size_t s = 0;
                while (s < N_SCHEDS && strcmp(v, sched_names[s]) != 0) s++;
                if (s == N_SCHEDS)
                    return lt_cli_usage(ctx,
                                        "--schedule '%.40s': want gpipe, 1f1b, seq1f1b, chunkflow, multi-1f1b or "
                                        "helixpipe",
                                        v);
                a->kind = (sched_kind)s;
            } else {
                if (lt_parse_int64(v, &num) != LT_OK || num < 1 || num > 1000000000)
                    return lt_cli_usage(ctx, "%s '%.40s': want a positive integer", name, v);
                if (strcmp(name, "--stages") == 0) a->stages = (int)num;
                else if (strcmp(name, "--layers") == 0) a->layers = (int)num;
                else if (strcmp(name, "--width") == 0) a->width = (int)(num < 20 ? 20 : num > 1000 ? 1000 : num);
                else *opts[o].num = num;
            }
        }
        if (missing) return lt_cli_usage(ctx, "option '%.200s' needs a value", arg);
        if (matched) continue;
        if (strcmp(arg, "--no-timeline") == 0) a->no_timeline = true;
        else if (strcmp(arg, "--critical-path") == 0) a->critical = true;
        else if (arg[0] == '-') return lt_cli_unknown_option(ctx, arg);
        else return lt_cli_usage(ctx, "unexpected argument '%.200s'", arg);
    }
    if ((int)a->kind < 0) return lt_cli_usage(ctx, "which schedule? give --schedule NAME");
    int modes = !!a->unit_lengths + !!a->lengths + !!a->lengths_file;
    if (modes != 1)
        return lt_cli_usage(ctx, "give exactly one of --unit-lengths L1,L2,... (time units), --lengths L1,... or "
                                 "--lengths-file FILE (tokens, with the cost model)");
    if (a->unit_lengths && (a->model || a->hardware || a->hardware_dir))
        return lt_cli_usage(ctx, "--model, --hardware and --hardware-dir need --lengths or --lengths-file "
                                 "(the unit-time mode has no cost model)");
    if (a->kind == S_CHUNKFLOW && a->chunk_size == 0)
        return lt_cli_usage(ctx, "--schedule chunkflow needs --chunk-size (in the lengths' unit)");
    if (a->kind == S_MULTI_1F1B && !a->groups)
        return lt_cli_usage(ctx, "--schedule multi-1f1b needs --groups N1,N2,... (units per pipeline)");
    if (a->k > 65535) return lt_cli_usage(ctx, "--k %" PRId64 " is too large", a->k);
    return 0;
}

/* Build units from the sample lengths per the schedule kind, then its ops. */
static lt_status build(const sim_args *a, lt_schedule *s, const int64_t *lens, size_t n, lt_error *err) {
    lt_status st = LT_OK;
    switch (a->kind) {
    case S_SEQ1F1B: lt_sched_units_sliced(s, lens, n, (int)a->slices); break;
    case S_CHUNKFLOW: lt_sched_units_chunked(s, lens, n, a->chunk_size); break;
    default: lt_sched_units_whole(s, lens, n); break;
    }
    switch (a->kind) {
    case S_GPIPE: lt_sched_gpipe(s, NULL, s->n_units); break;
    case S_1F1B: lt_sched_1f1b(s, NULL, s->n_units); break;
    case S_SEQ1F1B: lt_sched_seq1f1b(s, NULL, s->n_units); break;
    case S_CHUNKFLOW: lt_sched_chunkflow(s, NULL, s->n_units, (int)a->k); break;
    case S_MULTI_1F1B: {
        int64_t *g = NULL;
        size_t ng = 0;
        if ((st = lt_lengths_parse_list(a->groups, "--groups", &g, &ng, err)) != LT_OK) return st;
        size_t *start = lt_malloc_check((ng + 1) * sizeof *start);
        size_t sum = 0;
        for (size_t i = 0; i < ng; i++) {
            start[i] = sum;
            sum += (size_t)g[i];
        }
        start[ng] = sum;
        if (sum != s->n_units)
            st = lt_fail(err, LT_ERR_USAGE, "--groups", "the groups hold %zu units, the samples make %zu", sum,
                         s->n_units);
        else
            lt_sched_multi_1f1b(s, NULL, s->n_units, start, ng);
        free(start);
        free(g);
        break;
    }
    case S_HELIXPIPE: st = lt_sched_helixpipe(s, NULL, s->n_units, err); break;
    }
    return st;
}

static void print_summary(const lt_sim *sim, bool unit_mode, double scale, const char *unit) {
    printf("%-6s %14s %10s %16s\n", "stage", unit_mode ? "busy" : "busy_ms", "idle", unit_mode ? "peak_in_flight" : "peak_mem_GiB");
    for (int st = 0; st < sim->stages; st++) {
        double idle = sim->step_time - sim->busy[st];
        printf("%-6d %14.6g %9.1f%% %16.6g\n", st, sim->busy[st] * scale,
               sim->step_time > 0 ? 100.0 * idle / sim->step_time : 0.0,
               unit_mode ? sim->peak_mem[st] : sim->peak_mem[st] / (1024.0 * 1024.0 * 1024.0));
    }
    printf("ops %zu, critical path %zu ops, step time %.6g %s\n", sim->n_ops, sim->n_critical, sim->step_time * scale,
           unit);
}

static void print_critical(const lt_sim *sim, const lt_schedule *s, double scale) {
    printf("critical path:");
    for (size_t i = 0; i < sim->n_critical; i++) {
        int stage;
        size_t idx;
        char name[64];
        lt_sim_op_at(sim, sim->critical[i], &stage, &idx);
        printf("%s %s@s%d[%.6g-%.6g]", i ? " ->" : "", lt_op_name(&s->stage[stage].ops[idx], name, sizeof name), stage,
               sim->start[sim->critical[i]] * scale, sim->finish[sim->critical[i]] * scale);
    }
    printf("\n");
}

static lt_status write_svg(const char *path, const lt_sim *sim, const lt_schedule *s, const char *title,
                           lt_error *err) {
    lt_atomic_file af;
    lt_status st = lt_atomic_open(&af, path, err);
    if (st != LT_OK) return st;
    st = lt_sim_write_svg(af.fp, sim, s, title, err);
    if (st != LT_OK) {
        lt_atomic_abort(&af);
        return st;
    }
    return lt_atomic_commit(&af, err);
}

int simulate_command(lt_cli_ctx *ctx) {
    sim_args a;
    int rc = parse_args(ctx, &a);
    if (rc) return rc;
    lt_error err;
    lt_error_clear(&err);
    bool unit_mode = a.unit_lengths != NULL;
    int64_t *lens = NULL;
    size_t n = 0;
    lt_status st;
    if (a.unit_lengths) st = lt_lengths_parse_list(a.unit_lengths, "--unit-lengths", &lens, &n, &err);
    else if (a.lengths) st = lt_lengths_parse_list(a.lengths, "--lengths", &lens, &n, &err);
    else st = lt_lengths_read(a.lengths_file, &lens, &n, &err);
    if (st != LT_OK) return lt_error_exit(&err);
    size_t kept = 0; /* empty documents of a lengths file make no sample */
    for (size_t i = 0; i < n; i++)
        if (lens[i] > 0) lens[kept++] = lens[i];
    if (kept == 0) {
        free(lens);
        lt_fail(&err, LT_ERR_INPUT, a.lengths_file, "every length in the file is 0: nothing to schedule");
        return lt_error_exit(&err);
    }
    n = kept;
    if ((rc = apply_order(ctx, a.order, lens, n))) {
        free(lens);
        return rc;
    }

    lt_cost_model cm;
    lt_sim_costs costs = lt_sim_unit_costs();
    int stages = a.stages, layers = a.layers;
    if (!unit_mode) {
        lt_model_shape m;
        lt_hardware hw;
        int64_t pp, tp, dp;
        lt_config_get_int(ctx->config, "parallel", "pp", &pp, NULL);
        lt_config_get_int(ctx->config, "parallel", "tp", &tp, NULL);
        lt_config_get_int(ctx->config, "parallel", "dp", &dp, NULL);
        if (!stages) stages = (int)pp;
        const char *hwname = a.hardware ? a.hardware : lt_config_get_string(ctx->config, "plan", "hardware");
        if ((st = lt_model_from_config(ctx->config, a.model, &m, &err)) != LT_OK ||
            (st = lt_hardware_load(&hw, hwname, a.hardware_dir, &err)) != LT_OK ||
            (st = lt_cost_model_init(&cm, &m, &hw, stages, (int)tp, (int)dp, &err)) != LT_OK) {
            free(lens);
            return lt_error_exit(&err);
        }
        if ((st = lt_shard_from_config(ctx->config, &cm.shard, &err)) != LT_OK) {
            free(lens);
            return lt_error_exit(&err);
        }
        if (!layers) layers = m.layers;
        else if (layers != m.layers) {
            free(lens);
            return lt_cli_usage(ctx, "--layers %d differs from the model's %d layers (cost-model mode)", layers,
                                m.layers);
        }
    } else {
        if (!stages) {
            free(lens);
            return lt_cli_usage(ctx, "how many pipeline stages? give --stages P");
        }
        if (!layers) layers = a.kind == S_HELIXPIPE ? 2 * stages : stages;
    }

    lt_schedule s;
    lt_sim sim = {0};
    if ((st = lt_schedule_init(&s, stages, layers, &err)) != LT_OK) {
        free(lens);
        return lt_error_exit(&err);
    }
    lt_cost_sim_ctx cctx = {0};
    st = build(&a, &s, lens, n, &err);
    if (st == LT_OK && !unit_mode) costs = lt_cost_sim_costs_prepared(&cctx, &cm, &s);
    if (st == LT_OK) st = lt_sim_run(&sim, &s, &costs, &err);
    if (st == LT_OK) {
        double scale = unit_mode ? 1.0 : 1e3;
        const char *unit = unit_mode ? "time units" : "ms";
        printf("schedule %s, %d stages, %d layers, %zu samples -> %zu units, %s\n", sched_names[a.kind], stages,
               layers, n, s.n_units, unit_mode ? "unit-time model (F = length, B = 2 x length)" : "cost model");
        print_summary(&sim, unit_mode, scale, unit);
        if (a.critical) print_critical(&sim, &s, scale);
        if (!a.no_timeline) lt_sim_print_timeline(stdout, &sim, &s, a.width);
        if (a.svg) {
            char title[256];
            snprintf(title, sizeof title, "%s, %d stages, %zu samples: step %.6g %s, bubble %.2f%%",
                     sched_names[a.kind], stages, n, sim.step_time * scale, unit, 100.0 * sim.bubble_ratio);
            st = write_svg(a.svg, &sim, &s, title, &err);
        }
        if (st == LT_OK) printf("step_time=%.6g bubble_ratio=%.6f\n", sim.step_time * scale, sim.bubble_ratio);
    }
    lt_sim_free(&sim);
    lt_cost_sim_ctx_free(&cctx);
    lt_schedule_free(&s);
    free(lens);
    if (st != LT_OK) return lt_error_exit(&err);
    return 0;
}
