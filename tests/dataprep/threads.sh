#!/usr/bin/env bash
# tests/dataprep/threads.sh — `dataprep run` gives byte-identical outputs (shard, index,
# stats, completion marker) for any number of threads. The pipeline spreads its work over
# threads (dataprep/run.c: JSONL lines decoded by the workers, shard frames compressed by
# a pool, several input files read at once), so every stage that could reorder something is
# exercised here: a multi-file task mixing WET (.gz), JSONL (.gz, .zst, plain, with bad lines
# and a damaged .zst), Wikipedia XML (.bz2) and a file that cannot be opened; once with the
# defaults, once with small frames, a small document cap (truncation, long-line skips) and
# EOS appended; one large JSONL file; one document larger than the in-flight budget; and a
# task of a 2-task array; and peak memory that does not grow with the input. T = 1, 2, 4 (oversubscribed on small
# machines, which is fine: only the bytes are compared). Emits TAP.
: "${top_srcdir:?}" "${top_builddir:?}"
BIN="$top_builddir/dataprep/dataprep"
V="$top_srcdir/data/vocab"
C="${LONGTAIL_SHARED:-$top_srcdir/../shared}/corpus"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lt-threads.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
  n=$((n + 1))
  echo "not ok $n - $1"
  shift
  for f in "$@"; do [ -f "$f" ] && sed 's/^/# /' "$f" | tail -15; done
}
if [ ! -d "$C/cc" ]; then
  echo "1..0 # SKIP no shared corpus at $C (set LONGTAIL_SHARED)"
  exit 0
fi

INPUTS=("$C/cc" "$C/jsonl" "$C/github" "$C/wikipedia/"*.xml.bz2 "$C/bad/mixed-lines.jsonl"
  "$C/bad/corrupt.jsonl.zst" "$C/bad/truncated.warc.wet.gz" "$C/bad/not-gzip.warc.wet.gz" "$C/bad/empty.jsonl")

# run_case NAME THREADS ARGS...: one run into $tmp/NAME-tTHREADS
run_case() {
  local name=$1 t=$2
  shift 2
  local out="$tmp/$name-t$t"
  "$BIN" run --vocab-dir "$V" --encoding cl100k_base --threads "$t" --allow-damaged --out "$out" "$@" \
    >"$out.log" 2>&1
}

# same_as NAME T: every output of run T is the bytes of run 1
same_as() {
  local name=$1 t=$2
  local a="$tmp/$name-t1" b="$tmp/$name-t$2" diffs=""
  for f in "$a"/task-*.tokens.zst "$a"/task-*.index "$a"/task-*.stats.json "$a"/task-*.done; do
    cmp -s "$f" "$b/$(basename "$f")" || diffs="$diffs $(basename "$f")"
  done
  local na nb
  na=$(ls "$a" | grep -v timings | wc -l)
  nb=$(ls "$b" | grep -v timings | wc -l)
  if [ -z "$diffs" ] && [ "$na" = "$nb" ] && [ "$na" -ge 4 ]; then
    ok "$name: --threads $t gives the same bytes as --threads 1 ($na files)"
  else
    not_ok "$name: --threads $t differs from --threads 1:${diffs:- file count $na vs $nb}" "$b.log"
  fi
}

# stat_at_least NAME KEY MIN: the stats of run 1 have KEY >= MIN (the case exercises it)
stat_at_least() {
  local name=$1 key=$2 min=$3 got
  got=$(python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
v = s
for k in sys.argv[2].split("."):
    v = v[k]
print(v)' "$tmp/$name-t1/task-00000.stats.json" "$key" 2>/dev/null)
  if [ -n "$got" ] && [ "$got" -ge "$min" ]; then
    ok "$name: stats $key = $got (>= $min)"
  else
    not_ok "$name: stats $key = '${got}', expected >= $min" "$tmp/$name-t1.log"
  fi
}

cases=(defaults small)
args_defaults=(--input "${INPUTS[@]}")
args_small=(--eos append --set data.frame_size=4K --set data.max_doc_bytes=3K --input "${INPUTS[@]}")
for c in "${cases[@]}"; do
  eval "args=(\"\${args_$c[@]}\")"
  for t in 1 2 4; do
    if run_case "$c" "$t" "${args[@]}"; then
      ok "$c: run with --threads $t"
    else
      not_ok "$c: run with --threads $t failed" "$tmp/$c-t$t.log"
    fi
  done
  same_as "$c" 2
  same_as "$c" 4
done
# the cases reach what they are meant to: many frames, skips, damage, truncation
stat_at_least defaults documents 300
stat_at_least defaults skipped.total 100
stat_at_least defaults damaged_files 2
stat_at_least small outputs.frames 100
stat_at_least small truncated_documents 100

# one large JSONL file (GitHub code x 3, ~16 MB, zstd): lines cut by one reader, decoded by
# the workers or, while they have decoded work waiting or it is far enough ahead, by the reader
# itself (run.c reader_should_decode, reader_help)
{ for _ in 1 2 3; do zstd -dc "$C/github/"*.jsonl.zst; done; } | zstd -q -1 -o "$tmp/big.jsonl.zst"
for t in 1 2 4; do
  run_case big "$t" --field code --set data.frame_size=64K --input "$tmp/big.jsonl.zst" ||
    not_ok "big: --threads $t failed" "$tmp/big-t$t.log"
done
same_as big 2
same_as big 4

# one document larger than a reader's share of the in-flight budget (8 MiB of text per
# tokenizer thread, run.c): it goes alone, between 2,000 small ones, at T = 1, 2 and 4
python3 - "$tmp/huge.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    small = lambda i: json.dumps({"text": "document %d: the quick brown fox, %d times." % (i, i % 97)})
    for i in range(1000): print(small(i), file=f)
    words = ["alpha", "βήτα", "гамма", "delta", "エプシロン", "zeta", "\t", "1234", "eta!"]
    print(json.dumps({"text": " ".join(words[(i * 7 + i // 5) % len(words)] for i in range(3_000_000))},
                     ensure_ascii=False), file=f)
    for i in range(1000, 2000): print(small(i), file=f)
PY
for t in 1 2 4; do
  run_case huge "$t" --input "$tmp/huge.jsonl" || not_ok "huge: --threads $t failed" "$tmp/huge-t$t.log"
done
same_as huge 2
same_as huge 4
stat_at_least huge documents 2001

# peak memory is bounded by the in-flight budget, not by the input: the big file four times
# over (~64 MB of text) peaks within 24 MB of the big file once (~16 MB), with one thread
# (the old floor of two 64 MiB documents let the whole input into memory). Not under ASan,
# whose quarantine keeps freed memory resident.
cat "$tmp/big.jsonl.zst" "$tmp/big.jsonl.zst" "$tmp/big.jsonl.zst" "$tmp/big.jsonl.zst" >"$tmp/big4.jsonl.zst"
run_case big4 1 --field code --set data.frame_size=64K --input "$tmp/big4.jsonl.zst" ||
  not_ok "big4: --threads 1 failed" "$tmp/big4-t1.log"
if ldd "$BIN" 2>/dev/null | grep -q libasan; then
  n=$((n + 1)); echo "ok $n # SKIP peak memory bound: a sanitizer build"
else
  rss() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["peak_rss_bytes"])' "$1"; }
  r1=$(rss "$tmp/big-t1/task-00000.timings.json") r4=$(rss "$tmp/big4-t1/task-00000.timings.json")
  if [ -n "$r1" ] && [ -n "$r4" ] && [ "$r4" -le $((r1 + 24 * 1024 * 1024)) ]; then
    ok "peak RSS with 4x the input: $((r4 >> 20)) MiB against $((r1 >> 20)) MiB"
  else
    not_ok "peak RSS with 4x the input: '$r4' bytes against '$r1' (more than 24 MiB over)" "$tmp/big4-t1.log"
  fi
fi

# one task of a 2-task array
for t in 1 4; do
  run_case array "$t" --task-id 1 --num-tasks 2 --input "${INPUTS[@]}" || not_ok "array: --threads $t failed" "$tmp/array-t$t.log"
done
same_as array 4

# the outputs of a threaded run are a valid dataset
if "$BIN" verify "$tmp/small-t4" >"$tmp/verify.log" 2>&1 && grep -q "0 problems" "$tmp/verify.log"; then
  ok "small: the --threads 4 outputs pass dataprep verify"
else
  not_ok "small: dataprep verify of the --threads 4 outputs" "$tmp/verify.log"
fi
echo "1..$n"
