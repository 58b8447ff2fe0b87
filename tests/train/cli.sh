#!/usr/bin/env bash
# tests/train/cli.sh — the `trainer` program keeps the command-line contract
# (tests/cli_common.sh), and its own: `train --whole` on a dataprep output (a falling loss,
# checkpoints, resume bit-identical to a run that never stopped), `eval`'s last line,
# `generate` (greedy is deterministic and continues the prompt), clear usage errors.
PROG=trainer
BIN=${top_builddir:?}/train/trainer
. "${top_srcdir:?}/tests/cli_common.sh"

DATAPREP=$top_builddir/dataprep/dataprep
data=$tmp/data
"$DATAPREP" run --input "$top_srcdir/data/sample/mixed-0.jsonl.gz" --encoding cl100k_base \
  --vocab-dir "$top_srcdir/data/vocab" --out "$data" -q >"$tmp/dp.out" 2>&1 || { cat "$tmp/dp.out"; }
# a small, quick configuration: nano (the vocabulary of data.encoding: cl100k_base), short documents
cat >"$tmp/t.ini" <<INI
[model]
preset = nano
[plan]
context_len = 96
[train]
steps = 6
batch_docs = 2
lr = 3e-3
warmup_steps = 1
threads = 2
checkpoint_every = 2
keep_checkpoints = 2
INI
T=(--config "$tmp/t.ini")

check "train without --whole or --db says what exists" 2 "" "give --db PLANS.db .* or --whole" -- train "${T[@]}" --data "$data"
check "train --whole needs --data" 2 "" "give --data DIR" -- train "${T[@]}" --whole
check "train --whole without any model is a usage error, not llama-7b" 2 "" "which model" \
  -- train --whole --data "$data" --out "$tmp/nomodel"
# train.backend = cuda where it cannot run (a build without CUDA, or no GPU): exit 2 naming the
# key and lt_cuda_open's reason (on a GPU machine scripts/gpu-check.sh runs the backend instead)
if ! nvidia-smi -L >/dev/null 2>&1; then
  nogpu="^trainer: error: train\.backend = cuda: (built without CUDA|no CUDA device)"
  check "train.backend = cuda without a GPU says why" 2 "" "$nogpu" \
    -- train "${T[@]}" --set train.backend=cuda --whole --data "$data" --out "$tmp/cuda"
  check "check with train.backend = cuda without a GPU says why" 2 "" "$nogpu" \
    -- check "${T[@]}" --set train.backend=cuda --db "$tmp/none.db" --data "$data"
fi
check "train --resume with no checkpoint" 2 "" "no checkpoint to resume from" \
  -- train "${T[@]}" --whole --data "$data" --resume --out "$tmp/none"

# trainer check / train --db: usage and mismatch errors (tests/train/oracle.sh runs them for real)
LONGTAIL_HARDWARE_DIR=$top_srcdir/etc/hardware "$top_builddir/plans/planner" build "${T[@]}" --data "$data" \
  --db "$tmp/p.db" --set plan.global_batch=2 --set plan.steps=1 --set parallel.pp=2 >"$tmp/plan.out" 2>&1 || cat "$tmp/plan.out"
check "check needs --db" 2 "" "give --db PLANS.db" -- check "${T[@]}" --data "$data"
check "check needs --data" 2 "" "give --data DIR" -- check "${T[@]}" --db "$tmp/p.db"
check "check: a bad --steps list" 2 "" "not a comma-separated list" -- check "${T[@]}" --db "$tmp/p.db" --data "$data" --steps 1,x
check "check: a step that is not stored, named" 1 "" "step 7" -- check "${T[@]}" --db "$tmp/p.db" --data "$data" --steps 7
check "check: plans of another layer count are refused" 2 "" "the plans are for a model with layers = 2, this model has 3" \
  -- check "${T[@]}" --set model.layers=3 --db "$tmp/p.db" --data "$data"
check "train --db: plans of another width are refused" 2 "" "the plans are for a model with hidden = 64, this model has 128" \
  -- train "${T[@]}" --set model.hidden=128 --db "$tmp/p.db" --data "$data" --out "$tmp/wide"
LONGTAIL_HARDWARE_DIR=$top_srcdir/etc/hardware "$top_builddir/plans/planner" build "${T[@]}" --data "$data" \
  --db "$tmp/tp2.db" --set plan.global_batch=2 --set plan.steps=1 --set parallel.tp=2 >"$tmp/plan.out" 2>&1 || cat "$tmp/plan.out"
check "train --db: plans for tensor parallelism in one process are refused by name, not run at tp = 1" 2 "" \
  "the plans are for parallel.tp = 2; this job runs tensor parallelism of 1" \
  -- train "${T[@]}" --db "$tmp/tp2.db" --data "$data" --out "$tmp/tp2"
check "check: plans for tensor parallelism are refused by name" 2 "" "parallel.tp = 2" \
  -- check "${T[@]}" --db "$tmp/tp2.db" --data "$data"
check "train --db and --whole exclude each other" 2 "" "exclude each other" -- train "${T[@]}" --whole --db "$tmp/p.db" --data "$data"
check "check: the one stored step within the tolerance" 0 "^max_rel_err=[0-9.e+-]+ steps=1$" "" \
  -- check "${T[@]}" --db "$tmp/p.db" --data "$data"

# Six steps straight; then three, stop, resume to six: the checkpoints are identical.
check "train --whole 6 steps" 0 "^step=6 loss=[0-9.]+ lr=" "" -- train "${T[@]}" --whole --data "$data" --out "$tmp/a"
check "train --whole stops at --steps 3" 0 "^step=3 " "" -- train "${T[@]}" --whole --data "$data" --out "$tmp/b" --steps 3
check "train --resume continues at step 4" 0 "^step=4 " "resuming from .*ckpt-00000003.bin" \
  -- train "${T[@]}" --whole --data "$data" --out "$tmp/b" --resume
n=$((n + 1))
if cmp -s "$tmp/a/ckpt-00000006.bin" "$tmp/b/ckpt-00000006.bin"; then
  echo "ok $n - $PROG: resumed run's checkpoint is byte-identical to the straight run's"
else
  echo "not ok $n - $PROG: resumed run's checkpoint differs from the straight run's"
  ls -l "$tmp/a" "$tmp/b" | sed 's/^/# /'
fi
n=$((n + 1))
kept=$(ls "$tmp/a" | grep -c '^ckpt-.*\.bin$')
if [ "$kept" = 2 ] && [ -f "$tmp/a/ckpt-00000004.bin" ]; then
  echo "ok $n - $PROG: train.keep_checkpoints = 2 keeps the newest two"
else
  echo "not ok $n - $PROG: keep_checkpoints: $(ls "$tmp/a" | tr '\n' ' ')"
fi

# The loss falls: eval on the documents trained on, before (a fresh init) and after.
"$BIN" train "${T[@]}" --whole --data "$data" --out "$tmp/zero" --steps 1 --set train.lr=0 --set train.min_lr=0 >/dev/null 2>&1
check "eval prints loss=L tokens=T last" 0 "^loss=[0-9.]+ tokens=[0-9]+$" "" \
  -- eval "${T[@]}" --ckpt "$tmp/a/ckpt-00000006.bin" --data "$data" --docs 12
after=$(tail -n 1 "$tmp/out" | sed 's/^loss=\([0-9.]*\).*/\1/')
"$BIN" eval "${T[@]}" --ckpt "$tmp/zero/ckpt-00000001.bin" --data "$data" --docs 12 >"$tmp/out0" 2>/dev/null
before=$(tail -n 1 "$tmp/out0" | sed 's/^loss=\([0-9.]*\).*/\1/')
n=$((n + 1))
if [ -n "$before" ] && [ -n "$after" ] && awk -v a="$after" -v b="$before" 'BEGIN { exit !(a < b - 0.05) }'; then
  echo "ok $n - $PROG: eval loss falls with training ($before -> $after)"
else
  echo "not ok $n - $PROG: eval loss did not fall: before '$before', after '$after'"
fi
check "eval refuses a model whose dims differ from the config" 2 "" "heads|hidden|layers" \
  -- eval "${T[@]}" --set model.hidden=128 --ckpt "$tmp/a/ckpt-00000006.bin" --data "$data" --docs 2
check "eval needs --ckpt" 2 "" "give --ckpt" -- eval "${T[@]}" --data "$data"
printf 'not a checkpoint at all, just text padding it out to more than 256 bytes %0200d\n' 0 >"$tmp/bad.bin"
check "eval on a non-checkpoint file" 1 "" "bad.bin" -- eval "${T[@]}" --ckpt "$tmp/bad.bin" --data "$data"

# generate: greedy twice gives the same text, which starts with the prompt
G=(generate --ckpt "$tmp/a/ckpt-00000006.bin" --encoding cl100k_base --vocab-dir "$top_srcdir/data/vocab"
   --prompt "The package" --max-tokens 8)
check "generate greedy" 0 "^The package" "" -- "${G[@]}"
cp "$tmp/out" "$tmp/g1"
"$BIN" "${G[@]}" >"$tmp/g2" 2>/dev/null
n=$((n + 1))
if cmp -s "$tmp/g1" "$tmp/g2"; then echo "ok $n - $PROG: greedy generation is deterministic"
else echo "not ok $n - $PROG: greedy generation differs between runs"; fi
check "generate sampled with a seed" 0 "^The package" "" -- "${G[@]}" --temperature 0.8 --seed 7
# model.vocab: data.encoding's size unless set, and never below it
check "init: model.vocab is data.encoding's size" 0 "^wrote .*: nano 6531520 parameters$" "" \
  -- init --set model.preset=nano --set data.encoding=r50k_base --out "$tmp/r50k.ckpt"
check "init: a model.vocab below data.encoding's size names both" 2 "" \
  "model.vocab = 512 is smaller than the vocabulary of data.encoding = cl100k_base \(100277 ids\)" \
  -- init --set model.preset=nano --set model.vocab=512 --out "$tmp/v512.ckpt"
# a model of 512 ids: over an encoding of the 256 single bytes (ranks 0..255, no specials)
b64=ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/
mkdir -p "$tmp/vocab"
for b in $(seq 0 255); do echo "${b64:$((b >> 2)):1}${b64:$(((b & 3) << 4)):1}== $b"; done >"$tmp/vocab/bytes.tiktoken"
echo '{"pat_str": "\\S+|\\s+", "special_tokens": {}}' >"$tmp/vocab/bytes.json"
check "init: a model.vocab above data.encoding's size" 0 "^wrote .*v512.ckpt: custom" "" -- init --set model.preset=nano \
  --set data.encoding=bytes --set data.vocab_dir="$tmp/vocab" --set model.vocab=512 --out "$tmp/v512.ckpt"
check "generate refuses a prompt token outside the model's vocabulary" 2 "" "vocabulary is 512" \
  -- generate --ckpt "$tmp/v512.ckpt" --encoding cl100k_base --vocab-dir "$top_srcdir/data/vocab" --prompt "The package"
check "generate needs --prompt" 2 "" "give --prompt" -- generate --ckpt "$tmp/a/ckpt-00000006.bin" --encoding cl100k_base
finish
