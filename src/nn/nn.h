/* nn.h -- layers built from the ops in tensor/ops.h, and the GPT of ../shared/MODEL.md.
 *
 * src/nn/ owns the layers: what parameters each registers, how its forward composes ops, the
 * model's switches (switches.h) and the key/value cache of sampling (kv_cache.h).
 *
 * A layer is a struct of parameter pointers plus its config. ag_X_init registers its
 * parameters in an ag_params under their PyTorch names (prefix + ".weight"); ag_X_forward
 * composes ops and returns a tensor in ctx (valid until ag_ctx_reset). There is no backward
 * code in src/nn: the ops' backwards do all of it.
 * A failing ag_X_init returns AG_ERR_ARG (a bad size, a name too long or taken) or AG_ERR_NOMEM
 * and says why in P (ag_params_error), led by the layer's prefix: "blocks.0.attn: n_head 3 does
 * not divide n_embd 64", "blocks.0.attn.w_q.weight: registered twice".
 * Shapes use MODEL.md's letters: B batch, T time, C = n_embd, H heads, D = C/H, V vocab. */
#ifndef AG_NN_H
#define AG_NN_H

#include <signal.h>   /* sig_atomic_t: ag_sample_opts' stop */
#include "../tensor/debug.h"  /* every layer names its scope (ag_ctx_set_scope) for error messages */
#include "../tensor/ops.h"
#include "../params/params.h"
#include "switches.h"   /* the switches' tables: ag_norm_position, ag_norm_kind, ag_mlp_kind, ... */

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

/* ---- RMSNorm (eps 1e-5): x / sqrt(mean(x^2) + eps) * w, the alternative to LayerNorm ---- */
typedef struct {
    ag_tensor *w;   /* [C] ones */
    int C;
} ag_rmsnorm_layer;
/* Registers prefix.weight [C] (ones, not decayed). AG_ERR_ARG for C <= 0, a name too long or
 * a duplicate; AG_ERR_NOMEM otherwise. */
ag_status ag_rmsnorm_layer_init(ag_rmsnorm_layer *L, ag_params *P, const char *prefix, int C);
ag_tensor *ag_rmsnorm_layer_forward(ag_ctx *ctx, const ag_rmsnorm_layer *L, ag_tensor *x); /* [...,C] */

/* ---- SwiGLU MLP: w_down(silu(w_gate(x)) * w_up(x)), the alternative to ag_mlp ---- */
typedef struct {
    ag_linear_layer w_gate;  /* C -> hidden, with bias */
    ag_linear_layer w_up;    /* C -> hidden, with bias */
    ag_linear_layer w_down;  /* hidden -> C, with bias */
    int C, hidden;
    char scope[64];          /* "blocks.0.mlp", for --trace-shapes */
} ag_swiglu;
/* Registers prefix.w_gate, prefix.w_up (weights N(0, std)) and prefix.w_down (weight
 * N(0, std_out): it writes into the residual stream), each .weight (decayed) and .bias
 * (zeros), in that order. AG_ERR_ARG for C or hidden <= 0 or a bad name; AG_ERR_NOMEM. */
ag_status ag_swiglu_init(ag_swiglu *S, ag_params *P, const char *prefix, int C, int hidden, double std,
                         double std_out);
/* x [...,C] -> [...,C], composed from ops only (three linears, silu, mul): no backward of its
 * own. Nodes are recorded under S->scope; the ctx's scope is restored afterwards. */
ag_tensor *ag_swiglu_forward(ag_ctx *ctx, const ag_swiglu *S, ag_tensor *x);


/* ---- the choices of one forward call ----
 * What belongs to the model (the dropout rate, scale, mask fill, cfg.composed_attention) lives
 * in its config; what one call wants lives here, handed down ag_gpt_forward -> ag_block_forward
 * -> ag_mha_forward. A zero value, or a NULL pointer, is evaluation: no dropout, attention
 * fused where the model allows it, nothing recorded, no cache. A training step:
 *     ag_gpt_forward(ctx, g, x, y, B, T, &(ag_forward_opts){ .train = true, .seed = it }, &loss); */
typedef struct ag_kv_cache ag_kv_cache;
typedef struct {
    bool train;                    /* dropout on, at the model's rate (false: dropout is the identity) */
    uint64_t seed;                 /* the dropout masks' seed when train; each site derives its own */
    bool composed_attention;       /* attention op by op in this call even where the model uses the
                                      fused kernel: the same numbers, every step on the tape
                                      (--trace-shapes, --detect-anomaly) */
    ag_tensor **record_attention;  /* NULL, or one slot per layer: slot l gets layer l's attention
                                      weights A = softmax(s) [B,H,T,T] (a tensor in ctx, valid until
                                      ag_ctx_reset; before dropout). Recording takes the composed path */
    ag_kv_cache *cache;            /* NULL, or a KV cache: x is the one position cache->len, whose
                                      keys and values attention adds to the cache before attending
                                      over every cached position. No-grad mode only. Set by
                                      ag_gpt_forward_cached (ag_gpt_forward refuses it) */
    const ag_tensor *key_padding;  /* NULL, or [B,T] for a batch of sequences of different lengths,
                                      padded to T: 1 = a real token, 0 = padding. No query attends to
                                      a padded key (on top of the causal mask); a query left with no
                                      key gets zero weights under -inf (uniform ones under -1e9).
                                      Takes the composed path. ag_gpt_forward hands it to every
                                      block; with a cache it is refused (AG_ERR_ARG) */
    int layer;                     /* the slot of record_attention and the layer of cache this block
                                      uses: ag_gpt_forward sets it per block; 0 for a lone block */
} ag_forward_opts;

/* ---- attention over heads: softmax(scale q k^T, masked) v ----
 * q, k, v [B,T,C] -> [B,T,C]: split into H heads of D = C/H, scores s = scale q k^T [B,H,T,T],
 * filled with -inf where mask == 0 (mask as for ag_masked_fill, e.g. ag_causal_mask(ctx, T), or
 * NULL for none), softmax over the keys, a v, heads merged; no dropout. This is the attention of
 * ag_mha_forward: attention.c's attend(), op by op, or its fast twin (one "attention" node, the
 * same numbers and gradients) where the library has fast kernels, the ctx does not ask for the
 * reference ones, q, k, v have one shape and the mask is NULL or ag_causal_mask's own (its
 * kind: see ag_causal_mask). Errors are the ops': H not dividing C gives AG_ERR_SHAPE from
 * ag_split_heads. The result is valid until ag_ctx_reset. */
ag_tensor *ag_attention(ag_ctx *ctx, ag_tensor *q, ag_tensor *k, ag_tensor *v, int H, ag_real scale,
                        ag_tensor *mask);

/* ---- multi-head causal self-attention ---- */
typedef struct {
    ag_linear_layer w_q, w_k, w_v, w_o;   /* each C -> C with bias */
    int C, H;
    bool composed;                         /* the model's choice (cfg.composed_attention): true, the
                                              op-by-op path of attention.c always; false (default),
                                              its fast twin where it applies, same results. A
                                              call asks for op by op with
                                              opts->composed_attention */
    ag_real scale;                         /* s = scale * q k^T: 1/sqrt(D) (MODEL.md, set by
                                              ag_mha_init); 1 drops the scaling (--no-scale) */
    ag_real mask_fill;                     /* the score of a masked position: -INFINITY
                                              (MODEL.md, set by init) or a finite stand-in such
                                              as -1e9, which takes the composed path */
    bool rope;                             /* q and k turned by their position (ag_rope) before
                                              the scores; false (MODEL.md, set by init) */
    char scope[64];                        /* "blocks.0.attn", for --trace-shapes */
} ag_mha;
/* Registers w_q, w_k, w_v (N(0, std)) and w_o (N(0, std_out)); scale 1/sqrt(D), mask_fill
 * -inf, composed false. AG_ERR_ARG when H does not divide C. */
ag_status ag_mha_init(ag_mha *A, ag_params *P, const char *prefix, int C, int H, double std, double std_out);
/* x [B,T,C], mask [T,T] (1 = may attend) or NULL for no mask -> [B,T,C]; dropout p on the
 * attention weights when opts->train. opts NULL: evaluation. With opts->cache, x [1,1,C] is the
 * one new position and mask is NULL: it may see every cached position. With
 * opts->key_padding [B,T], the scores are masked with ag_key_padding_mask(key_padding, mask)
 * [B,1,T,T] instead; a key_padding that is not x's [B,T]: AG_ERR_SHAPE. */
ag_tensor *ag_mha_forward(ag_ctx *ctx, const ag_mha *A, ag_tensor *x, ag_tensor *mask, ag_real dropout,
                          const ag_forward_opts *opts);

/* ---- MLP: fc2(GELU(fc1(x))), C -> 4C -> C (MODEL.md), or a SwiGLU of width round(8C/3) ---- */
typedef struct {
    ag_mlp_kind kind;     /* a row of AG_MLP_KINDS (switches.h) */
    ag_linear_layer fc1;  /* GELU: C -> 4C */
    ag_linear_layer fc2;  /* GELU: 4C -> C */
    ag_swiglu swiglu;     /* SWIGLU: w_gate, w_up C -> F, w_down F -> C, F = ag_swiglu_width(C) */
    char scope[64];       /* "blocks.0.mlp", for --trace-shapes */
} ag_mlp;
/* The SwiGLU width round(8C/3): three matrices of C x F hold what the GELU MLP's two of C x 4C
 * do, so the two kinds compare at (almost) the same parameter count. */
int ag_swiglu_width(int C);
/* GELU: registers prefix.fc1 (N(0, std)) and prefix.fc2 (N(0, std_out)). SwiGLU: prefix.w_gate,
 * prefix.w_up (N(0, std)) and prefix.w_down (N(0, std_out)). AG_ERR_ARG for a kind outside
 * the table ("mlp must be gelu or swiglu (got 7)"). */
ag_status ag_mlp_init(ag_mlp *M, ag_params *P, const char *prefix, int C, ag_mlp_kind kind, double std,
                      double std_out);
ag_tensor *ag_mlp_forward(ag_ctx *ctx, const ag_mlp *M, ag_tensor *x); /* [...,C] -> [...,C] */

/* ---- Transformer block ----
 *   Pre-LN (MODEL.md):  x = x + attn(LN1(x));   x = x + mlp(LN2(x))
 *   Post-LN (Vaswani et al. 2017, --norm-position post):
 *                       x = LN1(x + attn(x));   x = LN2(x + mlp(x))
 * with dropout on each branch's output. */
typedef struct {
    ag_norm_position norm_position;   /* each a row of its table in switches.h; */
    ag_norm_kind norm;                /* the zero value, the first row, is MODEL.md's */
    ag_mlp_kind mlp;
} ag_block_opts;

typedef struct {
    ag_norm_position norm_position;
    ag_norm_kind norm;
    ag_layernorm_layer ln1, ln2;      /* norm == AG_LAYERNORM (else zeroed) */
    ag_rmsnorm_layer rms1, rms2;      /* norm == AG_RMSNORM, registered under the same names
                                         prefix.ln1 and prefix.ln2 (weight only) */
    ag_mha attn;
    ag_mlp mlp;
    char scope[64];
} ag_block;
/* Registers ln1, attn, ln2, mlp under prefix in MODEL.md's order. opts NULL: MODEL.md's block. */
ag_status ag_block_init(ag_block *Bk, ag_params *P, const char *prefix, int C, int H, const ag_block_opts *opts,
                        double std, double std_out);
/* x [B,T,C] -> [B,T,C]; mask and opts as for ag_mha_forward, dropout p on the attention
 * weights and on both branches when opts->train. The same lines serve a full sequence and one
 * cached position (opts->cache): every step but attention acts on each position alone. */
ag_tensor *ag_block_forward(ag_ctx *ctx, const ag_block *Bk, ag_tensor *x, ag_tensor *mask, ag_real dropout,
                            const ag_forward_opts *opts);

/* ---- GPT ---- */
typedef struct {
    int vocab_size;   /* V */
    int n_layer;
    int n_head;       /* H */
    int n_embd;       /* C */
    int block_size;   /* T_max */
    double dropout;   /* 0 by default */
    bool composed_attention; /* attention op by op (readable, slower) instead of fused */
    /* the switches, their values in the tables of switches.h; every zero value is MODEL.md's
     * (so `{ V, L, H, C, T, 0, false }` is it) */
    ag_norm_position norm_position; /* where the block's norms sit; ln_f is kept in every case */
    ag_norm_kind norm;               /* the kind of ln1, ln2 and ln_f */
    ag_mlp_kind mlp;                 /* the kind of each block's MLP */
    ag_weight_init init;             /* how the Linear weights are drawn */
    bool no_scale;                   /* drop the 1/sqrt(D) of the scores */
    ag_mask_fill mask_fill;          /* the score of a masked position */
    double init_scale;               /* 0 (or 1): the weights as drawn; else every drawn weight (not
                                        the norms' gains, not the biases) times this (lesson 15) */
    bool no_embedding_decay;         /* tok_emb and pos_emb not decayed (only the Linear weights, as
                                        minGPT's groups); MODEL.md decays them */
    bool rope;                       /* q and k rotated by their position (RoPE, ag_rope) in every
                                        block, beside pos_emb; MODEL.md has pos_emb alone */
} ag_gpt_config;

typedef struct {
    ag_gpt_config cfg;
    ag_params *params;             /* owned */
    ag_embedding_layer tok_emb;    /* [V,C] */
    ag_embedding_layer pos_emb;    /* [T_max,C] */
    ag_block *blocks;              /* [n_layer], owned */
    ag_layernorm_layer ln_f;       /* norm == AG_LAYERNORM (else zeroed) */
    ag_rmsnorm_layer rms_f;        /* norm == AG_RMSNORM: "ln_f.weight" */
    ag_linear_layer lm_head;       /* C -> V */
} ag_gpt;

/* Checks the config, registers every parameter under its MODEL.md name in MODEL.md's order,
 * allocates them and initialises them from seed as MODEL.md says (or as cfg->init says).
 * NULL on error, with the status and one line in err (NULL ok): the config's fault, or the
 * failing layer init's reason ("ag_gpt_new: cannot create the parameters: blocks.0.mlp: ...").
 * Free with ag_gpt_free. */
ag_gpt *ag_gpt_new(const ag_gpt_config *cfg, uint64_t seed, ag_error *err);
/* A replica of g for a worker of a split pass (ag_gpt_shards below): g's layers, computing with
 * g's weights (which of them take a gradient too), with gradients of its own; it owns no
 * weights or Adam moments. g's weights may change, never move, while it lives. NULL on error
 * (why in err). Free with ag_gpt_free, before g. */
ag_gpt *ag_gpt_new_replica(const ag_gpt *g, ag_error *err);
void ag_gpt_free(ag_gpt *g); /* NULL ok */

/* ids [B*T] -> logits [B,T,V]. With targets [B*T] (or NULL), *loss gets the mean
 * cross-entropy, a scalar [1]. T <= block_size. opts NULL or { 0 }: evaluation; .train and .seed
 * for dropout; .record_attention gets n_layer slots (opts->layer is ignored; .cache is refused:
 * see ag_gpt_forward_cached). */
ag_tensor *ag_gpt_forward(ag_ctx *ctx, ag_gpt *g, const int *ids, const int *targets, int B, int T,
                          const ag_forward_opts *opts, ag_tensor **loss);

/* ---- one pass of a step's windows, split over workers ----
 * A training step's windows are split over workers: the ranks of a job, each rank's
 * micro-batches, and a micro-batch's shards (its windows split over the threads). Each worker
 * runs the forward and backward of its share on a replica that shares g's weights and keeps
 * its own gradients; the gradients are summed in a fixed order (shards in shard order, then
 * micro-batches in turn, then the ranks' allreduce), each share weighed by its windows, so the
 * sum is the gradient of the mean loss over the step's windows. Every training pass goes
 * through ag_gpt_shards_pass: with one shard it is the plain pass (ag_gpt_forward, then
 * ag_backward_from, every op split over the threads); with n > 1 each shard's forward and
 * backward run whole on one thread, in a ctx of its own, on a replica (ag_gpt_new_replica),
 * and the replicas' gradients are added into g's in shard order. Without dropout n shards give
 * the one-shard pass's result within rounding (with it, each shard draws its own masks), and
 * the same bits on one thread or several (docs/performance.md: "The batch in shards"). The ops
 * inside a shard run on its thread only while OpenMP keeps one active level: its default, which
 * ag_threads_init (speed.h) sets again. */
typedef struct ag_gpt_shards ag_gpt_shards;

/* One worker's share above the shards: micro-batch j (0 .. K-1) of rank `rank` of N (N, K >= 1),
 * in a step of B windows (a multiple of N*K) whose dropout seed is step_seed. Micro-batch
 * m = rank*K + j takes windows [m b, (m+1) b), b = B/(N*K), with the seed
 * ag_seed_mix(step_seed, m) and its backward seeded with 1/(N*K), so the sum over all of them
 * is the gradient of the step's mean loss; N = K = 1: all B windows, step_seed itself, 1.
 * Its windows then go to ag_gpt_shards_pass; the ranks' sum is the caller's allreduce. false
 * once j >= K. */
typedef struct {
    int first;         /* its windows are [first, first + b) of the step's B */
    int b;             /* B / (N*K) windows */
    uint64_t seed;     /* its dropout seed */
    ag_real dloss;     /* where its backward starts: 1 / (N*K) */
} ag_micro;
bool ag_micro_of(int N, int rank, int K, int j, int B, uint64_t step_seed, ag_micro *mb);

/* The shards a pass of `windows` windows takes by default: one per thread (ag_threads, at
 * least 2), at most the machine's cores and the windows, with dropout too (each shard draws its
 * own masks, from the same distribution as one pass's: tests/test_shards.c). char_lm's step and
 * examples/one_step both take it, so they split alike. */
int ag_gpt_shards_default(const ag_gpt_config *cfg, int windows);

/* n shards (n >= 1) of a pass of g in ctx: shard 0 runs on g and ctx themselves, shards 1..n-1
 * on replicas (ag_gpt_new_replica) in ctxs like ctx (ag_ctx_new_like, --detect-anomaly's checks
 * included). g's weights may change between passes (the optimizer), never move; make the
 * shards after any other change to g's layers. NULL on error, the reason in err. */
ag_gpt_shards *ag_gpt_shards_new(ag_gpt *g, ag_ctx *ctx, int n, ag_error *err);
void ag_gpt_shards_free(ag_gpt_shards *s); /* NULL ok; leaves g and ctx */
int ag_gpt_shards_count(const ag_gpt_shards *s);
ag_ctx *ag_gpt_shards_ctx(const ag_gpt_shards *s, int j); /* shard j's ctx (0: the caller's); NULL past n */

/* Forward and backward of ids, targets [B*T] as the shards: g's gradients += dloss * dl/dW with
 * l the mean cross-entropy over all B*T targets, and *loss = l. Shard j takes windows
 * [B j/n, B (j+1)/n) (none when B < n: it is skipped) and starts its backward from
 * dloss b_j / B (dloss itself for one shard); dropout masks from ag_seed_mix(opts->seed, j),
 * or opts->seed itself for one shard. opts may not record attention,
 * pass a cache or key padding (AG_ERR_ARG). Shard 0's tape stays in ctx (the caller resets it,
 * as after a plain pass); the others are reset. On failure the status and message of the first
 * failing shard are in err and g's gradients are partly summed: the step must not go on. */
ag_status ag_gpt_shards_pass(ag_gpt_shards *s, const int *ids, const int *targets, int B, int T,
                             const ag_forward_opts *opts, ag_real dloss, double *loss, ag_error *err);

/* ---- what a GPT costs in memory, before any of it exists (gpt_memory.c) ----
 * Bytes of memory one step takes, estimated from the tensors a step keeps: per layer the
 * attention weights [B,H,T,T] and about 18 [B,T,C] tensors, the logits [B,T,V] twice. A train
 * step's forward keeps 4 [B,T,C] more per layer for its backward, and the backward's gradients
 * (recycled) peak at about 16 [B,T,C] and a [B,T,V] more. With dropout it also keeps the
 * dropped attention weights [B,H,T,T] per layer and, at each of the 1 + 2 n_layer dropout
 * sites, its output and mask [B,T,C]. The train step's arena high-water mark
 * (ag_ctx_get_stats) of char_lm's default model is within 9% of it from 1 window up (tiny,
 * baby, small and 19 other shapes; the fixed bytes of a step's nodes make 1 window the lowest);
 * of the 10min preset's (dropout 0.05), within 1% at 6 and 12 windows (tests/test_memory.c
 * holds 6 windows, with and without dropout, to 3%).
 * ag_gpt_sample_bytes: the KV cache, 2 [T,C] per layer, and one position's tensors. */
double ag_gpt_step_bytes(const ag_gpt_config *m, int B, bool train);
double ag_gpt_sample_bytes(const ag_gpt_config *m);
/* A lower bound of the model's parameter count, whatever its switches: the embeddings, and per
 * block 4C^2 (attention) + C(8C-1) (MLP), 12 C^2 - C. (A forged checkpoint header, n_embd 2048
 * and n_layer 9 in an 18 KB file, is refused by it before the model is allocated.) */
double ag_gpt_min_params(const ag_gpt_config *m);
/* The program itself (its code, libraries, the threads, a corpus of a few MB): a baby or tiny
 * char_lm run's peak RSS less its model, its optimizer state and its arenas, measured (README's
 * Limits). ag_train_run counts it too (train.h: ag_train_client's step_bytes). */
#define AG_PROCESS_BYTES (16.0 * 1024 * 1024)
/* what a shard's arena takes beyond twice its high-water mark: the arena's first chunk is 1 MiB
 * and big chunks sit on 2 MiB pages (hugepage.c), so a shard of few windows rounds up */
#define AG_SHARD_SLACK (1.0 * 1024 * 1024)
/* glibc's largest mmap threshold (64-bit): a freed block below it stays in the process's heap */
#define AG_HEAP_KEPT (32.0 * 1024 * 1024)
/* Bytes a shard beyond the first adds for its b windows (each keeps a replica and a ctx): its
 * gradient buffer (ag_gpt_min_params), and its arena (ag_gpt_step_bytes) and again as much, up
 * to AG_HEAP_KEPT. The first step grows the arena in chunks of 1, 2, 4... MiB and the rewind
 * replaces them by one chunk of their size (arena.c). By then the evaluation's freed chunks
 * have raised glibc's mmap threshold, so the shard's small chunks came from the heap: freed,
 * they stay resident (the new chunk is larger than the hole they leave). With the threshold
 * pinned (GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072) baby at 8 shards peaks at 132
 * MiB, not 178. */
double ag_gpt_shard_bytes(const ag_gpt_config *m, int b);
/* Bytes a training run holds (issue 35), per rank on this machine times the ranks: the program
 * (AG_PROCESS_BYTES), the weights, their gradients and Adam's two moments (ag_gpt_min_params
 * each), the run's ctx, which holds shard 0's step (B/shards windows) and the evaluation's
 * forward of B windows, the larger of them, and ag_gpt_shard_bytes for each shard beyond the
 * first (B split as ag_gpt_shards_pass splits it). Within 9% of the peak RSS of char_lm's tiny
 * and baby at 1 to 8 shards (README's Limits has the table). */
double ag_gpt_train_bytes(const ag_gpt_config *m, int B, int shards, int ranks);
/* Training FLOPs of one step of B windows (forward and backward; the attention products counted
 * twice, they run at about half the rate of the others; dropout 1.1x): per token
 * 6 (12 L C^2 + 2 C V) + 24 L T C, times B T (bench/budget_sweep.sh's model; train/recipe.h's cost). */
double ag_gpt_step_flops(const ag_gpt_config *m, int B);
/* What Muon (optim/muon.h) adds to a step: NS5 on every hidden matrix (each block's W_q, W_k,
 * W_v, W_o and its MLP's), whatever the batch. Muon's recipes add it to ag_gpt_step_flops: a
 * larger context or batch leaves it as it is, so a step that grows by a ratio of FLOPs costs
 * less than the ratio with it. */
double ag_gpt_muon_flops(const ag_gpt_config *m);
/* A GPT's training step on random tokens, for a time budget to time (gpt_probe.c; train/recipe.h:
 * ag_recipe_probe): the model of cfg from seed, B windows of tokens drawn below cfg->vocab_size
 * from seed (each target the next token), split over `shards` threads (ag_gpt_shards_pass); a
 * step is forward, backward, the clip at 1 and AdamW at lr 1e-4 (t: the updates so far, this one
 * included; ag_gpt_probe_use: another ag_optimizer of optim.h, the run's), *loss its loss before
 * the update (loss may be NULL). *out NULL, the status and a message on failure (AG_ERR_NOMEM). */
typedef struct ag_gpt_probe ag_gpt_probe;
ag_status ag_gpt_probe_new(const ag_gpt_config *cfg, int B, uint64_t seed, int shards, ag_gpt_probe **out,
                           ag_error *err);
ag_status ag_gpt_probe_step(ag_gpt_probe *p, long t, double *loss, ag_error *err);
void ag_gpt_probe_use(ag_gpt_probe *p, int optimizer);
void ag_gpt_probe_free(ag_gpt_probe *p);   /* NULL ok */
/* The most shards, 1 to want, whose ag_gpt_train_bytes fit in have bytes (1 when none do). */
int ag_gpt_shards_that_fit(const ag_gpt_config *m, int B, int want, int ranks, double have);
/* bytes as "%.1f GB" (or TB from 1e12) in buf [24], for these figures' messages; returns buf. */
const char *ag_bytes_str(double bytes, char *buf);

/* What a training run asks of its shards (ag_gpt_shards_choose). */
typedef struct {
    int batch;          /* B, a step's windows: a pass has B / (ranks x accum) of them */
    int ranks, accum;   /* the job's ranks and each rank's micro-batches (--grad-accum) */
    int local;          /* the ranks on this machine, which share its memory */
    int asked;          /* the shards asked for (--shards), 0: the default (ag_gpt_shards_default) */
    double have;        /* the bytes this process may take (train.h: ag_machine_bytes; 0: unknown), */
    const char *room;   /*   as the messages name them ("this machine's 25.3 GB") */
} ag_gpt_shards_ask;
/* The shards of a training run's passes in *n: a's asked ones, refused (AG_ERR_ARG) when they
 * are more than a pass's windows or their ag_gpt_train_bytes exceed have; the default, lowered
 * to what fits (ag_gpt_shards_that_fit). Where the default is fewer than the threads (without
 * dropout) or was lowered, note [nn] gets a line saying why ("shards: 2, not 4 (one per
 * thread): a pass has no more windows"; two lines when both), else "". */
ag_status ag_gpt_shards_choose(const ag_gpt_config *m, const ag_gpt_shards_ask *a, int *n, char *note, size_t nn,
                               ag_error *err);
/* The shape a step's bytes depend on, for a message (train.h: ag_check_memory), in buf
 * [AG_GPT_SHAPE_LEN]: "block_size 64 x n_layer 4 (n_head 4, n_embd 128, batch 12)"; returns buf. */
#define AG_GPT_SHAPE_LEN 128
const char *ag_gpt_shape_str(const ag_gpt_config *m, int B, char *buf);

/* ---- KV cache for sampling: each new token costs one position ---- */
struct ag_kv_cache {
    int n_layer, H, D, T_max;
    int len;                 /* positions cached so far */
    ag_real *k, *v;          /* [n_layer, H, T_max, D] each, owned */
};
ag_kv_cache *ag_kv_cache_new(const ag_gpt *g); /* NULL on OOM */
void ag_kv_cache_free(ag_kv_cache *c);         /* NULL ok */
void ag_kv_cache_clear(ag_kv_cache *c);
/* Feeds one token at position cache->len (must be < block_size) through ag_gpt_forward's own
 * blocks in no-grad mode (opts.cache); returns its logits [V] in ctx and advances the cache.
 * The caller resets ctx between calls as it likes. */
ag_tensor *ag_gpt_forward_cached(ag_ctx *ctx, ag_gpt *g, ag_kv_cache *cache, int id);

/* ---- generation from a trained GPT (gpt_sample.c): token ids in, token ids out ----
 * The prompt is fed through a KV cache, then each new token costs one position: its logits are
 * divided by the temperature, all but the top_k largest are dropped (top_k 0 keeps all), and
 * the next token is drawn from the softmax with a seeded ag_rng, so the same seed gives the same
 * tokens. The model sees at most block_size positions; when the cache is full it is cleared and
 * the last ceil(block_size/2) tokens are fed again (positions restart at 0), so the context
 * slides in half-window steps and each token costs about two positions on average, not
 * block_size for a full recompute. Every switch (Post-LN, RMSNorm, --no-scale, ...) runs
 * through the cache: the cached step is the training block. Nothing prints: each token goes to
 * an emit callback as it is drawn; the vocabulary (what an id means) is the caller's. */
typedef struct {
    long max_new_tokens;   /* tokens to generate (>= 0) */
    double temperature;    /* > 0 */
    int top_k;             /* 0: off; >= V: off */
    uint64_t seed;
    const volatile sig_atomic_t *stop;   /* NULL, or: when *stop becomes non-zero, the generation
                                            ends after the token in hand (AG_OK) */
} ag_sample_opts;
/* Called with each new token id, in order; false stops the generation, which then fails with
 * AG_ERR_IO (the callback may say why first in the err it shares with the caller: the first
 * error sticks). */
typedef bool (*ag_emit_fn)(int id, void *user);
/* Called with the logits [V] (before the temperature) each new token is drawn from, just before
 * emit gets that token (serve shows the distribution beside the token). */
typedef void (*ag_seen_fn)(const ag_real *logits, int V, void *user);
/* prompt [n_prompt] ids in [0, V), n_prompt >= 1 (only its last block_size ids are fed). emit
 * and seen may be NULL; user goes to both. If out is not NULL it receives the new ids
 * [max_new_tokens] (fewer when stopped). AG_ERR_ARG for bad options or ids ("sampling: ...");
 * AG_ERR_NOMEM; AG_ERR_IO when emit stopped it; AG_ERR_NONFINITE for logits that are not finite;
 * an op's status. */
ag_status ag_gpt_generate(ag_gpt *g, const int *prompt, size_t n_prompt, const ag_sample_opts *o, ag_emit_fn emit,
                          ag_seen_fn seen, void *user, int *out, ag_error *err);
/* x, y [B,T] through g (ctx reset first; opts may be NULL) to their mean loss, as a number in
 * *loss (NaN on failure, with the status and "<what>: <the ctx's message>" in err). */
ag_status ag_gpt_loss(ag_ctx *ctx, ag_gpt *g, const int *x, const int *y, int B, int T, const ag_forward_opts *opts,
                      const char *what, double *loss, ag_error *err);
/* The deterministic loss of g on ids [n] (gpt_eval.c; char_lm eval's: ../shared/MODEL.md,
 * "Evaluation"): the sequence cut into consecutive windows of T+1 tokens starting at 0, T, 2T,
 * ... (T = block_size), every target of every whole window counted once, so *tokens =
 * T * floor((n - 1) / T), and *loss the mean cross-entropy over all of them. batch windows a
 * forward pass (no grad); the sum kept in double. AG_ERR_ARG when n < T + 1 (not one whole
 * window) or batch < 1; AG_ERR_NOMEM; an op's status ("eval: ..."). */
ag_status ag_gpt_eval_ids(ag_gpt *g, const int *ids, size_t n, int batch, double *loss, size_t *tokens,
                          ag_error *err);
/* One draw from logits [V] with temperature and top_k (ties with the k-th largest kept), using u
 * uniform in [0, 1): the first id whose cumulative weight passes u. scratch [2V]. Pure. */
int ag_sample_logits(const ag_real *logits, int V, double temperature, int top_k, double u, double *scratch);

/* ---- looking inside attention (gpt_attn.c): the weights of every layer and their summary ----
 * The weights come from the attention layer itself: ag_forward_opts' record_attention slots make
 * a forward store A = softmax(scale q k^T, masked) [B,H,T,T], on the composed path. */
/* The attention weights of every layer for ids [B*T] (no-grad mode for the call): A[l] gets
 * layer l's [B,H,T,T] weights in ctx (valid until ag_ctx_reset). A [n_layer]. The model's layers
 * are left as they were. On error NULL pointers and the ctx's status and message. */
ag_status ag_gpt_attn_record(ag_ctx *ctx, ag_gpt *g, const int *ids, int B, int T, ag_tensor **A);
/* --log-attn-stats: ag_gpt_attn_record of ids [B*T] into A [n_layer] (ctx reset before and after),
 * then ag_attn_stats of each layer l's weights into entropy[l], peak[l]. A failure: its status
 * and "attention statistics: <the ctx's message>" in err. */
ag_status ag_gpt_attn_layer_stats(ag_ctx *ctx, ag_gpt *g, const int *ids, int B, int T, ag_tensor **A,
                                  double *entropy, double *peak, ag_error *err);
/* Bytes recording takes for one prompt of T tokens: the forward at B=1 (ag_gpt_step_bytes) and
 * per layer the composed path's scores, scaled and masked scores and weights (4 H T^2 where the
 * fused path counts H T^2) with the causal mask T^2, and n_maps [T,T] more for the heat maps
 * drawn (a margin now: ag_plot_attention writes them from the weights without a copy; kept so
 * that the prompts char_lm attn refuses stay the same). */
double ag_gpt_attn_bytes(const ag_gpt_config *m, int T, int n_maps);
/* Over the causal rows of A [B,H,T,T] (query t sees keys 0..t): *entropy = the mean over rows
 * t >= 1, heads and batch of -sum_j a_j ln a_j (in [0, ln(t+1)]), and *peak = the mean over the
 * same rows of max_j a_j (in [1/(t+1), 1]). Row 0 (weight 1 on itself) is left out; with T = 1
 * it is all there is: entropy 0, peak 1. Cannot fail. */
void ag_attn_stats(const ag_real *A, int B, int H, int T, double *entropy, double *peak);
/* Every causal row of one layer's weights a [1,H,T,T] is a distribution (finite, summing to 1
 * within 1e-2 over keys 0..t); else AG_ERR_NONFINITE, "<what>: the attention weights of layer
 * <layer>, head h, query t are not finite or do not sum to 1 (sum): the model's weights are not
 * a usable model" (finite but absurd weights give NaN or rows of zeros). */
ag_status ag_attn_check(const ag_tensor *a, int layer, const char *what, ag_error *err);
/* What a head's causal map looks like (lesson 8's patterns): most of its weight on the query
 * itself, on the key before it, on position 0; spread out (uniform); or none of these (mixed). */
typedef enum { AG_ATTN_UNIFORM, AG_ATTN_SELF, AG_ATTN_PREVIOUS, AG_ATTN_FIRST, AG_ATTN_MIXED } ag_attn_pattern;
/* Their names in a token model's words: "uniform", "self (diagonal)", "previous token",
 * "first position (sink)", "mixed" (a program may name them its own way). */
extern const char *const ag_attn_pattern_names[AG_ATTN_MIXED + 1];
typedef struct {
    ag_attn_pattern pattern;
    double entropy;        /* mean over rows t >= 1 of -sum_j a_j ln a_j */
    double uniform;        /* the same mean for uniform rows, ln(t+1): the most a row can have */
    double peak;           /* mean over rows t >= 1 of max_j a_j */
} ag_attn_head;
/* One head's causal map a [T,T] (row t: query t, keys 0..t) summarized. Mean entropy 90% of the
 * uniform one or more: uniform; else the key that takes the most weight on average (self,
 * previous, first) when that is over 0.4, and mixed when none is. T = 1: uniform, entropy 0,
 * peak 1. */
void ag_attn_head_summary(const ag_real *a, int T, ag_attn_head *out);

#endif
