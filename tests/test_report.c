/* test_report.c -- DIR/report.md, the report card of a run (issue 31; src/train/report.c).
 *
 *   card     ag_report_write alone: every field where the card says it (the machine's rows,
 *            the commit, the config as given, steps and tokens/s, the losses with "-" for
 *            none, the best checkpoint, the sample indented as a block, the pictures inline),
 *            and a report of nothing known still a card
 *   char_lm  a train run leaves DIR/report.md naming its config, its best checkpoint and its
 *            sample, while its stdout stays what it was (no line about the card) */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "attograd.h"
#include "proc.h"
#include "tcases.h"

#define HAS(text, want) ck_assert_msg(strstr(text, want), "no '%s' in:\n%s", want, text)

START_TEST(test_card_fields)
{
    char root[] = "/tmp/ag_report_XXXXXX";
    ck_assert(mkdtemp(root));
    const char *pics[] = {"loss.png", NULL};
    ag_run_report r = {.commit = "abc1234", .config_json = "{\"n_layer\": 1}", .kernels = "fast", .threads = 2,
                       .steps = 5, .iter = 7, .wall_s = 10, .tokens = 500, .train_loss = 1.23456, .val_loss = NAN,
                       .best = "ckpt-00000006", .best_loss = 1, .sample = "line one\n`````` two", .pictures = pics};
    ag_error err = {0};
    ck_assert_msg(ag_report_write(root, &r, &err) == AG_OK, "%s", err.msg);
    char *md = proc_read_file(proc_path(root, "report.md"), NULL);
    ck_assert_ptr_nonnull(md);
    HAS(md, "| CPU | ");
    HAS(md, " online, 2 threads used |");
    HAS(md, "| attograd kernels | fast, ");
    HAS(md, "commit abc1234\n");
    HAS(md, "```json\n{\"n_layer\": 1}\n```\n");
    HAS(md, "| steps | 5 in this run, ending at iteration 7 |\n");
    HAS(md, "| tokens/s | 50 |\n");
    HAS(md, "| final loss | train 1.2346, val - |\n");
    HAS(md, "| best checkpoint | ckpt-00000006 (loss 1.0000) |\n");
    HAS(md, "## Sample\n\n    line one\n    `````` two\n\n");
    HAS(md, "![loss.png](loss.png)\n");
    free(md);
    ag_run_report none = {.train_loss = NAN, .val_loss = NAN};   /* nothing known: still a card */
    ck_assert_msg(ag_report_write(root, &none, &err) == AG_OK, "%s", err.msg);
    md = proc_read_file(proc_path(root, "report.md"), NULL);
    HAS(md, "commit unknown\n");
    ck_assert_msg(!strstr(md, "tokens/s") && !strstr(md, "## Sample") && !strstr(md, "best checkpoint"), "%s", md);
    free(md);
    proc_remove_tree(root);
}
END_TEST

START_TEST(test_char_lm_card)
{
    char root[] = "/tmp/ag_report_XXXXXX";
    ck_assert(mkdtemp(root));
    size_t n;
    char *text = proc_make_corpus(4000, &n);
    proc_write_file(proc_path(root, "text.txt"), text, n);
    free(text);
    const char *args[] = {"train", "--data", proc_path(root, "text.txt"), "--out", proc_path(root, "run"), "--config",
                          "tiny", "--n-layer", "1", "--n-embd", "16", "--block-size", "8", "--batch-size", "4",
                          "--max-iters", "4", "--eval-interval", "2", "--eval-iters", "1", NULL};
    proc_result r;
    proc_run(root, args, proc_path(root, "train"), NULL, &r);
    ck_assert_msg(r.exited && r.code == 0, "train: %s\n%s", proc_status_str(&r), r.err);
    ck_assert_msg(!strstr(r.out, "report.md") && !strstr(r.out, "card"), "stdout changed: %s", r.out);
    char *md = proc_read_file(proc_path(root, "run/report.md"), NULL);
    ck_assert_msg(md, "no run/report.md");
    HAS(md, "# char_lm: report card\n");
    HAS(md, "\"n_layer\": 1");
    HAS(md, "| steps | 4 in this run, ending at iteration 4 |\n");
    HAS(md, "| best checkpoint | ckpt-0000000");
    HAS(md, "## Sample\n\n    ");
    struct stat st;
    if (stat(proc_path(root, "run/loss.png"), &st) == 0) HAS(md, "![loss.png](loss.png)\n");
    free(md);
    proc_result_free(&r);
    proc_remove_tree(root);
}
END_TEST

Suite *report_suite(void)
{
    Suite *s = suite_create("report");
    TCase *t = tcase_create("card");
    tcase_set_timeout(t, 120);
    ADD_TESTS(t, test_card_fields, test_char_lm_card);
    suite_add_tcase(s, t);
    return s;
}
