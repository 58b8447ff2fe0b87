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

/* The stage channels' splits (comm_nccl.c, lt_comm_attach_device): in split `parity` (0:
 * the pairs of stages (s, s + 1) with s even, 1: with s odd) the colour of the rank at
 * (dp_rank, stage) of a layout with pp stages, or -1 when it is in no pair of that parity
 * (the end stages); *lower: it is the pair's lower stage (its neighbour is stage + 1, and
 * with key = stage it is rank 0 of the pair's communicator). Each pair of a pipeline gets
 * one colour, shared by its two stages only (tests/train/test_comm_device.c). */
static inline int lt_comm_chan_colour(int dp_rank, int stage, int pp, int parity, bool *lower) {
    *lower = stage % 2 == parity && stage + 1 < pp;
    bool upper = stage % 2 != parity && stage >= 1;
    return *lower ? dp_rank * pp + stage : upper ? dp_rank * pp + stage - 1 : -1;
}

/* train/dist/comm_nccl.c, for comm_mpi.c's wait, test, abort and finalize: */
/* Has device request r completed (its event fired)? An error of the event or of the NCCL
 * communicator is LT_ERR_IO naming the request. */
lt_status lt_comm_nccl_poll(lt_comm *c, const lt_comm_req *r, bool *done, lt_error *err);
/* Abort every NCCL communicator (a timeout or the job's abort): the GPU kernels waiting on
 * a dead peer return, later device calls fail. NULL-safe. */
void lt_comm_nccl_abort(lt_comm *c);
/* A stage channel's transfer on device memory (lt_comm_stage_isend / irecv with device;
 * stage is a neighbour, checked by the caller): NCCL on the channel's communicator and
 * stream. */
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
 * groups, the stage channels) and the channels' streams. */
lt_status lt_comm_nccl_join(lt_comm *c, const unsigned char id[LT_COMM_NCCL_ID_BYTES], lt_error *err);
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
