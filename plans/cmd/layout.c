/*
 * plans/cmd/layout.c — `planner layout`: choose the parallel layout of a run (docs/strategies.md,
 * "Choosing a layout").
 *
 *   planner layout --config FILE --lengths FILE --gpus N [--strategies A,B,...] [--shard none,zero1,...]
 *                  [--steps K] [--max-candidates M] [--time-limit S] [--format table|tsv]
 *                  [--threads T] [--hardware-dir DIR]
 *
 * Beyond the papers: each paper fixes its layout by hand (SlimPack 6.1 trains Llama 13B as DP 8
 * x PP 4 x TP 4; ChunkFlow 6.2, Table 3 lists the Megatron configurations it tuned) and Megatron
 * users tune tp, pp, cp and sharding by trial. This command enumerates the layouts of N GPUs,
 * plans the same sampled steps under each with the strategies engine, the path `planner
 * compare` takes (lt_plan_steps over the config of the layout), and ranks them by predicted
 * step time. What it enumerates, for the config's [model] on the plan.hardware profile:
 *
 *   tp        divides the attention heads, the K/V heads, the MLP width (the trainer's split)
 *             and gpus_per_node (a TP group stays inside a node): lt_cost_model_init's rules
 *   pp        tp x pp divides N, pp <= layers
 *   dp        N / (tp x pp); a layout with dp > plan.global_batch is refused (a DP rank would
 *             train no sample); the strategies need no other divisibility (they split a step's
 *             samples by tokens and FLOPs, not by count)
 *   shard     the parallel.shard modes asked for (--shard; default none,zero1: zero2 and fsdp
 *             hold no less at a step's peak, plans/cost/cost.h lt_shard); at dp = 1 only the
 *             first, since every mode shards over the DP ranks and does nothing at one
 *   strategy  --strategies (default megatron,seq1f1b,chunkflow,infinipipe,slimpack)
 *
 * The context-parallel degree is not enumerated: each strategy picks it (once per run for
 * megatron and seq1f1b, per step for the others) up to parallel.max_cp; a row shows the
 * largest it used. A candidate (layout, shard mode, strategy) is refused without planning when
 * the model states and reserved memory of a stage exceed the cap (no strategy lowers them),
 * else when its strategy cannot be made for the layout (the megatron tuning: a context_len
 * micro-batch fits at no cp and recompute depth) or cannot fit a sampled step (the error of
 * lt_strategies_plan_step, naming the memory needed and the cap).
 *
 * MFU is the model's FLOPs (3 x the forward, lt_model_forward_flops: the backward counted as
 * twice the forward, no recomputation, whatever the TP, CP and recompute choices) of the
 * sampled steps' samples / (N x the profile's peak x the steps' predicted time).
 *
 * Exit status: 0 when a candidate was planned, 1 when every one was refused or not planned,
 * 2 for bad usage or config, 1 for a lengths file that does not parse.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/cli.h"               /* lt_cli_ctx, lt_cli_usage, lt_cli_unknown_option */
#include "lib/config.h"            /* lt_config_set_value, lt_config_get_string */
#include "lib/log.h"               /* lt_log_enabled (--quiet is a common option) */
#include "lib/model.h"             /* lt_model_shape, lt_model_forward_flops */
#include "lib/progress.h"          /* lt_progress_* */
#include "plans/cost/cost.h"       /* lt_cost_model_states_bytes */
#include "plans/strategies/plan.h" /* lt_plan_config, lt_strategy, lt_step_plan */
#include "plans/batches/sampler.h" /* lt_corpus, lt_sampler_config, lt_sampler_create */
#include "plans/batches/steps.h"   /* lt_plan_steps */
#include "plans/cmd/planner.h"     /* layout_command, planner_* */

#define GIB 1073741824.0

/* How the model states are sharded over the DP ranks (parallel.shard, lt_shard): every mode
 * the cost model prices and the trainer runs. */
#define N_SHARD_MODES ((size_t)LT_SHARD_COUNT)

static const lt_strategy default_strategies[] = {LT_STRATEGY_MEGATRON, LT_STRATEGY_SEQ1F1B, LT_STRATEGY_CHUNKFLOW,
                                                 LT_STRATEGY_INFINIPIPE, LT_STRATEGY_SLIMPACK};

typedef struct layout_args {
    const char *lengths, *strategies, *shards, *format, *hardware_dir;
    int64_t gpus, steps, max_candidates, time_limit_s, threads;
    bool quiet;
    lt_strategy strategy[LT_STRATEGY_COUNT];
    size_t n_strategies;
    bool shard[N_SHARD_MODES]; /* asked for */
} layout_args;

/* Parse "none,zero1,..." into a->shard. Returns 0 or a usage error's exit status. */
static int parse_shards(const lt_cli_ctx *ctx, const char *list, layout_args *a) {
    size_t count = 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        size_t m = 0;
        while (m < N_SHARD_MODES && !(strlen(lt_shard_name((lt_shard)m)) == len && strncmp(p, lt_shard_name((lt_shard)m), len) == 0))
            m++;
        if (m == N_SHARD_MODES) {
            char known[128] = "";
            for (size_t k = 0; k < N_SHARD_MODES; k++) {
                strncat(known, k ? ", " : "", sizeof known - strlen(known) - 1);
                strncat(known, lt_shard_name((lt_shard)k), sizeof known - strlen(known) - 1);
            }
            return lt_cli_usage(ctx, "--shard '%.80s': unknown mode '%.*s' (the modes: %s)", list,
                                (int)(len > 40 ? 40 : len), p, known);
        }
        if (a->shard[m]) return lt_cli_usage(ctx, "--shard: '%s' is listed twice", lt_shard_name((lt_shard)m));
        a->shard[m] = true;
        count++;
        p += len;
        if (*p == ',') p++;
    }
    if (count == 0) return lt_cli_usage(ctx, "--shard: give at least one mode (none, zero1, zero2, fsdp)");
    return 0;
}

static int parse_args(lt_cli_ctx *ctx, layout_args *a) {
    memset(a, 0, sizeof *a);
    const planner_option opts[] = {
        {"--lengths", &a->lengths, NULL, 0},
        {"--strategies", &a->strategies, NULL, 0},
        {"--shard", &a->shards, NULL, 0},
        {"--format", &a->format, NULL, 0},
        {"--hardware-dir", &a->hardware_dir, NULL, 0},
        {"--gpus", NULL, &a->gpus, 1000000},
        {"--steps", NULL, &a->steps, 100000},
        {"--max-candidates", NULL, &a->max_candidates, 1000000},
        {"--time-limit", NULL, &a->time_limit_s, 100000000},
        {"--threads", NULL, &a->threads, 100000000},
    };
    for (int i = 1; i < ctx->argc; i++) {
        const char *arg = ctx->argv[i];
        int taken = planner_take_option(ctx, &i, opts, sizeof opts / sizeof opts[0]);
        if (taken > 1) return taken;
        if (taken) continue;
        if (arg[0] == '-') return lt_cli_unknown_option(ctx, arg);
        return lt_cli_usage(ctx, "unexpected argument '%.200s'", arg);
    }
    a->quiet = !lt_log_enabled(LT_LOG_INFO); /* -q / --quiet (lib/cli.h) sets the log level to warn */
    if (!a->lengths) return lt_cli_usage(ctx, "give the lengths: --lengths FILE (one token count per line)");
    if (!a->gpus) return lt_cli_usage(ctx, "how many GPUs? give --gpus N (a positive integer)");
    if (!a->steps) a->steps = 4;
    if (!a->max_candidates) a->max_candidates = 200;
    if (!a->time_limit_s) a->time_limit_s = 600;
    if (!a->format) a->format = "table";
    if (strcmp(a->format, "table") != 0 && strcmp(a->format, "tsv") != 0)
        return lt_cli_usage(ctx, "--format '%.40s': want table or tsv", a->format);
    int rc = 0;
    if (a->strategies) {
        rc = planner_parse_strategies(ctx, "--strategies", a->strategies, a->strategy, &a->n_strategies);
    } else {
        a->n_strategies = sizeof default_strategies / sizeof default_strategies[0];
        memcpy(a->strategy, default_strategies, sizeof default_strategies);
    }
    if (rc) return rc;
    if (a->shards) return parse_shards(ctx, a->shards, a);
    a->shard[LT_SHARD_NONE] = a->shard[LT_SHARD_ZERO1] = true; /* zero2, fsdp: no less at the peak (lt_shard) */
    return 0;
}

/* ---------------------------------------------------------------- candidates */

typedef enum cand_state {
    CAND_WAITING,     /* enumerated, not planned yet */
    CAND_PLANNED,     /* every sampled step planned */
    CAND_REFUSED,     /* out of memory, or not planable: reason says why */
    CAND_NOT_PLANNED, /* --max-candidates or --time-limit reached first */
} cand_state;

/* One layout (tp x pp x dp), shard mode and strategy. */
typedef struct candidate {
    int tp, pp, dp;
    size_t shard; /* an lt_shard */
    lt_strategy strategy;
    cand_state state;
    /* planned: over the sampled steps */
    double sum_time_s;  /* the steps' predicted times */
    double model_flops; /* the model's FLOPs of the steps' samples (3 x forward) */
    double peak_mem;    /* the largest peak per GPU of a step, bytes */
    int max_cp;         /* the largest context-parallel degree of a pipeline or DP-Merge group */
    char params[128];   /* the strategy's choices on the last step */
    /* refused: why (lt_error.what of the failure, or the model-states check) */
    char reason[LT_ERROR_WHAT_MAX];
} candidate;

typedef struct candidates {
    candidate *v;
    size_t n, cap;
} candidates;

static candidate *add_candidate(candidates *cs, int tp, int pp, int dp, size_t shard, lt_strategy s) {
    if (cs->n == cs->cap) {
        cs->cap = cs->cap ? 2 * cs->cap : 64;
        cs->v = lt_realloc_check(cs->v, cs->cap * sizeof *cs->v);
    }
    candidate *c = &cs->v[cs->n++];
    memset(c, 0, sizeof *c);
    c->tp = tp;
    c->pp = pp;
    c->dp = dp;
    c->shard = shard;
    c->strategy = s;
    c->state = CAND_WAITING;
    return c;
}

/* Every candidate of `gpus` GPUs for model m on nodes of gpus_per_node GPUs, in the order
 * tp, pp (both increasing), shard mode, strategy (as asked). A layout whose dp exceeds the
 * global batch is enumerated already refused. */
static void enumerate(const layout_args *a, const lt_model_shape *m, int gpus_per_node, int64_t global_batch,
                      candidates *cs) {
    int n = (int)a->gpus;
    for (int tp = 1; tp <= n && tp <= gpus_per_node; tp++) {
        if (n % tp || m->heads % tp || m->kv_heads % tp || m->ffn % tp || gpus_per_node % tp) continue;
        for (int pp = 1; pp <= n / tp && pp <= m->layers; pp++) {
            if ((n / tp) % pp) continue;
            int dp = n / tp / pp;
            bool first_mode = true;
            for (size_t k = 0; k < N_SHARD_MODES; k++) {
                if (!a->shard[k] || (dp == 1 && !first_mode)) continue;
                first_mode = false;
                for (size_t j = 0; j < a->n_strategies; j++) {
                    candidate *c = add_candidate(cs, tp, pp, dp, k, a->strategy[j]);
                    if (dp > global_batch) {
                        c->state = CAND_REFUSED;
                        snprintf(c->reason, sizeof c->reason,
                                 "dp = %d is more than plan.global_batch = %" PRId64
                                 ": a DP rank would train no sample",
                                 dp, global_batch);
                    }
                }
            }
        }
    }
}

/* ---------------------------------------------------------------- planning */

/* The plan config of c's layout and shard mode: the user's config with parallel.tp, pp, dp
 * and zero1 set (the copy `cfg`, changed in place), read as every command reads it. */
static lt_status layout_plan_config(lt_config *cfg, const candidate *c, const char *hardware_dir, lt_plan_config *pc,
                                    lt_error *err) {
    char tp[16], pp[16], dp[16];
    snprintf(tp, sizeof tp, "%d", c->tp);
    snprintf(pp, sizeof pp, "%d", c->pp);
    snprintf(dp, sizeof dp, "%d", c->dp);
    const char *origin = "planner layout";
    lt_status st = lt_config_set_value(cfg, "parallel", "tp", tp, origin, err);
    if (st == LT_OK) st = lt_config_set_value(cfg, "parallel", "pp", pp, origin, err);
    if (st == LT_OK) st = lt_config_set_value(cfg, "parallel", "dp", dp, origin, err);
    if (st == LT_OK) st = lt_config_set_value(cfg, "parallel", "shard", lt_shard_name((lt_shard)c->shard), origin, err);
    if (st == LT_OK) st = lt_config_set_value(cfg, "parallel", "zero1", "false", origin, err);
    if (st == LT_OK) st = lt_plan_config_from(pc, cfg, hardware_dir, err);
    return st;
}

/* Whether the model states and reserved memory of every stage fit cm's cap; when not,
 * *reason (n bytes) says by how much on the fullest stage. */
static bool model_states_fit(const lt_cost_model *cm, char *reason, size_t n) {
    int worst = 0;
    double worst_states = 0;
    for (int s = 0; s < cm->pp; s++) {
        double states = lt_cost_model_states_bytes(cm, s);
        if (states > worst_states) {
            worst_states = states;
            worst = s;
        }
    }
    double need = worst_states + cm->reserved_bytes;
    if (need <= cm->mem_cap) return true;
    snprintf(reason, n,
             "model states %.1f GiB + reserved %.1f GiB on stage %d need %.0f bytes, over the %.1f GiB cap "
             "(%.0f bytes) before any activation",
             worst_states / GIB, cm->reserved_bytes / GIB, worst, need, cm->mem_cap / GIB, cm->mem_cap);
    return false;
}

typedef struct collect_ctx {
    candidate *c;
    const lt_model_shape *model;
} collect_ctx;

/* lt_plan_steps' callback: add one step's plan to the candidate; the first step that cannot
 * be planned stops the candidate (its error is the refusal). */
static lt_status collect(void *ctx, const lt_planned_step *ps, lt_error *err) {
    collect_ctx *cc = ctx;
    candidate *c = cc->c;
    if (ps->status[0] != LT_OK) {
        if (err) *err = ps->errors[0];
        return ps->status[0];
    }
    const lt_step_plan *p = &ps->plans[0];
    c->sum_time_s += p->time_s;
    if (p->peak_mem > c->peak_mem) c->peak_mem = p->peak_mem;
    for (size_t i = 0; i < p->n_samples; i++)
        c->model_flops += 3.0 * lt_model_forward_flops(cc->model, (double)p->lengths[i]);
    for (size_t r = 0; r < p->n_ranks; r++)
        if (p->ranks[r].cp > c->max_cp) c->max_cp = p->ranks[r].cp;
    for (size_t g = 0; g < p->n_merges; g++)
        if (p->merges[g].cp > c->max_cp) c->max_cp = p->merges[g].cp;
    snprintf(c->params, sizeof c->params, "%s", p->params);
    return LT_OK;
}

/* Whether a planning failure refuses the candidate (the layout cannot be planned: over the
 * cap, an untunable baseline, a strategy's limit on the layout) rather than stopping the
 * command (a broken invariant, memory or I/O). */
static bool refuses(lt_status st) {
    return st == LT_ERR_INPUT || st == LT_ERR_CONFIG || st == LT_ERR_USAGE;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct plan_request {
    const layout_args *a;
    lt_config *cfg; /* the user's config, copied: each group's layout is set in it */
    const lt_corpus *corpus;
    const lt_sampler_config *sc;
    const uint64_t *steps;
    lt_progress *progress;
} plan_request;

/* Plan the waiting candidates of cs, group by group (the consecutive candidates of one
 * layout and shard mode share its plan config and its model-states check), until
 * --max-candidates have been planned or --time-limit has passed; the rest are marked not
 * planned. LT_OK, or the error that stopped the command (not a refusal). */
static lt_status plan_candidates(const plan_request *rq, candidates *cs, lt_error *err) {
    const layout_args *a = rq->a;
    double start = now_s();
    int64_t planned = 0;
    for (size_t i = 0; i < cs->n;) {
        size_t end = i + 1;
        candidate *first = &cs->v[i];
        while (end < cs->n && cs->v[end].tp == first->tp && cs->v[end].pp == first->pp &&
               cs->v[end].dp == first->dp && cs->v[end].shard == first->shard)
            end++;
        lt_plan_config pc;
        lt_error layout_err;
        lt_error_clear(&layout_err);
        lt_status layout_st = LT_OK;
        bool layout_ready = false;
        for (size_t k = i; k < end; k++) {
            candidate *c = &cs->v[k];
            if (c->state != CAND_WAITING) continue;
            lt_progress_add(rq->progress, 1); /* planned, refused or not planned below */
            bool out_of_time = now_s() - start > (double)a->time_limit_s;
            if (planned >= a->max_candidates || out_of_time) {
                c->state = CAND_NOT_PLANNED;
                snprintf(c->reason, sizeof c->reason, "%s reached",
                         out_of_time ? "--time-limit" : "--max-candidates");
                continue;
            }
            if (!layout_ready) {
                layout_st = layout_plan_config(rq->cfg, c, a->hardware_dir, &pc, &layout_err);
                if (layout_st != LT_OK && !refuses(layout_st)) {
                    if (err) *err = layout_err;
                    return layout_st;
                }
                layout_ready = true;
            }
            if (layout_st != LT_OK) {
                c->state = CAND_REFUSED;
                snprintf(c->reason, sizeof c->reason, "%s", layout_err.what);
                continue;
            }
            if (!model_states_fit(&pc.cm, c->reason, sizeof c->reason)) {
                c->state = CAND_REFUSED;
                continue;
            }
            pc.strategy = c->strategy;
            collect_ctx cc = {c, &pc.cm.model};
            lt_error plan_err;
            lt_error_clear(&plan_err);
            lt_status st = lt_plan_steps(rq->corpus, rq->sc, &pc, &c->strategy, 1, rq->steps, (size_t)a->steps,
                                         (int)a->threads, collect, &cc, &plan_err);
            planned++;
            if (st == LT_OK) {
                c->state = CAND_PLANNED;
            } else if (refuses(st)) {
                c->state = CAND_REFUSED;
                snprintf(c->reason, sizeof c->reason, "%s", plan_err.what);
            } else {
                if (err) *err = plan_err;
                return st;
            }
        }
        i = end;
    }
    return LT_OK;
}

/* ---------------------------------------------------------------- printing */

static int by_time(const void *x, const void *y) {
    const candidate *a = *(const candidate *const *)x, *b = *(const candidate *const *)y;
    if (a->sum_time_s != b->sum_time_s) return a->sum_time_s < b->sum_time_s ? -1 : 1;
    return (a > b) - (a < b); /* enumeration order */
}

/* The planned candidates of cs, fastest first (ties in enumeration order), in a new array
 * of *n entries (free() it). */
static candidate **ranked(const candidates *cs, size_t *n) {
    candidate **r = lt_calloc_check(cs->n ? cs->n : 1, sizeof *r);
    size_t k = 0;
    for (size_t i = 0; i < cs->n; i++)
        if (cs->v[i].state == CAND_PLANNED) r[k++] = &cs->v[i];
    qsort(r, k, sizeof *r, by_time);
    *n = k;
    return r;
}

static double mfu(const candidate *c, double gpus, double peak_flops) {
    return c->sum_time_s > 0 ? c->model_flops / (gpus * peak_flops * c->sum_time_s) : 0;
}

/* TSV: a header, the planned candidates ranked, then the refused and the not planned ones
 * in enumeration order; detail is a planned candidate's choices or the reason. */
static void print_tsv(const candidates *cs, candidate *const *rank, size_t n_ranked, const layout_args *a,
                      const lt_cost_model *cm) {
    printf("status\ttp\tpp\tdp\tmax_cp\tshard\tstrategy\tpredicted_ms\tmfu\tpeak_mem_bytes\tmem_cap_bytes\tdetail\n");
    double k = (double)a->steps;
    for (size_t i = 0; i < n_ranked; i++) {
        const candidate *c = rank[i];
        printf("ok\t%d\t%d\t%d\t%d\t%s\t%s\t%.3f\t%.4f\t%.0f\t%.0f\t%s\n", c->tp, c->pp, c->dp, c->max_cp,
               lt_shard_name((lt_shard)c->shard), lt_strategy_name(c->strategy), 1e3 * c->sum_time_s / k,
               mfu(c, (double)a->gpus, cm->hw.peak_flops), c->peak_mem, cm->mem_cap, c->params);
    }
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < cs->n; i++) {
            const candidate *c = &cs->v[i];
            if (c->state != (pass == 0 ? CAND_REFUSED : CAND_NOT_PLANNED)) continue;
            printf("%s\t%d\t%d\t%d\tnan\t%s\t%s\tnan\tnan\tnan\t%.0f\t%s\n", pass == 0 ? "refused" : "not_planned",
                   c->tp, c->pp, c->dp, lt_shard_name((lt_shard)c->shard), lt_strategy_name(c->strategy), cm->mem_cap,
                   c->reason);
        }
}

/* Whether candidate x of cs was planned in another shard mode of its layout. */
static bool planned_in_another_mode(const candidates *cs, const candidate *x) {
    for (size_t i = 0; i < cs->n; i++) {
        const candidate *c = &cs->v[i];
        if (c->state == CAND_PLANNED && c->tp == x->tp && c->pp == x->pp && c->dp == x->dp &&
            c->strategy == x->strategy)
            return true;
    }
    return false;
}

/* The table's refusals: per layout and strategy refused in every shard mode tried, the
 * reason of the last mode (the most frugal); a layout whose strategies all give the same
 * reason on one line ("all"). Returns the lines printed. */
static size_t print_refused(const candidates *cs) {
    size_t lines = 0;
    for (size_t i = 0; i < cs->n;) {
        size_t end = i;
        while (end < cs->n && cs->v[end].tp == cs->v[i].tp && cs->v[end].pp == cs->v[i].pp &&
               cs->v[end].dp == cs->v[i].dp)
            end++;
        /* the last refused mode of each strategy refused in every mode of the layout */
        const candidate *last[LT_STRATEGY_COUNT] = {NULL};
        for (size_t k = i; k < end; k++) {
            const candidate *c = &cs->v[k];
            if (c->state == CAND_REFUSED && !planned_in_another_mode(cs, c)) last[c->strategy] = c;
        }
        size_t n_refused = 0, n_strategies = 0;
        bool same = true;
        const candidate *one = NULL;
        bool seen[LT_STRATEGY_COUNT] = {false};
        for (size_t k = i; k < end; k++) {
            lt_strategy s = cs->v[k].strategy;
            if (seen[s]) continue;
            seen[s] = true;
            n_strategies++;
            if (!last[s]) continue;
            n_refused++;
            if (one && strcmp(one->reason, last[s]->reason) != 0) same = false;
            if (!one) one = last[s];
        }
        if (one && lines == 0)
            printf("\nrefused in every shard mode tried (the reason of the last, most frugal one):\n"
                   "%4s %4s %4s  %-6s %-11s %s\n", "tp", "pp", "dp", "shard", "strategy", "reason");
        if (one && same && n_refused == n_strategies && n_strategies > 1) {
            printf("%4d %4d %4d  %-6s %-11s %s\n", one->tp, one->pp, one->dp, lt_shard_name((lt_shard)one->shard), "all",
                   one->reason);
            lines++;
        } else if (one) {
            for (int s = 0; s < LT_STRATEGY_COUNT; s++) {
                const candidate *c = last[s];
                if (!c) continue;
                printf("%4d %4d %4d  %-6s %-11s %s\n", c->tp, c->pp, c->dp, lt_shard_name((lt_shard)c->shard),
                       lt_strategy_name(c->strategy), c->reason);
                lines++;
            }
        }
        i = end;
    }
    return lines;
}

static void print_table(const candidates *cs, candidate *const *rank, size_t n_ranked, const layout_args *a,
                        const lt_cost_model *cm, const char *model_name) {
    printf("layouts of %" PRId64 " GPUs for %s on %s (%d per node), cap %.1f GiB per GPU; %" PRId64
           " sampled steps of %s\n",
           a->gpus, model_name, cm->hw.name, cm->hw.gpus_per_node, cm->mem_cap / GIB, a->steps, a->lengths);
    double k = (double)a->steps;
    if (n_ranked)
        printf("%4s %4s %4s %4s %6s  %-6s %-11s %12s %6s %9s %8s  %s\n", "rank", "tp", "pp", "dp", "max_cp", "shard",
               "strategy", "step_ms", "mfu", "peak_GiB", "cap_GiB", "choices (last step)");
    for (size_t i = 0; i < n_ranked; i++) {
        const candidate *c = rank[i];
        printf("%4zu %4d %4d %4d %6d  %-6s %-11s %12.1f %6.3f %9.1f %8.1f  %s\n", i + 1, c->tp, c->pp, c->dp, c->max_cp,
               lt_shard_name((lt_shard)c->shard), lt_strategy_name(c->strategy), 1e3 * c->sum_time_s / k,
               mfu(c, (double)a->gpus, cm->hw.peak_flops), c->peak_mem / GIB, cm->mem_cap / GIB, c->params);
    }
    print_refused(cs);
    size_t partial = 0, not_planned = 0;
    for (size_t i = 0; i < cs->n; i++) {
        if (cs->v[i].state == CAND_REFUSED && planned_in_another_mode(cs, &cs->v[i])) partial++;
        if (cs->v[i].state == CAND_NOT_PLANNED) not_planned++;
    }
    if (partial)
        printf("\n(%zu candidate%s refused in one shard mode but planned in another: not listed; --format tsv lists "
               "them)\n",
               partial, partial == 1 ? "" : "s");
    if (not_planned)
        printf("\n%zu candidate%s not planned: --max-candidates %" PRId64 " or --time-limit %" PRId64
               " s reached first (raise them, or narrow --strategies / --shard)\n",
               not_planned, not_planned == 1 ? "" : "s", a->max_candidates, a->time_limit_s);
}

/* ---------------------------------------------------------------- the command */

int layout_command(lt_cli_ctx *ctx) {
    layout_args a;
    int rc = parse_args(ctx, &a);
    if (rc) return rc;

    lt_error err;
    lt_error_clear(&err);
    lt_config *cfg = NULL;
    lt_corpus *corpus = NULL;
    lt_sampler *sampler = NULL;
    uint64_t *steps = NULL;
    candidates cs = {NULL, 0, 0};
    candidate **rank = NULL;
    lt_progress *progress = NULL;
    size_t n_ranked = 0;

    /* The run as one GPU (tp = pp = dp = 1): the model, the profile, the cap and the
     * sampler settings every layout shares; a bad config is reported here, once. */
    lt_plan_config base;
    candidate one = {.tp = 1, .pp = 1, .dp = 1, .shard = 0};
    lt_status st = planner_config_copy(ctx, &cfg, &err);
    if (st == LT_OK) st = layout_plan_config(cfg, &one, a.hardware_dir, &base, &err);
    lt_sampler_config sc = {0};
    if (st == LT_OK) st = planner_sampler_config(ctx->config, &base, &sc, &err);
    if (st == LT_OK) st = planner_load_corpus(NULL, a.lengths, &corpus, &err);
    if (st == LT_OK) st = lt_sampler_create(&sampler, corpus, &sc, &err); /* global_batch against the corpus */
    lt_sampler_free(sampler);
    if (st != LT_OK) goto out;

    enumerate(&a, &base.cm.model, base.cm.hw.gpus_per_node, sc.global_batch, &cs);
    size_t waiting = 0;
    for (size_t i = 0; i < cs.n; i++) waiting += cs.v[i].state == CAND_WAITING;
    if (!a.quiet)
        fprintf(stderr,
                "planner: %zu candidate layouts x shard modes x strategies of %" PRId64 " GPUs (%zu to plan, at most %"
                PRId64 "), %" PRId64 " steps of %" PRId64 " samples <= %" PRId64 " tokens from %s\n",
                cs.n, a.gpus, waiting, a.max_candidates, a.steps, sc.global_batch, sc.context_len, a.lengths);
    steps = lt_malloc_check((size_t)a.steps * sizeof *steps);
    for (int64_t t = 0; t < a.steps; t++) steps[t] = (uint64_t)t;
    lt_progress_options po = {.quiet = a.quiet ? 1 : 0, .tty = -1};
    progress = lt_progress_start_opts("layout", waiting, "candidates", &po);
    plan_request rq = {&a, cfg, corpus, &sc, steps, progress};
    st = plan_candidates(&rq, &cs, &err);
    lt_progress_finish(progress);
    if (st != LT_OK) goto out;

    rank = ranked(&cs, &n_ranked);
    const char *preset = lt_config_get_string(ctx->config, "model", "preset");
    if (strcmp(a.format, "tsv") == 0) print_tsv(&cs, rank, n_ranked, &a, &base.cm);
    else print_table(&cs, rank, n_ranked, &a, &base.cm, preset ? preset : "the [model] of the config");
    if (n_ranked == 0) {
        st = lt_fail(&err, LT_ERR_INPUT, NULL, "no layout of %" PRId64 " GPUs could be planned: every candidate was "
                     "refused or not planned (listed above)", a.gpus);
        lt_error_hint(&err, "raise plan.mem or parallel.max_cp, lower plan.context_len, or give more --gpus");
    }

out:
    if (st != LT_OK) {
        lt_error_print(&err, NULL);
        rc = lt_exit_code(st);
    }
    free(rank);
    free(cs.v);
    free(steps);
    planner_sampler_config_clear(&sc);
    lt_corpus_free(corpus);
    lt_config_free(cfg);
    return rc;
}
