/*
 * train/dist/comm_nccl.c — the device half of train/dist/comm.h: NCCL communicators bootstrapped
 * from MPI, point-to-point batches, all-reduces and the DP-Merge ring on device buffers,
 * every request an event on the communication stream (the ordering rules are in comm.h).
 *
 * The communicators are non-blocking (ncclConfig_t.blocking = 0): initialisation, splits
 * and the enqueueing calls may return ncclInProgress, and are then polled with
 * ncclCommGetAsyncError against train.comm_timeout_s. A blocking communicator can stall
 * the host inside ncclCommInitRank or the first ncclGroupEnd of a point-to-point pair
 * (connection set-up) when a peer has died; polled, that becomes an error naming the
 * operation, followed by ncclCommAbort.
 *
 * This file posts and polls device work and calls nothing of comm_mpi.c: waiting for its
 * requests (lt_comm_wait), the unique id's broadcast that bootstraps NCCL from MPI
 * (lt_comm_attach_device) and the blocking forms of the device calls are the communicator's,
 * in comm_mpi.c, which calls the functions comm_impl.h lists from here.
 *
 * Without CUDA in the build every entry point fails cleanly ("built without CUDA") and the
 * hooks comm_mpi.c calls are no-ops.
 */
#include "buildconfig.h" /* HAVE_CUDA, HAVE_MPI, HAVE_NCCL_COMM_SPLIT */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif
#ifdef HAVE_CUDA
/* nccl.h declares `void ncclResetDebugInit();` (no prototype): harmless, but fatal under
 * --enable-werror when the header is found through -I rather than as a system header */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#include <nccl.h>
#pragma GCC diagnostic pop
#endif

#include "train/dist/comm_impl.h" /* struct lt_comm, struct lt_comm_req */

#ifdef HAVE_CUDA

struct lt_comm_nccl {
    int device;
    cudaStream_t compute, comm;
    cudaEvent_t ready;                 /* re-recorded on the compute stream before each call (rule 1) */
    ncclComm_t world, dp, pipe, tied;  /* NULL in a world of one; tied NULL off the end stages */
    ncclComm_t tp;                     /* the TP ranks of this (DP rank, stage); NULL with tp = 1 */
    cudaStream_t tp_stream;            /* its own stream (the TP collectives of a pass) */
    /* the stage channels (comm.h): [stage][way] for each other stage of the pipeline, way 0
     * = to it, 1 = from it; each a two-rank communicator (the lower stage is its rank 0) with
     * its own stream; NULL where the channels do not join that stage (the neighbours only,
     * unless any_stage: every stage, HelixPipe's helix). pp entries, NULL with pp = 1 */
    ncclComm_t (*chan)[2];
    cudaStream_t (*chan_stream)[2];
    int n_chan;
    bool any_stage;
    bool aborted;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(unsigned polls) {
    if (polls < 64) return;
    struct timespec ts = {0, polls > 1024 ? 1000000 : 50000};
    nanosleep(&ts, NULL);
}

static lt_status cuda_failed(lt_comm *c, cudaError_t e, const char *what, lt_error *err) {
    return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: %s: %s", c->who, what, cudaGetErrorString(e));
}

/* Wait until an NCCL call on communicator `nc` has left ncclInProgress (non-blocking
 * communicators), with the deadline; the failure names `what`. */
static lt_status settle(lt_comm *c, ncclComm_t nc, ncclResult_t rc, const char *what, lt_error *err) {
    double t0 = now_s();
    for (unsigned polls = 0; rc == ncclInProgress; polls++) {
        if (now_s() - t0 > c->timeout_s) {
            lt_comm_nccl_abort(c);
            return lt_fail(err, LT_ERR_IO, NULL, "%s: waited %.0f s for NCCL to %s: a rank failed or hangs "
                           "(train.comm_timeout_s = %g)", c->who, now_s() - t0, what, c->timeout_s);
        }
        nap(polls);
        if (nc && ncclCommGetAsyncError(nc, &rc) != ncclSuccess) rc = ncclInternalError;
    }
    if (rc != ncclSuccess) {
        const char *last = nc ? ncclGetLastError(nc) : NULL;
        lt_fail(err, LT_ERR_IO, NULL, "%s: NCCL failed to %s: %s%s%s", c->who, what, ncclGetErrorString(rc),
                last && *last ? ": " : "", last && *last ? last : "");
        lt_comm_nccl_abort(c);
        return LT_ERR_IO;
    }
    return LT_OK;
}

void lt_comm_nccl_abort(lt_comm *c) {
    if (!c || !c->nccl || c->nccl->aborted) return;
    struct lt_comm_nccl *n = c->nccl;
    n->aborted = true;
    for (int k = 0; n->chan && k < n->n_chan; k++) /* the splits ... */
        for (int w = 0; w < 2; w++)
            if (n->chan[k][w]) ncclCommAbort(n->chan[k][w]), n->chan[k][w] = NULL;
    ncclComm_t *cs[] = {&n->tp, &n->tied, &n->pipe, &n->dp, &n->world}; /* ... before their parent */
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        if (*cs[i]) ncclCommAbort(*cs[i]), *cs[i] = NULL;
}

static void destroy_streams(struct lt_comm_nccl *n) {
    for (int a = 0; n->chan_stream && a < n->n_chan; a++)
        for (int b = 0; b < 2; b++)
            if (n->chan_stream[a][b]) cudaStreamDestroy(n->chan_stream[a][b]), n->chan_stream[a][b] = NULL;
    if (n->tp_stream) cudaStreamDestroy(n->tp_stream), n->tp_stream = NULL;
}

/* The channel tables and c->nccl freed (the communicators and streams gone already). */
static void free_nccl(lt_comm *c) {
    struct lt_comm_nccl *n = c->nccl;
    if (n->ready) cudaEventDestroy(n->ready);
    free(n->chan), free(n->chan_stream);
    free(n);
    c->nccl = NULL;
}

void lt_comm_nccl_finalize(lt_comm *c) {
    if (!c || !c->nccl) return;
    struct lt_comm_nccl *n = c->nccl;
    int nc = 2 * n->n_chan + 5;
    ncclComm_t **cs = calloc((size_t)nc, sizeof *cs); /* the channels, then the groups before their parent */
    if (!cs) lt_comm_nccl_abort(c); /* (out of memory: abort rather than finalize) */
    for (int k = 0; cs && k < n->n_chan; k++) cs[2 * k] = &n->chan[k][0], cs[2 * k + 1] = &n->chan[k][1];
    ncclComm_t *groups[] = {&n->tp, &n->tied, &n->pipe, &n->dp, &n->world};
    for (int i = 0; cs && i < 5; i++) cs[2 * n->n_chan + i] = groups[i];
    for (int i = 0; cs && i < nc && !n->aborted; i++) {
        if (!*cs[i]) continue;
        lt_error err;
        /* flush what is queued (non-blocking: polled), then free; a failure aborts the rest */
        if (settle(c, *cs[i], ncclCommFinalize(*cs[i]), "finalize a communicator", &err) == LT_OK)
            ncclCommDestroy(*cs[i]), *cs[i] = NULL;
    }
    free(cs);
    destroy_streams(n); /* (after an abort too: the aborted kernels have returned) */
    free_nccl(c);
}

void lt_comm_nccl_release(lt_comm_req *r) {
    if (r->event) cudaEventDestroy((cudaEvent_t)r->event);
    r->event = NULL;
}

lt_status lt_comm_nccl_poll(lt_comm *c, const lt_comm_req *r, bool *done, lt_error *err) {
    *done = false;
    if (!c->nccl || c->nccl->aborted)
        return lt_fail(err, LT_ERR_IO, NULL, "%s: %s (rank %d): the NCCL communicators were aborted after an earlier "
                       "failure", c->who, r->what, r->peer);
    cudaError_t e = cudaEventQuery((cudaEvent_t)r->event);
    if (e == cudaSuccess) return *done = true, LT_OK;
    if (e != cudaErrorNotReady)
        return lt_fail(err, LT_ERR_IO, NULL, "%s: %s (rank %d) failed on the GPU: %s", c->who, r->what, r->peer,
                       cudaGetErrorString(e));
    ncclResult_t a = ncclSuccess;
    if (r->ncomm && ncclCommGetAsyncError((ncclComm_t)r->ncomm, &a) == ncclSuccess && a != ncclSuccess &&
        a != ncclInProgress) {
        lt_fail(err, LT_ERR_IO, NULL, "%s: %s (rank %d): NCCL reports %s", c->who, r->what, r->peer,
                ncclGetErrorString(a));
        lt_comm_nccl_abort(c);
        return LT_ERR_IO;
    }
    return LT_OK;
}

lt_status lt_comm_pick_device(const lt_comm *c, int *device, lt_error *err) {
    *device = 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return lt_fail(err, LT_ERR_CONFIG, NULL, "%s: no CUDA device: %s", c->who,
                       e != cudaSuccess ? cudaGetErrorString(e) : "the driver lists none");
    if (n == 1) return LT_OK; /* one GPU visible to this task: it is ours */
    if (c->l.local_rank >= n) {
        lt_fail(err, LT_ERR_CONFIG, NULL, "%s: local rank %d (SLURM_LOCALID) but this node shows %d GPUs", c->who,
                c->l.local_rank, n);
        lt_error_hint(err, "start one task per GPU (srun --ntasks-per-node = GPUs per node, or --gpus-per-task=1)");
        return LT_ERR_CONFIG;
    }
    *device = c->l.local_rank;
    return LT_OK;
}

bool lt_comm_has_device(const lt_comm *c) { return c->nccl != NULL; }

/* comm_impl.h's lt_comm_nccl_id carries an ncclUniqueId as its bytes */
_Static_assert(sizeof(ncclUniqueId) == LT_COMM_NCCL_ID_BYTES, "ncclUniqueId is NCCL_UNIQUE_ID_BYTES bytes");

#ifdef HAVE_NCCL_COMM_SPLIT
static lt_status split(lt_comm *c, int color, int key, ncclComm_t *out, const char *name, lt_error *err) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    char what[96];
    snprintf(what, sizeof what, "split the world into %s", name);
    *out = NULL;
    ncclResult_t rc = ncclCommSplit(c->nccl->world, color, key, out, &cfg);
    lt_status st = settle(c, c->nccl->world, rc, what, err);
    if (st == LT_OK && *out) st = settle(c, *out, ncclInProgress, what, err);
    return st;
}
#endif

lt_status lt_comm_nccl_open(lt_comm *c, int device, void *compute_stream, void *comm_stream, lt_error *err) {
    struct lt_comm_nccl *n = calloc(1, sizeof *n);
    if (!n) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    n->device = device;
    n->compute = (cudaStream_t)compute_stream;
    n->comm = (cudaStream_t)comm_stream;
    c->nccl = n;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming);
    return e == cudaSuccess ? LT_OK : cuda_failed(c, e, "opening the device for NCCL", err);
}

bool lt_comm_nccl_unique_id(unsigned char id[LT_COMM_NCCL_ID_BYTES]) {
    return ncclGetUniqueId((ncclUniqueId *)(void *)id) == ncclSuccess;
}

lt_status lt_comm_nccl_join(lt_comm *c, const unsigned char id[LT_COMM_NCCL_ID_BYTES], bool any_stage,
                            lt_error *err) {
    struct lt_comm_nccl *n = c->nccl;
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t rc = ncclCommInitRankConfig(&n->world, c->l.world, uid, c->l.rank, &cfg);
    lt_status st = settle(c, n->world, rc, "join the world communicator (ncclCommInitRankConfig)", err);
#ifdef HAVE_NCCL_COMM_SPLIT
    /* the colours and keys of comm_mpi.c's MPI splits, so the groups are the same ranks
     * in the same order */
    const lt_comm_layout *l = &c->l;
    bool end = l->pp > 1 && (l->stage == 0 || l->stage == l->pp - 1);
    int t = l->tp_rank, tp = l->tp; /* the groups join ranks of one TP rank (comm.h "Layout") */
    if (st == LT_OK) st = split(c, l->stage * tp + t, l->dp_rank, &n->dp, "the DP ranks of each stage", err);
    if (st == LT_OK) st = split(c, l->dp_rank * tp + t, l->stage, &n->pipe, "the stages of each pipeline", err);
    if (st == LT_OK)
        st = split(c, end ? l->dp_rank * tp + t : NCCL_SPLIT_NOCOLOR, l->stage, &n->tied, "the first and last stages",
                   err);
    /* the TP group: the tp neighbouring ranks of one (DP rank, stage), in TP rank order
     * (comm_mpi.c's MPI split), with its own stream */
    if (st == LT_OK && tp > 1)
        st = split(c, l->dp_rank * l->pp + l->stage, t, &n->tp, "the TP ranks of each stage", err);
    cudaError_t te;
    if (st == LT_OK && n->tp && (te = cudaStreamCreateWithFlags(&n->tp_stream, cudaStreamNonBlocking)) != cudaSuccess)
        st = cuda_failed(c, te, "creating the TP stream", err);
    /* the stage channels: the rounds of pairs of comm_impl.h (the neighbours, or with
     * any_stage every pair), one communicator per pair and way; a round gives a rank at most
     * one pair, so 2 x rounds splits make every channel */
    n->any_stage = any_stage;
    if (st == LT_OK && l->pp > 1) {
        n->chan = calloc((size_t)l->pp, sizeof *n->chan);
        n->chan_stream = calloc((size_t)l->pp, sizeof *n->chan_stream);
        if (!n->chan || !n->chan_stream) st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory for the stage channels");
        else n->n_chan = l->pp;
    }
    for (int r = 0; st == LT_OK && r < lt_comm_chan_rounds(l->pp, any_stage); r++)
        for (int way = 0; st == LT_OK && way < 2; way++) {
            int peer = lt_comm_chan_peer(l->stage, l->pp, r, any_stage);
            bool lower = peer > l->stage; /* I am the pair's lower stage (its rank 0) */
            int colour = peer < 0 ? NCCL_SPLIT_NOCOLOR : lt_comm_chan_colour(l->dp_rank, l->stage, peer, l->pp) * tp + t;
            ncclComm_t x = NULL;
            st = split(c, colour, l->stage, &x, way == 0 ? "the forward stage channels" : "the backward stage "
                       "channels", err);
            /* way 0: the lower stage sends (activations), way 1: the upper sends (gradients) */
            if (st == LT_OK && peer >= 0) n->chan[peer][lower == (way == 0) ? 0 : 1] = x;
        }
    cudaError_t e;
    for (int a = 0; a < n->n_chan; a++)
        for (int b = 0; b < 2; b++)
            if (st == LT_OK && n->chan[a][b] &&
                (e = cudaStreamCreateWithFlags(&n->chan_stream[a][b], cudaStreamNonBlocking)) != cudaSuccess)
                st = cuda_failed(c, e, "creating a stage channel's stream", err);
#else
    if (st == LT_OK)
        st = lt_fail(err, LT_ERR_CONFIG, NULL, "%s: this NCCL has no ncclCommSplit (NCCL >= 2.18 is needed for "
                     "the DP, pipeline and tied groups)", c->who);
#endif
    return st;
}

void lt_comm_nccl_detach(lt_comm *c) {
    struct lt_comm_nccl *n = c->nccl;
    if (!n) return;
    lt_comm_nccl_abort(c);
    destroy_streams(n);
    free_nccl(c);
}

/* ---------------------------------------------------------------- posting */

static lt_status usable(lt_comm *c, lt_error *err) {
    if (!c->nccl)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: a device transfer, but no device is attached "
                       "(lt_comm_attach_device)", c->who);
    if (c->nccl->aborted)
        return lt_fail(err, LT_ERR_IO, NULL, "%s: the NCCL communicators were aborted after an earlier failure",
                       c->who);
    return LT_OK;
}

/* Rule 1: the communication stream waits for what the compute stream has queued. */
static lt_status after_compute_on(lt_comm *c, cudaStream_t s, lt_error *err) {
    struct lt_comm_nccl *n = c->nccl;
    cudaError_t e = cudaEventRecord(n->ready, n->compute);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(s, n->ready, 0);
    return e == cudaSuccess ? LT_OK : cuda_failed(c, e, "ordering the communication stream after the compute stream",
                                                  err);
}

static lt_status after_compute(lt_comm *c, lt_error *err) { return after_compute_on(c, c->nccl->comm, err); }

/* Rule 2: a request = an event recorded on stream s now. */
static lt_status new_req_on(lt_comm *c, cudaStream_t s, ncclComm_t nc, int peer, const char *what, lt_comm_req **req,
                            lt_error *err) {
    *req = calloc(1, sizeof **req);
    if (!*req) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess && (e = cudaEventRecord(ev, s)) != cudaSuccess) cudaEventDestroy(ev);
    if (e != cudaSuccess) {
        free(*req), *req = NULL;
        return cuda_failed(c, e, "recording a communication event", err);
    }
    (*req)->event = ev;
    (*req)->ncomm = nc;
    (*req)->peer = peer;
    snprintf((*req)->what, sizeof (*req)->what, "%s", what ? what : "a device transfer");
    return LT_OK;
}

/* ... on the communication stream. */
static lt_status new_dev_req(lt_comm *c, ncclComm_t nc, int peer, const char *what, lt_comm_req **req,
                             lt_error *err) {
    return new_req_on(c, c->nccl->comm, nc, peer, what, req, err);
}

/* A request that needs no event: done at once (a world of one). */
static lt_status done_req(lt_comm_req **req) {
    *req = NULL;
    return LT_OK;
}

/* ncclSend/ncclRecv of ops[0..n) inside one group on the world communicator. */
static lt_status enqueue_p2p(lt_comm *c, const lt_comm_dev_op *ops, int n, const char *what, lt_error *err) {
    struct lt_comm_nccl *nc = c->nccl;
    for (int i = 0; i < n; i++)
        if (ops[i].peer < 0 || ops[i].peer >= c->l.world || ops[i].peer == c->l.rank)
            return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: %s with rank %d (world of %d)", c->who, what, ops[i].peer,
                           c->l.world);
    ncclResult_t rc = ncclGroupStart();
    for (int i = 0; i < n && (rc == ncclSuccess || rc == ncclInProgress); i++) {
        if (ops[i].bytes == 0) continue;
        rc = ops[i].send ? ncclSend(ops[i].buf, ops[i].bytes, ncclUint8, ops[i].peer, nc->world, nc->comm)
                         : ncclRecv(ops[i].buf, ops[i].bytes, ncclUint8, ops[i].peer, nc->world, nc->comm);
    }
    ncclResult_t end = ncclGroupEnd(); /* always closes the group, even after a failed call */
    if (rc == ncclSuccess || rc == ncclInProgress) rc = end;
    char w[160];
    snprintf(w, sizeof w, "post %s", what);
    return settle(c, nc->world, rc, w, err);
}

lt_status lt_comm_dev_batch(lt_comm *c, const lt_comm_dev_op *ops, int n, const char *what, lt_comm_req **req,
                            lt_error *err) {
    *req = NULL;
    lt_status st = usable(c, err);
    if (st != LT_OK) return st;
    if (n <= 0) return done_req(req);
    if (!what) what = "a device transfer";
    if (!c->nccl->world)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: %s with rank %d in a world of one", c->who, what, ops[0].peer);
    st = after_compute(c, err);
    if (st == LT_OK) st = enqueue_p2p(c, ops, n, what, err);
    if (st == LT_OK) st = new_dev_req(c, c->nccl->world, ops[0].peer, what, req, err);
    return st;
}

lt_status lt_comm_dev_isend(lt_comm *c, int peer, const void *buf, size_t bytes, const char *what, lt_comm_req **req,
                            lt_error *err) {
    lt_comm_dev_op op = {true, peer, (void *)buf, bytes};
    return lt_comm_dev_batch(c, &op, 1, what, req, err);
}

lt_status lt_comm_dev_irecv(lt_comm *c, int peer, void *buf, size_t bytes, const char *what, lt_comm_req **req,
                            lt_error *err) {
    lt_comm_dev_op op = {false, peer, buf, bytes};
    return lt_comm_dev_batch(c, &op, 1, what, req, err);
}

lt_status lt_comm_nccl_stage(lt_comm *c, bool send, int stage, void *buf, size_t bytes, const char *what,
                             lt_comm_req **req, lt_error *err) {
    *req = NULL;
    lt_status st = usable(c, err);
    if (st != LT_OK) return st;
    int side = stage > c->l.stage; /* the peer's rank in the pair's communicator: the lower stage is 0 */
    struct lt_comm_nccl *n = c->nccl;
    int peer = (c->l.dp_rank * c->l.pp + stage) * c->l.tp + c->l.tp_rank;
    if (stage < 0 || stage >= n->n_chan || stage == c->l.stage)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: %s with stage %d: not another stage of the pipeline (%d "
                       "stages)", c->who, what, stage, c->l.pp);
    ncclComm_t nc = n->chan[stage][send ? 0 : 1];
    cudaStream_t s = n->chan_stream[stage][send ? 0 : 1];
    if (!nc && !n->any_stage)
        return lt_fail(err, LT_ERR_CONFIG, NULL, "%s: %s with stage %d: the GPU's stage channels of this run join "
                       "neighbouring stages only (they join any two when the plans hold a HelixPipe step)", c->who,
                       what, stage);
    if (!nc)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: %s with rank %d: no stage channel (%d stages)", c->who, what,
                       peer, c->l.pp);
    if (bytes == 0) return done_req(req);
    /* the channel's two ranks: the lower stage is rank 0, so the peer is rank `side` */
    char w[160];
    snprintf(w, sizeof w, "post %s", what);
    st = after_compute_on(c, s, err);
    if (st == LT_OK)
        st = settle(c, nc, send ? ncclSend(buf, bytes, ncclUint8, side, nc, s) : ncclRecv(buf, bytes, ncclUint8, side, nc, s),
                    w, err);
    if (st == LT_OK) st = new_req_on(c, s, nc, peer, what, req, err);
    return st;
}

static const char *group_name(lt_comm_group g) {
    return g == LT_COMM_DP ? "the DP ranks of this stage" : g == LT_COMM_PIPELINE ? "the stages of this pipeline"
                           : g == LT_COMM_TIED ? "the first and last stage"
                           : g == LT_COMM_TP   ? "the TP ranks of this stage" : "every rank";
}

lt_status lt_comm_dev_iallreduce(lt_comm *c, lt_comm_group group, void *buf, size_t n, lt_comm_dtype t, bool max,
                                 const char *what, lt_comm_req **req, lt_error *err) {
    *req = NULL;
    lt_status st = usable(c, err);
    if (st != LT_OK) return st;
    struct lt_comm_nccl *nc = c->nccl;
    if (!nc->world) return done_req(req); /* a world of one: the sum (or maximum) is the value */
    if (group == LT_COMM_TP && c->l.tp < 2) return done_req(req); /* a group of one */
    /* counted as the host's (lt_comm_bytes): a ring's 2 (k - 1) / k of the buffer */
    size_t es = t == LT_COMM_F32 ? 4 : 8;
    if (group == LT_COMM_TP && c->l.tp > 1)
        c->bytes[LT_COMM_BYTES_TP_ALLREDUCE] += (double)n * (double)es * 2.0 * (c->l.tp - 1) / c->l.tp;
    if (group == LT_COMM_DP && c->l.dp > 1)
        c->bytes[LT_COMM_BYTES_DP_ALLREDUCE] += (double)n * (double)es * 2.0 * (c->l.dp - 1) / c->l.dp;
    ncclComm_t g = group == LT_COMM_DP ? nc->dp : group == LT_COMM_PIPELINE ? nc->pipe
                 : group == LT_COMM_TIED ? nc->tied : group == LT_COMM_TP ? nc->tp : nc->world;
    if (!g) return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s is not in %s", c->who, group_name(group));
    cudaStream_t s = group == LT_COMM_TP ? nc->tp_stream : nc->comm;
    ncclDataType_t dt = t == LT_COMM_F32 ? ncclFloat32 : t == LT_COMM_F64 ? ncclFloat64 : ncclInt64;
    char w[160];
    snprintf(w, sizeof w, "%s (device all-reduce over %s)", what ? what : max ? "a maximum" : "a sum",
             group_name(group));
    st = after_compute_on(c, s, err);
    if (st == LT_OK) st = settle(c, g, ncclAllReduce(buf, buf, n, dt, max ? ncclMax : ncclSum, g, s), w, err);
    if (st == LT_OK) st = new_req_on(c, s, g, -1, w, req, err);
    return st;
}

/* In place over the equal blocks of a group of k ranks (this one rank r of it): NCCL's
 * in-place forms, all-gather with sendbuff = recvbuff + r * count, reduce-scatter with
 * recvbuff = sendbuff + r * count (count elements a block). */
lt_status lt_comm_nccl_blocks(lt_comm *c, lt_comm_group group, bool gather, void *buf, size_t count, size_t es,
                              lt_comm_req **req, lt_error *err) {
    *req = NULL;
    lt_status st = usable(c, err);
    if (st != LT_OK) return st;
    struct lt_comm_nccl *nc = c->nccl;
    bool tp = group == LT_COMM_TP;
    int k = tp ? c->l.tp : c->l.dp, r = tp ? c->l.tp_rank : c->l.dp_rank;
    if (k < 2 || count == 0) return done_req(req);
    ncclComm_t g = tp ? nc->tp : group == LT_COMM_DP ? nc->dp : NULL;
    if (!g) return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: no %s communicator for a block collective", c->who,
                           group_name(group));
    if (!gather && es != 2 && es != 4)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: a reduce-scatter of %zu-byte elements", c->who, es);
    cudaStream_t s = tp ? nc->tp_stream : nc->comm;
    char w[160];
    snprintf(w, sizeof w, "%s over %s", gather ? "an all-gather" : "a reduce-scatter", group_name(group));
    char *b = buf;
    st = after_compute_on(c, s, err);
    ncclResult_t rc;
    if (gather) /* bytes: any element type */
        rc = ncclAllGather(b + (size_t)r * count * es, b, count * es, ncclUint8, g, s);
    else
        rc = ncclReduceScatter(b, b + (size_t)r * count * es, count, es == 2 ? ncclBfloat16 : ncclFloat32, ncclSum, g,
                               s);
    if (st == LT_OK) st = settle(c, g, rc, w, err);
    if (st == LT_OK) st = new_req_on(c, s, g, -1, w, req, err);
    return st;
}

lt_status lt_comm_nccl_ring_allgather(lt_comm *c, const int *members, int G, int me, const void *mine,
                                      const size_t *bytes, void *all, lt_comm_req **req, lt_error *err) {
    *req = NULL;
    lt_status st = usable(c, err);
    if (st != LT_OK) return st;
    if (G > 1 && !c->nccl->world)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: a ring of %d in a world of one", c->who, G);
    size_t *off = malloc(((size_t)G + 1) * sizeof *off);
    if (!off) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    off[0] = 0;
    for (int j = 0; j < G; j++) off[j + 1] = off[j] + bytes[j];
    st = after_compute(c, err);
    cudaError_t e = st == LT_OK && bytes[me] > 0 && (char *)all + off[me] != (const char *)mine
                        ? cudaMemcpyAsync((char *)all + off[me], mine, bytes[me], cudaMemcpyDeviceToDevice,
                                          c->nccl->comm)
                        : cudaSuccess;
    if (e != cudaSuccess) st = cuda_failed(c, e, "copying this rank's K/V block", err);
    /* hop h: send the block of member (me - h) to the next member, receive the block of
     * member (me - h - 1) from the previous one; stream order makes hop h + 1 send what
     * hop h received */
    int next = members[(me + 1) % G], prev = members[(me + G - 1) % G];
    for (int h = 0; st == LT_OK && h < G - 1; h++) {
        int sb = (me - h + G) % G, rb = (me - h - 1 + 2 * G) % G;
        lt_comm_dev_op ops[2] = {{false, prev, (char *)all + off[rb], bytes[rb]},
                                 {true, next, (char *)all + off[sb], bytes[sb]}};
        st = enqueue_p2p(c, ops, 2, "the context-parallel K/V ring exchange", err);
    }
    if (st == LT_OK) st = new_dev_req(c, c->nccl->world, prev, "the context-parallel K/V ring exchange", req, err);
    free(off);
    return st;
}

lt_status lt_comm_nccl_exchange(lt_comm *c, const int *members, int G, int me, const void *const *send,
                                const size_t *sbytes, void *const *recv, const size_t *rbytes, lt_comm_req **req,
                                lt_error *err) {
    *req = NULL;
    lt_status st = usable(c, err);
    if (st != LT_OK) return st;
    lt_comm_dev_op *ops = calloc(2 * (size_t)G + 1, sizeof *ops);
    if (!ops) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    int n = 0;
    for (int j = 0; j < G; j++) {
        if (j == me) continue;
        if (rbytes[j] > 0) ops[n++] = (lt_comm_dev_op){false, members[j], recv[j], rbytes[j]};
        if (sbytes[j] > 0) ops[n++] = (lt_comm_dev_op){true, members[j], (void *)send[j], sbytes[j]};
    }
    st = lt_comm_dev_batch(c, ops, n, "rows of a context-parallel group", req, err);
    free(ops);
    return st;
}

#else /* no CUDA in this build */

static lt_status no_cuda(lt_comm *c, lt_error *err) {
    lt_fail(err, LT_ERR_CONFIG, NULL, "%s: train.backend = cuda: this longtail was built without CUDA (no NCCL)",
            c ? c->who : "trainer");
    lt_error_hint(err, "configure --with-cuda on a machine with the CUDA toolkit and NCCL");
    return LT_ERR_CONFIG;
}

void lt_comm_nccl_abort(lt_comm *c) { (void)c; }
void lt_comm_nccl_finalize(lt_comm *c) { (void)c; }
void lt_comm_nccl_release(lt_comm_req *r) { r->event = NULL; }
lt_status lt_comm_nccl_poll(lt_comm *c, const lt_comm_req *r, bool *done, lt_error *err) {
    (void)r;
    *done = true;
    return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: a device request in a build without CUDA", c->who);
}
bool lt_comm_has_device(const lt_comm *c) { return c->nccl != NULL; }

lt_status lt_comm_pick_device(const lt_comm *c, int *device, lt_error *err) {
    *device = 0;
    return no_cuda((lt_comm *)c, err);
}
lt_status lt_comm_nccl_open(lt_comm *c, int device, void *compute_stream, void *comm_stream, lt_error *err) {
    (void)device, (void)compute_stream, (void)comm_stream;
    return no_cuda(c, err);
}
bool lt_comm_nccl_unique_id(unsigned char id[LT_COMM_NCCL_ID_BYTES]) {
    (void)id;
    return false;
}
lt_status lt_comm_nccl_join(lt_comm *c, const unsigned char id[LT_COMM_NCCL_ID_BYTES], bool any_stage,
                            lt_error *err) {
    (void)id, (void)any_stage;
    return no_cuda(c, err);
}
void lt_comm_nccl_detach(lt_comm *c) { (void)c; }
lt_status lt_comm_nccl_stage(lt_comm *c, bool send, int stage, void *buf, size_t bytes, const char *what,
                             lt_comm_req **req, lt_error *err) {
    (void)send, (void)stage, (void)buf, (void)bytes, (void)what;
    *req = NULL;
    return no_cuda(c, err);
}
lt_status lt_comm_dev_batch(lt_comm *c, const lt_comm_dev_op *ops, int n, const char *what, lt_comm_req **req,
                            lt_error *err) {
    (void)ops, (void)n, (void)what;
    *req = NULL;
    return no_cuda(c, err);
}
lt_status lt_comm_dev_isend(lt_comm *c, int peer, const void *buf, size_t bytes, const char *what, lt_comm_req **req,
                            lt_error *err) {
    (void)peer, (void)buf, (void)bytes, (void)what;
    *req = NULL;
    return no_cuda(c, err);
}
lt_status lt_comm_dev_irecv(lt_comm *c, int peer, void *buf, size_t bytes, const char *what, lt_comm_req **req,
                            lt_error *err) {
    (void)peer, (void)buf, (void)bytes, (void)what;
    *req = NULL;
    return no_cuda(c, err);
}
lt_status lt_comm_dev_iallreduce(lt_comm *c, lt_comm_group group, void *buf, size_t n, lt_comm_dtype t, bool max,
                                 const char *what, lt_comm_req **req, lt_error *err) {
    (void)group, (void)buf, (void)n, (void)t, (void)max, (void)what;
    *req = NULL;
    return no_cuda(c, err);
}
lt_status lt_comm_nccl_blocks(lt_comm *c, lt_comm_group group, bool gather, void *buf, size_t count, size_t es,
                              lt_comm_req **req, lt_error *err) {
    (void)group, (void)gather, (void)buf, (void)count, (void)es;
    *req = NULL;
    return no_cuda(c, err);
}
lt_status lt_comm_nccl_ring_allgather(lt_comm *c, const int *members, int G, int me, const void *mine,
                                      const size_t *bytes, void *all, lt_comm_req **req, lt_error *err) {
    (void)members, (void)G, (void)me, (void)mine, (void)bytes, (void)all;
    *req = NULL;
    return no_cuda(c, err);
}
lt_status lt_comm_nccl_exchange(lt_comm *c, const int *members, int G, int me, const void *const *send,
                                const size_t *sbytes, void *const *recv, const size_t *rbytes, lt_comm_req **req,
                                lt_error *err) {
    (void)members, (void)G, (void)me, (void)send, (void)sbytes, (void)recv, (void)rbytes;
    *req = NULL;
    return no_cuda(c, err);
}

#endif /* HAVE_CUDA */
