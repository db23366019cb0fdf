/* test_lessons.c -- what the lessons (docs/lessons) promise of char_lm's output: `char_lm attn`
 * names each head's pattern (lesson 8), and a run's summary names every picture it wrote
 * (lessons 10 and 12: a learner told of loss.png alone never opened dynamics.png). */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "tools.h"
#include "train/train.h"   /* ag_lr_range_at, ag_lr_range_read: --lr-find */
#include "proc.h"
#include "tcases.h"

enum { T = 6 };

/* a causal [T,T] map: weight w on key key(t), the rest spread evenly over keys 0..t */
static void one_key(ag_real *a, double w, int (*key)(int))
{
    memset(a, 0, sizeof(ag_real) * T * T);
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= t; j++)
            a[t * T + j] = (ag_real)(t == 0 ? 1 : (j == key(t) ? w : 0) + (1 - w) / (t + 1));
}
static int self(int t) { return t; }
static int prev(int t) { return t - 1; }
static int first(int t) { (void)t; return 0; }

START_TEST(test_attn_head_patterns)
{
    ag_real a[T * T];
    ag_attn_head h;
    one_key(a, 0, self);
    ag_attn_head_summary(a, T, &h);
    ck_assert_str_eq(ag_chars_pattern_names[h.pattern], "uniform");
    ck_assert_double_eq_tol(h.entropy, h.uniform, 1e-6);
    struct { int (*key)(int); const char *name; } want[] = {
        {self, "self (diagonal)"}, {prev, "previous character"}, {first, "first position (sink)"}};
    for (int k = 0; k < 3; k++) {
        one_key(a, 0.9, want[k].key);
        ag_attn_head_summary(a, T, &h);
        ck_assert_str_eq(ag_chars_pattern_names[h.pattern], want[k].name);
        ck_assert(h.entropy < 0.9 * h.uniform && h.peak > 0.9);
    }
    one_key(a, 1, self);   /* sharp, but on the key two back (row 1: uniform): none of the three named */
    for (int t = 1; t < T; t++)
        for (int j = 0; j <= t; j++) a[t * T + j] = (ag_real)(t == 1 ? 0.5 : j == t - 2);
    ag_attn_head_summary(a, T, &h);
    ck_assert_str_eq(ag_chars_pattern_names[h.pattern], "mixed");
    ag_attn_head_summary(a, 1, &h);
    ck_assert_str_eq(ag_chars_pattern_names[h.pattern], "uniform");
    ck_assert_double_eq(h.peak, 1);
}
END_TEST

static char root[64];
/* a scratch folder with a small corpus, c.txt, in it */
static void root_setup(void)
{
    strcpy(root, "/tmp/ag_lessons_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    size_t n;
    char *text = proc_make_corpus(3000, &n);
    proc_write_file(proc_path(root, "c.txt"), text, n);
    free(text);
}
static void root_teardown(void) { proc_remove_tree(root); }

/* char_lm's stdout for args, run in root; the test fails unless it exits 0 */
static char *run(const char *const *args)
{
    char io[PATH_MAX];
    snprintf(io, sizeof io, "%s/io", root);
    proc_result r;
    proc_run(root, args, io, &(proc_opts){0}, &r);
    ck_assert_msg(r.exited && r.code == 0, "char_lm %s: %s\n%s", args[0], proc_status_str(&r), r.err);
    char *out = strdup(r.out);
    proc_result_free(&r);
    return out;
}

/* with --log-dynamics the summary names dynamics.png beside loss.png (with gnuplot), and attn
 * prints one line per head after the picture's */
START_TEST(test_summary_and_attn_lines)
{
    const char *train[] = {"train", "--data", "c.txt", "--out", "run", "--config", "tiny", "--n-layer", "1",
                           "--n-embd", "16", "--block-size", "8", "--batch-size", "2", "--max-iters", "11",
                           "--eval-interval", "10", "--eval-iters", "1", "--threads", "1", "--log-dynamics", NULL};
    char *out = run(train);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        ck_assert_msg(strstr(out, "picture: run/loss.png\n"), "%s", out);
        ck_assert_msg(strstr(out, "picture: run/dynamics.png\n"), "%s", out);
    }
    free(out);
    /* dynamics.png's update panel reaches below its 1e-3 line: autoscale put it on the frame */
    char *gp = proc_read_file(proc_path(root, "run/dynamics.gp"), NULL);
    ck_assert_msg(gp && strstr(gp, "\nlo = 4e-4\n") && strstr(gp, "\nset yrange [lo:*]\nplot 1e-3 "), "%s", gp);
    free(gp);
    const char *attn[] = {"attn", "--ckpt", "run", "--prompt", "the", "--layer", "0", "--out", "a.png", NULL};
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) return;   /* attn draws with gnuplot */
    out = run(attn);
    ck_assert_msg(strstr(out, "layer 0, head 0: ") && strstr(out, "layer 0, head 1: ") &&
                  !strstr(out, "layer 0, head 2: ") && strstr(out, "entropy "), "%s", out);
    free(out);
}
END_TEST

/* --trace-graph FILE.dot: the traced tape as Graphviz dot, which `dot -Tpng` draws; a path
 * that cannot be written is one error line and a non-zero exit */
START_TEST(test_trace_graph)
{
    const char *train[] = {"train", "--data", "c.txt", "--out", "g", "--config", "tiny", "--n-layer", "1",
                           "--trace-graph", "tape.dot", "--trace-only", NULL};
    free(run(train));
    char *dot = proc_read_file(proc_path(root, "tape.dot"), NULL);
    ck_assert_msg(dot && strstr(dot, "digraph tape {") && strstr(dot, "layernorm") && strstr(dot, "cross_entropy") &&
                  strstr(dot, " -> n") && strstr(dot, "blocks.0.attn.w_q.weight") && strstr(dot, "\n}\n"), "%s", dot);
    free(dot);
    if (system("command -v dot >/dev/null 2>&1") == 0) {
        char cmd[PATH_MAX * 2 + 64];
        snprintf(cmd, sizeof cmd, "dot -Tpng %s/tape.dot -o %s/tape.png", root, root);
        ck_assert_int_eq(system(cmd), 0);
    }
    const char *bad[] = {"train", "--data", "c.txt", "--out", "g2", "--config", "tiny", "--n-layer", "1",
                         "--trace-graph", "no/such/dir/tape.dot", "--trace-only", NULL};
    char io[PATH_MAX];
    snprintf(io, sizeof io, "%s/io", root);
    proc_result r;
    proc_run(root, bad, io, &(proc_opts){0}, &r);
    ck_assert_msg(r.exited && r.code != 0 && strstr(r.err, "--trace-graph no/such/dir/tape.dot: cannot write it") &&
                  proc_lines(r.err) == 1, "%s: %s", proc_status_str(&r), r.err);
    proc_result_free(&r);
}
END_TEST

/* the sweep: LO at the first step, --lr at the last, the same factor at every step */
START_TEST(test_lr_find_sweep)
{
    ck_assert_double_eq_tol(ag_lr_range_at(1e-4, 1, 5, 0), 1e-4, 1e-18);
    ck_assert_double_eq_tol(ag_lr_range_at(1e-4, 1, 5, 2), 1e-2, 1e-15);
    ck_assert_double_eq_tol(ag_lr_range_at(1e-4, 1, 5, 4), 1, 1e-14);
}
END_TEST

/* a made-up test whose loss falls fastest at lr 1e-3 (a logistic in ln lr) and blows up past
 * 1e-1: the reading finds the fall there (within the smoothing's lag) and the divergence */
START_TEST(test_lr_find_reading)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/lf", root);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    FILE *f = fopen(proc_path(path, "metrics.csv"), "w");
    fprintf(f, "iter,lr,loss,train_loss,val_loss,tokens_per_s\n");
    for (int i = 0; i < 200; i++) {
        double lr = 1e-5 * pow(1e5, i / 199.0), x = log(lr / 1e-3);
        fprintf(f, "%d,%g,%.6f,,,1\n", i, lr, 2 + 2 / (1 + exp(2 * x)) + (lr > 0.1 ? 50 * (lr - 0.1) : 0));
    }
    fclose(f);
    ag_lr_range r;
    ag_error e = {0};
    ag_status s = ag_lr_range_read(path, &r, &e);
    ck_assert_msg(s == AG_OK || s == AG_ERR_IO, "%s", e.msg);   /* AG_ERR_IO: no gnuplot, no picture */
    ck_assert_int_eq(r.steps, 200);
    ck_assert_msg(r.steepest_lr > 1e-3 && r.steepest_lr < 2.5e-3, "steepest at %g", r.steepest_lr);
    ck_assert_msg(r.diverged_lr > 0.1 && r.diverged_lr < 0.5, "diverged at %g", r.diverged_lr);
    ck_assert_msg(r.min_loss < 2.01, "lowest %g", r.min_loss);
}
END_TEST

/* --overfit-batch: one batch, learned by heart; the same run without it stays far above */
START_TEST(test_overfit_batch)
{
    const char *common[] = {"train", "--data", "c.txt", "--config", "tiny", "--n-layer", "1", "--n-embd", "32",
                            "--block-size", "16", "--batch-size", "2", "--max-iters", "80", "--lr", "1e-2",
                            "--warmup-iters", "5", "--eval-interval", "100", "--eval-iters", "1", "--threads", "1"};
    enum { NC = sizeof common / sizeof common[0] };
    const char *a[NC + 4], *b[NC + 3];
    memcpy(a, common, sizeof common), memcpy(b, common, sizeof common);
    a[NC] = "--out", a[NC + 1] = "of", a[NC + 2] = "--overfit-batch", a[NC + 3] = NULL;
    b[NC] = "--out", b[NC + 1] = "plain", b[NC + 2] = NULL;
    free(run(a));
    free(run(b));
    double last[2];
    const char *dirs[2] = {"of/metrics.csv", "plain/metrics.csv"};
    for (int k = 0; k < 2; k++) {
        char *m = proc_read_file(proc_path(root, dirs[k]), NULL), *row = strstr(m, "\n79,");
        ck_assert_msg(row && sscanf(row + 4, "%*[^,],%lf", &last[k]) == 1, "%s", m);
        free(m);
    }
    ck_assert_msg(last[0] < 0.5 && last[1] > 1.5, "step 79's loss: %g with --overfit-batch, %g without", last[0],
                  last[1]);
}
END_TEST

/* --init-scale: every drawn weight times the scale, the norms' gains and the biases as they
 * were; --norm none: no norm parameters at all, and a finite forward */
START_TEST(test_init_scale_and_no_norm)
{
    ag_gpt_config c = {.vocab_size = 11, .n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 8};
    ag_gpt *a = ag_gpt_new(&c, 15, NULL);
    c.init_scale = 10;
    ag_gpt *b = ag_gpt_new(&c, 15, NULL);
    ck_assert(a && b && a->params->total == b->params->total);
    for (int e = 0; e < a->params->n; e++) {
        const ag_param_entry *E = &a->params->entries[e];
        double want = E->init == AG_INIT_NORMAL ? 10 : 1;
        for (size_t i = 0; i < ag_numel(E->t); i++)
            ck_assert_msg(b->params->data[E->offset + i] == (ag_real)(want * a->params->data[E->offset + i]), "%s[%zu]",
                          E->t->name, i);
    }
    ag_gpt_free(a);
    ag_gpt_free(b);
    c.init_scale = 0, c.norm = AG_NO_NORM;
    ag_gpt *g = ag_gpt_new(&c, 15, NULL);
    ck_assert_ptr_nonnull(g);
    for (int e = 0; e < g->params->n; e++) ck_assert_msg(!strstr(g->params->entries[e].t->name, "ln"), "%s",
                                                         g->params->entries[e].t->name);
    int ids[8] = {1, 2, 3, 4, 5, 6, 7, 8}, tg[8] = {2, 3, 4, 5, 6, 7, 8, 9};
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *loss = NULL;
    ag_gpt_forward(ctx, g, ids, tg, 1, 8, &(ag_forward_opts){0}, &loss);
    ck_assert(loss && isfinite((double)loss->data[0]) && ag_backward(ctx, loss) == AG_OK);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
    c.init_scale = -1, c.norm = AG_LAYERNORM;
    ag_error e = {0};
    ck_assert_ptr_null(ag_gpt_new(&c, 15, &e));
    ck_assert_msg(strstr(e.msg, "init_scale must be in [0, 1e6] (got -1)"), "%s", e.msg);
}
END_TEST

/* a range test that would climb down is refused before anything runs, in one line */
START_TEST(test_lr_find_below_lr)
{
    const char *args[] = {"train", "--data", "c.txt", "--out", "r", "--config", "tiny", "--lr-find", "1e-2", NULL};
    char io[PATH_MAX];
    snprintf(io, sizeof io, "%s/io", root);
    proc_result r;
    proc_run(root, args, io, &(proc_opts){0}, &r);
    ck_assert_msg(r.exited && r.code == 2 && proc_lines(r.err) == 1 &&
                  strstr(r.err, "--lr-find 0.01 must be below --lr 0.001"), "%s: %s", proc_status_str(&r), r.err);
    proc_result_free(&r);
}
END_TEST

Suite *lessons_suite(void)
{
    Suite *s = suite_create("lessons");
    TCase *tc = tcase_create("attn_heads");
    tcase_add_test(tc, test_attn_head_patterns);
    tcase_add_test(tc, test_lr_find_sweep);
    tcase_add_test(tc, test_init_scale_and_no_norm);
    suite_add_tcase(s, tc);
    tc = tcase_create("reading");
    tcase_add_checked_fixture(tc, root_setup, root_teardown);
    tcase_add_test(tc, test_lr_find_reading);
    suite_add_tcase(s, tc);
    return s;
}

/* char_lm's output as the lessons quote it: the same char_lm process under either test build,
 * so `make test` runs these once, on float, and `make check` on double too (ONCE_SUITES) */
Suite *lessons_cli_suite(void)
{
    Suite *s = suite_create("lessons_cli");
    TCase *tc = tcase_create("output");
    tcase_add_checked_fixture(tc, root_setup, root_teardown);
    ADD_TESTS(tc, test_summary_and_attn_lines, test_trace_graph, test_overfit_batch, test_lr_find_below_lr);
    suite_add_tcase(s, tc);
    return s;
}
