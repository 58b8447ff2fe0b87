/*
 * dataprep/dataprep.c — the dataprep program's command table.
 */
#include "dataprep/dataprep.h"

static const lt_cli_command commands[] = {
    {"encode",
     "(--encoding NAME [--vocab-dir DIR] | --vocab FILE.tiktoken [--pattern NAME|FILE.json] |\n"
     "         --tokenizer tokenizer.json)\n"
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
     "  --tokenizer FILE     a Hugging Face tokenizer.json (byte-level BPE; default\n"
     "                       data.tokenizer): ids as tokenizers' encode(text,\n"
     "                       add_special_tokens=False), every added token matched\n"
     "  --pretokenizer pcre2 split with the generic PCRE2 engine instead of the hand-written\n"
     "                       scanner (same ids; for checking)\n",
     encode_command},
    {"run",
     "--input PATH... --encoding NAME --out DIR [--format auto|wet|jsonl|wikixml|parquet] [--field KEY]\n"
     "        [--task-id I --num-tasks N] [--threads T] [--eos none|append] [--force] [--allow-damaged]",
     "tokenize task I of N of a corpus into a zstd token shard, an index and stats",
     "Task I of N takes the files [I::N] of the sorted input list (files, directories, globs,\n"
     "@LISTFILE; default data.input). Under a Slurm array SLURM_ARRAY_TASK_ID (minus\n"
     "SLURM_ARRAY_TASK_MIN) and SLURM_ARRAY_TASK_COUNT are the defaults of --task-id and\n"
     "--num-tasks. Writes DIR/task-IIIII.tokens.zst, .index, .stats.json, .timings.json and,\n"
     "last, the completion marker .done (docs/formats.md). Every file is written atomically;\n"
     "a finished task is skipped on rerun (--force redoes it), an interrupted one is redone.\n"
     "Bad records are skipped and counted; a damaged file (truncated or corrupt compression,\n"
     "unclosed XML) keeps the documents before the damage and makes the task fail (exit 1)\n"
     "unless --allow-damaged (data.allow_damaged).\n"
     "\n"
     "  --format F        auto (default: data.format) decides per file from its content\n"
     "  --field KEY       JSONL text member (default data.field, 'text'; GitHub code: 'code')\n"
     "  --encoding NAME   tokenizer (default data.encoding); --vocab-dir DIR searched first\n"
     "  --out DIR         default data.out_dir, else WORK_DIR/NAME/data\n"
     "  --threads T       tokenizer threads (default data.threads; 0 = one per CPU)\n"
     "  --eos append      put <|endoftext|> after every document (default data.eos: none)\n"
     "Also from the config: data.max_doc_bytes (truncation cap), data.frame_size,\n"
     "data.zstd_level.\n",
     run_command},
    {"cat", "DIR [--task I] [--doc N] [--vocab-dir DIR] [--tokenizer FILE.json]",
     "print documents of an output directory as JSON lines, decoded",
     "One JSON object per document, in order: {\"task\":I,\"doc\":N,\"source\":\"FILE#ID\",\n"
     "\"name\":URI-or-title (when known),\"tokens\":COUNT,\"text\":TEXT}. ID is line=N (JSONL),\n"
     "page=ID (Wikipedia) or the WARC-Record-ID (WET).\n",
     cat_command},
    {"lengths", "DIR [--task I]", "print the token count of every document, one per line, in cat order", NULL,
     lengths_command},
    {"profile", "DIR [--model NAME] [--json] [--svg FILE]",
     "the length profile: per length bucket the share of documents, tokens and forward FLOPs",
     "Buckets <1K, 1K-2K, 2K-4K, ..., 128K-256K, >=256K tokens (1K = 1024). FLOPs are those of\n"
     "one causal forward pass over the document for the model (--model NAME, a preset; default\n"
     "the config's [model], else llama-7b). --json prints JSON instead of the table; --svg FILE\n"
     "also draws the three shares per bucket on a log scale.\n",
     profile_command},
    {"verify", "DIR [--task I]",
     "check an output directory: marker hashes, index, shard frames, seek table, counts",
     "Prints one line per task and a summary; exit 1 if anything does not match.\n", verify_command},
    {"export", "DIR --format llmc|megatron --out OUTDIR [--task I] [--eos-id N] [--vocab-dir DIR] [--tokenizer FILE]",
     "write the shards in llm.c (.bin) or Megatron-LM (.bin + .idx) layout",
     "llmc: per task a .bin with llm.c's 256 x int32 header and uint16 (or uint32) tokens,\n"
     "documents separated by <|endoftext|> (Llama 3: <|end_of_text|>); megatron: per task .bin + .idx as Megatron-LM's\n"
     "indexed dataset (one sequence per document). See docs/formats.md.\n",
     export_command},
    {"wikitext", "[FILE]", "print the plain text the Wikipedia reader makes of wikitext (FILE or stdin)",
     "The conversion of docs/formats.md (templates, tables, references, categories and files\n"
     "dropped; link labels, headings and text kept; entities decoded).\n",
     wikitext_command},
};

const lt_cli_program dataprep_program = {
    "dataprep",
    "Offline data preparation: read corpus files (Common Crawl WET, JSONL, Wikipedia XML),\n"
    "tokenize them, and write zstd token shards with an index and a length profile.",
    commands, sizeof commands / sizeof commands[0],
};
