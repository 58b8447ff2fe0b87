#!/usr/bin/env python3
"""bench/trainer/bench_torch.py — the PyTorch peer of bench_trainer.c: forward + loss +
backward of the same Llama model, eager fp32 on the CPU, same threads, same unit.

    bench_torch.py [--impl hf|hand] [--model small] [--tokens 4096] [--samples 1]
                   [--threads 2] [--reps 5] [--warmup 1] [--seed 1] [--no-profile]

--impl hf (default): transformers' LlamaForCausalLM built from a LlamaConfig of the preset's
dimensions (rope_theta 10000, rms_norm_eps 1e-5, untied, no biases, initializer_range 0.02)
with attn_implementation="sdpa", the strongest eager CPU path: SDPA's CPU flash-attention
kernel (blocked, vectorized, skips the masked upper triangle with is_causal) and GQA
through enable_gqa. --impl hand: the model of tests/train/torch_parity.py written out by
hand (embedding, RMSNorm, rotate_half RoPE, SwiGLU, lm_head as plain tensor ops), its
attention through F.scaled_dot_product_attention too (torch_parity.py's explicit [nh, T, T]
score matrix would keep ~1.5 GB per layer for the backward at 4096 tokens): it shows what
the transformers wrapper costs or saves.

The unit, as in bench_trainer.c: --samples whole samples of as-even-as-possible lengths
packed into one row of --tokens tokens (uniform random ids), positions restarting at 0 in
each sample, the loss predicting sum (L_i - 1) tokens (labels -100 where a sample starts,
so no token predicts the next sample's first), mean cross-entropy (= ours: sum x 1/N).
Attention masking: with one sample, is_causal=True (the flash kernel). With K > 1 samples
SDPA has no block-diagonal causal mode, so a [1, 1, T, T] boolean block-diagonal causal
mask is passed instead; the kernel then computes every block of the T x T scores (no
causal skipping): torch does up to ~2x the attention work of K = 1, a handicap to
mention beside any K > 1 figure.

A step: zero_grad(set_to_none=True), forward, loss, backward; --warmup untimed steps, then
--reps timed ones (time.perf_counter). torch.set_num_threads(--threads) (OpenMP + MKL).

GEMM share: after the timed steps, one more step under torch.profiler (CPU): the summed
self time of the matrix-product ops (aten::mm, addmm, bmm, baddbmm, mv, addmv: every
projection, the MLP and the LM head, forward and backward) over that step's wall time.
The profiler adds some overhead to every op, so the share is approximate (ours is timed
on the timed steps themselves by train/cpu/kernels.h's lt_linear_timing hook).

Output: the lines of bench_trainer.c with bench=torch (plus impl=hf|hand), MB = 2^20 bytes
from resource.getrusage ru_maxrss of this process (libraries and Python included;
rss_before_mb: after the model is built, before the first step).
"""
import argparse
import math
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

# lib/model.c presets this script knows (name: layers, hidden, heads, kv_heads, ffn, vocab)
PRESETS = {
    "small": (8, 256, 8, 4, 704, 32000),
    "nano": (2, 64, 4, 2, 192, 100277),
    "tiny": (4, 256, 4, 4, 1024, 100277),
}
ROPE_THETA, NORM_EPS = 10000.0, 1e-5
MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::mv", "aten::addmv"}


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def forward_flops(dims, T):
    """lib/model.h lt_model_forward_flops: linear terms + causal attention + LM head."""
    layers, C, nh, nkv, F_, V = dims
    kvd = C // nh * nkv
    linear = 2 * T * (C * (C + 2 * kvd) + C * C + 3 * C * F_)
    attn = 2 * C * T * T
    return layers * (linear + attn) + 2 * T * C * V


# ------------------------------------------------------------------ --impl hf
def build_hf(dims, T):
    from transformers import LlamaConfig, LlamaForCausalLM

    layers, C, nh, nkv, F_, V = dims
    cfg = LlamaConfig(vocab_size=V, hidden_size=C, intermediate_size=F_, num_hidden_layers=layers,
                      num_attention_heads=nh, num_key_value_heads=nkv, max_position_embeddings=max(T, 2048),
                      rope_theta=ROPE_THETA, rms_norm_eps=NORM_EPS, tie_word_embeddings=False,
                      attention_bias=False, mlp_bias=False, initializer_range=0.02,
                      attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).float()
    assert model.config._attn_implementation == "sdpa", model.config._attn_implementation

    def step(ids, pos, labels, mask):
        out = model(input_ids=ids, position_ids=pos, attention_mask=mask, labels=labels, use_cache=False)
        out.loss.backward()
        return out.loss.item()

    return model, step


# ------------------------------------------------------------------ --impl hand
class HandLlama(torch.nn.Module):
    """tests/train/torch_parity.py's forward_tokens as a module, batch of one packed row."""

    def __init__(self, dims):
        super().__init__()
        layers, C, nh, nkv, F_, V = dims
        self.dims = dims
        self.hd = C // nh
        P = torch.nn.ParameterDict()

        def mat(rows, cols):
            return torch.nn.Parameter(torch.randn(rows, cols) * 0.02)

        P["embed"] = mat(V, C)
        for l in range(layers):
            P[f"{l}_attn_norm"] = torch.nn.Parameter(torch.ones(C))
            P[f"{l}_wq"] = mat(nh * self.hd, C)
            P[f"{l}_wk"] = mat(nkv * self.hd, C)
            P[f"{l}_wv"] = mat(nkv * self.hd, C)
            P[f"{l}_wo"] = mat(C, nh * self.hd)
            P[f"{l}_mlp_norm"] = torch.nn.Parameter(torch.ones(C))
            P[f"{l}_wgate"] = mat(F_, C)
            P[f"{l}_wup"] = mat(F_, C)
            P[f"{l}_wdown"] = mat(C, F_)
        P["final_norm"] = torch.nn.Parameter(torch.ones(C))
        P["lm_head"] = mat(V, C)
        self.P = P

    @staticmethod
    def rmsnorm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * w

    @staticmethod
    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def forward(self, ids, pos, mask):
        layers, C, nh, nkv, F_, V = self.dims
        hd, P, T = self.hd, self.P, ids.shape[0]
        inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        freqs = pos.float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None], emb.sin()[None]  # [1, T, hd], broadcast over heads
        x = P["embed"][ids]
        for l in range(layers):
            n = self.rmsnorm(x, P[f"{l}_attn_norm"])
            q = (n @ P[f"{l}_wq"].T).view(T, nh, hd).transpose(0, 1)
            k = (n @ P[f"{l}_wk"].T).view(T, nkv, hd).transpose(0, 1)
            v = (n @ P[f"{l}_wv"].T).view(T, nkv, hd).transpose(0, 1)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            att = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask,
                                                 is_causal=mask is None, enable_gqa=True)
            x = x + att[0].transpose(0, 1).reshape(T, C) @ P[f"{l}_wo"].T
            n = self.rmsnorm(x, P[f"{l}_mlp_norm"])
            x = x + (F.silu(n @ P[f"{l}_wgate"].T) * (n @ P[f"{l}_wup"].T)) @ P[f"{l}_wdown"].T
        return self.rmsnorm(x, P["final_norm"]) @ P["lm_head"].T


def build_hand(dims, T):
    model = HandLlama(dims)

    def step(ids, pos, labels, mask):
        logits = model(ids[0], pos[0], mask)
        loss = F.cross_entropy(logits[:-1], labels[0, 1:], ignore_index=-100)
        loss.backward()
        return loss.item()

    return model, step


# ------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", choices=["hf", "hand"], default="hf")
    ap.add_argument("--model", default="small", choices=sorted(PRESETS))
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-profile", action="store_true", help="skip the profiled step (no GEMM share)")
    a = ap.parse_args()
    if a.tokens < 1 or a.samples < 1 or a.samples > a.tokens or a.threads < 1 or a.reps < 1 or a.warmup < 0:
        ap.error("need tokens >= samples >= 1, threads >= 1, reps >= 1, warmup >= 0")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dims = PRESETS[a.model]
    T, K, V = a.tokens, a.samples, dims[5]

    # the unit: K whole samples packed in one row
    lens = [T // K + (1 if i < T % K else 0) for i in range(K)]
    ids = torch.randint(0, V, (1, T))
    pos = torch.cat([torch.arange(n) for n in lens])[None]
    labels = ids.clone()
    starts = [sum(lens[:i]) for i in range(K)]
    for s in starts[1:]:
        labels[0, s] = -100  # the previous sample's last token predicts nothing
    predicted = T - K
    mask = None
    if K > 1:  # block-diagonal causal, True = attend
        doc = torch.repeat_interleave(torch.arange(K), torch.tensor(lens))
        mask = (doc[:, None] == doc[None, :]) & torch.ones(T, T, dtype=torch.bool).tril()
        mask = mask[None, None]
    gflop = 3 * sum(forward_flops(dims, n) for n in lens) * 1e-9

    model, step = (build_hf if a.impl == "hf" else build_hand)(dims, T)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    rss_before = peak_rss_mb()

    step_ms, loss = [], float("nan")
    for r in range(-a.warmup, a.reps):
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=True)
        loss = step(ids, pos, labels, mask)
        t1 = time.perf_counter()
        if r < 0:
            continue
        step_ms.append((t1 - t0) * 1e3)
        print(f"bench=torch impl={a.impl} step={r} ms={step_ms[-1]:.2f} loss={loss:.6f}", flush=True)

    gemm_share, gemm_ms = float("nan"), float("nan")
    if not a.no_profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            model.zero_grad(set_to_none=True)
            step(ids, pos, labels, mask)
            wall_us = (time.perf_counter() - t0) * 1e6
        mm_us = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in MATMUL_OPS)
        gemm_share, gemm_ms = mm_us / wall_us, mm_us * 1e-3

    med = statistics.median(step_ms)
    print(f"bench=torch impl={a.impl} model={a.model} tokens={T} samples={K} threads={torch.get_num_threads()} "
          f"reps={a.reps} warmup={a.warmup} params={params} predicted={predicted} loss={loss:.6f} "
          f"ms_per_step={med:.2f} best_ms={min(step_ms):.2f} us_per_token={med * 1e3 / T:.3f} "
          f"gemm_share={gemm_share:.4f} gemm_ms_profiled_step={gemm_ms:.2f} gflop_per_step={gflop:.2f} "
          f"gflops={gflop / (med * 1e-3):.2f} rss_before_mb={rss_before:.1f} peak_rss_mb={peak_rss_mb():.1f} "
          f"torch={torch.__version__} attn={'sdpa_causal' if mask is None else 'sdpa_mask'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
