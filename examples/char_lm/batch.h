/* batch.h -- what char_lm trains on at a step: the batch of windows its sampler draws
 * (MODEL.md, "Vocabulary and data") and the seed of the step's dropout masks. Implemented in
 * train.c by the library's ag_windows_draw, ag_windows_fill (data/corpus.h) and ag_seed_at
 * (tensor/rng.h, stream LM_TAG_DROP), which a program that replays a run step for step
 * (examples/one_step, lesson 13 of docs/lessons) calls itself. */
#ifndef LM_BATCH_H
#define LM_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include "attograd.h"

/* off [B]: B window offsets, uniform in [0, n - T - 1] (MODEL.md), drawn from rng. */
void lm_draw_windows(size_t *off, int B, size_t n, int T, ag_rng *rng);
/* x, y [b,T]: the windows at off [b] of ids, and their targets (shifted by one token). */
void lm_fill_windows(int *x, int *y, const int *ids, const size_t *off, int b, int T);
/* The seed of the dropout masks of step it, from --seed's stream "dropout" (run.h). */
uint64_t lm_dropout_seed(uint64_t seed, long it);

#endif
