/* scale.c -- y = s * x for a constant s (attention's 1/sqrt(D)).
 *
 * forward:  y[i] = s x[i]
 * backward: dx[i] += s dy[i] */
#include "../alloc.h"
#include "../kernel.h"
#include "../fast/fast.h"

static ag_status scale_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = s x  =>  dx += s dy */
    ag_tensor *x = n->in[0];
    ag_real s = (ag_real)n->fparam[0];
    const ag_real *dy = n->out->grad;
    ag_real *dx = ag_grad(ctx, x);
    if (!dx) return ag_ctx_status(ctx);
    size_t N = ag_numel(x);
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) dx[i] += s * dy[i];
    return AG_OK;
}

static const ag_op scale_op = { "scale", scale_backward };

ag_tensor *ag_scale(ag_ctx *ctx, ag_tensor *x, ag_real s)
{
    if (ag__skip(ctx, x, x)) return NULL;
    ag_tensor *y = ag__tensor_uninit(ctx, x->ndim, x->shape);                          // x's shape
    if (!y) return NULL;
    size_t N = ag_numel(x);
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) y->data[i] = s * x->data[i];
    ag_node *n = ag_record(ctx, &scale_op, y, &x, 1);
    if (n) n->fparam[0] = s;
    return ag__done(ctx, y);
}
