#!/bin/bash
# tests/kernels/attention_emulated.sh — the CUDA attention checked without a GPU:
# kernels/attention.cu's device code compiled for the CPU with g++ against dev/cuda/emu/
# (dev/cuda/attention_emulated.cpp: a std::thread per CUDA thread, barriers for
# __syncthreads and the warp collectives, mma.sync and ldmatrix emulated from the PTX
# fragment layouts) and compared with train/cpu/attention.c on the tiny, hd64, hd128, hd16
# cases (varlen, KV context, GQA/MQA, aliasing segments, a padded head dim, untouched bytes). It checks the
# kernels' index math, masks and barriers, not their speed; tests/kernels/test_cuda_attention
# runs the real thing on a GPU. TAP; skipped without a C++20 compiler.
set -u
: "${top_srcdir:?}"
echo "1..1"
# The emulation checks kernel code that no sanitizer or configure option changes, so
# scripts/test.sh runs it once, in the default build, and sets LONGTAIL_SKIP_EMULATION=1
# for the sanitizer build and distcheck (each run costs 1-2 minutes on 2 cores).
if [ "${LONGTAIL_SKIP_EMULATION:-0}" = 1 ]; then
  echo "ok 1 # SKIP LONGTAIL_SKIP_EMULATION=1 (run once, in the default build)"
  exit 0
fi
CC=${CC:-cc}
CXX=${CXX:-g++}
if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "ok 1 # SKIP no C++ compiler ($CXX)"
  exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lt-attn-emu.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
printf '#include <barrier>\nint main() { std::barrier<> b(1); b.arrive_and_wait(); }\n' >"$tmp/probe.cpp"
if ! "$CXX" -std=c++20 -pthread "$tmp/probe.cpp" -o "$tmp/probe" >/dev/null 2>&1; then
  echo "ok 1 # SKIP $CXX cannot build C++20 <barrier> (the emulation needs it)"
  exit 0
fi
blas_cflags=$(pkg-config --cflags openblas 2>/dev/null || true)
blas_libs=$(pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
build() {
  for f in train/cpu/attention.c lib/threadpool.c lib/error.c; do
    # shellcheck disable=SC2086
    "$CC" -std=gnu11 -O2 -I"$top_srcdir" $blas_cflags -c "$top_srcdir/$f" -o "$tmp/$(basename "$f" .c).o" || return 1
  done
  # shellcheck disable=SC2086
  "$CXX" -std=c++20 -O2 -Wno-unknown-pragmas -I"$top_srcdir/dev/cuda/emu" -I"$top_srcdir" $blas_cflags \
    "$top_srcdir/dev/cuda/attention_emulated.cpp" "$tmp"/*.o $blas_libs -pthread -o "$tmp/emu"
}
if ! build >"$tmp/build.log" 2>&1; then
  echo "not ok 1 - attention emulation: build failed"
  sed 's/^/# /' "$tmp/build.log" | head -40
  exit 0
fi
if "$tmp/emu" tiny hd64 hd128 hd16 >"$tmp/out" 2>&1; then
  echo "ok 1 - kernels/attention.cu emulated on the CPU matches train/cpu/attention.c"
else
  echo "not ok 1 - kernels/attention.cu emulated on the CPU differs from train/cpu/attention.c"
fi
sed 's/^/# /' "$tmp/out"
