/*
 * train/exec/order.c — the order a pipeline's ops run in (train/exec/internal.h): every op
 * after its predecessors in the dependency graph (plans/schedule/deps.h, Kahn's
 * algorithm), and among ready ops the one the plan predicts to start first. The order is
 * computed before any op runs, so a plan whose ops cannot all run (a cycle: a deadlock) is
 * refused before a gradient is touched.
 */
#include <stdlib.h>

#include "train/exec/internal.h"

typedef struct {
    uint32_t *id;
    size_t n;
    const lt_plan_op *pred; /* predicted times: the heap key */
} op_heap;

static bool before(const op_heap *h, uint32_t a, uint32_t b) {
    double sa = h->pred[a].start_s, sb = h->pred[b].start_s;
    return sa < sb || (sa == sb && a < b);
}

static void heap_push(op_heap *h, uint32_t v) {
    size_t i = h->n++;
    h->id[i] = v;
    while (i > 0 && before(h, h->id[i], h->id[(i - 1) / 2])) {
        uint32_t t = h->id[i];
        h->id[i] = h->id[(i - 1) / 2], h->id[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static uint32_t heap_pop(op_heap *h) {
    uint32_t top = h->id[0];
    h->id[0] = h->id[--h->n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && before(h, h->id[l], h->id[m])) m = l;
        if (r < h->n && before(h, h->id[r], h->id[m])) m = r;
        if (m == i) break;
        uint32_t t = h->id[i];
        h->id[i] = h->id[m], h->id[m] = t;
        i = m;
    }
    return top;
}

lt_status exec_order(const lt_deps *d, const lt_rank_plan *r, uint64_t step, uint32_t *order, lt_error *err) {
    size_t n = d->n_ops;
    uint32_t *indeg = malloc((n + 1) * sizeof *indeg);
    op_heap h = {.id = malloc((n + 1) * sizeof(uint32_t)), .n = 0, .pred = r->ops};
    if (!indeg || !h.id) {
        free(indeg), free(h.id);
        return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory ordering %zu ops", n);
    }
    for (size_t v = 0; v < n; v++) {
        indeg[v] = d->pred_off[v + 1] - d->pred_off[v];
        if (indeg[v] == 0) heap_push(&h, (uint32_t)v);
    }
    size_t done = 0;
    while (h.n > 0) {
        uint32_t v = heap_pop(&h);
        order[done++] = v;
        size_t ns;
        const lt_dep *s = lt_deps_succs(d, v, &ns);
        for (size_t k = 0; k < ns; k++)
            if (--indeg[s[k].op] == 0) heap_push(&h, s[k].op);
    }
    lt_status st = LT_OK;
    if (done < n) {
        for (size_t v = 0; v < n; v++) {
            if (indeg[v] == 0) continue;
            int stage;
            size_t idx;
            lt_deps_op_at(d, v, &stage, &idx);
            size_t np;
            const lt_dep *p = lt_deps_preds(d, v, &np);
            size_t k = 0;
            while (k + 1 < np && indeg[p[k].op] == 0) k++;
            st = lt_fail(err, LT_ERR_INPUT, NULL,
                         "step %llu, pipeline %d, stage %d, op %zu (%s of unit %u): the ops deadlock: it waits for "
                         "stage %u op %u (%s), which waits in turn (%zu of %zu ops can run)",
                         (unsigned long long)step, r->dp_rank, stage, idx, exec_kind_name(d->op[v]->kind),
                         d->op[v]->unit, (unsigned)p[k].stage, (unsigned)p[k].index,
                         lt_dep_kind_name((lt_dep_kind)p[k].kind), done, n);
            break;
        }
    }
    free(indeg), free(h.id);
    return st;
}
