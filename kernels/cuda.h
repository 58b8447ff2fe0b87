/*
 * kernels/cuda.h — the bf16 CUDA kernels of the Llama model, as the host (C) sees them.
 *
 * The CUDA twins of train/cpu/kernels.h (the CPU fp32 reference) plus what the GPU needs
 * around them: a per-rank context (device, streams, cuBLASLt handle and workspace, the
 * GEMM algorithm cache) and device memory. Implemented by the kernels/ .cu files (nvcc, sm_90);
 * a build without CUDA links kernels/cuda_none.c, where lt_cuda_open fails with
 * "built without CUDA" and nothing else can be reached.
 *
 * Mixed precision (Megatron-style, the GPU profiles' bytes in plans/cost/hardware.c):
 *   - weights used by the kernels: bf16 copies of the fp32 master weights (AdamW keeps the
 *     master, m and v in fp32 and writes the bf16 copy after each update);
 *   - parameter gradients: fp32 (the GEMMs accumulate into them with beta = 1);
 *   - activations, their gradients, keys/values and dK/dV: bf16; per-row statistics
 *     (RMSNorm's rstd, attention's lse) and losses: fp32;
 *   - every reduction (norms, softmax, GEMM accumulation) in fp32.
 *
 * Conventions: those of train/cpu/kernels.h (row-major, [out,in] weights, forward functions
 * write, backward functions ADD into every gradient), with every pointer a DEVICE pointer
 * unless named host_*. Launches are asynchronous on the context's compute stream; a
 * function returns LT_ERR_INTERNAL naming the kernel when the launch fails (bad
 * configuration), and execution errors surface at the next lt_cuda_sync. Nothing here
 * prints or exits.
 */
#ifndef LT_KERNELS_CUDA_H
#define LT_KERNELS_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/bf16.h"  /* lt_bf16; lt_bf16_from_f32, lt_bf16_to_f32: the host's conversions */
#include "lib/error.h" /* lt_status, lt_error */

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- context and memory */

typedef struct lt_cuda lt_cuda;

/* Open device `device` (cudaSetDevice), create the compute stream and a communication
 * stream, the cuBLASLt handle and its workspace. LT_ERR_CONFIG "built without CUDA" or
 * "no CUDA device: ..." when there is nothing to open. */
lt_status lt_cuda_open(lt_cuda **out, int device, lt_error *err);
void lt_cuda_close(lt_cuda *c); /* NULL-safe */
int lt_cuda_device(const lt_cuda *c);
/* The streams, as void* (cudaStream_t) for NCCL and the engine. */
void *lt_cuda_stream(const lt_cuda *c);
void *lt_cuda_comm_stream(const lt_cuda *c);

/* Wait for the compute stream; LT_ERR_INTERNAL with CUDA's message on any error so far. */
lt_status lt_cuda_sync(lt_cuda *c, lt_error *err);
/* Device memory: free and total bytes (cudaMemGetInfo). */
lt_status lt_cuda_mem_info(lt_cuda *c, size_t *free_bytes, size_t *total_bytes, lt_error *err);

/* Raw device allocations (cudaMalloc / cudaFree). The engine allocates through an arena
 * (kernels/arena.h) carved from one of these. */
lt_status lt_cuda_malloc(lt_cuda *c, void **p, size_t bytes, lt_error *err);
void lt_cuda_free(lt_cuda *c, void *p); /* NULL-safe */

/* Copies and fills on the compute stream (asynchronous for device-to-device and memset;
 * host copies are synchronous: they return when the host buffer may be reused / read). */
lt_status lt_cuda_memset(lt_cuda *c, void *p, int byte, size_t bytes, lt_error *err);
lt_status lt_cuda_copy_d2d(lt_cuda *c, void *dst, const void *src, size_t bytes, lt_error *err);
lt_status lt_cuda_copy_h2d(lt_cuda *c, void *dst, const void *host_src, size_t bytes, lt_error *err);
lt_status lt_cuda_copy_d2h(lt_cuda *c, void *host_dst, const void *src, size_t bytes, lt_error *err);

/* What the context did that costs a step host time, counted since open (tests check that a
 * step's count is what its design says; the debug mode's waits, LONGTAIL_CUDA_SYNC, are not
 * counted): waits for the compute stream (lt_cuda_sync, the host copies, a sum read back, a
 * scratch regrowth without an arena), waits of an upload for the previous one's copy out of
 * the pinned staging buffer (only when it has not run yet), device and pinned allocations and
 * frees (cudaMalloc / cudaMallocHost, cudaFree / cudaFreeHost: cudaFree synchronizes the
 * device), and uploads. */
typedef struct lt_cuda_counts {
    uint64_t syncs, waits, allocs, frees, uploads;
} lt_cuda_counts;
void lt_cuda_get_counts(const lt_cuda *c, lt_cuda_counts *out);

/* Host bytes to device memory WITHOUT waiting for the stream: copied into the context's pinned
 * staging buffer and queued on the compute stream (a cudaMemcpyAsync from pinned memory is
 * truly asynchronous), so the host buffer may be reused on return and dst holds the bytes for
 * every kernel queued after. The staging buffer is reused by the next upload once the copy
 * out of it has run (an event; in a step long done). It grows when short (a pinned
 * reallocation, counted): lt_cuda_reserve_upload sizes it before the first step. */
lt_status lt_cuda_upload(lt_cuda *c, void *dst, const void *host_src, size_t bytes, lt_error *err);
lt_status lt_cuda_reserve_upload(lt_cuda *c, size_t bytes, lt_error *err);

/* The device arena (kernels/arena.h) the context's scratch buffer comes from (NULL: cudaMalloc,
 * the default): with one, a scratch that must grow gives its block back to the arena and takes
 * a larger one, without waiting and without cudaMalloc/cudaFree (stream order makes the reuse
 * safe, as for every arena block). The arena outlives its use: set NULL before destroying it. */
struct lt_arena;
void lt_cuda_use_arena(lt_cuda *c, struct lt_arena *arena);

/* Conversions of n elements on the device. */
lt_status lt_cuda_f32_to_bf16(lt_cuda *c, lt_bf16 *dst, const float *src, size_t n, lt_error *err);
lt_status lt_cuda_bf16_to_f32(lt_cuda *c, float *dst, const lt_bf16 *src, size_t n, lt_error *err);
/* dst[i] = a[i] + b[i] (bf16, computed in fp32): the residual adds. dst may alias a or b. */
lt_status lt_cuda_add(lt_cuda *c, lt_bf16 *dst, const lt_bf16 *a, const lt_bf16 *b, size_t n, lt_error *err);
/* dst[i] += src[i] (bf16): a gradient arriving from elsewhere (din of a stage). */
lt_status lt_cuda_accumulate(lt_cuda *c, lt_bf16 *dst, const lt_bf16 *src, size_t n, lt_error *err);
/* dst[i] = src[i] + src[stride + i] + ... + src[(G - 1) stride + i] (bf16), summed in fp32
 * in that order and rounded once: the dK/dV contributions of a context-parallel group's G
 * members (train/exec/ring.c), the same bits as the CPU's. dst must not overlap src. */
lt_status lt_cuda_sum_blocks(lt_cuda *c, lt_bf16 *dst, const lt_bf16 *src, int G, size_t stride, size_t n,
                             lt_error *err);

/* ---------------------------------------------------------------- GEMM (kernels/gemm.cu) */
/* cuBLASLt, bf16 inputs, fp32 accumulation (CUBLAS_COMPUTE_32F). The algorithm
 * (cublasLtMatmulAlgoGetHeuristic) and its descriptors are cached per (shape,
 * transposes, types, beta != 0), so a shape seen before costs no heuristic call. */

/* out[T,OUT] = x[T,IN] W^T (bf16 out); W is [OUT,IN]. out's rows are `ld` >= OUT elements
 * apart (OUT: dense; the LM head's logits: V rounded up to a multiple of 64, so that rows
 * stay 16-byte aligned for an odd V); columns [OUT, ld) are left untouched. */
lt_status lt_cuda_linear_forward(lt_cuda *c, lt_bf16 *out, const lt_bf16 *x, const lt_bf16 *w, int T, int IN,
                                 int OUT, int ld, lt_error *err);
/* dx[T,IN] += dout W (bf16, NULL: not wanted); dw[OUT,IN] += dout^T x (fp32, NULL: not
 * wanted). dout's rows are `ld` >= OUT elements apart; its columns [OUT, ld) are not read. */
lt_status lt_cuda_linear_backward(lt_cuda *c, lt_bf16 *dx, float *dw, const lt_bf16 *dout, const lt_bf16 *x,
                                  const lt_bf16 *w, int T, int IN, int OUT, int ld, lt_error *err);
/* A linear layer's bias (kernels/gemm.cu; lt_bias_forward / _backward): y[T,n] += b (bf16,
 * fp32 math); db[n] += the column sums of dy (fp32, deterministic: fixed-order partials). */
lt_status lt_cuda_bias_forward(lt_cuda *c, lt_bf16 *y, const lt_bf16 *b, int T, int n, lt_error *err);
lt_status lt_cuda_bias_backward(lt_cuda *c, float *db, const lt_bf16 *dy, int T, int n, lt_error *err);
/* The benchmark's plain GEMM: C[M,N] = A[M,K] B[N,K]^T, bf16 in and out (the shape of a
 * linear forward). */
lt_status lt_cuda_gemm_bf16(lt_cuda *c, lt_bf16 *C, const lt_bf16 *A, const lt_bf16 *B, int M, int N, int K,
                            lt_error *err);
/* Algorithms cached so far (for tests: a repeated shape does not grow it). */
int lt_cuda_gemm_cache_size(const lt_cuda *c);

/* ---------------------------------------------------------------- elementwise families */
/* embedding (kernels/embed.cu) */
/* out[t] = wte[ids[t]]; ids is a device array. ids[t] < 0: a token outside this
 * tensor-parallel rank's vocabulary rows (train/cpu/embed.c): a zero row, no gradient. */
lt_status lt_cuda_embed_forward(lt_cuda *c, lt_bf16 *out, const int32_t *ids, int T, const lt_bf16 *wte, int C,
                                lt_error *err);
/* dwte[ids[t]] += dout[t] (fp32 gradient), deterministic (no float atomics: the same
 * bits on every run). */
lt_status lt_cuda_embed_backward(lt_cuda *c, float *dwte, const lt_bf16 *dout, const int32_t *ids, int T, int C,
                                 lt_error *err);

/* RMSNorm (kernels/rmsnorm.cu): as lt_rmsnorm_forward / _backward. dw is fp32 (+=,
 * deterministic: per-block partial sums reduced in a fixed order). */
lt_status lt_cuda_rmsnorm_forward(lt_cuda *c, lt_bf16 *out, float *rstd, const lt_bf16 *x, const lt_bf16 *w, int T,
                                  int C, float eps, lt_error *err);
lt_status lt_cuda_rmsnorm_backward(lt_cuda *c, lt_bf16 *dx, float *dw, const lt_bf16 *dout, const lt_bf16 *x,
                                   const lt_bf16 *w, const float *rstd, int T, int C, lt_error *err);

/* RoPE (kernels/rope.cu): as lt_rope_forward / _backward, in place; pos is a device array,
 * inv_freq the HOST array of hd/2 inverse frequencies (lt_model_rope_inv_freq; passed to the
 * kernel by value), so the angles are the CPU reference's. */
lt_status lt_cuda_rope_forward(lt_cuda *c, lt_bf16 *x, const int32_t *pos, int T, int n_heads, int hd,
                               const float *inv_freq, lt_error *err);
lt_status lt_cuda_rope_backward(lt_cuda *c, lt_bf16 *dx, const int32_t *pos, int T, int n_heads, int hd,
                                const float *inv_freq, lt_error *err);

/* SwiGLU (kernels/swiglu.cu): as lt_swiglu_forward / _backward. */
lt_status lt_cuda_swiglu_forward(lt_cuda *c, lt_bf16 *out, const lt_bf16 *gate, const lt_bf16 *up, size_t n,
                                 lt_error *err);
lt_status lt_cuda_swiglu_backward(lt_cuda *c, lt_bf16 *dgate, lt_bf16 *dup, const lt_bf16 *dout,
                                  const lt_bf16 *gate, const lt_bf16 *up, size_t n, lt_error *err);

/* Cross-entropy (kernels/xent.cu): as lt_xent_forward_backward over bf16 logits [T,V]
 * (in place: dlogits may equal logits; NULL: the losses only), targets a device array
 * (< 0: no prediction; >= V: a NaN loss and gradient row, the caller's contract broken).
 * Rows of logits and dlogits are `ld` >= V elements apart; the padding columns [V, ld) are
 * neither read (they never count as logits) nor written.
 * The per-row losses go to `row_loss` (fp32 [T], 0 for rows without a target); the host
 * sums them (lt_cuda_sum_rows). */
lt_status lt_cuda_xent_forward_backward(lt_cuda *c, lt_bf16 *dlogits, const lt_bf16 *logits, const int32_t *targets,
                                        int T, int V, int ld, float scale, float *row_loss, lt_error *err);
/* The vocabulary-parallel cross-entropy (kernels/xent.cu; Megatron-LM's, Shoeybi et al. 2019
 * 3), the twins of train/cpu/kernels.h's lt_xent_tp_max / _sums / _finish: logits are the
 * bf16 [T, V] rows (`ld` >= V elements apart, as above) of this tensor-parallel rank's
 * vocabulary rows [v0, v0 + V); rowmax [T]
 * and sums [2T] fp32 device arrays, all-reduced over the TP group by the caller between
 * the calls (rowmax: maximum; sums: sum); targets a device array (< 0: no prediction).
 *   _max     rowmax[t] = the largest local logit of row t;
 *   _sums    sums[t] = sum_v exp(l[t, v] - rowmax[t]) (rowmax: the group's), sums[T + t] =
 *            the target's logit where this rank holds it, else 0;
 *   _finish  row_loss[t] = log sums[t] + rowmax[t] - sums[T + t] (0 without a target), and
 *            with dlogits (may equal logits; NULL: the losses only) dlogits = scale
 *            (softmax - onehot) over the local rows. The host sums row_loss
 *            (lt_cuda_sum_rows). */
lt_status lt_cuda_xent_tp_max(lt_cuda *c, float *rowmax, const lt_bf16 *logits, int T, int V, int ld, lt_error *err);
lt_status lt_cuda_xent_tp_sums(lt_cuda *c, float *sums, const lt_bf16 *logits, const float *rowmax,
                               const int32_t *targets, int v0, int T, int V, int ld, lt_error *err);
lt_status lt_cuda_xent_tp_finish(lt_cuda *c, lt_bf16 *dlogits, const lt_bf16 *logits, const float *rowmax,
                                 const float *sums, const int32_t *targets, int v0, int T, int V, int ld, float scale,
                                 float *row_loss, lt_error *err);
/* Sum of n fp32 device values, in double, read back to the host (synchronizes). */
lt_status lt_cuda_sum_rows(lt_cuda *c, const float *x, size_t n, double *host_sum, lt_error *err);
/* Sums kept on the device and read back once: the context holds LT_CUDA_SUM_SLOTS doubles;
 * lt_cuda_sum_rows_into (kernels/context.cu) and lt_cuda_sum_squares_into (kernels/adamw.cu)
 * compute the double lt_cuda_sum_rows / lt_cuda_sum_squares would return and store it in
 * `slot` (first) or add it there, on the stream, without waiting; lt_cuda_read_sum copies
 * the slot to the host (synchronizes). Additions run in call order, so the bits are those
 * of the host's `total += sum` over the same calls, starting from the first. */
enum { LT_CUDA_SUM_LOSS = 0, LT_CUDA_SUM_NORM = 1, LT_CUDA_SUM_SLOTS = 2 };
lt_status lt_cuda_sum_rows_into(lt_cuda *c, const float *x, size_t n, int slot, bool first, lt_error *err);
lt_status lt_cuda_sum_squares_into(lt_cuda *c, const float *g, size_t n, int slot, bool first, lt_error *err);
lt_status lt_cuda_read_sum(lt_cuda *c, int slot, double *host_sum, lt_error *err);

/* ---------------------------------------------------------------- optimizer (kernels/adamw.cu) */
/* Sum of squares of n fp32 gradients, accumulated in fp32 per block and in double across
 * blocks, deterministic; the result to the host (synchronizes). */
lt_status lt_cuda_sum_squares(lt_cuda *c, const float *g, size_t n, double *host_sum, lt_error *err);
/* g[i] *= s. */
lt_status lt_cuda_scale(lt_cuda *c, float *g, size_t n, float s, lt_error *err);
/* dst[i] += src[i], fp32 (gradients). */
lt_status lt_cuda_accumulate_f32(lt_cuda *c, float *dst, const float *src, size_t n, lt_error *err);
/* AdamW over [begin, end) of the parameter buffer, the update of train/model/optim.c's
 * lt_adamw_update_range: t is the step after increment, decay the decoupled weight decay
 * of this range (0 for vectors), master/m/v fp32, and the bf16 copy written after. The
 * scalars are doubles, as lt_optim_config holds them: the per-step constants (bias
 * corrections, 1 - lr decay, ...) are computed from them in double on the host exactly
 * as the CPU does, so the fp32 update matches lt_adamw_update_range bit for bit. */
lt_status lt_cuda_adamw(lt_cuda *c, float *master, lt_bf16 *bf16_copy, const float *grad, float *m, float *v,
                        size_t n, double lr, double beta1, double beta2, double eps, double decay, int64_t t,
                        lt_error *err);

/* ---------------------------------------------------------------- attention (kernels/attention.cu) */
/*
 * The GPU twin of lt_attention_forward / _backward (train/cpu/kernels.h): causal GQA over a
 * packed unit, per-sample (varlen) masking, KV context of earlier slices, FlashAttention-2
 * (online softmax, lse saved, no T x T matrix; tensor cores). A segment is a slice: its
 * query rows [row0, row0+n) of the unit at absolute positions begin.. of its sample,
 * whose keys/values are the sample's context buffers (rows 0..begin+n-1).
 */
typedef struct lt_cuda_attn_segment {
    int row0, n, begin;
    const lt_bf16 *k, *v; /* the sample's [>= begin+n, kvd] keys (post-RoPE) and values */
    lt_bf16 *dk, *dv;     /* backward: += rows 0..begin+n-1 (bf16, accumulated in fp32
                             inside the kernel: one writer per row block, no atomics on
                             dK/dV; segments of one sample in one call may alias) */
} lt_cuda_attn_segment;

/* Segments live on the host; the kernels copy them to the device themselves (through a
 * buffer the context keeps). out [T, nh*hd] bf16, lse [T, nh] fp32. */
lt_status lt_cuda_attention_forward(lt_cuda *c, lt_bf16 *out, float *lse, const lt_bf16 *q,
                                    const lt_cuda_attn_segment *segs, int n_segs, int T, int nh, int nkv, int hd,
                                    lt_error *err);
/* dq += (bf16), seg.dk/dv += ; from dout, the forward's out and lse. */
lt_status lt_cuda_attention_backward(lt_cuda *c, lt_bf16 *dq, const lt_bf16 *dout, const lt_bf16 *out,
                                     const float *lse, const lt_bf16 *q, const lt_cuda_attn_segment *segs, int n_segs,
                                     int T, int nh, int nkv, int hd, lt_error *err);

#ifdef __cplusplus
}
#endif

#endif /* LT_KERNELS_CUDA_H */
