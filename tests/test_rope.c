/* test_rope.c -- rotary position embedding (ops/rope.c): the forward against the formula written
 * out in double, position 0 unchanged and lengths kept, the property it is there for (the
 * score of a turned q and k depends on their distance only), the shape errors, and a gradient
 * check with a first position other than 0. Sizes are distinct (B=2, T=5, C=12, H=3: D=4) so a
 * swapped head, pair or position fails. */
#include <check.h>
#include <math.h>
#include <string.h>
#include "gradcheck.h"
#include "tcases.h"

enum { B = 2, T = 5, C = 12, H = 3, D = C / H };

static ag_tensor *filled(ag_ctx *ctx, int b, int t, int c, double phase)
{
    ag_tensor *x = ag_tensor_new3(ctx, b, t, c);
    for (int i = 0; i < b * t * c; i++) x->data[i] = (ag_real)sin(0.37 * i + phase);
    return x;
}

/* y[2i], y[2i+1] of each head = the pair turned by (pos0 + t) 10000^(-2i/D), in double */
START_TEST(test_rope_forward_by_hand)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = filled(ctx, B, T, C, 0.2);
    for (int pos0 = 0; pos0 <= 7; pos0 += 7) {
        ag_tensor *y = ag_rope(ctx, x, H, pos0);                        // [B,T,C]
        ck_assert_msg(y != NULL, "%s", ag_ctx_error(ctx));
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < D / 2; i++) {
                        size_t o = ((size_t)b * T + t) * C + h * D + 2 * i;
                        double a = (pos0 + t) * pow(10000.0, -2.0 * i / D), x0 = x->data[o], x1 = x->data[o + 1];
                        ck_assert_double_eq_tol(y->data[o], x0 * cos(a) - x1 * sin(a), 1e-5);
                        ck_assert_double_eq_tol(y->data[o + 1], x0 * sin(a) + x1 * cos(a), 1e-5);
                    }
    }
    ag_ctx_free(ctx);
}
END_TEST

/* position 0 is the identity; every pair keeps its length */
START_TEST(test_rope_position_zero_and_lengths)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = filled(ctx, B, T, C, 0.9), *y = ag_rope(ctx, x, H, 0);
    ck_assert_ptr_nonnull(y);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) ck_assert(y->data[(size_t)b * T * C + c] == x->data[(size_t)b * T * C + c]);
    for (int o = 0; o < B * T * C; o += 2) {
        double before = hypot(x->data[o], x->data[o + 1]), after = hypot(y->data[o], y->data[o + 1]);
        ck_assert_double_eq_tol(after, before, 1e-6);
    }
    ck_assert(y->data[T * C - 2] != x->data[T * C - 2]);   /* the last position did turn */
    ag_ctx_free(ctx);
}
END_TEST

/* the score of head h between a q at position p and a k at position s */
static double score(const ag_tensor *q, const ag_tensor *k, int h, int p, int s)
{
    double dot = 0;
    for (int d = 0; d < D; d++) dot += (double)q->data[(size_t)p * C + h * D + d] * k->data[(size_t)s * C + h * D + d];
    return dot;
}

/* The same q vector at every position and the same k vector: after the turn, the score at
 * (p, s) is the score at (p + 3, s + 3), and not the one at another distance. */
START_TEST(test_rope_score_depends_on_distance)
{
    enum { TT = 9 };
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *q = ag_tensor_new3(ctx, 1, TT, C), *k = ag_tensor_new3(ctx, 1, TT, C);
    for (int t = 0; t < TT; t++)
        for (int c = 0; c < C; c++) {
            q->data[t * C + c] = (ag_real)cos(1.3 * c + 0.4);
            k->data[t * C + c] = (ag_real)sin(0.8 * c - 0.1);
        }
    ag_tensor *qr = ag_rope(ctx, q, H, 0), *kr = ag_rope(ctx, k, H, 0);
    ck_assert(qr && kr);
    for (int h = 0; h < H; h++)
        for (int p = 0; p + 3 < TT; p++)
            for (int s = 0; s <= p; s++)
                ck_assert_double_eq_tol(score(qr, kr, h, p, s), score(qr, kr, h, p + 3, s + 3), 1e-5);
    ck_assert(fabs(score(qr, kr, 0, 4, 1) - score(qr, kr, 0, 4, 2)) > 1e-3);   /* distance 3 is not 2 */
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_rope_errors)
{
    ag_ctx *ctx = ag_ctx_new();
    ck_assert_ptr_null(ag_rope(ctx, filled(ctx, 1, 2, 6, 0), 2, 0));   /* D = 3: no pairs */
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "ag_rope: cannot rotate [1,2,6] in 2 heads from position 0"));
    const struct { int ndim, H, pos0; } bad[] = { { 3, 5, 0 }, { 2, 3, 0 }, { 3, 3, -1 }, { 3, 0, 0 } };
    ag_ctx_free(ctx);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {   /* H not dividing C, not [B,T,C], before 0, no heads */
        ctx = ag_ctx_new();
        ag_tensor *x = bad[i].ndim == 3 ? filled(ctx, 1, 2, C, 0) : ag_tensor_new2(ctx, 2, C);
        ck_assert_ptr_null(ag_rope(ctx, x, bad[i].H, bad[i].pos0));
        ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_SHAPE);
        ag_ctx_free(ctx);
    }
}
END_TEST

/* a model whose heads have an odd size cannot take it: refused when made, in one line */
START_TEST(test_rope_model_needs_even_heads)
{
    ag_gpt_config c = { .vocab_size = 5, .n_layer = 1, .n_head = 2, .n_embd = 6, .block_size = 4, .rope = true };
    ag_error err = { 0 };
    ck_assert_ptr_null(ag_gpt_new(&c, 1, &err));
    ck_assert_int_eq(err.status, AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "rope needs an even head size n_embd / n_head (got 3)");
    c.n_embd = 8;
    ag_gpt *g = ag_gpt_new(&c, 1, &err);
    ck_assert_ptr_nonnull(g);
    ck_assert(g->blocks[0].attn.rope && g->blocks[0].attn.w_k.b->requires_grad);   /* b_k learns with rope */
    ag_gpt_free(g);
}
END_TEST

static ag_tensor *build_rope(ag_ctx *ctx, ag_tensor **in, void *user)
{
    return ag_rope(ctx, in[0], H, *(const int *)user);   // [B,T,C]
}

START_TEST(test_rope_grad)
{
    int s[3] = { B, T, C };
    ag_tensor *x = gc_tensor_new(3, s, 81, -2, 2);
    gc_opts o = gc_defaults("rope");
    o.max_elems = 0;
    for (int pos0 = 0; pos0 <= 6; pos0 += 6) GC_ASSERT(&o, build_rope, &x, 1, &pos0);
    gc_tensor_free(x);
}
END_TEST

Suite *rope_suite(void)
{
    Suite *s = suite_create("rope");
    TCase *tc = tcase_create("rope");
    tcase_set_tags(tc, "rope");
    ADD_TESTS(tc, test_rope_forward_by_hand, test_rope_position_zero_and_lengths, test_rope_score_depends_on_distance,
                  test_rope_errors, test_rope_model_needs_even_heads, test_rope_grad);
    suite_add_tcase(s, tc);
    return s;
}
