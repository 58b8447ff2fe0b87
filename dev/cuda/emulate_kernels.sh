#!/bin/sh
# dev/cuda/emulate_kernels.sh — run tests/kernels/test_cuda_kernels against the CUDA
# kernels of kernels/ (all but attention) executed on the CPU: the kernel sources are
# compiled by g++ with -DLT_CUDA_EMULATE and dev/cuda/emu_kernels/ standing in for the
# CUDA headers (one std::thread per CUDA thread, barriers for __syncthreads and the warp
# shuffles, host memory as device memory, a naive column-major cuBLASLt that refuses
# inconsistent layouts). It checks index math, bounds, barriers, the wrappers' logic and
# the GEMMs' transposes on a machine without a GPU; not speed, not launch limits, not
# the GPU's own expf/sinf rounding (the host libm's here).
#
# Usage: dev/cuda/emulate_kernels.sh BUILD_DIR   (a configured build tree of this source,
# CUDA or not; its libraries and the test's object are built there first)
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
out=$build/dev-cuda-emu
mkdir -p "$out"
make -s -C "$build" tests/libtestutil.a train/libtrain.a plans/libplans.a dataprep/libdataprep.a \
    lib/liblongtail.a tests/kernels/test_cuda_kernels-test_cuda_kernels.o
objs=
for k in context gemm embed rmsnorm rope swiglu xent adamw; do
    ${CXX:-g++} -std=c++20 -O1 -g -ffp-contract=off -Wall -Wno-unknown-pragmas -x c++ -DLT_CUDA_EMULATE \
        -I"$src/dev/cuda/emu_kernels" -I"$src" -I"$build" -c "$src/kernels/$k.cu" -o "$out/$k.o"
    objs="$objs $out/$k.o"
done
# the host-side parts of libkernels.a the backend (train/model/backend_cuda.c) links: the
# arena, and the attention's no-CUDA stand-ins (the emulated attention is
# dev/cuda/attention_emulated.cpp's, a program of its own)
for k in arena attention_none; do
    ${CC:-cc} -std=gnu11 -O1 -g -I"$src" -I"$build" -c "$src/kernels/$k.c" -o "$out/$k.o"
    objs="$objs $out/$k.o"
done
rm -f "$out/libkernels_emu.a"
ar rcs "$out/libkernels_emu.a" $objs
# the test's own link line, with the emulated kernels in place of libkernels.a and CUDA
link=$(make -C "$build" -n -W tests/kernels/test_cuda_kernels-test_cuda_kernels.o tests/kernels/test_cuda_kernels |
    grep -- '-o tests/kernels/test_cuda_kernels ' | head -n 1 | sed 's/^echo [^;]*;//')
link=$(printf '%s\n' "$link" | sed -e "s|kernels/libkernels.a|$out/libkernels_emu.a|" \
    -e 's/-lcudart//; s/-lcublasLt//; s/-lcublas//; s/-lnccl//' \
    -e "s|-o tests/kernels/test_cuda_kernels |-o $out/test_cuda_kernels_emulated |" -e "s/^[^ ]* /${CXX:-g++} -pthread /")
(cd "$build" && eval "$link -lstdc++")
"$out/test_cuda_kernels_emulated"
