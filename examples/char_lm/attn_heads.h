/* attn_heads.h -- one line per head for `char_lm attn`: what a head's map looks like, named
 * (lesson 8's patterns, nn.h: ag_attn_head_summary), with its mean entropy and peak. */
#ifndef LM_ATTN_HEADS_H
#define LM_ATTN_HEADS_H

#include "checkpoint.h"

typedef struct {
    const char *pattern;   /* lm_attn_patterns': "uniform", "self (diagonal)", "previous character", ... */
    double entropy, uniform, peak;   /* as ag_attn_head's */
} lm_attn_head;

/* ag_attn_head_summary of a [T,T], the pattern in char_lm's words. */
void lm_attn_head_summary(const ag_real *a, int T, lm_attn_head *out);

#endif
