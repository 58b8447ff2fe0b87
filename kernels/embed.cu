/*
 * kernels/embed.cu — token embedding (Llama embed_tokens) and its gradient, the twins of
 * train/cpu/embed.c: out[t] = wte[ids[t]] (bf16 rows), dwte[ids[t]] += dout[t] (fp32).
 *
 * The backward is deterministic without float atomics (dev/cuda/embed_backward.cu,
 * version 2): the (id, t) pairs are sorted by id with a stable radix sort (CUB), so each
 * distinct id is one run of token indices in increasing t; one block per run adds the
 * run's dout rows in t order into its dwte row. Every dwte row has exactly one writer
 * and the order of its adds is the CPU reference's (t ascending), so the result is the
 * same bits on every run — and equal to lt_embed_backward on the same (bf16-valued)
 * inputs.
 *
 * An id < 0 is a token outside this tensor-parallel rank's vocabulary rows (the
 * vocab-parallel embedding, train/model/pass.c): a zero row forward, no gradient. CUB sorts
 * signed keys in signed order, so such tokens make the first runs, which add nothing. The
 * ids are not range-checked above (the vocabulary size is not an argument, as on the CPU):
 * the caller guarantees ids[t] < V.
 */
#include <cub/cub.cuh> /* cub::DeviceRadixSort */

#include "kernels/cuda_common.cuh" /* lt_cuda, lt_ld/lt_st, lt_cuda_scratch */

enum { EMBED_THREADS = 256 };

/* One block per row t; VEC: 8 columns per thread-step (C % 8 == 0, aligned). */
template <bool VEC>
__global__ void embed_forward_kernel(lt_bf16 *out, const int32_t *ids, const lt_bf16 *wte, int C) {
    size_t t = blockIdx.x;
    lt_bf16 *dst = out + t * (size_t)C;
    if (ids[t] < 0) { /* another TP rank's token: a zero row */
        for (int c = threadIdx.x; c < C; c += blockDim.x) lt_st(dst + c, 0.0f);
        return;
    }
    const lt_bf16 *src = wte + (size_t)ids[t] * (size_t)C;
    if (VEC) {
        for (int c = 8 * threadIdx.x; c < C; c += 8 * blockDim.x)
            *reinterpret_cast<int4 *>(dst + c) = *reinterpret_cast<const int4 *>(src + c);
    } else {
        for (int c = threadIdx.x; c < C; c += blockDim.x) dst[c] = src[c];
    }
}

__global__ void iota_kernel(int32_t *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = i;
}

/* Block p handles the run starting at sorted position p, if one starts there: the tokens
 * order[p..q) share id key[p]; their dout rows are added into dwte[key[p]] in that (t
 * ascending) order, one column per thread. */
__global__ void embed_backward_runs_kernel(float *dwte, const lt_bf16 *dout, const int32_t *key,
                                           const int32_t *order, int T, int C) {
    int p = blockIdx.x;
    if (p > 0 && key[p] == key[p - 1]) return; /* not the start of a run */
    if (key[p] < 0) return;                     /* another TP rank's tokens: no gradient here */
    int q = p + 1;
    while (q < T && key[q] == key[p]) q++;
    float *row = dwte + (size_t)key[p] * (size_t)C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = row[c];
        for (int r = p; r < q; r++) acc += lt_ld(dout + (size_t)order[r] * (size_t)C + c);
        row[c] = acc;
    }
}

extern "C" lt_status lt_cuda_embed_forward(lt_cuda *c, lt_bf16 *out, const int32_t *ids, int T, const lt_bf16 *wte,
                                           int C, lt_error *err) {
    LT_CUDA_REQUIRE(T >= 0 && C >= 0, "lt_cuda_embed_forward", "negative shape T=%d C=%d", T, C);
    if (T == 0 || C == 0) return LT_OK;
    if (C % 8 == 0 && lt_cuda_aligned16(out) && lt_cuda_aligned16(wte)) {
        LT_KERNEL(embed_forward_kernel<true>, T, EMBED_THREADS, c->stream)(out, ids, wte, C);
        LT_LAUNCH_CHECK("embed_forward_kernel<vec>");
    } else {
        LT_KERNEL(embed_forward_kernel<false>, T, EMBED_THREADS, c->stream)(out, ids, wte, C);
        LT_LAUNCH_CHECK("embed_forward_kernel");
    }
    return LT_OK;
}

/* Round up to 256 bytes: the sort's buffers are carved from one scratch allocation. */
static size_t round256(size_t b) { return (b + 255) & ~(size_t)255; }

extern "C" lt_status lt_cuda_embed_backward(lt_cuda *c, float *dwte, const lt_bf16 *dout, const int32_t *ids, int T,
                                            int C, lt_error *err) {
    LT_CUDA_REQUIRE(T >= 0 && C >= 0, "lt_cuda_embed_backward", "negative shape T=%d C=%d", T, C);
    if (T == 0 || C == 0) return LT_OK;
    size_t temp_bytes = 0;
    LT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, temp_bytes, (const int32_t *)NULL, (int32_t *)NULL,
                                                  (const int32_t *)NULL, (int32_t *)NULL, T, 0, 32, c->stream));
    size_t arr = round256((size_t)T * sizeof(int32_t));
    void *scratch = NULL;
    lt_status st = lt_cuda_scratch(c, 3 * arr + round256(temp_bytes), &scratch, err);
    if (st != LT_OK) return st;
    char *base = (char *)scratch;
    int32_t *order_in = (int32_t *)base, *key_out = (int32_t *)(base + arr), *order_out = (int32_t *)(base + 2 * arr);
    void *temp = base + 3 * arr;
    LT_KERNEL(iota_kernel, (T + 255) / 256, 256, c->stream)(order_in, T);
    LT_LAUNCH_CHECK("iota_kernel");
    /* LSD radix sort: stable, so equal ids keep t ascending */
    LT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, ids, key_out, order_in, order_out, T, 0, 32,
                                                  c->stream));
    if (c->sync_each) { /* the debug mode LONGTAIL_CUDA_SYNC (kernels/cuda_common.cuh) */
        st = lt_cuda_sync_check(c, err, __FILE__, __LINE__, "cub::DeviceRadixSort::SortPairs of %d ids", T);
        if (st != LT_OK) return st;
    }
    LT_KERNEL(embed_backward_runs_kernel, T, EMBED_THREADS, c->stream)(dwte, dout, key_out, order_out, T, C);
    LT_LAUNCH_CHECK("embed_backward_runs_kernel");
    return LT_OK;
}
