/* recipe.c -- the recipe a time budget picks from the compute it measures (recipe.h). */
#include <stdio.h>
#include <string.h>
#include "recipe.h"

/* The table, smallest first (each min_steps: docs/performance.md, "The recipe follows the compute"). */
const lm_recipe lm_recipes[LM_N_RECIPES] = {
    {"S", "1min", 0},          /* 3 x 96, context 64, lr 3e-3 */
    {"M", "5min", 1200},       /* 4 x 96, context 128, lr 6e-3 (AdamW's half 3e-3), weight decay 0.3, Muon */
    {"L", "10min", 2000},      /* 4 x 96, context 256, RoPE, lr 8e-3, dropout 0.05, decay 0.3 (not the embeddings), Muon */
    {"XL", "20min", 4000},     /* L with 6 layers */
};

/* The preset of recipe i (the table names only presets that exist). */
static lm_config recipe_config(int i)
{
    lm_config c;
    lm_config_preset(&c, lm_recipes[i].preset);
    return c;
}

/* The library's table: each recipe's name, FLOPs a step (V: Tiny Shakespeare's; its share is
 * small), Muon's with it (the same for M and L, 1.5x for XL's 6 layers: without it L's step was
 * predicted at 2.86x M's; with it 2.58x; it ran at 2.0-2.6x) and threshold. */
static void table(ag_recipe *t)
{
    for (int i = 0; i < LM_N_RECIPES; i++) {
        lm_config c = recipe_config(i);
        c.model.vocab_size = 65;
        double flops = ag_gpt_step_flops(&c.model, c.batch_size);
        if (c.optimizer == AG_MUON) flops += ag_gpt_muon_flops(&c.model);
        t[i] = (ag_recipe){lm_recipes[i].name, flops, lm_recipes[i].min_steps};
    }
}

void lm_recipe_pick(double budget_s, double probe_s, double probe_step_s, ag_recipe_choice *ch)
{
    ag_recipe t[LM_N_RECIPES];
    ag_error e = {0};
    table(t);
    ag_recipe_pick(t, LM_N_RECIPES, LM_RECIPE_PROBE, budget_s, probe_s, probe_step_s, ch, &e);   /* a fit table */
}

int lm_recipe_close_call(const ag_recipe_choice *ch)
{
    ag_recipe t[LM_N_RECIPES];
    table(t);
    return ag_recipe_close_call(t, ch);
}

void lm_recipe_timed(int i, double step_s, double probe_s, ag_recipe_choice *ch)
{
    ag_recipe t[LM_N_RECIPES];
    table(t);
    ag_recipe_timed(t, i, step_s, probe_s, ch);
}

void lm_recipe_line(char *buf, size_t n, const ag_recipe_choice *ch)
{
    ag_recipe t[LM_N_RECIPES];
    lm_config c = recipe_config(ch->pick);
    char shape[64];   /* "4 x 96, context 128" (", RoPE") (", dropout 0.05") */
    snprintf(shape, sizeof shape, "%d x %d, context %d%s", c.model.n_layer, c.model.n_embd, c.model.block_size,
             c.model.rope ? ", RoPE" : "");
    size_t w = strlen(shape);
    if (c.model.dropout > 0) snprintf(shape + w, sizeof shape - w, ", dropout %g", c.model.dropout);
    table(t);
    ag_recipe_line(buf, n, t, LM_N_RECIPES, ch, shape);
}

ag_status lm_recipe_apply(lm_config *cfg, const bool *given, int pick, ag_error *err)
{
    lm_config c = recipe_config(pick);
    for (int i = 0; i < LM_N_FIELDS; i++)
        if (given[i]) ag_field_copy(&c, cfg, &lm_fields[i]);
    if (!given[ag_field_by_key(lm_fields, LM_N_FIELDS, "lr_decay_iters") - lm_fields]) c.lr_decay_iters = c.max_iters;
    ag_status s = lm_config_validate(&c, false, err);
    if (s == AG_OK) s = lm_config_check_training(&c, err);
    if (s == AG_OK) *cfg = c;
    return s;
}

// --- the probe ---

static ag_status probe_step(void *p, long t, ag_error *err) { return ag_gpt_probe_step(p, t, NULL, err); }

static ag_status probe_sum(void *user, double *v, int n, ag_error *err)
{
    return ag_dist_allreduce(user, v, (size_t)n, AG_DIST_DOUBLE, AG_DIST_SUM, err);
}

ag_status lm_recipe_probe(ag_dist *d, int recipe, int V, double budget_s, const volatile sig_atomic_t *stop,
                          double *step_s, ag_error *err)
{
    lm_config c = recipe_config(recipe);
    ag_gpt_probe *p;
    c.model.vocab_size = V;
    *step_s = 0;
    ag_status s = ag_gpt_probe_new(&c.model, c.batch_size, c.seed, ag_threads() > 2 ? ag_threads() : 2, &p, err);
    if (s == AG_OK) ag_gpt_probe_use(p, c.optimizer);   /* the recipe's own (Muon's costs more) */
    ag_recipe_probe_opts o = {.step = probe_step, .user = p, .sum = probe_sum, .sum_user = d, .stop = stop};
    if (s == AG_OK) s = ag_recipe_probe(&o, budget_s, step_s, err);
    ag_gpt_probe_free(p);
    return s;
}
