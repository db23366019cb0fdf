/* embedding.c -- the Embedding layer: a [V, C] table whose rows are looked up by id.
 *
 * The gather and its scatter-add backward live in the op (tensor/ops/embedding.c). The table
 * is a 2-D weight, so AdamW decays it (MODEL.md: Linear and Embedding weights). */
#include <stdio.h>
#include "nn.h"

ag_status ag_embedding_layer_init(ag_embedding_layer *L, ag_params *P, const char *prefix, int V, int C, double std)
{
    if (!L || !P || !prefix || V <= 0 || C <= 0) return AG_ERR_ARG;
    char name[128];
    int n = snprintf(name, sizeof name, "%s.weight", prefix);
    if (n < 0 || (size_t)n >= sizeof name || P->data || ag_params_find(P, name)) return AG_ERR_ARG;
    int shape[2] = { V, C };
    L->W = ag_params_add(P, name, 2, shape, AG_INIT_NORMAL, std, true); // [V,C]
    L->V = V;
    L->C = C;
    return L->W ? AG_OK : AG_ERR_NOMEM;
}

ag_tensor *ag_embedding_layer_forward(ag_ctx *ctx, const ag_embedding_layer *L, const int *ids, int B, int T)
{
    return ag_embedding(ctx, L->W, ids, B, T);                      // [B,T,C]
}
