/* gpt.c -- the GPT of MODEL.md: token + learned position embeddings, n_layer Pre-LN blocks,
 * a final LayerNorm and an untied lm_head; the loss is the mean cross-entropy over all B*T
 * positions.
 *
 *   x      = dropout(tok_emb[ids] + pos_emb[0..T-1])      [B,T,C]
 *   x      = block_i(x, causal mask)   for i < n_layer     [B,T,C]
 *   logits = lm_head(ln_f(x))                              [B,T,V]
 *
 * Parameters are registered in MODEL.md's order under its names, and initialised as it says:
 * Linear/Embedding weights N(0, 0.02), w_o and fc2 weights N(0, 0.02/sqrt(2 n_layer)) (GPT-2:
 * each block adds two branches to the residual stream), biases 0, LayerNorm weight 1, bias 0.
 * With cfg->init == AG_WEIGHTS_XAVIER every Linear weight (w_q, w_k, w_v, w_o, the MLP's and
 * lm_head) is drawn again, uniform in [-a, a] with a = sqrt(6 / (fan_in + fan_out)) (Glorot &
 * Bengio 2010; PyTorch's xavier_uniform_), which keeps the variance of activations and of
 * gradients about equal from layer to layer; embeddings keep N(0, 0.02).
 * The other switches of ag_gpt_config go to the blocks (norm position, norm, MLP) and to the
 * attention layers (scale, mask fill). With Post-LN the final ln_f is kept, so every
 * configuration has the same parameter names; after a Post-LN block it is nearly an affine map.
 * ag_gpt_forward_cached runs the same embeddings, blocks and head on one new position, with
 * attention reading a KV cache (kv_cache.c) instead of the whole sequence.
 * Reference: Radford et al. 2019 (GPT-2); karpathy/nanoGPT model.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "../tensor/rng.h"
#include "../tensor/speed.h"
#include "nn.h"

#define INIT_STD 0.02

// --- lifecycle ---

/* W [out,in] uniform in [-a, a], a = sqrt(6 / (in + out)): Var = a^2/3 = 2 / (in + out). */
static void xavier_fill(ag_tensor *W, ag_rng *r)
{
    double a = sqrt(6.0 / (double)(W->shape[0] + W->shape[1]));
    for (size_t i = 0; i < ag_numel(W); i++) W->data[i] = (ag_real)(a * (2 * ag_rng_uniform(r) - 1));
}

/* --init-scale: every drawn weight (embeddings, Linear weights) times s; gains and biases,
 * which start at 1 and 0, as they are. */
static void scale_drawn(ag_params *P, double s)
{
    for (int e = 0; e < P->n; e++) {
        if (P->entries[e].init != AG_INIT_NORMAL) continue;
        ag_real *w = P->data + P->entries[e].offset;
        for (size_t i = 0; i < ag_numel(P->entries[e].t); i++) w[i] *= (ag_real)s;
    }
}

/* --init xavier: every Linear weight drawn again (from its own stream of seed). */
static void xavier_init(ag_gpt *g, uint64_t seed)
{
    ag_rng r;
    ag_rng_seed(&r, ag_seed_mix(seed, 0x78617669ull));   /* "xavi" */
    for (int l = 0; l < g->cfg.n_layer; l++) {
        ag_block *Bk = &g->blocks[l];
        xavier_fill(Bk->attn.w_q.W, &r);
        xavier_fill(Bk->attn.w_k.W, &r);
        xavier_fill(Bk->attn.w_v.W, &r);
        xavier_fill(Bk->attn.w_o.W, &r);
        switch (Bk->mlp.kind) {
        case AG_MLP_GELU:
            xavier_fill(Bk->mlp.fc1.W, &r);
            xavier_fill(Bk->mlp.fc2.W, &r);
            break;
        case AG_MLP_SWIGLU:
            xavier_fill(Bk->mlp.swiglu.w_gate.W, &r);
            xavier_fill(Bk->mlp.swiglu.w_up.W, &r);
            xavier_fill(Bk->mlp.swiglu.w_down.W, &r);
            break;
        }
    }
    xavier_fill(g->lm_head.W, &r);
}

/* AG_OK, or AG_ERR_ARG with the first thing wrong with cfg in err. */
static ag_status check_config(const ag_gpt_config *cfg, ag_error *err)
{
    if (!cfg) return ag_seterr(err, AG_ERR_ARG, "ag_gpt_new: no config");
    if (cfg->vocab_size <= 0) return ag_seterr(err, AG_ERR_ARG, "vocab_size must be > 0 (got %d)", cfg->vocab_size);
    if (cfg->n_layer <= 0) return ag_seterr(err, AG_ERR_ARG, "n_layer must be > 0 (got %d)", cfg->n_layer);
    if (cfg->n_head <= 0) return ag_seterr(err, AG_ERR_ARG, "n_head must be > 0 (got %d)", cfg->n_head);
    if (cfg->n_embd <= 0 || cfg->n_embd % cfg->n_head != 0)
        return ag_seterr(err, AG_ERR_ARG, "n_embd %d must be > 0 and divisible by n_head %d", cfg->n_embd,
                         cfg->n_head);
    if (cfg->block_size <= 0) return ag_seterr(err, AG_ERR_ARG, "block_size must be > 0 (got %d)", cfg->block_size);
    if (!(cfg->dropout >= 0 && cfg->dropout < 1))
        return ag_seterr(err, AG_ERR_ARG, "dropout must be in [0, 1) (got %g)", cfg->dropout);
    if (!(cfg->init_scale >= 0 && cfg->init_scale <= 1e6))
        return ag_seterr(err, AG_ERR_ARG, "init_scale must be in [0, 1e6] (got %g)", cfg->init_scale);
    if (cfg->rope && (cfg->n_embd / cfg->n_head) % 2 != 0)   /* ag_rope turns the head's channels in pairs */
        return ag_seterr(err, AG_ERR_ARG, "rope needs an even head size n_embd / n_head (got %d)",
                         cfg->n_embd / cfg->n_head);
    /* each switch against its table: "mlp must be gelu or swiglu (got 7)" */
    ag_status s = ag_switch_check(&ag_norm_position_switch, (int)cfg->norm_position, err);
    if (s == AG_OK) s = ag_switch_check(&ag_norm_switch, (int)cfg->norm, err);
    if (s == AG_OK) s = ag_switch_check(&ag_mlp_switch, (int)cfg->mlp, err);
    if (s == AG_OK) s = ag_switch_check(&ag_init_switch, (int)cfg->init, err);
    if (s == AG_OK) s = ag_switch_check(&ag_mask_fill_switch, (int)cfg->mask_fill, err);
    return s;
}

/* The score a masked position gets. */
static ag_real mask_fill_value(ag_mask_fill fill)
{
    switch (fill) {
    case AG_MASK_NEG_INF: return -INFINITY;   /* MODEL.md: its weight is exactly 0 */
    case AG_MASK_NEG_1E9: return (ag_real)-1e9;
    }
    return -INFINITY;   /* not reached: check_config refused it */
}

/* Registers ln_f as the model's kind of norm (RMSNorm: weight only, under the same name). */
static ag_status final_norm_init(ag_gpt *g)
{
    switch (g->cfg.norm) {
    case AG_LAYERNORM: return ag_layernorm_layer_init(&g->ln_f, g->params, "ln_f", g->cfg.n_embd);
    case AG_RMSNORM: return ag_rmsnorm_layer_init(&g->rms_f, g->params, "ln_f", g->cfg.n_embd);
    case AG_NO_NORM: return AG_OK;
    }
    return AG_ERR_ARG;   /* not reached: check_config refused it */
}

/* Registers every layer of g in MODEL.md's order; on failure the layer's reason is in g->params. */
static ag_status add_layers(ag_gpt *g)
{
    const ag_gpt_config *cfg = &g->cfg;
    ag_params *P = g->params;
    int V = cfg->vocab_size, C = cfg->n_embd, L = cfg->n_layer;
    double std_out = INIT_STD / sqrt(2.0 * L);
    const ag_block_opts bo = { cfg->norm_position, cfg->norm, cfg->mlp };
    ag_status s = ag_embedding_layer_init(&g->tok_emb, P, "tok_emb", V, C, INIT_STD);
    if (s == AG_OK) s = ag_embedding_layer_init(&g->pos_emb, P, "pos_emb", cfg->block_size, C, INIT_STD);
    if (s == AG_OK && cfg->no_embedding_decay) s = ag_params_set_decay(P, "tok_emb.weight", false);
    if (s == AG_OK && cfg->no_embedding_decay) s = ag_params_set_decay(P, "pos_emb.weight", false);
    for (int l = 0; l < L && s == AG_OK; l++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "blocks.%d", l);
        s = ag_block_init(&g->blocks[l], P, prefix, C, cfg->n_head, &bo, INIT_STD, std_out);
        ag_mha *A = &g->blocks[l].attn;
        A->composed = cfg->composed_attention;
        if (cfg->no_scale) A->scale = 1;
        A->mask_fill = mask_fill_value(cfg->mask_fill);
        A->rope = cfg->rope;
        if (s == AG_OK) A->w_k.b->requires_grad = cfg->rope;   /* turned by position, b_k has a gradient */
    }
    if (s == AG_OK) s = final_norm_init(g);
    if (s == AG_OK) s = ag_linear_layer_init(&g->lm_head, P, "lm_head", C, V, true, INIT_STD);
    if (s == AG_OK) s = ag_params_set_hidden(P, "lm_head.weight", false);   /* the output head: Muon leaves it to AdamW */
    return s;
}

/* g freed, and why its parameters could not be made in err; NULL */
static ag_gpt *gpt_failed(ag_gpt *g, ag_status s, ag_error *err)
{
    const char *why = ag_params_error(g->params);
    ag_seterr(err, s, "ag_gpt_new: cannot create the parameters: %s", why ? why : ag_status_str(s));
    ag_gpt_free(g);
    return NULL;
}

/* A model of cfg's layers, their parameters registered and not yet allocated. */
static ag_gpt *gpt_layers(const ag_gpt_config *cfg, ag_error *err)
{
    if (check_config(cfg, err) != AG_OK) return NULL;
    ag_gpt *g = calloc(1, sizeof *g);
    if (!g) return ag_seterr(err, AG_ERR_NOMEM, "ag_gpt_new: out of memory"), NULL;
    g->cfg = *cfg;
    g->params = ag_params_new();
    g->blocks = calloc((size_t)cfg->n_layer, sizeof *g->blocks);   // [n_layer]
    if (!g->params || !g->blocks) {
        ag_gpt_free(g);
        return ag_seterr(err, AG_ERR_NOMEM, "ag_gpt_new: out of memory"), NULL;
    }
    ag_status s = add_layers(g);
    if (s != AG_OK) return gpt_failed(g, s, err);
    return g;
}

ag_gpt *ag_gpt_new(const ag_gpt_config *cfg, uint64_t seed, ag_error *err)
{
    ag_gpt *g = gpt_layers(cfg, err);
    if (!g) return NULL;
    ag_status s = ag_params_alloc(g->params);
    if (s != AG_OK) return gpt_failed(g, s, err);
    ag_params_init(g->params, seed);   /* MODEL.md's init */
    switch (cfg->init) {
    case AG_WEIGHTS_NORMAL: break;
    case AG_WEIGHTS_XAVIER: xavier_init(g, seed); break;
    }
    if (cfg->init_scale > 0 && cfg->init_scale != 1) scale_drawn(g->params, cfg->init_scale);
    return g;
}

ag_gpt *ag_gpt_new_replica(const ag_gpt *g, ag_error *err)
{
    ag_gpt *r = gpt_layers(&g->cfg, err);
    if (!r) return NULL;
    ag_status s = ag_params_alloc_grads(r->params, g->params);
    return s == AG_OK ? r : gpt_failed(r, s, err);
}

void ag_gpt_free(ag_gpt *g)
{
    if (!g) return;
    ag_params_free(g->params);
    free(g->blocks);
    free(g);
}

// --- forward ---

/* ids [B*T] at positions first..first+T-1 -> logits [B,T,V], where first is 0, or cache->len for
 * the one cached position (opts->cache: no mask, attention reads the cache instead). */
static ag_tensor *gpt_logits(ag_ctx *ctx, const ag_gpt *g, const int *ids, int B, int T, const ag_forward_opts *opts)
{
    int C = g->cfg.n_embd, first = opts->cache ? opts->cache->len : 0;
    ag_real p = (ag_real)g->cfg.dropout;
    int *pos = ag_ctx_alloc(ctx, (size_t)T * sizeof(int));           // [T] = first, ..., first+T-1
    if (!pos) return NULL;
    for (int t = 0; t < T; t++) pos[t] = first + t;

    ag_ctx_set_scope(ctx, "tok_emb");
    ag_tensor *tok = ag_embedding_layer_forward(ctx, &g->tok_emb, ids, B, T);  // [B,T,C]
    ag_ctx_set_scope(ctx, "pos_emb");
    ag_tensor *pe = ag_embedding_layer_forward(ctx, &g->pos_emb, pos, 1, T);   // [1,T,C]
    pe = ag_reshape(ctx, pe, 2, (int[2]){ T, C });                             // [T,C]
    ag_tensor *x = ag_add(ctx, tok, pe);                                       // [B,T,C] positions broadcast over B
    x = ag_dropout(ctx, x, p, ag_seed_mix(opts->seed, 0), opts->train);         // [B,T,C] dropout site 0
    ag_tensor *mask = opts->cache ? NULL : ag_causal_mask(ctx, T);             // [T,T] position t sees 0..t
    for (int l = 0; l < g->cfg.n_layer; l++) {
        ag_forward_opts block = *opts;           /* block l's dropout seed, record slot, cache layer */
        block.seed = ag_seed_mix(opts->seed, 1 + (uint64_t)l); /* block l is dropout site 1 + l */
        block.layer = l;
        x = ag_block_forward(ctx, &g->blocks[l], x, mask, p, &block);          // [B,T,C]
    }
    ag_ctx_set_scope(ctx, "ln_f");
    switch (g->cfg.norm) {
    case AG_LAYERNORM: x = ag_layernorm_layer_forward(ctx, &g->ln_f, x); break;  // [B,T,C]
    case AG_RMSNORM: x = ag_rmsnorm_layer_forward(ctx, &g->rms_f, x); break;     // [B,T,C]
    case AG_NO_NORM: break;
    }
    ag_ctx_set_scope(ctx, "lm_head");
    return ag_linear_layer_forward(ctx, &g->lm_head, x);                       // [B,T,V]
}

ag_tensor *ag_gpt_forward(ag_ctx *ctx, ag_gpt *g, const int *ids, const int *targets, int B, int T,
                          const ag_forward_opts *opts, ag_tensor **loss)
{
    static const ag_forward_opts eval = { 0 };
    if (loss) *loss = NULL;
    if (ag_ctx_status(ctx) != AG_OK) return NULL;
    if (!g || !ids || B <= 0 || T <= 0 || T > g->cfg.block_size) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "ag_gpt_forward: B=%d T=%d (need ids, B > 0 and 0 < T <= block_size %d)",
                    B, T, g ? g->cfg.block_size : 0);
        return NULL;
    }
    if (opts && opts->cache) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "ag_gpt_forward: a KV cache goes through ag_gpt_forward_cached");
        return NULL;
    }
    const char *outer = ag_ctx_scope(ctx);
    ag_tensor *logits = gpt_logits(ctx, g, ids, B, T, opts ? opts : &eval);   // [B,T,V]
    if (loss && targets) {
        ag_ctx_set_scope(ctx, "loss");
        *loss = ag_cross_entropy(ctx, logits, targets);                        // [1]
    }
    ag_ctx_set_scope(ctx, outer);
    return ag_ctx_status(ctx) == AG_OK ? logits : NULL;
}

ag_tensor *ag_gpt_forward_cached(ag_ctx *ctx, ag_gpt *g, ag_kv_cache *cache, int id)
{
    if (ag_ctx_status(ctx) != AG_OK) return NULL;
    if (!g || !cache) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "ag_gpt_forward_cached: no model or no cache");
        return NULL;
    }
    if (cache->len >= g->cfg.block_size) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "ag_gpt_forward_cached: the cache is full (block_size %d)", g->cfg.block_size);
        return NULL;
    }
    bool grad_was_on = ag_ctx_grad_enabled(ctx);
    const char *outer = ag_ctx_scope(ctx);
    ag_ctx_set_grad(ctx, false);                 /* sampling never needs a tape */
    ag_tensor *logits = gpt_logits(ctx, g, &id, 1, 1, &(ag_forward_opts){ .cache = cache }); // [1,1,V]
    logits = ag_reshape(ctx, logits, 1, &g->cfg.vocab_size);                  // [V]
    ag_ctx_set_scope(ctx, outer);
    ag_ctx_set_grad(ctx, grad_was_on);
    if (ag_ctx_status(ctx) != AG_OK) return NULL;
    cache->len++;                                /* every layer has stored this position */
    return logits;
}
