/* attn_heads.h -- one line per head for `char_lm attn`: what a head's map looks like, named
 * (lesson 8's patterns), with its mean entropy and peak. Nothing here prints. */
#ifndef LM_ATTN_HEADS_H
#define LM_ATTN_HEADS_H

#include "checkpoint.h"

typedef struct {
    const char *pattern;   /* "uniform", "self (diagonal)", "previous character", "first position (sink)", "mixed" */
    double entropy;        /* mean over rows t >= 1 of -sum_j a_j ln a_j */
    double uniform;        /* the same mean for uniform rows, ln(t+1): the most a row can have */
    double peak;           /* mean over rows t >= 1 of max_j a_j */
} lm_attn_head;

/* One head's causal map a [T,T] (row t: query t, keys 0..t) summarized. A row whose mean
 * entropy is 90% of the uniform one or more is "uniform"; else the head is named after the
 * key that takes the most weight on average (the query itself, the one before it, position 0)
 * when that is over 0.4, and "mixed" when none is. T = 1: "uniform", entropy 0, peak 1. */
void lm_attn_head_summary(const ag_real *a, int T, lm_attn_head *out);

/* The prompt's attention at `layer` (checked as lm_attn_draw checks it: call that first),
 * every head summarized into *out (malloc'd [n_head], the caller frees it; NULL on error).
 * AG_ERR_ARG / AG_ERR_NOMEM with err. */
ag_status lm_attn_heads(lm_model *m, const char *prompt, int layer, lm_attn_head **out, ag_error *err);

#endif
