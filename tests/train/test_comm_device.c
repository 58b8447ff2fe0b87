/*
 * tests/train/test_comm_device.c — the device half of train/dist/comm.h (train/dist/comm_nccl.c) in a
 * world of one: device calls without an attached device fail naming why (a build without
 * CUDA says so), lt_comm_pick_device and lt_comm_attach_device fail cleanly without a GPU
 * (with one: the pick is a visible device, a device past the last one fails the attach),
 * and with a GPU a world of one attaches without NCCL: its all-reduce is the identity (the
 * buffer untouched), point-to-point is an error, the ring of one copies this rank's block
 * on the communication stream. Several ranks need several GPUs (NCCL refuses two ranks on
 * one device): that part is unverified here (docs/gpu.md). GPU cases skip with the reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "buildconfig.h" /* HAVE_MPI (comm_impl.h's struct) */
#ifdef HAVE_MPI
#include <mpi.h>
#endif
#include "kernels/cuda.h"         /* lt_cuda_open, lt_cuda_stream, lt_cuda_comm_stream, memory */
#include "kernels/gpu.h"          /* lt_gpu_built, lt_gpu_device_count */
#include "train/dist/comm.h"
#include "train/dist/comm_impl.h" /* lt_comm_chan_rounds, lt_comm_chan_peer, lt_comm_chan_colour */

static lt_comm *world_of_one(void) {
    lt_comm *c = NULL;
    lt_error err;
    lt_status st = lt_comm_init(&c, 1, 1, 1, 10.0, &err);
    if (st != LT_OK) fail_msg("lt_comm_init: %s", err.what);
    assert_false(lt_comm_layout_of(c)->distributed);
    return c;
}

static bool have_gpu(char *why, size_t n) { return lt_gpu_device_count(why, n) > 0; }

/* The stage channels' splits (train/dist/comm_impl.h), over layouts up to dp 3 x pp 9, for
 * the neighbours and for any two stages (HelixPipe): in each round a stage's peer names it
 * back (a rank is in at most one pair a round), over the rounds every wanted pair of stages
 * (s, s + 1), or every pair with any_stage, comes exactly once and no other; each pair's
 * colour is held by its two ranks and no other. This is the part of the NCCL bootstrap that
 * can be checked without NCCL: which ranks end up in which channel. */
static void test_stage_channel_colours(void **state) {
    (void)state;
    for (int any = 0; any < 2; any++)
        for (int dp = 1; dp <= 3; dp++)
            for (int pp = 1; pp <= 9; pp++) {
                int world = dp * pp, rounds = lt_comm_chan_rounds(pp, any);
                int *seen = calloc((size_t)(pp * pp), sizeof *seen); /* per pair (lo, hi): rounds it came in */
                int *colours = calloc((size_t)(world * pp + 1), sizeof *colours); /* per colour: members */
                assert_non_null(seen), assert_non_null(colours);
                if (pp < 2) assert_int_equal(rounds, 0);
                for (int r = 0; r < rounds; r++)
                    for (int g = 0; g < world; g++) {
                        int d = g / pp, st = g % pp, peer = lt_comm_chan_peer(st, pp, r, any);
                        if (peer < 0) continue;
                        assert_in_range(peer, 0, pp - 1);
                        assert_int_not_equal(peer, st);
                        assert_int_equal(lt_comm_chan_peer(peer, pp, r, any), st); /* it names me back */
                        if (!any) assert_int_equal(abs(peer - st), 1);
                        int c = lt_comm_chan_colour(d, st, peer, pp);
                        assert_int_equal(c, lt_comm_chan_colour(d, peer, st, pp));
                        assert_in_range(c, 0, world * pp - 1);
                        colours[c]++;
                        if (st < peer) seen[st * pp + peer]++;
                    }
                for (int c = 0; c < world * pp; c++) /* a pair's colour: its two ranks, in its one round */
                    assert_true(colours[c] == 0 || colours[c] == 2);
                for (int lo = 0; lo < pp; lo++)
                    for (int hi = lo + 1; hi < pp; hi++)
                        assert_int_equal(seen[lo * pp + hi], any || hi == lo + 1 ? dp : 0);
                free(seen), free(colours);
            }
}

static void test_device_calls_need_an_attached_device(void **state) {
    (void)state;
    lt_comm *c = world_of_one();
    assert_false(lt_comm_has_device(c));
    lt_error err;
    float x = 3.0f;
    lt_comm_req *req = (lt_comm_req *)&x; /* must be reset to NULL */
    assert_int_not_equal(lt_comm_dev_iallreduce(c, LT_COMM_WORLD, &x, 1, LT_COMM_F32, false, "a test", &req, &err),
                         LT_OK);
    assert_null(req);
    if (lt_gpu_built())
        assert_non_null(strstr(err.what, "no device is attached (lt_comm_attach_device)"));
    else
        assert_non_null(strstr(err.what, "train.backend = cuda: this longtail was built without CUDA"));
    req = (lt_comm_req *)&x;
    assert_int_not_equal(lt_comm_dev_isend(c, 0, &x, sizeof x, "a test send", &req, &err), LT_OK);
    assert_null(req);
    assert_int_not_equal(lt_comm_dev_allreduce(c, LT_COMM_DP, &x, 1, LT_COMM_F64, true, &err), LT_OK);
    lt_comm_finalize(c);
}

static void test_attach_failures_are_clean(void **state) {
    (void)state;
    char why[256] = "";
    lt_comm *c = world_of_one();
    lt_error err;
    int dev = -1;
    if (have_gpu(why, sizeof why)) {
        /* a GPU: the pick is a visible device; a device that does not exist fails the attach */
        int n = lt_gpu_device_count(why, sizeof why);
        assert_int_equal(lt_comm_pick_device(c, &dev, &err), LT_OK);
        assert_true(dev >= 0 && dev < n);
        assert_int_not_equal(lt_comm_attach_device(c, n + 7, NULL, NULL, false, &err), LT_OK);
        assert_non_null(strstr(err.what, "opening the device for NCCL"));
    } else {
        assert_int_equal(lt_comm_pick_device(c, &dev, &err), LT_ERR_CONFIG);
        assert_int_equal(dev, 0);
        assert_true(strstr(err.what, "no CUDA device") || strstr(err.what, "built without CUDA"));
        assert_int_not_equal(lt_comm_attach_device(c, 0, NULL, NULL, false, &err), LT_OK);
        assert_true(err.what[0] != '\0');
    }
    assert_false(lt_comm_has_device(c)); /* nothing half-attached */
    lt_comm_finalize(c);
}

static void test_world_of_one_on_a_gpu(void **state) {
    (void)state;
    char why[256] = "";
    if (!have_gpu(why, sizeof why)) {
        printf("# skip: %s\n", why);
        skip();
    }
    lt_comm *c = world_of_one();
    lt_error err;
    int dev = -1;
    assert_int_equal(lt_comm_pick_device(c, &dev, &err), LT_OK);
    lt_cuda *g = NULL;
    if (lt_cuda_open(&g, dev, &err) != LT_OK) fail_msg("lt_cuda_open: %s", err.what);
    if (lt_comm_attach_device(c, dev, lt_cuda_stream(g), lt_cuda_comm_stream(g), false, &err) != LT_OK)
        fail_msg("attach: %s", err.what);
    assert_true(lt_comm_has_device(c));
    assert_int_equal(lt_comm_attach_device(c, dev, lt_cuda_stream(g), lt_cuda_comm_stream(g), false, &err),
                     LT_ERR_INTERNAL); /* once per communicator */

    enum { N = 1000 };
    float host[N], back[N];
    for (int i = 0; i < N; i++) host[i] = (float)i * 0.5f;
    void *d = NULL, *all = NULL;
    assert_int_equal(lt_cuda_malloc(g, &d, sizeof host, &err), LT_OK);
    assert_int_equal(lt_cuda_malloc(g, &all, sizeof host, &err), LT_OK);
    assert_int_equal(lt_cuda_copy_h2d(g, d, host, sizeof host, &err), LT_OK);
    /* the all-reduce of one rank is the identity: done at once, the buffer untouched */
    lt_comm_req *req = (lt_comm_req *)&host;
    assert_int_equal(lt_comm_dev_iallreduce(c, LT_COMM_WORLD, d, N, LT_COMM_F32, false, "identity", &req, &err), LT_OK);
    assert_null(req);
    assert_int_equal(lt_comm_wait(c, &req, &err), LT_OK);
    assert_int_equal(lt_cuda_copy_d2h(g, back, d, sizeof back, &err), LT_OK);
    assert_memory_equal(back, host, sizeof host);
    /* point-to-point in a world of one is an error naming the peer */
    assert_int_not_equal(lt_comm_dev_isend(c, 1, d, sizeof host, "a send to nobody", &req, &err), LT_OK);
    assert_non_null(strstr(err.what, "a send to nobody with rank 1"));
    /* a ring of one: this rank's block copied into `all` on the communication stream, after
     * the compute stream's copy (ordering rule 1), waited through its event */
    int members[1] = {0};
    size_t bytes[1] = {sizeof host};
    assert_int_equal(lt_cuda_memset(g, all, 0, sizeof host, &err), LT_OK);
    if (lt_comm_dev_ring_allgather(c, members, 1, 0, d, bytes, all, &err) != LT_OK) fail_msg("ring: %s", err.what);
    assert_int_equal(lt_cuda_copy_d2h(g, back, all, sizeof back, &err), LT_OK);
    assert_memory_equal(back, host, sizeof host);
    lt_cuda_free(g, d), lt_cuda_free(g, all);
    lt_comm_finalize(c);
    lt_cuda_close(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stage_channel_colours),
        cmocka_unit_test(test_device_calls_need_an_attached_device),
        cmocka_unit_test(test_attach_failures_are_clean),
        cmocka_unit_test(test_world_of_one_on_a_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
