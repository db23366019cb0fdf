/* attn.h -- looking inside attention: the weights of one layer for a prompt (`char_lm attn`
 * draws them as heat maps) and the summary statistics --log-attn-stats writes per layer.
 *
 * The weights come from the attention layer itself: ag_forward_opts' `record_attention` slots
 * make a forward store A = softmax(scale q k^T, masked) [B,H,T,T], taking the composed path (the fused
 * kernel keeps A only in its own backward buffer). Nothing here prints or exits. */
#ifndef LM_ATTN_H
#define LM_ATTN_H

#include "attograd.h"
#include "checkpoint.h"

/* Over the causal rows of A [B,H,T,T] (query t sees keys 0..t): *entropy = the mean over rows
 * t >= 1, heads and batch of -sum_j a_j ln a_j (in [0, ln(t+1)]), and *peak = the mean over the
 * same rows of max_j a_j (in [1/(t+1), 1]). Row 0 (weight 1 on itself) is left out; with T = 1
 * it is all there is: entropy 0, peak 1. Cannot fail. */
void lm_attn_stats(const ag_real *A, int B, int H, int T, double *entropy, double *peak);

/* The attention weights of every layer for ids [B*T] (no-grad mode): A[l] gets a pointer to
 * layer l's [B,H,T,T] weights in ctx (valid until ag_ctx_reset). A [n_layer]. The model's
 * layers are left as they were. On error NULL pointers and the ctx error. */
ag_status lm_attn_record(ag_ctx *ctx, ag_gpt *g, const int *ids, int B, int T, ag_tensor **A);

/* Bytes `attn` holds for a prompt of T characters: the forward at B=1 (lm_step_bytes, with
 * every layer's [1,H,T,T] weights, which it keeps) and the n_maps [T,T] heat maps drawn. */
double lm_attn_bytes(const ag_gpt_config *m, int T, int n_maps);

/* `char_lm attn`: encodes the prompt (every character in the vocabulary, at most block_size of
 * them), checks layer (0 .. n_layer-1) and head (0 .. n_head-1, or -1: every head in a grid),
 * refuses (AG_ERR_NOMEM, with the figure) a prompt whose lm_attn_bytes exceed the machine's
 * memory before allocating any of it, and draws png (see lm_plot_attention). AG_ERR_ARG for a
 * bad argument, AG_ERR_IO when the files cannot be written or gnuplot fails (err says which). */
ag_status lm_attn_draw(lm_model *m, const char *prompt, int layer, int head, const char *png, ag_error *err);

/* The label of a character on the heat map's axes: itself, or "\n", "\t", "␣" (space), "\r",
 * "U+0001" for other control characters. out holds at least 8 bytes. */
void lm_attn_label(uint32_t cp, char out[16]);

#endif
