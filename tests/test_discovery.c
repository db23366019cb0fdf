/* test_discovery.c -- a test file whose suite the Makefile cannot find fails the build, naming
 * the file, instead of being silently left out of `make test` (see the suites.inc rule).
 * Runs make on the repository's Makefile (tests run from the repository root) with TEST_SRC
 * pointing at made-up test files in a scratch directory. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "proc.h"

/* runs `make ... <dir>/b/gen/suites.inc` for the one test file `name` holding `text`; returns
 * make's exit status and its stderr in err */
static int make_suites(const char *dir, const char *name, const char *text, char *err, size_t errlen)
{
    char path[512], cmd[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    proc_write_file(path, text, strlen(text));
    snprintf(cmd, sizeof cmd, "make -s --no-print-directory B=%s/b TEST_SRC=%s %s/b/gen/suites.inc 2>&1", dir,
             path, dir);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(err, 1, errlen - 1, p);
    err[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(test_unregistered_suite_fails_the_build)
{
    char dir[] = "/tmp/ag_discovery_XXXXXX", out[4096];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    /* the spelling that used to be dropped without a word */
    int rc = make_suites(dir, "test_tanh.c", "Suite* tanh_suite(void) { return 0; }\n", out, sizeof out);
    ck_assert_msg(rc != 0, "make accepted a suite it cannot register: %s", out);
    ck_assert_msg(strstr(out, "test_tanh.c") != NULL, "the message does not name the file: %s", out);
    /* one good suite does not hide a second, misspelled one */
    rc = make_suites(dir, "test_two.c", "Suite *a_suite(void)\nSuite * b_suite(void)\n", out, sizeof out);
    ck_assert_msg(rc != 0 && strstr(out, "test_two.c:2") != NULL, "rc %d: %s", rc, out);
    /* no suite at all */
    rc = make_suites(dir, "test_none.c", "int x;\n", out, sizeof out);
    ck_assert_msg(rc != 0 && strstr(out, "test_none.c") != NULL, "rc %d: %s", rc, out);
    /* the house spelling is registered */
    rc = make_suites(dir, "test_ok.c", "Suite *fine_suite(void)\n", out, sizeof out);
    ck_assert_msg(rc == 0, "rc %d: %s", rc, out);
    char inc[512];
    snprintf(inc, sizeof inc, "%s/b/gen/suites.inc", dir);
    char *text = proc_read_file(inc, NULL);
    ck_assert_ptr_nonnull(text);
    ck_assert_str_eq(text, "SUITE(fine)\n");
    free(text);
    proc_remove_tree(dir);
}
END_TEST

Suite *discovery_suite(void)
{
    Suite *s = suite_create("discovery");
    TCase *tc = tcase_create("suites.inc");
    tcase_add_test(tc, test_unregistered_suite_fails_the_build);
    suite_add_tcase(s, tc);
    return s;
}
