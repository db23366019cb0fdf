/* alloc.h -- what an op needs around its kernels: memory for outputs and gradients in the step
 * arena, and the prologue and epilogue every op shares. Not installed, not part of the API. */
#ifndef AG_ALLOC_H
#define AG_ALLOC_H

#include <string.h>
#include "tensor.h"

/* "[2,3,8]" for error messages: `char b[AG_SHAPE_BUF]; ag_shape_str(t, b, sizeof b)` */
#define AG_SHAPE_BUF 48

/* A new tensor in ctx whose data is NOT zeroed: for op outputs that the kernel overwrites
 * entirely (saves a memset of every activation). Defined in ctx.c. */
ag_tensor *ag__tensor_uninit(ag_ctx *ctx, int ndim, const int *shape);

/* Memory for a gradient of `bytes`, NOT zeroed: a recycled buffer of that size if there is one
 * (speed.h's gradient recycling), else fresh arena memory. NULL (and the ctx error) on OOM.
 * ag_grad zeroes it; the fast backwards' ag__grad_into (fast/fast.h) may not. Defined in
 * grad.c. */
ag_real *ag__grad_buffer(ag_ctx *ctx, size_t bytes);

/* The start of every op: a NULL input or an earlier error makes the op a no-op that returns
 * NULL, so a forward pass reads straight through and is checked once at the end. */
static inline bool ag__skip(ag_ctx *ctx, const ag_tensor *a, const ag_tensor *b)
{
    return ag_ctx_status(ctx) != AG_OK || !a || !b;
}

/* The end of every op: y unless an error happened on the way (OOM while recording). */
static inline ag_tensor *ag__done(ag_ctx *ctx, ag_tensor *y)
{
    return ag_ctx_status(ctx) == AG_OK ? y : NULL;
}

#endif
