/*
 * train/cmd/generate.c — `trainer generate`: text from a checkpoint. The prompt is encoded
 * with the tokenizer of dataprep (tiktoken-exact), run once as one unit, then each new
 * token is a one-token slice whose attention reads the KV context the earlier tokens left:
 * the KV context of training is the KV cache of inference, so nothing is recomputed.
 * Temperature 0 is greedy (argmax); otherwise sampling from softmax(logits / T) with a
 * Philox stream seeded by --seed. Generation stops at --max-tokens or at the encoding's
 * <|endoftext|>. Prints the prompt followed by the continuation.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/hf_tokenizer.h" /* lt_hf_tokenizer_load: --tokenizer tokenizer.json */
#include "dataprep/tokenizer.h"    /* lt_tokenizer_* */
#include "lib/cli.h"            /* lt_cli_option_value */
#include "lib/log.h"            /* LT_WARN */
#include "lib/rng.h"            /* lt_rng */
#include "train/cmd/cmd.h"      /* generate_command, lt_cmd_load_model */
#include "train/cpu/threads.h"  /* lt_cpu_init */
#include "train/model/model.h"  /* lt_llama_forward, lt_kvctx */

/* The next token from the last row's logits. */
static int32_t pick(const float *logits, int V, double temperature, lt_rng *r) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (temperature <= 0) return best;
    double sum = 0;
    for (int i = 0; i < V; i++) sum += exp(((double)logits[i] - logits[best]) / temperature);
    double u = lt_rng_double(r) * sum, acc = 0;
    for (int i = 0; i < V; i++) {
        acc += exp(((double)logits[i] - logits[best]) / temperature);
        if (acc >= u) return i;
    }
    return best;
}

typedef struct gen_args {
    const char *ckpt, *encoding, *prompt, *vocab_dir, *tokenizer;
    long long max_tokens, seed;
    double temperature;
} gen_args;

static int parse(lt_cli_ctx *ctx, gen_args *a) {
    memset(a, 0, sizeof *a);
    a->max_tokens = 64;
    a->seed = 1234;
    for (int i = 1; i < ctx->argc; i++) {
        int missing = 0;
        const char *v;
        char *end = NULL;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--ckpt", &missing))) a->ckpt = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--encoding", &missing))) a->encoding = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--prompt", &missing))) a->prompt = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--vocab-dir", &missing))) a->vocab_dir = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--tokenizer", &missing))) a->tokenizer = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--max-tokens", &missing))) {
            a->max_tokens = strtoll(v, &end, 10);
            if (*end || a->max_tokens < 0 || a->max_tokens > 1000000)
                return lt_cli_usage(ctx, "--max-tokens wants a count in [0, 1000000], got '%.100s'", v);
        } else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--temperature", &missing))) {
            a->temperature = strtod(v, &end);
            if (*end || !(a->temperature >= 0) || a->temperature > 100)
                return lt_cli_usage(ctx, "--temperature wants a number in [0, 100], got '%.100s'", v);
        } else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--seed", &missing))) {
            a->seed = strtoll(v, &end, 10);
            if (*end || a->seed < 0) return lt_cli_usage(ctx, "--seed wants a non-negative integer, got '%.100s'", v);
        } else if (missing) return lt_cli_usage(ctx, "%s needs a value", ctx->argv[i]);
        else if (ctx->argv[i][0] == '-') return lt_cli_unknown_option(ctx, ctx->argv[i]);
        else return lt_cli_usage(ctx, "unexpected argument '%.200s'", ctx->argv[i]);
    }
    if (!a->ckpt) return lt_cli_usage(ctx, "which model? give --ckpt CKPT");
    if (!a->encoding && !a->tokenizer && !a->vocab_dir) a->tokenizer = lt_config_get_string(ctx->config, "data", "tokenizer");
    if (!a->encoding && !a->tokenizer)
        return lt_cli_usage(ctx, "which tokenizer? give --encoding NAME (e.g. cl100k_base) or --tokenizer FILE.json");
    if (!a->prompt) return lt_cli_usage(ctx, "give --prompt TEXT");
    return 0;
}

static lt_status generate(const gen_args *a, const lt_llama *m, const lt_tokenizer *tok, lt_pool *pool, FILE *out,
                          lt_error *err) {
    lt_tok_scratch *scratch = lt_tok_scratch_new();
    size_t plen_bytes = strlen(a->prompt);
    size_t cap = lt_tokenizer_max_tokens(plen_bytes) + 1;
    uint32_t *ids = malloc(cap * sizeof *ids);
    if (!scratch || !ids) {
        lt_tok_scratch_free(scratch);
        free(ids);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory encoding the prompt");
    }
    lt_encode_info info = {0, 0};
    lt_status st = lt_tokenizer_encode(tok, scratch, a->prompt, plen_bytes, ids, cap, &info, err);
    size_t n_prompt = info.n_tokens;
    lt_tok_scratch_free(scratch);
    if (st == LT_OK && n_prompt == 0) st = lt_fail(err, LT_ERR_USAGE, "--prompt", "the prompt encodes to no token");
    if (st != LT_OK) {
        free(ids);
        return st;
    }
    int total = (int)n_prompt + (int)a->max_tokens;
    int32_t *seq = calloc((size_t)total + 1, sizeof *seq);
    float *logits = malloc((size_t)n_prompt * (size_t)m->shape.vocab * sizeof(float));
    if (!seq || !logits) {
        free(ids), free(seq), free(logits);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for %d tokens", total);
    }
    for (size_t i = 0; i < n_prompt; i++) {
        if (ids[i] >= (uint32_t)m->shape.vocab) {
            lt_fail(err, LT_ERR_USAGE, "--encoding", "the prompt has token id %u, the model's vocabulary is %d", ids[i],
                    m->shape.vocab);
            lt_error_hint(err, "use the encoding the model was trained with");
            free(ids), free(seq), free(logits); /* after the message, which reads ids[i] */
            return LT_ERR_USAGE;
        }
        seq[i] = (int32_t)ids[i];
    }
    free(ids);
    int64_t eot = lt_tokenizer_special_id(tok, "<|endoftext|>");
    lt_train_sample s = {seq, total > (int)n_prompt ? total : (int)n_prompt};
    lt_batch b = {&s, 1};
    lt_kvctx kv;
    st = lt_kvctx_init(&kv, m, &b, false, err);
    lt_rng rng;
    lt_rng_seed(&rng, (uint64_t)a->seed);
    lt_pass pass = {.l0 = 0, .l1 = m->shape.layers, .embed = true, .head = true};
    int n = (int)n_prompt;
    lt_train_slice sl = {0, 0, n};
    while (st == LT_OK) {
        lt_train_unit u = {&sl, 1};
        lt_acts acts;
        st = lt_acts_alloc(&acts, m, &b, &u, 0, m->shape.layers, true, err);
        double loss;
        if (st == LT_OK) st = lt_llama_forward(m, &pass, &b, &u, NULL, &kv, &acts, NULL, &loss, logits, pool, err);
        int rows = acts.T;
        lt_acts_free(&acts);
        if (st != LT_OK || n >= total) break;
        int32_t next = pick(logits + (size_t)(rows - 1) * (size_t)m->shape.vocab, m->shape.vocab, a->temperature, &rng);
        if (eot >= 0 && next == eot) break;
        seq[n] = next;
        sl.begin = n;
        sl.end = ++n;
    }
    lt_kvctx_free(&kv);
    free(logits);
    if (st == LT_OK) {
        size_t ocap = (size_t)n * 64 + 16;
        char *text = malloc(ocap);
        uint32_t *u32 = malloc((size_t)n * sizeof *u32);
        size_t olen = 0;
        if (!text || !u32) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory decoding");
        for (int i = 0; st == LT_OK && i < n; i++) u32[i] = (uint32_t)seq[i];
        if (st == LT_OK) st = lt_tokenizer_decode(tok, u32, (size_t)n, text, ocap, &olen, err);
        if (st == LT_OK) {
            fwrite(text, 1, olen, out);
            fputc('\n', out);
        }
        free(text), free(u32);
    }
    free(seq);
    return st;
}

int generate_command(lt_cli_ctx *ctx) {
    gen_args a;
    int rc = parse(ctx, &a);
    if (rc) return rc;
    lt_error err;
    lt_llama m;
    lt_status st = lt_cmd_load_model(ctx, a.ckpt, &m, NULL, NULL, &err);
    if (st != LT_OK) return lt_error_exit(&err);
    lt_tokenizer *tok = NULL;
    lt_pool *pool = NULL;
    st = a.encoding ? lt_tokenizer_load_encoding(&tok, a.encoding, a.vocab_dir, LT_PRETOK_ENGINE_AUTO, &err)
                    : lt_hf_tokenizer_load(&tok, a.tokenizer, LT_PRETOK_ENGINE_AUTO, &err);
    if (st == LT_OK && lt_tokenizer_n_vocab(tok) > (uint32_t)m.shape.vocab)
        LT_WARN("tokenizer %s has %u ids, the model's vocabulary %d: prompts with larger ids are refused",
                lt_tokenizer_name(tok), lt_tokenizer_n_vocab(tok), m.shape.vocab);
    if (st == LT_OK) st = lt_cmd_backend(ctx, &err);
    if (st == LT_OK) st = lt_cpu_init(lt_cmd_threads(ctx), &pool, NULL, &err);
    if (st == LT_OK) st = generate(&a, &m, tok, pool, stdout, &err);
    lt_pool_destroy(pool);
    lt_tokenizer_free(tok);
    lt_llama_free(&m);
    return st == LT_OK ? 0 : lt_error_exit(&err);
}
