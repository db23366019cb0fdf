/* gpt_probe.c -- a GPT's training step on random tokens, for a time budget that times it
 * (nn.h: ag_gpt_probe_new; train/recipe.h: ag_recipe_probe). */
#include <stdlib.h>
#include "nn.h"
#include "../optim/optim.h"
#include "../tensor/rng.h"
#include "../tensor/speed.h"   /* ag_ctx_set_recycle_grads */

struct ag_gpt_probe {
    ag_gpt *g;
    ag_ctx *ctx;
    ag_gpt_shards *shards;
    int *x, *y;        /* [B*T] random tokens, the targets the next ones */
    int B, T;
    int optimizer;     /* an ag_optimizer: AdamW unless ag_gpt_probe_use says */
};

void ag_gpt_probe_free(ag_gpt_probe *p)
{
    if (!p) return;
    ag_gpt_shards_free(p->shards);
    ag_ctx_free(p->ctx);
    ag_gpt_free(p->g);
    free(p->x);
    free(p->y);
    free(p);
}

static ag_status failed(ag_error *err) { return err && err->status ? err->status : AG_ERR_NOMEM; }

/* The model of cfg, its B windows of random tokens (from seed) split over `shards` threads. */
static ag_status probe_init(ag_gpt_probe *p, const ag_gpt_config *cfg, int B, uint64_t seed, int shards,
                            ag_error *err)
{
    *p = (ag_gpt_probe){.B = B, .T = cfg->block_size};
    size_t n = (size_t)p->B * (size_t)p->T;
    p->g = ag_gpt_new(cfg, seed, err);
    p->ctx = ag_ctx_new();
    p->x = malloc(n * sizeof(int));
    p->y = malloc(n * sizeof(int));
    if (!p->g) return failed(err);
    if (!p->ctx || !p->x || !p->y) return ag_seterr(err, AG_ERR_NOMEM, "the recipe probe: out of memory");
    ag_ctx_set_recycle_grads(p->ctx, true);
    if (!(p->shards = ag_gpt_shards_new(p->g, p->ctx, shards, err))) return failed(err);
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) p->x[i] = (int)ag_rng_below(&r, (uint64_t)cfg->vocab_size);
    for (size_t i = 0; i < n; i++) p->y[i] = i + 1 < n ? p->x[i + 1] : p->x[0];
    return AG_OK;
}

ag_status ag_gpt_probe_new(const ag_gpt_config *cfg, int B, uint64_t seed, int shards, ag_gpt_probe **out,
                           ag_error *err)
{
    ag_gpt_probe *p = malloc(sizeof *p);
    *out = NULL;
    if (!p) return ag_seterr(err, AG_ERR_NOMEM, "the recipe probe: out of memory");
    ag_status s = probe_init(p, cfg, B, seed, shards, err);
    if (s == AG_OK) *out = p;
    else ag_gpt_probe_free(p);
    return s;
}

void ag_gpt_probe_use(ag_gpt_probe *p, int optimizer) { p->optimizer = optimizer; }

ag_status ag_gpt_probe_step(ag_gpt_probe *p, long t, double *loss, ag_error *err)
{
    static const ag_adam_cfg adam = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
    ag_params *P = p->g->params;
    double lv;
    ag_params_zero_grad(P);
    ag_status s = ag_gpt_shards_pass(p->shards, p->x, p->y, p->B, p->T, &(ag_forward_opts){.train = true}, 1, &lv, err);
    if (loss) *loss = lv;
    if (s == AG_OK && (s = ag_optimizer_step((ag_optimizer)p->optimizer, P, &adam, 0, 1e-4, t,
                                             ag_clip_scale(ag_grad_norm(P), 1.0))))
        ag_seterr(err, s, "%s", ag_params_error(P));   /* Muon's scratch */
    ag_ctx_reset(p->ctx);
    return s;
}
