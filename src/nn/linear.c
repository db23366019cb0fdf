/* linear.c -- the Linear layer: y = x W^T + b, W stored [out, in] (PyTorch layout).
 *
 * The math and its backward live in the op (tensor/ops/linear.c); this file only registers
 * the parameters under their MODEL.md names and calls the op. */
#include <stdio.h>
#include "nn.h"

// --- parameter registration ---

/* Registers prefix.suffix. AG_ERR_ARG for a name too long, a duplicate or a bad shape (all
 * checked first), else AG_ERR_NOMEM when ag_params_add still fails. */
static ag_status add_param(ag_tensor **t, ag_params *P, const char *prefix, const char *suffix, int ndim,
                           const int *shape, ag_init_kind init, double std, bool decay)
{
    char name[128];
    int n = snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    if (n < 0 || (size_t)n >= sizeof name || P->data || ag_params_find(P, name)) return AG_ERR_ARG;
    *t = ag_params_add(P, name, ndim, shape, init, std, decay);
    return *t ? AG_OK : AG_ERR_NOMEM;
}

// --- layer ---

ag_status ag_linear_layer_init(ag_linear_layer *L, ag_params *P, const char *prefix, int in, int out,
                               bool bias, double std)
{
    if (!L || !P || !prefix || in <= 0 || out <= 0) return AG_ERR_ARG;
    L->in = in;
    L->out = out;
    L->b = NULL;
    int sw[2] = { out, in }, sb[1] = { out };
    ag_status s = add_param(&L->W, P, prefix, "weight", 2, sw, AG_INIT_NORMAL, std, true); // [out,in]
    if (s == AG_OK && bias) s = add_param(&L->b, P, prefix, "bias", 1, sb, AG_INIT_ZEROS, 0, false); // [out]
    return s;
}

ag_tensor *ag_linear_layer_forward(ag_ctx *ctx, const ag_linear_layer *L, ag_tensor *x)
{
    return ag_linear(ctx, x, L->W, L->b);                           // [..., out]
}
