/*
 * lib/threadpool.h — a fixed-size pool of worker threads (POSIX threads).
 *
 * A pool owns N worker threads and an unbounded FIFO queue of tasks (fn, arg). Tasks are
 * started in submission order; with N > 1 they run concurrently and finish in any order.
 *
 *     lt_pool *pool;
 *     if (lt_pool_create(&pool, 0, &err) != LT_OK) return lt_error_exit(&err);
 *     lt_pool_parallel_for(pool, n, work, ctx, &err);   // fn(i, ctx) for every i in [0, n)
 *     lt_pool_destroy(pool);
 *
 * Contract
 *   - lt_pool_submit never blocks on queue capacity (the queue grows), so a task may submit
 *     further tasks — to any pool — without deadlock.
 *   - lt_pool_wait blocks until every task submitted so far (and every task those submit
 *     before the pool goes idle) has finished. Calling lt_pool_wait or lt_pool_destroy from
 *     a task running on the same pool would wait for itself: it is a programming error,
 *     detected, reported with file:line and the process exits (LT_CHECK style).
 *   - lt_pool_parallel_for runs fn(i, arg) exactly once for each i in [0, n), in contiguous
 *     chunks, and returns when all have finished. The calling thread runs chunks too, so it
 *     is safe to call from inside a task (nested parallelism cannot deadlock, even on a pool
 *     of size 1) and from several threads at once. It waits only for its own chunks, not
 *     for unrelated tasks.
 *   - lt_pool_destroy runs every task still queued (including ones those tasks submit),
 *     joins the threads and frees the pool. NULL-safe. No submit may race with destroy from
 *     outside the pool's own tasks.
 *   - The pool does not catch anything: a task must not call pthread_exit or longjmp out.
 *   - Worker threads start with all signals blocked, so asynchronous signals (SIGINT,
 *     SIGTERM, ...) are delivered to the program's own threads.
 *
 * Errors: lt_pool_create and lt_pool_submit return an lt_status and fill the optional
 * lt_error: LT_ERR_USAGE for a bad argument (nthreads too large, NULL fn), LT_ERR_NOMEM when
 * the queue cannot grow, LT_ERR_INTERNAL when a pthread call fails (the message names the
 * call and strerror). Nothing prints or exits except the misuse checks above.
 *
 * Thread-safety: every function except lt_pool_destroy may be called concurrently from any
 * thread, including the pool's own workers.
 */
#ifndef LT_THREADPOOL_H
#define LT_THREADPOOL_H

#include <stddef.h>

#include "lib/error.h"

/* Upper bound on nthreads accepted by lt_pool_create. */
#define LT_POOL_MAX_THREADS 1024

typedef struct lt_pool lt_pool;

/* Create a pool of `nthreads` workers; nthreads <= 0 means the number of CPUs this process
 * may run on: its CPU affinity mask (sched_getaffinity — what a Slurm/cgroup allocation or
 * taskset grants), falling back to the online CPUs (sysconf(_SC_NPROCESSORS_ONLN)); at least
 * 1, at most LT_POOL_MAX_THREADS. On failure *out is NULL. */
lt_status lt_pool_create(lt_pool **out, int nthreads, lt_error *err);

/* The thread count lt_pool_create uses for nthreads <= 0: the CPUs of this process's
 * affinity mask, else the online CPUs; in [1, LT_POOL_MAX_THREADS]. */
int lt_pool_default_threads(void);

/* Queue fn(arg) to run on a worker. */
lt_status lt_pool_submit(lt_pool *pool, void (*fn)(void *arg), void *arg, lt_error *err);

/* Block until the pool is idle: no task queued or running. Not from a task of this pool. */
void lt_pool_wait(lt_pool *pool);

/* Run the remaining queued tasks, join the workers, free the pool. NULL-safe. Not from a
 * task of this pool. */
void lt_pool_destroy(lt_pool *pool);

/* Number of worker threads. */
int lt_pool_size(const lt_pool *pool);

/* Run fn(i, arg) for each i in [0, n) on the pool and the calling thread; returns when all
 * have finished. n == 0 returns at once. If helper tasks cannot be queued (out of memory)
 * the calling thread runs the remaining chunks itself, so this returns LT_OK whenever every
 * fn(i) ran; the status is kept for future failure modes. */
lt_status lt_pool_parallel_for(lt_pool *pool, size_t n, void (*fn)(size_t i, void *arg), void *arg,
                               lt_error *err);

#endif /* LT_THREADPOOL_H */
