/* swiglu.c -- the SwiGLU feed-forward part: y = w_down(silu(w_gate(x)) * w_up(x)),
 * C -> hidden -> C (Shazeer 2020, "GLU Variants Improve Transformer"; LLaMA's FFN, here with
 * biases like the rest of MODEL.md). One branch (w_up) carries the values, the other (w_gate,
 * through SiLU) decides how much of each passes. Built from ops only: its gradient is the
 * ops' backwards chained by the tape, and the layer's gradcheck (tests/test_swiglu.c) proves it.
 * With hidden = 8C/3 it has about the parameters of the 4C GELU MLP. */
#include <stdio.h>
#include "nn.h"

ag_status ag_swiglu_init(ag_swiglu *S, ag_params *P, const char *prefix, int C, int hidden, double std,
                         double std_out)
{
    if (!S || !P || !prefix)
        return ag_params_fail(P, AG_ERR_ARG, "ag_swiglu_init: no layer, params or prefix");
    if (C <= 0 || hidden <= 0)
        return ag_params_fail(P, AG_ERR_ARG, "%s: C %d and hidden %d must be > 0", prefix, C, hidden);
    S->C = C;
    S->hidden = hidden;
    int n = snprintf(S->scope, sizeof S->scope, "%s", prefix);
    if (n < 0 || (size_t)n >= sizeof S->scope)
        return ag_params_fail(P, AG_ERR_ARG, "%s: prefix longer than %zu characters", prefix, sizeof S->scope - 1);
    struct { ag_linear_layer *L; const char *suffix; int in, out; double std; } lin[3] = {
        { &S->w_gate, "w_gate", C, hidden, std },
        { &S->w_up, "w_up", C, hidden, std },
        { &S->w_down, "w_down", hidden, C, std_out }, /* writes into the residual stream */
    };
    ag_status s = AG_OK;
    for (int i = 0; i < 3 && s == AG_OK; i++) {
        char name[128];
        s = ag_params_name(P, name, sizeof name, prefix, lin[i].suffix);
        if (s == AG_OK) s = ag_linear_layer_init(lin[i].L, P, name, lin[i].in, lin[i].out, true, lin[i].std);
    }
    return s;
}

ag_tensor *ag_swiglu_forward(ag_ctx *ctx, const ag_swiglu *S, ag_tensor *x)
{
    const char *outer = ag_ctx_scope(ctx);
    ag_ctx_set_scope(ctx, S->scope);
    ag_tensor *g = ag_linear_layer_forward(ctx, &S->w_gate, x);    // [...,hidden]
    g = ag_silu(ctx, g);                                            // [...,hidden]
    ag_tensor *u = ag_linear_layer_forward(ctx, &S->w_up, x);      // [...,hidden]
    ag_tensor *h = ag_mul(ctx, g, u);                               // [...,hidden]
    ag_tensor *y = ag_linear_layer_forward(ctx, &S->w_down, h);    // [...,C]
    ag_ctx_set_scope(ctx, outer);
    return y;
}
