/* test_progress.c -- what a run shows while it goes on (train/train.h): its progress line
 * (ag_progress), into a file read back, and its loss.png redrawn (ag_plot_loss_again):
 *
 *   lines    a file's log gets the progress line as a line of its own at the log steps alone
 *   tty      redrawn in place: "\r ESC[K" before it and before any other line, no newline after
 *            it, at most ten times a second (the final step always), a break ending it
 *   quiet    no log: nothing is due, nothing written
 *   ema      the step time smoothed: the first as it is, then 0.9 old + 0.1 new
 *   again    loss.png drawn in the background, a drawing still in progress never doubled, the
 *            last one waited for: then loss.png is there and nothing is left running
 *   wait     a drawing waited for without asking how it went (done and err NULL): reaped */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "attograd.h"
#include "proc.h"
#include "tcases.h"

/* What was written to f, from its start (malloc'd). */
static char *written(FILE *f)
{
    long n = ftell(f);
    ck_assert(n >= 0);
    char *text = calloc((size_t)n + 1, 1);
    ck_assert_ptr_nonnull(text);
    rewind(f);
    ck_assert_int_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    return text;
}

START_TEST(test_progress_lines)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ag_progress p;
    ag_progress_init(&p, f, AG_PROGRESS_AUTO, 1);   /* a file, not a terminal */
    ck_assert(!p.tty);
    ck_assert(!ag_progress_due(&p, false, false) && ag_progress_due(&p, true, false));
    ag_progress_show(&p, "iter %d", 10);
    ag_progress_line(&p, "eval %d", 10);
    ag_progress_clear(&p);
    ag_progress_break(&p);
    char *t = written(f);
    ck_assert_str_eq(t, "iter 10\neval 10\n");
    free(t);
    fclose(f);
}
END_TEST

START_TEST(test_progress_tty)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ag_progress p;
    ag_progress_init(&p, f, AG_PROGRESS_TTY, 1);
    ck_assert(p.tty);
    ck_assert(ag_progress_due(&p, false, false));    /* never drawn yet */
    ag_progress_show(&p, "iter %d", 1);
    ck_assert(!ag_progress_due(&p, true, false));    /* drawn just now: not again within 0.1 s */
    ck_assert(ag_progress_due(&p, false, true));     /* the final step always */
    ag_progress_show(&p, "iter %d", 2);
    ag_progress_line(&p, "eval");
    ag_progress_show(&p, "iter %d", 3);
    ag_progress_break(&p);
    char *t = written(f);
    ck_assert_str_eq(t, "\r\033[Kiter 1\r\033[Kiter 2\r\033[Keval\n\r\033[Kiter 3\n");
    free(t);
    fclose(f);
    ag_progress_init(&p, stdout, AG_PROGRESS_LINES, 1);   /* lines: never redrawn, even on a terminal */
    ck_assert(!p.tty);
}
END_TEST

START_TEST(test_progress_quiet_and_ema)
{
    ag_progress p;
    ag_progress_init(&p, NULL, AG_PROGRESS_TTY, 1);
    ck_assert(!p.tty && !ag_progress_due(&p, true, true));
    ag_progress_show(&p, "nothing");   /* no log: no crash, nothing */
    ag_progress_line(&p, "nothing");
    ag_progress_step(&p, 2.0, true);
    ck_assert(p.ema_s == 2.0);
    ag_progress_step(&p, 1.0, false);
    ck_assert_msg(p.ema_s > 1.8999 && p.ema_s < 1.9001, "ema %g, not 1.9", p.ema_s);
    ag_progress_step(&p, 0.0, true);   /* a clock too coarse: never a rate of infinity */
    ck_assert(p.ema_s > 0);
}
END_TEST

START_TEST(test_progress_plot_again)
{
    char root[] = "/tmp/ag_progress_XXXXXX";
    ck_assert(mkdtemp(root));
    const char csv[] = "iter,lr,loss,train_loss,val_loss\n0,0.001,4.1,4.2,4.3\n1,0.001,4.0,,\n2,0.001,3.9,3.95,4.0\n";
    proc_write_file(proc_path(root, "metrics.csv"), csv, strlen(csv));
    const ag_loss_plot lp = {.title = "test", .floor = NAN, .with_val = true};
    ag_error err = {0};
    pid_t pid = 0;
    ag_status s = ag_plot_loss_again(root, &lp, &pid, false, &err);
    if (s && strstr(err.msg, "gnuplot not found")) {   /* a machine without gnuplot: nothing to see */
        proc_remove_tree(root);
        return;
    }
    ck_assert_msg(s == AG_OK && pid > 0, "%s", err.msg);
    pid_t first = pid;
    ck_assert_msg(ag_plot_loss_again(root, &lp, &pid, false, &err) == AG_OK, "%s", err.msg);
    ck_assert(pid > 0);   /* the first one, still drawing (skipped), or a new one after it */
    ck_assert_msg(ag_plot_loss_again(root, &lp, &pid, true, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(pid, 0);
    ck_assert_msg(kill(first, 0) != 0, "the first gnuplot (pid %ld) was never reaped", (long)first);
    struct stat sb;
    ck_assert_msg(stat(proc_path(root, "loss.png"), &sb) == 0 && sb.st_size > 0, "no loss.png");
    ck_assert_msg(ag_plot_loss_start(root, &lp, &pid, &err) == AG_OK && pid > 0, "%s", err.msg);
    (void)ag_plot_loss_wait(pid, true, NULL, root, NULL);   /* waited for, how it went not asked */
    ck_assert_msg(kill(pid, 0) != 0, "gnuplot (pid %ld) was never reaped", (long)pid);
    proc_remove_tree(root);
}
END_TEST

/* ag_log_written: a log that cannot be written (a full disk: /dev/full) is AG_ERR_IO at once,
 * saying what DIR keeps; a log written, or none, is AG_OK */
START_TEST(test_log_written)
{
    char dir[] = "/tmp/ag_log_written_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ag_error err = {0};
    ck_assert_int_eq(ag_log_written(NULL, dir, &err), AG_OK);
    FILE *ok = tmpfile();
    ck_assert_ptr_nonnull(ok);
    fprintf(ok, "a line\n");
    ck_assert_int_eq(ag_log_written(ok, dir, &err), AG_OK);
    fclose(ok);
    FILE *full = fopen("/dev/full", "w");
    ck_assert_ptr_nonnull(full);
    fprintf(full, "a line\n");
    ck_assert_int_eq(ag_log_written(full, dir, &err), AG_ERR_IO);
    ck_assert_str_eq(err.msg, "the log: write failed: No space left on device; stopped; no checkpoint was saved");
    fclose(full);
    rmdir(dir);
}
END_TEST

Suite *progress_suite(void)
{
    Suite *s = suite_create("progress");
    TCase *t = tcase_create("line");
    ADD_TESTS(t, test_progress_lines, test_progress_tty, test_progress_quiet_and_ema, test_log_written);
    suite_add_tcase(s, t);
    TCase *plot = tcase_create("loss.png");
    tcase_set_timeout(plot, 120);   /* gnuplot on a loaded machine */
    tcase_add_test(plot, test_progress_plot_again);
    suite_add_tcase(s, plot);
    return s;
}
