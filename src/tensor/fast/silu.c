/* fast/silu.c -- SiLU's forward, branch-free so it vectorizes (ops/silu.c has the formulas and
 * the reference loops this must equal; its backward is one plain loop and has no fast kernel).
 *
 * sigmoid is evaluated so exp never overflows: with e = exp(-|x|) (in (0, 1]), s = 1 / (1 + e)
 * for x >= 0 and e / (1 + e) for x < 0. That is a select and one ag__exp, no branch, so the
 * loop is `omp simd` with the SIMD expf, like GELU's. */
#include "fast.h"

static inline ag_real silu_sigmoid(ag_real x)
{
    ag_real e = ag__exp(x < 0 ? x : -x);                            /* exp(-|x|) <= 1 */
    ag_real inv = 1 / (1 + e);
    return x >= 0 ? inv : e * inv;
}

void ag_fast_silu_forward(ag_real *y, ag_real *sig, const ag_real *x, size_t N)
{
#pragma omp parallel for simd schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        ag_real s = silu_sigmoid(x[i]);
        if (sig) sig[i] = s;
        y[i] = x[i] * s;
    }
}
