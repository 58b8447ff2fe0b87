/*
 * dataprep/hf_tokenizer.h — load a Hugging Face tokenizer.json (byte-level BPE) as an
 * lt_tokenizer (dataprep/tokenizer.h), refusing by name what it does not implement.
 * What is supported and how merges map to ranks: docs/tokenizer.md, "tokenizer.json".
 */
#ifndef LT_HF_TOKENIZER_H
#define LT_HF_TOKENIZER_H

#include "dataprep/tokenizer.h" /* lt_tokenizer, lt_pretok_engine */
#include "lib/error.h"          /* lt_status, lt_error */

/* Load `path` (a tokenizer.json). Every added token (special or not) is matched in the
 * text as tokenizers' encode(text, add_special_tokens=False) does. The name is the file's
 * parent folder's name; lt_tokenizer_vocab_sha256 is the SHA-256 of the file's bytes. */
lt_status lt_hf_tokenizer_load(lt_tokenizer **out, const char *path, lt_pretok_engine engine, lt_error *err);

/* The same from the file's bytes data[0..len) (not taken); `where` names it in errors (the fuzz target). */
lt_status lt_hf_tokenizer_parse(lt_tokenizer **out, const char *data, size_t len, const char *where,
                                lt_pretok_engine engine, lt_error *err);

#endif /* LT_HF_TOKENIZER_H */
