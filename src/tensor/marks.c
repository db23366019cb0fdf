/* marks.c -- how far has the backward come? (speed.h) A mark is a tape node without an output,
 * recorded by ag_ctx_mark between two ops of a forward. tape.c runs every node without an
 * output, so when the backward walks past a mark, this file's backward calls the caller's hook:
 * every node recorded after the mark has run its backward by then. */
#include "ctx_impl.h"

static ag_status mark_reached(ag_ctx *ctx, ag_node *n)
{
    if (ctx->mark.fn) ctx->mark.fn(ctx->mark.user, n->iparam[0]); /* removed since: nothing to tell */
    return AG_OK;
}

static const ag_op mark_op = { .name = "mark", .backward = mark_reached };

void ag_ctx_set_mark_hook(ag_ctx *ctx, ag_mark_fn fn, void *user)
{
    ctx->mark.fn = fn;
    ctx->mark.user = user;
}

void ag_ctx_mark(ag_ctx *ctx, int id)
{
    if (!ctx->mark.fn || !ctx->grad_on) return;
    ag_node *n = ag_ctx_alloc(ctx, sizeof *n);
    if (!n) return;
    *n = (ag_node){ .op = &mark_op, .iparam = { id }, .scope = ctx->scope, .prev = ctx->tape };
    ctx->tape = n; /* not counted in tape_nodes: a mark is no op */
}
