/* masked_fill.c -- y = x where mask != 0, else a fill value; and the causal mask.
 *
 * forward:  y[i] = mask[i mod nm] != 0 ? x[i] : value     (mask: x's shape or its trailing dims)
 * backward: dx[i] += mask[i mod nm] != 0 ? dy[i] : 0       (a filled entry no longer depends on x)
 * With value = -inf before a softmax, a masked score gets exactly zero weight.
 * One path: these plain loops are the kernels (there is no fast/masked_fill.c). */
#include "../alloc.h"
#include "../kernel.h"

// --- reference kernels ---

/* x and y [N], mask [nm] repeated over x (nm divides N) */
static void masked_fill_forward(ag_real *y, const ag_real *x, const ag_real *mask, ag_real value, size_t N,
                                size_t nm)
{
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i += nm)
        for (size_t j = 0; j < nm; j++) y[i + j] = mask[j] != 0 ? x[i + j] : value;
}

static void masked_fill_backward(ag_real *dx, const ag_real *dy, const ag_real *mask, size_t N, size_t nm)
{
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i += nm)
        for (size_t j = 0; j < nm; j++)
            if (mask[j] != 0) dx[i + j] += dy[i + j];
}

// --- backward step ---

static ag_status masked_fill_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = mask ? x : value  =>  dx += mask ? dy : 0 */
    ag_tensor *x = n->in[0], *mask = n->in[1];
    ag_real *dx = ag_grad(ctx, x);                                  // x's shape
    if (!dx) return ag_ctx_status(ctx);
    masked_fill_backward(dx, n->out->grad, mask->data, ag_numel(x), ag_numel(mask));
    return AG_OK;
}

// --- op ---

/* masked_fill writes -inf on purpose: --detect-anomaly must not call that a fault */
static const ag_op masked_fill_op = { .name = "masked_fill", .backward = masked_fill_backward_step,
                                      .may_output_neg_inf = true };

ag_tensor *ag_masked_fill(ag_ctx *ctx, ag_tensor *x, ag_tensor *mask, ag_real value)
{
    if (ag__skip(ctx, x, mask)) return NULL;
    bool ok = mask->ndim <= x->ndim;
    for (int i = 0; ok && i < mask->ndim; i++) ok = mask->shape[i] == x->shape[x->ndim - mask->ndim + i];
    if (!ok) {
        char sx[AG_SHAPE_BUF], sm[AG_SHAPE_BUF];
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_masked_fill: mask %s does not match the trailing dims of %s",
                    ag_shape_str(mask, sm, sizeof sm), ag_shape_str(x, sx, sizeof sx));
        return NULL;
    }
    ag_tensor *y = ag__tensor_uninit(ctx, x->ndim, x->shape);                          // x's shape
    if (!y) return NULL;
    masked_fill_forward(y->data, x->data, mask->data, value, ag_numel(x), ag_numel(mask));
    /* the mask is never differentiated: only x is an input of the node that needs a grad */
    ag_tensor *in[2] = { x, mask };
    ag_record(ctx, &masked_fill_op, y, in, 2);
    return ag__done(ctx, y);
}

ag_tensor *ag_causal_mask(ag_ctx *ctx, int T)
{
    if (ag_ctx_status(ctx) != AG_OK) return NULL;
    ag_tensor *m = ag_tensor_new2(ctx, T, T);                       // [T,T]
    if (!m) return NULL;
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++) m->data[i * T + j] = 1; /* row i (a query) sees keys 0..i */
    return m;
}
