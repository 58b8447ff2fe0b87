#!/usr/bin/env bash
# tests/train/dist_tp.sh — tensor parallelism with sequence parallelism in the distributed
# engine (parallel.tp: dp x pp x tp MPI ranks, TP innermost; docs/trainer.md "The distributed
# engine"), beside tests/train/dist.sh (the same corpus and model, tests/train/dist_common.sh):
#   - the oracle: megatron, seq1f1b and slimpack at pp 2 x tp 2, dp 2 x pp 2 x tp 2, tp 4,
#     chunkflow FK, a DP-Merge group and static CP 2 with tp 2, every op recomputing a layer:
#     within 1e-5 of one process, 1e-4 of every sample whole; each rank's part exactly the
#     cost model's parameters; the TP bytes each rank sent equal to the cost model's;
#   - a tp plan on a tp 1 job and a world that is not dp x pp x tp: refused by name;
#   - the cpu-bf16 test backend at pp 2 x tp 2 and a DP-Merge group x tp 2;
#   - 10 training steps at pp 2 x tp 2 as one process's at tp 1; a tp 2 checkpoint resumed
#     on tp 2 (bit-exact) and on tp 1.
#   - HelixPipe's layer parts at pp 2 x tp 2 and dp 2 x pp 2 x tp 2 (K/V between attention
#     stages, recompute), and 4 training steps as one process's, resumed on tp 2 and tp 1.
# Skipped (with the reason) when the build has no MPI. Emits TAP.
. "$top_srcdir/tests/train/dist_common.sh"

# ---- tensor parallelism with sequence parallelism (parallel.tp): dp x pp x tp ranks, TP
# innermost. The oracle as above: each TP rank's shard of every gradient gathered to rank 0
# within 1e-5 of one process running the plan whole, within 1e-4 of every sample whole
# oracle_tp NAME STRATEGY DP PP TP WHAT [--set ...]: plan and check on dp x pp x tp ranks
oracle_tp() {
  local name=$1 strategy=$2 dp=$3 pp=$4 tp=$5 what=$6; shift 6
  if ! plan "$name" "$strategy" "$dp" "$pp" --set parallel.tp="$tp" "$@"; then
    notok "planner build $what" "$tmp/$name.plan"
    return
  fi
  check_tp "$name" "$dp" "$pp" "$tp" "$what" "$@"
}
# check_tp NAME DP PP TP WHAT [--set ...]: the oracle of NAME.db on dp x pp x tp ranks, and
# the bytes its ranks sent in TP collectives
check_tp() {
  local name=$1 dp=$2 pp=$3 tp=$4 what=$5; shift 5
  ORACLE_TP=$tp oracle "$name" "$dp" "$pp" "$what" "$@"
  # the bytes every rank sent in TP all-gathers and reduce-scatters: the cost model's formula
  # (plans/cost/cost.h lt_cost_tp_bytes), exactly up to rounding; steps with CP groups say so
  local tpl
  tpl=$(grep -E '^tp_bytes' "$tmp/$name.out")
  if [[ "$tpl" =~ ^tp_bytes_rel_err=([0-9.e+-]+)\ tp_bytes_steps=([0-9]+) ]] &&
     awk -v e="${BASH_REMATCH[1]}" 'BEGIN { exit !(e <= 1e-12) }'; then
    ok "TP bytes sent = the cost model's: $what ($tpl)"
  elif [[ "$tpl" = "tp_bytes: not compared"* ]] && sqlite3 "$tmp/$name.db" "SELECT count(*) FROM dp_merges" | grep -qv '^0$'; then
    ok "TP bytes: $what has context-parallel groups, not compared"
  elif [[ "$tpl" = "tp_bytes: not compared"* ]] && [ "$(sqlite3 "$tmp/$name.db" "SELECT max(cp) FROM pipelines")" -gt 1 ]; then
    ok "TP bytes: $what has context-parallel groups, not compared"
  else
    notok "TP bytes sent = the cost model's: $what ('$tpl')" "$tmp/$name.out"
  fi
}
for s in megatron seq1f1b slimpack; do oracle_tp "$s-pp2-tp2" "$s" 1 2 2 "$s, pp 2 x tp 2"; done
oracle_tp tp-dp2-pp2-tp2 slimpack 2 2 2 "slimpack, dp 2 x pp 2 x tp 2"
oracle_tp tp4 megatron 1 1 4 "megatron, tp 4 (4 K/V heads, 1 per rank)" --set model.kv_heads=4
oracle_tp qwen2-pp2-tp2 megatron 1 2 2 "qwen2 (Q/K/V biases) + llama3 RoPE, pp 2 x tp 2" --set model.family=qwen2 \
  --set model.rope_scaling=llama3 --set model.rope_original_max_pos=64
oracle_tp tp-cf-fk chunkflow 1 2 2 "chunkflow with FK ops, pp 2 x tp 2" --set plan.chunk_size=32 --set plan.chunkflow_k=1
oracle_tp tp-merge slimpack 2 1 2 "slimpack, a DP-Merge group of 2 x tp 2 (each TP rank rings its heads' K/V)" \
  --set parallel.max_cp=2 --set plan.global_batch=8 --set plan.context_len=4K --set plan.steps=1
# (the CPU profile with 4 ranks per node: a TP group of 2 must fit a node, cpu-c2 says 1)
sed 's/^gpus_per_node = 1 /gpus_per_node = 4 /' "$top_srcdir/etc/hardware/cpu-c2.ini" >"$tmp/cpu-c2x4.ini"
oracle_tp tp-cp2 megatron 2 1 2 "megatron with static CP 2 x tp 2" --set plan.hardware="$tmp/cpu-c2x4.ini" --set parallel.max_cp=2 \
  --set plan.global_batch=8 --set plan.context_len=4K --set plan.steps=1 --set plan.mem=2G
# every F and B op recomputing its first layer: the recomputed forward's collectives again
force_recompute slimpack-pp2-tp2 tp-rc
check_tp tp-rc 1 2 2 "slimpack, pp 2 x tp 2, every op recomputing one layer"
# HelixPipe's layer parts at tp 2 (docs/trainer.md "HelixPipe layer parts"): each TP rank
# runs its shard of every part, its sequence-parallel rows and its heads crossing the stages;
# a sample's K/V rows (the rank's K/V heads) sent between attention stages, counted; each
# rank holding its TP shard of HelixPipe's part of its stage, its shard of the Q/K/V weights
# sent with the attention's input (model_states against the cost model's helix_parts)
if plan hx-tp helixpipe 1 2 --set parallel.tp=2 --set plan.global_batch=3; then
  check_tp hx-tp 1 2 2 "helixpipe, pp 2 x tp 2 (layer parts, a sample's slices attending on two stages)"
  kv=$(awk '/ helix kv_transfers=/ { split($3, a, "="); s += a[2] } END { print s + 0 }' "$tmp/hx-tp.out")
  if [ "$kv" -gt 0 ]; then ok "helixpipe at pp 2 x tp 2: K/V sent between attention stages ($kv transfers)"
  else notok "helixpipe at pp 2 x tp 2 sends K/V between attention stages (kv_transfers=$kv)" "$tmp/hx-tp.out"; fi
  force_recompute hx-tp hx-tp-rc
  check_tp hx-tp-rc 1 2 2 "helixpipe, pp 2 x tp 2, every op recomputing (HelixPipe 4.4.1)"
  # the chunked MLP (HelixPipe 4.4.2, plan.mlp_chunk): 7 rows of the MLP's intermediates at a
  # time; the recompute stops after the MLP's norm (its collectives as the cost model counts them)
  if plan hx-tp-mc helixpipe 1 2 --set parallel.tp=2 --set plan.global_batch=3 --set plan.mlp_chunk=7; then
    force_recompute hx-tp-mc hx-tp-mc-rc
    check_tp hx-tp-mc-rc 1 2 2 "helixpipe, pp 2 x tp 2, every op recomputing, the MLP 7 rows at a time (4.4.2)"
  else
    notok "planner build helixpipe with plan.mlp_chunk, pp 2 x tp 2" "$tmp/hx-tp-mc.plan"
  fi
else
  notok "planner build helixpipe, pp 2 x tp 2" "$tmp/hx-tp.plan"
fi
oracle_tp hx-dp2-tp2 helixpipe 2 2 2 "helixpipe, dp 2 x pp 2 x tp 2 (the sums over DP, then the stages)"
# a plan for tp 2 on a job of tp 1, and a world that is not dp x pp x tp: refused by name
if "${MPIRUN[@]}" 2 "$TRAINER" check --config "$tmp/m.ini" --set parallel.pp=2 --db "$tmp/megatron-pp2-tp2.db" \
     --data "$tmp/data" >"$tmp/tpl.out" 2>"$tmp/tpl.err"; then
  notok "a tp 2 plan on a tp 1 job refused (exit 0)"
elif grep -q 'the plans are for parallel.tp = 2; this job runs tensor parallelism of 1' "$tmp/tpl.err"; then
  ok "a plan for parallel.tp = 2 on a job of tp 1: refused, naming both"
else
  notok "a tp 2 plan on a tp 1 job refused with a clear reason" "$tmp/tpl.err"
fi
if "${MPIRUN[@]}" 2 "$TRAINER" check --config "$tmp/m.ini" --set parallel.pp=2 --set parallel.tp=2 \
     --db "$tmp/megatron-pp2-tp2.db" --data "$tmp/data" >"$tmp/tpw.out" 2>"$tmp/tpw.err"; then
  notok "2 processes for pp 2 x tp 2 refused (exit 0)"
elif grep -q 'parallel.dp = 1 x parallel.pp = 2 x parallel.tp = 2 is 4 ranks, but 2 processes were started' "$tmp/tpw.err"; then
  ok "2 processes for pp 2 x tp 2: refused, naming the layout and the count"
else
  notok "2 processes for pp 2 x tp 2 refused with a clear reason" "$tmp/tpw.err"
fi


# tensor parallelism on the 2-byte backend: SP rows, the TP all-gathers and reduce-scatters
# (bf16 sums widened to fp32 and rounded once, as NCCL's bf16 reduce-scatter), the
# vocab-parallel cross-entropy on bf16 logits
oracle_bf16 slimpack-pp2-tp2 1 2 "slimpack, pp 2 x tp 2" 2
oracle_bf16 tp-merge 2 1 "slimpack, a DP-Merge group of 2 x tp 2" 2

# Tensor parallelism: 10 steps on pp 2 x tp 2 ranks (plans for tp 2, the same batches) give
# one process's parameters (tp 1); the checkpoint's parts are whole tensors, as at tp 1; a
# run stopped at step 6 resumes on tp 2 bit-exactly and on tp 1 within 1e-5
plan t12 slimpack 1 2 --set plan.steps=10
plan t12tp2 slimpack 1 2 --set parallel.tp=2 --set plan.steps=10
TP=("${T[@]}" --set parallel.pp=2 --set parallel.tp=2 --db "$tmp/t12tp2.db")
"$TRAINER" train "${T[@]}" --set parallel.pp=2 --db "$tmp/t12.db" --out "$tmp/one12" >"$tmp/one12.out" 2>&1
"${MPIRUN[@]}" 4 "$TRAINER" train "${TP[@]}" --out "$tmp/tp" >"$tmp/tp.out" 2>"$tmp/tp.err"
"${MPIRUN[@]}" 4 "$TRAINER" train "${TP[@]}" --set train.checkpoint_every=6 --steps 6 --out "$tmp/tpr" >/dev/null 2>&1
cp -r "$tmp/tpr" "$tmp/tpr1"
"${MPIRUN[@]}" 4 "$TRAINER" train "${TP[@]}" --out "$tmp/tpr" --resume >"$tmp/tpr.out" 2>"$tmp/tpr.err"
"${MPIRUN[@]}" 2 "$TRAINER" train "${T[@]}" --set parallel.pp=2 --db "$tmp/t12.db" --out "$tmp/tpr1" --resume \
  >"$tmp/tpr1.out" 2>"$tmp/tpr1.err"
d=$(params_diff "$tmp/one12/ckpt-00000010.bin" "$tmp/tp/ckpt-00000010.d")
d1=$(params_diff "$tmp/tp/ckpt-00000010.d" "$tmp/tpr1/ckpt-00000010.d")
if [ "$(grep -c '^step=' "$tmp/tp.out")" = 10 ] && [ -n "$d" ] && awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }' &&
   grep -q '^tp = 2$' "$tmp/tp/ckpt-00000010.d/manifest.txt"; then
  ok "train --db on pp 2 x tp 2 ranks: 10 steps, parameters as one process's at tp 1 ($d)"
else
  notok "train --db on pp 2 x tp 2 ranks equals one process (difference '$d')" "$tmp/tp.out" "$tmp/tp.err"
fi
if cmp -s "$tmp/tp/ckpt-00000010.d/stage-0.bin" "$tmp/tpr/ckpt-00000010.d/stage-0.bin" &&
   cmp -s "$tmp/tp/ckpt-00000010.d/stage-1.bin" "$tmp/tpr/ckpt-00000010.d/stage-1.bin" &&
   [ -n "$d1" ] && awk -v d="$d1" 'BEGIN { exit !(d <= 1e-5) }'; then
  ok "a tp 2 checkpoint: resumed on tp 2 bit-exactly, on tp 1 within 1e-5 ($d1)"
else
  notok "a tp 2 checkpoint resumed on tp 2 and tp 1 (difference '$d1')" "$tmp/tpr.err" "$tmp/tpr1.err"
fi

# HelixPipe at tp 2: 4 steps on pp 2 x tp 2 ranks give one process's parameters (its plans
# at tp 1, the same batches); stopped after step 2, resumed on tp 2 bit-exactly and on tp 1
# (2 ranks) within 1e-5
HX1=("${T[@]}" --set plan.steps=4 --set train.steps=4 --set plan.global_batch=3 --set parallel.pp=2)
HX2=("${HX1[@]}" --set parallel.tp=2 --db "$tmp/hxt2.db")
if plan hxt1 helixpipe 1 2 --set plan.steps=4 --set plan.global_batch=3 &&
   plan hxt2 helixpipe 1 2 --set plan.steps=4 --set plan.global_batch=3 --set parallel.tp=2; then
  "$TRAINER" train "${HX1[@]}" --db "$tmp/hxt1.db" --out "$tmp/hx1" >"$tmp/hx1.out" 2>&1
  "${MPIRUN[@]}" 4 "$TRAINER" train "${HX2[@]}" --out "$tmp/hx2" >"$tmp/hx2.out" 2>"$tmp/hx2.err"
  "${MPIRUN[@]}" 4 "$TRAINER" train "${HX2[@]}" --set train.checkpoint_every=2 --steps 2 --out "$tmp/hxr" >/dev/null 2>&1
  cp -r "$tmp/hxr" "$tmp/hxr1"
  "${MPIRUN[@]}" 4 "$TRAINER" train "${HX2[@]}" --out "$tmp/hxr" --resume >"$tmp/hxr.out" 2>"$tmp/hxr.err"
  "${MPIRUN[@]}" 2 "$TRAINER" train "${HX1[@]}" --db "$tmp/hxt1.db" --out "$tmp/hxr1" --resume >"$tmp/hxr1.out" 2>"$tmp/hxr1.err"
  d=$(params_diff "$tmp/hx1/ckpt-00000004.bin" "$tmp/hx2/ckpt-00000004.d")
  d1=$(params_diff "$tmp/hx2/ckpt-00000004.d" "$tmp/hxr1/ckpt-00000004.d")
  if [ "$(grep -c '^step=' "$tmp/hx2.out")" = 4 ] && [ -n "$d" ] && awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }' &&
     cmp -s "$tmp/hx2/ckpt-00000004.d/stage-0.bin" "$tmp/hxr/ckpt-00000004.d/stage-0.bin" &&
     cmp -s "$tmp/hx2/ckpt-00000004.d/stage-1.bin" "$tmp/hxr/ckpt-00000004.d/stage-1.bin" &&
     [ -n "$d1" ] && awk -v d="$d1" 'BEGIN { exit !(d <= 1e-5) }'; then
    ok "train --db of helixpipe plans on pp 2 x tp 2 ranks: as one process ($d), resumed on tp 2 bit-exactly, on tp 1 ($d1)"
  else
    notok "train --db of helixpipe plans on pp 2 x tp 2 (differences '$d', '$d1')" "$tmp/hx2.out" "$tmp/hx2.err" \
      "$tmp/hxr.err" "$tmp/hxr1.err"
  fi
else
  notok "planner build helixpipe for training at tp 1 and tp 2" "$tmp/hxt1.plan" "$tmp/hxt2.plan"
fi

# HelixPipe's parts sharded at tp 2 (fsdp: each TP rank's shard of its stage's part, sharded
# again over the DP ranks, a layer's gathered as its first part op needs it): dp 2 x pp 2 x
# tp 2, 3 steps, as one process running its plans at tp 1 (the same batches; 1e-5); its DP
# bytes and model states between steps the cost model's
HF=("${T[@]}" --set plan.steps=3 --set train.steps=3 --set parallel.dp=2 --set parallel.pp=2 --set parallel.shard=fsdp)
if plan hxf1 helixpipe 2 2 --set plan.steps=3 --set parallel.shard=fsdp &&
   plan hxf helixpipe 2 2 --set plan.steps=3 --set parallel.tp=2 --set parallel.shard=fsdp; then
  "$TRAINER" train "${HF[@]}" --db "$tmp/hxf1.db" --out "$tmp/hxf1" >"$tmp/hxf1.out" 2>&1
  "${MPIRUN[@]}" 8 "$TRAINER" train "${HF[@]}" --set parallel.tp=2 --db "$tmp/hxf.db" --out "$tmp/hxf" >"$tmp/hxf.out" \
    2>"$tmp/hxf.err"
  d=$(params_diff "$tmp/hxf1/ckpt-00000003.bin" "$tmp/hxf/ckpt-00000003.d")
  if [ -n "$d" ] && awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }' && grep -q 'dp_bytes_rel_err=0.000e+00' "$tmp/hxf.err" &&
     grep -q 'model states between steps (parallel.shard = fsdp): .* held_rel_err=0.000e+00' "$tmp/hxf.err"; then
    ok "helixpipe, dp 2 x pp 2 x tp 2, parallel.shard = fsdp: as one process ($d); DP bytes and model states the cost model's"
  else
    notok "helixpipe with fsdp at dp 2 x pp 2 x tp 2 trains as one process (difference '$d')" "$tmp/hxf1.out" "$tmp/hxf.err"
  fi
else
  notok "planner build helixpipe, dp 2 x pp 2 at tp 1 and 2, fsdp" "$tmp/hxf1.plan" "$tmp/hxf.plan"
fi

echo "1..$n"
