/* test_rmsnorm.c -- the RMSNorm op (known values, unit RMS, errors, gradient checks over
 * several shapes with and without a trainable weight) and the RMSNorm layer (its one
 * parameter: name, shape, init, no decay). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gradcheck.h"
#include "tcases.h"

static ag_tensor *build_rmsnorm(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_rmsnorm(ctx, in[0], in[1], 1e-5);
}

/* w as a constant (no grad): only the dx path of the backward runs */
static ag_tensor *build_rmsnorm_fixed_w(ag_ctx *ctx, ag_tensor **in, void *user)
{
    return ag_rmsnorm(ctx, in[0], user, 1e-5);
}

// --- forward ---

START_TEST(test_rmsnorm_known_values)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new2(ctx, 3, 2), *w = ag_tensor_new1(ctx, 2);
    const ag_real xv[6] = { 3, 4, 1, -1, 0, 0 }, wv[2] = { 1, 2 };
    memcpy(x->data, xv, sizeof xv);
    memcpy(w->data, wv, sizeof wv);
    ag_tensor *y = ag_rmsnorm(ctx, x, w, 1e-5);                     // [3,2]
    ck_assert_ptr_nonnull(y);
    /* row 0: mean(x^2) = 12.5, y = x / sqrt(12.5 + 1e-5) * w */
    ck_assert_double_eq_tol(y->data[0], 0.848527798013, 1e-6);
    ck_assert_double_eq_tol(y->data[1], 2.262740794701, 1e-6);
    /* row 1: mean(x^2) = 1 */
    ck_assert_double_eq_tol(y->data[2], 0.999995000037, 1e-6);
    ck_assert_double_eq_tol(y->data[3], -1.999990000075, 1e-6);
    /* row 2: all zeros stays zero (eps keeps it finite) */
    ck_assert(y->data[4] == 0 && y->data[5] == 0);
    ag_ctx_free(ctx);
}
END_TEST

/* With w = 1 every row comes out with root mean square 1 (up to eps), whatever its scale,
 * and its direction unchanged: y is x divided by a positive number. */
START_TEST(test_rmsnorm_unit_rms)
{
    ag_ctx *ctx = ag_ctx_new();
    enum { R = 4, C = 8 };
    ag_tensor *x = ag_tensor_new2(ctx, R, C), *w = ag_tensor_new1(ctx, C);
    ag_rng r;
    ag_rng_seed(&r, 5);
    for (int i = 0; i < R * C; i++) x->data[i] = (ag_real)((1 + 3 * (i / C)) * (2 * ag_rng_uniform(&r) - 1) + 0.5);
    for (int c = 0; c < C; c++) w->data[c] = 1;
    ag_tensor *y = ag_rmsnorm(ctx, x, w, 1e-5);
    for (int row = 0; row < R; row++) {
        double ms = 0, ratio = y->data[row * C] / x->data[row * C];
        for (int c = 0; c < C; c++) {
            ms += (double)y->data[row * C + c] * y->data[row * C + c];
            ck_assert_double_eq_tol(y->data[row * C + c], ratio * x->data[row * C + c], 1e-5);
        }
        ck_assert_double_gt(ratio, 0);
        ck_assert_double_eq_tol(sqrt(ms / C), 1, 1e-4); /* sqrt(ms/(ms+eps)) */
    }
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_rmsnorm_errors)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new3(ctx, 2, 3, 8), *w = ag_tensor_new1(ctx, 4);
    ck_assert_ptr_null(ag_rmsnorm(ctx, x, w, 1e-5));
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "ag_rmsnorm: x [2,3,8], w [4]"));
    ag_ctx_clear_error(ctx);
    ag_tensor *w2 = ag_tensor_new2(ctx, 1, 8);                      /* [1,8] is not [8] */
    ck_assert_ptr_null(ag_rmsnorm(ctx, x, w2, 1e-5));
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_SHAPE);
    ag_ctx_clear_error(ctx);
    ag_tensor *w8 = ag_tensor_new1(ctx, 8);
    ck_assert_ptr_null(ag_rmsnorm(ctx, x, w8, 0));
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_ARG);
    /* sticky: a NULL input keeps the first message */
    ck_assert_ptr_null(ag_rmsnorm(ctx, NULL, w8, 1e-5));
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "eps"));
    ag_ctx_free(ctx);
}
END_TEST

// --- grad ---

/* distinct sizes so a row/column mix-up fails: [2,3,8], [5,7], [2,1,3,6]; and [3,37], wider than
 * one column block of dw's reduction (AG_COL_BLOCK = 32), with a partial second block */
static const int grad_shapes[4][5] = { { 3, 2, 3, 8 }, { 2, 5, 7 }, { 4, 2, 1, 3, 6 }, { 2, 3, 37 } }; /* ndim, dims */

START_TEST(test_rmsnorm_grad)
{
    const int *s = grad_shapes[_i];
    int nd = s[0], C = s[nd];
    ag_tensor *in[2] = { gc_tensor_new(nd, s + 1, 40 + _i, -2, 2), gc_tensor_new(1, &C, 50 + _i, 0.5, 1.5) };
    gc_opts o = gc_defaults("rmsnorm");
    o.max_elems = 0;
    GC_ASSERT(&o, build_rmsnorm, in, 2, NULL);
    /* w without grad: the node still records (x needs grad) and only dx is written */
    o.name = "rmsnorm (w constant)";
    in[1]->requires_grad = false;
    GC_ASSERT(&o, build_rmsnorm_fixed_w, in, 1, in[1]);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

/* Rows of very different scale (RMS 1e-2 .. 1e2 in the double build, 0.1 .. 10 in float where
 * the difference step is 1e-2): the rstd^3 term of dx must scale with it. */
START_TEST(test_rmsnorm_grad_scales)
{
    int s[2] = { 3, 5 }, C = 5;
    ag_tensor *in[2] = { gc_tensor_new(2, s, 60, -1, 1), gc_tensor_new(1, &C, 61, -1.5, 1.5) };
#ifdef AG_DOUBLE
    const double scale[3] = { 1e-2, 1, 1e2 };
#else
    const double scale[3] = { 1e-1, 1, 1e1 };
#endif
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < C; c++) in[0]->data[r * C + c] = (ag_real)(in[0]->data[r * C + c] * scale[r]);
    gc_opts o = gc_defaults("rmsnorm scales");
    o.max_elems = 0;
    GC_ASSERT(&o, build_rmsnorm, in, 2, NULL);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

/* Big enough (R*C >= AG_PAR_MIN) that the kernels run split across threads: rows for y and dx,
 * blocks of 32 columns for dw (C = 40: a full and a partial block). Everything is compared with
 * a serial double-precision reference; a split over the wrong index would race and lose
 * whole blocks of dw. (The gradchecks above are too small to leave one thread.) */
START_TEST(test_rmsnorm_parallel_matches_serial)
{
    enum { R = 2048, C = 40 };
    int sx[2] = { R, C }, sw[1] = { C };
    ag_tensor *x = gc_tensor_new(2, sx, 62, -2, 2), *w = gc_tensor_new(1, sw, 63, 0.5, 1.5);
    ag_real *dy = malloc(R * C * sizeof(ag_real));
    double *dw_ref = calloc(C, sizeof(double));
    ck_assert(dy && dw_ref);
    for (int i = 0; i < R * C; i++) dy[i] = (ag_real)sin(0.37 * i);
    ag_ctx *ctx = ag_ctx_new();
    for (int round = 0; round < 3; round++) {
        memset(x->grad, 0, R * C * sizeof(ag_real));
        memset(w->grad, 0, C * sizeof(ag_real));
        ag_tensor *y = ag_rmsnorm(ctx, x, w, 1e-5);                 // [R,C]
        ck_assert_int_eq(ag_backward_from(ctx, y, dy), AG_OK);
        for (int c = 0; c < C; c++) dw_ref[c] = 0;
        for (int r = 0; r < R; r++) {
            const ag_real *xr = x->data + r * C, *dyr = dy + r * C;
            double ms = 0, gx = 0;
            for (int c = 0; c < C; c++) ms += (double)xr[c] * xr[c];
            double rs = 1 / sqrt(ms / C + 1e-5);
            for (int c = 0; c < C; c++) gx += dyr[c] * (double)w->data[c] * xr[c] * rs;
            gx /= C;
            for (int c = 0; c < C; c++) {
                double yv = xr[c] * rs * w->data[c], dxv = rs * (dyr[c] * (double)w->data[c] - xr[c] * rs * gx);
                ck_assert_msg(fabs(y->data[r * C + c] - yv) <= 1e-5 * (1 + fabs(yv)), "y[%d,%d]", r, c);
                ck_assert_msg(fabs(x->grad[r * C + c] - dxv) <= 1e-4 * (1 + fabs(dxv)), "dx[%d,%d]", r, c);
                dw_ref[c] += dyr[c] * (double)xr[c] * rs;
            }
        }
        for (int c = 0; c < C; c++)
            ck_assert_msg(fabs(w->grad[c] - dw_ref[c]) <= 1e-3 * (1 + fabs(dw_ref[c])), "round %d: dw[%d] = %g, want %g",
                          round, c, (double)w->grad[c], dw_ref[c]);
        ag_ctx_reset(ctx);
    }
    ag_ctx_free(ctx);
    free(dy);
    free(dw_ref);
    gc_tensor_free(x);
    gc_tensor_free(w);
}
END_TEST

// --- layer ---

START_TEST(test_rmsnorm_layer)
{
    ag_params *P = ag_params_new();
    ag_rmsnorm_layer L, dup;
    ck_assert_int_eq(ag_rmsnorm_layer_init(&L, P, "blocks.0.ln1", 6), AG_OK);
    ck_assert_int_eq(ag_rmsnorm_layer_init(&dup, P, "blocks.0.ln1", 6), AG_ERR_ARG); /* duplicate */
    ck_assert_int_eq(ag_rmsnorm_layer_init(&dup, P, "bad", 0), AG_ERR_ARG);
    ck_assert_int_eq(P->n, 1);                                      /* weight only, no bias */
    const ag_param_entry *e = &P->entries[0];
    ck_assert_str_eq(e->t->name, "blocks.0.ln1.weight");
    ck_assert_int_eq(e->t->ndim, 1);
    ck_assert_int_eq(e->t->shape[0], 6);
    ck_assert(!e->decay);
    ck_assert_int_eq(L.C, 6);
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    ag_params_init(P, 3);
    for (int c = 0; c < 6; c++) ck_assert(L.w->data[c] == 1);
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new3(ctx, 1, 2, 6);
    for (int i = 0; i < 12; i++) x->data[i] = (ag_real)(i - 5);
    ag_tensor *y = ag_rmsnorm_layer_forward(ctx, &L, x);            // [1,2,6]
    ag_tensor *want = ag_rmsnorm(ctx, x, L.w, 1e-5);                /* eps 1e-5 */
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(y->ndim, 3);
    for (int i = 0; i < 12; i++) ck_assert(y->data[i] == want->data[i]);
    ag_ctx_free(ctx);
    ag_params_free(P);
}
END_TEST

Suite *rmsnorm_suite(void)
{
    Suite *s = suite_create("rmsnorm");
    TCase *f = tcase_create("forward");
    ADD_TESTS(f, test_rmsnorm_known_values, test_rmsnorm_unit_rms, test_rmsnorm_errors, test_rmsnorm_layer);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("grad");
    tcase_add_loop_test(g, test_rmsnorm_grad, 0, 4);
    ADD_TESTS(g, test_rmsnorm_grad_scales, test_rmsnorm_parallel_matches_serial);
    suite_add_tcase(s, g);
    return s;
}
