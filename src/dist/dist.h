/* dist.h -- the few collective operations data-parallel training needs, over MPI or over
 * nothing. src/dist/ owns the transport between processes, and nothing else: what to send and
 * when is src/train/ddp.h's (the split of a step over ranks: docs/distributed.md).
 *
 * N processes ("ranks") each hold a whole copy of the model, run the forward and backward of
 * their own share of the batch, and then sum their gradients with an allreduce, so every rank
 * takes the same optimizer step (docs/distributed.md). This header is the whole interface to
 * the transport, with two implementations linked one or the other:
 *   - dist_none.c: one process, rank 0 of 1; every call is a no-op that succeeds (build/char_lm,
 *     the tests: no MPI anywhere). It is inside libattograd.a, so a program that links the
 *     library alone links;
 *   - dist_mpi.c: MPI (built with mpicc into build/char_lm_mpi, build/reverse_mpi; `mpirun -np
 *     N` starts them). Such a program links dist_mpi.o before the library: the linker takes an
 *     archive's member only for a symbol still undefined, so dist_none.o is never taken. The
 *     library itself stays free of MPI.
 *
 * Every call of a collective must be made by every rank, in the same order, with the same
 * counts (MPI's rule). Calls come from one thread only (the one that called ag_dist_init;
 * OpenMP's workers never call them).
 *
 * WAITING. Every collective first waits for every rank to come (a non-blocking barrier), then
 * moves its data with a non-blocking call; both are waited for by polling, with a sleep between
 * two polls that grows with the time waited (20 us to 2 ms, an eighth of the wait so far; the
 * transfer polls without sleeping for its first 200 us, which a small one needs): a rank that
 * waits for a slower one costs a few dozen wake-ups, not a core, and sees the end of the wait
 * at most an eighth of it late. A wait has a deadline (ag_dist_set_timeout):
 * when it passes, the waiting ranks tell each other where they are (a note on a communicator
 * of their own), listen for a second, and fail with AG_ERR_IO naming the ranks that did not
 * come ("rank 1 did not reach MPI_Iallreduce (collective 37) within 60 s ...").
 *
 * ERRORS: a call returns AG_OK or AG_ERR_IO with MPI's reason in err. A rank that fails leaves
 * without ag_dist_end(d, true): its non-zero exit then makes mpirun end the whole job (Open MPI's
 * default), instead of the others waiting forever in their next collective. */
#ifndef AG_DIST_H
#define AG_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include "../tensor/tensor.h"

typedef struct ag_dist ag_dist;

typedef enum { AG_DIST_REAL, AG_DIST_DOUBLE } ag_dist_type;   /* ag_real (float, or double with
                                                                 -DAG_DOUBLE) or double */
typedef enum { AG_DIST_SUM, AG_DIST_MAX } ag_dist_op;

/* Joins the job (MPI_Init_thread, funneled): *d is this process's handle, its waits limited to
 * timeout seconds (ag_dist_set_timeout; 0: none). Without MPI, or run without mpirun, the job
 * is this process alone (rank 0 of 1). The ranks' first meeting, the duplication of the world
 * (MPI_Comm_idup), is waited for with the same deadline: a rank that never joins (another
 * program, an older build) is AG_ERR_IO after timeout, not a hang. AG_ERR_IO when MPI cannot
 * start; AG_ERR_NOMEM. */
ag_status ag_dist_init(ag_dist **d, double timeout, ag_error *err);
/* Leaves the job. ok: every rank got here (MPI_Finalize, which waits for the others). !ok: this
 * rank failed and is about to exit non-zero: only the memory is freed, so that mpirun tears the
 * job down (MPI_Finalize would wait for ranks that are themselves waiting for this one).
 * NULL ok. Cannot fail. */
void ag_dist_end(ag_dist *d, bool ok);
/* Before ag_dist_end(d, false) on a rank other than 0 whose failure every rank met alike (a bad
 * input, another build), which rank 0 alone says: waits for rank 0 to leave first, at most 5 s.
 * mpirun ends the whole job at the first rank that exits non-zero, so without the wait rank 0
 * could be killed before its line is written. Rank 0's exit ends the wait (mpirun ends this
 * rank); no-op on rank 0 and alone. */
void ag_dist_after_rank0(const ag_dist *d);

/* The most seconds one wait for the other ranks may last (0: no limit, the default); a wait
 * that reaches it fails, naming the ranks that did not come (WAITING above). */
void ag_dist_set_timeout(ag_dist *d, double seconds);
/* After a failed wait that every waiting rank saw alike (a rank that did not come), the one
 * rank that should report it: the lowest rank whose own wait ran out (others stay quiet);
 * -1 otherwise (each rank reports its own failures). */
int ag_dist_voice(const ag_dist *d);

int ag_dist_rank(const ag_dist *d);   /* 0 .. size-1; 0 for NULL */
int ag_dist_size(const ag_dist *d);   /* the number of ranks; 1 for NULL */
/* "mpi" or "none": the implementation linked in. */
const char *ag_dist_backend(void);

/* buf[0..n) becomes, on every rank, the sum (or maximum) of every rank's buf[0..n). Blocking. */
ag_status ag_dist_allreduce(ag_dist *d, void *buf, size_t n, ag_dist_type type, ag_dist_op op, ag_error *err);
/* The same sum, started and not waited for (MPI_Iallreduce): buf must stay untouched until
 * ag_dist_wait. Any number may be in flight; they complete in the order started. */
ag_status ag_dist_allreduce_start(ag_dist *d, void *buf, size_t n, ag_dist_type type, ag_error *err);
/* Lets the started reductions advance (MPI progresses them only inside its own calls); does
 * not wait. */
ag_status ag_dist_progress(ag_dist *d, ag_error *err);
/* Waits until every started reduction is complete. */
ag_status ag_dist_wait(ag_dist *d, ag_error *err);

/* buf[0..bytes) of rank root is copied into every other rank's buf. */
ag_status ag_dist_bcast(ag_dist *d, void *buf, size_t bytes, int root, ag_error *err);
/* all[r*bytes .. (r+1)*bytes) becomes, on every rank, rank r's mine[0..bytes): the same bytes
 * on every rank, so that ranks can compare what they hold before anything of a size they may
 * disagree on is sent. all has room for size x bytes. */
ag_status ag_dist_allgather(ag_dist *d, const void *mine, void *all, size_t bytes, ag_error *err);
/* Returns once every rank has called it. */
ag_status ag_dist_barrier(ag_dist *d, ag_error *err);

#endif
