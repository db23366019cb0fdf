/* ctx_impl.h -- what the step context is made of. Not installed, not part of the API: everyone
 * else sees ag_ctx as an opaque handle. Each file of the ctx keeps its own part of the struct:
 *   ctx.c     the memory (an arena, arena.h), grad mode, the first error;
 *   kernels.c the kernel table (kernel.h): reference or fast;
 *   tape.c    the tape, which the other parts only read;
 *   hooks.c   the optional parts (the layer scope, gradient recycling, debug): NULL until one is
 *             asked for, then reached only through the hooks declared at the end. */
#ifndef AG_CTX_IMPL_H
#define AG_CTX_IMPL_H

#include "arena.h"
#include "kernel.h"
#include "tensor.h"

struct ag_ctx {
    ag__arena arena;          /* everything a step makes, released at once by ag_ctx_reset */
    ag_error err;             /* the first error since the last reset */
    bool grad_on;             /* grad mode: false (eval, sampling) records nothing */
    ag_kernels kernels;       /* what the ops call: the reference kernels or the fast ones */

    ag_node *tape;            /* the newest node; nodes link backwards through prev */
    size_t tape_nodes;        /* nodes recorded since the last reset */
    struct ag__hooks *hooks;  /* the optional parts (hooks.h); NULL: none, and no hook runs */
};

/* --- the hooks: how the path calls the optional parts, only while ctx->hooks is set --- */

/* tape.c, after n is recorded: n's layer scope, anomaly checks, profiling */
void ag__hooks_recorded(ag_ctx *ctx, ag_node *n);
/* tape.c, instead of n's backward: runs it (timed, checked), then recycles its output's gradient */
ag_status ag__hooks_backward(ag_ctx *ctx, ag_node *n);
/* grad.c: a recycled gradient buffer of `bytes`, or NULL */
ag_real *ag__hooks_grad(ag_ctx *ctx, size_t bytes);
/* ctx.c, at ag_ctx_reset: the scope and the recycled buffers go */
void ag__hooks_reset(ag_ctx *ctx);

#endif
