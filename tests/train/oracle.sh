#!/usr/bin/env bash
# tests/train/oracle.sh — `trainer check`, the gradient-equivalence oracle (DESIGN.md
# "Equivalence"), on real plans: the sample corpus through dataprep (r50k_base), plans of
# every strategy built by `planner build` for a 4-layer hidden-64 model at the layouts
# (dp, pp) = (1, 2), (2, 1), (2, 2), (1, 4), (4, 1), then `trainer check` executes each stored step
# in one process and compares its gradients with every sample run whole: every tensor
# within 1e-4 relative (train.check_tolerance), the loss the same. Also: chunkflow with
# forced chunks (FK ops), slimpack with a DP-Merge outlier, slimpack and seq1f1b plans with
# recompute forced on every op (fewer activation bytes held); damaged plans (an op naming a
# unit that does not exist, a missing slice, a broken FILO order) refused naming the step.
# Then `trainer train --db`: the loss of the small preset falls over 50 stored steps,
# metrics.jsonl, loss.svg and the measured times in the plan file
# are written, and a run killed with SIGKILL mid-way and resumed ends with a checkpoint
# byte-identical to the run that never stopped.
# Emits TAP.
: "${top_srcdir:?}" "${top_builddir:?}"
DATAPREP=$top_builddir/dataprep/dataprep
PLANNER=$top_builddir/plans/planner
TRAINER=$top_builddir/train/trainer
export LONGTAIL_HARDWARE_DIR=$top_srcdir/etc/hardware
PY=${PYTHON:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lt-oracle.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() {
  n=$((n + 1)); echo "not ok $n - $1"
  shift
  for f in "$@"; do [ -f "$f" ] && sed 's/^/# /' "$f" | tail -15; done
}

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
threads = 2
INI

# plan NAME STRATEGY DP PP [--set ...]: planner build into $tmp/NAME.db
plan() {
  local name=$1 strategy=$2 dp=$3 pp=$4; shift 4
  "$PLANNER" build --config "$tmp/m.ini" --data "$tmp/data" --db "$tmp/$name.db" --strategy "$strategy" \
    --set parallel.dp="$dp" --set parallel.pp="$pp" "$@" >"$tmp/$name.plan" 2>&1
}

# oracle NAME WHAT: trainer check of every step of $tmp/NAME.db within the tolerance
oracle() {
  local name=$1 what=$2
  if ! "$TRAINER" check --config "$tmp/m.ini" --db "$tmp/$name.db" --data "$tmp/data" >"$tmp/$name.out" \
       2>"$tmp/$name.err"; then
    notok "oracle: $what" "$tmp/$name.out" "$tmp/$name.err"
    return
  fi
  local last steps
  last=$(tail -1 "$tmp/$name.out")
  steps=$(grep -c ' strategy=' "$tmp/$name.out")
  if [[ "$last" =~ ^max_rel_err=([0-9.e+-]+)\ steps=([0-9]+)$ ]] && [ "${BASH_REMATCH[2]}" = "$steps" ] &&
     [ "$steps" -ge 1 ] && awk -v e="${BASH_REMATCH[1]}" 'BEGIN { exit !(e <= 1e-4) }'; then
    ok "oracle: $what ($last)"
  else
    notok "oracle: $what (last line '$last', $steps step lines)" "$tmp/$name.out"
  fi
}

for layout in "1 2" "2 1" "2 2" "1 4" "4 1"; do
  set -- $layout
  for s in megatron gpipe seq1f1b chunkflow infinipipe slimpack helixpipe auto; do
    name="$s-dp$1-pp$2"
    if plan "$name" "$s" "$1" "$2"; then oracle "$name" "$s, dp $1, pp $2"
    else notok "planner build $s, dp $1, pp $2" "$tmp/$name.plan"; fi
  done
done

# the tolerance decides the exit status: the same slimpack plan against 1e-9 fails
if "$TRAINER" check --config "$tmp/m.ini" --set train.check_tolerance=1e-9 --db "$tmp/slimpack-dp2-pp2.db" \
     --data "$tmp/data" >"$tmp/tol.out" 2>"$tmp/tol.err"; then
  notok "check exits 1 over train.check_tolerance (exit 0 at 1e-9)" "$tmp/tol.out"
elif [ $? = 1 ] && grep -q 'over train.check_tolerance = 1e-09' "$tmp/tol.err" && grep -q '^max_rel_err=' "$tmp/tol.out"; then
  ok "check exits 1, saying so, when a step is over train.check_tolerance (1e-9)"
else
  notok "check exits 1 over train.check_tolerance" "$tmp/tol.err"
fi

# chunkflow with 32-token chunks and K = 1: forward-K/V-only (FK) passes, then F again
if plan cf-fk chunkflow 2 2 --set plan.chunk_size=32 --set plan.chunkflow_k=1 &&
   [ "$(sqlite3 "$tmp/cf-fk.db" "SELECT count(*) FROM plan_ops WHERE kind = 'FK'")" -gt 0 ]; then
  oracle cf-fk "chunkflow, 32-token chunks, K = 1 (FK ops)"
else
  notok "planner build chunkflow with FK ops" "$tmp/cf-fk.plan"
fi

# slimpack with a DP-Merge outlier: context 4K (the corpus' long document truncated to it),
# 4 DP ranks, groups of 2
if plan sp-merge slimpack 4 2 --set parallel.max_cp=2 --set plan.global_batch=8 --set plan.context_len=4K \
     --set plan.steps=1 && [ "$(sqlite3 "$tmp/sp-merge.db" "SELECT count(*) FROM dp_merges")" -gt 0 ]; then
  oracle sp-merge "slimpack, dp 4, pp 2, a DP-Merge group"
  if grep -qE ' skipped=[1-9]' "$tmp/sp-merge.out"; then ok "DP-Merge: the group's shards run in lockstep where its first member meets the op, the other members' copies are skipped"
  else notok "DP-Merge ops skipped on the second member" "$tmp/sp-merge.out"; fi
else
  notok "planner build slimpack with a DP-Merge group" "$tmp/sp-merge.plan"
fi

# forced recompute: every F and B op of the slimpack (asymmetric backward units), seq1f1b
# (slices with KV context) and DP-Merge (context-parallel shards) plans recomputes the
# first layer of its range
for name in slimpack-dp2-pp2 seq1f1b-dp1-pp4 sp-merge; do
  cp "$tmp/$name.db" "$tmp/$name-rc.db"
  "$PY" - "$tmp/$name-rc.db" <<'PY' >"$tmp/rc.out" 2>&1
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
  oracle "$name-rc" "${name%%-*} with every op recomputing one layer (${name#*-})"
  without=$(awk -F'act_peak_mb=' '/ strategy=/ { if ($2 > m) m = $2 } END { print m + 0 }' "$tmp/$name.out")
  with=$(awk -F'act_peak_mb=' '/ strategy=/ { if ($2 > m) m = $2 } END { print m + 0 }' "$tmp/$name-rc.out")
  if awk -v a="$with" -v b="$without" 'BEGIN { exit !(a < b) }'; then
    ok "recompute holds fewer activation bytes: ${name%%-*} $with MB < $without MB"
  else
    notok "recompute holds fewer activation bytes (${name%%-*}: $with MB vs $without MB)" "$tmp/$name-rc.out"
  fi
done

# damaged plans: refused, naming the step
refused() { # refused WHAT DB PATTERN
  if "$TRAINER" check --config "$tmp/m.ini" --db "$2" --data "$tmp/data" >"$tmp/bad.out" 2>"$tmp/bad.err"; then
    notok "damaged plan refused: $1 (exit 0)" "$tmp/bad.out"
  elif grep -qE -- "$3" "$tmp/bad.err"; then
    ok "damaged plan refused: $1 ($(head -1 "$tmp/bad.err" | cut -c1-160))"
  else
    notok "damaged plan refused: $1 (stderr lacks /$3/)" "$tmp/bad.err"
  fi
}
cp "$tmp/megatron-dp2-pp2.db" "$tmp/bad-unit.db"
sqlite3 "$tmp/bad-unit.db" "UPDATE stages SET ops = replace(ops, '[2,0,', '[2,7,') WHERE step = 0 AND dp_rank = 0 AND stage = 1"
refused "an op naming a unit that does not exist" "$tmp/bad-unit.db" "step 0"
cp "$tmp/seq1f1b-dp2-pp2.db" "$tmp/bad-slice.db"
sqlite3 "$tmp/bad-slice.db" "DELETE FROM units_slices WHERE step = 1 AND dp_rank = 1 AND unit = (SELECT max(unit) FROM units_slices WHERE step = 1 AND dp_rank = 1) AND seq = 0"
refused "a slice missing" "$tmp/bad-slice.db" "step 1"
cp "$tmp/seq1f1b-dp1-pp2.db" "$tmp/bad-filo.db"
# stage 0 of step 0: the two B ops over the slices of one sample swapped (FILO broken)
"$PY" - "$tmp/bad-filo.db" <<'PY' >"$tmp/filo.out" 2>&1
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
ops = json.loads(db.execute("SELECT ops FROM stages WHERE step = 0 AND dp_rank = 0 AND stage = 0").fetchone()[0])
sl = {}
for u, smp, b in db.execute("SELECT unit, idx, tok_begin FROM units_slices WHERE step = 0 AND dp_rank = 0"):
    sl.setdefault(smp, []).append((b, u))
pair = next(sorted(v) for v in sl.values() if len({u for _, u in v}) >= 2)
first, second = pair[0][1], pair[1][1]  # units of slices j and j + 1 of one sample
bi = {op[1]: i for i, op in enumerate(ops) if op[0] == 2}
i, j = bi[first], bi[second]
ops[i], ops[j] = ops[j], ops[i]
db.execute("UPDATE stages SET ops = ? WHERE step = 0 AND dp_rank = 0 AND stage = 0", (json.dumps(ops, separators=(",", ":")),))
db.commit()
print("swapped the B ops of units", first, "and", second)
PY
refused "backward of a sample's slices out of FILO order" "$tmp/bad-filo.db" "step 0.*deadlock"

# ---- trainer train --db
# the issue's run: the small preset (8 layers, hidden 256; the r50k vocabulary), 50 stored
# slimpack steps (dp 2 x pp 2) of the sample corpus
cat >"$tmp/s.ini" <<INI
[data]
encoding = r50k_base
[model]
preset = small
[plan]
global_batch = 4
context_len = 128
mem = 80G
steps = 50
[train]
threads = 2
lr = 1e-3
min_lr = 1e-4
warmup_steps = 0
steps = 50
INI
T=(--config "$tmp/s.ini")
if "$PLANNER" build "${T[@]}" --data "$tmp/data" --db "$tmp/train30.db" --strategy slimpack --set parallel.dp=2 \
     --set parallel.pp=2 >"$tmp/train30.plan" 2>&1 &&
   "$TRAINER" train "${T[@]}" --db "$tmp/train30.db" --data "$tmp/data" --out "$tmp/run30" \
     >"$tmp/run30.out" 2>"$tmp/run30.err"; then
  lines=$(grep -c '^step=' "$tmp/run30.out")
  first=$(awk -F'[ =]' '/^step=/ && $2 <= 3 { s += $4; k++ } END { printf "%.4f", s / k }' "$tmp/run30.out")
  last=$(awk -F'[ =]' '/^step=/ && $2 > 47 { s += $4; k++ } END { printf "%.4f", s / k }' "$tmp/run30.out")
  if [ "$lines" = 50 ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 2) }'; then
    ok "train --db: small, 50 stored steps, the loss falls (steps 1-3 mean $first, steps 48-50 mean $last)"
  else
    notok "train --db: the loss falls ($lines step lines, $first -> $last)" "$tmp/run30.out"
  fi
  if [ "$(wc -l <"$tmp/run30/metrics.jsonl")" = 50 ] &&
     "$PY" -c 'import json, sys; rows = [json.loads(l) for l in open(sys.argv[1])]; assert [r["step"] for r in rows] == list(range(1, 51)); assert all(r["plan_step"] == r["step"] - 1 and r["predicted"] > 0 for r in rows)' "$tmp/run30/metrics.jsonl" &&
     grep -q '<polyline' "$tmp/run30/loss.svg"; then
    ok "train --db: metrics.jsonl has one object per step, loss.svg draws them"
  else
    notok "train --db: metrics.jsonl and loss.svg" "$tmp/run30/metrics.jsonl"
  fi
  measured=$(sqlite3 "$tmp/train30.db" "SELECT count(*) FROM step_measured WHERE measured_ms > 0 AND peak_bytes > 0 AND
    (SELECT count(*) FROM measured_stages AS g WHERE g.step = step_measured.step AND g.peak_bytes > 0) = 2")
  ops=$(sqlite3 "$tmp/train30.db" "SELECT count(*) FROM measured_ops")
  planned=$(sqlite3 "$tmp/train30.db" "SELECT count(*) FROM plan_ops")
  if [ "$measured" = 50 ] && [ "$ops" = "$planned" ]; then
    ok "train --db: step_measured has the 50 steps beside their predictions, measured_stages both stages, measured_ops every op ($ops)"
  else
    notok "train --db: measured times in the plan file ($measured steps, $ops of $planned ops)"
  fi
else
  notok "train --db, small, 50 steps" "$tmp/train30.plan" "$tmp/run30.err"
fi

# kill -9 during a step, --resume: the same final checkpoint as a run that never stopped
R=(--config "$tmp/m.ini" --set train.steps=8 --set train.checkpoint_every=2 --db "$tmp/resume.db" --data "$tmp/data")
plan resume slimpack 2 2 --set plan.global_batch=4 --set plan.steps=8
"$TRAINER" train "${R[@]}" --steps 8 --out "$tmp/straight" >"$tmp/straight.out" 2>&1
"$TRAINER" train "${R[@]}" --steps 8 --out "$tmp/killed" >"$tmp/killed.out" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -f "$tmp/killed/ckpt-00000004.bin" ] && break; sleep 0.05; done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
before=$(grep -c '^step=' "$tmp/killed.out")
"$TRAINER" train "${R[@]}" --steps 8 --out "$tmp/killed" --resume >"$tmp/resumed.out" 2>"$tmp/resumed.err"
if [ -f "$tmp/straight/ckpt-00000008.bin" ] && cmp -s "$tmp/straight/ckpt-00000008.bin" "$tmp/killed/ckpt-00000008.bin" &&
   grep -q '^step=5 ' "$tmp/resumed.out" && [ "$(wc -l <"$tmp/killed/metrics.jsonl")" = 8 ]; then
  ok "train --db: killed with SIGKILL after step $before, resumed from step 4: checkpoint 8 byte-identical, 8 metrics lines"
else
  notok "train --db: kill -9 and --resume give the uninterrupted run's checkpoint" "$tmp/resumed.out" "$tmp/resumed.err"
fi

echo "1..$n"
exit 0
