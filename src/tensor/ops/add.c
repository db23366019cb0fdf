/* add.c -- y = a + b, with b either a's shape or a's trailing dims broadcast over the rest
 * (a bias [C] over [B,T,C], learned positions [T,C] over [B,T,C]).
 *
 * forward:  y[i] = a[i] + b[i mod nb]
 * backward: da[i] += dy[i];   db[j] += sum over every i with i mod nb == j of dy[i]
 *           (a broadcast input sums its gradient back to its own shape)
 * Fast kernels: fast/add.c (the forward split evenly over the threads, the residual too; the
 * backward's gradients written instead of zeroed and added to, column blocks for the broadcast
 * sum); tests/test_fast_ref_products.c proves them equal. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

// --- reference kernels: a and dy viewed as [N/nb, nb] rows, b as one such row ---

static void add_forward(ag_real *y, const ag_real *a, const ag_real *b, size_t n, size_t nb)
{
#pragma omp parallel for schedule(static) if (n >= AG_PAR_MIN)
    for (size_t i = 0; i < n; i += nb)
        for (size_t j = 0; j < nb; j++) y[i + j] = a[i + j] + b[j];
}

static void add_backward(ag_real *da, ag_real *db, const ag_real *dy, size_t n, size_t nb)
{
    if (da)
#pragma omp parallel for schedule(static) if (n >= AG_PAR_MIN)
        for (size_t i = 0; i < n; i++) da[i] += dy[i];
    if (db) /* db[j] += sum over the rows r of dy[r, j]; each j on its own, so they may run in parallel */
#pragma omp parallel for schedule(static) if (n >= AG_PAR_MIN)
        for (size_t j = 0; j < nb; j++) {
            ag_real sum = 0;
            for (size_t i = j; i < n; i += nb) sum += dy[i];
            db[j] += sum;
        }
}

// --- backward step ---

static ag_status add_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = a + broadcast(b)  =>  da = dy,  db = dy summed over the broadcast rows */
    ag_tensor *a = n->in[0], *b = n->in[1];
    ag_real *da = a->requires_grad ? ag_grad(ctx, a) : NULL;         // a's shape
    ag_real *db = b->requires_grad ? ag_grad(ctx, b) : NULL;         // b's shape
    if (ag_ctx_status(ctx) != AG_OK) return ag_ctx_status(ctx);
    add_backward(da, db, n->out->grad, ag_numel(a), ag_numel(b));
    return AG_OK;
}

// --- op ---

static const ag_op add_op = { .name = "add", .backward = add_backward_step };
const ag_add_kernels ag__add_reference = { add_forward, &add_op };  /* kernel.h's table */

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
    const ag_add_kernels *kern = &ag__kernels(ctx)->add;  /* reference or fast (kernel.h) */
    kern->forward(y->data, a->data, b->data, ag_numel(a), ag_numel(b));
    ag_tensor *in[2] = { a, b };
    ag_record(ctx, kern->op, y, in, 2);
    return ag__done(ctx, y);
}
