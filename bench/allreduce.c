/* allreduce.c -- what one gradient allreduce costs here, without a model around it: the time
 * of ag_dist_allreduce (and of the started/waited form, in 8 slices as the overlapped backward
 * sends them, and of Open MPI's blocking MPI_Allreduce) on a float buffer of each size given, median of --reps, and the bus bandwidth
 * it reaches (a ring allreduce moves 2(N-1)/N x 4 bytes per element through each rank's link).
 * docs/distributed.md's scaling model starts from these figures.
 *
 *   make build/allreduce_bench
 *   mpirun -np 2 build/allreduce_bench 110529 818241 10795841        (tiny, baby, small)
 *   mpirun -np 2 --mca btl self,tcp build/allreduce_bench ...          (TCP, as between hosts) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dist/dist.h"
#include "tensor/debug.h"   /* ag_now_s */

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the median time of reps allreduces of n floats, whole (slices 0) or in slices started in turn */
static double timed(ag_dist *d, ag_real *g, size_t n, int slices, int reps, ag_error *e)
{
    double *t = malloc((size_t)reps * sizeof *t);
    for (int r = 0; r < reps; r++) {
        ag_dist_barrier(d, e);   /* everyone starts together: the time is the transfer's, not a wait for a late rank */
        double t0 = ag_now_s();
        if (slices < 0) {   /* Open MPI's own blocking call, spinning: what the polling is measured against */
            MPI_Allreduce(MPI_IN_PLACE, g, (int)n, sizeof(ag_real) == 4 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        } else if (slices == 0) {
            ag_dist_allreduce(d, g, n, AG_DIST_REAL, AG_DIST_SUM, e);
        } else {
            for (int s = slices - 1; s >= 0; s--) {   /* last block first, as the backward finishes them */
                size_t from = n * (size_t)s / (size_t)slices, to = n * (size_t)(s + 1) / (size_t)slices;
                ag_dist_allreduce_start(d, g + from, to - from, AG_DIST_REAL, e);
            }
            ag_dist_wait(d, e);
        }
        t[r] = ag_now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp);
    double m = t[reps / 2];
    free(t);
    return m;
}

int main(int argc, char **argv)
{
    ag_dist *d;
    ag_error e = {0};
    if (ag_dist_init(&d, 0, &e)) {
        fprintf(stderr, "allreduce_bench: %s\n", e.msg);
        return 1;
    }
    int N = ag_dist_size(d), rank = ag_dist_rank(d), reps = 21;
    if (rank == 0) printf("%d ranks; median of %d; bus bandwidth = 2(N-1)/N x 4 B x elements / time\n", N, reps);
    for (int i = 1; i < argc; i++) {
        size_t n = strtoull(argv[i], NULL, 10);
        ag_real *g = calloc(n ? n : 1, sizeof *g);
        if (!g) return 1;
        double whole = timed(d, g, n, 0, reps, &e), sliced = timed(d, g, n, 8, reps, &e);
        double blocking = n < (size_t)1 << 30 ? timed(d, g, n, -1, reps, &e) : 0;
        double bytes = 2.0 * (N - 1) / N * 4.0 * (double)n;
        if (rank == 0)
            printf("%10zu floats (%6.2f MB): allreduce %8.3f ms (%6.2f GB/s), 8 started slices %8.3f ms, blocking "
                   "MPI_Allreduce %8.3f ms (%6.2f GB/s)\n", n, 4e-6 * (double)n, 1e3 * whole,
                   whole > 0 ? 1e-9 * bytes / whole : 0, 1e3 * sliced, 1e3 * blocking,
                   blocking > 0 ? 1e-9 * bytes / blocking : 0);
        free(g);
    }
    if (e.status) fprintf(stderr, "allreduce_bench: %s\n", e.msg);
    ag_dist_end(d, e.status == AG_OK);
    return e.status ? 1 : 0;
}
