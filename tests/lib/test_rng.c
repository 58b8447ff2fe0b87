/*
 * tests/lib/test_rng.c — unit tests for lib/rng (cmocka), plus reference-dump modes.
 *
 * Without arguments: runs the cmocka tests (known-answer vectors, golden streams,
 * determinism, split independence, below/double/shuffle/normal sanity).
 *
 * With a mode argument it prints raw outputs for tests/lib/rng_reference.py, which checks
 * them against numpy.random.Philox:
 *   test_rng --dump-blocks            stdin: "k0 k1 c0 c1 c2 c3" hex per line;
 *                                     stdout: the 4 block words in hex per line
 *   test_rng --dump-stream SEED N     key of lt_rng_seed(SEED), then N u64 outputs
 *   test_rng --dump-split SEED ID N   the same for lt_rng_split(child, seeded parent, ID)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/rng.h"
#include "tests/testutil.h"

/* ---- known-answer vectors: Random123 kat_vectors, "philox4x64 10" lines (also checked
 * against numpy.random.Philox by rng_reference.py) ---- */
static void test_philox_kat(void **state) {
    (void)state;
    static const struct {
        uint64_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0},
         {0, 0},
         {UINT64_C(0x16554d9eca36314c), UINT64_C(0xdb20fe9d672d0fdc), UINT64_C(0xd7e772cee186176b),
          UINT64_C(0x7e68b68aec7ba23b)}},
        {{UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX},
         {UINT64_MAX, UINT64_MAX},
         {UINT64_C(0x87b092c3013fe90b), UINT64_C(0x438c3c67be8d0224), UINT64_C(0x9cc7d7c69cd777b6),
          UINT64_C(0xa09caebf594f0ba0)}},
        {{UINT64_C(0x243f6a8885a308d3), UINT64_C(0x13198a2e03707344), UINT64_C(0xa4093822299f31d0),
          UINT64_C(0x082efa98ec4e6c89)},
         {UINT64_C(0x452821e638d01377), UINT64_C(0xbe5466cf34e90c6c)},
         {UINT64_C(0xa528f45403e61d95), UINT64_C(0x38c72dbd566e9788), UINT64_C(0xa5a1610e72fd18b5),
          UINT64_C(0x57bd43b5e52b7fe6)}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint64_t out[4];
        lt_rng_philox_block(kat[i].key, kat[i].ctr, out);
        for (int w = 0; w < 4; w++) assert_int_equal(out[w], kat[i].out[w]);
    }
}

static void test_splitmix64_known(void **state) {
    (void)state;
    uint64_t s = 0;
    assert_int_equal(lt_splitmix64(&s), UINT64_C(0xe220a8397b1dcdaf));
}

/* Golden streams computed independently (Python splitmix64 + numpy.random.Philox): the
 * stream layout of rng.h is a contract, so a change here breaks reproducibility of runs. */
static void test_golden_streams(void **state) {
    (void)state;
    lt_rng r;
    lt_rng_seed(&r, 12345);
    assert_int_equal(r.key[0], UINT64_C(0x22118258a9d111a0));
    assert_int_equal(r.key[1], UINT64_C(0x346edce5f713f8ed));
    static const uint64_t want[6] = {
        UINT64_C(0x88fc9303fc89f31f), UINT64_C(0x40396ec05ee18c35), UINT64_C(0x7e8c032b46956a52),
        UINT64_C(0xfe98c3381a81dca6), UINT64_C(0x989bcb7a01431c4c), UINT64_C(0x08dc440db6d2a674),
    };
    for (int i = 0; i < 6; i++) assert_int_equal(lt_rng_u64(&r), want[i]);

    lt_rng c;
    lt_rng_split(&c, &r, 7);
    assert_int_equal(c.key[0], UINT64_C(0x732b4cb24b525968));
    assert_int_equal(c.key[1], UINT64_C(0xffef35dc8d3331f1));
    static const uint64_t want_c[6] = {
        UINT64_C(0x53a9557fe5cdac40), UINT64_C(0x08f367e8f3fc5fcf), UINT64_C(0x1886c519be5875a2),
        UINT64_C(0x6bd7a99e86a252ac), UINT64_C(0x9b7837cd786d143e), UINT64_C(0x1bfc7e1608f1224c),
    };
    for (int i = 0; i < 6; i++) assert_int_equal(lt_rng_u64(&c), want_c[i]);
}

static void test_counter_carry(void **state) {
    (void)state;
    /* the stream's 256-bit counter carries across words exactly like a raw block sequence */
    const uint64_t key[2] = {3, 4};
    const uint64_t ctr[4] = {UINT64_MAX, UINT64_MAX, 5, 0};
    lt_rng r;
    lt_rng_init_key(&r, key, ctr);
    uint64_t b0[4], b1[4];
    lt_rng_philox_block(key, ctr, b0);
    const uint64_t next[4] = {0, 0, 6, 0};
    lt_rng_philox_block(key, next, b1);
    for (int i = 0; i < 4; i++) assert_int_equal(lt_rng_u64(&r), b0[i]);
    for (int i = 0; i < 4; i++) assert_int_equal(lt_rng_u64(&r), b1[i]);
    assert_int_equal(r.ctr[0], 1);
    assert_int_equal(r.ctr[1], 0);
    assert_int_equal(r.ctr[2], 6);
}

static void test_determinism(void **state) {
    (void)state;
    lt_rng a, b, c;
    lt_rng_seed(&a, 2024);
    lt_rng_seed(&b, 2024);
    lt_rng_seed(&c, 2025);
    int same_c = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = lt_rng_u64(&a);
        assert_int_equal(x, lt_rng_u64(&b));
        if (x == lt_rng_u64(&c)) same_c++;
    }
    assert_true(same_c < 2);

    /* a copy forks the stream at the same point */
    lt_rng d = a;
    for (int i = 0; i < 10; i++) assert_int_equal(lt_rng_u64(&a), lt_rng_u64(&d));

    /* the derived outputs are deterministic too */
    lt_rng_seed(&a, 5);
    lt_rng_seed(&b, 5);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(lt_rng_u32(&a), lt_rng_u32(&b));
        assert_int_equal(lt_rng_below(&a, 1000 + (uint64_t)i), lt_rng_below(&b, 1000 + (uint64_t)i));
        double da = lt_rng_double(&a), db = lt_rng_double(&b);
        assert_memory_equal(&da, &db, sizeof da);
    }
}

static void test_u32_is_top_half(void **state) {
    (void)state;
    lt_rng a, b;
    lt_rng_seed(&a, 77);
    lt_rng_seed(&b, 77);
    for (int i = 0; i < 9; i++) assert_int_equal(lt_rng_u32(&a), lt_rng_u64(&b) >> 32);
}

static void test_split(void **state) {
    (void)state;
    lt_rng root1, root2, c1, c2, c3;
    lt_rng_seed(&root1, 99);
    lt_rng_seed(&root2, 99);
    /* the parent's draw count does not matter */
    for (int i = 0; i < 13; i++) (void)lt_rng_u64(&root2);
    lt_rng_split(&c1, &root1, 3);
    lt_rng_split(&c2, &root2, 3);
    for (int i = 0; i < 100; i++) assert_int_equal(lt_rng_u64(&c1), lt_rng_u64(&c2));

    /* splitting does not disturb the parent */
    lt_rng ref;
    lt_rng_seed(&ref, 99);
    for (int i = 0; i < 20; i++) assert_int_equal(lt_rng_u64(&root1), lt_rng_u64(&ref));

    /* different stream ids, and the child vs the parent, differ */
    lt_rng_split(&c1, &root1, 3);
    lt_rng_split(&c3, &root1, 4);
    lt_rng_seed(&ref, 99);
    int same34 = 0, same_parent = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = lt_rng_u64(&c1);
        if (x == lt_rng_u64(&c3)) same34++;
        if (x == lt_rng_u64(&ref)) same_parent++;
    }
    assert_true(same34 < 2);
    assert_true(same_parent < 2);

    /* many siblings have distinct keys; nested splits differ from siblings */
    enum { NS = 1000 };
    static uint64_t keys[NS];
    for (int i = 0; i < NS; i++) {
        lt_rng_split(&c1, &root1, (uint64_t)i);
        keys[i] = c1.key[0];
    }
    for (int i = 0; i < NS; i++)
        for (int j = i + 1; j < NS; j++) assert_true(keys[i] != keys[j]);
    lt_rng g;
    lt_rng_split(&c1, &root1, 0);
    lt_rng_split(&g, &c1, 0);
    assert_true(g.key[0] != c1.key[0] && g.key[0] != root1.key[0]);
}

static void test_below(void **state) {
    (void)state;
    lt_rng r;
    lt_rng_seed(&r, 31337);
    for (int i = 0; i < 100; i++) assert_int_equal(lt_rng_below(&r, 1), 0);

    /* chi-square on 10 bins, 100000 draws: df = 9, P(chi2 > 40) ~ 5e-6; fixed seed */
    enum { BINS = 10, DRAWS = 100000 };
    long counts[BINS] = {0};
    for (int i = 0; i < DRAWS; i++) {
        uint64_t x = lt_rng_below(&r, BINS);
        assert_true(x < BINS);
        counts[x]++;
    }
    double chi2 = 0, expect = (double)DRAWS / BINS;
    for (int b = 0; b < BINS; b++) chi2 += (counts[b] - expect) * (counts[b] - expect) / expect;
    assert_true(chi2 < 40.0);

    /* large n where modulo bias would be huge: n = 3 * 2^62, P(x >= 2^63) must be 1/3
     * (plain x % n would give 1/2) */
    const uint64_t n = UINT64_C(3) << 62;
    long high = 0;
    enum { BIG = 30000 };
    for (int i = 0; i < BIG; i++) {
        uint64_t x = lt_rng_below(&r, n);
        assert_true(x < n);
        if (x >= (UINT64_C(1) << 63)) high++;
    }
    assert_true(high > BIG / 3 - 600 && high < BIG / 3 + 600);

    /* extreme n */
    for (int i = 0; i < 1000; i++) assert_true(lt_rng_below(&r, UINT64_MAX) < UINT64_MAX);
    for (int i = 0; i < 1000; i++) assert_true(lt_rng_below(&r, 2) < 2);
}

static void test_double(void **state) {
    (void)state;
    lt_rng r;
    lt_rng_seed(&r, 8);
    double lo = 1, hi = 0, sum = 0;
    enum { N = 200000 };
    for (int i = 0; i < N; i++) {
        double d = lt_rng_double(&r);
        assert_true(d >= 0.0 && d < 1.0);
        if (d < lo) lo = d;
        if (d > hi) hi = d;
        sum += d;
    }
    assert_true(lo < 1e-3 && hi > 1 - 1e-3);
    assert_true(fabs(sum / N - 0.5) < 0.01);

    /* the extremes of the 53-bit mapping */
    lt_rng e;
    lt_rng_seed(&e, 0);
    e.buf[0] = UINT64_MAX;
    e.buf[1] = 0;
    e.buf[2] = UINT64_C(1) << 11;
    e.pos = 0;
    assert_true(lt_rng_double(&e) == 1.0 - 0x1.0p-53);
    assert_true(lt_rng_double(&e) == 0.0);
    assert_true(lt_rng_double(&e) == 0x1.0p-53);
}

static void test_shuffle(void **state) {
    (void)state;
    lt_rng r;
    lt_rng_seed(&r, 4);
    enum { N = 1000 };
    int a[N], b[N];
    for (int i = 0; i < N; i++) a[i] = b[i] = i;
    lt_rng r2 = r;
    lt_rng_shuffle(&r, a, N, sizeof a[0]);
    lt_rng_shuffle(&r2, b, N, sizeof b[0]);
    assert_memory_equal(a, b, sizeof a); /* deterministic */
    int seen[N] = {0}, moved = 0;
    for (int i = 0; i < N; i++) {
        assert_true(a[i] >= 0 && a[i] < N);
        seen[a[i]]++;
        if (a[i] != i) moved++;
    }
    for (int i = 0; i < N; i++) assert_int_equal(seen[i], 1);
    assert_true(moved > N / 2);

    /* n = 0 and 1 draw nothing and change nothing */
    lt_rng before = r;
    lt_rng_shuffle(&r, NULL, 0, sizeof(int));
    int one = 42;
    lt_rng_shuffle(&r, &one, 1, sizeof one);
    assert_int_equal(one, 42);
    assert_int_equal(lt_rng_u64(&r), lt_rng_u64(&before));

    /* odd element sizes, including one larger than the swap buffer */
    enum { M = 257, SZ = 100 };
    static unsigned char big[M][SZ];
    for (int i = 0; i < M; i++) {
        memset(big[i], 0, SZ);
        big[i][0] = (unsigned char)i;
        big[i][1] = (unsigned char)(i >> 8);
        big[i][SZ - 1] = (unsigned char)(i * 7);
    }
    lt_rng_shuffle(&r, big, M, SZ);
    int seen2[M] = {0};
    for (int i = 0; i < M; i++) {
        int v = big[i][0] | (big[i][1] << 8);
        assert_true(v < M);
        assert_int_equal(big[i][SZ - 1], (unsigned char)(v * 7));
        seen2[v]++;
    }
    for (int i = 0; i < M; i++) assert_int_equal(seen2[i], 1);

    char s3[7][3];
    for (int i = 0; i < 7; i++) s3[i][0] = s3[i][1] = s3[i][2] = (char)('a' + i);
    lt_rng_shuffle(&r, s3, 7, 3);
    int seen3[7] = {0};
    for (int i = 0; i < 7; i++) {
        assert_true(s3[i][0] == s3[i][1] && s3[i][1] == s3[i][2]);
        seen3[s3[i][0] - 'a']++;
    }
    for (int i = 0; i < 7; i++) assert_int_equal(seen3[i], 1);
}

static void test_normal(void **state) {
    (void)state;
    lt_rng r;
    lt_rng_seed(&r, 6);
    enum { N = 200000 };
    double sum = 0, sum2 = 0;
    for (int i = 0; i < N; i++) {
        double z = lt_rng_normal(&r);
        assert_true(isfinite(z));
        sum += z;
        sum2 += z * z;
    }
    double mean = sum / N, var = sum2 / N - mean * mean;
    assert_true(fabs(mean) < 0.02);
    assert_true(fabs(var - 1.0) < 0.02);
    /* two words per call */
    lt_rng a, b;
    lt_rng_seed(&a, 1);
    lt_rng_seed(&b, 1);
    (void)lt_rng_normal(&a);
    (void)lt_rng_u64(&b);
    (void)lt_rng_u64(&b);
    assert_int_equal(lt_rng_u64(&a), lt_rng_u64(&b));
}

static void below_zero(void *arg) {
    (void)arg;
    lt_rng r;
    lt_rng_seed(&r, 1);
    (void)lt_rng_below(&r, 0);
}

/* lt_rng_below(r, 0) is a programming error: reported with file:line, exit 1 */
static void test_below_zero_dies(void **state) {
    (void)state;
    char report[1024];
    assert_int_equal(lt_test_in_child(below_zero, NULL, report, sizeof report), 1);
    assert_non_null(strstr(report, "error: internal check failed"));
    assert_non_null(strstr(report, "rng.c:"));
}

/* ---- reference-dump modes for rng_reference.py ---- */

static int dump_blocks(void) {
    char line[512];
    while (fgets(line, sizeof line, stdin) != NULL) {
        uint64_t k[2], c[4], out[4];
        if (sscanf(line, "%" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64, &k[0],
                   &k[1], &c[0], &c[1], &c[2], &c[3]) != 6) {
            fprintf(stderr, "test_rng: bad input line: %s", line);
            return 2;
        }
        lt_rng_philox_block(k, c, out);
        printf("%016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 "\n", out[0], out[1], out[2],
               out[3]);
    }
    if (ferror(stdin)) return 1;
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}

static int dump_stream(const lt_rng *r0, unsigned long n) {
    lt_rng r = *r0;
    printf("%016" PRIx64 " %016" PRIx64 "\n", r.key[0], r.key[1]);
    for (unsigned long i = 0; i < n; i++) printf("%016" PRIx64 "\n", lt_rng_u64(&r));
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--dump-blocks") == 0) return dump_blocks();
    if (argc == 4 && strcmp(argv[1], "--dump-stream") == 0) {
        lt_rng r;
        lt_rng_seed(&r, strtoull(argv[2], NULL, 0));
        return dump_stream(&r, strtoul(argv[3], NULL, 0));
    }
    if (argc == 5 && strcmp(argv[1], "--dump-split") == 0) {
        lt_rng p, c;
        lt_rng_seed(&p, strtoull(argv[2], NULL, 0));
        lt_rng_split(&c, &p, strtoull(argv[3], NULL, 0));
        return dump_stream(&c, strtoul(argv[4], NULL, 0));
    }
    if (argc >= 2) {
        fprintf(stderr, "usage: %s [--dump-blocks | --dump-stream SEED N | --dump-split SEED ID N]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_kat),   cmocka_unit_test(test_splitmix64_known),
        cmocka_unit_test(test_golden_streams), cmocka_unit_test(test_counter_carry),
        cmocka_unit_test(test_determinism),  cmocka_unit_test(test_u32_is_top_half),
        cmocka_unit_test(test_split),        cmocka_unit_test(test_below),
        cmocka_unit_test(test_double),       cmocka_unit_test(test_shuffle),
        cmocka_unit_test(test_normal),       cmocka_unit_test(test_below_zero_dies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
