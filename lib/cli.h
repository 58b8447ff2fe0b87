/*
 * lib/cli.h — the command-line shell every longtail program shares, so each stage's
 * program stays a thin table of commands.
 *
 *     PROGRAM [COMMON OPTIONS] COMMAND [ARGS...]
 *
 * Common options, accepted before or after COMMAND (until `--`):
 *     --config FILE        the INI config (CONTRACTS.md); defaults when absent
 *     --set S.K=VALUE      override one key (repeatable; applied after --config, in order)
 *     --log-level LEVEL    error | warn | info | debug (else run.log_level, $LONGTAIL_LOG)
 *     -q, --quiet          same as --log-level warn
 *     -v, --verbose        same as --log-level debug
 *     -h, --help           program help, or the command's help after COMMAND
 *     --version            "PROGRAM (longtail) VERSION"
 * Every program also has the built-in command `config`: load and validate the config
 * and print the effective values as INI (the dump stored with plans and checkpoints).
 *
 * Exit status: the command's, or 2 for bad usage/config (CONTRACTS.md); errors are
 * printed once in the lib/error.h style.
 */
#ifndef LT_CLI_H
#define LT_CLI_H

#include <stddef.h>

#include "lib/config.h" /* lt_config */

typedef struct lt_cli_ctx {
    const lt_config *config; /* effective config: defaults + --config + --set */
    const char *config_path; /* the --config argument, or NULL */
    int argc;                /* the command's arguments, common options removed; */
    char **argv;             /* argv[0] is the command name */
} lt_cli_ctx;

typedef struct lt_cli_command {
    const char *name;    /* e.g. "encode" */
    const char *args;    /* argument synopsis, e.g. "--encoding NAME [FILE...]" */
    const char *summary; /* one line */
    const char *help;    /* more text for `PROGRAM COMMAND --help`; may be NULL */
    int (*run)(lt_cli_ctx *ctx); /* returns the exit status */
} lt_cli_command;

typedef struct lt_cli_program {
    const char *name;    /* "dataprep" */
    const char *summary; /* one line: what the program does */
    const lt_cli_command *commands;
    size_t ncommands;
} lt_cli_program;

/* Parse, load the config, dispatch. Use as `return lt_cli_main(&prog, argc, argv);`. */
int lt_cli_main(const lt_cli_program *prog, int argc, char **argv);

/* For commands parsing their arguments: "--name VALUE" or "--name=VALUE" at argv[*i]
 * returns the value (advancing *i past it), else NULL; *missing = 1 when the option is
 * there without its value. */
const char *lt_cli_option_value(int argc, char **argv, int *i, const char *name, int *missing);

/* For commands: an option the command does not know. Reports and returns 2. */
int lt_cli_unknown_option(const lt_cli_ctx *ctx, const char *arg);

/* For commands: any other usage error (printf-formatted WHAT), with the hint
 * "'PROGRAM COMMAND --help' lists its options". Reports and returns 2. */
int lt_cli_usage(const lt_cli_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* LT_CLI_H */
