/*
 * train/model/backend.h — where a pass's buffers live and what computes on them: the ops table
 * the unit forward/backward (train/model/pass.c) and the KV context (train/model/kvctx.c) call for
 * every buffer operation and kernel, so the SAME pass code runs on the CPU fp32 reference
 * and on the GPU in bf16 (issue 20).
 *
 * Three implementations:
 *   - lt_backend_cpu()       host memory, fp32, a thin wrapper over train/cpu/kernels.h; what
 *                            a model without a backend (lt_llama.backend == NULL) uses, and
 *                            bit for bit the results the pass gave before this header existed;
 *   - lt_backend_cpu_bf16()  host memory, bf16 STORAGE of activations, K/V and their
 *                            gradients (2-byte elements, rounded to nearest even after each
 *                            op, the kernels computing in fp32 in between): for tests only,
 *                            the one way to run the element-size paths of the GPU backend's
 *                            host logic (layouts, row moves, K/V rows) without a GPU;
 *   - lt_backend_cuda_open() (train/model/backend_cuda.c) device memory, bf16 compute over
 *                            kernels/cuda.h, fp32 master weights kept beside a bf16 copy.
 *
 * Precision (kernels/cuda.h "Mixed precision"): activations, their gradients, keys, values
 * and dK/dV are elements of `act_bytes` bytes (4: fp32, 2: bf16); per-row statistics (the
 * RMSNorm rstd, the attention lse) and parameter gradients are fp32 on every backend.
 *
 * Pointers: every buffer pointer below is a BACKEND pointer (device memory for CUDA), never
 * dereferenced by the pass; the pass keeps its typed fields (float *) for the fp32 backend's
 * sake and does all arithmetic on them in bytes (act_bytes). Arrays named host_* (token ids,
 * positions, targets) are host memory: the backend moves them itself where it needs to.
 * Weights are named by their view into the model's fp32 host parameter buffer
 * (m->w.layer[l].wq ...); `weight` maps such a view to what the kernels read (itself on the
 * CPU, the matching element of the bf16 device copy on CUDA).
 *
 * Errors: kernels on the CPU cannot fail; launches on a GPU can. So the ops return nothing
 * and a backend keeps the FIRST failure (CUDA's own sticky-error model): `check` reports it
 * (LT_OK on the CPU), waiting for the queued work; the pass reads it without waiting
 * (`poll`) after every half layer and waits with `check` once, before it returns.
 * Allocation returns NULL on failure; the caller names what it was allocating with
 * lt_backend_nomem, which adds the backend's own reason where it keeps one (the CUDA
 * arena's: the bytes asked, the bytes free, its size).
 *
 * Fresh memory: an alloc not asked zeroed holds garbage on the GPU (arena blocks are
 * reused); the CPU backends fill it with NaN under LONGTAIL_POISON (on in the test suite,
 * docs/testing.md), so a pass that reads what it never wrote fails the tests.
 *
 * Conventions of every kernel op: train/cpu/kernels.h's (forward writes, backward ADDS).
 */
#ifndef LT_TRAIN_BACKEND_H
#define LT_TRAIN_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/bf16.h"          /* lt_bf16_from_f32, lt_bf16_to_f32 */
#include "lib/error.h"         /* lt_status, lt_error */
#include "lib/threadpool.h"    /* lt_pool */
#include "train/cpu/kernels.h" /* lt_attn_segment */

struct lt_llama;

typedef struct lt_backend lt_backend;

struct lt_backend {
    const char *name;  /* "cpu", "cpu-bf16" (tests), "cuda" */
    size_t act_bytes;  /* bytes of one activation / K / V element: 4 (fp32) or 2 (bf16) */
    size_t weight_bytes; /* bytes of one element of what `weight` maps a view to: 4 on the CPU
                          * backends (the fp32 parameters), 2 on CUDA (the bf16 copy) */
    size_t align;      /* every array a pass lays out starts at a multiple of this (bytes) */
    int logits_pad;    /* the LM head's logits rows are V rounded up to a multiple of this many
                        * elements apart (lt_backend_logits_ld; 1: dense) */
    bool host;         /* buffers are host memory (memcpy-able by callers) */
    void *ctx;         /* the implementation's state */

    /* ---- memory */
    void *(*alloc)(const lt_backend *be, size_t bytes, bool zeroed); /* NULL: out of memory */
    /* the reason the last failed alloc gave, into *why (may be NULL: dropped) and cleared;
     * false when none is kept. NULL on the CPU backends (malloc gives no reason). */
    bool (*alloc_failure)(const lt_backend *be, lt_error *why);
    void (*free)(const lt_backend *be, void *p);                      /* NULL-safe */
    void (*zero)(const lt_backend *be, void *p, size_t bytes);
    /* bytes from src to dst, both backend memory; the ranges may overlap (memmove) */
    void (*copy)(const lt_backend *be, void *dst, const void *src, size_t bytes);
    /* raw bytes between host and backend memory (synchronous: the host buffer may be read
     * or reused when they return) */
    lt_status (*to_host)(const lt_backend *be, void *host_dst, const void *src, size_t bytes, lt_error *err);
    lt_status (*from_host)(const lt_backend *be, void *dst, const void *host_src, size_t bytes, lt_error *err);
    /* n activation elements to / from host fp32 (converting from / to act_bytes elements) */
    lt_status (*to_host_f32)(const lt_backend *be, float *host_dst, const void *src, size_t n, lt_error *err);
    lt_status (*from_host_f32)(const lt_backend *be, void *dst, const float *host_src, size_t n, lt_error *err);
    /* the first failure of an op so far (LT_OK: none); waits for queued work to finish */
    lt_status (*check)(const lt_backend *be, lt_error *err);
    /* the same without waiting: the failures known so far (a GPU kernel's execution error
     * shows only at the next check). What the pass reads between layers; NULL: check. */
    lt_status (*poll)(const lt_backend *be, lt_error *err);

    /* ---- per-unit host data (NULL on the CPU backends, whose ops read host arrays directly) */
    /* [host, host + n) holds host int arrays that later ops name (host_ids, host_pos,
     * host_targets) and that stay unchanged until unbind_ints(host): the backend copies them
     * to its memory once (CUDA: one asynchronous upload a unit) and every op whose array
     * lies inside the range reads that copy; other arrays are staged per op. */
    void (*bind_ints)(const lt_backend *be, const int32_t *host, size_t n);
    void (*unbind_ints)(const lt_backend *be, const int32_t *host);
    /* backends that keep the cross-entropy's sums on the device (CUDA): xent and
     * xent_tp_finish return 0 and add their sums there; take_loss returns what was added
     * since the last take (one wait) and clears it. NULL: xent returns the sum itself. */
    double (*take_loss)(const lt_backend *be);

    /* ---- elementwise on activation elements: dst = a + b (dst may alias a or b), dst += src */
    void (*add)(const lt_backend *be, void *dst, const void *a, const void *b, size_t n);
    void (*accumulate)(const lt_backend *be, void *dst, const void *src, size_t n);
    /* dst += src on n fp32 elements (parameter gradients, on every backend) */
    void (*accumulate_f32)(const lt_backend *be, float *dst, const float *src, size_t n);
    /* dst[i] = src[i] + src[stride + i] + ... + src[(G - 1) stride + i], summed in fp32 in
     * that order and rounded once to act_bytes elements (the context-parallel dK/dV sums:
     * the same bits on every backend of one element size); dst does not overlap src */
    void (*sum_blocks)(const lt_backend *be, void *dst, const void *src, int G, size_t stride, size_t n);

    /* ---- the model's kernels (train/cpu/kernels.h, in act_bytes elements; rstd, lse, dw fp32) */
    const void *(*weight)(const lt_backend *be, const struct lt_llama *m, const float *view);
    void (*embed_forward)(const lt_backend *be, void *out, const int32_t *host_ids, int T, const void *wte, int C);
    void (*embed_backward)(const lt_backend *be, float *dwte, const void *dout, const int32_t *host_ids, int T, int C);
    void (*rmsnorm_forward)(const lt_backend *be, void *out, float *rstd, const void *x, const void *w, int T, int C,
                            float eps, lt_pool *pool);
    void (*rmsnorm_backward)(const lt_backend *be, void *dx, float *dw, const void *dout, const void *x,
                             const void *w, const float *rstd, int T, int C, lt_pool *pool);
    void (*linear_forward)(const lt_backend *be, void *out, const void *x, const void *w, int T, int IN, int OUT);
    void (*linear_backward)(const lt_backend *be, void *dx, float *dw, const void *dout, const void *x, const void *w,
                            int T, int IN, int OUT);
    /* the same with the rows of out (forward) / dout (backward) `ld` >= OUT elements apart:
     * the LM head's padded logits (lt_backend_logits_ld). The columns [OUT, ld) are padding:
     * the forward never writes them, the backward never reads them. */
    void (*linear_forward_ld)(const lt_backend *be, void *out, const void *x, const void *w, int T, int IN, int OUT,
                              int ld);
    void (*linear_backward_ld)(const lt_backend *be, void *dx, float *dw, const void *dout, const void *x,
                               const void *w, int T, int IN, int OUT, int ld);
    /* a linear layer's bias (Qwen2's Q/K/V): y[T, n] += b (b from `weight`); db[n] += column
     * sums of dy (fp32, a parameter gradient) */
    void (*bias_forward)(const lt_backend *be, void *y, const void *b, int T, int n);
    void (*bias_backward)(const lt_backend *be, float *db, const void *dy, int T, int n);
    /* host_inv_freq: the model's [hd / 2] inverse frequencies (lt_llama.rope_inv_freq, host) */
    void (*rope_forward)(const lt_backend *be, void *x, const int32_t *host_pos, int T, int n_heads, int hd,
                         const float *host_inv_freq, lt_pool *pool);
    void (*rope_backward)(const lt_backend *be, void *dx, const int32_t *host_pos, int T, int n_heads, int hd,
                          const float *host_inv_freq, lt_pool *pool);
    /* segments: train/cpu/kernels.h's, their k/v/dk/dv backend pointers of act_bytes elements */
    void (*attention_forward)(const lt_backend *be, void *out, float *lse, const void *q, const lt_attn_segment *segs,
                              int n_segs, int T, int nh, int nkv, int hd, lt_pool *pool);
    void (*attention_backward)(const lt_backend *be, void *dq, const void *dout, const void *out, const float *lse,
                               const void *q, const lt_attn_segment *segs, int n_segs, int T, int nh, int nkv,
                               int hd, lt_pool *pool);
    void (*swiglu_forward)(const lt_backend *be, void *out, const void *gate, const void *up, size_t n, lt_pool *pool);
    void (*swiglu_backward)(const lt_backend *be, void *dgate, void *dup, const void *dout, const void *gate,
                            const void *up, size_t n, lt_pool *pool);
    /* summed cross-entropy of the predicting rows (host_targets[t] >= 0); with dlogits,
     * dlogits = scale (softmax - onehot), in place allowed (lt_xent_forward_backward). Rows
     * of (d)logits are `ld` >= V elements apart; columns [V, ld) are neither read nor written
     * (whatever they hold never counts as a logit). */
    double (*xent)(const lt_backend *be, void *dlogits, const void *logits, const int32_t *host_targets, int T, int V,
                   int ld, float scale, lt_pool *pool);

    /* ---- tensor parallelism (NULL where the backend has none: the pass refuses tp > 1) */
    /* the vocab-parallel cross-entropy, train/cpu/kernels.h's lt_xent_tp_max / _sums /
     * _finish (logits act_bytes elements of the local vocabulary rows [v0, v0 + V), rows
     * `ld` >= V elements apart as for xent; rowmax, sums fp32 backend memory, reduced over
     * the group by the caller in between) */
    void (*xent_tp_max)(const lt_backend *be, float *rowmax, const void *logits, int T, int V, int ld);
    void (*xent_tp_sums)(const lt_backend *be, float *sums, const void *logits, const float *rowmax,
                         const int32_t *host_targets, int v0, int T, int V, int ld);
    double (*xent_tp_finish)(const lt_backend *be, void *dlogits, const void *logits, const float *rowmax,
                             const float *sums, const int32_t *host_targets, int v0, int T, int V, int ld, float scale);
};

/* The row stride (elements) of the LM head's logits for V vocabulary rows: V rounded up to
 * be->logits_pad. 64 on the CUDA backend: with V = 50257 (odd) dense rows would leave
 * every other row 2-byte aligned, and cuBLASLt and the cross-entropy would take their slow
 * unaligned paths (kernels/gemm.cu); 64 on cpu-bf16 too, so that the tests run the padded
 * layout; 1 (dense) on the fp32 reference. Only the logits block is padded: the head's
 * weight stays [V, C], and checkpoints are unchanged. */
static inline int lt_backend_logits_ld(const lt_backend *be, int V) {
    int p = be->logits_pad > 1 ? be->logits_pad : 1;
    return (V + p - 1) / p * p;
}

/* The CPU fp32 reference backend (static; never fails but for allocation). */
const lt_backend *lt_backend_cpu(void);

/* The test backend: host memory, bf16 storage (see above). Its sticky error is kept in a
 * process-wide slot (an emulation for tests: one user at a time). */
const lt_backend *lt_backend_cpu_bf16(void);

/* LT_ERR_NOMEM for an alloc of `be` that returned NULL, as lt_fail(err, LT_ERR_NOMEM, where,
 * fmt, ...) followed by ": " and the backend's reason when it kept one (be->alloc_failure,
 * taken), whose hint it carries: what the caller was allocating and why it did not fit. */
lt_status lt_backend_nomem(const lt_backend *be, lt_error *err, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---------------------------------------------------------------- the CUDA backend
 * (train/model/backend_cuda.c; in every build: without CUDA, open fails with kernels/cuda.h's
 * "built without CUDA"). Nothing of it has run on a GPU yet. */
struct lt_optim_config;
struct lt_adamw;

/* Open GPU `device` (the rank's local GPU): LT_ERR_CONFIG with lt_cuda_open's reason when
 * there is none. *out is closed with lt_backend_cuda_close. */
lt_status lt_backend_cuda_open(lt_backend **out, int device, lt_error *err);
void lt_backend_cuda_close(lt_backend *be); /* NULL-safe */
/* Free and total device memory. */
lt_status lt_backend_cuda_mem(const lt_backend *be, size_t *free_bytes, size_t *total_bytes, lt_error *err);
/* Carve the step's arena: one device block of `bytes` (the plan's predicted peak of the
 * rank's stage) that every later pass allocation comes from. LT_ERR_CONFIG at `what`
 * (e.g. "stage 1 of plan step 3") when it exceeds the free memory, naming both in GiB. */
lt_status lt_backend_cuda_reserve(lt_backend *be, size_t bytes, const char *what, lt_error *err);
/* The arena's peak use since the last reset (0 without an arena): the measured device peak
 * of the passes' memory; lt_backend_cuda_reset_peak starts a new one (at each step). */
size_t lt_backend_cuda_peak(const lt_backend *be);
void lt_backend_cuda_reset_peak(lt_backend *be);
/* What the backend's context did since it was opened (kernels/cuda.h lt_cuda_counts: waits
 * for the stream, uploads, device allocations and frees): a step after the first should
 * allocate and free nothing and wait a few times a unit (tests/kernels/test_cuda_kernels). */
struct lt_cuda_counts;
void lt_backend_cuda_counts(const lt_backend *be, struct lt_cuda_counts *out);
/* The model to the device: the fp32 master and its bf16 copy (what the kernels read); sets
 * m->backend = be. The AdamW moments likewise (a resumed run's; zeroed on the device when
 * never uploaded). m->params and opt stay the host copies; the downloads bring master and
 * moments back into them (before a checkpoint: checkpoints keep their fp32 format). */
lt_status lt_backend_cuda_upload(lt_backend *be, struct lt_llama *m, lt_error *err);
/* The device fp32 master (m's layout; NULL when uploaded sharded), and the bf16 copy
 * rewritten from it, queued on the compute stream (HelixPipe's weights exchanged between the
 * stages as fp32, train/dist/dist.h lt_dist_helix_weights). */
float *lt_backend_cuda_master(const lt_backend *be);
lt_status lt_backend_cuda_refresh16(lt_backend *be, const struct lt_llama *m, lt_error *err);
lt_status lt_backend_cuda_download(lt_backend *be, struct lt_llama *m, lt_error *err);
lt_status lt_backend_cuda_upload_moments(lt_backend *be, const struct lt_adamw *opt, lt_error *err);
lt_status lt_backend_cuda_download_moments(lt_backend *be, struct lt_adamw *opt, lt_error *err);
/* Sharded data parallelism (parallel.zero1 on the GPU, Megatron's distributed optimizer):
 * only the bf16 copy the kernels read goes to the device, in a buffer of n_alloc >= n_params
 * elements (the DP shards' padding, zeros); the fp32 master and the moments are the DP
 * ranks' blocks (train/dist), never whole on the device. m->params stays the host copy. */
lt_status lt_backend_cuda_upload_sharded(lt_backend *be, struct lt_llama *m, size_t n_alloc, lt_error *err);
/* The device bf16 copy (m's layout): what a sharded update writes and all-gathers. */
lt_bf16 *lt_backend_cuda_weights16(const lt_backend *be);
/* AdamW of the parameters [lo, hi) of m's layout (decay per tensor, as lt_backend_cuda_adamw)
 * with the block's own fp32 master and moments (element k of the range at [k - lo]); the
 * bf16 copy of [lo, hi) is rewritten. Queued on the compute stream. */
lt_status lt_backend_cuda_adamw_block(lt_backend *be, const struct lt_llama *m, const float *grads, size_t lo, size_t hi,
                                      float *master, float *mom1, float *mom2, double lr, int64_t t,
                                      const struct lt_optim_config *oc, lt_error *err);
/* The model-state bytes allocated on the device so far: the bf16 copy, the fp32 master and
 * the moments where held whole, and every lt_backend_cuda_grads buffer (the gradients, a
 * sharded rank's blocks): what the cost model's model-state bytes price. */
size_t lt_backend_cuda_states_bytes(const lt_backend *be);
/* A zeroed fp32 device buffer of n floats: the gradients (map it with lt_llama_views_of),
 * or a sharded rank's blocks of master and moments. Counted in lt_backend_cuda_states_bytes. */
lt_status lt_backend_cuda_grads(lt_backend *be, size_t n, float **grads, lt_error *err);
void lt_backend_cuda_free_grads(lt_backend *be, float *grads);
/* train/model/optim.h's lt_clip_grads and lt_adamw_step on the device (t: the step count after
 * increment); the bf16 copy is rewritten from the updated master. */
lt_status lt_backend_cuda_clip(lt_backend *be, float *grads, size_t n, double max_norm, double *norm, lt_error *err);
lt_status lt_backend_cuda_adamw(lt_backend *be, const struct lt_llama *m, const float *grads, double lr, int64_t t,
                                const struct lt_optim_config *oc, lt_error *err);

/* The distributed engine on the GPU (train/cmd/train.c, train/dist/dist.c): the context's
 * compute and communication streams (cudaStream_t) for lt_comm_attach_device; the sum of
 * squares of n device floats (to the host, synchronizing) and g *= coef, for the global
 * norm and clipping over the stage's own tensors (lt_dist_clip); AdamW of the tensors with
 * mine[i] (NULL: all), the others being another stage's. */
void lt_backend_cuda_streams(const lt_backend *be, void **compute, void **comm);
lt_status lt_backend_cuda_sum_squares(const lt_backend *be, const float *g, size_t n, double *sq, lt_error *err);
/* The sum of squares of n ranges of device floats (g + off[i], len[i] floats each), summed on
 * the device in range order and read back once (one wait): the bits of adding each range's
 * lt_backend_cuda_sum_squares on the host in that order. */
lt_status lt_backend_cuda_sum_squares_ranges(const lt_backend *be, const float *g, const size_t *off,
                                             const size_t *len, int n, double *sq, lt_error *err);
lt_status lt_backend_cuda_scale(const lt_backend *be, float *g, size_t n, float coef, lt_error *err);
lt_status lt_backend_cuda_adamw_tensors(lt_backend *be, const struct lt_llama *m, const float *grads, double lr,
                                        int64_t t, const struct lt_optim_config *oc, const bool *mine, lt_error *err);

/* The backend of model m (m->backend, or the CPU fp32 one when it has none). */
const lt_backend *lt_backend_of(const struct lt_llama *m);

/* Host bf16 conversions (the emulation's and tests'): lt_bf16_from_f32 (round to nearest
 * even, NaN kept) and lt_bf16_to_f32, lib/bf16.h, included above. */

/* Bytes of n elements of es bytes rounded up to the backend's alignment. */
static inline size_t lt_backend_span(const lt_backend *be, size_t n, size_t es) {
    size_t b = n * es, a = be->align > 0 ? be->align : 1;
    return (b + a - 1) / a * a;
}

#endif /* LT_TRAIN_BACKEND_H */
