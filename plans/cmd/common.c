/*
 * plans/cmd/common.c — what the planner's commands share (plans/cmd/planner.h): their
 * option parsing (options with a value, lists of strategies), the corpus of --data or
 * --lengths, the sampler settings of a config, a copy of a config to change.
 * The commands call these; these call no command.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strutil.h"       /* lt_parse_int64 */
#include "plans/cmd/planner.h" /* planner_option, lt_corpus, lt_sampler_config */

int planner_take_option(lt_cli_ctx *ctx, int *i, const planner_option *opts, size_t n) {
    const char *arg = ctx->argv[*i];
    for (size_t o = 0; o < n; o++) {
        int missing = 0;
        const char *v = lt_cli_option_value(ctx->argc, ctx->argv, i, opts[o].name, &missing);
        if (missing) return lt_cli_usage(ctx, "option '%.200s' needs a value", arg);
        if (!v) continue;
        if (opts[o].str) {
            *opts[o].str = v;
            return 1;
        }
        int64_t num;
        if (lt_parse_int64(v, &num) != LT_OK || num < 1 || num > opts[o].max)
            return lt_cli_usage(ctx, "%s '%.40s': want a positive integer", opts[o].name, v);
        *opts[o].num = num;
        return 1;
    }
    return 0;
}

lt_status planner_sampler_config(const lt_config *cfg, const lt_plan_config *pc, lt_sampler_config *sc,
                                   lt_error *err) {
    memset(sc, 0, sizeof *sc);
    int64_t v;
    lt_status st = lt_config_get_int(cfg, "plan", "global_batch", &v, err);
    if (st != LT_OK) return st;
    sc->global_batch = v;
    if ((st = lt_config_get_int(cfg, "plan", "seed", &v, err)) != LT_OK) return st;
    sc->seed = (uint64_t)v;
    sc->context_len = pc->context_len;
    st = lt_sample_policy_parse(lt_config_get_string(cfg, "plan", "sample_policy"), "plan.sample_policy",
                                &sc->policy, err);
    if (st != LT_OK) return LT_ERR_CONFIG;
    if ((st = lt_config_get_double(cfg, "data", "holdout", &sc->holdout, err)) != LT_OK) return st;
    if (lt_config_is_set(cfg, "plan", "global_batch_tokens")) {
        uint64_t tok = 0;
        if ((st = lt_config_get_size(cfg, "plan", "global_batch_tokens", &tok, err)) != LT_OK) return st;
        sc->global_batch_tokens = tok > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)tok;
        int64_t dp = 1;
        lt_config_get_int(cfg, "parallel", "dp", &dp, NULL);
        sc->min_step_samples = dp; /* every DP rank gets a sample */
    }
    /* [source.NAME]: weights and holdouts (names borrowed from cfg) */
    size_t n = lt_config_n_named(cfg, "source");
    if (n > 0) {
        lt_source_weight *w = lt_calloc_check(n, sizeof *w);
        for (size_t i = 0; i < n; i++) {
            char sec[80];
            w[i].name = lt_config_named(cfg, "source", i);
            snprintf(sec, sizeof sec, "source.%s", w[i].name);
            w[i].holdout = -1;
            if (lt_config_is_set(cfg, sec, "holdout")) lt_config_get_double(cfg, sec, "holdout", &w[i].holdout, NULL);
            if ((st = lt_config_get_double(cfg, sec, "weight", &w[i].weight, err)) != LT_OK) {
                free(w);
                return st;
            }
        }
        sc->sources = w;
        sc->n_sources = n;
    }
    return LT_OK;
}

void planner_sampler_config_clear(lt_sampler_config *sc) {
    free((void *)sc->sources);
    sc->sources = NULL;
    sc->n_sources = 0;
}

lt_status planner_load_corpus(const char *data, const char *lengths, lt_corpus **out, lt_error *err) {
    return data ? lt_corpus_load_dataset(out, data, err) : lt_corpus_load_lengths(out, lengths, err);
}

int planner_parse_strategies(const lt_cli_ctx *ctx, const char *option, const char *list, lt_strategy *out,
                             size_t *n) {
    size_t count = 0;
    const char *p = list;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char name[32];
        if (len == 0 || len >= sizeof name)
            return lt_cli_usage(ctx, "%s '%.80s': want names separated by commas", option, list);
        memcpy(name, p, len);
        name[len] = '\0';
        lt_strategy s;
        lt_error err;
        if (lt_strategy_parse(name, option, &s, &err) != LT_OK) {
            lt_error_print(&err, NULL);
            return 2;
        }
        for (size_t k = 0; k < count; k++)
            if (out[k] == s) return lt_cli_usage(ctx, "%s: '%s' is listed twice", option, name);
        out[count++] = s; /* at most LT_STRATEGY_COUNT: a name listed twice stops above */
        p += len;
        if (*p == ',') p++;
    }
    if (count == 0) return lt_cli_usage(ctx, "%s: give at least one strategy", option);
    *n = count;
    return 0;
}

lt_status planner_config_copy(const lt_cli_ctx *ctx, lt_config **out, lt_error *err) {
    *out = NULL;
    char *text = lt_config_dump_string(ctx->config);
    lt_config *copy = lt_config_new();
    if (!text || !copy) {
        free(text);
        lt_config_free(copy);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory copying the config");
    }
    lt_status st = lt_config_load_string(copy, text, ctx->config_path ? ctx->config_path : "config", err);
    free(text);
    if (st != LT_OK) {
        lt_config_free(copy);
        return st;
    }
    *out = copy;
    return LT_OK;
}
