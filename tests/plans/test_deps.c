/*
 * tests/plans/test_deps.c — the dependency API (plans/schedule/deps.h): the edges of hand-built
 * schedules named one by one (model path with its send/receive pairs, activations, slice
 * keys/values and their gradients, stage order, asymmetric shares); on every generator's
 * schedules, predecessor and successor lists that mirror each other, the graph the
 * simulator prices (lt_sim_deps) equal to a fresh lt_deps_build, and an executor that runs
 * each stage's list in order, waiting only on these edges, finishing without deadlock and
 * never starting an op before the simulator's start time allows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plans/schedule/deps.h"
#include "plans/schedule/schedule.h"
#include "plans/schedule/sim.h"

static void sched_init(lt_schedule *s, int stages, int layers) {
    lt_error err;
    assert_int_equal(lt_schedule_init(s, stages, layers, &err), LT_OK);
}

static void build_ok(lt_deps *d, const lt_schedule *s) {
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_deps_build(d, s, &err);
    if (st != LT_OK) fail_msg("lt_deps_build: %s", err.what);
}

/* The predecessor of op (stage, index) of kind k from (pstage, pindex), or NULL. */
static const lt_dep *find_pred(const lt_deps *d, int stage, size_t index, lt_dep_kind k, int pstage, size_t pindex) {
    size_t n;
    const lt_dep *e = lt_deps_preds(d, lt_deps_op_id(d, stage, index), &n);
    for (size_t i = 0; i < n; i++)
        if (e[i].kind == k && e[i].stage == pstage && e[i].index == pindex) return &e[i];
    return NULL;
}

static size_t count_kind(const lt_deps *d, int stage, size_t index, lt_dep_kind k, bool succ) {
    size_t n, c = 0;
    size_t id = lt_deps_op_id(d, stage, index);
    const lt_dep *e = succ ? lt_deps_succs(d, id, &n) : lt_deps_preds(d, id, &n);
    for (size_t i = 0; i < n; i++) c += e[i].kind == k;
    return c;
}

/* Mirror, peers, p2p flag, and an in-order executor that never deadlocks: the properties
 * every schedule's graph must have. */
static void check_graph(const lt_schedule *s, const lt_deps *d) {
    assert_int_equal(d->n_ops, lt_schedule_n_ops(s));
    for (size_t v = 0; v < d->n_ops; v++) {
        int st;
        size_t ix;
        lt_deps_op_at(d, v, &st, &ix);
        assert_ptr_equal(d->op[v], &s->stage[st].ops[ix]);
        size_t n;
        const lt_dep *e = lt_deps_preds(d, v, &n);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(lt_deps_op_id(d, e[i].stage, e[i].index), e[i].op);
            assert_int_equal(e[i].p2p, e[i].kind == LT_DEP_PATH && (int)e[i].stage != st);
            if (e[i].kind == LT_DEP_ACT || e[i].kind == LT_DEP_STAGE) assert_int_equal(e[i].stage, st);
            /* the same edge seen from the predecessor */
            size_t m, found = 0;
            const lt_dep *f = lt_deps_succs(d, e[i].op, &m);
            for (size_t j = 0; j < m; j++)
                found += f[j].op == v && f[j].kind == e[i].kind && f[j].p2p == e[i].p2p && f[j].stage == st &&
                         f[j].index == ix;
            assert_true(found >= 1);
        }
    }
    size_t total_p = d->pred_off[d->n_ops], total_s = d->succ_off[d->n_ops];
    assert_int_equal(total_p, total_s);
    /* executor: each stage runs its list in order once every predecessor is done */
    size_t *next = calloc((size_t)s->stages, sizeof *next);
    bool *done = calloc(d->n_ops + 1, sizeof *done);
    size_t left = d->n_ops;
    while (left) {
        bool moved = false;
        for (int st = 0; st < s->stages; st++) {
            while (next[st] < s->stage[st].n) {
                size_t v = lt_deps_op_id(d, st, next[st]), n;
                const lt_dep *e = lt_deps_preds(d, v, &n);
                bool ready = true;
                for (size_t i = 0; i < n && ready; i++) ready = done[e[i].op];
                if (!ready) break;
                done[v] = true;
                next[st]++;
                left--;
                moved = true;
            }
        }
        if (!moved) fail_msg("the in-order executor deadlocks with %zu ops left", left);
    }
    free(next);
    free(done);
}

/* The simulator prices exactly this graph: its lt_sim_deps equals a fresh build, and every
 * op starts after each predecessor finishes. */
static void check_against_sim(const lt_schedule *s) {
    lt_sim sim = {0};
    lt_deps d = {0};
    lt_error err;
    lt_sim_costs uc = lt_sim_unit_costs();
    if (lt_sim_run(&sim, s, &uc, &err) != LT_OK) fail_msg("lt_sim_run: %s", err.what);
    build_ok(&d, s);
    check_graph(s, &d);
    const lt_deps *sd = lt_sim_deps(&sim);
    assert_non_null(sd);
    assert_int_equal(sd->n_ops, d.n_ops);
    assert_int_equal(sd->pred_off[sd->n_ops], d.pred_off[d.n_ops]);
    for (size_t e = 0; e < d.pred_off[d.n_ops]; e++) {
        assert_int_equal(sd->pred[e].op, d.pred[e].op);
        assert_int_equal(sd->pred[e].kind, d.pred[e].kind);
    }
    for (size_t v = 0; v < d.n_ops; v++) {
        size_t n;
        const lt_dep *e = lt_deps_preds(&d, v, &n);
        for (size_t i = 0; i < n; i++) assert_true(sim.start[v] >= sim.finish[e[i].op] - 1e-9);
    }
    lt_deps_free(&d);
    lt_sim_free(&sim);
}

/* 1F1B, 2 stages, 2 whole samples: the send/receive pairs and the activation edges. */
static void test_1f1b_edges_by_hand(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 4);
    int64_t len[2] = {8, 8};
    lt_sched_units_whole(&s, len, 2);
    lt_sched_1f1b(&s, NULL, 2);
    /* stage 0: F0 F1 B0 B1; stage 1: F0 B0 F1 B1 */
    lt_deps d = {0};
    build_ok(&d, &s);
    assert_int_equal(s.stage[0].ops[0].kind, LT_OP_F);
    assert_int_equal(s.stage[1].ops[1].kind, LT_OP_B);
    /* F0@s1 receives from F0@s0 */
    const lt_dep *e = find_pred(&d, 1, 0, LT_DEP_PATH, 0, 0);
    assert_non_null(e);
    assert_true(e->p2p);
    assert_int_equal(count_kind(&d, 0, 0, LT_DEP_PATH, true), 1); /* F0@s0 sends once */
    /* B0@s1 (last stage): its own F only (the F at the model's end is its activation F) */
    assert_non_null(find_pred(&d, 1, 1, LT_DEP_ACT, 1, 0));
    assert_int_equal(count_kind(&d, 1, 1, LT_DEP_PATH, false), 0);
    assert_int_equal(d.act_of[lt_deps_op_id(&d, 1, 1)], lt_deps_op_id(&d, 1, 0));
    /* B0@s0 receives the gradient from B0@s1 and waits for F0@s0's activations */
    size_t b0 = 2;
    assert_int_equal(s.stage[0].ops[b0].unit, 0);
    e = find_pred(&d, 0, b0, LT_DEP_PATH, 1, 1);
    assert_non_null(e);
    assert_true(e->p2p);
    assert_non_null(find_pred(&d, 0, b0, LT_DEP_ACT, 0, 0));
    assert_non_null(find_pred(&d, 0, b0, LT_DEP_STAGE, 0, 1));
    /* F1@s1 waits for B0@s1 in program order, not on the path */
    assert_non_null(find_pred(&d, 1, 2, LT_DEP_STAGE, 1, 1));
    check_graph(&s, &d);
    assert_string_equal(lt_dep_kind_name(LT_DEP_DKV), "slice key/value gradients");
    assert_string_equal(lt_dep_kind_name((lt_dep_kind)9), "?");
    lt_deps_free(&d);
    lt_deps_free(&d); /* twice: zeroed */
    lt_schedule_free(&s);
}

/* Channels (deps.h "Transfers"): stage 1 runs the units' forwards in the other order and
 * sends their gradients back in that order, while stage 0 reads them in its own. Stage 0:
 * F0 F1 B0 B1; stage 1: F1 F0 B1 B0. */
static void test_channels_by_hand(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 4);
    int64_t len[2] = {8, 8};
    lt_sched_units_whole(&s, len, 2);
    const lt_op_kind kind[4] = {LT_OP_F, LT_OP_F, LT_OP_B, LT_OP_B};
    const uint32_t unit0[4] = {0, 1, 0, 1}, unit1[4] = {1, 0, 1, 0};
    for (int i = 0; i < 4; i++) {
        lt_schedule_add_stage_op(&s, 0, kind[i], unit0[i], 0);
        lt_schedule_add_stage_op(&s, 1, kind[i], unit1[i], 0);
    }
    lt_deps d = {0};
    build_ok(&d, &s);
    uint32_t off[5], edges[16], post[16];
    assert_int_equal(lt_deps_channels(&d, off, edges, post), 4);
    /* channel (from, to) is entries [off[to * 2 + from], off[to * 2 + from + 1]): none within a stage */
    assert_int_equal(off[0], 0);
    assert_int_equal(off[1] - off[0], 0); /* (0, 0) */
    assert_int_equal(off[4] - off[3], 0); /* (1, 1) */
    /* 0 -> 1: F0 then F1, read by F0@s1 (index 1) and F1@s1 (index 0): F1's is wanted at
     * index 0 (the first op posts its own), so F0's, before it on the channel, is posted then too */
    uint32_t c = off[1 * 2 + 0];
    assert_int_equal(off[1 * 2 + 1] - c, 2);
    assert_true(&d.pred[edges[c]] == find_pred(&d, 1, 1, LT_DEP_PATH, 0, 0));
    assert_true(&d.pred[edges[c + 1]] == find_pred(&d, 1, 0, LT_DEP_PATH, 0, 1));
    assert_int_equal(post[c], 0);
    assert_int_equal(post[c + 1], 0);
    /* 1 -> 0: B1 then B0, read by B1@s0 (index 3, wanted at 2) and B0@s0 (index 2, wanted
     * at 1): both at index 1 */
    c = off[0 * 2 + 1];
    assert_int_equal(off[0 * 2 + 2] - c, 2);
    assert_true(&d.pred[edges[c]] == find_pred(&d, 0, 3, LT_DEP_PATH, 1, 2));
    assert_true(&d.pred[edges[c + 1]] == find_pred(&d, 0, 2, LT_DEP_PATH, 1, 3));
    assert_int_equal(post[c], 1);
    assert_int_equal(post[c + 1], 1);
    assert_int_equal(off[4], 4);
    /* every transfer here is a model-path edge between the stages */
    size_t n;
    const lt_dep *p = lt_deps_preds(&d, lt_deps_op_id(&d, 1, 0), &n);
    for (size_t k = 0; k < n; k++) assert_int_equal(lt_deps_transfer(&d, lt_deps_op_id(&d, 1, 0), p, k), p[k].p2p);
    check_graph(&s, &d);
    lt_deps_free(&d);
    lt_schedule_free(&s);
}

/* One sample in 3 slices (Seq1F1B): K/V edges forward, dK/dV edges backward, and the
 * K/V lifetime (kv_last_b) of each slice's first forward. */
static void test_slice_edges_by_hand(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    int64_t len[1] = {9};
    lt_sched_units_sliced(&s, len, 1, 3);
    lt_sched_seq1f1b(&s, NULL, 3);
    lt_deps d = {0};
    build_ok(&d, &s);
    for (int st = 0; st < 2; st++) {
        for (size_t i = 0; i < s.stage[st].n; i++) {
            const lt_op *op = &s.stage[st].ops[i];
            size_t kv = count_kind(&d, st, i, LT_DEP_KV, false), dkv = count_kind(&d, st, i, LT_DEP_DKV, false);
            if (op->kind == LT_OP_F) {
                assert_int_equal(kv, op->unit > 0 ? 1 : 0);
                assert_int_equal(dkv, 0);
                uint32_t b = d.kv_last_b[lt_deps_op_id(&d, st, i)];
                assert_int_not_equal(b, LT_DEP_NONE);
                assert_int_equal(d.op[b]->unit, op->unit);
                assert_int_equal(d.op[b]->kind, LT_OP_B);
                assert_int_equal(d.kv_of[b], lt_deps_op_id(&d, st, i));
            } else {
                assert_int_equal(kv, 0);
                assert_int_equal(dkv, op->unit < 2 ? 1 : 0);
            }
        }
    }
    check_graph(&s, &d);
    lt_deps_free(&d);
    lt_schedule_free(&s);
}

/* An asymmetric schedule: the B of a bunit over two forward units waits for both Fs, each
 * edge with the share of that F's tokens it covers. */
static void test_asymmetric_shares_by_hand(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 1, 1);
    /* sample 0: 12 tokens; forward units [0,4) [4,12); backward units [0,8) [8,12) */
    lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, 0, 0, 4), 1);
    lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, 0, 4, 12), 1);
    lt_schedule_add_bunit(&s, lt_schedule_add_bslice(&s, 0, 0, 8), 1);
    lt_schedule_add_bunit(&s, lt_schedule_add_bslice(&s, 0, 8, 12), 1);
    uint32_t forder[2] = {0, 1}, border[2] = {1, 0};
    lt_sched_packflow(&s, forder, 2, border, 2);
    lt_deps d = {0};
    build_ok(&d, &s);
    /* ops: F0 F1 B1 B0 */
    assert_int_equal(s.stage[0].n, 4);
    const lt_dep *a = find_pred(&d, 0, 3, LT_DEP_ACT, 0, 0), *b = find_pred(&d, 0, 3, LT_DEP_ACT, 0, 1);
    assert_non_null(a);
    assert_non_null(b);
    assert_float_equal(a->share, 1.0, 1e-12);       /* all 4 tokens of unit 0 */
    assert_float_equal(b->share, 4.0 / 8.0, 1e-12); /* tokens 4..8 of unit 1's 8 */
    assert_non_null(find_pred(&d, 0, 3, LT_DEP_DKV, 0, 2));
    check_graph(&s, &d);
    lt_deps_free(&d);
    lt_schedule_free(&s);
}

/* A malformed schedule is refused with the same message as the simulator's. */
static void test_missing_dependency(void **state) {
    (void)state;
    lt_schedule s;
    sched_init(&s, 2, 2);
    uint32_t u = lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, 0, 0, 4), 1);
    lt_schedule_add_stage_op(&s, 1, LT_OP_F, u, 0); /* no F on stage 0 */
    lt_deps d = {0};
    lt_error err;
    assert_int_equal(lt_deps_build(&d, &s, &err), LT_ERR_INPUT);
    assert_non_null(strstr(err.what, "F0@s1 waits for the forward of unit 0"));
    lt_deps_free(&d);
    lt_schedule_free(&s);
}

/* Every generator's schedules: the graph properties and the simulator's agreement. */
static void test_generators(void **state) {
    (void)state;
    int64_t len[7] = {30, 5, 17, 64, 9, 9, 2};
    for (int stages = 1; stages <= 4; stages++) {
        lt_schedule s;
        sched_init(&s, stages, 8);
        for (int g = 0; g < 6; g++) {
            lt_schedule_clear(&s);
            lt_error err;
            switch (g) {
            case 0:
                lt_sched_units_whole(&s, len, 7);
                lt_sched_gpipe(&s, NULL, s.n_units);
                break;
            case 1:
                lt_sched_units_whole(&s, len, 7);
                lt_sched_1f1b(&s, NULL, s.n_units);
                break;
            case 2:
                lt_sched_units_sliced(&s, len, 7, 3);
                lt_sched_seq1f1b(&s, NULL, s.n_units);
                break;
            case 3:
                lt_sched_units_chunked(&s, len, 7, 16);
                lt_sched_chunkflow(&s, NULL, s.n_units, 2);
                break;
            case 4: {
                lt_sched_units_whole(&s, len, 7);
                uint32_t *order = malloc(s.n_units * sizeof *order);
                for (uint32_t i = 0; i < s.n_units; i++) order[i] = i;
                if (lt_sched_helixpipe(&s, order, (s.n_units / (2 * (size_t)stages)) * 2 * (size_t)stages, &err) !=
                    LT_OK) {
                    free(order);
                    continue;
                }
                free(order);
                break;
            }
            default: {
                /* asymmetric: each sample forward whole, backward in halves */
                for (int i = 0; i < 7; i++) lt_schedule_add_unit(&s, lt_schedule_add_slice(&s, i, 0, len[i]), 1);
                for (int i = 0; i < 7; i++) {
                    int64_t h = len[i] / 2;
                    if (h > 0) lt_schedule_add_bunit(&s, lt_schedule_add_bslice(&s, i, 0, h), 1);
                    lt_schedule_add_bunit(&s, lt_schedule_add_bslice(&s, i, h, len[i]), 1);
                }
                uint32_t border[14];
                size_t nb = 0;
                uint32_t v = 0;
                for (int i = 0; i < 7; i++) {
                    if (len[i] / 2 > 0) {
                        border[nb++] = v + 1;
                        border[nb++] = v;
                        v += 2;
                    } else {
                        border[nb++] = v++;
                    }
                }
                lt_sched_packflow(&s, NULL, s.n_units, border, nb);
            }
            }
            if (g == 4 && s.n_units == 0) continue;
            check_against_sim(&s);
        }
        lt_schedule_free(&s);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_1f1b_edges_by_hand),     cmocka_unit_test(test_slice_edges_by_hand),
        cmocka_unit_test(test_asymmetric_shares_by_hand), cmocka_unit_test(test_missing_dependency),
        cmocka_unit_test(test_generators),       cmocka_unit_test(test_channels_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
