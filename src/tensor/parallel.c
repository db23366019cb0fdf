/* parallel.c -- the thread pool's settings (speed.h) and the row-block-parallel gemm
 * (parallel.h). */
#include <omp.h>
#include "blas.h"
#include "parallel.h"
#include "speed.h"

void openblas_set_num_threads(int n); /* OpenBLAS's own, declared here: not every cblas.h has it */

void ag_threads_init(int n)
{
    if (n <= 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
    openblas_set_num_threads(1);
}

int ag_threads(void) { return omp_get_max_threads(); }

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

void ag_gemm(bool transA, bool transB, int M, int N, int K, ag_real alpha, const ag_real *A, int lda,
             const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc)
{
    double macs = (double)M * N * K;
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (nt <= 1 || macs < PARALLEL_GEMM_MIN_MACS || M < 2 * nt) {
        gemm_one(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    const ag_gemm_args g = { transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc };
#pragma omp parallel num_threads(nt)
    gemm_rows(&g, omp_get_thread_num(), omp_get_num_threads());
}

void ag_gemm_run(const ag_gemm_args *g)
{
    ag_gemm(g->transA, g->transB, g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B, g->ldb, g->beta, g->C, g->ldc);
}

void ag_gemm_pair(const ag_gemm_args *g0, ag_team_work then0, void *user, const ag_gemm_args *g1)
{
    double macs = (double)g0->M * g0->N * g0->K + (double)g1->M * g1->N * g1->K;
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (nt <= 1 || macs < 2 * PARALLEL_GEMM_MIN_MACS) {
        ag_gemm_run(g0);
        if (then0) then0(user, 0, 1);
        ag_gemm_run(g1);
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
