/* grad.c -- gradient buffers. ag_grad gives a tensor its gradient, zero-filled in the step
 * arena, the first time a backward asks for it; after that, backwards add into it. With
 * gradient recycling on (speed.h), a buffer that an earlier backward handed back is taken
 * first: the one hook here. */
#include <string.h>
#include "alloc.h"
#include "ctx_impl.h"

ag_real *ag__grad_buffer(ag_ctx *ctx, size_t bytes)
{
    ag_real *b = ctx->hooks ? ag__hooks_grad(ctx, bytes) : NULL; /* a recycled buffer, if any */
    return b ? b : ag_ctx_alloc(ctx, bytes);
}

ag_real *ag_grad(ag_ctx *ctx, ag_tensor *t)
{
    if (t->grad) return t->grad;
    size_t bytes = ag_numel(t) * sizeof(ag_real);
    t->grad = ag__grad_buffer(ctx, bytes);
    if (t->grad) memset(t->grad, 0, bytes);
    return t->grad;
}
