/*
 * plans/strategies/slimpack.c — the slimpack strategy (SlimPack, Sec. 4; docs/strategies.md "slimpack").
 *
 * A step's samples become, per DP rank, a forward partition into MicroPacks of equal forward
 * FLOPs and a backward partition into MicroPacks of equal backward FLOPs, run by PackFlow
 * (lt_sched_packflow, SlimPack 4.2):
 *
 *   Phase 1 (4.1.1)   every DP rank gets the capacity C = (sum of forward FLOPs) / DP; a
 *                     sample over C x (1 + plan.dp_merge_margin) is DP-Merged (below); the
 *                     others, sorted by FLOPs (largest first), each go to the rank with the
 *                     least load so far (longest-processing-time first), which approaches C.
 *   Phase 2 (4.1.1)   per rank, candidates m = i x PP with i on a log-spaced grid (5.1,
 *                     Fig. 12; plan.micropacks fixes m). The rank's samples, largest first,
 *                     are laid end to end (the stream) and cut into m MicroPacks of equal
 *                     forward FLOPs: a cut inside a sample slims it (its slices keep their
 *                     order), a pack holding a sample's last slices and other samples is a
 *                     Mix, one of whole samples a Pack. The backward stream is the same
 *                     samples in the same order (FIFO at the sample level), each sample's
 *                     tokens taken last to first (FILO within a sample, Fig. 8), cut into m
 *                     backward MicroPacks of equal backward FLOPs (4.1.2, the asymmetric
 *                     partition). PackFlow issues an extra forward MicroPack wherever a
 *                     backward one needs tokens not yet forwarded (Fig. 9).
 *   cuts (MILP)       where each forward cut of the chosen m goes is a small MILP (CBC,
 *                     plans/strategies/milp.h): for cut k the candidates are the exact equal-FLOPs
 *                     position, the two boundaries of the sample it falls in (cutting at a
 *                     boundary keeps that sample whole) and the heuristic's cut; minimize the
 *                     largest relative deviation of a pack's FLOPs from the target plus
 *                     SP_SPLIT_WEIGHT per sample cut. The heuristic (the fallback, the
 *                     screening of the candidates m, and the backward cuts) takes each exact
 *                     position and snaps it to a sample boundary when that moves the pack's
 *                     FLOPs by at most SP_SNAP_TOL of the target. The backward partition has
 *                     no MILP of its own: its slices are regrouped anyway (4.1.2), so a
 *                     backward cut costs no whole-sample property, and the heuristic's cuts
 *                     are within SP_SNAP_TOL of equal backward FLOPs.
 *   DP-Merge (4.1.1)  a sample x* with f(x*) > C (1 + margin) is spread over a group of g
 *                     consecutive DP ranks, the smallest g with f(x*) / g <= C (2 <= g <=
 *                     max_cp and the ranks left), with context parallelism of degree g: each
 *                     member lists the same units of x* with unit.cp = g (the cost model
 *                     charges the K/V ring exchange) before its own MicroPacks; the group
 *                     shares one m and one recompute depth. Reason 'flops'.
 *   memory DP-Merge   (issue 21; 4.1.1: "memory and compute outliers need not coincide")
 *                     a sample under the FLOPs capacity that one rank could hold only by
 *                     recomputing is merged over g ranks when the cost model prices that
 *                     cheaper (memory_trigger); the step is planned without and with such
 *                     groups and the faster plan kept (lt_slimpack_plan). Reason 'memory'.
 *   selection (4.1.2) every candidate is simulated (plans/schedule/sim.h) with, per stage, the
 *                     smallest recompute depth that fits the memory cap (found by bisection);
 *                     the fastest is kept.
 *
 * Costs are the cost model's FLOPs (plans/cost/cost.h) with the model's layers: forward
 * A_f t + Q_f (e^2 - b^2) for tokens [b, e) of a sample (t = e - b; GEMMs, LM head, causal
 * attention), backward with the backward factors (2x GEMMs, 2.5x attention, SlimPack 2.2.2).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h" /* lt_fail, lt_malloc_check */
#include "plans/strategies/internal.h"

/* Phase 2's grid of i (m = i x PP), "modified logarithmically spaced" (SlimPack 5.1). */
static const int SP_GRID[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
#define SP_GRID_N ((int)(sizeof SP_GRID / sizeof SP_GRID[0]))
/* A candidate m is tried only while the rank's tokens / m is at least this (packs smaller
 * than this lose more in GEMM efficiency than they save in bubbles; i = 1 is always tried). */
#define SP_MIN_PACK_TOKENS 512
/* The grid search stops after this many candidates in a row slower than the best. */
#define SP_PATIENCE 2
/* The heuristic cut snaps to a sample boundary within this fraction of the pack target. */
#define SP_SNAP_TOL 0.01
/* Pipeline stages supported (per-stage arrays on the stack). */
#define SP_MAX_STAGES 64
/* The MILP's price of cutting a sample, in units of relative pack deviation. */
#define SP_SPLIT_WEIGHT 0.005
/* The memory trigger prices a sample alone cut into this many packs per stage (i = 4 of the
 * grid: enough packs that the price is the sample's work, not the pipeline's fill). */
#define SP_SOLO_PACKS 4

/* ---------------------------------------------------------------- streams */

/* Samples laid end to end: segment j is sample sample[j] of len[j] tokens at stream
 * positions [pos[j], pos[j + 1]). cum[j] is the cost of the stream before segment j (cum[n]
 * the total), under the cost function of the pass (forward: tokens in order; backward: each
 * segment's tokens last to first). */
typedef struct sp_stream {
    size_t n, cap;
    int32_t *sample;
    int64_t *len;
    int64_t *pos; /* [n + 1] */
    double *cum;  /* [n + 1] */
    double a, q;  /* cost of tokens [b, e) of a sample: a (e - b) + q (e^2 - b^2) */
    bool backward;
} sp_stream;

static void stream_reserve(sp_stream *st, size_t n) {
    if (n <= st->cap) return;
    size_t c = st->cap ? st->cap : 16;
    while (c < n) c *= 2;
    st->sample = lt_realloc_check(st->sample, c * sizeof *st->sample);
    st->len = lt_realloc_check(st->len, c * sizeof *st->len);
    st->pos = lt_realloc_check(st->pos, (c + 1) * sizeof *st->pos);
    st->cum = lt_realloc_check(st->cum, (c + 1) * sizeof *st->cum);
    st->cap = c;
}

static void stream_free(sp_stream *st) {
    free(st->sample);
    free(st->len);
    free(st->pos);
    free(st->cum);
    memset(st, 0, sizeof *st);
}

/* Cost of the first o tokens of segment j in stream order. */
static double seg_cost(const sp_stream *st, size_t j, int64_t o) {
    double L = (double)st->len[j], x = (double)o;
    if (!st->backward) return st->a * x + st->q * x * x;
    double b = L - x; /* the tokens [L - o, L) */
    return st->a * x + st->q * (L * L - b * b);
}

/* (Re)build the stream of samples ids[0..n) of lengths len_of[] with cost (a, q). */
static void stream_build(sp_stream *st, const uint32_t *ids, size_t n, const int64_t *len_of, double a, double q,
                         bool backward) {
    stream_reserve(st, n + 1);
    st->n = n;
    st->a = a;
    st->q = q;
    st->backward = backward;
    st->pos[0] = 0;
    st->cum[0] = 0;
    for (size_t j = 0; j < n; j++) {
        st->sample[j] = (int32_t)ids[j];
        st->len[j] = len_of[ids[j]];
        st->pos[j + 1] = st->pos[j] + st->len[j];
        st->cum[j + 1] = st->cum[j] + seg_cost(st, j, st->len[j]);
    }
}

/* The segment holding stream position u (pos[j] <= u < pos[j + 1]); n for u = total. */
static size_t stream_seg(const sp_stream *st, int64_t u) {
    size_t lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (st->pos[mid + 1] <= u) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The cost of the stream before position u. */
static double stream_cost_at(const sp_stream *st, int64_t u) {
    size_t j = stream_seg(st, u);
    if (j >= st->n) return st->cum[st->n];
    return st->cum[j] + seg_cost(st, j, u - st->pos[j]);
}

/* The (real) stream position whose cost before it is `target` (0 <= target <= total). */
static double stream_inverse(const sp_stream *st, double target) {
    if (target <= 0) return 0;
    if (target >= st->cum[st->n]) return (double)st->pos[st->n];
    size_t lo = 0, hi = st->n - 1; /* the segment j with cum[j] <= target < cum[j + 1] */
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        if (st->cum[mid] <= target) lo = mid;
        else hi = mid - 1;
    }
    size_t j = lo;
    double c = target - st->cum[j], L = (double)st->len[j], x;
    /* forward: q x^2 + a x = c; backward: a x + q (2 L x - x^2) = c, i.e. q x^2 - (a + 2 q L) x + c = 0 */
    if (st->q <= 0) x = st->a > 0 ? c / st->a : 0;
    else if (!st->backward) x = (-st->a + sqrt(st->a * st->a + 4 * st->q * c)) / (2 * st->q);
    else {
        double bb = st->a + 2 * st->q * L, disc = bb * bb - 4 * st->q * c;
        x = (bb - sqrt(disc > 0 ? disc : 0)) / (2 * st->q);
    }
    if (x < 0) x = 0;
    if (x > L) x = L;
    return (double)st->pos[j] + x;
}

/* ---------------------------------------------------------------- cuts */

/* Cuts cut[0] = 0 < cut[1] < ... < cut[m] = total of a stream into m packs. */

/* Keep the cuts strictly increasing and inside [k, total - (m - k)]. */
static void cuts_fix(int64_t *cut, int m, int64_t total) {
    cut[0] = 0;
    cut[m] = total;
    for (int k = 1; k < m; k++) {
        if (cut[k] < cut[k - 1] + 1) cut[k] = cut[k - 1] + 1;
        if (cut[k] > total - (m - k)) cut[k] = total - (m - k);
    }
    for (int k = m - 1; k >= 1; k--)
        if (cut[k] >= cut[k + 1]) cut[k] = cut[k + 1] - 1;
}

/* The fallback heuristic: cut k at the exact position of k/m of the cost, rounded, snapped
 * to the boundary of its sample when that moves the cumulative cost by <= SP_SNAP_TOL x tau. */
static void cuts_heuristic(const sp_stream *st, int m, int64_t *cut) {
    double total = st->cum[st->n], tau = total / m;
    for (int k = 1; k < m; k++) {
        double target = tau * k;
        int64_t u = (int64_t)llround(stream_inverse(st, target));
        size_t j = stream_seg(st, u);
        if (j < st->n && u > st->pos[j]) {
            int64_t left = st->pos[j], right = st->pos[j + 1];
            double dl = fabs(st->cum[j] - target), dr = fabs(st->cum[j + 1] - target);
            if (dl <= dr && dl <= SP_SNAP_TOL * tau) u = left;
            else if (dr < dl && dr <= SP_SNAP_TOL * tau) u = right;
        }
        cut[k] = u;
    }
    cuts_fix(cut, m, st->pos[st->n]);
}

/* Scratch of the cut MILP. */
typedef struct sp_milp {
    int cap_v, cap_r, cap_nz;
    double *lb, *ub, *obj, *x, *x0, *val, *rlb, *rub, *cpos, *ccost;
    bool *is_int, *csplit;
    int *rs, *ci, *cfirst; /* cfirst[k]: first variable of cut k (k = 1..m-1), cfirst[m] end */
} sp_milp;

static void milp_reserve(sp_milp *w, int nv, int nr, int nz) {
    if (nv > w->cap_v) {
        w->cap_v = nv * 2;
        size_t c = (size_t)w->cap_v;
        w->lb = lt_realloc_check(w->lb, c * sizeof *w->lb);
        w->ub = lt_realloc_check(w->ub, c * sizeof *w->ub);
        w->obj = lt_realloc_check(w->obj, c * sizeof *w->obj);
        w->x = lt_realloc_check(w->x, c * sizeof *w->x);
        w->x0 = lt_realloc_check(w->x0, c * sizeof *w->x0);
        w->cpos = lt_realloc_check(w->cpos, c * sizeof *w->cpos);
        w->ccost = lt_realloc_check(w->ccost, c * sizeof *w->ccost);
        w->is_int = lt_realloc_check(w->is_int, c * sizeof *w->is_int);
        w->csplit = lt_realloc_check(w->csplit, c * sizeof *w->csplit);
        w->cfirst = lt_realloc_check(w->cfirst, (c + 2) * sizeof *w->cfirst);
    }
    if (nr > w->cap_r) {
        w->cap_r = nr * 2;
        size_t c = (size_t)w->cap_r;
        w->rlb = lt_realloc_check(w->rlb, c * sizeof *w->rlb);
        w->rub = lt_realloc_check(w->rub, c * sizeof *w->rub);
        w->rs = lt_realloc_check(w->rs, (c + 1) * sizeof *w->rs);
    }
    if (nz > w->cap_nz) {
        w->cap_nz = nz * 2;
        size_t c = (size_t)w->cap_nz;
        w->ci = lt_realloc_check(w->ci, c * sizeof *w->ci);
        w->val = lt_realloc_check(w->val, c * sizeof *w->val);
    }
}

static void milp_free(sp_milp *w) {
    free(w->lb), free(w->ub), free(w->obj), free(w->x), free(w->x0), free(w->val), free(w->rlb), free(w->rub);
    free(w->cpos), free(w->ccost), free(w->is_int), free(w->csplit), free(w->rs), free(w->ci), free(w->cfirst);
    memset(w, 0, sizeof *w);
}

/*
 * The cut MILP of a stream into m packs (see the file comment). Variables: x[k][c] binary
 * for candidate c of cut k (k = 1..m-1), then z >= 0 (the largest relative deviation).
 *   sum_c x[k][c] = 1                                          (one position per cut)
 *   sum_c pos x[k][c] - sum_c pos x[k+1][c] <= -1              (packs non-empty)
 *  +-(cost(cut k+1) - cost(cut k)) / tau - z <= +-1            (|pack / tau - 1| <= z)
 *   minimize z + SP_SPLIT_WEIGHT x (cuts inside a sample)
 * Warm-started from `cut` (the heuristic's cuts, which are among the candidates); on an
 * optimal or feasible outcome `cut` gets the solution. Returns the solver status.
 */
static lt_status cuts_milp(const sp_stream *st, int m, int64_t *cut, sp_milp *w, const lt_milp_options *opt0,
                           lt_milp_status *status, lt_error *err) {
    *status = LT_MILP_OPTIMAL;
    if (m < 2) return LT_OK;
    int64_t total = st->pos[st->n];
    double tau = st->cum[st->n] / m;
    /* candidates: the sample boundaries around the exact position, the exact position, and
     * the heuristic's cut (which cuts_fix may have moved); duplicates dropped below */
    milp_reserve(w, 4 * (m - 1) + 1, 1, 1);
    int nv = 0;
    for (int k = 1; k < m; k++) {
        w->cfirst[k] = nv;
        int64_t lo_ok = k, hi_ok = total - (m - k);
        int64_t exact = (int64_t)llround(stream_inverse(st, tau * k));
        size_t j = stream_seg(st, exact);
        int64_t cand[4];
        int nc = 0;
        if (j < st->n) {
            cand[nc++] = st->pos[j];
            cand[nc++] = exact;
            cand[nc++] = st->pos[j + 1];
        }
        cand[nc++] = cut[k];
        for (int c = 0; c < nc; c++) {
            int64_t u = cand[c];
            if (u < lo_ok || u > hi_ok) continue;
            bool dup = false;
            for (int d = w->cfirst[k]; d < nv; d++) dup |= (int64_t)w->cpos[d] == u;
            if (dup) continue;
            size_t sj = stream_seg(st, u);
            w->cpos[nv] = (double)u;
            w->ccost[nv] = stream_cost_at(st, u) / tau;
            w->csplit[nv] = sj < st->n && u > st->pos[sj];
            nv++;
        }
    } /* cut[k] is in range (cuts_fix), so every cut has a candidate */
    w->cfirst[m] = nv;
    int z = nv++;
    int n_rows = (m - 1) + (m - 2 > 0 ? m - 2 : 0) + 2 * m;
    int nz = 2 * nv * 6 + 8;
    milp_reserve(w, nv, n_rows, nz);
    for (int v = 0; v < nv; v++) {
        w->lb[v] = 0;
        w->ub[v] = v == z ? LT_MILP_INF : 1;
        w->is_int[v] = v != z;
        w->obj[v] = v == z ? 1.0 : (w->csplit[v] ? SP_SPLIT_WEIGHT : 0.0);
        w->x0[v] = 0;
    }
    int r = 0, k0 = 0;
    w->rs[0] = 0;
#define ADD(col, v_)                                                                                                   \
    do {                                                                                                               \
        w->ci[k0] = (col);                                                                                             \
        w->val[k0++] = (v_);                                                                                           \
    } while (0)
    for (int k = 1; k < m; k++) { /* one position per cut */
        for (int v = w->cfirst[k]; v < w->cfirst[k + 1]; v++) ADD(v, 1.0);
        w->rlb[r] = w->rub[r] = 1.0;
        w->rs[++r] = k0;
    }
    for (int k = 1; k + 1 < m; k++) { /* non-empty packs */
        for (int v = w->cfirst[k]; v < w->cfirst[k + 1]; v++) ADD(v, w->cpos[v]);
        for (int v = w->cfirst[k + 1]; v < w->cfirst[k + 2]; v++) ADD(v, -w->cpos[v]);
        w->rlb[r] = -LT_MILP_INF;
        w->rub[r] = -1.0;
        w->rs[++r] = k0;
    }
    double end_cost = st->cum[st->n] / tau; /* = m */
    for (int k = 0; k < m; k++) { /* pack k = cost(cut k+1) - cost(cut k); |pack - 1| <= z */
        for (int sign = 1; sign >= -1; sign -= 2) {
            double cst = 0;
            if (k + 1 < m)
                for (int v = w->cfirst[k + 1]; v < w->cfirst[k + 2]; v++) ADD(v, sign * w->ccost[v]);
            else cst += sign * end_cost;
            if (k > 0)
                for (int v = w->cfirst[k]; v < w->cfirst[k + 1]; v++) ADD(v, -sign * w->ccost[v]);
            ADD(z, -1.0);
            w->rlb[r] = -LT_MILP_INF;
            w->rub[r] = sign * 1.0 - cst;
            w->rs[++r] = k0;
        }
    }
#undef ADD
    /* warm start: the heuristic's cuts */
    double dev = 0;
    for (int k = 1; k < m; k++)
        for (int v = w->cfirst[k]; v < w->cfirst[k + 1]; v++)
            if ((int64_t)w->cpos[v] == cut[k]) {
                w->x0[v] = 1;
                break;
            }
    for (int k = 0; k < m; k++) {
        double d = fabs((stream_cost_at(st, cut[k + 1]) - stream_cost_at(st, cut[k])) / tau - 1.0);
        if (d > dev) dev = d;
    }
    w->x0[z] = dev;
    lt_milp_problem p = {.n_vars = nv,
                         .lb = w->lb,
                         .ub = w->ub,
                         .obj = w->obj,
                         .is_int = w->is_int,
                         .n_rows = r,
                         .row_start = w->rs,
                         .col_index = w->ci,
                         .value = w->val,
                         .row_lb = w->rlb,
                         .row_ub = w->rub};
    lt_milp_options opt = *opt0;
    opt.initial_solution = w->x0;
    lt_milp_result res;
    lt_status s = lt_milp_solve(&p, &opt, w->x, &res, err);
    if (s != LT_OK && s != LT_ERR_INTERNAL) return s; /* a malformed problem: a bug here */
    /* Stopped by plan.milp_time_limit: "timeout", whether CBC's incumbent is only the
     * warm start (the heuristic's cuts) or something better, which is then used. */
    *status = res.time_limited ? LT_MILP_TIMEOUT : res.status;
    if (!res.has_solution) return LT_OK;
    for (int k = 1; k < m; k++)
        for (int v = w->cfirst[k]; v < w->cfirst[k + 1]; v++)
            if (w->x[v] > 0.5) cut[k] = (int64_t)w->cpos[v];
    cuts_fix(cut, m, total);
    return LT_OK;
}

/* ---------------------------------------------------------------- the strategy's state */

/* One DP rank's (or DP-Merge group member's) work for the step. */
typedef struct sp_rank {
    uint32_t *ids;  /* its own samples, largest FLOPs first */
    size_t n, cap;
    double load;    /* forward FLOPs: own samples + its share of a merged sample */
    int group;      /* index into merges, or -1 */
    /* the chosen candidate */
    int m;
    int recompute[SP_MAX_STAGES]; /* per stage */
    double time;
} sp_rank;

struct lt_slimpack {
    lt_plan_config pc;
    lt_cost_model cm; /* pc.cm with cp = the pipelines' context-parallel degree this step */
    int cp;
    double sync;
    double af, qf, ab, qb; /* cost coefficients (file comment) */
    lt_sim sim;
    lt_cost_sim_ctx ctx;
    sp_stream fs, bs;      /* a rank's forward and backward streams */
    sp_stream ofs, obs;    /* a merged sample's */
    sp_milp milp;
    int64_t *fcut, *bcut, *ofcut, *obcut;
    size_t cap_cut;
    double *flops;         /* [n] forward FLOPs per sample */
    uint32_t *order;       /* [n] samples by FLOPs, largest first */
    size_t cap_n;
    sp_rank *ranks;        /* [dp] */
    lt_schedule trial;     /* a candidate's schedule */
};

lt_status lt_slimpack_create(lt_slimpack **out, const lt_plan_config *pc, lt_error *err) {
    *out = NULL;
    if (pc->cm.pp > SP_MAX_STAGES)
        return lt_fail(err, LT_ERR_CONFIG, "[parallel]", "parallel.pp = %d: slimpack plans at most %d stages",
                       pc->cm.pp, SP_MAX_STAGES);
    lt_slimpack *sp = lt_calloc_check(1, sizeof *sp);
    sp->pc = *pc;
    sp->cm = pc->cm;
    sp->sync = lt_plan_max_dp_sync(&sp->cm);
    const lt_cost_model *cm = &sp->cm;
    double layers = cm->model.layers;
    double lin = lt_cost_linear_flops(cm, LT_PART_ALL, 1.0), head = lt_cost_head_flops(cm, 1.0);
    double quad = lt_cost_attention_flops(cm, 0.0, 1.0);
    sp->af = layers * lin + head;
    sp->qf = layers * quad;
    sp->ab = cm->bwd_gemm_factor * sp->af;
    sp->qb = cm->bwd_attn_factor * sp->qf;
    sp->ranks = lt_calloc_check((size_t)cm->dp, sizeof *sp->ranks);
    lt_status st = lt_schedule_init(&sp->trial, cm->pp, cm->model.layers, err);
    if (st != LT_OK) {
        lt_slimpack_free(sp);
        return st;
    }
    *out = sp;
    return LT_OK;
}

void lt_slimpack_free(lt_slimpack *sp) {
    if (!sp) return;
    lt_sim_free(&sp->sim);
    lt_cost_sim_ctx_free(&sp->ctx);
    stream_free(&sp->fs);
    stream_free(&sp->bs);
    stream_free(&sp->ofs);
    stream_free(&sp->obs);
    milp_free(&sp->milp);
    free(sp->fcut), free(sp->bcut), free(sp->ofcut), free(sp->obcut);
    free(sp->flops);
    free(sp->order);
    if (sp->ranks)
        for (int r = 0; r < sp->cm.dp; r++) free(sp->ranks[r].ids);
    free(sp->ranks);
    lt_schedule_free(&sp->trial);
    free(sp);
}

static void reserve_cuts(lt_slimpack *sp, size_t m) {
    if (m + 1 <= sp->cap_cut) return;
    size_t c = (m + 1) * 2;
    sp->fcut = lt_realloc_check(sp->fcut, c * sizeof *sp->fcut);
    sp->bcut = lt_realloc_check(sp->bcut, c * sizeof *sp->bcut);
    sp->ofcut = lt_realloc_check(sp->ofcut, c * sizeof *sp->ofcut);
    sp->obcut = lt_realloc_check(sp->obcut, c * sizeof *sp->obcut);
    sp->cap_cut = c;
}

/* Forward FLOPs of a whole sample of `len` tokens (Phase 1's f(x)). */
static double sample_flops(const lt_slimpack *sp, int64_t len) {
    double t = (double)len;
    return sp->af * t + sp->qf * t * t;
}

/* ---------------------------------------------------------------- building a pipeline */

/* Append forward units: the stream's packs [cut[k], cut[k+1]), slices in stream order. */
static void add_forward_units(lt_schedule *s, const sp_stream *st, const int64_t *cut, int m, uint16_t cp) {
    for (int k = 0; k < m; k++) {
        uint32_t first = (uint32_t)s->n_slices, count = 0;
        for (size_t j = stream_seg(st, cut[k]); j < st->n && st->pos[j] < cut[k + 1]; j++) {
            int64_t b = cut[k] > st->pos[j] ? cut[k] - st->pos[j] : 0;
            int64_t e = (cut[k + 1] < st->pos[j + 1] ? cut[k + 1] : st->pos[j + 1]) - st->pos[j];
            if (e > b) {
                lt_schedule_add_slice(s, st->sample[j], b, e);
                count++;
            }
        }
        uint32_t u = lt_schedule_add_unit(s, first, count);
        s->units[u].cp = cp;
    }
}

/* Append backward units: pack k of the backward stream holds, of each segment j it
 * overlaps at stream offsets [o0, o1), the tokens [len - o1, len - o0). The bslices go into
 * the table last pack first (so each sample's bslices are in token order, schedule.h), and
 * the bunits are numbered in pack order (the backward stream's order). */
static void add_backward_units(lt_schedule *s, const sp_stream *st, const int64_t *cut, int m, uint16_t cp,
                               uint32_t *first_of, uint32_t *count_of) {
    for (int k = m - 1; k >= 0; k--) {
        first_of[k] = (uint32_t)s->n_bslices;
        count_of[k] = 0;
        size_t j0 = stream_seg(st, cut[k]);
        size_t j1 = j0;
        while (j1 < st->n && st->pos[j1] < cut[k + 1]) j1++;
        for (size_t j = j1; j-- > j0;) {
            int64_t o0 = cut[k] > st->pos[j] ? cut[k] - st->pos[j] : 0;
            int64_t o1 = (cut[k + 1] < st->pos[j + 1] ? cut[k + 1] : st->pos[j + 1]) - st->pos[j];
            if (o1 > o0) {
                lt_schedule_add_bslice(s, st->sample[j], st->len[j] - o1, st->len[j] - o0);
                count_of[k]++;
            }
        }
    }
    for (int k = 0; k < m; k++) {
        uint32_t u = lt_schedule_add_bunit(s, first_of[k], count_of[k]);
        s->bunits[u].cp = cp;
    }
}

/* The packs of rank r for m MicroPacks: a merged sample's (group members) then its own. */
typedef struct sp_layout {
    int m_own;        /* packs of the rank's own samples */
    int m_merged;     /* packs of its merged sample (0 without) */
    uint16_t cp;      /* the merged sample's group size */
} sp_layout;

/* Build rank r's schedule into s for m packs with the cuts already in sp->fcut/bcut (own
 * samples) and sp->ofcut/obcut (merged sample). */
static void build_schedule(lt_slimpack *sp, lt_schedule *s, const sp_layout *lay) {
    lt_schedule_clear(s);
    int mt = lay->m_own + lay->m_merged;
    uint32_t *first = lt_malloc_check((size_t)(mt > 0 ? mt : 1) * sizeof *first);
    uint32_t *count = lt_malloc_check((size_t)(mt > 0 ? mt : 1) * sizeof *count);
    if (lay->m_merged) add_forward_units(s, &sp->ofs, sp->ofcut, lay->m_merged, lay->cp);
    if (lay->m_own) add_forward_units(s, &sp->fs, sp->fcut, lay->m_own, 0);
    if (lay->m_merged) add_backward_units(s, &sp->obs, sp->obcut, lay->m_merged, lay->cp, first, count);
    if (lay->m_own) add_backward_units(s, &sp->bs, sp->bcut, lay->m_own, 0, first, count);
    free(first);
    free(count);
    if (mt > 0) lt_sched_packflow(s, NULL, s->n_units, NULL, s->n_bunits);
}

/* Recompute rs[stage] layers of every op of each stage (Megatron's block method). */
static void set_recompute_stages(lt_schedule *s, const int *rs) {
    for (int st = 0; st < s->stages; st++)
        for (size_t i = 0; i < s->stage[st].n; i++) {
            lt_op *op = &s->stage[st].ops[i];
            int n = (int)(op->layer_end - op->layer_begin);
            op->recompute_layers = (uint16_t)(rs[st] < n ? rs[st] : n);
        }
}

/* Per-stage recompute depths: each stage's peak memory depends only on its own op list (the
 * bytes an op allocates and frees, in program order), not on timing, and does not grow with
 * the depth; so one simulation tests every stage at its own trial depth, and each stage's
 * smallest fitting depth >= rs[stage] (its value on entry) is found by a bisection run for
 * all stages at once: first the entry depths (often all fit), then the midpoints. A stage
 * that fits nowhere takes the full depth. s ends simulated at the depths returned in rs:
 * *time, *fit (every stage under the cap). */
static lt_status simulate_fitting(lt_slimpack *sp, lt_schedule *s, int *rs, double *time, bool *fit, lt_error *err) {
    int pp = s->stages, full = lt_plan_max_stage_layers(&sp->cm);
    int lo[SP_MAX_STAGES], hi[SP_MAX_STAGES], trial[SP_MAX_STAGES] = {0};
    for (int st = 0; st < pp; st++) {
        lo[st] = rs[st] < full ? rs[st] : full;
        hi[st] = full; /* the answer lies in [lo, hi] */
    }
    lt_status e;
    for (bool first = true;; first = false) {
        bool open = false;
        for (int st = 0; st < pp; st++) {
            if (first) trial[st] = lo[st];
            else if (lo[st] < hi[st]) trial[st] = lo[st] + (hi[st] - lo[st]) / 2;
            else trial[st] = hi[st];
            open = open || lo[st] < hi[st];
        }
        if (!open && !first) break;
        set_recompute_stages(s, trial);
        if ((e = lt_plan_simulate(&sp->sim, &sp->ctx, &sp->cm, s, NULL, err)) != LT_OK) return e;
        for (int st = 0; st < pp; st++) {
            if (lo[st] >= hi[st] && !first) continue;
            if (sp->sim.peak_mem[st] <= sp->cm.mem_cap) hi[st] = trial[st];
            else lo[st] = trial[st] + 1 < hi[st] ? trial[st] + 1 : hi[st];
        }
    }
    bool same = true; /* was the last simulation at the answer? */
    for (int st = 0; st < pp; st++) {
        rs[st] = hi[st];
        same = same && trial[st] == hi[st];
    }
    if (!same) {
        set_recompute_stages(s, rs);
        if ((e = lt_plan_simulate(&sp->sim, &sp->ctx, &sp->cm, s, NULL, err)) != LT_OK) return e;
    }
    *time = sp->sim.step_time;
    *fit = lt_plan_max_peak(&sp->sim) <= sp->cm.mem_cap;
    return LT_OK;
}

/* The layout and the heuristic cuts of rank r for m packs in all: sets sp->fs/bs (own
 * samples) and, for a group member, sp->ofs/obs; false when m is too small or too large
 * for its tokens. */
static bool prepare(lt_slimpack *sp, const lt_step_plan *out, const int64_t *lengths, int r, int m,
                    sp_layout *lay) {
    const sp_rank *rk = &sp->ranks[r];
    memset(lay, 0, sizeof *lay);
    stream_build(&sp->fs, rk->ids, rk->n, lengths, sp->af, sp->qf, false);
    stream_build(&sp->bs, rk->ids, rk->n, lengths, sp->ab, sp->qb, true);
    int64_t own_tokens = sp->fs.pos[sp->fs.n];
    if (rk->group >= 0) {
        const lt_dp_merge *g = &out->merges[rk->group];
        uint32_t id = (uint32_t)g->sample;
        double share = sample_flops(sp, lengths[id]) / g->cp;
        /* the merged sample's packs: its share of the rank's load, identical in every member
         * (the group leader's load decides) */
        double lead_load = sp->ranks[g->first_rank].load;
        int mm = (int)llround(m * share / (lead_load > 0 ? lead_load : 1));
        if (mm < 1) mm = 1;
        if (mm > m) mm = m;
        if (own_tokens == 0) mm = m;
        else if (mm == m) mm = m - 1;
        if (mm < 1 || mm > lengths[id]) return false;
        lay->m_merged = mm;
        lay->cp = (uint16_t)(g->cp * sp->cp); /* the units' CP degree: g pipelines of cp GPUs */
        stream_build(&sp->ofs, &id, 1, lengths, sp->af, sp->qf, false);
        stream_build(&sp->obs, &id, 1, lengths, sp->ab, sp->qb, true);
        reserve_cuts(sp, (size_t)m);
        cuts_heuristic(&sp->ofs, mm, sp->ofcut); /* one sample: the exact equal-cost cuts */
        cuts_heuristic(&sp->obs, mm, sp->obcut);
    }
    lay->m_own = m - lay->m_merged;
    if (own_tokens == 0) lay->m_own = 0;
    if (lay->m_own > own_tokens) return false;
    reserve_cuts(sp, (size_t)m);
    if (lay->m_own) {
        cuts_heuristic(&sp->fs, lay->m_own, sp->fcut);
        cuts_heuristic(&sp->bs, lay->m_own, sp->bcut);
    }
    return true;
}

/* ---------------------------------------------------------------- phase 1 and DP-Merge */

/* A sample and its FLOPs, for sorting largest first (ties: lower index first). */
typedef struct sp_key {
    double flops;
    uint32_t id;
} sp_key;

static int cmp_key(const void *a, const void *b) {
    const sp_key *x = a, *y = b;
    if (x->flops != y->flops) return x->flops < y->flops ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

static void rank_push(sp_rank *rk, uint32_t id) {
    if (rk->n == rk->cap) {
        rk->cap = rk->cap ? rk->cap * 2 : 16;
        rk->ids = lt_realloc_check(rk->ids, rk->cap * sizeof *rk->ids);
    }
    rk->ids[rk->n++] = id;
}

/* The price of sample `len` on a pipeline, cut into m packs of equal FLOPs (the heuristic
 * cuts, PackFlow), its units at context-parallel degree g x cp (g = 1: the pipeline's own),
 * followed by m + pp packs of the rank's own samples, each with the forward FLOPs of one
 * member's share of a pack and `fpt` forward FLOPs per token (the step's other samples'
 * average): PackFlow forwards them while the sample's activations are still held, the
 * warm-up ones and then one per backward of the sample in the steady state. MicroPacks are
 * of equal FLOPs, not tokens, so a pack of shorter samples holds several times the tokens
 * that a backward pack of the sample's late, attention-heavy tokens frees (more so for a
 * member, which computes 1/g of each slice's tokens): the peak counts them. *busy = the busiest stage's compute time (one member's), *fit0 = whether every
 * stage fits the cap without recomputation. With `fitting` and no fit at depth 0, *busy is
 * at each stage's smallest fitting depth (simulate_fitting), *fit whether that fits at all.
 * The pack count is the same for every g (SP_SOLO_PACKS x pp, fewer for a short sample),
 * so the prices differ only by what g changes. */
static lt_status solo_price(lt_slimpack *sp, int64_t len, double fpt, int g, bool fitting, double *busy, bool *fit0,
                            bool *fit, lt_error *err) {
    int pp = sp->cm.pp;
    uint32_t id = 0, own[(SP_SOLO_PACKS + 1) * SP_MAX_STAGES];
    int64_t lens[(SP_SOLO_PACKS + 1) * SP_MAX_STAGES + 1];
    int m = SP_SOLO_PACKS * pp;
    if (len / m < SP_MIN_PACK_TOKENS) m = (int)(len / SP_MIN_PACK_TOKENS);
    if (m < 1) m = 1;
    /* an own pack: c FLOPs at fpt per token, one sample each */
    double c = sample_flops(sp, len) / ((double)g * m);
    int64_t own_len = fpt > 0 ? llround(c / fpt) : 1;
    if (own_len < 1) own_len = 1;
    int n_own = m + pp;
    lens[0] = len;
    for (int k = 0; k < n_own; k++) {
        own[k] = (uint32_t)k + 1;
        lens[k + 1] = own_len;
    }
    stream_build(&sp->ofs, &id, 1, lens, sp->af, sp->qf, false);
    stream_build(&sp->obs, &id, 1, lens, sp->ab, sp->qb, true);
    stream_build(&sp->fs, own, (size_t)n_own, lens, sp->af, sp->qf, false);
    stream_build(&sp->bs, own, (size_t)n_own, lens, sp->ab, sp->qb, true);
    reserve_cuts(sp, (size_t)n_own);
    cuts_heuristic(&sp->ofs, m, sp->ofcut);
    cuts_heuristic(&sp->obs, m, sp->obcut);
    cuts_heuristic(&sp->fs, n_own, sp->fcut);
    cuts_heuristic(&sp->bs, n_own, sp->bcut);
    sp_layout lay = {.m_own = n_own, .m_merged = m, .cp = (uint16_t)(g > 1 ? g * sp->cp : 0)};
    build_schedule(sp, &sp->trial, &lay);
    int rs[SP_MAX_STAGES] = {0};
    set_recompute_stages(&sp->trial, rs);
    lt_status e = lt_plan_simulate(&sp->sim, &sp->ctx, &sp->cm, &sp->trial, NULL, err);
    if (e != LT_OK) return e;
    *fit0 = lt_plan_max_peak(&sp->sim) <= sp->cm.mem_cap;
    *fit = *fit0;
    if (!*fit0 && fitting) {
        double t = 0;
        if ((e = simulate_fitting(sp, &sp->trial, rs, &t, fit, err)) != LT_OK) return e;
    }
    *busy = 0;
    for (int st = 0; st < pp; st++)
        if (sp->sim.busy[st] > *busy) *busy = sp->sim.busy[st];
    return LT_OK;
}

/* The memory trigger of DP-Merge for sample `len` (not a FLOPs outlier), with at most gmax
 * ranks for a group. SlimPack 4.1.1 spreads a sample over a group "when it cannot be held"
 * and notes that "memory and compute outliers need not coincide": a sample that one rank
 * can hold only by recomputing is either recomputed there or spread over g ranks with
 * context parallelism. Both are priced by the cost model as GPU time (the step of balanced
 * ranks takes total GPU time / DP, so the cheaper option makes the shorter step):
 * recomputation = the busiest stage's time on one rank at its smallest fitting depths;
 * context parallelism = g x one member's busiest stage at depth 0, g the smallest degree
 * (2..gmax) at which the sample fits without recomputation. *g = that degree when CP is
 * cheaper, else 0; *held = whether one rank holds the sample without recomputing (then
 * every shorter sample is held too and the caller stops looking). */
static lt_status memory_trigger(lt_slimpack *sp, int64_t len, double fpt, int gmax, int *g, bool *held, lt_error *err) {
    *g = 0;
    double rc_busy = 0;
    bool fit0 = false, fit = false;
    lt_status e = solo_price(sp, len, fpt, 1, true, &rc_busy, &fit0, &fit, err);
    if (e != LT_OK) return e;
    *held = fit0;
    if (fit0) return LT_OK;
    for (int k = 2; k <= gmax; k++) {
        double cp_busy = 0;
        bool f0 = false, f = false;
        if ((e = solo_price(sp, len, fpt, k, false, &cp_busy, &f0, &f, err)) != LT_OK) return e;
        if (!f0) continue;
        /* no fit at any depth on one rank: the group is the only way (the plan would fail) */
        if (!fit || k * cp_busy < rc_busy) *g = k;
        return LT_OK;
    }
    return LT_OK;
}

/* Phase 1 with DP-Merge (file comment), memory outliers too when `memory`. Fills sp->ranks
 * and out->merges / sample_rank; *n_memory = the memory groups formed, *covered = whether
 * every memory outlier of the step is in one (false when one is left to recompute on its
 * rank: no ranks left for a group, no degree that holds it, or recomputation priced
 * cheaper). */
static lt_status phase1(lt_slimpack *sp, const int64_t *lengths, size_t n, bool memory, lt_step_plan *out,
                        size_t *n_memory, bool *covered, lt_error *err) {
    *n_memory = 0;
    *covered = true;
    int dp = sp->cm.dp / sp->cp; /* pipelines */
    int max_g = sp->pc.max_cp / sp->cp; /* a group's CP degree g x cp is at most max_cp */
    if (n > sp->cap_n) {
        sp->cap_n = n * 2;
        sp->flops = lt_realloc_check(sp->flops, sp->cap_n * sizeof *sp->flops);
        sp->order = lt_realloc_check(sp->order, sp->cap_n * sizeof *sp->order);
    }
    double total = 0;
    sp_key *keys = lt_malloc_check((n ? n : 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) {
        sp->flops[i] = sample_flops(sp, lengths[i]);
        keys[i] = (sp_key){sp->flops[i], (uint32_t)i};
        total += sp->flops[i];
    }
    qsort(keys, n, sizeof *keys, cmp_key);
    for (size_t i = 0; i < n; i++) sp->order[i] = keys[i].id;
    free(keys);
    for (int r = 0; r < dp; r++) {
        sp->ranks[r].n = 0;
        sp->ranks[r].load = 0;
        sp->ranks[r].group = -1;
    }
    double cap = total / dp;
    int next_free = 0;
    size_t first_unmerged = 0;
    out->merges = lt_calloc_check((size_t)dp, sizeof *out->merges);
    for (size_t i = 0; i < n; i++) {
        uint32_t id = sp->order[i];
        double f = sp->flops[id];
        int room = dp - next_free;
        int gmax = max_g < room ? max_g : room;
        if (!(f > cap * (1.0 + sp->pc.dp_merge_margin)) || gmax < 2) break;
        int g = (int)ceil(f / cap - 1e-12);
        if (g < 2) g = 2;
        if (g > gmax) g = gmax;
        lt_dp_merge *mg = &out->merges[out->n_merges];
        mg->sample = (int32_t)id;
        mg->first_rank = next_free;
        mg->cp = g;
        mg->reason = LT_MERGE_FLOPS;
        for (int k = 0; k < g; k++) {
            sp->ranks[next_free + k].group = (int)out->n_merges;
            sp->ranks[next_free + k].load = f / g;
        }
        out->sample_rank[id] = next_free;
        out->n_merges++;
        next_free += g;
        first_unmerged = i + 1;
    }
    /* Memory outliers: the next samples, longest first, while a group can be formed; the
     * first one that a rank holds without recomputing ends the search (memory grows with
     * the length). merged[] marks them for the deal below. */
    bool *merged = lt_calloc_check(n ? n : 1, sizeof *merged);
    double rest_flops = 0, rest_tokens = 0; /* the samples not merged so far */
    for (size_t i = first_unmerged; i < n; i++) {
        rest_flops += sp->flops[sp->order[i]];
        rest_tokens += (double)lengths[sp->order[i]];
    }
    for (size_t i = first_unmerged; i < n && memory; i++) {
        int room = dp - next_free;
        int gmax = max_g < room ? max_g : room;
        uint32_t id = sp->order[i];
        /* the other samples' forward FLOPs per token: what the members' own packs hold */
        double of = rest_flops - sp->flops[id], ot = rest_tokens - (double)lengths[id];
        double fpt = ot > 0 ? of / ot : sp->af;
        if (gmax < 2) { /* no group left: is this one held by a rank alone? */
            double busy = 0;
            bool fit0 = false, fit = false;
            lt_status e = solo_price(sp, lengths[id], fpt, 1, false, &busy, &fit0, &fit, err);
            if (e != LT_OK) {
                free(merged);
                return e;
            }
            *covered = fit0;
            break;
        }
        int g = 0;
        bool held = false;
        lt_status e = memory_trigger(sp, lengths[id], fpt, gmax, &g, &held, err);
        if (e != LT_OK) {
            free(merged);
            return e;
        }
        if (held) break;
        if (g < 2) {
            *covered = false;
            continue;
        }
        double f = sp->flops[id];
        lt_dp_merge *mg = &out->merges[out->n_merges];
        *mg = (lt_dp_merge){.sample = (int32_t)id, .first_rank = next_free, .cp = g, .reason = LT_MERGE_MEMORY};
        for (int k = 0; k < g; k++) {
            sp->ranks[next_free + k].group = (int)out->n_merges;
            sp->ranks[next_free + k].load = f / g;
        }
        out->sample_rank[id] = next_free;
        out->n_merges++;
        (*n_memory)++;
        next_free += g;
        merged[id] = true;
        rest_flops -= f;
        rest_tokens -= (double)lengths[id];
    }
    for (size_t i = first_unmerged; i < n; i++) { /* longest-processing-time first */
        uint32_t id = sp->order[i];
        if (merged[id]) continue;
        int best = 0;
        for (int r = 1; r < dp; r++)
            if (sp->ranks[r].load < sp->ranks[best].load) best = r;
        rank_push(&sp->ranks[best], id);
        sp->ranks[best].load += sp->flops[id];
        out->sample_rank[id] = best;
    }
    free(merged);
    /* merges by increasing sample (plan.h) */
    for (size_t a = 1; a < out->n_merges; a++)
        for (size_t b = a; b > 0 && out->merges[b - 1].sample > out->merges[b].sample; b--) {
            lt_dp_merge t = out->merges[b];
            out->merges[b] = out->merges[b - 1];
            out->merges[b - 1] = t;
            for (int k = 0; k < out->merges[b].cp; k++) sp->ranks[out->merges[b].first_rank + k].group = (int)b;
            for (int k = 0; k < out->merges[b - 1].cp; k++)
                sp->ranks[out->merges[b - 1].first_rank + k].group = (int)(b - 1);
        }
    return LT_OK;
}

/* ---------------------------------------------------------------- phase 2 */

/* The members of rank r's unit of choice: a group's ranks, or r alone. */
static void members_of(const lt_slimpack *sp, const lt_step_plan *out, int r, int *first, int *count) {
    int g = sp->ranks[r].group;
    if (g < 0) {
        *first = r;
        *count = 1;
    } else {
        *first = out->merges[g].first_rank;
        *count = out->merges[g].cp;
    }
}

/* Evaluate m for the members [first, first + count): every member built with the heuristic
 * cuts and simulated at common per-stage recompute depths (the smallest that fit all).
 * *time = the slowest member; false when m does not suit a member's tokens. */
static lt_status evaluate(lt_slimpack *sp, const lt_step_plan *out, const int64_t *lengths, int first, int count,
                          int m, double *time, int *rs, bool *ok, lt_error *err) {
    int pp = sp->cm.pp;
    for (int st = 0; st < pp; st++) rs[st] = 0;
    *ok = true;
    for (int pass = 0; pass < 2; pass++) { /* 1: re-simulate the members at the common depths */
        double slowest = 0;
        bool changed = false;
        for (int k = 0; k < count; k++) {
            sp_layout lay;
            if (!prepare(sp, out, lengths, first + k, m, &lay)) {
                *ok = false;
                return LT_OK;
            }
            build_schedule(sp, &sp->trial, &lay);
            double t = 0;
            bool fit = false;
            int mine[SP_MAX_STAGES];
            memcpy(mine, rs, (size_t)pp * sizeof *rs);
            lt_status st = simulate_fitting(sp, &sp->trial, mine, &t, &fit, err);
            if (st != LT_OK) return st;
            if (t > slowest) slowest = t;
            for (int q = 0; q < pp; q++)
                if (mine[q] > rs[q]) {
                    rs[q] = mine[q];
                    changed = true;
                }
        }
        *time = slowest;
        if (!changed || count == 1 || pass == 1) return LT_OK;
    }
    return LT_OK;
}

/* Choose m (and the recompute depth) for the members [first, first + count). */
static lt_status choose_m(lt_slimpack *sp, const lt_step_plan *out, const int64_t *lengths, int first, int count,
                          lt_error *err) {
    int pp = sp->cm.pp;
    int64_t tokens = 0;
    for (int k = 0; k < count; k++) {
        const sp_rank *rk = &sp->ranks[first + k];
        int64_t t = 0;
        for (size_t i = 0; i < rk->n; i++) t += lengths[rk->ids[i]];
        if (rk->group >= 0) t += lengths[out->merges[rk->group].sample];
        if (k == 0 || t < tokens) tokens = t;
    }
    int best_m = 0, worse = 0, best_r[SP_MAX_STAGES] = {0};
    double best_t = 0;
    /* A memory group (formed because one rank would have to recompute, phase1) takes the
     * fastest m at which its members recompute nothing, when one exists: its own MicroPacks
     * in flight beside the held sample depend on m, and recomputing anyway would void the
     * price that formed the group. The search then goes on past slower candidates until it
     * finds such an m (larger m, smaller packs, less in flight). */
    const sp_rank *lead = &sp->ranks[first];
    bool want_zero = lead->group >= 0 && out->merges[lead->group].reason == LT_MERGE_MEMORY;
    int zero_m = 0, zero_r[SP_MAX_STAGES] = {0};
    double zero_t = 0;
    for (int gi = 0; gi < SP_GRID_N; gi++) {
        int m = sp->pc.micropacks > 0 ? sp->pc.micropacks : SP_GRID[gi] * pp;
        if (sp->pc.micropacks == 0 && gi > 0 && tokens / m < SP_MIN_PACK_TOKENS) break;
        if (m > tokens) m = (int)tokens;
        if (m < 1) break;
        double t = 0;
        int r[SP_MAX_STAGES];
        bool ok = false;
        lt_status st = evaluate(sp, out, lengths, first, count, m, &t, r, &ok, err);
        if (st != LT_OK) return st;
        bool zero = true;
        for (int q = 0; q < pp; q++) zero = zero && r[q] == 0;
        if (ok && zero && want_zero && (zero_m == 0 || t < zero_t)) {
            zero_m = m, zero_t = t;
            memcpy(zero_r, r, sizeof zero_r);
        }
        if (ok && (best_m == 0 || t < best_t)) {
            best_m = m, best_t = t;
            memcpy(best_r, r, sizeof best_r);
            worse = 0;
        } else if (++worse >= SP_PATIENCE && !(want_zero && zero_m == 0)) break;
        if (sp->pc.micropacks > 0 || m == tokens) break;
    }
    if (zero_m > 0) {
        best_m = zero_m, best_t = zero_t;
        memcpy(best_r, zero_r, sizeof best_r);
    }
    for (int k = 0; k < count; k++) {
        sp->ranks[first + k].m = best_m;
        memcpy(sp->ranks[first + k].recompute, best_r, sizeof best_r);
        sp->ranks[first + k].time = best_t;
    }
    return LT_OK;
}

/* ---------------------------------------------------------------- the step */

/* One plan of the step: DP-Merge of FLOPs outliers, and of memory outliers when `memory`.
 * With `memory`, when there is no memory outlier to merge or not all of them can be (one
 * would recompute on its rank all the same, and the groups take ranks from the deal: on
 * Common Crawl at 256K such plans were never faster, docs/strategies.md), *same is set and
 * out is left half made (the caller frees it): the plan without is kept. */
static lt_status plan_variant(lt_slimpack *sp, uint64_t step, const int64_t *lengths, size_t n, int cp, bool memory,
                              bool *same, lt_step_plan *out, lt_error *err) {
    *same = false;
    sp->cm = sp->pc.cm;
    lt_status st = lt_cost_model_set_cp(&sp->cm, cp, err);
    if (st != LT_OK) return st;
    sp->cp = cp;
    const lt_cost_model *cm = &sp->cm;
    int dp = cm->dp / cp; /* pipelines */
    if ((st = lt_plan_start(&sp->pc, out, LT_STRATEGY_SLIMPACK, step, lengths, n, (size_t)dp, cp, err)) != LT_OK)
        return st;
    size_t n_memory = 0;
    bool covered = true;
    if ((st = phase1(sp, lengths, n, memory, out, &n_memory, &covered, err)) != LT_OK) return st;
    if (memory && (n_memory == 0 || !covered)) {
        *same = true;
        return LT_OK;
    }
    /* Phase 2: m per rank (per group for DP-Merge members) */
    for (int r = 0; r < dp;) {
        int first, count;
        members_of(sp, out, r, &first, &count);
        if ((st = choose_m(sp, out, lengths, first, count, err)) != LT_OK) return st;
        r = first + count;
    }
    /* The chosen m's cuts by the MILP, then the final schedules, a unit of choice (a rank,
     * or a DP-Merge group's members) at a time. */
    lt_milp_options opt = lt_plan_milp_options(&sp->pc);
    int m_lo = 0, m_hi = 0, r_lo = 0, r_hi = 0;
    bool any = false;
    for (int r0 = 0; r0 < dp;) {
        int first, count;
        members_of(sp, out, r0, &first, &count);
        r0 = first + count;
        if (sp->ranks[first].m == 0) { /* no tokens (only a rank alone): an empty pipeline */
            for (int r = first; r < first + count; r++)
                if ((st = lt_plan_finish_rank(&sp->sim, &sp->ctx, cm, &out->ranks[r], err)) != LT_OK) return st;
            continue;
        }
        for (int r = first; r < first + count; r++) {
            sp_rank *rk = &sp->ranks[r];
            lt_rank_plan *rp = &out->ranks[r];
            sp_layout lay;
            if (!prepare(sp, out, lengths, r, rk->m, &lay))
                return lt_fail(err, LT_ERR_INTERNAL, NULL,
                               "slimpack: step %" PRIu64 ": rank %d: no layout for m = %d", step, r, rk->m);
            lt_milp_status ms;
            if (lay.m_own > 1) { /* the forward MicroPacks' slice boundaries (the backward ones
                                    * keep the heuristic's near-exact cuts: file comment) */
                if ((st = cuts_milp(&sp->fs, lay.m_own, sp->fcut, &sp->milp, &opt, &ms, err)) != LT_OK) return st;
                lt_plan_note_solver(out, ms);
            }
            build_schedule(sp, &rp->sched, &lay);
            if (count > 1) { /* a member over the cap at the group's depths with the MILP's
                              * cuts goes back to the heuristic's, which the choice of m
                              * simulated at those depths */
                set_recompute_stages(&rp->sched, rk->recompute);
                if ((st = lt_plan_simulate(&sp->sim, &sp->ctx, cm, &rp->sched, NULL, err)) != LT_OK) return st;
                if (lt_plan_max_peak(&sp->sim) > cm->mem_cap) {
                    prepare(sp, out, lengths, r, rk->m, &lay); /* succeeded above */
                    build_schedule(sp, &rp->sched, &lay);
                }
            }
        }
        /* The MILP's cuts may fit at other depths than the heuristic's: a rank alone takes
         * its own smallest fitting depths; a group's members keep one depth per stage (the
         * group shares it, file comment), the smallest at least the chosen one that fits
         * every member. */
        int rs[SP_MAX_STAGES] = {0};
        for (int q = 0; q < cm->pp; q++) rs[q] = count > 1 ? sp->ranks[first].recompute[q] : 0;
        int common[SP_MAX_STAGES];
        memcpy(common, rs, sizeof rs);
        for (int r = first; r < first + count; r++) {
            int mine[SP_MAX_STAGES];
            memcpy(mine, rs, sizeof rs);
            double t = 0;
            bool fit = false;
            if ((st = simulate_fitting(sp, &out->ranks[r].sched, mine, &t, &fit, err)) != LT_OK) return st;
            for (int q = 0; q < cm->pp; q++)
                if (mine[q] > common[q]) common[q] = mine[q];
        }
        for (int r = first; r < first + count; r++) {
            sp_rank *rk = &sp->ranks[r];
            lt_rank_plan *rp = &out->ranks[r];
            memcpy(rk->recompute, common, sizeof common);
            set_recompute_stages(&rp->sched, rk->recompute);
            if ((st = lt_plan_finish_rank(&sp->sim, &sp->ctx, cm, rp, err)) != LT_OK) return st;
            if (!any || rk->m < m_lo) m_lo = rk->m;
            if (rk->m > m_hi) m_hi = rk->m;
            for (int q = 0; q < cm->pp; q++) {
                if (!any || rk->recompute[q] < r_lo) r_lo = rk->recompute[q];
                if (rk->recompute[q] > r_hi) r_hi = rk->recompute[q];
                any = true;
            }
        }
    }
    snprintf(out->params, sizeof out->params, "m=%d-%d recompute=%d-%d dp_merge=%zu", m_lo, m_hi, r_lo, r_hi,
             out->n_merges);
    /* the groups' merged ops are collectives: their members' times from one joint graph */
    if ((st = lt_plan_simulate_merges(out, cm, err)) != LT_OK) return st;
    return lt_plan_finish(&sp->pc, out, sp->sync, err);
}

/* Does any op of the plan recompute? */
static bool recomputes(const lt_step_plan *p) {
    for (size_t r = 0; r < p->n_ranks; r++)
        for (int st = 0; st < p->ranks[r].sched.stages; st++)
            for (size_t i = 0; i < p->ranks[r].sched.stage[st].n; i++)
                if (p->ranks[r].sched.stage[st].ops[i].recompute_layers > 0) return true;
    return false;
}

/* The memory trigger decided by predicted step time (issue 21; SlimPack 4.1.1): the step is
 * planned with DP-Merge of FLOPs outliers only; when that plan recomputes somewhere (or
 * cannot fit the cap at all), it is planned again with the memory outliers merged too
 * (phase1), and the faster of the two by predicted step time is kept. Each memory group was
 * itself priced against recomputation (memory_trigger), but whether the step gains depends
 * on the rest of the plan: the members' other samples may make them recompute anyway, and
 * a group's ranks are taken from the deal. */
lt_status lt_slimpack_plan(lt_slimpack *sp, uint64_t step, const int64_t *lengths, size_t n, int cp,
                           lt_step_plan *out, lt_error *err) {
    bool same = false;
    lt_status st = plan_variant(sp, step, lengths, n, cp, false, &same, out, err);
    if (sp->pc.no_memory_merge || (st != LT_OK && st != LT_ERR_INPUT) || (st == LT_OK && !recomputes(out))) return st;
    lt_step_plan b;
    lt_step_plan_init(&b);
    lt_error err_b;
    lt_error_clear(&err_b);
    lt_status sb = plan_variant(sp, step, lengths, n, cp, true, &same, &b, &err_b);
    if (sb == LT_OK && !same && (st != LT_OK || b.time_s < out->time_s)) {
        lt_step_plan_free(out);
        *out = b;
        if (err) lt_error_clear(err);
        return LT_OK;
    }
    lt_step_plan_free(&b);
    if (sb != LT_OK && sb != LT_ERR_INPUT) {
        if (err) *err = err_b;
        return sb;
    }
    return st;
}
