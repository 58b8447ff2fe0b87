/*
 * train/cpu/threads.c — threads of the CPU backend (train/cpu/threads.h).
 */
#include "train/cpu/threads.h"

#include <cblas.h> /* openblas_set_num_threads */

lt_status lt_cpu_init(int threads, lt_pool **pool, int *threads_out, lt_error *err) {
    *pool = NULL;
    if (threads <= 0) threads = lt_pool_default_threads();
    if (threads < 1) threads = 1;
    openblas_set_num_threads(threads);
    if (threads_out) *threads_out = threads;
    if (threads == 1) return LT_OK;
    return lt_pool_create(pool, threads, err);
}
