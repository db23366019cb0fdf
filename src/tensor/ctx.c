/* ctx.c -- the step context: everything one training step makes lives in it until
 * ag_ctx_reset. Its memory is an arena (arena.c); this file adds the first error, grad mode,
 * and the tensors made in the ctx. The tape is tape.c's; ctx_impl.h shows the whole struct. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "ctx_impl.h"

ag_ctx *ag_ctx_new(void)
{
    ag_kernels_id kernels;
    ag_error err = { 0 };
    if (ag_kernels_from_env(&kernels, &err) != AG_OK) return NULL; /* AG_KERNELS names no table */
    ag_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return NULL;
    ctx->grad_on = true;
    ag__kernels_init(&ctx->kernels, kernels);
    return ctx;
}

void ag_ctx_free(ag_ctx *ctx)
{
    if (!ctx) return;
    ag__arena_free(&ctx->arena);
    free(ctx->hooks);
    free(ctx);
}

void ag_ctx_reset(ag_ctx *ctx)
{
    ag__arena_rewind(&ctx->arena);
    ctx->tape = NULL;
    ctx->tape_nodes = 0;
    if (ctx->hooks) ag__hooks_reset(ctx);
    ag_ctx_clear_error(ctx);
}

void ag_ctx_set_grad(ag_ctx *ctx, bool on) { ctx->grad_on = on; }
bool ag_ctx_grad_enabled(const ag_ctx *ctx) { return ctx->grad_on; }

// --- the first error ---

const char *ag_ctx_error(const ag_ctx *ctx) { return ctx->err.status ? ctx->err.msg : NULL; }
ag_status ag_ctx_status(const ag_ctx *ctx) { return ctx->err.status; }

ag_status ag_ctx_fail(ag_ctx *ctx, ag_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ag_vseterr(&ctx->err, s, fmt, ap);
    va_end(ap);
    return s;
}

void ag_ctx_clear_error(ag_ctx *ctx) { ag_error_clear(&ctx->err); }

// --- memory and tensors ---

void *ag_ctx_alloc(ag_ctx *ctx, size_t bytes)
{
    void *p = ag__arena_alloc(&ctx->arena, bytes);
    if (!p) ag_ctx_fail(ctx, AG_ERR_NOMEM, "out of memory allocating %zu bytes in the step arena", bytes);
    return p;
}

/* ag__tensor_uninit is declared in alloc.h, the ops' header: a tensor whose data is not zeroed */
ag_tensor *ag__tensor_uninit(ag_ctx *ctx, int ndim, const int *shape)
{
    if (ndim < 1 || ndim > AG_MAX_DIMS)
        return ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_tensor_new: %d dims (1..%d allowed)", ndim, AG_MAX_DIMS), NULL;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0)
            return ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_tensor_new: dim %d is %d (must be > 0)", i, shape[i]), NULL;
        n *= (size_t)shape[i];
    }
    ag_tensor *t = ag_ctx_alloc(ctx, sizeof(ag_tensor));
    ag_real *data = t ? ag_ctx_alloc(ctx, n * sizeof(ag_real)) : NULL;
    if (!data) return NULL;
    memset(t, 0, sizeof *t);
    ag_tensor_set_shape(t, ndim, shape);
    t->data = data;
    t->in_arena = true;
    return t;
}

ag_tensor *ag_tensor_new(ag_ctx *ctx, int ndim, const int *shape)
{
    ag_tensor *t = ag__tensor_uninit(ctx, ndim, shape);
    if (t) memset(t->data, 0, ag_numel(t) * sizeof(ag_real));
    return t;
}

ag_tensor *ag_tensor_new1(ag_ctx *ctx, int d0) { int s[1] = {d0}; return ag_tensor_new(ctx, 1, s); }
ag_tensor *ag_tensor_new2(ag_ctx *ctx, int d0, int d1) { int s[2] = {d0, d1}; return ag_tensor_new(ctx, 2, s); }
ag_tensor *ag_tensor_new3(ag_ctx *ctx, int d0, int d1, int d2) { int s[3] = {d0, d1, d2}; return ag_tensor_new(ctx, 3, s); }
ag_tensor *ag_tensor_new4(ag_ctx *ctx, int d0, int d1, int d2, int d3)
{
    int s[4] = {d0, d1, d2, d3};
    return ag_tensor_new(ctx, 4, s);
}

ag_tensor *ag_tensor_like(ag_ctx *ctx, const ag_tensor *x)
{
    if (!x) return NULL;
    return ag_tensor_new(ctx, x->ndim, x->shape);
}

ag_tensor *ag_tensor_leaf(ag_ctx *ctx, int ndim, const int *shape)
{
    ag_tensor *t = ag_tensor_new(ctx, ndim, shape);
    ag_real *grad = t ? ag_ctx_alloc(ctx, ag_numel(t) * sizeof(ag_real)) : NULL;
    if (!grad) return NULL;
    memset(grad, 0, ag_numel(t) * sizeof(ag_real));
    t->grad = grad;
    t->requires_grad = true;
    return t;
}
