/* fast/add.c -- add's kernels split evenly over the threads, and its backward with less
 * memory traffic (ops/add.c has the formulas and the reference kernels these must equal).
 *
 * forward: the reference splits the rows of b's size over the threads, and the residual (b has
 * a's shape) is one such row: one thread added it while the others waited. Here each thread
 * takes an equal share of the elements, in runs that end where a row of b's size ends.
 *
 * da, and db when it has a's shape (the residual), are written (`=`) when this backward is the
 * first to reach them, instead of zeroed and added to (ag__grad_into); a broadcast db sums dy's
 * rows in blocks of adjacent columns (ag__sum_rows). */
#include <omp.h>
#include "fast.h"

void ag_fast_add_forward(ag_real *y, const ag_real *a, const ag_real *b, size_t N, size_t nb)
{
#pragma omp parallel if (N >= AG_PAR_MIN)
    {
        size_t i0, i1;
        ag__share(N, omp_get_thread_num(), omp_get_num_threads(), &i0, &i1);
        for (size_t i = i0, run; i < i1; i += run) { /* y[i..] = a[i..] + b[j..], j = i mod nb */
            size_t j = i % nb;
            run = nb - j < i1 - i ? nb - j : i1 - i;
            for (size_t k = 0; k < run; k++) y[i + k] = a[i + k] + b[j + k];
        }
    }
}

ag_status ag_fast_add_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = a + broadcast(b) */
    ag_tensor *a = n->in[0], *b = n->in[1];
    const ag_real *dy = n->out->grad;
    size_t N = ag_numel(a), nb = ag_numel(b);
    if (a->requires_grad) {
        bool acc;
        ag_real *da = ag__grad_into(ctx, a, &acc);
        if (!da) return ag_ctx_status(ctx);
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
        for (size_t i = 0; i < N; i++) da[i] = acc ? da[i] + dy[i] : dy[i];
    }
    if (b->requires_grad && nb == N) { /* the residual: b has a's shape */
        bool acc;
        ag_real *db = ag__grad_into(ctx, b, &acc);
        if (!db) return ag_ctx_status(ctx);
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
        for (size_t i = 0; i < N; i++) db[i] = acc ? db[i] + dy[i] : dy[i];
    } else if (b->requires_grad) {
        ag_real *db = ag_grad(ctx, b);
        if (!db) return ag_ctx_status(ctx);
        ag__sum_rows(db, dy, N / nb, (int)nb); /* dy viewed as [N/nb, nb] rows */
    }
    return AG_OK;
}
