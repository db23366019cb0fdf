/* fast/grad.c -- first-touch gradients for the fast backwards (ag__grad_into, fast.h): the
 * first backward to reach a gradient writes it whole instead of adding to a zeroed buffer. */
#include "fast.h"

ag_real *ag__grad_into(ag_ctx *ctx, ag_tensor *t, bool *accumulate)
{
    *accumulate = t->grad != NULL;
    if (!t->grad) t->grad = ag__grad_buffer(ctx, ag_numel(t) * sizeof(ag_real)); /* not zeroed */
    return t->grad;
}
