#!/bin/bash
# tests/kernels/cuda_kernels_emulated.sh — the CUDA kernels other than attention checked
# without a GPU: dev/cuda/emulate_kernels.sh compiles kernels/{context,gemm,embed,rmsnorm,
# rope,swiglu,xent,adamw}.cu for the CPU with g++ against dev/cuda/emu_kernels/ (a
# std::thread per CUDA thread, barriers for __syncthreads and the warp shuffles, host
# memory as device memory, a naive column-major cuBLASLt that refuses inconsistent
# layouts) and runs tests/kernels/test_cuda_kernels against them. It checks the kernels'
# index math, barriers, the wrappers and the GEMMs' transposes, not their speed;
# tests/kernels/test_cuda_kernels itself runs the real kernels on a GPU. TAP; skipped
# without a C++20 compiler.
set -u
: "${top_srcdir:?}" "${top_builddir:?}"
echo "1..1"
# The emulation checks kernel code that no sanitizer or configure option changes, so
# scripts/test.sh runs it once, in the default build, and sets LONGTAIL_SKIP_EMULATION=1
# for the sanitizer build and distcheck (each run costs 1-2 minutes on 2 cores).
if [ "${LONGTAIL_SKIP_EMULATION:-0}" = 1 ]; then
  echo "ok 1 # SKIP LONGTAIL_SKIP_EMULATION=1 (run once, in the default build)"
  exit 0
fi
CXX=${CXX:-g++}
if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "ok 1 # SKIP no C++ compiler ($CXX)"
  exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lt-cuda-emu.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
printf '#include <barrier>\nint main() { std::barrier<> b(1); b.arrive_and_wait(); }\n' >"$tmp/probe.cpp"
if ! "$CXX" -std=c++20 -pthread "$tmp/probe.cpp" -o "$tmp/probe" >/dev/null 2>&1; then
  echo "ok 1 # SKIP $CXX cannot build C++20 <barrier> (the emulation needs it)"
  exit 0
fi
if CXX=$CXX "$top_srcdir/dev/cuda/emulate_kernels.sh" "$top_builddir" >"$tmp/out" 2>&1; then
  echo "ok 1 - kernels/*.cu (all but attention) emulated on the CPU pass tests/kernels/test_cuda_kernels"
else
  echo "not ok 1 - kernels/*.cu (all but attention) emulated on the CPU fail tests/kernels/test_cuda_kernels"
fi
sed 's/^/# /' "$tmp/out" | tail -60
