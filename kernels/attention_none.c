/*
 * kernels/attention_none.c — kernels/cuda.h's attention functions in a build without
 * CUDA (kernels/attention.cu is not compiled there): they fail with the reason, like the
 * rest of kernels/cuda_none.c. No context can be opened in such a build, so a caller
 * never gets this far; the functions exist so that the C side links the same either way.
 */
#include "kernels/cuda.h"

lt_status lt_cuda_attention_forward(lt_cuda *c, lt_bf16 *out, float *lse, const lt_bf16 *q,
                                    const lt_cuda_attn_segment *segs, int n_segs, int T, int nh, int nkv, int hd,
                                    lt_error *err) {
    (void)c, (void)out, (void)lse, (void)q, (void)segs, (void)n_segs, (void)T, (void)nh, (void)nkv, (void)hd;
    return lt_fail(err, LT_ERR_CONFIG, "lt_cuda_attention_forward", "built without CUDA");
}

lt_status lt_cuda_attention_backward(lt_cuda *c, lt_bf16 *dq, const lt_bf16 *dout, const lt_bf16 *out,
                                     const float *lse, const lt_bf16 *q, const lt_cuda_attn_segment *segs, int n_segs,
                                     int T, int nh, int nkv, int hd, lt_error *err) {
    (void)c, (void)dq, (void)dout, (void)out, (void)lse, (void)q, (void)segs, (void)n_segs, (void)T, (void)nh,
        (void)nkv, (void)hd;
    return lt_fail(err, LT_ERR_CONFIG, "lt_cuda_attention_backward", "built without CUDA");
}
