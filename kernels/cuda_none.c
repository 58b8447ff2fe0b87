/*
 * kernels/cuda_none.c — kernels/cuda.h in a build without CUDA: lt_cuda_open fails with
 * LT_ERR_CONFIG "built without CUDA", so no context ever exists and every other function
 * is unreachable from correct code; they fail the same way (or do nothing, for the
 * NULL-safe destructors) rather than pretend. The host bf16 conversions are lib/bf16.c's,
 * in both configurations; the attention functions' stand-ins in kernels/attention_none.c.
 */
#include "kernels/cuda.h"

#include <stddef.h>

static lt_status no_cuda(lt_error *err, const char *fn) {
    lt_fail(err, LT_ERR_CONFIG, fn, "built without CUDA");
    lt_error_hint(err, "configure found no CUDA toolkit or was given --without-cuda; use train.backend = cpu, or "
                       "rebuild with --with-cuda on a machine with nvcc, cuBLASLt and NCCL");
    return LT_ERR_CONFIG;
}

lt_status lt_cuda_open(lt_cuda **out, int device, lt_error *err) {
    (void)device;
    if (out != NULL) *out = NULL;
    return no_cuda(err, "lt_cuda_open");
}

void lt_cuda_close(lt_cuda *c) { (void)c; }
int lt_cuda_device(const lt_cuda *c) { (void)c; return -1; }
void *lt_cuda_stream(const lt_cuda *c) { (void)c; return NULL; }
void *lt_cuda_comm_stream(const lt_cuda *c) { (void)c; return NULL; }
int lt_cuda_gemm_cache_size(const lt_cuda *c) { (void)c; return 0; }
void lt_cuda_free(lt_cuda *c, void *p) { (void)c; (void)p; }
void lt_cuda_get_counts(const lt_cuda *c, lt_cuda_counts *out) {
    (void)c;
    *out = (lt_cuda_counts){0};
}
void lt_cuda_use_arena(lt_cuda *c, struct lt_arena *arena) { (void)c, (void)arena; }

/* Every other function: the arguments are unused, the answer is the same. */
#define NO_CUDA(fn) return no_cuda(err, #fn)

lt_status lt_cuda_sync(lt_cuda *c, lt_error *err) { (void)c; NO_CUDA(lt_cuda_sync); }
lt_status lt_cuda_mem_info(lt_cuda *c, size_t *free_bytes, size_t *total_bytes, lt_error *err) {
    (void)c;
    if (free_bytes) *free_bytes = 0;
    if (total_bytes) *total_bytes = 0;
    NO_CUDA(lt_cuda_mem_info);
}
lt_status lt_cuda_malloc(lt_cuda *c, void **p, size_t bytes, lt_error *err) {
    (void)c, (void)bytes;
    if (p) *p = NULL;
    NO_CUDA(lt_cuda_malloc);
}
lt_status lt_cuda_memset(lt_cuda *c, void *p, int byte, size_t bytes, lt_error *err) {
    (void)c, (void)p, (void)byte, (void)bytes;
    NO_CUDA(lt_cuda_memset);
}
lt_status lt_cuda_copy_d2d(lt_cuda *c, void *dst, const void *src, size_t bytes, lt_error *err) {
    (void)c, (void)dst, (void)src, (void)bytes;
    NO_CUDA(lt_cuda_copy_d2d);
}
lt_status lt_cuda_copy_h2d(lt_cuda *c, void *dst, const void *host_src, size_t bytes, lt_error *err) {
    (void)c, (void)dst, (void)host_src, (void)bytes;
    NO_CUDA(lt_cuda_copy_h2d);
}
lt_status lt_cuda_copy_d2h(lt_cuda *c, void *host_dst, const void *src, size_t bytes, lt_error *err) {
    (void)c, (void)host_dst, (void)src, (void)bytes;
    NO_CUDA(lt_cuda_copy_d2h);
}
lt_status lt_cuda_f32_to_bf16(lt_cuda *c, lt_bf16 *dst, const float *src, size_t n, lt_error *err) {
    (void)c, (void)dst, (void)src, (void)n;
    NO_CUDA(lt_cuda_f32_to_bf16);
}
lt_status lt_cuda_bf16_to_f32(lt_cuda *c, float *dst, const lt_bf16 *src, size_t n, lt_error *err) {
    (void)c, (void)dst, (void)src, (void)n;
    NO_CUDA(lt_cuda_bf16_to_f32);
}
lt_status lt_cuda_add(lt_cuda *c, lt_bf16 *dst, const lt_bf16 *a, const lt_bf16 *b, size_t n, lt_error *err) {
    (void)c, (void)dst, (void)a, (void)b, (void)n;
    NO_CUDA(lt_cuda_add);
}
lt_status lt_cuda_accumulate(lt_cuda *c, lt_bf16 *dst, const lt_bf16 *src, size_t n, lt_error *err) {
    (void)c, (void)dst, (void)src, (void)n;
    NO_CUDA(lt_cuda_accumulate);
}
lt_status lt_cuda_sum_blocks(lt_cuda *c, lt_bf16 *dst, const lt_bf16 *src, int G, size_t stride, size_t n,
                             lt_error *err) {
    (void)c, (void)dst, (void)src, (void)G, (void)stride, (void)n;
    NO_CUDA(lt_cuda_sum_blocks);
}
lt_status lt_cuda_linear_forward(lt_cuda *c, lt_bf16 *out, const lt_bf16 *x, const lt_bf16 *w, int T, int IN,
                                 int OUT, int ld, lt_error *err) {
    (void)c, (void)out, (void)x, (void)w, (void)T, (void)IN, (void)OUT, (void)ld;
    NO_CUDA(lt_cuda_linear_forward);
}
lt_status lt_cuda_linear_backward(lt_cuda *c, lt_bf16 *dx, float *dw, const lt_bf16 *dout, const lt_bf16 *x,
                                  const lt_bf16 *w, int T, int IN, int OUT, int ld, lt_error *err) {
    (void)c, (void)dx, (void)dw, (void)dout, (void)x, (void)w, (void)T, (void)IN, (void)OUT, (void)ld;
    NO_CUDA(lt_cuda_linear_backward);
}
lt_status lt_cuda_gemm_bf16(lt_cuda *c, lt_bf16 *C, const lt_bf16 *A, const lt_bf16 *B, int M, int N, int K,
                            lt_error *err) {
    (void)c, (void)C, (void)A, (void)B, (void)M, (void)N, (void)K;
    NO_CUDA(lt_cuda_gemm_bf16);
}
lt_status lt_cuda_embed_forward(lt_cuda *c, lt_bf16 *out, const int32_t *ids, int T, const lt_bf16 *wte, int C,
                                lt_error *err) {
    (void)c, (void)out, (void)ids, (void)T, (void)wte, (void)C;
    NO_CUDA(lt_cuda_embed_forward);
}
lt_status lt_cuda_embed_backward(lt_cuda *c, float *dwte, const lt_bf16 *dout, const int32_t *ids, int T, int C,
                                 lt_error *err) {
    (void)c, (void)dwte, (void)dout, (void)ids, (void)T, (void)C;
    NO_CUDA(lt_cuda_embed_backward);
}
lt_status lt_cuda_rmsnorm_forward(lt_cuda *c, lt_bf16 *out, float *rstd, const lt_bf16 *x, const lt_bf16 *w, int T,
                                  int C, float eps, lt_error *err) {
    (void)c, (void)out, (void)rstd, (void)x, (void)w, (void)T, (void)C, (void)eps;
    NO_CUDA(lt_cuda_rmsnorm_forward);
}
lt_status lt_cuda_rmsnorm_backward(lt_cuda *c, lt_bf16 *dx, float *dw, const lt_bf16 *dout, const lt_bf16 *x,
                                   const lt_bf16 *w, const float *rstd, int T, int C, lt_error *err) {
    (void)c, (void)dx, (void)dw, (void)dout, (void)x, (void)w, (void)rstd, (void)T, (void)C;
    NO_CUDA(lt_cuda_rmsnorm_backward);
}
lt_status lt_cuda_rope_forward(lt_cuda *c, lt_bf16 *x, const int32_t *pos, int T, int n_heads, int hd,
                               const float *inv_freq, lt_error *err) {
    (void)c, (void)x, (void)pos, (void)T, (void)n_heads, (void)hd, (void)inv_freq;
    NO_CUDA(lt_cuda_rope_forward);
}
lt_status lt_cuda_rope_backward(lt_cuda *c, lt_bf16 *dx, const int32_t *pos, int T, int n_heads, int hd,
                                const float *inv_freq, lt_error *err) {
    (void)c, (void)dx, (void)pos, (void)T, (void)n_heads, (void)hd, (void)inv_freq;
    NO_CUDA(lt_cuda_rope_backward);
}
lt_status lt_cuda_bias_forward(lt_cuda *c, lt_bf16 *y, const lt_bf16 *b, int T, int n, lt_error *err) {
    (void)c, (void)y, (void)b, (void)T, (void)n;
    NO_CUDA(lt_cuda_bias_forward);
}
lt_status lt_cuda_bias_backward(lt_cuda *c, float *db, const lt_bf16 *dy, int T, int n, lt_error *err) {
    (void)c, (void)db, (void)dy, (void)T, (void)n;
    NO_CUDA(lt_cuda_bias_backward);
}
lt_status lt_cuda_swiglu_forward(lt_cuda *c, lt_bf16 *out, const lt_bf16 *gate, const lt_bf16 *up, size_t n,
                                 lt_error *err) {
    (void)c, (void)out, (void)gate, (void)up, (void)n;
    NO_CUDA(lt_cuda_swiglu_forward);
}
lt_status lt_cuda_swiglu_backward(lt_cuda *c, lt_bf16 *dgate, lt_bf16 *dup, const lt_bf16 *dout,
                                  const lt_bf16 *gate, const lt_bf16 *up, size_t n, lt_error *err) {
    (void)c, (void)dgate, (void)dup, (void)dout, (void)gate, (void)up, (void)n;
    NO_CUDA(lt_cuda_swiglu_backward);
}
lt_status lt_cuda_xent_forward_backward(lt_cuda *c, lt_bf16 *dlogits, const lt_bf16 *logits, const int32_t *targets,
                                        int T, int V, int ld, float scale, float *row_loss, lt_error *err) {
    (void)c, (void)dlogits, (void)logits, (void)targets, (void)T, (void)V, (void)ld, (void)scale, (void)row_loss;
    NO_CUDA(lt_cuda_xent_forward_backward);
}
lt_status lt_cuda_xent_tp_max(lt_cuda *c, float *rowmax, const lt_bf16 *logits, int T, int V, int ld, lt_error *err) {
    (void)c, (void)rowmax, (void)logits, (void)T, (void)V, (void)ld;
    NO_CUDA(lt_cuda_xent_tp_max);
}
lt_status lt_cuda_xent_tp_sums(lt_cuda *c, float *sums, const lt_bf16 *logits, const float *rowmax,
                               const int32_t *targets, int v0, int T, int V, int ld, lt_error *err) {
    (void)c, (void)sums, (void)logits, (void)rowmax, (void)targets, (void)v0, (void)T, (void)V, (void)ld;
    NO_CUDA(lt_cuda_xent_tp_sums);
}
lt_status lt_cuda_xent_tp_finish(lt_cuda *c, lt_bf16 *dlogits, const lt_bf16 *logits, const float *rowmax,
                                 const float *sums, const int32_t *targets, int v0, int T, int V, int ld, float scale,
                                 float *row_loss, lt_error *err) {
    (void)c, (void)dlogits, (void)logits, (void)rowmax, (void)sums, (void)targets, (void)v0, (void)T, (void)V,
        (void)ld, (void)scale, (void)row_loss;
    NO_CUDA(lt_cuda_xent_tp_finish);
}
lt_status lt_cuda_sum_rows(lt_cuda *c, const float *x, size_t n, double *host_sum, lt_error *err) {
    (void)c, (void)x, (void)n;
    if (host_sum) *host_sum = 0.0;
    NO_CUDA(lt_cuda_sum_rows);
}
lt_status lt_cuda_sum_squares(lt_cuda *c, const float *g, size_t n, double *host_sum, lt_error *err) {
    (void)c, (void)g, (void)n;
    if (host_sum) *host_sum = 0.0;
    NO_CUDA(lt_cuda_sum_squares);
}
lt_status lt_cuda_scale(lt_cuda *c, float *g, size_t n, float s, lt_error *err) {
    (void)c, (void)g, (void)n, (void)s;
    NO_CUDA(lt_cuda_scale);
}
lt_status lt_cuda_accumulate_f32(lt_cuda *c, float *dst, const float *src, size_t n, lt_error *err) {
    (void)c, (void)dst, (void)src, (void)n;
    NO_CUDA(lt_cuda_accumulate_f32);
}
lt_status lt_cuda_adamw(lt_cuda *c, float *master, lt_bf16 *bf16_copy, const float *grad, float *m, float *v,
                        size_t n, double lr, double beta1, double beta2, double eps, double decay, int64_t t,
                        lt_error *err) {
    (void)c, (void)master, (void)bf16_copy, (void)grad, (void)m, (void)v, (void)n, (void)lr, (void)beta1,
        (void)beta2, (void)eps, (void)decay, (void)t;
    NO_CUDA(lt_cuda_adamw);
}
lt_status lt_cuda_upload(lt_cuda *c, void *dst, const void *host_src, size_t bytes, lt_error *err) {
    (void)c, (void)dst, (void)host_src, (void)bytes;
    NO_CUDA(lt_cuda_upload);
}
lt_status lt_cuda_reserve_upload(lt_cuda *c, size_t bytes, lt_error *err) {
    (void)c, (void)bytes;
    NO_CUDA(lt_cuda_reserve_upload);
}
lt_status lt_cuda_sum_rows_into(lt_cuda *c, const float *x, size_t n, int slot, bool first, lt_error *err) {
    (void)c, (void)x, (void)n, (void)slot, (void)first;
    NO_CUDA(lt_cuda_sum_rows_into);
}
lt_status lt_cuda_sum_squares_into(lt_cuda *c, const float *g, size_t n, int slot, bool first, lt_error *err) {
    (void)c, (void)g, (void)n, (void)slot, (void)first;
    NO_CUDA(lt_cuda_sum_squares_into);
}
lt_status lt_cuda_read_sum(lt_cuda *c, int slot, double *host_sum, lt_error *err) {
    (void)c, (void)slot;
    if (host_sum) *host_sum = 0;
    NO_CUDA(lt_cuda_read_sum);
}
