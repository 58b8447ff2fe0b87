/*
 * tests/fuzz/fuzz_encode.c — libFuzzer target for encoding with the real vocabularies
 * (data/vocab: cl100k_base, o200k_base, r50k_base; dataprep/tokenizer.h).
 *
 * Input: byte 0 picks the encoding (byte % 3) and whether special tokens are allowed
 * (byte / 3 % 2); the rest is the text, arbitrary bytes. What is checked (abort() on a
 * violation):
 *   - no crash, leak, UB, exit or timeout (the merge and the scanners stay near-linear);
 *   - the count of U+FFFD replacements equals lt_utf8_sanitize's;
 *   - decode(encode(x)) == x after the replacement (and == x for valid UTF-8);
 *   - every id is below n_vocab; without allowed specials no special id appears;
 *   - a buffer one id too short gets the same count and the same prefix;
 *   - encoding the text twice with the same scratch gives the same ids;
 *   - merging from bytes only (lt_tokenizer_set_char_start false) gives the same ids as
 *     starting from whole characters where the tokenizer may.
 * Ids against tiktoken itself: tests/dataprep/tiktoken_reference.py.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/tokenizer.h"
#include "lib/json.h"

#ifndef LT_FUZZ_VOCAB_DIR
#define LT_FUZZ_VOCAB_DIR "data/vocab"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_encode: property violated: %s\n", what);
    if (detail) fprintf(stderr, "  %s\n", detail);
    abort();
}

static const char *const NAMES[3] = {"cl100k_base", "o200k_base", "r50k_base"};
static lt_tokenizer *toks[3][2]; /* [encoding][specials allowed] */
static lt_tokenizer *bytes_only[3][2]; /* the same, merging from bytes only */
static lt_tok_scratch *scratch, *scratch_bytes;

static lt_tokenizer *get(int e, int special) {
    if (!toks[e][special]) {
        lt_error err;
        if (lt_tokenizer_load_encoding(&toks[e][special], NAMES[e], LT_FUZZ_VOCAB_DIR, LT_PRETOK_ENGINE_AUTO, &err) != LT_OK)
            fail("cannot load the vocabulary (run from the source tree)", err.what);
        if (special && lt_tokenizer_set_allowed_special(toks[e][special], "all", &err) != LT_OK)
            fail("cannot allow specials", err.what);
        if (lt_tokenizer_load_encoding(&bytes_only[e][special], NAMES[e], LT_FUZZ_VOCAB_DIR, LT_PRETOK_ENGINE_AUTO,
                                       &err) != LT_OK ||
            (special && lt_tokenizer_set_allowed_special(bytes_only[e][special], "all", &err) != LT_OK))
            fail("cannot load the vocabulary a second time", err.what);
        lt_tokenizer_set_char_start(bytes_only[e][special], false);
        /* intentionally never freed: loaded once per process (LeakSanitizer sees them reachable) */
    }
    if (!scratch && !(scratch = lt_tok_scratch_new())) fail("out of memory", NULL);
    if (!scratch_bytes && !(scratch_bytes = lt_tok_scratch_new())) fail("out of memory", NULL);
    return toks[e][special];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int e = data[0] % 3, special = data[0] / 3 % 2;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    lt_tokenizer *tok = get(e, special);
    size_t cap = lt_tokenizer_max_tokens(len) + 1;
    uint32_t *ids = malloc(cap * sizeof *ids), *again = malloc(cap * sizeof *again);
    char *clean = malloc(LT_UTF8_SANITIZE_MAX(len) + 1), *back = malloc(LT_UTF8_SANITIZE_MAX(len) + 1);
    size_t repl = 0, clen = lt_utf8_sanitize(text, len, clean, &repl), blen;
    lt_encode_info info, info2;
    lt_error err;
    if (lt_tokenizer_encode(tok, scratch, text, len, ids, cap, &info, &err) != LT_OK) fail("encode failed", err.what);
    if (info.n_tokens > lt_tokenizer_max_tokens(len)) fail("more tokens than the documented bound", NULL);
    if (info.utf8_replacements != repl) fail("replacement count differs from lt_utf8_sanitize", NULL);
    for (size_t i = 0; i < info.n_tokens; i++) {
        if (ids[i] >= lt_tokenizer_n_vocab(tok)) fail("an id beyond the vocabulary", NULL);
        if (!special && ids[i] >= lt_tokenizer_n_ranks(tok)) fail("a special id in ordinary encoding", NULL);
    }
    if (lt_tokenizer_decode(tok, ids, info.n_tokens, back, clen + 1, &blen, &err) != LT_OK)
        fail("decode failed", err.what);
    if (blen != clen || memcmp(back, clean, clen) != 0) fail("decode(encode(x)) != x", NAMES[e]);
    if (repl == 0 && (clen != len || memcmp(clean, text, len) != 0)) fail("valid UTF-8 was changed", NULL);
    if (info.n_tokens > 0) {
        if (lt_tokenizer_encode(tok, scratch, text, len, again, info.n_tokens - 1, &info2, &err) != LT_OK)
            fail("encode into a short buffer failed", err.what);
        if (info2.n_tokens != info.n_tokens ||
            memcmp(again, ids, (info.n_tokens - 1) * sizeof *ids) != 0)
            fail("a short buffer changed the count or the prefix", NULL);
    }
    if (lt_tokenizer_encode(tok, scratch, text, len, again, cap, &info2, &err) != LT_OK ||
        info2.n_tokens != info.n_tokens || memcmp(again, ids, info.n_tokens * sizeof *ids) != 0)
        fail("encoding twice gave different ids", NULL);
    if (lt_tokenizer_encode(bytes_only[e][special], scratch_bytes, text, len, again, cap, &info2, &err) != LT_OK ||
        info2.n_tokens != info.n_tokens || memcmp(again, ids, info.n_tokens * sizeof *ids) != 0)
        fail("merging from bytes only gave different ids than from whole characters", NAMES[e]);
    free(ids);
    free(again);
    free(clean);
    free(back);
    return 0;
}
