/*
 * lib/threadpool.c — fixed-size pthread pool with an unbounded FIFO queue (see threadpool.h).
 *
 * One mutex guards the queue and counters; three condition variables: work_cv (a task was
 * queued or the pool is stopping), idle_cv (pending dropped to 0), pf_cv (a parallel_for
 * job finished). `pending` counts tasks queued plus running, so lt_pool_wait waits on it.
 *
 * parallel_for: the range is cut into contiguous chunks (up to 4 per worker) claimed with
 * an atomic counter by the calling thread and by up to `size` helper tasks. The job lives on
 * the heap with a reference count, because helper tasks may still sit in the queue after the
 * caller has run every chunk itself (e.g. when called from a task on a busy pool): they then
 * find no chunk, drop their reference, and the last reference frees the job.
 *
 * Every allocation is checked (NOMEM is returned, or parallel_for falls back to the calling
 * thread); pthread_create/init failures become LT_ERR_INTERNAL; a failing lock/unlock/wait
 * on a valid mutex is a broken invariant and dies with file:line.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "lib/threadpool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct pool_task {
    void (*fn)(void *arg);
    void *arg;
} pool_task;

struct lt_pool {
    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    pthread_cond_t idle_cv;
    pthread_cond_t pf_cv;
    pool_task *q; /* ring buffer */
    size_t qcap, qhead, qlen;
    size_t pending; /* queued + running */
    int stopping;
    int nthreads; /* workers started */
    pthread_t *threads;
};

/* The pool whose worker the current thread is (NULL on other threads). */
static _Thread_local lt_pool *current_pool;

/* Lock operations on a correctly initialised mutex only fail on a broken invariant. */
static void pool_lock(lt_pool *p) {
    int rc = pthread_mutex_lock(&p->mu);
    if (rc != 0) lt_die("pthread_mutex_lock: %s", strerror(rc));
}

static void pool_unlock(lt_pool *p) {
    int rc = pthread_mutex_unlock(&p->mu);
    if (rc != 0) lt_die("pthread_mutex_unlock: %s", strerror(rc));
}

static void pool_wait_cv(pthread_cond_t *cv, lt_pool *p) {
    int rc = pthread_cond_wait(cv, &p->mu);
    if (rc != 0) lt_die("pthread_cond_wait: %s", strerror(rc));
}

static void *worker_main(void *arg) {
    lt_pool *p = arg;
    current_pool = p;
    pool_lock(p);
    for (;;) {
        while (p->qlen == 0 && !p->stopping) pool_wait_cv(&p->work_cv, p);
        if (p->qlen == 0) break; /* stopping and drained */
        pool_task t = p->q[p->qhead];
        p->qhead = (p->qhead + 1) % p->qcap;
        p->qlen--;
        pool_unlock(p);
        t.fn(t.arg);
        pool_lock(p);
        if (--p->pending == 0) pthread_cond_broadcast(&p->idle_cv);
    }
    pool_unlock(p);
    return NULL;
}

int lt_pool_default_threads(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n > LT_POOL_MAX_THREADS ? LT_POOL_MAX_THREADS : n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) return 1;
    return n > LT_POOL_MAX_THREADS ? LT_POOL_MAX_THREADS : (int)n;
}

/* Stop and join the started workers, release everything. Queue must be drained or the
 * workers will drain it. */
static void pool_teardown(lt_pool *p, int have_sync) {
    if (have_sync) {
        pool_lock(p);
        p->stopping = 1;
        pthread_cond_broadcast(&p->work_cv);
        pool_unlock(p);
        for (int i = 0; i < p->nthreads; i++) {
            int rc = pthread_join(p->threads[i], NULL);
            if (rc != 0) lt_die("pthread_join: %s", strerror(rc));
        }
        pthread_cond_destroy(&p->pf_cv);
        pthread_cond_destroy(&p->idle_cv);
        pthread_cond_destroy(&p->work_cv);
        pthread_mutex_destroy(&p->mu);
    }
    free(p->threads);
    free(p->q);
    free(p);
}

/* Initialise the mutex and condition variables; on failure undo the ones done, name the
 * failing call in *what and return its error number. */
static int pool_init_sync(lt_pool *p, const char **what) {
    int rc = pthread_mutex_init(&p->mu, NULL);
    if (rc != 0) {
        *what = "pthread_mutex_init";
        return rc;
    }
    pthread_cond_t *cvs[3] = {&p->work_cv, &p->idle_cv, &p->pf_cv};
    for (int i = 0; i < 3; i++) {
        rc = pthread_cond_init(cvs[i], NULL);
        if (rc != 0) {
            while (i-- > 0) pthread_cond_destroy(cvs[i]);
            pthread_mutex_destroy(&p->mu);
            *what = "pthread_cond_init";
            return rc;
        }
    }
    return 0;
}

lt_status lt_pool_create(lt_pool **out, int nthreads, lt_error *err) {
    *out = NULL;
    if (nthreads > LT_POOL_MAX_THREADS) {
        lt_fail(err, LT_ERR_USAGE, NULL, "thread pool size %d exceeds the maximum %d", nthreads,
                LT_POOL_MAX_THREADS);
        return LT_ERR_USAGE;
    }
    if (nthreads <= 0) nthreads = lt_pool_default_threads();

    lt_pool *p = calloc(1, sizeof *p);
    if (p == NULL) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory creating a thread pool");
    p->threads = calloc((size_t)nthreads, sizeof *p->threads);
    p->qcap = 64;
    p->q = malloc(p->qcap * sizeof *p->q);
    if (p->threads == NULL || p->q == NULL) {
        pool_teardown(p, 0);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory creating a thread pool of %d", nthreads);
    }

    const char *what = NULL;
    int rc = pool_init_sync(p, &what);
    if (rc != 0) {
        pool_teardown(p, 0);
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "creating a thread pool: %s: %s", what, strerror(rc));
    }

    /* workers inherit a fully blocked signal mask */
    sigset_t all, old;
    sigfillset(&all);
    int mask_rc = pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = 0;
    for (int i = 0; i < nthreads; i++) {
        rc = pthread_create(&p->threads[i], NULL, worker_main, p);
        if (rc != 0) break;
        p->nthreads++;
    }
    if (mask_rc == 0) pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        int started = p->nthreads;
        pool_teardown(p, 1);
        lt_fail(err, LT_ERR_INTERNAL, NULL, "creating a thread pool: pthread_create failed after %d of %d threads: %s",
                started, nthreads, strerror(rc));
        lt_error_hint(err, "use fewer threads, or raise the process/thread limits (ulimit -u)");
        return LT_ERR_INTERNAL;
    }
    *out = p;
    return LT_OK;
}

int lt_pool_size(const lt_pool *pool) { return pool->nthreads; }

/* Grow the ring buffer (caller holds the lock). */
static int queue_grow(lt_pool *p) {
    if (p->qcap > SIZE_MAX / 2 / sizeof *p->q) return -1;
    size_t ncap = p->qcap * 2;
    pool_task *nq = malloc(ncap * sizeof *nq);
    if (nq == NULL) return -1;
    for (size_t i = 0; i < p->qlen; i++) nq[i] = p->q[(p->qhead + i) % p->qcap];
    free(p->q);
    p->q = nq;
    p->qcap = ncap;
    p->qhead = 0;
    return 0;
}

lt_status lt_pool_submit(lt_pool *pool, void (*fn)(void *arg), void *arg, lt_error *err) {
    if (pool == NULL || fn == NULL)
        return lt_fail(err, LT_ERR_USAGE, NULL, "lt_pool_submit: %s is NULL", pool == NULL ? "pool" : "task function");
    pool_lock(pool);
    if (pool->qlen == pool->qcap && queue_grow(pool) != 0) {
        size_t qlen = pool->qlen;
        pool_unlock(pool);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory growing the thread pool queue beyond %zu tasks", qlen);
    }
    pool->q[(pool->qhead + pool->qlen) % pool->qcap] = (pool_task){fn, arg};
    pool->qlen++;
    pool->pending++;
    pthread_cond_signal(&pool->work_cv);
    pool_unlock(pool);
    return LT_OK;
}

void lt_pool_wait(lt_pool *pool) {
    if (current_pool == pool)
        lt_die("lt_pool_wait called from a task of the same pool (it would wait for itself)");
    pool_lock(pool);
    while (pool->pending > 0) pool_wait_cv(&pool->idle_cv, pool);
    pool_unlock(pool);
}

void lt_pool_destroy(lt_pool *pool) {
    if (pool == NULL) return;
    if (current_pool == pool)
        lt_die("lt_pool_destroy called from a task of the same pool (it would join itself)");
    pool_teardown(pool, 1);
}

/* ---- parallel_for ---- */

typedef struct pf_job {
    void (*fn)(size_t i, void *arg);
    void *arg;
    size_t n, chunk, nchunks;
    atomic_size_t next; /* next chunk to claim */
    atomic_size_t done; /* chunks finished */
    atomic_int refs;    /* caller + queued/running helpers */
    int finished;       /* all chunks done; guarded by pool->mu */
    lt_pool *pool;
} pf_job;

static void pf_run_chunks(pf_job *job) {
    for (;;) {
        size_t c = atomic_fetch_add(&job->next, 1);
        if (c >= job->nchunks) return;
        size_t lo = c * job->chunk;
        size_t hi = job->n - lo < job->chunk ? job->n : lo + job->chunk;
        for (size_t i = lo; i < hi; i++) job->fn(i, job->arg);
        if (atomic_fetch_add(&job->done, 1) + 1 == job->nchunks) {
            pool_lock(job->pool);
            job->finished = 1;
            pthread_cond_broadcast(&job->pool->pf_cv);
            pool_unlock(job->pool);
        }
    }
}

static void pf_release(pf_job *job) {
    if (atomic_fetch_sub(&job->refs, 1) == 1) free(job);
}

static void pf_helper(void *arg) {
    pf_job *job = arg;
    pf_run_chunks(job);
    pf_release(job);
}

lt_status lt_pool_parallel_for(lt_pool *pool, size_t n, void (*fn)(size_t i, void *arg), void *arg,
                               lt_error *err) {
    if (pool == NULL || fn == NULL)
        return lt_fail(err, LT_ERR_USAGE, NULL, "lt_pool_parallel_for: %s is NULL",
                       pool == NULL ? "pool" : "function");
    if (n == 0) return LT_OK;

    /* up to 4 chunks per worker for load balance, each contiguous */
    size_t workers = (size_t)pool->nthreads;
    size_t target = workers <= SIZE_MAX / 4 ? 4 * workers : workers;
    size_t nchunks = n < target ? n : target;
    size_t chunk = n / nchunks + (n % nchunks != 0);
    nchunks = n / chunk + (n % chunk != 0);

    size_t helpers = nchunks - 1 < workers ? nchunks - 1 : workers;
    pf_job *job = helpers > 0 ? malloc(sizeof *job) : NULL;
    if (job == NULL) { /* one chunk, or no memory for the job: run here */
        for (size_t i = 0; i < n; i++) fn(i, arg);
        return LT_OK;
    }
    job->fn = fn;
    job->arg = arg;
    job->n = n;
    job->chunk = chunk;
    job->nchunks = nchunks;
    atomic_init(&job->next, 0);
    atomic_init(&job->done, 0);
    atomic_init(&job->refs, (int)helpers + 1);
    job->finished = 0;
    job->pool = pool;

    for (size_t h = 0; h < helpers; h++) {
        if (lt_pool_submit(pool, pf_helper, job, NULL) != LT_OK) {
            /* out of memory: drop the references of the helpers never queued */
            atomic_fetch_sub(&job->refs, (int)(helpers - h));
            break;
        }
    }
    pf_run_chunks(job);
    pool_lock(pool);
    while (!job->finished) pool_wait_cv(&pool->pf_cv, pool);
    pool_unlock(pool);
    pf_release(job);
    (void)err;
    return LT_OK;
}
