/* dev/cuda/emu/cuda_bf16.h — the bf16 conversions kernels/attention.cu uses, on the CPU
 * (see dev/cuda/emu/cuda_runtime.h). Round to nearest even; NaN stays NaN. */
#ifndef LT_DEV_EMU_CUDA_BF16_H
#define LT_DEV_EMU_CUDA_BF16_H

#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
    unsigned short x;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{(unsigned short)((u >> 16) | 0x40)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return __nv_bfloat16{(unsigned short)(u >> 16)};
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.x; }

#endif
