/*
 * dev/cuda/attention_backward.cu — scratch benchmark of the attention backward:
 * numbered versions, each checked against the CPU reference (double, the math of
 * train/cpu/attention.c) on a varlen case with KV context, GQA and two segments of one
 * sample (aliasing dk/dv), then timed on a long slice beside a cuBLAS bf16 GEMM.
 *
 *   v1  naive: dQ with one warp per (query row, head) looping over its visible keys; dK/dV
 *       with one warp per (key row of a sample, kv head) looping over every query (and
 *       query head of its group) that sees the key; warp-reduced dot products, D
 *       recomputed per pair. One writer per output element, no atomics.
 *   v3  kernels/attention.cu: D = rowsum(dO * O), then the dQ pass and the dK/dV pass,
 *       FlashAttention-2 Alg. 2 with mma.sync m16n8k16 tensor cores (the library's code).
 *   (There is no v2 for the backward: the tiled scalar stepping stone was written for the
 *   forward only.)
 *
 * Usage: attention_backward [version 0|1|3] [n] [begin] [nh] [nkv] [hd]
 *   defaults: 0 8192 0 16 8 128 (version 0: both, in order). The inputs of the backward (out, lse) come from the
 *   library's forward (checked by attention_forward).
 * FLOPs: 2.5 x the causal forward's (dev/cuda/attention_common.cuh); the dQ pass's
 * recomputation is not counted. Tolerance of the check: dq, dk, dv within 3e-2 x their
 * largest reference value.
 * Build: make -C dev/cuda attention_backward (nvcc, sm_90).
 */
#include "attention_common.cuh"

using namespace lt_attn;

/* ---------------------------------------------------------------- v1: naive */

__device__ __forceinline__ float warp_dot(const uint16_t *a, const uint16_t *b, int hd, int lane) {
    float d = 0;
    for (int c = lane; c < hd; c += 32) d += h_from_bf16_dev(a[c]) * h_from_bf16_dev(b[c]);
    for (int x = 16; x > 0; x >>= 1) d += __shfl_xor_sync(0xffffffffu, d, x);
    return d;
}

__global__ void dq_v1(uint16_t *dq, const uint16_t *dout, const uint16_t *out, const float *lse, const uint16_t *q,
                      const seg *segs, int n_segs, int total_rows, int nh, int nkv, int hd, float scale) {
    int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (w >= total_rows * nh) return;
    int h = w % nh, r = w / nh, s = 0, acc = 0;
    while (s < n_segs && acc + segs[s].n <= r) acc += segs[s].n, s++;
    const seg sg = segs[s];
    const int i = r - acc, pos = sg.begin + i, g = h / (nh / nkv);
    const size_t qd = (size_t)nh * hd, kvd = (size_t)nkv * hd, off = ((size_t)sg.row0 + i) * qd + (size_t)h * hd;
    const float L = lse[((size_t)sg.row0 + i) * nh + h], D = warp_dot(dout + off, out + off, hd, lane);
    float acc_dq[4] = {0, 0, 0, 0};
    for (int j = 0; j <= pos; j++) {
        const uint16_t *kr = sg.k + (size_t)j * kvd + (size_t)g * hd, *vr = sg.v + (size_t)j * kvd + (size_t)g * hd;
        float p = expf(warp_dot(q + off, kr, hd, lane) * scale - L);
        float ds = p * (warp_dot(dout + off, vr, hd, lane) - D);
        for (int c = lane, k = 0; c < hd; c += 32, k++) acc_dq[k] += scale * ds * h_from_bf16_dev(kr[c]);
    }
    for (int c = lane, k = 0; c < hd; c += 32, k++)
        dq[off + c] = h_to_bf16_dev(h_from_bf16_dev(dq[off + c]) + acc_dq[k]);
}

__global__ void dkdv_v1(const uint16_t *dout, const uint16_t *out, const float *lse, const uint16_t *q,
                        const seg *segs, const group *groups, int n_groups, int total_keys, int nh, int nkv, int hd,
                        float scale) {
    int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (w >= total_keys * nkv) return;
    const int g = w % nkv, x = w / nkv, blk = x / ROWS;
    const group gr = groups[find_group(groups, n_groups, blk)];
    const int key = (blk - gr.kblk0) * ROWS + x % ROWS;
    if (key >= gr.kv_len) return;
    const size_t qd = (size_t)nh * hd, kvd = (size_t)nkv * hd, ko = (size_t)key * kvd + (size_t)g * hd;
    float adk[4] = {0, 0, 0, 0}, adv[4] = {0, 0, 0, 0};
    for (int si = gr.seg0; si < gr.seg0 + gr.nseg; si++) {
        const seg sg = segs[si];
        for (int i = max(0, key - sg.begin); i < sg.n; i++) {
            const size_t row = (size_t)sg.row0 + i;
            for (int h = g * (nh / nkv); h < (g + 1) * (nh / nkv); h++) {
                const size_t off = row * qd + (size_t)h * hd;
                float p = expf(warp_dot(q + off, sg.k + ko, hd, lane) * scale - lse[row * nh + h]);
                float ds = p * (warp_dot(dout + off, sg.v + ko, hd, lane) - warp_dot(dout + off, out + off, hd, lane));
                for (int c = lane, k = 0; c < hd; c += 32, k++) {
                    adk[k] += scale * ds * h_from_bf16_dev(q[off + c]);
                    adv[k] += p * h_from_bf16_dev(dout[off + c]);
                }
            }
        }
    }
    uint16_t *dk = segs[gr.seg0].dk, *dv = segs[gr.seg0].dv;
    for (int c = lane, k = 0; c < hd; c += 32, k++) {
        dk[ko + c] = h_to_bf16_dev(h_from_bf16_dev(dk[ko + c]) + adk[k]);
        dv[ko + c] = h_to_bf16_dev(h_from_bf16_dev(dv[ko + c]) + adv[k]);
    }
}

/* ---------------------------------------------------------------- driver */

struct prepared {
    plan p;
    seg *d_segs;
    group *d_groups;
    float *d_D;
    int rows;
};

static void prepare(const unit *u, prepared *pp) {
    int bad = -1;
    const char *why = plan_build(&pp->p, u->gsegs.data(), u->n_segs, u->T, u->nh, u->nkv, u->hd, true, &bad);
    if (why != NULL) {
        fprintf(stderr, "plan: %s (segment %d)\n", why, bad);
        exit(EXIT_FAILURE);
    }
    cudaCheck(cudaMalloc((void **)&pp->d_segs, (size_t)pp->p.n_segs * sizeof(seg) + 16));
    cudaCheck(cudaMalloc((void **)&pp->d_groups, (size_t)pp->p.n_groups * sizeof(group) + 16));
    cudaCheck(cudaMalloc((void **)&pp->d_D, (size_t)u->T * u->nh * sizeof(float) + 16));
    cudaCheck(cudaMemcpy(pp->d_segs, pp->p.segs, (size_t)pp->p.n_segs * sizeof(seg), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(pp->d_groups, pp->p.groups, (size_t)pp->p.n_groups * sizeof(group), cudaMemcpyHostToDevice));
    pp->rows = 0;
    for (int s = 0; s < pp->p.n_segs; s++) pp->rows += pp->p.segs[s].n;
}

static void release(prepared *pp) {
    cudaFree(pp->d_segs), cudaFree(pp->d_groups), cudaFree(pp->d_D);
    plan_free(&pp->p);
}

/* out and lse from the library's forward */
static void forward(const unit *u, const prepared *pp) {
    cudaCheck(u->hd == 64 ? launch_forward<64>(0, u->d_out, u->d_lse, u->d_q, pp->d_segs, pp->p.n_segs,
                                               pp->p.q_blocks, u->nh, u->nkv, u->hd)
                          : launch_forward<128>(0, u->d_out, u->d_lse, u->d_q, pp->d_segs, pp->p.n_segs,
                                                pp->p.q_blocks, u->nh, u->nkv, u->hd));
}

static void run_version(int version, const unit *u, const prepared *pp) {
    const float scale = 1.0f / sqrtf((float)u->hd);
    if (version == 1) {
        size_t warps = (size_t)pp->rows * u->nh;
        dq_v1<<<(unsigned)((warps * 32 + 255) / 256), 256>>>(u->d_dq, u->d_dout, u->d_out, u->d_lse, u->d_q,
                                                            pp->d_segs, pp->p.n_segs, pp->rows, u->nh, u->nkv, u->hd,
                                                            scale);
        cudaCheck(cudaGetLastError());
        size_t kwarps = (size_t)pp->p.k_blocks * ROWS * u->nkv;
        dkdv_v1<<<(unsigned)((kwarps * 32 + 255) / 256), 256>>>(u->d_dout, u->d_out, u->d_lse, u->d_q, pp->d_segs,
                                                                pp->d_groups, pp->p.n_groups, pp->p.k_blocks * ROWS,
                                                                u->nh, u->nkv, u->hd, scale);
    } else if (version == 3) {
        cudaCheck(u->hd == 64 ? launch_backward<64>(0, u->d_dq, u->d_dout, u->d_out, u->d_lse, u->d_q, pp->d_D,
                                                    (size_t)u->T, pp->d_segs, pp->p.n_segs, pp->p.q_blocks,
                                                    pp->d_groups, pp->p.n_groups, pp->p.k_blocks, u->nh, u->nkv, u->hd)
                              : launch_backward<128>(0, u->d_dq, u->d_dout, u->d_out, u->d_lse, u->d_q, pp->d_D,
                                                     (size_t)u->T, pp->d_segs, pp->p.n_segs, pp->p.q_blocks,
                                                     pp->d_groups, pp->p.n_groups, pp->p.k_blocks, u->nh, u->nkv, u->hd));
    } else {
        fprintf(stderr, "unknown version %d (1 or 3)\n", version);
        exit(EXIT_FAILURE);
    }
    cudaCheck(cudaGetLastError());
}

static bool check_all(int hd) {
    unit u;
    check_unit(&u, hd);
    prepared pp;
    prepare(&u, &pp);
    std::vector<double> out, lse, dq;
    std::vector<std::vector<double>> dk, dv;
    cpu_reference(&u, out, lse, true, dq, dk, dv);
    std::vector<char> use = segment_rows(&u);
    const size_t kvd = (size_t)u.nkv * hd;
    bool ok = true;
    for (int v : {1, 3}) {
        unit_zero_grads(&u);
        forward(&u, &pp);
        run_version(v, &u, &pp);
        cudaCheck(cudaDeviceSynchronize());
        double e_dq = rel_err_rows(u.d_dq, dq, (size_t)u.nh * hd, use), e_kv = 0;
        for (int s = 0; s < u.n_samples; s++) {
            std::vector<char> all((size_t)u.len[s], 1);
            e_kv = fmax(e_kv, rel_err_rows(u.d_dk[s], dk[s], kvd, all));
            e_kv = fmax(e_kv, rel_err_rows(u.d_dv[s], dv[s], kvd, all));
        }
        bool pass = e_dq <= 3e-2 && e_kv <= 3e-2;
        printf("check hd %d v%d: dq err %.2e, dk/dv err %.2e (tol 3e-2) %s\n", hd, v, e_dq, e_kv,
               pass ? "ok" : "MISMATCH");
        ok = ok && pass;
    }
    release(&pp);
    unit_free(&u);
    return ok;
}

int main(int argc, char **argv) {
    int version = argc > 1 ? atoi(argv[1]) : 0, n = argc > 2 ? atoi(argv[2]) : 8192;
    int begin = argc > 3 ? atoi(argv[3]) : 0, nh = argc > 4 ? atoi(argv[4]) : 16;
    int nkv = argc > 5 ? atoi(argv[5]) : 8, hd = argc > 6 ? atoi(argv[6]) : 128;
    if ((version != 0 && version != 1 && version != 3) || n <= 0 || begin < 0 || nh <= 0 || nkv <= 0 || nh % nkv ||
        (hd != 64 && hd != 128)) {
        fprintf(stderr, "usage: attention_backward [version 0|1|3 (0: both)] [n] [begin] [nh] [nkv] [hd 64|128]\n");
        return 2;
    }
    print_device();
    bool ok = check_all(64) & check_all(128);

    unit u;
    bench_unit(&u, n, begin, nh, nkv, hd);
    prepared pp;
    prepare(&u, &pp);
    unit_zero_grads(&u);
    forward(&u, &pp);
    float fms = time_ms([&] { forward(&u, &pp); }, 1, 10);
    double ff = fwd_flops(&u), tf_f = ff / (fms * 1e-3) / 1e12;
    int C = nh * hd;
    double g = gemm_tflops(n, 4 * C, C);
    printf("cuBLAS bf16 GEMM %dx%dx%d: %.1f TFLOP/s; forward (v3) %.3f ms, %.1f TFLOP/s\n", n, 4 * C, C, g, fms,
           tf_f);
    for (int v : {1, 3}) {
        if (version != 0 && v != version) continue;
        float ms = time_ms([&] { run_version(v, &u, &pp); }, v == 1 ? 0 : 1, v == 1 ? 1 : 10);
        double tf_b = 2.5 * ff / (ms * 1e-3) / 1e12, tf_fb = 3.5 * ff / ((fms + ms) * 1e-3) / 1e12;
        printf("backward v%d: n %d begin %d nh %d nkv %d hd %d: %.3f ms, %.1f TFLOP/s; forward (v3) + backward "
               "%.1f TFLOP/s; fwd+bwd/GEMM %.0f %%\n",
               v, n, begin, nh, nkv, hd, ms, tf_b, tf_fb, 100.0 * tf_fb / g);
    }
    release(&pp);
    unit_free(&u);
    return ok ? 0 : 1;
}
