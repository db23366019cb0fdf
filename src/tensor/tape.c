/* tape.c -- reverse-mode autograd: the tape of recorded ops and the backward walk.
 *
 * Every op appends a node (op, inputs, output, what its backward needs) when grad mode is on
 * and some input requires grad. The tape is therefore in execution order, which is a
 * topological order, so ag_backward needs no graph search: it seeds dloss = 1 and calls each
 * node's backward from the newest to the oldest. Every consumer of a tensor runs its backward
 * before the tensor's producer does, so the producer sees the fully accumulated gradient.
 * Each backward adds (+=) into its inputs' gradients, which ag_grad (grad.c) makes zero-filled
 * on first touch.
 *
 * The optional parts (the layer scope, debug.h's anomaly detection and profiling, speed.h's
 * gradient recycling) hook in at two places, only when a ctx has them: after a node is
 * recorded, and in place of a backward call (hooks.c). */
#include "ctx_impl.h"

// --- recording ---

ag_node *ag_record(ag_ctx *ctx, const ag_op *op, ag_tensor *y, ag_tensor *const *in, int n_in)
{
    if (!ctx->grad_on) return NULL;
    bool any = false;
    for (int i = 0; i < n_in; i++) any = any || (in[i] && in[i]->requires_grad);
    if (!any) return NULL;
    ag_node *n = ag_ctx_alloc(ctx, sizeof(ag_node));
    if (!n) return NULL;
    *n = (ag_node){ .op = op, .out = y, .n_in = n_in, .prev = ctx->tape };
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    ctx->tape = n;
    ctx->tape_nodes++;
    y->requires_grad = true;
    if (ctx->hooks) ag__hooks_recorded(ctx, n);
    return n;
}

// --- the backward walk ---

ag_status ag_backward_from(ag_ctx *ctx, ag_tensor *y, const ag_real *dy)
{
    if (ctx->err.status) return ctx->err.status;
    if (!y) return ag_ctx_fail(ctx, AG_ERR_ARG, "ag_backward: no output tensor");
    if (!y->requires_grad)
        return ag_ctx_fail(ctx, AG_ERR_ARG, "ag_backward: the output does not depend on anything that requires grad");
    ag_real *g = ag_grad(ctx, y);                                   /* the seed: grad(y) += dy */
    if (!g) return ctx->err.status;
    size_t N = ag_numel(y);
    for (size_t i = 0; i < N; i++) g[i] += dy[i];
    for (ag_node *n = ctx->tape; n; n = n->prev) {                  /* newest to oldest */
        if (!n->out->grad) continue;                                /* nothing flowed back here */
        ag_status s = ctx->hooks ? ag__hooks_backward(ctx, n) : n->op->backward(ctx, n);
        if (s != AG_OK) return s;
    }
    return AG_OK;
}

ag_status ag_backward(ag_ctx *ctx, ag_tensor *loss)
{
    if (ctx->err.status) return ctx->err.status;
    if (!loss) return ag_ctx_fail(ctx, AG_ERR_ARG, "ag_backward: no loss tensor");
    if (ag_numel(loss) != 1) {
        char b[64];
        return ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_backward: loss must be a scalar, got %s",
                           ag_shape_str(loss, b, sizeof b));
    }
    const ag_real one = 1;
    return ag_backward_from(ctx, loss, &one);
}
