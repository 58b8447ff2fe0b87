/* dev/cuda/emu_kernels/cuda_bf16.h — bf16 for the emulated kernels (see cuda_runtime.h):
 * round to nearest even, NaN kept, as CUDA's __float2bfloat16. */
#ifndef LT_EMU_KERNELS_CUDA_BF16_H
#define LT_EMU_KERNELS_CUDA_BF16_H

#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
    unsigned short x;
};
inline __nv_bfloat16 __float2bfloat16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{(unsigned short)((u >> 16) | 0x40)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return __nv_bfloat16{(unsigned short)(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
    uint32_t u = (uint32_t)h.x << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

#endif
