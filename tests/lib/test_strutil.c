/*
 * tests/lib/test_strutil.c — unit tests for lib/strutil (cmocka): trimming, edit distance,
 * "did you mean" closeness, and the strict integer / size / double / bool parsers,
 * including every overflow edge. Expected values are worked out by hand from the rules
 * in lib/strutil.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/strutil.h"

/* ------------------------------------------------------------------ trim */

static void test_trim(void **state) {
    (void)state;
    char a[] = "  a b \t\r\n";
    assert_string_equal(lt_trim(a), "a b");
    char b[] = "";
    assert_string_equal(lt_trim(b), "");
    char c[] = " \t\n ";
    assert_string_equal(lt_trim(c), "");
    char d[] = "x";
    assert_ptr_equal(lt_trim(d), d); /* nothing to drop: same pointer */
    char e[] = "\vvalue\f";
    assert_string_equal(lt_trim(e), "value");
    assert_null(lt_trim(NULL));
}

static void test_is_blank(void **state) {
    (void)state;
    assert_true(lt_is_blank(NULL));
    assert_true(lt_is_blank(""));
    assert_true(lt_is_blank(" \t\r\n"));
    assert_false(lt_is_blank(" a "));
}

/* ------------------------------------------------------------------ edit distance */

static void test_edit_distance_basics(void **state) {
    (void)state;
    assert_int_equal(lt_edit_distance("", ""), 0);
    assert_int_equal(lt_edit_distance("abc", ""), 3);
    assert_int_equal(lt_edit_distance("", "abcd"), 4);
    assert_int_equal(lt_edit_distance(NULL, "ab"), 2);
    assert_int_equal(lt_edit_distance("same", "same"), 0);
    assert_int_equal(lt_edit_distance("kitten", "sitting"), 3); /* k->s, e->i, +g */
    assert_int_equal(lt_edit_distance("flaw", "lawn"), 2);      /* -f, +n */
    assert_int_equal(lt_edit_distance("contxt_len", "context_len"), 1);
    assert_int_equal(lt_edit_distance("context_len", "contxt_len"), 1); /* symmetric */
    assert_int_equal(lt_edit_distance("Context_Len", "context_len"), 2); /* case counts */
    assert_int_equal(lt_edit_distance("stratgy", "strategy"), 1);
}

static void test_edit_distance_transpositions(void **state) {
    (void)state;
    assert_int_equal(lt_edit_distance("ab", "ba"), 1);
    assert_int_equal(lt_edit_distance("plna", "plan"), 1);
    assert_int_equal(lt_edit_distance("contetx_len", "context_len"), 1);
    /* optimal string alignment: a swapped pair is not edited again, so "ca" -> "abc"
     * costs 3 (true Damerau-Levenshtein would say 2) */
    assert_int_equal(lt_edit_distance("ca", "abc"), 3);
}

static void test_edit_distance_long(void **state) {
    (void)state;
    /* longer than the 128-column stack buffer: the heap path */
    char a[301], b[301];
    memset(a, 'a', 300);
    a[300] = '\0';
    memcpy(b, a, sizeof b);
    b[150] = 'b';
    assert_int_equal(lt_edit_distance(a, b), 1);
    assert_int_equal(lt_edit_distance(a, ""), 300);
    b[140] = '\0'; /* 140 a's */
    assert_int_equal(lt_edit_distance(a, b), 160);
    assert_int_equal(lt_edit_distance(b, a), 160);
}

static void test_close_match(void **state) {
    (void)state;
    assert_true(lt_is_close_match("contxt_len", "context_len", 1));
    assert_true(lt_is_close_match("dpp", "dp", 1));
    assert_true(lt_is_close_match("pq", "pp", 1));
    assert_true(lt_is_close_match("context_length", "context_len", 3)); /* limit 1+14/4 = 4 -> 3 */
    assert_false(lt_is_close_match("x", "tp", 2));    /* limit 1 */
    assert_false(lt_is_close_match("a", "b", 1));     /* the whole word replaced */
    assert_false(lt_is_close_match("abcdefghijklmnop", "abcdefghijklXXXX", 4)); /* cap 3 */
    assert_true(lt_is_close_match("abcdefgh", "abcdefXX", 2));  /* limit 1+8/4 = 3 */
    assert_false(lt_is_close_match("abcdefg", "abcdXXX", 3));   /* limit 1+7/4 = 2 */
}

/* ------------------------------------------------------------------ integers */

static void test_parse_int64_ok(void **state) {
    (void)state;
    int64_t v = 99;
    assert_int_equal(lt_parse_int64("0", &v), LT_OK);
    assert_int_equal(v, 0);
    assert_int_equal(lt_parse_int64("42", &v), LT_OK);
    assert_int_equal(v, 42);
    assert_int_equal(lt_parse_int64("-7", &v), LT_OK);
    assert_int_equal(v, -7);
    assert_int_equal(lt_parse_int64("+7", &v), LT_OK);
    assert_int_equal(v, 7);
    assert_int_equal(lt_parse_int64("00012", &v), LT_OK);
    assert_int_equal(v, 12);
    assert_int_equal(lt_parse_int64("9223372036854775807", &v), LT_OK);
    assert_true(v == INT64_MAX);
    assert_int_equal(lt_parse_int64("-9223372036854775808", &v), LT_OK);
    assert_true(v == INT64_MIN);
}

static void test_parse_int64_bad(void **state) {
    (void)state;
    static const char *malformed[] = {"", " 1", "1 ", "1K", "0x10", "1.0", "-", "+", "eight",
                                      "1_000", "--1", "1e3"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        int64_t v = 5;
        const char *why = "unset";
        assert_int_equal(lt_parse_int64_why(malformed[i], &v, &why), LT_ERR_INPUT);
        assert_null(why);
        assert_int_equal(v, 5); /* untouched */
    }
    int64_t v = 5;
    const char *why = NULL;
    assert_int_equal(lt_parse_int64_why("9223372036854775808", &v, &why), LT_ERR_INPUT);
    assert_string_equal(why, "out of range");
    why = NULL;
    assert_int_equal(lt_parse_int64_why("-9223372036854775809", &v, &why), LT_ERR_INPUT);
    assert_string_equal(why, "out of range");
    why = NULL;
    assert_int_equal(lt_parse_int64_why("99999999999999999999999999", &v, &why), LT_ERR_INPUT);
    assert_string_equal(why, "out of range");
    assert_int_equal(v, 5);
    assert_int_equal(lt_parse_int64(NULL, &v), LT_ERR_INPUT);
}

/* ------------------------------------------------------------------ sizes */

static void test_parse_size_ok(void **state) {
    (void)state;
    static const struct {
        const char *text;
        uint64_t value;
    } cases[] = {
        {"0", 0},
        {"1", 1},
        {"4096", 4096},
        {"4K", 4096},
        {"4k", 4096},
        {"256K", 262144},
        {"3M", 3145728},
        {"3m", 3145728},
        {"80G", UINT64_C(85899345920)},
        {"2T", UINT64_C(2199023255552)},
        {"2t", UINT64_C(2199023255552)},
        {"1.5G", UINT64_C(1610612736)},
        {"1.50G", UINT64_C(1610612736)},  /* trailing zeros of the fraction do not matter */
        {"0.5K", 512},
        {"1.25K", 1280},
        {"2.0", 2},
        {"0.0", 0},
        {"0.25M", 262144},
        {"8388607T", UINT64_C(9223370937343148032)}, /* (2^23 - 1) * 2^40 = 2^63 - 2^40 */
        {"9223372036854775807", UINT64_C(9223372036854775807)}, /* INT64_MAX itself */
        {"1.0009765625K", 1025}, /* (1 + 2^-10) * 2^10 */
        {"0.0009765625K", 1},    /* 2^-10 * 2^10 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t v = 1;
        const char *why = "unset";
        if (lt_parse_size_why(cases[i].text, &v, &why) != LT_OK)
            fail_msg("'%s' refused (%s)", cases[i].text, why ? why : "malformed");
        if (v != cases[i].value)
            fail_msg("'%s' -> %llu, expected %llu", cases[i].text, (unsigned long long)v,
                     (unsigned long long)cases[i].value);
    }
}

static void test_parse_size_bad(void **state) {
    (void)state;
    static const struct {
        const char *text;
        const char *why; /* NULL: malformed */
    } cases[] = {
        {"", NULL},
        {"eighty", NULL},
        {"80GB", NULL},
        {"80GiB", NULL},
        {"80 G", NULL},
        {" 80G", NULL},
        {"80G ", NULL},
        {"-1", NULL},
        {"+1", NULL},
        {"1.K", NULL},
        {".5K", NULL},
        {"K", NULL},
        {"1KK", NULL},
        {"1P", NULL},
        {"1e3", NULL},
        {"0x10", NULL},
        {"1.3K", "not a whole number"},      /* 1331.2 */
        {"1.5", "not a whole number"},
        {"0.001", "not a whole number"},
        {"8388608T", "too large"},           /* 2^63 */
        {"9223372036854775808", "too large"},
        {"18446744073709551616", "too large"}, /* 2^64: overflows while reading */
        {"99999999999T", "too large"},
        {"16777216T", "too large"},
        {"0.0000000000000000001K", "too many decimal places"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t v = 77;
        const char *why = "unset";
        if (lt_parse_size_why(cases[i].text, &v, &why) != LT_ERR_INPUT)
            fail_msg("'%s' accepted as %llu", cases[i].text, (unsigned long long)v);
        assert_int_equal(v, 77);
        if (cases[i].why == NULL) {
            if (why != NULL) fail_msg("'%s': unexpected reason '%s'", cases[i].text, why);
        } else {
            if (why == NULL)
                fail_msg("'%s': no reason, expected '%s'", cases[i].text, cases[i].why);
            assert_string_equal(why, cases[i].why);
        }
    }
    uint64_t v;
    assert_int_equal(lt_parse_size(NULL, &v), LT_ERR_INPUT);
    assert_int_equal(lt_parse_size("2x", &v), LT_ERR_INPUT);
}

/* Found by fuzz_numbers: integer and fraction digits used to share one 64-bit
 * accumulator, so long inputs were wrongly "too large". */
static void test_parse_size_long_fraction(void **state) {
    (void)state;
    uint64_t v = 0;
    const char *why = NULL;
    /* 20T + 0.000003814697265625T = 20T + 4M */
    assert_int_equal(lt_parse_size_why("20.000003814697265625T", &v, &why), LT_OK);
    assert_true(v == 20ULL * 1099511627776ULL + 4ULL * 1048576ULL);
    assert_int_equal(lt_parse_size_why("20.000000000000000001", &v, &why), LT_ERR_INPUT);
    assert_string_equal(why, "not a whole number");
    assert_int_equal(lt_parse_size_why("9223372036854775807", &v, &why), LT_OK);
    assert_true(v == 9223372036854775807ULL);
    assert_int_equal(lt_parse_size_why("9223372036854775808", &v, &why), LT_ERR_INPUT);
    assert_string_equal(why, "too large");
    assert_int_equal(lt_parse_size_why("1.0000000000000000001T", &v, &why), LT_ERR_INPUT);
    assert_string_equal(why, "too many decimal places");
}

static void test_format_size(void **state) {
    (void)state;
    char buf[32];
    assert_string_equal(lt_format_size(0, buf, sizeof buf), "0");
    assert_string_equal(lt_format_size(1000, buf, sizeof buf), "1000");
    assert_string_equal(lt_format_size(1024, buf, sizeof buf), "1K");
    assert_string_equal(lt_format_size(1536, buf, sizeof buf), "1536");
    assert_string_equal(lt_format_size(UINT64_C(1572864), buf, sizeof buf), "1536K");
    assert_string_equal(lt_format_size(UINT64_C(1610612736), buf, sizeof buf), "1536M");
    assert_string_equal(lt_format_size(UINT64_C(85899345920), buf, sizeof buf), "80G");
    assert_string_equal(lt_format_size(UINT64_C(3298534883328), buf, sizeof buf), "3T");
    assert_string_equal(lt_format_size(UINT64_C(1) << 50, buf, sizeof buf), "1024T");
    assert_string_equal(lt_format_size(UINT64_C(9223372036854775807), buf, sizeof buf),
                        "9223372036854775807");
    /* what it writes reads back to the same value */
    const uint64_t values[] = {
        0, 1, 4096, 12345, UINT64_C(85899345920), UINT64_C(9223370937343148032)};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        uint64_t back = 0;
        assert_int_equal(lt_parse_size(lt_format_size(values[i], buf, sizeof buf), &back), LT_OK);
        assert_true(back == values[i]);
    }
    char small[3];
    assert_string_equal(lt_format_size(4096, small, sizeof small), "4K");
    assert_string_equal(lt_format_size(12345, small, sizeof small),
                        "12"); /* truncated, terminated */
}

/* ------------------------------------------------------------------ doubles and bools */

static void test_parse_double_ok(void **state) {
    (void)state;
    double v = 9;
    assert_int_equal(lt_parse_double("3e-4", &v), LT_OK);
    assert_true(v == 3e-4);
    assert_int_equal(lt_parse_double("0.1", &v), LT_OK);
    assert_true(v == 0.1);
    assert_int_equal(lt_parse_double("-2.5", &v), LT_OK);
    assert_true(v == -2.5);
    assert_int_equal(lt_parse_double("+1", &v), LT_OK);
    assert_true(v == 1.0);
    assert_int_equal(lt_parse_double(".5", &v), LT_OK);
    assert_true(v == 0.5);
    assert_int_equal(lt_parse_double("5.", &v), LT_OK);
    assert_true(v == 5.0);
    assert_int_equal(lt_parse_double("1E3", &v), LT_OK);
    assert_true(v == 1000.0);
    assert_int_equal(lt_parse_double("1e+2", &v), LT_OK);
    assert_true(v == 100.0);
    assert_int_equal(lt_parse_double("0e-999", &v), LT_OK); /* zero written as zero is fine */
    assert_true(v == 0.0);
    assert_int_equal(lt_parse_double("1e308", &v), LT_OK);
    assert_true(v == 1e308);
}

static void test_parse_double_bad(void **state) {
    (void)state;
    static const char *malformed[] = {"", "fast", "inf", "-inf", "nan", "NaN", "infinity",
                                      "0x1p3", "1e", "1e+", ".", "-", "1,5", " 1", "1 ",
                                      "1.2.3", "e5", "1K"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        double v = 9;
        const char *why = "unset";
        if (lt_parse_double_why(malformed[i], &v, &why) != LT_ERR_INPUT)
            fail_msg("'%s' accepted", malformed[i]);
        assert_null(why);
        assert_true(v == 9);
    }
    double v = 9;
    const char *why = NULL;
    assert_int_equal(lt_parse_double_why("1e999", &v, &why), LT_ERR_INPUT);
    assert_string_equal(why, "out of range");
    why = NULL;
    assert_int_equal(lt_parse_double_why("-1e999", &v, &why), LT_ERR_INPUT);
    assert_string_equal(why, "out of range");
    why = NULL;
    assert_int_equal(lt_parse_double_why("1e-999", &v, &why), LT_ERR_INPUT);
    assert_string_equal(why, "out of range");
    assert_true(v == 9);
}

static void test_parse_bool(void **state) {
    (void)state;
    static const char *yes[] = {"true", "yes", "on", "1", "TRUE", "Yes", "oN"};
    static const char *no[] = {"false", "no", "off", "0", "FALSE", "No", "OFF"};
    static const char *bad[] = {"", "maybe", "2", "y", "t", "true ", " no", "enabled"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        bool v = false;
        assert_int_equal(lt_parse_bool(yes[i], &v), LT_OK);
        assert_true(v);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        bool v = true;
        assert_int_equal(lt_parse_bool(no[i], &v), LT_OK);
        assert_false(v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bool v = true;
        assert_int_equal(lt_parse_bool(bad[i], &v), LT_ERR_INPUT);
        assert_true(v);
    }
    bool v;
    assert_int_equal(lt_parse_bool(NULL, &v), LT_ERR_INPUT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trim),
        cmocka_unit_test(test_is_blank),
        cmocka_unit_test(test_edit_distance_basics),
        cmocka_unit_test(test_edit_distance_transpositions),
        cmocka_unit_test(test_edit_distance_long),
        cmocka_unit_test(test_close_match),
        cmocka_unit_test(test_parse_int64_ok),
        cmocka_unit_test(test_parse_int64_bad),
        cmocka_unit_test(test_parse_size_ok),
        cmocka_unit_test(test_parse_size_bad),
        cmocka_unit_test(test_parse_size_long_fraction),
        cmocka_unit_test(test_format_size),
        cmocka_unit_test(test_parse_double_ok),
        cmocka_unit_test(test_parse_double_bad),
        cmocka_unit_test(test_parse_bool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
