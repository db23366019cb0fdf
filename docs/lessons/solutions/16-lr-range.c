/* 16-lr-range.c -- lesson 16's exercise: the learning-rate range test's two halves, the sweep
 * and its reading, checked by lr_range.h (beside lesson.h).
 *
 *   lr(i) = lo (hi / lo)^(i / (n - 1))      the same factor at every step: even in ln lr
 *   smoothed loss: s_i = b s_{i-1} + (1 - b) loss_i, divided by 1 - b^(i+1)   (b = 0.9)
 *   the pick: the most negative (s_i - s_{i-5}) / ln(lr_i / lr_{i-5}), read only while s_i is
 *   below twice its lowest so far (past that the run has diverged)
 *
 * Then the check is turned on the usual mistakes: each must fail, named. */
#include "lr_range.h"

static double my_lr(double lo, double hi, int n, int i)
{
    return lo * pow(hi / lo, (double)i / (n - 1));
}

static double my_pick(const double *lr, const double *loss, int n)
{
    double s[1024], avg = 0, best_slope = 0, best = lr[0], low = INFINITY;
    for (int i = 0; i < n && i < 1024; i++) {
        avg = 0.9 * avg + 0.1 * loss[i];
        s[i] = avg / (1 - pow(0.9, i + 1));
        if (s[i] > 2 * low) break;                                   /* diverged: stop reading */
        low = fmin(low, s[i]);
        if (i < 10) continue;
        double slope = (s[i] - s[i - 5]) / log(lr[i] / lr[i - 5]);
        if (slope < best_slope) best_slope = slope, best = sqrt(lr[i] * lr[i - 5]);
    }
    return best;
}

// --- the usual mistakes, each of which the check must catch ---

static double linear_lr(double lo, double hi, int n, int i) { return lo + (hi - lo) * i / (n - 1); }
static double by_n_lr(double lo, double hi, int n, int i) { return lo * pow(hi / lo, (double)i / n); }
static double lowest_pick(const double *lr, const double *loss, int n)
{
    int b = 0;
    for (int i = 0; i < n; i++)
        if (loss[i] < loss[b]) b = i;
    return lr[b];
}
static double raw_pick(const double *lr, const double *loss, int n)   /* one step's slope, unsmoothed */
{
    int b = 1;
    for (int i = 1; i < n; i++)
        if (lr[i] < 0.1 && loss[i] - loss[i - 1] < loss[b] - loss[b - 1]) b = i;
    return lr[b];
}

int main(void)
{
    int rc = lr_range_check_sweep(my_lr) | lr_range_check_reading(my_pick);
    printf("%s\n\nthe usual mistakes, each of which must fail:\n", rc ? "FAIL: yours" : "ok: your sweep and reading");
    int caught = lr_range_check_sweep(linear_lr) + lr_range_check_sweep(by_n_lr) +
                 lr_range_check_reading(lowest_pick) + lr_range_check_reading(raw_pick);
    printf("%d of 4 caught\n", caught);
    return rc ? 1 : caught == 4 ? 0 : 1;
}
