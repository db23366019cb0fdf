/* shards.c -- one pass of a step's windows, split over workers (nn.h has the contract).
 *
 * A step's B windows are split over workers: the ranks of a job, each rank's micro-batches
 * (--grad-accum, run in turn), and within a micro-batch its threads, one shard each. This file
 * is the last level, and the one every step goes through: a pass of b windows in n shards.
 * With n = 1 the shard is the plain pass, every op split over the threads. With n > 1 each
 * shard runs a whole forward and backward on one thread (its ops see that they are in a
 * parallel region and run whole: ag_gemm's rule, parallel.c), and the threads meet once, to
 * add the gradients: on two cores that saves the start and end of about 140 parallel loops a
 * baby step, 6-9% of it.
 *
 * Shard j's loss l_j is the mean over its b_j windows, so the pass's mean is sum_j b_j l_j / b
 * and shard j's backward starts from dloss b_j / b: the gradients are the whole pass's. Shard 0
 * writes straight into g's gradients; the others into their replicas', added into g's at the
 * end in shard order (and cleared for the next pass), so one thread, running the shards in
 * turn, gives the same bits as several. The ranks' sum comes after, in the caller's reduction. */
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include "nn.h"
#include "../tensor/rng.h"
#include "../tensor/speed.h"

/* one shard: what it runs on, and what its last pass came to */
typedef struct {
    ag_gpt *model;     /* g, or a replica (owned) */
    ag_ctx *ctx;       /* the caller's ctx, or the replica's (owned) */
    ag_status status;  /* of the last pass */
    bool in_backward;  /* the last pass failed in its backward */
    double loss;       /* its windows' share of the mean loss: b_j l_j / B */
} shard;

struct ag_gpt_shards {
    int n;
    shard *sh;         /* [n]: shard 0 runs on g and the caller's ctx */
};

bool ag_micro_of(int N, int rank, int K, int j, int B, uint64_t step_seed, ag_micro *mb)
{
    if (j >= K) return false;
    int b = B / (N * K), m = rank * K + j;   /* m: its place in the step's batch */
    if (N * K == 1) *mb = (ag_micro){ .first = 0, .b = B, .seed = step_seed, .dloss = 1 };
    else *mb = (ag_micro){ .first = m * b, .b = b, .seed = ag_seed_mix(step_seed, (uint64_t)m),
                           .dloss = (ag_real)(1.0 / (double)(N * K)) };   /* the mean over all N*K */
    return true;
}

int ag_gpt_shards_default(const ag_gpt_config *cfg, int windows)
{
    if (!cfg) return 1;
    int threads = ag_threads(), n = threads > 2 ? threads : 2;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores >= 2 && n > cores) n = (int)cores;   /* a shard beyond them only costs memory */
    if (n > windows) n = windows;
    return n < 1 ? 1 : n;
}

ag_gpt_shards *ag_gpt_shards_new(ag_gpt *g, ag_ctx *ctx, int n, ag_error *err)
{
    if (!g || !ctx || n < 1)
        return ag_seterr(err, AG_ERR_ARG, "ag_gpt_shards_new: %s", n < 1 ? "n must be >= 1" : "no model or ctx"), NULL;
    ag_gpt_shards *s = calloc(1, sizeof *s);
    shard *sh = s ? calloc((size_t)n, sizeof *sh) : NULL;
    if (!sh) {
        free(s);
        return ag_seterr(err, AG_ERR_NOMEM, "ag_gpt_shards_new: out of memory"), NULL;
    }
    *s = (ag_gpt_shards){ .n = n, .sh = sh };
    sh[0].model = g;
    sh[0].ctx = ctx;
    for (int j = 1; j < n; j++) {
        if (!(sh[j].model = ag_gpt_new_replica(g, err))) break;
        if (!(sh[j].ctx = ag_ctx_new_like(ctx))) {
            ag_seterr(err, AG_ERR_NOMEM, "ag_gpt_shards_new: out of memory");
            break;
        }
    }
    if (!sh[n - 1].ctx) {
        ag_gpt_shards_free(s);
        return NULL;
    }
    return s;
}

void ag_gpt_shards_free(ag_gpt_shards *s)
{
    if (!s) return;
    for (int j = 1; j < s->n; j++) {
        ag_gpt_free(s->sh[j].model);
        ag_ctx_free(s->sh[j].ctx);
    }
    free(s->sh);
    free(s);
}

int ag_gpt_shards_count(const ag_gpt_shards *s) { return s ? s->n : 0; }
ag_ctx *ag_gpt_shards_ctx(const ag_gpt_shards *s, int j) { return s && j >= 0 && j < s->n ? s->sh[j].ctx : NULL; }

/* Shard j: its windows' forward and backward, on the thread that calls it. */
static void shard_pass(ag_gpt_shards *s, int j, const int *ids, const int *targets, int B, int T,
                       const ag_forward_opts *opts, ag_real dloss)
{
    shard *sh = &s->sh[j];
    int first = (int)((long)B * j / s->n), b = (int)((long)B * (j + 1) / s->n) - first;
    sh->status = AG_OK;
    sh->in_backward = false;
    sh->loss = 0;
    if (b == 0) return;
    ag_forward_opts o = *opts;
    if (s->n > 1) o.seed = ag_seed_mix(opts->seed, (uint64_t)j);   /* one worker: the pass's own masks */
    ag_tensor *l = NULL;
    ag_gpt_forward(sh->ctx, sh->model, ids + (size_t)first * T, targets + (size_t)first * T, b, T, &o, &l);
    if (!l || ag_ctx_status(sh->ctx)) {   /* no backward after a failed forward (--detect-anomaly) */
        sh->status = ag_ctx_status(sh->ctx) ? ag_ctx_status(sh->ctx) : AG_ERR_ARG;
        return;
    }
    ag_real share = b == B ? dloss : (ag_real)(dloss * b / B);   /* l_j weighs b_j / B of the mean */
    sh->status = ag_backward_from(sh->ctx, l, &share);
    sh->in_backward = sh->status != AG_OK;
    sh->loss = (double)l->data[0] * b / B;
}

/* g's gradients += each replica's, elements [i0, i1), and the replica's cleared for the next pass */
static void add_replica_grads(ag_gpt_shards *s, size_t i0, size_t i1)
{
    ag_real *dW = s->sh[0].model->params->grad;
    for (int j = 1; j < s->n; j++) {
        ag_real *dWj = s->sh[j].model->params->grad;
        for (size_t i = i0; i < i1; i++) {
            dW[i] += dWj[i];
            dWj[i] = 0;
        }
    }
}

/* The status and message of the first shard that failed, its ctx's words ("backward: " before
 * them when its backward failed, as char_lm's plain step says). The replicas' gradients were
 * added and cleared all the same: the next pass starts from zero. */
static ag_status first_failure(const ag_gpt_shards *s, ag_error *err)
{
    for (int j = 0; j < s->n; j++) {
        const shard *sh = &s->sh[j];
        if (sh->status == AG_OK) continue;
        const char *why = ag_ctx_error(sh->ctx);
        return ag_seterr(err, sh->status, "%s%s", sh->in_backward ? "backward: " : "",
                         why ? why : ag_status_str(sh->status));
    }
    return AG_OK;
}

ag_status ag_gpt_shards_pass(ag_gpt_shards *s, const int *ids, const int *targets, int B, int T,
                             const ag_forward_opts *opts, ag_real dloss, double *loss, ag_error *err)
{
    if (!s || !ids || !targets || !opts || !loss || B < 1)
        return ag_seterr(err, AG_ERR_ARG, "ag_gpt_shards_pass: %s", B < 1 ? "B must be >= 1" : "a NULL argument");
    if (opts->record_attention || opts->cache || opts->key_padding)
        return ag_seterr(err, AG_ERR_ARG, "ag_gpt_shards_pass: no recorded attention, cache or key padding");
    if (s->n == 1) {   /* one worker: the plain pass, every op split over the threads */
        shard_pass(s, 0, ids, targets, B, T, opts, dloss);
        *loss = s->sh[0].loss;
        return first_failure(s, err);
    }
    size_t total = s->sh[0].model->params->total;
    int nt = omp_get_max_threads() < s->n ? omp_get_max_threads() : s->n;
    /* a region even on one thread: inside it every op runs whole, as on several (the same bits) */
#pragma omp parallel num_threads(nt)
    {
        int id = omp_get_thread_num(), team = omp_get_num_threads();
        for (int j = id; j < s->n; j += team) shard_pass(s, j, ids, targets, B, T, opts, dloss);
#pragma omp barrier
        add_replica_grads(s, total * id / team, total * (id + 1) / team);
    }
    ag_status failed = first_failure(s, err);   /* before the resets clear the replicas' errors */
    for (int j = 1; j < s->n; j++) ag_ctx_reset(s->sh[j].ctx);
    *loss = 0;
    for (int j = 0; j < s->n; j++) *loss += s->sh[j].loss;
    return failed;
}
