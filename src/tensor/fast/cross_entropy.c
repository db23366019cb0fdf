/* fast/cross_entropy.c -- cross-entropy's forward with lane reductions and the SIMD exp
 * (ops/cross_entropy.c has the formulas and the reference loops this must equal; its backward
 * is one plain loop and has no fast kernel).
 *
 * Rows in parallel (those of the ignore index skipped), the loss summed with an OpenMP reduction. The row max and the sum of
 * exponentials are ag__max/ag__sum lanes; the exponentials go through the SIMD expf
 * (`omp simd`), written into the saved probabilities first when they are kept. */
#include "fast.h"

double ag_fast_cross_entropy_forward(ag_real *probs, const ag_real *z, const int *targets, int ignore_index,
                                     size_t R, int V)
{
    double total = 0; /* accumulate in double: R can be thousands of rows */
#pragma omp parallel for schedule(static) reduction(+ : total) if (R * V >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        if (targets[r] == ignore_index) continue; /* a padded position: no loss */
        const ag_real *zr = z + r * V;
        ag_real m = ag__max(zr, V, zr[0]);
        ag_real sum = 0;
        ag_real *p = probs ? probs + r * V : NULL;
        if (p) { /* exps into the saved row first, then their sum */
#pragma omp simd
            for (int j = 0; j < V; j++) p[j] = ag__exp(zr[j] - m);
            sum = ag__sum(p, V);
        } else {
#pragma omp simd reduction(+ : sum)
            for (int j = 0; j < V; j++) sum += ag__exp(zr[j] - m);
        }
        ag_real lse = m + AG_LOG(sum);
        total += (double)(lse - zr[targets[r]]);
        if (p) {
            ag_real inv = 1 / sum; /* p = exp(z - m) / sum = exp(z - lse) */
            for (int j = 0; j < V; j++) p[j] *= inv;
        }
    }
    return total;
}
