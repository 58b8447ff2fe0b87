#!/usr/bin/env bash
# bench/trainer/dist.sh — the distributed engine measured (issue 18): the simulator against
# measurement, pipeline scaling over MPI, and the first measured (not simulated) speedup of
# a strategy over megatron.
#
#   bench/trainer/dist.sh [--build-dir DIR] [--out DIR] [--pp P] [--tp T] [--steps N] [--context C]
#                         [--batch B] [--strategies "megatron slimpack auto"] [--profile FILE]
#                         [--preset NAME] [--mpi-only]
#
#   --build-dir DIR  a built tree (default _build/default)
#   --out DIR        work directory (default bench/trainer/out/dist)
#   --pp P           pipeline stages = MPI ranks (default 2; one thread each)
#   --tp T           tensor-parallel degree (default 1): P x T ranks, and no one-process peers
#                    (one process runs tp 1 only), as with --mpi-only
#   --steps N        stored steps per strategy (default 6)
#   --context C      plan.context_len (default 2048), --batch B plan.global_batch (default 8)
#   --profile FILE   a hardware profile; default: `trainer calibrate` under mpirun -n 2 with
#                    one thread per rank (OUT/cpu-calibrated.ini)
#   --preset NAME    model preset (default small; vocab 50257, the corpus' r50k_base)
#   --mpi-only       only the runs over MPI (the simulator's error), not the one-process peers
#
# The data: every file of data/sample (Common Crawl WET, Wikipedia XML, mixed JSONL) through
# dataprep (r50k_base): web pages and articles, most short, a few past the context (the
# long tail, truncated to it). Per strategy: planner build with the profile, then
#   - `trainer train --db` under mpirun -n P (train.threads = 1): measured vs predicted step
#     time (step_measured) and stage memory (measured_stages vs stages.peak_mem_bytes);
#   - the same plan in one process with train.threads = 1 and with P threads (the scaling
#     peers: the same work on one core, and on the same P cores).
# Every run starts from the same initialization, so the steps are the same work.
# Report (markdown) to stdout and OUT/report.md; raw numbers in OUT/results.txt (per step,
# per stage's memory, and the ops' predicted and measured durations per stage and kind).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD=$ROOT/_build/default
OUT=$HERE/out/dist
PP=2
TP=1
STEPS=6
CONTEXT=2048
BATCH=8
STRATEGIES="megatron slimpack auto"
PROFILE=
PRESET=small
MPI_ONLY=0
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --pp) PP=$2; shift 2 ;;
    --tp) TP=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --context) CONTEXT=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --strategies) STRATEGIES=$2; shift 2 ;;
    --profile) PROFILE=$2; shift 2 ;;
    --preset) PRESET=$2; shift 2 ;;
    --mpi-only) MPI_ONLY=1; shift ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "dist.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
DATAPREP=$BUILD/dataprep/dataprep PLANNER=$BUILD/plans/planner TRAINER=$BUILD/train/trainer
RANKS=$((PP * TP))
[ "$TP" -gt 1 ] && MPI_ONLY=1
for p in "$DATAPREP" "$PLANNER" "$TRAINER"; do
  [ -x "$p" ] || { echo "dist.sh: $p is not built (make -C $BUILD)" >&2; exit 2; }
done
command -v mpirun >/dev/null || { echo "dist.sh: mpirun not found (openmpi-bin)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export LONGTAIL_HARDWARE_DIR=$ROOT/etc/hardware
mkdir -p "$OUT"
log() { echo "dist.sh: $*" >&2; }

if [ ! -f "$OUT/data/.done" ]; then
  log "dataprep of data/sample"
  rm -rf "$OUT/data"
  "$DATAPREP" run --input "$ROOT"/data/sample/*.gz "$ROOT"/data/sample/*.bz2 --encoding r50k_base \
    --vocab-dir "$ROOT/data/vocab" --out "$OUT/data" -q
  touch "$OUT/data/.done"
fi
cat >"$OUT/m.ini" <<INI
[data]
encoding = r50k_base
[model]
preset = $PRESET
[plan]
global_batch = $BATCH
context_len = $CONTEXT
steps = $STEPS
mem = 16G
[parallel]
dp = 1
pp = $PP
tp = $TP
[train]
threads = 1
steps = $STEPS
checkpoint_every = 0
INI
if [ -z "$PROFILE" ]; then
  PROFILE=$OUT/cpu-calibrated.ini
  log "trainer calibrate (mpirun -n 2, 1 thread each) -> $PROFILE"
  mpirun -n 2 "$TRAINER" calibrate --config "$OUT/m.ini" --out "$PROFILE" >"$OUT/calibrate.out" 2>&1
  tail -1 "$OUT/calibrate.out" >&2
fi
host="$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
: >"$OUT/results.txt"
{
  echo "## Distributed engine: $PRESET, pp $PP x tp $TP over MPI, context $CONTEXT, batch $BATCH, $STEPS steps"
  echo
  echo "Machine: $host. Profile: $PROFILE. Commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')."
  echo
  echo "| strategy | predicted ms/step | measured ms/step ($RANKS ranks) | time error (mean abs, max) | memory error per stage (mean abs, max) | tok/s $RANKS ranks | tok/s 1 process, 1 thread | tok/s 1 process, $PP threads |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$OUT/report.md"
for s in $STRATEGIES; do
  db=$OUT/$s.db
  rm -f "$db"
  log "$s: plan"
  "$PLANNER" build --config "$OUT/m.ini" --set plan.hardware="$PROFILE" --data "$OUT/data" --db "$db" --strategy "$s" \
    >"$OUT/$s.plan" 2>&1
  cp "$db" "$OUT/$s-one.db"
  cp "$db" "$OUT/$s-onep.db"
  log "$s: mpirun -n $RANKS"
  rm -rf "$OUT/run-$s"
  mpirun -n "$RANKS" "$TRAINER" train --config "$OUT/m.ini" --db "$db" --data "$OUT/data" --out "$OUT/run-$s" \
    >"$OUT/$s.mpi.out" 2>"$OUT/$s.mpi.err"
  rm -rf "$OUT/one-$s" "$OUT/onep-$s"
  : >"$OUT/$s.one.out"
  : >"$OUT/$s.onep.out"
  if [ "$MPI_ONLY" = 0 ]; then
    log "$s: one process, 1 thread, then $PP threads"
    "$TRAINER" train --config "$OUT/m.ini" --db "$OUT/$s-one.db" --data "$OUT/data" --out "$OUT/one-$s" \
      >"$OUT/$s.one.out" 2>&1
    "$TRAINER" train --config "$OUT/m.ini" --set train.threads="$PP" --db "$OUT/$s-onep.db" --data "$OUT/data" \
      --out "$OUT/onep-$s" >"$OUT/$s.onep.out" 2>&1
  fi
  tps() { # tokens per second of a run's step lines: all tokens / all measured time ("-": no run)
    awk '/^step=/ { for (i = 1; i <= NF; i++) { split($i, a, "="); if (a[1] == "tokens") t += a[2];
         if (a[1] == "measured_ms") ms += a[2] } }
         END { if (ms > 0) printf "%.0f", t / (ms / 1000); else printf "-" }' "$1"; }
  pred=$(sqlite3 "$db" "SELECT avg(predicted_ms) FROM step_measured")
  meas=$(sqlite3 "$db" "SELECT avg(measured_ms) FROM step_measured")
  terr=$(sqlite3 "$db" "SELECT avg(abs(predicted_ms - measured_ms) / measured_ms), max(abs(predicted_ms - measured_ms) / measured_ms) FROM step_measured")
  merr=$(sqlite3 "$db" "SELECT avg(abs(g.peak_mem_bytes - m.peak_bytes) / m.peak_bytes), max(abs(g.peak_mem_bytes - m.peak_bytes) / m.peak_bytes)
    FROM measured_stages AS m JOIN stages AS g ON g.run_id = m.run_id AND g.step = m.step AND g.stage = m.stage AND g.dp_rank = 0")
  sqlite3 "$db" "SELECT '$s step ' || step || ' predicted_ms=' || round(predicted_ms, 1) || ' measured_ms=' || round(measured_ms, 1) FROM step_measured" >>"$OUT/results.txt"
  sqlite3 "$db" "SELECT '$s step ' || m.step || ' stage ' || m.stage || ' predicted_mib=' || round(g.peak_mem_bytes / 1048576.0, 1) || ' measured_mib=' || round(m.peak_bytes / 1048576.0, 1)
    FROM measured_stages AS m JOIN stages AS g ON g.run_id = m.run_id AND g.step = m.step AND g.stage = m.stage AND g.dp_rank = 0" >>"$OUT/results.txt"
  # per stage and kind of op: the simulated and the measured durations, summed over the steps
  sqlite3 "$db" "SELECT '$s stage ' || p.stage || ' ' || p.kind || ' ops=' || count(*) ||
      ' predicted_ms=' || round(sum(p.finish_ms - p.start_ms), 1) || ' measured_ms=' || round(sum(m.finish_ms - m.start_ms), 1) ||
      ' ratio=' || round(sum(m.finish_ms - m.start_ms) / sum(p.finish_ms - p.start_ms), 3)
    FROM plan_ops AS p JOIN measured_ops AS m ON m.run_id = p.run_id AND m.step = p.step AND m.dp_rank = p.dp_rank
      AND m.stage = p.stage AND m.seq = p.seq
    GROUP BY p.stage, p.kind ORDER BY p.stage, p.kind" >>"$OUT/results.txt"
  t_mpi=$(tps "$OUT/$s.mpi.out") t_one=$(tps "$OUT/$s.one.out") t_onep=$(tps "$OUT/$s.onep.out")
  echo "$s predicted_ms=$pred measured_ms=$meas time_err=$terr mem_err=$merr tok_s_mpi=$t_mpi tok_s_one=$t_one tok_s_one_p=$t_onep" >>"$OUT/results.txt"
  printf '| %s | %.0f | %.0f | %s | %s | %s | %s | %s |\n' "$s" "$pred" "$meas" \
    "$(echo "$terr" | awk -F'|' '{ printf "%.1f %%, %.1f %%", 100 * $1, 100 * $2 }')" \
    "$(echo "$merr" | awk -F'|' '{ printf "%.1f %%, %.1f %%", 100 * $1, 100 * $2 }')" "$t_mpi" "$t_one" "$t_onep" >>"$OUT/report.md"
done
base_p=$(awk '/^megatron predicted_ms=/ { split($2, a, "="); print a[2] }' "$OUT/results.txt")
base_m=$(awk '/^megatron predicted_ms=/ { split($3, a, "="); print a[2] }' "$OUT/results.txt")
if [ -n "$base_p" ]; then
  { echo; echo "| strategy | predicted speedup over megatron | measured speedup over megatron |"; echo "|---|---|---|"; } >>"$OUT/report.md"
  awk -v bp="$base_p" -v bm="$base_m" '/ predicted_ms=.* tok_s_mpi=/ { split($2, a, "="); split($3, b, "=");
    printf "| %s | %.2fx | %.2fx |\n", $1, bp / a[2], bm / b[2] }' "$OUT/results.txt" >>"$OUT/report.md"
fi
cat "$OUT/report.md"
