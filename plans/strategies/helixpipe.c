/*
 * plans/strategies/helixpipe.c — the helixpipe strategy (HelixPipe 4.2, 4.3, 4.4.1): the
 * attention-parallel partition with the two-fold FILO schedule, over micro-batches of packed
 * samples.
 *
 * A step's samples are packed best-fit decreasing into micro-batches (the megatron baseline's
 * packing) of lt_helixpipe_capacity tokens: the step's tokens over dp x 2p x k (k two-fold
 * loops a pipeline, so short-sample steps fill every pipeline), at least the longest sample,
 * at most plan.context_len; dealt over the dp pipelines by cost (no context parallelism):
 * the costliest bin first (one layer's forward FLOPs of its samples, cost.h), each to the
 * pipeline with the least so far (longest processing time first; round-robin in creation
 * order, megatron's deal, left the pipeline of a long sample a second long bin: 1.42x ->
 * 1.76x over megatron on wikipedia at 64K, docs/PERFORMANCE.md). The plan is made for
 * k = 1, 2, 4 and the fastest kept. The two-fold FILO schedule admits loops of 2p micro-batches
 * (HelixPipe 4.3: uniform batches, m a multiple of 2p); the rest of a step is handled by
 * splitting micro-batches until each pipeline's count is a multiple of 2p: the costliest
 * micro-batch (forward FLOPs of one layer, cost.h) is split in two, its samples shared out
 * (the longest first, each to the lighter half) when it holds several, or its one sample cut
 * into two slices of equal forward cost with K/V context (the later slice attending to the
 * earlier one's keys and values, as seq1f1b's pieces do) when it holds one. So no micro-batch
 * is padded and no sample dropped; the price is smaller micro-batches where a pipeline has few,
 * which the simulator prices (more per-op overhead, shorter attention per op). A sample of one
 * token cannot be cut: a pipeline whose micro-batches cannot reach the multiple (fewer tokens
 * than 2p) runs the naive FILO schedule (one micro-batch a slot, m a multiple of p) or, failing
 * that too, is refused by name. Under the two-fold schedule a sample's slices start at an
 * even micro-batch, so that each pair of them shares a slot and its attention stage
 * (align_runs): its keys and values stay on that stage, not copied to the next at every layer.
 *
 * Memory: the FILO schedule keeps every micro-batch of a loop sequence in flight (HelixPipe
 * Table 2: activation memory grows with m), so a pipeline whose step does not fit plan.mem
 * runs in rounds: consecutive groups of whole loops, each a complete FILO schedule (every
 * forward, then every backward) appended after the previous one on every stage, a round
 * never splitting a sample's slices. Per pipeline the fastest fitting choice among the round
 * sizes (the whole step first), of the two-fold schedule and of the naive one (loops of p
 * micro-batches: half the two-fold's smallest round), and, for each, without recomputation, else with
 * "recomputation without attention" (4.4.1: the pre- and post-attention parts keep only their
 * inputs, the attention its inputs and outputs). When none fits and the pipeline holds
 * several bins, they are split again from the deal one by one, each bin to 2p (else p)
 * micro-batches of its own, and the same choice is made over those: a long sample cut over
 * the whole pipeline's micro-batches makes every round hold all of it and the rest beside it,
 * where cut within its own bin it is a round alone (split_pipe, per_bin; the params' per_bin
 * counts those pipelines). When that fits nothing either, the first split's smallest rounds
 * with recomputation, and the memory check of lt_plan_finish names the step. More rounds
 * cost a fill and drain each: the simulator prices them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h"                /* lt_fail */
#include "plans/strategies/internal.h"
#include "plans/strategies/packing.h" /* lt_pack_best_fit_decreasing, lt_split_equal_cost */

/* A micro-batch being formed: slices [first, first + n) of the pipeline's slice list. */
typedef struct hx_slice {
    int32_t sample;
    int64_t begin, end;
} hx_slice;

typedef struct hx_pipe {
    hx_slice *sl;    /* slices, micro-batch by micro-batch */
    size_t n_sl, cap_sl;
    size_t *mb;      /* [n_mb + 1] micro-batch b = sl[mb[b] .. mb[b + 1]) */
    size_t n_mb, cap_mb;
} hx_pipe;

static void push_slice(hx_pipe *h, int32_t sample, int64_t begin, int64_t end) {
    if (h->n_sl == h->cap_sl) {
        h->cap_sl = h->cap_sl ? 2 * h->cap_sl : 16;
        h->sl = lt_realloc_check(h->sl, h->cap_sl * sizeof *h->sl);
    }
    h->sl[h->n_sl++] = (hx_slice){sample, begin, end};
}

static void close_mb(hx_pipe *h) {
    if (h->n_mb + 2 > h->cap_mb) {
        h->cap_mb = h->cap_mb ? 2 * h->cap_mb : 16;
        h->mb = lt_realloc_check(h->mb, h->cap_mb * sizeof *h->mb);
    }
    if (h->n_mb == 0) h->mb[0] = 0;
    h->mb[++h->n_mb] = h->n_sl;
}

/* One layer's forward FLOPs of a slice (GEMMs + causal attention over its context). */
static double slice_cost(const lt_cost_model *cm, const hx_slice *s) {
    double t = (double)(s->end - s->begin);
    return lt_cost_linear_flops(cm, LT_PART_ALL, t) + lt_cost_attention_flops(cm, (double)s->begin, (double)s->end);
}

static double mb_cost(const lt_cost_model *cm, const hx_pipe *h, size_t b) {
    double c = 0;
    for (size_t i = h->mb[b]; i < h->mb[b + 1]; i++) c += slice_cost(cm, &h->sl[i]);
    return c;
}

/* A best-fit bin and its cost (the sum of its samples' slice_cost), for the deal. */
typedef struct hx_bin {
    double cost;
    size_t bin;
} hx_bin;

static int cmp_bin(const void *a, const void *b) { /* by decreasing cost, ties in creation order */
    const hx_bin *x = a, *y = b;
    if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
    return (x->bin > y->bin) - (x->bin < y->bin);
}

/* Split micro-batch b in two (the file comment), keeping the order of the others: the two
 * halves take b's place. Returns false when b cannot be split (one slice of one token). */
static bool split_mb(const lt_cost_model *cm, hx_pipe *h, size_t b) {
    size_t lo = h->mb[b], hi = h->mb[b + 1], n = hi - lo;
    if (n == 1 && h->sl[lo].end - h->sl[lo].begin < 2) return false;
    hx_slice *old = lt_malloc_check(n * sizeof *old);
    memcpy(old, h->sl + lo, n * sizeof *old);
    hx_slice *a = lt_malloc_check((n + 1) * sizeof *a), *z = lt_malloc_check((n + 1) * sizeof *z);
    size_t na = 0, nz = 0;
    if (n == 1) { /* one slice: two of equal forward cost, the later attending to the earlier's K/V */
        int64_t len = old[0].end - old[0].begin, cuts[3];
        /* the slice as a document of its own: its context's attention is the same in both
         * halves' share, so the cut of equal cost over [0, len) is taken (a close enough split) */
        lt_split_equal_cost(&len, 1, lt_cost_linear_flops(cm, LT_PART_ALL, 1.0), lt_cost_attention_flops(cm, 0.0, 1.0),
                            2, cuts);
        a[na++] = (hx_slice){old[0].sample, old[0].begin, old[0].begin + cuts[1]};
        z[nz++] = (hx_slice){old[0].sample, old[0].begin + cuts[1], old[0].end};
    } else { /* several: longest-processing-time first into the lighter half, then each half in
                the original order (a sample's slices stay in token order) */
        size_t *idx = lt_malloc_check(n * sizeof *idx);
        bool *in_a = lt_calloc_check(n, sizeof *in_a);
        for (size_t i = 0; i < n; i++) idx[i] = i;
        for (size_t i = 1; i < n; i++) /* by decreasing cost, ties by position (insertion sort: n is small) */
            for (size_t j = i; j > 0 && slice_cost(cm, &old[idx[j]]) > slice_cost(cm, &old[idx[j - 1]]); j--) {
                size_t t = idx[j];
                idx[j] = idx[j - 1], idx[j - 1] = t;
            }
        double ca = 0, cz = 0;
        for (size_t i = 0; i < n; i++) {
            double c = slice_cost(cm, &old[idx[i]]);
            if (ca <= cz) in_a[idx[i]] = true, ca += c;
            else cz += c;
        }
        for (size_t i = 0; i < n; i++) {
            if (in_a[i]) a[na++] = old[i];
            else z[nz++] = old[i];
        }
        free(idx), free(in_a);
    }
    /* rebuild: the halves in b's place (n slices become na + nz = n or n + 1) */
    size_t grow = na + nz - n;
    for (size_t g = 0; g < grow; g++) push_slice(h, 0, 0, 0); /* room */
    memmove(h->sl + hi + grow, h->sl + hi, (h->n_sl - grow - hi) * sizeof *h->sl);
    memcpy(h->sl + lo, a, na * sizeof *a);
    memcpy(h->sl + lo + na, z, nz * sizeof *z);
    close_mb(h); /* one more micro-batch: shift the boundaries after b */
    for (size_t k = h->n_mb; k > b + 1; k--) h->mb[k] = h->mb[k - 1] + grow;
    h->mb[b + 1] = lo + na;
    free(old), free(a), free(z);
    return true;
}

/* Split the costliest splittable micro-batch of [lo, hi); false when none can be split. */
static bool split_costliest(const lt_cost_model *cm, hx_pipe *h, size_t lo, size_t hi) {
    size_t best = SIZE_MAX;
    double best_c = -1;
    for (size_t b = lo; b < hi; b++) {
        size_t first = h->mb[b];
        if (h->mb[b + 1] - first == 1 && h->sl[first].end - h->sl[first].begin < 2) continue;
        double c = mb_cost(cm, h, b);
        if (c > best_c) best_c = c, best = b;
    }
    return best != SIZE_MAX && split_mb(cm, h, best);
}

/* Split the costliest splittable micro-batch until the count is a multiple of `mult` (or 0).
 * Returns false when no micro-batch can be split further. */
static bool reach_multiple(const lt_cost_model *cm, hx_pipe *h, size_t mult) {
    while (h->n_mb % mult != 0)
        if (!split_costliest(cm, h, 0, h->n_mb)) return false;
    return true;
}

/* Each bin of h (as dealt: one micro-batch each) split into `mult` micro-batches of its own,
 * the costliest of the bin's first. False when a bin cannot reach it. */
static bool reach_per_bin(const lt_cost_model *cm, hx_pipe *h, size_t mult) {
    for (size_t b = h->n_mb; b-- > 0;) /* from the last: a split moves only the bins after it */
        for (size_t have = 1; have < mult; have++)
            if (!split_costliest(cm, h, b, b + have)) return false;
    return true;
}

/* Micro-batch b of `from` appended to `to`. */
static void push_mb(hx_pipe *to, const hx_pipe *from, size_t b) {
    for (size_t i = from->mb[b]; i < from->mb[b + 1]; i++) push_slice(to, from->sl[i].sample, from->sl[i].begin, from->sl[i].end);
    close_mb(to);
}

static void copy_pipe(hx_pipe *to, const hx_pipe *from) {
    to->n_sl = to->n_mb = 0;
    for (size_t b = 0; b < from->n_mb; b++) push_mb(to, from, b);
}

/* h: the pipeline's micro-batches as dealt (one per bin) split to a multiple of 2p, else of
 * p (the naive FILO; the splits made for 2p kept): over the whole pipeline, the costliest
 * first, or (per_bin) each bin to 2p, else p, micro-batches of its own, so that each bin can
 * be a round. Returns the folds (2 or 1), 0 when neither multiple is reached. */
static int split_pipe(const lt_cost_model *cm, const hx_pipe *dealt, hx_pipe *h, bool per_bin) {
    size_t P = (size_t)cm->pp;
    copy_pipe(h, dealt);
    if (h->n_mb == 0) return 2;
    if (!per_bin) return reach_multiple(cm, h, 2 * P) ? 2 : reach_multiple(cm, h, P) ? 1 : 0;
    if (reach_per_bin(cm, h, 2 * P)) return 2;
    copy_pipe(h, dealt);
    return reach_per_bin(cm, h, P) ? 1 : 0;
}

int64_t lt_helixpipe_capacity(const int64_t *lengths, size_t n, int dp, int pp, int loops, int64_t context_len) {
    int64_t total = 0, longest = 1, per = 2 * (int64_t)dp * pp * loops;
    for (size_t i = 0; i < n; i++) {
        total += lengths[i];
        if (lengths[i] > longest) longest = lengths[i];
    }
    int64_t want = (total + per - 1) / per;
    if (want < longest) want = longest;
    return want < context_len ? want : context_len;
}

/* May a round end before micro-batch b (no sample's slices on both sides)? A sample cut into
 * slices sits in adjacent micro-batches of one slice each (split_mb), so b - 1 and b tell. */
static bool cuttable(const hx_pipe *h, size_t b) {
    if (b == 0 || b >= h->n_mb) return true;
    for (size_t i = h->mb[b - 1]; i < h->mb[b]; i++)
        for (size_t j = h->mb[b]; j < h->mb[b + 1]; j++)
            if (h->sl[i].sample == h->sl[j].sample) return false;
    return true;
}

/* The two-fold FILO schedule runs micro-batches 2j and 2j + 1 of a loop in one slot, their
 * attentions on one stage a layer (HelixPipe 4.3; lt_sched_helixpipe_folds). A sample cut into
 * slices sits in a run of adjacent micro-batches (split_mb): started at an even position,
 * each pair of its slices attends on one stage, where started at an odd one each slice's
 * attention is on another stage than the slice before, which then receives the K/V of every
 * earlier token (and sends their gradients back) at every layer, and holds them
 * (docs/cost-model.md's kv_in_bytes). Reorders h's micro-batches so that every run of two or
 * more starts at an even position: one that would start at an odd one has the next lone
 * micro-batch after it (whole samples) moved in front of it. A run of three or more still
 * spans slots; none without a lone micro-batch after it stays where it is. */
static void align_runs(hx_pipe *h) {
    size_t n = h->n_mb, *run = lt_malloc_check((n + 1) * sizeof *run), n_run = 0;
    for (size_t b = 0; b < n; b++) /* run starts: where a round could be cut */
        if (cuttable(h, b)) run[n_run++] = b;
    run[n_run] = n;
    bool *used = lt_calloc_check(n_run + 1, sizeof *used);
    size_t *order = lt_malloc_check((n + 1) * sizeof *order), n_out = 0;
    for (size_t r = 0; r < n_run; r++) {
        if (used[r]) continue;
        size_t len = run[r + 1] - run[r];
        if (len >= 2 && n_out % 2 == 1)
            for (size_t q = r + 1; q < n_run; q++)
                if (!used[q] && run[q + 1] - run[q] == 1) {
                    order[n_out++] = run[q], used[q] = true;
                    break;
                }
        for (size_t b = run[r]; b < run[r + 1]; b++) order[n_out++] = b;
        used[r] = true;
    }
    hx_pipe o = {0};
    for (size_t k = 0; k < n; k++) push_mb(&o, h, order[k]);
    free(h->sl), free(h->mb);
    *h = o;
    free(run), free(used), free(order);
}

/* Schedule s (its units the micro-batches of h, in order) as rounds of about `per` micro-batches
 * (a multiple of `block` = folds x p), each a whole FILO schedule appended after the previous
 * one on every stage, a round ending only where no sample spans the cut (a sample's slices
 * share one round: their K/V and dK/dV order stays inside it). Returns the rounds made. */
static size_t build_rounds(lt_schedule *s, const hx_pipe *h, size_t block, size_t per, int folds, int rc,
                           uint32_t *order, lt_error *err, lt_status *st) {
    for (int g = 0; g < s->stages; g++) s->stage[g].n = 0;
    size_t rounds = 0;
    for (size_t start = 0; *st == LT_OK && start < h->n_mb; rounds++) {
        size_t end = start + per < h->n_mb ? start + per : h->n_mb;
        while (end < h->n_mb && !cuttable(h, end)) end += block;
        *st = lt_sched_helixpipe_folds(s, order + start, end - start, folds, rc, err);
        start = end;
    }
    return rounds;
}

/* h's micro-batches as s's slices and units, in order (*order the identity over them, grown
 * to fit); under the two-fold schedule a sample's slices aligned to slots first (align_runs). */
static void lay_out(lt_schedule *s, hx_pipe *h, int folds, uint32_t **order) {
    if (folds == 2) align_runs(h);
    lt_schedule_clear(s);
    for (size_t b = 0; b < h->n_mb; b++) {
        uint32_t first = (uint32_t)s->n_slices;
        for (size_t i = h->mb[b]; i < h->mb[b + 1]; i++) lt_schedule_add_slice(s, h->sl[i].sample, h->sl[i].begin, h->sl[i].end);
        lt_schedule_add_unit(s, first, (uint32_t)(h->mb[b + 1] - h->mb[b]));
    }
    *order = lt_realloc_check(*order, (h->n_mb + 1) * sizeof **order);
    for (size_t b = 0; b < h->n_mb; b++) (*order)[b] = (uint32_t)b;
}

/* A pipeline's schedule: its folds, round size (micro-batches) and recompute; t its step
 * time, < 0 when it does not fit the memory cap. */
typedef struct hx_choice {
    double t;
    size_t per;
    int rc, folds;
} hx_choice;

/* h laid out in s (lay_out) and its fastest fitting schedule. FILO holds every micro-batch of
 * a round in flight (HelixPipe Table 2: memory grows with m): the two-fold schedule and the
 * whole step as one round first. None fitting: t = -1 with the naive FILO's smallest rounds
 * (p micro-batches) and recompute, whose memory error lt_plan_finish reports. */
static hx_choice choose(const lt_cost_model *cm, lt_sim *sim, lt_cost_sim_ctx *ctx, lt_schedule *s, hx_pipe *h,
                        int folds, uint32_t **order, lt_error *err, lt_status *st) {
    lay_out(s, h, folds, order);
    hx_choice best = {-1, (size_t)cm->pp, 1, 1};
    for (int fo = folds; *st == LT_OK && fo >= 1; fo--) {
        size_t block = (size_t)fo * (size_t)cm->pp, blocks = h->n_mb / block;
        for (size_t k = blocks; *st == LT_OK && k >= 1; k--) {
            if (k < blocks && (blocks + k - 1) / k == (blocks + k) / (k + 1)) continue; /* same rounds as k + 1 */
            for (int rc = 0; *st == LT_OK && rc <= 1; rc++) {
                build_rounds(s, h, block, k * block, fo, rc, *order, err, st);
                if (*st == LT_OK) *st = lt_plan_simulate(sim, ctx, cm, s, NULL, err);
                if (*st != LT_OK || lt_plan_max_peak(sim) > cm->mem_cap) continue;
                if (best.t < 0 || sim->step_time < best.t) best = (hx_choice){sim->step_time, k * block, rc, fo};
                break; /* (recompute only adds time where no recompute fits) */
            }
        }
    }
    return best;
}

/* The plan with micro-batches of `capacity` tokens (the file comment). */
static lt_status plan_with(const lt_plan_config *pc, lt_sim *sim, lt_cost_sim_ctx *ctx, lt_packing *pack,
                           uint64_t step, const int64_t *lengths, size_t n, int64_t capacity, lt_step_plan *out,
                           lt_error *err) {
    const lt_cost_model *cm = &pc->cm;
    int P = cm->pp, dp = cm->dp;
    lt_status st = lt_plan_start(pc, out, LT_STRATEGY_HELIXPIPE, step, lengths, n, (size_t)dp, 1, err);
    if (st != LT_OK) return st;
    lt_pack_best_fit_decreasing(pack, lengths, n, capacity);
    hx_pipe *hp = lt_calloc_check((size_t)dp, sizeof *hp);
    /* the deal: the costliest bin first, each to the pipeline with the least cost so far */
    size_t nb = pack->n_bins;
    hx_bin *bins = lt_malloc_check((nb + 1) * sizeof *bins);
    double *load = lt_calloc_check((size_t)dp, sizeof *load);
    for (size_t b = 0; b < nb; b++) {
        bins[b] = (hx_bin){0, b};
        for (size_t i = pack->bin_start[b]; i < pack->bin_start[b + 1]; i++)
            bins[b].cost += slice_cost(cm, &(hx_slice){0, 0, lengths[pack->members[i]]});
    }
    if (nb > 1) qsort(bins, nb, sizeof *bins, cmp_bin);
    for (size_t k = 0; k < nb; k++) {
        size_t b = bins[k].bin;
        int r = 0;
        for (int q = 1; q < dp; q++)
            if (load[q] < load[r]) r = q;
        load[r] += bins[k].cost;
        for (size_t i = pack->bin_start[b]; i < pack->bin_start[b + 1]; i++) {
            uint32_t s = pack->members[i];
            out->sample_rank[s] = r;
            push_slice(&hp[r], (int32_t)s, 0, lengths[s]);
        }
        close_mb(&hp[r]);
    }
    int folds_used = 2, rc_used = 0;
    size_t rounds_used = 0;
    uint32_t *order = NULL;
    size_t per_bin_used = 0;
    for (int r = 0; st == LT_OK && r < dp; r++) {
        hx_pipe *h = &hp[r], dealt = *h, alt = {0};
        *h = (hx_pipe){0};
        lt_schedule *s = &out->ranks[r].sched;
        int folds = split_pipe(cm, &dealt, h, false);
        if (!folds) {
            st = lt_fail(err, LT_ERR_INPUT, NULL, "step %" PRIu64 ", pipeline %d: %zu micro-batches of too few tokens "
                         "for HelixPipe's FILO schedule over %d stages (it needs a multiple of %d)", step, r, h->n_mb, P, P);
            free(dealt.sl), free(dealt.mb);
            break;
        }
        hx_choice best = choose(cm, sim, ctx, s, h, folds, &order, err, &st);
        /* none fits: the bins split one by one, each a round of its own at the smallest (a
         * long sample's slices no longer fill the rounds of the others) */
        int alt_folds = st == LT_OK && best.t < 0 && dealt.n_mb > 1 ? split_pipe(cm, &dealt, &alt, true) : 0;
        if (alt_folds) {
            hx_choice b2 = choose(cm, sim, ctx, s, &alt, alt_folds, &order, err, &st);
            if (st == LT_OK && b2.t >= 0) {
                hx_pipe t = *h;
                *h = alt, alt = t, best = b2;
                per_bin_used++;
            } else if (st == LT_OK) {
                lay_out(s, h, folds, &order); /* back to the first split, for the memory error */
            }
        }
        free(dealt.sl), free(dealt.mb), free(alt.sl), free(alt.mb);
        if (st == LT_OK && h->n_mb > 0) {
            size_t rounds = build_rounds(s, h, (size_t)best.folds * (size_t)P, best.per, best.folds, best.rc, order, err,
                                         &st);
            if (rounds > rounds_used) rounds_used = rounds;
            if (best.rc > rc_used) rc_used = best.rc;
            if (best.folds < folds_used) folds_used = best.folds;
        }
    }
    free(order), free(bins), free(load);
    for (int r = 0; st == LT_OK && r < dp; r++) st = lt_plan_finish_rank(sim, ctx, cm, &out->ranks[r], err);
    size_t mbs = 0;
    for (int r = 0; r < dp; r++) {
        mbs += hp[r].n_mb;
        free(hp[r].sl), free(hp[r].mb);
    }
    free(hp);
    if (st != LT_OK) return st;
    snprintf(out->params, sizeof out->params, "folds=%d recompute=%d rounds=%zu microbatches=%zu per_bin=%zu", folds_used,
             rc_used, rounds_used, mbs, per_bin_used);
    return lt_plan_finish(pc, out, lt_plan_max_dp_sync(cm), err);
}

lt_status lt_helixpipe_plan(const lt_plan_config *pc0, lt_sim *sim, lt_cost_sim_ctx *ctx, lt_packing *pack,
                            uint64_t step, const int64_t *lengths, size_t n, lt_step_plan *out, lt_error *err) {
    /* priced as the trainer runs it over ranks: each stage holds its parts' states and the
     * Q/K/V weights its attentions are sent (lt_cost_model.helix_parts) */
    lt_plan_config hpc = *pc0;
    hpc.cm.helix_parts = hpc.cm.pp > 1;
    const lt_plan_config *pc = &hpc;
    /* the fastest plan over micro-batch sizes of 1, 2 and 4 two-fold loops a pipeline (more
     * micro-batches: a smaller share of fill and drain, more in flight); the first error when
     * none plans (ties: the larger micro-batches) */
    lt_step_plan trial;
    lt_step_plan_init(&trial);
    lt_error first;
    lt_status first_st = LT_OK;
    bool have = false;
    int64_t tried[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) {
        int64_t cap = lt_helixpipe_capacity(lengths, n, pc->cm.dp, pc->cm.pp, 1 << k, pc->context_len);
        if ((k > 0 && cap == tried[k - 1]) || (k > 1 && cap == tried[k - 2])) continue; /* (the longest sample decides) */
        tried[k] = cap;
        lt_error e;
        lt_status st = plan_with(pc, sim, ctx, pack, step, lengths, n, cap, &trial, &e);
        if (st == LT_ERR_INTERNAL || st == LT_ERR_NOMEM) {
            lt_step_plan_free(&trial), lt_step_plan_free(out);
            if (err) *err = e;
            return st;
        }
        if (st != LT_OK) {
            if (first_st == LT_OK) first_st = st, first = e;
            lt_step_plan_free(&trial);
            continue;
        }
        if (!have || trial.time_s < out->time_s) {
            lt_step_plan_free(out);
            *out = trial;
            lt_step_plan_init(&trial);
            have = true;
        } else {
            lt_step_plan_free(&trial);
        }
    }
    if (!have) {
        if (err) *err = first;
        return first_st;
    }
    return LT_OK;
}
