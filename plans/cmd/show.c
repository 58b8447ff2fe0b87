/*
 * plans/cmd/show.c — `planner show` (one stored step, printed) and `planner validate`
 * (every stored step checked against the plan invariants): thin shells over
 * plans/store/store.h and plans/store/validate.h.
 *
 *   planner show --db FILE --step N [--width W]
 *   planner validate --db FILE [--quiet]
 *
 * Exit status: 0; 1 for a missing or foreign file, a step not stored, a broken plan; 2 for
 * bad usage. `validate` reports progress on stderr (none with --quiet, which the common
 * options turn into log level warn) and ends with "N steps valid" on stdout.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cli.h"              /* lt_cli_ctx, lt_cli_option_value, lt_cli_usage */
#include "lib/config.h"           /* lt_config_load_string: the run's stored config */
#include "lib/model.h"            /* lt_model_from_config, lt_model_forward_flops */
#include "lib/log.h"              /* lt_log_enabled */
#include "lib/progress.h"         /* lt_progress_* */
#include "lib/strutil.h"          /* lt_parse_int64 */
#include "plans/cmd/planner.h"    /* show_command, validate_command */
#include "plans/store/store.h"    /* lt_store_open, lt_store_steps, lt_store_get_step, lt_store_close */
#include "plans/store/validate.h" /* lt_plan_print, lt_store_validate */

/* The options of both commands: --db FILE, and --step N --width W (show) or --quiet. */
typedef struct show_args {
    const char *db, *step_text, *width_text;
    bool quiet;
} show_args;

/* Returns 0, or the exit status of a usage error (already reported). */
static int parse_args(lt_cli_ctx *ctx, show_args *a, bool show) {
    memset(a, 0, sizeof *a);
    for (int i = 1; i < ctx->argc; i++) {
        const char *arg = ctx->argv[i], *v;
        int missing = 0;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--db", &missing))) a->db = v;
        else if (show && !missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--step", &missing)))
            a->step_text = v;
        else if (show && !missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--width", &missing)))
            a->width_text = v;
        else if (missing) return lt_cli_usage(ctx, "option '%.200s' needs a value", arg);
        else if (!show && strcmp(arg, "--quiet") == 0) a->quiet = true;
        else if (arg[0] == '-') return lt_cli_unknown_option(ctx, arg);
        else return lt_cli_usage(ctx, "unexpected argument '%.200s'", arg);
    }
    if (!a->db) return lt_cli_usage(ctx, "which plan database? give --db FILE");
    return 0;
}

/* The step's samples, tokens and forward FLOPs (the run's model, from its stored config) of
 * each named source, when the run's documents have more than one source or a named one. */
static lt_status print_sources(lt_store *st, uint64_t step, const lt_step_plan *plan, const lt_sample *samples,
                               lt_error *err) {
    char **names = NULL;
    uint32_t *src = NULL;
    size_t n_names = 0, n = 0;
    lt_status s = lt_store_sample_sources(st, step, &names, &n_names, &src, &n, err);
    if (s != LT_OK) return s;
    bool named = n_names > 1 || (n_names == 1 && names[0][0]);
    lt_model_shape m;
    bool have_model = false;
    lt_run_info run;
    if (named && n == plan->n_samples && lt_store_run_info(st, &run, NULL) == LT_OK) {
        lt_config *cfg = lt_config_new();
        have_model = cfg && lt_config_load_string(cfg, run.config, "the run's config", NULL) == LT_OK &&
                     lt_model_from_config(cfg, NULL, &m, NULL) == LT_OK;
        lt_config_free(cfg);
        lt_run_info_free(&run);
    }
    if (named && n == plan->n_samples) {
        double tot_tok = 0, tot_fl = 0;
        double *tok = lt_calloc_check(n_names, sizeof *tok), *fl = lt_calloc_check(n_names, sizeof *fl);
        uint64_t *cnt = lt_calloc_check(n_names, sizeof *cnt);
        for (size_t i = 0; i < n; i++) {
            double len = (double)samples[i].length, f = have_model ? lt_model_forward_flops(&m, len) : 0;
            cnt[src[i]]++;
            tok[src[i]] += len;
            fl[src[i]] += f;
            tot_tok += len;
            tot_fl += f;
        }
        printf("sources of step %" PRIu64 ":\n", step);
        for (size_t k = 0; k < n_names; k++) {
            printf("  %-16s %6" PRIu64 " samples %12.0f tokens (%5.1f %%)", names[k][0] ? names[k] : "(data.input)",
                   cnt[k], tok[k], tot_tok > 0 ? 100.0 * tok[k] / tot_tok : 0.0);
            if (have_model) printf(" %11.3e fwd FLOPs (%5.1f %%)", fl[k], tot_fl > 0 ? 100.0 * fl[k] / tot_fl : 0.0);
            printf("\n");
        }
        free(tok);
        free(fl);
        free(cnt);
    }
    for (size_t k = 0; k < n_names; k++) free(names[k]);
    free(names);
    free(src);
    return LT_OK;
}

int show_command(lt_cli_ctx *ctx) {
    show_args a;
    int rc = parse_args(ctx, &a, true);
    if (rc) return rc;
    if (!a.step_text) return lt_cli_usage(ctx, "which step? give --step N");
    int64_t step, width = 100;
    if (lt_parse_int64(a.step_text, &step) != LT_OK || step < 0)
        return lt_cli_usage(ctx, "--step '%.40s': want a step number (an integer >= 0)", a.step_text);
    if (a.width_text && (lt_parse_int64(a.width_text, &width) != LT_OK || width < 10 || width > 10000))
        return lt_cli_usage(ctx, "--width '%.40s': want a number of columns, 10 to 10000", a.width_text);

    lt_error err;
    lt_error_clear(&err);
    lt_store *st = NULL;
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_sample *samples = NULL;
    lt_status s = lt_store_open(&st, a.db, &err);
    if (s == LT_OK) s = lt_store_get_step(st, (uint64_t)step, &plan, &samples, &err);
    if (s == LT_OK) {
        lt_plan_print(stdout, &plan, samples, (int)width);
        s = print_sources(st, (uint64_t)step, &plan, samples, &err);
        if (fflush(stdout) != 0 || ferror(stdout)) s = lt_fail(&err, LT_ERR_IO, "stdout", "cannot write the plan");
    }
    free(samples);
    lt_step_plan_free(&plan);
    lt_store_close(st);
    return s == LT_OK ? 0 : lt_error_exit(&err);
}

static void report_progress(void *ctx, size_t done, size_t total) {
    lt_progress *pr = ctx;
    (void)total;
    if (pr) lt_progress_add(pr, done - lt_progress_done(pr));
}

int validate_command(lt_cli_ctx *ctx) {
    show_args a;
    int rc = parse_args(ctx, &a, false);
    if (rc) return rc;
    /* lib/cli.h takes --quiet as the common option (log level warn) before we see it */
    bool quiet = a.quiet || !lt_log_enabled(LT_LOG_INFO);

    lt_error err;
    lt_error_clear(&err);
    lt_store *st = NULL;
    lt_status s = lt_store_open(&st, a.db, &err);
    if (s != LT_OK) return lt_error_exit(&err);
    uint64_t *steps = NULL;
    size_t n = 0, checked = 0;
    s = lt_store_steps(st, &steps, &n, &err);
    free(steps);
    if (s == LT_OK) {
        lt_progress_options opts = {.tty = -1, .quiet = quiet};
        lt_progress *pr = lt_progress_start_opts("validate", n, "steps", &opts);
        s = lt_store_validate(st, report_progress, pr, &checked, &err);
        lt_progress_finish(pr);
    }
    lt_store_close(st);
    if (s != LT_OK) {
        if (!err.where[0]) snprintf(err.where, sizeof err.where, "%s", a.db);
        if (!err.hint[0])
            lt_error_hint(&err, "%zu step%s before it %s valid; 'planner show --db %s --step N' prints a step",
                          checked, checked == 1 ? "" : "s", checked == 1 ? "is" : "are", a.db);
        return lt_error_exit(&err);
    }
    printf("%zu steps valid\n", checked); /* the last line, for scripts */
    return 0;
}
