/*
 * plans/cmd/common.c — what the planner's commands share (plans/cmd/planner.h): their
 * option parsing, the corpus of --data or --lengths, the sampler settings of a config.
 * The commands call these; these call no command.
 */
#include <stdint.h>
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
    return st == LT_OK ? LT_OK : LT_ERR_CONFIG;
}

lt_status planner_load_corpus(const char *data, const char *lengths, lt_corpus **out, lt_error *err) {
    return data ? lt_corpus_load_dataset(out, data, err) : lt_corpus_load_lengths(out, lengths, err);
}
