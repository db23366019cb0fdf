/* sample.h -- `char_lm sample`: a prompt of characters encoded with the model's vocabulary, then
 * the library's generation (nn.h: ag_gpt_generate, a KV cache, temperature, top-k, the sliding
 * window, an emit callback and a stop signal). Nothing prints. */
#ifndef LM_SAMPLE_H
#define LM_SAMPLE_H

#include "attograd.h"
#include "checkpoint.h"

typedef ag_sample_opts lm_sample_opts;
typedef ag_emit_fn lm_emit_fn;

/* Encodes prompt (UTF-8; NULL or "": a newline if the vocabulary has one, else token 0) with
 * the model's vocabulary and generates. A character outside the vocabulary is AG_ERR_ARG
 * ("--prompt: character 'é' (U+00E9) at position 3 ..."). *prompt_ids (malloc'd [*n_prompt],
 * may be NULL to skip) receives the encoded prompt. */
ag_status lm_sample_text(lm_model *m, const char *prompt, const lm_sample_opts *o, lm_emit_fn emit,
                         void *user, int **prompt_ids, size_t *n_prompt, ag_error *err);

/* serve.c: the model of `char_lm serve`, for the library's ag_serve_run (src/serve/serve.h) */
extern const ag_serve_client lm_serve_client;

#endif
