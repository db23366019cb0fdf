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
    /* 8 running partial sums in double: a loop the compiler can vectorize without reordering
     * one sum (FP addition is not associative); a fixed split, so the same bits every time */
    double part[8] = { 0 };
    size_t n8 = P->total / 8 * 8;
    const ag_real *g = P->grad;
#pragma omp parallel for schedule(static) reduction(+ : part[:8])
    for (size_t i = 0; i < n8; i += 8)
        for (int k = 0; k < 8; k++) part[k] += (double)g[i + k] * (double)g[i + k];
    double sum = 0;
    for (int k = 0; k < 8; k++) sum += part[k];
    for (size_t i = n8; i < P->total; i++) sum += (double)g[i] * (double)g[i];
    return sqrt(sum);
}

double ag_clip_scale(double norm, double max_norm)
{
    return max_norm > 0 && norm > max_norm ? max_norm / (norm + 1e-6) : 1;
}

void ag_scale_grads(ag_params *P, double scale)
{
    ag_real s = (ag_real)scale; /* in ag_real, as PyTorch's g.mul_(coef) */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < P->total; i++) P->grad[i] *= s;
}

double ag_clip_grad_norm(ag_params *P, double max_norm)
{
    double n = ag_grad_norm(P);
    double scale = ag_clip_scale(n, max_norm);
    if (scale != 1) ag_scale_grads(P, scale);
    return n;
}
