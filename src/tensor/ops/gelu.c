/* gelu.c -- GELU, tanh form (as GPT-2 and MODEL.md use).
 *
 * forward:  u = sqrt(2/pi) (x + 0.044715 x^3);   y = 0.5 x (1 + tanh(u))
 * backward: dy/dx = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 *           dx += dy * dy/dx
 * The forward saves tanh(u), so the backward needs no transcendental at all.
 * Fast kernels: fast/gelu.c (tanh from one exp, an AVX2 target, dx written on first touch);
 * tests/test_fast_ref_rows.c proves them equal. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

#define GELU_K ((ag_real)0.7978845608028654) /* sqrt(2/pi) */
#define GELU_A ((ag_real)0.044715)

// --- reference kernels: the formulas above as plain loops ---

/* th (NULL: not wanted) gets tanh(u) for the backward */
static void gelu_forward(ag_real *y, ag_real *th, const ag_real *x, size_t N)
{
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        ag_real u = GELU_K * (x[i] + GELU_A * x[i] * x[i] * x[i]);
        ag_real t = AG_TANH(u);
        if (th) th[i] = t;
        y[i] = (ag_real)0.5 * x[i] * (1 + t);
    }
}

static void gelu_backward(ag_real *dx, const ag_real *dy, const ag_real *x, const ag_real *th, size_t N)
{
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        ag_real v = x[i], t = th[i];
        ag_real dydx = (ag_real)0.5 * (1 + t) + (ag_real)0.5 * v * (1 - t * t) * GELU_K * (1 + 3 * GELU_A * v * v);
        dx[i] += dy[i] * dydx;
    }
}

// --- backward step ---

static ag_status gelu_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)  =>  dx += dy dy/dx */
    ag_tensor *x = n->in[0];
    ag_real *dx = ag_grad(ctx, x);                                  // x's shape
    if (!dx) return ag_ctx_status(ctx);
    gelu_backward(dx, n->out->grad, x->data, n->saved, ag_numel(x));
    return AG_OK;
}

// --- op ---

static const ag_op gelu_op = { .name = "gelu", .backward = gelu_backward_step };
const ag_gelu_kernels ag__gelu_reference = { gelu_forward, &gelu_op };  /* kernel.h's table */

ag_tensor *ag_gelu(ag_ctx *ctx, ag_tensor *x)
{
    if (ag__skip(ctx, x, x)) return NULL;
    ag_tensor *y = ag__tensor_uninit(ctx, x->ndim, x->shape);                          // x's shape
    if (!y) return NULL;
    size_t N = ag_numel(x);
    bool keep = ag_ctx_grad_enabled(ctx) && x->requires_grad;
    ag_real *th = keep ? ag_ctx_alloc(ctx, N * sizeof(ag_real)) : NULL; // x's shape: tanh(u)
    if (keep && !th) return NULL;
    const ag_gelu_kernels *kern = &ag__kernels(ctx)->gelu;  /* reference or fast (kernel.h) */
    kern->forward(y->data, th, x->data, N);
    ag_node *n = ag_record(ctx, kern->op, y, &x, 1);
    if (n) n->saved = th;
    return ag__done(ctx, y);
}
