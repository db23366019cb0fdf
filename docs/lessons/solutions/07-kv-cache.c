/* 07-kv-cache.c -- lesson 7's exercise: why a KV cache gives the same numbers as the full
 * forward, in two checks on one head.
 *
 *   1. The cached step: the newest query q_p [1,D] against the cached keys and values of
 *      positions 0..p, K, V [p+1,D], with no mask (p may see them all), equals row p of the
 *      full causal attention. Its gradient with respect to q_p, K and V is checked.
 *   2. Why old rows may be kept: with the causal mask, rows 0..p-1 of the output do not depend
 *      on key p or value p at all. The gradient of those rows with respect to K and V is exactly
 *      zero in row p, so appending a token never changes what was computed before it. */
#include "lesson.h"

enum { T = 6, D = 4 };   /* positions 0..T-1; the newest is p = T-1 */

/* in: q [T,D], k [T,D], v [T,D]; the full causal attention [T,D] */
static ag_tensor *build_full(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    ag_tensor *s = ag_scale(ctx, ag_matmul(ctx, in[0], ag_transpose(ctx, in[1])), 1 / sqrt((double)D)); // [T,T]
    s = ag_masked_fill(ctx, s, ag_causal_mask(ctx, T), -INFINITY);  // [T,T]
    return ag_matmul(ctx, ag_softmax(ctx, s), in[2]);               // [T,D]
}

/* in: q_p [1,D], K [T,D], V [T,D] (the cache); the cached step [1,D] */
static ag_tensor *build_step(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    ag_tensor *s = ag_scale(ctx, ag_matmul(ctx, in[0], ag_transpose(ctx, in[1])), 1 / sqrt((double)D)); // [1,T]
    return ag_matmul(ctx, ag_softmax(ctx, s), in[2]);               // [1,D] no mask
}

/* |step - row p of full|, largest over the row */
static double step_vs_full(ag_tensor **full_in, ag_tensor **step_in)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *full = ctx ? build_full(ctx, full_in, NULL) : NULL;  // [T,D]
    ag_tensor *step = full ? build_step(ctx, step_in, NULL) : NULL; // [1,D]
    double worst = step ? 0 : NAN;
    for (int d = 0; step && d < D; d++) worst = fmax(worst, fabs(step->data[d] - full->data[(T - 1) * D + d]));
    ag_ctx_free(ctx);
    return worst;
}

/* the largest |dL/dk| and |dL/dv| in row p for L = sum over rows 0..p-1 of out * R */
static double grad_of_old_rows(ag_tensor **in)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *out = ctx ? build_full(ctx, in, NULL) : NULL;        // [T,D]
    ag_real R[T * D] = { 0 };                                       /* row p gets no weight */
    for (int i = 0; i < (T - 1) * D; i++) R[i] = (ag_real)((i % 7) - 3) / 3;
    double worst = NAN;
    if (out && ag_backward_from(ctx, out, R) == AG_OK) {
        worst = 0;
        for (int d = 0; d < D; d++)
            worst = fmax(worst, fmax(fabs(in[1]->grad[(T - 1) * D + d]), fabs(in[2]->grad[(T - 1) * D + d])));
    }
    for (int k = 0; k < 3; k++) memset(in[k]->grad, 0, ag_numel(in[k]) * sizeof(ag_real));
    ag_ctx_free(ctx);
    return worst;
}

int main(void)
{
    ag_threads_init(1);
    ag_rng rng;
    ag_rng_seed(&rng, 7);
    const char *names[3] = { "q", "K", "V" };
    ag_tensor *full[3], *step[3];
    for (int k = 0; k < 3; k++) full[k] = ag_gradcheck_input(names[k], 2, (int[2]){ T, D }, &rng, -1.5, 1.5);
    step[0] = ag_gradcheck_input("q_p", 2, (int[2]){ 1, D }, &rng, 0, 1);
    step[1] = full[1];                                              /* the cache holds k, v of 0..p */
    step[2] = full[2];
    if (!full[0] || !full[1] || !full[2] || !step[0]) {
        ag_tensor_free_owned(step[0]);
        return lesson_done(full, 3, 2);
    }
    memcpy(step[0]->data, full[0]->data + (T - 1) * D, D * sizeof(ag_real)); /* q_p = row p of q */
    printf("max |cached step - row p of the full forward| = %.1e\n", step_vs_full(full, step));
    printf("max |d(rows 0..p-1)/d(k_p, v_p)|             = %.1e\n", grad_of_old_rows(full));
    int rc = lesson_check("cached step", build_step, NULL, step, 3);
    ag_tensor_free_owned(step[0]);
    return lesson_done(full, 3, rc);
}
