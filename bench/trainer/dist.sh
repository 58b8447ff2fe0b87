#!/usr/bin/env bash
# bench/trainer/dist.sh — the distributed engine measured (issue 18): the simulator against
# measurement, pipeline scaling over MPI, and the first measured (not simulated) speedup of
# a strategy over megatron.
#
#   bench/trainer/dist.sh [--build-dir DIR] [--out DIR] [--pp P] [--tp T] [--steps N] [--context C]
#                         [--batch B] [--strategies "megatron slimpack auto"] [--profile FILE]
#                         [--preset NAME] [--mpi-only] [--repeat R] [--probe]
#
#   --build-dir DIR  a built tree (default _build/default)
#   --out DIR        work directory (default bench/trainer/out/dist)
#   --pp P           pipeline stages = MPI ranks (default 2; one thread each)
#   --tp T           tensor-parallel degree (default 1): P x T ranks, and no one-process peers
#                    (one process runs tp 1 only), as with --mpi-only
#   --steps N        stored steps per strategy (default 6)
#   --context C      plan.context_len (default 2048), --batch B plan.global_batch (default 8)
#   --profile FILE   a hardware profile; default: `trainer calibrate` under mpirun -n 2 with
#                    one thread per rank, the run's ranks on one node (--ranks-per-node: the
#                    stages share the machine, so the profile's compute_contention applies
#                    between them; OUT/cpu-calibrated.ini)
#   --preset NAME    model preset (default small; vocab 50257, the corpus' r50k_base)
#   --mpi-only       only the runs over MPI (the simulator's error), not the one-process peers
#   --repeat R       run each strategy's MPI job R times (default 1), interleaved (megatron,
#                    slimpack, ..., megatron, ...), each on a fresh copy of its plans, so that
#                    a noisy machine moves every strategy alike; the table gives the mean over
#                    all runs' steps and each run's mean error (per-run lines in results.txt)
#   --probe          before and after each MPI run, `trainer calibrate --check PROFILE` on
#                    one layer at 1024 and 2048 tokens: how fast the machine is then against
#                    its calibration (probe_ratio = measured / predicted F + B; 1.0 = as
#                    calibrated), a peer in the same run for the run's error
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
REPEAT=1
PROBE=0
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
    --repeat) REPEAT=$2; shift 2 ;;
    --probe) PROBE=1; shift ;;
    -h|--help) sed -n '2,39p' "$0"; exit 0 ;;
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
  mpirun -n 2 "$TRAINER" calibrate --config "$OUT/m.ini" --ranks-per-node "$RANKS" --out "$PROFILE" \
    >"$OUT/calibrate.out" 2>&1
  tail -1 "$OUT/calibrate.out" >&2
fi
host="$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
: >"$OUT/results.txt"
{
  echo "## Distributed engine: $PRESET, pp $PP x tp $TP over MPI, context $CONTEXT, batch $BATCH, $STEPS steps"
  echo
  echo "Machine: $host. Profile: $PROFILE. Commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')."
  echo
  echo "| strategy | predicted ms/step | measured ms/step ($RANKS ranks, $REPEAT runs) | time error (mean abs, max; each run's mean) | memory error per stage (mean abs, max) | tok/s $RANKS ranks | tok/s 1 process, 1 thread | tok/s 1 process, $PP threads |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$OUT/report.md"
tps() { # tokens per second of runs' step lines: all tokens / all measured time ("-": no run)
  cat "$@" | awk '/^step=/ { for (i = 1; i <= NF; i++) { split($i, a, "="); if (a[1] == "tokens") t += a[2];
       if (a[1] == "measured_ms") ms += a[2] } }
       END { if (ms > 0) printf "%.0f", t / (ms / 1000); else printf "-" }'
}
probe() { # LABEL: the machine's speed now against the profile (--probe), into results.txt
  [ "$PROBE" = 1 ] || return 0
  local r
  r=$("$TRAINER" calibrate --config "$OUT/m.ini" --check "$PROFILE" --tokens 1024,2048 --repeat 3 2>&1 |
    awk '/^tokens=/ { for (i = 1; i <= NF; i++) { split($i, a, "="); if (a[1] == "layer_ms") m += a[2];
         if (a[1] == "predicted_ms") p += a[2] } } END { if (p > 0) printf "%.3f", m / p; else printf "-" }')
  echo "$1 probe_ratio=$r" >>"$OUT/results.txt"
}
for s in $STRATEGIES; do
  log "$s: plan"
  rm -f "$OUT/$s.db"
  "$PLANNER" build --config "$OUT/m.ini" --set plan.hardware="$PROFILE" --data "$OUT/data" --db "$OUT/$s.db" \
    --strategy "$s" >"$OUT/$s.plan" 2>&1
  : >"$OUT/$s.steps"
  : >"$OUT/$s.mem"
  rm -f "$OUT/$s"-r*.mpi.out "$OUT/$s"-r*.mpi.err "$OUT/$s"-r*.db
done
# the MPI runs, interleaved over the strategies (--repeat), each on a fresh copy of its plans
for r in $(seq "$REPEAT"); do
  for s in $STRATEGIES; do
    db=$OUT/$s-r$r.db
    cp "$OUT/$s.db" "$db"
    log "$s: mpirun -n $RANKS (run $r of $REPEAT)"
    probe "$s run $r before"
    rm -rf "$OUT/run-$s-r$r"
    mpirun -n "$RANKS" "$TRAINER" train --config "$OUT/m.ini" --db "$db" --data "$OUT/data" --out "$OUT/run-$s-r$r" \
      >"$OUT/$s-r$r.mpi.out" 2>"$OUT/$s-r$r.mpi.err"
    probe "$s run $r after"
    sqlite3 -separator ' ' "$db" "SELECT predicted_ms, measured_ms FROM step_measured" >>"$OUT/$s.steps"
    sqlite3 -separator ' ' "$db" "SELECT g.peak_mem_bytes, m.peak_bytes FROM measured_stages AS m JOIN stages AS g
      ON g.run_id = m.run_id AND g.step = m.step AND g.stage = m.stage AND g.dp_rank = 0" >>"$OUT/$s.mem"
    sqlite3 "$db" "SELECT '$s run $r step ' || step || ' predicted_ms=' || round(predicted_ms, 1) || ' measured_ms=' || round(measured_ms, 1) FROM step_measured" >>"$OUT/results.txt"
    sqlite3 "$db" "SELECT '$s run $r step ' || m.step || ' stage ' || m.stage || ' predicted_mib=' || round(g.peak_mem_bytes / 1048576.0, 1) || ' measured_mib=' || round(m.peak_bytes / 1048576.0, 1)
      FROM measured_stages AS m JOIN stages AS g ON g.run_id = m.run_id AND g.step = m.step AND g.stage = m.stage AND g.dp_rank = 0" >>"$OUT/results.txt"
    # per stage and kind (and layer part) of op: the simulated and the measured durations, summed over the steps
    sqlite3 "$db" "SELECT '$s run $r stage ' || p.stage || ' ' || p.kind || ' ' || p.part || ' ops=' || count(*) ||
        ' predicted_ms=' || round(sum(p.finish_ms - p.start_ms), 1) || ' measured_ms=' || round(sum(m.finish_ms - m.start_ms), 1) ||
        ' ratio=' || ifnull(round(sum(m.finish_ms - m.start_ms) / nullif(sum(p.finish_ms - p.start_ms), 0), 3), '-')
      FROM plan_ops AS p JOIN measured_ops AS m ON m.run_id = p.run_id AND m.step = p.step AND m.dp_rank = p.dp_rank
        AND m.stage = p.stage AND m.seq = p.seq
      GROUP BY p.stage, p.kind, p.part ORDER BY p.stage, p.kind, p.part" >>"$OUT/results.txt"
    sqlite3 "$db" "SELECT '$s run $r time_err=' || round(avg(abs(predicted_ms - measured_ms) / measured_ms), 4) ||
      ' signed_err=' || round(avg((predicted_ms - measured_ms) / measured_ms), 4) FROM step_measured" >>"$OUT/results.txt"
  done
done
for s in $STRATEGIES; do
  rm -rf "$OUT/one-$s" "$OUT/onep-$s"
  : >"$OUT/$s.one.out"
  : >"$OUT/$s.onep.out"
  if [ "$MPI_ONLY" = 0 ]; then
    log "$s: one process, 1 thread, then $PP threads"
    cp "$OUT/$s.db" "$OUT/$s-one.db"
    cp "$OUT/$s.db" "$OUT/$s-onep.db"
    "$TRAINER" train --config "$OUT/m.ini" --db "$OUT/$s-one.db" --data "$OUT/data" --out "$OUT/one-$s" \
      >"$OUT/$s.one.out" 2>&1
    "$TRAINER" train --config "$OUT/m.ini" --set train.threads="$PP" --db "$OUT/$s-onep.db" --data "$OUT/data" \
      --out "$OUT/onep-$s" >"$OUT/$s.onep.out" 2>&1
  fi
  # over every run's steps: the mean predicted and measured step, the step time error (mean
  # of |predicted - measured| / measured, max) and the stage memory error (the same per stage)
  read -r pred meas terr <<<"$(awk '{ p += $1; m += $2; e = ($1 - $2) / $2; e = e < 0 ? -e : e; se += e;
      if (e > mx) mx = e; n++ } END { if (n) printf "%f %f %f|%f", p / n, m / n, se / n, mx; else print "0 0 0|0" }' "$OUT/$s.steps")"
  merr=$(awk '{ e = ($1 - $2) / $2; e = e < 0 ? -e : e; se += e; if (e > mx) mx = e; n++ }
      END { if (n) printf "%f|%f", se / n, mx; else print "0|0" }' "$OUT/$s.mem")
  runs=$(awk -v s="$s" '$1 == s && $2 == "run" && $4 ~ /^time_err=/ { split($4, a, "="); printf "%s%.1f", sep, 100 * a[2]; sep = "/" }' "$OUT/results.txt")
  t_mpi=$(tps "$OUT/$s"-r*.mpi.out) t_one=$(tps "$OUT/$s.one.out") t_onep=$(tps "$OUT/$s.onep.out")
  echo "$s predicted_ms=$pred measured_ms=$meas time_err=$terr mem_err=$merr tok_s_mpi=$t_mpi tok_s_one=$t_one tok_s_one_p=$t_onep runs_time_err_pct=$runs" >>"$OUT/results.txt"
  printf '| %s | %.0f | %.0f | %s (runs: %s %%) | %s | %s | %s | %s |\n' "$s" "$pred" "$meas" \
    "$(echo "$terr" | awk -F'|' '{ printf "%.1f %%, %.1f %%", 100 * $1, 100 * $2 }')" "$runs" \
    "$(echo "$merr" | awk -F'|' '{ printf "%.1f %%, %.1f %%", 100 * $1, 100 * $2 }')" "$t_mpi" "$t_one" "$t_onep" >>"$OUT/report.md"
done
if [ "$PROBE" = 1 ]; then
  { echo; echo "Machine speed against the profile, before and after each run (--probe; 1.0 = as calibrated):"; echo
    grep ' probe_ratio=' "$OUT/results.txt" | sed 's/^/    /'; } >>"$OUT/report.md"
fi
base_p=$(awk '/^megatron predicted_ms=/ { split($2, a, "="); print a[2] }' "$OUT/results.txt")
base_m=$(awk '/^megatron predicted_ms=/ { split($3, a, "="); print a[2] }' "$OUT/results.txt")
if [ -n "$base_p" ]; then
  { echo; echo "| strategy | predicted speedup over megatron | measured speedup over megatron |"; echo "|---|---|---|"; } >>"$OUT/report.md"
  awk -v bp="$base_p" -v bm="$base_m" '/ predicted_ms=.* tok_s_mpi=/ { split($2, a, "="); split($3, b, "=");
    printf "| %s | %.2fx | %.2fx |\n", $1, bp / a[2], bm / b[2] }' "$OUT/results.txt" >>"$OUT/report.md"
fi
cat "$OUT/report.md"
