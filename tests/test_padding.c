/* test_padding.c -- a batch of sequences of different lengths, padded to one T: masks that
 * broadcast in ag_masked_fill, ag_key_padding_mask, cross-entropy that ignores padded targets,
 * the attention layer with a key-padding mask (padded keys get zero weight; a query left with
 * no key gets zeros and zero gradient under -inf, uniform weights under -1e9), and the classic
 * 3-token example that examples/attention_demo prints, recomputed here by hand.
 *
 * Distinct sizes (B=2, H=3, T=4, ...) so a mask read along the wrong dim fails. */
#include <check.h>
#include <math.h>
#include <string.h>
#include "gradcheck.h"
#include "tcases.h"

#ifdef AG_DOUBLE
#define TOL 1e-12
#else
#define TOL 1e-5
#endif

/* a 0/1 pattern with zeros in no simple stride: element i is 0 when i % 3 == 1 */
static void fill_pattern(ag_tensor *m)
{
    for (size_t i = 0; i < ag_numel(m); i++) m->data[i] = i % 3 == 1 ? 0 : 1;
}

/* x's element (a,b,c,d) reads mask element (a % m0, b % m1, c % m2, d % m3), the mask padded on
 * the left to 4 dims: a size-1 dim always reads index 0. Computed apart from masked_fill.c. */
static ag_real expected_fill(const ag_tensor *x, const ag_tensor *mask, size_t i, ag_real value)
{
    int xs[4] = { 1, 1, 1, 1 }, msz[4] = { 1, 1, 1, 1 }, at[4];
    for (int d = 0; d < x->ndim; d++) xs[4 - x->ndim + d] = x->shape[d];
    for (int d = 0; d < mask->ndim; d++) msz[4 - mask->ndim + d] = mask->shape[d];
    size_t rest = i;
    for (int d = 3; d >= 0; d--) {
        at[d] = (int)(rest % (size_t)xs[d]);
        rest /= (size_t)xs[d];
    }
    size_t mi = 0;
    for (int d = 0; d < 4; d++) mi = mi * (size_t)msz[d] + (size_t)(at[d] % msz[d]);
    return mask->data[mi] != 0 ? x->data[i] : value;
}

// --- masked_fill broadcasts ---

START_TEST(test_masked_fill_broadcasts)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new4(ctx, 2, 3, 4, 5);                 // [2,3,4,5]
    for (size_t i = 0; i < ag_numel(x); i++) x->data[i] = (ag_real)sin(0.3 * (double)i);
    const int shapes[][5] = { /* ndim, dims */
        { 1, 5 }, { 2, 4, 5 }, { 4, 1, 1, 4, 5 }, { 4, 2, 1, 1, 5 }, { 4, 2, 1, 4, 5 }, { 4, 1, 3, 1, 5 },
        { 4, 2, 1, 4, 1 }, { 3, 3, 4, 5 }, { 4, 2, 3, 4, 5 }, { 1, 1 },
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        ag_tensor *mask = ag_tensor_new(ctx, shapes[k][0], &shapes[k][1]);
        fill_pattern(mask);
        ag_tensor *y = ag_masked_fill(ctx, x, mask, -7);
        ck_assert_ptr_nonnull(y);
        ck_assert(ag_same_shape(x, y));
        for (size_t i = 0; i < ag_numel(x); i++)
            ck_assert_msg(y->data[i] == expected_fill(x, mask, i, -7), "mask %zu, element %zu", k, i);
    }
    /* masks that cannot broadcast: a dim neither x's nor 1, or more dims than x */
    const int bad[][5] = { { 2, 3, 5 }, { 3, 2, 4, 5 }, { 4, 3, 3, 4, 5 }, { 1, 4 } };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ag_ctx *c2 = ag_ctx_new();
        ag_tensor *x2 = ag_tensor_new4(c2, 2, 3, 4, 5);
        ag_tensor *mask = ag_tensor_new(c2, bad[k][0], &bad[k][1]);
        ck_assert_ptr_null(ag_masked_fill(c2, x2, mask, 0));
        ck_assert_int_eq(ag_ctx_status(c2), AG_ERR_SHAPE);
        ck_assert_msg(strstr(ag_ctx_error(c2), "cannot broadcast to x [2,3,4,5]"), "%s", ag_ctx_error(c2));
        ag_ctx_free(c2);
    }
    ag_tensor *small = ag_tensor_new2(ctx, 4, 5);
    ck_assert_ptr_null(ag_masked_fill(ctx, small, x, 0)); /* more dims than x */
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "ag_masked_fill: mask [2,3,4,5] cannot broadcast to x [4,5]"));
    ag_ctx_free(ctx);
}
END_TEST

/* masked_fill of in[0] [2,3,4,4] with a mask of the shape in user; a finite fill, since -inf
 * would make sum(out * R) infinite */
static ag_tensor *build_masked_fill(ag_ctx *ctx, ag_tensor **in, void *user)
{
    const int *s = user; /* ndim, dims */
    ag_tensor *mask = ag_tensor_new(ctx, s[0], &s[1]);
    if (!mask) return NULL;
    fill_pattern(mask);
    return ag_masked_fill(ctx, in[0], mask, 0.25);
}

START_TEST(test_masked_fill_broadcast_grad)
{
    int sx[4] = { 2, 3, 4, 4 }; /* scores [B,H,T,T] */
    ag_tensor *x = gc_tensor_new(4, sx, 41, -1, 1);
    int causal[] = { 2, 4, 4 }, key_padding[] = { 4, 2, 1, 1, 4 }, both[] = { 4, 2, 1, 4, 4 }, per_head[] = { 3, 3, 1, 4 };
    int *masks[] = { causal, key_padding, both, per_head };
    gc_opts o = gc_defaults("masked_fill (broadcast mask)");
    o.max_elems = 0;
    for (int k = 0; k < 4; k++) GC_ASSERT(&o, build_masked_fill, &x, 1, masks[k]);
    gc_tensor_free(x);
}
END_TEST

START_TEST(test_key_padding_mask)
{
    ag_ctx *ctx = ag_ctx_new();
    enum { B = 2, T = 4 };
    ag_tensor *kp = ag_tensor_new2(ctx, B, T);                      // [B,T]
    const ag_real lens[B * T] = { 1, 1, 1, 1, 1, 1, 0, 0 };         /* lengths 4 and 2 */
    memcpy(kp->data, lens, sizeof lens);
    ag_tensor *m = ag_key_padding_mask(ctx, kp, ag_causal_mask(ctx, T)); // [B,1,T,T]
    ag_tensor *u = ag_key_padding_mask(ctx, kp, NULL);              // [B,1,T,T]
    ck_assert_ptr_nonnull(u);
    ck_assert_int_eq(m->ndim, 4);
    ck_assert_int_eq(m->shape[0], B);
    ck_assert_int_eq(m->shape[1], 1);
    ck_assert_int_eq(m->shape[2], T);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                bool real = b == 0 || j < 2;
                ck_assert(m->data[(b * T + i) * T + j] == (real && j <= i));
                ck_assert(u->data[(b * T + i) * T + j] == real);
            }
    ck_assert_ptr_null(ag_key_padding_mask(ctx, kp, ag_tensor_new2(ctx, 3, 3)));
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "key_padding [2,4], mask [3,3]"));
    ag_ctx_free(ctx);
}
END_TEST

// --- cross-entropy with an ignore index ---

START_TEST(test_cross_entropy_ignore_forward)
{
    ag_ctx *ctx = ag_ctx_new();
    int s[2] = { 3, 3 };
    ag_tensor *z = ag_tensor_leaf(ctx, 2, s);                       // [3,3]
    const ag_real zv[9] = { 0, 0, 0, 1, 2, 3, 0, 0, (ag_real)log(2.0) };
    memcpy(z->data, zv, sizeof zv);
    const int t[3] = { 1, -100, 2 };                                /* row 1 is padding */
    ag_tensor *L = ag_cross_entropy_ignore(ctx, z, t, -100);
    ck_assert_ptr_nonnull(L);
    /* row 0: -log(1/3); row 2: softmax (1/4, 1/4, 1/2), -log(1/2); the mean over the two rows */
    ck_assert_double_eq_tol(L->data[0], (log(3.0) + log(2.0)) / 2, TOL);
    ck_assert_int_eq(ag_backward(ctx, L), AG_OK);
    /* (p - onehot) / 2 on the two rows, exactly 0 on the ignored one */
    const double dz[9] = { 1.0 / 6, -1.0 / 3, 1.0 / 6, 0, 0, 0, 1.0 / 8, 1.0 / 8, -1.0 / 4 };
    for (int i = 0; i < 9; i++) ck_assert_double_eq_tol(z->grad[i], dz[i], TOL);
    for (int i = 3; i < 6; i++) ck_assert(z->grad[i] == 0);
    /* nothing ignored: the plain mean, as ag_cross_entropy */
    const int all[3] = { 1, 0, 2 };
    ag_real with = ag_cross_entropy_ignore(ctx, z, all, -100)->data[0], plain = ag_cross_entropy(ctx, z, all)->data[0];
    ck_assert(with == plain);
    /* an ignore index inside [0, V), a padding token id: rows with target 0 are left out */
    ck_assert_double_eq_tol(ag_cross_entropy_ignore(ctx, z, all, 0)->data[0], (log(3.0) + log(2.0)) / 2, TOL);
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_cross_entropy_all_ignored_and_errors)
{
    ag_ctx *ctx = ag_ctx_new();
    int s[2] = { 2, 4 };
    ag_tensor *z = ag_tensor_leaf(ctx, 2, s);                       // [2,4]
    for (int i = 0; i < 8; i++) z->data[i] = (ag_real)i;
    const int none[2] = { -1, -1 };
    ag_tensor *L = ag_cross_entropy_ignore(ctx, z, none, -1);
    ck_assert(L->data[0] == 0); /* PyTorch: 0/0 = nan */
    ck_assert_int_eq(ag_backward(ctx, L), AG_OK);
    for (int i = 0; i < 8; i++) ck_assert(z->grad[i] == 0);
    /* ag_cross_entropy ignores nothing: -1 is out of range there */
    ck_assert_ptr_null(ag_cross_entropy(ctx, z, none));
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "ag_cross_entropy: target -1 at row 0 is outside [0, 4)"));
    ag_ctx_free(ctx);
    ctx = ag_ctx_new();
    z = ag_tensor_new2(ctx, 2, 4);
    const int bad[2] = { -100, 4 };
    ck_assert_ptr_null(ag_cross_entropy_ignore(ctx, z, bad, -100));
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "ag_cross_entropy_ignore: target 4 at row 1 is outside [0, 4)"));
    ag_ctx_free(ctx);
}
END_TEST

static ag_tensor *build_ce_ignore(ag_ctx *ctx, ag_tensor **in, void *user)
{
    return ag_cross_entropy_ignore(ctx, in[0], user, -100);
}

START_TEST(test_cross_entropy_ignore_grad)
{
    int s[3] = { 2, 3, 5 }; /* B=2, T=3, V=5 */
    ag_tensor *z = gc_tensor_new(3, s, 42, -2, 2);
    int targets[6] = { 1, -100, 4, -100, 0, 2 };
    gc_opts o = gc_defaults("cross_entropy_ignore");
    o.max_elems = 0;
    GC_ASSERT(&o, build_ce_ignore, &z, 1, targets);
    gc_tensor_free(z);
}
END_TEST

// --- attention with a key-padding mask ---

enum { B = 2, T = 3, C = 8, H = 2 };

static ag_params *P;
static ag_mha A;

static void mha_setup(void)
{
    P = ag_params_new();
    ck_assert_int_eq(ag_mha_init(&A, P, "blocks.0.attn", C, H, 0.02, 0.01), AG_OK);
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    ag_rng r; /* O(1) weights and biases: at the real init attention is nearly uniform */
    ag_rng_seed(&r, 43);
    for (size_t i = 0; i < P->total; i++) P->data[i] = (ag_real)(ag_rng_uniform(&r) - 0.5);
}

static void mha_teardown(void) { ag_params_free(P); }

static ag_tensor *new_x(ag_ctx *ctx)
{
    int s[3] = { B, T, C };
    ag_tensor *x = ag_tensor_leaf(ctx, 3, s);                       // [B,T,C]
    for (int i = 0; i < B * T * C; i++) x->data[i] = (ag_real)cos(0.7 * i);
    return x;
}

static ag_tensor *new_key_padding(ag_ctx *ctx, const ag_real kp[B * T])
{
    ag_tensor *t = ag_tensor_new2(ctx, B, T);                       // [B,T]
    memcpy(t->data, kp, B * T * sizeof(ag_real));
    return t;
}

/* Sequence 1 has length 2: its last key gets zero weight from every query and head, and its
 * two real positions come out as they do for that sequence alone, unpadded. */
START_TEST(test_mha_padded_keys_get_zero_weight)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = new_x(ctx);
    const ag_real kp[B * T] = { 1, 1, 1, 1, 1, 0 };
    ag_tensor *a[1] = { NULL };
    ag_forward_opts fo = { .key_padding = new_key_padding(ctx, kp), .record_attention = a };
    ag_tensor *y = ag_mha_forward(ctx, &A, x, NULL, 0, &fo);        // [B,T,C] no causal mask: padding matters
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_nonnull(a[0]);                                    // [B,H,T,T]
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                const ag_real *row = a[0]->data + ((b * H + h) * T + i) * T;
                double sum = row[0] + row[1] + row[2];
                ck_assert_double_eq_tol(sum, 1, 1e-6);
                if (b == 1) ck_assert(row[2] == 0);
                else ck_assert(row[2] > 0);
            }
    ag_tensor *alone = ag_tensor_new3(ctx, 1, 2, C);                // [1,2,C] sequence 1 unpadded
    memcpy(alone->data, x->data + T * C, 2 * C * sizeof(ag_real));
    ag_tensor *ya = ag_mha_forward(ctx, &A, alone, NULL, 0, NULL);  // [1,2,C]
    ck_assert_ptr_nonnull(ya);
    for (int i = 0; i < 2 * C; i++) ck_assert_double_eq_tol(y->data[T * C + i], ya->data[i], TOL);
    ag_ctx_free(ctx);
}
END_TEST

/* Sequence 1 starts with padding: under the causal mask its query 0 may see key 0 only, which
 * is padding. -inf: zero weights, the output w_o's bias, and zero gradient into x there. -1e9:
 * uniform weights over all three keys (padding and the future included). */
START_TEST(test_mha_fully_padded_row)
{
    const ag_real kp[B * T] = { 1, 1, 1, 0, 1, 1 };
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = new_x(ctx);
    ag_tensor *a[1] = { NULL };
    ag_forward_opts fo = { .key_padding = new_key_padding(ctx, kp), .record_attention = a };
    ag_tensor *y = ag_mha_forward(ctx, &A, x, ag_causal_mask(ctx, T), 0, &fo); // [B,T,C]
    ck_assert_ptr_nonnull(y);
    for (int h = 0; h < H; h++)
        for (int j = 0; j < T; j++) ck_assert(a[0]->data[((1 * H + h) * T + 0) * T + j] == 0);
    for (int c = 0; c < C; c++) ck_assert(y->data[T * C + c] == A.w_o.b->data[c]);
    ag_real dy[B * T * C];
    for (int i = 0; i < B * T * C; i++) dy[i] = (ag_real)sin(1.0 + i);
    ck_assert_int_eq(ag_backward_from(ctx, y, dy), AG_OK);
    for (int i = 0; i < B * T * C; i++) ck_assert(isfinite(x->grad[i]));
    for (int c = 0; c < C; c++) ck_assert(x->grad[T * C + c] == 0); /* x[1,0] reaches nothing */
    ck_assert(x->grad[T * C + C] != 0);
    ag_ctx_free(ctx);

    ctx = ag_ctx_new();
    ag_mha A9 = A;
    A9.mask_fill = (ag_real)-1e9;
    fo.key_padding = new_key_padding(ctx, kp);
    ck_assert_ptr_nonnull(ag_mha_forward(ctx, &A9, new_x(ctx), ag_causal_mask(ctx, T), 0, &fo));
    for (int h = 0; h < H; h++)
        for (int j = 0; j < T; j++) ck_assert_double_eq_tol(a[0]->data[((1 * H + h) * T + 0) * T + j], 1.0 / 3, 1e-6);
    ag_ctx_free(ctx);
}
END_TEST

typedef struct {
    ag_real kp[B * T];
    ag_real fill;
} pad_case;

static ag_tensor *build_mha_padded(ag_ctx *ctx, ag_tensor **in, void *user)
{
    const pad_case *pc = user;
    ag_mha At = A;
    At.mask_fill = pc->fill;
    const ag_forward_opts fo = { .key_padding = new_key_padding(ctx, pc->kp) };
    return ag_mha_forward(ctx, &At, in[0], ag_causal_mask(ctx, T), 0, &fo);
}

START_TEST(test_mha_key_padding_grad)
{
    int sx[3] = { B, T, C };
    ag_tensor *in[9] = { gc_tensor_new(3, sx, 44, -1, 1) };
    for (int e = 0; e < P->n; e++) in[1 + e] = P->entries[e].t; /* x, then the weights and biases */
    pad_case right = { { 1, 1, 1, 1, 1, 0 }, -INFINITY }, left = { { 1, 1, 1, 0, 1, 1 }, -INFINITY },
             left9 = { { 1, 1, 1, 0, 1, 1 }, (ag_real)-1e9 };
    gc_opts o = gc_defaults("mha key padding (right)");
    GC_ASSERT(&o, build_mha_padded, in, 9, &right);
    o.name = "mha key padding (left: a fully masked row under -inf)";
    GC_ASSERT(&o, build_mha_padded, in, 9, &left);
    o.name = "mha key padding (left, -1e9)";
    GC_ASSERT(&o, build_mha_padded, in, 9, &left9);
    gc_tensor_free(in[0]);
}
END_TEST

START_TEST(test_mha_key_padding_errors)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = new_x(ctx);
    ag_forward_opts fo = { .key_padding = ag_tensor_new2(ctx, B, T + 1) };
    ck_assert_ptr_null(ag_mha_forward(ctx, &A, x, ag_causal_mask(ctx, T), 0, &fo));
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "ag_mha_forward: key_padding [2,4] is not [B,T] of x [2,3,8]"));
    ag_ctx_free(ctx);
}
END_TEST

// --- the 3-token example of examples/attention_demo ---

/* Q = K = V = X, 3 tokens of d 4: scores X X^T, weights softmax(scores / sqrt(4)), output
 * weights V, by attograd's ops as the demo runs them, against plain double loops here. */
START_TEST(test_three_token_numbers)
{
    static const double X[3][4] = { { 1, 0, 1, 0 }, { 0, 1, 0, 1 }, { 1, 1, 0, 0 } };
    double S[3][3], W[3][3], O[3][4];
    for (int i = 0; i < 3; i++) {
        double sum = 0;
        for (int j = 0; j < 3; j++) {
            S[i][j] = 0;
            for (int d = 0; d < 4; d++) S[i][j] += X[i][d] * X[j][d];
            W[i][j] = exp(S[i][j] / 2);
            sum += W[i][j];
        }
        for (int j = 0; j < 3; j++) W[i][j] /= sum;
        for (int d = 0; d < 4; d++) {
            O[i][d] = 0;
            for (int j = 0; j < 3; j++) O[i][d] += W[i][j] * X[j][d];
        }
    }
    /* a few by hand: row 0 scores (2, 0, 1), weights e^(1, 0, 0.5) / (e + 1 + e^0.5) */
    ck_assert_double_eq_tol(W[0][0], 0.506480, 1e-6);
    ck_assert_double_eq_tol(W[2][2], 0.451862, 1e-6);
    ck_assert_double_eq_tol(O[0][0], 0.813676, 1e-6); /* w00 + w02 */

    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new2(ctx, 3, 4);                       // [3,4]
    for (int i = 0; i < 12; i++) x->data[i] = (ag_real)X[i / 4][i % 4];
    ag_tensor *s = ag_matmul(ctx, x, ag_transpose(ctx, x));         // [3,3]
    ag_tensor *w = ag_softmax(ctx, ag_scale(ctx, s, (ag_real)(1 / sqrt(4.0)))); // [3,3]
    ag_tensor *o = ag_matmul(ctx, w, x);                            // [3,4]
    ck_assert_ptr_nonnull(o);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            ck_assert(s->data[i * 3 + j] == S[i][j]);
            ck_assert_double_eq_tol(w->data[i * 3 + j], W[i][j], TOL);
        }
        for (int d = 0; d < 4; d++) ck_assert_double_eq_tol(o->data[i * 4 + d], O[i][d], TOL);
    }
    ag_ctx_free(ctx);
}
END_TEST

Suite *padding_suite(void)
{
    Suite *s = suite_create("padding");
    TCase *m = tcase_create("masks");
    tcase_set_tags(m, "masked_fill");
    ADD_TESTS(m, test_masked_fill_broadcasts, test_masked_fill_broadcast_grad, test_key_padding_mask);
    suite_add_tcase(s, m);
    TCase *ce = tcase_create("cross_entropy_ignore");
    tcase_set_tags(ce, "cross_entropy");
    ADD_TESTS(ce, test_cross_entropy_ignore_forward, test_cross_entropy_all_ignored_and_errors,
                  test_cross_entropy_ignore_grad);
    suite_add_tcase(s, ce);
    TCase *a = tcase_create("attention");
    tcase_set_tags(a, "attention");
    tcase_add_checked_fixture(a, mha_setup, mha_teardown);
    ADD_TESTS(a, test_mha_padded_keys_get_zero_weight, test_mha_fully_padded_row, test_mha_key_padding_grad,
                 test_mha_key_padding_errors);
    suite_add_tcase(s, a);
    TCase *demo = tcase_create("three_tokens");
    tcase_add_test(demo, test_three_token_numbers);
    suite_add_tcase(s, demo);
    return s;
}
