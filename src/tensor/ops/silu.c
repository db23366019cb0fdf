/* silu.c -- SiLU (also called swish): y = x sigmoid(x), the gate of SwiGLU
 * (Shazeer 2020, "GLU Variants Improve Transformer"; llama2.c's FFN).
 *
 * forward:  s = sigmoid(x) = 1 / (1 + exp(-x));   y = x s
 * backward: dy/dx = s + x s (1 - s) = s (1 + x (1 - s));   dx += dy * dy/dx
 * 1 / (1 + exp(-x)) never gives NaN: for very negative x, exp(-x) overflows to inf and s = 0,
 * so silu(-1000) = -0 and silu(1000) = 1000. The forward saves s so the backward needs no exp.
 * Fast kernels: fast/silu.c (the forward: a branch-free sigmoid in SIMD); the backward has one
 * path. tests/test_fast_ref_rows.c proves them equal. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

// --- reference kernels: the formulas above as plain loops ---

/* sig (NULL: not wanted) gets s for the backward */
static void silu_forward(ag_real *y, ag_real *sig, const ag_real *x, size_t N)
{
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        ag_real s = 1 / (1 + AG_EXP(-x[i]));
        if (sig) sig[i] = s;
        y[i] = x[i] * s;
    }
}

static void silu_backward(ag_real *dx, const ag_real *dy, const ag_real *x, const ag_real *sig, size_t N)
{
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        ag_real s = sig[i];
        dx[i] += dy[i] * s * (1 + x[i] * (1 - s));
    }
}

// --- backward step ---

static ag_status silu_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = x s, s = sigmoid(x)  =>  dx += dy (s + x s (1 - s)) */
    ag_tensor *x = n->in[0];
    ag_real *dx = ag_grad(ctx, x);                                  // x's shape
    if (!dx) return ag_ctx_status(ctx);
    silu_backward(dx, n->out->grad, x->data, n->saved, ag_numel(x));
    return AG_OK;
}

// --- op ---

static const ag_op silu_op = { .name = "silu", .backward = silu_backward_step };
const ag_silu_kernels ag__silu_reference = { silu_forward, &silu_op };  /* kernel.h's table */

ag_tensor *ag_silu(ag_ctx *ctx, ag_tensor *x)
{
    if (ag__skip(ctx, x, x)) return NULL;
    ag_tensor *y = ag_tensor_like(ctx, x);                          // x's shape
    if (!y) return NULL;
    size_t N = ag_numel(x);
    bool keep = ag_ctx_grad_enabled(ctx) && x->requires_grad;
    ag_real *sig = keep ? ag_ctx_alloc(ctx, N * sizeof(ag_real)) : NULL; // x's shape: sigmoid(x)
    if (keep && !sig) return NULL;
    const ag_silu_kernels *kern = &ag__kernels(ctx)->silu;  /* reference or fast (kernel.h) */
    kern->forward(y->data, sig, x->data, N);
    ag_node *n = ag_record(ctx, kern->op, y, &x, 1);
    if (n) n->saved = sig;
    return ag__done(ctx, y);
}
