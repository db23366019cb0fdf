/* rmsnorm.c -- the RMSNorm layer over the last dim: weight ones, eps 1e-5, no bias.
 * The normalisation and its backward live in the op (tensor/ops/rmsnorm.c); this file only
 * registers the weight under its name and calls the op. The weight is not decayed (like
 * LayerNorm's). */
#include <stdio.h>
#include "nn.h"

#define RMS_EPS 1e-5

ag_status ag_rmsnorm_layer_init(ag_rmsnorm_layer *L, ag_params *P, const char *prefix, int C)
{
    if (!L || !P || !prefix)
        return ag_params_fail(P, AG_ERR_ARG, "ag_rmsnorm_layer_init: no layer, params or prefix");
    if (C <= 0) return ag_params_fail(P, AG_ERR_ARG, "%s: C %d must be > 0", prefix, C);
    L->C = C;
    return ag_params_register(&L->w, P, prefix, "weight", 1, &C, AG_INIT_ONES, 0, false);  // [C]
}

ag_tensor *ag_rmsnorm_layer_forward(ag_ctx *ctx, const ag_rmsnorm_layer *L, ag_tensor *x)
{
    return ag_rmsnorm(ctx, x, L->w, (ag_real)RMS_EPS);              // [..., C]
}
