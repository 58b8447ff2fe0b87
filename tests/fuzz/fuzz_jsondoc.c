/*
 * tests/fuzz/fuzz_jsondoc.c — libFuzzer target for the JSON document parser
 * (lt_json_parse, lt_jv_*, lib/json.h), checked against the JSON-lines reader, the writer
 * and independent references.
 *
 * Input: the bytes of one document. Checked for every input:
 *   - no crash, leak, UB or exit; the status is LT_OK or LT_ERR_INPUT and err.status
 *     agrees; *out is a tree exactly when the status is LT_OK;
 *   - an error has a WHAT and WHERE "line L, column C" that names a byte of the text (or
 *     the position just past a line's last byte / the end);
 *   - the JSON-lines reader, whose grammar is the same for an object, agrees: when the
 *     text is an object (after an optional BOM and blanks) and the document has an error,
 *     the reader fails at the same byte with the same WHAT ("end of line" for "end of
 *     input"; a trailing-characters error at the same byte) unless it stopped earlier
 *     at a wrongly typed "text" member; a parsed object reads like the tree: the FIRST
 *     top-level "text" member's string, "value of key 'text' is <type>", or absent; a
 *     parsed non-object is refused by the reader;
 *   - prepending a BOM (when there is none) and appending "\r\n" gives the same status and
 *     an equal tree.
 * For a parsed tree:
 *   - every node is well-formed: known type; NUL-terminated well-formed UTF-8 strings and
 *     member names; NUMBER text a valid JSON number equal to the document's bytes at the
 *     node's line/column; each node's line/column points at its first byte ('{', '[', '"',
 *     the literal); `replacements` 0 except at the root; nesting within
 *     LT_JSON_MAX_PARSE_DEPTH;
 *   - lt_jv_get returns the LAST member of each name (names without a NUL);
 *   - lt_jv_int64 equals an independent decimal-string reference for every number;
 *   - THE ROUND TRIP: when the tree is shallow enough for the writer
 *     (LT_JSON_MAX_DEPTH), writing it back (lt_json_number_text for numbers) gives
 *     complete well-formed UTF-8 with no replacement, which parses again to an equal tree
 *     with no replacement.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h"
#include "lib/json.h"
#include "tests/testutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const lt_error *err, const char *extra) {
    fprintf(stderr, "fuzz_jsondoc: property violated: %s\n", what);
    if (err != NULL)
        fprintf(stderr, "  status=%d what='%s' where='%s' hint='%s'\n", (int)err->status, err->what, err->where,
                err->hint);
    if (extra != NULL) fprintf(stderr, "  %s\n", extra);
    abort();
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (p == NULL) fail("out of memory in the harness", NULL, NULL);
    return p;
}

/* ------------------------------------------------------------------ positions */

/* Line and column (1-based, bytes) of byte `off` of text: an independent count. */
static void line_col(const char *text, size_t off, size_t *line, size_t *column) {
    size_t l = 1, start = 0;
    for (size_t i = 0; i < off; i++)
        if (text[i] == '\n') {
            l++;
            start = i + 1;
        }
    *line = l;
    *column = off - start + 1;
}

/* After an optional BOM and JSON blanks, the first byte of the value (n if none). */
static size_t value_start(const char *t, size_t n) {
    size_t i = n >= 3 && memcmp(t, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    while (i < n && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) i++;
    return i;
}

/* ------------------------------------------------------------------ references */

/* A JSON number (RFC 8259 grammar), written independently of lib/json.c. */
static bool is_json_number(const char *t, size_t n) {
    size_t i = 0;
    if (i < n && t[i] == '-') i++;
    if (i >= n) return false;
    if (t[i] == '0') {
        i++;
    } else if (t[i] >= '1' && t[i] <= '9') {
        while (i < n && t[i] >= '0' && t[i] <= '9') i++;
    } else {
        return false;
    }
    if (i < n && t[i] == '.') {
        size_t d = ++i;
        while (i < n && t[i] >= '0' && t[i] <= '9') i++;
        if (i == d) return false;
    }
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        if (i < n && (t[i] == '+' || t[i] == '-')) i++;
        size_t d = i;
        while (i < n && t[i] >= '0' && t[i] <= '9') i++;
        if (i == d) return false;
    }
    return i == n;
}

/*
 * The integer value of a valid JSON number literal when it is an integer in int64 range,
 * by moving the decimal point in the digit string: all digits (integer and fraction
 * parts) with the point after `point` of them; the digits after the point must be zeros,
 * the ones before it (zero-padded) form the integer, compared as a string with the int64
 * limits.
 */
static bool ref_int64(const char *t, size_t n, int64_t *out) {
    size_t i = 0;
    bool neg = t[0] == '-';
    if (neg) i++;
    char *digits = xmalloc(n + 1);
    size_t nd = 0, ilen = 0;
    while (i < n && t[i] >= '0' && t[i] <= '9') digits[nd++] = t[i++];
    ilen = nd;
    if (i < n && t[i] == '.') {
        i++;
        while (i < n && t[i] >= '0' && t[i] <= '9') digits[nd++] = t[i++];
    }
    long long exp = 0;
    bool exp_huge = false, exp_neg = false;
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        if (i < n && (t[i] == '+' || t[i] == '-')) exp_neg = t[i++] == '-';
        while (i < n && t[i] == '0') i++;
        size_t sig = 0;
        while (i < n) {
            if (++sig > 12) exp_huge = true;
            else exp = exp * 10 + (t[i] - '0');
            i++;
        }
    }
    bool all_zero = true;
    for (size_t k = 0; k < nd; k++)
        if (digits[k] != '0') all_zero = false;
    bool ok = false;
    if (all_zero) {
        *out = 0;
        ok = true;
    } else if (!exp_huge) {
        long long point = (long long)ilen + (exp_neg ? -exp : exp); /* digits before the point */
        bool frac_zero = true;
        for (long long k = point < 0 ? 0 : point; k < (long long)nd; k++)
            if (digits[k] != '0') frac_zero = false;
        if (point > 0 && frac_zero) {
            /* the integer: digits[0..min(point, nd)) then point - nd zeros */
            char intpart[64];
            size_t len = 0;
            bool too_long = false;
            for (long long k = 0; k < point && !too_long; k++) {
                char c = k < (long long)nd ? digits[k] : '0';
                if (len == 0 && c == '0') continue; /* leading zeros */
                if (len >= 20) too_long = true;
                else intpart[len++] = c;
            }
            intpart[len] = '\0';
            const char *limit = neg ? "9223372036854775808" : "9223372036854775807";
            if (!too_long && (len < 19 || (len == 19 && strcmp(intpart, limit) <= 0))) {
                uint64_t u = 0;
                for (size_t k = 0; k < len; k++) u = u * 10 + (uint64_t)(intpart[k] - '0');
                *out = neg ? (int64_t)(0 - u) : (int64_t)u; /* two's complement: 2^63 -> INT64_MIN */
                ok = true;
            }
        }
    }
    free(digits);
    return ok;
}

/* ------------------------------------------------------------------ tree checks */

static bool is_last_of_name(const lt_jv *obj, size_t i) {
    for (size_t k = i + 1; k < obj->n; k++)
        if (obj->key_lens[k] == obj->key_lens[i] && memcmp(obj->keys[k], obj->keys[i], obj->key_lens[i]) == 0)
            return false;
    return true;
}

/* Levels of containers (a scalar: 0). */
static int jv_depth(const lt_jv *v) {
    int d = 0;
    for (size_t i = 0; i < v->n; i++) {
        int c = jv_depth(&v->items[i]);
        if (c > d) d = c;
    }
    return v->type == LT_JV_ARRAY || v->type == LT_JV_OBJECT ? d + 1 : 0;
}

static void check_node(const lt_jv *v, const char *text, size_t len, bool root) {
    if (!root && v->replacements != 0) fail("replacements set in a non-root node", NULL, NULL);
    if (lt_jv_type_name(v->type) == NULL || strcmp(lt_jv_type_name(v->type), "an unknown type") == 0)
        fail("unknown node type", NULL, NULL);
    /* the node's position: its first byte */
    size_t line, column;
    if (v->line < 1 || v->column < 1) fail("node position not 1-based", NULL, NULL);
    char where[64];
    snprintf(where, sizeof where, "line %zu, column %zu", v->line, v->column);
    size_t off = lt_test_where_to_offset(where, text, len);
    if (off == SIZE_MAX || off >= len) fail("node position outside the text", NULL, where);
    line_col(text, off, &line, &column);
    if (line != v->line || column != v->column) fail("node position inconsistent", NULL, where);
    char c = text[off];
    switch (v->type) {
    case LT_JV_NULL:
        if (len - off < 4 || memcmp(text + off, "null", 4) != 0) fail("null node not at 'null'", NULL, where);
        if (v->text != NULL || v->n != 0) fail("null node with content", NULL, where);
        break;
    case LT_JV_BOOL:
        if (v->boolean ? (len - off < 4 || memcmp(text + off, "true", 4) != 0)
                       : (len - off < 5 || memcmp(text + off, "false", 5) != 0))
            fail("boolean node not at its literal", NULL, where);
        break;
    case LT_JV_NUMBER:
        if (v->text == NULL || v->text[v->len] != '\0') fail("number text not NUL-terminated", NULL, where);
        if (!is_json_number(v->text, v->len)) fail("number text is not a JSON number", NULL, v->text);
        if (len - off < v->len || memcmp(text + off, v->text, v->len) != 0)
            fail("number text differs from the document", NULL, where);
        if (off + v->len < len && text[off + v->len] >= '0' && text[off + v->len] <= '9')
            fail("number text cut short", NULL, where);
        {
            int64_t a = 11, b = 11;
            bool ra = lt_jv_int64(v, &a), rb = ref_int64(v->text, v->len, &b);
            if (ra != rb || (ra && a != b)) fail("lt_jv_int64 differs from the reference", NULL, v->text);
            if (!ra && a != 11) fail("lt_jv_int64 wrote *out and returned false", NULL, v->text);
        }
        break;
    case LT_JV_STRING:
        if (c != '"') fail("string node not at a quote", NULL, where);
        if (v->text == NULL || v->text[v->len] != '\0') fail("string not NUL-terminated", NULL, where);
        if (!lt_utf8_valid(v->text, v->len)) fail("string not well-formed UTF-8", NULL, where);
        break;
    case LT_JV_ARRAY:
    case LT_JV_OBJECT:
        if (c != (v->type == LT_JV_ARRAY ? '[' : '{')) fail("container not at its bracket", NULL, where);
        if (v->n > 0 && v->items == NULL) fail("container without items", NULL, where);
        if (v->type == LT_JV_ARRAY && (v->keys != NULL || v->key_lens != NULL)) fail("array with names", NULL, where);
        if (v->type == LT_JV_OBJECT && v->n > 0 && (v->keys == NULL || v->key_lens == NULL))
            fail("object without names", NULL, where);
        for (size_t i = 0; i < v->n; i++) {
            if (v->type == LT_JV_OBJECT) {
                const char *k = v->keys[i];
                size_t kl = v->key_lens[i];
                if (k == NULL || k[kl] != '\0') fail("member name not NUL-terminated", NULL, where);
                if (!lt_utf8_valid(k, kl)) fail("member name not well-formed UTF-8", NULL, where);
                if (memchr(k, '\0', kl) == NULL && is_last_of_name(v, i) && lt_jv_get(v, k) != &v->items[i])
                    fail("lt_jv_get does not return the last member of a name", NULL, k);
            }
            check_node(&v->items[i], text, len, false);
        }
        break;
    default: fail("unknown node type", NULL, NULL);
    }
    if (v->type != LT_JV_OBJECT && lt_jv_get(v, "") != NULL) fail("lt_jv_get on a non-object", NULL, NULL);
}

/* ------------------------------------------------------------------ agreement with the reader */

static void check_reader(const char *text, size_t len, lt_status st, const lt_jv *doc, const lt_error *derr) {
    size_t vs = value_start(text, len);
    bool object = vs < len && text[vs] == '{';
    lt_error rerr;
    lt_error_clear(&rerr);
    char *val = NULL;
    size_t vlen = 0;
    lt_status rst = lt_jsonl_get_string(text, len, "text", &val, &vlen, &rerr);
    if (st == LT_OK) {
        if (doc->type != LT_JV_OBJECT) {
            if (rst != LT_ERR_INPUT) fail("the reader accepts a non-object document", &rerr, NULL);
            return;
        }
        const lt_jv *first = NULL;
        for (size_t i = 0; i < doc->n && first == NULL; i++)
            if (doc->key_lens[i] == 4 && memcmp(doc->keys[i], "text", 4) == 0) first = &doc->items[i];
        if (first == NULL) {
            if (rst != LT_OK || val != NULL) fail("reader finds a 'text' the tree lacks", &rerr, NULL);
        } else if (first->type == LT_JV_STRING) {
            if (rst != LT_OK || val == NULL) fail("reader misses the tree's 'text'", &rerr, NULL);
            if (vlen != first->len || memcmp(val, first->text, vlen) != 0)
                fail("reader's 'text' differs from the tree's", NULL, NULL);
        } else {
            char want[64];
            snprintf(want, sizeof want, "is %s, expected a string", lt_jv_type_name(first->type));
            if (rst != LT_ERR_INPUT || strstr(rerr.what, want) == NULL)
                fail("reader's type error differs from the tree", &rerr, want);
        }
        free(val);
        return;
    }
    free(val);
    if (rst != LT_ERR_INPUT) fail("the reader accepts a document the parser refuses", derr, rerr.what);
    if (!object) return; /* the reader's top-level messages differ */
    if (strstr(rerr.what, "value of key 'text'") != NULL) return; /* it stopped there */
    size_t off = lt_test_where_to_offset(derr->where, text, len);
    char col[40];
    snprintf(col, sizeof col, "column %zu", off + 1);
    if (strcmp(col, rerr.where) != 0) fail("reader fails at another byte", derr, rerr.where);
    if (strncmp(derr->what, "trailing characters", 19) == 0) {
        if (strncmp(rerr.what, "trailing characters", 19) != 0) fail("reader gives another reason", derr, rerr.what);
        return;
    }
    char what[LT_ERROR_WHAT_MAX];
    const char *e = strstr(derr->what, "end of input");
    if (e != NULL)
        snprintf(what, sizeof what, "%.*send of line%s", (int)(e - derr->what), derr->what, e + strlen("end of input"));
    else
        snprintf(what, sizeof what, "%s", derr->what);
    if (strcmp(what, rerr.what) != 0) fail("reader gives another reason", derr, rerr.what);
}

/* ------------------------------------------------------------------ entry */

static lt_status parse(const char *text, size_t len, lt_jv **doc, lt_error *err) {
    lt_error_clear(err);
    *doc = (lt_jv *)(uintptr_t)1;
    lt_status st = lt_json_parse(text, len, doc, err);
    if (st != LT_OK && st != LT_ERR_INPUT) fail("status is neither OK nor INPUT", err, NULL);
    if (err->status != st) fail("err.status differs from the status", err, NULL);
    if ((st == LT_OK) != (*doc != NULL)) fail("*out does not match the status", err, NULL);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 256 * 1024) return 0;
    /* an exact-size copy, so ASan sees any read past the end */
    char *text = xmalloc(size);
    memcpy(text, data, size);
    lt_jv *doc;
    lt_error err;
    lt_status st = parse(text, size, &doc, &err);
    if (st != LT_OK) {
        if (err.what[0] == '\0') fail("error without WHAT", &err, NULL);
        if (lt_test_where_to_offset(err.where, text, size) == SIZE_MAX)
            fail("error WHERE not a position in the text", &err, NULL);
    } else {
        check_node(doc, text, size, true);
        if (jv_depth(doc) > LT_JSON_MAX_PARSE_DEPTH) fail("tree deeper than the limit", NULL, NULL);
    }
    check_reader(text, size, st, doc, &err);

    /* a BOM before and "\r\n" after change nothing */
    if (!(size >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)) {
        char *framed = xmalloc(size + 5);
        memcpy(framed, "\xEF\xBB\xBF", 3);
        memcpy(framed + 3, text, size);
        memcpy(framed + 3 + size, "\r\n", 2);
        lt_jv *doc2;
        lt_error err2;
        lt_status st2 = parse(framed, size + 5, &doc2, &err2);
        if (st2 != st) fail("a BOM and CRLF around the text change the status", &err2, err.what);
        if (st == LT_OK && !lt_jv_equal(doc, doc2)) fail("a BOM and CRLF around the text change the tree", NULL, NULL);
        lt_jv_free(doc2);
        free(framed);
    }

    if (st == LT_OK) {
        if (jv_depth(doc) <= LT_JSON_MAX_DEPTH) { /* the writer's nesting limit */
            lt_json j;
            lt_json_init(&j);
            lt_json_value(&j, doc);
            if (!lt_json_complete(&j)) fail("written tree is not a complete text", NULL, NULL);
            if (j.replacements != 0) fail("writing the tree needed replacements", NULL, lt_json_cstr(&j));
            if (!lt_utf8_valid(j.buf, j.len)) fail("written tree is not well-formed UTF-8", NULL, NULL);
            lt_jv *again;
            lt_error err3;
            if (parse(j.buf, j.len, &again, &err3) != LT_OK) fail("written tree does not parse", &err3, j.buf);
            if (!lt_jv_equal(doc, again)) fail("round trip changed the tree", NULL, j.buf);
            if (again->replacements != 0) fail("reparsing the written tree needed replacements", NULL, j.buf);
            lt_jv_free(again);
            lt_json_free(&j);
        }
    }
    lt_jv_free(doc);
    free(text);
    return 0;
}
