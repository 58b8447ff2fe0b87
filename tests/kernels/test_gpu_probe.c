/*
 * tests/kernels/test_gpu_probe.c — the CUDA build rule works end to end: device
 * discovery and the saxpy kernel against the CPU. Without CUDA or without a GPU the GPU
 * checks are skipped with the reason (cmocka's skip shows as "# SKIP" in TAP).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "kernels/gpu.h"

static void skip_without_gpu(void) {
    char why[256] = "";
    if (lt_gpu_device_count(why, sizeof why) == 0) {
        printf("# skip: %s\n", why);
        skip();
    }
}

static void test_without_device_reports_reason(void **state) {
    (void)state;
    char why[256] = "";
    int n = lt_gpu_device_count(why, sizeof why);
    if (n == 0) {
        assert_true(why[0] != '\0'); /* a reason in words, never a silent 0 */
        lt_error err;
        lt_error_clear(&err);
        float x = 1, y = 2;
        assert_int_not_equal(lt_gpu_saxpy(2.0f, &x, &y, 1, &err), LT_OK);
        assert_true(err.what[0] != '\0');
    } else {
        assert_true(n > 0);
    }
}

static void test_device_is_hopper_or_newer(void **state) {
    (void)state;
    skip_without_gpu();
    char name[256];
    int major = 0, minor = 0;
    lt_error err;
    assert_int_equal(lt_gpu_device_info(0, name, sizeof name, &major, &minor, &err), LT_OK);
    printf("# device 0: %s (sm_%d%d)\n", name, major, minor);
    /* the kernels are compiled for sm_90 only */
    assert_true(major >= 9);
}

static void test_saxpy_matches_cpu(void **state) {
    (void)state;
    skip_without_gpu();
    const size_t n = 1000003; /* not a multiple of the block size */
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *ref = malloc(n * sizeof *ref);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(ref);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)(i % 1000) * 0.5f;
        y[i] = (float)(i % 7) - 3.0f;
        ref[i] = 1.5f * x[i] + y[i];
    }
    lt_error err;
    lt_status st = lt_gpu_saxpy(1.5f, x, y, n, &err);
    if (st != LT_OK) fail_msg("saxpy: %s (%s)", err.what, err.where);
    for (size_t i = 0; i < n; i++) assert_float_equal(y[i], ref[i], 1e-5f * (1.0f + ref[i]));
    free(x);
    free(y);
    free(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_without_device_reports_reason),
        cmocka_unit_test(test_device_is_hopper_or_newer),
        cmocka_unit_test(test_saxpy_matches_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
