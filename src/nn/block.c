/* block.c -- one Pre-LN Transformer block (MODEL.md):
 *
 *   x = x + dropout(attn(LN1(x)))        [B,T,C]
 *   x = x + dropout(mlp(LN2(x)))         [B,T,C]
 *
 * Pre-LN (the norm inside the residual branch, as GPT-2) keeps an identity path from the
 * output to the input, so gradients reach the first block undiminished. Built from ops only. */
#include <stdio.h>
#include "nn.h"

/* A distinct dropout seed for each site of the block (splitmix64's finaliser on seed and site),
 * so the attention weights and the two residual branches never share a mask. */
static uint64_t site_seed(uint64_t seed, uint64_t site)
{
    uint64_t z = seed + (site + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

ag_status ag_block_init(ag_block *Bk, ag_params *P, const char *prefix, int C, int H, double std, double std_out)
{
    if (!Bk || !P || !prefix) return AG_ERR_ARG;
    int n = snprintf(Bk->scope, sizeof Bk->scope, "%s", prefix);
    if (n < 0 || (size_t)n >= sizeof Bk->scope) return AG_ERR_ARG;
    char name[128];
    /* registration order is MODEL.md's: ln1, attn, ln2, mlp */
    snprintf(name, sizeof name, "%s.ln1", prefix);
    ag_status s = ag_layernorm_layer_init(&Bk->ln1, P, name, C);
    snprintf(name, sizeof name, "%s.attn", prefix);
    if (s == AG_OK) s = ag_mha_init(&Bk->attn, P, name, C, H, std, std_out);
    snprintf(name, sizeof name, "%s.ln2", prefix);
    if (s == AG_OK) s = ag_layernorm_layer_init(&Bk->ln2, P, name, C);
    snprintf(name, sizeof name, "%s.mlp", prefix);
    if (s == AG_OK) s = ag_mlp_init(&Bk->mlp, P, name, C, std, std_out);
    return s;
}

ag_tensor *ag_block_forward(ag_ctx *ctx, const ag_block *Bk, ag_tensor *x, ag_tensor *mask,
                            ag_real dropout, uint64_t seed, bool train)
{
    const char *outer = ag_ctx_scope(ctx);
    ag_ctx_set_scope(ctx, Bk->scope);
    ag_tensor *h = ag_layernorm_layer_forward(ctx, &Bk->ln1, x);                   // [B,T,C]
    h = ag_mha_forward(ctx, &Bk->attn, h, mask, dropout, site_seed(seed, 0), train); // [B,T,C]
    h = ag_dropout(ctx, h, dropout, site_seed(seed, 1), train);                    // [B,T,C]
    x = ag_add(ctx, x, h);                                                         // [B,T,C] residual
    h = ag_layernorm_layer_forward(ctx, &Bk->ln2, x);                              // [B,T,C]
    h = ag_mlp_forward(ctx, &Bk->mlp, h);                                          // [B,T,C]
    h = ag_dropout(ctx, h, dropout, site_seed(seed, 2), train);                    // [B,T,C]
    x = ag_add(ctx, x, h);                                                         // [B,T,C] residual
    ag_ctx_set_scope(ctx, outer);
    return x;
}
