/* parallel.h -- the matrix products on the one thread pool. Private to the library: not
 * installed, not in attograd.h (the threads' settings, ag_threads_init, are in speed.h).
 *
 * Two pools that both spin (OpenMP's and OpenBLAS's own) fight for the cores and make a step
 * several times slower. So attograd keeps OpenBLAS single-threaded and runs everything,
 * matrix products included, on OpenMP's pool: row-wise kernels split their rows, and a big
 * gemm is split into row blocks, one single-threaded sgemm per thread. */
#ifndef AG_PARALLEL_H
#define AG_PARALLEL_H

#include <stdbool.h>
#include "real.h"

/* C[M,N] = alpha op(A) op(B) + beta C, row-major (op = transpose when the flag is set), split
 * over row blocks of C across the threads when the product is big enough to pay for it (two
 * blocks one after the other on one thread, so that one thread and two compute the same bits;
 * inside a parallel region: whole). The same contract as cblas_?gemm with CblasRowMajor.
 * Cannot fail. */
void ag_gemm(bool transA, bool transB, int M, int N, int K, ag_real alpha, const ag_real *A, int lda,
             const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc);

/* The arguments of one ag_gemm call, for ag_gemm_pair. */
typedef struct {
    bool transA, transB;
    int M, N, K;
    ag_real alpha;
    const ag_real *A;
    int lda;
    const ag_real *B;
    int ldb;
    ag_real beta;
    ag_real *C;
    int ldc;
} ag_gemm_args;

void ag_gemm_run(const ag_gemm_args *g); /* ag_gemm with these arguments */

/* Work for a team of threads: called once by each of its n_parts threads, part = 0..n_parts-1. */
typedef void (*ag_team_work)(void *user, int part, int n_parts);

/* Two independent products at once (a linear's backward: dx = dy W and dW = dy^T x): the
 * threads split into two teams, one per product, each sharing its product by row blocks. With
 * two threads each product runs whole on one core: no core packs the other's operands again,
 * and there is one barrier instead of two. then0 (may be NULL) is more work for g0's team
 * (the bias gradient: dx's product is the quicker of the two); each of its threads starts it
 * after its own share of g0, so it must not read what g0 writes. Nothing may be written by
 * more than one of g0, then0 and g1. */
void ag_gemm_pair(const ag_gemm_args *g0, ag_team_work then0, void *user, const ag_gemm_args *g1);

#endif
