/*
 * lib/rng.c — Philox4x64-10 streams, splitting and derived distributions (see rng.h).
 *
 * No allocation, no I/O, no global state. The 64x64->128 multiply uses unsigned __int128
 * where the compiler has it and a portable 32-bit-limb version otherwise (force the latter
 * with -DLT_RNG_PORTABLE_MULHI to test it); both give identical results.
 */
#include "lib/rng.h"

#include <math.h>
#include <string.h>

#include "lib/error.h"

/* Philox4x64 constants (Random123 philox.h). */
#define PHILOX_M0 UINT64_C(0xD2E7470EE14C6C93)
#define PHILOX_M1 UINT64_C(0xCA5A826395121157)
#define PHILOX_W0 UINT64_C(0x9E3779B97F4A7C15) /* golden ratio */
#define PHILOX_W1 UINT64_C(0xBB67AE8584CAA73B) /* sqrt(3) - 1 */

/* hi:lo = a * b */
static inline uint64_t mulhilo64(uint64_t a, uint64_t b, uint64_t *hi) {
#if defined(__SIZEOF_INT128__) && !defined(LT_RNG_PORTABLE_MULHI)
    __extension__ typedef unsigned __int128 u128;
    u128 p = (u128)a * b;
    *hi = (uint64_t)(p >> 64);
    return (uint64_t)p;
#else
    uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32;
    uint64_t b_lo = b & 0xffffffffu, b_hi = b >> 32;
    uint64_t ll = a_lo * b_lo, lh = a_lo * b_hi, hl = a_hi * b_lo, hh = a_hi * b_hi;
    uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu); /* < 3 * 2^32 */
    *hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
    return (mid << 32) | (ll & 0xffffffffu);
#endif
}

void lt_rng_philox_block(const uint64_t key[2], const uint64_t ctr[4], uint64_t out[4]) {
    uint64_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint64_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        uint64_t hi0, hi1;
        uint64_t lo0 = mulhilo64(PHILOX_M0, c0, &hi0);
        uint64_t lo1 = mulhilo64(PHILOX_M1, c2, &hi1);
        uint64_t n0 = hi1 ^ c1 ^ k0;
        uint64_t n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

uint64_t lt_splitmix64(uint64_t *state) {
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

void lt_rng_init_key(lt_rng *r, const uint64_t key[2], const uint64_t ctr[4]) {
    r->key[0] = key[0];
    r->key[1] = key[1];
    memcpy(r->ctr, ctr, sizeof r->ctr);
    memset(r->buf, 0, sizeof r->buf);
    r->pos = 4;
}

void lt_rng_seed(lt_rng *r, uint64_t seed) {
    uint64_t s = seed;
    uint64_t key[2];
    key[0] = lt_splitmix64(&s);
    key[1] = lt_splitmix64(&s);
    static const uint64_t zero[4] = {0, 0, 0, 0};
    lt_rng_init_key(r, key, zero);
}

void lt_rng_split(lt_rng *child, const lt_rng *parent, uint64_t stream_id) {
    const uint64_t ctr[4] = {stream_id, 0, 0, LT_RNG_SPLIT_DOMAIN};
    uint64_t block[4];
    lt_rng_philox_block(parent->key, ctr, block);
    static const uint64_t zero[4] = {0, 0, 0, 0};
    lt_rng_init_key(child, block, zero);
}

static void refill(lt_rng *r) {
    lt_rng_philox_block(r->key, r->ctr, r->buf);
    /* 256-bit increment with carry */
    for (int i = 0; i < 4; i++)
        if (++r->ctr[i] != 0) break;
    r->pos = 0;
}

uint64_t lt_rng_u64(lt_rng *r) {
    if (r->pos >= 4 || r->pos < 0) refill(r);
    return r->buf[r->pos++];
}

uint32_t lt_rng_u32(lt_rng *r) { return (uint32_t)(lt_rng_u64(r) >> 32); }

uint64_t lt_rng_below(lt_rng *r, uint64_t n) {
    LT_CHECK(n > 0);
    /* Lemire, "Fast random integer generation in an interval" (2019). */
    uint64_t hi;
    uint64_t lo = mulhilo64(lt_rng_u64(r), n, &hi);
    if (lo < n) {
        uint64_t threshold = (0 - n) % n; /* 2^64 mod n */
        while (lo < threshold) lo = mulhilo64(lt_rng_u64(r), n, &hi);
    }
    return hi;
}

double lt_rng_double(lt_rng *r) { return (double)(lt_rng_u64(r) >> 11) * 0x1.0p-53; }

static void swap_bytes(unsigned char *a, unsigned char *b, size_t size) {
    unsigned char tmp[64];
    while (size > 0) {
        size_t k = size < sizeof tmp ? size : sizeof tmp;
        memcpy(tmp, a, k);
        memcpy(a, b, k);
        memcpy(b, tmp, k);
        a += k;
        b += k;
        size -= k;
    }
}

void lt_rng_shuffle(lt_rng *r, void *base, size_t n, size_t size) {
    if (n < 2 || size == 0) return;
    unsigned char *p = base;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)lt_rng_below(r, (uint64_t)i + 1);
        if (j != i) swap_bytes(p + i * size, p + j * size, size);
    }
}

double lt_rng_normal(lt_rng *r) {
    /* u1 in (0, 1] so log(u1) is finite; u2 in [0, 1). */
    double u1 = 1.0 - lt_rng_double(r);
    double u2 = lt_rng_double(r);
    static const double two_pi = 6.283185307179586476925286766559;
    return sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
}
