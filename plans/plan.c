/*
 * plans/plan.c — strategy names, step plans, the planner config (plans/plan.h).
 */
#include "plans/plan.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const char *const strategy_names[LT_STRATEGY_COUNT] = {
    "megatron", "gpipe", "seq1f1b", "chunkflow", "infinipipe", "slimpack", "auto",
};

const char *lt_strategy_name(lt_strategy s) {
    return (unsigned)s < LT_STRATEGY_COUNT ? strategy_names[s] : "?";
}

lt_status lt_strategy_parse(const char *name, const char *where, lt_strategy *out, lt_error *err) {
    for (int i = 0; i < LT_STRATEGY_COUNT; i++) {
        if (name && strcmp(name, strategy_names[i]) == 0) {
            *out = (lt_strategy)i;
            return LT_OK;
        }
    }
    lt_fail(err, LT_ERR_USAGE, where, "unknown strategy '%s'", name ? name : "");
    lt_error_hint(err, "strategies: megatron gpipe seq1f1b chunkflow infinipipe slimpack auto");
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

lt_status lt_planner_config_from(lt_planner_config *pc, const lt_config *cfg, const char *hardware_dir,
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
        if (lengths[i] > 1) sum += lengths[i] - 1;
    return sum;
}

int64_t lt_slice_predicted_tokens(int64_t begin, int64_t end, int64_t length) {
    if (end <= begin) return 0;
    return end - begin - (end >= length ? 1 : 0);
}
