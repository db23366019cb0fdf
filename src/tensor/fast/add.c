/* fast/add.c -- add's backward with less memory traffic (ops/add.c has the formulas, the
 * forward and the reference backward this must equal).
 *
 * da, and db when it has a's shape (the residual), are written (`=`) when this backward is the
 * first to reach them, instead of zeroed and added to (ag__grad_into); a broadcast db sums dy's
 * rows in blocks of adjacent columns (ag__sum_rows). */
#include "fast.h"

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
