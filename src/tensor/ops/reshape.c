/* reshape.c -- reshape (a view) and transpose of the last two dims (a copy).
 *
 * reshape:   y = x viewed with another shape of the same numel. y shares x's data AND x's
 *            gradient buffer, so dy lands directly in dx and the backward has nothing to do.
 * transpose: y[..., n, m] = x[..., m, n];  backward: dx[..., m, n] += dy[..., n, m].
 * One path: this plain loop is the kernel; fast/ has none for this op. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

// --- reference kernels ---

/* out [batch, N, M] = in [batch, M, N] transposed, or += when accumulate */
static void transpose_rows(ag_real *out, const ag_real *in, size_t batch, int M, int N, bool accumulate)
{
#pragma omp parallel for schedule(static) if (batch * M * N >= AG_PAR_MIN)
    for (size_t b = 0; b < batch; b++) {
        const ag_real *src = in + b * (size_t)M * N;
        ag_real *dst = out + b * (size_t)M * N;
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                if (accumulate) dst[(size_t)n * M + m] += src[(size_t)m * N + n];
                else dst[(size_t)n * M + m] = src[(size_t)m * N + n];
            }
    }
}

// --- backward steps ---

static ag_status reshape_backward(ag_ctx *ctx, ag_node *n)
{
    (void)ctx; (void)n; /* y->grad is x->grad: the gradient is already where it belongs */
    return AG_OK;
}

static ag_status transpose_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y[..., n, m] = x[..., m, n]  =>  dx[..., m, n] += dy[..., n, m] */
    ag_tensor *x = n->in[0], *y = n->out;
    int M = x->shape[x->ndim - 2], N = x->shape[x->ndim - 1];
    ag_real *dx = ag_grad(ctx, x);
    if (!dx) return ag_ctx_status(ctx);
    /* dy is [batch, N, M]; transposing it back gives [batch, M, N] */
    transpose_rows(dx, y->grad, ag_numel(x) / ((size_t)M * N), N, M, true);
    return AG_OK;
}

// --- ops ---

static const ag_op reshape_op = { .name = "reshape", .backward = reshape_backward, .flags = AG_OP_OUTPUT_IS_VIEW };
static const ag_op transpose_op = { .name = "transpose", .backward = transpose_backward };

ag_tensor *ag_reshape(ag_ctx *ctx, ag_tensor *x, int ndim, const int *shape)
{
    if (ag__skip(ctx, x, x)) return NULL;
    char b[AG_SHAPE_BUF];
    size_t n = 1;
    bool ok = ndim >= 1 && ndim <= AG_MAX_DIMS;
    for (int i = 0; ok && i < ndim; i++) {
        ok = shape[i] > 0;
        n *= ok ? (size_t)shape[i] : 1;
    }
    if (!ok || n != ag_numel(x)) {
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_reshape: cannot view %s (%zu elements) with %d dims of %zu elements",
                    ag_shape_str(x, b, sizeof b), ag_numel(x), ndim, n);
        return NULL;
    }
    ag_tensor *y = ag_ctx_alloc(ctx, sizeof *y);
    if (!y) return NULL;
    *y = *x;                      /* same data, same name */
    ag_tensor_set_shape(y, ndim, shape);
    y->requires_grad = false;
    if (ag_ctx_grad_enabled(ctx) && x->requires_grad) {
        y->grad = ag_grad(ctx, x); /* shared: dy accumulates straight into dx */
        ag_record(ctx, &reshape_op, y, &x, 1);
    } else {
        y->grad = NULL;
    }
    return ag__done(ctx, y);
}

ag_tensor *ag_transpose(ag_ctx *ctx, ag_tensor *x)
{
    if (ag__skip(ctx, x, x)) return NULL;
    if (x->ndim < 2) {
        char b[AG_SHAPE_BUF];
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_transpose: needs at least 2 dims, got %s", ag_shape_str(x, b, sizeof b));
        return NULL;
    }
    int shape[AG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    int M = x->shape[x->ndim - 2], N = x->shape[x->ndim - 1];
    shape[x->ndim - 2] = N;
    shape[x->ndim - 1] = M;
    ag_tensor *y = ag__tensor_uninit(ctx, x->ndim, shape);           // [..., N, M]
    if (!y) return NULL;
    transpose_rows(y->data, x->data, ag_numel(x) / ((size_t)M * N), M, N, false);
    ag_record(ctx, &transpose_op, y, &x, 1);
    return ag__done(ctx, y);
}
