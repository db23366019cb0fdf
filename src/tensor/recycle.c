/* recycle.c -- gradient recycling (speed.h, off by default). Once an op's backward has run,
 * nothing reads the gradient of that op's output again, so the backward hook (hooks.c) hands
 * it back (ag__grad_release), and the next gradient of the same size takes the buffer while it
 * is still in cache (ag__recycled_grad, which grad.c asks first), instead of fresh arena
 * memory. */
#include <math.h>
#include "hooks.h"
#include "speed.h"

/* a released gradient buffer, waiting in h->recycle.free for a gradient of the same size */
struct ag__free_grad {
    struct ag__free_grad *next;
    size_t bytes;
};

void ag_ctx_set_recycle_grads(ag_ctx *ctx, bool on)
{
    struct ag__hooks *h = on ? ag__hooks_of(ctx) : ctx->hooks;
    if (h) h->recycle.on = on;
}

ag_real *ag__recycled_grad(struct ag__hooks *h, size_t bytes)
{
    for (struct ag__free_grad **p = &h->recycle.free; *p; p = &(*p)->next)
        if ((*p)->bytes == bytes) {
            struct ag__free_grad *b = *p;
            *p = b->next;
            return (ag_real *)(void *)b;
        }
    return NULL;
}

void ag__grad_release(struct ag__hooks *h, ag_node *n)
{
    ag_tensor *y = n->out;
    if (n->op->flags & AG_OP_OUTPUT_IS_VIEW) return; /* a view's gradient is its input's */
#ifdef AG_ARENA_DEBUG
    /* the sanitizer build does not reuse: it poisons, so a stale read shows up as NaN */
    (void)h;
    for (size_t i = 0; i < ag_numel(y); i++) y->grad[i] = (ag_real)NAN;
#else
    size_t bytes = ag_numel(y) * sizeof(ag_real);
    if (bytes >= sizeof(struct ag__free_grad)) {
        struct ag__free_grad *b = (struct ag__free_grad *)(void *)y->grad;
        b->bytes = bytes;
        b->next = h->recycle.free;
        h->recycle.free = b;
    }
#endif
    y->grad = NULL;
}
