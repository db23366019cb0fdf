/* test_train_run.c -- ag_train_run (src/train/train.h) called in this process, as a program
 * with a model of its own calls it (lesson 19, examples/out_of_tree/trainer.c):
 *
 *   fresh_twice   a fresh run starts AdamW from zero moments: a second fresh run on the same
 *                 ag_params, its weights drawn again, ends with the very weights of a run on a
 *                 model built anew (the first run's m and v once leaked into it). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "attograd.h"
#include "proc.h"

enum { IN = 2, OUT = 2, BATCH = 16 };

typedef struct {
    ag_params *P;
    ag_linear_layer fc;
    ag_real x[BATCH * IN];
    int y[BATCH];
} tiny;

/* BATCH points from rng, class 1 above the diagonal */
static ag_status tiny_draw(void *user, ag_rng *rng, ag_error *err)
{
    (void)err;
    tiny *m = user;
    for (int i = 0; i < BATCH; i++) {
        m->x[i * IN] = (ag_real)ag_rng_uniform(rng);
        m->x[i * IN + 1] = (ag_real)ag_rng_uniform(rng);
        m->y[i] = m->x[i * IN + 1] > m->x[i * IN];
    }
    return AG_OK;
}

/* The loss of a linear classifier on points [mb->first, mb->first + mb->b) of the batch */
static ag_status tiny_loss(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err)
{
    tiny *m = user;
    ag_tensor *x = ag_tensor_new2(ctx, mb->b, IN);                               // [b,IN]
    if (!x) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    memcpy(x->data, m->x + mb->first * IN, sizeof(ag_real) * mb->b * IN);
    *loss = ag_cross_entropy(ctx, ag_linear_layer_forward(ctx, &m->fc, x), m->y + mb->first);   // [b,OUT] -> [1]
    return *loss ? AG_OK : ag_seterr(err, AG_ERR_NOMEM, "%s", ag_ctx_error(ctx));
}

static ag_status tiny_eval(void *user, ag_ctx *ctx, double *val, double *score, ag_error *err)
{
    (void)user, (void)ctx, (void)err;
    *val = 1;
    *score = NAN;
    return AG_OK;
}

static void tiny_build(tiny *m)
{
    memset(m, 0, sizeof *m);
    ck_assert_ptr_nonnull(m->P = ag_params_new());
    ck_assert_int_eq(ag_linear_layer_init(&m->fc, m->P, "fc", IN, OUT, true, 1.0), AG_OK);
    ck_assert_int_eq(ag_params_alloc(m->P), AG_OK);
    ag_params_init(m->P, 3);
}

/* 30 fresh steps of m into root/name */
static void tiny_run(tiny *m, const char *root, const char *name)
{
    char out[256];
    snprintf(out, sizeof out, "%s/%s", root, name);
    const ag_train_client c = {.name = "tiny", .params = m->P, .user = m, .batch = BATCH,
                               .draw = tiny_draw, .loss = tiny_loss, .evaluate = tiny_eval};
    const ag_train_opts o = {.out_dir = out, .steps = 30, .seed = 5, .every = 30,
                             .sched = {.lr = 0.1, .min_lr = 0.1, .lr_decay_iters = 30},
                             .adam = {0.9, 0.99, 1e-8, 0.0}, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s: %s", name, err.msg);
}

START_TEST(fresh_twice)
{
    char root[] = "/tmp/ag_train_run_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny a, b;
    tiny_build(&a);
    tiny_build(&b);
    tiny_run(&a, root, "first");
    ag_params_init(a.P, 3);   /* the same weights as at the start, in the same store */
    tiny_run(&a, root, "again");
    tiny_run(&b, root, "built_anew");
    size_t differ = 0;
    for (size_t i = 0; i < a.P->total; i++) differ += a.P->data[i] != b.P->data[i];
    ck_assert_msg(differ == 0, "%zu of %zu weights of a second fresh run on the same ag_params differ from a run on "
                  "a model built anew: the first run's Adam moments leaked into it", differ, a.P->total);
    ag_params_free(a.P);
    ag_params_free(b.P);
    proc_remove_tree(root);
}
END_TEST

Suite *train_run_suite(void)
{
    Suite *s = suite_create("train_run");
    TCase *tc = tcase_create("fresh");
    tcase_set_timeout(tc, 600);   /* a bound for a hang, on a loaded machine */
    tcase_add_test(tc, fresh_twice);
    suite_add_tcase(s, tc);
    return s;
}
