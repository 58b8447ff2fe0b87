/*
 * tests/fuzz/fuzz_hftok.c — libFuzzer target for the tokenizer.json loader
 * (dataprep/hf_tokenizer.h lt_hf_tokenizer_parse).
 *
 * The input is the content of a tokenizer.json. What is checked (abort() on a violation):
 *   - no crash, leak, UB or exit; the status is LT_OK or LT_ERR_INPUT, and an error has a
 *     message;
 *   - a loaded tokenizer encodes a fixed sample and the input itself (made valid UTF-8),
 *     and decoding the ids gives the text back (added tokens decode to their text).
 * Seeds (tests/fuzz/corpus/fuzz_hftok): small byte-level BPE files in the GPT-2 and the
 * Llama-3 layouts (vocab of the 256 byte characters + a few merges, added tokens).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/hf_tokenizer.h" /* lt_hf_tokenizer_parse */
#include "lib/json.h"              /* lt_utf8_sanitize */
#include "lib/log.h"               /* lt_log_set_level */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_hftok: property violated: %s\n", what);
    if (detail) fprintf(stderr, "  %s\n", detail);
    abort();
}

static void roundtrip(const lt_tokenizer *tok, lt_tok_scratch *s, const char *text, size_t len) {
    size_t cap = lt_tokenizer_max_tokens(len) + 1;
    uint32_t *ids = malloc(cap * sizeof *ids);
    char *clean = malloc(LT_UTF8_SANITIZE_MAX(len) + 1), *back = malloc(LT_UTF8_SANITIZE_MAX(len) + 1);
    if (!ids || !clean || !back) abort();
    size_t repl = 0, clen = lt_utf8_sanitize(text, len, clean, &repl), blen;
    lt_encode_info info;
    lt_error err;
    if (lt_tokenizer_encode(tok, s, clean, clen, ids, cap, &info, &err) != LT_OK) {
        /* PCRE2 may give up on a pathological pattern (LT_ERR_INPUT): allowed */
        if (err.status != LT_ERR_INPUT) fail("encode failed other than LT_ERR_INPUT", err.what);
    } else {
        if (info.n_tokens > cap) fail("more tokens than the bound", NULL);
        if (lt_tokenizer_decode(tok, ids, info.n_tokens, back, clen + 1, &blen, &err) != LT_OK)
            fail("decoding our own ids failed", err.what);
        if (blen != clen || memcmp(back, clean, clen) != 0) fail("decode(encode(text)) != text", NULL);
    }
    free(ids);
    free(clean);
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool quiet;
    if (!quiet) lt_log_set_level(LT_LOG_ERROR), quiet = true;
    lt_tokenizer *tok = NULL;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_hf_tokenizer_parse(&tok, (const char *)data, size, "fuzz/tokenizer.json",
                                         LT_PRETOK_ENGINE_AUTO, &err);
    if (st != LT_OK) {
        if (tok) fail("a tokenizer returned with an error", NULL);
        if (st != LT_ERR_INPUT) fail("status other than LT_OK / LT_ERR_INPUT", err.what);
        if (!err.what[0]) fail("an error without a message", NULL);
        return 0;
    }
    lt_tok_scratch *s = lt_tok_scratch_new();
    if (!s) abort();
    static const char sample[] = "Hello, world! It's 2026: 12345 \xc3\xa9t\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87  \n\n\tx";
    roundtrip(tok, s, sample, sizeof sample - 1);
    roundtrip(tok, s, (const char *)data, size < 2048 ? size : 2048);
    lt_tok_scratch_free(s);
    lt_tokenizer_free(tok);
    return 0;
}
