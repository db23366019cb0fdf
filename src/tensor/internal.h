/* internal.h -- helpers shared by the op files; not installed, not part of the API. */
#ifndef AG_INTERNAL_H
#define AG_INTERNAL_H

#include <math.h>
#include <string.h>
#include "ops.h"

/* "[2,3,8]" for error messages: `char b[AG_SHAPE_BUF]; ag_shape_str(t, b, sizeof b)` */
#define AG_SHAPE_BUF 48

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

/* exp for the kernels (softmax, cross-entropy, attention, GELU): libm's, in ag_real's own
 * precision. (A vectorizable polynomial exp was 4x faster than expf with -march=native, but
 * GCC 12 with -march=native miscompiles constant vector stores on this CPU (a test caught it),
 * and without AVX-512 the polynomial does not vectorize and is slower than expf.) */
static inline ag_real ag__exp(ag_real x) { return AG_EXP(x); }

#endif
