/* tools.h -- char_lm's commands beside train, on the library's tools for a GPT: sample
 * (nn.h: ag_gpt_generate), eval (ag_gpt_eval_ids), attn (ag_gpt_attn_record,
 * ag_attn_head_summary; train/plot_attn.h: ag_plot_attention) and serve's model
 * (serve/serve.h), each on the model's characters. Nothing here
 * exits; only lm_sample_print prints, on the FILE it is given. */
#ifndef LM_TOOLS_H
#define LM_TOOLS_H

#include <stdbool.h>
#include <stdio.h>
#include "attograd.h"
#include "checkpoint.h"

/* sample: prompt (UTF-8; NULL or "": a newline if the vocabulary has one, else token 0) encoded
 * with the model's vocabulary, then generated from. A character outside it is AG_ERR_ARG
 * ("--prompt: character 'é' (U+00E9) at position 3 ..."). *prompt_ids (malloc'd [*n_prompt],
 * may be NULL to skip) receives the encoded prompt. */
ag_status lm_sample_text(lm_model *m, const char *prompt, const ag_sample_opts *o, ag_emit_fn emit, void *user,
                         int **prompt_ids, size_t *n_prompt, ag_error *err);
/* The same on out (stdout in messages): the prompt as given (a bad one fails before anything is
 * printed), each new character as it comes, then a newline when anything went out. */
ag_status lm_sample_print(FILE *out, lm_model *m, const char *prompt, const ag_sample_opts *o, ag_error *err);

/* eval: the deterministic loss of the model on a file (../shared/MODEL.md, "Evaluation"), its
 * characters (one outside the vocabulary is AG_ERR_ARG, naming it and its position) cut into
 * windows, LM_EVAL_BATCH a forward pass (AG_ERR_ARG when shorter than one window). */
#define LM_EVAL_BATCH 16
ag_status lm_eval_file(lm_model *m, const char *path, double *loss, size_t *tokens, ag_error *err);

/* attn: the heads' patterns (ag_attn_head_summary's) in char_lm's words ("previous character"). */
extern const char *const lm_attn_patterns[AG_ATTN_MIXED + 1];

/* attn: encodes the prompt (every character in the vocabulary, at most block_size of them),
 * checks layer (0 .. n_layer-1) and head (0 .. n_head-1, or -1: every head in a grid), refuses
 * (AG_ERR_NOMEM, with the figure) a prompt whose ag_gpt_attn_bytes exceed the machine's memory
 * before allocating any of it, names the layer's every head into heads [n_head] (NULL: not) and
 * draws png, from one recording (train/plot_attn.h: ag_gpt_plot_attention). AG_ERR_ARG for a bad argument, AG_ERR_IO when the files cannot
 * be written or gnuplot fails (err says which). */
ag_status lm_attn_draw(lm_model *m, const char *prompt, int layer, int head, const char *png, ag_attn_head *heads,
                       ag_error *err);
/* The label of a character on the heat map's axes: itself, or "\n", "\t", "␣" (space), "\r",
 * "U+0001" for other control characters. out holds at least 8 bytes. */
void lm_attn_label(uint32_t cp, char out[16]);

/* serve.c: the model of `char_lm serve`, for the library's ag_serve_run */
extern const ag_serve_client lm_serve_client;

#endif
