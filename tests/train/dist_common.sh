#!/usr/bin/env bash
# tests/train/dist_common.sh — what tests/train/dist.sh and tests/train/dist_tp.sh share
# (sourced, not run): the MPI skip, the sample corpus through dataprep, the nano model's
# config, and the helpers plan, oracle, force_recompute, oracle_bf16 and params_diff; each
# script emits its own TAP.
# Two scripts, so each stays well inside the per-test timeout and make check -j runs them
# side by side.
: "${top_srcdir:?}" "${top_builddir:?}"
DATAPREP=$top_builddir/dataprep/dataprep
PLANNER=$top_builddir/plans/planner
TRAINER=$top_builddir/train/trainer
export LONGTAIL_HARDWARE_DIR=$top_srcdir/etc/hardware
PY=${PYTHON:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lt-dist.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() {
  n=$((n + 1)); echo "not ok $n - $1"
  shift
  for f in "$@"; do [ -f "$f" ] && sed 's/^/# /' "$f" | tail -15; done
}
if ! grep -q '^#define HAVE_MPI 1' "$top_builddir/buildconfig.h" 2>/dev/null || ! command -v mpirun >/dev/null; then
  echo "1..0 # SKIP the build has no MPI (configure found no mpicc; install openmpi-bin libopenmpi-dev)"
  exit 0
fi
# root in CI containers; more ranks than cores; Open MPI's own allocations are not ours
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPIRUN=(mpirun -n)

"$DATAPREP" run --input "$top_srcdir/data/sample/mixed-0.jsonl.gz" --encoding r50k_base \
  --vocab-dir "$top_srcdir/data/vocab" --out "$tmp/data" -q >"$tmp/dp.out" 2>&1 \
  || { notok "dataprep of the sample corpus" "$tmp/dp.out"; echo "1..$n"; exit 0; }
cat >"$tmp/m.ini" <<INI
[data]
encoding = r50k_base
[model]
preset = nano
layers = 4
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

# plan NAME STRATEGY DP PP [--set ...]
plan() {
  local name=$1 strategy=$2 dp=$3 pp=$4; shift 4
  "$PLANNER" build --config "$tmp/m.ini" --data "$tmp/data" --db "$tmp/$name.db" --strategy "$strategy" \
    --set parallel.dp="$dp" --set parallel.pp="$pp" "$@" >"$tmp/$name.plan" 2>&1
}

# ---- the cpu-bf16 test backend over ranks (LONGTAIL_TEST_BACKEND, trainer check): the CUDA
# backend's host logic without a GPU: 2-byte activations, stage-to-stage transfers sized in
# the backend's elements, K/V of the context kept in bf16; the ranks' gradients against one
# fp32 process and against every sample run whole, by relative norm within the bf16
# tolerance (3e-2; the fp32 run above gives ~1e-7, so a bf16 run that scored like it would
# mean the backend was not used: its error must also be above 1e-4). The stage transfers go
# over the stage channels matched in posting order (train/dist/comm.h), as NCCL matches them
oracle_bf16() { # NAME DP PP WHAT [TP]
  local name=$1 dp=$2 pp=$3 what=$4 tp=${5:-1}
  local ranks=$((dp * pp * tp))
  if ! LONGTAIL_TEST_BACKEND=cpu-bf16 "${MPIRUN[@]}" $ranks "$TRAINER" check --config "$tmp/m.ini" \
       --set parallel.dp="$dp" --set parallel.pp="$pp" --set parallel.tp="$tp" --db "$tmp/$name.db" --data "$tmp/data" \
       >"$tmp/$name-bf16.out" 2>"$tmp/$name-bf16.err"; then
    notok "cpu-bf16 over $ranks ranks: $what" "$tmp/$name-bf16.out" "$tmp/$name-bf16.err"
    return
  fi
  local last
  last=$(tail -1 "$tmp/$name-bf16.out")
  if [[ "$last" =~ ^max_rel_err=([0-9.e+-]+)\ rank_rel_err=([0-9.e+-]+)\ ranks=([0-9]+)\ steps=([0-9]+)\ backend=cpu-bf16$ ]] &&
     [ "${BASH_REMATCH[3]}" = $ranks ] && [ "${BASH_REMATCH[4]}" -ge 1 ] &&
     awk -v e="${BASH_REMATCH[1]}" -v r="${BASH_REMATCH[2]}" 'BEGIN { exit !(e <= 3e-2 && r <= 3e-2 && r > 1e-4) }'; then
    ok "cpu-bf16 over $ranks ranks: $what ($last)"
  else
    notok "cpu-bf16 over $ranks ranks: $what (last line '$last')" "$tmp/$name-bf16.out"
  fi
}

# every run's 10-step training options
T=(--config "$tmp/m.ini" --set plan.steps=10 --set train.steps=10 --data "$tmp/data")
# params A B: the largest |difference| of two checkpoints' parameters over their largest |parameter|
params_diff() {
  "$TRAINER" export "$1" --hf "$tmp/hfa" >/dev/null 2>&1 && "$TRAINER" export "$2" --hf "$tmp/hfb" >/dev/null 2>&1 &&
  "$PY" - "$tmp/hfa/model.safetensors" "$tmp/hfb/model.safetensors" <<'PY'
import json, struct, sys
def load(p):  # safetensors, F32: name -> bytes
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); out = {}
    for k, v in h.items():
        if k != "__metadata__":
            s, e = v["data_offsets"]; out[k] = b[8 + n + s:8 + n + e]
    return out
import array
a, b = load(sys.argv[1]), load(sys.argv[2])
diff = scale = 0.0
for k in a:
    x, y = array.array("f", a[k]), array.array("f", b[k])
    diff = max(diff, max(abs(p - q) for p, q in zip(x, y))); scale = max(scale, max(abs(p) for p in x))
print("%.3e" % (diff / scale))
PY
}

# oracle NAME DP PP WHAT [--set ...]: trainer check of every step of NAME.db on DP x PP x
# parallel.tp ranks (ORACLE_TP=N in the environment: tp N, else 1); its last line parsed, each
# rank's part the cost model's parameters
oracle() {
  local name=$1 dp=$2 pp=$3 what=$4 tp=${ORACLE_TP:-1}; shift 4
  local ranks=$((dp * pp * tp)) last steps
  if ! "${MPIRUN[@]}" $ranks "$TRAINER" check --config "$tmp/m.ini" --set parallel.dp="$dp" --set parallel.pp="$pp" \
       --set parallel.tp="$tp" "$@" --db "$tmp/$name.db" --data "$tmp/data" >"$tmp/$name.out" 2>"$tmp/$name.err"; then
    notok "oracle over $ranks ranks: $what" "$tmp/$name.out" "$tmp/$name.err"
    return
  fi
  last=$(tail -1 "$tmp/$name.out")
  steps=$(grep -c ' strategy=' "$tmp/$name.out")
  if [[ "$last" =~ ^max_rel_err=([0-9.e+-]+)\ rank_rel_err=([0-9.e+-]+)\ ranks=([0-9]+)\ steps=([0-9]+)$ ]] &&
     [ "${BASH_REMATCH[3]}" = $ranks ] && [ "${BASH_REMATCH[4]}" = "$steps" ] && [ "$steps" -ge 1 ] &&
     awk -v e="${BASH_REMATCH[1]}" -v r="${BASH_REMATCH[2]}" 'BEGIN { exit !(e <= 1e-4 && r <= 1e-5) }' &&
     grep -q '^model_states: .* params_rel_err=0.000e+00 ' "$tmp/$name.out"; then
    ok "oracle over $ranks ranks: $what ($last)"
  else
    notok "oracle over $ranks ranks: $what (last line '$last', $steps step lines)" "$tmp/$name.out"
  fi
}

# force_recompute SRC DST: a copy of plans SRC.db as DST.db whose every F and B op
# recomputes the first layer of its range (a layer part: itself, but for an attention part,
# which HelixPipe never recomputes, 4.4.1)
force_recompute() {
  cp "$tmp/$1.db" "$tmp/$2.db"
  "$PY" - "$tmp/$2.db" <<'PY' >"$tmp/rc.out" 2>&1
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for rowid, ops in db.execute("SELECT rowid, ops FROM stages").fetchall():
    ops = json.loads(ops)
    for op in ops:
        if op[0] in (0, 2) and not (len(op) > 8 and op[8] == 2):  # F, B (not FK), not an attention part
            op[2] = 1
    db.execute("UPDATE stages SET ops = ? WHERE rowid = ?", (json.dumps(ops, separators=(",", ":")), rowid))
db.commit()
PY
}
