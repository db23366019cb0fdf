/* parallel.c -- the thread pool settings and the row-block-parallel gemm (see parallel.h). */
#include <omp.h>
#include "parallel.h"

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

void ag_gemm(bool transA, bool transB, int M, int N, int K, ag_real alpha, const ag_real *A, int lda,
             const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc)
{
    double macs = (double)M * N * K;
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (nt <= 1 || macs < PARALLEL_GEMM_MIN_MACS || M < 2 * nt) {
        gemm_one(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        int id = omp_get_thread_num(), n = omp_get_num_threads();
        int m0 = (int)((long)M * id / n), m1 = (int)((long)M * (id + 1) / n);
        /* rows m0..m1 of op(A): row m of A, or column m of A when it is transposed */
        const ag_real *A_rows = transA ? A + m0 : A + (size_t)m0 * lda;
        if (m1 > m0)
            gemm_one(transA, transB, m1 - m0, N, K, alpha, A_rows, lda, B, ldb, beta, C + (size_t)m0 * ldc, ldc);
    }
}
