/*
 * train/cmd/check.c — `trainer check`: the gradient-equivalence oracle (DESIGN.md "Key
 * invariants: Equivalence"). For each chosen step of a plan database, the parameter
 * gradients of executing the plan (train/exec/exec.h: every pipeline, stage, slice, packing,
 * backward regrouping of the strategy) against one process running every sample whole, one
 * unit each (lt_llama_step_units); both divide by the step's predicted tokens.
 *
 * With train.backend = cuda in one process: the same, and then the GPU executor against the
 * CPU executor as the oracle: the plan executed on the GPU (bf16, train/model/backend.h) against
 * the plan executed on the CPU (fp32), per tensor ||g_gpu - g_cpu|| / ||g_cpu|| <=
 * GPU_TOLERANCE (bf16 storage of activations and K/V: tests/train/test_backend.c measures
 * 1.7e-2 at worst for the executor on the CPU's bf16 emulation). Under a launcher each
 * rank executes its part on its GPU (NCCL: stage channels, context-parallel ring, gradient
 * all-reduces), and rank 0 compares the gathered gradients with one CPU fp32 process and
 * with every sample whole by relative norm within GPU_TOLERANCE (last line: backend=cuda).
 *
 * Tests only: LONGTAIL_TEST_BACKEND=cpu-bf16 executes the plan (in one process, or on the
 * ranks of a launched job) with the model on the cpu-bf16 backend, the CPU emulation of the
 * CUDA backend's host logic (2-byte elements in every buffer, stage-to-stage transfer and K/V
 * row the executor keeps), and judges it as the GPU is judged: every tensor's relative norm
 * against the fp32 references within GPU_TOLERANCE (the printed rel_err and rank_rel_err are
 * then relative norms, and the last line ends with "backend=cpu-bf16").
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cli.h"               /* lt_cli_ctx, lt_cli_option_value, lt_cli_usage */
#include "lib/config.h"            /* lt_config_get_double */
#include "plans/batches/sampler.h" /* lt_sample */
#include "plans/cost/cost.h"       /* lt_cost_tp_bytes: the TP traffic the planner prices */
#include "plans/store/store.h"     /* lt_store_get_step, lt_store_steps, lt_store_close */
#include "train/model/backend.h"   /* lt_backend_cuda_*: the GPU check */
#include "train/cmd/cmd.h"         /* check_command, lt_cmd_* */
#include "train/cpu/threads.h"     /* lt_cpu_init */
#include "train/io/docs.h"         /* lt_docs_open, lt_docs_get_piece */
#include "train/dist/dist.h"       /* lt_dist: the stages' parameters over MPI ranks */
#include "train/exec/exec.h"       /* lt_exec_step, lt_exec_step_rank */

/* "0,100,200" -> steps (malloc'd). */
static lt_status parse_steps(const char *text, uint64_t **steps, size_t *n, lt_error *err) {
    size_t cap = 1;
    for (const char *c = text; *c; c++) cap += *c == ',';
    *steps = malloc(cap * sizeof **steps);
    *n = 0;
    if (!*steps) return lt_fail(err, LT_ERR_NOMEM, "--steps", "out of memory");
    const char *c = text;
    while (1) {
        char *end;
        if (*c < '0' || *c > '9') break;
        unsigned long long v = strtoull(c, &end, 10);
        (*steps)[(*n)++] = v;
        if (*end == '\0') return LT_OK;
        if (*end != ',') break;
        c = end + 1;
    }
    free(*steps);
    *steps = NULL;
    return lt_fail(err, LT_ERR_USAGE, "--steps", "'%.100s' is not a comma-separated list of step numbers", text);
}

/* max |a - b| / max |b| over a tensor (the absolute difference when b is all zero); NaN when
 * any element is (fmax would skip it, and a gradient that read memory nobody wrote, NaN
 * under LONGTAIL_POISON, would pass). */
static double rel_err(const float *a, const float *b, size_t n) {
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d)) return NAN;
        diff = fmax(diff, d);
        scale = fmax(scale, fabs((double)b[i]));
    }
    return scale > 0 ? diff / scale : diff;
}

typedef struct check_run {
    lt_llama m;
    lt_store *store;
    lt_docs *docs;
    lt_pool *pool;
    float *ga, *gb; /* gradients: plan executed, samples whole */
    float *gc;      /* distributed: the plan executed in one process (rank 0) */
    lt_layer_views *lv;
    lt_llama_views va, vb, vc;
    double worst, worst_rank;
    lt_comm *comm;  /* NULL: one process */
    /* tensor parallelism (parallel.tp > 1 under a launcher): the rank executes mp, its shard
     * of m, into gr (mp's layout); rank 0 gathers the shards into ga (m's layout). With
     * tp = 1, xm is &m and gr is ga. */
    lt_llama mp, *xm;
    lt_tp_ops tpo;
    float *gr;
    lt_llama_views vr;
    lt_cost_model cm;      /* tp > 1: the plans' cost model, act_bytes the backend's */
    double worst_tp_bytes; /* the largest |measured - predicted| / predicted TP bytes of a rank */
    double worst_params;   /* the largest |held - predicted| / predicted parameters of a rank's part */
    int tp_compared;       /* steps whose TP bytes were compared (not those with CP groups) */
    lt_dist dist;
    bool dist_ready;
    /* train.backend = cuda: the model on the GPU (a copy of m's struct with its backend),
     * device gradients, their host copy; the worst GPU-vs-CPU error */
    lt_backend *be;
    lt_llama mg;
    float *dg, *hg;
    lt_llama_views vg;
    double worst_gpu;
    /* LONGTAIL_TEST_BACKEND=cpu-bf16 (tests only): the plan executed (in one process or on
     * the ranks) with the model on the cpu-bf16 backend (train/model/backend.h, the emulation of
     * the CUDA backend's host logic: 2-byte activations, K/V and transfers), compared with the
     * fp32 references by relative norm within GPU_TOLERANCE; NULL: the CPU fp32 executor */
    const lt_backend *tbe;
    lt_llama mt; /* m's struct with tbe as its backend (the same parameters) */
    /* HelixPipe's plans (layer parts) under a launcher; helix_parts: every step one, each
     * rank holds HelixPipe's part of its stage (lt_llama_helix_part), else (mixed with other
     * strategies' steps) the whole model, each tensor owned by its part's stage
     * (train/dist/dist.h lt_dist.helix) */
    bool helix, helix_parts;
} check_run;

/* The GPU's relative error: bf16 activations and K/V (train/model/backend.h), fp32 gradients. */
#define GPU_TOLERANCE 3e-2

/* ||a - b|| / ||b|| over n values (||a - b|| when b is all zero). */
static double rel_norm(const float *a, const float *b, size_t n) {
    double d2 = 0, b2 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        d2 += d * d, b2 += (double)b[i] * (double)b[i];
    }
    return b2 > 0 ? sqrt(d2 / b2) : sqrt(d2);
}

/* The plan executed on the GPU into c->hg; per tensor against the CPU executor's ga. */
static lt_status check_gpu(check_run *c, const lt_step_plan *p, const lt_train_sample *smp, lt_error *err) {
    size_t n = c->m.n_params;
    uint64_t step = p->step;
    c->be->zero(c->be, c->dg, n * sizeof(float));
    lt_exec_stats es = {0};
    lt_status st = lt_exec_step(&c->mg, p, smp, &c->vg, &es, c->pool, err);
    double loss = es.loss_sum / (double)p->n_predicted, peak = 0;
    for (int g = 0; st == LT_OK && g < es.n_stages; g++) peak = fmax(peak, (double)es.stage_peak_bytes[g]);
    lt_exec_stats_free(&es);
    if (st == LT_OK) st = c->be->to_host(c->be, c->hg, c->dg, n * sizeof(float), err);
    double worst = 0;
    const char *worst_name = "";
    for (int t = 0; st == LT_OK && t < c->m.n_tensors; t++) {
        const lt_tensor_info *ti = &c->m.tensors[t];
        double e = rel_norm(c->hg + ti->offset, c->ga + ti->offset, (size_t)ti->rows * (size_t)ti->cols);
        if (isnan(e)) e = INFINITY;
        printf("step=%" PRIu64 " gpu tensor=%s rel_norm_err=%.3e\n", step, ti->name, e);
        if (e > worst || t == 0) worst = e, worst_name = ti->name;
    }
    if (st == LT_OK)
        printf("step=%" PRIu64 " gpu_loss=%.6f gpu_max_rel_norm_err=%.3e worst=%s gpu_act_peak_mb=%.1f (the plan on "
               "the GPU in bf16 against the CPU executor)\n", step, loss, worst, worst_name, peak / 1048576.0);
    if (worst > c->worst_gpu) c->worst_gpu = worst;
    return st;
}

/* Tensor parallelism: the bytes the cost model prices for this rank's TP all-gathers and
 * reduce-scatters in step p (the ops of its stage in the pipeline of its DP rank,
 * lt_cost_tp_bytes); -1 when the step has context-parallel groups (not compared). */
static double predicted_tp_bytes(const check_run *c, const lt_step_plan *p) {
    const lt_comm_layout *l = lt_comm_layout_of(c->comm);
    if (p->n_merges > 0) return -1;
    double sum = 0;
    for (size_t r = 0; r < p->n_ranks; r++) {
        const lt_rank_plan *rp = &p->ranks[r];
        if (rp->cp > 1) return -1;
        if (rp->dp_rank != l->dp_rank || l->stage >= rp->sched.stages) continue;
        const lt_stage_ops *so = &rp->sched.stage[l->stage];
        for (size_t i = 0; i < so->n; i++) {
            size_t n;
            const lt_slice *sl = lt_schedule_op_slices(&rp->sched, &so->ops[i], &n);
            sum += lt_cost_tp_bytes(&c->cm, sl, n, &so->ops[i], 1);
        }
    }
    return sum;
}

/* One step: execute, reference, compare; prints the step's lines. */
static lt_status check_step(check_run *c, uint64_t step, lt_error *err) {
    lt_step_plan p;
    lt_step_plan_init(&p);
    lt_sample *src = NULL;
    lt_status st = lt_store_get_step(c->store, step, &p, &src, err);
    lt_train_sample *smp = st == LT_OK ? calloc(p.n_samples + 1, sizeof *smp) : NULL;
    lt_train_slice *whole = st == LT_OK ? calloc(p.n_samples + 1, sizeof *whole) : NULL;
    lt_train_unit *units = st == LT_OK ? calloc(p.n_samples + 1, sizeof *units) : NULL;
    if (st == LT_OK && (!smp || !whole || !units)) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    if (st == LT_OK) st = lt_cmd_load_plan_samples(c->docs, &p, src, smp, err);
    lt_exec_stats es = {0};
    memset(c->ga, 0, c->m.n_params * sizeof(float));
    memset(c->gb, 0, c->m.n_params * sizeof(float));
    bool rank0 = !c->comm || lt_comm_layout_of(c->comm)->rank == 0;
    double rank_worst = 0;
    /* the model the plan is executed with: the test backend's, on the ranks the GPU's, else
     * the CPU fp32 reference (one process on a GPU: check_gpu, beside it) */
    bool dev = c->be && c->comm;
    const lt_llama *rm = c->tbe ? &c->mt : dev ? &c->mg : c->xm;
    bool bf16 = c->tbe || dev; /* compared by relative norm within GPU_TOLERANCE */
    if (st == LT_OK && !c->comm) st = lt_exec_step(rm, &p, smp, &c->va, &es, c->pool, err);
    if (st == LT_OK && c->comm) { /* this rank's ops, the DP sum, every stage's tensors to rank 0 */
        st = c->dist_ready ? lt_dist_check_plan(&c->dist, &p, err) : lt_dist_init(&c->dist, c->comm, c->xm, &p, 25, LT_SHARD_NONE, err);
        c->dist_ready = st == LT_OK;
        lt_exec_hooks hooks = {.ctx = &c->dist, .grads_final = lt_dist_layer_final}; /* as train --db */
        float *g = dev ? c->dg : c->gr; /* the GPU's: fp32 device gradients, downloaded once reduced */
        if (dev) c->be->zero(c->be, c->dg, c->xm->n_params * sizeof(float));
        if (c->gr != c->ga) memset(c->gr, 0, c->xm->n_params * sizeof(float));
        if (st == LT_OK) lt_dist_bind(&c->dist, c->xm, g);
        if (st == LT_OK) lt_dist_set_device_grads(&c->dist, dev);
        if (st == LT_OK) st = lt_exec_step_rank(rm, &p, smp, dev ? &c->vg : &c->vr, &es, c->pool, c->comm, &hooks, err);
        if (st == LT_OK) st = lt_dist_reduce_grads(&c->dist, c->xm, g, err);
        if (st == LT_OK && dev) st = c->be->to_host(c->be, c->gr, c->dg, c->xm->n_params * sizeof(float), err);
        if (st == LT_OK) st = lt_dist_gather(&c->dist, c->xm, c->gr, &c->m, c->ga, err);
        int64_t kv = es.kv_transfers; /* HelixPipe: a sample's K/V between attention stages */
        if (st == LT_OK && c->helix) st = lt_comm_allreduce(c->comm, LT_COMM_WORLD, &kv, 1, LT_COMM_I64, false, err);
        if (st == LT_OK && c->helix && rank0)
            printf("step=%" PRIu64 " helix kv_transfers=%" PRId64 " (a sample's K/V or dK/dV sent between attention "
                   "stages, every rank)\n", step, kv);
        if (st == LT_OK && c->xm->tp > 1) { /* the planner's TP pricing against the bytes sent */
            double want = predicted_tp_bytes(c, &p), e[2] = {0, 0};
            if (want >= 0) e[0] = want > 0 ? fabs(es.tp_bytes - want) / want : es.tp_bytes, e[1] = 1;
            st = lt_comm_allreduce(c->comm, LT_COMM_WORLD, e, 2, LT_COMM_F64, true, err);
            if (st == LT_OK && e[1] > 0) c->tp_compared++;
            if (st == LT_OK && e[1] > 0 && e[0] > c->worst_tp_bytes) c->worst_tp_bytes = e[0];
            if (st == LT_OK && rank0 && e[1] > 0)
                printf("step=%" PRIu64 " tp_bytes=%.0f predicted=%.0f tp_bytes_rel_err=%.3e (rank 0's TP all-gathers and "
                       "reduce-scatters against the cost model's; the worst rank's error)\n",
                       step, es.tp_bytes, want, e[0]);
        }
    }
    if (c->comm) { /* the ranks' gradients against one process running the whole plan */
        lt_exec_stats one = {0};
        memset(c->gc, 0, c->m.n_params * sizeof(float));
        if (st == LT_OK && rank0) st = lt_exec_step(&c->m, &p, smp, &c->vc, &one, c->pool, err);
        lt_exec_stats_free(&one);
        for (int t = 0; st == LT_OK && rank0 && t < c->m.n_tensors; t++) {
            const lt_tensor_info *ti = &c->m.tensors[t];
            size_t n = (size_t)ti->rows * (size_t)ti->cols;
            double e = bf16 ? rel_norm(c->ga + ti->offset, c->gc + ti->offset, n) /* bf16 against fp32 */
                              : rel_err(c->ga + ti->offset, c->gc + ti->offset, n);
            if (e > rank_worst || isnan(e)) rank_worst = isnan(e) ? INFINITY : e;
        }
        if (rank_worst > c->worst_rank) c->worst_rank = rank_worst;
    }
    double ref_loss = 0;
    if (st == LT_OK && rank0) {
        for (size_t i = 0; i < p.n_samples; i++) {
            whole[i] = (lt_train_slice){.sample = (int)i, .begin = 0, .end = smp[i].len};
            units[i] = (lt_train_unit){.slices = &whole[i], .n_slices = 1};
        }
        lt_batch b = {.samples = smp, .n_samples = (int)p.n_samples};
        int chunk = c->m.mlp_chunk; /* the reference: every MLP row at once */
        c->m.mlp_chunk = 0;
        st = lt_llama_step_units(&c->m, &b, units, (int)p.n_samples, (float)(1.0 / (double)p.n_predicted), &c->vb,
                                 NULL, &ref_loss, c->pool, err);
        c->m.mlp_chunk = chunk;
        if (st == LT_OK && c->be && !c->comm) st = check_gpu(c, &p, smp, err);
    }
    if (st == LT_OK && rank0) {
        double worst = 0;
        const char *worst_name = "";
        for (int t = 0; t < c->m.n_tensors; t++) {
            const lt_tensor_info *ti = &c->m.tensors[t];
            size_t n = (size_t)ti->rows * (size_t)ti->cols;
            double e = bf16 ? rel_norm(c->ga + ti->offset, c->gb + ti->offset, n) : rel_err(c->ga + ti->offset, c->gb + ti->offset, n);
            if (isnan(e)) e = INFINITY; /* a NaN gradient is the worst */
            printf("step=%" PRIu64 " tensor=%s rel_err=%.3e\n", step, ti->name, e);
            if (e > worst || t == 0) worst = e, worst_name = ti->name;
        }
        double N = (double)p.n_predicted;
        printf("step=%" PRIu64 " strategy=%s loss=%.6f ref_loss=%.6f loss_diff=%.3e max_rel_err=%.3e worst=%s "
               "samples=%zu tokens=%" PRId64 " ops=%zu skipped=%zu act_peak_mb=%.1f\n",
               step, lt_strategy_name(p.strategy), es.loss_sum / N, ref_loss / N, fabs(es.loss_sum - ref_loss) / N,
               worst, worst_name, p.n_samples, es.tokens, es.ops_run, es.ops_skipped,
               (double)es.act_bytes_peak / 1048576.0);
        printf("step=%" PRIu64 " stage_peak_mb=", step);
        for (int g = 0; g < es.n_stages; g++)
            printf("%s%.1f", g ? "," : "", (double)es.stage_peak_bytes[g] / 1048576.0);
        printf("\n");
        if (c->comm)
            printf("step=%" PRIu64 " ranks=%d rank_rel_err=%.3e (the ranks' gradients against one process)\n", step,
                   lt_comm_layout_of(c->comm)->world, rank_worst);
        fflush(stdout);
        if (worst > c->worst || isnan(worst)) c->worst = isnan(worst) ? INFINITY : worst;
    }
    for (size_t i = 0; smp && i < p.n_samples; i++) free((void *)smp[i].tokens);
    lt_exec_stats_free(&es);
    free(smp), free(whole), free(units), free(src);
    lt_step_plan_free(&p);
    return st;
}

/* The layers [l0, l1) of this rank's stage in stored step `step`. */
static lt_status first_stage_layers(check_run *c, uint64_t step, int *l0, int *l1, lt_error *err) {
    lt_step_plan p;
    lt_step_plan_init(&p);
    lt_sample *src = NULL;
    lt_status st = lt_store_get_step(c->store, step, &p, &src, err);
    /* the layout first: a plan for another one is refused as such, not by its stage's layers */
    if (st == LT_OK) st = lt_dist_check_layout(&p, lt_comm_layout_of(c->comm), err);
    if (st == LT_OK) st = lt_dist_stage_layers(&p, lt_comm_layout_of(c->comm)->stage, l0, l1, err);
    if (c->helix) *l0 = 0, *l1 = c->m.shape.layers; /* (any HelixPipe step: its part, or the whole model) */
    free(src);
    lt_step_plan_free(&p);
    return st;
}

/* The plans' cost model for counting, its element size the CPU backend's. */
static lt_status check_cost_model(const char *db, check_run *c, lt_error *err) {
    lt_status st = lt_cmd_plans_counts(c->store, db, &c->cm, err);
    if (st == LT_OK) c->cm.act_bytes = sizeof(float);
    return st;
}

static lt_status load_or_init(const lt_cli_ctx *ctx, const char *ckpt, lt_llama *m, lt_error *err) {
    if (ckpt) return lt_cmd_load_model(ctx, ckpt, m, NULL, NULL, err);
    lt_model_shape shape;
    lt_status st = lt_cmd_model_shape(ctx, &shape, err);
    if (st == LT_OK) st = lt_llama_create(m, &shape, err);
    if (st == LT_OK) lt_llama_init(m, lt_cmd_seed(ctx));
    return st;
}

int check_command(lt_cli_ctx *ctx) {
    const char *db = NULL, *data = NULL, *steps_arg = NULL, *ckpt = NULL;
    for (int i = 1; i < ctx->argc; i++) {
        int missing = 0;
        const char *v;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--db", &missing))) db = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--data", &missing))) data = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--steps", &missing))) steps_arg = v;
        else if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--ckpt", &missing))) ckpt = v;
        else if (missing) return lt_cli_usage(ctx, "%s needs a value", ctx->argv[i]);
        else if (ctx->argv[i][0] == '-') return lt_cli_unknown_option(ctx, ctx->argv[i]);
        else return lt_cli_usage(ctx, "unexpected argument '%.200s'", ctx->argv[i]);
    }
    if (!db) return lt_cli_usage(ctx, "which plans? give --db PLANS.db (planner build)");
    if (!data) return lt_cli_usage(ctx, "which data? give --data DIR (the dataprep output the plans were built from)");
    lt_error err;
    double tol = 1e-4, rank_tol = 1e-5, timeout = 300;
    if (lt_config_get_double(ctx->config, "train", "check_tolerance", &tol, &err) != LT_OK ||
        lt_config_get_double(ctx->config, "train", "check_rank_tolerance", &rank_tol, &err) != LT_OK ||
        lt_config_get_double(ctx->config, "train", "comm_timeout_s", &timeout, &err) != LT_OK)
        return lt_error_exit(&err);
    uint64_t *steps = NULL;
    size_t n_steps = 0;
    if (steps_arg && parse_steps(steps_arg, &steps, &n_steps, &err) != LT_OK) return lt_error_exit(&err);
    check_run c = {0};
    lt_status st = lt_cmd_comm(ctx, &c.comm, &err);
    if (st != LT_OK) return lt_error_exit(&err);
    bool rank0 = !c.comm || lt_comm_layout_of(c.comm)->rank == 0;
    /* under a launcher: each rank's GPU, NCCL attached (the stage channels, the gradient
     * all-reduces and the context-parallel ring on the device, as in train --db) */
    /* (a run with a HelixPipe step: the GPU's stage channels between any two stages) */
    if (st == LT_OK && c.comm && lt_comm_layout_of(c.comm)->pp > 1)
        st = lt_cmd_plans_helix(db, &c.helix, &c.helix_parts, &err);
    if (st == LT_OK) st = lt_cmd_open_backend_on(ctx, c.comm, c.helix, &c.be, &err);
    const char *tb = getenv("LONGTAIL_TEST_BACKEND");
    if (st == LT_OK && tb && tb[0]) {
        if (strcmp(tb, "cpu-bf16") != 0)
            st = lt_fail(&err, LT_ERR_CONFIG, "LONGTAIL_TEST_BACKEND", "'%.40s' is not a test backend (cpu-bf16 is)", tb);
        else if (c.be)
            st = lt_fail(&err, LT_ERR_CONFIG, "LONGTAIL_TEST_BACKEND",
                         "the cpu-bf16 test backend replaces the CPU executor, not the GPU: unset it with "
                         "train.backend = cuda");
        else
            c.tbe = lt_backend_cpu_bf16();
    }
    if (st == LT_OK) st = load_or_init(ctx, ckpt, &c.m, &err);
    c.xm = &c.m;
    int tp = c.comm ? lt_comm_layout_of(c.comm)->tp : 1;
    if (st == LT_OK) st = lt_cmd_open_plans(db, &c.m, tp, &c.store, &err);
    if (st == LT_OK && !steps_arg) st = lt_store_steps(c.store, &steps, &n_steps, &err);
    if (st == LT_OK) st = check_cost_model(db, &c, &err);
    if (st == LT_OK && c.comm && n_steps > 0) { /* the rank's part: its stage, its TP shard */
        int l0 = 0, l1 = 0;
        st = first_stage_layers(&c, steps[0], &l0, &l1, &err);
        const lt_comm_layout *lo = lt_comm_layout_of(c.comm);
        lt_llama_part held = {.l0 = l0, .l1 = l1, .first = c.helix || lo->stage == 0,
                              .last = c.helix || lo->stage == lo->pp - 1};
        if (c.helix_parts) held = lt_llama_helix_part(c.m.shape.layers, lo->stage, lo->pp);
        if (st == LT_OK) st = lt_llama_create_part(&c.mp, &c.m.shape, tp, lo->tp_rank, &held, &err);
        if (st == LT_OK) {
            lt_llama_copy_shard(&c.m, c.m.params, &c.mp, c.mp.params);
            if (tp > 1) lt_dist_tp_ops(c.comm, c.be != NULL, &c.tpo), c.mp.tp_ops = &c.tpo; /* (the GPU's: NCCL) */
            c.xm = &c.mp;
        }
    }
    /* the chunked MLP the plans were priced with (plan.mlp_chunk of their config; the GPU's and
     * the test backend's model structs are copies) */
    c.m.mlp_chunk = c.mp.mlp_chunk = c.cm.mlp_chunk;
    if (st == LT_OK && c.be) { /* the executed model (whole, or the rank's part) on the GPU: its struct, another backend */
        c.mg = *c.xm;
        st = lt_backend_cuda_upload(c.be, &c.mg, &err);
        if (st == LT_OK) st = lt_backend_cuda_grads(c.be, c.xm->n_params, &c.dg, &err);
        if (st == LT_OK) st = lt_cmd_gpu_arena(c.be, LT_CMD_GPU_ARENA_SHARE, "trainer check", &err);
        if (st == LT_OK && !(c.hg = malloc(c.m.n_params * sizeof(float))))
            st = lt_fail(&err, LT_ERR_NOMEM, NULL, "out of memory for the GPU's gradients");
    }
    /* the test backend's model: the executed model's struct (m, or the rank's part) on
     * cpu-bf16; it shares that model's arrays and is never freed itself */
    if (st == LT_OK && c.tbe) c.mt = *c.xm, c.mt.backend = c.tbe;
    if (st == LT_OK) st = lt_docs_open(&c.docs, data, 0, &err);
    if (st == LT_OK) st = lt_cpu_init(lt_cmd_threads(ctx), &c.pool, NULL, &err);
    if (st == LT_OK) {
        c.ga = malloc(c.m.n_params * sizeof(float));
        c.gb = malloc(c.m.n_params * sizeof(float));
        c.gc = c.comm ? malloc(c.m.n_params * sizeof(float)) : NULL;
        c.gr = c.xm != &c.m ? malloc(c.xm->n_params * sizeof(float)) : c.ga;
        c.lv = malloc(4 * (size_t)c.m.shape.layers * sizeof *c.lv);
        if (!c.ga || !c.gb || !c.lv || (c.comm && !c.gc) || !c.gr)
            st = lt_fail(&err, LT_ERR_NOMEM, NULL, "out of memory for the gradient buffers");
    }
    if (st == LT_OK) {
        lt_llama_views_of(&c.m, c.ga, c.lv, &c.va);
        lt_llama_views_of(c.xm, c.gr, c.lv + 3 * c.m.shape.layers, &c.vr);
        lt_llama_views_of(&c.m, c.gb, c.lv + c.m.shape.layers, &c.vb);
        if (c.gc) lt_llama_views_of(&c.m, c.gc, c.lv + 2 * c.m.shape.layers, &c.vc);
        if (c.dg) lt_llama_views_of(c.xm, c.dg, c.lv + 2 * c.m.shape.layers, &c.vg); /* (gc: distributed only) */
    }
    /* each rank's part against the cost model's parameters of its stage (lt_cost_stage_params:
     * its layers, the vocab-parallel embedding and head at V / tp rows, the replicated norms) */
    /* (HelixPipe: each rank HelixPipe's part of its stage, lt_cost_model.helix_parts; mixed
     * with other strategies' steps the whole model, its TP shard of it, each tensor owned by
     * its part's stage: lt_cost_model.whole_model) */
    if (st == LT_OK && c.xm == &c.mp) {
        lt_cost_model wm = c.cm;
        wm.helix_parts = c.helix_parts;
        wm.whole_model = c.helix && !c.helix_parts;
        double want = lt_cost_stage_params(&wm, lt_comm_layout_of(c.comm)->stage);
        double held[1] = {(double)c.mp.n_params}, e[1] = {0};
        /* the TP group's largest part (ranks below V mod tp hold one vocabulary row more) */
        st = lt_comm_allreduce(c.comm, LT_COMM_TP, held, 1, LT_COMM_F64, true, &err);
        e[0] = want > 0 ? fabs(held[0] - want) / want : 1;
        if (st == LT_OK) st = lt_comm_allreduce(c.comm, LT_COMM_WORLD, e, 1, LT_COMM_F64, true, &err);
        c.worst_params = e[0];
        if (st == LT_OK && rank0)
            printf("model_states: rank 0 holds %zu of the model's %zu parameters (%s, its TP shard; the "
                   "largest of its TP group %.0f), the cost model %.0f; params_rel_err=%.3e (the worst stage)\n",
                   c.mp.n_params, c.m.n_params,
                   c.helix_parts ? "HelixPipe's part of its stage"
                   : c.helix     ? "HelixPipe mixed with other strategies: the whole model, each tensor owned by its "
                                   "part's stage"
                                 : "its stage's part",
                   held[0], want, e[0]);
    }
    for (size_t i = 0; st == LT_OK && i < n_steps; i++) st = check_step(&c, steps[i], &err);
    if (st == LT_OK && rank0 && c.comm && c.xm->tp > 1 && c.tp_compared > 0)
        printf("tp_bytes_rel_err=%.3e tp_bytes_steps=%d (the largest of any rank and step)\n", c.worst_tp_bytes,
               c.tp_compared);
    else if (st == LT_OK && rank0 && c.comm && c.xm->tp > 1)
        printf("tp_bytes: not compared (every step has context-parallel groups)\n");
    if (st == LT_OK && rank0 && c.comm)
        printf("max_rel_err=%.3e rank_rel_err=%.3e ranks=%d steps=%zu%s\n", c.worst, c.worst_rank,
               lt_comm_layout_of(c.comm)->world, n_steps, c.tbe ? " backend=cpu-bf16" : c.be ? " backend=cuda" : "");
    else if (st == LT_OK && rank0 && c.be)
        printf("max_rel_err=%.3e gpu_max_rel_norm_err=%.3e steps=%zu\n", c.worst, c.worst_gpu, n_steps);
    else if (st == LT_OK && rank0) printf("max_rel_err=%.3e steps=%zu%s\n", c.worst, n_steps, c.tbe ? " backend=cpu-bf16" : "");
    fflush(stdout);
    if (c.be) lt_backend_cuda_free_grads(c.be, c.dg);
    lt_backend_cuda_close(c.be);
    free(c.hg);
    if (c.gr != c.ga) free(c.gr);
    free(steps), free(c.ga), free(c.gb), free(c.gc), free(c.lv);
    lt_llama_free(&c.mp);
    lt_dist_free(&c.dist);
    lt_docs_close(c.docs);
    lt_store_close(c.store);
    lt_pool_destroy(c.pool);
    lt_llama_free(&c.m);
    if (st != LT_OK) lt_cmd_comm_fail(c.comm, &err); /* ends the job when distributed */
    if (st != LT_OK) return lt_error_exit(&err);
    int code = 0;
    if (c.tbe || (c.be && c.comm)) tol = rank_tol = GPU_TOLERANCE; /* bf16 against fp32, by relative norm */
    if (rank0 && !(c.worst <= tol)) {
        fprintf(stderr, "trainer: error: a gradient differs by %.3e relative, over train.check_tolerance = %g\n",
                c.worst, tol);
        code = 1;
    }
    if (c.be && !c.comm && !(c.worst_gpu <= GPU_TOLERANCE)) {
        fprintf(stderr, "trainer: error: the GPU's gradients differ from the CPU executor's by %.3e (relative norm), "
                "over the bf16 tolerance %g\n", c.worst_gpu, GPU_TOLERANCE);
        code = 1;
    }
    if (rank0 && c.comm && !(c.worst_rank <= rank_tol)) {
        fprintf(stderr, "trainer: error: the ranks' gradients differ from one process's by %.3e relative, over "
                "train.check_rank_tolerance = %g\n", c.worst_rank, rank_tol);
        code = 1;
    }
    if (c.comm) { /* every rank exits with rank 0's verdict */
        int64_t v = code;
        if (lt_comm_allreduce(c.comm, LT_COMM_WORLD, &v, 1, LT_COMM_I64, true, &err) != LT_OK) lt_cmd_comm_fail(c.comm, &err);
        code = (int)v;
    }
    lt_comm_finalize(c.comm);
    return code;
}
