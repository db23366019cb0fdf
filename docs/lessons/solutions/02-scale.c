/* 02-scale.c -- lesson 2's exercise: the attention weights softmax(scale q k^T) of one wide head
 * (D = 64, q and k entries N(0, 1)), with scale 1/sqrt(D) and with scale 1 (what --no-scale
 * does). The gradient check passes for both: the backward is right either way. What the scale
 * changes is printed first: how peaked the weights are, and how much gradient still gets
 * through the softmax to its input s.
 *
 *   s = scale q k^T,  a = softmax(s)        q, k [T,D] -> a [T,T]                            */
#include "lesson.h"

enum { T = 8, D = 64 };

static ag_tensor *build_weights(ag_ctx *ctx, ag_tensor **in, void *user)
{
    double scale = *(const double *)user;
    ag_tensor *s = ag_matmul(ctx, in[0], ag_transpose(ctx, in[1])); // [T,T]
    return ag_softmax(ctx, ag_scale(ctx, s, scale));                // [T,T]
}

/* The mean largest weight of a row, and the mean |dL/ds| at the softmax's input for
 * L = sum(a * R), R uniform in [-1, 1) drawn from r_seed. */
static void measure(ag_tensor **in, double scale, uint64_t r_seed, double *peak, double *grad_s)
{
    ag_ctx *ctx = ag_ctx_new();
    if (!ctx) return;
    ag_tensor *s = ag_scale(ctx, ag_matmul(ctx, in[0], ag_transpose(ctx, in[1])), scale); // [T,T]
    ag_tensor *a = ag_softmax(ctx, s);                             // [T,T]
    ag_real R[T * T];
    ag_rng rng;
    ag_rng_seed(&rng, r_seed);
    for (int i = 0; i < T * T; i++) R[i] = 2 * ag_rng_uniform(&rng) - 1;
    if (a && ag_backward_from(ctx, a, R) == AG_OK && s->grad) {
        *peak = *grad_s = 0;
        for (int t = 0; t < T; t++) {
            double m = 0;
            for (int j = 0; j < T; j++) m = fmax(m, a->data[t * T + j]);
            *peak += m / T;
        }
        for (int i = 0; i < T * T; i++) *grad_s += fabs(s->grad[i]) / (T * T);
    }
    for (int k = 0; k < 2; k++) memset(in[k]->grad, 0, ag_numel(in[k]) * sizeof(ag_real));
    ag_ctx_free(ctx);
}

/* ./02-scale [SEED]: q and k from SEED (default 2), R from SEED + 3 */
int main(int argc, char **argv)
{
    uint64_t seed;
    if (lesson_seed(argc, argv, 2, &seed)) return 2;
    ag_threads_init(1);
    ag_rng rng;
    ag_rng_seed(&rng, seed);
    ag_tensor *in[2] = { ag_gradcheck_input("q", 2, (int[2]){ T, D }, &rng, 0, 1),
                         ag_gradcheck_input("k", 2, (int[2]){ T, D }, &rng, 0, 1) };
    if (!in[0] || !in[1]) return lesson_done(in, 2, 2);
    for (int k = 0; k < 2; k++)   /* N(0, 1) entries: q.k has standard deviation sqrt(D) = 8 */
        for (size_t i = 0; i < ag_numel(in[k]); i++) in[k]->data[i] = ag_rng_normal(&rng);
    const double scales[2] = { 1 / sqrt((double)D), 1 };
    const char *names[2] = { "scale 1/sqrt(D)", "scale 1 (--no-scale)" };
    int rc = 0;
    for (int i = 0; i < 2; i++) {
        double peak = NAN, grad_s = NAN;
        measure(in, scales[i], seed + 3, &peak, &grad_s);
        printf("%s: mean peak weight %.3f, mean |dL/ds| %.5f\n", names[i], peak, grad_s);
        int r = lesson_check(names[i], build_weights, (void *)&scales[i], in, 2);
        rc = r > rc ? r : rc;
    }
    return lesson_done(in, 2, rc);
}
