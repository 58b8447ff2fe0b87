#!/usr/bin/env bash
# tests/train/dist.sh — the distributed engine (issue 18): the trainer as one MPI process per
# (DP rank, stage), started by mpirun (the Slurm twin, srun --mpi=pmix inside sbatch, is in
# tests/integration/slurm_cluster.sh).
#   - each rank holds its own part (its stage's tensors, its TP shard), read or initialized
#     as such (a damaged part file stops only the ranks of its stage): exactly the cost
#     model's parameters of its stage (trainer check's model_states line, every oracle run);
#   - the oracle across processes: plans of every strategy at (dp, pp) = (1, 2), (2, 1),
#     (2, 2), (1, 4), a slimpack DP-Merge group (dp 4 x pp 2: ring K/V exchange and regrouped
#     backward rows between its members), megatron with static CP 2 and 4 (with recompute),
#     chunkflow's FK passes and forced recompute: the
#     ranks' gradients within 1e-5 of one process running the whole plan, and within 1e-4
#     of every sample run whole (trainer check's own checks; its last line parsed here);
#   - 10 training steps: the parameters equal one process's (bit for bit at dp 1; within
#     1e-5 of the largest parameter at dp 2, where the DP sum adds in another order);
#   - checkpoints in parts with a manifest, read back by `trainer export` as one model;
#   - faults: a rank killed with SIGKILL mid-run fails the job within 30 s naming the rank;
#     --resume from the last complete checkpoint (a half-written one, parts without a
#     manifest, is ignored) ends with the same parts as an uninterrupted run; SIGUSR2
#     stops after the step with a checkpoint and exit status 75, --resume finishes the same;
#   - layout errors: a world that is not dp x pp, a plan for another layout;
#   - HelixPipe's layer parts over 2 and 4 stages and 2 pipelines (trainer check), K/V sent
#     between attention stages (and back to a stage, naive FILO), fp32 and cpu-bf16; train
#     --db of them, resumed;
#   - tensor parallelism (parallel.tp): tests/train/dist_tp.sh, on the same setup
#     (tests/train/dist_common.sh);
#   - the cpu-bf16 test backend (2-byte elements, the GPU's host logic): megatron, seq1f1b,
#     slimpack and chunkflow over 4 ranks, and the DP-Merge group and static CP 2 and 4 over
#     8 (K/V, dK/dV and rows exchanged in bf16 bytes) within 3e-2 relative norm of fp32.
# Skipped (with the reason) when the build has no MPI. Emits TAP.
. "$top_srcdir/tests/train/dist_common.sh" # (exits with its own plan when it skips)

for layout in "1 2" "2 1" "2 2" "1 4"; do
  set -- $layout
  for s in megatron gpipe seq1f1b chunkflow infinipipe slimpack auto; do
    name="$s-dp$1-pp$2"
    if plan "$name" "$s" "$1" "$2"; then oracle "$name" "$1" "$2" "$s, dp $1, pp $2"
    else notok "planner build $s, dp $1, pp $2" "$tmp/$name.plan"; fi
  done
done

# a DP-Merge group: the outlier's members exchange K/V and dK/dV around their ring, and the
# rows of the regrouped backward units that another member's forward shard holds
if plan sp-merge slimpack 4 2 --set parallel.max_cp=2 --set plan.global_batch=8 --set plan.context_len=4K \
     --set plan.steps=1 && [ "$(sqlite3 "$tmp/sp-merge.db" "SELECT count(*) FROM dp_merges")" -gt 0 ]; then
  oracle sp-merge 4 2 "slimpack, dp 4 x pp 2, a DP-Merge group of 2 (its shards in two processes)"
else
  notok "planner build slimpack with a DP-Merge group" "$tmp/sp-merge.plan"
fi
# static context parallelism: megatron's tuned baseline at a 4K context on the CPU profile
# (cpu-c2) takes cp 2, and cp 4 with recompute under a smaller cap: every op over 2 or 4
# processes of a pipeline's stage (a ring of 4). The cap holds the fused head's logits
# block (166 rows of 50257, 32 MiB) on the last stage: 88M - 91M take cp 4 with recompute
for spec in "2G 2" "90M 4"; do
  set -- $spec
  if plan "mg-cp$2" megatron 4 2 --set plan.hardware=cpu-c2 --set parallel.max_cp=4 --set plan.global_batch=8 \
       --set plan.context_len=4K --set plan.steps=1 --set plan.mem="$1" &&
     [ "$(sqlite3 "$tmp/mg-cp$2.db" "SELECT max(cp) FROM pipelines")" = "$2" ]; then
    oracle "mg-cp$2" 4 2 "megatron with static context parallelism $2 (plan.mem $1)"
  else
    notok "planner build megatron with cp $2" "$tmp/mg-cp$2.plan"
  fi
done
if plan cf-fk chunkflow 2 2 --set plan.chunk_size=32 --set plan.chunkflow_k=1 &&
   [ "$(sqlite3 "$tmp/cf-fk.db" "SELECT count(*) FROM plan_ops WHERE kind = 'FK'")" -gt 0 ]; then
  oracle cf-fk 2 2 "chunkflow, 32-token chunks, K = 1 (FK ops)"
else
  notok "planner build chunkflow with FK ops" "$tmp/cf-fk.plan"
fi
# forced recompute (the first layer of every F and B op's range)
for spec in "slimpack-dp2-pp2 2 2" "seq1f1b-dp1-pp4 1 4" "sp-merge 4 2"; do
  set -- $spec
  force_recompute "$1" "$1-rc"
  oracle "$1-rc" "$2" "$3" "${1%%-*} with every op recomputing one layer (dp $2 x pp $3)"
done

# ---- layout errors
if "${MPIRUN[@]}" 3 "$TRAINER" check --config "$tmp/m.ini" --set parallel.dp=2 --set parallel.pp=2 \
     --db "$tmp/megatron-dp2-pp2.db" --data "$tmp/data" >"$tmp/l3.out" 2>"$tmp/l3.err"; then
  notok "3 processes for dp 2 x pp 2 refused (exit 0)"
elif grep -q 'parallel.dp = 2 x parallel.pp = 2 is 4 ranks, but 3 processes were started' "$tmp/l3.err"; then
  ok "3 processes for dp 2 x pp 2: refused, naming the layout and the count"
else
  notok "3 processes for dp 2 x pp 2 refused with a clear reason" "$tmp/l3.err"
fi
if "${MPIRUN[@]}" 4 "$TRAINER" check --config "$tmp/m.ini" --set parallel.dp=1 --set parallel.pp=4 \
     --db "$tmp/megatron-dp2-pp2.db" --data "$tmp/data" >"$tmp/l4.out" 2>"$tmp/l4.err"; then
  notok "a dp 2 x pp 2 plan on a dp 1 x pp 4 job refused (exit 0)"
elif grep -q 'was planned for 2 DP ranks x 2 stages; this job runs 1 x 4' "$tmp/l4.err" && grep -q 'rank [0-9] (dp 0, stage [0-9])' "$tmp/l4.err"; then
  ok "a plan for dp 2 x pp 2 on a dp 1 x pp 4 job: refused by the ranks, naming both layouts"
else
  notok "a plan for another layout refused with a clear reason" "$tmp/l4.err"
fi

# HelixPipe's layer parts over ranks (HelixPipe 4.2; train/exec/transfers.c): each part on
# the stage the helix puts it, the residual stream with the QKV linear's input or with the
# attention output between stages (their gradients back), and where two slices of a sample
# have their attention on two stages, the sample's K/V forward and its dK/dV back: global
# batch 3 at pp 2 cuts a sample in two whose halves' attention runs on both stages (the
# kv_transfers line; with those transfers left out the gradients are off by 0.7). Each rank
# holds HelixPipe's part of its stage (lt_llama_helix_part; the model_states line: the cost
# model's helix_parts exactly), the Q/K/V weights sent with the attention's input and their
# gradients back.
helix() { # NAME DP PP WHAT [TRAINER OPTIONS...]: the oracle, and K/V transfers counted
  local name=$1 dp=$2 pp=$3 what=$4; shift 4
  local ranks=$((dp * pp)) last kv
  if ! "${MPIRUN[@]}" $ranks "$TRAINER" check --config "$tmp/m.ini" --set parallel.dp="$dp" --set parallel.pp="$pp" \
       "$@" --db "$tmp/$name.db" --data "$tmp/data" >"$tmp/$name.out" 2>"$tmp/$name.err"; then
    notok "helixpipe over $ranks ranks: $what" "$tmp/$name.out" "$tmp/$name.err"
    return
  fi
  last=$(tail -1 "$tmp/$name.out")
  kv=$(awk '/ helix kv_transfers=/ { split($3, a, "="); s += a[2] } END { print s + 0 }' "$tmp/$name.out")
  if [[ "$last" =~ ^max_rel_err=([0-9.e+-]+)\ rank_rel_err=([0-9.e+-]+)\ ranks=$ranks\ steps=2(\ backend=cpu-bf16)?$ ]] &&
     awk -v e="${BASH_REMATCH[1]}" -v r="${BASH_REMATCH[2]}" -v b="${BASH_REMATCH[3]}" \
       'BEGIN { exit !(b == "" ? e <= 1e-4 && r <= 1e-5 : e <= 3e-2 && r <= 3e-2 && r > 1e-4) }' &&
     grep -q "^model_states: .*HelixPipe's part of its stage.* params_rel_err=0.000e+00 " "$tmp/$name.out" &&
     { [ "${HELIX_KV:-0}" = 0 ] || [ "$kv" -gt 0 ]; }; then
    ok "helixpipe over $ranks ranks: $what ($last, kv_transfers=$kv)"
  else
    notok "helixpipe over $ranks ranks: $what (last line '$last', kv_transfers=$kv)" "$tmp/$name.out"
  fi
}
if plan hx-dp1-pp2 helixpipe 1 2 --set plan.global_batch=3; then
  HELIX_KV=1 helix hx-dp1-pp2 1 2 "a sample's slices attending on two stages" --set plan.global_batch=3
  HELIX_KV=1 LONGTAIL_TEST_BACKEND=cpu-bf16 helix hx-dp1-pp2 1 2 "the same on the cpu-bf16 backend" \
    --set plan.global_batch=3
else
  notok "planner build helixpipe, dp 1, pp 2" "$tmp/hx-dp1-pp2.plan"
fi
if plan hx-dp2-pp2 helixpipe 2 2; then helix hx-dp2-pp2 2 2 "two pipelines"
else notok "planner build helixpipe, dp 2, pp 2" "$tmp/hx-dp2-pp2.plan"; fi
# the chunked MLP (HelixPipe 4.4.2, plan.mlp_chunk = 7: units of up to 128 tokens in chunks):
# every op recomputing (a recomputed post-attention's MLP remade chunk by chunk in its
# backward), and megatron's whole layers (their kept arrays read a chunk at a time)
if plan hx-mc helixpipe 1 2 --set plan.global_batch=3 --set plan.mlp_chunk=7; then
  force_recompute hx-mc hx-mc-rc
  helix hx-mc-rc 1 2 "the MLP 7 rows at a time, every op recomputing" --set plan.global_batch=3
else
  notok "planner build helixpipe with plan.mlp_chunk" "$tmp/hx-mc.plan"
fi
if plan mg-mc megatron 2 2 --set plan.mlp_chunk=7; then oracle mg-mc 2 2 "megatron, dp 2 x pp 2, the MLP 7 rows at a time"
else notok "planner build megatron with plan.mlp_chunk" "$tmp/mg-mc.plan"; fi
# three stages of four layers with a tied embedding: the last post-attention on stage 0 (4.2)
# where (3 + 1) mod 3 = 1, so stage 0 holds layer 3's MLP, the head and the embedding as one
if plan hx-pp3-tied helixpipe 1 3 --set model.tie_embeddings=true; then
  helix hx-pp3-tied 1 3 "three stages, a tied embedding, the last post-attention on stage 0" \
    --set model.tie_embeddings=true
else
  notok "planner build helixpipe, dp 1, pp 3, tied" "$tmp/hx-pp3-tied.plan"
fi
if plan hx-dp1-pp4 helixpipe 1 4; then
  force_recompute hx-dp1-pp4 hx-dp1-pp4-rc
  helix hx-dp1-pp4-rc 1 4 "four stages (a part's input sent to any stage), every op recomputing"
else
  notok "planner build helixpipe, dp 1, pp 4" "$tmp/hx-dp1-pp4.plan"
fi
# a cap (the CPU profile's 110M) that no round size of the first split fits: the bins split
# one by one (per_bin), and a step under the naive FILO whose sample's four slices attend on
# stages 0, 1, 0, 1 (their dK/dV come back to a stage that already holds some: the rows sent
# on are zeroed there, lt_kvctx_rows)
rt=(--set plan.global_batch=6 --set plan.hardware=cpu-c2 --set plan.mem=110M)
if plan hx-rt helixpipe 1 2 "${rt[@]}" &&
   [ "$(sqlite3 "$tmp/hx-rt.db" "SELECT count(*) FROM steps AS t WHERE t.params LIKE 'folds=1 %per_bin=1' AND
        (SELECT max(n) FROM (SELECT count(*) AS n FROM plan_slices AS p WHERE p.step = t.step AND p.pass = 'F'
         GROUP BY p.sample_id)) >= 3")" -gt 0 ]; then
  HELIX_KV=1 helix hx-rt 1 2 "the bins split one by one, a sample's slices back on a stage (naive FILO)" "${rt[@]}"
else
  notok "planner build helixpipe split bin by bin, naive FILO" "$tmp/hx-rt.plan"
fi
# train --db of HelixPipe plans over 2 ranks (lt_dist.helix_parts: each rank its stage's
# part, updated there): 4 steps equal one process's within 1e-5 (the Q/K/V gradients are
# added in another order), and a run stopped after step 2 and resumed ends with the same
# parts, byte for byte
H=("${T[@]}" --set plan.steps=4 --set train.steps=4 --set plan.global_batch=3 --set parallel.pp=2 --db "$tmp/hx-t.db")
if plan hx-t helixpipe 1 2 --set plan.steps=4 --set plan.global_batch=3; then
  "$TRAINER" train "${H[@]}" --out "$tmp/hx-one" >"$tmp/hx-one.out" 2>&1
  "${MPIRUN[@]}" 2 "$TRAINER" train "${H[@]}" --out "$tmp/hx-mpi" >"$tmp/hx-mpi.out" 2>"$tmp/hx-mpi.err"
  "${MPIRUN[@]}" 2 "$TRAINER" train "${H[@]}" --set train.checkpoint_every=2 --steps 2 --out "$tmp/hx-r" >/dev/null 2>&1
  "${MPIRUN[@]}" 2 "$TRAINER" train "${H[@]}" --out "$tmp/hx-r" --resume >"$tmp/hx-r.out" 2>"$tmp/hx-r.err"
  d=$(params_diff "$tmp/hx-one/ckpt-00000004.bin" "$tmp/hx-mpi/ckpt-00000004.d")
  if [ -n "$d" ] && awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }' && [ "$(grep -c '^step=' "$tmp/hx-mpi.out")" = 4 ] &&
     grep -q "(HelixPipe's part of stage 0: " "$tmp/hx-mpi.out" "$tmp/hx-mpi.err" &&
     cmp -s "$tmp/hx-mpi/ckpt-00000004.d/stage-0.bin" "$tmp/hx-r/ckpt-00000004.d/stage-0.bin" &&
     cmp -s "$tmp/hx-mpi/ckpt-00000004.d/stage-1.bin" "$tmp/hx-r/ckpt-00000004.d/stage-1.bin"; then
    ok "train --db of helixpipe plans on 2 ranks: 4 steps as one process's (relative difference $d), resumed bit-exactly"
  else
    notok "train --db of helixpipe plans on 2 ranks equals one process and resumes (difference '$d')" \
      "$tmp/hx-mpi.out" "$tmp/hx-mpi.err" "$tmp/hx-r.err"
  fi
else
  notok "planner build helixpipe for training, dp 1, pp 2" "$tmp/hx-t.plan"
fi

# plans that mix helixpipe's steps with another strategy's (auto may: here step 1 of a
# helixpipe file replaced by megatron's step 1 of the same samples, with sqlite3): every rank
# holds the whole model, each tensor owned by its part's stage (lt_dist.helix); the oracle,
# and 2 training steps equal to one process's (the owners' tensors sent to the other stage)
M=("${T[@]}" --set plan.steps=2 --set train.steps=2 --set plan.global_batch=3 --set parallel.pp=2 --db "$tmp/mix.db")
if plan mix helixpipe 1 2 --set plan.steps=2 --set plan.global_batch=3 &&
   plan mix-mg megatron 1 2 --set plan.steps=2 --set plan.global_batch=3; then
  sql="ATTACH '$tmp/mix-mg.db' AS mg; BEGIN;"
  for t in $(sqlite3 "$tmp/mix.db" "SELECT m.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
                                    WHERE m.type = 'table' AND p.name = 'step'"); do
    sql="$sql DELETE FROM main.$t WHERE step = 1; INSERT INTO main.$t SELECT * FROM mg.$t WHERE step = 1;"
  done
  sqlite3 "$tmp/mix.db" "$sql COMMIT;"
  "${MPIRUN[@]}" 2 "$TRAINER" check --config "$tmp/m.ini" --set parallel.pp=2 --set plan.global_batch=3 \
    --db "$tmp/mix.db" --data "$tmp/data" >"$tmp/mix.out" 2>"$tmp/mix.err"
  "$TRAINER" train "${M[@]}" --out "$tmp/mix-one" >"$tmp/mix-one.out" 2>&1
  "${MPIRUN[@]}" 2 "$TRAINER" train "${M[@]}" --out "$tmp/mix-mpi" >"$tmp/mix-mpi.out" 2>"$tmp/mix-mpi.err"
  d=$(params_diff "$tmp/mix-one/ckpt-00000002.bin" "$tmp/mix-mpi/ckpt-00000002.d")
  last=$(tail -1 "$tmp/mix.out")
  if [ "$(sqlite3 "$tmp/mix.db" "SELECT group_concat(strategy) FROM steps")" = helixpipe,megatron ] &&
     [[ "$last" =~ ^max_rel_err=([0-9.e+-]+)\ rank_rel_err=([0-9.e+-]+)\ ranks=2\ steps=2$ ]] &&
     awk -v e="${BASH_REMATCH[1]}" -v r="${BASH_REMATCH[2]}" 'BEGIN { exit !(e <= 1e-4 && r <= 1e-5) }' &&
     grep -q '^model_states: .*the whole model.* params_rel_err=0.000e+00 ' "$tmp/mix.out" &&
     [ -n "$d" ] && awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }'; then
    ok "helixpipe mixed with megatron over 2 ranks: the whole model on each, the oracle ($last), 2 steps as one process's ($d)"
  else
    notok "helixpipe mixed with megatron over 2 ranks (last line '$last', difference '$d')" "$tmp/mix.out" \
      "$tmp/mix.err" "$tmp/mix-mpi.err"
  fi
else
  notok "planner build helixpipe and megatron for a mixed plan file" "$tmp/mix.plan" "$tmp/mix-mg.plan"
fi

# srun -n 4 without an MPI plugin (its environment without PMIx): refused, not run 4 times
if env -u PMIX_RANK SLURM_STEP_ID=0 SLURM_NTASKS=4 "$TRAINER" check --config "$tmp/m.ini" --db "$tmp/megatron-dp2-pp2.db" \
     --data "$tmp/data" >"$tmp/srun.out" 2>"$tmp/srun.err"; then
  notok "a task of srun -n 4 without --mpi=pmix refused (exit 0)"
elif grep -q 'one of 4 tasks without an MPI plugin' "$tmp/srun.err" && grep -q 'srun --mpi=pmix' "$tmp/srun.err"; then
  ok "a task of srun -n 4 without an MPI plugin: refused, with the launch to use"
else
  notok "srun without --mpi=pmix refused with a clear reason" "$tmp/srun.err"
fi

# a damaged data shard: the ranks name it and stop the job (MPI_Abort), no hang
cp -r "$tmp/data" "$tmp/bad" && dd if=/dev/urandom of="$tmp/bad/task-00000.tokens.zst" bs=1 count=256 seek=1000 \
  conv=notrunc 2>/dev/null
t0=$(date +%s)
if "${MPIRUN[@]}" 4 "$TRAINER" train --config "$tmp/m.ini" --set parallel.dp=2 --set parallel.pp=2 \
     --db "$tmp/megatron-dp2-pp2.db" --data "$tmp/bad" --out "$tmp/badrun" >"$tmp/bad.out" 2>"$tmp/bad.err"; then
  notok "a damaged shard fails the job (exit 0)" "$tmp/bad.out"
elif [ $(( $(date +%s) - t0 )) -le 30 ] && grep -q 'rank [0-9] (dp [01], stage [01]): step 0, sample [0-9]* (task=0,doc=[0-9]*,tok=[0-9]*): ' "$tmp/bad.err" &&
     grep -q 'stopping every rank of the job (MPI_Abort)' "$tmp/bad.err"; then
  ok "a damaged shard: the ranks name their rank, the step, the sample and the file, and stop the job"
else
  notok "a damaged shard fails the job naming rank and reason" "$tmp/bad.err"
fi

oracle_bf16 megatron-dp2-pp2 2 2 "megatron, dp 2 x pp 2"
oracle_bf16 seq1f1b-dp1-pp4 1 4 "seq1f1b, pp 4"
oracle_bf16 slimpack-dp2-pp2 2 2 "slimpack, dp 2 x pp 2 (asymmetric backward units)"
oracle_bf16 cf-fk 2 2 "chunkflow with FK ops, dp 2 x pp 2"
# context-parallel groups on the 2-byte backend: the DP-Merge group's members and static CP
# 2 and 4 exchange K/V and dK/dV around their ring in bf16 bytes (the dK/dV sums in fp32 by
# the backend, sum_blocks), and the regrouped backward rows and kept inputs in bf16 bytes
oracle_bf16 sp-merge 4 2 "slimpack, dp 4 x pp 2, a DP-Merge group of 2 over processes"
oracle_bf16 mg-cp2 4 2 "megatron with static context parallelism 2"
oracle_bf16 mg-cp4 4 2 "megatron with static context parallelism 4 (recompute: kept inputs regrouped)"

# train --db with train.backend = cuda under a launcher: each rank picks its GPU and attaches
# NCCL; where there is none (this machine, a build without CUDA) every rank says why
if "${MPIRUN[@]}" 4 "$TRAINER" train --config "$tmp/m.ini" --set parallel.dp=2 --set parallel.pp=2 \
     --set train.backend=cuda --db "$tmp/megatron-dp2-pp2.db" --data "$tmp/data" --out "$tmp/cuda-ranks" \
     >"$tmp/cuda-ranks.out" 2>"$tmp/cuda-ranks.err"; then
  notok "train --db, train.backend = cuda over 4 ranks without a GPU (exit 0)" "$tmp/cuda-ranks.out"
elif grep -Eq 'train\.backend = cuda: this longtail was built without CUDA|no CUDA device' "$tmp/cuda-ranks.err"; then
  ok "train --db, train.backend = cuda over 4 ranks without a GPU: each rank says why"
else
  notok "train --db, train.backend = cuda over 4 ranks without a GPU: the reason" "$tmp/cuda-ranks.err"
fi

# train --db on a static-CP plan: every member of a group runs the group's ops and reports
# them under the same (dp_rank, stage, seq); the measured table keeps one row per op
# (first member's start to last member's finish) — writing one per member failed with
# "UNIQUE constraint failed: measured_ops" before
if "${MPIRUN[@]}" 8 "$TRAINER" train --config "$tmp/m.ini" --set parallel.dp=4 --set parallel.pp=2 \
     --set train.steps=1 --db "$tmp/mg-cp4.db" --data "$tmp/data" --out "$tmp/cp4run" \
     >"$tmp/cp4run.out" 2>"$tmp/cp4run.err"; then
  ops=$(sqlite3 "$tmp/mg-cp4.db" "SELECT count(*) FROM plan_ops WHERE step = 0")
  got=$(sqlite3 "$tmp/mg-cp4.db" "SELECT count(*) FROM measured_ops WHERE step = 0")
  if [ -n "$ops" ] && [ "$ops" -gt 0 ] && [ "$got" = "$ops" ]; then
    ok "train --db on a static CP 4 plan over 8 ranks: one measured row per op ($got)"
  else
    notok "train --db on a static CP 4 plan: measured rows ($got) = plan ops ($ops)" "$tmp/cp4run.out"
  fi
else
  notok "train --db on a static CP 4 plan over 8 ranks" "$tmp/cp4run.err"
fi

# ---- training: 10 steps over ranks against one process
for spec in "1 4" "2 2"; do
  set -- $spec
  plan "t$1$2" slimpack "$1" "$2" --set plan.steps=10
  "$TRAINER" train "${T[@]}" --set parallel.dp="$1" --set parallel.pp="$2" --db "$tmp/t$1$2.db" --out "$tmp/one$1$2" \
    >"$tmp/one$1$2.out" 2>&1
  if "${MPIRUN[@]}" $(($1 * $2)) "$TRAINER" train "${T[@]}" --set parallel.dp="$1" --set parallel.pp="$2" \
       --db "$tmp/t$1$2.db" --out "$tmp/mpi$1$2" >"$tmp/mpi$1$2.out" 2>"$tmp/mpi$1$2.err" &&
     [ -f "$tmp/mpi$1$2/ckpt-00000010.d/manifest.txt" ]; then
    d=$(params_diff "$tmp/one$1$2/ckpt-00000010.bin" "$tmp/mpi$1$2/ckpt-00000010.d")
    lines=$(grep -c '^step=' "$tmp/mpi$1$2.out")
    want=1e-5
    [ "$1" = 1 ] && want=0
    if [ "$lines" = 10 ] && [ -n "$d" ] && awk -v d="$d" -v w="$want" 'BEGIN { exit !(d <= w) }'; then
      ok "train --db on dp $1 x pp $2 ranks: 10 steps (one line each, from rank 0), parameters as one process's (relative difference $d <= $want)"
    else
      notok "train --db on dp $1 x pp $2 ranks equals one process ($lines lines, difference '$d')" "$tmp/mpi$1$2.out"
    fi
  else
    notok "train --db on dp $1 x pp $2 ranks, checkpoint in parts" "$tmp/mpi$1$2.err"
  fi
done
if [ "$(ls "$tmp/mpi22/ckpt-00000010.d")" = "$(printf 'manifest.txt\nstage-0.bin\nstage-1.bin')" ] &&
   grep -q '^part = stage-1.bin ' "$tmp/mpi22/ckpt-00000010.d/manifest.txt" && grep -q '^end = 1$' "$tmp/mpi22/ckpt-00000010.d/manifest.txt"; then
  ok "a checkpoint in parts: one file per stage, the manifest naming them"
else
  notok "a checkpoint in parts" "$tmp/mpi22/ckpt-00000010.d/manifest.txt"
fi

# Sharded data parallelism (parallel.shard): zero1, through its older key parallel.zero1,
# keeps the moments of half its stage's tensors on each DP rank: the same parameters, and a
# run stopped after step 6 and resumed ends with the same parts. zero2 (no gradients between
# steps) and fsdp (half the weights between steps, all-gathered layer by layer as the step
# first needs them, the next layer prefetched) train
# bit-identically to zero1, fsdp resumed too; each reports its model states between steps
# against the cost model's and its resident memory falling as it releases them
plan z22 slimpack 2 2 --set plan.steps=10 --set parallel.zero1=true
Z=("${T[@]}" --set parallel.dp=2 --set parallel.pp=2 --set parallel.zero1=true --db "$tmp/z22.db")
"${MPIRUN[@]}" 4 "$TRAINER" train "${Z[@]}" --out "$tmp/z" >"$tmp/z.out" 2>"$tmp/z.err"
"${MPIRUN[@]}" 4 "$TRAINER" train "${Z[@]}" --set train.checkpoint_every=4 --steps 6 --out "$tmp/zr" >/dev/null 2>&1
"${MPIRUN[@]}" 4 "$TRAINER" train "${Z[@]}" --out "$tmp/zr" --resume >"$tmp/zr.out" 2>"$tmp/zr.err"
d=$(params_diff "$tmp/mpi22/ckpt-00000010.d" "$tmp/z/ckpt-00000010.d")
same_parts() { cmp -s "$1/ckpt-00000010.d/stage-0.bin" "$2/ckpt-00000010.d/stage-0.bin" &&
  cmp -s "$1/ckpt-00000010.d/stage-1.bin" "$2/ckpt-00000010.d/stage-1.bin"; }
if grep -q 'parallel.shard = zero1: each DP rank holds the AdamW moments of 1/2' "$tmp/z.err" && [ -n "$d" ] &&
   awk -v d="$d" 'BEGIN { exit !(d <= 1e-6) }' && same_parts "$tmp/z" "$tmp/zr"; then
  ok "ZeRO-1 (parallel.zero1 = true): moments sharded over the DP ranks, parameters as without it ($d), resumed bit-exactly"
else
  notok "ZeRO-1: the same training, resumable (difference '$d')" "$tmp/z.err" "$tmp/zr.err"
fi
# rank 0's resident memory fell by (bytes) releasing the step's buffers, per mode
# (zero1 holds every buffer it had: the collectives run in place, no scratch, so its fall is
# about 0 and may be a page or two below)
fell() { sed -n 's/.*held_rel_err=0\.000e+00; its resident memory fell by \(-\{0,1\}[0-9]*\) bytes.*/\1/p' "$1" | head -1; }
for mode in zero2 fsdp; do
  plan "$mode" slimpack 2 2 --set plan.steps=10 --set parallel.shard=$mode
  S=("${T[@]}" --set parallel.dp=2 --set parallel.pp=2 --set parallel.shard=$mode --db "$tmp/$mode.db")
  "${MPIRUN[@]}" 4 "$TRAINER" train "${S[@]}" --out "$tmp/$mode" >"$tmp/$mode.out" 2>"$tmp/$mode.err"
  if [ $mode = fsdp ]; then
    "${MPIRUN[@]}" 4 "$TRAINER" train "${S[@]}" --set train.checkpoint_every=4 --steps 6 --out "$tmp/fr" >/dev/null 2>&1
    "${MPIRUN[@]}" 4 "$TRAINER" train "${S[@]}" --out "$tmp/fr" --resume >"$tmp/fr.out" 2>"$tmp/fr.err"
  fi
  f0=$(fell "$tmp/z.err") f=$(fell "$tmp/$mode.err")
  if same_parts "$tmp/z" "$tmp/$mode" && { [ $mode != fsdp ] || same_parts "$tmp/z" "$tmp/fr"; } &&
     [ -n "$f0" ] && [ -n "$f" ] && [ "$f" -gt 1000000 ] && [ "$f" -gt "$f0" ]; then
    ok "parallel.shard = $mode: the parameters of zero1 bit for bit$([ $mode = fsdp ] && echo ', resumed too'); model states between steps as the cost model's, resident memory falling by $f bytes (zero1: $f0)"
  else
    notok "parallel.shard = $mode trains as zero1 and releases more (fell '$f', zero1 '$f0')" "$tmp/$mode.err" "$tmp/fr.err"
  fi
done
# the bytes of the gradient synchronisation, counted by the communicator each step, against
# the cost model's lt_cost_dp_bytes (an all-reduce without sharding; a reduce-scatter and an
# all-gather with it)
if grep -q 'dp_bytes_rel_err=0.000e+00' "$tmp/mpi22.err" && grep -q 'dp_bytes_rel_err=0.000e+00' "$tmp/z.err" &&
   grep -q 'dp_bytes_rel_err=0.000e+00' "$tmp/zero2.err" && grep -q 'dp_bytes_rel_err=0.000e+00' "$tmp/fsdp.err"; then
  ok "DP bytes of every step equal the cost model's, parallel.shard none, zero1, zero2 and fsdp"
else
  notok "DP bytes of every step equal the cost model's" "$tmp/mpi22.err" "$tmp/z.err" "$tmp/fsdp.err"
fi
# the plans' shard mode is the run's: their memory check priced it
if "${MPIRUN[@]}" 4 "$TRAINER" train "${T[@]}" --set parallel.dp=2 --set parallel.pp=2 --set parallel.shard=fsdp \
     --db "$tmp/t22.db" --out "$tmp/mis" >"$tmp/mis.out" 2>"$tmp/mis.err"; then
  notok "train --db refuses plans made for another parallel.shard" "$tmp/mis.err"
elif grep -q "parallel.shard = fsdp, but the plans of .*t22.db were made for parallel.shard = none" "$tmp/mis.err"; then
  ok "train --db refuses plans made for another parallel.shard, naming both"
else
  notok "the refusal of plans made for another parallel.shard names both" "$tmp/mis.err"
fi
# HelixPipe's plans sharded (lt_dist.helix_parts): each DP rank of a stage shards its stage's
# part; fsdp gathers a layer's tensors held here as its first part op needs them (a part's
# weights_needed), the next layer with tensors here prefetched. dp 2 x pp 2, 4 steps: zero1
# as shard none (1e-6), zero2 and fsdp as zero1 bit for bit, fsdp resumed too; each mode's
# DP bytes and model states between steps the cost model's (helix_parts) exactly. With
# train.eval_every = 2, the validation loss of the ranks' parts (a scoring plan of layer
# parts: lt_plan_scoring) at steps 0, 2 and 4 within 1e-5 of one process's, every mode
HS=("${T[@]}" --set plan.steps=4 --set train.steps=4 --set parallel.dp=2 --set parallel.pp=2 --set train.eval_every=2)
hs_same() { cmp -s "$1/ckpt-00000004.d/stage-0.bin" "$2/ckpt-00000004.d/stage-0.bin" &&
  cmp -s "$1/ckpt-00000004.d/stage-1.bin" "$2/ckpt-00000004.d/stage-1.bin"; }
hs_vals() { sed -n 's/^step=\([0-9]*\) .*val=\([0-9.]*\).*/\1:\2/p' "$1" | tr '\n' ' '; }
hs_fail=
for mode in none zero1 zero2 fsdp; do
  plan "hs-$mode" helixpipe 2 2 --set plan.steps=4 --set parallel.shard=$mode --set data.holdout=0.2 ||
    hs_fail="$hs_fail planner:$mode"
  "${MPIRUN[@]}" 4 "$TRAINER" train "${HS[@]}" --set parallel.shard=$mode --db "$tmp/hs-$mode.db" --out "$tmp/hs-$mode" \
    >"$tmp/hs-$mode.out" 2>"$tmp/hs-$mode.err" || hs_fail="$hs_fail train:$mode"
  grep -q 'dp_bytes_rel_err=0.000e+00' "$tmp/hs-$mode.err" || hs_fail="$hs_fail dp_bytes:$mode"
  [ $mode = none ] || grep -q "model states between steps (parallel.shard = $mode): .* held_rel_err=0.000e+00" \
    "$tmp/hs-$mode.err" || hs_fail="$hs_fail held:$mode"
done
"$TRAINER" train "${HS[@]}" --db "$tmp/hs-none.db" --out "$tmp/hs-one" >"$tmp/hs-one.out" 2>&1 || hs_fail="$hs_fail one"
want=$(hs_vals "$tmp/hs-one.out")
[ "$(echo "$want" | wc -w)" = 3 ] || hs_fail="$hs_fail one-val"
for mode in none zero1 zero2 fsdp; do
  awk -v a="$want" -v b="$(hs_vals "$tmp/hs-$mode.out")" 'BEGIN { n = split(a, x, " "); if (split(b, y, " ") != n) exit 1
    for (i = 1; i <= n; i++) { split(x[i], p, ":"); split(y[i], q, ":")
      if (p[1] != q[1] || (p[2] - q[2]) ^ 2 > (1e-5 * p[2]) ^ 2) exit 1 } }' || hs_fail="$hs_fail val:$mode"
done
"${MPIRUN[@]}" 4 "$TRAINER" train "${HS[@]}" --set parallel.shard=fsdp --db "$tmp/hs-fsdp.db" --set train.checkpoint_every=2 \
  --steps 2 --out "$tmp/hs-fr" >/dev/null 2>&1
"${MPIRUN[@]}" 4 "$TRAINER" train "${HS[@]}" --set parallel.shard=fsdp --db "$tmp/hs-fsdp.db" --out "$tmp/hs-fr" --resume \
  >"$tmp/hs-fr.out" 2>"$tmp/hs-fr.err" || hs_fail="$hs_fail resume"
d=$(params_diff "$tmp/hs-none/ckpt-00000004.d" "$tmp/hs-zero1/ckpt-00000004.d")
if [ -z "$hs_fail" ] && [ -n "$d" ] && awk -v d="$d" 'BEGIN { exit !(d <= 1e-6) }' && hs_same "$tmp/hs-zero1" "$tmp/hs-zero2" &&
   hs_same "$tmp/hs-zero1" "$tmp/hs-fsdp" && hs_same "$tmp/hs-fsdp" "$tmp/hs-fr" &&
   grep -q "(HelixPipe's part of stage 0: " "$tmp/hs-fsdp.err"; then
  ok "helixpipe, dp 2 x pp 2, sharded parts: zero1 as none ($d), zero2 and fsdp as zero1 bit for bit, fsdp resumed; DP bytes and model states the cost model's; validation (${want% }) as one process's"
else
  notok "helixpipe's parts sharded over DP train as unsharded (failed:$hs_fail; difference '$d')" \
    "$tmp/hs-zero1.err" "$tmp/hs-fsdp.err" "$tmp/hs-fr.err" "$tmp/hs-fsdp.out"
fi
# the GPU shards with zero1 only (Megatron's distributed optimizer): zero2 is refused by name
# before any GPU is opened
if "${MPIRUN[@]}" 4 "$TRAINER" train "${T[@]}" --set parallel.dp=2 --set parallel.pp=2 --set parallel.shard=zero2 \
     --set train.backend=cuda --db "$tmp/zero2.db" --out "$tmp/gz" >"$tmp/gz.out" 2>"$tmp/gz.err"; then
  notok "train --db refuses parallel.shard = zero2 with train.backend = cuda" "$tmp/gz.out"
elif grep -q "parallel.shard = zero2 runs on the CPU backend only; train.backend = cuda shards with zero1" "$tmp/gz.err"; then
  ok "train --db refuses parallel.shard = zero2 with train.backend = cuda by name, before opening a GPU"
else
  notok "the refusal of zero2 on the GPU names the key" "$tmp/gz.err"
fi

# ---- faults: SIGKILL one rank mid-run, then --resume; SIGUSR2
F=("${T[@]}" --set plan.steps=30 --set train.steps=30 --set train.checkpoint_every=5 --set parallel.dp=2
   --set parallel.pp=2 --db "$tmp/f.db")
plan f slimpack 2 2 --set plan.steps=30
"${MPIRUN[@]}" 4 "$TRAINER" train "${F[@]}" --out "$tmp/straight" >"$tmp/straight.out" 2>"$tmp/straight.err"
"${MPIRUN[@]}" 4 "$TRAINER" train "${F[@]}" --out "$tmp/killed" >"$tmp/killed.out" 2>"$tmp/killed.err" &
mpid=$!
for _ in $(seq 1200); do [ -f "$tmp/killed/ckpt-00000010.d/manifest.txt" ] && break; sleep 0.05; done
victim=
for p in $(pgrep -f "trainer train .*--out $tmp/killed"); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then victim=$p; fi
done
t0=$(date +%s)
[ -n "$victim" ] && kill -9 "$victim"
wait "$mpid"
rc=$?
dt=$(( $(date +%s) - t0 ))
if [ -n "$victim" ] && [ "$rc" != 0 ] && [ "$dt" -le 30 ] && grep -qiE 'rank 1 .*(killed|signal 9)|process rank 1' "$tmp/killed.err"; then
  ok "a rank killed with SIGKILL mid-run: the job exits $rc within ${dt} s, naming rank 1"
else
  notok "a killed rank fails the job within 30 s naming it (victim '$victim', exit $rc after ${dt} s)" "$tmp/killed.err"
fi
# a half-written checkpoint (a part, no manifest) at a later step: ignored by --resume
mkdir -p "$tmp/killed/ckpt-00000025.d" && echo garbage >"$tmp/killed/ckpt-00000025.d/stage-0.bin"
"${MPIRUN[@]}" 4 "$TRAINER" train "${F[@]}" --out "$tmp/killed" --resume >"$tmp/resumed.out" 2>"$tmp/resumed.err"
first=$(grep -m1 -o '^step=[0-9]*' "$tmp/resumed.out")
if cmp -s "$tmp/straight/ckpt-00000030.d/stage-0.bin" "$tmp/killed/ckpt-00000030.d/stage-0.bin" &&
   cmp -s "$tmp/straight/ckpt-00000030.d/stage-1.bin" "$tmp/killed/ckpt-00000030.d/stage-1.bin" &&
   [ "$first" != "step=26" ] && [ "$(wc -l <"$tmp/killed/metrics.jsonl")" = 30 ]; then
  ok "--resume after the kill (from its last complete checkpoint, the half-written step 25 ignored: first line $first): every part of checkpoint 30 byte-identical to the uninterrupted run"
else
  notok "--resume after a killed rank gives the uninterrupted run's checkpoint (first line '$first')" "$tmp/resumed.out" "$tmp/resumed.err"
fi
"${MPIRUN[@]}" 4 "$TRAINER" train "${F[@]}" --out "$tmp/usr2" >"$tmp/usr2.out" 2>"$tmp/usr2.err" &
mpid=$!
for _ in $(seq 1200); do [ -f "$tmp/usr2/ckpt-00000005.d/manifest.txt" ] && break; sleep 0.05; done
kill -USR2 "$mpid"
wait "$mpid"
rc=$?
at=$(grep -c '^step=' "$tmp/usr2.out")
saved=no
[ -f "$tmp/usr2/ckpt-$(printf %08d "$at").d/manifest.txt" ] && saved=yes
cp -r "$tmp/usr2" "$tmp/relayout"
"${MPIRUN[@]}" 4 "$TRAINER" train "${F[@]}" --out "$tmp/usr2" --resume >"$tmp/usr2r.out" 2>"$tmp/usr2r.err"
if [ "$rc" = 75 ] && [ "$at" -lt 30 ] && [ "$saved" = yes ] &&
   grep -q 'SIGUSR2: stopped after step' "$tmp/usr2.err" &&
   cmp -s "$tmp/straight/ckpt-00000030.d/stage-0.bin" "$tmp/usr2/ckpt-00000030.d/stage-0.bin" &&
   cmp -s "$tmp/straight/ckpt-00000030.d/stage-1.bin" "$tmp/usr2/ckpt-00000030.d/stage-1.bin"; then
  ok "SIGUSR2: stopped after step $at with its checkpoint, exit 75 (requeue); --resume ends byte-identical"
else
  notok "SIGUSR2: checkpoint, exit 75, resume (exit $rc after $at steps, checkpoint $saved)" "$tmp/usr2.err" "$tmp/usr2r.err"
fi
# the same checkpoint resumed on another layout (pp 4 instead of dp 2 x pp 2): the parts re-shard
plan f14 slimpack 1 4 --set plan.steps=30
if "${MPIRUN[@]}" 4 "$TRAINER" train "${T[@]}" --set plan.steps=30 --set train.steps=30 --set parallel.dp=1 \
     --set parallel.pp=4 --db "$tmp/f14.db" --out "$tmp/relayout" --resume >"$tmp/relayout.out" 2>"$tmp/relayout.err" &&
   grep -q "^step=$((at + 1)) " "$tmp/relayout.out" && grep -q '^step=30 ' "$tmp/relayout.out" &&
   [ -f "$tmp/relayout/ckpt-00000030.d/stage-3.bin" ]; then
  ok "a dp 2 x pp 2 checkpoint resumed by a dp 1 x pp 4 job: the parts re-shard over its four stages"
else
  notok "resume on another layout" "$tmp/relayout.err"
fi
# a rank reads only the part files holding its tensors: with stage-1.bin damaged, the stage 1
# ranks stop on it, naming it, and no stage 0 rank reads it
mkdir -p "$tmp/partread" && cp -r "$tmp/straight/ckpt-00000025.d" "$tmp/partread/"
pf=$tmp/partread/ckpt-00000025.d/stage-1.bin
printf '\377' | dd of="$pf" bs=1 seek=$(($(stat -c %s "$pf") / 2)) conv=notrunc 2>/dev/null
"${MPIRUN[@]}" 4 "$TRAINER" train "${F[@]}" --out "$tmp/partread" --resume >"$tmp/partread.out" 2>"$tmp/partread.err"
if grep -q 'stage 1): damaged: its checksum does not match the manifest.s (.*stage-1.bin)' "$tmp/partread.err" &&
   ! grep -q 'stage 0): damaged' "$tmp/partread.err"; then
  ok "each rank reads its own part of a checkpoint: a damaged stage-1.bin stops the stage 1 ranks, not those of stage 0"
else
  notok "a rank reads only the part files of its stage" "$tmp/partread.err"
fi

echo "1..$n"
exit 0
