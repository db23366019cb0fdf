/* mul.c -- y = a * b, elementwise, a and b of the same shape (SwiGLU's gate * up).
 *
 * forward:  y[i] = a[i] b[i]
 * backward: da[i] += dy[i] b[i];   db[i] += dy[i] a[i]
 *           (product rule; with a == b, as in x * x, both terms land in the same grad and
 *           give 2 x dy, which is right because gradients accumulate)
 * One path: these plain loops are the kernels; fast/ has none for this op. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

// --- reference kernels ---

static void mul_forward(ag_real *y, const ag_real *a, const ag_real *b, size_t N)
{
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) y[i] = a[i] * b[i];
}

/* dx += dy * other: one call per input, so a == b needs no special case */
static void mul_backward(ag_real *dx, const ag_real *dy, const ag_real *other, size_t N)
{
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) dx[i] += dy[i] * other[i];
}

// --- backward step ---

static ag_status mul_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = a * b  =>  da += dy * b,  db += dy * a */
    ag_tensor *a = n->in[0], *b = n->in[1];
    const ag_real *dy = n->out->grad;
    size_t N = ag_numel(a);
    if (a->requires_grad) {
        ag_real *da = ag_grad(ctx, a);                              // a's shape
        if (!da) return ag_ctx_status(ctx);
        mul_backward(da, dy, b->data, N);
    }
    if (b->requires_grad) {
        ag_real *db = ag_grad(ctx, b);                              // b's shape
        if (!db) return ag_ctx_status(ctx);
        mul_backward(db, dy, a->data, N);
    }
    return AG_OK;
}

// --- op ---

static const ag_op mul_op = { .name = "mul", .backward = mul_backward_step };

ag_tensor *ag_mul(ag_ctx *ctx, ag_tensor *a, ag_tensor *b)
{
    if (ag__skip(ctx, a, b)) return NULL;
    if (!ag_same_shape(a, b)) {
        char sa[AG_SHAPE_BUF], sb[AG_SHAPE_BUF];
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_mul: shapes differ: %s * %s (need the same shape)",
                    ag_shape_str(a, sa, sizeof sa), ag_shape_str(b, sb, sizeof sb));
        return NULL;
    }
    ag_tensor *y = ag_tensor_like(ctx, a);                          // a's shape
    if (!y) return NULL;
    mul_forward(y->data, a->data, b->data, ag_numel(a));
    ag_tensor *in[2] = { a, b };
    ag_record(ctx, &mul_op, y, in, 2);
    return ag__done(ctx, y);
}
