/* fast/rmsnorm.c -- RMSNorm's kernels with lane reductions and column blocks (ops/rmsnorm.c has
 * the formulas and the reference loops these must equal).
 *
 * forward:  the mean square is a row reduction: ag__dot lanes.
 * backward: sum(g xhat) is an `omp simd` reduction; dw is a sum over rows: threads take blocks
 *           of AG_COL_BLOCK adjacent columns (each owns its dw[c]; see ag__sum_rows). */
#include "fast.h"

void ag_fast_rmsnorm_forward(ag_real *y, ag_real *rstd, const ag_real *x, const ag_real *w, size_t R, int C,
                             ag_real eps)
{
#pragma omp parallel for schedule(static) if (R * C >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *xr = x + r * C;
        ag_real *yr = y + r * C;
        ag_real ms = ag__dot(xr, xr, C) / C;
        ag_real rs = 1 / AG_SQRT(ms + eps);
        for (int c = 0; c < C; c++) yr[c] = xr[c] * rs * w[c];
        rstd[r] = rs;
    }
}

void ag_fast_rmsnorm_backward(ag_real *dx, ag_real *dw, const ag_real *dy, const ag_real *x, const ag_real *w,
                              const ag_real *rstd, size_t R, int C)
{
    if (dx) {
        /* rows in parallel: each row's dx needs only that row */
#pragma omp parallel for schedule(static) if (R * C >= AG_PAR_MIN)
        for (size_t r = 0; r < R; r++) {
            const ag_real *xr = x + r * C, *dyr = dy + r * C;
            ag_real rs = rstd[r];
            ag_real gx_sum = 0; /* sum(g * xhat), g = dy * w */
#pragma omp simd reduction(+ : gx_sum)
            for (int c = 0; c < C; c++) gx_sum += dyr[c] * w[c] * xr[c] * rs;
            ag_real gx_mean = gx_sum / C;
            for (int c = 0; c < C; c++) dx[r * C + c] += rs * (dyr[c] * w[c] - xr[c] * rs * gx_mean);
        }
    }
    if (dw) {
        /* blocks of adjacent columns in parallel: each thread owns its entries of dw, summed
         * over rows, and reads each row's block contiguously */
        int n_blocks = (C + AG_COL_BLOCK - 1) / AG_COL_BLOCK;
#pragma omp parallel for schedule(static) if (R * C >= AG_PAR_MIN)
        for (int blk = 0; blk < n_blocks; blk++) {
            int c0 = blk * AG_COL_BLOCK, wd = C - c0 < AG_COL_BLOCK ? C - c0 : AG_COL_BLOCK;
            ag_real sw[AG_COL_BLOCK] = { 0 };
            for (size_t r = 0; r < R; r++) {
                const ag_real *xr = x + r * C + c0, *dyr = dy + r * C + c0;
                ag_real rs = rstd[r];
                for (int c = 0; c < wd; c++) sw[c] += dyr[c] * (xr[c] * rs);
            }
            for (int c = 0; c < wd; c++) dw[c0 + c] += sw[c];
        }
    }
}
