/* 17-overfit.c -- lesson 17's exercise: a training step that learns one fixed batch by heart
 * (overfit.h checks it): the first thing to try with a new model or a changed step, since a
 * step that cannot drive one batch's loss to near 0 has a bug, whatever the data.
 *
 * Then the check is turned on the usual mistakes: each must fail, named. */
#include "overfit.h"

/* no weight decay: only the batch counts */
static const ag_adam_cfg adam = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.0};

static double my_step(ag_gpt *g, ag_ctx *ctx, const int *x, const int *y, int B, int T, long it)
{
    ag_ctx_reset(ctx);                                        // the last step's tape goes
    ag_params_zero_grad(g->params);                           // dW = 0
    ag_tensor *loss = NULL;
    ag_gpt_forward(ctx, g, x, y, B, T, &(ag_forward_opts){ .train = true, .seed = (uint64_t)it }, &loss);
    if (!loss || ag_backward(ctx, loss) != AG_OK) return NAN; // dW += dloss/dW
    ag_adamw_step(g->params, &adam, 1e-2, it + 1);            // t: the updates so far, this one included
    return (double)loss->data[0];
}

// --- the usual mistakes ---

static double no_zero_grad(ag_gpt *g, ag_ctx *ctx, const int *x, const int *y, int B, int T, long it)
{
    ag_ctx_reset(ctx);
    ag_tensor *loss = NULL;
    ag_gpt_forward(ctx, g, x, y, B, T, &(ag_forward_opts){ .train = true }, &loss);
    if (loss && ag_backward(ctx, loss) == AG_OK) ag_adamw_step(g->params, &adam, 1e-2, it + 1);
    return loss ? (double)loss->data[0] : NAN;
}

static double new_batch(ag_gpt *g, ag_ctx *ctx, const int *x, const int *y, int B, int T, long it)
{
    (void)x, (void)y;
    int nx[OF_B * OF_T], ny[OF_B * OF_T];
    ag_rng rng;
    ag_rng_seed(&rng, 1000 + (uint64_t)it);                   /* a fresh draw each step */
    for (int i = 0; i < B * T; i++) nx[i] = (int)ag_rng_below(&rng, OF_V), ny[i] = (int)ag_rng_below(&rng, OF_V);
    return my_step(g, ctx, nx, ny, B, T, it);
}

static double no_reset(ag_gpt *g, ag_ctx *ctx, const int *x, const int *y, int B, int T, long it)
{
    ag_params_zero_grad(g->params);
    ag_tensor *loss = NULL;
    ag_gpt_forward(ctx, g, x, y, B, T, &(ag_forward_opts){ .train = true }, &loss);
    if (loss && ag_backward(ctx, loss) == AG_OK) ag_adamw_step(g->params, &adam, 1e-2, it + 1);
    return loss ? (double)loss->data[0] : NAN;
}

static double small_lr(ag_gpt *g, ag_ctx *ctx, const int *x, const int *y, int B, int T, long it)
{
    ag_ctx_reset(ctx);
    ag_params_zero_grad(g->params);
    ag_tensor *loss = NULL;
    ag_gpt_forward(ctx, g, x, y, B, T, &(ag_forward_opts){ .train = true }, &loss);
    if (loss && ag_backward(ctx, loss) == AG_OK) ag_adamw_step(g->params, &adam, 3e-4, it + 1);
    return loss ? (double)loss->data[0] : NAN;
}

int main(void)
{
    ag_threads_init(1);
    int rc = overfit_check(my_step);
    if (rc) return rc;
    printf("\nthe usual mistakes, each of which must fail:\n");
    overfit_step_fn wrong[4] = { no_zero_grad, new_batch, no_reset, small_lr };
    int caught = 0;
    for (int k = 0; k < 4; k++) caught += overfit_check(wrong[k]) == 1;
    printf("%d of 4 caught\n", caught);
    return caught == 4 ? 0 : 1;
}
