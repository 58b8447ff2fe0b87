/*
 * tests/lib/test_model.c — lib/model: the presets are valid and unique, parameter counts
 * match the published model sizes, the forward-FLOPs formula matches hand computations
 * (and HelixPipe Table 1 for a GPT shape), and the causal attention term overtakes the
 * linear terms exactly at the crossover length derived from the dimensions; the model of a
 * config (preset, preset + dimension overrides, dimensions only, a --model override,
 * unknown names) is picked as lt_model_from_config documents; its vocabulary is
 * data.encoding's size unless model.vocab is set (then at least that size), the shipped
 * encodings' sizes are those of their files, and another encoding's come from its files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/config.h"
#include "lib/model.h"

static void assert_rel_close(double got, double want, double rel) {
    if (!(fabs(got - want) <= rel * fabs(want))) {
        print_error("got %.17g, want %.17g (relative tolerance %g)\n", got, want, rel);
        fail();
    }
}

static void test_every_preset_is_valid_and_named_uniquely(void **state) {
    (void)state;
    size_t n = lt_model_n_presets();
    assert_true(n >= 14);
    for (size_t i = 0; i < n; i++) {
        const lt_model_shape *m = lt_model_preset_at(i);
        assert_non_null(m);
        assert_non_null(m->name);
        lt_error err;
        lt_error_clear(&err);
        assert_int_equal(lt_model_validate(m, &err), LT_OK);
        assert_ptr_equal(lt_model_preset(m->name), m);
        for (size_t k = 0; k < i; k++) assert_string_not_equal(lt_model_preset_at(k)->name, m->name);
    }
    assert_null(lt_model_preset_at(n));
    assert_null(lt_model_preset("llama-8b"));
    assert_null(lt_model_preset("LLAMA-7B"));
    assert_null(lt_model_preset(""));
    assert_null(lt_model_preset(NULL));
    const char *wanted[] = {"tiny", "llama-7b", "llama-13b", "llama-70b", "llama-150b", "gpt-7b",
                            "gpt-13b", "gpt-30b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b",
                            "qwen2.5-72b", "gpt-1.3b", "gpt-3b"};
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) assert_non_null(lt_model_preset(wanted[i]));
}

/* Spot-check the dimensions copied from the papers' tables. */
static void test_preset_dimensions_match_their_sources(void **state) {
    (void)state;
    const lt_model_shape *m = lt_model_preset("llama-70b"); /* SlimPack Table 3 */
    assert_int_equal(m->layers, 80);
    assert_int_equal(m->hidden, 8192);
    assert_int_equal(m->heads, 64);
    assert_int_equal(m->kv_heads, 8);
    assert_int_equal(m->ffn, 28672);
    assert_int_equal(m->vocab, 32000);
    assert_int_equal(m->gated_ffn, 1);
    m = lt_model_preset("llama-150b");
    assert_int_equal(m->layers, 96);
    assert_int_equal(m->hidden, 12288);
    assert_int_equal(m->kv_heads, 8);
    assert_int_equal(m->ffn, 32768);
    m = lt_model_preset("gpt-3b"); /* HelixPipe Table 3 */
    assert_int_equal(m->layers, 16);
    assert_int_equal(m->heads, 32);
    assert_int_equal(m->hidden, 4096);
    assert_int_equal(m->ffn, 4 * 4096);
    assert_int_equal(m->gated_ffn, 0);
    m = lt_model_preset("qwen2.5-32b");
    assert_int_equal(m->layers, 64);
    assert_int_equal(m->ffn, 27648);
    assert_int_equal(m->vocab, 152064);
}

static void test_validate_rejects_broken_shapes(void **state) {
    (void)state;
    lt_model_shape good = *lt_model_preset("llama-7b");
    lt_error err;
    lt_model_shape m = good;
    m.heads = 30; /* 4096 % 30 != 0 */
    m.kv_heads = 30;
    assert_int_equal(lt_model_validate(&m, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "heads (30) must divide hidden (4096)"));
    assert_string_equal(err.where, "[model]");
    assert_non_null(strstr(err.hint, "llama-7b"));

    m = good;
    m.kv_heads = 5; /* 32 % 5 != 0 */
    assert_int_equal(lt_model_validate(&m, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "kv_heads (5) must divide heads (32)"));

    m = good;
    m.layers = 0;
    assert_int_equal(lt_model_validate(&m, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "layers must be positive"));

    m = good;
    m.vocab = -1;
    m.name = NULL;
    assert_int_equal(lt_model_validate(&m, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "vocab must be positive, got -1"));
    assert_string_equal(err.hint, "");

    m = good;
    m.gated_ffn = 2;
    assert_int_equal(lt_model_validate(&m, &err), LT_ERR_CONFIG);
    assert_int_equal(lt_model_validate(&m, NULL), LT_ERR_CONFIG);
    assert_int_equal(lt_model_validate(NULL, &err), LT_ERR_INTERNAL);
}

/* Published sizes (outside references): LLaMA 6.7B / 13.0B, Llama 2 70B (69.0e9 with its
 * GQA), Qwen2.5-7B 7.61B. Within 3%. */
static void test_parameter_counts_match_published_sizes(void **state) {
    (void)state;
    assert_rel_close(lt_model_params(lt_model_preset("llama-7b")), 6.7e9, 0.03);
    assert_rel_close(lt_model_params(lt_model_preset("llama-13b")), 13.0e9, 0.03);
    assert_rel_close(lt_model_params(lt_model_preset("llama-70b")), 69.0e9, 0.03);
    assert_rel_close(lt_model_params(lt_model_preset("qwen2.5-7b")), 7.61e9, 0.03);
    assert_rel_close(lt_model_params(lt_model_preset("qwen2.5-72b")), 72.7e9, 0.03);
    /* GPT: 12 h^2 per layer (HelixPipe Table 1, biases left out) + untied embeddings */
    const lt_model_shape *g = lt_model_preset("gpt-3b");
    double h = 4096;
    assert_rel_close(lt_model_params(g), 16 * (12 * h * h + 2 * h) + h + 2 * h * 50257, 1e-15);
    /* tiny, by hand: 4 layers x (2^20 + 512) + 256 + 2 x 256 x 100277 */
    assert_rel_close(lt_model_params(lt_model_preset("tiny")), 4.0 * (1048576 + 512) + 256 + 51341824.0, 0);
}

/* tiny: per layer QKV 256x768 + O 256x256 + SwiGLU 3x256x1024 = 1048576 weights; LM head
 * 256 x 100277. Values computed by hand (checked with python3 integers). */
static void test_forward_flops_of_tiny_by_hand(void **state) {
    (void)state;
    const lt_model_shape *m = lt_model_preset("tiny");
    /* T=100: linear 2*100*(4*1048576 + 256*100277) = 5973043200; attention 4*2*256*100^2 */
    assert_rel_close(lt_model_forward_flops_linear(m, 100), 5973043200.0, 0);
    assert_rel_close(lt_model_forward_flops_attention(m, 100), 20480000.0, 0);
    assert_rel_close(lt_model_forward_flops(m, 100), 5993523200.0, 0);
    /* T=4096 */
    assert_rel_close(lt_model_forward_flops(m, 4096), 279015587840.0, 0);
    assert_rel_close(lt_model_forward_flops_attention(m, 4096), 34359738368.0, 0);
    /* T=1 and nothing for T <= 0 */
    assert_rel_close(lt_model_forward_flops(m, 1), 59732480.0, 0);
    assert_true(lt_model_forward_flops(m, 0) == 0.0);
    assert_true(lt_model_forward_flops(m, -5) == 0.0);
    assert_true(lt_model_forward_flops(m, NAN) == 0.0);
}

/* HelixPipe Table 1: one GPT-3 layer's forward is 4bsh(6h + s) with a full score matrix;
 * with the causal mask the s^2 part halves: 24 s h^2 + 2 h s^2. Plus the LM head. */
static void test_gpt_flops_match_helixpipe_table1(void **state) {
    (void)state;
    const lt_model_shape *m = lt_model_preset("gpt-1.3b");
    double h = 2048, s = 8192, L = 24, V = 50257;
    double want = L * (24 * s * h * h + 2 * h * s * s) + 2 * s * h * V;
    assert_rel_close(lt_model_forward_flops(m, s), want, 1e-14);
    /* GQA: llama-70b's K/V projections are 1/8 of Q's */
    const lt_model_shape *g = lt_model_preset("llama-70b");
    double hg = 8192, kv = 1024, T = 1000;
    double per_layer = 2 * T * (hg * (hg + 2 * kv) + hg * hg + 3 * hg * 28672) + 2 * hg * T * T;
    assert_rel_close(lt_model_forward_flops(g, T), 80 * per_layer + 2 * T * hg * 32000, 1e-14);
}

/* The attention share passes 1/2 at T* = (layers * P_layer + hidden * vocab) / (layers *
 * hidden), with P_layer the weights of one layer, and keeps growing after it. */
static void test_quadratic_term_dominates_beyond_crossover(void **state) {
    (void)state;
    for (size_t i = 0; i < lt_model_n_presets(); i++) {
        const lt_model_shape *m = lt_model_preset_at(i);
        double h = m->hidden, kv = (double)m->hidden / m->heads * m->kv_heads;
        double p_layer = h * (h + 2 * kv) + h * h + (m->gated_ffn ? 3 : 2) * h * m->ffn;
        double cross = (m->layers * p_layer + h * m->vocab) / (m->layers * h);
        assert_rel_close(lt_model_forward_flops_attention(m, cross), lt_model_forward_flops_linear(m, cross),
                         1e-12);
        assert_true(lt_model_forward_flops_attention(m, cross / 2) < lt_model_forward_flops_linear(m, cross / 2));
        double prev_share = 0;
        for (double t = 2 * cross; t <= 64 * cross; t *= 2) {
            double share = lt_model_forward_flops_attention(m, t) / lt_model_forward_flops(m, t);
            assert_true(share > 0.5);
            assert_true(share > prev_share);
            prev_share = share;
        }
    }
    /* llama-7b by hand: 4096 + 2*4096 + 4096 + 3*11008 = 49408, + 32000/32 = 50408 tokens */
    const lt_model_shape *m = lt_model_preset("llama-7b");
    assert_rel_close(lt_model_forward_flops_attention(m, 50408), lt_model_forward_flops_linear(m, 50408), 1e-15);
    /* SlimPack 6.2: attention is a larger share in small models at the same length */
    double s7 = lt_model_forward_flops_attention(m, 65536) / lt_model_forward_flops(m, 65536);
    const lt_model_shape *b = lt_model_preset("llama-150b");
    double s150 = lt_model_forward_flops_attention(b, 65536) / lt_model_forward_flops(b, 65536);
    assert_true(s7 > s150);
}

/* a has b's shape, with the vocabulary `vocab` (a config's model has its encoding's). */
static void assert_same_shape(const lt_model_shape *a, const lt_model_shape *b, int vocab) {
    assert_non_null(b);
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->layers, b->layers);
    assert_int_equal(a->hidden, b->hidden);
    assert_int_equal(a->heads, b->heads);
    assert_int_equal(a->kv_heads, b->kv_heads);
    assert_int_equal(a->ffn, b->ffn);
    assert_int_equal(a->vocab, vocab);
    assert_int_equal(a->gated_ffn, b->gated_ffn);
}

#define CL100K 100277 /* the default data.encoding's size */

/* A config with the given --set assignments applied over the defaults. */
static lt_config *config_with(const char *const *sets, size_t n) {
    lt_config *cfg = lt_config_new();
    assert_non_null(cfg);
    for (size_t i = 0; i < n; i++) {
        lt_error err;
        if (lt_config_set(cfg, sets[i], &err) != LT_OK) fail_msg("%s: %s", sets[i], err.what);
    }
    return cfg;
}

static void test_model_from_config_preset_and_default(void **state) {
    (void)state;
    lt_error err;
    lt_model_shape m;
    /* nothing in [model]: llama-7b */
    lt_config *cfg = config_with(NULL, 0);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_OK);
    assert_string_equal(m.name, "llama-7b");
    assert_same_shape(&m, lt_model_preset("llama-7b"), CL100K);
    lt_config_free(cfg);
    /* a preset, taken as it is but for the vocabulary: the data's */
    const char *preset[] = {"model.preset=qwen2.5-7b"};
    cfg = config_with(preset, 1);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_OK);
    assert_same_shape(&m, lt_model_preset("qwen2.5-7b"), CL100K);
    /* --model wins over model.preset */
    assert_int_equal(lt_model_from_config(cfg, "gpt-13b", &m, &err), LT_OK);
    assert_same_shape(&m, lt_model_preset("gpt-13b"), CL100K);
    lt_config_free(cfg);
}

static void test_model_from_config_overrides_and_dims_only(void **state) {
    (void)state;
    lt_error err;
    lt_model_shape m;
    /* preset + overrides: the named fields change, the rest stay the preset's */
    const char *over[] = {"model.preset=llama-7b", "model.layers=8", "model.kv_heads=8"};
    lt_config *cfg = config_with(over, 3);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_OK);
    assert_string_equal(m.name, "custom");
    assert_int_equal(m.layers, 8);
    assert_int_equal(m.kv_heads, 8);
    assert_int_equal(m.hidden, 4096);
    assert_int_equal(m.ffn, 11008);
    assert_int_equal(m.vocab, CL100K);
    assert_int_equal(m.gated_ffn, 1);
    /* a --model override ignores the config's dimensions */
    assert_int_equal(lt_model_from_config(cfg, "llama-13b", &m, &err), LT_OK);
    assert_same_shape(&m, lt_model_preset("llama-13b"), CL100K);
    lt_config_free(cfg);
    /* dimensions only: a custom SwiGLU model, kv_heads = heads, the encoding's vocab */
    const char *dims[] = {"model.layers=2", "model.hidden=64", "model.heads=4", "model.ffn=128"};
    cfg = config_with(dims, 4);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_OK);
    assert_string_equal(m.name, "custom");
    assert_int_equal(m.layers, 2);
    assert_int_equal(m.hidden, 64);
    assert_int_equal(m.heads, 4);
    assert_int_equal(m.kv_heads, 4);
    assert_int_equal(m.ffn, 128);
    assert_int_equal(m.vocab, CL100K);
    assert_int_equal(m.gated_ffn, 1);
    lt_config_free(cfg);
    /* incomplete dimensions fail validation */
    const char *half[] = {"model.layers=2", "model.hidden=64"};
    cfg = config_with(half, 2);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "heads must be positive"));
    lt_config_free(cfg);
    /* an override that breaks the preset's shape */
    const char *bad[] = {"model.preset=llama-7b", "model.heads=30"};
    cfg = config_with(bad, 2);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "heads (30) must divide hidden (4096)"));
    lt_config_free(cfg);
    /* a dimension beyond int */
    const char *huge[] = {"model.preset=tiny", "model.layers=3000000000"};
    cfg = config_with(huge, 2);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "model.layers = 3000000000 is too large"));
    assert_string_equal(err.where, "--set");
    lt_config_free(cfg);
}

static void test_model_from_config_unknown_names(void **state) {
    (void)state;
    lt_error err;
    lt_model_shape m;
    const char *typo[] = {"model.preset=llama-8b"};
    lt_config *cfg = config_with(typo, 1);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_ERR_USAGE);
    assert_string_equal(err.what, "unknown model 'llama-8b'");
    assert_string_equal(err.where, "model.preset");
    assert_non_null(strstr(err.hint, "presets: tiny, nano, small, llama-7b, llama-13b"));
    assert_non_null(strstr(err.hint, "gpt-3b"));
    assert_int_equal(lt_model_from_config(cfg, "gpt-99b", &m, &err), LT_ERR_USAGE);
    assert_string_equal(err.what, "unknown model 'gpt-99b'");
    assert_string_equal(err.where, "--model");
    lt_config_free(cfg);
}

/* ------------------------------------------------------------------ the vocabulary */

/* A directory of the source tree (via $top_srcdir, which `make check` exports, or the
 * usual build directories), or NULL. */
static const char *source_dir(const char *rel) {
    static char path[4096];
    const char *roots[] = {getenv("top_srcdir"), getenv("srcdir"), ".", "..", "../.."};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        if (!roots[i]) continue;
        snprintf(path, sizeof path, "%s/%s", roots[i], rel);
        if (access(path, R_OK) == 0) return path;
    }
    return NULL;
}

static char tmpdir[4096];

static int make_tmpdir(void **state) {
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/lt-test-model.XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state) {
    (void)state;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_text(const char *name, const char *text) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* tmpdir/NAME.tiktoken: the 256 single-byte tokens (ranks 0..255), then `extra` more
 * ranks (two-byte tokens); NAME.json: `json`. */
static void write_encoding(const char *name, int extra, const char *json) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.tiktoken", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int b = 0; b < 256; b++) fprintf(f, "%c%c== %d\n", b64[b >> 2], b64[(b & 3) << 4], b);
    for (int i = 0; i < extra; i++) /* "a" followed by byte i: base64 of 2 bytes */
        fprintf(f, "%c%c%c= %d\n", b64['a' >> 2], b64[(('a' & 3) << 4) | (i >> 4)], b64[(i & 15) << 2], 256 + i);
    assert_int_equal(fclose(f), 0);
    snprintf(path, sizeof path, "%s.json", name);
    write_text(path, json);
}

static void test_vocab_defaults_to_the_encodings_size(void **state) {
    (void)state;
    lt_error err;
    lt_model_shape m;
    /* the shipped encodings, without any vocab directory; a --model override too */
    const char *enc[] = {"r50k_base", "cl100k_base", "o200k_base"};
    const int size[] = {50257, 100277, 200019};
    for (int i = 0; i < 3; i++) {
        char set[64];
        snprintf(set, sizeof set, "data.encoding=%s", enc[i]);
        const char *sets[] = {"model.preset=llama-7b", set, "data.vocab_dir=/nonexistent"};
        lt_config *cfg = config_with(sets, 3);
        assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_OK);
        assert_same_shape(&m, lt_model_preset("llama-7b"), size[i]);
        assert_int_equal(lt_model_from_config(cfg, "gpt-7b", &m, &err), LT_OK);
        assert_same_shape(&m, lt_model_preset("gpt-7b"), size[i]);
        int n = 0;
        assert_int_equal(lt_encoding_n_vocab(enc[i], NULL, &n, &err), LT_OK);
        assert_int_equal(n, size[i]);
        lt_config_free(cfg);
    }
    /* another encoding: its files, in data.vocab_dir (256 ranks + 44, a special at 310) */
    write_encoding("small44", 44, "{\"pat_str\": \"\\\\S+|\\\\s+\", \"special_tokens\": {\"<|end|>\": 310}}");
    write_encoding("plain", 10, "{\"pat_str\": \"\\\\S+|\\\\s+\"}");
    char dir[4200];
    snprintf(dir, sizeof dir, "data.vocab_dir=%s", tmpdir);
    const char *custom[] = {"model.preset=nano", "data.encoding=small44", dir};
    lt_config *cfg = config_with(custom, 3);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_OK);
    assert_same_shape(&m, lt_model_preset("nano"), 311);
    lt_config_free(cfg);
    const char *plain[] = {"model.preset=nano", "data.encoding=plain", dir};
    cfg = config_with(plain, 3);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_OK);
    assert_int_equal(m.vocab, 266);
    lt_config_free(cfg);
    /* an encoding found nowhere: the model's size is unknown, said so with both keys */
    const char *nowhere[] = {"model.preset=nano", "data.encoding=nope", dir};
    cfg = config_with(nowhere, 3);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "model.vocab is unset and the size of data.encoding = nope is unknown"));
    assert_non_null(strstr(err.what, "encoding 'nope' not found"));
    assert_string_equal(err.where, "--set");
    assert_non_null(strstr(err.hint, "data.vocab_dir"));
    lt_config_free(cfg);
    /* a broken rank file is named with its line */
    write_text("broken.tiktoken", "AA== 0\nAQ==\n");
    write_text("broken.json", "{}");
    const char *broken[] = {"model.preset=nano", "data.encoding=broken", dir};
    cfg = config_with(broken, 3);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "broken.tiktoken:2: expected 'BASE64 RANK'"));
    lt_config_free(cfg);
}

static void test_vocab_sizes_of_the_shipped_encodings_are_their_files(void **state) {
    (void)state;
    const char *vocab = source_dir("data/vocab/cl100k_base.tiktoken");
    if (!vocab) skip();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", vocab);
    *strrchr(dir, '/') = '\0';
    const char *enc[] = {"r50k_base", "cl100k_base", "o200k_base"};
    for (int i = 0; i < 3; i++) {
        /* the files under another name, so that lt_encoding_n_vocab reads them */
        char from[4200], to[4200];
        for (int j = 0; j < 2; j++) {
            const char *ext = j ? ".json" : ".tiktoken";
            snprintf(from, sizeof from, "%s/%s%s", dir, enc[i], ext);
            snprintf(to, sizeof to, "%s/copy_%s%s", tmpdir, enc[i], ext);
            unlink(to);
            assert_int_equal(symlink(from, to), 0);
        }
        char copy[64];
        snprintf(copy, sizeof copy, "copy_%s", enc[i]);
        int known = 0, read = 0;
        lt_error err;
        assert_int_equal(lt_encoding_n_vocab(enc[i], NULL, &known, &err), LT_OK);
        if (lt_encoding_n_vocab(copy, tmpdir, &read, &err) != LT_OK) fail_msg("%s: %s", copy, err.what);
        assert_int_equal(read, known);
    }
}

static void test_explicit_vocab_is_at_least_the_encodings(void **state) {
    (void)state;
    lt_error err;
    lt_model_shape m;
    /* larger (a padded head) or equal: taken */
    const char *larger[] = {"model.preset=nano", "model.vocab=100352"};
    lt_config *cfg = config_with(larger, 2);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_OK);
    assert_int_equal(m.vocab, 100352);
    lt_config_free(cfg);
    const char *equal[] = {"model.preset=small", "model.vocab=50257", "data.encoding=r50k_base"};
    cfg = config_with(equal, 3);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_OK);
    assert_int_equal(m.vocab, 50257);
    lt_config_free(cfg);
    /* smaller: a config error at model.vocab naming both keys */
    const char *smaller[] = {"model.preset=llama-7b", "model.vocab=32000"};
    cfg = config_with(smaller, 2);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_ERR_CONFIG);
    assert_string_equal(err.what, "model.vocab = 32000 is smaller than the vocabulary of data.encoding = cl100k_base "
                                  "(100277 ids)");
    assert_string_equal(err.where, "--set");
    assert_non_null(strstr(err.hint, "100277"));
    /* a --model override ignores model.vocab, as every dimension: the encoding's */
    assert_int_equal(lt_model_from_config(cfg, "nano", &m, &err), LT_OK);
    assert_int_equal(m.vocab, CL100K);
    lt_config_free(cfg);
    /* an encoding of its own: its files decide */
    write_encoding("small44", 44, "{\"pat_str\": \"\\\\S+|\\\\s+\", \"special_tokens\": {\"<|end|>\": 310}}");
    char dir[4200];
    snprintf(dir, sizeof dir, "data.vocab_dir=%s", tmpdir);
    const char *own[] = {"model.preset=nano", "data.encoding=small44", dir, "model.vocab=310"};
    cfg = config_with(own, 4);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_ERR_CONFIG);
    assert_non_null(strstr(err.what, "data.encoding = small44 (311 ids)"));
    assert_int_equal(lt_config_set(cfg, "model.vocab=512", &err), LT_OK);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_OK);
    assert_int_equal(m.vocab, 512);
    lt_config_free(cfg);
    /* an encoding whose files are not here (the planner's machine): model.vocab is taken */
    const char *absent[] = {"model.preset=nano", "data.encoding=elsewhere", "model.vocab=64"};
    cfg = config_with(absent, 3);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_OK);
    assert_int_equal(m.vocab, 64);
    lt_config_free(cfg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_preset_is_valid_and_named_uniquely),
        cmocka_unit_test(test_preset_dimensions_match_their_sources),
        cmocka_unit_test(test_validate_rejects_broken_shapes),
        cmocka_unit_test(test_parameter_counts_match_published_sizes),
        cmocka_unit_test(test_forward_flops_of_tiny_by_hand),
        cmocka_unit_test(test_gpt_flops_match_helixpipe_table1),
        cmocka_unit_test(test_quadratic_term_dominates_beyond_crossover),
        cmocka_unit_test(test_model_from_config_preset_and_default),
        cmocka_unit_test(test_model_from_config_overrides_and_dims_only),
        cmocka_unit_test(test_model_from_config_unknown_names),
        cmocka_unit_test(test_vocab_defaults_to_the_encodings_size),
        cmocka_unit_test(test_vocab_sizes_of_the_shipped_encodings_are_their_files),
        cmocka_unit_test(test_explicit_vocab_is_at_least_the_encodings),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
