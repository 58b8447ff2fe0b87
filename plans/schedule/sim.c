/*
 * plans/schedule/sim.c — the DAG pipeline simulator (plans/schedule/sim.h; SlimPack 4.3, Alg. 1).
 *
 * One run:
 *   1. the cost of every op from the callbacks, checked finite and >= 0;
 *   2. the dependency graph of plans/schedule/deps.h (lt_deps_build: the rules of plans/schedule/schedule.h,
 *      the same graph the trainer executes), with the transfer time of each model-path edge
 *      between stages from the sender's out_bytes (SlimPack 4.3.1);
 *   3. start and finish times by the longest path (SlimPack Eqs. 1-2): a depth-first walk
 *      over predecessors finishes every op after all of them, which is a topological order
 *      (Alg. 1 with the order built on the fly). A predecessor met while still on the walk's
 *      stack closes a cycle, read off the stack: the deadlock message;
 *   4. per stage, the memory sweep in program order (SlimPack 4.3.3), busy time; then the
 *      bubble ratio (ChunkFlow Eq. 1) and the critical path.
 * A DP-Merge group (lt_sim_run_group) runs steps 1-2 per member, step 3 once over the joint
 * graph of the members (their merged ops joined by rendezvous vertices), step 4 per member
 * with the joint times. Both walks are dag_longest_path over a dag_view.
 */
#include "plans/schedule/sim.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h"           /* lt_fail, lt_error_hint, lt_realloc_check */
#include "plans/schedule/deps.h" /* lt_deps_build, lt_dep */

#define NONE UINT32_MAX

/* Contention: another stage of the node starts (+1) or stops (-1) computing at `time`. */
typedef struct busy_event {
    double time;
    int delta;
} busy_event;

/* A pending free of bytes held on one stage until an op of another stage ends. */
typedef struct mem_free {
    double time, bytes;
} mem_free;

typedef struct sim_priv {
    lt_deps deps; /* the dependency graph of the latest run */
    /* per op */
    size_t cap_ops;
    lt_op_cost *cost;
    double *dur;        /* the op's duration (cost.time), the graph walk's view of it */
    uint32_t *det;      /* the predecessor that set the start, or NONE */
    uint32_t *cursor;   /* depth-first walk: next predecessor to visit */
    uint32_t *stack;
    uint8_t *state; /* 0 not visited, 1 on the stack, 2 done */
    /* per edge (parallel to deps.pred) */
    size_t cap_edges;
    double *comm;
    /* memory sweep */
    size_t cap_heap;
    mem_free *heap;
    /* asymmetric schedules (SlimPack 4.1.2): what an F holds until the B ops of its tokens
     * free it */
    size_t cap_asym_ops;
    double *held;     /* [n_ops] an F's act + kv bytes not yet freed */
    uint32_t *takers; /* [n_ops] B ops yet to free a share of that F */
    /* transfer buffers (transfer_buffers): per op, the bytes it posts receives for at its
     * start (xfer_at), holds from its start for its sends (xfer_send), frees after it
     * (xfer_free); the channels (lt_deps_channels) */
    size_t cap_xfer_ops, cap_xfer_edges, cap_chan;
    double *xfer_at, *xfer_send, *xfer_free;
    uint32_t *chan_edge, *chan_post, *chan_off;
    /* layer parts (shared_activations): per F op, the activation bytes it allocates and its
     * B frees (its own and those of its layer's later parts on its stage; 0 for those) */
    size_t cap_acts;
    double *acts;
    uint32_t *owner; /* the first part of the op's (unit, layer) on its stage */
    /* keys and values from another stage (received_kv): per op, the K/V bytes it holds */
    size_t cap_kvh;
    double *kvh;
    /* contention: the other stages' intervals over one op's span */
    size_t cap_events;
    struct busy_event *events;
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

/* "F3@s1" into buf. */
static const char *op_label(const lt_schedule *s, int stage, size_t index, char *buf, size_t n) {
    char name[48];
    snprintf(buf, n, "%s@s%d", lt_op_name(&s->stage[stage].ops[index], name, sizeof name), stage);
    return buf;
}

/* The same by op id, once the graph is built. */
static const char *id_label(const sim_priv *p, uint32_t id, char *buf, size_t n) {
    char name[48];
    snprintf(buf, n, "%s@s%u", lt_op_name(p->deps.op[id], name, sizeof name), p->deps.stage[id]);
    return buf;
}

/* ---- scratch ---- */

static sim_priv *priv_of(lt_sim *sim) {
    if (!sim->priv) sim->priv = lt_calloc_check(1, sizeof(sim_priv));
    return sim->priv;
}

static void reserve_ops(lt_sim *sim, sim_priv *p, size_t n, int stages) {
    if (n + 1 > p->cap_ops) {
        size_t c = next_cap(p->cap_ops, n + 1);
        RESIZE(p->cost, c);
        RESIZE(p->dur, c);
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

/* Per-op arrays of asymmetric schedules' memory (allocated only for them). */
static void reserve_asym_ops(sim_priv *p, size_t n) {
    if (n + 1 <= p->cap_asym_ops) return;
    size_t c = next_cap(p->cap_asym_ops, n + 1);
    RESIZE(p->held, c);
    RESIZE(p->takers, c);
    p->cap_asym_ops = c;
}

static void reserve_edges(sim_priv *p, size_t n) {
    if (n <= p->cap_edges && p->comm) return;
    size_t c = next_cap(p->cap_edges, n);
    RESIZE(p->comm, c);
    p->cap_edges = c;
}

void lt_sim_free(lt_sim *sim) {
    if (!sim) return;
    sim_priv *p = sim->priv;
    if (p) {
        lt_deps_free(&p->deps);
        void *arrays[] = {p->cost,   p->dur,    p->det,       p->cursor,    p->stack,     p->state,
                          p->comm,   p->heap,   p->held,      p->takers,    p->events,    p->xfer_at,
                          p->xfer_send, p->xfer_free, p->chan_edge, p->chan_post, p->chan_off, p->acts, p->owner,
                          p->kvh};
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

const lt_deps *lt_sim_deps(const lt_sim *sim) { return sim->priv ? &((const sim_priv *)sim->priv)->deps : NULL; }

/* ---- the unit-time model (ChunkFlow Sec. 3) ---- */

static void unit_op_cost(void *ctx, const lt_schedule *s, int stage, const lt_op *op, lt_op_cost *out) {
    (void)ctx;
    (void)stage;
    double tokens = (double)lt_schedule_op_tokens(s, op); /* a B of an asymmetric schedule: its bunit's */
    out->time = op->kind == LT_OP_B ? 2 * tokens : tokens;
    out->act_bytes = op->kind == LT_OP_F ? 1 : 0;
}

lt_sim_costs lt_sim_unit_costs(void) { return (lt_sim_costs){.op_cost = unit_op_cost}; }

/* ---- steps of a run ---- */

static bool bad_value(double x) { return !isfinite(x) || x < 0; }

/* Step 1: costs. */
static lt_status collect_ops(lt_sim *sim, sim_priv *p, const lt_schedule *s, const lt_sim_costs *c, lt_error *err) {
    size_t id = 0;
    for (int st = 0; st < s->stages; st++) {
        sim->first_op[st] = id;
        sim->busy[st] = 0;
        for (size_t i = 0; i < s->stage[st].n; i++, id++) {
            const lt_op *op = &s->stage[st].ops[i];
            lt_op_cost *oc = &p->cost[id];
            memset(oc, 0, sizeof *oc);
            c->op_cost(c->ctx, s, st, op, oc);
            const double v[6] = {oc->time, oc->act_bytes, oc->kv_bytes, oc->work_bytes, oc->out_bytes,
                                 oc->kv_in_bytes};
            static const char *const what[6] = {"time", "act_bytes", "kv_bytes", "work_bytes", "out_bytes",
                                                "kv_in_bytes"};
            for (int k = 0; k < 6; k++) {
                if (bad_value(v[k])) {
                    char name[64];
                    return lt_fail(err, LT_ERR_INPUT, "schedule", "cost model: %s of %s is %g (must be finite, >= 0)",
                                   what[k], op_label(s, st, i, name, sizeof name), v[k]);
                }
            }
            sim->busy[st] += oc->time;
            p->dur[id] = oc->time;
        }
    }
    sim->first_op[s->stages] = id;
    return LT_OK;
}

/* Step 2, pricing: the transfer time of every edge (model-path edges between stages carry
 * the sender's out_bytes; every other edge is free), and for an asymmetric schedule the
 * bytes each first F holds and how many B ops take a share of them. */
static lt_status price_edges(sim_priv *p, const lt_sim_costs *c, size_t n, lt_error *err) {
    const lt_deps *d = &p->deps;
    reserve_edges(p, d->pred_off[n]);
    for (uint32_t v = 0; v < n; v++) {
        for (uint32_t e = d->pred_off[v]; e < d->pred_off[v + 1]; e++) {
            const lt_dep *x = &d->pred[e];
            p->comm[e] = 0;
            if (!x->p2p || !c->p2p_time) continue;
            double bytes = p->cost[x->op].out_bytes, t = c->p2p_time(c->ctx, (int)x->stage, (int)d->stage[v], bytes);
            if (bad_value(t))
                return lt_fail(err, LT_ERR_INPUT, "schedule",
                               "cost model: transfer of %g bytes from stage %u to %u takes %g (must be finite, >= 0)",
                               bytes, (unsigned)x->stage, d->stage[v], t);
            p->comm[e] = t;
        }
    }
    return LT_OK;
}

/* Asymmetric schedules: the memory an F holds until the B ops of its tokens free it. */
static void prepare_shares(sim_priv *p, size_t n) {
    const lt_deps *d = &p->deps;
    reserve_asym_ops(p, n);
    for (size_t v = 0; v < n; v++) {
        bool first_f = d->op[v]->kind == LT_OP_F && d->instance[v] == 0;
        p->held[v] = first_f ? p->cost[v].act_bytes + p->cost[v].kv_bytes : 0;
        p->takers[v] = 0;
    }
    for (size_t v = 0; v < n; v++) {
        if (d->op[v]->kind != LT_OP_B) continue;
        for (uint32_t e = d->pred_off[v]; e < d->pred_off[v + 1]; e++)
            if (d->pred[e].kind == LT_DEP_ACT) p->takers[d->pred[e].op]++;
    }
}

/* A DAG as the longest-path walk sees it: n vertices, each with predecessor edges
 * pred[off[v] .. off[v + 1]) (lt_dep: .op the predecessor, .kind the reason) of transfer
 * time comm[edge], and a duration dur[v]. One pipeline's run walks its lt_deps graph; a
 * DP-Merge group's walks the joint graph of its members (lt_sim_run_group), whose vertex
 * labels and edge reasons the label callback and edge_reason() give. */
typedef struct dag_view {
    size_t n;
    const uint32_t *off;
    const lt_dep *pred;
    const double *comm;
    const double *dur;
    const char *(*label)(const void *ctx, uint32_t v, char *buf, size_t n);
    const void *label_ctx;
} dag_view;

/* The walk's scratch, one entry per vertex. */
typedef struct dag_scratch {
    uint32_t *cursor; /* next predecessor to visit */
    uint32_t *stack;
    uint8_t *state;   /* 0 not visited, 1 on the stack, 2 done */
} dag_scratch;

/* The joint graph's edge from a merged op to its rendezvous (lt_sim_run_group). */
#define DEP_RENDEZVOUS 5

static const char *edge_reason(uint8_t kind) {
    return kind == DEP_RENDEZVOUS ? "rendezvous" : lt_dep_kind_name((lt_dep_kind)kind);
}

/* The deadlock message for the cycle stack[from..top] -> stack[from]. */
static lt_status report_cycle(const dag_view *g, const dag_scratch *w, size_t from, size_t top, const char *hint,
                              lt_error *err) {
    char msg[LT_ERROR_WHAT_MAX - 32], name[96];
    size_t len = (size_t)snprintf(msg, sizeof msg, "deadlock: %s",
                                  g->label(g->label_ctx, w->stack[from], name, sizeof name));
    size_t n = top - from + 1;
    for (size_t i = from; i <= top; i++) {
        uint32_t next = i < top ? w->stack[i + 1] : w->stack[from];
        uint8_t why = g->pred[w->cursor[w->stack[i]] - 1].kind;
        char step[200];
        snprintf(step, sizeof step, " waits for %s (%s)", g->label(g->label_ctx, next, name, sizeof name),
                 edge_reason(why));
        if (len + strlen(step) + 40 >= sizeof msg) {
            snprintf(msg + len, sizeof msg - len, " ... (a cycle of %zu ops)", n);
            break;
        }
        memcpy(msg + len, step, strlen(step) + 1);
        len += strlen(step);
    }
    lt_status st = lt_fail(err, LT_ERR_INPUT, "schedule", "%s", msg);
    lt_error_hint(err, "%s", hint);
    return st;
}

/* Start and finish of every vertex by the longest path (SlimPack Eqs. 1-2), in the order a
 * depth-first walk over predecessors finishes the vertices (SlimPack Alg. 1); det[v] = the
 * predecessor that set v's start (NONE: it starts at 0). A predecessor met while still on
 * the walk's stack closes a cycle: the deadlock message, with `hint`. */
static lt_status dag_longest_path(const dag_view *g, const dag_scratch *w, double *start, double *finish,
                                  uint32_t *det, const char *hint, lt_error *err) {
    memset(w->state, 0, g->n);
    for (uint32_t root = 0; root < g->n; root++) {
        if (w->state[root]) continue;
        size_t top = 0;
        w->stack[0] = root;
        w->state[root] = 1;
        w->cursor[root] = g->off[root];
        for (;;) {
            uint32_t v = w->stack[top];
            if (w->cursor[v] < g->off[v + 1]) {
                uint32_t q = g->pred[w->cursor[v]++].op;
                if (w->state[q] == 0) {
                    w->state[q] = 1;
                    w->cursor[q] = g->off[q];
                    w->stack[++top] = q;
                } else if (w->state[q] == 1) {
                    size_t from = top;
                    while (w->stack[from] != q) from--;
                    return report_cycle(g, w, from, top, hint, err);
                }
                continue;
            }
            double t0 = 0;
            uint32_t by = NONE;
            for (uint32_t i = g->off[v]; i < g->off[v + 1]; i++) {
                double t = finish[g->pred[i].op] + g->comm[i];
                if (t > t0) {
                    t0 = t;
                    by = g->pred[i].op;
                }
            }
            start[v] = t0;
            finish[v] = t0 + g->dur[v];
            det[v] = by;
            w->state[v] = 2;
            if (top == 0) break;
            top--;
        }
    }
    return LT_OK;
}

static const char *single_label(const void *ctx, uint32_t v, char *buf, size_t n) {
    return id_label(ctx, v, buf, n);
}

/* Step 3: start and finish by the longest path over the pipeline's dependency graph. */
static lt_status longest_path(lt_sim *sim, sim_priv *p, size_t n, lt_error *err) {
    dag_view g = {n, p->deps.pred_off, p->deps.pred, p->comm, p->dur, single_label, p};
    dag_scratch w = {p->cursor, p->stack, p->state};
    return dag_longest_path(&g, &w, sim->start, sim->finish, p->det,
                            "a stage's op list runs these ops against the dependency rules of plans/schedule/schedule.h; "
                            "reorder them",
                            err);
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
    const lt_deps *d = &p->deps;
    for (uint32_t e = d->pred_off[v]; e < d->pred_off[v + 1]; e++) {
        if (d->pred[e].kind != LT_DEP_ACT) continue;
        uint32_t f = d->pred[e].op;
        double part =
            --p->takers[f] == 0 ? p->held[f] : (p->cost[f].act_bytes + p->cost[f].kv_bytes) * d->pred[e].share;
        p->held[f] -= part;
        freed += part;
    }
    return freed;
}

/* Step 4's transfer buffers (plans/schedule/sim.h, "Transfer buffers"), once the times are
 * known: xfer_at, xfer_send and xfer_free of every op. false (and nothing set) when no op
 * sends a byte. */
static bool transfer_buffers(const lt_sim *sim, sim_priv *p) {
    const lt_deps *d = &p->deps;
    size_t n = d->n_ops, edges = d->pred_off[n];
    bool any = false;
    for (size_t v = 0; v < n && !any; v++) any = p->cost[v].out_bytes > 0;
    if (!any) return false;
    if (n + 1 > p->cap_xfer_ops) {
        size_t c = next_cap(p->cap_xfer_ops, n + 1);
        RESIZE(p->xfer_at, c);
        RESIZE(p->xfer_send, c);
        RESIZE(p->xfer_free, c);
        p->cap_xfer_ops = c;
    }
    size_t P = (size_t)d->stages;
    if (edges + 1 > p->cap_xfer_edges || P * P + 1 > p->cap_chan) {
        size_t c = next_cap(p->cap_xfer_edges, edges + 1);
        RESIZE(p->chan_edge, c);
        RESIZE(p->chan_post, c);
        p->cap_xfer_edges = c;
        p->cap_chan = next_cap(p->cap_chan, P * P + 1);
        RESIZE(p->chan_off, p->cap_chan);
    }
    memset(p->xfer_at, 0, n * sizeof *p->xfer_at);
    memset(p->xfer_send, 0, n * sizeof *p->xfer_send);
    memset(p->xfer_free, 0, n * sizeof *p->xfer_free);
    for (uint32_t w = 0; w < n; w++) { /* a receive is freed after its reader */
        size_t np;
        const lt_dep *e = lt_deps_preds(d, w, &np);
        for (size_t k = 0; k < np; k++)
            if (e[k].kind == LT_DEP_PATH && e[k].p2p && lt_deps_transfer(d, w, e, k))
                p->xfer_free[w] += p->cost[e[k].op].out_bytes;
    }
    lt_deps_channels(d, p->chan_off, p->chan_edge, p->chan_post);
    for (size_t c = 0; c < P * P; c++) {
        size_t to = c / P;
        for (uint32_t j = p->chan_off[c]; j < p->chan_off[c + 1]; j++) {
            uint32_t e = p->chan_edge[j], u = d->pred[e].op;
            double bytes = p->cost[u].out_bytes;
            /* (K/V between attention stages: no buffer, the receiver's context holds them: kv_in_bytes) */
            if (d->pred[e].kind != LT_DEP_PATH || !(bytes > 0)) continue;
            size_t post = d->first_op[to] + p->chan_post[j];
            p->xfer_at[post] += bytes; /* the receive, from its posting */
            const lt_op *op = d->op[u];
            if (op->kind == LT_OP_F && op->part == LT_PART_ALL) continue; /* it sends its kept output */
            /* the send: done once the receive is posted and the bytes have moved, seen after
             * the sender's first op ending by then (the last op's end at the latest): found by
             * doubling steps from u, then halving */
            double done = fmax(sim->finish[u], sim->start[post]) + p->comm[e];
            size_t last = d->first_op[d->stage[u] + 1] - 1, lo = u, step = 1;
            while (lo < last && sim->finish[lo] < done) {
                size_t next = lo + step < last ? lo + step : last;
                if (sim->finish[next] >= done) break;
                lo = next, step *= 2;
            }
            size_t hi = lo + step < last ? lo + step : last;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (sim->finish[mid] >= done) hi = mid;
                else lo = mid + 1;
            }
            p->xfer_send[u] += bytes;
            p->xfer_free[lo] += bytes;
        }
    }
    return true;
}

/* Step 4's activations of layer parts (plans/schedule/sim.h, "Layer parts"): p->acts. false
 * (and nothing set: each F op's act_bytes are its own) when no op runs a layer part. */
static bool shared_activations(sim_priv *p) {
    const lt_deps *d = &p->deps;
    size_t n = d->n_ops;
    bool any = false;
    for (size_t v = 0; v < n && !any; v++) any = d->op[v]->part != LT_PART_ALL;
    if (!any) return false;
    if (n + 1 > p->cap_acts) {
        size_t c = next_cap(p->cap_acts, n + 1);
        RESIZE(p->acts, c);
        RESIZE(p->owner, c);
        p->cap_acts = c;
    }
    for (uint32_t v = 0; v < n; v++) { /* (a stage's op ids ascend along its list: an earlier part's owner is set) */
        const lt_op *op = d->op[v];
        p->acts[v] = op->kind == LT_OP_F ? p->cost[v].act_bytes : 0;
        p->owner[v] = v;
        if (op->kind != LT_OP_F || op->part == LT_PART_ALL || op->part == LT_PART_PRE) continue;
        size_t np;
        const lt_dep *e = lt_deps_preds(d, v, &np);
        for (size_t k = 0; k < np; k++) {
            const lt_op *q = d->op[e[k].op];
            if (e[k].kind != LT_DEP_PATH || e[k].p2p || q->kind != LT_OP_F || q->layer_begin != op->layer_begin) continue;
            p->owner[v] = p->owner[e[k].op];
            p->acts[p->owner[v]] += p->acts[v];
            p->acts[v] = 0;
            break;
        }
    }
    return true;
}

/* Step 4's keys and values from another stage (plans/schedule/sim.h): p->kvh, each op's
 * kv_bytes plus its kv_in_bytes where a K/V edge is a transfer (lt_deps_transfer). false (and
 * nothing set: each op holds its kv_bytes) when no op has kv_in_bytes. */
static bool received_kv(sim_priv *p) {
    const lt_deps *d = &p->deps;
    size_t n = d->n_ops;
    bool any = false;
    for (size_t v = 0; v < n && !any; v++) any = p->cost[v].kv_in_bytes > 0;
    if (!any) return false;
    if (n + 1 > p->cap_kvh) {
        size_t c = next_cap(p->cap_kvh, n + 1);
        RESIZE(p->kvh, c);
        p->cap_kvh = c;
    }
    for (uint32_t v = 0; v < n; v++) {
        p->kvh[v] = p->cost[v].kv_bytes;
        if (!(p->cost[v].kv_in_bytes > 0)) continue;
        size_t np;
        const lt_dep *e = lt_deps_preds(d, v, &np);
        for (size_t k = 0; k < np; k++)
            if (e[k].kind == LT_DEP_KV && lt_deps_transfer(d, v, e, k)) {
                p->kvh[v] += p->cost[v].kv_in_bytes;
                break;
            }
    }
    return true;
}

/* Step 4: the memory timeline of each stage, swept in program order (see plans/schedule/sim.h). All
 * allocations happen at op starts of the stage, so the peak is reached right after one. */
static lt_status sweep_memory(lt_sim *sim, sim_priv *p, const lt_schedule *s, const lt_sim_costs *c, lt_error *err) {
    const lt_deps *d = &p->deps;
    bool xfer = transfer_buffers(sim, p);
    const double *acts = shared_activations(p) ? p->acts : NULL; /* (NULL: each F's own act_bytes) */
    const double *kvh = received_kv(p) ? p->kvh : NULL;          /* (NULL: each op's own kv_bytes) */
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
            if (xfer) live += p->xfer_at[v] + p->xfer_send[v];
            if (d->op[v]->kind == LT_OP_F) live += acts ? acts[v] : oc->act_bytes;
            if (d->op[v]->kind != LT_OP_B && d->instance[v] == 0) {
                double kv = kvh ? kvh[v] : oc->kv_bytes;
                live += kv;
                uint32_t b = d->kv_last_b[v];
                if (b != NONE && d->stage[b] != (uint32_t)st) heap_push(p, &pending, (mem_free){sim->finish[b], kv});
            }
            if (live > peak) peak = live;
            live -= oc->work_bytes;
            if (d->act_of[v] != NONE) live -= acts ? acts[d->act_of[v]] : p->cost[d->act_of[v]].act_bytes;
            if (d->kv_of[v] != NONE) live -= kvh ? kvh[d->kv_of[v]] : p->cost[d->kv_of[v]].kv_bytes;
            if (s->asym && d->op[v]->kind == LT_OP_B) live -= free_shares(p, (uint32_t)v);
            if (xfer) live -= p->xfer_free[v];
        }
        while (pending) live -= heap_pop(p, &pending).bytes;
        sim->peak_mem[st] = peak;
        sim->end_mem[st] = live;
    }
    return LT_OK;
}

/* Steps 1 and 2 of a run: checks, costs, the dependency graph and its transfer times. */
static lt_status prepare_run(lt_sim *sim, const lt_schedule *s, const lt_sim_costs *costs, lt_error *err) {
    lt_status st = lt_schedule_check(s, err);
    if (st) return st;
    if (s->layers > (1 << 28)) return lt_fail(err, LT_ERR_INPUT, "schedule", "%d layers: too many", s->layers);
    size_t n = lt_schedule_n_ops(s);
    size_t n_bunits = s->asym ? s->n_bunits : 0, n_bslices = s->asym ? s->n_bslices : 0;
    if (n >= NONE / 2 || s->n_units + n_bunits >= NONE || s->n_slices + n_bslices >= NONE)
        return lt_fail(err, LT_ERR_INPUT, "schedule", "%zu ops, %zu units, %zu slices: too many", n,
                       s->n_units + n_bunits, s->n_slices + n_bslices);
    sim_priv *p = priv_of(sim);
    reserve_ops(sim, p, n, s->stages);
    sim->stages = s->stages;
    sim->n_ops = n;
    sim->step_time = 0;
    sim->bubble_ratio = 0;
    sim->n_critical = 0;

    if ((st = collect_ops(sim, p, s, costs, err))) return st;
    if ((st = lt_deps_build(&p->deps, s, err))) return st;
    if ((st = price_edges(p, costs, n, err))) return st;
    if (s->asym) prepare_shares(p, n);
    return LT_OK;
}

/* Step 4 and the results, once start, finish and det are known: memory, step time,
 * critical path (back through det), bubble ratio. */
static lt_status finish_run(lt_sim *sim, const lt_schedule *s, const lt_sim_costs *costs, lt_error *err) {
    sim_priv *p = sim->priv;
    size_t n = sim->n_ops;
    lt_status st = sweep_memory(sim, p, s, costs, err);
    if (st) return st;
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

/* ---- contention (plans/schedule/sim.h, "Contention") ---- */

static int cmp_event(const void *a, const void *b) {
    const busy_event *x = a, *y = b;
    return (x->time > y->time) - (x->time < y->time);
}

/* The first op among ids [lo, hi) of one stage finishing after t: finish times rise along a
 * stage's ops (each starts after the previous one finishes). */
static size_t first_after(const lt_sim *sim, size_t lo, size_t hi, double t) {
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sim->finish[mid] > t)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The duration op v of stage st would have under the current times: its work w plus c x the
 * integral over its span of k / (1 + c k), k the devices computing beside it. */
static double contended_duration(lt_sim *sim, sim_priv *p, const lt_sim_costs *c, int st, size_t v) {
    double a = sim->start[v], b = sim->finish[v], w = p->cost[v].time, cc = c->contention;
    if (!(b > a) || !(w > 0)) return w;
    int lockstep = c->lockstep > 1 ? c->lockstep : 1, spn = c->stages_per_node;
    int q0 = spn > 0 ? st / spn * spn : 0, q1 = spn > 0 ? q0 + spn : sim->stages;
    if (q1 > sim->stages) q1 = sim->stages;
    size_t n = 0;
    for (int q = q0; q < q1; q++) {
        if (q == st) continue;
        for (size_t u = first_after(sim, sim->first_op[q], sim->first_op[q + 1], a);
             u < sim->first_op[q + 1] && sim->start[u] < b; u++) {
            double lo = sim->start[u] > a ? sim->start[u] : a, hi = sim->finish[u] < b ? sim->finish[u] : b;
            if (!(hi > lo)) continue;
            if (n + 2 > p->cap_events) {
                p->cap_events = next_cap(p->cap_events, n + 64);
                RESIZE(p->events, p->cap_events);
            }
            p->events[n++] = (busy_event){lo, +1};
            p->events[n++] = (busy_event){hi, -1};
        }
    }
    if (n > 2) qsort(p->events, n, sizeof *p->events, cmp_event);
    double t = a, integral = 0;
    int busy = 0; /* other stages computing */
    for (size_t i = 0; i <= n; i++) {
        double next = i < n ? p->events[i].time : b;
        double k = (double)(lockstep - 1) + (double)lockstep * busy;
        integral += k / (1 + cc * k) * (next - t);
        t = next;
        if (i < n) busy += p->events[i].delta;
    }
    return w + cc * integral;
}

/* Durations under contention: recomputed from the latest times, then the longest path again,
 * until none moves by more than 1e-9 of the step (at most 64 walks); busy from them. */
static lt_status contend(lt_sim *sim, sim_priv *p, const lt_sim_costs *c, lt_error *err) {
    size_t n = sim->n_ops;
    double *next = lt_malloc_check((n ? n : 1) * sizeof *next);
    lt_status st = LT_OK;
    for (int walk = 0; walk < 64 && st == LT_OK; walk++) {
        double step = 0, moved = 0;
        for (size_t v = 0; v < n; v++)
            if (sim->finish[v] > step) step = sim->finish[v];
        for (int s = 0; s < sim->stages; s++)
            for (size_t v = sim->first_op[s]; v < sim->first_op[s + 1]; v++) {
                next[v] = contended_duration(sim, p, c, s, v);
                double d = fabs(next[v] - p->dur[v]);
                if (d > moved) moved = d;
            }
        if (!(moved > 1e-9 * step)) break;
        memcpy(p->dur, next, n * sizeof *next);
        st = longest_path(sim, p, n, err);
    }
    free(next);
    for (int s = 0; s < sim->stages; s++) {
        sim->busy[s] = 0;
        for (size_t v = sim->first_op[s]; v < sim->first_op[s + 1]; v++) sim->busy[s] += p->dur[v];
    }
    return st;
}

lt_status lt_sim_run(lt_sim *sim, const lt_schedule *s, const lt_sim_costs *costs, lt_error *err) {
    if (!(costs->contention >= 0 && costs->contention <= 1) || costs->lockstep < 0 || costs->stages_per_node < 0)
        return lt_fail(err, LT_ERR_INPUT, "schedule",
                       "cost model: contention %g (must be from 0 to 1), lockstep %d, stages per node %d (>= 0)",
                       costs->contention, costs->lockstep, costs->stages_per_node);
    lt_status st = prepare_run(sim, s, costs, err);
    if (st) return st;
    if ((st = longest_path(sim, sim->priv, sim->n_ops, err))) return st;
    if (costs->contention > 0 && (st = contend(sim, sim->priv, costs, err))) return st;
    return finish_run(sim, s, costs, err);
}

/* ---- DP-Merge groups: one joint graph (lt_sim_run_group) ---- */

/* The joint graph of a group's members: member m's op v is vertex base[m] + v; rendezvous k
 * is vertex n_real + k, of duration 0, whose predecessors are those of every op it joins;
 * an op in a rendezvous has that vertex as its only predecessor. */
typedef struct joint_graph {
    size_t members, n_real, n_rdv;
    size_t *base;       /* [members + 1] */
    uint32_t *rep;      /* [n_rdv] a vertex the rendezvous joins (its label), or NONE */
    uint32_t *off;      /* [n + 1] */
    lt_dep *pred;
    double *comm, *dur, *start, *finish;
    uint32_t *det;
    dag_scratch w;
    lt_sim *sims;
    const int *labels;  /* the members' names in messages (NULL: 0, 1, ...) */
} joint_graph;

static void joint_free(joint_graph *j) {
    void *arrays[] = {j->base, j->rep, j->off, j->pred, j->comm, j->dur, j->start,
                      j->finish, j->det, j->w.cursor, j->w.stack, j->w.state};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) free(arrays[i]);
}

/* "F3@s1 of pipeline 4", or "the rendezvous of F3@s1 (merged op k)" */
static const char *joint_label(const void *ctx, uint32_t v, char *buf, size_t n) {
    const joint_graph *j = ctx;
    char name[64];
    if (v >= j->n_real) {
        uint32_t r = j->rep[v - j->n_real];
        if (r == NONE) snprintf(buf, n, "rendezvous %zu", (size_t)(v - j->n_real));
        else snprintf(buf, n, "the rendezvous of %s", joint_label(ctx, r, name, sizeof name));
        return buf;
    }
    size_t m = 0;
    while (v >= j->base[m + 1]) m++;
    const sim_priv *p = j->sims[m].priv;
    snprintf(buf, n, "%s of pipeline %d", id_label(p, (uint32_t)(v - j->base[m]), name, sizeof name),
             j->labels ? j->labels[m] : (int)m);
    return buf;
}

/* Fill j's edges: the members' edges re-numbered, the rendezvous edges. LT_ERR_INPUT for a
 * rendezvous index out of range. */
static lt_status joint_build(joint_graph *j, const uint32_t *const *rdv, lt_error *err) {
    size_t n = j->n_real + j->n_rdv;
    j->off = lt_calloc_check(n + 1, sizeof *j->off);
    j->rep = lt_malloc_check((j->n_rdv ? j->n_rdv : 1) * sizeof *j->rep);
    for (size_t k = 0; k < j->n_rdv; k++) j->rep[k] = NONE;
    /* counts: off[v + 1] = the predecessors of v */
    for (size_t m = 0; m < j->members; m++) {
        const lt_deps *d = &((sim_priv *)j->sims[m].priv)->deps;
        for (size_t v = 0; v < j->sims[m].n_ops; v++) {
            uint32_t np = d->pred_off[v + 1] - d->pred_off[v], k = rdv[m] ? rdv[m][v] : LT_SIM_SOLO;
            size_t gv = j->base[m] + v;
            if (k == LT_SIM_SOLO) {
                j->off[gv + 1] += np;
                continue;
            }
            if (k >= j->n_rdv)
                return lt_fail(err, LT_ERR_INPUT, "schedule", "rendezvous %" PRIu32 " of op %zu of member %zu: only %zu",
                               k, v, m, j->n_rdv);
            j->off[gv + 1] += 1;
            j->off[j->n_real + k + 1] += np;
            if (j->rep[k] == NONE) j->rep[k] = (uint32_t)gv;
        }
    }
    for (size_t v = 0; v < n; v++) j->off[v + 1] += j->off[v];
    if (j->off[n] >= NONE) return lt_fail(err, LT_ERR_INPUT, "schedule", "too many edges in a DP-Merge group");
    j->pred = lt_malloc_check((j->off[n] ? j->off[n] : 1) * sizeof *j->pred);
    j->comm = lt_malloc_check((j->off[n] ? j->off[n] : 1) * sizeof *j->comm);
    uint32_t *fill = lt_malloc_check((n ? n : 1) * sizeof *fill);
    memcpy(fill, j->off, n * sizeof *fill);
    for (size_t m = 0; m < j->members; m++) {
        const sim_priv *p = j->sims[m].priv;
        const lt_deps *d = &p->deps;
        for (size_t v = 0; v < j->sims[m].n_ops; v++) {
            uint32_t k = rdv[m] ? rdv[m][v] : LT_SIM_SOLO;
            size_t gv = j->base[m] + v, into = k == LT_SIM_SOLO ? gv : j->n_real + k;
            if (k != LT_SIM_SOLO) {
                j->pred[fill[gv]] = (lt_dep){.op = (uint32_t)(j->n_real + k), .kind = DEP_RENDEZVOUS};
                j->comm[fill[gv]++] = 0;
            }
            for (uint32_t e = d->pred_off[v]; e < d->pred_off[v + 1]; e++) {
                lt_dep x = d->pred[e];
                x.op = (uint32_t)(j->base[m] + x.op);
                j->pred[fill[into]] = x;
                j->comm[fill[into]++] = p->comm[e];
            }
        }
    }
    free(fill);
    return LT_OK;
}

/* The joint graph's times back into each member's lt_sim: start, finish, and det where the
 * op that set a start is the member's own (through a rendezvous: the op that set the
 * rendezvous, when it is the member's; else NONE, so a member's critical path ends where
 * another member's op held it). */
static void joint_scatter(const joint_graph *j) {
    for (size_t m = 0; m < j->members; m++) {
        lt_sim *sim = &j->sims[m];
        sim_priv *p = sim->priv;
        for (size_t v = 0; v < sim->n_ops; v++) {
            size_t gv = j->base[m] + v;
            sim->start[v] = j->start[gv];
            sim->finish[v] = j->finish[gv];
            uint32_t by = j->det[gv];
            if (by != NONE && by >= j->n_real) by = j->det[by];
            p->det[v] = by != NONE && by >= j->base[m] && by < j->base[m + 1] ? (uint32_t)(by - j->base[m]) : NONE;
        }
    }
}

lt_status lt_sim_run_group(lt_sim *sims, const lt_schedule *const *s, const lt_sim_costs *costs, size_t members,
                           const uint32_t *const *rendezvous, size_t n_rendezvous, const int *labels,
                           lt_error *err) {
    lt_status st;
    for (size_t m = 0; m < members; m++) {
        if ((st = prepare_run(&sims[m], s[m], &costs[m], err)) != LT_OK) {
            lt_error_prefix(err, "pipeline %d: ", labels ? labels[m] : (int)m);
            return st;
        }
    }
    joint_graph j = {.members = members, .n_rdv = n_rendezvous, .sims = sims, .labels = labels};
    j.base = lt_malloc_check((members + 1) * sizeof *j.base);
    j.base[0] = 0;
    for (size_t m = 0; m < members; m++) j.base[m + 1] = j.base[m] + sims[m].n_ops;
    j.n_real = j.base[members];
    size_t n = j.n_real + n_rendezvous;
    if (n >= NONE / 2) {
        joint_free(&j);
        return lt_fail(err, LT_ERR_INPUT, "schedule", "%zu ops in a DP-Merge group: too many", n);
    }
    st = joint_build(&j, rendezvous, err);
    if (st == LT_OK) {
        j.dur = lt_calloc_check(n ? n : 1, sizeof *j.dur);
        for (size_t m = 0; m < members; m++) memcpy(j.dur + j.base[m], ((sim_priv *)sims[m].priv)->dur,
                                                    sims[m].n_ops * sizeof *j.dur);
        j.start = lt_malloc_check((n ? n : 1) * sizeof *j.start);
        j.finish = lt_malloc_check((n ? n : 1) * sizeof *j.finish);
        j.det = lt_malloc_check((n ? n : 1) * sizeof *j.det);
        j.w = (dag_scratch){lt_malloc_check((n ? n : 1) * sizeof(uint32_t)),
                            lt_malloc_check((n ? n : 1) * sizeof(uint32_t)), lt_malloc_check(n ? n : 1)};
        dag_view g = {n, j.off, j.pred, j.comm, j.dur, joint_label, &j};
        st = dag_longest_path(&g, &j.w, j.start, j.finish, j.det,
                              "the members of a DP-Merge group run each merged op together (one collective); "
                              "order their op lists so that no member waits for another's later op",
                              err);
    }
    if (st == LT_OK) joint_scatter(&j);
    joint_free(&j);
    for (size_t m = 0; m < members && st == LT_OK; m++) {
        if ((st = finish_run(&sims[m], s[m], &costs[m], err)) != LT_OK)
            lt_error_prefix(err, "pipeline %d: ", labels ? labels[m] : (int)m);
    }
    return st;
}

/* ---- output ---- */

void lt_sim_print_timeline(FILE *f, const lt_sim *sim, const lt_schedule *s, int width) {
    enum { MARGIN = 7 };
    if (width < 10) width = 10;
    if (width > 10000) width = 10000;
    /* step_time and op times come from lt_sim_run, or from a stored plan (plans/store/store.h),
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
