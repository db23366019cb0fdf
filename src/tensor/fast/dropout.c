/* fast/dropout.c -- dropout's forward on SIMD lanes (ops/dropout.c has the formula and the
 * reference loop this must equal, bit for bit: the same mask, the same products).
 *
 * The mask costs one splitmix64 hash per element; on 64-bit lanes (AVX2, AVX-512: AG_TARGETS)
 * with the integer keep test (hash.h) it vectorizes, where the plain build's SSE2 has no 64-bit
 * multiply. One thread, the 10min preset's [12,128,96] residual branch on the machine of 2026-12
 * (AMD EPYC, AVX-512): dropout took 6% of a training step with the reference loop. */
#include <omp.h>
#include "fast.h"
#include "../hash.h"

/* items [i0, i0 + n) of the tensor: the element index is the mask's */
static inline __attribute__((always_inline)) void dropout_forward_span(ag_real *y, ag_real *m, const ag_real *x,
                                                                       ag_real scale, uint64_t threshold,
                                                                       uint64_t seed, size_t i0, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        m[i] = ag__dropout_keeps(seed, i0 + i, threshold) ? scale : 0;
        y[i] = x[i] * m[i];
    }
}

AG_TARGETS(ag__dropout_forward_span, dropout_forward_span,
           (ag_real *y, ag_real *m, const ag_real *x, ag_real scale, uint64_t threshold, uint64_t seed, size_t i0,
            size_t n),
           (y, m, x, scale, threshold, seed, i0, n))

void ag_fast_dropout_forward(ag_real *y, ag_real *m, const ag_real *x, ag_real p, uint64_t seed, size_t N)
{
    void (*span)(ag_real *, ag_real *, const ag_real *, ag_real, uint64_t, uint64_t, size_t, size_t) =
        AG_PICK(ag__dropout_forward_span);
    ag_real scale = 1 / (1 - p);
    uint64_t threshold = ag__dropout_threshold((double)p);
#pragma omp parallel if (N >= AG_PAR_MIN)
    {
        size_t i0, i1;
        ag__share(N, omp_get_thread_num(), omp_get_num_threads(), &i0, &i1);
        span(y + i0, m + i0, x + i0, scale, threshold, seed, i0, i1 - i0);
    }
}
