/*
 * train/cpu/simd.h — what the CPU kernels' elementwise loops need to run as vector code:
 * an exp that the compiler can vectorize, and the function attribute that compiles a loop
 * for the wider vector units of the machine it runs on.
 *
 * Why: glibc's expf is a scalar call; in the attention's softmax (one exp per score, T^2 / 2
 * of them per head and layer) it took more time than all the GEMMs of the tile around it.
 * The loops that call lt_vexpf are marked `#pragma omp simd` (the build passes
 * -fopenmp-simd: the pragma only, no OpenMP runtime) and LT_VECTOR_CLONES, so GCC builds
 * them for x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA) and the baseline, and the dynamic
 * loader picks the widest the CPU has (ifunc). Results are deterministic on a machine and
 * independent of the thread count; they may differ in the last bits between machines of
 * different vector width, as OpenBLAS's do.
 */
#ifndef LT_TRAIN_KERNEL_SIMD_H
#define LT_TRAIN_KERNEL_SIMD_H

#include <stdint.h>
#include <string.h> /* memcpy */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LT_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LT_VECTOR_CLONES
#endif

/*
 * exp(x) for x in [-87, 88] within 2 ulp (single precision; below -87 it returns
 * exp(-87) ~ 1.6e-38 instead of a denormal or 0, above 88 exp(88)): x = n ln2 + r with
 * |r| <= ln2 / 2 (n rounded to nearest by the 1.5 x 2^23 trick, ln2 split in two so r is
 * exact), exp(r) by the degree-6 minimax polynomial of Cephes' expf (S. Moshier), times 2^n
 * built in the exponent bits. Every step is a vector instruction: no table, no branch.
 * Callers mask what must be exactly 0 (scores of keys a query may not see) themselves.
 */
static inline float lt_vexpf(float x) {
    const float log2e = 1.44269504088896341f, magic = 12582912.0f; /* 1.5 x 2^23 */
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    float n = (x * log2e + magic) - magic; /* round(x / ln2), |n| <= 127 */
    float r = x - n * ln2_hi - n * ln2_lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) * (1 << 23); /* 2^n: n + 127 in [0, 254] */
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return p * two_n;
}

#endif /* LT_TRAIN_KERNEL_SIMD_H */
