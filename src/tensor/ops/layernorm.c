/* layernorm.c -- LayerNorm over the last dim (biased variance), with weight and bias.
 *
 * forward:  mean = (1/C) sum_c x[c];  var = (1/C) sum_c (x[c] - mean)^2;  rstd = 1/sqrt(var + eps)
 *           xhat[c] = (x[c] - mean) rstd;   y[c] = xhat[c] w[c] + b[c]
 * backward: dw[c] += sum over rows of dy[c] xhat[c];   db[c] += sum over rows of dy[c]
 *           with g = dy * w:  dx = rstd (g - mean(g) - xhat mean(g xhat))
 *           (the two means are the gradient through mean and through var; llm.c derives the
 *           same in layernorm_backward). mean and rstd are saved per row.
 * Fast kernels: fast/layernorm.c (lane reductions, dx written on first touch, column blocks for
 * dw and db); tests/test_fast_ref_rows.c proves them equal. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

// --- reference kernels: the formulas above as plain loops ---

/* stats[2r] = mean, stats[2r+1] = rstd of row r */
static void layernorm_forward(ag_real *y, ag_real *stats, const ag_real *x, const ag_real *w, const ag_real *b,
                              size_t R, int C, ag_real eps)
{
#pragma omp parallel for schedule(static) if (R * C >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *xr = x + r * C;  // [C]
        ag_real *yr = y + r * C;        // [C]
        ag_real mean = 0;
        for (int c = 0; c < C; c++) mean += xr[c];
        mean /= C;
        ag_real var = 0;
        for (int c = 0; c < C; c++) var += (xr[c] - mean) * (xr[c] - mean);
        var /= C;
        ag_real rstd = 1 / AG_SQRT(var + eps);
        for (int c = 0; c < C; c++) {
            ag_real xhat = (xr[c] - mean) * rstd;
            yr[c] = xhat * w[c] + b[c];
        }
        stats[2 * r] = mean;
        stats[2 * r + 1] = rstd;
    }
}

/* dx, dw, db (each may be NULL: no gradient wanted) += the gradients above */
static void layernorm_backward(ag_real *dx, ag_real *dw, ag_real *db, const ag_real *dy, const ag_real *x,
                               const ag_real *w, const ag_real *stats, size_t R, int C)
{
    if (dx) { /* rows in parallel: each row's dx needs only that row */
#pragma omp parallel for schedule(static) if (R * C >= AG_PAR_MIN)
        for (size_t r = 0; r < R; r++) {
            const ag_real *xr = x + r * C, *dyr = dy + r * C;  // [C]
            ag_real *dxr = dx + r * C;                          // [C]
            ag_real mean = stats[2 * r], rstd = stats[2 * r + 1];
            ag_real g_mean = 0, gx_mean = 0;                    /* mean(g), mean(g xhat) */
            for (int c = 0; c < C; c++) {
                ag_real xhat = (xr[c] - mean) * rstd;
                ag_real g = dyr[c] * w[c];
                g_mean += g;
                gx_mean += g * xhat;
            }
            g_mean /= C;
            gx_mean /= C;
            for (int c = 0; c < C; c++) {
                ag_real xhat = (xr[c] - mean) * rstd;
                dxr[c] += rstd * (dyr[c] * w[c] - g_mean - xhat * gx_mean);
            }
        }
    }
    /* dw[c] and db[c] are sums over all rows: column by column, serially (threads taking rows
     * would race on dw[c]) */
    for (int c = 0; c < C && (dw || db); c++) {
        ag_real sum_w = 0, sum_b = 0;                           /* sum_r dy xhat, sum_r dy */
        for (size_t r = 0; r < R; r++) {
            ag_real xhat = (x[r * C + c] - stats[2 * r]) * stats[2 * r + 1];
            sum_w += dy[r * C + c] * xhat;
            sum_b += dy[r * C + c];
        }
        if (dw) dw[c] += sum_w;
        if (db) db[c] += sum_b;
    }
}

// --- backward step ---

static ag_status layernorm_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = (x - mean) * rstd * w + b  =>  dw += dy xhat,  db += dy,
     *   dx += rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w */
    ag_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *y = n->out;
    ag_real *dx = NULL, *dw = NULL, *db = NULL;
    if (x->requires_grad && !(dx = ag_grad(ctx, x))) return ag_ctx_status(ctx);  // [..., C]
    if (w->requires_grad && !(dw = ag_grad(ctx, w))) return ag_ctx_status(ctx);  // [C]
    if (b->requires_grad && !(db = ag_grad(ctx, b))) return ag_ctx_status(ctx);  // [C]
    layernorm_backward(dx, dw, db, y->grad, x->data, w->data, n->saved, ag_rows(x), ag_last(x));
    return AG_OK;
}

// --- op ---

static const ag_op layernorm_op = { .name = "layernorm", .backward = layernorm_backward_step };
const ag_layernorm_kernels ag__layernorm_reference = { layernorm_forward, &layernorm_op };  /* kernel.h's table */

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
    const ag_layernorm_kernels *kern = &ag__kernels(ctx)->layernorm;  /* reference or fast (kernel.h) */
    kern->forward(y->data, stats, x->data, w->data, b->data, R, C, eps);
    ag_tensor *in[3] = { x, w, b };
    ag_node *n = ag_record(ctx, kern->op, y, in, 3);
    if (n) n->saved = stats;
    return ag__done(ctx, y);
}
