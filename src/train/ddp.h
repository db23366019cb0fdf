/* ddp.h -- data-parallel training for any model: N ranks x K micro-batches per optimizer step,
 * and the result of the single-process step (docs/distributed.md). ag_train_run uses it (its
 * opts' dist and grad_accum); a program with a step of its own calls it directly.
 *
 * THE BATCH. A step's batch is B items (a language model's windows, a task's strings). Every
 * rank draws all B from the run's random stream, exactly as one process draws them (so every
 * rank's stream stays in step, and a checkpoint's stream is the same whatever N); rank r takes
 * items [r*B/N, (r+1)*B/N) and runs them as K micro-batches of b = B/(N*K) items each
 * (--grad-accum K). B must be a multiple of N*K (AG_ERR_ARG otherwise).
 *
 * THE GRADIENT. Each micro-batch's backward starts from dloss = 1/(N*K) instead of 1, so the
 * gradients added up over the K micro-batches and summed over the N ranks are the gradient of
 * the mean loss over all B items: the single process's. (A loss that is a mean over a count
 * that differs between micro-batches, such as targets left out by an ignore index, weighs each
 * micro-batch by its count over the batch's instead: ag_train_client's loss says how.) The sum
 * over ranks is an allreduce of the flat gradient buffer (ag_params grad), after which every
 * rank holds the same gradient and runs the same clip and optimizer step: the weights stay
 * equal without being sent: one allreduce of the whole buffer after the last backward.
 * (Sending each block's gradients while the backward went on below, an --allreduce overlap
 * that was tried, gained nothing measurable and left: docs/distributed.md, "Sending gradients during
 * the backward".) Every wait for the other ranks sleeps between polls and has a deadline
 * (src/dist/dist.h, ag_dist_set_timeout). The loss of the step (the micro-batch losses, each
 * weighed by its dloss, summed) and the stop request ride with the gradients as five doubles
 * of the same reduction.
 *
 * ONE DECISION. A stop request (SIGINT, SIGTERM, SIGHUP or a checkpoint signal, SIGUSR1, on
 * any rank) is read at the reduction of a step, and at every round of an evaluation's batches
 * (ag_ddp_agree_stop), and so seen by every rank at the same point; the loop stops at the top
 * of the next iteration (ag_ddp_stop). Ranks that caught different signals agree on the first
 * of SIGUSR1, SIGTERM, SIGHUP, SIGINT that any caught. At each evaluation a 64-bit hash of
 * every rank's weights is compared with rank 0's (ag_ddp_check_weights): ranks that drifted
 * apart (a different thread count or BLAS on one host changes a sum's rounding) stop the run
 * instead of writing a checkpoint of one of them.
 *
 * EVALUATION. The batches of an evaluation may be dealt round-robin over the ranks
 * (ag_ddp_mine); each batch is the very batch one process would evaluate, and the per-rank
 * sums are added up (ag_ddp_sum), so the mean equals the single-process one to the last bits
 * of a double. (Or every rank evaluates them all, as ag_train_run does: the model is small.)
 *
 * DROPOUT. The masks are drawn per micro-batch (its own seed from the step's), so with dropout
 * > 0 different N*K give runs that agree in distribution, not bit for bit; with dropout 0 they
 * agree to float rounding (examples/char_lm/tests/mpi/test_mpi.c).
 *
 * THE STEP runs this rank's micro-batches itself, asking ag_ddp_micro (ag_micro_of, nn.h)
 * which items, dropout seed and dloss each one has, and then makes one call, ag_ddp_reduce.
 * With N = K = 1 there is no ag_ddp (ag_ddp_new gives NULL): one micro-batch of all B items
 * with the step's own seed and dloss 1, and a reduction that does nothing. Every function
 * takes a NULL ag_ddp as that single process. */
#ifndef AG_DDP_H
#define AG_DDP_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "../dist/dist.h"
#include "fields.h"   /* ag_fields_agree: a config's fields */
#include "../nn/nn.h"
#include "../params/params.h"
#include "budget.h"   /* ag_ddp_eval_mean's bound */

typedef struct ag_ddp ag_ddp;

/* What a rank's build is, shown to the other ranks before anything else (ag_build_handshake). */
typedef struct {
    const char *program;    /* in the message: "the ranks run different builds of <program>" */
    const char *version;    /* its version or commit (the first 47 bytes are sent; NULL: "unversioned") */
    uint64_t protocol;      /* the collectives before the first step: raised whenever they change */
    uint64_t layout;        /* a hash of what the ranks exchange later as raw bytes (struct sizes,
                               the bytes of a real ...) */
} ag_build;

/* THE BUILD. First of all on several ranks: every rank sends a record of 512 bytes, whose layout
 * is fixed for good so that any two builds meet at it, and compares them all alike. AG_OK when
 * every rank's build equals rank 0's; otherwise AG_ERR_ARG on every rank, "the ranks run
 * different builds of <program>, so none started (install one build on every host): 0.1.0
 * (protocol 3, layout 5c1e0a3f) on rank 0, 0.0-other (...) on rank 1", and *alike (when not
 * NULL) set: the error is the same on every rank, so rank 0 alone need say it. A failed exchange
 * (a rank of an older build that sends something else) says so, *alike untouched. Alone: AG_OK. */
ag_status ag_build_handshake(ag_dist *d, const ag_build *b, bool *alike, ag_error *err);

/* After each rank's own setup (mine: AG_OK or its error, why its message): every rank learns
 * every rank's. AG_OK when all went well; otherwise every rank returns the same error, the
 * lowest failed rank's message ("rank R: " before it unless R is 0), then "; rank R: ..." for
 * each other failed rank whose message differs, with *alike (when not NULL) set: rank 0 alone
 * need say it. A failed exchange: this rank's own error, or the exchange's; *alike untouched.
 * Alone: mine with why's message. */
ag_status ag_share_outcome(ag_dist *d, ag_status mine, const ag_error *why, bool *alike, ag_error *err);
/* Rank 0's opening of the run (the lock, a checkpoint read), while the others waited: mine, its
 * message in why, on rank 0 (the others' mine is not read). AG_OK when it went well; otherwise
 * every rank returns rank 0's error and message, with *alike (when not NULL) set: rank 0 alone
 * need say it. A failed exchange: its error, *alike untouched. Alone: mine with why's message. */
ag_status ag_share_start(ag_dist *d, ag_status mine, const ag_error *why, bool *alike, ag_error *err);

/* What the ranks of a run compare before it starts (ag_ranks_agree): a digest of n items of 8
 * bytes each (a flag's value, a hash of the data, the step to start at), the same items in the
 * same order on every rank, and how a message names them. */
typedef struct {
    int n;                       /* the items of a digest */
    const char *(*name)(const void *user, int i);   /* item i as a message names it ("--batch-size", "the text") */
    /* item i's value v as the user reads it ("12", "adamw", "hash 5c1e0a3f") in buf [n]; NULL: decimal */
    void (*value)(const void *user, int i, uint64_t v, char *buf, size_t n);
    /* true for the items named first when they differ (the data: a different text explains the
     * rest); NULL: none */
    bool (*first)(const void *user, int i);
    const void *user;
    const char *what;            /* the error's beginning ("the ranks do not hold the same run, so none started") */
} ag_digest;

/* Every rank sends its digest mine [d->n] to every rank (one allgather, whatever the sizes the
 * items describe) and all compare them alike: AG_OK when every rank holds the same; otherwise
 * AG_ERR_ARG on every rank, "<what>: <item>: <value> on ranks 0 2, <value> on rank 1; <item>: ..."
 * (d->first's items first, at most 4 items, each at most 3 values of at most 6 ranks shown).
 * *compared (when not NULL) is set once every rank has every digest (alone: at once): from then
 * on an argument error is the same on every rank, so rank 0 alone need say it. */
ag_status ag_ranks_agree(ag_dist *dist, const uint64_t *mine, const ag_digest *d, bool *compared, ag_error *err);

/* The digest most programs compare: a config's fields (fields.h: each its ag_field_bits, named by
 * its flag, else its key, and shown as the field says), then items of the program's own. */
typedef struct {
    const ag_field *fields;     /* [n_fields] the config's table */
    int n_fields;
    const char *const *extra;   /* [n_extra] the names of the items after the fields ("the text") */
    int n_extra;
    unsigned hashes;            /* bit x: extra item x is a hash, shown "hash 5c1e0a3f"; else decimal */
    unsigned first;             /* bit x: extra item x is named first when it differs (the data) */
    const char *what;           /* as ag_digest's */
} ag_fields_digest;
/* ag_ranks_agree of mine [n_fields + n_extra]: its first n_fields words are filled here from cfg
 * (an object of the table's type), the rest are the caller's. */
ag_status ag_fields_agree(ag_dist *dist, const void *cfg, const ag_fields_digest *fd, uint64_t *mine,
                          bool *compared, ag_error *err);
/* h extended (FNV-1a) by fd's layout: the table's (ag_fields_layout), then the extras' names. */
uint64_t ag_fields_digest_layout(const ag_fields_digest *fd, uint64_t h);

/* msg [n], whose first *len bytes are written, gets the printf-style text after them (cut where
 * msg is full; *len moves on): for messages that list ranks. */
void ag_msg_append(char *msg, size_t n, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

typedef struct {
    ag_dist *dist;               /* the job (NULL: this process alone) */
    int grad_accum;              /* K >= 1 (0: 1) */
    int batch_size;              /* B, the items of a step */
    ag_params *params;           /* the model's: its gradient buffer is reduced */
    const volatile sig_atomic_t *stop;   /* this rank's stop flag (a signal number), or NULL */
    const char *batch_flag;      /* how the user sets B, for messages ("--batch-size"); NULL: fixed */
    const char *unit;            /* what an item is, for the summary ("windows"); NULL: "items" */
} ag_ddp_opts;

/* *D: the run's data-parallel state, or NULL when N = K = 1 (nothing to split). AG_ERR_ARG
 * when B is not a multiple of N*K (the message says which sizes would do); AG_ERR_NOMEM. */
ag_status ag_ddp_new(ag_ddp **D, const ag_ddp_opts *o, ag_error *err);
void ag_ddp_free(ag_ddp *D);     /* NULL ok */

int ag_ddp_ranks(const ag_ddp *D);        /* N (1 for NULL) */
/* Rank 0 (or one process): the one that writes checkpoints, metrics.csv and plots. */
bool ag_ddp_writer(const ag_ddp *D);

/* Before the first step: every rank takes rank 0's weights and optimizer moments (initial
 * weights come from libm's log and cos, whose last bits may differ between hosts). */
ag_status ag_ddp_share_start(ag_ddp *D, ag_error *err);
/* buf [bytes] of rank 0 into every other rank's (a resumed run's step and random stream). */
ag_status ag_ddp_share(ag_ddp *D, void *buf, size_t bytes, ag_error *err);

/* Micro-batch j (0, 1, ...) of this rank's share of a step of B items whose dropout seed is
 * step_seed (ag_micro_of, nn.h: the split's level above the shards): true with *mb filled, or
 * false once j is past the last. Alone (NULL D) the one micro-batch is all B items. */
bool ag_ddp_micro(ag_ddp *D, int j, int B, uint64_t step_seed, ag_micro *mb);

/* The distributed reduction, after the micro-batches: every rank's gradients summed (one
 * allreduce), so every rank holds the gradient of the step's loss over its B items; *loss, this
 * rank's share of that loss (its micro-batches' losses, each times its dloss, summed), becomes
 * the sum of every rank's: the step's loss. The ranks' stop requests ride along (ag_ddp_stop).
 * Alone (NULL D): nothing to do. */
ag_status ag_ddp_reduce(ag_ddp *D, double *loss, ag_error *err);

/* The stop request the ranks agreed on at the last step's reduction or evaluation round:
 * SIGUSR1, SIGTERM, SIGHUP, SIGINT or 0. */
int ag_ddp_stop(const ag_ddp *D);
/* The ranks agree on the stop request now (one small allreduce; every rank must call it at the
 * same point): an evaluation calls it every round of N batches, so that a signal ends even a
 * long one within a batch. Alone (NULL D, one rank): nothing to do, ag_ddp_stop stays. */
ag_status ag_ddp_agree_stop(ag_ddp *D, ag_error *err);

/* Evaluation: whether batch k of an evaluation is this rank's to run. */
bool ag_ddp_mine(const ag_ddp *D, long k);
/* *v becomes the sum of every rank's *v. */
ag_status ag_ddp_sum(ag_ddp *D, double *v, ag_error *err);

/* One split of an evaluation, dealt over the ranks and bounded by b's clock, in no-grad mode on
 * ctx: ag_budget_eval_batches(b) batches, fewer when the clock passes end (ag_budget_eval_late,
 * every round of N batches but the first), each timed into b (ag_budget_batch). Every rank calls
 * batch for every batch k (it draws it: the stream is one process's) and mine says whether k is
 * this rank's, whose loss it then gives. A stop ends it after the batch in hand: *stop alone (may
 * be NULL), with several ranks the one they agree on every round (ag_ddp_agree_stop). *mean: the
 * mean over every rank's batches (NaN: none); *done: the batches. batch's error ends it. */
typedef ag_status (*ag_eval_batch_fn)(void *user, bool mine, double *loss, ag_error *err);
ag_status ag_ddp_eval_mean(ag_ddp *D, ag_budget *b, ag_ctx *ctx, ag_eval_batch_fn batch, void *user,
                           const volatile sig_atomic_t *stop, double end, double *mean, long *done, ag_error *err);

/* Every rank's weights equal rank 0's, bit for bit, or AG_ERR_IO naming a rank that differs. */
ag_status ag_ddp_check_weights(ag_ddp *D, long it, ag_error *err);

/* One line on f (rank 0's log) at the end of a run: ranks, micro-batches, and this rank's mean
 * time per step computing (forward and backward) and waiting for the reduction after the last
 * backward (docs/distributed.md quotes it). Nothing for a NULL D or f, or before the second
 * step (the first one warms up). */
void ag_ddp_log_summary(const ag_ddp *D, FILE *f);

#endif
