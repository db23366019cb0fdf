/* kv_cache.c -- the KV cache for sampling: the keys and values of every position already fed
 * are kept, so feeding token number p costs one position instead of recomputing all p + 1.
 *
 * ag_gpt_forward_cached (gpt.c) runs the model's own blocks on the one new position p, with
 * opts.cache set. Every step of a block but attention acts on each position alone; attention
 * (attention.c) takes one step here, for layer l:
 *     K[l, :, p] = k,  V[l, :, p] = v                  (into the cache)
 *     k, v <- K[l, :, 0..p], V[l, :, 0..p]             [1,H,p+1,D]
 * and then attends as over a whole sequence, with no mask: p may see every cached position.
 * So the logits are those of a full forward over the prefix (tests/test_gpt.c checks it for
 * every configuration). No-grad only: sampling never needs a tape. */
#include <stdlib.h>
#include <string.h>
#include "kv_cache.h"

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

// --- the attention step ---

/* true when x is the [1,H,1,D] of one position of c's heads */
static bool one_position(const ag_kv_cache *c, const ag_tensor *x)
{
    return x->ndim == 4 && x->shape[0] == 1 && x->shape[1] == c->H && x->shape[2] == 1 && x->shape[3] == c->D;
}

void ag__kv_cache_extend(ag_ctx *ctx, ag_kv_cache *c, int l, ag_tensor **k, ag_tensor **v)
{
    ag_tensor *kp = *k, *vp = *v;                                   // [1,H,1,D] position p
    *k = *v = NULL;
    if (!kp || !vp) return;                                         /* an earlier error, kept in ctx */
    int p = c->len;
    if (ag_ctx_grad_enabled(ctx)) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "ag_mha_forward: a KV cache needs no-grad mode (ag_ctx_set_grad(ctx, false))");
        return;
    }
    if (l < 0 || l >= c->n_layer || p >= c->T_max || !one_position(c, kp) || !one_position(c, vp)) {
        char b[64];
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_mha_forward: k %s at layer %d does not fit a KV cache of %d layers, "
                    "%d heads of %d channels, %d of %d positions used", ag_shape_str(kp, b, sizeof b), l,
                    c->n_layer, c->H, c->D, p, c->T_max);
        return;
    }
    cache_store(c, c->k, l, p, kp);
    cache_store(c, c->v, l, p, vp);
    *k = cache_rows(ctx, c, c->k, l, p + 1);                        // [1,H,p+1,D]
    *v = cache_rows(ctx, c, c->v, l, p + 1);                        // [1,H,p+1,D]
}
