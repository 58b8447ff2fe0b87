/*
 * tests/plans/test_store.c — unit tests for the plan database (plans/store/store.h and
 * plans/store/validate.h: the files of plans/store/, `planner show` and `planner validate`),
 * cmocka.
 *
 * The plans are built here by hand, independently of the strategies: units from the
 * schedule generators (whole samples + 1F1B, sliced + Seq1F1B, ChunkFlow chunks + state-aware
 * 1F1B), the samples dealt round-robin over the pipelines, simulated under the unit-time
 * model (lt_sim_unit_costs) to fill the predictions.
 *
 * Without arguments: runs the tests. With a mode argument:
 *   test_store --bench STEPS [OPS_PER_STAGE] [FILE]
 *       writes STEPS synthetic steps of the `planner build` shape (global batch 512 over 8
 *       pipelines x 4 stages) and reports the write time and bytes per step, then validates
 *       the file (lt_store_validate) and reports its time. Without OPS_PER_STAGE the default
 *       shape (~570 slices, ~500 ops per step: Seq1F1B over 32K-token units); with it the
 *       chunkflow shape (ChunkFlow chunks sized for about OPS_PER_STAGE ops per stage; 240
 *       is a 128K-context `planner build --strategy chunkflow` step, ~7,700 ops). FILE
 *       defaults to a temporary file, removed afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "lib/config.h"              /* lt_config_new, lt_config_set, lt_config_dump_string */
#include "lib/log.h"                 /* lt_log_set_level */
#include "lib/rng.h"                 /* lt_rng (synthetic lengths) */
#include "plans/cmd/planner.h"       /* planner_program */
#include "plans/batches/sampler.h"   /* lt_sample, lt_sample_source_format */
#include "plans/schedule/schedule.h" /* generators */
#include "plans/schedule/sim.h"      /* lt_sim_run, lt_sim_unit_costs */
#include "plans/store/store.h"
#include "plans/store/validate.h"
#include "tests/testutil.h"          /* lt_test_tmpdir_* */

static char tmp_root[128];
static int file_counter;

/* A new path under the test directory. */
static void new_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s-%d.db", tmp_root, name, file_counter++);
}

/* ------------------------------------------------------------------ files */

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

static bool same_bytes(const char *a, const char *b) {
    size_t la, lb;
    char *x = read_all(a, &la), *y = read_all(b, &lb);
    bool same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

static void copy_path(const char *from, const char *to) {
    size_t n;
    char *buf = read_all(from, &n);
    assert_non_null(buf);
    FILE *f = fopen(to, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    free(buf);
}

/* How many entries of tmp_root contain ".tmp." (temporary plan files). */
static int count_temporaries(void) {
    DIR *d = opendir(tmp_root);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

/* ------------------------------------------------------------------ runs */

static const char *const base_sets[] = {
    "model.layers=4",        "parallel.dp=2",    "parallel.pp=2", "plan.global_batch=8",
    "plan.context_len=1K",   "plan.mem=64",      "plan.steps=10", "plan.strategy=chunkflow",
};
#define N_BASE (sizeof base_sets / sizeof base_sets[0])

/* A config dump of the base settings plus `extra` (NULL-terminated) overrides. */
static char *config_text(const char *const *extra) {
    lt_config *c = lt_config_new();
    assert_non_null(c);
    lt_error err;
    for (size_t i = 0; i < N_BASE; i++) assert_int_equal(lt_config_set(c, base_sets[i], &err), LT_OK);
    for (size_t i = 0; extra && extra[i]; i++)
        if (lt_config_set(c, extra[i], &err) != LT_OK) fail_msg("%s: %s", extra[i], err.what);
    char *t = lt_config_dump_string(c);
    assert_non_null(t);
    lt_config_free(c);
    return t;
}

#define FINGERPRINT "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* The test run: 2 pipelines of 2 stages over 4 layers, a memory cap of 64 "bytes" (the
 * unit-time model counts in-flight micro-batches). config is owned by the caller. */
static lt_run_info test_run(char *config) {
    lt_run_info r;
    memset(&r, 0, sizeof r);
    r.name = "store-test";
    r.strategy = "chunkflow";
    r.config = config;
    r.fingerprint = FINGERPRINT;
    r.input = "lengths.txt";
    r.sample_policy = "truncate";
    r.tuning = "cp=1 recompute=0";
    r.version = "test";
    r.context_len = 1024;
    r.global_batch = 8;
    r.seed = 1234;
    r.dp = 2;
    r.pp = 2;
    r.tp = 1;
    r.layers = 4;
    r.mem_cap = 64;
    r.n_samples_total = 1000;
    return r;
}

/* ------------------------------------------------------------------ plans */

typedef enum plan_kind { K_WHOLE, K_SLICED, K_CHUNK, K_HELIX } plan_kind;

/* Seconds per unit-time unit: not a power of two, so the ms round trip is exercised. */
#define SEC_PER_UNIT 1.7e-4

/* Fill p with a plan of step `step`: samples len[0..n) dealt round-robin over n_ranks
 * pipelines (dp_rank = r * cp), units and ops by `kind`, simulated under unit costs.
 * K_HELIX: whole samples under HelixPipe's two-fold FILO schedule with recomputation (ops
 * over one part of one layer; a pipeline's units must be a multiple of 2 x pp). */
static void build_plan(lt_step_plan *p, uint64_t step, const int64_t *len, size_t n, size_t n_ranks, int cp, int pp,
                       int layers, plan_kind kind) {
    lt_step_plan_init(p);
    lt_error err;
    p->step = step;
    p->strategy = kind == K_WHOLE    ? LT_STRATEGY_MEGATRON
                  : kind == K_SLICED ? LT_STRATEGY_SEQ1F1B
                  : kind == K_HELIX  ? LT_STRATEGY_GPIPE /* (no HelixPipe strategy yet; any name) */
                                     : LT_STRATEGY_CHUNKFLOW;
    p->n_samples = n;
    p->lengths = malloc(n * sizeof *p->lengths);
    p->sample_rank = malloc(n * sizeof *p->sample_rank);
    memcpy(p->lengths, len, n * sizeof *len);
    p->n_predicted = lt_plan_predicted_tokens(len, n);
    p->n_ranks = n_ranks;
    p->ranks = calloc(n_ranks, sizeof *p->ranks);
    p->pp = pp;
    lt_sim sim = {0};
    lt_sim_costs costs = lt_sim_unit_costs();
    double busy_total = 0;
    int64_t *loc = malloc(n * sizeof *loc);
    int32_t *glob = malloc(n * sizeof *glob);
    for (size_t r = 0; r < n_ranks; r++) {
        lt_rank_plan *rp = &p->ranks[r];
        rp->dp_rank = (int)r * cp;
        rp->cp = cp;
        size_t m = 0;
        for (size_t i = r; i < n; i += n_ranks) {
            p->sample_rank[i] = (int)r;
            loc[m] = len[i];
            glob[m++] = (int32_t)i;
        }
        assert_int_equal(lt_schedule_init(&rp->sched, pp, layers, &err), LT_OK);
        lt_schedule *s = &rp->sched;
        if (kind == K_WHOLE) {
            lt_sched_units_whole(s, loc, m);
            lt_sched_1f1b(s, NULL, s->n_units);
        } else if (kind == K_SLICED) {
            lt_sched_units_sliced(s, loc, m, 2);
            lt_sched_seq1f1b(s, NULL, s->n_units);
        } else if (kind == K_HELIX) {
            lt_sched_units_whole(s, loc, m);
            if (lt_sched_helixpipe_folds(s, NULL, s->n_units, 2, 1, &err) != LT_OK) fail_msg("helix: %s", err.what);
        } else {
            lt_sched_units_chunked(s, loc, m, 48);
            lt_sched_chunkflow(s, NULL, s->n_units, 1);
        }
        for (size_t j = 0; j < s->n_slices; j++) s->slices[j].sample = glob[s->slices[j].sample];
        if (lt_sim_run(&sim, s, &costs, &err) != LT_OK) fail_msg("sim: %s", err.what);
        rp->ops = malloc((sim.n_ops ? sim.n_ops : 1) * sizeof *rp->ops);
        for (size_t id = 0; id < sim.n_ops; id++) {
            int g;
            size_t idx;
            lt_sim_op_at(&sim, id, &g, &idx);
            rp->ops[id].start_s = sim.start[id] * SEC_PER_UNIT;
            rp->ops[id].finish_s = sim.finish[id] * SEC_PER_UNIT;
            rp->ops[id].mem_bytes = s->stage[g].ops[idx].kind == LT_OP_F ? 1 : 0.5;
        }
        rp->time_s = sim.step_time * SEC_PER_UNIT;
        rp->stage_busy_s = malloc((size_t)pp * sizeof *rp->stage_busy_s);
        rp->stage_peak_mem = malloc((size_t)pp * sizeof *rp->stage_peak_mem);
        for (int g = 0; g < pp; g++) {
            rp->stage_busy_s[g] = sim.busy[g] * SEC_PER_UNIT;
            rp->stage_peak_mem[g] = sim.peak_mem[g];
            busy_total += rp->stage_busy_s[g];
            if (sim.peak_mem[g] > p->peak_mem) p->peak_mem = sim.peak_mem[g];
        }
        if (rp->time_s > p->time_s) p->time_s = rp->time_s;
    }
    free(loc);
    free(glob);
    lt_sim_free(&sim);
    p->bubble_ratio = p->time_s > 0 ? 1 - busy_total / ((double)n_ranks * pp * p->time_s) : 0;
    p->solve_ms = 12.5;
    snprintf(p->params, sizeof p->params, "%s", kind == K_CHUNK ? "chunk_size=48 k=1" : "cp=1 recompute=0");
    snprintf(p->solver_status, sizeof p->solver_status, "none");
    if (step == 2) { /* one plan with a runner-up, as auto makes */
        p->runner_up = LT_STRATEGY_GPIPE;
        p->runner_up_time_s = p->time_s * 1.25;
    }
}

/* The samples of a step: ids 40 + n * step + i (so sample 42 is in step 0), sources varied. */
static lt_sample *make_samples(uint64_t step, const int64_t *len, size_t n) {
    lt_sample *s = calloc(n, sizeof *s);
    for (size_t i = 0; i < n; i++) {
        s[i].id = 40 + n * step + i;
        s[i].task = (uint32_t)(i % 3);
        s[i].doc = 100 + i + step;
        s[i].offset = (int64_t)(i % 2) * 1024;
        s[i].length = len[i];
    }
    return s;
}

/* The lengths of test step t (8 samples, some longer than the chunk size 48). */
static void step_lengths(uint64_t t, int64_t len[8]) {
    static const int64_t base[8] = {100, 30, 7, 64, 45, 12, 90, 3};
    for (int i = 0; i < 8; i++) len[i] = base[(i + t) % 8] + (int64_t)t;
}

static plan_kind kind_of_step(uint64_t t) {
    return t % 3 == 0 ? K_CHUNK : t % 3 == 1 ? K_SLICED : K_WHOLE;
}

/* Build and store steps [first, first + count) of the test run. */
static void put_steps(lt_store *st, uint64_t first, uint64_t count) {
    lt_error err;
    for (uint64_t t = first; t < first + count; t++) {
        int64_t len[8];
        step_lengths(t, len);
        lt_step_plan p;
        build_plan(&p, t, len, 8, 2, 1, 2, 4, kind_of_step(t));
        lt_sample *smp = make_samples(t, len, 8);
        if (lt_store_put_step(st, &p, smp, &err) != LT_OK) fail_msg("put step %" PRIu64 ": %s", t, err.what);
        free(smp);
        lt_step_plan_free(&p);
    }
}

/* A committed file of steps [0, count) of the test run (timings as given). */
static void write_file(const char *path, uint64_t count, bool timings) {
    char *cfg = config_text(NULL);
    lt_run_info run = test_run(cfg);
    lt_store *st;
    lt_error err;
    if (lt_store_begin(&st, path, &run, timings, &err) != LT_OK) fail_msg("begin: %s (%s)", err.what, err.where);
    put_steps(st, 0, count);
    if (lt_store_commit(st, &err) != LT_OK) fail_msg("commit: %s", err.what);
    free(cfg);
}

/* ------------------------------------------------------------------ asymmetric plans with DP-Merge */

/* A SlimPack-shaped step built by hand (no strategy, no simulator): 7 samples over 3
 * pipelines (dp_ranks 0, 1, 2) of 2 stages over 4 layers. Sample 0 (100 tokens) is
 * DP-merged over pipelines 0-1 (cp 2, SlimPack 4.1.1): both list its units with cp 2.
 * Every schedule is asymmetric (SlimPack 4.1.2): the backward partition cuts elsewhere
 * than the forward one (sample 0 at 70, not 50) and regroups slices across samples. As
 * SlimPack does, the bslices are laid out in token order and the backward units numbered
 * in execution order, FILO within each sample (asym_border), so the bslice table is not in
 * bunit order. Ops: every forward unit F, then the backward units B 0, 1, ... (GPipe over
 * the two partitions), on both stages. Predictions by hand: op i of stage g from
 * (2i + g) to (2i + g + 1) units. Solver status timeout, runner-up chunkflow. */
#define ASYM_SAMPLES 7
static const int64_t asym_len[ASYM_SAMPLES] = {100, 30, 7, 64, 45, 12, 80};
static const int asym_rank[ASYM_SAMPLES] = {0, 0, 0, 1, 1, 2, 2};

typedef struct spec_unit {
    int n; /* slices; 0 ends the list */
    lt_slice sl[3];
    uint16_t cp;
} spec_unit;

/* [pipeline][unit]; the backward units in token order (bslice table order) */
static const spec_unit asym_fwd[3][5] = {
    {{1, {{0, 0, 50}}, 2}, {1, {{0, 50, 100}}, 2}, {1, {{1, 0, 30}}, 0}, {1, {{2, 0, 7}}, 1}},
    {{1, {{0, 0, 50}}, 2}, {1, {{0, 50, 100}}, 2}, {1, {{3, 0, 64}}, 0}, {1, {{4, 0, 45}}, 0}},
    {{2, {{5, 0, 12}, {6, 0, 40}}, 0}, {1, {{6, 40, 80}}, 0}},
};
static const spec_unit asym_bwd[3][5] = {
    {{1, {{0, 0, 70}}, 2}, {1, {{0, 70, 100}}, 2}, {1, {{1, 0, 15}}, 0}, {2, {{1, 15, 30}, {2, 0, 7}}, 0}},
    {{1, {{0, 0, 70}}, 2}, {1, {{0, 70, 100}}, 2}, {1, {{3, 0, 32}}, 0}, {2, {{3, 32, 64}, {4, 0, 45}}, 0}},
    {{2, {{5, 0, 12}, {6, 0, 30}}, 0}, {1, {{6, 30, 80}}, 0}},
};
/* backward unit j is asym_bwd[r][asym_border[r][j]]: a sample's later tokens first */
static const uint32_t asym_border[3][4] = {{1, 0, 3, 2}, {1, 0, 3, 2}, {1, 0}};

static void build_asym_plan(lt_step_plan *p, uint64_t step) {
    lt_step_plan_init(p);
    lt_error err;
    p->step = step;
    p->strategy = LT_STRATEGY_SLIMPACK;
    p->n_samples = ASYM_SAMPLES;
    p->lengths = malloc(ASYM_SAMPLES * sizeof *p->lengths);
    p->sample_rank = malloc(ASYM_SAMPLES * sizeof *p->sample_rank);
    for (size_t i = 0; i < ASYM_SAMPLES; i++) {
        p->lengths[i] = asym_len[i];
        p->sample_rank[i] = asym_rank[i];
    }
    p->n_predicted = lt_plan_predicted_tokens(p->lengths, ASYM_SAMPLES);
    p->n_ranks = 3;
    p->pp = 2;
    p->ranks = calloc(3, sizeof *p->ranks);
    double busy_total = 0;
    for (size_t r = 0; r < 3; r++) {
        lt_rank_plan *rp = &p->ranks[r];
        rp->dp_rank = (int)r;
        rp->cp = 1;
        assert_int_equal(lt_schedule_init(&rp->sched, 2, 4, &err), LT_OK);
        lt_schedule *s = &rp->sched;
        uint32_t bfirst[5] = {0};
        size_t nb = 0;
        for (int pass = 0; pass < 2; pass++) {
            const spec_unit *spec = pass == 0 ? asym_fwd[r] : asym_bwd[r];
            for (size_t u = 0; u < 5 && spec[u].n; u++) {
                uint32_t first = 0;
                for (int k = 0; k < spec[u].n; k++) {
                    const lt_slice *x = &spec[u].sl[k];
                    uint32_t i = pass == 0 ? lt_schedule_add_slice(s, x->sample, x->begin, x->end)
                                           : lt_schedule_add_bslice(s, x->sample, x->begin, x->end);
                    if (k == 0) first = i;
                }
                if (pass == 0) {
                    uint32_t id = lt_schedule_add_unit(s, first, (uint32_t)spec[u].n);
                    s->units[id].cp = spec[u].cp;
                } else {
                    bfirst[u] = first;
                    nb++;
                }
            }
        }
        for (size_t j = 0; j < nb; j++) {
            const spec_unit *b = &asym_bwd[r][asym_border[r][j]];
            uint32_t id = lt_schedule_add_bunit(s, bfirst[asym_border[r][j]], (uint32_t)b->n);
            s->bunits[id].cp = b->cp;
        }
        assert_true(s->asym);
        for (int g = 0; g < 2; g++) {
            for (size_t u = 0; u < s->n_units; u++) lt_schedule_add_stage_op(s, g, LT_OP_F, (uint32_t)u, 0);
            for (size_t j = 0; j < s->n_bunits; j++) lt_schedule_add_stage_op(s, g, LT_OP_B, (uint32_t)j, 0);
        }
        size_t n_ops = lt_schedule_n_ops(s);
        rp->ops = malloc(n_ops * sizeof *rp->ops);
        rp->stage_busy_s = malloc(2 * sizeof *rp->stage_busy_s);
        rp->stage_peak_mem = malloc(2 * sizeof *rp->stage_peak_mem);
        size_t id = 0;
        for (int g = 0; g < 2; g++) {
            for (size_t i = 0; i < s->stage[g].n; i++, id++) {
                double t = (double)(2 * i + (size_t)g);
                rp->ops[id].start_s = t * SEC_PER_UNIT;
                rp->ops[id].finish_s = (t + 1) * SEC_PER_UNIT;
                rp->ops[id].mem_bytes = s->stage[g].ops[i].kind == LT_OP_F ? 1 : 0.5;
                if (rp->ops[id].finish_s > rp->time_s) rp->time_s = rp->ops[id].finish_s;
            }
            rp->stage_busy_s[g] = (double)s->stage[g].n * SEC_PER_UNIT;
            rp->stage_peak_mem[g] = 4 + g + (double)r;
            busy_total += rp->stage_busy_s[g];
            if (rp->stage_peak_mem[g] > p->peak_mem) p->peak_mem = rp->stage_peak_mem[g];
        }
        if (rp->time_s > p->time_s) p->time_s = rp->time_s;
    }
    p->merges = malloc(sizeof *p->merges);
    /* a memory outlier's group (issue 21): the reason must come back as written */
    p->merges[0] = (lt_dp_merge){.sample = 0, .first_rank = 0, .cp = 2, .reason = LT_MERGE_MEMORY};
    p->n_merges = 1;
    p->bubble_ratio = 1 - busy_total / (3.0 * 2 * p->time_s);
    p->solve_ms = 3.25;
    snprintf(p->params, sizeof p->params, "micropacks=4 dp_merge=1");
    snprintf(p->solver_status, sizeof p->solver_status, "timeout");
    p->runner_up = LT_STRATEGY_CHUNKFLOW;
    p->runner_up_time_s = p->time_s * 1.5;
}

/* A committed file of steps [0, count) of the test run, then the asymmetric DP-Merge step
 * `count` (its samples' ids: make_samples'). */
static void write_file_asym(const char *path, uint64_t count) {
    char *cfg = config_text(NULL);
    lt_run_info run = test_run(cfg);
    lt_store *st;
    lt_error err;
    if (lt_store_begin(&st, path, &run, false, &err) != LT_OK) fail_msg("begin: %s (%s)", err.what, err.where);
    put_steps(st, 0, count);
    lt_step_plan p;
    build_asym_plan(&p, count);
    lt_sample *smp = make_samples(count, asym_len, ASYM_SAMPLES);
    if (lt_store_put_step(st, &p, smp, &err) != LT_OK) fail_msg("put asym: %s", err.what);
    free(smp);
    lt_step_plan_free(&p);
    if (lt_store_commit(st, &err) != LT_OK) fail_msg("commit: %s", err.what);
    free(cfg);
}

static sqlite3 *open_raw(const char *path) {
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    return db;
}

static void exec_raw(sqlite3 *db, const char *sql) {
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) fail_msg("%s: %s", sql, msg);
}

static int64_t query_int(sqlite3 *db, const char *sql) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return v;
}

/* ------------------------------------------------------------------ comparing plans */

static void assert_close(double a, double b) {
    if (!(fabs(a - b) <= 1e-12 * fmax(fabs(a), fabs(b)))) fail_msg("%.17g != %.17g", a, b);
}

/* Op times are stored as integer nanoseconds: back within 1 ns (docs/plans-schema.md). */
static void assert_within_ns(double a, double b) {
    if (!(fabs(a - b) <= 1.000001e-9)) fail_msg("%.17g s and %.17g s differ by more than 1 ns", a, b);
}

/* A unit's cp as stored: 0 and 1 both mean no DP-Merge and are stored (and read back) as 1. */
static unsigned unit_cp(const lt_unit *u) { return u->cp > 1 ? u->cp : 1; }

static void assert_plans_equal(const lt_step_plan *a, const lt_step_plan *b) {
    assert_int_equal(a->step, b->step);
    assert_int_equal(a->strategy, b->strategy);
    assert_int_equal(a->n_samples, b->n_samples);
    for (size_t i = 0; i < a->n_samples; i++) {
        assert_int_equal(a->lengths[i], b->lengths[i]);
        assert_int_equal(a->sample_rank[i], b->sample_rank[i]);
    }
    assert_int_equal(a->n_ranks, b->n_ranks);
    assert_int_equal(a->pp, b->pp);
    assert_close(a->time_s, b->time_s);
    assert_true(a->bubble_ratio == b->bubble_ratio);
    assert_true(a->peak_mem == b->peak_mem);
    assert_string_equal(a->params, b->params);
    assert_string_equal(a->solver_status, b->solver_status);
    assert_int_equal(a->runner_up, b->runner_up);
    if (a->runner_up != LT_STRATEGY_COUNT) assert_close(a->runner_up_time_s, b->runner_up_time_s);
    assert_int_equal(a->n_merges, b->n_merges);
    for (size_t k = 0; k < a->n_merges; k++) {
        assert_int_equal(a->merges[k].sample, b->merges[k].sample);
        assert_int_equal(a->merges[k].first_rank, b->merges[k].first_rank);
        assert_int_equal(a->merges[k].cp, b->merges[k].cp);
        assert_int_equal(a->merges[k].reason, b->merges[k].reason);
    }
    for (size_t r = 0; r < a->n_ranks; r++) {
        const lt_rank_plan *x = &a->ranks[r], *y = &b->ranks[r];
        assert_int_equal(x->dp_rank, y->dp_rank);
        assert_int_equal(x->cp, y->cp);
        assert_close(x->time_s, y->time_s);
        assert_int_equal(x->sched.stages, y->sched.stages);
        assert_int_equal(x->sched.layers, y->sched.layers);
        assert_int_equal(x->sched.n_slices, y->sched.n_slices);
        for (size_t i = 0; i < x->sched.n_slices; i++) {
            assert_int_equal(x->sched.slices[i].sample, y->sched.slices[i].sample);
            assert_int_equal(x->sched.slices[i].begin, y->sched.slices[i].begin);
            assert_int_equal(x->sched.slices[i].end, y->sched.slices[i].end);
        }
        assert_int_equal(x->sched.n_units, y->sched.n_units);
        for (size_t u = 0; u < x->sched.n_units; u++) {
            assert_int_equal(x->sched.units[u].first_slice, y->sched.units[u].first_slice);
            assert_int_equal(x->sched.units[u].n_slices, y->sched.units[u].n_slices);
            assert_int_equal(unit_cp(&x->sched.units[u]), unit_cp(&y->sched.units[u]));
        }
        /* the backward partition of an asymmetric schedule */
        assert_int_equal(x->sched.asym, y->sched.asym);
        assert_int_equal(x->sched.n_bslices, y->sched.n_bslices);
        for (size_t i = 0; i < x->sched.n_bslices; i++) {
            assert_int_equal(x->sched.bslices[i].sample, y->sched.bslices[i].sample);
            assert_int_equal(x->sched.bslices[i].begin, y->sched.bslices[i].begin);
            assert_int_equal(x->sched.bslices[i].end, y->sched.bslices[i].end);
        }
        assert_int_equal(x->sched.n_bunits, y->sched.n_bunits);
        for (size_t u = 0; u < x->sched.n_bunits; u++) {
            assert_int_equal(x->sched.bunits[u].first_slice, y->sched.bunits[u].first_slice);
            assert_int_equal(x->sched.bunits[u].n_slices, y->sched.bunits[u].n_slices);
            assert_int_equal(unit_cp(&x->sched.bunits[u]), unit_cp(&y->sched.bunits[u]));
        }
        size_t id = 0;
        for (int g = 0; g < x->sched.stages; g++) {
            assert_int_equal(x->sched.stage[g].n, y->sched.stage[g].n);
            for (size_t i = 0; i < x->sched.stage[g].n; i++, id++) {
                const lt_op *o = &x->sched.stage[g].ops[i], *q = &y->sched.stage[g].ops[i];
                assert_int_equal(o->kind, q->kind);
                assert_int_equal(o->part, q->part);
                assert_int_equal(o->recompute_layers, q->recompute_layers);
                assert_int_equal(o->unit, q->unit);
                assert_int_equal(o->layer_begin, q->layer_begin);
                assert_int_equal(o->layer_end, q->layer_end);
                assert_within_ns(x->ops[id].start_s, y->ops[id].start_s);
                assert_within_ns(x->ops[id].finish_s, y->ops[id].finish_s);
                assert_true(x->ops[id].mem_bytes == y->ops[id].mem_bytes);
            }
            assert_close(x->stage_busy_s[g], y->stage_busy_s[g]);
            assert_true(x->stage_peak_mem[g] == y->stage_peak_mem[g]);
        }
    }
}

/* ------------------------------------------------------------------ round trip, views */

static void test_round_trip(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "roundtrip");
    char *cfg = config_text(NULL);
    lt_run_info run = test_run(cfg);
    lt_store *st;
    lt_error err;
    assert_int_equal(lt_store_begin(&st, path, &run, true, &err), LT_OK);
    /* three shapes, and one step with context-parallel pipelines (cp = 2: dp_ranks 0 and 2) */
    lt_step_plan plans[4];
    lt_sample *smp[4];
    for (uint64_t t = 0; t < 4; t++) {
        int64_t len[8];
        step_lengths(t, len);
        build_plan(&plans[t], t, len, 8, 2, t == 3 ? 2 : 1, 2, 4, kind_of_step(t));
        smp[t] = make_samples(t, len, 8);
        if (lt_store_put_step(st, &plans[t], smp[t], &err) != LT_OK) fail_msg("put: %s", err.what);
    }
    bool has;
    assert_int_equal(lt_store_has_step(st, 3, &has, &err), LT_OK);
    assert_true(has);
    assert_int_equal(lt_store_has_step(st, 4, &has, &err), LT_OK);
    assert_false(has);
    /* a step stored twice is a programming error */
    assert_int_equal(lt_store_put_step(st, &plans[1], smp[1], &err), LT_ERR_INTERNAL);
    assert_non_null(strstr(err.what, "step 1 is already stored"));
    assert_int_equal(lt_store_commit(st, &err), LT_OK);
    assert_int_equal(count_temporaries(), 0);

    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    lt_run_info back;
    assert_int_equal(lt_store_run_info(st, &back, &err), LT_OK);
    assert_string_equal(back.config, cfg);
    assert_string_equal(back.fingerprint, FINGERPRINT);
    assert_string_equal(back.strategy, "chunkflow");
    assert_string_equal(back.tuning, "cp=1 recompute=0");
    assert_string_equal(back.version, "test");
    assert_int_equal(back.layers, 4);
    assert_int_equal(back.pp, 2);
    assert_true(back.mem_cap == 64);
    assert_int_equal(back.n_samples_total, 1000);
    lt_run_info_free(&back);
    assert_null(back.config);

    uint64_t *steps;
    size_t n;
    assert_int_equal(lt_store_steps(st, &steps, &n, &err), LT_OK);
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) assert_int_equal(steps[i], i);
    free(steps);

    lt_step_plan got;
    lt_step_plan_init(&got);
    for (uint64_t t = 0; t < 4; t++) {
        lt_sample *gs = NULL;
        assert_int_equal(lt_store_get_step(st, t, &got, &gs, &err), LT_OK);
        assert_plans_equal(&plans[t], &got);
        assert_true(got.solve_ms == 12.5); /* timings on */
        for (size_t i = 0; i < got.n_samples; i++) {
            assert_int_equal(gs[i].id, smp[t][i].id);
            assert_int_equal(gs[i].task, smp[t][i].task);
            assert_int_equal(gs[i].doc, smp[t][i].doc);
            assert_int_equal(gs[i].offset, smp[t][i].offset);
            assert_int_equal(gs[i].length, smp[t][i].length);
            assert_int_equal(gs[i].corpus_doc, 0);
        }
        /* what comes back keeps every invariant (the ms round trip is monotone) */
        if (lt_plan_validate(&got, 64, &err) != LT_OK) fail_msg("step %" PRIu64 ": %s", t, err.what);
        free(gs);
        lt_step_plan_free(&plans[t]);
        free(smp[t]);
    }
    /* reading without samples; a step that is not stored names the stored range */
    assert_int_equal(lt_store_get_step(st, 2, &got, NULL, &err), LT_OK);
    assert_int_equal(got.runner_up, LT_STRATEGY_GPIPE);
    lt_sample *gs = (lt_sample *)&got; /* must be reset to NULL */
    assert_int_equal(lt_store_get_step(st, 9, &got, &gs, &err), LT_ERR_INPUT);
    assert_null(gs);
    assert_int_equal(got.n_ranks, 0);
    assert_non_null(strstr(err.what, "step 9 is not stored"));
    assert_non_null(strstr(err.hint, "steps 0..3"));
    assert_string_equal(err.where, path);
    lt_step_plan_free(&got);
    lt_store_close(st);
    free(cfg);
}

/* Steps with more rows than one multi-row INSERT holds (and a remainder) come back equal. */
static void test_round_trip_large(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "large");
    char *cfg = config_text(NULL);
    lt_run_info run = test_run(cfg);
    lt_store *st;
    lt_error err;
    assert_int_equal(lt_store_begin(&st, path, &run, false, &err), LT_OK);
    enum { N = 101 };
    int64_t len[N];
    lt_step_plan plans[3];
    lt_sample *smp[3];
    for (uint64_t t = 0; t < 3; t++) {
        for (size_t i = 0; i < N; i++) len[i] = 1 + (int64_t)((i * 37 + t * 11) % 120);
        build_plan(&plans[t], 10 + t, len, N, 2, 1, 2, 4, (plan_kind)t);
        smp[t] = make_samples(10 + t, len, N);
        if (lt_store_put_step(st, &plans[t], smp[t], &err) != LT_OK) fail_msg("put: %s", err.what);
    }
    assert_int_equal(lt_store_commit(st, &err), LT_OK);
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    lt_step_plan got;
    lt_step_plan_init(&got);
    for (uint64_t t = 0; t < 3; t++) {
        lt_sample *gs;
        assert_int_equal(lt_store_get_step(st, 10 + t, &got, &gs, &err), LT_OK);
        assert_plans_equal(&plans[t], &got);
        for (size_t i = 0; i < N; i++) {
            assert_int_equal(gs[i].id, smp[t][i].id);
            assert_int_equal(gs[i].doc, smp[t][i].doc);
        }
        free(gs);
        free(smp[t]);
        lt_step_plan_free(&plans[t]);
    }
    size_t checked;
    if (lt_store_validate(st, NULL, NULL, &checked, &err) != LT_OK) fail_msg("%s", err.what);
    assert_int_equal(checked, 3);
    lt_step_plan_free(&got);
    lt_store_close(st);
    free(cfg);
}

/* The views of CONTRACTS.md exist with at least their columns, in order. */
static void test_views_columns(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "views");
    write_file(path, 1, false);
    sqlite3 *db = open_raw(path);
    static const struct {
        const char *view;
        const char *cols[16];
    } want[] = {
        {"step_summary", {"run_id", "step", "strategy", "n_samples", "n_tokens", "predicted_ms", "bubble_ratio",
                          "peak_mem_bytes", "solve_ms", "params", "solver_status", NULL}},
        {"plan_slices", {"run_id", "step", "dp_rank", "pass", "unit", "seq", "sample_id", "tok_begin", "tok_end", "idx",
                         "cp", NULL}},
        {"plan_ops", {"run_id", "step", "dp_rank", "stage", "seq", "kind", "unit", "recompute_layers", "layer_begin",
                      "layer_end", "part", "start_ms", "finish_ms", "mem_bytes", NULL}},
        {"samples", {"run_id", "step", "sample_id", "length", "dp_rank", "source", "idx", "task", "doc", "tok",
                     "merge_cp", NULL}},
        {"stage_timeline", {"run_id", "step", "dp_rank", "stage", "busy_ms", "idle_ms", "peak_mem_bytes",
                            "headroom_bytes", NULL}},
        {"dp_balance", {"run_id", "step", "pipelines", "min_ms", "max_ms", "mean_ms", "imbalance", NULL}},
    };
    for (size_t v = 0; v < sizeof want / sizeof want[0]; v++) {
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT type FROM sqlite_schema WHERE name = '%s'", want[v].view);
        sqlite3_stmt *q;
        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        assert_string_equal((const char *)sqlite3_column_text(q, 0), "view");
        sqlite3_finalize(q);
        snprintf(sql, sizeof sql, "PRAGMA table_info(%s)", want[v].view);
        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
        for (size_t c = 0; want[v].cols[c]; c++) {
            if (sqlite3_step(q) != SQLITE_ROW) fail_msg("view %s lacks column %s", want[v].view, want[v].cols[c]);
            assert_int_equal(sqlite3_column_int(q, 0), (int)c);
            if (strcmp((const char *)sqlite3_column_text(q, 1), want[v].cols[c]) != 0)
                fail_msg("view %s column %zu is %s, want %s", want[v].view, c, sqlite3_column_text(q, 1),
                         want[v].cols[c]);
        }
        sqlite3_finalize(q);
        /* and it answers */
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", want[v].view);
        assert_true(query_int(db, sql) > 0);
    }
    /* the file's identity and table options */
    assert_int_equal(query_int(db, "PRAGMA application_id"), LT_PLAN_DB_APPLICATION_ID);
    assert_int_equal(query_int(db, "PRAGMA user_version"), 5);
    /* version 3: the loss denominator, stored and in step_summary, equal to sum(length - 1) */
    assert_int_equal(query_int(db, "SELECT count(*) FROM steps AS t WHERE n_predicted <> (SELECT sum(length - 1) "
                                   "FROM step_samples AS s WHERE s.run_id = t.run_id AND s.step = t.step)"),
                     0);
    assert_int_equal(query_int(db, "SELECT count(*) FROM step_summary WHERE n_predicted = n_tokens - n_samples"),
                     query_int(db, "SELECT count(*) FROM steps"));
    /* the tables of schema version 2's additions */
    assert_int_equal(query_int(db, "SELECT group_concat(name, ',') = 'run_id,step,idx,sample_id,dp_rank,cp,reason' "
                                   "FROM pragma_table_info('dp_merges')"),
                     1);
    /* version 4: dp_merges.reason, 'flops' by default */
    assert_int_equal(query_int(db, "SELECT count(*) FROM pragma_table_info('dp_merges') WHERE name = 'reason' AND "
                                   "type = 'TEXT' AND \"notnull\" = 1 AND dflt_value = '''flops'''"),
                     1);
    assert_int_equal(query_int(db, "SELECT count(*) FROM pragma_table_info('units_slices') WHERE name = 'cp' AND "
                                   "type = 'INTEGER' AND \"notnull\" = 1 AND dflt_value = '1'"),
                     1);
    assert_int_equal(query_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE "
                                   "'sqlite_%' AND sql NOT LIKE '%STRICT%'"),
                     0);
    /* keyed tables are WITHOUT ROWID but stages, whose rows hold the op lists (rows of ~10 KB
     * would spill into overflow pages in an index B-tree) */
    assert_int_equal(query_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name NOT IN "
                                   "('runs', 'stages') AND name NOT LIKE 'sqlite_%' AND "
                                   "sql NOT LIKE '%WITHOUT ROWID%'"),
                     0);
    assert_int_equal(query_int(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'ops'"), 0);
    assert_int_equal(query_int(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
    assert_int_equal(query_int(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check != 'ok'"), 0);
    sqlite3_close(db);
}

/* plan_slices, samples, step_summary, stage_timeline and dp_balance hold what was put. */
static void test_views_content(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "content");
    write_file(path, 12, false); /* enough rows per run_id for the planner to skip-scan */
    sqlite3 *db = open_raw(path);
    /* an FB row is one F row and one B row */
    int64_t rows = query_int(db, "SELECT count(*) FROM units_slices");
    assert_int_equal(query_int(db, "SELECT count(*) FROM units_slices WHERE passes != 'FB'"), 0);
    assert_int_equal(query_int(db, "SELECT count(*) FROM plan_slices"), 2 * rows);
    assert_int_equal(query_int(db, "SELECT count(*) FROM plan_slices WHERE pass = 'F'"), rows);
    assert_int_equal(query_int(db, "SELECT count(*) FROM plan_slices WHERE pass = 'B'"), rows);
    assert_int_equal(query_int(db, "SELECT count(*) FROM (SELECT step, dp_rank, unit, seq, sample_id, tok_begin, "
                                   "tok_end FROM plan_slices WHERE pass = 'F' EXCEPT SELECT step, dp_rank, unit, seq, "
                                   "sample_id, tok_begin, tok_end FROM plan_slices WHERE pass = 'B')"),
                     0);
    assert_int_equal(query_int(db, "SELECT count(*) FROM plan_slices p JOIN step_samples s ON s.step = p.step AND "
                                   "s.idx = p.idx WHERE s.sample_id != p.sample_id"),
                     0);
    /* every step's plan against its views */
    lt_store *st;
    lt_error err;
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    lt_step_plan p;
    lt_step_plan_init(&p);
    for (uint64_t t = 0; t < 3; t++) {
        lt_sample *smp;
        assert_int_equal(lt_store_get_step(st, t, &p, &smp, &err), LT_OK);
        int64_t tokens = 0;
        for (size_t i = 0; i < p.n_samples; i++) tokens += p.lengths[i];
        sqlite3_stmt *q;
        assert_int_equal(sqlite3_prepare_v2(db,
                                            "SELECT strategy, n_samples, n_tokens, predicted_ms, bubble_ratio, "
                                            "peak_mem_bytes, solve_ms, params, solver_status FROM step_summary "
                                            "WHERE step = ?",
                                            -1, &q, NULL),
                         SQLITE_OK);
        sqlite3_bind_int64(q, 1, (int64_t)t);
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        assert_string_equal((const char *)sqlite3_column_text(q, 0), lt_strategy_name(p.strategy));
        assert_int_equal(sqlite3_column_int64(q, 1), (int64_t)p.n_samples);
        assert_int_equal(sqlite3_column_int64(q, 2), tokens);
        assert_close(sqlite3_column_double(q, 3), p.time_s * 1e3);
        assert_true(sqlite3_column_double(q, 4) == p.bubble_ratio);
        assert_true(sqlite3_column_double(q, 5) == p.peak_mem);
        assert_int_equal(sqlite3_column_type(q, 6), SQLITE_NULL); /* timings off */
        assert_string_equal((const char *)sqlite3_column_text(q, 7), p.params);
        assert_string_equal((const char *)sqlite3_column_text(q, 8), "none");
        sqlite3_finalize(q);
        /* samples.source is lt_sample_source_format's text; dp_rank is the pipeline's */
        assert_int_equal(sqlite3_prepare_v2(db,
                                            "SELECT sample_id, length, dp_rank, source FROM samples WHERE step = ? "
                                            "ORDER BY idx",
                                            -1, &q, NULL),
                         SQLITE_OK);
        sqlite3_bind_int64(q, 1, (int64_t)t);
        for (size_t i = 0; i < p.n_samples; i++) {
            assert_int_equal(sqlite3_step(q), SQLITE_ROW);
            char src[96];
            lt_sample_source_format(&smp[i], src, sizeof src);
            assert_int_equal(sqlite3_column_int64(q, 0), (int64_t)smp[i].id);
            assert_int_equal(sqlite3_column_int64(q, 1), p.lengths[i]);
            assert_int_equal(sqlite3_column_int64(q, 2), p.ranks[p.sample_rank[i]].dp_rank);
            assert_string_equal((const char *)sqlite3_column_text(q, 3), src);
        }
        assert_int_equal(sqlite3_step(q), SQLITE_DONE);
        sqlite3_finalize(q);
        /* stage_timeline: idle = step time - busy, headroom = cap - peak */
        assert_int_equal(sqlite3_prepare_v2(db,
                                            "SELECT dp_rank, stage, busy_ms, idle_ms, peak_mem_bytes, headroom_bytes "
                                            "FROM stage_timeline WHERE step = ? ORDER BY dp_rank, stage",
                                            -1, &q, NULL),
                         SQLITE_OK);
        sqlite3_bind_int64(q, 1, (int64_t)t);
        for (size_t r = 0; r < p.n_ranks; r++)
            for (int g = 0; g < p.pp; g++) {
                assert_int_equal(sqlite3_step(q), SQLITE_ROW);
                assert_int_equal(sqlite3_column_int(q, 0), p.ranks[r].dp_rank);
                assert_int_equal(sqlite3_column_int(q, 1), g);
                assert_close(sqlite3_column_double(q, 2), p.ranks[r].stage_busy_s[g] * 1e3);
                assert_true(fabs(sqlite3_column_double(q, 3) - (p.time_s - p.ranks[r].stage_busy_s[g]) * 1e3) < 1e-9);
                assert_true(sqlite3_column_double(q, 4) == p.ranks[r].stage_peak_mem[g]);
                assert_true(sqlite3_column_double(q, 5) == 64 - p.ranks[r].stage_peak_mem[g]);
            }
        sqlite3_finalize(q);
        /* dp_balance */
        double mx = 0, mn = INFINITY, sum = 0;
        for (size_t r = 0; r < p.n_ranks; r++) {
            double ms = p.ranks[r].time_s * 1e3;
            mx = fmax(mx, ms);
            mn = fmin(mn, ms);
            sum += ms;
        }
        assert_int_equal(sqlite3_prepare_v2(db,
                                            "SELECT pipelines, min_ms, max_ms, mean_ms, imbalance FROM dp_balance "
                                            "WHERE step = ?",
                                            -1, &q, NULL),
                         SQLITE_OK);
        sqlite3_bind_int64(q, 1, (int64_t)t);
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(q, 0), (int)p.n_ranks);
        assert_close(sqlite3_column_double(q, 1), mn);
        assert_close(sqlite3_column_double(q, 2), mx);
        assert_true(fabs(sqlite3_column_double(q, 3) - sum / (double)p.n_ranks) < 1e-9);
        assert_true(fabs(sqlite3_column_double(q, 4) - mx / (sum / (double)p.n_ranks)) < 1e-9);
        sqlite3_finalize(q);
        /* plan_ops in seq order is the stage's list */
        assert_int_equal(sqlite3_prepare_v2(db,
                                            "SELECT kind, unit FROM plan_ops WHERE step = ? AND dp_rank = ? AND "
                                            "stage = 1 ORDER BY seq",
                                            -1, &q, NULL),
                         SQLITE_OK);
        sqlite3_bind_int64(q, 1, (int64_t)t);
        sqlite3_bind_int(q, 2, p.ranks[1].dp_rank);
        const lt_stage_ops *so = &p.ranks[1].sched.stage[1];
        static const char *const kinds[] = {"F", "FK", "B"};
        for (size_t i = 0; i < so->n; i++) {
            assert_int_equal(sqlite3_step(q), SQLITE_ROW);
            assert_string_equal((const char *)sqlite3_column_text(q, 0), kinds[so->ops[i].kind]);
            assert_int_equal(sqlite3_column_int64(q, 1), so->ops[i].unit);
        }
        assert_int_equal(sqlite3_step(q), SQLITE_DONE);
        sqlite3_finalize(q);
        free(smp);
    }
    /* step 0 is a ChunkFlow plan: it has FK ops */
    assert_true(query_int(db, "SELECT count(*) FROM plan_ops WHERE step = 0 AND kind = 'FK'") > 0);
    /* a query on step alone searches the keys (skip-scan over run_id), no full scan, also
     * through the views */
    static const char *const by_step[] = {
        "SELECT * FROM stages WHERE step = 1",        "SELECT * FROM plan_ops WHERE step = 1",
        "SELECT * FROM plan_slices WHERE step = 1",   "SELECT * FROM samples WHERE step = 1",
        "SELECT * FROM stage_timeline WHERE step = 1", "SELECT * FROM dp_balance WHERE step = 1",
    };
    for (size_t i = 0; i < sizeof by_step / sizeof by_step[0]; i++) {
        char sql[160];
        snprintf(sql, sizeof sql, "EXPLAIN QUERY PLAN %s", by_step[i]);
        sqlite3_stmt *q;
        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
        while (sqlite3_step(q) == SQLITE_ROW) {
            const char *plan = (const char *)sqlite3_column_text(q, 3);
            /* (json_each over one stages row's op list is a "SCAN o VIRTUAL TABLE") */
            if (strncmp(plan, "SCAN ", 5) == 0 && strcmp(plan, "SCAN r") != 0 && !strstr(plan, "CONSTANT") &&
                strcmp(plan, "SCAN dp_balance") != 0 && !strstr(plan, "VIRTUAL TABLE"))
                fail_msg("%s: %s", by_step[i], plan);
        }
        sqlite3_finalize(q);
    }
    lt_step_plan_free(&p);
    lt_store_close(st);
    sqlite3_close(db);
}

/* ------------------------------------------------------------------ the ops encoding */

/* A file of one step of each shape: 0 ChunkFlow, 1 Seq1F1B, 2 1F1B, 3 HelixPipe (layer-part
 * ops); plans[] and smp[] keep what was put (the caller frees them). */
static void write_all_shapes(const char *path, lt_step_plan plans[4], lt_sample *smp[4]) {
    static const plan_kind kinds[4] = {K_CHUNK, K_SLICED, K_WHOLE, K_HELIX};
    char *cfg = config_text(NULL);
    lt_run_info run = test_run(cfg);
    lt_store *st;
    lt_error err;
    assert_int_equal(lt_store_begin(&st, path, &run, false, &err), LT_OK);
    for (uint64_t t = 0; t < 4; t++) {
        int64_t len[8];
        step_lengths(t, len);
        build_plan(&plans[t], t, len, 8, 2, 1, 2, 4, kinds[t]);
        smp[t] = make_samples(t, len, 8);
        if (lt_store_put_step(st, &plans[t], smp[t], &err) != LT_OK) fail_msg("put %" PRIu64 ": %s", t, err.what);
    }
    assert_int_equal(lt_store_commit(st, &err), LT_OK);
    free(cfg);
}

/* plan_ops holds exactly the ops that were put: every column, in seq order, with the
 * views' types; the short and the long element forms both come out right. */
static void test_plan_ops_view(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "plan-ops");
    lt_step_plan plans[4];
    lt_sample *smp[4];
    write_all_shapes(path, plans, smp);
    sqlite3 *db = open_raw(path);
    static const char *const kinds[] = {"F", "FK", "B"}, *const parts[] = {"all", "pre", "attn", "post"};
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT run_id, step, dp_rank, stage, seq, kind, unit, recompute_layers, "
                                        "layer_begin, layer_end, part, start_ms, finish_ms, mem_bytes, typeof(seq), "
                                        "typeof(unit), typeof(recompute_layers), typeof(layer_begin), "
                                        "typeof(layer_end), typeof(start_ms), typeof(finish_ms), typeof(mem_bytes) "
                                        "FROM plan_ops WHERE step = ? ORDER BY dp_rank, stage, seq",
                                        -1, &q, NULL),
                     SQLITE_OK);
    size_t part_ops = 0;
    for (uint64_t t = 0; t < 4; t++) {
        const lt_step_plan *p = &plans[t];
        sqlite3_reset(q);
        sqlite3_bind_int64(q, 1, (int64_t)t);
        for (size_t r = 0; r < p->n_ranks; r++) {
            const lt_rank_plan *rp = &p->ranks[r];
            size_t id = 0;
            for (int g = 0; g < p->pp; g++) {
                for (size_t i = 0; i < rp->sched.stage[g].n; i++, id++) {
                    const lt_op *op = &rp->sched.stage[g].ops[i];
                    const lt_plan_op *po = &rp->ops[id];
                    if (sqlite3_step(q) != SQLITE_ROW)
                        fail_msg("step %" PRIu64 " dp_rank %d stage %d: plan_ops ends before op %zu", t, rp->dp_rank,
                                 g, i);
                    assert_int_equal(sqlite3_column_int64(q, 0), 1);
                    assert_int_equal(sqlite3_column_int64(q, 1), (int64_t)t);
                    assert_int_equal(sqlite3_column_int64(q, 2), rp->dp_rank);
                    assert_int_equal(sqlite3_column_int64(q, 3), g);
                    assert_int_equal(sqlite3_column_int64(q, 4), (int64_t)i);
                    assert_string_equal((const char *)sqlite3_column_text(q, 5), kinds[op->kind]);
                    assert_int_equal(sqlite3_column_int64(q, 6), op->unit);
                    assert_int_equal(sqlite3_column_int64(q, 7), op->recompute_layers);
                    assert_int_equal(sqlite3_column_int64(q, 8), op->layer_begin);
                    assert_int_equal(sqlite3_column_int64(q, 9), op->layer_end);
                    assert_string_equal((const char *)sqlite3_column_text(q, 10), parts[op->part]);
                    /* ms within 1 ns */
                    assert_true(fabs(sqlite3_column_double(q, 11) - po->start_s * 1e3) <= 1.000001e-6);
                    assert_true(fabs(sqlite3_column_double(q, 12) - po->finish_s * 1e3) <= 1.000001e-6);
                    assert_true(sqlite3_column_double(q, 13) == po->mem_bytes);
                    for (int c = 14; c < 19; c++)
                        assert_string_equal((const char *)sqlite3_column_text(q, c), "integer");
                    for (int c = 19; c < 22; c++)
                        assert_string_equal((const char *)sqlite3_column_text(q, c), "real");
                    if (op->part != LT_PART_ALL) part_ops++;
                }
            }
        }
        assert_int_equal(sqlite3_step(q), SQLITE_DONE);
    }
    sqlite3_finalize(q);
    assert_true(part_ops > 0); /* the HelixPipe step has layer-part ops, recomputed ones among them */
    assert_true(query_int(db, "SELECT count(*) FROM plan_ops WHERE step = 3 AND part != 'all' AND "
                              "recompute_layers = 1") > 0);
    /* the element forms: six values for whole-block ops (every op but HelixPipe's), nine
     * for the layer-part ops; the stages rows' n_ops count them */
    assert_int_equal(query_int(db, "SELECT count(*) FROM stages, json_each(stages.ops) AS o WHERE step < 3 AND "
                                   "json_array_length(o.value) != 6"),
                     0);
    assert_int_equal(query_int(db, "SELECT count(*) FROM stages, json_each(stages.ops) AS o WHERE step = 3 AND "
                                   "json_array_length(o.value) = 9"),
                     (int64_t)part_ops);
    assert_int_equal(query_int(db, "SELECT count(*) FROM stages WHERE n_ops != json_array_length(ops)"), 0);
    assert_int_equal(query_int(db, "SELECT count(*) FROM plan_ops"), query_int(db, "SELECT sum(n_ops) FROM stages"));
    /* the text is the documented encoding: kind, unit, recompute, start ns, finish ns, bytes */
    {
        const lt_rank_plan *rp = &plans[2].ranks[0];
        char want[128];
        snprintf(want, sizeof want, "[[0,0,0,0,%lld,1],", llround(rp->ops[0].finish_s * 1e9));
        assert_int_equal(sqlite3_prepare_v2(db, "SELECT ops FROM stages WHERE step = 2 AND dp_rank = 0 AND stage = 0",
                                            -1, &q, NULL),
                         SQLITE_OK);
        assert_int_equal(sqlite3_step(q), SQLITE_ROW);
        const char *ops = (const char *)sqlite3_column_text(q, 0);
        if (strncmp(ops, want, strlen(want)) != 0) fail_msg("ops text '%.60s...', want it to start '%s'", ops, want);
        sqlite3_finalize(q);
    }
    sqlite3_close(db);
    for (int t = 0; t < 4; t++) {
        lt_step_plan_free(&plans[t]);
        free(smp[t]);
    }
}

/* A HelixPipe plan (ops over one part of one layer, in the long element form) comes back
 * equal and valid, also from an op list rewritten with blanks (SQLite's json() output and
 * hand edits stay readable). */
static void test_helixpipe_round_trip(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "helix");
    lt_step_plan plans[4];
    lt_sample *smp[4];
    write_all_shapes(path, plans, smp);
    lt_store *st;
    lt_error err;
    lt_step_plan got;
    lt_step_plan_init(&got);
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    for (uint64_t t = 0; t < 4; t++) {
        assert_int_equal(lt_store_get_step(st, t, &got, NULL, &err), LT_OK);
        assert_plans_equal(&plans[t], &got);
        if (lt_plan_validate(&got, 64, &err) != LT_OK) fail_msg("step %" PRIu64 ": %s", t, err.what);
    }
    size_t checked;
    if (lt_store_validate(st, NULL, NULL, &checked, &err) != LT_OK) fail_msg("%s", err.what);
    assert_int_equal(checked, 4);
    lt_store_close(st);

    sqlite3 *db = open_raw(path);
    exec_raw(db, "UPDATE stages SET ops = ' ' || replace(replace(ops, ',', ' ,\n\t'), '[', '[ ') || '\r\n' "
                 "WHERE step = 3");
    sqlite3_close(db);
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    assert_int_equal(lt_store_get_step(st, 3, &got, NULL, &err), LT_OK);
    assert_plans_equal(&plans[3], &got);
    lt_store_close(st);
    lt_step_plan_free(&got);
    for (int t = 0; t < 4; t++) {
        lt_step_plan_free(&plans[t]);
        free(smp[t]);
    }
}

/* Op times that are not whole nanoseconds: back within 1 ns, and every plan still valid,
 * also where rounding to the nearest nanosecond would put the last op's finish after the
 * pipeline's time as read back (the writer keeps it at or before). */
static void test_op_time_rounding(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "rounding");
    char *cfg = config_text(NULL);
    lt_run_info run = test_run(cfg);
    lt_store *st;
    lt_error err;
    assert_int_equal(lt_store_begin(&st, path, &run, false, &err), LT_OK);
    enum { STEPS = 64 };
    lt_step_plan *plans = calloc(STEPS, sizeof *plans);
    int naive_late = 0; /* steps where the nearest ns of the last finish reads back late */
    for (uint64_t t = 0; t < STEPS; t++) {
        int64_t len[8];
        step_lengths(t, len);
        lt_step_plan *p = &plans[t];
        build_plan(p, t, len, 8, 2, 1, 2, 4, kind_of_step(t));
        /* times in seconds with fractions of a nanosecond, over 1 s (more digits) */
        double f = 1e4 * (1.0 + 0.0123456789 * (double)t) + 0.31415926 * (double)t;
        p->time_s *= f;
        for (size_t r = 0; r < p->n_ranks; r++) {
            lt_rank_plan *rp = &p->ranks[r];
            rp->time_s *= f;
            for (int g = 0; g < p->pp; g++) rp->stage_busy_s[g] *= f;
            for (size_t i = 0; i < lt_schedule_n_ops(&rp->sched); i++) {
                rp->ops[i].start_s *= f;
                rp->ops[i].finish_s *= f;
            }
            double back = rp->time_s * 1e3 / 1e3;
            if ((double)llround(rp->time_s * 1e9) / 1e9 > back) naive_late++;
        }
        lt_sample *smp = make_samples(t, len, 8);
        if (lt_plan_validate(p, 64, &err) != LT_OK) fail_msg("step %" PRIu64 " before: %s", t, err.what);
        if (lt_store_put_step(st, p, smp, &err) != LT_OK) fail_msg("put: %s", err.what);
        free(smp);
    }
    assert_true(naive_late > 0); /* the case the writer's clamp is for happens here */
    assert_int_equal(lt_store_commit(st, &err), LT_OK);
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    lt_step_plan got;
    lt_step_plan_init(&got);
    for (uint64_t t = 0; t < STEPS; t++) {
        assert_int_equal(lt_store_get_step(st, t, &got, NULL, &err), LT_OK);
        assert_plans_equal(&plans[t], &got);
        if (lt_plan_validate(&got, 64, &err) != LT_OK) fail_msg("step %" PRIu64 " read back: %s", t, err.what);
        lt_step_plan_free(&plans[t]);
    }
    lt_step_plan_free(&got);
    lt_store_close(st);
    /* and in the views: no op finishes after its pipeline's predicted_ms */
    sqlite3 *db = open_raw(path);
    assert_int_equal(query_int(db, "SELECT count(*) FROM plan_ops AS o JOIN pipelines AS p ON p.run_id = o.run_id "
                                   "AND p.step = o.step AND p.dp_rank = o.dp_rank WHERE o.finish_ms > p.predicted_ms "
                                   "OR o.finish_ms < o.start_ms"),
                     0);
    sqlite3_close(db);
    free(plans);
    free(cfg);
}

/* Predictions the encoding cannot hold are refused before anything is written. */
static void test_unstorable_predictions(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "unstorable");
    char *cfg = config_text(NULL);
    lt_run_info run = test_run(cfg);
    lt_store *st;
    lt_error err;
    assert_int_equal(lt_store_begin(&st, path, &run, false, &err), LT_OK);
    int64_t len[8];
    step_lengths(0, len);
    lt_sample *smp = make_samples(0, len, 8);
    lt_step_plan p;
    build_plan(&p, 0, len, 8, 2, 1, 2, 4, K_WHOLE);
    p.ranks[1].ops[2].finish_s = NAN;
    assert_int_equal(lt_store_put_step(st, &p, smp, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "step 0, pipeline 1 (dp_rank 1), stage 0, op 2 ("));
    assert_non_null(strstr(err.what, "finish nan s"));
    p.ranks[1].ops[2].finish_s = 2e9;
    assert_int_equal(lt_store_put_step(st, &p, smp, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "cannot be stored"));
    p.ranks[1].ops[2].finish_s = p.ranks[1].ops[2].start_s;
    p.ranks[0].ops[0].mem_bytes = INFINITY;
    assert_int_equal(lt_store_put_step(st, &p, smp, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "memory inf bytes"));
    /* nothing was written: the store still takes the step, and a fractional byte count */
    p.ranks[0].ops[0].mem_bytes = 0.1;
    p.ranks[0].ops[1].mem_bytes = -2.5e20;
    assert_int_equal(lt_store_put_step(st, &p, smp, &err), LT_OK);
    assert_int_equal(lt_store_commit(st, &err), LT_OK);
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    lt_step_plan got;
    lt_step_plan_init(&got);
    assert_int_equal(lt_store_get_step(st, 0, &got, NULL, &err), LT_OK);
    assert_true(got.ranks[0].ops[0].mem_bytes == 0.1);
    assert_true(got.ranks[0].ops[1].mem_bytes == -2.5e20);
    lt_store_close(st);
    sqlite3 *db = open_raw(path);
    assert_int_equal(query_int(db, "SELECT count(*) FROM stages WHERE ops LIKE '[[0,0,0,0,%,0.1],[%,-2.5e+20],%' "
                                   "AND dp_rank = 0 AND stage = 0"),
                     1);
    sqlite3_close(db);
    lt_step_plan_free(&got);
    lt_step_plan_free(&p);
    free(smp);
    free(cfg);
}

/* ------------------------------------------------------------------ the docs' example queries */

/* docs/plans-schema.md, found through $top_srcdir (exported by `make check`) or upwards. */
static char *read_schema_doc(void) {
    const char *roots[] = {getenv("top_srcdir"), getenv("srcdir"), ".", "..", "../..", "../../..", "../../../.."};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        if (!roots[i]) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/docs/plans-schema.md", roots[i]);
        char *text = read_all(path, NULL);
        if (text) return text;
    }
    return NULL;
}

static void test_doc_queries(void **state) {
    (void)state;
    char *doc = read_schema_doc();
    if (!doc) {
        printf("# skip: docs/plans-schema.md not found from $top_srcdir\n");
        skip();
    }
    char path[256];
    new_path(path, sizeof path, "doc");
    write_file_asym(path, 3); /* steps 0..2, and step 3 asymmetric with a DP-Merge group and a MILP timeout */
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    int blocks = 0;
    for (const char *p = doc; (p = strstr(p, "```sql\n"));) {
        p += 7;
        const char *end = strstr(p, "```");
        assert_non_null(end);
        char *sql = strndup(p, (size_t)(end - p));
        /* every statement of the block prepares, runs and returns rows */
        for (const char *s = sql; *s;) {
            sqlite3_stmt *q;
            const char *tail;
            if (sqlite3_prepare_v2(db, s, -1, &q, &tail) != SQLITE_OK)
                fail_msg("docs query does not prepare: %s\n%s", sqlite3_errmsg(db), s);
            if (!q) break; /* only blanks left */
            int rows = 0, rc;
            while ((rc = sqlite3_step(q)) == SQLITE_ROW) rows++;
            if (rc != SQLITE_DONE) fail_msg("docs query fails: %s\n%s", sqlite3_errmsg(db), s);
            if (rows == 0) fail_msg("docs query returns no row on the test file:\n%s", s);
            sqlite3_finalize(q);
            s = tail;
        }
        free(sql);
        blocks++;
        p = end + 3;
    }
    assert_true(blocks >= 9);
    sqlite3_close(db);
    free(doc);
}

/* ------------------------------------------------------------------ writing: determinism, resume, refusals */

static void test_deterministic_bytes(void **state) {
    (void)state;
    char a[256], b[256];
    new_path(a, sizeof a, "det");
    new_path(b, sizeof b, "det");
    write_file(a, 4, false);
    write_file(b, 4, false);
    assert_true(same_bytes(a, b));
    /* with timings solve_ms is stored (and the bytes may differ between runs) */
    char c[256];
    new_path(c, sizeof c, "timed");
    write_file(c, 4, true);
    sqlite3 *db = open_raw(c);
    assert_int_equal(query_int(db, "SELECT count(*) FROM steps WHERE solve_ms = 12.5"), 4);
    sqlite3_close(db);
}

static void test_resume(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "resume");
    write_file(path, 3, false);
    char *cfg = config_text((const char *const[]){"plan.steps=100", NULL}); /* more steps: still the same run */
    lt_run_info run = test_run(cfg);
    lt_store *st;
    lt_error err;
    if (lt_store_begin(&st, path, &run, false, &err) != LT_OK) fail_msg("%s", err.what);
    for (uint64_t t = 0; t < 6; t++) {
        bool has;
        assert_int_equal(lt_store_has_step(st, t, &has, &err), LT_OK);
        assert_int_equal(has, t < 3);
    }
    put_steps(st, 3, 2);
    assert_int_equal(lt_store_commit(st, &err), LT_OK);
    free(cfg);
    assert_int_equal(count_temporaries(), 0);

    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    uint64_t *steps;
    size_t n;
    assert_int_equal(lt_store_steps(st, &steps, &n, &err), LT_OK);
    assert_int_equal(n, 5);
    for (size_t i = 0; i < n; i++) assert_int_equal(steps[i], i);
    free(steps);
    lt_step_plan got, want;
    lt_step_plan_init(&got);
    for (uint64_t t = 0; t < 5; t++) { /* old steps kept, new ones added */
        int64_t len[8];
        step_lengths(t, len);
        build_plan(&want, t, len, 8, 2, 1, 2, 4, kind_of_step(t));
        assert_int_equal(lt_store_get_step(st, t, &got, NULL, &err), LT_OK);
        assert_plans_equal(&want, &got);
        lt_step_plan_free(&want);
    }
    lt_step_plan_free(&got);
    size_t checked;
    assert_int_equal(lt_store_validate(st, NULL, NULL, &checked, &err), LT_OK);
    assert_int_equal(checked, 5);
    lt_store_close(st);

    /* resuming with the same steps gives the same bytes as writing them at once */
    char whole[256];
    new_path(whole, sizeof whole, "whole");
    write_file(whole, 5, false);
    sqlite3 *x = open_raw(whole), *y = open_raw(path);
    assert_int_equal(query_int(x, "SELECT sum(n_ops) FROM stages"), query_int(y, "SELECT sum(n_ops) FROM stages"));
    exec_raw(x, "CREATE TEMP TABLE h AS SELECT step, dp_rank, stage, ops FROM stages");
    char sql[512];
    snprintf(sql, sizeof sql, "ATTACH '%s' AS y", path);
    exec_raw(x, sql);
    assert_int_equal(query_int(x, "SELECT count(*) FROM (SELECT * FROM h EXCEPT SELECT step, dp_rank, stage, ops "
                                  "FROM y.stages)"),
                     0);
    sqlite3_close(x);
    sqlite3_close(y);
}

/* begin on `path` with a run made by `mod`; the expected status, message part and no change */
typedef void (*run_mod)(lt_run_info *run);

static void expect_refusal(const char *path, const char *const *extra, run_mod mod, lt_status want,
                           const char *what_part) {
    size_t before_len;
    char *before = read_all(path, &before_len);
    char *cfg = config_text(extra);
    lt_run_info run = test_run(cfg);
    if (mod) mod(&run);
    lt_store *st = (lt_store *)path;
    lt_error err;
    lt_status s = lt_store_begin(&st, path, &run, false, &err);
    if (s != want) fail_msg("status %d (%s), want %d", s, err.what, want);
    assert_null(st);
    if (!strstr(err.what, what_part)) fail_msg("'%s' lacks '%s'", err.what, what_part);
    assert_string_equal(err.where, path);
    size_t after_len;
    char *after = read_all(path, &after_len);
    assert_true(before_len == after_len && memcmp(before, after, before_len) == 0);
    assert_int_equal(count_temporaries(), 0);
    free(before);
    free(after);
    free(cfg);
}

static void other_fingerprint(lt_run_info *r) { r->fingerprint = "ff"; }
static void other_strategy(lt_run_info *r) { r->strategy = "megatron"; }
static void other_tuning(lt_run_info *r) { r->tuning = "cp=2 recompute=1"; }

static void test_refusals(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "refuse");
    write_file(path, 2, false);
    lt_error err;

    /* a different config value: the message names the first differing key */
    expect_refusal(path, (const char *const[]){"plan.seed=99", NULL}, NULL, LT_ERR_CONFIG,
                   "was built from a different config: [plan] seed = 99 here, 1234 in the file");
    assert_int_equal(lt_exit_code(LT_ERR_CONFIG), 2);
    expect_refusal(path, (const char *const[]){"model.layers=8", NULL}, NULL, LT_ERR_CONFIG,
                   "[model] layers = 8 here, 4 in the file");
    expect_refusal(path, (const char *const[]){"parallel.tp=2", NULL}, NULL, LT_ERR_CONFIG, "[parallel] tp = 2 here");
    expect_refusal(path, (const char *const[]){"model.preset=tiny", NULL}, NULL, LT_ERR_CONFIG,
                   "[model] preset = tiny here, (no value) in the file");
    expect_refusal(path, NULL, other_fingerprint, LT_ERR_CONFIG, "from different input data");
    expect_refusal(path, NULL, other_strategy, LT_ERR_CONFIG, "with another strategy: megatron here, chunkflow");
    expect_refusal(path, NULL, other_tuning, LT_ERR_CONFIG, "with another tuning");

    /* what does not matter: origins, spelling of a value, plan.steps, other sections */
    lt_config *c = lt_config_new();
    const char *ini = "[model]\nlayers = 4\n[parallel]\ndp = 2\npp = 2\n[plan]\nglobal_batch = 8\n"
                      "context_len = 1024\nmem = 64\nsteps = 7\nstrategy = chunkflow\n[run]\nname = other\n";
    assert_int_equal(lt_config_load_string(c, ini, "/elsewhere/run.ini", &err), LT_OK);
    char *cfg = lt_config_dump_string(c);
    lt_config_free(c);
    assert_non_null(strstr(cfg, "; from /elsewhere/run.ini"));
    lt_run_info run = test_run(cfg);
    run.input = "/another/machine/lengths.txt";
    lt_store *st;
    if (lt_store_begin(&st, path, &run, false, &err) != LT_OK) fail_msg("%s", err.what);
    lt_store_abort(st);
    free(cfg);

    /* files that are not plan databases of this version */
    char other[256];
    new_path(other, sizeof other, "foreign");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(other, &db), SQLITE_OK);
    exec_raw(db, "PRAGMA application_id = 1234; CREATE TABLE t (x);");
    sqlite3_close(db);
    expect_refusal(other, NULL, NULL, LT_ERR_VERSION, "not a longtail plan database");
    assert_int_equal(lt_store_open(&st, other, &err), LT_ERR_VERSION);

    char newer[256];
    new_path(newer, sizeof newer, "newer");
    copy_path(path, newer);
    db = open_raw(newer);
    exec_raw(db, "PRAGMA user_version = 99;");
    sqlite3_close(db);
    expect_refusal(newer, NULL, NULL, LT_ERR_VERSION, "newer than this program");

    char text[256];
    new_path(text, sizeof text, "text");
    FILE *f = fopen(text, "w");
    fputs("this is not a database, but it is long enough to have a header of a hundred bytes or so, "
          "which SQLite reads first and rejects as not a database at all.\n",
          f);
    fclose(f);
    expect_refusal(text, NULL, NULL, LT_ERR_INPUT, "not a longtail plan database");
    assert_int_equal(lt_exit_code(LT_ERR_INPUT), 1);
}

/* abort leaves the original byte-identical and removes the temporary file */
static void test_abort(void **state) {
    (void)state;
    char path[256], copy[256];
    new_path(path, sizeof path, "abort");
    new_path(copy, sizeof copy, "abort-copy");
    write_file(path, 2, false);
    copy_path(path, copy);
    char *cfg = config_text(NULL);
    lt_run_info run = test_run(cfg);
    lt_store *st;
    lt_error err;
    assert_int_equal(lt_store_begin(&st, path, &run, false, &err), LT_OK);
    assert_int_equal(count_temporaries(), 1);
    put_steps(st, 2, 3);
    lt_store_abort(st);
    assert_int_equal(count_temporaries(), 0);
    assert_true(same_bytes(path, copy));
    lt_store_abort(NULL);
    lt_store_close(NULL);

    /* a new file that is aborted never appears */
    char fresh[256];
    new_path(fresh, sizeof fresh, "never");
    assert_int_equal(lt_store_begin(&st, fresh, &run, false, &err), LT_OK);
    put_steps(st, 0, 1);
    lt_store_abort(st);
    struct stat sb;
    assert_int_not_equal(stat(fresh, &sb), 0);
    assert_int_equal(count_temporaries(), 0);
    free(cfg);
}

static void test_io_errors(void **state) {
    (void)state;
    char *cfg = config_text(NULL);
    lt_run_info run = test_run(cfg);
    lt_store *st;
    lt_error err;
    char path[256];
    snprintf(path, sizeof path, "%s/no-such-dir/plans.db", tmp_root);
    assert_int_equal(lt_store_begin(&st, path, &run, false, &err), LT_ERR_IO);
    assert_null(st);
    assert_string_equal(err.where, path);
    assert_non_null(strstr(err.what, "No such file or directory"));
    assert_non_null(strstr(err.hint, "does not exist"));
    /* reading a missing file */
    assert_int_equal(lt_store_open(&st, path, &err), LT_ERR_IO);
    assert_string_equal(err.where, path);
    assert_non_null(strstr(err.hint, "planner build"));
    /* a plan of another shape than the run is a programming error, caught before writing */
    char ok[256];
    new_path(ok, sizeof ok, "shape");
    assert_int_equal(lt_store_begin(&st, ok, &run, false, &err), LT_OK);
    int64_t len[8];
    step_lengths(0, len);
    lt_step_plan p;
    build_plan(&p, 0, len, 8, 2, 1, 2, 3, K_WHOLE); /* 3 layers, the run has 4 */
    lt_sample *smp = make_samples(0, len, 8);
    assert_int_equal(lt_store_put_step(st, &p, smp, &err), LT_ERR_INTERNAL);
    assert_non_null(strstr(err.what, "2 stages x 3 layers, the run has 2 x 4"));
    lt_step_plan_free(&p);
    build_plan(&p, 0, len, 8, 2, 1, 2, 4, K_WHOLE);
    smp[3].length++;
    assert_int_equal(lt_store_put_step(st, &p, smp, &err), LT_ERR_INTERNAL);
    assert_non_null(strstr(err.what, "sample 3 has"));
    smp[3].length--;
    assert_int_equal(lt_store_put_step(st, &p, smp, &err), LT_OK); /* nothing was half-written */
    assert_int_equal(lt_store_commit(st, &err), LT_OK);
    lt_step_plan_free(&p);
    free(smp);
    free(cfg);
}

/* ------------------------------------------------------------------ validation */

/* A fresh valid plan for a mutation: seq1f1b with sample 0 (100 tokens) cut in two slices. */
static void valid_plan(lt_step_plan *p, plan_kind kind) {
    int64_t len[8];
    step_lengths(0, len);
    build_plan(p, 5, len, 8, 2, 1, 2, 4, kind);
}

static void expect_invalid(lt_step_plan *p, double cap, const char *part) {
    lt_error err;
    lt_status s = lt_plan_validate(p, cap, &err);
    if (s != LT_ERR_INPUT) fail_msg("status %d, want LT_ERR_INPUT (%s)", s, part);
    if (!strstr(err.what, part)) fail_msg("'%s' lacks '%s'", err.what, part);
    lt_step_plan_free(p);
}

/* The index in the slice table of pipeline r of sample `sample`'s k-th slice. */
static size_t slice_of(const lt_step_plan *p, size_t r, int sample, int k) {
    const lt_schedule *s = &p->ranks[r].sched;
    for (size_t i = 0; i < s->n_slices; i++)
        if (s->slices[i].sample == sample && k-- == 0) return i;
    fail_msg("no slice %d of sample %d", k, sample);
    return 0;
}

/* Remove op i of stage g of pipeline r (and its prediction). */
static void remove_op(lt_step_plan *p, size_t r, int g, size_t i) {
    lt_rank_plan *rp = &p->ranks[r];
    lt_stage_ops *so = &rp->sched.stage[g];
    size_t id = i;
    for (int k = 0; k < g; k++) id += rp->sched.stage[k].n;
    size_t total = lt_schedule_n_ops(&rp->sched);
    memmove(&so->ops[i], &so->ops[i + 1], (so->n - i - 1) * sizeof *so->ops);
    so->n--;
    memmove(&rp->ops[id], &rp->ops[id + 1], (total - id - 1) * sizeof *rp->ops);
}

static void test_validate_rules(void **state) {
    (void)state;
    lt_error err;
    lt_step_plan p;
    for (int k = 0; k < 3; k++) { /* every shape is valid */
        valid_plan(&p, (plan_kind)k);
        if (lt_plan_validate(&p, 64, &err) != LT_OK) fail_msg("kind %d: %s", k, err.what);
        lt_step_plan_free(&p);
    }
    /* sample 0 (100 tokens, pipeline 0) is slices [0, 50) and [50, 100) in the sliced plan */
    valid_plan(&p, K_SLICED);
    size_t a = slice_of(&p, 0, 0, 0), b = slice_of(&p, 0, 0, 1);
    assert_int_equal(p.ranks[0].sched.slices[a].end, 50);
    assert_int_equal(p.ranks[0].sched.slices[b].end, 100);
    lt_step_plan_free(&p);

    /* lengths whose sum overflows (fuzz_planstore): refused, and the loss denominator saturates */
    valid_plan(&p, K_SLICED);
    p.lengths[1] = INT64_MAX;
    assert_true(lt_plan_predicted_tokens(p.lengths, p.n_samples) == INT64_MAX);
    expect_invalid(&p, 64, "the lengths of samples 0..1 sum past 2^63 tokens (sample 1 has 9223372036854775807)");
    /* a token gap */
    valid_plan(&p, K_SLICED);
    p.ranks[0].sched.slices[slice_of(&p, 0, 0, 1)].end = 97;
    expect_invalid(&p, 64, "step 5: tokens [97, 100) of sample 0 are not covered in the forward pass");
    /* an overlap */
    valid_plan(&p, K_SLICED);
    p.ranks[0].sched.slices[slice_of(&p, 0, 0, 1)].begin = 45;
    expect_invalid(&p, 64, "tokens [45, 50) of sample 0 are covered twice in the forward pass");
    /* a sample's slices on another pipeline than the one sample_rank names */
    valid_plan(&p, K_SLICED);
    p.sample_rank[2] = 1;
    expect_invalid(&p, 64, "sample 2 has tokens [0, 4) in unit");
    valid_plan(&p, K_SLICED);
    p.sample_rank[2] = 1;
    expect_invalid(&p, 64, "but it is assigned to pipeline 1 (dp_rank 1)");
    /* slices out of token order */
    valid_plan(&p, K_SLICED);
    lt_slice *x = &p.ranks[0].sched.slices[slice_of(&p, 0, 0, 0)], *y = &p.ranks[0].sched.slices[slice_of(&p, 0, 0, 1)];
    x->begin = 50, x->end = 100, y->begin = 0, y->end = 50;
    expect_invalid(&p, 64,
                   "step 5, pipeline 0 (dp_rank 0): slices 0 and 1 of sample 0 overlap or are out of token order");
    /* a B before its own F on a stage: a dependency cycle */
    valid_plan(&p, K_WHOLE);
    {
        lt_stage_ops *so = &p.ranks[1].sched.stage[1];
        size_t f = 0, bb = 0;
        while (!(so->ops[f].kind == LT_OP_F && so->ops[f].unit == 0)) f++;
        while (!(so->ops[bb].kind == LT_OP_B && so->ops[bb].unit == 0)) bb++;
        lt_op t = so->ops[f];
        so->ops[f] = so->ops[bb];
        so->ops[bb] = t;
    }
    expect_invalid(&p, 64, "step 5, pipeline 1 (dp_rank 1): deadlock: B0@s1 waits for F0@s1");
    /* a stage's peak over the cap */
    valid_plan(&p, K_WHOLE);
    p.ranks[1].stage_peak_mem[0] = 70;
    p.peak_mem = 70;
    expect_invalid(&p, 64, "step 5, pipeline 1 (dp_rank 1): stage 0: predicted peak memory 70 bytes");
    valid_plan(&p, K_WHOLE);
    p.ranks[1].stage_peak_mem[0] = 70;
    p.peak_mem = 70;
    expect_invalid(&p, 64, "over the cap of 64 bytes (0.00 GiB) by 6 bytes");
    valid_plan(&p, K_WHOLE); /* no cap, no check */
    p.ranks[1].stage_peak_mem[0] = 70;
    p.peak_mem = 70;
    assert_int_equal(lt_plan_validate(&p, 0, &err), LT_OK);
    lt_step_plan_free(&p);
    /* predictions: NaN, negative, finish before start, after the step */
    valid_plan(&p, K_CHUNK);
    p.ranks[0].ops[3].start_s = NAN;
    expect_invalid(&p, 64, "stage 0, op 3");
    valid_plan(&p, K_CHUNK);
    p.ranks[0].ops[3].start_s = NAN;
    expect_invalid(&p, 64, "predicted start nan s");
    valid_plan(&p, K_CHUNK);
    p.ranks[1].stage_busy_s[1] = -1;
    expect_invalid(&p, 64, "pipeline 1 (dp_rank 1): stage 1: predicted busy time -1 s");
    valid_plan(&p, K_CHUNK);
    p.ranks[0].ops[1].finish_s = p.ranks[0].ops[1].start_s * 0.5; /* op 1 starts after 0 */
    expect_invalid(&p, 64, "finishes at");
    valid_plan(&p, K_CHUNK);
    p.time_s = p.ranks[0].time_s / 2;
    expect_invalid(&p, 64, "is over the step's");
    valid_plan(&p, K_CHUNK);
    p.ranks[0].ops[1].mem_bytes = -5;
    expect_invalid(&p, 64, "memory -5 bytes");
    /* a unit never backwarded (its B removed from the last stage) */
    valid_plan(&p, K_WHOLE);
    {
        lt_stage_ops *so = &p.ranks[0].sched.stage[1];
        size_t i = 0;
        while (!(so->ops[i].kind == LT_OP_B && so->ops[i].unit == 2)) i++;
        remove_op(&p, 0, 1, i);
    }
    expect_invalid(&p, 64, "step 5, pipeline 0 (dp_rank 0): unit 2 is never backwarded on layers [2, 4)");
    /* ... and one forwarded twice */
    valid_plan(&p, K_WHOLE);
    {
        lt_stage_ops *so = &p.ranks[0].sched.stage[0];
        lt_op dup = so->ops[0];
        lt_schedule_add_op(&p.ranks[0].sched, 0, dup);
    }
    expect_invalid(&p, 64, "unit 0 is forwarded 2 times on layers [0, 2)");
    /* a slice naming a sample of no step */
    valid_plan(&p, K_WHOLE);
    p.ranks[1].sched.slices[0].sample = 8;
    expect_invalid(&p, 64, "pipeline 1 (dp_rank 1): slice 0 names sample 8, the step has 8 samples");
}

/* lt_store_validate: a good file, then files corrupted by SQL UPDATEs. */
typedef struct progress_log {
    size_t calls, last_done, last_total;
} progress_log;

static void on_progress(void *ctx, size_t done, size_t total) {
    progress_log *l = ctx;
    l->calls++;
    l->last_done = done;
    l->last_total = total;
}

static void expect_corrupt(const char *good, const char *sql, const char *part) {
    char path[256];
    new_path(path, sizeof path, "corrupt");
    copy_path(good, path);
    sqlite3 *db = open_raw(path);
    exec_raw(db, sql);
    sqlite3_close(db);
    lt_store *st;
    lt_error err;
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    size_t checked = 99;
    lt_status s = lt_store_validate(st, NULL, NULL, &checked, &err);
    if (s != LT_ERR_INPUT) fail_msg("%s: status %d, want LT_ERR_INPUT", sql, s);
    if (!strstr(err.what, part)) fail_msg("%s: '%s' lacks '%s'", sql, err.what, part);
    lt_store_close(st);
}

static void test_store_validate(void **state) {
    (void)state;
    char good[256];
    new_path(good, sizeof good, "valid");
    write_file(good, 3, false);
    lt_store *st;
    lt_error err;
    assert_int_equal(lt_store_open(&st, good, &err), LT_OK);
    progress_log log = {0};
    size_t checked = 0;
    assert_int_equal(lt_store_validate(st, on_progress, &log, &checked, &err), LT_OK);
    assert_int_equal(checked, 3);
    assert_int_equal(log.calls, 1); /* every 100 steps and at the end */
    assert_int_equal(log.last_done, 3);
    assert_int_equal(log.last_total, 3);
    lt_store_close(st);

    /* step 1 (seq1f1b) holds sample idx 7 (sample_id 55) of 101 tokens as [0, 51) and [51, 101) */
    expect_corrupt(good,
                   "UPDATE units_slices SET tok_end = tok_end - 1 WHERE step = 1 AND idx = 7 AND tok_end = 101",
                   "step 1: table units_slices: sample idx 7 (sample_id 55) has 101 tokens, the forward pass covers "
                   "[0, 100)");
    expect_corrupt(good, "UPDATE units_slices SET tok_begin = 49 WHERE step = 1 AND idx = 7 AND tok_begin = 51",
                   "step 1: table units_slices: tokens [49, 51) of sample idx 7 (sample_id 55) are covered twice in "
                   "the forward pass");
    expect_corrupt(good, "UPDATE steps SET n_tokens = n_tokens + 1 WHERE step = 2",
                   "step 2: step_summary says n_tokens");
    expect_corrupt(good, "DELETE FROM step_samples WHERE step = 0 AND idx = 7",
                   "step 0: step_summary says n_samples 8, table step_samples has 7 rows");
    /* a length whose sum with the others overflows (found by fuzz_planstore) */
    expect_corrupt(good, "UPDATE step_samples SET length = 9223372036854775807 WHERE step = 0 AND idx = 2",
                   "step 0: table step_samples: row idx 2 has length 9223372036854775807, the step's lengths sum "
                   "past 2^63");
    expect_corrupt(good, "UPDATE step_samples SET dp_rank = 1 - dp_rank WHERE step = 2 AND idx = 3",
                   "which step_samples puts on dp_rank");
    /* only the F pass: the B pass misses everything */
    expect_corrupt(good, "UPDATE units_slices SET passes = 'F' WHERE step = 0",
                   "step 0: table units_slices: sample idx 0 (sample_id 40) has 100 tokens, the backward pass covers");
    /* one pipeline with both 'FB' rows and 'F'/'B' rows: the raw rows cover both passes, the
     * reader refuses the mix (its last unit made an asymmetric unit of each pass) */
    expect_corrupt(good,
                   "UPDATE units_slices SET passes = 'F', unit = 0, slice = seq WHERE step = 1 AND dp_rank = 0 AND "
                   "unit = (SELECT max(unit) FROM units_slices WHERE step = 1 AND dp_rank = 0); "
                   "INSERT INTO units_slices SELECT run_id, step, dp_rank, 'B', unit, seq, idx, tok_begin, tok_end, cp, "
                   "slice FROM units_slices WHERE step = 1 AND dp_rank = 0 AND passes = 'F';",
                   "step 1: table units_slices: dp_rank 0 has both 'FB' rows and 'F'/'B' rows");
    /* rows that break the plan: a stage's peak over the run's cap, an op list with a hole */
    expect_corrupt(good, "UPDATE stages SET peak_mem_bytes = 100 WHERE step = 2 AND dp_rank = 1 AND stage = 0",
                   "step 2, pipeline 1 (dp_rank 1): stage 0: predicted peak memory 100 bytes");
    expect_corrupt(good,
                   "UPDATE stages SET ops = json_remove(ops, '$[0]'), n_ops = n_ops - 1 WHERE step = 1 AND "
                   "dp_rank = 0 AND stage = 1",
                   "step 1, pipeline 0 (dp_rank 0): unit 0 is never forwarded on layers [2, 4)");
    expect_corrupt(good, "UPDATE stages SET ops = json_replace(ops, '$[0][1]', 99) WHERE step = 2 AND dp_rank = 0 AND "
                         "stage = 0",
                   "step 2: table stages: dp_rank 0 stage 0: ops: op 0 runs unit 99, the pipeline has");
    expect_corrupt(good, "UPDATE stages SET ops = json_replace(ops, '$[0][3]', -1000000) WHERE step = 0 AND "
                         "dp_rank = 1 AND stage = 0",
                   "step 0, pipeline 1 (dp_rank 1): stage 0, op 0 (FK0): predicted start -0.001 s");
    /* stages rows that do not match their op lists or the run */
    expect_corrupt(good, "UPDATE stages SET n_ops = n_ops + 1 WHERE step = 1 AND dp_rank = 1 AND stage = 1",
                   "step 1: table stages: dp_rank 1 stage 1: ops: n_ops says ");
    expect_corrupt(good, "UPDATE stages SET layer_end = 3 WHERE step = 0 AND dp_rank = 0 AND stage = 1",
                   "step 0: table stages: dp_rank 0 stage 1 has layers [2, 3), stage 1 of 2 over 4 layers is [2, 4)");
    /* malformed op lists: each named by step, dp_rank, stage, op and byte */
    expect_corrupt(good, "UPDATE stages SET ops = 'F0 B0' WHERE step = 2 AND dp_rank = 1 AND stage = 1",
                   "step 2: table stages: dp_rank 1 stage 1: ops: malformed at byte 0 (op 0): expected '['");
    expect_corrupt(good, "UPDATE stages SET ops = '[[0,0,0,0,1,1],[2,0,0,1,2,1]' WHERE step = 2",
                   "step 2: table stages: dp_rank 0 stage 0: ops: malformed at byte 28 (op 2): expected ',' or ']'");
    expect_corrupt(good, "UPDATE stages SET ops = ops || 'x' WHERE step = 1",
                   "expected the end of the text after the array");
    expect_corrupt(good, "UPDATE stages SET ops = '[[0,0,0,0,1,1],[2,0,0,1,2,]]' WHERE step = 1",
                   "step 1: table stages: dp_rank 0 stage 0: ops: malformed at byte 26 (op 1): expected a number");
    expect_corrupt(good, "UPDATE stages SET ops = json_remove(ops, '$[2][5]') WHERE step = 1",
                   "ops: op 2 has 5 values (6, or 9 for an op with its own layers)");
    expect_corrupt(good,
                   "UPDATE stages SET ops = json_replace(ops, '$[1]', json('[0,0,0,0,1,1,0,2,0,9]')) WHERE step = 1",
                   "ops: op 1 has more than 9 values");
    expect_corrupt(good, "UPDATE stages SET ops = json_replace(ops, '$[1][1]', 1.5) WHERE step = 1",
                   "ops: op 1: unit '1.5' is not an integer of at most 18 digits");
    expect_corrupt(good, "UPDATE stages SET ops = json_replace(ops, '$[1][3]', '7') WHERE step = 1",
                   "ops: malformed at byte ");
    expect_corrupt(good, "UPDATE stages SET ops = replace(ops, '[1,', '[01,') WHERE step = 0",
                   "expected ',' or ']'");
    expect_corrupt(good, "UPDATE stages SET ops = json_replace(ops, '$[0][0]', 7) WHERE step = 0",
                   "ops: op 0: kind 7 (0 F, 1 FK or 2 B)");
    expect_corrupt(good, "UPDATE stages SET ops = '[[0,0,0,0,1,1e999]]' WHERE step = 0",
                   "ops: op 0: mem_bytes 1e999 is out of range");
    expect_corrupt(good,
                   "UPDATE stages SET ops = json_replace(ops, '$[0]', json('[0,0,0,0,1,1,0,1,5]')) WHERE step = 0",
                   "ops: op 0: part 5 (0 all, 1 pre, 2 attn or 3 post)");
    expect_corrupt(good, "UPDATE stages SET ops = json_replace(ops, '$[0][2]', 70000) WHERE step = 0",
                   "ops: op 0: recompute_layers 70000 out of range");
}

/* ------------------------------------------------------------------ printing and the commands */

static void test_print(void **state) {
    (void)state;
    lt_step_plan p;
    valid_plan(&p, K_CHUNK);
    int64_t len[8];
    step_lengths(0, len);
    lt_sample *smp = make_samples(5, len, 8);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    lt_plan_print(f, &p, smp, 60);
    fclose(f);
    assert_non_null(strstr(buf, "step 5: chunkflow, predicted "));
    assert_non_null(strstr(buf, "8 samples, 351 tokens, 2 pipelines x 2 stages"));
    assert_non_null(strstr(buf, "params: chunk_size=48 k=1  solver: none"));
    assert_non_null(strstr(buf, "task=1,doc=106,tok=1024")); /* sample 1's source */
    assert_non_null(strstr(buf, "pipeline 1 (dp_rank 1, cp 1)"));
    assert_non_null(strstr(buf, "  unit 0 (48 tokens): 0[0:48)"));
    assert_non_null(strstr(buf, "timeline (ms):"));
    assert_non_null(strstr(buf, "\ns1     "));
    assert_non_null(strstr(buf, "FK: unit then '~'"));
    free(buf);
    /* without samples */
    f = open_memstream(&buf, &n);
    lt_plan_print(f, &p, NULL, 10);
    fclose(f);
    assert_non_null(strstr(buf, "samples:"));
    free(buf);
    /* a damaged plan's extreme values print without overflow (fuzz_planstore; UBSan checks) */
    p.lengths[0] = INT64_MAX;
    p.ranks[0].sched.slices[0].begin = INT64_MIN;
    f = open_memstream(&buf, &n);
    lt_plan_print(f, &p, NULL, 10);
    fclose(f);
    assert_non_null(strstr(buf, "8 samples, 9223372036854775807 tokens"));
    assert_non_null(strstr(buf, "  unit 0 (9223372036854775807 tokens)"));
    free(buf);
    free(smp);
    lt_step_plan_free(&p);
}

/* Run `planner ARGS...` in this process with stdout and stderr captured (malloc'd). */
static int run_planner(char **out, char **errtext, ...) {
    char *argv[16];
    int argc = 0;
    argv[argc++] = "planner";
    va_list ap;
    va_start(ap, errtext);
    char *a;
    while ((a = va_arg(ap, char *)) && argc < 15) argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    char po[256], pe[256];
    snprintf(po, sizeof po, "%s/stdout.txt", tmp_root);
    snprintf(pe, sizeof pe, "%s/stderr.txt", tmp_root);
    fflush(stdout);
    fflush(stderr);
    int save_out = dup(1), save_err = dup(2);
    int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fo, 1);
    dup2(fe, 2);
    close(fo);
    close(fe);
    int rc = lt_cli_main(&planner_program, argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(save_out, 1);
    dup2(save_err, 2);
    close(save_out);
    close(save_err);
    lt_log_set_level(LT_LOG_INFO);
    *out = read_all(po, NULL);
    *errtext = read_all(pe, NULL);
    return rc;
}

static void test_commands(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "cmd");
    write_file(path, 3, false);
    char *out, *err;

    int rc = run_planner(&out, &err, "show", "--db", path, "--step", "1", "--width", "40", NULL);
    if (rc != 0) fail_msg("show: %d: %s", rc, err);
    assert_non_null(strstr(out, "step 1: seq1f1b, predicted "));
    assert_non_null(strstr(out, "sample_id"));
    assert_non_null(strstr(out, "task=0,doc=101,tok=0")); /* sample idx 0 of step 1 */
    assert_non_null(strstr(out, "pipeline 0 (dp_rank 0, cp 1)"));
    assert_non_null(strstr(out, "\ns0     "));
    free(out);
    free(err);

    rc = run_planner(&out, &err, "show", "--db", path, "--step", "7", NULL);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "planner: error: step 7 is not stored ("));
    assert_non_null(strstr(err, "hint: the file holds steps 0..2"));
    free(out);
    free(err);

    rc = run_planner(&out, &err, "show", "--db", path, "--step", "x1", NULL);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "planner: error: --step 'x1': want a step number"));
    free(out);
    free(err);
    rc = run_planner(&out, &err, "show", "--db", path, NULL);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "which step?"));
    free(out);
    free(err);
    rc = run_planner(&out, &err, "show", "--step", "1", NULL);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "give --db FILE"));
    free(out);
    free(err);
    rc = run_planner(&out, &err, "show", "--db", path, "--step", "1", "--width", "3", NULL);
    assert_int_equal(rc, 2);
    free(out);
    free(err);
    rc = run_planner(&out, &err, "show", "--db", path, "--step", "1", "--bogus", NULL);
    assert_int_equal(rc, 2);
    free(out);
    free(err);

    char missing[256];
    snprintf(missing, sizeof missing, "%s/missing.db", tmp_root);
    rc = run_planner(&out, &err, "show", "--db", missing, "--step", "0", NULL);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "planner: error: cannot open the plan database: No such file or directory"));
    assert_non_null(strstr(err, missing));
    free(out);
    free(err);

    char foreign[256];
    new_path(foreign, sizeof foreign, "foreign-cmd");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(foreign, &db), SQLITE_OK);
    exec_raw(db, "PRAGMA application_id = 7; CREATE TABLE t (x);");
    sqlite3_close(db);
    rc = run_planner(&out, &err, "show", "--db", foreign, "--step", "0", NULL);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "not a longtail plan database"));
    free(out);
    free(err);

    /* validate: progress on stderr, "N steps valid" last on stdout */
    rc = run_planner(&out, &err, "validate", "--db", path, NULL);
    if (rc != 0) fail_msg("validate: %d: %s", rc, err);
    assert_string_equal(out, "3 steps valid\n");
    assert_non_null(strstr(err, "validate"));
    free(out);
    free(err);
    rc = run_planner(&out, &err, "validate", "--db", path, "--quiet", NULL);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "3 steps valid\n");
    assert_string_equal(err, "");
    free(out);
    free(err);

    char bad[256];
    new_path(bad, sizeof bad, "bad-cmd");
    copy_path(path, bad);
    db = open_raw(bad);
    exec_raw(db, "UPDATE steps SET n_samples = 9 WHERE step = 1");
    sqlite3_close(db);
    rc = run_planner(&out, &err, "validate", "--db", bad, "--quiet", NULL);
    assert_int_equal(rc, 1);
    assert_string_equal(out, "");
    assert_non_null(strstr(err, "planner: error: step 1: step_summary says n_samples 9"));
    assert_non_null(strstr(err, "hint: 1 step before it is valid"));
    free(out);
    free(err);
    rc = run_planner(&out, &err, "validate", NULL);
    assert_int_equal(rc, 2);
    free(out);
    free(err);
    rc = run_planner(&out, &err, "validate", "--db", missing, NULL);
    assert_int_equal(rc, 1);
    free(out);
    free(err);
}

/* A malformed op list: lt_store_get_step and `planner validate` name the step, dp_rank,
 * stage, op and byte, with a hint; nothing of the step is returned. */
static void test_malformed_ops(void **state) {
    (void)state;
    char good[256], bad[256];
    new_path(good, sizeof good, "ops-good");
    new_path(bad, sizeof bad, "ops-bad");
    write_file(good, 3, false);
    copy_path(good, bad);
    sqlite3 *db = open_raw(bad);
    /* the op list of step 1, dp_rank 1, stage 0 cut short inside its last op */
    exec_raw(db, "UPDATE stages SET ops = substr(ops, 1, length(ops) - 2) WHERE step = 1 AND dp_rank = 1 AND "
                 "stage = 0");
    int64_t len = query_int(db, "SELECT length(ops) FROM stages WHERE step = 1 AND dp_rank = 1 AND stage = 0");
    int64_t n = query_int(db, "SELECT n_ops FROM stages WHERE step = 1 AND dp_rank = 1 AND stage = 0");
    sqlite3_close(db);
    char want[256];
    snprintf(want, sizeof want,
             "step 1: table stages: dp_rank 1 stage 0: ops: malformed at byte %" PRId64 " (op %" PRId64
             "): expected ',' or ']'",
             len, n - 1);
    lt_store *st;
    lt_error err;
    assert_int_equal(lt_store_open(&st, bad, &err), LT_OK);
    lt_step_plan got;
    lt_step_plan_init(&got);
    lt_sample *smp = (lt_sample *)&got;
    assert_int_equal(lt_store_get_step(st, 1, &got, &smp, &err), LT_ERR_INPUT);
    assert_string_equal(err.what, want);
    assert_string_equal(err.where, bad);
    assert_non_null(strstr(err.hint, "rebuild it"));
    assert_int_equal(got.n_ranks, 0);
    assert_null(smp);
    assert_int_equal(lt_store_get_step(st, 0, &got, NULL, &err), LT_OK); /* the other steps still read */
    lt_step_plan_free(&got);
    lt_store_close(st);

    char *out, *errtext;
    int rc = run_planner(&out, &errtext, "validate", "--db", bad, "--quiet", NULL);
    assert_int_equal(rc, 1);
    assert_string_equal(out, "");
    char line[600];
    snprintf(line, sizeof line, "planner: error: %s (%s)", want, bad);
    if (!strstr(errtext, line)) fail_msg("'%s' lacks '%s'", errtext, line);
    assert_non_null(strstr(errtext, "hint: "));
    free(out);
    free(errtext);
    rc = run_planner(&out, &errtext, "show", "--db", bad, "--step", "1", NULL);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(errtext, "dp_rank 1 stage 0: ops: malformed at byte"));
    free(out);
    free(errtext);
}

/* A damaged steps.n_samples is an error about the rows, not an allocation of that many
 * samples (2e9 of them would exit the program on the allocation failure). */
static void test_damaged_sample_count(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "count");
    write_file(path, 2, false);
    sqlite3 *db = open_raw(path);
    exec_raw(db, "UPDATE steps SET n_samples = 2000000000 WHERE step = 1");
    sqlite3_close(db);
    lt_store *st;
    lt_error err;
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    lt_step_plan got;
    lt_step_plan_init(&got);
    lt_sample *smp;
    assert_int_equal(lt_store_get_step(st, 1, &got, &smp, &err), LT_ERR_INPUT);
    assert_string_equal(err.what, "step 1: table step_samples: 8 rows, table steps says n_samples 2000000000");
    assert_null(smp);
    lt_step_plan_free(&got);
    lt_store_close(st);
}

/* ------------------------------------------------------------------ asymmetric schedules, DP-Merge */

/* An asymmetric plan with a DP-Merge group comes back field by field: both partitions with
 * each unit's cp (0 read back as 1), the B ops naming backward units, the merges, the
 * solver status and the runner-up; its raw rows pass lt_store_check_rows. (None of this
 * needs the simulator; test_asym_plan_valid does.) */
static void test_asym_round_trip(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "asym");
    write_file_asym(path, 2); /* steps 0, 1 symmetric, step 2 asymmetric */
    lt_step_plan want, got;
    build_asym_plan(&want, 2);
    lt_step_plan_init(&got);
    lt_store *st;
    lt_error err;
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    lt_sample *gs;
    if (lt_store_get_step(st, 2, &got, &gs, &err) != LT_OK) fail_msg("get: %s", err.what);
    assert_plans_equal(&want, &got);
    /* the parts assert_plans_equal normalises or that matter most, spelled out */
    assert_int_equal(got.strategy, LT_STRATEGY_SLIMPACK);
    assert_string_equal(got.solver_status, "timeout");
    assert_int_equal(got.runner_up, LT_STRATEGY_CHUNKFLOW);
    assert_close(got.runner_up_time_s, want.runner_up_time_s);
    assert_int_equal(got.n_merges, 1);
    assert_int_equal(got.merges[0].sample, 0);
    assert_int_equal(got.merges[0].first_rank, 0);
    assert_int_equal(got.merges[0].cp, 2);
    assert_int_equal(got.merges[0].reason, LT_MERGE_MEMORY);
    assert_int_equal(got.sample_rank[0], 0);
    for (size_t r = 0; r < 3; r++) {
        const lt_schedule *s = &got.ranks[r].sched;
        assert_true(s->asym);
        for (size_t u = 0; u < s->n_units; u++)
            assert_int_equal(s->units[u].cp, asym_fwd[r][u].cp == 2 ? 2 : 1); /* 0 comes back as 1 */
        for (size_t u = 0; u < s->n_bunits; u++)
            assert_int_equal(s->bunits[u].cp, asym_bwd[r][asym_border[r][u]].cp == 2 ? 2 : 1);
        /* the B ops name backward units (the last op of each stage: the last backward unit) */
        for (int g = 0; g < 2; g++) {
            const lt_op *last = &s->stage[g].ops[s->stage[g].n - 1];
            assert_int_equal(last->kind, LT_OP_B);
            assert_int_equal(last->unit, s->n_bunits - 1);
            assert_true(lt_schedule_op_unit(s, last) == &s->bunits[last->unit]);
        }
    }
    /* the bslice table comes back in its order, not in bunit order */
    assert_int_equal(got.ranks[0].sched.n_bslices, 5);
    assert_int_equal(got.ranks[0].sched.bslices[1].begin, 70);
    assert_int_equal(got.ranks[0].sched.bunits[0].first_slice, 1);
    assert_int_equal(got.ranks[0].sched.bunits[1].first_slice, 0);
    assert_int_equal(got.ranks[0].sched.bunits[2].first_slice, 3);
    assert_int_equal(got.ranks[0].sched.bunits[3].first_slice, 2);
    assert_int_equal(got.ranks[0].sched.slices[1].begin, 50);
    for (size_t i = 0; i < ASYM_SAMPLES; i++) assert_int_equal(gs[i].id, 40 + ASYM_SAMPLES * 2 + i);
    free(gs);
    if (lt_store_check_rows(st, 2, &err) != LT_OK) fail_msg("raw rows: %s", err.what);
    /* the symmetric steps of the same file are unchanged: no merges, no backward partition */
    assert_int_equal(lt_store_get_step(st, 1, &got, NULL, &err), LT_OK);
    assert_int_equal(got.n_merges, 0);
    assert_false(got.ranks[0].sched.asym);
    assert_int_equal(got.ranks[0].sched.units[0].cp, 1);
    lt_store_close(st);
    lt_step_plan_free(&got);
    lt_step_plan_free(&want);
}

/* The views and tables of an asymmetric DP-Merge step: units_slices 'F' rows from the
 * forward partition and 'B' rows from the backward one, plan_slices the same with cp,
 * samples.merge_cp, dp_merges, step_summary's solver status and runner-up. */
static void test_asym_views(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "asym-views");
    write_file_asym(path, 2);
    sqlite3 *db = open_raw(path);
    assert_int_equal(query_int(db, "SELECT count(*) FROM units_slices WHERE step = 2 AND passes = 'FB'"), 0);
    assert_int_equal(query_int(db, "SELECT count(*) FROM units_slices WHERE step = 2 AND passes = 'F'"), 11);
    assert_int_equal(query_int(db, "SELECT count(*) FROM units_slices WHERE step = 2 AND passes = 'B'"), 13);
    assert_int_equal(query_int(db, "SELECT count(*) FROM units_slices WHERE step < 2 AND (passes != 'FB' OR cp != 1)"),
                     0);
    /* plan_slices, per pass, is the partition of that pass, row for row */
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT dp_rank, unit, seq, sample_id, tok_begin, tok_end, idx, cp FROM "
                                        "plan_slices WHERE step = 2 AND pass = ?1 ORDER BY dp_rank, unit, seq",
                                        -1, &q, NULL),
                     SQLITE_OK);
    for (int pass = 0; pass < 2; pass++) {
        sqlite3_reset(q);
        sqlite3_bind_text(q, 1, pass == 0 ? "F" : "B", -1, SQLITE_STATIC);
        for (int r = 0; r < 3; r++) {
            for (int u = 0; u < 5 && asym_fwd[r][u].n; u++) { /* as many backward units as forward */
                const spec_unit *sp = pass == 0 ? &asym_fwd[r][u] : &asym_bwd[r][asym_border[r][u]];
                for (int k = 0; k < sp->n; k++) {
                    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
                    assert_int_equal(sqlite3_column_int(q, 0), r);
                    assert_int_equal(sqlite3_column_int(q, 1), u);
                    assert_int_equal(sqlite3_column_int(q, 2), k);
                    assert_int_equal(sqlite3_column_int64(q, 3), 40 + ASYM_SAMPLES * 2 + sp->sl[k].sample);
                    assert_int_equal(sqlite3_column_int64(q, 4), sp->sl[k].begin);
                    assert_int_equal(sqlite3_column_int64(q, 5), sp->sl[k].end);
                    assert_int_equal(sqlite3_column_int64(q, 6), sp->sl[k].sample);
                    assert_int_equal(sqlite3_column_int64(q, 7), sp->cp == 2 ? 2 : 1);
                }
            }
        }
        assert_int_equal(sqlite3_step(q), SQLITE_DONE);
    }
    sqlite3_finalize(q);
    /* the group: one dp_merges row, the sampler's id, the first DP rank; samples.merge_cp */
    assert_int_equal(query_int(db, "SELECT count(*) FROM dp_merges"), 1);
    assert_int_equal(query_int(db, "SELECT count(*) FROM dp_merges WHERE run_id = 1 AND step = 2 AND idx = 0 AND "
                                   "sample_id = 54 AND dp_rank = 0 AND cp = 2 AND reason = 'memory'"),
                     1);
    assert_int_equal(query_int(db, "SELECT merge_cp FROM samples WHERE step = 2 AND sample_id = 54"), 2);
    assert_int_equal(query_int(db, "SELECT dp_rank FROM samples WHERE step = 2 AND sample_id = 54"), 0);
    assert_int_equal(query_int(db, "SELECT count(*) FROM samples WHERE merge_cp != 1"), 1);
    assert_int_equal(query_int(db, "SELECT count(*) FROM samples WHERE merge_cp IS NULL"), 0);
    /* the step's solver status and runner-up */
    assert_int_equal(query_int(db, "SELECT count(*) FROM step_summary WHERE step = 2 AND solver_status = 'timeout' "
                                   "AND runner_up = 'chunkflow' AND runner_up_ms > predicted_ms"),
                     1);
    assert_int_equal(query_int(db, "SELECT count(*) FROM step_summary WHERE solver_status IN ('timeout', "
                                   "'infeasible')"),
                     1);
    /* plan_ops: a B op's unit is a backward unit (B units 0..3 on dp_rank 0) */
    assert_int_equal(query_int(db, "SELECT count(*) FROM plan_ops WHERE step = 2 AND dp_rank = 0 AND kind = 'B'"), 8);
    assert_int_equal(query_int(db, "SELECT max(unit) FROM plan_ops WHERE step = 2 AND dp_rank = 2 AND kind = 'B'"),
                     1);
    /* the schema refuses what cannot be: a unit cp below 1, a group of one, an unknown status */
    char *msg = NULL;
    assert_int_not_equal(sqlite3_exec(db, "UPDATE units_slices SET cp = 0 WHERE step = 2", NULL, NULL, &msg),
                         SQLITE_OK);
    sqlite3_free(msg);
    assert_int_not_equal(sqlite3_exec(db, "UPDATE dp_merges SET cp = 1", NULL, NULL, &msg), SQLITE_OK);
    sqlite3_free(msg);
    assert_int_not_equal(sqlite3_exec(db, "UPDATE dp_merges SET reason = 'size'", NULL, NULL, &msg), SQLITE_OK);
    sqlite3_free(msg);
    assert_int_not_equal(sqlite3_exec(db, "UPDATE dp_merges SET reason = NULL", NULL, NULL, &msg), SQLITE_OK);
    sqlite3_free(msg);
    assert_int_not_equal(sqlite3_exec(db, "UPDATE steps SET solver_status = 'maybe'", NULL, NULL, &msg), SQLITE_OK);
    sqlite3_free(msg);
    /* samples (now joined with dp_merges) still searches the keys for a filter on step (a
     * query of dp_merges itself may scan it here: one row is cheaper to scan) */
    static const char *const by_step[] = {"SELECT * FROM samples WHERE step = 2",
                                          "SELECT * FROM plan_slices WHERE step = 2"};
    for (size_t i = 0; i < 2; i++) {
        char sql[160];
        snprintf(sql, sizeof sql, "EXPLAIN QUERY PLAN %s", by_step[i]);
        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
        while (sqlite3_step(q) == SQLITE_ROW) {
            const char *plan = (const char *)sqlite3_column_text(q, 3);
            if (strncmp(plan, "SCAN ", 5) == 0) fail_msg("%s: %s", by_step[i], plan);
        }
        sqlite3_finalize(q);
    }
    sqlite3_close(db);
}

/* The asymmetric DP-Merge plan is valid, in memory and read back from the file. This is
 * the one asymmetric test that needs the simulator and lt_schedule_check to know
 * asymmetric schedules and unit cp (plans/schedule/sim.c, plans/schedule/schedule.c). */
static void test_asym_plan_valid(void **state) {
    (void)state;
    lt_step_plan p;
    lt_error err;
    build_asym_plan(&p, 5);
    if (lt_plan_validate(&p, 64, &err) != LT_OK) fail_msg("%s", err.what);
    lt_step_plan_free(&p);
    char path[256];
    new_path(path, sizeof path, "asym-valid");
    write_file_asym(path, 3);
    lt_store *st;
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    size_t checked = 0;
    if (lt_store_validate(st, NULL, NULL, &checked, &err) != LT_OK) fail_msg("%s", err.what);
    assert_int_equal(checked, 4);
    lt_store_close(st);
}

/* The message of a mutated asymmetric plan (step 5); frees it. */
static void asym_invalid(lt_step_plan *p, const char *part) { expect_invalid(p, 64, part); }

/* One mutation per rule of the asymmetric partition and of DP-Merge; each is caught by
 * the validator's own checks, before lt_schedule_check and the simulator. */
static void test_asym_validate_rules(void **state) {
    (void)state;
    lt_step_plan p;
    /* the groups: cp, range, order, uniqueness, sample range, sample_rank */
    build_asym_plan(&p, 5);
    p.merges[0].cp = 1;
    asym_invalid(&p, "step 5: sample 0: a DP-Merge group of cp 1 (2 or more pipelines)");
    build_asym_plan(&p, 5);
    p.merges[0].cp = 4;
    asym_invalid(&p, "step 5: sample 0: its DP-Merge group, pipelines 0 .. 3 (cp 4), is not within the step's 3 "
                     "pipelines");
    build_asym_plan(&p, 5);
    p.merges = realloc(p.merges, 2 * sizeof *p.merges);
    p.merges[1] = p.merges[0];
    p.n_merges = 2;
    asym_invalid(&p, "step 5: sample 0 has two DP-Merge groups");
    build_asym_plan(&p, 5);
    p.merges = realloc(p.merges, 2 * sizeof *p.merges);
    p.merges[1] = p.merges[0];
    p.merges[0] = (lt_dp_merge){.sample = 3, .first_rank = 1, .cp = 2};
    p.n_merges = 2;
    asym_invalid(&p, "step 5: DP-Merge groups are not in increasing sample order (sample 0 after 3)");
    build_asym_plan(&p, 5);
    p.merges[0].sample = 9;
    asym_invalid(&p, "step 5: DP-Merge group 0 names sample 9, the step has 7 samples");
    build_asym_plan(&p, 5);
    p.sample_rank[0] = 1;
    asym_invalid(&p, "step 5: sample 0 is DP-merged from pipeline 0 (dp_rank 0), but it is assigned to pipeline 1 "
                     "(dp_rank 1)");
    /* a member that does not cover the sample */
    build_asym_plan(&p, 5);
    p.ranks[1].sched.slices[1].end = 90;
    asym_invalid(&p, "step 5: tokens [90, 100) of sample 0 are not covered in the forward pass on pipeline 1 "
                     "(dp_rank 1)");
    /* a member's unit of another cp (forward and backward) */
    build_asym_plan(&p, 5);
    p.ranks[1].sched.units[0].cp = 1;
    asym_invalid(&p, "step 5: sample 0 is DP-merged with cp 2, but unit 0 of pipeline 1 (dp_rank 1) holding it has "
                     "cp 1");
    build_asym_plan(&p, 5);
    p.ranks[0].sched.bunits[1].cp = 0;
    asym_invalid(&p, "step 5: sample 0 is DP-merged with cp 2, but backward unit 1 of pipeline 0 (dp_rank 0) "
                     "holding it has cp 1");
    /* a pipeline outside the group holds the merged sample */
    build_asym_plan(&p, 5);
    p.merges[0].first_rank = 1;
    p.sample_rank[0] = 1;
    asym_invalid(&p, "step 5: sample 0 has tokens [0, 50) in unit 0 of pipeline 0 (dp_rank 0), outside its DP-Merge "
                     "group (pipelines 1 .. 2)");
    /* the members' slices differ (forward, then backward) */
    build_asym_plan(&p, 5);
    p.ranks[1].sched.slices[0].end = 40;
    p.ranks[1].sched.slices[1].begin = 40;
    asym_invalid(&p, "step 5: DP-merged sample 0 has other slices on pipeline 1 (dp_rank 1) than on pipeline 0 "
                     "(dp_rank 0) in the forward pass");
    build_asym_plan(&p, 5);
    p.ranks[1].sched.bslices[0].end = 60;
    p.ranks[1].sched.bslices[1].begin = 60;
    asym_invalid(&p, "other slices on pipeline 1 (dp_rank 1) than on pipeline 0 (dp_rank 0) in the backward pass");
    /* a sample not merged in a unit of cp > 1 */
    build_asym_plan(&p, 5);
    p.ranks[2].sched.units[1].cp = 2;
    asym_invalid(&p, "step 5: sample 6 is not DP-merged, but unit 1 of pipeline 2 (dp_rank 2) holding it has cp 2");
    /* the backward pass is covered by the backward partition (bslices), not the forward one */
    build_asym_plan(&p, 5);
    p.ranks[2].sched.bslices[2].end = 70;
    asym_invalid(&p, "step 5: tokens [70, 80) of sample 6 are not covered in the backward pass");
    /* every backward unit is backwarded once on every stage */
    build_asym_plan(&p, 5);
    remove_op(&p, 0, 1, 7); /* B of backward unit 3, stage 1 */
    asym_invalid(&p, "step 5, pipeline 0 (dp_rank 0): backward unit 3 is never backwarded on layers [2, 4)");
    build_asym_plan(&p, 5);
    lt_schedule_add_stage_op(&p.ranks[2].sched, 0, LT_OP_B, 0, 0);
    asym_invalid(&p, "step 5, pipeline 2 (dp_rank 2): backward unit 0 is backwarded 2 times on layers [0, 2)");
    build_asym_plan(&p, 5);
    remove_op(&p, 2, 0, 0); /* F of forward unit 0, stage 0 */
    asym_invalid(&p, "step 5, pipeline 2 (dp_rank 2): unit 0 is never forwarded on layers [0, 2)");
    /* shapes of the backward partition */
    build_asym_plan(&p, 5);
    p.ranks[0].sched.stage[0].ops[4].unit = 4;
    asym_invalid(&p, "step 5, pipeline 0 (dp_rank 0): stage 0, op 4 runs backward unit 4 of 4");
    build_asym_plan(&p, 5);
    p.ranks[0].sched.bunits[2].n_slices = 3;
    asym_invalid(&p, "step 5, pipeline 0 (dp_rank 0): backward unit 2 holds bslices [3, 6) of 5");
    build_asym_plan(&p, 5);
    p.ranks[0].sched.bslices[0].sample = 7;
    asym_invalid(&p, "step 5, pipeline 0 (dp_rank 0): bslice 0 names sample 7, the step has 7 samples");
    /* the solver status is one of five */
    build_asym_plan(&p, 5);
    snprintf(p.solver_status, sizeof p.solver_status, "bogus");
    asym_invalid(&p, "step 5: solver status 'bogus' (none, optimal, feasible, timeout or infeasible)");
}

/* Raw rows of the new column and table, corrupted behind the store's back: each named by
 * lt_store_validate (the file's one step is the asymmetric one, so every fault is found
 * before the step is simulated), or by the reader. */
static void test_asym_corrupt_rows(void **state) {
    (void)state;
    char good[256];
    new_path(good, sizeof good, "asym-good");
    write_file_asym(good, 0);
    /* units_slices.cp against the groups */
    expect_corrupt(good, "UPDATE units_slices SET cp = 1 WHERE dp_rank = 1 AND passes = 'B' AND unit = 0",
                   "step 0: table units_slices: row (dp_rank 1, passes B, unit 0, seq 0) has cp 1, but sample idx 0 "
                   "(sample_id 40) is DP-merged with cp 2");
    expect_corrupt(good, "UPDATE units_slices SET cp = 2 WHERE dp_rank = 2 AND passes = 'F' AND unit = 1",
                   "step 0: table units_slices: row (dp_rank 2, passes F, unit 1, seq 0) has cp 2, but sample idx 6 "
                   "(sample_id 46) is not DP-merged (no dp_merges row: cp 1)");
    /* the group gone: the second member's rows are on a pipeline of no group */
    expect_corrupt(good, "DELETE FROM dp_merges; UPDATE units_slices SET cp = 1",
                   "step 0: table units_slices: row (dp_rank 1, passes B, unit 0, seq 0) holds tokens of sample idx 0, "
                   "which step_samples puts on dp_rank 0");
    /* dp_merges rows that do not match step_samples or the pipelines */
    expect_corrupt(good, "UPDATE dp_merges SET sample_id = 99",
                   "step 0: table dp_merges: sample idx 0 has sample_id 99, step_samples says 40");
    expect_corrupt(good, "UPDATE dp_merges SET dp_rank = 1",
                   "step 0: table dp_merges: sample idx 0 (sample_id 40) is merged from dp_rank 1, step_samples puts "
                   "it on dp_rank 0");
    expect_corrupt(good, "UPDATE dp_merges SET cp = 4",
                   "step 0: table dp_merges: the group of sample idx 0 (sample_id 40), 4 pipelines from dp_rank 0, is "
                   "not within the step's pipelines (3 from there)");
    expect_corrupt(good, "UPDATE dp_merges SET idx = 50", "step 0: table dp_merges: row sample idx 50, the step has 7 "
                                                          "samples");
    /* a reason the CHECK would refuse, written past it */
    expect_corrupt(good, "PRAGMA ignore_check_constraints = ON; UPDATE dp_merges SET reason = 'size'",
                   "table dp_merges: sample idx 0: reason 'size' (want 'flops' or 'memory')");
    /* a larger group whose new member does not hold the sample */
    expect_corrupt(good, "UPDATE dp_merges SET cp = 3; UPDATE units_slices SET cp = 3 WHERE idx = 0",
                   "step 0: table units_slices: sample idx 0 (sample_id 40) has 100 tokens, the forward pass covers "
                   "[0, 0) on dp_rank 2");
    /* the members' token ranges differ */
    expect_corrupt(good,
                   "UPDATE units_slices SET tok_end = 40 WHERE dp_rank = 1 AND passes = 'F' AND unit = 0; "
                   "UPDATE units_slices SET tok_begin = 40 WHERE dp_rank = 1 AND passes = 'F' AND unit = 1",
                   "step 0: table units_slices: DP-merged sample idx 0 (sample_id 40) has other token ranges on "
                   "dp_rank 1 than on dp_rank 0 in the forward pass");
    /* the 'B' rows cover the backward pass */
    expect_corrupt(good, "UPDATE units_slices SET tok_end = 70 WHERE dp_rank = 2 AND passes = 'B' AND unit = 0",
                   "step 0: table units_slices: sample idx 6 (sample_id 46) has 80 tokens, the backward pass covers "
                   "[0, 70)");
    /* an op list's B op names a backward unit the rows do not have */
    expect_corrupt(good, "UPDATE stages SET ops = json_replace(ops, '$[4][1]', 9) WHERE dp_rank = 0 AND stage = 0",
                   "step 0: table stages: dp_rank 0 stage 0: ops: op 4 runs backward unit 9, the pipeline has 4 "
                   "backward units in units_slices");

    /* what only the reader can see (lt_store_get_step straight away, without the raw checks) */
    static const struct {
        const char *sql, *want;
    } reader[] = {
        {"DELETE FROM units_slices WHERE dp_rank = 2 AND passes = 'B'",
         "step 0: table units_slices: dp_rank 2 has 'F' rows but no 'B' rows (an asymmetric schedule has both)"},
        {"DELETE FROM units_slices WHERE dp_rank = 0 AND passes = 'F'",
         "step 0: table units_slices: dp_rank 0 has 'B' rows but no 'F' rows (an asymmetric schedule has both)"},
        {"UPDATE units_slices SET cp = 3 WHERE dp_rank = 0 AND passes = 'B' AND unit = 2 AND seq = 1",
         "step 0: table units_slices: dp_rank 0 passes B unit 2: seq 1 has cp 3, seq 0 has cp 1 (a unit has one cp)"},
        {"UPDATE units_slices SET slice = 7 WHERE dp_rank = 0 AND passes = 'F' AND unit = 0",
         "step 0: table units_slices: dp_rank 0 passes F unit 0 seq 0: slice 7 (the pass's 4 rows hold slices 0 .. 3, "
         "each once)"},
        {"UPDATE units_slices SET slice = 1 WHERE dp_rank = 1 AND passes = 'F' AND unit = 0",
         "step 0: table units_slices: dp_rank 1 passes F unit 1 seq 0: slice 1 (the pass's 4 rows hold slices 0 .. 3, "
         "each once)"},
        {"UPDATE units_slices SET slice = 4 - slice WHERE dp_rank = 0 AND passes = 'B' AND slice IN (0, 4)",
         "step 0: table units_slices: dp_rank 0 passes B unit 2 seq 1: slice 0 after slice 3 (a unit's slices are "
         "consecutive in the slice table)"},
        {"UPDATE units_slices SET unit = 5 WHERE dp_rank = 1 AND passes = 'B' AND unit = 3",
         "step 0: table units_slices: dp_rank 1 passes B unit 5 seq 0 (units must be numbered 0, 1, ... and slices "
         "from seq 0)"},
        {"UPDATE dp_merges SET dp_rank = 7",
         "step 0: table dp_merges: sample idx 0 is merged from dp_rank 7, which has no pipeline"},
    };
    for (size_t i = 0; i < sizeof reader / sizeof reader[0]; i++) {
        char path[256];
        new_path(path, sizeof path, "asym-reader");
        copy_path(good, path);
        sqlite3 *db = open_raw(path);
        exec_raw(db, reader[i].sql);
        sqlite3_close(db);
        lt_store *st;
        lt_error err;
        assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
        lt_step_plan got;
        lt_step_plan_init(&got);
        assert_int_equal(lt_store_get_step(st, 0, &got, NULL, &err), LT_ERR_INPUT);
        if (strcmp(err.what, reader[i].want) != 0) fail_msg("%s: '%s', want '%s'", reader[i].sql, err.what,
                                                            reader[i].want);
        assert_int_equal(got.n_ranks, 0);
        assert_null(got.merges);
        lt_step_plan_free(&got);
        lt_store_close(st);
    }
}

/* A file of schema version 1 is refused, by the reader and the writer, naming it; so is a
 * version-3 file (before dp_merges.reason), which has the column dropped here as it lacked
 * it then. */
static void test_old_schema(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "v3");
    write_file(path, 2, false);
    sqlite3 *db = open_raw(path);
    exec_raw(db, "ALTER TABLE dp_merges DROP COLUMN reason; PRAGMA user_version = 3;");
    sqlite3_close(db);
    lt_store *st = (lt_store *)path;
    lt_error err;
    assert_int_equal(lt_store_open(&st, path, &err), LT_ERR_VERSION);
    assert_null(st);
    assert_string_equal(err.what, "the plan database was built by an older planner (schema version 3, this planner's "
                                  "is 5); rebuild it");
    expect_refusal(path, NULL, NULL, LT_ERR_VERSION, "built by an older planner");
    new_path(path, sizeof path, "v1");
    write_file(path, 2, false);
    db = open_raw(path);
    exec_raw(db, "PRAGMA user_version = 1;");
    sqlite3_close(db);
    st = (lt_store *)path;
    assert_int_equal(lt_store_open(&st, path, &err), LT_ERR_VERSION);
    assert_null(st);
    assert_string_equal(err.what, "the plan database was built by an older planner (schema version 1, this planner's "
                                  "is 5); rebuild it");
    assert_string_equal(err.where, path);
    assert_non_null(strstr(err.hint, "rerun 'planner build'"));
    expect_refusal(path, NULL, NULL, LT_ERR_VERSION, "built by an older planner");
    char *out, *errtext;
    assert_int_equal(run_planner(&out, &errtext, "show", "--db", path, "--step", "0", NULL), 1);
    assert_non_null(strstr(errtext, "planner: error: the plan database was built by an older planner"));
    free(out);
    free(errtext);
    assert_int_equal(run_planner(&out, &errtext, "validate", "--db", path, NULL), 1);
    assert_non_null(strstr(errtext, "rebuild it"));
    free(out);
    free(errtext);
}

/* `planner show` of an asymmetric DP-Merge step: the solver status and runner-up, the group,
 * the forward and the backward units with their cp. */
static void test_asym_print(void **state) {
    (void)state;
    lt_step_plan p;
    build_asym_plan(&p, 5);
    lt_sample *smp = make_samples(5, asym_len, ASYM_SAMPLES);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    lt_plan_print(f, &p, smp, 60);
    fclose(f);
    static const char *const want[] = {
        "step 5: slimpack, predicted ",
        "params: micropacks=4 dp_merge=1  solver: timeout (a MILP fell back to its heuristic)",
        "runner-up: chunkflow (",
        "\nDP-Merge groups:\n  sample 75 (idx 0, 100 tokens): DP-Merge over DP ranks 0-1, cp=2 (pipelines 0-1)\n",
        "pipeline 0 (dp_rank 0, cp 1): predicted ",
        "4 forward units, 4 backward units, 16 ops",
        "  F unit 0 (50 tokens, cp=2): 0[0:50)\n",
        "  F unit 2 (30 tokens): 1[0:30)\n",
        "  B unit 0 (30 tokens, cp=2): 0[70:100)\n",
        "  B unit 1 (70 tokens, cp=2): 0[0:70)\n",
        "  B unit 2 (22 tokens): 1[15:30) 2[0:7)\n",
        "pipeline 2 (dp_rank 2, cp 1): predicted ",
        "2 forward units, 2 backward units, 8 ops",
        "  B unit 0 (50 tokens): 6[30:80)\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(buf, want[i])) fail_msg("show lacks '%s':\n%s", want[i], buf);
    free(buf);
    /* without samples the group is named by its index; a group beyond the step is printed as such */
    p.merges[0].cp = 5;
    f = open_memstream(&buf, &n);
    lt_plan_print(f, &p, NULL, 20);
    fclose(f);
    if (!strstr(buf, "  sample idx 0 (100 tokens): DP-Merge over pipelines 0 .. 4, cp=5 (not within the step's 3 "
                     "pipelines)"))
        fail_msg("%s", buf);
    free(buf);
    /* a damaged pipeline's dp_rank near INT_MAX prints without overflow (fuzz_planstore) */
    p.merges[0].cp = 2;
    p.ranks[1].dp_rank = INT32_MAX;
    p.ranks[1].cp = 2;
    f = open_memstream(&buf, &n);
    lt_plan_print(f, &p, NULL, 20);
    fclose(f);
    if (!strstr(buf, "DP-Merge over DP ranks 0-2147483648, cp=2 (pipelines 0-1)")) fail_msg("%s", buf);
    free(buf);
    free(smp);
    lt_step_plan_free(&p);

    /* and through the command, from a file */
    char path[256];
    new_path(path, sizeof path, "asym-show");
    write_file_asym(path, 1);
    char *out, *errtext;
    int rc = run_planner(&out, &errtext, "show", "--db", path, "--step", "1", "--width", "40", NULL);
    if (rc != 0) fail_msg("show: %d: %s", rc, errtext);
    assert_non_null(strstr(out, "sample 47 (idx 0, 100 tokens): DP-Merge over DP ranks 0-1, cp=2"));
    assert_non_null(strstr(out, "solver: timeout"));
    assert_non_null(strstr(out, "  B unit 3 (15 tokens): 1[0:15)\n"));
    free(out);
    free(errtext);
}

/* ------------------------------------------------------------------ benchmark mode */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A synthetic step of the `planner build` shape: 512 samples over 8 pipelines x 4 stages
 * (32 layers), simulated under unit costs (10 us per token). ops_per_stage 0: the default
 * shape, each pipeline's 64 samples packed in order into units of 32K tokens (a sample
 * crossing a unit boundary split there), Seq1F1B over them: ~16 ops per stage. Otherwise
 * the chunkflow shape: ChunkFlow chunks (lt_sched_units_chunked_budget, first-fit
 * decreasing) of a size that gives about ops_per_stage ops per stage, state-aware 1F1B with
 * K = 1 (F, B and FK ops, as `planner build --strategy chunkflow` makes at 128K context). */
static void synthetic_step(lt_step_plan *p, lt_sample *smp, uint64_t step, lt_rng *rng, lt_sim *sim,
                           int ops_per_stage) {
    enum { B = 512, DP = 8, PP = 4, LAYERS = 32 };
    const int64_t cap = 32768;
    lt_step_plan_init(p);
    lt_error err;
    p->step = step;
    p->strategy = ops_per_stage ? LT_STRATEGY_CHUNKFLOW : LT_STRATEGY_SEQ1F1B;
    p->n_samples = B;
    p->lengths = malloc(B * sizeof *p->lengths);
    p->sample_rank = malloc(B * sizeof *p->sample_rank);
    p->n_ranks = DP;
    p->ranks = calloc(DP, sizeof *p->ranks);
    p->pp = PP;
    for (size_t i = 0; i < B; i++) { /* long-tailed: 80% in [256, 4K), 20% in [4K, 16K) */
        bool lng = lt_rng_below(rng, 5) == 0;
        p->lengths[i] = lng ? 4096 + (int64_t)lt_rng_below(rng, 12288) : 256 + (int64_t)lt_rng_below(rng, 3840);
        p->sample_rank[i] = (int)(i % DP);
        uint64_t id = lt_rng_below(rng, 4000000); /* the sampler's ids are a shuffle of the table */
        smp[i] = (lt_sample){.id = id, .corpus_doc = 0, .task = (uint32_t)(id % 64), .doc = id / 64, .offset = 0,
                             .length = p->lengths[i]};
    }
    p->n_predicted = lt_plan_predicted_tokens(p->lengths, B);
    lt_sim_costs costs = lt_sim_unit_costs();
    double busy = 0;
    int64_t chunk = ops_per_stage ? (int64_t)(242000.0 * 3.1 / ops_per_stage) : 0;
    if (ops_per_stage && chunk < 256) chunk = 256;
    int64_t loc[B / DP];
    int32_t glob[B / DP];
    for (size_t r = 0; r < DP; r++) {
        lt_rank_plan *rp = &p->ranks[r];
        rp->dp_rank = (int)r;
        rp->cp = 1;
        lt_schedule_init(&rp->sched, PP, LAYERS, &err);
        lt_schedule *s = &rp->sched;
        if (ops_per_stage) {
            /* a pipeline has ~242K tokens; per stage an F and a B per chunk, an FK for all but
             * the last chunk of a long sample, and the chunks are not full: ~3.1 ops per
             * chunk size of tokens */
            size_t m = 0;
            for (size_t i = r; i < B; i += DP) {
                loc[m] = p->lengths[i];
                glob[m++] = (int32_t)i;
            }
            lt_sched_units_chunked_budget(s, loc, m, chunk, 0);
            for (size_t j = 0; j < s->n_slices; j++) s->slices[j].sample = glob[s->slices[j].sample];
            lt_sched_chunkflow(s, NULL, s->n_units, 1);
        } else {
            int64_t room = cap;
            uint32_t first = 0;
            for (size_t i = r; i < B; i += DP) {
                int64_t at = 0;
                while (at < p->lengths[i]) {
                    int64_t take = p->lengths[i] - at < room ? p->lengths[i] - at : room;
                    lt_schedule_add_slice(s, (int32_t)i, at, at + take);
                    at += take;
                    room -= take;
                    if (room == 0) {
                        lt_schedule_add_unit(s, first, (uint32_t)(s->n_slices - first));
                        first = (uint32_t)s->n_slices;
                        room = cap;
                    }
                }
            }
            if (first < s->n_slices) lt_schedule_add_unit(s, first, (uint32_t)(s->n_slices - first));
            lt_sched_seq1f1b(s, NULL, s->n_units);
        }
        if (lt_sim_run(sim, s, &costs, &err) != LT_OK) {
            fprintf(stderr, "sim: %s\n", err.what);
            exit(1);
        }
        rp->ops = malloc(sim->n_ops * sizeof *rp->ops);
        for (size_t id = 0; id < sim->n_ops; id++) /* activation bytes of the size real plans have */
            rp->ops[id] = (lt_plan_op){sim->start[id] * 1e-5, sim->finish[id] * 1e-5,
                                       167772160.0 * (double)(1 + id % 7)};
        rp->time_s = sim->step_time * 1e-5;
        rp->stage_busy_s = malloc(PP * sizeof *rp->stage_busy_s);
        rp->stage_peak_mem = malloc(PP * sizeof *rp->stage_peak_mem);
        for (int g = 0; g < PP; g++) {
            rp->stage_busy_s[g] = sim->busy[g] * 1e-5;
            rp->stage_peak_mem[g] = 4.0e10 + 1e9 * sim->peak_mem[g];
            busy += rp->stage_busy_s[g];
            if (rp->stage_peak_mem[g] > p->peak_mem) p->peak_mem = rp->stage_peak_mem[g];
        }
        if (rp->time_s > p->time_s) p->time_s = rp->time_s;
    }
    p->bubble_ratio = 1 - busy / (DP * PP * p->time_s);
    if (ops_per_stage) snprintf(p->params, sizeof p->params, "chunk_size=%" PRId64 " k=1", chunk);
    else snprintf(p->params, sizeof p->params, "slices=2");
    snprintf(p->solver_status, sizeof p->solver_status, "none");
}

/* test_store --bench STEPS [OPS_PER_STAGE] [FILE]: the write speed and size of the store
 * (put and commit, not the generation of the synthetic plans), then the read-back speed
 * (lt_store_validate over the whole file). */
static int bench(int argc, char **argv) {
    uint64_t steps = strtoull(argv[2], NULL, 10);
    int ops_per_stage = 0;
    int at = 3;
    if (argc > at && argv[at][0] >= '0' && argv[at][0] <= '9') ops_per_stage = atoi(argv[at++]);
    char path[512];
    bool own = argc <= at;
    if (own) {
        if (lt_test_tmpdir_create(tmp_root, sizeof tmp_root, "store-bench")) return 1;
        snprintf(path, sizeof path, "%s/bench.db", tmp_root);
    } else {
        snprintf(path, sizeof path, "%s", argv[at]);
        unlink(path);
    }
    lt_config *c = lt_config_new();
    char *cfg = lt_config_dump_string(c);
    lt_config_free(c);
    lt_run_info run = test_run(cfg);
    run.dp = 8, run.pp = 4, run.layers = 32, run.global_batch = 512, run.context_len = 32768;
    run.mem_cap = 80.0 * 1024 * 1024 * 1024;
    lt_error err;
    lt_store *st;
    double t0 = now_s();
    if (lt_store_begin(&st, path, &run, false, &err) != LT_OK) return lt_error_exit(&err);
    lt_rng root, rng;
    lt_rng_seed(&root, 7);
    lt_rng_split(&rng, &root, 1);
    lt_sim sim = {0};
    lt_sample *smp = malloc(512 * sizeof *smp);
    double gen = 0, put = 0;
    uint64_t rows = 0, slices = 0, ops = 0;
    for (uint64_t t = 0; t < steps; t++) {
        lt_step_plan p;
        double a = now_s();
        synthetic_step(&p, smp, t, &rng, &sim, ops_per_stage);
        double b = now_s();
        if (lt_store_put_step(st, &p, smp, &err) != LT_OK) return lt_error_exit(&err);
        put += now_s() - b;
        gen += b - a;
        for (size_t r = 0; r < p.n_ranks; r++) {
            slices += p.ranks[r].sched.n_slices;
            ops += lt_schedule_n_ops(&p.ranks[r].sched);
        }
        rows += 1 + p.n_samples + p.n_ranks * (1 + (size_t)p.pp);
        lt_step_plan_free(&p);
    }
    rows += slices;
    double c0 = now_s();
    if (lt_store_commit(st, &err) != LT_OK) return lt_error_exit(&err);
    double t1 = now_s();
    struct stat sb;
    stat(path, &sb);
    double write_s = put + (t1 - c0);
    printf("shape: %s, %.0f ops per stage\n", ops_per_stage ? "chunkflow" : "default (seq1f1b, 32K units)",
           (double)ops / (double)steps / 32);
    printf("steps=%" PRIu64 " (per step: %.0f samples/slices/step/pipeline/stage rows, %.0f slices, %.0f ops)\n",
           steps, (double)rows / (double)steps, (double)slices / (double)steps, (double)ops / (double)steps);
    printf("generate_s=%.2f put_s=%.2f commit_s=%.2f total_s=%.2f\n", gen, put, t1 - c0, t1 - t0);
    printf("write: %.2f us per op, %.1f s per 10,000 steps, %.0f bytes/step (file %.1f MB)\n",
           write_s / (double)(ops ? ops : 1) * 1e6, write_s / (double)steps * 10000, (double)sb.st_size / (double)steps,
           (double)sb.st_size / 1e6);
    if (lt_store_open(&st, path, &err) != LT_OK) return lt_error_exit(&err);
    double v0 = now_s();
    size_t checked;
    if (lt_store_validate(st, NULL, NULL, &checked, &err) != LT_OK) return lt_error_exit(&err);
    double v1 = now_s();
    lt_store_close(st);
    printf("validate: %.2f s (%zu steps), %.1f s per 10,000 steps\n", v1 - v0, checked,
           (v1 - v0) / (double)steps * 10000);
    free(smp);
    free(cfg);
    lt_sim_free(&sim);
    if (own) lt_test_tmpdir_remove(tmp_root);
    return 0;
}

static int setup(void **state) {
    (void)state;
    return lt_test_tmpdir_create(tmp_root, sizeof tmp_root, "store");
}

static int teardown(void **state) {
    (void)state;
    return lt_test_tmpdir_remove(tmp_root);
}

/* Version 5: the documents' named sources. The ranges written at build time give each
 * sample its source (the view sample_sources and lt_store_sample_sources agree, a sample
 * outside every range has none), step_sources adds up to the step, a resumed build may
 * write the ranges again; a version-4 file (no sources) still reads and shows. */
static void test_sources(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "sources");
    char *cfg = config_text(NULL);
    lt_run_info run = test_run(cfg);
    lt_store *st;
    lt_error err;
    assert_int_equal(lt_store_begin(&st, path, &run, false, &err), LT_OK);
    put_steps(st, 0, 2);
    /* every sample's (task, doc) of step 0, to cut ranges around them */
    const lt_store_source_range bad = {0, 5, 5, "x"};
    assert_int_equal(lt_store_put_sources(st, &bad, 1, &err), LT_ERR_INTERNAL);
    lt_store_abort(st);
    assert_int_equal(lt_store_begin(&st, path, &run, false, &err), LT_OK);
    put_steps(st, 0, 2);
    const lt_store_source_range r[] = {{0, 0, 3, "web"}, {0, 3, 1000000, "code"}, {1, 0, 1000000, "wiki"}};
    assert_int_equal(lt_store_put_sources(st, r, 3, &err), LT_OK);
    assert_int_equal(lt_store_put_sources(st, r, 3, &err), LT_OK); /* again: replaced */
    assert_int_equal(lt_store_commit(st, &err), LT_OK);
    free(cfg);
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    lt_sample *smp = NULL;
    assert_int_equal(lt_store_get_step(st, 1, &plan, &smp, &err), LT_OK);
    char **names;
    uint32_t *src;
    size_t nn, n;
    assert_int_equal(lt_store_sample_sources(st, 1, &names, &nn, &src, &n, &err), LT_OK);
    assert_int_equal(n, plan.n_samples);
    for (size_t i = 0; i < n; i++) {
        const char *want = smp[i].task == 1 ? "wiki" : smp[i].doc < 3 ? "web" : "code";
        if (smp[i].task > 1) want = "";
        assert_string_equal(names[src[i]], want);
    }
    for (size_t k = 0; k < nn; k++) free(names[k]);
    free(names);
    free(src);
    free(smp);
    lt_step_plan_free(&plan);
    lt_store_close(st);
    sqlite3 *db = open_raw(path);
    assert_int_equal(query_int(db, "SELECT count(*) FROM source_ranges"), 3);
    assert_int_equal(query_int(db, "SELECT count(*) FROM (SELECT step, sum(n_samples) AS n, sum(n_tokens) AS t "
                                   "FROM step_sources GROUP BY step) AS a JOIN step_summary AS b USING (step) "
                                   "WHERE a.n = b.n_samples AND a.t = b.n_tokens"),
                     2);
    assert_int_equal(query_int(db, "SELECT count(*) FROM sample_sources WHERE source IS NULL AND task <= 1"), 0);
    /* a version-4 file (before sources) still reads: its plans, and no sources */
    exec_raw(db, "DROP VIEW step_sources; DROP VIEW sample_sources; DROP TABLE source_ranges; PRAGMA user_version = 4;");
    sqlite3_close(db);
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    lt_step_plan_init(&plan);
    assert_int_equal(lt_store_get_step(st, 1, &plan, NULL, &err), LT_OK);
    assert_int_equal(lt_store_sample_sources(st, 1, &names, &nn, &src, &n, &err), LT_OK);
    assert_int_equal(nn, 0);
    assert_int_equal(n, 0);
    lt_step_plan_free(&plan);
    lt_store_close(st);
    char *out, *errtext;
    assert_int_equal(run_planner(&out, &errtext, "show", "--db", path, "--step", "1", NULL), 0);
    assert_null(strstr(out, "sources of step"));
    free(out);
    free(errtext);
}

/* The held-out documents (data.holdout): written in the plans' transaction, read back in
 * their order with the view heldout_sources naming their source; a resumed build writes
 * them again (replaced, not added); a document that is not a start is refused; a file
 * without the table (an earlier planner) reads as no held-out set, not as an error. */
static void test_heldout(void **state) {
    (void)state;
    char path[256];
    new_path(path, sizeof path, "heldout");
    char *cfg = config_text(NULL);
    lt_run_info run = test_run(cfg);
    lt_store *st;
    lt_error err;
    const lt_sample held[] = {
        {.id = UINT64_MAX, .task = 0, .doc = 7, .length = 50},
        {.id = UINT64_MAX, .task = 1, .doc = 2, .length = 1},
        {.id = UINT64_MAX, .task = 0, .doc = 1, .length = 300},
    };
    const lt_sample piece = {.id = UINT64_MAX, .task = 0, .doc = 9, .offset = 100, .length = 20};
    assert_int_equal(lt_store_begin(&st, path, &run, false, &err), LT_OK);
    put_steps(st, 0, 1);
    assert_int_equal(lt_store_put_heldout(st, &piece, 1, &err), LT_ERR_INTERNAL);
    const lt_store_source_range r[] = {{0, 0, 5, "web"}, {0, 5, 100, "code"}};
    assert_int_equal(lt_store_put_sources(st, r, 2, &err), LT_OK);
    assert_int_equal(lt_store_put_heldout(st, held, 3, &err), LT_OK);
    assert_int_equal(lt_store_put_heldout(st, held, 3, &err), LT_OK); /* again: replaced */
    assert_int_equal(lt_store_commit(st, &err), LT_OK);
    free(cfg);

    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    bool present = false;
    lt_sample *got = NULL;
    size_t n = 0;
    assert_int_equal(lt_store_heldout(st, &present, &got, &n, &err), LT_OK);
    assert_true(present);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(got[i].task, held[i].task);
        assert_int_equal(got[i].doc, held[i].doc);
        assert_int_equal(got[i].length, held[i].length);
        assert_int_equal(got[i].offset, 0);
        assert_true(got[i].id == UINT64_MAX);
    }
    free(got);
    lt_store_close(st);
    sqlite3 *db = open_raw(path);
    assert_int_equal(query_int(db, "SELECT count(*) FROM heldout"), 3);
    assert_int_equal(query_int(db, "SELECT count(*) FROM heldout_sources WHERE (idx = 0 AND source = 'code') OR "
                                   "(idx = 1 AND source IS NULL) OR (idx = 2 AND source = 'web')"),
                     3);
    /* rows that do not number 0, 1, ...: named */
    exec_raw(db, "UPDATE heldout SET idx = 5 WHERE idx = 1;");
    sqlite3_close(db);
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    assert_int_equal(lt_store_heldout(st, &present, &got, &n, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "table heldout"));
    assert_int_equal(n, 0);
    lt_store_close(st);
    /* a file of an earlier planner: no table, no held-out set */
    db = open_raw(path);
    exec_raw(db, "DROP VIEW heldout_sources; DROP TABLE heldout;");
    sqlite3_close(db);
    assert_int_equal(lt_store_open(&st, path, &err), LT_OK);
    assert_int_equal(lt_store_heldout(st, &present, &got, &n, &err), LT_OK);
    assert_false(present);
    assert_int_equal(n, 0);
    assert_null(got);
    lt_store_close(st);
}

int main(int argc, char **argv) {
    if (argc >= 3 && argc <= 5 && strcmp(argv[1], "--bench") == 0) return bench(argc, argv);
    if (argc >= 2) {
        fprintf(stderr, "usage: %s [--bench STEPS [OPS_PER_STAGE] [FILE]]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_round_trip_large),
        cmocka_unit_test(test_views_columns),
        cmocka_unit_test(test_views_content),
        cmocka_unit_test(test_plan_ops_view),
        cmocka_unit_test(test_helixpipe_round_trip),
        cmocka_unit_test(test_op_time_rounding),
        cmocka_unit_test(test_unstorable_predictions),
        cmocka_unit_test(test_doc_queries),
        cmocka_unit_test(test_deterministic_bytes),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_abort),
        cmocka_unit_test(test_io_errors),
        cmocka_unit_test(test_validate_rules),
        cmocka_unit_test(test_store_validate),
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_commands),
        cmocka_unit_test(test_malformed_ops),
        cmocka_unit_test(test_damaged_sample_count),
        cmocka_unit_test(test_asym_round_trip),
        cmocka_unit_test(test_asym_views),
        cmocka_unit_test(test_asym_validate_rules),
        cmocka_unit_test(test_asym_corrupt_rows),
        cmocka_unit_test(test_old_schema),
        cmocka_unit_test(test_sources),
        cmocka_unit_test(test_heldout),
        cmocka_unit_test(test_asym_print),
        cmocka_unit_test(test_asym_plan_valid), /* needs the asymmetric simulator (plans/schedule/sim.c) */
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
