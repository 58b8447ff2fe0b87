/* dev/cuda/emu_kernels/cub/cub.cuh — cub::DeviceRadixSort::SortPairs for the emulated
 * kernels: a stable sort by key on the host (device memory is host memory there). */
#ifndef LT_EMU_KERNELS_CUB_H
#define LT_EMU_KERNELS_CUB_H

#include <algorithm>

#include "../cuda_runtime.h"
#include <numeric>
#include <vector>

namespace cub {
struct DeviceRadixSort {
    template <typename K, typename V>
    static cudaError_t SortPairs(void *temp, size_t &temp_bytes, const K *keys_in, K *keys_out, const V *vals_in,
                                 V *vals_out, int n, int = 0, int = 32, cudaStream_t = 0) {
        if (temp == nullptr) {
            temp_bytes = 16;
            return cudaSuccess;
        }
        std::vector<int> idx((size_t)n);
        std::iota(idx.begin(), idx.end(), 0);
        std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return keys_in[a] < keys_in[b]; });
        std::vector<K> k((size_t)n);
        std::vector<V> v((size_t)n);
        for (int i = 0; i < n; i++) k[(size_t)i] = keys_in[idx[(size_t)i]], v[(size_t)i] = vals_in[idx[(size_t)i]];
        std::copy(k.begin(), k.end(), keys_out);
        std::copy(v.begin(), v.end(), vals_out);
        return cudaSuccess;
    }
};
} // namespace cub

#endif
