/* test_loop_ckpt.c -- char_lm's checkpoint files written and read by the library's trainer
 * (checkpoint.h: lm_ckpt_format, an ag_train_format; issue 31's first step of moving char_lm's
 * train onto ag_train_run): a GPT client of ag_train_run over a small text.
 *
 *   files    the run's DIR/latest holds char_lm's two files: lm_model_load_as and
 *            lm_train_state_load read them (the iteration, the optimizer's t, the text's hash,
 *            the evaluation saved at it, the best), as `char_lm sample` and --resume do
 *   resume   a run stopped at iteration 6 and resumed by ag_train_run from those files ends
 *            with the very weights of an unbroken run to 9 (float; f64 within the F32 files'
 *            rounding); the evaluation at 6 is the one the checkpoint saved, not made again */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "checkpoint.h"
#include "proc.h"
#include "tcases.h"

#ifdef AG_DOUBLE
#define RESUME_TOL 1e-5   /* checkpoints are F32: a resumed f64 run restarts from rounded weights */
#else
#define RESUME_TOL 0.0
#endif

enum { B = 4, T = 8 };

/* The client: lm_ckpt_user first (lm_ckpt_format reads it), then the text and a batch. */
typedef struct {
    lm_ckpt_user u;
    lm_config cfg;
    ag_corpus text;
    size_t off[B];
    int x[B * T], y[B * T];
    int evals;   /* g_eval's calls */
} gpt_client;

static ag_status g_draw(void *user, ag_rng *rng, ag_error *err)
{
    (void)err;
    gpt_client *g = user;
    ag_windows_draw(g->off, B, g->text.n, T, rng);
    return AG_OK;
}

static ag_status g_loss(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err)
{
    gpt_client *g = user;
    ag_windows_fill(g->x, g->y, g->text.ids, g->off + mb->first, mb->b, T);
    const ag_forward_opts fo = {.train = true, .seed = mb->seed};
    ag_gpt_forward(ctx, g->u.g, g->x, g->y, mb->b, T, &fo, loss);   // loss [1]
    return *loss ? AG_OK : ag_seterr(err, ag_ctx_status(ctx), "%s", ag_ctx_error(ctx));
}

static ag_status g_eval(void *user, ag_ctx *ctx, double *val, double *score, ag_error *err)
{
    gpt_client *g = user;
    g->evals++;
    ag_tensor *loss = NULL;
    ag_windows_fill(g->x, g->y, g->text.ids, (const size_t[B]){0, 8, 16, 24}, B, T);
    ag_gpt_forward(ctx, g->u.g, g->x, g->y, B, T, NULL, &loss);   // the same 4 windows each time
    *val = loss ? (double)loss->data[0] : NAN;
    *score = NAN;
    return loss ? AG_OK : ag_seterr(err, ag_ctx_status(ctx), "%s", ag_ctx_error(ctx));
}

/* g over root/text.txt: char_lm's tiny model at block size T, its text's fields in u.data. */
static void g_build(gpt_client *g, const char *root)
{
    memset(g, 0, sizeof *g);
    char path[256];
    snprintf(path, sizeof path, "%s/text.txt", root);
    ag_error err = {0};
    ck_assert_msg(ag_corpus_load(path, &g->text, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(lm_config_preset(&g->cfg, "tiny"), AG_OK);
    g->cfg.model.block_size = T;
    g->cfg.model.vocab_size = g->text.vocab.V;
    g->cfg.model.dropout = 0;
    ck_assert_ptr_nonnull(g->u.g = ag_gpt_new(&g->cfg.model, 11, &err));
    g->u.cfg = &g->cfg;
    g->u.vocab = &g->text.vocab;
    g->u.data.n_tokens = g->text.n;   /* a split as char_lm's: the last 300 tokens validate */
    g->u.data.n_val = 300;
    g->u.data.n_train = g->text.n - 300;
    g->u.data.data_hash = ag_ids_hash(g->text.ids, g->text.n);
}

static void g_free(gpt_client *g)
{
    ag_gpt_free(g->u.g);
    ag_corpus_free(&g->text);
}

/* g trained into root/name to `steps` (every 3), fresh or resumed. */
static void g_train(gpt_client *g, const char *root, const char *name, long steps, bool resume)
{
    char out[256];
    snprintf(out, sizeof out, "%s/%s", root, name);
    const ag_train_client c = {.name = "char_lm", .params = g->u.g->params, .user = g, .batch = B, .draw = g_draw,
                               .loss = g_loss, .evaluate = g_eval, .format = &lm_ckpt_format};
    const ag_train_opts o = {.out_dir = out, .steps = steps, .seed = 3, .every = 3, .resume = resume,
                             .sched = {.lr = 1e-3, .min_lr = 1e-4, .warmup_iters = 2, .lr_decay_iters = 9},
                             .adam = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.0}, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s: %s", name, err.msg);
    ck_assert_int_eq(r.step, steps);
}

static char root[64];

static void setup(void)
{
    strcpy(root, "/tmp/lm_loop_ckpt_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    char text[3000];
    size_t n = 0;
    for (int k = 0; n + 40 < sizeof text; k++)
        n += (size_t)snprintf(text + n, sizeof text - n, "the cat sat on mat %d and the dog ran.\n", k % 7);
    proc_write_file(proc_path(root, "text.txt"), text, n);
}

static void teardown(void) { proc_remove_tree(root); }

START_TEST(test_loop_writes_char_lm_files)
{
    gpt_client g;
    g_build(&g, root);
    g_train(&g, root, "run", 6, false);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/run", root);
    lm_model m;
    ag_error err = {0};
    ck_assert_msg(lm_model_load_as(dir, AG_CKPT_LATEST, &m, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.iter, 6);
    ck_assert_int_eq(m.vocab.V, g.text.vocab.V);
    lm_train_state st;
    ck_assert_msg(lm_train_state_load(dir, m.g, &st, &err) == AG_OK, "%s", err.msg);
    ck_assert(st.iter == 6 && st.step == 6 && st.n_tokens == g.text.n && st.data_hash == g.u.data.data_hash);
    ck_assert_msg(st.has_eval && isfinite(st.eval_train) && isfinite(st.eval_val), "the evaluation at 6: %g %g",
                  st.eval_train, st.eval_val);
    ck_assert(st.best_iter >= 3 && st.best_iter <= 6 && isfinite(st.best_loss));
    size_t differ = 0;   /* f64: the files are F32 */
    for (size_t i = 0; i < m.g->params->total; i++)
        differ += fabs((double)(m.g->params->data[i] - g.u.g->params->data[i])) > RESUME_TOL;
    ck_assert_msg(differ == 0, "%zu weights read back differ", differ);
    lm_model_free(&m);
    g_free(&g);
}
END_TEST

START_TEST(test_loop_resumes_char_lm_files)
{
    gpt_client u, r;
    g_build(&u, root);
    g_build(&r, root);
    g_train(&u, root, "unbroken", 9, false);
    g_train(&r, root, "resumed", 6, false);
    g_free(&r);
    g_build(&r, root);   /* a new process: the weights from the files alone */
    g_train(&r, root, "resumed", 9, true);
    ck_assert_int_eq(r.evals, 1);   /* at 9 alone: 6's came with its checkpoint */
    ck_assert(r.u.data.data_hash == u.u.data.data_hash);   /* the read gave the text's fields back */
    double most = 0;
    for (size_t i = 0; i < u.u.g->params->total; i++)
        most = fmax(most, fabs((double)(u.u.g->params->data[i] - r.u.g->params->data[i])));
    ck_assert_msg(most <= RESUME_TOL, "resumed weights differ from the unbroken run's by %g", most);
    g_free(&u);
    g_free(&r);
}
END_TEST

Suite *loop_ckpt_suite(void)
{
    Suite *s = suite_create("loop_ckpt");
    TCase *t = tcase_create("format");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    ADD_TESTS(t, test_loop_writes_char_lm_files, test_loop_resumes_char_lm_files);
    suite_add_tcase(s, t);
    return s;
}
