/*
 * mpi_allreduce.c - MPI smoke test for the longtail Slurm integration test.
 *
 * Launched by tests/integration/slurm_cluster.sh as
 *     srun --mpi=pmix -N1 -n2 mpi_allreduce
 * inside the private cluster started by scripts/slurm-local.sh.  Each rank r
 * contributes r + 1 (as a scalar and in every element of a small vector whose
 * element i also carries i), the values are summed with MPI_Allreduce and
 * every rank checks that
 *   - the scalar sum equals n(n+1)/2 for world size n,
 *   - vector element i equals n(n+1)/2 + n*i,
 *   - the MPI world size equals $SLURM_NTASKS (which must be set), i.e. the
 *     ranks were wired up by Slurm's PMIx plugin as one job rather than
 *     started as n independent singletons.
 * Rank 0 prints one line
 *     mpi_allreduce: ok world_size=N slurm_ntasks=N sum=S
 * on success; any mismatch is reported on stderr and the exit status is
 * non-zero.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#define VEC_LEN 16

static int parse_ntasks(const char *s, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v <= 0 || v > INT_MAX)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    int rank = 0, size = 0, rc, failed = 0, any_failed = 0, i;
    long ntasks = -1, mine, sum = 0, expect;
    long vec[VEC_LEN], vsum[VEC_LEN];
    const char *env;

    rc = MPI_Init(&argc, &argv);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "mpi_allreduce: MPI_Init failed (code %d)\n", rc);
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    env = getenv("SLURM_NTASKS");
    if (env == NULL) {
        fprintf(stderr, "mpi_allreduce: rank %d: SLURM_NTASKS is not set "
                "(not launched by srun?)\n", rank);
        failed = 1;
    } else if (parse_ntasks(env, &ntasks) != 0) {
        fprintf(stderr, "mpi_allreduce: rank %d: SLURM_NTASKS='%s' is not "
                "a positive integer\n", rank, env);
        failed = 1;
    } else if (ntasks != size) {
        fprintf(stderr, "mpi_allreduce: rank %d: MPI world size %d != "
                "SLURM_NTASKS %ld\n", rank, size, ntasks);
        failed = 1;
    }

    mine = (long)rank + 1;
    for (i = 0; i < VEC_LEN; i++)
        vec[i] = mine + i;

    rc = MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS)
        rc = MPI_Allreduce(vec, vsum, VEC_LEN, MPI_LONG, MPI_SUM,
                           MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "mpi_allreduce: rank %d: MPI_Allreduce failed "
                "(code %d)\n", rank, rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }

    expect = (long)size * ((long)size + 1) / 2;
    if (sum != expect) {
        fprintf(stderr, "mpi_allreduce: rank %d: sum %ld != n(n+1)/2 = %ld "
                "for n=%d\n", rank, sum, expect, size);
        failed = 1;
    }
    for (i = 0; i < VEC_LEN; i++) {
        long want = expect + (long)size * i;
        if (vsum[i] != want) {
            fprintf(stderr, "mpi_allreduce: rank %d: vector element %d is "
                    "%ld, expected %ld\n", rank, i, vsum[i], want);
            failed = 1;
            break;
        }
    }

    /* Agree on the outcome so that every rank exits with the same status. */
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

    if (rank == 0) {
        if (any_failed)
            fprintf(stderr, "mpi_allreduce: FAILED world_size=%d "
                    "slurm_ntasks=%s sum=%ld\n", size,
                    env != NULL ? env : "(unset)", sum);
        else
            printf("mpi_allreduce: ok world_size=%d slurm_ntasks=%ld "
                   "sum=%ld\n", size, ntasks, sum);
        fflush(stdout);
    }

    MPI_Finalize();
    return any_failed ? 1 : 0;
}
