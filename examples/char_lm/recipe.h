/* recipe.h -- `train --time-budget D` without --config: the recipe follows the compute (issue 36).
 *
 * The budget presets (config.c: 1min, 5min, 10min) were tuned at one machine's step speed, and
 * a recipe needs a number of STEPS, not of minutes: the 10-minute one (context 256) won with the
 * ~11,000 steps it gets in 10 minutes on the developers' machine and lost, to the 5-minute
 * one, with the 6,651 it got on a machine 1.6x slower. So the choice goes by steps:
 *
 *   1. measure: a few training steps of the reference recipe (lm_recipes[LM_RECIPE_PROBE]) on
 *      random tokens, with the run's threads, for about 2% of the budget (lm_recipe_probe);
 *   2. predict: every recipe's step time is the reference's times the ratio of their training
 *      FLOPs (lm_recipe_flops, the model of bench/budget_sweep.sh);
 *   3. pick: the largest recipe that gets at least its min_steps (lm_recipe_pick).
 * The probe loop, the prediction, the pick and the line are the library's (train/recipe.h); the
 * GPT part is here: the recipes, their FLOPs, the step the probe times. The table and where each
 * threshold comes from: docs/performance.md, "The recipe follows the compute".
 *
 * The chosen recipe is written into the run's config as a preset would be (given flags still
 * override it), and every checkpoint carries that config: --resume continues it exactly, and
 * does not choose again. */
#ifndef LM_RECIPE_H
#define LM_RECIPE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include "attograd.h"
#include "config.h"
#include "dist/dist.h"

typedef struct {
    const char *name;        /* "S", "M", "L": what the choice line names */
    const char *preset;      /* its hyper-parameters: config.c's preset of this name */
    long min_steps;          /* taken when it gets at least this many steps in the budget */
} lm_recipe;

#define LM_N_RECIPES 3
#define LM_RECIPE_PROBE 1    /* the recipe whose steps the probe times (M) */
extern const lm_recipe lm_recipes[LM_N_RECIPES];

typedef ag_recipe_choice lm_recipe_choice;   /* pick, budget_s, probe_s, step_s[], steps[] */

/* Training FLOPs of one step of c (forward and backward; the attention products counted twice,
 * they run at about half the rate of the other products; dropout 1.1x): per token
 * 6 (12 L C^2 + 2 C V) + 24 L T C, times B T. */
double lm_recipe_flops(const lm_config *c, int V);

/* The choice for a budget of budget_s seconds, probe_s of which the probe took, measuring the
 * reference recipe's step at probe_step_s (ag_recipe_pick over lm_recipes, their FLOPs the costs). */
void lm_recipe_pick(double budget_s, double probe_s, double probe_step_s, lm_recipe_choice *ch);

/* The one line that says the choice and why (ag_recipe_line), e.g. "time budget 10m00s at 0.0365 s a
 * step: about 15,512 steps -> recipe M (4 x 96, context 128); L would get 5,416, it needs 9,000". */
void lm_recipe_line(char *buf, size_t n, const lm_recipe_choice *ch);

/* cfg becomes the picked recipe's preset, then every field given[] marks is taken back from
 * the flags (cfg as parsed), time_budget included; lr_decay_iters follows max_iters unless
 * given. Validated: AG_ERR_ARG and a message when the flags do not fit the recipe. */
ag_status lm_recipe_apply(lm_config *cfg, const bool *given, int pick, ag_error *err);

/* The reference recipe's step time on this machine (ag_recipe_probe): its steps on random tokens
 * (vocabulary V), forward, backward and AdamW as char_lm trains them, the ranks of d sharing the
 * mean. AG_ERR_NOMEM and a message when a model cannot be made. When *stop turns non-zero (a
 * signal; stop may be NULL) it ends after the step in hand, and *step_s is 0 on every rank. */
ag_status lm_recipe_probe(ag_dist *d, int V, double budget_s, const volatile sig_atomic_t *stop, double *step_s,
                          ag_error *err);

#endif
