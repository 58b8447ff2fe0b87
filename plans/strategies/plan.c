/*
 * plans/strategies/plan.c — strategy names, step plans, the planner config (plans/strategies/plan.h).
 */
#include "plans/strategies/plan.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/model.h"          /* lt_helix_part_stage */
#include "plans/schedule/sim.h" /* lt_sim_run_group, LT_SIM_SOLO */

static const char *const strategy_names[LT_STRATEGY_COUNT] = {
    "megatron", "gpipe", "seq1f1b", "chunkflow", "infinipipe", "slimpack", "helixpipe", "auto",
};

const char *lt_strategy_name(lt_strategy s) {
    return (unsigned)s < LT_STRATEGY_COUNT ? strategy_names[s] : "?";
}

const char *lt_merge_reason_name(lt_merge_reason r) {
    switch (r) {
    case LT_MERGE_FLOPS: return "flops";
    case LT_MERGE_MEMORY: return "memory";
    }
    return NULL;
}

lt_status lt_strategy_parse(const char *name, const char *where, lt_strategy *out, lt_error *err) {
    for (int i = 0; i < LT_STRATEGY_COUNT; i++) {
        if (name && strcmp(name, strategy_names[i]) == 0) {
            *out = (lt_strategy)i;
            return LT_OK;
        }
    }
    lt_fail(err, LT_ERR_USAGE, where, "unknown strategy '%s'", name ? name : "");
    lt_error_hint(err, "strategies: megatron gpipe seq1f1b chunkflow infinipipe slimpack helixpipe auto");
    return LT_ERR_USAGE;
}

void lt_step_plan_init(lt_step_plan *p) {
    memset(p, 0, sizeof *p);
    p->runner_up = LT_STRATEGY_COUNT;
}

void lt_step_plan_free(lt_step_plan *p) {
    if (!p) return;
    for (size_t r = 0; r < p->n_ranks; r++) {
        lt_rank_plan *rp = &p->ranks[r];
        lt_schedule_free(&rp->sched);
        free(rp->ops);
        free(rp->stage_busy_s);
        free(rp->stage_peak_mem);
    }
    free(p->ranks);
    free(p->lengths);
    free(p->sample_rank);
    free(p->merges);
    lt_step_plan_init(p);
}

/* An int key of the config, in [lo, INT_MAX]. */
static lt_status get_int(const lt_config *cfg, const char *section, const char *key, int *out, lt_error *err) {
    int64_t v;
    lt_status st = lt_config_get_int(cfg, section, key, &v, err);
    if (st != LT_OK) return st;
    if (v > INT_MAX)
        return lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, section, key), "%s.%s is too large", section, key);
    *out = (int)v;
    return LT_OK;
}

lt_status lt_plan_config_from(lt_plan_config *pc, const lt_config *cfg, const char *hardware_dir,
                                 lt_error *err) {
    memset(pc, 0, sizeof *pc);
    lt_status st = lt_cost_model_from_config(&pc->cm, cfg, hardware_dir, err);
    if (st != LT_OK) return st;
    const char *name = lt_config_get_string(cfg, "plan", "strategy");
    if ((st = lt_strategy_parse(name, lt_config_origin(cfg, "plan", "strategy"), &pc->strategy, err)) != LT_OK)
        return LT_ERR_CONFIG;
    uint64_t u;
    if ((st = lt_config_get_size(cfg, "plan", "context_len", &u, err)) != LT_OK) return st;
    if (u > (uint64_t)INT64_MAX / 4)
        return lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, "plan", "context_len"), "plan.context_len is too large");
    pc->context_len = (int64_t)u;
    if ((st = lt_config_get_size(cfg, "plan", "chunk_size", &u, err)) != LT_OK) return st;
    if (u > (uint64_t)INT64_MAX / 4)
        return lt_fail(err, LT_ERR_CONFIG, lt_config_origin(cfg, "plan", "chunk_size"), "plan.chunk_size is too large");
    pc->chunk_size = (int64_t)u;
    if ((st = get_int(cfg, "parallel", "max_cp", &pc->max_cp, err)) != LT_OK) return st;
    if ((st = get_int(cfg, "plan", "chunkflow_k", &pc->chunkflow_k, err)) != LT_OK) return st;
    if ((st = get_int(cfg, "plan", "seq1f1b_slices", &pc->seq1f1b_slices, err)) != LT_OK) return st;
    if ((st = get_int(cfg, "plan", "infinipipe_slices", &pc->infinipipe_slices, err)) != LT_OK) return st;
    if ((st = get_int(cfg, "plan", "micropacks", &pc->micropacks, err)) != LT_OK) return st;
    if ((st = lt_config_get_double(cfg, "plan", "dp_merge_margin", &pc->dp_merge_margin, err)) != LT_OK) return st;
    if ((st = lt_config_get_double(cfg, "plan", "milp_time_limit", &pc->milp_time_limit, err)) != LT_OK) return st;
    if ((st = lt_config_get_double(cfg, "plan", "milp_gap", &pc->milp_gap, err)) != LT_OK) return st;
    if ((st = get_int(cfg, "plan", "milp_max_nodes", &pc->milp_max_nodes, err)) != LT_OK) return st;
    return LT_OK;
}

/* ---------------------------------------------------------------- the loss convention */

int64_t lt_plan_predicted_tokens(const int64_t *lengths, size_t n) {
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        if (lengths[i] > 1 && __builtin_add_overflow(sum, lengths[i] - 1, &sum)) return INT64_MAX;
    return sum;
}

int64_t lt_slice_predicted_tokens(int64_t begin, int64_t end, int64_t length) {
    if (end <= begin) return 0;
    return end - begin - (end >= length ? 1 : 0);
}

/* A scoring plan's op `op` of unit u (of `units`) on stage st: its predicted start, in
 * units of time that only order the ops. Layer blocks: u + st (a pipeline's fill). Layer
 * parts: the wave u + l, then the unit, then the part (pre, attention, post) -- one total
 * order every stage's list follows and every op's inputs precede. */
static double scoring_start(const lt_op *op, size_t u, size_t units, int st) {
    if (op->part == LT_PART_ALL) return (double)(u + (size_t)st);
    size_t part = op->part == LT_PART_PRE ? 0 : op->part == LT_PART_ATTN ? 1 : 2;
    return (double)((((size_t)op->layer_begin + u) * units + u) * 3 + part);
}

lt_status lt_plan_scoring(lt_step_plan *p, const int64_t *lengths, size_t n, int dp, int pp, int layers, bool parts,
                          lt_error *err) {
    lt_step_plan_init(p);
    if (dp < 1 || pp < 1 || layers < pp)
        return lt_fail(err, LT_ERR_USAGE, NULL, "a scoring plan of %d pipelines x %d stages over %d layers", dp, pp,
                       layers);
    for (size_t i = 0; i < n; i++)
        if (lengths[i] < 2 || lengths[i] > INT32_MAX)
            return lt_fail(err, LT_ERR_INPUT, NULL, "scoring document %zu has %" PRId64 " tokens (2 to 2^31 - 1 are "
                           "scored)", i, lengths[i]);
    p->n_samples = n;
    p->pp = pp;
    p->n_ranks = (size_t)dp;
    p->lengths = malloc((n + 1) * sizeof *p->lengths);
    p->sample_rank = malloc((n + 1) * sizeof *p->sample_rank);
    p->ranks = calloc((size_t)dp, sizeof *p->ranks);
    if (!p->lengths || !p->sample_rank || !p->ranks) {
        lt_step_plan_free(p);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a scoring plan of %zu documents", n);
    }
    if (n) memcpy(p->lengths, lengths, n * sizeof *lengths);
    p->n_predicted = lt_plan_predicted_tokens(lengths, n);
    snprintf(p->params, sizeof p->params, "scoring");
    lt_status st = LT_OK;
    for (int d = 0; st == LT_OK && d < dp; d++) {
        lt_rank_plan *r = &p->ranks[d];
        r->dp_rank = d, r->cp = 1;
        st = lt_schedule_init(&r->sched, pp, layers, err);
        if (st != LT_OK) {
            p->n_ranks = (size_t)d; /* (the ones initialized, for lt_step_plan_free) */
            break;
        }
        size_t units = 0;
        for (size_t i = (size_t)d; i < n; i += (size_t)dp) {
            p->sample_rank[i] = d;
            uint32_t sl = lt_schedule_add_slice(&r->sched, (int32_t)i, 0, lengths[i]);
            lt_schedule_add_unit(&r->sched, sl, 1);
            units++;
        }
        if (!parts) {
            for (int s = 0; s < pp; s++)
                for (size_t u = 0; u < units; u++) lt_schedule_add_stage_op(&r->sched, s, LT_OP_F, (uint32_t)u, 0);
        } else { /* HelixPipe's partition (4.2), each attention on its pre-attention's stage */
            for (size_t w = 0; units && w + 1 < units + (size_t)layers; w++)
                for (size_t u = w + 1 > (size_t)layers ? w + 1 - (size_t)layers : 0; u < units && u <= w; u++) {
                    uint32_t l = (uint32_t)(w - u);
                    lt_op op = {.kind = LT_OP_F, .unit = (uint32_t)u, .layer_begin = l, .layer_end = l + 1};
                    int at = lt_helix_part_stage((int)l, true, layers, pp);
                    int post = lt_helix_part_stage((int)l, false, layers, pp);
                    op.part = LT_PART_PRE, lt_schedule_add_op(&r->sched, at, op);
                    op.part = LT_PART_ATTN, lt_schedule_add_op(&r->sched, at, op);
                    op.part = LT_PART_POST, lt_schedule_add_op(&r->sched, post, op);
                }
        }
        r->ops = calloc(lt_schedule_n_ops(&r->sched) + 1, sizeof *r->ops);
        if (!r->ops) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for a scoring plan of %zu documents", n);
        size_t id = 0; /* (op ids stage-major, as lt_sim's) */
        for (int s = 0; r->ops && s < pp; s++)
            for (size_t i = 0; i < r->sched.stage[s].n; i++, id++) {
                const lt_op *op = &r->sched.stage[s].ops[i];
                double t = scoring_start(op, op->unit, units, s);
                r->ops[id] = (lt_plan_op){.start_s = t, .finish_s = t + 1};
            }
    }
    if (st != LT_OK) lt_step_plan_free(p);
    return st;
}

/* ---------------------------------------------------------------- DP-Merge lockstep */

uint32_t lt_plan_op_merged_sample(const lt_schedule *s, const lt_op *op) {
    const lt_unit *u = lt_schedule_op_unit(s, op);
    if (u->cp <= 1 || u->n_slices == 0) return UINT32_MAX;
    size_t n;
    const lt_slice *sl = lt_schedule_op_slices(s, op, &n); /* the unit's own slices */
    return (uint32_t)sl[0].sample;
}

/* "step S: DP-Merge group of sample X (pipelines a..b): " before err's message. */
static void group_prefix(lt_error *err, const lt_step_plan *p, const lt_dp_merge *m) {
    lt_error_prefix(err, "step %" PRIu64 ": DP-Merge group of sample %" PRId32 " (pipelines %d..%d): ", p->step,
                    m->sample, m->first_rank, m->first_rank + m->cp - 1);
}

/* The merged ops of group m on stage st of member schedule s: how many. */
static size_t merged_ops_on(const lt_schedule *s, int st, const lt_dp_merge *m) {
    size_t k = 0;
    for (size_t i = 0; i < s->stage[st].n; i++)
        if (lt_plan_op_merged_sample(s, &s->stage[st].ops[i]) == (uint32_t)m->sample) k++;
    return k;
}

lt_status lt_plan_group_rendezvous(const lt_step_plan *p, size_t g, uint32_t **rdv, size_t *n_rdv, lt_error *err) {
    const lt_dp_merge *m = &p->merges[g];
    const lt_schedule *ref = &p->ranks[m->first_rank].sched;
    size_t total = 0;
    for (int j = 0; j < m->cp; j++) rdv[j] = NULL;
    for (int st = 0; st < ref->stages; st++) total += merged_ops_on(ref, st, m);
    for (int j = 0; j < m->cp; j++) {
        const lt_schedule *s = &p->ranks[m->first_rank + j].sched;
        rdv[j] = lt_malloc_check((lt_schedule_n_ops(s) ? lt_schedule_n_ops(s) : 1) * sizeof *rdv[j]);
        size_t id = 0, first = 0; /* rendezvous of stage st: first .. first + its merged ops */
        for (int st = 0; st < s->stages; st++) {
            size_t want = merged_ops_on(ref, st, m), k = 0;
            for (size_t i = 0; i < s->stage[st].n; i++, id++)
                rdv[j][id] = lt_plan_op_merged_sample(s, &s->stage[st].ops[i]) == (uint32_t)m->sample
                                 ? (uint32_t)(first + k++)
                                 : LT_SIM_SOLO;
            if (k != want) {
                for (int q = 0; q <= j; q++) free(rdv[q]), rdv[q] = NULL;
                lt_fail(err, LT_ERR_INPUT, NULL,
                        "stage %d runs %zu merged ops on pipeline %d but %zu on pipeline %d (members run the same "
                        "merged ops in the same order)",
                        st, want, m->first_rank, k, m->first_rank + j);
                group_prefix(err, p, m);
                return LT_ERR_INPUT;
            }
            first += want;
        }
    }
    *n_rdv = total;
    return LT_OK;
}

lt_status lt_plan_simulate_group(const lt_step_plan *p, size_t g, lt_sim *sims, const lt_sim_costs *costs,
                                 lt_error *err) {
    const lt_dp_merge *m = &p->merges[g];
    size_t cp = (size_t)m->cp, n_rdv = 0;
    uint32_t **rdv = lt_calloc_check(cp, sizeof *rdv);
    const lt_schedule **s = lt_malloc_check(cp * sizeof *s);
    int *labels = lt_malloc_check(cp * sizeof *labels);
    for (size_t j = 0; j < cp; j++) {
        s[j] = &p->ranks[m->first_rank + (int)j].sched;
        labels[j] = m->first_rank + (int)j;
    }
    lt_status st = lt_plan_group_rendezvous(p, g, rdv, &n_rdv, err);
    if (st == LT_OK) {
        st = lt_sim_run_group(sims, s, costs, cp, (const uint32_t *const *)rdv, n_rdv, labels, err);
        if (st != LT_OK) group_prefix(err, p, m);
    }
    for (size_t j = 0; j < cp; j++) free(rdv[j]);
    free(rdv);
    free(s);
    free(labels);
    return st;
}
