/*
 * lib/json.c — JSON writer, JSON-lines string-field reader, UTF-8 repair (see json.h).
 *
 * The reader validates with an explicit state machine and a fixed-size container stack
 * (no recursion), so hostile nesting cannot overflow the C stack. Strings are scanned once
 * to validate and find their end; only the wanted value (and a member name that needs
 * unescaping) is decoded into the reader's scratch buffer, which is addressed by offsets
 * because it may move when it grows.
 */
#include "lib/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

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

bool lt_utf8_valid(const char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        int32_t cp;
        i += lt_utf8_next(s + i, len - i, &cp);
        if (cp == LT_UTF8_INVALID) return false;
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

/* ================================================================== reader */

void lt_jsonl_reader_init(lt_jsonl_reader *rd) { memset(rd, 0, sizeof *rd); }

void lt_jsonl_reader_free(lt_jsonl_reader *rd) {
    free(rd->buf);
    lt_jsonl_reader_init(rd);
}

typedef struct parser {
    const unsigned char *s;
    size_t n;
    size_t pos;
    lt_jsonl_reader *rd;
    lt_error *err;
} parser;

static lt_status perr(parser *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static lt_status perr(parser *p, size_t at, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char where[40];
    snprintf(where, sizeof where, "column %zu", at + 1);
    return lt_fail(p->err, LT_ERR_INPUT, where, "%s", what);
}

/* "'x'" for printable ASCII, "byte 0xNN" otherwise, "end of line" past the end */
static const char *describe(parser *p, size_t at, char buf[16]) {
    if (at >= p->n) return "end of line";
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

/*
 * Validate the string whose opening quote is at p->pos; on success p->pos is just past the
 * closing quote and *plain says whether the content has no escape and no byte >= 0x80.
 */
static lt_status scan_string(parser *p, bool *plain) {
    const unsigned char *s = p->s;
    size_t open = p->pos, i = open + 1, n = p->n;
    bool simple = true;
    for (;;) {
        /* fast path over ordinary bytes */
        while (i < n && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\') {
            if (s[i] >= 0x80) simple = false;
            i++;
        }
        if (i >= n) return perr(p, open, "unterminated string");
        unsigned char c = s[i];
        if (c == '"') break;
        if (c == '\\') {
            simple = false;
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
    if (plain != NULL) *plain = simple;
    return LT_OK;
}

/* Make rd->buf hold at least `need` bytes. */
static lt_status rd_reserve(parser *p, size_t need) {
    lt_jsonl_reader *rd = p->rd;
    if (need <= rd->cap) return LT_OK;
    size_t ncap = rd->cap < 256 ? 256 : rd->cap;
    while (ncap < need) ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    char *nb = realloc(rd->buf, ncap);
    if (nb == NULL) return lt_fail(p->err, LT_ERR_NOMEM, NULL, "out of memory: %zu bytes for a JSON string", ncap);
    rd->buf = nb;
    rd->cap = ncap;
    return LT_OK;
}

/*
 * Unescape the (already validated) string with quotes at s[open] and s[close] into
 * rd->buf + base, NUL-terminated; *len gets its length, *repl += U+FFFD substitutions.
 */
static lt_status decode_string(parser *p, size_t open, size_t close, size_t base, size_t *len, size_t *repl) {
    const unsigned char *s = p->s;
    size_t i = open + 1, o = base;
    lt_status st;
    for (;;) {
        /* an ASCII run, copied at once */
        size_t run = i;
        while (run < close && s[run] < 0x80 && s[run] != '\\') run++;
        if (run > i) {
            if ((st = rd_reserve(p, o + (run - i) + 1)) != LT_OK) return st;
            memcpy(p->rd->buf + o, s + i, run - i);
            o += run - i;
            i = run;
        }
        if (i >= close) break;
        if ((st = rd_reserve(p, o + 5)) != LT_OK) return st; /* any one item below + NUL */
        char *buf = p->rd->buf;
        if (s[i] != '\\') { /* non-ASCII: one sequence or one ill-formed subpart */
            int32_t cp;
            size_t k = lt_utf8_next((const char *)s + i, close - i, &cp);
            if (cp == LT_UTF8_INVALID) {
                memcpy(buf + o, REPLACEMENT, 3);
                o += 3;
                (*repl)++;
            } else {
                memcpy(buf + o, s + i, k);
                o += k;
            }
            i += k;
            continue;
        }
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
    if ((st = rd_reserve(p, o + 1)) != LT_OK) return st;
    p->rd->buf[o] = '\0';
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

/* The JSON type a value starting with byte c would have (for messages). */
static const char *value_type(unsigned char c) {
    switch (c) {
    case '{': return "an object";
    case '[': return "an array";
    case '"': return "a string";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    default: return (c == '-' || (c >= '0' && c <= '9')) ? "a number" : "not a value";
    }
}

/*
 * Validate and skip one value at p->pos (after whitespace), nested inside `depth` open
 * containers. Iterative: `stack` holds the open containers ('{' or '[').
 */
static lt_status skip_value(parser *p, int depth) {
    unsigned char stack[LT_JSON_MAX_PARSE_DEPTH];
    int sp = 0; /* containers opened here */
    char d[16];
    lt_status st;
    enum { VALUE, MEMBER, AFTER } state = VALUE;
    for (;;) {
        switch (state) {
        case VALUE: {
            skip_ws(p);
            if (p->pos >= p->n) return perr(p, p->pos, "unexpected end of line, expected a value");
            unsigned char c = p->s[p->pos];
            if (c == '{' || c == '[') {
                if (depth + sp + 1 > LT_JSON_MAX_PARSE_DEPTH)
                    return perr(p, p->pos, "nesting deeper than %d levels", LT_JSON_MAX_PARSE_DEPTH);
                stack[sp++] = c;
                p->pos++;
                skip_ws(p);
                if (p->pos < p->n && p->s[p->pos] == (c == '{' ? '}' : ']')) {
                    p->pos++;
                    sp--;
                    state = AFTER;
                } else {
                    state = c == '{' ? MEMBER : VALUE;
                }
                continue;
            }
            if (c == '"')
                st = scan_string(p, NULL);
            else if (c == '-' || (c >= '0' && c <= '9'))
                st = scan_number(p);
            else if (c == 't' || c == 'f' || c == 'n')
                st = scan_literal(p);
            else
                return perr(p, p->pos, "expected a value, found %s", describe(p, p->pos, d));
            if (st != LT_OK) return st;
            state = AFTER;
            continue;
        }
        case MEMBER:
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != '"')
                return perr(p, p->pos, "expected a string key, found %s", describe(p, p->pos, d));
            if ((st = scan_string(p, NULL)) != LT_OK) return st;
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != ':')
                return perr(p, p->pos, "expected ':' after object key, found %s", describe(p, p->pos, d));
            p->pos++;
            state = VALUE;
            continue;
        case AFTER:
            if (sp == 0) return LT_OK;
            skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ',') {
                p->pos++;
                state = stack[sp - 1] == '{' ? MEMBER : VALUE;
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

/* The body of lt_jsonl_reader_get. On success *found says whether the value is in
 * rd->buf[0..*vlen). */
static lt_status parse_line(parser *p, const char *key, bool *found, size_t *vlen) {
    const unsigned char *s = p->s;
    size_t keylen = strlen(key);
    size_t kbase = 0; /* where member names are decoded: after the value once found */
    char d[16];
    lt_status st;
    *found = false;
    *vlen = 0;

    if (p->n >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF) p->pos = 3; /* UTF-8 BOM */
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
            if ((st = scan_string(p, &plain)) != LT_OK) return st;
            size_t kclose = p->pos - 1;
            bool match = false;
            if (!*found) {
                if (plain) {
                    match = kclose - kopen - 1 == keylen && memcmp(s + kopen + 1, key, keylen) == 0;
                } else {
                    size_t klen, ignored = 0;
                    if ((st = decode_string(p, kopen, kclose, kbase, &klen, &ignored)) != LT_OK) return st;
                    match = klen == keylen && memcmp(p->rd->buf + kbase, key, keylen) == 0;
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
                    if ((st = scan_string(p, NULL)) != LT_OK) return st;
                    p->rd->replacements = 0;
                    if ((st = decode_string(p, vstart, p->pos - 1, 0, vlen, &p->rd->replacements)) != LT_OK)
                        return st;
                    *found = true;
                    kbase = *vlen + 1;
                } else {
                    if ((st = skip_value(p, 1)) != LT_OK) return st; /* a syntax error wins */
                    return perr(p, vstart, "value of key '%s' is %s, expected a string", key, value_type(s[vstart]));
                }
            } else if ((st = skip_value(p, 1)) != LT_OK) {
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
    parser p = {(const unsigned char *)(line != NULL ? line : ""), len, 0, rd, err};
    bool found;
    size_t vlen;
    lt_status st = parse_line(&p, key, &found, &vlen);
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
