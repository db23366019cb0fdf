/* 05-norms.c -- lesson 5's exercise: one residual sub-layer around a branch f (here a linear
 * layer, f(x) = x W^T + b), in the four arrangements that --norm-position and --norm choose:
 *
 *   Pre-LN:   y = x + f(N(x))          Post-LN:   y = N(x + f(x))
 *   N = LayerNorm (x - mean) / sqrt(var + eps) * w + beta,  or RMSNorm x / rms(x) * w
 *
 * Each is gradient-checked with respect to x and every parameter. Then stacks of 1 to 64 such
 * sub-layers (the same weights each time) show what the identity path of Pre-LN keeps: the
 * size of dL/dx at the bottom of the stack, which under Post-LN passes through every norm. */
#include "lesson.h"

enum { B = 2, T = 3, C = 8 };

typedef struct {
    bool post;        /* Post-LN instead of Pre-LN */
    bool rms;         /* RMSNorm instead of LayerNorm */
    int depth;        /* sub-layers stacked */
} arrangement;

/* in: x [B,T,C], W [C,C], b [C], w [C], beta [C] (LayerNorm only) */
static ag_tensor *norm(ag_ctx *ctx, ag_tensor **in, const arrangement *a, ag_tensor *x)
{
    return a->rms ? ag_rmsnorm(ctx, x, in[3], 1e-5) : ag_layernorm(ctx, x, in[3], in[4], 1e-5); // [B,T,C]
}

static ag_tensor *build_residual(ag_ctx *ctx, ag_tensor **in, void *user)
{
    const arrangement *a = user;
    ag_tensor *x = in[0];                                           // [B,T,C]
    for (int l = 0; l < a->depth; l++) {
        if (a->post)
            x = norm(ctx, in, a, ag_add(ctx, x, ag_linear(ctx, x, in[1], in[2])));   // [B,T,C] N(x + f(x))
        else
            x = ag_add(ctx, x, ag_linear(ctx, norm(ctx, in, a, x), in[1], in[2]));   // [B,T,C] x + f(N(x))
    }
    return x;
}

/* R [B,T,C] uniform in [-1, 1) from seed; returns its root mean square (about 1/sqrt(3)) */
static double fill_R(ag_real *R, uint64_t seed)
{
    ag_rng rng;
    ag_rng_seed(&rng, seed);
    double sum = 0;
    for (int i = 0; i < B * T * C; i++) {
        R[i] = 2 * ag_rng_uniform(&rng) - 1;
        sum += R[i] * R[i];
    }
    return sqrt(sum / (B * T * C));
}

/* the root mean square of dL/dx for L = sum(y * R), R from r_seed */
static double grad_rms(ag_tensor **in, const arrangement *a, uint64_t r_seed)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *y = ctx ? build_residual(ctx, in, (void *)a) : NULL; // [B,T,C]
    ag_real R[B * T * C];
    fill_R(R, r_seed);
    for (int k = 0; k < 5; k++) memset(in[k]->grad, 0, ag_numel(in[k]) * sizeof(ag_real));
    double sum = NAN;
    if (y && ag_backward_from(ctx, y, R) == AG_OK) {
        sum = 0;
        for (int i = 0; i < B * T * C; i++) sum += in[0]->grad[i] * in[0]->grad[i];
    }
    for (int k = 0; k < 5; k++) memset(in[k]->grad, 0, ag_numel(in[k]) * sizeof(ag_real));
    ag_ctx_free(ctx);
    return sqrt(sum / (B * T * C));
}

/* ./05-norms [SEED]: the inputs from SEED (default 5), R from SEED + 1 */
int main(int argc, char **argv)
{
    uint64_t seed;
    if (lesson_seed(argc, argv, 5, &seed)) return 2;
    ag_threads_init(1);
    ag_rng rng;
    ag_rng_seed(&rng, seed);
    ag_tensor *in[5] = { ag_gradcheck_input("x", 3, (int[3]){ B, T, C }, &rng, -2, 2),
                         ag_gradcheck_input("W", 2, (int[2]){ C, C }, &rng, -0.5, 0.5),
                         ag_gradcheck_input("b", 1, (int[1]){ C }, &rng, -0.5, 0.5),
                         ag_gradcheck_input("w", 1, (int[1]){ C }, &rng, 0.5, 1.5),
                         ag_gradcheck_input("beta", 1, (int[1]){ C }, &rng, -0.5, 0.5) };
    for (int k = 0; k < 5; k++)
        if (!in[k]) return lesson_done(in, 5, 2);
    const char *names[4] = { "Pre-LN, LayerNorm", "Post-LN, LayerNorm", "Pre-LN, RMSNorm", "Post-LN, RMSNorm" };
    int rc = 0;
    for (int i = 0; i < 4; i++) {
        arrangement a = { .post = i % 2, .rms = i / 2, .depth = 1 };
        int r = lesson_check(names[i], build_residual, &a, in, a.rms ? 4 : 5); /* RMSNorm has no beta */
        rc = r > rc ? r : rc;
    }
    const int depths[4] = { 1, 4, 16, 64 };
    ag_real R[B * T * C];
    printf("\nrms of dL/dx under a stack of sub-layers (R alone: %.3f)\n  %-20s", fill_R(R, seed + 1), "depth");
    for (int d = 0; d < 4; d++) printf(" %8d", depths[d]);
    for (int i = 0; i < 4; i++) {
        printf("\n  %-20s", names[i]);
        for (int d = 0; d < 4; d++)
            printf(" %8.4f", grad_rms(in, &(arrangement){ .post = i % 2, .rms = i / 2, .depth = depths[d] }, seed + 1));
    }
    printf("\n");
    return lesson_done(in, 5, rc);
}
