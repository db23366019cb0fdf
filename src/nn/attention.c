/* attention.c -- multi-head self-attention (MODEL.md), built from ops only:
 *
 *   q = x Wq^T + bq,  k = x Wk^T + bk,  v = x Wv^T + bv          [B,T,C]
 *   split into H heads of D = C/H channels                         [B,H,T,D]
 *   s = q k^T / sqrt(D), masked to -inf where mask == 0             [B,H,T,T]
 *   a = softmax(s) over the keys, then dropout                     [B,H,T,T]
 *   y = merge_heads(a v) Wo^T + bo                                  [B,T,C]
 *
 * Two switches change the formula, to see what the tutorials argue about: A->scale (1/sqrt(D)
 * by default; 1 with --no-scale, and the scores of wide heads grow like sqrt(D), so softmax
 * saturates) and A->mask_fill (-inf by default; a finite -1e9 gives weights exp(-1e9 - max) = 0
 * in float and double alike, so the same result on a causal mask).
 * Every backward comes from the ops' own. Reference: Vaswani et al. 2017, "Attention is all you
 * need", section 3.2; nanoGPT's CausalSelfAttention. */
#include <math.h>
#include <stdio.h>
#include "nn.h"

ag_status ag_mha_init(ag_mha *A, ag_params *P, const char *prefix, int C, int H, double std, double std_out)
{
    if (!A || !P || !prefix)
        return ag_params_fail(P, AG_ERR_ARG, "ag_mha_init: no layer, params or prefix");
    if (C <= 0 || H <= 0)
        return ag_params_fail(P, AG_ERR_ARG, "%s: n_embd %d and n_head %d must be > 0", prefix, C, H);
    if (C % H != 0) return ag_params_fail(P, AG_ERR_ARG, "%s: n_head %d does not divide n_embd %d", prefix, H, C);
    int n = snprintf(A->scope, sizeof A->scope, "%s", prefix);
    if (n < 0 || (size_t)n >= sizeof A->scope)
        return ag_params_fail(P, AG_ERR_ARG, "%s: prefix longer than %zu characters", prefix, sizeof A->scope - 1);
    A->C = C;
    A->H = H;
    A->composed = false;
    A->scale = (ag_real)(1.0 / sqrt((double)(C / H)));
    A->mask_fill = -INFINITY;
    A->record = NULL;
    char name[128];
    const char *sub[4] = { "w_q", "w_k", "w_v", "w_o" };
    ag_linear_layer *lin[4] = { &A->w_q, &A->w_k, &A->w_v, &A->w_o };
    ag_status s = AG_OK;
    for (int i = 0; i < 4 && s == AG_OK; i++) {
        s = ag_params_name(P, name, sizeof name, prefix, sub[i]);
        /* w_o writes into the residual stream: its smaller std keeps the sum's variance in check */
        if (s == AG_OK) s = ag_linear_layer_init(lin[i], P, name, C, C, true, i == 3 ? std_out : std);
    }
    return s;
}

/* true when mask is the [T,T] causal mask for q [B,T,C] (1 on and below the diagonal, 0 above) */
static bool is_causal(const ag_tensor *mask, const ag_tensor *q)
{
    if (!q || mask->ndim != 2 || q->ndim != 3 || mask->shape[0] != q->shape[1] || mask->shape[1] != q->shape[1])
        return false;
    int T = mask->shape[0];
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            if ((mask->data[i * T + j] != 0) != (j <= i)) return false;
    return true;
}

ag_tensor *ag_mha_forward(ag_ctx *ctx, const ag_mha *A, ag_tensor *x, ag_tensor *mask,
                          ag_real dropout, uint64_t seed, bool train)
{
    const char *outer = ag_ctx_scope(ctx);
    ag_ctx_set_scope(ctx, A->scope);
    ag_tensor *q = ag_linear_layer_forward(ctx, &A->w_q, x);       // [B,T,C]
    ag_tensor *k = ag_linear_layer_forward(ctx, &A->w_k, x);       // [B,T,C]
    ag_tensor *v = ag_linear_layer_forward(ctx, &A->w_v, x);       // [B,T,C]
    bool causal = mask && is_causal(mask, q);
    bool fusable = !mask || (causal && A->mask_fill == -INFINITY);
    if (!A->composed && !A->record && fusable && !(train && dropout > 0)) {
        /* the fused kernel: exactly the lines below in one op (src/tensor/ops/attention.c) */
        ag_tensor *o = ag_attention(ctx, q, k, v, A->H, A->scale, causal); // [B,T,C]
        ag_tensor *y = ag_linear_layer_forward(ctx, &A->w_o, o);   // [B,T,C]
        ag_ctx_set_scope(ctx, outer);
        return y;
    }
    q = ag_split_heads(ctx, q, A->H);                               // [B,H,T,D]
    k = ag_split_heads(ctx, k, A->H);                               // [B,H,T,D]
    v = ag_split_heads(ctx, v, A->H);                               // [B,H,T,D]
    ag_tensor *kT = ag_transpose(ctx, k);                           // [B,H,D,T]
    ag_tensor *s = ag_matmul(ctx, q, kT);                           // [B,H,T,T]
    s = ag_scale(ctx, s, A->scale);                                 // [B,H,T,T] 1/sqrt(D) unless --no-scale
    if (mask) s = ag_masked_fill(ctx, s, mask, A->mask_fill);       // [B,H,T,T] query t sees keys where mask[t,:] != 0
    ag_tensor *a = ag_softmax(ctx, s);                              // [B,H,T,T] each row sums to 1
    if (A->record) *A->record = a;                                  // for `char_lm attn` and --log-attn-stats
    a = ag_dropout(ctx, a, dropout, seed, train);                   // [B,H,T,T]
    ag_tensor *o = ag_matmul(ctx, a, v);                            // [B,H,T,D]
    o = ag_merge_heads(ctx, o);                                     // [B,T,C]
    ag_tensor *y = ag_linear_layer_forward(ctx, &A->w_o, o);       // [B,T,C]
    ag_ctx_set_scope(ctx, outer);
    return y;
}
