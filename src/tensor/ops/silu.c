/* silu.c -- SiLU (also called swish): y = x sigmoid(x), the gate of SwiGLU
 * (Shazeer 2020, "GLU Variants Improve Transformer"; llama2.c's FFN).
 *
 * forward:  s = sigmoid(x) = 1 / (1 + exp(-x));   y = x s
 * backward: dy/dx = s + x s (1 - s) = s (1 + x (1 - s));   dx += dy * dy/dx
 * sigmoid is evaluated so exp never overflows into inf/inf: with e = exp(-|x|) (in (0, 1]),
 * s = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0. So silu(1000) = 1000 and
 * silu(-1000) = -0, never NaN. Branch-free (a select, and ag__exp), so it vectorizes like
 * GELU. The forward saves s so the backward needs no exp. */
#include "../alloc.h"
#include "../kernel.h"
#include "../fast/fast.h"

// --- kernels ---

static inline ag_real silu_sigmoid(ag_real x)
{
    ag_real e = ag__exp(x < 0 ? x : -x);                            /* exp(-|x|) <= 1 */
    ag_real inv = 1 / (1 + e);
    return x >= 0 ? inv : e * inv;
}

static void silu_forward(ag_real *y, ag_real *sig, const ag_real *x, size_t N)
{
#pragma omp parallel for simd schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        ag_real s = silu_sigmoid(x[i]);
        if (sig) sig[i] = s;
        y[i] = x[i] * s;
    }
}

static void silu_backward_kernel(ag_real *dx, const ag_real *dy, const ag_real *x, const ag_real *sig, size_t N)
{
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        ag_real s = sig[i];
        dx[i] += dy[i] * s * (1 + x[i] * (1 - s));
    }
}

// --- backward ---

static ag_status silu_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = x s, s = sigmoid(x)  =>  dx += dy (s + x s (1 - s)) */
    ag_tensor *x = n->in[0];
    ag_real *dx = ag_grad(ctx, x);
    if (!dx) return ag_ctx_status(ctx);
    silu_backward_kernel(dx, n->out->grad, x->data, n->saved, ag_numel(x));
    return AG_OK;
}

// --- op ---

static const ag_op silu_op = { "silu", silu_backward };

ag_tensor *ag_silu(ag_ctx *ctx, ag_tensor *x)
{
    if (ag__skip(ctx, x, x)) return NULL;
    ag_tensor *y = ag_tensor_like(ctx, x);                          // x's shape
    if (!y) return NULL;
    size_t N = ag_numel(x);
    bool keep = ag_ctx_grad_enabled(ctx) && x->requires_grad;
    ag_real *sig = keep ? ag_ctx_alloc(ctx, N * sizeof(ag_real)) : NULL; // x's shape: sigmoid(x)
    if (keep && !sig) return NULL;
    silu_forward(y->data, sig, x->data, N);
    ag_node *n = ag_record(ctx, &silu_op, y, &x, 1);
    if (n) n->saved = sig;
    return ag__done(ctx, y);
}
