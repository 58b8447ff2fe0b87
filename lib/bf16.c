/*
 * lib/bf16.c — fp32 <-> bf16 on the host (lib/bf16.h).
 *
 * fp32 -> bf16 rounds to nearest, ties to even, exactly as CUDA's __float2bfloat16: add
 * 0x7fff plus the lowest kept bit, then drop the low half. The carry propagates into the
 * exponent, so a value above the largest bf16 rounds to infinity and the largest fp32
 * subnormals round up to the smallest normal, as IEEE rounding wants. A NaN is kept a
 * (quiet) NaN with its sign: rounding its payload could otherwise carry it into infinity.
 * bf16 -> fp32 is exact: the bits shifted up.
 */
#include "lib/bf16.h"

#include <string.h>

lt_bf16 lt_bf16_from_f32(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (lt_bf16)((u >> 16) | 0x0040u); /* NaN: quiet bit set */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (lt_bf16)(u >> 16);
}

float lt_bf16_to_f32(lt_bf16 b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
