/*
 * dataprep/tokenizer.h — byte-level BPE that gives exactly tiktoken's token ids.
 *
 * A tokenizer is a tiktoken-format rank file (`NAME.tiktoken`: base64(token bytes) SP
 * rank LF, ranks 0..n-1, the rank of a token is also its merge priority) plus a
 * pre-tokenization pattern and special tokens (`NAME.json`: "pat_str", "special_tokens").
 *
 * Encoding = pre-tokenize (split the text into pieces as the pattern's regex does, with
 * leftmost-first alternation; dataprep/pretok.h), then within each piece merge bytes
 * with tiktoken's rule: repeatedly merge the adjacent pair whose concatenated bytes have
 * the lowest rank, ties to the left. A piece that is itself a token is one lookup; long
 * pieces use a heap with lazy invalidation, so the cost stays O(n log n).
 *
 * Thread-safety: a loaded lt_tokenizer is read-only and may be shared by any number of
 * threads; each thread passes its own lt_tok_scratch (the buffers that grow to the
 * largest input seen, so steady-state encoding allocates nothing). Configuration calls
 * (lt_tokenizer_set_allowed_special) happen before the tokenizer is shared.
 */
#ifndef LT_TOKENIZER_H
#define LT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"

typedef struct lt_tokenizer lt_tokenizer;
typedef struct lt_tok_scratch lt_tok_scratch;

/* Where pre-tokenization runs. AUTO: the hand-written scanner when the pattern is one of
 * the known ones (cl100k_base, o200k_base, r50k_base; Llama-3 uses cl100k's), else PCRE2.
 * PCRE2 forces the generic path (the oracle the scanners are checked against). */
typedef enum lt_pretok_engine { LT_PRETOK_ENGINE_AUTO = 0, LT_PRETOK_ENGINE_PCRE2 } lt_pretok_engine;

/* Load a rank file and a pattern. `pattern` is a known encoding name ("cl100k_base",
 * "o200k_base", "r50k_base": the pattern of that encoding, and its special tokens when the
 * rank file is that encoding's own, by SHA-256) or the path of a .json sidecar; NULL means the sidecar next to the rank file (FILE.json for
 * FILE.tiktoken), falling back to an error that says so. The rank file is validated:
 * bad base64, a missing or non-numeric rank, duplicate ranks or tokens, gaps in 0..n-1
 * and missing single-byte tokens are errors naming the file and line. */
lt_status lt_tokenizer_load(lt_tokenizer **out, const char *vocab_path, const char *pattern,
                            lt_pretok_engine engine, lt_error *err);

/* lt_vocab_find (lib/files.h) + lt_tokenizer_load. */
lt_status lt_tokenizer_load_encoding(lt_tokenizer **out, const char *name, const char *vocab_dir,
                                     lt_pretok_engine engine, lt_error *err);

/* A special token for lt_tokenizer_build: its text[0..len) and id (>= the ranks). */
typedef struct lt_tok_special_def {
    const char *text;
    size_t len;
    uint32_t id;
} lt_tok_special_def;

/* Build a tokenizer from rank-file text made in memory (rank_text[0..size), in the
 * .tiktoken format, TAKEN: freed here), a pattern text and special tokens: the loader of
 * other formats (dataprep/hf_tokenizer.h) converts to this. `where` names the source in
 * errors; `sha256_hex` (64 hex digits, or NULL for the text's own) is what
 * lt_tokenizer_vocab_sha256 reports. Validation as lt_tokenizer_load. */
lt_status lt_tokenizer_build(lt_tokenizer **out, const char *name, const char *where, char *rank_text,
                             size_t size, const char *pattern, const lt_tok_special_def *specials,
                             size_t n_specials, const char *sha256_hex, lt_pretok_engine engine, lt_error *err);

void lt_tokenizer_free(lt_tokenizer *tok);

const char *lt_tokenizer_name(const lt_tokenizer *tok);     /* "cl100k_base" or the file's stem */
uint32_t lt_tokenizer_n_ranks(const lt_tokenizer *tok);     /* mergeable tokens: ids 0..n-1 */
uint32_t lt_tokenizer_n_vocab(const lt_tokenizer *tok);     /* largest id + 1, specials included */
const char *lt_tokenizer_engine(const lt_tokenizer *tok);   /* "cl100k", "o200k", "r50k" or "pcre2" */
/* SHA-256 of the rank file's bytes, as 64 lowercase hex digits (identifies the vocabulary). */
const char *lt_tokenizer_vocab_sha256(const lt_tokenizer *tok);
/* The id of special token `text`, or -1. */
int64_t lt_tokenizer_special_id(const lt_tokenizer *tok, const char *text);
/* The end-of-text token documents are separated by (`dataprep run --eos append`, `dataprep
 * export`): <|endoftext|> (tiktoken's, GPT-2's, Qwen2's), else <|end_of_text|> (Llama 3's);
 * -1 when it has neither. */
int64_t lt_tokenizer_eos_id(const lt_tokenizer *tok);

/* Let the listed special tokens (comma-separated texts, or "all") be encoded as their ids
 * when they occur in the text, as tiktoken's encode(text, allowed_special=...,
 * disallowed_special=()). Default: none (encode_ordinary: special-token text is ordinary
 * text). An unknown name is LT_ERR_USAGE naming it. */
lt_status lt_tokenizer_set_allowed_special(lt_tokenizer *tok, const char *list, lt_error *err);

/* Whether merges may start from whole characters where that gives the same ids (the
 * default, true) or always from bytes (false): for the tests that compare the two and for
 * benchmarks. Like lt_tokenizer_set_allowed_special, before the tokenizer is shared. */
void lt_tokenizer_set_char_start(lt_tokenizer *tok, bool on);

/* Whether text that no match of the pattern covers is encoded as a piece of its own
 * (true: tokenizers' Split with behavior Isolated) or dropped (false, the default:
 * tiktoken's find_iter). Only the PCRE2 engine can leave such text: the known patterns
 * cover every character. Before the tokenizer is shared. */
void lt_tokenizer_set_split_gaps(lt_tokenizer *tok, bool on);

lt_tok_scratch *lt_tok_scratch_new(void); /* NULL when out of memory */
void lt_tok_scratch_free(lt_tok_scratch *scratch);

/* Forget the memos (recent pieces, pair merges) but keep every buffer, in O(1): the next
 * encode starts as a fresh scratch would, with its memory already allocated and warm. For
 * measurements that must not profit from text seen before (bench/tokenizer), and for
 * callers that want each document's ids computed without any memo of earlier ones (the ids
 * are the same either way). */
void lt_tok_scratch_forget(lt_tok_scratch *scratch);

typedef struct lt_encode_info {
    size_t n_tokens;          /* tokens of the whole text (may exceed the buffer) */
    size_t utf8_replacements; /* invalid UTF-8 sequences replaced by U+FFFD */
} lt_encode_info;

/* An upper bound on the tokens of a text of `len` bytes (each token has >= 1 byte; an
 * invalid byte becomes the 3 bytes of U+FFFD). */
static inline size_t lt_tokenizer_max_tokens(size_t len) { return 3 * len; }

/* Encode text[0..len) (any bytes: invalid UTF-8 is replaced by U+FFFD per maximal invalid
 * subsequence, as Python's errors="replace", and counted). Writes the first min(n, cap)
 * ids to ids[] and sets info->n_tokens = n: when n > cap, call again with a buffer of
 * n ids. Errors: LT_ERR_NOMEM; LT_ERR_INPUT when the PCRE2 engine gives up on a text. */
lt_status lt_tokenizer_encode(const lt_tokenizer *tok, lt_tok_scratch *scratch, const char *text,
                              size_t len, uint32_t *ids, size_t cap, lt_encode_info *info,
                              lt_error *err);

/* The same for text the caller knows is valid UTF-8 (a dataprep reader's documents:
 * reader.h guarantees it), without the validation pass. Passing invalid UTF-8 is a bug:
 * the ids are then unspecified (never out of bounds). */
lt_status lt_tokenizer_encode_utf8(const lt_tokenizer *tok, lt_tok_scratch *scratch, const char *text,
                                   size_t len, uint32_t *ids, size_t cap, lt_encode_info *info,
                                   lt_error *err);

/* The bytes of token `id` (special tokens: their text); NULL for an unknown id. */
const char *lt_tokenizer_token_bytes(const lt_tokenizer *tok, uint32_t id, size_t *len);

/* Decode ids into out[0..cap) (not NUL-terminated); *out_len = the full length (may exceed
 * cap: call again with a larger buffer). An unknown id is LT_ERR_INPUT naming its index. */
lt_status lt_tokenizer_decode(const lt_tokenizer *tok, const uint32_t *ids, size_t n, char *out,
                              size_t cap, size_t *out_len, lt_error *err);

#endif /* LT_TOKENIZER_H */
