/*
 * dev/cuda/attention_emulated.cpp — kernels/attention.cu's device code run on the CPU
 * (g++, dev/cuda/emu/: one std::thread per CUDA thread, __syncthreads and the warp
 * collectives as barriers, mma.sync m16n8k16 emulated from the PTX ISA's fragment
 * layouts), checked against the CPU reference train/cpu/attention.c. It exercises the
 * kernels' index math, masks, segment/group lookup, fragment layouts and barrier
 * placement where no GPU is present; it says nothing about speed, and nothing about
 * hardware behaviour the emulation does not model (shared-memory bank conflicts, the
 * real mma's summation order, launch limits).
 *
 * Build: make -C dev/cuda attention_emulated (needs OpenBLAS); run: ./attention_emulated
 * [case ...] with case in {hd64, hd128, tiny, hd16, hd32, hd96, mid, long}; default: all
 * but mid and long (mid
 * and long take many minutes: every CUDA thread is an OS thread). Exit 1 on a mismatch.
 * Tolerances: those of tests/kernels/test_cuda_attention.c (out 2e-2 and gradients 3e-2
 * of the largest reference value, lse 1e-3), and untouched bytes bit for bit.
 */
#define LT_ATTENTION_KERNELS_ONLY
#define LT_ATTENTION_EMULATE
#include "kernels/attention.cu"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

extern "C" {
#include "train/cpu/kernels.h" /* lt_attention_forward / _backward: the reference */
}

namespace lt_attn {
alignas(16) uint16_t smem[1 << 16]; /* the kernels' dynamic shared memory (128 KiB) */
}

using namespace lt_attn;

static uint16_t to_bf16(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
static float from_bf16(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

struct seg_spec {
    int sample, row0, n, begin;
};
struct attn_case {
    const char *name;
    int hd, nh, nkv, T;
    double qscale;
    int n_samples, len[4];
    int n_segs;
    seg_spec segs[6];
};

/* The cases of tests/kernels/test_cuda_attention.c, plus a tiny one. */
static const attn_case CASES[] = {
    {"hd64", 64, 4, 2, 243, 1.0, 3, {120, 235, 8}, 4, {{0, 0, 70, 0}, {1, 71, 130, 100}, {0, 201, 40, 70}, {2, 241, 0, 5}}},
    {"hd128", 128, 2, 1, 143, 3.0, 2, {300, 1}, 3, {{0, 0, 90, 200}, {1, 90, 1, 0}, {0, 91, 50, 150}}},
    {"long", 64, 8, 2, 733, 2.0, 2, {1400, 333}, 2, {{0, 0, 400, 1000}, {1, 400, 333, 0}}},
    {"tiny", 64, 2, 2, 5, 1.0, 1, {5}, 2, {{0, 0, 3, 0}, {0, 3, 2, 3}}},
    /* the test models' head dims: nano's 16 (padded to 32) and small's 32; hd 96 (padded
     * to 128) */
    {"hd16", 16, 4, 2, 150, 2.0, 2, {120, 60}, 3, {{0, 0, 70, 0}, {1, 70, 30, 30}, {0, 100, 50, 70}}},
    {"hd32", 32, 8, 4, 100, 2.0, 1, {170}, 1, {{0, 0, 100, 70}}},
    {"hd96", 96, 2, 1, 90, 1.0, 1, {150}, 1, {{0, 0, 90, 60}}},
    /* hd 128 over many key tiles (700 rows of context) with GQA 4:2 and two samples */
    {"mid", 128, 4, 2, 330, 2.0, 2, {900, 130}, 2, {{0, 0, 200, 700}, {1, 200, 130, 0}}},
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand() { /* splitmix64 -> [0, 1) */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}
static void rand_bf16(std::vector<float> &f, std::vector<uint16_t> &b, size_t n, double lo, double hi) {
    f.resize(n), b.resize(n);
    for (size_t i = 0; i < n; i++) b[i] = to_bf16((float)(lo + (hi - lo) * urand())), f[i] = from_bf16(b[i]);
}

/* max |gpu - ref| / max |ref - base| over rows with use[t]; other rows must keep base_bits. */
static double err_of(const std::vector<uint16_t> &gpu, const std::vector<float> &ref, const std::vector<float> *base,
                     const std::vector<uint16_t> &base_bits, const std::vector<char> &use, size_t w, size_t *touched) {
    double worst = 0, scale = 1e-30;
    for (size_t t = 0; t < use.size(); t++)
        for (size_t i = t * w; i < (t + 1) * w; i++) {
            if (!use[t]) {
                if (gpu[i] != base_bits[i]) ++*touched;
                continue;
            }
            double b = base ? (*base)[i] : 0.0;
            scale = fmax(scale, fabs(ref[i] - b));
            worst = fmax(worst, fabs((double)from_bf16(gpu[i]) - ref[i]));
        }
    return worst / scale;
}

template <int HD>
static bool run(const attn_case &tc) {
    const int hd = tc.hd; /* <= HD: the kernels pad it */
    const int T = tc.T, nh = tc.nh, nkv = tc.nkv, S = tc.n_samples;
    const size_t qd = (size_t)nh * hd, kvd = (size_t)nkv * hd, nq = (size_t)T * qd;
    std::vector<float> q, dout, dq0;
    std::vector<uint16_t> hq, hdout, hdq0;
    rand_bf16(q, hq, nq, -tc.qscale, tc.qscale);
    rand_bf16(dout, hdout, nq, -1, 1);
    rand_bf16(dq0, hdq0, nq, -0.05, 0.05);
    std::vector<float> k[4], v[4], dk0[4], dv0[4], dk[4], dv[4];
    std::vector<uint16_t> hk[4], hv[4], hdk0[4], hdv0[4], gdk[4], gdv[4];
    for (int s = 0; s < S; s++) {
        size_t n = (size_t)tc.len[s] * kvd;
        rand_bf16(k[s], hk[s], n, -1, 1), rand_bf16(v[s], hv[s], n, -1, 1);
        rand_bf16(dk0[s], hdk0[s], n, -0.05, 0.05), rand_bf16(dv0[s], hdv0[s], n, -0.05, 0.05);
        dk[s] = dk0[s], dv[s] = dv0[s], gdk[s] = hdk0[s], gdv[s] = hdv0[s];
    }
    lt_attn_segment cs[6];
    lt_cuda_attn_segment gs[6];
    for (int e = 0; e < tc.n_segs; e++) {
        const seg_spec &p = tc.segs[e];
        cs[e] = lt_attn_segment{p.row0, p.n, p.begin, k[p.sample].data(), v[p.sample].data(), dk[p.sample].data(),
                                dv[p.sample].data()};
        gs[e] = lt_cuda_attn_segment{p.row0, p.n, p.begin, hk[p.sample].data(), hv[p.sample].data(),
                                     gdk[p.sample].data(), gdv[p.sample].data()};
    }
    std::vector<float> out(nq), lse((size_t)T * nh), dq = dq0;
    lt_attention_forward(out.data(), lse.data(), q.data(), cs, tc.n_segs, nh, nkv, hd, NULL);
    lt_attention_backward(dq.data(), dout.data(), out.data(), lse.data(), q.data(), cs, tc.n_segs, nh, nkv, hd, NULL);

    plan p;
    int bad = -1;
    const char *why = plan_build(&p, gs, tc.n_segs, T, nh, nkv, hd, true, &bad);
    if (why != NULL) {
        fprintf(stderr, "%s: plan: %s (segment %d)\n", tc.name, why, bad);
        return false;
    }
    const float scale = 1.0f / sqrtf((float)hd);
    std::vector<uint16_t> gout(nq, to_bf16(7.0f)), gout0 = gout, gdq = hdq0;
    std::vector<float> glse((size_t)T * nh, -1.0f), D((size_t)T * nh);
    constexpr int FBK = tiles<HD>::FWD_BK, QBK = tiles<HD>::DQ_BK, BQ = tiles<HD>::DKDV_BQ;
    lt_emu::launch(dim3((unsigned)p.q_blocks, (unsigned)nh), THREADS, [&] {
        fwd_kernel<HD, FBK>(gout.data(), glse.data(), hq.data(), p.segs, p.n_segs, nh, nkv, hd, scale * LOG2E);
    });
    size_t rows_heads = (size_t)T * nh;
    lt_emu::launch(dim3((unsigned)((rows_heads + WARPS - 1) / WARPS)), THREADS,
                   [&] { dot_kernel<HD>(D.data(), hdout.data(), gout.data(), rows_heads, hd); });
    lt_emu::launch(dim3((unsigned)p.q_blocks, (unsigned)nh), THREADS, [&] {
        dq_kernel<HD, QBK>(gdq.data(), hdout.data(), glse.data(), D.data(), hq.data(), p.segs, p.n_segs, nh, nkv,
                           hd, scale, scale * LOG2E);
    });
    lt_emu::launch(dim3((unsigned)p.k_blocks, (unsigned)nkv), THREADS, [&] {
        dkdv_kernel<HD, BQ>(hdout.data(), glse.data(), D.data(), hq.data(), p.segs, p.groups, p.n_groups, nh, nkv,
                            hd, scale, scale * LOG2E);
    });
    plan_free(&p);

    std::vector<char> in((size_t)T, 0);
    for (int e = 0; e < tc.n_segs; e++)
        for (int i = 0; i < tc.segs[e].n; i++) in[(size_t)tc.segs[e].row0 + i] = 1;
    size_t touched = 0;
    double e_out = err_of(gout, out, nullptr, gout0, in, qd, &touched), e_lse = 0;
    for (int t = 0; t < T; t++)
        for (int h = 0; in[t] && h < nh; h++) {
            size_t i = (size_t)t * nh + h;
            e_lse = fmax(e_lse, fabs(glse[i] - lse[i]) / fmax(1.0, fabs(lse[i])));
        }
    double e_dq = err_of(gdq, dq, &dq0, hdq0, in, qd, &touched);
    bool ok = e_out <= 2e-2 && e_lse <= 1e-3 && e_dq <= 3e-2;
    printf("%-6s hd %3d (HD %3d) nh %d nkv %d T %4d: out %.2e lse %.2e dq %.2e", tc.name, hd, HD, nh, nkv, T, e_out,
           e_lse, e_dq);
    for (int s = 0; s < S; s++) {
        int used = 0;
        for (int e = 0; e < tc.n_segs; e++)
            if (tc.segs[e].sample == s && tc.segs[e].n > 0) used = std::max(used, tc.segs[e].begin + tc.segs[e].n);
        std::vector<char> use((size_t)tc.len[s], 0);
        std::fill(use.begin(), use.begin() + used, 1);
        double e_dk = err_of(gdk[s], dk[s], &dk0[s], hdk0[s], use, kvd, &touched);
        double e_dv = err_of(gdv[s], dv[s], &dv0[s], hdv0[s], use, kvd, &touched);
        if (used == 0) e_dk = e_dv = 0; /* nothing to compare, only untouched bytes */
        printf(" | s%d dk %.2e dv %.2e", s, e_dk, e_dv);
        ok = ok && e_dk <= 3e-2 && e_dv <= 3e-2;
    }
    printf(" | untouched-bytes changed %zu -> %s\n", touched, ok && touched == 0 ? "ok" : "MISMATCH");
    return ok && touched == 0;
}

int main(int argc, char **argv) {
    bool all_ok = true;
    for (const attn_case &tc : CASES) {
        bool wanted = argc < 2 && strcmp(tc.name, "long") != 0 && strcmp(tc.name, "mid") != 0;
        for (int i = 1; i < argc; i++) wanted = wanted || std::string(argv[i]) == tc.name;
        if (!wanted) continue;
        const int HD = padded_hd(tc.hd);
        all_ok = (HD == 32 ? run<32>(tc) : HD == 64 ? run<64>(tc) : run<128>(tc)) && all_ok;
        fflush(stdout);
    }
    return all_ok ? 0 : 1;
}
