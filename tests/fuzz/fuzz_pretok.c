/*
 * tests/fuzz/fuzz_pretok.c — libFuzzer target for the pre-tokenization scanners
 * (dataprep/pretok.h), checked against the PCRE2 engine compiled from the same patterns.
 *
 * Input layout: byte 0 picks the mode (byte % 2, so the ASCII digits '0' '1' select it in
 * seed files); the rest is the payload. Empty inputs are ignored.
 *   Mode 0, TEXT: the payload is text, made valid UTF-8 with lt_utf8_sanitize.
 *   Mode 1, PALETTE: each payload byte picks one of the characters of `palette` below (byte
 *     % its size): the white space kinds and lookalikes, letters of every case class, marks
 *     of the three kinds, numbers of the three kinds, the contraction letters, U+017F,
 *     punctuation, emoji pieces. It reaches class combinations that random UTF-8 rarely
 *     spells.
 * Before comparing, every code point whose classes differ between the scanners' tables
 * (dataprep/unicode.h, Unicode 16.0) and PCRE2 (10.42: Unicode 14.0) becomes 'x': each is
 * checked once with single-class patterns through the PCRE2 engine and remembered.
 *
 * Properties, for each of cl100k, o200k, r50k:
 *   - the scanner's pieces tile the text: each end is in (pos, len] and on a character
 *     boundary;
 *   - they are exactly PCRE2's matches (find_iter) of the same pattern;
 *   - the scanners given the raw payload (mode 0, often not UTF-8: outside their contract)
 *     still return ends in (pos, len] (no crash, no read past the text: ASan).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/pretok.h"
#include "dataprep/unicode.h" /* lt_uc_class */
#include "lib/error.h"
#include "lib/json.h" /* lt_utf8_sanitize, lt_utf8_next, lt_utf8_encode */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint32_t palette[] = {
    'a', 'b', 'e', 's', 't', 'r', 'v', 'm', 'l', 'd', 'A', 'S', 'T', 'R', 'E', 'L', 'D', 'Z',
    '0', '7', '\'', '\'', ' ', ' ', ' ', '\t', '\r', '\n', '/', '!', '.', '"',
    0x0B, 0x0C, 0x1C, 0x85, 0xA0, 0x1680, 0x2003, 0x2028, 0x2029, 0x202F, 0x3000, /* \s and not */
    0x180E, 0x200B, 0x200D, 0xFEFF,
    0x17F,                            /* LONG S: 's' to (?i) */
    0x212A,                           /* KELVIN SIGN: 'k' to (?i) */
    0xC0, 0xE9, 0x1C5, 0x1F88,        /* Lu, Ll, Lt, Lt (Greek) */
    0x2B0, 0x3005,                    /* Lm */
    0x4E2D, 0x5D0, 0x905, 0xAC00,     /* Lo */
    0x301, 0x903, 0x20DD, 0xFE0F,     /* Mn, Mc, Me, VS16 */
    0x663, 0x2161, 0xB2,              /* Nd, Nl, No */
    0x2019, 0x3002, 0x1F600, 0x1F3FD, 0x1F1EB, 0x2764, /* punctuation, emoji */
};
#define PALETTE_LEN (sizeof palette / sizeof palette[0])

static void fail(const char *what, const unsigned char *t, size_t len) {
    fprintf(stderr, "fuzz_pretok: property violated: %s\n  text (%zu bytes):", what, len);
    for (size_t i = 0; i < len && i < 512; i++) fprintf(stderr, " %02x", t[i]);
    fprintf(stderr, "\n");
    abort();
}

static lt_regex *known_re[3];
static lt_regex_scratch *known_rs[3];
static const char *const KIND_NAMES[3] = {"cl100k", "o200k", "r50k"};
static const lt_pretok_kind KINDS[3] = {LT_PRETOK_CL100K, LT_PRETOK_O200K, LT_PRETOK_R50K};

/* Which code points PCRE2 classes as the tables do (0 unknown, 1 yes, 2 no). */
static const char *const CLASS_PATTERNS[6] = {
    "\\p{L}", "\\p{N}", "\\p{M}", "\\s", "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]",
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]",
};
static const uint8_t CLASS_BITS[6] = {LT_UC_L, LT_UC_N, LT_UC_M, LT_UC_WS, LT_UC_UP, LT_UC_LO};
static lt_regex *class_re[6];
static lt_regex_scratch *class_rs[6];
static uint8_t agreement[LT_UC_MAX + 1];

static lt_regex_scratch *compile(const char *pattern, lt_regex **re) {
    lt_error err;
    if (lt_regex_compile(re, pattern, &err) != LT_OK) {
        fprintf(stderr, "fuzz_pretok: cannot compile %s: %s\n", pattern, err.what);
        abort();
    }
    lt_regex_scratch *rs = lt_regex_scratch_new(*re);
    if (rs == NULL) abort();
    return rs;
}

static void init_once(void) {
    if (known_re[0] != NULL) return;
    for (int k = 0; k < 3; k++) known_rs[k] = compile(lt_pretok_pattern(KINDS[k]), &known_re[k]);
    for (int c = 0; c < 6; c++) class_rs[c] = compile(CLASS_PATTERNS[c], &class_re[c]);
}

static bool classes_agree(uint32_t cp) {
    if (agreement[cp] == 0) {
        char u[4];
        size_t n = lt_utf8_encode(cp, u);
        uint8_t pcre_class = 0;
        for (int c = 0; c < 6; c++) {
            bool found;
            size_t s, e;
            if (lt_regex_next(class_re[c], class_rs[c], (const unsigned char *)u, n, 0, &found, &s,
                              &e, NULL) != LT_OK)
                abort();
            if (found) pcre_class |= CLASS_BITS[c];
        }
        agreement[cp] = pcre_class == lt_uc_class(cp) ? 1 : 2;
    }
    return agreement[cp] == 1;
}

static size_t scan_next(int k, const unsigned char *t, size_t len, size_t pos) {
    switch (k) {
    case 0: return lt_pretok_next_cl100k(t, len, pos);
    case 1: return lt_pretok_next_o200k(t, len, pos);
    default: return lt_pretok_next_r50k(t, len, pos);
    }
}

/* The scanner's pieces are PCRE2's matches. */
static void compare(int k, const unsigned char *t, size_t len) {
    size_t pos = 0;
    while (pos < len) {
        size_t end = scan_next(k, t, len, pos);
        if (end <= pos || end > len) fail("a scanner end outside (pos, len]", t, len);
        if (end < len && (t[end] & 0xC0) == 0x80) fail("a scanner end inside a character", t, len);
        bool found;
        size_t ms, me;
        lt_error err;
        if (lt_regex_next(known_re[k], known_rs[k], t, len, pos, &found, &ms, &me, &err) != LT_OK) {
            fprintf(stderr, "fuzz_pretok: PCRE2 (%s) gave up: %s (%s)\n", KIND_NAMES[k], err.what,
                    err.where);
            return; /* the oracle's limit, not a scanner bug */
        }
        if (!found || ms != pos || me != end) {
            fprintf(stderr, "fuzz_pretok: %s: scanner piece [%zu, %zu), PCRE2 %s [%zu, %zu)\n",
                    KIND_NAMES[k], pos, end, found ? "match" : "nothing", found ? ms : 0,
                    found ? me : 0);
            fail("the scanner and PCRE2 split differently", t, len);
        }
        pos = end;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 64 * 1024) return 0;
    init_once();
    int mode = data[0] % 2;
    const uint8_t *payload = data + 1;
    size_t n = size - 1;

    /* the text, valid UTF-8 */
    unsigned char *text = malloc(LT_UTF8_SANITIZE_MAX(n) + 4 * n + 1);
    if (text == NULL) abort();
    size_t len = 0;
    if (mode == 0) {
        len = lt_utf8_sanitize((const char *)payload, n, (char *)text, NULL);
        /* the raw payload, outside the contract: in bounds, progress */
        unsigned char *raw = malloc(n ? n : 1);
        if (raw == NULL) abort();
        memcpy(raw, payload, n);
        for (int k = 0; k < 3; k++) {
            for (size_t pos = 0; pos < n;) {
                size_t end = scan_next(k, raw, n, pos);
                if (end <= pos || end > n)
                    fail("a scanner end outside (pos, len] on raw bytes", raw, n);
                pos = end;
            }
        }
        free(raw);
    } else {
        for (size_t i = 0; i < n; i++)
            len += lt_utf8_encode(palette[payload[i] % PALETTE_LEN], (char *)text + len);
    }

    /* code points PCRE2 classes otherwise become 'x' (1 byte: the text only shrinks) */
    size_t out = 0;
    for (size_t i = 0; i < len;) {
        int32_t cp;
        size_t step = lt_utf8_next((const char *)text + i, len - i, &cp);
        if (cp < 0) fail("sanitized text is not UTF-8", text, len);
        if (classes_agree((uint32_t)cp)) {
            memmove(text + out, text + i, step);
            out += step;
        } else {
            text[out++] = 'x';
        }
        i += step;
    }
    len = out;

    for (int k = 0; k < 3; k++) compare(k, text, len);
    free(text);
    return 0;
}
