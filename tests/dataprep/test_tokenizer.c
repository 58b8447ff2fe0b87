/*
 * tests/dataprep/test_tokenizer.c — the tokenizer library on its own: rank-file validation
 * (each kind of damage named with file:line), the merge rule against an independent
 * naive implementation on random vocabularies (short pieces and the heap path), decode,
 * the caller-buffer contract, special tokens, sidecars, the vocab search order, threads.
 * Token ids against tiktoken itself: tests/dataprep/tiktoken_reference.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/testutil.h"

#include "dataprep/tokenizer.h"
#include "lib/files.h" /* lt_vocab_find */
#include "lib/json.h" /* lt_utf8_encode */
#include "lib/rng.h"

static char root[256];

static int setup(void **state) {
    (void)state;
    return lt_test_tmpdir_create(root, sizeof root, "tokenizer");
}

static int teardown(void **state) {
    (void)state;
    return lt_test_tmpdir_remove(root);
}

static void path_in(char *buf, size_t size, const char *name) { snprintf(buf, size, "%s/%s", root, name); }

static void write_text(const char *name, const char *text) {
    char p[512];
    path_in(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static void b64(const unsigned char *s, size_t n, char *out) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        out[o++] = A[w >> 18 & 63];
        out[o++] = A[w >> 12 & 63];
        out[o++] = i + 1 < n ? A[w >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? A[w & 63] : '=';
    }
    out[o] = '\0';
}

/* A vocabulary under construction: token bytes by rank. */
typedef struct vocab {
    unsigned char tok[4096][64];
    size_t len[4096];
    size_t n;
} vocab;

static bool vocab_has(const vocab *v, const unsigned char *s, size_t n) {
    for (size_t r = 0; r < v->n; r++)
        if (v->len[r] == n && memcmp(v->tok[r], s, n) == 0) return true;
    return false;
}

/* The 256 single bytes (rank = byte value) plus merges of random pairs of tokens made of
 * the bytes alpha[0..n_alpha), like a BPE training run would add them. */
static void random_vocab_of(vocab *v, lt_rng *rng, size_t merges, const unsigned char *alpha, unsigned n_alpha) {
    v->n = 0;
    for (int b = 0; b < 256; b++) {
        v->tok[v->n][0] = (unsigned char)b;
        v->len[v->n++] = 1;
    }
    size_t tries = 0;
    while (v->n < 256 + merges && tries++ < 100000) {
        size_t pool = v->n - 256 + n_alpha;
        size_t a = lt_rng_below(rng, pool), b = lt_rng_below(rng, pool);
        size_t ra = a < n_alpha ? alpha[a] : 256 + (a - n_alpha), rb = b < n_alpha ? alpha[b] : 256 + (b - n_alpha);
        if (v->len[ra] + v->len[rb] > 60) continue;
        unsigned char s[64];
        memcpy(s, v->tok[ra], v->len[ra]);
        memcpy(s + v->len[ra], v->tok[rb], v->len[rb]);
        size_t n = v->len[ra] + v->len[rb];
        if (vocab_has(v, s, n)) continue;
        memcpy(v->tok[v->n], s, n);
        v->len[v->n++] = n;
    }
}

/* random_vocab_of over the letters 'a'..'a'+letters-1 */
static void random_vocab(vocab *v, lt_rng *rng, size_t merges, unsigned letters) {
    unsigned char alpha[26];
    for (unsigned k = 0; k < letters; k++) alpha[k] = (unsigned char)('a' + k);
    random_vocab_of(v, rng, merges, alpha, letters);
}

static void write_vocab(const vocab *v, const char *name) {
    char p[512], line[200];
    path_in(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    for (size_t r = 0; r < v->n; r++) {
        b64(v->tok[r], v->len[r], line);
        fprintf(f, "%s %zu\n", line, r);
    }
    assert_int_equal(fclose(f), 0);
}

static long naive_rank(const vocab *v, const unsigned char *s, size_t n) {
    for (size_t r = 0; r < v->n; r++)
        if (v->len[r] == n && memcmp(v->tok[r], s, n) == 0) return (long)r;
    return -1;
}

/* tiktoken's rule, written as plainly as possible: parts = single bytes; while some
 * adjacent pair concatenates to a token, merge the pair with the lowest rank (leftmost
 * first). Returns the token count, ids in out. */
static size_t naive_merge(const vocab *v, const unsigned char *s, size_t n, uint32_t *out) {
    long whole = naive_rank(v, s, n);
    if (whole >= 0) return out[0] = (uint32_t)whole, 1;
    size_t *b = malloc((n + 1) * sizeof *b), parts = n;
    for (size_t i = 0; i <= n; i++) b[i] = i;
    for (;;) {
        long best = -1;
        size_t at = 0;
        for (size_t i = 0; i + 1 < parts; i++) {
            long r = naive_rank(v, s + b[i], b[i + 2] - b[i]);
            if (r >= 0 && (best < 0 || r < best)) best = r, at = i;
        }
        if (best < 0) break;
        memmove(b + at + 1, b + at + 2, (parts - at - 1) * sizeof *b);
        parts--;
    }
    for (size_t i = 0; i < parts; i++) out[i] = (uint32_t)naive_rank(v, s + b[i], b[i + 1] - b[i]);
    free(b);
    return parts;
}

static lt_tokenizer *load_ok(const char *vocab_name, const char *pattern) {
    char p[512];
    path_in(p, sizeof p, vocab_name);
    lt_tokenizer *tok = NULL;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_tokenizer_load(&tok, p, pattern, LT_PRETOK_ENGINE_AUTO, &err);
    if (st != LT_OK) fail_msg("load %s: %s (%s)", p, err.what, err.where);
    return tok;
}

/* Random letter strings (one piece under the r50k pattern) of lengths around the small
 * path / heap boundary and far beyond, against the naive rule, with the memos warm and
 * forgotten (lt_tok_scratch_forget), the scratch moving between tokenizers. */
static void test_merge_matches_naive_rule(void **state) {
    (void)state;
    static vocab v;
    lt_rng rng;
    lt_rng_seed(&rng, 20261121);
    lt_tok_scratch *s = lt_tok_scratch_new();
    assert_non_null(s);
    size_t cap = 5000;
    uint32_t *ids = malloc(cap * sizeof *ids), *want = malloc(cap * sizeof *want);
    for (int round = 0; round < 6; round++) {
        unsigned letters = 2 + (unsigned)round % 3;
        random_vocab(&v, &rng, 150 + 100 * (size_t)round, letters);
        write_vocab(&v, "rand.tiktoken");
        lt_tokenizer *tok = load_ok("rand.tiktoken", "r50k_base");
        for (int k = 0; k < 60; k++) {
            static const size_t lens[] = {2, 3, 5, 8, 17, 63, 64, 65, 127, 128, 300, 1000, 3000};
            size_t n = lens[lt_rng_below(&rng, sizeof lens / sizeof lens[0])];
            unsigned char text[3000];
            for (size_t i = 0; i < n; i++) text[i] = (unsigned char)('a' + lt_rng_below(&rng, letters));
            lt_encode_info info;
            lt_error err;
            size_t m = naive_merge(&v, text, n, want);
            /* twice: the second time from the memos (pieces up to 30 bytes), unless they were
             * just forgotten (every third text): both must give the naive rule's ids */
            for (int again = 0; again < 2; again++) {
                assert_int_equal(lt_tokenizer_encode(tok, s, (const char *)text, n, ids, cap, &info, &err), LT_OK);
                if (info.n_tokens != m || memcmp(ids, want, m * sizeof *ids) != 0)
                    fail_msg("round %d: a %zu-byte piece (%s): %zu tokens, naive rule %zu", round, n,
                             again ? "again" : "first", info.n_tokens, m);
                if (k % 3 == 0) lt_tok_scratch_forget(s);
            }
            /* decoding gives the text back */
            char back[3000];
            size_t blen;
            assert_int_equal(lt_tokenizer_decode(tok, ids, info.n_tokens, back, sizeof back, &blen, &err), LT_OK);
            assert_int_equal(blen, n);
            assert_memory_equal(back, text, n);
        }
        lt_tokenizer_free(tok);
    }
    free(ids);
    free(want);
    lt_tok_scratch_free(s);
}

/* Pieces of 2- and 3-byte characters, which the tokenizer may start merging from whole
 * characters instead of bytes (dataprep/tokenizer.c, build_chars: only where that gives
 * the same ids), against the naive rule on bytes. The random vocabularies are merges of
 * the characters' bytes, so they hold whole characters at every rank and tokens across
 * characters' edges (a continuation byte and the next lead byte, a space and a lead byte)
 * of lower rank than the characters they cut: the contexts where starting from the whole
 * character would be wrong. Texts: an optional space and 1 to 100 characters (one piece
 * under the r50k pattern: ` ?\p{L}+`), memos warm and forgotten. */
static void test_merge_from_characters_matches_naive_rule(void **state) {
    (void)state;
    static vocab v;
    /* а б р (2 bytes: D0 B0, D0 B1, D1 80), ა ბ (3 bytes: E1 83 90, E1 83 91), 中 (E4 B8 AD) */
    static const char *chars[] = {"\xd0\xb0", "\xd0\xb1", "\xd1\x80", "\xe1\x83\x90", "\xe1\x83\x91", "\xe4\xb8\xad"};
    static const unsigned char alpha[] = {0x20, 0xd0, 0xd1, 0xb0, 0xb1, 0x80, 0xe1, 0x83, 0x90, 0x91, 0xe4, 0xb8, 0xad};
    lt_rng rng;
    lt_rng_seed(&rng, 20261126);
    lt_tok_scratch *s = lt_tok_scratch_new();
    assert_non_null(s);
    uint32_t ids[320], want[320];
    size_t checked = 0, with_chars = 0;
    for (int round = 0; round < 30; round++) {
        random_vocab_of(&v, &rng, 60 + 20 * (size_t)(round % 12), alpha, sizeof alpha);
        /* and most of the characters whole, and the other units (a 3-byte character's first
         * two bytes, a space and those), at random ranks (whether their bytes' merges can
         * reach them or not) */
        static const char *units[] = {"\xd0\xb0", "\xd0\xb1", "\xd1\x80", "\xe1\x83\x90", "\xe1\x83\x91",
                                      "\xe4\xb8\xad", "\xe1\x83", "\xe4\xb8", " \xe1\x83", " \xe4\xb8"};
        for (size_t c = 0; c < sizeof units / sizeof units[0]; c++) {
            size_t len = strlen(units[c]);
            if (lt_rng_below(&rng, 4) == 0 || vocab_has(&v, (const unsigned char *)units[c], len)) continue;
            size_t at = 256 + lt_rng_below(&rng, v.n - 255);
            memmove(v.tok[at + 1], v.tok[at], (v.n - at) * sizeof v.tok[0]);
            memmove(v.len + at + 1, v.len + at, (v.n - at) * sizeof v.len[0]);
            memcpy(v.tok[at], units[c], len);
            v.len[at] = len;
            v.n++;
        }
        write_vocab(&v, "chars.tiktoken");
        lt_tokenizer *tok = load_ok("chars.tiktoken", "r50k_base");
        /* the scripts' characters this vocabulary has as tokens */
        unsigned whole = 0;
        for (size_t c = 0; c < sizeof chars / sizeof chars[0]; c++)
            whole += vocab_has(&v, (const unsigned char *)chars[c], strlen(chars[c]));
        for (int k = 0; k < 150; k++) {
            unsigned char text[320];
            size_t n = 0;
            if (lt_rng_below(&rng, 2)) text[n++] = ' ';
            /* up to 21 characters (<= 64 bytes), or up to 100 (more than 64 parts: merge_large) */
            size_t nchars = 1 + lt_rng_below(&rng, k % 4 ? 21 : 100);
            for (size_t c = 0; c < nchars; c++) {
                /* mostly one script per text, as in real text */
                size_t pick = lt_rng_below(&rng, 4) ? (size_t)(k % 2 ? lt_rng_below(&rng, 3) : 3 + lt_rng_below(&rng, 3))
                                                      : lt_rng_below(&rng, sizeof chars / sizeof chars[0]);
                size_t len = strlen(chars[pick]);
                memcpy(text + n, chars[pick], len);
                n += len;
            }
            size_t m = naive_merge(&v, text, n, want);
            lt_encode_info info;
            lt_error err;
            for (int again = 0; again < 2; again++) {
                assert_int_equal(lt_tokenizer_encode(tok, s, (const char *)text, n, ids, 320, &info, &err), LT_OK);
                if (info.n_tokens != m || memcmp(ids, want, m * sizeof *ids) != 0)
                    fail_msg("round %d, text %d: a %zu-byte piece (%s): %zu tokens, naive rule %zu", round, k, n,
                             again ? "again" : "first", info.n_tokens, m);
                if (k % 3 == 0) lt_tok_scratch_forget(s);
            }
            checked++;
            with_chars += whole > 0;
        }
        lt_tokenizer_free(tok);
    }
    /* most vocabularies hold some of the characters whole: the path from characters ran */
    assert_true(with_chars > checked / 2);

    /* A merge of lower rank than a character's own token (the token "аб" before "а"): from
     * the bytes it waits for "а", and "бр" comes first; started from whole characters it
     * would come first. Bytes, then б р аб бр а (ranks 256 .. 260). */
    v.n = 256;
    static const char *extra[] = {"\xd0\xb1", "\xd1\x80", "\xd0\xb0\xd0\xb1", "\xd0\xb1\xd1\x80", "\xd0\xb0"};
    for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++) {
        v.len[v.n] = strlen(extra[k]);
        memcpy(v.tok[v.n++], extra[k], strlen(extra[k]));
    }
    write_vocab(&v, "chars.tiktoken");
    lt_tokenizer *tok = load_ok("chars.tiktoken", "r50k_base");
    const char *abr = "\xd0\xb0\xd0\xb1\xd1\x80"; /* "абр" */
    lt_encode_info info;
    lt_error err;
    assert_int_equal(lt_tokenizer_encode(tok, s, abr, strlen(abr), ids, 320, &info, &err), LT_OK);
    assert_int_equal(naive_merge(&v, (const unsigned char *)abr, strlen(abr), want), 2);
    assert_int_equal(want[0], 260); /* а */
    assert_int_equal(want[1], 259); /* бр */
    assert_int_equal(info.n_tokens, 2);
    assert_memory_equal(ids, want, 2 * sizeof *ids);
    /* the same 12 times over (36 characters: a piece of more than 64 bytes in 36 parts) and
     * 30 times (90 parts: the heap path): а бр а бр ... */
    for (int times = 12; times <= 30; times += 18) {
        char abrs[180];
        for (int k = 0; k < times; k++) memcpy(abrs + 6 * k, abr, 6);
        assert_int_equal(lt_tokenizer_encode(tok, s, abrs, 6 * (size_t)times, ids, 320, &info, &err), LT_OK);
        assert_int_equal(info.n_tokens, 2 * (size_t)times);
        for (int k = 0; k < 2 * times; k++) assert_int_equal(ids[k], k % 2 ? 259 : 260);
    }
    lt_tokenizer_free(tok);

    /* A space and a character's first two bytes ranked below the merge of those two bytes:
     * from the bytes, "\x83\x90" (ranked between) takes the 0x83 first, so " ა" is three
     * tokens and the space unit never forms; a unit admitted without its first merge below
     * its rank would give two. Bytes, then " \xe1\x83" "\x83\x90" "\xe1\x83" (256 .. 258). */
    v.n = 256;
    static const char *later[] = {" \xe1\x83", "\x83\x90", "\xe1\x83"};
    for (size_t k = 0; k < sizeof later / sizeof later[0]; k++) {
        v.len[v.n] = strlen(later[k]);
        memcpy(v.tok[v.n++], later[k], strlen(later[k]));
    }
    write_vocab(&v, "chars.tiktoken");
    tok = load_ok("chars.tiktoken", "r50k_base");
    const char *space_a = " \xe1\x83\x90\xe1\x83\x90"; /* " აა" */
    size_t m = naive_merge(&v, (const unsigned char *)space_a, strlen(space_a), want);
    assert_int_equal(lt_tokenizer_encode(tok, s, space_a, strlen(space_a), ids, 320, &info, &err), LT_OK);
    assert_int_equal(m, 5); /* " " "\xe1" "\x83\x90" "\xe1" "\x83\x90" */
    assert_int_equal(info.n_tokens, m);
    assert_memory_equal(ids, want, m * sizeof *ids);
    lt_tokenizer_free(tok);
    lt_tok_scratch_free(s);
}

/* A 1 MiB piece of one letter goes through the heap path; its tokens decode back. */
static void test_long_piece(void **state) {
    (void)state;
    static vocab v;
    v.n = 0;
    for (int b = 0; b < 256; b++) v.tok[v.n][0] = (unsigned char)b, v.len[v.n++] = 1;
    for (size_t k = 2; k <= 16; k *= 2) { /* a^2, a^4, ... a^16 */
        memset(v.tok[v.n], 'a', k);
        v.len[v.n++] = k;
    }
    write_vocab(&v, "pow.tiktoken");
    lt_tokenizer *tok = load_ok("pow.tiktoken", "r50k_base");
    size_t n = 1 << 20;
    char *text = malloc(n + 1);
    memset(text, 'a', n);
    text[n] = 'a'; /* not read */
    uint32_t *ids = malloc((n / 16 + 8) * sizeof *ids);
    lt_tok_scratch *s = lt_tok_scratch_new();
    lt_encode_info info;
    lt_error err;
    assert_int_equal(lt_tokenizer_encode(tok, s, text, n, ids, n / 16 + 8, &info, &err), LT_OK);
    assert_int_equal(info.n_tokens, n / 16); /* pairs merge left to right at every level */
    for (size_t i = 0; i < info.n_tokens; i++) assert_int_equal(ids[i], 256 + 3);
    /* n - 1 bytes: the leftover single 'a' at the end */
    assert_int_equal(lt_tokenizer_encode(tok, s, text, n - 1, ids, n / 16 + 8, &info, &err), LT_OK);
    assert_int_equal(info.n_tokens, n / 16 - 1 + 4);
    assert_int_equal(ids[info.n_tokens - 1], 'a');
    assert_int_equal(ids[info.n_tokens - 2], 256 + 0);
    free(ids);
    free(text);
    lt_tok_scratch_free(s);
    lt_tokenizer_free(tok);
}

/* Each kind of damage to a rank file is an error naming the line. */
static void test_rank_file_errors(void **state) {
    (void)state;
    static vocab v;
    v.n = 0;
    for (int b = 0; b < 256; b++) v.tok[v.n][0] = (unsigned char)b, v.len[v.n++] = 1;
    write_vocab(&v, "bytes.tiktoken");
    char good[512];
    path_in(good, sizeof good, "bytes.tiktoken");
    char *base = NULL;
    size_t base_len = 0;
    FILE *f = fopen(good, "rb");
    assert_non_null(f);
    base = malloc(1 << 16);
    base_len = fread(base, 1, 1 << 16, f);
    fclose(f);
    static const struct {
        const char *append; /* after the 256 good lines (lines 1..256) */
        const char *where;
        const char *what;
    } cases[] = {
        {"YWI= 256\nYWI= 257\n", ":258", "duplicate token"},
        {"YWI= 255\n", ":257", "duplicate rank 255 (first on line 256)"},
        {"YWI 256\n", ":257", "base64 length"},
        {"Y*I= 256\n", ":257", "outside the base64 alphabet"},
        {"YWJ= 256\n", ":257", "non-zero bits"},
        {"YWI=256\n", ":257", "no space"},
        {"YWI= \n", ":257", "rank is missing"},
        {"YWI= -1\n", ":257", "not a non-negative integer"},
        {"YWI= 12x\n", ":257", "not a non-negative integer"},
        {"YWI= 300\n", ":257", "rank 256 is missing"},
        {"YWI= 99999999999\n", ":257", "too large"},
        {"\n\nYWI= 258\nYWM= 256\n", ":259", "gap"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char p[512];
        path_in(p, sizeof p, "bad.tiktoken");
        f = fopen(p, "wb");
        fwrite(base, 1, base_len, f);
        fputs(cases[c].append, f);
        fclose(f);
        lt_tokenizer *tok = NULL;
        lt_error err;
        lt_error_clear(&err);
        assert_int_equal(lt_tokenizer_load(&tok, p, "r50k_base", LT_PRETOK_ENGINE_AUTO, &err), LT_ERR_INPUT);
        assert_null(tok);
        if (!strstr(err.where, "bad.tiktoken") || !strstr(err.where, cases[c].where) ||
            !strstr(err.what, cases[c].what))
            fail_msg("case %zu: got '%s' (%s), want '%s' at %s", c, err.what, err.where, cases[c].what,
                     cases[c].where);
    }
    /* a missing single byte */
    char p[512];
    path_in(p, sizeof p, "bad.tiktoken");
    f = fopen(p, "wb");
    fwrite(base, 1, base_len - strlen("/w== 255\n"), f); /* drop byte 0xFF */
    fclose(f);
    lt_tokenizer *tok = NULL;
    lt_error err;
    lt_error_clear(&err);
    assert_int_equal(lt_tokenizer_load(&tok, p, "r50k_base", LT_PRETOK_ENGINE_AUTO, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "0xFF"));
    /* an empty file, a missing file */
    write_text("empty.tiktoken", "");
    path_in(p, sizeof p, "empty.tiktoken");
    assert_int_equal(lt_tokenizer_load(&tok, p, "r50k_base", LT_PRETOK_ENGINE_AUTO, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "no tokens"));
    path_in(p, sizeof p, "absent.tiktoken");
    assert_int_equal(lt_tokenizer_load(&tok, p, "r50k_base", LT_PRETOK_ENGINE_AUTO, &err), LT_ERR_IO);
    /* CRLF line ends are accepted */
    path_in(p, sizeof p, "crlf.tiktoken");
    f = fopen(p, "wb");
    for (size_t r = 0; r < 256; r++) {
        char line[16];
        b64(v.tok[r], 1, line);
        fprintf(f, "%s %zu\r\n", line, r);
    }
    fclose(f);
    tok = load_ok("crlf.tiktoken", "r50k_base");
    assert_int_equal(lt_tokenizer_n_ranks(tok), 256);
    /* r50k's pattern, not its special token: that belongs to r50k's own rank file */
    assert_int_equal(lt_tokenizer_n_vocab(tok), 256);
    assert_int_equal(lt_tokenizer_special_id(tok, "<|endoftext|>"), -1);
    lt_tokenizer_free(tok);
    free(base);
}

static void test_sidecar_and_specials(void **state) {
    (void)state;
    static vocab v;
    lt_rng rng;
    lt_rng_seed(&rng, 7);
    random_vocab(&v, &rng, 40, 3);
    write_vocab(&v, "mine.tiktoken");
    write_text("mine.json", "{\n \"name\": \"mine\",\n \"pat_str\": \"\\\\S+|\\\\s+\",\n"
                            " \"special_tokens\": {\"<|end|>\": 1000, \"<|end|>x\": 1001}\n}\n");
    lt_tokenizer *tok = load_ok("mine.tiktoken", NULL); /* the sidecar next to it */
    assert_string_equal(lt_tokenizer_name(tok), "mine");
    assert_string_equal(lt_tokenizer_engine(tok), "pcre2");
    assert_int_equal(lt_tokenizer_n_vocab(tok), 1002);
    assert_int_equal(lt_tokenizer_special_id(tok, "<|end|>"), 1000);
    assert_int_equal(lt_tokenizer_special_id(tok, "nope"), -1);
    lt_tok_scratch *s = lt_tok_scratch_new();
    uint32_t ids[64];
    lt_encode_info info;
    lt_error err;
    const char *text = "ab<|end|>xc";
    /* ordinary: the special text is bytes */
    assert_int_equal(lt_tokenizer_encode(tok, s, text, strlen(text), ids, 64, &info, &err), LT_OK);
    for (size_t i = 0; i < info.n_tokens; i++) assert_true(ids[i] < 1000);
    /* allowed: the longest special at the leftmost position */
    assert_int_equal(lt_tokenizer_set_allowed_special(tok, "all", &err), LT_OK);
    assert_int_equal(lt_tokenizer_encode(tok, s, text, strlen(text), ids, 64, &info, &err), LT_OK);
    assert_true(info.n_tokens >= 3);
    size_t found = 0;
    for (size_t i = 0; i < info.n_tokens; i++) found += ids[i] == 1001;
    assert_int_equal(found, 1);
    assert_int_equal(lt_tokenizer_set_allowed_special(tok, "<|end|>", &err), LT_OK);
    assert_int_equal(lt_tokenizer_encode(tok, s, text, strlen(text), ids, 64, &info, &err), LT_OK);
    found = 0;
    for (size_t i = 0; i < info.n_tokens; i++) found += ids[i] == 1000;
    assert_int_equal(found, 1);
    char back[64];
    size_t blen;
    assert_int_equal(lt_tokenizer_decode(tok, ids, info.n_tokens, back, sizeof back, &blen, &err), LT_OK);
    assert_int_equal(blen, strlen(text));
    assert_memory_equal(back, text, blen);
    assert_int_equal(lt_tokenizer_set_allowed_special(tok, "<|nope|>", &err), LT_ERR_USAGE);
    assert_non_null(strstr(err.what, "<|nope|>"));
    /* unknown id */
    uint32_t bad[2] = {1, 999};
    assert_int_equal(lt_tokenizer_decode(tok, bad, 2, back, sizeof back, &blen, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "999"));
    assert_string_equal(err.where, "token 1");
    lt_tok_scratch_free(s);
    lt_tokenizer_free(tok);

    /* sidecar damage */
    static const struct {
        const char *json, *what;
    } bad_sidecars[] = {
        {"{\"special_tokens\": {}}", "pat_str"},
        {"{\"pat_str\": \"\\\\S+\", \"special_tokens\": []}", "special_tokens"},
        {"{\"pat_str\": \"\\\\S+\", \"special_tokens\": {\"x\": \"1\"}}", "expected an integer"},
        {"{\"pat_str\": \"\\\\S+\", \"special_tokens\": {\"x\": 5}}", "not above"},
        {"{\"pat_str\": \"\\\\S+\", \"special_tokens\": {\"x\": 900, \"y\": 900}}", "share id"},
        {"{\"pat_str\": \"(unclosed\"}", "pattern"},
        {"{\"pat_str\": ", "line 1"},
        {"[]", "object"},
    };
    for (size_t c = 0; c < sizeof bad_sidecars / sizeof bad_sidecars[0]; c++) {
        write_text("bad.json", bad_sidecars[c].json);
        char vp[512], jp[512];
        path_in(vp, sizeof vp, "mine.tiktoken");
        path_in(jp, sizeof jp, "bad.json");
        lt_error_clear(&err);
        tok = NULL;
        lt_status st = lt_tokenizer_load(&tok, vp, jp, LT_PRETOK_ENGINE_AUTO, &err);
        assert_null(tok);
        assert_int_not_equal(st, LT_OK);
        char all[2048];
        snprintf(all, sizeof all, "%s (%s)", err.what, err.where);
        if (!strstr(all, bad_sidecars[c].what)) fail_msg("case %zu: '%s' lacks '%s'", c, all, bad_sidecars[c].what);
    }
    /* no sidecar next to the file, an unknown pattern name */
    write_vocab(&v, "lonely.tiktoken");
    char vp[512];
    path_in(vp, sizeof vp, "lonely.tiktoken");
    assert_int_equal(lt_tokenizer_load(&tok, vp, NULL, LT_PRETOK_ENGINE_AUTO, &err), LT_ERR_USAGE);
    assert_non_null(strstr(err.where, "lonely.json"));
    assert_int_equal(lt_tokenizer_load(&tok, vp, "gpt5_base", LT_PRETOK_ENGINE_AUTO, &err), LT_ERR_USAGE);
    assert_non_null(strstr(err.what, "gpt5_base"));
}

/* Too small a buffer: the count is right, the first cap ids are written, nothing more. */
static void test_caller_buffer(void **state) {
    (void)state;
    static vocab v;
    lt_rng rng;
    lt_rng_seed(&rng, 11);
    random_vocab(&v, &rng, 30, 2);
    write_vocab(&v, "small.tiktoken");
    lt_tokenizer *tok = load_ok("small.tiktoken", "cl100k_base");
    assert_string_equal(lt_tokenizer_engine(tok), "cl100k");
    lt_tok_scratch *s = lt_tok_scratch_new();
    const char *text = "ab ba, 12345 bab\n\n  ";
    uint32_t full[64], part[8];
    lt_encode_info info, info2;
    lt_error err;
    assert_int_equal(lt_tokenizer_encode(tok, s, text, strlen(text), full, 64, &info, &err), LT_OK);
    assert_true(info.n_tokens > 5);
    for (size_t i = 0; i < 8; i++) part[i] = 0xDEADBEEF;
    assert_int_equal(lt_tokenizer_encode(tok, s, text, strlen(text), part, 5, &info2, &err), LT_OK);
    assert_int_equal(info2.n_tokens, info.n_tokens);
    assert_memory_equal(part, full, 5 * sizeof *part);
    assert_int_equal(part[5], 0xDEADBEEF);
    assert_int_equal(lt_tokenizer_encode(tok, s, text, 0, NULL, 0, &info2, &err), LT_OK);
    assert_int_equal(info2.n_tokens, 0);
    /* invalid UTF-8 is repaired and counted: 0xFF, a truncated 3-byte sequence, 0xC0 0x80 */
    const char bad[] = "a\xFF" "b\xE2\x82" "c\xC0\x80";
    assert_int_equal(lt_tokenizer_encode(tok, s, bad, sizeof bad - 1, full, 64, &info, &err), LT_OK);
    assert_int_equal(info.utf8_replacements, 4);
    char back[64];
    size_t blen;
    assert_int_equal(lt_tokenizer_decode(tok, full, info.n_tokens, back, sizeof back, &blen, &err), LT_OK);
    const char want[] = "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD\xEF\xBF\xBD";
    assert_int_equal(blen, sizeof want - 1);
    assert_memory_equal(back, want, blen);
    /* decode into a short buffer reports the full length */
    assert_int_equal(lt_tokenizer_decode(tok, full, info.n_tokens, back, 3, &blen, &err), LT_OK);
    assert_int_equal(blen, sizeof want - 1);
    assert_memory_equal(back, want, 3);
    lt_tok_scratch_free(s);
    lt_tokenizer_free(tok);
}

/* NAME found in --vocab-dir, then $LONGTAIL_VOCAB_DIR; a clear error listing both. */
static void test_search_order(void **state) {
    (void)state;
    static vocab v;
    v.n = 0;
    for (int b = 0; b < 256; b++) v.tok[v.n][0] = (unsigned char)b, v.len[v.n++] = 1;
    char d1[512], d2[512];
    path_in(d1, sizeof d1, "d1");
    path_in(d2, sizeof d2, "d2");
    assert_int_equal(mkdir(d1, 0755), 0);
    assert_int_equal(mkdir(d2, 0755), 0);
    write_vocab(&v, "d2/enc.tiktoken");
    write_text("d2/enc.json", "{\"pat_str\": \"\\\\S+|\\\\s+\"}");
    char *vp, *jp;
    lt_error err;
    unsetenv("LONGTAIL_VOCAB_DIR");
    assert_int_equal(lt_vocab_find("enc", d1, &vp, &jp, &err), LT_ERR_USAGE);
    assert_non_null(strstr(err.what, d1));
    assert_non_null(strstr(err.hint, "--vocab-dir"));
    assert_int_equal(setenv("LONGTAIL_VOCAB_DIR", d2, 1), 0);
    assert_int_equal(lt_vocab_find("enc", d1, &vp, &jp, &err), LT_OK);
    assert_non_null(strstr(vp, "d2/enc.tiktoken"));
    assert_non_null(strstr(jp, "d2/enc.json"));
    free(vp);
    free(jp);
    assert_int_equal(lt_vocab_find("enc", d2, &vp, &jp, &err), LT_OK);
    free(vp);
    free(jp);
    assert_int_equal(lt_vocab_find("../enc", d2, &vp, &jp, &err), LT_ERR_USAGE);
    lt_tokenizer *tok;
    assert_int_equal(lt_tokenizer_load_encoding(&tok, "enc", NULL, LT_PRETOK_ENGINE_AUTO, &err), LT_OK);
    assert_string_equal(lt_tokenizer_engine(tok), "pcre2");
    lt_tokenizer_free(tok);
    unsetenv("LONGTAIL_VOCAB_DIR");
}

/* A rank file of its own with a known encoding's pattern (Llama-3's tokenizer.model with
 * cl100k's): more ranks than cl100k's special ids, which must not be added to it. */
static void test_foreign_vocab_with_known_pattern(void **state) {
    (void)state;
    char p[512], line[64];
    path_in(p, sizeof p, "big.tiktoken");
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    size_t rank = 0;
    unsigned char t[3];
    for (int b = 0; b < 256; b++, rank++) {
        t[0] = (unsigned char)b;
        b64(t, 1, line);
        fprintf(f, "%s %zu\n", line, rank);
    }
    for (int x = 0; x < 256; x++)
        for (int y = 0; y < 256; y++, rank++) {
            t[0] = (unsigned char)x, t[1] = (unsigned char)y;
            b64(t, 2, line);
            fprintf(f, "%s %zu\n", line, rank);
        }
    for (int x = 'a'; x <= 'z'; x++) /* + 3-byte tokens past cl100k's special ids */
        for (int y = 0; y < 256; y++)
            for (int z = 'a'; z <= 'z'; z++, rank++) {
                t[0] = (unsigned char)x, t[1] = (unsigned char)y, t[2] = (unsigned char)z;
                b64(t, 3, line);
                fprintf(f, "%s %zu\n", line, rank);
            }
    assert_int_equal(fclose(f), 0);
    assert_true(rank > 100276);
    lt_tokenizer *tok = load_ok("big.tiktoken", "cl100k_base");
    assert_string_equal(lt_tokenizer_engine(tok), "cl100k");
    assert_int_equal(lt_tokenizer_n_ranks(tok), rank);
    assert_int_equal(lt_tokenizer_n_vocab(tok), rank);
    assert_int_equal(lt_tokenizer_special_id(tok, "<|endoftext|>"), -1);
    lt_tok_scratch *s = lt_tok_scratch_new();
    uint32_t ids[16];
    lt_encode_info info;
    lt_error err;
    assert_int_equal(lt_tokenizer_encode(tok, s, "abc", 3, ids, 16, &info, &err), LT_OK);
    assert_int_equal(info.n_tokens, 1); /* "abc" is one 3-byte token */
    lt_tok_scratch_free(s);
    lt_tokenizer_free(tok);
}

/* One tokenizer, several threads with their own scratch: the same ids as alone. */
typedef struct job {
    const lt_tokenizer *tok;
    const char *text;
    size_t len;
    const uint32_t *want;
    size_t nwant;
    int bad;
} job;

static void *thread_main(void *arg) {
    job *j = arg;
    lt_tok_scratch *s = lt_tok_scratch_new();
    uint32_t *ids = malloc(j->len * sizeof *ids + 4);
    for (int rep = 0; rep < 20; rep++) {
        lt_encode_info info;
        lt_error err;
        if (lt_tokenizer_encode(j->tok, s, j->text, j->len, ids, j->len, &info, &err) != LT_OK ||
            info.n_tokens != j->nwant || memcmp(ids, j->want, j->nwant * sizeof *ids) != 0)
            j->bad++;
    }
    free(ids);
    lt_tok_scratch_free(s);
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    static vocab v;
    lt_rng rng;
    lt_rng_seed(&rng, 99);
    random_vocab(&v, &rng, 300, 3);
    write_vocab(&v, "thr.tiktoken");
    lt_tokenizer *tok = load_ok("thr.tiktoken", "o200k_base");
    size_t n = 20000;
    char *text = malloc(n);
    for (size_t i = 0; i < n; i++) text[i] = lt_rng_below(&rng, 7) == 0 ? ' ' : (char)('a' + lt_rng_below(&rng, 3));
    uint32_t *want = malloc(n * sizeof *want);
    lt_tok_scratch *s = lt_tok_scratch_new();
    lt_encode_info info;
    lt_error err;
    assert_int_equal(lt_tokenizer_encode(tok, s, text, n, want, n, &info, &err), LT_OK);
    pthread_t th[4];
    job jobs[4];
    for (int t = 0; t < 4; t++) {
        jobs[t] = (job){tok, text, n, want, info.n_tokens, 0};
        assert_int_equal(pthread_create(&th[t], NULL, thread_main, &jobs[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(jobs[t].bad, 0);
    }
    lt_tok_scratch_free(s);
    free(want);
    free(text);
    lt_tokenizer_free(tok);
}

/* lt_tokenizer_encode_utf8 (no validation pass) gives lt_tokenizer_encode's ids on valid
 * UTF-8: ASCII, multi-byte letters, emoji, and U+FFFD itself. */
static void test_encode_utf8_matches_encode(void **state) {
    (void)state;
    static vocab v;
    lt_rng rng;
    lt_rng_seed(&rng, 7);
    random_vocab(&v, &rng, 300, 3);
    write_vocab(&v, "utf8.tiktoken");
    lt_tokenizer *tok = load_ok("utf8.tiktoken", "cl100k_base");
    static const char *const pieces[] = {"ab ", "caf\xc3\xa9 ", "\xe4\xb8\xad\xe6\x96\x87", "\xf0\x9f\x98\x80!",
                                         "\xef\xbf\xbd", "  \n", "123 "};
    char text[4096];
    size_t n = 0;
    while (n < sizeof text - 8) {
        const char *p = pieces[lt_rng_below(&rng, sizeof pieces / sizeof pieces[0])];
        memcpy(text + n, p, strlen(p));
        n += strlen(p);
    }
    uint32_t a[4096], b[4096];
    lt_tok_scratch *s = lt_tok_scratch_new();
    lt_encode_info ia, ib;
    lt_error err;
    assert_int_equal(lt_tokenizer_encode(tok, s, text, n, a, 4096, &ia, &err), LT_OK);
    assert_int_equal(lt_tokenizer_encode_utf8(tok, s, text, n, b, 4096, &ib, &err), LT_OK);
    assert_int_equal(ia.n_tokens, ib.n_tokens);
    assert_int_equal(ia.utf8_replacements, 0);
    assert_int_equal(ib.utf8_replacements, 0);
    assert_memory_equal(a, b, ia.n_tokens * sizeof a[0]);
    lt_tok_scratch_free(s);
    lt_tokenizer_free(tok);
}

/* The real vocabularies (data/vocab): random text in the scripts of 2- and 3-byte
 * characters (Greek, Cyrillic, Armenian, Hebrew, Arabic, Devanagari, Thai, Georgian,
 * Hangul, CJK), with spaces, Latin letters and punctuation between, gives the same ids
 * started from whole characters as merged from bytes only (which test_merge_matches_naive_rule
 * and tiktoken_reference.py check against the rule itself). */
static void test_char_start_matches_bytes_real_vocab(void **state) {
    (void)state;
    static const uint32_t ranges[][2] = {{0x0391, 0x03C9}, {0x0410, 0x044F}, {0x0531, 0x0587}, {0x05D0, 0x05EA},
                                         {0x0621, 0x064A}, {0x0905, 0x094D}, {0x0E01, 0x0E3A}, {0x10D0, 0x10FA},
                                         {0xAC00, 0xAD00}, {0x4E00, 0x4F00}};
    char vocab_dir[4096];
    const char *env = getenv("LONGTAIL_VOCAB_DIR"), *src = getenv("top_srcdir");
    snprintf(vocab_dir, sizeof vocab_dir, "%s", env ? env : src ? src : ".");
    if (!env) strncat(vocab_dir, "/data/vocab", sizeof vocab_dir - strlen(vocab_dir) - 1);
    lt_rng rng;
    lt_rng_seed(&rng, 20261126);
    uint32_t a[512], b[512];
    for (int e = 0; e < 2; e++) {
        const char *name = e ? "cl100k_base" : "o200k_base";
        lt_tokenizer *tok, *bytes;
        lt_error err;
        if (lt_tokenizer_load_encoding(&tok, name, vocab_dir, LT_PRETOK_ENGINE_AUTO, &err) != LT_OK ||
            lt_tokenizer_load_encoding(&bytes, name, vocab_dir, LT_PRETOK_ENGINE_AUTO, &err) != LT_OK)
            fail_msg("load %s from %s: %s", name, vocab_dir, err.what);
        lt_tokenizer_set_char_start(bytes, false);
        lt_tok_scratch *s = lt_tok_scratch_new(), *sb = lt_tok_scratch_new();
        assert_true(s && sb);
        for (int k = 0; k < 6000; k++) {
            char text[400];
            size_t n = 0;
            const uint32_t *r = ranges[lt_rng_below(&rng, sizeof ranges / sizeof ranges[0])];
            size_t chars = 1 + lt_rng_below(&rng, 60);
            for (size_t c = 0; c < chars; c++) {
                uint32_t roll = (uint32_t)lt_rng_below(&rng, 20), cp;
                if (roll == 0) cp = ' ';
                else if (roll == 1) cp = "a.,-'"[lt_rng_below(&rng, 5)];
                else if (roll == 2) cp = ranges[lt_rng_below(&rng, sizeof ranges / sizeof ranges[0])][0];
                else cp = r[0] + (uint32_t)lt_rng_below(&rng, r[1] - r[0] + 1);
                n += lt_utf8_encode(cp, text + n);
            }
            lt_encode_info ia, ib;
            assert_int_equal(lt_tokenizer_encode(tok, s, text, n, a, 512, &ia, &err), LT_OK);
            assert_int_equal(lt_tokenizer_encode(bytes, sb, text, n, b, 512, &ib, &err), LT_OK);
            if (ia.n_tokens != ib.n_tokens || memcmp(a, b, ia.n_tokens * sizeof a[0]) != 0)
                fail_msg("%s, text %d (%zu bytes): %zu tokens from characters, %zu from bytes", name, k, n,
                         ia.n_tokens, ib.n_tokens);
            if (k % 500 == 0) lt_tok_scratch_forget(s);
        }
        lt_tok_scratch_free(s);
        lt_tok_scratch_free(sb);
        lt_tokenizer_free(tok);
        lt_tokenizer_free(bytes);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_char_start_matches_bytes_real_vocab),
        cmocka_unit_test(test_encode_utf8_matches_encode),
        cmocka_unit_test(test_merge_matches_naive_rule),
        cmocka_unit_test(test_merge_from_characters_matches_naive_rule),
        cmocka_unit_test(test_long_piece),
        cmocka_unit_test(test_rank_file_errors),
        cmocka_unit_test(test_sidecar_and_specials),
        cmocka_unit_test(test_caller_buffer),
        cmocka_unit_test(test_search_order),
        cmocka_unit_test(test_foreign_vocab_with_known_pattern),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
