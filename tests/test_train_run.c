/* test_train_run.c -- ag_train_run (src/train/train.h) called in this process, as a program
 * with a model of its own calls it (lesson 19, examples/out_of_tree/trainer.c):
 *
 *   fresh_twice   a fresh run starts AdamW from zero moments: a second fresh run on the same
 *                 ag_params, its weights drawn again, ends with the very weights of a run on a
 *                 model built anew (the first run's m and v once leaked into it).
 *   resume_keeps_train_loss  a resume's repeated evaluation has the unbroken run's train_loss
 *                 (the checkpoint keeps the losses since the last evaluation); a checkpoint
 *                 without them, from before, resumes with that cell empty.
 *   too_big_refused  a client whose step the machine cannot hold is refused before DIR is made.
 *   moved_mid_run `mv DIR DIR.old; mkdir DIR` while the run goes on: its checkpoint goes into the
 *                 directory it locked (DIR.old), nothing into the new DIR, and the run stops
 *                 saying where it went (issue 35's guarantee, char_lm's since, the library's now). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "attograd.h"
#include "proc.h"

enum { IN = 2, OUT = 2, BATCH = 16 };

typedef struct {
    ag_params *P;
    ag_linear_layer fc;
    ag_real x[BATCH * IN];
    int y[BATCH];
    const char *move, *to;   /* moved_mid_run: the run directory renamed at the 5th draw, a new one made */
    int draws;
} tiny;

/* BATCH points from rng, class 1 above the diagonal */
static ag_status tiny_draw(void *user, ag_rng *rng, ag_error *err)
{
    (void)err;
    tiny *m = user;
    if (m->move && ++m->draws == 5) {
        ck_assert_int_eq(rename(m->move, m->to), 0);
        ck_assert_int_eq(mkdir(m->move, 0777), 0);
    }
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

/* m trained into root/name up to `steps` (a fresh run, or the one there with resume), evaluated every `every` */
static void tiny_train(tiny *m, const char *root, const char *name, long steps, long every, bool resume)
{
    char out[256];
    snprintf(out, sizeof out, "%s/%s", root, name);
    const ag_train_client c = {.name = "tiny", .params = m->P, .user = m, .batch = BATCH,
                               .draw = tiny_draw, .loss = tiny_loss, .evaluate = tiny_eval};
    const ag_train_opts o = {.out_dir = out, .steps = steps, .seed = 5, .every = every, .resume = resume,
                             .sched = {.lr = 0.1, .min_lr = 0.1, .lr_decay_iters = 30},
                             .adam = {0.9, 0.99, 1e-8, 0.0}, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s: %s", name, err.msg);
}

/* 30 fresh steps of m into root/name */
static void tiny_run(tiny *m, const char *root, const char *name) { tiny_train(m, root, name, 30, 30, false); }

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

/* dir/latest's state.safetensors written again without the keys of the losses since the last
 * evaluation, as a checkpoint from before them was; m holds its weights and moments. */
static void strip_losses(const char *dir, tiny *m)
{
    const char *keys[] = {"format", "step", "rng_state", "rng_inc", "weights", "best_loss", "best_step", "run_id",
                          "follows", "origin"};
    char path[512], vals[10][64];
    ag_st_meta meta[10];
    ag_error err = {0};
    snprintf(path, sizeof path, "%s/state.safetensors", proc_ckpt(dir));
    ag_st_file *f = ag_st_load_header(path, &err);
    ck_assert_msg(f && ag_st_meta_get(f, "loss_sum"), "%s: no loss_sum in its metadata", path);
    for (int i = 0; i < 10; i++) {
        ck_assert_ptr_nonnull(ag_st_meta_get(f, keys[i]));
        snprintf(vals[i], sizeof vals[i], "%s", ag_st_meta_get(f, keys[i]));
        meta[i] = (ag_st_meta){keys[i], vals[i]};
    }
    ag_st_free(f);
    ck_assert_int_eq(ag_ckpt_write_moments(path, m->P, meta, 10, &err), AG_OK);
}

/* The train_loss cell of root/name/metrics.csv's row "<row>,..." whose lr is set (the step's row). */
static void train_loss_cell(const char *root, const char *name, const char *row, char *cell)
{
    char path[512], head[32];
    snprintf(path, sizeof path, "%s/%s/metrics.csv", root, name);
    snprintf(head, sizeof head, "\n%s,", row);
    char *text = proc_read_file(path, NULL);
    ck_assert_ptr_nonnull(text);
    const char *at = strstr(text, head);
    ck_assert_msg(at != NULL, "%s: no row %s", path, row);
    at += strlen(head);
    for (int comma = 0; comma < 2; comma++) at = strchr(at, ',') + 1;   /* past lr and loss */
    size_t n = strcspn(at, ",");
    memcpy(cell, at, n);
    cell[n] = '\0';
    free(text);
}

/* A resume finds in the checkpoint the batch losses since the last evaluation: the evaluation
 * it repeats has the train_loss of the unbroken run; a checkpoint without them (older) still
 * resumes, that one cell empty. */
START_TEST(resume_keeps_train_loss)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", dir[256], cell[3][64];
    ck_assert_ptr_nonnull(mkdtemp(root));
    const char *names[] = {"unbroken", "resumed", "old"};
    for (int k = 0; k < 3; k++) {
        tiny m;
        tiny_build(&m);
        if (k) tiny_train(&m, root, names[k], 20, 10, false);
        snprintf(dir, sizeof dir, "%s/%s", root, names[k]);
        if (k == 2) strip_losses(dir, &m);
        tiny_train(&m, root, names[k], 30, 10, k > 0);
        train_loss_cell(root, names[k], "20", cell[k]);
        ag_params_free(m.P);
        ck_assert_msg(k != 1 || (cell[0][0] && strcmp(cell[1], cell[0]) == 0),
                      "step 20's train_loss: '%s' resumed, '%s' unbroken", cell[1], cell[0]);
    }
    ck_assert_msg(cell[2][0] == '\0', "a checkpoint without the losses: step 20's train_loss '%s', not empty",
                  cell[2]);
    proc_remove_tree(root);
}
END_TEST

/* A client's step_bytes that this machine cannot hold: the run is refused before DIR is made,
 * with the figures (train.h), as char_lm's own train is. */
START_TEST(too_big_refused)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(out, sizeof out, "%s/run", root);
    tiny m;
    tiny_build(&m);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .step_bytes = 1e18,
                               .draw = tiny_draw, .loss = tiny_loss, .evaluate = tiny_eval};
    const ag_train_opts o = {.out_dir = out, .steps = 1, .every = 1, .sched = {.lr = 0.1}, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_int_eq(ag_train_run(&c, &o, &r, &err), AG_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "tiny: a model of 6 parameters at batch 16 needs about 1000000.0 TB of memory for "
                         "one step, more than ") && strstr(err.msg, "; refused before allocating"), "%s", err.msg);
    ck_assert(access(out, F_OK) != 0);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

START_TEST(moved_mid_run)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", run[64], old[64];
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(run, sizeof run, "%s/run", root);
    snprintf(old, sizeof old, "%s/run.old", root);
    tiny m;
    tiny_build(&m);
    m.move = run;
    m.to = old;
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH,
                               .draw = tiny_draw, .loss = tiny_loss, .evaluate = tiny_eval};
    const ag_train_opts o = {.out_dir = run, .steps = 30, .seed = 5, .every = 10,
                             .sched = {.lr = 0.1, .min_lr = 0.1, .lr_decay_iters = 30},
                             .adam = {0.9, 0.99, 1e-8, 0.0}, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_int_eq(ag_train_run(&c, &o, &r, &err), AG_ERR_IO);
    ck_assert_msg(strstr(err.msg, "was moved to") && strstr(err.msg, "run.old") && strstr(err.msg, "step 10") &&
                  !strstr(err.msg, "/proc/"), "%s", err.msg);
    char latest[64];
    ck_assert_int_eq(ag_ckpt_pointer(old, AG_CKPT_LATEST, latest, &err), AG_OK);
    ck_assert_str_eq(latest, "ckpt-00000010");
    char found[256];
    ck_assert_int_eq(ag_ckpt_list(run, found, sizeof found), 0);   /* nothing written into the new one */
    ck_assert_int_ne(ag_ckpt_pointer(run, AG_CKPT_LATEST, latest, &err), AG_OK);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

Suite *train_run_suite(void)
{
    Suite *s = suite_create("train_run");
    TCase *tc = tcase_create("fresh");
    tcase_set_timeout(tc, 600);   /* a bound for a hang, on a loaded machine */
    tcase_add_test(tc, fresh_twice);
    tcase_add_test(tc, resume_keeps_train_loss);
    tcase_add_test(tc, too_big_refused);
    tcase_add_test(tc, moved_mid_run);
    suite_add_tcase(s, tc);
    return s;
}
