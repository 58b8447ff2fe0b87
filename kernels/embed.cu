/*
 * kernels/embed.cu — token embedding (Llama embed_tokens) and its gradient, the twins of
 * train/cpu/embed.c: out[t] = wte[ids[t]] (bf16 rows), dwte[ids[t]] += dout[t] (fp32).
 *
 * The backward is deterministic without float atomics (dev/cuda/embed_backward.cu,
 * version 3): the (id, t) pairs are sorted by id with a stable radix sort (CUB), so each
 * distinct id is one run of token indices in increasing t. A run is cut into pieces of
 * EMBED_PIECE sorted positions counted from its start, and each block adds one piece's
 * dout rows, in t order, for one chunk of EMBED_COLS columns:
 *   - piece 0 adds into the dwte row itself (acc = dwte + its rows in t order), so a run of
 *     at most EMBED_PIECE tokens is the CPU reference's adds in the CPU's order: the same
 *     bits as lt_embed_backward on the same (bf16-valued) inputs;
 *   - the later pieces of a long run (a frequent token: "the", or a corpus of one repeated
 *     word, which was one block for the whole unit before) each write their sum, from 0,
 *     into a partial row; a second kernel then adds a run's partials into its dwte row in
 *     piece order. Partial slot: the piece's start p / EMBED_PIECE, unique because a window
 *     of EMBED_PIECE sorted positions holds at most one later-piece start (two would need a
 *     run to start and end inside the window, i.e. be short).
 * Every dwte element has one writer per kernel and a fixed order of adds that depends on
 * the ids only, so the result is the same bits on every run; for a run longer than
 * EMBED_PIECE the grouping differs from the CPU's single left-to-right sum (fp32 rounding
 * only). A unit of T copies of one id runs as T / EMBED_PIECE x C / EMBED_COLS blocks.
 *
 * An id < 0 is a token outside this tensor-parallel rank's vocabulary rows (the
 * vocab-parallel embedding, train/model/pass.c): a zero row forward, no gradient. CUB sorts
 * signed keys in signed order, so such tokens make the first runs, which add nothing. The
 * ids are not range-checked above (the vocabulary size is not an argument, as on the CPU):
 * the caller guarantees ids[t] < V.
 */
#include <cub/cub.cuh> /* cub::DeviceRadixSort */

#include "kernels/cuda_common.cuh" /* lt_cuda, lt_ld/lt_st, lt_cuda_scratch */

enum { EMBED_THREADS = 256, EMBED_PIECE = 64, EMBED_COLS = 512 };
static_assert(EMBED_THREADS >= EMBED_PIECE, "the combine kernel checks a window's positions one per thread");

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

/* The start of the run holding sorted position p: the first position with key[p] (the keys
 * are sorted; every thread of the block searches alike, reading the same addresses). */
static __device__ int run_start(const int32_t *key, int p) {
    int lo = 0, hi = p, id = key[p];
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (key[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Block (p, y): the piece starting at sorted position p, if one starts there (p - run
 * start a multiple of EMBED_PIECE), over columns [y EMBED_COLS, +EMBED_COLS): its tokens
 * order[p..q) (q: the piece's end, at most EMBED_PIECE on, or the run's end) added in that
 * (t ascending) order, one column per thread-step; piece 0 into the dwte row, a later one
 * into partial row p / EMBED_PIECE (from 0). */
__global__ void embed_backward_pieces_kernel(float *dwte, float *partial, const lt_bf16 *dout, const int32_t *key,
                                             const int32_t *order, int T, int C) {
    int p = blockIdx.x, id = key[p];
    if (id < 0) return; /* another TP rank's tokens: no gradient here */
    int rs = p > 0 && key[p - 1] == id ? run_start(key, p) : p;
    if ((p - rs) % EMBED_PIECE != 0) return; /* inside a piece */
    int q = p + 1;
    while (q < T && q < p + EMBED_PIECE && key[q] == id) q++;
    int c0 = (int)blockIdx.y * EMBED_COLS, c1 = c0 + EMBED_COLS < C ? c0 + EMBED_COLS : C;
    float *row = p == rs ? dwte + (size_t)id * (size_t)C : partial + (size_t)(p / EMBED_PIECE) * (size_t)C;
    for (int c = c0 + (int)threadIdx.x; c < c1; c += blockDim.x) {
        float acc = p == rs ? row[c] : 0.0f;
        for (int r = p; r < q; r++) acc += lt_ld(dout + (size_t)order[r] * (size_t)C + c);
        row[c] = acc;
    }
}

/* Block (j, y): the long run (more than EMBED_PIECE tokens) that starts in the window of
 * sorted positions [j EMBED_PIECE, +EMBED_PIECE), if one does (at most one can: it is
 * longer than the window), over columns [y EMBED_COLS, +EMBED_COLS): its later pieces'
 * partial rows added into its dwte row, in piece order. */
__global__ void embed_backward_combine_kernel(float *dwte, const float *partial, const int32_t *key, int T, int C) {
    __shared__ int start;
    if (threadIdx.x == 0) start = -1;
    __syncthreads();
    int p = (int)blockIdx.x * EMBED_PIECE + (int)threadIdx.x;
    if ((int)threadIdx.x < EMBED_PIECE && p < T && key[p] >= 0 && (p == 0 || key[p - 1] != key[p]) &&
        p + EMBED_PIECE < T && key[p + EMBED_PIECE] == key[p])
        start = p; /* one writer at most */
    __syncthreads();
    p = start;
    if (p < 0) return;
    int id = key[p];
    int c0 = (int)blockIdx.y * EMBED_COLS, c1 = c0 + EMBED_COLS < C ? c0 + EMBED_COLS : C;
    float *row = dwte + (size_t)id * (size_t)C;
    for (int c = c0 + (int)threadIdx.x; c < c1; c += blockDim.x) {
        float acc = row[c];
        for (int q = p + EMBED_PIECE; q < T && key[q] == id; q += EMBED_PIECE)
            acc += partial[(size_t)(q / EMBED_PIECE) * (size_t)C + c];
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
    size_t arr = round256((size_t)T * sizeof(int32_t)), windows = ((size_t)T + EMBED_PIECE - 1) / EMBED_PIECE;
    size_t part = round256(windows * (size_t)C * sizeof(float)); /* a partial row per window (long runs) */
    void *scratch = NULL;
    lt_status st = lt_cuda_scratch(c, 3 * arr + part + round256(temp_bytes), &scratch, err);
    if (st != LT_OK) return st;
    char *base = (char *)scratch;
    int32_t *order_in = (int32_t *)base, *key_out = (int32_t *)(base + arr), *order_out = (int32_t *)(base + 2 * arr);
    float *partial = (float *)(base + 3 * arr);
    void *temp = base + 3 * arr + part;
    LT_KERNEL(iota_kernel, (T + 255) / 256, 256, c->stream)(order_in, T);
    LT_LAUNCH_CHECK("iota_kernel");
    /* LSD radix sort: stable, so equal ids keep t ascending */
    LT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, ids, key_out, order_in, order_out, T, 0, 32,
                                                  c->stream));
    if (c->sync_each) { /* the debug mode LONGTAIL_CUDA_SYNC (kernels/cuda_common.cuh) */
        st = lt_cuda_sync_check(c, err, __FILE__, __LINE__, "cub::DeviceRadixSort::SortPairs of %d ids", T);
        if (st != LT_OK) return st;
    }
    unsigned chunks = (unsigned)((C + EMBED_COLS - 1) / EMBED_COLS);
    dim3 pieces((unsigned)T, chunks), combine((unsigned)windows, chunks);
    LT_KERNEL(embed_backward_pieces_kernel, pieces, EMBED_THREADS, c->stream)(dwte, partial, dout, key_out, order_out,
                                                                              T, C);
    LT_LAUNCH_CHECK("embed_backward_pieces_kernel");
    LT_KERNEL(embed_backward_combine_kernel, combine, EMBED_THREADS, c->stream)(dwte, partial, key_out, T, C);
    LT_LAUNCH_CHECK("embed_backward_combine_kernel");
    return LT_OK;
}
