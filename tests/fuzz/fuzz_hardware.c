/*
 * tests/fuzz/fuzz_hardware.c — libFuzzer target for the hardware-profile parser
 * (plans/cost/hardware.h: lt_hardware_parse, lt_efficiency_parse) and the length lists of the
 * planner (plans/batches/lengths.h: lt_lengths_parse_list).
 *
 * The input is arbitrary bytes; its text up to the first NUL goes through:
 *   1. lt_hardware_parse, as the text of a profile file;
 *   2. lt_efficiency_parse, as one efficiency-curve value;
 *   3. lt_lengths_parse_list, as a --unit-lengths argument.
 * What is checked (a violation calls abort(), which libFuzzer reports as a crash; a crash,
 * a sanitizer report, a hang and an exit() through LT_CHECK are failures):
 *   - no crash, leak or undefined behaviour;
 *   - an error is a value: the status equals err.status, is never LT_ERR_INTERNAL, WHAT is
 *     non-empty; a profile error's WHERE names the file;
 *   - a parsed profile is usable: positive peak FLOP/s and memory, and its efficiencies at
 *     1, 1K, 1M and 1G tokens are finite and in (0, 1];
 *   - a parsed length list is non-empty with every length >= 1.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h"
#include "plans/cost/hardware.h"
#include "plans/batches/lengths.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const lt_error *err) {
    fprintf(stderr, "fuzz_hardware: property violated: %s (%s: %s)\n", what, err ? err->where : "",
            err ? err->what : "");
    abort();
}

static void check_error(lt_status st, const lt_error *err, const char *where_prefix) {
    if (st == LT_OK) return;
    if (st != err->status) fail("returned status differs from err.status", err);
    if (st == LT_ERR_INTERNAL) fail("internal error on input", err);
    if (err->what[0] == '\0') fail("error without a message", err);
    if (where_prefix && strncmp(err->where, where_prefix, strlen(where_prefix)) != 0)
        fail("profile error does not name the file", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    lt_error err;
    lt_error_clear(&err);
    lt_hardware hw;
    lt_status st = lt_hardware_parse(&hw, text, "fuzz.ini", "fuzz", &err);
    check_error(st, &err, "fuzz.ini");
    if (st == LT_OK) {
        if (!(hw.peak_flops > 0) || !(hw.hbm_bytes > 0)) fail("parsed profile without peak or memory", NULL);
        static const double tokens[] = {1, 1024, 1048576, 1073741824};
        for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
            double g = lt_hardware_efficiency(&hw.gemm, tokens[i]), a = lt_hardware_efficiency(&hw.attention, tokens[i]);
            if (!isfinite(g) || !isfinite(a) || g <= 0 || g > 1 || a <= 0 || a > 1)
                fail("efficiency out of (0, 1]", NULL);
        }
    }

    lt_efficiency_curve c;
    lt_error_clear(&err);
    st = lt_efficiency_parse(&c, text, &err);
    check_error(st, &err, NULL);

    int64_t *lens = NULL;
    size_t n = 0;
    lt_error_clear(&err);
    st = lt_lengths_parse_list(text, "--unit-lengths", &lens, &n, &err);
    check_error(st, &err, NULL);
    if (st == LT_OK) {
        if (n == 0) fail("empty length list parsed", NULL);
        for (size_t i = 0; i < n; i++)
            if (lens[i] < 1) fail("length < 1 parsed", NULL);
    }
    free(lens);
    free(text);
    return 0;
}
