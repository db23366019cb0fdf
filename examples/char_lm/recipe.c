/* recipe.c -- the recipe a time budget picks from the compute it measures (recipe.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipe.h"

/* The table, smallest first. Where each min_steps comes from: docs/performance.md, "The
 * recipe follows the compute". */
const lm_recipe lm_recipes[LM_N_RECIPES] = {
    {"S", "1min", 0},          /* 3 x 96, context 64, lr 3e-3 */
    {"M", "5min", 4000},       /* 4 x 96, context 128, lr 6e-3, weight decay 0.3 */
    {"L", "10min", 9000},      /* 4 x 96, context 256, lr 8e-3, dropout 0.05, weight decay 0.3 */
};

double lm_recipe_flops(const lm_config *c, int V)
{
    double L = c->model.n_layer, C = c->model.n_embd, T = c->model.block_size;
    double per_token = 6 * (12 * L * C * C + 2 * C * V) + 24 * L * T * C;
    return per_token * T * c->batch_size * (c->model.dropout > 0 ? 1.1 : 1.0);
}

/* The preset of recipe i (the table names only presets that exist). */
static lm_config recipe_config(int i)
{
    lm_config c;
    lm_config_preset(&c, lm_recipes[i].preset);
    return c;
}

void lm_recipe_pick(double budget_s, double probe_s, double probe_step_s, lm_recipe_choice *ch)
{
    ag_recipe table[LM_N_RECIPES];
    for (int i = 0; i < LM_N_RECIPES; i++) {
        lm_config c = recipe_config(i);   /* V: Tiny Shakespeare's; its share is small */
        table[i] = (ag_recipe){lm_recipes[i].name, lm_recipe_flops(&c, 65), lm_recipes[i].min_steps};
    }
    ag_error e = {0};
    ag_recipe_pick(table, LM_N_RECIPES, LM_RECIPE_PROBE, budget_s, probe_s, probe_step_s, ch, &e);   /* a fit table */
}

/* "4 x 96, context 128" (", dropout 0.05") */
static void describe(char *buf, size_t n, int i)
{
    lm_config c = recipe_config(i);
    int w = snprintf(buf, n, "%d x %d, context %d", c.model.n_layer, c.model.n_embd, c.model.block_size);
    if (c.model.dropout > 0 && w >= 0 && (size_t)w < n) snprintf(buf + w, n - (size_t)w, ", dropout %g", c.model.dropout);
}

void lm_recipe_line(char *buf, size_t n, const lm_recipe_choice *ch)
{
    ag_recipe table[LM_N_RECIPES];   /* the names and thresholds the line says */
    for (int i = 0; i < LM_N_RECIPES; i++) table[i] = (ag_recipe){lm_recipes[i].name, 1, lm_recipes[i].min_steps};
    char shape[64];
    describe(shape, sizeof shape, ch->pick);
    ag_recipe_line(buf, n, table, LM_N_RECIPES, ch, shape);
}

ag_status lm_recipe_apply(lm_config *cfg, const bool *given, int pick, ag_error *err)
{
    lm_config c = recipe_config(pick);
    for (int i = 0; i < lm_n_fields; i++)
        if (given[i]) ag_field_copy(&c, cfg, &lm_fields[i]);
    if (!given[lm_field_by_key("lr_decay_iters") - lm_fields]) c.lr_decay_iters = c.max_iters;
    ag_status s = lm_config_validate(&c, false, err);
    if (s == AG_OK) s = lm_config_check_training(&c, err);
    if (s == AG_OK) *cfg = c;
    return s;
}

// --- the probe ---

typedef struct {
    ag_gpt *g;
    ag_ctx *ctx;
    ag_gpt_shards *shards;
    int *x, *y;        /* [B*T] random tokens, the targets the next ones */
    int B, T;
} probe_model;

static void probe_free(probe_model *p)
{
    ag_gpt_shards_free(p->shards);
    ag_ctx_free(p->ctx);
    ag_gpt_free(p->g);
    free(p->x);
    free(p->y);
}

/* The reference recipe's model, its windows split over the threads as char_lm's default does. */
static ag_status probe_init(probe_model *p, int V, ag_error *err)
{
    lm_config c = recipe_config(LM_RECIPE_PROBE);
    c.model.vocab_size = V;
    *p = (probe_model){.B = c.batch_size, .T = c.model.block_size};
    size_t n = (size_t)p->B * (size_t)p->T;
    p->g = ag_gpt_new(&c.model, c.seed, err);
    p->ctx = ag_ctx_new();
    p->x = malloc(n * sizeof(int));
    p->y = malloc(n * sizeof(int));
    if (!p->g) return err->status ? err->status : AG_ERR_NOMEM;
    if (!p->ctx || !p->x || !p->y) return ag_seterr(err, AG_ERR_NOMEM, "the recipe probe: out of memory");
    ag_ctx_set_recycle_grads(p->ctx, true);
    if (!(p->shards = ag_gpt_shards_new(p->g, p->ctx, ag_threads() > 2 ? ag_threads() : 2, err)))
        return err->status ? err->status : AG_ERR_NOMEM;
    ag_rng r;
    ag_rng_seed(&r, c.seed);
    for (size_t i = 0; i < n; i++) p->x[i] = (int)ag_rng_below(&r, (uint64_t)V);
    for (size_t i = 0; i < n; i++) p->y[i] = i + 1 < n ? p->x[i + 1] : p->x[0];
    return AG_OK;
}

/* One training step: forward, backward, clip, AdamW. */
static ag_status probe_step(probe_model *p, long t, ag_error *err)
{
    static const ag_adam_cfg adam = {0.9, 0.99, 1e-8, 0.1};
    double loss;
    ag_params_zero_grad(p->g->params);
    ag_status s = ag_gpt_shards_pass(p->shards, p->x, p->y, p->B, p->T, &(ag_forward_opts){.train = true}, 1, &loss,
                                     err);
    if (s == AG_OK)
        ag_adamw_step_scaled(p->g->params, &adam, 1e-4, t, ag_clip_scale(ag_grad_norm(p->g->params), 1.0));
    ag_ctx_reset(p->ctx);
    return s;
}

static ag_status probe_step_cb(void *user, long t, ag_error *err) { return probe_step(user, t, err); }

static ag_status probe_sum(void *user, double *v, int n, ag_error *err)
{
    return ag_dist_allreduce(user, v, (size_t)n, AG_DIST_DOUBLE, AG_DIST_SUM, err);
}

ag_status lm_recipe_probe(ag_dist *d, int V, double budget_s, const volatile sig_atomic_t *stop, double *step_s,
                          ag_error *err)
{
    probe_model p;
    ag_status s = probe_init(&p, V, err);
    *step_s = 0;
    ag_recipe_probe_opts o = {.step = probe_step_cb, .user = &p, .sum = probe_sum, .sum_user = d, .stop = stop};
    if (s == AG_OK) s = ag_recipe_probe(&o, budget_s, step_s, err);
    probe_free(&p);
    return s;
}
