/* kv_cache.h -- private to src/nn: the one step attention.c takes with a KV cache. */
#ifndef AG_NN_KV_CACHE_H
#define AG_NN_KV_CACHE_H

#include "nn.h"

/* *k, *v [1,H,1,D]: the keys and values of position c->len in layer l. Stores them in the cache
 * and replaces *k and *v with new tensors in ctx holding that layer's positions 0..c->len,
 * [1,H,len+1,D]. c->len is not advanced: ag_gpt_forward_cached does it once every layer has
 * stored. No-grad mode only. On an error (grad mode, shapes that do not fit the cache) the ctx
 * fails; either way NULL in, NULL out. */
void ag__kv_cache_extend(ag_ctx *ctx, ag_kv_cache *c, int l, ag_tensor **k, ag_tensor **v);

#endif
