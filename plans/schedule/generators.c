/*
 * plans/schedule/generators.c — the classic pipeline schedules over the one schedule representation
 * (plans/schedule/schedule.h): units from sample lengths (whole, sliced, ChunkFlow chunks), and the
 * per-stage op lists of GPipe, 1F1B, Seq1F1B, ChunkFlow's state-aware 1F1B, SlimPack's
 * PackFlow over an asymmetric schedule, several 1F1B pipelines in sequence (InfiniPipe
 * 3.3.1) and HelixPipe's two-fold FILO.
 *
 * Every 1F1B-family generator is one merge (merge_1f1b): a stream of forward-family
 * ops and a stream of backward ops, both the same on every stage, merged per stage so that
 * stage s keeps P - s - 1 more forwards in flight than the last stage. Their order within a
 * stage is the only thing a generator decides; dependencies are the simulator's (schedule.h).
 *
 * Why the merge cannot deadlock: on every stage the forwards run in the stream's order and
 * the backwards in theirs; before its j-th backward stage s has issued f_s(j) forwards, the
 * forward of that backward's unit among them, and f_s(j) >= f_{s+1}(j) (one more warm-up
 * forward per earlier stage), so whatever the j-th backward of stage s + 1 waits for was
 * issued on stage s before stage s's j-th backward. The slice rules hold because the
 * forward stream keeps each sample's slices in token order and the backward stream
 * reverses them (FILO within a sample, Seq1F1B; ChunkFlow 4.2). PackFlow's backwards
 * consume the forwards of several units: need(j) counts up to the last of them, so the
 * same argument holds (the caller orders the bunits FILO within every sample).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h"               /* LT_CHECK, lt_malloc_check, lt_fail */
#include "lib/model.h"               /* lt_helix_part_stage */
#include "plans/schedule/schedule.h" /* lt_schedule, lt_op */

/* ---- units from lengths --------------------------------------------------------------- */

void lt_sched_units_whole(lt_schedule *s, const int64_t *lengths, size_t n) {
    LT_CHECK(n <= (size_t)INT32_MAX); /* sample ids are int32_t */
    for (size_t i = 0; i < n; i++) {
        LT_CHECK(lengths[i] > 0);
        uint32_t sl = lt_schedule_add_slice(s, (int32_t)i, 0, lengths[i]);
        lt_schedule_add_unit(s, sl, 1);
    }
}

void lt_sched_units_sliced(lt_schedule *s, const int64_t *lengths, size_t n, int k) {
    LT_CHECK(n <= (size_t)INT32_MAX); /* sample ids are int32_t */
    LT_CHECK(k >= 1);
    for (size_t i = 0; i < n; i++) {
        int64_t len = lengths[i];
        LT_CHECK(len > 0);
        int64_t nk = len < k ? len : k; /* never an empty slice */
        int64_t base = len / nk, extra = len % nk, begin = 0;
        for (int64_t j = 0; j < nk; j++) {
            int64_t end = begin + base + (j < extra ? 1 : 0); /* the first len mod k slices one token more */
            uint32_t sl = lt_schedule_add_slice(s, (int32_t)i, begin, end);
            lt_schedule_add_unit(s, sl, 1);
            begin = end;
        }
    }
}

/* A short sample waiting for a bin (ChunkFlow Alg. 1 line 4). */
typedef struct bin_item {
    int64_t len;
    size_t sample;
} bin_item;

static int cmp_item_desc(const void *a, const void *b) {
    const bin_item *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? 1 : -1;
    return (x->sample > y->sample) - (x->sample < y->sample);
}

/* First-fit decreasing over items sorted by decreasing length: bin index per item in
 * bin_of; returns the number of bins. */
static size_t pack_ffd(const bin_item *it, size_t n, int64_t cap, size_t *bin_of, int64_t *load) {
    size_t bins = 0;
    for (size_t i = 0; i < n; i++) {
        size_t b = 0;
        while (b < bins && load[b] + it[i].len > cap) b++;
        if (b == bins) load[bins++] = 0;
        load[b] += it[i].len;
        bin_of[i] = b;
    }
    return bins;
}

/* Backtracking search for a packing into exactly `bins` bins (items sorted by decreasing
 * length), iterative (a batch may hold many short samples). Symmetry: an item never tries
 * two bins of equal load, and tries at most the first empty bin. Gives up (false) once
 * *budget steps (bins looked at) are spent. next[i]: the next bin item i tries. */
static bool pack_exact(const bin_item *it, size_t n, int64_t cap, size_t bins, int64_t *load, size_t *bin_of,
                       size_t *next, long budget) {
    size_t i = 0;
    next[0] = 0;
    for (;;) {
        if (i == n) return true;
        bool placed = false;
        for (size_t b = next[i]; b < bins && !placed; b++) {
            if ((budget -= 1 + (long)b) < 0) return false;
            if (load[b] + it[i].len > cap) continue;
            bool seen = false;
            for (size_t c = 0; c < b && !seen; c++) seen = load[c] == load[b];
            if (seen) continue;
            load[b] += it[i].len;
            bin_of[i] = b;
            next[i] = b + 1;
            placed = true;
        }
        if (placed) {
            if (++i < n) next[i] = 0;
            continue;
        }
        if (i == 0) return false;
        i--; /* backtrack: take item i out of its bin, try its next one */
        load[bin_of[i]] -= it[i].len;
        if (load[bin_of[i]] == 0) next[i] = bins; /* every later bin is empty too: same subtree */
    }
}

/* Steps the exact search may take per bin count before first-fit decreasing's answer is
 * taken (a few milliseconds; keeps the planner's inner loop bounded for large batches). */
#define PACK_BUDGET 2000000L

/* Packed items in output order: by bin, then sample. */
static int cmp_packed(const void *a, const void *b) {
    const size_t *x = a, *y = b; /* {bin, sample, len} */
    if (x[0] != y[0]) return (x[0] > y[0]) - (x[0] < y[0]);
    return (x[1] > y[1]) - (x[1] < y[1]);
}

void lt_sched_units_chunked(lt_schedule *s, const int64_t *lengths, size_t n, int64_t chunk_size) {
    lt_sched_units_chunked_budget(s, lengths, n, chunk_size, PACK_BUDGET);
}

void lt_sched_units_chunked_budget(lt_schedule *s, const int64_t *lengths, size_t n, int64_t chunk_size,
                                   long budget) {
    LT_CHECK(n <= (size_t)INT32_MAX); /* sample ids are int32_t */
    LT_CHECK(chunk_size > 0);
    LT_CHECK(budget >= 0);
    bin_item *items = lt_malloc_check((n ? n : 1) * sizeof *items);
    size_t n_short = 0;
    int64_t total_short = 0;
    /* Alg. 1 lines 3-7: a sample longer than ChunkSize becomes ChunkSize pieces (the last
     * one the remainder), its chunks first, in the samples' order. */
    for (size_t i = 0; i < n; i++) {
        int64_t len = lengths[i];
        LT_CHECK(len > 0);
        if (len <= chunk_size) {
            items[n_short++] = (bin_item){len, i};
            total_short += len;
            continue;
        }
        for (int64_t b = 0; b < len; b += chunk_size) {
            uint32_t sl = lt_schedule_add_slice(s, (int32_t)i, b, b + chunk_size < len ? b + chunk_size : len);
            lt_schedule_add_unit(s, sl, 1);
        }
    }
    if (n_short == 0) {
        free(items);
        return;
    }
    /* Alg. 1 lines 8-10: the fewest bins of capacity ChunkSize. Bin counts below the volume
     * bound ceil(sum / ChunkSize) cannot work; first-fit decreasing gives an upper bound;
     * each count in between is tried with the exact search. */
    qsort(items, n_short, sizeof *items, cmp_item_desc);
    size_t *bin_of = lt_malloc_check(n_short * sizeof *bin_of);
    size_t *try_of = lt_malloc_check(n_short * sizeof *try_of);
    size_t *next = lt_malloc_check(n_short * sizeof *next);
    int64_t *load = lt_malloc_check(n_short * sizeof *load);
    size_t bins = pack_ffd(items, n_short, chunk_size, bin_of, load);
    size_t lower = (size_t)((total_short + chunk_size - 1) / chunk_size);
    for (size_t cnt = lower; cnt < bins; cnt++) {
        memset(load, 0, cnt * sizeof *load);
        if (pack_exact(items, n_short, chunk_size, cnt, load, try_of, next, budget)) {
            memcpy(bin_of, try_of, n_short * sizeof *bin_of);
            bins = cnt;
            break;
        }
    }
    /* Alg. 1 lines 11-13: one chunk per bin, its samples in increasing sample order. */
    size_t(*packed)[3] = lt_malloc_check(n_short * sizeof *packed);
    for (size_t i = 0; i < n_short; i++) {
        packed[i][0] = bin_of[i];
        packed[i][1] = items[i].sample;
        packed[i][2] = (size_t)items[i].len;
    }
    qsort(packed, n_short, sizeof *packed, cmp_packed);
    for (size_t i = 0; i < n_short;) {
        uint32_t first = (uint32_t)s->n_slices, count = 0;
        size_t b = packed[i][0];
        for (; i < n_short && packed[i][0] == b; i++, count++)
            lt_schedule_add_slice(s, (int32_t)packed[i][1], 0, (int64_t)packed[i][2]);
        lt_schedule_add_unit(s, first, count);
    }
    free(packed);
    free(next);
    free(load);
    free(try_of);
    free(bin_of);
    free(items);
}

/* ---- shared helpers --------------------------------------------------------------------- */

/* The order to use: `order` or 0..n-1, checked (in range of the `count` units, no unit
 * twice). Free the result. */
static uint32_t *resolve_order_of(size_t count, const uint32_t *order, size_t n) {
    uint32_t *o = lt_malloc_check((n ? n : 1) * sizeof *o);
    unsigned char *seen = lt_calloc_check(count ? count : 1, 1);
    for (size_t i = 0; i < n; i++) {
        o[i] = order ? order[i] : (uint32_t)i;
        LT_CHECK(o[i] < count);
        LT_CHECK(!seen[o[i]]);
        seen[o[i]] = 1;
    }
    free(seen);
    return o;
}

/* resolve_order_of over the forward units. */
static uint32_t *resolve_order(const lt_schedule *s, const uint32_t *order, size_t n) {
    return resolve_order_of(s->n_units, order, n);
}

/* One forward-family op of the forward stream. */
typedef struct fwd_op {
    uint8_t kind; /* LT_OP_F or LT_OP_FK */
    uint32_t unit;
} fwd_op;

/*
 * The 1F1B merge. fw[0..nf) is the forward stream, bw[0..nb) the units of the backward
 * stream (bunits in an asymmetric schedule), need[j] (non-decreasing, >= 1) how many
 * forwards of the stream it takes to include every forward backwards 0..j consume. Stage s
 * (w = P - s - 1 warm-up forwards in plain 1F1B) issues, before its j-th backward,
 *     f_s(j) = min(nf, max(f_s(j-1) + 1, need(j) + w)),   f_s(-1) = w,
 * forwards: one more forward per backward in the steady phase, and w more than the last
 * stage needs to start backward j. For whole units need(j) = j + 1 and this is Megatron's
 * 1F1B (warm-up w, then one F one B, then the cool-down). When a sample of N slices must be
 * forwarded entirely before its first backward, stage s holds w + N units at once:
 * InfiniPipe Eq. 7, |W_p(t)| = d_p - p + N_prefill (p counted from 1).
 */
static void merge_1f1b(lt_schedule *s, const fwd_op *fw, size_t nf, const uint32_t *bw, size_t nb,
                       const size_t *need) {
    for (int st = 0; st < s->stages; st++) {
        size_t w = (size_t)(s->stages - st - 1), issued = 0, f = w;
        for (size_t j = 0; j < nb; j++) {
            size_t want = f + 1 > need[j] + w ? f + 1 : need[j] + w;
            f = want < nf ? want : nf;
            for (; issued < f; issued++)
                lt_schedule_add_stage_op(s, st, (lt_op_kind)fw[issued].kind, fw[issued].unit, 0);
            lt_schedule_add_stage_op(s, st, LT_OP_B, bw[j], 0);
        }
        for (; issued < nf; issued++)
            lt_schedule_add_stage_op(s, st, (lt_op_kind)fw[issued].kind, fw[issued].unit, 0);
    }
}

/* The merge of a symmetric schedule: each bw unit has exactly one F (kind LT_OP_F) in fw,
 * and need(j) = 1 + the largest stream position of the F of bw[0..j]. */
static void interleave_1f1b(lt_schedule *s, const fwd_op *fw, size_t nf, const uint32_t *bw, size_t nb) {
    size_t *pos_f = lt_malloc_check((s->n_units ? s->n_units : 1) * sizeof *pos_f);
    for (size_t u = 0; u < s->n_units; u++) pos_f[u] = SIZE_MAX;
    for (size_t i = 0; i < nf; i++)
        if (fw[i].kind == LT_OP_F) pos_f[fw[i].unit] = i;
    size_t *need = lt_malloc_check((nb ? nb : 1) * sizeof *need);
    size_t mx = 0;
    for (size_t j = 0; j < nb; j++) {
        LT_CHECK(pos_f[bw[j]] != SIZE_MAX);
        if (pos_f[bw[j]] + 1 > mx) mx = pos_f[bw[j]] + 1;
        need[j] = mx;
    }
    merge_1f1b(s, fw, nf, bw, nb, need);
    free(need);
    free(pos_f);
}

/* A (sample, position in the order) pair for finding the units that share a sample. */
typedef struct sample_pos {
    int32_t sample;
    uint32_t pos;
} sample_pos;

static int cmp_sample_pos(const void *a, const void *b) {
    const sample_pos *x = a, *y = b;
    if (x->sample != y->sample) return (x->sample > y->sample) - (x->sample < y->sample);
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static uint32_t find_root(uint32_t *parent, uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
}

/*
 * The dependent groups of the order o[0..n): units linked through a sample they share (the
 * slices of one long sample, ChunkFlow 4.2's dependent chunks, with any short samples packed
 * beside a slice). Fills group[i] = the group of o[i], numbered 0.. by first appearance,
 * rank[i] = o[i]'s index within its group, size[g] = units in group g; returns the number
 * of groups. A unit holding whole samples only is a group of one (a standalone chunk).
 */
static size_t dependent_groups(const lt_schedule *s, const uint32_t *o, size_t n, uint32_t *group, uint32_t *rank,
                               uint32_t *size) {
    size_t np = 0;
    for (size_t i = 0; i < n; i++) np += s->units[o[i]].n_slices;
    sample_pos *sp = lt_malloc_check((np ? np : 1) * sizeof *sp);
    uint32_t *parent = lt_malloc_check((n ? n : 1) * sizeof *parent);
    np = 0;
    for (size_t i = 0; i < n; i++) {
        parent[i] = (uint32_t)i;
        const lt_unit *un = &s->units[o[i]];
        for (uint32_t k = 0; k < un->n_slices; k++)
            sp[np++] = (sample_pos){s->slices[un->first_slice + k].sample, (uint32_t)i};
    }
    qsort(sp, np, sizeof *sp, cmp_sample_pos);
    for (size_t k = 1; k < np; k++)
        if (sp[k].sample == sp[k - 1].sample) {
            uint32_t a = find_root(parent, sp[k].pos), b = find_root(parent, sp[k - 1].pos);
            if (a != b) parent[a > b ? a : b] = a > b ? b : a; /* the root is the group's first unit */
        }
    uint32_t *id_of_root = lt_malloc_check((n ? n : 1) * sizeof *id_of_root);
    size_t groups = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = find_root(parent, (uint32_t)i);
        if (r == i) {
            id_of_root[i] = (uint32_t)groups;
            size[groups++] = 0;
        }
        group[i] = id_of_root[r];
        rank[i] = size[group[i]]++;
    }
    free(id_of_root);
    free(parent);
    free(sp);
    return groups;
}

/*
 * The streams of the slice-aware 1F1B (Seq1F1B; ChunkFlow 4.3 with K): forwards in the
 * order's order, a group of N units running FK over its first N - K (when N > K, k > 0)
 * and, right after its last unit, F again over those N - K in reverse (ChunkFlow Alg. 2
 * lines 24-29, reversed so that each backward finds its successor's dK/dV); backwards of a
 * group all at its last unit, in reverse order (FILO within a sample). k <= 0: no FK
 * (Seq1F1B, every activation kept).
 */
static void slice_1f1b(lt_schedule *s, const uint32_t *o, size_t n, int k) {
    uint32_t *group = lt_malloc_check((n ? n : 1) * sizeof *group);
    uint32_t *rank = lt_malloc_check((n ? n : 1) * sizeof *rank);
    uint32_t *size = lt_malloc_check((n ? n : 1) * sizeof *size);
    size_t groups = dependent_groups(s, o, n, group, rank, size);
    /* members[first[g] + r] = the unit of rank r of group g */
    size_t *first = lt_malloc_check((groups + 1) * sizeof *first);
    first[0] = 0;
    for (size_t g = 0; g < groups; g++) first[g + 1] = first[g] + size[g];
    uint32_t *members = lt_malloc_check((n ? n : 1) * sizeof *members);
    for (size_t i = 0; i < n; i++) members[first[group[i]] + rank[i]] = o[i];

    fwd_op *fw = lt_malloc_check((2 * n + 1) * sizeof *fw);
    uint32_t *bw = lt_malloc_check((n ? n : 1) * sizeof *bw);
    size_t nf = 0, nb = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t g = group[i], N = size[g];
        uint32_t kept = k > 0 && N > (uint32_t)k ? (uint32_t)k : N; /* units whose first F keeps activations */
        bool dropped = rank[i] < N - kept;
        fw[nf++] = (fwd_op){dropped ? LT_OP_FK : LT_OP_F, o[i]};
        if (rank[i] != N - 1) continue;
        for (uint32_t r = N - kept; r-- > 0;) fw[nf++] = (fwd_op){LT_OP_F, members[first[g] + r]};
        for (uint32_t r = N; r-- > 0;) bw[nb++] = members[first[g] + r];
    }
    interleave_1f1b(s, fw, nf, bw, nb);
    free(bw);
    free(fw);
    free(members);
    free(first);
    free(size);
    free(rank);
    free(group);
}

/* ---- generators ------------------------------------------------------------------------- */

void lt_sched_gpipe(lt_schedule *s, const uint32_t *order, size_t n) {
    uint32_t *o = resolve_order(s, order, n);
    for (int st = 0; st < s->stages; st++) {
        for (size_t i = 0; i < n; i++) lt_schedule_add_stage_op(s, st, LT_OP_F, o[i], 0);
        for (size_t i = n; i-- > 0;) lt_schedule_add_stage_op(s, st, LT_OP_B, o[i], 0);
    }
    free(o);
}

void lt_sched_1f1b(lt_schedule *s, const uint32_t *order, size_t n) {
    uint32_t *o = resolve_order(s, order, n);
    fwd_op *fw = lt_malloc_check((n ? n : 1) * sizeof *fw);
    for (size_t i = 0; i < n; i++) fw[i] = (fwd_op){LT_OP_F, o[i]};
    interleave_1f1b(s, fw, n, o, n); /* backwards in forward order */
    free(fw);
    free(o);
}

void lt_sched_seq1f1b(lt_schedule *s, const uint32_t *order, size_t n) {
    uint32_t *o = resolve_order(s, order, n);
    slice_1f1b(s, o, n, 0);
    free(o);
}

void lt_sched_chunkflow(lt_schedule *s, const uint32_t *order, size_t n, int k) {
    LT_CHECK(k >= 1);
    uint32_t *o = resolve_order(s, order, n);
    slice_1f1b(s, o, n, k);
    free(o);
}

void lt_sched_packflow(lt_schedule *s, const uint32_t *forder, size_t nf, const uint32_t *border, size_t nb) {
    uint32_t *fo = resolve_order(s, forder, nf), *bo = resolve_order_of(s->n_bunits, border, nb);
    size_t *pos_f = lt_malloc_check((s->n_units ? s->n_units : 1) * sizeof *pos_f);
    for (size_t u = 0; u < s->n_units; u++) pos_f[u] = SIZE_MAX;
    fwd_op *fw = lt_malloc_check((nf ? nf : 1) * sizeof *fw);
    for (size_t i = 0; i < nf; i++) {
        fw[i] = (fwd_op){LT_OP_F, fo[i]};
        pos_f[fo[i]] = i;
    }
    /* SlimPack 4.2 ("the backward pass for a sample can only begin after all of its slices
     * have completed their forward pass"): backward MicroPack j waits for the forwards of
     * every forward MicroPack holding its tokens; when they are not all in yet, the merge
     * issues more forwards first (the extra forward MicroPack of Fig. 9) */
    uint32_t *off, *units;
    int64_t *tokens;
    lt_schedule_bunit_overlaps(s, &off, &units, &tokens);
    size_t *need = lt_malloc_check((nb ? nb : 1) * sizeof *need);
    size_t mx = 0;
    for (size_t j = 0; j < nb; j++) {
        LT_CHECK(off[bo[j]] < off[bo[j] + 1]); /* its tokens are in some forward unit */
        for (uint32_t q = off[bo[j]]; q < off[bo[j] + 1]; q++) {
            LT_CHECK(pos_f[units[q]] != SIZE_MAX); /* ... which is forwarded */
            if (pos_f[units[q]] + 1 > mx) mx = pos_f[units[q]] + 1;
        }
        need[j] = mx;
    }
    merge_1f1b(s, fw, nf, bo, nb, need);
    free(need);
    free(tokens);
    free(units);
    free(off);
    free(fw);
    free(pos_f);
    free(bo);
    free(fo);
}

void lt_sched_multi_1f1b(lt_schedule *s, const uint32_t *order, size_t n, const size_t *group_start,
                         size_t n_groups) {
    uint32_t *o = resolve_order(s, order, n);
    LT_CHECK(n_groups == 0 ? n == 0 : group_start[0] == 0 && group_start[n_groups] == n);
    /* InfiniPipe 3.3.1: pipeline g runs after pipeline g - 1 on every stage. Stage 0's last
     * op of a pipeline is its last backward, which comes after every other op of that
     * pipeline, so the next pipeline starts from a flushed pipe ("we do not exploit
     * pipeline bubbles to overlap these 1F1B pipelines"). */
    for (size_t g = 0; g < n_groups; g++) {
        LT_CHECK(group_start[g] <= group_start[g + 1]);
        slice_1f1b(s, o + group_start[g], group_start[g + 1] - group_start[g], 0);
    }
    free(o);
}

/* One forward op of HelixPipe with its place in the ideal timeline. */
typedef struct helix_op {
    uint64_t key; /* start time in the ideal timeline (see lt_sched_helixpipe_folds) */
    uint32_t seq; /* creation order: ties (only possible when P does not divide L) */
    lt_op op;
} helix_op;

static int cmp_helix(const void *a, const void *b) {
    const helix_op *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

typedef struct helix_lists {
    helix_op **v; /* [stages] */
    size_t *n, *cap;
    uint32_t seq;
} helix_lists;

static void helix_push(helix_lists *h, int stage, uint64_t key, uint8_t part, uint32_t unit, uint32_t layer,
                       uint16_t recompute) {
    if (h->n[stage] == h->cap[stage]) {
        h->cap[stage] = h->cap[stage] ? 2 * h->cap[stage] : 64;
        h->v[stage] = lt_realloc_check(h->v[stage], h->cap[stage] * sizeof *h->v[stage]);
    }
    lt_op op = {.kind = LT_OP_F, .part = part, .recompute_layers = recompute, .unit = unit, .layer_begin = layer,
                .layer_end = layer + 1};
    h->v[stage][h->n[stage]++] = (helix_op){key, h->seq++, op};
}

lt_status lt_sched_helixpipe_folds(lt_schedule *s, const uint32_t *order, size_t n, int folds, int recompute,
                                   lt_error *err) {
    const int P = s->stages, L = s->layers;
    if (folds < 1) return lt_fail(err, LT_ERR_USAGE, "helixpipe", "%d folds: need at least 1", folds);
    size_t per_loop = (size_t)folds * (size_t)P;
    if (n % per_loop != 0)
        return lt_fail(err, LT_ERR_USAGE, "helixpipe",
                       "%zu micro-batches: the %d-fold FILO schedule over %d stages needs a multiple of %zu", n, folds,
                       P, per_loop);
    uint32_t *o = resolve_order(s, order, n);
    helix_lists h = {lt_calloc_check((size_t)P, sizeof *h.v), lt_calloc_check((size_t)P, sizeof *h.n),
                     lt_calloc_check((size_t)P, sizeof *h.cap), 0};
    const uint64_t f = (uint64_t)folds;
    const uint16_t rc = recompute ? 1 : 0;
    /*
     * The ideal timeline (HelixPipe 4.3, Figures 2b and 7), in units where post-attention
     * and pre-attention each take 1 and attention 2. Loop k admits micro-batches
     * o[k*fP .. (k+1)*fP); micro-batch i of a loop sits in slot j = i / folds, place
     * q = i mod folds. Layer l of loop k is global layer g = k*L + l, reached at
     * T(g) = 4*folds*g. Stage l mod P runs, per micro-batch in order, post(l-1) at
     * T(g) + 2(folds*j + q) then pre(l) one later (4.2: "post-attention of layer (l-1) and
     * pre-attention of layer l are concatenated to stage (l mod p)"); the attention of slot
     * j runs on stage (l + j + 1) mod P (4.2, micro-batch i there, the fold's pair here) at
     * T(g) + 2*folds*(j + 1) + 2q. Each stage then works without a gap in the steady phase
     * whatever the real part times are, every op's key is at least its predecessor's key
     * plus that one's duration (so the keys are a topological order: no deadlock), and a
     * stage's list is its ops sorted by key. Layer 0 has no post before it; the
     * post-attention of layer L-1 goes to stage 0 (4.2) at T(k*L + L) + 2(folds*j + q),
     * just before the next loop's pre(0) of the same micro-batch slot.
     */
    for (size_t k = 0; k < n / per_loop; k++) {
        for (int l = 0; l <= L; l++) {
            uint64_t T = 4 * f * ((uint64_t)k * (uint64_t)L + (uint64_t)l);
            for (size_t i = 0; i < per_loop; i++) {
                uint32_t u = o[k * per_loop + i];
                uint64_t j = i / f, q = i % f, slot = 2 * (f * j + q);
                if (l > 0) /* (the last layer's on stage 0) */
                    helix_push(&h, lt_helix_part_stage(l - 1, false, L, P), T + slot, LT_PART_POST, u, (uint32_t)l - 1,
                               rc);
                if (l == L) continue;
                helix_push(&h, lt_helix_part_stage(l, true, L, P), T + slot + 1, LT_PART_PRE, u, (uint32_t)l, rc);
                helix_push(&h, (int)(((uint64_t)l + j + 1) % (uint64_t)P), T + 2 * f * (j + 1) + 2 * q, LT_PART_ATTN, u,
                           (uint32_t)l, 0);
            }
        }
    }
    /* FILO (4.3.1): every forward first, then the backwards in exactly the reverse order of
     * each stage's forwards — the time-reversed ideal timeline, so it is as gap-free. */
    for (int st = 0; st < P; st++) {
        if (h.n[st]) qsort(h.v[st], h.n[st], sizeof *h.v[st], cmp_helix); /* v may be NULL when empty */
        for (size_t i = 0; i < h.n[st]; i++) lt_schedule_add_op(s, st, h.v[st][i].op);
        for (size_t i = h.n[st]; i-- > 0;) {
            lt_op b = h.v[st][i].op;
            b.kind = LT_OP_B;
            lt_schedule_add_op(s, st, b);
        }
        free(h.v[st]);
    }
    free(h.v);
    free(h.n);
    free(h.cap);
    free(o);
    return LT_OK;
}

lt_status lt_sched_helixpipe(lt_schedule *s, const uint32_t *order, size_t n, lt_error *err) {
    return lt_sched_helixpipe_folds(s, order, n, 2, 0, err);
}
