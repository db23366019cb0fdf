/* fast/matmul.c -- matmul's kernels with fewer, bigger gemms (ops/matmul.c has the formulas and
 * the reference kernels these must equal).
 *
 * When one 2-D B is shared by the whole batch, the batch is flattened into rows: the forward,
 * dA and dB are each a single gemm over [batch*M] rows (dB's sum over the batch is then the
 * gemm's own sum over those rows). The forward writes C with gemm's beta 0 (no memset). */
#include "fast.h"

/* C[M,N] (+)= op(A) @ op(B), row-major; the transposes are gemm flags, no copies. Inside the
 * batch loops below each thread takes whole batch entries (ag_gemm then runs single-threaded);
 * a single big product is split by ag_gemm itself. */
static void gemm(ag_real *C, const ag_real *A, const ag_real *B, int M, int N, int K,
                 bool transA, bool transB, ag_real beta)
{
    ag_gemm(transA, transB, M, N, K, 1, A, transA ? M : K, B, transB ? K : N, beta, C, N);
}

void ag_fast_matmul_forward(ag_real *C, const ag_real *A, const ag_real *B, size_t batch, int M, int K, int N,
                            bool shared_b)
{
    if (shared_b) /* one gemm: the batch flattened into rows */
        gemm(C, A, B, (int)(batch * M), N, K, false, false, 0);
    else
#pragma omp parallel for schedule(static) if (batch * M * N >= AG_PAR_MIN)
        for (size_t b = 0; b < batch; b++)
            gemm(C + b * M * N, A + b * M * K, B + b * K * N, M, N, K, false, false, 0);
}

void ag_fast_matmul_backward(ag_real *dA, ag_real *dB, const ag_real *dC, const ag_real *A, const ag_real *B,
                             size_t batch, int M, int K, int N, bool shared_b)
{
    if (dA) {
        if (shared_b) /* dA[batch*M, K] += dC[batch*M, N] @ B^T */
            gemm(dA, dC, B, (int)(batch * M), K, N, false, true, 1);
        else
#pragma omp parallel for schedule(static) if (batch * M * N >= AG_PAR_MIN)
            for (size_t b = 0; b < batch; b++) /* dA_b += dC_b @ B_b^T */
                gemm(dA + b * M * K, dC + b * M * N, B + b * K * N, M, K, N, false, true, 1);
    }
    if (dB) {
        if (shared_b) /* dB[K, N] += A[batch*M, K]^T @ dC[batch*M, N]: summed over the batch */
            gemm(dB, A, dC, K, N, (int)(batch * M), true, false, 1);
        else
#pragma omp parallel for schedule(static) if (batch * M * N >= AG_PAR_MIN)
            for (size_t b = 0; b < batch; b++) /* dB_b += A_b^T @ dC_b */
                gemm(dB + b * K * N, A + b * M * K, dC + b * M * N, K, N, M, true, false, 1);
    }
}
