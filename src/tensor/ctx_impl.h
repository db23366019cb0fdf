/* ctx_impl.h -- what the step context is made of. Not installed, not part of the API: everyone
 * else sees ag_ctx as an opaque handle. Each file of the ctx keeps its own part of the struct:
 *   ctx.c    the memory (an arena, arena.h), grad mode, the first error;
 *   kernels.c the kernel table (kernel.h): reference or fast;
 *   tape.c   the tape, which the other parts only read;
 *   grad.c   gradient recycling;
 *   debug.c  the layer scope, anomaly detection and profiling.
 * tape.c calls the optional parts through the hooks declared at the end, one each. */
#ifndef AG_CTX_IMPL_H
#define AG_CTX_IMPL_H

#include "arena.h"
#include "kernel.h"
#include "speed.h"
#include "tensor.h"

struct ag_profile;     /* debug.h */
struct ag__free_grad;  /* a recycled gradient buffer (grad.c) */

struct ag_ctx {
    ag__arena arena;          /* everything a step makes, released at once by ag_ctx_reset */
    ag_error err;             /* the first error since the last reset */
    bool grad_on;             /* grad mode: false (eval, sampling) records nothing */
    ag_kernels kernels;       /* what the ops call: the reference kernels or the fast ones */

    ag_node *tape;            /* the newest node; nodes link backwards through prev */
    size_t tape_nodes;        /* nodes recorded since the last reset */
    const char *scope;        /* the layer now running, copied into every node; NULL: none */

    /* the optional parts, off (false, NULL) until asked for */
    struct {
        bool on;
        struct ag__free_grad *free; /* released gradient buffers, reused by size */
    } recycle;
    struct {
        bool on;                    /* detect_anomaly || profile: tape.c tests this one flag */
        bool detect_anomaly;
        struct ag_profile *profile; /* the caller's timing table (make bench) */
    } debug;
};

/* --- the hooks: how tape.c calls the optional parts --- */

/* grad.c, with recycling on: n's backward has run, so its output's gradient buffer goes back
 * to be reused (not a view's: that is its input's gradient). Cannot fail. */
void ag__grad_release(ag_ctx *ctx, ag_node *n);
/* debug.c, with debug.on: after n is recorded, checks its output for NaN/Inf and charges its
 * forward time. */
void ag__debug_recorded(ag_ctx *ctx, const ag_node *n);
/* debug.c, with debug.on: runs n's backward, charges its time, checks the gradients it wrote.
 * Returns the backward's status, or AG_ERR_NONFINITE. */
ag_status ag__debug_backward(ag_ctx *ctx, ag_node *n);

#endif
