/*
 * tests/dataprep/test_pretok.c — unit tests for dataprep/pretok (cmocka), plus a reference
 * mode.
 *
 * Without arguments: the cmocka tests.
 *   - the known patterns are the pat_str of the sidecars NAME.json (data/vocab/ and
 *     ../shared/vocab/) and are recognized;
 *   - golden splits: for each scanner, hand-picked texts (each alternative, contractions in
 *     every case and with U+017F, CRLF, NBSP, U+3000, U+2028, U+0085, tabs before words,
 *     digit runs, o200k's case changes, combining marks, CJK, emoji ZWJ sequences, flags,
 *     characters that look like white space but are not, the empty text) split into the
 *     pieces tiktoken 0.14 gives (written down by running tiktoken), by the scanner and by
 *     the PCRE2 engine compiled from the same pattern;
 *   - 1 MiB runs of one character (or a short unit) of every kind: the same pieces as
 *     PCRE2, within a time that only a linear scan meets;
 *   - a seeded random differential test: thousands of strings, scanners vs PCRE2, no
 *     difference allowed;
 *   - scanners given bytes that are not UTF-8 stay in bounds and make progress;
 *   - the PCRE2 engine: \s and \S mean White_Space, [\S] is refused, errors name the
 *     offset in the original pattern, $ is the end of text only, empty matches are
 *     skipped as Rust's find_iter skips them, a runaway backtrack is LT_ERR_INPUT.
 *
 * Mode for tests/dataprep/pretok_reference.py (which checks it against tiktoken):
 *   test_pretok --split KIND [--pcre2]   KIND cl100k|o200k|r50k; for each stdin line (the
 *                                        hex of a UTF-8 text) print its pieces, each as hex,
 *                                        separated by single spaces; with --pcre2 split
 *                                        with the PCRE2 engine instead of the scanner
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dataprep/pretok.h"
#include "dataprep/unicode.h" /* lt_uc_class: which code points PCRE2 classes alike */
#include "lib/json.h"         /* lt_jsonl_get_string, lt_utf8_encode */
#include "tests/testutil.h"

/* xorshift64* for test data */
static uint64_t trng_state = 0x9E3779B97F4A7C15u;
static uint64_t trng(void) {
    trng_state ^= trng_state >> 12;
    trng_state ^= trng_state << 25;
    trng_state ^= trng_state >> 27;
    return trng_state * 0x2545F4914F6CDD1DULL;
}
static uint32_t trng_below(uint32_t n) { return (uint32_t)(trng() % n); }

static const lt_pretok_kind KINDS[3] = {LT_PRETOK_CL100K, LT_PRETOK_O200K, LT_PRETOK_R50K};
static const char *const KIND_NAMES[3] = {"cl100k", "o200k", "r50k"};

static size_t scan_next(lt_pretok_kind kind, const unsigned char *t, size_t len, size_t pos) {
    switch (kind) {
    case LT_PRETOK_CL100K: return lt_pretok_next_cl100k(t, len, pos);
    case LT_PRETOK_O200K: return lt_pretok_next_o200k(t, len, pos);
    case LT_PRETOK_R50K: return lt_pretok_next_r50k(t, len, pos);
    case LT_PRETOK_REGEX: break;
    }
    fail_msg("no scanner for kind %d", (int)kind);
    return len;
}

/* The pieces of a text: [start[i], end[i]). */
typedef struct pieces {
    size_t n, cap;
    size_t *start, *end;
} pieces;

static void pieces_add(pieces *p, size_t s, size_t e) {
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->start = realloc(p->start, p->cap * sizeof *p->start);
        p->end = realloc(p->end, p->cap * sizeof *p->end);
        assert_non_null(p->start);
        assert_non_null(p->end);
    }
    p->start[p->n] = s;
    p->end[p->n] = e;
    p->n++;
}

static void pieces_free(pieces *p) {
    free(p->start);
    free(p->end);
    memset(p, 0, sizeof *p);
}

/* The scanner's pieces; checks that each makes progress and stays within the text. */
static void scan_pieces(lt_pretok_kind kind, const unsigned char *t, size_t len, pieces *out) {
    out->n = 0;
    for (size_t pos = 0; pos < len;) {
        size_t end = scan_next(kind, t, len, pos);
        if (end <= pos || end > len)
            fail_msg("scanner returned %zu at %zu (len %zu)", end, pos, len);
        pieces_add(out, pos, end);
        pos = end;
    }
}

/* The PCRE2 engine's pieces (the matches of find_iter). */
static void regex_pieces(const lt_regex *re, lt_regex_scratch *rs, const unsigned char *t,
                         size_t len, pieces *out) {
    out->n = 0;
    for (size_t pos = 0; pos < len;) {
        bool found;
        size_t s, e;
        lt_error err;
        lt_status st = lt_regex_next(re, rs, t, len, pos, &found, &s, &e, &err);
        if (st != LT_OK) fail_msg("lt_regex_next: %s (%s)", err.what, err.where);
        if (!found) break;
        assert_true(s >= pos && e > s && e <= len);
        pieces_add(out, s, e);
        pos = e;
    }
}

static void print_hex(const char *label, const unsigned char *t, size_t len) {
    fprintf(stderr, "%s (%zu bytes):", label, len);
    for (size_t i = 0; i < len && i < 400; i++) fprintf(stderr, " %02x", t[i]);
    fprintf(stderr, "%s\n", len > 400 ? " ..." : "");
}

/* Fail, showing the text and the first difference, unless a and b are the same pieces. */
static void expect_same_pieces(const char *what, const unsigned char *t, size_t len,
                               const pieces *a, const pieces *b) {
    size_t i = 0;
    while (i < a->n && i < b->n && a->start[i] == b->start[i] && a->end[i] == b->end[i]) i++;
    if (i == a->n && i == b->n) return;
    print_hex(what, t, len);
    if (i < a->n) fprintf(stderr, "  scanner piece %zu: [%zu, %zu)\n", i, a->start[i], a->end[i]);
    else fprintf(stderr, "  scanner: no piece %zu\n", i);
    if (i < b->n) fprintf(stderr, "  PCRE2   piece %zu: [%zu, %zu)\n", i, b->start[i], b->end[i]);
    else fprintf(stderr, "  PCRE2: no piece %zu\n", i);
    fail_msg("%s: the scanner and PCRE2 differ at piece %zu", what, i);
}

/* The three known patterns compiled for PCRE2, one scratch each. */
static lt_regex *known_re[3];
static lt_regex_scratch *known_rs[3];

static int setup_known(void **state) {
    (void)state;
    for (int k = 0; k < 3; k++) {
        lt_error err;
        if (lt_regex_compile(&known_re[k], lt_pretok_pattern(KINDS[k]), &err) != LT_OK) {
            fprintf(stderr, "compiling %s: %s\n", KIND_NAMES[k], err.what);
            return -1;
        }
        known_rs[k] = lt_regex_scratch_new(known_re[k]);
        if (known_rs[k] == NULL) return -1;
    }
    return 0;
}

static int teardown_known(void **state) {
    (void)state;
    for (int k = 0; k < 3; k++) {
        lt_regex_scratch_free(known_rs[k]);
        lt_regex_free(known_re[k]);
        known_rs[k] = NULL;
        known_re[k] = NULL;
    }
    return 0;
}

/* Scanner k and PCRE2 give the same pieces of t. */
static void differential(int k, const unsigned char *t, size_t len) {
    pieces a = {0}, b = {0};
    scan_pieces(KINDS[k], t, len, &a);
    regex_pieces(known_re[k], known_rs[k], t, len, &b);
    expect_same_pieces(KIND_NAMES[k], t, len, &a, &b);
    pieces_free(&a);
    pieces_free(&b);
}

/* ================================================================ known patterns */

static char *source_file(const char *rel) {
    const char *roots[] = {getenv("top_srcdir"), getenv("srcdir"), ".", "..", "../.."};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        if (roots[i] == NULL) continue;
        char buf[4096];
        snprintf(buf, sizeof buf, "%s/%s", roots[i], rel);
        if (access(buf, R_OK) == 0) return strdup(buf);
    }
    return NULL;
}

static void test_known_patterns(void **state) {
    (void)state;
    for (int k = 0; k < 3; k++) {
        const char *p = lt_pretok_pattern(KINDS[k]);
        assert_non_null(p);
        assert_int_equal(lt_pretok_recognize(p), KINDS[k]);
        /* a pattern that differs by one character is not recognized */
        char *q = strdup(p);
        assert_non_null(q);
        q[strlen(q) - 1] = '*';
        assert_int_equal(lt_pretok_recognize(q), LT_PRETOK_REGEX);
        free(q);
    }
    assert_null(lt_pretok_pattern(LT_PRETOK_REGEX));
    assert_int_equal(lt_pretok_recognize(NULL), LT_PRETOK_REGEX);
    assert_int_equal(lt_pretok_recognize(""), LT_PRETOK_REGEX);
    assert_int_equal(lt_pretok_recognize("\\p{L}+"), LT_PRETOK_REGEX);
}

/* The constants are the pat_str of the sidecars tiktoken's files come with: the copies
 * the project ships (data/vocab/) and ../shared/vocab/, where they came from. */
static void test_patterns_match_sidecars(void **state) {
    (void)state;
    static const char *const dirs[2] = {"data/vocab", "../shared/vocab"};
    int checked = 0;
    for (int d = 0; d < 2; d++) {
        for (int k = 0; k < 3; k++) {
            char rel[128];
            snprintf(rel, sizeof rel, "%s/%s_base.json", dirs[d], KIND_NAMES[k]);
            char *path = source_file(rel);
            if (path == NULL) continue;
            FILE *f = fopen(path, "rb");
            assert_non_null(f);
            char buf[8192];
            size_t n = fread(buf, 1, sizeof buf, f);
            fclose(f);
            char *pat;
            size_t plen;
            lt_error err;
            if (lt_jsonl_get_string(buf, n, "pat_str", &pat, &plen, &err) != LT_OK)
                fail_msg("%s: %s (%s)", path, err.what, err.where);
            if (pat == NULL) fail_msg("%s: no pat_str", path);
            if (strcmp(pat, lt_pretok_pattern(KINDS[k])) != 0)
                fail_msg("%s: pat_str differs from lt_pretok_pattern(%s)", path, KIND_NAMES[k]);
            assert_int_equal(lt_pretok_recognize(pat), KINDS[k]);
            free(pat);
            free(path);
            checked++;
        }
    }
    if (checked == 0) {
        printf("# skip: neither data/vocab/ nor ../shared/vocab/ found from $top_srcdir\n");
        skip();
    }
}

/* ================================================================ golden splits */

/* Pieces written down by running tiktoken 0.14 (an Encoding whose vocabulary holds every
 * substring of the text, so that each piece becomes one token). */
typedef struct golden_case {
    const char *text;
    const char *pieces[20]; /* NULL-terminated */
} golden_case;

static const golden_case golden_cl100k[] = {
    {"Hello world", {"Hello", " world"}},
    {"I'm here, they're 'LL 'll 'Ll 've'd", {"I", "'m", " here", ",", " they", "'re", " '", "LL", " '", "ll", " '", "Ll", " '", "ve", "'d"}},
    {"don't DON'T John's", {"don", "'t", " DON", "'T", " John", "'s"}},
    {"'s's 'S '\xc5\xbf \xc5\xbfo", {"'s", "'s", " '", "S", " '", "\xc5\xbf", " \xc5\xbfo"}},
    {"a\r\nb\r\n\r\n  c\r", {"a", "\r\n", "b", "\r\n\r\n", " ", " c", "\r"}},
    {"x\xc2\xa0y \xc2\xa0z\xc2\xa0", {"x", "\xc2\xa0y", " ", "\xc2\xa0z", "\xc2\xa0"}},
    {"\xe3\x80\x80word \xe3\x80\x80", {"\xe3\x80\x80word", " \xe3\x80\x80"}},
    {"a\xe2\x80\xa8" "b \xe2\x80\xa9", {"a", "\xe2\x80\xa8" "b", " \xe2\x80\xa9"}},
    {"\t\tword  \tfoo \t", {"\t", "\tword", "  ", "\tfoo", " \t"}},
    {"1234567 12 3", {"123", "456", "7", " ", "12", " ", "3"}},
    {"HELLOWorld helloWORLD ÀÉ àé", {"HELLOWorld", " helloWORLD", " ÀÉ", " àé"}},
    {"e\xcc\x81 \xcc\x81" "a \xcc\x81\xcc\x81x !\xcc\x81 \xcc\x81" "ABC", {"e", "\xcc\x81", " \xcc\x81", "a", " \xcc\x81\xcc\x81", "x", " !\xcc\x81", " \xcc\x81", "ABC"}},
    {"中文字符 日本語の文", {"中文字符", " 日本語の文"}},
    {"👩\xe2\x80\x8d💻 👍🏽 ❤\xef\xb8\x8f", {"👩\xe2\x80\x8d💻", " 👍🏽", " ❤\xef\xb8\x8f"}},
    {"🇫🇷🇩🇪", {"🇫🇷🇩🇪"}},
    {"path/to/file//\n\nend", {"path", "/to", "/file", "//\n\n", "end"}},
    {"trailing spaces   ", {"trailing", " spaces", "   "}},
    {"  leading", {" ", " leading"}},
    {"a  \n\n  b \n", {"a", "  \n\n", " ", " b", " \n"}},
    {"x\xc2\x85y\xc2\x85", {"x", "\xc2\x85y", "\xc2\x85"}},
    {"\x1c\x1f a\x1c" "b", {"\x1c\x1f", " a", "\x1c" "b"}},
    {"ǅungla ʰa Ǆǅǆ", {"ǅungla", " ʰa", " Ǆǅǆ"}},
    {"٣٤٥٦ Ⅻ ²³", {"٣٤٥", "٦", " ", "Ⅻ", " ", "²³"}},
    {"\xe1\xa0\x8e\xe2\x80\x8b x\xe2\x80\x8by", {"\xe1\xa0\x8e\xe2\x80\x8b", " x", "\xe2\x80\x8by"}},
    {"we'LL it'\xc5\xbfx we'Re'VE'M'D'T", {"we", "'LL", " it", "'\xc5\xbf", "x", " we", "'Re", "'VE", "'M", "'D", "'T"}},
    {"1\xcc\x81" "ABC 2\xcc\x81" "abc 3\xcc\x81\xcc\x81" "AB", {"1", "\xcc\x81" "ABC", " ", "2", "\xcc\x81" "abc", " ", "3", "\xcc\x81\xcc\x81", "AB"}},
    {"a.\n/b\r\n/ x!/\n//", {"a", ".\n", "/b", "\r\n", "/", " x", "!/\n", "//"}},
    {"", {NULL}},
};
static const golden_case golden_o200k[] = {
    {"Hello world", {"Hello", " world"}},
    {"I'm here, they're 'LL 'll 'Ll 've'd", {"I'm", " here", ",", " they're", " '", "LL", " '", "ll", " '", "Ll", " '", "ve'd"}},
    {"don't DON'T John's", {"don't", " DON'T", " John's"}},
    {"'s's 'S '\xc5\xbf \xc5\xbfo", {"'s's", " '", "S", " '", "\xc5\xbf", " \xc5\xbfo"}},
    {"a\r\nb\r\n\r\n  c\r", {"a", "\r\n", "b", "\r\n\r\n", " ", " c", "\r"}},
    {"x\xc2\xa0y \xc2\xa0z\xc2\xa0", {"x", "\xc2\xa0y", " ", "\xc2\xa0z", "\xc2\xa0"}},
    {"\xe3\x80\x80word \xe3\x80\x80", {"\xe3\x80\x80word", " \xe3\x80\x80"}},
    {"a\xe2\x80\xa8" "b \xe2\x80\xa9", {"a", "\xe2\x80\xa8" "b", " \xe2\x80\xa9"}},
    {"\t\tword  \tfoo \t", {"\t", "\tword", "  ", "\tfoo", " \t"}},
    {"1234567 12 3", {"123", "456", "7", " ", "12", " ", "3"}},
    {"HELLOWorld helloWORLD ÀÉ àé", {"HELLOWorld", " hello", "WORLD", " ÀÉ", " àé"}},
    {"e\xcc\x81 \xcc\x81" "a \xcc\x81\xcc\x81x !\xcc\x81 \xcc\x81" "ABC", {"e\xcc\x81", " \xcc\x81" "a", " \xcc\x81\xcc\x81x", " !\xcc\x81", " \xcc\x81", "ABC"}},
    {"中文字符 日本語の文", {"中文字符", " 日本語の文"}},
    {"👩\xe2\x80\x8d💻 👍🏽 ❤\xef\xb8\x8f", {"👩\xe2\x80\x8d💻", " 👍🏽", " ❤\xef\xb8\x8f"}},
    {"🇫🇷🇩🇪", {"🇫🇷🇩🇪"}},
    {"path/to/file//\n\nend", {"path", "/to", "/file", "//\n\n", "end"}},
    {"trailing spaces   ", {"trailing", " spaces", "   "}},
    {"  leading", {" ", " leading"}},
    {"a  \n\n  b \n", {"a", "  \n\n", " ", " b", " \n"}},
    {"x\xc2\x85y\xc2\x85", {"x", "\xc2\x85y", "\xc2\x85"}},
    {"\x1c\x1f a\x1c" "b", {"\x1c\x1f", " a", "\x1c" "b"}},
    {"ǅungla ʰa Ǆǅǆ", {"ǅungla", " ʰa", " Ǆǅǆ"}},
    {"٣٤٥٦ Ⅻ ²³", {"٣٤٥", "٦", " ", "Ⅻ", " ", "²³"}},
    {"\xe1\xa0\x8e\xe2\x80\x8b x\xe2\x80\x8by", {"\xe1\xa0\x8e\xe2\x80\x8b", " x", "\xe2\x80\x8by"}},
    {"we'LL it'\xc5\xbfx we'Re'VE'M'D'T", {"we'LL", " it'\xc5\xbf", "x", " we'Re", "'VE'M", "'D'T"}},
    {"1\xcc\x81" "ABC 2\xcc\x81" "abc 3\xcc\x81\xcc\x81" "AB", {"1", "\xcc\x81", "ABC", " ", "2", "\xcc\x81" "abc", " ", "3", "\xcc\x81\xcc\x81", "AB"}},
    {"a.\n/b\r\n/ x!/\n//", {"a", ".\n/", "b", "\r\n", "/", " x", "!/\n//"}},
    {"", {NULL}},
};
static const golden_case golden_r50k[] = {
    {"Hello world", {"Hello", " world"}},
    {"I'm here, they're 'LL 'll 'Ll 've'd", {"I", "'m", " here", ",", " they", "'re", " '", "LL", " '", "ll", " '", "Ll", " '", "ve", "'d"}},
    {"don't DON'T John's", {"don", "'t", " DON", "'", "T", " John", "'s"}},
    {"'s's 'S '\xc5\xbf \xc5\xbfo", {"'s", "'s", " '", "S", " '", "\xc5\xbf", " \xc5\xbfo"}},
    {"a\r\nb\r\n\r\n  c\r", {"a", "\r", "\n", "b", "\r\n\r\n ", " c", "\r"}},
    {"x\xc2\xa0y \xc2\xa0z\xc2\xa0", {"x", "\xc2\xa0", "y", " ", "\xc2\xa0", "z", "\xc2\xa0"}},
    {"\xe3\x80\x80word \xe3\x80\x80", {"\xe3\x80\x80", "word", " \xe3\x80\x80"}},
    {"a\xe2\x80\xa8" "b \xe2\x80\xa9", {"a", "\xe2\x80\xa8", "b", " \xe2\x80\xa9"}},
    {"\t\tword  \tfoo \t", {"\t", "\t", "word", "  ", "\t", "foo", " \t"}},
    {"1234567 12 3", {"1234567", " 12", " 3"}},
    {"HELLOWorld helloWORLD ÀÉ àé", {"HELLOWorld", " helloWORLD", " ÀÉ", " àé"}},
    {"e\xcc\x81 \xcc\x81" "a \xcc\x81\xcc\x81x !\xcc\x81 \xcc\x81" "ABC", {"e", "\xcc\x81", " \xcc\x81", "a", " \xcc\x81\xcc\x81", "x", " !\xcc\x81", " \xcc\x81", "ABC"}},
    {"中文字符 日本語の文", {"中文字符", " 日本語の文"}},
    {"👩\xe2\x80\x8d💻 👍🏽 ❤\xef\xb8\x8f", {"👩\xe2\x80\x8d💻", " 👍🏽", " ❤\xef\xb8\x8f"}},
    {"🇫🇷🇩🇪", {"🇫🇷🇩🇪"}},
    {"path/to/file//\n\nend", {"path", "/", "to", "/", "file", "//", "\n", "\n", "end"}},
    {"trailing spaces   ", {"trailing", " spaces", "   "}},
    {"  leading", {" ", " leading"}},
    {"a  \n\n  b \n", {"a", "  \n\n ", " b", " \n"}},
    {"x\xc2\x85y\xc2\x85", {"x", "\xc2\x85", "y", "\xc2\x85"}},
    {"\x1c\x1f a\x1c" "b", {"\x1c\x1f", " a", "\x1c", "b"}},
    {"ǅungla ʰa Ǆǅǆ", {"ǅungla", " ʰa", " Ǆǅǆ"}},
    {"٣٤٥٦ Ⅻ ²³", {"٣٤٥٦", " Ⅻ", " ²³"}},
    {"\xe1\xa0\x8e\xe2\x80\x8b x\xe2\x80\x8by", {"\xe1\xa0\x8e\xe2\x80\x8b", " x", "\xe2\x80\x8b", "y"}},
    {"we'LL it'\xc5\xbfx we'Re'VE'M'D'T", {"we", "'", "LL", " it", "'", "\xc5\xbfx", " we", "'", "Re", "'", "VE", "'", "M", "'", "D", "'", "T"}},
    {"1\xcc\x81" "ABC 2\xcc\x81" "abc 3\xcc\x81\xcc\x81" "AB", {"1", "\xcc\x81", "ABC", " 2", "\xcc\x81", "abc", " 3", "\xcc\x81\xcc\x81", "AB"}},
    {"a.\n/b\r\n/ x!/\n//", {"a", ".", "\n", "/", "b", "\r", "\n", "/", " x", "!/", "\n", "//"}},
    {"", {NULL}},
};

static void check_golden(int k, const golden_case *cases, size_t n) {
    for (size_t c = 0; c < n; c++) {
        const unsigned char *t = (const unsigned char *)cases[c].text;
        size_t len = strlen(cases[c].text);
        pieces want = {0}, got = {0}, re = {0};
        size_t pos = 0;
        for (const char *const *p = cases[c].pieces; *p != NULL; p++) {
            size_t plen = strlen(*p);
            assert_true(pos + plen <= len);
            assert_memory_equal(t + pos, *p, plen);
            pieces_add(&want, pos, pos + plen);
            pos += plen;
        }
        assert_int_equal(pos, len); /* the golden pieces tile the text */
        scan_pieces(KINDS[k], t, len, &got);
        regex_pieces(known_re[k], known_rs[k], t, len, &re);
        char what[64];
        snprintf(what, sizeof what, "%s golden case %zu, scanner", KIND_NAMES[k], c);
        expect_same_pieces(what, t, len, &got, &want);
        snprintf(what, sizeof what, "%s golden case %zu, PCRE2", KIND_NAMES[k], c);
        expect_same_pieces(what, t, len, &re, &want);
        pieces_free(&want);
        pieces_free(&got);
        pieces_free(&re);
    }
}

static void test_golden_cl100k(void **state) {
    (void)state;
    check_golden(0, golden_cl100k, sizeof golden_cl100k / sizeof golden_cl100k[0]);
}

static void test_golden_o200k(void **state) {
    (void)state;
    check_golden(1, golden_o200k, sizeof golden_o200k / sizeof golden_o200k[0]);
}

static void test_golden_r50k(void **state) {
    (void)state;
    check_golden(2, golden_r50k, sizeof golden_r50k / sizeof golden_r50k[0]);
}

/* ================================================================ long runs */

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*
 * 1 MiB of one unit repeated: each scanner must agree with PCRE2 and take well under a
 * second (a scanner that rescanned the rest of a run for each piece would need minutes on
 * the digit, mark and "a + mark" runs, whose pieces are short).
 */
static void test_long_runs(void **state) {
    (void)state;
    static const char *const units[] = {
        " ", "\n", "\t", "\r\n", " \t", "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\xa8", "\xc2\x85",
        "a", "A", "Aa", "aA", "\xc7\x85", "\xca\xb0", "1", "\xd9\xa3", "!", "'", "'s", "/",
        "\xe4\xb8\xad", "\xcc\x81", "a\xcc\x81", "\xcc\x81" "A", " \xcc\x81", "!\xcc\x81" "A",
        "\xf0\x9f\x98\x80", "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb", " a", " 1", " !",
        "\n ", "a\n", "1 ", "x\x1c",
    };
    const size_t target = 1u << 20;
    unsigned char *t = malloc(target);
    assert_non_null(t);
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        size_t ulen = strlen(units[u]), len = 0;
        for (; len + ulen <= target; len += ulen) memcpy(t + len, units[u], ulen);
        for (int k = 0; k < 3; k++) {
            pieces a = {0}, b = {0};
            double t0 = seconds_now();
            scan_pieces(KINDS[k], t, len, &a);
            double dt = seconds_now() - t0;
            if (dt > 2.0) {
                print_hex("unit", (const unsigned char *)units[u], ulen);
                fail_msg("%s: 1 MiB run took %.2f s", KIND_NAMES[k], dt);
            }
            regex_pieces(known_re[k], known_rs[k], t, len, &b);
            expect_same_pieces(KIND_NAMES[k], (const unsigned char *)units[u], ulen, &a, &b);
            pieces_free(&a);
            pieces_free(&b);
        }
    }
    free(t);
}

/* ================================================================ random differential */

/*
 * The code points drawn. The scanners classify by Unicode 16.0 (tiktoken's), PCRE2 10.42
 * by Unicode 14.0: the letters, marks and numbers assigned in 15.0 and 16.0 are "other" to
 * PCRE2. Rather than keep a list of them, each code point is checked once against PCRE2
 * itself (single-class patterns through the engine under test) and drawn only when every
 * class bit agrees; the few that do not are redrawn. So the test covers the whole code
 * space, including unassigned and private-use code points, and keeps working when either
 * side's Unicode version moves.
 */
static const char *const CLASS_PATTERNS[6] = {
    "\\p{L}", "\\p{N}", "\\p{M}", "\\s", "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]",
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]",
};
static const uint8_t CLASS_BITS[6] = {LT_UC_L, LT_UC_N, LT_UC_M, LT_UC_WS, LT_UC_UP, LT_UC_LO};
static lt_regex *class_re[6];
static lt_regex_scratch *class_rs[6];
static uint8_t agreement[LT_UC_MAX + 1]; /* 0 unknown, 1 agree, 2 differ */

static bool classes_agree(uint32_t cp) {
    if (agreement[cp] == 0) {
        if (class_re[0] == NULL) {
            for (int c = 0; c < 6; c++) {
                lt_error err;
                assert_int_equal(lt_regex_compile(&class_re[c], CLASS_PATTERNS[c], &err), LT_OK);
                class_rs[c] = lt_regex_scratch_new(class_re[c]);
                assert_non_null(class_rs[c]);
            }
        }
        char u[4];
        size_t n = lt_utf8_encode(cp, u);
        uint8_t pcre_class = 0;
        for (int c = 0; c < 6; c++) {
            bool found;
            size_t s, e;
            lt_error err;
            assert_int_equal(lt_regex_next(class_re[c], class_rs[c], (const unsigned char *)u, n, 0,
                                           &found, &s, &e, &err),
                             LT_OK);
            if (found) pcre_class |= CLASS_BITS[c];
        }
        agreement[cp] = pcre_class == lt_uc_class(cp) ? 1 : 2;
    }
    return agreement[cp] == 1;
}

static void free_class_regexes(void) {
    for (int c = 0; c < 6; c++) {
        lt_regex_scratch_free(class_rs[c]);
        lt_regex_free(class_re[c]);
        class_rs[c] = NULL;
        class_re[c] = NULL;
    }
}

typedef struct cp_range {
    uint32_t lo, hi;
} cp_range;

/* A mix of what text holds: white space and its lookalikes, letters of several scripts in
 * both cases and titlecase, modifier letters, marks of the three kinds, numbers of the
 * three kinds, punctuation and symbols, emoji with ZWJ, skin tones and flags. */
static const cp_range MIX[] = {
    {0x09, 0x0D}, {0x20, 0x20}, {0x85, 0x85}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
    {0x1C, 0x1F}, {0x180E, 0x180E}, {0x200B, 0x200D}, {0xFEFF, 0xFEFF},          /* not \s */
    {0xC0, 0xFF}, {0x100, 0x17F}, {0x1C4, 0x1CC}, {0x1F1, 0x1F3}, {0x212A, 0x212A}, /* Latin */
    {0x391, 0x3C9}, {0x1F80, 0x1FAF}, {0x410, 0x44F}, {0x5D0, 0x5EA}, {0x627, 0x64A},
    {0x905, 0x939}, {0x4E00, 0x4E40}, {0x3040, 0x30FF}, {0xAC00, 0xAC40}, {0x2B0, 0x2C1},
    {0x300, 0x36F}, {0x483, 0x489}, {0x903, 0x903}, {0x93E, 0x94D}, {0x20D0, 0x20F0},
    {0xFE00, 0xFE0F},                                                             /* marks */
    {0x660, 0x669}, {0x966, 0x96F}, {0xFF10, 0xFF19}, {0xB2, 0xB3}, {0xB9, 0xB9},
    {0xBC, 0xBE}, {0x2160, 0x2188}, {0x2460, 0x2473},                              /* numbers */
    {0x2018, 0x201F}, {0x2026, 0x2026}, {0x3001, 0x3002}, {0xA7, 0xA7}, {0x20AC, 0x20AC},
    {0x1F600, 0x1F64F}, {0x1F3FB, 0x1F3FF}, {0x1F1E6, 0x1F1FF}, {0x2764, 0x2764},
};
static const char ASCII_WEIGHTED[] = "aAzZ sSl'tTrReEvVLmMdD0123456789 \t\r\n!?.,/-_'\"()";

static uint32_t draw_cp(void) {
    for (;;) {
        uint32_t r = trng_below(100), cp;
        if (r < 35) {
            cp = (unsigned char)ASCII_WEIGHTED[trng_below(sizeof ASCII_WEIGHTED - 1)];
        } else if (r < 40) {
            cp = 0x17F; /* LATIN SMALL LETTER LONG S: 's' to (?i) */
        } else if (r < 85) {
            const cp_range *g = &MIX[trng_below(sizeof MIX / sizeof MIX[0])];
            cp = g->lo + trng_below(g->hi - g->lo + 1);
        } else if (r < 93) {
            cp = trng_below(0x10000); /* the BMP */
        } else {
            cp = trng_below(LT_UC_MAX + 1);
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        if (classes_agree(cp)) return cp;
    }
}

/* A random text of up to ~30 characters; runs are common (the last character, or the last
 * two, repeated). */
static size_t random_text(unsigned char *out) {
    size_t len = 0, nchars = trng_below(24);
    size_t prev = 0, prev2 = 0; /* where the last and the one before it start */
    for (size_t i = 0; i < nchars; i++) {
        uint32_t r = trng_below(10);
        if (r == 0 && i >= 1) {
            size_t reps = 1 + trng_below(4), clen = len - prev;
            for (size_t j = 0; j < reps; j++, len += clen) memmove(out + len, out + prev, clen);
        } else if (r == 1 && i >= 2) {
            size_t clen = len - prev2;
            memmove(out + len, out + prev2, clen);
            len += clen;
        } else {
            prev2 = prev;
            prev = len;
            len += lt_utf8_encode(draw_cp(), (char *)out + len);
        }
    }
    return len;
}

static void test_random_differential(void **state) {
    (void)state;
    trng_state = 20240520;
    unsigned char text[1024];
    const int n_texts = 6000;
    for (int i = 0; i < n_texts; i++) {
        size_t len = random_text(text);
        assert_true(len < sizeof text);
        for (int k = 0; k < 3; k++) differential(k, text, len);
    }
    size_t checked = 0, differ = 0;
    for (uint32_t cp = 0; cp <= LT_UC_MAX; cp++) {
        checked += agreement[cp] != 0;
        differ += agreement[cp] == 2;
    }
    printf("# %d random texts; %zu code points drawn, %zu of them redrawn (classes differ between "
           "Unicode %s and PCRE2)\n", n_texts, checked, differ, LT_UNICODE_VERSION);
    free_class_regexes();
}

/* Not UTF-8 (a broken contract): the scanners still return an end in (pos, len]. */
static void test_scanners_stay_in_bounds(void **state) {
    (void)state;
    trng_state = 77;
    unsigned char text[64];
    pieces p = {0};
    for (int i = 0; i < 20000; i++) {
        size_t len = 1 + trng_below(sizeof text);
        for (size_t j = 0; j < len; j++) {
            uint32_t r = trng_below(4);
            if (r == 0) text[j] = (unsigned char)(0x80 + trng_below(0x80)); /* continuation */
            else if (r == 1) text[j] = (unsigned char)(0xC0 + trng_below(0x40)); /* lead */
            else if (r == 2) text[j] = (unsigned char)"a 1'\n!"[trng_below(6)];
            else text[j] = (unsigned char)trng_below(256);
        }
        unsigned char *copy = malloc(len); /* exactly len bytes: ASan sees any overread */
        assert_non_null(copy);
        memcpy(copy, text, len);
        for (int k = 0; k < 3; k++) scan_pieces(KINDS[k], copy, len, &p);
        free(copy);
    }
    pieces_free(&p);
}

/* ================================================================ the PCRE2 engine */

/* The pieces of text under `pattern`, as "a|b|c". */
static void expect_regex_split(const char *pattern, const char *text, const char *want) {
    lt_regex *re;
    lt_error err;
    if (lt_regex_compile(&re, pattern, &err) != LT_OK) fail_msg("%s: %s", pattern, err.what);
    lt_regex_scratch *rs = lt_regex_scratch_new(re);
    assert_non_null(rs);
    pieces p = {0};
    regex_pieces(re, rs, (const unsigned char *)text, strlen(text), &p);
    char got[512] = "";
    for (size_t i = 0; i < p.n; i++) {
        size_t at = strlen(got);
        snprintf(got + at, sizeof got - at, "%s%.*s", i ? "|" : "", (int)(p.end[i] - p.start[i]),
                 text + p.start[i]);
    }
    if (strcmp(got, want) != 0) fail_msg("pattern %s: got '%s', want '%s'", pattern, got, want);
    pieces_free(&p);
    lt_regex_scratch_free(rs);
    lt_regex_free(re);
}

static void test_regex_white_space(void **state) {
    (void)state;
    /* U+0085 and U+00A0 are White_Space, U+001C and U+200B are not */
    expect_regex_split("\\s+", "a\xc2\x85\xc2\xa0" "b\x1c" "c\xe2\x80\x8b" "d \t",
                       "\xc2\x85\xc2\xa0| \t");
    expect_regex_split("\\S+", "a\xc2\x85\xc2\xa0" "b\x1c" "c\xe2\x80\x8b" "d \t",
                       "a|b\x1c" "c\xe2\x80\x8b" "d");
    expect_regex_split("[\\s]+", "x\xe3\x80\x80\xe2\x80\xa8y", "\xe3\x80\x80\xe2\x80\xa8");
    expect_regex_split("[^\\s\\p{L}]+", "ab\x1c!\xe1\xa0\x8e cd", "\x1c!\xe1\xa0\x8e");
    expect_regex_split("\\\\s", "a\\sb s", "\\s");          /* an escaped backslash, then s */
    expect_regex_split("\\Q\\s\\E", "x\\s y", "\\s");       /* quoted: literal */
    expect_regex_split("[]\\s]+", "a] b", "] ");             /* ] first in a class is literal */
    expect_regex_split("[[:alpha:]\\s]+", "ab c1", "ab c");
}

static void test_regex_errors(void **state) {
    (void)state;
    lt_regex *re = (lt_regex *)1;
    lt_error err;
    assert_int_equal(lt_regex_compile(&re, "a[\\S]", &err), LT_ERR_CONFIG);
    assert_null(re);
    assert_non_null(strstr(err.what, "\\S inside [...] at offset 2"));
    assert_true(err.hint[0] != '\0');

    assert_int_equal(lt_regex_compile(&re, "\\s(", &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "PCRE2 rejects"));
    assert_non_null(strstr(err.what, "offset 3"));
    assert_non_null(strstr(err.what, "missing closing parenthesis"));
    /* offsets are in the pattern as written, not in its White_Space expansion */
    assert_int_equal(lt_regex_compile(&re, "\\s\\s[z-a]", &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "offset 7"));
}

static void test_regex_semantics(void **state) {
    (void)state;
    /* $ is the end of the text only (no match before a final newline), as in Rust */
    expect_regex_split("a$", "a\n", "");
    expect_regex_split("a$", "ba", "a");
    /* empty matches are skipped; a search after one starts a character later */
    expect_regex_split("x*", "abxxc\xc3\xa9x", "xx|x");
    expect_regex_split("a*|b", "b", "");
    /* lookahead, lookbehind, case-insensitive U+017F */
    expect_regex_split("\\s+(?!\\S)|\\s+", "a   b", "  | ");
    expect_regex_split("(?<=a)b", "abcb", "b");
    expect_regex_split("(?i:'s)", "'s'S'\xc5\xbf", "'s|'S|'\xc5\xbf");
    /* a search from a later position still sees what precedes it */
    lt_regex *re;
    lt_error err;
    assert_int_equal(lt_regex_compile(&re, "(?<=x)y+", &err), LT_OK);
    lt_regex_scratch *rs = lt_regex_scratch_new(re);
    assert_non_null(rs);
    bool found;
    size_t s, e;
    const unsigned char *xyy = (const unsigned char *)"xyy";
    assert_int_equal(lt_regex_next(re, rs, xyy, 3, 1, &found, &s, &e, &err), LT_OK);
    assert_true(found);
    assert_int_equal(s, 1);
    assert_int_equal(e, 3);
    assert_int_equal(lt_regex_next(re, rs, xyy, 3, 3, &found, &s, &e, &err), LT_OK);
    assert_false(found);
    lt_regex_scratch_free(rs);
    lt_regex_free(re);
    lt_regex_free(NULL);
    lt_regex_scratch_free(NULL);
}

/* Catastrophic backtracking hits PCRE2's match limit: LT_ERR_INPUT naming the offset. */
static void test_regex_match_limit(void **state) {
    (void)state;
    lt_regex *re;
    lt_error err;
    assert_int_equal(lt_regex_compile(&re, "(?:a|aa)+$", &err), LT_OK);
    lt_regex_scratch *rs = lt_regex_scratch_new(re);
    assert_non_null(rs);
    char text[200];
    memset(text, 'a', sizeof text);
    text[sizeof text - 1] = 'b';
    bool found;
    size_t s, e;
    lt_status st = lt_regex_next(re, rs, (const unsigned char *)text, sizeof text, 0, &found, &s,
                                 &e, &err);
    assert_int_equal(st, LT_ERR_INPUT);
    assert_false(found);
    assert_string_equal(err.where, "byte 0");
    assert_non_null(strstr(err.what, "PCRE2 gave up"));
    lt_regex_scratch_free(rs);
    lt_regex_free(re);
}

/* ================================================================ reference mode */

static int hex_digit(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int split_mode(const char *kind_name, bool pcre2) {
    int k = 0;
    while (k < 3 && strcmp(kind_name, KIND_NAMES[k]) != 0) k++;
    if (k == 3) {
        fprintf(stderr, "test_pretok: unknown kind '%s' (cl100k, o200k, r50k)\n", kind_name);
        return 2;
    }
    lt_regex *re = NULL;
    lt_regex_scratch *rs = NULL;
    lt_error err;
    if (pcre2) {
        if (lt_regex_compile(&re, lt_pretok_pattern(KINDS[k]), &err) != LT_OK ||
            (rs = lt_regex_scratch_new(re)) == NULL) {
            fprintf(stderr, "test_pretok: cannot compile the %s pattern\n", kind_name);
            return 1;
        }
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        size_t len = (size_t)n / 2;
        unsigned char *t = malloc(len + 1);
        if (t == NULL) return 1;
        for (size_t i = 0; i < len; i++) {
            int hi = hex_digit(line[2 * i]), lo = hex_digit(line[2 * i + 1]);
            if (hi < 0 || lo < 0) {
                fprintf(stderr, "test_pretok: input line is not hex\n");
                free(t);
                free(line);
                return 2;
            }
            t[i] = (unsigned char)(hi << 4 | lo);
        }
        if (!lt_utf8_valid((const char *)t, len)) {
            fprintf(stderr, "test_pretok: input text is not UTF-8\n");
            rc = 2;
        }
        bool first = true;
        for (size_t pos = 0; rc == 0 && pos < len;) {
            size_t s = pos, e;
            if (pcre2) {
                bool found;
                if (lt_regex_next(re, rs, t, len, pos, &found, &s, &e, &err) != LT_OK) {
                    fprintf(stderr, "test_pretok: %s (%s)\n", err.what, err.where);
                    rc = 1;
                    break;
                }
                if (!found) break;
            } else {
                e = scan_next(KINDS[k], t, len, pos);
            }
            printf("%s", first ? "" : " ");
            first = false;
            for (size_t i = s; i < e; i++) printf("%02x", t[i]);
            pos = e;
        }
        printf("\n");
        free(t);
        if (rc != 0) break;
    }
    free(line);
    lt_regex_scratch_free(rs);
    lt_regex_free(re);
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 3 && argc <= 4 && strcmp(argv[1], "--split") == 0 &&
        (argc == 3 || strcmp(argv[3], "--pcre2") == 0))
        return split_mode(argv[2], argc == 4);
    if (argc >= 2) {
        fprintf(stderr, "usage: %s [--split cl100k|o200k|r50k [--pcre2]]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_patterns),
        cmocka_unit_test(test_patterns_match_sidecars),
        cmocka_unit_test(test_golden_cl100k),
        cmocka_unit_test(test_golden_o200k),
        cmocka_unit_test(test_golden_r50k),
        cmocka_unit_test(test_long_runs),
        cmocka_unit_test(test_random_differential),
        cmocka_unit_test(test_scanners_stay_in_bounds),
        cmocka_unit_test(test_regex_white_space),
        cmocka_unit_test(test_regex_errors),
        cmocka_unit_test(test_regex_semantics),
        cmocka_unit_test(test_regex_match_limit),
    };
    return cmocka_run_group_tests(tests, setup_known, teardown_known);
}
