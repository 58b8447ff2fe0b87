/*
 * plans/batches/steps.c — plan many steps on several threads, in order (plans/batches/steps.h).
 *
 * Workers claim step indices in increasing order from a shared counter and plan them into
 * a ring of 4 x threads slots; the calling thread takes the slots back in index order and
 * runs the callback. A worker waits when its index is a full window ahead of the last one
 * delivered, so at most `window` steps' plans exist at a time.
 */
#include "plans/batches/steps.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/threadpool.h" /* lt_pool_default_threads, LT_POOL_MAX_THREADS */

typedef enum { SLOT_EMPTY = 0, SLOT_READY = 1 } slot_state;

typedef struct slot {
    slot_state state;
    lt_sample *samples;   /* [B] */
    size_t n;             /* samples of the step (B unless a token budget) */
    int64_t *lengths;     /* [B] */
    lt_step_plan *plans;  /* [n_strategies] */
    lt_status *status;    /* [n_strategies] */
    lt_error *errors;     /* [n_strategies] */
} slot;

typedef struct worker {
    struct shared *sh;
    lt_sampler *sampler;
    lt_strategies **planners; /* [n_strategies]: one per strategy keeps each one's scratch warm */
    pthread_t thread;
    bool started;
} worker;

typedef struct shared {
    /* request */
    const lt_strategy *strategies;
    size_t n_strategies;
    const uint64_t *steps;
    size_t n_steps;
    size_t batch; /* samples per step */
    /* ring */
    slot *slots;
    size_t window;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t next;      /* next index to claim */
    size_t delivered; /* indices below this were handed to the callback */
    bool stop;
    bool failed;      /* a worker hit a fatal error (sampling) */
    lt_status fail_status;
    lt_error fail_err;
} shared;

int lt_plan_steps_threads(int threads) {
    if (threads > 0) return threads > LT_POOL_MAX_THREADS ? LT_POOL_MAX_THREADS : threads;
    return lt_pool_default_threads();
}

/* Plan step index i into slot s with worker w's sampler and planners. Returns non-OK only
 * for a sampling failure (fatal); a strategy's failure is recorded in the slot. */
static lt_status plan_one(const shared *sh, worker *w, size_t i, slot *s, lt_error *err) {
    uint64_t step = sh->steps[i];
    lt_status st = lt_sampler_step_n(w->sampler, step, s->samples, &s->n, err);
    if (st != LT_OK) return st;
    for (size_t j = 0; j < s->n; j++) s->lengths[j] = s->samples[j].length;
    for (size_t k = 0; k < sh->n_strategies; k++) {
        lt_error_clear(&s->errors[k]);
        s->status[k] = lt_strategies_plan_step(w->planners[k], sh->strategies[k], step, s->lengths, s->n,
                                            &s->plans[k], &s->errors[k]);
    }
    return LT_OK;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    shared *sh = w->sh;
    for (;;) {
        pthread_mutex_lock(&sh->mu);
        while (!sh->stop && sh->next < sh->n_steps && sh->next >= sh->delivered + sh->window)
            pthread_cond_wait(&sh->cv, &sh->mu);
        if (sh->stop || sh->next >= sh->n_steps) {
            pthread_mutex_unlock(&sh->mu);
            return NULL;
        }
        size_t i = sh->next++;
        pthread_mutex_unlock(&sh->mu);

        slot *s = &sh->slots[i % sh->window];
        lt_error err;
        lt_error_clear(&err);
        lt_status st = plan_one(sh, w, i, s, &err);

        pthread_mutex_lock(&sh->mu);
        if (st != LT_OK) {
            if (!sh->failed) {
                sh->failed = true;
                sh->fail_status = st;
                sh->fail_err = err;
            }
            sh->stop = true;
        } else {
            s->state = SLOT_READY;
        }
        pthread_cond_broadcast(&sh->cv);
        pthread_mutex_unlock(&sh->mu);
    }
}

static void worker_free(worker *w, size_t n_strategies) {
    lt_sampler_free(w->sampler);
    if (w->planners)
        for (size_t k = 0; k < n_strategies; k++) lt_strategies_free(w->planners[k]);
    free(w->planners);
}

static lt_status worker_init(worker *w, shared *sh, const lt_corpus *corpus, const lt_sampler_config *sc,
                             const lt_plan_config *pc, lt_error *err) {
    memset(w, 0, sizeof *w);
    w->sh = sh;
    lt_status st = lt_sampler_create(&w->sampler, corpus, sc, err);
    if (st != LT_OK) return st;
    w->planners = lt_calloc_check(sh->n_strategies, sizeof *w->planners);
    for (size_t k = 0; k < sh->n_strategies; k++)
        if ((st = lt_strategies_create(&w->planners[k], pc, err)) != LT_OK) return st;
    return LT_OK;
}

static void slots_free(slot *slots, size_t window, size_t n_strategies) {
    if (!slots) return;
    for (size_t i = 0; i < window; i++) {
        slot *s = &slots[i];
        if (s->plans)
            for (size_t k = 0; k < n_strategies; k++) lt_step_plan_free(&s->plans[k]);
        free(s->plans);
        free(s->status);
        free(s->errors);
        free(s->samples);
        free(s->lengths);
    }
    free(slots);
}

lt_status lt_plan_steps(const lt_corpus *corpus, const lt_sampler_config *sc, const lt_plan_config *pc,
                        const lt_strategy *strategies, size_t n_strategies, const uint64_t *steps, size_t n_steps,
                        int threads, lt_step_callback cb, void *cb_ctx, lt_error *err) {
    LT_CHECK(n_strategies >= 1 && cb != NULL);
    if (n_steps == 0) return LT_OK;
    if (sc->global_batch < 1) return lt_fail(err, LT_ERR_USAGE, NULL, "plan.global_batch must be at least 1");
    int nthreads = lt_plan_steps_threads(threads);
    if ((size_t)nthreads > n_steps) nthreads = (int)n_steps;

    shared sh;
    memset(&sh, 0, sizeof sh);
    sh.strategies = strategies;
    sh.n_strategies = n_strategies;
    sh.steps = steps;
    sh.n_steps = n_steps;
    sh.batch = (size_t)sc->global_batch;
    sh.window = nthreads == 1 ? 1 : 4 * (size_t)nthreads;
    sh.slots = lt_calloc_check(sh.window, sizeof *sh.slots);
    for (size_t i = 0; i < sh.window; i++) {
        slot *s = &sh.slots[i];
        s->samples = lt_calloc_check(sh.batch, sizeof *s->samples);
        s->lengths = lt_calloc_check(sh.batch, sizeof *s->lengths);
        s->plans = lt_calloc_check(n_strategies, sizeof *s->plans);
        s->status = lt_calloc_check(n_strategies, sizeof *s->status);
        s->errors = lt_calloc_check(n_strategies, sizeof *s->errors);
        for (size_t k = 0; k < n_strategies; k++) lt_step_plan_init(&s->plans[k]);
    }

    worker *workers = lt_calloc_check((size_t)nthreads, sizeof *workers);
    lt_status st = LT_OK;
    int made = 0;
    for (; made < nthreads && st == LT_OK; made++) st = worker_init(&workers[made], &sh, corpus, sc, pc, err);

    if (st == LT_OK && nthreads == 1) {
        /* On the calling thread: plan, deliver, repeat. */
        for (size_t i = 0; i < n_steps && st == LT_OK; i++) {
            slot *s = &sh.slots[0];
            if ((st = plan_one(&sh, &workers[0], i, s, err)) != LT_OK) break;
            lt_planned_step ps = {steps[i], i, s->n, s->samples, s->status, s->errors, s->plans};
            st = cb(cb_ctx, &ps, err);
        }
    } else if (st == LT_OK) {
        pthread_mutex_init(&sh.mu, NULL);
        pthread_cond_init(&sh.cv, NULL);
        int started = 0;
        for (; started < nthreads; started++) {
            if (pthread_create(&workers[started].thread, NULL, worker_main, &workers[started]) != 0) {
                st = lt_fail(err, LT_ERR_INTERNAL, NULL, "cannot start planning thread %d of %d", started + 1,
                             nthreads);
                break;
            }
            workers[started].started = true;
        }
        for (size_t i = 0; i < n_steps && st == LT_OK; i++) {
            slot *s = &sh.slots[i % sh.window];
            pthread_mutex_lock(&sh.mu);
            while (s->state != SLOT_READY && !sh.failed && started > 0) pthread_cond_wait(&sh.cv, &sh.mu);
            bool failed = sh.failed;
            pthread_mutex_unlock(&sh.mu);
            if (failed || started == 0) break;
            lt_planned_step ps = {steps[i], i, s->n, s->samples, s->status, s->errors, s->plans};
            st = cb(cb_ctx, &ps, err);
            pthread_mutex_lock(&sh.mu);
            s->state = SLOT_EMPTY;
            sh.delivered = i + 1;
            if (st != LT_OK) sh.stop = true;
            pthread_cond_broadcast(&sh.cv);
            pthread_mutex_unlock(&sh.mu);
        }
        pthread_mutex_lock(&sh.mu);
        sh.stop = true;
        pthread_cond_broadcast(&sh.cv);
        pthread_mutex_unlock(&sh.mu);
        for (int t = 0; t < started; t++) pthread_join(workers[t].thread, NULL);
        if (st == LT_OK && sh.failed) {
            st = sh.fail_status;
            if (err) *err = sh.fail_err;
        }
        pthread_cond_destroy(&sh.cv);
        pthread_mutex_destroy(&sh.mu);
    }
    for (int t = 0; t < made; t++) worker_free(&workers[t], n_strategies);
    free(workers);
    slots_free(sh.slots, sh.window, n_strategies);
    return st;
}
