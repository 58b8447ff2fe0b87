/*
 * tests/fuzz/fuzz_wikitext.c — libFuzzer target for the wikitext converter
 * (dataprep/wikitext.h): the input is the wikitext, any bytes.
 *
 * Checked:
 *   - no crash, leak, UB, exit or hang (the converter is linear: a slow unit is a failure);
 *   - the output is at most 4 x input + 16 bytes (by construction it never outgrows the
 *     input by more than one line break per heading);
 *   - the output is tidy: no leading or trailing white space, no blank or tab before a
 *     line break, never three line breaks in a row;
 *   - converting again into the same (now non-empty) buffer gives the same bytes;
 *   - text without any markup byte ({ } [ ] | < & ' _ = * # : ; -) comes out as the input
 *     with only the white space tidied (an independent implementation of that rule).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/wikitext.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what) {
    fprintf(stderr, "fuzz_wikitext: property violated: %s\n", what);
    abort();
}

static int blank(char c) { return c == ' ' || c == '\t'; }

/* The white-space rule of docs/formats.md, written independently: lines lose trailing
 * blanks, runs of empty lines become one, the document is trimmed. */
static size_t ref_tidy(const char *in, size_t n, char *out) {
    size_t o = 0;
    size_t line = 0;
    int empty_run = 0;
    int first = 1;
    while (line <= n) {
        const char *nl = memchr(in + line, '\n', n - line);
        size_t end = nl ? (size_t)(nl - in) : n;
        size_t e = end;
        while (e > line && blank(in[e - 1])) e--;
        if (e == line) {
            empty_run++;
        } else {
            if (!first) {
                out[o++] = '\n';
                if (empty_run > 0) out[o++] = '\n';
            }
            size_t s = line;
            if (first)
                while (s < e && blank(in[s])) s++;
            memcpy(out + o, in + s, e - s);
            o += e - s;
            first = 0;
            empty_run = 0;
        }
        if (!nl) break;
        line = end + 1;
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *in = (const char *)data;
    lt_wikitext_buf b = {0};
    lt_wikitext_to_text(in, size, &b);
    if (b.len > 4 * size + 16) fail("output longer than 4 x input + 16");
    if (b.len > 0) {
        char f = b.data[0], l = b.data[b.len - 1];
        if (blank(f) || f == '\n' || f == '\r' || blank(l) || l == '\n' || l == '\r') fail("output not trimmed");
    }
    for (size_t i = 0; i + 1 < b.len; i++) {
        if (blank(b.data[i]) && b.data[i + 1] == '\n') fail("blank before a line break");
        if (i + 2 < b.len && b.data[i] == '\n' && b.data[i + 1] == '\n' && b.data[i + 2] == '\n')
            fail("three line breaks in a row");
    }
    char *first = malloc(b.len + 1);
    if (first == NULL) fail("out of memory in the harness");
    memcpy(first, b.data, b.len);
    size_t first_len = b.len;
    lt_wikitext_to_text(in, size, &b);
    if (b.len != first_len || memcmp(b.data, first, first_len) != 0) fail("a reused buffer gives another result");

    int plain = 1;
    for (size_t i = 0; i < size && plain; i++) plain = strchr("{}[]|<&'_=*#:;-", in[i]) == NULL || in[i] == '\0';
    /* '\r' is only trimmed at the document's ends: leave such inputs out of this check */
    for (size_t i = 0; i < size && plain; i++) plain = in[i] != '\r';
    if (plain) {
        char *want = malloc(size + 1);
        if (want == NULL) fail("out of memory in the harness");
        size_t wl = ref_tidy(in, size, want);
        if (wl != b.len || memcmp(want, b.data, wl) != 0) fail("text without markup changed beyond white space");
        free(want);
    }
    free(first);
    lt_wikitext_buf_free(&b);
    return 0;
}
