/*
 * dataprep/hf_tokenizer.c — a Hugging Face tokenizer.json (byte-level BPE) turned into
 * the rank file + pattern + special tokens that dataprep/tokenizer.c encodes with.
 *
 * Accepted: model.type "BPE" with model.vocab (token string -> id) and model.merges ("a b"
 * strings or ["a", "b"] pairs), no dropout, no byte_fallback, no continuing-subword
 * prefix or end-of-word suffix; normalizer null; pre_tokenizer ByteLevel{use_regex:true}
 * (GPT-2's pattern, = r50k_base's) or Sequence[Split{pattern:{Regex:R}, behavior:Isolated,
 * invert:false}, ByteLevel{use_regex:false}] (pattern R), add_prefix_space false; decoder
 * null or ByteLevel. Token strings are GPT-2's bytes_to_unicode image of the bytes: the
 * printable bytes 0x21..0x7E, 0xA1..0xAC, 0xAE..0xFF stand for themselves, the other 68
 * bytes, in increasing order, for U+0100, U+0101, ...
 *
 * Ranks: the tokenizers library merges by the merge list's priority of the PAIR
 * (tokenizers/src/models/bpe/word.rs: lowest merge index first, then leftmost), tiktoken
 * by the rank of the concatenated bytes. We take rank = id, which is the same order
 * when the merges' results have strictly increasing ids in merge order and every
 * non-byte token of the vocabulary is the result of one merge: this is checked, and a file
 * where it does not hold is refused by name (merge index, tokens, ids).
 */
#include "dataprep/hf_tokenizer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/pretok.h" /* lt_pretok_pattern (GPT-2's pattern = r50k_base's) */
#include "lib/files.h"       /* lt_read_file */
#include "lib/json.h"        /* lt_json_parse, lt_jv */
#include "lib/log.h"         /* LT_WARN */
#include "lib/sha256.h"      /* lt_sha256_hex */
#include "lib/error.h"       /* lt_fail, lt_malloc_check, lt_strdup_check */

/* GPT-2 bytes_to_unicode, inverted: code point (< 324) -> byte, or -1. */
static void unicode_to_byte(int inv[324]) {
    for (int c = 0; c < 324; c++) inv[c] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        inv[keep ? b : 256 + extra++] = b;
    }
}

/* Decode a token string (UTF-8 of mapped code points) into bytes out[]; -1 when a
 * character is not in the mapping. */
static long token_bytes(const int inv[324], const char *s, size_t n, unsigned char *out) {
    long o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        unsigned cp;
        if (c < 0x80) cp = c, i += 1;
        else if ((c & 0xE0) == 0xC0 && i + 1 < n) cp = (unsigned)(c & 0x1F) << 6 | ((unsigned char)s[i + 1] & 0x3F), i += 2;
        else return -1;
        if (cp >= 324 || inv[cp] < 0) return -1;
        out[o++] = (unsigned char)inv[cp];
    }
    return o;
}

static const char *str_of(const lt_jv *v) { return v && v->type == LT_JV_STRING ? v->text : NULL; }
static const char *type_of(const lt_jv *v) {
    const char *t = str_of(lt_jv_get(v, "type"));
    return t ? t : "(no type)";
}
static bool is_true(const lt_jv *v) { return v && v->type == LT_JV_BOOL && v->boolean; }

static lt_status byte_level_ok(const lt_jv *bl, bool want_regex, const char *where, lt_error *err) {
    if (is_true(lt_jv_get(bl, "add_prefix_space")))
        return lt_fail(err, LT_ERR_INPUT, where, "pre_tokenizer ByteLevel with add_prefix_space true is not supported");
    const lt_jv *ur = lt_jv_get(bl, "use_regex");
    bool use = ur ? is_true(ur) : true; /* tokenizers' default is true */
    if (use != want_regex)
        return lt_fail(err, LT_ERR_INPUT, where, "pre_tokenizer ByteLevel with use_regex %s is not supported here",
                       use ? "true after a Split" : "false alone");
    return LT_OK;
}

/* The pre-tokenization pattern (a pointer into doc or a static string). */
static lt_status pattern_of(const lt_jv *pt, const char **pat, const char *where, lt_error *err) {
    const char *t = type_of(pt);
    if (pt && pt->type == LT_JV_OBJECT && strcmp(t, "ByteLevel") == 0) {
        lt_status st = byte_level_ok(pt, true, where, err);
        *pat = lt_pretok_pattern(LT_PRETOK_R50K);
        return st;
    }
    const lt_jv *seq = lt_jv_get(pt, "pretokenizers");
    if (pt && pt->type == LT_JV_OBJECT && strcmp(t, "Sequence") == 0 && seq && seq->type == LT_JV_ARRAY &&
        seq->n == 2 && strcmp(type_of(&seq->items[0]), "Split") == 0 &&
        strcmp(type_of(&seq->items[1]), "ByteLevel") == 0) {
        const lt_jv *sp = &seq->items[0];
        const char *re = str_of(lt_jv_get(lt_jv_get(sp, "pattern"), "Regex"));
        const char *beh = str_of(lt_jv_get(sp, "behavior"));
        if (!re)
            return lt_fail(err, LT_ERR_INPUT, where, "pre_tokenizer Split: only a {\"Regex\": ...} pattern is supported");
        if (!beh || strcmp(beh, "Isolated") != 0)
            return lt_fail(err, LT_ERR_INPUT, where, "pre_tokenizer Split with behavior %s: only Isolated is supported",
                           beh ? beh : "(none)");
        if (is_true(lt_jv_get(sp, "invert")))
            return lt_fail(err, LT_ERR_INPUT, where, "pre_tokenizer Split with invert true is not supported");
        *pat = re;
        return byte_level_ok(&seq->items[1], false, where, err);
    }
    if (!pt || pt->type == LT_JV_NULL)
        return lt_fail(err, LT_ERR_INPUT, where, "pre_tokenizer null: not byte-level BPE (need ByteLevel)");
    return lt_fail(err, LT_ERR_INPUT, where,
                   "pre_tokenizer %s is not supported (byte-level BPE only: ByteLevel, or Sequence[Split, ByteLevel])", t);
}

static void b64(const unsigned char *p, size_t n, char *out) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        out[o++] = A[v >> 18 & 63];
        out[o++] = A[v >> 12 & 63];
        out[o++] = i + 1 < n ? A[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? A[v & 63] : '=';
    }
    out[o] = '\0';
}

/* model.vocab sorted by token string, for O(log n) lookups (lt_jv_get is a linear scan). */
typedef struct vocab_index {
    const lt_jv *vocab;
    size_t *order;
} vocab_index;

static int cmp_str(const char *a, size_t la, const char *b, size_t lb) {
    int c = memcmp(a, b, la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

static const lt_jv *sort_vocab;
static int cmp_order(const void *x, const void *y) {
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    return cmp_str(sort_vocab->keys[i], sort_vocab->key_lens[i], sort_vocab->keys[j], sort_vocab->key_lens[j]);
}

static int64_t vocab_id(const vocab_index *vx, const char *s, size_t n) {
    size_t lo = 0, hi = vx->vocab->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2, k = vx->order[mid];
        int c = cmp_str(vx->vocab->keys[k], vx->vocab->key_lens[k], s, n);
        if (c == 0) {
            int64_t id;
            return lt_jv_int64(&vx->vocab->items[k], &id) ? id : -1;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* Split merge k into its two token strings (copies in a, b). */
static bool merge_parts(const lt_jv *m, char **a, char **b) {
    if (m->type == LT_JV_STRING) {
        const char *sp = memchr(m->text, ' ', m->len);
        if (!sp || memchr(sp + 1, ' ', m->len - (size_t)(sp + 1 - m->text))) return false;
        *a = lt_strdup_check(m->text);
        (*a)[sp - m->text] = '\0';
        *b = lt_strdup_check(sp + 1);
        return true;
    }
    if (m->type == LT_JV_ARRAY && m->n == 2 && m->items[0].type == LT_JV_STRING && m->items[1].type == LT_JV_STRING) {
        *a = lt_strdup_check(m->items[0].text);
        *b = lt_strdup_check(m->items[1].text);
        return true;
    }
    return false;
}

static lt_status convert(const lt_jv *doc, const char *where, const char *sha, const char *name,
                         lt_pretok_engine engine, lt_tokenizer **out, lt_error *err) {
    if (doc->type != LT_JV_OBJECT)
        return lt_fail(err, LT_ERR_INPUT, where, "expected a JSON object, found %s", lt_jv_type_name(doc->type));
    const lt_jv *model = lt_jv_get(doc, "model");
    if (!model || model->type != LT_JV_OBJECT) return lt_fail(err, LT_ERR_INPUT, where, "no \"model\" object");
    const char *mt = str_of(lt_jv_get(model, "type"));
    if (mt && strcmp(mt, "BPE") != 0)
        return lt_fail(err, LT_ERR_INPUT, where, "model type %s is not supported: byte-level BPE only", mt);
    if (is_true(lt_jv_get(model, "byte_fallback")))
        return lt_fail(err, LT_ERR_INPUT, where, "BPE with byte_fallback (SentencePiece style) is not supported: byte-level BPE only");
    const lt_jv *dr = lt_jv_get(model, "dropout");
    if (dr && dr->type != LT_JV_NULL) return lt_fail(err, LT_ERR_INPUT, where, "BPE dropout is not supported");
    const char *csp = str_of(lt_jv_get(model, "continuing_subword_prefix")), *eow = str_of(lt_jv_get(model, "end_of_word_suffix"));
    if ((csp && *csp) || (eow && *eow))
        return lt_fail(err, LT_ERR_INPUT, where, "BPE continuing_subword_prefix / end_of_word_suffix are not supported");
    const lt_jv *norm = lt_jv_get(doc, "normalizer");
    if (norm && norm->type != LT_JV_NULL)
        return lt_fail(err, LT_ERR_INPUT, where, "normalizer %s is not supported (only null)", type_of(norm));
    const lt_jv *dec = lt_jv_get(doc, "decoder");
    if (dec && dec->type != LT_JV_NULL && strcmp(type_of(dec), "ByteLevel") != 0)
        return lt_fail(err, LT_ERR_INPUT, where, "decoder %s is not supported: byte-level BPE needs ByteLevel", type_of(dec));
    const char *pat = NULL;
    lt_status st = pattern_of(lt_jv_get(doc, "pre_tokenizer"), &pat, where, err);
    if (st != LT_OK) return st;
    const lt_jv *vocab = lt_jv_get(model, "vocab"), *merges = lt_jv_get(model, "merges");
    if (!vocab || vocab->type != LT_JV_OBJECT) return lt_fail(err, LT_ERR_INPUT, where, "model.vocab is not an object");
    if (!merges || merges->type != LT_JV_ARRAY) return lt_fail(err, LT_ERR_INPUT, where, "model.merges is not an array");
    const lt_jv *added = lt_jv_get(doc, "added_tokens");
    if (added && added->type != LT_JV_ARRAY && added->type != LT_JV_NULL)
        return lt_fail(err, LT_ERR_INPUT, where, "added_tokens is not an array");
    size_t n_added = added && added->type == LT_JV_ARRAY ? added->n : 0, n = vocab->n;
    vocab_index vx = {vocab, lt_malloc_check((n + 1) * sizeof(size_t))};
    for (size_t k = 0; k < n; k++) vx.order[k] = k;
    sort_vocab = vocab; /* qsort has no context argument; loading is not concurrent-safe here */
    qsort(vx.order, n, sizeof *vx.order, cmp_order);
    /* An added token's id, as tokenizers gives it (its AddedVocabulary): the model's id when
     * its text is in model.vocab, else the next id after the model's, in added_tokens order;
     * the file's "id" is not used (tokenizers only warns when it differs). */
    uint32_t next_new = (uint32_t)n;
    lt_tok_special_def *sp = lt_calloc_check(n_added + 1, sizeof *sp);
    for (size_t k = 0; k < n_added && st == LT_OK; k++) {
        const lt_jv *a = &added->items[k];
        const lt_jv *c = lt_jv_get(a, "content");
        int64_t id;
        if (!c || c->type != LT_JV_STRING || !lt_jv_int64(lt_jv_get(a, "id"), &id) || id < 0 || id >= UINT32_MAX)
            st = lt_fail(err, LT_ERR_INPUT, where, "added_tokens[%zu]: needs a string content and an id", k);
        else if (is_true(lt_jv_get(a, "single_word")) || is_true(lt_jv_get(a, "lstrip")) || is_true(lt_jv_get(a, "rstrip")))
            st = lt_fail(err, LT_ERR_INPUT, where, "added token '%s': single_word / lstrip / rstrip are not supported", c->text);
        else {
            int64_t in_vocab = vocab_id(&vx, c->text, c->len);
            uint32_t real = in_vocab >= 0 ? (uint32_t)in_vocab : next_new++;
            if ((int64_t)real != id)
                LT_WARN("%s: added token '%s' has id %" PRId64 " in the file, but %" PRIu32 " as tokenizers loads it: using %" PRIu32,
                        where, c->text, id, real, real);
            sp[k] = (lt_tok_special_def){c->text, c->len, real};
        }
    }
    /* ranked tokens: the vocab minus the added tokens' texts */
    int inv[324];
    unicode_to_byte(inv);
    size_t cap = 64, used = 0;
    char *text = lt_malloc_check(cap);
    unsigned char *bytes = NULL;
    char *enc = NULL;
    int64_t *result_id = lt_calloc_check(n + 1, sizeof *result_id); /* by id: 1 = a merge's result */
    for (size_t k = 0; k < n && st == LT_OK; k++) {
        bool is_added = false;
        for (size_t a = 0; a < n_added && !is_added; a++)
            is_added = sp[a].len == vocab->key_lens[k] && memcmp(sp[a].text, vocab->keys[k], sp[a].len) == 0;
        if (is_added) continue;
        int64_t id;
        if (!lt_jv_int64(&vocab->items[k], &id) || id < 0 || (uint64_t)id >= n) {
            st = lt_fail(err, LT_ERR_INPUT, where, "model.vocab['%s']: the id is not an integer in 0..%zu", vocab->keys[k], n - 1);
            break;
        }
        bytes = lt_realloc_check(bytes, vocab->key_lens[k] + 1);
        long len = token_bytes(inv, vocab->keys[k], vocab->key_lens[k], bytes);
        if (len <= 0) {
            st = lt_fail(err, LT_ERR_INPUT, where, "model.vocab['%s']: not a ByteLevel token (a character outside GPT-2's byte mapping)",
                         vocab->keys[k]);
            break;
        }
        enc = lt_realloc_check(enc, (size_t)len * 2 + 8);
        b64(bytes, (size_t)len, enc);
        size_t need = strlen(enc) + 24;
        while (used + need >= cap) cap *= 2;
        text = lt_realloc_check(text, cap);
        used += (size_t)snprintf(text + used, cap - used, "%s %" PRId64 "\n", enc, id);
        if (len == 1) result_id[id] = 1;
    }
    /* merges: results' ids strictly increasing in merge order, every non-byte token a result */
    int64_t last = -1;
    for (size_t m = 0; m < merges->n && st == LT_OK; m++) {
        char *a = NULL, *b = NULL;
        if (!merge_parts(&merges->items[m], &a, &b)) {
            st = lt_fail(err, LT_ERR_INPUT, where, "model.merges[%zu]: expected \"A B\" or [\"A\", \"B\"]", m);
            break;
        }
        size_t la = strlen(a), lb = strlen(b);
        char *ab = lt_malloc_check(la + lb + 1);
        memcpy(ab, a, la);
        memcpy(ab + la, b, lb + 1);
        int64_t ia = vocab_id(&vx, a, la), ib = vocab_id(&vx, b, lb), iab = vocab_id(&vx, ab, la + lb);
        if (ia < 0 || ib < 0 || iab < 0 || (uint64_t)iab >= n)
            st = lt_fail(err, LT_ERR_INPUT, where, "model.merges[%zu] '%s' '%s': a token or the result is not in model.vocab", m, a, b);
        else if (iab <= last || result_id[iab]) {
            st = lt_fail(err, LT_ERR_INPUT, where,
                         "model.merges[%zu] '%s' '%s' gives id %" PRId64 ", not above the previous merge's %" PRId64
                         ": merges whose results are not in id order are not supported", m, a, b, iab, last);
            lt_error_hint(err, "the encoder ranks tokens by id (tiktoken's rule), which is the merge order only when ids follow it");
        } else {
            last = iab;
            result_id[iab] = 1;
        }
        free(a), free(b), free(ab);
    }
    for (size_t k = 0; k < n && st == LT_OK; k++) {
        int64_t id;
        bool is_added = false;
        for (size_t a = 0; a < n_added && !is_added; a++)
            is_added = sp[a].len == vocab->key_lens[k] && memcmp(sp[a].text, vocab->keys[k], sp[a].len) == 0;
        if (!is_added && lt_jv_int64(&vocab->items[k], &id) && !result_id[id])
            st = lt_fail(err, LT_ERR_INPUT, where, "model.vocab['%s'] (id %" PRId64 ") is neither a byte nor a merge's result",
                         vocab->keys[k], id);
    }
    free(vx.order);
    free(result_id);
    free(bytes);
    free(enc);
    if (st == LT_OK)
        st = lt_tokenizer_build(out, name, where, text, used, pat, sp, n_added, sha, engine, err);
    else
        free(text);
    free(sp);
    if (st == LT_OK) st = lt_tokenizer_set_allowed_special(*out, "all", err);
    if (st == LT_OK) lt_tokenizer_set_split_gaps(*out, true);
    return st;
}

lt_status lt_hf_tokenizer_parse(lt_tokenizer **out, const char *data, size_t len, const char *where,
                                lt_pretok_engine engine, lt_error *err) {
    *out = NULL;
    char sha[LT_SHA256_HEX_LEN + 1];
    lt_sha256_hex(data, len, sha);
    lt_jv *doc = NULL;
    lt_status st = lt_json_parse(data, len, &doc, err);
    if (st != LT_OK) {
        lt_error_prefix(err, "%s: ", where);
        return st;
    }
    /* the name: the parent folder of .../NAME/tokenizer.json, else the file's stem */
    char name[256] = "tokenizer";
    const char *slash = strrchr(where, '/');
    if (slash && slash > where) {
        const char *p = slash;
        while (p > where && p[-1] != '/') p--;
        snprintf(name, sizeof name, "%.*s", (int)(slash - p), p);
    }
    st = convert(doc, where, sha, name, engine, out, err);
    if (st != LT_OK && *out) {
        lt_tokenizer_free(*out);
        *out = NULL;
    }
    lt_jv_free(doc);
    return st;
}

lt_status lt_hf_tokenizer_load(lt_tokenizer **out, const char *path, lt_pretok_engine engine, lt_error *err) {
    char *data;
    size_t size;
    *out = NULL;
    lt_status st = lt_read_file(path, &data, &size, err);
    if (st != LT_OK) return st;
    st = lt_hf_tokenizer_parse(out, data, size, path, engine, err);
    free(data);
    return st;
}
