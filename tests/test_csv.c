/* test_csv.c -- a run's CSV files through the library alone (train/train.h: ag_csv_open).
 *
 *   fresh    a new run's file is its header alone, whatever was there
 *   resume   resumed at iteration 3, the rows 0..2 stay and 3.. go, cut in place (the same
 *            file: no copy needed); under another header, the kept rows move under the new one
 *   fifo     a FIFO at the name is replaced, never opened to read (which would block)
 *   layers   ag_csv_layer_head: the per-layer columns, layer by layer, each name of a layer in turn */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "attograd.h"
#include "proc.h"
#include "tcases.h"

static const char rows[] = "iter,loss\n0,4.1\n1,4.0\n2,3.9\n3,3.8\n4,3.7\n";

/* ag_csv_open of dir/m.csv with head from start, one row "9,0.5" appended, and the file read back. */
static char *open_append(const char *dir, const char *head, long start)
{
    FILE *csv = NULL;
    ag_error err = {0};
    ck_assert_msg(ag_csv_open(dir, "m.csv", head, start, &csv, &err) == AG_OK, "%s", err.msg);
    ck_assert(fputs("9,0.5\n", csv) >= 0 && fclose(csv) == 0);
    char *text = proc_read_file(proc_path(dir, "m.csv"), NULL);
    ck_assert_ptr_nonnull(text);
    return text;
}

START_TEST(test_csv_fresh_and_resume)
{
    char root[] = "/tmp/ag_csv_XXXXXX";
    ck_assert(mkdtemp(root));
    proc_write_file(proc_path(root, "m.csv"), rows, strlen(rows));
    char *t = open_append(root, "iter,loss\n", -1);   /* a fresh run: what was there goes */
    ck_assert_str_eq(t, "iter,loss\n9,0.5\n");
    free(t);
    proc_write_file(proc_path(root, "m.csv"), rows, strlen(rows));
    struct stat a, b;
    ck_assert_int_eq(stat(proc_path(root, "m.csv"), &a), 0);
    t = open_append(root, "iter,loss\n", 3);
    ck_assert_str_eq(t, "iter,loss\n0,4.1\n1,4.0\n2,3.9\n9,0.5\n");
    ck_assert_int_eq(stat(proc_path(root, "m.csv"), &b), 0);
    ck_assert_msg(a.st_ino == b.st_ino, "not cut in place: a new file");
    free(t);
    proc_write_file(proc_path(root, "m.csv"), rows, strlen(rows));
    t = open_append(root, "iter,loss,extra\n", 2);   /* other columns: rewritten, rows 0 and 1 kept */
    ck_assert_str_eq(t, "iter,loss,extra\n0,4.1\n1,4.0\n9,0.5\n");
    free(t);
    proc_remove_tree(root);
}
END_TEST

START_TEST(test_csv_fifo_replaced)
{
    char root[] = "/tmp/ag_csv_XXXXXX";
    ck_assert(mkdtemp(root));
    ck_assert_int_eq(mkfifo(proc_path(root, "m.csv"), 0644), 0);
    char *t = open_append(root, "iter,loss\n", 5);   /* would block forever if read */
    ck_assert_str_eq(t, "iter,loss\n9,0.5\n");
    free(t);
    proc_remove_tree(root);
}
END_TEST

START_TEST(test_csv_layer_head)
{
    const char *const cols[] = {"a", "b", NULL};
    char *h = ag_csv_layer_head("iter,lr", cols, 2);
    ck_assert_ptr_nonnull(h);
    ck_assert_str_eq(h, "iter,lr,a_L0,b_L0,a_L1,b_L1\n");
    free(h);
    h = ag_csv_layer_head("iter", cols, 0);   /* no layer: the first columns alone */
    ck_assert_ptr_nonnull(h);
    ck_assert_str_eq(h, "iter\n");
    free(h);
}
END_TEST

Suite *csv_suite(void)
{
    Suite *s = suite_create("csv");
    TCase *t = tcase_create("open");
    tcase_set_timeout(t, 30);
    ADD_TESTS(t, test_csv_fresh_and_resume, test_csv_fifo_replaced, test_csv_layer_head);
    suite_add_tcase(s, t);
    return s;
}
