#!/usr/bin/env bash
# scripts/gpu-check.sh — the checks of issue 20 that need a GPU, in one script for the
# device machine; everything goes into OUT/report.md with the exact commands.
#
#   scripts/gpu-check.sh --prepare [--build-dir DIR]        (on the dev machine, no GPU needed)
#   scripts/gpu-check.sh [--carried FILE] [--build-dir DIR] [--out DIR] [--quick]   (on the GPU)
#
#   (run mode)       stop at once with exit status 3 and "no GPU" when nvidia-smi lists
#                    none; else take the build (--carried's archive, else --build-dir, else
#                    configure and build there), then run, in order:
#                      1. the GPU unit tests (tests/kernels/test_cuda_*, test_gpu_probe,
#                         tests/train/test_comm_device):
#                         each must pass WITHOUT skipping (a skip on a GPU is a failure);
#                      2. the scratch kernel benchmarks (make -C dev/cuda run: nvcc there);
#                      3. the whole step's gradients on the GPU against the CPU executor
#                         (tests/train/test_cuda_step) and `trainer check` (the oracle) with
#                         train.backend = cuda on a small model;
#                      4. attention forward + backward TFLOP/s beside a cuBLASLt GEMM's
#                         (bench/gpu/bench_kernels; target: attention >= 60 % of the GEMM);
#                      5. `trainer calibrate` with train.backend = cuda (the 1B model's layer)
#                         writing OUT/h100.ini or OUT/h200.ini;
#                      6. the ~1B Llama benchmark (bench/gpu/run.sh), planned with the profile
#                         just measured: MFU against the GPU's bf16 dense peak (target >= 50 %),
#                         the simulator's step-time error (target <= 5 %) and memory error
#                         (target <= 2 %);
#                      7. with two or more GPUs and mpirun: tensor parallelism over NCCL
#                         (`trainer check` at tp 2, every rank's part on its GPU against one
#                         CPU fp32 process) and zero1 at dp 2 (`train --db` 4 steps beside
#                         shard none: the last losses within 1 %, the model-state bytes against
#                         the cost model's). NCCL takes one
#                         rank per GPU, so with one GPU these are reported as NEEDS 2 GPUS:
#                         neither passed nor failed, counted apart.
#                    A piece that does not exist yet is reported as MISSING, and the script
#                    then exits 1: it never reports a check it could not run as passed.
#   --prepare        on a machine with the CUDA toolkit (GPU or not): configure --with-cuda
#                    and build what the run needs in the build directory, then pack the
#                    programs, buildconfig.h, a length file (the first 4000 lines of
#                    ../shared/lengths/commoncrawl.txt: ../shared does not travel) and the
#                    shared libraries they load that a bare CUDA image lacks (every `ldd`
#                    dependency outside glibc and the CUDA/NCCL libraries: zstd, SQLite, CBC,
#                    inih, OpenBLAS, Open MPI, ...) into _build/gpu-carry.tar.gz. The device
#                    machine cannot install packages (no network): carry that archive with
#                    the call and give it to --carried (docs/gpu.md).
#   --carried FILE   unpack FILE (from --prepare) into the build directory first
#   --build-dir DIR  default _build/gpu (_build/gpu-run with --carried)
#   --out DIR        default $OUT when set (the device tool's folder), else _build/gpu-check-out
#   --quick          fewer trained steps in the 1B benchmark (a smoke run)
#
# Exit status: 0 every check ran and met its target; 1 a check failed, missed its target or
# is MISSING (a NEEDS 2 GPUS row is neither); 2 bad usage; 3 no GPU (run mode) or no CUDA
# toolkit (--prepare).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=run build="" carried="" out="${OUT:-$ROOT/_build/gpu-check-out}" quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prepare) mode=prepare; shift ;;
    --carried) carried=${2:?--carried needs a value}; shift 2 ;;
    --build-dir) build=${2:?--build-dir needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
    *) echo "gpu-check: error: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$build" ]; then
  build="$ROOT/_build/gpu"
  [ -n "$carried" ] && build="$ROOT/_build/gpu-run"
fi
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
jobs=$(nproc 2>/dev/null || echo 2)
export LONGTAIL_VOCAB_DIR="$ROOT/data/vocab" LONGTAIL_HARDWARE_DIR="$ROOT/etc/hardware"

# the programs the run needs, besides the GPU tests (found by name)
TARGETS=(dataprep/dataprep plans/planner train/trainer tests/kernels/test_gpu_probe tests/train/test_comm_device)

# ---------------------------------------------------------------- --prepare
if [ "$mode" = prepare ]; then
  command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] \
    || { echo "gpu-check: error: no nvcc (the CUDA toolkit) on this machine: --prepare builds the CUDA code" >&2; exit 3; }
  mkdir -p "$build" || exit 1
  set -e
  if [ ! -f "$build/Makefile" ]; then
    (cd "$build" && "$ROOT/configure" --with-cuda -q)
  fi
  grep -q '^#define HAVE_CUDA 1' "$build/buildconfig.h" \
    || { echo "gpu-check: error: $build was configured without CUDA: remove it and run --prepare again" >&2; exit 3; }
  make -C "$build" -j"$jobs" "${TARGETS[@]}"
  # every GPU test program the tree declares, and the kernel benchmark (built on request)
  gpu_tests=$(sed -n 's/^check_PROGRAMS.*\(tests\/kernels\/test_cuda_[a-z0-9_]*\).*/\1/p; s/^\(tests\/[a-z]*\/test_cuda_[a-z0-9_]*\)_SOURCES.*/\1/p' \
    "$ROOT/Makefile.am" | sort -u)
  for t in $gpu_tests tests/train/test_cuda_step bench/gpu/bench_kernels; do
    make -C "$build" -j"$jobs" "$t" || echo "gpu-check: note: $t does not build yet (reported as MISSING on the GPU)" >&2
  done
  set +e
  stage="$build/carry"
  rm -rf "$stage" && mkdir -p "$stage/deps-lib" || exit 1
  cp "$build/buildconfig.h" "$stage/"
  for p in "${TARGETS[@]}" $gpu_tests tests/train/test_cuda_step bench/gpu/bench_kernels; do
    if [ -x "$build/$p" ]; then mkdir -p "$stage/$(dirname "$p")" && cp "$build/$p" "$stage/$p"; fi
  done
  lengths_src="$ROOT/../shared/lengths/commoncrawl.txt"
  if [ -f "$lengths_src" ]; then head -n 4000 "$lengths_src" >"$stage/lengths.txt"
  else echo "gpu-check: note: no $lengths_src: the 1B benchmark will need --lengths on the GPU machine" >&2; fi
  # the shared libraries outside glibc and CUDA that the programs load
  find "$stage" -type f -perm -u+x -print0 \
    | xargs -0 -r ldd 2>/dev/null \
    | awk '/=> \// { print $3 }' | sort -u \
    | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libresolv|libutil|libstdc\+\+|libgcc_s)\.so|/libcuda\.so|/libcudart|/libcublas|/libnccl|/libnvidia' \
    | while read -r lib; do cp -L "$lib" "$stage/deps-lib/"; done
  mkdir -p "$ROOT/_build"
  tar czf "$ROOT/_build/gpu-carry.tar.gz" -C "$stage" . || exit 1
  echo "gpu-check: packed $(find "$stage" -type f | wc -l) files into _build/gpu-carry.tar.gz ($(du -h "$ROOT/_build/gpu-carry.tar.gz" | cut -f1))."
  echo "gpu-check: on the GPU machine: carry _build/gpu-carry.tar.gz and run scripts/gpu-check.sh --carried _build/gpu-carry.tar.gz"
  exit 0
fi

# ---------------------------------------------------------------- run: is there a GPU?
mkdir -p "$out" || { echo "gpu-check: error: cannot create $out" >&2; exit 1; }
report="$out/report.md" log="$out/log.txt"
: >"$log"
{
  echo "# gpu-check report"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "- commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "- build: $build"
} >"$report"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  why="nvidia-smi is not installed"
  command -v nvidia-smi >/dev/null 2>&1 && why="nvidia-smi lists no GPU"
  echo "- result: **no GPU** ($why): nothing was checked" >>"$report"
  echo "gpu-check: error: no GPU on this machine ($why): these checks need one (run this script on the device machine; docs/gpu.md)" >&2
  exit 3
fi
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
gpu_mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader 2>/dev/null | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
case "$gpu_name" in
  *H100*) peak=989 profile=h100 ;;  # bf16 dense, SXM (the PCIe card is lower: 756)
  *H200*) peak=989 profile=h200 ;;
  *) peak="" profile="" ;;
esac
{
  echo "- device: $gpu_name, $gpu_mem, driver $driver"
  echo "- bf16 dense peak: ${peak:-unknown for this GPU (MFU not judged)} TFLOP/s"
  echo
  echo "| check | result | detail |"
  echo "| --- | --- | --- |"
} >>"$report"

fails=0 missing=0 needs=0 calibrated=""
row() { # row CHECK RESULT DETAIL
  echo "| $1 | $2 | $3 |" >>"$report"
  case "$2" in PASS) ;; MISSING*) missing=$((missing + 1)) ;; NEEDS*) needs=$((needs + 1)) ;; *) fails=$((fails + 1)) ;; esac
  echo "gpu-check: $1: $2 ${3:+($3)}" >&2
}
cmds=()
# run_logged CMD...: the command and its output into log.txt; its status returned
run_logged() {
  cmds+=("$*")
  { echo; echo "\$ $*"; } >>"$log"
  "$@" >"$log.one" 2>&1
  local rc=$?
  cat "$log.one" >>"$log"
  cat "$log.one" >>"$log.cur" # since the last `fresh`
  return $rc
}
last_out() { cat "$log.cur" 2>/dev/null; }
fresh() { : >"$log.cur"; }

# ---------------------------------------------------------------- run: the build
if [ -n "$carried" ]; then
  if [ ! -f "$carried" ]; then
    echo "gpu-check: error: --carried $carried: no such file (make it with --prepare, carry it with the call)" >&2
    exit 2
  fi
  if ! { rm -rf "$build" && mkdir -p "$build" && tar xzf "$carried" -C "$build"; }; then
    echo "gpu-check: error: cannot unpack $carried into $build" >&2
    exit 1
  fi
  echo "- carried build: $carried, unpacked into $build" >>"$report"
fi
cuda_lib=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && cuda_lib="$cuda_lib:$d"; done
# NCCL and cuBLAS may come only with the Python wheels of the image (nvidia-nccl-cu13 ...)
py_nvidia=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0] if hasattr(nvidia, "__path__") else nvidia.__file__))' 2>/dev/null || true)
for d in "$py_nvidia"/nvidia/*/lib; do [ -d "$d" ] && cuda_lib="$cuda_lib:$d"; done
export LD_LIBRARY_PATH="$build/deps-lib$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ ! -x "$build/train/trainer" ]; then
  fresh
  mkdir -p "$build"
  if [ ! -f "$build/Makefile" ] && ! (cd "$build" && run_logged "$ROOT/configure" --with-cuda -q); then
    row "build" FAIL "configure --with-cuda failed here (the image lacks the build dependencies?): run scripts/gpu-check.sh --prepare on the dev machine and carry the build directory; see log.txt"
  elif ! run_logged make -C "$build" -j"$jobs" "${TARGETS[@]}"; then
    row "build" FAIL "make failed; see log.txt"
  fi
fi
if [ ! -x "$build/train/trainer" ] || ! grep -q '^#define HAVE_CUDA 1' "$build/buildconfig.h" 2>/dev/null; then
  row "build" FAIL "no CUDA build of the trainer in $build"
  echo >>"$report"; echo "Stopped: nothing to run without a CUDA build." >>"$report"
  exit 1
fi
row "build" PASS "CUDA build in $build"

# ---------------------------------------------------------------- 1. GPU unit tests
gpu_tests=()
for t in "$build"/tests/kernels/test_cuda_* "$build"/tests/kernels/test_gpu_probe "$build"/tests/train/test_comm_device; do
  [ -x "$t" ] && [ -f "$t" ] && gpu_tests+=("$t")
done
if ! compgen -G "$build/tests/kernels/test_cuda_*" >/dev/null; then
  row "kernel tests (tests/kernels/test_cuda_*)" "MISSING" "no test_cuda_* program in the build: the kernels' tests are not written or not built yet"
fi
for t in "${gpu_tests[@]}"; do
  name=${t#"$build"/}
  fresh
  if run_logged bash "$ROOT/tests/tap-cmocka.sh" "$t"; then
    if last_out | grep -q '# SKIP'; then
      row "$name" FAIL "skipped on a machine with a GPU: $(last_out | grep -m1 '# SKIP' | sed 's/.*# SKIP //')"
    else
      row "$name" PASS "$(last_out | grep -c '^ok ') tests"
    fi
  else
    row "$name" FAIL "$(last_out | grep -m1 '^not ok' || echo "exit status non-zero")"
  fi
done

# ---------------------------------------------------------------- 2. dev/cuda scratch benchmarks
if [ -f "$ROOT/dev/cuda/Makefile" ]; then
  fresh
  if run_logged make -C "$ROOT/dev/cuda" -j"$jobs" all && run_logged make -C "$ROOT/dev/cuda" run; then
    row "dev/cuda benchmarks (make -C dev/cuda run)" PASS "$(last_out | grep -c '^== ') programs, each checked against its CPU reference; timings in log.txt"
  else
    row "dev/cuda benchmarks (make -C dev/cuda run)" FAIL "$(last_out | grep -E '^== ' | tail -1) failed; see log.txt"
  fi
else
  row "dev/cuda benchmarks" "MISSING" "no dev/cuda/Makefile (the scratch kernel versions are not in the tree yet)"
fi

# ---------------------------------------------------------------- 3. step gradients, trainer check
if [ -x "$build/tests/train/test_cuda_step" ]; then
  fresh
  if run_logged bash "$ROOT/tests/tap-cmocka.sh" "$build/tests/train/test_cuda_step" && ! last_out | grep -q '# SKIP'; then
    row "step gradients GPU vs CPU (tests/train/test_cuda_step)" PASS "$(last_out | grep -m1 'rel_err' || echo ok)"
  else
    row "step gradients GPU vs CPU (tests/train/test_cuda_step)" FAIL "$(last_out | grep -m1 -E '^not ok|# SKIP' || echo failed)"
  fi
else
  row "step gradients GPU vs CPU" "MISSING" "no tests/train/test_cuda_step in the build"
fi
work="$out/work"
rm -rf "$work" && mkdir -p "$work"
fresh
if run_logged "$build/dataprep/dataprep" run --input "$ROOT/data/sample/mixed-0.jsonl.gz" --encoding r50k_base \
     --vocab-dir "$ROOT/data/vocab" --out "$work/data" -q; then
  cat >"$work/check.ini" <<INI
[data]
encoding = r50k_base
[model]
preset = small
[plan]
global_batch = 8
context_len = 512
mem = 80G
steps = 2
[train]
backend = cuda
INI
  fresh
  if run_logged "$build/plans/planner" build --config "$work/check.ini" --data "$work/data" --db "$work/check.db" \
       --strategy slimpack && fresh && run_logged "$build/train/trainer" check --config "$work/check.ini" \
       --db "$work/check.db" --data "$work/data"; then
    row "trainer check on the GPU (slimpack, small)" PASS "$(last_out | tail -1)"
  else
    row "trainer check on the GPU (slimpack, small)" FAIL "$(last_out | grep -m1 -E 'error|max_rel_err' || echo failed)"
  fi
else
  row "trainer check on the GPU" FAIL "dataprep of the sample corpus failed"
fi

# ---------------------------------------------------------------- 4. attention vs GEMM
if [ -x "$build/bench/gpu/bench_kernels" ]; then
  fresh
  if run_logged "$build/bench/gpu/bench_kernels"; then
    line=$(last_out | grep '^attn_tflops=' | tail -1)
    ratio=$(sed -n 's/.*ratio=\([0-9.]*\).*/\1/p' <<<"$line")
    if [ -n "$ratio" ] && awk -v r="$ratio" 'BEGIN { exit !(r >= 0.6) }'; then
      row "attention fwd+bwd vs cuBLASLt GEMM" PASS "$line (target ratio >= 0.6)"
    else
      row "attention fwd+bwd vs cuBLASLt GEMM" "BELOW TARGET" "$line (target ratio >= 0.6)"
    fi
  else
    row "attention fwd+bwd vs cuBLASLt GEMM" FAIL "bench_kernels failed: $(last_out | tail -1)"
  fi
else
  row "attention fwd+bwd vs cuBLASLt GEMM" "MISSING" "bench/gpu/bench_kernels did not build (the CUDA kernels are not all in the tree yet)"
fi

# ---------------------------------------------------------------- 5. calibrate (before the benchmark, whose
# simulator then prices with the measured profile)
if [ -n "$profile" ]; then
  fresh
  # the 1B benchmark's layer shape (bench/gpu/run.sh), so that its simulated steps are priced
  # by curves measured on the same GEMM and attention shapes
  calibrated=""
  if run_logged "$build/train/trainer" calibrate --config "$ROOT/etc/longtail.ini" --set train.backend=cuda \
       --set model.layers=22 --set model.hidden=2048 --set model.heads=32 --set model.kv_heads=4 \
       --set model.ffn=5632 --set model.vocab=50257 --out "$out/$profile.ini"; then
    calibrated=$profile
    row "trainer calibrate (cuda) -> $profile.ini" PASS "$(last_out | grep -m1 'max_rel_err' || echo written)"
  else
    row "trainer calibrate (cuda)" FAIL "$(last_out | grep -m1 error || echo failed)"
  fi
else
  row "trainer calibrate (cuda)" "NOT RUN" "no profile name for $gpu_name (h100 / h200)"
fi

# ---------------------------------------------------------------- 6. the ~1B benchmark
steps=12
[ "$quick" = 1 ] && steps=4
fresh
bench_lengths=()
[ -f "$build/lengths.txt" ] && bench_lengths=(--lengths "$build/lengths.txt")
# priced by the profile just measured when calibrate wrote one (else the estimate)
bench_hw=(--hardware "${profile:-h100}")
[ -n "${calibrated:-}" ] && bench_hw=(--hardware "$calibrated")
echo "- the 1B benchmark's plans are priced with ${calibrated:+the measured }profile ${calibrated:-${profile:-h100} (the estimate in etc/hardware: calibrate did not write one)}" >>"$report"
hw_dir="$ROOT/etc/hardware"
[ -n "${calibrated:-}" ] && hw_dir="$out" # LONGTAIL_HARDWARE_DIR is one folder
if LONGTAIL_HARDWARE_DIR="$hw_dir" run_logged bash "$ROOT/bench/gpu/run.sh" \
     --build-dir "$build" --out "$work/bench1b" --steps "$steps" --peak-tflops "${peak:-989}" "${bench_lengths[@]}" \
     "${bench_hw[@]}"; then
  line=$(last_out | tail -1)
  mfu=$(sed -n 's/.*mfu=\([0-9.]*\).*/\1/p' <<<"$line")
  serr=$(sed -n 's/.*step_err=\([0-9.na]*\).*/\1/p' <<<"$line")
  merr=$(sed -n 's/.*mem_err=\([0-9.na]*\).*/\1/p' <<<"$line")
  if [ -z "$peak" ]; then row "1B Llama MFU" "NOT JUDGED" "$line (no known peak for $gpu_name)"
  elif awk -v m="$mfu" 'BEGIN { exit !(m >= 0.5) }'; then row "1B Llama MFU (8K units, megatron packing)" PASS "$line"
  else row "1B Llama MFU (8K units, megatron packing)" "BELOW TARGET" "$line (target >= 0.50)"; fi
  if awk -v e="$serr" 'BEGIN { exit !(e != "nan" && e <= 0.05) }'; then row "simulator step time" PASS "mean |err| $serr"
  else row "simulator step time" "BELOW TARGET" "mean |predicted - measured| / measured = $serr (target <= 0.05)"; fi
  if [ "$merr" = na ]; then row "simulator memory" "MISSING" "no measured peak: the plan database has no step_measured.peak_bytes (trainer train --db stores it)"
  elif awk -v e="$merr" 'BEGIN { exit !(e <= 0.02) }'; then row "simulator memory" PASS "max |err| $merr"
  else row "simulator memory" "BELOW TARGET" "max |err| $merr (target <= 0.02)"; fi
  cp "$work/bench1b/results.txt" "$out/bench1b.txt" 2>/dev/null
else
  row "1B Llama benchmark" FAIL "$(last_out | grep -m1 -E 'error' || last_out | tail -1)"
fi

# ---------------------------------------------------------------- 7. two GPUs: tp 2, zero1 at dp 2
n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$n_gpus" -ge 2 ] && command -v mpirun >/dev/null 2>&1 && [ -f "$work/check.ini" ]; then
  MPI2=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -n 2)
  fresh
  if run_logged "$build/plans/planner" build --config "$work/check.ini" --data "$work/data" --db "$work/tp2.db" \
       --strategy slimpack --set parallel.tp=2 --set parallel.pp=1 &&
     run_logged "${MPI2[@]}" "$build/train/trainer" check --config "$work/check.ini" --set parallel.tp=2 \
       --db "$work/tp2.db" --data "$work/data"; then
    row "trainer check on 2 GPUs, tp 2 (NCCL TP collectives, vocab-parallel cross-entropy)" PASS "$(last_out | tail -1)"
  else
    row "trainer check on 2 GPUs, tp 2" FAIL "$(last_out | grep -m1 -E 'error|max_rel' || echo failed)"
  fi
  fresh
  z_ok=0
  for mode in none zero1; do
    run_logged "$build/plans/planner" build --config "$work/check.ini" --data "$work/data" --db "$work/z-$mode.db" \
      --strategy megatron --set parallel.dp=2 --set parallel.shard=$mode --set plan.steps=4 &&
    run_logged "${MPI2[@]}" "$build/train/trainer" train --config "$work/check.ini" --set parallel.dp=2 \
      --set parallel.shard=$mode --db "$work/z-$mode.db" --data "$work/data" --out "$work/z-$mode" &&
    z_ok=$((z_ok + 1))
  done
  l=($(last_out | sed -n 's/^step=4 loss=\([0-9.]*\).*/\1/p'))
  if [ "$z_ok" = 2 ] && [ ${#l[@]} = 2 ] && last_out | grep -q 'gpu_states_rel_err' &&
     awk -v a="${l[0]}" -v b="${l[1]}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 * a) }'; then
    row "zero1 at dp 2 on 2 GPUs (train --db 4 steps)" PASS "loss at step 4: none ${l[0]}, zero1 ${l[1]}; $(last_out | grep -o -E '(gpu_states|dp_bytes)_rel_err=[0-9.e+-]*' | tr '\n' ' ')"
  else
    row "zero1 at dp 2 on 2 GPUs" FAIL "$(last_out | grep -m1 -E 'error' || echo failed)"
  fi
else
  row "tp 2 and zero1 over NCCL" "NEEDS 2 GPUS" "$n_gpus GPU(s)$(command -v mpirun >/dev/null 2>&1 || echo ', no mpirun'): NCCL takes one rank per GPU"
fi

# ---------------------------------------------------------------- the commands
{
  echo
  echo "## Commands (in order; outputs in log.txt)"
  echo
  echo '```'
  printf '%s\n' "${cmds[@]}"
  echo '```'
  echo
  echo "Summary: $fails failed or below target, $missing missing, $needs needing more GPUs than this machine has."
} >>"$report"
rm -f "$log.cur" "$log.one"
[ "$fails" -eq 0 ] && [ "$missing" -eq 0 ]
