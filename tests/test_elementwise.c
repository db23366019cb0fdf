/* test_elementwise.c -- add (with broadcasting), scale, gelu, dropout. */
#include <check.h>
#include <math.h>
#include "gradcheck.h"
#include "tensor/fast/fast.h" /* ag__exp */
#include "tcases.h"

static ag_tensor *build_add(ag_ctx *ctx, ag_tensor **in, void *user) { (void)user; return ag_add(ctx, in[0], in[1]); }
static ag_tensor *build_scale(ag_ctx *ctx, ag_tensor **in, void *user) { (void)user; return ag_scale(ctx, in[0], -0.37); }
static ag_tensor *build_gelu(ag_ctx *ctx, ag_tensor **in, void *user) { (void)user; return ag_gelu(ctx, in[0]); }
static ag_tensor *build_dropout(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_dropout(ctx, in[0], 0.3, 42, true);
}

static void check_add(int nda, const int *sa, int ndb, const int *sb, const char *name)
{
    ag_tensor *in[2] = { gc_tensor_new(nda, sa, 11, -1, 1), gc_tensor_new(ndb, sb, 12, -1, 1) };
    gc_opts o = gc_defaults(name);
    o.max_elems = 0;
    GC_ASSERT(&o, build_add, in, 2, NULL);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}

START_TEST(test_add_grad_same_shape) { int s[3] = { 2, 3, 4 }; check_add(3, s, 3, s, "add same shape"); }
END_TEST
START_TEST(test_add_grad_bias_row)
{
    int sa[3] = { 2, 3, 4 }, sb[1] = { 4 };
    check_add(3, sa, 1, sb, "add bias [C]");
}
END_TEST
START_TEST(test_add_grad_positions)
{
    int sa[3] = { 2, 3, 4 }, sb[2] = { 3, 4 };
    check_add(3, sa, 2, sb, "add positions [T,C]");
}
END_TEST

START_TEST(test_add_broadcast_forward_and_error)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *a = ag_tensor_new2(ctx, 2, 3), *b = ag_tensor_new1(ctx, 3);
    for (int i = 0; i < 6; i++) a->data[i] = (ag_real)i;
    for (int i = 0; i < 3; i++) b->data[i] = (ag_real)(10 * (i + 1));
    ag_tensor *y = ag_add(ctx, a, b);
    ag_real want[6] = { 10, 21, 32, 13, 24, 35 };
    for (int i = 0; i < 6; i++) ck_assert_double_eq(y->data[i], want[i]);
    ag_tensor *bad = ag_tensor_new1(ctx, 2);
    ck_assert_ptr_null(ag_add(ctx, a, bad));
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "ag_add"));
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_scale_grad)
{
    int s[2] = { 3, 5 };
    ag_tensor *in[1] = { gc_tensor_new(2, s, 13, -1, 1) };
    gc_opts o = gc_defaults("scale");
    GC_ASSERT(&o, build_scale, in, 1, NULL);
    gc_tensor_free(in[0]);
}
END_TEST

START_TEST(test_gelu_forward_known_values)
{
    /* values of 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))), PyTorch gelu(approximate='tanh') */
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new1(ctx, 5);
    ag_real xs[5] = { -3, -1, 0, 1, 2 };
    double want[5] = { -0.0036373920, -0.1588080094, 0.0, 0.8411919906, 1.9545976963 };
    memcpy(x->data, xs, sizeof xs);
    ag_tensor *y = ag_gelu(ctx, x);
    for (int i = 0; i < 5; i++) ck_assert_double_eq_tol(y->data[i], want[i], 1e-6);
    /* the tails: tanh saturates without overflow or NaN */
    ag_tensor *t = ag_tensor_new1(ctx, 4);
    ag_real ts[4] = { 30, -30, INFINITY, 1e30 };
    memcpy(t->data, ts, sizeof ts);
    ag_tensor *yt = ag_gelu(ctx, t);
    ck_assert_double_eq_tol(yt->data[0], 30, 1e-5);
    ck_assert(isfinite(yt->data[1]) && fabs(yt->data[1]) < 1e-6);
    ck_assert(isinf(yt->data[2]) && yt->data[2] > 0);
    ck_assert(isinf(yt->data[3]) || yt->data[3] == (ag_real)1e30);
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_gelu_grad)
{
    int s[2] = { 4, 6 };
    ag_tensor *in[1] = { gc_tensor_new(2, s, 14, -3, 3) };
    gc_opts o = gc_defaults("gelu");
    o.max_elems = 0;
    GC_ASSERT(&o, build_gelu, in, 1, NULL);
    gc_tensor_free(in[0]);
}
END_TEST

START_TEST(test_dropout_forward)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new1(ctx, 10000);
    for (int i = 0; i < 10000; i++) x->data[i] = 1;
    ck_assert_ptr_eq(ag_dropout(ctx, x, 0.3, 1, false), x); /* eval: the identity */
    ag_tensor *y1 = ag_dropout(ctx, x, 0.3, 1, true), *y2 = ag_dropout(ctx, x, 0.3, 1, true);
    ag_tensor *y3 = ag_dropout(ctx, x, 0.3, 2, true);
    int zeros = 0, differ = 0;
    double sum = 0;
    for (int i = 0; i < 10000; i++) {
        ck_assert_double_eq(y1->data[i], y2->data[i]); /* same seed, same mask */
        ck_assert(y1->data[i] == 0 || fabs(y1->data[i] - 1 / 0.7) < 1e-6);
        zeros += y1->data[i] == 0;
        differ += y1->data[i] != y3->data[i];
        sum += y1->data[i];
    }
    ck_assert_int_gt(zeros, 2700);
    ck_assert_int_lt(zeros, 3300);
    ck_assert_int_gt(differ, 1000);
    ck_assert_double_eq_tol(sum / 10000, 1.0, 0.05); /* inverted scaling keeps the mean */
    ck_assert_ptr_null(ag_dropout(ctx, x, 1.0, 1, true));
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_ARG);
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_dropout_grad)
{
    int s[2] = { 4, 6 };
    ag_tensor *in[1] = { gc_tensor_new(2, s, 15, -1, 1) };
    gc_opts o = gc_defaults("dropout");
    o.max_elems = 0;
    GC_ASSERT(&o, build_dropout, in, 1, NULL);
    gc_tensor_free(in[0]);
}
END_TEST

/* the fast kernels' exp: within 2e-7 relative of the exact value, and right at the edges */
START_TEST(test_kernel_exp_accuracy)
{
    double worst = 0;
    for (double v = -87.0; v < 88.5; v += 0.00731) {
        ag_real x = (ag_real)v;
        double exact = exp((double)x), got = (double)ag__exp(x);
        double rel = fabs(got - exact) / exact;
        worst = rel > worst ? rel : worst;
    }
    ck_assert_msg(worst < 2e-7, "max relative error %g", worst);
    ck_assert(isinf(ag__exp((ag_real)INFINITY)) && ag__exp((ag_real)INFINITY) > 0);
    ck_assert(ag__exp((ag_real)-INFINITY) == 0);
    ck_assert(isnan(ag__exp((ag_real)NAN)));
    ck_assert(ag__exp(0) == 1);
    ck_assert(ag__exp(-800) == 0);
    ck_assert(isinf(ag__exp(800)));
}
END_TEST

Suite *elementwise_suite(void)
{
    Suite *s = suite_create("elementwise");
    TCase *f = tcase_create("forward");
    tcase_set_tags(f, "add gelu dropout");
    ADD_TESTS(f, test_add_broadcast_forward_and_error, test_gelu_forward_known_values, test_dropout_forward,
                 test_kernel_exp_accuracy);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("grad");
    tcase_set_tags(g, "add scale gelu dropout");
    ADD_TESTS(g, test_add_grad_same_shape, test_add_grad_bias_row, test_add_grad_positions, test_scale_grad,
                 test_gelu_grad, test_dropout_grad);
    suite_add_tcase(s, g);
    return s;
}
