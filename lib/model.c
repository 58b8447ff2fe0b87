/*
 * lib/model.c — model presets, validation, parameter count, forward FLOPs (lib/model.h).
 */
#include "lib/model.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config.h" /* lt_config_get_*, lt_config_is_set */
#include "lib/files.h"  /* lt_read_file, lt_vocab_find */
#include "lib/json.h"   /* lt_json_parse, lt_jv_* */

/*
 * The presets. Sources, per row (the vocab column is the source's: lt_model_from_config
 * replaces it by data.encoding's size unless model.vocab is set, lib/model.h, so a preset
 * trains on any of our shards):
 *
 *  tiny        our own CPU-sized shape (SwiGLU inner 4*hidden); vocab 100277 = cl100k_base,
 *              the default [data] encoding.
 *  nano        the trainer's test model: 2 layers, hidden 64, GQA 4/2 heads, SwiGLU 192
 *              (tests override vocab to keep the LM head small); cl100k_base vocab.
 *  small       the trainer's benchmark model: ~22M parameters (8 layers, hidden 256, GQA
 *              8/4, SwiGLU 704, untied 32,000 vocab).
 *  llama-*     SlimPack Table 3 ("Model specifications": #heads, #groups, hidden dim,
 *              FFN dim, #Layers); SlimPack 6.1: "GQA is applied to the 70B and 150B
 *              models", "a 32,000 sized vocabulary". "#groups" = the key/value heads.
 *              SwiGLU MLP (LLaMA-style dense models).
 *  gpt-*       GPT-3-style (HelixPipe 5.1 "the standard GPT-3"; InfiniPipe 5.1 "GPT-series
 *              models (7B, 13B, 30B)"). HelixPipe Table 3 gives layers/heads/hidden of
 *              1.3B (24/16/2048), 3B (16/32/4096) and 7B (32/32/4096). InfiniPipe gives no
 *              dimensions: ASSUMED gpt-7b = HelixPipe's 7B (= GPT-3 6.7B), gpt-13b = GPT-3
 *              13B (40 layers, 40 heads, hidden 5120, which InfiniPipe Fig. 12 also uses),
 *              gpt-30b = the usual 30B GPT shape (OPT-30B: 48 layers, 56 heads, 7168).
 *              ASSUMED for all: plain GELU MLP with ffn = 4*hidden (GPT-3; HelixPipe
 *              Table 1's 8bsh^2 per MLP linear), multi-head attention (kv = heads), and
 *              vocab 50257 (GPT-2 BPE; HelixPipe 4.6 "around 50k for a typical GPT").
 *  qwen2.5-*   the published Qwen2.5 configs (config.json of Qwen/Qwen2.5-{7B,14B,32B,72B}:
 *              num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads,
 *              intermediate_size, vocab_size 152064); SwiGLU, GQA.
 */
static const lt_model_shape presets[] = {
    /* name           layers hidden heads kv  ffn    vocab   gated (rope_theta, norm_eps, tied: defaults), family
     *                (Qwen2.5: Q/K/V biases), RoPE scaling (none) */
    {"tiny",          4,     256,   4,    4,  1024,  100277, 1, 0, 0, 0, LT_FAMILY_LLAMA, LT_ROPE_NONE, 0, 0, 0, 0},
    {"nano",          2,     64,    4,    2,  192,   100277, 1, 0, 0, 0, LT_FAMILY_LLAMA, LT_ROPE_NONE, 0, 0, 0, 0},
    {"small",         8,     256,   8,    4,  704,   32000,  1, 0, 0, 0, LT_FAMILY_LLAMA, LT_ROPE_NONE, 0, 0, 0, 0},
    /* SlimPack Table 3 */
    {"llama-7b",      32,    4096,  32,   32, 11008, 32000,  1, 0, 0, 0, LT_FAMILY_LLAMA, LT_ROPE_NONE, 0, 0, 0, 0},
    {"llama-13b",     40,    5120,  40,   40, 13824, 32000,  1, 0, 0, 0, LT_FAMILY_LLAMA, LT_ROPE_NONE, 0, 0, 0, 0},
    {"llama-70b",     80,    8192,  64,   8,  28672, 32000,  1, 0, 0, 0, LT_FAMILY_LLAMA, LT_ROPE_NONE, 0, 0, 0, 0},
    {"llama-150b",    96,    12288, 96,   8,  32768, 32000,  1, 0, 0, 0, LT_FAMILY_LLAMA, LT_ROPE_NONE, 0, 0, 0, 0},
    /* InfiniPipe 5.1 GPT-series (dims assumed, see above); gpt-7b = HelixPipe Table 3 7B */
    {"gpt-7b",        32,    4096,  32,   32, 16384, 50257,  0, 0, 0, 0, LT_FAMILY_LLAMA, LT_ROPE_NONE, 0, 0, 0, 0},
    {"gpt-13b",       40,    5120,  40,   40, 20480, 50257,  0, 0, 0, 0, LT_FAMILY_LLAMA, LT_ROPE_NONE, 0, 0, 0, 0},
    {"gpt-30b",       48,    7168,  56,   56, 28672, 50257,  0, 0, 0, 0, LT_FAMILY_LLAMA, LT_ROPE_NONE, 0, 0, 0, 0},
    /* published Qwen2.5 configs */
    {"qwen2.5-7b",    28,    3584,  28,   4,  18944, 152064, 1, 0, 0, 0, LT_FAMILY_QWEN2, LT_ROPE_NONE, 0, 0, 0, 0},
    {"qwen2.5-14b",   48,    5120,  40,   8,  13824, 152064, 1, 0, 0, 0, LT_FAMILY_QWEN2, LT_ROPE_NONE, 0, 0, 0, 0},
    {"qwen2.5-32b",   64,    5120,  40,   8,  27648, 152064, 1, 0, 0, 0, LT_FAMILY_QWEN2, LT_ROPE_NONE, 0, 0, 0, 0},
    {"qwen2.5-72b",   80,    8192,  64,   8,  29568, 152064, 1, 0, 0, 0, LT_FAMILY_QWEN2, LT_ROPE_NONE, 0, 0, 0, 0},
    /* HelixPipe Table 3 (ffn and vocab assumed, see above) */
    {"gpt-1.3b",      24,    2048,  16,   16, 8192,  50257,  0, 0, 0, 0, LT_FAMILY_LLAMA, LT_ROPE_NONE, 0, 0, 0, 0},
    {"gpt-3b",        16,    4096,  32,   32, 16384, 50257,  0, 0, 0, 0, LT_FAMILY_LLAMA, LT_ROPE_NONE, 0, 0, 0, 0},
};

#define N_PRESETS (sizeof presets / sizeof presets[0])

const lt_model_shape *lt_model_preset(const char *name) {
    if (name == NULL) return NULL;
    for (size_t i = 0; i < N_PRESETS; i++)
        if (strcmp(presets[i].name, name) == 0) return &presets[i];
    return NULL;
}

size_t lt_model_n_presets(void) { return N_PRESETS; }

const lt_model_shape *lt_model_preset_at(size_t i) { return i < N_PRESETS ? &presets[i] : NULL; }

static lt_status invalid(const lt_model_shape *m, lt_error *err, const char *what) {
    lt_status st = lt_fail(err, LT_ERR_CONFIG, "[model]", "%s", what);
    if (m->name != NULL)
        lt_error_hint(err, "check the dimensions given for model '%s' (preset or [model] keys)", m->name);
    return st;
}

lt_status lt_model_validate(const lt_model_shape *m, lt_error *err) {
    if (m == NULL) return lt_fail(err, LT_ERR_INTERNAL, NULL, "no model shape given");
    struct { const char *key; int v; } dims[] = {
        {"layers", m->layers}, {"hidden", m->hidden}, {"heads", m->heads},
        {"kv_heads", m->kv_heads}, {"ffn", m->ffn}, {"vocab", m->vocab},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (dims[i].v <= 0) {
            char what[128];
            snprintf(what, sizeof what, "%s must be positive, got %d", dims[i].key, dims[i].v);
            return invalid(m, err, what);
        }
    }
    char what[160];
    if (m->hidden % m->heads != 0) {
        snprintf(what, sizeof what, "heads (%d) must divide hidden (%d)", m->heads, m->hidden);
        return invalid(m, err, what);
    }
    if (m->heads % m->kv_heads != 0) {
        snprintf(what, sizeof what, "kv_heads (%d) must divide heads (%d)", m->kv_heads, m->heads);
        return invalid(m, err, what);
    }
    if (m->gated_ffn != 0 && m->gated_ffn != 1) {
        snprintf(what, sizeof what, "gated_ffn must be 0 or 1, got %d", m->gated_ffn);
        return invalid(m, err, what);
    }
    if (!lt_model_family_name(m->family)) {
        snprintf(what, sizeof what, "unknown model family %d", m->family);
        return invalid(m, err, what);
    }
    if (m->rope_scaling != LT_ROPE_NONE && m->rope_scaling != LT_ROPE_LLAMA3) {
        snprintf(what, sizeof what, "unknown RoPE scaling %d", m->rope_scaling);
        return invalid(m, err, what);
    }
    if (m->rope_scaling == LT_ROPE_LLAMA3 &&
        !(isfinite(m->rope_factor) && m->rope_factor > 0 && isfinite(m->rope_low_freq_factor) &&
          m->rope_low_freq_factor > 0 && isfinite(m->rope_high_freq_factor) &&
          m->rope_high_freq_factor > m->rope_low_freq_factor && m->rope_original_max_pos > 0)) {
        snprintf(what, sizeof what,
                 "llama3 RoPE scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
                 "original_max_pos > 0 (got %g, %g, %g, %d)",
                 m->rope_factor, m->rope_low_freq_factor, m->rope_high_freq_factor, m->rope_original_max_pos);
        return invalid(m, err, what);
    }
    return LT_OK;
}

/* ------------------------------------------------------------------ families and RoPE */

static const char *const FAMILY_NAMES[LT_N_FAMILIES] = {"llama", "mistral", "qwen2"};

const char *lt_model_family_name(int family) {
    return family >= 0 && family < LT_N_FAMILIES ? FAMILY_NAMES[family] : NULL;
}

int lt_model_family_of(const char *name) {
    for (int f = 0; name && f < LT_N_FAMILIES; f++)
        if (strcmp(name, FAMILY_NAMES[f]) == 0) return f;
    return -1;
}

int lt_model_qkv_bias(const lt_model_shape *m) { return m->family == LT_FAMILY_QWEN2; }

/* transformers' _compute_default_rope_parameters and _compute_llama3_parameters
 * (modeling_rope_utils.py) in fp32, operation for operation: torch evaluates a float32
 * tensor against a Python number in float32, so the scalars are rounded to float first. */
void lt_model_rope_inv_freq(const lt_model_shape *m, int head_dim, float *inv_freq) {
    float theta = (float)lt_model_rope_theta(m);
    for (int i = 0; i < head_dim / 2; i++) {
        float e = (float)(2 * i) / (float)head_dim;
        inv_freq[i] = 1.0f / powf(theta, e);
    }
    if (m->rope_scaling != LT_ROPE_LLAMA3) return;
    double old_len = m->rope_original_max_pos;
    float factor = (float)m->rope_factor, low = (float)m->rope_low_freq_factor;
    float low_wavelen = (float)(old_len / m->rope_low_freq_factor);
    float high_wavelen = (float)(old_len / m->rope_high_freq_factor);
    float span = (float)(m->rope_high_freq_factor - m->rope_low_freq_factor);
    for (int i = 0; i < head_dim / 2; i++) {
        float f = inv_freq[i];
        float wavelen = (float)(2.0 * M_PI) / f;
        if (wavelen > low_wavelen) {
            inv_freq[i] = f / factor; /* long wavelengths: slowed by the factor */
        } else if (!(wavelen < high_wavelen)) { /* between: interpolated */
            float smooth = ((float)old_len / wavelen - low) / span;
            inv_freq[i] = (1.0f - smooth) * f / factor + smooth * f;
        } /* short wavelengths: kept */
    }
}

/* ------------------------------------------------------------------ encodings */

/* The shipped encodings' sizes (data/vocab; lib/model.h says why they are compiled in). */
static const struct {
    const char *name;
    int n_vocab;
} SHIPPED_ENCODINGS[] = {{"r50k_base", 50257}, {"cl100k_base", 100277}, {"o200k_base", 200019}};

/* Largest rank + 1 of a rank file (lines "BASE64 RANK"; blank lines skipped, as the
 * tokenizer does; the tokenizer checks the rest when it loads the file). */
static lt_status ranks_n_vocab(const char *path, int64_t *n, lt_error *err) {
    char *data;
    size_t size;
    lt_status st = lt_read_file(path, &data, &size, err);
    if (st != LT_OK) return st;
    *n = 0;
    size_t line = 0;
    for (size_t pos = 0; pos < size && st == LT_OK; line++) {
        const char *nl = memchr(data + pos, '\n', size - pos);
        size_t e = nl ? (size_t)(nl - data) : size, next = nl ? e + 1 : size;
        if (e > pos && data[e - 1] == '\r') e--;
        if (e > pos) {
            const char *sp = memrchr(data + pos, ' ', e - pos);
            char *end = NULL;
            long long r = sp ? strtoll(sp + 1, &end, 10) : -1;
            if (!sp || end != data + e || r < 0 || r >= INT_MAX) {
                char where[4200];
                snprintf(where, sizeof where, "%s:%zu", path, line + 1);
                st = lt_fail(err, LT_ERR_INPUT, where, "expected 'BASE64 RANK'");
            } else if (r + 1 > *n) {
                *n = r + 1;
            }
        }
        pos = next;
    }
    free(data);
    return st;
}

/* The largest special-token id + 1 of a sidecar (0 without "special_tokens"). */
static lt_status specials_n_vocab(const char *path, int64_t *n, lt_error *err) {
    char *data;
    size_t size;
    lt_status st = lt_read_file(path, &data, &size, err);
    if (st != LT_OK) return st;
    lt_jv *doc = NULL;
    st = lt_json_parse(data, size, &doc, err);
    free(data);
    if (st != LT_OK) {
        lt_error_prefix(err, "%s: ", path);
        return st;
    }
    const lt_jv *sp = lt_jv_get(doc, "special_tokens");
    *n = 0;
    if (doc->type != LT_JV_OBJECT)
        st = lt_fail(err, LT_ERR_INPUT, path, "expected a JSON object, found %s", lt_jv_type_name(doc->type));
    else if (sp && sp->type != LT_JV_OBJECT)
        st = lt_fail(err, LT_ERR_INPUT, path, "\"special_tokens\" is %s, expected an object of text: id",
                     lt_jv_type_name(sp->type));
    for (size_t k = 0; st == LT_OK && sp && k < sp->n; k++) {
        int64_t id;
        if (!lt_jv_int64(&sp->items[k], &id) || id < 0 || id >= INT_MAX) {
            char where[4200];
            snprintf(where, sizeof where, "%s:%zu:%zu", path, sp->items[k].line, sp->items[k].column);
            st = lt_fail(err, LT_ERR_INPUT, where, "special token '%s': the id is not an integer in [0, %d)",
                         sp->keys[k], INT_MAX);
        } else if (id + 1 > *n) {
            *n = id + 1;
        }
    }
    lt_jv_free(doc);
    return st;
}

lt_status lt_encoding_n_vocab(const char *name, const char *vocab_dir, int *n_vocab, lt_error *err) {
    for (size_t i = 0; i < sizeof SHIPPED_ENCODINGS / sizeof SHIPPED_ENCODINGS[0]; i++)
        if (strcmp(SHIPPED_ENCODINGS[i].name, name) == 0) {
            *n_vocab = SHIPPED_ENCODINGS[i].n_vocab;
            return LT_OK;
        }
    char *vocab, *json;
    lt_status st = lt_vocab_find(name, vocab_dir, &vocab, &json, err);
    int64_t ranks = 0, specials = 0;
    if (st == LT_OK) st = ranks_n_vocab(vocab, &ranks, err);
    if (st == LT_OK) st = specials_n_vocab(json, &specials, err);
    if (st == LT_OK && ranks == 0) st = lt_fail(err, LT_ERR_INPUT, vocab, "the rank file has no tokens");
    if (st == LT_OK) *n_vocab = (int)(ranks > specials ? ranks : specials);
    free(vocab);
    free(json);
    return st;
}

/* m->vocab from data.encoding (lib/model.h): its size when model.vocab is not `explicit`,
 * else checked against it. */
static lt_status vocab_of_encoding(const lt_config *cfg, bool explicit, lt_model_shape *m, lt_error *err) {
    const char *enc = lt_config_get_string(cfg, "data", "encoding");
    if (!enc) return LT_OK; /* no encoding at all (a schema without its default): the preset's */
    lt_error why;
    int n = 0;
    lt_status st = lt_encoding_n_vocab(enc, lt_config_get_string(cfg, "data", "vocab_dir"), &n, &why);
    if (explicit) {
        if (st != LT_OK || m->vocab >= n) return LT_OK;
        lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, "model", "vocab"),
                "model.vocab = %d is smaller than the vocabulary of data.encoding = %s (%d ids)", m->vocab, enc, n);
        lt_error_hint(err, "leave model.vocab unset (it defaults to data.encoding's size) or set it to %d or more", n);
        return LT_ERR_CONFIG;
    }
    if (st != LT_OK) {
        lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, "data", "encoding"),
                "model.vocab is unset and the size of data.encoding = %s is unknown: %s%s%s", enc,
                why.where[0] ? why.where : "", why.where[0] ? ": " : "", why.what);
        lt_error_hint(err, "set data.vocab_dir (or LONGTAIL_VOCAB_DIR) to the directory with %s.tiktoken and %s.json, "
                      "or set model.vocab", enc, enc);
        return LT_ERR_CONFIG;
    }
    m->vocab = n;
    return LT_OK;
}

/* ------------------------------------------------------------------ the config's model */

lt_status lt_model_from_config(const lt_config *cfg, const char *name_override, lt_model_shape *m,
                               lt_error *err) {
    const char *preset = name_override ? name_override : lt_config_get_string(cfg, "model", "preset");
    static const char *const keys[] = {"layers", "hidden", "heads", "kv_heads", "ffn", "vocab"};
    bool any_dim = false;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) any_dim |= lt_config_is_set(cfg, "model", keys[k]);
    if (!preset && !any_dim) preset = "llama-7b";
    memset(m, 0, sizeof *m);
    if (preset) {
        const lt_model_shape *p = lt_model_preset(preset);
        if (!p) {
            lt_status st = lt_fail(err, LT_ERR_USAGE, name_override ? "--model" : "model.preset",
                                   "unknown model '%s'", preset);
            char list[1024] = "";
            for (size_t i = 0; i < N_PRESETS; i++) {
                size_t l = strlen(list);
                snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", presets[i].name);
            }
            lt_error_hint(err, "presets: %s", list);
            return st;
        }
        *m = *p;
    } else {
        m->name = "custom";
        m->gated_ffn = 1;
    }
    if (!name_override) { /* the config's dimensions override the preset's */
        int *fields[] = {&m->layers, &m->hidden, &m->heads, &m->kv_heads, &m->ffn, &m->vocab};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            int64_t v;
            if (!lt_config_is_set(cfg, "model", keys[k]) || lt_config_get_int(cfg, "model", keys[k], &v, NULL) != LT_OK)
                continue;
            if (v > INT_MAX)
                return lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, "model", keys[k]),
                               "model.%s = %" PRId64 " is too large (at most %d)", keys[k], v, INT_MAX);
            *fields[k] = (int)v;
        }
        if (m->kv_heads == 0) m->kv_heads = m->heads;
        if (any_dim && preset) m->name = "custom";
    }
    lt_status st = vocab_of_encoding(cfg, !name_override && lt_config_is_set(cfg, "model", "vocab"), m, err);
    if (st != LT_OK) return st;
    double d;
    if (lt_config_is_set(cfg, "model", "rope_theta") &&
        lt_config_get_double(cfg, "model", "rope_theta", &d, err) == LT_OK)
        m->rope_theta = d;
    if (lt_config_is_set(cfg, "model", "norm_eps") && lt_config_get_double(cfg, "model", "norm_eps", &d, err) == LT_OK)
        m->norm_eps = d;
    bool tie = false;
    if (lt_config_is_set(cfg, "model", "tie_embeddings") &&
        lt_config_get_bool(cfg, "model", "tie_embeddings", &tie, err) == LT_OK)
        m->tie_embeddings = tie ? 1 : 0;
    /* family and RoPE scaling: a preset's unless set (the schema checked the names) */
    const char *family = lt_config_is_set(cfg, "model", "family") ? lt_config_get_string(cfg, "model", "family") : NULL;
    if (family && lt_model_family_of(family) >= 0) m->family = lt_model_family_of(family);
    const char *scaling =
        lt_config_is_set(cfg, "model", "rope_scaling") ? lt_config_get_string(cfg, "model", "rope_scaling") : NULL;
    if (scaling && strcmp(scaling, "none") == 0) m->rope_scaling = LT_ROPE_NONE;
    if (scaling && strcmp(scaling, "llama3") == 0) {
        int64_t orig = 0;
        m->rope_scaling = LT_ROPE_LLAMA3;
        lt_status gs = lt_config_get_double(cfg, "model", "rope_factor", &m->rope_factor, err);
        if (gs == LT_OK) gs = lt_config_get_double(cfg, "model", "rope_low_freq_factor", &m->rope_low_freq_factor, err);
        if (gs == LT_OK)
            gs = lt_config_get_double(cfg, "model", "rope_high_freq_factor", &m->rope_high_freq_factor, err);
        if (gs == LT_OK) gs = lt_config_get_int(cfg, "model", "rope_original_max_pos", &orig, err);
        if (gs != LT_OK) return gs;
        if (orig > INT_MAX)
            return lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, "model", "rope_original_max_pos"),
                           "model.rope_original_max_pos = %" PRId64 " is too large (at most %d)", orig, INT_MAX);
        m->rope_original_max_pos = (int)orig;
    }
    return lt_model_validate(m, err);
}

/* Weight elements of one layer's matrices: QKV, output projection, MLP (lib/model.h). */
double lt_model_rope_theta(const lt_model_shape *m) { return m->rope_theta > 0 ? m->rope_theta : 10000.0; }
double lt_model_norm_eps(const lt_model_shape *m) { return m->norm_eps > 0 ? m->norm_eps : 1e-5; }

static double layer_matrix_params(const lt_model_shape *m) {
    double h = m->hidden;
    double kv_dim = (double)(m->hidden / m->heads) * m->kv_heads;
    double mlp_mats = m->gated_ffn ? 3.0 : 2.0;
    return h * (h + 2.0 * kv_dim) + h * h + mlp_mats * h * (double)m->ffn;
}

double lt_model_forward_flops_linear(const lt_model_shape *m, double tokens) {
    if (!(tokens > 0)) return 0.0;
    /* a GEMM of T rows by a weight of P elements: 2 T P FLOPs; the LM head likewise */
    return 2.0 * tokens * ((double)m->layers * layer_matrix_params(m) + (double)m->hidden * m->vocab);
}

double lt_model_forward_flops_attention(const lt_model_shape *m, double tokens) {
    if (!(tokens > 0)) return 0.0;
    /* QK^T and AV are 2 T^2 hidden each over all query heads (GQA shares K/V, not the
     * work); the causal mask keeps half of the score matrix (SlimPack 2.1.1 O(L^2 h)). */
    return (double)m->layers * 2.0 * 2.0 * (double)m->hidden * tokens * tokens / 2.0;
}

double lt_model_forward_flops(const lt_model_shape *m, double tokens) {
    return lt_model_forward_flops_linear(m, tokens) + lt_model_forward_flops_attention(m, tokens);
}

int lt_fused_head_rows(int vocab) {
    size_t rows = vocab > 0 ? LT_FUSED_HEAD_BLOCK_ELEMS / (size_t)vocab : LT_FUSED_HEAD_BLOCK_ELEMS;
    return rows < 1 ? 1 : rows > (size_t)INT_MAX ? INT_MAX : (int)rows;
}

int lt_helix_part_stage(int layer, bool pre, int layers, int stages) {
    return pre ? layer % stages : (layer + 1) % layers % stages;
}

double lt_model_params(const lt_model_shape *m) {
    double h = m->hidden;
    double per_layer = layer_matrix_params(m) + 2.0 * h; /* + attention and MLP norm weights */
    if (lt_model_qkv_bias(m)) per_layer += h + 2.0 * (double)(m->hidden / m->heads) * m->kv_heads; /* Q/K/V biases */
    return (double)m->layers * per_layer + h /* final norm */ + 2.0 * h * (double)m->vocab;
}
