/* hooks.c -- where the path's hooks (ctx_impl.h) land: the layer scope is kept here, recycling
 * and debug are handed to recycle.c and debug.c. None of this runs while ctx->hooks is NULL,
 * which it stays until a layer names its scope or a caller turns an optional part on. */
#include <stdlib.h>
#include "debug.h"
#include "hooks.h"

struct ag__hooks *ag__hooks_of(ag_ctx *ctx)
{
    if (!ctx->hooks && !(ctx->hooks = calloc(1, sizeof *ctx->hooks)))
        ag_ctx_fail(ctx, AG_ERR_NOMEM, "out of memory for the step context's optional parts");
    return ctx->hooks;
}

void ag_ctx_set_scope(ag_ctx *ctx, const char *scope)
{
    struct ag__hooks *h = scope ? ag__hooks_of(ctx) : ctx->hooks;
    if (h) h->scope = scope;
}

const char *ag_ctx_scope(const ag_ctx *ctx) { return ctx->hooks ? ctx->hooks->scope : NULL; }

static bool debug_on(const struct ag__hooks *h) { return h->debug.detect_anomaly || h->debug.profile; }

void ag__hooks_recorded(ag_ctx *ctx, ag_node *n)
{
    n->scope = ctx->hooks->scope;
    if (debug_on(ctx->hooks)) ag__debug_recorded(ctx, n);
}

ag_status ag__hooks_backward(ag_ctx *ctx, ag_node *n)
{
    struct ag__hooks *h = ctx->hooks;
    ag_status s = debug_on(h) ? ag__debug_backward(ctx, n) : n->op->backward(ctx, n);
    if (s == AG_OK && h->recycle.on) ag__grad_release(h, n);
    return s;
}

ag_real *ag__hooks_grad(ag_ctx *ctx, size_t bytes) { return ag__recycled_grad(ctx->hooks, bytes); }

void ag__hooks_reset(ag_ctx *ctx)
{
    ctx->hooks->scope = NULL;
    ctx->hooks->recycle.free = NULL; /* the buffers went back with the arena */
}
