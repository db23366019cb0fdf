/* 06-ffn.c -- lesson 6's exercise: a feed-forward layer that attograd does not have, GEGLU
 * (Shazeer 2020: SwiGLU with GELU as the gate), composed from ops only, so it needs no backward
 * of its own; the gradient check with respect to x and the six parameters proves the
 * composition. Beside it the two MLPs char_lm has, written the same way:
 *
 *   GELU MLP (MODEL.md):  y = fc2(gelu(fc1 x))                     C -> 4C -> C
 *   SwiGLU (--mlp swiglu): y = w_down(silu(w_gate x) * w_up x)     C -> F  -> C
 *   GEGLU (this exercise): y = w_down(gelu(w_gate x) * w_up x)     C -> F  -> C             */
#include "lesson.h"

enum { B = 2, T = 3, C = 4, F = 11 };   /* F = round(8C/3) = ag_swiglu_width(C) */

typedef enum { GELU_MLP, SWIGLU, GEGLU } ffn_kind;

/* in: x [B,T,C], then (W, b) pairs: GELU MLP fc1 [4C,C], fc2 [C,4C]; gated w_gate [F,C],
 * w_up [F,C], w_down [C,F] */
static ag_tensor *build_ffn(ag_ctx *ctx, ag_tensor **in, void *user)
{
    ffn_kind kind = *(const ffn_kind *)user;
    ag_tensor *x = in[0];                                           // [B,T,C]
    if (kind == GELU_MLP) {
        ag_tensor *h = ag_gelu(ctx, ag_linear(ctx, x, in[1], in[2]));  // [B,T,4C]
        return ag_linear(ctx, h, in[3], in[4]);                     // [B,T,C]
    }
    ag_tensor *g = ag_linear(ctx, x, in[1], in[2]);                 // [B,T,F] the gate
    g = kind == SWIGLU ? ag_silu(ctx, g) : ag_gelu(ctx, g);         // [B,T,F]
    ag_tensor *u = ag_linear(ctx, x, in[3], in[4]);                 // [B,T,F] the values
    return ag_linear(ctx, ag_mul(ctx, g, u), in[5], in[6]);         // [B,T,C]
}

/* x and the weights of one kind, filled from rng; returns the number of inputs, 0 on OOM */
static int make_inputs(ag_tensor **in, ffn_kind kind, ag_rng *rng)
{
    static const char *gelu_names[5] = { "x", "fc1W", "fc1b", "fc2W", "fc2b" };
    static const char *gated_names[7] = { "x", "gatW", "gatb", "upW", "upb", "dnW", "dnb" };
    int n = kind == GELU_MLP ? 5 : 7, hidden = kind == GELU_MLP ? 4 * C : F;
    const char **names = kind == GELU_MLP ? gelu_names : gated_names;
    in[0] = ag_gradcheck_input(names[0], 3, (int[3]){ B, T, C }, rng, -1.5, 1.5);
    for (int k = 1; k < n; k += 2) {
        bool down = k == n - 2;                                     /* the last linear goes back to C */
        int out = down ? C : hidden, inn = down ? hidden : C;
        in[k] = ag_gradcheck_input(names[k], 2, (int[2]){ out, inn }, rng, -1, 1);       // W [out,in]
        in[k + 1] = ag_gradcheck_input(names[k + 1], 1, (int[1]){ out }, rng, -0.5, 0.5); // b [out]
    }
    for (int k = 0; k < n; k++)
        if (!in[k]) return 0;
    return n;
}

int main(void)
{
    ag_threads_init(1);
    ag_rng rng;
    ag_rng_seed(&rng, 6);
    const char *names[3] = { "GELU MLP", "SwiGLU", "GEGLU" };
    int rc = 0;
    for (int kind = GELU_MLP; kind <= GEGLU; kind++) {
        ag_tensor *in[7] = { 0 };
        ffn_kind k = (ffn_kind)kind;
        int n = make_inputs(in, k, &rng);
        int r = n ? lesson_check(names[kind], build_ffn, &k, in, n) : 2;
        size_t params = 0;
        for (int i = 1; i < n; i++) params += ag_numel(in[i]);
        printf("  (%zu parameters)\n", params);
        lesson_done(in, 7, 0);
        rc = r > rc ? r : rc;
    }
    return rc;
}
