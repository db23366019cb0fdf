/* 15-first-loss.c -- lesson 15's exercise: the first loss of a model whose logits are random.
 *
 *   loss = log sum_j e^(z_j) - z_t,   z_j ~ N(0, sigma^2), independent
 *   E[z_t] = 0;  sum_j e^(z_j) ~ V E[e^z] = V e^(sigma^2 / 2)   (a log-normal's mean; V large)
 *   so E[loss] ~ ln V + sigma^2 / 2
 *
 * At sigma = 0.02 (the init of lesson 13) that is ln V to 0.0002; at --init-scale 10 the logits'
 * spread grows and the first loss with it. Then the check is turned on the usual mistakes. */
#include "first_loss.h"

static double my_first_loss(int V, double sigma) { return log(V) + sigma * sigma / 2; }

static double just_ln_v(int V, double sigma) { (void)sigma; return log(V); }
static double whole_variance(int V, double sigma) { return log(V) + sigma * sigma; }
static double minus(int V, double sigma) { return log(V) - sigma * sigma / 2; }

int main(void)
{
    int rc = first_loss_check(my_first_loss);
    if (rc) return rc;
    printf("\nthe usual mistakes, each of which must fail:\n");
    int caught = (first_loss_check(just_ln_v) == 1) + (first_loss_check(whole_variance) == 1) +
                 (first_loss_check(minus) == 1);
    printf("%d of 3 caught\n", caught);
    return caught == 3 ? 0 : 1;
}
