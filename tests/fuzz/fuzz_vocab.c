/*
 * tests/fuzz/fuzz_vocab.c — libFuzzer target for the tiktoken rank-file loader
 * (dataprep/tokenizer.h lt_tokenizer_load).
 *
 * The input is the content of a rank file (written to a private temporary file, loaded
 * with the r50k_base pattern). What is checked (abort() on a violation):
 *   - no crash, leak, UB or exit; the status is LT_OK or LT_ERR_INPUT;
 *   - an error names the file, and a line number when it is about one line, with
 *     1 <= line <= the number of lines of the input;
 *   - a loaded vocabulary has one token per non-blank line; every id decodes to bytes;
 *     every token's bytes encode as a single piece... not in general (the merge rule may
 *     not rebuild a token), but encoding then decoding any text gives the text back, for
 *     a fixed sample and for the input itself (made valid UTF-8).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataprep/tokenizer.h"
#include "lib/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_vocab: property violated: %s\n", what);
    if (detail) fprintf(stderr, "  %s\n", detail);
    abort();
}

static char path[64];

static void roundtrip(const lt_tokenizer *tok, lt_tok_scratch *s, const char *text, size_t len) {
    size_t cap = lt_tokenizer_max_tokens(len) + 1;
    uint32_t *ids = malloc(cap * sizeof *ids);
    char *clean = malloc(LT_UTF8_SANITIZE_MAX(len) + 1), *back = malloc(LT_UTF8_SANITIZE_MAX(len) + 1);
    size_t repl = 0, clen = lt_utf8_sanitize(text, len, clean, &repl), blen;
    lt_encode_info info;
    lt_error err;
    if (lt_tokenizer_encode(tok, s, text, len, ids, cap, &info, &err) != LT_OK) fail("encode failed", err.what);
    if (info.n_tokens > cap) fail("more tokens than the bound", NULL);
    if (info.utf8_replacements != repl) fail("replacement count differs from lt_utf8_sanitize", NULL);
    if (lt_tokenizer_decode(tok, ids, info.n_tokens, back, clen + 1, &blen, &err) != LT_OK)
        fail("decode failed", err.what);
    if (blen != clen || memcmp(back, clean, clen) != 0) fail("decode(encode(x)) != x", NULL);
    free(ids);
    free(clean);
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_vocab.%ld.tiktoken", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) fail("cannot write the temporary file", path);
    size_t lines = 1, nonblank = 0;
    for (size_t i = 0, start = 0; i <= size; i++)
        if (i == size || data[i] == '\n') {
            size_t e = i;
            if (e > start && data[e - 1] == '\r') e--;
            nonblank += e > start;
            lines += i < size;
            start = i + 1;
        }
    lt_tokenizer *tok = NULL;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_tokenizer_load(&tok, path, "r50k_base", LT_PRETOK_ENGINE_AUTO, &err);
    if (st != LT_OK) {
        if (st != LT_ERR_INPUT) fail("status is neither OK nor INPUT", err.what);
        if (tok) fail("a tokenizer despite an error", NULL);
        if (strncmp(err.where, path, strlen(path)) != 0) fail("the error does not name the file", err.where);
        const char *colon = err.where + strlen(path);
        if (*colon == ':') {
            long line = atol(colon + 1);
            if (line < 1 || (size_t)line > lines) fail("the error's line is outside the file", err.where);
        } else if (*colon) {
            fail("unexpected text after the file name", err.where);
        }
        if (!err.what[0]) fail("an error without a message", NULL);
        return 0;
    }
    if (lt_tokenizer_n_ranks(tok) != nonblank) fail("token count differs from the non-blank lines", NULL);
    for (uint32_t id = 0; id < lt_tokenizer_n_ranks(tok); id++) {
        size_t len;
        if (!lt_tokenizer_token_bytes(tok, id, &len) || len == 0) fail("a rank without bytes", NULL);
    }
    lt_tok_scratch *s = lt_tok_scratch_new();
    static const char sample[] = "Hello, world! It's 2026: naïve café, 東京, 🙂\r\n\tend  ";
    roundtrip(tok, s, sample, sizeof sample - 1);
    roundtrip(tok, s, (const char *)data, size < 4096 ? size : 4096);
    lt_tok_scratch_free(s);
    lt_tokenizer_free(tok);
    return 0;
}
