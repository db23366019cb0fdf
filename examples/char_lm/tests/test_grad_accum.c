/* test_grad_accum.c -- --grad-accum K in one process (src/train/ddp.h): each step runs
 * as K micro-batches of batch_size/K windows whose gradients add up to the whole batch's, so
 * the run is the same whatever K: the losses step for step and the final weights agree to
 * rounding (1e-5 in float, 1e-10 in double, where only the order of the sums differs). Also
 * the flags and the batch that K must divide. The same over MPI ranks: examples/char_lm/tests/mpi/test_mpi.c. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "alloc_count.h"
#include "checkpoint.h"
#include "cli.h"
#include "proc.h"
#include "train.h"
#include "tcases.h"

#ifdef AG_DOUBLE
#define TOL 1e-10
#else
#define TOL 1e-5
#endif
#define STEPS 12

static char dir[64];

static void setup(void)
{
    strcpy(dir, "/tmp/ag_accum_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    size_t n;
    char *text = proc_make_corpus(20000, &n);
    proc_write_file(proc_path(dir, "corpus.txt"), text, n);
    free(text);
}

static void teardown(void) { proc_remove_tree(dir); }

/* the tiny model, dropout 0, a batch of 12 that K = 1, 2, 3, 4, 6 divide */
static ag_status train(const char *out, int K, double dropout, double *losses, ag_error *err)
{
    lm_train_opts o;
    memset(&o, 0, sizeof o);
    o.data_path = proc_path(dir, "corpus.txt");
    o.out_dir = out;
    ck_assert_int_eq(lm_config_preset(&o.cfg, "tiny"), AG_OK);
    o.cfg.model.dropout = dropout;
    o.cfg.batch_size = 12;
    o.cfg.max_iters = o.cfg.lr_decay_iters = STEPS;
    o.cfg.warmup_iters = 4;
    o.cfg.eval_interval = 6;
    o.cfg.eval_iters = 2;
    o.grad_accum = K;
    o.losses = losses;
    o.n_losses = STEPS;
    lm_train_result r;
    return lm_train(&o, &r, err);
}

/* The largest difference between the weights of two checkpoints. The keys' bias of attention,
 * whose gradient is exactly 0, must still be exactly where it started, 0, in both: it takes no
 * gradient (src/nn/attention.c), so the backward's rounding noise never reaches Adam. */
static double max_weight_diff(const char *a, const char *b)
{
    lm_model ma, mb;
    ag_error e = {0};
    ck_assert_msg(lm_model_load_as(a, AG_CKPT_LATEST, &ma, &e) == AG_OK, "%s", e.msg);
    ck_assert_msg(lm_model_load_as(b, AG_CKPT_LATEST, &mb, &e) == AG_OK, "%s", e.msg);
    double worst = 0;
    const ag_params *P = ma.g->params;
    for (int k = 0; k < P->n; k++) {
        const ag_tensor *t = P->entries[k].t;
        bool key_bias = strstr(t->name, "attn.w_k.bias") != NULL;
        for (size_t i = P->entries[k].offset; i < P->entries[k].offset + ag_numel(t); i++) {
            double d = fabs((double)P->data[i] - (double)mb.g->params->data[i]);
            if (key_bias) ck_assert_msg(P->data[i] == 0 && mb.g->params->data[i] == 0, "%s moved", t->name);
            worst = fmax(worst, d);
        }
    }
    lm_model_free(&ma);
    lm_model_free(&mb);
    return worst;
}

/* K = 2, 3, 4 against one K = 1 run (one test: each test is a fork, and each had trained the
 * same K = 1 run again) */
START_TEST(test_micro_batches_change_nothing)
{
    static const int Ks[] = {2, 3, 4};
    double ref[STEPS], got[STEPS];
    ag_error e = {0};
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/k1", dir);
    ck_assert_msg(train(a, 1, 0, ref, &e) == AG_OK, "%s", e.msg);
    for (int k = 0; k < 3; k++) {
        snprintf(b, sizeof b, "%s/k%d", dir, Ks[k]);
        ck_assert_msg(train(b, Ks[k], 0, got, &e) == AG_OK, "%s", e.msg);
        for (int it = 0; it < STEPS; it++)
            ck_assert_msg(fabs(got[it] - ref[it]) <= TOL * fabs(ref[it]), "K=%d step %d: loss %.12g, K=1 %.12g", Ks[k],
                          it, got[it], ref[it]);
        double d = max_weight_diff(a, b);
        ck_assert_msg(d <= TOL, "K=%d: weights differ by %g from K=1 (%s)", Ks[k], d, AG_REAL_NAME);
    }
}
END_TEST

/* with dropout each micro-batch draws its own masks: not K=1's run, but a run of its own,
 * the same every time */
START_TEST(test_dropout_micro_batches_reproducible)
{
    double a[STEPS], b[STEPS];
    ag_error e = {0};
    char da[128], db[128];
    snprintf(da, sizeof da, "%s/d1", dir);
    snprintf(db, sizeof db, "%s/d2", dir);
    ck_assert_msg(train(da, 2, 0.1, a, &e) == AG_OK, "%s", e.msg);
    ck_assert_msg(train(db, 2, 0.1, b, &e) == AG_OK, "%s", e.msg);
    for (int it = 0; it < STEPS; it++) ck_assert(a[it] == b[it] && isfinite(a[it]));
    ck_assert(a[STEPS - 1] < a[0]);
}
END_TEST

/* Why the keys' bias takes no gradient (src/nn/attention.c): it adds q . b_k to every score of
 * a row, which no softmax sees. Any bias gives the loss of a zero bias, to float rounding, and
 * the gradient a backward computes for it when asked is rounding noise, far below that of the
 * keys' weights. */
START_TEST(test_key_bias_changes_nothing)
{
    lm_config c;
    ck_assert_int_eq(lm_config_preset(&c, "tiny"), AG_OK);
    c.model.vocab_size = 40;
    c.model.dropout = 0;
    ag_gpt *g = ag_gpt_new(&c.model, 7, NULL);
    ck_assert_ptr_nonnull(g);
    enum { B = 3 };
    int T = c.model.block_size, x[B * 64], y[B * 64];
    ag_rng rng;
    ag_rng_seed(&rng, 11);
    for (int i = 0; i < B * T; i++) x[i] = (int)ag_rng_below(&rng, 40), y[i] = (int)ag_rng_below(&rng, 40);
    ag_ctx *ctx = ag_ctx_new();
    double loss[2], g_bias = 0, g_weight = 0;
    for (int pass = 0; pass < 2; pass++) {   /* the bias 0 (as initialised), then N(0, 1) */
        for (int l = 0; pass && l < c.model.n_layer; l++) {
            char name[64];
            snprintf(name, sizeof name, "blocks.%d.attn.w_k.bias", l);
            ag_tensor *b = ag_params_find(g->params, name);
            ck_assert_msg(!b->requires_grad, "%s takes a gradient", name);
            b->requires_grad = true;   /* to see what a backward would leave there */
            for (size_t i = 0; i < ag_numel(b); i++) b->data[i] = (ag_real)ag_rng_normal(&rng);
        }
        ag_params_zero_grad(g->params);
        ag_ctx_reset(ctx);
        ag_tensor *l = NULL;
        ck_assert_ptr_nonnull(ag_gpt_forward(ctx, g, x, y, B, T, &(ag_forward_opts){ .train = true }, &l));
        ck_assert_int_eq(ag_backward(ctx, l), AG_OK);
        loss[pass] = (double)l->data[0];
    }
    ag_tensor *gb = ag_params_find(g->params, "blocks.0.attn.w_k.bias");
    ag_tensor *gw = ag_params_find(g->params, "blocks.0.attn.w_k.weight");
    for (size_t i = 0; i < ag_numel(gb); i++) g_bias = fmax(g_bias, fabs((double)gb->grad[i]));
    for (size_t i = 0; i < ag_numel(gw); i++) g_weight = fmax(g_weight, fabs((double)gw->grad[i]));
    ck_assert_msg(fabs(loss[1] - loss[0]) <= TOL * loss[0], "loss %.9g with a key bias, %.9g without", loss[1],
                  loss[0]);
    ck_assert_msg(g_weight > 0 && g_bias <= 1e-3 * g_weight, "key bias gradient %g, key weight's %g", g_bias, g_weight);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
}
END_TEST

START_TEST(test_batch_must_divide)
{
    ag_error e = {0};
    char d[128];
    snprintf(d, sizeof d, "%s/bad", dir);
    ck_assert_int_eq(train(d, 5, 0, NULL, &e), AG_ERR_ARG);
    ck_assert_msg(strstr(e.msg, "--batch-size 12 is not a multiple of 1 rank x --grad-accum 5 = 5") &&
                  strstr(e.msg, "try --batch-size 15"), "%s", e.msg);
    ck_assert(access(d, F_OK) != 0);   /* refused before anything was written */
}
END_TEST

START_TEST(test_flags)
{
    lm_cli cli;
    ag_error e = {0};
    char *good[] = {"char_lm", "train", "--data", "c", "--out", "d", "--grad-accum", "3", NULL};
    ck_assert_int_eq(lm_cli_parse(&cli, 8, good, &e), AG_OK);
    ck_assert_int_eq(cli.train.grad_accum, 3);
    char *plain[] = {"char_lm", "train", "--data", "c", "--out", "d", NULL};
    ck_assert_int_eq(lm_cli_parse(&cli, 6, plain, &e), AG_OK);
    ck_assert_int_eq(cli.train.grad_accum, 0);   /* one micro-batch */
    char *zero[] = {"char_lm", "train", "--data", "c", "--out", "d", "--grad-accum", "0", NULL};
    ck_assert_int_eq(lm_cli_parse(&cli, 8, zero, &e), AG_ERR_ARG);
    ck_assert_msg(strstr(e.msg, "--grad-accum must be in [1, "), "%s", e.msg);
    ag_error_clear(&e);
    char *mode[] = {"char_lm", "train", "--data", "c", "--out", "d", "--allreduce", "overlap", NULL};
    ck_assert_int_eq(lm_cli_parse(&cli, 8, mode, &e), AG_ERR_ARG);   /* gone: it did not pay (distributed.md) */
    ck_assert_msg(strstr(e.msg, "unknown flag '--allreduce'"), "%s", e.msg);
    ck_assert(cli.train.dist_timeout == LM_DIST_TIMEOUT_S && cli.train.progress == AG_PROGRESS_AUTO);
    char *dist[] = {"char_lm", "train", "--data", "c", "--out", "d", "--dist-timeout", "2.5", "--progress=lines", NULL};
    ck_assert_int_eq(lm_cli_parse(&cli, 9, dist, &e), AG_OK);
    ck_assert(cli.train.dist_timeout == 2.5 && cli.train.progress == AG_PROGRESS_LINES);
    const char *bad[][2] = {{"--dist-timeout", "-1"}, {"--dist-timeout", "soon"}, {"--progress", "never"}};
    for (int i = 0; i < 3; i++) {
        char *argv[] = {"char_lm", "train", "--data", "c", "--out", "d", (char *)bad[i][0], (char *)bad[i][1], NULL};
        ag_error_clear(&e);
        ck_assert_int_eq(lm_cli_parse(&cli, 8, argv, &e), AG_ERR_ARG);
        ck_assert_msg(strstr(e.msg, bad[i][0]) && strstr(e.msg, bad[i][1]), "%s", e.msg);
    }
}
END_TEST

/* lm_train_opts.before_step: the heap our code allocates counted over steps 2 and 3 */
static void count_steps(long it, ag_gpt *g, void *user)
{
    (void)g;
    if (it == 2) alloc_count_start();
    if (it == 4) alloc_count_stop(user);
}

/* The split step (2 micro-batches, each in 2 shards on replicas) allocates nothing after the
 * first: the replicas' ctxs, like the run's, have reached their high-water mark. */
START_TEST(test_split_steps_allocate_nothing)
{
    lm_train_opts o;
    memset(&o, 0, sizeof o);
    o.data_path = proc_path(dir, "corpus.txt");
    o.out_dir = proc_path(dir, "alloc");
    ck_assert_int_eq(lm_config_preset(&o.cfg, "tiny"), AG_OK);
    o.cfg.batch_size = 12;
    o.cfg.max_iters = o.cfg.lr_decay_iters = o.cfg.eval_interval = 5;
    o.cfg.eval_iters = 1;
    o.grad_accum = 2;
    o.shards = 2;
    long long peak = -1;
    o.before_step = count_steps;
    o.hook_user = &peak;
    lm_train_result r;
    ag_error e = {0};
    ck_assert_msg(lm_train(&o, &r, &e) == AG_OK, "%s", e.msg);
#ifndef AG_ARENA_DEBUG   /* the sanitizer build mallocs every arena block, every step */
    ck_assert_msg(peak == 0, "steps 2 and 3 allocated %lld bytes", peak);
#endif
}
END_TEST

Suite *grad_accum_suite(void)
{
    Suite *s = suite_create("grad_accum");
    TCase *tc = tcase_create("grad_accum");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    ADD_TESTS(tc, test_micro_batches_change_nothing, test_dropout_micro_batches_reproducible,
                  test_key_bias_changes_nothing, test_batch_must_divide, test_flags, test_split_steps_allocate_nothing);
    suite_add_tcase(s, tc);
    return s;
}
