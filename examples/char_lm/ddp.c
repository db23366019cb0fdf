/* ddp.c -- data-parallel training for char_lm (see ddp.h for the recipe and its guarantees). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ddp.h"
#include "data/hash.h"
#include "tensor/debug.h"   /* ag_now_s */

const char *const lm_allreduce_names[] = { "end", "overlap", NULL };

#define LM_N_STOPS 4   /* the stop signals: stop_signals below */

struct lm_ddp {
    lm_ddp_opts o;
    int N, rank, K, b;      /* ranks, micro-batches per rank, windows per micro-batch */
    size_t *block_start;    /* [n_layer] element offset of blocks.l's first parameter; NULL: no
                               overlap (one rank, --allreduce end, or an unexpected layout) */
    size_t sent_from;       /* overlap: gradients [sent_from, total) are being reduced */
    bool hooked;            /* overlap: the mark hook is on the ctx */
    double red[1 + LM_N_STOPS];   /* reduced with the gradients: the loss sum, then stop_votes */
    int stop;               /* the stop request agreed at the last step */
    ag_error hook_err;      /* the first failure inside the mark hook */
    double t0;              /* when the step's first micro-batch began */
    double compute_s, comm_s;            /* the last step */
    double sum_compute_s, sum_comm_s;    /* every step but the first (warm-up) */
    long steps;
};

// --- setting up ---

/* The offset of every block's first parameter, in the order the forward runs them; false when
 * the parameters are not laid out blocks.0, blocks.1, ... one after the other (then no overlap). */
static bool find_blocks(lm_ddp *D)
{
    const ag_params *P = D->o.params;
    int L = D->o.n_layer;
    if (L <= 0 || !(D->block_start = malloc((size_t)L * sizeof *D->block_start))) return false;
    for (int l = 0; l < L; l++) {
        char prefix[32];
        int len = snprintf(prefix, sizeof prefix, "blocks.%d.", l);
        D->block_start[l] = P->total;
        for (int e = 0; e < P->n; e++)
            if (strncmp(P->entries[e].t->name, prefix, (size_t)len) == 0 && P->entries[e].offset < D->block_start[l])
                D->block_start[l] = P->entries[e].offset;
        if (D->block_start[l] == P->total || (l > 0 && D->block_start[l] <= D->block_start[l - 1])) {
            free(D->block_start);
            D->block_start = NULL;
            return false;
        }
    }
    return true;
}

ag_status lm_ddp_new(lm_ddp **out, const lm_ddp_opts *o, ag_error *err)
{
    *out = NULL;
    int N = ag_dist_size(o->dist), K = o->grad_accum > 0 ? o->grad_accum : 1, B = o->batch_size;
    if (B % (N * K) != 0) {
        int up = (B / (N * K) + 1) * N * K;
        return ag_seterr(err, AG_ERR_ARG, "--batch-size %d is not a multiple of %d rank%s x --grad-accum %d = %d (each "
                         "rank runs --grad-accum micro-batches of batch-size / (ranks x grad-accum) windows); try "
                         "--batch-size %d", B, N, N == 1 ? "" : "s", K, N * K, up);
    }
    if (N == 1 && K == 1) return AG_OK;   /* the plain step (train.c): nothing to split */
    lm_ddp *D = calloc(1, sizeof *D);
    if (!D) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    D->o = *o;
    D->N = N;
    D->rank = ag_dist_rank(o->dist);
    D->K = K;
    D->b = B / (N * K);
    if (N > 1 && o->mode == LM_ALLREDUCE_OVERLAP) find_blocks(D);
    *out = D;
    return AG_OK;
}

void lm_ddp_free(lm_ddp *D)
{
    if (!D) return;
    free(D->block_start);
    free(D);
}

int lm_ddp_ranks(const lm_ddp *D) { return D ? D->N : 1; }
bool lm_ddp_writer(const lm_ddp *D) { return !D || D->rank == 0; }

ag_status lm_ddp_share_start(lm_ddp *D, ag_error *err)
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
 * rank). SIGUSR1 stands for every checkpoint signal (main.c): a pre-empted job that is also
 * sent SIGTERM still leaves with the code that asks for a requeue. */
static const int stop_signals[LM_N_STOPS] = { SIGUSR1, SIGTERM, SIGHUP, SIGINT };

/* v [LM_N_STOPS]: 1 for the signal this rank caught (read once: one may land any time). */
static void stop_votes(const lm_ddp *D, double *v)
{
    sig_atomic_t mine = D->o.stop ? *D->o.stop : 0;
    for (int i = 0; i < LM_N_STOPS; i++) v[i] = mine == stop_signals[i];
    double any = 0;
    for (int i = 0; i < LM_N_STOPS; i++) any += v[i];
    if (mine && any == 0) v[LM_N_STOPS - 1] = 1;   /* another signal: as SIGINT */
}

/* The signal the summed votes v [LM_N_STOPS] agree on, or 0. */
static int agreed_stop(const double *v)
{
    for (int i = 0; i < LM_N_STOPS; i++)
        if (v[i] > 0) return stop_signals[i];
    return 0;
}

ag_status lm_ddp_agree_stop(lm_ddp *D, ag_error *err)
{
    if (!D || D->N == 1) return AG_OK;
    double v[LM_N_STOPS];
    stop_votes(D, v);
    ag_status s = ag_dist_allreduce(D->o.dist, v, LM_N_STOPS, AG_DIST_DOUBLE, AG_DIST_SUM, err);
    if (s == AG_OK) D->stop = agreed_stop(v);
    return s;
}

// --- one step ---

/* Overlap: the backward has passed block id's mark, so the gradients from that block's first
 * parameter up to the slice already sent are final: their reduction starts now. */
static void on_mark(void *user, int id)
{
    lm_ddp *D = user;
    if (id < 0 || id >= D->o.n_layer || D->hook_err.status) return;
    size_t from = D->block_start[id];
    if (from >= D->sent_from) return;
    ag_real *g = D->o.params->grad;
    if (ag_dist_allreduce_start(D->o.dist, g + from, D->sent_from - from, AG_DIST_REAL, &D->hook_err) == AG_OK)
        ag_dist_progress(D->o.dist, &D->hook_err);   /* MPI moves the earlier slices only inside its calls */
    D->sent_from = from;
}

bool lm_ddp_micro(lm_ddp *D, int j, int B, uint64_t step_seed, lm_micro *mb)
{
    if (!D) {   /* alone: the plain step */
        *mb = (lm_micro){ .first = 0, .b = B, .seed = step_seed, .dloss = 1 };
        return j == 0;
    }
    if (D->hooked) ag_ctx_set_mark_hook(D->o.ctx, NULL, NULL);   /* the last backward is done */
    D->hooked = false;
    if (j >= D->K) return false;
    if (j == 0) {   /* a new step: nothing sent yet */
        D->t0 = ag_now_s();
        D->sent_from = D->o.params->total;
        ag_error_clear(&D->hook_err);
    }
    int m = D->rank * D->K + j;   /* its place in the step's batch */
    *mb = (lm_micro){ .first = m * D->b, .b = D->b, .seed = ag_seed_mix(step_seed, (uint64_t)m),
                      .dloss = (ag_real)(1.0 / (double)(D->N * D->K)) };   /* the mean over all N*K */
    if (D->block_start && j == D->K - 1) {   /* overlap: its backward sends the finished blocks */
        ag_ctx_set_mark_hook(D->o.ctx, on_mark, D);
        D->hooked = true;
    }
    return true;
}

/* Every rank's gradients summed, and red[] with them: one blocking allreduce, or (overlap) the
 * slice the backward has not sent yet, then a wait for all. */
static ag_status reduce(lm_ddp *D, ag_error *err)
{
    ag_dist *dist = D->o.dist;
    ag_params *P = D->o.params;
    if (D->hook_err.status) return ag_seterr(err, D->hook_err.status, "%s", D->hook_err.msg);
    if (!D->block_start) {
        ag_status s = ag_dist_allreduce(dist, P->grad, P->total, AG_DIST_REAL, AG_DIST_SUM, err);
        return s ? s : ag_dist_allreduce(dist, D->red, 1 + LM_N_STOPS, AG_DIST_DOUBLE, AG_DIST_SUM, err);
    }
    ag_status s = AG_OK;
    if (D->sent_from > 0) s = ag_dist_allreduce_start(dist, P->grad, D->sent_from, AG_DIST_REAL, err);
    if (s == AG_OK) s = ag_dist_allreduce_start(dist, D->red, 1 + LM_N_STOPS, AG_DIST_DOUBLE, err);
    ag_status w = ag_dist_wait(dist, err);   /* also after a failed start: nothing stays in flight */
    return s ? s : w;
}

ag_status lm_ddp_reduce(lm_ddp *D, double *loss, ag_error *err)
{
    if (!D) return AG_OK;
    double t1 = ag_now_s();
    D->red[0] = *loss;
    stop_votes(D, D->red + 1);
    ag_status s = D->N > 1 ? reduce(D, err) : AG_OK;
    if (s) return s;
    D->stop = agreed_stop(D->red + 1);
    *loss = D->red[0] / (double)(D->N * D->K);
    D->compute_s = t1 - D->t0;
    D->comm_s = ag_now_s() - t1;
    if (D->steps++ > 0) {
        D->sum_compute_s += D->compute_s;
        D->sum_comm_s += D->comm_s;
    }
    return AG_OK;
}

int lm_ddp_stop(const lm_ddp *D) { return D ? D->stop : 0; }

// --- evaluation and the weights check ---

bool lm_ddp_mine(const lm_ddp *D, long k) { return !D || k % D->N == D->rank; }

ag_status lm_ddp_sum(lm_ddp *D, double *v, ag_error *err)
{
    if (!D || D->N == 1) return AG_OK;
    return ag_dist_allreduce(D->o.dist, v, 1, AG_DIST_DOUBLE, AG_DIST_SUM, err);
}

ag_status lm_ddp_check_weights(lm_ddp *D, long it, ag_error *err)
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

void lm_ddp_log_summary(const lm_ddp *D, FILE *f)
{
    if (!D || !f || D->steps < 2) return;
    double n = (double)(D->steps - 1), c = D->sum_compute_s / n, w = D->sum_comm_s / n;
    fprintf(f, "data parallel: %d rank%s x %d micro-batch%s of %d windows; per step %.1f ms forward+backward", D->N,
            D->N == 1 ? "" : "s", D->K, D->K == 1 ? "" : "es", D->b, 1e3 * c);
    if (D->N > 1)
        fprintf(f, ", %.1f ms waiting for the allreduce (%.0f%%, --allreduce %s)", 1e3 * w,
                c + w > 0 ? 100 * w / (c + w) : 0,
                lm_allreduce_names[D->block_start ? LM_ALLREDUCE_OVERLAP : LM_ALLREDUCE_END]);
    fputs("\n", f);
}
