#!/usr/bin/env bash
# tests/dataprep/cli.sh — the `dataprep` program keeps the command-line contract (tests/cli_common.sh).
PROG=dataprep
BIN=${top_builddir:?}/dataprep/dataprep
. "${top_srcdir:?}/tests/cli_common.sh"

# ------------------------------------------------------------------ dataprep encode
V="$top_srcdir/data/vocab"
printf 'Hello world' >"$tmp/hello.txt"
: >"$tmp/empty.txt"
printf 'caf\xe9 ok' >"$tmp/latin1.txt"
printf '{"text": "Hello world"}\n\n{"text": ""}\n{"code": "x = 1"}\n' >"$tmp/docs.jsonl"
printf '{"text": "Hello world"}\n{"text": oops}\n' >"$tmp/bad.jsonl"
printf '{"code": "x = 1", "text": "no"}\n' >"$tmp/code.jsonl"
printf 'SGVsbG8= 0\nSGVsbG8= 1\n' >"$tmp/dup.tiktoken"
# ids from tiktoken: cl100k_base encode_ordinary("Hello world") == [9906, 1917]
check "encode a file" 0 "^9906 1917$" "" -- encode --vocab-dir "$V" --encoding cl100k_base "$tmp/hello.txt"
check "encode: one line per file, empty line for an empty one" 0 "^$" "" \
  -- encode --vocab-dir "$V" --encoding cl100k_base "$tmp/empty.txt" "$tmp/hello.txt"
check "encode: encoding and vocab_dir from the config" 0 "^9906 1917$" "" \
  -- encode --set data.vocab_dir="$V" "$tmp/hello.txt"
check "encode --jsonl: a record without the field names file:line" 1 "^9906 1917$" \
  "no string field \"text\".*docs.jsonl:4" -- encode --vocab-dir "$V" --encoding cl100k_base --jsonl "$tmp/docs.jsonl"
check "encode --jsonl --field" 0 "^87 284 220 16$" "" \
  -- encode --vocab-dir "$V" --encoding cl100k_base --jsonl --field code "$tmp/code.jsonl"
check "encode --jsonl: the field from the config" 0 "^87 284 220 16$" "" \
  -- encode --vocab-dir "$V" --encoding cl100k_base --jsonl "$tmp/code.jsonl" --set data.field=code
check "encode --jsonl: bad JSON names file:line" 1 "" "bad.jsonl:2" \
  -- encode --vocab-dir "$V" --encoding cl100k_base --jsonl "$tmp/bad.jsonl"
check "encode: invalid UTF-8 is replaced and counted" 0 "" "replaced 1 invalid UTF-8 sequence with U\+FFFD in 1 document" \
  -- encode --vocab-dir "$V" --encoding cl100k_base "$tmp/latin1.txt"
check "encode: unknown encoding, with hint" 2 "" "hint: pass --vocab-dir" \
  -- encode --vocab-dir "$V" --encoding cl200k_base "$tmp/hello.txt"
check "encode: a damaged rank file names file:line" 1 "" "dup.tiktoken:2" \
  -- encode --vocab "$tmp/dup.tiktoken" --pattern r50k_base "$tmp/hello.txt"
check "encode: missing input file" 1 "" "nope.txt" \
  -- encode --vocab-dir "$V" --encoding cl100k_base "$tmp/nope.txt"
check "encode: --field without --jsonl" 2 "" "--field goes with --jsonl" \
  -- encode --vocab-dir "$V" --field code "$tmp/hello.txt"
check "encode: unknown special token" 2 "" "not a special token" \
  -- encode --vocab-dir "$V" --allowed-special '<|nope|>' "$tmp/hello.txt"
check "encode: unknown --pretokenizer" 2 "" "auto or pcre2" \
  -- encode --vocab-dir "$V" --pretokenizer fast "$tmp/hello.txt"
finish
