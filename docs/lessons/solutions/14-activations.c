/* 14-activations.c -- lesson 14's exercise: the statistics of the MLP activation's inputs, and
 * the saturated block from them.
 *
 *   mean = sum x / n,   std = sqrt(sum (x - mean)^2 / n),   dead = #{x < -3} / n
 *
 * GELU(x) = x Phi(x): its slope Phi(x) + x phi(x) is 1 far right, 0 far left, and under 0.012
 * in size below -3. An input there passes (almost) no gradient back to fc1: the unit is dead
 * for it. Wide inputs are not dead ones: on GELU's right side the slope is near 1. So the block
 * that saturates is the one with the largest dead share, not the widest std or the largest
 * mean. Then the check is turned on the usual mistakes: each must fail, named. */
#include "activations.h"

static act_stats my_stats(const ag_real *x, size_t n)
{
    double sum = 0, sq = 0, dead = 0;
    for (size_t i = 0; i < n; i++) sum += (double)x[i], dead += x[i] < -3;
    double mean = sum / (double)n;
    for (size_t i = 0; i < n; i++) sq += ((double)x[i] - mean) * ((double)x[i] - mean);
    return (act_stats){ mean, sqrt(sq / (double)n), dead / (double)n };
}

static int my_saturated_block(const act_stats *s, int L)
{
    int best = 0;
    for (int l = 1; l < L; l++)
        if (s[l].dead > s[best].dead) best = l;
    return best;
}

// --- the usual mistakes, each of which the check must catch ---

static act_stats rms_as_std(const ag_real *x, size_t n)
{
    act_stats s = my_stats(x, n);
    s.std = sqrt(s.std * s.std + s.mean * s.mean);
    return s;
}

static act_stats every_negative_dead(const ag_real *x, size_t n)
{
    act_stats s = my_stats(x, n);
    double neg = 0;
    for (size_t i = 0; i < n; i++) neg += x[i] < 0;
    s.dead = neg / (double)n;
    return s;
}

static int widest(const act_stats *s, int L)
{
    int best = 0;
    for (int l = 1; l < L; l++)
        if (s[l].std > s[best].std) best = l;
    return best;
}

static int largest_mean(const act_stats *s, int L)
{
    int best = 0;
    for (int l = 1; l < L; l++)
        if (fabs(s[l].mean) > fabs(s[best].mean)) best = l;
    return best;
}

static int always_two(const act_stats *s, int L) { (void)s, (void)L; return 2; }

int main(void)
{
    int rc = activations_check(my_stats, my_saturated_block);
    if (rc) return rc;
    printf("\nthe usual mistakes, each of which must fail:\n");
    int caught = (activations_check(rms_as_std, my_saturated_block) == 1) +
                 (activations_check(every_negative_dead, my_saturated_block) == 1) +
                 (activations_check(my_stats, widest) == 1) + (activations_check(my_stats, largest_mean) == 1) +
                 (activations_check(my_stats, always_two) == 1);
    printf("%d of 5 caught\n", caught);
    return caught == 5 ? 0 : 1;
}
