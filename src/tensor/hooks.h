/* hooks.h -- the optional parts of a step context: the layer scope (debug.h), gradient
 * recycling (speed.h) and debug (anomaly detection, profiling: debug.h). Not installed. A ctx
 * has none of them until one is asked for; then ctx->hooks points at this struct, and the
 * path's calls (ctx_impl.h's hooks, from tape.c and grad.c) land in hooks.c, which hands each
 * part to its own file: recycle.c, debug.c. */
#ifndef AG_HOOKS_H
#define AG_HOOKS_H

#include "ctx_impl.h"

struct ag_profile;     /* debug.h */
struct ag__free_grad;  /* a released gradient buffer (recycle.c) */

struct ag__hooks {
    const char *scope;              /* the layer now running, copied into every node; NULL: none */
    struct {
        bool on;
        struct ag__free_grad *free; /* released gradient buffers, reused by size */
    } recycle;
    struct {
        bool detect_anomaly;
        struct ag_profile *profile; /* the caller's timing table (make bench) */
    } debug;
};

/* ctx's optional parts, made (all off) on first use. NULL and the ctx error if out of memory. */
struct ag__hooks *ag__hooks_of(ag_ctx *ctx);

/* recycle.c: a released buffer of `bytes` (taken off the list), or NULL; and, after n's
 * backward, its output's gradient buffer handed back (not a view's: that is its input's). */
ag_real *ag__recycled_grad(struct ag__hooks *h, size_t bytes);
void ag__grad_release(struct ag__hooks *h, ag_node *n);

/* debug.c, with anomaly detection or a profile on: after n is recorded, checks its output for
 * NaN/Inf and charges its forward time; and runs n's backward, charges its time, checks the
 * gradients it wrote (returns the backward's status, or AG_ERR_NONFINITE). */
void ag__debug_recorded(ag_ctx *ctx, const ag_node *n);
ag_status ag__debug_backward(ag_ctx *ctx, ag_node *n);

#endif
