/*
 * tests/lib/test_model.c — lib/model: the presets are valid and unique, parameter counts
 * match the published model sizes, the forward-FLOPs formula matches hand computations
 * (and HelixPipe Table 1 for a GPT shape), and the causal attention term overtakes the
 * linear terms exactly at the crossover length derived from the dimensions; the model of a
 * config (preset, preset + dimension overrides, dimensions only, a --model override,
 * unknown names) is picked as lt_model_from_config documents.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static void assert_same_shape(const lt_model_shape *a, const lt_model_shape *b) {
    assert_non_null(b);
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->layers, b->layers);
    assert_int_equal(a->hidden, b->hidden);
    assert_int_equal(a->heads, b->heads);
    assert_int_equal(a->kv_heads, b->kv_heads);
    assert_int_equal(a->ffn, b->ffn);
    assert_int_equal(a->vocab, b->vocab);
    assert_int_equal(a->gated_ffn, b->gated_ffn);
}

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
    assert_same_shape(&m, lt_model_preset("llama-7b"));
    lt_config_free(cfg);
    /* a preset, taken as it is */
    const char *preset[] = {"model.preset=qwen2.5-7b"};
    cfg = config_with(preset, 1);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_OK);
    assert_same_shape(&m, lt_model_preset("qwen2.5-7b"));
    /* --model wins over model.preset */
    assert_int_equal(lt_model_from_config(cfg, "gpt-13b", &m, &err), LT_OK);
    assert_same_shape(&m, lt_model_preset("gpt-13b"));
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
    assert_int_equal(m.vocab, 32000);
    assert_int_equal(m.gated_ffn, 1);
    /* a --model override ignores the config's dimensions */
    assert_int_equal(lt_model_from_config(cfg, "llama-13b", &m, &err), LT_OK);
    assert_same_shape(&m, lt_model_preset("llama-13b"));
    lt_config_free(cfg);
    /* dimensions only: a custom SwiGLU model, kv_heads = heads, vocab 32000 */
    const char *dims[] = {"model.layers=2", "model.hidden=64", "model.heads=4", "model.ffn=128"};
    cfg = config_with(dims, 4);
    assert_int_equal(lt_model_from_config(cfg, NULL, &m, &err), LT_OK);
    assert_string_equal(m.name, "custom");
    assert_int_equal(m.layers, 2);
    assert_int_equal(m.hidden, 64);
    assert_int_equal(m.heads, 4);
    assert_int_equal(m.kv_heads, 4);
    assert_int_equal(m.ffn, 128);
    assert_int_equal(m.vocab, 32000);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
