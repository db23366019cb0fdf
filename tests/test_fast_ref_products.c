/* test_fast_ref_products.c -- the fast kernels of the products and the add (fast/linear.c,
 * fast/matmul.c, fast/add.c) equal their reference kernels, and attention's fast twin
 * (fast/attention.c) equals its reference, the composed ops of src/nn/attention.c (see fastref.h).
 *
 * Random shapes with odd sizes and tails (1, 3, 17, 33, 65: not multiples of the 16 reduction
 * lanes or the 32-column blocks), then one shape per case past AG_PAR_MIN and big enough for
 * ag_gemm to split its rows, run with 3 threads so the threaded loops and the gemm pair (teams of
 * 2 and 1) run even on a one-core machine. The products also run on inputs at the scale of
 * real activations (ACTIVATION_RANGE), not only small ones. One TCase per op; each loops over
 * seeds. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include "fastref.h"

#define N_SEEDS 6

/* a dimension: mostly small and odd, sometimes 1, sometimes a lane multiple plus a tail */
static int pick_dim(uint64_t *st)
{
    static const int dims[] = { 1, 2, 3, 5, 7, 15, 16, 17, 31, 33, 47, 64, 65 };
    return dims[fr_rand_int(st, 0, (int)(sizeof dims / sizeof dims[0]) - 1)];
}

/* a batch dimension: small, so that a product of several stays quick */
static int pick_small(uint64_t *st)
{
    static const int dims[] = { 1, 2, 3, 5 };
    return dims[fr_rand_int(st, 0, 3)];
}

/* The inputs of linear and matmul. Their gradients sum up to a few hundred products of the
 * normal upstream gradient with an input, and OpenBLAS's result for one element depends a
 * little on how the rows are split among threads (here: a gemm pair's teams against ag_gemm's
 * row blocks): in float, about 1e-6 of the sum's size. Inputs in [-0.1, 0.1] keep these sums
 * near 1, where FR_ATOL is the right absolute slack; a real bug is off by the sum's own size.
 * ACTIVATION_RANGE is the scale of real activations and logits (order 1 to 10): sums in the
 * hundreds, where the slack that counts is FR_RTOL times the tensor's largest value. */
#define PRODUCT_RANGE 0.1
#define ACTIVATION_RANGE 8.0

/* runs the big, threaded cases with 3 threads, then gives the old count back (CK_FORK=no) */
#define WITH_3_THREADS(body)                     \
    do {                                         \
        int old_threads_ = omp_get_max_threads(); \
        omp_set_num_threads(3);                  \
        body;                                    \
        omp_set_num_threads(old_threads_);       \
    } while (0)

// --- linear (fast/linear.c) ---

static ag_tensor *build_linear(ag_ctx *ctx, ag_tensor **in, void *user)
{
    bool with_bias = *(bool *)user;
    return ag_linear(ctx, in[0], in[1], with_bias ? in[2] : NULL);
}

/* x [d0, d1, Fin] (or [d1, Fin]), W [Fout, Fin], b [Fout], all uniform in [-r, r) (b at most
 * [-1, 1)); x_grad/W_grad false: that input takes no gradient, so the backward runs one product
 * alone instead of the pair */
static void check_linear_at(uint64_t *st, double r, int d0, int d1, int Fin, int Fout, bool with_bias, bool x_grad,
                            bool W_grad)
{
    double rb = r < 1 ? 1 : r;
    fr_input in[3] = {
        d0 ? (fr_input){ 3, { d0, d1, Fin }, -r, r, !x_grad } : (fr_input){ 2, { d1, Fin }, -r, r, !x_grad },
        { 2, { Fout, Fin }, -r, r, !W_grad },
        { 1, { Fout }, -rb, rb, false },
    };
    char what[128];
    snprintf(what, sizeof what, "linear x [%d,%d,%d] W [%d,%d]%s%s%s, inputs within %g", d0, d1, Fin, Fout, Fin,
             with_bias ? " +b" : "", x_grad ? "" : " (no dx)", W_grad ? "" : " (no dW)", r);
    FR_ASSERT(what, build_linear, in, with_bias ? 3 : 2, &with_bias, (*st)++);
}

static void check_linear(uint64_t *st, int d0, int d1, int Fin, int Fout, bool with_bias, bool x_grad, bool W_grad)
{
    check_linear_at(st, PRODUCT_RANGE, d0, d1, Fin, Fout, with_bias, x_grad, W_grad);
}

static void linear_cases(uint64_t st, bool with_bias)
{
    check_linear(&st, pick_small(&st), pick_dim(&st), pick_dim(&st), pick_dim(&st), with_bias, true, true);
    check_linear(&st, 0, pick_dim(&st), pick_dim(&st), pick_dim(&st), with_bias, true, true);
    check_linear(&st, 0, pick_dim(&st), pick_dim(&st), pick_dim(&st), with_bias, false, true);
    check_linear(&st, 0, pick_dim(&st), pick_dim(&st), pick_dim(&st), with_bias, true, false);
    /* 130 rows x 129 outputs past AG_PAR_MIN; 1.1M multiply-adds per product: the gemm pair */
    WITH_3_THREADS(check_linear(&st, 2, 65, 65, 129, with_bias, true, true));
    WITH_3_THREADS(check_linear(&st, 2, 65, 65, 129, with_bias, false, true));
    /* at the scale of real activations, alone and threaded */
    const double a = ACTIVATION_RANGE;
    check_linear_at(&st, a, pick_small(&st), pick_dim(&st), pick_dim(&st), pick_dim(&st), with_bias, true, true);
    WITH_3_THREADS(check_linear_at(&st, a, 2, 65, 65, 129, with_bias, true, true));
}

START_TEST(test_linear_bias) { linear_cases(2000 + 100 * (uint64_t)_i, true); }
END_TEST
START_TEST(test_linear_no_bias) { linear_cases(3000 + 100 * (uint64_t)_i, false); }
END_TEST

// --- matmul (fast/matmul.c) ---

static ag_tensor *build_matmul(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_matmul(ctx, in[0], in[1]);
}

/* A [b0, b1, M, K] @ B [b0, b1, K, N] (b0 = 0: one batch dim), or @ B [K, N] shared; inputs
 * uniform in [-r, r) */
static void check_matmul_at(uint64_t *st, double r, int b0, int b1, int M, int K, int N, bool shared_b)
{
    fr_input in[2];
    if (b0) in[0] = (fr_input){ 4, { b0, b1, M, K }, -r, r, false };
    else in[0] = (fr_input){ 3, { b1, M, K }, -r, r, false };
    if (shared_b) in[1] = (fr_input){ 2, { K, N }, -r, r, false };
    else if (b0) in[1] = (fr_input){ 4, { b0, b1, K, N }, -r, r, false };
    else in[1] = (fr_input){ 3, { b1, K, N }, -r, r, false };
    char what[128];
    snprintf(what, sizeof what, "matmul [%d,%d,%d,%d] @ %s[%d,%d], inputs within %g", b0, b1, M, K,
             shared_b ? "shared " : "", K, N, r);
    FR_ASSERT(what, build_matmul, in, 2, NULL, (*st)++);
}

static void check_matmul(uint64_t *st, int b0, int b1, int M, int K, int N, bool shared_b)
{
    check_matmul_at(st, PRODUCT_RANGE, b0, b1, M, K, N, shared_b);
}

static void matmul_cases(uint64_t st, bool shared_b)
{
    check_matmul(&st, 0, pick_small(&st), pick_dim(&st), pick_dim(&st), pick_dim(&st), shared_b);
    check_matmul(&st, pick_small(&st), pick_small(&st), pick_dim(&st), pick_dim(&st), pick_dim(&st), shared_b);
    /* 4 x 65 x 65 outputs past AG_PAR_MIN; 260 x 65 x 33 = 560k multiply-adds: split rows */
    WITH_3_THREADS(check_matmul(&st, 0, 4, 65, 33, 65, shared_b));
    /* at the scale of real activations (attention scores, logits), alone and threaded */
    const double a = ACTIVATION_RANGE;
    check_matmul_at(&st, a, pick_small(&st), pick_small(&st), pick_dim(&st), pick_dim(&st), pick_dim(&st), shared_b);
    WITH_3_THREADS(check_matmul_at(&st, a, 0, 4, 65, 33, 65, shared_b));
}

START_TEST(test_matmul_batched) { matmul_cases(4000 + 100 * (uint64_t)_i, false); }
END_TEST
START_TEST(test_matmul_shared_b) { matmul_cases(5000 + 100 * (uint64_t)_i, true); }
END_TEST

/* plain 2-D @ 2-D, and a 2-D A against one 2-D B (the "shared" forward path with batch 1) */
START_TEST(test_matmul_2d)
{
    uint64_t st = 6000 + 100 * (uint64_t)_i;
    const double r = PRODUCT_RANGE;
    fr_input in[2] = { { 2, { pick_dim(&st), 33 }, -r, r, false }, { 2, { 33, pick_dim(&st) }, -r, r, false } };
    FR_ASSERT("matmul 2-D", build_matmul, in, 2, NULL, st);
}
END_TEST

// --- attention (fast/attention.c against the composed ops of src/nn/attention.c) ---

typedef struct {
    int H;
    bool causal;
    bool self; /* q = k = v = in[0]: one tensor gets all three gradients */
} attn_args;

/* ag_attention takes its fast twin in a default ctx (ag_causal_mask's kind, or no mask) and the
 * composed ops in the reference one */
static ag_tensor *build_attention(ag_ctx *ctx, ag_tensor **in, void *user)
{
    const attn_args *a = user;
    int T = in[0]->shape[1], D = in[0]->shape[2] / a->H;
    ag_tensor *k = a->self ? in[0] : in[1], *v = a->self ? in[0] : in[2];
    ag_tensor *mask = a->causal ? ag_causal_mask(ctx, T) : NULL;                   // [T,T]
    return ag_attention(ctx, in[0], k, v, a->H, (ag_real)(1 / sqrt((double)D)), mask); // [B,T,C]
}

/* frozen: a bit per input (1 q, 2 k, 4 v) that takes no gradient, so the backward computes the
 * others alone (dq without dk, dk without dq, ...) */
static void check_attention(uint64_t *st, int B, int T, int H, int D, bool causal, bool self, int frozen)
{
    fr_input x = { 3, { B, T, H * D }, -1, 1, false };
    fr_input in[3] = { x, x, x };
    for (int i = 0; i < 3; i++) in[i].no_grad = frozen >> i & 1;
    attn_args a = { H, causal, self };
    char what[96];
    snprintf(what, sizeof what, "attention [%d,%d,%d] H=%d%s%s%s%s%s", B, T, H * D, H, causal ? " causal" : "",
             self ? " q=k=v" : "", frozen & 1 ? " (no dq)" : "", frozen & 2 ? " (no dk)" : "", frozen & 4 ? " (no dv)" : "");
    FR_ASSERT(what, build_attention, in, self ? 1 : 3, &a, (*st)++);
}

static void attention_cases(uint64_t st, bool causal)
{
    static const int heads[] = { 1, 2, 3, 4 }, head_dims[] = { 1, 3, 5, 8, 17 };
    for (int c = 0; c < 3; c++)
        check_attention(&st, pick_small(&st), pick_dim(&st), heads[fr_rand_int(&st, 0, 3)],
                        head_dims[fr_rand_int(&st, 0, 4)], causal, c == 2, 0);
    /* some inputs without a gradient: no dq, no dk, only dv (a frozen input is a constant) */
    for (int frozen = 1; frozen <= 3; frozen++)
        check_attention(&st, pick_small(&st), pick_dim(&st), 2, 3, causal, false, frozen);
    /* the edges: one position (T = 1: each query's one weight is 1), one head (D = C) */
    check_attention(&st, pick_small(&st), 1, heads[fr_rand_int(&st, 0, 3)], head_dims[fr_rand_int(&st, 0, 4)],
                    causal, false, 0);
    check_attention(&st, pick_small(&st), pick_dim(&st), 1, head_dims[fr_rand_int(&st, 0, 4)], causal, false, 0);
    check_attention(&st, 1, 1, 1, 1, causal, true, 0);
    /* B H T T = 2 x 3 x 65 x 65 past AG_PAR_MIN: (b, h) pairs on threads */
    WITH_3_THREADS(check_attention(&st, 2, 65, 3, 5, causal, false, 0));
    WITH_3_THREADS(check_attention(&st, 2, 65, 3, 5, causal, true, 0));
}

START_TEST(test_attention_causal) { attention_cases(7000 + 100 * (uint64_t)_i, true); }
END_TEST
START_TEST(test_attention_unmasked) { attention_cases(8000 + 100 * (uint64_t)_i, false); }
END_TEST

// --- add (fast/add.c) ---

static ag_tensor *build_add(ag_ctx *ctx, ag_tensor **in, void *user)
{
    bool self = user && *(bool *)user; /* a + a: both gradients land in one buffer */
    return ag_add(ctx, in[0], self ? in[0] : in[1]);
}

/* a [d0, d1, d2] + b of its last b_ndim dims (3: the same shape), inputs uniform in [-r, r) */
static void check_add_at(uint64_t *st, double r, int d0, int d1, int d2, int b_ndim)
{
    fr_input in[2] = { { 3, { d0, d1, d2 }, -r, r, false }, { b_ndim, { 0 }, -r, r, false } };
    int a_shape[3] = { d0, d1, d2 };
    for (int i = 0; i < b_ndim; i++) in[1].shape[i] = a_shape[3 - b_ndim + i];
    char what[96];
    snprintf(what, sizeof what, "add [%d,%d,%d] + last %d dims, inputs within %g", d0, d1, d2, b_ndim, r);
    FR_ASSERT(what, build_add, in, 2, NULL, (*st)++);
}

static void check_add(uint64_t *st, int d0, int d1, int d2, int b_ndim) { check_add_at(st, 1, d0, d1, d2, b_ndim); }

START_TEST(test_add_same_shape)
{
    uint64_t st = 9000 + 100 * (uint64_t)_i;
    check_add(&st, pick_small(&st), pick_dim(&st), pick_dim(&st), 3);
    WITH_3_THREADS(check_add(&st, 2, 65, 129, 3)); /* 16770 elements: past AG_PAR_MIN */
    fr_input a = { 2, { pick_dim(&st), pick_dim(&st) }, -1, 1, false };
    bool self = true;
    FR_ASSERT("add a + a", build_add, &a, 1, &self, st);
}
END_TEST

START_TEST(test_add_broadcast)
{
    uint64_t st = 10000 + 100 * (uint64_t)_i;
    check_add(&st, pick_small(&st), pick_dim(&st), pick_dim(&st), 1);   /* a bias [C] */
    check_add(&st, pick_small(&st), pick_dim(&st), pick_dim(&st), 2);   /* positions [T,C] */
    WITH_3_THREADS(check_add(&st, 2, 65, 129, 1));
    WITH_3_THREADS(check_add(&st, 2, 65, 129, 2));
    /* a bias over activations at their real scale: the sum over rows of a big dy */
    WITH_3_THREADS(check_add_at(&st, ACTIVATION_RANGE, 2, 65, 129, 1));
}
END_TEST

Suite *fast_ref_products_suite(void)
{
    Suite *s = suite_create("fast_ref_products");
    TCase *linear = tcase_create("linear");
    tcase_set_tags(linear, "linear");
    tcase_add_loop_test(linear, test_linear_bias, 0, N_SEEDS);
    tcase_add_loop_test(linear, test_linear_no_bias, 0, N_SEEDS);
    suite_add_tcase(s, linear);
    TCase *matmul = tcase_create("matmul");
    tcase_set_tags(matmul, "matmul");
    tcase_add_loop_test(matmul, test_matmul_batched, 0, N_SEEDS);
    tcase_add_loop_test(matmul, test_matmul_shared_b, 0, N_SEEDS);
    tcase_add_loop_test(matmul, test_matmul_2d, 0, N_SEEDS);
    suite_add_tcase(s, matmul);
    TCase *attention = tcase_create("attention");
    tcase_set_tags(attention, "attention");
    tcase_add_loop_test(attention, test_attention_causal, 0, N_SEEDS);
    tcase_add_loop_test(attention, test_attention_unmasked, 0, N_SEEDS);
    suite_add_tcase(s, attention);
    TCase *add = tcase_create("add");
    tcase_set_tags(add, "add");
    tcase_add_loop_test(add, test_add_same_shape, 0, N_SEEDS);
    tcase_add_loop_test(add, test_add_broadcast, 0, N_SEEDS);
    suite_add_tcase(s, add);
    return s;
}
