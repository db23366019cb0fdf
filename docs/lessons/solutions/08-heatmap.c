/* 08-heatmap.c -- lesson 8's exercise: change what a heat map shows. A recency bias (ALiBi,
 * Press et al. 2022) adds -m (t - j) to the score of query t for key j, before the causal mask:
 * the farther back a key, the lower its score, so the weights crowd towards the diagonal.
 *
 *   s = q k^T / sqrt(D) + bias,  bias[t,j] = -m (t - j)         [T,T] (a constant, no gradient)
 *   a = softmax(causal(s))                                        the heat map's numbers
 *
 * It prints one head's weights without and with the bias, the mean distance back that a query
 * looks (sum_j a[t,j] (t - j), averaged over t), and checks the gradient with respect to q and
 * k. Plain ag_add broadcasts the [T,T] bias over [T,T] scores. */
#include "lesson.h"

enum { T = 6, D = 4 };

static ag_tensor *build_weights(ag_ctx *ctx, ag_tensor **in, void *user)
{
    double m = *(const double *)user;                               /* the bias slope */
    ag_tensor *s = ag_scale(ctx, ag_matmul(ctx, in[0], ag_transpose(ctx, in[1])), 1 / sqrt((double)D)); // [T,T]
    ag_tensor *bias = ag_tensor_new2(ctx, T, T);                    // [T,T]
    if (!bias) return NULL;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < T; j++) bias->data[t * T + j] = (ag_real)(-m * (t - j));
    s = ag_add(ctx, s, bias);                                       // [T,T]
    s = ag_masked_fill(ctx, s, ag_causal_mask(ctx, T), -INFINITY);  // [T,T]
    return ag_softmax(ctx, s);                                      // [T,T]
}

static int show(ag_tensor **in, double m)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *a = ctx ? build_weights(ctx, in, &m) : NULL;         // [T,T]
    if (!a) {
        ag_ctx_free(ctx);
        return 2;
    }
    char title[64];
    snprintf(title, sizeof title, "\nweights, slope m = %.1f  [T,T]", m);
    lesson_print(title, a->data, T, T);
    double back = 0;
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= t; j++) back += a->data[t * T + j] * (t - j) / T;
    printf("mean distance back: %.3f positions\n", back);
    ag_ctx_free(ctx);
    return lesson_check(m > 0 ? "attention with ALiBi" : "attention", build_weights, &m, in, 2);
}

int main(void)
{
    ag_threads_init(1);
    ag_rng rng;
    ag_rng_seed(&rng, 8);
    ag_tensor *in[2] = { ag_gradcheck_input("q", 2, (int[2]){ T, D }, &rng, -1.5, 1.5),
                         ag_gradcheck_input("k", 2, (int[2]){ T, D }, &rng, -1.5, 1.5) };
    if (!in[0] || !in[1]) return lesson_done(in, 2, 2);
    int rc = show(in, 0);
    int r = show(in, 1);
    return lesson_done(in, 2, r > rc ? r : rc);
}
