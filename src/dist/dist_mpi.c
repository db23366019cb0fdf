/* dist_mpi.c -- dist.h over MPI (built with mpicc; build/char_lm_mpi).
 *
 * The job is MPI_COMM_WORLD, duplicated so that our collectives never meet anyone else's, with
 * MPI_ERRORS_RETURN on it: a failed call comes back as AG_ERR_IO and MPI's own words, and the
 * program decides (it exits non-zero without finalizing; mpirun then ends the job).
 * MPI counts are ints, so a buffer of more than 2^30 elements goes in several pieces.
 * Reference: MPI 3.1 standard, sections 5.9 (MPI_Allreduce) and 5.12 (MPI_Iallreduce). */
#include <mpi.h>
#include <stdlib.h>
#include "dist.h"

#define CHUNK ((size_t)1 << 30)   /* elements per MPI call: well inside an int count */

struct ag_dist {
    MPI_Comm comm;
    int rank, size;
    MPI_Request *pending;   /* [cap] started reductions not yet waited for */
    int n_pending, cap;
};

/* MPI's status rc as AG_ERR_IO with its text ("MPI_Allreduce: MPI_ERR_TRUNCATE: ..."). */
static ag_status mpi_fail(int rc, const char *call, ag_error *err)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    text[len] = '\0';
    return ag_seterr(err, AG_ERR_IO, "%s failed: %s", call, len ? text : "unknown MPI error");
}

static MPI_Datatype mpi_type(ag_dist_type t)
{
    if (t == AG_DIST_DOUBLE) return MPI_DOUBLE;
    return sizeof(ag_real) == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT;
}

static size_t type_size(ag_dist_type t) { return t == AG_DIST_DOUBLE ? sizeof(double) : sizeof(ag_real); }

ag_status ag_dist_init(ag_dist **out, ag_error *err)
{
    *out = NULL;
    int provided, rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Init_thread", err);
    ag_dist *d = calloc(1, sizeof *d);
    if (!d) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &d->comm)) != MPI_SUCCESS) {
        free(d);
        return mpi_fail(rc, "MPI_Comm_dup", err);
    }
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(d->comm, &d->rank);
    MPI_Comm_size(d->comm, &d->size);
    *out = d;
    return AG_OK;
}

void ag_dist_end(ag_dist *d, bool ok)
{
    if (!d) return;
    if (ok) {
        MPI_Comm_free(&d->comm);
        MPI_Finalize();
    }
    free(d->pending);
    free(d);
}

int ag_dist_rank(const ag_dist *d) { return d ? d->rank : 0; }
int ag_dist_size(const ag_dist *d) { return d ? d->size : 1; }
const char *ag_dist_backend(void) { return "mpi"; }

ag_status ag_dist_allreduce(ag_dist *d, void *buf, size_t n, ag_dist_type type, ag_dist_op op, ag_error *err)
{
    if (d->size == 1) return AG_OK;
    char *p = buf;
    for (size_t done = 0; done < n; done += CHUNK) {
        int count = (int)(n - done < CHUNK ? n - done : CHUNK);
        int rc = MPI_Allreduce(MPI_IN_PLACE, p + done * type_size(type), count, mpi_type(type),
                               op == AG_DIST_MAX ? MPI_MAX : MPI_SUM, d->comm);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Allreduce", err);
    }
    return AG_OK;
}

/* room for one more request (grows at the first steps only: the same reductions every step) */
static ag_status reserve(ag_dist *d, ag_error *err)
{
    if (d->n_pending < d->cap) return AG_OK;
    int cap = d->cap ? 2 * d->cap : 16;
    MPI_Request *p = realloc(d->pending, (size_t)cap * sizeof *p);
    if (!p) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    d->pending = p;
    d->cap = cap;
    return AG_OK;
}

ag_status ag_dist_allreduce_start(ag_dist *d, void *buf, size_t n, ag_dist_type type, ag_error *err)
{
    if (d->size == 1) return AG_OK;
    char *p = buf;
    for (size_t done = 0; done < n; done += CHUNK) {
        int count = (int)(n - done < CHUNK ? n - done : CHUNK);
        ag_status s = reserve(d, err);
        if (s) return s;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, p + done * type_size(type), count, mpi_type(type), MPI_SUM, d->comm,
                                &d->pending[d->n_pending]);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Iallreduce", err);
        d->n_pending++;
    }
    return AG_OK;
}

ag_status ag_dist_progress(ag_dist *d, ag_error *err)
{
    if (d->n_pending == 0) return AG_OK;
    int flag, rc = MPI_Testall(d->n_pending, d->pending, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Testall", err);
    if (flag) d->n_pending = 0;
    return AG_OK;
}

ag_status ag_dist_wait(ag_dist *d, ag_error *err)
{
    if (d->n_pending == 0) return AG_OK;
    int rc = MPI_Waitall(d->n_pending, d->pending, MPI_STATUSES_IGNORE);
    d->n_pending = 0;
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Waitall", err);
    return AG_OK;
}

ag_status ag_dist_bcast(ag_dist *d, void *buf, size_t bytes, int root, ag_error *err)
{
    if (d->size == 1) return AG_OK;
    char *p = buf;
    for (size_t done = 0; done < bytes; done += CHUNK) {
        int count = (int)(bytes - done < CHUNK ? bytes - done : CHUNK);
        int rc = MPI_Bcast(p + done, count, MPI_BYTE, root, d->comm);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Bcast", err);
    }
    return AG_OK;
}

ag_status ag_dist_barrier(ag_dist *d, ag_error *err)
{
    if (d->size == 1) return AG_OK;
    int rc = MPI_Barrier(d->comm);
    return rc == MPI_SUCCESS ? AG_OK : mpi_fail(rc, "MPI_Barrier", err);
}
