/* kernel.h -- what every kernel needs, the reference ones in ops/<op>.c and the fast ones in
 * fast/<op>.c alike. Not installed, not part of the API.
 *
 * Two paths, one contract: each op's file holds its reference kernels, plain loops that read
 * like the formula; an op may also have a fast kernel in fast/<op>.c, and the op calls it when
 * AG_FAST(ctx) says so. `make REFERENCE=1` builds the library without fast/ at all (AG_FAST is
 * then the constant false, and the compiler drops the fast calls); in the default build a ctx
 * can still ask for the reference kernels (ag_ctx_set_reference_kernels, speed.h), which is how
 * the tests/test_fast_ref*.c suites prove the two paths equal (tests/fastref.h). */
#ifndef AG_KERNEL_H
#define AG_KERNEL_H

#include <math.h>
#include <string.h>
#include "parallel.h"
#include "speed.h"
#include "tensor.h"

#ifdef AG_REFERENCE
#define AG_FAST(ctx) 0
#else
#define AG_FAST(ctx) (!ag_ctx_reference_kernels(ctx))
#endif

/* Below this many elements a loop runs on one thread: waking the others costs more than it
 * saves (sampling feeds one position at a time through every op). A reference kernel's only
 * concession to speed is `#pragma omp parallel for ... if (n >= AG_PAR_MIN)` over rows that are
 * independent of each other, as llm.c does: it changes no result. */
#define AG_PAR_MIN 16384

/* C += op(A) op(B) for contiguous row-major matrices, op(X) = X^T when its flag is set:
 *   C [M,N],  A [M,K] (or [K,M] when transA),  B [K,N] (or [N,K] when transB)
 *   for every m, n:  C[m,n] += sum over k of op(A)[m,k] op(B)[k,n]
 * The reference kernels' one matrix product: that triple loop, run by OpenBLAS (ag_gemm, split
 * over the threads when it is big; one thread inside a parallel loop). Cannot fail. */
static inline void ag__matmul_add(ag_real *C, const ag_real *A, const ag_real *B, int M, int N, int K,
                                  bool transA, bool transB)
{
    ag_gemm(transA, transB, M, N, K, 1, A, transA ? M : K, B, transB ? K : N, 1, C, N);
}

#endif
