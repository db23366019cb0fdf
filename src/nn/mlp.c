/* mlp.c -- the Transformer's feed-forward part: y = fc2(GELU(fc1(x))), C -> 4C -> C
 * (MODEL.md; GELU in its tanh form). Built from ops only. */
#include <stdio.h>
#include "nn.h"

ag_status ag_mlp_init(ag_mlp *M, ag_params *P, const char *prefix, int C, double std, double std_out)
{
    if (!M || !P || !prefix || C <= 0) return AG_ERR_ARG;
    int n = snprintf(M->scope, sizeof M->scope, "%s", prefix);
    if (n < 0 || (size_t)n >= sizeof M->scope) return AG_ERR_ARG;
    char name[128];
    n = snprintf(name, sizeof name, "%s.fc1", prefix);
    if (n < 0 || (size_t)n >= sizeof name) return AG_ERR_ARG;
    ag_status s = ag_linear_layer_init(&M->fc1, P, name, C, 4 * C, true, std);
    if (s != AG_OK) return s;
    snprintf(name, sizeof name, "%s.fc2", prefix);
    /* fc2 writes into the residual stream, hence std_out (as w_o) */
    return ag_linear_layer_init(&M->fc2, P, name, 4 * C, C, true, std_out);
}

ag_tensor *ag_mlp_forward(ag_ctx *ctx, const ag_mlp *M, ag_tensor *x)
{
    const char *outer = ag_ctx_scope(ctx);
    ag_ctx_set_scope(ctx, M->scope);
    ag_tensor *h = ag_linear_layer_forward(ctx, &M->fc1, x);       // [...,4C]
    h = ag_gelu(ctx, h);                                            // [...,4C]
    ag_tensor *y = ag_linear_layer_forward(ctx, &M->fc2, h);       // [...,C]
    ag_ctx_set_scope(ctx, outer);
    return y;
}
