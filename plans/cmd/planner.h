/*
 * plans/cmd/planner.h — the `planner` program: its command table (plans/cmd/planner.c),
 * its commands (one file each) and the helpers they share (plans/cmd/common.c). The
 * library under it is the other folders of plans/ (plans/README.md, docs/architecture.md).
 */
#ifndef LT_PLANNER_H
#define LT_PLANNER_H

#include "lib/cli.h"               /* lt_cli_program */
#include "lib/error.h"             /* lt_status, lt_error */
#include "lib/config.h"            /* lt_config */
#include "plans/strategies/plan.h" /* lt_plan_config */
#include "plans/batches/sampler.h" /* lt_corpus, lt_sampler_config */

/* The `planner` program: its commands (lib/cli.h runs them). */
extern const lt_cli_program planner_program;

/* `planner simulate` (plans/cmd/simulate.c). */
int simulate_command(lt_cli_ctx *ctx);
/* `planner build` (plans/cmd/build.c). */
int build_command(lt_cli_ctx *ctx);
/* `planner compare` (plans/cmd/compare.c). */
int compare_command(lt_cli_ctx *ctx);
/* `planner show` and `planner validate` (plans/cmd/show.c). */
int show_command(lt_cli_ctx *ctx);
int validate_command(lt_cli_ctx *ctx);
/* `planner layout` (plans/cmd/layout.c). */
int layout_command(lt_cli_ctx *ctx);

/* One option of a command that takes a value: a string stored in *str, or (str NULL) an
 * integer in [1, max] stored in *num. */
typedef struct planner_option {
    const char *name; /* "--db" */
    const char **str;
    int64_t *num;
    int64_t max;
} planner_option;

/* Take ctx->argv[*i] if it is one of opts[0..n) ("--name VALUE" or "--name=VALUE", *i moved
 * past the value). Returns 1 when taken, 0 when argv[*i] is none of them, or a usage error's
 * exit status (2, reported: a missing value, a number out of range). */
int planner_take_option(lt_cli_ctx *ctx, int *i, const planner_option *opts, size_t n);

/* Parse the strategy names of `list` ("A,B,...", the value of `option`, e.g. "--strategies")
 * into out[0..*n) (out holds LT_STRATEGY_COUNT), in the order given. Returns 0, or a usage
 * error's exit status (2, reported): an empty or overlong item, an unknown name (the hint
 * lists the names), a name listed twice, an empty list. */
int planner_parse_strategies(const lt_cli_ctx *ctx, const char *option, const char *list, lt_strategy *out,
                             size_t *n);

/* The corpus of --data DIR (a dataprep output) or, when data is NULL, --lengths FILE. */
lt_status planner_load_corpus(const char *data, const char *lengths, lt_corpus **out, lt_error *err);
/* The sampler settings of a config: plan.global_batch, plan.seed, plan.sample_policy,
 * pc->context_len, data.holdout and the [source.NAME] weights (an array this allocates:
 * planner_sampler_config_clear frees it; the names stay cfg's). */
lt_status planner_sampler_config(const lt_config *cfg, const lt_plan_config *pc, lt_sampler_config *sc,
                                 lt_error *err);
void planner_sampler_config_clear(lt_sampler_config *sc);

/* A copy of ctx's effective config in *out (free it with lt_config_free), for a command to
 * change keys of (lt_config_set_value) without touching ctx's. The values are ctx's; their
 * origins become the config file's name and line of the copy. LT_ERR_NOMEM. */
lt_status planner_config_copy(const lt_cli_ctx *ctx, lt_config **out, lt_error *err);

#endif
