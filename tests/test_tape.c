/* test_tape.c -- the autograd driver and the step context: accumulation where a tensor feeds
 * several ops, no-grad mode, scalar-only backward, sticky errors, and a step arena that stops
 * allocating after the first step. */
#include <check.h>
#include "gradcheck.h"
#include "tcases.h"

/* x feeds three linears and a residual, like x -> w_q, w_k, w_v and x + attn(x) */
static ag_tensor *build_fanout(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    ag_tensor *x = in[0], *W = in[1];
    ag_tensor *a = ag_linear(ctx, x, W, NULL), *b = ag_linear(ctx, x, W, NULL), *c = ag_scale(ctx, x, 2);
    return ag_add(ctx, ag_add(ctx, ag_matmul(ctx, a, ag_transpose(ctx, b)), ag_linear(ctx, c, W, NULL)), x);
}

START_TEST(test_gradients_accumulate_over_fanout)
{
    int sx[2] = { 4, 4 }, sw[2] = { 4, 4 };
    ag_tensor *in[2] = { gc_tensor_new(2, sx, 41, -1, 1), gc_tensor_new(2, sw, 42, -1, 1) };
    gc_opts o = gc_defaults("fan-out");
    o.max_elems = 0;
    GC_ASSERT(&o, build_fanout, in, 2, NULL);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

START_TEST(test_no_grad_mode_records_nothing)
{
    ag_ctx *ctx = ag_ctx_new();
    int s[2] = { 3, 4 };
    ag_tensor *x = ag_tensor_leaf(ctx, 2, s);
    ag_ctx_set_grad(ctx, false);
    ag_tensor *y = ag_softmax(ctx, ag_gelu(ctx, x));
    ck_assert_ptr_nonnull(y);
    ck_assert(!y->requires_grad);
    ck_assert_ptr_null(y->grad);
    ck_assert_int_eq(ag_ctx_get_stats(ctx).tape_nodes, 0);
    ag_ctx_set_grad(ctx, true);
    y = ag_softmax(ctx, ag_gelu(ctx, x));
    ck_assert(y->requires_grad);
    ck_assert_int_eq(ag_ctx_get_stats(ctx).tape_nodes, 2);
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_backward_needs_a_scalar)
{
    ag_ctx *ctx = ag_ctx_new();
    int s[2] = { 3, 4 };
    ag_tensor *x = ag_tensor_leaf(ctx, 2, s);
    ck_assert_int_eq(ag_backward(ctx, ag_gelu(ctx, x)), AG_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "scalar"));
    ag_ctx_reset(ctx);
    ck_assert_ptr_null(ag_ctx_error(ctx));
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_arena_stops_growing)
{
    int sx[3] = { 4, 16, 32 }, sw[2] = { 64, 32 };
    ag_tensor *x = gc_tensor_new(3, sx, 43, -1, 1), *W = gc_tensor_new(2, sw, 44, -1, 1);
    ag_ctx *ctx = ag_ctx_new();
    uint64_t mallocs[4];
    size_t cap[4];
    for (int step = 0; step < 4; step++) {
        /* a step bigger than one 1 MiB chunk, so step 1 needs several */
        for (int rep = 0; rep < 40; rep++) {
            ag_tensor *y = ag_gelu(ctx, ag_linear(ctx, x, W, NULL));
            int t[64];
            for (int i = 0; i < 64; i++) t[i] = i % 64;
            ag_tensor *L = ag_cross_entropy(ctx, y, t);
            ck_assert_ptr_nonnull(L);
            ck_assert_int_eq(ag_backward(ctx, L), AG_OK);
        }
        ag_ctx_stats st = ag_ctx_get_stats(ctx);
        mallocs[step] = st.chunk_mallocs;
        cap[step] = st.arena_capacity;
        ag_ctx_reset(ctx);
    }
#ifndef AG_ARENA_DEBUG /* the sanitizer build mallocs every block on purpose */
    ck_assert_uint_gt(mallocs[0], 1);
    /* reset after step 1 coalesces into one chunk (one malloc); from then on: none */
    ck_assert_uint_eq(mallocs[2], mallocs[1]);
    ck_assert_uint_eq(mallocs[3], mallocs[1]);
    ck_assert_uint_eq(cap[3], cap[1]);
#else
    (void)mallocs;
    (void)cap;
#endif
    ag_ctx_free(ctx);
    gc_tensor_free(x);
    gc_tensor_free(W);
}
END_TEST

START_TEST(test_detect_anomaly_names_the_op)
{
    int sx[2] = { 3, 3 }, sw[2] = { 3, 3 };
    ag_tensor *x = gc_tensor_new(2, sx, 45, -1, 1), *W = gc_tensor_new(2, sw, 46, 0.5, 1);
    x->data[4] = (ag_real)INFINITY; /* a poisoned input: the linear's output goes non-finite */
    ag_ctx *ctx = ag_ctx_new();
    ag_ctx_set_scope(ctx, "blocks.1.mlp");
    ck_assert_ptr_nonnull(ag_gelu(ctx, ag_linear(ctx, x, W, NULL))); /* off by default: no check */
    ag_ctx_reset(ctx);
    ag_ctx_set_detect_anomaly(ctx, true);
    ag_ctx_set_scope(ctx, "blocks.1.mlp");
    ck_assert_ptr_null(ag_gelu(ctx, ag_linear(ctx, x, W, NULL)));
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_NONFINITE);
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "output of linear [3,3] in blocks.1.mlp"));
    /* the causal mask's -inf is not an anomaly, and a clean backward passes */
    ag_ctx_reset(ctx);
    x->data[4] = 0.5;
    ag_tensor *a = ag_softmax(ctx, ag_masked_fill(ctx, ag_linear(ctx, x, W, NULL), ag_causal_mask(ctx, 3), -INFINITY));
    ck_assert_msg(a != NULL, "%s", ag_ctx_error(ctx));
    ag_real dy[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    ck_assert_int_eq(ag_backward_from(ctx, a, dy), AG_OK);
    /* a non-finite upstream gradient is caught at the first backward that passes it on */
    ag_ctx_reset(ctx);
    a = ag_softmax(ctx, ag_linear(ctx, x, W, NULL));
    dy[2] = (ag_real)NAN;
    ck_assert_int_eq(ag_backward_from(ctx, a, dy), AG_ERR_NONFINITE);
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "gradient from the backward of softmax"));
    ag_ctx_free(ctx);
    gc_tensor_free(x);
    gc_tensor_free(W);
}
END_TEST

/* With gradient recycling a released buffer must never be one that an input still owns: a
 * reshape view shares its input's gradient, here twice in a row, and x's gradient must come out
 * the same as without recycling. */
static void reshape_chain_grads(bool recycle, ag_tensor *x, ag_tensor *W, const ag_real *dy, ag_real *dx_out)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_ctx_set_recycle_grads(ctx, recycle);
    memset(x->grad, 0, 24 * sizeof(ag_real));
    memset(W->grad, 0, 20 * sizeof(ag_real));
    int s2[2] = { 6, 4 }, s3[3] = { 2, 3, 4 };
    ag_tensor *h = ag_gelu(ctx, x);                                      // [2,3,4]
    ag_tensor *v = ag_reshape(ctx, ag_reshape(ctx, h, 2, s2), 3, s3);   // [2,3,4] via [6,4]
    ag_tensor *y = ag_matmul(ctx, ag_reshape(ctx, ag_add(ctx, v, h), 2, s2), W);   // [6,5]
    ck_assert_int_eq(ag_backward_from(ctx, y, dy), AG_OK);
    ck_assert(recycle ? h->grad == NULL && y->grad == NULL : h->grad != NULL);
    memcpy(dx_out, x->grad, 24 * sizeof(ag_real));
    ag_ctx_free(ctx);
}

START_TEST(test_recycling_keeps_views_gradients)
{
    int sx[3] = { 2, 3, 4 }, sw[2] = { 4, 5 }, sy[2] = { 6, 5 };
    ag_tensor *x = gc_tensor_new(3, sx, 47, -1, 1), *W = gc_tensor_new(2, sw, 48, -1, 1);
    ag_tensor *dy = gc_tensor_new(2, sy, 49, -1, 1);
    ag_real plain[24], recycled[24];
    reshape_chain_grads(false, x, W, dy->data, plain);
    reshape_chain_grads(true, x, W, dy->data, recycled);
    for (int i = 0; i < 24; i++) ck_assert(plain[i] == recycled[i]);
    gc_tensor_free(x);
    gc_tensor_free(W);
    gc_tensor_free(dy);
}
END_TEST

/* The optional parts (the scope, recycling, anomaly detection) live behind the ctx's hooks:
 * off until asked for, cleared by a reset where they belong to a step (the scope), kept
 * where they are settings (recycling), copied by ag_ctx_new_like, and off again when asked. */
static ag_status gelu_backward_of(ag_ctx *ctx, ag_tensor *x, ag_tensor **h)
{
    static const ag_real dy[6] = { 1, 2, 3, 4, 5, 6 };
    *h = ag_gelu(ctx, x);                                                // [2,3]
    return ag_backward_from(ctx, ag_scale(ctx, *h, 2), dy);              // [2,3]
}

START_TEST(test_optional_parts_follow_their_switches)
{
    ag_ctx *ctx = ag_ctx_new();
    int s[2] = { 2, 3 };
    ck_assert_ptr_null(ag_ctx_scope(ctx));
    ag_ctx_set_scope(ctx, "blocks.0");
    ag_tensor *x = ag_tensor_leaf(ctx, 2, s), *h;
    ck_assert_int_eq(gelu_backward_of(ctx, x, &h), AG_OK);
    ck_assert_ptr_nonnull(h->grad);                  /* recycling is off by default */
    ag_ctx_reset(ctx);
    ck_assert_ptr_null(ag_ctx_scope(ctx));           /* a step's scope ends with the step */

    ag_ctx_set_recycle_grads(ctx, true);
    ag_ctx_set_detect_anomaly(ctx, true);
    ag_ctx *like = ag_ctx_new_like(ctx);
    ck_assert_ptr_nonnull(like);
    x = ag_tensor_leaf(like, 2, s);
    ck_assert_int_eq(gelu_backward_of(like, x, &h), AG_OK);
    ck_assert_ptr_null(h->grad);                     /* recycled: the copy recycles too */
    x->data[0] = (ag_real)NAN;
    ck_assert_ptr_null(ag_gelu(like, x));            /* and checks for NaN, as ctx does */
    ck_assert_int_eq(ag_ctx_status(like), AG_ERR_NONFINITE);
    ag_ctx_free(like);

    ag_ctx_reset(ctx);
    ag_ctx_set_recycle_grads(ctx, false);            /* a setting: it outlived the reset until now */
    x = ag_tensor_leaf(ctx, 2, s);
    ck_assert_int_eq(gelu_backward_of(ctx, x, &h), AG_OK);
    ck_assert_ptr_nonnull(h->grad);
    ag_ctx_free(ctx);
}
END_TEST

Suite *tape_suite(void)
{
    Suite *s = suite_create("tape");
    TCase *t = tcase_create("tape");
    ADD_TESTS(t, test_gradients_accumulate_over_fanout, test_no_grad_mode_records_nothing,
                 test_backward_needs_a_scalar, test_arena_stops_growing, test_detect_anomaly_names_the_op,
                 test_recycling_keeps_views_gradients, test_optional_parts_follow_their_switches);
    suite_add_tcase(s, t);
    return s;
}
