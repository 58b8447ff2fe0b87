/*
 * kernels/gpu_none.c — kernels/gpu.h for builds without CUDA: no device, every GPU
 * call fails with a clear reason.
 */
#include "kernels/gpu.h"

#include <stdio.h>

int lt_gpu_built(void) { return 0; }

int lt_gpu_device_count(char *why, size_t why_size) {
    if (why != NULL && why_size > 0)
        snprintf(why, why_size, "built without CUDA (configure found no CUDA toolkit or was given --without-cuda)");
    return 0;
}

lt_status lt_gpu_device_info(int dev, char *name, size_t name_size, int *major, int *minor,
                             lt_error *err) {
    (void)dev;
    (void)major;
    (void)minor;
    if (name != NULL && name_size > 0) name[0] = '\0';
    return lt_fail(err, LT_ERR_USAGE, NULL, "this longtail was built without CUDA");
}

lt_status lt_gpu_saxpy(float a, const float *x, float *y, size_t n, lt_error *err) {
    (void)a;
    (void)x;
    (void)y;
    (void)n;
    return lt_fail(err, LT_ERR_USAGE, NULL, "this longtail was built without CUDA");
}
