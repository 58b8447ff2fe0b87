/*
 * kernels/bf16.c — fp32 <-> bf16 on the host (kernels/cuda.h), in every build (with or
 * without CUDA): tests build bf16 inputs and read bf16 outputs with these, and weights
 * move in and out through them.
 *
 * bf16 is the high 16 bits of an IEEE fp32 (same sign and 8-bit exponent, 7 fraction
 * bits). fp32 -> bf16 rounds to nearest, ties to even, exactly as CUDA's
 * __float2bfloat16: add 0x7fff plus the lowest kept bit, then drop the low half. The
 * carry propagates into the exponent, so a value above the largest bf16 rounds to
 * infinity and the largest fp32 subnormals round up to the smallest normal, as IEEE
 * rounding wants. A NaN is kept a (quiet) NaN with its sign: rounding its payload could
 * otherwise carry it into infinity.
 *
 * The other direction, lt_bf16_to_f32 (exact: the bits shifted up), is defined once, in
 * train/io/safetensors.c (the safetensors reader widens BF16 tensors with it; its
 * declaration in train/io/safetensors.h is the same function). A second definition here
 * collided with it at link time; moving that one function to lib/ would let a
 * kernels-only program use it without libtrain.
 */
#include <string.h>

#include "kernels/cuda.h"

lt_bf16 lt_bf16_from_f32(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (lt_bf16)((u >> 16) | 0x0040u); /* NaN: quiet bit set */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (lt_bf16)(u >> 16);
}
