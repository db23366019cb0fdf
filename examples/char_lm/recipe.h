/* recipe.h -- `train --time-budget D` without --config: the recipe follows the compute (issue 36).
 *
 * The budget presets (config.c: 1min, 5min, 10min) were tuned at one machine's step speed, and
 * a recipe needs a number of STEPS, not of minutes: the 10-minute one (context 256) won with the
 * ~11,000 steps it gets in 10 minutes on the developers' machine and lost, to the 5-minute
 * one, with the 6,651 it got on a machine 1.6x slower. So the choice goes by steps:
 *
 *   1. measure: a few training steps of the reference recipe (lm_recipes[LM_RECIPE_PROBE]) on
 *      random tokens, with the run's threads, timed after 3 warm-up steps, for about 2%
 *      of the budget (lm_recipe_probe); that time counts against the budget;
 *   2. predict: every recipe's step time is the reference's times the ratio of their training
 *      FLOPs (lm_recipe_flops, the model of bench/budget_sweep.sh), and the steps it gets are
 *      what is left of the budget, less a reserve for evaluations and checkpoints, over it;
 *   3. pick: the last recipe of the table (they grow) that gets at least its min_steps, else
 *      the first (lm_recipe_pick). The table and where each threshold comes from:
 *      docs/performance.md, "The recipe follows the compute".
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

typedef struct {
    int pick;                        /* index into lm_recipes */
    double budget_s;                 /* the whole budget */
    double probe_s;                  /* the probe's time, spent of the budget */
    double step_s[LM_N_RECIPES];     /* each recipe's predicted step time */
    long steps[LM_N_RECIPES];        /* the steps each would get */
} lm_recipe_choice;

/* Training FLOPs of one step of c (forward and backward; the attention products counted twice,
 * they run at about half the rate of the other products; dropout 1.1x): per token
 * 6 (12 L C^2 + 2 C V) + 24 L T C, times B T. */
double lm_recipe_flops(const lm_config *c, int V);

/* The choice for a budget of budget_s seconds, probe_s of which the probe took, measuring the
 * reference recipe's step at probe_step_s. Deterministic: a test gives it the numbers. */
void lm_recipe_pick(double budget_s, double probe_s, double probe_step_s, lm_recipe_choice *ch);

/* The one line that says the choice and why, e.g. "time budget 10m at 0.0365 s a step (recipe M):
 * about 16,000 steps -> recipe M (4 x 96, context 128); L would get 6,400, it needs 10,000". */
void lm_recipe_line(char *buf, size_t n, const lm_recipe_choice *ch);

/* cfg becomes the picked recipe's preset, then every field given[] marks is taken back from
 * the flags (cfg as parsed), time_budget included; lr_decay_iters follows max_iters unless
 * given. Validated: AG_ERR_ARG and a message when the flags do not fit the recipe. */
ag_status lm_recipe_apply(lm_config *cfg, const bool *given, int pick, ag_error *err);

/* The reference recipe's step time on this machine: steps of it on random tokens (vocabulary
 * V), forward, backward and AdamW as char_lm trains them, the first CAL_SKIP not timed, then
 * timed until they add up to `seconds` (at least 3 of them). Every rank of d times its own and
 * they share the mean, so all choose alike. AG_ERR_NOMEM and a message when a model cannot be made.
 * When *stop turns non-zero (a signal; stop may be NULL) it ends after the step in hand, and
 * *step_s is 0 on every rank. */
ag_status lm_recipe_probe(ag_dist *d, int V, double budget_s, const volatile sig_atomic_t *stop, double *step_s,
                          ag_error *err);

#endif
