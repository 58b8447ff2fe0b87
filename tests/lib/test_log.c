/*
 * tests/lib/test_log.c — log levels, line format, and the rank/task prefix under Slurm/MPI.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/log.h"

/* A fake environment: NULL-terminated name/value pairs. */
static const char *const *fake_env;
static const char *fake_getenv(const char *name) {
    for (size_t i = 0; fake_env[i] != NULL; i += 2)
        if (strcmp(fake_env[i], name) == 0) return fake_env[i + 1];
    return NULL;
}
static void prefix_for(const char *const *env, char *buf, size_t size) {
    fake_env = env;
    lt_log_prefix_from_env(buf, size, fake_getenv);
}

static void test_prefix_none_outside_slurm(void **state) {
    (void)state;
    const char *env[] = {"HOME", "/root", NULL};
    char buf[64];
    prefix_for(env, buf, sizeof buf);
    assert_string_equal(buf, "");
}

static void test_prefix_array_task(void **state) {
    (void)state;
    const char *env[] = {"SLURM_ARRAY_TASK_ID", "3", "SLURM_ARRAY_TASK_COUNT", "8",
                         "SLURM_PROCID", "0", "SLURM_NTASKS", "1", NULL};
    char buf[64];
    prefix_for(env, buf, sizeof buf);
    assert_string_equal(buf, "task 3/8");
}

static void test_prefix_mpi_rank_prefers_launcher(void **state) {
    (void)state;
    const char *env[] = {"OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "4",
                         "SLURM_PROCID", "1", "SLURM_NTASKS", "4", NULL};
    char buf[64];
    prefix_for(env, buf, sizeof buf);
    assert_string_equal(buf, "rank 1/4");
}

static void test_prefix_srun_multi_task(void **state) {
    (void)state;
    const char *env[] = {"SLURM_PROCID", "5", "SLURM_NTASKS", "16", NULL};
    char buf[64];
    prefix_for(env, buf, sizeof buf);
    assert_string_equal(buf, "rank 5/16");
    /* a single-task job step is not a "rank" */
    const char *single[] = {"SLURM_PROCID", "0", "SLURM_NTASKS", "1", NULL};
    prefix_for(single, buf, sizeof buf);
    assert_string_equal(buf, "");
}

static void test_parse_level(void **state) {
    (void)state;
    lt_log_level l;
    assert_int_equal(lt_log_parse_level("DEBUG", &l), LT_OK);
    assert_int_equal(l, LT_LOG_DEBUG);
    assert_int_equal(lt_log_parse_level("warning", &l), LT_OK);
    assert_int_equal(l, LT_LOG_WARN);
    assert_int_equal(lt_log_parse_level("verbose", &l), LT_ERR_USAGE);
    assert_string_equal(lt_log_level_name(LT_LOG_INFO), "info");
}

/* The memory stream's buffer and size live outside the function: open_memstream keeps
 * their addresses until fclose. */
static char *capture_buf;
static size_t capture_len;

static char *capture(void (*fn)(void)) {
    capture_buf = NULL;
    FILE *f = open_memstream(&capture_buf, &capture_len);
    assert_non_null(f);
    lt_log_set_stream(f);
    fn();
    lt_log_set_stream(NULL);
    fclose(f);
    return capture_buf;
}

static void log_some(void) {
    LT_DEBUG("hidden %d", 1);
    LT_INFO("shown %d", 2);
    LT_WARN("careful");
}

static void test_level_filters_and_line_format(void **state) {
    (void)state;
    lt_set_program("dataprep");
    lt_log_set_level(LT_LOG_INFO);
    char *out = capture(log_some);
    assert_null(strstr(out, "hidden"));
    char *first = out, *second = strchr(out, '\n');
    assert_non_null(second);
    second++;
    /* 2026-11-21T10:04:05.123Z INFO  dataprep: shown 2 */
    assert_int_equal(strlen(first) > 25, 1);
    assert_int_equal(first[4], '-');
    assert_int_equal(first[10], 'T');
    assert_int_equal(first[23], 'Z');
    assert_memory_equal(first + 24, " INFO  dataprep: shown 2\n", 25);
    assert_memory_equal(second + 24, " WARN  dataprep: careful\n", 25);
    free(out);
    lt_log_set_level(LT_LOG_DEBUG);
    out = capture(log_some);
    assert_non_null(strstr(out, "DEBUG dataprep: hidden 1"));
    free(out);
}

static void log_long(void) {
    char big[10000];
    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    LT_INFO("%s", big);
}

static void test_long_message_is_one_terminated_line(void **state) {
    (void)state;
    lt_log_set_level(LT_LOG_INFO);
    char *out = capture(log_long);
    size_t n = strlen(out);
    assert_true(n > 1000 && n < 4097);
    assert_int_equal(out[n - 1], '\n');
    assert_ptr_equal(strchr(out, '\n'), out + n - 1);
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_none_outside_slurm),
        cmocka_unit_test(test_prefix_array_task),
        cmocka_unit_test(test_prefix_mpi_rank_prefers_launcher),
        cmocka_unit_test(test_prefix_srun_multi_task),
        cmocka_unit_test(test_parse_level),
        cmocka_unit_test(test_level_filters_and_line_format),
        cmocka_unit_test(test_long_message_is_one_terminated_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
