/* attn.h -- `char_lm attn`: the attention of one layer for a prompt of characters, drawn as heat
 * maps and named per head, on the library's recording, statistics and pictures (nn.h:
 * ag_gpt_attn_record, ag_attn_stats, ag_attn_head_summary; train/plot_attn.h: ag_plot_attention).
 * Nothing here prints or exits. */
#ifndef LM_ATTN_H
#define LM_ATTN_H

#include "attograd.h"
#include "attn_heads.h"
#include "checkpoint.h"

/* `char_lm attn`: encodes the prompt (every character in the vocabulary, at most block_size of
 * them), checks layer (0 .. n_layer-1) and head (0 .. n_head-1, or -1: every head in a grid),
 * refuses (AG_ERR_NOMEM, with the figure) a prompt whose ag_gpt_attn_bytes exceed the machine's
 * memory before allocating any of it, names the layer's every head into heads [n_head] (NULL:
 * not; attn_heads.h) and draws png (ag_plot_attention), from one recording. AG_ERR_ARG for a
 * bad argument, AG_ERR_IO when the files cannot be written or gnuplot fails (err says which). */
ag_status lm_attn_draw(lm_model *m, const char *prompt, int layer, int head, const char *png, lm_attn_head *heads,
                       ag_error *err);

/* The label of a character on the heat map's axes: itself, or "\n", "\t", "␣" (space), "\r",
 * "U+0001" for other control characters. out holds at least 8 bytes. */
void lm_attn_label(uint32_t cp, char out[16]);

/* The heads' patterns in char_lm's words ("previous character"), by ag_attn_pattern. */
extern const char *const lm_attn_patterns[AG_ATTN_MIXED + 1];

#endif
