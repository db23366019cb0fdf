/* 04-heads.c -- lesson 4's exercise: causal multi-head attention written with ag_split_heads and
 * ag_merge_heads, compared with the fused op ag_attention (src/tensor/ops/attention.c, one op
 * with a hand-written backward), and both gradient-checked with respect to q, k and v.
 *
 *   q, k, v [B,T,C] -> split into H heads [B,H,T,D] -> softmax(q k^T / sqrt(D), causal) v
 *   -> merge the heads -> [B,T,C]                                                            */
#include "lesson.h"

enum { B = 2, T = 5, C = 6, H = 2 };   /* D = C / H = 3 */

static ag_tensor *build_split(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    int D = C / H;
    ag_tensor *q = ag_split_heads(ctx, in[0], H);                   // [B,H,T,D]
    ag_tensor *k = ag_split_heads(ctx, in[1], H);                   // [B,H,T,D]
    ag_tensor *v = ag_split_heads(ctx, in[2], H);                   // [B,H,T,D]
    ag_tensor *s = ag_matmul(ctx, q, ag_transpose(ctx, k));         // [B,H,T,T] one score matrix per head
    s = ag_scale(ctx, s, 1 / sqrt((double)D));                      // [B,H,T,T]
    s = ag_masked_fill(ctx, s, ag_causal_mask(ctx, T), -INFINITY);  // [B,H,T,T] the [T,T] mask repeats
    ag_tensor *o = ag_matmul(ctx, ag_softmax(ctx, s), v);           // [B,H,T,D]
    return ag_merge_heads(ctx, o);                                  // [B,T,C]
}

static ag_tensor *build_fused(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_attention(ctx, in[0], in[1], in[2], H, 1 / sqrt((double)(C / H)), true); // [B,T,C]
}

/* the largest |composed - fused| over the output */
static double max_difference(ag_tensor **in)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *a = ctx ? build_split(ctx, in, NULL) : NULL;         // [B,T,C]
    ag_tensor *b = a ? build_fused(ctx, in, NULL) : NULL;           // [B,T,C]
    double worst = b ? 0 : NAN;
    for (size_t i = 0; b && i < ag_numel(b); i++) worst = fmax(worst, fabs(a->data[i] - b->data[i]));
    ag_ctx_free(ctx);
    return worst;
}

int main(void)
{
    ag_threads_init(1);
    ag_rng rng;
    ag_rng_seed(&rng, 4);
    const char *names[3] = { "q", "k", "v" };
    ag_tensor *in[3];
    for (int i = 0; i < 3; i++) in[i] = ag_gradcheck_input(names[i], 3, (int[3]){ B, T, C }, &rng, -1.5, 1.5);
    if (!in[0] || !in[1] || !in[2]) return lesson_done(in, 3, 2);
    printf("max |split/merge - ag_attention| = %.1e\n", max_difference(in));
    int rc = lesson_check("split, attend, merge", build_split, NULL, in, 3);
    int r = lesson_check("ag_attention (fused)", build_fused, NULL, in, 3);
    return lesson_done(in, 3, r > rc ? r : rc);
}
