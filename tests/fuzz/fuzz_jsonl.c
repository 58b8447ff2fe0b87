/*
 * tests/fuzz/fuzz_jsonl.c — libFuzzer target for the JSON-lines reader, the JSON writer and
 * UTF-8 repair (lib/json.h).
 *
 * Input layout: byte 0 picks the key (byte % 8, an index into `keys` below: "text", "id",
 * "", "a", "é", a key with a quote, a key with a newline, an emoji); byte 1 picks the mode
 * (byte % 3, so the ASCII digits '0' '1' '2' select it in seed files); the rest is the
 * payload. Inputs shorter than 2 bytes are ignored.
 *
 * Mode 0, READ: the payload is one JSON line, read with lt_jsonl_reader_get(key).
 *   - no crash, leak, UB or exit; the status is LT_OK or LT_ERR_INPUT (nothing else);
 *   - an error has a WHAT and WHERE "column N" with 1 <= N <= len + 1, and *out is NULL;
 *   - lt_jsonl_get_string and a reader reused after another (longer) line give the same
 *     status, error and value as a fresh reader;
 *   - a found value is NUL-terminated at out[len] and is well-formed UTF-8; an absent key
 *     gives out == NULL, len 0;
 *   - a line that reads OK still reads to the same value with "\r\n" appended, and with
 *     leading JSON blanks or a UTF-8 BOM prepended (when it does not start with a BOM);
 *   - the found value written back with the writer as {key: value} reads back identically.
 * Mode 1, WRITE: the payload is an arbitrary byte string S.
 *   - lt_utf8_sanitize(S) equals an independent implementation of the WHATWG / Unicode
 *     "maximal subpart" U+FFFD substitution (same bytes, same number of replacements);
 *     the result is valid UTF-8; lt_utf8_valid(S) iff no replacement was needed;
 *   - the writer's output for {"nest":{key:"decoy"}, key: S, key: "dup"} is complete,
 *     well-formed UTF-8 without raw control bytes or raw U+2028/U+2029, counts the same
 *     replacements, and is byte-identical when given the sanitized string instead of S;
 *   - THE ROUND TRIP: reading that line back with `key` yields exactly sanitize(S) (the
 *     first top-level member wins; nested members and later duplicates are ignored);
 *   - numbers: the first 8 payload bytes as a double / int64 / uint64 are written as
 *     valid JSON numbers (the reader accepts the line and reports "a number") that
 *     strtod / strtoll read back exactly (non-finite doubles: null).
 * Mode 2, KEY: payload byte 0 is a key length k; the next k bytes are the key K (raw bytes),
 *   the rest the value V. {K: V} is written with lt_json_key_n; when sanitize(K) has no NUL
 *   (the reader takes a C-string key) reading with sanitize(K) yields sanitize(V).
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
#include "lib/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const keys[8] = {
    "text", "id", "", "a", "\xC3\xA9", "k\"q\\", "line\nbreak", "\xF0\x9F\x98\x80",
};

static void fail(const char *what, const lt_error *err, const char *extra) {
    fprintf(stderr, "fuzz_jsonl: property violated: %s\n", what);
    if (err != NULL)
        fprintf(stderr, "  status=%d what='%s' where='%s' hint='%s'\n", (int)err->status, err->what,
                err->where, err->hint);
    if (extra != NULL) fprintf(stderr, "  %s\n", extra);
    abort();
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (p == NULL) fail("out of memory in the harness", NULL, NULL);
    return p;
}

/* ------------------------------------------------------------------ reference UTF-8 repair */

/*
 * The WHATWG Encoding Standard's UTF-8 decoder (which is the Unicode "U+FFFD substitution
 * of maximal subparts"), written independently of lib/json.c: it re-encodes each decoded
 * code point and emits EF BF BD per error. `out` has room for 3 * len bytes.
 */
static size_t ref_sanitize(const uint8_t *in, size_t len, uint8_t *out, size_t *errors) {
    size_t o = 0;
    uint32_t cp = 0;
    int needed = 0, seen = 0;
    uint8_t lower = 0x80, upper = 0xBF;
    *errors = 0;
    size_t i = 0;
    while (i < len) {
        uint8_t b = in[i];
        if (needed == 0) {
            i++;
            if (b <= 0x7F) {
                out[o++] = b;
            } else if (b >= 0xC2 && b <= 0xDF) {
                needed = 1;
                cp = b & 0x1Fu;
            } else if (b >= 0xE0 && b <= 0xEF) {
                if (b == 0xE0) lower = 0xA0;
                if (b == 0xED) upper = 0x9F;
                needed = 2;
                cp = b & 0xFu;
            } else if (b >= 0xF0 && b <= 0xF4) {
                if (b == 0xF0) lower = 0x90;
                if (b == 0xF4) upper = 0x8F;
                needed = 3;
                cp = b & 0x7u;
            } else {
                out[o++] = 0xEF, out[o++] = 0xBF, out[o++] = 0xBD;
                (*errors)++;
            }
            continue;
        }
        if (b < lower || b > upper) { /* error; the byte is processed again (not consumed) */
            cp = 0, needed = 0, seen = 0, lower = 0x80, upper = 0xBF;
            out[o++] = 0xEF, out[o++] = 0xBF, out[o++] = 0xBD;
            (*errors)++;
            continue;
        }
        i++;
        lower = 0x80, upper = 0xBF;
        cp = (cp << 6) | (b & 0x3Fu);
        if (++seen == needed) {
            if (cp < 0x800) {
                out[o++] = (uint8_t)(0xC0 | (cp >> 6));
                out[o++] = (uint8_t)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                out[o++] = (uint8_t)(0xE0 | (cp >> 12));
                out[o++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                out[o++] = (uint8_t)(0x80 | (cp & 0x3F));
            } else {
                out[o++] = (uint8_t)(0xF0 | (cp >> 18));
                out[o++] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
                out[o++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                out[o++] = (uint8_t)(0x80 | (cp & 0x3F));
            }
            cp = 0, needed = 0, seen = 0;
        }
    }
    if (needed != 0) {
        out[o++] = 0xEF, out[o++] = 0xBF, out[o++] = 0xBD;
        (*errors)++;
    }
    return o;
}

/* sanitize() checked against the reference; returns a malloc'd buffer, its length in *olen. */
static char *sanitize_checked(const char *in, size_t len, size_t *olen, size_t *repl) {
    char *out = xmalloc(LT_UTF8_SANITIZE_MAX(len) + 1);
    uint8_t *ref = xmalloc(3 * len + 1);
    size_t count = 7; /* lt_utf8_sanitize adds to it */
    size_t n = lt_utf8_sanitize(in, len, out, &count);
    count -= 7;
    size_t ref_errors;
    size_t rn = ref_sanitize((const uint8_t *)in, len, ref, &ref_errors);
    if (n != rn || memcmp(out, ref, n) != 0) fail("lt_utf8_sanitize differs from the reference", NULL, NULL);
    if (count != ref_errors) fail("lt_utf8_sanitize counts replacements wrongly", NULL, NULL);
    if (n > LT_UTF8_SANITIZE_MAX(len)) fail("lt_utf8_sanitize wrote past its bound", NULL, NULL);
    if (!lt_utf8_valid(out, n)) fail("sanitized text is not valid UTF-8", NULL, NULL);
    if (lt_utf8_valid(in, len) != (count == 0)) fail("lt_utf8_valid disagrees with sanitize", NULL, NULL);
    if (count == 0 && (n != len || memcmp(in, out, len) != 0))
        fail("sanitize changed valid UTF-8", NULL, NULL);
    /* lt_utf8_sanitize with a NULL counter is the same */
    char *again = xmalloc(LT_UTF8_SANITIZE_MAX(len) + 1);
    if (lt_utf8_sanitize(in, len, again, NULL) != n || memcmp(again, out, n) != 0)
        fail("lt_utf8_sanitize(NULL counter) differs", NULL, NULL);
    free(again);
    free(ref);
    out[n] = '\0';
    *olen = n;
    if (repl) *repl = count;
    return out;
}

/* ------------------------------------------------------------------ writer checks */

/* Writer output: complete, valid UTF-8, no raw control bytes, no raw U+2028/U+2029. */
static void check_writer_text(const lt_json *j) {
    if (!lt_json_complete(j)) fail("writer text not complete", NULL, NULL);
    const char *t = lt_json_cstr(j);
    if (strlen(t) != j->len) fail("writer text has an embedded NUL or wrong length", NULL, NULL);
    if (!lt_utf8_valid(t, j->len)) fail("writer output is not valid UTF-8", NULL, t);
    for (size_t i = 0; i < j->len; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c < 0x20) fail("raw control byte in writer output", NULL, t);
        if (c == 0xE2 && i + 2 < j->len && (unsigned char)t[i + 1] == 0x80 &&
            ((unsigned char)t[i + 2] == 0xA8 || (unsigned char)t[i + 2] == 0xA9))
            fail("raw U+2028/U+2029 in writer output", NULL, t);
    }
}

/* Read `key` from line[0..len) expecting exactly want[0..wlen). */
static void expect_read(const char *line, size_t len, const char *key, const char *want, size_t wlen) {
    lt_jsonl_reader rd;
    lt_jsonl_reader_init(&rd);
    const char *out;
    size_t olen;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_jsonl_reader_get(&rd, line, len, key, &out, &olen, &err);
    if (st != LT_OK) fail("writer output does not read back", &err, line);
    if (out == NULL) fail("key not found in writer output", NULL, line);
    if (olen != wlen || memcmp(out, want, wlen) != 0) fail("round trip changed the string", NULL, line);
    if (rd.replacements != 0) fail("reading valid writer output needed replacements", NULL, line);
    lt_jsonl_reader_free(&rd);
}

/* A name for the decoy container that differs from `key`. */
static const char *decoy_name(const char *key) { return strcmp(key, "nest") == 0 ? "nest2" : "nest"; }

/* {"nest":{KEY:"decoy"}, KEY: S, KEY: "dup"} with KEY written as key[0..klen). */
static void write_object(lt_json *j, const char *key, size_t klen, const char *s, size_t slen,
                         const char *decoy) {
    lt_json_object_begin(j);
    lt_json_key(j, decoy);
    lt_json_object_begin(j);
    lt_json_key_n(j, key, klen);
    lt_json_string(j, "decoy");
    lt_json_object_end(j);
    lt_json_key_n(j, key, klen);
    lt_json_string_n(j, s, slen);
    lt_json_key_n(j, key, klen);
    lt_json_string(j, "dup");
    lt_json_object_end(j);
}

static void check_numbers(const uint8_t *p, size_t n) {
    if (n < 8) return;
    double d;
    int64_t i;
    uint64_t u;
    memcpy(&d, p, 8);
    memcpy(&i, p, 8);
    memcpy(&u, p, 8);
    lt_json j;
    lt_json_init(&j);
    lt_json_object_begin(&j);
    lt_json_key(&j, "d");
    lt_json_double(&j, d);
    lt_json_key(&j, "i");
    lt_json_int(&j, i);
    lt_json_key(&j, "u");
    lt_json_uint(&j, u);
    lt_json_object_end(&j);
    check_writer_text(&j);
    const char *t = lt_json_cstr(&j);
    static const char *const names[3] = {"d", "i", "u"};
    for (int k = 0; k < 3; k++) {
        lt_error err;
        char *val;
        size_t vlen;
        lt_status st = lt_jsonl_get_string(t, j.len, names[k], &val, &vlen, &err);
        bool is_null = k == 0 && !(d - d == 0.0);
        const char *want = is_null ? "null" : "a number";
        if (st != LT_ERR_INPUT || strstr(err.what, want) == NULL)
            fail("a written number is not read as a valid JSON number", &err, t);
    }
    /* the texts read back exactly */
    const char *dv = strstr(t, "\"d\":") + 4;
    if (d - d == 0.0) {
        char *end;
        double back = strtod(dv, &end);
        if (back != d || *end != ',') fail("lt_json_double does not read back", NULL, t);
        if (back == 0.0 && (signbit(back) != signbit(d))) fail("lt_json_double lost the sign of zero", NULL, t);
    } else if (strncmp(dv, "null,", 5) != 0) {
        fail("non-finite double not written as null", NULL, t);
    }
    const char *iv = strstr(t, "\"i\":") + 4;
    errno = 0;
    char *end;
    long long ib = strtoll(iv, &end, 10);
    if (errno != 0 || ib != i || *end != ',') fail("lt_json_int does not read back", NULL, t);
    const char *uv = strstr(t, "\"u\":") + 4;
    errno = 0;
    unsigned long long ub = strtoull(uv, &end, 10);
    if (errno != 0 || ub != u || *end != '}' || *uv == '-') fail("lt_json_uint does not read back", NULL, t);
    lt_json_free(&j);
}

/* ------------------------------------------------------------------ modes */

typedef struct read_result {
    lt_status st;
    bool found;
    char *val; /* malloc'd copy */
    size_t len;
    lt_error err;
} read_result;

static read_result read_fresh(const char *line, size_t len, const char *key) {
    read_result r = {0};
    lt_jsonl_reader rd;
    lt_jsonl_reader_init(&rd);
    const char *out = (const char *)1;
    size_t olen = 99;
    lt_error_clear(&r.err);
    r.st = lt_jsonl_reader_get(&rd, line, len, key, &out, &olen, &r.err);
    if (r.st != LT_OK) {
        if (out != NULL || olen != 0) fail("error but *out/*out_len set", &r.err, NULL);
    } else if (out != NULL) {
        r.found = true;
        r.len = olen;
        r.val = xmalloc(olen + 1);
        memcpy(r.val, out, olen + 1);
    } else if (olen != 0) {
        fail("absent key but *out_len != 0", NULL, NULL);
    }
    lt_jsonl_reader_free(&rd);
    return r;
}

static void same_result(const read_result *a, const read_result *b, const char *what) {
    if (a->st != b->st || a->found != b->found || a->len != b->len ||
        (a->found && memcmp(a->val, b->val, a->len) != 0))
        fail(what, &b->err, NULL);
}

static void mode_read(const char *line, size_t len, const char *key) {
    read_result r = read_fresh(line, len, key);
    if (r.st != LT_OK) {
        if (r.st != LT_ERR_INPUT) fail("reader status is neither OK nor INPUT", &r.err, NULL);
        if (r.err.status != r.st || r.err.what[0] == '\0') fail("malformed reader error", &r.err, NULL);
        unsigned long col = 0;
        char tail = 0;
        if (sscanf(r.err.where, "column %lu%c", &col, &tail) != 1 || col < 1 || col > len + 1)
            fail("reader error WHERE is not 'column N' within the line", &r.err, NULL);
    } else if (r.found) {
        if (r.val[r.len] != '\0') fail("value not NUL-terminated", NULL, NULL);
        if (!lt_utf8_valid(r.val, r.len)) fail("value is not valid UTF-8", NULL, NULL);
    }

    /* one-shot variant */
    {
        read_result o = {0};
        lt_error_clear(&o.err);
        char *val = (char *)1;
        size_t vlen = 99;
        o.st = lt_jsonl_get_string(line, len, key, &val, &vlen, &o.err);
        o.found = val != NULL;
        o.val = val;
        o.len = vlen;
        same_result(&r, &o, "lt_jsonl_get_string differs from lt_jsonl_reader_get");
        if (r.st != LT_OK && (strcmp(r.err.what, o.err.what) != 0 || strcmp(r.err.where, o.err.where) != 0))
            fail("lt_jsonl_get_string gives another error", &o.err, r.err.what);
        if (o.found && o.val[o.len] != '\0') fail("one-shot value not NUL-terminated", NULL, NULL);
        free(o.val);
    }

    /* a reader reused after another line */
    {
        lt_jsonl_reader rd;
        lt_jsonl_reader_init(&rd);
        static const char warm[] =
            "{\"k\\u0041\":1,\"text\":\"0123456789012345678901234567890123456789012345678901234567890"
            "12345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
            "0123456789012345678901234567890123456789012345678901234567890123456789\\u00e9\",\"id\":\"x\"}";
        const char *out;
        size_t olen;
        lt_error e;
        if (lt_jsonl_reader_get(&rd, warm, sizeof warm - 1, "text", &out, &olen, &e) != LT_OK)
            fail("warm-up line does not read", &e, NULL);
        read_result w = {0};
        lt_error_clear(&w.err);
        w.st = lt_jsonl_reader_get(&rd, line, len, key, &out, &olen, &w.err);
        w.found = w.st == LT_OK && out != NULL;
        w.len = olen;
        w.val = (char *)out;
        same_result(&r, &w, "a reused reader gives another result");
        lt_jsonl_reader_free(&rd);
    }

    if (r.st == LT_OK) {
        /* surrounding blanks and a BOM do not matter */
        char *v = xmalloc(len + 8);
        memcpy(v, line, len);
        memcpy(v + len, "\r\n", 2);
        read_result a = read_fresh(v, len + 2, key);
        same_result(&r, &a, "appending \\r\\n changed the result");
        free(a.val);
        bool starts_with_bom = len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0;
        if (!starts_with_bom) {
            memcpy(v, " \t\r\n", 4);
            memcpy(v + 4, line, len);
            read_result b = read_fresh(v, len + 4, key);
            same_result(&r, &b, "prepending blanks changed the result");
            free(b.val);
            memcpy(v, "\xEF\xBB\xBF", 3);
            memcpy(v + 3, line, len);
            read_result c = read_fresh(v, len + 3, key);
            same_result(&r, &c, "prepending a BOM changed the result");
            free(c.val);
        }
        free(v);
    }

    if (r.found) { /* the value survives a write -> read round trip */
        lt_json j;
        lt_json_init(&j);
        lt_json_object_begin(&j);
        lt_json_key(&j, key);
        lt_json_string_n(&j, r.val, r.len);
        lt_json_object_end(&j);
        check_writer_text(&j);
        if (j.replacements != 0) fail("writer replaced bytes of a valid value", NULL, NULL);
        expect_read(lt_json_cstr(&j), j.len, key, r.val, r.len);
        lt_json_free(&j);
    }
    free(r.val);
}

static void mode_write(const char *s, size_t n, const char *key) {
    size_t clen, repl;
    char *clean = sanitize_checked(s, n, &clen, &repl);
    const char *decoy = decoy_name(key);

    lt_json j1, j2;
    lt_json_init(&j1);
    lt_json_init(&j2);
    write_object(&j1, key, strlen(key), s, n, decoy);
    write_object(&j2, key, strlen(key), clean, clen, decoy);
    check_writer_text(&j1);
    if (j1.replacements != repl) fail("writer counts replacements unlike sanitize", NULL, NULL);
    if (j2.replacements != 0) fail("writer replaced bytes of sanitized text", NULL, NULL);
    if (j1.len != j2.len || memcmp(lt_json_cstr(&j1), lt_json_cstr(&j2), j1.len) != 0)
        fail("writer(S) differs from writer(sanitize(S))", NULL, NULL);
    expect_read(lt_json_cstr(&j1), j1.len, key, clean, clen);

    /* lt_json_reset reuses the buffer for the next line */
    lt_json_reset(&j1);
    write_object(&j1, key, strlen(key), s, n, decoy);
    if (j1.len != j2.len || memcmp(lt_json_cstr(&j1), lt_json_cstr(&j2), j1.len) != 0)
        fail("writer output differs after lt_json_reset", NULL, NULL);
    lt_json_free(&j1);
    lt_json_free(&j2);
    free(clean);

    check_numbers((const uint8_t *)s, n);
}

static void mode_key(const char *p, size_t n) {
    if (n == 0) return;
    size_t k = (unsigned char)p[0];
    if (k > n - 1) k = n - 1;
    const char *kraw = p + 1, *v = p + 1 + k;
    size_t vlen = n - 1 - k;
    size_t kclen, vclen;
    char *kclean = sanitize_checked(kraw, k, &kclen, NULL);
    char *vclean = sanitize_checked(v, vlen, &vclen, NULL);
    const char *decoy = "nest";
    if (kclen == 4 && memcmp(kclean, "nest", 4) == 0) decoy = "nest2";

    lt_json j;
    lt_json_init(&j);
    write_object(&j, kraw, k, v, vlen, decoy);
    check_writer_text(&j);
    if (memchr(kclean, '\0', kclen) == NULL) expect_read(lt_json_cstr(&j), j.len, kclean, vclean, vclen);
    lt_json_free(&j);
    free(kclean);
    free(vclean);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > 256 * 1024) return 0;
    const char *key = keys[data[0] % 8];
    int mode = data[1] % 3;
    const char *payload = (const char *)data + 2;
    size_t n = size - 2;
    switch (mode) {
    case 0: mode_read(payload, n, key); break;
    case 1: mode_write(payload, n, key); break;
    default: mode_key(payload, n); break;
    }
    return 0;
}
