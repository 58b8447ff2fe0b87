/*
 * tests/lib/test_threadpool.c — unit tests for lib/threadpool (cmocka).
 *
 * Covers: many tasks summing with atomics, wait semantics, parallel_for covering each index
 * exactly once (n = 0, 1, odd, large; several pool sizes; nested; concurrent callers), pool
 * of size 1 (FIFO order), destroy with pending tasks, nested submit, argument errors, and
 * the detected misuse (lt_pool_wait from a task) in a forked child.
 * Meant to be clean under ASan+UBSan, valgrind and TSan.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/threadpool.h"
#include "tests/testutil.h"

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static lt_pool *make_pool(int n) {
    lt_pool *p = NULL;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_pool_create(&p, n, &err);
    if (st != LT_OK) fprintf(stderr, "lt_pool_create: %s\n", err.what);
    assert_int_equal(st, LT_OK);
    assert_non_null(p);
    return p;
}

/* ---- sum ---- */

typedef struct {
    atomic_llong sum;
    atomic_int count;
} sum_ctx;

typedef struct {
    sum_ctx *ctx;
    long long value;
} sum_arg;

static void add_task(void *arg) {
    sum_arg *a = arg;
    atomic_fetch_add(&a->ctx->sum, a->value);
    atomic_fetch_add(&a->ctx->count, 1);
}

static void test_sum(void **state) {
    (void)state;
    lt_pool *p = make_pool(4);
    assert_int_equal(lt_pool_size(p), 4);
    enum { N = 20000 };
    sum_arg *args = calloc(N, sizeof *args);
    assert_non_null(args);
    sum_ctx ctx;
    atomic_init(&ctx.sum, 0);
    atomic_init(&ctx.count, 0);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            args[i].ctx = &ctx;
            args[i].value = i + 1;
            assert_int_equal(lt_pool_submit(p, add_task, &args[i], NULL), LT_OK);
        }
        lt_pool_wait(p);
        assert_int_equal(atomic_load(&ctx.count), (round + 1) * N);
        assert_true(atomic_load(&ctx.sum) == (long long)(round + 1) * N * (N + 1) / 2);
    }
    lt_pool_destroy(p);
    free(args);
}

/* ---- wait semantics ---- */

typedef struct {
    atomic_int done[64];
} flags_ctx;

typedef struct {
    flags_ctx *ctx;
    int i;
} flag_arg;

static void slow_flag_task(void *arg) {
    flag_arg *a = arg;
    sleep_us(200 * (a->i % 7));
    atomic_store(&a->ctx->done[a->i], 1);
}

static void test_wait(void **state) {
    (void)state;
    lt_pool *p = make_pool(3);
    lt_pool_wait(p); /* idle pool: returns at once */
    flags_ctx ctx;
    flag_arg args[64];
    for (int i = 0; i < 64; i++) atomic_init(&ctx.done[i], 0);
    for (int i = 0; i < 64; i++) {
        args[i] = (flag_arg){&ctx, i};
        assert_int_equal(lt_pool_submit(p, slow_flag_task, &args[i], NULL), LT_OK);
    }
    lt_pool_wait(p);
    for (int i = 0; i < 64; i++) assert_int_equal(atomic_load(&ctx.done[i]), 1);
    lt_pool_wait(p); /* again: still idle */
    /* the pool is reusable after a wait */
    for (int i = 0; i < 64; i++) atomic_store(&ctx.done[i], 0);
    for (int i = 0; i < 64; i++) assert_int_equal(lt_pool_submit(p, slow_flag_task, &args[i], NULL), LT_OK);
    lt_pool_wait(p);
    for (int i = 0; i < 64; i++) assert_int_equal(atomic_load(&ctx.done[i]), 1);
    lt_pool_destroy(p);
}

/* ---- parallel_for ---- */

typedef struct {
    atomic_int *hits;
    size_t n;
    atomic_int bad;
} pf_ctx;

static void pf_mark(size_t i, void *arg) {
    pf_ctx *c = arg;
    if (i >= c->n) {
        atomic_fetch_add(&c->bad, 1);
        return;
    }
    atomic_fetch_add(&c->hits[i], 1);
}

static void check_parallel_for(lt_pool *p, size_t n) {
    pf_ctx c;
    c.n = n;
    c.hits = calloc(n ? n : 1, sizeof *c.hits);
    assert_non_null(c.hits);
    for (size_t i = 0; i < n; i++) atomic_init(&c.hits[i], 0);
    atomic_init(&c.bad, 0);
    lt_error err;
    lt_error_clear(&err);
    assert_int_equal(lt_pool_parallel_for(p, n, pf_mark, &c, &err), LT_OK);
    assert_int_equal(atomic_load(&c.bad), 0);
    for (size_t i = 0; i < n; i++) {
        if (atomic_load(&c.hits[i]) != 1) fail_msg("n=%zu index %zu ran %d times", n, i, atomic_load(&c.hits[i]));
    }
    free(c.hits);
}

static void test_parallel_for(void **state) {
    (void)state;
    static const int sizes[] = {1, 2, 3, 8};
    static const size_t ns[] = {0, 1, 2, 3, 7, 31, 33, 1001, 4099, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        lt_pool *p = make_pool(sizes[s]);
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) check_parallel_for(p, ns[k]);
        lt_pool_destroy(p);
    }
}

static void pf_never(size_t i, void *arg) {
    (void)i;
    (void)arg;
    fail_msg("fn called for n = 0");
}

static void test_parallel_for_zero_and_args(void **state) {
    (void)state;
    lt_pool *p = make_pool(2);
    assert_int_equal(lt_pool_parallel_for(p, 0, pf_never, NULL, NULL), LT_OK);
    lt_error err;
    lt_error_clear(&err);
    assert_int_equal(lt_pool_parallel_for(p, 10, NULL, NULL, &err), LT_ERR_USAGE);
    assert_int_equal(err.status, LT_ERR_USAGE);
    lt_error_clear(&err);
    assert_int_equal(lt_pool_submit(p, NULL, NULL, &err), LT_ERR_USAGE);
    assert_non_null(strstr(err.what, "NULL"));
    lt_pool_destroy(p);
}

/* parallel_for whose body calls parallel_for (nested), run from tasks and from the caller */
typedef struct {
    lt_pool *pool;
    atomic_int *hits; /* OUTER x INNER */
} nested_ctx;

enum { OUTER = 9, INNER = 101 };

typedef struct {
    nested_ctx *c;
    size_t o;
} inner_arg;

static void pf_inner(size_t i, void *arg) {
    inner_arg *a = arg;
    atomic_fetch_add(&a->c->hits[a->o * INNER + i], 1);
}

static void pf_outer(size_t o, void *arg) {
    nested_ctx *c = arg;
    inner_arg a = {c, o};
    assert_int_equal(lt_pool_parallel_for(c->pool, INNER, pf_inner, &a, NULL), LT_OK);
}

static void test_nested_parallel_for(void **state) {
    (void)state;
    for (int size = 1; size <= 4; size += 3) {
        lt_pool *p = make_pool(size);
        nested_ctx c = {p, calloc(OUTER * INNER, sizeof(atomic_int))};
        assert_non_null(c.hits);
        for (int i = 0; i < OUTER * INNER; i++) atomic_init(&c.hits[i], 0);
        assert_int_equal(lt_pool_parallel_for(p, OUTER, pf_outer, &c, NULL), LT_OK);
        for (int i = 0; i < OUTER * INNER; i++) assert_int_equal(atomic_load(&c.hits[i]), 1);
        lt_pool_destroy(p);
        free(c.hits);
    }
}

/* parallel_for called from inside a plain task, on a pool of size 1 (the only worker is
 * busy running the caller): must not deadlock */
typedef struct {
    lt_pool *pool;
    size_t n;
    atomic_int *hits;
    atomic_int done;
} task_pf_ctx;

static void pf_hit(size_t i, void *arg) {
    task_pf_ctx *c = arg;
    atomic_fetch_add(&c->hits[i], 1);
}

static void task_calls_pf(void *arg) {
    task_pf_ctx *c = arg;
    assert_int_equal(lt_pool_parallel_for(c->pool, c->n, pf_hit, c, NULL), LT_OK);
    atomic_store(&c->done, 1);
}

static void test_parallel_for_in_task(void **state) {
    (void)state;
    lt_pool *p = make_pool(1);
    task_pf_ctx c;
    c.pool = p;
    c.n = 5000;
    c.hits = calloc(c.n, sizeof *c.hits);
    assert_non_null(c.hits);
    for (size_t i = 0; i < c.n; i++) atomic_init(&c.hits[i], 0);
    atomic_init(&c.done, 0);
    assert_int_equal(lt_pool_submit(p, task_calls_pf, &c, NULL), LT_OK);
    lt_pool_wait(p);
    assert_int_equal(atomic_load(&c.done), 1);
    for (size_t i = 0; i < c.n; i++) assert_int_equal(atomic_load(&c.hits[i]), 1);
    lt_pool_destroy(p);
    free(c.hits);
}

/* several external threads calling parallel_for on one pool at once */
typedef struct {
    lt_pool *pool;
    size_t n;
    atomic_int *hits;
} ext_ctx;

static void ext_hit(size_t i, void *arg) {
    ext_ctx *c = arg;
    atomic_fetch_add(&c->hits[i], 1);
}

static void *ext_thread(void *arg) {
    ext_ctx *c = arg;
    for (int r = 0; r < 20; r++)
        if (lt_pool_parallel_for(c->pool, c->n, ext_hit, c, NULL) != LT_OK) return (void *)1;
    return NULL;
}

static void test_concurrent_parallel_for(void **state) {
    (void)state;
    lt_pool *p = make_pool(3);
    enum { T = 4 };
    ext_ctx ctx[T];
    pthread_t th[T];
    for (int t = 0; t < T; t++) {
        ctx[t].pool = p;
        ctx[t].n = 997 + (size_t)t * 10;
        ctx[t].hits = calloc(ctx[t].n, sizeof(atomic_int));
        assert_non_null(ctx[t].hits);
        for (size_t i = 0; i < ctx[t].n; i++) atomic_init(&ctx[t].hits[i], 0);
        assert_int_equal(pthread_create(&th[t], NULL, ext_thread, &ctx[t]), 0);
    }
    for (int t = 0; t < T; t++) {
        void *ret;
        assert_int_equal(pthread_join(th[t], &ret), 0);
        assert_null(ret);
        for (size_t i = 0; i < ctx[t].n; i++) assert_int_equal(atomic_load(&ctx[t].hits[i]), 20);
        free(ctx[t].hits);
    }
    lt_pool_destroy(p);
}

/* ---- pool of size 1: FIFO ---- */

typedef struct {
    int order[100];
    atomic_int next;
} order_ctx;

typedef struct {
    order_ctx *c;
    int id;
} order_arg;

static void order_task(void *arg) {
    order_arg *a = arg;
    int slot = atomic_fetch_add(&a->c->next, 1);
    a->c->order[slot] = a->id;
}

static void test_size_one(void **state) {
    (void)state;
    lt_pool *p = make_pool(1);
    assert_int_equal(lt_pool_size(p), 1);
    order_ctx c;
    atomic_init(&c.next, 0);
    order_arg args[100];
    for (int i = 0; i < 100; i++) {
        args[i] = (order_arg){&c, i};
        assert_int_equal(lt_pool_submit(p, order_task, &args[i], NULL), LT_OK);
    }
    lt_pool_wait(p);
    assert_int_equal(atomic_load(&c.next), 100);
    for (int i = 0; i < 100; i++) assert_int_equal(c.order[i], i);
    lt_pool_destroy(p);
}

/* ---- destroy with pending tasks ---- */

static void slow_count(void *arg) {
    sleep_us(50);
    atomic_fetch_add((atomic_int *)arg, 1);
}

static void test_destroy_runs_pending(void **state) {
    (void)state;
    atomic_int count;
    atomic_init(&count, 0);
    lt_pool *p = make_pool(2);
    for (int i = 0; i < 500; i++) assert_int_equal(lt_pool_submit(p, slow_count, &count, NULL), LT_OK);
    lt_pool_destroy(p); /* no wait first */
    assert_int_equal(atomic_load(&count), 500);
    lt_pool_destroy(NULL); /* NULL-safe */
}

/* ---- nested submit: a binary tree of tasks ---- */

typedef struct {
    lt_pool *pool;
    atomic_int count;
    atomic_int errors;
} tree_ctx;

typedef struct tree_arg {
    tree_ctx *c;
    int depth;
} tree_arg;

static void tree_task(void *arg) {
    tree_arg *a = arg;
    tree_ctx *c = a->c;
    int depth = a->depth;
    free(a);
    atomic_fetch_add(&c->count, 1);
    if (depth == 0) return;
    for (int k = 0; k < 2; k++) {
        tree_arg *child = malloc(sizeof *child);
        if (child == NULL) {
            atomic_fetch_add(&c->errors, 1);
            continue;
        }
        *child = (tree_arg){c, depth - 1};
        if (lt_pool_submit(c->pool, tree_task, child, NULL) != LT_OK) {
            free(child);
            atomic_fetch_add(&c->errors, 1);
        }
    }
}

static void run_tree(int size, int depth, int destroy_without_wait) {
    tree_ctx c;
    c.pool = make_pool(size);
    atomic_init(&c.count, 0);
    atomic_init(&c.errors, 0);
    tree_arg *root = malloc(sizeof *root);
    assert_non_null(root);
    *root = (tree_arg){&c, depth};
    assert_int_equal(lt_pool_submit(c.pool, tree_task, root, NULL), LT_OK);
    if (!destroy_without_wait) {
        lt_pool_wait(c.pool);
        assert_int_equal(atomic_load(&c.count), (1 << (depth + 1)) - 1);
    }
    lt_pool_destroy(c.pool); /* must also run tasks submitted by tasks during destroy */
    assert_int_equal(atomic_load(&c.errors), 0);
    assert_int_equal(atomic_load(&c.count), (1 << (depth + 1)) - 1);
}

static void test_nested_submit(void **state) {
    (void)state;
    run_tree(1, 10, 0);
    run_tree(4, 12, 0);
    run_tree(1, 8, 1);
    run_tree(3, 10, 1);
}

/* ---- creation arguments ---- */

static void test_create_args(void **state) {
    (void)state;
    lt_pool *p = make_pool(0);
    assert_true(lt_pool_size(p) >= 1);
    lt_pool_destroy(p);
    p = make_pool(-3);
    assert_true(lt_pool_size(p) >= 1);
    lt_pool_destroy(p);

    lt_error err;
    lt_error_clear(&err);
    p = (lt_pool *)&err; /* must be reset to NULL on failure */
    assert_int_equal(lt_pool_create(&p, LT_POOL_MAX_THREADS + 1, &err), LT_ERR_USAGE);
    assert_null(p);
    assert_int_equal(err.status, LT_ERR_USAGE);
    assert_non_null(strstr(err.what, "exceeds"));
    assert_int_equal(lt_pool_create(&p, LT_POOL_MAX_THREADS + 1, NULL), LT_ERR_USAGE);

    /* a largish pool starts and stops cleanly */
    p = make_pool(64);
    assert_int_equal(lt_pool_size(p), 64);
    check_parallel_for(p, 100);
    lt_pool_destroy(p);
}

/* ---- detected misuse: lt_pool_wait from a task of the same pool exits 1 ---- */

static void wait_in_task(void *arg) { lt_pool_wait((lt_pool *)arg); }

static void wait_from_own_task(void *arg) {
    (void)arg;
    lt_pool *p = NULL;
    if (lt_pool_create(&p, 2, NULL) != LT_OK) _exit(4);
    if (lt_pool_submit(p, wait_in_task, p, NULL) != LT_OK) _exit(5);
    sleep(20); /* the task exits the process long before */
    _exit(6);
}

static void test_wait_in_task_dies(void **state) {
    (void)state;
    char report[1024];
    assert_int_equal(lt_test_in_child(wait_from_own_task, NULL, report, sizeof report), 1);
    assert_non_null(strstr(report, "threadpool.c:"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum),
        cmocka_unit_test(test_wait),
        cmocka_unit_test(test_parallel_for),
        cmocka_unit_test(test_parallel_for_zero_and_args),
        cmocka_unit_test(test_nested_parallel_for),
        cmocka_unit_test(test_parallel_for_in_task),
        cmocka_unit_test(test_concurrent_parallel_for),
        cmocka_unit_test(test_size_one),
        cmocka_unit_test(test_destroy_runs_pending),
        cmocka_unit_test(test_nested_submit),
        cmocka_unit_test(test_create_args),
        cmocka_unit_test(test_wait_in_task_dies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
