/*
 * train/cpu/threads.h — the CPU backend's threads: one count for OpenBLAS's GEMM threads and the
 * thread pool of the other kernels (train.threads; 0 = one per available CPU).
 */
#ifndef LT_TRAIN_CPU_H
#define LT_TRAIN_CPU_H

#include "lib/error.h"      /* lt_status, lt_error */
#include "lib/threadpool.h" /* lt_pool */

/* Set OpenBLAS to `threads` (<= 0: lt_pool_default_threads()) and create the kernels' pool
 * (*pool = NULL for one thread: the kernels then run on the caller). */
lt_status lt_cpu_init(int threads, lt_pool **pool, int *threads_out, lt_error *err);

#endif /* LT_TRAIN_CPU_H */
