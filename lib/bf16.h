/*
 * lib/bf16.h — fp32 <-> bf16 on the host, for every layer that moves bf16 values: the CUDA
 * kernels' host side and their tests (kernels/), the backends' bf16 storage (train/model/),
 * the safetensors reader's BF16 tensors (train/io/).
 *
 * bf16 is the high 16 bits of an IEEE fp32 (same sign and 8-bit exponent, 7 fraction bits).
 * lt_bf16_from_f32 rounds to nearest, ties to even, exactly as CUDA's __float2bfloat16; a
 * NaN stays a (quiet) NaN with its sign. lt_bf16_to_f32 is exact (the bits shifted up).
 * Both are pure functions: thread-safe, no state.
 */
#ifndef LT_BF16_H
#define LT_BF16_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A bf16 value as its 16 bits (the high half of the fp32 with the same sign and exponent;
 * conversion rounds to nearest even). The C side never does arithmetic on it. */
typedef uint16_t lt_bf16;

lt_bf16 lt_bf16_from_f32(float x);
float lt_bf16_to_f32(lt_bf16 x);

#ifdef __cplusplus
}
#endif

#endif /* LT_BF16_H */
