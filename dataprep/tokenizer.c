/*
 * dataprep/tokenizer.c — tiktoken-exact byte-level BPE (see tokenizer.h for the contract).
 *
 * Lookups: a token's rank is its id and its merge priority. All tokens sit in one
 * open-addressing hash table keyed by their bytes (the first 8 packed into a word, so short
 * tokens compare with one integer test). In front of it, for speed on the merge path, where
 * most lookups are of byte strings that are not tokens: a direct 64K table of the 2-byte
 * tokens; a one-bit-per-hash filter (8+ bits per token, cache-resident) that answers most
 * misses without touching the big table; and per-thread memos (lt_tok_scratch) of merge
 * ranks by the two parts' ids and of recently merged whole pieces.
 *
 * Merging (tiktoken src/lib.rs byte_pair_encode): within a piece, repeatedly merge the
 * adjacent pair of parts whose concatenated bytes have the lowest rank, leftmost on ties,
 * until no adjacent pair is a token. Pieces of up to 64 bytes keep their part starts as the
 * bits of one word (merge_small); in scripts of 2- and 3-byte characters they start, where
 * that provably gives the same ids, from whole characters rather than bytes (build_chars),
 * which saves one or two merges per character. Longer pieces use a binary heap of
 * candidate merges with lazy invalidation (merge_large, O(n log n)), so a 1 MiB
 * unsplittable piece costs milliseconds, not the hours of a quadratic scan. All apply the
 * same total order (rank, start), and tests/dataprep/test_tokenizer.c checks them against
 * a naive implementation of the rule on bytes.
 */
#include "dataprep/tokenizer.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dataprep/pretok.h" /* lt_pretok_*, lt_regex_* */
#include "lib/files.h"       /* lt_read_file */
#include "lib/json.h"        /* lt_json_parse, lt_utf8_sanitize, lt_utf8_valid */
#include "lib/sha256.h"      /* lt_sha256_hex */


#define NO_RANK UINT32_MAX
#define HOT static inline __attribute__((always_inline)) /* the lookups of the merge loops */

/* ------------------------------------------------------------------ types */

typedef struct slot {
    uint64_t head; /* the first min(len, 8) bytes, little-endian, zero-padded */
    uint32_t len;  /* token length in bytes; 0 = empty slot */
    uint32_t rank;
} slot;

/* A unit merge_small may start from (a character of 2 or 3 bytes, a 3-byte character's
 * first two bytes, or at the start of a piece a space and those two bytes) whose bytes are
 * a token: `rank` is that token (NO_RANK: they are not one, or not built from the bytes
 * below its rank), and ctx[first .. first + n_left) and ctx[first + n_left .. + n_right)
 * its dangerous left and right contexts (build_chars). */
typedef struct char_unit {
    uint32_t rank;
    uint32_t first;
    uint16_t n_left, n_right;
    bool never; /* more than MAX_CONTEXTS on a side: a token, never started from */
    uint64_t left_last, right_first; /* bit b & 63 set for each left context's last byte b,
                                        each right context's first byte b: most neighbours
                                        rule every context out with one test */
} char_unit;
#define MAX_CONTEXTS 64

/* A context of a char_unit: bytes pool[off .. off + len), head = the first min(len, 8) of
 * them as load_head packs them. */
typedef struct char_ctx {
    uint64_t head;
    uint32_t off, len;
} char_ctx;

typedef struct special {
    char *text;
    size_t len;
    uint32_t id;
    bool allowed;
} special;

struct lt_tokenizer {
    uint64_t serial; /* unique per loaded tokenizer in this process (scratches bind to it) */
    char *name;
    char *vocab_path;
    char sha256[LT_SHA256_HEX_LEN + 1];
    uint32_t n_ranks;
    uint32_t n_vocab;
    unsigned char *pool; /* all token bytes, concatenated in rank order */
    uint32_t *off;       /* token r is pool[off[r] .. off[r + 1]) */
    slot *slots;
    uint64_t mask; /* slots - 1 (a power of two minus one) */
    uint64_t *filter; /* one bit per hash (top bits): clear = surely not a token */
    unsigned filter_shift; /* 64 - log2(filter bits) */
    uint32_t byte_rank[256];
    uint32_t *rank2; /* [b0 << 8 | b1]: the rank of a 2-byte token, or NO_RANK (256 KiB, cache-resident) */
    char_unit *chars; /* [code point < 0x10000]: the character as a starting part (build_chars), 2 MiB */
    bool bytes_only;  /* lt_tokenizer_set_char_start(false) */
    char_unit *heads; /* [(b0 & 15) << 6 | (b1 & 63)]: the first two bytes b0 b1 of a 3-byte character */
    char_unit *space_heads; /* the same index: a space and b0 b1, at the start of a piece only */
    char_ctx *ctx;    /* the units' contexts */
    size_t n_ctx;
    special *specials;
    size_t n_special;
    bool any_allowed;
    lt_pretok_kind kind;
    lt_regex *re;
    bool split_gaps; /* lt_tokenizer_set_split_gaps */
};

/* Per-thread memo of recently merged pieces (real text repeats its words: in English
 * prose and code ~80% of the pieces that are not single tokens occurred before). Direct-
 * mapped by the piece's hash; the bytes are compared, so a hit is exact. */
#define CACHE_SLOTS 4096
#define CACHE_BYTES 30 /* longest piece kept */
#define CACHE_TOKENS 8 /* most tokens kept */
typedef struct cache_entry {
    uint64_t hash;
    uint32_t epoch;    /* the scratch's epoch when written: older entries are forgotten */
    uint8_t len, ntok; /* len 0 = empty */
    unsigned char bytes[CACHE_BYTES];
    uint32_t ids[CACHE_TOKENS];
} cache_entry;

/* Per-thread memo of merge ranks by the ids of the two parts: (a, b) -> rank of
 * bytes(a) bytes(b), or NO_RANK. A language's words share their pair merges, and this
 * small table stays in cache where the vocabulary's does not. */
#define PAIR_SLOTS 8192
typedef struct pair_memo {
    uint64_t key;   /* a << 32 | b */
    uint32_t rank;  /* of bytes(a) bytes(b), or NO_RANK */
    uint32_t epoch; /* as cache_entry's; 0 = empty */
} pair_memo;

/* The memos' entries carry the epoch they were written in, so that forgetting them all
 * (lt_tok_scratch_forget) is one increment, not a pass over 450 KiB. */
struct lt_tok_scratch {
    cache_entry *cache; /* CACHE_SLOTS entries, valid for tokenizer `bound` */
    pair_memo *pairs;   /* PAIR_SLOTS entries, valid for tokenizer `bound` */
    uint32_t epoch;     /* the memos' entries of other epochs are empty; >= 1 once bound */
    uint64_t bound; /* the serial of the tokenizer the memos and `rs` belong to; 0: none */
    char *clean; /* the text with invalid UTF-8 replaced */
    size_t clean_cap;
    uint32_t *pair, *tok, *end, *prev; /* merge_large's per-byte state */
    size_t part_cap;
    uint64_t *heap; /* (rank << 32 | start) min-heap */
    size_t heap_cap;
    lt_regex_scratch *rs; /* matching state for the bound tokenizer's regex */
    size_t *spec_next; /* per special: next occurrence at or after the cursor */
    size_t spec_cap;
};

/* Output cursor: ids are written while they fit, counted always. */
typedef struct out_ids {
    uint32_t *ids;
    size_t cap;
    size_t n;
} out_ids;

static inline void emit(out_ids *o, uint32_t id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

/* ------------------------------------------------------------------ hashing */

/* Bytes p[0..n), n <= 8, as a little-endian word (two overlapping loads, no loop). */
HOT uint64_t load_head(const unsigned char *p, size_t n) {
    if (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + n - 4, 4);
        return (uint64_t)a | (uint64_t)b << (8 * (n - 4));
    }
    if (n == 0) return 0;
    return (uint64_t)p[0] | (uint64_t)p[n / 2] << (8 * (n / 2)) | (uint64_t)p[n - 1] << (8 * (n - 1));
}

HOT uint64_t mix64(uint64_t x) {
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x;
}

HOT uint64_t hash_bytes(const unsigned char *p, size_t n, uint64_t head) {
    uint64_t h = head * 0x9e3779b97f4a7c15ull + n;
    for (size_t i = 8; i < n; i += 8) {
        uint64_t w = load_head(p + i, n - i < 8 ? n - i : 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    return mix64(h);
}

/* The rank of the 2-byte token p[0..2), or NO_RANK: the first lookups of every merge. */
HOT uint32_t rank_of2(const lt_tokenizer *tok, const unsigned char *p) {
    return tok->rank2[(unsigned)p[0] << 8 | p[1]];
}

/* The rank of the token with bytes p[0..n), n >= 3, whose hash_bytes is h, or NO_RANK. */
HOT uint32_t rank_hashed(const lt_tokenizer *tok, const unsigned char *p, size_t n, uint64_t head,
                                   uint64_t h) {
    uint64_t bit = h >> tok->filter_shift;
    /* most lookups during merging miss: the small filter answers those from cache */
    if (!(tok->filter[bit >> 6] >> (bit & 63) & 1)) return NO_RANK;
    uint64_t i = h & tok->mask;
    for (;;) {
        const slot *s = &tok->slots[i];
        if (s->len == 0) return NO_RANK;
        if (s->len == n && s->head == head &&
            (n <= 8 || memcmp(tok->pool + tok->off[s->rank] + 8, p + 8, n - 8) == 0))
            return s->rank;
        i = (i + 1) & tok->mask;
    }
}

/* The rank of the token with bytes p[0..n), or NO_RANK. */
HOT uint32_t rank_of(const lt_tokenizer *tok, const unsigned char *p, size_t n) {
    if (n == 2) return rank_of2(tok, p);
    uint64_t head = load_head(p, n < 8 ? n : 8);
    return rank_hashed(tok, p, n, head, hash_bytes(p, n, head));
}

/* The rank of merging the parts with ids a and b, whose bytes are p[0..n). */
HOT uint32_t pair_rank(const lt_tokenizer *tok, lt_tok_scratch *s, uint32_t a, uint32_t b,
                       const unsigned char *p, size_t n) {
    uint64_t key = (uint64_t)a << 32 | b;
    pair_memo *m = &s->pairs[(key * 0x9e3779b97f4a7c15ull) >> (64 - 13)];
    if (m->key == key && m->epoch == s->epoch) return m->rank;
    uint32_t r = rank_of(tok, p, n);
    *m = (pair_memo){key, r, s->epoch};
    return r;
}

/* Insert token `rank`; returns the rank already holding the same bytes, or NO_RANK. */
static uint32_t table_insert(lt_tokenizer *tok, uint32_t rank) {
    const unsigned char *p = tok->pool + tok->off[rank];
    size_t n = tok->off[rank + 1] - tok->off[rank];
    uint64_t head = load_head(p, n < 8 ? n : 8);
    uint64_t h = hash_bytes(p, n, head), bit = h >> tok->filter_shift;
    tok->filter[bit >> 6] |= 1ull << (bit & 63);
    uint64_t i = h & tok->mask;
    for (;;) {
        slot *s = &tok->slots[i];
        if (s->len == 0) {
            s->head = head;
            s->len = (uint32_t)n;
            s->rank = rank;
            return NO_RANK;
        }
        if (s->len == n && s->head == head &&
            memcmp(tok->pool + tok->off[s->rank], p, n) == 0)
            return s->rank;
        i = (i + 1) & tok->mask;
    }
}

/* ------------------------------------------------------------------ scratch */

lt_tok_scratch *lt_tok_scratch_new(void) { return calloc(1, sizeof(lt_tok_scratch)); }

void lt_tok_scratch_free(lt_tok_scratch *s) {
    if (!s) return;
    free(s->cache);
    free(s->pairs);
    free(s->clean);
    free(s->pair);
    free(s->tok);
    free(s->end);
    free(s->prev);
    free(s->heap);
    free(s->spec_next);
    lt_regex_scratch_free(s->rs);
    free(s);
}

/* Grow *p to hold n elements of `size` bytes (amortized doubling); false when out of memory. */
static bool grow(void **p, size_t *cap, size_t n, size_t size) {
    if (n <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < n) {
        if (c > SIZE_MAX / 2 / size) return false;
        c *= 2;
    }
    void *q = realloc(*p, c * size);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static bool grow_parts(lt_tok_scratch *s, size_t n) {
    if (n <= s->part_cap) return true;
    size_t cap = s->part_cap, c;
    uint32_t **arrays[] = {&s->pair, &s->tok, &s->end, &s->prev};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++) {
        c = cap;
        if (!grow((void **)arrays[k], &c, n, sizeof(uint32_t))) return false;
    }
    s->part_cap = c;
    return true;
}

/* ------------------------------------------------------------------ merging */

/* Pieces of up to 64 parts (bytes, or whole characters: build_chars): the live parts are
 * the set bits of one word, so the neighbours of a part are a count-zeros away and nothing
 * moves when two parts merge. key[j] is the candidate merge of part j with the next live
 * one, packed as rank << 6 | j (KEY_NONE when it is not a token or part j is gone), so the merge to
 * do next (lowest rank, leftmost on ties: tiktoken's rule) is simply the smallest key: one
 * compare-and-select per byte in four independent chains, where tracking the rank and the
 * position apart took two selects in one chain (the scan was 35-45 % of the time on
 * multilingual text, whose pieces are mostly merged rather than found whole). Two vector
 * forms were tried: 16-byte loads of keys stored 4 bytes at a time (2 % fewer instructions,
 * but such loads cannot be store-forwarded: a stall per merge), and keys kept in vectors and
 * changed by blends (15 % more instructions); timing on the shared 2-core machine could not
 * tell them apart, and the scalar chains have neither cost. Needs ranks below
 * KEY_RANK_LIMIT (merge_piece checks). Measured faster than tiktoken's array of parts
 * (memmove per merge) and than the heap at every length up to 64. */
#define KEY_NONE INT32_MAX
#define KEY_RANK_LIMIT ((1u << 25) - 1) /* rank << 6 | 63 stays below KEY_NONE */

HOT int32_t pack_key(uint32_t rank, size_t at) {
    return rank == NO_RANK ? KEY_NONE : (int32_t)(rank << 6 | (uint32_t)at);
}

/* The smallest of key[0 .. 4 * n4), in four scalar chains. The empty asm keeps GCC from
 * turning them into one vector chain (vpminsd over 16-byte loads): the merge before each
 * scan stores keys 4 bytes at a time, and a 16-byte load over such a store cannot be
 * store-forwarded, so each scan waited for the stores to reach the cache. Scalar, in an
 * interleaved A/B on this machine: o200k_base multilingual +5 %, Cyrillic +4 %, Georgian
 * +4 %, CJK +12 %; cl100k_base CJK +20 %, Cyrillic +3 %; English and code about even; but
 * cl100k_base Georgian -9 % (pieces merged from bytes, up to 64 keys per scan, where the
 * vector chain's fewer loads win; a per-length choice of the two measured worse on
 * o200k_base and was not kept). */
HOT int32_t min_key(const int32_t *key, size_t n4) {
    int32_t m0 = key[0], m1 = key[1], m2 = key[2], m3 = key[3];
    for (size_t k = 4; k < 4 * n4; k += 4) {
        m0 = key[k] < m0 ? key[k] : m0;
        m1 = key[k + 1] < m1 ? key[k + 1] : m1;
        m2 = key[k + 2] < m2 ? key[k + 2] : m2;
        m3 = key[k + 3] < m3 ? key[k + 3] : m3;
        __asm__("" : "+r"(m0), "+r"(m1), "+r"(m2), "+r"(m3)); /* scalar chains (above) */
    }
    m0 = m1 < m0 ? m1 : m0;
    m2 = m3 < m2 ? m3 : m2;
    return m2 < m0 ? m2 : m0;
}

/* Do the bytes at `at` begin with context c? */
HOT bool ctx_matches(const lt_tokenizer *tok, const char_ctx *c, const unsigned char *at) {
    if (load_head(at, c->len < 8 ? c->len : 8) != c->head) return false;
    return c->len <= 8 || memcmp(at + 8, tok->pool + c->off + 8, c->len - 8) == 0;
}

/* Is the unit u at p[i .. i + len) of a piece p[0..n) safe to start from (merge_small with
 * chars): does no dangerous context of u touch it? A left context X is dangerous when the
 * piece's bytes before i end with X, a right context Y when the bytes after the unit begin
 * with Y (build_chars says why). */
HOT bool char_safe(const lt_tokenizer *tok, const char_unit *u, const unsigned char *p, size_t n, size_t i,
                   size_t len) {
    const char_ctx *c = tok->ctx + u->first;
    /* with 8 bytes on the side (`word`), a context of up to 8 bytes is one shift or mask of
     * them and a compare (the high bytes of the word before the unit are the bytes next to
     * it); otherwise ctx_matches */
    if (i > 0 && (u->left_last >> (p[i - 1] & 63) & 1)) {
        bool word = i >= 8;
        uint64_t w = word ? load_head(p + i - 8, 8) : 0;
        for (unsigned k = 0; k < u->n_left; k++)
            if (word && c[k].len <= 8 ? w >> (64 - 8 * c[k].len) == c[k].head
                                      : c[k].len <= i && ctx_matches(tok, &c[k], p + i - c[k].len))
                return false;
    }
    c += u->n_left;
    size_t e = i + len;
    if (e < n && (u->right_first >> (p[e] & 63) & 1)) {
        bool word = n - e >= 8;
        uint64_t w = word ? load_head(p + e, 8) : 0;
        for (unsigned k = 0; k < u->n_right; k++)
            if (word && c[k].len <= 8 ? (w & ~0ull >> (64 - 8 * c[k].len)) == c[k].head
                                      : c[k].len <= n - e && ctx_matches(tok, &c[k], p + e))
                return false;
    }
    return true;
}

/* The index of tok->heads and tok->space_heads for the first two bytes b0 b1 of a 3-byte
 * character. */
HOT size_t head_index(unsigned b0, unsigned b1) { return (b0 & 0x0Fu) << 6 | (b1 & 0x3Fu); }

/* Are b0 b1 the first two bytes of a well-formed 3-byte character (no overlong E0 form)? */
HOT bool three_byte_head(unsigned b0, unsigned b1) {
    return (b0 & 0xF0) == 0xE0 && (b1 & 0xC0) == 0x80 && !(b0 == 0xE0 && b1 < 0xA0);
}

/* The code point of the well-formed character c[0..m), m = 2 or 3. */
HOT uint32_t bmp_code_point(const unsigned char *c, size_t m) {
    return m == 2 ? (c[0] & 0x1Fu) << 6 | (c[1] & 0x3Fu)
                  : (c[0] & 0x0Fu) << 12 | (c[1] & 0x3Fu) << 6 | (c[2] & 0x3Fu);
}

/* The part a merge from whole characters starts with at p[i] of a piece p[0..n): a
 * character of 2 or 3 bytes (well-formed, U+0080 .. U+FFFF) that build_chars keeps and
 * char_safe allows there (its length; *id its token), else the first two bytes of a 3-byte
 * one under the same rules (2), else the byte (1; *id its token);
 * 0 (and the byte's id) for a well-formed character that is not a token at all, which the
 * callers take as a script whose characters the vocabulary does not hold whole. */
HOT size_t char_part(const lt_tokenizer *tok, const unsigned char *p, size_t n, size_t i, uint32_t *id) {
    unsigned b = p[i];
    *id = tok->byte_rank[b];
    if (b == ' ' && i == 0 && n >= 4 && three_byte_head(p[1], p[2]) && (p[3] & 0xC0) == 0x80) {
        /* a piece's leading space and the first two bytes of the 3-byte character after it */
        const char_unit *u = &tok->space_heads[head_index(p[1], p[2])];
        if (u->rank != NO_RANK && !u->never && char_safe(tok, u, p, n, 0, 3)) {
            *id = u->rank;
            return 3;
        }
        return 1;
    }
    if (b < 0xC2 || b >= 0xF0) return 1;
    size_t m = b < 0xE0 ? 2 : 3;
    if (i + m > n || (p[i + 1] & 0xC0) != 0x80 ||
        (m == 3 && ((p[i + 2] & 0xC0) != 0x80 || (b == 0xE0 && p[i + 1] < 0xA0))))
        return 1;
    const char_unit *u = &tok->chars[bmp_code_point(p + i, m)];
    if (u->rank == NO_RANK) return 0;
    if (!u->never && char_safe(tok, u, p, n, i, m)) {
        *id = u->rank;
        return m;
    }
    if (m == 3) { /* its first two bytes, where they are safe */
        u = &tok->heads[head_index(b, p[i + 1])];
        if (u->rank != NO_RANK && !u->never && char_safe(tok, u, p, n, i, 2)) {
            *id = u->rank;
            return 2;
        }
    }
    return 1;
}

typedef enum small_result {
    SMALL_DONE,     /* merged and emitted */
    SMALL_BYTES,    /* nothing emitted: merge the piece from bytes */
    SMALL_TOO_LONG, /* nothing emitted: more than 64 parts even from characters (merge_large) */
} small_result;

/* Built twice on x86-64 with GCC (the loader's ifunc picks one at start): for x86-64-v3
 * (BMI1/LZCNT: the bit scans; min_key's chains stay scalar, see there) and for the
 * baseline. Same integer code, so the same ids; 9-18 % faster on the multilingual,
 * Cyrillic and Georgian sets with o200k_base when measured with min_key vectorized
 * (bench_tokenizer, this machine, AMD EPYC).
 *
 * Without chars: the bytes of a piece of at most 64 bytes, always merged (SMALL_DONE). With
 * chars: whole characters (or a character's first two bytes) where that is exact
 * (build_chars), bytes elsewhere, so pieces of up to 192 bytes; it gives up, having emitted
 * nothing, when the piece has no such character or a merge it reaches could have come out
 * otherwise from the bytes (SMALL_BYTES: merge the bytes), or when the piece has more than
 * 64 parts (SMALL_TOO_LONG: merge_large). Part j is bytes [start[j], start of the next live
 * part); its key packs j, not the byte offset (a third of the keys to scan on Georgian:
 * 3-4 % faster there). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
static small_result merge_small(const lt_tokenizer *tok, lt_tok_scratch *s, const unsigned char *p, size_t n,
                                out_ids *o, bool chars) {
    int32_t key[64];
    uint32_t id[64];
    uint8_t start[65]; /* part j is bytes [start[j], start[the next live part]); start[np] = n */
    size_t np = 0;
    if (!chars) {
        for (size_t i = 0; i < n; i++) {
            start[i] = (uint8_t)i;
            id[i] = tok->byte_rank[p[i]];
            key[i] = pack_key(i + 1 < n ? rank_of2(tok, p + i) : NO_RANK, i);
        }
        np = n;
    } else {
        bool any = false;
        for (size_t i = 0; i < n;) {
            uint32_t unit;
            size_t len = char_part(tok, p, n, i, &unit);
            if (len == 0) {
                if (!any) return SMALL_BYTES; /* a script without such tokens */
                len = 1;
            }
            any |= len > 1;
            if (np == 64) return SMALL_TOO_LONG;
            start[np] = (uint8_t)i;
            id[np++] = unit;
            i += len;
        }
        if (!any) return SMALL_BYTES;
        for (size_t j = 0; j + 1 < np; j++) { /* parts j and j + 1: bytes [start[j], e) */
            size_t e = j + 2 < np ? start[j + 2] : n;
            uint32_t r = e - start[j] == 2 ? rank_of2(tok, p + start[j])
                                           : pair_rank(tok, s, id[j], id[j + 1], p + start[j], e - start[j]);
            key[j] = pack_key(r, j);
        }
        key[np - 1] = KEY_NONE;
    }
    start[np] = (uint8_t)n;
    uint64_t live = np == 64 ? ~0ull : (1ull << np) - 1; /* live parts */
    size_t n4 = (np + 3) / 4; /* groups of 4 keys, the last one padded with KEY_NONE */
    for (size_t j = np; j < 4 * n4; j++) key[j] = KEY_NONE;
    for (;;) {
        int32_t k = min_key(key, n4);
        if (k == KEY_NONE) break;
        size_t at = (size_t)k & 63;
        uint32_t best = (uint32_t)k >> 6;
        uint64_t after = live & ~((2ull << at) - 1); /* parts after `at` (at <= 62 here) */
        size_t right = (size_t)__builtin_ctzll(after);
        /* from characters: a merge of lower rank than a part's own token could have come
         * out otherwise from the bytes (build_chars) */
        if (chars && (best < id[at] || best < id[right])) return SMALL_BYTES;
        uint64_t beyond = after & (after - 1);
        size_t right_end = beyond ? (size_t)__builtin_ctzll(beyond) : np;
        id[at] = best;
        live &= ~(1ull << right);
        key[right] = KEY_NONE;
        if (right_end < np) {
            uint64_t next = beyond & (beyond - 1);
            size_t next_end = next ? (size_t)__builtin_ctzll(next) : np;
            key[at] = pack_key(
                pair_rank(tok, s, id[at], id[right_end], p + start[at], (size_t)(start[next_end] - start[at])), at);
        } else {
            key[at] = KEY_NONE;
        }
        uint64_t before = live & ((1ull << at) - 1);
        if (before) {
            size_t left = 63 - (size_t)__builtin_clzll(before);
            key[left] = pack_key(
                pair_rank(tok, s, id[left], id[at], p + start[left], (size_t)(start[right_end] - start[left])), left);
        }
    }
    for (uint64_t m = live; m; m &= m - 1) emit(o, id[__builtin_ctzll(m)]);
    return SMALL_DONE;
}

static inline void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (h[up] <= v) break;
        h[i] = h[up];
        i = up;
    }
    h[i] = v;
}

static inline uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0, len = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= len) break;
        if (c + 1 < len && h[c + 1] < h[c]) c++;
        if (v <= h[c]) break;
        h[i] = h[c];
        i = c;
    }
    if (len) h[i] = v;
    return top;
}

/* Long pieces: parts form a linked list over byte offsets (a part is named by its first
 * byte); candidate merges sit in a min-heap keyed (rank, start). A candidate is stale once
 * either of its parts changed; pair[start] holds the rank of the current candidate for the
 * part at `start`, so a popped entry is live iff its rank still equals pair[start] (equal
 * rank means equal bytes, hence the same merge). Each merge pushes at most two entries. */
static lt_status merge_large(const lt_tokenizer *tok, lt_tok_scratch *s, const unsigned char *p,
                             size_t n, out_ids *o, bool chars, bool *merged, lt_error *err) {
    if (!grow((void **)&s->heap, &s->heap_cap, 3 * n, sizeof(uint64_t)))
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory merging a piece of %zu bytes", n);
    uint32_t *end = s->end, *prev = s->prev, *pair = s->pair, *id = s->tok;
    uint64_t *heap = s->heap;
    size_t hn = 0;
    *merged = false;
    if (!chars) {
        for (size_t i = 0; i < n; i++) {
            end[i] = (uint32_t)(i + 1);
            prev[i] = (uint32_t)i - 1; /* wraps for i = 0: never read */
            id[i] = tok->byte_rank[p[i]];
            pair[i] = i + 1 < n ? rank_of2(tok, p + i) : NO_RANK;
            if (pair[i] != NO_RANK) heap_push(heap, &hn, (uint64_t)pair[i] << 32 | i);
        }
    } else { /* from whole characters (build_chars), as merge_small does */
        bool any = false;
        size_t last = 0;
        for (size_t i = 0; i < n;) {
            size_t len = char_part(tok, p, n, i, &id[i]);
            if (len == 0) {
                if (!any) return LT_OK; /* a script without such tokens: merge the bytes */
                len = 1;
            }
            any |= len > 1;
            end[i] = (uint32_t)(i + len);
            prev[i] = (uint32_t)last; /* for i = 0: never read */
            pair[i] = NO_RANK;
            for (size_t k = 1; k < len; k++) pair[i + k] = NO_RANK;
            last = i;
            i += len;
        }
        if (!any) return LT_OK;
        for (size_t i = 0; end[i] < n; i = end[i]) {
            size_t b = end[i], e = end[b];
            pair[i] = e - i == 2 ? rank_of2(tok, p + i) : pair_rank(tok, s, id[i], id[b], p + i, e - i);
            if (pair[i] != NO_RANK) heap_push(heap, &hn, (uint64_t)pair[i] << 32 | i);
        }
    }
    while (hn > 0) {
        uint64_t top = heap_pop(heap, &hn);
        uint32_t at = (uint32_t)top, rank = (uint32_t)(top >> 32);
        if (pair[at] != rank) continue; /* stale */
        uint32_t right = end[at], right_end = end[right];
        /* from characters: as in merge_small, a merge below a part's own rank ends it */
        if (chars && (rank < id[at] || rank < id[right])) return LT_OK;
        id[at] = rank;
        end[at] = right_end;
        pair[right] = NO_RANK; /* the right part is gone */
        if (right_end < n) {
            prev[right_end] = at;
            pair[at] = pair_rank(tok, s, id[at], id[right_end], p + at, end[right_end] - at);
            if (pair[at] != NO_RANK) heap_push(heap, &hn, (uint64_t)pair[at] << 32 | at);
        } else {
            pair[at] = NO_RANK;
        }
        if (at > 0) {
            uint32_t left = prev[at];
            pair[left] = pair_rank(tok, s, id[left], id[at], p + left, right_end - left);
            if (pair[left] != NO_RANK) heap_push(heap, &hn, (uint64_t)pair[left] << 32 | left);
        }
    }
    for (size_t i = 0; i < n; i = end[i]) emit(o, id[i]);
    *merged = true;
    return LT_OK;
}

/* Merge a piece that is not a token. */
static lt_status merge_piece(const lt_tokenizer *tok, lt_tok_scratch *s, const unsigned char *p, size_t n,
                             out_ids *o, lt_error *err) {
    if (n >= UINT32_MAX - 1)
        return lt_fail(err, LT_ERR_INPUT, NULL, "a piece of %zu bytes is too long to merge", n);
    if (!grow_parts(s, n + 1))
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory merging a piece of %zu bytes", n);
    bool chars = !tok->bytes_only;
    if (tok->n_ranks <= KEY_RANK_LIMIT) {
        small_result r = chars && n <= 3 * 64 ? merge_small(tok, s, p, n, o, true) : SMALL_TOO_LONG;
        if (r == SMALL_DONE) return LT_OK;
        if (n <= 64) {
            merge_small(tok, s, p, n, o, false);
            return LT_OK;
        }
        chars = chars && r == SMALL_TOO_LONG;
    }
    bool merged = false;
    lt_status st = chars ? merge_large(tok, s, p, n, o, true, &merged, err) : LT_OK;
    if (st == LT_OK && !merged) st = merge_large(tok, s, p, n, o, false, &merged, err);
    return st;
}

/* One piece: a whole-token lookup first (most pieces), then the memo, else merge. */
static lt_status encode_piece(const lt_tokenizer *tok, lt_tok_scratch *s, const unsigned char *p,
                              size_t n, out_ids *o, lt_error *err) {
    if (n == 1) {
        emit(o, tok->byte_rank[p[0]]);
        return LT_OK;
    }
    if (n == 2) {
        uint32_t r = rank_of2(tok, p);
        if (r != NO_RANK) {
            emit(o, r);
        } else {
            emit(o, tok->byte_rank[p[0]]);
            emit(o, tok->byte_rank[p[1]]);
        }
        return LT_OK;
    }
    uint64_t head = load_head(p, n < 8 ? n : 8), h = hash_bytes(p, n, head);
    uint32_t r = rank_hashed(tok, p, n, head, h);
    if (r != NO_RANK) {
        emit(o, r);
        return LT_OK;
    }
    if (n > CACHE_BYTES) return merge_piece(tok, s, p, n, o, err);
    cache_entry *c = &s->cache[(h >> 20) & (CACHE_SLOTS - 1)];
    if (c->len == n && c->hash == h && c->epoch == s->epoch && memcmp(c->bytes, p, n) == 0) {
        for (unsigned k = 0; k < c->ntok; k++) emit(o, c->ids[k]);
        return LT_OK;
    }
    size_t first = o->n;
    lt_status st = merge_piece(tok, s, p, n, o, err);
    size_t ntok = o->n - first;
    if (st == LT_OK && ntok <= CACHE_TOKENS && o->n <= o->cap) {
        c->hash = h;
        c->epoch = s->epoch;
        c->len = (uint8_t)n;
        c->ntok = (uint8_t)ntok;
        memcpy(c->bytes, p, n);
        memcpy(c->ids, o->ids + first, ntok * sizeof *c->ids);
    }
    return st;
}

/* ------------------------------------------------------------------ encoding */

/* Pre-tokenize text[0..len) (valid UTF-8) and encode every piece. */
static lt_status encode_ordinary(const lt_tokenizer *tok, lt_tok_scratch *s, const unsigned char *t,
                                 size_t len, out_ids *o, lt_error *err) {
    lt_status st = LT_OK;
    size_t pos = 0, end;
    switch (tok->kind) {
    case LT_PRETOK_CL100K:
        for (; pos < len && st == LT_OK; pos = end) {
            end = lt_pretok_next_cl100k(t, len, pos);
            st = encode_piece(tok, s, t + pos, end - pos, o, err);
        }
        return st;
    case LT_PRETOK_O200K:
        for (; pos < len && st == LT_OK; pos = end) {
            end = lt_pretok_next_o200k(t, len, pos);
            st = encode_piece(tok, s, t + pos, end - pos, o, err);
        }
        return st;
    case LT_PRETOK_R50K:
        for (; pos < len && st == LT_OK; pos = end) {
            end = lt_pretok_next_r50k(t, len, pos);
            st = encode_piece(tok, s, t + pos, end - pos, o, err);
        }
        return st;
    case LT_PRETOK_REGEX:
        break;
    }
    if (!s->rs && !(s->rs = lt_regex_scratch_new(tok->re)))
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for regex match data");
    while (pos < len) {
        bool found;
        size_t ms, me;
        if ((st = lt_regex_next(tok->re, s->rs, t, len, pos, &found, &ms, &me, err)) != LT_OK) return st;
        if (!found) ms = me = len;
        /* tokenizers' Split (Isolated) keeps the text between matches as pieces; tiktoken drops it */
        if (tok->split_gaps && ms > pos && (st = encode_piece(tok, s, t + pos, ms - pos, o, err)) != LT_OK) return st;
        if (!found) break;
        if ((st = encode_piece(tok, s, t + ms, me - ms, o, err)) != LT_OK) return st;
        pos = me;
    }
    return LT_OK;
}

/* Next occurrence of special k at or after pos (cached per special), or len. */
static size_t next_special(const lt_tokenizer *tok, lt_tok_scratch *s, const unsigned char *t,
                           size_t len, size_t pos, size_t k) {
    if (s->spec_next[k] != SIZE_MAX && s->spec_next[k] >= pos) return s->spec_next[k];
    const special *sp = &tok->specials[k];
    const unsigned char *hit = pos < len ? memmem(t + pos, len - pos, sp->text, sp->len) : NULL;
    s->spec_next[k] = hit ? (size_t)(hit - t) : len;
    return s->spec_next[k];
}

/* tiktoken's encode(allowed_special=...): split at the leftmost occurrence of an allowed
 * special token (the longest one on a tie), encode the text between as ordinary text,
 * each segment on its own (the pattern's lookahead sees the segment end). */
static lt_status encode_with_specials(const lt_tokenizer *tok, lt_tok_scratch *s, const unsigned char *t,
                                      size_t len, out_ids *o, lt_error *err) {
    if (!grow((void **)&s->spec_next, &s->spec_cap, tok->n_special, sizeof(size_t)))
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    for (size_t k = 0; k < tok->n_special; k++) s->spec_next[k] = SIZE_MAX;
    size_t pos = 0;
    for (;;) {
        size_t best = len, best_k = SIZE_MAX;
        for (size_t k = 0; k < tok->n_special; k++) {
            if (!tok->specials[k].allowed) continue;
            size_t at = next_special(tok, s, t, len, pos, k);
            if (at < best || (at == best && at < len && tok->specials[k].len > tok->specials[best_k].len))
                best = at, best_k = k;
        }
        lt_status st = encode_ordinary(tok, s, t + pos, best - pos, o, err);
        if (st != LT_OK) return st;
        if (best_k == SIZE_MAX) return LT_OK;
        emit(o, tok->specials[best_k].id);
        pos = best + tok->specials[best_k].len;
    }
}

/* Empty the memos for good (every entry written), and start at epoch 1. */
static void forget_all(lt_tok_scratch *s) {
    memset(s->cache, 0, CACHE_SLOTS * sizeof *s->cache);
    memset(s->pairs, 0, PAIR_SLOTS * sizeof *s->pairs);
    s->epoch = 1;
}

void lt_tok_scratch_forget(lt_tok_scratch *s) {
    if (!s->bound) return; /* nothing remembered yet */
    if (s->epoch == UINT32_MAX) forget_all(s); /* the epoch would wrap to entries' 0 */
    else s->epoch++;
}

/* The memos belong to one tokenizer: (re)start them when the scratch meets another. A
 * tokenizer is known by its serial, never by its address (a freed tokenizer's address is
 * reused by the next one). */
static lt_status bind_scratch(const lt_tokenizer *tok, lt_tok_scratch *s, lt_error *err) {
    lt_regex_scratch_free(s->rs);
    s->rs = NULL;
    s->bound = 0;
    if (!s->cache) s->cache = malloc(CACHE_SLOTS * sizeof *s->cache);
    if (!s->pairs) s->pairs = malloc(PAIR_SLOTS * sizeof *s->pairs);
    /* merge_small's pieces need no allocation after this (nor a first-touch page fault) */
    if (!s->cache || !s->pairs || !grow_parts(s, 65))
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the tokenizer's scratch");
    forget_all(s);
    s->bound = tok->serial;
    return LT_OK;
}

static lt_status encode(const lt_tokenizer *tok, lt_tok_scratch *s, const char *text, size_t len, bool known_valid,
                        uint32_t *ids, size_t cap, lt_encode_info *info, lt_error *err) {
    out_ids o = {ids, cap, 0};
    info->n_tokens = 0;
    info->utf8_replacements = 0;
    if (s->bound != tok->serial) {
        lt_status st = bind_scratch(tok, s, err);
        if (st != LT_OK) return st;
    }
    const unsigned char *t = (const unsigned char *)text;
    if (!known_valid && !lt_utf8_valid(text, len)) {
        if (len > SIZE_MAX / 3) return lt_fail(err, LT_ERR_NOMEM, NULL, "text too large");
        if (!grow((void **)&s->clean, &s->clean_cap, LT_UTF8_SANITIZE_MAX(len), 1))
            return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory repairing %zu bytes of UTF-8", len);
        len = lt_utf8_sanitize(text, len, s->clean, &info->utf8_replacements);
        t = (const unsigned char *)s->clean;
    }
    lt_status st = tok->any_allowed ? encode_with_specials(tok, s, t, len, &o, err)
                                    : encode_ordinary(tok, s, t, len, &o, err);
    info->n_tokens = o.n;
    return st;
}

lt_status lt_tokenizer_encode(const lt_tokenizer *tok, lt_tok_scratch *s, const char *text, size_t len,
                              uint32_t *ids, size_t cap, lt_encode_info *info, lt_error *err) {
    return encode(tok, s, text, len, false, ids, cap, info, err);
}

lt_status lt_tokenizer_encode_utf8(const lt_tokenizer *tok, lt_tok_scratch *s, const char *text, size_t len,
                                   uint32_t *ids, size_t cap, lt_encode_info *info, lt_error *err) {
    return encode(tok, s, text, len, true, ids, cap, info, err);
}

/* ------------------------------------------------------------------ decoding */

const char *lt_tokenizer_token_bytes(const lt_tokenizer *tok, uint32_t id, size_t *len) {
    if (id < tok->n_ranks) {
        *len = tok->off[id + 1] - tok->off[id];
        return (const char *)tok->pool + tok->off[id];
    }
    for (size_t k = 0; k < tok->n_special; k++)
        if (tok->specials[k].id == id) {
            *len = tok->specials[k].len;
            return tok->specials[k].text;
        }
    *len = 0;
    return NULL;
}

lt_status lt_tokenizer_decode(const lt_tokenizer *tok, const uint32_t *ids, size_t n, char *out, size_t cap,
                              size_t *out_len, lt_error *err) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *b = lt_tokenizer_token_bytes(tok, ids[i], &len);
        if (!b) {
            *out_len = total;
            char where[48];
            snprintf(where, sizeof where, "token %zu", i);
            return lt_fail(err, LT_ERR_INPUT, where, "unknown token id %" PRIu32 " (the vocabulary has %" PRIu32 ")",
                           ids[i], tok->n_vocab);
        }
        if (total < cap) memcpy(out + total, b, cap - total < len ? cap - total : len);
        total += len;
    }
    *out_len = total;
    return LT_OK;
}

/* ------------------------------------------------------------------ queries */

const char *lt_tokenizer_name(const lt_tokenizer *tok) { return tok->name; }
uint32_t lt_tokenizer_n_ranks(const lt_tokenizer *tok) { return tok->n_ranks; }
uint32_t lt_tokenizer_n_vocab(const lt_tokenizer *tok) { return tok->n_vocab; }
const char *lt_tokenizer_vocab_sha256(const lt_tokenizer *tok) { return tok->sha256; }

const char *lt_tokenizer_engine(const lt_tokenizer *tok) {
    switch (tok->kind) {
    case LT_PRETOK_CL100K: return "cl100k";
    case LT_PRETOK_O200K: return "o200k";
    case LT_PRETOK_R50K: return "r50k";
    case LT_PRETOK_REGEX: break;
    }
    return "pcre2";
}

void lt_tokenizer_set_char_start(lt_tokenizer *tok, bool on) { tok->bytes_only = !on; }
void lt_tokenizer_set_split_gaps(lt_tokenizer *tok, bool on) { tok->split_gaps = on; }

int64_t lt_tokenizer_special_id(const lt_tokenizer *tok, const char *text) {
    for (size_t k = 0; k < tok->n_special; k++)
        if (strcmp(tok->specials[k].text, text) == 0) return tok->specials[k].id;
    return -1;
}

int64_t lt_tokenizer_eos_id(const lt_tokenizer *tok) {
    int64_t id = lt_tokenizer_special_id(tok, "<|endoftext|>");
    return id >= 0 ? id : lt_tokenizer_special_id(tok, "<|end_of_text|>");
}

lt_status lt_tokenizer_set_allowed_special(lt_tokenizer *tok, const char *list, lt_error *err) {
    for (size_t k = 0; k < tok->n_special; k++) tok->specials[k].allowed = false;
    tok->any_allowed = false;
    if (!list || !*list) return LT_OK;
    if (strcmp(list, "all") == 0) {
        for (size_t k = 0; k < tok->n_special; k++) tok->specials[k].allowed = true;
        tok->any_allowed = tok->n_special > 0;
        return LT_OK;
    }
    for (const char *p = list;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        bool known = false;
        for (size_t k = 0; k < tok->n_special; k++)
            if (tok->specials[k].len == n && memcmp(tok->specials[k].text, p, n) == 0)
                tok->specials[k].allowed = known = true;
        if (!known) {
            lt_fail(err, LT_ERR_USAGE, NULL, "'%.*s' is not a special token of %s", (int)n, p, tok->name);
            if (tok->n_special) lt_error_hint(err, "its special tokens are %s%s", tok->specials[0].text,
                                              tok->n_special > 1 ? ", ... (or use 'all')" : "");
            return err ? err->status : LT_ERR_USAGE;
        }
        tok->any_allowed = true;
        if (!comma) return LT_OK;
        p = comma + 1;
    }
}

/* ------------------------------------------------------------------ loading */

/* The special tokens of the known encodings (their .json sidecars in ../shared/vocab). */
typedef struct known_special {
    const char *encoding;
    const char *text;
    uint32_t id;
} known_special;

static const known_special KNOWN_SPECIALS[] = {
    {"cl100k_base", "<|endoftext|>", 100257},   {"cl100k_base", "<|fim_prefix|>", 100258},
    {"cl100k_base", "<|fim_middle|>", 100259},  {"cl100k_base", "<|fim_suffix|>", 100260},
    {"cl100k_base", "<|endofprompt|>", 100276}, {"o200k_base", "<|endoftext|>", 199999},
    {"o200k_base", "<|endofprompt|>", 200018},  {"r50k_base", "<|endoftext|>", 50256},
};

/* sha256: of the official rank file; its special tokens belong to that file only. */
static const struct {
    const char *name;
    lt_pretok_kind kind;
    const char *sha256;
} KNOWN_ENCODINGS[] = {
    {"cl100k_base", LT_PRETOK_CL100K, "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"},
    {"o200k_base", LT_PRETOK_O200K, "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"},
    {"r50k_base", LT_PRETOK_R50K, "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"},
};
#define N_KNOWN (sizeof KNOWN_ENCODINGS / sizeof KNOWN_ENCODINGS[0])

void lt_tokenizer_free(lt_tokenizer *tok) {
    if (!tok) return;
    free(tok->name);
    free(tok->vocab_path);
    free(tok->pool);
    free(tok->off);
    free(tok->slots);
    free(tok->rank2);
    free(tok->chars);
    free(tok->heads);
    free(tok->space_heads);
    free(tok->ctx);
    free(tok->filter);
    for (size_t k = 0; k < tok->n_special; k++) free(tok->specials[k].text);
    free(tok->specials);
    lt_regex_free(tok->re);
    free(tok);
}

static int b64val(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Strict RFC 4648 base64 (padding required, no other characters) into out; returns the
 * decoded length, or -1 with *why set. */
static long b64decode(const unsigned char *s, size_t n, unsigned char *out, const char **why) {
    if (n == 0) return *why = "the token is empty", -1;
    if (n % 4) return *why = "base64 length is not a multiple of 4", -1;
    size_t pad = s[n - 1] == '=' ? (s[n - 2] == '=' ? 2 : 1) : 0;
    long len = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            bool padding = i + 4 == n && k >= 4 - (int)pad;
            v[k] = padding ? 0 : b64val(s[i + k]);
            if (v[k] < 0) return *why = s[i + k] == '=' ? "'=' before the end of the base64 text"
                                                        : "a character outside the base64 alphabet", -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        int bytes = i + 4 == n ? 3 - (int)pad : 3;
        if (bytes < 3 && (w & ((1u << (8 * (3 - bytes))) - 1)))
            return *why = "non-zero bits in the base64 padding", -1;
        for (int k = 0; k < bytes; k++) out[len++] = (unsigned char)(w >> (16 - 8 * k));
    }
    return len;
}

typedef struct rank_line {
    uint32_t rank;
    uint32_t off, len; /* decoded bytes in the staging pool */
    size_t line;
} rank_line;

static lt_status where_fail(lt_error *err, const char *path, size_t line, const char *msg) {
    char where[PATH_MAX + 32];
    snprintf(where, sizeof where, "%s:%zu", path, line);
    return lt_fail(err, LT_ERR_INPUT, where, "%s", msg);
}

/* The units merge_small may start a piece from instead of its bytes (tok->chars,
 * tok->heads, tok->ctx): whole characters of 2 or 3 bytes, U+0080 .. U+FFFF (Cyrillic,
 * Greek, Arabic, Hebrew, Devanagari, Georgian, CJK, ...), and where a 3-byte character is
 * not safe whole, its first two bytes. Starting from a unit u gives tiktoken's result when
 * the bytes would have become u first, before any merge across u's edges:
 *   - u's bytes are a token, built from them by merges of lower rank than u's own (2
 *     bytes: the one merge; 3 bytes: the lower of the two pairs, which must be a token),
 *     so u stands whole at the time of its rank and no earlier;
 *   - no merge of rank below u's joins a proper part of u with the bytes around it. Such a
 *     merge makes a token X + P (P a proper prefix of u, so the token ends with an
 *     unfinished character) or S + Y (S a proper suffix of u, so the token starts with a
 *     continuation byte). Every such token of lower rank than u gives u a dangerous
 *     context: X, or Y; char_safe refuses u where the piece has X just before it, or Y
 *     just after it;
 *   - after that, a merge that joins u (or any part) at a lower rank than the part's own
 *     token would, from the bytes, have waited for it: merge_small gives up there.
 * Then every merge of the run from units is one of the run from bytes, in the same order,
 * and the bytes' merges inside the units (all before the unit's rank, touching nothing
 * else) are the only others. Units with more than MAX_CONTEXTS contexts on a side are never
 * started from.
 * The first two bytes of a 3-byte character are a unit of 2 bytes like any other; their
 * right context is what follows them, the character's last byte first (edges of the third
 * kind: tokens that start with a continuation byte).
 * A space and those two bytes (" \xe1\x83" in o200k_base: a space before most Georgian
 * letters, which rank above it, merges with their first two bytes first) are a unit at the
 * start of a piece only, where nothing is to their left. Their proper suffixes are the last
 * byte (edges of the third kind) and the two bytes, whose dangerous merges are tokens that
 * begin with them (edges of the fourth kind, S = the first two bytes). */
typedef struct edge {
    uint32_t rank, cut; /* X = bytes [0, cut), P = [cut, len) (left); S = [0, cut), Y = [cut, len) (right) */
} edge;

/* Edges bucketed by a byte: e[count[b] .. count[b + 1]) */
typedef struct edges {
    edge *e;
    size_t count[257];
} edges;

/* The contexts of unit u = bytes c[0..len) of token `rank` from the left edges L (by the
 * lead byte of P; NULL: nothing is ever left of u) and the right edges R and R2 (by the
 * byte of S that ends u, rb; R2 may be NULL): appended to tok->ctx; with more than
 * MAX_CONTEXTS on a side none are kept and u is `never`. */
static void unit_contexts(lt_tokenizer *tok, const unsigned char *c, size_t len, uint32_t rank, const edges *L,
                          const edges *R, const edges *R2, unsigned rb, size_t *ctx_cap, char_unit *out) {
    size_t first = tok->n_ctx, nside[2] = {0, 0};
    uint64_t mask[2] = {0, 0};
    for (int pass = 0; pass < 3; pass++) {
        int side = pass == 0 ? 0 : 1;
        const edges *E = pass == 0 ? L : pass == 1 ? R : R2;
        if (!E) continue;
        unsigned b = side == 0 ? c[0] : rb;
        for (size_t k = E->count[b]; k < E->count[b + 1]; k++) {
            const edge *x = &E->e[k];
            if (x->rank >= rank) continue;
            const unsigned char *t = tok->pool + tok->off[x->rank];
            size_t tl = tok->off[x->rank + 1] - tok->off[x->rank];
            size_t part = side == 0 ? tl - x->cut : x->cut; /* |P| or |S| */
            if (part >= len) continue;
            if (side == 0 ? memcmp(t + x->cut, c, part) != 0 : memcmp(t, c + len - part, part) != 0) continue;
            if (nside[side] == MAX_CONTEXTS || first >= UINT32_MAX / 2) {
                tok->n_ctx = first;
                *out = (char_unit){rank, 0, 0, 0, true, 0, 0};
                return;
            }
            size_t m = side == 0 ? x->cut : tl - x->cut; /* |X| or |Y| */
            size_t at = tok->off[x->rank] + (side == 0 ? 0 : x->cut);
            if (tok->n_ctx == *ctx_cap) tok->ctx = lt_realloc_check(tok->ctx, (*ctx_cap *= 2) * sizeof *tok->ctx);
            tok->ctx[tok->n_ctx++] = (char_ctx){load_head(tok->pool + at, m < 8 ? m : 8), (uint32_t)at, (uint32_t)m};
            mask[side] |= 1ull << (tok->pool[side == 0 ? at + m - 1 : at] & 63);
            nside[side]++;
        }
    }
    *out = (char_unit){rank, (uint32_t)first, (uint16_t)nside[0], (uint16_t)nside[1], false, mask[0], mask[1]};
}

/* The byte an edge of token r cut at `cut` is bucketed by: P's lead byte (left), S's last
 * byte (right). */
static unsigned edge_byte(const lt_tokenizer *tok, size_t r, uint32_t cut, bool left) {
    return tok->pool[tok->off[r] + (left ? cut : cut - 1)];
}

/* Is the first merge of the 3 bytes c[0..3) (the lower-ranked of their two pairs) a token
 * of lower rank than r, the token of all three? Then the bytes build that token. */
static bool first_merge_below(const lt_tokenizer *tok, const unsigned char *c, uint32_t r) {
    uint32_t a = rank_of2(tok, c), b = rank_of2(tok, c + 1), m = a < b ? a : b;
    return m != NO_RANK && m < r;
}

static void build_chars(lt_tokenizer *tok) {
    /* four kinds of edges: tokens that end in an unfinished character (by its lead byte:
     * X + P); tokens that start with 1 or 2 continuation bytes followed by the start of a
     * character (by the last of them: S + Y after a whole character); tokens that start
     * with a continuation byte (by it: S + Y after a character's first two bytes); tokens
     * that start with the first two bytes of a 3-byte character and go on (by the second:
     * S + Y after a space and those two bytes) */
    size_t n = tok->n_ranks;
    edges E[4];
    memset(E, 0, sizeof E);
    uint32_t *cut[4]; /* per kind and token: where X | P or S | Y is cut, 0 for none */
    for (int k = 0; k < 4; k++) cut[k] = lt_calloc_check(n ? n : 1, sizeof(uint32_t));
    for (size_t r = 0; r < n; r++) {
        const unsigned char *t = tok->pool + tok->off[r];
        size_t len = tok->off[r + 1] - tok->off[r];
        for (size_t k = len; k > 1 && len - k < 3; k--) { /* the last byte that is not a continuation */
            unsigned b = t[k - 1];
            if ((b & 0xC0) == 0x80) continue;
            size_t need = b >= 0xC2 && b < 0xE0 ? 2 : b >= 0xE0 && b < 0xF0 ? 3 : 0;
            if (need && len - (k - 1) < need) cut[0][r] = (uint32_t)(k - 1);
            break;
        }
        size_t j = 0;
        while (j < len && j < 2 && (t[j] & 0xC0) == 0x80) j++;
        if (j > 0 && j < len && (t[j] & 0xC0) != 0x80) cut[1][r] = (uint32_t)j;
        if (len > 1 && (t[0] & 0xC0) == 0x80) cut[2][r] = 1; /* S = its first byte, Y the rest */
        if (len > 2 && (t[0] & 0xF0) == 0xE0 && (t[1] & 0xC0) == 0x80) cut[3][r] = 2; /* S = the two bytes */
    }
    for (int k = 0; k < 4; k++) { /* bucketed by P's lead byte t[cut] (left), S's last byte t[cut - 1] */
        for (size_t r = 0; r < n; r++)
            if (cut[k][r]) E[k].count[edge_byte(tok, r, cut[k][r], k == 0) + 1]++;
        for (int b = 0; b < 256; b++) E[k].count[b + 1] += E[k].count[b];
        E[k].e = lt_malloc_check((E[k].count[256] ? E[k].count[256] : 1) * sizeof(edge));
        size_t fill[256];
        for (int b = 0; b < 256; b++) fill[b] = E[k].count[b];
        for (size_t r = 0; r < n; r++)
            if (cut[k][r]) E[k].e[fill[edge_byte(tok, r, cut[k][r], k == 0)]++] = (edge){(uint32_t)r, cut[k][r]};
    }
    tok->chars = lt_malloc_check(65536 * sizeof *tok->chars);
    for (size_t cp = 0; cp < 65536; cp++) tok->chars[cp] = (char_unit){NO_RANK, 0, 0, 0, false, 0, 0};
    tok->heads = lt_malloc_check(1024 * sizeof *tok->heads);
    tok->space_heads = lt_malloc_check(1024 * sizeof *tok->space_heads);
    for (size_t k = 0; k < 1024; k++)
        tok->heads[k] = tok->space_heads[k] = (char_unit){NO_RANK, 0, 0, 0, false, 0, 0};
    size_t ctx_cap = 1024;
    tok->ctx = lt_malloc_check(ctx_cap * sizeof *tok->ctx);
    tok->n_ctx = 0;
    for (size_t r = 0; r < n; r++) {
        const unsigned char *c = tok->pool + tok->off[r];
        size_t len = tok->off[r + 1] - tok->off[r];
        if (len == 3 && c[0] == ' ' && three_byte_head(c[1], c[2])) { /* a space and a character's first two bytes */
            if (first_merge_below(tok, c, (uint32_t)r))
                unit_contexts(tok, c, 3, (uint32_t)r, NULL, &E[2], &E[3], c[2], &ctx_cap,
                              &tok->space_heads[head_index(c[1], c[2])]);
            continue;
        }
        if (len < 2 || len > 3 || c[0] < 0xC2 || c[0] >= 0xF0 || (c[1] & 0xC0) != 0x80) continue;
        if (len == 2 && c[0] >= 0xE0) { /* the first two bytes of a 3-byte character */
            if (three_byte_head(c[0], c[1]))
                unit_contexts(tok, c, 2, (uint32_t)r, &E[0], &E[2], NULL, c[1], &ctx_cap,
                              &tok->heads[head_index(c[0], c[1])]);
            continue;
        }
        if ((c[0] < 0xE0) != (len == 2)) continue;
        if (len == 3 && ((c[2] & 0xC0) != 0x80 || (c[0] == 0xE0 && c[1] < 0xA0))) continue;
        if (len == 3 && !first_merge_below(tok, c, (uint32_t)r)) continue;
        unit_contexts(tok, c, len, (uint32_t)r, &E[0], &E[1], NULL, c[len - 1], &ctx_cap,
                      &tok->chars[bmp_code_point(c, len)]);
    }
    for (int k = 0; k < 4; k++) {
        free(E[k].e);
        free(cut[k]);
    }
}

/* Parse the rank file into tok->pool/off/slots/byte_rank (and build_chars' tables). */
/* Parse rank-file text data[0..size) (taken: freed here); `path` names it in errors. */
static lt_status parse_ranks(lt_tokenizer *tok, const char *path, char *data, size_t size, lt_error *err) {
    lt_status st = LT_OK;
    lt_sha256_hex(data, size, tok->sha256);
    char msg[160];
    unsigned char *stage = lt_malloc_check(size + 4);
    size_t nlines = 1;
    for (size_t i = 0; i < size; i++) nlines += data[i] == '\n';
    rank_line *rl = lt_calloc_check(nlines, sizeof *rl);
    size_t n = 0, staged = 0, line = 0;
    for (size_t pos = 0; pos < size && st == LT_OK;) {
        const char *nl = memchr(data + pos, '\n', size - pos);
        size_t end = nl ? (size_t)(nl - data) : size, next = nl ? end + 1 : size;
        line++;
        size_t e = end;
        if (e > pos && data[e - 1] == '\r') e--;
        if (e == pos) { /* blank lines are skipped, as tiktoken's loader does */
            pos = next;
            continue;
        }
        const char *sp = memchr(data + pos, ' ', e - pos);
        if (!sp) {
            st = where_fail(err, path, line, "expected 'BASE64 RANK', found no space");
            break;
        }
        const char *why = NULL;
        long len = b64decode((const unsigned char *)data + pos, (size_t)(sp - data) - pos, stage + staged, &why);
        if (len < 0) {
            snprintf(msg, sizeof msg, "bad base64 token: %s", why);
            st = where_fail(err, path, line, msg);
            break;
        }
        const char *r = sp + 1;
        uint64_t rank = 0;
        if (r == data + e) st = where_fail(err, path, line, "the rank is missing after the space");
        for (; st == LT_OK && r < data + e; r++) {
            if (*r < '0' || *r > '9') {
                snprintf(msg, sizeof msg, "the rank '%.*s' is not a non-negative integer",
                         (int)(data + e - sp - 1 > 40 ? 40 : data + e - sp - 1), sp + 1);
                st = where_fail(err, path, line, msg);
            } else if ((rank = rank * 10 + (uint64_t)(*r - '0')) >= UINT32_MAX - 1) {
                st = where_fail(err, path, line, "the rank is too large (at most 4294967293)");
            }
        }
        if (st != LT_OK) break;
        rl[n++] = (rank_line){(uint32_t)rank, (uint32_t)staged, (uint32_t)len, line};
        staged += (size_t)len;
        pos = next;
    }
    free(data);
    if (st == LT_OK && n == 0) st = lt_fail(err, LT_ERR_INPUT, path, "no tokens in the rank file");
    /* ranks must be exactly 0..n-1: no duplicates, no gaps */
    size_t *line_of = st == LT_OK ? lt_calloc_check(n, sizeof *line_of) : NULL;
    size_t first_out = 0;
    for (size_t i = 0; st == LT_OK && i < n; i++) {
        if (rl[i].rank >= n) {
            if (!first_out) first_out = i + 1;
            continue;
        }
        if (line_of[rl[i].rank]) {
            snprintf(msg, sizeof msg, "duplicate rank %" PRIu32 " (first on line %zu)", rl[i].rank,
                     line_of[rl[i].rank]);
            st = where_fail(err, path, rl[i].line, msg);
        }
        line_of[rl[i].rank] = rl[i].line;
    }
    if (st == LT_OK && first_out) {
        size_t missing = 0;
        while (line_of[missing]) missing++;
        snprintf(msg, sizeof msg, "rank %" PRIu32 " leaves a gap: %zu tokens need ranks 0..%zu, and rank %zu is missing",
                 rl[first_out - 1].rank, n, n - 1, missing);
        st = where_fail(err, path, rl[first_out - 1].line, msg);
    }
    if (st == LT_OK) {
        tok->n_ranks = (uint32_t)n;
        tok->pool = lt_malloc_check(staged + 1);
        tok->off = lt_malloc_check((n + 1) * sizeof *tok->off);
        size_t *line_by_rank = line_of; /* reuse: rank -> line */
        uint32_t *idx = lt_malloc_check(n * sizeof *idx);
        for (size_t i = 0; i < n; i++) idx[rl[i].rank] = (uint32_t)i;
        size_t o = 0;
        for (size_t r = 0; r < n; r++) {
            const rank_line *x = &rl[idx[r]];
            tok->off[r] = (uint32_t)o;
            memcpy(tok->pool + o, stage + x->off, x->len);
            o += x->len;
        }
        tok->off[n] = (uint32_t)o;
        size_t slots = 1024;
        while (slots < 2 * n) slots *= 2;
        tok->slots = lt_calloc_check(slots, sizeof *tok->slots);
        tok->mask = slots - 1;
        unsigned filter_log2 = 16; /* >= 8 bits per token: ~10% false positives at most */
        while ((1ull << filter_log2) < 8 * (uint64_t)n) filter_log2++;
        tok->filter = lt_calloc_check((size_t)1 << (filter_log2 - 6), sizeof *tok->filter);
        tok->filter_shift = 64 - filter_log2;
        for (uint32_t r = 0; r < n && st == LT_OK; r++) {
            uint32_t dup = table_insert(tok, r);
            if (dup != NO_RANK) {
                snprintf(msg, sizeof msg, "duplicate token: rank %" PRIu32 " has the same bytes as rank %" PRIu32
                         " (line %zu)", r, dup, line_by_rank[dup]);
                st = where_fail(err, path, line_by_rank[r], msg);
            }
        }
        tok->rank2 = lt_malloc_check(65536 * sizeof *tok->rank2);
        for (uint32_t r = 0; r < 65536; r++) tok->rank2[r] = NO_RANK;
        for (uint32_t r = 0; r < n; r++)
            if (tok->off[r + 1] - tok->off[r] == 2)
                tok->rank2[(unsigned)tok->pool[tok->off[r]] << 8 | tok->pool[tok->off[r] + 1]] = r;
        for (int b = 0; b < 256 && st == LT_OK; b++) {
            unsigned char c = (unsigned char)b;
            tok->byte_rank[b] = rank_of(tok, &c, 1);
            if (tok->byte_rank[b] == NO_RANK) {
                snprintf(msg, sizeof msg, "no token for the single byte 0x%02X: byte-level BPE needs all 256", b);
                st = lt_fail(err, LT_ERR_INPUT, path, "%s", msg);
            }
        }
        free(idx);
        if (st == LT_OK) build_chars(tok);
    }
    free(line_of);
    free(rl);
    free(stage);
    return st;
}

static lt_status load_ranks(lt_tokenizer *tok, const char *path, lt_error *err) {
    char *data;
    size_t size;
    lt_status st = lt_read_file(path, &data, &size, err);
    if (st != LT_OK) return st;
    return parse_ranks(tok, path, data, size, err);
}

static lt_status add_special(lt_tokenizer *tok, const char *text, size_t len, int64_t id, const char *where,
                             lt_error *err) {
    if (len == 0) return lt_fail(err, LT_ERR_INPUT, where, "a special token with empty text");
    if (id < (int64_t)tok->n_ranks || id >= UINT32_MAX)
        return lt_fail(err, LT_ERR_INPUT, where, "special token '%s' has id %" PRId64
                       ", which is not above the %" PRIu32 " mergeable ranks", text, id, tok->n_ranks);
    for (size_t k = 0; k < tok->n_special; k++)
        if (tok->specials[k].id == id)
            return lt_fail(err, LT_ERR_INPUT, where, "special tokens '%s' and '%s' share id %" PRId64,
                           tok->specials[k].text, text, id);
    tok->specials = lt_realloc_check(tok->specials, (tok->n_special + 1) * sizeof *tok->specials);
    char *copy = lt_malloc_check(len + 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    tok->specials[tok->n_special++] = (special){copy, len, (uint32_t)id, false};
    if ((uint32_t)id + 1 > tok->n_vocab) tok->n_vocab = (uint32_t)id + 1;
    return LT_OK;
}

/* Read a .json sidecar: "pat_str" (required), "special_tokens" (optional), "name". */
static lt_status load_sidecar(lt_tokenizer *tok, const char *path, char **pattern, lt_error *err) {
    char *data;
    size_t size;
    lt_status st = lt_read_file(path, &data, &size, err);
    if (st != LT_OK) return st;
    lt_jv *doc = NULL;
    st = lt_json_parse(data, size, &doc, err);
    free(data);
    if (st != LT_OK) {
        lt_error_prefix(err, "%s: ", path);
        return st;
    }
    const lt_jv *pat = lt_jv_get(doc, "pat_str"), *sp = lt_jv_get(doc, "special_tokens"),
                *name = lt_jv_get(doc, "name");
    if (doc->type != LT_JV_OBJECT)
        st = lt_fail(err, LT_ERR_INPUT, path, "expected a JSON object, found %s", lt_jv_type_name(doc->type));
    else if (!pat || pat->type != LT_JV_STRING)
        st = lt_fail(err, LT_ERR_INPUT, path, "no \"pat_str\" string (the pre-tokenization pattern)");
    else if (sp && sp->type != LT_JV_OBJECT)
        st = lt_fail(err, LT_ERR_INPUT, path, "\"special_tokens\" is %s, expected an object of text: id",
                     lt_jv_type_name(sp->type));
    if (st == LT_OK) {
        *pattern = lt_strdup_check(pat->text);
        if (name && name->type == LT_JV_STRING && name->len) {
            free(tok->name);
            tok->name = lt_strdup_check(name->text);
        }
    }
    for (size_t k = 0; st == LT_OK && sp && k < sp->n; k++) {
        int64_t id;
        char where[PATH_MAX + 64];
        snprintf(where, sizeof where, "%s:%zu:%zu", path, sp->items[k].line, sp->items[k].column);
        if (!lt_jv_int64(&sp->items[k], &id))
            st = lt_fail(err, LT_ERR_INPUT, where, "special token '%s': the id is %s, expected an integer",
                         sp->keys[k], lt_jv_type_name(sp->items[k].type));
        else
            st = add_special(tok, sp->keys[k], sp->key_lens[k], id, where, err);
    }
    lt_jv_free(doc);
    return st;
}

static const char *stem_of(const char *path, size_t *len) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    *len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    return base;
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

lt_status lt_tokenizer_load(lt_tokenizer **out, const char *vocab_path, const char *pattern,
                            lt_pretok_engine engine, lt_error *err) {
    *out = NULL;
    static _Atomic uint64_t serials;
    lt_tokenizer *tok = lt_calloc_check(1, sizeof *tok);
    tok->serial = ++serials;
    size_t stem_len;
    const char *stem = stem_of(vocab_path, &stem_len);
    tok->name = lt_strdup_check(stem);
    tok->name[stem_len] = '\0';
    tok->vocab_path = lt_strdup_check(vocab_path);
    lt_status st = load_ranks(tok, vocab_path, err);
    tok->n_vocab = tok->n_ranks;
    char *pat = NULL, *sidecar = NULL;
    size_t known = N_KNOWN;
    if (st == LT_OK && pattern && !strchr(pattern, '/') && !strstr(pattern, ".json")) {
        for (known = 0; known < N_KNOWN && strcmp(KNOWN_ENCODINGS[known].name, pattern) != 0; known++) {}
        if (known == N_KNOWN) {
            st = lt_fail(err, LT_ERR_USAGE, NULL, "unknown pattern '%s'", pattern);
            lt_error_hint(err, "give cl100k_base, o200k_base, r50k_base, or the path of a NAME.json sidecar");
        }
    }
    if (st == LT_OK && known < N_KNOWN) {
        /* The pattern always; the special tokens only with the encoding's own rank file
         * (Llama-3's tokenizer.model takes cl100k's pattern, but its specials are its own:
         * give them in a .json sidecar). */
        pat = lt_strdup_check(lt_pretok_pattern(KNOWN_ENCODINGS[known].kind));
        bool own_file = strcmp(tok->sha256, KNOWN_ENCODINGS[known].sha256) == 0;
        for (size_t k = 0; own_file && k < sizeof KNOWN_SPECIALS / sizeof KNOWN_SPECIALS[0] && st == LT_OK; k++)
            if (strcmp(KNOWN_SPECIALS[k].encoding, pattern) == 0)
                st = add_special(tok, KNOWN_SPECIALS[k].text, strlen(KNOWN_SPECIALS[k].text),
                                 KNOWN_SPECIALS[k].id, vocab_path, err);
    } else if (st == LT_OK) {
        if (pattern) {
            sidecar = lt_strdup_check(pattern);
        } else { /* FILE.tiktoken -> FILE.json */
            size_t n = strlen(vocab_path), keep = n;
            const char *dot = strrchr(vocab_path, '.');
            if (dot && !strchr(dot, '/')) keep = (size_t)(dot - vocab_path);
            sidecar = lt_malloc_check(keep + 6);
            memcpy(sidecar, vocab_path, keep);
            strcpy(sidecar + keep, ".json");
            if (!is_file(sidecar)) {
                st = lt_fail(err, LT_ERR_USAGE, sidecar, "no pattern sidecar next to the rank file");
                lt_error_hint(err, "give --pattern cl100k_base|o200k_base|r50k_base or --pattern FILE.json");
            }
        }
        if (st == LT_OK) st = load_sidecar(tok, sidecar, &pat, err);
    }
    if (st == LT_OK) {
        tok->kind = engine == LT_PRETOK_ENGINE_PCRE2 ? LT_PRETOK_REGEX : lt_pretok_recognize(pat);
        if (tok->kind == LT_PRETOK_REGEX) {
            st = lt_regex_compile(&tok->re, pat, err);
            if (st != LT_OK) lt_error_prefix(err, "pattern of %s: ", sidecar ? sidecar : tok->name);
        }
    }
    free(pat);
    free(sidecar);
    if (st != LT_OK) {
        lt_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return LT_OK;
}

lt_status lt_tokenizer_build(lt_tokenizer **out, const char *name, const char *where, char *rank_text,
                             size_t size, const char *pattern, const lt_tok_special_def *specials,
                             size_t n_specials, const char *sha256_hex, lt_pretok_engine engine, lt_error *err) {
    *out = NULL;
    static _Atomic uint64_t serials;
    lt_tokenizer *tok = lt_calloc_check(1, sizeof *tok);
    tok->serial = ++serials + (UINT64_C(1) << 62); /* apart from lt_tokenizer_load's serials */
    tok->name = lt_strdup_check(name);
    tok->vocab_path = lt_strdup_check(where);
    lt_status st = parse_ranks(tok, where, rank_text, size, err);
    tok->n_vocab = tok->n_ranks;
    if (st == LT_OK && sha256_hex && strlen(sha256_hex) == LT_SHA256_HEX_LEN) memcpy(tok->sha256, sha256_hex, LT_SHA256_HEX_LEN + 1);
    for (size_t k = 0; st == LT_OK && k < n_specials; k++)
        st = add_special(tok, specials[k].text, specials[k].len, specials[k].id, where, err);
    if (st == LT_OK) {
        tok->kind = engine == LT_PRETOK_ENGINE_PCRE2 ? LT_PRETOK_REGEX : lt_pretok_recognize(pattern);
        if (tok->kind == LT_PRETOK_REGEX) {
            st = lt_regex_compile(&tok->re, pattern, err);
            if (st != LT_OK && st != LT_ERR_NOMEM) { /* the file's pattern is input, not usage */
                st = LT_ERR_INPUT;
                if (err) err->status = st;
            }
            if (st != LT_OK) lt_error_prefix(err, "pre-tokenizer regex of %s: ", where);
        }
    }
    if (st != LT_OK) {
        lt_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return LT_OK;
}

lt_status lt_tokenizer_load_encoding(lt_tokenizer **out, const char *name, const char *vocab_dir,
                                     lt_pretok_engine engine, lt_error *err) {
    char *vocab, *json;
    *out = NULL;
    lt_status st = lt_vocab_find(name, vocab_dir, &vocab, &json, err);
    if (st != LT_OK) return st;
    st = lt_tokenizer_load(out, vocab, json, engine, err);
    free(vocab);
    free(json);
    return st;
}
