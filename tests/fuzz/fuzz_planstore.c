/*
 * tests/fuzz/fuzz_planstore.c — libFuzzer target for the plan store's reader
 * (plans/store/store.h: lt_store_open, lt_store_steps, lt_store_get_step; plans/store/validate.h:
 * lt_store_validate, lt_plan_validate, lt_plan_print): a plan file whose rows were changed
 * behind the store's back (a bad disk, a hand edit, a buggy writer) must give an error
 * naming what is wrong, never a crash, a hang or undefined behaviour.
 *
 * Once per process a valid plan file is built with the store's writer: two steps of a few
 * samples over 2 pipelines x 2 stages (1F1B and a sliced Seq1F1B schedule, predictions from
 * the unit-time simulator), and a third of asymmetric schedules (units_slices 'F' and 'B'
 * rows, a bslice table not in bunit order) with a DP-Merge group over both pipelines (unit
 * cp 2, a dp_merges row; predictions by hand) and a solver status and runner-up. Each input is a list of edits applied to a copy of it with
 * plain SQL, then the copy is read back through the store. An edit is
 *   byte 0  table (mod the number of tables of the file, in sqlite_schema order)
 *   byte 1  column (mod the table's column count)
 *   byte 2  row (mod the table's row count)
 *   byte 3  kind: 0 integer, 1 real, 2 text, 3 NULL, 4 blob, 5 delete the row, 6 duplicate
 *           the text value of another row's cell into this one (JSON ops, sources, configs)
 *   byte 4  payload length n (at most 64), then n payload bytes (the integer or real is
 *           read from them, the text/blob is them)
 * Edits that SQLite refuses (STRICT types, CHECK constraints, primary keys) are skipped:
 * those rows cannot exist in a file the store wrote or that SQLite accepts.
 * What is checked: no crash or sanitizer report; every failing call returns a status equal
 * to err.status with a non-empty WHAT; lt_plan_validate and lt_plan_print run on whatever
 * lt_store_get_step accepted.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "lib/error.h"
#include "plans/strategies/plan.h"
#include "plans/schedule/schedule.h"
#include "plans/schedule/sim.h"
#include "plans/store/store.h"
#include "plans/store/validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char template_path[256], work_path[256];
static unsigned char *template_bytes;
static size_t template_size;

static void die(const char *what, const lt_error *err) {
    fprintf(stderr, "fuzz_planstore: %s%s%s\n", what, err ? ": " : "", err ? err->what : "");
    abort();
}

static void check_error(lt_status st, const lt_error *err) {
    if (st == LT_OK) return;
    if (st != err->status) die("returned status differs from err.status", err);
    if (err->what[0] == '\0') die("an error without a message", err);
}

/* One step: `n` samples of lengths len[] dealt to two pipelines; pipeline 1 slices its
 * samples in two (seq1f1b) so that the file has multi-slice units. */
static void make_plan(lt_step_plan *p, uint64_t step, const int64_t *len, size_t n) {
    lt_step_plan_init(p);
    p->step = step;
    p->strategy = LT_STRATEGY_MEGATRON;
    p->n_samples = n;
    p->lengths = malloc(n * sizeof *p->lengths);
    p->sample_rank = malloc(n * sizeof *p->sample_rank);
    p->n_ranks = 2;
    p->pp = 2;
    p->ranks = calloc(2, sizeof *p->ranks);
    if (!p->lengths || !p->sample_rank || !p->ranks) die("out of memory", NULL);
    memcpy(p->lengths, len, n * sizeof *len);
    lt_sim sim;
    memset(&sim, 0, sizeof sim);
    lt_sim_costs costs = lt_sim_unit_costs();
    lt_error err;
    for (int r = 0; r < 2; r++) {
        lt_rank_plan *rp = &p->ranks[r];
        rp->dp_rank = r;
        rp->cp = 1;
        if (lt_schedule_init(&rp->sched, 2, 4, &err) != LT_OK) die("schedule", &err);
        for (size_t i = (size_t)r; i < n; i += 2) {
            p->sample_rank[i] = r;
            if (r == 0) {
                uint32_t first = lt_schedule_add_slice(&rp->sched, (int32_t)i, 0, len[i]);
                lt_schedule_add_unit(&rp->sched, first, 1);
            } else {
                int64_t half = len[i] / 2 > 0 ? len[i] / 2 : 1;
                uint32_t first = lt_schedule_add_slice(&rp->sched, (int32_t)i, 0, half);
                lt_schedule_add_unit(&rp->sched, first, 1);
                if (half < len[i]) {
                    first = lt_schedule_add_slice(&rp->sched, (int32_t)i, half, len[i]);
                    lt_schedule_add_unit(&rp->sched, first, 1);
                }
            }
        }
        if (r == 0) lt_sched_1f1b(&rp->sched, NULL, rp->sched.n_units);
        else lt_sched_seq1f1b(&rp->sched, NULL, rp->sched.n_units);
        if (lt_sim_run(&sim, &rp->sched, &costs, &err) != LT_OK) die("simulate", &err);
        rp->ops = calloc(sim.n_ops ? sim.n_ops : 1, sizeof *rp->ops);
        rp->stage_busy_s = calloc(2, sizeof(double));
        rp->stage_peak_mem = calloc(2, sizeof(double));
        if (!rp->ops || !rp->stage_busy_s || !rp->stage_peak_mem) die("out of memory", NULL);
        for (size_t id = 0; id < sim.n_ops; id++) rp->ops[id] = (lt_plan_op){sim.start[id], sim.finish[id], 1.0};
        for (int s = 0; s < 2; s++) {
            rp->stage_busy_s[s] = sim.busy[s];
            rp->stage_peak_mem[s] = sim.peak_mem[s];
        }
        rp->time_s = sim.step_time;
        if (rp->time_s > p->time_s) p->time_s = rp->time_s;
        if (sim.peak_mem[0] > p->peak_mem) p->peak_mem = sim.peak_mem[0];
        if (sim.peak_mem[1] > p->peak_mem) p->peak_mem = sim.peak_mem[1];
    }
    lt_sim_free(&sim);
    snprintf(p->params, sizeof p->params, "cp=1 recompute=0");
    snprintf(p->solver_status, sizeof p->solver_status, "none");
}

/* Step 2: samples 0 (9 tokens, DP-merged over both pipelines, cp 2), 1 (5, pipeline 0) and 2
 * (3, pipeline 1); every schedule asymmetric (the backward partition cut elsewhere), F ops
 * then B ops in FILO order on both stages. */
static void make_asym_plan(lt_step_plan *p) {
    static const int64_t len[3] = {9, 5, 3};
    lt_step_plan_init(p);
    p->step = 2;
    p->strategy = LT_STRATEGY_SLIMPACK;
    p->n_samples = 3;
    p->lengths = malloc(3 * sizeof *p->lengths);
    p->sample_rank = malloc(3 * sizeof *p->sample_rank);
    p->n_ranks = 2;
    p->pp = 2;
    p->ranks = calloc(2, sizeof *p->ranks);
    p->merges = malloc(sizeof *p->merges);
    if (!p->lengths || !p->sample_rank || !p->ranks || !p->merges) die("out of memory", NULL);
    memcpy(p->lengths, len, sizeof len);
    p->sample_rank[0] = 0;
    p->sample_rank[1] = 0;
    p->sample_rank[2] = 1;
    p->merges[0] = (lt_dp_merge){.sample = 0, .first_rank = 0, .cp = 2};
    p->n_merges = 1;
    lt_error err;
    for (int r = 0; r < 2; r++) {
        lt_rank_plan *rp = &p->ranks[r];
        lt_schedule *s = &rp->sched;
        rp->dp_rank = r;
        rp->cp = 1;
        if (lt_schedule_init(s, 2, 4, &err) != LT_OK) die("schedule", &err);
        const int32_t own = 1 + r;
        uint32_t u;
        u = lt_schedule_add_unit(s, lt_schedule_add_slice(s, 0, 0, 4), 1);
        s->units[u].cp = 2;
        u = lt_schedule_add_unit(s, lt_schedule_add_slice(s, 0, 4, 9), 1);
        s->units[u].cp = 2;
        lt_schedule_add_unit(s, lt_schedule_add_slice(s, own, 0, len[own]), 1);
        /* bslices in token order, bunits in execution order (FILO per sample), as SlimPack */
        uint32_t b0 = lt_schedule_add_bslice(s, 0, 0, 6), b1 = lt_schedule_add_bslice(s, 0, 6, 9);
        uint32_t b2 = lt_schedule_add_bslice(s, own, 0, 2), b3 = lt_schedule_add_bslice(s, own, 2, len[own]);
        u = lt_schedule_add_bunit(s, b1, 1);
        s->bunits[u].cp = 2;
        u = lt_schedule_add_bunit(s, b0, 1);
        s->bunits[u].cp = 2;
        lt_schedule_add_bunit(s, b3, 1);
        lt_schedule_add_bunit(s, b2, 1);
        for (int g = 0; g < 2; g++) {
            for (uint32_t k = 0; k < 3; k++) lt_schedule_add_stage_op(s, g, LT_OP_F, k, 0);
            for (uint32_t k = 0; k < 4; k++) lt_schedule_add_stage_op(s, g, LT_OP_B, k, 0);
        }
        size_t n_ops = lt_schedule_n_ops(s);
        rp->ops = calloc(n_ops, sizeof *rp->ops);
        rp->stage_busy_s = calloc(2, sizeof(double));
        rp->stage_peak_mem = calloc(2, sizeof(double));
        if (!rp->ops || !rp->stage_busy_s || !rp->stage_peak_mem) die("out of memory", NULL);
        size_t id = 0;
        for (int g = 0; g < 2; g++) {
            for (size_t i = 0; i < s->stage[g].n; i++, id++) {
                double t = (double)(2 * i + (size_t)g);
                rp->ops[id] = (lt_plan_op){t, t + 1, 1.0};
                if (t + 1 > rp->time_s) rp->time_s = t + 1;
            }
            rp->stage_busy_s[g] = (double)s->stage[g].n;
            rp->stage_peak_mem[g] = 3;
        }
        if (rp->time_s > p->time_s) p->time_s = rp->time_s;
    }
    p->peak_mem = 3;
    p->bubble_ratio = 0.5;
    snprintf(p->params, sizeof p->params, "micropacks=2");
    snprintf(p->solver_status, sizeof p->solver_status, "timeout");
    p->runner_up = LT_STRATEGY_CHUNKFLOW;
    p->runner_up_time_s = 2 * p->time_s;
}

static void build_template(void) {
    snprintf(template_path, sizeof template_path, "/tmp/fuzz_planstore.%d.template.db", (int)getpid());
    snprintf(work_path, sizeof work_path, "/tmp/fuzz_planstore.%d.db", (int)getpid());
    unlink(template_path);
    lt_run_info run = {
        .name = "fuzz", .strategy = "megatron",
        .config = "[model]\nlayers = 4\n[parallel]\npp = 2\ndp = 2\n[plan]\ncontext_len = 64\n",
        .fingerprint = "0000000000000000000000000000000000000000000000000000000000000000",
        .input = "fuzz", .sample_policy = "truncate", .tuning = "cp=1 recompute=0", .version = "fuzz",
        .context_len = 64, .global_batch = 5, .seed = 1, .dp = 2, .pp = 2, .tp = 1, .layers = 4,
        .mem_cap = 1e6, .n_samples_total = 100,
    };
    lt_store *st = NULL;
    lt_error err;
    if (lt_store_begin(&st, template_path, &run, false, &err) != LT_OK) die("store_begin", &err);
    static const int64_t len[2][5] = {{5, 3, 8, 1, 6}, {2, 9, 4, 7, 3}};
    for (uint64_t t = 0; t < 2; t++) {
        lt_step_plan p;
        make_plan(&p, t, len[t], 5);
        lt_sample smp[5];
        memset(smp, 0, sizeof smp);
        for (size_t i = 0; i < 5; i++) {
            smp[i].id = 10 * t + i;
            smp[i].doc = 10 * t + i;
            smp[i].length = len[t][i];
        }
        if (lt_store_put_step(st, &p, smp, &err) != LT_OK) die("put_step", &err);
        lt_step_plan_free(&p);
    }
    {
        lt_step_plan p;
        make_asym_plan(&p);
        lt_sample smp[3];
        memset(smp, 0, sizeof smp);
        for (size_t i = 0; i < 3; i++) {
            smp[i].id = 20 + i;
            smp[i].doc = 20 + i;
            smp[i].length = p.lengths[i];
        }
        if (lt_store_put_step(st, &p, smp, &err) != LT_OK) die("put_step (asymmetric)", &err);
        lt_step_plan_free(&p);
    }
    if (lt_store_commit(st, &err) != LT_OK) die("commit", &err);
    FILE *f = fopen(template_path, "rb");
    if (!f) die("open template", NULL);
    fseek(f, 0, SEEK_END);
    template_size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    template_bytes = malloc(template_size);
    if (!template_bytes || fread(template_bytes, 1, template_size, f) != template_size) die("read template", NULL);
    fclose(f);
    unlink(template_path);
}

/* Table names of the file's tables (not views), in schema order; at most 16. */
static int tables_of(sqlite3 *db, char names[16][64]) {
    sqlite3_stmt *q;
    int n = 0;
    if (sqlite3_prepare_v2(db, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                               "ORDER BY rowid", -1, &q, NULL) != SQLITE_OK)
        return 0;
    while (n < 16 && sqlite3_step(q) == SQLITE_ROW) snprintf(names[n++], 64, "%s", sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    return n;
}

/* Column `c` (mod count) of table t: its name into col; returns the count (0 on error). */
static int column_of(sqlite3 *db, const char *t, int c, char col[64]) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT name FROM pragma_table_info('%s')", t);
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) return 0;
    char names[64][64];
    int n = 0;
    while (n < 64 && sqlite3_step(q) == SQLITE_ROW) snprintf(names[n++], 64, "%s", sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    if (n) snprintf(col, 64, "%s", names[c % n]);
    return n;
}

static void apply_edit(sqlite3 *db, const uint8_t *e, const uint8_t *payload, size_t n) {
    char tables[16][64];
    int nt = tables_of(db, tables);
    if (nt == 0) return;
    const char *t = tables[e[0] % nt];
    char col[64];
    if (!column_of(db, t, e[1], col)) return;
    char sql[512];
    /* Rows are addressed by the value of the edited column in the k-th row (WITHOUT ROWID
     * tables have no rowid): every row sharing that value is edited, which is an edit too. */
    int kind = e[3] % 7;
    if (kind == 5) {
        snprintf(sql, sizeof sql, "DELETE FROM \"%s\" WHERE \"%s\" IS (SELECT \"%s\" FROM \"%s\" LIMIT 1 OFFSET %u)", t,
                 col, col, t, (unsigned)e[2]);
        sqlite3_exec(db, sql, NULL, NULL, NULL);
        return;
    }
    if (kind == 6) {
        unsigned from = n ? payload[0] : 0;
        snprintf(sql, sizeof sql,
                 "UPDATE \"%s\" SET \"%s\" = (SELECT \"%s\" FROM \"%s\" LIMIT 1 OFFSET %u) WHERE \"%s\" IS (SELECT \"%s\" "
                 "FROM \"%s\" LIMIT 1 OFFSET %u)",
                 t, col, col, t, from, col, col, t, (unsigned)e[2]);
        sqlite3_exec(db, sql, NULL, NULL, NULL);
        return;
    }
    snprintf(sql, sizeof sql, "UPDATE \"%s\" SET \"%s\" = ?1 WHERE \"%s\" IS (SELECT \"%s\" FROM \"%s\" LIMIT 1 OFFSET %u)",
             t, col, col, col, t, (unsigned)e[2]);
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) return;
    int64_t iv = 0;
    double dv = 0;
    memcpy(&iv, payload, n < sizeof iv ? n : sizeof iv);
    memcpy(&dv, payload, n < sizeof dv ? n : sizeof dv);
    switch (kind) {
    case 0: sqlite3_bind_int64(q, 1, n <= 2 ? (int64_t)(int8_t)(n ? payload[0] : 0) : iv); break;
    case 1: sqlite3_bind_double(q, 1, dv); break;
    case 2: sqlite3_bind_text(q, 1, (const char *)payload, (int)n, SQLITE_TRANSIENT); break;
    case 3: sqlite3_bind_null(q, 1); break;
    default: sqlite3_bind_blob(q, 1, payload, (int)n, SQLITE_TRANSIENT); break;
    }
    sqlite3_step(q);
    sqlite3_finalize(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!template_bytes) build_template();
    FILE *f = fopen(work_path, "wb");
    if (!f || fwrite(template_bytes, 1, template_size, f) != template_size || fclose(f) != 0) die("write copy", NULL);
    sqlite3 *db;
    if (sqlite3_open(work_path, &db) != SQLITE_OK) die("sqlite3_open", NULL);
    size_t i = 0;
    for (int edits = 0; edits < 16 && i + 5 <= size; edits++) {
        size_t n = data[i + 4] % 65;
        if (i + 5 + n > size) n = size - i - 5;
        apply_edit(db, data + i, data + i + 5, n);
        i += 5 + n;
    }
    sqlite3_close(db);

    lt_store *st = NULL;
    lt_error err;
    lt_status s = lt_store_open(&st, work_path, &err);
    check_error(s, &err);
    if (s == LT_OK) {
        uint64_t *steps = NULL;
        size_t n = 0;
        s = lt_store_steps(st, &steps, &n, &err);
        check_error(s, &err);
        for (size_t k = 0; s == LT_OK && k < n && k < 4; k++) {
            lt_step_plan p;
            lt_step_plan_init(&p);
            lt_sample *smp = NULL;
            lt_status g = lt_store_get_step(st, steps[k], &p, &smp, &err);
            check_error(g, &err);
            if (g == LT_OK) {
                check_error(lt_plan_validate(&p, 1e6, &err), &err);
                FILE *null = fopen("/dev/null", "w");
                if (null) {
                    lt_plan_print(null, &p, smp, 40);
                    fclose(null);
                }
            }
            free(smp);
            lt_step_plan_free(&p);
        }
        free(steps);
        size_t checked = 0;
        check_error(lt_store_validate(st, NULL, NULL, &checked, &err), &err);
        lt_store_close(st);
    }
    unlink(work_path);
    return 0;
}
