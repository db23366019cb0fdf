/* gelu.c -- GELU, tanh form (as GPT-2 and MODEL.md use).
 *
 * forward:  u = sqrt(2/pi) (x + 0.044715 x^3);   y = 0.5 x (1 + tanh(u))
 * backward: dy/dx = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 *           dx += dy * dy/dx */
#include "../internal.h"

#define GELU_K ((ag_real)0.7978845608028654) /* sqrt(2/pi) */
#define GELU_A ((ag_real)0.044715)

static ag_status gelu_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3) */
    ag_tensor *x = n->in[0];
    const ag_real *dy = n->out->grad;
    ag_real *dx = ag_grad(ctx, x);
    if (!dx) return ag_ctx_status(ctx);
    size_t N = ag_numel(x);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        ag_real v = x->data[i];
        ag_real th = AG_TANH(GELU_K * (v + GELU_A * v * v * v));
        ag_real half = 0.5;
        ag_real local = half * (1 + th) + half * v * (1 - th * th) * GELU_K * (1 + 3 * GELU_A * v * v);
        dx[i] += dy[i] * local;
    }
    return AG_OK;
}

static const ag_op gelu_op = { "gelu", gelu_backward };

ag_tensor *ag_gelu(ag_ctx *ctx, ag_tensor *x)
{
    if (ag__skip(ctx, x, x)) return NULL;
    ag_tensor *y = ag_tensor_like(ctx, x);                          // x's shape
    if (!y) return NULL;
    size_t N = ag_numel(x);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        ag_real v = x->data[i];
        y->data[i] = (ag_real)0.5 * v * (1 + AG_TANH(GELU_K * (v + GELU_A * v * v * v)));
    }
    ag_record(ctx, &gelu_op, y, &x, 1);
    return ag__done(ctx, y);
}
