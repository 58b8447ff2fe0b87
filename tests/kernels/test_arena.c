/*
 * tests/kernels/test_arena.c — the device arena's bookkeeping (kernels/arena.h) over a
 * fake base address that is never dereferenced: alignment, best fit, merging with free
 * neighbours on both sides, the exhaustion message, the peak, and a randomized trace of
 * allocations and frees checked step by step against a reference model (a map of
 * 256-byte units, best fit computed from scratch every time).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels/arena.h"

#define A LT_ARENA_ALIGN
#define FAKE_BASE ((void *)(uintptr_t)0x7f0000000000ull) /* aligned; never read */

static lt_arena *make(void *base, size_t size) {
    lt_arena *a = NULL;
    lt_error err;
    assert_int_equal(lt_arena_create(&a, base, size, &err), LT_OK);
    return a;
}

static void *alloc_ok(lt_arena *a, size_t bytes) {
    void *p = NULL;
    lt_error err;
    lt_status st = lt_arena_alloc(a, bytes, "a test tensor", &p, &err);
    if (st != LT_OK) fail_msg("alloc %zu: %s", bytes, err.what);
    return p;
}

static void free_ok(lt_arena *a, void *p) {
    lt_error err;
    lt_status st = lt_arena_free(a, p, &err);
    if (st != LT_OK) fail_msg("free %p: %s", p, err.what);
}

static size_t off(const lt_arena *a, const void *p) { return (size_t)((uintptr_t)p - (uintptr_t)lt_arena_base(a)); }

static void test_alignment_and_rounding(void **state) {
    (void)state;
    /* an unaligned base moves up to the next 256 multiple; the size shrinks by the shift
     * and rounds down */
    lt_arena *a = make((void *)((uintptr_t)FAKE_BASE + 10), 10 * A + 100);
    assert_int_equal((uintptr_t)lt_arena_base(a) % A, 0);
    assert_ptr_equal(lt_arena_base(a), (void *)((uintptr_t)FAKE_BASE + A));
    assert_int_equal(lt_arena_size(a), 9 * A); /* 10*256 + 100 - 246 = 2414 -> 9 units */
    void *p1 = alloc_ok(a, 1), *p2 = alloc_ok(a, 0), *p3 = alloc_ok(a, A + 1), *p4 = alloc_ok(a, A);
    assert_int_equal((uintptr_t)p1 % A, 0);
    assert_int_equal(off(a, p1), 0);
    assert_int_equal(off(a, p2), A); /* 0 bytes still gets its own address */
    assert_int_equal(off(a, p3), 2 * A);
    assert_int_equal(off(a, p4), 4 * A); /* A + 1 took two units */
    assert_int_equal(lt_arena_used(a), 5 * A);
    assert_int_equal(lt_arena_live(a), 4);
    lt_arena_destroy(a);
}

static void test_too_small_to_hold_a_block(void **state) {
    (void)state;
    lt_arena *a = NULL;
    lt_error err;
    assert_int_equal(lt_arena_create(&a, (void *)((uintptr_t)FAKE_BASE + 1), A, &err), LT_ERR_INPUT);
    assert_null(a);
    assert_non_null(strstr(err.what, "holds no 256-byte aligned block"));
    assert_int_equal(lt_arena_create(&a, FAKE_BASE, A - 1, &err), LT_ERR_INPUT);
}

static void test_best_fit_picks_smallest_hole(void **state) {
    (void)state;
    /* layout: [h5 | x | h2 | x | h3 | x | rest] with holes of 5, 2 and 3 units */
    lt_arena *a = make(FAKE_BASE, 100 * A);
    void *h5 = alloc_ok(a, 5 * A), *x1 = alloc_ok(a, A), *h2 = alloc_ok(a, 2 * A), *x2 = alloc_ok(a, A);
    void *h3 = alloc_ok(a, 3 * A), *x3 = alloc_ok(a, A);
    free_ok(a, h5), free_ok(a, h2), free_ok(a, h3);
    assert_int_equal(lt_arena_holes(a), 4);
    void *p = alloc_ok(a, 2 * A); /* exactly the 2-unit hole, not the first (5) */
    assert_ptr_equal(p, h2);
    void *q = alloc_ok(a, 3 * A - 7); /* the 3-unit hole */
    assert_ptr_equal(q, h3);
    void *r = alloc_ok(a, A); /* the 5-unit hole is now the smallest: taken from its start */
    assert_ptr_equal(r, h5);
    assert_int_equal(lt_arena_holes(a), 2); /* 4 units left of h5, and the tail */
    /* the 4 units left of h5 fit exactly: taken before the tail */
    void *y = alloc_ok(a, 4 * A);
    assert_int_equal(off(a, y), A);
    /* ties go to the lower address: two equal holes of 1 unit */
    free_ok(a, x2);
    free_ok(a, x1);
    void *z = alloc_ok(a, 1);
    assert_ptr_equal(z, x1);
    (void)x3;
    lt_arena_destroy(a);
}

static void test_free_merges_both_neighbours(void **state) {
    (void)state;
    lt_arena *a = make(FAKE_BASE, 4 * A);
    void *p[4];
    for (int i = 0; i < 4; i++) p[i] = alloc_ok(a, A);
    assert_int_equal(lt_arena_holes(a), 0);
    assert_int_equal(lt_arena_largest_free(a), 0);
    free_ok(a, p[0]);
    free_ok(a, p[2]);
    assert_int_equal(lt_arena_holes(a), 2);
    assert_int_equal(lt_arena_largest_free(a), A);
    free_ok(a, p[1]); /* merges with the hole before and the hole after */
    assert_int_equal(lt_arena_holes(a), 1);
    assert_int_equal(lt_arena_largest_free(a), 3 * A);
    void *big = alloc_ok(a, 3 * A); /* the merged hole really is one block */
    assert_ptr_equal(big, p[0]);
    free_ok(a, big);
    free_ok(a, p[3]); /* merges with the hole before it only */
    assert_int_equal(lt_arena_holes(a), 1);
    assert_int_equal(lt_arena_largest_free(a), 4 * A);
    assert_int_equal(lt_arena_used(a), 0);
    /* the next neighbour only */
    void *q0 = alloc_ok(a, A), *q1 = alloc_ok(a, A);
    free_ok(a, q1);
    assert_int_equal(lt_arena_holes(a), 1); /* q1 merged into the tail */
    free_ok(a, q0);
    assert_int_equal(lt_arena_holes(a), 1);
    assert_int_equal(lt_arena_largest_free(a), 4 * A);
    lt_arena_destroy(a);
}

static void test_exhaustion_message(void **state) {
    (void)state;
    lt_arena *a = make(FAKE_BASE, 8 * A);
    void *p[8];
    for (int i = 0; i < 8; i++) p[i] = alloc_ok(a, A);
    free_ok(a, p[1]), free_ok(a, p[3]), free_ok(a, p[5]); /* 3 free units, none adjacent */
    void *q = (void *)1;
    lt_error err;
    assert_int_equal(lt_arena_alloc(a, 2 * A, "layer 3's attention output", &q, &err), LT_ERR_NOMEM);
    assert_null(q);
    /* names the request, the free bytes, the size and the largest hole */
    assert_non_null(strstr(err.what, "512 bytes for layer 3's attention output"));
    assert_non_null(strstr(err.what, "768 of its 2048 bytes are free"));
    assert_non_null(strstr(err.what, "the largest hole is 256 bytes"));
    assert_non_null(strstr(err.hint, "fragmented"));
    /* more than is free at all: the other hint */
    assert_int_equal(lt_arena_alloc(a, 4 * A, NULL, &q, &err), LT_ERR_NOMEM);
    assert_non_null(strstr(err.what, "1024 bytes for a tensor"));
    assert_non_null(strstr(err.hint, "plan.mem"));
    /* a size that overflows when rounded */
    assert_int_equal(lt_arena_alloc(a, SIZE_MAX, "x", &q, &err), LT_ERR_NOMEM);
    /* the failures changed nothing */
    assert_int_equal(lt_arena_used(a), 5 * A);
    assert_int_equal(lt_arena_holes(a), 3);
    lt_arena_destroy(a);
}

static void test_bad_free(void **state) {
    (void)state;
    lt_arena *a = make(FAKE_BASE, 4 * A);
    void *p = alloc_ok(a, A);
    lt_error err;
    assert_int_equal(lt_arena_free(a, (char *)p + 8, &err), LT_ERR_INTERNAL);
    assert_non_null(strstr(err.what, "did not hand out"));
    assert_int_equal(lt_arena_free(a, (void *)((uintptr_t)FAKE_BASE + 100 * A), &err), LT_ERR_INTERNAL);
    free_ok(a, p);
    assert_int_equal(lt_arena_free(a, p, &err), LT_ERR_INTERNAL);
    assert_non_null(strstr(err.what, "already freed"));
    assert_int_equal(lt_arena_free(a, NULL, &err), LT_OK);
    lt_arena_destroy(a);
}

static void test_peak_and_reset(void **state) {
    (void)state;
    lt_arena *a = make(FAKE_BASE, 64 * A);
    void *p = alloc_ok(a, 10 * A), *q = alloc_ok(a, 20 * A);
    assert_int_equal(lt_arena_peak(a), 30 * A);
    free_ok(a, q);
    void *r = alloc_ok(a, 5 * A);
    assert_int_equal(lt_arena_used(a), 15 * A);
    assert_int_equal(lt_arena_peak(a), 30 * A); /* the peak stays */
    lt_arena_reset_peak(a);
    assert_int_equal(lt_arena_peak(a), 15 * A);
    lt_arena_reset(a); /* frees everything, keeps the peak */
    assert_int_equal(lt_arena_used(a), 0);
    assert_int_equal(lt_arena_live(a), 0);
    assert_int_equal(lt_arena_holes(a), 1);
    assert_int_equal(lt_arena_peak(a), 15 * A);
    void *s = alloc_ok(a, 64 * A); /* the whole arena is one hole again */
    assert_ptr_equal(s, lt_arena_base(a));
    (void)p, (void)r;
    lt_arena_destroy(a);
}

/* ---------------------------------------------------------------- randomized trace */

#define UNITS 512
typedef struct model {
    unsigned char used[UNITS];
    size_t used_units, peak_units;
} model;

/* Best fit over the maximal free runs: the smallest that holds n units, lowest address
 * first; -1 when none. */
static long model_fit(const model *m, size_t n, size_t *holes, size_t *largest) {
    long best = -1;
    size_t best_len = 0;
    *holes = 0, *largest = 0;
    for (size_t i = 0; i < UNITS;) {
        if (m->used[i]) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < UNITS && !m->used[j]) j++;
        size_t len = j - i;
        (*holes)++;
        if (len > *largest) *largest = len;
        if (len >= n && (best < 0 || len < best_len)) best = (long)i, best_len = len;
        i = j;
    }
    return best;
}

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void test_random_trace_matches_model(void **state) {
    (void)state;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        lt_arena *a = make(FAKE_BASE, UNITS * A);
        model m;
        memset(&m, 0, sizeof m);
        void *live[UNITS];
        size_t live_units[UNITS], n_live = 0;
        uint64_t s = seed;
        size_t fails = 0;
        for (int step = 0; step < 4000; step++) {
            bool do_alloc = n_live == 0 || rng_next(&s) % 100 < 55;
            if (do_alloc) {
                /* long-tailed sizes: mostly small, sometimes large */
                uint64_t r = rng_next(&s);
                size_t bytes = r % 8 == 0 ? 1 + rng_next(&s) % (64 * A) : 1 + rng_next(&s) % (4 * A);
                size_t n = (bytes + A - 1) / A, holes, largest;
                long want = model_fit(&m, n, &holes, &largest);
                void *p = NULL;
                lt_error err;
                lt_status st = lt_arena_alloc(a, bytes, "trace", &p, &err);
                if (want < 0) {
                    assert_int_equal(st, LT_ERR_NOMEM);
                    fails++;
                    continue;
                }
                assert_int_equal(st, LT_OK);
                if (off(a, p) != (size_t)want * A)
                    fail_msg("seed %llu step %d: %zu units at unit %zu, the model says %ld", (unsigned long long)seed,
                             step, n, off(a, p) / A, want);
                memset(m.used + want, 1, n);
                m.used_units += n;
                if (m.used_units > m.peak_units) m.peak_units = m.used_units;
                live[n_live] = p, live_units[n_live] = n, n_live++;
            } else {
                size_t k = rng_next(&s) % n_live;
                free_ok(a, live[k]);
                memset(m.used + off(a, live[k]) / A, 0, live_units[k]);
                m.used_units -= live_units[k];
                live[k] = live[n_live - 1], live_units[k] = live_units[n_live - 1], n_live--;
            }
            size_t holes, largest;
            (void)model_fit(&m, 1, &holes, &largest);
            assert_int_equal(lt_arena_used(a), m.used_units * A);
            assert_int_equal(lt_arena_peak(a), m.peak_units * A);
            assert_int_equal(lt_arena_live(a), n_live);
            assert_int_equal(lt_arena_holes(a), holes); /* merged: holes are maximal runs */
            assert_int_equal(lt_arena_largest_free(a), largest * A);
        }
        assert_true(fails > 0); /* the trace did reach exhaustion */
        lt_arena_destroy(a);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alignment_and_rounding),
        cmocka_unit_test(test_too_small_to_hold_a_block),
        cmocka_unit_test(test_best_fit_picks_smallest_hole),
        cmocka_unit_test(test_free_merges_both_neighbours),
        cmocka_unit_test(test_exhaustion_message),
        cmocka_unit_test(test_bad_free),
        cmocka_unit_test(test_peak_and_reset),
        cmocka_unit_test(test_random_trace_matches_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
