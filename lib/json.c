/*
 * lib/json.c — JSON writer, JSON-lines string-field reader, JSON document parser, UTF-8
 * repair (see json.h).
 *
 * Both readers share one scanner: the grammar (walk_value) is an explicit state machine
 * with a fixed-size container stack (no recursion), so hostile nesting cannot overflow the
 * C stack. Strings are scanned once to validate and find their end, then decoded (only
 * where needed) into a scratch buffer, which is addressed by offsets because it may move
 * when it grows. The JSON-lines reader walks the top-level object itself to find its key
 * and validates the other members with walk_value; the document parser gives walk_value a
 * builder that stores every value in an lt_jv tree as it is validated.
 */
#include "lib/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The AVX2 fast paths (UTF-8 validation, the string scan): built on x86-64 with GCC or
 * Clang, taken where the CPU has AVX2 (__builtin_cpu_supports). */
#if defined(__x86_64__) && defined(__GNUC__)
#define JSON_AVX2 1
#include <immintrin.h>
#else
#define JSON_AVX2 0
#endif

/* ================================================================== UTF-8 */

size_t lt_utf8_next(const char *str, size_t n, int32_t *cp) {
    const unsigned char *s = (const unsigned char *)str;
    unsigned char c0 = s[0];
    if (c0 < 0x80) {
        *cp = c0;
        return 1;
    }
    /* Unicode 15, table 3-7: the allowed range of the second byte depends on the lead */
    int need;
    unsigned char lo = 0x80, hi = 0xBF;
    uint32_t v;
    if (c0 >= 0xC2 && c0 <= 0xDF) {
        need = 1;
        v = c0 & 0x1F;
    } else if (c0 >= 0xE0 && c0 <= 0xEF) {
        need = 2;
        v = c0 & 0x0F;
        if (c0 == 0xE0) lo = 0xA0; /* no overlongs */
        if (c0 == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c0 >= 0xF0 && c0 <= 0xF4) {
        need = 3;
        v = c0 & 0x07;
        if (c0 == 0xF0) lo = 0x90; /* no overlongs */
        if (c0 == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
    } else { /* 80..C1, F5..FF: never the start of a well-formed sequence */
        *cp = LT_UTF8_INVALID;
        return 1;
    }
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= n || s[k] < lo || s[k] > hi) {
            *cp = LT_UTF8_INVALID; /* the maximal subpart is s[0..k) */
            return (size_t)k;
        }
        v = (v << 6) | (s[k] & 0x3F);
        lo = 0x80;
        hi = 0xBF;
    }
    *cp = (int32_t)v;
    return (size_t)need + 1;
}

size_t lt_utf8_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

static const char REPLACEMENT[3] = {'\xEF', '\xBF', '\xBD'}; /* U+FFFD */

size_t lt_utf8_sanitize(const char *in, size_t len, char *out, size_t *replacements) {
    size_t i = 0, o = 0, count = 0;
    while (i < len) {
        size_t run = i;
        while (run < len && (unsigned char)in[run] < 0x80) run++;
        memcpy(out + o, in + i, run - i);
        o += run - i;
        i = run;
        if (i >= len) break;
        int32_t cp;
        size_t k = lt_utf8_next(in + i, len - i, &cp);
        if (cp == LT_UTF8_INVALID) {
            memcpy(out + o, REPLACEMENT, 3);
            o += 3;
            count++;
        } else {
            memcpy(out + o, in + i, k);
            o += k;
        }
        i += k;
    }
    if (replacements != NULL) *replacements += count;
    return o;
}

#if JSON_AVX2
/* Validation 32 bytes at a time with AVX2, after Keiser and Lemire, "Validating UTF-8 in
 * less than one instruction per byte" (Software: Practice and Experience, 2021): every
 * ill-formed sequence of table 3-7 shows in a byte and the byte before it, as the AND of
 * three 16-entry lookups (the earlier byte's high and low nibbles, this byte's high
 * nibble), except "this byte must be a continuation because a lead byte 2 or 3 bytes
 * back says so", which is compared with the TWO_CONTINUATIONS bit. Bits: */
enum {
    U8_TOO_SHORT = 1 << 0,     /* a lead byte, then no continuation */
    U8_TOO_LONG = 1 << 1,      /* ASCII, then a continuation */
    U8_OVERLONG_3 = 1 << 2,    /* E0, then 80..9F */
    U8_TOO_LARGE = 1 << 3,     /* F4, then 90..BF; F5..FF, then 90..BF */
    U8_SURROGATE = 1 << 4,     /* ED, then A0..BF */
    U8_OVERLONG_2 = 1 << 5,    /* C0 or C1, then a continuation */
    U8_TOO_LARGE_1000 = 1 << 6, /* F5..FF, then 80..8F */
    U8_OVERLONG_4 = 1 << 6,    /* F0, then 80..8F */
    U8_TWO_CONTS = 1 << 7,     /* a continuation, then a continuation */
    U8_CARRY = U8_TOO_SHORT | U8_TOO_LONG | U8_TWO_CONTS, /* low nibble: any */
};

/* A 16-entry lookup table (indexed by a nibble with vpshufb) in both 128-bit lanes */
#define U8_TABLE(...) _mm256_setr_epi8(__VA_ARGS__, __VA_ARGS__)

__attribute__((target("avx2"))) static bool utf8_valid_avx2(const unsigned char *s, size_t len) {
    const __m256i byte_1_high = U8_TABLE(
        U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG,
        U8_TWO_CONTS, U8_TWO_CONTS, U8_TWO_CONTS, U8_TWO_CONTS, U8_TOO_SHORT | U8_OVERLONG_2, U8_TOO_SHORT,
        U8_TOO_SHORT | U8_OVERLONG_3 | U8_SURROGATE,
        U8_TOO_SHORT | U8_TOO_LARGE | U8_TOO_LARGE_1000 | U8_OVERLONG_4);
    const __m256i byte_1_low = U8_TABLE(
        U8_CARRY | U8_OVERLONG_3 | U8_OVERLONG_2 | U8_OVERLONG_4, U8_CARRY | U8_OVERLONG_2, U8_CARRY, U8_CARRY,
        U8_CARRY | U8_TOO_LARGE, U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
        U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000, U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
        U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000, U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
        U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000, U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
        U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
        U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000 | U8_SURROGATE,
        U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000, U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000);
    const __m256i byte_2_high = U8_TABLE(
        U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT,
        U8_TOO_SHORT,
        U8_TOO_LONG | U8_OVERLONG_2 | U8_TWO_CONTS | U8_OVERLONG_3 | U8_TOO_LARGE_1000 | U8_OVERLONG_4,
        U8_TOO_LONG | U8_OVERLONG_2 | U8_TWO_CONTS | U8_OVERLONG_3 | U8_TOO_LARGE,
        U8_TOO_LONG | U8_OVERLONG_2 | U8_TWO_CONTS | U8_SURROGATE | U8_TOO_LARGE,
        U8_TOO_LONG | U8_OVERLONG_2 | U8_TWO_CONTS | U8_SURROGATE | U8_TOO_LARGE, U8_TOO_SHORT, U8_TOO_SHORT,
        U8_TOO_SHORT, U8_TOO_SHORT);
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    const __m256i third_min = _mm256_set1_epi8((char)(0xE0 - 0x80)), fourth_min = _mm256_set1_epi8((char)(0xF0 - 0x80));
    __m256i prev = _mm256_setzero_si256(), error = _mm256_setzero_si256();
    unsigned char last[32];
    for (size_t i = 0; i < len + 32; i += 32) { /* the last block padded with ASCII NULs (one extra
                                                   when len is a multiple of 32): a sequence cut
                                                   at the end is then TOO_SHORT */
        __m256i in;
        if (i + 32 <= len) {
            in = _mm256_loadu_si256((const __m256i *)(s + i));
        } else {
            memset(last, 0, sizeof last);
            if (i < len) memcpy(last, s + i, len - i);
            in = _mm256_loadu_si256((const __m256i *)last);
        }
        /* the bytes 1, 2, 3 before each: this block shifted right across the lane and block edges */
        __m256i carried = _mm256_permute2x128_si256(prev, in, 0x21); /* prev's high lane, in's low lane */
        __m256i prev1 = _mm256_alignr_epi8(in, carried, 15);
        __m256i prev2 = _mm256_alignr_epi8(in, carried, 14);
        __m256i prev3 = _mm256_alignr_epi8(in, carried, 13);
        __m256i sc = _mm256_and_si256(
            _mm256_and_si256(_mm256_shuffle_epi8(byte_1_high, _mm256_and_si256(_mm256_srli_epi16(prev1, 4), nibble)),
                             _mm256_shuffle_epi8(byte_1_low, _mm256_and_si256(prev1, nibble))),
            _mm256_shuffle_epi8(byte_2_high, _mm256_and_si256(_mm256_srli_epi16(in, 4), nibble)));
        /* high bit set where a lead byte 2 back is E0.. or 3 back is F0..: a continuation must be here */
        __m256i must23 = _mm256_or_si256(_mm256_subs_epu8(prev2, third_min), _mm256_subs_epu8(prev3, fourth_min));
        __m256i must23_80 = _mm256_and_si256(must23, _mm256_set1_epi8((char)0x80));
        error = _mm256_or_si256(error, _mm256_xor_si256(must23_80, sc));
        prev = in;
        if ((i & 1023) == 992 && !_mm256_testz_si256(error, error)) return false; /* early out, every 1 KiB */
    }
    return _mm256_testz_si256(error, error);
}
#endif

/* ASCII eight bytes at a time; 2- and 3-byte sequences checked inline (Unicode 15, table
 * 3-7, as lt_utf8_next); 4-byte ones and anything ill-formed through lt_utf8_next. Texts of
 * 64 bytes or more that are not all ASCII go 32 bytes at a time where the CPU has AVX2
 * (utf8_valid_avx2: 4-10x the scalar loop on 3-byte scripts). */
bool lt_utf8_valid(const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        while (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i == len) break;
#if JSON_AVX2
        if (len - i >= 64 && __builtin_cpu_supports("avx2"))
            return utf8_valid_avx2(s + i, len - i); /* s[i] starts a character */
#endif
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF && i + 1 < len && (s[i + 1] & 0xC0) == 0x80) {
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF && i + 2 < len && (s[i + 1] & 0xC0) == 0x80 &&
                   (s[i + 2] & 0xC0) == 0x80 && (c != 0xE0 || s[i + 1] >= 0xA0) && (c != 0xED || s[i + 1] <= 0x9F)) {
            i += 3;
        } else {
            int32_t cp;
            i += lt_utf8_next(str + i, len - i, &cp);
            if (cp == LT_UTF8_INVALID) return false;
        }
    }
    return true;
}

/* ================================================================== writer */

enum {
    FR_TOP = 0,
    FR_OBJECT = 1,
    FR_ARRAY = 2,
    FR_TYPE = 3,
    FR_HAS_ITEM = 4,   /* an item was written: the next needs a comma (top: text complete) */
    FR_WANT_VALUE = 8, /* object: a key was written, its value is next */
};

#define JSON_MISUSE(...) lt_die("lt_json misuse: " __VA_ARGS__)

void lt_json_init(lt_json *j) { memset(j, 0, sizeof *j); }

void lt_json_free(lt_json *j) {
    free(j->buf);
    lt_json_init(j);
}

void lt_json_reset(lt_json *j) {
    j->len = 0;
    if (j->buf != NULL) j->buf[0] = '\0';
    j->replacements = 0;
    j->depth = 0;
    j->frame[0] = FR_TOP;
}

/* Room for `extra` more bytes plus the NUL. */
static void json_reserve(lt_json *j, size_t extra) {
    if (extra > SIZE_MAX - 1 - j->len) lt_die("lt_json: text too large");
    size_t need = j->len + extra + 1;
    if (need <= j->cap) return;
    size_t ncap = j->cap < 256 ? 256 : j->cap;
    while (ncap < need) ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    j->buf = lt_realloc_check(j->buf, ncap);
    j->cap = ncap;
}

static void json_put(lt_json *j, const char *s, size_t n) {
    json_reserve(j, n);
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void json_putc(lt_json *j, char c) { json_put(j, &c, 1); }

/* Comma/colon bookkeeping before a value (scalar or container). */
static void before_value(lt_json *j) {
    unsigned char *f = &j->frame[j->depth];
    switch (*f & FR_TYPE) {
    case FR_TOP:
        if (*f & FR_HAS_ITEM) JSON_MISUSE("a second top-level value (call lt_json_reset first)");
        *f |= FR_HAS_ITEM;
        break;
    case FR_OBJECT:
        if (!(*f & FR_WANT_VALUE)) JSON_MISUSE("a value inside an object without lt_json_key");
        *f &= (unsigned char)~FR_WANT_VALUE;
        break;
    default: /* array */
        if (*f & FR_HAS_ITEM) json_putc(j, ',');
        *f |= FR_HAS_ITEM;
        break;
    }
}

static void put_escaped(lt_json *j, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    json_putc(j, '"');
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n) {
            unsigned char c = (unsigned char)s[run];
            if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) break;
            run++;
        }
        if (run > i) json_put(j, s + i, run - i);
        i = run;
        if (i >= n) break;
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            char esc[6] = {'\\', 0, 0, 0, 0, 0};
            size_t elen = 2;
            switch (c) {
            case '"': esc[1] = '"'; break;
            case '\\': esc[1] = '\\'; break;
            case '\b': esc[1] = 'b'; break;
            case '\f': esc[1] = 'f'; break;
            case '\n': esc[1] = 'n'; break;
            case '\r': esc[1] = 'r'; break;
            case '\t': esc[1] = 't'; break;
            default:
                esc[1] = 'u';
                esc[2] = '0';
                esc[3] = '0';
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                elen = 6;
                break;
            }
            json_put(j, esc, elen);
            i++;
            continue;
        }
        int32_t cp;
        size_t k = lt_utf8_next(s + i, n - i, &cp);
        if (cp == LT_UTF8_INVALID) {
            json_put(j, REPLACEMENT, 3);
            j->replacements++;
        } else if (cp == 0x2028) {
            json_put(j, "\\u2028", 6);
        } else if (cp == 0x2029) {
            json_put(j, "\\u2029", 6);
        } else {
            json_put(j, s + i, k);
        }
        i += k;
    }
    json_putc(j, '"');
}

static void container_begin(lt_json *j, unsigned char type, char open) {
    before_value(j);
    if (j->depth >= LT_JSON_MAX_DEPTH) JSON_MISUSE("nesting deeper than %d", LT_JSON_MAX_DEPTH);
    j->frame[++j->depth] = type;
    json_putc(j, open);
}

static void container_end(lt_json *j, unsigned char type, char close) {
    unsigned char f = j->frame[j->depth];
    if (j->depth == 0 || (f & FR_TYPE) != type)
        JSON_MISUSE("%s_end without a matching %s_begin", type == FR_OBJECT ? "object" : "array",
                    type == FR_OBJECT ? "object" : "array");
    if (f & FR_WANT_VALUE) JSON_MISUSE("object_end right after a key (the value is missing)");
    j->depth--;
    json_putc(j, close);
}

void lt_json_object_begin(lt_json *j) { container_begin(j, FR_OBJECT, '{'); }
void lt_json_object_end(lt_json *j) { container_end(j, FR_OBJECT, '}'); }
void lt_json_array_begin(lt_json *j) { container_begin(j, FR_ARRAY, '['); }
void lt_json_array_end(lt_json *j) { container_end(j, FR_ARRAY, ']'); }

void lt_json_key_n(lt_json *j, const char *name, size_t len) {
    unsigned char *f = &j->frame[j->depth];
    if ((*f & FR_TYPE) != FR_OBJECT) JSON_MISUSE("lt_json_key outside an object");
    if (*f & FR_WANT_VALUE) JSON_MISUSE("two keys in a row (the first has no value)");
    if (name == NULL) JSON_MISUSE("lt_json_key with a NULL name");
    if (*f & FR_HAS_ITEM) json_putc(j, ',');
    *f |= FR_HAS_ITEM | FR_WANT_VALUE;
    put_escaped(j, name, len);
    json_putc(j, ':');
}

void lt_json_key(lt_json *j, const char *name) {
    if (name == NULL) JSON_MISUSE("lt_json_key with a NULL name");
    lt_json_key_n(j, name, strlen(name));
}

void lt_json_string_n(lt_json *j, const char *s, size_t len) {
    if (s == NULL) {
        if (len > 0) JSON_MISUSE("lt_json_string_n with NULL and length %zu", len);
        lt_json_null(j);
        return;
    }
    before_value(j);
    put_escaped(j, s, len);
}

void lt_json_string(lt_json *j, const char *s) {
    if (s == NULL) {
        lt_json_null(j);
        return;
    }
    lt_json_string_n(j, s, strlen(s));
}

void lt_json_int(lt_json *j, int64_t v) {
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)v);
    before_value(j);
    json_put(j, tmp, (size_t)n);
}

void lt_json_uint(lt_json *j, uint64_t v) {
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    before_value(j);
    json_put(j, tmp, (size_t)n);
}

void lt_json_double(lt_json *j, double v) {
    if (!isfinite(v)) {
        lt_json_null(j);
        return;
    }
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (prec == 17 || strtod(tmp, NULL) == v) break;
    }
    /* '.' whatever LC_NUMERIC says: any run of bytes that is not part of a number in the
     * "C" locale is the locale's decimal point */
    char out[40];
    size_t o = 0;
    for (size_t i = 0; tmp[i] != '\0'; i++) {
        char c = tmp[i];
        if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == 'e' || c == 'E')
            out[o++] = c;
        else if (o == 0 || out[o - 1] != '.')
            out[o++] = '.';
    }
    before_value(j);
    json_put(j, out, o);
}

void lt_json_bool(lt_json *j, bool v) {
    before_value(j);
    if (v)
        json_put(j, "true", 4);
    else
        json_put(j, "false", 5);
}

void lt_json_null(lt_json *j) {
    before_value(j);
    json_put(j, "null", 4);
}

bool lt_json_complete(const lt_json *j) { return j->depth == 0 && (j->frame[0] & FR_HAS_ITEM); }

const char *lt_json_cstr(const lt_json *j) { return j->buf != NULL ? j->buf : ""; }

static lt_status json_fwrite(const lt_json *j, FILE *f, const char *where, bool newline, lt_error *err) {
    if (!lt_json_complete(j)) JSON_MISUSE("writing an incomplete JSON text");
    errno = 0;
    if (fwrite(j->buf, 1, j->len, f) != j->len || (newline && fputc('\n', f) == EOF) || ferror(f))
        return lt_fail(err, LT_ERR_IO, where, "write failed: %s", errno ? strerror(errno) : "stream error");
    return LT_OK;
}

lt_status lt_json_fwrite(const lt_json *j, FILE *f, const char *where, lt_error *err) {
    return json_fwrite(j, f, where, false, err);
}

lt_status lt_json_fwrite_line(const lt_json *j, FILE *f, const char *where, lt_error *err) {
    return json_fwrite(j, f, where, true, err);
}

/* ================================================================== scanner
 *
 * Shared by the JSON-lines reader and the document parser: one grammar (walk_value), one
 * string scanner and decoder, one number scanner, one set of error messages. The two
 * differ only in how a position is named ("column N" on a line, "line L, column C" in a
 * document) and in what is built while walking (nothing, or an lt_jv tree).
 */

typedef struct parser {
    const unsigned char *s;
    size_t n;
    size_t pos;
    char **buf;     /* scratch for decoded strings: the reader's rd->buf, or the parser's own */
    size_t *cap;    /* ... and its size */
    lt_error *err;
    bool document;  /* positions as "line L, column C", the end is "end of input" */
    /* line tracking for document positions: byte loc_pos is on line loc_line, which
     * starts at byte loc_start (positions are asked for in increasing order) */
    size_t loc_pos, loc_line, loc_start;
} parser;

/* Line and column (1-based; the column counts bytes) of byte `at` of a document. */
static void locate(parser *p, size_t at, size_t *line, size_t *column) {
    if (at < p->loc_pos) { /* backwards (not done by the parser today): rescan */
        p->loc_pos = 0;
        p->loc_line = 1;
        p->loc_start = 0;
    }
    const unsigned char *nl;
    while ((nl = memchr(p->s + p->loc_pos, '\n', at - p->loc_pos)) != NULL) {
        p->loc_line++;
        p->loc_pos = (size_t)(nl - p->s) + 1;
        p->loc_start = p->loc_pos;
    }
    p->loc_pos = at;
    *line = p->loc_line;
    *column = at - p->loc_start + 1;
}

static lt_status perr(parser *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static lt_status perr(parser *p, size_t at, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char where[64];
    if (p->document) {
        size_t line, column;
        locate(p, at, &line, &column);
        snprintf(where, sizeof where, "line %zu, column %zu", line, column);
    } else {
        snprintf(where, sizeof where, "column %zu", at + 1);
    }
    return lt_fail(p->err, LT_ERR_INPUT, where, "%s", what);
}

/* What the text ends with, in messages. */
static const char *end_name(const parser *p) { return p->document ? "input" : "line"; }

/* "'x'" for printable ASCII, "byte 0xNN" otherwise, "end of line" / "end of input" past the end */
static const char *describe(parser *p, size_t at, char buf[16]) {
    if (at >= p->n) return p->document ? "end of input" : "end of line";
    unsigned char c = p->s[at];
    if (c > 0x20 && c < 0x7F)
        snprintf(buf, 16, "'%c'", c);
    else
        snprintf(buf, 16, "byte 0x%02X", c);
    return buf;
}

static void skip_ws(parser *p) {
    while (p->pos < p->n) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

/* A UTF-8 byte order mark at the start is skipped (both readers accept one). */
static void skip_bom(parser *p) {
    if (p->n >= 3 && p->s[0] == 0xEF && p->s[1] == 0xBB && p->s[2] == 0xBF) p->pos = 3;
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool hex4(const unsigned char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(s[k]);
        if (h < 0) return false;
        v = (v << 4) | (uint32_t)h;
    }
    *out = v;
    return true;
}

/* True when s[from..n) is only line-end bytes. */
static bool only_line_end(const parser *p, size_t from) {
    for (size_t i = from; i < p->n; i++)
        if (p->s[i] != '\n' && p->s[i] != '\r') return false;
    return true;
}

/* Eight bytes at a time (SWAR): a word's bytes as flags. Each is exact as a yes/no for the
 * whole word (a borrow only starts at a byte that qualifies). */
#define SWAR_ONES 0x0101010101010101ull
#define SWAR_HIGHS 0x8080808080808080ull
static inline uint64_t swar_less(uint64_t w, unsigned char c) { /* some byte < c (c <= 0x80) */
    return (w - SWAR_ONES * c) & ~w & SWAR_HIGHS;
}
static inline uint64_t swar_has(uint64_t w, unsigned char c) { /* some byte == c */
    return swar_less(w ^ (SWAR_ONES * c), 1);
}

#if JSON_AVX2
/* The first of s[i..n) that is a quote, a backslash or a control character, 32 bytes at a
 * time (n - i >= 32 on entry; the tail is left to the caller); *high |= whether a byte >=
 * 0x80 came before it. */
__attribute__((target("avx2"))) static size_t ordinary_run_avx2(const unsigned char *s, size_t i, size_t n,
                                                                bool *high) {
    const __m256i quote = _mm256_set1_epi8('"'), backslash = _mm256_set1_epi8('\\');
    const __m256i space = _mm256_set1_epi8(0x20);
    for (; i + 32 <= n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(s + i));
        /* v < 0x20 unsigned: max(v, 0x20) != v */
        __m256i ctl = _mm256_xor_si256(_mm256_cmpeq_epi8(_mm256_max_epu8(v, space), v), _mm256_set1_epi8(-1));
        __m256i qb = _mm256_or_si256(_mm256_cmpeq_epi8(v, quote), _mm256_cmpeq_epi8(v, backslash));
        __m256i stop = _mm256_or_si256(qb, ctl);
        uint32_t m = (uint32_t)_mm256_movemask_epi8(stop), h = (uint32_t)_mm256_movemask_epi8(v);
        if (m) {
            size_t k = (size_t)__builtin_ctz(m);
            if (h & ((1u << k) - 1)) *high = true;
            return i + k;
        }
        if (h) *high = true;
    }
    return i;
}
#endif

/*
 * Validate the string whose opening quote is at p->pos; on success p->pos is just past the
 * closing quote, *plain (may be NULL) says whether the content has no escape and no byte >=
 * 0x80, and *ascii (may be NULL) whether it has no byte >= 0x80 (escapes aside).
 */
static lt_status scan_string(parser *p, bool *plain, bool *ascii) {
    const unsigned char *s = p->s;
    size_t open = p->pos, i = open + 1, n = p->n;
    bool escaped = false, high = false;
#if JSON_AVX2
    bool avx2 = n - i >= 64 && __builtin_cpu_supports("avx2");
#endif
    for (;;) {
        /* fast path over ordinary bytes (none a quote, a backslash or a control character):
         * 32 at a time where the CPU has AVX2 and the text is long, else eight at a time,
         * then one at a time */
#if JSON_AVX2
        if (avx2 && i + 32 <= n) i = ordinary_run_avx2(s, i, n, &high);
#endif
        uint64_t words = 0;
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (swar_less(w, 0x20) | swar_has(w, '"') | swar_has(w, '\\')) break;
            words |= w;
            i += 8;
        }
        if (words & SWAR_HIGHS) high = true;
        while (i < n && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\') {
            if (s[i] >= 0x80) high = true;
            i++;
        }
        if (i >= n) return perr(p, open, "unterminated string");
        unsigned char c = s[i];
        if (c == '"') break;
        if (c == '\\') {
            escaped = true;
            if (i + 1 >= n) return perr(p, open, "unterminated string");
            unsigned char e = s[i + 1];
            switch (e) {
            case '"':
            case '\\':
            case '/':
            case 'b':
            case 'f':
            case 'n':
            case 'r':
            case 't': i += 2; continue;
            case 'u': {
                uint32_t v;
                if (i + 6 > n || !hex4(s + i + 2, &v))
                    return perr(p, i, "invalid \\u escape (expected 4 hex digits after '\\u')");
                i += 6;
                continue;
            }
            default:
                if (e > 0x20 && e < 0x7F) return perr(p, i, "invalid escape '\\%c'", e);
                return perr(p, i, "invalid escape: byte 0x%02X after '\\'", e);
            }
        }
        /* c < 0x20 */
        if ((c == '\n' || c == '\r') && only_line_end(p, i)) return perr(p, open, "unterminated string");
        return perr(p, i, "control character U+%04X in string (must be escaped)", c);
    }
    p->pos = i + 1;
    if (plain != NULL) *plain = !escaped && !high;
    if (ascii != NULL) *ascii = !high;
    return LT_OK;
}

/* Make the scratch buffer hold at least `need` bytes. */
static lt_status scratch_reserve(parser *p, size_t need) {
    if (need <= *p->cap) return LT_OK;
    size_t ncap = *p->cap < 256 ? 256 : *p->cap;
    while (ncap < need) ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    char *nb = realloc(*p->buf, ncap);
    if (nb == NULL) return lt_fail(p->err, LT_ERR_NOMEM, NULL, "out of memory: %zu bytes for a JSON string", ncap);
    *p->buf = nb;
    *p->cap = ncap;
    return LT_OK;
}

/*
 * Unescape the (already validated) string with quotes at s[open] and s[close] into the
 * scratch buffer at `base`, NUL-terminated; *len gets its length, *repl += U+FFFD
 * substitutions (ill-formed UTF-8 and unpaired surrogate escapes). `ascii`: scan_string
 * found no byte >= 0x80 (its runs need no UTF-8 check).
 */
static lt_status decode_string(parser *p, size_t open, size_t close, size_t base, bool ascii, size_t *len,
                               size_t *repl) {
    const unsigned char *s = p->s;
    size_t i = open + 1, o = base;
    lt_status st;
    for (;;) {
        /* the run up to the next escape: copied at once when it is well-formed UTF-8 (as
         * good as always), else with each ill-formed subpart replaced (a backslash is no
         * continuation byte, so cutting there changes no subpart) */
        const unsigned char *esc = memchr(s + i, '\\', close - i);
        size_t run = esc ? (size_t)(esc - s) : close;
        if (run > i) {
            if (ascii || lt_utf8_valid((const char *)s + i, run - i)) {
                if ((st = scratch_reserve(p, o + (run - i) + 1)) != LT_OK) return st;
                memcpy(*p->buf + o, s + i, run - i);
                o += run - i;
            } else {
                if ((st = scratch_reserve(p, o + LT_UTF8_SANITIZE_MAX(run - i) + 1)) != LT_OK) return st;
                o += lt_utf8_sanitize((const char *)s + i, run - i, *p->buf + o, repl);
            }
            i = run;
        }
        if (i >= close) break;
        if ((st = scratch_reserve(p, o + 5)) != LT_OK) return st; /* any one item below + NUL */
        char *buf = *p->buf; /* s[i] is a backslash */
        unsigned char e = s[i + 1];
        if (e != 'u') {
            char c;
            switch (e) {
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            default: c = (char)e; break; /* " \ / */
            }
            buf[o++] = c;
            i += 2;
            continue;
        }
        uint32_t u = 0xFFFD, lo = 0;
        (void)hex4(s + i + 2, &u); /* validated by scan_string */
        i += 6;
        if (u >= 0xD800 && u <= 0xDBFF) {
            if (i + 6 <= close && s[i] == '\\' && s[i + 1] == 'u' && hex4(s + i + 2, &lo) && lo >= 0xDC00 &&
                lo <= 0xDFFF) {
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            } else { /* unpaired high surrogate; a following escape is decoded on its own */
                u = 0xFFFD;
                (*repl)++;
            }
        } else if (u >= 0xDC00 && u <= 0xDFFF) { /* unpaired low surrogate */
            u = 0xFFFD;
            (*repl)++;
        }
        o += lt_utf8_encode(u, buf + o);
    }
    if ((st = scratch_reserve(p, o + 1)) != LT_OK) return st;
    (*p->buf)[o] = '\0';
    *len = o - base;
    return LT_OK;
}

static lt_status scan_number(parser *p) {
    const unsigned char *s = p->s;
    size_t i = p->pos, n = p->n;
    char d[16];
    if (i < n && s[i] == '-') i++;
    if (i < n && s[i] == '0') {
        i++;
    } else if (i < n && s[i] >= '1' && s[i] <= '9') {
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    } else {
        return perr(p, i, "invalid number: expected a digit, found %s", describe(p, i, d));
    }
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || s[i] < '0' || s[i] > '9')
            return perr(p, i, "invalid number: expected a digit after '.', found %s", describe(p, i, d));
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || s[i] < '0' || s[i] > '9')
            return perr(p, i, "invalid number: expected a digit in the exponent, found %s", describe(p, i, d));
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    p->pos = i;
    return LT_OK;
}

static lt_status scan_literal(parser *p) {
    static const char *const words[] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++) {
        size_t k = strlen(words[w]);
        if (p->s[p->pos] == (unsigned char)words[w][0]) {
            if (p->n - p->pos >= k && memcmp(p->s + p->pos, words[w], k) == 0) {
                p->pos += k;
                return LT_OK;
            }
            return perr(p, p->pos, "invalid literal (expected '%s')", words[w]);
        }
    }
    return LT_ERR_INTERNAL; /* not reached: callers dispatch on t/f/n */
}

const char *lt_jv_type_name(lt_jv_type t) {
    switch (t) {
    case LT_JV_NULL: return "null";
    case LT_JV_BOOL: return "a boolean";
    case LT_JV_NUMBER: return "a number";
    case LT_JV_STRING: return "a string";
    case LT_JV_ARRAY: return "an array";
    case LT_JV_OBJECT: return "an object";
    }
    return "an unknown type";
}

bool lt_jv_equal(const lt_jv *a, const lt_jv *b) {
    if (a->type != b->type || a->n != b->n) return false;
    if (a->type == LT_JV_BOOL && a->boolean != b->boolean) return false;
    if ((a->type == LT_JV_STRING || a->type == LT_JV_NUMBER) &&
        (a->len != b->len || memcmp(a->text, b->text, a->len) != 0))
        return false;
    for (size_t i = 0; i < a->n; i++) {
        if (a->type == LT_JV_OBJECT &&
            (a->key_lens[i] != b->key_lens[i] || memcmp(a->keys[i], b->keys[i], a->key_lens[i]) != 0))
            return false;
        if (!lt_jv_equal(&a->items[i], &b->items[i])) return false;
    }
    return true;
}

void lt_json_value(lt_json *j, const lt_jv *v) {
    switch (v->type) {
    case LT_JV_NULL: lt_json_null(j); break;
    case LT_JV_BOOL: lt_json_bool(j, v->boolean); break;
    case LT_JV_NUMBER: lt_json_number_text(j, v->text, v->len); break;
    case LT_JV_STRING: lt_json_string_n(j, v->text, v->len); break;
    case LT_JV_ARRAY:
        lt_json_array_begin(j);
        for (size_t i = 0; i < v->n; i++) lt_json_value(j, &v->items[i]);
        lt_json_array_end(j);
        break;
    case LT_JV_OBJECT:
        lt_json_object_begin(j);
        for (size_t i = 0; i < v->n; i++) {
            lt_json_key_n(j, v->keys[i], v->key_lens[i]);
            lt_json_value(j, &v->items[i]);
        }
        lt_json_object_end(j);
        break;
    }
}

/* The JSON type a value starting with byte c would have (for messages). */
static const char *value_type(unsigned char c) {
    switch (c) {
    case '{': return lt_jv_type_name(LT_JV_OBJECT);
    case '[': return lt_jv_type_name(LT_JV_ARRAY);
    case '"': return lt_jv_type_name(LT_JV_STRING);
    case 't':
    case 'f': return lt_jv_type_name(LT_JV_BOOL);
    case 'n': return lt_jv_type_name(LT_JV_NULL);
    default: return (c == '-' || (c >= '0' && c <= '9')) ? lt_jv_type_name(LT_JV_NUMBER) : "not a value";
    }
}

/* ------------------------------------------------------------------ tree building */

/*
 * What walk_value fills while it validates (NULL: validate only). `slot` is the lt_jv the
 * next value is stored in: the root, or the item just appended to the innermost open
 * container. Every lt_jv is complete at all times (a new item is a null until its value is
 * stored), so an error at any point leaves a tree that lt_jv_free releases.
 */
typedef struct builder {
    lt_jv *slot;
    lt_jv *open[LT_JSON_MAX_PARSE_DEPTH]; /* the open containers; each is the last item of
                                             the one before, so it cannot move while open */
    size_t cap[LT_JSON_MAX_PARSE_DEPTH];  /* items allocated in each */
    size_t replacements;                  /* U+FFFD substitutions in strings and names */
} builder;

static lt_status out_of_memory(parser *p) {
    return lt_fail(p->err, LT_ERR_NOMEM, NULL, "out of memory for a JSON document");
}

/* The validated string with quotes at s[open] and s[close], unescaped into a malloc'd
 * NUL-terminated copy of exactly its size. */
static lt_status build_text(parser *p, size_t open, size_t close, size_t *repl, char **out, size_t *out_len) {
    size_t len;
    lt_status st = decode_string(p, open, close, 0, false, &len, repl);
    if (st != LT_OK) return st;
    char *t = malloc(len + 1);
    if (t == NULL) return out_of_memory(p);
    memcpy(t, *p->buf, len + 1);
    *out = t;
    *out_len = len;
    return LT_OK;
}

/* Append a null item (with member name `key`, owned from now on, in an object) to the
 * innermost of the `sp` open containers and make it the slot. */
static lt_status build_item(parser *p, builder *b, int sp, char *key, size_t key_len) {
    lt_jv *c = b->open[sp - 1];
    if (c->n == b->cap[sp - 1]) {
        size_t ncap = c->n < 4 ? 8 : c->n * 2;
        if (c->n > SIZE_MAX / 2 / sizeof(lt_jv)) goto nomem;
        lt_jv *items = realloc(c->items, ncap * sizeof *items);
        if (items == NULL) goto nomem;
        c->items = items;
        if (c->type == LT_JV_OBJECT) {
            char **keys = realloc(c->keys, ncap * sizeof *keys);
            if (keys == NULL) goto nomem;
            c->keys = keys;
            size_t *key_lens = realloc(c->key_lens, ncap * sizeof *key_lens);
            if (key_lens == NULL) goto nomem;
            c->key_lens = key_lens;
        }
        b->cap[sp - 1] = ncap;
    }
    lt_jv *v = &c->items[c->n];
    memset(v, 0, sizeof *v);
    v->type = LT_JV_NULL;
    if (c->type == LT_JV_OBJECT) {
        c->keys[c->n] = key;
        c->key_lens[c->n] = key_len;
    }
    c->n++;
    b->slot = v;
    return LT_OK;
nomem:
    free(key);
    return out_of_memory(p);
}

/* Store the scalar that walk_value just scanned at s[start..p->pos) in the slot. */
static lt_status build_scalar(parser *p, builder *b, size_t start) {
    lt_jv *v = b->slot;
    unsigned char c = p->s[start];
    if (c == '"') {
        lt_status st = build_text(p, start, p->pos - 1, &b->replacements, &v->text, &v->len);
        if (st != LT_OK) return st;
        v->type = LT_JV_STRING;
    } else if (c == 't' || c == 'f' || c == 'n') {
        v->type = c == 'n' ? LT_JV_NULL : LT_JV_BOOL;
        v->boolean = c == 't';
    } else { /* a number: its literal text */
        size_t len = p->pos - start;
        if ((v->text = malloc(len + 1)) == NULL) return out_of_memory(p);
        memcpy(v->text, p->s + start, len);
        v->text[len] = '\0';
        v->len = len;
        v->type = LT_JV_NUMBER;
    }
    return LT_OK;
}

/* ------------------------------------------------------------------ the grammar */

/*
 * Validate one value at p->pos (after whitespace), nested inside `depth` open containers,
 * and with a builder store it in b->slot. Iterative: `stack` holds the open containers
 * ('{' or '['), so hostile nesting cannot overflow the C stack.
 */
static lt_status walk_value(parser *p, int depth, builder *b) {
    unsigned char stack[LT_JSON_MAX_PARSE_DEPTH];
    int sp = 0; /* containers opened here */
    char d[16];
    lt_status st;
    enum { VALUE, MEMBER, AFTER } state = VALUE;
    for (;;) {
        switch (state) {
        case VALUE: {
            skip_ws(p);
            if (p->pos >= p->n) return perr(p, p->pos, "unexpected end of %s, expected a value", end_name(p));
            unsigned char c = p->s[p->pos];
            if (b != NULL) locate(p, p->pos, &b->slot->line, &b->slot->column);
            if (c == '{' || c == '[') {
                if (depth + sp + 1 > LT_JSON_MAX_PARSE_DEPTH)
                    return perr(p, p->pos, "nesting deeper than %d levels", LT_JSON_MAX_PARSE_DEPTH);
                if (b != NULL) {
                    b->slot->type = c == '{' ? LT_JV_OBJECT : LT_JV_ARRAY;
                    b->open[sp] = b->slot;
                    b->cap[sp] = 0;
                }
                stack[sp++] = c;
                p->pos++;
                skip_ws(p);
                if (p->pos < p->n && p->s[p->pos] == (c == '{' ? '}' : ']')) {
                    p->pos++;
                    sp--;
                    state = AFTER;
                } else if (c == '{') {
                    state = MEMBER;
                } else {
                    if (b != NULL && (st = build_item(p, b, sp, NULL, 0)) != LT_OK) return st;
                    state = VALUE;
                }
                continue;
            }
            size_t start = p->pos;
            if (c == '"')
                st = scan_string(p, NULL, NULL);
            else if (c == '-' || (c >= '0' && c <= '9'))
                st = scan_number(p);
            else if (c == 't' || c == 'f' || c == 'n')
                st = scan_literal(p);
            else
                return perr(p, p->pos, "expected a value, found %s", describe(p, p->pos, d));
            if (st != LT_OK) return st;
            if (b != NULL && (st = build_scalar(p, b, start)) != LT_OK) return st;
            state = AFTER;
            continue;
        }
        case MEMBER: {
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != '"')
                return perr(p, p->pos, "expected a string key, found %s", describe(p, p->pos, d));
            size_t kopen = p->pos;
            if ((st = scan_string(p, NULL, NULL)) != LT_OK) return st;
            if (b != NULL) {
                char *key;
                size_t key_len;
                if ((st = build_text(p, kopen, p->pos - 1, &b->replacements, &key, &key_len)) != LT_OK) return st;
                if ((st = build_item(p, b, sp, key, key_len)) != LT_OK) return st;
            }
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != ':')
                return perr(p, p->pos, "expected ':' after object key, found %s", describe(p, p->pos, d));
            p->pos++;
            state = VALUE;
            continue;
        }
        case AFTER:
            if (sp == 0) return LT_OK;
            skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ',') {
                p->pos++;
                if (stack[sp - 1] == '{') {
                    state = MEMBER;
                } else {
                    if (b != NULL && (st = build_item(p, b, sp, NULL, 0)) != LT_OK) return st;
                    state = VALUE;
                }
            } else if (p->pos < p->n && p->s[p->pos] == (stack[sp - 1] == '{' ? '}' : ']')) {
                p->pos++;
                sp--;
            } else if (stack[sp - 1] == '{') {
                return perr(p, p->pos, "expected ',' or '}', found %s", describe(p, p->pos, d));
            } else {
                return perr(p, p->pos, "expected ',' or ']', found %s", describe(p, p->pos, d));
            }
            continue;
        }
    }
}

/* ================================================================== JSON-lines reader */

void lt_jsonl_reader_init(lt_jsonl_reader *rd) { memset(rd, 0, sizeof *rd); }

void lt_jsonl_reader_free(lt_jsonl_reader *rd) {
    free(rd->buf);
    lt_jsonl_reader_init(rd);
}

/* The body of lt_jsonl_reader_get. On success *found says whether the value is in
 * rd->buf[0..*vlen). The top-level object is walked here (to find the key); member values
 * go through walk_value. */
static lt_status parse_line(parser *p, lt_jsonl_reader *rd, const char *key, bool *found, size_t *vlen) {
    const unsigned char *s = p->s;
    size_t keylen = strlen(key);
    size_t kbase = 0; /* where member names are decoded: after the value once found */
    char d[16];
    lt_status st;
    *found = false;
    *vlen = 0;

    skip_bom(p);
    skip_ws(p);
    if (p->pos >= p->n) return perr(p, p->pos, "empty line, expected a JSON object");
    if (s[p->pos] != '{') {
        const char *type = value_type(s[p->pos]);
        if (strcmp(type, "not a value") != 0)
            return perr(p, p->pos, "the line is %s, expected a JSON object", type);
        return perr(p, p->pos, "expected '{', found %s", describe(p, p->pos, d));
    }
    p->pos++;
    skip_ws(p);
    if (p->pos < p->n && s[p->pos] == '}') {
        p->pos++;
    } else {
        for (;;) {
            skip_ws(p);
            if (p->pos >= p->n || s[p->pos] != '"')
                return perr(p, p->pos, "expected a string key, found %s", describe(p, p->pos, d));
            size_t kopen = p->pos;
            bool plain;
            if ((st = scan_string(p, &plain, NULL)) != LT_OK) return st;
            size_t kclose = p->pos - 1;
            bool match = false;
            if (!*found) {
                if (plain) {
                    match = kclose - kopen - 1 == keylen && memcmp(s + kopen + 1, key, keylen) == 0;
                } else {
                    size_t klen, ignored = 0;
                    if ((st = decode_string(p, kopen, kclose, kbase, false, &klen, &ignored)) != LT_OK) return st;
                    match = klen == keylen && memcmp(rd->buf + kbase, key, keylen) == 0;
                }
            }
            skip_ws(p);
            if (p->pos >= p->n || s[p->pos] != ':')
                return perr(p, p->pos, "expected ':' after object key, found %s", describe(p, p->pos, d));
            p->pos++;
            skip_ws(p);
            if (match) {
                size_t vstart = p->pos;
                if (vstart < p->n && s[vstart] == '"') {
                    bool ascii;
                    if ((st = scan_string(p, NULL, &ascii)) != LT_OK) return st;
                    rd->replacements = 0;
                    if ((st = decode_string(p, vstart, p->pos - 1, 0, ascii, vlen, &rd->replacements)) != LT_OK)
                        return st;
                    *found = true;
                    kbase = *vlen + 1;
                } else {
                    if ((st = walk_value(p, 1, NULL)) != LT_OK) return st; /* a syntax error wins */
                    return perr(p, vstart, "value of key '%s' is %s, expected a string", key, value_type(s[vstart]));
                }
            } else if ((st = walk_value(p, 1, NULL)) != LT_OK) {
                return st;
            }
            skip_ws(p);
            if (p->pos < p->n && s[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->pos < p->n && s[p->pos] == '}') {
                p->pos++;
                break;
            }
            return perr(p, p->pos, "expected ',' or '}', found %s", describe(p, p->pos, d));
        }
    }
    skip_ws(p);
    if (p->pos < p->n)
        return perr(p, p->pos, "trailing characters after object, starting with %s", describe(p, p->pos, d));
    return LT_OK;
}

lt_status lt_jsonl_reader_get(lt_jsonl_reader *rd, const char *line, size_t len, const char *key,
                              const char **out, size_t *out_len, lt_error *err) {
    *out = NULL;
    *out_len = 0;
    rd->replacements = 0;
    if (line == NULL && len > 0) return lt_fail(err, LT_ERR_INTERNAL, NULL, "lt_jsonl_reader_get: NULL line");
    if (key == NULL) return lt_fail(err, LT_ERR_INTERNAL, NULL, "lt_jsonl_reader_get: NULL key");
    parser p = {.s = (const unsigned char *)(line != NULL ? line : ""), .n = len, .buf = &rd->buf, .cap = &rd->cap,
                .err = err};
    bool found;
    size_t vlen;
    lt_status st = parse_line(&p, rd, key, &found, &vlen);
    if (st != LT_OK) {
        rd->replacements = 0;
        return st;
    }
    if (found) {
        rd->total_replacements += rd->replacements;
        *out = rd->buf;
        *out_len = vlen;
    } else {
        rd->replacements = 0;
    }
    return LT_OK;
}

lt_status lt_jsonl_get_string(const char *line, size_t len, const char *key, char **out, size_t *out_len,
                              lt_error *err) {
    *out = NULL;
    *out_len = 0;
    lt_jsonl_reader rd;
    lt_jsonl_reader_init(&rd);
    const char *val;
    size_t vlen;
    lt_status st = lt_jsonl_reader_get(&rd, line, len, key, &val, &vlen, err);
    if (st != LT_OK || val == NULL) {
        lt_jsonl_reader_free(&rd);
        return st;
    }
    /* the value sits at the start of the scratch buffer: hand the buffer over */
    char *result = rd.buf;
    if (rd.cap > vlen + 1) {
        char *shrunk = realloc(result, vlen + 1);
        if (shrunk != NULL) result = shrunk; /* else keep the larger block */
    }
    *out = result;
    *out_len = vlen;
    return LT_OK;
}

/* ================================================================== document parser */

lt_status lt_json_parse(const char *text, size_t len, lt_jv **out, lt_error *err) {
    if (out == NULL) return lt_fail(err, LT_ERR_INTERNAL, NULL, "lt_json_parse: NULL out");
    *out = NULL;
    if (text == NULL && len > 0) return lt_fail(err, LT_ERR_INTERNAL, NULL, "lt_json_parse: NULL text");
    lt_jv *root = calloc(1, sizeof *root);
    if (root == NULL) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a JSON document");
    root->type = LT_JV_NULL;
    char *scratch = NULL;
    size_t scratch_cap = 0;
    parser p = {.s = (const unsigned char *)(text != NULL ? text : ""), .n = len, .buf = &scratch,
                .cap = &scratch_cap, .err = err, .document = true, .loc_line = 1};
    builder b;
    b.slot = root;
    b.replacements = 0;
    char d[16];
    lt_status st;
    skip_bom(&p);
    skip_ws(&p);
    if (p.pos >= p.n) {
        st = perr(&p, p.pos, "empty input, expected a JSON value");
    } else {
        st = walk_value(&p, 0, &b);
        skip_ws(&p);
        if (st == LT_OK && p.pos < p.n)
            st = perr(&p, p.pos, "trailing characters after the JSON value, starting with %s", describe(&p, p.pos, d));
    }
    free(scratch);
    if (st != LT_OK) {
        lt_jv_free(root);
        return st;
    }
    root->replacements = b.replacements;
    *out = root;
    return LT_OK;
}

/* The text, the children and their names of v, not v itself. Recursion is bounded by
 * LT_JSON_MAX_PARSE_DEPTH (the parser builds nothing deeper). */
static void jv_release(lt_jv *v) {
    free(v->text);
    for (size_t i = 0; i < v->n; i++) {
        jv_release(&v->items[i]);
        if (v->keys != NULL) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_lens);
}

void lt_jv_free(lt_jv *v) {
    if (v == NULL) return;
    jv_release(v);
    free(v);
}

const lt_jv *lt_jv_get(const lt_jv *obj, const char *key) {
    if (obj == NULL || obj->type != LT_JV_OBJECT || key == NULL) return NULL;
    size_t klen = strlen(key);
    for (size_t i = obj->n; i-- > 0;) /* from the end: the last duplicate wins */
        if (obj->key_lens[i] == klen && memcmp(obj->keys[i], key, klen) == 0) return &obj->items[i];
    return NULL;
}

/*
 * Exact decimal arithmetic on the literal (no double rounding): the digits of the integer
 * and fraction parts, D = d1 d2 ... dk, stand for D * 10^(exponent - fraction digits).
 * Without its leading and trailing zeros D * 10^E is an integer iff E >= 0, and it fits in
 * int64 only if it has at most 19 digits; the rest is checked in uint64.
 */
bool lt_jv_int64(const lt_jv *v, int64_t *out) {
    if (v == NULL || v->type != LT_JV_NUMBER || v->text == NULL) return false;
    const char *s = v->text, *end = v->text + v->len;
    bool neg = s < end && *s == '-';
    if (neg) s++;
    const char *ip = s;
    while (s < end && *s >= '0' && *s <= '9') s++;
    size_t ilen = (size_t)(s - ip);
    const char *fp = s;
    size_t flen = 0;
    if (s < end && *s == '.') {
        fp = ++s;
        while (s < end && *s >= '0' && *s <= '9') s++;
        flen = (size_t)(s - fp);
    }
    long long exp = 0; /* saturates far beyond anything that could still be in range */
    if (s < end && (*s == 'e' || *s == 'E')) {
        s++;
        bool eneg = s < end && *s == '-';
        if (s < end && (*s == '-' || *s == '+')) s++;
        const char *ep = s;
        while (s < end && *s >= '0' && *s <= '9') {
            if (exp < 100000000000000000LL) exp = exp * 10 + (*s - '0'); /* 1e17: > any length */
            s++;
        }
        if (s == ep) return false;
        if (eneg) exp = -exp;
    }
    if (s != end || ilen == 0) return false; /* not a number literal */
    size_t total = ilen + flen;
#define DIGIT(k) ((k) < ilen ? ip[(k)] : fp[(k) - ilen])
    size_t first = 0, last = total;
    while (first < total && DIGIT(first) == '0') first++;
    if (first == total) { /* zero, whatever its exponent or sign */
        *out = 0;
        return true;
    }
    while (DIGIT(last - 1) == '0') last--;
    /* the value is digits[first..last) * 10^e */
    long long e = exp - (long long)flen + (long long)(total - last);
    if (e < 0) return false;                          /* a fraction remains */
    if ((long long)(last - first) + e > 19) return false; /* >= 10^19 > 2^63 */
    uint64_t u = 0;
    for (size_t k = first; k < last; k++) u = u * 10 + (uint64_t)(DIGIT(k) - '0');
#undef DIGIT
    for (long long k = 0; k < e; k++) {
        if (u > UINT64_MAX / 10) return false;
        u *= 10;
    }
    if (neg) {
        if (u > (uint64_t)INT64_MAX + 1) return false;
        *out = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
    } else {
        if (u > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)u;
    }
    return true;
}

/* The writer's raw-number entry, here because it validates with the scanner above. */
void lt_json_number_text(lt_json *j, const char *text, size_t len) {
    if (text == NULL) JSON_MISUSE("lt_json_number_text with a NULL text");
    parser p = {.s = (const unsigned char *)text, .n = len};
    if (len == 0 || scan_number(&p) != LT_OK || p.pos != len)
        JSON_MISUSE("lt_json_number_text: '%.*s' is not a JSON number", len > 64 ? 64 : (int)len, text);
    before_value(j);
    json_put(j, text, len);
}
