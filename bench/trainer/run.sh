#!/usr/bin/env bash
# bench/trainer/run.sh — forward + backward time per token of the CPU fp32 trainer against
# PyTorch eager (same model, fp32, same threads, same unit), one run, rounds interleaved.
#
#   bench/trainer/run.sh [--build-dir DIR] [--out DIR] [--python PY] [--rounds N] [--reps R]
#                        [--warmup W] [--tokens N] [--samples K] [--threads T]
#                        [--impls "hf hand"] [--profile]
#
#   --build-dir DIR  a configured build directory where `make bench/trainer/bench_trainer`
#                    is run; default OUT/build, configured with the project's defaults on
#                    first use (CFLAGS -g -O2)
#   --out DIR        work directory (default bench/trainer/out): raw results, report, perf data
#   --python PY      a Python with torch and transformers
#                    (default ~/.local/share/longtail/venv/bin/python3)
#   --rounds N       rounds of (ours, then each torch impl), interleaved (default 3)
#   --reps R         timed steps per program run (default 3)
#   --warmup W       untimed steps before them (default 1)
#   --tokens N       tokens of the unit (default 4096)
#   --samples K      whole samples packed into the unit (default 1; torch then needs a
#                    block-diagonal mask: see bench_torch.py)
#   --threads T      OpenBLAS + pool threads for ours, torch.set_num_threads for torch (default 2)
#   --impls LIST     torch implementations (bench_torch.py --impl): hf = transformers'
#                    LlamaForCausalLM with sdpa, hand = tests/train/torch_parity.py's model
#                    with sdpa (default "hf hand")
#   --profile        also perf-record one step of ours and print where its time goes
#
# The model is lib/model.c's `small` preset (8 layers, hidden 256, 8 heads, 4 kv heads,
# SwiGLU 704, untied vocab 32000). Each round runs bench_trainer, then bench_torch.py per
# impl; every program run does W + R steps. The table gives, per side, the median of all
# timed steps of all rounds (and the range of the rounds' medians), us per token, model
# GFLOP/s, the ratio torch ms / ours ms (>= 1: we are at least as fast), the GEMM share
# (ours: lt_linear_timing over the timed steps; torch: torch.profiler on one extra step per
# run, median over rounds) and the peak RSS (max over rounds, whole process).
# Raw key=value lines go to OUT/results.txt; the table (markdown) to stdout and OUT/report.md.
# Exit status: 0; 1 when a program failed; 2 bad usage.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die_usage() { printf 'run.sh: error: %s\n' "$1" >&2; usage >&2; exit 2; }
die() { printf 'run.sh: error: %s\n' "$1" >&2; exit 1; }

OUT="$HERE/out"
BUILD_DIR=""
PY="${HOME}/.local/share/longtail/venv/bin/python3"
ROUNDS=3
REPS=3
WARMUP=1
TOKENS=4096
SAMPLES=1
THREADS=2
IMPLS="hf hand"
PROFILE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || die_usage "$1 needs a value"; BUILD_DIR="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || die_usage "$1 needs a value"; OUT="$2"; shift 2 ;;
    --python) [ $# -ge 2 ] || die_usage "$1 needs a value"; PY="$2"; shift 2 ;;
    --rounds) [ $# -ge 2 ] || die_usage "$1 needs a value"; ROUNDS="$2"; shift 2 ;;
    --reps) [ $# -ge 2 ] || die_usage "$1 needs a value"; REPS="$2"; shift 2 ;;
    --warmup) [ $# -ge 2 ] || die_usage "$1 needs a value"; WARMUP="$2"; shift 2 ;;
    --tokens) [ $# -ge 2 ] || die_usage "$1 needs a value"; TOKENS="$2"; shift 2 ;;
    --samples) [ $# -ge 2 ] || die_usage "$1 needs a value"; SAMPLES="$2"; shift 2 ;;
    --threads) [ $# -ge 2 ] || die_usage "$1 needs a value"; THREADS="$2"; shift 2 ;;
    --impls) [ $# -ge 2 ] || die_usage "$1 needs a value"; IMPLS="$2"; shift 2 ;;
    --profile) PROFILE=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die_usage "unknown argument '$1'" ;;
  esac
done
for n in "$ROUNDS" "$REPS" "$TOKENS" "$SAMPLES" "$THREADS"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die_usage "--rounds, --reps, --tokens, --samples and --threads take positive integers"
done
[[ "$WARMUP" =~ ^[0-9]+$ ]] || die_usage "--warmup takes a non-negative integer"
for impl in $IMPLS; do
  case "$impl" in hf | hand) ;; *) die_usage "--impls: unknown impl '$impl' (hf, hand)" ;; esac
done
[ -x "$PY" ] || die "no Python at $PY (give --python PY, a Python with torch and transformers)"
"$PY" -c 'import torch, transformers' 2>/dev/null || die "$PY cannot import torch and transformers"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
BUILD_DIR="${BUILD_DIR:-$OUT/build}"

# ---------------------------------------------------------------- build
if [ ! -f "$BUILD_DIR/Makefile" ]; then
  [ -x "$ROOT/configure" ] || die "no $ROOT/configure (run ./autogen.sh first) and no --build-dir"
  mkdir -p "$BUILD_DIR"
  echo "configuring $BUILD_DIR ..." >&2
  (cd "$BUILD_DIR" && "$ROOT/configure" >configure.out 2>&1) || die "configure failed: $BUILD_DIR/configure.out"
fi
BUILD_DIR="$(cd "$BUILD_DIR" && pwd)"
make -C "$BUILD_DIR" bench/trainer/bench_trainer >"$OUT/make.log" 2>&1 \
  || die "building bench_trainer failed: see $OUT/make.log"
BIN="$BUILD_DIR/bench/trainer/bench_trainer"
mkvar() { sed -n "s/^$1 = //p" "$BUILD_DIR/Makefile" | head -1; }

# ---------------------------------------------------------------- machine
RESULTS="$OUT/results.txt"
COMMON=(--tokens "$TOKENS" --samples "$SAMPLES" --threads "$THREADS" --reps "$REPS" --warmup "$WARMUP")
{
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  echo "cores=$(nproc)"
  echo "mem_gib=$(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)"
  echo "kernel=$(uname -r)"
  echo "cc=$($(mkvar CC) --version | head -1) $(mkvar CFLAGS)"
  echo "openblas=$(pkg-config --modversion openblas 2>/dev/null || echo unknown)"
  echo "torch=$("$PY" -c 'import torch; print(torch.__version__, "BLAS MKL" if torch.backends.mkl.is_available() else "")')"
  echo "transformers=$("$PY" -c 'import transformers; print(transformers.__version__)')"
  echo "python=$("$PY" -c 'import platform; print(platform.python_version())')"
  echo "commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "dirty_files=$(git -C "$ROOT" status --porcelain 2>/dev/null | wc -l)"
  echo "command=bench/trainer/run.sh --rounds $ROUNDS ${COMMON[*]} --impls \"$IMPLS\"$([ "$PROFILE" = 1 ] && echo " --profile")"
  echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RESULTS"

FAILED=0
: >"$OUT/torch.err"
for round in $(seq "$ROUNDS"); do
  echo "round $round/$ROUNDS: longtail ..." >&2
  "$BIN" "${COMMON[@]}" | sed "s/^/round=$round /" >>"$RESULTS" || FAILED=1
  for impl in $IMPLS; do
    echo "round $round/$ROUNDS: torch $impl ..." >&2
    "$PY" "$HERE/bench_torch.py" --impl "$impl" "${COMMON[@]}" 2>>"$OUT/torch.err" \
      | sed "s/^/round=$round /" >>"$RESULTS" || FAILED=1
  done
done
echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESULTS"

# ---------------------------------------------------------------- profile (optional)
if [ "$PROFILE" = 1 ]; then
  command -v perf >/dev/null || die "--profile needs perf"
  rm -f "$OUT/perf.data"
  perf record -q -F 499 -o "$OUT/perf.data" "$BIN" --tokens "$TOKENS" --samples "$SAMPLES" \
    --threads "$THREADS" --reps 1 --warmup 0 >/dev/null 2>&1 || die "perf record failed"
  perf report -q -i "$OUT/perf.data" --no-children --stdio --sort sym 2>/dev/null >"$OUT/profile.txt"
fi

# ---------------------------------------------------------------- report
python3 - "$RESULTS" "$([ "$PROFILE" = 1 ] && echo "$OUT/profile.txt")" >"$OUT/report.md" <<'EOF' || FAILED=1
import re, statistics, sys
results = sys.argv[1]
profile = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
meta, steps, runs = {}, {}, {}
for line in open(results):
    line = line.rstrip("\n")
    if line.startswith("round="):
        r = dict(p.split("=", 1) for p in line.split() if "=" in p)
        side = r["bench"] if r["bench"] == "longtail" else f"torch {r['impl']}"
        if "step" in r and "model" not in r:
            steps.setdefault(side, []).append(float(r["ms"]))
        elif "ms_per_step" in r:
            runs.setdefault(side, []).append(r)
    elif "=" in line:
        key, value = line.split("=", 1)
        meta[key] = value

out = []
p = out.append
p(f"machine: {meta.get('cpu')}, {meta.get('cores')} cores, {meta.get('mem_gib')} GiB, Linux {meta.get('kernel')}; "
  f"{meta.get('cc')}; OpenBLAS {meta.get('openblas')}; torch {meta.get('torch')}, transformers "
  f"{meta.get('transformers')} (Python {meta.get('python')})")
p(f"date: {meta.get('date')}; commit {meta.get('commit')} (+{meta.get('dirty_files')} changed files); "
  f"load average at start {meta.get('loadavg_start')}, at end {meta.get('loadavg_end')}")
p(f"command: {meta.get('command')}")
if not runs.get("longtail"):
    p("")
    p("NO RESULT from bench_trainer")
    print("\n".join(out))
    sys.exit(1)
first = runs["longtail"][0]
p("")
p(f"Forward + backward of one unit: model {first['model']} ({int(first['params']) / 1e6:.1f} M parameters), "
  f"{first['tokens']} tokens in {first['samples']} sample(s), {first['threads']} threads, fp32; "
  f"{len(runs['longtail'])} rounds x {first['reps']} timed steps (+{first['warmup']} warm-up) per side; "
  f"model FLOPs per step {float(first['gflop_per_step']):.1f} GFLOP (3x lib/model.h's forward).")
p("")
p("| side | ms / step (median of all steps) | rounds' medians | us / token | GFLOP/s | torch ms / ours ms "
  "| GEMM share | GEMM ms / step | peak RSS MB | RSS before the first step MB | loss |")
p("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
ours = statistics.median(steps["longtail"])
for side in ["longtail"] + [s for s in runs if s != "longtail"]:
    rs, st = runs[side], steps.get(side, [])
    if not st:
        p(f"| {side} | failed | | | | | | | | | |")
        continue
    med = statistics.median(st)
    meds = sorted(float(r["ms_per_step"]) for r in rs)
    tokens = int(rs[0]["tokens"])
    gflop = float(rs[0]["gflop_per_step"])
    if side == "longtail":
        share = sum(float(r["gemm_share"]) * float(r["ms_per_step"]) for r in rs) / sum(float(r["ms_per_step"]) for r in rs)
        gemm_ms = statistics.median(float(r["gemm_ms_per_step"]) for r in rs)
        ratio = "1 (reference)"
        share_s = f"{100 * share:.1f} % (hook)"
    else:
        shares = [float(r["gemm_share"]) for r in rs if r["gemm_share"] != "nan"]
        gms = [float(r["gemm_ms_profiled_step"]) for r in rs if r["gemm_ms_profiled_step"] != "nan"]
        share_s = f"{100 * statistics.median(shares):.1f} % (profiler)" if shares else "-"
        gemm_ms = statistics.median(gms) if gms else float("nan")
        ratio = f"**{med / ours:.3f}**"
    p(f"| {side} | {med:.0f} | {meds[0]:.0f} - {meds[-1]:.0f} | {med * 1e3 / tokens:.0f} | {gflop / (med * 1e-3):.1f} "
      f"| {ratio} | {share_s} | {gemm_ms:.0f} | {max(float(r['peak_rss_mb']) for r in rs):.0f} "
      f"| {max(float(r['rss_before_mb']) for r in rs):.0f} | {rs[-1]['loss']} |")

if profile:
    cats = [
        ("attention softmax (attn_*, softmax_tile_row, grad_tile_row)", re.compile(r"^(attn_.*|softmax_tile_row.*|grad_tile_row.*)$")),
        ("expf / logf (libm)", re.compile(r"^(__expf.*|expf.*|__ieee754_log.*|logf.*|__logf.*)$")),
        ("GEMM (OpenBLAS sgemm_*)", re.compile(r"^(sgemm_.*|.*_SKYLAKEX|.*_HASWELL|.*_ZEN|.*_COOPERLAKE|.*_SAPPHIRERAPIDS|exec_blas.*|blas_thread_server|inner_thread)$")),
        ("cross-entropy (xent_*, row_*)", re.compile(r"^(xent.*|row_max.*|row_expsum.*|row_softmax_grad.*)$")),
        ("RMSNorm, RoPE, SwiGLU, embedding", re.compile(r"^(rms_.*|rope_.*|swiglu_.*|lt_embed.*|__sincosf.*|__cos.*|__sin.*)$")),
        ("init (lt_llama_init, rng)", re.compile(r"^(lt_llama_init|lt_rng.*)$")),
        ("memset / memcpy / page faults / kernel", re.compile(r"^(__mem.*|mem.*|\[k\].*)$")),
    ]
    rows = []
    for line in open(profile):
        m = re.match(r"\s*([\d.]+)%\s+\[(.)\]\s+(\S+)", line)
        if m:
            pct, kind, sym = float(m.group(1)), m.group(2), m.group(3)
            rows.append((pct, sym if kind == "." else "[k]" + sym))
    total = sum(pct for pct, _ in rows) or 1.0
    shares = [sum(pct for pct, sym in rows if rx.match(sym)) for _, rx in cats]
    p("")
    p("Where our time goes (perf record of one step, share of all CPU samples, both threads):")
    p("")
    p("| " + " | ".join(c for c, _ in cats) + " | other |")
    p("|" + "---:|" * (len(cats) + 1))
    p("| " + " | ".join(f"{100 * s / total:.1f} %" for s in shares) + f" | {100 * (total - sum(shares)) / total:.1f} % |")
print("\n".join(out))
EOF
cat "$OUT/report.md"
[ "$FAILED" = 0 ] || die "a program failed (see $RESULTS and $OUT/torch.err)"
