/* softmax.c -- softmax over the last dim.
 *
 * forward:  y[j] = exp(x[j] - max) / sum_k exp(x[k] - max)      (max subtracted: no overflow)
 *           A row that is entirely -inf (every position masked) has no distribution: it gives
 *           all zeros instead of 0/0 = NaN, and then zero gradient.
 * backward: dx[j] = sum_k dy[k] dy[k]/dx[j] = sum_k dy[k] y[k] (delta_jk - y[j])
 *                 = y[j] (dy[j] - sum_k dy[k] y[k]) */
#include "../internal.h"

// --- kernels ---

static void softmax_forward_rows(ag_real *y, const ag_real *x, size_t R, int N)
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

static void softmax_backward_rows(ag_real *dx, const ag_real *y, const ag_real *dy, size_t R, int N)
{
#pragma omp parallel for schedule(static) if (R * N >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *yr = y + r * N, *dyr = dy + r * N;
        ag_real *dxr = dx + r * N;
        ag_real dot = ag__dot(dyr, yr, N);
        for (int j = 0; j < N; j++) dxr[j] += yr[j] * (dyr[j] - dot);
    }
}

// --- backward ---

static ag_status softmax_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = softmax(x)  =>  dx = y * (dy - sum(dy * y)), row by row */
    ag_tensor *x = n->in[0], *y = n->out;
    ag_real *dx = ag_grad(ctx, x);
    if (!dx) return ag_ctx_status(ctx);
    softmax_backward_rows(dx, y->data, y->grad, ag_rows(y), ag_last(y));
    return AG_OK;
}

// --- op ---

static const ag_op softmax_op = { "softmax", softmax_backward };

ag_tensor *ag_softmax(ag_ctx *ctx, ag_tensor *x)
{
    if (ag__skip(ctx, x, x)) return NULL;
    ag_tensor *y = ag__tensor_uninit(ctx, x->ndim, x->shape);                          // [..., N]
    if (!y) return NULL;
    softmax_forward_rows(y->data, x->data, ag_rows(x), ag_last(x));
    ag_record(ctx, &softmax_op, y, &x, 1);
    return ag__done(ctx, y);
}
