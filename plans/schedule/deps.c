/*
 * plans/schedule/deps.c — the dependency graph of a schedule (plans/schedule/deps.h), the rules of
 * plans/schedule/schedule.h made explicit. The simulator (plans/schedule/sim.c) prices this graph; the
 * trainer executes it.
 *
 * One build:
 *   1. the op table: op pointers and stages, stage-major ids;
 *   2. the op index: op ids grouped by unit (a counting sort), and inside a unit sorted by
 *      (class, path range, id), class = forward family (F, FK) or B. A run of equal (unit,
 *      class, range) holds the instances of plans/schedule/schedule.h in op-id order. Ranges of one
 *      (unit, class) may not overlap unless equal, so inside a class the order by begin is
 *      also the order by end, and "the op of unit u ending at position p" is a binary search
 *      among the unit's few ops: no hash of ops, memory linear in ops. In an asymmetric
 *      schedule the B ops name bunits: the index keys are the forward units 0..U-1, then
 *      the bunits U..U+V-1 (op_key), so one index serves both partitions;
 *   3. the slice neighbours: for each unit, the other units holding the previous (next)
 *      slice of one of its samples, deduplicated (a hash of sample -> last slice seen); in
 *      an asymmetric schedule the same over the bslices for the bunits, and for each bunit
 *      the forward units holding its tokens (lt_schedule_bunit_overlaps: a sweep over the
 *      samples' token ranges, once per build, so a B finds its activations without a scan);
 *   4. the predecessor lists of every op (model path, activations, slices, stage order;
 *      SlimPack 4.3.1), then the successor lists as their transpose.
 */
#include "plans/schedule/deps.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h" /* lt_fail, lt_error_hint, lt_realloc_check */

#define NONE LT_DEP_NONE

enum { CLS_FWD = 0, CLS_BWD = 1 };

/* An op of the index: its sort key (class, begin, end) and id. */
typedef struct keyed_op {
    uint64_t key;
    uint32_t id;
    uint32_t unused;
} keyed_op;

typedef struct deps_priv {
    size_t cap_ops, cap_stages, cap_edges, cap_units, cap_slices, cap_hash;
    keyed_op *index; /* op ids sorted by (unit, class, begin, end, id) */
    uint32_t *succ_cursor;
    /* per unit */
    uint32_t *unit_off; /* [n_keys + 1] into index */
    uint32_t *prev_off, *next_off; /* [n_keys + 1] into prev_units / next_units */
    uint32_t *stamp;               /* [n_keys] */
    double *utok;                  /* [n_fwd] asymmetric: a forward unit's tokens */
    /* per slice (asymmetric schedules: the slices, then the bslices) */
    uint32_t *slice_unit, *slice_prev, *prev_units, *next_units;
    /* sample -> last slice seen (open addressing) */
    int32_t *hkey;
    uint32_t *hval;
    /* asymmetric schedules (SlimPack 4.1.2): the backward partition */
    bool asym;
    uint32_t n_fwd;             /* forward units: the index key of bunit v is n_fwd + v */
    size_t n_keys;              /* n_fwd + bunits */
    uint32_t *ov_off, *ov_unit; /* lt_schedule_bunit_overlaps of the build */
    int64_t *ov_tok;
    /* the graph being built (aliases of the lt_deps arrays) */
    const lt_op **op;
    uint32_t *stage, *inst, *act_of, *kv_end, *kv_of;
    lt_dep *pred;
} deps_priv;

/* ---- small helpers ---- */

static void *resize(void *p, size_t n, size_t size) {
    if (n && size > SIZE_MAX / n) lt_die("dependencies: %zu elements of %zu bytes overflow", n, size);
    return lt_realloc_check(p, n ? n * size : 1);
}
#define RESIZE(p, n) ((p) = resize((p), (n), sizeof *(p)))

/* Next capacity for a need of n (amortised growth). */
static size_t next_cap(size_t cap, size_t n) {
    size_t c = cap + cap / 2;
    return c > n ? c : n;
}

static uint64_t make_key(unsigned cls, uint32_t pb, uint32_t pe) {
    return ((uint64_t)cls << 62) | ((uint64_t)pb << 31) | pe;
}
static unsigned key_cls(uint64_t k) { return (unsigned)(k >> 62); }
static uint32_t key_begin(uint64_t k) { return (uint32_t)((k >> 31) & 0x7fffffffu); }
static uint32_t key_end(uint64_t k) { return (uint32_t)(k & 0x7fffffffu); }

static int cmp_keyed(const void *a, const void *b) {
    const keyed_op *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Sort a unit's ops by (key, id): insertion sort for the usual handful, qsort beyond. */
static void sort_unit(keyed_op *v, size_t n) {
    if (n > 48) {
        qsort(v, n, sizeof *v, cmp_keyed);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        keyed_op t = v[i];
        size_t j = i;
        while (j > 0 && cmp_keyed(&v[j - 1], &t) > 0) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = t;
    }
}

/* "F3@s1" into buf. */
static const char *op_label(const deps_priv *p, uint32_t id, char *buf, size_t n) {
    char name[48];
    snprintf(buf, n, "%s@s%u", lt_op_name(p->op[id], name, sizeof name), p->stage[id]);
    return buf;
}

/* The index key of an op's unit: the unit, or n_fwd + the bunit for a B of an asymmetric
 * schedule. */
static uint32_t op_key(const deps_priv *p, const lt_op *op) {
    return p->asym && op->kind == LT_OP_B ? p->n_fwd + op->unit : op->unit;
}

/* "unit" or "bunit": what index key k names. */
static const char *key_word(const deps_priv *p, size_t k) { return k >= p->n_fwd ? "bunit" : "unit"; }

/* Index key k's number in its own table. */
static uint32_t key_number(const deps_priv *p, size_t k) { return (uint32_t)(k >= p->n_fwd ? k - p->n_fwd : k); }

/* A path position boundary in words: "layer 4", "layer 4 attention", "layer 4 post-attention". */
static const char *position_name(uint32_t pos, char *buf, size_t n) {
    static const char *const part[] = {"", " attention", " post-attention"};
    snprintf(buf, n, "layer %u%s", pos / 3, part[pos % 3]);
    return buf;
}

/* ---- the op index ---- */

/* First entry of unit u's ops with key >= k (or the unit's end). */
static uint32_t lower_bound(const deps_priv *p, uint32_t u, uint64_t k) {
    uint32_t lo = p->unit_off[u], hi = p->unit_off[u + 1];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p->index[mid].key < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The group (first index entry) of unit u's ops of class cls over exactly [pb, pe), or NONE. */
static uint32_t find_range(const deps_priv *p, uint32_t u, unsigned cls, uint32_t pb, uint32_t pe) {
    uint64_t k = make_key(cls, pb, pe);
    uint32_t i = lower_bound(p, u, k);
    return i < p->unit_off[u + 1] && p->index[i].key == k ? i : NONE;
}

/* The group of unit u's ops of class cls beginning at pb, or NONE. */
static uint32_t find_begin(const deps_priv *p, uint32_t u, unsigned cls, uint32_t pb) {
    uint32_t i = lower_bound(p, u, make_key(cls, pb, 0));
    if (i >= p->unit_off[u + 1]) return NONE;
    uint64_t k = p->index[i].key;
    return key_cls(k) == cls && key_begin(k) == pb ? i : NONE;
}

/* The group of unit u's ops of class cls ending at pe, or NONE. Inside a class, ranges do
 * not overlap unless equal (checked when the index is built), so ends ascend with begins. */
static uint32_t find_end(const deps_priv *p, uint32_t u, unsigned cls, uint32_t pe) {
    uint32_t lo = p->unit_off[u], hi = p->unit_off[u + 1];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint64_t k = p->index[mid].key;
        if (key_cls(k) < cls || (key_cls(k) == cls && key_end(k) < pe))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo >= p->unit_off[u + 1]) return NONE;
    uint64_t k = p->index[lo].key;
    return key_cls(k) == cls && key_end(k) == pe ? lo : NONE;
}

/* The k-th op of the group starting at index entry g (of unit u); with only_f, the k-th F
 * (FK skipped); k = NONE: the last. NONE if there is no such op. */
static uint32_t group_op(const deps_priv *p, uint32_t u, uint32_t g, uint32_t k, bool only_f) {
    if (g == NONE) return NONE;
    uint64_t key = p->index[g].key;
    uint32_t end = p->unit_off[u + 1], last = NONE;
    for (uint32_t i = g; i < end && p->index[i].key == key; i++) {
        uint32_t id = p->index[i].id;
        if (only_f && p->op[id]->kind != LT_OP_F) continue;
        if (k == 0) return id;
        if (k != NONE) k--;
        last = id;
    }
    return k == NONE ? last : NONE;
}


/* ---- scratch ---- */

static void reserve(lt_deps *d, deps_priv *p, size_t n, int stages, size_t n_keys, size_t n_slices) {
    if (n + 1 > p->cap_ops) {
        size_t c = next_cap(p->cap_ops, n + 1);
        RESIZE(d->op, c);
        RESIZE(d->stage, c);
        RESIZE(d->instance, c);
        RESIZE(d->pred_off, c);
        RESIZE(d->succ_off, c);
        RESIZE(d->act_of, c);
        RESIZE(d->kv_last_b, c);
        RESIZE(d->kv_of, c);
        RESIZE(p->index, c);
        RESIZE(p->succ_cursor, c);
        p->cap_ops = c;
    }
    if ((size_t)stages + 1 > p->cap_stages) {
        p->cap_stages = (size_t)stages + 1;
        RESIZE(d->first_op, p->cap_stages);
    }
    if (n_keys + 1 > p->cap_units) {
        size_t c = next_cap(p->cap_units, n_keys + 1);
        RESIZE(p->unit_off, c);
        RESIZE(p->prev_off, c);
        RESIZE(p->next_off, c);
        RESIZE(p->stamp, c);
        RESIZE(p->utok, c);
        p->cap_units = c;
    }
    if (n_slices > p->cap_slices) {
        size_t c = next_cap(p->cap_slices, n_slices);
        RESIZE(p->slice_unit, c);
        RESIZE(p->slice_prev, c);
        RESIZE(p->prev_units, c);
        RESIZE(p->next_units, c);
        p->cap_slices = c;
    }
    size_t h = 16;
    while (h < 2 * n_slices) h *= 2;
    if (h > p->cap_hash) {
        RESIZE(p->hkey, h);
        RESIZE(p->hval, h);
        p->cap_hash = h;
    }
    p->op = d->op;
    p->stage = d->stage;
    p->inst = d->instance;
    p->act_of = d->act_of;
    p->kv_end = d->kv_last_b;
    p->kv_of = d->kv_of;
}

static void reserve_edges(lt_deps *d, deps_priv *p, size_t n) {
    if (n > p->cap_edges || !d->pred) {
        size_t c = next_cap(p->cap_edges, n);
        RESIZE(d->pred, c);
        RESIZE(d->succ, c);
        p->cap_edges = c;
    }
    p->pred = d->pred;
}

/* Step 2: the op index (see the file comment) and each op's instance number. */
static lt_status build_index(deps_priv *p, size_t n, lt_error *err) {
    size_t nu = p->n_keys;
    memset(p->unit_off, 0, (nu + 1) * sizeof *p->unit_off);
    for (size_t id = 0; id < n; id++) p->unit_off[op_key(p, p->op[id]) + 1]++;
    for (size_t u = 0; u < nu; u++) p->unit_off[u + 1] += p->unit_off[u];
    memcpy(p->stamp, p->unit_off, nu * sizeof *p->stamp); /* fill cursors */
    for (size_t id = 0; id < n; id++) {
        const lt_op *op = p->op[id];
        uint32_t pb, pe;
        lt_op_positions(op, &pb, &pe);
        unsigned cls = op->kind == LT_OP_B ? CLS_BWD : CLS_FWD;
        p->index[p->stamp[op_key(p, op)]++] = (keyed_op){make_key(cls, pb, pe), (uint32_t)id, 0};
    }
    for (size_t u = 0; u < nu; u++) {
        uint32_t lo = p->unit_off[u], hi = p->unit_off[u + 1];
        sort_unit(p->index + lo, hi - lo);
        uint32_t k = 0;
        for (uint32_t i = lo; i < hi; i++) {
            uint64_t key = p->index[i].key;
            if (i > lo && key == p->index[i - 1].key) {
                k++;
            } else {
                k = 0;
                uint64_t prev = i > lo ? p->index[i - 1].key : 0;
                if (i > lo && key_cls(prev) == key_cls(key) && key_begin(key) < key_end(prev)) {
                    char a[64], b[64];
                    return lt_fail(err, LT_ERR_INPUT, "schedule",
                                   "%s %u: %s and %s run overlapping but different layer ranges", key_word(p, u),
                                   key_number(p, u), op_label(p, p->index[i - 1].id, a, sizeof a),
                                   op_label(p, p->index[i].id, b, sizeof b));
                }
            }
            p->inst[p->index[i].id] = k;
        }
    }
    return LT_OK;
}

/* The unit of index key k and the offset of its slice table in the virtual one (slices,
 * then bslices). */
static const lt_unit *key_unit(const deps_priv *p, const lt_schedule *s, size_t k, size_t *base) {
    if (k < p->n_fwd) {
        *base = 0;
        return &s->units[k];
    }
    *base = s->n_slices;
    return &s->bunits[k - p->n_fwd];
}

/* slice_prev over one slice table, entries [base, base + n) of the virtual one. */
static void link_previous(deps_priv *p, const lt_slice *v, size_t n, size_t base) {
    size_t mask = p->cap_hash - 1;
    for (size_t h = 0; h <= mask; h++) p->hkey[h] = -1;
    for (size_t j = 0; j < n; j++) {
        int32_t sample = v[j].sample;
        size_t h = (size_t)(((uint64_t)(uint32_t)sample * UINT64_C(0x9e3779b97f4a7c15)) >> 20) & mask;
        while (p->hkey[h] != -1 && p->hkey[h] != sample) h = (h + 1) & mask;
        p->slice_prev[base + j] = p->hkey[h] == sample ? p->hval[h] : NONE;
        p->hkey[h] = sample;
        p->hval[h] = (uint32_t)(base + j);
    }
}

/* Step 3: slice -> unit, slice -> previous slice of its sample, and each unit's neighbours
 * (the other units holding the previous / next slice of one of its samples). Asymmetric
 * schedules: the same over the bslices and bunits (a second, virtual part of the tables),
 * then each bunit's forward units (its activations) and each forward unit's tokens. */
static lt_status build_neighbours(deps_priv *p, const lt_schedule *s, lt_error *err) {
    size_t nv = s->n_slices + (p->asym ? s->n_bslices : 0), nu = p->n_keys;
    for (size_t j = 0; j < nv; j++) p->slice_unit[j] = NONE;
    for (size_t u = 0; u < nu; u++) {
        size_t base;
        const lt_unit *un = key_unit(p, s, u, &base);
        for (uint32_t j = un->first_slice; j < un->first_slice + un->n_slices; j++) {
            if (p->slice_unit[base + j] != NONE) {
                const char *w = key_word(p, u);
                return lt_fail(err, LT_ERR_INPUT, "schedule", "%s %u is in %ss %u and %u", base ? "bslice" : "slice",
                               j, w, key_number(p, p->slice_unit[base + j]), key_number(p, u));
            }
            p->slice_unit[base + j] = (uint32_t)u;
        }
    }
    link_previous(p, s->slices, s->n_slices, 0);
    if (p->asym) link_previous(p, s->bslices, s->n_bslices, s->n_slices);
    /* prev lists, deduplicated with stamp[neighbour] = the unit being listed */
    for (size_t u = 0; u < nu; u++) p->stamp[u] = NONE;
    uint32_t cnt = 0;
    p->prev_off[0] = 0;
    for (size_t u = 0; u < nu; u++) {
        size_t base;
        const lt_unit *un = key_unit(p, s, u, &base);
        for (uint32_t j = un->first_slice; j < un->first_slice + un->n_slices; j++) {
            uint32_t q = p->slice_prev[base + j];
            uint32_t qu = q == NONE ? NONE : p->slice_unit[q];
            if (qu == NONE || qu == u || p->stamp[qu] == u) continue;
            p->stamp[qu] = (uint32_t)u;
            p->prev_units[cnt++] = qu;
        }
        p->prev_off[u + 1] = cnt;
    }
    /* next lists: the transpose */
    memset(p->next_off, 0, (nu + 1) * sizeof *p->next_off);
    for (uint32_t i = 0; i < cnt; i++) p->next_off[p->prev_units[i] + 1]++;
    for (size_t u = 0; u < nu; u++) p->next_off[u + 1] += p->next_off[u];
    memcpy(p->stamp, p->next_off, nu * sizeof *p->stamp);
    for (size_t u = 0; u < nu; u++)
        for (uint32_t i = p->prev_off[u]; i < p->prev_off[u + 1]; i++)
            p->next_units[p->stamp[p->prev_units[i]]++] = (uint32_t)u;
    if (p->asym) {
        free(p->ov_off);
        free(p->ov_unit);
        free(p->ov_tok);
        lt_schedule_bunit_overlaps(s, &p->ov_off, &p->ov_unit, &p->ov_tok);
        for (size_t u = 0; u < p->n_fwd; u++) p->utok[u] = (double)lt_schedule_unit_tokens(s, (uint32_t)u);
    }
    return LT_OK;
}


/* An op's missing dependency: LT_ERR_INPUT naming the op and what it waits for. */
static lt_status missing(const deps_priv *p, uint32_t v, lt_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static lt_status missing(const deps_priv *p, uint32_t v, lt_error *err, const char *fmt, ...) {
    char name[64], what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    lt_status st = lt_fail(err, LT_ERR_INPUT, "schedule", "%s waits for %s, which is not in the schedule",
                           op_label(p, v, name, sizeof name), what);
    lt_error_hint(err, "every op needs the ops plans/schedule/schedule.h's dependency rules name; is the schedule complete?");
    return st;
}

/* Appends the edge from -> v (the op being built) with its reason and share. */
static void push_edge(const lt_deps *d, deps_priv *p, uint32_t *e, uint32_t v, uint32_t from, lt_dep_kind why,
                      double share) {
    lt_dep *x = &p->pred[*e];
    x->op = from;
    x->stage = (uint16_t)p->stage[from];
    x->index = (uint32_t)(from - d->first_op[x->stage]);
    x->kind = (uint8_t)why;
    x->p2p = why == LT_DEP_PATH && p->stage[from] != p->stage[v];
    x->share = share;
    ++*e;
}

/* Step 4 for a B of an asymmetric schedule over bunit key bu (plans/schedule/schedule.h,
 * "Asymmetric schedules"): the model path to the B of bu starting where it ends (none at
 * the model's end: the activation edges stand for it), an activation edge to the first F
 * over its range of every forward unit holding its tokens (on its own stage; the edge
 * records the share of that F's bytes it frees), the dK/dV edges over the bslices. */
static lt_status asym_b_edges(const lt_deps *d, deps_priv *p, uint32_t v, uint32_t bu, uint32_t pb, uint32_t pe,
                              uint32_t model_end, uint32_t *e, lt_error *err) {
    uint32_t b = bu - p->n_fwd, k = p->inst[v], q;
    char pos[64];
    if (pe < model_end) {
        q = group_op(p, bu, find_begin(p, bu, CLS_BWD, pe), k, false);
        if (q == NONE)
            return missing(p, v, err, "the B of bunit %u beginning at %s (instance %u)", b,
                           position_name(pe, pos, sizeof pos), k);
        push_edge(d, p, e, v, q, LT_DEP_PATH, 0.0);
    }
    if (p->ov_off[b] == p->ov_off[b + 1])
        return missing(p, v, err, "its activations: a forward unit holding the tokens of bunit %u", b);
    for (uint32_t i = p->ov_off[b]; i < p->ov_off[b + 1]; i++) {
        uint32_t u = p->ov_unit[i];
        uint32_t f = group_op(p, u, find_range(p, u, CLS_FWD, pb, pe), 0, true);
        if (f == NONE) return missing(p, v, err, "its activations: the F of unit %u over its layers", u);
        if (p->stage[f] != p->stage[v]) {
            char x[64], y[64];
            return lt_fail(err, LT_ERR_INPUT, "schedule", "%s consumes the activations of %s on another stage",
                           op_label(p, v, x, sizeof x), op_label(p, f, y, sizeof y));
        }
        push_edge(d, p, e, v, f, LT_DEP_ACT, (double)p->ov_tok[i] / p->utok[u]);
    }
    for (uint32_t i = p->next_off[bu]; i < p->next_off[bu + 1]; i++) {
        uint32_t w = p->next_units[i];
        q = group_op(p, w, find_range(p, w, CLS_BWD, pb, pe), NONE, false);
        if (q == NONE)
            return missing(p, v, err, "a B of bunit %u (next bslice) from %s", w - p->n_fwd,
                           position_name(pb, pos, sizeof pos));
        push_edge(d, p, e, v, q, LT_DEP_DKV, 0.0);
    }
    return LT_OK;
}

/* Step 4: the predecessor lists (order: model path, activations, slices, stage order). */
static lt_status build_edges(lt_deps *d, deps_priv *p, const lt_schedule *s, size_t n, lt_error *err) {
    size_t bound = 0;
    for (size_t v = 0; v < n; v++) {
        const lt_op *op = p->op[v];
        uint32_t u = op_key(p, op);
        bound += 3 + (op->kind == LT_OP_B ? p->next_off[u + 1] - p->next_off[u] : p->prev_off[u + 1] - p->prev_off[u]);
        if (p->asym && op->kind == LT_OP_B) bound += p->ov_off[op->unit + 1] - p->ov_off[op->unit];
    }
    if (bound >= NONE) return lt_fail(err, LT_ERR_INPUT, "schedule", "%zu dependencies: too many", bound);
    reserve_edges(d, p, bound);
    for (size_t v = 0; v < n; v++) p->kv_of[v] = NONE;

    const uint32_t model_end = 3 * (uint32_t)s->layers;
    uint32_t e = 0;
    char pos[64];
    for (uint32_t v = 0; v < n; v++) {
        const lt_op *op = p->op[v];
        uint32_t u = op_key(p, op), k = p->inst[v], pb, pe, q;
        lt_op_positions(op, &pb, &pe);
        lt_status st;
        d->pred_off[v] = e;
        p->act_of[v] = NONE;
        p->kv_end[v] = NONE;
#define ADD_EDGE(from, why, share) push_edge(d, p, &e, v, (from), (why), (share))
        if (op->kind != LT_OP_B) {
            if (pb > 0) {
                q = group_op(p, u, find_end(p, u, CLS_FWD, pb), k, false);
                if (q == NONE)
                    return missing(p, v, err, "the forward of unit %u ending at %s (instance %u)", u,
                                   position_name(pb, pos, sizeof pos), k);
                ADD_EDGE(q, LT_DEP_PATH, 0.0);
            }
            if (k == 0) {
                for (uint32_t i = p->prev_off[u]; i < p->prev_off[u + 1]; i++) {
                    q = group_op(p, p->prev_units[i], find_range(p, p->prev_units[i], CLS_FWD, pb, pe), 0, false);
                    if (q == NONE)
                        return missing(p, v, err, "a forward of unit %u (previous slice) from %s", p->prev_units[i],
                                       position_name(pb, pos, sizeof pos));
                    ADD_EDGE(q, LT_DEP_KV, 0.0);
                }
                q = group_op(p, u, find_range(p, u, CLS_BWD, pb, pe), NONE, false);
                p->kv_end[v] = q;
                if (q != NONE && p->stage[q] == p->stage[v]) p->kv_of[q] = v;
            }
        } else if (p->asym) {
            if ((st = asym_b_edges(d, p, v, u, pb, pe, model_end, &e, err))) return st;
        } else {
            uint32_t f = group_op(p, u, find_range(p, u, CLS_FWD, pb, pe), k, true);
            if (f == NONE)
                return missing(p, v, err, "its activations: the F of unit %u over its layers (instance %u)", u, k);
            if (p->stage[f] != p->stage[v]) {
                char a[64], b[64];
                return lt_fail(err, LT_ERR_INPUT, "schedule", "%s consumes the activations of %s on another stage",
                               op_label(p, v, a, sizeof a), op_label(p, f, b, sizeof b));
            }
            p->act_of[v] = f;
            if (pe < model_end) {
                q = group_op(p, u, find_begin(p, u, CLS_BWD, pe), k, false);
                if (q == NONE)
                    return missing(p, v, err, "the B of unit %u beginning at %s (instance %u)", u,
                                   position_name(pe, pos, sizeof pos), k);
            } else {
                q = group_op(p, u, find_end(p, u, CLS_FWD, pe), k, true);
                if (q == NONE)
                    return missing(p, v, err, "the F of unit %u ending at the model's end (instance %u)", u, k);
            }
            if (q != f) {
                ADD_EDGE(q, LT_DEP_PATH, 0.0);
            }
            ADD_EDGE(f, LT_DEP_ACT, 1.0);
            for (uint32_t i = p->next_off[u]; i < p->next_off[u + 1]; i++) {
                q = group_op(p, p->next_units[i], find_range(p, p->next_units[i], CLS_BWD, pb, pe), NONE, false);
                if (q == NONE)
                    return missing(p, v, err, "a B of unit %u (next slice) from %s", p->next_units[i],
                                   position_name(pb, pos, sizeof pos));
                ADD_EDGE(q, LT_DEP_DKV, 0.0);
            }
        }
        if (v > d->first_op[p->stage[v]]) ADD_EDGE(v - 1, LT_DEP_STAGE, 0.0);
#undef ADD_EDGE
    }
    d->pred_off[n] = e;
    return LT_OK;
}


/* Step 4, second half: the successor lists, the transpose of the predecessor lists (by
 * increasing successor id, since the walk goes over v in increasing order). */
static void build_successors(lt_deps *d, deps_priv *p, size_t n) {
    memset(d->succ_off, 0, (n + 1) * sizeof *d->succ_off);
    for (uint32_t e = 0; e < d->pred_off[n]; e++) d->succ_off[d->pred[e].op + 1]++;
    for (size_t v = 0; v < n; v++) d->succ_off[v + 1] += d->succ_off[v];
    memcpy(p->succ_cursor, d->succ_off, n * sizeof *p->succ_cursor);
    for (uint32_t v = 0; v < n; v++) {
        for (uint32_t e = d->pred_off[v]; e < d->pred_off[v + 1]; e++) {
            lt_dep x = d->pred[e];
            uint32_t u = x.op;
            x.op = v;
            x.stage = (uint16_t)d->stage[v];
            x.index = (uint32_t)(v - d->first_op[x.stage]);
            d->succ[p->succ_cursor[u]++] = x;
        }
    }
}

/* ---- the API ---- */

lt_status lt_deps_build(lt_deps *d, const lt_schedule *s, lt_error *err) {
    lt_status st = lt_schedule_check(s, err);
    if (st) return st;
    if (s->layers > (1 << 28)) return lt_fail(err, LT_ERR_INPUT, "schedule", "%d layers: too many", s->layers);
    if (s->stages > UINT16_MAX) return lt_fail(err, LT_ERR_INPUT, "schedule", "%d stages: too many", s->stages);
    size_t n = lt_schedule_n_ops(s);
    size_t n_bunits = s->asym ? s->n_bunits : 0, n_bslices = s->asym ? s->n_bslices : 0;
    if (n >= NONE / 2 || s->n_units + n_bunits >= NONE || s->n_slices + n_bslices >= NONE)
        return lt_fail(err, LT_ERR_INPUT, "schedule", "%zu ops, %zu units, %zu slices: too many", n,
                       s->n_units + n_bunits, s->n_slices + n_bslices);
    if (!d->priv) d->priv = lt_calloc_check(1, sizeof(deps_priv));
    deps_priv *p = d->priv;
    p->asym = s->asym;
    p->n_fwd = (uint32_t)s->n_units;
    p->n_keys = s->n_units + n_bunits;
    reserve(d, p, n, s->stages, p->n_keys, s->n_slices + n_bslices);
    d->stages = s->stages;
    d->n_ops = n;
    size_t id = 0;
    for (int stg = 0; stg < s->stages; stg++) {
        d->first_op[stg] = id;
        for (size_t i = 0; i < s->stage[stg].n; i++, id++) {
            d->op[id] = &s->stage[stg].ops[i];
            d->stage[id] = (uint32_t)stg;
        }
    }
    d->first_op[s->stages] = id;
    if ((st = build_index(p, n, err))) return st;
    if ((st = build_neighbours(p, s, err))) return st;
    if ((st = build_edges(d, p, s, n, err))) return st;
    build_successors(d, p, n);
    return LT_OK;
}

void lt_deps_free(lt_deps *d) {
    if (!d) return;
    deps_priv *p = d->priv;
    if (p) {
        void *arrays[] = {p->index,      p->succ_cursor, p->unit_off, p->prev_off,   p->next_off,
                          p->stamp,      p->utok,        p->slice_unit, p->slice_prev, p->prev_units,
                          p->next_units, p->hkey,        p->hval,     p->ov_off,     p->ov_unit,
                          p->ov_tok};
        for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
        free(p);
    }
    void *mine[] = {d->first_op, d->op,   d->stage, d->instance, d->pred_off, d->pred,
                    d->succ_off, d->succ, d->act_of, d->kv_last_b, d->kv_of};
    for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) free(mine[i]);
    memset(d, 0, sizeof *d);
}

size_t lt_deps_op_id(const lt_deps *d, int stage, size_t index) { return d->first_op[stage] + index; }

void lt_deps_op_at(const lt_deps *d, size_t id, int *stage, size_t *index) {
    *stage = (int)d->stage[id];
    *index = id - d->first_op[*stage];
}

const lt_dep *lt_deps_preds(const lt_deps *d, size_t id, size_t *n) {
    *n = d->pred_off[id + 1] - d->pred_off[id];
    return d->pred + d->pred_off[id];
}

const lt_dep *lt_deps_succs(const lt_deps *d, size_t id, size_t *n) {
    *n = d->succ_off[id + 1] - d->succ_off[id];
    return d->succ + d->succ_off[id];
}

bool lt_deps_transfer(const lt_deps *d, size_t id, const lt_dep *list, size_t k) {
    const lt_dep *e = &list[k];
    bool t = e->p2p || ((e->kind == LT_DEP_KV || e->kind == LT_DEP_DKV) && e->stage != d->stage[id] &&
                        d->op[id]->part == LT_PART_ATTN && d->op[e->op]->part == LT_PART_ATTN);
    for (size_t j = 0; t && j < k; j++) /* the first edge to its op of its kind carries it */
        if (list[j].op == e->op && list[j].kind == e->kind) t = false;
    return t;
}

size_t lt_deps_channels(const lt_deps *d, uint32_t *off, uint32_t *edges, uint32_t *post) {
    size_t P = (size_t)d->stages;
    uint32_t *at = lt_calloc_check(P * P + 1, sizeof *at);
    memset(off, 0, (P * P + 1) * sizeof *off);
    for (int pass = 0; pass < 2; pass++) { /* count, then fill: senders' ops in id order */
        for (size_t u = 0; u < d->n_ops; u++) {
            size_t ns;
            const lt_dep *s = lt_deps_succs(d, u, &ns);
            for (size_t k = 0; k < ns; k++) {
                if (!lt_deps_transfer(d, u, s, k)) continue;
                size_t c = (size_t)s[k].stage * P + d->stage[u];
                if (pass == 0) {
                    off[c + 1]++;
                    continue;
                }
                uint32_t w = s[k].op, e = d->pred_off[w];
                while (e < d->pred_off[w + 1] && !(d->pred[e].op == u && d->pred[e].kind == s[k].kind)) e++;
                edges[at[c]] = e; /* (the graph lists both ends of every edge) */
                post[at[c]++] = s[k].index > 0 ? s[k].index - 1 : 0;
            }
        }
        if (pass == 0)
            for (size_t c = 0; c < P * P; c++) off[c + 1] += off[c], at[c] = off[c];
    }
    for (size_t c = 0; c < P * P; c++) /* in channel order: the least want at or after each */
        for (uint32_t k = off[c + 1]; k-- > off[c] + 1;)
            if (post[k] < post[k - 1]) post[k - 1] = post[k];
    free(at);
    return off[P * P];
}

const char *lt_dep_kind_name(lt_dep_kind k) {
    static const char *const names[] = {"model path", "activations", "slice keys/values", "slice key/value gradients",
                                        "stage order"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}
