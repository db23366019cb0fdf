/* fast/cross_entropy.c -- cross-entropy's forward with lane reductions and the SIMD exp
 * (ops/cross_entropy.c has the formulas and the reference loops this must equal; its backward
 * is one plain loop and has no fast kernel).
 *
 * Rows in parallel (those of the ignore index skipped), the loss summed in fixed chunks (the
 * same bits on any number of threads). The row max and the sum of exponentials are
 * ag__max/ag__sum lanes; the exponentials go through the SIMD expf (`omp simd`), written into
 * the saved probabilities first when they are kept. */
#include "fast.h"

/* row r's loss lse - z[target], its probabilities into probs' row when they are kept */
static double cross_entropy_row(ag_real *probs, const ag_real *z, int target, size_t r, int V)
{
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
    if (p) {
        ag_real inv = 1 / sum; /* p = exp(z - m) / sum = exp(z - lse) */
        for (int j = 0; j < V; j++) p[j] *= inv;
    }
    return (double)(lse - zr[target]);
}

/* The rows in CE_CHUNKS fixed chunks, each chunk's losses summed in order and the chunks' sums
 * added in order: the same total on any number of threads (ag_thread_tuner, speed.h). */
#define CE_CHUNKS 64
double ag_fast_cross_entropy_forward(ag_real *probs, const ag_real *z, const int *targets, int ignore_index,
                                     size_t R, int V)
{
    double chunk[CE_CHUNKS]; /* accumulate in double: R can be thousands of rows */
#pragma omp parallel for schedule(static) if (R * V >= AG_PAR_MIN)
    for (int c = 0; c < CE_CHUNKS; c++) {
        size_t r0 = R * (size_t)c / CE_CHUNKS, r1 = R * (size_t)(c + 1) / CE_CHUNKS;
        double total = 0;
        for (size_t r = r0; r < r1; r++)
            if (targets[r] != ignore_index) /* a padded position: no loss */
                total += cross_entropy_row(probs, z, targets[r], r, V);
        chunk[c] = total;
    }
    double total = 0;
    for (int c = 0; c < CE_CHUNKS; c++) total += chunk[c];
    return total;
}
