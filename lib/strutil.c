/*
 * lib/strutil.c — trimming, edit distance and the strict value parsers (see strutil.h).
 *
 * The parsers are written by hand rather than on strtoll/strtod so that the accepted
 * forms are exactly the documented ones on every libc and in every locale: no leading
 * blanks, no "0x", no "inf", no locale decimal comma, and overflow detected before it
 * happens.
 */
#include "lib/strutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ASCII only, independent of the locale (isspace would follow LC_CTYPE). */
bool lt_is_blank_char(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static char to_lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c; }

/* ASCII case-insensitive equality (strcasecmp follows the locale). */
static bool equal_ignoring_case(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (to_lower(*a) != to_lower(*b)) return false;
    return *a == *b;
}

char *lt_trim(char *s) {
    if (s == NULL) return NULL;
    while (lt_is_blank_char(*s)) s++;
    size_t n = strlen(s);
    while (n > 0 && lt_is_blank_char(s[n - 1])) n--;
    s[n] = '\0';
    return s;
}

bool lt_is_blank(const char *s) {
    if (s == NULL) return true;
    for (; *s; s++)
        if (!lt_is_blank_char(*s)) return false;
    return true;
}

static size_t min3(size_t a, size_t b, size_t c) {
    size_t m = a < b ? a : b;
    return m < c ? m : c;
}

size_t lt_edit_distance(const char *a, const char *b) {
    if (a == NULL) a = "";
    if (b == NULL) b = "";
    size_t na = strlen(a), nb = strlen(b);
    if (na == 0) return nb;
    if (nb == 0) return na;

    /* Three rows of the dynamic-programming table: i-2, i-1 and i (the transposition
     * step looks two rows back). Small pairs (every config name) use the stack. */
    enum { STACK_COLS = 128 };
    size_t stack_rows[3 * STACK_COLS];
    size_t *rows = stack_rows;
    if (nb + 1 > STACK_COLS) {
        if (nb + 1 > SIZE_MAX / (3 * sizeof(size_t))) return SIZE_MAX;
        rows = malloc(3 * (nb + 1) * sizeof(size_t));
        if (rows == NULL) return SIZE_MAX;
    }
    size_t *prev2 = rows, *prev = rows + (nb + 1), *cur = rows + 2 * (nb + 1);

    for (size_t j = 0; j <= nb; j++) prev[j] = j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t d = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                prev2[j - 2] + 1 < d)
                d = prev2[j - 2] + 1;
            cur[j] = d;
        }
        size_t *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    size_t result = prev[nb];
    if (rows != stack_rows) free(rows);
    return result;
}

bool lt_is_close_match(const char *typed, const char *candidate, size_t dist) {
    size_t nt = typed ? strlen(typed) : 0, nc = candidate ? strlen(candidate) : 0;
    size_t limit = 1 + nt / 4;
    if (limit > 3) limit = 3;
    return dist <= limit && dist < nc;
}

/* Accumulate decimal digits into *acc; false on overflow past `max`. */
static bool add_digit(uint64_t *acc, char c, uint64_t max) {
    uint64_t d = (uint64_t)(c - '0');
    if (*acc > (max - d) / 10) return false;
    *acc = *acc * 10 + d;
    return true;
}

lt_status lt_parse_int64_why(const char *text, int64_t *out, const char **why) {
    if (why) *why = NULL;
    if (text == NULL) return LT_ERR_INPUT;
    const char *p = text;
    bool neg = false;
    if (*p == '+' || *p == '-') neg = (*p++ == '-');
    if (!is_digit(*p)) return LT_ERR_INPUT;
    /* the magnitude of INT64_MIN is INT64_MAX + 1 */
    uint64_t max = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t mag = 0;
    bool range_ok = true;
    for (; is_digit(*p); p++)
        if (range_ok && !add_digit(&mag, *p, max)) range_ok = false;
    if (*p != '\0') return LT_ERR_INPUT;
    if (!range_ok) {
        if (why) *why = "out of range";
        return LT_ERR_INPUT;
    }
    if (neg)
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    else
        *out = (int64_t)mag;
    return LT_OK;
}

lt_status lt_parse_int64(const char *text, int64_t *out) {
    return lt_parse_int64_why(text, out, NULL);
}

lt_status lt_parse_size_why(const char *text, uint64_t *out, const char **why) {
    if (why) *why = NULL;
    if (text == NULL) return LT_ERR_INPUT;
    const char *p = text;
    if (!is_digit(*p)) return LT_ERR_INPUT;
    const char *int_begin = p;
    while (is_digit(*p)) p++;
    const char *int_end = p;
    const char *frac_begin = p, *frac_end = p;
    if (*p == '.') {
        p++;
        frac_begin = p;
        if (!is_digit(*p)) return LT_ERR_INPUT;
        while (is_digit(*p)) p++;
        frac_end = p;
    }
    unsigned shift = 0;
    switch (to_lower(*p)) {
    case '\0': break;
    case 'k': shift = 10; p++; break;
    case 'm': shift = 20; p++; break;
    case 'g': shift = 30; p++; break;
    case 't': shift = 40; p++; break;
    default: return LT_ERR_INPUT;
    }
    if (*p != '\0') return LT_ERR_INPUT;

    /* Exact arithmetic, integer and fraction apart: value = INT * 2^shift + FRAC * 2^shift
     * / 10^f, where FRAC is the fraction's digits as an integer and f their count after
     * dropping trailing zeros (1.50G == 1.5G). */
    while (frac_end > frac_begin && frac_end[-1] == '0') frac_end--;
    size_t f = (size_t)(frac_end - frac_begin);
    if (f > 18) { /* FRAC < 10^18 keeps the fraction arithmetic in 64 bits */
        if (why) *why = "too many decimal places";
        return LT_ERR_INPUT;
    }
    uint64_t ip = 0, frac = 0;
    bool ip_fits = true;
    for (const char *q = int_begin; q < int_end; q++)
        if (ip_fits && !add_digit(&ip, *q, LT_SIZE_MAX)) ip_fits = false;
    for (const char *q = frac_begin; q < frac_end; q++) (void)add_digit(&frac, *q, UINT64_MAX);
    uint64_t den = 1;
    for (size_t i = 0; i < f; i++) den *= 10;
    /* Divide the common factors of two out of 2^shift / 10^f: what is left of den is odd
     * while shift > 0, so the fraction part is whole exactly when den divides FRAC. */
    unsigned s_left = shift;
    while (s_left > 0 && den % 2 == 0) {
        den /= 2;
        s_left--;
    }
    if (frac % den != 0) {
        if (why) *why = "not a whole number";
        return LT_ERR_INPUT;
    }
    uint64_t part = (frac / den) << s_left; /* < 2^shift: FRAC / den < 2^(shift - s_left) */
    if (!ip_fits || (shift > 0 && ip > (LT_SIZE_MAX >> shift))) goto too_large;
    uint64_t whole = ip << shift;
    if (part > LT_SIZE_MAX - whole) goto too_large;
    *out = whole + part;
    return LT_OK;

too_large:
    if (why) *why = "too large";
    return LT_ERR_INPUT;
}

lt_status lt_parse_size(const char *text, uint64_t *out) {
    return lt_parse_size_why(text, out, NULL);
}

lt_status lt_parse_double_why(const char *text, double *out, const char **why) {
    if (why) *why = NULL;
    if (text == NULL) return LT_ERR_INPUT;
    const char *p = text;
    if (*p == '+' || *p == '-') p++;
    size_t mantissa_digits = 0;
    bool nonzero = false;
    while (is_digit(*p)) {
        nonzero |= *p != '0';
        p++;
        mantissa_digits++;
    }
    if (*p == '.') {
        p++;
        while (is_digit(*p)) {
            nonzero |= *p != '0';
            p++;
            mantissa_digits++;
        }
    }
    if (mantissa_digits == 0) return LT_ERR_INPUT;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!is_digit(*p)) return LT_ERR_INPUT;
        while (is_digit(*p)) p++;
    }
    if (*p != '\0') return LT_ERR_INPUT;

    /* The form is plain decimal, which strtod reads the same in the C locale; a locale
     * with a decimal comma would stop at '.', caught by the end check. */
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == NULL || *end != '\0') return LT_ERR_INPUT;
    /* overflow gives +-HUGE_VAL; underflow of a nonzero literal to zero loses it (a
     * subnormal result is still a value and is kept) */
    if (!isfinite(v) || (v == 0.0 && nonzero)) {
        if (why) *why = "out of range";
        return LT_ERR_INPUT;
    }
    *out = v;
    return LT_OK;
}

lt_status lt_parse_double(const char *text, double *out) {
    return lt_parse_double_why(text, out, NULL);
}

lt_status lt_parse_bool(const char *text, bool *out) {
    static const struct {
        const char *word;
        bool value;
    } words[] = {
        {"true", true}, {"yes", true}, {"on", true},  {"1", true},
        {"false", false}, {"no", false}, {"off", false}, {"0", false},
    };
    if (text == NULL) return LT_ERR_INPUT;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (equal_ignoring_case(text, words[i].word)) {
            *out = words[i].value;
            return LT_OK;
        }
    }
    return LT_ERR_INPUT;
}

char *lt_format_size(uint64_t value, char *buf, size_t cap) {
    static const char suffixes[] = "KMGT";
    if (buf == NULL || cap == 0) return buf;
    int level = 0;
    uint64_t v = value;
    while (level < 4 && v != 0 && v % 1024 == 0) {
        v /= 1024;
        level++;
    }
    if (level == 0)
        snprintf(buf, cap, "%llu", (unsigned long long)v);
    else
        snprintf(buf, cap, "%llu%c", (unsigned long long)v, suffixes[level - 1]);
    return buf;
}
