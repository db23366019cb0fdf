/* fast/softmax.c -- softmax's kernels with lane reductions (ops/softmax.c has the formula and
 * the reference loops these must equal).
 *
 * The max, the sum of exponentials and the dot product of the backward are row reductions;
 * ag__max/ag__sum/ag__dot split each into AG_LANES independent running values so they
 * vectorize, and the exponentials go through the SIMD expf (`omp simd`). */
#include "fast.h"

void ag_fast_softmax_forward(ag_real *y, const ag_real *x, size_t R, int N)
{
#pragma omp parallel for schedule(static) if (R * N >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *xr = x + r * N;
        ag_real *yr = y + r * N;
        ag_real max = ag__max(xr, N, -INFINITY);
        if (max == -INFINITY) { /* fully masked row */
            for (int j = 0; j < N; j++) yr[j] = 0;
            continue;
        }
#pragma omp simd
        for (int j = 0; j < N; j++) yr[j] = ag__exp(xr[j] - max);
        ag_real inv = 1 / ag__sum(yr, N);
        for (int j = 0; j < N; j++) yr[j] *= inv;
    }
}

void ag_fast_softmax_backward(ag_real *dx, const ag_real *y, const ag_real *dy, size_t R, int N)
{
#pragma omp parallel for schedule(static) if (R * N >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *yr = y + r * N, *dyr = dy + r * N;
        ag_real *dxr = dx + r * N;
        ag_real dot = ag__dot(dyr, yr, N);
        for (int j = 0; j < N; j++) dxr[j] += yr[j] * (dyr[j] - dot);
    }
}
