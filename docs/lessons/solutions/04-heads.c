/* 04-heads.c -- lesson 4's exercise: causal multi-head attention written with ag_split_heads and
 * ag_merge_heads, compared with the library's ag_attention (src/nn/attention.c), and both
 * gradient-checked with respect to q, k and v.
 *
 *   q, k, v [B,T,C] -> split into H heads [B,H,T,D] -> softmax(q k^T / sqrt(D), causal) v
 *   -> merge the heads -> [B,T,C]
 *
 * ag_attention is those same lines (attend() in src/nn/attention.c). Given ag_causal_mask's own
 * mask, whose kind is known, the library runs their fast twin instead: one op with a
 * hand-written backward (src/tensor/fast/attention.c). The same numbers in a mask built by hand
 * have no kind and go op by op. The tape says which path ran, and the gradient check of the
 * fast twin tests a different piece of code than the check of the ops. */
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

/* the causal numbers, 1 where key j <= query t, in a tensor of our own: a mask of no kind */
static ag_tensor *causal_by_hand(ag_ctx *ctx)
{
    ag_tensor *m = ag_tensor_new2(ctx, T, T);                       // [T,T]
    for (int t = 0; m && t < T; t++)
        for (int j = 0; j <= t; j++) m->data[t * T + j] = 1;
    return m;
}

/* user: NULL for ag_causal_mask's mask, anything else for the one built by hand */
static ag_tensor *build_library(ag_ctx *ctx, ag_tensor **in, void *user)
{
    ag_tensor *mask = user ? causal_by_hand(ctx) : ag_causal_mask(ctx, T); // [T,T]
    return ag_attention(ctx, in[0], in[1], in[2], H, 1 / sqrt((double)(C / H)), mask); // [B,T,C]
}

/* the largest |split/merge - ag_attention| over the output; *nodes gets ag_attention's count
 * of tape nodes */
static double max_difference(ag_tensor **in, void *user, size_t *nodes)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *a = ctx ? build_split(ctx, in, NULL) : NULL;         // [B,T,C]
    size_t before = a ? ag_ctx_get_stats(ctx).tape_nodes : 0;
    ag_tensor *b = a ? build_library(ctx, in, user) : NULL;         // [B,T,C]
    *nodes = b ? ag_ctx_get_stats(ctx).tape_nodes - before : 0;
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
    int by_hand = 1;
    size_t n_kind, n_hand;
    double d_kind = max_difference(in, NULL, &n_kind), d_hand = max_difference(in, &by_hand, &n_hand);
    printf("max |split/merge - ag_attention|: %.1e with ag_causal_mask (%zu tape node%s), "
           "%.1e with the mask built by hand (%zu tape nodes: op by op)\n",
           d_kind, n_kind, n_kind == 1 ? ": the fast twin" : "s", d_hand, n_hand);
    int rc = lesson_check("split, attend, merge", build_split, NULL, in, 3);
    int r = lesson_check("ag_attention (ag_causal_mask)", build_library, NULL, in, 3);
    return lesson_done(in, 3, r > rc ? r : rc);
}
