/* rmsnorm.c -- RMSNorm over the last dim, with a weight and no bias (Zhang & Sennrich 2019,
 * "Root Mean Square Layer Normalization"; the norm of LLaMA and llama2.c's rmsnorm).
 *
 * forward:  ms = (1/C) sum_c x[c]^2;   rstd = 1/sqrt(ms + eps)
 *           xhat[c] = x[c] rstd;        y[c] = xhat[c] w[c]
 *           LayerNorm without the mean: nothing is centred, so there is no bias and one
 *           statistic per row instead of two.
 * backward: dw[c] += sum over rows of dy[c] xhat[c]
 *           with g = dy * w:  dx[j] = sum_c g[c] d(x[c] rstd)/dx[j]
 *                                     = rstd g[j] + (sum_c g[c] x[c]) d rstd/dx[j]
 *           d rstd/dx[j] = -1/2 (ms + eps)^(-3/2) * 2 x[j] / C = -rstd^3 x[j] / C, so
 *           dx[j] = rstd g[j] - rstd^3 x[j] (1/C) sum_c g[c] x[c]
 *                 = rstd (g[j] - xhat[j] mean(g xhat))
 *           (LayerNorm's dx without the mean(g) term, which came from the centring).
 *           rstd is saved per row.
 * Fast kernels: fast/rmsnorm.c (lane reductions, column blocks for dw); tests/test_fast_ref_rows.c
 * proves them equal. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

// --- reference kernels: the formulas above as plain loops ---

/* rstd[r] = 1/sqrt(mean(x_r^2) + eps) of row r */
static void rmsnorm_forward(ag_real *y, ag_real *rstd, const ag_real *x, const ag_real *w, size_t R, int C,
                            ag_real eps)
{
#pragma omp parallel for schedule(static) if (R * C >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *xr = x + r * C;  // [C]
        ag_real *yr = y + r * C;        // [C]
        ag_real ms = 0;
        for (int c = 0; c < C; c++) ms += xr[c] * xr[c];
        ms /= C;
        ag_real rs = 1 / AG_SQRT(ms + eps);
        for (int c = 0; c < C; c++) yr[c] = xr[c] * rs * w[c];
        rstd[r] = rs;
    }
}

/* dx, dw (each may be NULL: no gradient wanted) += the gradients above */
static void rmsnorm_backward(ag_real *dx, ag_real *dw, const ag_real *dy, const ag_real *x, const ag_real *w,
                             const ag_real *rstd, size_t R, int C)
{
    if (dx) { /* rows in parallel: each row's dx needs only that row */
#pragma omp parallel for schedule(static) if (R * C >= AG_PAR_MIN)
        for (size_t r = 0; r < R; r++) {
            const ag_real *xr = x + r * C, *dyr = dy + r * C;  // [C]
            ag_real *dxr = dx + r * C;                          // [C]
            ag_real rs = rstd[r];
            ag_real gx_mean = 0;                                /* mean(g xhat), g = dy w */
            for (int c = 0; c < C; c++) gx_mean += dyr[c] * w[c] * (xr[c] * rs);
            gx_mean /= C;
            for (int c = 0; c < C; c++) dxr[c] += rs * (dyr[c] * w[c] - xr[c] * rs * gx_mean);
        }
    }
    /* dw[c] is a sum over all rows: column by column, serially (threads taking rows would race
     * on dw[c]) */
    for (int c = 0; c < C && dw; c++) {
        ag_real sum_w = 0;                                      /* sum_r dy xhat */
        for (size_t r = 0; r < R; r++) sum_w += dy[r * C + c] * (x[r * C + c] * rstd[r]);
        dw[c] += sum_w;
    }
}

// --- backward step ---

static ag_status rmsnorm_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = x * rstd * w,  rstd = 1/sqrt(mean(x^2) + eps)  =>
     *   dw += sum_rows dy * xhat;   dx += rstd (dy w - xhat mean(dy w xhat)) */
    ag_tensor *x = n->in[0], *w = n->in[1], *y = n->out;
    ag_real *dx = NULL, *dw = NULL;
    if (x->requires_grad && !(dx = ag_grad(ctx, x))) return ag_ctx_status(ctx);  // [..., C]
    if (w->requires_grad && !(dw = ag_grad(ctx, w))) return ag_ctx_status(ctx);  // [C]
    rmsnorm_backward(dx, dw, y->grad, x->data, w->data, n->saved, ag_rows(x), ag_last(x));
    return AG_OK;
}

// --- op ---

static const ag_op rmsnorm_op = { .name = "rmsnorm", .backward = rmsnorm_backward_step };
const ag_rmsnorm_kernels ag__rmsnorm_reference = { rmsnorm_forward, &rmsnorm_op };  /* kernel.h's table */

ag_tensor *ag_rmsnorm(ag_ctx *ctx, ag_tensor *x, ag_tensor *w, ag_real eps)
{
    if (ag__skip(ctx, x, w)) return NULL;
    int C = ag_last(x);
    if (w->ndim != 1 || w->shape[0] != C) {
        char sx[AG_SHAPE_BUF], sw[AG_SHAPE_BUF];
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_rmsnorm: x %s, w %s (need w [C] with C = x's last dim)",
                    ag_shape_str(x, sx, sizeof sx), ag_shape_str(w, sw, sizeof sw));
        return NULL;
    }
    if (!(eps > 0)) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "ag_rmsnorm: eps %g must be > 0 (an all-zero row would divide by 0)",
                    (double)eps);
        return NULL;
    }
    ag_tensor *y = ag_tensor_like(ctx, x);                          // [..., C]
    size_t R = ag_rows(x);
    ag_real *rstd = y ? ag_ctx_alloc(ctx, R * sizeof(ag_real)) : NULL; // [R]
    if (!rstd) return NULL;
    const ag_rmsnorm_kernels *kern = &ag__kernels(ctx)->rmsnorm;  /* reference or fast (kernel.h) */
    kern->forward(y->data, rstd, x->data, w->data, R, C, eps);
    ag_tensor *in[2] = { x, w };
    ag_node *n = ag_record(ctx, kern->op, y, in, 2);
    if (n) n->saved = rstd;
    return ag__done(ctx, y);
}
