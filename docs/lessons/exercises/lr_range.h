/* lr_range.h -- lesson 16's check: your learning-rate sweep and your reading of it.
 *
 *   lr_range_check_sweep(my_lr)      my_lr(lo, hi, n, i): the lr of step i of n, from lo at
 *                                    i = 0 to hi at i = n - 1, the same factor at every step
 *   lr_range_check_reading(my_pick)  my_pick(lr, loss, n): the lr where the loss falls fastest
 *                                    per unit of ln lr, on a made-up noisy test whose answer
 *                                    is known
 *
 * Each returns 0 when yours agrees, 1 (after a line that names the usual mistake, when it is
 * one) when not. It knows the answer: write yours first, read this after. */
#ifndef LR_RANGE_H
#define LR_RANGE_H

#include "lesson.h"

typedef double (*lr_sweep_fn)(double lo, double hi, int n, int i);
typedef double (*lr_pick_fn)(const double *lr, const double *loss, int n);

static int lr_range_check_sweep(lr_sweep_fn my_lr)
{
    const double lo = 1e-5, hi = 1;
    const int n = 101;
    double worst = 0, lin = 0, byn = 0;
    for (int i = 0; i < n; i++) {
        double want = lo * pow(hi / lo, (double)i / (n - 1)), got = my_lr(lo, hi, n, i);
        worst = fmax(worst, fabs(got - want) / want);
        lin = fmax(lin, fabs(got - (lo + (hi - lo) * i / (n - 1))) / want);
        byn = fmax(byn, fabs(got - lo * pow(hi / lo, (double)i / n)) / want);
    }
    printf("sweep, %d steps from %g to %g: largest relative difference %.1e\n", n, lo, hi, worst);
    if (worst <= 1e-12) return 0;
    if (lin <= 1e-12)
        printf("FAIL: your lr grows linearly: step 1 is already %.0e, so 99%% of the steps are above hi/100; "
               "the same factor at every step: lo (hi/lo)^(i/(n-1))\n", lo + (hi - lo) / (n - 1));
    else if (byn <= 1e-12)
        printf("FAIL: the last step's lr is %g, not hi: the exponent is i/(n-1), not i/n\n", my_lr(lo, hi, n, n - 1));
    else
        printf("FAIL: step 0 gives %g (want %g), step %d %g (want %g)\n", my_lr(lo, hi, n, 0), lo, n - 1,
               my_lr(lo, hi, n, n - 1), hi);
    return 1;
}

/* the made-up test: a loss that falls fastest at lr 1e-3 (a logistic in ln lr), lowest near
 * 2e-2, blowing up past 0.1, with noise of +-0.15 on every step */
static void lr_range_curve(double *lr, double *loss, int n)
{
    ag_rng rng;
    ag_rng_seed(&rng, 16);
    for (int i = 0; i < n; i++) {
        lr[i] = 1e-5 * pow(1e5, (double)i / (n - 1));
        double x = log(lr[i] / 1e-3);
        loss[i] = 2 + 2 / (1 + exp(2 * x)) + (lr[i] > 0.1 ? 30 * (lr[i] - 0.1) : 0) + 0.3 * (ag_rng_uniform(&rng) - 0.5);
    }
}

static int lr_range_check_reading(lr_pick_fn my_pick)
{
    enum { N = 300 };
    double lr[N], loss[N];
    lr_range_curve(lr, loss, N);
    double got = my_pick(lr, loss, N), lowest = lr[0], low = loss[0];
    for (int i = 0; i < N; i++)
        if (loss[i] < low && lr[i] < 0.1) low = loss[i], lowest = lr[i];
    printf("reading: you name lr %.3g; the loss falls fastest at 1e-03 (by construction)\n", got);
    if (got >= 5e-4 && got <= 2.5e-3) return 0;   /* the smoothing lags: within a factor 2 or so */
    if (got > 5e-3 && got < 0.1)
        printf("FAIL: %.3g is near where the loss is lowest (%.3g): past it the steps are already too large; "
               "the range test picks where the loss falls fastest, before the bottom\n", got, lowest);
    else if (got >= 0.1)
        printf("FAIL: %.3g is where the run diverges: stop reading once the loss has left its lowest\n", got);
    else
        printf("FAIL: %.3g: the noise of single steps decides it; smooth the loss (a moving average) "
               "and take the slope over a few steps\n", got);
    return 1;
}

#endif
