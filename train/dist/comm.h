/*
 * train/dist/comm.h — the communication interface of the distributed engine (DESIGN.md
 * "Trainer engine"): one process per (dp_rank, stage), and the few ways they talk.
 *
 *   stage channels   activations forward and gradients backward between neighbouring
 *                    stages of one pipeline (non-blocking: posted early, waited late;
 *                    matched in posting order, as NCCL matches them);
 *   all-reduce       gradients over the DP ranks of a stage (bucketed, non-blocking), the
 *                    tied embedding between the first and the last stage, scalars (loss,
 *                    gradient norm, the preemption flag) over the world or one pipeline;
 *   ring exchange    the context-parallel K/V exchange inside a DP-Merge group: G members
 *                    pass blocks around a ring, G - 1 hops (ring attention's traffic, as
 *                    plans/cost/cost.h charges it), each member ending with every member's block;
 *   gather           byte blobs to rank 0 (measured op times, the oracle's gradients).
 *
 * Two implementations behind one communicator: MPI (train/dist/comm_mpi.c) for host buffers,
 * bootstrapped by `srun --mpi=pmix` or `mpirun`, and NCCL (train/dist/comm_nccl.c) for device
 * buffers, bootstrapped from MPI by lt_comm_attach_device (the CUDA backend). Host calls
 * (lt_comm_allreduce, ...) always go over MPI: scalars, flags, gathers to
 * rank 0. Device calls (lt_comm_dev_*) go over NCCL and are waited with the same
 * lt_comm_wait / lt_comm_test. Without a launcher (or a build without MPI) the
 * communicator is a world of one, and every call is local.
 *
 * Layout: world rank = (dp_rank * pp + stage) * tp + tp_rank: TP innermost (a stage's TP
 * group is tp neighbouring ranks, so srun's block distribution keeps it inside a node, where
 * its per-layer collectives belong), then the stages of a pipeline, then the DP ranks; the
 * cost model's placement (docs/cost-model.md "layout") is the same order. lt_comm_init
 * checks that the world size is dp x pp x tp and, under Slurm, that MPI's rank and size are
 * SLURM_PROCID and SLURM_NTASKS. The DP, pipeline and tied groups and the stage channels
 * join ranks of the same tp_rank; lt_comm_rank_of names ranks of the caller's tp_rank.
 *
 * Failures never hang: every wait polls with a deadline (train.comm_timeout_s); past it
 * the call fails naming this rank, the peer and what it waited for. lt_comm_abort prints
 * the reason with this rank's coordinates and ends the whole job (MPI_Abort), so one rank's
 * error (a bad shard, out of memory, a timeout) fails every rank within seconds.
 *
 * Thread-safety: one thread per process calls these (MPI_THREAD_FUNNELED).
 */
#ifndef LT_TRAIN_COMM_H
#define LT_TRAIN_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h" /* lt_status, lt_error */

typedef struct lt_comm lt_comm;
typedef struct lt_comm_req lt_comm_req; /* one outstanding non-blocking operation */

typedef enum lt_comm_dtype { LT_COMM_F32, LT_COMM_F64, LT_COMM_I64 } lt_comm_dtype;

/* The processes an all-reduce spans, seen from the caller. */
typedef enum lt_comm_group {
    LT_COMM_WORLD,    /* every rank */
    LT_COMM_DP,       /* the ranks of the caller's stage (one per DP rank) */
    LT_COMM_PIPELINE, /* the stages of the caller's DP rank */
    LT_COMM_TIED,     /* the first and the last stage of the caller's DP rank (pp > 1) */
    LT_COMM_TP,       /* the tensor-parallel ranks of the caller's (DP rank, stage) */
} lt_comm_group;

typedef struct lt_comm_layout {
    int world, rank;      /* size and this process's rank */
    int dp, pp, tp;       /* the layout */
    int dp_rank, stage;   /* this process's coordinates */
    int tp_rank;          /* ... and its rank in the stage's TP group */
    int local_rank;       /* SLURM_LOCALID / OMPI_COMM_WORLD_LOCAL_RANK, else 0 */
    bool distributed;     /* MPI was initialised (a launcher started us) */
} lt_comm_layout;

/* True when a launcher started this process (mpirun, srun --mpi=pmix: their environment
 * variables are set) and the build has MPI. */
bool lt_comm_launched(void);
/* LT_OK, or LT_ERR_CONFIG when this process is one of several tasks that cannot form an
 * MPI job: srun -n N (N > 1) without an MPI plugin (no PMIx variables: every task would run
 * the whole plan alone), or mpirun -n N of a build without MPI. */
lt_status lt_comm_check_launch(lt_error *err);

/* Initialise (MPI_Init when lt_comm_launched, else a world of one) and check the layout:
 * the world size must be dp x pp (LT_ERR_CONFIG naming parallel.dp, parallel.pp and the
 * launcher's count), and under Slurm SLURM_NTASKS / SLURM_PROCID must agree with MPI.
 * timeout_s bounds every wait. *out is new; lt_comm_finalize it. */
lt_status lt_comm_init(lt_comm **out, int dp, int pp, int tp, double timeout_s, lt_error *err);
/* MPI_Finalize (a no-op for a world of one); NULL-safe. */
void lt_comm_finalize(lt_comm *c);
const lt_comm_layout *lt_comm_layout_of(const lt_comm *c);
/* The world rank of (dp_rank, stage) with the caller's tp_rank. */
int lt_comm_rank_of(const lt_comm *c, int dp_rank, int stage);
/* "rank R (dp D, stage S)": the prefix of this rank's messages. */
const char *lt_comm_who(const lt_comm *c);

/* Print "longtail: RANK: what" to stderr and end the job with `code` (MPI_Abort; exit for
 * a world of one). */
_Noreturn void lt_comm_abort(lt_comm *c, int code, const char *what);

/* ---------------------------------------------------------------- stage-to-stage transfers
 *
 * The activations (forward) and gradients (backward) between the stages of one pipeline
 * (the executor's): neighbouring stages, and with HelixPipe's helix any two (on the GPU
 * when attached with any_stage). Each ordered pair of stages is a CHANNEL (this
 * rank to stage s, stage s to this rank), and a channel's transfers match in the order they are
 * posted: there are no tags, so the receiver posts its receives in the order the sender
 * posts its sends. That is NCCL's rule (a point-to-point call waits on its stream for the
 * peer's matching call), and the MPI path keeps it too (one tag for every transfer of a
 * channel; MPI matches one sender's messages with one tag in posting order), so every run
 * on the CPU exercises the order the GPU needs. Channels never wait on each other: on the
 * GPU each has its own two-rank NCCL communicator and its own stream, so a receive posted
 * early from one neighbour does not hold up a send to the other (ORDERING RULES 3 below).
 *
 * Post a send / receive of `bytes` bytes to / from stage `stage` of this rank's pipeline
 * (another stage, else LT_ERR_INTERNAL; with `device` and channels attached without
 * any_stage, this stage +- 1, else LT_ERR_CONFIG naming the limit). device: buf is a
 * device buffer (NCCL,
 * after lt_comm_attach_device), else host memory (MPI). The buffer stays untouched until
 * the request completes. `what` (copied) names the transfer in timeout messages. */
lt_status lt_comm_stage_isend(lt_comm *c, int stage, const void *buf, size_t bytes, bool device, const char *what,
                              lt_comm_req **req, lt_error *err);
lt_status lt_comm_stage_irecv(lt_comm *c, int stage, void *buf, size_t bytes, bool device, const char *what,
                              lt_comm_req **req, lt_error *err);
/* Wait for *req (frees it, *req = NULL; NULL is done). Past the deadline: LT_ERR_IO
 * "RANK: waited T s for WHAT (rank P)". */
lt_status lt_comm_wait(lt_comm *c, lt_comm_req **req, lt_error *err);
/* Has *req completed? (then it is freed and *req = NULL). */
lt_status lt_comm_test(lt_comm *c, lt_comm_req **req, bool *done, lt_error *err);

/* ---------------------------------------------------------------- collectives */

/* Sum (or max with `max`) n elements of buf in place over `group`, blocking (with the
 * deadline). */
lt_status lt_comm_allreduce(lt_comm *c, lt_comm_group group, void *buf, size_t n, lt_comm_dtype t, bool max,
                            lt_error *err);
/* The same, posted: wait with lt_comm_wait. */
lt_status lt_comm_iallreduce(lt_comm *c, lt_comm_group group, void *buf, size_t n, lt_comm_dtype t,
                             const char *what, lt_comm_req **req, lt_error *err);

/* Tensor parallelism over the TP ranks of this stage (host memory, blocking; a world of
 * one, or tp = 1: nothing to do). The in-place conventions of train/model/model.h's
 * lt_tp_ops: all-gather fills every `block`-byte block of buf from its rank (this rank's,
 * block tp_rank, filled by the caller); reduce-scatter leaves in block tp_rank (n floats)
 * the sum of every rank's block tp_rank (the other blocks undefined). `whole`: the bytes of
 * the data without the blocks' padding (lt_tp_ops), what lt_comm_bytes counts. All-reduces
 * over the group: lt_comm_allreduce with LT_COMM_TP. */
lt_status lt_comm_tp_allgather(lt_comm *c, void *buf, size_t block, size_t whole, lt_error *err);
lt_status lt_comm_tp_reduce_scatter(lt_comm *c, float *buf, size_t n, size_t whole, lt_error *err);
/* The reduce-scatter posted (waited with lt_comm_wait; NULL *req: nothing to wait for, the
 * group being one rank): the sum lands at buf[0..n) (MPI's in-place form), the caller moves
 * it to block tp_rank (lt_comm_tp_reduce_scatter does). */
lt_status lt_comm_tp_ireduce_scatter(lt_comm *c, float *buf, size_t n, size_t whole, lt_comm_req **req, lt_error *err);

/* The bytes this rank has sent in each kind of collective since the communicator was made
 * (a step's: the difference across it), counted as a ring algorithm sends them over a group
 * of k ranks: (k - 1) / k of the data of an all-gather or a reduce-scatter (for TP its
 * `whole`, without the blocks' padding), 2 (k - 1) / k of an all-reduce's buffer. The TP
 * kinds are what the cost model's TP term prices (plans/cost/cost.h lt_cost_tp_bytes), the
 * DP kinds its gradient synchronisation (lt_cost_dp_bytes), on host and device buffers alike
 * (MPI and NCCL). */
typedef enum lt_comm_bytes_kind {
    LT_COMM_BYTES_TP_ALLGATHER,
    LT_COMM_BYTES_TP_REDUCE_SCATTER,
    LT_COMM_BYTES_TP_ALLREDUCE,
    LT_COMM_BYTES_DP_ALLREDUCE,
    LT_COMM_BYTES_DP_REDUCE_SCATTER,
    LT_COMM_BYTES_DP_ALLGATHER,
    LT_COMM_BYTES_KINDS
} lt_comm_bytes_kind;
double lt_comm_bytes(const lt_comm *c, lt_comm_bytes_kind k);

/* ZeRO-1 over the DP ranks of this stage (counts[r] elements of DP rank r, in rank order,
 * contiguous in buf): reduce-scatter leaves the sum of this rank's block at buf[0..counts[me]);
 * all-gather fills every block of buf from its owner's buf[displ[me]...] (in place). */
lt_status lt_comm_reduce_scatter_dp(lt_comm *c, float *buf, const int *counts, lt_error *err);
/* The reduce-scatter posted (lt_comm_wait; `what` names it in timeouts): counts may hold
 * zeros (a range of the buffer that misses some ranks' blocks). */
lt_status lt_comm_ireduce_scatter_dp(lt_comm *c, float *buf, const int *counts, const char *what, lt_comm_req **req,
                                     lt_error *err);
lt_status lt_comm_allgather_dp(lt_comm *c, float *buf, const int *counts, const int *displs, lt_error *err);
/* The all-gather posted (lt_comm_wait); counts may hold zeros. */
lt_status lt_comm_iallgather_dp(lt_comm *c, float *buf, const int *counts, const int *displs, const char *what,
                                lt_comm_req **req, lt_error *err);

/* Ring exchange among the G world ranks members[0..G) (this rank is members[me]):
 * every member contributes `mine` (bytes[me] bytes) and receives every member's block into
 * all + off[j], off[j] = bytes[0] + ... + bytes[j - 1] (its own copied too). G - 1 hops,
 * each passing one block to the next member while receiving one from the previous. */
lt_status lt_comm_ring_allgather(lt_comm *c, const int *members, int G, int me, const void *mine, const size_t *bytes,
                                 void *all, lt_error *err);

/* Pairwise exchange among the G world ranks members[0..G) (this rank is members[me]): send
 * send[j] (sbytes[j] bytes) to member j and receive rbytes[j] bytes from member j into
 * recv[j], for every j != me with a non-zero size (both sides know the sizes). */
lt_status lt_comm_exchange(lt_comm *c, const int *members, int G, int me, const void *const *send, const size_t *sbytes,
                           void *const *recv, const size_t *rbytes, lt_error *err);

/* Gather byte blobs to rank 0: on rank 0, *all (malloc'd) holds every rank's blob in rank
 * order and lens[r] its length (lens: world entries, rank 0 only; NULL elsewhere). */
lt_status lt_comm_gather_bytes(lt_comm *c, const void *mine, size_t bytes, void **all, size_t *lens, lt_error *err);
/* Broadcast bytes from rank 0. */
lt_status lt_comm_bcast(lt_comm *c, void *buf, size_t bytes, lt_error *err);
lt_status lt_comm_barrier(lt_comm *c, lt_error *err);

/* ---------------------------------------------------------------- device buffers (NCCL)
 *
 * Bootstrap (issue 20 "Engine on the GPU"): after lt_comm_init, each rank picks its GPU
 * (lt_comm_pick_device: the layout's local_rank, SLURM_LOCALID, or device 0 when the node
 * shows this task one GPU), opens it (kernels/cuda.h lt_cuda_open) and calls
 * lt_comm_attach_device with the context's two streams. Rank 0 makes an ncclUniqueId, MPI
 * broadcasts it, every rank joins the world communicator (ncclCommInitRankConfig,
 * non-blocking: every NCCL call is polled against train.comm_timeout_s, so a dead peer is
 * an error, never a hang), and the DP, PIPELINE and TIED groups are ncclCommSplit's of it
 * with the colours and keys of the MPI splits (colour = stage, key = dp_rank; colour =
 * dp_rank, key = stage; the tied pair: colour dp_rank on the first and last stage). The
 * stage channels are splits too, two a round of pairs of stages (train/dist/comm_impl.h
 * lt_comm_chan_peer): two rounds for the neighbours, with any_stage (a run whose plans hold
 * a HelixPipe step: its helix sends between any two stages) pp - 1 rounds (pp even; pp
 * odd: pp) for every pair, 2 (pp - 1) two-rank communicators a rank.
 *
 * ORDERING RULES (the streams are the lt_cuda context's):
 *  1. Every device call first makes the communication stream wait for the work already
 *     queued on the compute stream (an event recorded there, cudaStreamWaitEvent): a send
 *     or an all-reduce reads what the kernels queued before the call wrote, without the
 *     host synchronizing.
 *  2. A request completes when the event recorded on the communication stream after its
 *     NCCL calls has fired; lt_comm_wait polls it (cudaEventQuery, and
 *     ncclCommGetAsyncError for the communicators' errors) against the deadline, and past
 *     it aborts every NCCL communicator (ncclCommAbort) and fails naming the peer and
 *     what was waited for. Only after lt_comm_wait (or a lt_comm_test that says done) may
 *     the host queue compute work that READS a received buffer or WRITES a buffer being
 *     sent or reduced; the host-side wait is what orders the compute stream after the
 *     communication stream.
 *  3. NCCL has no tags: the sends and receives between two ranks on one communicator match
 *     in the order they are posted, and each NCCL point-to-point call blocks its stream
 *     until the peer posts the matching call. The stage channels therefore each have their
 *     own communicator and stream (one way between two stages), and their users post
 *     a channel's receives in its sender's order (train/exec/transfers.c). Other exchanges between
 *     two ranks that each receive from and send to the other at the same time post both
 *     in one lt_comm_dev_batch (ncclGroupStart/End), else each stream waits on its receive
 *     first and the pair deadlocks (the deadline turns it into an error, not a hang).
  4. Group all-reduces, like the MPI ones, must be posted in the same order on every
 *     member of the group.
 * Device calls without lt_comm_attach_device fail (LT_ERR_INTERNAL, "no device attached");
 * in a build without CUDA lt_comm_attach_device fails with LT_ERR_CONFIG "built without
 * CUDA". In a world of one no NCCL communicator is made: all-reduces are the identity and
 * point-to-point calls are errors, as on the host. */

/* The device this rank should open: device 0 when the node shows the task exactly one GPU
 * (srun --gpus-per-task=1 sets CUDA_VISIBLE_DEVICES per task), else the layout's
 * local_rank, which must be below the number of GPUs (LT_ERR_CONFIG naming both). */
lt_status lt_comm_pick_device(const lt_comm *c, int *device, lt_error *err);
/* Join the NCCL communicators (above) on `device`, whose compute and communication
 * streams (cudaStream_t, as from lt_cuda_stream / lt_cuda_comm_stream) the device calls
 * use. Collective over the world. Once per communicator. The streams must outlive the
 * communicator: lt_comm_finalize (which destroys the NCCL communicators) before
 * lt_cuda_close. */
lt_status lt_comm_attach_device(lt_comm *c, int device, void *compute_stream, void *comm_stream, bool any_stage,
                                lt_error *err);
bool lt_comm_has_device(const lt_comm *c);

/* One point-to-point transfer of a batch: send (or receive) `bytes` bytes of the device
 * buffer to (from) world rank `peer`. */
typedef struct lt_comm_dev_op {
    bool send;
    int peer;
    void *buf;
    size_t bytes;
} lt_comm_dev_op;

/* Post ops[0..n) together (ncclGroupStart/End): one request, done when all are. `what`
 * names them in timeout messages; the request's peer is ops[0].peer. */
lt_status lt_comm_dev_batch(lt_comm *c, const lt_comm_dev_op *ops, int n, const char *what, lt_comm_req **req,
                            lt_error *err);
/* A batch of one. */
lt_status lt_comm_dev_isend(lt_comm *c, int peer, const void *buf, size_t bytes, const char *what, lt_comm_req **req,
                            lt_error *err);
lt_status lt_comm_dev_irecv(lt_comm *c, int peer, void *buf, size_t bytes, const char *what, lt_comm_req **req,
                            lt_error *err);
/* lt_comm_iallreduce / lt_comm_allreduce on a device buffer (ncclAllReduce in place; sum,
 * or max with `max`; F32, F64, I64). */
lt_status lt_comm_dev_iallreduce(lt_comm *c, lt_comm_group group, void *buf, size_t n, lt_comm_dtype t, bool max,
                                 const char *what, lt_comm_req **req, lt_error *err);
lt_status lt_comm_dev_allreduce(lt_comm *c, lt_comm_group group, void *buf, size_t n, lt_comm_dtype t, bool max,
                                lt_error *err);
/* Tensor parallelism on device buffers (NCCL: the TP communicator and its own stream),
 * with lt_comm_tp_allgather's and lt_comm_tp_reduce_scatter's in-place conventions and byte
 * counts; the reduce-scatter sums elements of es bytes (2: bf16, as NCCL sums them; 4:
 * fp32). Blocking: they return when the collective is done (polled with the deadline), so
 * the compute stream may read the result at once. A world of one, or tp = 1: nothing. */
lt_status lt_comm_dev_tp_allgather(lt_comm *c, void *buf, size_t block, size_t whole, lt_error *err);
lt_status lt_comm_dev_tp_reduce_scatter(lt_comm *c, void *buf, size_t n, size_t es, size_t whole, lt_error *err);
/* ... posted (lt_comm_wait), the result in block tp_rank as NCCL leaves it. */
lt_status lt_comm_dev_tp_ireduce_scatter(lt_comm *c, void *buf, size_t n, size_t es, size_t whole, lt_comm_req **req,
                                         lt_error *err);
/* Sharded data parallelism on device buffers: an in-place all-gather (gather; elements of
 * es bytes) or fp32 sum reduce-scatter over the DP ranks of this stage, over dp equal
 * blocks of `count` elements (DP rank r's block r). `whole`: the bytes of the data without
 * the blocks' padding, counted as lt_comm_bytes' DP kinds. Blocking, as above. */
lt_status lt_comm_dev_dp_blocks(lt_comm *c, bool gather, void *buf, size_t count, size_t es, size_t whole,
                                lt_error *err);
/* lt_comm_ring_allgather on device buffers (mine and all on the device; bytes and the
 * member list on the host): G - 1 hops, each one ncclSend to the next member and one
 * ncclRecv from the previous inside ncclGroupStart/End, queued back to back on the
 * communication stream (hop h + 1 forwards the block hop h received), then waited. */
lt_status lt_comm_dev_ring_allgather(lt_comm *c, const int *members, int G, int me, const void *mine,
                                     const size_t *bytes, void *all, lt_error *err);
/* lt_comm_exchange on device buffers: every send and receive in one group, then waited. */
lt_status lt_comm_dev_exchange(lt_comm *c, const int *members, int G, int me, const void *const *send,
                               const size_t *sbytes, void *const *recv, const size_t *rbytes, lt_error *err);

#endif /* LT_TRAIN_COMM_H */
