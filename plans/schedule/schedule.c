/*
 * plans/schedule/schedule.c — the schedule tables (plans/schedule/schedule.h): building, checking (the rules
 * of the backward partition of asymmetric schedules included, SlimPack 4.1.2), the
 * overlap of the backward partition with the forward one, naming.
 */
#include "plans/schedule/schedule.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h" /* lt_fail, lt_realloc_check, lt_calloc_check */

lt_status lt_schedule_init(lt_schedule *s, int stages, int layers, lt_error *err) {
    memset(s, 0, sizeof *s);
    if (stages < 1) return lt_fail(err, LT_ERR_USAGE, "schedule", "%d pipeline stages: need at least 1", stages);
    if (layers < stages)
        return lt_fail(err, LT_ERR_USAGE, "schedule", "%d layers over %d pipeline stages: each stage needs a layer",
                       layers, stages);
    s->stages = stages;
    s->layers = layers;
    s->stage = lt_calloc_check((size_t)stages, sizeof *s->stage);
    return LT_OK;
}

void lt_schedule_free(lt_schedule *s) {
    if (!s) return;
    if (s->stage)
        for (int i = 0; i < s->stages; i++) free(s->stage[i].ops);
    free(s->stage);
    free(s->slices);
    free(s->units);
    free(s->bslices);
    free(s->bunits);
    memset(s, 0, sizeof *s);
}

void lt_schedule_clear(lt_schedule *s) {
    s->n_slices = 0;
    s->n_units = 0;
    s->n_bslices = 0;
    s->n_bunits = 0;
    s->asym = false;
    for (int i = 0; i < s->stages; i++) s->stage[i].n = 0;
}

/* Grow *v (elements of `size` bytes, capacity *cap) to hold at least `need`. */
static void grow(void **v, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    *v = lt_realloc_check(*v, c * size);
    *cap = c;
}

uint32_t lt_schedule_add_slice(lt_schedule *s, int32_t sample, int64_t begin, int64_t end) {
    grow((void **)&s->slices, &s->cap_slices, s->n_slices + 1, sizeof *s->slices);
    s->slices[s->n_slices] = (lt_slice){sample, begin, end};
    return (uint32_t)s->n_slices++;
}

uint32_t lt_schedule_add_unit(lt_schedule *s, uint32_t first_slice, uint32_t n_slices) {
    grow((void **)&s->units, &s->cap_units, s->n_units + 1, sizeof *s->units);
    s->units[s->n_units] = (lt_unit){.first_slice = first_slice, .n_slices = n_slices};
    return (uint32_t)s->n_units++;
}

uint32_t lt_schedule_add_bslice(lt_schedule *s, int32_t sample, int64_t begin, int64_t end) {
    grow((void **)&s->bslices, &s->cap_bslices, s->n_bslices + 1, sizeof *s->bslices);
    s->bslices[s->n_bslices] = (lt_slice){sample, begin, end};
    s->asym = true;
    return (uint32_t)s->n_bslices++;
}

uint32_t lt_schedule_add_bunit(lt_schedule *s, uint32_t first_bslice, uint32_t n_bslices) {
    grow((void **)&s->bunits, &s->cap_bunits, s->n_bunits + 1, sizeof *s->bunits);
    s->bunits[s->n_bunits] = (lt_unit){.first_slice = first_bslice, .n_slices = n_bslices};
    s->asym = true;
    return (uint32_t)s->n_bunits++;
}

const lt_unit *lt_schedule_op_unit(const lt_schedule *s, const lt_op *op) {
    return s->asym && op->kind == LT_OP_B ? &s->bunits[op->unit] : &s->units[op->unit];
}

const lt_slice *lt_schedule_op_slices(const lt_schedule *s, const lt_op *op, size_t *n) {
    const lt_unit *u = lt_schedule_op_unit(s, op);
    *n = u->n_slices;
    return (s->asym && op->kind == LT_OP_B ? s->bslices : s->slices) + u->first_slice;
}

int64_t lt_schedule_op_tokens(const lt_schedule *s, const lt_op *op) {
    size_t n;
    const lt_slice *sl = lt_schedule_op_slices(s, op, &n);
    int64_t t = 0;
    for (size_t i = 0; i < n; i++) t += sl[i].end - sl[i].begin;
    return t;
}

void lt_schedule_add_op(lt_schedule *s, int stage, lt_op op) {
    lt_stage_ops *st = &s->stage[stage];
    grow((void **)&st->ops, &st->cap, st->n + 1, sizeof *st->ops);
    st->ops[st->n++] = op;
}

void lt_schedule_add_stage_op(lt_schedule *s, int stage, lt_op_kind kind, uint32_t unit, uint16_t recompute_layers) {
    lt_op op = {.kind = (uint8_t)kind, .part = LT_PART_ALL, .recompute_layers = recompute_layers, .unit = unit};
    lt_schedule_stage_layers(s->layers, s->stages, stage, &op.layer_begin, &op.layer_end);
    lt_schedule_add_op(s, stage, op);
}

void lt_schedule_stage_layers(int layers, int stages, int s, uint32_t *begin, uint32_t *end) {
    int base = layers / stages, extra = layers % stages;
    int b = s * base + (s < extra ? s : extra);
    *begin = (uint32_t)b;
    *end = (uint32_t)(b + base + (s < extra ? 1 : 0));
}

void lt_op_positions(const lt_op *op, uint32_t *pb, uint32_t *pe) {
    if (op->part == LT_PART_ALL) {
        *pb = 3 * op->layer_begin;
        *pe = 3 * op->layer_end;
    } else {
        *pb = 3 * op->layer_begin + (uint32_t)op->part - 1;
        *pe = *pb + 1;
    }
}

int64_t lt_schedule_unit_tokens(const lt_schedule *s, uint32_t u) {
    const lt_unit *un = &s->units[u];
    int64_t t = 0;
    for (uint32_t i = 0; i < un->n_slices; i++) {
        const lt_slice *sl = &s->slices[un->first_slice + i];
        t += sl->end - sl->begin;
    }
    return t;
}

size_t lt_schedule_n_ops(const lt_schedule *s) {
    size_t n = 0;
    for (int i = 0; i < s->stages; i++) n += s->stage[i].n;
    return n;
}

bool lt_schedule_has_parts(const lt_schedule *s) {
    for (int i = 0; i < s->stages; i++)
        for (size_t k = 0; k < s->stage[i].n; k++)
            if (s->stage[i].ops[k].part != LT_PART_ALL) return true;
    return false;
}

/* A slice's (sample, index) for sorting slices by sample, then table order. */
typedef struct slice_key {
    int32_t sample;
    uint32_t index;
} slice_key;

static int cmp_slice_key(const void *a, const void *b) {
    const slice_key *x = a, *y = b;
    if (x->sample != y->sample) return (x->sample > y->sample) - (x->sample < y->sample);
    return (x->index > y->index) - (x->index < y->index);
}

/* The indices of a slice table sorted by sample, then table order (at least one entry
 * allocated). */
static uint32_t *table_by_sample(const lt_slice *sl, size_t n) {
    slice_key *v = lt_malloc_check((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = (slice_key){sl[i].sample, (uint32_t)i};
    qsort(v, n, sizeof *v, cmp_slice_key);
    uint32_t *order = lt_malloc_check((n ? n : 1) * sizeof *order);
    for (size_t i = 0; i < n; i++) order[i] = v[i].index;
    free(v);
    return order;
}

uint32_t *lt_schedule_slices_by_sample(const lt_schedule *s) { return table_by_sample(s->slices, s->n_slices); }

uint32_t *lt_schedule_bslices_by_sample(const lt_schedule *s) { return table_by_sample(s->bslices, s->n_bslices); }

/* The unit holding each entry of a slice table (the first when several do), or UINT32_MAX. */
static uint32_t *holder_of(const lt_unit *units, size_t n_units, size_t n_slices) {
    uint32_t *h = lt_malloc_check((n_slices ? n_slices : 1) * sizeof *h);
    for (size_t j = 0; j < n_slices; j++) h[j] = UINT32_MAX;
    for (size_t u = n_units; u-- > 0;) /* backwards: the first unit wins */
        for (size_t j = units[u].first_slice; j < (size_t)units[u].first_slice + units[u].n_slices && j < n_slices; j++)
            h[j] = (uint32_t)u;
    return h;
}

/* One (bunit, forward unit, tokens) meeting of the overlap sweep. */
typedef struct meet {
    uint32_t bunit, unit;
    int64_t tokens;
} meet;

void lt_schedule_bunit_overlaps(const lt_schedule *s, uint32_t **off_out, uint32_t **units_out,
                                int64_t **tokens_out) {
    size_t ns = s->n_slices, nb = s->n_bslices, nv = s->n_bunits;
    uint32_t *fo = table_by_sample(s->slices, ns), *bo = table_by_sample(s->bslices, nb);
    uint32_t *fu = holder_of(s->units, s->n_units, ns), *bu = holder_of(s->bunits, nv, nb);
    /* Each sample's slices and bslices in token order, merged: every overlapping pair of a
     * slice and a bslice (at most ns + nb of them) is one meeting. */
    meet *m = lt_malloc_check((ns + nb + 1) * sizeof *m);
    size_t nm = 0, i = 0, k = 0;
    while (i < ns && k < nb) {
        const lt_slice *a = &s->slices[fo[i]], *b = &s->bslices[bo[k]];
        if (a->sample != b->sample) {
            if (a->sample < b->sample) i++;
            else k++;
            continue;
        }
        int64_t lo = a->begin > b->begin ? a->begin : b->begin, hi = a->end < b->end ? a->end : b->end;
        if (hi > lo && fu[fo[i]] != UINT32_MAX && bu[bo[k]] != UINT32_MAX)
            m[nm++] = (meet){bu[bo[k]], fu[fo[i]], hi - lo};
        if (a->end <= b->end) i++;
        else k++;
    }
    /* counting sort by bunit, then each bunit's units merged (first meeting first) */
    uint32_t *off = lt_calloc_check(nv + 1, sizeof *off);
    for (size_t q = 0; q < nm; q++) off[m[q].bunit + 1]++;
    for (size_t v = 0; v < nv; v++) off[v + 1] += off[v];
    uint32_t *units = lt_malloc_check((nm ? nm : 1) * sizeof *units);
    int64_t *tokens = lt_malloc_check((nm ? nm : 1) * sizeof *tokens);
    uint32_t *fill = lt_malloc_check((nv + 1) * sizeof *fill);
    memcpy(fill, off, (nv + 1) * sizeof *fill);
    for (size_t q = 0; q < nm; q++) {
        units[fill[m[q].bunit]] = m[q].unit;
        tokens[fill[m[q].bunit]++] = m[q].tokens;
    }
    uint32_t *seen = lt_malloc_check((s->n_units ? s->n_units : 1) * sizeof *seen); /* unit -> its entry */
    uint32_t *stamp = lt_malloc_check((s->n_units ? s->n_units : 1) * sizeof *stamp);
    for (size_t u = 0; u < s->n_units; u++) stamp[u] = UINT32_MAX;
    uint32_t w = 0;
    for (size_t v = 0; v < nv; v++) {
        uint32_t lo = off[v], hi = off[v + 1];
        off[v] = w;
        for (uint32_t q = lo; q < hi; q++) {
            uint32_t u = units[q];
            if (stamp[u] == v) {
                tokens[seen[u]] += tokens[q];
                continue;
            }
            stamp[u] = (uint32_t)v;
            seen[u] = w;
            units[w] = u;
            tokens[w++] = tokens[q];
        }
    }
    off[nv] = w;
    free(stamp);
    free(seen);
    free(fill);
    free(m);
    free(bu);
    free(fu);
    free(bo);
    free(fo);
    *off_out = off;
    *units_out = units;
    *tokens_out = tokens;
}

/* The cp of a unit with 0 read as 1 (both mean no DP-Merge). */
static unsigned unit_cp(const lt_unit *u) { return u->cp > 1 ? u->cp : 1; }

/* A slice table's entries non-empty and, per sample, in token order without overlapping
 * ("slice" or "bslice" in messages). */
static lt_status check_table(const lt_slice *v, size_t n, const char *what, lt_error *err) {
    for (size_t i = 0; i < n; i++) {
        const lt_slice *sl = &v[i];
        if (sl->sample < 0 || sl->begin < 0 || sl->end <= sl->begin)
            return lt_fail(err, LT_ERR_INPUT, "schedule",
                           "%s %zu (sample %" PRId32 ", tokens [%" PRId64 ", %" PRId64 ")) is empty or negative", what,
                           i, sl->sample, sl->begin, sl->end);
    }
    if (n < 2) return LT_OK;
    uint32_t *order = table_by_sample(v, n);
    lt_status st = LT_OK;
    for (size_t i = 1; i < n && st == LT_OK; i++) {
        const lt_slice *p = &v[order[i - 1]], *q = &v[order[i]];
        if (q->sample == p->sample && q->begin < p->end)
            st = lt_fail(err, LT_ERR_INPUT, "schedule", "%ss %u and %u of sample %" PRId32
                                                        " overlap or are out of token order",
                         what, order[i - 1], order[i], p->sample);
    }
    free(order);
    return st;
}

/* A unit table's runs: non-empty, inside the n_slices entries of their slice table,
 * reserved 0 ("unit" / "bunit", "slices" / "bslices" in messages). */
static lt_status check_units(const lt_unit *units, size_t n, size_t n_slices, const char *what, const char *of,
                             lt_error *err) {
    for (size_t u = 0; u < n; u++) {
        const lt_unit *un = &units[u];
        if (un->n_slices == 0 || (size_t)un->first_slice + un->n_slices > n_slices)
            return lt_fail(err, LT_ERR_INPUT, "schedule", "%s %zu: %s [%u, %zu) not in the %zu %s", what, u, of,
                           un->first_slice, (size_t)un->first_slice + un->n_slices, n_slices, of);
        if (un->reserved != 0)
            return lt_fail(err, LT_ERR_INPUT, "schedule", "%s %zu: reserved field is %u (must be 0)", what, u,
                           un->reserved);
    }
    return LT_OK;
}

/* The next maximal token run [*b, *e) of a sample in a table sorted by (sample, token)
 * (order[*i..]), adjacent entries merged; false when the sample has no more. */
static bool next_run(const lt_slice *v, const uint32_t *order, size_t n, size_t *i, int32_t sample, int64_t *b,
                     int64_t *e) {
    if (*i >= n || v[order[*i]].sample != sample) return false;
    *b = v[order[*i]].begin;
    *e = v[order[*i]].end;
    for (++*i; *i < n && v[order[*i]].sample == sample && v[order[*i]].begin == *e; ++*i) *e = v[order[*i]].end;
    return true;
}

/* SlimPack 4.1.2: per sample, the bslices cover exactly the tokens of the slices (both
 * tables already in token order per sample). The first differing token run is named. */
static lt_status check_coverage(const lt_schedule *s, lt_error *err) {
    uint32_t *fo = table_by_sample(s->slices, s->n_slices), *bo = table_by_sample(s->bslices, s->n_bslices);
    size_t i = 0, k = 0;
    lt_status st = LT_OK;
    while (st == LT_OK && (i < s->n_slices || k < s->n_bslices)) {
        int32_t sample = i < s->n_slices ? s->slices[fo[i]].sample : INT32_MAX;
        if (k < s->n_bslices && s->bslices[bo[k]].sample < sample) sample = s->bslices[bo[k]].sample;
        for (;;) {
            int64_t fb = 0, fe = 0, bb = 0, be = 0;
            bool hf = next_run(s->slices, fo, s->n_slices, &i, sample, &fb, &fe);
            bool hb = next_run(s->bslices, bo, s->n_bslices, &k, sample, &bb, &be);
            if (!hf && !hb) break;
            if (hf && hb && fb == bb && fe == be) continue;
            char fw[64] = "no tokens", bw[64] = "no tokens";
            if (hf) snprintf(fw, sizeof fw, "[%" PRId64 ", %" PRId64 ")", fb, fe);
            if (hb) snprintf(bw, sizeof bw, "[%" PRId64 ", %" PRId64 ")", bb, be);
            st = lt_fail(err, LT_ERR_INPUT, "schedule",
                         "sample %" PRId32 ": the bslices cover %s where the slices cover %s (the backward "
                         "partition must cover exactly the forward one's tokens)",
                         sample, bw, fw);
            break;
        }
    }
    free(bo);
    free(fo);
    return st;
}

/* The rules of the backward partition (plans/schedule/schedule.h, "Asymmetric schedules"). */
static lt_status check_backward(const lt_schedule *s, lt_error *err) {
    lt_status st;
    if ((st = check_table(s->bslices, s->n_bslices, "bslice", err))) return st;
    if ((st = check_coverage(s, err))) return st;
    if ((st = check_units(s->bunits, s->n_bunits, s->n_bslices, "bunit", "bslices", err))) return st;
    uint32_t *holder = lt_malloc_check((s->n_bslices ? s->n_bslices : 1) * sizeof *holder);
    for (size_t j = 0; j < s->n_bslices; j++) holder[j] = UINT32_MAX;
    for (size_t v = 0; v < s->n_bunits && st == LT_OK; v++)
        for (uint32_t j = s->bunits[v].first_slice; j < s->bunits[v].first_slice + s->bunits[v].n_slices; j++) {
            if (holder[j] != UINT32_MAX) {
                st = lt_fail(err, LT_ERR_INPUT, "schedule", "bslice %u is in bunits %u and %zu", j, holder[j], v);
                break;
            }
            holder[j] = (uint32_t)v;
        }
    free(holder);
    if (st) return st;
    /* SlimPack 4.1.1: a DP-Merge unit's tokens are spread over its group's pipelines, so a
     * bunit regroups only tokens of units with its own cp */
    uint32_t *off, *units;
    int64_t *tokens;
    lt_schedule_bunit_overlaps(s, &off, &units, &tokens);
    for (size_t v = 0; v < s->n_bunits && st == LT_OK; v++)
        for (uint32_t q = off[v]; q < off[v + 1]; q++) {
            const lt_unit *u = &s->units[units[q]];
            if (unit_cp(u) == unit_cp(&s->bunits[v])) continue;
            st = lt_fail(err, LT_ERR_INPUT, "schedule",
                         "bunit %zu has cp %u but holds tokens of unit %u, whose cp is %u (a DP-Merge unit's "
                         "tokens regroup only with tokens of its own group)",
                         v, unit_cp(&s->bunits[v]), units[q], unit_cp(u));
            break;
        }
    free(tokens);
    free(units);
    free(off);
    return st;
}

lt_status lt_schedule_check(const lt_schedule *s, lt_error *err) {
    lt_status st;
    if ((st = check_table(s->slices, s->n_slices, "slice", err))) return st;
    if ((st = check_units(s->units, s->n_units, s->n_slices, "unit", "slices", err))) return st;
    if (!s->asym && (s->n_bslices || s->n_bunits))
        return lt_fail(err, LT_ERR_INPUT, "schedule",
                       "%zu bslices and %zu bunits in a symmetric schedule (asym is false)", s->n_bslices,
                       s->n_bunits);
    if (s->asym && (st = check_backward(s, err))) return st;
    for (int stg = 0; stg < s->stages; stg++) {
        for (size_t i = 0; i < s->stage[stg].n; i++) {
            const lt_op *op = &s->stage[stg].ops[i];
            char name[64];
            if (op->kind > LT_OP_B || op->part > LT_PART_POST)
                return lt_fail(err, LT_ERR_INPUT, "schedule", "stage %d op %zu: unknown kind %u or part %u", stg, i,
                               op->kind, op->part);
            if (s->asym && op->kind == LT_OP_FK)
                return lt_fail(err, LT_ERR_INPUT, "schedule",
                               "stage %d op %zu (%s): FK in an asymmetric schedule (its B ops run the backward "
                               "partition; use F)",
                               stg, i, lt_op_name(op, name, sizeof name));
            if (s->asym && op->kind == LT_OP_B) {
                if (op->unit >= s->n_bunits)
                    return lt_fail(err, LT_ERR_INPUT, "schedule", "stage %d op %zu: bunit %u of %zu", stg, i,
                                   op->unit, s->n_bunits);
            } else if (op->unit >= s->n_units) {
                return lt_fail(err, LT_ERR_INPUT, "schedule", "stage %d op %zu: unit %u of %zu", stg, i, op->unit,
                               s->n_units);
            }
            if (op->layer_begin >= op->layer_end || op->layer_end > (uint32_t)s->layers ||
                (op->part != LT_PART_ALL && op->layer_end != op->layer_begin + 1))
                return lt_fail(err, LT_ERR_INPUT, "schedule", "stage %d op %zu (%s): layers [%u, %u) of %d", stg, i,
                               lt_op_name(op, name, sizeof name), op->layer_begin, op->layer_end, s->layers);
            if (op->recompute_layers > op->layer_end - op->layer_begin)
                return lt_fail(err, LT_ERR_INPUT, "schedule", "stage %d op %zu (%s): recomputes %u of its %u layers",
                               stg, i, lt_op_name(op, name, sizeof name), op->recompute_layers,
                               op->layer_end - op->layer_begin);
        }
    }
    return LT_OK;
}

const char *lt_op_name(const lt_op *op, char *buf, size_t n) {
    static const char *const kinds[] = {"F", "FK", "B"};
    static const char *const parts[] = {"", "pre", "attn", "post"};
    const char *k = op->kind <= LT_OP_B ? kinds[op->kind] : "?";
    if (op->part == LT_PART_ALL || op->part > LT_PART_POST)
        snprintf(buf, n, "%s%u", k, op->unit);
    else
        snprintf(buf, n, "%s%u.%s@L%u", k, op->unit, parts[op->part], op->layer_begin);
    return buf;
}
