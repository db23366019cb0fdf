/* tape.c -- reverse-mode autograd: the tape of recorded ops and the backward driver.
 *
 * Every op appends a node (op, inputs, output, what its backward needs) when grad mode is on and
 * some input requires grad. The tape is therefore in execution order, which is a topological
 * order, so ag_backward needs no graph search: it seeds dloss = 1 and calls each node's
 * backward from the newest to the oldest. Every consumer of a tensor runs its backward before
 * the tensor's producer does, so the producer sees the fully accumulated gradient.
 *
 * Gradients live in the arena. With gradient recycling on, the gradient of an op's output is
 * handed back as soon as that op's backward has run, and the next gradient of the same size
 * reuses it (still in cache) instead of fresh arena memory. */
#include <math.h>
#include <string.h>
#include "alloc.h"
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
    memset(n, 0, sizeof *n);
    n->op = op;
    n->out = y;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    n->scope = ctx->scope;
    n->prev = ctx->tape;
    ctx->tape = n;
    ctx->tape_nodes++;
    y->requires_grad = true;
    if (ctx->detect_anomaly) ag__check_output(ctx, n);
    if (ctx->profile) ag__profile_forward(ctx->profile, op);
    return n;
}

// --- marks: the caller hears how far the backward has come ---

/* a mark is a node of this op with no output: the driver calls the hook instead of a backward */
static const ag_op mark_op = { .name = "mark" };

void ag_ctx_set_mark_hook(ag_ctx *ctx, ag_mark_fn fn, void *user)
{
    ctx->mark_fn = fn;
    ctx->mark_user = user;
}

void ag_ctx_mark(ag_ctx *ctx, int id)
{
    if (!ctx->mark_fn || !ctx->grad_on) return;
    ag_node *n = ag_ctx_alloc(ctx, sizeof(ag_node));
    if (!n) return;
    memset(n, 0, sizeof *n);
    n->op = &mark_op;
    n->iparam[0] = id;
    n->scope = ctx->scope;
    n->prev = ctx->tape;
    ctx->tape = n;
}

// --- gradient buffers ---

/* a released gradient buffer, waiting in ag_ctx.free_grads for a gradient of the same size */
typedef struct free_block {
    struct free_block *next;
    size_t bytes;
} free_block;

/* memory for a new gradient of `bytes`: a released buffer of that size if there is one (it is
 * likely still in cache), else fresh arena memory. Not zeroed. */
static ag_real *grad_alloc(ag_ctx *ctx, size_t bytes)
{
    for (free_block **p = &ctx->free_grads; *p; p = &(*p)->next)
        if ((*p)->bytes == bytes) {
            free_block *b = *p;
            *p = b->next;
            return (ag_real *)(void *)b;
        }
    return ag_ctx_alloc(ctx, bytes);
}

/* With recycle_grads: the backward of node n has run, so nothing reads n->out's gradient any
 * more; its buffer goes to free_grads. Not when the output is a view: its gradient is its
 * input's, which the input's own consumers and producer still need. */
static void grad_release(ag_ctx *ctx, ag_node *n)
{
    if (n->op->output_is_view) return;
    ag_tensor *y = n->out;
#ifdef AG_ARENA_DEBUG
    /* the sanitizer build does not reuse: it poisons, so a stale read shows up as NaN */
    (void)ctx;
    for (size_t i = 0; i < ag_numel(y); i++) y->grad[i] = (ag_real)NAN;
#else
    size_t bytes = ag_numel(y) * sizeof(ag_real);
    if (bytes >= sizeof(free_block)) {
        free_block *b = (free_block *)(void *)y->grad;
        b->bytes = bytes;
        b->next = ctx->free_grads;
        ctx->free_grads = b;
    }
#endif
    y->grad = NULL;
}

ag_real *ag_grad(ag_ctx *ctx, ag_tensor *t)
{
    if (t->grad) return t->grad;
    size_t n = ag_numel(t);
    t->grad = grad_alloc(ctx, n * sizeof(ag_real));
    if (t->grad) memset(t->grad, 0, n * sizeof(ag_real));
    return t->grad;
}

ag_real *ag__grad_into(ag_ctx *ctx, ag_tensor *t, bool *accumulate)
{
    *accumulate = t->grad != NULL;
    if (!t->grad) t->grad = grad_alloc(ctx, ag_numel(t) * sizeof(ag_real)); /* not zeroed */
    return t->grad;
}

// --- the backward driver ---

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
        if (n->op == &mark_op) {                                    /* all after it is done */
            if (ctx->mark_fn) ctx->mark_fn(ctx->mark_user, n->iparam[0]);
            continue;
        }
        if (!n->out->grad) continue;                                /* nothing flowed back here */
        ag_status s = ctx->profile ? ag__timed_backward(ctx, n) : n->op->backward(ctx, n);
        if (s == AG_OK && ctx->detect_anomaly) s = ag__check_input_grads(ctx, n);
        if (s != AG_OK) return s;
        if (ctx->recycle_grads) grad_release(ctx, n);
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
