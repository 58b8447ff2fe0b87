/*
 * train/dist/comm_impl.h — the communicator's insides, shared by its two implementations:
 * train/dist/comm_mpi.c (the world, host buffers, requests' waiting, attaching the device half)
 * and train/dist/comm_nccl.c (device buffers). Calls go one way: comm_mpi.c calls the
 * functions of comm_nccl.c listed below, comm_nccl.c calls nothing of comm_mpi.c. Not for
 * other modules: they see train/dist/comm.h only.
 * Include after buildconfig.h (HAVE_MPI) and, with MPI, <mpi.h>.
 */
#ifndef LT_TRAIN_COMM_IMPL_H
#define LT_TRAIN_COMM_IMPL_H

#include "train/dist/comm.h"

struct lt_comm_nccl; /* train/dist/comm_nccl.c: the NCCL communicators and the streams */

struct lt_comm {
    lt_comm_layout l;
    double timeout_s;
    char who[96];
#ifdef HAVE_MPI
    MPI_Comm world, p2p, ring, dp, pipe, tied, tpc; /* p2p: the stage channels; tpc: the TP group */
#endif
    double bytes[LT_COMM_BYTES_KINDS]; /* lt_comm_bytes */
    struct lt_comm_nccl *nccl; /* NULL until lt_comm_attach_device */
};

struct lt_comm_req {
#ifdef HAVE_MPI
    MPI_Request r;
#endif
    /* a device request: the cudaEvent_t recorded on the communication stream after its
     * NCCL calls, and the ncclComm_t they went to (NULL for an MPI request) */
    void *event, *ncomm;
    int peer;
    char what[120];
};

/* The stage channels' splits (comm_nccl.c, lt_comm_attach_device): lt_comm_chan_rounds
 * rounds of pairs of a pipeline's pp stages, each stage in at most one pair a round and
 * every wanted pair in exactly one round. With any_stage (HelixPipe's helix sends between any
 * two stages) every pair, by the circle method over n = pp rounded up to even positions
 * (round r pairs r with position n - 1 and every other s with (2r - s) mod (n - 1); a stage
 * paired with position pp, which does not exist, sits the round out): n - 1 rounds.
 * Otherwise the neighbours (s, s + 1): round 0 those with s even, round 1 those with s odd.
 * lt_comm_chan_peer: the stage paired with `stage` in round r, or -1; lt_comm_chan_colour:
 * the split colour of the pair (stage, peer) of pipeline dp_rank, one per pair (the lower
 * stage is rank 0 of its communicator with key = stage). tests/train/test_comm_device.c. */
static inline int lt_comm_chan_rounds(int pp, bool any_stage) {
    if (pp < 2) return 0;
    return any_stage ? pp - 1 + pp % 2 : 2;
}
static inline int lt_comm_chan_peer(int stage, int pp, int round, bool any_stage) {
    if (!any_stage) {
        if (stage % 2 == round && stage + 1 < pp) return stage + 1;
        return stage >= 1 && (stage - 1) % 2 == round ? stage - 1 : -1;
    }
    int m = pp - 1 + pp % 2; /* n - 1 */
    int peer = stage == m ? round : stage == round ? m : ((2 * round - stage) % m + m) % m;
    return peer < pp ? peer : -1;
}
static inline int lt_comm_chan_colour(int dp_rank, int stage, int peer, int pp) {
    int lo = stage < peer ? stage : peer, hi = stage < peer ? peer : stage;
    return (dp_rank * pp + lo) * pp + hi;
}

/* train/dist/comm_nccl.c, for comm_mpi.c's wait, test, abort and finalize: */
/* Has device request r completed (its event fired)? An error of the event or of the NCCL
 * communicator is LT_ERR_IO naming the request. */
lt_status lt_comm_nccl_poll(lt_comm *c, const lt_comm_req *r, bool *done, lt_error *err);
/* Abort every NCCL communicator (a timeout or the job's abort): the GPU kernels waiting on
 * a dead peer return, later device calls fail. NULL-safe. */
void lt_comm_nccl_abort(lt_comm *c);
/* A stage channel's transfer on device memory (lt_comm_stage_isend / irecv with device):
 * NCCL on the channel's communicator and stream; LT_ERR_CONFIG naming the limit where the
 * channels join neighbours only (attached without any_stage) and `stage` is not one. */
lt_status lt_comm_nccl_stage(lt_comm *c, bool send, int stage, void *buf, size_t bytes, const char *what,
                             lt_comm_req **req, lt_error *err);
/* Destroy a device request's event. */
void lt_comm_nccl_release(lt_comm_req *r);
/* Destroy the NCCL communicators (before MPI_Finalize). */
void lt_comm_nccl_finalize(lt_comm *c);

/* ... for comm_mpi.c's lt_comm_attach_device, which bootstraps NCCL from MPI in this order:
 * lt_comm_nccl_open; in a world of several, rank 0's lt_comm_nccl_unique_id broadcast to
 * every rank (every rank answers the broadcast, even one whose open failed), then
 * lt_comm_nccl_join; on any failure lt_comm_nccl_detach. */
/* NCCL's unique id (ncclUniqueId: NCCL_UNIQUE_ID_BYTES) as bytes, so that the MPI side
 * broadcasts it without nccl.h. It travels with rank 0's verdict (ok), so that a failing
 * ncclGetUniqueId fails every rank instead of leaving them waiting in ncclCommInitRank. */
#define LT_COMM_NCCL_ID_BYTES 128
typedef struct lt_comm_nccl_id {
    int ok;
    unsigned char id[LT_COMM_NCCL_ID_BYTES];
} lt_comm_nccl_id;
/* c->nccl made for `device` and its two streams (an error of the device leaves it set: the
 * rank still takes part in the broadcast; out of memory, or a build without CUDA, leaves
 * it NULL). */
lt_status lt_comm_nccl_open(lt_comm *c, int device, void *compute_stream, void *comm_stream, lt_error *err);
/* Rank 0: a new unique id into id; false when NCCL cannot make one. */
bool lt_comm_nccl_unique_id(unsigned char id[LT_COMM_NCCL_ID_BYTES]);
/* Join the world communicator of unique id `id`, then its splits (the DP, pipeline and tied
 * groups, the stage channels: between neighbours, or with any_stage any two stages) and the
 * channels' streams. */
lt_status lt_comm_nccl_join(lt_comm *c, const unsigned char id[LT_COMM_NCCL_ID_BYTES], bool any_stage,
                            lt_error *err);
/* Undo lt_comm_nccl_open and a partial join: abort the communicators, free c->nccl. */
void lt_comm_nccl_detach(lt_comm *c);

/* ... and the posted forms of the ring all-gather and the exchange of comm.h's device calls
 * (lt_comm_dev_ring_allgather, lt_comm_dev_exchange: comm_mpi.c waits for *req). */
/* An in-place all-gather (gather) or sum reduce-scatter over the equal `count`-element
 * blocks of buf (elements of es bytes; a reduce-scatter's 2: bf16, 4: fp32) among the TP
 * ranks of this stage (group LT_COMM_TP, on the TP stream) or the DP ranks (LT_COMM_DP, on
 * the communication stream), block r being rank r's (comm.h's in-place conventions). */
lt_status lt_comm_nccl_blocks(lt_comm *c, lt_comm_group group, bool gather, void *buf, size_t count, size_t es,
                              lt_comm_req **req, lt_error *err);
lt_status lt_comm_nccl_ring_allgather(lt_comm *c, const int *members, int G, int me, const void *mine,
                                      const size_t *bytes, void *all, lt_comm_req **req, lt_error *err);
lt_status lt_comm_nccl_exchange(lt_comm *c, const int *members, int G, int me, const void *const *send,
                                const size_t *sbytes, void *const *recv, const size_t *rbytes, lt_comm_req **req,
                                lt_error *err);

#endif /* LT_TRAIN_COMM_IMPL_H */
