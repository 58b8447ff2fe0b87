#!/usr/bin/env bash
# tests/train/calibrate.sh — `trainer calibrate` (train/cmd/calibrate.c): usage errors named;
# a profile of this machine fitted on the nano preset reproduces the measured layer times
# through the cost model (max_rel_err), with the backward / forward factors, the head curve
# and the CPU's memory keys, loads in the planner, and the planner's simulated step of the
# whole model is what the measurements add up to (two layers and the LM head); --check
# prices the measurements with another profile.
PROG=trainer
BIN=${top_builddir:?}/train/trainer
. "${top_srcdir:?}/tests/cli_common.sh"
PLANNER=$top_builddir/plans/planner
export LONGTAIL_HARDWARE_DIR=$top_srcdir/etc/hardware

N=(--set model.preset=nano --set train.threads=2)

# usage errors
check "calibrate needs --out or --check" 2 "" "give --out FILE.ini" -- calibrate "${N[@]}"
check "calibrate: --out must be an .ini file" 2 "" "a hardware profile is a NAME.ini file" \
  -- calibrate "${N[@]}" --out "$tmp/profile.txt"
check "calibrate: --out and --check exclude each other" 2 "" "exclude each other" \
  -- calibrate "${N[@]}" --out "$tmp/never.ini" --check h200
check "calibrate: --tokens must increase" 2 "" "--tokens must increase: 64 after 256" \
  -- calibrate "${N[@]}" --out "$tmp/never.ini" --tokens 256,64
check "calibrate: --tokens must be counts" 2 "" "--tokens" -- calibrate "${N[@]}" --out "$tmp/never.ini" --tokens 64,x
check "calibrate: at most 32 token counts (a profile curve's points)" 2 "" "at most 32" \
  -- calibrate "${N[@]}" --out "$tmp/never.ini" --tokens "$(seq -s, 1 33)"
check "calibrate: --repeat must be positive" 2 "" "--repeat wants a count" \
  -- calibrate "${N[@]}" --out "$tmp/never.ini" --repeat 0
check "calibrate: --mem-gib must be positive" 2 "" "--mem-gib wants a positive size" \
  -- calibrate "${N[@]}" --out "$tmp/never.ini" --mem-gib -4
check "calibrate: --ranks-per-node must be a count" 2 "" "--ranks-per-node wants a count" \
  -- calibrate "${N[@]}" --out "$tmp/never.ini" --ranks-per-node two
check "calibrate without any model is a usage error" 2 "" "which model" -- calibrate --out "$tmp/never.ini"
check "calibrate --check of an unknown profile" 2 "" "unknown hardware profile 'h300'" \
  -- calibrate "${N[@]}" --check h300 --tokens 64
check "calibrate: unknown option" 2 "" "unknown option '--bogus'" -- calibrate "${N[@]}" --out "$tmp/never.ini" --bogus
# train.backend = cuda: on a machine without a GPU (or a build without CUDA) a clear error
# naming the key; with a GPU it would measure (scripts/gpu-check.sh runs that)
if ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; }; then
  check "calibrate: train.backend = cuda without a GPU names why" 2 "" "train.backend = cuda: " \
    -- calibrate "${N[@]}" --set train.backend=cuda --out "$tmp/never.ini" --tokens 64
fi
n=$((n + 1))
if [ ! -e "$tmp/never.ini" ]; then echo "ok $n - $PROG: no profile is written on a usage error"
else echo "not ok $n - $PROG: a usage error left $tmp/never.ini"; fi

# the fit: every token count's layer time comes back through the written profile
check "calibrate nano writes a profile" 0 "^max_rel_err=[0-9.e+-]+ points=3$" "" \
  -- calibrate "${N[@]}" --tokens 64,128,256 --repeat 3 --mem-gib 8 --ranks-per-node 2 --out "$tmp/cpu.ini"
cp "$tmp/out" "$tmp/fit.out"
n=$((n + 1))
err=$(sed -n 's/^max_rel_err=\([^ ]*\) .*/\1/p' "$tmp/fit.out")
if awk -v e="$err" 'BEGIN { exit !(e != "" && e + 0 < 0.05) }'; then
  echo "ok $n - $PROG: fitted profile within 5 % ($err)"
else echo "not ok $n - $PROG: fitted profile max_rel_err '$err' (want < 0.05)"; sed 's/^/# /' "$tmp/fit.out"; fi
n=$((n + 1))
if [ "$(grep -c '^tokens=[0-9]* layer_ms=.* rel_err=' "$tmp/fit.out")" = 3 ] &&
   grep -q '^head tokens=256 measured_ms=[0-9.]* predicted_ms=[0-9.]* rel_err=' "$tmp/fit.out" &&
   grep -q '^bytes_per_token trainer_layer=3864 trainer_kv_layer=512 .* cost_model_layer=4096 ' "$tmp/fit.out" &&
   [ "$(grep -c '^tokens=[0-9]* .* forward_ms=[0-9.]* predicted_forward_ms=[0-9.]* forward_rel_err=' "$tmp/fit.out")" = 3 ] &&
   grep -q '^backward/forward gemm=[0-9.]* attention=[0-9.]* (fitted' "$tmp/fit.out" &&
   grep -q '^bwd_gemm_factor = [0-9.e-]* ; \[measured: ' "$tmp/cpu.ini" &&
   grep -q '^bwd_attention_factor = [0-9.e-]* ; \[measured: ' "$tmp/cpu.ini" &&
   grep -q '^head_efficiency = 64:[0-9.e-]*, 128:[0-9.e-]*, 256:[0-9.e-]*$' "$tmp/cpu.ini" &&
   grep -q '^logit_bytes = 0 ' "$tmp/cpu.ini" && grep -q '^reserved_gib = 0 ' "$tmp/cpu.ini" &&
   grep -q '^gemm_efficiency = 64:[0-9.e-]*, 128:[0-9.e-]*, 256:' "$tmp/cpu.ini" &&
   grep -q '^attention_efficiency = 64:' "$tmp/cpu.ini" &&
   grep -q '^act_bytes = 4 ' "$tmp/cpu.ini" && grep -q '^hbm_gib = 8 ' "$tmp/cpu.ini" &&
   grep -q '^gpus_per_node = 2 ' "$tmp/cpu.ini" && grep -q '^name = cpu$' "$tmp/cpu.ini" &&
   grep -q '^peak_bf16_tflops = [0-9.e-]* ; \[measured: trainer calibrate, ' "$tmp/cpu.ini" &&
   grep -q '^p2p_inter_gbps = .*\[not measured' "$tmp/cpu.ini"; then
  echo "ok $n - $PROG: a point per token count and the head's, the factors, bytes per token (nano: 966 floats a layer), the options, sources"
else
  echo "not ok $n - $PROG: the written profile lacks a key or a point"; sed 's/^/# /' "$tmp/cpu.ini"
fi

# the planner reads it as plan.hardware; its 1-stage gpipe step of the whole nano model (an F
# over both layers and the fused head, which runs the head's backward too, then a B over the
# layers) is 2 x the layer's F + B + the head's F + B, as measured at 256 tokens
"$PLANNER" simulate --schedule gpipe --stages 1 --lengths 256 --set model.preset=nano \
  --set plan.hardware="$tmp/cpu.ini" --no-timeline >"$tmp/sim.out" 2>&1
n=$((n + 1))
step=$(sed -n 's/^step_time=\([0-9.]*\) .*/\1/p' "$tmp/sim.out")
layer=$(sed -n 's/^tokens=256 layer_ms=\([0-9.]*\) .*/\1/p' "$tmp/fit.out")
head=$(sed -n 's/^head tokens=256 measured_ms=\([0-9.]*\) .*/\1/p' "$tmp/fit.out")
if awk -v s="$step" -v l="$layer" -v hd="$head" 'BEGIN {
     want = 2 * l + hd
     if (s == "" || l == "" || hd == "") exit 1
     d = s - want; if (d < 0) d = -d
     exit !(d <= 0.001 * want) }'; then
  echo "ok $n - $PROG: planner simulate's nano step ($step ms) = 2 layers + head from the measurements"
else
  echo "not ok $n - $PROG: planner simulate step_time '$step' ms vs layer $layer ms, head $head ms"
  sed 's/^/# /' "$tmp/sim.out"
fi

# --check: the same measurements priced with a GPU profile are far off (its predictions are
# a thousand times too fast); with the calibrated one nothing is asserted on the error (this
# machine's speed differs between two runs when it is busy), only that it is priced
check "calibrate --check h200 runs" 0 "^max_rel_err=[0-9.e+-]+ points=2$" "" \
  -- calibrate "${N[@]}" --tokens 64,256 --repeat 1 --check h200
n=$((n + 1))
err=$(sed -n 's/^max_rel_err=\([^ ]*\) .*/\1/p' "$tmp/out")
if awk -v e="$err" 'BEGIN { exit !(e != "" && e + 0 > 0.9) }'; then
  echo "ok $n - $PROG: h200 is far from this CPU ($err)"
else echo "not ok $n - $PROG: --check h200 gave max_rel_err '$err' (want > 0.9)"; fi
check "calibrate --check prices with a written profile, naming it" 0 "^profile cpu \(.*cpu.ini\)$" "" \
  -- calibrate "${N[@]}" --tokens 64,256 --repeat 1 --check "$tmp/cpu.ini"

# under mpirun -n 2 (a build with MPI: $MPI_ALLREDUCE is set then) P2P is a ping-pong of ranks 0
# and 1, and only rank 0 writes; skipped where the launcher itself cannot start two processes
n=$((n + 1))
MPIRUN=(mpirun -n 2 --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
if [ -z "${MPI_ALLREDUCE:-}" ] || ! command -v mpirun >/dev/null; then
  echo "ok $n - $PROG: calibrate under mpirun # SKIP no MPI in this build"
elif ! timeout 60 "${MPIRUN[@]}" true >/dev/null 2>&1; then
  echo "ok $n - $PROG: calibrate under mpirun # SKIP mpirun cannot start 2 processes here"
# Open MPI's own allocations are reported as leaks by LeakSanitizer: not ours to check
elif ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" timeout 300 "${MPIRUN[@]}" "$BIN" calibrate "${N[@]}" \
       --set train.threads=1 --tokens 64 --repeat 1 --out "$tmp/mpi.ini" >"$tmp/mpi.out" 2>&1 &&
     [ "$(grep -c '^max_rel_err=' "$tmp/mpi.out")" = 1 ] &&
     grep -q '^p2p_intra_gbps = [0-9.e+-]* ; \[measured: .*MPI ping-pong of 64 MiB between ranks 0 and 1 (of 2)' \
       "$tmp/mpi.ini" &&
     grep -q '^;   contention: the 64-token layer [0-9.]* ms alone, [0-9.]* ms with 2 ranks of the node at once' \
       "$tmp/mpi.ini" &&
     { grep -q '^;  *(medians of 3, alternating): compute_contention 0.0000 (not written: none measured)$' "$tmp/mpi.ini" ||
       grep -q '^compute_contention = 0*\.[0-9]* ; \[measured: .*the 64-token layer .* with 2 ranks of the node' \
         "$tmp/mpi.ini"; }; then
  echo "ok $n - $PROG: calibrate under mpirun: P2P from the ping-pong, the compute contention, one rank reports"
else
  echo "not ok $n - $PROG: calibrate under mpirun"; sed 's/^/# /' "$tmp/mpi.out" | head -20
fi
finish
