/*
 * dev/cuda/attention_forward.cu — scratch benchmark of the attention forward (llm.c's
 * dev/cuda habit): numbered versions, each checked against the CPU reference on a varlen
 * case with KV context and GQA, then timed on a long slice beside a cuBLAS bf16 GEMM.
 *
 *   v1  naive: one warp per (query row, head); per visible key a warp-reduced dot product
 *       and a scalar online-softmax update; no reuse of K/V between rows.
 *   v2  tiled: one thread per query row, 64 rows per block, K/V tiles of 32 keys staged in
 *       shared memory (fp32) and reused by the block's rows; scalar FMAs, q and the output
 *       row in registers (at hd 128 they spill to local memory: a stepping stone).
 *   v3  kernels/attention.cu: FlashAttention-2 with mma.sync m16n8k16 tensor cores (the
 *       library's kernel, included from the source that ships).
 *
 * Usage: attention_forward [version 0..3] [n] [begin] [nh] [nkv] [hd]
 *   defaults: 0 8192 0 16 8 128 (version 0: all of them, in order; a ~1B Llama's
 *   attention over an 8K-token slice);
 *   begin > 0 puts `begin` rows of KV context before the slice.
 * Tolerances of the check: out within 2e-2 x max |ref|, lse within 1e-3 x max(1, |lse|).
 * Build: make -C dev/cuda attention_forward (nvcc, sm_90).
 */
#include "attention_common.cuh"

using namespace lt_attn;

/* ---------------------------------------------------------------- v1: naive */

__global__ void fwd_v1(uint16_t *out, float *lse, const uint16_t *q, const seg *segs, int n_segs, int total_rows,
                       int nh, int nkv, int hd, float scale) {
    int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (w >= total_rows * nh) return;
    int h = w % nh, r = w / nh;
    /* the segment holding the r-th segment row (segments' rows counted in order) */
    int s = 0, acc = 0;
    while (s < n_segs && acc + segs[s].n <= r) acc += segs[s].n, s++;
    const seg sg = segs[s];
    const int i = r - acc, pos = sg.begin + i, g = h / (nh / nkv);
    const size_t qd = (size_t)nh * hd, kvd = (size_t)nkv * hd, row = (size_t)sg.row0 + i;
    const uint16_t *qr = q + row * qd + (size_t)h * hd;
    float o[4] = {0, 0, 0, 0}; /* dims lane, lane+32, lane+64, lane+96 (hd <= 128) */
    float m = -INFINITY, l = 0;
    for (int j = 0; j <= pos; j++) {
        const uint16_t *kr = sg.k + (size_t)j * kvd + (size_t)g * hd, *vr = sg.v + (size_t)j * kvd + (size_t)g * hd;
        float d = 0;
        for (int c = lane; c < hd; c += 32) d += h_from_bf16_dev(qr[c]) * h_from_bf16_dev(kr[c]);
        for (int x = 16; x > 0; x >>= 1) d += __shfl_xor_sync(0xffffffffu, d, x);
        float sj = d * scale, mn = fmaxf(m, sj), al = expf(m - mn), p = expf(sj - mn);
        l = l * al + p, m = mn;
        for (int c = lane, k = 0; c < hd; c += 32, k++) o[k] = o[k] * al + p * h_from_bf16_dev(vr[c]);
    }
    for (int c = lane, k = 0; c < hd; c += 32, k++) out[row * qd + (size_t)h * hd + c] = h_to_bf16_dev(o[k] / l);
    if (lane == 0) lse[row * nh + h] = m + logf(l);
}

/* ---------------------------------------------------------------- v2: shared-memory tiles */

template <int HD>
__global__ void __launch_bounds__(64) fwd_v2(uint16_t *out, float *lse, const uint16_t *q, const seg *segs,
                                             int n_segs, int nh, int nkv, float scale) {
    constexpr int BR = 64, BC = 32;
    __shared__ float Ks[BC][HD + 1], Vs[BC][HD + 1];
    const int h = blockIdx.y, g = h / (nh / nkv);
    const seg sg = segs[find_seg(segs, n_segs, (int)blockIdx.x)];
    const int i0 = ((int)blockIdx.x - sg.qblk0) * BR, rows = min(BR, sg.n - i0);
    const int me = threadIdx.x, pos = sg.begin + i0 + me, kend = sg.begin + i0 + rows;
    const size_t qd = (size_t)nh * HD, kvd = (size_t)nkv * HD, row = (size_t)sg.row0 + i0 + me;
    float qv[HD], o[HD];
    for (int c = 0; c < HD; c++) {
        qv[c] = me < rows ? h_from_bf16_dev(q[row * qd + (size_t)h * HD + c]) * scale : 0.0f;
        o[c] = 0;
    }
    float m = -INFINITY, l = 0;
    for (int kb0 = 0; kb0 < kend; kb0 += BC) {
        __syncthreads();
        for (int e = threadIdx.x; e < BC * HD; e += blockDim.x) {
            int j = e / HD, c = e % HD;
            bool ok = kb0 + j < kend;
            Ks[j][c] = ok ? h_from_bf16_dev(sg.k[(size_t)(kb0 + j) * kvd + (size_t)g * HD + c]) : 0.0f;
            Vs[j][c] = ok ? h_from_bf16_dev(sg.v[(size_t)(kb0 + j) * kvd + (size_t)g * HD + c]) : 0.0f;
        }
        __syncthreads();
        if (me >= rows) continue;
        for (int j = 0; j < BC && kb0 + j <= pos; j++) {
            float d = 0;
            for (int c = 0; c < HD; c++) d += qv[c] * Ks[j][c];
            float mn = fmaxf(m, d), al = expf(m - mn), p = expf(d - mn);
            l = l * al + p, m = mn;
            for (int c = 0; c < HD; c++) o[c] = o[c] * al + p * Vs[j][c];
        }
    }
    if (me >= rows) return;
    for (int c = 0; c < HD; c++) out[row * qd + (size_t)h * HD + c] = h_to_bf16_dev(o[c] / l);
    lse[row * nh + h] = m + logf(l);
}

/* ---------------------------------------------------------------- driver */

struct prepared {
    plan p;
    seg *d_segs;
    group *d_groups;
    int rows; /* query rows over all segments */
};

static void prepare(const unit *u, prepared *pp) {
    int bad = -1;
    const char *why = plan_build(&pp->p, u->gsegs.data(), u->n_segs, u->T, u->nh, u->nkv, u->hd, false, &bad);
    if (why != NULL) {
        fprintf(stderr, "plan: %s (segment %d)\n", why, bad);
        exit(EXIT_FAILURE);
    }
    cudaCheck(cudaMalloc((void **)&pp->d_segs, (size_t)pp->p.n_segs * sizeof(seg) + 16));
    cudaCheck(cudaMalloc((void **)&pp->d_groups, (size_t)pp->p.n_groups * sizeof(group) + 16));
    cudaCheck(cudaMemcpy(pp->d_segs, pp->p.segs, (size_t)pp->p.n_segs * sizeof(seg), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(pp->d_groups, pp->p.groups, (size_t)pp->p.n_groups * sizeof(group), cudaMemcpyHostToDevice));
    pp->rows = 0;
    for (int s = 0; s < pp->p.n_segs; s++) pp->rows += pp->p.segs[s].n;
}

static void release(prepared *pp) {
    cudaFree(pp->d_segs), cudaFree(pp->d_groups);
    plan_free(&pp->p);
}

static void run_version(int version, const unit *u, const prepared *pp) {
    const float scale = 1.0f / sqrtf((float)u->hd);
    switch (version) {
    case 1: {
        size_t warps = (size_t)pp->rows * u->nh;
        fwd_v1<<<(unsigned)((warps * 32 + 255) / 256), 256>>>(u->d_out, u->d_lse, u->d_q, pp->d_segs, pp->p.n_segs,
                                                             pp->rows, u->nh, u->nkv, u->hd, scale);
        break;
    }
    case 2:
        if (u->hd == 64)
            fwd_v2<64><<<dim3((unsigned)pp->p.q_blocks, (unsigned)u->nh), 64>>>(u->d_out, u->d_lse, u->d_q, pp->d_segs,
                                                                                pp->p.n_segs, u->nh, u->nkv, scale);
        else
            fwd_v2<128><<<dim3((unsigned)pp->p.q_blocks, (unsigned)u->nh), 64>>>(
                u->d_out, u->d_lse, u->d_q, pp->d_segs, pp->p.n_segs, u->nh, u->nkv, scale);
        break;
    case 3:
        cudaCheck(u->hd == 64 ? launch_forward<64>(0, u->d_out, u->d_lse, u->d_q, pp->d_segs, pp->p.n_segs,
                                                   pp->p.q_blocks, u->nh, u->nkv, u->hd)
                              : launch_forward<128>(0, u->d_out, u->d_lse, u->d_q, pp->d_segs, pp->p.n_segs,
                                                    pp->p.q_blocks, u->nh, u->nkv, u->hd));
        break;
    default: fprintf(stderr, "unknown version %d (1..3)\n", version); exit(EXIT_FAILURE);
    }
    cudaCheck(cudaGetLastError());
}

/* Every version against the CPU reference on the check case; returns false on a miss. */
static bool check_all(int hd) {
    unit u;
    check_unit(&u, hd);
    prepared pp;
    prepare(&u, &pp);
    std::vector<double> out, lse, dq;
    std::vector<std::vector<double>> dk, dv;
    cpu_reference(&u, out, lse, false, dq, dk, dv);
    std::vector<char> use = segment_rows(&u);
    bool ok = true;
    for (int v = 1; v <= 3; v++) {
        cudaCheck(cudaMemset(u.d_out, 0, (size_t)u.T * u.nh * hd * 2));
        run_version(v, &u, &pp);
        cudaCheck(cudaDeviceSynchronize());
        double e_out = rel_err_rows(u.d_out, out, (size_t)u.nh * hd, use);
        std::vector<float> gl((size_t)u.T * u.nh);
        cudaCheck(cudaMemcpy(gl.data(), u.d_lse, gl.size() * sizeof(float), cudaMemcpyDeviceToHost));
        double e_lse = 0;
        for (size_t t = 0; t < use.size(); t++)
            for (int h = 0; use[t] && h < u.nh; h++)
                e_lse = fmax(e_lse, fabs(gl[t * u.nh + h] - lse[t * u.nh + h]) / fmax(1.0, fabs(lse[t * u.nh + h])));
        bool pass = e_out <= 2e-2 && e_lse <= 1e-3;
        printf("check hd %d v%d: out err %.2e (tol 2e-2), lse err %.2e (tol 1e-3) %s\n", hd, v, e_out, e_lse,
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
    if (version < 0 || version > 3 || n <= 0 || begin < 0 || nh <= 0 || nkv <= 0 || nh % nkv || (hd != 64 && hd != 128)) {
        fprintf(stderr, "usage: attention_forward [version 0..3 (0: all)] [n] [begin] [nh] [nkv] [hd 64|128]\n");
        return 2;
    }
    print_device();
    bool ok = check_all(64) & check_all(128);

    unit u;
    bench_unit(&u, n, begin, nh, nkv, hd);
    prepared pp;
    prepare(&u, &pp);
    /* the GEMM of a comparable size: the unit's MLP up-projection (T x 4C x C, C = nh*hd) */
    int C = nh * hd;
    double g = gemm_tflops(n, 4 * C, C);
    printf("cuBLAS bf16 GEMM %dx%dx%d: %.1f TFLOP/s\n", n, 4 * C, C, g);
    for (int v = version == 0 ? 1 : version; v <= (version == 0 ? 3 : version); v++) {
        float ms = time_ms([&] { run_version(v, &u, &pp); }, 1, v == 1 ? 2 : 10);
        double tf = fwd_flops(&u) / (ms * 1e-3) / 1e12;
        printf("forward v%d: n %d begin %d nh %d nkv %d hd %d: %.3f ms, %.1f TFLOP/s (causal FLOPs %.3e); "
               "attention/GEMM %.0f %%\n",
               v, n, begin, nh, nkv, hd, ms, tf, fwd_flops(&u), 100.0 * tf / g);
    }
    release(&pp);
    unit_free(&u);
    return ok ? 0 : 1;
}
