/*
 * dataprep/wikitext.h — MediaWiki wikitext to plain text (what docs/formats.md lists).
 *
 * Dropped: templates {{...}} and parser functions (nested, any depth), tables {| ... |},
 * <ref>...</ref> and <ref .../>, HTML comments <!-- -->, category links [[Category:..]],
 * file/image links [[File:..]] [[Image:..]] (with nested links in their captions),
 * interlanguage links, magic words (__TOC__ ...), other HTML tags (their text content
 * kept, except <ref>, <math>, <gallery>, <timeline>, <score> whose content is dropped).
 * Kept: link labels ([[target|label]] -> label, [[x]] -> x, [http://u label] -> label),
 * heading text (== H == -> H), list item text, paragraph breaks; '' and ''' markers are
 * stripped; HTML entities (&amp; &nbsp; &#233; &#x263A; and the HTML named set in use
 * on Wikipedia) are decoded.
 *
 * The converter is a single pass with bounded nesting (deeper than LT_WIKITEXT_MAX_DEPTH
 * is treated as text), linear in the input, and never fails on any byte string: it is
 * fuzzed (tests/fuzz fuzz_wikitext). Invalid UTF-8 passes through (the reader repairs it).
 *
 * Thread-safety: reentrant; the output buffer belongs to the caller.
 */
#ifndef LT_DATAPREP_WIKITEXT_H
#define LT_DATAPREP_WIKITEXT_H

#include <stddef.h>

#define LT_WIKITEXT_MAX_DEPTH 64

/* A growable output buffer the caller keeps between calls (free with lt_wikitext_buf_free). */
typedef struct lt_wikitext_buf {
    char *data;
    size_t len;
    size_t cap;
} lt_wikitext_buf;

/* Convert in[0..len) into out (replacing its content). Aborts via the check allocators on
 * out-of-memory only. */
void lt_wikitext_to_text(const char *in, size_t len, lt_wikitext_buf *out);
void lt_wikitext_buf_free(lt_wikitext_buf *b);

#endif /* LT_DATAPREP_WIKITEXT_H */
