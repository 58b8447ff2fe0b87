/*
 * kernels/gpu.h — the host's view of the GPU side.
 *
 * Everything CUDA lives in the kernels/ .cu files, compiled by nvcc for $(CUDA_ARCH) (sm_90 by
 * default) when configure found CUDA. Without CUDA, kernels/gpu_none.c implements this
 * same header and reports that no GPU path was built, so the project builds and its
 * tests pass (skipping the GPU checks, visibly) on machines without CUDA or a GPU.
 *
 * For now this is the probe that proves the rule: device discovery and one trivial
 * kernel (saxpy) checked against the CPU. The model's bf16 kernels join it later.
 * Errors are values (lib/error.h); nothing here prints or exits.
 */
#ifndef LT_KERNELS_GPU_H
#define LT_KERNELS_GPU_H

#include <stddef.h>

#include "lib/error.h" /* lt_status, lt_error */

#ifdef __cplusplus
extern "C" {
#endif

/* 1 if this build contains the CUDA kernels, 0 otherwise. */
int lt_gpu_built(void);

/* Number of usable CUDA devices (0 when none). When 0, `why` (if non-NULL) receives the
 * reason in words: "built without CUDA", "no CUDA device: <driver message>", ... */
int lt_gpu_device_count(char *why, size_t why_size);

/* Name and compute capability of device `dev` (e.g. "NVIDIA H200", 9, 0). */
lt_status lt_gpu_device_info(int dev, char *name, size_t name_size, int *major, int *minor,
                             lt_error *err);

/* y[i] = a * x[i] + y[i] on device 0 (copies in and out): the probe kernel. */
lt_status lt_gpu_saxpy(float a, const float *x, float *y, size_t n, lt_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LT_KERNELS_GPU_H */
