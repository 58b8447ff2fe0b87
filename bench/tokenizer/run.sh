#!/usr/bin/env bash
# bench/tokenizer/run.sh — longtail's tokenizer against PyPI tiktoken, one run, same texts,
# same machine: throughput per text set and encoding, 2-thread scaling, 1 MiB long runs.
#
#   bench/tokenizer/run.sh [--build-dir DIR] [--out DIR] [--vocab-dir DIR] [--python PY]
#                          [--reps K] [--samples N] [--encodings "cl100k_base o200k_base"]
#                          [--threads T] [--memos forget|fresh] [--profile]
#
#   --build-dir DIR  a configured build directory whose dataprep/libdataprep.a and
#                    lib/liblongtail.a are made (and linked) here; default OUT/build,
#                    configured with the project's defaults on first use (CFLAGS -g -O2)
#   --out DIR        work directory (default bench/tokenizer/out): texts, binary, raw results
#   --vocab-dir DIR  NAME.tiktoken + NAME.json (default data/vocab)
#   --python PY      a Python with tiktoken (default ~/.local/share/longtail/venv/bin/python3)
#   --reps K         rounds of (ours, tiktoken) per case, interleaved; best of K (default 3)
#   --samples N      timed samples per program run; best of N (default 5)
#   --threads T      the multi-thread count for the scaling figure (default 2)
#   --memos M        how each pass of ours starts with empty memos (bench_tokenizer.c's
#                    header): forget (default; lt_tok_scratch_forget, memory warm) or fresh
#                    (a new scratch per pass, made before the sample: memory cold, the
#                    method of the figures in docs/PERFORMANCE.md before issue 21)
#   --profile        also perf-record ours on each set and print where the time goes
#
# Steps: build bench_tokenizer; make_texts.py (english, code, multilingual, the per-script
# cjk, cyrillic, georgian sets + the long runs); for each encoding and set, K rounds of
# bench_tokenizer then bench_tiktoken.py (each with --threads 1,T); the long runs likewise, single thread. Every pair is checked
# to have produced the same token count and the same SHA-256 of the ids. Raw key=value
# lines go to OUT/results.txt; the tables (markdown) to stdout and OUT/report.md.
# Exit status: 0, 1 when a check failed (ids differ, a program failed), 2 bad usage.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die_usage() { printf 'run.sh: error: %s\n' "$1" >&2; usage >&2; exit 2; }
die() { printf 'run.sh: error: %s\n' "$1" >&2; exit 1; }

OUT="$HERE/out"
BUILD_DIR=""
VOCAB_DIR="$ROOT/data/vocab"
PY="${HOME}/.local/share/longtail/venv/bin/python3"
REPS=3
SAMPLES=5
THREADS=2
ENCODINGS="cl100k_base o200k_base"
PROFILE=0
MEMOS=forget
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || die_usage "$1 needs a value"; BUILD_DIR="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || die_usage "$1 needs a value"; OUT="$2"; shift 2 ;;
    --vocab-dir) [ $# -ge 2 ] || die_usage "$1 needs a value"; VOCAB_DIR="$2"; shift 2 ;;
    --python) [ $# -ge 2 ] || die_usage "$1 needs a value"; PY="$2"; shift 2 ;;
    --reps) [ $# -ge 2 ] || die_usage "$1 needs a value"; REPS="$2"; shift 2 ;;
    --samples) [ $# -ge 2 ] || die_usage "$1 needs a value"; SAMPLES="$2"; shift 2 ;;
    --threads) [ $# -ge 2 ] || die_usage "$1 needs a value"; THREADS="$2"; shift 2 ;;
    --encodings) [ $# -ge 2 ] || die_usage "$1 needs a value"; ENCODINGS="$2"; shift 2 ;;
    --memos) [ $# -ge 2 ] || die_usage "$1 needs a value"; MEMOS="$2"; shift 2 ;;
    --profile) PROFILE=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die_usage "unknown argument '$1'" ;;
  esac
done
for n in "$REPS" "$SAMPLES" "$THREADS"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die_usage "--reps, --samples and --threads take positive integers"
done
[ "$MEMOS" = forget ] || [ "$MEMOS" = fresh ] || die_usage "--memos is forget or fresh"
[ -x "$PY" ] || die "no Python at $PY (give --python PY, a Python with tiktoken)"
"$PY" -c 'import tiktoken' 2>/dev/null || die "$PY cannot import tiktoken"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
BUILD_DIR="${BUILD_DIR:-$OUT/build}"

# ---------------------------------------------------------------- build
if [ ! -f "$BUILD_DIR/Makefile" ]; then
  [ -x "$ROOT/configure" ] || die "no $ROOT/configure (run autoreconf -fi first) and no --build-dir"
  mkdir -p "$BUILD_DIR"
  echo "configuring $BUILD_DIR ..." >&2
  (cd "$BUILD_DIR" && "$ROOT/configure" >configure.out 2>&1) || die "configure failed: $BUILD_DIR/configure.out"
fi
BUILD_DIR="$(cd "$BUILD_DIR" && pwd)"
make -C "$BUILD_DIR" dataprep/libdataprep.a lib/liblongtail.a >"$OUT/make.log" 2>&1 \
  || die "building the libraries failed: see $OUT/make.log"
mkvar() { sed -n "s/^$1 = //p" "$BUILD_DIR/Makefile" | head -1; }
CC_B="$(mkvar CC)"
CFLAGS_B="$(mkvar CFLAGS)"
BIN="$OUT/bench_tokenizer"
# shellcheck disable=SC2086,SC2046 # the Makefile's flag lists are word lists
${CC_B:-cc} -std=gnu11 $CFLAGS_B -Wall -Wextra -I"$BUILD_DIR" -I"$ROOT" -o "$BIN" "$HERE/bench_tokenizer.c" \
  "$BUILD_DIR/dataprep/libdataprep.a" "$BUILD_DIR/lib/liblongtail.a" $(mkvar PCRE2_LIBS) -lpthread $(mkvar LIBS) \
  || die "compiling bench_tokenizer failed"

# ---------------------------------------------------------------- texts
python3 "$HERE/make_texts.py" --out "$OUT" >/dev/null || die "make_texts.py failed"
SETS="english code multilingual cjk cyrillic georgian"
LONG="letter cjk punct punct_mixed digits spaces"

# ---------------------------------------------------------------- machine
RESULTS="$OUT/results.txt"
# Lines without bench= hold one key=value each (the value may contain spaces).
{
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  echo "cores=$(nproc)"
  echo "kernel=$(uname -r)"
  echo "cc=$(${CC_B:-cc} --version | head -1) $CFLAGS_B"
  echo "tiktoken=$("$PY" -c 'import tiktoken; print(tiktoken.__version__)')"
  echo "python=$("$PY" -c 'import platform; print(platform.python_version())')"
  echo "commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "dirty_files=$(git -C "$ROOT" status --porcelain 2>/dev/null | wc -l)"
  echo "command=bench/tokenizer/run.sh --reps $REPS --samples $SAMPLES --threads $THREADS --encodings \"$ENCODINGS\" --memos $MEMOS$([ "$PROFILE" = 1 ] && echo " --profile")"
  echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RESULTS"

FAILED=0
: >"$OUT/tiktoken.err"
ours() { "$BIN" --vocab-dir "$VOCAB_DIR" --memos "$MEMOS" "$@"; }
peer() { "$PY" "$HERE/bench_tiktoken.py" --vocab-dir "$VOCAB_DIR" "$@" 2>>"$OUT/tiktoken.err"; }
for enc in $ENCODINGS; do
  for set in $SETS; do
    echo "$enc $set ..." >&2
    for _ in $(seq "$REPS"); do
      ours --encoding "$enc" --jsonl "$OUT/$set.jsonl" --label "$set" --threads "1,$THREADS" \
        --samples "$SAMPLES" --spin-reference >>"$RESULTS" || FAILED=1
      peer --encoding "$enc" --jsonl "$OUT/$set.jsonl" --label "$set" --threads "1,$THREADS" \
        --samples "$SAMPLES" >>"$RESULTS" || FAILED=1
    done
  done
  for run in $LONG; do
    echo "$enc long_$run ..." >&2
    for _ in $(seq "$REPS"); do
      ours --encoding "$enc" --text "$OUT/long_$run.txt" --label "long_$run" --samples 3 \
        --min-sample-s 0.05 >>"$RESULTS" || FAILED=1
      peer --encoding "$enc" --text "$OUT/long_$run.txt" --label "long_$run" --samples 3 \
        --min-sample-s 0.05 >>"$RESULTS" || FAILED=1
    done
  done
done
echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESULTS"

# ---------------------------------------------------------------- profile (optional)
if [ "$PROFILE" = 1 ]; then
  command -v perf >/dev/null || die "--profile needs perf"
  for enc in $ENCODINGS; do
    for set in $SETS long_letter long_cjk; do
      if [ -f "$OUT/$set.jsonl" ]; then input=(--jsonl "$OUT/$set.jsonl"); else input=(--text "$OUT/$set.txt"); fi
      rm -f "$OUT/perf.$enc.$set.data" # else perf keeps the previous one as .old
      perf record -q -F 1999 -o "$OUT/perf.$enc.$set.data" "$BIN" --vocab-dir "$VOCAB_DIR" --memos "$MEMOS" --encoding "$enc" \
        "${input[@]}" --samples 10 --min-sample-s 0.3 >/dev/null 2>&1 || die "perf record failed"
      perf report -q -i "$OUT/perf.$enc.$set.data" --no-children --stdio --sort sym 2>/dev/null \
        | sed "s/^/profile $enc $set /" >>"$OUT/profile.txt.new"
    done
  done
  mv "$OUT/profile.txt.new" "$OUT/profile.txt"
fi

# ---------------------------------------------------------------- report
python3 - "$RESULTS" "$THREADS" "$([ "$PROFILE" = 1 ] && echo "$OUT/profile.txt")" >"$OUT/report.md" <<'EOF' || FAILED=1
import re, sys
results, threads = sys.argv[1], int(sys.argv[2])
profile = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None
meta, rows = {}, []
for line in open(results):
    if line.startswith("bench="):
        rows.append(dict(p.split("=", 1) for p in line.split() if "=" in p))
    elif "=" in line:
        key, value = line.rstrip("\n").split("=", 1)
        meta[key] = value

def best(bench, set_, enc, t):
    """The best (lowest best_s) line of a case, and every line of it (for the checks)."""
    rs = [r for r in rows if r["bench"] == bench and r["set"] == set_ and r["encoding"] == enc
          and int(r["threads"]) == t]
    ok = [r for r in rs if "best_s" in r]
    return (min(ok, key=lambda r: float(r["best_s"])) if ok else (rs[0] if rs else None)), rs

bad = []
def check(a, b, case):
    """Ours and tiktoken encoded the same ids (count and SHA-256) in every run."""
    seen = {(r.get("tokens"), r.get("ids_sha256")) for r in a + b if "ids_sha256" in r}
    if len(seen) > 1:
        bad.append(case)
        return "DIFFERENT"
    return "same" if b and all("ids_sha256" in r for r in b) else "ours only"

def mb(r): return float(r["mb_per_s"])
def tps(r): return float(r["tokens_per_s"]) / 1e6

out = []
p = out.append
p(f"machine: {meta.get('cpu')}, {meta.get('cores')} cores, Linux {meta.get('kernel')}; "
  f"{meta.get('cc')}; tiktoken {meta.get('tiktoken')} (Python {meta.get('python')})")
p(f"date: {meta.get('date')}; commit {meta.get('commit')} (+{meta.get('dirty_files')} changed files); "
  f"load average at start {meta.get('loadavg_start')}, at end {meta.get('loadavg_end')}")
p(f"command: {meta.get('command')}")
p("")
p("Throughput, single thread (best of all samples; MB = 1e6 bytes of UTF-8 input):")
p("")
p("| set | encoding | bytes | tokens | ours MB/s | tiktoken MB/s | ratio | ours Mtok/s | tiktoken Mtok/s | ids |")
p("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
sets = ["english", "code", "multilingual", "cjk", "cyrillic", "georgian"]
encs = list(dict.fromkeys(r["encoding"] for r in rows))
for enc in encs:
    for s in sets:
        o, oa = best("longtail", s, enc, 1)
        t, ta = best("tiktoken", s, enc, 1)
        if not o:
            continue
        ids = check(oa, ta, f"{enc} {s}")
        if t and "best_s" in t:
            p(f"| {s} | {enc} | {o['bytes']} | {o['tokens']} | {mb(o):.1f} | {mb(t):.1f} | **{mb(o)/mb(t):.2f}x** "
              f"| {tps(o):.2f} | {tps(t):.2f} | {ids} |")
        else:
            p(f"| {s} | {enc} | {o['bytes']} | {o['tokens']} | {mb(o):.1f} | error | - | {tps(o):.2f} | - | {ids} |")
p("")
p(f"Scaling, {threads} threads vs 1 (same program run, samples interleaved; MB/s of the best sample). "
  f"'machine' is the scaling of a register-only spin loop timed beside each of our samples: "
  f"what the machine gave ideal parallel work at that moment:")
p("")
p(f"| set | encoding | ours 1T MB/s | ours {threads}T MB/s | ours scaling | machine (spin) scaling "
  f"| tiktoken 1T MB/s | tiktoken {threads}T MB/s | tiktoken scaling |")
p("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for enc in encs:
    for s in sets:
        o1, _ = best("longtail", s, enc, 1); oT, _ = best("longtail", s, enc, threads)
        t1, _ = best("tiktoken", s, enc, 1); tT, _ = best("tiktoken", s, enc, threads)
        if not (o1 and oT and "best_s" in o1 and "best_s" in oT):
            continue
        tt = (f"{mb(t1):.1f} | {mb(tT):.1f} | {mb(tT)/mb(t1):.2f}x" if t1 and tT and "best_s" in t1 and "best_s" in tT
              else "- | - | -")
        s1, _ = best("spin", s, enc, 1); sT, _ = best("spin", s, enc, threads)
        spin = f"{float(s1['best_s']) / float(sT['best_s']):.2f}x" if s1 and sT else "-"
        p(f"| {s} | {enc} | {mb(o1):.1f} | {mb(oT):.1f} | **{mb(oT)/mb(o1):.2f}x** | {spin} | {tt} |")
p("")
p("Long runs, one document of 1 MiB, single thread (seconds per encode, best of all samples):")
p("")
p("| text | encoding | bytes | tokens | ours s | tiktoken s | ratio (tiktoken s / ours s) | ids |")
p("|---|---|---:|---:|---:|---:|---:|---|")
for enc in encs:
    for s in [x for x in dict.fromkeys(r["set"] for r in rows) if x.startswith("long_")]:
        o, oa = best("longtail", s, enc, 1)
        t, ta = best("tiktoken", s, enc, 1)
        if not o:
            continue
        ids = check(oa, ta, f"{enc} {s}")
        if t and "best_s" in t and float(o["best_s"]) > 0:
            p(f"| {s[5:]} | {enc} | {o['bytes']} | {o['tokens']} | {float(o['best_s']):.3f} | {float(t['best_s']):.3f} "
              f"| **{float(t['best_s'])/float(o['best_s']):.2f}x** | {ids} |")
        else:
            why = (t or {}).get("error", "no result").replace("_", " ")[:90]
            p(f"| {s[5:]} | {enc} | {o['bytes']} | {o['tokens']} | {float(o['best_s']):.3f} | fails: {why} | - | {ids} |")

if profile:
    # Symbol groups; static functions may be inlined into their callers, so the split
    # between "lookup" and "merge" follows the compiler's inlining; the BPE total does not.
    cats = [
        ("BPE hash lookup (rank_*, pair_rank, hashing, memcmp)",
         re.compile(r"^(rank_.*|pair_rank.*|hash_bytes.*|load_head.*|mix64.*|__memcmp.*|memcmp.*)$")),
        ("BPE merge loops (encode_piece, merge_*, heap, memmove)",
         re.compile(r"^(encode_piece.*|merge_.*|heap_.*|emit.*|cache_.*|__memmove.*|memmove.*|__memcpy.*|memcpy.*)$")),
        ("pre-tokenizer (dataprep/pretok.c)",
         re.compile(r"^(lt_pretok_next_.*|run_any.*|run_none.*|whitespace.*|numbers_upto3.*|next_char.*|newlines.*|"
                    r"lt_uc_class.*|contraction.*|with_contraction.*|o200k_letters.*|letters.*)$")),
        ("encode loop (encode_ordinary, lt_tokenizer_encode)",
         re.compile(r"^(encode_ordinary.*|lt_tokenizer_encode.*|bind_scratch.*)$")),
        ("UTF-8 validation (lt_utf8_*)", re.compile(r"^lt_utf8_.*$")),
        ("bench loop (worker_run: id sum)", re.compile(r"^worker_run$")),
    ]
    startup = re.compile(r"^(lt_tokenizer_load|load_ranks|compress|table_insert|b64.*|lt_read_file|read_jsonl|lt_jsonl.*|"
                         r"decode_string|lt_sha256.*|add_doc|main|__libc_.*|_int_.*|malloc.*|free|.*page.*|\[k\].*)$")
    data = {}
    for line in open(profile):
        m = re.match(r"profile (\S+) (\S+)\s+([\d.]+)%\s+\[(.)\]\s+(\S+)", line)
        if m:
            enc, s, pct, kind, sym = m.group(1), m.group(2), float(m.group(3)), m.group(4), m.group(5)
            data.setdefault((enc, s), []).append((pct, sym if kind == "." else "[k]" + sym))
    p("")
    p("Where our time goes (perf record, single thread; share of the encoding samples, startup and kernel "
      "excluded; 'BPE total' = the first two columns):")
    p("")
    p("| encoding | input | BPE total | " + " | ".join(c for c, _ in cats) + " | other |")
    p("|---|---|---:|" + "---:|" * (len(cats) + 1))
    for (enc, s), syms in data.items():
        enc_syms = [(pct, sym) for pct, sym in syms if not startup.match(sym)]
        total = sum(pct for pct, _ in enc_syms) or 1.0
        shares = [sum(pct for pct, sym in enc_syms if rx.match(sym)) for _, rx in cats]
        cells = [f"{100 * v / total:.0f}%" for v in shares]
        p(f"| {enc} | {s} | {100 * (shares[0] + shares[1]) / total:.0f}% | " + " | ".join(cells)
          + f" | {100 * (total - sum(shares)) / total:.0f}% |")

if bad:
    p("")
    p("CHECK FAILED: ids differ between ours and tiktoken for: " + ", ".join(bad))
print("\n".join(out))
sys.exit(1 if bad else 0)
EOF
cat "$OUT/report.md"
[ "$FAILED" = 0 ] || die "a check or a program failed (see $RESULTS and $OUT/tiktoken.err)"
