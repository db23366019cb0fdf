/* batch.h -- what char_lm trains on at a step: the batch of windows its sampler draws
 * (MODEL.md, "Vocabulary and data") and the seed of the step's dropout masks. Public to the
 * programs that replay a run step for step (examples/one_step, lesson 13 of docs/lessons);
 * implemented in train.c, whose step calls exactly these. And one thing the step does to the
 * gradient besides the clip (lm_exact_zero_grads). */
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
/* After the backward, before the clip: the keys' bias of attention gets its exact gradient, 0.
 * It adds q . b_k to every score of a row, and a softmax does not change when its row moves by
 * a constant (with --mask-fill -1e9 the masked weights stay exp(-1e9) = 0 in any float). What
 * the backward leaves there is rounding noise, which Adam divides by its eps into steps of up
 * to lr/100: the bias wandered 1e-3 in 1,500 steps, along a path set by the order of the sums
 * (so runs on N ranks parted there). Its exact gradient keeps it where it started, in every
 * run alike (docs/distributed.md). */
void lm_exact_zero_grads(ag_params *P);

#endif
