#!/usr/bin/env bash
# bench/dataprep/run.sh — end-to-end `dataprep run` throughput against the tokenizer alone,
# same texts, same machine, one run.
#
#   bench/dataprep/run.sh [--build-dir DIR] [--out DIR] [--copies K] [--files F]
#                         [--threads "1 2"] [--reps R] [--encoding NAME]
#
#   --build-dir DIR  a configured build directory (default OUT/build, configured with the
#                    project's defaults on first use: CFLAGS -g -O2)
#   --out DIR        work directory (default bench/dataprep/out)
#   --copies K       the corpus is every document of ../shared/corpus (WET, JSONL, GitHub
#                    code, Wikipedia), written K times (default 8) into one zstd-compressed
#                    JSONL file, so that a run lasts long enough to time
#   --files F        split those K copies over F zstd JSONL files (F <= K; default 1): a
#                    task of several files, read by several reader threads at once (one
#                    zstd stream decodes on one core: past ~8 tokenizer threads, use F > 1)
#   --threads "T.."  tokenizer thread counts of `dataprep run` (default "1 2"; any list,
#                    e.g. "1 2 4 8 16" on a 16-core machine)
#   --reps R         runs per thread count, interleaved; best of R (default 3)
#
# Peer: bench_tokenizer (bench/tokenizer) on the same documents, single thread, in memory:
# the tokenizer's own throughput. The figure is the ratio
#       dataprep run MB/s with T threads / (T x single-thread tokenizer MB/s)
# which is 1 when reading, decompression, UTF-8 checks, zstd compression and writing all
# hide behind tokenization (target >= 0.85). MB = 1e6 bytes of document text; the run's
# time excludes loading the vocabulary (timings.json process_s) and includes committing the
# outputs. Also reported: peak RSS of the run, and the CPU seconds of each stage (timings
# file) with the thread count at which a single-threaded stage would bind.
# Results: OUT/results.txt and OUT/report.md.
# Exit status: 0; 1 when a step failed; 2 bad usage.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die_usage() { printf 'run.sh: error: %s\n' "$1" >&2; usage >&2; exit 2; }
die() { printf 'run.sh: error: %s\n' "$1" >&2; exit 1; }

OUT="$HERE/out"
BUILD_DIR=""
COPIES=8
FILES=1
THREADS="1 2"
REPS=3
ENCODING=cl100k_base
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --copies) COPIES="$2"; shift 2 ;;
    --files) FILES="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --encoding) ENCODING="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die_usage "unknown argument '$1'" ;;
  esac
done
[[ "$COPIES" =~ ^[1-9][0-9]*$ ]] || die_usage "--copies wants a positive integer"
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die_usage "--reps wants a positive integer"
[[ "$FILES" =~ ^[1-9][0-9]*$ ]] && [ "$FILES" -le "$COPIES" ] || die_usage "--files wants an integer 1..--copies"
for t in $THREADS; do [[ "$t" =~ ^[1-9][0-9]*$ ]] || die_usage "--threads wants positive integers"; done
SHARED="${LONGTAIL_SHARED:-$ROOT/../shared}"
[ -d "$SHARED/corpus" ] || die "no shared corpus at $SHARED (set LONGTAIL_SHARED)"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
BUILD_DIR="${BUILD_DIR:-$OUT/build}"

echo "== build ($BUILD_DIR)"
if [ ! -f "$BUILD_DIR/Makefile" ]; then
  [ -x "$ROOT/configure" ] || (cd "$ROOT" && ./autogen.sh >/dev/null)
  mkdir -p "$BUILD_DIR"
  (cd "$BUILD_DIR" && "$ROOT/configure" >configure.out 2>&1) || die "configure failed: $BUILD_DIR/configure.out"
fi
make -C "$BUILD_DIR" -j"$(nproc)" dataprep/dataprep bench/tokenizer/bench_tokenizer >/dev/null
DP="$BUILD_DIR/dataprep/dataprep"
BT="$BUILD_DIR/bench/tokenizer/bench_tokenizer"
V="$ROOT/data/vocab"

echo "== corpus: every document of $SHARED/corpus, $COPIES times"
docs="$OUT/docs.jsonl"
if [ ! -s "$docs" ]; then
  rm -rf "$OUT/prep"
  "$DP" -q run --vocab-dir "$V" --encoding "$ENCODING" --out "$OUT/prep/a" --input "$SHARED/corpus/cc" \
    "$SHARED/corpus/jsonl" "$SHARED/corpus/wikipedia"/*.xml.bz2
  "$DP" -q run --vocab-dir "$V" --encoding "$ENCODING" --out "$OUT/prep/b" --field code --input "$SHARED/corpus/github"
  { "$DP" cat --vocab-dir "$V" "$OUT/prep/a"; "$DP" cat --vocab-dir "$V" "$OUT/prep/b"; } |
    python3 -c 'import json, sys
for line in sys.stdin:
    print(json.dumps({"text": json.loads(line)["text"]}, ensure_ascii=False))' >"$docs.tmp"
  mv "$docs.tmp" "$docs"
fi
if [ "$FILES" = 1 ]; then
  big="$OUT/corpus-x$COPIES.jsonl.zst"
  if [ ! -s "$big" ]; then
    for _ in $(seq "$COPIES"); do cat "$docs"; done | zstd -q -3 -o "$big.tmp" && mv "$big.tmp" "$big"
  fi
  inputs=("$big")
else
  # file f of F holds copies f, f + F, ... (the task reads them in name order)
  inputs=()
  for f in $(seq 0 $((FILES - 1))); do
    part="$OUT/corpus-x$COPIES-f$FILES/part-$(printf %04d "$f").jsonl.zst"
    if [ ! -s "$part" ]; then
      mkdir -p "$(dirname "$part")"
      for _ in $(seq "$f" "$FILES" $((COPIES - 1))); do cat "$docs"; done | zstd -q -3 -o "$part.tmp" && mv "$part.tmp" "$part"
    fi
    inputs+=("$part")
  done
fi
text_mb=$(python3 -c 'import json, sys; print("%.2f" % (sum(len(json.loads(l)["text"].encode()) for l in open(sys.argv[1])) / 1e6))' "$docs")
echo "$(wc -l <"$docs") documents, $text_mb MB of text per copy; input $(du -ch "${inputs[@]}" | tail -1 | cut -f1) compressed in $FILES file(s)"

results="$OUT/results.txt"
: >"$results"
echo "== $REPS rounds: bench_tokenizer (1 thread) then dataprep run with T = $THREADS"
for r in $(seq "$REPS"); do
  "$BT" --encoding "$ENCODING" --vocab-dir "$V" --jsonl "$docs" --threads 1 --samples 3 --label corpus |
    sed "s/^/round=$r /" >>"$results"
  for t in $THREADS; do
    rm -rf "$OUT/run"
    "$DP" -q run --vocab-dir "$V" --encoding "$ENCODING" --out "$OUT/run" --threads "$t" --input "${inputs[@]}"
    python3 - "$OUT/run/task-00000.timings.json" "$r" "$t" >>"$results" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
cpu = " ".join("cpu_%s=%.4f" % kv for kv in sorted(t.get("cpu_s", {}).items()))
print("round=%s bench=dataprep_run threads=%s text_bytes=%d tokens=%d process_s=%.4f load_s=%.4f mb_per_s=%.3f peak_rss_bytes=%d %s"
      % (sys.argv[2], sys.argv[3], t["text_bytes"], t["tokens"], t["process_s"], t["load_s"],
         t["text_bytes"] / 1e6 / t["process_s"], t["peak_rss_bytes"], cpu))
PY
  done
done

python3 - "$results" "$THREADS" "$FILES" >"$OUT/report.md" <<'PY'
import sys
rows = [dict(kv.split("=", 1) for kv in line.split()) for line in open(sys.argv[1]) if line.strip()]
tok = max(float(r["mb_per_s"]) for r in rows if r.get("bench") == "longtail")
print("| threads | dataprep run MB/s (best) | tokenizer alone, 1 thread, MB/s (best) | ratio run / (T x tokenizer) | peak RSS |")
print("|---|---|---|---|---|")
for t in sys.argv[2].split():
    runs = [r for r in rows if r.get("bench") == "dataprep_run" and r["threads"] == t]
    best = max(runs, key=lambda r: float(r["mb_per_s"]))
    print("| %s | %.1f | %.1f | **%.2f** | %.0f MB |" % (t, float(best["mb_per_s"]), tok,
          float(best["mb_per_s"]) / (int(t) * tok), max(int(r["peak_rss_bytes"]) for r in runs) / 1e6))
# CPU seconds per stage of the best run of each T (timings file, all threads of a stage).
# A stage on one thread bounds the run at text MB / its CPU seconds whatever T: the
# writer and the hasher always; the readers when the task has one file. Past T = CPU of
# tokenization / CPU of that stage, more tokenizer threads cannot help (a projection for
# machines with more cores than this one: stages on other cores cost no wall time).
stages = ["readers", "decode", "tokenize", "compress", "hash", "writer"]
serial = ["writer", "hash"] + (["readers"] if sys.argv[3] == "1" else [])
print()
print("| threads | " + " | ".join("CPU s %s" % s for s in stages) +
      " | serial stages' bound, MB/s | T at which it binds (CPU tokenize / CPU of the slowest serial stage) |")
print("|---|" + "---|" * (len(stages) + 2))
for t in sys.argv[2].split():
    runs = [r for r in rows if r.get("bench") == "dataprep_run" and r["threads"] == t]
    best = max(runs, key=lambda r: float(r["mb_per_s"]))
    if "cpu_writer" not in best:
        continue
    mb = int(best["text_bytes"]) / 1e6
    slowest = max(float(best["cpu_" + s]) for s in serial)
    print("| %s | " % t + " | ".join("%.3f" % float(best["cpu_" + s]) for s in stages) +
          " | %.0f | %.1f |" % (mb / max(slowest, 1e-9), float(best["cpu_tokenize"]) / max(slowest, 1e-9)))
PY
cat "$OUT/report.md"
