/*
 * plans/strategies/packing.c — best-fit-decreasing packing and equal-cost cuts (plans/strategies/packing.h).
 */
#include "plans/strategies/packing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h" /* LT_CHECK, lt_realloc_check */

/* A sample waiting for a bin. */
typedef struct pack_item {
    int64_t len;
    uint32_t sample;
} pack_item;

void lt_packing_init(lt_packing *p) { memset(p, 0, sizeof *p); }

void lt_packing_free(lt_packing *p) {
    if (!p) return;
    free(p->bin_start);
    free(p->members);
    free(p->bin_tokens);
    free(p->items);
    free(p->bin_of);
    lt_packing_init(p);
}

/* Longest first; equal lengths by increasing sample index (a total order: qsort is not
 * stable, and the packing must not depend on the C library). */
static int cmp_longest_first(const void *a, const void *b) {
    const pack_item *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? 1 : -1;
    return (x->sample > y->sample) - (x->sample < y->sample);
}

static void reserve(lt_packing *p, size_t n) {
    if (n <= p->cap_items) return;
    p->items = lt_realloc_check(p->items, n * sizeof(pack_item));
    p->bin_of = lt_realloc_check(p->bin_of, n * sizeof *p->bin_of);
    p->members = lt_realloc_check(p->members, n * sizeof *p->members);
    /* at most one bin per sample */
    p->bin_start = lt_realloc_check(p->bin_start, (n + 1) * sizeof *p->bin_start);
    p->bin_tokens = lt_realloc_check(p->bin_tokens, n * sizeof *p->bin_tokens);
    p->cap_items = n;
}

void lt_pack_best_fit_decreasing(lt_packing *p, const int64_t *lengths, size_t n, int64_t capacity) {
    LT_CHECK(capacity > 0);
    LT_CHECK(n <= UINT32_MAX);
    reserve(p, n ? n : 1);
    pack_item *it = p->items;
    for (size_t i = 0; i < n; i++) {
        LT_CHECK(lengths[i] >= 1 && lengths[i] <= capacity);
        it[i] = (pack_item){lengths[i], (uint32_t)i};
    }
    qsort(it, n, sizeof *it, cmp_longest_first);
    /* Best fit (Krell et al. 2021): the bin left with the least room that still takes the
     * sample; the earliest such bin on ties. bin_tokens holds the loads meanwhile. */
    size_t bins = 0;
    int64_t *load = p->bin_tokens;
    for (size_t i = 0; i < n; i++) {
        size_t best = bins;
        for (size_t b = 0; b < bins; b++)
            if (load[b] + it[i].len <= capacity && (best == bins || load[b] > load[best])) best = b;
        if (best == bins) load[bins++] = 0;
        load[best] += it[i].len;
        p->bin_of[it[i].sample] = best;
    }
    /* members by bin (a counting sort over increasing sample index, so each bin lists its
     * samples in increasing order); bin_start[b] serves as bin b's cursor, then is shifted
     * back into place */
    memset(p->bin_start, 0, (bins + 1) * sizeof *p->bin_start);
    for (size_t i = 0; i < n; i++) p->bin_start[p->bin_of[i] + 1]++;
    for (size_t b = 0; b < bins; b++) p->bin_start[b + 1] += p->bin_start[b];
    for (size_t i = 0; i < n; i++) p->members[p->bin_start[p->bin_of[i]]++] = (uint32_t)i;
    for (size_t b = bins; b > 0; b--) p->bin_start[b] = p->bin_start[b - 1];
    p->bin_start[0] = 0;
    p->n_bins = bins;
}

/* ---- equal-cost cuts ---- */

/* Cost of the first x tokens of a document: lin x + quad x^2. */
static double prefix_cost(double lin, double quad, double x) { return lin * x + quad * x * x; }

/* The integer x in [0, len] whose prefix cost is nearest to r (the lower on ties). */
static int64_t nearest_position(double lin, double quad, int64_t len, double r) {
    if (!(r > 0)) return 0;
    double x; /* the real root of quad x^2 + lin x = r, in the form without cancellation */
    if (quad > 0)
        x = 2.0 * r / (lin + sqrt(lin * lin + 4.0 * quad * r));
    else
        x = r / lin;
    if (!(x < (double)len)) return len;
    int64_t lo = (int64_t)floor(x);
    if (lo < 0) lo = 0;
    if (lo >= len) return len;
    int64_t hi = lo + 1;
    double dlo = fabs(prefix_cost(lin, quad, (double)lo) - r), dhi = fabs(prefix_cost(lin, quad, (double)hi) - r);
    return dhi < dlo ? hi : lo;
}

void lt_split_equal_cost(const int64_t *doc_len, size_t n_docs, double lin, double quad, int k, int64_t *cuts) {
    LT_CHECK(k >= 1 && lin >= 0 && quad >= 0 && lin + quad > 0);
    int64_t total = 0;
    double total_cost = 0;
    for (size_t d = 0; d < n_docs; d++) {
        LT_CHECK(doc_len[d] > 0);
        total += doc_len[d];
        total_cost += prefix_cost(lin, quad, (double)doc_len[d]);
    }
    LT_CHECK(total >= k);
    cuts[0] = 0;
    cuts[k] = total;
    /* walk the documents once: targets increase with j */
    size_t d = 0;
    int64_t off = 0;   /* first token of document d in the run */
    double before = 0; /* cost of documents 0..d-1 */
    for (int j = 1; j < k; j++) {
        double target = total_cost * j / k;
        while (d + 1 < n_docs && before + prefix_cost(lin, quad, (double)doc_len[d]) < target) {
            before += prefix_cost(lin, quad, (double)doc_len[d]);
            off += doc_len[d];
            d++;
        }
        cuts[j] = off + nearest_position(lin, quad, doc_len[d], target - before);
    }
    /* non-empty pieces: cuts[j] >= cuts[j - 1] + 1, then cuts[j] <= cuts[j + 1] - 1 */
    for (int j = 1; j < k; j++)
        if (cuts[j] < cuts[j - 1] + 1) cuts[j] = cuts[j - 1] + 1;
    for (int j = k - 1; j >= 1; j--)
        if (cuts[j] > cuts[j + 1] - 1) cuts[j] = cuts[j + 1] - 1;
}
