#!/usr/bin/env bash
# scripts/test.sh — the project's whole test run (README's test command; CI runs it on a
# clean clone). Steps:
#   1. scripts/setup-deps.sh (skip with LONGTAIL_SKIP_SETUP=1)
#   2. default build in _build/default (CUDA auto-detected, warnings are errors):
#      make check = unit tests + system tests (whole programs: CLI, oracle, MPI engine,
#      PyTorch parity) + Slurm integration tests (private cluster)
#   3. sanitizer build in _build/sanitize (--enable-sanitizers, --without-cuda):
#      make check-unit under ASan + UBSan (unit tests only; the CPU emulations of the CUDA kernels run only
#      in step 2: LONGTAIL_SKIP_EMULATION=1 here and in distcheck)
#   4. make install DESTDIR=... and the installed programs answer --help/--version
#   5. make distcheck (its check: the unit tests only; the system and Slurm tests ran in 2)
#   6. fuzzing (scripts/fuzz.sh): every seed and past-crash input of each libFuzzer target,
#      then each target fuzzed for $LONGTAIL_CI_FUZZ_SECONDS (default 10) seconds
# Every test result (each cmocka case, each TAP line, each step above) is counted; the
# last line is `N passed, N failed` (skips are listed above it, never counted as passed).
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)

passed=0 failed=0 skipped=0
failures=()
step() { printf '\n==== %s\n' "$*"; }
record() { # record NAME RC
  if [ "$2" = 0 ]; then passed=$((passed + 1)); echo "PASS: $1"
  else failed=$((failed + 1)); failures+=("$1"); echo "FAIL: $1"; fi
}
# Add the counts of an automake test-suite.log; a missing log counts as one failure.
tally() { # tally NAME LOGFILE
  local log=$2
  if [ ! -f "$log" ]; then record "$1 (no test-suite.log)" 1; return; fi
  local p f e s x
  p=$(awk '/^# PASS:/ {print $3}' "$log"); f=$(awk '/^# FAIL:/ {print $3}' "$log")
  e=$(awk '/^# ERROR:/ {print $3}' "$log"); s=$(awk '/^# SKIP:/ {print $3}' "$log")
  x=$(awk '/^# XPASS:/ {print $3}' "$log")
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0} + ${e:-0} + ${x:-0}))
  skipped=$((skipped + ${s:-0}))
  if [ $((${f:-0} + ${e:-0} + ${x:-0})) -gt 0 ]; then
    failures+=("$1: see $log")
    # show what failed, so a CI log is enough to start debugging
    grep -E '^(FAIL|ERROR|XPASS):' "$log" | head -50
  fi
  if [ "${s:-0}" -gt 0 ]; then
    echo "skipped in $1:"; grep -E '^SKIP:' "$log" | sed 's/^/  /' | head -50
  fi
}

if [ "${LONGTAIL_SKIP_SETUP:-0}" != 1 ]; then
  step "installing dependencies (scripts/setup-deps.sh)"
  scripts/setup-deps.sh || { echo "setup-deps failed"; echo "0 passed, 1 failed"; exit 1; }
fi

# The shared reference data (vocabularies, corpus) that the tiktoken comparison reads:
# ../shared beside the checkout, else the workplace copy (a CI clone may live elsewhere).
if [ -z "${LONGTAIL_SHARED:-}" ]; then
  for d in "$top/../shared" /work/shared; do
    if [ -d "$d/corpus" ] && [ -d "$d/vocab" ]; then LONGTAIL_SHARED=$(cd "$d" && pwd); export LONGTAIL_SHARED; break; fi
  done
fi
echo "shared reference data: ${LONGTAIL_SHARED:-none found (the tests that need it skip, listed below)}"

step "autogen"
./autogen.sh >/dev/null 2>_autogen.err || { cat _autogen.err; echo "0 passed, 1 failed"; exit 1; }
rm -f _autogen.err

build() { # build DIR CONFIGURE-ARGS...
  local dir=$1; shift
  rm -rf "$dir"; mkdir -p "$dir"
  (cd "$dir" && "$top/configure" --enable-werror "$@" >configure.out 2>&1) || {
    tail -40 "$dir/configure.out"; return 1; }
  sed -n '/-----/,/-----/p' "$dir/configure.out"
  make -C "$dir" -j"$jobs" >"$dir/make.out" 2>&1 || { tail -60 "$dir/make.out"; return 1; }
}

step "default build (_build/default)"
if build _build/default; then
  record "build: default configuration" 0
  step "make check (unit + integration) in _build/default"
  make -C _build/default -j"$jobs" check >_build/default/check.out 2>&1
  grep -E '^(PASS|FAIL|SKIP|ERROR|XPASS|XFAIL):' _build/default/check.out | sed 's/^/  /'
  tally "default check" _build/default/test-suite.log

  step "make install DESTDIR=_build/destdir"
  rm -rf "$top/_build/destdir"
  if make -C _build/default install DESTDIR="$top/_build/destdir" >_build/default/install.out 2>&1; then
    ok=0
    for p in dataprep planner trainer jobctl; do
      bin=$(find "$top/_build/destdir" -type f -path "*/bin/$p" | head -1)
      if [ -z "$bin" ] || ! "$bin" --help >/dev/null || ! "$bin" --version >/dev/null; then
        echo "installed $p missing or not answering --help/--version"; ok=1
      fi
    done
    record "install: programs installed and answer --help/--version" $ok
  else
    tail -30 _build/default/install.out; record "install" 1
  fi

  step "make distcheck"
  # the tarball builds, installs and passes the unit tests; the whole-program and Slurm
  # tests ran above on the same sources (TESTS reaches distcheck's inner make through MAKEFLAGS)
  if LONGTAIL_SKIP_EMULATION=1 make -C _build/default -j"$jobs" distcheck 'TESTS=$(UNIT_TESTS)' \
      >_build/default/distcheck.out 2>&1; then
    record "distcheck" 0
  else
    tail -60 _build/default/distcheck.out; record "distcheck" 1
  fi
else
  record "build: default configuration" 1
fi

step "sanitizer build (_build/sanitize: ASan + UBSan, without CUDA)"
if build _build/sanitize --enable-sanitizers --without-cuda; then
  record "build: sanitizers, without CUDA" 0
  step "make check-unit under ASan + UBSan"
  LONGTAIL_SKIP_EMULATION=1 make -C _build/sanitize -j"$jobs" check-unit >_build/sanitize/check.out 2>&1
  grep -E '^(PASS|FAIL|SKIP|ERROR|XPASS|XFAIL):' _build/sanitize/check.out | sed 's/^/  /'
  tally "sanitizer check" _build/sanitize/test-suite.log
else
  record "build: sanitizers, without CUDA" 1
fi

step "fuzzing (scripts/fuzz.sh, build in _build/fuzz)"
# Each PASS/FAIL line of fuzz.sh counts; exit 77 (no clang/libFuzzer) is a visible skip.
fuzz_tally() { # fuzz_tally ARGS...
  local out rc
  out=$(scripts/fuzz.sh --build-dir _build/fuzz "$@" 2>&1); rc=$?
  printf '%s\n' "$out" | sed 's/^/  /'
  local p f s
  p=$(printf '%s\n' "$out" | grep -c '^PASS: fuzz'); f=$(printf '%s\n' "$out" | grep -c '^FAIL: fuzz')
  s=$(printf '%s\n' "$out" | grep -c '^SKIP: fuzz')
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  [ "$f" -gt 0 ] && failures+=("fuzz $*: see _build/fuzz/logs")
  if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ "$f" = 0 ]; then record "fuzz $* (exit $rc)" 1; fi
}
fuzz_tally --regress
fuzz_tally --seconds "${LONGTAIL_CI_FUZZ_SECONDS:-10}"

step "summary"
[ "$skipped" -gt 0 ] && echo "$skipped skipped (listed above; not counted as passed)"
for f in "${failures[@]}"; do echo "failed: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
