#!/usr/bin/env bash
# tests/train/validation.sh — the validation loss of `trainer train --db` (train.eval_every)
# on a tiny pipeline: the sample corpus through dataprep, plans built with data.holdout = 0.2
# (table heldout: no step samples a held-out document, asked of the file with sqlite3; a
# resumed build with another data.holdout refused), a
# nano model trained 5 steps with eval_every = 2: validation lines in metrics.jsonl at
# steps 0, 2, 4 and 5 (the last), `val=` on the progress lines, the validation loss at step
# 0 equal to `trainer eval --heldout` of the initial checkpoint over the same documents, and
# the second curve of loss.svg. Refusals: eval_every > 0 on plans without held-out
# documents, and train.steps longer than the stored steps (the cosine schedule would never
# reach min_lr); a shorter train.steps stops there. With MPI: dp 2 with fsdp and pp 2 x tp 2
# over mpirun give one process's validation losses. About 30 s on 2 cores. Emits TAP.
: "${top_srcdir:?}" "${top_builddir:?}"
DATAPREP=$top_builddir/dataprep/dataprep
PLANNER=$top_builddir/plans/planner
TRAINER=$top_builddir/train/trainer
export LONGTAIL_HARDWARE_DIR=$top_srcdir/etc/hardware
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lt-validation.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() {
  n=$((n + 1)); echo "not ok $n - $1"
  shift
  for f in "$@"; do [ -f "$f" ] && sed 's/^/# /' "$f" | tail -15; done
}
if ! command -v sqlite3 >/dev/null; then echo "1..0 # SKIP no sqlite3 command"; exit 0; fi

"$DATAPREP" run --input "$top_srcdir/data/sample/mixed-0.jsonl.gz" --encoding cl100k_base \
  --vocab-dir "$top_srcdir/data/vocab" --out "$tmp/data" -q >"$tmp/dp.out" 2>&1 \
  || { notok "dataprep of the sample corpus" "$tmp/dp.out"; echo "1..$n"; exit 0; }
cat >"$tmp/t.ini" <<INI
[model]
preset = nano
[data]
holdout = 0.2
[plan]
strategy = megatron
context_len = 96
global_batch = 2
steps = 5
mem = 80G
[train]
lr = 3e-3
warmup_steps = 1
threads = 2
eval_every = 2
eval_docs = 8
INI
T=(--config "$tmp/t.ini")

# the plans and their held-out documents
if "$PLANNER" build "${T[@]}" --data "$tmp/data" --db "$tmp/p.db" >"$tmp/plan.out" 2>&1; then
  held=$(sqlite3 "$tmp/p.db" "SELECT count(*) FROM heldout")
  distinct=$(sqlite3 "$tmp/p.db" "SELECT count(DISTINCT task || ',' || doc) FROM heldout")
  leaks=$(sqlite3 "$tmp/p.db" "SELECT count(*) FROM step_samples AS s JOIN heldout AS h
                               ON h.run_id = s.run_id AND h.task = s.task AND h.doc = s.doc")
  sampled=$(sqlite3 "$tmp/p.db" "SELECT count(*) FROM step_samples")
  if [ "${held:-0}" -gt 0 ] && [ "$distinct" = "$held" ] && [ "$leaks" = 0 ] && [ "${sampled:-0}" -gt 0 ]; then
    ok "planner build, data.holdout = 0.2: $held held-out documents, none among the $sampled samples of the steps"
  else
    notok "held-out documents in the plans: held=$held distinct=$distinct leaks=$leaks sampled=$sampled" "$tmp/plan.out"
  fi
else
  notok "planner build with data.holdout = 0.2" "$tmp/plan.out"
fi
# resuming the file with another held-out share is refused (its steps avoid the stored set)
if "$PLANNER" build "${T[@]}" --set data.holdout=0.1 --set plan.steps=6 --data "$tmp/data" --db "$tmp/p.db" \
     >"$tmp/re.out" 2>&1; then
  notok "a resumed build with data.holdout = 0.1 over a 0.2 file is refused (exit 0)" "$tmp/re.out"
elif grep -q 'holdout = 0.1 here, 0.2 in the file' "$tmp/re.out"; then
  ok "a resumed build with another data.holdout is refused, naming both values"
else
  notok "a resumed build with another data.holdout: the reason" "$tmp/re.out"
fi
# many more steps (several epochs over the corpus): still no held-out document sampled, and
# the same held-out set (it depends on plan.seed only)
if "$PLANNER" build "${T[@]}" --set plan.steps=60 --set plan.global_batch=4 --data "$tmp/data" --db "$tmp/long.db" \
     >"$tmp/long.out" 2>&1; then
  leaks=$(sqlite3 "$tmp/long.db" "SELECT count(*) FROM step_samples AS s JOIN heldout AS h
                                  ON h.run_id = s.run_id AND h.task = s.task AND h.doc = s.doc")
  docs=$(sqlite3 "$tmp/long.db" "SELECT count(DISTINCT task || ',' || doc) FROM step_samples")
  same=$(sqlite3 "$tmp/long.db" "ATTACH '$tmp/p.db' AS a; SELECT count(*) FROM heldout AS h JOIN a.heldout AS g
                                 ON g.idx = h.idx AND g.task = h.task AND g.doc = h.doc")
  if [ "$leaks" = 0 ] && [ "$same" = "$held" ] && [ "$(sqlite3 "$tmp/long.db" "SELECT count(*) FROM heldout")" = "$held" ]; then
    ok "60 steps of 4 samples ($docs documents sampled): none held out; the same $held held-out documents"
  else
    notok "long plans: leaks=$leaks, held-out set shared $same of $held" "$tmp/long.out"
  fi
else
  notok "planner build, 60 steps" "$tmp/long.out"
fi

"$TRAINER" init "${T[@]}" --out "$tmp/init.ckpt" >"$tmp/init.out" 2>&1 || notok "trainer init" "$tmp/init.out"
if "$TRAINER" train "${T[@]}" --db "$tmp/p.db" --data "$tmp/data" --init "$tmp/init.ckpt" --out "$tmp/run" \
     >"$tmp/train.out" 2>"$tmp/train.err"; then
  steps=$(grep -c '"val_loss"' "$tmp/run/metrics.jsonl")
  at=$(grep '"val_loss"' "$tmp/run/metrics.jsonl" | sed 's/^{"step":\([0-9]*\),.*/\1/' | tr '\n' ' ')
  if [ "$at" = "0 2 4 5 " ] && grep -q '^step=0 val=' "$tmp/train.out" && grep -q '^step=2 .* val=' "$tmp/train.out" &&
     ! grep -q '^step=3 .* val=' "$tmp/train.out"; then
    ok "train, eval_every = 2: validation at steps $at($steps lines), val= on those progress lines"
  else
    notok "validation lines at steps 0 2 4 5, got '$at'" "$tmp/train.out" "$tmp/train.err" "$tmp/run/metrics.jsonl"
  fi
  # step 0 against `trainer eval --heldout` of the initial checkpoint (the same documents)
  v0=$(grep '"val_loss"' "$tmp/run/metrics.jsonl" | head -1 | sed 's/.*"val_loss":\([^,]*\),.*/\1/')
  t0=$(grep '"val_loss"' "$tmp/run/metrics.jsonl" | head -1 | sed 's/.*"val_tokens":\([0-9]*\),.*/\1/')
  if "$TRAINER" eval "${T[@]}" --ckpt "$tmp/init.ckpt" --db "$tmp/p.db" --heldout --data "$tmp/data" --docs 8 \
       >"$tmp/eval.out" 2>"$tmp/eval.err"; then
    el=$(sed -n 's/^loss=\([^ ]*\) tokens=.*/\1/p' "$tmp/eval.out")
    et=$(sed -n 's/^loss=[^ ]* tokens=\([0-9]*\)$/\1/p' "$tmp/eval.out")
    if [ -n "$el" ] && [ "$et" = "$t0" ] && awk -v a="$v0" -v b="$el" 'BEGIN { d = a - b; exit !(d < 1e-5 && d > -1e-5) }'; then
      ok "validation loss at step 0 ($v0 over $t0 tokens) = trainer eval --heldout of the initial checkpoint ($el)"
    else
      notok "step-0 validation $v0/$t0 vs trainer eval --heldout $el/$et" "$tmp/eval.out" "$tmp/eval.err"
    fi
  else
    notok "trainer eval --db --heldout" "$tmp/eval.out" "$tmp/eval.err"
  fi
  last_val=$(grep '"val_loss"' "$tmp/run/metrics.jsonl" | tail -1 | sed 's/.*"val_loss":\([^,]*\),.*/\1/')
  if awk -v a="$v0" -v b="$last_val" 'BEGIN { exit !(b < a) }'; then
    ok "the validation loss falls over the run ($v0 -> $last_val)"
  else
    notok "validation loss $v0 -> $last_val does not fall" "$tmp/run/metrics.jsonl"
  fi
  if grep -q 'class="validation"' "$tmp/run/loss.svg" && grep -q 'class="training"' "$tmp/run/loss.svg" &&
     grep -q '>validation (held-out documents)</text>' "$tmp/run/loss.svg"; then
    ok "loss.svg: the training and validation curves with a legend"
  else
    notok "loss.svg lacks the validation curve or the legend" "$tmp/run/loss.svg"
  fi
else
  notok "trainer train --db with eval_every = 2" "$tmp/train.out" "$tmp/train.err"
fi

# a resumed run: the metrics keep one validation line per step evaluated
if "$TRAINER" train "${T[@]}" --db "$tmp/p.db" --data "$tmp/data" --init "$tmp/init.ckpt" --out "$tmp/res" \
     --set train.checkpoint_every=2 --steps 2 >/dev/null 2>&1 &&
   "$TRAINER" train "${T[@]}" --db "$tmp/p.db" --data "$tmp/data" --out "$tmp/res" --resume >/dev/null 2>"$tmp/res.err" &&
   [ "$(grep '"val_loss"' "$tmp/res/metrics.jsonl" | sed 's/^{"step":\([0-9]*\),.*/\1/' | tr '\n' ' ')" = "0 2 4 5 " ]; then
  ok "--steps 2 then --resume: validation lines at steps 0 2 4 5, once each"
else
  notok "resumed run's validation lines" "$tmp/res.err" "$tmp/res/metrics.jsonl"
fi

# refusals
chk() { # NAME STATUS STDERR-PATTERN ARGS...
  local name=$1 want=$2 pat=$3; shift 3
  "$TRAINER" "$@" >"$tmp/c.out" 2>"$tmp/c.err"
  local got=$?
  if [ "$got" = "$want" ] && grep -qE -- "$pat" "$tmp/c.err"; then ok "$name"; else notok "$name (exit $got)" "$tmp/c.err"; fi
}
"$PLANNER" build "${T[@]}" --set data.holdout=0 --data "$tmp/data" --db "$tmp/none.db" >"$tmp/plan0.out" 2>&1 ||
  notok "planner build, data.holdout = 0" "$tmp/plan0.out"
chk "eval_every > 0 on plans without held-out documents is refused" 2 "holds no held-out document" \
  train "${T[@]}" --db "$tmp/none.db" --data "$tmp/data" --out "$tmp/r0"
chk "eval_every > 0 with --whole is refused" 2 "needs --db PLANS" \
  train "${T[@]}" --whole --data "$tmp/data" --out "$tmp/r1"
chk "trainer eval --heldout needs --db" 2 "go together" eval "${T[@]}" --ckpt "$tmp/init.ckpt" --data "$tmp/data" --heldout
chk "trainer eval --heldout on plans without held-out documents" 1 "no held-out document" \
  eval "${T[@]}" --ckpt "$tmp/init.ckpt" --db "$tmp/none.db" --heldout --data "$tmp/data"
chk "train.steps longer than the stored steps is refused, naming both" 2 "train.steps = 8 is more than the 5 steps stored" \
  train "${T[@]}" --set train.steps=8 --db "$tmp/p.db" --data "$tmp/data" --out "$tmp/r2"
if "$TRAINER" train "${T[@]}" --set train.steps=3 --set train.eval_every=0 --db "$tmp/p.db" --data "$tmp/data" \
     --out "$tmp/r3" >"$tmp/r3.out" 2>&1 && grep -q '^step=3 ' "$tmp/r3.out" && ! grep -q '^step=4 ' "$tmp/r3.out"; then
  ok "a shorter train.steps (3 of 5 stored) trains 3 steps"
else
  notok "train.steps = 3 of 5 stored" "$tmp/r3.out"
fi
# under a launcher (when the build has MPI): the validation runs as a forward-only scoring plan
# of the job's layout (document i on DP rank i mod dp), so every layout gives one process's
# validation losses: dp 2 with fsdp (the weights the update leaves sharded are gathered first:
# stale ones would score the step before), and pp 2 x tp 2 on 4 ranks (each stage's layers on
# its ranks, each TP rank its heads) against one process running the pp 2 plans
same_vals() { # A B: the same count of val= figures, each a number (not nan: vals gives "val=") within 1e-5
  [ -n "$1" ] && [ "$(echo "$1" | wc -w)" = "$(echo "$2" | wc -w)" ] &&
    paste <(echo "$1" | tr ' ' '\n' | sed '/^$/d') <(echo "$2" | tr ' ' '\n' | sed '/^$/d') |
    awk '{ sub(/val=/, "", $1); sub(/val=/, "", $2); d = $1 - $2
           if ($1 == "" || $2 == "" || d > 1e-5 || d < -1e-5) bad = 1 } END { exit bad }'
}
vals() { grep -o 'val=[0-9.]*' "$1" | tr '\n' ' '; }
if grep -q '^#define HAVE_MPI 1' "$top_builddir/buildconfig.h" 2>/dev/null && command -v mpirun >/dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  D=("${T[@]}" --set parallel.dp=2 --set parallel.shard=fsdp --set train.threads=1 --set train.eval_every=4 --steps 4)
  if "$PLANNER" build "${T[@]}" --set parallel.dp=2 --set parallel.shard=fsdp --data "$tmp/data" --db "$tmp/d2.db" \
       >"$tmp/d2.plan" 2>&1 &&
     "$TRAINER" train "${D[@]}" --db "$tmp/d2.db" --data "$tmp/data" --init "$tmp/init.ckpt" --out "$tmp/d2one" \
       >"$tmp/d2one.out" 2>&1 &&
     mpirun -n 2 "$TRAINER" train "${D[@]}" --db "$tmp/d2.db" --data "$tmp/data" --init "$tmp/init.ckpt" \
       --out "$tmp/d2mpi" >"$tmp/d2mpi.out" 2>"$tmp/d2mpi.err"; then
    a=$(vals "$tmp/d2one.out") b=$(vals "$tmp/d2mpi.out")
    if [ "$(echo "$a" | wc -w)" = 2 ] && same_vals "$a" "$b"; then
      ok "dp 2, parallel.shard = fsdp, over mpirun: the validation losses of one process ($b)"
    else
      notok "dp 2 fsdp over mpirun: '$b', one process '$a'" "$tmp/d2one.out" "$tmp/d2mpi.out"
    fi
  else
    notok "dp 2 fsdp over mpirun with eval_every" "$tmp/d2.plan" "$tmp/d2one.out" "$tmp/d2mpi.err"
  fi
  P=("${T[@]}" --set parallel.pp=2 --set train.threads=1)
  if "$PLANNER" build "${P[@]}" --data "$tmp/data" --db "$tmp/pp2.db" >"$tmp/pp2.plan" 2>&1 &&
     "$PLANNER" build "${P[@]}" --set parallel.tp=2 --data "$tmp/data" --db "$tmp/pt.db" >>"$tmp/pp2.plan" 2>&1 &&
     "$TRAINER" train "${P[@]}" --db "$tmp/pp2.db" --data "$tmp/data" --init "$tmp/init.ckpt" --out "$tmp/pp2one" \
       >"$tmp/pp2one.out" 2>&1 &&
     mpirun -n 4 "$TRAINER" train "${P[@]}" --set parallel.tp=2 --db "$tmp/pt.db" --data "$tmp/data" \
       --init "$tmp/init.ckpt" --out "$tmp/ptmpi" >"$tmp/ptmpi.out" 2>"$tmp/ptmpi.err"; then
    a=$(vals "$tmp/pp2one.out") b=$(vals "$tmp/ptmpi.out")
    if [ "$(echo "$a" | wc -w)" = 4 ] && same_vals "$a" "$b" && same_vals "$(echo "$b" | cut -d' ' -f1)" "val=$v0"; then
      ok "pp 2 x tp 2 over mpirun (4 ranks): the validation losses of one process at pp 2 ($b), step 0 = trainer eval"
    else
      notok "pp 2 x tp 2 over mpirun: '$b', one process '$a', step 0 '$v0'" "$tmp/pp2one.out" "$tmp/ptmpi.out"
    fi
  else
    notok "pp 2 x tp 2 over mpirun with eval_every" "$tmp/pp2.plan" "$tmp/pp2one.out" "$tmp/ptmpi.err"
  fi
fi
echo "1..$n"
