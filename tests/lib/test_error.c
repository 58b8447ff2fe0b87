/*
 * tests/lib/test_error.c — the one error style: "PROGRAM: error: WHAT (WHERE)" + "hint:",
 * exit codes of CONTRACTS.md, check macros that carry file:line and exit 1.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/error.h"
#include "tests/testutil.h"

/* Print err through lt_error_print into a memory stream and return the text. */
static char *printed(const lt_error *err) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    lt_error_print(err, f);
    fclose(f);
    return buf;
}

static void test_report_with_where_and_hint(void **state) {
    (void)state;
    lt_set_program("/usr/bin/planner");
    lt_error err;
    assert_int_equal(lt_fail(&err, LT_ERR_CONFIG, "etc/x.ini:12", "unknown key '%s'", "contxt_len"),
                     LT_ERR_CONFIG);
    lt_error_hint(&err, "did you mean '%s'?", "context_len");
    char *text = printed(&err);
    assert_string_equal(text, "planner: error: unknown key 'contxt_len' (etc/x.ini:12)\n"
                              "hint: did you mean 'context_len'?\n");
    free(text);
}

static void test_report_without_where_or_hint(void **state) {
    (void)state;
    lt_set_program("dataprep");
    lt_error err;
    lt_fail(&err, LT_ERR_IO, NULL, "disk full");
    char *text = printed(&err);
    assert_string_equal(text, "dataprep: error: disk full\n");
    free(text);
}

static void test_libtool_wrapper_name_is_stripped(void **state) {
    (void)state;
    lt_set_program("./.libs/lt-trainer");
    assert_string_equal(lt_program(), "trainer");
    lt_set_program(NULL); /* ignored */
    assert_string_equal(lt_program(), "trainer");
}

static void test_exit_codes_follow_contract(void **state) {
    (void)state;
    assert_int_equal(lt_exit_code(LT_OK), 0);
    assert_int_equal(lt_exit_code(LT_ERR_USAGE), 2);
    assert_int_equal(lt_exit_code(LT_ERR_CONFIG), 2);
    assert_int_equal(lt_exit_code(LT_ERR_IO), 1);
    assert_int_equal(lt_exit_code(LT_ERR_INPUT), 1);
    assert_int_equal(lt_exit_code(LT_ERR_NOMEM), 1);
    assert_int_equal(lt_exit_code(LT_ERR_VERSION), 1);
    assert_int_equal(lt_exit_code(LT_ERR_INTERNAL), 1);
}

static void test_prefix_keeps_where_and_hint(void **state) {
    (void)state;
    lt_error err;
    lt_fail(&err, LT_ERR_INPUT, "a.jsonl:3", "unterminated string");
    lt_error_hint(&err, "check the line");
    lt_error_prefix(&err, "reading %s: ", "corpus");
    assert_string_equal(err.what, "reading corpus: unterminated string");
    assert_string_equal(err.where, "a.jsonl:3");
    assert_string_equal(err.hint, "check the line");
    assert_int_equal(err.status, LT_ERR_INPUT);
}

static void test_overlong_message_is_truncated_not_overflowed(void **state) {
    (void)state;
    char big[3 * LT_ERROR_WHAT_MAX];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    lt_error err;
    lt_fail(&err, LT_ERR_IO, big, "%s", big);
    assert_int_equal(strlen(err.what), LT_ERROR_WHAT_MAX - 1);
    assert_int_equal(strlen(err.where), LT_ERROR_WHERE_MAX - 1);
}

static void test_null_error_is_allowed(void **state) {
    (void)state;
    assert_int_equal(lt_fail(NULL, LT_ERR_IO, "x", "y"), LT_ERR_IO);
    lt_error_hint(NULL, "h");
    lt_error_clear(NULL);
    assert_int_equal(lt_error_exit(NULL), 0);
}

static void die_check(void *arg) {
    (void)arg;
    lt_set_program("trainer");
    int x = 1;
    LT_CHECK(x == 2);
}

static void die_alloc(void *arg) {
    (void)arg;
    lt_set_program("trainer");
    /* an impossible size: malloc fails without touching memory */
    void *p = lt_malloc_check(SIZE_MAX / 2);
    free(p);
}

static void test_check_macro_reports_file_line_and_exits_1(void **state) {
    (void)state;
    char out[1024];
    assert_int_equal(lt_test_in_child(die_check, NULL, out, sizeof out), 1);
    assert_non_null(strstr(out, "trainer: error: internal check failed: x == 2 ("));
    assert_non_null(strstr(out, "test_error.c:"));
}

static void test_alloc_check_reports_file_line_and_exits_1(void **state) {
    (void)state;
    char out[1024];
    assert_int_equal(lt_test_in_child(die_alloc, NULL, out, sizeof out), 1);
    assert_non_null(strstr(out, "trainer: error: out of memory allocating"));
    assert_non_null(strstr(out, "test_error.c:"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_with_where_and_hint),
        cmocka_unit_test(test_report_without_where_or_hint),
        cmocka_unit_test(test_libtool_wrapper_name_is_stripped),
        cmocka_unit_test(test_exit_codes_follow_contract),
        cmocka_unit_test(test_prefix_keeps_where_and_hint),
        cmocka_unit_test(test_overlong_message_is_truncated_not_overflowed),
        cmocka_unit_test(test_null_error_is_allowed),
        cmocka_unit_test(test_check_macro_reports_file_line_and_exits_1),
        cmocka_unit_test(test_alloc_check_reports_file_line_and_exits_1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
