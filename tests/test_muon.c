/* test_muon.c -- Muon (src/optim/muon.c) against its formulas:
 *
 *   orthogonalize  NS5 of G = U diag(s) V^T is U diag(f(s / ||s||)) V^T, f five rounds of
 *                  a x + b x^3 + c x^5: U and V built here (Householder reflections), f in
 *                  double; every s of (0.05, 1] lands in 0.6-1.25
 *   step           a hidden matrix, wide and tall: the momentum (m), Nesterov's u, the update
 *                  lr 0.2 sqrt(max dim) NS5(u) after the decay, v untouched; everything else
 *                  AdamW's bits; two steps, the clip factor taken in the first
 *   by_name        ag_optimizer_step(AG_MUON) is ag_muon_step; the scratch made once
 *   lr_scale       adamw_lr_scale: the rest at lr times it (AdamW's bits), the matrices as before
 *   flags          ag_params_set_hidden refuses a name it lacks and a vector */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <string.h>
#include "optim/muon.h"
#include "tcases.h"

static const double NS_A = 3.4445, NS_B = -4.7750, NS_C = 2.0315;

/* H = I - 2 w w^T / (w^T w), n x n, in double: orthogonal, from a fixed w */
static void householder(double *H, int n, int seed)
{
    double w[16], ww = 0;
    for (int i = 0; i < n; i++) {
        w[i] = sin(1.7 * (i + 1) + seed) + 0.3;
        ww += w[i] * w[i];
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) H[i * n + j] = (i == j) - 2 * w[i] * w[j] / ww;
}

/* the scalar map of five NS5 rounds */
static double ns5_of(double x)
{
    for (int r = 0; r < 5; r++) x = NS_A * x + NS_B * x * x * x + NS_C * x * x * x * x * x;
    return x;
}

START_TEST(test_orthogonalize)
{
    enum { m = 4, n = 7 };
    const double s[m] = { 1.0, 0.5, 0.2, 0.06 };
    double U[m * m], V[n * n], norm = 0, f[m];
    householder(U, m, 1);
    householder(V, n, 2);
    for (int i = 0; i < m; i++) norm += s[i] * s[i];
    for (int i = 0; i < m; i++) {
        f[i] = ns5_of(s[i] / sqrt(norm));
        ck_assert_msg(f[i] > 0.6 && f[i] < 1.25, "s %g -> %g", s[i], f[i]);   /* near 1: orthogonal */
    }
    ag_real X[m * n], work[m * n + 2 * m * m];
    for (int r = 0; r < m; r++)
        for (int c = 0; c < n; c++) {   /* G = U diag(s) V[:, :m]^T (V's first m columns, orthonormal) */
            double g = 0;
            for (int k = 0; k < m; k++) g += U[r * m + k] * s[k] * V[c * n + k];
            X[r * n + c] = (ag_real)g;
        }
    ag_muon_orthogonalize(X, m, n, work);
    for (int r = 0; r < m; r++)
        for (int c = 0; c < n; c++) {
            double want = 0;
            for (int k = 0; k < m; k++) want += U[r * m + k] * f[k] * V[c * n + k];
            ck_assert_msg(fabs(X[r * n + c] - want) < 2e-5, "[%d,%d] %g, want %g", r, c, (double)X[r * n + c], want);
        }
}
END_TEST

/* a store: w [3,5] and t [5,3] hidden, e [4,3] a decayed matrix not hidden, b [3] a bias */
static ag_params *store(void)
{
    ag_params *P = ag_params_new();
    ck_assert_ptr_nonnull(ag_params_add(P, "w", 2, (int[]){ 3, 5 }, AG_INIT_NORMAL, 0.02, true));
    ck_assert_ptr_nonnull(ag_params_add(P, "t", 2, (int[]){ 5, 3 }, AG_INIT_NORMAL, 0.02, true));
    ck_assert_ptr_nonnull(ag_params_add(P, "e", 2, (int[]){ 4, 3 }, AG_INIT_NORMAL, 0.02, true));
    ck_assert_ptr_nonnull(ag_params_add(P, "b", 1, (int[]){ 3 }, AG_INIT_ZEROS, 0, false));
    ck_assert_int_eq(ag_params_set_hidden(P, "w", true), AG_OK);
    ck_assert_int_eq(ag_params_set_hidden(P, "t", true), AG_OK);
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    for (size_t i = 0; i < P->total; i++) P->data[i] = (ag_real)(0.3 * sin(0.9 * i + 0.2));
    return P;
}

static void set_grads(ag_params *P, int step)
{
    for (size_t i = 0; i < P->total; i++) P->grad[i] = (ag_real)(cos(1.3 * i + step) * (1 + 0.1 * (i % 5)));
}

/* what one hidden matrix [r,k] must become: buf (in/out), p (in/out), from g and gs */
static void muon_expected(double *p, double *buf, const ag_real *g, int r, int k, double gs, double lr, double wd)
{
    int m = r < k ? r : k, n = r < k ? k : r;
    ag_real X[15], work[15 + 2 * 9];
    for (int i = 0; i < r; i++)
        for (int j = 0; j < k; j++) {
            int at = i * k + j;
            buf[at] = 0.95 * buf[at] + gs * g[at];
            X[r <= k ? at : j * r + i] = (ag_real)(gs * g[at] + 0.95 * buf[at]);
        }
    ag_muon_orthogonalize(X, m, n, work);   /* the test above proves it */
    for (int i = 0; i < r; i++)
        for (int j = 0; j < k; j++) {
            int at = i * k + j;
            p[at] = (1 - lr * wd) * p[at] - lr * 0.2 * sqrt((double)n) * X[r <= k ? at : j * r + i];
        }
}

START_TEST(test_muon_step)
{
    const ag_adam_cfg cfg = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
    ag_params *A = store(), *B = store();
    double p[2][15], buf[2][15] = { { 0 } };
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 15; i++) p[h][i] = A->data[h * 15 + i];
    for (int step = 1; step <= 2; step++) {
        double gs = step == 1 ? 0.5 : 1, lr = 0.01 * step;
        set_grads(A, step);
        set_grads(B, step);
        ck_assert_int_eq(ag_muon_step(A, &cfg, lr, step, gs), AG_OK);
        ag_adamw_step_scaled(B, &cfg, lr, step, gs);
        muon_expected(p[0], buf[0], A->grad, 3, 5, gs, lr, cfg.weight_decay);
        muon_expected(p[1], buf[1], A->grad + 15, 5, 3, gs, lr, cfg.weight_decay);
        for (int i = 0; i < 30; i++) {
            ck_assert_msg(fabs(A->data[i] - p[i / 15][i % 15]) < 1e-6, "step %d, %s[%d]: %g, want %g", step,
                          i < 15 ? "w" : "t", i % 15, (double)A->data[i], p[i / 15][i % 15]);
            ck_assert_msg(fabs(A->m[i] - buf[i / 15][i % 15]) < 1e-6, "momentum %d", i);
            ck_assert(A->v[i] == 0);
            ck_assert(A->data[i] != B->data[i]);                     /* not AdamW's */
        }
        size_t rest = (A->total - 30) * sizeof(ag_real);         /* e and b: AdamW's bits */
        ck_assert(memcmp(A->data + 30, B->data + 30, rest) == 0 && memcmp(A->m + 30, B->m + 30, rest) == 0 &&
                  memcmp(A->v + 30, B->v + 30, rest) == 0);
    }
    ag_params_free(A);
    ag_params_free(B);
}
END_TEST

START_TEST(test_muon_by_name)
{
    const ag_adam_cfg cfg = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.3};
    ag_params *A = store(), *B = store();
    size_t bytes = A->total * sizeof(ag_real);
    ag_real *work = NULL;
    for (int step = 1; step <= 2; step++) {
        set_grads(A, step);
        set_grads(B, step);
        ck_assert_int_eq(ag_optimizer_step(AG_MUON, A, &cfg, 0, 1e-2, step, 0.7), AG_OK);
        ck_assert_int_eq(ag_muon_step(B, &cfg, 1e-2, step, 0.7), AG_OK);
        ck_assert(memcmp(A->data, B->data, bytes) == 0 && memcmp(A->m, B->m, bytes) == 0);
        ck_assert_uint_eq(A->work_n, (2 * 15 + 2 * 9) * (size_t)omp_get_max_threads());   /* the largest X, Y, A, B a thread */
        if (step == 2) ck_assert_ptr_eq(A->work, work);   /* made once */
        work = A->work;
    }
    ck_assert_str_eq(ag_switch_name(&ag_optimizer_switch, AG_MUON), "muon");
    ag_params_free(A);
    ag_params_free(B);
}
END_TEST

/* adamw_lr_scale: the rest moves as AdamW at lr times the scale (its bits), the hidden matrices
 * as with one lr; 0 is 1 (an initializer without the field) */
START_TEST(test_muon_adamw_lr_scale)
{
    const ag_adam_cfg half = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.3, .adamw_lr_scale = 0.5};
    ag_adam_cfg one = half, unset = half;
    one.adamw_lr_scale = 1, unset.adamw_lr_scale = 0;
    ag_params *A = store(), *B = store(), *C = store(), *D = store();
    size_t hidden = 30 * sizeof(ag_real), rest = (A->total - 30) * sizeof(ag_real);
    for (int step = 1; step <= 2; step++) {
        set_grads(A, step), set_grads(B, step), set_grads(C, step), set_grads(D, step);
        ck_assert_int_eq(ag_muon_step(A, &half, 1e-2, step, 0.7), AG_OK);
        ag_adamw_step_scaled(B, &half, 0.5e-2, step, 0.7);                     /* the rest's bits */
        ck_assert_int_eq(ag_muon_step(C, &one, 1e-2, step, 0.7), AG_OK);       /* the matrices' */
        ck_assert_int_eq(ag_muon_step(D, &unset, 1e-2, step, 0.7), AG_OK);
        ck_assert(memcmp(A->data + 30, B->data + 30, rest) == 0 && memcmp(A->m + 30, B->m + 30, rest) == 0);
        ck_assert(memcmp(A->data, C->data, hidden) == 0 && memcmp(A->m, C->m, hidden) == 0);
        ck_assert(memcmp(A->data + 30, C->data + 30, rest) != 0);             /* the scale moved the rest */
        ck_assert(memcmp(C->data, D->data, A->total * sizeof(ag_real)) == 0);  /* 0 is 1 */
    }
    ag_params_free(A), ag_params_free(B), ag_params_free(C), ag_params_free(D);
}
END_TEST

START_TEST(test_hidden_flags)
{
    ag_params *P = store();
    ck_assert(P->entries[0].hidden && P->entries[1].hidden && !P->entries[2].hidden && !P->entries[3].hidden);
    ck_assert_int_eq(ag_params_set_hidden(P, "nope", true), AG_ERR_ARG);
    ck_assert_str_eq(ag_params_error(P), "nope: no such parameter (it cannot be marked hidden)");
    ag_error_clear(&P->err);
    ck_assert_int_eq(ag_params_set_hidden(P, "b", true), AG_ERR_ARG);
    ck_assert_str_eq(ag_params_error(P), "b: 1-D, only a matrix can be hidden");
    ck_assert(!P->entries[3].hidden);
    ag_params_free(P);
}
END_TEST

Suite *muon_suite(void)
{
    Suite *s = suite_create("muon");
    TCase *c = tcase_create("muon");
    tcase_set_tags(c, "muon");
    ADD_TESTS(c, test_orthogonalize, test_muon_step, test_muon_by_name, test_muon_adamw_lr_scale, test_hidden_flags);
    suite_add_tcase(s, c);
    return s;
}
