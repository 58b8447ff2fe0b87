/*
 * lib/model.h — transformer model shapes shared by every stage: the named presets of the
 * papers, validation, parameter count and the forward-FLOPs formula of one sequence.
 *
 * A shape is the handful of dimensions the cost models need ([model] section of the
 * config, lib/config_schema.c): layers, hidden size, attention heads, key/value heads
 * (grouped-query attention when kv_heads < heads), the feed-forward inner size, the
 * vocabulary, and whether the MLP is gated (SwiGLU: gate, up and down matrices — Llama,
 * Qwen) or plain (GELU: up and down matrices — GPT).
 *
 * Forward FLOPs of ONE causal sequence of T tokens (multiply-add = 2 FLOPs; SlimPack
 * 2.1.1 "feed-forward networks scale linearly (O(Lh^2)), ... attention O(L^2 h)";
 * InfiniPipe 3.1.2 Eq. 1 prices a sequence as alpha_1 s^2 + alpha_2 s; HelixPipe Table 1
 * gives the same per-layer terms for GPT-3 with a full, unmasked score matrix). Only the
 * forward pass: the backward costs about 2x (GEMM) and 2.5x (attention) of it (SlimPack
 * 2.2.2), which the cost model applies on top.
 *
 *     kv_dim  = hidden / heads * kv_heads
 *     linear  = 2 T (hidden (hidden + 2 kv_dim)       QKV projection
 *                    + hidden hidden                  output projection
 *                    + m hidden ffn)                  MLP, m = 3 gated / 2 plain
 *     attn    = 2 * 2 hidden T^2 / 2 = 2 hidden T^2   QK^T and AV, halved by the causal mask
 *     forward = layers (linear + attn) + 2 T hidden vocab     (+ the LM head)
 *
 * Norms, softmax, activations, rotary and biases are left out (memory-bound, O(T hidden)).
 * The quadratic term overtakes the linear ones of a layer at
 * T = hidden + 2 kv_dim + hidden + m ffn (about 49K tokens for llama-7b).
 *
 * Thread-safety: the preset table is read-only; every function is pure.
 */
#ifndef LT_MODEL_H
#define LT_MODEL_H

#include <stddef.h>

#include "lib/config.h" /* lt_config, lt_config_get_* */
#include "lib/error.h"  /* lt_status, lt_error */

typedef struct lt_model_shape {
    const char *name; /* preset name or a caller's label (not owned; may be NULL) */
    int layers;       /* transformer layers */
    int hidden;       /* model width h */
    int heads;        /* query heads; hidden % heads == 0 */
    int kv_heads;     /* key/value heads; heads % kv_heads == 0 (== heads: plain MHA) */
    int ffn;          /* MLP inner size */
    int vocab;        /* vocabulary (embedding rows and LM-head columns) */
    int gated_ffn;    /* 1: SwiGLU MLP, 3 matrices (Llama, Qwen); 0: GELU MLP, 2 (GPT) */
    /* What the trainer needs beyond the cost model's dimensions (0 = the default, see
     * lt_model_rope_theta / lt_model_norm_eps; presets leave them 0): */
    double rope_theta;  /* RoPE base (Llama 2: 10000, Llama 3: 500000) */
    double norm_eps;    /* RMSNorm epsilon */
    int tie_embeddings; /* 1: the LM head is the embedding matrix */
    /* The families of published checkpoints the trainer continues from (train/io/hf.c; 0 =
     * plain Llama, what presets are): */
    int family;        /* LT_FAMILY_*: Llama, Mistral (Llama's architecture under another name,
                          full attention), Qwen2 (Llama plus Q/K/V biases) */
    int rope_scaling;  /* LT_ROPE_NONE, or LT_ROPE_LLAMA3 (Llama 3.1's frequency scaling, whose
                          parameters follow: lt_model_rope_inv_freq) */
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_pos; /* the context the scaled model was pretrained with */
} lt_model_shape;

enum { LT_FAMILY_LLAMA = 0, LT_FAMILY_MISTRAL = 1, LT_FAMILY_QWEN2 = 2, LT_N_FAMILIES = 3 };
enum { LT_ROPE_NONE = 0, LT_ROPE_LLAMA3 = 1 };

/* The Hugging Face model_type of a family ("llama", "mistral", "qwen2"; NULL out of range),
 * and the family of such a name (-1 when none). */
const char *lt_model_family_name(int family);
int lt_model_family_of(const char *name);

/* 1 when the Q/K/V projections have biases (Qwen2: q_proj, k_proj and v_proj carry a bias,
 * o_proj none), else 0. */
int lt_model_qkv_bias(const lt_model_shape *m);

/*
 * RoPE's inverse frequencies inv_freq[0 .. head_dim/2) of a shape, in fp32 exactly as
 * transformers computes them (modeling_rope_utils.py, the default and the "llama3" rope
 * types), so the CPU and GPU kernels rotate by the same angles pos * inv_freq[i]:
 *   inv_freq[i] = 1 / theta^(2i / head_dim)
 * and with LT_ROPE_LLAMA3 (Llama 3.1, "factor", "low_freq_factor", "high_freq_factor",
 * "original_max_position_embeddings" = L): with wavelen = 2 pi / inv_freq[i], a wavelength
 * above L / low_freq_factor is slowed by `factor`, one below L / high_freq_factor is kept,
 * one between is interpolated: s = (L / wavelen - low) / (high - low),
 * inv_freq[i] <- (1 - s) inv_freq[i] / factor + s inv_freq[i].
 */
void lt_model_rope_inv_freq(const lt_model_shape *m, int head_dim, float *inv_freq);

/* The RoPE base and RMSNorm epsilon of a shape, defaults (10000, 1e-5) applied. */
double lt_model_rope_theta(const lt_model_shape *m);
double lt_model_norm_eps(const lt_model_shape *m);

/* The preset called `name` (exact, case-sensitive: "tiny", "llama-7b", ...), or NULL. */
const lt_model_shape *lt_model_preset(const char *name);

/* Number of presets, and the i-th (0 <= i < n, table order; NULL when out of range). */
size_t lt_model_n_presets(void);
const lt_model_shape *lt_model_preset_at(size_t i);

/*
 * The model a program runs with: `name_override` (a --model NAME option) when non-NULL,
 * else the config's [model] section: model.preset, whose fields the dimension keys
 * (layers, hidden, heads, kv_heads, ffn, vocab) override; dimensions alone describe a
 * "custom" SwiGLU model (kv_heads defaults to heads). With neither a preset nor a
 * dimension: llama-7b (the smallest model of the SlimPack evaluation). The config's
 * dimensions are ignored when name_override is given. m->name is the preset's name, or
 * "custom" when a dimension was set. model.rope_theta, model.norm_eps and
 * model.tie_embeddings fill the trainer's fields (also under a name override), as do
 * model.family and model.rope_scaling with its model.rope_* parameters.
 *
 * The vocabulary is the data's: unless the config sets model.vocab (and a name override
 * does not ignore it), m->vocab is the size of data.encoding (lt_encoding_n_vocab, with
 * data.vocab_dir), whatever the preset's table says; a model.vocab below that size is
 * LT_ERR_CONFIG at model.vocab's origin naming both keys (a larger one is fine: a padded
 * head). An explicit model.vocab with an encoding whose size cannot be had (not shipped,
 * its files not found here) is taken unchecked: the vocab files need not be where the
 * planner runs, and the trainer refuses any token id outside the vocabulary
 * (lt_unit_check, train/model/model.h).
 *
 * Errors: LT_ERR_USAGE "unknown model 'x'" with WHERE "--model" (override) or
 * "model.preset" (config) and the presets in the hint; LT_ERR_CONFIG from
 * lt_model_validate, for a model.vocab below the encoding's size, and for an encoding whose
 * size is unknown (not shipped, its files not found or unreadable) when model.vocab is unset.
 */
lt_status lt_model_from_config(const lt_config *cfg, const char *name_override, lt_model_shape *m,
                               lt_error *err);

/*
 * The vocabulary size of the encoding data.encoding names (dataprep/tokenizer.h): largest
 * token id + 1 with the special tokens (the tokenizer's lt_tokenizer_n_vocab; every id of a
 * shard is below it). The shipped encodings are known without their files, so a planner or
 * a trainer needs no vocab directory for them: r50k_base 50257, cl100k_base 100277,
 * o200k_base 200019 (their rank files are pinned by SHA-256 in dataprep/tokenizer.c, as
 * are their special tokens; tests/lib/test_model.c checks the sizes against the files). Any
 * other name is read from its files NAME.tiktoken and NAME.json, found where dataprep
 * finds them (lt_vocab_find, lib/files.h: vocab_dir when non-NULL, $LONGTAIL_VOCAB_DIR, the
 * installed data directory): the largest rank and the largest "special_tokens" id, + 1.
 * Errors: LT_ERR_USAGE "encoding 'x' not found" naming the directories searched; LT_ERR_IO;
 * LT_ERR_INPUT naming FILE:LINE for a rank line without a rank, or a sidecar that is not a
 * JSON object with integer special-token ids.
 */
lt_status lt_encoding_n_vocab(const char *name, const char *vocab_dir, int *n_vocab, lt_error *err);

/* LT_OK when every dimension is positive, heads divides hidden, kv_heads divides heads,
 * gated_ffn is 0 or 1, family and rope_scaling are known and llama3 scaling has positive
 * factors with low_freq_factor < high_freq_factor and a positive original context; else
 * LT_ERR_CONFIG naming the first broken rule (WHERE is "[model]", the hint names the preset
 * when there is one). */
lt_status lt_model_validate(const lt_model_shape *m, lt_error *err);

/* Forward FLOPs of one causal sequence of `tokens` tokens (formula above); 0 for
 * tokens <= 0. The shape must be valid. */
double lt_model_forward_flops(const lt_model_shape *m, double tokens);

/* The two parts of lt_model_forward_flops: everything linear in T (projections, MLP,
 * LM head) and the causal attention term layers * 2 hidden T^2. Their sum is the total. */
double lt_model_forward_flops_linear(const lt_model_shape *m, double tokens);
double lt_model_forward_flops_attention(const lt_model_shape *m, double tokens);

/*
 * Parameter count: the input embedding (vocab x hidden), per layer the QKV, output and
 * MLP matrices plus two norm weight vectors (2 hidden), a final norm (hidden), and an
 * UNTIED LM head (hidden x vocab), and Qwen2's Q/K/V biases (hidden + 2 kv_dim per layer).
 * GPT's biases and learned position embeddings are left out, as in HelixPipe Table 1.
 * GPT-style models usually tie the LM head to the embedding: for them this counts vocab x
 * hidden more than the model has.
 */
double lt_model_params(const lt_model_shape *m);

/*
 * A fused LM head (llm.c's fused classifier; the CPU trainer's, train/model/pass.c) makes the
 * logits, the loss and their gradient a block of whole rows at a time, so the [T, V]
 * logits never exist at once: a block holds at most LT_FUSED_HEAD_BLOCK_ELEMS entries (32
 * MiB in fp32), and at least one row. lt_fused_head_rows: the rows of a block for a
 * vocabulary of `vocab` entries (>= 1; 166 for r50k_base's 50257); a unit of fewer tokens
 * makes one block of its rows. The trainer allocates it, the cost model prices it
 * (plans/cost/cost.c): one definition for both.
 */
#define LT_FUSED_HEAD_BLOCK_ELEMS ((size_t)8 << 20)
int lt_fused_head_rows(int vocab);

/*
 * HelixPipe's partition (4.2) of `layers` layers over `stages` stages: the stage of layer
 * l's pre-attention part (pre) or post-attention part. The pre-attention on l mod p; the
 * post-attention with the next layer's pre-attention, on (l + 1) mod p, the last layer's on
 * stage 0. (The attention's stage depends on its micro-batch: plans/schedule's
 * lt_sched_helixpipe_folds.) The trainer holds its parts by it (train/model), the planner
 * places and prices them by it (plans/): one definition for both.
 */
int lt_helix_part_stage(int layer, bool pre, int layers, int stages);

#endif /* LT_MODEL_H */
