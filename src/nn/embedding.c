/* embedding.c -- the Embedding layer: a [V, C] table whose rows are looked up by id.
 *
 * The gather and its scatter-add backward live in the op (tensor/ops/embedding.c). The table
 * is a 2-D weight, so AdamW decays it (MODEL.md: Linear and Embedding weights). */
#include <stdio.h>
#include "nn.h"

ag_status ag_embedding_layer_init(ag_embedding_layer *L, ag_params *P, const char *prefix, int V, int C, double std)
{
    if (!L || !P || !prefix)
        return ag_params_fail(P, AG_ERR_ARG, "ag_embedding_layer_init: no layer, params or prefix");
    if (V <= 0 || C <= 0) return ag_params_fail(P, AG_ERR_ARG, "%s: V %d and C %d must be > 0", prefix, V, C);
    L->V = V;
    L->C = C;
    int shape[2] = { V, C };
    return ag_params_register(&L->W, P, prefix, "weight", 2, shape, AG_INIT_NORMAL, std, true); // [V,C]
}

ag_tensor *ag_embedding_layer_forward(ag_ctx *ctx, const ag_embedding_layer *L, const int *ids, int B, int T)
{
    return ag_embedding(ctx, L->W, ids, B, T);                      // [B,T,C]
}
