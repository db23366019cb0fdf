/* test_parallel.c -- the threaded gemm (ag_gemm, ag_gemm_pair) against a plain triple loop, and
 * the lane reductions of tensor/fast/fast.h (ag__sum, ag__dot, ag__max) against plain loops;
 * training steps on 1 and 2 threads, bit for bit the same; the thread tuner (speed.h) on a
 * simulated machine that turns busy and idle again.
 *
 * The products are big enough to take the threaded paths (row blocks, two teams) and are run
 * with 1, 2 and 3 threads, so an odd team split and a one-thread team are covered too. */
#include <check.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "attograd.h"
#include "tensor/fast/fast.h"
#include "tensor/parallel.h"
#include "tensor/rng.h"
#include "tcases.h"

#ifdef AG_DOUBLE
#define GEMM_TOL 1e-10
#else
#define GEMM_TOL 2e-4
#endif

static ag_real *random_buf(ag_rng *r, size_t n)
{
    ag_real *p = malloc(n * sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) p[i] = (ag_real)(2 * ag_rng_uniform(r) - 1);
    return p;
}

/* C = alpha op(A) op(B) + beta C by definition, in double */
static void gemm_reference(const ag_gemm_args *g)
{
    for (int m = 0; m < g->M; m++)
        for (int n = 0; n < g->N; n++) {
            double acc = 0;
            for (int k = 0; k < g->K; k++) {
                double a = g->transA ? g->A[(size_t)k * g->lda + m] : g->A[(size_t)m * g->lda + k];
                double b = g->transB ? g->B[(size_t)n * g->ldb + k] : g->B[(size_t)k * g->ldb + n];
                acc += a * b;
            }
            ag_real *c = &g->C[(size_t)m * g->ldc + n];
            *c = (ag_real)(g->alpha * acc + (g->beta == 0 ? 0 : g->beta * *c));
        }
}

/* a product [M,N] = op(A) op(B) with fresh random operands; C starts random (beta must matter) */
static ag_gemm_args make_gemm(ag_rng *r, bool tA, bool tB, int M, int N, int K, ag_real alpha, ag_real beta)
{
    ag_gemm_args g = { tA, tB, M, N, K, alpha, NULL, tA ? M : K, NULL, tB ? K : N, beta, NULL, N };
    g.A = random_buf(r, (size_t)M * K);
    g.B = random_buf(r, (size_t)K * N);
    g.C = random_buf(r, (size_t)M * N);
    return g;
}

static void free_gemm(ag_gemm_args *g)
{
    free((void *)g->A);
    free((void *)g->B);
    free(g->C);
}

static void assert_close(const ag_real *got, const ag_real *want, size_t n)
{
    for (size_t i = 0; i < n; i++) ck_assert_double_eq_tol(got[i], want[i], GEMM_TOL * (1 + fabs((double)want[i])));
}

/* runs g through ag_gemm and checks it against the reference */
static void check_gemm(ag_gemm_args g)
{
    size_t n = (size_t)g.M * g.N;
    ag_real *want = malloc(n * sizeof *want);
    ck_assert_ptr_nonnull(want);
    memcpy(want, g.C, n * sizeof *want);
    ag_gemm_args ref = g;
    ref.C = want;
    gemm_reference(&ref);
    ag_gemm(g.transA, g.transB, g.M, g.N, g.K, g.alpha, g.A, g.lda, g.B, g.ldb, g.beta, g.C, g.ldc);
    assert_close(g.C, want, n);
    free(want);
}

START_TEST(test_gemm_threaded_matches_reference)
{
    ag_rng r;
    ag_rng_seed(&r, 11);
    int threads[3] = { 1, 2, 3 };
    for (int t = 0; t < 3; t++) {
        omp_set_num_threads(threads[t]);
        for (int tA = 0; tA < 2; tA++)
            for (int tB = 0; tB < 2; tB++)
                for (int beta = 0; beta < 2; beta++) {
                    /* 97 x 70 x 53 = 360k multiply-adds: above the threshold that splits a product */
                    ag_gemm_args g = make_gemm(&r, tA, tB, 97, 70, 53, (ag_real)0.5, (ag_real)beta);
                    check_gemm(g);
                    free_gemm(&g);
                }
    }
    omp_set_num_threads(2);
}
END_TEST

typedef struct {
    ag_real *out;
    const ag_real *x;
    size_t R;
    int C;
} team_sum;

static void sum_rows_part(void *user, int part, int n_parts)
{
    team_sum *t = user;
    ag__sum_rows_part(t->out, t->x, t->R, t->C, part, n_parts);
}

START_TEST(test_gemm_pair_matches_reference)
{
    ag_rng r;
    ag_rng_seed(&r, 12);
    int threads[3] = { 1, 2, 3 };
    for (int t = 0; t < 3; t++) {
        omp_set_num_threads(threads[t]);
        for (int beta = 0; beta < 2; beta++) {
            /* the shapes of a linear's backward: dx [R,in] = dy W, dW [out,in] = dy^T x */
            int R = 301, in = 40, out = 72;
            ag_gemm_args dx = make_gemm(&r, false, false, R, in, out, 1, (ag_real)beta);
            ag_gemm_args dW = make_gemm(&r, true, false, out, in, R, 1, 1);
            ag_real *want_dx = malloc((size_t)R * in * sizeof(ag_real));
            ag_real *want_dW = malloc((size_t)out * in * sizeof(ag_real));
            memcpy(want_dx, dx.C, (size_t)R * in * sizeof(ag_real));
            memcpy(want_dW, dW.C, (size_t)out * in * sizeof(ag_real));
            ag_gemm_args ref_dx = dx, ref_dW = dW;
            ref_dx.C = want_dx;
            ref_dW.C = want_dW;
            gemm_reference(&ref_dx);
            gemm_reference(&ref_dW);
            /* then0: the bias gradient db += sum over rows of dy, on dx's team */
            ag_real *db = calloc((size_t)out, sizeof(ag_real)), want_db[72] = { 0 };
            for (int i = 0; i < R; i++)
                for (int o = 0; o < out; o++) want_db[o] += dx.A[(size_t)i * out + o];
            team_sum ts = { db, dx.A, (size_t)R, out };
            ag_gemm_pair(&dx, sum_rows_part, &ts, &dW);
            assert_close(db, want_db, (size_t)out);
            free(db);
            assert_close(dx.C, want_dx, (size_t)R * in);
            assert_close(dW.C, want_dW, (size_t)out * in);
            free(want_dx);
            free(want_dW);
            free_gemm(&dx);
            free_gemm(&dW);
        }
    }
    omp_set_num_threads(2);
}
END_TEST

START_TEST(test_lane_reductions_match_plain_loops)
{
    ag_rng r;
    ag_rng_seed(&r, 13);
    /* lengths below, at and around multiples of the lane count */
    int lengths[] = { 0, 1, 5, AG_LANES - 1, AG_LANES, AG_LANES + 1, 3 * AG_LANES + 7, 128, 1000 };
    for (size_t t = 0; t < sizeof lengths / sizeof lengths[0]; t++) {
        int n = lengths[t];
        ag_real *x = random_buf(&r, (size_t)n + 1), *y = random_buf(&r, (size_t)n + 1);
        double sum = 0, dot = 0;
        ag_real max = -INFINITY;
        for (int i = 0; i < n; i++) {
            sum += x[i];
            dot += (double)x[i] * y[i];
            max = x[i] > max ? x[i] : max;
        }
        ck_assert_double_eq_tol(ag__sum(x, n), sum, 1e-5);
        ck_assert_double_eq_tol(ag__dot(x, y, n), dot, 1e-5);
        ck_assert(ag__max(x, n, -INFINITY) == max);          /* the max is exact: no rounding */
        ck_assert(ag__max(x, n, 5) == 5);                     /* floor above every element */
        if (n >= 3) {
            x[n / 2] = 7;                                     /* the largest, somewhere inside */
            ck_assert(ag__max(x, n, -INFINITY) == 7);
            x[0] = NAN;                                       /* NaN is passed over, as before */
            ck_assert(ag__max(x, n, -INFINITY) == 7);
        }
        free(x);
        free(y);
    }
}
END_TEST

// --- the same bits on any number of threads ---

/* The weights after `steps` training steps of a small GPT (every op above its one-thread
 * threshold: [B*T, C] = [256, 64]) on `threads` threads: forward with dropout, backward, the
 * clip norm, AdamW. A new buffer of the P->total weights. */
static ag_real *train_on(int threads, int steps)
{
    enum { V = 23, B = 8, T = 32 };
    omp_set_num_threads(threads);
    ag_gpt_config cfg = { .vocab_size = V, .n_layer = 2, .n_head = 4, .n_embd = 64, .block_size = T, .dropout = 0.1 };
    ag_error err = { 0 };
    ag_gpt *g = ag_gpt_new(&cfg, 5, &err);
    ag_ctx *ctx = ag_ctx_new();
    ck_assert_msg(g && ctx, "%s", err.msg);
    ag_ctx_set_recycle_grads(ctx, true);
    int x[B * T], y[B * T];
    ag_rng r;
    ag_rng_seed(&r, 6);
    const ag_adam_cfg ac = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
    for (int it = 0; it < steps; it++) {
        for (int i = 0; i < B * T; i++) x[i] = (int)ag_rng_below(&r, V), y[i] = (int)ag_rng_below(&r, V);
        ag_tensor *loss = NULL;
        ag_gpt_forward(ctx, g, x, y, B, T, &(ag_forward_opts){ .train = true, .seed = (uint64_t)it }, &loss);
        ck_assert_msg(loss != NULL, "%s", ag_ctx_error(ctx));
        ag_params_zero_grad(g->params);
        ck_assert_int_eq(ag_backward(ctx, loss), AG_OK);
        double scale = ag_clip_scale(ag_grad_norm(g->params), 0.5); /* small: the clip acts */
        ag_adamw_step_scaled(g->params, &ac, 1e-2, it + 1, scale);
        ag_ctx_reset(ctx);
    }
    ag_real *w = malloc(g->params->total * sizeof *w);
    ck_assert_ptr_nonnull(w);
    memcpy(w, g->params->data, g->params->total * sizeof *w);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
    return w;
}

/* one thread and two: what ag_thread_tuner switches between (on three a product is cut in three
 * row blocks, and OpenBLAS may round those differently) */
START_TEST(test_training_same_bits_on_one_thread_or_two)
{
    ag_gpt_config cfg = { .vocab_size = 23, .n_layer = 2, .n_head = 4, .n_embd = 64, .block_size = 32 };
    ag_gpt *g = ag_gpt_new(&cfg, 5, &(ag_error){ 0 });
    ck_assert_ptr_nonnull(g);
    size_t n = g->params->total; /* train_on's model has this many weights */
    ag_gpt_free(g);
    ag_real *one = train_on(1, 3), *two = train_on(2, 3);
    ck_assert(memcmp(one, two, n * sizeof *one) == 0);
    free(one);
    free(two);
    omp_set_num_threads(2);
}
END_TEST

// --- the thread tuner on a simulated machine ---

/* A simulated machine: a step's milliseconds on two threads and on one, and on two threads the
 * chance that a straggler (a thread the neighbour pushed off its core) holds a step up to
 * `held` ms; each step +-8% at random. */
typedef struct {
    double two, one, held, held_p;
} sim_machine;

static const sim_machine IDLE = { 10, 16, 0, 0 };
static const sim_machine ONE_NEIGHBOUR = { 35, 17, 0, 0 };   /* the old threads' worst case */

static double simulated_step(const sim_machine *m, int threads, ag_rng *r)
{
    double ms = threads == 1 ? m->one : ag_rng_uniform(r) < m->held_p ? m->held : m->two;
    return 1e-3 * ms * (0.92 + 0.16 * ag_rng_uniform(r));
}

/* n steps of the simulated machine through the tuner; returns the steps run on one thread and
 * adds the simulated seconds to *secs when it is not NULL */
static long tuned_steps_timed(ag_thread_tuner *tt, long n, const sim_machine *m, ag_rng *r, double *secs)
{
    long single = 0;
    for (long i = 0; i < n; i++) {
        int threads = omp_get_max_threads();
        single += threads == 1;
        double t = simulated_step(m, threads, r);
        if (secs) *secs += t;
        ag_thread_tuner_step(tt, t);
    }
    return single;
}

static long tuned_steps(ag_thread_tuner *tt, long n, const sim_machine *m, ag_rng *r)
{
    return tuned_steps_timed(tt, n, m, r, NULL);
}

START_TEST(test_thread_tuner_takes_the_faster)
{
    ag_rng r;
    ag_rng_seed(&r, 21);
    omp_set_num_threads(2);
    ag_thread_tuner tt;
    ag_thread_tuner_init(&tt, 2);
    /* idle: two threads, one only for probes, fewer and fewer of them */
    long single = tuned_steps(&tt, 2000, &IDLE, &r);
    ck_assert_int_eq(omp_get_max_threads(), 2);
    ck_assert_int_eq(tt.switches, 0);
    ck_assert_int_le(single, 10);                 /* about 7 probes of one step in 2000 */
    ck_assert_int_eq(tt.interval, 512);
    ck_assert_int_le(tuned_steps(&tt, 600, &IDLE, &r), 2); /* the longest interval: one probe */
    /* a neighbour comes: one thread within a few steps, two only for probes after that */
    long two = 1000 - tuned_steps(&tt, 1000, &ONE_NEIGHBOUR, &r);
    ck_assert_int_eq(omp_get_max_threads(), 1);
    ck_assert_int_le(two, 14);                    /* a window before the switch, then one per probe */
    /* it leaves: two threads again by the next probe (at most the longest interval) */
    single = tuned_steps(&tt, 1000, &IDLE, &r);
    ck_assert_int_eq(omp_get_max_threads(), 2);
    ck_assert_int_le(single, 512 + 10);
    ck_assert_int_eq(tt.switches, 2);
    /* max 1: nothing to choose, the threads are left alone */
    ag_thread_tuner_init(&tt, 1);
    omp_set_num_threads(3);
    ck_assert_int_eq(tuned_steps(&tt, 100, &ONE_NEIGHBOUR, &r), 0);
    ck_assert_int_eq(omp_get_max_threads(), 3);
    omp_set_num_threads(2);
}
END_TEST

/* Seconds of n steps on a fixed number of threads */
static double fixed_steps(long n, const sim_machine *m, int threads, ag_rng *r)
{
    double secs = 0;
    for (long i = 0; i < n; i++) secs += simulated_step(m, threads, r);
    return secs;
}

/* A fresh tuner for n steps on m from two threads: its steps on one thread, and its simulated
 * time over that of the faster fixed setting's (each from its own draws of the same machine) */
static long tuned_run(const sim_machine *m, long n, uint64_t seed, double *vs_best)
{
    ag_rng r;
    ag_rng_seed(&r, seed);
    omp_set_num_threads(2);
    ag_thread_tuner tt;
    ag_thread_tuner_init(&tt, 2);
    double secs = 0, one = fixed_steps(n, m, 1, &r), two = fixed_steps(n, m, 2, &r);
    long single = tuned_steps_timed(&tt, n, m, &r, &secs);
    *vs_best = secs / (one < two ? one : two);
    omp_set_num_threads(2);
    return single;
}

/* Beside one neighbour, two threads' step is often the faster (28 ms against one's 30), but
 * nearly half of them are held up (36 ms: not clearly slower, one at a time): the median step
 * says two threads, the mean, which is what a run takes, says one (31.6 ms). Over ten runs of
 * 1000 steps a tuner that went by medians of three ran 6343 steps on one thread, 2% slower
 * than one thread throughout; this one runs at least 8500 and stays within 1% of it. */
START_TEST(test_thread_tuner_counts_the_held_up_steps)
{
    const sim_machine straggler = { 28, 30, 36, 0.45 };
    long single = 0;
    double vs_best, sum = 0;
    for (uint64_t seed = 1; seed <= 10; seed++) {
        single += tuned_run(&straggler, 1000, seed, &vs_best);
        sum += vs_best;
    }
    ck_assert_int_ge(single, 8500);
    ck_assert_double_le(sum / 10, 1.01);
}
END_TEST

/* Close calls, each way: one thread 4% and 7% faster (one neighbour), two threads 7% faster,
 * and two threads 30% faster (two neighbours). The tuner keeps to the faster nearly throughout
 * (with a 5% margin and medians, one thread 4% faster was taken for as few as 838 of 1000
 * steps), and its run is within 1% of the faster fixed setting's. */
START_TEST(test_thread_tuner_close_calls)
{
    const sim_machine one_4 = { 31.2, 30, 0, 0 }, one_7 = { 32, 30, 0, 0 }, two_7 = { 28, 30, 0, 0 },
                      two_neighbours = { 32, 45, 0, 0 };
    double vs_best;
    for (uint64_t seed = 1; seed <= 5; seed++) {
        ck_assert_int_ge(tuned_run(&one_4, 1000, seed, &vs_best), 930);
        ck_assert_double_le(vs_best, 1.01);
        ck_assert_int_ge(tuned_run(&one_7, 1000, seed, &vs_best), 950);
        ck_assert_double_le(vs_best, 1.01);
        ck_assert_int_le(tuned_run(&two_7, 1000, seed, &vs_best), 30);
        ck_assert_double_le(vs_best, 1.01);
        ck_assert_int_le(tuned_run(&two_neighbours, 1000, seed, &vs_best), 10);
        ck_assert_double_le(vs_best, 1.01);
    }
}
END_TEST

/* A run as short as the bench's (114 steps, bench/busy.sh) beside one neighbour, one thread 4%
 * faster: the first probe decides most of it. Ten runs: a tuner with medians of three and a 5%
 * margin took one thread for 638 of their 1140 steps, and for 9 in its worst run. */
START_TEST(test_thread_tuner_short_run)
{
    const sim_machine one_4 = { 31.2, 30, 0, 0 };
    long single = 0;
    double vs_best;
    for (uint64_t seed = 1; seed <= 10; seed++) {
        long s = tuned_run(&one_4, 114, seed, &vs_best);
        ck_assert_int_ge(s, 60);
        single += s;
    }
    ck_assert_int_ge(single, 900);
}
END_TEST

Suite *parallel_suite(void)
{
    Suite *s = suite_create("parallel");
    TCase *t = tcase_create("gemm");
    ADD_TESTS(t, test_gemm_threaded_matches_reference, test_gemm_pair_matches_reference,
                 test_lane_reductions_match_plain_loops);
    suite_add_tcase(s, t);
    t = tcase_create("threads");
    ADD_TESTS(t, test_training_same_bits_on_one_thread_or_two, test_thread_tuner_takes_the_faster,
                 test_thread_tuner_counts_the_held_up_steps, test_thread_tuner_close_calls,
                 test_thread_tuner_short_run);
    suite_add_tcase(s, t);
    return s;
}
