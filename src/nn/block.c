/* block.c -- one Transformer block, Pre-LN as MODEL.md (the default) or Post-LN, its norms
 * LayerNorm (MODEL.md) or RMSNorm, its MLP GELU (MODEL.md) or SwiGLU (mlp.c):
 *
 *   Pre-LN:   x = x + dropout(attn(LN1(x)))        [B,T,C]
 *             x = x + dropout(mlp(LN2(x)))         [B,T,C]
 *   Post-LN:  x = LN1(x + dropout(attn(x)))        [B,T,C]   (Vaswani et al. 2017)
 *             x = LN2(x + dropout(mlp(x)))         [B,T,C]
 *
 * Pre-LN (the norm inside the residual branch, as GPT-2) keeps an identity path from the
 * output to the input, so gradients reach the first block undiminished. Post-LN puts every
 * path through a norm; it trains too, but wants a warmup (Xiong et al. 2020, "On Layer
 * Normalization in the Transformer Architecture"). Built from ops only.
 * Sampling runs these same lines on one new position with opts->cache set: only attention looks
 * at other positions (through the KV cache), so the result is the full forward's. */
#include <stdio.h>
#include "../tensor/rng.h"
#include "nn.h"

/* Registers prefix.which ("ln1", "ln2") as the block's kind of norm: LayerNorm (weight, bias)
 * or RMSNorm (weight) under the same name. */
static ag_status norm_init(ag_norm_kind kind, ag_params *P, const char *prefix, const char *which,
                           ag_layernorm_layer *ln, ag_rmsnorm_layer *rms, int C)
{
    char name[128];
    ag_status s = ag_params_name(P, name, sizeof name, prefix, which);
    if (s != AG_OK) return s;
    switch (kind) {
    case AG_LAYERNORM: return ag_layernorm_layer_init(ln, P, name, C);
    case AG_RMSNORM: return ag_rmsnorm_layer_init(rms, P, name, C);
    case AG_NO_NORM: return AG_OK;   /* no parameters */
    }
    return ag_params_fail(P, AG_ERR_ARG, "%s: unknown norm %d", name, (int)kind);   /* checked before */
}

/* The block's norm of x [B,T,C]: LN1 or LN2 (LayerNorm or RMSNorm). */
static ag_tensor *norm(ag_ctx *ctx, const ag_block *Bk, int which, ag_tensor *x)
{
    switch (Bk->norm) {
    case AG_LAYERNORM: return ag_layernorm_layer_forward(ctx, which == 1 ? &Bk->ln1 : &Bk->ln2, x);  // [B,T,C]
    case AG_RMSNORM: return ag_rmsnorm_layer_forward(ctx, which == 1 ? &Bk->rms1 : &Bk->rms2, x);    // [B,T,C]
    case AG_NO_NORM: return x;                                                                        // [B,T,C]
    }
    return ag_ctx_fail(ctx, AG_ERR_ARG, "%s: unknown norm %d", Bk->scope, (int)Bk->norm), NULL;
}

ag_status ag_block_init(ag_block *Bk, ag_params *P, const char *prefix, int C, int H, const ag_block_opts *opts,
                        double std, double std_out)
{
    if (!Bk || !P || !prefix)
        return ag_params_fail(P, AG_ERR_ARG, "ag_block_init: no block, params or prefix");
    const ag_block_opts def = { AG_PRE_LN, AG_LAYERNORM, AG_MLP_GELU };
    if (!opts) opts = &def;
    ag_error why = { 0 };   /* "norm must be layernorm or rmsnorm (got 9)", from the tables */
    if (ag_switch_check(&ag_norm_position_switch, (int)opts->norm_position, &why) ||
        ag_switch_check(&ag_norm_switch, (int)opts->norm, &why))
        return ag_params_fail(P, AG_ERR_ARG, "%s: %s", prefix, why.msg);
    int n = snprintf(Bk->scope, sizeof Bk->scope, "%s", prefix);
    if (n < 0 || (size_t)n >= sizeof Bk->scope)
        return ag_params_fail(P, AG_ERR_ARG, "%s: prefix longer than %zu characters", prefix, sizeof Bk->scope - 1);
    Bk->norm_position = opts->norm_position;
    Bk->norm = opts->norm;
    Bk->ln1 = Bk->ln2 = (ag_layernorm_layer){ 0 };
    Bk->rms1 = Bk->rms2 = (ag_rmsnorm_layer){ 0 };
    char name[128];
    /* registration order is MODEL.md's: ln1, attn, ln2, mlp */
    ag_status s = norm_init(Bk->norm, P, prefix, "ln1", &Bk->ln1, &Bk->rms1, C);
    if (s == AG_OK) s = ag_params_name(P, name, sizeof name, prefix, "attn");
    if (s == AG_OK) s = ag_mha_init(&Bk->attn, P, name, C, H, std, std_out);
    if (s == AG_OK) s = norm_init(Bk->norm, P, prefix, "ln2", &Bk->ln2, &Bk->rms2, C);
    if (s == AG_OK) s = ag_params_name(P, name, sizeof name, prefix, "mlp");
    if (s == AG_OK) s = ag_mlp_init(&Bk->mlp, P, name, C, opts->mlp, std, std_out);
    return s;
}

ag_tensor *ag_block_forward(ag_ctx *ctx, const ag_block *Bk, ag_tensor *x, ag_tensor *mask, ag_real dropout,
                            const ag_forward_opts *opts)
{
    static const ag_forward_opts eval = { 0 };
    if (!opts) opts = &eval;
    ag_forward_opts at = *opts;                     /* the attention weights get their own seed */
    /* a distinct dropout seed per site: the attention weights and the two residual branches
     * never share a mask */
    at.seed = ag_seed_mix(opts->seed, 0);
    uint64_t seed1 = ag_seed_mix(opts->seed, 1), seed2 = ag_seed_mix(opts->seed, 2);
    bool train = opts->train;
    const char *outer = ag_ctx_scope(ctx);
    ag_ctx_set_scope(ctx, Bk->scope);
    ag_tensor *h;
    switch (Bk->norm_position) {
    case AG_PRE_LN:
        h = norm(ctx, Bk, 1, x);                                                // [B,T,C]
        h = ag_mha_forward(ctx, &Bk->attn, h, mask, dropout, &at);                     // [B,T,C]
        h = ag_dropout(ctx, h, dropout, seed1, train);                                 // [B,T,C]
        x = ag_add(ctx, x, h);                                                         // [B,T,C] residual
        h = norm(ctx, Bk, 2, x);                                                // [B,T,C]
        h = ag_mlp_forward(ctx, &Bk->mlp, h);                                          // [B,T,C]
        h = ag_dropout(ctx, h, dropout, seed2, train);                                 // [B,T,C]
        x = ag_add(ctx, x, h);                                                         // [B,T,C] residual
        break;
    case AG_POST_LN:
        h = ag_mha_forward(ctx, &Bk->attn, x, mask, dropout, &at);                     // [B,T,C]
        h = ag_dropout(ctx, h, dropout, seed1, train);                                 // [B,T,C]
        x = norm(ctx, Bk, 1, ag_add(ctx, x, h));                                // [B,T,C] LN1(x + attn(x))
        h = ag_mlp_forward(ctx, &Bk->mlp, x);                                          // [B,T,C]
        h = ag_dropout(ctx, h, dropout, seed2, train);                                 // [B,T,C]
        x = norm(ctx, Bk, 2, ag_add(ctx, x, h));                                // [B,T,C] LN2(x + mlp(x))
        break;
    }
    ag_ctx_set_scope(ctx, outer);
    return x;
}
