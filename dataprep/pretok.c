/*
 * dataprep/pretok.c — pre-tokenization (dataprep/pretok.h): hand-written scanners for the
 * cl100k_base, o200k_base and r50k_base patterns, and the generic PCRE2 engine.
 *
 * The scanners give, at each position, the match that tiktoken's regex (leftmost-first
 * alternation with backtracking semantics) gives there. Each alternative's backtracking is
 * resolved by hand below; every alternative is decided by the first one or two characters
 * except the letter alternatives of o200k, which one scan of the run settles. Invariants:
 *   - every position is the start of a match (each character is a letter, a number,
 *     white space or "other", and each of these starts some alternative), so the pieces
 *     of a text are contiguous and the scanner returns only the end;
 *   - a call reads the piece it returns plus at most the rest of the same character run,
 *     which the next call consumes, so a text is scanned in linear time whatever its
 *     runs (1 MiB of spaces, letters, digits, marks, ... included);
 *   - nothing is allocated; ASCII takes the 128-entry class table, the rest the two-stage
 *     table of dataprep/unicode.h (Unicode 16.0, as tiktoken's regex crate).
 *
 * The generic engine compiles any pattern with PCRE2 (UTF + UCP; JIT when available).
 * PCRE2 10.42 follows Unicode 14 for \p{..}, so on that path the classes of the letters,
 * marks and numbers added in Unicode 15 and 16 are PCRE2's, not tiktoken's; `\s` and `\S`
 * are rewritten to the White_Space list, which has not changed since Unicode 6.3.
 */
#include "dataprep/pretok.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "dataprep/unicode.h" /* lt_uc_class, lt_uc_ascii, LT_UC_* */

/* ------------------------------------------------------------------ the known patterns */

/* As the pat_str of ../shared/vocab/{cl100k,o200k,r50k}_base.json spell them. */
static const char CL100K_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char O200K_PATTERN[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char R50K_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

lt_pretok_kind lt_pretok_recognize(const char *pattern) {
    if (pattern == NULL) return LT_PRETOK_REGEX;
    if (strcmp(pattern, CL100K_PATTERN) == 0) return LT_PRETOK_CL100K;
    if (strcmp(pattern, O200K_PATTERN) == 0) return LT_PRETOK_O200K;
    if (strcmp(pattern, R50K_PATTERN) == 0) return LT_PRETOK_R50K;
    return LT_PRETOK_REGEX;
}

const char *lt_pretok_pattern(lt_pretok_kind kind) {
    switch (kind) {
    case LT_PRETOK_CL100K: return CL100K_PATTERN;
    case LT_PRETOK_O200K: return O200K_PATTERN;
    case LT_PRETOK_R50K: return R50K_PATTERN;
    case LT_PRETOK_REGEX: break;
    }
    return NULL;
}

/* ------------------------------------------------------------------ scanner helpers */

/* A character that is none of \p{L}, \p{N}, \s: [^\s\p{L}\p{N}] (marks included). */
#define OTHER_MASK (LT_UC_L | LT_UC_N | LT_UC_WS)

/*
 * Decode the character at t[*pos] (pos < len) and move *pos past it. The input is valid
 * UTF-8; should it not be, the result is some code point (class 0 when out of range) and
 * *pos still advances by 1..4 bytes without passing len, so the scanners stay in bounds.
 */
static inline uint32_t next_char(const unsigned char *t, size_t len, size_t *pos) {
    size_t p = *pos;
    uint32_t b = t[p];
    if (b < 0x80) {
        *pos = p + 1;
        return b;
    }
    size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    if (n > len - p) { /* truncated: not UTF-8 */
        *pos = p + 1;
        return 0xFFFFFFFFu;
    }
    *pos = p + n;
    if (n == 2) return ((b & 0x1Fu) << 6) | (t[p + 1] & 0x3Fu);
    if (n == 3) return ((b & 0x0Fu) << 12) | ((t[p + 1] & 0x3Fu) << 6) | (t[p + 2] & 0x3Fu);
    return ((b & 0x07u) << 18) | ((t[p + 1] & 0x3Fu) << 12) | ((t[p + 2] & 0x3Fu) << 6) |
           (t[p + 3] & 0x3Fu);
}

/* The end of the maximal run from pos of characters whose class has a bit of `mask`. */
static inline size_t run_any(const unsigned char *t, size_t len, size_t pos, uint8_t mask) {
    while (pos < len) {
        if (t[pos] < 0x80) {
            if (!(lt_uc_ascii[t[pos]] & mask)) break;
            pos++;
            continue;
        }
        size_t next = pos;
        if (!(lt_uc_class(next_char(t, len, &next)) & mask)) break;
        pos = next;
    }
    return pos;
}

/* The end of the maximal run from pos of characters whose class has no bit of `mask`. */
static inline size_t run_none(const unsigned char *t, size_t len, size_t pos, uint8_t mask) {
    while (pos < len) {
        if (t[pos] < 0x80) {
            if (lt_uc_ascii[t[pos]] & mask) break;
            pos++;
            continue;
        }
        size_t next = pos;
        if (lt_uc_class(next_char(t, len, &next)) & mask) break;
        pos = next;
    }
    return pos;
}

/* \p{N}{1,3} from pos, whose character is known to be a number. */
static inline size_t numbers_upto3(const unsigned char *t, size_t len, size_t pos) {
    size_t end = pos;
    next_char(t, len, &end);
    for (int i = 1; i < 3 && end < len; i++) {
        size_t next = end;
        if (!(lt_uc_class(next_char(t, len, &next)) & LT_UC_N)) break;
        end = next;
    }
    return end;
}

/* [\r\n]* (and with `slash`, o200k's [\r\n/]*) from pos. */
static inline size_t newlines(const unsigned char *t, size_t len, size_t pos, bool slash) {
    while (pos < len && (t[pos] == '\r' || t[pos] == '\n' || (slash && t[pos] == '/'))) pos++;
    return pos;
}

/*
 * (?i:'s|'t|'re|'ve|'m|'ll|'d) at pos: its end, or 0. Under Unicode simple case folding
 * (Rust's regex and PCRE2 alike) the only non-ASCII letter equal to one of these is
 * U+017F LATIN SMALL LETTER LONG S (C5 BF), which matches 's' (U+212A KELVIN SIGN folds to
 * k, which is not used); tests/dataprep/unicode_reference.py checks this against tiktoken.
 */
static inline size_t contraction_icase(const unsigned char *t, size_t len, size_t pos) {
    if (len - pos < 2 || t[pos] != '\'') return 0;
    switch (t[pos + 1] | 0x20) { /* ASCII letters to lower case; no other byte becomes one */
    case 's': case 't': case 'm': case 'd': return pos + 2;
    case 'r': case 'v': return len - pos >= 3 && (t[pos + 2] | 0x20) == 'e' ? pos + 3 : 0;
    case 'l': return len - pos >= 3 && (t[pos + 2] | 0x20) == 'l' ? pos + 3 : 0;
    default: break;
    }
    if (t[pos + 1] == 0xC5 && len - pos >= 3 && t[pos + 2] == 0xBF) return pos + 3; /* 'ſ */
    return 0;
}

/* 's|'t|'re|'ve|'m|'ll|'d (r50k: case-sensitive) at pos: its end, or 0. */
static inline size_t contraction_exact(const unsigned char *t, size_t len, size_t pos) {
    if (len - pos < 2 || t[pos] != '\'') return 0;
    switch (t[pos + 1]) {
    case 's': case 't': case 'm': case 'd': return pos + 2;
    case 'r': case 'v': return len - pos >= 3 && t[pos + 2] == 'e' ? pos + 3 : 0;
    case 'l': return len - pos >= 3 && t[pos + 2] == 'l' ? pos + 3 : 0;
    default: return 0;
    }
}

/* An optional (?i:contraction) after end. */
static inline size_t with_contraction(const unsigned char *t, size_t len, size_t end) {
    size_t c = end < len ? contraction_icase(t, len, end) : 0;
    return c ? c : end;
}

/*
 * The white-space alternatives at pos, whose character is white space:
 *   \s*[\r\n]+   (cl100k, o200k: `newline_rule`) \s* takes the whole white-space run and
 *                gives back until [\r\n]+ can match: the match ends right after the LAST
 *                CR or LF of the run; it fails when the run has none;
 *   \s+(?!\S)    the run when it reaches the end of the text; else the run less its last
 *                character (which then is white space, so (?!\S) holds) when the run has
 *                at least 2 characters; else it fails;
 *   \s+          the single character left.
 */
static inline size_t whitespace(const unsigned char *t, size_t len, size_t pos, bool newline_rule) {
    size_t end = pos, last = pos, newline_end = 0;
    while (end < len) {
        size_t next = end;
        uint32_t c = next_char(t, len, &next);
        if (!(lt_uc_class(c) & LT_UC_WS)) break;
        if (c == '\r' || c == '\n') newline_end = next;
        last = end;
        end = next;
    }
    if (newline_rule && newline_end != 0) return newline_end;
    if (end == len || last == pos) return end;
    return last;
}

/* ------------------------------------------------------------------ cl100k_base */

/*
 * (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3} |
 *  ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 *
 * By the first character c0 (c1 the next one):
 *   letter            \p{L}+: the letter run (the optional prefix cannot take a letter);
 *   number            \p{N}{1,3};
 *   '                 a contraction when one follows (before everything else);
 *   any other but CR/LF, with c1 a letter: c0 + the letter run of c1 (tabs, NBSP, U+3000
 *                     and U+2028 prefix a word too; only CR and LF do not);
 *   other (not \s)    [^\s\p{L}\p{N}]+[\r\n]*: the run of others, then CR/LFs;
 *   space, c1 other   the same with the space in front ( ? takes only U+0020);
 *   white space       the white-space alternatives (whitespace()).
 */
size_t lt_pretok_next_cl100k(const unsigned char *text, size_t len, size_t pos) {
    if (pos >= len) return len; /* outside the contract; never read past the text */
    size_t n1 = pos;
    uint32_t c0 = next_char(text, len, &n1);
    uint8_t k0 = lt_uc_class(c0);
    if (k0 & LT_UC_L) return run_any(text, len, n1, LT_UC_L);
    if (k0 & LT_UC_N) return numbers_upto3(text, len, pos);
    if (c0 == '\'') {
        size_t end = contraction_icase(text, len, pos);
        if (end) return end;
    }
    if (c0 != '\r' && c0 != '\n' && n1 < len) {
        size_t n2 = n1;
        uint8_t k1 = lt_uc_class(next_char(text, len, &n2));
        if (k1 & LT_UC_L) return run_any(text, len, n2, LT_UC_L);
        if (!(k0 & LT_UC_WS))
            return newlines(text, len, run_none(text, len, n1, OTHER_MASK), false);
        if (c0 == ' ' && !(k1 & OTHER_MASK))
            return newlines(text, len, run_none(text, len, n2, OTHER_MASK), false);
        return whitespace(text, len, pos, true);
    }
    if (!(k0 & LT_UC_WS)) return newlines(text, len, n1, false); /* other, at the end */
    return whitespace(text, len, pos, true);
}

/* ------------------------------------------------------------------ o200k_base */

typedef struct letters_match {
    size_t first;  /* end of alternative 1 (before the contraction), 0 when it fails */
    size_t second; /* end of alternative 2 (before the contraction), 0 when it fails */
} letters_match;

/*
 * o200k's two letter alternatives with the optional prefix settled (they start at s):
 *   1: [UP]*[LO]+    2: [UP]+[LO]*
 * with UP = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], LO = [\p{Ll}\p{Lm}\p{Lo}\p{M}]; Lm, Lo and M
 * are in both ("both" below). Let [s, q) be the maximal UP run.
 *   1: UP* takes [s, q) and gives back one character at a time until [LO]+ matches:
 *      - the character at q is LO (it is then Ll): [LO]+ takes the LO run from q;
 *      - else the last "both" character b in [s, q): [LO]+ takes b alone (what follows b
 *        in the run is Lu/Lt, and q is not LO);
 *      - else it fails.
 *   2: (tried only when 1 failed, so [s, q) holds only Lu/Lt and q is not LO)
 *      [s, q) when it is not empty.
 */
static inline letters_match o200k_letters(const unsigned char *t, size_t len, size_t s) {
    letters_match m = {0, 0};
    size_t q = s, last_both_end = 0;
    uint8_t kq = 0;
    while (q < len) {
        size_t next = q;
        kq = lt_uc_class(next_char(t, len, &next));
        if (!(kq & LT_UC_UP)) break;
        if (kq & LT_UC_LO) last_both_end = next;
        q = next;
    }
    if (q < len && (kq & LT_UC_LO))
        m.first = run_any(t, len, q, LT_UC_LO);
    else if (last_both_end != 0)
        m.first = last_both_end;
    else if (q > s)
        m.second = q;
    return m;
}

/*
 * [^\r\n\p{L}\p{N}]?[UP]*[LO]+(?i:C)? | [^\r\n\p{L}\p{N}]?[UP]+[LO]*(?i:C)? | \p{N}{1,3} |
 *  ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 *
 * By the first character c0:
 *   letter            no prefix: alternative 1 or 2 from c0 (one of them matches);
 *   number            \p{N}{1,3};
 *   other than CR/LF  the prefix is tried consumed, then empty, for alternative 1, and
 *                     only then for alternative 2:
 *                       1 with prefix c0, from c1 (o200k_letters);
 *                       1 without prefix, from c0: matches only when c0 is a mark (a mark
 *                         is UP and LO as well as a prefix), and then [UP]* gives back
 *                         everything and [LO]+ takes c0 alone (c1 cannot be LO, else the
 *                         first try matched);
 *                       2 with prefix c0, from c1;
 *                       (2 without prefix cannot match: c0 is not UP once c0 is no mark);
 *   other (not \s)    [^\s\p{L}\p{N}]+[\r\n/]*;
 *   space, c1 other   the same with the space;
 *   white space       as cl100k (whitespace()).
 * The optional contraction follows the letters of alternatives 1 and 2.
 */
size_t lt_pretok_next_o200k(const unsigned char *text, size_t len, size_t pos) {
    if (pos >= len) return len; /* outside the contract; never read past the text */
    size_t n1 = pos;
    uint32_t c0 = next_char(text, len, &n1);
    uint8_t k0 = lt_uc_class(c0);
    if (k0 & LT_UC_L) {
        letters_match m = o200k_letters(text, len, pos);
        return with_contraction(text, len, m.first ? m.first : m.second);
    }
    if (k0 & LT_UC_N) return numbers_upto3(text, len, pos);
    if (c0 != '\r' && c0 != '\n') {
        letters_match m = o200k_letters(text, len, n1);
        if (m.first) return with_contraction(text, len, m.first);
        if (k0 & LT_UC_M) return with_contraction(text, len, n1);
        if (m.second) return with_contraction(text, len, m.second);
    }
    if (!(k0 & LT_UC_WS)) return newlines(text, len, run_none(text, len, n1, OTHER_MASK), true);
    if (c0 == ' ' && n1 < len) {
        size_t n2 = n1;
        if (!(lt_uc_class(next_char(text, len, &n2)) & OTHER_MASK))
            return newlines(text, len, run_none(text, len, n2, OTHER_MASK), true);
    }
    return whitespace(text, len, pos, true);
}

/* ------------------------------------------------------------------ r50k_base */

/*
 * 's|'t|'re|'ve|'m|'ll|'d | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
 *
 * By c0: a letter, number or other character starts the run of its kind (a ' first tries
 * the case-sensitive contractions); a space followed by a letter, number or other
 * character prefixes that run; other white space: whitespace() without the newline rule.
 */
size_t lt_pretok_next_r50k(const unsigned char *text, size_t len, size_t pos) {
    if (pos >= len) return len; /* outside the contract; never read past the text */
    size_t n1 = pos;
    uint32_t c0 = next_char(text, len, &n1);
    uint8_t k0 = lt_uc_class(c0);
    if (k0 & LT_UC_L) return run_any(text, len, n1, LT_UC_L);
    if (k0 & LT_UC_N) return run_any(text, len, n1, LT_UC_N);
    if (c0 == '\'') {
        size_t end = contraction_exact(text, len, pos);
        if (end) return end;
    }
    if (!(k0 & LT_UC_WS)) return run_none(text, len, n1, OTHER_MASK);
    if (c0 == ' ' && n1 < len) {
        size_t n2 = n1;
        uint8_t k1 = lt_uc_class(next_char(text, len, &n2));
        if (k1 & LT_UC_L) return run_any(text, len, n2, LT_UC_L);
        if (k1 & LT_UC_N) return run_any(text, len, n2, LT_UC_N);
        if (!(k1 & LT_UC_WS)) return run_none(text, len, n2, OTHER_MASK);
    }
    return whitespace(text, len, pos, false);
}

/* ------------------------------------------------------------------ generic engine: PCRE2 */

struct lt_regex {
    pcre2_code *code;
    bool jit; /* pcre2_jit_compile succeeded: pcre2_match runs the JIT code */
};

struct lt_regex_scratch {
    pcre2_match_data *match;
    pcre2_match_context *context;
    pcre2_jit_stack *jit_stack; /* NULL without JIT */
};

/* The JIT stack grows to this; enough for backtracking over megabyte runs. */
#define JIT_STACK_START (32 * 1024)
#define JIT_STACK_MAX (16 * 1024 * 1024)

/* Unicode White_Space (PropList.txt; unchanged since Unicode 6.3) as the inside of a
 * PCRE2 character class: what \s means to Rust's regex. */
#define WHITE_SPACE_ITEMS                                                  \
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
    "\\x{202F}\\x{205F}\\x{3000}"
static const char WS_CLASS[] = "[" WHITE_SPACE_ITEMS "]";
static const char NOT_WS_CLASS[] = "[^" WHITE_SPACE_ITEMS "]";

typedef struct rewrite {
    char *out;       /* the pattern for PCRE2, NUL-terminated */
    size_t len;
    size_t *origin;  /* origin[i]: offset in the tiktoken pattern of out[i] */
} rewrite;

static void emit(rewrite *r, const char *s, size_t n, size_t origin) {
    memcpy(r->out + r->len, s, n);
    for (size_t i = 0; i < n; i++) r->origin[r->len + i] = origin;
    r->len += n;
}

/*
 * Rewrite `\s` and `\S` to White_Space classes, outside and inside [...] (where \s becomes
 * the items). \S inside [...] would need a class union PCRE2 10.42 cannot write: refused.
 * \Q...\E is copied as it is; other escapes are copied with the character they escape.
 */
static lt_status rewrite_pattern(const char *pattern, rewrite *r, lt_error *err) {
    size_t n = strlen(pattern);
    size_t cap = n * (sizeof NOT_WS_CLASS - 1) + 1; /* each byte at most one \S's expansion */
    r->out = lt_malloc_check(cap);
    r->origin = lt_malloc_check(cap * sizeof *r->origin);
    r->len = 0;
    bool in_class = false;
    size_t i = 0;
    while (i < n) {
        char c = pattern[i];
        if (c == '\\' && i + 1 < n) {
            char e = pattern[i + 1];
            if (e == 's') {
                if (in_class) emit(r, WHITE_SPACE_ITEMS, sizeof WHITE_SPACE_ITEMS - 1, i);
                else emit(r, WS_CLASS, sizeof WS_CLASS - 1, i);
            } else if (e == 'S') {
                if (in_class) {
                    lt_fail(err, LT_ERR_CONFIG, NULL,
                            "pattern has \\S inside [...] at offset %zu, which the PCRE2 engine "
                            "cannot translate to Unicode White_Space", i);
                    lt_error_hint(err, "write the class without \\S, e.g. [^\\s...] for a "
                                       "negated one");
                    return LT_ERR_CONFIG;
                }
                emit(r, NOT_WS_CLASS, sizeof NOT_WS_CLASS - 1, i);
            } else if (e == 'Q') {
                const char *stop = strstr(pattern + i + 2, "\\E");
                size_t upto = stop ? (size_t)(stop - pattern) + 2 : n;
                for (size_t j = i; j < upto; j++) emit(r, pattern + j, 1, j);
                i = upto;
                continue;
            } else {
                emit(r, pattern + i, 2, i);
            }
            i += 2;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            emit(r, pattern + i, 1, i);
            i++;
            if (i < n && pattern[i] == '^') {
                emit(r, pattern + i, 1, i);
                i++;
            }
            if (i < n && pattern[i] == ']') { /* first in the class: a literal ] */
                emit(r, pattern + i, 1, i);
                i++;
            }
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && pattern[i + 1] == ':') { /* [:alpha:] */
            const char *stop = strstr(pattern + i + 2, ":]");
            size_t upto = stop ? (size_t)(stop - pattern) + 2 : i + 1;
            for (size_t j = i; j < upto; j++) emit(r, pattern + j, 1, j);
            i = upto;
            continue;
        }
        if (in_class && c == ']') in_class = false;
        emit(r, pattern + i, 1, i);
        i++;
    }
    r->out[r->len] = '\0';
    return LT_OK;
}

lt_status lt_regex_compile(lt_regex **out, const char *pattern, lt_error *err) {
    *out = NULL;
    rewrite r = {0};
    lt_status st = rewrite_pattern(pattern, &r, err);
    if (st != LT_OK) {
        free(r.out);
        free(r.origin);
        return st;
    }
    int code_err = 0;
    PCRE2_SIZE at = 0;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)r.out, r.len,
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &code_err, &at,
                                     NULL);
    if (code == NULL) {
        PCRE2_UCHAR msg[256];
        if (pcre2_get_error_message(code_err, msg, sizeof msg) < 0)
            snprintf((char *)msg, sizeof msg, "PCRE2 error %d", code_err);
        size_t offset = at < r.len ? r.origin[at] : strlen(pattern);
        free(r.out);
        free(r.origin);
        if (code_err == PCRE2_ERROR_HEAPLIMIT || code_err == PCRE2_ERROR_NOMEMORY)
            return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory compiling the pattern");
        return lt_fail(err, LT_ERR_CONFIG, NULL,
                       "PCRE2 rejects the pre-tokenization pattern at offset %zu: %s", offset,
                       (const char *)msg);
    }
    free(r.out);
    free(r.origin);
    lt_regex *re = lt_malloc_check(sizeof *re);
    re->code = code;
    /* JIT when this PCRE2 has it; otherwise pcre2_match interprets, with the same answers */
    re->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    *out = re;
    return LT_OK;
}

void lt_regex_free(lt_regex *re) {
    if (re == NULL) return;
    pcre2_code_free(re->code);
    free(re);
}

lt_regex_scratch *lt_regex_scratch_new(const lt_regex *re) {
    lt_regex_scratch *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->match = pcre2_match_data_create_from_pattern(re->code, NULL);
    s->context = pcre2_match_context_create(NULL);
    if (s->match == NULL || s->context == NULL) goto fail;
    if (re->jit) {
        s->jit_stack = pcre2_jit_stack_create(JIT_STACK_START, JIT_STACK_MAX, NULL);
        if (s->jit_stack == NULL) goto fail;
        pcre2_jit_stack_assign(s->context, NULL, s->jit_stack);
    }
    return s;
fail:
    lt_regex_scratch_free(s);
    return NULL;
}

void lt_regex_scratch_free(lt_regex_scratch *scratch) {
    if (scratch == NULL) return;
    pcre2_match_data_free(scratch->match);
    pcre2_match_context_free(scratch->context);
    pcre2_jit_stack_free(scratch->jit_stack);
    free(scratch);
}

lt_status lt_regex_next(const lt_regex *re, lt_regex_scratch *scratch, const unsigned char *text,
                        size_t len, size_t pos, bool *found, size_t *mstart, size_t *mend,
                        lt_error *err) {
    *found = false;
    while (pos < len) {
        int rc = pcre2_match(re->code, text, len, pos, PCRE2_NO_UTF_CHECK, scratch->match,
                             scratch->context);
        if (rc == PCRE2_ERROR_NOMATCH) return LT_OK;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            if (pcre2_get_error_message(rc, msg, sizeof msg) < 0)
                snprintf((char *)msg, sizeof msg, "PCRE2 error %d", rc);
            char where[64];
            snprintf(where, sizeof where, "byte %zu", pos);
            return lt_fail(err, LT_ERR_INPUT, where, "PCRE2 gave up matching the pre-tokenization "
                           "pattern: %s", (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(scratch->match);
        if (ov[1] > ov[0]) {
            *found = true;
            *mstart = ov[0];
            *mend = ov[1];
            return LT_OK;
        }
        /* An empty match: as Rust's find_iter, search again one character further on
         * (a non-empty match at the same start would have been preferred to it). */
        pos = (ov[0] > pos ? ov[0] : pos) + 1;
        while (pos < len && (text[pos] & 0xC0) == 0x80) pos++;
    }
    return LT_OK;
}
