/* clip.c -- gradient clipping by global norm (MODEL.md):
 *
 *   n = sqrt(sum of g^2 over every parameter)          (accumulated in double)
 *   if n > max_norm: g *= max_norm / (n + 1e-6)         (every gradient, the same factor)
 *
 * The direction of the update is kept; only its length is capped. The pre-clip norm is
 * returned for logging. Cannot fail. */
#include <math.h>
#include "optim.h"

/* sum of g^2 over g [n]: 8 running partial sums in double, a loop the compiler can vectorize
 * without reordering one sum (FP addition is not associative) */
static double sum_squares(const ag_real *g, size_t n)
{
    double part[8] = { 0 };
    size_t n8 = n / 8 * 8;
    for (size_t i = 0; i < n8; i += 8)
        for (int k = 0; k < 8; k++) part[k] += (double)g[i + k] * (double)g[i + k];
    double sum = 0;
    for (int k = 0; k < 8; k++) sum += part[k];
    for (size_t i = n8; i < n; i++) sum += (double)g[i] * (double)g[i];
    return sum;
}

/* The gradient in NORM_CHUNKS fixed chunks, each summed on its own and the chunks' sums added in
 * order: a split that does not depend on the threads, so the same bits on any number of them
 * (ag_thread_tuner, speed.h, changes the threads between steps). */
#define NORM_CHUNKS 64
double ag_grad_norm(const ag_params *P)
{
    double chunk[NORM_CHUNKS];
    size_t n = P->total;
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (int c = 0; c < NORM_CHUNKS; c++) {
        size_t i0 = n * (size_t)c / NORM_CHUNKS, i1 = n * (size_t)(c + 1) / NORM_CHUNKS;
        chunk[c] = sum_squares(P->grad + i0, i1 - i0);
    }
    double sum = 0;
    for (int c = 0; c < NORM_CHUNKS; c++) sum += chunk[c];
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
