/* attention.c -- multi-head self-attention (MODEL.md), built from ops only:
 *
 *   q = x Wq^T + bq,  k = x Wk^T + bk,  v = x Wv^T + bv          [B,T,C]
 *   split into H heads of D = C/H channels                         [B,H,T,D]
 *   s = q k^T / sqrt(D), masked to -inf where mask == 0             [B,H,T,T]
 *   a = softmax(s) over the keys, then dropout                     [B,H,T,T]
 *   y = merge_heads(a v) Wo^T + bo                                  [B,T,C]
 *
 * attend() is the lines from the split to merge_heads(a v), one op each: the one attention to
 * read, and the reference; every backward comes from the ops' own.
 * A batch of sequences of different lengths, padded to T, comes with opts->key_padding [B,T]
 * (1 = a real token, 0 = padding): the mask becomes ag_key_padding_mask(key_padding, mask)
 * [B,1,T,T], so no query attends to padding, and the scores are masked op by op.
 * Two switches change the formula, to see what the tutorials argue about: A->scale (1/sqrt(D)
 * by default; 1 with --no-scale, and the scores of wide heads grow like sqrt(D), so softmax
 * saturates) and A->mask_fill (-inf by default; a finite -1e9 gives weights exp(-1e9 - max) = 0
 * in float and double alike, so the same result on a causal mask).
 * A->rope (--rope) turns q and k by their position (ag_rope, ops/rope.c) before the scores:
 * q_p . k_s then depends on p - s, the distance, beside what pos_emb added to x.
 * Sampling with a KV cache takes the same lines for one new position p: its k and v join the
 * cache (kv_cache.c), and the query attends over the cached k and v of positions 0..p, with no
 * mask since p may see them all.
 * Speed: attend() has a fast twin in the fast kernel table (src/tensor/kernel.h), the fused
 * ag_fast_attention (src/tensor/fast/attention.c: the same lines as one op on gemm, no split or
 * merge copy, masked scores skipped), proven equal by tests/test_attention.c. fusable() says
 * when it computes exactly what attend() would; the mask's kind (ag_is_causal_mask) tells
 * without reading it. The reference table has none: attend() runs.
 * Reference: Vaswani et al. 2017, "Attention is all you need", section 3.2; nanoGPT's
 * CausalSelfAttention. */
#include <math.h>
#include <stdio.h>
#include "../tensor/kernel.h"
#include "kv_cache.h"
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
    A->rope = false;
    char name[128];
    const char *sub[4] = { "w_q", "w_k", "w_v", "w_o" };
    ag_linear_layer *lin[4] = { &A->w_q, &A->w_k, &A->w_v, &A->w_o };
    ag_status s = AG_OK;
    for (int i = 0; i < 4 && s == AG_OK; i++) {
        s = ag_params_name(P, name, sizeof name, prefix, sub[i]);
        /* w_o writes into the residual stream: its smaller std keeps the sum's variance in check */
        if (s == AG_OK) s = ag_linear_layer_init(lin[i], P, name, C, C, true, i == 3 ? std_out : std);
    }
    /* The keys' bias takes no gradient: it adds q_i . b_k to every score of row i, and softmax
     * forgets a constant added to a whole row, so its gradient is 0 in exact arithmetic. What a
     * backward would leave there is rounding noise, which Adam divides by its eps into real steps
     * (the bias wandered 1e-3 in 1,500 steps, a path set by the order of the sums, so runs on N
     * ranks parted there: docs/distributed.md). Anything between the scores and the softmax that
     * is not a shift of the whole row (a softcap, a norm on k) gives b_k a real gradient: then
     * drop this line. RoPE is one (b_k turned by key position s shifts each key differently):
     * ag_gpt_new turns the gradient back on with cfg->rope. */
    if (s == AG_OK) A->w_k.b->requires_grad = false;
    return s;
}

/* Attention op by op: q, k, v [B,T,C] -> [B,T,C]. With a cache (the one new position, B = T = 1)
 * k and v join the cache, and the query attends over every cached position: position p may
 * see 0..p, so there is no mask. */
static ag_tensor *attend(ag_ctx *ctx, const ag_mha *A, ag_tensor *q, ag_tensor *k, ag_tensor *v, ag_tensor *mask,
                         ag_real dropout, const ag_forward_opts *opt)
{
    q = ag_split_heads(ctx, q, A->H);                               // [B,H,T,D]
    k = ag_split_heads(ctx, k, A->H);                               // [B,H,T,D]
    v = ag_split_heads(ctx, v, A->H);                               // [B,H,T,D]
    if (opt->cache) ag__kv_cache_extend(ctx, opt->cache, opt->layer, &k, &v); // [1,H,p+1,D] positions 0..p
    ag_tensor *kT = ag_transpose(ctx, k);                           // [B,H,D,T]
    ag_tensor *s = ag_matmul(ctx, q, kT);                           // [B,H,T,T]
    s = ag_scale(ctx, s, A->scale);                                 // [B,H,T,T] 1/sqrt(D) unless --no-scale
    if (opt->key_padding) mask = ag_key_padding_mask(ctx, opt->key_padding, mask); // [B,1,T,T] and no padded key
    if (mask) s = ag_masked_fill(ctx, s, mask, A->mask_fill);       // [B,H,T,T] query t sees keys where mask[t,:] != 0
    ag_tensor *a = ag_softmax(ctx, s);                              // [B,H,T,T] each row sums to 1
    if (opt->record_attention) opt->record_attention[opt->layer] = a; // for `char_lm attn` and --log-attn-stats
    a = ag_dropout(ctx, a, dropout, opt->seed, opt->train);         // [B,H,T,T]
    ag_tensor *o = ag_matmul(ctx, a, v);                            // [B,H,T,D]
    return ag_merge_heads(ctx, o);                                  // [B,T,C]
}

/* The fast twin computes exactly attend()'s lines when none of them is wanted on its own: op by
 * op not asked for, nothing recorded, no cache, no padding, q, k, v of one [B,T,C] shape, and no
 * mask or ag_causal_mask's own for this T, filled with -inf (dropout on the weights: it draws
 * ag_dropout's mask). The mask's kind is known without a look at its T x T numbers; any other
 * mask takes attend(). */
static bool fusable(const ag_mha *A, const ag_tensor *q, const ag_tensor *k, const ag_tensor *v,
                    const ag_tensor *mask, const ag_forward_opts *opt)
{
    if (A->composed || opt->composed_attention || opt->record_attention || opt->cache || opt->key_padding)
        return false;
    if (!q || !k || !v || q->ndim != 3 || !ag_same_shape(q, k) || !ag_same_shape(q, v) || A->H <= 0 ||
        q->shape[2] % A->H != 0)
        return false; /* attend() then says what is wrong */
    return !mask || (ag_is_causal_mask(mask, q->shape[1]) && A->mask_fill == -INFINITY);
}

/* q, k, v [B,T,C] -> [B,T,C]: attend(), or its fast twin where it computes the same */
static ag_tensor *attention(ag_ctx *ctx, const ag_mha *A, ag_tensor *q, ag_tensor *k, ag_tensor *v,
                            ag_tensor *mask, ag_real dropout, const ag_forward_opts *opt)
{
    ag_real p = opt->train ? dropout : 0;   /* evaluation: no dropout */
    ag_attention_fn fused = ag__kernels(ctx)->attention;  /* the fast table's; the reference has none */
    if (fused && fusable(A, q, k, v, mask, opt))
        return fused(ctx, q, k, v, A->H, A->scale, mask != NULL, p, opt->seed);             // [B,T,C]
    return attend(ctx, A, q, k, v, mask, dropout, opt);                                      // [B,T,C]
}

ag_tensor *ag_attention(ag_ctx *ctx, ag_tensor *q, ag_tensor *k, ag_tensor *v, int H, ag_real scale,
                        ag_tensor *mask)
{
    static const ag_forward_opts eval = { 0 };
    const ag_mha A = { .H = H, .scale = scale, .mask_fill = -INFINITY }; /* attention's knobs, no weights */
    return attention(ctx, &A, q, k, v, mask, 0, &eval);                  // [B,T,C]
}

/* false (and the error in ctx) when opts->key_padding cannot go with x [B,T,C] */
static bool key_padding_fits(ag_ctx *ctx, const ag_tensor *x, const ag_forward_opts *opts)
{
    const ag_tensor *kp = opts->key_padding;
    if (!kp || !x || ag_ctx_status(ctx) != AG_OK) return true; /* nothing to check, or an error already */
    if (opts->cache) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "ag_mha_forward: key_padding with a KV cache (one position at a time)");
        return false;
    }
    if (kp->ndim != 2 || x->ndim != 3 || kp->shape[0] != x->shape[0] || kp->shape[1] != x->shape[1]) {
        char sk[48], sx[48];
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_mha_forward: key_padding %s is not [B,T] of x %s",
                    ag_shape_str(kp, sk, sizeof sk), ag_shape_str(x, sx, sizeof sx));
        return false;
    }
    return true;
}

ag_tensor *ag_mha_forward(ag_ctx *ctx, const ag_mha *A, ag_tensor *x, ag_tensor *mask, ag_real dropout,
                          const ag_forward_opts *opts)
{
    static const ag_forward_opts eval = { 0 };
    if (!opts) opts = &eval;
    if (!key_padding_fits(ctx, x, opts)) return NULL;
    const char *outer = ag_ctx_scope(ctx);
    ag_ctx_set_scope(ctx, A->scope);
    ag_tensor *q = ag_linear_layer_forward(ctx, &A->w_q, x);       // [B,T,C]
    ag_tensor *k = ag_linear_layer_forward(ctx, &A->w_k, x);       // [B,T,C]
    ag_tensor *v = ag_linear_layer_forward(ctx, &A->w_v, x);       // [B,T,C]
    if (A->rope) {  /* the positions of x: 0..T-1, or the cached one's */
        int first = opts->cache ? opts->cache->len : 0;
        q = ag_rope(ctx, q, A->H, first);                           // [B,T,C] turned by position
        k = ag_rope(ctx, k, A->H, first);                           // [B,T,C]
    }
    ag_tensor *o = attention(ctx, A, q, k, v, mask, dropout, opts); // [B,T,C]
    ag_tensor *y = ag_linear_layer_forward(ctx, &A->w_o, o);       // [B,T,C]
    ag_ctx_set_scope(ctx, outer);
    return y;
}
