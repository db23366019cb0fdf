/* recipe.h -- `train --time-budget D` without --config: the recipe follows the compute (issue 36).
 * The probe, the prediction, the pick and the line are the library's (train/recipe.h); the table
 * is char_lm's; why these thresholds: docs/performance.md, "The recipe follows the compute". The
 * chosen recipe goes into the run's config as a preset would (given flags override it), and so
 * into every checkpoint: --resume continues it exactly, and does not choose again. */
#ifndef LM_RECIPE_H
#define LM_RECIPE_H

#include <signal.h>
#include <stdbool.h>
#include "attograd.h"
#include "config.h"

typedef struct {
    const char *name;        /* "S", "M", "L", "XL": what the choice line names */
    const char *preset;      /* its hyper-parameters: config.c's preset of this name */
    long min_steps;          /* taken when it gets at least this many steps in the budget */
} lm_recipe;

#define LM_N_RECIPES 4
#define LM_RECIPE_PROBE 1    /* the recipe whose steps the probe times (M) */
extern const lm_recipe lm_recipes[LM_N_RECIPES];

/* ag_recipe_pick and ag_recipe_line over lm_recipes, each a preset's GPT ("(4 x 96, context 128)"). */
void lm_recipe_pick(double budget_s, double probe_s, double probe_step_s, ag_recipe_choice *ch);
void lm_recipe_line(char *buf, size_t n, const ag_recipe_choice *ch);
/* ag_recipe_close_call and ag_recipe_timed over lm_recipes: the next one up to time too (or -1),
 * and its measured step taken. */
int lm_recipe_close_call(const ag_recipe_choice *ch);
void lm_recipe_timed(int i, double step_s, double probe_s, ag_recipe_choice *ch);
/* cfg becomes the picked recipe's preset, then every field given[] marks is taken back from
 * the flags (cfg as parsed), time_budget included; lr_decay_iters follows max_iters unless
 * given. Validated: AG_ERR_ARG and a message when the flags do not fit the recipe. */
ag_status lm_recipe_apply(lm_config *cfg, const bool *given, int pick, ag_error *err);
/* Recipe i's step time (ag_recipe_probe of ag_gpt_probe_step, nn.h; LM_RECIPE_PROBE first),
 * vocabulary V, its windows split over the threads as char_lm's default does, over the ranks of d. */
ag_status lm_recipe_probe(ag_dist *d, int recipe, int V, double budget_s, const volatile sig_atomic_t *stop,
                          double *step_s, ag_error *err);

#endif
