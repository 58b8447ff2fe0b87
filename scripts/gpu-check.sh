#!/usr/bin/env bash
# scripts/gpu-check.sh — the checks of issue 20 that need a GPU, in one script for the
# device machine; everything goes into OUT/report.md with the exact commands.
#
#   scripts/gpu-check.sh --prepare [--build-dir DIR]        (on the dev machine, no GPU needed)
#   scripts/gpu-check.sh [--carried FILE] [--build-dir DIR] [--out DIR] [--quick | --full]
#                        [--budget SECONDS] [--limit STEP=SECONDS]... [--keep]   (on the GPU)
#
#   (run mode)       stop at once with exit status 3 and "no GPU" when nvidia-smi lists
#                    none; else take the build (--carried's archive, else --build-dir, else
#                    configure and build there), then run, most valuable first:
#                      1. the GPU unit tests (tests/kernels/test_cuda_*, test_gpu_probe,
#                         tests/train/test_comm_device):
#                         each must pass WITHOUT skipping (a skip on a GPU is a failure);
#                      2. attention forward + backward TFLOP/s beside a cuBLASLt GEMM's
#                         (bench/gpu/bench_kernels; target: attention >= 60 % of the GEMM);
#                      3. the ~1B Llama benchmark (bench/gpu/run.sh; 4 steps, 12 with --full),
#                         planned with the estimate profile etc/hardware/h100.ini (or h200):
#                         MFU against the GPU's bf16 dense peak (target >= 50 %), the
#                         simulator's step-time error (target <= 5 %) and memory error
#                         (target <= 2 %);
#                      4. the shapes a long-context run meets (bench/gpu/bench_kernels
#                         --shapes): the 1B layer's GEMMs and the LM head with its
#                         cross-entropy at V = 50257 on an 8K unit, attention forward +
#                         backward of one causal sample of 8K, 64K, 128K and 256K tokens
#                         (checked against a host reference at two rows); a row per figure;
#                      5. a sanitizer pass: tests/kernels/test_cuda_attention under
#                         compute-sanitizer --tool memcheck, then --tool racecheck (any error
#                         reported fails); without a compute-sanitizer ($LONGTAIL_COMPUTE_SANITIZER,
#                         PATH, /usr/local/cuda, the CUDA wheels; `none`: do not look) or where it
#                         refuses the device, once with CUDA_LAUNCH_BLOCKING=1 LONGTAIL_CUDA_SYNC=1;
#                      6. `trainer calibrate` with train.backend = cuda (the 1B model's layer)
#                         writing OUT/h100.ini or OUT/h200.ini;
#                      7. `trainer check` (the oracle: the whole step on the GPU against the
#                         CPU fp32 executor) with train.backend = cuda on a small model;
#                      8. with two or more GPUs and mpirun: tensor parallelism over NCCL
#                         (`trainer check` at tp 2, every rank's part on its GPU against one
#                         CPU fp32 process) and zero1 at dp 2 (`train --db` 4 steps beside
#                         shard none: the last losses within 1 %, the model-state bytes against
#                         the cost model's). NCCL takes one rank per GPU, so with one GPU these
#                         are reported as NEEDS 2 GPUS: neither passed nor failed, counted apart;
#                      9. the scratch kernel programs of dev/cuda that --prepare built (each
#                         checks its numbered versions against a CPU reference and times them;
#                         nothing is compiled or emulated here).
#                    Each step runs under `timeout` with its own limit (below), cut to what is
#                    left of --budget: a step that reaches its limit is a TIMEOUT row (a
#                    failure) and the next step runs; a step the budget leaves no time for is
#                    a NOT RUN (deadline) row. A piece that does not exist yet is MISSING.
#                    The script then exits 1: it never reports a check it could not run as
#                    passed. OUT/report.md is written row by row, so a run killed from outside
#                    still leaves the rows done so far (and, on SIGTERM/SIGINT, why it stopped).
#                    OUT receives only report.md, gpu-check.log (each command's output, at most
#                    the first 128 KiB and the last 384 KiB of it), results.tsv (one line per
#                    row) and h100.ini or h200.ini; the work (corpora, shards, plan databases,
#                    runs, an unpacked --carried build) goes to a temporary folder under
#                    $TMPDIR (default /tmp), removed at the end.
#   --prepare        on a machine with the CUDA toolkit (GPU or not): configure --with-cuda
#                    and build what the run needs in the build directory, and the GPU programs
#                    of dev/cuda (its .cu programs, out of the source tree into DIR/dev/cuda;
#                    not attention_emulated, the CPU emulation), then pack the programs,
#                    buildconfig.h, a length file (the first 4000 lines of
#                    ../shared/lengths/commoncrawl.txt: ../shared does not travel) and the
#                    shared libraries they load that a bare CUDA image lacks (every `ldd`
#                    dependency outside glibc and the CUDA/NCCL libraries: zstd, SQLite, CBC,
#                    inih, OpenBLAS, Open MPI, ...) into _build/gpu-carry.tar.gz. The device
#                    machine cannot install packages (no network): carry that archive to it
#                    and give it to --carried (docs/gpu.md).
#   --carried FILE   unpack FILE (from --prepare) into the build directory first
#   --build-dir DIR  default _build/gpu (a folder of the temporary work folder with --carried)
#   --out DIR        default $OUT when set, else _build/gpu-check-out
#   --quick          the default: 4 trained steps in the 1B benchmark, --budget 450
#   --full           12 trained steps in the 1B benchmark (limit 600 s), --budget 1800
#   --budget S       the whole run's deadline in seconds from the start (default above: a
#                    --quick run ends within about 8 minutes)
#   --limit STEP=S   the limit of a step, in seconds (repeatable). STEP and default:
#                    build 600 (configure + make, only without a build), tests 90 (each test
#                    program), bench_kernels 90, bench1b 240 (600 with --full), shapes 90,
#                    sanitizer 60 (each of memcheck, racecheck or the synchronized run),
#                    calibrate 150, check 120 (dataprep + planner + trainer check), two_gpu 180
#                    (each row), dev_cuda 60 (each program)
#   --keep           keep the temporary work folder (its path is printed) for a look after
#
# Exit status: 0 every check ran and met its target; 1 a check failed, timed out, missed its
# target, is MISSING or was NOT RUN (a NEEDS 2 GPUS row is none of these); 2 bad usage; 3 no
# GPU (run mode) or no CUDA toolkit (--prepare); 128 + N when stopped by signal N.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=run build="" carried="" out="${OUT:-$ROOT/_build/gpu-check-out}" quick=1 budget="" keep=0
# the per-step limits in seconds (--limit STEP=S); the 1B benchmark's grows with --full
declare -A LIMIT=([build]=600 [tests]=90 [bench_kernels]=90 [bench1b]=240 [shapes]=90 [sanitizer]=60
                  [calibrate]=150 [check]=120 [two_gpu]=180 [dev_cuda]=60)
declare -A user_limit=()
usage_error() { echo "gpu-check: error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --prepare) mode=prepare; shift ;;
    --carried) carried=${2:?--carried needs a value}; shift 2 ;;
    --build-dir) build=${2:?--build-dir needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    --quick) quick=1; shift ;;
    --full) quick=0; shift ;;
    --budget) budget=${2:?--budget needs a value}; shift 2
      case "$budget" in ''|*[!0-9]*) usage_error "--budget takes seconds, not '$budget'" ;; esac ;;
    --limit) spec=${2:?--limit needs STEP=SECONDS}; shift 2
      key=${spec%%=*} val=${spec#*=}
      [ -n "${LIMIT[$key]+set}" ] || usage_error "--limit: unknown step '$key' (one of: ${!LIMIT[*]})"
      case "$val" in ''|*[!0-9]*|0) usage_error "--limit $key takes a positive number of seconds, not '$val'" ;; esac
      user_limit[$key]=$val ;;
    --keep) keep=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
    *) usage_error "unknown option '$1' (see --help)" ;;
  esac
done
if [ "$quick" = 0 ]; then LIMIT[bench1b]=600; fi
for key in "${!user_limit[@]}"; do LIMIT[$key]=${user_limit[$key]}; done
if [ -z "$budget" ]; then budget=450; [ "$quick" = 0 ] && budget=1800; fi
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
jobs=$(nproc 2>/dev/null || echo 2)
export LONGTAIL_VOCAB_DIR="$ROOT/data/vocab" LONGTAIL_HARDWARE_DIR="$ROOT/etc/hardware"

# the programs the run needs, besides the GPU tests (found by name)
TARGETS=(dataprep/dataprep plans/planner train/trainer tests/kernels/test_gpu_probe tests/train/test_comm_device)

# gpu_test_targets: every GPU test program the tree declares (tests/*/test_cuda_*)
gpu_test_targets() {
  sed -n 's/^check_PROGRAMS.*\(tests\/kernels\/test_cuda_[a-z0-9_]*\).*/\1/p; s/^\(tests\/[a-z]*\/test_cuda_[a-z0-9_]*\)_SOURCES.*/\1/p' \
    "$ROOT/Makefile.am" | sort -u
}
# dev_cuda_make BUILD: sets DEV_CUDA_MAKE to the command that builds the GPU programs of
# dev/cuda (PROGRAMS of its Makefile that have a .cu source: attention_emulated is the CPU
# emulation and needs OpenBLAS) into BUILD/dev/cuda with the Makefile's own rules: VPATH
# finds the sources, -I$ROOT the kernels/ they include; nothing is written into the tree
dev_cuda_make() {
  local nvcc progs=() p
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  for p in $(make -s --no-print-directory -C "$ROOT/dev/cuda" --eval 'print-programs: ; @echo $(PROGRAMS)' print-programs); do
    [ -f "$ROOT/dev/cuda/$p.cu" ] && progs+=("$p")
  done
  mkdir -p "$1/dev/cuda"
  DEV_CUDA_MAKE=(make -C "$1/dev/cuda" -j"$jobs" -f "$ROOT/dev/cuda/Makefile" -I "$ROOT/dev/cuda"
                 VPATH="$ROOT/dev/cuda" NVCC="$nvcc -I$ROOT" "${progs[@]}")
}

# ---------------------------------------------------------------- --prepare
if [ "$mode" = prepare ]; then
  [ -n "$build" ] || build="$ROOT/_build/gpu"
  case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
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
  gpu_tests=$(gpu_test_targets)
  for t in $gpu_tests bench/gpu/bench_kernels; do
    make -C "$build" -j"$jobs" "$t" || echo "gpu-check: note: $t does not build yet (reported as MISSING on the GPU)" >&2
  done
  dev_cuda_make "$build"
  "${DEV_CUDA_MAKE[@]}" || echo "gpu-check: note: the dev/cuda programs do not all build (those missing are not run on the GPU)" >&2
  set +e
  stage="$build/carry"
  rm -rf "$stage" && mkdir -p "$stage/deps-lib" || exit 1
  cp "$build/buildconfig.h" "$stage/"
  for p in "${TARGETS[@]}" $gpu_tests bench/gpu/bench_kernels; do
    if [ -x "$build/$p" ]; then mkdir -p "$stage/$(dirname "$p")" && cp "$build/$p" "$stage/$p"; fi
  done
  mkdir -p "$stage/dev/cuda"
  for p in "$build"/dev/cuda/*; do [ -f "$p" ] && [ -x "$p" ] && cp "$p" "$stage/dev/cuda/"; done
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
# (only bash built-ins and a few programs before this test: it must answer anywhere)
mkdir -p "$out" || { echo "gpu-check: error: cannot create $out" >&2; exit 1; }
report="$out/report.md" log="$out/gpu-check.log" results="$out/results.tsv"
{
  echo "# gpu-check report"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  if commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null); then
    echo "- commit: $commit$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  else
    echo "- commit: unknown (not a git checkout)"
  fi
} >"$report"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  why="nvidia-smi is not installed"
  command -v nvidia-smi >/dev/null 2>&1 && why="nvidia-smi lists no GPU"
  echo "- result: **no GPU** ($why): nothing was checked" >>"$report"
  echo "gpu-check: error: no GPU on this machine ($why): these checks need one (run this script on the device machine; docs/gpu.md)" >&2
  exit 3
fi
# OUT holds this run's files only: the previous run's are removed, the work goes elsewhere
rm -f "$log" "$results" "$out/h100.ini" "$out/h200.ini"
: >"$log"
printf 'check\tresult\tseconds\tlimit_s\tdetail\n' >"$results"
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || { echo "gpu-check: error: cannot make a work folder in ${TMPDIR:-/tmp}" >&2; exit 1; }
case "$work/" in "$out"/*) echo "gpu-check: error: the work folder $work is inside OUT ($out): set TMPDIR elsewhere" >&2; exit 1 ;; esac
mkdir -p "$work/logs"
if [ -z "$build" ]; then
  build="$ROOT/_build/gpu"
  [ -n "$carried" ] && build="$work/build"
fi
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
gpu_mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader 2>/dev/null | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
case "$gpu_name" in
  *H100*) peak=989 profile=h100 ;;  # bf16 dense, SXM (the PCIe card is lower: 756)
  *H200*) peak=989 profile=h200 ;;
  *) peak="" profile="" ;;
esac
steps=12
[ "$quick" = 1 ] && steps=4
limits=""
for key in build tests bench_kernels bench1b shapes sanitizer calibrate check two_gpu dev_cuda; do limits="$limits $key ${LIMIT[$key]} s,"; done
{
  echo "- device: $gpu_name, $gpu_mem, driver $driver ($n_gpus GPU(s))"
  echo "- bf16 dense peak: ${peak:-unknown for this GPU (MFU not judged)} TFLOP/s"
  echo "- run: $([ "$quick" = 1 ] && echo "--quick" || echo "--full"), budget $budget s; step limits:${limits%,}"
  echo "- build: $build"
  echo "- work folder: $work ($([ "$keep" = 1 ] && echo kept || echo removed at the end))"
} >>"$report"

# ---------------------------------------------------------------- run: rows, steps, limits
fails=0 timeouts=0 missing=0 notrun=0 needs=0 cmds=() finished=0 stopped=""
step_key="" step_name="" step_open=0 step_t0=$SECONDS step_limit=0 step_end=0 step_cut=0 step_pid="" last_rc=0 last_timeout=0 n_out=0
deadline=$((SECONDS + budget))
row() { # row CHECK RESULT DETAIL: a line of the report's table and of results.tsv
  echo "| $1 | $2 | $3 |" >>"$report"
  step_open=0
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$((SECONDS - step_t0))" "$step_limit" "${3//$'\t'/ }" >>"$results"
  case "$2" in
    PASS) ;;
    MISSING*) missing=$((missing + 1)) ;;
    NEEDS*) needs=$((needs + 1)) ;;
    "NOT RUN"*) notrun=$((notrun + 1)) ;;
    TIMEOUT) timeouts=$((timeouts + 1)); fails=$((fails + 1)) ;;
    *) fails=$((fails + 1)) ;;
  esac
  echo "gpu-check: $1: $2 ${3:+($3)}" >&2
}
row_now() { step_t0=$SECONDS step_limit=0; row "$@"; } # a row outside any step
# step_begin KEY NAME: start the step NAME with the limit of KEY, cut to what is left of the
# budget; returns 1 after a NOT RUN (deadline) row when too little is left to start it
step_begin() {
  local left=$((deadline - SECONDS)) limit=${LIMIT[$1]} need
  need=$((limit < 20 ? limit : 20))
  step_key=$1 step_name=$2 step_t0=$SECONDS step_cut=0 step_limit=$limit
  fresh
  if [ "$left" -lt "$need" ]; then
    step_limit=0
    row "$2" "NOT RUN (deadline)" "the --budget ($budget s) is spent: $((left > 0 ? left : 0)) s left, too little to start a step of limit $limit s"
    return 1
  fi
  if [ "$limit" -gt "$left" ]; then step_limit=$left step_cut=1; fi
  step_end=$((SECONDS + step_limit)) step_open=1
  echo "gpu-check: $2: running (limit $step_limit s)" >&2
  return 0
}
step_left() { local l=$((step_end - SECONDS)); echo $((l > 0 ? l : 0)); }
timed_out() { [ "$last_timeout" = 1 ]; }
row_timeout() { # the row of a step whose command reached the step's limit
  local why="the step's limit"
  [ "$step_cut" = 1 ] && why="what was left of the --budget ($budget s; the step's limit is ${LIMIT[$step_key]} s)"
  row "$step_name" TIMEOUT "stopped after $step_limit s, $why (step '$step_key'); its output is in gpu-check.log"
}
# append_log FILE: FILE into gpu-check.log, at most its first 128 KiB and last 384 KiB, and
# nothing more once the log passes 12 MiB (OUT's files come back only under 16 MiB each)
append_log() {
  local size logsize
  size=$(wc -c <"$1") logsize=$(wc -c <"$log")
  if [ "$logsize" -gt $((12 * 1024 * 1024)) ]; then
    echo "[gpu-check: $size bytes of output left out: gpu-check.log is full]" >>"$log"
  elif [ "$size" -le $((512 * 1024)) ]; then
    cat "$1" >>"$log"
  else
    { head -c $((128 * 1024)) "$1"
      printf '\n[gpu-check: %d bytes cut: the first 128 KiB and the last 384 KiB of this output are kept]\n' \
        $((size - 512 * 1024))
      tail -c $((384 * 1024)) "$1"; } >>"$log"
  fi
}
# run_logged CMD...: CMD under `timeout` with what is left of the step's limit, its output
# kept whole in the work folder (last_out reads it) and capped in gpu-check.log; its status
# returned; timed_out tells whether the limit stopped it (124 or 137 once the limit has passed,
# not a program that exits 124 or is killed by another hand). Run in the background and waited
# for, so that a SIGTERM to this script is handled at once (on_signal stops the step).
run_logged() {
  local lim one t0=$SECONDS
  lim=$(step_left)
  cmds+=("$*")
  n_out=$((n_out + 1)) one="$work/logs/$n_out.out"
  { echo; echo "\$ $*   # step '$step_key', $lim s left of its limit"; } >>"$log"
  if [ "$lim" -lt 1 ]; then
    echo "gpu-check: not started: the step's limit was reached" >"$one"
    last_rc=124 last_timeout=1
  else
    timeout --kill-after=10 "$lim" "$@" >"$one" 2>&1 </dev/null &
    step_pid=$!
    wait "$step_pid"
    last_rc=$? last_timeout=0
    step_pid=""
    if { [ "$last_rc" = 124 ] || [ "$last_rc" = 137 ]; } && [ $((SECONDS - t0)) -ge $((lim - 1)) ]; then last_timeout=1; fi
  fi
  append_log "$one"
  timed_out && echo "[gpu-check: timeout: stopped after the $lim s left of the step's limit]" >>"$log"
  cat "$one" >>"$work/cur.out" # since the last `fresh`
  return $last_rc
}
last_out() { cat "$work/cur.out" 2>/dev/null; }
fresh() { : >"$work/cur.out"; }
# the end, however reached: the summary and the commands in the report, the work folder removed
finish() {
  local rc=$?
  [ "$finished" = 1 ] && return
  finished=1
  if [ -n "$step_pid" ]; then kill -TERM "$step_pid" 2>/dev/null; wait "$step_pid" 2>/dev/null; fi
  if [ -n "$stopped" ]; then
    [ "$step_open" = 1 ] || step_name="(between steps, after ${step_name:-the build})"
    row "$step_name" STOPPED "$stopped arrived: this step and the ones after it did not run to their end"
  fi
  {
    echo
    echo "## Commands (in order; outputs in gpu-check.log)"
    echo
    echo '```'
    [ ${#cmds[@]} -gt 0 ] && printf '%s\n' "${cmds[@]}"
    echo '```'
    echo
    echo "Summary: $fails failed or below target ($timeouts timed out), $missing missing, $notrun not run," \
      "$needs needing more GPUs than this machine has; $SECONDS s of the $budget s budget."
  } >>"$report"
  if [ "$keep" = 1 ]; then echo "gpu-check: the work folder is kept: $work" >&2
  else rm -rf "$work"; fi
  return $rc
}
on_signal() { stopped="signal $1"; exit $((128 + $2)); }
trap finish EXIT
trap 'on_signal SIGTERM 15' TERM
trap 'on_signal SIGINT 2' INT

# ---------------------------------------------------------------- run: the build
if [ -n "$carried" ]; then
  if [ ! -f "$carried" ]; then
    echo "gpu-check: error: --carried $carried: no such file (make it with --prepare, carry it to this machine)" >&2
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
{ echo; echo "| check | result | detail |"; echo "| --- | --- | --- |"; } >>"$report"
if [ ! -x "$build/train/trainer" ] && step_begin build "build (configure --with-cuda, make)"; then
  mkdir -p "$build"
  if [ ! -f "$build/Makefile" ] && ! run_logged env -C "$build" "$ROOT/configure" --with-cuda -q; then
    if timed_out; then row_timeout
    else row "build" FAIL "configure --with-cuda failed here (the image lacks the build dependencies?): run scripts/gpu-check.sh --prepare where the CUDA toolkit is and carry the archive; see gpu-check.log"; fi
  elif ! run_logged make -C "$build" -j"$jobs" "${TARGETS[@]}"; then
    if timed_out; then row_timeout; else row "build" FAIL "make failed; see gpu-check.log"; fi
  else
    # the GPU tests, the kernel benchmark and dev/cuda's GPU programs, as --prepare builds them
    for t in $(gpu_test_targets) bench/gpu/bench_kernels; do
      run_logged make -C "$build" -j"$jobs" "$t" || true
    done
    dev_cuda_make "$build"
    run_logged "${DEV_CUDA_MAKE[@]}" || true
  fi
fi
if [ ! -x "$build/train/trainer" ] || ! grep -q '^#define HAVE_CUDA 1' "$build/buildconfig.h" 2>/dev/null; then
  row_now "build" FAIL "no CUDA build of the trainer in $build"
  echo >>"$report"; echo "Stopped: nothing to run without a CUDA build." >>"$report"
  exit 1
fi
row_now "build" PASS "CUDA build in $build"

# ---------------------------------------------------------------- 1. GPU unit tests
gpu_tests=()
for t in "$build"/tests/kernels/test_cuda_* "$build"/tests/kernels/test_gpu_probe "$build"/tests/train/test_comm_device; do
  [ -x "$t" ] && [ -f "$t" ] && gpu_tests+=("$t")
done
if ! compgen -G "$build/tests/kernels/test_cuda_*" >/dev/null; then
  row_now "kernel tests (tests/kernels/test_cuda_*)" "MISSING" "no test_cuda_* program in the build: the kernels' tests are not written or not built yet"
fi
for t in "${gpu_tests[@]}"; do
  name=${t#"$build"/}
  step_begin tests "$name" || continue
  # cmocka's TAP straight from the program (not through tests/tap-cmocka.sh, whose own
  # `timeout` puts the test in a process group that ours could not stop); a skip reads
  # "not ok N # SKIP" there, and is a failure here either way
  if run_logged env CMOCKA_MESSAGE_OUTPUT=TAP "$t"; then
    if last_out | grep -q '# SKIP'; then
      # the test's reason, from the "# skip: REASON" line it prints before skip()
      row "$name" FAIL "skipped on a machine with a GPU: $(last_out | grep -m1 '^# skip: ' | cut -c9- ||
        last_out | grep -m1 '# SKIP' | sed 's/.*# SKIP //')"
    else
      row "$name" PASS "$(last_out | grep -c '^ok ') tests"
    fi
  elif timed_out; then row_timeout
  else
    row "$name" FAIL "$(last_out | grep -m1 -E '^not ok|# SKIP' || echo "exit status $last_rc")"
  fi
done

# ---------------------------------------------------------------- 2. attention vs GEMM
if [ ! -x "$build/bench/gpu/bench_kernels" ]; then
  row_now "attention fwd+bwd vs cuBLASLt GEMM" "MISSING" "bench/gpu/bench_kernels did not build (the CUDA kernels are not all in the tree yet)"
elif step_begin bench_kernels "attention fwd+bwd vs cuBLASLt GEMM"; then
  if run_logged "$build/bench/gpu/bench_kernels"; then
    line=$(last_out | grep '^attn_tflops=' | tail -1)
    ratio=$(sed -n 's/.*ratio=\([0-9.]*\).*/\1/p' <<<"$line")
    if [ -n "$ratio" ] && awk -v r="$ratio" 'BEGIN { exit !(r >= 0.6) }'; then
      row "$step_name" PASS "$line (target ratio >= 0.6)"
    else
      row "$step_name" "BELOW TARGET" "${line:-no attn_tflops= line} (target ratio >= 0.6)"
    fi
  elif timed_out; then row_timeout
  else
    row "$step_name" FAIL "bench_kernels failed: $(last_out | tail -1)"
  fi
fi

# ---------------------------------------------------------------- 3. the ~1B benchmark
# Planned with the estimate profile of etc/hardware (calibration runs after it, being of less
# value than the MFU figure when the budget is short), so step_err measures that estimate.
if step_begin bench1b "1B Llama benchmark ($steps steps, 8K units, megatron packing)"; then
  bench_lengths=()
  [ -f "$build/lengths.txt" ] && bench_lengths=(--lengths "$build/lengths.txt")
  if run_logged bash "$ROOT/bench/gpu/run.sh" --build-dir "$build" --out "$work/bench1b" --steps "$steps" \
       --peak-tflops "${peak:-989}" --hardware "${profile:-h100}" "${bench_lengths[@]}"; then
    line=$(last_out | tail -1)
    figures=$(tr '\n' ' ' <"$work/bench1b/results.txt" 2>/dev/null)
    mfu=$(sed -n 's/.*mfu=\([0-9.]*\).*/\1/p' <<<"$line")
    serr=$(sed -n 's/.*step_err=\([0-9.na]*\).*/\1/p' <<<"$line")
    merr=$(sed -n 's/.*mem_err=\([0-9.na]*\).*/\1/p' <<<"$line")
    if [ -z "$peak" ]; then row "1B Llama MFU" "NOT JUDGED" "${figures:-$line} (no known peak for $gpu_name)"
    elif awk -v m="$mfu" 'BEGIN { exit !(m != "" && m >= 0.5) }'; then row "1B Llama MFU (8K units, megatron packing)" PASS "${figures:-$line}"
    else row "1B Llama MFU (8K units, megatron packing)" "BELOW TARGET" "${figures:-$line} (target >= 0.50)"; fi
    if awk -v e="$serr" 'BEGIN { exit !(e != "" && e != "nan" && e <= 0.05) }'; then
      row "simulator step time (estimate profile ${profile:-h100})" PASS "mean |err| $serr"
    else
      row "simulator step time (estimate profile ${profile:-h100})" "BELOW TARGET" "mean |predicted - measured| / measured = $serr (target <= 0.05; priced with etc/hardware's estimate, not the calibrated profile)"
    fi
    if [ "$merr" = na ]; then row "simulator memory" "MISSING" "no measured peak: the plan database has no step_measured.peak_bytes (trainer train --db stores it)"
    elif awk -v e="$merr" 'BEGIN { exit !(e != "" && e <= 0.02) }'; then row "simulator memory" PASS "max |err| $merr"
    else row "simulator memory" "BELOW TARGET" "max |err| $merr (target <= 0.02)"; fi
  elif timed_out; then row_timeout
  else
    row "$step_name" FAIL "$(last_out | grep -m1 -E 'error' || last_out | tail -1)"
  fi
fi

# ---------------------------------------------------------------- 4. realistic shapes
# The shapes a long-context run meets, each a few runs (bench/gpu/bench_kernels --shapes): the
# 1B layer's GEMMs and the LM head at V = 50257 on an 8K unit, attention of one causal sample
# of 8K to 256K tokens (checked against a host reference at two rows). The program keeps
# within the seconds it is given (a longer attention is skipped when its predicted time does
# not fit), ten seconds short of the step's limit; a row for each figure line it printed.
shapes_rows() {
  local l t
  while IFS= read -r l; do
    case "$l" in
      layer_gemms\ *) row "1B layer GEMMs, forward + backward (8K unit)" PASS "$l" ;;
      lm_head\ *) row "LM head + cross-entropy, V = 50257, padded rows (8K unit)" PASS "$l" ;;
      attention\ *)
        t=$(sed -n 's/^attention T=\([0-9]*\) .*/\1/p' <<<"$l")
        case "$l" in
          *skipped=*) row "attention fwd+bwd at T = $t (one causal sample)" "NOT RUN (skipped)" "$l" ;;
          *) row "attention fwd+bwd at T = $t (one causal sample)" PASS "$l" ;;
        esac ;;
    esac
  done < <(last_out | grep -E '^(layer_gemms|lm_head|attention) ')
}
shapes_name="realistic shapes (bench_kernels --shapes: 1B layer GEMMs, LM head V = 50257, attention 8K-256K)"
if [ ! -x "$build/bench/gpu/bench_kernels" ]; then
  row_now "$shapes_name" "MISSING" "bench/gpu/bench_kernels did not build"
elif step_begin shapes "$shapes_name"; then
  shapes_s=$(($(step_left) - 10))
  [ "$shapes_s" -lt 5 ] && shapes_s=5
  if run_logged "$build/bench/gpu/bench_kernels" --shapes "$shapes_s"; then
    shapes_rows
    last_out | grep -q '^shapes: ' || row "$shapes_name" FAIL "no 'shapes:' summary line; see gpu-check.log"
  elif timed_out; then shapes_rows; row_timeout
  else
    shapes_rows
    row "$shapes_name" FAIL "$(last_out | grep -m1 'error' || echo "exit status $last_rc")"
  fi
fi

# ---------------------------------------------------------------- 5. a sanitizer pass
# One GPU test program, the attention's (hand-written mma.sync / ldmatrix / cp.async kernels,
# small shapes), under compute-sanitizer's memcheck (out-of-bounds and misaligned accesses,
# API errors) and racecheck (shared-memory hazards), each with the `sanitizer` limit. Without
# a compute-sanitizer, or where it refuses the device (some sandboxed machines: "Device not
# supported"), the same program once with every launch synchronized instead
# (CUDA_LAUNCH_BLOCKING=1, LONGTAIL_CUDA_SYNC=1: a kernel's error reported under its own name).
# Any error reported is a FAIL, with the count and the first one in the row.
# find_sanitizer: the compute-sanitizer to use, on stdout; 1 when there is none
find_sanitizer() {
  local p
  case "${LONGTAIL_COMPUTE_SANITIZER:-}" in
    none) return 1 ;;
    ?*) [ -x "$LONGTAIL_COMPUTE_SANITIZER" ] && echo "$LONGTAIL_COMPUTE_SANITIZER"; return ;;
  esac
  for p in "$(command -v compute-sanitizer 2>/dev/null)" "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" \
           /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer \
           "$py_nvidia"/nvidia/*/bin/compute-sanitizer "$py_nvidia"/nvidia/*/compute-sanitizer/compute-sanitizer; do
    if [ -n "$p" ] && [ -f "$p" ] && [ -x "$p" ]; then echo "$p"; return 0; fi
  done
  return 1
}
# san_first: the first error compute-sanitizer reported in the step's output, with the
# "at KERNEL" line after it
san_first() {
  last_out | awk '/^========= [^ ]/ && !/COMPUTE-SANITIZER|SUMMARY/ && !first { first = $0; next }
                  first && /^========= +at / { print first " " substr($0, 11); done = 1; exit }
                  END { if (first && !done) print first }' | sed 's/^========= //; s/  */ /g' | cut -c1-300
}
san_name=tests/kernels/test_cuda_attention san_prog=$build/tests/kernels/test_cuda_attention san_note=""
if [ ! -x "$san_prog" ]; then
  row_now "sanitizer pass ($san_name)" "MISSING" "no $san_name in the build"
else
  if san=$(find_sanitizer); then
    for tool in memcheck racecheck; do
      step_begin sanitizer "compute-sanitizer --tool $tool $san_name" || continue
      run_logged env CMOCKA_MESSAGE_OUTPUT=TAP "$san" --tool "$tool" --print-limit 20 "$san_prog"
      if timed_out; then row_timeout; continue; fi
      if last_out | grep -q -i 'device not supported'; then
        san_note="compute-sanitizer ($san) refused the device here ($(last_out | grep -m1 -i 'device not supported' |
          sed 's/^========= //')), so instead: "
        step_limit=0
        echo "gpu-check: $step_name: the sanitizer cannot run on this machine; running with synchronized launches" >&2
        break
      fi
      n_err=$(last_out | sed -n 's/.*ERROR SUMMARY: \([0-9][0-9]*\) error.*/\1/p' | tail -1)
      n_race=$(last_out | sed -n 's/.*RACECHECK SUMMARY: .*(\([0-9][0-9]*\) error.*/\1/p' | tail -1)
      race_sum=$(last_out | grep -m1 -o 'RACECHECK SUMMARY: .*' || true)
      if [ -z "$n_err$n_race" ]; then
        row "$step_name" FAIL "compute-sanitizer ended without its summary (exit status $last_rc): $(last_out | tail -1 | cut -c1-200)"
      elif [ "${n_err:-0}" -gt 0 ] || [ "${n_race:-0}" -gt 0 ]; then
        row "$step_name" FAIL "$((${n_err:-0} > ${n_race:-0} ? ${n_err:-0} : ${n_race:-0})) error(s) reported${race_sum:+ ($race_sum)}; the first: $(san_first)"
      elif [ "$last_rc" != 0 ] || last_out | grep -q -E '^not ok|# SKIP'; then
        row "$step_name" FAIL "no sanitizer error, but the test failed under it: $(last_out | grep -m1 -E '^not ok|# SKIP' || echo "exit status $last_rc")"
      else
        row "$step_name" PASS "0 errors${race_sum:+ ($race_sum)}; $(last_out | grep -c '^ok ') tests pass under it ($san)"
      fi
    done
  else
    san_note="no compute-sanitizer (PATH, /usr/local/cuda, the CUDA wheels), so instead: "
  fi
  if [ -n "$san_note" ] &&
     step_begin sanitizer "$san_name with CUDA_LAUNCH_BLOCKING=1 LONGTAIL_CUDA_SYNC=1"; then
    run_logged env CMOCKA_MESSAGE_OUTPUT=TAP CUDA_LAUNCH_BLOCKING=1 LONGTAIL_CUDA_SYNC=1 "$san_prog"
    n_err=$(last_out | grep -c 'CUDA error')
    if timed_out; then row_timeout
    elif [ "$last_rc" = 0 ] && [ "$n_err" = 0 ] && ! last_out | grep -q '# SKIP'; then
      row "$step_name" PASS "${san_note}every launch synchronized: 0 CUDA errors, $(last_out | grep -c '^ok ') tests pass"
    else
      row "$step_name" FAIL "${san_note}$n_err CUDA error(s); the first: $(last_out | grep -m1 -E 'CUDA error|^not ok|# SKIP' || echo "exit status $last_rc")"
    fi
  fi
fi

# ---------------------------------------------------------------- 6. calibrate
if [ -z "$profile" ]; then
  row_now "trainer calibrate (cuda)" "NOT RUN" "no profile name for $gpu_name (h100 / h200)"
elif step_begin calibrate "trainer calibrate (cuda) -> $profile.ini"; then
  # the 1B benchmark's layer shape (bench/gpu/run.sh), so that a later plan priced with this
  # profile is priced by curves measured on the same GEMM and attention shapes; written in
  # the work folder, copied to OUT whole
  if run_logged "$build/train/trainer" calibrate --config "$ROOT/etc/longtail.ini" --set train.backend=cuda \
       --set model.layers=22 --set model.hidden=2048 --set model.heads=32 --set model.kv_heads=4 \
       --set model.ffn=5632 --set model.vocab=50257 --out "$work/$profile.ini" &&
     cp "$work/$profile.ini" "$out/$profile.ini"; then
    row "$step_name" PASS "$(last_out | grep -m1 'max_rel_err' || echo written)"
  elif timed_out; then row_timeout
  else
    row "$step_name" FAIL "$(last_out | grep -m1 error || echo failed)"
  fi
fi

# ---------------------------------------------------------------- 7. trainer check (the whole step)
if step_begin check "trainer check on the GPU (slimpack, small)"; then
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
      row "$step_name" PASS "$(last_out | tail -1)"
    elif timed_out; then row_timeout
    else
      row "$step_name" FAIL "$(last_out | grep -m1 -E 'error|max_rel_err' || echo failed)"
    fi
  elif timed_out; then row_timeout
  else
    row "$step_name" FAIL "dataprep of the sample corpus failed"
  fi
fi

# ---------------------------------------------------------------- 8. two GPUs: tp 2, zero1 at dp 2, helixpipe at pp 2
if [ "$n_gpus" -lt 2 ] || ! command -v mpirun >/dev/null 2>&1; then
  row_now "tp 2 and zero1 over NCCL" "NEEDS 2 GPUS" "$n_gpus GPU(s)$(command -v mpirun >/dev/null 2>&1 || echo ', no mpirun'): NCCL takes one rank per GPU"
elif [ ! -f "$work/check.ini" ] || [ ! -d "$work/data" ]; then
  row_now "tp 2 and zero1 over NCCL" "NOT RUN" "the trainer check step did not make the corpus these rows use"
else
  MPI2=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -n 2)
  if step_begin two_gpu "trainer check on 2 GPUs, tp 2 (NCCL TP collectives, vocab-parallel cross-entropy)"; then
    if run_logged "$build/plans/planner" build --config "$work/check.ini" --data "$work/data" --db "$work/tp2.db" \
         --strategy slimpack --set parallel.tp=2 --set parallel.pp=1 &&
       run_logged "${MPI2[@]}" "$build/train/trainer" check --config "$work/check.ini" --set parallel.tp=2 \
         --db "$work/tp2.db" --data "$work/data"; then
      row "$step_name" PASS "$(last_out | tail -1)"
    elif timed_out; then row_timeout
    else
      row "$step_name" FAIL "$(last_out | grep -m1 -E 'error|max_rel' || echo failed)"
    fi
  fi
  if step_begin two_gpu "zero1 at dp 2 on 2 GPUs (train --db 4 steps)"; then
    z_ok=0
    for mode in none zero1; do
      run_logged "$build/plans/planner" build --config "$work/check.ini" --data "$work/data" --db "$work/z-$mode.db" \
        --strategy megatron --set parallel.dp=2 --set parallel.shard=$mode --set plan.steps=4 &&
      run_logged "${MPI2[@]}" "$build/train/trainer" train --config "$work/check.ini" --set parallel.dp=2 \
        --set parallel.shard=$mode --db "$work/z-$mode.db" --data "$work/data" --out "$work/z-$mode" &&
      z_ok=$((z_ok + 1))
      timed_out && break
    done
    mapfile -t l < <(last_out | sed -n 's/^step=4 loss=\([0-9.]*\).*/\1/p')
    if [ "$z_ok" = 2 ] && [ ${#l[@]} = 2 ] && last_out | grep -q 'gpu_states_rel_err' &&
       awk -v a="${l[0]}" -v b="${l[1]}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 * a) }'; then
      row "$step_name" PASS "loss at step 4: none ${l[0]}, zero1 ${l[1]}; $(last_out | grep -o -E '(gpu_states|dp_bytes)_rel_err=[0-9.e+-]*' | tr '\n' ' ')"
    elif timed_out; then row_timeout
    else
      row "$step_name" FAIL "$(last_out | grep -m1 -E 'error' || echo failed)"
    fi
  fi
  if step_begin two_gpu "helixpipe at pp 2 on 2 GPUs (layer parts and K/V over the NCCL stage channels, trainer check)"; then
    if run_logged "$build/plans/planner" build --config "$work/check.ini" --data "$work/data" --db "$work/hx.db" \
         --strategy helixpipe --set parallel.pp=2 &&
       run_logged "${MPI2[@]}" "$build/train/trainer" check --config "$work/check.ini" --set parallel.pp=2 \
         --db "$work/hx.db" --data "$work/data"; then
      row "$step_name" PASS "$(last_out | tail -1)"
    elif timed_out; then row_timeout
    else
      row "$step_name" FAIL "$(last_out | grep -m1 -E 'error|max_rel' || echo failed)"
    fi
  fi
fi

# ---------------------------------------------------------------- 9. dev/cuda scratch programs
# Only what --prepare built and carried (nvcc and the OpenBLAS emulation have no place on the
# device machine): each program checks every version against its CPU reference, exits 1 if
# one fails, and prints the timings (kept in gpu-check.log).
dev_cuda=()
for p in "$build"/dev/cuda/*; do [ -f "$p" ] && [ -x "$p" ] && dev_cuda+=("$p"); done
if [ ${#dev_cuda[@]} = 0 ]; then
  row_now "dev/cuda scratch kernels" "MISSING" "no dev/cuda program in $build/dev/cuda (scripts/gpu-check.sh --prepare builds them)"
fi
for p in "${dev_cuda[@]}"; do
  step_begin dev_cuda "dev/cuda/${p##*/}" || continue
  if run_logged "$p"; then
    row "$step_name" PASS "every version checked against the CPU reference; timings in gpu-check.log"
  elif timed_out; then row_timeout
  else
    row "$step_name" FAIL "$(last_out | grep -m1 -i 'fail' || echo "exit status $last_rc")"
  fi
done

[ "$fails" -eq 0 ] && [ "$missing" -eq 0 ] && [ "$notrun" -eq 0 ]
