/* grad.c -- gradient buffers. ag_grad gives a tensor its gradient, zero-filled in the step
 * arena, the first time a backward asks for it; after that, backwards add into it.
 *
 * Gradient recycling (speed.h, off by default): once an op's backward has run, nothing reads
 * the gradient of that op's output again, so tape.c hands it back (ag__grad_release) and the
 * next gradient of the same size takes the buffer while it is still in cache, instead of fresh
 * arena memory. */
#include <math.h>
#include <string.h>
#include "alloc.h"
#include "ctx_impl.h"

/* a released gradient buffer, waiting in ctx->recycle.free for a gradient of the same size */
struct ag__free_grad {
    struct ag__free_grad *next;
    size_t bytes;
};

void ag_ctx_set_recycle_grads(ag_ctx *ctx, bool on) { ctx->recycle.on = on; }

ag_real *ag__grad_buffer(ag_ctx *ctx, size_t bytes)
{
    for (struct ag__free_grad **p = &ctx->recycle.free; *p; p = &(*p)->next)
        if ((*p)->bytes == bytes) {
            struct ag__free_grad *b = *p;
            *p = b->next;
            return (ag_real *)(void *)b;
        }
    return ag_ctx_alloc(ctx, bytes);
}

ag_real *ag_grad(ag_ctx *ctx, ag_tensor *t)
{
    if (t->grad) return t->grad;
    size_t bytes = ag_numel(t) * sizeof(ag_real);
    t->grad = ag__grad_buffer(ctx, bytes);
    if (t->grad) memset(t->grad, 0, bytes);
    return t->grad;
}

void ag__grad_release(ag_ctx *ctx, ag_node *n)
{
    ag_tensor *y = n->out;
    if (n->op->output_is_view) return; /* a view's gradient is its input's */
#ifdef AG_ARENA_DEBUG
    /* the sanitizer build does not reuse: it poisons, so a stale read shows up as NaN */
    (void)ctx;
    for (size_t i = 0; i < ag_numel(y); i++) y->grad[i] = (ag_real)NAN;
#else
    size_t bytes = ag_numel(y) * sizeof(ag_real);
    if (bytes >= sizeof(struct ag__free_grad)) {
        struct ag__free_grad *b = (struct ag__free_grad *)(void *)y->grad;
        b->bytes = bytes;
        b->next = ctx->recycle.free;
        ctx->recycle.free = b;
    }
#endif
    y->grad = NULL;
}
