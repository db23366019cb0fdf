/* dropout.c -- inverted dropout, seeded.
 *
 * forward:  keep[i] = hash(seed, i) >= p;   y[i] = keep[i] ? x[i] / (1 - p) : 0
 *           (scaling at train time keeps E[y] = x, so eval needs no rescale: it is the identity)
 * backward: dx[i] += keep[i] ? dy[i] / (1 - p) : 0
 * The mask comes from a stateless hash of (seed, i): the same seed gives the same mask.
 * Fast kernel: fast/dropout.c (the forward on AVX2/AVX-512 lanes); tests/test_fast_targets.c
 * proves it equal to dropout_forward, bit for bit. fast/attention.c draws this mask too. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"
#include "../hash.h"   /* ag__dropout_keeps: rng.h's ag_hash_uniform, inline */

// --- reference kernels ---

/* m[i] = keep[i] ? 1/(1-p) : 0, saved for the backward; y = x * m */
static void dropout_forward(ag_real *y, ag_real *m, const ag_real *x, ag_real p, uint64_t seed, size_t N)
{
    ag_real scale = 1 / (1 - p);
    uint64_t threshold = ag__dropout_threshold((double)p);   /* keep: hash(seed, i) >= p, in integers */
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        m[i] = ag__dropout_keeps(seed, i, threshold) ? scale : 0;
        y[i] = x[i] * m[i];
    }
}

static void dropout_backward(ag_real *dx, const ag_real *dy, const ag_real *m, size_t N)
{
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t i = 0; i < N; i++) dx[i] += dy[i] * m[i];
}

// --- backward step ---

static ag_status dropout_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = x * scale_mask  =>  dx += dy * scale_mask */
    ag_tensor *x = n->in[0];
    ag_real *dx = ag_grad(ctx, x);                                  // x's shape
    if (!dx) return ag_ctx_status(ctx);
    dropout_backward(dx, n->out->grad, n->saved, ag_numel(x));
    return AG_OK;
}

// --- op ---

static const ag_op dropout_op = { .name = "dropout", .backward = dropout_backward_step };
const ag_dropout_kernels ag__dropout_reference = { dropout_forward, &dropout_op };  /* kernel.h's table */

ag_tensor *ag_dropout(ag_ctx *ctx, ag_tensor *x, ag_real p, uint64_t seed, bool train)
{
    if (ag__skip(ctx, x, x)) return NULL;
    if (!(p >= 0 && p < 1)) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "ag_dropout: p = %g is outside [0, 1)", (double)p);
        return NULL;
    }
    if (!train || p == 0) return x; /* the identity: no copy, no node */
    size_t N = ag_numel(x);
    ag_tensor *y = ag__tensor_uninit(ctx, x->ndim, x->shape);                          // x's shape
    ag_real *m = y ? ag_ctx_alloc(ctx, N * sizeof(ag_real)) : NULL; // x's shape: 0 or 1/(1-p)
    if (!m) return NULL;
    const ag_dropout_kernels *kern = &ag__kernels(ctx)->dropout;  /* reference or fast (kernel.h) */
    kern->forward(y->data, m, x->data, p, seed, N);
    ag_node *n = ag_record(ctx, kern->op, y, &x, 1);
    if (n) n->saved = m;
    return ag__done(ctx, y);
}
