/* dist_mpi.c -- dist.h over MPI (built with mpicc; build/char_lm_mpi).
 *
 * The job is MPI_COMM_WORLD, duplicated so that our collectives never meet anyone else's, with
 * MPI_ERRORS_RETURN on it: a failed call comes back as AG_ERR_IO and MPI's own words, and the
 * program decides (it exits non-zero without finalizing; mpirun then ends the job).
 * MPI counts are ints, so a buffer of more than 2^30 elements goes in several pieces.
 *
 * Every collective is a non-blocking one (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather,
 * MPI_Ibarrier) waited for by wait_all: MPI_Testall, then a nap, until done or the deadline.
 * A blocking MPI call cannot be given a deadline, and Open MPI's blocking waits spin on a core.
 * A second duplicate of the world, `alarm`, carries the notes of ranks whose wait ran out.
 * Reference: MPI 3.1 standard, sections 5.12 (non-blocking collectives) and 3.8 (MPI_Iprobe). */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <time.h>
#include "dist.h"
#include "../tensor/debug.h"   /* ag_now_s */

#define CHUNK ((size_t)1 << 30)   /* elements per MPI call: well inside an int count */
#define ALARM_TAG 1               /* a note on `alarm`: "my wait ran out at collective n" */
#define LISTEN_S 1.0              /* how long a rank whose wait ran out listens for the others */
#define SPIN_S 200e-6             /* polls without naps once every rank is here (wait_all) */

struct ag_dist {
    MPI_Comm comm, alarm;
    int rank, size;
    double timeout;         /* seconds a wait may last; 0: no limit */
    long calls;             /* collectives started so far: ranks at the same point count alike */
    long note;              /* this rank's alarm note, 2 x calls + 1 if its own wait ran out:
                               the buffer of its sends */
    int voice;              /* -1, or after a timeout the rank that reports it (size: none heard) */
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

static void nap(double s);
static double nap_for(double waited);

/* Waits for the two duplicates of the world (MPI_Comm_idup) with the deadline: a rank that runs
 * another program, or an older build whose first collective is another, never joins them, and
 * a blocking MPI_Comm_dup would wait for it forever. */
static ag_status join(ag_dist *d, MPI_Request *q, ag_error *err)
{
    double t0 = ag_now_s();
    for (;;) {
        int done = 0, rc = MPI_Testall(2, q, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Comm_idup", err);
        if (done) return AG_OK;
        double waited = ag_now_s() - t0;
        if (d->timeout > 0 && waited >= d->timeout)
            return ag_seterr(err, AG_ERR_IO, "the %d ranks did not all join the job within %g s (MPI_Comm_idup): a rank "
                             "that did not start, or that runs another program or an older build of this one", d->size,
                             d->timeout);
        nap(nap_for(waited));
    }
}

ag_status ag_dist_init(ag_dist **out, double timeout, ag_error *err)
{
    *out = NULL;
    int provided, rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Init_thread", err);
    ag_dist *d = calloc(1, sizeof *d);
    if (!d) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    ag_dist_set_timeout(d, timeout);
    d->voice = -1;
#ifdef __linux__
    prctl(PR_SET_TIMERSLACK, 1000UL);   /* naps of 20 us last 21, not Linux's default 20 + 50 */
#endif
    MPI_Request q[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    ag_status s = AG_OK;
    if ((rc = MPI_Comm_idup(MPI_COMM_WORLD, &d->comm, &q[0])) != MPI_SUCCESS ||
        (rc = MPI_Comm_idup(MPI_COMM_WORLD, &d->alarm, &q[1])) != MPI_SUCCESS)
        s = mpi_fail(rc, "MPI_Comm_idup", err);
    if (s == AG_OK) s = join(d, q, err);
    if (s) {   /* leaves without MPI_Finalize, as after any failure (dist.h) */
        free(d);
        return s;
    }
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(d->alarm, MPI_ERRORS_RETURN);
    *out = d;
    return AG_OK;
}

void ag_dist_end(ag_dist *d, bool ok)
{
    if (!d) return;
    if (ok) {
        MPI_Comm_free(&d->comm);
        MPI_Comm_free(&d->alarm);
        MPI_Finalize();
    }
    free(d->pending);
    free(d);
}

void ag_dist_after_rank0(const ag_dist *d)
{
    struct timespec wait = {5, 0};
    if (d && d->rank > 0)
        while (nanosleep(&wait, &wait) == -1 && errno == EINTR) {}
}

void ag_dist_set_timeout(ag_dist *d, double seconds) { d->timeout = seconds > 0 ? seconds : 0; }
int ag_dist_voice(const ag_dist *d) { return d ? d->voice : -1; }
int ag_dist_rank(const ag_dist *d) { return d ? d->rank : 0; }
int ag_dist_size(const ag_dist *d) { return d ? d->size : 1; }
const char *ag_dist_backend(void) { return "mpi"; }

// --- waiting: polls and naps, a deadline, and who did not come ---

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The nap between two polls of a wait that has lasted `waited` s: an eighth of it, from 20 us to
 * 2 ms. So a wait of W costs about 8 ln(W / 20 us) + W / 2 ms wake-ups (a few dozen for a step's
 * wait, 500 a second for a long one) and notices its end at most W/8 late, and never more
 * than 2 ms. */
static double nap_for(double waited)
{
    double s = waited / 8;
    return s < 20e-6 ? 20e-6 : s > 2e-3 ? 2e-3 : s;
}

/* "rank 1" or "ranks 1, 2, 5" (at most 8, then "and 3 more") into buf [n]: the ranks r whose
 * at[r] is -1 (want -1), or equals want. Returns the count. */
static int list_ranks(char *buf, size_t n, const long *at, int N, long want)
{
    size_t len = 0;
    int total = 0;
    for (int r = 0; r < N; r++) total += at[r] == want;
    if (total == 0) return 0;
    int w = snprintf(buf, n, "rank%s", total == 1 ? "" : "s");
    len = w > 0 ? (size_t)w : 0;
    for (int r = 0, shown = 0; r < N && len < n; r++) {
        if (at[r] != want) continue;
        if (shown++ == 8) {
            snprintf(buf + len, n - len, " and %d more", total - 8);
            break;
        }
        w = snprintf(buf + len, n - len, "%s%d", shown > 1 ? ", " : " ", r);
        if (w > 0) len += (size_t)w;
    }
    return total;
}

/* The error of a wait that ran out, from what each rank said (at[r]: the collective it waits
 * at, -1: silent). */
static ag_status describe(const ag_dist *d, const long *at, const char *call, ag_error *err)
{
    int N = d->size, elsewhere = 0;
    for (int r = 0; r < N; r++) elsewhere += at[r] >= 0 && at[r] != d->calls;
    char missing[128], there[128];
    int n_missing = list_ranks(missing, sizeof missing, at, N, -1);
    list_ranks(there, sizeof there, at, N, d->calls);
    if (n_missing == 0 && elsewhere == 0)
        return ag_seterr(err, AG_ERR_IO, "%s (collective %ld) did not complete within %g s, though every rank "
                         "reached it", call, d->calls, d->timeout);
    if (n_missing == 0)
        return ag_seterr(err, AG_ERR_IO, "the ranks wait at different collectives (%s at %s, collective %ld; %d "
                         "other%s elsewhere): they do not run the same program", there, call, d->calls, elsewhere,
                         elsewhere == 1 ? "" : "s");
    return ag_seterr(err, AG_ERR_IO, "%s did not reach %s (collective %ld) within %g s: stopped, stalled, dead or "
                     "busy elsewhere (%s waited there%s)", missing, call, d->calls, d->timeout, there,
                     elsewhere ? "; others wait at another collective" : "");
}

/* The wait for `call` ran out (timed_out), or another rank's did: every other rank gets a note
 * saying at which collective this one is and whether its own wait ran out, and the notes of
 * the others are collected for LISTEN_S s (or until all have come). Ranks that sent none were
 * not in a wait: stopped, stalled, dead or still busy. The error names them; the lowest rank
 * whose own wait ran out becomes the voice (a rank that only joined, such as a stalled one that
 * came back, stays quiet). */
static ag_status who_is_missing(ag_dist *d, const char *call, bool timed_out, ag_error *err)
{
    int N = d->size, heard = 1;
    long *at = malloc((size_t)N * sizeof *at);   /* the collective each rank said it waits at; -1: silent */
    if (!at) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    for (int r = 0; r < N; r++) at[r] = -1;
    at[d->rank] = d->calls;
    d->note = 2 * d->calls + timed_out;
    d->voice = timed_out ? d->rank : N;
    for (int r = 0; r < N; r++) {
        MPI_Request q;   /* never waited for: the job is ending, and the note lives in d */
        if (r != d->rank && MPI_Isend(&d->note, 1, MPI_LONG, r, ALARM_TAG, d->alarm, &q) == MPI_SUCCESS)
            MPI_Request_free(&q);
    }
    for (double t0 = ag_now_s(); heard < N && ag_now_s() - t0 < LISTEN_S;) {
        int flag = 0;
        MPI_Status st;
        long v;
        if (MPI_Iprobe(MPI_ANY_SOURCE, ALARM_TAG, d->alarm, &flag, &st) != MPI_SUCCESS || !flag) {
            nap(1e-3);
            continue;
        }
        if (MPI_Recv(&v, 1, MPI_LONG, st.MPI_SOURCE, ALARM_TAG, d->alarm, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        heard += at[st.MPI_SOURCE] < 0;
        at[st.MPI_SOURCE] = v / 2;
        if (v % 2 && st.MPI_SOURCE < d->voice) d->voice = st.MPI_SOURCE;
    }
    ag_status s = describe(d, at, call, err);
    free(at);
    return s;
}

/* Whether another rank's wait ran out: its note is waiting to be read. */
static bool alarm_heard(ag_dist *d)
{
    int flag = 0;
    return MPI_Iprobe(MPI_ANY_SOURCE, ALARM_TAG, d->alarm, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag;
}

/* Waits for the n requests of `call` (WAITING in dist.h): AG_OK once all are complete. For the
 * first `spin` s it polls without naps (once every rank is here, moving the data: Open MPI moves
 * it only inside MPI calls, and a small transfer ends within SPIN_S), then with naps. */
static ag_status wait_all(ag_dist *d, int n, MPI_Request *reqs, const char *call, double spin, ag_error *err)
{
    double t0 = ag_now_s();
    for (long polls = 0;; polls++) {
        int done = 0, rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Testall", err);
        if (done) return AG_OK;
        double waited = ag_now_s() - t0;
        if (waited < spin) continue;
        bool out = d->timeout > 0 && waited >= d->timeout;
        if (out || alarm_heard(d)) return who_is_missing(d, call, out, err);
        nap(nap_for(waited));
    }
}

/* Returns once every rank has come to `call` (an MPI_Ibarrier, waited for with naps): the
 * wait for a late rank costs no core, and the transfer that follows starts without naps. */
static ag_status arrive(ag_dist *d, const char *call, ag_error *err)
{
    MPI_Request q;
    int rc = MPI_Ibarrier(d->comm, &q);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Ibarrier", err);
    d->calls++;
    return wait_all(d, 1, &q, call, 0, err);
}

// --- the collectives ---

/* room for k more requests (grows at the first steps only: the same reductions every step) */
static ag_status reserve(ag_dist *d, int k, ag_error *err)
{
    if (d->n_pending + k <= d->cap) return AG_OK;
    int cap = d->cap ? d->cap : 16;
    while (cap < d->n_pending + k) cap *= 2;
    MPI_Request *p = realloc(d->pending, (size_t)cap * sizeof *p);
    if (!p) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    d->pending = p;
    d->cap = cap;
    return AG_OK;
}

/* Starts the sum (or maximum) of buf[0..n) over the ranks, in pieces of CHUNK, as pending
 * requests. */
static ag_status start_reduce(ag_dist *d, void *buf, size_t n, ag_dist_type type, MPI_Op op, ag_error *err)
{
    char *p = buf;
    for (size_t done = 0; done < n; done += CHUNK) {
        int count = (int)(n - done < CHUNK ? n - done : CHUNK);
        ag_status s = reserve(d, 1, err);
        if (s) return s;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, p + done * type_size(type), count, mpi_type(type), op, d->comm,
                                &d->pending[d->n_pending]);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Iallreduce", err);
        d->n_pending++;
        d->calls++;
    }
    return AG_OK;
}

ag_status ag_dist_allreduce(ag_dist *d, void *buf, size_t n, ag_dist_type type, ag_dist_op op, ag_error *err)
{
    if (d->size == 1) return AG_OK;
    ag_status s = arrive(d, "MPI_Iallreduce", err);
    if (s == AG_OK) s = start_reduce(d, buf, n, type, op == AG_DIST_MAX ? MPI_MAX : MPI_SUM, err);
    ag_status w = d->n_pending ? wait_all(d, d->n_pending, d->pending, "MPI_Iallreduce", SPIN_S, err) : AG_OK;
    d->n_pending = 0;   /* also after a failed start: nothing stays in flight */
    return s ? s : w;
}

ag_status ag_dist_allreduce_start(ag_dist *d, void *buf, size_t n, ag_dist_type type, ag_error *err)
{
    if (d->size == 1) return AG_OK;
    return start_reduce(d, buf, n, type, MPI_SUM, err);
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
    ag_status s = arrive(d, "MPI_Iallreduce", err);   /* the started ones move meanwhile */
    if (s == AG_OK) s = wait_all(d, d->n_pending, d->pending, "MPI_Iallreduce", SPIN_S, err);
    d->n_pending = 0;
    return s;
}

ag_status ag_dist_bcast(ag_dist *d, void *buf, size_t bytes, int root, ag_error *err)
{
    if (d->size == 1) return AG_OK;
    char *p = buf;
    int k = (int)((bytes + CHUNK - 1) / CHUNK);
    ag_status s = reserve(d, k, err);
    if (s == AG_OK) s = arrive(d, "MPI_Ibcast", err);
    for (size_t done = 0; s == AG_OK && done < bytes; done += CHUNK) {
        int count = (int)(bytes - done < CHUNK ? bytes - done : CHUNK);
        int rc = MPI_Ibcast(p + done, count, MPI_BYTE, root, d->comm, &d->pending[d->n_pending]);
        if (rc != MPI_SUCCESS) s = mpi_fail(rc, "MPI_Ibcast", err);
        else d->n_pending++, d->calls++;
    }
    ag_status w = d->n_pending ? wait_all(d, d->n_pending, d->pending, "MPI_Ibcast", SPIN_S, err) : AG_OK;
    d->n_pending = 0;
    return s ? s : w;
}

ag_status ag_dist_allgather(ag_dist *d, const void *mine, void *all, size_t bytes, ag_error *err)
{
    if (bytes > CHUNK) return ag_seterr(err, AG_ERR_ARG, "ag_dist_allgather: %zu bytes per rank, at most %zu", bytes,
                                        CHUNK);
    char *at = all;
    for (size_t i = 0; i < bytes; i++) at[(size_t)d->rank * bytes + i] = ((const char *)mine)[i];
    if (d->size == 1) return AG_OK;
    ag_status s = arrive(d, "MPI_Iallgather", err);
    if (s) return s;
    MPI_Request q;
    int rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, (int)bytes, MPI_BYTE, d->comm, &q);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Iallgather", err);
    d->calls++;
    return wait_all(d, 1, &q, "MPI_Iallgather", SPIN_S, err);
}

ag_status ag_dist_barrier(ag_dist *d, ag_error *err)
{
    if (d->size == 1) return AG_OK;
    return arrive(d, "MPI_Ibarrier", err);
}
