/* alloc.h -- what an op needs around its kernels: memory for outputs and gradients in the step
 * arena, and the prologue and epilogue every op shares. Not installed, not part of the API. */
#ifndef AG_ALLOC_H
#define AG_ALLOC_H

#include <string.h>
#include "ops.h"

/* "[2,3,8]" for error messages: `char b[AG_SHAPE_BUF]; ag_shape_str(t, b, sizeof b)` */
#define AG_SHAPE_BUF 48

/* A new tensor in ctx whose data is NOT zeroed: for op outputs that the kernel overwrites
 * entirely (saves a memset of every activation). Defined in arena.c. */
ag_tensor *ag__tensor_uninit(ag_ctx *ctx, int ndim, const int *shape);

/* The gradient buffer of t for a backward that writes EVERY element of it. The first
 * contribution to a gradient needs no zeroed buffer: *accumulate is false and the backward
 * writes with `=` (gemm beta 0); later ones find the buffer and add (`+=`, beta 1). This saves
 * a memset of every activation gradient. Backwards that write only some elements (a scatter,
 * a broadcast) use ag_grad, which zeroes. NULL on OOM. Defined in tape.c. */
ag_real *ag__grad_into(ag_ctx *ctx, ag_tensor *t, bool *accumulate);

/* Memory for a big buffer (the step arena, the parameters and the optimizer state), freed with
 * free(): from 2 MiB up it is aligned to 2 MiB and the kernel is asked to back it with 2 MiB
 * pages (transparent huge pages; Debian's default mode is "madvise", so nothing happens
 * without asking). A step streams through tens of MB, and with 4 KiB pages the TLB misses
 * cost about 10% of a baby step here. zero: zero-filled, as calloc. NULL when out of memory.
 * Defined in arena.c. */
void *ag__alloc_big(size_t bytes, bool zero);

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
