/*
 * tests/train/parity_tool.c — drives the trainer's model for tests/train/torch_parity.py,
 * where PyTorch autograd is the reference. It never decides pass/fail: it writes what
 * the C model computes, the Python script compares.
 *
 *   parity_tool layout SPEC.json          the parameter tensors in buffer order: "name rows cols"
 *   parity_tool run SPEC.json OUTDIR      forward + backward of the spec's units, then AdamW steps
 *   parity_tool logits SPEC.json OUTDIR   logits of each sample whole (for the transformers check)
 *
 * SPEC.json: {"model": {"layers","hidden","heads","kv_heads","ffn","vocab","rope_theta",
 *   "norm_eps","tie"}, "weights": "raw fp32 file in layout order" (or "ckpt": a checkpoint),
 *   "samples": [[ids...], ...], "units": [[[sample, begin, end], ...], ...],
 *   "optim": {"lr","min_lr","warmup_steps","total_steps","weight_decay","beta1","beta2",
 *   "eps","grad_clip","steps"}, "threads": N}
 *
 * OUTDIR of `run` (raw little-endian fp32 unless said otherwise):
 *   logits_u<i>.bin   [T_i, V] logits of unit i (first step's forward)
 *   loss.txt          "loss_sum N" of the first step (N = predicted tokens of the batch)
 *   grads.bin         the gradient buffer after the first step's backward (layout order)
 *   kv_full_s<j>.bin  sample j's KV-context gradients after the whole backward: per layer
 *                     dK [len, kvd] then dV [len, kvd]
 *   kv_after_u<i>_s<j>.bin  the same right after unit i's backward (backward runs units
 *                     in reverse order), for every sample j the unit touches
 *   steps.txt         one line per AdamW step: "step loss_mean grad_norm lr"
 *   params.bin        the parameters after the AdamW steps
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h"
#include "lib/files.h"
#include "lib/json.h"
#include "lib/threadpool.h"
#include "train/io/ckpt.h"
#include "train/model/model.h"
#include "train/model/optim.h"

static double num(const lt_jv *obj, const char *key, double dflt) {
    const lt_jv *v = lt_jv_get(obj, key);
    if (!v) return dflt;
    if (v->type == LT_JV_BOOL) return v->boolean ? 1 : 0;
    if (v->type != LT_JV_NUMBER) lt_die("spec: '%s' is not a number", key);
    return strtod(v->text, NULL);
}

static void write_raw(const char *dir, const char *name, const float *p, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    lt_error err;
    if (lt_write_file_atomic(path, p, n * sizeof(float), &err) != LT_OK) lt_error_exit(&err);
}

typedef struct spec {
    lt_jv *root;
    lt_model_shape shape;
    lt_train_sample *samples;
    int32_t **tokens;
    lt_batch batch;
    lt_train_unit *units;
    lt_train_slice **slices;
    int n_units;
} spec;

static void load_spec(const char *path, spec *s, lt_llama *m) {
    lt_error err;
    char *text;
    size_t len;
    if (lt_read_file(path, &text, &len, &err) != LT_OK || lt_json_parse(text, len, &s->root, &err) != LT_OK)
        lt_error_exit(&err);
    free(text);
    const lt_jv *md = lt_jv_get(s->root, "model");
    memset(&s->shape, 0, sizeof s->shape);
    s->shape.name = "parity";
    s->shape.layers = (int)num(md, "layers", 2);
    s->shape.hidden = (int)num(md, "hidden", 64);
    s->shape.heads = (int)num(md, "heads", 4);
    s->shape.kv_heads = (int)num(md, "kv_heads", 2);
    s->shape.ffn = (int)num(md, "ffn", 192);
    s->shape.vocab = (int)num(md, "vocab", 97);
    s->shape.gated_ffn = 1;
    s->shape.rope_theta = num(md, "rope_theta", 10000);
    s->shape.norm_eps = num(md, "norm_eps", 1e-5);
    s->shape.tie_embeddings = (int)num(md, "tie", 0);
    const lt_jv *ck = lt_jv_get(s->root, "ckpt");
    if (ck) {
        lt_ckpt_state st;
        if (lt_ckpt_read(ck->text, m, NULL, &st, &err) != LT_OK) lt_error_exit(&err);
    } else if (lt_llama_create(m, &s->shape, &err) != LT_OK) {
        lt_error_exit(&err);
    }
    const lt_jv *sm = lt_jv_get(s->root, "samples");
    s->batch.n_samples = sm ? (int)sm->n : 0;
    s->samples = calloc((size_t)s->batch.n_samples + 1, sizeof *s->samples);
    s->tokens = calloc((size_t)s->batch.n_samples + 1, sizeof *s->tokens);
    LT_CHECK_ALLOC(s->samples);
    LT_CHECK_ALLOC(s->tokens);
    for (int i = 0; i < s->batch.n_samples; i++) {
        const lt_jv *a = &sm->items[i];
        s->tokens[i] = calloc(a->n + 1, sizeof(int32_t));
        LT_CHECK_ALLOC(s->tokens[i]);
        for (size_t t = 0; t < a->n; t++) s->tokens[i][t] = (int32_t)strtol(a->items[t].text, NULL, 10);
        s->samples[i].tokens = s->tokens[i];
        s->samples[i].len = (int)a->n;
    }
    s->batch.samples = s->samples;
    const lt_jv *us = lt_jv_get(s->root, "units");
    s->n_units = us ? (int)us->n : 0;
    s->units = calloc((size_t)s->n_units + 1, sizeof *s->units);
    s->slices = calloc((size_t)s->n_units + 1, sizeof *s->slices);
    LT_CHECK_ALLOC(s->units);
    LT_CHECK_ALLOC(s->slices);
    for (int i = 0; i < s->n_units; i++) {
        const lt_jv *u = &us->items[i];
        s->slices[i] = calloc(u->n + 1, sizeof(lt_train_slice));
        LT_CHECK_ALLOC(s->slices[i]);
        for (size_t j = 0; j < u->n; j++) {
            const lt_jv *sl = &u->items[j];
            s->slices[i][j].sample = (int)strtol(sl->items[0].text, NULL, 10);
            s->slices[i][j].begin = (int)strtol(sl->items[1].text, NULL, 10);
            s->slices[i][j].end = (int)strtol(sl->items[2].text, NULL, 10);
        }
        s->units[i].slices = s->slices[i];
        s->units[i].n_slices = (int)u->n;
    }
}

static void free_spec(spec *s) {
    for (int i = 0; i < s->batch.n_samples; i++) free(s->tokens[i]);
    for (int i = 0; i < s->n_units; i++) free(s->slices[i]);
    free(s->tokens), free(s->samples), free(s->units), free(s->slices);
    lt_jv_free(s->root);
}

static void load_weights(const spec *s, lt_llama *m) {
    const lt_jv *w = lt_jv_get(s->root, "weights");
    if (!w) return; /* a checkpoint gave them */
    lt_error err;
    char *data;
    size_t len;
    if (lt_read_file(w->text, &data, &len, &err) != LT_OK) lt_error_exit(&err);
    if (len != m->n_params * sizeof(float))
        lt_die("weights file %s has %zu bytes, the model needs %zu", w->text, len, m->n_params * sizeof(float));
    memcpy(m->params, data, len);
    free(data);
}

/* Dump the KV-context gradients of sample j. */
static void dump_kv(const char *dir, const char *name, const lt_kvctx *kv, int j) {
    const lt_kv_sample *ks = &kv->s[j];
    if (!ks->dk || !ks->dk[0]) return;
    size_t per = (size_t)ks->len * (size_t)kv->kvd;
    float *buf = malloc(per * 2 * (size_t)kv->layers * sizeof(float));
    LT_CHECK_ALLOC(buf);
    for (int l = 0; l < kv->layers; l++) {
        memcpy(buf + (size_t)l * 2 * per, ks->dk[l], per * sizeof(float));
        memcpy(buf + ((size_t)l * 2 + 1) * per, ks->dv[l], per * sizeof(float));
    }
    write_raw(dir, name, buf, per * 2 * (size_t)kv->layers);
    free(buf);
}

static int cmd_run(spec *s, lt_llama *m, const char *out, lt_pool *pool) {
    lt_error err;
    int64_t N = lt_batch_predicted_tokens(&s->batch);
    float scale = (float)(1.0 / (double)N);
    float *gbuf = calloc(m->n_params, sizeof(float));
    lt_layer_views *glv = calloc((size_t)m->shape.layers, sizeof *glv);
    LT_CHECK_ALLOC(gbuf);
    LT_CHECK_ALLOC(glv);
    lt_llama_views g;
    lt_llama_views_of(m, gbuf, glv, &g);

    /* step 1, unit by unit, dumping as it goes */
    lt_kvctx kv;
    if (lt_kvctx_init(&kv, m, &s->batch, true, &err) != LT_OK) lt_error_exit(&err);
    lt_pass pass = {.l0 = 0, .l1 = m->shape.layers, .embed = true, .head = true, .loss_scale = scale};
    lt_acts *acts = calloc((size_t)s->n_units, sizeof *acts);
    LT_CHECK_ALLOC(acts);
    double loss_sum = 0;
    char name[256];
    for (int i = 0; i < s->n_units; i++) {
        if (lt_acts_alloc(&acts[i], m, &s->batch, &s->units[i], 0, m->shape.layers, true, &err) != LT_OK)
            lt_error_exit(&err);
        float *logits = malloc((size_t)acts[i].T * (size_t)m->shape.vocab * sizeof(float));
        LT_CHECK_ALLOC(logits);
        double l = 0;
        if (lt_llama_forward(m, &pass, &s->batch, &s->units[i], NULL, &kv, &acts[i], &g, &l, logits, pool, &err) !=
            LT_OK)
            lt_error_exit(&err);
        loss_sum += l;
        snprintf(name, sizeof name, "logits_u%d.bin", i);
        write_raw(out, name, logits, (size_t)acts[i].T * (size_t)m->shape.vocab);
        free(logits);
    }
    for (int i = s->n_units - 1; i >= 0; i--) {
        if (lt_llama_backward(m, &pass, &s->batch, &s->units[i], NULL, &kv, &acts[i], &g, NULL, pool, &err) != LT_OK)
            lt_error_exit(&err);
        for (int j = 0; j < s->units[i].n_slices; j++) {
            int smp = s->units[i].slices[j].sample;
            snprintf(name, sizeof name, "kv_after_u%d_s%d.bin", i, smp);
            dump_kv(out, name, &kv, smp);
        }
    }
    for (int j = 0; j < s->batch.n_samples; j++) {
        snprintf(name, sizeof name, "kv_full_s%d.bin", j);
        dump_kv(out, name, &kv, j);
    }
    for (int i = 0; i < s->n_units; i++) lt_acts_free(&acts[i]);
    free(acts);
    write_raw(out, "grads.bin", gbuf, m->n_params);
    char path[4096];
    snprintf(path, sizeof path, "%s/loss.txt", out);
    FILE *f = fopen(path, "w");
    if (!f) lt_die("cannot write %s", path);
    fprintf(f, "%.17g %lld\n", loss_sum, (long long)N);
    fclose(f);

    /* AdamW steps on the same batch (lt_llama_step_units: the same units, any order rule) */
    const lt_jv *oj = lt_jv_get(s->root, "optim");
    lt_optim_config oc = {
        num(oj, "lr", 1e-3), num(oj, "min_lr", 1e-4), num(oj, "weight_decay", 0.1), num(oj, "beta1", 0.9),
        num(oj, "beta2", 0.95), num(oj, "eps", 1e-8), num(oj, "grad_clip", 1.0),
        (int64_t)num(oj, "warmup_steps", 2), (int64_t)num(oj, "total_steps", 10),
    };
    int steps = (int)num(oj, "steps", 10);
    lt_adamw opt;
    if (lt_adamw_init(&opt, m->n_params, &err) != LT_OK) lt_error_exit(&err);
    snprintf(path, sizeof path, "%s/steps.txt", out);
    f = fopen(path, "w");
    if (!f) lt_die("cannot write %s", path);
    for (int step = 0; step < steps; step++) {
        memset(gbuf, 0, m->n_params * sizeof(float));
        double ls = 0;
        if (lt_llama_step_units(m, &s->batch, s->units, s->n_units, scale, &g, &kv, &ls, pool, &err) != LT_OK)
            lt_error_exit(&err);
        double norm = lt_clip_grads(gbuf, m->n_params, oc.grad_clip);
        double lr = lt_lr_at(&oc, step);
        lt_adamw_step(&opt, m, m->params, gbuf, lr, &oc);
        fprintf(f, "%d %.17g %.17g %.17g\n", step, ls / (double)N, norm, lr);
    }
    fclose(f);
    write_raw(out, "params.bin", m->params, m->n_params);
    lt_adamw_free(&opt);
    lt_kvctx_free(&kv);
    free(gbuf), free(glv);
    return 0;
}

/* Logits of each sample whole, one unit per sample: logits_s<j>.bin [len, V]. */
static int cmd_logits(spec *s, lt_llama *m, const char *out, lt_pool *pool) {
    lt_error err;
    lt_kvctx kv;
    if (lt_kvctx_init(&kv, m, &s->batch, false, &err) != LT_OK) lt_error_exit(&err);
    lt_pass pass = {.l0 = 0, .l1 = m->shape.layers, .embed = true, .head = true};
    for (int j = 0; j < s->batch.n_samples; j++) {
        lt_train_slice sl = {j, 0, s->samples[j].len};
        lt_train_unit u = {&sl, 1};
        lt_acts a;
        if (lt_acts_alloc(&a, m, &s->batch, &u, 0, m->shape.layers, true, &err) != LT_OK) lt_error_exit(&err);
        float *logits = malloc((size_t)a.T * (size_t)m->shape.vocab * sizeof(float));
        LT_CHECK_ALLOC(logits);
        double l;
        if (lt_llama_forward(m, &pass, &s->batch, &u, NULL, &kv, &a, NULL, &l, logits, pool, &err) != LT_OK)
            lt_error_exit(&err);
        char name[64];
        snprintf(name, sizeof name, "logits_s%d.bin", j);
        write_raw(out, name, logits, (size_t)a.T * (size_t)m->shape.vocab);
        free(logits);
        lt_acts_free(&a);
    }
    lt_kvctx_free(&kv);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: parity_tool layout|run|logits SPEC.json [OUTDIR]\n");
        return 2;
    }
    spec s;
    memset(&s, 0, sizeof s);
    lt_llama m;
    load_spec(argv[2], &s, &m);
    int rc = 0;
    if (strcmp(argv[1], "layout") == 0) {
        for (int i = 0; i < m.n_tensors; i++)
            printf("%s %d %d\n", m.tensors[i].name, m.tensors[i].rows, m.tensors[i].cols);
    } else if (argc >= 4 && (strcmp(argv[1], "run") == 0 || strcmp(argv[1], "logits") == 0)) {
        load_weights(&s, &m);
        int threads = (int)num(s.root, "threads", 1);
        lt_pool *pool = NULL;
        lt_error err;
        if (threads > 1 && lt_pool_create(&pool, threads, &err) != LT_OK) lt_error_exit(&err);
        rc = strcmp(argv[1], "run") == 0 ? cmd_run(&s, &m, argv[3], pool) : cmd_logits(&s, &m, argv[3], pool);
        lt_pool_destroy(pool);
    } else {
        fprintf(stderr, "parity_tool: unknown command '%s'\n", argv[1]);
        rc = 2;
    }
    lt_llama_free(&m);
    free_spec(&s);
    return rc;
}
