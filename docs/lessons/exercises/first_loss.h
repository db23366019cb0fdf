/* first_loss.h -- lesson 15's check: your formula for the first loss of a model whose logits are
 * random, N(0, sigma^2) each, against the loss ag_cross_entropy measures on such logits.
 *
 *   first_loss_check(my_first_loss)   my_first_loss(V, sigma): the expected cross-entropy
 *
 * It draws 4096 rows of V logits for V = 58 (the lessons' corpus) and sigma from 0.02 to 1.5,
 * takes the library's mean loss over them, and compares: within 2% passes. When yours is off,
 * it says which usual mistake the numbers point to. 0 ok, 1 not, 2 the check could not run. */
#ifndef FIRST_LOSS_H
#define FIRST_LOSS_H

#include "lesson.h"

typedef double (*first_loss_fn)(int V, double sigma);

/* the library's mean cross-entropy over R rows of V logits drawn N(0, sigma^2), targets uniform */
static double first_loss_measured(int V, double sigma, uint64_t seed)
{
    enum { R = 4096 };
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *z = ctx ? ag_tensor_new2(ctx, R, V) : NULL;   // [R,V]
    int *t = malloc(R * sizeof *t);
    double loss = NAN;
    if (z && t) {
        ag_rng rng;
        ag_rng_seed(&rng, seed);
        for (size_t i = 0; i < (size_t)R * V; i++) z->data[i] = (ag_real)(sigma * ag_rng_normal(&rng));
        for (int r = 0; r < R; r++) t[r] = (int)ag_rng_below(&rng, (uint64_t)V);
        ag_tensor *L = ag_cross_entropy(ctx, z, t);                // [1]
        if (L) loss = (double)L->data[0];
    }
    free(t);
    ag_ctx_free(ctx);
    return loss;
}

static int first_loss_check(first_loss_fn mine)
{
    const int V = 58;
    const double sigmas[] = {0.02, 0.5, 1.0, 1.5};
    int bad = 0;
    double lnV = log(V), got1 = 0, want1 = 0;
    for (int k = 0; k < 4; k++) {
        double want = first_loss_measured(V, sigmas[k], 15 + (uint64_t)k), got = mine(V, sigmas[k]);
        if (isnan(want)) return 2;
        bool ok = fabs(got - want) <= 0.02 * want;
        printf("sigma %.2f: yours %.4f, measured %.4f (ln V %.4f)%s\n", sigmas[k], got, want, lnV, ok ? "" : "  <- off");
        bad += !ok;
        if (k == 2) got1 = got, want1 = want;
    }
    if (!bad) return printf("ok: the first loss, from the spread of the logits\n"), 0;
    if (fabs(got1 - lnV) < 1e-9)
        printf("FAIL: you return ln V at every sigma: right only when the logits are near 0; their spread adds "
               "about sigma^2 / 2 (sum_j e^z_j grows to V e^(sigma^2/2))\n");
    else if (fabs((got1 - lnV) - 2 * (want1 - lnV)) < 0.1)
        printf("FAIL: your excess over ln V is twice the measured one: sigma^2 / 2, not sigma^2\n");
    else if (got1 < lnV)
        printf("FAIL: yours is below ln V: random logits can only make the first loss worse than a uniform guess "
               "(the target's logit is no larger on average than the others)\n");
    else
        printf("FAIL: off by more than 2%%: compare E[log sum_j e^z_j] - E[z_target] term by term\n");
    return 1;
}

#endif
