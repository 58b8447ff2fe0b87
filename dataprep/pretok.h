/*
 * dataprep/pretok.h — pre-tokenization: split text into the pieces BPE merges within,
 * exactly as tiktoken's regex (Rust fancy-regex/regex: leftmost-first alternation,
 * backtracking semantics, Unicode classes) splits it.
 *
 * Two engines with the same answers:
 *   - hand-written scanners for the three known patterns (the fast path);
 *   - PCRE2 (UTF + UCP, JIT when available) for any other pattern: the generic path, and
 *     the oracle the scanners are tested and fuzzed against.
 * Input to both is valid UTF-8 (the tokenizer replaces invalid sequences first).
 */
#ifndef LT_PRETOK_H
#define LT_PRETOK_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/error.h"

typedef enum lt_pretok_kind {
    LT_PRETOK_CL100K, /* cl100k_base, also Llama-3 */
    LT_PRETOK_O200K,  /* o200k_base */
    LT_PRETOK_R50K,   /* r50k_base (GPT-2) */
    LT_PRETOK_REGEX,  /* anything else: PCRE2 */
} lt_pretok_kind;

/* The kind whose scanner implements `pattern` (compared as text with the known patterns,
 * as the .json sidecars of ../shared/vocab spell them), else LT_PRETOK_REGEX. */
lt_pretok_kind lt_pretok_recognize(const char *pattern);

/* The pattern text of a known kind (NULL for LT_PRETOK_REGEX). */
const char *lt_pretok_pattern(lt_pretok_kind kind);

/* The scanners. text[0..len) is valid UTF-8 and pos < len is a character boundary:
 * return the end (> pos) of the piece that starts at pos. The pieces of a text are
 * found by calling again from each returned end until len. The scanners never read outside
 * text[0..len), even on invalid UTF-8. */
size_t lt_pretok_next_cl100k(const unsigned char *text, size_t len, size_t pos);
size_t lt_pretok_next_o200k(const unsigned char *text, size_t len, size_t pos);
size_t lt_pretok_next_r50k(const unsigned char *text, size_t len, size_t pos);

/* The generic engine. Compiled once (read-only, shareable between threads); each thread
 * matches with its own lt_regex_scratch. */
typedef struct lt_regex lt_regex;
typedef struct lt_regex_scratch lt_regex_scratch;

/* Compile a tiktoken pattern for PCRE2. `\s` / `\S` are rewritten to Unicode White_Space
 * (what Rust's regex means; PCRE2's own \s also takes U+180E and misses nothing else
 * relevant), `$` means end of text only (PCRE2_DOLLAR_ENDONLY), as in Rust. `\S` inside a
 * bracket class cannot be rewritten and is refused; Rust-only class syntax (nested classes,
 * `&&`, `--`) is passed through to PCRE2 unchanged. A pattern PCRE2 rejects is
 * LT_ERR_CONFIG naming the offset and PCRE2's message. */
lt_status lt_regex_compile(lt_regex **out, const char *pattern, lt_error *err);
void lt_regex_free(lt_regex *re);
lt_regex_scratch *lt_regex_scratch_new(const lt_regex *re); /* NULL when out of memory */
void lt_regex_scratch_free(lt_regex_scratch *scratch);

/* The next non-empty match in text[0..len) that starts at or after pos (text is valid
 * UTF-8): *found = true and [*mstart, *mend); *found = false when there is none (text
 * between matches is skipped, as tiktoken's find_iter does; empty matches are skipped: after
 * an empty match at p the search resumes one character after p, as Rust's does, so `a*|b`
 * on "b" finds nothing).
 * LT_ERR_INPUT when PCRE2 gives up (match or depth limit), naming the offset. */
lt_status lt_regex_next(const lt_regex *re, lt_regex_scratch *scratch, const unsigned char *text,
                        size_t len, size_t pos, bool *found, size_t *mstart, size_t *mend,
                        lt_error *err);

#endif /* LT_PRETOK_H */
