#!/usr/bin/env bash
# tests/kernels/gpu_check.sh — scripts/gpu-check.sh on a machine without a GPU stops at
# once with exit status 3 and a clear "no GPU" message (and a report saying nothing was
# checked), never pretending; bad usage is exit 2; bench/gpu/run.sh refuses bad usage.
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

echo "1..$n"
