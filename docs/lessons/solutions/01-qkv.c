/* 01-qkv.c -- lesson 1's exercise: one head of self-attention as a layer, the four linear maps
 * included, and its gradient checked with respect to the input and all eight parameters.
 *
 *   q = x Wq^T + bq,  k = x Wk^T + bk,  v = x Wv^T + bv          [B,T,C]
 *   y = softmax(q k^T / sqrt(C)) v Wo^T + bo                      [B,T,C]
 *
 * x feeds three linears, so its gradient is the sum of three contributions: the check passes
 * only because every backward adds (+=) into x's gradient. */
#include "lesson.h"

enum { B = 2, T = 4, C = 6 };

/* in: x, Wq, bq, Wk, bk, Wv, bv, Wo, bo */
static ag_tensor *build_head(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    ag_tensor *x = in[0];
    ag_tensor *q = ag_linear(ctx, x, in[1], in[2]);                 // [B,T,C]
    ag_tensor *k = ag_linear(ctx, x, in[3], in[4]);                 // [B,T,C]
    ag_tensor *v = ag_linear(ctx, x, in[5], in[6]);                 // [B,T,C]
    ag_tensor *s = ag_matmul(ctx, q, ag_transpose(ctx, k));         // [B,T,T]
    s = ag_scale(ctx, s, 1 / sqrt((double)C));                      // [B,T,T]
    ag_tensor *a = ag_softmax(ctx, s);                              // [B,T,T] each row sums to 1
    ag_tensor *o = ag_matmul(ctx, a, v);                            // [B,T,C]
    return ag_linear(ctx, o, in[7], in[8]);                         // [B,T,C]
}

int main(void)
{
    ag_threads_init(1);
    ag_rng rng;
    ag_rng_seed(&rng, 1);
    const char *names[9] = { "x", "Wq", "bq", "Wk", "bk", "Wv", "bv", "Wo", "bo" };
    ag_tensor *in[9] = { 0 };
    in[0] = ag_gradcheck_input(names[0], 3, (int[3]){ B, T, C }, &rng, -1, 1);
    for (int k = 1; k < 9; k++)
        in[k] = k % 2 ? ag_gradcheck_input(names[k], 2, (int[2]){ C, C }, &rng, -1, 1)   // W [C,C]
                      : ag_gradcheck_input(names[k], 1, (int[1]){ C }, &rng, -1, 1);     // b [C]
    for (int k = 0; k < 9; k++)
        if (!in[k]) return lesson_done(in, 9, 2);
    int rc = lesson_check("one attention head", build_head, NULL, in, 9);
    return lesson_done(in, 9, rc);
}
