/*
 * train/dist/comm_mpi.c — train/dist/comm.h over MPI (Open MPI under mpirun or srun --mpi=pmix), and
 * the world of one when there is no launcher or no MPI; and the communicator as a whole: its
 * requests of either kind (a device request is polled by train/dist/comm_nccl.c), abort and
 * finalize of both halves, attaching the device half (NCCL bootstrapped through an MPI
 * broadcast) and the blocking forms of the device calls (posted there, waited here).
 *
 * Every wait is MPI_Test in a loop with a short sleep between polls and a deadline, the
 * collectives are their non-blocking forms (MPI-3) waited the same way: a rank that died
 * or hangs turns into an error naming the peer instead of a hang. Communicators: a
 * duplicate of the world for the stage channels (one tag: matched in posting order, as
 * NCCL matches them; comm.h), one for the ring
 * exchanges, and splits for the DP ranks of a stage, the stages of a pipeline and the tied
 * embedding's pair.
 */
#include "buildconfig.h" /* HAVE_MPI */

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif

#include "train/dist/comm_impl.h" /* struct lt_comm, struct lt_comm_req, the NCCL side's hooks */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    return errno || *end || x < INT_MIN || x > INT_MAX ? dflt : (int)x;
}

bool lt_comm_launched(void) {
#ifdef HAVE_MPI
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]) && *getenv(vars[i])) return true;
#endif
    return false;
}

lt_status lt_comm_check_launch(lt_error *err) {
    if (lt_comm_launched()) return LT_OK;
    int ompi = env_int("OMPI_COMM_WORLD_SIZE", 1), ntasks = env_int("SLURM_NTASKS", 1);
    if (ompi > 1) {
        lt_fail(err, LT_ERR_CONFIG, NULL, "started by mpirun as one of %d processes, but this trainer was built without "
                "MPI: every process would run the whole plan alone", ompi);
        lt_error_hint(err, "install openmpi-bin libopenmpi-dev libpmix-dev and configure again (--with-mpi)");
        return LT_ERR_CONFIG;
    }
    if (getenv("SLURM_STEP_ID") && ntasks > 1) {
        lt_fail(err, LT_ERR_CONFIG, NULL, "started by srun as one of %d tasks without an MPI plugin (no PMIx in the "
                "environment): every task would run the whole plan alone", ntasks);
        lt_error_hint(err, "launch with srun --mpi=pmix (or MpiDefault=pmix in slurm.conf)");
        return LT_ERR_CONFIG;
    }
    return LT_OK;
}

const lt_comm_layout *lt_comm_layout_of(const lt_comm *c) { return &c->l; }
double lt_comm_bytes(const lt_comm *c, lt_comm_bytes_kind k) { return k < LT_COMM_BYTES_KINDS ? c->bytes[k] : 0; }
const char *lt_comm_who(const lt_comm *c) { return c->who; }
int lt_comm_rank_of(const lt_comm *c, int dp_rank, int stage) {
    return (dp_rank * c->l.pp + stage) * c->l.tp + c->l.tp_rank;
}

_Noreturn void lt_comm_abort(lt_comm *c, int code, const char *what) {
    fprintf(stderr, "longtail: %s: %s\n", c ? c->who : "trainer", what);
    fflush(stderr);
    if (c) lt_comm_nccl_abort(c); /* GPU kernels blocked on a peer return */
#ifdef HAVE_MPI
    if (c && c->l.distributed) MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
#endif
    exit(code ? code : 1);
}

lt_status lt_comm_init(lt_comm **out, int dp, int pp, int tp, double timeout_s, lt_error *err) {
    *out = NULL;
    lt_comm *c = calloc(1, sizeof *c);
    if (!c) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    c->timeout_s = timeout_s > 0 ? timeout_s : 300;
    c->l = (lt_comm_layout){.world = 1, .dp = dp, .pp = pp, .tp = tp > 0 ? tp : 1};
    tp = c->l.tp;
#ifdef HAVE_MPI
    if (lt_comm_launched()) {
        int provided, inited = 0;
        MPI_Initialized(&inited);
        if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            free(c);
            return lt_fail(err, LT_ERR_IO, NULL, "MPI_Init failed");
        }
        c->l.distributed = true;
        MPI_Comm_size(MPI_COMM_WORLD, &c->l.world);
        MPI_Comm_rank(MPI_COMM_WORLD, &c->l.rank);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
#endif
    c->l.local_rank = env_int("SLURM_LOCALID", env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0));
    snprintf(c->who, sizeof c->who, "rank %d", c->l.rank);
    lt_status st = LT_OK;
    int ntasks = env_int("SLURM_NTASKS", -1), procid = env_int("SLURM_PROCID", -1);
    if (c->l.distributed && getenv("SLURM_STEP_ID") && ntasks > 0 && (ntasks != c->l.world || procid != c->l.rank))
        st = lt_fail(err, LT_ERR_CONFIG, NULL,
                     "%s: MPI says rank %d of %d, Slurm says SLURM_PROCID=%d of SLURM_NTASKS=%d: launch with "
                     "srun --mpi=pmix (one MPI process per Slurm task)",
                     c->who, c->l.rank, c->l.world, procid, ntasks);
    else if ((long long)dp * pp * tp != c->l.world && tp == 1)
        st = lt_fail(err, LT_ERR_CONFIG, NULL,
                     "parallel.dp = %d x parallel.pp = %d is %lld ranks, but %d process%s started (%s): start dp x pp "
                     "processes (srun -n / mpirun -n) or change the layout",
                     dp, pp, (long long)dp * pp, c->l.world, c->l.world == 1 ? " was" : "es were",
                     c->l.distributed ? "the MPI world" : "no MPI launcher");
    else if ((long long)dp * pp * tp != c->l.world)
        st = lt_fail(err, LT_ERR_CONFIG, NULL,
                     "parallel.dp = %d x parallel.pp = %d x parallel.tp = %d is %lld ranks, but %d process%s started "
                     "(%s): start dp x pp x tp processes (srun -n / mpirun -n) or change the layout",
                     dp, pp, tp, (long long)dp * pp * tp, c->l.world, c->l.world == 1 ? " was" : "es were",
                     c->l.distributed ? "the MPI world" : "no MPI launcher");
    if (st != LT_OK) {
        lt_comm_finalize(c);
        return st;
    }
    /* TP innermost: world rank = (dp_rank x pp + stage) x tp + tp_rank (comm.h "Layout") */
    c->l.tp_rank = c->l.rank % tp;
    c->l.dp_rank = c->l.rank / tp / pp, c->l.stage = c->l.rank / tp % pp;
    if (tp > 1)
        snprintf(c->who, sizeof c->who, "rank %d (dp %d, stage %d, tp %d)", c->l.rank, c->l.dp_rank, c->l.stage,
                 c->l.tp_rank);
    else
        snprintf(c->who, sizeof c->who, "rank %d (dp %d, stage %d)", c->l.rank, c->l.dp_rank, c->l.stage);
#ifdef HAVE_MPI
    if (c->l.distributed) {
        /* the DP, pipeline and tied groups join ranks of one TP rank; the TP group the tp
         * ranks of one (DP rank, stage) */
        int t = c->l.tp_rank, pipe_color = c->l.dp_rank * tp + t;
        int tied_color = pp > 1 && (c->l.stage == 0 || c->l.stage == pp - 1) ? pipe_color : MPI_UNDEFINED;
        if (MPI_Comm_dup(MPI_COMM_WORLD, &c->world) != MPI_SUCCESS || MPI_Comm_dup(MPI_COMM_WORLD, &c->p2p) != MPI_SUCCESS ||
            MPI_Comm_dup(MPI_COMM_WORLD, &c->ring) != MPI_SUCCESS ||
            MPI_Comm_split(MPI_COMM_WORLD, c->l.stage * tp + t, c->l.dp_rank, &c->dp) != MPI_SUCCESS ||
            MPI_Comm_split(MPI_COMM_WORLD, pipe_color, c->l.stage, &c->pipe) != MPI_SUCCESS ||
            MPI_Comm_split(MPI_COMM_WORLD, tied_color, c->l.stage, &c->tied) != MPI_SUCCESS ||
            MPI_Comm_split(MPI_COMM_WORLD, c->l.dp_rank * pp + c->l.stage, t, &c->tpc) != MPI_SUCCESS) {
            lt_comm_finalize(c);
            return lt_fail(err, LT_ERR_IO, NULL, "creating the MPI communicators failed");
        }
        /* a TP group's collectives run every layer: its ranks must share a node */
        MPI_Comm node = MPI_COMM_NULL;
        int on_node = tp;
        if (tp > 1 && MPI_Comm_split_type(c->tpc, MPI_COMM_TYPE_SHARED, t, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
            MPI_Comm_size(node, &on_node);
            MPI_Comm_free(&node);
        }
        if (on_node != tp) {
            lt_fail(err, LT_ERR_CONFIG, NULL, "%s: its TP group of parallel.tp = %d ranks spans nodes (%d of them on "
                    "this one)", c->who, tp, on_node);
            lt_error_hint(err, "start the tasks so that each node holds whole TP groups (ranks are ordered TP, PP, "
                               "DP: srun --ntasks-per-node a multiple of parallel.tp)");
            lt_comm_finalize(c);
            return LT_ERR_CONFIG;
        }
    }
#endif
    *out = c;
    return LT_OK;
}

void lt_comm_finalize(lt_comm *c) {
    if (!c) return;
    lt_comm_nccl_finalize(c);
#ifdef HAVE_MPI
    if (c->l.distributed) {
        MPI_Comm *cs[] = {&c->world, &c->p2p, &c->ring, &c->dp, &c->pipe, &c->tied, &c->tpc};
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
            if (*cs[i] != MPI_COMM_NULL && *cs[i] != 0) MPI_Comm_free(cs[i]);
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) MPI_Finalize();
    }
#endif
    free(c);
}

/* ---------------------------------------------------------------- requests */

#ifdef HAVE_MPI /* (every request is an MPI one) */
static lt_status new_req(lt_comm_req **req, int peer, const char *what, lt_error *err) {
    *req = calloc(1, sizeof **req);
    if (!*req) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    (*req)->peer = peer;
    snprintf((*req)->what, sizeof (*req)->what, "%s", what ? what : "a transfer");
    return LT_OK;
}
#endif

/* Free a request (a device request's event too). */
static void free_req(lt_comm_req *r) {
    if (r && r->event) lt_comm_nccl_release(r);
    free(r);
}

lt_status lt_comm_test(lt_comm *c, lt_comm_req **req, bool *done, lt_error *err) {
    *done = true;
    if (!*req) return LT_OK;
    if ((*req)->event) { /* a device request (train/dist/comm_nccl.c) */
        lt_status st = lt_comm_nccl_poll(c, *req, done, err);
        if (st != LT_OK || *done) free_req(*req), *req = NULL;
        return st;
    }
#ifdef HAVE_MPI
    int flag = 0;
    if (MPI_Test(&(*req)->r, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return lt_fail(err, LT_ERR_IO, NULL, "%s: %s (rank %d) failed", c->who, (*req)->what, (*req)->peer);
    *done = flag != 0;
#else
    (void)c, (void)err;
#endif
    if (*done) free(*req), *req = NULL;
    return LT_OK;
}

lt_status lt_comm_wait(lt_comm *c, lt_comm_req **req, lt_error *err) {
    double t0 = now_s();
    for (unsigned polls = 0;; polls++) {
        bool done;
        lt_status st = lt_comm_test(c, req, &done, err);
        if (st != LT_OK || done) return st;
        double waited = now_s() - t0;
        if (waited > c->timeout_s) {
            st = lt_fail(err, LT_ERR_IO, NULL, "%s: waited %.0f s for %s (rank %d): that rank failed or hangs "
                         "(train.comm_timeout_s = %g)", c->who, waited, (*req)->what, (*req)->peer, c->timeout_s);
            if ((*req)->event) lt_comm_nccl_abort(c); /* the GPU side never hangs on a dead peer either */
            free_req(*req), *req = NULL; /* the request is abandoned: the job aborts */
            return st;
        }
        if (polls > 64) { /* let the ranks sharing this core compute */
            struct timespec ts = {0, polls > 1024 ? 1000000 : 50000};
            nanosleep(&ts, NULL);
        }
    }
}

#ifdef HAVE_MPI
/* bytes as (count, type): MPI_BYTE, or 4-byte words past INT_MAX bytes. */
static bool count_of(size_t bytes, int *count, MPI_Datatype *t) {
    if (bytes <= INT_MAX) return *count = (int)bytes, *t = MPI_BYTE, true;
    if (bytes % 4 == 0 && bytes / 4 <= INT_MAX) return *count = (int)(bytes / 4), *t = MPI_FLOAT, true;
    return false;
}
#endif

/* The one tag of every stage-channel message: a channel's transfers match in posting order
 * (MPI keeps one sender's messages with one tag and communicator in order), as on NCCL. */
enum { STAGE_TAG = 0 };

static lt_status stage_xfer(lt_comm *c, bool send, int stage, void *buf, size_t bytes, bool device,
                            const char *what, lt_comm_req **req, lt_error *err) {
    *req = NULL;
    if (!what) what = "a stage transfer";
    if (stage < 0 || stage >= c->l.pp || stage == c->l.stage)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: %s with stage %d: not another stage of the pipeline (%d "
                       "stages)", c->who, what, stage, c->l.pp);
    if (device) return lt_comm_nccl_stage(c, send, stage, buf, bytes, what, req, err);
    int peer = lt_comm_rank_of(c, c->l.dp_rank, stage);
#ifdef HAVE_MPI
    if (c->l.distributed) {
        int count;
        MPI_Datatype t;
        if (!count_of(bytes, &count, &t))
            return lt_fail(err, LT_ERR_INPUT, NULL, "%s: a %zu-byte message is too large for one MPI call", c->who, bytes);
        lt_status st = new_req(req, peer, what, err);
        if (st != LT_OK) return st;
        int rc = send ? MPI_Isend(buf, count, t, peer, STAGE_TAG, c->p2p, &(*req)->r)
                      : MPI_Irecv(buf, count, t, peer, STAGE_TAG, c->p2p, &(*req)->r);
        if (rc != MPI_SUCCESS) {
            free(*req), *req = NULL;
            return lt_fail(err, LT_ERR_IO, NULL, "%s: posting %s (rank %d) failed", c->who, what, peer);
        }
        return LT_OK;
    }
#endif
    (void)buf, (void)bytes;
    return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: %s with rank %d in a world of one", c->who, what, peer);
}

lt_status lt_comm_stage_isend(lt_comm *c, int stage, const void *buf, size_t bytes, bool device, const char *what,
                              lt_comm_req **req, lt_error *err) {
    return stage_xfer(c, true, stage, (void *)buf, bytes, device, what, req, err);
}

lt_status lt_comm_stage_irecv(lt_comm *c, int stage, void *buf, size_t bytes, bool device, const char *what,
                              lt_comm_req **req, lt_error *err) {
    return stage_xfer(c, false, stage, buf, bytes, device, what, req, err);
}

/* ---------------------------------------------------------------- collectives */

#ifdef HAVE_MPI
static MPI_Comm comm_of(lt_comm *c, lt_comm_group g) {
    switch (g) {
    case LT_COMM_DP: return c->dp;
    case LT_COMM_PIPELINE: return c->pipe;
    case LT_COMM_TIED: return c->tied;
    case LT_COMM_TP: return c->tpc;
    default: return c->world;
    }
}

static const char *group_name(lt_comm_group g) {
    return g == LT_COMM_DP ? "the DP ranks of this stage" : g == LT_COMM_PIPELINE ? "the stages of this pipeline"
                           : g == LT_COMM_TIED ? "the first and last stage"
                           : g == LT_COMM_TP   ? "the TP ranks of this stage" : "every rank";
}
#endif

/* Post an all-reduce (sum, or max) of n elements of buf over `group`. */
static lt_status iallreduce(lt_comm *c, lt_comm_group group, void *buf, size_t n, lt_comm_dtype t, bool max,
                            const char *what, lt_comm_req **req, lt_error *err) {
    *req = NULL;
    if (group == LT_COMM_TP && c->l.tp > 1)
        c->bytes[LT_COMM_BYTES_TP_ALLREDUCE] += (double)n * (t == LT_COMM_F32 ? 4 : 8) * 2.0 * (c->l.tp - 1) / c->l.tp;
    if (group == LT_COMM_DP && c->l.dp > 1)
        c->bytes[LT_COMM_BYTES_DP_ALLREDUCE] += (double)n * (t == LT_COMM_F32 ? 4 : 8) * 2.0 * (c->l.dp - 1) / c->l.dp;
#ifdef HAVE_MPI
    if (c->l.distributed) {
        MPI_Comm comm = comm_of(c, group);
        if (comm == MPI_COMM_NULL)
            return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s is not in %s", c->who, group_name(group));
        if (n > INT_MAX) return lt_fail(err, LT_ERR_INPUT, NULL, "%s: an all-reduce of %zu elements", c->who, n);
        MPI_Datatype dt = t == LT_COMM_F32 ? MPI_FLOAT : t == LT_COMM_F64 ? MPI_DOUBLE : MPI_INT64_T;
        char w[120];
        snprintf(w, sizeof w, "%s (all-reduce over %s)", what, group_name(group));
        lt_status st = new_req(req, -1, w, err);
        if (st != LT_OK) return st;
        if (MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, dt, max ? MPI_MAX : MPI_SUM, comm, &(*req)->r) != MPI_SUCCESS) {
            free(*req), *req = NULL;
            return lt_fail(err, LT_ERR_IO, NULL, "%s: %s failed", c->who, w);
        }
        return LT_OK;
    }
#endif
    (void)c, (void)group, (void)buf, (void)n, (void)t, (void)max, (void)what, (void)err;
    return LT_OK; /* a world of one: the sum (or maximum) is the value */
}

lt_status lt_comm_iallreduce(lt_comm *c, lt_comm_group group, void *buf, size_t n, lt_comm_dtype t,
                             const char *what, lt_comm_req **req, lt_error *err) {
    return iallreduce(c, group, buf, n, t, false, what, req, err);
}

lt_status lt_comm_allreduce(lt_comm *c, lt_comm_group group, void *buf, size_t n, lt_comm_dtype t, bool max,
                            lt_error *err) {
    lt_comm_req *req;
    lt_status st = iallreduce(c, group, buf, n, t, max, max ? "a maximum" : "a sum", &req, err);
    return st == LT_OK ? lt_comm_wait(c, &req, err) : st;
}

lt_status lt_comm_tp_allgather(lt_comm *c, void *buf, size_t block, size_t whole, lt_error *err) {
    c->bytes[LT_COMM_BYTES_TP_ALLGATHER] += (double)whole * (c->l.tp - 1) / c->l.tp;
#ifdef HAVE_MPI
    if (c->l.distributed && c->l.tp > 1) {
        int count;
        MPI_Datatype t;
        if (!count_of(block, &count, &t))
            return lt_fail(err, LT_ERR_INPUT, NULL, "%s: a %zu-byte all-gather block is too large for one MPI call",
                           c->who, block);
        lt_comm_req *req;
        lt_status st = new_req(&req, -1, "an all-gather over the TP ranks of this stage", err);
        if (st != LT_OK) return st;
        if (MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, count, t, c->tpc, &req->r) != MPI_SUCCESS) {
            free(req);
            return lt_fail(err, LT_ERR_IO, NULL, "%s: an all-gather over the TP ranks failed", c->who);
        }
        return lt_comm_wait(c, &req, err);
    }
#endif
    (void)buf, (void)err;
    return LT_OK;
}

lt_status lt_comm_tp_ireduce_scatter(lt_comm *c, float *buf, size_t n, size_t whole, lt_comm_req **req, lt_error *err) {
    *req = NULL;
    c->bytes[LT_COMM_BYTES_TP_REDUCE_SCATTER] += (double)whole * (c->l.tp - 1) / c->l.tp;
#ifdef HAVE_MPI
    if (c->l.distributed && c->l.tp > 1) {
        if (n > INT_MAX) return lt_fail(err, LT_ERR_INPUT, NULL, "%s: a reduce-scatter block of %zu elements", c->who, n);
        lt_status st = new_req(req, -1, "a reduce-scatter over the TP ranks of this stage", err);
        if (st != LT_OK) return st;
        /* in place, MPI leaves the sum of block tp_rank at the start of buf */
        if (MPI_Ireduce_scatter_block(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->tpc, &(*req)->r) != MPI_SUCCESS) {
            free(*req), *req = NULL;
            return lt_fail(err, LT_ERR_IO, NULL, "%s: a reduce-scatter over the TP ranks failed", c->who);
        }
        return LT_OK;
    }
#endif
    (void)buf, (void)n, (void)err;
    return LT_OK;
}

lt_status lt_comm_tp_reduce_scatter(lt_comm *c, float *buf, size_t n, size_t whole, lt_error *err) {
    lt_comm_req *req;
    lt_status st = lt_comm_tp_ireduce_scatter(c, buf, n, whole, &req, err);
    bool posted = req != NULL;
    if (st == LT_OK) st = lt_comm_wait(c, &req, err);
    if (st == LT_OK && posted && c->l.tp_rank > 0) memmove(buf + (size_t)c->l.tp_rank * n, buf, n * sizeof *buf);
    return st;
}

/* a DP collective's data, counts[0..dp), in bytes as a ring sends it: (dp - 1) / dp */
static double dp_ring_bytes(const lt_comm *c, const int *counts) {
    double n = 0;
    for (int r = 0; r < c->l.dp; r++) n += counts[r];
    return c->l.dp > 1 ? n * sizeof(float) * (c->l.dp - 1) / c->l.dp : 0.0;
}

lt_status lt_comm_ireduce_scatter_dp(lt_comm *c, float *buf, const int *counts, const char *what, lt_comm_req **req,
                                     lt_error *err) {
    *req = NULL;
    c->bytes[LT_COMM_BYTES_DP_REDUCE_SCATTER] += dp_ring_bytes(c, counts);
#ifdef HAVE_MPI
    if (c->l.distributed) {
        lt_status st = new_req(req, -1, what ? what : "a gradient reduce-scatter over the DP ranks of this stage", err);
        if (st != LT_OK) return st;
        if (MPI_Ireduce_scatter(MPI_IN_PLACE, buf, counts, MPI_FLOAT, MPI_SUM, c->dp, &(*req)->r) != MPI_SUCCESS) {
            free(*req), *req = NULL;
            return lt_fail(err, LT_ERR_IO, NULL, "%s: a reduce-scatter failed", c->who);
        }
        return LT_OK;
    }
#endif
    (void)c, (void)buf, (void)counts, (void)err;
    return LT_OK;
}

lt_status lt_comm_reduce_scatter_dp(lt_comm *c, float *buf, const int *counts, lt_error *err) {
    lt_comm_req *req;
    lt_status st = lt_comm_ireduce_scatter_dp(c, buf, counts, NULL, &req, err);
    return st == LT_OK ? lt_comm_wait(c, &req, err) : st;
}

lt_status lt_comm_iallgather_dp(lt_comm *c, float *buf, const int *counts, const int *displs, const char *what,
                                lt_comm_req **req, lt_error *err) {
    *req = NULL;
    c->bytes[LT_COMM_BYTES_DP_ALLGATHER] += dp_ring_bytes(c, counts);
#ifdef HAVE_MPI
    if (c->l.distributed) {
        lt_status st = new_req(req, -1, what ? what : "a weight all-gather over the DP ranks of this stage", err);
        if (st != LT_OK) return st;
        if (MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT, c->dp, &(*req)->r) !=
            MPI_SUCCESS) {
            free(*req), *req = NULL;
            return lt_fail(err, LT_ERR_IO, NULL, "%s: an all-gather failed", c->who);
        }
        return LT_OK;
    }
#endif
    (void)c, (void)buf, (void)counts, (void)displs, (void)err;
    return LT_OK;
}

lt_status lt_comm_allgather_dp(lt_comm *c, float *buf, const int *counts, const int *displs, lt_error *err) {
    lt_comm_req *req;
    lt_status st = lt_comm_iallgather_dp(c, buf, counts, displs, NULL, &req, err);
    return st == LT_OK ? lt_comm_wait(c, &req, err) : st;
}

lt_status lt_comm_ring_allgather(lt_comm *c, const int *members, int G, int me, const void *mine, const size_t *bytes,
                                 void *all, lt_error *err) {
    size_t *off = malloc(((size_t)G + 1) * sizeof *off);
    if (!off) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    off[0] = 0;
    for (int j = 0; j < G; j++) off[j + 1] = off[j] + bytes[j];
    memcpy((char *)all + off[me], mine, bytes[me]);
    lt_status st = LT_OK;
#ifdef HAVE_MPI
    /* hop h: send the block of member (me - h) to the next member, receive the block of
     * member (me - h - 1) from the previous one */
    int next = members[(me + 1) % G], prev = members[(me + G - 1) % G];
    for (int h = 0; st == LT_OK && h < G - 1 && c->l.distributed; h++) {
        int sb = (me - h + G) % G, rb = (me - h - 1 + 2 * G) % G;
        int sc, rc;
        MPI_Datatype stp, rtp;
        if (!count_of(bytes[sb], &sc, &stp) || !count_of(bytes[rb], &rc, &rtp)) {
            st = lt_fail(err, LT_ERR_INPUT, NULL, "%s: a K/V block too large for one MPI call", c->who);
            break;
        }
        lt_comm_req *rs = NULL, *rr = NULL;
        st = new_req(&rs, next, "the context-parallel K/V exchange (send)", err);
        if (st == LT_OK) st = new_req(&rr, prev, "the context-parallel K/V exchange (receive)", err);
        if (st == LT_OK && (MPI_Irecv((char *)all + off[rb], rc, rtp, prev, h, c->ring, &rr->r) != MPI_SUCCESS ||
                            MPI_Isend((char *)all + off[sb], sc, stp, next, h, c->ring, &rs->r) != MPI_SUCCESS))
            st = lt_fail(err, LT_ERR_IO, NULL, "%s: the ring exchange failed", c->who);
        if (st == LT_OK) st = lt_comm_wait(c, &rr, err);
        if (st == LT_OK) st = lt_comm_wait(c, &rs, err);
        free(rs), free(rr);
    }
#endif
    if (st == LT_OK && G > 1 && !c->l.distributed)
        st = lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: a ring of %d in a world of one", c->who, G);
    (void)members;
    free(off);
    return st;
}

lt_status lt_comm_exchange(lt_comm *c, const int *members, int G, int me, const void *const *send, const size_t *sbytes,
                           void *const *recv, const size_t *rbytes, lt_error *err) {
    lt_comm_req **req = calloc(2 * (size_t)G + 1, sizeof *req);
    if (!req) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    lt_status st = LT_OK;
    for (int j = 0; st == LT_OK && j < G; j++) {
        if (j == me || (sbytes[j] == 0 && rbytes[j] == 0)) continue;
        if (!c->l.distributed) {
            st = lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: an exchange with rank %d in a world of one", c->who, members[j]);
            break;
        }
#ifdef HAVE_MPI
        int sc, rc;
        MPI_Datatype stp, rtp;
        if (!count_of(sbytes[j], &sc, &stp) || !count_of(rbytes[j], &rc, &rtp)) {
            st = lt_fail(err, LT_ERR_INPUT, NULL, "%s: an exchange too large for one MPI call", c->who);
            break;
        }
        /* the tag after the ring's hops (< G - 1 <= 2^15): MPI keeps one pair's messages in order */
        const int tag = 32767;
        if (rbytes[j] > 0 && (st = new_req(&req[2 * j], members[j], "rows of a context-parallel group (receive)", err)) == LT_OK &&
            MPI_Irecv(recv[j], rc, rtp, members[j], tag, c->ring, &req[2 * j]->r) != MPI_SUCCESS)
            st = lt_fail(err, LT_ERR_IO, NULL, "%s: posting a receive from rank %d failed", c->who, members[j]);
        if (st == LT_OK && sbytes[j] > 0 &&
            (st = new_req(&req[2 * j + 1], members[j], "rows of a context-parallel group (send)", err)) == LT_OK &&
            MPI_Isend(send[j], sc, stp, members[j], tag, c->ring, &req[2 * j + 1]->r) != MPI_SUCCESS)
            st = lt_fail(err, LT_ERR_IO, NULL, "%s: posting a send to rank %d failed", c->who, members[j]);
#endif
    }
    for (int k = 0; k < 2 * G; k++) {
        if (!req[k]) continue;
        lt_status s2 = st == LT_OK ? lt_comm_wait(c, &req[k], err) : LT_OK;
        if (st == LT_OK) st = s2;
        free(req[k]);
    }
    free(req);
    (void)send, (void)recv;
    return st;
}

lt_status lt_comm_gather_bytes(lt_comm *c, const void *mine, size_t bytes, void **all, size_t *lens, lt_error *err) {
    *all = NULL;
    if (!c->l.distributed) {
        if (!(*all = malloc(bytes ? bytes : 1))) return lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
        memcpy(*all, mine, bytes);
        if (lens) lens[0] = bytes;
        return LT_OK;
    }
#ifdef HAVE_MPI
    if (bytes > INT_MAX) return lt_fail(err, LT_ERR_INPUT, NULL, "%s: gathering %zu bytes", c->who, bytes);
    int n = (int)bytes, W = c->l.world;
    int *counts = c->l.rank == 0 ? malloc((size_t)W * sizeof(int)) : NULL;
    int *displs = c->l.rank == 0 ? malloc((size_t)W * sizeof(int)) : NULL;
    if (c->l.rank == 0 && (!counts || !displs)) lt_comm_abort(c, 1, "out of memory gathering from the ranks");
    lt_comm_req *req;
    lt_status st = new_req(&req, 0, "gathering to rank 0 (the counts)", err);
    if (st != LT_OK) return st;
    MPI_Igather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, c->world, &req->r);
    st = lt_comm_wait(c, &req, err);
    long long total = 0;
    for (int r = 0; st == LT_OK && counts && r < W; r++) displs[r] = (int)total, total += counts[r];
    if (st == LT_OK && total > INT_MAX) st = lt_fail(err, LT_ERR_INPUT, NULL, "gathering %lld bytes", total);
    if (st == LT_OK && c->l.rank == 0 && !(*all = malloc(total ? (size_t)total : 1)))
        st = lt_fail(err, LT_ERR_NOMEM, NULL, "out of memory");
    if (st == LT_OK) st = new_req(&req, 0, "gathering to rank 0", err);
    if (st == LT_OK) {
        MPI_Igatherv(mine, n, MPI_BYTE, *all, counts, displs, MPI_BYTE, 0, c->world, &req->r);
        st = lt_comm_wait(c, &req, err);
    }
    for (int r = 0; st == LT_OK && lens && counts && r < W; r++) lens[r] = (size_t)counts[r];
    free(counts), free(displs);
    if (st != LT_OK) free(*all), *all = NULL;
    return st;
#else
    return lt_fail(err, LT_ERR_INTERNAL, NULL, "no MPI");
#endif
}

lt_status lt_comm_bcast(lt_comm *c, void *buf, size_t bytes, lt_error *err) {
#ifdef HAVE_MPI
    if (c->l.distributed) {
        int count;
        MPI_Datatype t;
        if (!count_of(bytes, &count, &t)) return lt_fail(err, LT_ERR_INPUT, NULL, "broadcasting %zu bytes", bytes);
        lt_comm_req *req;
        lt_status st = new_req(&req, 0, "a broadcast from rank 0", err);
        if (st != LT_OK) return st;
        MPI_Ibcast(buf, count, t, 0, c->world, &req->r);
        return lt_comm_wait(c, &req, err);
    }
#endif
    (void)c, (void)buf, (void)bytes, (void)err;
    return LT_OK;
}

lt_status lt_comm_barrier(lt_comm *c, lt_error *err) {
#ifdef HAVE_MPI
    if (c->l.distributed) {
        lt_comm_req *req;
        lt_status st = new_req(&req, -1, "a barrier of every rank", err);
        if (st != LT_OK) return st;
        MPI_Ibarrier(c->world, &req->r);
        return lt_comm_wait(c, &req, err);
    }
#endif
    (void)c, (void)err;
    return LT_OK;
}

/* ---------------------------------------------------------------- the device half (NCCL) */

lt_status lt_comm_attach_device(lt_comm *c, int device, void *compute_stream, void *comm_stream, bool any_stage,
                                lt_error *err) {
    if (c->nccl) return lt_fail(err, LT_ERR_INTERNAL, NULL, "%s: a device is attached already", c->who);
    lt_status st = lt_comm_nccl_open(c, device, compute_stream, comm_stream, err);
    if (!c->nccl) return st; /* out of memory, or a build without CUDA */
    /* a single rank needs no NCCL communicator: its all-reduces are the identity */
    if (c->l.world > 1) {
        lt_comm_nccl_id m;
        memset(&m, 0, sizeof m);
        if (c->l.rank == 0 && st == LT_OK) m.ok = lt_comm_nccl_unique_id(m.id);
        /* every rank answers rank 0's broadcast, even one whose device failed above (its
         * error kept): a rank that skipped it would leave the others waiting out the deadline
         * in the broadcast; rank 0's failure reaches everyone through m.ok */
        lt_error bcast_err;
        lt_status sb = lt_comm_bcast(c, &m, sizeof m, st == LT_OK ? err : &bcast_err);
        if (st == LT_OK) st = sb;
        if (st == LT_OK && !m.ok)
            st = lt_fail(err, LT_ERR_IO, NULL, "%s: rank 0 could not open its GPU or make an NCCL unique id",
                         c->who);
        if (st == LT_OK) st = lt_comm_nccl_join(c, m.id, any_stage, err);
    }
    if (st != LT_OK) lt_comm_nccl_detach(c);
    return st;
}

lt_status lt_comm_dev_allreduce(lt_comm *c, lt_comm_group group, void *buf, size_t n, lt_comm_dtype t, bool max,
                                lt_error *err) {
    lt_comm_req *req;
    lt_status st = lt_comm_dev_iallreduce(c, group, buf, n, t, max, NULL, &req, err);
    return st == LT_OK ? lt_comm_wait(c, &req, err) : st;
}

lt_status lt_comm_dev_tp_allgather(lt_comm *c, void *buf, size_t block, size_t whole, lt_error *err) {
    if (c->l.tp < 2) return LT_OK;
    c->bytes[LT_COMM_BYTES_TP_ALLGATHER] += (double)whole * (c->l.tp - 1) / c->l.tp;
    lt_comm_req *req;
    lt_status st = lt_comm_nccl_blocks(c, LT_COMM_TP, true, buf, block, 1, &req, err);
    return st == LT_OK ? lt_comm_wait(c, &req, err) : st;
}

lt_status lt_comm_dev_tp_ireduce_scatter(lt_comm *c, void *buf, size_t n, size_t es, size_t whole, lt_comm_req **req,
                                         lt_error *err) {
    *req = NULL;
    if (c->l.tp < 2) return LT_OK;
    c->bytes[LT_COMM_BYTES_TP_REDUCE_SCATTER] += (double)whole * (c->l.tp - 1) / c->l.tp;
    return lt_comm_nccl_blocks(c, LT_COMM_TP, false, buf, n, es, req, err);
}

lt_status lt_comm_dev_tp_reduce_scatter(lt_comm *c, void *buf, size_t n, size_t es, size_t whole, lt_error *err) {
    lt_comm_req *req;
    lt_status st = lt_comm_dev_tp_ireduce_scatter(c, buf, n, es, whole, &req, err);
    return st == LT_OK ? lt_comm_wait(c, &req, err) : st;
}

lt_status lt_comm_dev_dp_blocks(lt_comm *c, bool gather, void *buf, size_t count, size_t es, size_t whole,
                                lt_error *err) {
    if (c->l.dp < 2) return LT_OK;
    c->bytes[gather ? LT_COMM_BYTES_DP_ALLGATHER : LT_COMM_BYTES_DP_REDUCE_SCATTER] +=
        (double)whole * (c->l.dp - 1) / c->l.dp;
    lt_comm_req *req;
    lt_status st = lt_comm_nccl_blocks(c, LT_COMM_DP, gather, buf, count, es, &req, err);
    return st == LT_OK ? lt_comm_wait(c, &req, err) : st;
}

lt_status lt_comm_dev_ring_allgather(lt_comm *c, const int *members, int G, int me, const void *mine,
                                     const size_t *bytes, void *all, lt_error *err) {
    lt_comm_req *req;
    lt_status st = lt_comm_nccl_ring_allgather(c, members, G, me, mine, bytes, all, &req, err);
    return st == LT_OK ? lt_comm_wait(c, &req, err) : st;
}

lt_status lt_comm_dev_exchange(lt_comm *c, const int *members, int G, int me, const void *const *send,
                               const size_t *sbytes, void *const *recv, const size_t *rbytes, lt_error *err) {
    lt_comm_req *req;
    lt_status st = lt_comm_nccl_exchange(c, members, G, me, send, sbytes, recv, rbytes, &req, err);
    return st == LT_OK ? lt_comm_wait(c, &req, err) : st;
}
