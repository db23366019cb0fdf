/* test_progress.c -- a run's progress line (train/train.h: ag_progress), into a file read back:
 *
 *   lines    a file's log gets the progress line as a line of its own at the log steps alone
 *   tty      redrawn in place: "\r ESC[K" before it and before any other line, no newline after
 *            it, at most ten times a second (the final step always), a break ending it
 *   quiet    no log: nothing is due, nothing written
 *   ema      the step time smoothed: the first as it is, then 0.9 old + 0.1 new */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attograd.h"
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

Suite *progress_suite(void)
{
    Suite *s = suite_create("progress");
    TCase *t = tcase_create("line");
    ADD_TESTS(t, test_progress_lines, test_progress_tty, test_progress_quiet_and_ema);
    suite_add_tcase(s, t);
    return s;
}
