/*
 * bench/trainer/bench_trainer.c — forward + backward time per token of the CPU fp32 trainer
 * (train/model/model.h) on one unit; the longtail half of bench/trainer (bench_torch.py is the
 * PyTorch peer, run.sh runs both, interleaved, and tabulates).
 *
 *     bench_trainer [--model small] [--tokens 4096] [--samples 1] [--threads 2]
 *                   [--reps 5] [--warmup 1] [--seed 1]
 *
 * The model: a lib/model.h preset (default `small`: 8 layers, hidden 256, 8 heads, 4 kv
 * heads, SwiGLU 704, untied vocab 32000), lt_llama_init(seed). The unit: --tokens tokens
 * made of --samples whole samples packed back to back (lengths as even as possible, the
 * first ones one token longer), token ids uniform in [0, vocab) from lib/rng, so attention
 * is per document and causal (train/model/model.h) and the loss predicts sum (L_i - 1) tokens.
 *
 * A step is what a training step costs before the optimizer: zero the gradient buffer
 * (memset of all n_params floats), then lt_llama_step_units(one unit, loss_scale = 1/N,
 * grads): forward, fused LM head + cross-entropy + its backward, backward, with a private KV
 * context and activations allocated and freed inside the call. --warmup untimed steps, then
 * --reps timed ones, each timed with clock_gettime(CLOCK_MONOTONIC). Threads: lt_cpu_init
 * (train/cpu/threads.h): OpenBLAS and the kernels' lt_pool both get --threads.
 *
 * GEMM share: lt_linear_timing (train/cpu/kernels.h) sums the wall time inside the cblas_sgemm
 * calls of lt_linear_forward/backward (every projection, the MLP and the LM head); the share
 * is that sum over all timed steps divided by their total time. The rest is attention,
 * norms, RoPE, SwiGLU, cross-entropy, embedding, copies, memsets and allocation.
 *
 * Output, key=value (MB = 2^20 bytes, from getrusage ru_maxrss):
 *     bench=longtail step=I ms=... gemm_ms=... loss=...          one per timed step
 *     bench=longtail model=small tokens=4096 samples=1 threads=2 reps=5 warmup=1
 *       params=... predicted=... loss=... ms_per_step=... (median) best_ms=... us_per_token=...
 *       (median) gemm_share=... gemm_ms_per_step=... gflop_per_step=... gflops=...
 *       rss_before_mb=... peak_rss_mb=...
 * gflop_per_step = 3 x lt_model_forward_flops summed over the samples (backward = 2x the
 * forward; model FLOPs, not the kernels' actual work: the reference attention computes the
 * scores twice in the forward and three times in the backward); gflops uses the median.
 * rss_before_mb: peak RSS once the model and gradient buffer exist, before the first step.
 * Exit status: 0; 1 when a step fails; 2 bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "lib/error.h"         /* lt_error, lt_error_exit */
#include "lib/model.h"         /* lt_model_preset, lt_model_forward_flops */
#include "lib/rng.h"           /* lt_rng_seed, lt_rng_below */
#include "lib/threadpool.h"    /* lt_pool_destroy */
#include "train/cpu/threads.h" /* lt_cpu_init */
#include "train/cpu/kernels.h" /* lt_linear_timing, lt_linear_seconds */
#include "train/model/model.h" /* lt_llama_*, lt_train_sample, lt_train_unit */

typedef struct options {
    const char *model;
    int tokens, samples, threads, reps, warmup;
    uint64_t seed;
} options;

static void usage(FILE *out) {
    fputs("usage: bench_trainer [--model small] [--tokens 4096] [--samples 1] [--threads 2]\n"
          "                     [--reps 5] [--warmup 1] [--seed 1]\n",
          out);
}

/* An int option value >= min, else exit 2. */
static int parse_int(const char *name, const char *value, int min) {
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || v < min || v > 1 << 24) {
        fprintf(stderr, "bench_trainer: error: %s takes an integer >= %d, not '%s'\n", name, min, value);
        usage(stderr);
        exit(2);
    }
    return (int)v;
}

static void parse_options(int argc, char **argv, options *o) {
    *o = (options){.model = "small", .tokens = 4096, .samples = 1, .threads = 2, .reps = 5, .warmup = 1,
                   .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_trainer: error: unknown argument or missing value: '%s'\n", a);
            usage(stderr);
            exit(2);
        }
        const char *v = argv[++i];
        if (strcmp(a, "--model") == 0) o->model = v;
        else if (strcmp(a, "--tokens") == 0) o->tokens = parse_int(a, v, 1);
        else if (strcmp(a, "--samples") == 0) o->samples = parse_int(a, v, 1);
        else if (strcmp(a, "--threads") == 0) o->threads = parse_int(a, v, 1);
        else if (strcmp(a, "--reps") == 0) o->reps = parse_int(a, v, 1);
        else if (strcmp(a, "--warmup") == 0) o->warmup = parse_int(a, v, 0);
        else if (strcmp(a, "--seed") == 0) o->seed = (uint64_t)parse_int(a, v, 1);
        else {
            fprintf(stderr, "bench_trainer: error: unknown argument '%s'\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (o->samples > o->tokens) {
        fprintf(stderr, "bench_trainer: error: --samples %d > --tokens %d (a sample needs a token)\n", o->samples,
                o->tokens);
        exit(2);
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double peak_rss_mb(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
    return (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n) {
    double *s = malloc((size_t)n * sizeof *s);
    LT_CHECK_ALLOC(s);
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

int main(int argc, char **argv) {
    lt_set_program("bench_trainer");
    options o;
    parse_options(argc, argv, &o);
    lt_error err;
    lt_error_clear(&err);

    const lt_model_shape *preset = lt_model_preset(o.model);
    if (!preset) {
        fprintf(stderr, "bench_trainer: error: unknown model '%s' (a lib/model.c preset, e.g. small)\n", o.model);
        return 2;
    }
    lt_pool *pool = NULL;
    int threads = 0;
    if (lt_cpu_init(o.threads, &pool, &threads, &err) != LT_OK) return lt_error_exit(&err);

    lt_llama m;
    if (lt_llama_create(&m, preset, &err) != LT_OK) return lt_error_exit(&err);
    lt_llama_init(&m, o.seed);

    /* the batch: K whole samples, one unit packing them all */
    int32_t *tokens = malloc((size_t)o.tokens * sizeof *tokens);
    lt_train_sample *samples = malloc((size_t)o.samples * sizeof *samples);
    lt_train_slice *slices = malloc((size_t)o.samples * sizeof *slices);
    float *grad_buf = malloc(m.n_params * sizeof(float));
    lt_layer_views *grad_layers = malloc((size_t)m.shape.layers * sizeof *grad_layers);
    LT_CHECK_ALLOC(tokens);
    LT_CHECK_ALLOC(samples);
    LT_CHECK_ALLOC(slices);
    LT_CHECK_ALLOC(grad_buf);
    LT_CHECK_ALLOC(grad_layers);
    lt_rng rng;
    lt_rng_seed(&rng, o.seed + 1000);
    for (int t = 0; t < o.tokens; t++) tokens[t] = (int32_t)lt_rng_below(&rng, (uint64_t)m.shape.vocab);
    double gflop = 0;
    for (int i = 0, at = 0; i < o.samples; i++) {
        int len = o.tokens / o.samples + (i < o.tokens % o.samples);
        samples[i] = (lt_train_sample){.tokens = tokens + at, .len = len};
        slices[i] = (lt_train_slice){.sample = i, .begin = 0, .end = len};
        gflop += 3.0 * lt_model_forward_flops(&m.shape, len) * 1e-9;
        at += len;
    }
    lt_batch batch = {.samples = samples, .n_samples = o.samples};
    lt_train_unit unit = {.slices = slices, .n_slices = o.samples};
    int64_t predicted = lt_batch_predicted_tokens(&batch);
    float loss_scale = predicted > 0 ? 1.0f / (float)predicted : 0.0f;
    lt_llama_views grads;
    lt_llama_views_of(&m, grad_buf, grad_layers, &grads);
    memset(grad_buf, 0, m.n_params * sizeof(float)); /* touch it: counted in rss_before */
    double rss_before = peak_rss_mb();

    double *step_ms = malloc((size_t)o.reps * sizeof *step_ms);
    double *gemm_ms = malloc((size_t)o.reps * sizeof *gemm_ms);
    LT_CHECK_ALLOC(step_ms);
    LT_CHECK_ALLOC(gemm_ms);
    double loss = 0;
    lt_linear_timing(true);
    for (int r = -o.warmup; r < o.reps; r++) {
        double g0 = lt_linear_seconds(), t0 = now_s();
        memset(grad_buf, 0, m.n_params * sizeof(float));
        double loss_sum = 0;
        if (lt_llama_step_units(&m, &batch, &unit, 1, loss_scale, &grads, NULL, &loss_sum, pool, &err) != LT_OK)
            return lt_error_exit(&err);
        double t1 = now_s(), g1 = lt_linear_seconds();
        loss = predicted > 0 ? loss_sum / (double)predicted : 0.0;
        if (r < 0) continue;
        step_ms[r] = (t1 - t0) * 1e3;
        gemm_ms[r] = (g1 - g0) * 1e3;
        printf("bench=longtail step=%d ms=%.2f gemm_ms=%.2f loss=%.6f\n", r, step_ms[r], gemm_ms[r], loss);
        fflush(stdout);
    }
    lt_linear_timing(false);

    double total_ms = 0, total_gemm = 0, best = step_ms[0];
    for (int r = 0; r < o.reps; r++) {
        total_ms += step_ms[r];
        total_gemm += gemm_ms[r];
        if (step_ms[r] < best) best = step_ms[r];
    }
    double med = median(step_ms, o.reps);
    printf("bench=longtail model=%s tokens=%d samples=%d threads=%d reps=%d warmup=%d params=%zu predicted=%" PRId64
           " loss=%.6f ms_per_step=%.2f best_ms=%.2f us_per_token=%.3f gemm_share=%.4f gemm_ms_per_step=%.2f"
           " gflop_per_step=%.2f gflops=%.2f rss_before_mb=%.1f peak_rss_mb=%.1f\n",
           o.model, o.tokens, o.samples, threads, o.reps, o.warmup, m.n_params, predicted, loss, med, best,
           med * 1e3 / o.tokens, total_ms > 0 ? total_gemm / total_ms : 0.0, total_gemm / o.reps, gflop,
           med > 0 ? gflop / (med * 1e-3) : 0.0, rss_before, peak_rss_mb());

    free(step_ms), free(gemm_ms);
    free(tokens), free(samples), free(slices), free(grad_buf), free(grad_layers);
    lt_llama_free(&m);
    lt_pool_destroy(pool);
    return 0;
}
