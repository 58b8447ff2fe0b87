#!/usr/bin/env bash
# tests/kernels/gpu_check.sh — scripts/gpu-check.sh on a machine without a GPU stops at
# once with exit status 3 and a clear "no GPU" message (and a report saying nothing was
# checked), never pretending; bad usage is exit 2; bench/gpu/run.sh refuses bad usage.
# Then its run mode with a stand-in GPU (an `nvidia-smi` that lists an H100) and a stand-in
# build (--build-dir: shell scripts in place of the programs): OUT receives only its four
# files, a step that hangs is cut by its limit and reported TIMEOUT while the next steps
# run, a spent --budget marks the remaining steps NOT RUN (deadline), a SIGTERM leaves a
# finished report and no process behind, and no check that does not exist is reported. The
# realistic shapes give a row per figure (a skipped length is NOT RUN); the sanitizer pass
# with a stand-in compute-sanitizer that is clean, one that reports errors, one that refuses
# the device, and none (the run with synchronized launches instead).
# Skipped on a machine with a GPU (there the script does its real work: docs/gpu.md).
# Emits TAP.
: "${top_srcdir:?}"
SCRIPT=$top_srcdir/scripts/gpu-check.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lt-gpucheck.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() {
  n=$((n + 1)); echo "not ok $n - $1"
  shift
  for f in "$@"; do [ -f "$f" ] && sed 's/^/# /' "$f" | tail -15; done
}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "1..0 # SKIP this machine has a GPU: run scripts/gpu-check.sh itself"
  exit 0
fi

if bash -n "$SCRIPT" && bash -n "$top_srcdir/bench/gpu/run.sh"; then ok "the scripts parse (bash -n)"
else notok "the scripts parse (bash -n)"; fi

# no nvidia-smi at all (PATH without it), then an nvidia-smi that lists no GPU
for case in absent empty; do
  mkdir -p "$tmp/bin-$case"
  if [ "$case" = empty ]; then
    printf '#!/bin/sh\necho "No devices were found"\nexit 6\n' >"$tmp/bin-$case/nvidia-smi"
    chmod +x "$tmp/bin-$case/nvidia-smi"
    want="nvidia-smi lists no GPU"
  else
    want="nvidia-smi is not installed"
  fi
  for t in bash date git mkdir cat dirname nproc grep sed; do
    p=$(command -v "$t") && ln -sf "$p" "$tmp/bin-$case/$t"
  done
  OUT="$tmp/out-$case" PATH="$tmp/bin-$case" bash "$SCRIPT" >"$tmp/$case.out" 2>"$tmp/$case.err"
  rc=$?
  if [ "$rc" = 3 ] && grep -q "gpu-check: error: no GPU on this machine ($want)" "$tmp/$case.err" &&
     grep -q "result: \*\*no GPU\*\* ($want): nothing was checked" "$tmp/out-$case/report.md"; then
    ok "no GPU ($case nvidia-smi): exit 3, the reason on stderr and in OUT/report.md"
  else
    notok "no GPU ($case nvidia-smi): exit 3, the reason on stderr and in OUT/report.md (rc=$rc)" \
      "$tmp/$case.err" "$tmp/out-$case/report.md"
  fi
done

OUT="$tmp/out-usage" bash "$SCRIPT" --bogus >"$tmp/usage.out" 2>"$tmp/usage.err"
rc=$?
if [ "$rc" = 2 ] && grep -q "unknown option '--bogus'" "$tmp/usage.err"; then ok "an unknown option: exit 2, named"
else notok "an unknown option: exit 2, named (rc=$rc)" "$tmp/usage.err"; fi

bash "$top_srcdir/bench/gpu/run.sh" --steps 3 >"$tmp/bench.out" 2>"$tmp/bench.err"
rc=$?
if [ "$rc" = 2 ] && grep -q "give --build-dir DIR" "$tmp/bench.err"; then ok "bench/gpu/run.sh without --build-dir: exit 2"
else notok "bench/gpu/run.sh without --build-dir: exit 2 (rc=$rc)" "$tmp/bench.err"; fi

# ---------------------------------------------------------------- a stand-in GPU and build
sbin=$tmp/bin-gpu fake=$tmp/fake-build
mkdir -p "$sbin" "$fake"/{train,plans,dataprep,tests/kernels,tests/train,bench/gpu,dev/cuda} "$tmp/tmpdir"
cat >"$sbin/nvidia-smi" <<'SH'
#!/bin/sh
case "$*" in
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)" ;;
  *query-gpu=name*) echo "NVIDIA H100 80GB HBM3" ;;
  *query-gpu=memory.total*) echo "81559 MiB" ;;
  *query-gpu=driver_version*) echo "550.54.15" ;;
  *) echo "stand-in nvidia-smi: $*" ;;
esac
SH
echo '#define HAVE_CUDA 1' >"$fake/buildconfig.h"
seq 100 50 1500 >"$fake/lengths.txt"
# standin FILE LINE...: a shell script of these lines
standin() { local f=$1; shift; { echo '#!/bin/sh'; printf '%s\n' "$@"; } >"$f"; chmod +x "$f"; }
# a program that hangs when STANDIN_HANG names a folder (its pid written there first)
hang='if [ -n "${STANDIN_HANG:-}" ]; then echo $$ >"$STANDIN_HANG/$(basename "$0").pid"; exec sleep 1000; fi'
# arg NAME ARGS...: the value of option NAME in ARGS
arg='arg() { n=$1; shift; while [ $# -gt 1 ]; do [ "$1" = "$n" ] && { echo "$2"; return; }; shift; done; }'
standin "$fake/tests/kernels/test_cuda_hang" "$hang" 'echo "1..2"; echo "ok 1 - stand-in"; echo "ok 2 - stand-in"'
for t in tests/kernels/test_cuda_kernels tests/kernels/test_gpu_probe tests/train/test_comm_device; do
  standin "$fake/$t" 'echo "1..1"; echo "ok 1 - stand-in"'
done
# the attention test: its environment in its output (the sanitizer pass's fallback sets it)
standin "$fake/tests/kernels/test_cuda_attention" 'echo "1..2"; echo "ok 1 - stand-in"; echo "ok 2 - stand-in"' \
  'echo "# sync=${LONGTAIL_CUDA_SYNC:-} blocking=${CUDA_LAUNCH_BLOCKING:-}"'
# --shapes: the figure lines; STANDIN_SHAPES=skip: the longest attention skipped for time
standin "$fake/bench/gpu/bench_kernels" 'if [ "${1:-}" != --shapes ]; then echo "attn_tflops=420.0 gemm_tflops=640.0 ratio=0.656"; exit 0; fi' \
  'echo "layer_gemm name=wq T=8192 in=2048 out=2048 fwd_ms=0.050 bwd_ms=0.100 fwd_tflops=550.0 bwd_tflops=550.0"' \
  'echo "layer_gemms T=8192 ms=2.000 tflops=560.0 (the seven linears, forward + backward)"' \
  'echo "lm_head T=8192 V=50257 ld=50304 C=2048 block=166 gemm_fwd_ms=3.000 xent_ms=1.000 bwd_ms=6.000 ms=10.000 tflops=506.0 loss=10.9 ln_v=10.8249"' \
  'for t in 8192 65536 131072; do echo "attention T=$t samples=1 nh=32 nkv=4 hd=64 runs=3 fwd_ms=1.0 bwd_ms=2.5 fwd_tflops=300.0 fwdbwd_tflops=290.0 out_rel_err=3.00e-03 lse_rel_err=1.00e-06"; done' \
  'if [ "${STANDIN_SHAPES:-}" = skip ]; then echo "attention T=262144 samples=1 nh=32 nkv=4 hd=64 skipped=time (predicted 40.0 s a run, 12.0 s left)"; a=skipped' \
  'else echo "attention T=262144 samples=1 nh=32 nkv=4 hd=64 runs=1 fwd_ms=9.0 bwd_ms=22.5 fwd_tflops=300.0 fwdbwd_tflops=290.0 out_rel_err=3.00e-03 lse_rel_err=1.00e-06"; a=290.0; fi' \
  'echo "shapes: layer_gemm_tflops=560.0 lm_head_tflops=506.0 attn8k_tflops=290.0 attn64k_tflops=290.0 attn128k_tflops=290.0 attn256k_tflops=$a"'
# stand-in compute-sanitizers (--tool TOOL --print-limit N PROGRAM): clean; memcheck reporting
# errors (racecheck clean); one that refuses the device, as on some sandboxed machines
for kind in clean error refuse; do
  mkdir -p "$tmp/san-$kind"
  standin "$tmp/san-$kind/compute-sanitizer" 'tool=$2; prog=$5; echo "========= COMPUTE-SANITIZER"' \
    "kind=$kind" \
    'if [ $kind = refuse ]; then echo "========= Error: Device not supported"; echo "# skip: no CUDA device"; echo "========= ERROR SUMMARY: 1 error"; exit 1; fi' \
    '"$prog"; rc=$?' \
    'if [ $tool = racecheck ]; then echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"; exit $rc; fi' \
    'if [ $kind = error ]; then echo "========= Invalid __global__ write of size 2 bytes"; echo "=========     at void dq_kernel<64>(Params)+0x1a0 in attention.cu:321"; echo "=========     by thread (5,0,0) in block (1,0,0)"; echo "========= ERROR SUMMARY: 3 errors"; exit $rc; fi' \
    'echo "========= ERROR SUMMARY: 0 errors"; exit $rc'
done
standin "$fake/dev/cuda/rmsnorm" 'echo "v1 ok"; echo "v1 0.1 ms"'
# a chatty program: 3.2 MB of output, of which gpu-check.log keeps 512 KiB
standin "$fake/dev/cuda/gemm" 'yes "v1 0.1 ms timing" | head -n 200000' 'echo "v1 ok"'
# encode: one token for each JSONL line of its last argument (the words bench/gpu/run.sh
# counts to cut its documents); run: an output folder
cat >"$fake/dataprep/dataprep" <<SH
#!/bin/sh
$arg
if [ "\$1" = encode ]; then for f; do :; done; awk '{ print 1 }' "\$f"; exit 0; fi
mkdir -p "\$(arg --out "\$@")"
SH
# the planner's database and the trainer's metrics: what bench/gpu/run.sh reads
cat >"$fake/plans/planner" <<SH
#!/bin/sh
$arg
db=\$(arg --db "\$@") steps=\$(arg --steps "\$@")
python3 - "\$db" "\${steps:-2}" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE plan_slices (step, sample_id, tok_begin, tok_end, pass)")
db.execute("CREATE TABLE step_summary (step, peak_mem_bytes)")
db.execute("CREATE TABLE step_measured (step, peak_bytes)")
for s in range(int(sys.argv[2])):
    db.execute("INSERT INTO plan_slices VALUES (?, 0, 0, 8192, 'F')", (s,))
    db.execute("INSERT INTO step_summary VALUES (?, 1000)", (s,))
    db.execute("INSERT INTO step_measured VALUES (?, 1000)", (s,))
db.commit()
PY
SH
cat >"$fake/train/trainer" <<SH
#!/bin/sh
$arg
cmd=\$1; shift
case \$cmd in
  calibrate) $hang
    printf '[hardware]\\nname = stand-in\\n' >"\$(arg --out "\$@")" ;;
  check) echo "trainer check: max_rel_err=0.001 (stand-in)" ;;
  train) out=\$(arg --out "\$@") steps=\$(arg --steps "\$@"); mkdir -p "\$out"
    for s in \$(seq 1 "\${steps:-2}"); do
      echo "{\\"step\\": \$s, \\"plan_step\\": \$((s - 1)), \\"seconds\\": 0.1, \\"tokens\\": 8192, \\"predicted_ms\\": 100}"
    done >"\$out/metrics.jsonl" ;;
esac
SH
chmod +x "$sbin/nvidia-smi" "$fake/dataprep/dataprep" "$fake/plans/planner" "$fake/train/trainer"

# gpucheck NAME ARGS...: the run mode on the stand-ins, OUT=$tmp/out-NAME; rc in $rc, the
# seconds it took in $secs
gpucheck() {
  local name=$1; shift
  local t0=$SECONDS
  OUT="$tmp/out-$name" TMPDIR="$tmp/tmpdir" PATH="$sbin:$PATH" \
    LONGTAIL_COMPUTE_SANITIZER="${SANITIZER:-$tmp/san-clean/compute-sanitizer}" bash "$SCRIPT" --build-dir "$fake" "$@" \
    >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$? secs=$((SECONDS - t0))
}
# out_ok NAME FILE...: OUT holds exactly FILE..., plain files, under 1 MiB in all
out_ok() {
  local dir=$tmp/out-$1; shift
  [ "$(cd "$dir" && find . -mindepth 1 | sed 's|^\./||' | sort | tr '\n' ' ')" = "$(printf '%s\n' "$@" | sort | tr '\n' ' ')" ] &&
    [ "$(du -sk "$dir" | cut -f1)" -lt 1024 ]
}
has_row() { grep -q -F "| $2 | $3 |" "$tmp/out-$1/report.md"; } # has_row NAME CHECK RESULT
gone() { for f in "$@"; do [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && { kill "$(cat "$f")"; return 1; }; done; return 0; }

# (a) a whole run: OUT holds the four files only, under 1 MiB (a 3.2 MB output is cut to
# 512 KiB in the log); the work folder is gone; (d) no row for a program that does not exist
gpucheck all
if out_ok all report.md gpu-check.log results.tsv h100.ini && [ -z "$(ls -A "$tmp/tmpdir")" ] &&
   has_row all tests/kernels/test_cuda_hang PASS && has_row all "attention fwd+bwd vs cuBLASLt GEMM" PASS &&
   has_row all "trainer calibrate (cuda) -> h100.ini" PASS && has_row all "trainer check on the GPU (slimpack, small)" PASS &&
   has_row all dev/cuda/gemm PASS && has_row all "tp 2 and zero1 over NCCL" "NEEDS 2 GPUS" &&
   has_row all "1B layer GEMMs, forward + backward (8K unit)" PASS &&
   has_row all "LM head + cross-entropy, V = 50257, padded rows (8K unit)" PASS &&
   has_row all "attention fwd+bwd at T = 65536 (one causal sample)" PASS &&
   has_row all "attention fwd+bwd at T = 262144 (one causal sample)" PASS &&
   has_row all "compute-sanitizer --tool memcheck tests/kernels/test_cuda_attention" PASS &&
   has_row all "compute-sanitizer --tool racecheck tests/kernels/test_cuda_attention" PASS &&
   grep -q -F 'attention T=131072 samples=1 nh=32 nkv=4 hd=64 runs=3 fwd_ms=1.0' "$tmp/out-all/results.tsv" &&
   [ "$rc" = 0 ] &&
   grep -q '^Summary: ' "$tmp/out-all/report.md" && [ "$(wc -l <"$tmp/out-all/results.tsv")" -ge 12 ] &&
   grep -q '^\[gpu-check: .* bytes cut' "$tmp/out-all/gpu-check.log"; then
  ok "a run on a stand-in GPU: OUT holds report.md, gpu-check.log, results.tsv, h100.ini only (the work in \$TMPDIR, removed)"
else
  notok "a run on a stand-in GPU: OUT holds report.md, gpu-check.log, results.tsv, h100.ini only (rc=$rc)" \
    "$tmp/all.err" "$tmp/out-all/report.md"
  ls -laR "$tmp/out-all" "$tmp/tmpdir" | sed 's/^/# /'
fi
if ! grep -q -E 'test_cuda_step|MISSING' "$tmp/out-all/report.md"; then ok "no MISSING row (no test_cuda_step)"
else notok "no MISSING row (no test_cuda_step)" "$tmp/out-all/report.md"; fi
if grep -q -E '^\| 1B Llama (benchmark|MFU)' "$tmp/out-all/report.md" && ! grep -q 'NOT RUN' "$tmp/out-all/report.md"; then
  ok "the 1B benchmark ran and every step has its row (none NOT RUN)"
else notok "the 1B benchmark ran and every step has its row (none NOT RUN)" "$tmp/out-all/report.md"; fi

# (b) a test program and calibrate hang: each is stopped at its limit, reported TIMEOUT with
# the limit, and the next steps run; no process is left
mkdir -p "$tmp/hang"
STANDIN_HANG=$tmp/hang gpucheck hang --limit tests=3 --limit calibrate=2
if [ "$rc" = 1 ] && [ "$secs" -lt 25 ] && out_ok hang report.md gpu-check.log results.tsv &&
   grep -q -F '| tests/kernels/test_cuda_hang | TIMEOUT | stopped after 3 s' "$tmp/out-hang/report.md" &&
   grep -q -F "| trainer calibrate (cuda) -> h100.ini | TIMEOUT | stopped after 2 s, the step's limit (step 'calibrate')" \
     "$tmp/out-hang/report.md" &&
   has_row hang tests/kernels/test_cuda_kernels PASS && has_row hang tests/kernels/test_gpu_probe PASS &&
   has_row hang "trainer check on the GPU (slimpack, small)" PASS && has_row hang dev/cuda/rmsnorm PASS &&
   grep -q '^Summary: .*(2 timed out)' "$tmp/out-hang/report.md" &&
   [ -f "$tmp/hang/test_cuda_hang.pid" ] && [ -f "$tmp/hang/trainer.pid" ] &&
   gone "$tmp/hang/test_cuda_hang.pid" "$tmp/hang/trainer.pid"; then
  ok "a hanging step is stopped at its limit (TIMEOUT, exit 1) and the next steps run (${secs} s)"
else
  notok "a hanging step is stopped at its limit (TIMEOUT, exit 1) and the next steps run (rc=$rc, ${secs} s)" \
    "$tmp/hang.err" "$tmp/out-hang/report.md"
fi

# (c) a --budget spent during the first test: it is cut at what is left, the rest NOT RUN
rm -f "$tmp/hang"/*.pid
STANDIN_HANG=$tmp/hang gpucheck budget --budget 6 --limit tests=4
if [ "$rc" = 1 ] && [ "$secs" -lt 15 ] && out_ok budget report.md gpu-check.log results.tsv &&
   has_row budget tests/kernels/test_cuda_hang TIMEOUT &&
   has_row budget tests/kernels/test_gpu_probe "NOT RUN (deadline)" &&
   has_row budget "attention fwd+bwd vs cuBLASLt GEMM" "NOT RUN (deadline)" &&
   grep -q -F '| 1B Llama benchmark (4 steps, 8K units, megatron packing) | NOT RUN (deadline) |' "$tmp/out-budget/report.md" &&
   has_row budget "trainer calibrate (cuda) -> h100.ini" "NOT RUN (deadline)" &&
   has_row budget dev/cuda/rmsnorm "NOT RUN (deadline)" &&
   has_row budget "realistic shapes (bench_kernels --shapes: 1B layer GEMMs, LM head V = 50257, attention 8K-256K)" "NOT RUN (deadline)" &&
   has_row budget "compute-sanitizer --tool memcheck tests/kernels/test_cuda_attention" "NOT RUN (deadline)" &&
   has_row budget tests/kernels/test_cuda_attention PASS &&
   [ "$(grep -c '| PASS |' "$tmp/out-budget/report.md")" = 2 ] && gone "$tmp/hang/test_cuda_hang.pid"; then
  ok "a spent --budget: the steps after it are NOT RUN (deadline), none passed, exit 1 (${secs} s)"
else
  notok "a spent --budget: the steps after it are NOT RUN (deadline), none passed, exit 1 (rc=$rc, ${secs} s)" \
    "$tmp/budget.err" "$tmp/out-budget/report.md"
fi

# (e) the sanitizer reports errors: the memcheck row FAILs with the count and the first error
# (its kernel), racecheck still runs and passes; a skipped attention length is NOT RUN
SANITIZER=$tmp/san-error/compute-sanitizer STANDIN_SHAPES=skip gpucheck sanerr
if [ "$rc" = 1 ] &&
   grep -q -F '| compute-sanitizer --tool memcheck tests/kernels/test_cuda_attention | FAIL | 3 error(s) reported; the first: Invalid __global__ write of size 2 bytes at void dq_kernel<64>(Params)+0x1a0 in attention.cu:321 |' \
     "$tmp/out-sanerr/report.md" &&
   has_row sanerr "compute-sanitizer --tool racecheck tests/kernels/test_cuda_attention" PASS &&
   grep -q -F '| attention fwd+bwd at T = 262144 (one causal sample) | NOT RUN (skipped) | attention T=262144 samples=1 nh=32 nkv=4 hd=64 skipped=time' \
     "$tmp/out-sanerr/report.md" &&
   has_row sanerr "attention fwd+bwd at T = 131072 (one causal sample)" PASS &&
   grep -q '^Summary: 1 failed or below target (0 timed out), 0 missing, 1 not run,' "$tmp/out-sanerr/report.md"; then
  ok "a sanitizer error: FAIL with the count and the first error, racecheck still runs; a skipped length is NOT RUN"
else
  notok "a sanitizer error: FAIL with the count and the first error, racecheck still runs; a skipped length is NOT RUN (rc=$rc)" \
    "$tmp/sanerr.err" "$tmp/out-sanerr/report.md"
fi

# (f) no compute-sanitizer, and (g) one that refuses the device: the attention test runs once
# with CUDA_LAUNCH_BLOCKING=1 LONGTAIL_CUDA_SYNC=1 instead, saying why
for case in none refuse; do
  san=none want="no compute-sanitizer (PATH, /usr/local/cuda, the CUDA wheels), so instead:"
  [ "$case" = refuse ] && san=$tmp/san-refuse/compute-sanitizer \
    want="compute-sanitizer ($san) refused the device here (Error: Device not supported), so instead:"
  SANITIZER=$san gpucheck "san-$case"
  if [ "$rc" = 0 ] &&
     grep -q -F "| tests/kernels/test_cuda_attention with CUDA_LAUNCH_BLOCKING=1 LONGTAIL_CUDA_SYNC=1 | PASS | $want every launch synchronized: 0 CUDA errors, 2 tests pass |" \
       "$tmp/out-san-$case/report.md" &&
     ! grep -q '^| compute-sanitizer --tool' "$tmp/out-san-$case/report.md" &&
     grep -q '^# sync=1 blocking=1$' "$tmp/out-san-$case/gpu-check.log"; then
    ok "sanitizer $case: the attention test with synchronized launches instead, the reason in its row"
  else
    notok "sanitizer $case: the attention test with synchronized launches instead, the reason in its row (rc=$rc)" \
      "$tmp/san-$case.err" "$tmp/out-san-$case/report.md"
  fi
done

# a SIGTERM during a step: the step's process is stopped, the report finished with a STOPPED row
rm -f "$tmp/hang"/*.pid
STANDIN_HANG=$tmp/hang OUT="$tmp/out-term" TMPDIR="$tmp/tmpdir" PATH="$sbin:$PATH" \
  bash "$SCRIPT" --build-dir "$fake" >"$tmp/term.out" 2>"$tmp/term.err" &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/hang/test_cuda_hang.pid" ] && break; sleep 0.1; done
kill -TERM "$pid"
wait "$pid"
rc=$?
if [ "$rc" = 143 ] && grep -q -F '| tests/kernels/test_cuda_hang | STOPPED | signal SIGTERM arrived:' "$tmp/out-term/report.md" &&
   grep -q '^Summary: ' "$tmp/out-term/report.md" && out_ok term report.md gpu-check.log results.tsv &&
   [ -z "$(ls -A "$tmp/tmpdir")" ] && sleep 0.5 && gone "$tmp/hang/test_cuda_hang.pid"; then
  ok "SIGTERM during a step: exit 143, the step stopped, the report finished (STOPPED, Summary)"
else
  notok "SIGTERM during a step: exit 143, the step stopped, the report finished (rc=$rc)" \
    "$tmp/term.err" "$tmp/out-term/report.md"
fi

bad=$(OUT="$tmp/out-usage2" bash "$SCRIPT" --limit nosuch=3 2>&1 >/dev/null; echo "rc=$?")
if grep -q "unknown step 'nosuch'" <<<"$bad" && grep -q 'rc=2' <<<"$bad"; then ok "--limit with an unknown step: exit 2, named"
else notok "--limit with an unknown step: exit 2, named ($bad)"; fi

echo "1..$n"
