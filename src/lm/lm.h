/* lm.h -- language models on the library: the pieces a program around a GPT needs that sit
 * above both the trainer (src/train, which names no model) and the nets (src/nn). Two parts:
 *
 *   a GPT on the trainer's tools (gpt.c): its training run checked against the machine's memory
 *     and the checkpoint's size (ag_gpt_check_train), its attention recorded and drawn
 *     (ag_gpt_plot_attention, on train/plot_attn.h's heat maps);
 *   a GPT over characters (chars.c; char_lm's sample, eval, attn and --trace-shapes): its text
 *     encoded with the model's vocabulary (data/corpus.h: ag_vocab; a character outside it is
 *     AG_ERR_ARG, "--prompt: character 'é' (U+00E9) at position 3 ..."), then the library's
 *     tools for a GPT (nn.h: ag_gpt_generate, ag_gpt_eval_ids; ag_gpt_plot_attention; nn/trace.h:
 *     ag_gpt_trace).
 *
 * Nothing exits; only ag_chars_print and the traces print, on the FILE they are given. */
#ifndef AG_LM_H
#define AG_LM_H

#include <stdint.h>
#include <stdio.h>
#include "../data/corpus.h"
#include "../nn/nn.h"
#include "../train/plot_attn.h"

// --- a GPT on the trainer's tools (gpt.c) ---

/* Both for a GPT's training run (nn.h) of batch B on each of `ranks` ranks of this machine, before
 * anything of that size exists: ag_gpt_train_bytes at one shard, then Adam's state
 * (ag_gpt_min_params parameters), the shape and the model named as char_lm's messages name them. */
ag_status ag_gpt_check_train(const ag_gpt_config *m, int B, int ranks, const char *who, ag_error *err);
/* One sequence ids [p->T] through g, its attention recorded (nn.h: ag_gpt_attn_record) and
 * checked (ag_attn_check), layer p->layer's every head summarized into heads [n_head] (NULL:
 * not; ag_attn_head_summary) and drawn into png as ag_plot_attention draws p, whose A and H are
 * filled here. A failure's message begins "<cmd>: " ("attn: out of memory"). */
ag_status ag_gpt_plot_attention(ag_gpt *g, const int *ids, const char *png, ag_attn_picture *p, ag_attn_head *heads,
                                const char *cmd, ag_error *err);

// --- a GPT over characters (chars.c) ---

/* sample: prompt (UTF-8; NULL or "": a newline if the vocabulary has one, else token 0) encoded
 * with v, then generated from (ag_gpt_generate; each new id to emit). */
ag_status ag_chars_generate(ag_gpt *g, const ag_vocab *v, const char *prompt, const ag_sample_opts *o,
                            ag_emit_fn emit, void *user, ag_error *err);
/* The same on out (stdout in messages): the prompt as given (a bad one fails before anything is
 * printed), each new character as it comes, then a newline when anything went out. */
ag_status ag_chars_print(FILE *out, ag_gpt *g, const ag_vocab *v, const char *prompt, const ag_sample_opts *o,
                         ag_error *err);

/* eval: the deterministic loss of g on a file (../shared/MODEL.md, "Evaluation"), its characters
 * (one outside v is AG_ERR_ARG, naming it and its position) cut into windows,
 * AG_CHARS_EVAL_BATCH a forward pass (AG_ERR_ARG "<path>: ..." when shorter than one window). */
#define AG_CHARS_EVAL_BATCH 16
ag_status ag_chars_eval_file(ag_gpt *g, const ag_vocab *v, const char *path, double *loss, size_t *tokens,
                             ag_error *err);

/* The heads' patterns (nn.h: ag_attn_head_summary's) in a character model's words:
 * ag_attn_pattern_names with "previous character" for "previous token". */
extern const char *const ag_chars_pattern_names[AG_ATTN_MIXED + 1];
/* The label of a character on a heat map's axes: itself, or "\n", "\t", "␣" (space), "\r",
 * "U+0001" for other control characters. */
void ag_chars_label(uint32_t cp, char out[16]);
/* attn: encodes the prompt (every character in v, at most block_size of them), checks layer
 * (0 .. n_layer-1) and head (0 .. n_head-1, or -1: every head in a grid), refuses (AG_ERR_NOMEM,
 * with the figure) a prompt whose ag_gpt_attn_bytes exceed the machine's memory before
 * allocating any of it, names the layer's every head into heads [n_head] (NULL: not) and draws
 * png, its axes labelled with the prompt's characters (ag_gpt_plot_attention, "<program> attn"
 * in its title). AG_ERR_ARG for a bad argument ("--layer", "--head", "--prompt", "--out"),
 * AG_ERR_IO when the files cannot be written or gnuplot fails (err says which). */
ag_status ag_chars_attention(ag_gpt *g, const ag_vocab *v, const char *prompt, int layer, int head, const char *png,
                             ag_attn_head *heads, ag_error *err);

/* --trace-shapes on out: the forward over the prompt (its last block_size characters; NULL or "":
 * a newline), as sampling feeds it; graph: also ag_trace_graph's dot file there (NULL: none). */
ag_status ag_chars_trace_prompt(FILE *out, ag_gpt *g, const ag_vocab *v, const char *prompt, const char *graph,
                                ag_error *err);
/* The same over the first windows of the file at path (ag_gpt_trace_windows), as eval reads it. */
ag_status ag_chars_trace_file(FILE *out, ag_gpt *g, const ag_vocab *v, const char *path, const char *graph,
                              ag_error *err);

#endif
