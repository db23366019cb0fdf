/* ctx_impl.h -- what the step context is made of, shared by the files that implement it:
 * ctx.c (lifecycle, flags, errors), arena.c (memory), tape.c (recording and the backward
 * driver) and debug.c (anomaly detection, profiling). Not installed, not part of the API:
 * everyone else sees ag_ctx as an opaque handle. */
#ifndef AG_CTX_IMPL_H
#define AG_CTX_IMPL_H

#include "tensor.h"

struct chunk;       /* a block of arena memory (arena.c) */
struct free_block;  /* a recycled gradient buffer (tape.c) */

struct ag_ctx {
    /* --- the step arena (arena.c): everything a step makes, released at once by reset --- */
    struct chunk *chunks;    /* the chunks in allocation order; NULL before the first alloc */
    struct chunk *cur;       /* the chunk allocation tries first; earlier ones are full */
    size_t used_total;       /* bytes handed out since the last reset (alignment padding included) */
    size_t high_water;       /* the largest used_total ever: the size of the one chunk after reset */
    uint64_t chunk_mallocs;  /* malloc calls the arena has made, ever (tests: 0 after step 1) */

    /* --- the tape (tape.c) --- */
    ag_node *tape;           /* the newest node; nodes link backwards through prev */
    size_t tape_nodes;       /* nodes recorded since the last reset */
    bool grad_on;            /* grad mode: false (eval, sampling) records nothing */
    const char *scope;       /* the layer now running, copied into every node; NULL: none */
    bool recycle_grads;      /* release an op output's gradient once its backward has run */
    struct free_block *free_grads; /* with recycle_grads: released gradient buffers, reused by size */
    ag_mark_fn mark_fn;      /* called when the backward passes a mark (ag_ctx_mark); NULL: none */
    void *mark_user;

    /* --- kernels, debugging aids (debug.c) and errors --- */
    bool reference_kernels;  /* run the plain kernels even where fast ones were built */
    bool detect_anomaly;     /* check every op output and gradient for NaN/Inf */
    ag_profile *profile;     /* the caller's timing table; NULL (the default) unless benchmarking */
    ag_error err;            /* the first error since the last reset */
};

/* --- between the files of the ctx (arena.c, tape.c, debug.c) --- */

/* arena.c: frees every chunk (ag_ctx_free). Cannot fail. */
void ag__arena_free(ag_ctx *ctx);
/* arena.c: makes every block handed out since the last reset free again, keeping the memory
 * (ag_ctx_reset). Cannot fail. */
void ag__arena_rewind(ag_ctx *ctx);

/* debug.c, anomaly detection: sets AG_ERR_NONFINITE when the output of the node just recorded
 * holds a NaN or Inf (-inf passes where the op says it may write it). */
void ag__check_output(ag_ctx *ctx, const ag_node *n);
/* debug.c, anomaly detection: after n's backward, sets AG_ERR_NONFINITE and returns the ctx
 * status when an input's gradient holds a NaN or Inf; else AG_OK. */
ag_status ag__check_input_grads(ag_ctx *ctx, const ag_node *n);
/* debug.c, profiling: charges the time since the last record (or mark) to op's forward. */
void ag__profile_forward(ag_profile *p, const ag_op *op);
/* debug.c, profiling: runs n's backward and charges its time to the op's backward. */
ag_status ag__timed_backward(ag_ctx *ctx, ag_node *n);

#endif
