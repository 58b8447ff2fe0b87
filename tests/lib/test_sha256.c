/*
 * tests/lib/test_sha256.c — unit tests for lib/sha256 (cmocka): the example digests of
 * FIPS 180-2 Appendix B (and the empty message) through both the SHA extensions and the
 * portable rounds, and the two paths against each other on random messages fed in random
 * pieces (block edges, partial blocks, the padding's 55/56/64-byte boundaries).
 *
 * With `--bench MB` it prints each path's throughput over MB MiB instead (docs/PERFORMANCE.md).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "lib/rng.h"
#include "lib/sha256.h"

/* FIPS 180-2 Appendix B.1-B.3 and the digest of the empty message (published widely, e.g. NIST's
 * example values). Each through the path the CPU takes and through the portable one. */
static void test_fips_examples(void **state) {
    (void)state;
    static const struct {
        const char *msg;
        const char *digest;
    } ex[] = {
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    char *million = malloc(1000000);
    assert_non_null(million);
    memset(million, 'a', 1000000);
    for (int portable = 0; portable <= 1; portable++) {
        lt_sha256_force_portable(portable);
        char hex[LT_SHA256_HEX_LEN + 1];
        for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
            lt_sha256_hex(ex[i].msg, strlen(ex[i].msg), hex);
            assert_string_equal(hex, ex[i].digest);
        }
        lt_sha256_hex(million, 1000000, hex); /* B.3: one million 'a' */
        assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    }
    lt_sha256_force_portable(false);
    free(million);
}

/* The digest of msg fed to update() in random pieces. */
static void digest_in_pieces(lt_rng *rng, const unsigned char *msg, size_t len, unsigned char out[LT_SHA256_LEN]) {
    lt_sha256 h;
    lt_sha256_init(&h);
    size_t at = 0;
    while (at < len) {
        size_t piece = lt_rng_below(rng, 4) == 0 ? lt_rng_below(rng, 200) : lt_rng_below(rng, len - at + 1);
        if (piece > len - at) piece = len - at;
        lt_sha256_update(&h, msg + at, piece);
        at += piece;
    }
    lt_sha256_final(&h, out);
}

/* The SHA extensions and the portable rounds agree on 3,000 random messages: every length
 * 0..300 (all padding cases), and longer ones up to 64 KiB, each cut differently per path. */
static void test_paths_agree(void **state) {
    (void)state;
    lt_sha256_force_portable(false);
    if (!lt_sha256_accelerated()) {
        print_message("this CPU has no SHA extensions: only the portable rounds to test\n");
        skip();
    }
    enum { N = 3000, MAX = 65536 };
    lt_rng rng;
    lt_rng_seed(&rng, 20261126);
    unsigned char *msg = malloc(MAX);
    assert_non_null(msg);
    for (int n = 0; n < N; n++) {
        size_t len = n <= 300 ? (size_t)n : (size_t)lt_rng_below(&rng, MAX + 1);
        for (size_t i = 0; i < len; i++) msg[i] = (unsigned char)lt_rng_u64(&rng);
        unsigned char fast[LT_SHA256_LEN], slow[LT_SHA256_LEN];
        lt_sha256_force_portable(false);
        digest_in_pieces(&rng, msg, len, fast);
        lt_sha256_force_portable(true);
        digest_in_pieces(&rng, msg, len, slow);
        lt_sha256_force_portable(false);
        if (memcmp(fast, slow, LT_SHA256_LEN) != 0) fail_msg("message %d (%zu bytes): the two paths differ", n, len);
    }
    free(msg);
}

/* force_portable returns the previous setting; accelerated() follows it. */
static void test_force_portable(void **state) {
    (void)state;
    assert_false(lt_sha256_force_portable(true));
    assert_false(lt_sha256_accelerated());
    assert_true(lt_sha256_force_portable(false));
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bench(size_t mib) {
    size_t len = mib << 20;
    unsigned char *buf = malloc(len);
    if (!buf) return 1;
    lt_rng rng;
    lt_rng_seed(&rng, 1);
    for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)lt_rng_u64(&rng);
    printf("sha256 over %zu MiB, best of 5 (accelerated path available: %s)\n", mib,
           lt_sha256_accelerated() ? "yes" : "no");
    for (int portable = 1; portable >= 0; portable--) {
        lt_sha256_force_portable(portable);
        double best = 1e9;
        char hex[LT_SHA256_HEX_LEN + 1];
        for (int r = 0; r < 5; r++) {
            double t0 = now_s();
            lt_sha256_hex(buf, len, hex);
            double t = now_s() - t0;
            if (t < best) best = t;
        }
        printf("%-9s %8.1f MB/s  %s\n", portable ? "portable" : "default", (double)len / best / 1e6, hex);
    }
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--bench") == 0) return bench((size_t)strtoul(argv[2], NULL, 10));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fips_examples),
        cmocka_unit_test(test_paths_agree),
        cmocka_unit_test(test_force_portable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
