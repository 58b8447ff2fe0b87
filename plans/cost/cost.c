/*
 * plans/cost/cost.c — the cost model (plans/cost/cost.h; the derivations are in docs/cost-model.md).
 *
 * Conventions: every quantity is per GPU of a TP x CP group (FLOPs, bytes, elements); a GEMM
 * of T rows by a weight of P elements is 2 T P FLOPs; "hq" is the hidden width one GPU holds,
 * h / t, for tensors TP splits by heads or sequence parallelism splits by tokens (Megatron
 * sequence parallelism, as SlimPack 6.1 and HelixPipe 2.2 use it with TP). Context
 * parallelism (cp = c) gives each GPU T / c of every op's tokens: the FLOPs functions divide
 * by c, lt_cost_op works on the local token count. Every division by c is exact for c = 1,
 * so a model with cp = 1 prices bit for bit as before CP existed. The internal functions
 * take the degree as an argument (cm->cp for the public ones, a DP-Merge unit's g for the
 * ops of a schedule, unit_cp), so pricing a DP-Merge op copies no cost model.
 */
#include "plans/cost/cost.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ dimensions per GPU */

static double hidden(const lt_cost_model *cm) { return (double)cm->model.hidden; }

/* h / t: query heads, attention output and sequence-parallel activations of one GPU. */
static double hq(const lt_cost_model *cm) { return (double)cm->model.hidden / cm->tp; }

/* Key (or value) width of one GPU: ceil(kv_heads / t) heads (Megatron replicates K/V heads
 * when t exceeds them). */
static double kv_local(const lt_cost_model *cm) {
    int kvh = (cm->model.kv_heads + cm->tp - 1) / cm->tp;
    return (double)(cm->model.hidden / cm->model.heads) * kvh;
}

/* MLP intermediate elements per token kept for backward: SwiGLU keeps the gate and up
 * outputs (2f, input of the fused SiLU-multiply) and the down projection's input (f);
 * GELU keeps the GELU input (f) and the second linear's input (f) (HelixPipe Table 1: 8bsh
 * for f = 4h). */
static double mlp_elems(const lt_cost_model *cm) {
    return (cm->model.gated_ffn ? 3.0 : 2.0) * (double)cm->model.ffn / cm->tp;
}

static double ffn_mats(const lt_cost_model *cm) { return cm->model.gated_ffn ? 3.0 : 2.0; }

/* ------------------------------------------------------------------ set-up */

static void set_defaults(lt_cost_model *cm) {
    /* the backend's bytes come from the profile: a profile built in code may leave them
     * unset, so fill in the defaults (a GPU mixed-precision backend; fp32 for act_bytes >= 4) */
    lt_hardware_fill_defaults(&cm->hw);
    cm->weight_bytes = cm->hw.weight_bytes;
    cm->grad_bytes = cm->hw.grad_bytes;
    cm->optim_bytes = cm->hw.optim_bytes;
    cm->act_bytes = cm->hw.act_bytes;
    cm->logit_bytes = cm->hw.logit_bytes;
    cm->bwd_gemm_factor = 2.0;
    cm->bwd_attn_factor = 2.5;
    cm->bwd_gemm_time_factor = cm->hw.bwd_gemm_factor; /* 2 and 2.5 unless the profile says */
    cm->bwd_attn_time_factor = cm->hw.bwd_attention_factor;
    cm->cp = 1;
    int spn = cm->hw.gpus_per_node / cm->tp;
    cm->stages_per_node = spn > 1 ? spn : 1;
    cm->head_stage = cm->pp - 1;
    cm->reserved_bytes = cm->hw.reserved_bytes;
    cm->mem_cap = cm->hw.hbm_bytes;
}

lt_status lt_cost_model_init(lt_cost_model *cm, const lt_model_shape *m, const lt_hardware *hw, int pp, int tp,
                             int dp, lt_error *err) {
    memset(cm, 0, sizeof *cm);
    lt_status st = lt_model_validate(m, err);
    if (st != LT_OK) return st;
    if (pp < 1 || tp < 1 || dp < 1)
        return lt_fail(err, LT_ERR_CONFIG, "[parallel]", "pp, tp and dp must be at least 1 (got %d, %d, %d)", pp, tp,
                       dp);
    if (pp > m->layers)
        return lt_fail(err, LT_ERR_CONFIG, "[parallel]", "pp = %d stages for %d layers: each stage needs a layer", pp,
                       m->layers);
    if (m->heads % tp != 0) {
        lt_fail(err, LT_ERR_CONFIG, "[parallel]", "tp = %d does not divide the %d attention heads", tp, m->heads);
        lt_error_hint(err, "tensor parallelism splits attention by heads: choose a divisor of %d", m->heads);
        return LT_ERR_CONFIG;
    }
    /* the trainer's split (train/model/model.h lt_llama_create_tp): K/V heads and the MLP
     * split too, K/V heads never replicated */
    if (m->kv_heads % tp != 0 || m->ffn % tp != 0) {
        lt_fail(err, LT_ERR_CONFIG, "[parallel]", "tp = %d does not divide the %d %s", tp,
                m->kv_heads % tp ? m->kv_heads : m->ffn, m->kv_heads % tp ? "key/value heads" : "MLP width (ffn)");
        lt_error_hint(err, "the trainer splits K/V heads and MLP columns over the TP ranks (it does not replicate "
                           "K/V heads): choose a divisor of both");
        return LT_ERR_CONFIG;
    }
    /* no hardware: a model for counting (parameters, bytes), one node holding a TP group */
    lt_hardware counts = {.name = "(none)", .gpus_per_node = tp};
    if (!hw) hw = &counts;
    else if (hw->peak_flops <= 0 || hw->gpus_per_node < 1 || hw->gemm.n < 1 || hw->attention.n < 1)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "hardware profile '%s' is not loaded", hw->name);
    /* ranks ordered TP, PP, DP: a TP group is tp consecutive ranks and must not straddle nodes
     * (its collectives run every layer) */
    if (tp > 1 && hw->gpus_per_node % tp != 0) {
        lt_fail(err, LT_ERR_CONFIG, "[parallel]", "tp = %d does not divide the %d GPUs per node of '%s': a TP group "
                "would span nodes", tp, hw->gpus_per_node, hw->name);
        lt_error_hint(err, "choose parallel.tp among the divisors of gpus_per_node");
        return LT_ERR_CONFIG;
    }
    cm->model = *m;
    cm->hw = *hw;
    cm->pp = pp;
    cm->tp = tp;
    cm->dp = dp;
    cm->shard = LT_SHARD_NONE;
    set_defaults(cm);
    return LT_OK;
}

lt_status lt_cost_model_set_cp(lt_cost_model *cm, int cp, lt_error *err) {
    if (cp < 1 || cm->dp % cp != 0) {
        lt_fail(err, LT_ERR_CONFIG, "[parallel]", "context-parallel degree %d: need a divisor of dp = %d", cp, cm->dp);
        lt_error_hint(err, "a context-parallel group is made of data-parallel ranks");
        return LT_ERR_CONFIG;
    }
    /* ranks ordered TP, PP, DP (the trainer's, train/dist/comm.h "Layout"): a CP group is
     * cp DP ranks, tp x pp ranks apart; a node still holds gpus_per_node / tp stages */
    cm->cp = cp;
    return LT_OK;
}

static lt_status config_int(const lt_config *cfg, const char *section, const char *key, int *out, lt_error *err) {
    int64_t v;
    lt_status st = lt_config_get_int(cfg, section, key, &v, err);
    if (st != LT_OK) return st;
    if (v < INT_MIN || v > INT_MAX)
        return lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, section, key), "%s.%s is too large", section, key);
    *out = (int)v;
    return LT_OK;
}

static const char *const shard_names[LT_SHARD_COUNT] = {"none", "zero1", "zero2", "fsdp"};

const char *lt_shard_name(lt_shard s) { return s >= 0 && s < LT_SHARD_COUNT ? shard_names[s] : "?"; }

lt_status lt_shard_from_config(const lt_config *cfg, lt_shard *out, lt_error *err) {
    const char *name = lt_config_get_string(cfg, "parallel", "shard");
    bool zero1 = false;
    lt_status st = lt_config_get_bool(cfg, "parallel", "zero1", &zero1, err);
    if (st != LT_OK) return st;
    *out = LT_SHARD_NONE;
    for (int k = 0; name && k < LT_SHARD_COUNT; k++)
        if (strcmp(name, shard_names[k]) == 0) *out = (lt_shard)k;
    if (!zero1) return LT_OK;
    if (*out == LT_SHARD_NONE || *out == LT_SHARD_ZERO1) { /* (none: the default, which a config dump spells) */
        *out = LT_SHARD_ZERO1;
        return LT_OK;
    }
    lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, "parallel", "zero1"),
            "parallel.zero1 = true and parallel.shard = %s disagree", lt_shard_name(*out));
    lt_error_hint(err, "parallel.zero1 = true is the older spelling of parallel.shard = zero1: drop parallel.zero1");
    return LT_ERR_CONFIG;
}

/* lt_cost_model_from_config and lt_cost_counts_from_config: hw NULL for counts only */
static lt_status from_config(lt_cost_model *cm, const lt_config *cfg, const char *hardware_dir, bool counts,
                             lt_error *err) {
    memset(cm, 0, sizeof *cm);
    lt_model_shape m;
    lt_status st = lt_model_from_config(cfg, NULL, &m, err);
    if (st != LT_OK) return st;
    int pp, tp, dp;
    lt_shard shard;
    if ((st = config_int(cfg, "parallel", "pp", &pp, err)) != LT_OK) return st;
    if ((st = config_int(cfg, "parallel", "tp", &tp, err)) != LT_OK) return st;
    if ((st = config_int(cfg, "parallel", "dp", &dp, err)) != LT_OK) return st;
    if ((st = lt_shard_from_config(cfg, &shard, err)) != LT_OK) return st;
    lt_hardware *hw = counts ? NULL : lt_malloc_check(sizeof *hw);
    if (hw) st = lt_hardware_load(hw, lt_config_get_string(cfg, "plan", "hardware"), hardware_dir, err);
    if (st == LT_OK) st = lt_cost_model_init(cm, &m, hw, pp, tp, dp, err);
    free(hw);
    if (st != LT_OK) return st;
    cm->shard = shard;
    if ((st = config_int(cfg, "plan", "mlp_chunk", &cm->mlp_chunk, err)) != LT_OK) return st;
    if (cm->mlp_chunk < 0) cm->mlp_chunk = 0;
    if (lt_config_is_set(cfg, "plan", "mem")) {
        uint64_t mem;
        if ((st = lt_config_get_size(cfg, "plan", "mem", &mem, err)) != LT_OK) return st;
        cm->mem_cap = (double)mem;
    }
    return LT_OK;
}

lt_status lt_cost_model_from_config(lt_cost_model *cm, const lt_config *cfg, const char *hardware_dir,
                                    lt_error *err) {
    return from_config(cm, cfg, hardware_dir, false, err);
}

lt_status lt_cost_counts_from_config(lt_cost_model *cm, const lt_config *cfg, lt_error *err) {
    return from_config(cm, cfg, NULL, true, err);
}

/* ------------------------------------------------------------------ FLOPs */

/* lt_cost_linear_flops at context-parallel degree cp. */
static double linear_flops(const lt_cost_model *cm, int cp, lt_op_part part, double tokens) {
    if (!(tokens > 0)) return 0.0;
    double h = hidden(cm);
    /* HelixPipe Table 1: QKV linear 6bsh^2 (MHA), O linear 2bsh^2, MLP 8bsh^2 x 2 (GPT) */
    tokens /= cp; /* context parallelism: each GPU of the CP group holds tokens / c */
    double qkv = 2.0 * tokens * h * (hq(cm) + 2.0 * kv_local(cm));
    double post = 2.0 * tokens * (hq(cm) * h + ffn_mats(cm) * h * (double)cm->model.ffn / cm->tp);
    /* HelixPipe 4.2: the QKV linear runs in the attention part (its input and weights cross
     * the pre-attention / attention boundary instead of Q, K and V); the pre-attention part is
     * the norm, no GEMM */
    switch (part) {
    case LT_PART_ALL: return qkv + post;
    case LT_PART_PRE: return 0.0;
    case LT_PART_POST: return post;
    case LT_PART_ATTN: return qkv;
    }
    return 0.0;
}

double lt_cost_linear_flops(const lt_cost_model *cm, lt_op_part part, double tokens) {
    return linear_flops(cm, cm->cp, part, tokens);
}

/* lt_cost_attention_flops at context-parallel degree cp. */
static double attention_flops(const lt_cost_model *cm, int cp, double begin, double end) {
    if (!(end > begin) || begin < 0) return 0.0;
    /* token i attends to i + 1 keys: QK^T and AV are 2 hd (i + 1) FLOPs each per query head,
     * 4 h (i + 1) over all heads; summed over i in [begin, end) in the continuous form
     * 4 h (end^2 - begin^2) / 2 (InfiniPipe Eq. 1: (C + s)^2 - C^2; lib/model.h: 2 h T^2). */
    /* context parallelism: the load-balanced causal chunks (Megatron CP) give each of the c
     * GPUs 1 / c of the work */
    return 2.0 * hq(cm) * (end * end - begin * begin) / cp;
}

double lt_cost_attention_flops(const lt_cost_model *cm, double begin, double end) {
    return attention_flops(cm, cm->cp, begin, end);
}

/* lt_cost_head_flops at context-parallel degree cp. */
static double head_flops(const lt_cost_model *cm, int cp, double tokens) {
    if (!(tokens > 0)) return 0.0;
    return 2.0 * (tokens / cp) * hidden(cm) * (double)cm->model.vocab / cm->tp;
}

double lt_cost_head_flops(const lt_cost_model *cm, double tokens) { return head_flops(cm, cm->cp, tokens); }

/* The MLP runs in chunks (lt_cost_model.mlp_chunk) for a unit of `tokens` per GPU. */
static bool mlp_chunked(const lt_cost_model *cm, double tokens) {
    return cm->mlp_chunk > 0 && (double)cm->mlp_chunk < tokens;
}

/* The down projection's FLOPs of the MLP for `tokens` tokens (per GPU at degree cp). */
static double down_flops(const lt_cost_model *cm, int cp, double tokens) {
    return tokens > 0 ? 2.0 * (tokens / cp) * hidden(cm) * (double)cm->model.ffn / cm->tp : 0.0;
}

/* Layers an op covers (1 for a part of a layer). */
static double op_layers(const lt_op *op) {
    return op->layer_end > op->layer_begin ? (double)(op->layer_end - op->layer_begin) : 0.0;
}

static bool op_has_attention(const lt_op *op) { return op->part == LT_PART_ALL || op->part == LT_PART_ATTN; }

/* The op's range ends the model (its output feeds the LM head and the loss). */
static bool op_has_head(const lt_cost_model *cm, const lt_op *op) {
    return (op->part == LT_PART_ALL || op->part == LT_PART_POST) && op->layer_end == (uint32_t)cm->model.layers;
}

/* The op's range starts the model (its input is the embedding). */
static bool op_starts_model(const lt_op *op) {
    return (op->part == LT_PART_ALL || op->part == LT_PART_PRE) && op->layer_begin == 0;
}

/* The head is fused (the profile's logit_bytes = 0: the CPU trainer's, llm.c's fused
 * classifier): the F over the model's end computes the loss gradient, dlogits, the head's
 * weight gradient and the final norm's input gradient a block of rows at a time, so it runs
 * the head's backward and the B over the end starts from that gradient. */
static bool fused_head(const lt_cost_model *cm) { return cm->logit_bytes == 0; }

static double op_recompute_layers(const lt_op *op) {
    double r = op->recompute_layers, n = op_layers(op);
    return r < n ? r : n;
}

static double slice_tokens(const lt_slice *s) { return s->end > s->begin ? (double)(s->end - s->begin) : 0.0; }

/* lt_cost_op_flops at context-parallel degree cp. */
static void op_flops(const lt_cost_model *cm, int cp, const lt_slice *slices, size_t n, const lt_op *op,
                     lt_op_flops *out) {
    double tokens = 0, attn = 0;
    for (size_t i = 0; i < n; i++) {
        tokens += slice_tokens(&slices[i]);
        if (op_has_attention(op)) attn += attention_flops(cm, cp, (double)slices[i].begin, (double)slices[i].end);
    }
    double nl = op_layers(op), r = op_recompute_layers(op);
    double lin = linear_flops(cm, cp, (lt_op_part)op->part, tokens);
    out->head = op_has_head(cm, op) ? head_flops(cm, cp, tokens) : 0.0;
    out->linear = nl * lin + out->head;
    out->attention = nl * attn;
    /* a recomputed post-attention with a chunked MLP: its recompute stops after the MLP's
     * norm and the backward remakes gate and up per chunk: all but the down projection */
    bool partial = op->part == LT_PART_POST && mlp_chunked(cm, tokens / cp);
    out->recompute_linear = r * (partial ? lin - down_flops(cm, cp, tokens) : lin);
    out->recompute_attention = r * attn;
}

void lt_cost_op_flops(const lt_cost_model *cm, const lt_slice *slices, size_t n, const lt_op *op,
                      lt_op_flops *out) {
    op_flops(cm, cm->cp, slices, n, op, out);
}

double lt_cost_executed_flops(const lt_cost_model *cm, const lt_op_flops *f, lt_op_kind kind) {
    bool fused = fused_head(cm) && f->head > 0;
    if (kind == LT_OP_FK) return f->linear + f->attention;
    if (kind == LT_OP_F) return f->linear + f->attention + (fused ? cm->bwd_gemm_factor * f->head : 0.0);
    double linear = fused ? f->linear - f->head : f->linear; /* a fused head's backward ran in its F */
    return cm->bwd_gemm_factor * linear + cm->bwd_attn_factor * f->attention + f->recompute_linear +
           f->recompute_attention;
}

/* The GEMM time of an op of `kind` with forward FLOPs f at `local` tokens per GPU: the layers'
 * GEMMs (B: their backward, bwd_gemm_time_factor x, and the recomputed forward) on the GEMM
 * curve, and the head's on the head curve (the GEMM curve when the profile has none). The head
 * runs its forward in F and FK and its backward in B, or in F when it is fused. Without a head
 * curve or a fused head this is the one division it always was (bit for bit). */
static double gemm_seconds(const lt_cost_model *cm, const lt_op_flops *f, lt_op_kind kind, double local) {
    bool backward = kind == LT_OP_B, fused = fused_head(cm), curve = cm->hw.head.n > 0;
    double kg = cm->bwd_gemm_time_factor, peak = cm->hw.peak_flops;
    double eff = lt_hardware_efficiency(&cm->hw.gemm, local);
    if (!(f->head > 0) || (!fused && !curve))
        return (backward ? kg * f->linear + f->recompute_linear : f->linear) / (peak * eff);
    double layers = f->linear - f->head;
    double t = (backward ? kg * layers + f->recompute_linear : layers) / (peak * eff);
    double head = kind == LT_OP_FK ? f->head                         /* FK: the forward only */
                  : kind == LT_OP_F ? (fused ? 1.0 + kg : 1.0) * f->head
                                    : (fused ? 0.0 : kg * f->head);
    if (head > 0) t += head / (peak * (curve ? lt_hardware_efficiency(&cm->hw.head, local) : eff));
    return t;
}

/* ------------------------------------------------------------------ memory */

double lt_cost_act_elems(const lt_cost_model *cm, lt_op_part part, bool recomputed, bool kv_separate) {
    double q = hq(cm), kv = 2.0 * kv_local(cm), mlp = mlp_elems(cm);
    double kv_here = kv_separate ? 0.0 : kv; /* K and V, when not held as kv_bytes */
    switch (part) {
    case LT_PART_ALL:
        /* norm input, QKV input, Q, K, V, attention output, norm input, MLP input, MLP
         * intermediates (HelixPipe Table 1: 16h for GPT); recomputed: the layer input */
        return recomputed ? q : 6.0 * q + kv_here + mlp;
    case LT_PART_PRE: return q; /* the norm's input (recomputed: the same input, kept) */
    case LT_PART_ATTN: return recomputed ? 2.0 * q + kv_here : 3.0 * q + kv_here; /* QKV input, Q, K, V, output */
    case LT_PART_POST: return recomputed ? 2.0 * q : 3.0 * q + mlp;
    }
    return 0.0;
}

double lt_cost_act_bytes_per_token(const lt_cost_model *cm, lt_op_part part, bool recomputed, bool kv_separate) {
    return lt_cost_act_elems(cm, part, recomputed, kv_separate) * cm->act_bytes;
}

double lt_cost_kv_bytes_per_token(const lt_cost_model *cm) {
    /* K and V (2 kv) and their gradients (InfiniPipe Eq. 5: M_dkv = 2eLD per token) */
    return 2.0 * (2.0 * kv_local(cm)) * cm->act_bytes;
}

/* Parameters per GPU of a layer's Q/K/V weights and biases: its pre-attention part but the
 * first norm, what HelixPipe sends with the QKV linear's input (4.2). */
static double qkv_params(const lt_cost_model *cm) {
    return hidden(cm) * (hq(cm) + 2.0 * kv_local(cm)) +
           (lt_model_qkv_bias(&cm->model) ? hq(cm) + 2.0 * kv_local(cm) : 0.0); /* Qwen2's biases, split like their rows */
}

double lt_cost_layer_params(const lt_cost_model *cm) {
    double h = hidden(cm);
    return qkv_params(cm) + hq(cm) * h + ffn_mats(cm) * h * (double)cm->model.ffn / cm->tp +
           2.0 * h; /* + the two norm weights, replicated over TP */
}

double lt_cost_stage_params(const lt_cost_model *cm, int stage) {
    if (stage < 0 || stage >= cm->pp) return 0.0;
    uint32_t b, e;
    lt_schedule_stage_layers(cm->model.layers, cm->pp, stage, &b, &e);
    /* vocab-parallel: the largest shard, ceil(V / tp) rows (the trainer gives the first
     * V mod tp ranks one row more: lt_llama_create_tp) */
    double h = hidden(cm), vocab_part = (double)((cm->model.vocab + cm->tp - 1) / cm->tp) * h;
    if (cm->helix_parts && !cm->whole_model && cm->pp > 1) { /* HelixPipe's partition (4.2) */
        double pre = qkv_params(cm) + h, post = lt_cost_layer_params(cm) - pre, p = 0;
        for (int l = 0; l < cm->model.layers; l++) /* (the last layer's post-attention on stage 0) */
            p += (lt_helix_part_stage(l, true, cm->model.layers, cm->pp) == stage ? pre : 0.0) +
                 (lt_helix_part_stage(l, false, cm->model.layers, cm->pp) == stage ? post : 0.0);
        if (stage == 0) /* the embedding, the final norm and the head (a tied one: the embedding) */
            p += (cm->model.tie_embeddings ? 1.0 : 2.0) * vocab_part + h;
        return p;
    }
    if (cm->whole_model) b = 0, e = (uint32_t)cm->model.layers;
    double p = (double)(e - b) * lt_cost_layer_params(cm);
    if (stage == 0 || cm->whole_model) p += vocab_part;                  /* input embedding */
    if (stage == cm->head_stage || cm->whole_model) p += vocab_part + h; /* final norm + untied LM head */
    return p;
}

/* the optimizer states' and (fsdp) the weights' block of a rank: 1/dp when sharded */
static double shard_div(const lt_cost_model *cm) { return cm->shard != LT_SHARD_NONE ? (double)cm->dp : 1.0; }

/* fsdp: bytes per parameter of the rank's block of the weights where they are their own
 * master (fp32: the CPU trainer); a mixed-precision backend's master is in optim_bytes */
static double fsdp_block(const lt_cost_model *cm) {
    return cm->shard == LT_SHARD_FSDP && cm->weight_bytes >= 4 ? cm->weight_bytes / (double)cm->dp : 0.0;
}

double lt_cost_model_states_bytes(const lt_cost_model *cm, int stage) {
    double per = cm->weight_bytes + cm->grad_bytes + cm->optim_bytes / shard_div(cm) + fsdp_block(cm);
    return lt_cost_stage_params(cm, stage) * per;
}

double lt_cost_model_states_held_bytes(const lt_cost_model *cm, int stage) {
    double per = cm->optim_bytes / shard_div(cm);
    if (cm->shard == LT_SHARD_FSDP) per += fsdp_block(cm);
    else per += cm->weight_bytes + (cm->shard == LT_SHARD_ZERO2 ? 0.0 : cm->grad_bytes);
    return lt_cost_stage_params(cm, stage) * per;
}

/* ------------------------------------------------------------------ communication */

int lt_cost_stage_node(const lt_cost_model *cm, int stage) {
    return stage / (cm->stages_per_node > 0 ? cm->stages_per_node : 1);
}

double lt_cost_p2p_time(const lt_cost_model *cm, int from, int to, double bytes) {
    if (!(bytes > 0)) return 0.0;
    if (lt_cost_stage_node(cm, from) == lt_cost_stage_node(cm, to))
        return cm->hw.p2p_intra_latency_s + bytes / cm->hw.p2p_intra_bytes_per_s;
    return cm->hw.p2p_inter_latency_s + bytes / cm->hw.p2p_inter_bytes_per_s;
}

/* Ring collective over k ranks moving a tensor of `bytes` (all-gather output or
 * reduce-scatter input): each rank sends (k - 1) / k of it over one link direction; the
 * k - 1 steps are pipelined, so the launch latency is paid once (NCCL's ring model). */
static double ring_time(double bytes, int k, bool intra, const lt_hardware *hw) {
    if (k <= 1 || !(bytes > 0)) return 0.0;
    double bw = intra ? hw->p2p_intra_bytes_per_s : hw->p2p_inter_bytes_per_s;
    double lat = intra ? hw->p2p_intra_latency_s : hw->p2p_inter_latency_s;
    return lat + (double)(k - 1) / k * bytes / bw;
}

double lt_cost_tp_comm_time(const lt_cost_model *cm, double tokens, int collectives) {
    if (cm->tp <= 1 || collectives <= 0 || !(tokens > 0)) return 0.0;
    double bytes = tokens * hidden(cm) * cm->act_bytes;
    return collectives * ring_time(bytes, cm->tp, cm->tp <= cm->hw.gpus_per_node, &cm->hw);
}

double lt_cost_dp_sync_time(const lt_cost_model *cm, int stage) {
    if (cm->dp <= 1) return 0.0;
    double params = lt_cost_stage_params(cm, stage);
    /* ranks are ordered TP, PP, DP: the DP peers share a node only when the whole layout fits one */
    bool intra = (long)cm->tp * cm->pp * cm->dp <= cm->hw.gpus_per_node;
    if (cm->shard == LT_SHARD_NONE) /* an all-reduce: reduce-scatter + all-gather of the gradients */
        return 2.0 * ring_time(params * cm->grad_bytes, cm->dp, intra, &cm->hw);
    return ring_time(params * cm->grad_bytes, cm->dp, intra, &cm->hw) +
           ring_time(params * cm->weight_bytes, cm->dp, intra, &cm->hw);
}

double lt_cost_dp_bytes(const lt_cost_model *cm, int stage) {
    if (cm->dp <= 1) return 0.0;
    double part = lt_cost_stage_params(cm, stage) * (cm->dp - 1) / cm->dp;
    return cm->shard == LT_SHARD_NONE ? 2.0 * part * cm->grad_bytes : part * (cm->grad_bytes + cm->weight_bytes);
}

/* TP collectives per layer part, forward and backward, as the trainer runs them
 * (train/model/pass.c; Megatron-LM sequence parallelism, Korthikanti et al. 2022 4.2.2).
 * Forward: an all-gather of the normed rows before the Q/K/V GEMMs (PRE), a reduce-scatter
 * after the output projection, an all-gather before the first MLP GEMMs and a
 * reduce-scatter after the second (POST). Backward: the output gradient all-gathered before
 * each row-parallel GEMM's backward, the normed input all-gathered again for the weight
 * gradients, the input gradient reduce-scattered after the column-parallel ones: PRE 2
 * (n1, dn), POST 4 (dx, n2, dn, dx). */
static int part_collectives(lt_op_part part, bool backward) {
    switch (part) {
    case LT_PART_ALL: return backward ? 6 : 4;
    case LT_PART_PRE: return 0;
    case LT_PART_ATTN: return backward ? 2 : 1; /* (the QKV linear's: HelixPipe 4.2 moves it here) */
    case LT_PART_POST: return backward ? 4 : 3;
    }
    return 0;
}

int lt_cost_tp_collectives(const lt_cost_model *cm, const lt_op *op, double tokens) {
    if (cm->tp <= 1) return 0;
    lt_op_part part = (lt_op_part)op->part;
    int nl = (int)op_layers(op), r = (int)op_recompute_layers(op);
    bool embed = op_starts_model(op);
    if (op->kind != LT_OP_B) /* F, FK; the head (F only) gathers its normed rows and, fused
                                with the loss's backward, reduce-scatters their gradient */
        return nl * part_collectives(part, false) + (embed ? 1 : 0) + (op->kind == LT_OP_F && op_has_head(cm, op) ? 2 : 0);
    /* B: every layer's backward, the recomputed layers' forward again; the embedding's
     * gradient gathered (and with recompute its forward's reduce-scatter again, but for a
     * recomputed pre-attention part, which runs as keeping its arrays: train/exec/passes.c) */
    bool embed_again = r > 0 && part == LT_PART_ALL;
    int again = part == LT_PART_POST && mlp_chunked(cm, tokens) ? 1 : part_collectives(part, false); /* (the
                  chunked MLP's recompute: the output projection's reduce-scatter only) */
    return nl * part_collectives(part, true) + r * again + (embed ? (embed_again ? 2 : 1) : 0);
}

double lt_cost_tp_bytes(const lt_cost_model *cm, const lt_slice *slices, size_t n, const lt_op *op, int cp) {
    double tokens = 0;
    for (size_t i = 0; i < n; i++) tokens += slice_tokens(&slices[i]);
    int k = lt_cost_tp_collectives(cm, op, tokens / (cp > 1 ? cp : 1));
    if (k == 0) return 0.0;
    return k * (double)(cm->tp - 1) / cm->tp * (tokens / (cp > 1 ? cp : 1)) * hidden(cm) * cm->act_bytes;
}

/* Elements per token (per GPU) an op sends along the model path: forward outputs, backward
 * input gradients. HelixPipe 4.2: across both boundaries of the attention part two hidden
 * states travel (2bsh): forward, PRE sends the QKV linear's input and the residual, ATTN the
 * attention output and the residual; backward, their gradients; whole layers and POST the
 * hidden state (and PRE's backward the layer input's gradient). */
static double out_elems(const lt_cost_model *cm, const lt_op *op) {
    double q = hq(cm);
    bool fwd = op->kind != LT_OP_B;
    switch ((lt_op_part)op->part) {
    case LT_PART_ALL: return q;
    case LT_PART_PRE: return fwd ? 2.0 * q : q;
    case LT_PART_ATTN: return 2.0 * q;
    case LT_PART_POST: return fwd ? q : 2.0 * q;
    }
    return 0.0;
}

/* Bytes an op sends besides its tokens' (HelixPipe 4.2: "transfers the QKV linear
 * parameters along with its input", 3h^2 for MHA): a PRE F sends the QKV weights of its layers
 * (this GPU's share, weight_bytes each) to the attention, whose B returns their gradients
 * (grad_bytes each). */
static double out_weight_bytes(const lt_cost_model *cm, const lt_op *op) {
    bool carries = (op->part == LT_PART_PRE && op->kind != LT_OP_B) || (op->part == LT_PART_ATTN && op->kind == LT_OP_B);
    if (!carries) return 0.0;
    return (double)op_layers(op) * qkv_params(cm) * (op->kind == LT_OP_B ? cm->grad_bytes : cm->weight_bytes);
}

/* Does attention op op on `stage` (-1: not known) run on Q/K/V weights sent from its
 * pre-attention's stage (helix_parts: layer l's are on stage l mod pp)? An unknown stage
 * counts as away (the larger memory). */
static bool qkv_sent(const lt_cost_model *cm, const lt_op *op, int stage) {
    return cm->helix_parts && !cm->whole_model && cm->pp > 1 && op->part == LT_PART_ATTN &&
           (stage < 0 || (int)(op->layer_begin % (uint32_t)cm->pp) != stage);
}

/* ------------------------------------------------------------------ ops */

/* The K/V ring exchange of context parallelism (Megatron CP: ring attention; each GPU holds
 * ring_tokens / c of the K/V the unit's attention reads, load-balanced causal chunks): per
 * layer pass, c - 1 transfers of the GPU's K and V, each `bytes`, over NVLink when the TP x
 * CP group fits a node. */
static double cp_ring_time(const lt_cost_model *cm, int cp, double local_tokens, double passes) {
    if (cp <= 1 || !(local_tokens > 0) || !(passes > 0)) return 0.0;
    double bytes = local_tokens * 2.0 * kv_local(cm) * cm->act_bytes;
    /* the members are DP ranks tp x pp apart (ranks ordered TP, PP, DP): one node holds the
     * group only when tp x pp x cp ranks fit in it */
    bool intra = (long)cm->tp * cm->pp * cp <= cm->hw.gpus_per_node;
    double bw = intra ? cm->hw.p2p_intra_bytes_per_s : cm->hw.p2p_inter_bytes_per_s;
    double lat = intra ? cm->hw.p2p_intra_latency_s : cm->hw.p2p_inter_latency_s;
    return passes * (double)(cp - 1) * (lat + bytes / bw);
}

/* The tokens whose keys/values the ring carries for an op over slices[0..n)
 * (docs/plans-schema.md, "Ring"; issue 16): every slice's own tokens plus its sample's
 * context [0, begin) before the unit's first slice of that sample. The context's K/V are
 * held sharded by the members that computed them and must reach every member's queries,
 * so a slice of context C and n tokens moves C + n tokens' K/V around the ring, not n
 * (ring attention, Liu et al.; Megatron CP). A unit's adjacent slices of one sample share
 * that context: the later ones add their own tokens only. */
static double ring_tokens(const lt_slice *slices, size_t n) {
    double t = 0;
    for (size_t i = 0; i < n; i++) {
        t += slice_tokens(&slices[i]);
        bool continues = i > 0 && slices[i - 1].sample == slices[i].sample && slices[i - 1].end == slices[i].begin;
        if (!continues) t += (double)slices[i].begin;
    }
    return t;
}

/* The attention efficiency of a slice: at the causal length with the same work per GPU,
 * sqrt((end^2 - begin^2) / c) (docs/cost-model.md). */
static double slice_attention_efficiency(const lt_cost_model *cm, int cp, const lt_slice *sl) {
    double b = (double)sl->begin, e = (double)sl->end;
    return lt_hardware_efficiency(&cm->hw.attention, sqrt((e * e - b * b) / (double)cp));
}

/* The context-parallel degree unit u's ops run at (cost.h, "DP-Merge units"): the unit's
 * DP-Merge degree g when g > 1, else the model's cp. */
static int unit_cp(const lt_cost_model *cm, const lt_unit *u) { return u->cp > 1 ? (int)u->cp : cm->cp; }

/* The tokens whose keys and values (and their gradients) forward op `op` holds for slice s
 * (keeps: it keeps its K/V for a later op, cost.h): a kept slice's own; HelixPipe's
 * attention part, whose slices of one sample attend on different stages (4.2: micro-batch
 * i's attention of layer l on stage (l + i + 1) mod p), any slice of a sliced sample (the
 * last one too: its stage's K/V context holds them with their gradients, the trainer's). */
static double slice_kv_tokens(const lt_op *op, const lt_slice *s, bool keeps) {
    return keeps || (op->part == LT_PART_ATTN && s->begin > 0) ? slice_tokens(s) : 0.0;
}

/* ... and the earlier tokens' it holds where its slices' earlier ones attend on another
 * stage (lt_op_cost.kv_in_bytes, plans/schedule/sim.h: the simulator decides): an
 * attention part's, every token before a slice of a sliced sample. */
static double slice_kv_in_tokens(const lt_op *op, const lt_slice *s) {
    return op->part == LT_PART_ATTN && s->begin > 0 ? (double)s->begin : 0.0;
}

/* lt_cost_op at context-parallel degree cp (cm->cp for lt_cost_op), with the slices' attention
 * efficiencies from attn_eff when not NULL (the prepared bridge computes them once per
 * slice: the same values, looked up once). gathered: a B of an asymmetric schedule, whose
 * rows come from several forward units (lt_cost_schedule_op). */
static void cost_op(const lt_cost_model *cm, int cp_degree, const lt_slice *slices, size_t n, const bool *keeps_kv,
                    const double *attn_eff, const lt_op *op, bool gathered, int stage, lt_op_estimate *out) {
    memset(out, 0, sizeof *out);
    lt_op_kind kind = (lt_op_kind)op->kind;
    lt_op_part part = (lt_op_part)op->part;
    bool backward = kind == LT_OP_B, head = op_has_head(cm, op), attn = op_has_attention(op);
    double nl = op_layers(op), r = op_recompute_layers(op);
    double peak = cm->hw.peak_flops;
    double cp = (double)cp_degree; /* every per-GPU token count below is divided by it (exact at 1) */

    double tokens = 0, kv_tokens = 0, kv_in_tokens = 0;
    for (size_t i = 0; i < n; i++) {
        tokens += slice_tokens(&slices[i]);
        kv_tokens += slice_kv_tokens(op, &slices[i], keeps_kv && keeps_kv[i]);
        kv_in_tokens += slice_kv_in_tokens(op, &slices[i]);
    }
    double local = tokens / cp; /* tokens one GPU of the CP group holds */
    op_flops(cm, cp_degree, slices, n, op, &out->flops);
    out->executed_flops = lt_cost_executed_flops(cm, &out->flops, kind);

    /* time: GEMMs at the efficiency of the GPU's token count, attention per slice at the
     * efficiency of the causal length with the same work per GPU, TP collectives */
    out->gemm_time = gemm_seconds(cm, &out->flops, kind, local);
    if (attn) {
        for (size_t i = 0; i < n; i++) {
            double b = (double)slices[i].begin, e = (double)slices[i].end;
            double per_layer = attention_flops(cm, cp_degree, b, e);
            if (per_layer <= 0) continue;
            double f = backward ? (cm->bwd_attn_time_factor * nl + r) * per_layer : nl * per_layer;
            double eff = attn_eff ? attn_eff[i] : slice_attention_efficiency(cm, cp_degree, &slices[i]);
            out->attention_time += f / (peak * eff);
        }
    }
    out->tp_comm_time = lt_cost_tp_comm_time(cm, local, lt_cost_tp_collectives(cm, op, local));
    /* CP ring: forward one K/V pass per layer, backward two (K/V again, then dK/dV) plus the
     * forward pass of its recomputed layers; each pass carries the context's K/V with the
     * op's own (ring_tokens); hidden behind the attention it feeds */
    if (attn && cp_degree > 1) {
        out->cp_ring_time =
            cp_ring_time(cm, cp_degree, ring_tokens(slices, n) / cp, backward ? 2.0 * nl + r : nl);
        double exposed = out->cp_ring_time - out->attention_time;
        out->cp_comm_time = exposed > 0 ? exposed : 0.0;
    }
    out->cost.time = out->gemm_time + out->attention_time + out->tp_comm_time;
    if (out->cp_comm_time > 0) out->cost.time += out->cp_comm_time;

    /* memory */
    double vocab_local = (double)cm->model.vocab / cm->tp;
    double full_layer = local * lt_cost_act_bytes_per_token(cm, part, false, false);
    /* the head's logits while the loss runs, on the ops over the head; a fused head
     * (logit_bytes 0: the CPU trainer's) makes and consumes them in its F, one block of rows
     * at a time (lib/model.h, lt_fused_head_rows: 32 MiB in fp32 once a unit has the rows) */
    double logits = 0;
    if (head && cm->logit_bytes > 0) logits = local * vocab_local * cm->act_bytes;
    else if (head && kind == LT_OP_F)
        logits = fmin(local, (double)lt_fused_head_rows(cm->model.vocab)) * vocab_local * cm->act_bytes;
    /* a B whose rows come from several forward units (an asymmetric schedule, SlimPack
     * 4.1.2) copies them a layer at a time into a one-layer window before that layer's
     * backward (the trainer's lt_acts_alloc_window), beside the layer's gradients: one more
     * layer, unless it recomputes every layer of its range (from their gathered inputs) */
    double window = gathered && r < nl ? full_layer : 0.0;
    if (kind == LT_OP_F) {
        double act = 0;
        for (size_t i = 0; i < n; i++) {
            bool sep = attn && slice_kv_tokens(op, &slices[i], keeps_kv && keeps_kv[i]) > 0; /* (K/V held apart) */
            act += slice_tokens(&slices[i]) / cp *
                   ((nl - r) * lt_cost_act_bytes_per_token(cm, part, false, sep) +
                    r * lt_cost_act_bytes_per_token(cm, part, true, sep));
        }
        /* the head keeps the final norm's and its own input and the loss's softmax
         * (logit_bytes per vocab entry: 4, fp32; 0 for a fused head) */
        if (head) act += local * (2.0 * hq(cm) * cm->act_bytes + vocab_local * cm->logit_bytes);
        /* an attention away from its pre-attention's stage keeps the Q/K/V weights it came with */
        if (qkv_sent(cm, op, stage)) act += nl * qkv_params(cm) * cm->weight_bytes;
        out->cost.act_bytes = act;
    }
    if (!backward && attn) out->cost.kv_bytes = kv_tokens / cp * nl * lt_cost_kv_bytes_per_token(cm);
    if (!backward && attn) out->cost.kv_in_bytes = kv_in_tokens / cp * nl * lt_cost_kv_bytes_per_token(cm);
    /* a backward's gradients of one layer (the MLP's for a chunk's rows when chunked), and with
     * recompute the recomputed layer's arrays (a post-attention's MLP arrays for a chunk's rows
     * when chunked: lt_acts_part_scratch; a whole layer's recomputed forward keeps its rows) */
    double grads = full_layer, recomputed = full_layer;
    /* a layer part's backward holds the part gradients (lt_part_grads: the residual's, the first
     * norm's output's and the attention output's, 3q) beside its own arrays: an attention's dQ,
     * dK and dV; a pre-attention's input gradient for the layer before (none at layer 0, whose
     * goes to the embedding); a post-attention's the MLP's, as its activations count them */
    if (backward && part == LT_PART_ATTN) grads = local * (4.0 * hq(cm) + 2.0 * kv_local(cm)) * cm->act_bytes;
    if (backward && part == LT_PART_PRE) grads = local * (op->layer_begin > 0 ? 4.0 : 3.0) * hq(cm) * cm->act_bytes;
    bool has_mlp = part == LT_PART_ALL || part == LT_PART_POST;
    if (has_mlp && mlp_chunked(cm, local)) {
        double dropped = (local - (double)cm->mlp_chunk) * mlp_elems(cm) * cm->act_bytes;
        grads -= dropped;
        if (part == LT_PART_POST) recomputed -= dropped;
    }
    if (kind == LT_OP_F) out->cost.work_bytes = (r > 0 ? recomputed : 0.0) + logits;
    else if (kind == LT_OP_FK) out->cost.work_bytes = full_layer + logits;
    else out->cost.work_bytes = grads + (r > 0 ? recomputed : 0.0) + window + logits;
    /* ... whose backward makes their gradients into a buffer of its own, then sends them */
    if (backward && qkv_sent(cm, op, stage)) out->cost.work_bytes += nl * qkv_params(cm) * cm->grad_bytes;

    /* P2P payload: nothing after the model's end (forward) or before its start (backward) */
    bool edge = backward ? op_starts_model(op) : head;
    if (!edge) out->cost.out_bytes = local * out_elems(cm, op) * cm->act_bytes + out_weight_bytes(cm, op);
}

void lt_cost_op(const lt_cost_model *cm, const lt_slice *slices, size_t n, const bool *keeps_kv, const lt_op *op,
                lt_op_estimate *out) {
    cost_op(cm, cm->cp, slices, n, keeps_kv, NULL, op, false, -1, out);
}

/* Whether slice table v[0..n) holds a later entry of entry g's sample (entries of one sample
 * are in token order in the table, plans/schedule/schedule.h, so only later entries can be). */
static bool has_later_slice(const lt_slice *v, size_t n, size_t g) {
    for (size_t j = g + 1; j < n; j++)
        if (v[j].sample == v[g].sample && v[j].begin >= v[g].end) return true;
    return false;
}

/* Whether a backward unit of asymmetric schedule s starts strictly inside forward slice
 * f: a bslice of f's sample begins in (f.begin, f.end). Its B then attends to the keys and
 * values of f's tokens before that cut, which its own recompute does not make, and adds
 * their dK/dV (issue 16 point 4; docs/cost-model.md, "Backward cuts inside a slice"). */
static bool has_interior_bcut(const lt_schedule *s, const lt_slice *f) {
    if (!s->asym) return false;
    for (size_t j = 0; j < s->n_bslices; j++) {
        const lt_slice *b = &s->bslices[j];
        if (b->sample == f->sample && b->begin > f->begin && b->begin < f->end) return true;
    }
    return false;
}

/* The K/V flags of a slice table v[0..n) from its order by sample (a new array, freed
 * here): a slice keeps its keys/values unless it is its sample's last (token order). A new
 * array of n flags (at least one). */
static bool *table_keeps_kv(const lt_slice *v, size_t n, uint32_t *order) {
    bool *keeps = lt_calloc_check(n ? n : 1, sizeof *keeps);
    for (size_t i = 0; i + 1 < n; i++) keeps[order[i]] = v[order[i + 1]].sample == v[order[i]].sample;
    free(order);
    return keeps;
}

/* has_interior_bcut for every forward slice of s at once, setting keeps[i] where it holds:
 * one merge of the slices and bslices in (sample, token) order, O(S + B) after the sorts
 * (both tables' entries of one sample are disjoint and in token order, schedule.h). */
static void mark_interior_bcuts(const lt_schedule *s, bool *keeps) {
    if (!s->asym || !s->n_slices || !s->n_bslices) return;
    uint32_t *fo = lt_schedule_slices_by_sample(s), *bo = lt_schedule_bslices_by_sample(s);
    size_t j = 0;
    for (size_t i = 0; i < s->n_slices; i++) {
        const lt_slice *f = &s->slices[fo[i]];
        while (j < s->n_bslices) {
            const lt_slice *b = &s->bslices[bo[j]];
            if (b->sample > f->sample || (b->sample == f->sample && b->begin > f->begin)) break;
            j++;
        }
        if (j < s->n_bslices) {
            const lt_slice *b = &s->bslices[bo[j]];
            if (b->sample == f->sample && b->begin < f->end) keeps[fo[i]] = true;
        }
    }
    free(fo);
    free(bo);
}

/* The prepared tables of one slice table: keys/values flags and efficiencies, or NULL (the
 * scanning bridge). */
typedef struct prepared_table {
    const bool *keeps_kv;
    const double *attn_eff;
} prepared_table;

/* lt_cost_op for op of s at its unit's context-parallel degree, over the slices it runs
 * (lt_schedule_op_slices: a B of an asymmetric schedule runs its bunit's bslices), the
 * keys/values flags and attention efficiencies of that slice table from `tab` (indexed by
 * slice) or, when NULL, found by scanning and looking up. */
static void schedule_op(const lt_cost_model *cm, const lt_schedule *s, const prepared_table *tab, int stage,
                        const lt_op *op, lt_op_estimate *out) {
    if (s->layers != cm->model.layers) /* a programming error: the head would be misplaced */
        lt_die("schedule of %d layers priced with a model of %d layers", s->layers, cm->model.layers);
    const lt_unit *u = lt_schedule_op_unit(s, op);
    bool bwd_table = s->asym && op->kind == LT_OP_B;
    size_t n, n_table = bwd_table ? s->n_bslices : s->n_slices;
    const lt_slice *slices = lt_schedule_op_slices(s, op, &n), *table = bwd_table ? s->bslices : s->slices;
    int cp = unit_cp(cm, u);
    const double *ueff = tab ? tab->attn_eff + u->first_slice : NULL;
    if (tab) { /* the flags of every op's slices (a B's cost does not depend on them) */
        cost_op(cm, cp, slices, n, tab->keeps_kv + u->first_slice, ueff, op, bwd_table, stage, out);
        return;
    }
    if (op->kind == LT_OP_B || !op_has_attention(op)) { /* keys/values only matter to forwards over attention */
        cost_op(cm, cp, slices, n, NULL, ueff, op, bwd_table, stage, out);
        return;
    }
    bool local[64] = {false};
    bool *keeps = n <= 64 ? local : lt_malloc_check(n * sizeof *keeps);
    for (size_t i = 0; i < n; i++)
        keeps[i] = has_later_slice(table, n_table, u->first_slice + i) || has_interior_bcut(s, &slices[i]);
    cost_op(cm, cp, slices, n, keeps, ueff, op, false, stage, out);
    if (keeps != local) free(keeps);
}

void lt_cost_schedule_op(const lt_cost_model *cm, const lt_schedule *s, const lt_op *op, lt_op_estimate *out) {
    schedule_op(cm, s, NULL, -1, op, out);
}

/* ------------------------------------------------------------------ the simulator bridge */

static void sim_op_cost(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    lt_op_estimate est;
    schedule_op(ctx, s, NULL, stage, op, &est);
    *out = est.cost;
}

static double sim_p2p_time(void *ctx, int from, int to, double bytes) { return lt_cost_p2p_time(ctx, from, to, bytes); }

static double sim_base_bytes(void *ctx, int stage) {
    const lt_cost_model *cm = ctx;
    return lt_cost_model_states_bytes(cm, stage) + cm->reserved_bytes;
}

/* The profile's contention (plans/schedule/sim.h, "Contention") and who shares a node: ranks
 * ordered TP, PP, DP, so a stage's op runs on its tp ranks, on the node with those of
 * max(1, min(dp, gpus_per_node / (tp x pp))) DP replicas (one pipeline's ranks fill a node
 * before the next's begin), beside the other stages of stages_per_node. */
static void with_contention(const lt_cost_model *cm, lt_sim_costs *c) {
    c->contention = cm->hw.compute_contention;
    int per_pipe = cm->tp * cm->pp, gpn = cm->hw.gpus_per_node;
    int replicas = per_pipe > 0 && gpn >= per_pipe ? gpn / per_pipe : 1;
    if (replicas > cm->dp) replicas = cm->dp;
    c->lockstep = cm->tp * (replicas > 1 ? replicas : 1);
    c->stages_per_node = cm->stages_per_node;
}

lt_sim_costs lt_cost_sim_costs(const lt_cost_model *cm) {
    lt_sim_costs c = {.ctx = (void *)(uintptr_t)cm, .op_cost = sim_op_cost, .p2p_time = sim_p2p_time,
                      .base_bytes = sim_base_bytes};
    with_contention(cm, &c);
    return c;
}

/* The prepared bridge: the same callbacks with an lt_cost_sim_ctx as context. */
static void prepared_op_cost(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    const lt_cost_sim_ctx *c = ctx;
    lt_op_estimate est;
    bool fresh = s == c->s && s->n_slices == c->n_slices && s->n_bslices == c->n_bslices;
    prepared_table tab = {c->keeps_kv, c->attn_eff};
    if (s->asym && op->kind == LT_OP_B) tab = (prepared_table){c->bkeeps_kv, c->battn_eff};
    schedule_op(c->cm, s, fresh ? &tab : NULL, stage, op, &est);
    *out = est.cost;
}

static double prepared_p2p_time(void *ctx, int from, int to, double bytes) {
    return lt_cost_p2p_time(((const lt_cost_sim_ctx *)ctx)->cm, from, to, bytes);
}

static double prepared_base_bytes(void *ctx, int stage) {
    return sim_base_bytes((void *)(uintptr_t)((const lt_cost_sim_ctx *)ctx)->cm, stage);
}

/* The attention efficiencies of a slice table v[0..n), each slice's at the degree of the unit
 * holding it (the model's cp when none does; a slice in several units, which the simulator
 * rejects, at the last one's). A new array (at least one entry). */
static double *table_attn_eff(const lt_cost_model *cm, const lt_slice *v, size_t n, const lt_unit *units,
                              size_t n_units) {
    double *eff = lt_malloc_check((n ? n : 1) * sizeof *eff);
    for (size_t i = 0; i < n; i++) eff[i] = slice_attention_efficiency(cm, cm->cp, &v[i]);
    for (size_t u = 0; u < n_units; u++) {
        int cp = unit_cp(cm, &units[u]);
        if (cp == cm->cp) continue;
        for (size_t i = units[u].first_slice; i < (size_t)units[u].first_slice + units[u].n_slices && i < n; i++)
            eff[i] = slice_attention_efficiency(cm, cp, &v[i]);
    }
    return eff;
}

lt_sim_costs lt_cost_sim_costs_prepared(lt_cost_sim_ctx *ctx, const lt_cost_model *cm, const lt_schedule *s) {
    free(ctx->keeps_kv);
    free(ctx->attn_eff);
    free(ctx->bkeeps_kv);
    free(ctx->battn_eff);
    ctx->cm = cm;
    ctx->s = s;
    ctx->n_slices = s->n_slices;
    ctx->n_bslices = s->n_bslices;
    ctx->keeps_kv = table_keeps_kv(s->slices, s->n_slices, lt_schedule_slices_by_sample(s));
    mark_interior_bcuts(s, ctx->keeps_kv);
    ctx->attn_eff = table_attn_eff(cm, s->slices, s->n_slices, s->units, s->n_units);
    ctx->bkeeps_kv = table_keeps_kv(s->bslices, s->n_bslices, lt_schedule_bslices_by_sample(s));
    ctx->battn_eff = table_attn_eff(cm, s->bslices, s->n_bslices, s->bunits, s->n_bunits);
    lt_sim_costs c = {.ctx = ctx, .op_cost = prepared_op_cost, .p2p_time = prepared_p2p_time,
                      .base_bytes = prepared_base_bytes};
    with_contention(cm, &c);
    return c;
}

void lt_cost_sim_ctx_free(lt_cost_sim_ctx *ctx) {
    if (!ctx) return;
    free(ctx->keeps_kv);
    free(ctx->attn_eff);
    free(ctx->bkeeps_kv);
    free(ctx->battn_eff);
    memset(ctx, 0, sizeof *ctx);
}

/* ------------------------------------------------------------------ the step's lower bound */

/* The best fraction of curve c for at most `tokens` tokens: its largest point there, or its
 * value at `tokens` (the curve is linear between points, so the maximum is one of them). */
static double best_efficiency(const lt_efficiency_curve *c, double tokens) {
    double best = lt_hardware_efficiency(c, tokens);
    for (int i = 0; i < c->n; i++)
        if (c->tokens[i] <= tokens && c->fraction[i] > best) best = c->fraction[i];
    return best;
}

/* The fewest layers of a stage of `ls` layers that a sample of T tokens alone in flight must
 * recompute to fit the cap on the fullest stage (ls if even that does not fit: context
 * parallelism then, whose compute is the same). */
static int forced_recompute(const lt_cost_model *cm, double T, int ls) {
    double states = 0;
    for (int s = 0; s < cm->pp; s++) {
        double b = lt_cost_model_states_bytes(cm, s);
        if (b > states) states = b;
    }
    double full = lt_cost_act_bytes_per_token(cm, LT_PART_ALL, false, false);
    double kept = lt_cost_act_bytes_per_token(cm, LT_PART_ALL, true, false);
    for (int r = 0; r < ls; r++)
        if (states + cm->reserved_bytes + T * ((ls - r) * full + r * kept) <= cm->mem_cap) return r;
    return ls;
}

double lt_cost_step_bound(const lt_cost_model *cm, const int64_t *lengths, size_t n, int64_t context_len) {
    double peak = cm->hw.peak_flops, L = (double)cm->model.layers;
    double eg = best_efficiency(&cm->hw.gemm, (double)context_len);
    double eh = cm->hw.head.n > 0 ? best_efficiency(&cm->hw.head, (double)context_len) : eg;
    int ls = (cm->model.layers + cm->pp - 1) / cm->pp;
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        double T = (double)lengths[i];
        if (!(T > 0)) continue;
        double ea = lt_hardware_efficiency(&cm->hw.attention, T);
        double lin = L * linear_flops(cm, 1, LT_PART_ALL, T) / (peak * eg); /* one forward, seconds */
        double head = head_flops(cm, 1, T) / (peak * eh);
        double att = L * attention_flops(cm, 1, 0.0, T) / (peak * ea);
        double fwd = lin + head + att;
        double bwd = cm->bwd_gemm_time_factor * (lin + head) + cm->bwd_attn_time_factor * att;
        double rc = (double)forced_recompute(cm, T, ls) * cm->pp / L * (lin + att);
        total += fwd + bwd + rc;
    }
    return total / ((double)cm->dp * cm->pp);
}
