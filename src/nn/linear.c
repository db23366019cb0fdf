/* linear.c -- the Linear layer: y = x W^T + b, W stored [out, in] (PyTorch layout).
 *
 * The math and its backward live in the op (tensor/ops/linear.c); this file only registers
 * the parameters under their MODEL.md names and calls the op. */
#include <stdio.h>
#include "nn.h"

ag_status ag_linear_layer_init(ag_linear_layer *L, ag_params *P, const char *prefix, int in, int out,
                               bool bias, double std)
{
    if (!L || !P || !prefix)
        return ag_params_fail(P, AG_ERR_ARG, "ag_linear_layer_init: no layer, params or prefix");
    if (in <= 0 || out <= 0)
        return ag_params_fail(P, AG_ERR_ARG, "%s: in %d and out %d must be > 0", prefix, in, out);
    L->in = in;
    L->out = out;
    L->b = NULL;
    int sw[2] = { out, in }, sb[1] = { out };
    ag_status s = ag_params_register(&L->W, P, prefix, "weight", 2, sw, AG_INIT_NORMAL, std, true); // [out,in]
    if (s == AG_OK) s = ag_params_set_hidden(P, L->W->name, true);   /* a model unsets its output head's */
    if (s == AG_OK && bias) s = ag_params_register(&L->b, P, prefix, "bias", 1, sb, AG_INIT_ZEROS, 0, false); // [out]
    return s;
}

ag_tensor *ag_linear_layer_forward(ag_ctx *ctx, const ag_linear_layer *L, ag_tensor *x)
{
    return ag_linear(ctx, x, L->W, L->b);                           // [..., out]
}
