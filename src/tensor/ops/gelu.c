/* gelu.c -- GELU, tanh form (as GPT-2 and MODEL.md use).
 *
 * forward:  u = sqrt(2/pi) (x + 0.044715 x^3);   y = 0.5 x (1 + tanh(u))
 * backward: dy/dx = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 *           dx += dy * dy/dx
 * tanh(u) is computed as 1 - 2 / (1 + exp(2u)): exact at u = +-inf (exp gives inf or 0), within
 * 2e-7 of tanhf elsewhere, and 3.5x faster than tanhf on this machine. The forward saves
 * tanh(u) so the backward needs no transcendental at all (recomputing it there instead was
 * slower: 290 vs 230 us per baby layer). The forward's loop is the compute-bound one and is
 * cloned for AVX2 (AG_CLONES): 295 -> 140 us per baby layer. */
#include <omp.h>
#include "../alloc.h"
#include "../kernel.h"
#include "../fast/fast.h"

#define GELU_K ((ag_real)0.7978845608028654) /* sqrt(2/pi) */
#define GELU_A ((ag_real)0.044715)

// --- kernels ---

static inline ag_real gelu_tanh_u(ag_real x)
{
    ag_real u = GELU_K * (x + GELU_A * x * x * x);
    return 1 - 2 / (1 + ag__exp(2 * u));
}

/* items [0, n) on this thread: the loop that does the work, in two clones (see AG_CLONES) */
AG_CLONES static void gelu_forward_span(ag_real *y, ag_real *th, const ag_real *x, size_t n)
{
    if (th) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            ag_real t = gelu_tanh_u(x[i]);
            th[i] = t;
            y[i] = (ag_real)0.5 * x[i] * (1 + t);
        }
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) y[i] = (ag_real)0.5 * x[i] * (1 + gelu_tanh_u(x[i]));
    }
}

static void gelu_forward(ag_real *y, ag_real *th, const ag_real *x, size_t N)
{
#pragma omp parallel if (N >= AG_PAR_MIN)
    {
        size_t i0, i1;
        ag__share(N, omp_get_thread_num(), omp_get_num_threads(), &i0, &i1);
        gelu_forward_span(y + i0, th ? th + i0 : NULL, x + i0, i1 - i0);
    }
}

static void gelu_backward_kernel(ag_real *dx, const ag_real *dy, const ag_real *x, const ag_real *th, size_t N,
                                 bool acc)
{
    const ag_real half = 0.5;
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        ag_real v = x[i], t = th[i];
        ag_real local = half * (1 + t) + half * v * (1 - t * t) * GELU_K * (1 + 3 * GELU_A * v * v);
        dx[i] = acc ? dx[i] + dy[i] * local : dy[i] * local;
    }
}

// --- backward ---

static ag_status gelu_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3) */
    ag_tensor *x = n->in[0];
    bool acc;
    ag_real *dx = ag__grad_into(ctx, x, &acc);
    if (!dx) return ag_ctx_status(ctx);
    gelu_backward_kernel(dx, n->out->grad, x->data, n->saved, ag_numel(x), acc);
    return AG_OK;
}

// --- op ---

static const ag_op gelu_op = { "gelu", gelu_backward };

ag_tensor *ag_gelu(ag_ctx *ctx, ag_tensor *x)
{
    if (ag__skip(ctx, x, x)) return NULL;
    ag_tensor *y = ag__tensor_uninit(ctx, x->ndim, x->shape);                          // x's shape
    if (!y) return NULL;
    size_t N = ag_numel(x);
    bool keep = ag_ctx_grad_enabled(ctx) && x->requires_grad;
    ag_real *th = keep ? ag_ctx_alloc(ctx, N * sizeof(ag_real)) : NULL; // x's shape: tanh(u)
    if (keep && !th) return NULL;
    gelu_forward(y->data, th, x->data, N);
    ag_node *n = ag_record(ctx, &gelu_op, y, &x, 1);
    if (n) n->saved = th;
    return ag__done(ctx, y);
}
