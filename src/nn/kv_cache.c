/* kv_cache.c -- incremental decoding: the keys and values of every position already fed are
 * kept, so feeding token number p costs one position instead of recomputing all p + 1.
 *
 * For the new position p only:   q, k, v = w_q(h), w_k(h), w_v(h)               [1,H,1,D]
 *                                 K[:, p] = k,  V[:, p] = v          (into the cache)
 *                                 y = w_o(merge(softmax(q K[0..p]^T / sqrt(D)) V[0..p]))
 * No causal mask is needed: position p may see every cached position 0..p. Everything else
 * (embeddings, LayerNorms, MLP, residuals, lm_head) acts on the one position exactly as in
 * ag_gpt_forward, so the logits are the same as a full recompute over the prefix (a test
 * checks it). Runs in no-grad mode: sampling never needs a tape. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "nn.h"

// --- lifecycle ---

ag_kv_cache *ag_kv_cache_new(const ag_gpt *g)
{
    ag_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n_layer = g->cfg.n_layer;
    c->H = g->cfg.n_head;
    c->D = g->cfg.n_embd / g->cfg.n_head;
    c->T_max = g->cfg.block_size;
    size_t n = (size_t)c->n_layer * c->H * c->T_max * c->D;
    c->k = calloc(n, sizeof(ag_real));                              // [n_layer,H,T_max,D]
    c->v = calloc(n, sizeof(ag_real));                              // [n_layer,H,T_max,D]
    if (!c->k || !c->v) {
        ag_kv_cache_free(c);
        return NULL;
    }
    return c;
}

void ag_kv_cache_free(ag_kv_cache *c)
{
    if (!c) return;
    free(c->k);
    free(c->v);
    free(c);
}

void ag_kv_cache_clear(ag_kv_cache *c)
{
    if (c) c->len = 0;
}

// --- cache rows ---

/* The cache's rows of layer l for head h start here: [T_max, D] */
static ag_real *cache_head(const ag_kv_cache *c, ag_real *buf, int l, int h)
{
    return buf + (((size_t)l * c->H + h) * c->T_max) * c->D;
}

/* Writes x [1,H,1,D] (one position of every head) into row p of layer l. */
static void cache_store(ag_kv_cache *c, ag_real *buf, int l, int p, const ag_tensor *x)
{
    for (int h = 0; h < c->H; h++)
        memcpy(cache_head(c, buf, l, h) + (size_t)p * c->D, x->data + (size_t)h * c->D, (size_t)c->D * sizeof(ag_real));
}

/* A new [1,H,Tk,D] tensor holding positions 0..Tk-1 of layer l (a copy, so it is contiguous). */
static ag_tensor *cache_rows(ag_ctx *ctx, ag_kv_cache *c, ag_real *buf, int l, int Tk)
{
    ag_tensor *y = ag_tensor_new4(ctx, 1, c->H, Tk, c->D);          // [1,H,Tk,D]
    if (!y) return NULL;
    for (int h = 0; h < c->H; h++)
        memcpy(y->data + (size_t)h * Tk * c->D, cache_head(c, buf, l, h), (size_t)Tk * c->D * sizeof(ag_real));
    return y;
}

// --- attention over the cache ---

/* x [1,1,C] at position p = c->len -> [1,1,C]; stores this position's k and v. */
static ag_tensor *mha_cached(ag_ctx *ctx, const ag_mha *A, ag_kv_cache *c, int l, ag_tensor *x)
{
    int p = c->len;
    ag_tensor *q = ag_linear_layer_forward(ctx, &A->w_q, x);       // [1,1,C]
    ag_tensor *k = ag_linear_layer_forward(ctx, &A->w_k, x);       // [1,1,C]
    ag_tensor *v = ag_linear_layer_forward(ctx, &A->w_v, x);       // [1,1,C]
    q = ag_split_heads(ctx, q, A->H);                               // [1,H,1,D]
    k = ag_split_heads(ctx, k, A->H);                               // [1,H,1,D]
    v = ag_split_heads(ctx, v, A->H);                               // [1,H,1,D]
    if (!q || !k || !v) return NULL;
    cache_store(c, c->k, l, p, k);
    cache_store(c, c->v, l, p, v);
    ag_tensor *K = cache_rows(ctx, c, c->k, l, p + 1);              // [1,H,p+1,D]
    ag_tensor *V = cache_rows(ctx, c, c->v, l, p + 1);              // [1,H,p+1,D]
    ag_tensor *s = ag_matmul(ctx, q, ag_transpose(ctx, K));         // [1,H,1,p+1]
    s = ag_scale(ctx, s, A->scale);                                 // [1,H,1,p+1] 1/sqrt(D) or 1
    ag_tensor *a = ag_softmax(ctx, s);                              // [1,H,1,p+1]
    ag_tensor *o = ag_matmul(ctx, a, V);                            // [1,H,1,D]
    o = ag_merge_heads(ctx, o);                                     // [1,1,C]
    return ag_linear_layer_forward(ctx, &A->w_o, o);                // [1,1,C]
}

// --- one token through the whole model ---

ag_tensor *ag_gpt_forward_cached(ag_ctx *ctx, ag_gpt *g, ag_kv_cache *cache, int id)
{
    if (ag_ctx_status(ctx) != AG_OK) return NULL;
    if (!g || !cache) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "ag_gpt_forward_cached: no model or no cache");
        return NULL;
    }
    if (!ag_gpt_cache_exact(g)) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "ag_gpt_forward_cached: this model's configuration (post-LN or RMSNorm) "
                    "has no cached path; use ag_gpt_forward");
        return NULL;
    }
    int p = cache->len;
    if (p >= g->cfg.block_size) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "ag_gpt_forward_cached: the cache is full (block_size %d)", g->cfg.block_size);
        return NULL;
    }
    bool grad_was_on = ag_ctx_grad_enabled(ctx);
    const char *outer = ag_ctx_scope(ctx);
    ag_ctx_set_grad(ctx, false);

    ag_ctx_set_scope(ctx, "tok_emb");
    ag_tensor *tok = ag_embedding_layer_forward(ctx, &g->tok_emb, &id, 1, 1);  // [1,1,C]
    ag_ctx_set_scope(ctx, "pos_emb");
    ag_tensor *pe = ag_embedding_layer_forward(ctx, &g->pos_emb, &p, 1, 1);    // [1,1,C]
    ag_tensor *x = ag_add(ctx, tok, pe);                                       // [1,1,C]
    for (int l = 0; l < g->cfg.n_layer; l++) {
        const ag_block *Bk = &g->blocks[l];
        ag_ctx_set_scope(ctx, Bk->scope);
        ag_tensor *h = ag_layernorm_layer_forward(ctx, &Bk->ln1, x);           // [1,1,C]
        ag_ctx_set_scope(ctx, Bk->attn.scope);
        h = mha_cached(ctx, &Bk->attn, cache, l, h);                           // [1,1,C]
        ag_ctx_set_scope(ctx, Bk->scope);
        x = ag_add(ctx, x, h);                                                 // [1,1,C] residual
        h = ag_layernorm_layer_forward(ctx, &Bk->ln2, x);                      // [1,1,C]
        h = ag_mlp_forward(ctx, &Bk->mlp, h);                                  // [1,1,C]
        x = ag_add(ctx, x, h);                                                 // [1,1,C] residual
    }
    ag_ctx_set_scope(ctx, "ln_f");
    x = ag_layernorm_layer_forward(ctx, &g->ln_f, x);                          // [1,1,C]
    ag_ctx_set_scope(ctx, "lm_head");
    ag_tensor *logits = ag_linear_layer_forward(ctx, &g->lm_head, x);          // [1,1,V]
    logits = ag_reshape(ctx, logits, 1, &g->cfg.vocab_size);                   // [V]

    ag_ctx_set_scope(ctx, outer);
    ag_ctx_set_grad(ctx, grad_was_on);
    if (ag_ctx_status(ctx) != AG_OK) return NULL;
    cache->len = p + 1;
    return logits;
}
