/*
 * lib/cli.c — the shared command-line shell (see cli.h).
 */
#include "lib/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buildconfig.h" /* PACKAGE_VERSION */
#include "lib/error.h"
#include "lib/log.h"
#include "lib/strutil.h" /* lt_edit_distance, lt_is_close_match */

static const char common_options_help[] =
    "Common options (before or after COMMAND):\n"
    "  --config FILE       INI config (see docs/config.md); built-in defaults when absent\n"
    "  --set S.K=VALUE     override one config key, e.g. --set plan.context_len=128K\n"
    "  --log-level LEVEL   error | warn | info | debug\n"
    "  -q, --quiet         only warnings and errors\n"
    "  -v, --verbose       debug messages\n"
    "  -h, --help          this help, or a command's help after the command\n"
    "  --version           print the version\n";

static int config_command(lt_cli_ctx *ctx);

static const lt_cli_command builtin_config = {
    "config", "",
    "check the config and print the effective values as INI",
    "Loads the defaults, then --config FILE, then each --set in order; every value is\n"
    "validated against the schema (unknown keys and bad values are errors). Prints the\n"
    "effective config, each value with its origin; the output loads back unchanged.\n",
    config_command,
};

static void print_usage(const lt_cli_program *prog, FILE *out) {
    fprintf(out, "Usage: %s [OPTIONS] COMMAND [ARGS...]\n\n%s\n\nCommands:\n", prog->name,
            prog->summary);
    for (size_t i = 0; i < prog->ncommands; i++)
        fprintf(out, "  %-10s %s\n", prog->commands[i].name, prog->commands[i].summary);
    fprintf(out, "  %-10s %s\n\n%s\n", builtin_config.name, builtin_config.summary,
            common_options_help);
    fprintf(out, "Run '%s COMMAND --help' for a command's arguments. Exit status: 0 success,\n"
                 "1 run-time failure, 2 bad usage or config.\n",
            prog->name);
}

static void print_command_help(const lt_cli_program *prog, const lt_cli_command *cmd) {
    printf("Usage: %s %s [OPTIONS]%s%s\n\n%s\n", prog->name, cmd->name, cmd->args[0] ? " " : "",
           cmd->args, cmd->summary);
    if (cmd->help) printf("\n%s", cmd->help);
    printf("\n%s", common_options_help);
}

static const lt_cli_command *find_command(const lt_cli_program *prog, const char *name) {
    for (size_t i = 0; i < prog->ncommands; i++)
        if (strcmp(prog->commands[i].name, name) == 0) return &prog->commands[i];
    if (strcmp(name, builtin_config.name) == 0) return &builtin_config;
    return NULL;
}

static const char *closest_command(const lt_cli_program *prog, const char *name) {
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i <= prog->ncommands; i++) {
        const char *c = i < prog->ncommands ? prog->commands[i].name : builtin_config.name;
        size_t d = lt_edit_distance(name, c);
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    return best && lt_is_close_match(name, best, best_d) ? best : NULL;
}

static int usage_error(const char *hint, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *hint, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    lt_report(NULL, hint, "%s", what);
    return LT_EXIT_USAGE;
}

int lt_cli_unknown_option(const lt_cli_ctx *ctx, const char *arg) {
    return lt_cli_usage(ctx, "unknown option '%s'", arg);
}

int lt_cli_usage(const lt_cli_ctx *ctx, const char *fmt, ...) {
    char hint[128], what[LT_ERROR_WHAT_MAX];
    snprintf(hint, sizeof hint, "'%s %s --help' lists its options", lt_program(), ctx->argv[0]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return usage_error(hint, "%s", what);
}

/* "--name VALUE" or "--name=VALUE": returns the value and advances *i, or NULL. */
const char *lt_cli_option_value(int argc, char **argv, int *i, const char *name, int *missing) {
    size_t n = strlen(name);
    const char *a = argv[*i];
    *missing = 0;
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != '\0') return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

int lt_cli_main(const lt_cli_program *prog, int argc, char **argv) {
    lt_set_program(prog->name);
    lt_log_init();

    const char *config_path = NULL, *log_level = NULL;
    const char **sets = calloc((size_t)argc + 1, sizeof *sets);
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (sets == NULL || rest == NULL) lt_die("out of memory parsing arguments");
    int nsets = 0, nrest = 0, help = 0, version = 0, status = LT_EXIT_OK;
    const lt_cli_command *cmd = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int missing = 0;
        if (strcmp(a, "--") == 0) {
            while (++i < argc) rest[nrest++] = argv[i];
            break;
        }
        if ((v = lt_cli_option_value(argc, argv, &i, "--config", &missing)) != NULL) {
            config_path = v;
        } else if (!missing && (v = lt_cli_option_value(argc, argv, &i, "--set", &missing)) != NULL) {
            sets[nsets++] = v;
        } else if (!missing && (v = lt_cli_option_value(argc, argv, &i, "--log-level", &missing)) != NULL) {
            log_level = v;
        } else if (missing) {
            status = usage_error(NULL, "option '%s' needs a value", a);
            goto out;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            log_level = "warn";
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            log_level = "debug";
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            help = 1;
        } else if (strcmp(a, "--version") == 0) {
            version = 1;
        } else if (cmd == NULL && a[0] != '-') {
            cmd = find_command(prog, a);
            if (cmd == NULL) {
                const char *near = closest_command(prog, a);
                char hint[160];
                if (near)
                    snprintf(hint, sizeof hint, "did you mean '%s'? ('%s --help' lists commands)",
                             near, prog->name);
                else
                    snprintf(hint, sizeof hint, "'%s --help' lists commands", prog->name);
                status = usage_error(hint, "unknown command '%s'", a);
                goto out;
            }
            rest[nrest++] = argv[i];
        } else if (cmd == NULL) {
            char hint[96];
            snprintf(hint, sizeof hint, "'%s --help' lists the options", prog->name);
            status = usage_error(hint, "unknown option '%s'", a);
            goto out;
        } else {
            rest[nrest++] = argv[i]; /* the command's own argument */
        }
    }

    if (version) {
        printf("%s (longtail) %s\n", prog->name, PACKAGE_VERSION);
        goto out;
    }
    if (help) {
        if (cmd)
            print_command_help(prog, cmd);
        else
            print_usage(prog, stdout);
        goto out;
    }
    if (cmd == NULL) {
        print_usage(prog, stderr);
        char hint[96];
        snprintf(hint, sizeof hint, "'%s --help' lists commands", prog->name);
        status = usage_error(hint, "no command given");
        goto out;
    }

    lt_error err;
    lt_error_clear(&err);
    lt_config *cfg = lt_config_new();
    if (cfg == NULL) lt_die("out of memory creating the config");
    lt_status st = LT_OK;
    if (config_path) st = lt_config_load_file(cfg, config_path, &err);
    for (int i = 0; st == LT_OK && i < nsets; i++) st = lt_config_set(cfg, sets[i], &err);
    if (st == LT_OK && log_level == NULL) log_level = lt_config_get_string(cfg, "run", "log_level");
    lt_log_level level;
    if (st == LT_OK && log_level && lt_log_parse_level(log_level, &level) != LT_OK) {
        lt_fail(&err, LT_ERR_USAGE, NULL, "unknown log level '%s'", log_level);
        lt_error_hint(&err, "use error, warn, info or debug");
        st = LT_ERR_USAGE;
    }
    if (st != LT_OK) {
        lt_error_print(&err, stderr);
        status = LT_EXIT_USAGE; /* an unreadable or invalid config is bad usage */
        lt_config_free(cfg);
        goto out;
    }
    if (log_level) lt_log_set_level(level);

    LT_DEBUG("command '%s', config %s, %d override(s)", cmd->name,
             config_path ? config_path : "(built-in defaults)", nsets);
    lt_cli_ctx ctx = {cfg, config_path, nrest, rest};
    status = cmd->run(&ctx);
    lt_config_free(cfg);
out:
    free(sets);
    free(rest);
    fflush(stdout);
    return status;
}

static int config_command(lt_cli_ctx *ctx) {
    if (ctx->argc > 1) return lt_cli_unknown_option(ctx, ctx->argv[1]);
    if (lt_config_dump(ctx->config, stdout) != LT_OK || fflush(stdout) != 0) {
        lt_report("stdout", NULL, "cannot write the config");
        return LT_EXIT_FAILURE;
    }
    return LT_EXIT_OK;
}
