/* test_attention_ops.c -- masked_fill, split/merge heads, and scaled dot-product attention
 * composed from them and softmax: softmax(Q K^T / sqrt(D) masked) V. (softmax's own tests:
 * test_softmax.c.) */
#include <check.h>
#include <math.h>
#include "gradcheck.h"
#include "tcases.h"

static ag_tensor *build_split(ag_ctx *ctx, ag_tensor **in, void *user) { (void)user; return ag_split_heads(ctx, in[0], 2); }
static ag_tensor *build_merge(ag_ctx *ctx, ag_tensor **in, void *user) { (void)user; return ag_merge_heads(ctx, in[0]); }
/* masked_fill with a finite fill value: -inf would make sum(out * R) infinite */
static ag_tensor *build_masked_fill(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_masked_fill(ctx, in[0], ag_causal_mask(ctx, 4), 0.25);
}

/* softmax(Q K^T / sqrt(D), causal) V on [B,H,T,D] inputs, the way src/nn/attention.c does it */
static ag_tensor *sdpa(ag_ctx *ctx, ag_tensor *q, ag_tensor *k, ag_tensor *v, bool causal)
{
    int T = q->shape[q->ndim - 2], D = q->shape[q->ndim - 1];
    ag_tensor *s = ag_matmul(ctx, q, ag_transpose(ctx, k));         // [..., T, T]
    s = ag_scale(ctx, s, 1 / sqrt((double)D));                      // [..., T, T]
    if (causal) s = ag_masked_fill(ctx, s, ag_causal_mask(ctx, T), -INFINITY);
    ag_tensor *a = ag_softmax(ctx, s);                              // [..., T, T]
    return ag_matmul(ctx, a, v);                                    // [..., T, D]
}

static ag_tensor *build_sdpa(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return sdpa(ctx, in[0], in[1], in[2], true);
}

/* the classic three-token example: Q = K = V = X */
static const ag_real three_tokens[12] = { 1, 0, 1, 0, 0, 1, 0, 1, 1, 1, 0, 0 };

START_TEST(test_masked_fill_grad)
{
    int s[3] = { 2, 4, 4 };
    ag_tensor *in[1] = { gc_tensor_new(3, s, 32, -1, 1) };
    gc_opts o = gc_defaults("masked_fill");
    o.max_elems = 0;
    GC_ASSERT(&o, build_masked_fill, in, 1, NULL);
    gc_tensor_free(in[0]);
}
END_TEST

START_TEST(test_heads_roundtrip_and_grad)
{
    int s[3] = { 2, 3, 8 };
    ag_tensor *x = gc_tensor_new(3, s, 33, -1, 1);
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *h = ag_split_heads(ctx, x, 2);                       // [2,2,3,4]
    ck_assert_int_eq(h->ndim, 4);
    ck_assert_int_eq(h->shape[1], 2);
    ck_assert_int_eq(h->shape[3], 4);
    /* h[b=1, head=1, t=2, d=3] = x[b=1, t=2, c=1*4+3] */
    ck_assert_double_eq(h->data[((1 * 2 + 1) * 3 + 2) * 4 + 3], x->data[(1 * 3 + 2) * 8 + 7]);
    ag_tensor *m = ag_merge_heads(ctx, h);                          // [2,3,8]
    for (int i = 0; i < 48; i++) ck_assert_double_eq(m->data[i], x->data[i]);
    ck_assert_ptr_null(ag_split_heads(ctx, x, 3));
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "3 heads"));
    ag_ctx_free(ctx);
    gc_opts o = gc_defaults("split_heads");
    o.max_elems = 0;
    GC_ASSERT(&o, build_split, &x, 1, NULL);
    int s4[4] = { 2, 2, 3, 4 };
    ag_tensor *y = gc_tensor_new(4, s4, 34, -1, 1);
    o.name = "merge_heads";
    GC_ASSERT(&o, build_merge, &y, 1, NULL);
    gc_tensor_free(x);
    gc_tensor_free(y);
}
END_TEST

START_TEST(test_three_token_example)
{
    /* weights and outputs checked against PyTorch 1.13:
     * torch.softmax(X @ X.T / 2, -1) and that @ X, plus the causal version */
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *X = ag_tensor_new2(ctx, 3, 4);
    memcpy(X->data, three_tokens, sizeof three_tokens);
    ag_tensor *s = ag_scale(ctx, ag_matmul(ctx, X, ag_transpose(ctx, X)), 0.5);
    ag_tensor *w = ag_softmax(ctx, s);
    ag_tensor *out = ag_matmul(ctx, w, X);
    double w0[3] = { 0.5065, 0.1863, 0.3072 }, o0[4] = { 0.8137, 0.4935, 0.5065, 0.1863 };
    for (int j = 0; j < 3; j++) ck_assert_double_eq_tol(w->data[j], w0[j], 1e-4);
    for (int j = 0; j < 4; j++) ck_assert_double_eq_tol(out->data[j], o0[j], 1e-4);
    ag_tensor *q = ag_reshape(ctx, X, 4, (int[4]){ 1, 1, 3, 4 });
    ag_tensor *oc = sdpa(ctx, q, q, q, true);
    /* causal: token 0 sees only itself; token 1 weighs itself 0.7311 and token 0 0.2689 */
    double c0[4] = { 1, 0, 1, 0 }, c1[4] = { 0.2689, 0.7311, 0.2689, 0.7311 };
    for (int j = 0; j < 4; j++) ck_assert_double_eq_tol(oc->data[j], c0[j], 1e-4);
    for (int j = 0; j < 4; j++) ck_assert_double_eq_tol(oc->data[4 + j], c1[j], 1e-4);
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_causal_mask_zero_future_weight)
{
    ag_ctx *ctx = ag_ctx_new();
    int T = 5;
    ag_tensor *s = ag_tensor_new3(ctx, 2, T, T);
    ag_rng r;
    ag_rng_seed(&r, 4);
    for (size_t i = 0; i < ag_numel(s); i++) s->data[i] = (ag_real)(10 * ag_rng_uniform(&r));
    ag_tensor *a = ag_softmax(ctx, ag_masked_fill(ctx, s, ag_causal_mask(ctx, T), -INFINITY));
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < T; i++) {
            double sum = 0;
            for (int j = 0; j < T; j++) {
                ag_real wgt = a->data[(b * T + i) * T + j];
                if (j > i) ck_assert(wgt == 0); /* exactly zero on future positions */
                else ck_assert(wgt > 0);
                sum += wgt;
            }
            ck_assert_double_eq_tol(sum, 1, 1e-6);
        }
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_sdpa_causal_grad)
{
    int s[4] = { 2, 2, 3, 4 }; /* B=2, H=2, T=3, D=4 */
    ag_tensor *in[3] = { gc_tensor_new(4, s, 35, -1, 1), gc_tensor_new(4, s, 36, -1, 1), gc_tensor_new(4, s, 37, -1, 1) };
    gc_opts o = gc_defaults("scaled dot-product attention (causal)");
    o.max_elems = 0;
    GC_ASSERT(&o, build_sdpa, in, 3, NULL);
    for (int i = 0; i < 3; i++) gc_tensor_free(in[i]);
}
END_TEST

Suite *attention_ops_suite(void)
{
    Suite *s = suite_create("attention_ops");
    TCase *f = tcase_create("forward");
    tcase_set_tags(f, "attention masked_fill");
    ADD_TESTS(f, test_three_token_example, test_causal_mask_zero_future_weight);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("grad");
    tcase_set_tags(g, "attention masked_fill heads");
    ADD_TESTS(g, test_masked_fill_grad, test_heads_roundtrip_and_grad, test_sdpa_causal_grad);
    suite_add_tcase(s, g);
    return s;
}
