/*
 * tests/lib/test_cli.c — the shared command-line shell: dispatch, common options in any
 * position, --set overrides, config errors as exit 2, help/version, near-miss hints.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/cli.h"

/* What the fake command saw. */
static char seen[1024];

static int echo_command(lt_cli_ctx *ctx) {
    uint64_t len = 0;
    lt_config_get_size(ctx->config, "plan", "context_len", &len, NULL);
    int n = snprintf(seen, sizeof seen, "argc=%d context_len=%llu args:", ctx->argc,
                     (unsigned long long)len);
    for (int i = 0; i < ctx->argc && n > 0 && (size_t)n < sizeof seen; i++)
        n += snprintf(seen + n, sizeof seen - (size_t)n, " %s", ctx->argv[i]);
    return 0;
}

static int failing_command(lt_cli_ctx *ctx) {
    (void)ctx;
    lt_report("input.jsonl:3", NULL, "bad record");
    return 1;
}

static const lt_cli_command commands[] = {
    {"encode", "[FILE...]", "echo arguments", NULL, echo_command},
    {"fail", "", "always fails", NULL, failing_command},
};
static const lt_cli_program prog = {"fakeprog", "A fake program for tests.", commands, 2};

typedef struct run_result {
    int status;
    char out[8192];
    char err[8192];
} run_result;

static void read_all(int fd, char *buf, size_t size) {
    size_t used = 0;
    ssize_t n;
    while (used + 1 < size && (n = read(fd, buf + used, size - used - 1)) > 0) used += (size_t)n;
    buf[used] = '\0';
}

/* Run lt_cli_main in a child (it may print and we want its exit status). */
static void run(run_result *r, int argc, const char **argv) {
    int o[2], e[2], s[2];
    assert_int_equal(pipe(o), 0);
    assert_int_equal(pipe(e), 0);
    assert_int_equal(pipe(s), 0);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(o[1], 1);
        dup2(e[1], 2);
        seen[0] = '\0';
        int st = lt_cli_main(&prog, argc, (char **)argv);
        fflush(stdout);
        if (write(s[1], seen, strlen(seen)) < 0) _exit(98);
        _exit(st);
    }
    close(o[1]);
    close(e[1]);
    close(s[1]);
    read_all(o[0], r->out, sizeof r->out);
    read_all(e[0], r->err, sizeof r->err);
    read_all(s[0], seen, sizeof seen);
    close(o[0]);
    close(e[0]);
    close(s[0]);
    int status;
    waitpid(pid, &status, 0);
    r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static char cfg_path[64];

static int setup(void **state) {
    (void)state;
    snprintf(cfg_path, sizeof cfg_path, "/tmp/lt-test-cli-XXXXXX");
    int fd = mkstemp(cfg_path);
    if (fd < 0) return -1;
    const char text[] = "[plan]\ncontext_len = 64K\n";
    if (write(fd, text, sizeof text - 1) != (ssize_t)(sizeof text - 1)) return -1;
    close(fd);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(cfg_path);
    return 0;
}

static void test_dispatch_with_options_anywhere(void **state) {
    (void)state;
    run_result r;
    const char *argv[] = {"fakeprog", "--config", cfg_path, "encode", "a.txt", "--set",
                          "plan.context_len=128K", "b.txt", "--", "--literal", NULL};
    run(&r, 10, argv);
    assert_int_equal(r.status, 0);
    assert_string_equal(seen, "argc=4 context_len=131072 args: encode a.txt b.txt --literal");
}

static void test_config_file_alone(void **state) {
    (void)state;
    run_result r;
    char opt[80];
    snprintf(opt, sizeof opt, "--config=%s", cfg_path);
    const char *argv2[] = {"fakeprog", "encode", opt, NULL};
    run(&r, 3, argv2);
    assert_int_equal(r.status, 0);
    assert_string_equal(seen, "argc=1 context_len=65536 args: encode");
}

static void test_help_and_version(void **state) {
    (void)state;
    run_result r;
    const char *a1[] = {"fakeprog", "--help", NULL};
    run(&r, 2, a1);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "Usage: fakeprog [OPTIONS] COMMAND"));
    assert_non_null(strstr(r.out, "  encode     echo arguments\n"));
    assert_non_null(strstr(r.out, "  config     check the config"));
    const char *a2[] = {"fakeprog", "encode", "-h", NULL};
    run(&r, 3, a2);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "Usage: fakeprog encode [OPTIONS] [FILE...]"));
    assert_string_equal(seen, ""); /* help does not run the command */
    const char *a3[] = {"fakeprog", "--version", NULL};
    run(&r, 2, a3);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "fakeprog (longtail) "));
}

static void test_usage_errors_exit_2(void **state) {
    (void)state;
    run_result r;
    const char *a1[] = {"fakeprog", NULL};
    run(&r, 1, a1);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "fakeprog: error: no command given\n"));
    const char *a2[] = {"fakeprog", "encdoe", NULL};
    run(&r, 2, a2);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "fakeprog: error: unknown command 'encdoe'\n"
                                  "hint: did you mean 'encode'?"));
    const char *a3[] = {"fakeprog", "--frobnicate", "encode", NULL};
    run(&r, 3, a3);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "fakeprog: error: unknown option '--frobnicate'\n"));
    const char *a4[] = {"fakeprog", "encode", "--set", NULL};
    run(&r, 3, a4);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "option '--set' needs a value"));
    const char *a5[] = {"fakeprog", "--log-level", "loud", "encode", NULL};
    run(&r, 4, a5);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "unknown log level 'loud'"));
}

static void test_config_errors_exit_2_with_hint(void **state) {
    (void)state;
    run_result r;
    const char *a1[] = {"fakeprog", "encode", "--set", "plan.contxt_len=1", NULL};
    run(&r, 4, a1);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "fakeprog: error: "));
    assert_non_null(strstr(r.err, "contxt_len"));
    assert_non_null(strstr(r.err, "hint: did you mean 'context_len'?"));
    assert_string_equal(seen, "");
    const char *a2[] = {"fakeprog", "encode", "--config", "/nonexistent.ini", NULL};
    run(&r, 4, a2);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "/nonexistent.ini"));
}

static void test_command_status_is_returned(void **state) {
    (void)state;
    run_result r;
    const char *a[] = {"fakeprog", "fail", NULL};
    run(&r, 2, a);
    assert_int_equal(r.status, 1);
    assert_string_equal(r.err, "fakeprog: error: bad record (input.jsonl:3)\n");
}

static void test_builtin_config_dumps_effective_values(void **state) {
    (void)state;
    run_result r;
    const char *a[] = {"fakeprog", "config", "--config", cfg_path, "--set", "plan.steps=7", NULL};
    run(&r, 6, a);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "[plan]\n"));
    assert_non_null(strstr(r.out, "context_len = 64K"));
    assert_non_null(strstr(r.out, "steps = 7"));
    const char *b[] = {"fakeprog", "config", "extra", NULL};
    run(&r, 3, b);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "unknown option 'extra'"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch_with_options_anywhere),
        cmocka_unit_test(test_config_file_alone),
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_usage_errors_exit_2),
        cmocka_unit_test(test_config_errors_exit_2_with_hint),
        cmocka_unit_test(test_command_status_is_returned),
        cmocka_unit_test(test_builtin_config_dumps_effective_values),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
