/*
 * plans/strategies/infinipipe.c — the infinipipe strategy: InfiniPipe's elastic pipeline parallelism
 * (Wang et al., "Data-Centric Elastic Pipeline Parallelism for Efficient Long-Context LLM
 * Training", Sec. 3) on the planner's one schedule representation (plans/schedule/schedule.h), cost
 * model (plans/cost/cost.h) and simulator (plans/schedule/sim.h). docs/strategies.md ("infinipipe") states
 * every rule; per step:
 *
 *   layout    InfiniPipe runs Ulysses SP of degree d_s x PP of degree d_p on the whole
 *             cluster; our analogue of d_s is the cost model's context-parallel degree c
 *             (lt_cost_model_set_cp): c DP ranks form one pipeline, dp / c pipelines. The
 *             step's samples are dealt over the pipelines longest-processing-time first on
 *             their forward + backward time. Each c in 1, 2, 4, ... (<= max_cp, c | dp) is
 *             planned; the fastest plan that fits the cap is kept.
 *   chunks    per pipeline, Alg. 1 (3.2, workload-balanced chunking) for N slices of the
 *             mesh, N in 1, 2, 4, ..., 64 while the longest sample has 2048 tokens per slice
 *             (plan.infinipipe_slices fixes N); the fastest simulated N is kept, per pipeline.
 *   grouping  Eq. 14 (3.3.2): the dependent groups, by chunk count (longer first, 3.3.1),
 *             split into consecutive 1F1B pipelines minimising Eq. 13's sum of delta +
 *             T_ckpt; lt_sched_multi_1f1b runs them one after the other.
 *   ckpt      Alg. 2 (3.3.3, Eqs. 15-20): per 1F1B pipeline, n + d_p - 1 integer variables
 *             C, ckpt(p, k) = C[f2b[k] + d_p - p], one memory row per stage and chunks
 *             window W_p(t) (read off the generated op order), minimise sum C. During the
 *             search the rows are covered by a greedy heuristic (CBC costs milliseconds per
 *             solve and the search prices hundreds of groups per step); the chosen plan's
 *             groups are then solved by CBC (plans/strategies/milp.h), the greedy answer being the
 *             fallback when CBC times out or fails.
 *
 * Deterministic: no clock or randomness in any choice, total orders in every sort.
 * The state (lt_infinipipe) keeps every scratch array and schedule from step to step; one
 * per planner, so one per thread.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h"                 /* lt_fail, lt_malloc_check, LT_CHECK */
#include "plans/cost/cost.h"           /* lt_cost_op, lt_cost_model_set_cp, lt_cost_model_states_bytes */
#include "plans/strategies/milp.h"     /* lt_milp_solve */
#include "plans/schedule/schedule.h"   /* lt_schedule, lt_sched_seq1f1b, lt_sched_multi_1f1b */
#include "plans/schedule/sim.h"        /* lt_sim */
#include "plans/strategies/internal.h" /* lt_plan_start, lt_plan_finish_rank, lt_plan_finish, ... */

/* N candidates of the per-step tuning (plan.infinipipe_slices = 0), each kept only while the
 * longest sample of the pipeline has at least IP_MIN_MEAN_SLICE tokens per slice (N = 1
 * always): slices much shorter run the GEMMs far below peak (InfiniPipe App. B). */
static const int IP_NS[] = {1, 2, 4, 8, 16, 32, 64};
#define IP_N_NS ((int)(sizeof IP_NS / sizeof IP_NS[0]))
#define IP_MIN_MEAN_SLICE 2048

/* The mesh (Alg. 1 line 1): rounds of the fixed-point iteration on the slice time, and the
 * relative gap between the last slice's time and the others' at which it stops. */
#define IP_MESH_ROUNDS 12
#define IP_MESH_TOL 1e-3

/* Tokens per GPU of the reference chunk whose GEMM rate prices a sample for the deal over
 * the pipelines (short samples run packed into chunks, at the rate of a chunk). */
#define IP_DEAL_REF_TOKENS 16384

/* Memory rows are written in GiB (CBC's tolerances are absolute); a deficit below this is
 * covered. */
#define IP_GIB LT_GIB
#define IP_EPS 1e-9

/* Most context-parallel degrees tried: c = 1, 2, 4, ..., 2^(IP_MAX_CPS - 1). */
#define IP_MAX_CPS 16

/* ---------------------------------------------------------------- types */

/* A sort key: ascending (k1, k2, k3), idx = what is sorted. Every sort of this file uses it
 * (no comparator reads global state: planners run in threads), with keys negated for a
 * decreasing order and an index last for a total order. */
typedef struct ip_key {
    double k1, k2, k3;
    uint32_t idx;
} ip_key;

/* An item of Alg. 1's packing (lines 3-16): a short sample, whole, or the tail slice of a
 * split one. */
typedef struct ip_item {
    int32_t sample;     /* step sample index */
    int64_t begin, end; /* tokens [begin, end) of the sample (begin > 0: a tail slice) */
    double time;        /* backward time of one layer, as Alg. 1 adds it up (item_time) */
    int32_t seq;        /* a tail: its sequence in seqs[]; -1: a short sample */
    int32_t bucket;     /* the bucket it went into */
} ip_item;

/* A sequence longer than the mesh's first slice (Alg. 1 line 2: split_seqs). */
typedef struct ip_seq {
    int32_t sample;
    int64_t length;
    int n_split;       /* mesh slices cut off before its tail: chunks = n_split + 1 */
    int32_t tail;      /* its tail item */
    double time;       /* backward time of its slices (its order among equal chunk counts) */
} ip_seq;

/* A bucket of Alg. 1 (lines 3-16): the chunk it becomes holds its items. */
typedef struct ip_bucket {
    double time;     /* sum of its items' times */
    int64_t tokens;
    int32_t tail;    /* the tail item it was initialised with (a hybrid chunk), or -1 (batched) */
} ip_bucket;

/* What Alg. 1 did for one pipeline (params, tests). */
typedef struct ip_alg1 {
    int n;               /* N: slices of the mesh */
    int64_t *bounds;     /* [n + 1]: mesh slice j = tokens [bounds[j], bounds[j + 1]) of the longest */
    double t_t0, t_t;    /* the time threshold from the mesh, and after line 16's perturbations */
    int64_t t_m;         /* the token threshold: the largest mesh slice */
    int perturbations;   /* times line 16 raised T_t */
    size_t n_split, n_hybrid, n_batched, n_tail_alone; /* chunks of each kind (a tail whose bucket
                                                           got no short sample is alone) */
} ip_alg1;

/* The memory rows of Alg. 2 for one 1F1B pipeline: sum_k value[k] x[col[k]] >= need[r]
 * over the rows violated at C = 0 (Eq. 20 with I[k] moved to the right-hand side), in GiB. */
typedef struct ip_rows {
    int n_vars;       /* n + d_p - 1 */
    int n_rows;
    double *ub;       /* [n_vars]: the layers of the stages a variable serves */
    int *row_start;   /* [n_rows + 1] */
    int *col;         /* [nnz] */
    double *val;      /* [nnz]: F[k] of Eq. 19 on the row's stage, GiB per layer */
    double *need;     /* [n_rows]: sum of I[k] + work - G'_p, GiB */
    size_t cap_vars, cap_rows, cap_nnz;
} ip_rows;

/* One pipeline's plan as the search keeps it. */
typedef struct ip_pipe {
    lt_schedule sched;
    size_t *group_start; /* [n_groups + 1]: units of each 1F1B pipeline (Eq. 14's groups) */
    size_t n_groups, cap_groups;
    double time;         /* simulated time (0 when empty) */
    double peak;         /* simulated peak */
    int n;               /* N of Alg. 1 */
    int recompute;       /* sum of C over its groups (Eq. 17 without F-hat) */
    int raised;          /* layers raised by the simulated-peak rule */
    bool ok;             /* fits the cap */
} ip_pipe;

struct lt_infinipipe {
    lt_plan_config pc;
    int n_cps;
    int cps[IP_MAX_CPS];
    lt_cost_model cms[IP_MAX_CPS]; /* pc.cm with cp = cps[i] */
    double sync;                   /* lt_plan_max_dp_sync (the same for every c) */
    lt_sim sim;
    lt_cost_sim_ctx ctx;
    /* sorting */
    ip_key *keys;
    size_t cap_keys;
    /* the deal */
    size_t cap_n;
    double *sample_time;  /* [cap_n] */
    int *pipe_of;         /* [cap_n] for the c being planned */
    int *best_pipe_of;    /* [cap_n] for the best c so far */
    uint32_t *members;    /* [cap_n] samples pipeline by pipeline */
    size_t *pipe_start;   /* [dp + 1] */
    double *pipe_load;    /* [dp] */
    int *pipe_order;      /* [dp] pipelines by decreasing load */
    /* pipelines: the best N of each for the c being planned, and for the best c so far */
    ip_pipe *cur, *best;  /* [dp] */
    ip_pipe trial;
    /* Alg. 1 */
    ip_item *items;       /* [cap_items] */
    ip_seq *seqs;         /* [cap_items] */
    uint32_t *by_bucket;  /* [cap_items]: items bucket by bucket */
    ip_bucket *buckets;   /* [cap_buckets] */
    size_t *bucket_start; /* [cap_buckets + 1] */
    size_t cap_items, cap_buckets;
    int64_t *bounds;      /* [cap_bounds] */
    size_t cap_bounds;
    ip_alg1 alg1;
    /* per unit of the trial schedule */
    size_t cap_units;
    uint32_t *ident;      /* [cap_units]: 0, 1, 2, ... (every per-unit array has cap_units) */
    int *unit_class;      /* chunks of the unit's dependent group */
    double *unit_fwd;     /* forward time of the unit on stage 0, no recompute */
    double *unit_bwd;
    double *coef_i;       /* [pp x cap_units], stage-major: I[k] of Alg. 2 line 3, GiB (act + kv) */
    double *coef_f;       /* [pp x cap_units]: F[k] of line 5, GiB saved per recomputed layer */
    double *coef_w;       /* [pp x cap_units]: GiB its ops need while they run, at most (B with
                             recomputation) */
    int *stage_class;     /* [pp]: the first stage whose op costs equal this stage's */
    double *stage_room;   /* [pp]: G'_p = cap - model states - reserved, GiB */
    int *stage_layers;    /* [pp] */
    /* Alg. 2 */
    ip_rows rows;
    double *x, *x_cbc;    /* [cap_x] */
    int *var_start;       /* [cap_x + 1]: the entries of every variable (the transpose) */
    double *deficit;      /* [cap_deficit] */
    int *row_of_entry;    /* [cap_entries] */
    int *var_entries;     /* [cap_entries] */
    size_t cap_x, cap_deficit, cap_entries;
    uint32_t *in_flight;  /* windows */
    size_t *flight_pos;
    int *bpos, *rc_of;    /* backward position and recompute of a group's units */
    /* Eq. 14 */
    size_t *class_start;  /* [cap_units + 1] */
    double *dp_cost;      /* [cap_units + 1] */
    size_t *dp_from;      /* [cap_units + 1] */
};

/* ---------------------------------------------------------------- small helpers */

/* The capacity for `want` elements: cap, or cap doubled (from 16) until they fit. */
static size_t capacity_for(size_t cap, size_t want) {
    if (want <= cap) return cap;
    size_t c = cap ? cap : 16;
    while (c < want) c *= 2;
    return c;
}

static int cmp_keys(const void *a, const void *b) {
    const ip_key *x = a, *y = b;
    if (x->k1 != y->k1) return x->k1 < y->k1 ? -1 : 1;
    if (x->k2 != y->k2) return x->k2 < y->k2 ? -1 : 1;
    if (x->k3 != y->k3) return x->k3 < y->k3 ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static void sort_keys(ip_key *k, size_t n) {
    if (n > 1) qsort(k, n, sizeof *k, cmp_keys);
}

static int layers_of_stage(const lt_cost_model *cm, int st) {
    uint32_t b, e;
    lt_schedule_stage_layers(cm->model.layers, cm->pp, st, &b, &e);
    return (int)(e - b);
}

/* The estimate of an op of `kind` over the layers [lb, le) for slices (keeps_kv per slice). */
static void estimate(const lt_cost_model *cm, const lt_slice *sl, size_t n, const bool *keeps, lt_op_kind kind,
                     uint32_t lb, uint32_t le, int recompute, lt_op_estimate *out) {
    lt_op op = {.kind = (uint8_t)kind, .part = LT_PART_ALL, .recompute_layers = (uint16_t)recompute, .unit = 0,
                .layer_begin = lb, .layer_end = le};
    lt_cost_op(cm, sl, n, keeps, &op, out);
}

/* The backward time of one layer (layer 0: the embedding costs nothing) over the slice
 * [b, e) of a sample, alone: InfiniPipe Eq. 4 for the backward pass, from our cost model.
 * The mesh of Alg. 1 line 1 cuts the longest sample into slices of equal such times. */
static double slice_bwd_time(const lt_cost_model *cm, int64_t b, int64_t e) {
    lt_slice sl = {0, b, e};
    bool keeps = false;
    lt_op_estimate est;
    estimate(cm, &sl, 1, &keeps, LT_OP_B, 0, 1, 0, &est);
    return est.cost.time;
}

/* Seconds per token of the GEMMs and TP collectives of one layer's backward (fwd: + forward)
 * in a unit of ref tokens: short samples run packed into chunks, at a chunk's rate. */
static double linear_rate(const lt_cost_model *cm, int64_t ref, bool with_forward) {
    lt_slice sl = {0, 0, ref > 0 ? ref : 1};
    bool keeps = false;
    lt_op_estimate b, f;
    estimate(cm, &sl, 1, &keeps, LT_OP_B, 0, 1, 0, &b);
    double t = b.gemm_time + b.tp_comm_time;
    if (with_forward) {
        estimate(cm, &sl, 1, &keeps, LT_OP_F, 0, 1, 0, &f);
        t += f.gemm_time + f.tp_comm_time;
    }
    return t / (double)sl.end;
}

/* The attention time of one layer over the slice [b, e) (backward; fwd: + forward). */
static double attention_time(const lt_cost_model *cm, int64_t b, int64_t e, bool with_forward) {
    lt_slice sl = {0, b, e};
    bool keeps = false;
    lt_op_estimate est;
    estimate(cm, &sl, 1, &keeps, LT_OP_B, 0, 1, 0, &est);
    double t = est.attention_time;
    if (with_forward) {
        estimate(cm, &sl, 1, &keeps, LT_OP_F, 0, 1, 0, &est);
        t += est.attention_time;
    }
    return t;
}

/* The backward time of one layer over the slice [b, e) as Alg. 1's packing adds it up
 * (bucket.time + short_seq.time): the GEMMs and TP collectives at `rate` (linear_rate of a
 * chunk of T_m tokens: short samples run packed, at a chunk's efficiency), the slice's causal
 * attention with its context at its own efficiency (cost.h). */
static double item_time(const lt_cost_model *cm, double rate, int64_t b, int64_t e) {
    return rate * (double)(e - b) + attention_time(cm, b, e, false);
}

/* ---------------------------------------------------------------- Alg. 1: the mesh */

/* The largest e in [lo, hi] with slice_bwd_time(b, e) <= tau (lo when none is). */
static int64_t cut_at_time(const lt_cost_model *cm, int64_t b, int64_t lo, int64_t hi, double tau) {
    if (slice_bwd_time(cm, b, lo) > tau) return lo;
    while (lo < hi) { /* invariant: time(b, lo) <= tau */
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (slice_bwd_time(cm, b, mid) <= tau) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/*
 * InfiniPipe Alg. 1 line 1, M.split(max(S), N): the longest sample's tokens [0, longest) cut
 * into n slices of equal backward time (slice_bwd_time: the cost model's B op over the slice,
 * with its attention context). bounds[0] = 0 < bounds[1] < ... < bounds[n] = longest.
 * Each round cuts n - 1 slices of time tau from the front (bisection on the token boundary)
 * and moves tau by (last - tau) / n, the last slice's excess spread over the n slices (the
 * times add up almost exactly: GEMM efficiency is flat over the mesh's slice sizes), until the
 * last slice is within IP_MESH_TOL of tau (else tau by bisection). Requires 1 <= n <= longest.
 */
static void mesh_split(const lt_cost_model *cm, int64_t longest, int n, int64_t *bounds) {
    LT_CHECK(n >= 1 && (int64_t)n <= longest);
    bounds[0] = 0;
    bounds[n] = longest;
    if (n == 1) return;
    double tau = slice_bwd_time(cm, 0, longest) / n;
    for (int round = 0; round < IP_MESH_ROUNDS; round++) {
        for (int j = 0; j + 1 < n; j++)
            bounds[j + 1] = cut_at_time(cm, bounds[j], bounds[j] + 1, longest - (n - 1 - j), tau);
        double last = slice_bwd_time(cm, bounds[n - 1], longest);
        if (fabs(last - tau) <= IP_MESH_TOL * tau) return;
        tau += (last - tau) / n;
    }
    /* the times did not add up (an exposed context-parallel ring, max(0, ring - attention),
     * is not additive over slices): bisect tau, the last slice's excess falling as tau
     * grows, and keep the closest cut */
    double lo = 0, hi = slice_bwd_time(cm, 0, longest), best = tau, best_gap = INFINITY;
    for (int it = 0; it < 64 && hi - lo > 1e-12 * hi; it++) {
        tau = 0.5 * (lo + hi);
        for (int j = 0; j + 1 < n; j++)
            bounds[j + 1] = cut_at_time(cm, bounds[j], bounds[j] + 1, longest - (n - 1 - j), tau);
        double gap = slice_bwd_time(cm, bounds[n - 1], longest) - tau;
        if (fabs(gap) < best_gap) best_gap = fabs(gap), best = tau;
        if (fabs(gap) <= IP_MESH_TOL * tau) return;
        if (gap > 0) lo = tau;
        else hi = tau;
    }
    for (int j = 0; j + 1 < n; j++)
        bounds[j + 1] = cut_at_time(cm, bounds[j], bounds[j] + 1, longest - (n - 1 - j), best);
}

/* ---------------------------------------------------------------- Alg. 1: chunking */

static void reserve_items(lt_infinipipe *ip, size_t n) {
    if (n <= ip->cap_items) return;
    size_t c = capacity_for(ip->cap_items, n);
    ip->items = lt_realloc_check(ip->items, c * sizeof *ip->items);
    ip->seqs = lt_realloc_check(ip->seqs, c * sizeof *ip->seqs);
    ip->by_bucket = lt_realloc_check(ip->by_bucket, c * sizeof *ip->by_bucket);
    ip->cap_items = c;
}

static void reserve_buckets(lt_infinipipe *ip, size_t n) {
    if (n <= ip->cap_buckets) return;
    size_t c = capacity_for(ip->cap_buckets, n);
    ip->buckets = lt_realloc_check(ip->buckets, c * sizeof *ip->buckets);
    ip->bucket_start = lt_realloc_check(ip->bucket_start, (c + 1) * sizeof *ip->bucket_start);
    ip->cap_buckets = c;
}

static ip_key *reserve_keys(lt_infinipipe *ip, size_t n) {
    if (n > ip->cap_keys) {
        size_t c = capacity_for(ip->cap_keys, n);
        ip->keys = lt_realloc_check(ip->keys, c * sizeof *ip->keys);
        ip->cap_keys = c;
    }
    return ip->keys;
}

static void reserve_units(lt_infinipipe *ip, size_t n);

/*
 * InfiniPipe Alg. 1 for one pipeline: its samples members[0..n) (step indices; lengths of
 * the step) into chunks, appended to the empty schedule s as units in the 1F1B order of
 * 3.3.1: the split sequences by decreasing chunk count (then time, then index), each as
 * its split chunks in token order followed by its tail's chunk (the hybrid chunk, or the
 * tail alone); then the batched chunks by decreasing time. unit_class[u] = the chunk count
 * of the unit's dependent group (1 for a batched chunk). n_mesh = N (1 <= N <= the longest
 * sample's tokens). Details and the one deviation (line 16) in docs/strategies.md.
 */
static void chunk_pipeline(lt_infinipipe *ip, const lt_cost_model *cm, const uint32_t *members, size_t n,
                           const int64_t *lengths, int n_mesh, lt_schedule *s) {
    ip_alg1 *a = &ip->alg1;
    memset(a, 0, sizeof *a);
    if (n == 0) return;
    int64_t longest = 0;
    for (size_t i = 0; i < n; i++)
        if (lengths[members[i]] > longest) longest = lengths[members[i]];
    /* line 1: the mesh and the thresholds */
    if ((size_t)n_mesh + 1 > ip->cap_bounds) {
        ip->cap_bounds = capacity_for(ip->cap_bounds, (size_t)n_mesh + 1);
        ip->bounds = lt_realloc_check(ip->bounds, ip->cap_bounds * sizeof *ip->bounds);
    }
    int64_t *bounds = ip->bounds;
    mesh_split(cm, longest, n_mesh, bounds);
    a->n = n_mesh;
    a->bounds = bounds;
    for (int j = 0; j < n_mesh; j++)
        if (bounds[j + 1] - bounds[j] > a->t_m) a->t_m = bounds[j + 1] - bounds[j];
    /* Alg. 1 adds item times up (item_time): the GEMMs at the rate of a chunk of T_m
     * tokens, the attention per slice; T_t is the mesh slices' time so measured */
    double rate = linear_rate(cm, a->t_m, false);
    for (int j = 0; j < n_mesh; j++) {
        double t = item_time(cm, rate, bounds[j], bounds[j + 1]);
        if (t > a->t_t0) a->t_t0 = t;
    }
    a->t_t = a->t_t0;

    /* line 2: split_seqs along the mesh: while a sequence extends past the end of its next
     * mesh slice, that slice is cut off (a split chunk); the rest is its tail slice */
    reserve_items(ip, n);
    size_t n_items = 0, n_seqs = 0, n_units = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t smp = (int32_t)members[i];
        int64_t len = lengths[smp];
        int j = 0;
        while (len > bounds[j + 1]) j++;
        ip_item *it = &ip->items[n_items];
        *it = (ip_item){smp, bounds[j], len, item_time(cm, rate, bounds[j], len), -1, -1};
        if (j > 0) {
            double t = it->time;
            for (int q = 0; q < j; q++) t += item_time(cm, rate, bounds[q], bounds[q + 1]);
            ip->seqs[n_seqs] = (ip_seq){smp, len, j, (int32_t)n_items, t};
            it->seq = (int32_t)n_seqs++;
            n_units += (size_t)j;
        }
        n_items++;
    }
    n_units += n_items; /* at most: one chunk per item, plus the split chunks */
    /* line 3: one bucket per tail slice (so no two tails ever share one: InfiniPipe 3.1.1) */
    reserve_buckets(ip, n_items);
    size_t n_buckets = 0;
    for (size_t k = 0; k < n_items; k++) {
        ip_item *it = &ip->items[k];
        if (it->seq < 0) continue;
        ip->buckets[n_buckets] = (ip_bucket){it->time, it->end - it->begin, (int32_t)k};
        it->bucket = (int32_t)n_buckets++;
    }
    /* line 4: the short samples by decreasing time (then length, then sample index) */
    ip_key *key = reserve_keys(ip, n_items);
    size_t n_short = 0;
    for (size_t k = 0; k < n_items; k++) {
        const ip_item *it = &ip->items[k];
        if (it->seq < 0)
            key[n_short++] = (ip_key){-it->time, -(double)(it->end - it->begin), (double)it->sample, (uint32_t)k};
    }
    sort_keys(key, n_short);
    /* lines 5-16: best-fit decreasing with both thresholds */
    for (size_t q = 0; q < n_short; q++) {
        ip_item *it = &ip->items[key[q].idx];
        int64_t tok = it->end - it->begin;
        int64_t min_tokens = INT64_MAX;
        for (size_t b = 0; b < n_buckets; b++)
            if (ip->buckets[b].tokens < min_tokens) min_tokens = ip->buckets[b].tokens;
        if (n_buckets == 0 || min_tokens + tok > a->t_m) { /* lines 7-8 */
            ip->buckets[n_buckets] = (ip_bucket){it->time, tok, -1};
            it->bucket = (int32_t)n_buckets++;
            continue;
        }
        for (;;) {
            /* lines 9-14: of the buckets within both thresholds, the one of least time per
             * token (ties: the bucket made first) */
            int32_t pick = -1;
            double pick_ratio = 0;
            for (size_t b = 0; b < n_buckets; b++) {
                const ip_bucket *bk = &ip->buckets[b];
                if (bk->time + it->time > a->t_t || bk->tokens + tok > a->t_m) continue;
                double ratio = bk->time / (double)bk->tokens;
                if (pick < 0 || ratio < pick_ratio) {
                    pick = (int32_t)b;
                    pick_ratio = ratio;
                }
            }
            if (pick >= 0) {
                ip->buckets[pick].time += it->time;
                ip->buckets[pick].tokens += tok;
                it->bucket = pick;
                break;
            }
            /* line 16: perturb T_t to the least bucket time + this item's time, over the
             * buckets with room for its tokens (line 7 guarantees one; taken over all
             * buckets, as printed, the loop would not end when the bucket of least time
             * lacks the room), then line 9 again */
            double t_min = INFINITY;
            for (size_t b = 0; b < n_buckets; b++)
                if (ip->buckets[b].tokens + tok <= a->t_m && ip->buckets[b].time < t_min) t_min = ip->buckets[b].time;
            LT_CHECK(isfinite(t_min));
            a->t_t = t_min + it->time;
            a->perturbations++;
        }
    }

    /* line 17: the buckets become chunks: their items, the tail first, then the short
     * samples by index */
    size_t *bs = ip->bucket_start;
    memset(bs, 0, (n_buckets + 1) * sizeof *bs);
    for (size_t k = 0; k < n_items; k++) {
        const ip_item *it = &ip->items[k];
        key[k] = (ip_key){(double)it->bucket, it->seq >= 0 ? 0.0 : 1.0, (double)it->sample, (uint32_t)k};
        bs[it->bucket + 1]++;
    }
    sort_keys(key, n_items);
    for (size_t k = 0; k < n_items; k++) ip->by_bucket[k] = key[k].idx;
    for (size_t b = 0; b < n_buckets; b++) bs[b + 1] += bs[b];

    /* the units in 1F1B order (3.3.1: longer sequences first): the split sequences by
     * decreasing chunk count, then time, then index, each as its split chunks and its
     * tail's chunk; then the batched chunks by decreasing time (then creation) */
    reserve_units(ip, n_units);
    for (size_t q = 0; q < n_seqs; q++) {
        const ip_seq *sq = &ip->seqs[q];
        key[q] = (ip_key){-(double)sq->n_split, -sq->time, (double)sq->sample, (uint32_t)q};
    }
    sort_keys(key, n_seqs);
    for (size_t q = 0; q < n_seqs; q++) {
        const ip_seq *sq = &ip->seqs[key[q].idx];
        for (int j = 0; j < sq->n_split; j++) {
            uint32_t sl = lt_schedule_add_slice(s, sq->sample, bounds[j], bounds[j + 1]);
            ip->unit_class[lt_schedule_add_unit(s, sl, 1)] = sq->n_split + 1;
            a->n_split++;
        }
        int32_t b = ip->items[sq->tail].bucket;
        uint32_t first = (uint32_t)s->n_slices;
        for (size_t k = bs[b]; k < bs[b + 1]; k++) {
            const ip_item *it = &ip->items[ip->by_bucket[k]];
            lt_schedule_add_slice(s, it->sample, it->begin, it->end);
        }
        uint32_t cnt = (uint32_t)(bs[b + 1] - bs[b]);
        ip->unit_class[lt_schedule_add_unit(s, first, cnt)] = sq->n_split + 1;
        if (cnt > 1) a->n_hybrid++;
        else a->n_tail_alone++;
    }
    size_t n_batched = 0;
    for (size_t b = 0; b < n_buckets; b++)
        if (ip->buckets[b].tail < 0) key[n_batched++] = (ip_key){-ip->buckets[b].time, (double)b, 0, (uint32_t)b};
    sort_keys(key, n_batched);
    for (size_t q = 0; q < n_batched; q++) {
        uint32_t b = key[q].idx;
        uint32_t first = (uint32_t)s->n_slices;
        for (size_t k = bs[b]; k < bs[b + 1]; k++) {
            const ip_item *it = &ip->items[ip->by_bucket[k]];
            lt_schedule_add_slice(s, it->sample, it->begin, it->end);
        }
        ip->unit_class[lt_schedule_add_unit(s, first, (uint32_t)(bs[b + 1] - bs[b]))] = 1;
    }
    a->n_batched = n_batched;
    LT_CHECK(s->n_units <= n_units);
}

/* ---------------------------------------------------------------- Alg. 2: coefficients */

static void reserve_units(lt_infinipipe *ip, size_t n) {
    if (n <= ip->cap_units && ip->ident) return;
    size_t c = capacity_for(ip->cap_units, n), pp = (size_t)ip->pc.cm.pp;
    ip->unit_class = lt_realloc_check(ip->unit_class, c * sizeof *ip->unit_class);
    ip->ident = lt_realloc_check(ip->ident, c * sizeof *ip->ident);
    for (size_t u = 0; u < c; u++) ip->ident[u] = (uint32_t)u;
    ip->unit_fwd = lt_realloc_check(ip->unit_fwd, c * sizeof *ip->unit_fwd);
    ip->unit_bwd = lt_realloc_check(ip->unit_bwd, c * sizeof *ip->unit_bwd);
    ip->coef_i = lt_realloc_check(ip->coef_i, c * pp * sizeof *ip->coef_i);
    ip->coef_f = lt_realloc_check(ip->coef_f, c * pp * sizeof *ip->coef_f);
    ip->coef_w = lt_realloc_check(ip->coef_w, c * pp * sizeof *ip->coef_w);
    ip->in_flight = lt_realloc_check(ip->in_flight, c * sizeof *ip->in_flight);
    ip->flight_pos = lt_realloc_check(ip->flight_pos, c * sizeof *ip->flight_pos);
    ip->bpos = lt_realloc_check(ip->bpos, c * sizeof *ip->bpos);
    ip->rc_of = lt_realloc_check(ip->rc_of, c * sizeof *ip->rc_of);
    ip->class_start = lt_realloc_check(ip->class_start, (c + 1) * sizeof *ip->class_start);
    ip->dp_cost = lt_realloc_check(ip->dp_cost, (c + 1) * sizeof *ip->dp_cost);
    ip->dp_from = lt_realloc_check(ip->dp_from, (c + 1) * sizeof *ip->dp_from);
    ip->cap_units = c;
}

/*
 * Alg. 2 lines 2-5 from our cost model, per unit u of s and stage class: I[u] = the bytes
 * the F of u keeps with no layer recomputed (activations + keys/values, Eq. 5), F[u] = the
 * bytes one recomputed layer saves (Eqs. 9-10: a recomputed layer keeps its input; K/V of a
 * split sample's non-last slice are kept regardless), W[u] = the transient bytes of u's B
 * with recomputation (the largest any of its ops needs while it runs). Also the forward and
 * backward times of u on stage 0 (delta of Eq. 13, F-hat of Eq. 17).
 */
static void unit_coefficients(lt_infinipipe *ip, const lt_cost_model *cm, const lt_schedule *s) {
    reserve_units(ip, s->n_units);
    lt_cost_sim_costs_prepared(&ip->ctx, cm, s); /* the K/V flags of s's slices */
    int pp = cm->pp;
    for (size_t u = 0; u < s->n_units; u++) {
        const lt_unit *un = &s->units[u];
        const lt_slice *sl = &s->slices[un->first_slice];
        const bool *keeps = &ip->ctx.keeps_kv[un->first_slice];
        for (int st = 0; st < pp; st++) {
            size_t at = (size_t)st * ip->cap_units + u;
            if (ip->stage_class[st] != st) {
                size_t from = (size_t)ip->stage_class[st] * ip->cap_units + u;
                ip->coef_i[at] = ip->coef_i[from];
                ip->coef_f[at] = ip->coef_f[from];
                ip->coef_w[at] = ip->coef_w[from];
                continue;
            }
            uint32_t lb, le;
            lt_schedule_stage_layers(cm->model.layers, pp, st, &lb, &le);
            lt_op_estimate f0, f1, b1;
            estimate(cm, sl, un->n_slices, keeps, LT_OP_F, lb, le, 0, &f0);
            estimate(cm, sl, un->n_slices, keeps, LT_OP_F, lb, le, 1, &f1);
            estimate(cm, sl, un->n_slices, keeps, LT_OP_B, lb, le, 1, &b1);
            ip->coef_i[at] = (f0.cost.act_bytes + f0.cost.kv_bytes) / IP_GIB;
            ip->coef_f[at] = (f0.cost.act_bytes - f1.cost.act_bytes) / IP_GIB;
            double w = b1.cost.work_bytes > f1.cost.work_bytes ? b1.cost.work_bytes : f1.cost.work_bytes;
            ip->coef_w[at] = w / IP_GIB;
            if (st == 0) {
                lt_op_estimate b0;
                estimate(cm, sl, un->n_slices, keeps, LT_OP_B, lb, le, 0, &b0);
                ip->unit_fwd[u] = f0.cost.time;
                ip->unit_bwd[u] = b0.cost.time;
            }
        }
    }
}

/* ---------------------------------------------------------------- Alg. 2: rows and solvers */

static void rows_reserve(ip_rows *r, size_t vars, size_t rows, size_t nnz) {
    if (vars > r->cap_vars) {
        r->cap_vars = capacity_for(r->cap_vars, vars);
        r->ub = lt_realloc_check(r->ub, r->cap_vars * sizeof *r->ub);
    }
    if (rows > r->cap_rows) {
        r->cap_rows = capacity_for(r->cap_rows, rows);
        r->need = lt_realloc_check(r->need, r->cap_rows * sizeof *r->need);
        r->row_start = lt_realloc_check(r->row_start, (r->cap_rows + 1) * sizeof *r->row_start);
    }
    if (nnz > r->cap_nnz) {
        r->cap_nnz = capacity_for(r->cap_nnz, nnz);
        r->col = lt_realloc_check(r->col, r->cap_nnz * sizeof *r->col);
        r->val = lt_realloc_check(r->val, r->cap_nnz * sizeof *r->val);
    }
}

static void rows_free(ip_rows *r) {
    free(r->ub);
    free(r->row_start);
    free(r->col);
    free(r->val);
    free(r->need);
    memset(r, 0, sizeof *r);
}

/*
 * The rows of Alg. 2 (Eq. 20) for the 1F1B pipeline of units [ua, ub) of s, whose ops are
 * the ops of s over those units (lt_sched_seq1f1b's order; one pipeline of
 * lt_sched_multi_1f1b). Variables (Eqs. 15-16, 0-based): the unit whose backward is the b-th
 * of the pipeline recomputes C[b + d_p - 1 - st] layers on stage st; ub[v] = the fewest layers
 * of the stages v serves. Windows W_p(t) (Eq. 7), read off the op order: on every stage, the
 * units forwarded and not yet backwarded just before each backward that follows a forward
 * (between backwards the set only shrinks). The row of a window:
 *     sum_{k in W} I[k] - F[k] C[v(k)] + max_{k in W} W[k] <= G'_p
 * (G'_p = cap - model states - reserved of the stage; the max term: the op running at the
 * peak), kept only when C = 0 violates it; written as sum F[k] C[v(k)] >= need.
 * Returns false when even C = ub leaves a row violated (the group cannot fit).
 */
static bool ckpt_rows(lt_infinipipe *ip, const lt_schedule *s, uint32_t ua, uint32_t ub) {
    int pp = s->stages;
    size_t n = ub - ua;
    ip_rows *r = &ip->rows;
    int nv = (int)n + pp - 1;
    rows_reserve(r, (size_t)nv, 1, 1);
    r->n_vars = nv;
    r->n_rows = 0;
    r->row_start[0] = 0;
    for (int v = 0; v < nv; v++) r->ub[v] = INFINITY;
    for (int st = 0; st < pp; st++)
        for (size_t b = 0; b < n; b++) {
            int v = (int)b + pp - 1 - st;
            if (ip->stage_layers[st] < r->ub[v]) r->ub[v] = ip->stage_layers[st];
        }
    /* backward positions: the backward stream is the same on every stage (schedule.h) */
    size_t nb = 0;
    for (size_t i = 0; i < s->stage[0].n; i++) {
        const lt_op *op = &s->stage[0].ops[i];
        if (op->unit >= ua && op->unit < ub && op->kind == LT_OP_B) ip->bpos[op->unit - ua] = (int)nb++;
    }
    LT_CHECK(nb == n);
    bool feasible = true;
    for (int st = 0; st < pp; st++) {
        const double *ci = ip->coef_i + (size_t)st * ip->cap_units, *cf = ip->coef_f + (size_t)st * ip->cap_units;
        const double *cw = ip->coef_w + (size_t)st * ip->cap_units;
        size_t nf = 0;
        bool last_was_f = false;
        for (size_t i = 0; i < s->stage[st].n; i++) {
            const lt_op *op = &s->stage[st].ops[i];
            if (op->unit < ua || op->unit >= ub) continue;
            if (op->kind != LT_OP_B) {
                ip->flight_pos[op->unit - ua] = nf;
                ip->in_flight[nf++] = op->unit;
                last_was_f = true;
                continue;
            }
            if (last_was_f) { /* the window W_p(t) before this backward */
                double need = -ip->stage_room[st], work = 0, cover = 0;
                for (size_t k = 0; k < nf; k++) {
                    uint32_t u = ip->in_flight[k];
                    need += ci[u];
                    if (cw[u] > work) work = cw[u];
                }
                need += work;
                if (need > IP_EPS) {
                    rows_reserve(r, (size_t)nv, (size_t)r->n_rows + 1, (size_t)r->row_start[r->n_rows] + nf);
                    int at = r->row_start[r->n_rows];
                    for (size_t k = 0; k < nf; k++) {
                        uint32_t u = ip->in_flight[k];
                        int v = ip->bpos[u - ua] + pp - 1 - st;
                        r->col[at] = v;
                        r->val[at++] = cf[u];
                        cover += cf[u] * r->ub[v];
                    }
                    r->need[r->n_rows] = need;
                    r->row_start[++r->n_rows] = at;
                    if (cover < need - IP_EPS) feasible = false;
                }
            }
            last_was_f = false;
            /* drop the unit from the window (swap with the last) */
            size_t pos = ip->flight_pos[op->unit - ua];
            uint32_t moved = ip->in_flight[--nf];
            ip->in_flight[pos] = moved;
            ip->flight_pos[moved - ua] = pos;
        }
    }
    return feasible;
}

static void reserve_x(lt_infinipipe *ip, size_t n) {
    if (n <= ip->cap_x) return;
    size_t c = capacity_for(ip->cap_x, n);
    ip->x = lt_realloc_check(ip->x, c * sizeof *ip->x);
    ip->x_cbc = lt_realloc_check(ip->x_cbc, c * sizeof *ip->x_cbc);
    ip->var_start = lt_realloc_check(ip->var_start, (c + 1) * sizeof *ip->var_start);
    ip->cap_x = c;
}

/* For the greedy cover: the entries of every variable (var_start, var_entries: the
 * transpose of ip->rows), the row of every entry, and the deficits of x (need - cover). */
static void rows_prepare(lt_infinipipe *ip, const double *x) {
    const ip_rows *r = &ip->rows;
    size_t nnz = (size_t)r->row_start[r->n_rows];
    if (nnz > ip->cap_entries) {
        ip->cap_entries = capacity_for(ip->cap_entries, nnz);
        ip->var_entries = lt_realloc_check(ip->var_entries, ip->cap_entries * sizeof *ip->var_entries);
        ip->row_of_entry = lt_realloc_check(ip->row_of_entry, ip->cap_entries * sizeof *ip->row_of_entry);
    }
    if ((size_t)r->n_rows > ip->cap_deficit) {
        ip->cap_deficit = capacity_for(ip->cap_deficit, (size_t)r->n_rows);
        ip->deficit = lt_realloc_check(ip->deficit, ip->cap_deficit * sizeof *ip->deficit);
    }
    reserve_x(ip, (size_t)r->n_vars);
    int *vs = ip->var_start;
    memset(vs, 0, ((size_t)r->n_vars + 1) * sizeof *vs);
    for (size_t k = 0; k < nnz; k++) vs[r->col[k] + 1]++;
    for (int v = 0; v < r->n_vars; v++) vs[v + 1] += vs[v];
    for (int row = 0; row < r->n_rows; row++) {
        double d = r->need[row];
        for (int k = r->row_start[row]; k < r->row_start[row + 1]; k++) {
            ip->row_of_entry[k] = row;
            ip->var_entries[vs[r->col[k]]++] = k;
            d -= r->val[k] * x[r->col[k]];
        }
        ip->deficit[row] = d;
    }
    for (int v = r->n_vars; v > 0; v--) vs[v] = vs[v - 1];
    vs[0] = 0;
}

/*
 * The fallback heuristic of Alg. 2 (and the search's estimate of T_ckpt): a greedy cover of
 * the rows. While a row is violated, take the one with the largest deficit and, of its
 * variables below their bound, the one that covers the most deficit over all violated rows
 * (sum of min(F, deficit)); raise it by the layers that row still needs from it (at most to
 * its bound). Then lower, from the last variable to the first, every variable by the layers
 * no row needs. Ties go to the lower index. x gets the solution; returns sum x, or -1 when the rows cannot be
 * covered (ckpt_rows said so already).
 */
static int ckpt_greedy(lt_infinipipe *ip, double *x) {
    const ip_rows *r = &ip->rows;
    for (int v = 0; v < r->n_vars; v++) x[v] = 0;
    rows_prepare(ip, x);
    double *d = ip->deficit;
    const int *vs = ip->var_start, *ve = ip->var_entries, *row_of = ip->row_of_entry;
    for (;;) {
        int worst = -1;
        for (int row = 0; row < r->n_rows; row++)
            if (d[row] > IP_EPS && (worst < 0 || d[row] > d[worst])) worst = row;
        if (worst < 0) break;
        int pick = -1;
        double pick_score = 0;
        for (int k = r->row_start[worst]; k < r->row_start[worst + 1]; k++) {
            int v = r->col[k];
            if (x[v] + 1 > r->ub[v] + 1e-9) continue;
            double score = 0;
            for (int e = vs[v]; e < vs[v + 1]; e++) {
                int kk = ve[e], row = row_of[kk];
                if (d[row] > IP_EPS) score += r->val[kk] < d[row] ? r->val[kk] : d[row];
            }
            if (pick < 0 || score > pick_score || (score == pick_score && v < pick)) {
                pick = v;
                pick_score = score;
            }
        }
        if (pick < 0 || !(pick_score > 0)) return -1;
        /* as many layers as the worst row still needs from it (the pruning below takes
         * back what turns out not to be needed) */
        double val = 0;
        for (int k = r->row_start[worst]; k < r->row_start[worst + 1]; k++)
            if (r->col[k] == pick) val = r->val[k];
        double step = ceil(d[worst] / val - 1e-9), room = r->ub[pick] - x[pick];
        if (!(step >= 1)) step = 1;
        if (step > room) step = room;
        x[pick] += step;
        for (int e = vs[pick]; e < vs[pick + 1]; e++) d[row_of[ve[e]]] -= step * r->val[ve[e]];
    }
    int total = 0;
    for (int v = r->n_vars; v-- > 0;) {
        while (x[v] > 0) {
            bool spare = true;
            for (int e = vs[v]; e < vs[v + 1] && spare; e++)
                if (d[row_of[ve[e]]] + r->val[ve[e]] > IP_EPS) spare = false;
            if (!spare) break;
            x[v] -= 1;
            for (int e = vs[v]; e < vs[v + 1]; e++) d[row_of[ve[e]]] += r->val[ve[e]];
        }
        total += (int)x[v];
    }
    return total;
}

/* Alg. 2 lines 6-12 with CBC: minimise sum C (Eq. 20) subject to the rows. *status gets
 * CBC's outcome, *has whether x holds a solution (optimal or feasible). LT_ERR_INTERNAL only
 * for a problem the wrapper rejects (a bug here); CBC giving up is status error, and the
 * caller's fallback. */
static lt_status ckpt_cbc(lt_infinipipe *ip, double *x, lt_milp_status *status, bool *has, lt_error *err) {
    const ip_rows *r = &ip->rows;
    int nv = r->n_vars;
    double *obj = lt_malloc_check((size_t)nv * sizeof *obj);
    bool *is_int = lt_malloc_check((size_t)nv * sizeof *is_int);
    for (int v = 0; v < nv; v++) {
        obj[v] = 1;
        is_int[v] = true;
    }
    lt_milp_problem p = {.n_vars = nv,
                         .lb = NULL,
                         .ub = r->ub,
                         .obj = obj,
                         .is_int = is_int,
                         .maximize = false,
                         .n_rows = r->n_rows,
                         .row_start = r->n_rows ? r->row_start : NULL,
                         .col_index = r->col,
                         .value = r->val,
                         .row_lb = r->need,
                         .row_ub = NULL};
    lt_milp_options opt = lt_plan_milp_options(&ip->pc);
    lt_milp_result res;
    lt_error e2;
    lt_status st = lt_milp_solve(&p, &opt, x, &res, &e2);
    free(obj);
    free(is_int);
    *has = false;
    if (st == LT_ERR_USAGE) {
        *status = LT_MILP_ERROR;
        if (err) *err = e2;
        lt_error_prefix(err, "infinipipe: the checkpointing MILP: ");
        return LT_ERR_INTERNAL;
    }
    *status = res.status;
    if (res.has_solution) {
        for (int v = 0; v < nv; v++) x[v] = floor(x[v] + 0.5);
        *has = true;
    }
    return LT_OK;
}

/* Recompute of the group [ua, ub) of s from C (Eq. 16): on stage st the unit of the b-th
 * backward recomputes min(C[b + pp - 1 - st], stage layers) layers, on its B and its F. */
static void apply_ckpt(lt_infinipipe *ip, lt_schedule *s, uint32_t ua, uint32_t ub, const double *c) {
    int pp = s->stages;
    for (int st = 0; st < pp; st++) {
        int b = 0;
        for (size_t i = 0; i < s->stage[st].n; i++) {
            lt_op *op = &s->stage[st].ops[i];
            if (op->unit < ua || op->unit >= ub || op->kind != LT_OP_B) continue;
            int v = c[b + pp - 1 - st] > 0 ? (int)c[b + pp - 1 - st] : 0;
            if (v > ip->stage_layers[st]) v = ip->stage_layers[st];
            ip->rc_of[op->unit - ua] = v;
            op->recompute_layers = (uint16_t)v;
            b++;
        }
        for (size_t i = 0; i < s->stage[st].n; i++) {
            lt_op *op = &s->stage[st].ops[i];
            if (op->unit >= ua && op->unit < ub && op->kind != LT_OP_B)
                op->recompute_layers = (uint16_t)ip->rc_of[op->unit - ua];
        }
    }
}

/* ---------------------------------------------------------------- Eq. 14: sequence grouping */

/* The schedule's ops cleared (slices and units kept). */
static void clear_ops(lt_schedule *s) {
    for (int st = 0; st < s->stages; st++) s->stage[st].n = 0;
}

/* T_ckpt of the 1F1B pipeline of units [ua, ub) (Eq. 17 with F-hat = its units' mean forward
 * time of one layer) by the greedy cover; INFINITY when it cannot fit. The ops of s are
 * replaced by that pipeline's. */
static double group_ckpt_time(lt_infinipipe *ip, lt_schedule *s, uint32_t ua, uint32_t ub) {
    clear_ops(s);
    lt_sched_seq1f1b(s, ip->ident + ua, ub - ua);
    if (!ckpt_rows(ip, s, ua, ub)) return INFINITY;
    if (ip->rows.n_rows == 0) return 0;
    reserve_x(ip, (size_t)ip->rows.n_vars);
    int c = ckpt_greedy(ip, ip->x);
    if (c < 0) return INFINITY;
    double fhat = 0;
    for (uint32_t u = ua; u < ub; u++) fhat += ip->unit_fwd[u];
    fhat /= (double)(ub - ua) * ip->stage_layers[0];
    return c * fhat;
}

/*
 * InfiniPipe Eq. 14 on the units of s (in the order chunk_pipeline made): classes are the
 * runs of equal chunk count (unit_class, non-increasing); a 1F1B pipeline takes consecutive
 * classes; dp[b] = min over a < b of dp[a] + delta + T_ckpt(classes a .. b-1), delta =
 * (d_p - 1) x the mean forward + backward time of a chunk on a stage (Eq. 13). The whole
 * range is tried first: when it needs no recomputation it is optimal (every grouping costs
 * at least delta per pipeline). Candidates that cannot lower dp[b] are not priced. Writes
 * the groups' unit ranges into pipe; returns false when no grouping fits.
 */
static bool group_sequences(lt_infinipipe *ip, lt_schedule *s, ip_pipe *pipe) {
    size_t nu = s->n_units;
    size_t m = 0;
    for (size_t u = 0; u < nu; u++)
        if (u == 0 || ip->unit_class[u] != ip->unit_class[u - 1]) ip->class_start[m++] = u;
    ip->class_start[m] = nu;
    double delta = 0;
    for (size_t u = 0; u < nu; u++) delta += ip->unit_fwd[u] + ip->unit_bwd[u];
    delta = (s->stages - 1) * delta / (double)nu;
    const size_t *cs = ip->class_start;
    pipe->n_groups = 0;
    double whole = group_ckpt_time(ip, s, 0, (uint32_t)nu);
    if (whole == 0) {
        ip->dp_from[m] = 0;
    } else {
        ip->dp_cost[0] = 0;
        for (size_t b = 1; b <= m; b++) {
            ip->dp_cost[b] = INFINITY;
            ip->dp_from[b] = 0;
            for (size_t a = 0; a < b; a++) {
                if (!(ip->dp_cost[a] + delta < ip->dp_cost[b])) continue;
                double t = a == 0 && b == m ? whole : group_ckpt_time(ip, s, (uint32_t)cs[a], (uint32_t)cs[b]);
                if (ip->dp_cost[a] + delta + t < ip->dp_cost[b]) {
                    ip->dp_cost[b] = ip->dp_cost[a] + delta + t;
                    ip->dp_from[b] = a;
                }
            }
        }
        if (!isfinite(ip->dp_cost[m])) return false;
    }
    /* the groups, first to last */
    size_t ng = 0;
    for (size_t b = m; b > 0; b = ip->dp_from[b]) ng++;
    if (ng + 1 > pipe->cap_groups) {
        pipe->cap_groups = capacity_for(pipe->cap_groups, ng + 1);
        pipe->group_start = lt_realloc_check(pipe->group_start, pipe->cap_groups * sizeof *pipe->group_start);
    }
    pipe->n_groups = ng;
    size_t k = ng;
    for (size_t b = m; b > 0; b = ip->dp_from[b]) pipe->group_start[k--] = cs[b];
    pipe->group_start[0] = 0;
    return true;
}

/* ---------------------------------------------------------------- one pipeline */

/* Simulate pipe->sched; while a stage's peak is over the cap (the rows only approximate the
 * simulator's memory), raise by one layer the recompute of every op of those stages. */
static lt_status simulate_fit(lt_infinipipe *ip, const lt_cost_model *cm, ip_pipe *pipe, lt_error *err) {
    lt_schedule *s = &pipe->sched;
    pipe->raised = 0;
    for (;;) {
        lt_status st = lt_plan_simulate(&ip->sim, &ip->ctx, cm, s, NULL, err);
        if (st != LT_OK) return st;
        pipe->time = ip->sim.step_time;
        pipe->peak = lt_plan_max_peak(&ip->sim);
        pipe->ok = !(pipe->peak > cm->mem_cap);
        if (pipe->ok) return LT_OK;
        bool raised = false;
        for (int g = 0; g < s->stages; g++) {
            if (!(ip->sim.peak_mem[g] > cm->mem_cap)) continue;
            for (size_t i = 0; i < s->stage[g].n; i++) {
                lt_op *op = &s->stage[g].ops[i];
                if (op->recompute_layers < ip->stage_layers[g]) {
                    op->recompute_layers++;
                    raised = true;
                }
            }
        }
        if (!raised) return LT_OK; /* every layer recomputed: it does not fit */
        pipe->raised++;
    }
}

/* The checkpointing of every group of pipe->sched (its ops: lt_sched_multi_1f1b of the
 * groups), by the greedy cover, or by CBC (out != NULL: the plan's final solve, outcomes
 * noted in out). pipe->recompute gets sum C. */
static lt_status checkpoint_groups(lt_infinipipe *ip, ip_pipe *pipe, lt_step_plan *out, lt_error *err) {
    lt_schedule *s = &pipe->sched;
    pipe->recompute = 0;
    for (size_t g = 0; g < pipe->n_groups; g++) {
        uint32_t ua = (uint32_t)pipe->group_start[g], ub = (uint32_t)pipe->group_start[g + 1];
        bool feasible = ckpt_rows(ip, s, ua, ub);
        reserve_x(ip, (size_t)ip->rows.n_vars);
        double *x = ip->x;
        if (ip->rows.n_rows == 0) { /* C = 0 is optimal: no solve (docs/strategies.md) */
            for (int v = 0; v < ip->rows.n_vars; v++) x[v] = 0;
        } else if (!feasible) { /* cannot fit: full recompute, the simulator reports it */
            for (int v = 0; v < ip->rows.n_vars; v++) x[v] = ip->rows.ub[v];
        } else {
            int greedy = ckpt_greedy(ip, x);
            LT_CHECK(greedy >= 0);
            if (out) {
                lt_milp_status ms;
                bool has;
                lt_status st = ckpt_cbc(ip, ip->x_cbc, &ms, &has, err);
                if (st != LT_OK) return st;
                lt_plan_note_solver(out, ms);
                if (has) {
                    double sum = 0;
                    for (int v = 0; v < ip->rows.n_vars; v++) sum += ip->x_cbc[v];
                    if (sum <= greedy) x = ip->x_cbc; /* a time-limited CBC may be worse */
                }
            }
        }
        for (int v = 0; v < ip->rows.n_vars; v++) pipe->recompute += (int)x[v];
        apply_ckpt(ip, s, ua, ub, x);
    }
    return LT_OK;
}

/* Plan one pipeline (samples members[0..n)) with N = n_mesh into pipe: Alg. 1, Eq. 14,
 * Alg. 2 (greedy), the schedule, the simulation. pipe->ok = fits. */
static lt_status plan_pipeline(lt_infinipipe *ip, const lt_cost_model *cm, const uint32_t *members, size_t n,
                               const int64_t *lengths, int n_mesh, ip_pipe *pipe, lt_error *err) {
    lt_schedule *s = &pipe->sched;
    lt_schedule_clear(s);
    pipe->n = n_mesh;
    pipe->n_groups = 0;
    pipe->recompute = pipe->raised = 0;
    pipe->time = pipe->peak = 0;
    pipe->ok = true;
    if (n == 0) return LT_OK;
    chunk_pipeline(ip, cm, members, n, lengths, n_mesh, s);
    unit_coefficients(ip, cm, s);
    if (group_sequences(ip, s, pipe)) {
        clear_ops(s);
        lt_sched_multi_1f1b(s, ip->ident, s->n_units, pipe->group_start, pipe->n_groups);
        lt_status st = checkpoint_groups(ip, pipe, NULL, err);
        if (st != LT_OK) return st;
        return simulate_fit(ip, cm, pipe, err);
    }
    /* no grouping fits: the most frugal plan (a 1F1B pipeline per class, every layer
     * recomputed), simulated for its peak (the memory error names it when nothing fits) */
    size_t m = 0;
    for (size_t u = 0; u < s->n_units; u++)
        if (u == 0 || ip->unit_class[u] != ip->unit_class[u - 1]) m++;
    if (m + 1 > pipe->cap_groups) {
        pipe->cap_groups = capacity_for(pipe->cap_groups, m + 1);
        pipe->group_start = lt_realloc_check(pipe->group_start, pipe->cap_groups * sizeof *pipe->group_start);
    }
    pipe->n_groups = 0;
    for (size_t u = 0; u < s->n_units; u++)
        if (u == 0 || ip->unit_class[u] != ip->unit_class[u - 1]) pipe->group_start[pipe->n_groups++] = u;
    pipe->group_start[m] = s->n_units;
    clear_ops(s);
    lt_sched_multi_1f1b(s, ip->ident, s->n_units, pipe->group_start, pipe->n_groups);
    lt_plan_set_recompute(s, lt_plan_max_stage_layers(cm));
    lt_status st = simulate_fit(ip, cm, pipe, err);
    pipe->ok = false;
    return st;
}

/* The N candidates for a pipeline whose longest sample has `longest` tokens. */
static int n_candidates(const lt_infinipipe *ip, int64_t longest, int *ns) {
    if (ip->pc.infinipipe_slices > 0) {
        ns[0] = (int64_t)ip->pc.infinipipe_slices < longest ? ip->pc.infinipipe_slices : (int)longest;
        return 1;
    }
    int k = 0;
    for (int i = 0; i < IP_N_NS; i++)
        if (IP_NS[i] == 1 || longest / IP_NS[i] >= IP_MIN_MEAN_SLICE) ns[k++] = IP_NS[i];
    return k;
}

static void swap_pipe(ip_pipe *a, ip_pipe *b) {
    ip_pipe t = *a;
    *a = *b;
    *b = t;
}

/* Better: fits where the other does not, else faster (ties: the one found first). */
static bool pipe_better(const ip_pipe *a, const ip_pipe *b) {
    if (a->ok != b->ok) return a->ok;
    if (a->ok) return a->time < b->time;
    return a->peak < b->peak;
}

/* ---------------------------------------------------------------- the deal */

/*
 * The samples over the np pipelines of cm (cp = c): longest processing time first, each
 * sample's time = one layer's forward + backward (GEMMs at the rate of a chunk of
 * IP_DEAL_REF_TOKENS tokens per GPU, attention exact), to the least-loaded pipeline (ties:
 * the lowest). Fills pipe_of, members / pipe_start (samples in increasing index per
 * pipeline), pipe_load and pipe_order (by decreasing load).
 */
static void deal(lt_infinipipe *ip, const lt_cost_model *cm, const int64_t *lengths, size_t n, int np) {
    double rate = linear_rate(cm, (int64_t)IP_DEAL_REF_TOKENS * cm->cp, true);
    ip_key *key = reserve_keys(ip, n > (size_t)np ? n : (size_t)np);
    for (size_t i = 0; i < n; i++) {
        ip->sample_time[i] = rate * (double)lengths[i] + attention_time(cm, 0, lengths[i], true);
        key[i] = (ip_key){-ip->sample_time[i], (double)i, 0, (uint32_t)i};
    }
    sort_keys(key, n);
    for (int r = 0; r < np; r++) ip->pipe_load[r] = 0;
    for (size_t q = 0; q < n; q++) {
        uint32_t i = key[q].idx;
        int best = 0;
        for (int r = 1; r < np; r++)
            if (ip->pipe_load[r] < ip->pipe_load[best]) best = r;
        ip->pipe_of[i] = best;
        ip->pipe_load[best] += ip->sample_time[i];
    }
    memset(ip->pipe_start, 0, ((size_t)np + 1) * sizeof *ip->pipe_start);
    for (size_t i = 0; i < n; i++) ip->pipe_start[ip->pipe_of[i] + 1]++;
    for (int r = 0; r < np; r++) ip->pipe_start[r + 1] += ip->pipe_start[r];
    for (size_t i = 0; i < n; i++) ip->members[ip->pipe_start[ip->pipe_of[i]]++] = (uint32_t)i;
    for (int r = np; r > 0; r--) ip->pipe_start[r] = ip->pipe_start[r - 1];
    ip->pipe_start[0] = 0;
    for (int r = 0; r < np; r++) key[r] = (ip_key){-ip->pipe_load[r], (double)r, 0, (uint32_t)r};
    sort_keys(key, (size_t)np);
    for (int r = 0; r < np; r++) ip->pipe_order[r] = (int)key[r].idx;
}

/* ---------------------------------------------------------------- create / free */

static void pipe_free(ip_pipe *p) {
    lt_schedule_free(&p->sched);
    free(p->group_start);
    memset(p, 0, sizeof *p);
}

static lt_status pipe_init(ip_pipe *p, const lt_cost_model *cm, lt_error *err) {
    memset(p, 0, sizeof *p);
    return lt_schedule_init(&p->sched, cm->pp, cm->model.layers, err);
}

lt_status lt_infinipipe_create(lt_infinipipe **out, const lt_plan_config *pc, lt_error *err) {
    *out = NULL;
    const lt_cost_model *cm = &pc->cm;
    if (pc->max_cp < 1 || cm->pp < 1 || cm->dp < 1 || cm->cp != 1)
        return lt_fail(err, LT_ERR_CONFIG, "[parallel]", "infinipipe needs max_cp >= 1 and a cost model with cp = 1");
    lt_infinipipe *ip = lt_calloc_check(1, sizeof *ip);
    ip->pc = *pc;
    lt_status st = LT_OK;
    /* the context-parallel degrees: 1, 2, 4, ... <= max_cp dividing dp */
    for (int c = 1; c <= pc->max_cp && ip->n_cps < IP_MAX_CPS; c *= 2) {
        if (cm->dp % c == 0) {
            ip->cms[ip->n_cps] = *cm;
            if ((st = lt_cost_model_set_cp(&ip->cms[ip->n_cps], c, err)) != LT_OK) goto fail;
            ip->cps[ip->n_cps++] = c;
        }
        if (c > pc->max_cp / 2) break;
    }
    ip->sync = lt_plan_max_dp_sync(cm);
    int pp = cm->pp, dp = cm->dp;
    ip->pipe_start = lt_calloc_check((size_t)dp + 1, sizeof *ip->pipe_start);
    ip->pipe_load = lt_calloc_check((size_t)dp, sizeof *ip->pipe_load);
    ip->pipe_order = lt_calloc_check((size_t)dp, sizeof *ip->pipe_order);
    ip->cur = lt_calloc_check((size_t)dp, sizeof *ip->cur);
    ip->best = lt_calloc_check((size_t)dp, sizeof *ip->best);
    for (int r = 0; r < dp; r++)
        if ((st = pipe_init(&ip->cur[r], cm, err)) != LT_OK || (st = pipe_init(&ip->best[r], cm, err)) != LT_OK)
            goto fail;
    if ((st = pipe_init(&ip->trial, cm, err)) != LT_OK) goto fail;
    ip->stage_class = lt_calloc_check((size_t)pp, sizeof *ip->stage_class);
    ip->stage_room = lt_calloc_check((size_t)pp, sizeof *ip->stage_room);
    ip->stage_layers = lt_calloc_check((size_t)pp, sizeof *ip->stage_layers);
    for (int s = 0; s < pp; s++) {
        ip->stage_layers[s] = layers_of_stage(cm, s);
        /* stages with the same layer count and neither the embedding nor the head cost the
         * same per unit (the embedding costs nothing: stage 0 is such a stage too) */
        ip->stage_class[s] = s;
        for (int q = 0; q < s; q++)
            if (ip->stage_layers[q] == ip->stage_layers[s] && q != cm->pp - 1 && s != cm->pp - 1) {
                ip->stage_class[s] = q;
                break;
            }
        ip->stage_room[s] = (cm->mem_cap - lt_cost_model_states_bytes(cm, s) - cm->reserved_bytes) / IP_GIB;
    }
    *out = ip;
    return LT_OK;
fail:
    lt_infinipipe_free(ip);
    return st;
}

void lt_infinipipe_free(lt_infinipipe *ip) {
    if (!ip) return;
    if (ip->cur)
        for (int r = 0; r < ip->pc.cm.dp; r++) pipe_free(&ip->cur[r]);
    if (ip->best)
        for (int r = 0; r < ip->pc.cm.dp; r++) pipe_free(&ip->best[r]);
    pipe_free(&ip->trial);
    free(ip->cur);
    free(ip->best);
    lt_sim_free(&ip->sim);
    lt_cost_sim_ctx_free(&ip->ctx);
    free(ip->sample_time);
    free(ip->pipe_of);
    free(ip->best_pipe_of);
    free(ip->members);
    free(ip->pipe_start);
    free(ip->pipe_load);
    free(ip->pipe_order);
    free(ip->items);
    free(ip->seqs);
    free(ip->buckets);
    free(ip->bounds);
    free(ip->ident);
    free(ip->unit_class);
    free(ip->unit_fwd);
    free(ip->unit_bwd);
    free(ip->coef_i);
    free(ip->coef_f);
    free(ip->coef_w);
    free(ip->stage_class);
    free(ip->stage_room);
    free(ip->stage_layers);
    rows_free(&ip->rows);
    free(ip->x);
    free(ip->x_cbc);
    free(ip->deficit);
    free(ip->var_start);
    free(ip->var_entries);
    free(ip->row_of_entry);
    free(ip->keys);
    free(ip->by_bucket);
    free(ip->bucket_start);
    free(ip->in_flight);
    free(ip->flight_pos);
    free(ip->bpos);
    free(ip->rc_of);
    free(ip->class_start);
    free(ip->dp_cost);
    free(ip->dp_from);
    free(ip);
}

/* ---------------------------------------------------------------- plan a step */

static void reserve_samples(lt_infinipipe *ip, size_t n) {
    if (n <= ip->cap_n) return;
    ip->sample_time = lt_realloc_check(ip->sample_time, n * sizeof *ip->sample_time);
    ip->pipe_of = lt_realloc_check(ip->pipe_of, n * sizeof *ip->pipe_of);
    ip->best_pipe_of = lt_realloc_check(ip->best_pipe_of, n * sizeof *ip->best_pipe_of);
    ip->members = lt_realloc_check(ip->members, n * sizeof *ip->members);
    ip->cap_n = n;
}

/* Append "a/b/c" of the pipelines' values to buf. */
static void append_list(char *buf, size_t size, const char *key, const ip_pipe *pipes, int np, bool groups) {
    size_t len = strlen(buf);
    int w = snprintf(buf + len, size - len, " %s=", key);
    if (w < 0 || (size_t)w >= size - len) return;
    len += (size_t)w;
    for (int r = 0; r < np && len + 1 < size; r++) {
        w = snprintf(buf + len, size - len, "%s%d", r ? "/" : "", groups ? (int)pipes[r].n_groups : pipes[r].n);
        if (w < 0 || (size_t)w >= size - len) {
            buf[len] = '\0';
            return;
        }
        len += (size_t)w;
    }
}

/*
 * Plan a step: for every context-parallel degree c the deal and, per pipeline, every N
 * (plan_pipeline), keeping each pipeline's fastest fitting N; the c of the least step time
 * (ties: the smaller c) is kept. Pipelines are planned by decreasing load and a c is dropped
 * as soon as one of its pipelines is slower than the best step so far (it cannot win; the
 * choice is the one of the full search). Then the kept plan's checkpointing is solved by CBC
 * and the pipelines simulated into *out.
 */
lt_status lt_infinipipe_plan(lt_infinipipe *ip, uint64_t step, const int64_t *lengths, size_t n, lt_step_plan *out,
                             lt_error *err) {
    reserve_samples(ip, n ? n : 1);
    int best_ci = -1;
    double best_time = INFINITY;
    bool best_ok = false;
    double best_peak = INFINITY;
    lt_status st;
    for (int ci = 0; ci < ip->n_cps; ci++) {
        const lt_cost_model *cm = &ip->cms[ci];
        int np = cm->dp / ip->cps[ci];
        deal(ip, cm, lengths, n, np);
        double slowest = 0, peak = 0;
        bool all_ok = true, pruned = false;
        for (int q = 0; q < np && !pruned; q++) {
            int r = ip->pipe_order[q];
            const uint32_t *mem = ip->members + ip->pipe_start[r];
            size_t nm = ip->pipe_start[r + 1] - ip->pipe_start[r];
            int64_t longest = 0;
            for (size_t i = 0; i < nm; i++)
                if (lengths[mem[i]] > longest) longest = lengths[mem[i]];
            int ns[IP_N_NS];
            int n_ns = nm ? n_candidates(ip, longest, ns) : 1;
            if (!nm) ns[0] = 1;
            ip_pipe *cur = &ip->cur[r];
            for (int k = 0; k < n_ns; k++) {
                ip_pipe *dst = k == 0 ? cur : &ip->trial;
                if ((st = plan_pipeline(ip, cm, mem, nm, lengths, ns[k], dst, err)) != LT_OK) return st;
                if (k > 0 && pipe_better(&ip->trial, cur)) swap_pipe(&ip->trial, cur);
            }
            if (!cur->ok) all_ok = false;
            if (cur->time > slowest) slowest = cur->time;
            if (cur->peak > peak) peak = cur->peak;
            /* the step is at least this pipeline's time: drop c when it cannot win */
            if (best_ok && (!all_ok || slowest + ip->sync > best_time)) pruned = true;
        }
        if (pruned) continue;
        double t = slowest + ip->sync;
        bool better = best_ci < 0 || (all_ok && !best_ok) || (all_ok && best_ok && t < best_time) ||
                      (!all_ok && !best_ok && peak < best_peak);
        if (!better) continue;
        best_ci = ci;
        best_time = t;
        best_ok = all_ok;
        best_peak = peak;
        ip_pipe *tmp = ip->best;
        ip->best = ip->cur;
        ip->cur = tmp;
        memcpy(ip->best_pipe_of, ip->pipe_of, (n ? n : 1) * sizeof *ip->best_pipe_of);
    }
    LT_CHECK(best_ci >= 0);

    /* the plan of the kept c: CBC on every group that needs recomputation (Alg. 2), then
     * the simulated-peak rule, then the plan's own simulation */
    const lt_cost_model *cm = &ip->cms[best_ci];
    int c = ip->cps[best_ci], np = cm->dp / c;
    if ((st = lt_plan_start(&ip->pc, out, LT_STRATEGY_INFINIPIPE, step, lengths, n, (size_t)np, c, err)) != LT_OK)
        return st;
    for (size_t i = 0; i < n; i++) out->sample_rank[i] = ip->best_pipe_of[i];
    int recompute = 0, raised = 0;
    size_t groups = 0;
    for (int r = 0; r < np; r++) {
        ip_pipe *pipe = &ip->best[r];
        if (pipe->sched.n_units > 0) {
            unit_coefficients(ip, cm, &pipe->sched);
            if ((st = checkpoint_groups(ip, pipe, out, err)) != LT_OK) return st;
            if ((st = simulate_fit(ip, cm, pipe, err)) != LT_OK) return st;
        }
        recompute += pipe->recompute;
        raised += pipe->raised;
        groups += pipe->n_groups;
        lt_schedule tmp = out->ranks[r].sched; /* the plan takes the schedule, the state the empty one */
        out->ranks[r].sched = pipe->sched;
        pipe->sched = tmp;
        if ((st = lt_plan_finish_rank(&ip->sim, &ip->ctx, cm, &out->ranks[r], err)) != LT_OK) return st;
    }
    snprintf(out->params, sizeof out->params, "cp=%d", c);
    append_list(out->params, sizeof out->params, "n", ip->best, np, false);
    size_t len = strlen(out->params);
    snprintf(out->params + len, sizeof out->params - len, " groups=%zu recompute=%d", groups, recompute);
    if (raised) {
        len = strlen(out->params);
        snprintf(out->params + len, sizeof out->params - len, " raised=%d", raised);
    }
    return lt_plan_finish(&ip->pc, out, ip->sync, err);
}
