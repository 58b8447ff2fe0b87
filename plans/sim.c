/*
 * plans/sim.c — the DAG pipeline simulator (plans/sim.h; SlimPack 4.3, Alg. 1).
 *
 * One run:
 *   1. the cost of every op from the callbacks, checked finite and >= 0;
 *   2. the op index: op ids grouped by unit (a counting sort), and inside a unit sorted by
 *      (class, path range, id), class = forward family (F, FK) or B. A run of equal (unit,
 *      class, range) holds the instances of plans/schedule.h in op-id order. Ranges of one
 *      (unit, class) may not overlap unless equal, so inside a class the order by begin is
 *      also the order by end, and "the op of unit u ending at position p" is a binary search
 *      among the unit's few ops: no hash of ops, memory linear in ops. In an asymmetric
 *      schedule the B ops name bunits: the index keys are the forward units 0..U-1, then
 *      the bunits U..U+V-1 (op_key), so one index serves both partitions;
 *   3. the slice neighbours: for each unit, the other units holding the previous (next)
 *      slice of one of its samples, deduplicated (a hash of sample -> last slice seen); in
 *      an asymmetric schedule the same over the bslices for the bunits, and for each bunit
 *      the forward units holding its tokens (lt_schedule_bunit_overlaps: a sweep over the
 *      samples' token ranges, once per run, so a B finds its activations without a scan);
 *   4. the predecessor lists of every op (model path, activations, slices, stage order),
 *      with the transfer time on model-path edges between stages (SlimPack 4.3.1);
 *   5. start and finish times by the longest path (SlimPack Eqs. 1-2): a depth-first walk
 *      over predecessors finishes every op after all of them, which is a topological order
 *      (Alg. 1 with the order built on the fly). A predecessor met while still on the walk's
 *      stack closes a cycle, read off the stack: the deadlock message;
 *   6. per stage, the memory sweep in program order (SlimPack 4.3.3), busy time; then the
 *      bubble ratio (ChunkFlow Eq. 1) and the critical path.
 */
#include "plans/sim.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h" /* lt_fail, lt_error_hint, lt_realloc_check */

#define NONE UINT32_MAX

enum { CLS_FWD = 0, CLS_BWD = 1 };

/* Why an op waits for a predecessor (the deadlock message names it). */
typedef enum edge_kind {
    EDGE_PATH = 0, /* model path: the previous layers (forward) or the next ones (backward) */
    EDGE_ACT = 1,  /* a B's own F: its activations */
    EDGE_KV = 2,   /* the previous slice's keys/values */
    EDGE_DKV = 3,  /* the next slice's key/value gradients */
    EDGE_STAGE = 4 /* the previous op of the stage */
} edge_kind;

static const char *const edge_reason[] = {"model path", "activations", "slice keys/values",
                                          "slice key/value gradients", "stage order"};

/* An op of the index: its sort key (class, begin, end) and id. */
typedef struct keyed_op {
    uint64_t key;
    uint32_t id;
    uint32_t unused;
} keyed_op;

/* A pending free of bytes held on one stage until an op of another stage ends. */
typedef struct mem_free {
    double time, bytes;
} mem_free;

typedef struct sim_priv {
    /* per op */
    size_t cap_ops;
    const lt_op **op;
    uint32_t *stage;
    lt_op_cost *cost;
    keyed_op *index;    /* op ids sorted by (unit, class, begin, end, id) */
    uint32_t *inst;     /* instance number within its (unit, class, range) */
    uint32_t *act_of;   /* B: the F whose activations it consumes; NONE otherwise */
    uint32_t *kv_end;   /* first forward of a (unit, range): the last B over it, or NONE */
    uint32_t *kv_of;    /* B: the forward of its own stage whose kv it frees, or NONE */
    uint32_t *pred_off; /* [n + 1] into pred/comm/kind */
    uint32_t *det;      /* the predecessor that set the start, or NONE */
    uint32_t *cursor;   /* depth-first walk: next predecessor to visit */
    uint32_t *stack;
    uint8_t *state; /* 0 not visited, 1 on the stack, 2 done */
    /* per edge */
    size_t cap_edges;
    uint32_t *pred;
    double *comm;
    uint8_t *kind;
    /* per unit */
    size_t cap_units;
    uint32_t *unit_off; /* [n_units + 1] into index */
    uint32_t *prev_off, *next_off; /* [n_units + 1] into prev_units / next_units */
    uint32_t *stamp;               /* [n_units] */
    double *utok;                  /* [n_units] asymmetric: a forward unit's tokens */
    /* per slice (asymmetric schedules: the slices, then the bslices) */
    size_t cap_slices;
    uint32_t *slice_unit, *slice_prev, *prev_units, *next_units;
    /* sample -> last slice seen (open addressing) */
    size_t cap_hash;
    int32_t *hkey;
    uint32_t *hval;
    /* memory sweep */
    size_t cap_heap;
    mem_free *heap;
    /* asymmetric schedules (SlimPack 4.1.2): the backward partition */
    bool asym;
    uint32_t n_fwd;                     /* forward units: the index key of bunit v is n_fwd + v */
    size_t n_keys;                      /* n_fwd + bunits */
    uint32_t *ov_off, *ov_unit;         /* lt_schedule_bunit_overlaps of the run */
    int64_t *ov_tok;
    size_t cap_asym_ops, cap_frac;
    double *held;                       /* [n_ops] an F's act + kv bytes not yet freed */
    uint32_t *takers;                   /* [n_ops] B ops yet to free a share of that F */
    double *frac;                       /* [edges] activation edge: the share of the F it frees */
    /* result arrays' capacities */
    size_t cap_res_ops, cap_res_stages;
} sim_priv;

/* ---- small helpers ---- */

static void *resize(void *p, size_t n, size_t size) {
    if (n && size > SIZE_MAX / n) lt_die("simulator: %zu elements of %zu bytes overflow", n, size);
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
static const char *op_label(const sim_priv *p, uint32_t id, char *buf, size_t n) {
    char name[48];
    snprintf(buf, n, "%s@s%u", lt_op_name(p->op[id], name, sizeof name), p->stage[id]);
    return buf;
}

/* The index key of an op's unit: the unit, or n_fwd + the bunit for a B of an asymmetric
 * schedule. */
static uint32_t op_key(const sim_priv *p, const lt_op *op) {
    return p->asym && op->kind == LT_OP_B ? p->n_fwd + op->unit : op->unit;
}

/* "unit" or "bunit": what index key k names. */
static const char *key_word(const sim_priv *p, size_t k) { return k >= p->n_fwd ? "bunit" : "unit"; }

/* Index key k's number in its own table. */
static uint32_t key_number(const sim_priv *p, size_t k) { return (uint32_t)(k >= p->n_fwd ? k - p->n_fwd : k); }

/* A path position boundary in words: "layer 4", "layer 4 attention", "layer 4 post-attention". */
static const char *position_name(uint32_t pos, char *buf, size_t n) {
    static const char *const part[] = {"", " attention", " post-attention"};
    snprintf(buf, n, "layer %u%s", pos / 3, part[pos % 3]);
    return buf;
}

/* ---- the op index ---- */

/* First entry of unit u's ops with key >= k (or the unit's end). */
static uint32_t lower_bound(const sim_priv *p, uint32_t u, uint64_t k) {
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
static uint32_t find_range(const sim_priv *p, uint32_t u, unsigned cls, uint32_t pb, uint32_t pe) {
    uint64_t k = make_key(cls, pb, pe);
    uint32_t i = lower_bound(p, u, k);
    return i < p->unit_off[u + 1] && p->index[i].key == k ? i : NONE;
}

/* The group of unit u's ops of class cls beginning at pb, or NONE. */
static uint32_t find_begin(const sim_priv *p, uint32_t u, unsigned cls, uint32_t pb) {
    uint32_t i = lower_bound(p, u, make_key(cls, pb, 0));
    if (i >= p->unit_off[u + 1]) return NONE;
    uint64_t k = p->index[i].key;
    return key_cls(k) == cls && key_begin(k) == pb ? i : NONE;
}

/* The group of unit u's ops of class cls ending at pe, or NONE. Inside a class, ranges do
 * not overlap unless equal (checked when the index is built), so ends ascend with begins. */
static uint32_t find_end(const sim_priv *p, uint32_t u, unsigned cls, uint32_t pe) {
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
static uint32_t group_op(const sim_priv *p, uint32_t u, uint32_t g, uint32_t k, bool only_f) {
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

static sim_priv *priv_of(lt_sim *sim) {
    if (!sim->priv) sim->priv = lt_calloc_check(1, sizeof(sim_priv));
    return sim->priv;
}

static void reserve_ops(lt_sim *sim, sim_priv *p, size_t n, int stages) {
    if (n + 1 > p->cap_ops) {
        size_t c = next_cap(p->cap_ops, n + 1);
        RESIZE(p->op, c);
        RESIZE(p->stage, c);
        RESIZE(p->cost, c);
        RESIZE(p->index, c);
        RESIZE(p->inst, c);
        RESIZE(p->act_of, c);
        RESIZE(p->kv_end, c);
        RESIZE(p->kv_of, c);
        RESIZE(p->pred_off, c);
        RESIZE(p->det, c);
        RESIZE(p->cursor, c);
        RESIZE(p->stack, c);
        RESIZE(p->state, c);
        p->cap_ops = c;
    }
    if (n > p->cap_res_ops || !sim->start) {
        size_t c = next_cap(p->cap_res_ops, n);
        RESIZE(sim->start, c);
        RESIZE(sim->finish, c);
        RESIZE(sim->critical, c);
        p->cap_res_ops = c;
    }
    if ((size_t)stages > p->cap_res_stages || !sim->busy) {
        size_t c = (size_t)stages;
        RESIZE(sim->busy, c);
        RESIZE(sim->peak_mem, c);
        RESIZE(sim->end_mem, c);
        RESIZE(sim->first_op, c + 1);
        p->cap_res_stages = c;
    }
}

static void reserve_units(sim_priv *p, size_t n_units) {
    if (n_units + 1 <= p->cap_units) return;
    size_t c = next_cap(p->cap_units, n_units + 1);
    RESIZE(p->unit_off, c);
    RESIZE(p->prev_off, c);
    RESIZE(p->next_off, c);
    RESIZE(p->stamp, c);
    RESIZE(p->utok, c);
    p->cap_units = c;
}

/* Per-op arrays of asymmetric schedules' memory (allocated only for them). */
static void reserve_asym_ops(sim_priv *p, size_t n) {
    if (n + 1 <= p->cap_asym_ops) return;
    size_t c = next_cap(p->cap_asym_ops, n + 1);
    RESIZE(p->held, c);
    RESIZE(p->takers, c);
    p->cap_asym_ops = c;
}

static void reserve_slices(sim_priv *p, size_t n_slices) {
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
}

static void reserve_edges(sim_priv *p, size_t n) {
    if (n <= p->cap_edges) return;
    size_t c = next_cap(p->cap_edges, n);
    RESIZE(p->pred, c);
    RESIZE(p->comm, c);
    RESIZE(p->kind, c);
    p->cap_edges = c;
}

static void reserve_frac(sim_priv *p, size_t n) {
    if (n <= p->cap_frac) return;
    size_t c = next_cap(p->cap_frac, n);
    RESIZE(p->frac, c);
    p->cap_frac = c;
}

void lt_sim_free(lt_sim *sim) {
    if (!sim) return;
    sim_priv *p = sim->priv;
    if (p) {
        void *arrays[] = {p->op,       p->stage,    p->cost,       p->index,      p->inst,       p->act_of,
                          p->kv_end,   p->kv_of,    p->pred_off,   p->det,        p->cursor,     p->stack,
                          p->state,    p->pred,     p->comm,       p->kind,       p->unit_off,   p->prev_off,
                          p->next_off, p->stamp,    p->slice_unit, p->slice_prev, p->prev_units, p->next_units,
                          p->hkey,     p->hval,     p->heap,       p->utok,       p->ov_off,     p->ov_unit,
                          p->ov_tok,   p->held,     p->takers,     p->frac};
        for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
        free(p);
    }
    free(sim->busy);
    free(sim->peak_mem);
    free(sim->end_mem);
    free(sim->first_op);
    free(sim->start);
    free(sim->finish);
    free(sim->critical);
    memset(sim, 0, sizeof *sim);
}

void lt_sim_op_at(const lt_sim *sim, size_t id, int *stage, size_t *index) {
    int lo = 0, hi = sim->stages - 1;
    while (lo < hi) { /* the last stage whose first op is <= id */
        int mid = lo + (hi - lo + 1) / 2;
        if (sim->first_op[mid] <= id)
            lo = mid;
        else
            hi = mid - 1;
    }
    *stage = lo;
    *index = id - sim->first_op[lo];
}

/* ---- the unit-time model (ChunkFlow Sec. 3) ---- */

static void unit_op_cost(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    (void)ctx;
    (void)stage;
    double tokens = (double)lt_schedule_op_tokens(s, op); /* a B of an asymmetric schedule: its bunit's */
    out->time = op->kind == LT_OP_B ? 2 * tokens : tokens;
    out->act_bytes = op->kind == LT_OP_F ? 1 : 0;
}

lt_sim_costs lt_sim_unit_costs(void) { return (lt_sim_costs){NULL, unit_op_cost, NULL, NULL}; }

/* ---- steps of a run ---- */

static bool bad_value(double x) { return !isfinite(x) || x < 0; }

/* Step 1: op table and costs. */
static lt_status collect_ops(lt_sim *sim, sim_priv *p, const lt_schedule *s, const lt_sim_costs *c, lt_error *err) {
    size_t id = 0;
    for (int st = 0; st < s->stages; st++) {
        sim->first_op[st] = id;
        sim->busy[st] = 0;
        for (size_t i = 0; i < s->stage[st].n; i++, id++) {
            const lt_op *op = &s->stage[st].ops[i];
            p->op[id] = op;
            p->stage[id] = (uint32_t)st;
            lt_op_cost *oc = &p->cost[id];
            memset(oc, 0, sizeof *oc);
            c->op_cost(c->ctx, s, st, op, oc);
            const double v[5] = {oc->time, oc->act_bytes, oc->kv_bytes, oc->work_bytes, oc->out_bytes};
            static const char *const what[5] = {"time", "act_bytes", "kv_bytes", "work_bytes", "out_bytes"};
            for (int k = 0; k < 5; k++) {
                if (bad_value(v[k])) {
                    char name[64];
                    return lt_fail(err, LT_ERR_INPUT, "schedule", "cost model: %s of %s is %g (must be finite, >= 0)",
                                   what[k], op_label(p, (uint32_t)id, name, sizeof name), v[k]);
                }
            }
            sim->busy[st] += oc->time;
        }
    }
    sim->first_op[s->stages] = id;
    return LT_OK;
}

/* Step 2: the op index (see the file comment) and each op's instance number. */
static lt_status build_index(sim_priv *p, size_t n, lt_error *err) {
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
static const lt_unit *key_unit(const sim_priv *p, const lt_schedule *s, size_t k, size_t *base) {
    if (k < p->n_fwd) {
        *base = 0;
        return &s->units[k];
    }
    *base = s->n_slices;
    return &s->bunits[k - p->n_fwd];
}

/* slice_prev over one slice table, entries [base, base + n) of the virtual one. */
static void link_previous(sim_priv *p, const lt_slice *v, size_t n, size_t base) {
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
static lt_status build_neighbours(sim_priv *p, const lt_schedule *s, lt_error *err) {
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

/* A transfer time from the callbacks, checked. */
static lt_status transfer(const lt_sim_costs *c, uint32_t from, uint32_t to, double bytes, double *t,
                          lt_error *err) {
    *t = 0;
    if (from == to || !c->p2p_time) return LT_OK;
    *t = c->p2p_time(c->ctx, (int)from, (int)to, bytes);
    if (bad_value(*t))
        return lt_fail(err, LT_ERR_INPUT, "schedule",
                       "cost model: transfer of %g bytes from stage %u to %u takes %g (must be finite, >= 0)", bytes,
                       from, to, *t);
    return LT_OK;
}

/* An op's missing dependency: LT_ERR_INPUT naming the op and what it waits for. */
static lt_status missing(const sim_priv *p, uint32_t v, lt_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static lt_status missing(const sim_priv *p, uint32_t v, lt_error *err, const char *fmt, ...) {
    char name[64], what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    lt_status st = lt_fail(err, LT_ERR_INPUT, "schedule", "%s waits for %s, which is not in the schedule",
                           op_label(p, v, name, sizeof name), what);
    lt_error_hint(err, "every op needs the ops plans/schedule.h's dependency rules name; is the schedule complete?");
    return st;
}

/* Appends the edge from -> (the op being built) with its transfer time and reason. */
static void push_edge(sim_priv *p, uint32_t *e, uint32_t from, double time, edge_kind why) {
    p->pred[*e] = from;
    p->comm[*e] = time;
    p->kind[*e] = (uint8_t)why;
    ++*e;
}

/* Step 4 for a B of an asymmetric schedule over bunit key bu (plans/schedule.h,
 * "Asymmetric schedules"): the model path to the B of bu starting where it ends (none at
 * the model's end: the activation edges stand for it), an activation edge to the first F
 * over its range of every forward unit holding its tokens (on its own stage; the edge
 * records the share of that F's bytes it frees), the dK/dV edges over the bslices. */
static lt_status asym_b_edges(sim_priv *p, uint32_t v, uint32_t bu, uint32_t pb, uint32_t pe, uint32_t model_end,
                              const lt_sim_costs *c, uint32_t *e, lt_error *err) {
    uint32_t b = bu - p->n_fwd, k = p->inst[v], q;
    char pos[64];
    lt_status st;
    double t;
    if (pe < model_end) {
        q = group_op(p, bu, find_begin(p, bu, CLS_BWD, pe), k, false);
        if (q == NONE)
            return missing(p, v, err, "the B of bunit %u beginning at %s (instance %u)", b,
                           position_name(pe, pos, sizeof pos), k);
        if ((st = transfer(c, p->stage[q], p->stage[v], p->cost[q].out_bytes, &t, err))) return st;
        push_edge(p, e, q, t, EDGE_PATH);
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
        p->frac[*e] = (double)p->ov_tok[i] / p->utok[u];
        p->takers[f]++;
        push_edge(p, e, f, 0.0, EDGE_ACT);
    }
    for (uint32_t i = p->next_off[bu]; i < p->next_off[bu + 1]; i++) {
        uint32_t w = p->next_units[i];
        q = group_op(p, w, find_range(p, w, CLS_BWD, pb, pe), NONE, false);
        if (q == NONE)
            return missing(p, v, err, "a B of bunit %u (next bslice) from %s", w - p->n_fwd,
                           position_name(pb, pos, sizeof pos));
        push_edge(p, e, q, 0.0, EDGE_DKV);
    }
    return LT_OK;
}

/* Step 4: the predecessor lists (order: model path, activations, slices, stage order). */
static lt_status build_edges(lt_sim *sim, sim_priv *p, const lt_schedule *s, const lt_sim_costs *c, size_t n,
                             lt_error *err) {
    size_t bound = 0;
    for (size_t v = 0; v < n; v++) {
        const lt_op *op = p->op[v];
        uint32_t u = op_key(p, op);
        bound += 3 + (op->kind == LT_OP_B ? p->next_off[u + 1] - p->next_off[u] : p->prev_off[u + 1] - p->prev_off[u]);
        if (p->asym && op->kind == LT_OP_B) bound += p->ov_off[op->unit + 1] - p->ov_off[op->unit];
    }
    if (bound >= NONE) return lt_fail(err, LT_ERR_INPUT, "schedule", "%zu dependencies: too many", bound);
    reserve_edges(p, bound);
    for (size_t v = 0; v < n; v++) p->kv_of[v] = NONE;
    if (p->asym) { /* the memory an F holds until the B ops of its tokens free it */
        reserve_frac(p, bound);
        reserve_asym_ops(p, n);
        for (size_t v = 0; v < n; v++) {
            bool first_f = p->op[v]->kind == LT_OP_F && p->inst[v] == 0;
            p->held[v] = first_f ? p->cost[v].act_bytes + p->cost[v].kv_bytes : 0;
            p->takers[v] = 0;
        }
    }

    const uint32_t model_end = 3 * (uint32_t)s->layers;
    uint32_t e = 0;
    char pos[64];
    for (uint32_t v = 0; v < n; v++) {
        const lt_op *op = p->op[v];
        uint32_t u = op_key(p, op), k = p->inst[v], pb, pe, q;
        lt_op_positions(op, &pb, &pe);
        lt_status st;
        double t;
        p->pred_off[v] = e;
        p->act_of[v] = NONE;
        p->kv_end[v] = NONE;
#define ADD_EDGE(from, time, why)         \
    do {                                  \
        p->pred[e] = (from);              \
        p->comm[e] = (time);              \
        p->kind[e] = (uint8_t)(why);      \
        e++;                              \
    } while (0)
        if (op->kind != LT_OP_B) {
            if (pb > 0) {
                q = group_op(p, u, find_end(p, u, CLS_FWD, pb), k, false);
                if (q == NONE)
                    return missing(p, v, err, "the forward of unit %u ending at %s (instance %u)", u,
                                   position_name(pb, pos, sizeof pos), k);
                if ((st = transfer(c, p->stage[q], p->stage[v], p->cost[q].out_bytes, &t, err))) return st;
                ADD_EDGE(q, t, EDGE_PATH);
            }
            if (k == 0) {
                for (uint32_t i = p->prev_off[u]; i < p->prev_off[u + 1]; i++) {
                    q = group_op(p, p->prev_units[i], find_range(p, p->prev_units[i], CLS_FWD, pb, pe), 0, false);
                    if (q == NONE)
                        return missing(p, v, err, "a forward of unit %u (previous slice) from %s", p->prev_units[i],
                                       position_name(pb, pos, sizeof pos));
                    ADD_EDGE(q, 0.0, EDGE_KV);
                }
                q = group_op(p, u, find_range(p, u, CLS_BWD, pb, pe), NONE, false);
                p->kv_end[v] = q;
                if (q != NONE && p->stage[q] == p->stage[v]) p->kv_of[q] = v;
            }
        } else if (p->asym) {
            if ((st = asym_b_edges(p, v, u, pb, pe, model_end, c, &e, err))) return st;
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
                if ((st = transfer(c, p->stage[q], p->stage[v], p->cost[q].out_bytes, &t, err))) return st;
                ADD_EDGE(q, t, EDGE_PATH);
            }
            ADD_EDGE(f, 0.0, EDGE_ACT);
            for (uint32_t i = p->next_off[u]; i < p->next_off[u + 1]; i++) {
                q = group_op(p, p->next_units[i], find_range(p, p->next_units[i], CLS_BWD, pb, pe), NONE, false);
                if (q == NONE)
                    return missing(p, v, err, "a B of unit %u (next slice) from %s", p->next_units[i],
                                   position_name(pb, pos, sizeof pos));
                ADD_EDGE(q, 0.0, EDGE_DKV);
            }
        }
        if (v > sim->first_op[p->stage[v]]) ADD_EDGE(v - 1, 0.0, EDGE_STAGE);
#undef ADD_EDGE
    }
    p->pred_off[n] = e;
    return LT_OK;
}

/* The deadlock message for the cycle stack[from..top] -> stack[from]. */
static lt_status report_cycle(const sim_priv *p, size_t from, size_t top, lt_error *err) {
    char msg[LT_ERROR_WHAT_MAX - 32], name[64];
    size_t len = (size_t)snprintf(msg, sizeof msg, "deadlock: %s",
                                  op_label(p, p->stack[from], name, sizeof name));
    size_t n = top - from + 1;
    for (size_t i = from; i <= top; i++) {
        uint32_t next = i < top ? p->stack[i + 1] : p->stack[from];
        uint8_t why = p->kind[p->cursor[p->stack[i]] - 1];
        char step[160];
        snprintf(step, sizeof step, " waits for %s (%s)", op_label(p, next, name, sizeof name), edge_reason[why]);
        if (len + strlen(step) + 40 >= sizeof msg) {
            snprintf(msg + len, sizeof msg - len, " ... (a cycle of %zu ops)", n);
            break;
        }
        memcpy(msg + len, step, strlen(step) + 1);
        len += strlen(step);
    }
    lt_status st = lt_fail(err, LT_ERR_INPUT, "schedule", "%s", msg);
    lt_error_hint(err, "a stage's op list runs these ops against the dependency rules of plans/schedule.h; "
                       "reorder them");
    return st;
}

/* Step 5: start and finish by the longest path, in the order a depth-first walk over
 * predecessors finishes the ops (SlimPack Alg. 1). */
static lt_status longest_path(lt_sim *sim, sim_priv *p, size_t n, lt_error *err) {
    memset(p->state, 0, n);
    for (uint32_t root = 0; root < n; root++) {
        if (p->state[root]) continue;
        size_t top = 0;
        p->stack[0] = root;
        p->state[root] = 1;
        p->cursor[root] = p->pred_off[root];
        for (;;) {
            uint32_t v = p->stack[top];
            if (p->cursor[v] < p->pred_off[v + 1]) {
                uint32_t q = p->pred[p->cursor[v]++];
                if (p->state[q] == 0) {
                    p->state[q] = 1;
                    p->cursor[q] = p->pred_off[q];
                    p->stack[++top] = q;
                } else if (p->state[q] == 1) {
                    size_t from = top;
                    while (p->stack[from] != q) from--;
                    return report_cycle(p, from, top, err);
                }
                continue;
            }
            double start = 0;
            uint32_t det = NONE;
            for (uint32_t i = p->pred_off[v]; i < p->pred_off[v + 1]; i++) {
                double t = sim->finish[p->pred[i]] + p->comm[i];
                if (t > start) {
                    start = t;
                    det = p->pred[i];
                }
            }
            sim->start[v] = start;
            sim->finish[v] = start + p->cost[v].time;
            p->det[v] = det;
            p->state[v] = 2;
            if (top == 0) break;
            top--;
        }
    }
    return LT_OK;
}

/* Min-heap of pending frees by time. */
static void heap_push(sim_priv *p, size_t *n, mem_free x) {
    if (*n + 1 > p->cap_heap) {
        p->cap_heap = next_cap(p->cap_heap, *n + 16);
        RESIZE(p->heap, p->cap_heap);
    }
    size_t i = (*n)++;
    while (i > 0 && p->heap[(i - 1) / 2].time > x.time) {
        p->heap[i] = p->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    p->heap[i] = x;
}

static mem_free heap_pop(sim_priv *p, size_t *n) {
    mem_free top = p->heap[0], x = p->heap[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && p->heap[c + 1].time < p->heap[c].time) c++;
        if (p->heap[c].time >= x.time) break;
        p->heap[i] = p->heap[c];
        i = c;
    }
    if (*n) p->heap[i] = x;
    return top;
}

/* Asymmetric schedules: the bytes B op v frees at its end, a share of each F it takes
 * activations from (its tokens / the F's unit's tokens), the last taker of an F the rest. */
static double free_shares(sim_priv *p, uint32_t v) {
    double freed = 0;
    for (uint32_t e = p->pred_off[v]; e < p->pred_off[v + 1]; e++) {
        if (p->kind[e] != EDGE_ACT) continue;
        uint32_t f = p->pred[e];
        double part = --p->takers[f] == 0 ? p->held[f] : (p->cost[f].act_bytes + p->cost[f].kv_bytes) * p->frac[e];
        p->held[f] -= part;
        freed += part;
    }
    return freed;
}

/* Step 6: the memory timeline of each stage, swept in program order (see plans/sim.h). All
 * allocations happen at op starts of the stage, so the peak is reached right after one. */
static lt_status sweep_memory(lt_sim *sim, sim_priv *p, const lt_schedule *s, const lt_sim_costs *c, lt_error *err) {
    for (int st = 0; st < s->stages; st++) {
        double base = c->base_bytes ? c->base_bytes(c->ctx, st) : 0;
        if (bad_value(base))
            return lt_fail(err, LT_ERR_INPUT, "schedule", "cost model: base bytes of stage %d are %g", st, base);
        double live = base, peak = base;
        size_t pending = 0;
        for (size_t v = sim->first_op[st]; v < sim->first_op[st + 1]; v++) {
            const lt_op_cost *oc = &p->cost[v];
            while (pending && p->heap[0].time <= sim->start[v]) live -= heap_pop(p, &pending).bytes;
            live += oc->work_bytes;
            if (p->op[v]->kind == LT_OP_F) live += oc->act_bytes;
            if (p->op[v]->kind != LT_OP_B && p->inst[v] == 0) {
                live += oc->kv_bytes;
                uint32_t b = p->kv_end[v];
                if (b != NONE && p->stage[b] != (uint32_t)st)
                    heap_push(p, &pending, (mem_free){sim->finish[b], oc->kv_bytes});
            }
            if (live > peak) peak = live;
            live -= oc->work_bytes;
            if (p->act_of[v] != NONE) live -= p->cost[p->act_of[v]].act_bytes;
            if (p->kv_of[v] != NONE) live -= p->cost[p->kv_of[v]].kv_bytes;
            if (p->asym && p->op[v]->kind == LT_OP_B) live -= free_shares(p, (uint32_t)v);
        }
        while (pending) live -= heap_pop(p, &pending).bytes;
        sim->peak_mem[st] = peak;
        sim->end_mem[st] = live;
    }
    return LT_OK;
}

lt_status lt_sim_run(lt_sim *sim, const lt_schedule *s, const lt_sim_costs *costs, lt_error *err) {
    lt_status st = lt_schedule_check(s, err);
    if (st) return st;
    if (s->layers > (1 << 28)) return lt_fail(err, LT_ERR_INPUT, "schedule", "%d layers: too many", s->layers);
    size_t n = lt_schedule_n_ops(s);
    size_t n_bunits = s->asym ? s->n_bunits : 0, n_bslices = s->asym ? s->n_bslices : 0;
    if (n >= NONE / 2 || s->n_units + n_bunits >= NONE || s->n_slices + n_bslices >= NONE)
        return lt_fail(err, LT_ERR_INPUT, "schedule", "%zu ops, %zu units, %zu slices: too many", n,
                       s->n_units + n_bunits, s->n_slices + n_bslices);
    sim_priv *p = priv_of(sim);
    p->asym = s->asym;
    p->n_fwd = (uint32_t)s->n_units;
    p->n_keys = s->n_units + n_bunits;
    reserve_ops(sim, p, n, s->stages);
    reserve_units(p, p->n_keys);
    reserve_slices(p, s->n_slices + n_bslices);
    sim->stages = s->stages;
    sim->n_ops = n;
    sim->step_time = 0;
    sim->bubble_ratio = 0;
    sim->n_critical = 0;

    if ((st = collect_ops(sim, p, s, costs, err))) return st;
    if ((st = build_index(p, n, err))) return st;
    if ((st = build_neighbours(p, s, err))) return st;
    if ((st = build_edges(sim, p, s, costs, n, err))) return st;
    if ((st = longest_path(sim, p, n, err))) return st;
    if ((st = sweep_memory(sim, p, s, costs, err))) return st;

    uint32_t last = NONE;
    for (uint32_t v = 0; v < n; v++)
        if (last == NONE || sim->finish[v] > sim->finish[last]) last = v;
    if (last != NONE) {
        sim->step_time = sim->finish[last];
        size_t len = 0;
        for (uint32_t v = last; v != NONE; v = p->det[v]) len++;
        sim->n_critical = len;
        for (uint32_t v = last; v != NONE; v = p->det[v]) sim->critical[--len] = v;
    }
    if (sim->step_time > 0) {
        double idle = 0;
        for (int i = 0; i < s->stages; i++) idle += sim->step_time - sim->busy[i];
        sim->bubble_ratio = idle / ((double)s->stages * sim->step_time);
    }
    return LT_OK;
}

/* ---- output ---- */

void lt_sim_print_timeline(FILE *f, const lt_sim *sim, const lt_schedule *s, int width) {
    enum { MARGIN = 7 };
    if (width < 10) width = 10;
    if (width > 10000) width = 10000;
    /* step_time and op times come from lt_sim_run, or from a stored plan (plans/store.h),
     * which may be damaged: anything not finite or negative is drawn as 0 / off the end. */
    double col = sim->step_time > 0 && isfinite(sim->step_time) ? sim->step_time / width : 1;
    char *row = lt_malloc_check((size_t)width + MARGIN + 2);

    /* scale: tick labels, then the ruler */
    memset(row, ' ', (size_t)width + MARGIN + 1);
    memcpy(row, "time", 4);
    size_t used = 0; /* first column free for a label */
    for (int c = 0; c <= width; c += 10) {
        char lab[32];
        int len = snprintf(lab, sizeof lab, "%.4g", c * col);
        if ((size_t)c < used || c + len > width + 1) continue;
        memcpy(row + MARGIN + c, lab, (size_t)len);
        used = (size_t)(c + len + 1);
    }
    int end = MARGIN + width + 1;
    while (end > 0 && row[end - 1] == ' ') end--;
    fprintf(f, "%.*s\n", end, row);
    memset(row, ' ', MARGIN);
    for (int c = 0; c <= width; c++) row[MARGIN + c] = (c % 10 == 0 || c == width) ? '+' : '-';
    fprintf(f, "%.*s\n", MARGIN + width + 1, row);

    for (int st = 0; st < sim->stages && st < s->stages; st++) {
        memset(row, ' ', MARGIN);
        char lab[16];
        int len = snprintf(lab, sizeof lab, "s%d", st);
        memcpy(row, lab, (size_t)(len < MARGIN ? len : MARGIN - 1));
        char *cells = row + MARGIN;
        memset(cells, '.', (size_t)width);
        for (size_t v = sim->first_op[st]; v < sim->first_op[st + 1]; v++) {
            const lt_op *op = &s->stage[st].ops[v - sim->first_op[st]];
            double x0 = sim->start[v] / col + 0.5, x1 = sim->finish[v] / col + 0.5;
            if (!(x0 >= 0)) x0 = 0; /* NaN too */
            if (!(x1 >= 0)) x1 = 0;
            if (x0 > width + 1.0) x0 = width + 1.0;
            if (x1 > width + 1.0) x1 = width + 1.0;
            int c0 = (int)floor(x0), c1 = (int)floor(x1);
            if (c0 > width) c0 = width;
            if (c1 > width) c1 = width;
            if (c1 <= c0) {
                if (c0 >= width || cells[c0] != '.') continue;
                c1 = c0 + 1;
            }
            char fill = op->kind == LT_OP_B ? '=' : op->kind == LT_OP_FK ? '~' : '-';
            char num[16];
            int nl = snprintf(num, sizeof num, "%u", op->unit);
            memset(cells + c0, fill, (size_t)(c1 - c0));
            if (nl <= c1 - c0) memcpy(cells + c0, num, (size_t)nl);
        }
        fprintf(f, "%.*s\n", MARGIN + width, row);
    }
    fprintf(f, "%*sF: unit then '-'  FK: unit then '~'  B: %s then '='  idle '.'  (step %g, 1 column = %g)\n",
            MARGIN, "", s->asym ? "bunit" : "unit", sim->step_time, col);
    free(row);
}

/* Text for an SVG/XML document: markup characters escaped, control characters (not allowed
 * in XML 1.0) replaced by '?'. */
static void svg_text(FILE *f, const char *t) {
    for (; *t; t++) {
        unsigned char ch = (unsigned char)*t;
        switch (ch) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default: fputc(ch < 0x20 && ch != '\t' && ch != '\n' ? '?' : ch, f);
        }
    }
}

/* A tick spacing of 1, 2 or 5 times a power of ten giving about 10 ticks over `span`. */
static double tick_step(double span) {
    if (!(span > 0)) return 1;
    double raw = span / 10, mag = pow(10, floor(log10(raw)));
    double r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

lt_status lt_sim_write_svg(FILE *f, const lt_sim *sim, const lt_schedule *s, const char *title, lt_error *err) {
    enum { LEFT = 56, RIGHT = 24, TOP = 44, LANE = 26, GAP = 6, CHART = 1000, AXIS = 36, LEGEND = 26 };
    static const char *const fill[] = {"#4e79a7", "#a0cbe8", "#f28e2b"}; /* F, FK, B */
    int stages = sim->stages < s->stages ? sim->stages : s->stages;
    double span = sim->step_time > 0 ? sim->step_time : 1;
    double scale = CHART / span;
    int lanes_h = stages * (LANE + GAP);
    int width = LEFT + CHART + RIGHT, height = TOP + lanes_h + AXIS + LEGEND;

    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"sans-serif\" font-size=\"11\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            width, height, width, height);
    fprintf(f, "<text x=\"%d\" y=\"18\" font-size=\"14\" font-weight=\"bold\">", LEFT);
    svg_text(f, title ? title : "pipeline schedule");
    fprintf(f, "</text>\n<text x=\"%d\" y=\"34\">step %.6g, bubble ratio %.4f, %zu ops</text>\n", LEFT, sim->step_time,
            sim->bubble_ratio, sim->n_ops);

    /* time axis: grid lines and labels */
    double tick = tick_step(span);
    int axis_y = TOP + lanes_h;
    fprintf(f, "<g stroke=\"#cccccc\" stroke-width=\"0.5\">\n");
    for (int i = 0; i * tick <= span * (1 + 1e-9); i++)
        fprintf(f, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\"/>\n", LEFT + i * tick * scale, TOP,
                LEFT + i * tick * scale, axis_y + 4);
    fprintf(f, "</g>\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", LEFT, axis_y,
            LEFT + CHART, axis_y);
    fprintf(f, "<g text-anchor=\"middle\">\n");
    for (int i = 0; i * tick <= span * (1 + 1e-9); i++)
        fprintf(f, "<text x=\"%.2f\" y=\"%d\">%.6g</text>\n", LEFT + i * tick * scale, axis_y + 16, i * tick);
    fprintf(f, "<text x=\"%d\" y=\"%d\">time</text>\n</g>\n", LEFT + CHART / 2, axis_y + 30);

    /* lanes and boxes */
    bool *crit = lt_calloc_check(sim->n_ops ? sim->n_ops : 1, sizeof *crit);
    for (size_t i = 0; i < sim->n_critical; i++) crit[sim->critical[i]] = true;
    for (int st = 0; st < stages; st++) {
        int y = TOP + st * (LANE + GAP);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">s%d</text>\n", LEFT - 8, y + LANE / 2 + 4, st);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f4f4f4\"/>\n", LEFT, y, CHART, LANE);
        for (size_t v = sim->first_op[st]; v < sim->first_op[st + 1]; v++) {
            const lt_op *op = &s->stage[st].ops[v - sim->first_op[st]];
            char name[64];
            lt_op_name(op, name, sizeof name);
            double x = LEFT + sim->start[v] * scale, w = (sim->finish[v] - sim->start[v]) * scale;
            fprintf(f, "<g><title>");
            svg_text(f, name);
            fprintf(f, "@s%d: %.6g to %.6g%s</title><rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                       "fill=\"%s\" stroke=\"white\" stroke-width=\"0.5\"/>",
                    st, sim->start[v], sim->finish[v], crit[v] ? " (critical path)" : "", x, y, w, LANE,
                    fill[op->kind <= LT_OP_B ? op->kind : 0]);
            if (w >= 6.5 * (double)strlen(name) + 4) {
                fprintf(f, "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\" fill=\"%s\">", x + w / 2, y + LANE / 2 + 4,
                        op->kind == LT_OP_FK ? "black" : "white");
                svg_text(f, name);
                fprintf(f, "</text>");
            }
            fprintf(f, "</g>\n");
        }
    }
    /* the critical path, outlined on top */
    fprintf(f, "<g fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\">\n");
    for (size_t i = 0; i < sim->n_critical; i++) {
        size_t v = sim->critical[i];
        int st;
        size_t idx;
        lt_sim_op_at(sim, v, &st, &idx);
        fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\"/>\n", LEFT + sim->start[v] * scale,
                TOP + st * (LANE + GAP) + 1, (sim->finish[v] - sim->start[v]) * scale, LANE - 2);
    }
    fprintf(f, "</g>\n");
    free(crit);

    /* legend */
    int ly = height - 10;
    const char *const legend[] = {"F forward", "FK forward keeping K/V",
                                  s->asym ? "B backward (bunit)" : "B backward"};
    for (int k = 0; k < 3; k++) {
        int lx = LEFT + k * 190;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"10\" fill=\"%s\"/>", lx, ly - 9, fill[k]);
        fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", lx + 18, ly, legend[k]);
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"10\" fill=\"none\" stroke=\"#d62728\" "
               "stroke-width=\"2\"/><text x=\"%d\" y=\"%d\">critical path</text>\n",
            LEFT + 570, ly - 9, LEFT + 588, ly);
    fprintf(f, "</svg>\n");
    if (ferror(f)) return lt_fail(err, LT_ERR_IO, NULL, "writing the SVG timeline failed");
    return LT_OK;
}
