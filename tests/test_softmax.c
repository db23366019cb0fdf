/* test_softmax.c -- softmax (src/tensor/ops/softmax.c) on both kernel tables: rows that sum to
 * one and a fully masked row, forward and backward, the gradient check (tests/gradcheck.h: the
 * reference table first, then the fast one), and the proof that the fast kernels equal the
 * reference kernels (see fastref.h; the other ops are in test_fast_ref_rows.c and
 * test_fast_ref_products.c): random shapes with odd
 * sizes and tails (lengths that are not a multiple of the 16 reduction lanes or the 32-column
 * blocks, single rows and columns), shapes past AG_PAR_MIN so the threaded paths run, and rows
 * masked with -inf as attention masks them: some entries, or all (a fully masked row gives
 * zeros). One TCase per case; each loops over seeds. */
#include <check.h>
#include <math.h>
#include <string.h>
#include "fastref.h"
#include "gradcheck.h"

#define N_SEEDS 8

/* a dimension: mostly small and odd, sometimes 1, sometimes a lane multiple plus a tail */
static int pick_dim(uint64_t *st)
{
    static const int dims[] = { 1, 2, 3, 5, 7, 15, 16, 17, 31, 33, 47, 64, 65, 100 };
    return dims[fr_rand_int(st, 0, (int)(sizeof dims / sizeof dims[0]) - 1)];
}

// --- softmax (fast/softmax.c) ---

static ag_tensor *build_softmax(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_softmax(ctx, in[0]);
}

START_TEST(test_softmax_fast_equals_reference)
{
    uint64_t st = 1000 + (uint64_t)_i;
    fr_input x = { 3, { pick_dim(&st), pick_dim(&st), pick_dim(&st) }, -4, 4, false };
    FR_ASSERT("softmax", build_softmax, &x, 1, NULL, st);
    fr_input big = { 2, { 130, 129 }, -30, 30, false }; /* past AG_PAR_MIN: threaded rows */
    FR_ASSERT("softmax (threaded)", build_softmax, &big, 1, NULL, st);
}
END_TEST

// --- forward and gradient check, on the table _i (0: reference, 1: fast) ---

static ag_ctx *on_table(int table)
{
    ag_ctx *ctx = ag_ctx_new();
    ck_assert_ptr_nonnull(ctx);
    ag_ctx_set_kernels(ctx, table == 0 ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST);
    return ctx;
}

START_TEST(test_softmax_rows_sum_to_one)
{
    ag_ctx *ctx = on_table(_i);
    ag_tensor *x = ag_tensor_new2(ctx, 4, 7);
    ag_rng r;
    ag_rng_seed(&r, 3);
    for (int i = 0; i < 28; i++) x->data[i] = (ag_real)(20 * ag_rng_uniform(&r) - 10);
    x->data[0] = 1000; /* max subtraction: no overflow */
    ag_tensor *y = ag_softmax(ctx, x);
    for (int row = 0; row < 4; row++) {
        double s = 0;
        for (int j = 0; j < 7; j++) {
            ck_assert(isfinite(y->data[row * 7 + j]) && y->data[row * 7 + j] >= 0);
            s += y->data[row * 7 + j];
        }
        ck_assert_double_eq_tol(s, 1, 1e-6);
    }
    ck_assert_double_eq_tol(y->data[0], 1, 1e-6);
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_softmax_fully_masked_row)
{
    ag_ctx *ctx = on_table(_i);
    int s[2] = { 2, 3 };
    ag_tensor *x = ag_tensor_leaf(ctx, 2, s);
    for (int j = 0; j < 3; j++) x->data[j] = -INFINITY; /* row 0 fully masked */
    x->data[3] = 1;
    x->data[4] = -INFINITY;
    x->data[5] = 2;
    ag_tensor *y = ag_softmax(ctx, x);
    for (int j = 0; j < 3; j++) ck_assert(y->data[j] == 0); /* zeros, not NaN */
    ck_assert(y->data[4] == 0);
    ag_real dy[6] = { 1, 2, 3, 4, 5, 6 };
    ck_assert_int_eq(ag_backward_from(ctx, y, dy), AG_OK);
    for (int j = 0; j < 6; j++) ck_assert(isfinite(x->grad[j]));
    for (int j = 0; j < 3; j++) ck_assert(x->grad[j] == 0); /* zero gradient */
    ck_assert(x->grad[4] == 0);
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_softmax_grad)
{
    int s[3] = { 2, 3, 5 };
    ag_tensor *in[1] = { gc_tensor_new(3, s, 31, -2, 2) };
    gc_opts o = gc_defaults("softmax");
    o.max_elems = 0;
    GC_ASSERT(&o, build_softmax, in, 1, NULL);
    gc_tensor_free(in[0]);
}
END_TEST

// --- softmax of masked scores: softmax(masked_fill(x, mask, -inf)), mask [R, N] over x [A, R, N] ---

static ag_tensor *build_masked_softmax(ag_ctx *ctx, ag_tensor **in, void *user)
{
    const ag_tensor *m = user; /* the mask's shape and values, copied into this ctx */
    ag_tensor *mask = ag_tensor_new(ctx, m->ndim, m->shape);
    if (!mask) return NULL;
    memcpy(mask->data, m->data, ag_numel(m) * sizeof(ag_real));
    return ag_softmax(ctx, ag_masked_fill(ctx, in[0], mask, (ag_real)-INFINITY));
}

/* x [A, R, N]; mask rows: row 0 fully masked, row 1 open, the others a random half masked
 * (any of them may come out fully masked too) */
static void check_masked_softmax(const char *what, int A, int R, int N, uint64_t *st)
{
    ag_tensor *m = ag_tensor_new_owned(2, (int[]){ R, N });
    ck_assert_ptr_nonnull(m);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < N; j++) m->data[r * N + j] = r == 0 ? 0 : r == 1 ? 1 : (ag_real)fr_rand_int(st, 0, 1);
    fr_input x = { 3, { A, R, N }, -8, 8, false };
    FR_ASSERT(what, build_masked_softmax, &x, 1, m, *st);
    ag_tensor_free_owned(m);
}

START_TEST(test_masked_softmax_fast_equals_reference)
{
    uint64_t st = 2000 + 100 * (uint64_t)_i;
    check_masked_softmax("softmax of masked rows", pick_dim(&st), 1 + pick_dim(&st), pick_dim(&st), &st);
    check_masked_softmax("softmax of masked rows (threaded)", 3, 65, 129, &st); /* past AG_PAR_MIN */
}
END_TEST

Suite *softmax_suite(void)
{
    Suite *s = suite_create("softmax");
    TCase *f = tcase_create("forward");
    tcase_add_loop_test(f, test_softmax_rows_sum_to_one, 0, 2);
    tcase_add_loop_test(f, test_softmax_fully_masked_row, 0, 2);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("grad");
    tcase_add_test(g, test_softmax_grad);
    suite_add_tcase(s, g);
    TCase *tc = tcase_create("softmax");
    tcase_add_loop_test(tc, test_softmax_fast_equals_reference, 0, N_SEEDS);
    suite_add_tcase(s, tc);
    TCase *masked = tcase_create("masked softmax");
    tcase_add_loop_test(masked, test_masked_softmax_fast_equals_reference, 0, N_SEEDS);
    suite_add_tcase(s, masked);
    return s;
}
