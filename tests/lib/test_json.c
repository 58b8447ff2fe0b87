/*
 * tests/lib/test_json.c — unit tests for lib/json (cmocka), plus reference modes.
 *
 * Without arguments: the cmocka tests — UTF-8 repair against Python's
 * bytes.decode("utf-8", "replace") (expected values checked with python3 when written),
 * writer escaping (RFC 8259), numbers, structure, misuse (forked children), file output;
 * reader values, escapes, surrogates, first-key-wins, type errors, malformed lines with
 * their columns, nesting limits, and writer -> reader round trips on random byte strings;
 * the document parser (lt_json_parse): values and their line/column, strings (agreeing
 * with the reader byte for byte), duplicates (last wins), BOM and blanks, errors with
 * their line/column, every prefix and one-byte mutation of a sample document (clean
 * errors at the same byte as the reader's), nesting limits, lt_jv_int64 edge cases, a
 * tokenizer sidecar file, and parse -> write -> parse round trips.
 *
 * Modes for tests/lib/json_reference.py (which checks them with Python's json module):
 *   test_json --dump-json N SEED   write N JSON lines built from random byte strings,
 *                                  doubles and integers (each line also carries the raw
 *                                  input in hex)
 *   test_json --read-jsonl KEY     for each stdin line print "OK <hex of value>", "ABSENT",
 *                                  or "ERR <status> <where>: <what>"
 *   test_json --parse-json         each stdin line is a document in hex; print
 *                                  "OK [TREE,[INT64S],REPLACEMENTS]" (the tree written back
 *                                  with the writer, numbers verbatim; lt_jv_int64 of every
 *                                  number in document order, null where false; the root's
 *                                  replacements), "DEEP" (too deep for the writer), or
 *                                  "ERR <status> <where>: <what>"
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/json.h"
#include "tests/testutil.h"

/* xorshift64* for test data (the tests must not depend on lib/rng) */
static uint64_t trng_state = 0x9E3779B97F4A7C15u;
static uint64_t trng(void) {
    trng_state ^= trng_state >> 12;
    trng_state ^= trng_state << 25;
    trng_state ^= trng_state >> 27;
    return trng_state * 0x2545F4914F6CDD1DULL;
}

/* ================================================================ UTF-8 */

typedef struct {
    const char *in;
    size_t in_len;
    const char *out; /* Python: in.decode("utf-8", "replace").encode("utf-8") */
    size_t out_len;
    size_t repl;
} utf8_case;

#define S(lit) lit, sizeof(lit) - 1
#define FFFD "\xef\xbf\xbd"

static const utf8_case utf8_cases[] = {
    {S("plain ascii"), S("plain ascii"), 0},
    {S("\xe0\x80\x80"), S(FFFD FFFD FFFD), 3},             /* overlong 3-byte NUL */
    {S("\xed\xa0\x80"), S(FFFD FFFD FFFD), 3},             /* surrogate D800 */
    {S("\xed\xbf\xbf"), S(FFFD FFFD FFFD), 3},             /* surrogate DFFF */
    {S("\xf0\x9f\x98"), S(FFFD), 1},                       /* truncated 4-byte */
    {S("\xc0\xaf"), S(FFFD FFFD), 2},                      /* overlong '/' */
    {S("\xc1\xbf"), S(FFFD FFFD), 2},                      /* overlong */
    {S("\xf4\x90\x80\x80"), S(FFFD FFFD FFFD FFFD), 4},    /* > U+10FFFF */
    {S("\xf5\x80\x80\x80"), S(FFFD FFFD FFFD FFFD), 4},    /* F5 never valid */
    {S("\xf8\x88\x80\x80\x80"), S(FFFD FFFD FFFD FFFD FFFD), 5},
    {S("\x80"), S(FFFD), 1},
    {S("\xff"), S(FFFD), 1},
    {S("\xe0\xa0"), S(FFFD), 1},
    {S("\xe0\xa0" "A"), S(FFFD "A"), 1},
    {S("\xf0\x80"), S(FFFD FFFD), 2},
    {S("\xf0\x90\x80"), S(FFFD), 1},
    {S("\xf0\x90\x80" "A"), S(FFFD "A"), 1},
    {S("\xc2"), S(FFFD), 1},
    {S("\xc2" "A"), S(FFFD "A"), 1},
    {S("a\x80\x80" "b"), S("a" FFFD FFFD "b"), 2},
    {S("\xe1\x80\xe1\x80\x80"), S(FFFD "\xe1\x80\x80"), 1},
    {S("\xf1\x80\x80\xf1\x80\x80\x80"), S(FFFD "\xf1\x80\x80\x80"), 1},
    {S("\xed\x9f\xbf"), S("\xed\x9f\xbf"), 0},             /* U+D7FF */
    {S("\xee\x80\x80"), S("\xee\x80\x80"), 0},             /* U+E000 */
    {S("\xf4\x8f\xbf\xbf"), S("\xf4\x8f\xbf\xbf"), 0},     /* U+10FFFF */
    {S("\xef\xbf\xbe"), S("\xef\xbf\xbe"), 0},             /* U+FFFE noncharacter: valid */
    {S("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), S("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), 0},
    {S("x\0y"), S("x\0y"), 0},
};

static void test_utf8_sanitize(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof utf8_cases / sizeof utf8_cases[0]; i++) {
        const utf8_case *c = &utf8_cases[i];
        char out[64];
        size_t repl = 0;
        size_t n = lt_utf8_sanitize(c->in, c->in_len, out, &repl);
        if (n != c->out_len || memcmp(out, c->out, n) != 0 || repl != c->repl)
            fail_msg("utf8 case %zu: got %zu bytes, %zu replacements", i, n, repl);
        assert_int_equal(lt_utf8_valid(c->in, c->in_len), c->repl == 0);
        assert_true(lt_utf8_valid(out, n));
    }
    /* lt_utf8_next on the pieces */
    int32_t cp;
    assert_int_equal(lt_utf8_next("\xf0\x9f\x98\x80", 4, &cp), 4);
    assert_int_equal(cp, 0x1F600);
    assert_int_equal(lt_utf8_next("\xe0\x80\x80", 3, &cp), 1);
    assert_int_equal(cp, LT_UTF8_INVALID);
    assert_int_equal(lt_utf8_next("\xf0\x9f\x98", 3, &cp), 3);
    assert_int_equal(cp, LT_UTF8_INVALID);
    assert_int_equal(lt_utf8_next("\xf0\x9f\x98\x80", 2, &cp), 2); /* n limits the view */
    assert_int_equal(cp, LT_UTF8_INVALID);
    char enc[4];
    assert_int_equal(lt_utf8_encode(0x10FFFF, enc), 4);
    assert_memory_equal(enc, "\xf4\x8f\xbf\xbf", 4);
    assert_int_equal(lt_utf8_encode(0x7FF, enc), 2);
    assert_memory_equal(enc, "\xdf\xbf", 2);
    /* every 2-byte sequence: our decision agrees with the table-driven definition */
    for (int a = 0; a < 256; a++) {
        for (int b = 0; b < 256; b++) {
            char in[2] = {(char)a, (char)b};
            bool valid = a < 0x80 ? b < 0x80 : (a >= 0xC2 && a <= 0xDF && b >= 0x80 && b <= 0xBF);
            assert_int_equal(lt_utf8_valid(in, 2), valid);
        }
    }
}

/* lt_utf8_valid (word-at-a-time ASCII, inline 2- and 3-byte checks) against the plain
 * definition: every lt_utf8_next step well-formed. Random strings over bytes that meet at
 * the table's edges (lead bytes C1 C2 DF E0 ED EF F0 F4 F5, continuations 7F 80 8F 90 9F A0
 * BF C0, ASCII), every length 0..40, cut at every end. */
static bool utf8_valid_by_steps(const char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        int32_t cp;
        i += lt_utf8_next(s + i, len - i, &cp);
        if (cp == LT_UTF8_INVALID) return false;
    }
    return true;
}

static void test_utf8_valid_fast_path(void **state) {
    (void)state;
    static const unsigned char bytes[] = {'a', ' ', 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1,
                                          0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
    uint64_t x = 88172645463325252ull;
    size_t valid = 0;
    for (int k = 0; k < 200000; k++) {
        char s[40];
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t len = (size_t)(x % 41);
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* mostly ASCII and continuations, so that long valid runs occur */
            unsigned r = (unsigned)(x >> 32) % 64;
            s[i] = (char)(r < 24 ? 'a' + r % 26 : r < 44 ? 0x80 + (r % 64) : bytes[r % sizeof bytes]);
        }
        bool want = utf8_valid_by_steps(s, len);
        valid += want;
        if (lt_utf8_valid(s, len) != want) fail_msg("case %d: length %zu, valid %d", k, len, want);
    }
    assert_true(valid > 1000); /* both answers were exercised */
    /* long texts (the 32-byte blocks where the CPU has AVX2): valid characters of every
     * width and edge (U+0080, U+07FF, U+0800, U+D7FF, U+E000, U+FFFF, U+10000, U+10FFFF),
     * then at most two bytes replaced by any byte, so that each kind of error falls at
     * every place in a block and across block edges */
    static const int32_t cps[] = {'a', ' ', 0x7F, 0x80, 0x7FF, 0x800, 0xE9, 0x10D0, 0xD7FF, 0xE000,
                                  0xFFFD, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF};
    size_t long_valid = 0, long_invalid = 0;
    for (int k = 0; k < 20000; k++) {
        char t[400];
        size_t tl = 0;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t want_len = 64 + (size_t)(x % 300);
        while (tl + 4 <= want_len) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            tl += lt_utf8_encode(cps[(x >> 20) % (sizeof cps / sizeof cps[0])], t + tl);
        }
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        for (unsigned e = (unsigned)(x % 3); e > 0; e--) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            t[(x >> 8) % tl] = (char)(x >> 40);
        }
        bool want = utf8_valid_by_steps(t, tl);
        want ? long_valid++ : long_invalid++;
        if (lt_utf8_valid(t, tl) != want) fail_msg("long case %d: length %zu, valid %d", k, tl, want);
        /* cut anywhere: a sequence cut at the end */
        size_t cut = (size_t)(x >> 50) % (tl + 1);
        if (lt_utf8_valid(t, cut) != utf8_valid_by_steps(t, cut)) fail_msg("long case %d cut at %zu", k, cut);
    }
    assert_true(long_valid > 1000 && long_invalid > 1000);
    /* valid text in every script width, a sequence cut at each byte, misalignment to 8 */
    const char *t = "abcdefgh\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80ijklmnop\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbfq";
    size_t tl = strlen(t);
    for (size_t off = 0; off < 8; off++)
        for (size_t end = off; end <= tl; end++)
            assert_int_equal(lt_utf8_valid(t + off, end - off), utf8_valid_by_steps(t + off, end - off));
}

/* ================================================================ writer */

static char *write_string(const char *s, size_t n, size_t *repl) {
    lt_json j;
    lt_json_init(&j);
    lt_json_string_n(&j, s, n);
    assert_true(lt_json_complete(&j));
    if (repl != NULL) *repl = j.replacements;
    char *copy = strdup(lt_json_cstr(&j));
    assert_non_null(copy);
    lt_json_free(&j);
    return copy;
}

static void expect_written(const char *in, size_t n, const char *want) {
    char *got = write_string(in, n, NULL);
    if (strcmp(got, want) != 0) fail_msg("wrote [%s], expected [%s]", got, want);
    free(got);
}

static void test_writer_escaping(void **state) {
    (void)state;
    /* RFC 8259 section 7: quotation mark, reverse solidus, control characters */
    expect_written(S(""), "\"\"");
    expect_written(S("\""), "\"\\\"\"");
    expect_written(S("\\"), "\"\\\\\"");
    expect_written(S("/"), "\"/\"");
    expect_written(S("\b\f\n\r\t"), "\"\\b\\f\\n\\r\\t\"");
    expect_written(S("\x01\x1f"), "\"\\u0001\\u001f\"");
    expect_written(S("a\0b"), "\"a\\u0000b\"");
    expect_written(S("\x0b\x1b"), "\"\\u000b\\u001b\"");
    expect_written(S("\x7f"), "\"\x7f\""); /* DEL passes */
    expect_written(S("tab\there \"q\" back\\slash"), "\"tab\\there \\\"q\\\" back\\\\slash\"");
    /* line/paragraph separators escaped for JavaScript consumers */
    expect_written(S("a\xe2\x80\xa8" "b\xe2\x80\xa9" "c"), "\"a\\u2028b\\u2029c\"");
    expect_written(S("\xe2\x80\xa7\xe2\x80\xaa"), "\"\xe2\x80\xa7\xe2\x80\xaa\""); /* neighbours pass */
    /* valid non-ASCII passes unchanged */
    expect_written(S("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 " FFFD), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 " FFFD "\"");
    /* invalid UTF-8 replaced, counted */
    for (size_t i = 0; i < sizeof utf8_cases / sizeof utf8_cases[0]; i++) {
        const utf8_case *c = &utf8_cases[i];
        if (memchr(c->in, '\0', c->in_len) != NULL) continue;
        size_t repl;
        char *got = write_string(c->in, c->in_len, &repl);
        assert_int_equal(repl, c->repl);
        assert_int_equal(strlen(got), c->out_len + 2);
        assert_memory_equal(got + 1, c->out, c->out_len);
        free(got);
    }
}

static void test_writer_structure(void **state) {
    (void)state;
    lt_json j;
    lt_json_init(&j);
    assert_string_equal(lt_json_cstr(&j), "");
    assert_false(lt_json_complete(&j));
    lt_json_object_begin(&j);
    lt_json_key(&j, "a");
    lt_json_int(&j, 1);
    lt_json_key(&j, "arr");
    lt_json_array_begin(&j);
    lt_json_int(&j, INT64_MIN);
    lt_json_uint(&j, UINT64_MAX);
    lt_json_bool(&j, true);
    lt_json_bool(&j, false);
    lt_json_null(&j);
    lt_json_array_begin(&j);
    lt_json_array_end(&j);
    lt_json_object_begin(&j);
    lt_json_object_end(&j);
    lt_json_string(&j, NULL);
    lt_json_array_end(&j);
    lt_json_key(&j, "k\"ey\n");
    lt_json_object_begin(&j);
    lt_json_key_n(&j, "x\0y", 3);
    lt_json_int(&j, INT64_MAX);
    lt_json_object_end(&j);
    assert_false(lt_json_complete(&j));
    lt_json_object_end(&j);
    assert_true(lt_json_complete(&j));
    assert_string_equal(lt_json_cstr(&j), "{\"a\":1,\"arr\":[-9223372036854775808,18446744073709551615,true,"
                                          "false,null,[],{},null],\"k\\\"ey\\n\":{\"x\\u0000y\":"
                                          "9223372036854775807}}");
    assert_int_equal(j.len, strlen(j.buf));

    /* reset keeps the buffer and allows a new text */
    char *old = j.buf;
    lt_json_reset(&j);
    assert_string_equal(lt_json_cstr(&j), "");
    assert_ptr_equal(j.buf, old);
    lt_json_array_begin(&j);
    lt_json_string(&j, "x");
    lt_json_array_end(&j);
    assert_string_equal(lt_json_cstr(&j), "[\"x\"]");
    lt_json_reset(&j);
    lt_json_int(&j, -5); /* a scalar top-level value is a complete text */
    assert_true(lt_json_complete(&j));
    assert_string_equal(lt_json_cstr(&j), "-5");
    lt_json_free(&j);
    assert_null(j.buf);
    lt_json_free(&j); /* twice is fine */

    /* deep but legal nesting, and a big string forcing growth */
    lt_json_init(&j);
    for (int d = 0; d < LT_JSON_MAX_DEPTH; d++) lt_json_array_begin(&j);
    for (int d = 0; d < LT_JSON_MAX_DEPTH; d++) lt_json_array_end(&j);
    assert_true(lt_json_complete(&j));
    assert_int_equal(j.len, 2 * LT_JSON_MAX_DEPTH);
    lt_json_reset(&j);
    size_t big = 1 << 20;
    char *s = malloc(big);
    assert_non_null(s);
    memset(s, 'q', big);
    lt_json_string_n(&j, s, big);
    assert_int_equal(j.len, big + 2);
    free(s);
    lt_json_free(&j);
}

static void expect_double(double v, const char *want) {
    lt_json j;
    lt_json_init(&j);
    lt_json_double(&j, v);
    if (strcmp(lt_json_cstr(&j), want) != 0) fail_msg("double %a wrote %s, expected %s", v, lt_json_cstr(&j), want);
    lt_json_free(&j);
}

static void test_writer_numbers(void **state) {
    (void)state;
    expect_double(0.0, "0");
    expect_double(-0.0, "-0");
    expect_double(1.0, "1");
    expect_double(0.1, "0.1");
    expect_double(-2.5, "-2.5");
    expect_double(1.0 / 3.0, "0.3333333333333333");
    expect_double(0.1 + 0.2, "0.30000000000000004");
    expect_double(1e300, "1e+300");
    expect_double(123456789012345678.0, "1.2345678901234568e+17");
    expect_double(NAN, "null");
    expect_double(INFINITY, "null");
    expect_double(-INFINITY, "null");
    /* random bit patterns: the text reads back to the same double */
    for (int i = 0; i < 20000; i++) {
        uint64_t bits = trng();
        double v;
        memcpy(&v, &bits, sizeof v);
        if (!isfinite(v)) continue;
        lt_json j;
        lt_json_init(&j);
        lt_json_double(&j, v);
        char *end;
        double back = strtod(lt_json_cstr(&j), &end);
        assert_true(*end == '\0');
        assert_memory_equal(&back, &v, sizeof v);
        lt_json_free(&j);
    }
    /* denormals and extremes */
    double ex[] = {5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308};
    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
        lt_json j;
        lt_json_init(&j);
        lt_json_double(&j, ex[i]);
        assert_true(strtod(lt_json_cstr(&j), NULL) == ex[i]);
        lt_json_free(&j);
    }
}

static void test_writer_locale(void **state) {
    (void)state;
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "de_DE"};
    const char *got = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && got == NULL; i++) got = setlocale(LC_NUMERIC, names[i]);
    if (got == NULL) {
        printf("# skip: no locale with a decimal comma installed (scripts/setup-deps.sh generates de_DE.UTF-8)\n");
        skip();
        return;
    }
    expect_double(2.5, "2.5");
    expect_double(-0.001, "-0.001");
    setlocale(LC_NUMERIC, "C");
}

/* misuse exits 1 with a report: run each in a forked child */
enum { MIS_KEY_OUTSIDE, MIS_VALUE_NO_KEY, MIS_UNBALANCED, MIS_WRONG_END, MIS_TWO_TOP, MIS_KEY_KEY,
       MIS_END_AFTER_KEY, MIS_TOO_DEEP, MIS_WRITE_INCOMPLETE, MIS_NUMBER_ZERO, MIS_NUMBER_BLANK, MIS_NUMBER_NAN,
       MIS_NUMBER_EMPTY, MIS_COUNT };

static void do_misuse(int which) {
    lt_json j;
    lt_json_init(&j);
    switch (which) {
    case MIS_KEY_OUTSIDE: lt_json_key(&j, "a"); break;
    case MIS_VALUE_NO_KEY: lt_json_object_begin(&j); lt_json_int(&j, 1); break;
    case MIS_UNBALANCED: lt_json_object_end(&j); break;
    case MIS_WRONG_END: lt_json_array_begin(&j); lt_json_object_end(&j); break;
    case MIS_TWO_TOP: lt_json_int(&j, 1); lt_json_int(&j, 2); break;
    case MIS_KEY_KEY: lt_json_object_begin(&j); lt_json_key(&j, "a"); lt_json_key(&j, "b"); break;
    case MIS_END_AFTER_KEY: lt_json_object_begin(&j); lt_json_key(&j, "a"); lt_json_object_end(&j); break;
    case MIS_TOO_DEEP:
        for (int d = 0; d <= LT_JSON_MAX_DEPTH; d++) lt_json_array_begin(&j);
        break;
    case MIS_WRITE_INCOMPLETE:
        lt_json_array_begin(&j);
        (void)lt_json_fwrite(&j, stdout, NULL, NULL);
        break;
    case MIS_NUMBER_ZERO: lt_json_number_text(&j, "01", 2); break;
    case MIS_NUMBER_BLANK: lt_json_number_text(&j, "1 ", 2); break;
    case MIS_NUMBER_NAN: lt_json_number_text(&j, "NaN", 3); break;
    case MIS_NUMBER_EMPTY: lt_json_number_text(&j, "", 0); break;
    }
    lt_json_free(&j);
}

static void misuse_in_child(void *arg) { do_misuse(*(int *)arg); }

static void test_writer_misuse(void **state) {
    (void)state;
    for (int which = 0; which < MIS_COUNT; which++) {
        char report[1024];
        int st = lt_test_in_child(misuse_in_child, &which, report, sizeof report);
        if (st != 1) fail_msg("misuse case %d exited %d, expected 1", which, st);
        if (strstr(report, "json.c:") == NULL) fail_msg("misuse case %d: no file:line in '%s'", which, report);
    }
}

static void test_writer_fwrite(void **state) {
    (void)state;
    lt_json j;
    lt_json_init(&j);
    lt_json_object_begin(&j);
    lt_json_key(&j, "x");
    lt_json_string(&j, "y");
    lt_json_object_end(&j);
    FILE *f = tmpfile();
    assert_non_null(f);
    lt_error err;
    lt_error_clear(&err);
    assert_int_equal(lt_json_fwrite_line(&j, f, "tmp", &err), LT_OK);
    assert_int_equal(lt_json_fwrite(&j, f, "tmp", &err), LT_OK);
    rewind(f);
    char back[64] = {0};
    size_t got = fread(back, 1, sizeof back - 1, f);
    assert_int_equal(got, 19);
    assert_string_equal(back, "{\"x\":\"y\"}\n{\"x\":\"y\"}");
    assert_int_equal(fclose(f), 0);

    /* a stream opened for reading cannot be written */
    f = fopen("/dev/null", "r");
    assert_non_null(f);
    lt_error_clear(&err);
    assert_int_equal(lt_json_fwrite_line(&j, f, "/dev/null", &err), LT_ERR_IO);
    assert_int_equal(err.status, LT_ERR_IO);
    assert_string_equal(err.where, "/dev/null");
    assert_int_equal(fclose(f), 0);

    /* /dev/full, unbuffered so the write itself fails */
    f = fopen("/dev/full", "w");
    if (f != NULL) {
        setvbuf(f, NULL, _IONBF, 0);
        lt_error_clear(&err);
        assert_int_equal(lt_json_fwrite(&j, f, "/dev/full", &err), LT_ERR_IO);
        assert_non_null(strstr(err.what, "write failed"));
        fclose(f);
    }
    lt_json_free(&j);
}

/* ================================================================ reader */

/* Parse `line` (length n) for `key`; expect success with the given value (NULL = absent). */
static void expect_value_n(const char *line, size_t n, const char *key, const char *want, size_t want_len,
                           size_t want_repl) {
    lt_jsonl_reader rd;
    lt_jsonl_reader_init(&rd);
    const char *out = (const char *)1;
    size_t out_len = 99;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_jsonl_reader_get(&rd, line, n, key, &out, &out_len, &err);
    if (st != LT_OK) fail_msg("line [%.*s]: %s (%s)", (int)n, line, err.what, err.where);
    if (want == NULL) {
        assert_null(out);
        assert_int_equal(out_len, 0);
    } else {
        assert_non_null(out);
        if (out_len != want_len || memcmp(out, want, want_len) != 0)
            fail_msg("line [%.*s]: got %zu bytes [%.*s], expected [%.*s]", (int)n, line, out_len, (int)out_len, out,
                     (int)want_len, want);
        assert_int_equal(out[out_len], '\0');
        assert_int_equal(rd.replacements, want_repl);
    }
    lt_jsonl_reader_free(&rd);

    /* the one-shot variant agrees */
    char *copy = (char *)1;
    size_t copy_len = 99;
    assert_int_equal(lt_jsonl_get_string(line, n, key, &copy, &copy_len, NULL), LT_OK);
    if (want == NULL) {
        assert_null(copy);
    } else {
        assert_non_null(copy);
        assert_int_equal(copy_len, want_len);
        assert_memory_equal(copy, want, want_len);
        assert_int_equal(copy[copy_len], '\0');
        free(copy);
    }
}

#define EXPECT(line, key, want) expect_value_n(S(line), key, S(want), 0)
#define EXPECT_REPL(line, key, want, repl) expect_value_n(S(line), key, S(want), repl)
#define EXPECT_ABSENT(line, key) expect_value_n(S(line), key, NULL, 0, 0)

static void test_reader_basic(void **state) {
    (void)state;
    EXPECT("{\"text\":\"hello\"}", "text", "hello");
    EXPECT("{\"text\":\"\"}", "text", "");
    EXPECT("  {  \"text\"  :  \"a b\"  }  ", "text", "a b");
    EXPECT("{\"text\":\"x\"}\n", "text", "x");
    EXPECT("{\"text\":\"x\"}\r\n", "text", "x");
    EXPECT("\t{\"text\":\"x\"}\t\r\n", "text", "x");
    EXPECT("\xef\xbb\xbf{\"text\":\"bom\"}", "text", "bom");
    EXPECT("{\"id\":7,\"text\":\"t\",\"code\":\"c\"}", "code", "c");
    EXPECT_ABSENT("{}", "text");
    EXPECT_ABSENT("{ }\n", "text");
    EXPECT_ABSENT("{\"txt\":\"x\",\"texts\":\"y\",\"Text\":\"z\"}", "text");
    EXPECT_ABSENT("{\"meta\":{\"text\":\"nested\"},\"a\":[{\"text\":\"x\"}]}", "text");
    /* empty key name */
    EXPECT("{\"\":\"empty\"}", "", "empty");
}

static void test_reader_nested_skip(void **state) {
    (void)state;
    EXPECT("{\"meta\":{\"a\":[1,2,{\"b\":null,\"c\":[[],{}]}],\"c\":\"x\\\"y}]\"},"
           "\"n\":-1.5e+3,\"m\":0,\"e\":1E-7,\"t\":true,\"f\":false,\"z\":null,\"s\":\"\\u0041\\\\\","
           "\"text\":\"ok\",\"after\":[{\"deep\":[[[\"x\"]]]}]}",
           "text", "ok");
    EXPECT("{\"a\" : [ 1 , 2 ] , \"b\" : { \"c\" : { } } , \"text\" : \"sp\" }", "text", "sp");
    /* other members' strings are not UTF-8 checked, only the value is repaired */
    EXPECT_REPL("{\"junk\":\"\xff\xfe\",\"text\":\"\xff\"}", "text", FFFD, 1);
}

static void test_reader_escapes(void **state) {
    (void)state;
    EXPECT("{\"text\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}", "text", "\"\\/\b\f\n\r\t");
    EXPECT("{\"text\":\"\\u0041\\u00e9\\u00E9\\u20ac\\uFFFF\"}", "text", "A\xc3\xa9\xc3\xa9\xe2\x82\xac\xef\xbf\xbf");
    EXPECT("{\"text\":\"a\\u0000b\"}", "text", "a\0b"); /* NUL kept, length says so */
    EXPECT("{\"text\":\"\\u2028\"}", "text", "\xe2\x80\xa8");
    EXPECT("{\"text\":\"raw \xc3\xa9 \xf0\x9f\x98\x80 \x7f\"}", "text", "raw \xc3\xa9 \xf0\x9f\x98\x80 \x7f");
    /* surrogate pairs */
    EXPECT("{\"text\":\"\\ud83d\\ude00\"}", "text", "\xf0\x9f\x98\x80");
    EXPECT("{\"text\":\"\\uD83D\\uDE00!\"}", "text", "\xf0\x9f\x98\x80!");
    EXPECT("{\"text\":\"\\udbff\\udfff\"}", "text", "\xf4\x8f\xbf\xbf");
    EXPECT("{\"text\":\"\\ud800\\udc00\"}", "text", "\xf0\x90\x80\x80");
    /* unpaired surrogates become U+FFFD; what follows is decoded on its own */
    EXPECT_REPL("{\"text\":\"\\ud83d\"}", "text", FFFD, 1);
    EXPECT_REPL("{\"text\":\"\\ud83dx\"}", "text", FFFD "x", 1);
    EXPECT_REPL("{\"text\":\"\\ude00\"}", "text", FFFD, 1);
    EXPECT_REPL("{\"text\":\"\\ude00\\ud83d\"}", "text", FFFD FFFD, 2);
    EXPECT_REPL("{\"text\":\"\\ud83d\\ud83d\\ude00\"}", "text", FFFD "\xf0\x9f\x98\x80", 1);
    EXPECT_REPL("{\"text\":\"\\ud83d\\n\"}", "text", FFFD "\n", 1);
    EXPECT_REPL("{\"text\":\"\\ud83d\\u0041\"}", "text", FFFD "A", 1);
    EXPECT_REPL("{\"text\":\"\\ud83d\\\\ude00\"}", "text", FFFD "\\ude00", 1);
    /* raw invalid UTF-8 in the value, per maximal subpart */
    EXPECT_REPL("{\"text\":\"a\xff" "b\xe0\x80\x80\"}", "text", "a" FFFD "b" FFFD FFFD FFFD, 4);
    EXPECT_REPL("{\"text\":\"\xf0\x9f\x98\"}", "text", FFFD, 1);
    EXPECT_REPL("{\"text\":\"\xed\xa0\x80\"}", "text", FFFD FFFD FFFD, 3);
    EXPECT_REPL("{\"text\":\"\xc3\\u00e9\"}", "text", FFFD "\xc3\xa9", 1); /* raw lead + escape */
    EXPECT_REPL("{\"text\":\"\xe2\x82\"}", "text", FFFD, 1);
}

/* Long values against a decoder written here: every kind of byte (quote, backslash and
 * control escapes, raw 2-, 3- and 4-byte characters, \u escapes, raw invalid bytes) at every
 * place relative to the 32- and 8-byte blocks of the fast scans, and a raw control
 * character anywhere is an error. */
static void test_reader_long_values(void **state) {
    (void)state;
    lt_jsonl_reader rd;
    lt_jsonl_reader_init(&rd);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    size_t errors = 0, with_repl = 0;
    for (int k = 0; k < 20000; k++) {
        char line[4096], want[4096];
        size_t n = 0, w = 0, repl = 0;
        bool bad = false;
        n += (size_t)snprintf(line, sizeof line, "{\"id\":%d,\"text\":\"", k);
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t items = (size_t)(x % 400);
        for (size_t it = 0; it < items; it++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            unsigned r = (unsigned)(x >> 33) % 1000;
            if (r < 700) {
                line[n++] = want[w++] = (char)('a' + r % 26);
                continue;
            }
            /* by r: the item as written in the line, and decoded */
            static const struct {
                unsigned below;
                const char *raw, *out;
                unsigned repl;  /* U+FFFD substitutions it makes */
                bool bad;       /* the line is an error */
            } kinds[] = {
                {760, " ", " ", 0, false},
                {780, "\\\"", "\"", 0, false},
                {800, "\\\\", "\\", 0, false},
                {840, "\\n", "\n", 0, false},
                {850, "\\u0001", "\x01", 0, false},
                {870, "\xc3\xa9", "\xc3\xa9", 0, false},
                {900, "\xe1\x83\x90", "\xe1\x83\x90", 0, false},
                {910, "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80", 0, false},
                {920, "\\u20ac", "\xe2\x82\xac", 0, false},
                {925, "\xff", "\xef\xbf\xbd", 1, false}, /* invalid UTF-8 */
                {926, "\x1f", "", 0, true},              /* a raw control character */
                {1000, "/", "/", 0, false},
            };
            size_t kind = 0;
            while (r >= kinds[kind].below) kind++;
            const char *raw = kinds[kind].raw, *out = kinds[kind].out;
            repl += kinds[kind].repl;
            bad |= kinds[kind].bad;
            memcpy(line + n, raw, strlen(raw));
            n += strlen(raw);
            memcpy(want + w, out, strlen(out));
            w += strlen(out);
        }
        n += (size_t)snprintf(line + n, sizeof line - n, "\",\"more\":\"x\"}");
        const char *got;
        size_t got_len;
        lt_error err;
        lt_status st = lt_jsonl_reader_get(&rd, line, n, "text", &got, &got_len, &err);
        if (bad) {
            if (st == LT_OK) fail_msg("case %d: a raw control character was accepted", k);
            errors++;
            continue;
        }
        if (st != LT_OK) fail_msg("case %d: %s", k, err.what);
        if (got_len != w || memcmp(got, want, w) != 0 || rd.replacements != repl)
            fail_msg("case %d: %zu bytes decoded (%zu replacements), %zu wanted (%zu)", k, got_len, rd.replacements,
                     w, repl);
        with_repl += repl > 0;
    }
    assert_true(errors > 100 && with_repl > 100);
    lt_jsonl_reader_free(&rd);
}

static void test_reader_keys(void **state) {
    (void)state;
    /* the FIRST top-level member wins */
    EXPECT("{\"text\":\"first\",\"text\":\"second\"}", "text", "first");
    EXPECT("{\"text\":\"first\",\"text\":17}", "text", "first");
    EXPECT("{\"meta\":{\"text\":\"nested\"},\"text\":\"top\"}", "text", "top");
    /* member names are compared unescaped */
    EXPECT("{\"te\\u0078t\":\"escaped key\"}", "text", "escaped key");
    EXPECT("{\"\\u0074\\u0065\\u0078\\u0074\":\"all escaped\",\"text\":\"later\"}", "text", "all escaped");
    EXPECT("{\"q\\\"k\":\"quote\"}", "q\"k", "quote");
    EXPECT("{\"caf\xc3\xa9\":\"raw\"}", "caf\xc3\xa9", "raw");
    EXPECT("{\"caf\\u00e9\":\"esc\"}", "caf\xc3\xa9", "esc");
    EXPECT("{\"\\ud83d\\ude00\":\"emoji key\"}", "\xf0\x9f\x98\x80", "emoji key");
    EXPECT_ABSENT("{\"text\\u0000\":\"nul in key\"}", "text");
    EXPECT_ABSENT("{\"tex\":\"x\",\"textt\":\"y\"}", "text");
    /* a long escaped key followed by the value: the scratch buffer holds both */
    EXPECT("{\"\\u0061\\u0062\":\"v1\",\"\\u0061\":\"v2\",\"b\\u0063\":\"v3\"}", "a", "v2");
}

static void expect_error(const char *line, size_t n, const char *key, const char *where, const char *what_part) {
    lt_jsonl_reader rd;
    lt_jsonl_reader_init(&rd);
    const char *out = (const char *)1;
    size_t out_len = 99;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_jsonl_reader_get(&rd, line, n, key, &out, &out_len, &err);
    if (st != LT_ERR_INPUT)
        fail_msg("line [%.*s]: status %s, expected input error [%s]", (int)n, line, lt_status_name(st), what_part);
    assert_null(out);
    assert_int_equal(out_len, 0);
    assert_int_equal(err.status, LT_ERR_INPUT);
    if (where != NULL && strcmp(err.where, where) != 0)
        fail_msg("line [%.*s]: where [%s], expected [%s] (what: %s)", (int)n, line, err.where, where, err.what);
    if (strstr(err.what, what_part) == NULL)
        fail_msg("line [%.*s]: what [%s] lacks [%s]", (int)n, line, err.what, what_part);
    lt_jsonl_reader_free(&rd);
    /* no error struct: same status, no crash */
    char *copy = (char *)1;
    size_t copy_len;
    assert_int_equal(lt_jsonl_get_string(line, n, key, &copy, &copy_len, NULL), LT_ERR_INPUT);
    assert_null(copy);
}

#define EXPECT_ERR(line, where, what) expect_error(S(line), "text", where, what)

static void test_reader_type_errors(void **state) {
    (void)state;
    EXPECT_ERR("{\"text\":123}", "column 9", "value of key 'text' is a number, expected a string");
    EXPECT_ERR("{\"text\":-0.5e1}", "column 9", "is a number");
    EXPECT_ERR("{\"text\":{\"a\":\"b\"}}", "column 9", "is an object");
    EXPECT_ERR("{\"text\":[\"a\"]}", "column 9", "is an array");
    EXPECT_ERR("{\"text\":true}", "column 9", "is a boolean");
    EXPECT_ERR("{\"text\":false}", "column 9", "is a boolean");
    EXPECT_ERR("{\"text\":null}", "column 9", "value of key 'text' is null");
    EXPECT_ERR("{\"text\":1,\"text\":\"second\"}", "column 9", "is a number"); /* first wins */
    /* a syntax error inside the wrong-typed value is reported as such */
    EXPECT_ERR("{\"text\":[1,}", "column 12", "expected a value");
}

static void test_reader_malformed(void **state) {
    (void)state;
    EXPECT_ERR("{\"text\":\"abc", "column 9", "unterminated string");
    EXPECT_ERR("{\"text\":\"abc\n", "column 9", "unterminated string");
    EXPECT_ERR("{\"text\":\"abc\r\n", "column 9", "unterminated string");
    EXPECT_ERR("{\"a\":\"x\\", "column 6", "unterminated string");
    EXPECT_ERR("{\"a\":\"x\\qy\"}", "column 8", "invalid escape '\\q'");
    EXPECT_ERR("{\"text\":\"x\\qy\"}", "column 11", "invalid escape '\\q'");
    EXPECT_ERR("{\"a\":\"x\\'y\"}", "column 8", "invalid escape '\\''");
    EXPECT_ERR("{\"a\":\"\\u12G4\"}", "column 7", "invalid \\u escape");
    EXPECT_ERR("{\"a\":\"\\u12\"}", "column 7", "invalid \\u escape");
    EXPECT_ERR("{\"a\":\"x\ty\"}", "column 8", "control character U+0009 in string");
    EXPECT_ERR("{\"a\":\"x\ny\"}", "column 8", "control character U+000A in string");
    expect_error(S("{\"a\":\"x\0y\"}"), "text", "column 8", "control character U+0000");
    EXPECT_ERR("{\"a\":1 \"b\":2}", "column 8", "expected ',' or '}'");
    EXPECT_ERR("{\"a\":1", "column 7", "expected ',' or '}', found end of line");
    expect_error(S("{\"a\":1\0}"), "text", "column 7", "expected ',' or '}', found byte 0x00");
    EXPECT_ERR("{\"a\":[1,2}", "column 10", "expected ',' or ']'");
    EXPECT_ERR("{\"a\":{\"b\":1]}", "column 12", "expected ',' or '}'");
    EXPECT_ERR("{\"a\":1} x", "column 9", "trailing characters after object");
    EXPECT_ERR("{\"a\":1}{}", "column 8", "trailing characters after object");
    EXPECT_ERR("{\"a\":1}}", "column 8", "trailing characters");
    EXPECT_ERR("{\"a\":tru}", "column 6", "invalid literal");
    EXPECT_ERR("{\"a\":nul}", "column 6", "invalid literal");
    EXPECT_ERR("{\"a\":True}", "column 6", "expected a value, found 'T'");
    EXPECT_ERR("{\"a\":NaN}", "column 6", "expected a value");
    EXPECT_ERR("{\"a\":'x'}", "column 6", "expected a value");
    EXPECT_ERR("{\"a\":}", "column 6", "expected a value");
    EXPECT_ERR("{\"a\":01}", "column 7", "expected ',' or '}'");
    EXPECT_ERR("{\"a\":-}", "column 7", "invalid number");
    EXPECT_ERR("{\"a\":+1}", "column 6", "expected a value");
    EXPECT_ERR("{\"a\":.5}", "column 6", "expected a value");
    EXPECT_ERR("{\"a\":1.}", "column 8", "invalid number");
    EXPECT_ERR("{\"a\":1.e5}", "column 8", "invalid number");
    EXPECT_ERR("{\"a\":1e}", "column 8", "invalid number");
    EXPECT_ERR("{\"a\":1e+}", "column 9", "invalid number");
    EXPECT_ERR("{\"a\":1,}", "column 8", "expected a string key");
    EXPECT_ERR("{\"a\":[1,]}", "column 9", "expected a value");
    EXPECT_ERR("{a:1}", "column 2", "expected a string key");
    EXPECT_ERR("{'a':1}", "column 2", "expected a string key");
    EXPECT_ERR("{\"a\" 1}", "column 6", "expected ':'");
    EXPECT_ERR("{\"a\":{\"b\" 1}}", "column 11", "expected ':'");
    EXPECT_ERR("{\"a\":{1:2}}", "column 7", "expected a string key");
    EXPECT_ERR("[1,2]", "column 1", "the line is an array, expected a JSON object");
    EXPECT_ERR("\"text\"", "column 1", "is a string");
    EXPECT_ERR("42", "column 1", "is a number");
    EXPECT_ERR("null", "column 1", "is null");
    EXPECT_ERR("x", "column 1", "expected '{'");
    EXPECT_ERR("", "column 1", "empty line");
    EXPECT_ERR("  \r\n", "column 5", "empty line");
    EXPECT_ERR("{", "column 2", "expected a string key, found end of line");
    EXPECT_ERR("{\"a\"", "column 5", "expected ':'");
    EXPECT_ERR("{\"a\":", "column 6", "unexpected end of line, expected a value");
    EXPECT_ERR("\xef\xbb\xbf", "column 4", "empty line");
    EXPECT_ERR("\xef\xbb{}", "column 1", "byte 0xEF");
    EXPECT_ERR("{\"a\":1}\xef\xbb\xbf", "column 8", "trailing characters");
    EXPECT_ERR("{\"a\":\"\xff\"}x", "column 10", "trailing characters");
    expect_error(NULL, 0, "text", "column 1", "empty line");
}

static void test_reader_depth(void **state) {
    (void)state;
    /* top-level object + 511 nested arrays = 512 levels: accepted */
    size_t cap = 4 * LT_JSON_MAX_PARSE_DEPTH + 64;
    char *line = malloc(cap);
    assert_non_null(line);
    size_t n = 0;
    n += (size_t)sprintf(line + n, "{\"d\":");
    for (int i = 0; i < LT_JSON_MAX_PARSE_DEPTH - 1; i++) line[n++] = '[';
    for (int i = 0; i < LT_JSON_MAX_PARSE_DEPTH - 1; i++) line[n++] = ']';
    n += (size_t)sprintf(line + n, ",\"text\":\"deep ok\"}");
    expect_value_n(line, n, "text", S("deep ok"), 0);

    /* one more level (objects and arrays mixed): rejected at the bracket that opens it */
    n = 0;
    n += (size_t)sprintf(line + n, "{\"d\":");
    size_t last = 0;
    for (int i = 0; i < LT_JSON_MAX_PARSE_DEPTH; i++) {
        last = n;
        if (i % 2 == 0) {
            n += (size_t)sprintf(line + n, "{\"k\":");
        } else {
            line[n++] = '[';
        }
    }
    char where[32];
    snprintf(where, sizeof where, "column %zu", last + 1);
    expect_error(line, n, "text", where, "nesting deeper than 512 levels");
    free(line);

    /* hostile nesting far beyond the limit: clean error, no stack overflow */
    size_t huge = 1000000;
    line = malloc(huge + 8);
    assert_non_null(line);
    memset(line, '[', huge + 5); /* (one memset from the start: gcc 12 -O1 -fsanitize
                                      misjudges the bounds of memset(line + 5, ...)) */
    memcpy(line, "{\"a\":", 5);
    expect_error(line, huge + 5, "text", "column 517", "nesting deeper");
    /* also inside the wanted key's value */
    memcpy(line, "{\"text\":", 8); /* the rest are still '[' */
    expect_error(line, huge + 5, "text", "column 520", "nesting deeper");
    free(line);
}

static void test_reader_reuse(void **state) {
    (void)state;
    lt_jsonl_reader rd;
    lt_jsonl_reader_init(&rd);
    const char *out;
    size_t len;
    static const char *const lines[] = {
        "{\"text\":\"short\"}",
        "{\"text\":\"a much longer value that needs the scratch buffer to grow beyond its first size, "
        "repeated: 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890"
        "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
        "0123456789012345678901234567890123456789012345678901234567890123456789\"}",
        "{\"other\":1}",
        "{\"text\":\"\xff\"}",
        "{\"text\":\"\\ud800\\ud800\"}",
    };
    size_t total = 0;
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
            assert_int_equal(lt_jsonl_reader_get(&rd, lines[i], strlen(lines[i]), "text", &out, &len, NULL), LT_OK);
            if (i == 2) {
                assert_null(out);
                assert_int_equal(rd.replacements, 0);
            } else {
                assert_non_null(out);
                assert_int_equal(strlen(out), len);
            }
            total += rd.replacements;
        }
        /* an error in between leaves the reader usable */
        assert_int_equal(lt_jsonl_reader_get(&rd, "{", 1, "text", &out, &len, NULL), LT_ERR_INPUT);
        assert_null(out);
    }
    assert_int_equal(total, 3 * 3);
    assert_int_equal(rd.total_replacements, 3 * 3);
    lt_jsonl_reader_free(&rd);
    lt_jsonl_reader_free(&rd); /* twice is fine */
}

/* ================================================================ round trip */

/* Random byte strings biased toward the interesting cases. */
static size_t random_bytes(char *buf, size_t max) {
    size_t n = (size_t)(trng() % (max + 1)), i = 0;
    static const char *const pieces[] = {
        "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xef\xbf\xbd",
        "\xed\xa0\x80", "\xed\xb0\x80", "\xe0\x80\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\xf0\x9f\x98",
        "\"", "\\", "\\u0041", "\x7f", "\x00", "\n", "\x1f", "\xf4\x8f\xbf\xbf", "\xdf\xbf", "\xe0\xa0\x80",
    };
    while (i < n) {
        uint64_t r = trng();
        int kind = (int)(r % 4);
        if (kind == 0) {
            buf[i++] = (char)(0x20 + (r >> 8) % 95); /* printable ASCII */
        } else if (kind == 1) {
            buf[i++] = (char)(r >> 8); /* any byte */
        } else {
            const char *p = pieces[(r >> 8) % (sizeof pieces / sizeof pieces[0])];
            size_t k = p[0] == '\0' ? 1 : strlen(p);
            if (i + k > n) break;
            memcpy(buf + i, p, k);
            i += k;
        }
    }
    return i;
}

static void test_round_trip(void **state) {
    (void)state;
    enum { ROUNDS = 20000, MAXLEN = 64 };
    lt_json j;
    lt_json_init(&j);
    lt_jsonl_reader rd;
    lt_jsonl_reader_init(&rd);
    char in[MAXLEN], want[3 * MAXLEN];
    int valid_seen = 0;
    for (int r = 0; r < ROUNDS; r++) {
        size_t n = random_bytes(in, MAXLEN);
        size_t want_repl = 0;
        size_t want_len = lt_utf8_sanitize(in, n, want, &want_repl);
        lt_json_reset(&j);
        lt_json_object_begin(&j);
        lt_json_key(&j, "id");
        lt_json_int(&j, r);
        lt_json_key_n(&j, in, n); /* an arbitrary key, too */
        lt_json_double(&j, 0.5);
        lt_json_key(&j, "text");
        lt_json_string_n(&j, in, n);
        lt_json_object_end(&j);
        assert_int_equal(j.replacements, 2 * want_repl);
        assert_true(lt_utf8_valid(j.buf, j.len));
        /* no raw control characters or separators in the output */
        for (size_t i = 0; i < j.len; i++) assert_true((unsigned char)j.buf[i] >= 0x20);
        assert_null(strstr(j.buf, "\xe2\x80\xa8"));
        assert_null(strstr(j.buf, "\xe2\x80\xa9"));

        const char *out;
        size_t out_len;
        lt_error err;
        lt_error_clear(&err);
        lt_status st = lt_jsonl_reader_get(&rd, j.buf, j.len, "text", &out, &out_len, &err);
        if (st != LT_OK) fail_msg("round %d: %s (%s) in %s", r, err.what, err.where, j.buf);
        assert_non_null(out);
        assert_int_equal(out_len, want_len);
        assert_memory_equal(out, want, want_len);
        assert_int_equal(rd.replacements, 0); /* the writer already repaired everything */
        if (want_repl == 0) {
            valid_seen++;
            assert_int_equal(out_len, n); /* valid UTF-8 round trips exactly */
            assert_memory_equal(out, in, n);
        }
        /* the sanitized key is found too, unless it collides with "id" or "text" */
        char keyz[3 * MAXLEN + 1];
        memcpy(keyz, want, want_len);
        keyz[want_len] = '\0';
        if (memchr(want, '\0', want_len) == NULL && strcmp(keyz, "id") != 0 && strcmp(keyz, "text") != 0) {
            assert_int_equal(lt_jsonl_reader_get(&rd, j.buf, j.len, keyz, &out, &out_len, &err), LT_ERR_INPUT);
            assert_non_null(strstr(err.what, "is a number"));
        }
    }
    assert_true(valid_seen > 1000);
    lt_json_free(&j);
    lt_jsonl_reader_free(&rd);
}

/* ================================================================ document parser */

static lt_jv *parse_ok_n(const char *text, size_t n) {
    lt_jv *doc = (lt_jv *)1;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_json_parse(text, n, &doc, &err);
    if (st != LT_OK) fail_msg("document [%.*s]: %s (%s)", (int)n, text, err.what, err.where);
    assert_non_null(doc);
    return doc;
}

#define PARSE_OK(lit) parse_ok_n(S(lit))

static void expect_text(const lt_jv *v, lt_jv_type type, const char *want, size_t want_len) {
    assert_non_null(v);
    if (v->type != type) fail_msg("value is %s, expected %s", lt_jv_type_name(v->type), lt_jv_type_name(type));
    assert_non_null(v->text);
    if (v->len != want_len || memcmp(v->text, want, want_len) != 0)
        fail_msg("got %zu bytes [%.*s], expected [%.*s]", v->len, (int)v->len, v->text, (int)want_len, want);
    assert_int_equal(v->text[v->len], '\0');
}

#define EXPECT_STR(v, lit) expect_text(v, LT_JV_STRING, S(lit))
#define EXPECT_NUM(v, lit) expect_text(v, LT_JV_NUMBER, S(lit))

static void expect_at(const lt_jv *v, size_t line, size_t column) {
    if (v->line != line || v->column != column)
        fail_msg("value at line %zu, column %zu, expected line %zu, column %zu", v->line, v->column, line, column);
}

/* Parse expecting LT_ERR_INPUT at `where` (NULL: any) with `what_part` in WHAT. */
static void expect_doc_error_n(const char *text, size_t n, const char *where, const char *what_part) {
    lt_jv *doc = (lt_jv *)1;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_json_parse(text, n, &doc, &err);
    if (st != LT_ERR_INPUT)
        fail_msg("document [%.*s]: status %s, expected input error [%s]", (int)n, text, lt_status_name(st), what_part);
    assert_null(doc);
    assert_int_equal(err.status, LT_ERR_INPUT);
    if (where != NULL && strcmp(err.where, where) != 0)
        fail_msg("document [%.*s]: where [%s], expected [%s] (what: %s)", (int)n, text, err.where, where, err.what);
    if (strstr(err.what, what_part) == NULL)
        fail_msg("document [%.*s]: what [%s] lacks [%s]", (int)n, text, err.what, what_part);
    doc = (lt_jv *)1;
    assert_int_equal(lt_json_parse(text, n, &doc, NULL), LT_ERR_INPUT); /* no error struct */
    assert_null(doc);
}

#define EXPECT_DOC_ERR(lit, where, what) expect_doc_error_n(S(lit), where, what)

/* Tree helpers: depth, write back with the lt_json writer, structural equality. */
static int jv_depth(const lt_jv *v) {
    int d = 0;
    for (size_t i = 0; i < v->n; i++) {
        int c = jv_depth(&v->items[i]);
        if (c > d) d = c;
    }
    return v->type == LT_JV_ARRAY || v->type == LT_JV_OBJECT ? d + 1 : 0;
}

/* write(doc) parses back to an equal tree, without replacements */
static void expect_rewrite_equal(const lt_jv *doc) {
    lt_json j;
    lt_json_init(&j);
    lt_json_value(&j, doc);
    assert_int_equal(j.replacements, 0);
    lt_jv *again = parse_ok_n(j.buf, j.len);
    if (!lt_jv_equal(doc, again)) fail_msg("rewritten document differs: %s", j.buf);
    assert_int_equal(again->replacements, 0);
    lt_jv_free(again);
    lt_json_free(&j);
}

static void test_doc_values(void **state) {
    (void)state;
    static const char text[] = "{\n"
                               "  \"a\": [1, -2.5e3, true, false, null, \"s\", [], {}],\n"
                               "  \"b\": {\"c\": {\"d\": [[\"deep\"]]}},\n"
                               "\t\"e\": \"\"\n"
                               "}\n";
    lt_jv *doc = PARSE_OK(text);
    assert_int_equal(doc->type, LT_JV_OBJECT);
    expect_at(doc, 1, 1);
    assert_int_equal(doc->n, 3);
    assert_int_equal(doc->replacements, 0);
    assert_string_equal(doc->keys[0], "a");
    assert_int_equal(doc->key_lens[0], 1);
    const lt_jv *a = lt_jv_get(doc, "a");
    assert_ptr_equal(a, &doc->items[0]);
    assert_int_equal(a->type, LT_JV_ARRAY);
    expect_at(a, 2, 8);
    assert_int_equal(a->n, 8);
    assert_null(a->keys);
    EXPECT_NUM(&a->items[0], "1");
    EXPECT_NUM(&a->items[1], "-2.5e3");
    expect_at(&a->items[1], 2, 12);
    assert_int_equal(a->items[2].type, LT_JV_BOOL);
    assert_true(a->items[2].boolean);
    assert_int_equal(a->items[3].type, LT_JV_BOOL);
    assert_false(a->items[3].boolean);
    assert_int_equal(a->items[4].type, LT_JV_NULL);
    assert_null(a->items[4].text);
    EXPECT_STR(&a->items[5], "s");
    expect_at(&a->items[5], 2, 39);
    assert_int_equal(a->items[6].type, LT_JV_ARRAY);
    assert_int_equal(a->items[6].n, 0);
    assert_null(a->items[6].items);
    assert_int_equal(a->items[7].type, LT_JV_OBJECT);
    assert_int_equal(a->items[7].n, 0);
    const lt_jv *deep = lt_jv_get(lt_jv_get(lt_jv_get(doc, "b"), "c"), "d");
    assert_non_null(deep);
    expect_at(deep, 3, 20);
    assert_int_equal(deep->type, LT_JV_ARRAY);
    EXPECT_STR(&deep->items[0].items[0], "deep");
    expect_at(&deep->items[0].items[0], 3, 22);
    const lt_jv *e = lt_jv_get(doc, "e");
    EXPECT_STR(e, "");
    expect_at(e, 4, 7); /* the column counts bytes: a tab is one */
    assert_int_equal(jv_depth(doc), 5);
    expect_rewrite_equal(doc);
    lt_jv_free(doc);

    /* any value at the top, surrounded by whitespace */
    doc = PARSE_OK(" 42 ");
    EXPECT_NUM(doc, "42");
    expect_at(doc, 1, 2);
    lt_jv_free(doc);
    doc = PARSE_OK("\n\n  \"x\"\r\n");
    EXPECT_STR(doc, "x");
    expect_at(doc, 3, 3);
    lt_jv_free(doc);
    doc = PARSE_OK("true");
    assert_true(doc->type == LT_JV_BOOL && doc->boolean);
    lt_jv_free(doc);
    doc = PARSE_OK("null");
    assert_int_equal(doc->type, LT_JV_NULL);
    lt_jv_free(doc);
    doc = PARSE_OK("[]");
    assert_true(doc->type == LT_JV_ARRAY && doc->n == 0);
    lt_jv_free(doc);
    doc = PARSE_OK("{ }");
    assert_true(doc->type == LT_JV_OBJECT && doc->n == 0);
    assert_null(lt_jv_get(doc, "a"));
    lt_jv_free(doc);
    lt_jv_free(NULL);

    /* many members: the arrays grow */
    lt_json j;
    lt_json_init(&j);
    lt_json_object_begin(&j);
    for (int i = 0; i < 1000; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        lt_json_key(&j, k);
        lt_json_array_begin(&j);
        for (int m = 0; m < i % 7; m++) lt_json_int(&j, m);
        lt_json_array_end(&j);
    }
    lt_json_object_end(&j);
    doc = parse_ok_n(j.buf, j.len);
    assert_int_equal(doc->n, 1000);
    const lt_jv *k999 = lt_jv_get(doc, "k999");
    assert_ptr_equal(k999, &doc->items[999]);
    assert_int_equal(k999->n, 999 % 7);
    expect_rewrite_equal(doc);
    lt_jv_free(doc);
    lt_json_free(&j);

    /* type names (the reader's message words) */
    assert_string_equal(lt_jv_type_name(LT_JV_NULL), "null");
    assert_string_equal(lt_jv_type_name(LT_JV_BOOL), "a boolean");
    assert_string_equal(lt_jv_type_name(LT_JV_NUMBER), "a number");
    assert_string_equal(lt_jv_type_name(LT_JV_STRING), "a string");
    assert_string_equal(lt_jv_type_name(LT_JV_ARRAY), "an array");
    assert_string_equal(lt_jv_type_name(LT_JV_OBJECT), "an object");
}

/* The string member "s" of a parsed {"s": ...}; the document parser and the JSON-lines
 * reader must agree on every string: same bytes, same replacements. */
static void expect_doc_string_n(const char *json_string, size_t n, const char *want, size_t want_len, size_t repl) {
    char *doc_text = malloc(n + 8);
    assert_non_null(doc_text);
    memcpy(doc_text, "{\"s\":", 5);
    memcpy(doc_text + 5, json_string, n);
    doc_text[n + 5] = '}';
    lt_jv *doc = parse_ok_n(doc_text, n + 6);
    const lt_jv *s = lt_jv_get(doc, "s");
    expect_text(s, LT_JV_STRING, want, want_len);
    if (doc->replacements != repl)
        fail_msg("[%.*s]: %zu replacements, expected %zu", (int)n, json_string, doc->replacements, repl);
    assert_int_equal(s->replacements, 0); /* counted in the root only */
    lt_jsonl_reader rd;
    lt_jsonl_reader_init(&rd);
    const char *out;
    size_t out_len;
    assert_int_equal(lt_jsonl_reader_get(&rd, doc_text, n + 6, "s", &out, &out_len, NULL), LT_OK);
    assert_int_equal(out_len, s->len);
    assert_memory_equal(out, s->text, out_len);
    assert_int_equal(rd.replacements, doc->replacements);
    lt_jsonl_reader_free(&rd);
    expect_rewrite_equal(doc);
    lt_jv_free(doc);
    free(doc_text);
}

#define EXPECT_DOC_STR(js, want, repl) expect_doc_string_n(S(js), S(want), repl)

static void test_doc_strings(void **state) {
    (void)state;
    EXPECT_DOC_STR("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t", 0);
    EXPECT_DOC_STR("\"\\u0041\\u00e9\\u00E9\\u20ac\\uFFFF\"", "A\xc3\xa9\xc3\xa9\xe2\x82\xac\xef\xbf\xbf", 0);
    EXPECT_DOC_STR("\"a\\u0000b\"", "a\0b", 0);
    EXPECT_DOC_STR("\"raw \xc3\xa9 \xf0\x9f\x98\x80 \x7f\"", "raw \xc3\xa9 \xf0\x9f\x98\x80 \x7f", 0);
    /* surrogate pairs */
    EXPECT_DOC_STR("\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80", 0);
    EXPECT_DOC_STR("\"\\uD83D\\uDE00!\"", "\xf0\x9f\x98\x80!", 0);
    EXPECT_DOC_STR("\"\\udbff\\udfff\"", "\xf4\x8f\xbf\xbf", 0);
    EXPECT_DOC_STR("\"\\ud800\\udc00\"", "\xf0\x90\x80\x80", 0);
    /* lone surrogate escapes: U+FFFD, counted, as the reader does (Python keeps them as
     * lone surrogates, which cannot be UTF-8) */
    EXPECT_DOC_STR("\"\\ud83d\"", FFFD, 1);
    EXPECT_DOC_STR("\"\\ude00\\ud83d\"", FFFD FFFD, 2);
    EXPECT_DOC_STR("\"\\ud83d\\ud83d\\ude00\"", FFFD "\xf0\x9f\x98\x80", 1);
    EXPECT_DOC_STR("\"\\ud83d\\u0041\"", FFFD "A", 1);
    EXPECT_DOC_STR("\"\\ud83d\\\\ude00\"", FFFD "\\ude00", 1);
    /* raw invalid UTF-8 per maximal subpart */
    EXPECT_DOC_STR("\"a\xff" "b\xe0\x80\x80\"", "a" FFFD "b" FFFD FFFD FFFD, 4);
    EXPECT_DOC_STR("\"\xed\xa0\x80\"", FFFD FFFD FFFD, 3);
    EXPECT_DOC_STR("\"\xc3\\u00e9\"", FFFD "\xc3\xa9", 1);
    /* every utf8 case of the writer tests, raw in a string */
    for (size_t i = 0; i < sizeof utf8_cases / sizeof utf8_cases[0]; i++) {
        const utf8_case *c = &utf8_cases[i];
        bool plain = true; /* raw in a JSON string: no quote, backslash or control byte */
        for (size_t k = 0; k < c->in_len; k++)
            if ((unsigned char)c->in[k] < 0x20 || c->in[k] == '"' || c->in[k] == '\\') plain = false;
        if (!plain) continue;
        char q[64];
        q[0] = '"';
        memcpy(q + 1, c->in, c->in_len);
        q[c->in_len + 1] = '"';
        expect_doc_string_n(q, c->in_len + 2, c->out, c->out_len, c->repl);
    }

    /* member names are decoded and repaired the same way; their substitutions count too */
    lt_jv *doc = PARSE_OK("{\"te\\u0078t\":1,\"\\ud83d\\ude00\":2,\"\xff\":3,\"\\udc00\":4,\"x\\u0000y\":5}");
    assert_int_equal(doc->n, 5);
    assert_int_equal(doc->replacements, 2);
    assert_string_equal(doc->keys[0], "text");
    assert_string_equal(doc->keys[1], "\xf0\x9f\x98\x80");
    assert_string_equal(doc->keys[2], FFFD);
    assert_string_equal(doc->keys[3], FFFD);
    assert_int_equal(doc->key_lens[4], 3);
    assert_memory_equal(doc->keys[4], "x\0y", 4);
    EXPECT_NUM(lt_jv_get(doc, "text"), "1");
    EXPECT_NUM(lt_jv_get(doc, "\xf0\x9f\x98\x80"), "2");
    EXPECT_NUM(lt_jv_get(doc, FFFD), "4"); /* the last of the two names that became U+FFFD */
    assert_null(lt_jv_get(doc, "x"));       /* a name with a NUL cannot be asked for */
    expect_rewrite_equal(doc);
    lt_jv_free(doc);

    /* random byte strings written by the writer parse back to sanitize(bytes) */
    char in[64], want[3 * 64];
    for (int r = 0; r < 5000; r++) {
        size_t n = random_bytes(in, sizeof in);
        size_t want_repl = 0;
        size_t want_len = lt_utf8_sanitize(in, n, want, &want_repl);
        lt_json j;
        lt_json_init(&j);
        lt_json_array_begin(&j);
        lt_json_string_n(&j, in, n);
        lt_json_object_begin(&j);
        lt_json_key_n(&j, in, n);
        lt_json_int(&j, r);
        lt_json_object_end(&j);
        lt_json_array_end(&j);
        lt_jv *d = parse_ok_n(j.buf, j.len);
        assert_int_equal(d->n, 2);
        expect_text(&d->items[0], LT_JV_STRING, want, want_len);
        assert_int_equal(d->items[1].key_lens[0], want_len);
        assert_memory_equal(d->items[1].keys[0], want, want_len);
        int64_t v;
        assert_true(lt_jv_int64(&d->items[1].items[0], &v));
        assert_int_equal(v, r);
        assert_int_equal(d->replacements, 0);
        lt_jv_free(d);
        lt_json_free(&j);
    }
}

static void test_doc_duplicates(void **state) {
    (void)state;
    lt_jv *doc = PARSE_OK("{\"a\":1,\"b\":{\"a\":\"inner\"},\"a\":3,\"\\u0061\":[4]}");
    assert_int_equal(doc->n, 4); /* every member is kept, in order */
    assert_string_equal(doc->keys[0], "a");
    assert_string_equal(doc->keys[1], "b");
    assert_string_equal(doc->keys[2], "a");
    assert_string_equal(doc->keys[3], "a");
    EXPECT_NUM(&doc->items[0], "1");
    EXPECT_NUM(&doc->items[2], "3");
    const lt_jv *a = lt_jv_get(doc, "a"); /* the LAST, as Python's json.loads */
    assert_ptr_equal(a, &doc->items[3]);
    assert_int_equal(a->type, LT_JV_ARRAY);
    EXPECT_STR(lt_jv_get(lt_jv_get(doc, "b"), "a"), "inner");
    assert_null(lt_jv_get(doc, "c"));
    assert_null(lt_jv_get(doc, ""));
    assert_null(lt_jv_get(doc, NULL));
    assert_null(lt_jv_get(NULL, "a"));
    assert_null(lt_jv_get(a, "a")); /* not an object */
    assert_null(lt_jv_get(&doc->items[0], "a"));
    expect_rewrite_equal(doc);
    lt_jv_free(doc);
    doc = PARSE_OK("{\"\":\"empty name\",\"\":\"again\"}");
    EXPECT_STR(lt_jv_get(doc, ""), "again");
    lt_jv_free(doc);
}

static void test_doc_bom_and_blanks(void **state) {
    (void)state;
    lt_jv *doc = PARSE_OK("\xef\xbb\xbf{\"a\":1}");
    expect_at(doc, 1, 4); /* the BOM counts as bytes, as in the reader's columns */
    lt_jv_free(doc);
    doc = PARSE_OK("\xef\xbb\xbf \r\n\t[1]\n\n");
    expect_at(doc, 2, 2);
    lt_jv_free(doc);
    EXPECT_DOC_ERR("", "line 1, column 1", "empty input, expected a JSON value");
    EXPECT_DOC_ERR(" \n\t\r\n ", "line 3, column 2", "empty input");
    EXPECT_DOC_ERR("\xef\xbb\xbf", "line 1, column 4", "empty input");
    EXPECT_DOC_ERR("\xef\xbb\xbf\xef\xbb\xbf{}", "line 1, column 4", "expected a value, found byte 0xEF");
    EXPECT_DOC_ERR(" \xef\xbb\xbf{}", "line 1, column 2", "byte 0xEF");
    EXPECT_DOC_ERR("\xef\xbb{}", "line 1, column 1", "byte 0xEF");
    expect_doc_error_n(NULL, 0, "line 1, column 1", "empty input");
    /* trailing garbage */
    EXPECT_DOC_ERR("{} x", "line 1, column 4", "trailing characters after the JSON value, starting with 'x'");
    EXPECT_DOC_ERR("{}{}", "line 1, column 3", "trailing characters");
    EXPECT_DOC_ERR("[1]]", "line 1, column 4", "trailing characters");
    EXPECT_DOC_ERR("1 2", "line 1, column 3", "trailing characters");
    EXPECT_DOC_ERR("01", "line 1, column 2", "trailing characters after the JSON value, starting with '1'");
    EXPECT_DOC_ERR("{\"a\":1}\n\nx", "line 3, column 1", "trailing characters");
    EXPECT_DOC_ERR("{}\xef\xbb\xbf", "line 1, column 3", "starting with byte 0xEF");
    expect_doc_error_n(S("\"a\"\0"), "line 1, column 4", "starting with byte 0x00");
    EXPECT_DOC_ERR("null\x0b", "line 1, column 5", "byte 0x0B"); /* VT is not JSON whitespace */
    /* the text need not be NUL-terminated: only len bytes are read */
    doc = parse_ok_n("[1]garbage", 3);
    assert_int_equal(doc->n, 1);
    lt_jv_free(doc);
}

static void test_doc_errors(void **state) {
    (void)state;
    EXPECT_DOC_ERR("{\n  \"a\": 1,\n  \"b\" 2\n}", "line 3, column 7", "expected ':' after object key, found '2'");
    EXPECT_DOC_ERR("[1,\n2,\n]", "line 3, column 1", "expected a value, found ']'");
    EXPECT_DOC_ERR("{\"a\":1\n", "line 2, column 1", "expected ',' or '}', found end of input");
    EXPECT_DOC_ERR("{\"a\":1 \"b\":2}", "line 1, column 8", "expected ',' or '}', found '\"'");
    EXPECT_DOC_ERR("[1 2]", "line 1, column 4", "expected ',' or ']', found '2'");
    EXPECT_DOC_ERR("{\"a\":[1,2}", "line 1, column 10", "expected ',' or ']'");
    EXPECT_DOC_ERR("{\"a\":\n\"x", "line 2, column 1", "unterminated string");
    EXPECT_DOC_ERR("[\"abc\n", "line 1, column 2", "unterminated string");
    EXPECT_DOC_ERR("[\"x\\", "line 1, column 2", "unterminated string");
    EXPECT_DOC_ERR("[\n  \"a\tb\"]", "line 2, column 5", "control character U+0009 in string");
    EXPECT_DOC_ERR("[\"a\nb\"]", "line 1, column 4", "control character U+000A");
    EXPECT_DOC_ERR("[\"\\q\"]", "line 1, column 3", "invalid escape '\\q'");
    EXPECT_DOC_ERR("[\"\\u12G4\"]", "line 1, column 3", "invalid \\u escape");
    EXPECT_DOC_ERR("[tru]", "line 1, column 2", "invalid literal (expected 'true')");
    EXPECT_DOC_ERR("nul", "line 1, column 1", "invalid literal (expected 'null')");
    EXPECT_DOC_ERR("[-]", "line 1, column 3", "invalid number: expected a digit");
    EXPECT_DOC_ERR("1.", "line 1, column 3", "invalid number: expected a digit after '.', found end of input");
    EXPECT_DOC_ERR("1e+", "line 1, column 4", "expected a digit in the exponent");
    EXPECT_DOC_ERR("NaN", "line 1, column 1", "expected a value, found 'N'");
    EXPECT_DOC_ERR("[Infinity]", "line 1, column 2", "expected a value");
    EXPECT_DOC_ERR("+1", "line 1, column 1", "expected a value");
    EXPECT_DOC_ERR("'x'", "line 1, column 1", "expected a value");
    EXPECT_DOC_ERR("[", "line 1, column 2", "unexpected end of input, expected a value");
    EXPECT_DOC_ERR("{", "line 1, column 2", "expected a string key, found end of input");
    EXPECT_DOC_ERR("{\"a\"", "line 1, column 5", "expected ':' after object key, found end of input");
    EXPECT_DOC_ERR("{\"a\":", "line 1, column 6", "unexpected end of input");
    EXPECT_DOC_ERR("{\"a\":1,}", "line 1, column 8", "expected a string key, found '}'");
    EXPECT_DOC_ERR("[1,]", "line 1, column 4", "expected a value, found ']'");
    EXPECT_DOC_ERR("{a:1}", "line 1, column 2", "expected a string key, found 'a'");
    EXPECT_DOC_ERR("{1:2}", "line 1, column 2", "expected a string key");
    EXPECT_DOC_ERR("[1,\r\n 2 3]", "line 2, column 4", "expected ',' or ']', found '3'"); /* CRLF: one line end */
    EXPECT_DOC_ERR("[1,\r 2 3]", "line 1, column 8", "expected ',' or ']'");             /* a lone CR is not */
    EXPECT_DOC_ERR("\xef\xbb\xbf[1 x]", "line 1, column 7", "found 'x'");
    EXPECT_DOC_ERR("[\"\xc3\xa9\", x]", "line 1, column 8", "expected a value, found 'x'"); /* bytes */
    EXPECT_DOC_ERR("[\n\n\n    \xff]", "line 4, column 5", "expected a value, found byte 0xFF");
    EXPECT_DOC_ERR("{\"special_tokens\": {\n  \"<|endoftext|>\": 100257,\n  \"<|fim_prefix|>\" 100258\n}}",
                   "line 3, column 20", "expected ':' after object key, found '1'");
}

/* On malformed input the document parser and the JSON-lines reader (whose grammar is the
 * same when the text is an object) must fail at the same byte with the same reason. */
static void expect_same_error_as_reader(const char *text, size_t n, const lt_error *derr) {
    lt_error rerr;
    lt_error_clear(&rerr);
    char *val;
    size_t vlen;
    lt_status st = lt_jsonl_get_string(text, n, "no such key", &val, &vlen, &rerr);
    assert_int_equal(st, LT_ERR_INPUT);
    size_t off = lt_test_where_to_offset(derr->where, text, n);
    char col[40];
    snprintf(col, sizeof col, "column %zu", off + 1);
    if (strcmp(col, rerr.where) != 0)
        fail_msg("[%.*s]: document error at %s (%s), reader at %s (%s)", (int)n, text, derr->where, derr->what,
                 rerr.where, rerr.what);
    /* same WHAT, up to the name of the end, except for the reader's messages about its
     * top level (which must be an object) */
    static const char *const top_level[] = {"empty line", "expected '{'", "the line is", "trailing characters"};
    for (size_t i = 0; i < sizeof top_level / sizeof top_level[0]; i++)
        if (strncmp(rerr.what, top_level[i], strlen(top_level[i])) == 0) return;
    char what[LT_ERROR_WHAT_MAX];
    const char *e = strstr(derr->what, "end of input");
    if (e != NULL)
        snprintf(what, sizeof what, "%.*send of line%s", (int)(e - derr->what), derr->what, e + strlen("end of input"));
    else
        snprintf(what, sizeof what, "%s", derr->what);
    if (strcmp(rerr.what, what) != 0)
        fail_msg("[%.*s]: document [%s], reader [%s]", (int)n, text, derr->what, rerr.what);
}

static const char sample_doc[] =
    "\xef\xbb\xbf{\n"
    " \"name\": \"cl100k_base\",\n"
    " \"pat_str\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}\",\n"
    " \"special_tokens\": {\n"
    "  \"<|endoftext|>\": 100257,\n"
    "  \"<|fim_prefix|>\": 100258\n"
    " },\n"
    " \"misc\": [true, false, null, -0.5e-3, \"\\u00e9\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\\t\", [], {}, [[1]]],\n"
    " \"n_vocab_ranks\": 100256\n"
    "}\n";

static void test_doc_truncated(void **state) {
    (void)state;
    size_t len = sizeof sample_doc - 1;
    lt_jv *full = parse_ok_n(sample_doc, len);
    size_t complete = (size_t)(strrchr(sample_doc, '}') - sample_doc) + 1; /* shortest prefix that parses */
    for (size_t k = 0; k < len; k++) {
        /* a malloc'd copy of exactly k bytes, so ASan sees any read past the end */
        char *prefix = malloc(k ? k : 1);
        assert_non_null(prefix);
        memcpy(prefix, sample_doc, k);
        lt_jv *doc = (lt_jv *)1;
        lt_error err;
        lt_error_clear(&err);
        lt_status st = lt_json_parse(prefix, k, &doc, &err);
        if (k >= complete) {
            if (st != LT_OK) fail_msg("prefix of %zu bytes: %s (%s)", k, err.what, err.where);
            assert_true(lt_jv_equal(doc, full));
            lt_jv_free(doc);
        } else {
            if (st != LT_ERR_INPUT) fail_msg("prefix of %zu bytes: status %s", k, lt_status_name(st));
            assert_null(doc);
            size_t off = lt_test_where_to_offset(err.where, prefix, k);
            if (off == SIZE_MAX) fail_msg("prefix of %zu bytes: where [%s] is not in the text", k, err.where);
            expect_same_error_as_reader(prefix, k, &err);
        }
        free(prefix);
    }
    /* every one-byte deletion and a few replacements: OK or a clean error, never a crash,
     * and an error where the reader has it */
    static const char subst[] = "{}[]\",:\\ 0-eE.tfnu\n\xff";
    for (size_t k = 0; k < len; k++) {
        for (size_t r = 0; r <= sizeof subst - 1; r++) {
            char *m = malloc(len);
            assert_non_null(m);
            memcpy(m, sample_doc, k);
            size_t mlen;
            if (r == sizeof subst - 1) { /* delete byte k */
                memcpy(m + k, sample_doc + k + 1, len - k - 1);
                mlen = len - 1;
            } else {
                memcpy(m + k + 1, sample_doc + k + 1, len - k - 1);
                m[k] = subst[r];
                mlen = len;
            }
            lt_jv *doc = (lt_jv *)1;
            lt_error err;
            lt_error_clear(&err);
            lt_status st = lt_json_parse(m, mlen, &doc, &err);
            if (st == LT_OK) {
                assert_non_null(doc);
                expect_rewrite_equal(doc);
                lt_jv_free(doc);
            } else {
                assert_int_equal(st, LT_ERR_INPUT);
                assert_null(doc);
                if (lt_test_where_to_offset(err.where, m, mlen) == SIZE_MAX)
                    fail_msg("where [%s] is not in the text", err.where);
                /* the reader also rejects it; where both see an object, at the same byte */
                size_t first = mlen >= 3 && memcmp(m, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
                while (first < mlen && (m[first] == ' ' || m[first] == '\t' || m[first] == '\r' || m[first] == '\n'))
                    first++;
                if (first < mlen && m[first] == '{') expect_same_error_as_reader(m, mlen, &err);
            }
            free(m);
        }
    }
    lt_jv_free(full);
}

static void test_doc_depth(void **state) {
    (void)state;
    enum { D = LT_JSON_MAX_PARSE_DEPTH };
    char *text = malloc(8 * D + 64);
    assert_non_null(text);
    /* 512 levels, objects and arrays alternating: accepted */
    size_t n = 0;
    for (int i = 0; i < D; i++) {
        if (i % 2 == 0) {
            memcpy(text + n, "{\"k\":", 5);
            n += 5;
        } else {
            text[n++] = '[';
        }
    }
    text[n++] = '7';
    for (int i = D - 1; i >= 0; i--) text[n++] = i % 2 ? ']' : '}';
    lt_jv *doc = parse_ok_n(text, n);
    assert_int_equal(jv_depth(doc), D);
    const lt_jv *v = doc;
    while (v->type != LT_JV_NUMBER) v = &v->items[0];
    EXPECT_NUM(v, "7");
    lt_jv_free(doc);
    /* 513: rejected at the bracket that opens level 513 */
    n = 0;
    for (int i = 0; i <= D; i++) text[n++] = '[';
    for (int i = 0; i <= D; i++) text[n++] = ']';
    expect_doc_error_n(text, n, "line 1, column 513", "nesting deeper than 512 levels");
    free(text);
    /* hostile nesting far beyond the limit: clean error, no stack overflow, no leak */
    size_t huge = 1000000;
    text = malloc(huge);
    assert_non_null(text);
    memset(text, '[', huge);
    expect_doc_error_n(text, huge, "line 1, column 513", "nesting deeper");
    for (size_t i = 0; i < huge; i += 2) memcpy(text + i, i % 4 ? "[" "\n" : "{" "\n", 2);
    expect_doc_error_n(text, huge, NULL, "expected a string key");
    free(text);
}

static void expect_int64(const char *number, bool ok, int64_t want) {
    lt_jv *doc = parse_ok_n(number, strlen(number));
    assert_int_equal(doc->type, LT_JV_NUMBER);
    int64_t got = 12345;
    bool res = lt_jv_int64(doc, &got);
    if (res != ok) fail_msg("lt_jv_int64(%s) = %d, expected %d", number, res, ok);
    if (ok && got != want) fail_msg("lt_jv_int64(%s) gave %" PRId64 ", expected %" PRId64, number, got, want);
    if (!ok) assert_int_equal(got, 12345); /* untouched */
    lt_jv_free(doc);
}

static void test_doc_int64(void **state) {
    (void)state;
    expect_int64("0", true, 0);
    expect_int64("-0", true, 0);
    expect_int64("42", true, 42);
    expect_int64("-42", true, -42);
    expect_int64("9223372036854775807", true, INT64_MAX);
    expect_int64("-9223372036854775808", true, INT64_MIN);
    expect_int64("9223372036854775808", false, 0);
    expect_int64("-9223372036854775809", false, 0);
    expect_int64("18446744073709551615", false, 0);
    expect_int64("18446744073709551616", false, 0);
    expect_int64("123456789012345678901234567890", false, 0);
    expect_int64("1e3", true, 1000);
    expect_int64("1E3", true, 1000);
    expect_int64("1e+3", true, 1000);
    expect_int64("-1e3", true, -1000);
    expect_int64("1.5", false, 0);
    expect_int64("-1.5", false, 0);
    expect_int64("1.0", true, 1);
    expect_int64("1.000000000000000000000000000001", false, 0);
    expect_int64("1.50e1", true, 15);
    expect_int64("100e-2", true, 1);
    expect_int64("123e-1", false, 0);
    expect_int64("1e-3", false, 0);
    expect_int64("0.5e1", true, 5);
    expect_int64("1e18", true, 1000000000000000000);
    expect_int64("1e19", false, 0);
    expect_int64("-1e19", false, 0);
    expect_int64("9.223372036854775807e18", true, INT64_MAX);
    expect_int64("-9.223372036854775808e18", true, INT64_MIN);
    expect_int64("9.223372036854775808e18", false, 0);
    expect_int64("0.9223372036854775807e19", true, INT64_MAX);
    expect_int64("92233720368547758070e-1", true, INT64_MAX);
    expect_int64("92233720368547758080e-1", false, 0);
    expect_int64("1000000000000000000000e-3", true, 1000000000000000000);
    expect_int64("0.0e999999999999999999999", true, 0);
    expect_int64("-0.000e-5", true, 0);
    expect_int64("1e400", false, 0);
    expect_int64("1e-400", false, 0);
    expect_int64("1e99999999999999999999999999", false, 0);
    expect_int64("1e-99999999999999999999999999", false, 0);
    expect_int64("100000000000000000000000000000e-29", true, 1);
    /* not numbers */
    int64_t v = 7;
    lt_jv *doc = PARSE_OK("[\"1\",true,null,[1],{\"a\":1}]");
    for (size_t i = 0; i < doc->n; i++) assert_false(lt_jv_int64(&doc->items[i], &v));
    assert_false(lt_jv_int64(NULL, &v));
    assert_int_equal(v, 7);
    lt_jv_free(doc);
}

/* What a tokenizer sidecar (here /work/shared/vocab/cl100k_base.json as of 2024) needs. */
static void test_doc_tokenizer_sidecar(void **state) {
    (void)state;
    static const char text[] =
        "{\n"
        " \"name\": \"cl100k_base\",\n"
        " \"pat_str\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| "
        "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\",\n"
        " \"special_tokens\": {\n"
        "  \"<|endoftext|>\": 100257,\n"
        "  \"<|fim_prefix|>\": 100258,\n"
        "  \"<|fim_middle|>\": 100259,\n"
        "  \"<|fim_suffix|>\": 100260,\n"
        "  \"<|endofprompt|>\": 100276\n"
        " },\n"
        " \"n_vocab_ranks\": 100256,\n"
        " \"max_rank\": 100255\n"
        "}\n";
    lt_jv *doc = PARSE_OK(text);
    EXPECT_STR(lt_jv_get(doc, "name"), "cl100k_base");
    EXPECT_STR(lt_jv_get(doc, "pat_str"), "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                          "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
    const lt_jv *sp = lt_jv_get(doc, "special_tokens");
    assert_non_null(sp);
    assert_int_equal(sp->type, LT_JV_OBJECT);
    expect_at(sp, 4, 20);
    assert_int_equal(sp->n, 5);
    static const char *const names[5] = {"<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                                         "<|endofprompt|>"};
    static const int64_t ids[5] = {100257, 100258, 100259, 100260, 100276};
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(sp->keys[i], names[i]);
        int64_t id;
        assert_true(lt_jv_int64(&sp->items[i], &id));
        assert_int_equal(id, ids[i]);
        expect_at(&sp->items[i], 5 + i, 7 + strlen(names[i])); /* '  "NAME": ' */
    }
    int64_t n;
    assert_true(lt_jv_int64(lt_jv_get(doc, "n_vocab_ranks"), &n));
    assert_int_equal(n, 100256);
    assert_false(lt_jv_int64(lt_jv_get(doc, "name"), &n));
    assert_null(lt_jv_get(doc, "missing"));
    expect_rewrite_equal(doc);
    lt_jv_free(doc);
}

static void test_writer_number_text(void **state) {
    (void)state;
    static const char *const good[] = {"0", "-0", "1", "-1.5e+300", "123456789012345678901234567890", "1E-7", "0.0"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        lt_json j;
        lt_json_init(&j);
        lt_json_array_begin(&j);
        lt_json_number_text(&j, good[i], strlen(good[i]));
        lt_json_number_text(&j, good[i], strlen(good[i]));
        lt_json_array_end(&j);
        char want[128];
        snprintf(want, sizeof want, "[%s,%s]", good[i], good[i]);
        assert_string_equal(lt_json_cstr(&j), want);
        lt_json_free(&j);
    }
}

/* ================================================================ reference modes */

static void put_hex(lt_json *j, const char *key, const unsigned char *b, size_t n) {
    char *hex = malloc(2 * n + 1);
    if (hex == NULL) exit(3);
    for (size_t i = 0; i < n; i++) sprintf(hex + 2 * i, "%02x", b[i]);
    hex[2 * n] = '\0';
    lt_json_key(j, key);
    lt_json_string_n(j, hex, 2 * n);
    free(hex);
}

static int dump_json(unsigned long count, uint64_t seed) {
    trng_state = seed ? seed : 1;
    lt_json j;
    lt_json_init(&j);
    char in[256];
    int rc = 0;
    for (unsigned long r = 0; r < count && rc == 0; r++) {
        size_t n = random_bytes(in, sizeof in);
        uint64_t bits = trng();
        double d;
        if (r % 3 == 0) {
            d = (double)(int64_t)bits / 1e6;
        } else {
            memcpy(&d, &bits, sizeof d);
        }
        memcpy(&bits, &d, sizeof bits);
        lt_json_reset(&j);
        lt_json_object_begin(&j);
        put_hex(&j, "hex", (const unsigned char *)in, n);
        lt_json_key(&j, "s");
        lt_json_string_n(&j, in, n);
        lt_json_key(&j, "d");
        lt_json_double(&j, d);
        char dbits[17];
        snprintf(dbits, sizeof dbits, "%016" PRIx64, bits);
        lt_json_key(&j, "dbits");
        lt_json_string(&j, dbits);
        lt_json_key(&j, "i");
        lt_json_int(&j, (int64_t)trng());
        lt_json_key(&j, "u");
        lt_json_uint(&j, trng());
        lt_json_key(&j, "nested");
        lt_json_array_begin(&j);
        lt_json_object_begin(&j);
        lt_json_key_n(&j, in, n);
        lt_json_bool(&j, r % 2 == 0);
        lt_json_object_end(&j);
        lt_json_null(&j);
        lt_json_array_begin(&j);
        lt_json_array_end(&j);
        lt_json_array_end(&j);
        lt_json_object_end(&j);
        lt_error err;
        if (lt_json_fwrite_line(&j, stdout, "stdout", &err) != LT_OK) rc = lt_error_exit(&err);
    }
    lt_json_free(&j);
    if (fflush(stdout) != 0) rc = 1;
    return rc;
}

static int read_jsonl(const char *key) {
    lt_jsonl_reader rd;
    lt_jsonl_reader_init(&rd);
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, stdin)) >= 0) {
        size_t n = (size_t)got;
        if (n > 0 && line[n - 1] == '\n') n--; /* the record separator */
        const char *out;
        size_t len;
        lt_error err;
        lt_error_clear(&err);
        lt_status st = lt_jsonl_reader_get(&rd, line, n, key, &out, &len, &err);
        if (st != LT_OK) {
            printf("ERR %s %s: %s\n", lt_status_name(st), err.where, err.what);
        } else if (out == NULL) {
            printf("ABSENT\n");
        } else {
            printf("OK ");
            for (size_t i = 0; i < len; i++) printf("%02x", (unsigned char)out[i]);
            printf("\n");
        }
    }
    free(line);
    lt_jsonl_reader_free(&rd);
    return fflush(stdout) == 0 && !ferror(stdin) ? 0 : 1;
}

/* Every number's lt_jv_int64 in document order (null where false). */
static void put_int64s(lt_json *j, const lt_jv *v) {
    int64_t x;
    if (v->type == LT_JV_NUMBER) {
        if (lt_jv_int64(v, &x))
            lt_json_int(j, x);
        else
            lt_json_null(j);
    }
    for (size_t i = 0; i < v->n; i++) put_int64s(j, &v->items[i]);
}

static int parse_json_docs(void) {
    char *line = NULL, *doc_text = NULL;
    size_t cap = 0;
    ssize_t got;
    lt_json j;
    lt_json_init(&j);
    while ((got = getline(&line, &cap, stdin)) >= 0) {
        size_t n = (size_t)got;
        if (n > 0 && line[n - 1] == '\n') n--;
        free(doc_text);
        doc_text = malloc(n / 2 + 1);
        if (doc_text == NULL) exit(3);
        bool hex_ok = n % 2 == 0;
        for (size_t i = 0; hex_ok && i < n / 2; i++) {
            unsigned int b;
            if (sscanf(line + 2 * i, "%2x", &b) != 1) hex_ok = false;
            doc_text[i] = (char)b;
        }
        if (!hex_ok) {
            printf("BADHEX\n");
            continue;
        }
        lt_jv *doc;
        lt_error err;
        lt_error_clear(&err);
        lt_status st = lt_json_parse(doc_text, n / 2, &doc, &err);
        if (st != LT_OK) {
            printf("ERR %s %s: %s\n", lt_status_name(st), err.where, err.what);
            continue;
        }
        if (jv_depth(doc) >= LT_JSON_MAX_DEPTH) { /* the writer's limit, the wrapper array included */
            printf("DEEP\n");
        } else {
            lt_json_reset(&j);
            lt_json_array_begin(&j);
            lt_json_value(&j, doc);
            lt_json_array_begin(&j);
            put_int64s(&j, doc);
            lt_json_array_end(&j);
            lt_json_uint(&j, doc->replacements);
            lt_json_array_end(&j);
            printf("OK %s\n", lt_json_cstr(&j));
        }
        lt_jv_free(doc);
    }
    free(line);
    free(doc_text);
    lt_json_free(&j);
    return fflush(stdout) == 0 && !ferror(stdin) ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--dump-json") == 0)
        return dump_json(strtoul(argv[2], NULL, 0), strtoull(argv[3], NULL, 0));
    if (argc == 3 && strcmp(argv[1], "--read-jsonl") == 0) return read_jsonl(argv[2]);
    if (argc == 2 && strcmp(argv[1], "--parse-json") == 0) return parse_json_docs();
    if (argc >= 2) {
        fprintf(stderr, "usage: %s [--dump-json N SEED | --read-jsonl KEY | --parse-json]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_sanitize),     cmocka_unit_test(test_utf8_valid_fast_path),
        cmocka_unit_test(test_writer_escaping),
        cmocka_unit_test(test_writer_structure),  cmocka_unit_test(test_writer_numbers),
        cmocka_unit_test(test_writer_locale),     cmocka_unit_test(test_writer_misuse),
        cmocka_unit_test(test_writer_fwrite),     cmocka_unit_test(test_reader_basic),
        cmocka_unit_test(test_reader_nested_skip), cmocka_unit_test(test_reader_escapes),
        cmocka_unit_test(test_reader_keys),       cmocka_unit_test(test_reader_long_values),
        cmocka_unit_test(test_reader_type_errors),
        cmocka_unit_test(test_reader_malformed),  cmocka_unit_test(test_reader_depth),
        cmocka_unit_test(test_reader_reuse),      cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_writer_number_text), cmocka_unit_test(test_doc_values),
        cmocka_unit_test(test_doc_strings),       cmocka_unit_test(test_doc_duplicates),
        cmocka_unit_test(test_doc_bom_and_blanks), cmocka_unit_test(test_doc_errors),
        cmocka_unit_test(test_doc_truncated),     cmocka_unit_test(test_doc_depth),
        cmocka_unit_test(test_doc_int64),         cmocka_unit_test(test_doc_tokenizer_sidecar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
