/* sample.h -- text generation from a trained model, one character at a time.
 *
 * The prompt is fed through a KV cache (src/nn/nn.h), then each new token costs one position:
 * its logits are divided by the temperature, all but the top_k largest are dropped (top_k 0
 * keeps all), and the next token is drawn from the softmax with a seeded ag_rng, so the same
 * seed gives the same text. The model sees at most block_size positions; when the cache is
 * full, it is cleared and the last ceil(block_size/2) tokens are fed again (positions restart at
 * 0), so the context slides in half-window steps and each token still costs about two
 * positions on average, instead of block_size for a full recompute. Every switch (Post-LN,
 * RMSNorm, --no-scale, ...) runs through the cache: the cached step is the training block.
 *
 * Nothing prints: each token is handed to an emit callback as it is drawn; the callback stops
 * the generation by returning false (the output cannot be written), and so does a stop signal
 * (opts.stop), within one token. */
#ifndef LM_SAMPLE_H
#define LM_SAMPLE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include "attograd.h"
#include "checkpoint.h"

typedef struct {
    long max_new_tokens;   /* tokens to generate (>= 0) */
    double temperature;    /* > 0 */
    int top_k;             /* 0: off; >= V: off */
    uint64_t seed;
    const volatile sig_atomic_t *stop;   /* NULL, or: when *stop becomes non-zero, the generation
                                            ends after the token in hand (AG_OK) */
} lm_sample_opts;

/* Called with each new token id, in order; returns false to stop the generation, which then
 * fails with AG_ERR_IO (the callback says why in the err it shares with the caller, if it
 * wants its own words: the first error sticks). */
typedef bool (*lm_emit_fn)(int id, void *user);

/* prompt [n_prompt] ids in [0, V), n_prompt >= 1. If out is not NULL it receives the new ids
 * [max_new_tokens] (fewer when stopped). AG_ERR_ARG for bad options or ids; AG_ERR_NOMEM;
 * AG_ERR_IO when emit stopped it; an op's status. */
ag_status lm_generate(ag_gpt *g, const int *prompt, size_t n_prompt, const lm_sample_opts *o,
                      lm_emit_fn emit, void *user, int *out, ag_error *err);

/* Called with the logits [V] (before the temperature) that each new token is drawn from, just
 * before emit gets that token (`char_lm serve` shows the distribution beside the character). */
typedef void (*lm_seen_fn)(const ag_real *logits, int V, void *user);
/* lm_generate, telling seen (NULL: nobody) each distribution; the same tokens for the same seed. */
ag_status lm_generate_seen(ag_gpt *g, const int *prompt, size_t n_prompt, const lm_sample_opts *o,
                           lm_emit_fn emit, lm_seen_fn seen, void *user, int *out, ag_error *err);

/* Encodes prompt (UTF-8; NULL or "": a newline if the vocabulary has one, else token 0) with
 * the model's vocabulary and generates. A character outside the vocabulary is AG_ERR_ARG
 * ("--prompt: character 'é' (U+00E9) at position 3 ..."). *prompt_ids (malloc'd [*n_prompt],
 * may be NULL to skip) receives the encoded prompt. */
ag_status lm_sample_text(lm_model *m, const char *prompt, const lm_sample_opts *o, lm_emit_fn emit,
                         void *user, int **prompt_ids, size_t *n_prompt, ag_error *err);

/* One draw from logits [V] with temperature and top_k, using u uniform in [0, 1). Pure. */
int lm_sample_logits(const ag_real *logits, int V, double temperature, int top_k, double u, double *scratch);

/* serve.c: the model of `char_lm serve`, for the library's ag_serve_run (src/serve/serve.h) */
extern const ag_serve_client lm_serve_client;

#endif
