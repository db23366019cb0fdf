/* test_gradcheck.c -- the public gradient check (src/check/gradcheck.h) checked itself: it must
 * catch the backward mistakes it exists for, report per input, refuse inputs that would crash
 * it, pass the build's errors on, and leave the inputs as it found them.
 *
 * The ops under test are written here with the public API only (ag_op, ag_record, ag_grad),
 * the way a user outside the tree writes one, and each can be given a known bug. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "gradcheck.h"
#include "tcases.h"

typedef enum { BWD_RIGHT, BWD_DA_TWICE, BWD_DB_OVERWRITES, BWD_DA2_PLUS_ONE, BWD_NONE } bwd_bug;

// --- y = a * b, with a selectable bug in its backward ---

static ag_status mul_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = a * b  =>  da += dy * b,  db += dy * a */
    ag_tensor *a = n->in[0], *b = n->in[1];
    const ag_real *dy = n->out->grad;
    ag_real *da = ag_grad(ctx, a), *db = ag_grad(ctx, b);
    if (!da || !db) return ag_ctx_status(ctx);
    bwd_bug bug = (bwd_bug)n->iparam[0];
    for (size_t i = 0; i < ag_numel(a); i++) {
        da[i] += (bug == BWD_DA_TWICE ? 2 : 1) * dy[i] * b->data[i] + (bug == BWD_DA2_PLUS_ONE && i == 2);
        if (bug == BWD_DB_OVERWRITES) db[i] = dy[i] * a->data[i];
        else db[i] += dy[i] * a->data[i];
    }
    return AG_OK;
}

static const ag_op test_mul_op = { .name = "test_mul", .backward = mul_backward };

static ag_tensor *build_mul(ag_ctx *ctx, ag_tensor **in, void *user)
{
    ag_tensor *y = ag_tensor_like(ctx, in[0]);                      // a's shape
    if (!y) return NULL;
    for (size_t i = 0; i < ag_numel(y); i++) y->data[i] = in[0]->data[i] * in[1]->data[i];
    ag_node *n = ag_record(ctx, &test_mul_op, y, in, 2);
    if (n) n->iparam[0] = *(const bwd_bug *)user;
    return ag_ctx_status(ctx) == AG_OK ? y : NULL;
}

// --- softmax over the last dim whose backward adds nothing ---

static ag_status no_backward(ag_ctx *ctx, ag_node *n)
{
    (void)ctx, (void)n;
    return AG_OK;
}

static const ag_op lazy_softmax_op = { .name = "lazy_softmax", .backward = no_backward };

static ag_tensor *build_lazy_softmax(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    ag_tensor *y = ag_tensor_like(ctx, in[0]);                      // [R,N]
    if (!y) return NULL;
    int N = ag_last(in[0]);
    for (size_t r = 0; r < ag_rows(in[0]); r++) {
        const ag_real *x = in[0]->data + r * N;
        ag_real *yr = y->data + r * N, m = x[0], s = 0;
        for (int c = 1; c < N; c++) m = x[c] > m ? x[c] : m;
        for (int c = 0; c < N; c++) s += yr[c] = AG_EXP(x[c] - m);
        for (int c = 0; c < N; c++) yr[c] /= s;
    }
    ag_record(ctx, &lazy_softmax_op, y, in, 1);
    return ag_ctx_status(ctx) == AG_OK ? y : NULL;
}

// --- what it catches, per input ---

START_TEST(test_right_backward_passes)
{
    int s[2] = { 2, 3 };
    ag_tensor *in[2] = { gc_tensor_new(2, s, 1, -1, 1), gc_tensor_new(2, s, 2, -1, 1) };
    ag_gradcheck_opts o = ag_gradcheck_defaults("test_mul");
    ag_gradcheck_result r[2];
    ag_error err = { 0 };
    bwd_bug bug = BWD_RIGHT;
    ck_assert_int_eq(ag_gradcheck(NULL, build_mul, &bug, in, 2, &o, r, &err), AG_OK);
    ck_assert_uint_eq(ag_gradcheck_failed(r, 2), 0);
    ck_assert_uint_eq(r[0].checked, 6);
    char line[AG_GRADCHECK_MSG];
    ag_gradcheck_message(&o, r, 2, line, sizeof line);
    ck_assert_msg(strstr(line, "test_mul (" AG_REAL_NAME "): ok, 2 inputs, 12 elements, worst input"), "%s", line);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

/* a factor of 2 in da: input 0 fails with the doubled value, input 1 passes */
START_TEST(test_wrong_factor_fails_its_own_input)
{
    int s[2] = { 2, 3 };
    ag_tensor *in[2] = { gc_tensor_new(2, s, 1, 0.5, 1), gc_tensor_new(2, s, 2, 0.5, 1) };
    ag_gradcheck_opts o = ag_gradcheck_defaults("test_mul");
    ag_gradcheck_result r[2];
    ag_error err = { 0 };
    bwd_bug bug = BWD_DA_TWICE;
    ck_assert_int_eq(ag_gradcheck(NULL, build_mul, &bug, in, 2, &o, r, &err), AG_OK);
    ck_assert_uint_gt(r[0].failed, 0);
    ck_assert_uint_eq(r[1].failed, 0);
    ck_assert(fabs(r[0].analytic - 2 * r[0].numeric) <= 0.1 * fabs(r[0].numeric)); /* the worst: twice */
    char line[AG_GRADCHECK_MSG], want[96];
    ag_gradcheck_message(&o, r, 2, line, sizeof line);
    snprintf(want, sizeof want, "test_mul (%s): FAIL input 0 element %zu: analytic ", AG_REAL_NAME, r[0].worst);
    ck_assert_msg(strstr(line, want) && strstr(line, " times over); ") && strstr(line, " of 12 elements fail"), "%s", line);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

/* One wrong element, da[2] off by exactly 1: the check names that element, with the numbers a
 * learner reads to see how wrong it is: the relative error |a - n| / |n| against the relative
 * tolerance rtol + atol / |n|, and how many tolerances apart the two are. */
START_TEST(test_failure_names_element_and_error)
{
    int s[2] = { 3, 4 };
    ag_tensor *in[2] = { gc_tensor_new(2, s, 12, -1, 1), gc_tensor_new(2, s, 13, -1, 1) };
    ag_gradcheck_opts o = ag_gradcheck_defaults("test_mul");
    o.max_elems = 0;
    ag_gradcheck_result r[2];
    ag_error err = { 0 };
    bwd_bug bug = BWD_DA2_PLUS_ONE;
    ck_assert_int_eq(ag_gradcheck(NULL, build_mul, &bug, in, 2, &o, r, &err), AG_OK);
    ck_assert_uint_eq(r[0].failed, 1);
    ck_assert_uint_eq(r[1].failed, 0);
    ck_assert_uint_eq(r[0].worst, 2);
    ck_assert_double_eq_tol(r[0].analytic - r[0].numeric, 1, 1e-3);  /* the injected error */
    double n = fabs(r[0].numeric), tol = o.atol + o.rtol * n;
    ck_assert_double_eq_tol(r[0].tol, tol, 1e-12 * tol);
    ck_assert_double_eq_tol(r[0].ratio, fabs(r[0].analytic - r[0].numeric) / tol, 1e-9 * r[0].ratio);
    ck_assert(r[0].ratio > 1 && r[1].ratio <= 1);
    char line[AG_GRADCHECK_MSG], want[160];
    ag_gradcheck_message(&o, r, 2, line, sizeof line);
    snprintf(want, sizeof want, "test_mul (%s): FAIL input 0 element 2: analytic %.10g numeric %.10g, ", AG_REAL_NAME,
             r[0].analytic, r[0].numeric);
    ck_assert_msg(strstr(line, want), "%s\nwant %s", line, want);
    snprintf(want, sizeof want, "relative error %.3g > tolerance %.3g (%.2g times over); 1 of 24 elements fail",
             fabs(r[0].analytic - r[0].numeric) / n, o.rtol + o.atol / n, fabs(r[0].analytic - r[0].numeric) / tol);
    ck_assert_msg(strstr(line, want), "%s\nwant %s", line, want);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

/* The message names the input that fails, not input 0: here db is written with `=` */
START_TEST(test_failure_names_the_failing_input)
{
    int s[1] = { 5 };
    ag_tensor *in[2] = { gc_tensor_new(1, s, 14, -1, 1), gc_tensor_new(1, s, 15, -1, 1) };
    in[1]->name = "b";
    ag_gradcheck_result r[2];
    ag_error err = { 0 };
    bwd_bug bug = BWD_DB_OVERWRITES;
    ag_gradcheck_opts o = ag_gradcheck_defaults("overwrites");
    ck_assert_int_eq(ag_gradcheck(NULL, build_mul, &bug, in, 2, &o, r, &err), AG_OK);
    ck_assert(r[0].failed == 0 && r[1].failed > 0);
    char line[AG_GRADCHECK_MSG], want[64];
    ag_gradcheck_message(&o, r, 2, line, sizeof line);
    snprintf(want, sizeof want, "FAIL input 1 (b) element %zu:", r[1].worst);
    ck_assert_msg(strstr(line, want) && strstr(line, " times over); "), "%s", line);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

/* y = a * b with b exactly 0 at some elements: there da = 0 and the difference is exactly 0,
 * an element that tests nothing. The worst element is never one of them while another exists,
 * though the right gradients elsewhere (|b| = 5) have a larger margin under |a - n| - tol. */
START_TEST(test_worst_is_never_zero_against_zero)
{
    int s[1] = { 8 };
    ag_tensor *in[2] = { gc_tensor_new(1, s, 16, -1, 1), gc_tensor_new(1, s, 17, -1, 1) };
    for (int i = 0; i < 8; i++) in[1]->data[i] = i % 2 ? 5 : 0;
    ag_gradcheck_opts o = ag_gradcheck_defaults("zeros");
    o.max_elems = 0;
    ag_gradcheck_result r[2];
    ag_error err = { 0 };
    bwd_bug bug = BWD_RIGHT;
    ck_assert_int_eq(ag_gradcheck(NULL, build_mul, &bug, in, 2, &o, r, &err), AG_OK);
    ck_assert_uint_eq(ag_gradcheck_failed(r, 2), 0);
    ck_assert_msg(r[0].worst % 2 == 1, "worst element %zu: analytic %g numeric %g", r[0].worst, r[0].analytic,
                  r[0].numeric);
    ck_assert(r[0].numeric != 0);
    char line[AG_GRADCHECK_MSG];
    ag_gradcheck_message(&o, r, 2, line, sizeof line);
    ck_assert_msg(strstr(line, "): ok, 2 inputs, 16 elements, worst input ") && strstr(line, " <= tolerance ") &&
                  !strstr(line, "analytic 0 numeric 0"), "%s", line);

    for (int i = 0; i < 8; i++) in[1]->data[i] = 0;     /* every element of input 0 is 0 against 0 */
    ck_assert_int_eq(ag_gradcheck(NULL, build_mul, &bug, in, 1, &o, r, &err), AG_OK);
    ck_assert(r[0].analytic == 0 && r[0].numeric == 0 && r[0].ratio == 0);
    ag_gradcheck_message(&o, r, 1, line, sizeof line);
    ck_assert_msg(strstr(line, "analytic 0 numeric 0, both exactly 0, as is every element checked"), "%s", line);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

/* opts.kernels: the check runs on that table (its ctx says so) and the message names it; a name
 * that is no table is refused before anything runs */
START_TEST(test_kernel_table_named)
{
    int s[1] = { 5 };
    ag_tensor *in[2] = { gc_tensor_new(1, s, 3, -1, 1), gc_tensor_new(1, s, 4, -1, 1) };
    ag_gradcheck_result r[2];
    ag_error err = { 0 };
    bwd_bug bug = BWD_RIGHT;
    gc_opts o = gc_defaults("mul");
    o.kernels = "reference";
    ag_ctx *ctx = ag_ctx_new();
    ck_assert_int_eq(ag_gradcheck(ctx, build_mul, &bug, in, 2, &o, r, &err), AG_OK);
    ck_assert_str_eq(ag_ctx_kernels_name(ctx), "reference");
    char line[AG_GRADCHECK_MSG], want[32];
    snprintf(want, sizeof want, "mul (reference, %s): ok", AG_REAL_NAME);
    ag_gradcheck_message(&o, r, 2, line, sizeof line);
    ck_assert_msg(strncmp(line, want, strlen(want)) == 0, "%s", line);
    o.kernels = "slow";
    ck_assert_int_eq(ag_gradcheck(ctx, build_mul, &bug, in, 2, &o, r, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "ag_gradcheck: kernels slow: not a kernel table (reference or fast)");
    ag_ctx_free(ctx);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

/* a backward that writes `=` passes a check that starts from zero gradients; not this one */
START_TEST(test_overwriting_backward_fails)
{
    int s[1] = { 5 };
    ag_tensor *in[2] = { gc_tensor_new(1, s, 3, -1, 1), gc_tensor_new(1, s, 4, -1, 1) };
    ag_gradcheck_result r[2];
    ag_error err = { 0 };
    bwd_bug bug = BWD_DB_OVERWRITES;
    ck_assert_int_eq(ag_gradcheck(NULL, build_mul, &bug, in, 2, NULL, r, &err), AG_OK);
    ck_assert_uint_eq(r[0].failed, 0);
    ck_assert_uint_gt(r[1].failed, 0);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

/* softmax rows sum to 1, so under sum(out) every true gradient is 0 and a missing backward
 * would pass; the random weights R make it fail */
START_TEST(test_missing_softmax_backward_fails)
{
    int s[2] = { 3, 4 };
    ag_tensor *x = gc_tensor_new(2, s, 5, -2, 2);
    ag_gradcheck_opts o = ag_gradcheck_defaults("lazy_softmax");
    ag_gradcheck_result r[1];
    ag_error err = { 0 };
    ck_assert_int_eq(ag_gradcheck(NULL, build_lazy_softmax, NULL, &x, 1, &o, r, &err), AG_OK);
    ck_assert_uint_gt(r[0].failed, 0);
    ck_assert_double_eq(r[0].analytic, 0);
    gc_tensor_free(x);
}
END_TEST

// --- what it leaves behind ---

START_TEST(test_inputs_left_as_found)
{
    int s[2] = { 3, 2 };
    ag_tensor *in[2] = { gc_tensor_new(2, s, 6, -1, 1), gc_tensor_new(2, s, 7, -1, 1) };
    ag_real data[2][6], grad[2][6];
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 6; i++) in[k]->grad[i] = (ag_real)(0.25 * i - k);
        memcpy(data[k], in[k]->data, sizeof data[k]);
        memcpy(grad[k], in[k]->grad, sizeof grad[k]);
    }
    ag_ctx *ctx = ag_ctx_new();
    ag_ctx_set_grad(ctx, false);
    ag_gradcheck_result r[2];
    ag_error err = { 0 };
    bwd_bug bug = BWD_RIGHT;
    ck_assert_int_eq(ag_gradcheck(ctx, build_mul, &bug, in, 2, NULL, r, &err), AG_OK);
    ck_assert_uint_eq(ag_gradcheck_failed(r, 2), 0);
    for (int k = 0; k < 2; k++) {
        ck_assert_mem_eq(in[k]->data, data[k], sizeof data[k]);
        ck_assert_mem_eq(in[k]->grad, grad[k], sizeof grad[k]);
    }
    ck_assert(!ag_ctx_grad_enabled(ctx));                  /* the caller's ctx: mode restored */
    ck_assert_uint_eq(ag_ctx_get_stats(ctx).tape_nodes, 0); /* and left reset */
    ag_ctx_free(ctx);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

// --- what it refuses, and why ---

/* the learner's first try: inputs in the ctx the checker resets. Refused, not a crash. */
START_TEST(test_arena_input_refused)
{
    ag_ctx *ctx = ag_ctx_new();
    int s[2] = { 2, 3 };
    ag_tensor *in[2] = { ag_tensor_leaf(ctx, 2, s), gc_tensor_new(2, s, 8, -1, 1) };
    ag_gradcheck_result r[2];
    ag_error err = { 0 };
    bwd_bug bug = BWD_RIGHT;
    ck_assert(in[0]->in_arena && !in[1]->in_arena);
    ck_assert_int_eq(ag_gradcheck(ctx, build_mul, &bug, in, 2, NULL, r, &err), AG_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "input 0 lives in a ctx arena") && strstr(err.msg, "ag_tensor_new_owned"), "%s", err.msg);
    ag_tensor_free_owned(in[0]);                           /* an arena tensor: left alone */
    ag_ctx_free(ctx);
    gc_tensor_free(in[1]);
}
END_TEST

START_TEST(test_bad_inputs_refused)
{
    int s[1] = { 4 };
    ag_tensor *x = gc_tensor_new(1, s, 9, -1, 1);
    ag_tensor *twice[2] = { x, x };
    ag_gradcheck_result r[2];
    ag_error err = { 0 };
    bwd_bug bug = BWD_RIGHT;
    ck_assert_int_eq(ag_gradcheck(NULL, build_mul, &bug, twice, 2, NULL, r, &err), AG_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "input 1 is input 0 again"), "%s", err.msg);
    ag_error_clear(&err);
    ck_assert_int_eq(ag_gradcheck(NULL, build_mul, &bug, twice, 0, NULL, r, &err), AG_ERR_ARG);
    ag_error_clear(&err);
    ag_real *grad = x->grad;
    x->grad = NULL;
    ck_assert_int_eq(ag_gradcheck(NULL, build_mul, &bug, twice, 1, NULL, r, &err), AG_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "input 0 needs data and a grad buffer"), "%s", err.msg);
    x->grad = grad;
    ag_error_clear(&err);
    ag_gradcheck_opts o = ag_gradcheck_defaults("zero step");
    o.eps = 0;
    ck_assert_int_eq(ag_gradcheck(NULL, build_mul, &bug, twice, 1, &o, r, &err), AG_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "zero step: eps 0 must be > 0"), "%s", err.msg);
    gc_tensor_free(x);
}
END_TEST

/* the build's own error comes back with its status and message */
static ag_tensor *build_bad_matmul(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_matmul(ctx, in[0], in[1]);
}

START_TEST(test_build_error_passed_on)
{
    int sa[2] = { 2, 3 }, sb[2] = { 4, 5 };
    ag_tensor *in[2] = { gc_tensor_new(2, sa, 10, -1, 1), gc_tensor_new(2, sb, 11, -1, 1) };
    ag_gradcheck_result r[2];
    ag_error err = { 0 };
    ck_assert_int_eq(ag_gradcheck(NULL, build_bad_matmul, NULL, in, 2, NULL, r, &err), AG_ERR_SHAPE);
    ck_assert_msg(strstr(err.msg, "build failed (the first forward): ag_matmul"), "%s", err.msg);
    char msg[AG_GRADCHECK_MSG];
    gc_opts o = gc_defaults("bad matmul");
    ck_assert_int_eq(gc_check(&o, build_bad_matmul, in, 2, NULL, msg, sizeof msg), -1);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

// --- a frozen input: requires_grad false, so its analytic gradient is 0 ---

/* softmax over rows of x [R,N] plus c: along the rows (c [R] added to every element of its
 * row, as attention's keys' bias adds q . b_k to a row of scores), or along the columns (c [N]) */
static ag_tensor *build_shifted_softmax(ag_ctx *ctx, ag_tensor **in, void *user)
{
    bool per_row = *(const bool *)user;
    if (!per_row) return ag_softmax(ctx, ag_add(ctx, in[0], in[1]));              // [R,N]
    ag_tensor *xt = ag_transpose(ctx, in[0]);                                     // [N,R]
    return ag_softmax(ctx, ag_transpose(ctx, ag_add(ctx, xt, in[1])));            // [R,N]
}

START_TEST(test_frozen_input)
{
    int sx[2] = { 3, 5 }, sr[1] = { 3 }, sc[1] = { 5 };
    for (int per_row = 1; per_row >= 0; per_row--) {
        bool row = per_row;
        ag_tensor *in[2] = { gc_tensor_new(2, sx, 12, -1, 1), gc_tensor_new(1, row ? sr : sc, 13, -1, 1) };
        in[1]->requires_grad = false;   /* frozen: the backward leaves its gradient alone */
        ag_gradcheck_result r[2];
        ag_error err = { 0 };
        ag_gradcheck_opts o = ag_gradcheck_defaults(row ? "a shift of each row" : "a shift of each column");
        ck_assert_int_eq(ag_gradcheck(NULL, build_shifted_softmax, &row, in, 2, &o, r, &err), AG_OK);
        ck_assert_uint_eq(r[0].failed, 0);
        if (row) /* softmax forgets a constant added to its whole row: nothing lost by freezing */
            ck_assert_msg(r[1].failed == 0, "per-row shift: numeric %g", r[1].numeric);
        else /* a column shift changes the weights: the check says the frozen input had a gradient */
            ck_assert_msg(r[1].failed > 0 && r[1].analytic == 0 && fabs(r[1].numeric) > 1e-3,
                          "per-column shift: %zu failed, analytic %g, numeric %g", r[1].failed, r[1].analytic,
                          r[1].numeric);
        gc_tensor_free(in[0]);
        gc_tensor_free(in[1]);
    }
}
END_TEST

START_TEST(test_owned_tensor)
{
    int s[3] = { 2, 3, 4 }, bad[2] = { 2, 0 };
    ag_tensor *t = ag_tensor_new_owned(3, s);
    ck_assert_ptr_nonnull(t);
    ck_assert(t->requires_grad && !t->in_arena);
    ck_assert_uint_eq(ag_numel(t), 24);
    for (int i = 0; i < 24; i++) ck_assert(t->data[i] == 0 && t->grad[i] == 0);
    ag_tensor_free_owned(t);
    ck_assert_ptr_null(ag_tensor_new_owned(2, bad));
    ck_assert_ptr_null(ag_tensor_new_owned(AG_MAX_DIMS + 1, s));
    ag_tensor_free_owned(NULL);
}
END_TEST

Suite *gradcheck_suite(void)
{
    Suite *s = suite_create("gradcheck");
    TCase *t = tcase_create("catches");
    ADD_TESTS(t, test_right_backward_passes, test_wrong_factor_fails_its_own_input,
                 test_overwriting_backward_fails, test_missing_softmax_backward_fails,
                 test_failure_names_element_and_error, test_failure_names_the_failing_input,
                 test_frozen_input, test_worst_is_never_zero_against_zero);
    suite_add_tcase(s, t);
    t = tcase_create("contract");
    ADD_TESTS(t, test_inputs_left_as_found, test_arena_input_refused, test_bad_inputs_refused,
                 test_build_error_passed_on, test_owned_tensor, test_kernel_table_named);
    suite_add_tcase(s, t);
    return s;
}
