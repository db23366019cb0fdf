/* 03-masks.c -- lesson 3's exercise: the classic three tokens, Q = K = V = X,
 *   X = [[1,0,1,0], [0,1,0,1], [1,1,0,0]],  scores = X X^T / sqrt(4),  out = softmax(scores) X
 * first unmasked (the tutorials' numbers), then with token 0 a padding token under a causal
 * mask: row 0 may see only key 0, which is padding, so row 0 is fully masked. Filled with -inf
 * that row's weights are zeros (attograd's softmax); filled with -1e9 they are uniform, 1/3 on
 * every key, the future and the padding included. The gradient check with respect to X passes
 * for every case: X gets three contributions (as Q, K and V) and the masked entries none. */
#include "lesson.h"

enum { T = 3, C = 4 };

typedef struct {
    bool masked;      /* causal mask and key 0 padding */
    ag_real fill;     /* -INFINITY or -1e9 */
    ag_tensor **a;    /* NULL, or where to leave the weights [T,T] */
} case_opts;

static ag_tensor *build_attention(ag_ctx *ctx, ag_tensor **in, void *user)
{
    const case_opts *o = user;
    ag_tensor *X = in[0];                                           // [T,C] = Q = K = V
    ag_tensor *s = ag_scale(ctx, ag_matmul(ctx, X, ag_transpose(ctx, X)), 1 / sqrt((double)C)); // [T,T]
    if (o->masked) {
        ag_tensor *mask = ag_causal_mask(ctx, T);                   // [T,T] key j <= query t
        if (!mask) return NULL;
        for (int t = 0; t < T; t++) mask->data[t * T + 0] = 0;      /* key 0 is padding */
        s = ag_masked_fill(ctx, s, mask, o->fill);                  // [T,T]
    }
    ag_tensor *a = ag_softmax(ctx, s);                              // [T,T]
    if (o->a) *o->a = a;
    return ag_matmul(ctx, a, X);                                    // [T,C]
}

/* prints the weights and the output of one case, then checks its gradient */
static int run_case(const char *name, ag_tensor *X, case_opts o)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *a = NULL;
    o.a = &a;
    ag_tensor *out = ctx ? build_attention(ctx, &X, &o) : NULL;     // [T,C]
    if (!out) {
        ag_ctx_free(ctx);
        return 2;
    }
    printf("\n%s\n", name);
    lesson_print("weights softmax(scores)  [3,3]", a->data, T, T);
    lesson_print("out = weights X  [3,4]", out->data, T, C);
    ag_ctx_free(ctx);
    o.a = NULL;
    return lesson_check(name, build_attention, &o, &X, 1);
}

int main(void)
{
    ag_threads_init(1);
    static const ag_real x[T * C] = { 1, 0, 1, 0, 0, 1, 0, 1, 1, 1, 0, 0 };
    ag_tensor *X = ag_tensor_new_owned(2, (int[2]){ T, C });
    if (!X) return 2;
    X->name = "X";
    memcpy(X->data, x, sizeof x);
    int rc = run_case("no mask", X, (case_opts){ .masked = false });
    int r = run_case("causal, key 0 padding, fill -inf", X, (case_opts){ .masked = true, .fill = -INFINITY });
    rc = r > rc ? r : rc;
    r = run_case("causal, key 0 padding, fill -1e9", X, (case_opts){ .masked = true, .fill = -1e9 });
    rc = r > rc ? r : rc;
    return lesson_done(&X, 1, rc);
}
