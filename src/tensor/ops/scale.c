/* scale.c -- y = s * x for a constant s (attention's 1/sqrt(D)).
 *
 * forward:  y[i] = s x[i]
 * backward: dx[i] += s dy[i]
 * One path: these plain loops are the kernels; fast/ has none for this op. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

// --- reference kernels ---

static void scale_forward(ag_real *y, const ag_real *x, ag_real s, size_t N)
{
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) y[i] = s * x[i];
}

static void scale_backward(ag_real *dx, const ag_real *dy, ag_real s, size_t N)
{
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) dx[i] += s * dy[i];
}

// --- backward step ---

static ag_status scale_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = s x  =>  dx += s dy */
    ag_tensor *x = n->in[0];
    ag_real *dx = ag_grad(ctx, x);                                  // x's shape
    if (!dx) return ag_ctx_status(ctx);
    scale_backward(dx, n->out->grad, (ag_real)n->fparam[0], ag_numel(x));
    return AG_OK;
}

// --- op ---

static const ag_op scale_op = { .name = "scale", .backward = scale_backward_step };

ag_tensor *ag_scale(ag_ctx *ctx, ag_tensor *x, ag_real s)
{
    if (ag__skip(ctx, x, x)) return NULL;
    ag_tensor *y = ag__tensor_uninit(ctx, x->ndim, x->shape);                          // x's shape
    if (!y) return NULL;
    scale_forward(y->data, x->data, s, ag_numel(x));
    ag_node *n = ag_record(ctx, &scale_op, y, &x, 1);
    if (n) n->fparam[0] = s;
    return ag__done(ctx, y);
}
