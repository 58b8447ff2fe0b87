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
# ------------------------------------------------------------------ dataprep run and the tools
D="$tmp/dp"
printf '{"text": "Hello world"}\n{"text": "second doc"}\n{"oops": 1}\n' >"$tmp/in.jsonl"
# one record in three is skipped here: above the default data.max_skipped_share (1 %)
check "run: more skipped records than max_skipped_share fail" 1 "" "1 of 3 records skipped \(33.33 %, most missing_field\), more than data.max_skipped_share \(1.00 %\)" \
  -- run --vocab-dir "$V" --encoding cl100k_base --threads 1 --out "$tmp/share" --input "$tmp/in.jsonl"
n=$((n + 1))
if [ ! -e "$tmp/share/task-00000.done" ]; then echo "ok $n - $PROG: run: ... and the task is not marked done"
else echo "not ok $n - $PROG: run: ... and the task is not marked done"; fails=$((fails + 1)); fi
# Named sources ([source.NAME]): a source whose every record lacks its field is an error with
# a hint from what the records hold; with the right field each document records its source.
printf '{"code": "int main() { return 0; }", "repo_name": "a/b", "size": 31}\n%.0s' 1 2 3 >"$tmp/gh.jsonl"
printf '{"text": "web page one"}\n{"text": "web page two"}\n' >"$tmp/web.jsonl"
printf '[data]\nencoding = cl100k_base\n[source.web]\ninput = %s\nweight = 3\n[source.github]\ninput = %s\nweight = 1\n' \
  "$tmp/web.jsonl" "$tmp/gh.jsonl" >"$tmp/mix.ini"
check "run: a source without documents names the file and suggests the field" 1 "" \
  "hint: records have members code, repo_name, size: set field = code for source github" \
  -- run --config "$tmp/mix.ini" --vocab-dir "$V" --threads 1 --out "$tmp/mix1"
check "run: ... and says the source has no document" 1 "" "source github has no document in this task's 1 file" \
  -- run --config "$tmp/mix.ini" --vocab-dir "$V" --threads 1 --out "$tmp/mix1"
check "run: named sources" 0 "" "task 0 of 1: 5 documents" \
  -- run --config "$tmp/mix.ini" --vocab-dir "$V" --threads 1 --out "$tmp/mix2" --set source.github.field=code
n=$((n + 1))
if python3 - "$tmp/mix2/task-00000.stats.json" >"$tmp/py" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
got = {s["name"]: (s["files"], s["documents"]) for s in d["sources"]}
assert got == {"web": (1, 2), "github": (1, 3)}, got
assert [f["source"] for f in d["files"]] == ["github", "web"], d["files"]
assert {s["name"]: s["field"] for s in d["settings"]["sources"]} == {"web": "text", "github": "code"}
PY
then echo "ok $n - $PROG: run: stats count documents per source"
else echo "not ok $n - $PROG: run: stats count documents per source"; sed 's/^/# /' "$tmp/py"; fails=$((fails + 1)); fi
check "profile: a table by source" 0 "^github +3 +60.00%" "" -- profile --model llama-7b "$tmp/mix2"
n=$((n + 1))
if "$BIN" profile --model llama-7b --json --svg "$tmp/mix.svg" "$tmp/mix2" >"$tmp/prof.json" 2>"$tmp/prof.err" &&
   python3 - "$tmp/prof.json" "$tmp/mix.svg" >"$tmp/py" 2>&1 <<'PY'
import json, sys, xml.dom.minidom as md
d = json.load(open(sys.argv[1]))
src = {s["name"]: s["profile"] for s in d["sources"]}
assert {k: v["documents"] for k, v in src.items()} == {"github": 3, "web": 2}, src
assert sum(v["tokens"] for v in src.values()) == d["tokens"]
bars = [e for e in md.parse(sys.argv[2]).getElementsByTagName("rect") if e.getAttribute("class") == "srcbar"]
share = {(b.getAttribute("data-source"), b.getAttribute("data-of")): float(b.getAttribute("data-share")) for b in bars}
assert len(bars) == 6 and abs(share[("github", "documents")] - 60.0) < 1e-6, share
PY
then echo "ok $n - $PROG: profile --json and --svg: each source's profile and share"
else echo "not ok $n - $PROG: profile --json and --svg: each source's profile and share"; sed 's/^/# /' "$tmp/py" "$tmp/prof.err"; fails=$((fails + 1)); fi
printf '[source.web]\ninput = %s\n[source.dup]\ninput = %s\n' "$tmp/web.jsonl" "$tmp/web.jsonl" >"$tmp/dup.ini"
check "run: a file in two sources" 2 "" "the file belongs to two sources: web and dup" \
  -- run --config "$tmp/dup.ini" --vocab-dir "$V" --threads 1 --out "$tmp/mix3"
RUN=(run --vocab-dir "$V" --encoding cl100k_base --threads 1 --set data.max_skipped_share=0.5)
check "run: a JSONL file" 0 "" "task 0 of 1: 2 documents" -- "${RUN[@]}" --out "$D" --input "$tmp/in.jsonl"
check "run: the skipped record is named file:line" 0 "" "in.jsonl:3.*missing_field" \
  -- "${RUN[@]}" --out "$tmp/out2" --input "$tmp/in.jsonl"
check "run: a finished task is skipped" 0 "" "already done.*--force" -- "${RUN[@]}" --out "$D" --input "$tmp/in.jsonl"
check "run: other settings are refused" 2 "" "made with other settings \(max_doc_bytes differs\)" \
  -- "${RUN[@]}" --out "$D" --input "$tmp/in.jsonl" --set data.max_doc_bytes=1K
check "run: no input" 2 "" "no input: give --input" -- "${RUN[@]}" --out "$D" --set data.input=
check "run: input paths go after --input" 2 "" "input paths go after --input" -- "${RUN[@]}" --out "$D" "$tmp/in.jsonl"
check "run: unknown format" 2 "" "unknown --format 'csv'" -- "${RUN[@]}" --out "$D" --format csv --input "$tmp/in.jsonl"
check "run: task id out of range" 2 "" "task 3 does not exist: there are 3 tasks" \
  -- "${RUN[@]}" --out "$D" --task-id 3 --num-tasks 3 --input "$tmp/in.jsonl"
check "run: several tasks need a task id" 2 "" "no task id" -- "${RUN[@]}" --out "$D" --num-tasks 2 --input "$tmp/in.jsonl"
check "run: a glob matching nothing" 1 "" "matches no file" -- "${RUN[@]}" --out "$D" --input "$tmp/none-*.jsonl"
check "run: bad --eos" 2 "" "--eos is none or append" -- "${RUN[@]}" --out "$D" --eos maybe --input "$tmp/in.jsonl"
check "cat: decoded documents with their source" 0 '^\{"task":0,"doc":1,"source":".*in.jsonl#line=2","tokens":2,"text":"second doc"\}$' "" \
  -- cat --vocab-dir "$V" "$D"
check "cat --doc" 0 '"text":"Hello world"' "" -- cat --vocab-dir "$V" "$D" --doc 0
check "cat: no such document" 2 "" "no document 5" -- cat --vocab-dir "$V" "$D" --doc 5
check "lengths" 0 "^2$" "" -- lengths "$D"
check "profile: a table" 0 "^<1K +2 +100.00%" "" -- profile --model llama-7b "$D"
check "profile: unknown model lists the presets" 2 "" "hint: presets: .*llama-13b" -- profile --model llama-9b "$D"
check "verify: a good directory" 0 "0 problems" "" -- verify "$D"
check "tools: not an output directory" 1 "" "no finished dataprep task" -- lengths "$tmp"
check "tools: DIR is required" 2 "" "give DIR" -- verify
printf '[[x|label]] and {{template}}text' >"$tmp/w.txt"
check "wikitext" 0 "^label and text$" "" -- wikitext "$tmp/w.txt"
# verify catches a changed byte in the shard
cp -r "$D" "$tmp/tampered"
shard="$tmp/tampered/task-00000.tokens.zst"
printf '\xff' | dd of="$shard" bs=1 seek=20 conv=notrunc status=none
check "verify: a changed shard byte" 1 "FAILED task 0" "SHA-256" -- verify "$tmp/tampered"
finish
