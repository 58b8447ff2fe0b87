# dev/cuda/attention.mk — the attention programs (included by dev/cuda/Makefile):
#   attention_forward, attention_backward  numbered versions checked and timed on a GPU
#                                          (nvcc + cuBLAS); they include kernels/attention.cu
#   attention_emulated                     kernels/attention.cu's device code on the CPU
#                                          (g++ + OpenBLAS, no GPU) against train/cpu/attention.c
ATTENTION_PROGRAMS = attention_forward attention_backward attention_emulated
CC ?= gcc
CXX ?= g++
ATTENTION_DEPS = attention_common.cuh ../../kernels/attention.cu ../../kernels/cuda.h

attention_forward: attention_forward.cu $(ATTENTION_DEPS)
	$(NVCC) -arch=$(CUDA_ARCH) $(NVCCFLAGS) -lineinfo -I../.. $< -lcublas -o $@

attention_backward: attention_backward.cu $(ATTENTION_DEPS)
	$(NVCC) -arch=$(CUDA_ARCH) $(NVCCFLAGS) -lineinfo -I../.. $< -lcublas -o $@

# the reference's C sources compiled in a temporary directory (nothing left behind)
attention_emulated: attention_emulated.cpp emu/cuda_runtime.h emu/cuda_bf16.h ../../kernels/attention.cu
	d=$$(mktemp -d) && \
	$(CC) -std=gnu11 -O2 -I../.. -c ../../train/cpu/attention.c -o $$d/kernel_attention.o && \
	$(CC) -std=gnu11 -O2 -I../.. -c ../../lib/threadpool.c -o $$d/threadpool.o && \
	$(CC) -std=gnu11 -O2 -I../.. -c ../../lib/error.c -o $$d/error.o && \
	$(CXX) -std=c++20 -O2 -Wall -Wextra -Wno-unknown-pragmas -Iemu -I../.. $< $$d/*.o -lopenblas -pthread -o $@; \
	rc=$$?; rm -rf "$$d"; exit $$rc
