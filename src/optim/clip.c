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
