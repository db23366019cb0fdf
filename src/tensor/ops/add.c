/* add.c -- y = a + b, with b either a's shape or a's trailing dims broadcast over the rest
 * (a bias [C] over [B,T,C], learned positions [T,C] over [B,T,C]).
 *
 * forward:  y[i] = a[i] + b[i mod nb]
 * backward: da[i] += dy[i];   db[j] += sum over every i with i mod nb == j of dy[i]
 *           (a broadcast input sums its gradient back to its own shape) */
#include "../alloc.h"
#include "../kernel.h"
#include "../fast/fast.h"

// --- kernels ---

static void add_forward(ag_real *y, const ag_real *a, const ag_real *b, size_t n, size_t nb)
{
#pragma omp parallel for schedule(static) if (n >= AG_PAR_MIN)
    for (size_t i = 0; i < n; i += nb)
        for (size_t j = 0; j < nb; j++) y[i + j] = a[i + j] + b[j];
}

// --- backward ---

static ag_status add_backward(ag_ctx *ctx, ag_node *n)
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

// --- op ---

static const ag_op add_op = { "add", add_backward };

ag_tensor *ag_add(ag_ctx *ctx, ag_tensor *a, ag_tensor *b)
{
    if (ag__skip(ctx, a, b)) return NULL;
    bool ok = b->ndim <= a->ndim;
    for (int i = 0; ok && i < b->ndim; i++) ok = b->shape[i] == a->shape[a->ndim - b->ndim + i];
    if (!ok) {
        char sa[AG_SHAPE_BUF], sb[AG_SHAPE_BUF];
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_add: cannot broadcast %s onto %s (b must match a's trailing dims)",
                    ag_shape_str(b, sb, sizeof sb), ag_shape_str(a, sa, sizeof sa));
        return NULL;
    }
    ag_tensor *y = ag__tensor_uninit(ctx, a->ndim, a->shape);                          // a's shape
    if (!y) return NULL;
    add_forward(y->data, a->data, b->data, ag_numel(a), ag_numel(b));
    ag_tensor *in[2] = { a, b };
    ag_record(ctx, &add_op, y, in, 2);
    return ag__done(ctx, y);
}
