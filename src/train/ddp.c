/* ddp.c -- data-parallel training for any model (see ddp.h for the recipe and its guarantees). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ddp.h"
#include "../data/hash.h"
#include "../tensor/debug.h"   /* ag_now_s */

#define AG_N_STOPS 4   /* the stop signals: stop_signals below */

struct ag_ddp {
    ag_ddp_opts o;
    int N, rank, K, b;      /* ranks, micro-batches per rank, items per micro-batch */
    double red[1 + AG_N_STOPS];   /* reduced with the gradients: the loss sum, then stop_votes */
    int stop;               /* the stop request agreed at the last step */
    double t0;              /* when the step's first micro-batch began */
    double compute_s, comm_s;            /* the last step */
    double sum_compute_s, sum_comm_s;    /* every step but the first (warm-up) */
    long steps;
};

// --- setting up ---

/* B, which N*K must divide and does not: what would do, in the program's words. */
static ag_status not_divided(const ag_ddp_opts *o, int N, int K, ag_error *err)
{
    int B = o->batch_size, up = (B / (N * K) + 1) * N * K;
    const char *unit = o->unit ? o->unit : "items";
    if (o->batch_flag)
        return ag_seterr(err, AG_ERR_ARG, "%s %d is not a multiple of %d rank%s x --grad-accum %d = %d (each rank "
                         "runs --grad-accum micro-batches of batch-size / (ranks x grad-accum) %s); try %s %d",
                         o->batch_flag, B, N, N == 1 ? "" : "s", K, N * K, unit, o->batch_flag, up);
    return ag_seterr(err, AG_ERR_ARG, "the batch of %d %s is not a multiple of %d rank%s x --grad-accum %d = %d "
                     "(each rank runs --grad-accum micro-batches of batch / (ranks x grad-accum) %s)", B, unit, N,
                     N == 1 ? "" : "s", K, N * K, unit);
}

ag_status ag_ddp_new(ag_ddp **out, const ag_ddp_opts *o, ag_error *err)
{
    *out = NULL;
    int N = ag_dist_size(o->dist), K = o->grad_accum > 0 ? o->grad_accum : 1, B = o->batch_size;
    if (B < 1 || B % (N * K) != 0) return not_divided(o, N, K, err);
    if (N == 1 && K == 1) return AG_OK;   /* the plain step: nothing to split */
    ag_ddp *D = calloc(1, sizeof *D);
    if (!D) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    D->o = *o;
    D->N = N;
    D->rank = ag_dist_rank(o->dist);
    D->K = K;
    D->b = B / (N * K);
    *out = D;
    return AG_OK;
}

void ag_ddp_free(ag_ddp *D)
{
    free(D);
}

int ag_ddp_ranks(const ag_ddp *D) { return D ? D->N : 1; }
bool ag_ddp_writer(const ag_ddp *D) { return !D || D->rank == 0; }

ag_status ag_ddp_share(ag_ddp *D, void *buf, size_t bytes, ag_error *err)
{
    return !D || D->N == 1 ? AG_OK : ag_dist_bcast(D->o.dist, buf, bytes, 0, err);
}

ag_status ag_ddp_share_start(ag_ddp *D, ag_error *err)
{
    if (!D || D->N == 1) return AG_OK;
    ag_params *P = D->o.params;
    size_t bytes = P->total * sizeof(ag_real);
    ag_status s = ag_dist_bcast(D->o.dist, P->data, bytes, 0, err);
    if (s == AG_OK) s = ag_dist_bcast(D->o.dist, P->m, bytes, 0, err);
    if (s == AG_OK) s = ag_dist_bcast(D->o.dist, P->v, bytes, 0, err);
    return s;
}

// --- the stop request ---

/* The stop signals, the first the strongest: when ranks caught different ones, the job stops
 * for the first of them that any rank caught (mpirun passes SIGTERM, SIGUSR1 on to every
 * rank). SIGUSR1 stands for every checkpoint signal a program catches: a pre-empted job that is also
 * sent SIGTERM still leaves with the code that asks for a requeue. */
static const int stop_signals[AG_N_STOPS] = { SIGUSR1, SIGTERM, SIGHUP, SIGINT };

/* v [AG_N_STOPS]: 1 for the signal this rank caught (read once: one may land any time). */
static void stop_votes(const ag_ddp *D, double *v)
{
    sig_atomic_t mine = D->o.stop ? *D->o.stop : 0;
    for (int i = 0; i < AG_N_STOPS; i++) v[i] = mine == stop_signals[i];
    double any = 0;
    for (int i = 0; i < AG_N_STOPS; i++) any += v[i];
    if (mine && any == 0) v[AG_N_STOPS - 1] = 1;   /* another signal: as SIGINT */
}

/* The signal the summed votes v [AG_N_STOPS] agree on, or 0. */
static int agreed_stop(const double *v)
{
    for (int i = 0; i < AG_N_STOPS; i++)
        if (v[i] > 0) return stop_signals[i];
    return 0;
}

ag_status ag_ddp_agree_stop(ag_ddp *D, ag_error *err)
{
    if (!D || D->N == 1) return AG_OK;
    double v[AG_N_STOPS];
    stop_votes(D, v);
    ag_status s = ag_dist_allreduce(D->o.dist, v, AG_N_STOPS, AG_DIST_DOUBLE, AG_DIST_SUM, err);
    if (s == AG_OK) D->stop = agreed_stop(v);
    return s;
}

// --- one step ---

bool ag_ddp_micro(ag_ddp *D, int j, int B, uint64_t step_seed, ag_micro *mb)
{
    if (!D) return ag_micro_of(1, 0, 1, j, B, step_seed, mb);   /* alone: one of all B items */
    if (j == 0) D->t0 = ag_now_s();   /* a new step */
    return ag_micro_of(D->N, D->rank, D->K, j, B, step_seed, mb);
}

/* Every rank's gradients summed, and red[] with them: one allreduce each. */
static ag_status reduce(ag_ddp *D, ag_error *err)
{
    ag_params *P = D->o.params;
    ag_status s = ag_dist_allreduce(D->o.dist, P->grad, P->total, AG_DIST_REAL, AG_DIST_SUM, err);
    return s ? s : ag_dist_allreduce(D->o.dist, D->red, 1 + AG_N_STOPS, AG_DIST_DOUBLE, AG_DIST_SUM, err);
}

ag_status ag_ddp_reduce(ag_ddp *D, double *loss, ag_error *err)
{
    if (!D) return AG_OK;
    double t1 = ag_now_s();
    D->red[0] = *loss;
    stop_votes(D, D->red + 1);
    ag_status s = D->N > 1 ? reduce(D, err) : AG_OK;
    if (s) return s;
    D->stop = agreed_stop(D->red + 1);
    *loss = D->red[0];   /* the shares, each weighed by its dloss: the step's loss */
    D->compute_s = t1 - D->t0;
    D->comm_s = ag_now_s() - t1;
    if (D->steps++ > 0) {
        D->sum_compute_s += D->compute_s;
        D->sum_comm_s += D->comm_s;
    }
    return AG_OK;
}

int ag_ddp_stop(const ag_ddp *D) { return D ? D->stop : 0; }

// --- evaluation and the weights check ---

bool ag_ddp_mine(const ag_ddp *D, long k) { return !D || k % D->N == D->rank; }

ag_status ag_ddp_sum(ag_ddp *D, double *v, ag_error *err)
{
    if (!D || D->N == 1) return AG_OK;
    return ag_dist_allreduce(D->o.dist, v, 1, AG_DIST_DOUBLE, AG_DIST_SUM, err);
}

ag_status ag_ddp_eval_mean(ag_ddp *D, ag_budget *b, ag_ctx *ctx, ag_eval_batch_fn batch, void *user,
                           const volatile sig_atomic_t *stop, double end, double *mean, long *done, ag_error *err)
{
    int ranks = ag_ddp_ranks(D);
    double sum = 0, loss;
    ag_status s = AG_OK;
    bool late = false;
    long k, want = ag_budget_eval_batches(b);
    ag_ctx_set_grad(ctx, false);
    for (k = 0; k < want; k++) {
        if (k % ranks == 0 && (s = ag_ddp_agree_stop(D, err))) break;   /* a round */
        if (ranks > 1 ? ag_ddp_stop(D) : stop && *stop) break;        /* a signal ends it at once */
        if (k > 0 && k % ranks == 0 && ((s = ag_budget_eval_late(b, end, &late, err)) || late)) break;
        double t0 = ag_budget_now(b);
        bool mine = ag_ddp_mine(D, k);
        if ((s = batch(user, mine, &loss, err))) break;
        if (!mine) continue;   /* another rank's batch */
        sum += loss;
        ag_budget_batch(b, ag_budget_now(b) - t0);
    }
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, true);
    if (s == AG_OK) s = ag_ddp_sum(D, &sum, err);   /* every rank's batches */
    *done = k;
    *mean = k > 0 ? sum / (double)k : NAN;
    return s;
}

ag_status ag_ddp_check_weights(ag_ddp *D, long it, ag_error *err)
{
    if (!D || D->N == 1) return AG_OK;
    const ag_params *P = D->o.params;   /* FNV-1a of the weights' bytes: any flipped bit changes it */
    uint64_t mine = ag_fnv1a(AG_FNV1A_INIT, P->data, P->total * sizeof(ag_real)), first = mine;
    ag_status s = ag_dist_bcast(D->o.dist, &first, sizeof first, 0, err);
    double worst = first != mine ? D->rank : 0;   /* the highest rank that differs */
    if (s == AG_OK) s = ag_dist_allreduce(D->o.dist, &worst, 1, AG_DIST_DOUBLE, AG_DIST_MAX, err);
    if (s) return s;
    if (worst > 0)
        return ag_seterr(err, AG_ERR_IO, "iteration %ld: the weights of rank %d differ from rank 0's (ranks must "
                         "compute alike: the same --threads and libraries on every host); stopped before writing a "
                         "checkpoint", it, (int)worst);
    return AG_OK;
}

void ag_ddp_log_summary(const ag_ddp *D, FILE *f)
{
    if (!D || !f || D->steps < 2) return;
    double n = (double)(D->steps - 1), c = D->sum_compute_s / n, w = D->sum_comm_s / n;
    fprintf(f, "data parallel: %d rank%s x %d micro-batch%s of %d %s; per step %.1f ms forward+backward", D->N,
            D->N == 1 ? "" : "s", D->K, D->K == 1 ? "" : "es", D->b, D->o.unit ? D->o.unit : "items", 1e3 * c);
    if (D->N > 1)
        fprintf(f, ", %.1f ms waiting for the allreduce (%.0f%%)", 1e3 * w, c + w > 0 ? 100 * w / (c + w) : 0);
    fputs("\n", f);
}
