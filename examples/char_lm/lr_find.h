/* lr_find.h -- the learning-rate range test (`char_lm train --lr-find LO`, lesson 16) and the
 * one fixed batch of --overfit-batch (lesson 17).
 *
 * The range test replaces the schedule: step it of max_iters takes
 *   lr(it) = LO (lr / LO)^(it / (max_iters - 1))        LO at the first step, --lr at the last,
 * the same factor up at every step, so the steps are spread evenly over ln lr. metrics.csv then
 * holds the loss of every step against its lr; lm_lr_find_read smooths it, finds where it
 * falls fastest per unit of ln lr (before it has doubled from its lowest: past that the run has
 * diverged and its slopes mean nothing), and draws lr_find.png. Nothing here prints. */
#ifndef LM_LR_FIND_H
#define LM_LR_FIND_H

#include "config.h"

/* lr(it) above; c->lr_find > 0. Cannot fail. */
double lm_lr_find_at(const lm_config *c, long it);

/* The sampler of --overfit-batch: seeded from c->seed alone, so every step draws the same
 * windows. */
ag_rng lm_overfit_rng(const lm_config *c);

typedef struct {
    int steps;             /* rows read */
    double steepest_lr;    /* where the smoothed loss falls fastest per unit of ln lr */
    double steepest_slope; /* that slope: d loss / d ln lr (negative) */
    double min_lr;         /* where the smoothed loss is lowest */
    double min_loss;       /* its value */
    double diverged_lr;    /* the first lr where the smoothed loss is twice its lowest (0: never) */
} lm_lr_find_result;

/* Reads dir/metrics.csv (iter, lr, loss per step), fills *r, writes dir/lr_find.csv (lr, loss,
 * smoothed loss) and draws dir/lr_find.png with gnuplot (when it is there: plot.h). AG_ERR_IO
 * when the file cannot be read, AG_ERR_ARG when it has fewer than 10 steps. */
ag_status lm_lr_find_read(const char *dir, lm_lr_find_result *r, ag_error *err);

#endif
