/* ctx.c -- the step context: its lifecycle, its switches and its first error.
 *
 * An ag_ctx holds everything one training step makes. Its parts live in their own files:
 *   arena.c  the memory (tensors, nodes, saved buffers, gradients), released at once by reset;
 *   tape.c   the recorded ops and the backward driver;
 *   debug.c  anomaly detection, profiling and the tape walk for --trace-shapes.
 * ctx_impl.h has the struct that they share. */
#include <stdarg.h>
#include <stdlib.h>
#include "ctx_impl.h"

ag_ctx *ag_ctx_new(void)
{
    ag_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return NULL;
    ctx->grad_on = true;
    return ctx;
}

void ag_ctx_free(ag_ctx *ctx)
{
    if (!ctx) return;
    ag__arena_free(ctx);
    free(ctx);
}

void ag_ctx_reset(ag_ctx *ctx)
{
    ag__arena_rewind(ctx);
    ctx->tape = NULL;
    ctx->tape_nodes = 0;
    ctx->scope = NULL;
    ctx->free_grads = NULL; /* their memory went back with the arena */
    ag_ctx_clear_error(ctx);
}

// --- switches ---

void ag_ctx_set_grad(ag_ctx *ctx, bool on) { ctx->grad_on = on; }
bool ag_ctx_grad_enabled(const ag_ctx *ctx) { return ctx->grad_on; }
void ag_ctx_set_detect_anomaly(ag_ctx *ctx, bool on) { ctx->detect_anomaly = on; }
void ag_ctx_set_recycle_grads(ag_ctx *ctx, bool on) { ctx->recycle_grads = on; }
void ag_ctx_set_reference_kernels(ag_ctx *ctx, bool on) { ctx->reference_kernels = on; }
bool ag_ctx_reference_kernels(const ag_ctx *ctx) { return ctx->reference_kernels; }
void ag_ctx_set_scope(ag_ctx *ctx, const char *scope) { ctx->scope = scope; }
const char *ag_ctx_scope(const ag_ctx *ctx) { return ctx->scope; }

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
