/*
 * train/io/hf.c — Hugging Face LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM
 * directories: export and import (train/io/hf.h).
 *
 * config.json keys follow transformers' LlamaConfig, MistralConfig and Qwen2Config. Import
 * reads both spellings of the RoPE settings: "rope_theta" with "rope_scaling": {"rope_type"
 * (or "type"), "factor", ...} (transformers 4) and "rope_parameters": {"rope_theta",
 * "rope_type", "factor", ...} (transformers 5); export writes the first, which every version
 * reads. Defaults for absent keys are LlamaConfig's (num_key_value_heads =
 * num_attention_heads, rms_norm_eps 1e-6, rope_theta 10000, tie_word_embeddings false).
 */
#include "train/io/hf.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/files.h"            /* lt_mkdir_p, lt_read_file, lt_write_file_atomic */
#include "lib/json.h"             /* lt_json writer, lt_json_parse, lt_jv_* */
#include "train/io/safetensors.h" /* lt_safetensors_* */

#define WEIGHTS_FILE "model.safetensors"
#define INDEX_FILE "model.safetensors.index.json"

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    LT_CHECK_ALLOC(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* ------------------------------------------------------------------ export */

/* The architecture class of each family (lib/model.h's LT_FAMILY_* order). */
static const char *const ARCHITECTURES[LT_N_FAMILIES] = {"LlamaForCausalLM", "MistralForCausalLM",
                                                         "Qwen2ForCausalLM"};

static char *config_json(const lt_llama *m, int64_t max_pos) {
    const lt_model_shape *s = &m->shape;
    lt_json j;
    lt_json_init(&j);
    lt_json_object_begin(&j);
    lt_json_key(&j, "architectures");
    lt_json_array_begin(&j);
    lt_json_string(&j, ARCHITECTURES[s->family]);
    lt_json_array_end(&j);
    lt_json_key(&j, "model_type"); /* the family the model was imported as (or model.family) */
    lt_json_string(&j, lt_model_family_name(s->family));
    struct { const char *key; int64_t v; } ints[] = {
        {"hidden_size", s->hidden},         {"intermediate_size", s->ffn},
        {"num_attention_heads", s->heads},  {"num_key_value_heads", s->kv_heads},
        {"num_hidden_layers", s->layers},   {"vocab_size", s->vocab},
        {"head_dim", m->head_dim},          {"max_position_embeddings", max_pos},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        lt_json_key(&j, ints[i].key);
        lt_json_int(&j, ints[i].v);
    }
    lt_json_key(&j, "rms_norm_eps");
    lt_json_double(&j, lt_model_norm_eps(s));
    lt_json_key(&j, "rope_theta");
    lt_json_double(&j, lt_model_rope_theta(s));
    lt_json_key(&j, "rope_scaling");
    if (s->rope_scaling == LT_ROPE_LLAMA3) {
        lt_json_object_begin(&j);
        lt_json_key(&j, "rope_type");
        lt_json_string(&j, "llama3");
        lt_json_key(&j, "factor");
        lt_json_double(&j, s->rope_factor);
        lt_json_key(&j, "low_freq_factor");
        lt_json_double(&j, s->rope_low_freq_factor);
        lt_json_key(&j, "high_freq_factor");
        lt_json_double(&j, s->rope_high_freq_factor);
        lt_json_key(&j, "original_max_position_embeddings");
        lt_json_int(&j, s->rope_original_max_pos);
        lt_json_object_end(&j);
    } else {
        lt_json_null(&j);
    }
    lt_json_key(&j, "tie_word_embeddings");
    lt_json_bool(&j, s->tie_embeddings != 0);
    lt_json_key(&j, "hidden_act");
    lt_json_string(&j, "silu");
    if (s->family == LT_FAMILY_LLAMA) { /* LlamaConfig's bias switches (Qwen2's are built in) */
        lt_json_key(&j, "attention_bias");
        lt_json_bool(&j, false);
        lt_json_key(&j, "mlp_bias");
        lt_json_bool(&j, false);
    } else { /* full attention everywhere: no sliding window */
        if (s->family == LT_FAMILY_QWEN2) {
            lt_json_key(&j, "use_sliding_window");
            lt_json_bool(&j, false);
            lt_json_key(&j, "max_window_layers");
            lt_json_int(&j, s->layers);
        }
        lt_json_key(&j, "sliding_window");
        lt_json_null(&j);
    }
    lt_json_key(&j, "attention_dropout");
    lt_json_double(&j, 0.0);
    lt_json_key(&j, "initializer_range");
    lt_json_double(&j, 0.02);
    lt_json_key(&j, "torch_dtype");
    lt_json_string(&j, "float32");
    lt_json_object_end(&j);
    size_t n = j.len;
    char *text = malloc(n + 2);
    LT_CHECK_ALLOC(text);
    memcpy(text, lt_json_cstr(&j), n);
    text[n] = '\n';
    text[n + 1] = '\0';
    lt_json_free(&j);
    return text;
}

lt_status lt_hf_export(const lt_llama *m, const char *dir, int64_t max_position_embeddings, lt_error *err) {
    lt_status st = lt_mkdir_p(dir, 0777, err);
    if (st != LT_OK) return st;
    if (max_position_embeddings <= 0) max_position_embeddings = LT_HF_DEFAULT_MAX_POSITIONS;
    lt_safetensors_out *outs = calloc((size_t)m->n_tensors, sizeof *outs);
    LT_CHECK_ALLOC(outs);
    for (int i = 0; i < m->n_tensors; i++) {
        const lt_tensor_info *t = &m->tensors[i];
        outs[i].name = t->name;
        if (t->rows == 1) { /* norm weights are vectors in PyTorch */
            outs[i].ndim = 1;
            outs[i].shape[0] = t->cols;
        } else {
            outs[i].ndim = 2;
            outs[i].shape[0] = t->rows;
            outs[i].shape[1] = t->cols;
        }
        outs[i].data = m->params + t->offset;
    }
    static const char *const meta[] = {"format", "pt", "producer", "longtail trainer"};
    char *wpath = join(dir, WEIGHTS_FILE), *cpath = join(dir, "config.json");
    st = lt_safetensors_write(wpath, outs, (size_t)m->n_tensors, meta, 2, err);
    if (st == LT_OK) {
        char *text = config_json(m, max_position_embeddings);
        st = lt_write_file_atomic(cpath, text, strlen(text), err);
        free(text);
    }
    /* a stale index would shadow nothing (model.safetensors is read first) but confuse readers */
    char *ipath = join(dir, INDEX_FILE);
    if (st == LT_OK && file_exists(ipath) && unlink(ipath) != 0)
        st = lt_fail(err, LT_ERR_IO, ipath, "cannot remove the old shard index: %s", strerror(errno));
    free(ipath);
    free(wpath);
    free(cpath);
    free(outs);
    return st;
}

/* ------------------------------------------------------------------ config.json */

static lt_status config_error(const char *path, lt_error *err, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static lt_status config_error(const char *path, lt_error *err, const char *hint, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    lt_fail(err, LT_ERR_INPUT, path, "%s", what);
    if (hint) lt_error_hint(err, "%s", hint);
    return LT_ERR_INPUT;
}

/* An integer member in [1, INT_MAX]; `def` < 0 means required. */
static lt_status get_dim(const lt_jv *doc, const char *key, int def, int *out, const char *path, lt_error *err) {
    const lt_jv *v = lt_jv_get(doc, key);
    if (!v || v->type == LT_JV_NULL) {
        if (def < 0) return config_error(path, err, "is this a Llama config.json?", "\"%s\" is missing", key);
        *out = def;
        return LT_OK;
    }
    int64_t x;
    if (!lt_jv_int64(v, &x) || x < 1 || x > INT_MAX)
        return config_error(path, err, NULL, "\"%s\" must be a positive integer (got %s %.40s)", key,
                            lt_jv_type_name(v->type), v->type == LT_JV_NUMBER ? v->text : "");
    *out = (int)x;
    return LT_OK;
}

/* A positive finite number member (absent or null: def). */
static lt_status get_pos_double(const lt_jv *obj, const char *key, double def, double *out, const char *path,
                                lt_error *err) {
    const lt_jv *v = lt_jv_get(obj, key);
    if (!v || v->type == LT_JV_NULL) {
        *out = def;
        return LT_OK;
    }
    double d = v->type == LT_JV_NUMBER ? strtod(v->text, NULL) : NAN;
    if (!(isfinite(d) && d > 0))
        return config_error(path, err, NULL, "\"%s\" must be a positive number", key);
    *out = d;
    return LT_OK;
}

/* A boolean member that the model requires to be false (absent / null: false). */
static lt_status require_false(const lt_jv *doc, const char *key, const char *what, const char *path, lt_error *err) {
    const lt_jv *v = lt_jv_get(doc, key);
    if (!v || v->type == LT_JV_NULL || (v->type == LT_JV_BOOL && !v->boolean)) return LT_OK;
    return config_error(path, err, "the trainer implements Llama without biases (Llama 2/3) and Qwen2's Q/K/V "
                                   "biases only; this model cannot be imported", "\"%s\" is %s: the model has %s", key,
                        v->type == LT_JV_BOOL ? "true" : lt_jv_type_name(v->type), what);
}

/* llama3 scaling's parameters from the rope_scaling / rope_parameters object v: every one
 * required (transformers' _compute_llama3_parameters reads them all). */
static lt_status llama3_of(const lt_jv *v, const char *key, lt_model_shape *s, const char *path, lt_error *err) {
    static const char *const need[] = {"factor", "low_freq_factor", "high_freq_factor",
                                       "original_max_position_embeddings"};
    for (size_t i = 0; i < 4; i++) {
        const lt_jv *x = lt_jv_get(v, need[i]);
        if (!x || x->type == LT_JV_NULL)
            return config_error(path, err, "llama3 RoPE scaling names factor, low_freq_factor, high_freq_factor and "
                                           "original_max_position_embeddings",
                                "\"%s\" has rope_type 'llama3' but no \"%s\"", key, need[i]);
    }
    lt_status st = get_pos_double(v, "factor", 0, &s->rope_factor, path, err);
    if (st == LT_OK) st = get_pos_double(v, "low_freq_factor", 0, &s->rope_low_freq_factor, path, err);
    if (st == LT_OK) st = get_pos_double(v, "high_freq_factor", 0, &s->rope_high_freq_factor, path, err);
    if (st == LT_OK) st = get_dim(v, "original_max_position_embeddings", -1, &s->rope_original_max_pos, path, err);
    if (st != LT_OK) return st;
    if (!(s->rope_low_freq_factor < s->rope_high_freq_factor))
        return config_error(path, err, NULL, "\"%s\": low_freq_factor %g is not below high_freq_factor %g", key,
                            s->rope_low_freq_factor, s->rope_high_freq_factor);
    s->rope_scaling = LT_ROPE_LLAMA3;
    return LT_OK;
}

/* RoPE settings: rope_scaling (transformers 4) and rope_parameters (5) are absent, of
 * rope_type "default" or of rope_type "llama3" (Llama 3.1's scaled frequencies); theta from
 * either place. Another rope_type is refused by name. */
static lt_status rope_of(const lt_jv *doc, lt_model_shape *s, const char *path, lt_error *err) {
    static const char *const keys[] = {"rope_scaling", "rope_parameters"};
    s->rope_theta = 10000.0;
    s->rope_scaling = LT_ROPE_NONE;
    lt_status st = get_pos_double(doc, "rope_theta", 10000.0, &s->rope_theta, path, err);
    if (st != LT_OK) return st;
    for (size_t i = 0; i < 2; i++) {
        const lt_jv *v = lt_jv_get(doc, keys[i]);
        if (!v || v->type == LT_JV_NULL) continue;
        if (v->type != LT_JV_OBJECT)
            return config_error(path, err, NULL, "\"%s\" is %s, expected an object or null", keys[i],
                                lt_jv_type_name(v->type));
        const lt_jv *type = lt_jv_get(v, "rope_type");
        if (!type) type = lt_jv_get(v, "type");
        const char *name = type && type->type == LT_JV_STRING ? type->text : NULL;
        if (name && strcmp(name, "llama3") == 0) {
            if ((st = llama3_of(v, keys[i], s, path, err)) != LT_OK) return st;
        } else if (!name || strcmp(name, "default") != 0) {
            return config_error(path, err,
                                "the trainer implements plain RoPE and Llama 3.1's \"llama3\" scaling; other RoPE "
                                "scalings (linear, dynamic, yarn, longrope) cannot be imported",
                                "\"%s\" sets RoPE scaling (rope_type '%.40s')", keys[i], name ? name : "?");
        }
        if (i == 1 && (st = get_pos_double(v, "rope_theta", s->rope_theta, &s->rope_theta, path, err)) != LT_OK)
            return st;
    }
    return LT_OK;
}

/* Sliding-window attention is not implemented: refuse a Mistral whose sliding_window is
 * smaller than its max_position_embeddings (a window covering the whole context is full
 * attention), and a Qwen2 that turns it on (use_sliding_window with such a window below
 * max_window_layers of its layers, or layer_types naming "sliding_attention"). */
static lt_status sliding_window_of(const lt_jv *doc, int family, int layers, int64_t max_pos, const char *path,
                                   lt_error *err) {
    static const char *const hint = "sliding-window attention is not implemented: the trainer imports Mistral and "
                                    "Qwen2 models whose attention is full (sliding_window null, or at least "
                                    "max_position_embeddings)";
    if (family == LT_FAMILY_LLAMA) return LT_OK;
    const lt_jv *types = lt_jv_get(doc, "layer_types");
    for (size_t i = 0; types && types->type == LT_JV_ARRAY && i < types->n; i++) {
        const lt_jv *t = &types->items[i];
        if (t->type == LT_JV_STRING && strcmp(t->text, "full_attention") != 0)
            return config_error(path, err, hint, "layer_types[%zu] is \"%.40s\": layer %zu uses %s", i, t->text, i,
                                t->text);
    }
    if (family == LT_FAMILY_QWEN2) {
        const lt_jv *use = lt_jv_get(doc, "use_sliding_window");
        if (!use || use->type != LT_JV_BOOL || !use->boolean) return LT_OK; /* Qwen2Config: off */
        int mwl = 0;
        lt_status st = get_dim(doc, "max_window_layers", 28, &mwl, path, err);
        if (st != LT_OK) return st;
        if (mwl >= layers) return LT_OK; /* no layer slides */
    }
    const lt_jv *sw = lt_jv_get(doc, "sliding_window");
    if (!sw || sw->type == LT_JV_NULL) return LT_OK;
    int64_t w;
    if (!lt_jv_int64(sw, &w) || w < 1)
        return config_error(path, err, NULL, "\"sliding_window\" must be a positive integer or null");
    if (max_pos > 0 && w >= max_pos) return LT_OK; /* the window covers the whole context */
    if (max_pos <= 0)
        return config_error(path, err, hint, "sliding_window is %" PRId64 " and max_position_embeddings is absent: "
                            "the model uses sliding-window attention", w);
    return config_error(path, err, hint, "sliding_window is %" PRId64 ", below max_position_embeddings %" PRId64
                        ": the model uses sliding-window attention", w, max_pos);
}

static lt_status read_config(const char *dir, lt_model_shape *s, int64_t *max_pos, lt_error *err) {
    char *path = join(dir, "config.json");
    char *text = NULL;
    size_t len = 0;
    lt_jv *doc = NULL;
    lt_status st = lt_read_file(path, &text, &len, err);
    if (st != LT_OK) {
        if (!file_exists(path))
            lt_error_hint(err, "a Hugging Face model directory holds config.json and model.safetensors (transformers' "
                               "save_pretrained)");
        goto out;
    }
    lt_error jerr;
    if ((st = lt_json_parse(text, len, &doc, &jerr)) != LT_OK) {
        st = st == LT_ERR_NOMEM ? lt_fail(err, st, path, "out of memory")
                                : config_error(path, err, NULL, "not valid JSON: %s at %s", jerr.what, jerr.where);
        goto out;
    }
    if (doc->type != LT_JV_OBJECT) {
        st = config_error(path, err, NULL, "config.json holds %s, expected an object", lt_jv_type_name(doc->type));
        goto out;
    }
    const lt_jv *mt = lt_jv_get(doc, "model_type");
    int family = mt && mt->type == LT_JV_STRING ? lt_model_family_of(mt->text) : -1;
    if (family < 0) {
        st = config_error(path, err,
                          "the trainer runs Llama-architecture models (LlamaForCausalLM, MistralForCausalLM, "
                          "Qwen2ForCausalLM); other architectures cannot be imported",
                          "model_type is %s%.60s%s, expected \"llama\", \"mistral\" or \"qwen2\"",
                          mt && mt->type == LT_JV_STRING ? "\"" : "",
                          mt ? (mt->type == LT_JV_STRING ? mt->text : lt_jv_type_name(mt->type)) : "missing",
                          mt && mt->type == LT_JV_STRING ? "\"" : "");
        goto out;
    }
    memset(s, 0, sizeof *s);
    s->name = "custom";
    s->gated_ffn = 1;
    s->family = family; /* qwen2: Q/K/V biases (lt_model_qkv_bias) */
    if ((st = get_dim(doc, "num_hidden_layers", -1, &s->layers, path, err)) != LT_OK ||
        (st = get_dim(doc, "hidden_size", -1, &s->hidden, path, err)) != LT_OK ||
        (st = get_dim(doc, "num_attention_heads", -1, &s->heads, path, err)) != LT_OK ||
        (st = get_dim(doc, "num_key_value_heads", s->heads, &s->kv_heads, path, err)) != LT_OK ||
        (st = get_dim(doc, "intermediate_size", -1, &s->ffn, path, err)) != LT_OK ||
        (st = get_dim(doc, "vocab_size", -1, &s->vocab, path, err)) != LT_OK)
        goto out;
    if ((st = get_pos_double(doc, "rms_norm_eps", 1e-6, &s->norm_eps, path, err)) != LT_OK) goto out;
    if ((st = rope_of(doc, s, path, err)) != LT_OK) goto out;
    if ((st = require_false(doc, "attention_bias", "biases in the attention projections", path, err)) != LT_OK ||
        (st = require_false(doc, "mlp_bias", "biases in the MLP", path, err)) != LT_OK)
        goto out;
    const lt_jv *act = lt_jv_get(doc, "hidden_act");
    if (act && !(act->type == LT_JV_STRING && strcmp(act->text, "silu") == 0)) {
        st = config_error(path, err, "the trainer's MLP is SwiGLU (silu)", "hidden_act is %.40s, expected \"silu\"",
                          act->type == LT_JV_STRING ? act->text : lt_jv_type_name(act->type));
        goto out;
    }
    const lt_jv *tie = lt_jv_get(doc, "tie_word_embeddings");
    if (tie && tie->type != LT_JV_NULL && tie->type != LT_JV_BOOL) {
        st = config_error(path, err, NULL, "tie_word_embeddings is %s, expected true or false",
                          lt_jv_type_name(tie->type));
        goto out;
    }
    s->tie_embeddings = tie && tie->type == LT_JV_BOOL && tie->boolean;
    if (s->hidden % s->heads == 0) {
        int hd = 0;
        if ((st = get_dim(doc, "head_dim", s->hidden / s->heads, &hd, path, err)) != LT_OK) goto out;
        if (hd != s->hidden / s->heads) {
            st = config_error(path, err, "the trainer's head dimension is hidden_size / num_attention_heads",
                              "head_dim is %d, hidden_size / num_attention_heads is %d", hd, s->hidden / s->heads);
            goto out;
        }
    }
    int mp = 0;
    *max_pos = 0;
    if ((st = get_dim(doc, "max_position_embeddings", 0, &mp, path, err)) != LT_OK) goto out;
    *max_pos = mp;
    if ((st = sliding_window_of(doc, family, s->layers, mp, path, err)) != LT_OK) goto out;
    lt_error verr;
    if (lt_model_validate(s, &verr) != LT_OK) {
        st = config_error(path, err, NULL, "the model's dimensions are invalid: %s", verr.what);
        goto out;
    }
out:
    lt_jv_free(doc);
    free(text);
    free(path);
    return st;
}

/* ------------------------------------------------------------------ weights */

typedef struct shard {
    char *file; /* name inside the directory */
    lt_safetensors st;
    bool open;
} shard;

typedef struct weights {
    const char *dir;
    shard *shards;
    size_t n_shards;
    lt_jv *index;          /* parsed index, NULL for a single file */
    const lt_jv *map;      /* index's weight_map */
    char *index_path;
} weights;

static void weights_free(weights *w) {
    for (size_t i = 0; i < w->n_shards; i++) {
        lt_safetensors_close(&w->shards[i].st);
        free(w->shards[i].file);
    }
    free(w->shards);
    lt_jv_free(w->index);
    free(w->index_path);
    memset(w, 0, sizeof *w);
}

static lt_status shard_open(weights *w, size_t i, lt_error *err) {
    shard *s = &w->shards[i];
    if (s->open) return LT_OK;
    char *path = join(w->dir, s->file);
    lt_status st = lt_safetensors_open(&s->st, path, err);
    free(path);
    if (st == LT_OK) s->open = true;
    return st;
}

/* Index of shard `file`, added when new. */
static size_t shard_of(weights *w, const char *file) {
    for (size_t i = 0; i < w->n_shards; i++)
        if (strcmp(w->shards[i].file, file) == 0) return i;
    shard *ns = realloc(w->shards, (w->n_shards + 1) * sizeof *ns);
    LT_CHECK_ALLOC(ns);
    w->shards = ns;
    memset(&ns[w->n_shards], 0, sizeof *ns);
    ns[w->n_shards].file = lt_strdup_check(file);
    return w->n_shards++;
}

static lt_status weights_open(weights *w, const char *dir, lt_error *err) {
    memset(w, 0, sizeof *w);
    w->dir = dir;
    char *single = join(dir, WEIGHTS_FILE);
    bool have_single = file_exists(single);
    free(single);
    if (have_single) {
        shard_of(w, WEIGHTS_FILE);
        return shard_open(w, 0, err);
    }
    w->index_path = join(dir, INDEX_FILE);
    if (!file_exists(w->index_path)) {
        lt_fail(err, LT_ERR_IO, dir, "no %s or %s in the model directory", WEIGHTS_FILE, INDEX_FILE);
        lt_error_hint(err, "save the model with save_pretrained(DIR, safe_serialization=True); pytorch_model.bin "
                           "files are not read");
        return LT_ERR_IO;
    }
    char *text = NULL;
    size_t len = 0;
    lt_status st = lt_read_file(w->index_path, &text, &len, err);
    if (st != LT_OK) return st;
    lt_error jerr;
    st = lt_json_parse(text, len, &w->index, &jerr);
    free(text);
    if (st != LT_OK)
        return st == LT_ERR_NOMEM ? lt_fail(err, st, w->index_path, "out of memory")
                                  : config_error(w->index_path, err, NULL, "not valid JSON: %s at %s", jerr.what,
                                                 jerr.where);
    w->map = lt_jv_get(w->index, "weight_map");
    if (!w->map || w->map->type != LT_JV_OBJECT)
        return config_error(w->index_path, err, NULL, "no \"weight_map\" object in the shard index");
    for (size_t i = 0; i < w->map->n; i++) {
        const lt_jv *f = &w->map->items[i];
        if (f->type != LT_JV_STRING || f->len == 0 || f->len != strlen(f->text) || strchr(f->text, '/') ||
            strcmp(f->text, "..") == 0 || strcmp(f->text, ".") == 0)
            return config_error(w->index_path, err, "shards are files in the model directory",
                                "weight_map[\"%.100s\"] is not a file name of the model directory", w->map->keys[i]);
        shard_of(w, f->text);
    }
    return LT_OK;
}

/* The tensor `name` (NULL when absent), opening its shard. */
static lt_status weights_find(weights *w, const char *name, const lt_safetensors_tensor **out, lt_error *err) {
    *out = NULL;
    size_t idx = 0;
    if (w->map) {
        const lt_jv *f = lt_jv_get(w->map, name);
        if (!f) return LT_OK;
        idx = shard_of(w, f->text);
    }
    lt_status st = shard_open(w, idx, err);
    if (st != LT_OK) return st;
    *out = lt_safetensors_find(&w->shards[idx].st, name);
    if (!*out && w->map) {
        char *path = join(w->dir, w->shards[idx].file);
        lt_fail(err, LT_ERR_INPUT, path, "the shard index puts tensor '%s' in this file, which does not have it", name);
        free(path);
        return LT_ERR_INPUT;
    }
    return LT_OK;
}

static void note_ignored(lt_hf_import_info *info, const lt_llama *m, const char *name) {
    if (lt_llama_find_tensor(m, name)) return;
    if (info->n_ignored++ == 0) snprintf(info->first_ignored, sizeof info->first_ignored, "%s", name);
}

static lt_status load_tensors(weights *w, lt_llama *m, lt_hf_import_info *info, lt_error *err) {
    for (int i = 0; i < m->n_tensors; i++) {
        const lt_tensor_info *ti = &m->tensors[i];
        const lt_safetensors_tensor *t;
        lt_status st = weights_find(w, ti->name, &t, err);
        if (st != LT_OK) return st;
        const char *where = w->map ? w->index_path : w->shards[0].st.where;
        if (!t) {
            lt_fail(err, LT_ERR_INPUT, where, "tensor %s is missing", ti->name);
            if (strcmp(ti->name, "lm_head.weight") == 0)
                lt_error_hint(err, "config.json says tie_word_embeddings is false; a model with a tied LM head "
                                   "sets it to true");
            else
                lt_error_hint(err, "the weights do not match config.json (num_hidden_layers = %d)", m->shape.layers);
            return LT_ERR_INPUT;
        }
        bool vec = ti->rows == 1;
        bool ok = vec ? (t->ndim == 1 && t->shape[0] == ti->cols)
                      : (t->ndim == 2 && t->shape[0] == ti->rows && t->shape[1] == ti->cols);
        if (!ok) {
            char got[128] = "";
            size_t l = 0;
            for (int d = 0; d < t->ndim && l < sizeof got - 24; d++)
                l += (size_t)snprintf(got + l, sizeof got - l, "%s%" PRId64, d ? ", " : "", t->shape[d]);
            char want[48];
            if (vec) snprintf(want, sizeof want, "[%d]", ti->cols);
            else snprintf(want, sizeof want, "[%d, %d]", ti->rows, ti->cols);
            lt_fail(err, LT_ERR_INPUT, where, "tensor %s has shape [%s], config.json makes it %s",
                    ti->name, got, want);
            lt_error_hint(err, "the weights do not belong to this config.json");
            return LT_ERR_INPUT;
        }
        float *dst = m->params + ti->offset;
        lt_safetensors_to_f32(t, dst);
        info->dtypes |= 1u << t->dtype;
        size_t n = (size_t)ti->rows * (size_t)ti->cols;
        for (size_t j = 0; j < n; j++) {
            if (isfinite(dst[j])) continue;
            lt_fail(err, LT_ERR_INPUT, where, "tensor %s[%zu] is %s", ti->name, j, isnan(dst[j]) ? "NaN" : "infinite");
            lt_error_hint(err, "the model's weights are damaged or diverged");
            return LT_ERR_INPUT;
        }
    }
    /* what the files hold beyond the model */
    if (w->map) {
        for (size_t i = 0; i < w->map->n; i++) note_ignored(info, m, w->map->keys[i]);
    } else {
        const lt_safetensors *s = &w->shards[0].st;
        for (size_t i = 0; i < s->n_tensors; i++) note_ignored(info, m, s->tensors[i].name);
    }
    for (size_t i = 0; i < w->n_shards; i++) info->n_files += w->shards[i].open;
    return LT_OK;
}

lt_status lt_hf_import(const char *dir, lt_llama *m, lt_hf_import_info *info, lt_error *err) {
    memset(m, 0, sizeof *m);
    lt_hf_import_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    lt_model_shape shape;
    lt_status st = read_config(dir, &shape, &info->max_position_embeddings, err);
    if (st != LT_OK) return st;
    if ((st = lt_llama_create(m, &shape, err)) != LT_OK) {
        if (st == LT_ERR_CONFIG && err) {
            char *path = join(dir, "config.json");
            lt_error e2 = *err;
            st = config_error(path, err, e2.hint[0] ? e2.hint : NULL, "the model cannot be trained: %s", e2.what);
            free(path);
        }
        return st;
    }
    weights w;
    st = weights_open(&w, dir, err);
    if (st == LT_OK) st = load_tensors(&w, m, info, err);
    weights_free(&w);
    if (st != LT_OK) lt_llama_free(m);
    return st;
}
