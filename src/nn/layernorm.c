/* layernorm.c -- the LayerNorm layer over the last dim: weight ones, bias zeros, eps 1e-5
 * (MODEL.md). The normalisation and its backward live in the op (tensor/ops/layernorm.c).
 * Neither parameter is decayed. */
#include <stdio.h>
#include "nn.h"

#define LN_EPS 1e-5

ag_status ag_layernorm_layer_init(ag_layernorm_layer *L, ag_params *P, const char *prefix, int C)
{
    if (!L || !P || !prefix)
        return ag_params_fail(P, AG_ERR_ARG, "ag_layernorm_layer_init: no layer, params or prefix");
    if (C <= 0) return ag_params_fail(P, AG_ERR_ARG, "%s: C %d must be > 0", prefix, C);
    L->C = C;
    L->b = NULL;
    ag_status s = ag_params_register(&L->w, P, prefix, "weight", 1, &C, AG_INIT_ONES, 0, false);   // [C]
    if (s == AG_OK) s = ag_params_register(&L->b, P, prefix, "bias", 1, &C, AG_INIT_ZEROS, 0, false); // [C]
    return s;
}

ag_tensor *ag_layernorm_layer_forward(ag_ctx *ctx, const ag_layernorm_layer *L, ag_tensor *x)
{
    return ag_layernorm(ctx, x, L->w, L->b, (ag_real)LN_EPS);       // [..., C]
}
