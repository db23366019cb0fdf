/* layernorm.c -- the LayerNorm layer over the last dim: weight ones, bias zeros, eps 1e-5
 * (MODEL.md). The normalisation and its backward live in the op (tensor/ops/layernorm.c).
 * Neither parameter is decayed. */
#include <stdio.h>
#include "nn.h"

#define LN_EPS 1e-5

/* Registers prefix.suffix as a [C] vector. AG_ERR_ARG for a bad name, AG_ERR_NOMEM otherwise. */
static ag_status add_vector(ag_tensor **t, ag_params *P, const char *prefix, const char *suffix, int C,
                            ag_init_kind init)
{
    char name[128];
    int n = snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    if (n < 0 || (size_t)n >= sizeof name || P->data || ag_params_find(P, name)) return AG_ERR_ARG;
    *t = ag_params_add(P, name, 1, &C, init, 0, false);
    return *t ? AG_OK : AG_ERR_NOMEM;
}

ag_status ag_layernorm_layer_init(ag_layernorm_layer *L, ag_params *P, const char *prefix, int C)
{
    if (!L || !P || !prefix || C <= 0) return AG_ERR_ARG;
    L->C = C;
    L->b = NULL;
    ag_status s = add_vector(&L->w, P, prefix, "weight", C, AG_INIT_ONES);   // [C]
    if (s == AG_OK) s = add_vector(&L->b, P, prefix, "bias", C, AG_INIT_ZEROS); // [C]
    return s;
}

ag_tensor *ag_layernorm_layer_forward(ag_ctx *ctx, const ag_layernorm_layer *L, ag_tensor *x)
{
    return ag_layernorm(ctx, x, L->w, L->b, (ag_real)LN_EPS);       // [..., C]
}
