/* test_norm_loss.c -- linear, layernorm, embedding, cross-entropy. */
#include <check.h>
#include <math.h>
#include "gradcheck.h"
#include "tcases.h"

typedef struct { int ids[6]; int targets[6]; } id_data;

static ag_tensor *build_linear(ag_ctx *ctx, ag_tensor **in, void *user) { (void)user; return ag_linear(ctx, in[0], in[1], in[2]); }
static ag_tensor *build_linear_nobias(ag_ctx *ctx, ag_tensor **in, void *user) { (void)user; return ag_linear(ctx, in[0], in[1], NULL); }
static ag_tensor *build_layernorm(ag_ctx *ctx, ag_tensor **in, void *user) { (void)user; return ag_layernorm(ctx, in[0], in[1], in[2], 1e-5); }
static ag_tensor *build_embedding(ag_ctx *ctx, ag_tensor **in, void *user)
{
    id_data *d = user;
    return ag_embedding(ctx, in[0], d->ids, 2, 3);
}
static ag_tensor *build_cross_entropy(ag_ctx *ctx, ag_tensor **in, void *user)
{
    id_data *d = user;
    return ag_cross_entropy(ctx, in[0], d->targets);
}

START_TEST(test_linear_grad)
{
    int sx[3] = { 2, 3, 4 }, sw[2] = { 5, 4 }, sb[1] = { 5 };
    ag_tensor *in[3] = { gc_tensor_new(3, sx, 21, -1, 1), gc_tensor_new(2, sw, 22, -1, 1), gc_tensor_new(1, sb, 23, -1, 1) };
    gc_opts o = gc_defaults("linear");
    o.max_elems = 0;
    GC_ASSERT(&o, build_linear, in, 3, NULL);
    GC_ASSERT(&o, build_linear_nobias, in, 2, NULL);
    for (int i = 0; i < 3; i++) gc_tensor_free(in[i]);
}
END_TEST

START_TEST(test_linear_forward_and_error)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new2(ctx, 1, 2), *W = ag_tensor_new2(ctx, 3, 2), *b = ag_tensor_new1(ctx, 3);
    ag_real xv[2] = { 1, 2 }, wv[6] = { 1, 0, 0, 1, 1, 1 }, bv[3] = { 0.5, 0, -1 };
    memcpy(x->data, xv, sizeof xv);
    memcpy(W->data, wv, sizeof wv);
    memcpy(b->data, bv, sizeof bv);
    ag_tensor *y = ag_linear(ctx, x, W, b); /* x W^T + b with W stored [out, in] */
    ck_assert_double_eq_tol(y->data[0], 1.5, 1e-6);
    ck_assert_double_eq_tol(y->data[1], 2.0, 1e-6);
    ck_assert_double_eq_tol(y->data[2], 2.0, 1e-6);
    ag_tensor *Wbad = ag_tensor_new2(ctx, 2, 3);
    ck_assert_ptr_null(ag_linear(ctx, x, Wbad, NULL));
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "ag_linear: x [1,2], W [2,3]"));
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_layernorm_forward)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new2(ctx, 3, 8), *w = ag_tensor_new1(ctx, 8), *b = ag_tensor_new1(ctx, 8);
    ag_rng r;
    ag_rng_seed(&r, 5);
    for (int i = 0; i < 24; i++) x->data[i] = (ag_real)(3 + 4 * ag_rng_uniform(&r));
    for (int i = 0; i < 8; i++) w->data[i] = 1;
    ag_tensor *y = ag_layernorm(ctx, x, w, b, 1e-5);
    for (int row = 0; row < 3; row++) {
        double m = 0, v = 0;
        for (int c = 0; c < 8; c++) m += y->data[row * 8 + c];
        m /= 8;
        for (int c = 0; c < 8; c++) v += (y->data[row * 8 + c] - m) * (y->data[row * 8 + c] - m);
        v /= 8;
        ck_assert_double_eq_tol(m, 0, 1e-5);
        ck_assert_double_eq_tol(v, 1, 1e-3); /* var/(var+eps), biased variance */
    }
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_layernorm_grad)
{
    int sx[3] = { 2, 3, 8 }, sc[1] = { 8 };
    ag_tensor *in[3] = { gc_tensor_new(3, sx, 24, -2, 2), gc_tensor_new(1, sc, 25, 0.5, 1.5), gc_tensor_new(1, sc, 26, -1, 1) };
    gc_opts o = gc_defaults("layernorm");
    o.max_elems = 0;
    GC_ASSERT(&o, build_layernorm, in, 3, NULL);
    for (int i = 0; i < 3; i++) gc_tensor_free(in[i]);
}
END_TEST

START_TEST(test_embedding_forward_grad_and_error)
{
    id_data d = { { 1, 4, 1, 0, 2, 1 }, { 0 } }; /* id 1 three times: scatter-add must sum */
    int sw[2] = { 5, 3 };
    ag_tensor *in[1] = { gc_tensor_new(2, sw, 27, -1, 1) };
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *y = ag_embedding(ctx, in[0], d.ids, 2, 3); // [2,3,3]
    ck_assert_int_eq(y->ndim, 3);
    for (int c = 0; c < 3; c++) ck_assert_double_eq(y->data[1 * 3 + c], in[0]->data[4 * 3 + c]);
    int bad[6] = { 0, 1, 5, 0, 0, 0 };
    ck_assert_ptr_null(ag_embedding(ctx, in[0], bad, 2, 3));
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "id 5"));
    ag_ctx_free(ctx);
    gc_opts o = gc_defaults("embedding");
    o.max_elems = 0;
    GC_ASSERT(&o, build_embedding, in, 1, &d);
    gc_tensor_free(in[0]);
}
END_TEST

START_TEST(test_cross_entropy_forward)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *z = ag_tensor_new2(ctx, 2, 5); /* uniform logits: loss = ln 5 */
    int t[2] = { 0, 3 };
    ag_tensor *L = ag_cross_entropy(ctx, z, t);
    ck_assert_double_eq_tol(L->data[0], log(5.0), 1e-6);
    /* large logits: no overflow; loss = lse - z_t computed stably */
    z->data[0] = 1000;
    z->data[5 + 3] = -1000;
    L = ag_cross_entropy(ctx, z, t);
    /* row 0: target is the 1000 logit, loss ~ 0; row 1: lse ~ ln 4, z_t = -1000 */
    ck_assert(isfinite(L->data[0]));
    ck_assert_double_eq_tol(L->data[0], (0 + (log(4.0) + 1000)) / 2, 1e-3);
    int bad[2] = { 0, 5 };
    ck_assert_ptr_null(ag_cross_entropy(ctx, z, bad));
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "target 5"));
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_cross_entropy_grad)
{
    id_data d = { { 0 }, { 4, 0, 2, 2, 1, 3 } };
    int sz[3] = { 2, 3, 5 };
    ag_tensor *in[1] = { gc_tensor_new(3, sz, 28, -2, 2) };
    gc_opts o = gc_defaults("cross_entropy");
    o.max_elems = 0;
    GC_ASSERT(&o, build_cross_entropy, in, 1, &d);
    gc_tensor_free(in[0]);
}
END_TEST

Suite *norm_loss_suite(void)
{
    Suite *s = suite_create("norm_loss");
    TCase *f = tcase_create("forward");
    tcase_set_tags(f, "linear layernorm cross_entropy");
    ADD_TESTS(f, test_linear_forward_and_error, test_layernorm_forward, test_cross_entropy_forward);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("grad");
    tcase_set_tags(g, "linear layernorm embedding cross_entropy");
    ADD_TESTS(g, test_linear_grad, test_layernorm_grad, test_embedding_forward_grad_and_error,
                 test_cross_entropy_grad);
    suite_add_tcase(s, g);
    return s;
}
