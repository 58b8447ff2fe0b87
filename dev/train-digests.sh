#!/usr/bin/env bash
# dev/train-digests.sh — bit-for-bit fingerprints of short `trainer train` and `trainer check`
# runs, to prove that a change to the trainer (a refactor of the plan executor, say) changed no
# behaviour: run it with the build from before the change and with the build from after it,
# then diff the two outputs. An empty diff means the same plans, the same checkpoints byte for
# byte, the same per-step losses and gradient norms, the same measured peak bytes (of the runs
# in one process) and op counts, the same oracle lines.
#
#   dev/train-digests.sh SRC_DIR BUILD_DIR > OUT.txt
#     SRC_DIR    a source checkout (data/sample, data/vocab and etc/hardware are read from it)
#     BUILD_DIR  its build directory (dataprep/dataprep, plans/planner, train/trainer, and
#                buildconfig.h, which must say HAVE_MPI: half the runs are under mpirun)
#   e.g.  dev/train-digests.sh /work/base /work/base/_b > /tmp/before.txt
#         dev/train-digests.sh . _build > /tmp/after.txt && diff /tmp/before.txt /tmp/after.txt
#
# The data and plans are made as tests/train/dist.sh and tests/train/oracle.sh make them: the
# sample corpus (data/sample/mixed-0.jsonl.gz) through dataprep with r50k_base, the 4-layer
# nano model (vocab 50257), 2 stored steps of 6 samples <= 128 tokens, threads = 1 (the
# result depends on the thread count, so it is fixed here), the same OMPI_* settings as
# dist.sh. Everything lives in a temporary directory removed on exit. Progress goes to
# stderr, the digests to stdout; any failing command stops the script with exit status 1,
# naming the run and showing the end of its output.
#
# The runs (their names begin each output line):
#   one-STRATEGY        one process, plans of dp 2 x pp 2, for every strategy (megatron,
#                       gpipe, seq1f1b, chunkflow, infinipipe, slimpack)
#   one-chunkflow-fk    chunkflow dp 2 x pp 2 with 32-token chunks and K = 1 (FK ops, as
#                       dist.sh's cf-fk)
#   one-infinipipe-s2   infinipipe dp 2 x pp 2 with plan.infinipipe_slices = 2 (not in the
#                       tests: at context 128 plain chunkflow and infinipipe store megatron's
#                       very ops and slices, and end with megatron's checkpoint bytes; these
#                       two variants make them run schedules of their own)
#   one-recompute       the slimpack dp 2 x pp 2 plan with every F and B op recomputing the
#                       first layer of its range (forced as dist.sh/oracle.sh force it)
#   one-dpmerge         slimpack dp 4 x pp 2, parallel.max_cp = 2, with a DP-Merge group
#   one-cp2             megatron dp 4 x pp 2 on cpu-c2, static context parallelism 2
#   one-zero1           slimpack dp 2 x pp 2 with parallel.zero1 = true (in one process ZeRO-1
#                       shards nothing: its digests equal one-slimpack's; kept as a guard)
#   mpi-1x2-STRATEGY    mpirun -n 2: dp 1 x pp 2 (gpipe, seq1f1b)
#   mpi-2x1-STRATEGY    mpirun -n 2: dp 2 x pp 1 (megatron, slimpack)
#   mpi-2x2-STRATEGY    mpirun -n 4: dp 2 x pp 2 (megatron, gpipe, seq1f1b, slimpack,
#                       chunkflow-fk, infinipipe-s2: every schedule of its own; plain
#                       chunkflow and infinipipe would repeat megatron's)
#   mpi-2x2-recompute   mpirun -n 4: the forced-recompute plan
#   mpi-4x2-dpmerge     mpirun -n 8: the DP-Merge group over processes (dist.sh's layout)
#   mpi-4x2-cp2         mpirun -n 8: static CP 2 over processes (dist.sh's layout)
#   mpi-2x2-zero1       mpirun -n 4: ZeRO-1, the AdamW moments sharded over the DP ranks
#   check-one-*         `trainer check` in one process (the recompute and DP-Merge plans)
#   check-mpi-2x2-*     `trainer check` over 4 ranks (the slimpack and chunkflow-fk plans)
#
# What is printed (every line is "NAME  KIND  VALUE..."; nothing with a path, date or time):
#   NAME  plan  SHA256                 the plan's tables (steps without solve_ms, step_samples,
#                                      pipelines, stages, units_slices, dp_merges): a changed
#                                      digest there means the planner, not the trainer, moved
#   NAME  SHA256  relative/path        every file of the run's final checkpoint, sorted
#                                      (ckpt-00000002.bin, or ckpt-00000002.d/{manifest.txt,
#                                      stage-N.bin} from a run over ranks)
#   NAME  metrics  {...}               each line of OUT/metrics.jsonl without "seconds"
#   NAME  peak  step=S peak_bytes=B stage_peak_bytes=B0,B1,.. ops=N
#                                      what `train --db` stored in measured_steps and
#                                      measured_stages (the meter's bytes plus model states;
#                                      one-process runs only, see below), and the number of
#                                      measured_ops rows
#   NAME  check  LINE                  check's per-step "strategy=" and "stage_peak_mb=" lines
#                                      (one process) or "strategy=" and "ranks=" lines (over
#                                      ranks), then its last line (max_rel_err=...)
#   end  complete  N training runs, 4 checks
#                                      the last line (without it, the script stopped early)
#
# Normalised / left out because they differ from run to run of the same build:
#   - wall-clock measurements: metrics.jsonl's "seconds"; measured_steps.measured_ms and
#     measured_ops' start_ms/finish_ms (only the row count is printed); the steps table's
#     solve_ms; train's stdout (tok/s, measured_ms) and loss.svg (drawn from the losses
#     already printed);
#   - the measured peak bytes of runs over ranks (mpi-* runs: their "peak" lines carry only
#     ops=N; check over ranks: no act_peak_mb, no stage_peak_mb lines). A stage's send buffer
#     is released when its MPI send is found complete (train/exec/transfers.c exec_poll_sends, lt_comm_test),
#     so whether it is still counted when the next op allocates depends on timing: two runs
#     of the same baseline differed there (e.g. mpi-2x2-chunkflow-fk, stage 0: 54317568 vs
#     54153728 bytes) while their checkpoints were identical. One process has no sends: its
#     peaks are deterministic and printed;
#   - the runs table, left out of the plan digest: it records the temporary data path.
# Checkpoints carry no timestamps and are hashed as they are.
#
# One change from the tests' settings (infinipipe-s2 aside, an addition), to keep the whole
# under ~6 minutes on 2 cores: the DP-Merge plan uses context_len 512, global_batch 4 and 2
# steps (dist.sh: 4K, 8 and 1 step of 5509 tokens, ~3.5x the tokens of these 2 steps; at 512
# every step still has a DP-Merge group: checked, as dist.sh checks that its plan has one).
# The static-CP plan is dist.sh's mg-cp2 exactly (4K context, 1 step of 5509 tokens, the most
# expensive run here): smaller variants either do not take cp 2 (contexts below 4K) or leave
# one CP group of the dp 4 x pp 2 layout without a sample, which the baseline cannot run over
# ranks (a DP rank with no sample in a step fails the gradient all-reduce: MPI_ERR_TRUNCATE).
#
# Cost: 155-165 s of CPU (user + sys) in all; 5-7.5 minutes of wall time were measured on a
# 2-core machine that other builds and tests were loading at the same time (load average
# 10-50), less when it is idle. Each run's seconds are printed to stderr.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 SRC_DIR BUILD_DIR > OUT.txt" >&2
  exit 2
fi
SRC=$(cd "$1" 2>/dev/null && pwd) || { echo "train-digests: no such source directory: $1" >&2; exit 2; }
BUILD=$(cd "$2" 2>/dev/null && pwd) || { echo "train-digests: no such build directory: $2" >&2; exit 2; }
DATAPREP=$BUILD/dataprep/dataprep
PLANNER=$BUILD/plans/planner
TRAINER=$BUILD/train/trainer
PY=${PYTHON:-python3}
for f in "$DATAPREP" "$PLANNER" "$TRAINER"; do
  [ -x "$f" ] || { echo "train-digests: error: $f is missing or not executable (build BUILD_DIR first)" >&2; exit 1; }
done
for f in "$SRC/data/sample/mixed-0.jsonl.gz" "$SRC/data/vocab" "$SRC/etc/hardware"; do
  [ -e "$f" ] || { echo "train-digests: error: $f is missing (is $SRC a longtail source tree?)" >&2; exit 1; }
done
if ! grep -q '^#define HAVE_MPI 1' "$BUILD/buildconfig.h" 2>/dev/null || ! command -v mpirun >/dev/null; then
  echo "train-digests: error: $BUILD was built without MPI or mpirun is not on PATH (the runs over ranks need both)" >&2
  exit 1
fi
for c in sqlite3 sha256sum "$PY"; do
  command -v "$c" >/dev/null || { echo "train-digests: error: $c is not on PATH" >&2; exit 1; }
done

export LONGTAIL_HARDWARE_DIR=$SRC/etc/hardware
# as tests/train/dist.sh: root in CI containers; more ranks than cores; Open MPI's own
# allocations are not ours
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export LC_ALL=C

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lt-train-digests.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
t_start=$SECONDS

log() { echo "train-digests [$((SECONDS - t_start))s]: $*" >&2; }
# die WHAT [FILE...]: the reason and the end of each file on stderr, exit 1
die() {
  local what=$1; shift
  echo "train-digests: FAILED: $what" >&2
  local f
  for f in "$@"; do
    [ -s "$f" ] && { echo "--- ${f#"$tmp"/} (last 25 lines)" >&2; tail -25 "$f" | sed 's/^/    /' >&2; }
  done
  exit 1
}

# ---- data and the model config (tests/train/dist.sh)
log "dataprep of the sample corpus (r50k_base)"
"$DATAPREP" run --input "$SRC/data/sample/mixed-0.jsonl.gz" --encoding r50k_base \
  --vocab-dir "$SRC/data/vocab" --out "$tmp/data" -q >"$tmp/dp.out" 2>&1 || die "dataprep of the sample corpus" "$tmp/dp.out"
# data.encoding names the corpus' encoding and model.vocab its size: a build that derives the
# vocabulary from the encoding and one that does not read the same model from this
cat >"$tmp/m.ini" <<INI
[data]
encoding = r50k_base
[model]
preset = nano
layers = 4
vocab = 50257
[plan]
global_batch = 6
context_len = 128
mem = 80G
steps = 2
seq1f1b_slices = 3
[train]
threads = 1
comm_timeout_s = 60
INI

# ---- plans
# plan NAME STRATEGY DP PP [--set ...]: planner build into $tmp/NAME.db (as dist.sh's plan),
# and its digest
plan() {
  local name=$1 strategy=$2 dp=$3 pp=$4; shift 4
  "$PLANNER" build --config "$tmp/m.ini" --data "$tmp/data" --db "$tmp/$name.db" --strategy "$strategy" \
    --set parallel.dp="$dp" --set parallel.pp="$pp" "$@" >"$tmp/$name.plan" 2>&1 ||
    die "planner build $name ($strategy, dp $dp x pp $pp${*:+ $*})" "$tmp/$name.plan"
  echo "$name  plan  $(plan_digest "$tmp/$name.db")"
}
# plan_digest DB: sha256 of the plan's tables (not runs: it holds the data path; not
# steps.solve_ms: the planner's wall time)
plan_digest() {
  sqlite3 -bail "$1" \
    "SELECT run_id, step, strategy, n_samples, n_tokens, predicted_ms, bubble_ratio, peak_mem_bytes, params,
            solver_status, runner_up, runner_up_ms, n_predicted FROM steps ORDER BY 1, 2;" \
    "SELECT * FROM step_samples ORDER BY 1, 2, 3;" \
    "SELECT * FROM pipelines ORDER BY 1, 2, 3;" \
    "SELECT * FROM stages ORDER BY 1, 2, 3, 4;" \
    "SELECT * FROM units_slices ORDER BY 1, 2, 3, 4, 5, 6;" \
    "SELECT * FROM dp_merges ORDER BY 1, 2, 3;" | sha256sum | cut -d' ' -f1
}

STRATEGIES="megatron gpipe seq1f1b chunkflow infinipipe slimpack"
log "planner build: every strategy at dp 2 x pp 2, some at dp 1 x pp 2 and dp 2 x pp 1, chunkflow FK, infinipipe in slices, DP-Merge, static CP 2"
for s in $STRATEGIES; do plan "$s-dp2-pp2" "$s" 2 2; done
for s in gpipe seq1f1b; do plan "$s-dp1-pp2" "$s" 1 2; done
for s in megatron slimpack; do plan "$s-dp2-pp1" "$s" 2 1; done

# forced recompute (dist.sh, oracle.sh): the first layer of every F and B op's range
cp "$tmp/slimpack-dp2-pp2.db" "$tmp/recompute.db"
"$PY" - "$tmp/recompute.db" <<'PY' >"$tmp/rc.out" 2>&1 || die "forcing recompute into the slimpack plan" "$tmp/rc.out"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for rowid, ops in db.execute("SELECT rowid, ops FROM stages").fetchall():
    ops = json.loads(ops)
    for op in ops:
        if op[0] in (0, 2):  # F, B (not FK)
            op[2] = 1
    db.execute("UPDATE stages SET ops = ? WHERE rowid = ?", (json.dumps(ops, separators=(",", ":")), rowid))
db.commit()
PY
echo "recompute  plan  $(plan_digest "$tmp/recompute.db")"

# chunkflow with 32-token chunks and K = 1: forward-K/V-only (FK) passes (dist.sh's cf-fk)
plan chunkflow-fk chunkflow 2 2 --set plan.chunk_size=32 --set plan.chunkflow_k=1
[ "$(sqlite3 "$tmp/chunkflow-fk.db" "SELECT count(*) FROM plan_ops WHERE kind = 'FK'")" -gt 0 ] ||
  die "the chunkflow plan with 32-token chunks and K = 1 has no FK ops"

# infinipipe with its longest sample in 2 slices (plan.infinipipe_slices, docs/config.md)
plan infinipipe-s2 infinipipe 2 2 --set plan.infinipipe_slices=2

# a DP-Merge group (dist.sh's sp-merge at a smaller context and batch, see the header)
plan dpmerge slimpack 4 2 --set parallel.max_cp=2 --set plan.global_batch=4 --set plan.context_len=512
[ "$(sqlite3 "$tmp/dpmerge.db" "SELECT (SELECT count(DISTINCT step) FROM dp_merges) = (SELECT count(*) FROM steps)")" = 1 ] ||
  die "the slimpack plan at dp 4 x pp 2, max_cp 2 lacks a DP-Merge group in some step (dp_merges: $(sqlite3 "$tmp/dpmerge.db" "SELECT count(*) FROM dp_merges") rows)"
# static context parallelism (dist.sh's mg-cp2: megatron's tuned baseline at a 4K context on
# the CPU profile cpu-c2 takes cp 2)
plan cp2 megatron 4 2 --set plan.hardware=cpu-c2 --set parallel.max_cp=4 --set plan.global_batch=8 \
  --set plan.context_len=4K --set plan.steps=1 --set plan.mem=2G
[ "$(sqlite3 "$tmp/cp2.db" "SELECT min(cp) || ',' || max(cp) FROM pipelines")" = "2,2" ] ||
  die "the megatron plan on cpu-c2 at 4K context does not take cp 2 (pipelines: $(sqlite3 "$tmp/cp2.db" "SELECT group_concat(cp) FROM pipelines"))"
# ZeRO-1 (the trainer runs a plan made for its parallel.shard only)
plan zero1 slimpack 2 2 --set parallel.zero1=true

# ---- trainer train --db
n_runs=0
# train NAME RANKS PLAN DP PP [--set ...]: one process (RANKS = 1) or mpirun -n RANKS, on a
# copy of the plan (train --db writes its measured tables into the file), then the digests
train() {
  local name=$1 ranks=$2 plan=$3 dp=$4 pp=$5; shift 5
  local t0=$SECONDS launcher=()
  n_runs=$((n_runs + 1))
  [ "$ranks" -gt 1 ] && launcher=(mpirun -n "$ranks")
  cp "$tmp/$plan.db" "$tmp/run-$name.db"
  if ! "${launcher[@]}" "$TRAINER" train --config "$tmp/m.ini" --set parallel.dp="$dp" --set parallel.pp="$pp" "$@" \
       --db "$tmp/run-$name.db" --data "$tmp/data" --out "$tmp/run-$name" >"$tmp/run-$name.out" 2>"$tmp/run-$name.err"; then
    die "run $name: trainer train${launcher[*]:+ under ${launcher[*]}} on the $plan plan (dp $dp x pp $pp${*:+ $*})" \
      "$tmp/run-$name.out" "$tmp/run-$name.err"
  fi
  local ckpt
  ckpt=$(cd "$tmp/run-$name" && ls -d ckpt-* 2>/dev/null | sort | tail -1)
  [ -n "$ckpt" ] || die "run $name: no checkpoint in its output directory" "$tmp/run-$name.err"
  [[ "$ckpt" != *.d ]] || [ -f "$tmp/run-$name/$ckpt/manifest.txt" ] ||
    die "run $name: checkpoint $ckpt has no manifest" "$tmp/run-$name.err"
  # a manifest's comment line names the source file that writes it, which a refactor may
  # move: its digest is of the key = value lines (every other file as it is)
  (cd "$tmp/run-$name" && find "$ckpt" -type f | sort | while IFS= read -r f; do
     if [ "${f##*/}" = manifest.txt ]; then
       echo "$name  $(grep -v '^#' "$f" | sha256sum | cut -d' ' -f1)  $f (without its comment line)"
     else
       echo "$name  $(sha256sum <"$f" | cut -d' ' -f1)  $f"
     fi
   done)
  [ -s "$tmp/run-$name/metrics.jsonl" ] || die "run $name: no metrics.jsonl" "$tmp/run-$name.err"
  sed -E 's/"seconds":[^,}]*,?//; s/,}$/}/; s/^/'"$name"'  metrics  /' "$tmp/run-$name/metrics.jsonl"
  # one process: the peaks; over ranks only the op count (their peaks depend on timing: see
  # the header)
  local peaks bytes="' peak_bytes=' || printf('%.0f', m.peak_bytes) || ' stage_peak_bytes=' ||
           (SELECT group_concat(b, ',') FROM (SELECT printf('%.0f', g.peak_bytes) AS b FROM measured_stages AS g
             WHERE g.run_id = m.run_id AND g.step = m.step ORDER BY g.stage)) ||"
  [ "$ranks" -gt 1 ] && bytes="' (peak bytes not compared over ranks)' ||"
  peaks=$(sqlite3 -bail "$tmp/run-$name.db" "
    SELECT 'step=' || m.step || $bytes
           ' ops=' || (SELECT count(*) FROM measured_ops AS o WHERE o.run_id = m.run_id AND o.step = m.step)
    FROM measured_steps AS m ORDER BY m.run_id, m.step") || die "run $name: reading its measured tables"
  [ -n "$peaks" ] || die "run $name: train --db stored no measured_steps rows" "$tmp/run-$name.err"
  sed "s/^/$name  peak  /" <<<"$peaks"
  log "run $n_runs: $name (${ranks} process$([ "$ranks" -gt 1 ] && echo es), $ckpt) $((SECONDS - t0))s"
}

# check NAME RANKS PLAN DP PP: trainer check of every stored step, its step lines and last line
check() {
  local name=$1 ranks=$2 plan=$3 dp=$4 pp=$5
  local t0=$SECONDS launcher=()
  [ "$ranks" -gt 1 ] && launcher=(mpirun -n "$ranks")
  if ! "${launcher[@]}" "$TRAINER" check --config "$tmp/m.ini" --set parallel.dp="$dp" --set parallel.pp="$pp" \
       --db "$tmp/$plan.db" --data "$tmp/data" >"$tmp/$name.out" 2>"$tmp/$name.err"; then
    die "$name: trainer check${launcher[*]:+ under ${launcher[*]}} on the $plan plan" "$tmp/$name.out" "$tmp/$name.err"
  fi
  local last
  last=$(tail -1 "$tmp/$name.out")
  [[ "$last" =~ ^max_rel_err=[0-9.e+-]+\ .*steps=[0-9]+$ ]] || die "$name: unexpected last line '$last'" "$tmp/$name.out"
  # over ranks, act_peak_mb and stage_peak_mb are left out (timing-dependent: see the header)
  if [ "$ranks" -gt 1 ]; then
    grep -E '^step=[0-9]+ (strategy=|ranks=)' "$tmp/$name.out" | sed -E 's/ act_peak_mb=[0-9.]+//' || true
  else
    grep -E '^step=[0-9]+ (strategy=|stage_peak_mb=)' "$tmp/$name.out" || true
  fi | sed "s/^/$name  check  /"
  echo "$name  check  $last"
  log "$name: $last ($((SECONDS - t0))s)"
}

log "one process: every strategy, chunkflow FK, infinipipe in slices, recompute, DP-Merge, static CP 2, ZeRO-1"
for s in $STRATEGIES; do train "one-$s" 1 "$s-dp2-pp2" 2 2; done
train one-chunkflow-fk 1 chunkflow-fk 2 2
train one-infinipipe-s2 1 infinipipe-s2 2 2
train one-recompute 1 recompute 2 2
train one-dpmerge 1 dpmerge 4 2
train one-cp2 1 cp2 4 2
train one-zero1 1 zero1 2 2 --set parallel.zero1=true

log "over ranks (mpirun): dp x pp = 1x2, 2x1, 2x2, the DP-Merge group (4x2), static CP 2 (4x2), ZeRO-1 (2x2)"
for s in gpipe seq1f1b; do train "mpi-1x2-$s" 2 "$s-dp1-pp2" 1 2; done
for s in megatron slimpack; do train "mpi-2x1-$s" 2 "$s-dp2-pp1" 2 1; done
for s in megatron gpipe seq1f1b slimpack; do train "mpi-2x2-$s" 4 "$s-dp2-pp2" 2 2; done
train mpi-2x2-chunkflow-fk 4 chunkflow-fk 2 2
train mpi-2x2-infinipipe-s2 4 infinipipe-s2 2 2
train mpi-2x2-recompute 4 recompute 2 2
train mpi-4x2-dpmerge 8 dpmerge 4 2
train mpi-4x2-cp2 8 cp2 4 2
train mpi-2x2-zero1 4 zero1 2 2 --set parallel.zero1=true
grep -q 'parallel.shard = zero1: each DP rank holds the AdamW moments of 1/2' "$tmp/run-mpi-2x2-zero1.err" ||
  die "mpi-2x2-zero1: the trainer did not say it sharded the moments (ZeRO-1 not in effect?)" "$tmp/run-mpi-2x2-zero1.err"

log "trainer check: one process and over 4 ranks"
check check-one-recompute 1 recompute 2 2
check check-one-dpmerge 1 dpmerge 4 2
check check-mpi-2x2-slimpack 4 slimpack-dp2-pp2 2 2
check check-mpi-2x2-chunkflow-fk 4 chunkflow-fk 2 2

# the last line: an OUT.txt without it is from a run that stopped early
echo "end  complete  $n_runs training runs, 4 checks"
log "done: $n_runs training runs, 4 checks in $((SECONDS - t_start))s"
