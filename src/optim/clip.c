/* clip.c -- gradient clipping by global norm (MODEL.md):
 *
 *   n = sqrt(sum of g^2 over every parameter)          (accumulated in double)
 *   if n > max_norm: g *= max_norm / (n + 1e-6)         (every gradient, the same factor)
 *
 * The direction of the update is kept; only its length is capped. The pre-clip norm is
 * returned for logging. Cannot fail. */
#include <math.h>
#include "optim.h"

double ag_grad_norm(const ag_params *P)
{
    double sum = 0;
    /* a fixed split of the sum over threads: the same thread count gives the same bits */
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (size_t i = 0; i < P->total; i++) sum += (double)P->grad[i] * (double)P->grad[i];
    return sqrt(sum);
}

double ag_clip_grad_norm(ag_params *P, double max_norm)
{
    double n = ag_grad_norm(P);
    if (max_norm > 0 && n > max_norm) {
        double scale = max_norm / (n + 1e-6);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < P->total; i++) P->grad[i] = (ag_real)(P->grad[i] * scale);
    }
    return n;
}
