/* fast/layernorm.c -- LayerNorm's kernels with lane reductions, first-touch gradients and column
 * blocks (ops/layernorm.c has the formulas and the reference loops these must equal).
 *
 * forward:  the mean and the variance are row reductions: ag__sum/ag__dot lanes.
 * backward: a whole backward step, because dx comes from ag__grad_into: the first gradient to
 *           reach x is written (`=`), not added to a zeroed buffer. sum(g) and sum(g xhat) are
 *           `omp simd` reductions. dw and db are sums over rows: threads take blocks of
 *           AG_COL_BLOCK adjacent columns (each owns its dw[c], db[c]; see ag__sum_rows). */
#include "fast.h"

void ag_fast_layernorm_forward(ag_real *y, ag_real *stats, const ag_real *x, const ag_real *w, const ag_real *b,
                               size_t R, int C, ag_real eps)
{
#pragma omp parallel for schedule(static) if (R * C >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *xr = x + r * C;
        ag_real *yr = y + r * C;
        ag_real mean = ag__sum(xr, C) / C;
        for (int c = 0; c < C; c++) yr[c] = xr[c] - mean;             /* y holds x - mean for now */
        ag_real var = ag__dot(yr, yr, C) / C;
        ag_real rstd = 1 / AG_SQRT(var + eps);
        for (int c = 0; c < C; c++) yr[c] = yr[c] * rstd * w[c] + b[c];
        stats[2 * r] = mean;
        stats[2 * r + 1] = rstd;
    }
}

/* acc: dx holds an earlier gradient to add to; otherwise dx is written */
static void layernorm_backward_rows(ag_real *dx, bool acc, ag_real *dw, ag_real *db, const ag_real *dy,
                                    const ag_real *x, const ag_real *w, const ag_real *stats, size_t R, int C)
{
    if (dx) {
        /* rows in parallel: each row's dx needs only that row */
#pragma omp parallel for schedule(static) if (R * C >= AG_PAR_MIN)
        for (size_t r = 0; r < R; r++) {
            const ag_real *xr = x + r * C, *dyr = dy + r * C;
            ag_real mean = stats[2 * r], rstd = stats[2 * r + 1];
            ag_real g_sum = 0, gx_sum = 0; /* sum(g), sum(g * xhat): simd lanes, see ag__sum */
#pragma omp simd reduction(+ : g_sum, gx_sum)
            for (int c = 0; c < C; c++) {
                ag_real g = dyr[c] * w[c];
                g_sum += g;
                gx_sum += g * ((xr[c] - mean) * rstd);
            }
            ag_real g_mean = g_sum / C, gx_mean = gx_sum / C;
            for (int c = 0; c < C; c++) {
                ag_real xhat = (xr[c] - mean) * rstd;
                ag_real d = rstd * (dyr[c] * w[c] - g_mean - xhat * gx_mean);
                dx[r * C + c] = acc ? dx[r * C + c] + d : d;
            }
        }
    }
    if (dw || db) {
        /* blocks of adjacent columns in parallel: each thread owns its entries of dw and db */
        int n_blocks = (C + AG_COL_BLOCK - 1) / AG_COL_BLOCK;
#pragma omp parallel for schedule(static) if (R * C >= AG_PAR_MIN)
        for (int blk = 0; blk < n_blocks; blk++) {
            int c0 = blk * AG_COL_BLOCK, wd = C - c0 < AG_COL_BLOCK ? C - c0 : AG_COL_BLOCK;
            ag_real sw[AG_COL_BLOCK] = { 0 }, sb[AG_COL_BLOCK] = { 0 };
            for (size_t r = 0; r < R; r++) {
                const ag_real *xr = x + r * C + c0, *dyr = dy + r * C + c0;
                ag_real mean = stats[2 * r], rstd = stats[2 * r + 1];
                for (int c = 0; c < wd; c++) {
                    sw[c] += dyr[c] * ((xr[c] - mean) * rstd);
                    sb[c] += dyr[c];
                }
            }
            for (int c = 0; c < wd; c++) {
                if (dw) dw[c0 + c] += sw[c];
                if (db) db[c0 + c] += sb[c];
            }
        }
    }
}

ag_status ag_fast_layernorm_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = (x - mean) * rstd * w + b */
    ag_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *y = n->out;
    ag_real *dx = NULL, *dw = NULL, *db = NULL;
    bool acc = true;
    if (x->requires_grad && !(dx = ag__grad_into(ctx, x, &acc))) return ag_ctx_status(ctx);
    if (w->requires_grad && !(dw = ag_grad(ctx, w))) return ag_ctx_status(ctx);
    if (b->requires_grad && !(db = ag_grad(ctx, b))) return ag_ctx_status(ctx);
    layernorm_backward_rows(dx, acc, dw, db, y->grad, x->data, w->data, n->saved, ag_rows(x), ag_last(x));
    return AG_OK;
}
