/* parallel.c -- the thread pool's settings and a ctx for another thread (speed.h), and the
 * row-block-parallel gemm (parallel.h). */
#include <omp.h>
#include "blas.h"
#include "debug.h"
#include "hooks.h"
#include "parallel.h"
#include "speed.h"

void openblas_set_num_threads(int n); /* OpenBLAS's own, declared here: not every cblas.h has it */

void ag_threads_init(int n)
{
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
    omp_set_max_active_levels(1); /* one pool: a loop inside a shard's pass (nn.h) runs on its thread */
    openblas_set_num_threads(1);
}

int ag_threads(void) { return omp_get_max_threads(); }

ag_ctx *ag_ctx_new_like(const ag_ctx *like)
{
    ag_ctx *ctx = like ? ag_ctx_new() : NULL;
    if (!ctx) return NULL;
    ag_ctx_set_grad(ctx, like->grad_on);
    ctx->kernels = like->kernels;
    if (like->hooks) { /* the optional parts it copies: recycling and anomaly detection */
        ag_ctx_set_recycle_grads(ctx, like->hooks->recycle.on);
        ag_ctx_set_detect_anomaly(ctx, like->hooks->debug.detect_anomaly);
    }
    if (ag_ctx_status(ctx) != AG_OK) { /* out of memory for them */
        ag_ctx_free(ctx);
        return NULL;
    }
    return ctx;
}

// --- threads on a busy machine: ag_thread_tuner (speed.h) ---

#define TUNE_WARM 1        /* steps not timed: the first grows the arena */
#define TUNE_WINDOW AG_TUNER_WINDOW   /* steps timed on each setting for a comparison */
#define TUNE_MIN 3         /* the fewest steps on `now` a probe is compared with (the first probe's) */
#define TUNE_FIRST 8       /* the fewest steps between two probes */
#define TUNE_LONGEST 512   /* the most */
#define TUNE_COST 0.01     /* a probe costs at most this share of the steps until the next one */
#define TUNE_CLEARLY 1.25  /* a probe whose steps so far are this much slower ends at once */
#define TUNE_BETTER 0.99   /* the other setting's mean step must be this much faster to be taken */
#define TUNE_JUMP 1.5      /* steps this much slower than the level start a probe */

/* the window's median: the mean of its middle two */
static double window_median(const double *t)
{
    double v[TUNE_WINDOW];
    for (int i = 0; i < TUNE_WINDOW; i++) {   /* an insertion sort: a few steps */
        int j = i;
        for (; j > 0 && v[j - 1] > t[i]; j--) v[j] = v[j - 1];
        v[j] = t[i];
    }
    return (v[TUNE_WINDOW / 2 - 1] + v[TUNE_WINDOW / 2]) / 2;
}

static double window_mean(const double *t, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++) sum += t[i];
    return sum / n;
}

/* Steps until the next probe: at least `at_least`, and enough that a probe that costs `extra`
 * steps more than staying is TUNE_COST of them. */
static long probe_interval(long at_least, double extra)
{
    double need = extra / TUNE_COST;
    double n = need > at_least ? need : at_least;
    return n < TUNE_FIRST ? TUNE_FIRST : n > TUNE_LONGEST ? TUNE_LONGEST : (long)n;
}

void ag_thread_tuner_init(ag_thread_tuner *tt, int max)
{
    *tt = (ag_thread_tuner){ .max = max > 1 ? max : 1, .now = max > 1 ? max : 1,
                             .next_probe = TUNE_WARM + TUNE_MIN, .interval = TUNE_FIRST };
}

/* A probe step on the other setting: go on, or end the probe and keep the faster setting, by
 * the mean step: a step held up now and again costs its whole time, so no median here. */
static void tuner_probe_step(ag_thread_tuner *tt, double seconds)
{
    tt->probe_s += seconds;
    int n = tt->n_probe;
    bool worse = tt->probe_s > TUNE_CLEARLY * tt->level * n;
    if (!worse && n < TUNE_WINDOW) {
        tt->n_probe++;
        return;
    }
    double probed = tt->probe_s / n;
    if (!worse && probed < TUNE_BETTER * tt->level) { /* the other setting is faster: take it */
        /* probing the old one again will cost (old / new - 1) a step, for a window of steps
         * or, when it is clearly slower, one */
        double r = tt->level / probed;
        tt->interval = probe_interval(TUNE_FIRST, (r - 1) * (r > TUNE_CLEARLY ? 1 : TUNE_WINDOW));
        tt->now = tt->now == 1 ? tt->max : 1;
        tt->level = probed;
        tt->switches++;
    } else { /* back, and look again later: twice as late, and no sooner than it is cheap */
        tt->interval = probe_interval(2 * tt->interval, tt->probe_s / tt->level - n);
    }
    omp_set_num_threads(tt->now);
    tt->n_probe = tt->n_last = 0;
    tt->next_probe = tt->steps + tt->interval;
}

void ag_thread_tuner_step(ag_thread_tuner *tt, double seconds)
{
    if (tt->max <= 1) return;
    long s = tt->steps++;
    if (omp_get_max_threads() == 1) tt->single_steps++;
    if (s < TUNE_WARM) return;
    if (tt->n_probe) {
        tuner_probe_step(tt, seconds);
        return;
    }
    tt->last[tt->n_last++ % TUNE_WINDOW] = seconds;
    if (tt->n_last < TUNE_MIN) return;
    int n = tt->n_last < TUNE_WINDOW ? tt->n_last : TUNE_WINDOW;   /* fewer only before the first probe */
    bool jumped = tt->level > 0 && n == TUNE_WINDOW && window_median(tt->last) > TUNE_JUMP * tt->level;
    if (s + 1 < tt->next_probe && !jumped) return;
    tt->level = window_mean(tt->last, n); /* probe: the other setting against this */
    tt->n_probe = 1;
    tt->probe_s = 0;
    tt->probes++;
    omp_set_num_threads(tt->now == 1 ? tt->max : 1);
}

/* below this many multiply-adds a product is not worth waking the other threads */
#define PARALLEL_GEMM_MIN_MACS (1 << 18)

static void gemm_one(bool transA, bool transB, int M, int N, int K, ag_real alpha, const ag_real *A, int lda,
                     const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc)
{
    AG_GEMM(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, M, N, K,
            alpha, A, lda, B, ldb, beta, C, ldc);
}

/* block `part` of n_parts equal row blocks of C = alpha op(A) op(B) + beta C, on this thread */
static void gemm_rows(const ag_gemm_args *g, int part, int n_parts)
{
    int m0 = (int)((long)g->M * part / n_parts), m1 = (int)((long)g->M * (part + 1) / n_parts);
    /* rows m0..m1 of op(A): row m of A, or column m of A when it is transposed */
    const ag_real *A_rows = g->transA ? g->A + m0 : g->A + (size_t)m0 * g->lda;
    if (m1 > m0)
        gemm_one(g->transA, g->transB, m1 - m0, g->N, g->K, g->alpha, A_rows, g->lda, g->B, g->ldb, g->beta,
                 g->C + (size_t)m0 * g->ldc, g->ldc);
}

/* Inside a parallel region (active or not: a parallel loop of a kernel) a product runs whole on
 * its thread. omp_get_level, not omp_in_parallel: a loop's region on one thread is inactive,
 * and its products must be cut as they are on two. */
static int threads_here(void) { return omp_get_level() > 0 ? 1 : omp_get_max_threads(); }

void ag_gemm(bool transA, bool transB, int M, int N, int K, ag_real alpha, const ag_real *A, int lda,
             const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc)
{
    double macs = (double)M * N * K;
    int nt = threads_here();
    /* As many row blocks as threads, and two on one thread: a product is cut the same way on one
     * thread or two, so its bits are the same (ag_thread_tuner switches between the two, and
     * OpenBLAS may take another kernel for a smaller block, with other last bits). */
    int parts = nt > 2 ? nt : 2;
    if (omp_get_level() > 0 || macs < PARALLEL_GEMM_MIN_MACS || M < 2 * parts) {
        gemm_one(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    const ag_gemm_args g = { transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc };
    if (nt == 1) {
        for (int p = 0; p < parts; p++) gemm_rows(&g, p, parts);
        return;
    }
#pragma omp parallel num_threads(nt)
    for (int p = omp_get_thread_num(); p < parts; p += omp_get_num_threads()) gemm_rows(&g, p, parts);
}

void ag_gemm_run(const ag_gemm_args *g)
{
    ag_gemm(g->transA, g->transB, g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B, g->ldb, g->beta, g->C, g->ldc);
}

void ag_gemm_pair(const ag_gemm_args *g0, ag_team_work then0, void *user, const ag_gemm_args *g1)
{
    double macs = (double)g0->M * g0->N * g0->K + (double)g1->M * g1->N * g1->K;
    int nt = threads_here();
    if (macs < 2 * PARALLEL_GEMM_MIN_MACS) {
        ag_gemm_run(g0);
        if (then0) then0(user, 0, 1);
        ag_gemm_run(g1);
        return;
    }
    if (nt == 1) { /* each product whole, as on two threads (a team of one each) */
        gemm_rows(g0, 0, 1);
        if (then0) then0(user, 0, 1);
        gemm_rows(g1, 0, 1);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        int id = omp_get_thread_num(), n = omp_get_num_threads();
        int n0 = (n + 1) / 2; /* threads 0..n0-1 take g0, the rest g1 */
        if (n == 1) { /* the runtime gave us fewer threads than asked */
            gemm_rows(g0, 0, 1);
            if (then0) then0(user, 0, 1);
            gemm_rows(g1, 0, 1);
        } else if (id < n0) {
            gemm_rows(g0, id, n0);
            if (then0) then0(user, id, n0);
        } else {
            gemm_rows(g1, id - n0, n - n0);
        }
    }
}
