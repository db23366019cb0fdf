/* nn.h -- layers built from the ops in tensor/ops.h, and the GPT of ../shared/MODEL.md.
 *
 * A layer is a struct of parameter pointers plus its config. ag_X_init registers its
 * parameters in an ag_params under their PyTorch names (prefix + ".weight"); ag_X_forward
 * composes ops and returns a tensor in ctx (valid until ag_ctx_reset). There is no backward
 * code in src/nn: the ops' backwards do all of it.
 * Shapes use MODEL.md's letters: B batch, T time, C = n_embd, H heads, D = C/H, V vocab. */
#ifndef AG_NN_H
#define AG_NN_H

#include "../tensor/ops.h"
#include "params.h"
#include "safetensors.h"

/* ---- Linear: y = x W^T + b ---- */
typedef struct {
    ag_tensor *W;   /* [out, in] */
    ag_tensor *b;   /* [out], or NULL without bias */
    int in, out;
} ag_linear_layer;
/* Registers prefix.weight (N(0, std), decayed) and prefix.bias (zeros). AG_ERR_NOMEM/ARG. */
ag_status ag_linear_layer_init(ag_linear_layer *L, ag_params *P, const char *prefix, int in, int out,
                               bool bias, double std);
ag_tensor *ag_linear_layer_forward(ag_ctx *ctx, const ag_linear_layer *L, ag_tensor *x); /* [...,in] -> [...,out] */

/* ---- Embedding ---- */
typedef struct {
    ag_tensor *W;   /* [V, C] */
    int V, C;
} ag_embedding_layer;
ag_status ag_embedding_layer_init(ag_embedding_layer *L, ag_params *P, const char *prefix, int V, int C, double std);
ag_tensor *ag_embedding_layer_forward(ag_ctx *ctx, const ag_embedding_layer *L, const int *ids, int B, int T); /* [B,T,C] */

/* ---- LayerNorm (eps 1e-5) ---- */
typedef struct {
    ag_tensor *w;   /* [C] ones */
    ag_tensor *b;   /* [C] zeros */
    int C;
} ag_layernorm_layer;
ag_status ag_layernorm_layer_init(ag_layernorm_layer *L, ag_params *P, const char *prefix, int C);
ag_tensor *ag_layernorm_layer_forward(ag_ctx *ctx, const ag_layernorm_layer *L, ag_tensor *x); /* [...,C] */

/* ---- multi-head causal self-attention ---- */
typedef struct {
    ag_linear_layer w_q, w_k, w_v, w_o;   /* each C -> C with bias */
    int C, H;
    bool composed;                         /* true: the op-by-op path below; false (default):
                                              the fused ag_attention kernel, same results */
    char scope[64];                        /* "blocks.0.attn", for --trace-shapes */
} ag_mha;
ag_status ag_mha_init(ag_mha *A, ag_params *P, const char *prefix, int C, int H, double std, double std_out);
/* x [B,T,C], mask [T,T] (1 = may attend) or NULL for no mask -> [B,T,C].
 * dropout p on the attention weights when train (seeded by seed). */
ag_tensor *ag_mha_forward(ag_ctx *ctx, const ag_mha *A, ag_tensor *x, ag_tensor *mask,
                          ag_real dropout, uint64_t seed, bool train);

/* ---- MLP: fc2(GELU(fc1(x))) ---- */
typedef struct {
    ag_linear_layer fc1;  /* C -> 4C */
    ag_linear_layer fc2;  /* 4C -> C */
    char scope[64];       /* "blocks.0.mlp", for --trace-shapes */
} ag_mlp;
ag_status ag_mlp_init(ag_mlp *M, ag_params *P, const char *prefix, int C, double std, double std_out);
ag_tensor *ag_mlp_forward(ag_ctx *ctx, const ag_mlp *M, ag_tensor *x); /* [...,C] -> [...,C] */

/* ---- Pre-LN block: x + attn(ln1(x)), then x + mlp(ln2(x)) ---- */
typedef struct {
    ag_layernorm_layer ln1, ln2;
    ag_mha attn;
    ag_mlp mlp;
    char scope[64];
} ag_block;
ag_status ag_block_init(ag_block *Bk, ag_params *P, const char *prefix, int C, int H, double std, double std_out);
ag_tensor *ag_block_forward(ag_ctx *ctx, const ag_block *Bk, ag_tensor *x, ag_tensor *mask,
                            ag_real dropout, uint64_t seed, bool train); /* [B,T,C] -> [B,T,C] */

/* ---- GPT ---- */
typedef struct {
    int vocab_size;   /* V */
    int n_layer;
    int n_head;       /* H */
    int n_embd;       /* C */
    int block_size;   /* T_max */
    double dropout;   /* 0 by default */
    bool composed_attention; /* attention op by op (readable, slower) instead of fused */
} ag_gpt_config;

typedef struct {
    ag_gpt_config cfg;
    ag_params *params;             /* owned */
    ag_embedding_layer tok_emb;    /* [V,C] */
    ag_embedding_layer pos_emb;    /* [T_max,C] */
    ag_block *blocks;              /* [n_layer], owned */
    ag_layernorm_layer ln_f;
    ag_linear_layer lm_head;       /* C -> V */
} ag_gpt;

/* Checks the config (message in err), registers every parameter under its MODEL.md name in
 * MODEL.md's order, allocates them and initialises them from seed as MODEL.md says.
 * NULL on error. Free with ag_gpt_free. */
ag_gpt *ag_gpt_new(const ag_gpt_config *cfg, uint64_t seed, char *err, size_t errlen);
void ag_gpt_free(ag_gpt *g); /* NULL ok */

/* ids [B*T] -> logits [B,T,V]. With targets [B*T] (or NULL), *loss gets the mean
 * cross-entropy, a scalar [1]. T <= block_size. dropout uses seed when train. */
ag_tensor *ag_gpt_forward(ag_ctx *ctx, ag_gpt *g, const int *ids, const int *targets, int B, int T,
                          bool train, uint64_t seed, ag_tensor **loss);

/* ---- KV cache for sampling: each new token costs one position ---- */
typedef struct {
    int n_layer, H, D, T_max;
    int len;                 /* positions cached so far */
    ag_real *k, *v;          /* [n_layer, H, T_max, D] each, owned */
} ag_kv_cache;
ag_kv_cache *ag_kv_cache_new(const ag_gpt *g); /* NULL on OOM */
void ag_kv_cache_free(ag_kv_cache *c);         /* NULL ok */
void ag_kv_cache_clear(ag_kv_cache *c);
/* Feeds one token at position cache->len (must be < block_size) in no-grad mode; returns its
 * logits [V] in ctx and advances the cache. The caller resets ctx between calls as it likes. */
ag_tensor *ag_gpt_forward_cached(ag_ctx *ctx, ag_gpt *g, ag_kv_cache *cache, int id);

#endif
