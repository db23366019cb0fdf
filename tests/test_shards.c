/* test_shards.c -- ag_gpt_shards (nn.h): a training pass with the batch split over the threads
 * computes the plain pass's loss and gradients (to rounding: 1e-5 relative in float, 1e-10 in
 * double, where only the order of the sums differs), the same bits on one thread and two, with
 * shards of unequal size or none at all, after the weights moved, and after a failing pass; and
 * refuses what it cannot split. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "attograd.h"
#include "tcases.h"

#ifdef AG_DOUBLE
#define TOL 1e-10
#else
#define TOL 1e-5
#endif
/* big enough that the plain pass cuts its products and runs its loops on both threads
 * (parallel.c's 2^18 multiply-adds, AG_PAR_MIN's 16384 elements): the shards' ops, which run
 * whole, are compared with those */
enum { V = 11, T = 32, BMAX = 8 };

static ag_gpt *tiny_gpt(double dropout)
{
    ag_gpt_config cfg = { .vocab_size = V, .n_layer = 2, .n_head = 2, .n_embd = 64, .block_size = T,
                          .dropout = dropout };
    ag_gpt *g = ag_gpt_new(&cfg, 7, NULL);
    ck_assert_ptr_nonnull(g);
    return g;
}

/* ids and targets [BMAX*T] from a fixed stream */
static void batch(int *ids, int *targets)
{
    ag_rng rng;
    ag_rng_seed(&rng, 99);
    for (int i = 0; i < BMAX * T; i++) ids[i] = (int)ag_rng_below(&rng, V), targets[i] = (int)ag_rng_below(&rng, V);
}

/* a model, a ctx, n shards of them and a batch */
typedef struct {
    ag_gpt *g;
    ag_ctx *ctx;
    ag_gpt_shards *s;
    int ids[BMAX * T], targets[BMAX * T];
} rig;

static void rig_init(rig *r, int n, double dropout)
{
    r->g = tiny_gpt(dropout);
    r->ctx = ag_ctx_new();
    r->s = ag_gpt_shards_new(r->g, r->ctx, n, NULL);
    ck_assert_ptr_nonnull(r->s);
    batch(r->ids, r->targets);
}

static void rig_free(rig *r)
{
    ag_gpt_shards_free(r->s);
    ag_ctx_free(r->ctx);
    ag_gpt_free(r->g);
}

/* a plain pass of b windows in a ctx of its own, dropout masks from seed: g's gradients +=
 * dloss dl/dW; returns its mean loss l */
static double pass_into(ag_gpt *g, const int *ids, const int *targets, int b, uint64_t seed, ag_real dloss)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *loss = NULL;
    ag_gpt_forward(ctx, g, ids, targets, b, T, &(ag_forward_opts){ .train = true, .seed = seed }, &loss);
    ck_assert_ptr_nonnull(loss);
    ck_assert_int_eq(ag_backward_from(ctx, loss, &dloss), AG_OK);
    double l = (double)loss->data[0];
    ag_ctx_free(ctx);
    return l;
}

/* the plain pass: g's gradients from zero; returns the loss */
static double plain_pass(ag_gpt *g, const int *ids, const int *targets, int B)
{
    ag_params_zero_grad(g->params);
    return pass_into(g, ids, targets, B, 0, 1);
}

/* the same as n shards on `threads` threads; g's gradients from zero */
static double sharded_pass(ag_gpt_shards *s, ag_gpt *g, const int *ids, const int *targets, int B, int threads)
{
    int old = omp_get_max_threads();
    omp_set_num_threads(threads);
    ag_params_zero_grad(g->params);
    double l = NAN;
    ag_error err = { 0 };
    ag_status st = ag_gpt_shards_pass(s, ids, targets, B, T, &(ag_forward_opts){ .train = true }, 1, &l, &err);
    omp_set_num_threads(old);
    ck_assert_msg(st == AG_OK, "%s", err.msg);
    ag_ctx_reset(ag_gpt_shards_ctx(s, 0));
    return l;
}

/* |a - b| <= TOL max|a| over every gradient, and the loss to TOL */
static void assert_close(const ag_real *a, const ag_real *b, size_t n, double la, double lb)
{
    double most = 0, diff = 0;
    for (size_t i = 0; i < n; i++) {
        most = fmax(most, fabs((double)a[i]));
        diff = fmax(diff, fabs((double)a[i] - (double)b[i]));
    }
    ck_assert_double_gt(most, 0);
    ck_assert_msg(diff <= TOL * most, "gradients differ by %g (largest %g)", diff, most);
    ck_assert_msg(fabs(la - lb) <= TOL * fabs(la), "losses %.9g and %.9g", la, lb);
}

/* the plain pass, then the shards on two threads: the same loss and gradients to rounding;
 * then a step of g's weights along the gradients */
static void assert_shards_match_plain(ag_gpt_shards *s, ag_gpt *g, const int *ids, const int *targets, int B)
{
    size_t total = g->params->total;
    ag_real *want = malloc(total * sizeof *want);
    double lp = plain_pass(g, ids, targets, B);
    memcpy(want, g->params->grad, total * sizeof *want);
    double ls = sharded_pass(s, g, ids, targets, B, 2);
    assert_close(want, g->params->grad, total, lp, ls);
    for (size_t i = 0; i < total; i++) g->params->data[i] -= (ag_real)0.5 * want[i];
    free(want);
}

/* n shards of B windows against the plain pass, then again after the weights moved (the
 * replicas read them; their gradients were cleared after the first pass) */
static void check_against_plain(int n, int B)
{
    rig r;
    rig_init(&r, n, 0);
    for (int round = 0; round < 2; round++) assert_shards_match_plain(r.s, r.g, r.ids, r.targets, B);
    rig_free(&r);
}

START_TEST(two_even_shards_equal_the_plain_pass) { check_against_plain(2, 6); }
END_TEST

START_TEST(uneven_shards_weigh_by_their_windows) { check_against_plain(2, 7); }   /* 3 and 4 windows */
END_TEST

START_TEST(a_shard_without_windows_is_skipped) { check_against_plain(3, 2); }   /* 0, 1 and 1 */
END_TEST

/* a copy of g's gradients (the caller frees it, or assert_same_bits does) */
static ag_real *grads_of(const ag_gpt *g)
{
    ag_real *c = malloc(g->params->total * sizeof *c);
    ck_assert_ptr_nonnull(c);
    memcpy(c, g->params->grad, g->params->total * sizeof *c);
    return c;
}

/* the same loss and every gradient of g the same bits as `want` (freed) */
static void assert_same_bits(ag_real *want, const ag_gpt *g, double lw, double l)
{
    ck_assert_msg(l == lw, "losses %.17g and %.17g", lw, l);
    ck_assert_int_eq(memcmp(want, g->params->grad, g->params->total * sizeof *want), 0);
    free(want);
}

/* one thread runs the shards in turn, two side by side: the same bits (with dropout on, whose
 * masks differ from the plain pass's, so this is the check there) */
START_TEST(one_thread_and_two_give_the_same_bits)
{
    rig r;
    rig_init(&r, 2, 0.2);
    double l1 = sharded_pass(r.s, r.g, r.ids, r.targets, BMAX, 1);
    ag_real *one = grads_of(r.g);
    assert_same_bits(one, r.g, l1, sharded_pass(r.s, r.g, r.ids, r.targets, BMAX, 2));
    rig_free(&r);
}
END_TEST

/* with dropout, shard j is the plain pass of its own windows under its own masks, those of
 * seed ag_seed_mix(S, j), weighed b_j / B: so n shards draw masks from the same distribution
 * as one, and differ from it only by which masks they drew (3 and 4 windows of 7 here) */
START_TEST(dropout_shards_are_plain_passes_with_their_own_masks)
{
    rig r;
    rig_init(&r, 2, 0.2);
    const uint64_t S = 12345;
    const int B = 7, first[2] = { 0, 3 }, b[2] = { 3, 4 };
    ag_params_zero_grad(r.g->params);
    double want_loss = 0;
    for (int j = 0; j < 2; j++)
        want_loss += pass_into(r.g, r.ids + first[j] * T, r.targets + first[j] * T, b[j], ag_seed_mix(S, (uint64_t)j),
                               (ag_real)b[j] / B) * b[j] / B;
    ag_real *want = grads_of(r.g);
    ag_params_zero_grad(r.g->params);
    double l = NAN;
    ag_error err = { 0 };
    ck_assert_int_eq(ag_gpt_shards_pass(r.s, r.ids, r.targets, B, T, &(ag_forward_opts){ .train = true, .seed = S }, 1,
                                        &l, &err), AG_OK);
    assert_close(want, r.g->params->grad, r.g->params->total, want_loss, l);
    free(want);
    rig_free(&r);
}
END_TEST

/* one shard is the plain pass itself, bit for bit: its ops split over both threads, the
 * pass's own dropout masks and dloss (a micro-batch's 1/3); what `--shards 1` takes */
START_TEST(one_shard_is_the_plain_pass_bit_for_bit)
{
    rig r;
    rig_init(&r, 1, 0.2);
    const ag_real third = (ag_real)(1.0 / 3);
    const ag_forward_opts fo = { .train = true, .seed = 5 };
    ag_params_zero_grad(r.g->params);
    double lp = pass_into(r.g, r.ids, r.targets, BMAX, fo.seed, third);
    ag_real *want = grads_of(r.g);
    ag_params_zero_grad(r.g->params);
    double l = NAN;
    ag_error err = { 0 };
    ck_assert_int_eq(ag_gpt_shards_pass(r.s, r.ids, r.targets, BMAX, T, &fo, third, &l, &err), AG_OK);
    assert_same_bits(want, r.g, lp, l);
    rig_free(&r);
}
END_TEST

/* a replica computes with g's weights and owns none of its own, nor Adam's moments */
START_TEST(a_replica_shares_the_weights_and_keeps_its_gradients)
{
    ag_gpt *g = tiny_gpt(0);
    ag_error err = { 0 };
    ag_gpt *r = ag_gpt_new_replica(g, &err);
    ck_assert_msg(r != NULL, "%s", err.msg);
    ck_assert_ptr_null(r->params->data);
    ck_assert_ptr_null(r->params->m);
    ck_assert_ptr_nonnull(r->params->grad);
    ck_assert_ptr_ne(r->params->grad, g->params->grad);
    for (int i = 0; i < g->params->n; i++) {
        const ag_tensor *a = g->params->entries[i].t, *b = r->params->entries[i].t;
        ck_assert_ptr_eq(a->data, b->data);
        ck_assert_int_eq(a->requires_grad, b->requires_grad);
        ck_assert_str_eq(a->name, b->name);
    }
    ag_gpt_free(r);
    ag_gpt_free(g);
}
END_TEST

/* the split's level above the shards: N ranks x K micro-batches tile the step's windows in
 * order, each with its own seed, their backward seeds summing to 1; alone, the step itself */
START_TEST(micro_batches_tile_the_step)
{
    ag_micro mb;
    ck_assert(ag_micro_of(1, 0, 1, 0, 12, 77, &mb));
    ck_assert(mb.first == 0 && mb.b == 12 && mb.seed == 77 && mb.dloss == 1);
    ck_assert(!ag_micro_of(1, 0, 1, 1, 12, 77, &mb));
    int next = 0;
    double dsum = 0;
    for (int rank = 0; rank < 2; rank++)
        for (int j = 0; ag_micro_of(2, rank, 3, j, 12, 77, &mb); j++) {
            ck_assert_int_eq(mb.first, next);
            ck_assert_int_eq(mb.b, 2);
            ck_assert(mb.seed == ag_seed_mix(77, (uint64_t)(rank * 3 + j)));
            next += mb.b;
            dsum += (double)mb.dloss;
        }
    ck_assert_int_eq(next, 12);
    ck_assert_double_eq_tol(dsum, 1, 1e-6);
}
END_TEST

/* a target out of the vocabulary in window w of 6: the pass fails with cross_entropy's reason
 * (read from the replica's ctx before the pass resets it, when w is in the second shard),
 * while the other shard took its gradients; the next pass (good targets) is right again: the
 * replica's were cleared */
static void check_failing_window(int w)
{
    rig r;
    rig_init(&r, 2, 0);
    int bad[BMAX * T];
    memcpy(bad, r.targets, sizeof bad);
    bad[w * T + 2] = V + 3;
    ag_error err = { 0 };
    double l;
    ag_params_zero_grad(r.g->params);
    ag_status st = ag_gpt_shards_pass(r.s, r.ids, bad, 6, T, &(ag_forward_opts){ .train = true }, 1, &l, &err);
    ck_assert_int_eq(st, AG_ERR_ARG);
    ck_assert_int_eq(err.status, st);
    ck_assert_msg(strstr(err.msg, "target 14 at row 2 is outside [0, 11)") != NULL, "%s", err.msg);
    ag_ctx_reset(r.ctx);
    assert_shards_match_plain(r.s, r.g, r.ids, r.targets, 6);
    rig_free(&r);
}

START_TEST(a_failing_first_shard_says_why_and_leaves_no_gradient_behind) { check_failing_window(0); }
END_TEST

START_TEST(a_failing_replica_says_why_and_leaves_no_gradient_behind) { check_failing_window(3); }
END_TEST

START_TEST(what_cannot_be_split_is_refused)
{
    rig r;
    rig_init(&r, 2, 0);
    ag_error err = { 0 };
    ck_assert_ptr_null(ag_gpt_shards_new(r.g, r.ctx, 0, &err));
    ck_assert_str_eq(err.msg, "ag_gpt_shards_new: n must be >= 1");
    double l;
    ag_error_clear(&err);
    ck_assert_int_eq(ag_gpt_shards_pass(r.s, r.ids, r.targets, 0, T, &(ag_forward_opts){ .train = true }, 1, &l,
                                        &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "ag_gpt_shards_pass: B must be >= 1");
    ag_tensor *slots[2] = { NULL, NULL };
    ag_error_clear(&err);
    ck_assert_int_eq(ag_gpt_shards_pass(r.s, r.ids, r.targets, 2, T, &(ag_forward_opts){ .record_attention = slots },
                                        1, &l, &err), AG_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "no recorded attention"));
    rig_free(&r);
}
END_TEST

Suite *shards_suite(void)
{
    Suite *s = suite_create("shards");
    TCase *tc = tcase_create("core");
    ADD_TESTS(tc, two_even_shards_equal_the_plain_pass, uneven_shards_weigh_by_their_windows,
                  a_shard_without_windows_is_skipped, one_thread_and_two_give_the_same_bits,
                  dropout_shards_are_plain_passes_with_their_own_masks,
                  one_shard_is_the_plain_pass_bit_for_bit, micro_batches_tile_the_step,
                  a_replica_shares_the_weights_and_keeps_its_gradients,
                  a_failing_first_shard_says_why_and_leaves_no_gradient_behind,
                  a_failing_replica_says_why_and_leaves_no_gradient_behind, what_cannot_be_split_is_refused);
    suite_add_tcase(s, tc);
    return s;
}
