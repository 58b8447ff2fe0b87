/*
 * plans/strategies/baselines.c — the planner (plans/strategies/plan.h): the heuristic strategies megatron, gpipe,
 * seq1f1b and chunkflow, each turning a step's sample lengths into a simulated step plan.
 * docs/strategies.md states every rule with its paper.
 *
 *   megatron   best-fit-decreasing packing into micro-batches of context_len tokens
 *              (Krell et al. 2021; SlimPack 6.1's baseline), dealt round-robin over the
 *              dp / cp pipelines, 1F1B; the context-parallel degree and recompute depth are
 *              tuned once, in lt_strategies_create, so that a micro-batch of context_len tokens
 *              fits (SlimPack 6.1, ChunkFlow 6.2 Table 3: the baselines are tuned per run)
 *   gpipe      the same micro-batches under GPipe
 *   seq1f1b    each micro-batch cut into pieces of equal forward FLOPs, slice-level 1F1B
 *   chunkflow  each pipeline's samples through ChunkFlow Alg. 1 (chunks) and Alg. 2 with
 *              1F1B (4.3), (ChunkSize, K) by a grid search per step (ChunkFlow 5)
 *
 * Every pipeline is priced by the one cost model (plans/cost/cost.h) through the one simulator
 * (plans/schedule/sim.h); the lt_sim, the cost contexts, the packing and the chunkflow schedules are
 * the planner's scratch, reused from step to step (one planner per thread, plan.h).
 */
#include "plans/strategies/plan.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/error.h"                /* lt_fail, lt_error_hint, lt_malloc_check */
#include "plans/strategies/packing.h" /* lt_pack_best_fit_decreasing, lt_split_equal_cost */
#include "plans/schedule/sim.h"       /* lt_sim_run */
#include "plans/strategies/internal.h"

#define GIB LT_GIB

/* ChunkFlow 5's grid (docs/strategies.md): ChunkSize powers of two from 4K below
 * context_len plus context_len itself, the largest CF_MAX_SIZES of them; K in CF_KS. */
#define CF_MIN_CHUNK 4096
#define CF_MAX_SIZES 6
static const int CF_KS[] = {1, 2, 4, 8};
#define CF_N_KS ((int)(sizeof CF_KS / sizeof CF_KS[0]))

/* Steps the exact bin-packing search of ChunkFlow Alg. 1 may take per bin count in the
 * per-step grid search (lt_sched_units_chunked_budget): enough for the exact answer on
 * small pipelines, first-fit decreasing's beyond (schedule.h). */
#define CF_PACK_BUDGET 20000L

/* A chunkflow pipeline's scratch for the grid search: its chunks (units) for one ChunkSize,
 * the cost bridge prepared for them, and a memo of op costs. The candidates of one
 * ChunkSize differ only in K (which op kinds run in which order) and the recompute depth,
 * so an op's cost is a function of (stage, unit, kind) while the units and the depth stay:
 * each is priced once instead of once per K. */
typedef struct cf_pipe {
    lt_schedule sched;
    lt_cost_sim_ctx ctx;
    lt_sim_costs inner;  /* lt_cost_sim_costs_prepared for sched */
    lt_op_cost *memo;    /* [stages x units x 3] */
    uint32_t *memo_gen;  /* [stages x units x 3]: == gen when memo holds the cost */
    size_t cap_memo;
    uint32_t gen;        /* bumped when the units or the recompute depth change */
    int *stage_class;    /* [stages]: the first stage whose ops cost the same (memo key) */
    int64_t units_size;  /* the ChunkSize of sched's units this step (0: none yet) */
    int memo_recompute;  /* the recompute depth the memo holds costs for */
    /* the latest simulation of sched (the sim is shared by the pipelines) */
    double *trial_start, *trial_finish; /* [n_ops] */
    double *trial_busy, *trial_peak;    /* [stages] */
    double trial_time;
    size_t cap_trial;
    /* the best candidate so far: its schedule and simulation, for the plan */
    lt_schedule best;
    lt_plan_op *best_ops; /* [n_ops of best] */
    double *best_busy, *best_peak;
    double best_time;
    size_t cap_best;
} cf_pipe;

struct lt_strategies {
    lt_plan_config pc;
    /* the megatron / gpipe / seq1f1b tuning (lt_strategies_create) */
    int cp, recompute;
    lt_cost_model cm_cp;   /* pc.cm with cp = the tuned degree */
    double sync_cp;        /* max over stages of lt_cost_dp_sync_time(cm_cp) */
    double sync_1;         /* the same for pc.cm (cp = 1: chunkflow) */
    char params[64];
    lt_status tune_status; /* LT_OK, or why the baseline does not fit (lt_strategies_create) */
    lt_error tune_err;
    /* scratch */
    lt_sim sim;
    lt_cost_sim_ctx ctx;
    lt_packing pack;
    int64_t *doc_len;      /* [cap_n]: the samples of a bin (seq1f1b) */
    int64_t *cuts;         /* [cap_cuts] */
    int64_t *pipe_len;     /* [cap_n]: chunkflow, the samples of every pipeline, pipeline by
                              pipeline, in increasing sample index */
    uint32_t *pipe_ids;    /* [cap_n]: their step sample indices */
    size_t *pipe_start;    /* [dp + 1] */
    size_t cap_n, cap_cuts;
    cf_pipe *cf;           /* [dp]: chunkflow's candidates, per pipeline */
    int *cf_order;         /* [dp]: pipelines by decreasing tokens */
    int64_t *cf_tokens;    /* [dp] */
    int64_t cf_last_size;  /* the previous step's choice: tried first (a good bound for the */
    int cf_last_k;         /* pruning early; the choice itself does not depend on it) */
    int cf_slowest;        /* the slowest pipeline of the best candidate so far, or -1 */
    /* the MILP strategies' states, made on first use */
    lt_infinipipe *ip;
    lt_slimpack *sp;
};

/* ---------------------------------------------------------------- helpers */

/* Drop a schedule's ops, keep its slices and units. */
static void clear_ops(lt_schedule *s) {
    for (int st = 0; st < s->stages; st++) s->stage[st].n = 0;
}

static bool fits(const lt_sim *sim, double cap) { return lt_plan_max_peak(sim) <= cap; }

/* lt_plan_simulate with the planner's reused sim. */
static lt_status simulate(lt_strategies *p, lt_cost_sim_ctx *ctx, const lt_cost_model *cm, const lt_schedule *s,
                          lt_sim_costs *costs_out, lt_error *err) {
    return lt_plan_simulate(&p->sim, ctx, cm, s, costs_out, err);
}

static void reserve_n(lt_strategies *p, size_t n) {
    if (n <= p->cap_n) return;
    p->doc_len = lt_realloc_check(p->doc_len, n * sizeof *p->doc_len);
    p->pipe_len = lt_realloc_check(p->pipe_len, n * sizeof *p->pipe_len);
    p->pipe_ids = lt_realloc_check(p->pipe_ids, n * sizeof *p->pipe_ids);
    p->cap_n = n;
}

static void reserve_cuts(lt_strategies *p, size_t n) {
    if (n <= p->cap_cuts) return;
    p->cuts = lt_realloc_check(p->cuts, n * sizeof *p->cuts);
    p->cap_cuts = n;
}

/* ---------------------------------------------------------------- the megatron tuning */

/* The reference pipeline of the tuning: 1F1B over pp micro-batches of one context_len
 * sample each, every op recomputing r layers, simulated with cm. */
static lt_status reference_run(lt_strategies *p, lt_schedule *s, const lt_cost_model *cm, int r, lt_error *err) {
    lt_schedule_clear(s);
    for (int i = 0; i < cm->pp; i++) lt_schedule_add_unit(s, lt_schedule_add_slice(s, i, 0, p->pc.context_len), 1);
    lt_sched_1f1b(s, NULL, s->n_units);
    lt_plan_set_recompute(s, r);
    return simulate(p, &p->ctx, cm, s, NULL, err);
}

/*
 * The static tuning of the Megatron baseline (SlimPack 6.1: "we leverage parallelism (TP,
 * DP, PP, CP) according to model scale and training setup, and enable memory optimizations
 * (partial/full recompute) as needed"; ChunkFlow 6.2, Table 3: the configurations "achieve
 * the best performance in Megatron-LM while ensuring no OOM"). For each CP degree c in
 * 1, 2, 4, ... (c <= max_cp, c | dp), the smallest recompute depth r whose reference
 * pipeline fits mem_cap; among those the least reference step time x c (GPU time per
 * micro-batch: a CP group is c GPUs), ties to the smaller c, then the smaller r.
 */
static lt_status tune_baseline(lt_strategies *p, lt_error *err) {
    const lt_cost_model *base = &p->pc.cm;
    int rmax = lt_plan_max_stage_layers(base);
    lt_schedule s;
    lt_status st = lt_schedule_init(&s, base->pp, base->model.layers, err);
    if (st != LT_OK) return st;
    int best_c = 0, best_r = 0, last_c = 1;
    double best_cost = 0, need_at_last = 0;
    int last_peak_stage = 0;
    for (int c = 1; c <= p->pc.max_cp; c *= 2) {
        if (base->dp % c != 0) continue;
        lt_cost_model cm = *base;
        if ((st = lt_cost_model_set_cp(&cm, c, err)) != LT_OK) goto done;
        last_c = c;
        for (int r = 0; r <= rmax; r++) {
            if ((st = reference_run(p, &s, &cm, r, err)) != LT_OK) goto done;
            if (r == rmax) { /* what the most frugal candidate so far needs (the error message) */
                need_at_last = lt_plan_max_peak(&p->sim);
                for (int i = 0; i < p->sim.stages; i++)
                    if (p->sim.peak_mem[i] == need_at_last) {
                        last_peak_stage = i;
                        break;
                    }
            }
            if (!fits(&p->sim, base->mem_cap)) continue;
            double cost = (p->sim.step_time + lt_plan_max_dp_sync(&cm)) * c;
            if (best_c == 0 || cost < best_cost) {
                best_c = c;
                best_r = r;
                best_cost = cost;
            }
            break; /* the smallest r of this c */
        }
        if (c > p->pc.max_cp / 2) break; /* no overflow of c *= 2 */
    }
    if (best_c == 0) {
        st = lt_fail(err, LT_ERR_CONFIG, "[plan]",
                     "plan.context_len = %" PRId64 " cannot fit: a micro-batch of %" PRId64
                     " tokens needs %.1f GiB on stage %d with cp = %d and full recomputation, over the %.1f GiB cap",
                     p->pc.context_len, p->pc.context_len, need_at_last / GIB, last_peak_stage, last_c,
                     base->mem_cap / GIB);
        lt_error_hint(err,
                      "raise parallel.max_cp (now %d), parallel.pp (%d) or parallel.tp (%d), or plan.mem; or lower "
                      "plan.context_len",
                      p->pc.max_cp, base->pp, base->tp);
        goto done;
    }
    p->cp = best_c;
    p->recompute = best_r;
    p->cm_cp = *base;
    st = lt_cost_model_set_cp(&p->cm_cp, best_c, err);
    p->sync_cp = lt_plan_max_dp_sync(&p->cm_cp);
    snprintf(p->params, sizeof p->params, "cp=%d recompute=%d", best_c, best_r);
done:
    lt_schedule_free(&s);
    return st;
}

/* ---------------------------------------------------------------- create / free */

lt_status lt_strategies_create(lt_strategies **out, const lt_plan_config *pc, lt_error *err) {
    *out = NULL;
    if (pc->context_len < 1)
        return lt_fail(err, LT_ERR_CONFIG, "[plan]", "plan.context_len = %" PRId64 ": need at least 1 token",
                       pc->context_len);
    if (pc->max_cp < 1)
        return lt_fail(err, LT_ERR_CONFIG, "[parallel]", "parallel.max_cp = %d: need at least 1", pc->max_cp);
    if (pc->chunk_size < 0)
        return lt_fail(err, LT_ERR_CONFIG, "[plan]", "plan.chunk_size = %" PRId64 ": need 0 (grid search) or more",
                       pc->chunk_size);
    if (pc->chunkflow_k < 0)
        return lt_fail(err, LT_ERR_CONFIG, "[plan]", "plan.chunkflow_k = %d: need 0 (grid search) or more",
                       pc->chunkflow_k);
    if (pc->seq1f1b_slices < 1)
        return lt_fail(err, LT_ERR_CONFIG, "[plan]", "plan.seq1f1b_slices = %d: need at least 1", pc->seq1f1b_slices);
    if (pc->infinipipe_slices < 0)
        return lt_fail(err, LT_ERR_CONFIG, "[plan]", "plan.infinipipe_slices = %d: need 0 (tuned per step) or more",
                       pc->infinipipe_slices);
    if (pc->micropacks < 0 || (pc->micropacks > 0 && pc->cm.pp > 0 && pc->micropacks % pc->cm.pp != 0))
        return lt_fail(err, LT_ERR_CONFIG, "[plan]",
                       "plan.micropacks = %d: need 0 (searched per step) or a multiple of parallel.pp = %d",
                       pc->micropacks, pc->cm.pp);
    if (!(pc->dp_merge_margin >= 0) || !(pc->milp_time_limit >= 0) || !(pc->milp_gap >= 0) ||
        pc->dp_merge_margin > 1e9 || pc->milp_time_limit > 1e9 || pc->milp_gap > 1e9)
        return lt_fail(err, LT_ERR_CONFIG, "[plan]",
                       "plan.dp_merge_margin = %g, plan.milp_time_limit = %g, plan.milp_gap = %g: each must be a "
                       "finite number >= 0",
                       pc->dp_merge_margin, pc->milp_time_limit, pc->milp_gap);
    if (pc->milp_max_nodes < 0)
        return lt_fail(err, LT_ERR_CONFIG, "[plan]", "plan.milp_max_nodes = %d: need >= 0 (0 = no limit)",
                       pc->milp_max_nodes);
    if (pc->cm.pp < 1 || pc->cm.dp < 1 || pc->cm.model.layers < pc->cm.pp || pc->cm.cp != 1)
        return lt_fail(err, LT_ERR_CONFIG, "[parallel]", "the planner needs an initialised cost model with cp = 1");
    lt_strategies *p = lt_calloc_check(1, sizeof *p);
    p->pc = *pc;
    p->sync_1 = lt_plan_max_dp_sync(&pc->cm);
    lt_packing_init(&p->pack);
    lt_error tune_err;
    lt_error_clear(&tune_err);
    lt_status st = tune_baseline(p, &tune_err);
    if (st != LT_OK) {
        /* The baseline strategies cannot run; a planner for another strategy keeps the
         * error for a later request of one of them (compare) and plans its own. */
        bool baseline = pc->strategy == LT_STRATEGY_MEGATRON || pc->strategy == LT_STRATEGY_GPIPE ||
                        pc->strategy == LT_STRATEGY_SEQ1F1B;
        if (baseline || st != LT_ERR_CONFIG) {
            if (err) *err = tune_err;
            lt_strategies_free(p);
            return st;
        }
        p->tune_status = st;
        p->tune_err = tune_err;
        snprintf(p->params, sizeof p->params, "untuned");
    }
    int dp = pc->cm.dp;
    p->cf = lt_calloc_check((size_t)dp, sizeof *p->cf);
    p->cf_order = lt_calloc_check((size_t)dp, sizeof *p->cf_order);
    p->cf_tokens = lt_calloc_check((size_t)dp, sizeof *p->cf_tokens);
    p->pipe_start = lt_calloc_check((size_t)dp + 1, sizeof *p->pipe_start);
    for (int r = 0; r < dp; r++)
        if ((st = lt_schedule_init(&p->cf[r].sched, pc->cm.pp, pc->cm.model.layers, err)) != LT_OK ||
            (st = lt_schedule_init(&p->cf[r].best, pc->cm.pp, pc->cm.model.layers, err)) != LT_OK) {
            lt_strategies_free(p);
            return st;
        }
    *out = p;
    return LT_OK;
}

void lt_strategies_free(lt_strategies *p) {
    if (!p) return;
    if (p->cf)
        for (int r = 0; r < p->pc.cm.dp; r++) {
            cf_pipe *cp = &p->cf[r];
            lt_schedule_free(&cp->sched);
            lt_schedule_free(&cp->best);
            lt_cost_sim_ctx_free(&cp->ctx);
            free(cp->memo);
            free(cp->memo_gen);
            free(cp->stage_class);
            free(cp->trial_start);
            free(cp->trial_finish);
            free(cp->trial_busy);
            free(cp->trial_peak);
            free(cp->best_ops);
            free(cp->best_busy);
            free(cp->best_peak);
        }
    lt_infinipipe_free(p->ip);
    lt_slimpack_free(p->sp);
    free(p->cf);
    free(p->cf_order);
    free(p->cf_tokens);
    free(p->pipe_start);
    free(p->doc_len);
    free(p->cuts);
    free(p->pipe_len);
    free(p->pipe_ids);
    lt_packing_free(&p->pack);
    lt_cost_sim_ctx_free(&p->ctx);
    lt_sim_free(&p->sim);
    free(p);
}

const char *lt_strategies_params(const lt_strategies *p) { return p->params; }

/* ---------------------------------------------------------------- megatron, gpipe, seq1f1b */

/* Bin `b` of the packing as seq1f1b pieces (Seq1F1B's split): its samples concatenated in
 * increasing index, cut into min(seq1f1b_slices, tokens) pieces of equal forward FLOPs of
 * one layer (GEMMs + causal attention per sample, cost.h), each piece a unit of the sample
 * sub-ranges it covers. */
static void add_bin_pieces(lt_strategies *p, lt_schedule *s, const lt_cost_model *cm, const int64_t *lengths, size_t b) {
    const lt_packing *pk = &p->pack;
    const uint32_t *mem = pk->members + pk->bin_start[b];
    size_t nm = pk->bin_start[b + 1] - pk->bin_start[b];
    int64_t tokens = pk->bin_tokens[b];
    int k = (int64_t)p->pc.seq1f1b_slices < tokens ? p->pc.seq1f1b_slices : (int)tokens;
    for (size_t i = 0; i < nm; i++) p->doc_len[i] = lengths[mem[i]];
    reserve_cuts(p, (size_t)k + 1);
    double lin = lt_cost_linear_flops(cm, LT_PART_ALL, 1.0), quad = lt_cost_attention_flops(cm, 0.0, 1.0);
    lt_split_equal_cost(p->doc_len, nm, lin, quad, k, p->cuts);
    size_t d = 0;
    int64_t off = 0; /* first token of sample mem[d] in the bin */
    for (int j = 0; j < k; j++) {
        int64_t x0 = p->cuts[j], x1 = p->cuts[j + 1];
        while (off + p->doc_len[d] <= x0) off += p->doc_len[d++];
        uint32_t first = (uint32_t)s->n_slices, count = 0;
        int64_t o = off;
        for (size_t e = d; e < nm && o < x1; o += p->doc_len[e++], count++) {
            int64_t lo = x0 > o ? x0 : o, hi = x1 < o + p->doc_len[e] ? x1 : o + p->doc_len[e];
            lt_schedule_add_slice(s, (int32_t)mem[e], lo - o, hi - o);
        }
        lt_schedule_add_unit(s, first, count);
    }
}

/* megatron, gpipe, seq1f1b: best-fit-decreasing micro-batches of context_len tokens dealt
 * round-robin over the dp / cp pipelines, with the tuned cp and recompute depth. */
static lt_status plan_packed(lt_strategies *p, lt_strategy strat, uint64_t step, const int64_t *lengths, size_t n,
                             lt_step_plan *out, lt_error *err) {
    if (p->tune_status != LT_OK) {
        if (err) *err = p->tune_err;
        return p->tune_status;
    }
    const lt_cost_model *cm = &p->cm_cp;
    size_t n_ranks = (size_t)(cm->dp / p->cp);
    lt_status st = lt_plan_start(&p->pc, out, strat, step, lengths, n, n_ranks, p->cp, err);
    if (st != LT_OK) return st;
    lt_pack_best_fit_decreasing(&p->pack, lengths, n, p->pc.context_len);
    const lt_packing *pk = &p->pack;
    for (size_t b = 0; b < pk->n_bins; b++) {
        size_t r = b % n_ranks; /* the deal: bins round-robin, in creation order */
        lt_schedule *s = &out->ranks[r].sched;
        for (size_t i = pk->bin_start[b]; i < pk->bin_start[b + 1]; i++) out->sample_rank[pk->members[i]] = (int)r;
        if (strat == LT_STRATEGY_SEQ1F1B) {
            add_bin_pieces(p, s, cm, lengths, b);
            continue;
        }
        uint32_t first = (uint32_t)s->n_slices;
        for (size_t i = pk->bin_start[b]; i < pk->bin_start[b + 1]; i++)
            lt_schedule_add_slice(s, (int32_t)pk->members[i], 0, lengths[pk->members[i]]);
        lt_schedule_add_unit(s, first, (uint32_t)(pk->bin_start[b + 1] - pk->bin_start[b]));
    }
    for (size_t r = 0; r < n_ranks; r++) {
        lt_schedule *s = &out->ranks[r].sched;
        switch (strat) {
        case LT_STRATEGY_GPIPE: lt_sched_gpipe(s, NULL, s->n_units); break;
        case LT_STRATEGY_SEQ1F1B: lt_sched_seq1f1b(s, NULL, s->n_units); break;
        default: lt_sched_1f1b(s, NULL, s->n_units); break;
        }
    }
    /* The recompute depth: the tuned one. GPipe keeps every micro-batch of the step in flight
     * (not the pp of 1F1B that the tuning sizes for), so it takes, per step, the smallest
     * depth >= the tuned one at which every pipeline fits: GPipe's re-materialization (Huang
     * et al. 2019, Sec. 2.3: only the partition boundaries' activations kept) as far as the
     * step needs it. When even full recompute does not fit, the memory error below says so. */
    int r_step = p->recompute;
    if (strat == LT_STRATEGY_GPIPE) {
        int full = lt_plan_max_stage_layers(cm);
        for (; r_step < full; r_step++) {
            bool all_fit = true;
            for (size_t r = 0; r < n_ranks && all_fit; r++) {
                lt_schedule *s = &out->ranks[r].sched;
                lt_plan_set_recompute(s, r_step);
                if ((st = simulate(p, &p->ctx, cm, s, NULL, err)) != LT_OK) return st;
                all_fit = fits(&p->sim, cm->mem_cap);
            }
            if (all_fit) break;
        }
    }
    for (size_t r = 0; r < n_ranks; r++) {
        lt_plan_set_recompute(&out->ranks[r].sched, r_step);
        if ((st = lt_plan_finish_rank(&p->sim, &p->ctx, cm, &out->ranks[r], err)) != LT_OK) return st;
    }
    if (r_step == p->recompute) snprintf(out->params, sizeof out->params, "%s", p->params);
    else snprintf(out->params, sizeof out->params, "cp=%d recompute=%d", p->cp, r_step);
    return lt_plan_finish(&p->pc, out, p->sync_cp, err);
}

/* ---------------------------------------------------------------- chunkflow */

/* A (ChunkSize, K, recompute) of the grid and its step time. */
typedef struct cf_choice {
    int64_t chunk_size;
    int k, recompute;
    double time; /* step time: slowest pipeline + gradient synchronisation */
} cf_choice;

/* The grid's order for equal step times: the larger ChunkSize, then the smaller K. */
static bool cf_better(const cf_choice *a, const cf_choice *b) {
    if (a->time != b->time) return a->time < b->time;
    if (a->chunk_size != b->chunk_size) return a->chunk_size > b->chunk_size;
    return a->k < b->k;
}

/* ChunkSizes of the grid, increasing: the powers of two from CF_MIN_CHUNK below
 * context_len, then context_len; the largest CF_MAX_SIZES of them. */
static int cf_sizes(int64_t context_len, int64_t *sizes) {
    int64_t all[66];
    int n = 0;
    for (int64_t c = CF_MIN_CHUNK; c < context_len && n < 64; c *= 2) all[n++] = c;
    all[n++] = context_len;
    int first = n > CF_MAX_SIZES ? n - CF_MAX_SIZES : 0;
    for (int i = first; i < n; i++) sizes[i - first] = all[i];
    return n - first;
}

/* The memo's bridge: op costs from the memo, else from the prepared bridge (then kept). The
 * chunkflow schedules hold whole-stage ops only, one recompute depth per candidate. */
static void memo_op_cost(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    cf_pipe *cp = ctx;
    LT_CHECK(op->part == LT_PART_ALL && op->kind <= LT_OP_B);
    size_t i = ((size_t)cp->stage_class[stage] * s->n_units + op->unit) * 3 + op->kind;
    if (cp->memo_gen[i] != cp->gen) {
        memset(&cp->memo[i], 0, sizeof cp->memo[i]);
        cp->inner.op_cost(cp->inner.ctx, s, stage, op, &cp->memo[i]);
        cp->memo_gen[i] = cp->gen;
    }
    *out = cp->memo[i];
}

static double memo_p2p_time(void *ctx, int from, int to, double bytes) {
    const cf_pipe *cp = ctx;
    return cp->inner.p2p_time(cp->inner.ctx, from, to, bytes);
}

static double memo_base_bytes(void *ctx, int stage) {
    const cf_pipe *cp = ctx;
    return cp->inner.base_bytes(cp->inner.ctx, stage);
}

/* The memo's callbacks with the inner table's contention. */
static lt_sim_costs memo_costs(cf_pipe *cp) {
    lt_sim_costs c = cp->inner;
    c.ctx = cp;
    c.op_cost = memo_op_cost;
    c.p2p_time = memo_p2p_time;
    c.base_bytes = memo_base_bytes;
    return c;
}

/* Forget the memo (a new unit table or recompute depth). */
static void memo_reset(cf_pipe *cp) {
    if (!cp->stage_class) {
        /* An op's cost depends on its stage only through its layers: how many, whether they
         * start the model (the embedding; no input gradient to send) and whether they end it
         * (the LM head) (cost.h, lt_cost_op). Stages alike in these share memo entries. */
        const lt_schedule *s = &cp->sched;
        cp->stage_class = lt_malloc_check((size_t)s->stages * sizeof *cp->stage_class);
        for (int st = 0; st < s->stages; st++) {
            uint32_t b, e, b2, e2;
            lt_schedule_stage_layers(s->layers, s->stages, st, &b, &e);
            cp->stage_class[st] = st;
            for (int o = 0; o < st; o++) {
                lt_schedule_stage_layers(s->layers, s->stages, o, &b2, &e2);
                bool head = e == (uint32_t)s->layers, head2 = e2 == (uint32_t)s->layers;
                if (e - b == e2 - b2 && (b == 0) == (b2 == 0) && head == head2) {
                    cp->stage_class[st] = o;
                    break;
                }
            }
        }
    }
    size_t need = (size_t)cp->sched.stages * cp->sched.n_units * 3;
    if (need > cp->cap_memo) {
        cp->memo = lt_realloc_check(cp->memo, need * sizeof *cp->memo);
        cp->memo_gen = lt_realloc_check(cp->memo_gen, need * sizeof *cp->memo_gen);
        memset(cp->memo_gen, 0, need * sizeof *cp->memo_gen);
        cp->cap_memo = need;
        cp->gen = 0;
    }
    if (++cp->gen == 0) { /* wrapped: clear the stamps once */
        memset(cp->memo_gen, 0, cp->cap_memo * sizeof *cp->memo_gen);
        cp->gen = 1;
    }
}

/* Pipeline r's samples as chunks of `chunk_size` (ChunkFlow Alg. 1) into s, with step
 * sample indices. */
static void cf_units(const lt_strategies *p, int r, lt_schedule *s, int64_t chunk_size) {
    size_t b = p->pipe_start[r], m = p->pipe_start[r + 1] - b;
    lt_sched_units_chunked_budget(s, p->pipe_len + b, m, chunk_size, CF_PACK_BUDGET);
    for (size_t j = 0; j < s->n_slices; j++) /* local sample numbers -> the step's */
        s->slices[j].sample = (int32_t)p->pipe_ids[b + (size_t)s->slices[j].sample];
}

/* Pipeline r's scratch schedule ready for candidate c: the chunks of c's ChunkSize (built
 * when first needed in a step: most candidates are pruned after one pipeline), the bridge
 * prepared for them, the memo valid for c's recompute depth. */
static void cf_prepare(lt_strategies *p, int r, const cf_choice *c) {
    cf_pipe *cp = &p->cf[r];
    if (cp->units_size != c->chunk_size) {
        lt_schedule_clear(&cp->sched);
        cf_units(p, r, &cp->sched, c->chunk_size);
        cp->inner = lt_cost_sim_costs_prepared(&cp->ctx, &p->pc.cm, &cp->sched);
        cp->units_size = c->chunk_size;
        memo_reset(cp);
        cp->memo_recompute = c->recompute;
    } else if (cp->memo_recompute != c->recompute) {
        memo_reset(cp);
        cp->memo_recompute = c->recompute;
    }
}

/* ChunkFlow's state-aware 1F1B with K over the units of s (ChunkFlow 4.3), every op
 * recomputing `recompute` layers. */
static void cf_build_ops(lt_schedule *s, int k, int recompute) {
    clear_ops(s);
    lt_sched_chunkflow(s, NULL, s->n_units, k);
    lt_plan_set_recompute(s, recompute);
}

/*
 * A lower bound of a chunkflow pipeline's time from its op costs alone: for each stage s,
 * the forwards of the stream's first unit on stages 0..s-1 (model path: the first forward
 * of a unit over a range waits for its first forward over the previous range), then all of
 * stage s's ops one after another (program order), then the backwards of the stream's last
 * unit on stages s-1..0 (a B waits for the B of the next range; chunkflow has one B per unit
 * and stage). The generators put the same unit first (a forward) and last (its backward) on
 * every stage (the merge of plans/schedule/generators.c); from a stage where that does not hold on, the
 * bound is the stage's busy time alone. Transfers only add: a lower bound.
 */
static double cf_time_bound(const lt_sim_costs *c, const lt_schedule *s) {
    double head = 0, tail = 0, bound = 0;
    bool chain = true;
    for (int st = 0; st < s->stages; st++) {
        const lt_stage_ops *so = &s->stage[st];
        if (so->n == 0) continue;
        double busy = 0;
        lt_op_cost oc;
        for (size_t i = 0; i < so->n; i++) {
            memset(&oc, 0, sizeof oc);
            c->op_cost(c->ctx, s, st, &so->ops[i], &oc);
            busy += oc.time;
        }
        /* the chain through stages 0..st: the same first forward and last backward on each */
        const lt_op *first = &so->ops[0], *last = &so->ops[so->n - 1], *first0 = &s->stage[0].ops[0];
        const lt_op *last0 = &s->stage[0].ops[s->stage[0].n - 1];
        chain = chain && first->unit == first0->unit && first->kind == first0->kind && first->kind != LT_OP_B &&
                last->unit == last0->unit && last->kind == LT_OP_B && last0->kind == LT_OP_B;
        double b = chain ? head + busy + tail : busy;
        if (b > bound) bound = b;
        memset(&oc, 0, sizeof oc);
        c->op_cost(c->ctx, s, st, first, &oc);
        head += oc.time;
        memset(&oc, 0, sizeof oc);
        c->op_cost(c->ctx, s, st, last, &oc);
        tail += oc.time;
    }
    return bound;
}

/* Keep the simulation of pipeline cp's schedule (the sim is overwritten by the next one). */
static void cf_keep_trial(cf_pipe *cp, const lt_sim *sim) {
    if (sim->n_ops > cp->cap_trial) {
        cp->trial_start = lt_realloc_check(cp->trial_start, sim->n_ops * sizeof *cp->trial_start);
        cp->trial_finish = lt_realloc_check(cp->trial_finish, sim->n_ops * sizeof *cp->trial_finish);
        cp->cap_trial = sim->n_ops;
    }
    if (!cp->trial_busy) {
        cp->trial_busy = lt_malloc_check((size_t)sim->stages * sizeof *cp->trial_busy);
        cp->trial_peak = lt_malloc_check((size_t)sim->stages * sizeof *cp->trial_peak);
    }
    memcpy(cp->trial_start, sim->start, sim->n_ops * sizeof *cp->trial_start);
    memcpy(cp->trial_finish, sim->finish, sim->n_ops * sizeof *cp->trial_finish);
    memcpy(cp->trial_busy, sim->busy, (size_t)sim->stages * sizeof *cp->trial_busy);
    memcpy(cp->trial_peak, sim->peak_mem, (size_t)sim->stages * sizeof *cp->trial_peak);
    cp->trial_time = sim->step_time;
}

/* Step time of candidate c (its ChunkSize's units already built) over every pipeline, in
 * decreasing token order; *complete = false when it does not fit mem_cap, or when one
 * pipeline alone already takes longer than `bound` (pruned: it cannot be chosen). */
static lt_status cf_evaluate(lt_strategies *p, cf_choice *c, const cf_choice *bound, bool *complete, lt_error *err) {
    int dp = p->pc.cm.dp;
    double longest = 0;
    *complete = false;
    for (int i = -1; i < dp; i++) {
        /* first the slowest pipeline of the best candidate so far: most likely the one that
         * prunes this candidate (a heuristic of speed only) */
        int r = i < 0 ? p->cf_slowest : p->cf_order[i];
        if (r < 0 || (i >= 0 && r == p->cf_slowest)) continue;
        if (p->cf_tokens[r] == 0) continue; /* empty: time 0, the model states alone (checked by the plan) */
        cf_pipe *cp = &p->cf[r];
        cf_prepare(p, r, c);
        cf_build_ops(&cp->sched, c->k, c->recompute);
        lt_sim_costs costs = memo_costs(cp);
        if (bound && cf_time_bound(&costs, &cp->sched) + p->sync_1 > bound->time) return LT_OK;
        lt_status st = lt_sim_run(&p->sim, &cp->sched, &costs, err);
        if (st != LT_OK) {
            if (err) {
                err->status = LT_ERR_INTERNAL;
                lt_error_prefix(err, "planner: simulating a chunkflow schedule: ");
            }
            return LT_ERR_INTERNAL;
        }
        if (!fits(&p->sim, p->pc.cm.mem_cap)) return LT_OK;
        if (p->sim.step_time > longest) longest = p->sim.step_time;
        if (bound && longest + p->sync_1 > bound->time) return LT_OK;
        cf_keep_trial(cp, &p->sim);
    }
    c->time = longest + p->sync_1;
    *complete = true;
    return LT_OK;
}

/* The candidate just evaluated (complete) is the best so far: keep every pipeline's
 * schedule and simulation for the plan (the op bytes from the memo, still valid). */
static void cf_keep_best(lt_strategies *p) {
    p->cf_slowest = -1;
    for (int r = 0; r < p->pc.cm.dp; r++) {
        if (p->cf_tokens[r] == 0) continue;
        cf_pipe *cp = &p->cf[r];
        if (p->cf_slowest < 0 || cp->trial_time > p->cf[p->cf_slowest].trial_time) p->cf_slowest = r;
        const lt_schedule *s = &cp->sched;
        lt_schedule *b = &cp->best;
        lt_schedule_clear(b);
        for (size_t j = 0; j < s->n_slices; j++)
            lt_schedule_add_slice(b, s->slices[j].sample, s->slices[j].begin, s->slices[j].end);
        for (size_t u = 0; u < s->n_units; u++) lt_schedule_add_unit(b, s->units[u].first_slice, s->units[u].n_slices);
        size_t n_ops = lt_schedule_n_ops(s);
        if (n_ops > cp->cap_best) {
            cp->best_ops = lt_realloc_check(cp->best_ops, n_ops * sizeof *cp->best_ops);
            cp->cap_best = n_ops;
        }
        lt_sim_costs costs = memo_costs(cp);
        size_t id = 0;
        for (int st = 0; st < s->stages; st++)
            for (size_t i = 0; i < s->stage[st].n; i++, id++) {
                lt_schedule_add_op(b, st, s->stage[st].ops[i]);
                lt_op_cost oc;
                memset(&oc, 0, sizeof oc);
                costs.op_cost(costs.ctx, s, st, &s->stage[st].ops[i], &oc);
                cp->best_ops[id] = (lt_plan_op){cp->trial_start[id], cp->trial_finish[id],
                                                oc.act_bytes + oc.kv_bytes + oc.work_bytes};
            }
        if (!cp->best_busy) {
            cp->best_busy = lt_malloc_check((size_t)s->stages * sizeof *cp->best_busy);
            cp->best_peak = lt_malloc_check((size_t)s->stages * sizeof *cp->best_peak);
        }
        memcpy(cp->best_busy, cp->trial_busy, (size_t)s->stages * sizeof *cp->best_busy);
        memcpy(cp->best_peak, cp->trial_peak, (size_t)s->stages * sizeof *cp->best_peak);
        cp->best_time = cp->trial_time;
    }
}

/* Pipeline r of the plan from the kept best candidate. */
static void cf_take_best(lt_strategies *p, int r, lt_rank_plan *rp) {
    cf_pipe *cp = &p->cf[r];
    lt_schedule t = rp->sched; /* an empty schedule of the same shape: swapped in for reuse */
    rp->sched = cp->best;
    cp->best = t;
    size_t n_ops = lt_schedule_n_ops(&rp->sched);
    int pp = rp->sched.stages;
    rp->ops = lt_malloc_check((n_ops ? n_ops : 1) * sizeof *rp->ops);
    if (n_ops) memcpy(rp->ops, cp->best_ops, n_ops * sizeof *rp->ops);
    rp->stage_busy_s = lt_malloc_check((size_t)pp * sizeof *rp->stage_busy_s);
    rp->stage_peak_mem = lt_malloc_check((size_t)pp * sizeof *rp->stage_peak_mem);
    memcpy(rp->stage_busy_s, cp->best_busy, (size_t)pp * sizeof *rp->stage_busy_s);
    memcpy(rp->stage_peak_mem, cp->best_peak, (size_t)pp * sizeof *rp->stage_peak_mem);
    rp->time_s = cp->best_time;
}

/* cf_order = the pipelines by decreasing tokens (ties: lower rank first); an insertion
 * sort: dp is small, and qsort would need the tokens in a global (planners run in threads). */
static void cf_sort_pipelines(lt_strategies *p) {
    int dp = p->pc.cm.dp;
    for (int i = 0; i < dp; i++) {
        int r = i, j = i;
        while (j > 0 && p->cf_tokens[p->cf_order[j - 1]] < p->cf_tokens[r]) {
            p->cf_order[j] = p->cf_order[j - 1];
            j--;
        }
        p->cf_order[j] = r;
    }
}

/*
 * chunkflow: the samples of the bins the megatron deal (cp = 1) gives each of the dp
 * pipelines, through ChunkFlow Alg. 1 (chunks of ChunkSize) and the state-aware 1F1B with
 * K (Alg. 2, 4.3), recompute 0 (ChunkFlow 6.2: its memory is bounded by ChunkSize and K).
 * (ChunkSize, K): the config's, or ChunkFlow 5's grid search, one pair per step for all
 * pipelines, the least step time that fits mem_cap (ties: larger ChunkSize, smaller K).
 * When nothing fits, the grid again with every layer recomputed; when still nothing fits,
 * the most frugal candidate (smallest ChunkSize, smallest K, full recomputation) is planned
 * and the memory check reports it.
 */
static lt_status plan_chunkflow(lt_strategies *p, uint64_t step, const int64_t *lengths, size_t n, lt_step_plan *out,
                                lt_error *err) {
    const lt_cost_model *cm = &p->pc.cm;
    int dp = cm->dp;
    lt_status st = lt_plan_start(&p->pc, out, LT_STRATEGY_CHUNKFLOW, step, lengths, n, (size_t)dp, 1, err);
    if (st != LT_OK) return st;
    /* the megatron deal with cp = 1: bins round-robin over the dp pipelines */
    lt_pack_best_fit_decreasing(&p->pack, lengths, n, p->pc.context_len);
    const lt_packing *pk = &p->pack;
    for (size_t b = 0; b < pk->n_bins; b++)
        for (size_t i = pk->bin_start[b]; i < pk->bin_start[b + 1]; i++)
            out->sample_rank[pk->members[i]] = (int)(b % (size_t)dp);
    /* each pipeline's samples in increasing index (a counting sort), and its tokens */
    memset(p->pipe_start, 0, ((size_t)dp + 1) * sizeof *p->pipe_start);
    memset(p->cf_tokens, 0, (size_t)dp * sizeof *p->cf_tokens);
    int64_t longest = 0;
    for (size_t i = 0; i < n; i++) {
        p->pipe_start[out->sample_rank[i] + 1]++;
        p->cf_tokens[out->sample_rank[i]] += lengths[i];
        if (lengths[i] > longest) longest = lengths[i];
    }
    for (int r = 0; r < dp; r++) p->pipe_start[r + 1] += p->pipe_start[r];
    for (size_t i = 0; i < n; i++) {
        size_t at = p->pipe_start[out->sample_rank[i]]++;
        p->pipe_len[at] = lengths[i];
        p->pipe_ids[at] = (uint32_t)i;
    }
    for (int r = dp; r > 0; r--) p->pipe_start[r] = p->pipe_start[r - 1];
    p->pipe_start[0] = 0;
    cf_sort_pipelines(p);

    int64_t sizes[CF_MAX_SIZES];
    int n_sizes = p->pc.chunk_size > 0 ? 1 : cf_sizes(p->pc.context_len, sizes);
    if (p->pc.chunk_size > 0) sizes[0] = p->pc.chunk_size;
    int ks[CF_N_KS];
    int n_ks = p->pc.chunkflow_k > 0 ? 1 : CF_N_KS;
    for (int i = 0; i < n_ks; i++) ks[i] = p->pc.chunkflow_k > 0 ? p->pc.chunkflow_k : CF_KS[i];
    bool k_grid = p->pc.chunkflow_k == 0;
    int full = lt_plan_max_stage_layers(cm);

    /* The grid, the previous step's choice first: a good bound early prunes most of the
     * rest after one simulation (or none: cf_time_bound). Pruning drops only candidates
     * strictly slower than one already complete, so the choice is the same in any order. */
    int order[CF_MAX_SIZES];
    int n_order = 0;
    for (int si = 0; si < n_sizes; si++)
        if (sizes[si] == p->cf_last_size) order[n_order++] = si;
    for (int si = n_sizes; si-- > 0;) /* then larger chunks first: fewer ops to simulate */
        if (sizes[si] != p->cf_last_size) order[n_order++] = si;
    cf_choice best = {0, 0, 0, 0};
    bool found = false;
    p->cf_slowest = -1;
    for (int r = 0; r < dp; r++) p->cf[r].units_size = 0; /* new samples: no units built yet */
    for (int pass = 0; pass < 2 && !found; pass++) {
        int recompute = pass == 0 ? 0 : full;
        for (int oi = 0; oi < n_order; oi++) {
            int64_t size = sizes[order[oi]];
            /* the longest dependent group has ceil(longest / ChunkSize) chunks; every K at
             * least that gives the schedule of the first such K (Alg. 2 line 4: N <= K) */
            int64_t n_max = (longest + size - 1) / size;
            int n_k = 0;
            while (n_k < n_ks && (!k_grid || n_k == 0 || ks[n_k - 1] < n_max)) n_k++;
            int k_order[CF_N_KS], m = 0; /* the previous K first when this is the previous ChunkSize */
            for (int i = 0; i < n_k; i++)
                if (size == p->cf_last_size && ks[i] == p->cf_last_k) k_order[m++] = ks[i];
            for (int i = 0; i < n_k; i++)
                if (!(size == p->cf_last_size && ks[i] == p->cf_last_k)) k_order[m++] = ks[i];
            for (int kj = 0; kj < n_k; kj++) {
                cf_choice c = {size, k_order[kj], recompute, 0};
                bool complete;
                if ((st = cf_evaluate(p, &c, found ? &best : NULL, &complete, err)) != LT_OK) return st;
                if (complete && (!found || cf_better(&c, &best))) {
                    best = c;
                    found = true;
                    cf_keep_best(p);
                }
            }
        }
    }
    if (found) {
        p->cf_last_size = best.chunk_size;
        p->cf_last_k = best.k;
    }
    /* the plan of the choice: the kept simulations; when nothing fits, the most frugal
     * candidate, simulated here for lt_plan_finish to report */
    if (!found) best = (cf_choice){sizes[0], ks[0], full, 0};
    for (int r = 0; r < dp; r++) {
        if (found && p->cf_tokens[r] > 0) {
            cf_take_best(p, r, &out->ranks[r]);
            continue;
        }
        lt_schedule *s = &out->ranks[r].sched;
        if (!found) {
            cf_units(p, r, s, best.chunk_size);
            cf_build_ops(s, best.k, best.recompute);
        }
        if ((st = lt_plan_finish_rank(&p->sim, &p->ctx, cm, &out->ranks[r], err)) != LT_OK) return st;
    }
    if (best.recompute > 0)
        snprintf(out->params, sizeof out->params, "chunk_size=%" PRId64 " k=%d recompute=%d", best.chunk_size, best.k,
                 best.recompute);
    else
        snprintf(out->params, sizeof out->params, "chunk_size=%" PRId64 " k=%d", best.chunk_size, best.k);
    return lt_plan_finish(&p->pc, out, p->sync_1, err);
}

/* ---------------------------------------------------------------- auto */

static lt_status plan_one(lt_strategies *p, lt_strategy s, uint64_t step, const int64_t *lengths, size_t n,
                          lt_step_plan *out, lt_error *err);

/* auto: every other strategy plans the step (helixpipe only without sharding at dp > 1);
 * the fastest plan under the memory cap is kept
 * (ties: the earlier strategy in enum order), with the second fastest as runner-up. A
 * strategy that cannot plan the step (over the cap, or an untuned baseline) is skipped;
 * when none can, the first one's error is returned. solve_ms counts them all. */
static lt_status plan_auto(lt_strategies *p, uint64_t step, const int64_t *lengths, size_t n, lt_step_plan *out,
                           lt_error *err) {
    lt_step_plan trial;
    lt_step_plan_init(&trial);
    lt_strategy best = LT_STRATEGY_COUNT, second = LT_STRATEGY_COUNT;
    double second_time = 0;
    lt_error first_err;
    lt_error_clear(&first_err);
    lt_status first_st = LT_OK;
    for (int si = 0; si < LT_STRATEGY_AUTO; si++) {
        lt_strategy s = (lt_strategy)si;
        /* helixpipe beside other strategies' steps: without sharding (a run whose plans mix
         * them holds the whole model on every rank, train/dist/dist.h lt_dist.helix, which
         * is not sharded; helixpipe's plans alone shard their parts, lt_dist.helix_parts) */
        if (s == LT_STRATEGY_HELIXPIPE && p->pc.cm.dp > 1 && p->pc.cm.shard != LT_SHARD_NONE) continue;
        lt_error e;
        lt_error_clear(&e);
        lt_status st = plan_one(p, s, step, lengths, n, &trial, &e);
        if (st == LT_ERR_INTERNAL || st == LT_ERR_NOMEM) {
            if (err) *err = e;
            lt_step_plan_free(&trial);
            return st;
        }
        if (st != LT_OK) {
            if (first_st == LT_OK) {
                first_st = st;
                first_err = e;
            }
            lt_step_plan_free(&trial);
            continue;
        }
        if (best == LT_STRATEGY_COUNT || trial.time_s < out->time_s) {
            if (best != LT_STRATEGY_COUNT) {
                second = best;
                second_time = out->time_s;
            }
            best = s;
            lt_step_plan_free(out);
            *out = trial;
            lt_step_plan_init(&trial);
        } else {
            if (second == LT_STRATEGY_COUNT || trial.time_s < second_time) {
                second = s;
                second_time = trial.time_s;
            }
            lt_step_plan_free(&trial);
        }
    }
    if (best == LT_STRATEGY_COUNT) {
        if (err) *err = first_err;
        lt_error_prefix(err, "auto: no strategy can plan this step; the first: ");
        return first_st;
    }
    out->runner_up = second;
    out->runner_up_time_s = second == LT_STRATEGY_COUNT ? 0 : second_time;
    return LT_OK;
}

/* ---------------------------------------------------------------- plan a step */

lt_status lt_strategies_plan_step(lt_strategies *p, lt_strategy s, uint64_t step, const int64_t *lengths, size_t n,
                               lt_step_plan *out, lt_error *err) {
    double t0 = lt_plan_now_ms();
    lt_step_plan_free(out);
    switch (s) {
    case LT_STRATEGY_MEGATRON:
    case LT_STRATEGY_GPIPE:
    case LT_STRATEGY_SEQ1F1B:
    case LT_STRATEGY_CHUNKFLOW:
    case LT_STRATEGY_INFINIPIPE:
    case LT_STRATEGY_SLIMPACK:
    case LT_STRATEGY_HELIXPIPE:
    case LT_STRATEGY_AUTO: break;
    default: return lt_fail(err, LT_ERR_USAGE, NULL, "unknown strategy %d", (int)s);
    }
    if (n > (size_t)INT32_MAX)
        return lt_fail(err, LT_ERR_INPUT, NULL, "step %" PRIu64 ": %zu samples: too many", step, n);
    for (size_t i = 0; i < n; i++)
        if (lengths[i] < 1 || lengths[i] > p->pc.context_len)
            return lt_fail(err, LT_ERR_INPUT, NULL,
                           "step %" PRIu64 ": sample %zu has %" PRId64 " tokens: lengths must be 1..%" PRId64
                           " (plan.context_len)",
                           step, i, lengths[i], p->pc.context_len);
    reserve_n(p, n ? n : 1);
    lt_status st = plan_one(p, s, step, lengths, n, out, err);
    if (st != LT_OK) {
        lt_step_plan_free(out);
        return st;
    }
    out->solve_ms = lt_plan_now_ms() - t0;
    return LT_OK;
}

/* One strategy (auto included) on validated lengths. */
static lt_status plan_one(lt_strategies *p, lt_strategy s, uint64_t step, const int64_t *lengths, size_t n,
                          lt_step_plan *out, lt_error *err) {
    lt_status st;
    lt_step_plan_free(out);
    switch (s) {
    case LT_STRATEGY_AUTO: st = plan_auto(p, step, lengths, n, out, err); break;
    case LT_STRATEGY_CHUNKFLOW: st = plan_chunkflow(p, step, lengths, n, out, err); break;
    case LT_STRATEGY_INFINIPIPE:
        st = p->ip ? LT_OK : lt_infinipipe_create(&p->ip, &p->pc, err);
        if (st == LT_OK) st = lt_infinipipe_plan(p->ip, step, lengths, n, out, err);
        break;
    case LT_STRATEGY_HELIXPIPE:
        st = lt_helixpipe_plan(&p->pc, &p->sim, &p->ctx, &p->pack, step, lengths, n, out, err);
        break;
    case LT_STRATEGY_SLIMPACK:
        st = p->sp ? LT_OK : lt_slimpack_create(&p->sp, &p->pc, err);
        if (st == LT_OK) st = lt_slimpack_plan(p->sp, step, lengths, n, 1, out, err);
        break;
    default: st = plan_packed(p, s, step, lengths, n, out, err); break;
    }
    if (st != LT_OK) lt_step_plan_free(out);
    return st;
}
