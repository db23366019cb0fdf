/* test_optim.c -- SGD (with and without momentum), Adam, AdamW, the learning-rate schedule and
 * gradient clipping, each against values written out by hand from MODEL.md's formulas in plain
 * double arithmetic.
 *
 * The model store is tiny on purpose: a 2-D weight W [2,3] (decayed) and a 1-D bias b [2]
 * (never decayed), so a decay applied to the wrong parameter shows. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include "gradcheck.h"
#include "optim/fast/adam.h"   /* AG_ADAM_FAST_MIN: where the fast twin takes over */
#include "tcases.h"

#ifdef AG_DOUBLE
#define TOL 1e-12
#else
#define TOL 2e-6
#endif

#define N 8 /* W [2,3] then b [2], in registration order */

static ag_params *P;

static void setup(void)
{
    P = ag_params_new();
    ck_assert_ptr_nonnull(P);
    int sw[2] = { 2, 3 }, sb[1] = { 2 };
    ck_assert_ptr_nonnull(ag_params_add(P, "fc.weight", 2, sw, AG_INIT_NORMAL, 0.02, true));
    ck_assert_ptr_nonnull(ag_params_add(P, "fc.bias", 1, sb, AG_INIT_ZEROS, 0, false));
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    ck_assert_uint_eq(P->total, N);
    const double p0[N] = { 0.5, -1.0, 2.0, 0.25, -0.75, 1.5, 0.3, -0.2 };
    for (int i = 0; i < N; i++) P->data[i] = (ag_real)p0[i];
}

static void teardown(void) { ag_params_free(P); }

/* the gradient at step t (1-based): changes sign and size from step to step */
static double grad_at(int t, int i) { return (i % 2 ? -0.1 : 0.2) * (i + 1) * (t == 2 ? -0.5 : (double)t); }

static bool is_decay(int i) { return i < 6; }

static void set_grads(int t, double *g)
{
    for (int i = 0; i < N; i++) {
        g[i] = (double)(ag_real)grad_at(t, i); /* what the optimizer actually sees */
        P->grad[i] = (ag_real)g[i];
    }
}

static void init_ref(double *p)
{
    for (int i = 0; i < N; i++) p[i] = P->data[i];
}

static void assert_params(const double *want, const char *what, int t)
{
    for (int i = 0; i < N; i++)
        ck_assert_msg(fabs(P->data[i] - want[i]) <= TOL * (1 + fabs(want[i])),
                      "%s step %d element %d: got %.15g want %.15g", what, t, i, (double)P->data[i], want[i]);
}

// --- SGD ---

START_TEST(test_sgd_plain)
{
    double p[N], g[N];
    init_ref(p);
    for (int t = 1; t <= 3; t++) {
        set_grads(t, g);
        ag_sgd_step(P, 0.1, 0);
        for (int i = 0; i < N; i++) p[i] -= 0.1 * g[i];            /* p -= lr g */
        assert_params(p, "sgd", t);
    }
}
END_TEST

START_TEST(test_sgd_momentum)
{
    double p[N], g[N], buf[N] = { 0 };
    init_ref(p);
    for (int t = 1; t <= 3; t++) {
        set_grads(t, g);
        ag_sgd_step(P, 0.1, 0.9);
        for (int i = 0; i < N; i++) {
            buf[i] = 0.9 * buf[i] + g[i];                           /* buf = mu buf + g */
            p[i] -= 0.1 * buf[i];                                   /* p -= lr buf */
        }
        assert_params(p, "sgd momentum", t);
    }
    /* by hand for element 0 (decay does not matter for SGD): g = 0.2, -0.1, 0.6 */
    double b1 = 0.2, b2 = 0.9 * b1 - 0.1, b3 = 0.9 * b2 + 0.6;
    double want0 = 0.5 - 0.1 * (b1 + b2 + b3);
    ck_assert_double_eq_tol(P->data[0], want0, 10 * TOL);
}
END_TEST

// --- Adam and AdamW ---

static const ag_adam_cfg adam_cfg = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};

START_TEST(test_adamw_steps)
{
    double p[N], g[N], m[N] = { 0 }, v[N] = { 0 }, lr = 0.05;
    double b1 = adam_cfg.beta1, b2 = adam_cfg.beta2, eps = adam_cfg.eps, wd = adam_cfg.weight_decay;
    init_ref(p);
    for (int t = 1; t <= 3; t++) {
        set_grads(t, g);
        ag_adamw_step(P, &adam_cfg, lr, t);
        for (int i = 0; i < N; i++) {
            if (is_decay(i)) p[i] -= lr * wd * p[i];                /* decoupled decay, 2-D only */
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            double mhat = m[i] / (1 - pow(b1, t)), vhat = v[i] / (1 - pow(b2, t));
            p[i] -= lr * mhat / (sqrt(vhat) + eps);
        }
        assert_params(p, "adamw", t);
        for (int i = 0; i < N; i++) {
            ck_assert_double_eq_tol(P->m[i], m[i], TOL);
            ck_assert_double_eq_tol(P->v[i], v[i], TOL);
        }
    }
}
END_TEST

/* Step 1 in closed form: mhat = g and vhat = g^2, so the step is lr * sign(g) (up to eps). */
START_TEST(test_adamw_first_step_is_sign)
{
    double g[N], lr = 0.01;
    double p0[N];
    init_ref(p0);
    set_grads(1, g);
    ag_adamw_step(P, &adam_cfg, lr, 1);
    for (int i = 0; i < N; i++) {
        double decayed = is_decay(i) ? p0[i] * (1 - lr * 0.1) : p0[i];
        double want = decayed - lr * (g[i] > 0 ? 1 : -1);
        ck_assert_double_eq_tol(P->data[i], want, 1e-6);
    }
}
END_TEST

START_TEST(test_adam_l2_steps)
{
    double p[N], g[N], m[N] = { 0 }, v[N] = { 0 }, lr = 0.05;
    double b1 = adam_cfg.beta1, b2 = adam_cfg.beta2, eps = adam_cfg.eps, wd = adam_cfg.weight_decay;
    init_ref(p);
    for (int t = 1; t <= 3; t++) {
        set_grads(t, g);
        ag_adam_step(P, &adam_cfg, lr, t);
        for (int i = 0; i < N; i++) {
            double gi = g[i] + (is_decay(i) ? wd * p[i] : 0);       /* L2 joins the gradient */
            m[i] = b1 * m[i] + (1 - b1) * gi;
            v[i] = b2 * v[i] + (1 - b2) * gi * gi;
            double mhat = m[i] / (1 - pow(b1, t)), vhat = v[i] / (1 - pow(b2, t));
            p[i] -= lr * mhat / (sqrt(vhat) + eps);
        }
        assert_params(p, "adam", t);
    }
}
END_TEST

/* Adam and AdamW differ only through decay: with weight_decay 0 they take identical steps. */
START_TEST(test_adam_equals_adamw_without_decay)
{
    ag_adam_cfg c = adam_cfg;
    c.weight_decay = 0;
    double g[N];
    ag_params *Q = ag_params_new();
    int sw[2] = { 2, 3 }, sb[1] = { 2 };
    ag_params_add(Q, "fc.weight", 2, sw, AG_INIT_NORMAL, 0.02, true);
    ag_params_add(Q, "fc.bias", 1, sb, AG_INIT_ZEROS, 0, false);
    ck_assert_int_eq(ag_params_alloc(Q), AG_OK);
    for (int i = 0; i < N; i++) Q->data[i] = P->data[i];
    for (int t = 1; t <= 3; t++) {
        set_grads(t, g);
        for (int i = 0; i < N; i++) Q->grad[i] = P->grad[i];
        ag_adam_step(P, &c, 0.05, t);
        ag_adamw_step(Q, &c, 0.05, t);
    }
    for (int i = 0; i < N; i++) ck_assert(P->data[i] == Q->data[i]);
    ag_params_free(Q);
}
END_TEST

// --- learning-rate schedule ---

START_TEST(test_lr_schedule)
{
    ag_lr_schedule s = { 1e-3, 1e-4, 10, 110, AG_LR_COSINE };
    double lr = 1e-3, min_lr = 1e-4;
    ck_assert_double_eq_tol(ag_lr_at(&s, 0), lr * 1 / 11, 1e-15);    /* warmup: lr (it+1)/(warmup+1) */
    ck_assert_double_eq_tol(ag_lr_at(&s, 4), lr * 5 / 11, 1e-15);
    ck_assert_double_eq_tol(ag_lr_at(&s, 9), lr * 10 / 11, 1e-15);   /* last warmup step */
    ck_assert_double_eq_tol(ag_lr_at(&s, 10), lr, 1e-15);            /* boundary: r = 0, cos = 1 */
    ck_assert_double_eq_tol(ag_lr_at(&s, 60), min_lr + 0.5 * (lr - min_lr), 1e-15); /* r = 1/2 */
    ck_assert_double_eq_tol(ag_lr_at(&s, 35), min_lr + 0.5 * (1 + cos(M_PI * 0.25)) * (lr - min_lr), 1e-15);
    ck_assert_double_eq_tol(ag_lr_at(&s, 110), min_lr, 1e-15);       /* r = 1 */
    ck_assert_double_eq_tol(ag_lr_at(&s, 111), min_lr, 1e-15);       /* past decay */
    ck_assert_double_eq_tol(ag_lr_at(&s, 100000), min_lr, 1e-15);
    for (long it = 10; it < 110; it++) ck_assert(ag_lr_at(&s, it + 1) < ag_lr_at(&s, it)); /* decays */
    ag_lr_schedule nowarm = { 1e-3, 1e-4, 0, 100, AG_LR_COSINE };
    ck_assert_double_eq_tol(ag_lr_at(&nowarm, 0), lr, 1e-15);
}
END_TEST

/* --lr-schedule linear: the same warmup and ends, a straight line between */
START_TEST(test_lr_schedule_linear)
{
    ag_lr_schedule s = { 1e-3, 0, 10, 110, AG_LR_LINEAR };
    ag_lr_schedule cos_s = { 1e-3, 0, 10, 110, AG_LR_COSINE };
    ck_assert_double_eq_tol(ag_lr_at(&s, 4), ag_lr_at(&cos_s, 4), 1e-18);   /* warmup unchanged */
    ck_assert_double_eq_tol(ag_lr_at(&s, 10), 1e-3, 1e-15);                 /* r = 0 */
    ck_assert_double_eq_tol(ag_lr_at(&s, 35), 0.75e-3, 1e-15);              /* r = 1/4: 3/4 of lr */
    ck_assert_double_eq_tol(ag_lr_at(&s, 60), 0.5e-3, 1e-15);               /* r = 1/2: both agree */
    ck_assert_double_eq_tol(ag_lr_at(&cos_s, 60), 0.5e-3, 1e-15);
    ck_assert_double_eq_tol(ag_lr_at(&s, 85), 0.25e-3, 1e-15);
    ck_assert(ag_lr_at(&s, 35) < ag_lr_at(&cos_s, 35));                      /* below the cosine early, */
    ck_assert(ag_lr_at(&s, 85) > ag_lr_at(&cos_s, 85));                      /* above it late */
    ck_assert(ag_lr_at(&s, 110) == 0 && ag_lr_at(&s, 500) == 0);            /* down to min_lr 0 */
    for (long it = 11; it < 110; it++)                                      /* equal steps down */
        ck_assert_double_eq_tol(ag_lr_at(&s, it) - ag_lr_at(&s, it + 1), 1e-5, 1e-15);
}
END_TEST

// --- clipping ---

static void set_grad_345(void)
{
    const double g[N] = { 3, 0, 0, 0, 0, 0, 0, 4 }; /* one element in W, one in b: norm 5 */
    for (int i = 0; i < N; i++) P->grad[i] = (ag_real)g[i];
}

START_TEST(test_clip_scales_above_threshold)
{
    set_grad_345();
    ck_assert_double_eq_tol(ag_grad_norm(P), 5, 1e-12);
    double n = ag_clip_grad_norm(P, 1.0);
    ck_assert_double_eq_tol(n, 5, 1e-12);                         /* the pre-clip norm */
    double s = 1.0 / (5 + 1e-6);                                  /* clip / (n + 1e-6) */
    ck_assert_double_eq_tol(P->grad[0], 3 * s, TOL);
    ck_assert_double_eq_tol(P->grad[7], 4 * s, TOL);
    ck_assert(P->grad[1] == 0);
    ck_assert_double_eq_tol(ag_grad_norm(P), 5 * s, 1e-6);        /* now just below 1 */
}
END_TEST

START_TEST(test_clip_leaves_small_grads)
{
    set_grad_345();
    ck_assert_double_eq_tol(ag_clip_grad_norm(P, 10.0), 5, 1e-12);
    ck_assert(P->grad[0] == 3 && P->grad[7] == 4);
    ck_assert_double_eq_tol(ag_clip_grad_norm(P, 5.0), 5, 1e-12); /* n > clip is strict */
    ck_assert(P->grad[0] == 3 && P->grad[7] == 4);
    ck_assert_double_eq_tol(ag_clip_grad_norm(P, 0), 5, 1e-12);   /* 0 only measures */
    ck_assert(P->grad[0] == 3 && P->grad[7] == 4);
}
END_TEST

/* Clipping folded into the update (ag_*_step_scaled with ag_clip_scale, as char_lm trains) is
 * the same update as clipping the gradients first and stepping, bit for bit, and leaves the
 * gradients themselves alone. The store is big enough (17k elements, odd sizes) for the
 * threaded path that shares every parameter out between the threads. */
static ag_params *big_store(void)
{
    ag_params *Q = ag_params_new();
    int sw[2] = { 130, 131 }, sb[1] = { 77 };
    ck_assert_ptr_nonnull(ag_params_add(Q, "w", 2, sw, AG_INIT_NORMAL, 0.02, true));
    ck_assert_ptr_nonnull(ag_params_add(Q, "b", 1, sb, AG_INIT_ZEROS, 0, false));
    ck_assert_int_eq(ag_params_alloc(Q), AG_OK);
    ag_rng r;
    ag_rng_seed(&r, 5);
    for (size_t i = 0; i < Q->total; i++) {
        Q->data[i] = (ag_real)(2 * ag_rng_uniform(&r) - 1);
        Q->grad[i] = (ag_real)(0.1 * (2 * ag_rng_uniform(&r) - 1)); /* norm about 7.6: clipped at 1 */
    }
    return Q;
}

START_TEST(test_clip_folded_into_the_update)
{
    const ag_adam_cfg cfg = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        ag_params *A = big_store(), *B = big_store();
        size_t bytes = A->total * sizeof(ag_real);
        for (long t = 1; t <= 3; t++) {
            double norm = ag_grad_norm(B);
            double scale = ag_clip_scale(norm, 1.0);
            ck_assert_double_lt(scale, 0.5);                      /* it does clip */
            ck_assert_double_eq_tol(ag_clip_grad_norm(A, 1.0), norm, 1e-9);
            if (decoupled) {
                ag_adamw_step(A, &cfg, 1e-2, t);
                ag_adamw_step_scaled(B, &cfg, 1e-2, t, scale);
            } else {
                ag_adam_step(A, &cfg, 1e-2, t);
                ag_adam_step_scaled(B, &cfg, 1e-2, t, scale);
            }
            ck_assert(memcmp(A->data, B->data, bytes) == 0);
            ck_assert(memcmp(A->m, B->m, bytes) == 0);
            ck_assert(memcmp(A->v, B->v, bytes) == 0);
            ck_assert_double_eq_tol(ag_grad_norm(B), norm, 1e-9);   /* B's gradients untouched */
            memcpy(A->grad, B->grad, bytes);                          /* the next step's gradients */
        }
        ag_params_free(A);
        ag_params_free(B);
    }
    ck_assert(ag_clip_scale(0.5, 1.0) == 1 && ag_clip_scale(5, 0) == 1 && ag_clip_scale(1.0, 1.0) == 1);
    ck_assert_double_eq_tol(ag_clip_scale(4, 2), 2 / (4 + 1e-6), 1e-15);
}
END_TEST

/* ag_optimizer_step: each rule by name is its own step, the clip applied as that step applies
 * it (folded into Adam's, the gradients scaled first for SGD), bit for bit. */
START_TEST(test_optimizer_by_name)
{
    const ag_adam_cfg cfg = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
    ck_assert_int_eq(ag_optimizer_switch.n, 4);   /* and muon: tests/test_muon.c */
    ck_assert_str_eq(ag_switch_name(&ag_optimizer_switch, AG_SGD), "sgd");
    for (int k = AG_ADAMW; k <= AG_SGD; k++) {
        ag_params *A = big_store(), *B = big_store();
        size_t bytes = A->total * sizeof(ag_real);
        double scale = ag_clip_scale(ag_grad_norm(A), 1.0);
        ag_optimizer_step((ag_optimizer)k, A, &cfg, 0.9, 1e-2, 1, scale);
        if (k == AG_ADAMW) ag_adamw_step_scaled(B, &cfg, 1e-2, 1, scale);
        else if (k == AG_ADAM) ag_adam_step_scaled(B, &cfg, 1e-2, 1, scale);
        else {
            ag_scale_grads(B, scale);
            ag_sgd_step(B, 1e-2, 0.9);
        }
        ck_assert_msg(memcmp(A->data, B->data, bytes) == 0 && memcmp(A->m, B->m, bytes) == 0, "%s",
                      ag_switch_name(&ag_optimizer_switch, k));
        ag_params_free(A);
        ag_params_free(B);
    }
}
END_TEST

/* The fast twin of the Adam step (src/optim/fast/adam.c: each thread a share of every
 * parameter, the widest vector target) is adam.c's plain loop, bit for bit. An element's update
 * reads only its own p, g, m and v, so "w" alone in a small store (adam.c's loop: the store is
 * under AG_ADAM_FAST_MIN) must end exactly as "w" in big_store (the fast twin past it, on one
 * thread and on three, cutting each parameter at other places than any vector loop would). */
static ag_params *small_store(void)
{
    ag_params *Q = ag_params_new(), *big = big_store();
    int sw[2] = { 126, 130 };   /* 16,380 weights: under AG_ADAM_FAST_MIN */
    ck_assert_ptr_nonnull(ag_params_add(Q, "w", 2, sw, AG_INIT_NORMAL, 0.02, true));
    ck_assert_int_eq(ag_params_alloc(Q), AG_OK);
    ck_assert_uint_le(Q->total, AG_ADAM_FAST_MIN);
    memcpy(Q->data, big->data, Q->total * sizeof(ag_real));   /* "w" comes first in big_store */
    memcpy(Q->grad, big->grad, Q->total * sizeof(ag_real));
    ag_params_free(big);
    return Q;
}

START_TEST(test_adam_fast_equals_plain)
{
    const ag_adam_cfg cfg = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
    int threads = omp_get_max_threads();
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        void (*step)(ag_params *, const ag_adam_cfg *, double, long, double) =
            decoupled ? ag_adamw_step_scaled : ag_adam_step_scaled;
        ag_params *A = small_store(), *B = big_store(), *C = big_store();
        ck_assert_uint_gt(B->total, AG_ADAM_FAST_MIN);
        size_t bytes = A->total * sizeof(ag_real);   /* "w", the one A has */
        for (long t = 1; t <= 3; t++) {
            step(A, &cfg, 1e-2, t, 0.5);
            omp_set_num_threads(1);
            step(B, &cfg, 1e-2, t, 0.5);
            omp_set_num_threads(3);
            step(C, &cfg, 1e-2, t, 0.5);
            omp_set_num_threads(threads);
            for (ag_params *X = B; X; X = X == B ? C : NULL) {
                ck_assert(memcmp(A->data, X->data, bytes) == 0);
                ck_assert(memcmp(A->m, X->m, bytes) == 0);
                ck_assert(memcmp(A->v, X->v, bytes) == 0);
            }
        }
        ag_params *start = small_store();
        ck_assert(memcmp(A->data, start->data, bytes) != 0); /* the steps did move the parameters */
        ag_params_free(start);
        ag_params_free(A);
        ag_params_free(B);
        ag_params_free(C);
    }
}
END_TEST

Suite *optim_suite(void)
{
    Suite *s = suite_create("optim");
    TCase *o = tcase_create("optimizers");
    tcase_set_tags(o, "adam sgd");
    tcase_add_checked_fixture(o, setup, teardown);
    ADD_TESTS(o, test_sgd_plain, test_sgd_momentum, test_adamw_steps, test_adamw_first_step_is_sign,
                 test_adam_l2_steps, test_adam_equals_adamw_without_decay);
    suite_add_tcase(s, o);
    TCase *l = tcase_create("schedule");
    tcase_add_test(l, test_lr_schedule);
    tcase_add_test(l, test_lr_schedule_linear);
    suite_add_tcase(s, l);
    TCase *c = tcase_create("clip");
    tcase_set_tags(c, "adam sgd");
    tcase_add_checked_fixture(c, setup, teardown);
    ADD_TESTS(c, test_clip_scales_above_threshold, test_clip_leaves_small_grads,
                 test_clip_folded_into_the_update, test_optimizer_by_name);
    suite_add_tcase(s, c);
    TCase *th = tcase_create("threads");
    tcase_set_tags(th, "adam");
    tcase_add_test(th, test_adam_fast_equals_plain);
    suite_add_tcase(s, th);
    return s;
}
