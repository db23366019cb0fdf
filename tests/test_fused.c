/* test_fused.c -- the fused attention kernel against the readable op-by-op path: the same
 * forward and the same gradients, plus its own double-precision gradcheck. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include "gradcheck.h"

typedef struct { int H; bool causal; } attn_args;

/* the readable path: split, q k^T, scale, mask, softmax, @ v, merge */
static ag_tensor *composed(ag_ctx *ctx, ag_tensor *q, ag_tensor *k, ag_tensor *v, int H, bool causal)
{
    int T = q->shape[1], D = q->shape[2] / H;
    ag_tensor *qh = ag_split_heads(ctx, q, H), *kh = ag_split_heads(ctx, k, H), *vh = ag_split_heads(ctx, v, H);
    ag_tensor *s = ag_scale(ctx, ag_matmul(ctx, qh, ag_transpose(ctx, kh)), 1 / sqrt((double)D)); // [B,H,T,T]
    if (causal) s = ag_masked_fill(ctx, s, ag_causal_mask(ctx, T), -INFINITY);
    return ag_merge_heads(ctx, ag_matmul(ctx, ag_softmax(ctx, s), vh));                            // [B,T,C]
}

static ag_tensor *build_fused(ag_ctx *ctx, ag_tensor **in, void *user)
{
    attn_args *a = user;
    int D = in[0]->shape[2] / a->H;
    return ag_attention(ctx, in[0], in[1], in[2], a->H, 1 / sqrt((double)D), a->causal);
}

static void compare(bool causal)
{
    int s[3] = { 2, 5, 12 }; /* B=2, T=5, C=12, H=3, D=4 */
    ag_tensor *in[3] = { gc_tensor_new(3, s, 51, -1, 1), gc_tensor_new(3, s, 52, -1, 1), gc_tensor_new(3, s, 53, -1, 1) };
    attn_args a = { 3, causal };
    ag_ctx *ctx = ag_ctx_new();
    size_t n = ag_numel(in[0]);
    ag_real *dy = malloc(n * sizeof(ag_real)), *g_fused[3], *g_comp[3];
    ag_rng r;
    ag_rng_seed(&r, 54);
    for (size_t i = 0; i < n; i++) dy[i] = (ag_real)(ag_rng_uniform(&r) - 0.5);
    ag_tensor *yf = build_fused(ctx, in, &a);
    ag_real *out_fused = malloc(n * sizeof(ag_real));
    memcpy(out_fused, yf->data, n * sizeof(ag_real));
    for (int i = 0; i < 3; i++) memset(in[i]->grad, 0, n * sizeof(ag_real));
    ck_assert_int_eq(ag_backward_from(ctx, yf, dy), AG_OK);
    for (int i = 0; i < 3; i++) {
        g_fused[i] = malloc(n * sizeof(ag_real));
        memcpy(g_fused[i], in[i]->grad, n * sizeof(ag_real));
        memset(in[i]->grad, 0, n * sizeof(ag_real));
    }
    ag_ctx_reset(ctx);
    ag_tensor *yc = composed(ctx, in[0], in[1], in[2], 3, causal);
    ck_assert_int_eq(ag_backward_from(ctx, yc, dy), AG_OK);
#ifdef AG_DOUBLE
    const double tol = 1e-12;
#else
    const double tol = 1e-5;
#endif
    for (size_t i = 0; i < n; i++) ck_assert_double_eq_tol(out_fused[i], yc->data[i], tol);
    for (int k = 0; k < 3; k++) {
        g_comp[k] = in[k]->grad;
        for (size_t i = 0; i < n; i++) ck_assert_double_eq_tol(g_fused[k][i], g_comp[k][i], tol);
        free(g_fused[k]);
    }
    free(out_fused);
    free(dy);
    ag_ctx_free(ctx);
    for (int i = 0; i < 3; i++) gc_tensor_free(in[i]);
}

START_TEST(test_fused_equals_composed_causal) { compare(true); }
END_TEST
START_TEST(test_fused_equals_composed_unmasked) { compare(false); }
END_TEST

/* q, k and v made by ops, so their gradients start fresh and the fused backward writes them
 * with beta 0 instead of zeroing them first: once as one tensor (self-attention on x itself,
 * where dv's product writes the block and dq's and dk's add to it) and once as three. x's
 * gradient must match the op-by-op path's. */
static void fresh_qkv_grads(bool fused, bool same, ag_tensor *x, const ag_real *dy, ag_real *dx)
{
    ag_ctx *ctx = ag_ctx_new();
    memset(x->grad, 0, ag_numel(x) * sizeof(ag_real));
    ag_tensor *q = ag_scale(ctx, x, 0.5);                                       // [B,T,C]
    ag_tensor *k = same ? q : ag_scale(ctx, x, 1.5), *v = same ? q : ag_scale(ctx, x, -1);
    int D = x->shape[2] / 3;
    ag_tensor *y = fused ? ag_attention(ctx, q, k, v, 3, 1 / sqrt((double)D), true) : composed(ctx, q, k, v, 3, true);
    ck_assert_int_eq(ag_backward_from(ctx, y, dy), AG_OK);
    memcpy(dx, x->grad, ag_numel(x) * sizeof(ag_real));
    ag_ctx_free(ctx);
}

START_TEST(test_fused_fresh_gradients)
{
    int s[3] = { 2, 5, 12 };
    ag_tensor *x = gc_tensor_new(3, s, 55, -1, 1), *dy = gc_tensor_new(3, s, 56, -1, 1);
    size_t n = ag_numel(x);
    ag_real *gf = malloc(n * sizeof(ag_real)), *gc = malloc(n * sizeof(ag_real));
#ifdef AG_DOUBLE
    const double tol = 1e-12;
#else
    const double tol = 1e-5;
#endif
    for (int same = 0; same < 2; same++) {
        fresh_qkv_grads(true, same, x, dy->data, gf);
        fresh_qkv_grads(false, same, x, dy->data, gc);
        for (size_t i = 0; i < n; i++) ck_assert_double_eq_tol(gf[i], gc[i], tol);
    }
    free(gf);
    free(gc);
    gc_tensor_free(x);
    gc_tensor_free(dy);
}
END_TEST

START_TEST(test_fused_gradcheck)
{
    int s[3] = { 2, 4, 6 }; /* H=2, D=3 */
    ag_tensor *in[3] = { gc_tensor_new(3, s, 55, -1, 1), gc_tensor_new(3, s, 56, -1, 1), gc_tensor_new(3, s, 57, -1, 1) };
    attn_args a = { 2, true };
    gc_opts o = gc_defaults("fused attention (causal)");
    o.max_elems = 0;
    GC_ASSERT(&o, build_fused, in, 3, &a);
    a.causal = false;
    o.name = "fused attention (unmasked)";
    GC_ASSERT(&o, build_fused, in, 3, &a);
    /* one tensor as q, k and v at once (self-attention on raw x): gradients from all three add up */
    ag_tensor *same[3] = { in[0], in[0], in[0] };
    o.name = "fused attention (q = k = v)";
    GC_ASSERT(&o, build_fused, same, 1, &a);
    for (int i = 0; i < 3; i++) gc_tensor_free(in[i]);
}
END_TEST

/* the whole model: fused (default) and composed attention give the same loss and gradients */
START_TEST(test_gpt_fused_equals_composed)
{
    ag_gpt_config cfg = { .vocab_size = 7, .n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 6 };
    ag_gpt *gf = ag_gpt_new(&cfg, 3, NULL);
    cfg.composed_attention = true;
    ag_gpt *gc = ag_gpt_new(&cfg, 3, NULL);
    ck_assert_ptr_nonnull(gf);
    ck_assert_ptr_nonnull(gc);
    int ids[12] = { 1, 2, 3, 4, 5, 6, 0, 6, 5, 4, 3, 2 }, tg[12] = { 2, 3, 4, 5, 6, 0, 6, 5, 4, 3, 2, 1 };
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *lf = NULL, *lc = NULL;
    ag_params_zero_grad(gf->params);
    ag_params_zero_grad(gc->params);
    ag_gpt_forward(ctx, gf, ids, tg, 2, 6, &(ag_forward_opts){ .train = true }, &lf);
    ck_assert_int_eq(ag_backward(ctx, lf), AG_OK);
    ag_real loss_f = lf->data[0];
    ag_ctx_reset(ctx);
    ag_gpt_forward(ctx, gc, ids, tg, 2, 6, &(ag_forward_opts){ .train = true }, &lc);
    ck_assert_int_eq(ag_backward(ctx, lc), AG_OK);
    ck_assert_double_eq_tol(loss_f, lc->data[0], 1e-6);
    for (size_t i = 0; i < gf->params->total; i++)
        ck_assert_double_eq_tol(gf->params->grad[i], gc->params->grad[i], 1e-5);
    ag_ctx_free(ctx);
    ag_gpt_free(gf);
    ag_gpt_free(gc);
}
END_TEST

Suite *fused_suite(void)
{
    Suite *s = suite_create("fused");
    TCase *t = tcase_create("fused");
    tcase_add_test(t, test_fused_equals_composed_causal);
    tcase_add_test(t, test_fused_equals_composed_unmasked);
    tcase_add_test(t, test_fused_fresh_gradients);
    tcase_add_test(t, test_fused_gradcheck);
    tcase_add_test(t, test_gpt_fused_equals_composed);
    suite_add_tcase(s, t);
    return s;
}
