/* rmsnorm.c -- the RMSNorm layer over the last dim: weight ones, eps 1e-5, no bias.
 * The normalisation and its backward live in the op (tensor/ops/rmsnorm.c); this file only
 * registers the weight under its name and calls the op. The weight is not decayed (like
 * LayerNorm's). */
#include <stdio.h>
#include "nn.h"

#define RMS_EPS 1e-5

ag_status ag_rmsnorm_layer_init(ag_rmsnorm_layer *L, ag_params *P, const char *prefix, int C)
{
    if (!L || !P || !prefix || C <= 0) return AG_ERR_ARG;
    L->C = C;
    L->w = NULL;
    char name[128];
    int n = snprintf(name, sizeof name, "%s.weight", prefix);
    if (n < 0 || (size_t)n >= sizeof name || P->data || ag_params_find(P, name)) return AG_ERR_ARG;
    L->w = ag_params_add(P, name, 1, &C, AG_INIT_ONES, 0, false);  // [C]
    return L->w ? AG_OK : AG_ERR_NOMEM;
}

ag_tensor *ag_rmsnorm_layer_forward(ag_ctx *ctx, const ag_rmsnorm_layer *L, ag_tensor *x)
{
    return ag_rmsnorm(ctx, x, L->w, (ag_real)RMS_EPS);              // [..., C]
}
