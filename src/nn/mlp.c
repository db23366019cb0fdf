/* mlp.c -- the Transformer's feed-forward part, one of two kinds:
 *
 *   GELU (MODEL.md):     y = fc2(GELU(fc1(x)))              C -> 4C -> C, GELU in its tanh form
 *   SwiGLU (--mlp swiglu, Shazeer 2020; LLaMA):
 *                        y = w_down(SiLU(w_gate(x)) * w_up(x))   C -> F -> C
 *
 * SwiGLU has three matrices instead of two, so its width F = round(8C/3) keeps the parameter
 * count of the 4C GELU MLP (3 * C * 8C/3 = 2 * C * 4C): a comparison at the same size.
 * Built from ops only (the SwiGLU layer lives in swiglu.c). */
#include <limits.h>
#include <stdio.h>
#include "nn.h"

int ag_swiglu_width(int C) { return (8 * C + 1) / 3; }   /* 8C/3 rounded to the nearest */

/* The GELU MLP's layers: prefix.fc1 C -> 4C, prefix.fc2 4C -> C. */
static ag_status gelu_init(ag_mlp *M, ag_params *P, const char *prefix, int C, double std, double std_out)
{
    char name[128];
    ag_status s = ag_params_name(P, name, sizeof name, prefix, "fc1");
    if (s == AG_OK) s = ag_linear_layer_init(&M->fc1, P, name, C, 4 * C, true, std);
    if (s == AG_OK) s = ag_params_name(P, name, sizeof name, prefix, "fc2");
    /* fc2 writes into the residual stream, hence std_out (as w_o) */
    if (s == AG_OK) s = ag_linear_layer_init(&M->fc2, P, name, 4 * C, C, true, std_out);
    return s;
}

/* x [...,C] -> fc2(GELU(fc1(x))) [...,C], under the MLP's scope */
static ag_tensor *gelu_forward(ag_ctx *ctx, const ag_mlp *M, ag_tensor *x)
{
    const char *outer = ag_ctx_scope(ctx);
    ag_ctx_set_scope(ctx, M->scope);
    ag_tensor *h = ag_linear_layer_forward(ctx, &M->fc1, x);       // [...,4C]
    h = ag_gelu(ctx, h);                                            // [...,4C]
    ag_tensor *y = ag_linear_layer_forward(ctx, &M->fc2, h);       // [...,C]
    ag_ctx_set_scope(ctx, outer);
    return y;
}

ag_status ag_mlp_init(ag_mlp *M, ag_params *P, const char *prefix, int C, ag_mlp_kind kind, double std,
                      double std_out)
{
    if (!M || !P || !prefix)
        return ag_params_fail(P, AG_ERR_ARG, "ag_mlp_init: no layer, params or prefix");
    ag_error why = { 0 };   /* "mlp must be gelu or swiglu (got 7)", from the table */
    if (ag_switch_check(&ag_mlp_switch, (int)kind, &why)) return ag_params_fail(P, AG_ERR_ARG, "%s: %s", prefix, why.msg);
    if (C <= 0) return ag_params_fail(P, AG_ERR_ARG, "%s: n_embd %d must be > 0", prefix, C);
    if (C > INT_MAX / 8)   /* the widths 4C and 8C/3 must be ints */
        return ag_params_fail(P, AG_ERR_ARG, "%s: n_embd %d is too large for the MLP (%d at most)", prefix, C,
                              INT_MAX / 8);
    int n = snprintf(M->scope, sizeof M->scope, "%s", prefix);
    if (n < 0 || (size_t)n >= sizeof M->scope)
        return ag_params_fail(P, AG_ERR_ARG, "%s: prefix longer than %zu characters", prefix, sizeof M->scope - 1);
    M->kind = kind;
    switch (kind) {
    case AG_MLP_GELU: return gelu_init(M, P, prefix, C, std, std_out);
    case AG_MLP_SWIGLU: return ag_swiglu_init(&M->swiglu, P, prefix, C, ag_swiglu_width(C), std, std_out);
    }
    return ag_params_fail(P, AG_ERR_ARG, "%s: unknown mlp %d", prefix, (int)kind);   /* checked above */
}

ag_tensor *ag_mlp_forward(ag_ctx *ctx, const ag_mlp *M, ag_tensor *x)
{
    switch (M->kind) {
    case AG_MLP_GELU: return gelu_forward(ctx, M, x);                 // [...,C]
    case AG_MLP_SWIGLU: return ag_swiglu_forward(ctx, &M->swiglu, x); // [...,C]
    }
    return ag_ctx_fail(ctx, AG_ERR_ARG, "%s: unknown mlp %d", M->scope, (int)M->kind), NULL;
}
