/*
 * tests/lib/test_progress.c — the bar on a terminal, periodic lines in a log file, with
 * rate and ETA computed from an injected clock.
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
#include "lib/progress.h"

static double fake_now;
static double fake_clock(void *ctx) {
    (void)ctx;
    return fake_now;
}

typedef struct capture {
    char *buf;
    size_t len;
    FILE *f;
} capture;

static lt_progress *start(capture *c, int tty, uint64_t total) {
    c->buf = NULL;
    c->f = open_memstream(&c->buf, &c->len);
    assert_non_null(c->f);
    fake_now = 100.0;
    lt_progress_options o = {.out = c->f, .tty = tty, .interval_s = 10, .clock = fake_clock};
    lt_progress *p = lt_progress_start_opts("tokenize", total, "docs", &o);
    assert_non_null(p);
    return p;
}

static char *finish_capture(capture *c) {
    fclose(c->f);
    return c->buf;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static void test_format_helpers(void **state) {
    (void)state;
    char b[32];
    lt_format_si(999, b, sizeof b);
    assert_string_equal(b, "999");
    lt_format_si(5, b, sizeof b);
    assert_string_equal(b, "5.00");
    lt_format_si(25, b, sizeof b);
    assert_string_equal(b, "25.0");
    lt_format_si(999.7, b, sizeof b);
    assert_string_equal(b, "1.00k");
    lt_format_si(1234, b, sizeof b);
    assert_string_equal(b, "1.23k");
    lt_format_si(45600000, b, sizeof b);
    assert_string_equal(b, "45.6M");
    lt_format_si(321e9, b, sizeof b);
    assert_string_equal(b, "321G");
    lt_format_hms(3723, b, sizeof b);
    assert_string_equal(b, "01:02:03");
    lt_format_hms(-1, b, sizeof b);
    assert_string_equal(b, "--:--:--");
}

static void test_log_mode_reports_every_interval(void **state) {
    (void)state;
    lt_set_program("dataprep");
    lt_log_set_level(LT_LOG_INFO);
    capture c;
    lt_progress *p = start(&c, 0, 1000);
    lt_progress_extra(p, 0, "MB", 1e6);
    fake_now = 105; /* before the first interval: silent */
    lt_progress_add(p, 100);
    fflush(c.f);
    assert_int_equal(c.len, 0);
    fake_now = 110; /* 10 s in: 250 docs done -> 25 docs/s, 750 left -> ETA 30 s */
    lt_progress_add_extra(p, 0, 50000000);
    lt_progress_add(p, 150);
    fake_now = 112; /* within the next interval: silent */
    lt_progress_add(p, 1);
    lt_progress_finish(p);
    char *out = finish_capture(&c);
    assert_int_equal(count_lines(out), 2);
    assert_non_null(strstr(out, "dataprep: tokenize: 25.0% (250/1000 docs), 25.0 docs/s, 5.00 MB/s, "
                                "elapsed 00:00:10, ETA 00:00:30\n"));
    assert_non_null(strstr(out, "(251/1000 docs)"));
    assert_non_null(strstr(out, ", done\n"));
    assert_null(strchr(out, '\r'));
    free(out);
}

static void test_tty_mode_draws_bar_in_place(void **state) {
    (void)state;
    capture c;
    lt_progress *p = start(&c, 1, 200);
    fake_now = 104; /* 4 s: 100/200 = 50% at 25 docs/s, ETA 4 s */
    lt_progress_add(p, 100);
    fake_now = 108;
    lt_progress_add(p, 100);
    lt_progress_finish(p);
    char *out = finish_capture(&c);
    assert_non_null(strstr(out, "\rtokenize [############------------]  50.0% 100/200 docs  25.0 docs/s  ETA 00:00:04\033[K"));
    assert_non_null(strstr(out, "[########################] 100.0% 200/200 docs  25.0 docs/s  in 00:00:08\033[K\n"));
    assert_int_equal(count_lines(out), 1); /* only the final newline */
    free(out);
}

static void test_unknown_total_has_no_eta(void **state) {
    (void)state;
    capture c;
    lt_progress *p = start(&c, 0, 0);
    fake_now = 120;
    lt_progress_add(p, 40);
    lt_progress_finish(p);
    char *out = finish_capture(&c);
    assert_non_null(strstr(out, "tokenize: 40 docs, 2.00 docs/s, elapsed 00:00:20\n"));
    assert_null(strstr(out, "ETA"));
    free(out);
}

static void test_quiet_counts_but_prints_nothing(void **state) {
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    lt_progress_options o = {.out = f, .tty = 0, .quiet = 1, .clock = fake_clock};
    fake_now = 0;
    lt_progress *p = lt_progress_start_opts("x", 10, "steps", &o);
    fake_now = 1000;
    lt_progress_add(p, 7);
    assert_int_equal(lt_progress_done(p), 7);
    lt_progress_finish(p);
    fclose(f);
    assert_int_equal(len, 0);
    free(buf);
    lt_progress_finish(NULL); /* NULL-safe */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_helpers),
        cmocka_unit_test(test_log_mode_reports_every_interval),
        cmocka_unit_test(test_tty_mode_draws_bar_in_place),
        cmocka_unit_test(test_unknown_total_has_no_eta),
        cmocka_unit_test(test_quiet_counts_but_prints_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
