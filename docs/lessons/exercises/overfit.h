/* overfit.h -- lesson 17's check: a training step of yours must learn one fixed batch by heart.
 *
 *   overfit_check(my_step)   my_step(g, ctx, x, y, B, T, it): one AdamW step of g on the windows
 *                            x, y [B*T] (the same at every call), returns the batch's loss
 *
 * It builds a small GPT (V = 11, 2 layers, 2 heads, C = 32, T = 8), a batch of B = 4 windows of
 * random tokens (nothing in them to learn but the batch itself), calls your step 150 times, and
 * then measures the loss on the batch itself in evaluation mode: below 0.1 passes (ln 11 = 2.4
 * at the start). Between your steps it fills the gradient buffer with NaN: a step that uses it
 * without ag_params_zero_grad gets NaN weights. When it fails, it says which usual mistake the
 * numbers point to. 0 ok, 1 not, 2 the check could not run. */
#ifndef OVERFIT_H
#define OVERFIT_H

#include "lesson.h"

typedef double (*overfit_step_fn)(ag_gpt *g, ag_ctx *ctx, const int *x, const int *y, int B, int T, long it);

enum { OF_V = 11, OF_B = 4, OF_T = 8, OF_STEPS = 150 };

/* the loss of g on x, y in evaluation mode (no dropout, no gradients), NAN on failure */
static double overfit_eval(ag_gpt *g, const int *x, const int *y)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *loss = NULL;
    if (ctx) {
        ag_ctx_set_grad(ctx, false);
        ag_gpt_forward(ctx, g, x, y, OF_B, OF_T, &(ag_forward_opts){ .train = false }, &loss);
    }
    double l = loss ? (double)loss->data[0] : NAN;
    ag_ctx_free(ctx);
    return l;
}

static int overfit_verdict(double first, double last, size_t nodes1, size_t nodes2)
{
    printf("one batch of %d windows, %d steps: loss %.4f -> %.4f (ln %d = %.4f); tape after steps 1 and 2: %zu, "
           "%zu nodes\n", OF_B, OF_STEPS, first, last, OF_V, log(OF_V), nodes1, nodes2);
    if (nodes2 > nodes1)
        return printf("FAIL: the tape grew from %zu to %zu nodes: ag_ctx_reset at every step, or ag_backward runs "
                      "the earlier steps' graphs again\n", nodes1, nodes2), 1;
    if (isnan(last))
        return printf("FAIL: the weights are NaN: your step read the gradient buffer without "
                      "ag_params_zero_grad (the check left NaN in it)\n"), 1;
    if (last < 0.1) return printf("ok: the batch is learned by heart\n"), 0;
    if (last > 0.8 * first)
        return printf("FAIL: the loss on the batch hardly fell: train on the x, y you are given at every step "
                      "(the same batch), not a new draw\n"), 1;
    return printf("FAIL: the loss fell, to %.3f only: a larger learning rate (1e-2; lesson 16), or more weight on "
                  "the batch than on weight decay\n", last), 1;
}

static int overfit_check(overfit_step_fn my_step)
{
    const ag_gpt_config cfg = { .vocab_size = OF_V, .n_layer = 2, .n_head = 2, .n_embd = 32, .block_size = OF_T };
    ag_gpt *g = ag_gpt_new(&cfg, 17, NULL);
    ag_ctx *ctx = ag_ctx_new();
    if (!g || !ctx) return 2;
    int x[OF_B * OF_T], y[OF_B * OF_T];
    ag_rng rng;
    ag_rng_seed(&rng, 17);
    for (int i = 0; i < OF_B * OF_T; i++) x[i] = (int)ag_rng_below(&rng, OF_V), y[i] = (int)ag_rng_below(&rng, OF_V);
    double first = overfit_eval(g, x, y);
    size_t nodes[2] = { 0, 0 };
    for (long it = 0; it < OF_STEPS; it++) {
        for (size_t i = 0; i < g->params->total; i++) g->params->grad[i] = (ag_real)NAN;
        my_step(g, ctx, x, y, OF_B, OF_T, it);
        if (it < 2) nodes[it] = ag_ctx_get_stats(ctx).tape_nodes;
    }
    int rc = overfit_verdict(first, overfit_eval(g, x, y), nodes[0], nodes[1]);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
    return rc;
}

#endif
