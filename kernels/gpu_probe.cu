/*
 * kernels/gpu_probe.cu — the CUDA side of kernels/gpu.h: device discovery and one
 * trivial kernel, compiled by nvcc for sm_90. It proves the build rule (.cu -> nvcc ->
 * linked into C programs) before the real kernels arrive.
 */
#include "kernels/gpu.h"

#include <cuda_runtime.h>
#include <stdio.h>

/* Report a CUDA failure as an lt_error naming the call. */
static lt_status cuda_fail(lt_error *err, cudaError_t rc, const char *call) {
    return lt_fail(err, LT_ERR_INTERNAL, call, "CUDA error: %s", cudaGetErrorString(rc));
}

#define CUDA_TRY(call)                                                   \
    do {                                                                 \
        cudaError_t rc_ = (call);                                        \
        if (rc_ != cudaSuccess) { st = cuda_fail(err, rc_, #call); goto done; } \
    } while (0)

__global__ void saxpy_kernel(float a, const float *x, float *y, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" int lt_gpu_built(void) { return 1; }

extern "C" int lt_gpu_device_count(char *why, size_t why_size) {
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess || count == 0) {
        if (why != NULL && why_size > 0)
            snprintf(why, why_size, "no CUDA device: %s",
                     rc != cudaSuccess ? cudaGetErrorString(rc) : "the driver reports 0 devices");
        return 0;
    }
    return count;
}

extern "C" lt_status lt_gpu_device_info(int dev, char *name, size_t name_size, int *major,
                                        int *minor, lt_error *err) {
    cudaDeviceProp prop;
    cudaError_t rc = cudaGetDeviceProperties(&prop, dev);
    if (rc != cudaSuccess) return cuda_fail(err, rc, "cudaGetDeviceProperties");
    if (name != NULL && name_size > 0) snprintf(name, name_size, "%s", prop.name);
    if (major) *major = prop.major;
    if (minor) *minor = prop.minor;
    return LT_OK;
}

extern "C" lt_status lt_gpu_saxpy(float a, const float *x, float *y, size_t n, lt_error *err) {
    lt_status st = LT_OK;
    float *dx = NULL, *dy = NULL;
    if (n == 0) return LT_OK;
    CUDA_TRY(cudaMalloc(&dx, n * sizeof(float)));
    CUDA_TRY(cudaMalloc(&dy, n * sizeof(float)));
    CUDA_TRY(cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_TRY(cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice));
    saxpy_kernel<<<(unsigned)((n + 255) / 256), 256>>>(a, dx, dy, n);
    CUDA_TRY(cudaGetLastError());
    CUDA_TRY(cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost));
done:
    cudaFree(dx);
    cudaFree(dy);
    return st;
}
