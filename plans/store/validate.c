/*
 * plans/store/validate.c — the invariants every stored plan keeps, and printing one step
 * (plans/store/validate.h: lt_plan_validate, lt_store_validate, lt_plan_print).
 *
 * lt_plan_validate checks, in this order, so that each broken rule is reported as itself:
 *   1. shape: arrays present, every schedule of pp stages, samples on existing pipelines,
 *      units over existing slices (bunits over existing bslices), ops over existing units
 *      (an asymmetric schedule's B ops over existing bunits) with valid layer ranges, the
 *      solver status one of the five; the DP-Merge groups (SlimPack 4.1.1) by increasing
 *      sample, each of cp >= 2 pipelines within the step, starting at sample_rank[sample];
 *   2. passes: every unit forwarded (F, or FK then F) and backwarded exactly once over the
 *      whole model, counted per path position (plans/schedule/schedule.h: 3 positions per layer); in
 *      an asymmetric schedule (SlimPack 4.1.2) every forward unit forwarded and every
 *      backward unit (bunit) backwarded exactly once;
 *   3. coverage: per pass, the slices of the units that pass runs (forward: units; backward:
 *      bunits of an asymmetric schedule, else units) cover each sample's tokens [0, length)
 *      exactly once, on the pipeline sample_rank[] names; a DP-merged sample exactly once
 *      on every pipeline of its group, with the same slices on each, in units of the
 *      group's cp, and on no other pipeline; a sample not merged in no unit of cp > 1;
 *   4. slice order and ranges: lt_schedule_check;
 *   5. dependencies: lt_sim_run under lt_sim_unit_costs finds no deadlock, nor does the
 *      joint simulation of each DP-Merge group (lt_plan_simulate_group: merged ops as
 *      rendezvous across the members);
 *   6. memory: every stage's predicted peak under the cap;
 *   7. predictions: finite and >= 0, finish >= start, a stage's ops in time order, the
 *      pipeline's and the step's time at least every op's finish; a merged op's start the
 *      same on every member of its group (within 1 ns).
 * Messages name the step, the pipeline (index and dp_rank), the stage, unit or sample.
 */
#include "plans/store/validate.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "plans/schedule/deps.h" /* lt_deps_preds: the F a B takes activations from */
#include "plans/schedule/sim.h"  /* lt_sim_run, lt_sim_unit_costs, lt_sim_print_timeline, lt_sim_deps */
#include "plans/store/store.h"   /* lt_store_run_info, lt_store_steps, lt_store_get_step, lt_store_check_rows */

/* ------------------------------------------------------------------ messages */

/* LT_ERR_INPUT "step S, pipeline R (dp_rank D): WHAT" (r < 0: "step S: WHAT"). */
static lt_status plan_fail(lt_error *err, const lt_step_plan *p, long r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static lt_status plan_fail(lt_error *err, const lt_step_plan *p, long r, const char *fmt, ...) {
    char what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (r < 0) return lt_fail(err, LT_ERR_INPUT, NULL, "step %" PRIu64 ": %s", p->step, what);
    return lt_fail(err, LT_ERR_INPUT, NULL, "step %" PRIu64 ", pipeline %ld (dp_rank %d): %s", p->step, r,
                   p->ranks[r].dp_rank, what);
}

/* A lower layer's error (lt_schedule_check, lt_sim_run) as a plan fault of pipeline r. */
static lt_status plan_wrap(lt_error *err, const lt_step_plan *p, size_t r, lt_status s) {
    if (err) {
        err->status = LT_ERR_INPUT;
        err->where[0] = '\0';
    }
    lt_error_prefix(err, "step %" PRIu64 ", pipeline %zu (dp_rank %d): ", p->step, r, p->ranks[r].dp_rank);
    (void)s;
    return LT_ERR_INPUT;
}

/* "layers [a, b)" for path positions [pb, pe), or the positions when not whole layers. */
static void describe_positions(uint32_t pb, uint32_t pe, char *buf, size_t n) {
    static const char *const parts[] = {"pre-attention", "attention", "post-attention"};
    if (pb % 3 == 0 && pe % 3 == 0) {
        if (pe - pb == 3) snprintf(buf, n, "layer %u", pb / 3);
        else snprintf(buf, n, "layers [%u, %u)", pb / 3, pe / 3);
    } else if (pe - pb == 1) {
        snprintf(buf, n, "the %s part of layer %u", parts[pb % 3], pb / 3);
    } else {
        snprintf(buf, n, "path positions [%u, %u) (3 per layer)", pb, pe);
    }
}

/* ------------------------------------------------------------------ 1. shape */

/* The DP-Merge groups (SlimPack 4.1.1): by increasing sample, no sample twice, each of
 * 2 <= cp pipelines first_rank .. first_rank + cp - 1 within the step, the sample assigned
 * (sample_rank) to the first. */
static lt_status check_merges(const lt_step_plan *p, lt_error *err) {
    if (p->n_merges > 0 && !p->merges) return plan_fail(err, p, -1, "no merges array");
    for (size_t k = 0; k < p->n_merges; k++) {
        const lt_dp_merge *m = &p->merges[k];
        if (m->sample < 0 || (size_t)m->sample >= p->n_samples)
            return plan_fail(err, p, -1, "DP-Merge group %zu names sample %" PRId32 ", the step has %zu samples", k,
                             m->sample, p->n_samples);
        if (k > 0 && m->sample == p->merges[k - 1].sample)
            return plan_fail(err, p, -1, "sample %" PRId32 " has two DP-Merge groups", m->sample);
        if (k > 0 && m->sample < p->merges[k - 1].sample)
            return plan_fail(err, p, -1,
                             "DP-Merge groups are not in increasing sample order (sample %" PRId32 " after %" PRId32
                             ")",
                             m->sample, p->merges[k - 1].sample);
        if (m->cp < 2)
            return plan_fail(err, p, -1, "sample %" PRId32 ": a DP-Merge group of cp %d (2 or more pipelines)",
                             m->sample, m->cp);
        if (m->first_rank < 0 || (size_t)m->first_rank >= p->n_ranks ||
            (size_t)m->cp > p->n_ranks - (size_t)m->first_rank)
            return plan_fail(err, p, -1,
                             "sample %" PRId32 ": its DP-Merge group, pipelines %d .. %ld (cp %d), is not within the "
                             "step's %zu pipelines",
                             m->sample, m->first_rank, (long)m->first_rank + m->cp - 1, m->cp, p->n_ranks);
        if (p->sample_rank[m->sample] != m->first_rank)
            return plan_fail(err, p, -1,
                             "sample %" PRId32 " is DP-merged from pipeline %d (dp_rank %d), but it is assigned to "
                             "pipeline %d (dp_rank %d)",
                             m->sample, m->first_rank, p->ranks[m->first_rank].dp_rank, p->sample_rank[m->sample],
                             p->ranks[p->sample_rank[m->sample]].dp_rank);
    }
    return LT_OK;
}

static lt_status check_shape(const lt_step_plan *p, lt_error *err) {
    if (p->pp < 1) return plan_fail(err, p, -1, "%d pipeline stages", p->pp);
    if (p->n_ranks == 0 && p->n_samples > 0) return plan_fail(err, p, -1, "%zu samples but no pipeline", p->n_samples);
    if (p->n_ranks > 0 && !p->ranks) return plan_fail(err, p, -1, "no pipelines array");
    if (p->n_samples > 0 && (!p->lengths || !p->sample_rank))
        return plan_fail(err, p, -1, "no lengths or sample_rank arrays");
    int64_t total = 0;
    for (size_t i = 0; i < p->n_samples; i++) {
        if (p->lengths[i] < 1)
            return plan_fail(err, p, -1, "sample %zu has %" PRId64 " tokens (at least 1 expected)", i, p->lengths[i]);
        if (__builtin_add_overflow(total, p->lengths[i], &total))
            return plan_fail(err, p, -1, "the lengths of samples 0..%zu sum past 2^63 tokens (sample %zu has %" PRId64 ")",
                             i, i, p->lengths[i]);
        if (p->sample_rank[i] < 0 || (size_t)p->sample_rank[i] >= p->n_ranks)
            return plan_fail(err, p, -1, "sample %zu is assigned to pipeline %d, the step has %zu", i,
                             p->sample_rank[i], p->n_ranks);
    }
    for (size_t r = 0; r < p->n_ranks; r++) {
        const lt_rank_plan *rp = &p->ranks[r];
        const lt_schedule *s = &rp->sched;
        if (s->stages != p->pp)
            return plan_fail(err, p, (long)r, "a schedule of %d stages in a plan of %d", s->stages, p->pp);
        if (rp->cp < 1) return plan_fail(err, p, (long)r, "context-parallel degree %d", rp->cp);
        if (r > 0 && rp->dp_rank <= p->ranks[r - 1].dp_rank)
            return plan_fail(err, p, (long)r, "pipelines are not in increasing dp_rank order");
        if (!rp->stage_busy_s || !rp->stage_peak_mem || (lt_schedule_n_ops(s) > 0 && !rp->ops))
            return plan_fail(err, p, (long)r, "predictions missing (ops, stage_busy_s or stage_peak_mem)");
        for (size_t i = 0; i < s->n_slices; i++) {
            const lt_slice *sl = &s->slices[i];
            if (sl->sample < 0 || (size_t)sl->sample >= p->n_samples)
                return plan_fail(err, p, (long)r, "slice %zu names sample %" PRId32 ", the step has %zu samples", i,
                                 sl->sample, p->n_samples);
            if (sl->begin < 0 || sl->end <= sl->begin)
                return plan_fail(err, p, (long)r,
                                 "slice %zu of sample %" PRId32 " has tokens [%" PRId64 ", %" PRId64 ")", i,
                                 sl->sample, sl->begin, sl->end);
        }
        for (size_t u = 0; u < s->n_units; u++) {
            const lt_unit *un = &s->units[u];
            if (un->n_slices == 0 || (size_t)un->first_slice + un->n_slices > s->n_slices)
                return plan_fail(err, p, (long)r, "unit %zu holds slices [%u, %u) of %zu", u, un->first_slice,
                                 un->first_slice + un->n_slices, s->n_slices);
        }
        for (size_t i = 0; s->asym && i < s->n_bslices; i++) {
            const lt_slice *sl = &s->bslices[i];
            if (sl->sample < 0 || (size_t)sl->sample >= p->n_samples)
                return plan_fail(err, p, (long)r, "bslice %zu names sample %" PRId32 ", the step has %zu samples", i,
                                 sl->sample, p->n_samples);
            if (sl->begin < 0 || sl->end <= sl->begin)
                return plan_fail(err, p, (long)r,
                                 "bslice %zu of sample %" PRId32 " has tokens [%" PRId64 ", %" PRId64 ")", i,
                                 sl->sample, sl->begin, sl->end);
        }
        for (size_t u = 0; s->asym && u < s->n_bunits; u++) {
            const lt_unit *un = &s->bunits[u];
            if (un->n_slices == 0 || (size_t)un->first_slice + un->n_slices > s->n_bslices)
                return plan_fail(err, p, (long)r, "backward unit %zu holds bslices [%u, %u) of %zu", u,
                                 un->first_slice, un->first_slice + un->n_slices, s->n_bslices);
        }
        for (int g = 0; g < s->stages; g++) {
            for (size_t i = 0; i < s->stage[g].n; i++) {
                const lt_op *op = &s->stage[g].ops[i];
                if (op->kind > LT_OP_B || op->part > LT_PART_POST)
                    return plan_fail(err, p, (long)r, "stage %d, op %zu: unknown kind %u or part %u", g, i, op->kind,
                                     op->part);
                if (s->asym && op->kind == LT_OP_B ? op->unit >= s->n_bunits : op->unit >= s->n_units)
                    return plan_fail(err, p, (long)r, "stage %d, op %zu runs %sunit %u of %zu", g, i,
                                     s->asym && op->kind == LT_OP_B ? "backward " : "", op->unit,
                                     s->asym && op->kind == LT_OP_B ? s->n_bunits : s->n_units);
                if (op->layer_begin >= op->layer_end || op->layer_end > (uint32_t)s->layers ||
                    (op->part != LT_PART_ALL && op->layer_end != op->layer_begin + 1))
                    return plan_fail(err, p, (long)r, "stage %d, op %zu: layers [%u, %u) of %d", g, i,
                                     op->layer_begin, op->layer_end, s->layers);
            }
        }
    }
    static const char *const statuses[] = {"none", "optimal", "feasible", "timeout", "infeasible"};
    bool known = false;
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        known |= strncmp(p->solver_status, statuses[i], sizeof p->solver_status) == 0;
    if (!known)
        return plan_fail(err, p, -1, "solver status '%.*s' (none, optimal, feasible, timeout or infeasible)",
                         (int)sizeof p->solver_status, p->solver_status);
    return check_merges(p, err);
}

/* ------------------------------------------------------------------ 2. passes */

/* Every unit of pipeline r: forward (F) exactly once, FK at most once, B exactly once at
 * every path position of the model; in an asymmetric schedule the B counts are of the
 * backward units (bunits), and every bunit, not every unit, is backwarded exactly once.
 * Counted with difference arrays over positions. */
static lt_status check_passes(const lt_step_plan *p, size_t r, lt_error *err) {
    const lt_schedule *s = &p->ranks[r].sched;
    const size_t npos = 3 * (size_t)s->layers, stride = npos + 1;
    const size_t nb = s->asym ? s->n_bunits : s->n_units; /* what B ops run */
    if (s->n_units == 0 && nb == 0) return LT_OK;
    int32_t *cf = lt_calloc_check((2 * s->n_units + nb) * stride, sizeof *cf); /* [F, FK][unit][pos] */
    int32_t *ck = cf + s->n_units * stride, *cb = ck + s->n_units * stride;    /* then [B][(b)unit][pos] */
    for (int g = 0; g < s->stages; g++) {
        for (size_t i = 0; i < s->stage[g].n; i++) {
            const lt_op *op = &s->stage[g].ops[i];
            uint32_t pb, pe;
            lt_op_positions(op, &pb, &pe);
            int32_t *c = (op->kind == LT_OP_F ? cf : op->kind == LT_OP_FK ? ck : cb) + (size_t)op->unit * stride;
            c[pb]++;
            c[pe]--;
        }
    }
    for (int32_t *c = cf; c < cb + nb * stride; c += stride) /* prefix sums: the count at each position */
        for (size_t i = 1; i < npos; i++) c[i] += c[i - 1];
    const char *bname = s->asym ? "backward unit" : "unit";
    lt_status st = LT_OK;
    for (size_t u = 0; u < s->n_units || u < nb; u++) {
        const int32_t *f = u < s->n_units ? cf + u * stride : NULL, *k = u < s->n_units ? ck + u * stride : NULL,
                      *b = u < nb ? cb + u * stride : NULL;
        /* the fault at a position: 0 none, else a code; report the first run of one fault */
        for (size_t i = 0; i < npos && st == LT_OK; i++) {
            int fv = f ? f[i] : 1, kv = k ? k[i] : 0, bv = b ? b[i] : 1;
            int code = fv == 0 && kv == 0 ? 1 : fv == 0 ? 2 : fv > 1 ? 3 : kv > 1 ? 4 : bv == 0 ? 5 : bv > 1 ? 6 : 0;
            if (!code) continue;
            size_t j = i + 1;
            while (j < npos && (f ? f[j] : 1) == fv && (k ? k[j] : 0) == kv && (b ? b[j] : 1) == bv) j++;
            char where[96];
            describe_positions((uint32_t)i, (uint32_t)j, where, sizeof where);
            switch (code) {
            case 1: st = plan_fail(err, p, (long)r, "unit %zu is never forwarded on %s", u, where); break;
            case 2:
                st = plan_fail(err, p, (long)r,
                               "unit %zu is forwarded only by FK on %s (keys/values kept, no activations for its "
                               "backward; an F must follow)",
                               u, where);
                break;
            case 3:
                st = plan_fail(err, p, (long)r,
                               "unit %zu is forwarded %d times on %s (once expected; FK then F counts once)", u, fv,
                               where);
                break;
            case 4:
                st = plan_fail(err, p, (long)r, "unit %zu runs FK %d times on %s (at most once)", u, kv, where);
                break;
            case 5: st = plan_fail(err, p, (long)r, "%s %zu is never backwarded on %s", bname, u, where); break;
            default:
                st = plan_fail(err, p, (long)r, "%s %zu is backwarded %d times on %s (once expected)", bname, u, bv,
                               where);
            }
        }
        if (st != LT_OK) break;
    }
    free(cf);
    return st;
}

/* ------------------------------------------------------------------ 3. coverage */

typedef struct cover_item {
    int32_t sample;
    int64_t begin, end;
    uint32_t rank, unit;
    uint16_t cp; /* the unit's, 0 read as 1 */
} cover_item;

static int cmp_cover(const void *a, const void *b) {
    const cover_item *x = a, *y = b;
    if (x->sample != y->sample) return x->sample < y->sample ? -1 : 1;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->unit > y->unit) - (x->unit < y->unit);
}

/* "unit 3" or, for the backward pass of an asymmetric schedule, "backward unit 3". */
static const char *unit_word(const lt_step_plan *p, uint32_t rank, int pass) {
    return pass == 1 && p->ranks[rank].sched.asym ? "backward unit" : "unit";
}

/* The items of sample smp in one pass, it[0..n) (sorted by cmp_cover: by pipeline, then
 * token), against its pipelines: ranks [first, first + members) (its own, or its DP-Merge
 * group of cp = gcp; merged = whether it is in a group). */
static lt_status cover_sample(const lt_step_plan *p, size_t smp, const cover_item *it, size_t n, int first,
                              int members, int gcp, bool merged, int pass, lt_error *err) {
    static const char *const pass_name[2] = {"forward", "backward"};
    const char *pn = pass_name[pass];
    /* every item on a pipeline of the sample, in a unit of the right cp */
    for (size_t j = 0; j < n; j++) {
        const cover_item *x = &it[j];
        const int ucp = x->cp > 1 ? x->cp : 1;
        if (!merged && x->rank != (uint32_t)first)
            return plan_fail(err, p, -1,
                             "sample %zu has tokens [%" PRId64 ", %" PRId64 ") in %s %u of pipeline %u (dp_rank %d), "
                             "but it is assigned to pipeline %d (dp_rank %d)",
                             smp, x->begin, x->end, unit_word(p, x->rank, pass), x->unit, x->rank,
                             p->ranks[x->rank].dp_rank, first, p->ranks[first].dp_rank);
        if (merged && (x->rank < (uint32_t)first || x->rank >= (uint32_t)(first + members)))
            return plan_fail(err, p, -1,
                             "sample %zu has tokens [%" PRId64 ", %" PRId64 ") in %s %u of pipeline %u (dp_rank %d), "
                             "outside its DP-Merge group (pipelines %d .. %d)",
                             smp, x->begin, x->end, unit_word(p, x->rank, pass), x->unit, x->rank,
                             p->ranks[x->rank].dp_rank, first, first + members - 1);
        if (ucp != gcp) {
            if (!merged)
                return plan_fail(err, p, -1,
                                 "sample %zu is not DP-merged, but %s %u of pipeline %u (dp_rank %d) holding it has "
                                 "cp %d",
                                 smp, unit_word(p, x->rank, pass), x->unit, x->rank, p->ranks[x->rank].dp_rank, ucp);
            return plan_fail(err, p, -1,
                             "sample %zu is DP-merged with cp %d, but %s %u of pipeline %u (dp_rank %d) holding it "
                             "has cp %d",
                             smp, gcp, unit_word(p, x->rank, pass), x->unit, x->rank, p->ranks[x->rank].dp_rank, ucp);
        }
    }
    /* on each pipeline, tokens [0, length) exactly once; the group's pipelines alike */
    size_t j = 0, first_j = 0, first_n = 0;
    for (int k = 0; k < members; k++) {
        const uint32_t rank = (uint32_t)(first + k);
        char on[64] = "";
        if (merged) snprintf(on, sizeof on, " on pipeline %u (dp_rank %d)", rank, p->ranks[rank].dp_rank);
        int64_t next = 0; /* first token not yet covered */
        const cover_item *prev = NULL;
        const size_t j0 = j;
        for (; j < n && it[j].rank == rank; j++) {
            const cover_item *x = &it[j];
            if (x->begin > next)
                return plan_fail(err, p, -1,
                                 "tokens [%" PRId64 ", %" PRId64 ") of sample %zu are not covered in the %s pass%s",
                                 next, x->begin, smp, pn, on);
            if (x->begin < next)
                return plan_fail(err, p, -1,
                                 "tokens [%" PRId64 ", %" PRId64 ") of sample %zu are covered twice in the %s pass "
                                 "(%ss %u and %u of pipeline %u)",
                                 x->begin, x->end < next ? x->end : next, smp, pn, unit_word(p, rank, pass), prev->unit,
                                 x->unit, x->rank);
            if (x->end > p->lengths[smp])
                return plan_fail(err, p, -1,
                                 "%s %u of pipeline %u covers tokens [%" PRId64 ", %" PRId64 ") of sample %zu, "
                                 "which has %" PRId64,
                                 unit_word(p, rank, pass), x->unit, x->rank, x->begin, x->end, smp, p->lengths[smp]);
            next = x->end;
            prev = x;
        }
        if (next < p->lengths[smp])
            return plan_fail(err, p, -1, "tokens [%" PRId64 ", %" PRId64 ") of sample %zu are not covered in the %s pass%s",
                             next, p->lengths[smp], smp, pn, on);
        if (k == 0) {
            first_j = j0;
            first_n = j - j0;
            continue;
        }
        /* SlimPack 4.1.1: every member computes its shard of the same slices */
        bool same = j - j0 == first_n;
        for (size_t i = 0; same && i < first_n; i++)
            same = it[j0 + i].begin == it[first_j + i].begin && it[j0 + i].end == it[first_j + i].end;
        if (!same)
            return plan_fail(err, p, -1,
                             "DP-merged sample %zu has other slices on pipeline %u (dp_rank %d) than on pipeline %d "
                             "(dp_rank %d) in the %s pass (the members of a group hold the same slices)",
                             smp, rank, p->ranks[rank].dp_rank, first, p->ranks[first].dp_rank, pn);
    }
    return LT_OK;
}

static lt_status check_coverage(const lt_step_plan *p, lt_error *err) {
    /* the most items of a pass: its units' slices, counted per unit (units may overlap
     * here: lt_schedule_check, later, finds that) */
    size_t total_f = 0, total_b = 0, max_units = 1;
    for (size_t r = 0; r < p->n_ranks; r++) {
        const lt_schedule *s = &p->ranks[r].sched;
        for (size_t u = 0; u < s->n_units; u++) total_f += s->units[u].n_slices;
        for (size_t u = 0; s->asym && u < s->n_bunits; u++) total_b += s->bunits[u].n_slices;
        if (s->n_units > max_units) max_units = s->n_units;
        if (s->asym && s->n_bunits > max_units) max_units = s->n_bunits;
    }
    size_t total = total_f > total_b ? total_f : total_b;
    /* the DP-Merge group of each sample, -1 for none (check_merges has checked them) */
    int *group = lt_malloc_check((p->n_samples ? p->n_samples : 1) * sizeof *group);
    for (size_t i = 0; i < p->n_samples; i++) group[i] = -1;
    for (size_t k = 0; k < p->n_merges; k++) group[p->merges[k].sample] = (int)k;
    cover_item *items = lt_malloc_check((total ? total : 1) * sizeof *items);
    bool *runs = lt_malloc_check(max_units * sizeof *runs);
    lt_status st = LT_OK;
    for (int pass = 0; pass < 2 && st == LT_OK; pass++) {
        size_t n = 0;
        for (size_t r = 0; r < p->n_ranks; r++) {
            const lt_schedule *s = &p->ranks[r].sched;
            /* the backward pass of an asymmetric schedule runs its backward partition */
            const bool bwd = pass == 1 && s->asym;
            const lt_unit *units = bwd ? s->bunits : s->units;
            const lt_slice *slices = bwd ? s->bslices : s->slices;
            const size_t nu = bwd ? s->n_bunits : s->n_units;
            memset(runs, 0, max_units * sizeof *runs);
            for (int g = 0; g < s->stages; g++)
                for (size_t i = 0; i < s->stage[g].n; i++)
                    if ((s->stage[g].ops[i].kind == LT_OP_B) == (pass == 1)) runs[s->stage[g].ops[i].unit] = true;
            for (size_t u = 0; u < nu; u++) {
                if (!runs[u]) continue;
                for (uint32_t k = 0; k < units[u].n_slices; k++) {
                    const lt_slice *sl = &slices[units[u].first_slice + k];
                    items[n++] = (cover_item){sl->sample, sl->begin, sl->end, (uint32_t)r, (uint32_t)u, units[u].cp};
                }
            }
        }
        qsort(items, n, sizeof *items, cmp_cover);
        size_t j = 0;
        for (size_t smp = 0; smp < p->n_samples && st == LT_OK; smp++) {
            size_t j0 = j;
            while (j < n && items[j].sample == (int32_t)smp) j++;
            const lt_dp_merge *m = group[smp] >= 0 ? &p->merges[group[smp]] : NULL;
            st = m ? cover_sample(p, smp, items + j0, j - j0, m->first_rank, m->cp, m->cp, true, pass, err)
                   : cover_sample(p, smp, items + j0, j - j0, p->sample_rank[smp], 1, 1, false, pass, err);
        }
    }
    free(runs);
    free(items);
    free(group);
    return st;
}

/* ------------------------------------------------------------------ 6, 7. memory, predictions */

#define GIB (1024.0 * 1024.0 * 1024.0)

static bool bad_value(double x) { return !isfinite(x) || x < 0; }

static lt_status check_memory(const lt_step_plan *p, double mem_cap, lt_error *err) {
    if (!(mem_cap > 0) || !isfinite(mem_cap)) return LT_OK; /* no cap to check against */
    for (size_t r = 0; r < p->n_ranks; r++)
        for (int g = 0; g < p->pp; g++) {
            double m = p->ranks[r].stage_peak_mem[g];
            if (m > mem_cap)
                return plan_fail(err, p, (long)r,
                                 "stage %d: predicted peak memory %.0f bytes (%.2f GiB) is over the cap of %.0f bytes "
                                 "(%.2f GiB) by %.0f bytes (%.2f GiB)",
                                 g, m, m / GIB, mem_cap, mem_cap / GIB, m - mem_cap, (m - mem_cap) / GIB);
        }
    return LT_OK;
}

static lt_status check_predictions(const lt_step_plan *p, lt_error *err) {
    if (!isfinite(p->time_s) || p->time_s < 0) return plan_fail(err, p, -1, "predicted step time %g s", p->time_s);
    if (!isfinite(p->bubble_ratio) || p->bubble_ratio < -1e-9 || p->bubble_ratio > 1 + 1e-9)
        return plan_fail(err, p, -1, "bubble ratio %g (0..1 expected)", p->bubble_ratio);
    if (bad_value(p->peak_mem)) return plan_fail(err, p, -1, "predicted peak memory %g bytes", p->peak_mem);
    for (size_t r = 0; r < p->n_ranks; r++) {
        const lt_rank_plan *rp = &p->ranks[r];
        const lt_schedule *s = &rp->sched;
        if (bad_value(rp->time_s)) return plan_fail(err, p, (long)r, "predicted time %g s", rp->time_s);
        if (rp->time_s > p->time_s)
            return plan_fail(err, p, (long)r, "predicted time %.9g s is over the step's %.9g s", rp->time_s, p->time_s);
        size_t id = 0;
        for (int g = 0; g < s->stages; g++) {
            if (bad_value(rp->stage_busy_s[g]))
                return plan_fail(err, p, (long)r, "stage %d: predicted busy time %g s", g, rp->stage_busy_s[g]);
            if (bad_value(rp->stage_peak_mem[g]))
                return plan_fail(err, p, (long)r, "stage %d: predicted peak memory %g bytes", g, rp->stage_peak_mem[g]);
            if (rp->stage_peak_mem[g] > p->peak_mem)
                return plan_fail(err, p, (long)r, "stage %d: peak memory %.0f bytes is over the step's peak %.0f", g,
                                 rp->stage_peak_mem[g], p->peak_mem);
            for (size_t i = 0; i < s->stage[g].n; i++, id++) {
                const lt_plan_op *po = &rp->ops[id];
                bool bad = bad_value(po->start_s) || bad_value(po->finish_s) || bad_value(po->mem_bytes);
                if (!bad && po->finish_s >= po->start_s && (i == 0 || po->start_s >= rp->ops[id - 1].finish_s) &&
                    po->finish_s <= rp->time_s)
                    continue; /* the common case, without formatting the op's name */
                char name[64];
                lt_op_name(&s->stage[g].ops[i], name, sizeof name);
                if (bad)
                    return plan_fail(err, p, (long)r,
                                     "stage %d, op %zu (%s): predicted start %g s, finish %g s, memory %g bytes "
                                     "(each must be finite and >= 0)",
                                     g, i, name, po->start_s, po->finish_s, po->mem_bytes);
                if (po->finish_s < po->start_s)
                    return plan_fail(err, p, (long)r,
                                     "stage %d, op %zu (%s) finishes at %.9g s before it starts at %.9g s", g, i, name,
                                     po->finish_s, po->start_s);
                if (i > 0 && po->start_s < rp->ops[id - 1].finish_s)
                    return plan_fail(err, p, (long)r,
                                     "stage %d, op %zu (%s) starts at %.9g s before the previous op finishes at %.9g s",
                                     g, i, name, po->start_s, rp->ops[id - 1].finish_s);
                return plan_fail(err, p, (long)r,
                                 "stage %d, op %zu (%s) finishes at %.9g s, after the pipeline's time %.9g s", g, i,
                                 name, po->finish_s, rp->time_s);
            }
        }
    }
    return LT_OK;
}

/* ------------------------------------------------------------------ 6. executability */

/* What an executor relies on beyond the simulator's rules (issue 16; docs/plans-schema.md,
 * "Executing a plan"):
 *   - the loss denominator: n_predicted == lt_plan_predicted_tokens(lengths);
 *   - recompute placement: an op's recompute_layers R names the FIRST R layers of its range,
 *     [layer_begin, layer_begin + R) (Megatron's block method; for a part op, R = 1 is the
 *     part; an attention part is never recomputed, HelixPipe 4.4.1: R = 0 there). FK keeps
 *     no activations, so R = 0 there; a B recomputes exactly what its F
 *     kept only the inputs of, so every B has the R of each F it takes activations from
 *     (its LT_DEP_ACT edges of d, the graph of pipeline r). */
static lt_status check_loss(const lt_step_plan *p, lt_error *err) {
    int64_t want = lt_plan_predicted_tokens(p->lengths, p->n_samples);
    if (p->n_predicted != want)
        return plan_fail(err, p, -1,
                         "the loss denominator n_predicted is %" PRId64 ", the samples give %" PRId64
                         " (sum of length - 1)",
                         p->n_predicted, want);
    return LT_OK;
}

static lt_status check_recompute(const lt_step_plan *p, size_t r, const lt_deps *d, lt_error *err) {
    for (size_t v = 0; v < d->n_ops; v++) {
        const lt_op *op = d->op[v];
        char name[64], other[64];
        if (op->kind == LT_OP_FK && op->recompute_layers != 0)
            return plan_fail(err, p, (long)r,
                             "stage %u, op %zu (%s): FK with recompute_layers %u (FK keeps no activations: 0)",
                             d->stage[v], v - d->first_op[d->stage[v]], lt_op_name(op, name, sizeof name),
                             op->recompute_layers);
        if (op->part == LT_PART_ATTN && op->recompute_layers != 0) /* HelixPipe 4.4.1: recomputation without attention */
            return plan_fail(err, p, (long)r,
                             "stage %u, op %zu (%s): an attention part with recompute_layers %u (HelixPipe recomputes "
                             "without attention, 4.4.1: 0)",
                             d->stage[v], v - d->first_op[d->stage[v]], lt_op_name(op, name, sizeof name),
                             op->recompute_layers);
        if (op->kind != LT_OP_B) continue;
        size_t n;
        const lt_dep *e = lt_deps_preds(d, v, &n);
        for (size_t i = 0; i < n; i++) {
            if (e[i].kind != LT_DEP_ACT) continue;
            const lt_op *f = d->op[e[i].op];
            if (f->recompute_layers != op->recompute_layers)
                return plan_fail(err, p, (long)r,
                                 "stage %u: %s recomputes %u layers but %s, whose activations it takes, kept "
                                 "inputs only for %u (F and B must agree)",
                                 d->stage[v], lt_op_name(op, name, sizeof name), op->recompute_layers,
                                 lt_op_name(f, other, sizeof other), f->recompute_layers);
        }
    }
    return LT_OK;
}

/* DP-Merge groups an executor can run in lockstep (SlimPack 4.1.1; docs/plans-schema.md,
 * "DP-Merge"): groups are disjoint; each member pipeline has no static CP of its own (cp
 * 1: member k is dp_rank first + k, its shard k); a unit of cp > 1 holds slices of one
 * merged sample only; and on every stage, the ops over the group's units form the same
 * sequence on every member: same kind, part, layers, recompute and the same slices, in
 * the same order. The k-th such op of a stage is one collective op of the group (the
 * identity of a merged unit across members is its position in that sequence). */
static uint32_t merged_sample_of(const lt_schedule *s, const lt_op *op) { return lt_plan_op_merged_sample(s, op); }

static bool same_merged_op(const lt_schedule *a, const lt_op *x, const lt_schedule *b, const lt_op *y) {
    if (x->kind != y->kind || x->part != y->part || x->layer_begin != y->layer_begin || x->layer_end != y->layer_end ||
        x->recompute_layers != y->recompute_layers)
        return false;
    const lt_unit *ua = lt_schedule_op_unit(a, x), *ub = lt_schedule_op_unit(b, y);
    if (ua->n_slices != ub->n_slices || ua->cp != ub->cp) return false;
    size_t n;
    const lt_slice *sa = lt_schedule_op_slices(a, x, &n), *sb = lt_schedule_op_slices(b, y, &n);
    for (uint32_t i = 0; i < ua->n_slices; i++) { /* lt_schedule_op_slices: the unit's own slices */
        const lt_slice *p = &sa[i], *q = &sb[i];
        if (p->sample != q->sample || p->begin != q->begin || p->end != q->end) return false;
    }
    return true;
}

static lt_status check_merge_agreement(const lt_step_plan *p, lt_error *err) {
    for (size_t k = 0; k < p->n_merges; k++) {
        const lt_dp_merge *m = &p->merges[k];
        for (size_t l = 0; l < k; l++) {
            const lt_dp_merge *o = &p->merges[l];
            if (m->first_rank < o->first_rank + o->cp && o->first_rank < m->first_rank + m->cp)
                return plan_fail(err, p, -1,
                                 "the DP-Merge groups of samples %" PRId32 " (pipelines %d..%d) and %" PRId32
                                 " (pipelines %d..%d) overlap (groups must be disjoint)",
                                 o->sample, o->first_rank, o->first_rank + o->cp - 1, m->sample, m->first_rank,
                                 m->first_rank + m->cp - 1);
        }
        for (int j = 0; j < m->cp; j++) {
            const lt_rank_plan *rp = &p->ranks[m->first_rank + j];
            if (rp->cp != 1)
                return plan_fail(err, p, m->first_rank + j,
                                 "member %d of the DP-Merge group of sample %" PRId32 " has a static CP degree %d "
                                 "(members have none: member k is the group's dp_rank + k)",
                                 j, m->sample, rp->cp);
        }
    }
    for (size_t r = 0; r < p->n_ranks; r++) {
        const lt_schedule *s = &p->ranks[r].sched;
        for (int pass = 0; pass < 2; pass++) {
            const lt_unit *units = pass && s->asym ? s->bunits : s->units;
            const lt_slice *sl = pass && s->asym ? s->bslices : s->slices;
            size_t nu = pass && s->asym ? s->n_bunits : s->n_units;
            for (size_t u = 0; u < nu; u++) {
                if (units[u].cp <= 1) continue;
                for (uint32_t i = 1; i < units[u].n_slices; i++)
                    if (sl[units[u].first_slice + i].sample != sl[units[u].first_slice].sample)
                        return plan_fail(err, p, (long)r,
                                         "%s %zu of cp %u holds slices of samples %" PRId32 " and %" PRId32
                                         " (a DP-Merge unit holds its merged sample only)",
                                         pass && s->asym ? "backward unit" : "unit", u, units[u].cp,
                                         sl[units[u].first_slice].sample, sl[units[u].first_slice + i].sample);
            }
        }
    }
    for (size_t k = 0; k < p->n_merges; k++) {
        const lt_dp_merge *m = &p->merges[k];
        const lt_schedule *ref = &p->ranks[m->first_rank].sched;
        for (int j = 1; j < m->cp; j++) {
            const lt_schedule *s = &p->ranks[m->first_rank + j].sched;
            for (int g = 0; g < p->pp; g++) {
                size_t a = 0, b = 0, nth = 0;
                for (;;) {
                    while (a < ref->stage[g].n && merged_sample_of(ref, &ref->stage[g].ops[a]) != (uint32_t)m->sample)
                        a++;
                    while (b < s->stage[g].n && merged_sample_of(s, &s->stage[g].ops[b]) != (uint32_t)m->sample) b++;
                    bool ea = a >= ref->stage[g].n, eb = b >= s->stage[g].n;
                    if (ea && eb) break;
                    char x[64] = "nothing", y[64] = "nothing";
                    if (!ea) lt_op_name(&ref->stage[g].ops[a], x, sizeof x);
                    if (!eb) lt_op_name(&s->stage[g].ops[b], y, sizeof y);
                    if (ea || eb || !same_merged_op(ref, &ref->stage[g].ops[a], s, &s->stage[g].ops[b]))
                        return plan_fail(err, p, -1,
                                         "DP-Merge group of sample %" PRId32 " (pipelines %d..%d): on stage %d, merged "
                                         "op %zu is %s (op %zu) on pipeline %d but %s (op %zu) on pipeline %d (members "
                                         "must run the same units in the same order)",
                                         m->sample, m->first_rank, m->first_rank + m->cp - 1, g, nth, x, a,
                                         m->first_rank, y, b, m->first_rank + j);
                    a++;
                    b++;
                    nth++;
                }
            }
        }
    }
    return LT_OK;
}

/* Dependencies across a group's members (issue 16 point 6): the members' merged ops are
 * rendezvous of one joint graph (lt_plan_simulate_group) that must have no cycle, under the
 * unit-time model like each pipeline alone (5). */
static lt_status check_group_deadlocks(const lt_step_plan *p, lt_error *err) {
    lt_status st = LT_OK;
    for (size_t g = 0; g < p->n_merges && st == LT_OK; g++) {
        size_t cp = (size_t)p->merges[g].cp;
        lt_sim *sims = lt_calloc_check(cp, sizeof *sims);
        lt_sim_costs *costs = lt_malloc_check(cp * sizeof *costs);
        for (size_t j = 0; j < cp; j++) costs[j] = lt_sim_unit_costs();
        if ((st = lt_plan_simulate_group(p, g, sims, costs, err)) != LT_OK && err) {
            err->status = LT_ERR_INPUT;
            err->where[0] = '\0';
            st = LT_ERR_INPUT;
        }
        for (size_t j = 0; j < cp; j++) lt_sim_free(&sims[j]);
        free(sims);
        free(costs);
    }
    return st;
}

/* 7, DP-Merge: a merged op is one collective of its group, so its predicted start is the
 * same on every member, within LOCKSTEP_S (the stored times are integer nanoseconds). */
#define LOCKSTEP_S 1e-9
static lt_status check_group_times(const lt_step_plan *p, lt_error *err) {
    for (size_t g = 0; g < p->n_merges; g++) {
        const lt_dp_merge *m = &p->merges[g];
        uint32_t **rdv = lt_calloc_check((size_t)m->cp, sizeof *rdv);
        size_t n_rdv = 0;
        lt_status st = lt_plan_group_rendezvous(p, g, rdv, &n_rdv, err);
        double *first = lt_malloc_check((n_rdv ? n_rdv : 1) * sizeof *first);
        for (int j = 0; j < m->cp && st == LT_OK; j++) {
            const lt_rank_plan *rp = &p->ranks[m->first_rank + j];
            size_t id = 0;
            for (int q = 0; q < rp->sched.stages && st == LT_OK; q++)
                for (size_t i = 0; i < rp->sched.stage[q].n && st == LT_OK; i++, id++) {
                    uint32_t k = rdv[j][id];
                    if (k == LT_SIM_SOLO) continue;
                    if (j == 0) {
                        first[k] = rp->ops[id].start_s;
                        continue;
                    }
                    double a = first[k], b = rp->ops[id].start_s;
                    if (!(fabs(a - b) <= LOCKSTEP_S * (1 + 1e-6))) {
                        char name[64];
                        lt_op_name(&rp->sched.stage[q].ops[i], name, sizeof name);
                        st = plan_fail(err, p, -1,
                                       "DP-Merge group of sample %" PRId32 " (pipelines %d..%d): on stage %d, merged "
                                       "op %s (op %zu) starts at %.9f ms on pipeline %d but at %.9f ms on pipeline %d "
                                       "(a merged op is one collective: it starts at once on every member)",
                                       m->sample, m->first_rank, m->first_rank + m->cp - 1, q, name, i, a * 1e3,
                                       m->first_rank, b * 1e3, m->first_rank + j);
                    }
                }
        }
        for (int j = 0; j < m->cp; j++) free(rdv[j]);
        free(rdv);
        free(first);
        if (st != LT_OK) return st;
    }
    return LT_OK;
}

/* ------------------------------------------------------------------ the checks */

lt_status lt_plan_validate(const lt_step_plan *p, double mem_cap, lt_error *err) {
    lt_status st = check_shape(p, err);
    if (st == LT_OK) st = check_loss(p, err);
    for (size_t r = 0; r < p->n_ranks && st == LT_OK; r++) st = check_passes(p, r, err);
    if (st == LT_OK) st = check_coverage(p, err);
    if (st == LT_OK) st = check_merge_agreement(p, err);
    for (size_t r = 0; r < p->n_ranks && st == LT_OK; r++)
        if ((st = lt_schedule_check(&p->ranks[r].sched, err)) != LT_OK) st = plan_wrap(err, p, r, st);
    if (st == LT_OK) {
        lt_sim sim = {0};
        lt_sim_costs costs = lt_sim_unit_costs();
        for (size_t r = 0; r < p->n_ranks && st == LT_OK; r++) {
            if ((st = lt_sim_run(&sim, &p->ranks[r].sched, &costs, err)) != LT_OK) st = plan_wrap(err, p, r, st);
            else st = check_recompute(p, r, lt_sim_deps(&sim), err);
        }
        lt_sim_free(&sim);
    }
    if (st == LT_OK) st = check_group_deadlocks(p, err);
    if (st == LT_OK) st = check_memory(p, mem_cap, err);
    if (st == LT_OK) st = check_predictions(p, err);
    if (st == LT_OK) st = check_group_times(p, err);
    return st;
}

lt_status lt_store_validate(lt_store *st, void (*progress)(void *ctx, size_t done, size_t total), void *ctx,
                            size_t *checked, lt_error *err) {
    if (checked) *checked = 0;
    lt_run_info run;
    lt_status s = lt_store_run_info(st, &run, err);
    if (s != LT_OK) return s;
    double mem_cap = run.mem_cap;
    lt_run_info_free(&run);
    uint64_t *steps = NULL;
    size_t n = 0;
    if ((s = lt_store_steps(st, &steps, &n, err)) != LT_OK) return s;
    lt_step_plan plan;
    lt_step_plan_init(&plan);
    for (size_t i = 0; i < n && s == LT_OK; i++) {
        s = lt_store_check_rows(st, steps[i], err);
        if (s == LT_OK) s = lt_store_get_step(st, steps[i], &plan, NULL, err);
        if (s == LT_OK) s = lt_plan_validate(&plan, mem_cap, err);
        if (s == LT_OK && checked) *checked = i + 1;
        if (s == LT_OK && progress && ((i + 1) % 100 == 0 || i + 1 == n)) progress(ctx, i + 1, n);
    }
    lt_step_plan_free(&plan);
    free(steps);
    return s;
}

/* ------------------------------------------------------------------ printing */

/* x within [0, span] (NaN: 0), for drawing. */
static double clamp_ms(double x, double span) {
    if (!(x >= 0)) return 0;
    return x > span ? span : x;
}

/* The DP-Merge groups, one line each: "sample 17 (idx 3, 1048576 tokens): DP-Merge over DP
 * ranks 0-3, cp=4" (SlimPack 4.1.1); the DP ranks are those of its pipelines. Groups a
 * damaged plan holds outside the step are printed as such. */
static void print_merges(FILE *f, const lt_step_plan *p, const lt_sample *samples) {
    if (p->n_merges == 0 || !p->merges) return;
    fprintf(f, "\nDP-Merge groups:\n");
    for (size_t k = 0; k < p->n_merges; k++) {
        const lt_dp_merge *m = &p->merges[k];
        bool sample_ok = m->sample >= 0 && (size_t)m->sample < p->n_samples;
        if (sample_ok && samples)
            fprintf(f, "  sample %" PRIu64 " (idx %" PRId32 ", %" PRId64 " tokens)", samples[m->sample].id, m->sample,
                    p->lengths[m->sample]);
        else if (sample_ok)
            fprintf(f, "  sample idx %" PRId32 " (%" PRId64 " tokens)", m->sample, p->lengths[m->sample]);
        else
            fprintf(f, "  sample idx %" PRId32 " (not in the step)", m->sample);
        if (m->first_rank >= 0 && m->cp >= 1 && (size_t)m->first_rank < p->n_ranks &&
            (size_t)m->cp <= p->n_ranks - (size_t)m->first_rank) {
            const lt_rank_plan *a = &p->ranks[m->first_rank], *b = &p->ranks[m->first_rank + m->cp - 1];
            /* in 64 bits: a damaged plan's dp_rank and cp may be anywhere in int's range */
            fprintf(f, ": DP-Merge over DP ranks %d-%" PRId64 ", cp=%d (pipelines %d-%" PRId64 ")\n", a->dp_rank,
                    (int64_t)b->dp_rank + b->cp - 1, m->cp, m->first_rank, (int64_t)m->first_rank + m->cp - 1);
        } else {
            fprintf(f, ": DP-Merge over pipelines %d .. %ld, cp=%d (not within the step's %zu pipelines)\n",
                    m->first_rank, (long)m->first_rank + m->cp - 1, m->cp, p->n_ranks);
        }
    }
}

/* A pipeline's units[0..n) over the slice table sl, one line each: "  unit 0 (48 tokens):
 * 0[0:48)" with " cp=4" for a DP-Merge unit. */
static void print_units(FILE *f, const char *word, const lt_unit *units, size_t n, const lt_slice *sl) {
    for (size_t u = 0; u < n; u++) {
        int64_t tokens = 0;
        for (uint32_t k = 0; k < units[u].n_slices; k++) { /* a damaged plan's bounds may overflow: INT64_MAX */
            int64_t len;
            if (__builtin_sub_overflow(sl[units[u].first_slice + k].end, sl[units[u].first_slice + k].begin, &len) ||
                __builtin_add_overflow(tokens, len, &tokens))
                tokens = INT64_MAX;
        }
        fprintf(f, "  %s %zu (%" PRId64 " tokens", word, u, tokens);
        if (units[u].cp > 1) fprintf(f, ", cp=%u", units[u].cp);
        fprintf(f, "):");
        for (uint32_t k = 0; k < units[u].n_slices; k++) {
            const lt_slice *x = &sl[units[u].first_slice + k];
            fprintf(f, " %" PRId32 "[%" PRId64 ":%" PRId64 ")", x->sample, x->begin, x->end);
        }
        fputc('\n', f);
    }
}

void lt_plan_print(FILE *f, const lt_step_plan *p, const lt_sample *samples, int width) {
    int64_t tokens = 0; /* INT64_MAX when a damaged plan's lengths sum past it */
    for (size_t i = 0; i < p->n_samples; i++)
        if (__builtin_add_overflow(tokens, p->lengths[i], &tokens)) tokens = INT64_MAX;
    fprintf(f, "step %" PRIu64 ": %s, predicted %.3f ms, bubble %.2f%%, peak memory %.2f GiB, %zu samples, %" PRId64
               " tokens, %zu pipelines x %d stages\n",
            p->step, lt_strategy_name(p->strategy), p->time_s * 1e3, 100.0 * p->bubble_ratio, p->peak_mem / GIB,
            p->n_samples, tokens, p->n_ranks, p->pp);
    fprintf(f, "params: %s  solver: %.*s", p->params[0] ? p->params : "-", (int)sizeof p->solver_status,
            p->solver_status[0] ? p->solver_status : "-");
    if (strncmp(p->solver_status, "timeout", sizeof p->solver_status) == 0 ||
        strncmp(p->solver_status, "infeasible", sizeof p->solver_status) == 0)
        fprintf(f, " (a MILP fell back to its heuristic)");
    if (p->solve_ms > 0) fprintf(f, "  solve: %.3f ms", p->solve_ms);
    if ((unsigned)p->runner_up < LT_STRATEGY_COUNT)
        fprintf(f, "  runner-up: %s (%.3f ms)", lt_strategy_name(p->runner_up), p->runner_up_time_s * 1e3);
    fprintf(f, "\n\nsamples:\n%6s %14s %10s %9s %8s  %s\n", "idx", "sample_id", "length", "pipeline", "dp_rank",
            "source");
    for (size_t i = 0; i < p->n_samples; i++) {
        int r = p->sample_rank[i];
        int dp = r >= 0 && (size_t)r < p->n_ranks ? p->ranks[r].dp_rank : -1;
        char src[96] = "-", id[24] = "-";
        if (samples) {
            lt_sample_source_format(&samples[i], src, sizeof src);
            snprintf(id, sizeof id, "%" PRIu64, samples[i].id);
        }
        fprintf(f, "%6zu %14s %10" PRId64 " %9d %8d  %s\n", i, id, p->lengths[i], r, dp, src);
    }
    print_merges(f, p, samples);
    lt_sim sim;
    for (size_t r = 0; r < p->n_ranks; r++) {
        const lt_rank_plan *rp = &p->ranks[r];
        const lt_schedule *s = &rp->sched;
        if (s->asym)
            fprintf(f, "\npipeline %zu (dp_rank %d, cp %d): predicted %.3f ms, %zu forward units, %zu backward units, "
                       "%zu ops\n",
                    r, rp->dp_rank, rp->cp, rp->time_s * 1e3, s->n_units, s->n_bunits, lt_schedule_n_ops(s));
        else
            fprintf(f, "\npipeline %zu (dp_rank %d, cp %d): predicted %.3f ms, %zu units, %zu ops\n", r, rp->dp_rank,
                    rp->cp, rp->time_s * 1e3, s->n_units, lt_schedule_n_ops(s));
        /* an asymmetric schedule's forward units ("F unit"), then its backward ones ("B unit",
         * the units its B ops name) */
        print_units(f, s->asym ? "F unit" : "unit", s->units, s->n_units, s->slices);
        if (s->asym) print_units(f, "B unit", s->bunits, s->n_bunits, s->bslices);
        for (int g = 0; g < s->stages; g++)
            fprintf(f, "  stage %d: busy %.3f ms, idle %.3f ms, peak memory %.2f GiB\n", g, rp->stage_busy_s[g] * 1e3,
                    (p->time_s - rp->stage_busy_s[g]) * 1e3, rp->stage_peak_mem[g] / GIB);
        /* The timeline draws the stored predictions: a lt_sim holding only the public
         * result fields lt_sim_print_timeline reads, in ms, over the step's time so the
         * pipelines' rows line up. A plan read from a damaged file may hold any times
         * (show prints plans that validate would refuse): they are drawn clamped into
         * [0, the step's time], which is where a valid plan's are anyway. */
        size_t n_ops = lt_schedule_n_ops(s);
        double span = p->time_s * 1e3;
        if (!(span >= 0) || !isfinite(span)) span = 0;
        memset(&sim, 0, sizeof sim);
        sim.stages = s->stages;
        sim.n_ops = n_ops;
        sim.step_time = span;
        sim.first_op = lt_malloc_check(((size_t)s->stages + 1) * sizeof *sim.first_op);
        sim.start = lt_malloc_check((n_ops ? n_ops : 1) * sizeof *sim.start);
        sim.finish = lt_malloc_check((n_ops ? n_ops : 1) * sizeof *sim.finish);
        sim.busy = lt_malloc_check((size_t)s->stages * sizeof *sim.busy);
        sim.peak_mem = rp->stage_peak_mem;
        size_t id = 0;
        for (int g = 0; g < s->stages; g++) {
            sim.first_op[g] = id;
            sim.busy[g] = rp->stage_busy_s[g] * 1e3;
            for (size_t i = 0; i < s->stage[g].n; i++, id++) {
                sim.start[id] = clamp_ms(rp->ops[id].start_s * 1e3, span);
                sim.finish[id] = clamp_ms(rp->ops[id].finish_s * 1e3, span);
            }
        }
        sim.first_op[s->stages] = id;
        fprintf(f, "  timeline (ms):\n");
        lt_sim_print_timeline(f, &sim, s, width);
        free(sim.first_op);
        free(sim.start);
        free(sim.finish);
        free(sim.busy);
    }
}
