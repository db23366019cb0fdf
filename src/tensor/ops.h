/* ops.h -- every differentiable op, one per file in ops/, each with its shape contract.
 *
 * Common contract for every op below:
 *   - returns a new contiguous tensor in ctx, valid until ag_ctx_reset; inputs are not modified;
 *   - when grad mode is on and an input requires grad, records a tape node whose backward adds
 *     (+=) into the inputs' grads;
 *   - on error returns NULL and sets the ctx error (first error sticks); a NULL input returns
 *     NULL and keeps the earlier message. The tape is unchanged on error.
 * Shapes use MODEL.md's letters: B batch, T time, C channels, H heads, D = C/H, V vocab. */
#ifndef AG_OPS_H
#define AG_OPS_H

#include "tensor.h"

/* ---- shape ops (ops/reshape.c) ---- */
/* A view of x with a new shape of the same numel: shares data, no copy. */
ag_tensor *ag_reshape(ag_ctx *ctx, ag_tensor *x, int ndim, const int *shape);
/* [..., M, N] -> [..., N, M]: an explicit copy. */
ag_tensor *ag_transpose(ag_ctx *ctx, ag_tensor *x);

/* ---- matmul (ops/matmul.c) ---- */
/* a [..., M, K] @ b [..., K, N] -> [..., M, N]. Leading dims of a and b must be equal (a batch
 * of products, e.g. [B,H,T,D] @ [B,H,D,T]), or b is 2-D and is shared by every batch entry. */
ag_tensor *ag_matmul(ag_ctx *ctx, ag_tensor *a, ag_tensor *b);

/* ---- linear (ops/linear.c) ---- */
/* x [..., in] W [out, in] b [out] or NULL -> y = x W^T + b, [..., out]. W in PyTorch layout. */
ag_tensor *ag_linear(ag_ctx *ctx, ag_tensor *x, ag_tensor *W, ag_tensor *b);

/* ---- elementwise (ops/add.c, ops/scale.c) ---- */
/* a [...] + b: b has a's shape, or a's trailing dims (a bias [C], positions [T,C]) and is
 * broadcast over the leading ones; its gradient is summed back to its own shape. */
ag_tensor *ag_add(ag_ctx *ctx, ag_tensor *a, ag_tensor *b);
/* x [...] * s (s a constant, e.g. 1/sqrt(D)) -> [...]. */
ag_tensor *ag_scale(ag_ctx *ctx, ag_tensor *x, ag_real s);

/* ---- softmax (ops/softmax.c) ---- */
/* Softmax over the last dim, max subtracted: [..., N] -> [..., N]. A row whose entries are all
 * -inf (fully masked) gives all zeros and zero gradient, not NaN. */
ag_tensor *ag_softmax(ag_ctx *ctx, ag_tensor *x);

/* ---- masked_fill (ops/masked_fill.c) ---- */
/* y = x where mask != 0, else value (usually -INFINITY); x's shape. The mask broadcasts as in
 * PyTorch: its dims line up with x's last dims and each equals x's or is 1. Over scores
 * [B,H,T,T]: a causal [T,T] or [1,1,T,T], a key-padding [B,1,1,T], a combined [B,1,T,T]. It
 * gets no gradient. Another mask shape: AG_ERR_SHAPE "ag_masked_fill: mask [3,4] cannot
 * broadcast to x [2,2,4,4] ...". */
ag_tensor *ag_masked_fill(ag_ctx *ctx, ag_tensor *x, ag_tensor *mask, ag_real value);
/* A new [T,T] tensor with 1 where j <= i (position i sees 0..i), 0 above the diagonal. Its
 * KIND is known: it is named "causal_mask" (its name field, through a pointer that no other
 * tensor gets; a view by ag_reshape keeps it, with the same numbers), so ag_is_causal_mask
 * recognizes it without reading T x T numbers, and attention (src/nn/attention.c) knows from
 * that that its fast twin applies. Read it, do not write into it: a changed one would still be
 * taken for causal (copy it into a tensor of your own to change it). A mask built any other
 * way, even with the same numbers, has no kind: it goes through ag_masked_fill, op by op, to
 * the same result. */
ag_tensor *ag_causal_mask(ag_ctx *ctx, int T);
/* true when m was made by ag_causal_mask(ctx, T) for this T (a test of its kind: no element is
 * read); false for NULL and every other tensor. Cannot fail. */
bool ag_is_causal_mask(const ag_tensor *m, int T);
/* key_padding [B,T] (1 = a real token, 0 = padding) and mask [T,T] (a causal mask) or NULL ->
 * a new [B,1,T,T] tensor, 1 where query i of sequence b may attend to key j: mask[i,j] != 0
 * (or no mask) and key_padding[b,j] != 0. It broadcasts over the heads of scores [B,H,T,T]. A
 * query whose keys are all masked gets a row of zeros (zero weights under -inf: see
 * ag_softmax). Other shapes: AG_ERR_SHAPE. */
ag_tensor *ag_key_padding_mask(ag_ctx *ctx, const ag_tensor *key_padding, const ag_tensor *mask);

/* ---- layernorm (ops/layernorm.c) ---- */
/* LayerNorm over the last dim: x [..., C], w [C], b [C] -> [..., C]; biased variance. */
ag_tensor *ag_layernorm(ag_ctx *ctx, ag_tensor *x, ag_tensor *w, ag_tensor *b, ag_real eps);

/* ---- gelu (ops/gelu.c) ---- */
/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), elementwise. */
ag_tensor *ag_gelu(ag_ctx *ctx, ag_tensor *x);

/* ---- embedding (ops/embedding.c) ---- */
/* W [V, C], ids [B*T] (ints in [0, V)) -> [B, T, C]; rows of W gathered, gradient
 * scatter-added. ids are copied into the ctx. An id out of range is an AG_ERR_ARG. */
ag_tensor *ag_embedding(ag_ctx *ctx, ag_tensor *W, const int *ids, int B, int T);

/* ---- cross_entropy (ops/cross_entropy.c) ---- */
/* logits [..., V], targets [rows] in [0, V) -> scalar [1]: the mean over rows of
 * -log softmax(logits)[target], with a stable log-sum-exp. Targets are copied into the ctx. */
ag_tensor *ag_cross_entropy(ag_ctx *ctx, ag_tensor *logits, const int *targets);
/* The same, where a row whose target is ignore_index (a padded position; PyTorch's default is
 * -100) is left out: no loss, zero gradient, and the mean is over the other rows. Every other
 * target must be in [0, V). With every row ignored the loss is 0 and the gradient zero
 * (PyTorch's mean gives 0/0 = NaN there; its gradient is zero). */
ag_tensor *ag_cross_entropy_ignore(ag_ctx *ctx, ag_tensor *logits, const int *targets, int ignore_index);

/* ---- dropout (ops/dropout.c) ---- */
/* Inverted dropout: zero each element with probability p and scale the rest by 1/(1-p).
 * The mask is drawn from `seed` (same seed, same mask). Identity when !train or p == 0.
 * p must be in [0, 1). */
ag_tensor *ag_dropout(ag_ctx *ctx, ag_tensor *x, ag_real p, uint64_t seed, bool train);

/* ---- heads (ops/heads.c) ---- */
/* [B, T, C] -> [B, H, T, D] with D = C/H: head h takes channels h*D .. h*D+D-1. */
ag_tensor *ag_split_heads(ag_ctx *ctx, ag_tensor *x, int H);
/* [B, H, T, D] -> [B, T, H*D]: the inverse of ag_split_heads. */
ag_tensor *ag_merge_heads(ag_ctx *ctx, ag_tensor *x);

/* ---- rmsnorm (ops/rmsnorm.c) ---- */
/* RMSNorm over the last dim: x [..., C], w [C] -> [..., C],
 * y = x / sqrt(mean_c(x^2) + eps) * w (no centring, no bias). eps must be > 0 (AG_ERR_ARG).
 * w not [C]: AG_ERR_SHAPE, e.g. "ag_rmsnorm: x [2,3,8], w [4] (need w [C] ...)". */
ag_tensor *ag_rmsnorm(ag_ctx *ctx, ag_tensor *x, ag_tensor *w, ag_real eps);

/* ---- mul (ops/mul.c) ---- */
/* a [...] * b [...] elementwise -> [...]; a and b must have the same shape (no broadcasting:
 * AG_ERR_SHAPE "ag_mul: shapes differ: [2,3] * [3,2] ..."). a == b (x * x) is fine. */
ag_tensor *ag_mul(ag_ctx *ctx, ag_tensor *a, ag_tensor *b);

/* ---- rope (ops/rope.c) ---- */
/* Rotary position embedding: x [B,T,C] of H heads -> [B,T,C], each head's channel pair
 * (2i, 2i+1) of the token at position pos0 + t turned by the angle (pos0 + t) 10000^(-2i/D).
 * Applied to q and k, it makes their dot product depend on the positions' difference only.
 * AG_ERR_SHAPE unless x is [B,T,C], H divides C, D = C/H is even and pos0 >= 0. */
ag_tensor *ag_rope(ag_ctx *ctx, ag_tensor *x, int H, int pos0);

/* ---- silu (ops/silu.c) ---- */
/* x * sigmoid(x), elementwise: [...] -> [...]. Finite for every finite x (silu(-1000) = 0,
 * silu(1000) = 1000): the sigmoid never computes exp of a large positive number. */
ag_tensor *ag_silu(ag_ctx *ctx, ag_tensor *x);

#endif
