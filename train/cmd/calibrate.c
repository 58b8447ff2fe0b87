/*
 * train/cmd/calibrate.c — `trainer calibrate`: a hardware profile (plans/cost/hardware.h) of this
 * machine written from measurement, so that the planner's cost model prices the CPU fp32
 * trainer's ops as they run (issue 18, "Simulator against measurement"; docs/cost-model.md,
 * "Calibrating a CPU profile").
 *
 * What it measures, for each token count T of a ladder (the median of --repeat runs after
 * one warm-up run), the forward and the backward timed apart:
 *   layer(T)   one transformer layer's forward and backward on one causal sample of T tokens:
 *              lt_llama_forward / lt_llama_backward over a pass of one layer (no embedding,
 *              no head), its activations allocated per run on fresh pages, as the plan
 *              executor's ops get them (their layers together are above malloc's mmap
 *              threshold), so the forward pays for faulting them in as an F does;
 *   attn(T)    the attention core alone, lt_attention_forward and lt_attention_backward;
 *   gemm(T)    = layer(T) - attn(T), per direction: the projections and the MLP with the
 *              memory-bound operators around them (norms, RoPE, SwiGLU, residual adds), which
 *              the cost model folds into its GEMM curve (docs/cost-model.md, "Time");
 *   head(T)    at the counts up to HEAD_TOKENS: the fused final norm, LM head and loss,
 *              forward and backward, as the trainer's F over the model's end runs it.
 * How it fits. The backward / forward time factors of the cost model (the profile's
 * bwd_gemm_factor and bwd_attention_factor) are the medians over T of gemm_b / gemm_f and
 * attn_b / attn_f. The cost model (plans/cost/cost.c) then prices the F and the B of one layer
 * over the slice [0, T) as
 *   Wg(T) / (peak x gemm_efficiency(T)) + Wa(T) / (peak x attention_efficiency(T))
 * (the attention looked up at sqrt(T^2 - 0^2) = T), where Wg = forward GEMM FLOPs x (1 +
 * bwd_gemm_factor) and Wa = forward attention FLOPs x (1 + bwd_attention_factor), and the
 * fused head's F as Wh(T) / (peak x head_efficiency(T)), Wh = head FLOPs x (1 +
 * bwd_gemm_factor). Wg, Wa and Wh are taken from lt_cost_op itself, on a profile of 1 FLOP/s
 * at efficiency 1 with the fitted factors and a fused head (so its gemm_time and
 * attention_time are those weighted FLOPs), so the fit follows the cost model whatever its
 * factors. Then peak = the best rate measured (GEMM part, attention or head, so every
 * fraction is at most 1), and the curves get one point per T: gemm Wg / (peak gemm(T)),
 * attention Wa / (peak attn(T)), head Wh / (peak head(T)): at each T the model gives back
 * the measured F + B of the layer and the measured head; the factors split the layer between
 * F and B. The written file is loaded again (lt_hardware_load) and priced with lt_cost_op;
 * the relative errors of that prediction against layer(T) (F + B, then the F alone) are
 * printed, the factors, the head per count, then `max_rel_err=E` (F + B).
 *
 * Memory and links: hbm_gib = the machine's RAM (sysconf; --mem-gib), hbm_gbps = a copy of
 * 128 MiB over the train.threads threads (bytes read + written, STREAM's convention). P2P
 * inside a node: under an MPI launcher with two or more ranks (OMPI_COMM_WORLD_SIZE,
 * PMIX_RANK, PMI_RANK or PMI_SIZE set; a build with MPI) a ping-pong between ranks 0 and 1
 * (8 bytes: latency, 64 MiB: bandwidth); otherwise one memcpy between two buffers of this
 * process (the one-process executor's hand-over, shared memory). Between nodes: the same
 * numbers, marked not measured. Only rank 0 measures the rest and writes the file.
 *
 * The profile also says what the trainer is beyond the timing: act_bytes = 4 (fp32),
 * logit_bytes = 0 (its fused head: no logits kept, the head's backward in the F) and
 * reserved_gib = 0 (no device context). Printed beside the fit, not part of it: the bytes one
 * token holds in the trainer's allocations and in the cost model (docs/cost-model.md,
 * "Calibrating a CPU profile"). The file's header records the 1-minute load average before
 * and after: a busy machine makes everything slow.
 *
 * --check PROFILE measures the same and prices the layer with an existing profile instead
 * of fitting one: how far that profile is from this machine.
 *
 * train.backend = cuda (issue 20): the same layer, attention and head timings through the
 * CUDA backend (train/model/backend.h: the pass code unchanged, bf16 on GPU 0 of rank 0), every
 * timed region ended by the backend's check (a wait for the queued kernels, so the clock
 * reads after the work); hbm_gbps from a 1 GiB device-to-device copy, hbm_gib the device's
 * total, reserved_gib the device memory in use before the timing, act_bytes = 2. The links
 * between GPUs are not timed (that needs NCCL between two ranks' GPUs): p2p_* and
 * gpus_per_node are kept from the estimate profile of the output's name (etc/hardware) and
 * marked so. Without a GPU or CUDA: "train.backend = cuda: WHY", exit 2.
 */
#include "buildconfig.h" /* HAVE_MPI */

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h> /* madvise */
#include <time.h>
#include <unistd.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif

#include "lib/cli.h"               /* lt_cli_ctx, lt_cli_option_value, lt_cli_usage */
#include "lib/files.h"             /* lt_atomic_file, lt_path_base */
#include "lib/log.h"               /* LT_INFO, LT_WARN */
#include "lib/rng.h"               /* lt_rng, lt_rng_normal */
#include "lib/strutil.h"           /* lt_parse_double, lt_parse_int64 */
#include "plans/cost/cost.h"       /* lt_cost_model, lt_cost_op, lt_cost_act_bytes_per_token */
#include "plans/cost/hardware.h"   /* lt_hardware, lt_hardware_load, lt_hardware_write */
#include "plans/batches/lengths.h" /* lt_lengths_parse_list */
#include "train/cmd/cmd.h"         /* calibrate_command, lt_cmd_model_shape, lt_cmd_seed, lt_cmd_threads, lt_cmd_backend */
#include "train/cpu/threads.h"     /* lt_cpu_init */
#include "train/cpu/kernels.h"     /* lt_attention_forward, lt_attention_backward, lt_kernel_for */
#include "train/model/model.h"     /* lt_llama_*, lt_acts_*, lt_kvctx_* */
#include "train/model/backend.h"   /* lt_backend, lt_backend_of, lt_backend_cuda_* (train.backend = cuda) */
#include "kernels/gpu.h"           /* lt_gpu_device_info: the GPU's name for the profile */

#define MAX_POINTS LT_EFFICIENCY_MAX_POINTS
#define MAX_TOKENS (1 << 20)
/* The default ladder 64, 128, ..., 8192 climbs while the projected total stays near a minute. */
#define LADDER_FIRST 64
#define LADDER_LAST 8192
#define LADDER_BUDGET_S 60.0
#define HBM_BYTES ((size_t)128 << 20)
#define GPU_HBM_BYTES ((size_t)1 << 30) /* the device copy: far above the 50-60 MB L2 */
#define P2P_BYTES ((size_t)64 << 20)
#define HEAD_TOKENS 1024 /* the LM head is timed at the measured counts up to this (its rows run in
                            blocks of about 32 MiB of logits: past them its rate holds) */

typedef struct calib_args {
    const char *out, *check, *tokens;
    int repeat;
    double mem_gib; /* 0: sysconf */
    int ranks_per_node;
} calib_args;

/* One rung of the ladder: what was measured (seconds) and what the cost model says. The
 * forward (f) and backward (b) are timed apart; layer, attn and gemm are their sums. */
typedef struct rung {
    int tokens;
    double layer_f, layer_b, attn_f, attn_b; /* medians */
    double gemm_f, gemm_b;                   /* layer - attention, per direction */
    double layer_s, attn_s, gemm_s;          /* forward + backward */
    double work_gemm, work_attn; /* the layer's F + B as the cost model times it, in FLOPs at
                                    the forward's rate (its time on a profile of 1 FLOP/s) */
    double head_s, work_head;    /* the LM head's fused F + B at these tokens (0: not timed) */
    double predicted_s, predicted_f, rel_err;
} rung;

/* Link and memory figures, in the profile's SI units. */
typedef struct links {
    double hbm_bytes, hbm_bytes_per_s;
    double p2p_bytes_per_s, p2p_latency_s;
    bool p2p_mpi; /* measured by an MPI ping-pong (else: memcpy in this process) */
    int mpi_ranks;
    /* train.backend = cuda: the device's memory, and the links kept from the estimate */
    bool gpu, gpu_links_kept;
    double p2p_inter_bytes_per_s, p2p_inter_latency_s; /* kept from the estimate (gpu_links_kept) */
    double reserved_bytes; /* device memory in use before the timing (context, cuBLASLt) */
    int gpus_per_node;
    /* compute contention (MPI, two or more ranks on rank 0's node; the CPU): rank 0's layer
     * timed alone and with every rank of its node timing it at once */
    bool contention_measured;
    int contention_ranks, contention_tokens, contention_rounds;
    double alone_s, together_s; /* medians */
    double contention;          /* (together / alone - 1) / (ranks - 1), clamped to [0, 1] */
} links;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void fill_normal(float *x, size_t n, lt_rng *r, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = (float)lt_rng_normal(r) * scale;
}

/* ------------------------------------------------------------------ arguments */

static int parse_args(lt_cli_ctx *ctx, calib_args *a) {
    memset(a, 0, sizeof *a);
    a->repeat = 5;
    a->ranks_per_node = 1;
    const char *repeat = NULL, *mem = NULL, *rpn = NULL;
    for (int i = 1; i < ctx->argc; i++) {
        int missing = 0;
        const char *v;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--out", &missing))) a->out = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--check", &missing))) a->check = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--tokens", &missing))) a->tokens = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--repeat", &missing))) repeat = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--mem-gib", &missing))) mem = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--ranks-per-node", &missing)))
            rpn = v;
        else if (missing) return lt_cli_usage(ctx, "%s needs a value", ctx->argv[i]);
        else if (ctx->argv[i][0] == '-') return lt_cli_unknown_option(ctx, ctx->argv[i]);
        else return lt_cli_usage(ctx, "unexpected argument '%.200s'", ctx->argv[i]);
    }
    if (a->out && a->check) return lt_cli_usage(ctx, "--out and --check exclude each other");
    if (!a->out && !a->check)
        return lt_cli_usage(ctx, "where to? give --out FILE.ini (or --check PROFILE: price with an existing one)");
    size_t ol = a->out ? strlen(a->out) : 0;
    if (a->out && (ol < 5 || strcmp(a->out + ol - 4, ".ini") != 0 || a->out[ol - 5] == '/'))
        return lt_cli_usage(ctx, "--out '%.200s': a hardware profile is a NAME.ini file", a->out);
    int64_t n;
    if (repeat && (lt_parse_int64(repeat, &n) != LT_OK || n < 1 || n > 1000))
        return lt_cli_usage(ctx, "--repeat wants a count from 1 to 1000, got '%.100s'", repeat);
    if (repeat) a->repeat = (int)n;
    if (rpn && (lt_parse_int64(rpn, &n) != LT_OK || n < 1 || n > 1 << 20))
        return lt_cli_usage(ctx, "--ranks-per-node wants a count from 1 to %d, got '%.100s'", 1 << 20, rpn);
    if (rpn) a->ranks_per_node = (int)n;
    if (mem && (lt_parse_double(mem, &a->mem_gib) != LT_OK || !(a->mem_gib > 0) || a->mem_gib > 1e9))
        return lt_cli_usage(ctx, "--mem-gib wants a positive size in GiB, got '%.100s'", mem);
    return 0;
}

/* --tokens LIST: at most MAX_POINTS increasing counts in [1, MAX_TOKENS]. */
static int parse_tokens(lt_cli_ctx *ctx, const char *text, int *tokens, int *n_out) {
    int64_t *v = NULL;
    size_t n = 0;
    lt_error err;
    if (lt_lengths_parse_list(text, "--tokens", &v, &n, &err) != LT_OK) return lt_error_exit(&err);
    int rc = 0;
    if (n > MAX_POINTS) rc = lt_cli_usage(ctx, "--tokens: %zu counts, a profile curve holds at most %d", n, MAX_POINTS);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (v[i] > MAX_TOKENS) rc = lt_cli_usage(ctx, "--tokens: %lld is more than %d", (long long)v[i], MAX_TOKENS);
        else if (i > 0 && v[i] <= v[i - 1])
            rc = lt_cli_usage(ctx, "--tokens must increase: %lld after %lld", (long long)v[i], (long long)v[i - 1]);
        else tokens[i] = (int)v[i];
    }
    free(v);
    *n_out = (int)n;
    return rc;
}

/* ------------------------------------------------------------------ compute */

/* What the timings run on: the model (the config's dimensions with 2 layers: layer 0 is
 * timed, the second gives one layer's activation bytes; the head is timed on its own), the
 * thread pool, the gradients (fp32, on the device with the CUDA backend be) and their views. */
typedef struct bench_env {
    lt_llama m;
    lt_pool *pool;
    int threads;
    lt_backend *be; /* NULL: the CPU */
    float *grads;
    lt_layer_views *glv;
    lt_llama_views g;
} bench_env;

/* The pool is made even when the model fails (bench_close frees what there is). */
static lt_status bench_open(bench_env *e, const lt_model_shape *shape, uint64_t seed, int threads, lt_backend *be,
                            lt_error *err) {
    memset(e, 0, sizeof *e);
    e->be = be;
    e->threads = 1;
    lt_model_shape s = *shape;
    s.layers = 2;
    lt_status st = lt_llama_create(&e->m, &s, err);
    if (st == LT_OK) lt_llama_init(&e->m, seed);
    if (st == LT_OK) st = lt_cpu_init(threads, &e->pool, &e->threads, err);
    if (st == LT_OK && be) { /* the model's bf16 copy and fp32 gradients on the device */
        st = lt_backend_cuda_upload(be, &e->m, err);
        if (st == LT_OK) st = lt_backend_cuda_grads(be, e->m.n_params, &e->grads, err);
        if (st == LT_OK) st = lt_cmd_gpu_arena(be, LT_CMD_GPU_ARENA_SHARE, "trainer calibrate", err);
    } else if (st == LT_OK) {
        e->grads = lt_calloc_check(e->m.n_params, sizeof *e->grads);
    }
    if (st == LT_OK) {
        e->glv = lt_calloc_check((size_t)e->m.shape.layers, sizeof *e->glv);
        lt_llama_views_of(&e->m, e->grads, e->glv, &e->g);
    }
    return st;
}

/* The model, its gradients and views (the pool stays: bench_close_pool). */
static void bench_close_model(bench_env *e) {
    if (e->be) lt_backend_cuda_free_grads(e->be, e->grads);
    else free(e->grads);
    e->grads = NULL;
    free(e->glv);
    e->glv = NULL;
    lt_llama_free(&e->m);
}

static void bench_close(bench_env *e) {
    bench_close_model(e);
    lt_pool_destroy(e->pool);
    e->pool = NULL;
}

/* One layer's forward + backward over the causal sample [0, T) (layer 0 of the 2-layer model
 * m), as the plan executor runs an F then a B: acts allocated, forward, backward, freed. */
typedef struct layer_bench {
    const lt_llama *m;
    const lt_backend *be; /* the model's: host fp32, or the GPU (in, dout, din on the device) */
    const lt_llama_views *g;
    lt_pool *pool;
    int T;
    int32_t *tokens;
    float *in, *dout, *din;
    lt_train_sample s;
    lt_batch b;
    lt_train_slice sl;
    lt_train_unit u;
    lt_kvctx kv;
} layer_bench;

static void layer_bench_free(layer_bench *lb) {
    lt_kvctx_free(&lb->kv);
    free(lb->tokens);
    if (lb->be && !lb->be->host) {
        lb->be->free(lb->be, lb->in), lb->be->free(lb->be, lb->dout), lb->be->free(lb->be, lb->din);
    } else {
        free(lb->in), free(lb->dout), free(lb->din);
    }
}

/* n host floats into a new buffer of backend memory (act_bytes elements); NULL on failure
 * (named in err). */
static void *to_backend(const lt_backend *be, const float *host, size_t n, lt_error *err) {
    void *d = be->alloc(be, lt_backend_span(be, n, be->act_bytes), false);
    if (!d) {
        lt_backend_nomem(be, err, NULL, "out of %s memory for %zu activations", be->name, n);
        return NULL;
    }
    if (be->from_host_f32(be, d, host, n, err) != LT_OK) {
        be->free(be, d);
        return NULL;
    }
    return d;
}

static lt_status layer_bench_init(layer_bench *lb, const lt_llama *m, const lt_llama_views *g, int T, lt_pool *pool,
                                  lt_error *err) {
    memset(lb, 0, sizeof *lb);
    size_t TC = (size_t)T * (size_t)m->shape.hidden;
    lb->m = m, lb->g = g, lb->pool = pool, lb->T = T;
    lb->tokens = calloc((size_t)T, sizeof *lb->tokens);
    lb->in = malloc(TC * sizeof *lb->in);
    lb->dout = malloc(TC * sizeof *lb->dout);
    lb->din = calloc(TC, sizeof *lb->din);
    if (!lb->tokens || !lb->in || !lb->dout || !lb->din) {
        layer_bench_free(lb);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a %d-token layer", T);
    }
    lt_rng r;
    lt_rng_seed(&r, 1000 + (uint64_t)T);
    fill_normal(lb->in, TC, &r, 1.0f);
    fill_normal(lb->dout, TC, &r, 1e-3f);
    lb->be = lt_backend_of(m);
    if (!lb->be->host) { /* the GPU: the layer's input, its output gradient and din on the device */
        float *hin = lb->in, *hdout = lb->dout;
        free(lb->din);
        lb->in = lb->dout = lb->din = NULL;
        lb->in = to_backend(lb->be, hin, TC, err);
        if (lb->in) lb->dout = to_backend(lb->be, hdout, TC, err);
        if (lb->dout) {
            lb->din = lb->be->alloc(lb->be, lt_backend_span(lb->be, TC, lb->be->act_bytes), true);
            if (!lb->din) lt_backend_nomem(lb->be, err, NULL, "out of %s memory for a %d-token layer", lb->be->name, T);
        }
        free(hin), free(hdout);
        if (!lb->din) {
            layer_bench_free(lb);
            return err->status != LT_OK ? err->status : LT_ERR_NOMEM;
        }
    }
    lb->s = (lt_train_sample){lb->tokens, T};
    lb->b = (lt_batch){&lb->s, 1};
    lb->sl = (lt_train_slice){0, 0, T};
    lb->u = (lt_train_unit){&lb->sl, 1};
    lt_status st = lt_kvctx_init(&lb->kv, m, &lb->b, true, err);
    if (st != LT_OK) layer_bench_free(lb);
    return st;
}

/* Give the pages of [p, p + bytes) back to the kernel (those wholly inside it), so that the
 * next write to them faults in a zeroed page, as on memory fresh from mmap. */
static void fresh_pages(void *p, size_t bytes) {
    long page = sysconf(_SC_PAGESIZE);
    if (!p || page <= 0) return;
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t hi = ((uintptr_t)p + bytes) & ~((uintptr_t)page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* The forward and the backward, timed apart, as the plan executor runs an F then a B: the
 * activations allocated for the F on fresh pages (an op's activations, its layers together,
 * are far above malloc's mmap threshold, at most 32 MiB, so the executor gets new pages for
 * every op and the F pays for faulting them in: a fifth of small's forward at 2048 tokens on
 * the 2-CPU machine), freed after the B (the executor frees them outside the op's time). The
 * sample's K/V are made by the forward and its dK/dV by the backward and released after it,
 * as the executor does per step. */
static lt_status layer_bench_run(layer_bench *lb, double *fwd_s, double *bwd_s, lt_error *err) {
    lt_pass pass = {.l0 = 0, .l1 = 1};
    lt_acts a;
    const lt_backend *be = lb->be;
    lt_status st = lt_acts_alloc(&a, lb->m, &lb->b, &lb->u, 0, 1, false, err);
    if (st != LT_OK) return st;
    /* (device memory is the arena's or cudaMalloc's: no pages to fault in) */
    if (be->host) fresh_pages(a.buf, a.bytes - (size_t)a.T * 3 * sizeof(int32_t)); /* the floats; ibuf is filled */
    /* be->check waits for the queued kernels (a no-op on the CPU): the clock reads after
     * the work, not after its launch */
    st = be->check(be, err);
    double t0 = now_s();
    if (st == LT_OK)
        st = lt_llama_forward(lb->m, &pass, &lb->b, &lb->u, lb->in, &lb->kv, &a, lb->g, NULL, NULL, lb->pool, err);
    if (st == LT_OK) st = be->check(be, err);
    double t1 = now_s();
    if (st == LT_OK)
        st = lt_llama_backward(lb->m, &pass, &lb->b, &lb->u, lb->dout, &lb->kv, &a, lb->g, lb->din, lb->pool, err);
    if (st == LT_OK) st = be->check(be, err);
    double t2 = now_s();
    lt_acts_free(&a);
    lt_kvctx_release(&lb->kv, 0, 0, 1); /* the sample's last backward: its context goes */
    *fwd_s = t1 - t0;
    *bwd_s = t2 - t1;
    return st;
}

/* What one token holds in the trainer (allocated bytes): one layer's activations (the acts of
 * two layers less those of one), the unit's own buffers (ids, positions, targets, output),
 * the head's (acts with the head less without), one layer's KV context (K, V, dK, dV of layer
 * 0, reserved here: the runs release theirs). */
typedef struct trainer_bytes {
    double layer, unit, head, kv_layer;
} trainer_bytes;

static lt_status layer_bench_bytes(layer_bench *lb, trainer_bytes *tb, lt_error *err) {
    lt_acts a1, a2, ah;
    lt_status st = lt_acts_alloc(&a1, lb->m, &lb->b, &lb->u, 0, 1, false, err);
    if (st != LT_OK) return st;
    st = lt_acts_alloc(&a2, lb->m, &lb->b, &lb->u, 0, 2, false, err);
    if (st == LT_OK) {
        st = lt_acts_alloc(&ah, lb->m, &lb->b, &lb->u, 0, 1, true, err);
        if (st == LT_OK) {
            double T = lb->T;
            tb->layer = (double)(a2.bytes - a1.bytes) / T;
            tb->unit = (double)a1.bytes / T - tb->layer;
            tb->head = (double)(ah.bytes - a1.bytes) / T;
            st = lt_kvctx_reserve(&lb->kv, 0, 0, 1, err);
            if (st == LT_OK) st = lt_kvctx_reserve_grad(&lb->kv, 0, 0, 1, err);
            tb->kv_layer = (double)lt_kvctx_bytes(&lb->kv) / T;
            lt_kvctx_release(&lb->kv, 0, 0, 1);
            lt_acts_free(&ah);
        }
        lt_acts_free(&a2);
    }
    lt_acts_free(&a1);
    return st;
}

/* The attention core's forward + backward alone on a causal sample of T tokens. */
typedef struct attn_bench {
    const lt_backend *be; /* NULL: the CPU kernels on host fp32; else the GPU backend's */
    void *dbuf;           /* the GPU's: q, out, dq, dout, k, v, dk, dv (act_bytes elements) */
    float *dlse;
    int T, nh, nkv, hd;
    size_t nq, nk;
    lt_pool *pool;
    float *buf, *q, *out, *dq, *dout, *k, *v, *dk, *dv, *lse;
    lt_attn_segment seg;
} attn_bench;

static lt_status attn_bench_init(attn_bench *ab, const lt_llama *m, int T, lt_pool *pool, lt_error *err) {
    memset(ab, 0, sizeof *ab);
    ab->T = T, ab->nh = m->shape.heads, ab->nkv = m->shape.kv_heads, ab->hd = m->head_dim, ab->pool = pool;
    ab->nq = (size_t)T * ab->nh * ab->hd, ab->nk = (size_t)T * ab->nkv * ab->hd;
    ab->buf = malloc((4 * ab->nq + 4 * ab->nk + (size_t)T * ab->nh) * sizeof *ab->buf);
    if (!ab->buf) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a %d-token attention", T);
    ab->q = ab->buf, ab->out = ab->q + ab->nq, ab->dq = ab->out + ab->nq, ab->dout = ab->dq + ab->nq;
    ab->k = ab->dout + ab->nq, ab->v = ab->k + ab->nk, ab->dk = ab->v + ab->nk, ab->dv = ab->dk + ab->nk;
    ab->lse = ab->dv + ab->nk;
    lt_rng r;
    lt_rng_seed(&r, 2000 + (uint64_t)T);
    fill_normal(ab->q, ab->nq, &r, 1.0f);
    fill_normal(ab->k, ab->nk, &r, 1.0f);
    fill_normal(ab->v, ab->nk, &r, 1.0f);
    fill_normal(ab->dout, ab->nq, &r, 1e-3f);
    ab->seg = (lt_attn_segment){.row0 = 0, .n = T, .begin = 0, .k = ab->k, .v = ab->v, .dk = ab->dk, .dv = ab->dv};
    const lt_backend *be = lt_backend_of(m);
    if (be->host) return LT_OK;
    /* the GPU: the same data in bf16 on the device (the host copy only fills it) */
    size_t es = be->act_bytes, nq = ab->nq, nk = ab->nk;
    char *d = be->alloc(be, (4 * nq + 4 * nk) * es, true);
    float *dl = be->alloc(be, (size_t)T * ab->nh * sizeof(float), true);
    lt_status st = d && dl ? LT_OK : lt_backend_nomem(be, err, NULL, "out of %s memory for a %d-token attention",
                                                      be->name, T);
    /* device layout: q, out, dq, dout (nq each), k, v, dk, dv (nk each) */
    if (st == LT_OK) st = be->from_host_f32(be, d, ab->q, nq, err);
    if (st == LT_OK) st = be->from_host_f32(be, d + 3 * nq * es, ab->dout, nq, err);
    if (st == LT_OK) st = be->from_host_f32(be, d + 4 * nq * es, ab->k, nk, err);
    if (st == LT_OK) st = be->from_host_f32(be, d + (4 * nq + nk) * es, ab->v, nk, err);
    if (st != LT_OK) {
        if (d) be->free(be, d);
        if (dl) be->free(be, dl);
        free(ab->buf), ab->buf = NULL;
        return st;
    }
    ab->be = be, ab->dbuf = d, ab->dlse = dl;
    ab->q = (float *)d, ab->out = (float *)(d + nq * es), ab->dq = (float *)(d + 2 * nq * es);
    ab->dout = (float *)(d + 3 * nq * es), ab->k = (float *)(d + 4 * nq * es);
    ab->v = (float *)(d + (4 * nq + nk) * es), ab->dk = (float *)(d + (4 * nq + 2 * nk) * es);
    ab->dv = (float *)(d + (4 * nq + 3 * nk) * es), ab->lse = dl;
    ab->seg = (lt_attn_segment){.row0 = 0, .n = T, .begin = 0, .k = ab->k, .v = ab->v, .dk = ab->dk, .dv = ab->dv};
    return LT_OK;
}

static void attn_bench_free(attn_bench *ab) {
    if (ab->be) ab->be->free(ab->be, ab->dbuf), ab->be->free(ab->be, ab->dlse);
    free(ab->buf);
}

static lt_status attn_bench_run(attn_bench *ab, double *fwd_s, double *bwd_s, lt_error *err) {
    const lt_backend *be = ab->be;
    if (be) { /* the GPU backend's kernels, each direction ended by a wait (be->check) */
        size_t es = be->act_bytes;
        be->zero(be, ab->dq, ab->nq * es);
        be->zero(be, ab->dk, 2 * ab->nk * es); /* dk and dv */
        lt_status st = be->check(be, err);
        double t0 = now_s();
        if (st == LT_OK) {
            be->attention_forward(be, ab->out, ab->lse, ab->q, &ab->seg, 1, ab->T, ab->nh, ab->nkv, ab->hd, ab->pool);
            st = be->check(be, err);
        }
        double t1 = now_s();
        if (st == LT_OK) {
            be->attention_backward(be, ab->dq, ab->dout, ab->out, ab->lse, ab->q, &ab->seg, 1, ab->T, ab->nh, ab->nkv,
                                   ab->hd, ab->pool);
            st = be->check(be, err);
        }
        *fwd_s = t1 - t0;
        *bwd_s = now_s() - t1;
        return st;
    }
    memset(ab->dq, 0, ab->nq * sizeof *ab->dq);
    memset(ab->dk, 0, 2 * ab->nk * sizeof *ab->dk); /* dk and dv */
    double t0 = now_s();
    lt_attention_forward(ab->out, ab->lse, ab->q, &ab->seg, 1, ab->nh, ab->nkv, ab->hd, ab->pool);
    double t1 = now_s();
    lt_attention_backward(ab->dq, ab->dout, ab->out, ab->lse, ab->q, &ab->seg, 1, ab->nh, ab->nkv, ab->hd, ab->pool);
    *fwd_s = t1 - t0;
    *bwd_s = now_s() - t1;
    (void)err;
    return LT_OK;
}

/* The medians of `repeat` runs of the layer and of the attention at T, each direction
 * apart, after one warm-up run of each; the runs alternate, so that a slow spell of the
 * machine falls on both. */
static lt_status time_rung(const lt_llama *m, const lt_llama_views *g, int T, int repeat, lt_pool *pool, rung *x,
                           trainer_bytes *tb, lt_error *err) {
    layer_bench lb;
    attn_bench ab;
    lt_status st = layer_bench_init(&lb, m, g, T, pool, err);
    if (st != LT_OK) return st;
    if ((st = attn_bench_init(&ab, m, T, pool, err)) != LT_OK) {
        layer_bench_free(&lb);
        return st;
    }
    size_t n = (size_t)repeat + 1;
    double *t = lt_calloc_check(4 * n, sizeof *t), *lf = t, *lb_ = t + n, *af = t + 2 * n, *ab_ = t + 3 * n;
    for (int k = 0; st == LT_OK && k <= repeat; k++) { /* run 0: the warm-up */
        st = layer_bench_run(&lb, &lf[k], &lb_[k], err);
        if (st == LT_OK) st = attn_bench_run(&ab, &af[k], &ab_[k], err);
    }
    if (st == LT_OK) {
        x->layer_f = median(lf + 1, repeat), x->layer_b = median(lb_ + 1, repeat);
        x->attn_f = median(af + 1, repeat), x->attn_b = median(ab_ + 1, repeat);
        st = layer_bench_bytes(&lb, tb, err);
    }
    free(t);
    attn_bench_free(&ab);
    layer_bench_free(&lb);
    return st;
}

/* The LM head alone (a pass of no layers with the head: final norm, LM head and loss, the
 * fused forward + backward, then the final norm's backward) on T tokens: the median of
 * `repeat` runs after a warm-up. A point of the profile's head curve. */
static lt_status time_head(const lt_llama *m, const lt_llama_views *g, int T, int repeat, lt_pool *pool,
                           double *head_s, lt_error *err) {
    layer_bench lb;
    lt_status st = layer_bench_init(&lb, m, g, T, pool, err);
    if (st != LT_OK) return st;
    int L = m->shape.layers;
    lt_pass pass = {.l0 = L, .l1 = L, .head = true, .loss_scale = 1.0f / (float)T};
    double *t = lt_calloc_check((size_t)repeat + 1, sizeof *t);
    for (int k = 0; st == LT_OK && k <= repeat; k++) { /* run 0: the warm-up */
        if ((st = lb.be->check(lb.be, err)) != LT_OK) break;
        double t0 = now_s();
        lt_acts a;
        st = lt_acts_alloc(&a, m, &lb.b, &lb.u, L, L, true, err);
        if (st == LT_OK) st = lt_llama_forward(m, &pass, &lb.b, &lb.u, lb.in, &lb.kv, &a, g, NULL, NULL, pool, err);
        if (st == LT_OK) st = lt_llama_backward(m, &pass, &lb.b, &lb.u, NULL, &lb.kv, &a, g, lb.din, pool, err);
        if (st == LT_OK) st = lb.be->check(lb.be, err);
        lt_acts_free(&a);
        t[k] = now_s() - t0;
    }
    if (st == LT_OK) *head_s = median(t + 1, repeat);
    free(t);
    layer_bench_free(&lb);
    return st;
}

/* ------------------------------------------------------------------ memory and links */

typedef struct copy_job {
    char *dst;
    const char *src;
    size_t bytes, parts;
} copy_job;

static void copy_part(size_t i, void *arg) {
    copy_job *j = arg;
    size_t lo = j->bytes * i / j->parts, hi = j->bytes * (i + 1) / j->parts;
    memcpy(j->dst + lo, j->src + lo, hi - lo);
}

/* Best of `iters` copies of `bytes` split over `parts` pool tasks: seconds per copy. */
static double best_copy_s(char *dst, const char *src, size_t bytes, size_t parts, lt_pool *pool, int iters) {
    copy_job j = {dst, src, bytes, parts};
    double best = INFINITY;
    for (int i = 0; i < iters; i++) {
        double t0 = now_s();
        lt_kernel_for(parts > 1 ? pool : NULL, parts, copy_part, &j);
        double dt = now_s() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

/* train.backend = cuda: hbm_gbps from the best of 5 device-to-device copies of
 * GPU_HBM_BYTES (read + written, as on the CPU), hbm_gib the device's total memory. The
 * links between GPUs are not measured here (that needs NCCL between two ranks' GPUs):
 * the caller keeps them from the estimate profile of the same name. */
static lt_status measure_gpu_memory(const lt_backend *be, links *l, lt_error *err) {
    size_t free_b = 0, total_b = 0;
    lt_status st = lt_backend_cuda_mem(be, &free_b, &total_b, err);
    if (st != LT_OK) return st;
    void *a = be->alloc(be, GPU_HBM_BYTES, true), *b = be->alloc(be, GPU_HBM_BYTES, true);
    if (!a || !b) {
        if (a) be->free(be, a);
        if (b) be->free(be, b);
        return lt_backend_nomem(be, err, NULL, "out of device memory for the %zu MiB copy buffers",
                                GPU_HBM_BYTES >> 20);
    }
    double best = INFINITY;
    for (int i = 0; st == LT_OK && i < 6; i++) { /* copy 0: the warm-up */
        st = be->check(be, err);
        double t0 = now_s();
        be->copy(be, b, a, GPU_HBM_BYTES);
        if (st == LT_OK) st = be->check(be, err);
        double dt = now_s() - t0;
        if (i > 0 && dt < best) best = dt;
    }
    be->free(be, a), be->free(be, b);
    if (st != LT_OK) return st;
    l->hbm_bytes = (double)total_b;
    l->hbm_bytes_per_s = 2.0 * (double)GPU_HBM_BYTES / best;
    return LT_OK;
}

/* hbm: a parallel copy of HBM_BYTES (read + written); p2p without MPI: one memcpy of
 * P2P_BYTES (one flow), and the time of an 8-byte memcpy as its latency. */
static lt_status measure_memory(lt_pool *pool, int threads, links *l, lt_error *err) {
    char *a = malloc(HBM_BYTES), *b = malloc(HBM_BYTES);
    if (!a || !b) {
        free(a), free(b);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the %zu MiB copy buffers", HBM_BYTES >> 20);
    }
    memset(a, 1, HBM_BYTES); /* fault the pages in */
    memset(b, 2, HBM_BYTES);
    l->hbm_bytes_per_s = 2.0 * (double)HBM_BYTES / best_copy_s(b, a, HBM_BYTES, (size_t)threads, pool, 5);
    if (!l->p2p_mpi) {
        l->p2p_bytes_per_s = (double)P2P_BYTES / best_copy_s(b, a, P2P_BYTES, 1, NULL, 5);
        /* through a volatile pointer, so that the compiler keeps the calls */
        void *(*volatile copy)(void *, const void *, size_t) = memcpy;
        enum { N = 100000 };
        double best = INFINITY;
        for (int k = 0; k < 5; k++) {
            double t0 = now_s();
            for (int i = 0; i < N; i++) copy(b + (i & 4095) * 8, a + (i & 4095) * 8, 8);
            double dt = (now_s() - t0) / N;
            best = dt < best ? dt : best;
        }
        l->p2p_latency_s = best;
    }
    free(a), free(b);
    return LT_OK;
}

/* An MPI launcher started this process (the variables train/dist/comm_mpi.c also reads). */
static bool launched_by_mpi(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]) && *getenv(vars[i])) return true;
    return false;
}

#ifdef HAVE_MPI
/* Ping-pong of `bytes` between ranks 0 and 1: seconds one way (half a round trip), best of
 * `rounds` averages over `iters` round trips. */
static double pingpong_s(int rank, char *buf, int bytes, int iters, int rounds) {
    double best = INFINITY;
    for (int r = -1; r < rounds; r++) { /* r = -1: the warm-up */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters && rank < 2; i++) {
            if (rank == 0) {
                MPI_Send(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
        }
        double dt = (MPI_Wtime() - t0) / (2.0 * iters);
        if (r >= 0 && dt < best) best = dt;
    }
    return best;
}
#endif

/* The contention run (measure_mpi): the layer of `tokens` tokens, `rounds` times alone and
 * `rounds` times with every rank of the node at once, on a model of `shape` per rank. */
typedef struct contention_job {
    const lt_model_shape *shape;
    uint64_t seed;
    int threads, tokens, rounds;
} contention_job;

#ifdef HAVE_MPI
/* Every rank's ok into one: false when any rank failed (no rank waits for a failed one).
 * The wait sleeps between polls, as the trainer's waits do (train/dist/comm_mpi.c): a rank
 * waiting here leaves its core idle (a spinning wait slows the timed rank as computing
 * would). */
static bool all_ok(bool ok) {
    int mine = ok ? 1 : 0, all = 0, done = 0;
    MPI_Request req;
    MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
    for (unsigned polls = 0;; polls++) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        struct timespec ts = {0, polls > 64 ? 1000000 : 50000};
        nanosleep(&ts, NULL);
    }
    return all == 1;
}

/* Compute contention (plans/cost/hardware.h compute_contention): rounds of rank 0 timing the
 * layer alone (the others waiting) then every rank of rank 0's node timing it at once, the
 * two alternating so that a slow spell of the machine falls on both; contention = (median
 * together / median alone - 1) / (ranks of the node - 1), as the simulator's rate 1 / (1 +
 * c k) gives for k = ranks - 1 devices beside it. Ranks of other nodes run the layer too (they
 * do not count). A rank that cannot set up makes every rank skip it (a warning). */
static void measure_contention(const contention_job *job, int rank, links *l) {
    MPI_Comm node;
    int node_ranks = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_ranks);
    MPI_Comm_free(&node);
    MPI_Bcast(&node_ranks, 1, MPI_INT, 0, MPI_COMM_WORLD); /* rank 0's node */
    if (node_ranks < 2) return;
    lt_error err;
    lt_error_clear(&err);
    bench_env e;
    layer_bench lb;
    bool ok = bench_open(&e, job->shape, job->seed, job->threads, NULL, &err) == LT_OK;
    bool lb_ok = ok && layer_bench_init(&lb, &e.m, &e.g, job->tokens, e.pool, &err) == LT_OK;
    double *alone = lt_calloc_check((size_t)job->rounds, sizeof *alone);
    double *together = lt_calloc_check((size_t)job->rounds, sizeof *together);
    ok = all_ok(lb_ok);
    for (int r = -1; ok && r < job->rounds; r++) { /* r = -1: the warm-up */
        double f = 0, b = 0;
        bool mine = true;
        if (rank == 0) mine = layer_bench_run(&lb, &f, &b, &err) == LT_OK;
        if (r >= 0) alone[r] = f + b;
        if (!(ok = all_ok(mine))) break;
        mine = layer_bench_run(&lb, &f, &b, &err) == LT_OK;
        if (r >= 0) together[r] = f + b;
        ok = all_ok(mine);
    }
    if (!ok && rank == 0)
        LT_WARN("calibrate: compute contention not measured (a rank failed: %s)",
                err.what[0] ? err.what : "not rank 0; its message is on its stderr");
    if (!ok && rank != 0 && err.what[0]) LT_WARN("calibrate: rank %d: %s", rank, err.what);
    if (ok && rank == 0) {
        l->contention_measured = true;
        l->contention_ranks = node_ranks;
        l->contention_tokens = job->tokens;
        l->contention_rounds = job->rounds;
        l->alone_s = median(alone, job->rounds);
        l->together_s = median(together, job->rounds);
        double c = (l->together_s / l->alone_s - 1) / (node_ranks - 1);
        l->contention = c > 1 ? 1 : c > 0 ? c : 0;
        LT_INFO("calibrate: %d-token layer %.3f ms alone, %.3f ms with %d ranks at once: compute_contention %.4f",
                job->tokens, l->alone_s * 1e3, l->together_s * 1e3, node_ranks, l->contention);
    }
    free(alone), free(together);
    if (lb_ok) layer_bench_free(&lb);
    bench_close(&e);
}
#endif

/* Under an MPI launcher (a build with MPI): the ping-pong between ranks 0 and 1 into l
 * (with two or more ranks), then, given a job, the compute contention of rank 0's node;
 * *rank = this rank. MPI is finalized before returning: the rest is rank 0's alone. Without
 * MPI or a launcher: *rank = 0, nothing measured. */
static lt_status measure_mpi(links *l, int *rank, const contention_job *job, lt_error *err) {
    *rank = 0;
    l->mpi_ranks = 1;
    if (!launched_by_mpi()) return LT_OK;
#ifdef HAVE_MPI
    int size = 1;
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return lt_fail(err, LT_ERR_IO, NULL, "MPI_Init failed");
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    l->mpi_ranks = size;
    if (size >= 2) {
        char *buf = calloc(P2P_BYTES, 1);
        if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
        l->p2p_latency_s = pingpong_s(*rank, buf, 8, 1000, 5);
        l->p2p_bytes_per_s = (double)P2P_BYTES / pingpong_s(*rank, buf, (int)P2P_BYTES, 5, 3);
        l->p2p_mpi = true;
        free(buf);
        if (job) measure_contention(job, *rank, l);
    }
    MPI_Finalize();
#else
    (void)err;
    (void)job;
    LT_WARN("an MPI launcher started this trainer, but it was built without MPI: P2P is a memcpy in each process");
#endif
    return LT_OK;
}

/* The 1-minute load average (getloadavg), or -1 where the system has none. */
static double load_average(void) {
    double l[1];
    return getloadavg(l, 1) == 1 ? l[0] : -1.0;
}

/* ------------------------------------------------------------------ the cost model's side */

/* A profile of 1 FLOP/s at efficiency 1 everywhere, with the trainer's fused head and the
 * backward / forward time factors given: lt_cost_op's times are the FLOPs it times, each
 * backward FLOP weighted by those factors. */
static void unit_profile(lt_hardware *hw, double bwd_gemm, double bwd_attention) {
    memset(hw, 0, sizeof *hw);
    snprintf(hw->name, sizeof hw->name, "unit");
    hw->peak_flops = 1.0;
    hw->hbm_bytes = hw->hbm_bytes_per_s = 1.0;
    hw->gpus_per_node = 1;
    hw->p2p_intra_bytes_per_s = hw->p2p_inter_bytes_per_s = 1.0;
    hw->gemm = hw->attention = (lt_efficiency_curve){.n = 1, .tokens = {1}, .fraction = {1}};
    hw->act_bytes = 4.0;
    hw->has_logit_bytes = true; /* logit_bytes 0: the fused head */
    hw->has_reserved_bytes = true;
    hw->bwd_gemm_factor = bwd_gemm;
    hw->bwd_attention_factor = bwd_attention;
}

/* The cost model's F and B of one layer (layer 0 of a model of at least 2 layers: no
 * embedding FLOPs, no head) over the causal sample [0, T): *fwd the F's time, *time F + B,
 * and the GEMM and attention parts of F + B. */
static void price_layer(const lt_cost_model *cm, int T, double *time, double *fwd, double *gemm_time,
                        double *attn_time) {
    lt_slice sl = {.sample = 0, .begin = 0, .end = T};
    lt_op f = {.kind = LT_OP_F, .part = LT_PART_ALL, .layer_begin = 0, .layer_end = 1};
    lt_op b = f;
    b.kind = LT_OP_B;
    lt_op_estimate ef, eb;
    lt_cost_op(cm, &sl, 1, NULL, &f, &ef);
    lt_cost_op(cm, &sl, 1, NULL, &b, &eb);
    *time = ef.cost.time + eb.cost.time;
    if (fwd) *fwd = ef.cost.time;
    if (gemm_time) *gemm_time = ef.gemm_time + eb.gemm_time;
    if (attn_time) *attn_time = ef.attention_time + eb.attention_time;
}

/* What one token holds per the cost model: a layer's activations kept by an F (with its K and
 * V, as for a whole sample; or with K/V apart, as for a slice a later slice reads), the K/V
 * kept apart (with their gradients), and what the op ending the model keeps for the head
 * (its F's act_bytes over the last layer less that layer's: norm and head inputs, the fp32
 * softmax of the loss). */
typedef struct cost_bytes {
    double layer, layer_kv_apart, kv_layer, head;
} cost_bytes;

static void cost_model_bytes(const lt_cost_model *cm, int T, cost_bytes *cb) {
    cb->layer = lt_cost_act_bytes_per_token(cm, LT_PART_ALL, false, false);
    cb->layer_kv_apart = lt_cost_act_bytes_per_token(cm, LT_PART_ALL, false, true);
    cb->kv_layer = lt_cost_kv_bytes_per_token(cm);
    lt_slice sl = {.sample = 0, .begin = 0, .end = T};
    uint32_t L = (uint32_t)cm->model.layers;
    lt_op last = {.kind = LT_OP_F, .part = LT_PART_ALL, .layer_begin = L - 1, .layer_end = L};
    lt_op_estimate e;
    lt_cost_op(cm, &sl, 1, NULL, &last, &e);
    cb->head = e.cost.act_bytes / T - cb->layer;
}

/* The cost model's F + B of the head on T tokens: the op over the model's last layer less
 * the op over layer 0 (the same layer's FLOPs at the same efficiencies). With a fused head
 * all of it is in the F. */
static double price_head(const lt_cost_model *cm, int T) {
    lt_slice sl = {.sample = 0, .begin = 0, .end = T};
    uint32_t L = (uint32_t)cm->model.layers;
    double t = 0;
    for (int k = 0; k < 2; k++) {
        lt_op last = {.kind = k ? LT_OP_B : LT_OP_F, .part = LT_PART_ALL, .layer_begin = L - 1, .layer_end = L};
        lt_op first = last;
        first.layer_begin = 0, first.layer_end = 1;
        lt_op_estimate el, ef;
        lt_cost_op(cm, &sl, 1, NULL, &last, &el);
        lt_cost_op(cm, &sl, 1, NULL, &first, &ef);
        t += el.cost.time - ef.cost.time;
    }
    return t;
}

/* ------------------------------------------------------------------ the profile file */

static void cpu_model(char *buf, size_t n) {
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *c = strchr(line, ':');
        if (!c) continue;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        c[strcspn(c, "\n")] = '\0';
        snprintf(buf, n, "%s", c);
        break;
    }
    fclose(f);
}

/* The command as it was typed (/proc/self/cmdline, the program named by its base name: the
 * --set options are only there), else rebuilt from the command's own arguments. */
static void command_line(const lt_cli_ctx *ctx, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (f) {
        char raw[1024];
        size_t len = fread(raw, 1, sizeof raw - 1, f);
        fclose(f);
        raw[len] = '\0';
        for (size_t i = 0; i < len && used + 1 < n; i += strlen(raw + i) + 1) {
            const char *arg = i == 0 ? lt_path_base(raw) : raw + i;
            int w = snprintf(buf + used, n - used, "%s%s", i ? " " : "", arg);
            if (w < 0 || (size_t)w >= n - used) break;
            used += (size_t)w;
        }
        if (used > 0) return;
    }
    used = (size_t)snprintf(buf, n, "trainer calibrate");
    if (ctx->config_path && used < n) used += (size_t)snprintf(buf + used, n - used, " --config %s", ctx->config_path);
    for (int i = 1; i < ctx->argc && used < n; i++) used += (size_t)snprintf(buf + used, n - used, " %s", ctx->argv[i]);
}

/* A %.6g number, rounded up in its last digit if printing would lower it (a peak written
 * below the best rate would put a fraction above 1). */
static double printed_up(double x) {
    char s[64];
    snprintf(s, sizeof s, "%.6g", x);
    double p = strtod(s, NULL);
    if (p >= x) return p;
    snprintf(s, sizeof s, "%.6g", x * (1 + 1e-5));
    return strtod(s, NULL);
}

typedef struct fit_info {
    const calib_args *a;
    const lt_cli_ctx *ctx;
    const lt_model_shape *shape;
    int threads;
    char date[32], cpu[160];
    char gpu_name[128]; /* train.backend = cuda: the device's name */
    double load[2];        /* the 1-minute load average before and after the timing */
    double peak;           /* FLOP/s, as printed */
    int peak_tokens;       /* the rung that set it */
    const char *peak_part; /* ... and by which part */
    double bwd_gemm, bwd_attention; /* the backward / forward time factors, as printed */
} fit_info;

/* x as printed with %.4g (the factors: what the file says is what the fit used). */
static double printed4(double x) {
    char s[64];
    snprintf(s, sizeof s, "%.4g", x);
    return strtod(s, NULL);
}

/* The GEMM part of a rung per direction, layer - attention. Where the attention alone took
 * (about) as long as the whole layer (noise, or a model whose GEMMs are negligible at this
 * length), the total is kept and the GEMMs get 2 % of it. Then the F + B sums. */
static void split_parts(rung *x) {
    double *layer[2] = {&x->layer_f, &x->layer_b}, *attn[2] = {&x->attn_f, &x->attn_b};
    double *gemm[2] = {&x->gemm_f, &x->gemm_b};
    for (int d = 0; d < 2; d++) {
        *gemm[d] = *layer[d] - *attn[d];
        if (!(*gemm[d] > 0.02 * *layer[d])) {
            LT_WARN("tokens=%d: %s attention %.3f ms of a %.3f ms layer; its GEMM part is set to 2 %% of the layer",
                    x->tokens, d ? "backward" : "forward", *attn[d] * 1e3, *layer[d] * 1e3);
            *gemm[d] = 0.02 * *layer[d];
            *attn[d] = *layer[d] - *gemm[d];
        }
    }
    x->layer_s = x->layer_f + x->layer_b;
    x->attn_s = x->attn_f + x->attn_b;
    x->gemm_s = x->gemm_f + x->gemm_b;
}

/* The backward / forward time factors of the cost model (bwd_gemm_factor,
 * bwd_attention_factor): the medians over the rungs of gemm_b / gemm_f and attn_b / attn_f,
 * as printed. One number per part, so that the curves keep the whole layer's F + B exact at
 * every count and the split between F and B is right in the middle of the ladder. */
static void fit_backward_factors(const rung *r, int n, double *bwd_gemm, double *bwd_attention) {
    double g[MAX_POINTS], at[MAX_POINTS];
    for (int i = 0; i < n; i++) g[i] = r[i].gemm_b / r[i].gemm_f, at[i] = r[i].attn_b / r[i].attn_f;
    *bwd_gemm = printed4(median(g, n));
    *bwd_attention = printed4(median(at, n));
}

/* The header of the written profile: where it comes from (the command, the date, the machine,
 * the model, the load), how it was fitted, and the measurements themselves, one line per
 * token count (malloc'd text, lines without the comment marks lt_hardware_write adds). */
static lt_status profile_header(const fit_info *fi, const rung *r, int n, const links *l, char **out,
                                lt_error *err) {
    const calib_args *a = fi->a;
    size_t len = 0;
    *out = NULL;
    FILE *f = open_memstream(out, &len);
    if (!f) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    fprintf(f, "%s — hardware profile of the cost model (plans/cost/hardware.h), measured on this machine\n",
            lt_path_base(a->out));
    if (l->gpu)
        fprintf(f, "by `trainer calibrate` with train.backend = cuda: the bf16 CUDA trainer on %s (docs/gpu.md;\n"
                   "train/cmd/calibrate.c says what is timed and how it is fitted).\n\n", fi->gpu_name);
    else {
        fprintf(f, "by `trainer calibrate` for the CPU fp32 trainer (docs/cost-model.md, \"Calibrating a CPU\n");
        fprintf(f, "profile\"; train/cmd/calibrate.c says what is timed and how it is fitted).\n\n");
    }
    char cmd[1024];
    command_line(fi->ctx, cmd, sizeof cmd);
    fprintf(f, "  command:  %s\n", cmd);
    fprintf(f, "  date:     %s\n", fi->date);
    if (l->gpu)
        fprintf(f, "  machine:  %s, %.1f GiB; host %s\n", fi->gpu_name, l->hbm_bytes / 1073741824.0, fi->cpu);
    else
        fprintf(f, "  machine:  %s; %ld CPUs online (nproc); %.1f GiB RAM\n", fi->cpu, sysconf(_SC_NPROCESSORS_ONLN),
                l->hbm_bytes / 1073741824.0);
    fprintf(f, "  threads:  %d (train.threads; OpenBLAS GEMMs and the kernels' pool)\n", fi->threads);
    fprintf(f, "  model:    %s (hidden %d, heads %d, kv_heads %d, ffn %d): one layer timed\n",
            fi->shape->name ? fi->shape->name : "custom", fi->shape->hidden, fi->shape->heads, fi->shape->kv_heads,
            fi->shape->ffn);
    fprintf(f, "  timing:   median of %d runs after a warm-up, per token count; 1-minute load average %.2f\n",
            a->repeat, fi->load[0]);
    fprintf(f, "            before, %.2f after (a busy machine makes every number slower)\n", fi->load[1]);
    if (l->contention_measured)
        fprintf(f, "  contention: the %d-token layer %.3f ms alone, %.3f ms with %d ranks of the node at once\n"
                   "            (medians of %d, alternating): compute_contention %.4f%s\n\n",
                l->contention_tokens, l->alone_s * 1e3, l->together_s * 1e3, l->contention_ranks,
                l->contention_rounds, l->contention, l->contention > 0 ? "" : " (not written: none measured)");
    else if (!l->gpu)
        fprintf(f, "  contention: not measured (one rank on the node: `mpirun -n RANKS trainer calibrate` measures\n"
                   "            compute_contention); the profile says the cores do not slow each other\n\n");
    else
        fprintf(f, "\n");
    fprintf(f, "peak_bf16_tflops is the best %s rate measured here (the GEMM part\n", l->gpu ? "bf16" : "fp32");
    fprintf(f, "of a layer, the attention or the LM head, whichever is fastest), so every fraction is at\n");
    fprintf(f, "most 1. Each curve point makes the cost model give back the measured time of one layer's\n");
    fprintf(f, "forward + backward on a causal sample of TOKENS tokens (gemm = layer - attention), the\n");
    fprintf(f, "head's that of the fused final norm, LM head and loss; bwd_*_factor split it between F\n");
    fprintf(f, "and B (the medians of the backward / forward columns):\n\n");
    fprintf(f, "  %8s %12s %12s %12s %12s %12s %8s %8s %12s\n", "tokens", "layer_ms", "attention_ms", "gemm_ms",
            "fwd_attn_ms", "fwd_gemm_ms", "bwd/fwd", "bwd/fwd", "head_ms");
    fprintf(f, "  %8s %12s %12s %12s %12s %12s %8s %8s %12s\n", "", "", "", "", "", "", "attn", "gemm", "");
    for (int i = 0; i < n; i++) {
        fprintf(f, "  %8d %12.4f %12.4f %12.4f %12.4f %12.4f %8.3f %8.3f", r[i].tokens, r[i].layer_s * 1e3,
                r[i].attn_s * 1e3, r[i].gemm_s * 1e3, r[i].attn_f * 1e3, r[i].gemm_f * 1e3, r[i].attn_b / r[i].attn_f,
                r[i].gemm_b / r[i].gemm_f);
        if (r[i].head_s > 0) fprintf(f, " %12.4f", r[i].head_s * 1e3);
        fprintf(f, "\n");
    }
    if (fclose(f) != 0) {
        free(*out);
        *out = NULL;
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    }
    return LT_OK;
}

/* The comments of the profile's keys: where each number comes from. */
#define NOTE_MAX 320
typedef struct profile_notes {
    char peak[NOTE_MAX], hbm_gib[NOTE_MAX], hbm_gbps[NOTE_MAX], gpus_per_node[NOTE_MAX];
    char p2p_intra_gbps[NOTE_MAX], p2p_intra_latency[NOTE_MAX], reserved[NOTE_MAX];
    char bwd_gemm[NOTE_MAX], bwd_attention[NOTE_MAX], gemm[NOTE_MAX], attention[NOTE_MAX], head[NOTE_MAX];
    char contention[NOTE_MAX];
} profile_notes;

/* The fitted profile (the measured numbers as hw, where they come from as notes), written by
 * the cost model's own writer (lt_hardware_write) into a --out FILE.ini that replaces the
 * old one only when complete. */
static lt_status write_profile(const fit_info *fi, const rung *r, int n, const links *l, lt_error *err) {
    const calib_args *a = fi->a;
    const char *base = lt_path_base(a->out);
    lt_hardware hw;
    memset(&hw, 0, sizeof hw);
    snprintf(hw.name, sizeof hw.name, "%.*s", (int)(strlen(base) - 4), base); /* less ".ini" (parse_args) */
    char m[80];
    snprintf(m, sizeof m, "[measured: trainer calibrate, %s]", fi->date);
    profile_notes pn;
    lt_hardware_notes notes = {
        .peak_bf16_tflops = pn.peak, .hbm_gib = pn.hbm_gib, .hbm_gbps = pn.hbm_gbps,
        .gpus_per_node = pn.gpus_per_node, .p2p_intra_gbps = pn.p2p_intra_gbps,
        .p2p_intra_latency_us = pn.p2p_intra_latency, .reserved_gib = pn.reserved,
        .bwd_gemm_factor = pn.bwd_gemm, .bwd_attention_factor = pn.bwd_attention,
        .compute_contention = pn.contention, .gemm_efficiency = pn.gemm, .attention_efficiency = pn.attention, .head_efficiency = pn.head};

    hw.peak_flops = fi->peak;
    hw.hbm_bytes = l->hbm_bytes;
    hw.hbm_bytes_per_s = l->hbm_bytes_per_s;
    if (l->gpu) {
        snprintf(hw.description, sizeof hw.description, "bf16 CUDA trainer: %s (trainer calibrate, %s)", fi->gpu_name,
                 fi->date);
        snprintf(pn.peak, sizeof pn.peak, "%s the best bf16 rate measured on this GPU, the %s at %d tokens (the "
                 "datasheet's dense peak is higher: the curves are fractions of this one)", m, fi->peak_part,
                 fi->peak_tokens);
        snprintf(pn.hbm_gib, sizeof pn.hbm_gib, "%s %s", m,
                 a->mem_gib > 0 ? "given by --mem-gib" : "the device's total memory (cudaMemGetInfo)");
        snprintf(pn.hbm_gbps, sizeof pn.hbm_gbps, "%s device-to-device copy of %zu MiB, bytes read + written, best of 5",
                 m, GPU_HBM_BYTES >> 20);
    } else {
        snprintf(hw.description, sizeof hw.description, "CPU fp32 trainer: %s, %d threads (trainer calibrate, %s)",
                 fi->cpu, fi->threads, fi->date);
        snprintf(pn.peak, sizeof pn.peak, "%s fp32 CPU peak here: the best rate, the %s at %d tokens", m,
                 fi->peak_part, fi->peak_tokens);
        snprintf(pn.hbm_gib, sizeof pn.hbm_gib, "%s %s", m,
                 a->mem_gib > 0 ? "given by --mem-gib" : "the machine's RAM (sysconf)");
        snprintf(pn.hbm_gbps, sizeof pn.hbm_gbps, "%s copy of %zu MiB over %d threads, bytes read + written", m,
                 HBM_BYTES >> 20, fi->threads);
    }
    if (l->gpu_links_kept) { /* train.backend = cuda: the links are the estimate's (not measured) */
        hw.gpus_per_node = l->gpus_per_node;
        snprintf(pn.gpus_per_node, sizeof pn.gpus_per_node, "[kept from the estimate etc/hardware/%s.ini: not measured]",
                 hw.name);
        hw.p2p_intra_bytes_per_s = l->p2p_bytes_per_s, hw.p2p_intra_latency_s = l->p2p_latency_s;
        hw.p2p_inter_bytes_per_s = l->p2p_inter_bytes_per_s, hw.p2p_inter_latency_s = l->p2p_inter_latency_s;
        snprintf(pn.p2p_intra_gbps, sizeof pn.p2p_intra_gbps,
                 "[kept from the estimate: not measured] NCCL between GPUs is not timed by trainer calibrate");
        snprintf(pn.p2p_intra_latency, sizeof pn.p2p_intra_latency, "[kept from the estimate: not measured]");
        notes.p2p_inter_gbps = notes.p2p_inter_latency_us = "[kept from the estimate: not measured]";
    } else {
        hw.gpus_per_node = a->ranks_per_node;
        snprintf(pn.gpus_per_node, sizeof pn.gpus_per_node,
                 "[given: trainer calibrate --ranks-per-node, default 1, %s] trainer processes per node", fi->date);
        /* one node measured: the links between nodes repeat the intra-node values */
        hw.p2p_intra_bytes_per_s = hw.p2p_inter_bytes_per_s = l->p2p_bytes_per_s;
        hw.p2p_intra_latency_s = hw.p2p_inter_latency_s = l->p2p_latency_s;
        if (l->p2p_mpi) {
            snprintf(pn.p2p_intra_gbps, sizeof pn.p2p_intra_gbps, "%s MPI ping-pong of %zu MiB between ranks 0 and 1 "
                     "(of %d)", m, P2P_BYTES >> 20, l->mpi_ranks);
            snprintf(pn.p2p_intra_latency, sizeof pn.p2p_intra_latency,
                     "%s MPI ping-pong of 8 bytes, half the round trip", m);
        } else {
            snprintf(pn.p2p_intra_gbps, sizeof pn.p2p_intra_gbps, "%s memcpy of %zu MiB between two buffers of one "
                     "process (shared memory: no MPI launcher)", m, P2P_BYTES >> 20);
            snprintf(pn.p2p_intra_latency, sizeof pn.p2p_intra_latency,
                     "%s memcpy of 8 bytes in one process (no MPI launcher)", m);
        }
        notes.p2p_inter_gbps = notes.p2p_inter_latency_us = "[not measured: the intra-node value] one node measured";
    }
    hw.has_logit_bytes = hw.has_reserved_bytes = true; /* logit_bytes 0: the fused head */
    if (l->gpu) {
        hw.act_bytes = 2.0;
        notes.act_bytes = "[derived] the CUDA trainer's bf16 activations, keys/values and their gradients";
        notes.logit_bytes = "[derived] the pass's fused head (train/model/pass.c, the same code on the GPU): no "
                            "logits are kept";
        hw.reserved_bytes = l->reserved_bytes;
        snprintf(pn.reserved, sizeof pn.reserved,
                 "%s device memory in use before the timing (CUDA context, cuBLASLt workspace)", m);
    } else {
        hw.act_bytes = 4.0;
        notes.act_bytes = "[derived] the CPU trainer's fp32 activations, keys/values and their gradients";
        notes.logit_bytes = "[derived] the trainer's fused head: the loss gradient is made in the forward, row block "
                            "by row block, and no logits are kept";
        snprintf(pn.reserved, sizeof pn.reserved, "[derived] no device context: the process's RAM is the trainer's");
    }
    hw.bwd_gemm_factor = fi->bwd_gemm;
    hw.bwd_attention_factor = fi->bwd_attention;
    snprintf(pn.bwd_gemm, sizeof pn.bwd_gemm,
             "%s backward / forward time of the GEMM part, the median over the token counts (the FLOP ratio is 2)", m);
    snprintf(pn.bwd_attention, sizeof pn.bwd_attention, "%s backward / forward time of the attention core, the median "
             "over the token counts (the FLOP ratio is 2.5)", m);
    if (l->contention_measured) {
        hw.compute_contention = l->contention; /* written when > 0 */
        snprintf(pn.contention, sizeof pn.contention, "%s the %d-token layer %.2f ms alone, %.2f ms with %d ranks of "
                 "the node at once (medians of %d, alternating): (%.4f - 1) / %d", m, l->contention_tokens,
                 l->alone_s * 1e3, l->together_s * 1e3, l->contention_ranks, l->contention_rounds,
                 l->together_s / l->alone_s, l->contention_ranks - 1);
    }
    /* one point per token count: the fraction of the peak that gives back the measured time */
    for (int i = 0; i < n; i++) {
        hw.gemm.tokens[i] = hw.attention.tokens[i] = r[i].tokens;
        hw.gemm.fraction[i] = r[i].work_gemm / (fi->peak * r[i].gemm_s);
        hw.attention.fraction[i] = r[i].work_attn / (fi->peak * r[i].attn_s);
        if (r[i].head_s > 0) {
            hw.head.tokens[hw.head.n] = r[i].tokens;
            hw.head.fraction[hw.head.n++] = r[i].work_head / (fi->peak * r[i].head_s);
        }
    }
    hw.gemm.n = hw.attention.n = n;
    snprintf(pn.gemm, sizeof pn.gemm, "%s GEMM part per token count (layer - attention)", m);
    snprintf(pn.attention, sizeof pn.attention, "%s the attention core's forward + backward per causal sequence length",
             m);
    snprintf(pn.head, sizeof pn.head, "%s the fused final norm, LM head and loss, forward + backward, per token count "
             "(past the last point its rate holds: it runs in row blocks)", m);

    char *header;
    lt_status st = profile_header(fi, r, n, l, &header, err);
    if (st != LT_OK) return st;
    notes.header = header;
    lt_atomic_file af;
    st = lt_atomic_open(&af, a->out, err);
    if (st == LT_OK) {
        st = lt_hardware_write(&hw, &notes, af.fp, err);
        if (st == LT_OK) st = lt_atomic_commit(&af, err);
        else lt_atomic_abort(&af);
    }
    free(header);
    return st;
}

/* ------------------------------------------------------------------ the command */

/* The ladder of the run: --tokens, or the default powers of two (cut short by the budget
 * as it runs). */
static int default_ladder(int *tokens) {
    int n = 0;
    for (int t = LADDER_FIRST; t <= LADDER_LAST; t *= 2) tokens[n++] = t;
    return n;
}

int calibrate_command(lt_cli_ctx *ctx) {
    calib_args a;
    int rc = parse_args(ctx, &a);
    if (rc) return rc;
    int tokens[MAX_POINTS], n_tokens = 0;
    if (a.tokens) {
        if ((rc = parse_tokens(ctx, a.tokens, tokens, &n_tokens))) return rc;
    } else {
        n_tokens = default_ladder(tokens);
    }
    lt_error err;
    lt_model_shape shape;
    lt_status st = lt_cmd_model_shape(ctx, &shape, &err);
    /* train.backend = cuda: the same measurements through the CUDA backend (bf16 on the
     * GPU; train/model/backend.h), which this command opens itself on rank 0 */
    const char *backend = lt_config_get_string(ctx->config, "train", "backend");
    bool gpu = backend && strcmp(backend, "cuda") == 0;
    if (st == LT_OK && !gpu) st = lt_cmd_backend(ctx, &err);
    if (st != LT_OK) return lt_error_exit(&err);
    /* the cost model of this shape; a 1-layer model would put the head on layer 0's op */
    lt_model_shape cshape = shape;
    if (cshape.layers < 2) cshape.layers = 2;
    lt_hardware *hw = lt_calloc_check(1, sizeof *hw);
    lt_cost_model *cm = lt_calloc_check(1, sizeof *cm);
    links l = {0};
    int rank = 0;
    if (a.check) {
        st = lt_hardware_load(hw, a.check, NULL, &err);
        if (st == LT_OK) st = lt_cost_model_init(cm, &cshape, hw, 1, 1, 1, &err);
    } else {
        unit_profile(hw, 2.0, 2.5); /* the shape checked before timing; refitted after */
        st = lt_cost_model_init(cm, &cshape, hw, 1, 1, 1, &err);
        /* the CPU's compute contention at the ladder's largest count up to 1024 tokens */
        contention_job job = {&shape, lt_cmd_seed(ctx), lt_cmd_threads(ctx), tokens[0], 2 * a.repeat + 1};
        for (int i = 0; i < n_tokens && tokens[i] <= 1024; i++) job.tokens = tokens[i];
        if (st == LT_OK) st = measure_mpi(&l, &rank, gpu ? NULL : &job, &err);
    }
    if (st != LT_OK || rank != 0) { /* ranks other than 0 only took part in the MPI measurements */
        free(hw), free(cm);
        return st != LT_OK ? lt_error_exit(&err) : 0;
    }

    bench_env e;
    memset(&e, 0, sizeof e);
    lt_backend *be = NULL;
    if (gpu) {
        size_t free_b = 0, total_b = 0;
        st = lt_backend_cuda_open(&be, 0, &err);
        if (st == LT_OK) st = lt_backend_cuda_mem(be, &free_b, &total_b, &err);
        l.gpu = true;
        l.reserved_bytes = (double)(total_b - free_b); /* the context and cuBLASLt's workspace */
        if (st != LT_OK) {
            char why[LT_ERROR_WHAT_MAX];
            snprintf(why, sizeof why, "%s", err.what);
            lt_fail(&err, LT_ERR_CONFIG, lt_config_origin(ctx->config, "train", "backend"), "train.backend = cuda: %s",
                    why);
            lt_error_hint(&err, "calibrating the GPU needs a --with-cuda build on a machine with a GPU "
                                "(scripts/gpu-check.sh runs it there); train.backend = cpu calibrates the CPU trainer");
        }
    }
    if (st == LT_OK) st = bench_open(&e, &shape, lt_cmd_seed(ctx), lt_cmd_threads(ctx), be, &err);
    int threads = e.threads;
    rung r[MAX_POINTS];
    int n = 0;
    trainer_bytes tb = {0};
    double spent = 0;
    double load_before = load_average();
    if (st == LT_OK && be)
        LT_INFO("calibrate: %s, the CUDA backend (bf16, GPU 0), tokens %d..%d, median of %d",
                shape.name ? shape.name : "custom", tokens[0], tokens[n_tokens - 1], a.repeat);
    else if (st == LT_OK)
        LT_INFO("calibrate: %s, %d threads, tokens %d..%d, median of %d", shape.name ? shape.name : "custom", threads,
                tokens[0], tokens[n_tokens - 1], a.repeat);
    for (int i = 0; st == LT_OK && i < n_tokens; i++) {
        rung *x = &r[n];
        memset(x, 0, sizeof *x);
        x->tokens = tokens[i];
        double t0 = now_s();
        st = time_rung(&e.m, &e.g, x->tokens, a.repeat, e.pool, x, &tb, &err);
        if (st != LT_OK) break;
        spent += now_s() - t0;
        split_parts(x);
        n++;
        LT_INFO("tokens=%d layer_ms=%.3f (forward %.3f) attention_ms=%.3f (forward %.3f)", x->tokens,
                x->layer_s * 1e3, x->layer_f * 1e3, x->attn_s * 1e3, x->attn_f * 1e3);
        /* the default ladder stops where the next rung (about 4x: attention is quadratic)
         * would take the run well past a minute */
        if (!a.tokens && i + 1 < n_tokens && spent + 4.0 * (now_s() - t0) > LADDER_BUDGET_S) {
            LT_INFO("stopping the ladder at %d tokens (the next would take the run past about a minute)",
                    x->tokens);
            break;
        }
    }
    /* the head at every measured count up to HEAD_TOKENS (at least the smallest) */
    for (int i = 0; st == LT_OK && i < n; i++)
        if (i == 0 || r[i].tokens <= HEAD_TOKENS) st = time_head(&e.m, &e.g, r[i].tokens, a.repeat, e.pool, &r[i].head_s, &err);
    bench_close_model(&e);
    if (st == LT_OK && !a.check) st = measure_memory(e.pool, threads, &l, &err);
    if (st == LT_OK && !a.check && be) {
        st = measure_gpu_memory(be, &l, &err);
        /* the links between GPUs: kept from the estimate of the same name (etc/hardware), not
         * measured (NCCL between two ranks' GPUs is not timed here) */
        lt_hardware *est = lt_calloc_check(1, sizeof *est);
        lt_error e2;
        const char *base = lt_path_base(a.out);
        char est_name[LT_HARDWARE_NAME_MAX];
        snprintf(est_name, sizeof est_name, "%.*s", (int)(strlen(base) - 4), base);
        if (st == LT_OK && lt_hardware_load(est, est_name, NULL, &e2) == LT_OK) {
            l.gpu_links_kept = true;
            l.gpus_per_node = est->gpus_per_node;
            l.p2p_bytes_per_s = est->p2p_intra_bytes_per_s, l.p2p_latency_s = est->p2p_intra_latency_s;
            l.p2p_inter_bytes_per_s = est->p2p_inter_bytes_per_s, l.p2p_inter_latency_s = est->p2p_inter_latency_s;
        }
        free(est);
    }
    lt_backend_cuda_close(be);
    lt_pool_destroy(e.pool);

    fit_info fi = {.a = &a, .ctx = ctx, .shape = &shape, .threads = threads, .load = {load_before, load_average()}};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (st == LT_OK && cpus > 0 && fi.load[1] > (double)cpus + 0.5)
        LT_WARN("the machine was busy while timing (1-minute load average %.2f on %ld CPUs): the numbers are slow",
                fi.load[1], cpus);
    if (st == LT_OK && !a.check) {
        /* the backward / forward factors, as they will be printed, then the work of every
         * part under them (lt_cost_op on the unit profile) */
        fit_backward_factors(r, n, &fi.bwd_gemm, &fi.bwd_attention);
        unit_profile(hw, fi.bwd_gemm, fi.bwd_attention);
        st = lt_cost_model_init(cm, &cshape, hw, 1, 1, 1, &err);
    }
    if (st == LT_OK && !a.check) {
        /* peak: the best rate of any part (every fraction <= 1), as it will be printed */
        double best = 0;
        for (int i = 0; i < n; i++) {
            double unused;
            price_layer(cm, r[i].tokens, &unused, NULL, &r[i].work_gemm, &r[i].work_attn);
            r[i].work_head = r[i].head_s > 0 ? price_head(cm, r[i].tokens) : 0.0;
            double rg = r[i].work_gemm / r[i].gemm_s, ra = r[i].work_attn / r[i].attn_s;
            double rh = r[i].head_s > 0 ? r[i].work_head / r[i].head_s : 0.0;
            if (rg > best) best = rg, fi.peak_tokens = r[i].tokens, fi.peak_part = "GEMM part";
            if (ra > best) best = ra, fi.peak_tokens = r[i].tokens, fi.peak_part = "attention";
            if (rh > best) best = rh, fi.peak_tokens = r[i].tokens, fi.peak_part = "LM head";
        }
        fi.peak = printed_up(best / 1e12) * 1e12;
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(fi.date, sizeof fi.date, "%Y-%m-%d", &tm);
        cpu_model(fi.cpu, sizeof fi.cpu);
        snprintf(fi.gpu_name, sizeof fi.gpu_name, "GPU 0");
        if (l.gpu) {
            int major = 0, minor = 0;
            lt_error e3;
            if (lt_gpu_device_info(0, fi.gpu_name, sizeof fi.gpu_name, &major, &minor, &e3) != LT_OK)
                snprintf(fi.gpu_name, sizeof fi.gpu_name, "GPU 0");
        }
        if (!l.gpu || a.mem_gib > 0)
            l.hbm_bytes = a.mem_gib > 0 ? a.mem_gib * 1073741824.0
                                        : (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
        st = write_profile(&fi, r, n, &l, &err);
        /* the file as the planner reads it */
        if (st == LT_OK) st = lt_hardware_load(hw, a.out, NULL, &err);
        if (st == LT_OK) st = lt_cost_model_init(cm, &cshape, hw, 1, 1, 1, &err);
    }
    if (st != LT_OK) {
        free(hw), free(cm);
        return lt_error_exit(&err);
    }
    if (a.out)
        printf("wrote %s: peak %.4g GFLOP/s (%s), memory %.1f GiB at %.3g GB/s, p2p %.3g GB/s + %.3g us (%s)\n",
               a.out, hw->peak_flops / 1e9, l.gpu ? "bf16, GPU" : "fp32", hw->hbm_bytes / 1073741824.0,
               hw->hbm_bytes_per_s / 1e9, hw->p2p_intra_bytes_per_s / 1e9, hw->p2p_intra_latency_s * 1e6,
               l.gpu_links_kept ? "kept from the estimate" : l.p2p_mpi ? "MPI ping-pong" : "memcpy, one process");
    else
        printf("profile %s (%s)\n", hw->name, hw->path);
    double max_err = 0;
    for (int i = 0; i < n; i++) {
        double gt, at;
        price_layer(cm, r[i].tokens, &r[i].predicted_s, &r[i].predicted_f, &gt, &at);
        r[i].rel_err = fabs(r[i].predicted_s - r[i].layer_s) / r[i].layer_s;
        max_err = r[i].rel_err > max_err ? r[i].rel_err : max_err;
        printf("tokens=%d layer_ms=%.4f attention_ms=%.4f gemm_ms=%.4f predicted_ms=%.4f (gemm %.4f + attention "
               "%.4f) rel_err=%.2e forward_ms=%.4f predicted_forward_ms=%.4f forward_rel_err=%.2e\n",
               r[i].tokens, r[i].layer_s * 1e3, r[i].attn_s * 1e3, r[i].gemm_s * 1e3, r[i].predicted_s * 1e3,
               gt * 1e3, at * 1e3, r[i].rel_err, r[i].layer_f * 1e3, r[i].predicted_f * 1e3,
               fabs(r[i].predicted_f - r[i].layer_f) / r[i].layer_f);
    }
    printf("backward/forward gemm=%.4g attention=%.4g (%s; the FLOP ratios are 2 and 2.5)\n",
           cm->bwd_gemm_time_factor, cm->bwd_attn_time_factor,
           a.check ? "the profile's" : "fitted: the medians over the token counts");
    for (int i = 0; i < n; i++) {
        if (!(r[i].head_s > 0)) continue;
        double p = price_head(cm, r[i].tokens);
        printf("head tokens=%d measured_ms=%.4f predicted_ms=%.4f rel_err=%.2e (%s)\n", r[i].tokens,
               r[i].head_s * 1e3, p * 1e3, fabs(p - r[i].head_s) / r[i].head_s,
               hw->head.n > 0 ? "on the head curve" : "on the GEMM curve");
    }
    /* what one token holds: in the trainer (its allocations, fp32) and in the cost model
     * under this profile's act_bytes (docs/cost-model.md, "Memory"); per layer unless said */
    cost_bytes cb;
    cost_model_bytes(cm, n ? r[n - 1].tokens : 1, &cb);
    printf("bytes_per_token trainer_layer=%.0f trainer_kv_layer=%.0f trainer_unit=%.0f trainer_head=%.0f "
           "cost_model_layer=%.0f cost_model_layer_kv_apart=%.0f cost_model_kv_layer=%.0f cost_model_head=%.0f\n",
           tb.layer, tb.kv_layer, tb.unit, tb.head, cb.layer, cb.layer_kv_apart, cb.kv_layer, cb.head);
    printf("max_rel_err=%.3e points=%d\n", max_err, n);
    free(hw), free(cm);
    return 0;
}
