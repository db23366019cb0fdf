/* test_matmul.c -- matmul (2-D, batched, shared right operand), transpose and reshape. */
#include <check.h>
#include "gradcheck.h"
#include "tcases.h"

static ag_tensor *build_matmul(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_matmul(ctx, in[0], in[1]);
}

static ag_tensor *build_transpose(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_transpose(ctx, in[0]);
}

/* reshape [2,3,4] -> [6,4] then a matmul, so the view's gradient must reach the input */
static ag_tensor *build_reshape(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    int s[2] = { 6, 4 };
    return ag_matmul(ctx, ag_reshape(ctx, in[0], 2, s), in[1]);
}

START_TEST(test_matmul_forward_2x2)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *a = ag_tensor_new2(ctx, 2, 3), *b = ag_tensor_new2(ctx, 3, 2);
    ag_real av[6] = { 1, 2, 3, 4, 5, 6 }, bv[6] = { 7, 8, 9, 10, 11, 12 };
    memcpy(a->data, av, sizeof av);
    memcpy(b->data, bv, sizeof bv);
    ag_tensor *c = ag_matmul(ctx, a, b); // [2,2]
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->shape[0], 2);
    ck_assert_int_eq(c->shape[1], 2);
    ag_real want[4] = { 58, 64, 139, 154 };
    for (int i = 0; i < 4; i++) ck_assert_double_eq_tol(c->data[i], want[i], 1e-4);
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_matmul_shape_error)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *a = ag_tensor_new3(ctx, 2, 3, 8), *b = ag_tensor_new2(ctx, 6, 8);
    ck_assert_ptr_null(ag_matmul(ctx, a, b));
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "[2,3,8] @ [6,8]"));
    /* the first error sticks: a later op on a NULL input keeps it */
    ck_assert_ptr_null(ag_softmax(ctx, NULL));
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "ag_matmul"));
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_matmul_grad_2d)
{
    int sa[2] = { 3, 4 }, sb[2] = { 4, 5 };
    ag_tensor *in[2] = { gc_tensor_new(2, sa, 1, -1, 1), gc_tensor_new(2, sb, 2, -1, 1) };
    gc_opts o = gc_defaults("matmul 2-D");
    GC_ASSERT(&o, build_matmul, in, 2, NULL);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

START_TEST(test_matmul_grad_batched)
{
    int sa[4] = { 2, 3, 4, 5 }, sb[4] = { 2, 3, 5, 6 };
    ag_tensor *in[2] = { gc_tensor_new(4, sa, 3, -1, 1), gc_tensor_new(4, sb, 4, -1, 1) };
    gc_opts o = gc_defaults("matmul batched");
    GC_ASSERT(&o, build_matmul, in, 2, NULL);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

START_TEST(test_matmul_grad_shared_b)
{
    int sa[3] = { 2, 3, 4 }, sb[2] = { 4, 5 };
    ag_tensor *in[2] = { gc_tensor_new(3, sa, 5, -1, 1), gc_tensor_new(2, sb, 6, -1, 1) };
    gc_opts o = gc_defaults("matmul shared B");
    GC_ASSERT(&o, build_matmul, in, 2, NULL);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

START_TEST(test_transpose_grad)
{
    int s[3] = { 2, 3, 5 };
    ag_tensor *in[1] = { gc_tensor_new(3, s, 7, -1, 1) };
    gc_opts o = gc_defaults("transpose");
    GC_ASSERT(&o, build_transpose, in, 1, NULL);
    gc_tensor_free(in[0]);
}
END_TEST

START_TEST(test_reshape_grad)
{
    int sx[3] = { 2, 3, 4 }, sw[2] = { 4, 5 };
    ag_tensor *in[2] = { gc_tensor_new(3, sx, 8, -1, 1), gc_tensor_new(2, sw, 9, -1, 1) };
    gc_opts o = gc_defaults("reshape");
    GC_ASSERT(&o, build_reshape, in, 2, NULL);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

START_TEST(test_transpose_forward_and_reshape_error)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new2(ctx, 2, 3);
    for (int i = 0; i < 6; i++) x->data[i] = (ag_real)i;
    ag_tensor *y = ag_transpose(ctx, x); // [3,2]
    ck_assert_int_eq(y->shape[0], 3);
    ck_assert_double_eq(y->data[1], 3); /* y[0,1] = x[1,0] */
    ck_assert_double_eq(y->data[2], 1); /* y[1,0] = x[0,1] */
    int bad[2] = { 4, 2 };
    ck_assert_ptr_null(ag_reshape(ctx, x, 2, bad));
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_SHAPE);
    ag_ctx_free(ctx);
}
END_TEST

Suite *matmul_suite(void)
{
    Suite *s = suite_create("matmul");
    TCase *f = tcase_create("forward");
    tcase_set_tags(f, "matmul reshape");
    ADD_TESTS(f, test_matmul_forward_2x2, test_matmul_shape_error, test_transpose_forward_and_reshape_error);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("grad");
    tcase_set_tags(g, "matmul reshape");
    ADD_TESTS(g, test_matmul_grad_2d, test_matmul_grad_batched, test_matmul_grad_shared_b,
                 test_transpose_grad, test_reshape_grad);
    suite_add_tcase(s, g);
    return s;
}
