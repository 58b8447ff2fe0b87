/*
 * plans/schedule.c — the schedule tables (plans/schedule.h): building, checking, naming.
 */
#include "plans/schedule.h"

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
    memset(s, 0, sizeof *s);
}

void lt_schedule_clear(lt_schedule *s) {
    s->n_slices = 0;
    s->n_units = 0;
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
    s->units[s->n_units] = (lt_unit){first_slice, n_slices};
    return (uint32_t)s->n_units++;
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

uint32_t *lt_schedule_slices_by_sample(const lt_schedule *s) {
    slice_key *v = lt_malloc_check((s->n_slices ? s->n_slices : 1) * sizeof *v);
    for (size_t i = 0; i < s->n_slices; i++) v[i] = (slice_key){s->slices[i].sample, (uint32_t)i};
    qsort(v, s->n_slices, sizeof *v, cmp_slice_key);
    uint32_t *order = lt_malloc_check((s->n_slices ? s->n_slices : 1) * sizeof *order);
    for (size_t i = 0; i < s->n_slices; i++) order[i] = v[i].index;
    free(v);
    return order;
}

lt_status lt_schedule_check(const lt_schedule *s, lt_error *err) {
    for (size_t i = 0; i < s->n_slices; i++) {
        const lt_slice *sl = &s->slices[i];
        if (sl->sample < 0 || sl->begin < 0 || sl->end <= sl->begin)
            return lt_fail(err, LT_ERR_INPUT, "schedule",
                           "slice %zu (sample %" PRId32 ", tokens [%" PRId64 ", %" PRId64 ")) is empty or negative", i,
                           sl->sample, sl->begin, sl->end);
    }
    /* The slices of one sample, in table order, are in token order and do not overlap. */
    if (s->n_slices > 1) {
        uint32_t *order = lt_schedule_slices_by_sample(s);
        for (size_t i = 1; i < s->n_slices; i++) {
            const lt_slice *p = &s->slices[order[i - 1]], *q = &s->slices[order[i]];
            if (q->sample != p->sample || q->begin >= p->end) continue;
            lt_status st = lt_fail(err, LT_ERR_INPUT, "schedule",
                                   "slices %u and %u of sample %" PRId32 " overlap or are out of token order",
                                   order[i - 1], order[i], p->sample);
            free(order);
            return st;
        }
        free(order);
    }
    for (size_t u = 0; u < s->n_units; u++) {
        const lt_unit *un = &s->units[u];
        if (un->n_slices == 0 || (size_t)un->first_slice + un->n_slices > s->n_slices)
            return lt_fail(err, LT_ERR_INPUT, "schedule", "unit %zu: slices [%u, %u) not in the %zu slices", u,
                           un->first_slice, un->first_slice + un->n_slices, s->n_slices);
    }
    for (int st = 0; st < s->stages; st++) {
        for (size_t i = 0; i < s->stage[st].n; i++) {
            const lt_op *op = &s->stage[st].ops[i];
            char name[64];
            if (op->kind > LT_OP_B || op->part > LT_PART_POST)
                return lt_fail(err, LT_ERR_INPUT, "schedule", "stage %d op %zu: unknown kind %u or part %u", st, i,
                               op->kind, op->part);
            if (op->unit >= s->n_units)
                return lt_fail(err, LT_ERR_INPUT, "schedule", "stage %d op %zu: unit %u of %zu", st, i, op->unit,
                               s->n_units);
            if (op->layer_begin >= op->layer_end || op->layer_end > (uint32_t)s->layers ||
                (op->part != LT_PART_ALL && op->layer_end != op->layer_begin + 1))
                return lt_fail(err, LT_ERR_INPUT, "schedule", "stage %d op %zu (%s): layers [%u, %u) of %d", st, i,
                               lt_op_name(op, name, sizeof name), op->layer_begin, op->layer_end, s->layers);
            if (op->recompute_layers > op->layer_end - op->layer_begin)
                return lt_fail(err, LT_ERR_INPUT, "schedule", "stage %d op %zu (%s): recomputes %u of its %u layers",
                               st, i, lt_op_name(op, name, sizeof name), op->recompute_layers,
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
