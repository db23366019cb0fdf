/* softmax.c -- softmax over the last dim.
 *
 * forward:  y[j] = exp(x[j] - max) / sum_k exp(x[k] - max)      (max subtracted: no overflow)
 *           A row that is entirely -inf (every position masked) has no distribution: it gives
 *           all zeros instead of 0/0 = NaN, and then zero gradient.
 * backward: dx[j] = sum_k dy[k] J[k][j] = y[j] (dy[j] - sum_k dy[k] y[k]), where dy is the
 *           upstream gradient and J[k][j] = y[k] (delta_jk - y[j]) is how y[k] moves with x[j]
 * Fast twin: fast/softmax.c (lane reductions), reached through the ctx's kernel table
 * (kernel.h); tests/test_softmax.c proves it equal. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

// --- reference kernels: the formulas above as plain loops ---

static void softmax_forward(ag_real *y, const ag_real *x, size_t R, int N)
{
#pragma omp parallel for schedule(static) if (R * N >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *xr = x + r * N;  // [N]
        ag_real *yr = y + r * N;        // [N]
        ag_real max = -INFINITY;
        for (int j = 0; j < N; j++)
            if (xr[j] > max) max = xr[j];
        if (max == -INFINITY) { /* fully masked row */
            for (int j = 0; j < N; j++) yr[j] = 0;
            continue;
        }
        ag_real sum = 0;
        for (int j = 0; j < N; j++) {
            yr[j] = AG_EXP(xr[j] - max);
            sum += yr[j];
        }
        for (int j = 0; j < N; j++) yr[j] /= sum;
    }
}

static void softmax_backward(ag_real *dx, const ag_real *y, const ag_real *dy, size_t R, int N)
{
#pragma omp parallel for schedule(static) if (R * N >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *yr = y + r * N, *dyr = dy + r * N;  // [N]
        ag_real *dxr = dx + r * N;                          // [N]
        ag_real dot = 0;                                    /* sum_k dy[k] y[k] */
        for (int k = 0; k < N; k++) dot += dyr[k] * yr[k];
        for (int j = 0; j < N; j++) dxr[j] += yr[j] * (dyr[j] - dot);
    }
}

// --- backward step ---

static ag_status softmax_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = softmax(x)  =>  dx = y * (dy - sum(dy * y)), row by row */
    ag_tensor *x = n->in[0], *y = n->out;
    ag_real *dx = ag_grad(ctx, x);                                       // x's shape
    if (!dx) return ag_ctx_status(ctx);
    softmax_backward(dx, y->data, y->grad, ag_rows(y), ag_last(y));
    return AG_OK;
}

// --- op ---

static const ag_op softmax_op = { .name = "softmax", .backward = softmax_backward_step };
const ag_softmax_kernels ag__softmax_reference = { softmax_forward, &softmax_op };  /* kernel.h's table */

ag_tensor *ag_softmax(ag_ctx *ctx, ag_tensor *x)
{
    if (ag__skip(ctx, x, x)) return NULL;
    ag_tensor *y = ag__tensor_uninit(ctx, x->ndim, x->shape);                          // [..., N]
    if (!y) return NULL;
    const ag_softmax_kernels *kern = &ag__kernels(ctx)->softmax;  /* reference or fast (kernel.h) */
    kern->forward(y->data, x->data, ag_rows(x), ag_last(x));
    ag_record(ctx, kern->op, y, &x, 1);
    return ag__done(ctx, y);
}
