/*
 * train/comm.h — the communication interface of the distributed engine (DESIGN.md
 * "Trainer engine"): one process per (dp_rank, stage), and the few ways they talk.
 *
 *   point-to-point   activations forward and gradients backward between neighbouring
 *                    stages of one pipeline (non-blocking: posted early, waited late);
 *   all-reduce       gradients over the DP ranks of a stage (bucketed, non-blocking), the
 *                    tied embedding between the first and the last stage, scalars (loss,
 *                    gradient norm, the preemption flag) over the world or one pipeline;
 *   ring exchange    the context-parallel K/V exchange inside a DP-Merge group: G members
 *                    pass blocks around a ring, G - 1 hops (ring attention's traffic, as
 *                    plans/cost.h charges it), each member ending with every member's block;
 *   gather           byte blobs to rank 0 (measured op times, the oracle's gradients).
 *
 * One implementation today: MPI (train/comm_mpi.c), bootstrapped by `srun --mpi=pmix` or
 * `mpirun`; NCCL implements the same calls in the CUDA backend. Without a launcher (or a
 * build without MPI) the communicator is a world of one, and every call is local.
 *
 * Layout: world rank = dp_rank * pp + stage (the stages of a pipeline are neighbours, so
 * srun's block distribution keeps a pipeline on one node). lt_comm_init checks that the
 * world size is dp x pp and, under Slurm, that MPI's rank and size are SLURM_PROCID and
 * SLURM_NTASKS.
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
} lt_comm_group;

typedef struct lt_comm_layout {
    int world, rank;      /* size and this process's rank */
    int dp, pp;           /* the layout */
    int dp_rank, stage;   /* this process's coordinates */
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
lt_status lt_comm_init(lt_comm **out, int dp, int pp, double timeout_s, lt_error *err);
/* MPI_Finalize (a no-op for a world of one); NULL-safe. */
void lt_comm_finalize(lt_comm *c);
const lt_comm_layout *lt_comm_layout_of(const lt_comm *c);
/* The world rank of (dp_rank, stage). */
int lt_comm_rank_of(const lt_comm *c, int dp_rank, int stage);
/* "rank R (dp D, stage S)": the prefix of this rank's messages. */
const char *lt_comm_who(const lt_comm *c);

/* Print "longtail: RANK: what" to stderr and end the job with `code` (MPI_Abort; exit for
 * a world of one). */
_Noreturn void lt_comm_abort(lt_comm *c, int code, const char *what);

/* ---------------------------------------------------------------- point-to-point */

/* Post a send / receive of `bytes` bytes to / from world rank `peer` with `tag` (>= 0,
 * at most lt_comm_tag_max). The buffer must stay untouched until the request completes.
 * `what` (copied) names the transfer in timeout messages. */
lt_status lt_comm_isend(lt_comm *c, int peer, int tag, const void *buf, size_t bytes, const char *what,
                        lt_comm_req **req, lt_error *err);
lt_status lt_comm_irecv(lt_comm *c, int peer, int tag, void *buf, size_t bytes, const char *what, lt_comm_req **req,
                        lt_error *err);
int lt_comm_tag_max(const lt_comm *c);
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

/* ZeRO-1 over the DP ranks of this stage (counts[r] elements of DP rank r, in rank order,
 * contiguous in buf): reduce-scatter leaves the sum of this rank's block at buf[0..counts[me]);
 * all-gather fills every block of buf from its owner's buf[displ[me]...] (in place). */
lt_status lt_comm_reduce_scatter_dp(lt_comm *c, float *buf, const int *counts, lt_error *err);
lt_status lt_comm_allgather_dp(lt_comm *c, float *buf, const int *counts, const int *displs, lt_error *err);

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

#endif /* LT_TRAIN_COMM_H */
