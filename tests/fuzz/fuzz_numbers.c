/*
 * tests/fuzz/fuzz_numbers.c — libFuzzer target for the strict value parsers and string
 * helpers of lib/strutil.h.
 *
 * The input is arbitrary bytes; the text is a NUL-terminated copy (it ends at the first
 * NUL). The same text goes to every parser. What is checked (abort() on a violation):
 *   - no crash, leak, UB or exit;
 *   - every parser and its _why variant agree; a refusal returns LT_ERR_INPUT and leaves
 *     *out unchanged; `why` is NULL exactly when the text is not of the documented form;
 *   - lt_parse_int64 against an independent reference (form check + strtoll): the same
 *     verdict and value; accepted values print with %lld and parse back equal;
 *   - lt_parse_size against an exact reference (form check + 128-bit arithmetic:
 *     INT * 2^shift + FRAC * 2^shift / 10^f, whole and <= INT64_MAX): the same verdict,
 *     value and reason ("too large", "not a whole number"); the one documented-by-code
 *     limit is that more than 18 significant decimal places are refused ("too many
 *     decimal places"); accepted values print with lt_format_size and parse back equal;
 *   - lt_parse_double against the form check + strtod: finite values only, underflow of
 *     a nonzero literal refused; accepted values print with %.17g and parse back equal;
 *   - lt_parse_bool against the eight words in any ASCII case;
 *   - lt_format_size for the first 8 input bytes as a uint64: lt_parse_size reads it back
 *     (or refuses it as "too large" above INT64_MAX); a short buffer gets a NUL-terminated
 *     prefix;
 *   - lt_trim / lt_is_blank; lt_edit_distance against an independent full-matrix
 *     optimal-string-alignment distance, on the two halves of the text (<= 300 bytes each).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h"
#include "lib/strutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *text, const char *extra) {
    fprintf(stderr, "fuzz_numbers: property violated: %s\n", what);
    if (text != NULL) fprintf(stderr, "  text: '%s'\n", text);
    if (extra != NULL) fprintf(stderr, "  %s\n", extra);
    abort();
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool why_is(const char *why, const char *want) {
    if (want == NULL) return why == NULL;
    return why != NULL && strcmp(why, want) == 0;
}

/* ------------------------------------------------------------------ int64 */

static void check_int64(const char *text) {
    const char *p = text;
    if (*p == '+' || *p == '-') p++;
    bool form = is_digit(*p);
    while (is_digit(*p)) p++;
    form = form && *p == '\0';

    int64_t v = 77, w = 77;
    const char *why = "unset";
    lt_status st = lt_parse_int64(text, &v);
    lt_status st2 = lt_parse_int64_why(text, &w, &why);
    if (st != st2 || v != w) fail("lt_parse_int64 and _why differ", text, NULL);
    if (st != LT_OK && st != LT_ERR_INPUT) fail("lt_parse_int64: unexpected status", text, NULL);

    if (!form) {
        if (st == LT_OK) fail("lt_parse_int64 accepted a text not of the form [+-]DIGITS", text, NULL);
        if (why != NULL) fail("lt_parse_int64: why set for a text of the wrong form", text, why);
        if (v != 77) fail("lt_parse_int64 changed *out on error", text, NULL);
        return;
    }
    errno = 0;
    char *end;
    long long ref = strtoll(text, &end, 10);
    bool range = errno == ERANGE;
    if (*end != '\0') fail("harness: strtoll did not read the whole form", text, NULL);
    if (range) {
        if (st == LT_OK) fail("lt_parse_int64 accepted an out-of-range value", text, NULL);
        if (!why_is(why, "out of range")) fail("lt_parse_int64: wrong reason", text, why);
        if (v != 77) fail("lt_parse_int64 changed *out on error", text, NULL);
        return;
    }
    if (st != LT_OK) fail("lt_parse_int64 refused a valid integer", text, why);
    if (v != ref) fail("lt_parse_int64 value differs from strtoll", text, NULL);
    if (why != NULL) fail("lt_parse_int64: why set on success", text, why);
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    int64_t back;
    if (lt_parse_int64(buf, &back) != LT_OK || back != v) fail("int64 round trip", text, buf);
}

/* ------------------------------------------------------------------ size */

typedef enum {
    REF_FORM,
    REF_OK,
    REF_TOO_LARGE,
    REF_NOT_WHOLE,
    REF_NOT_WHOLE_AND_TOO_LARGE,
    REF_TOO_PRECISE,
} size_verdict;

/*
 * Exact reference: DIGITS[.DIGITS][KMGTkmgt]. With INT the integer part, FRAC the fraction
 * digits without trailing zeros (f of them) and s the suffix's shift, the value is
 * INT * 2^s + FRAC * 2^s / 10^f, a size when FRAC * 2^s is a multiple of 10^f and the
 * total is <= INT64_MAX. INT is kept saturated at 2^64 (anything that large is too large
 * whatever the fraction adds), so every product fits 128 bits.
 */
static size_verdict ref_size(const char *text, uint64_t *out) {
    const char *p = text;
    if (!is_digit(*p)) return REF_FORM;
    typedef unsigned __int128 u128;
    const u128 cap = (u128)1 << 64;
    u128 ip = 0;
    for (; is_digit(*p); p++) {
        ip = ip * 10 + (u128)(*p - '0');
        if (ip > cap) ip = cap;
    }
    const char *fb = p, *fe = p;
    if (*p == '.') {
        p++;
        fb = p;
        if (!is_digit(*p)) return REF_FORM;
        while (is_digit(*p)) p++;
        fe = p;
    }
    unsigned s = 0;
    switch (*p) {
    case '\0': break;
    case 'k': case 'K': s = 10; p++; break;
    case 'm': case 'M': s = 20; p++; break;
    case 'g': case 'G': s = 30; p++; break;
    case 't': case 'T': s = 40; p++; break;
    default: return REF_FORM;
    }
    if (*p != '\0') return REF_FORM;
    while (fe > fb && fe[-1] == '0') fe--;
    size_t f = (size_t)(fe - fb);
    if (f > 18) return REF_TOO_PRECISE; /* the library's limit; see the header comment */
    u128 frac = 0, den = 1;
    for (const char *q = fb; q < fe; q++) frac = frac * 10 + (u128)(*q - '0');
    for (size_t i = 0; i < f; i++) den *= 10;
    u128 scaled = frac << s; /* < 10^18 * 2^40 < 2^100 */
    u128 total = (ip << s) + scaled / den; /* ip <= 2^64: < 2^105 */
    bool whole = scaled % den == 0, large = total > (u128)INT64_MAX;
    if (!whole && large) return REF_NOT_WHOLE_AND_TOO_LARGE; /* either reason is right */
    if (!whole) return REF_NOT_WHOLE;
    if (large) return REF_TOO_LARGE;
    *out = (uint64_t)total;
    return REF_OK;
}

static void check_size(const char *text) {
    uint64_t v = 77, w = 77, ref = 0;
    const char *why = "unset";
    lt_status st = lt_parse_size(text, &v);
    lt_status st2 = lt_parse_size_why(text, &w, &why);
    if (st != st2 || v != w) fail("lt_parse_size and _why differ", text, NULL);
    if (st != LT_OK && st != LT_ERR_INPUT) fail("lt_parse_size: unexpected status", text, NULL);
    if (st != LT_OK && v != 77) fail("lt_parse_size changed *out on error", text, NULL);

    size_verdict verdict = ref_size(text, &ref);
    switch (verdict) {
    case REF_FORM:
        if (st == LT_OK) fail("lt_parse_size accepted a text not of the size form", text, NULL);
        if (why != NULL) fail("lt_parse_size: why set for a text of the wrong form", text, why);
        return;
    case REF_TOO_PRECISE:
        if (st == LT_OK || !why_is(why, "too many decimal places"))
            fail("lt_parse_size: more than 18 decimal places not refused as such", text, why);
        return;
    case REF_NOT_WHOLE:
        if (st == LT_OK || !why_is(why, "not a whole number"))
            fail("lt_parse_size: a fraction that is not whole not refused as such", text, why);
        return;
    case REF_NOT_WHOLE_AND_TOO_LARGE:
        if (st == LT_OK || !(why_is(why, "not a whole number") || why_is(why, "too large")))
            fail("lt_parse_size: a too large non-whole value not refused as either", text, why);
        return;
    case REF_TOO_LARGE:
        if (st == LT_OK || !why_is(why, "too large"))
            fail("lt_parse_size: a value above INT64_MAX not refused as too large", text, why);
        return;
    case REF_OK: break;
    }
    if (st != LT_OK) fail("lt_parse_size refused a valid size", text, why);
    if (v != ref) {
        char msg[80];
        snprintf(msg, sizeof msg, "got %llu, want %llu", (unsigned long long)v, (unsigned long long)ref);
        fail("lt_parse_size value differs from the exact reference", text, msg);
    }
    if (why != NULL) fail("lt_parse_size: why set on success", text, why);
    char buf[21];
    lt_format_size(v, buf, sizeof buf);
    uint64_t back;
    if (lt_parse_size(buf, &back) != LT_OK || back != v) fail("lt_format_size -> lt_parse_size round trip", text, buf);
}

static void check_format_size(const uint8_t *data, size_t size) {
    if (size < 8) return;
    uint64_t v;
    memcpy(&v, data, 8);
    char buf[21];
    lt_format_size(v, buf, sizeof buf);
    if (memchr(buf, '\0', sizeof buf) == NULL) fail("lt_format_size: no NUL in 21 bytes", NULL, NULL);
    uint64_t back = 5;
    const char *why = NULL;
    lt_status st = lt_parse_size_why(buf, &back, &why);
    if (v <= LT_SIZE_MAX) {
        if (st != LT_OK || back != v) fail("lt_format_size output does not parse back", buf, why);
    } else if (st == LT_OK || !why_is(why, "too large")) {
        fail("a formatted size above INT64_MAX not refused as too large", buf, why);
    }
    /* a short buffer: a NUL-terminated prefix */
    size_t cap = 1 + (size > 8 ? data[8] % 21 : 0);
    char small[21];
    memset(small, 'x', sizeof small);
    if (lt_format_size(v, small, cap) != small) fail("lt_format_size does not return buf", NULL, NULL);
    size_t n = strnlen(small, cap);
    if (n >= cap || strncmp(small, buf, n) != 0) fail("lt_format_size with a short buffer", buf, NULL);
    if (lt_format_size(v, NULL, 10) != NULL) fail("lt_format_size(NULL) not NULL", NULL, NULL);
}

/* ------------------------------------------------------------------ double */

static void check_double(const char *text) {
    const char *p = text;
    if (*p == '+' || *p == '-') p++;
    size_t digits = 0;
    bool nonzero = false;
    for (; is_digit(*p); p++, digits++) nonzero |= *p != '0';
    if (*p == '.')
        for (p++; is_digit(*p); p++, digits++) nonzero |= *p != '0';
    bool form = digits > 0;
    if (form && (*p == 'e' || *p == 'E')) {
        p++;
        if (*p == '+' || *p == '-') p++;
        form = is_digit(*p);
        while (is_digit(*p)) p++;
    }
    form = form && *p == '\0';

    double v = 77.0, w = 77.0;
    const char *why = "unset";
    lt_status st = lt_parse_double(text, &v);
    lt_status st2 = lt_parse_double_why(text, &w, &why);
    if (st != st2 || memcmp(&v, &w, sizeof v) != 0) fail("lt_parse_double and _why differ", text, NULL);
    if (st != LT_OK && st != LT_ERR_INPUT) fail("lt_parse_double: unexpected status", text, NULL);
    if (st != LT_OK && v != 77.0) fail("lt_parse_double changed *out on error", text, NULL);
    if (!form) {
        if (st == LT_OK) fail("lt_parse_double accepted a text not of the decimal form", text, NULL);
        if (why != NULL) fail("lt_parse_double: why set for a text of the wrong form", text, why);
        return;
    }
    double ref = strtod(text, NULL);
    if (!isfinite(ref) || (ref == 0.0 && nonzero)) {
        if (st == LT_OK || !why_is(why, "out of range"))
            fail("lt_parse_double: overflow/underflow not refused as out of range", text, why);
        return;
    }
    if (st != LT_OK) fail("lt_parse_double refused a valid number", text, why);
    if (memcmp(&v, &ref, sizeof v) != 0) fail("lt_parse_double value differs from strtod", text, NULL);
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", v);
    double back;
    if (lt_parse_double(buf, &back) != LT_OK || memcmp(&back, &v, sizeof v) != 0)
        fail("double round trip through %.17g", text, buf);
}

/* ------------------------------------------------------------------ bool */

static void check_bool(const char *text) {
    static const char *const t[] = {"true", "yes", "on", "1"};
    static const char *const f[] = {"false", "no", "off", "0"};
    int want = -1;
    for (int k = 0; k < 4; k++) {
        size_t nt = strlen(t[k]), nf = strlen(f[k]);
        bool mt = strlen(text) == nt, mf = strlen(text) == nf;
        for (size_t i = 0; mt && i < nt; i++) mt = (text[i] | (text[i] >= 'A' && text[i] <= 'Z' ? 0x20 : 0)) == t[k][i];
        for (size_t i = 0; mf && i < nf; i++) mf = (text[i] | (text[i] >= 'A' && text[i] <= 'Z' ? 0x20 : 0)) == f[k][i];
        if (mt) want = 1;
        if (mf) want = 0;
    }
    bool b = true, b0 = true;
    lt_status st = lt_parse_bool(text, &b);
    if (want < 0) {
        if (st != LT_ERR_INPUT || b != b0) fail("lt_parse_bool accepted a non-boolean", text, NULL);
    } else if (st != LT_OK || b != (want == 1)) {
        fail("lt_parse_bool refused or misread a boolean", text, NULL);
    }
}

/* ------------------------------------------------------------------ trim, edit distance */

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

static void check_trim(const char *text) {
    char *copy = strdup(text);
    if (copy == NULL) return;
    char *t = lt_trim(copy);
    size_t n = strlen(t);
    if (t < copy || t > copy + strlen(text)) fail("lt_trim returned a pointer outside the string", text, NULL);
    if (n > 0 && (blank(t[0]) || blank(t[n - 1]))) fail("lt_trim left a blank at an end", text, NULL);
    if (strstr(text, t) == NULL) fail("lt_trim result is not a substring", text, NULL);
    if (lt_is_blank(text) != (n == 0)) fail("lt_is_blank disagrees with lt_trim", text, NULL);
    free(copy);
    if (lt_trim(NULL) != NULL || !lt_is_blank(NULL)) fail("NULL handling of lt_trim/lt_is_blank", NULL, NULL);
}

/* Optimal string alignment distance with a full matrix (independent of lib/strutil.c). */
static size_t ref_osa(const char *a, size_t na, const char *b, size_t nb) {
    size_t cols = nb + 1;
    size_t *d = malloc((na + 1) * cols * sizeof *d);
    if (d == NULL) abort();
#define D(i, j) d[(i) * cols + (j)]
    for (size_t i = 0; i <= na; i++) D(i, 0) = i;
    for (size_t j = 0; j <= nb; j++) D(0, j) = j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            size_t best = D(i - 1, j) + 1;
            if (D(i, j - 1) + 1 < best) best = D(i, j - 1) + 1;
            size_t sub = D(i - 1, j - 1) + (a[i - 1] != b[j - 1]);
            if (sub < best) best = sub;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && D(i - 2, j - 2) + 1 < best)
                best = D(i - 2, j - 2) + 1;
            D(i, j) = best;
        }
    size_t r = D(na, nb);
#undef D
    free(d);
    return r;
}

static void check_edit_distance(const char *text) {
    size_t n = strlen(text);
    if (n > 600) n = 600;
    size_t na = n / 2, nb = n - na;
    char *a = strndup(text, na), *b = strndup(text + na, nb);
    if (a == NULL || b == NULL) abort();
    size_t d = lt_edit_distance(a, b);
    if (d != ref_osa(a, na, b, nb)) fail("lt_edit_distance differs from the reference", a, b);
    if (lt_edit_distance(b, a) != d) fail("lt_edit_distance is not symmetric", a, b);
    if (lt_edit_distance(a, a) != 0) fail("lt_edit_distance(a, a) != 0", a, NULL);
    if ((d == 0) != (strcmp(a, b) == 0)) fail("lt_edit_distance zero iff equal", a, b);
    if (lt_edit_distance(NULL, b) != nb || lt_edit_distance(a, NULL) != na) fail("edit distance with NULL", a, b);
    /* lt_is_close_match: never the whole word, at most 3 */
    if (lt_is_close_match(a, b, d) && (d > 3 || d >= nb)) fail("lt_is_close_match too loose", a, b);
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    if (text == NULL) return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    check_int64(text);
    check_size(text);
    check_double(text);
    check_bool(text);
    check_format_size(data, size);
    check_trim(text);
    check_edit_distance(text);

    free(text);
    return 0;
}
