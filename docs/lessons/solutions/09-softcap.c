/* 09-softcap.c -- lesson 9's exercise: an op of your own with a hand-written backward, outside
 * the attograd tree, proven with ag_gradcheck. The op is soft-capping (Gemma 2 caps its
 * attention scores this way): every score stays inside (-c, c), smoothly.
 *
 *   forward:   y = c tanh(x / c)
 *   backward:  dx += dy (1 - tanh(x / c)^2)          (d/dx c tanh(x/c) = 1 - tanh^2)
 *
 * It is checked alone and inside causal attention, where it goes BEFORE the mask: capped after
 * it, a masked -inf would become -c, and the future would get weight again (printed below). */
#include "lesson.h"

enum { T = 5, D = 4 };
#define CAP 2.0

// --- the op: kernels, backward, and the function that records it ---

/* y = c tanh(x/c) and th = tanh(x/c), saved for the backward; x, y, th [N] */
static void softcap_forward(ag_real *y, ag_real *th, const ag_real *x, ag_real c, size_t N)
{
    for (size_t i = 0; i < N; i++) {
        th[i] = tanh(x[i] / c);
        y[i] = c * th[i];
    }
}

static void softcap_backward(ag_real *dx, const ag_real *dy, const ag_real *th, size_t N)
{
    for (size_t i = 0; i < N; i++) dx[i] += dy[i] * (1 - th[i] * th[i]);
}

static ag_status softcap_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = c tanh(x/c)  =>  dx += dy (1 - tanh(x/c)^2) */
    ag_tensor *x = n->in[0];
    ag_real *dx = ag_grad(ctx, x);                                  // x's shape, zero-filled on first use
    if (!dx) return ag_ctx_status(ctx);
    softcap_backward(dx, n->out->grad, n->saved, ag_numel(x));
    return AG_OK;
}

static const ag_op softcap_op = { .name = "softcap", .backward = softcap_backward_step };

/* c tanh(x / c) of every element: [...] -> [...]; c > 0. NULL on error, as the library's ops. */
static ag_tensor *softcap(ag_ctx *ctx, ag_tensor *x, ag_real c)
{
    if (!x || ag_ctx_status(ctx) != AG_OK) return NULL;
    if (!(c > 0)) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "softcap: the cap must be > 0, got %g", (double)c);
        return NULL;
    }
    ag_tensor *y = ag_tensor_like(ctx, x);                          // x's shape
    ag_real *th = y ? ag_ctx_alloc(ctx, ag_numel(x) * sizeof(ag_real)) : NULL; // x's numel
    if (!th) return NULL;
    softcap_forward(y->data, th, x->data, c, ag_numel(x));
    ag_node *n = ag_record(ctx, &softcap_op, y, &x, 1);             /* NULL in no-grad mode */
    if (n) n->saved = th;
    return ag_ctx_status(ctx) == AG_OK ? y : NULL;
}

// --- the checks ---

static ag_tensor *build_op(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return softcap(ctx, in[0], CAP);                                // [T,T]
}

/* in: q, k, v [T,D]; user: non-NULL caps after the mask (the mistake) */
static ag_tensor *build_attention(ag_ctx *ctx, ag_tensor **in, void *user)
{
    ag_tensor *s = ag_scale(ctx, ag_matmul(ctx, in[0], ag_transpose(ctx, in[1])), 1 / sqrt((double)D)); // [T,T]
    if (!user) s = softcap(ctx, s, CAP);                            // [T,T] cap, then mask
    s = ag_masked_fill(ctx, s, ag_causal_mask(ctx, T), -INFINITY);  // [T,T]
    if (user) s = softcap(ctx, s, CAP);                             // [T,T] -inf becomes -c
    return ag_matmul(ctx, ag_softmax(ctx, s), in[2]);               // [T,D]
}

/* the weight of the future keys in row 0 when capping after the mask */
static double future_weight(ag_tensor **in)
{
    ag_ctx *ctx = ag_ctx_new();
    if (!ctx) return NAN;
    ag_tensor *s = ag_scale(ctx, ag_matmul(ctx, in[0], ag_transpose(ctx, in[1])), 1 / sqrt((double)D)); // [T,T]
    s = softcap(ctx, ag_masked_fill(ctx, s, ag_causal_mask(ctx, T), -INFINITY), CAP);     // [T,T]
    ag_tensor *a = ag_softmax(ctx, s);                              // [T,T]
    double w = a ? 0 : NAN;
    for (int j = 1; a && j < T; j++) w += a->data[j];
    ag_ctx_free(ctx);
    return w;
}

int main(void)
{
    ag_threads_init(1);
    ag_rng rng;
    ag_rng_seed(&rng, 9);
    ag_tensor *x = ag_gradcheck_input("x", 2, (int[2]){ T, T }, &rng, -5, 5);
    ag_tensor *in[3] = { ag_gradcheck_input("q", 2, (int[2]){ T, D }, &rng, -2, 2),
                         ag_gradcheck_input("k", 2, (int[2]){ T, D }, &rng, -2, 2),
                         ag_gradcheck_input("v", 2, (int[2]){ T, D }, &rng, -2, 2) };
    if (!x || !in[0] || !in[1] || !in[2]) {
        ag_tensor_free_owned(x);
        return lesson_done(in, 3, 2);
    }
    int rc = lesson_check("softcap(x)", build_op, NULL, &x, 1);
    int r = lesson_check("attention, softcap before the mask", build_attention, NULL, in, 3);
    rc = r > rc ? r : rc;
    printf("capped after the mask instead: row 0 gives its future keys weight %.3f (should be 0)\n",
           future_weight(in));
    ag_tensor_free_owned(x);
    return lesson_done(in, 3, rc);
}
