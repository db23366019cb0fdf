/* test_swiglu.c -- the two ops SwiGLU adds (elementwise mul, SiLU: known values, the tails,
 * errors, gradient checks) and the SwiGLU layer composed from them (parameter names, shapes,
 * decay and init; the forward against a hand computation; the scope on the tape; a gradient
 * check with respect to x and all six parameters).
 * Sizes are distinct (B=2, T=3, C=8, hidden=12) so a transposed weight or a swapped branch
 * fails. */
#include <check.h>
#include <math.h>
#include <string.h>
#include "gradcheck.h"
#include "tcases.h"

enum { B = 2, T = 3, C = 8, HID = 12 };

static ag_tensor *build_mul(ag_ctx *ctx, ag_tensor **in, void *user) { (void)user; return ag_mul(ctx, in[0], in[1]); }
static ag_tensor *build_square(ag_ctx *ctx, ag_tensor **in, void *user) { (void)user; return ag_mul(ctx, in[0], in[0]); }
static ag_tensor *build_silu(ag_ctx *ctx, ag_tensor **in, void *user) { (void)user; return ag_silu(ctx, in[0]); }

// --- mul ---

START_TEST(test_mul_forward_and_error)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *a = ag_tensor_new2(ctx, 2, 3), *b = ag_tensor_new2(ctx, 2, 3);
    for (int i = 0; i < 6; i++) {
        a->data[i] = (ag_real)(i - 2);
        b->data[i] = (ag_real)(0.5 * i);
    }
    ag_tensor *y = ag_mul(ctx, a, b);                               // [2,3]
    const ag_real want[6] = { -0, -0.5, 0, 1.5, 4, 7.5 };
    for (int i = 0; i < 6; i++) ck_assert_double_eq(y->data[i], want[i]);
    ag_tensor *bad = ag_tensor_new2(ctx, 3, 2);                     /* same numel, other shape */
    ck_assert_ptr_null(ag_mul(ctx, a, bad));
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "ag_mul: shapes differ: [2,3] * [3,2]"));
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_mul_grad)
{
    int s[3] = { 2, 3, 4 };
    ag_tensor *in[2] = { gc_tensor_new(3, s, 71, -2, 2), gc_tensor_new(3, s, 72, -2, 2) };
    gc_opts o = gc_defaults("mul");
    o.max_elems = 0;
    GC_ASSERT(&o, build_mul, in, 2, NULL);
    o.name = "mul x*x"; /* both inputs are one tensor: the two terms must add up to 2 x dy */
    GC_ASSERT(&o, build_square, in, 1, NULL);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

// --- silu ---

START_TEST(test_silu_forward_known_values)
{
    /* x / (1 + exp(-x)), PyTorch F.silu */
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new1(ctx, 4);
    const ag_real xs[4] = { 0, 1, -2, 3.5 };
    const double want[4] = { 0, 0.731058578630, -0.238405844044, 3.397407192370 };
    memcpy(x->data, xs, sizeof xs);
    ag_tensor *y = ag_silu(ctx, x);
    ck_assert(y->data[0] == 0);
    for (int i = 1; i < 4; i++) ck_assert_double_eq_tol(y->data[i], want[i], 1e-6);
    ag_ctx_free(ctx);
}
END_TEST

/* The tails: silu(x) -> x for large x and -> 0 for very negative x, with no overflow to
 * inf/inf = NaN, in the forward and in the backward. */
START_TEST(test_silu_tails)
{
    ag_ctx *ctx = ag_ctx_new();
    int s[1] = { 6 };
    ag_tensor *x = ag_tensor_leaf(ctx, 1, s);
    const ag_real xs[6] = { 30, -30, 100, -100, 1000, -1000 };
    memcpy(x->data, xs, sizeof xs);
    ag_tensor *y = ag_silu(ctx, x);
    for (int i = 0; i < 6; i++) ck_assert_msg(isfinite(y->data[i]), "silu(%g) = %g", (double)xs[i], (double)y->data[i]);
    ck_assert_double_eq_tol(y->data[0], 30, 1e-5);
    ck_assert_double_eq_tol(y->data[2], 100, 1e-5);
    ck_assert_double_eq(y->data[4], 1000);
    ck_assert_double_eq_tol(y->data[1], 0, 1e-10);                  /* -30 e^-30 ~ -3e-12 */
    ck_assert_double_eq_tol(y->data[3], 0, 1e-30);
    ck_assert_double_eq_tol(y->data[5], 0, 1e-30);
    const ag_real ones[6] = { 1, 1, 1, 1, 1, 1 };
    ck_assert_int_eq(ag_backward_from(ctx, y, ones), AG_OK);
    for (int i = 0; i < 6; i++) {
        ck_assert_msg(isfinite(x->grad[i]), "dsilu(%g) = %g", (double)xs[i], (double)x->grad[i]);
        ck_assert_double_eq_tol(x->grad[i], (xs[i] > 0 ? 1.0 : 0.0), 1e-6); /* slope 1 right, 0 left */
    }
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_silu_grad)
{
    int s[2] = { 5, 7 };
    ag_tensor *in[1] = { gc_tensor_new(2, s, 73, -5, 5) };
    gc_opts o = gc_defaults("silu");
    o.max_elems = 0;
    GC_ASSERT(&o, build_silu, in, 1, NULL);
    gc_tensor_free(in[0]);
}
END_TEST

// --- the SwiGLU layer ---

static ag_params *P;
static ag_swiglu S;

static void swiglu_setup(void)
{
    P = ag_params_new();
    ck_assert_int_eq(ag_swiglu_init(&S, P, "blocks.0.mlp", C, HID, 0.02, 0.01), AG_OK);
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    ag_params_init(P, 17);
    /* O(1) values: at std 0.02 the layer is nearly linear and a wrong gradient could hide */
    ag_rng r;
    ag_rng_seed(&r, 18);
    for (size_t i = 0; i < P->total; i++) P->data[i] = (ag_real)(ag_rng_uniform(&r) - 0.5);
}

static void swiglu_teardown(void) { ag_params_free(P); }

static ag_tensor *build_swiglu(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_swiglu_forward(ctx, &S, in[0]);
}

START_TEST(test_swiglu_params)
{
    const struct { const char *name; int ndim, d0, d1; bool decay; double std; } want[6] = {
        { "blocks.0.mlp.w_gate.weight", 2, HID, C, true, 0.02 },
        { "blocks.0.mlp.w_gate.bias", 1, HID, 0, false, 0 },
        { "blocks.0.mlp.w_up.weight", 2, HID, C, true, 0.02 },
        { "blocks.0.mlp.w_up.bias", 1, HID, 0, false, 0 },
        { "blocks.0.mlp.w_down.weight", 2, C, HID, true, 0.01 }, /* the residual std */
        { "blocks.0.mlp.w_down.bias", 1, C, 0, false, 0 },
    };
    ck_assert_int_eq(P->n, 6);
    for (int i = 0; i < 6; i++) {
        const ag_param_entry *e = &P->entries[i];
        ck_assert_str_eq(e->t->name, want[i].name);
        ck_assert_int_eq(e->t->ndim, want[i].ndim);
        ck_assert_int_eq(e->t->shape[0], want[i].d0);
        if (want[i].ndim == 2) ck_assert_int_eq(e->t->shape[1], want[i].d1);
        ck_assert_msg(e->decay == want[i].decay, "%s: decay %d", want[i].name, e->decay);
        ck_assert_int_eq(e->init, want[i].ndim == 2 ? AG_INIT_NORMAL : AG_INIT_ZEROS);
        if (want[i].ndim == 2) ck_assert_double_eq(e->init_std, want[i].std);
    }
    ck_assert_int_eq(S.C, C);
    ck_assert_int_eq(S.hidden, HID);
    ck_assert_str_eq(S.scope, "blocks.0.mlp");
    ag_params *Q = ag_params_new();
    ag_swiglu bad;
    ck_assert_int_eq(ag_swiglu_init(&bad, Q, "m", C, 0, 0.02, 0.02), AG_ERR_ARG);
    ck_assert_int_eq(ag_swiglu_init(&bad, Q, "m", 0, HID, 0.02, 0.02), AG_ERR_ARG);
    ck_assert_int_eq(ag_swiglu_init(&bad, Q, "m", C, HID, 0.02, 0.02), AG_OK);
    ck_assert_int_eq(ag_swiglu_init(&bad, Q, "m", C, HID, 0.02, 0.02), AG_ERR_ARG); /* duplicate */
    ag_params_free(Q);
}
END_TEST

static double dot_row(const ag_tensor *W, const ag_tensor *b, int o, const double *x, int n)
{
    double s = b->data[o];
    for (int i = 0; i < n; i++) s += W->data[o * n + i] * x[i];
    return s;
}

/* y = w_down(silu(w_gate x) * w_up x), position by position, in double */
START_TEST(test_swiglu_forward_by_hand)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new3(ctx, B, T, C);
    for (int i = 0; i < B * T * C; i++) x->data[i] = (ag_real)sin(0.7 * i + 0.1);
    ag_tensor *y = ag_swiglu_forward(ctx, &S, x);                   // [B,T,C]
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(y->ndim, 3);
    ck_assert_int_eq(y->shape[2], C);
    for (int p = 0; p < B * T; p++) {
        double xp[C], h[HID];
        for (int c = 0; c < C; c++) xp[c] = x->data[p * C + c];
        for (int j = 0; j < HID; j++) {
            double g = dot_row(S.w_gate.W, S.w_gate.b, j, xp, C), u = dot_row(S.w_up.W, S.w_up.b, j, xp, C);
            h[j] = g / (1 + exp(-g)) * u;
        }
        for (int c = 0; c < C; c++)
            ck_assert_double_eq_tol(y->data[p * C + c], dot_row(S.w_down.W, S.w_down.b, c, h, HID), 1e-5);
    }
    ag_ctx_free(ctx);
}
END_TEST

static void count_scope(const ag_node *n, void *user)
{
    int *counts = user;
    counts[n->scope && strcmp(n->scope, "blocks.0.mlp") == 0 ? 0 : 1]++;
}

START_TEST(test_swiglu_scope_on_tape)
{
    ag_ctx *ctx = ag_ctx_new();
    int s[3] = { B, T, C };
    ag_tensor *x = ag_tensor_leaf(ctx, 3, s);
    ag_ctx_set_scope(ctx, "outer");
    ck_assert_ptr_nonnull(ag_swiglu_forward(ctx, &S, x));
    ck_assert_str_eq(ag_ctx_scope(ctx), "outer");                   /* restored */
    int counts[2] = { 0, 0 };
    ag_tape_foreach(ctx, count_scope, counts);
    ck_assert_int_eq(counts[0], 5); /* w_gate, silu, w_up, mul, w_down */
    ck_assert_int_eq(counts[1], 0);
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_swiglu_grad)
{
    int sx[3] = { B, T, C };
    ag_tensor *in[7];
    in[0] = gc_tensor_new(3, sx, 74, -1.5, 1.5);
    for (int e = 0; e < P->n; e++) in[1 + e] = P->entries[e].t; /* every weight and bias */
    gc_opts o = gc_defaults("swiglu layer");
    o.max_elems = 0;
    GC_ASSERT(&o, build_swiglu, in, 7, NULL);
    gc_tensor_free(in[0]);
}
END_TEST

Suite *swiglu_suite(void)
{
    Suite *s = suite_create("swiglu");
    TCase *f = tcase_create("forward");
    tcase_set_tags(f, "mul silu");
    ADD_TESTS(f, test_mul_forward_and_error, test_silu_forward_known_values, test_silu_tails);
    suite_add_tcase(s, f);
    TCase *g = tcase_create("grad");
    tcase_set_tags(g, "mul silu");
    ADD_TESTS(g, test_mul_grad, test_silu_grad);
    suite_add_tcase(s, g);
    TCase *l = tcase_create("layer");
    tcase_add_checked_fixture(l, swiglu_setup, swiglu_teardown);
    ADD_TESTS(l, test_swiglu_params, test_swiglu_forward_by_hand, test_swiglu_scope_on_tape,
                 test_swiglu_grad);
    tcase_set_timeout(l, 600);
    suite_add_tcase(s, l);
    return s;
}
