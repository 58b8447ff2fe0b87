/*
 * dataprep/dataprep.c — the dataprep program's command table.
 */
#include "dataprep/dataprep.h"

static const lt_cli_command commands[] = {
    {"encode",
     "(--encoding NAME [--vocab-dir DIR] | --vocab FILE.tiktoken [--pattern NAME|FILE.json])\n"
     "        [--jsonl [--field KEY]] [--allowed-special all|TEXT,...] [--pretokenizer auto|pcre2] [FILE...]",
     "print the token ids of documents, one line per document",
     "Without --jsonl each FILE (or standard input, or '-') is one document; with --jsonl each\n"
     "line is a JSON object and the document is its string field KEY (default: data.field,\n"
     "'text'). Prints one line per document: its token ids in decimal separated by single\n"
     "spaces (an empty line for an empty document), in input order.\n"
     "\n"
     "Semantics are tiktoken's encode_ordinary: special-token text is ordinary text, unless\n"
     "--allowed-special lists the special tokens to encode as their ids ('all' for every one).\n"
     "Invalid UTF-8 is replaced by U+FFFD per maximal invalid subsequence (Python's\n"
     "errors=\"replace\") and the replacements are counted in a warning.\n"
     "\n"
     "  --encoding NAME      NAME.tiktoken + NAME.json from --vocab-dir (default data.vocab_dir),\n"
     "                       then $LONGTAIL_VOCAB_DIR, then the installed vocab directory\n"
     "                       (default NAME: data.encoding)\n"
     "  --vocab FILE         a tiktoken rank file of your own (e.g. Llama-3's tokenizer.model)\n"
     "  --pattern P          with --vocab: a known encoding's pattern and special tokens\n"
     "                       (cl100k_base, o200k_base, r50k_base) or a NAME.json sidecar;\n"
     "                       default: the .json next to FILE\n"
     "  --pretokenizer pcre2 split with the generic PCRE2 engine instead of the hand-written\n"
     "                       scanner (same ids; for checking)\n",
     encode_command},
};

const lt_cli_program dataprep_program = {
    "dataprep",
    "Offline data preparation: read corpus files (Common Crawl WET, JSONL, Wikipedia XML),\n"
    "tokenize them, and write zstd token shards with an index and a length profile.",
    commands, sizeof commands / sizeof commands[0],
};
