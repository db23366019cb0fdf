/* recipe.c -- the recipe a time budget picks from the compute it measures (recipe.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipe.h"
#include "run.h"   /* ag_format_duration */

#define CAL_SKIP 3          /* probe steps not timed: the arena grows, the thread pools start */
#define CAL_MIN 3           /* timed probe steps, at least */
#define CAL_MAX 200         /* and at most */
#define RUN_SHARE 0.95      /* of the budget left, the share steps get: the rest evaluates, checkpoints
                               and keeps the budget's 2% reserve */
#define PROBE_SHARE 0.02    /* the probe times steps for 2% of the budget, */
#define PROBE_MIN_S 0.2     /*   at least this long */
#define PROBE_MAX_S 3.0     /*   at most this long */
#define SETUP_S 1.0         /* the text read, the model made, before the first step */

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
    memset(ch, 0, sizeof *ch);
    ch->budget_s = budget_s;
    ch->probe_s = probe_s;
    lm_config ref = recipe_config(LM_RECIPE_PROBE);
    double left = fmax(0, budget_s - probe_s - SETUP_S) * RUN_SHARE, per_flop = probe_step_s / lm_recipe_flops(&ref, 65);
    for (int i = 0; i < LM_N_RECIPES; i++) {
        lm_config c = recipe_config(i);
        ch->step_s[i] = per_flop * lm_recipe_flops(&c, 65);   /* V: Tiny Shakespeare's; its share is small */
        ch->steps[i] = ch->step_s[i] > 0 ? (long)fmin(floor(left / ch->step_s[i]), 1e9) : 0;
        if (ch->steps[i] >= lm_recipes[i].min_steps) ch->pick = i;   /* the last that gets its steps */
    }
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
    char d[32], steps[32], shape[64];
    int p = ch->pick;
    ag_format_duration(d, sizeof d, ch->budget_s);
    ag_format_thousands(steps, sizeof steps, ch->steps[p]);
    describe(shape, sizeof shape, p);
    int w = snprintf(buf, n, "time budget %s at %.3g s a step: about %s steps -> recipe %s (%s)", d, ch->step_s[p],
                     steps, lm_recipes[p].name, shape);
    if (p + 1 < LM_N_RECIPES && w >= 0 && (size_t)w < n) {   /* why not the next one up */
        char got[32], need[32];
        ag_format_thousands(got, sizeof got, ch->steps[p + 1]);
        ag_format_thousands(need, sizeof need, lm_recipes[p + 1].min_steps);
        snprintf(buf + w, n - (size_t)w, "; %s would get %s, it needs %s", lm_recipes[p + 1].name, got, need);
    }
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

ag_status lm_recipe_probe(ag_dist *d, int V, double budget_s, const volatile sig_atomic_t *stop, double *step_s,
                          ag_error *err)
{
    double seconds = fmin(fmax(PROBE_SHARE * budget_s, PROBE_MIN_S), PROBE_MAX_S);
    probe_model p;
    ag_status s = probe_init(&p, V, err);
    double timed = 0, t0 = 0;
    long n = 0;
    for (long t = 1; s == AG_OK && n < CAL_MAX && (n < CAL_MIN || timed < seconds) && !(stop && *stop); t++) {
        if (t > CAL_SKIP) t0 = ag_now_s();
        s = probe_step(&p, t, err);
        if (t > CAL_SKIP) timed += ag_now_s() - t0, n++;
    }
    probe_free(&p);
    double mean[3] = {n ? timed / (double)n : 0, 1, stop && *stop};
    if (s == AG_OK) s = ag_dist_allreduce(d, mean, 3, AG_DIST_DOUBLE, AG_DIST_SUM, err);   /* every rank alike */
    *step_s = mean[2] > 0 ? 0 : mean[0] / mean[1];   /* a rank stopped: all stop */
    return s;
}
