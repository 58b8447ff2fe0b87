/*
 * lib/sha256.c — SHA-256 as FIPS 180-4 Sec. 6.2 specifies it (message schedule of 64
 * words, 64 rounds, big-endian words, length padding in bits).
 *
 * Where the x86-64 CPU has the SHA extensions (SHA-NI: sha256rnds2 does two rounds,
 * sha256msg1/2 extend the message schedule four words at a time), blocks go through them:
 * about 6x the portable rounds here, which matters for the shards dataprep writes and every
 * reader verifies. The portable code stays the reference (test_sha256 compares the two).
 */
#include "lib/sha256.h"

#include <stdbool.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define SHA_NI 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define SHA_NI 0
#endif

/* FIPS 180-4 Sec. 4.2.2: first 32 bits of the fractional parts of the cube roots of the
 * first 64 primes. */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t rotr(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

static void compress(uint32_t st[8], const unsigned char *p) {
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 | (uint32_t)p[4 * t + 2] << 8 |
               (uint32_t)p[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = st[0], b = st[1], c = st[2], d = st[3], e = st[4], f = st[5], g = st[6], h = st[7];
    for (int t = 0; t < 64; t++) {
        uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    st[0] += a, st[1] += b, st[2] += c, st[3] += d, st[4] += e, st[5] += f, st[6] += g, st[7] += h;
}

#if SHA_NI
/* The same n blocks with the SHA extensions. They keep the eight working variables as two
 * vectors, ABEF and CDGH (A in the top lane), and sha256rnds2(CDGH, ABEF, WK) returns ABEF
 * two rounds on: the old ABEF is then the new CDGH. */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_shani(uint32_t st[8], const unsigned char *p,
                                                                      size_t n) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL); /* big-endian words */
    __m128i abcd = _mm_loadu_si128((const __m128i *)&st[0]);
    __m128i efgh = _mm_loadu_si128((const __m128i *)&st[4]);
    abcd = _mm_shuffle_epi32(abcd, 0xB1);                    /* b a d c */
    efgh = _mm_shuffle_epi32(efgh, 0x1B);                    /* h g f e */
    __m128i abef = _mm_alignr_epi8(abcd, efgh, 8);           /* f e b a */
    __m128i cdgh = _mm_blend_epi16(efgh, abcd, 0xF0);        /* h g d c */
    for (; n; n--, p += 64) {
        const __m128i abef0 = abef, cdgh0 = cdgh;
        __m128i w[4]; /* the last 16 schedule words, four to a vector: group g in w[g % 4] */
#pragma GCC unroll 16
        for (int g = 0; g < 16; g++) {
            if (g < 4) {
                w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), bswap);
            } else { /* W[t..t+3] from W[t-16..t-1] (Sec. 6.2.2 step 1), t = 4g */
                __m128i x = _mm_sha256msg1_epu32(w[g % 4], w[(g + 1) % 4]);    /* W[t-16] + s0(W[t-15]) */
                x = _mm_add_epi32(x, _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4)); /* + W[t-7] */
                w[g % 4] = _mm_sha256msg2_epu32(x, w[(g + 3) % 4]);           /* + s1(W[t-2]) */
            }
            __m128i wk = _mm_add_epi32(w[g % 4], _mm_loadu_si128((const __m128i *)&K[4 * g]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);                 /* rounds 4g, 4g+1 */
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E)); /* 4g+2, 4g+3 */
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    __m128i abfe = _mm_shuffle_epi32(abef, 0x1B);            /* a b e f */
    __m128i ghcd = _mm_shuffle_epi32(cdgh, 0xB1);            /* g h c d */
    _mm_storeu_si128((__m128i *)&st[0], _mm_blend_epi16(abfe, ghcd, 0xF0)); /* a b c d */
    _mm_storeu_si128((__m128i *)&st[4], _mm_alignr_epi8(ghcd, abfe, 8));   /* e f g h */
}

/* CPUID leaf 7 EBX bit 29 (SHA) and leaf 1 ECX bits 19, 9 (SSE4.1, SSSE3), asked once: in a
 * virtual machine CPUID traps to the hypervisor. */
static bool cpu_has_sha(void) {
    static int known = -1; /* -1: not asked yet */
    int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (v < 0) {
        unsigned a, b, c, d;
        v = __get_cpuid(1, &a, &b, &c, &d) && (c >> 19 & 1) && (c >> 9 & 1) &&
            __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 29 & 1); /* 0 where leaf 7 is missing */
        __atomic_store_n(&known, v, __ATOMIC_RELAXED);
    }
    return v;
}
#endif

static bool force_portable;

bool lt_sha256_force_portable(bool on) { return __atomic_exchange_n(&force_portable, on, __ATOMIC_RELAXED); }

bool lt_sha256_accelerated(void) {
#if SHA_NI
    return !__atomic_load_n(&force_portable, __ATOMIC_RELAXED) && cpu_has_sha();
#else
    return false;
#endif
}

/* n consecutive 64-byte blocks. */
static void compress_blocks(uint32_t st[8], const unsigned char *p, size_t n) {
#if SHA_NI
    if (lt_sha256_accelerated()) {
        compress_shani(st, p, n);
        return;
    }
#endif
    for (; n; n--, p += 64) compress(st, p);
}

void lt_sha256_init(lt_sha256 *h) {
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(h->state, H0, sizeof H0);
    h->total = 0;
    h->fill = 0;
}

void lt_sha256_update(lt_sha256 *h, const void *data, size_t len) {
    const unsigned char *p = data;
    h->total += len;
    if (h->fill) {
        size_t take = 64 - h->fill < len ? 64 - h->fill : len;
        memcpy(h->block + h->fill, p, take);
        h->fill += take, p += take, len -= take;
        if (h->fill < 64) return;
        compress_blocks(h->state, h->block, 1);
        h->fill = 0;
    }
    compress_blocks(h->state, p, len / 64);
    p += len / 64 * 64, len %= 64;
    memcpy(h->block, p, len);
    h->fill = len;
}

void lt_sha256_final(lt_sha256 *h, unsigned char digest[LT_SHA256_LEN]) {
    uint64_t bits = h->total * 8;
    unsigned char pad[72] = {0x80};
    size_t padlen = (h->fill < 56 ? 56 : 120) - h->fill; /* to 56 mod 64 */
    for (int i = 0; i < 8; i++) pad[padlen + i] = (unsigned char)(bits >> (56 - 8 * i));
    uint64_t total = h->total;
    lt_sha256_update(h, pad, padlen + 8);
    h->total = total;
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (unsigned char)(h->state[i] >> 24);
        digest[4 * i + 1] = (unsigned char)(h->state[i] >> 16);
        digest[4 * i + 2] = (unsigned char)(h->state[i] >> 8);
        digest[4 * i + 3] = (unsigned char)h->state[i];
    }
}

void lt_sha256_digest_hex(const unsigned char digest[LT_SHA256_LEN], char hex[LT_SHA256_HEX_LEN + 1]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < LT_SHA256_LEN; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[LT_SHA256_HEX_LEN] = '\0';
}

void lt_sha256_final_hex(lt_sha256 *h, char hex[LT_SHA256_HEX_LEN + 1]) {
    unsigned char d[LT_SHA256_LEN];
    lt_sha256_final(h, d);
    lt_sha256_digest_hex(d, hex);
}

void lt_sha256_hex(const void *data, size_t len, char hex[LT_SHA256_HEX_LEN + 1]) {
    lt_sha256 h;
    lt_sha256_init(&h);
    lt_sha256_update(&h, data, len);
    lt_sha256_final_hex(&h, hex);
}
