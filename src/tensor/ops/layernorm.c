/* layernorm.c -- LayerNorm over the last dim (biased variance), with weight and bias.
 *
 * forward:  mean = (1/C) sum_c x[c];  var = (1/C) sum_c (x[c] - mean)^2;  rstd = 1/sqrt(var + eps)
 *           xhat[c] = (x[c] - mean) rstd;   y[c] = xhat[c] w[c] + b[c]
 * backward: dw[c] += sum over rows of dy[c] xhat[c];   db[c] += sum over rows of dy[c]
 *           with g = dy * w:  dx = rstd (g - mean(g) - xhat mean(g xhat))
 *           (the two means are the gradient through mean and through var; llm.c derives the
 *           same in layernorm_backward). mean and rstd are saved per row. */
#include "../alloc.h"
#include "../kernel.h"
#include "../fast/fast.h"

// --- kernels ---

/* stats[2r] = mean, stats[2r+1] = rstd of row r */
static void layernorm_forward_rows(ag_real *y, ag_real *stats, const ag_real *x, const ag_real *w,
                                   const ag_real *b, size_t R, int C, ag_real eps)
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

// --- backward ---

static ag_status layernorm_backward(ag_ctx *ctx, ag_node *n)
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

// --- op ---

static const ag_op layernorm_op = { "layernorm", layernorm_backward };

ag_tensor *ag_layernorm(ag_ctx *ctx, ag_tensor *x, ag_tensor *w, ag_tensor *b, ag_real eps)
{
    if (ag__skip(ctx, x, w) || !b) return NULL;
    int C = ag_last(x);
    if (w->ndim != 1 || b->ndim != 1 || w->shape[0] != C || b->shape[0] != C) {
        char sx[AG_SHAPE_BUF], sw[AG_SHAPE_BUF], sb[AG_SHAPE_BUF];
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_layernorm: x %s, w %s, b %s (need w and b [C] with C = x's last dim)",
                    ag_shape_str(x, sx, sizeof sx), ag_shape_str(w, sw, sizeof sw), ag_shape_str(b, sb, sizeof sb));
        return NULL;
    }
    ag_tensor *y = ag__tensor_uninit(ctx, x->ndim, x->shape);                          // [..., C]
    size_t R = ag_rows(x);
    ag_real *stats = y ? ag_ctx_alloc(ctx, 2 * R * sizeof(ag_real)) : NULL; // [R, 2] mean, rstd
    if (!stats) return NULL;
    layernorm_forward_rows(y->data, stats, x->data, w->data, b->data, R, C, eps);
    ag_tensor *in[3] = { x, w, b };
    ag_node *n = ag_record(ctx, &layernorm_op, y, in, 3);
    if (n) n->saved = stats;
    return ag__done(ctx, y);
}
