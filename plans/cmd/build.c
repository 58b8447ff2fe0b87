/*
 * plans/cmd/build.c — `planner build`: sample the steps, plan each with the run's strategy
 * on several threads (plans/batches/steps.h), store the plans (plans/store/store.h).
 *
 *   planner build --config FILE (--data DIR | --lengths FILE) --db FILE [--strategy NAME]
 *                 [--steps N] [--threads T] [--hardware-dir DIR] [--no-timings]
 *
 * --strategy and --steps are the same as --set plan.strategy=NAME / plan.steps=N: the
 * stored config shows them with the origin "--strategy" / "--steps".
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buildconfig.h"           /* PACKAGE_VERSION */
#include "lib/cli.h"               /* lt_cli_ctx, lt_cli_option_value, lt_cli_usage */
#include "lib/config.h"            /* lt_config_* */
#include "lib/progress.h"          /* lt_progress_* */
#include "lib/log.h"               /* lt_log_enabled (--quiet is a common option) */
#include "plans/strategies/plan.h" /* lt_strategies_* */
#include "plans/cmd/planner.h"     /* build_command, planner_config_copy */
#include "plans/batches/sampler.h" /* lt_corpus_*, lt_sampler_* */
#include "plans/batches/steps.h"   /* lt_plan_steps */
#include "plans/store/store.h"     /* lt_store_* */

typedef struct build_args {
    const char *data, *lengths, *db, *strategy, *hardware_dir;
    int64_t steps;   /* 0 = plan.steps */
    int64_t threads; /* 0 = one per CPU */
    bool no_timings, quiet;
} build_args;

static int parse_args(lt_cli_ctx *ctx, build_args *a) {
    memset(a, 0, sizeof *a);
    const planner_option opts[] = {
        {"--data", &a->data, NULL, 0},          {"--lengths", &a->lengths, NULL, 0},
        {"--db", &a->db, NULL, 0},              {"--strategy", &a->strategy, NULL, 0},
        {"--steps", NULL, &a->steps, 1000000000}, {"--threads", NULL, &a->threads, 1000000000},
        {"--hardware-dir", &a->hardware_dir, NULL, 0},
    };
    for (int i = 1; i < ctx->argc; i++) {
        const char *arg = ctx->argv[i];
        int taken = planner_take_option(ctx, &i, opts, sizeof opts / sizeof opts[0]);
        if (taken > 1) return taken;
        if (taken) continue;
        if (strcmp(arg, "--no-timings") == 0) a->no_timings = true;
        else if (arg[0] == '-') return lt_cli_unknown_option(ctx, arg);
        else return lt_cli_usage(ctx, "unexpected argument '%.200s'", arg);
    }
    a->quiet = !lt_log_enabled(LT_LOG_INFO); /* -q / --quiet (lib/cli.h) sets the log level to warn */
    if (!!a->data + !!a->lengths != 1)
        return lt_cli_usage(ctx, "give the input: --data DIR (a dataprep output) or --lengths FILE (one token count "
                                 "per line)");
    if (!a->db) return lt_cli_usage(ctx, "where do the plans go? give --db FILE");
    return 0;
}

/* The effective config of the run: ctx's, with --strategy / --steps applied. *owned is the
 * copy to free (NULL when ctx's is used as is). */
static lt_status effective_config(const lt_cli_ctx *ctx, const build_args *a, const lt_config **out,
                                  lt_config **owned, lt_error *err) {
    *owned = NULL;
    *out = ctx->config;
    if (!a->strategy && !a->steps) return LT_OK;
    lt_config *copy;
    lt_status st = planner_config_copy(ctx, &copy, err);
    if (st != LT_OK) return st;
    if (a->strategy) st = lt_config_set_value(copy, "plan", "strategy", a->strategy, "--strategy", err);
    if (st == LT_OK && a->steps) {
        char num[32];
        snprintf(num, sizeof num, "%" PRId64, a->steps);
        st = lt_config_set_value(copy, "plan", "steps", num, "--steps", err);
    }
    if (st != LT_OK) {
        lt_config_free(copy);
        return st == LT_ERR_CONFIG ? LT_ERR_USAGE : st;
    }
    *owned = copy;
    *out = copy;
    return LT_OK;
}

#define MIX_RANGES 4 /* the realized shares are reported per quarter of the steps planned */

typedef struct build_state {
    lt_store *store;
    lt_progress *progress;
    const char *db;
    /* totals over the steps planned now */
    size_t planned;
    double sum_time_s, sum_bubble, max_peak, sum_solve_ms;
    /* tokens per source in each of MIX_RANGES step ranges (a mixture's realized shares) */
    const lt_corpus *corpus;
    size_t n_todo;
    double *src_tokens; /* [MIX_RANGES][n_src], NULL without a mixture */
    uint64_t range_first[MIX_RANGES], range_last[MIX_RANGES];
} build_state;

static lt_status store_step(void *ctx, const lt_planned_step *ps, lt_error *err) {
    build_state *b = ctx;
    if (ps->status[0] != LT_OK) {
        if (err) *err = ps->errors[0];
        return ps->status[0];
    }
    const lt_step_plan *p = &ps->plans[0];
    lt_status st = lt_store_put_step(b->store, p, ps->samples, err);
    if (st != LT_OK) return st;
    b->planned++;
    b->sum_time_s += p->time_s;
    b->sum_bubble += p->bubble_ratio;
    b->sum_solve_ms += p->solve_ms;
    if (p->peak_mem > b->max_peak) b->max_peak = p->peak_mem;
    if (b->src_tokens) {
        size_t r = (b->planned - 1) * MIX_RANGES / b->n_todo, ns = lt_corpus_n_sources(b->corpus);
        if (b->range_last[r] == 0 && b->range_first[r] == 0) b->range_first[r] = ps->step + 1;
        b->range_last[r] = ps->step + 1; /* 1-based here, so that 0 means none */
        for (size_t i = 0; i < ps->n_samples; i++)
            b->src_tokens[r * ns + lt_corpus_doc_source(b->corpus, ps->samples[i].corpus_doc)] +=
                (double)ps->samples[i].length;
    }
    lt_progress_add(b->progress, 1);
    lt_progress_add_extra(b->progress, 0, ps->n_samples);
    return LT_OK;
}

/* The realized token shares of a mixture per step range, against the weights, and each
 * source's epoch after the last step (a source past epoch 0 repeats its data). */
static void report_mixture(const build_state *b, const lt_sampler_config *sc, lt_sampler *sampler,
                           uint64_t last_step) {
    size_t ns = lt_corpus_n_sources(b->corpus);
    lt_sample *tmp = lt_malloc_check((size_t)sc->global_batch * sizeof *tmp);
    lt_error e;
    size_t got;
    bool epochs = lt_sampler_step_n(sampler, last_step, tmp, &got, &e) == LT_OK;
    free(tmp);
    for (size_t r = 0; r < MIX_RANGES; r++) {
        if (b->range_last[r] == 0) continue;
        double tot = 0;
        for (size_t k = 0; k < ns; k++) tot += b->src_tokens[r * ns + k];
        fprintf(stderr, "planner: source shares of the tokens, steps %" PRIu64 "-%" PRIu64 ":", b->range_first[r] - 1,
                b->range_last[r] - 1);
        for (size_t k = 0; k < ns; k++) {
            const char *name = lt_corpus_source_name(b->corpus, (uint32_t)k);
            fprintf(stderr, " %s %.1f %% (weight %.1f %%)", name[0] ? name : "data",
                    tot > 0 ? 100 * b->src_tokens[r * ns + k] / tot : 0,
                    100 * lt_sampler_source_weight(sampler, (uint32_t)k));
        }
        fputc('\n', stderr);
    }
    if (epochs) {
        fprintf(stderr, "planner: epoch of each source after step %" PRIu64 ":", last_step);
        for (size_t k = 0; k < ns; k++) {
            const char *name = lt_corpus_source_name(b->corpus, (uint32_t)k);
            uint64_t ep = lt_sampler_source_epoch(sampler, (uint32_t)k);
            fprintf(stderr, " %s %" PRIu64 "%s", name[0] ? name : "data", ep, ep ? " (repeated)" : "");
        }
        fputc('\n', stderr);
    }
}

/* The documents' named sources as ranges of each task's documents (plans-schema.md,
 * source_ranges): the runs of one source in corpus order, cut at task boundaries. */
static lt_status store_sources(lt_store *store, const lt_corpus *c, lt_error *err) {
    lt_store_source_range *r = NULL;
    size_t n = 0, cap = 0;
    uint64_t nd = lt_corpus_n_docs(c);
    for (uint64_t d = 0; d < nd; d++) {
        uint32_t task, src = lt_corpus_doc_source(c, d);
        uint64_t doc;
        lt_corpus_doc_ref(c, d, &task, &doc);
        const char *name = lt_corpus_source_name(c, src);
        if (n > 0 && r[n - 1].task == task && r[n - 1].doc_end == doc && r[n - 1].source == name) {
            r[n - 1].doc_end++;
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            r = lt_realloc_check(r, cap * sizeof *r);
        }
        r[n++] = (lt_store_source_range){task, doc, doc + 1, name};
    }
    lt_status st = lt_store_put_sources(store, r, n, err);
    free(r);
    return st;
}

/* Fill the run description (strings borrowed from cfg, or static; freed by nobody). */
static void run_info_of(lt_run_info *r, const lt_config *cfg, const lt_plan_config *pc, const lt_strategies *pl,
                        char *config_text, char *fingerprint, const char *input, const lt_sampler_config *sc,
                        uint64_t n_samples) {
    memset(r, 0, sizeof *r);
    r->name = (char *)lt_config_get_string(cfg, "run", "name");
    r->strategy = (char *)lt_strategy_name(pc->strategy);
    r->config = config_text;
    r->fingerprint = fingerprint;
    r->input = (char *)input;
    r->sample_policy = (char *)lt_sample_policy_name(sc->policy);
    r->tuning = (char *)lt_strategies_params(pl);
    r->version = (char *)PACKAGE_VERSION;
    r->context_len = sc->context_len;
    r->global_batch = sc->global_batch;
    r->seed = (int64_t)sc->seed;
    r->dp = pc->cm.dp;
    r->pp = pc->cm.pp;
    r->tp = pc->cm.tp;
    r->layers = pc->cm.model.layers;
    r->mem_cap = pc->cm.mem_cap;
    r->n_samples_total = n_samples;
}

static int fail(lt_error *err, lt_status st) {
    lt_error_print(err, NULL);
    return lt_exit_code(st);
}

int build_command(lt_cli_ctx *ctx) {
    build_args a;
    int rc = parse_args(ctx, &a);
    if (rc) return rc;
    lt_error err;
    lt_error_clear(&err);
    const lt_config *cfg;
    lt_config *owned = NULL;
    lt_status st = effective_config(ctx, &a, &cfg, &owned, &err);
    if (st != LT_OK) return fail(&err, st);

    lt_plan_config pc;
    lt_sampler_config sc = {0};
    lt_corpus *corpus = NULL;
    lt_sampler *sampler = NULL;
    lt_strategies *planner = NULL;
    lt_store *store = NULL;
    char *config_text = NULL;
    uint64_t *todo = NULL;
    int64_t steps = 0;
    build_state b;
    memset(&b, 0, sizeof b);

    if ((st = lt_plan_config_from(&pc, cfg, a.hardware_dir, &err)) != LT_OK) goto out;
    if ((st = lt_config_get_int(cfg, "plan", "steps", &steps, &err)) != LT_OK) goto out;
    if (steps > 100000000) {
        st = lt_fail(&err, LT_ERR_CONFIG, lt_config_origin(cfg, "plan", "steps"),
                     "plan.steps = %" PRId64 " is more than the 100,000,000 steps one plan file holds", steps);
        goto out;
    }
    if ((st = planner_sampler_config(cfg, &pc, &sc, &err)) != LT_OK) goto out;
    if ((st = planner_load_corpus(a.data, a.lengths, &corpus, &err)) != LT_OK) goto out;
    if ((st = lt_sampler_create(&sampler, corpus, &sc, &err)) != LT_OK) goto out;
    if ((st = lt_strategies_create(&planner, &pc, &err)) != LT_OK) goto out;

    char fingerprint[LT_SHA256_HEX_LEN + 1];
    lt_corpus_fingerprint(corpus, fingerprint);
    config_text = lt_config_dump_string(cfg);
    if (!config_text) {
        st = lt_fail(&err, LT_ERR_NOMEM, NULL, "out of memory dumping the config");
        goto out;
    }
    lt_run_info run;
    run_info_of(&run, cfg, &pc, planner, config_text, fingerprint, a.data ? a.data : a.lengths, &sc,
                lt_sampler_n_samples(sampler));
    if ((st = lt_store_begin(&store, a.db, &run, !a.no_timings, &err)) != LT_OK) goto out;
    if ((st = store_sources(store, corpus, &err)) != LT_OK) goto out;

    /* Resume: plan only the steps the file does not hold yet. */
    todo = lt_malloc_check((size_t)steps * sizeof *todo);
    size_t n_todo = 0;
    for (int64_t t = 0; t < steps; t++) {
        bool has = false;
        if ((st = lt_store_has_step(store, (uint64_t)t, &has, &err)) != LT_OK) goto out;
        if (!has) todo[n_todo++] = (uint64_t)t;
    }
    size_t kept = (size_t)steps - n_todo;
    int threads = lt_plan_steps_threads((int)a.threads);
    if (!a.quiet)
        fprintf(stderr,
                "planner: %s, %" PRId64 " steps of %" PRId64 " samples <= %" PRId64
                " tokens (%" PRIu64 " samples from %s), %d thread%s; baseline tuning %s\n",
                lt_strategy_name(pc.strategy), steps, sc.global_batch, sc.context_len, lt_sampler_n_samples(sampler),
                a.data ? a.data : a.lengths, threads, threads == 1 ? "" : "s", lt_strategies_params(planner));
    if (!a.quiet && kept)
        fprintf(stderr, "planner: %s holds %zu of the steps already; planning the other %zu\n", a.db, kept, n_todo);

    lt_progress_options po = {.quiet = a.quiet ? 1 : 0, .tty = -1};
    b.store = store;
    b.db = a.db;
    b.progress = lt_progress_start_opts("plan", n_todo, "steps", &po);
    lt_progress_extra(b.progress, 0, "samples", 1.0);
    if (sc.n_sources > 0 && !lt_sampler_mixes(sampler) && !a.quiet)
        fprintf(stderr, "planner: warning: the config names sources but %s records none (a lengths file, or shards "
                        "made without [source.NAME]): one stream over all samples, the weights unused\n",
                a.data ? a.data : a.lengths);
    if (lt_sampler_mixes(sampler) && n_todo > 0) {
        b.corpus = corpus;
        b.n_todo = n_todo;
        b.src_tokens = lt_calloc_check(MIX_RANGES * lt_corpus_n_sources(corpus), sizeof *b.src_tokens);
    }
    if (!a.quiet && sc.global_batch_tokens > 0)
        fprintf(stderr, "planner: each step filled to at most %" PRId64 " tokens (plan.global_batch_tokens), %" PRId64
                        " to %" PRId64 " samples\n",
                sc.global_batch_tokens, sc.min_step_samples > 1 ? sc.min_step_samples : (int64_t)1, sc.global_batch);
    if (!a.quiet && lt_sampler_n_heldout(sampler))
        fprintf(stderr, "planner: %" PRIu64 " documents held out for validation (data.holdout), never sampled\n",
                lt_sampler_n_heldout(sampler));
    lt_strategy strat = pc.strategy;
    st = lt_plan_steps(corpus, &sc, &pc, &strat, 1, todo, n_todo, threads, store_step, &b, &err);
    lt_progress_finish(b.progress);
    if (st != LT_OK) goto out;
    /* the held-out documents (data.holdout), in the plans' transaction (docs/plans-schema.md) */
    size_t n_held = (size_t)lt_sampler_n_heldout(sampler);
    lt_sample *held = lt_calloc_check(n_held + 1, sizeof *held);
    for (size_t i = 0; i < n_held; i++) lt_sampler_heldout(sampler, i, &held[i]);
    st = lt_store_put_heldout(store, held, n_held, &err);
    free(held);
    if (st != LT_OK) goto out;
    st = lt_store_commit(store, &err);
    store = NULL;
    if (st != LT_OK) goto out;

    if (b.src_tokens && !a.quiet) report_mixture(&b, &sc, sampler, todo[n_todo - 1]);
    if (b.planned) {
        double n = (double)b.planned;
        printf("%s: %zu steps planned with %s (%zu kept); predicted %.1f ms/step, bubble %.3f, peak %.1f GiB per "
               "GPU (cap %.1f GiB); planning %.2f ms/step/thread\n",
               a.db, b.planned, lt_strategy_name(pc.strategy), kept, 1e3 * b.sum_time_s / n, b.sum_bubble / n,
               b.max_peak / 1073741824.0, pc.cm.mem_cap / 1073741824.0, b.sum_solve_ms / n);
    } else {
        printf("%s: all %" PRId64 " steps were planned already\n", a.db, steps);
    }

out:
    if (store) lt_store_abort(store);
    free(todo);
    free(b.src_tokens);
    free(config_text);
    lt_strategies_free(planner);
    lt_sampler_free(sampler);
    planner_sampler_config_clear(&sc);
    lt_corpus_free(corpus);
    lt_config_free(owned);
    if (st != LT_OK) return fail(&err, st);
    return 0;
}
