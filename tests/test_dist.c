/* test_dist.c -- src/dist/dist_none.c, the transport every single-process program links: the
 * job is one rank, and every collective leaves the buffers as they were. (dist_mpi.c is tested
 * under mpirun by tests/mpi/dist_check.c and examples/char_lm/tests/mpi/test_mpi.c: `make test-mpi`.) */
#include <check.h>
#include <string.h>
#include "dist/dist.h"

START_TEST(test_dist_none_is_one_rank)
{
    ag_dist *d = NULL;
    ag_error e = {0};
    ck_assert_int_eq(ag_dist_init(&d, 0, &e), AG_OK);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(ag_dist_rank(d), 0);
    ck_assert_int_eq(ag_dist_size(d), 1);
    ck_assert_str_eq(ag_dist_backend(), "none");
    ck_assert_int_eq(ag_dist_rank(NULL), 0);
    ck_assert_int_eq(ag_dist_size(NULL), 1);

    ag_real g[3] = {1.5f, -2, 3};
    double l[2] = {0.25, 7};
    ck_assert_int_eq(ag_dist_allreduce(d, g, 3, AG_DIST_REAL, AG_DIST_SUM, &e), AG_OK);
    ck_assert_int_eq(ag_dist_allreduce(d, l, 2, AG_DIST_DOUBLE, AG_DIST_MAX, &e), AG_OK);
    ck_assert_int_eq(ag_dist_allreduce_start(d, g + 1, 2, AG_DIST_REAL, &e), AG_OK);
    ck_assert_int_eq(ag_dist_progress(d, &e), AG_OK);
    ck_assert_int_eq(ag_dist_wait(d, &e), AG_OK);
    ck_assert_int_eq(ag_dist_bcast(d, l, sizeof l, 0, &e), AG_OK);
    ck_assert_int_eq(ag_dist_barrier(d, &e), AG_OK);
    ag_dist_set_timeout(d, 5);   /* nothing to wait for */
    ck_assert_int_eq(ag_dist_voice(d), -1);
    char mine[5] = "abcd", all[5] = "";
    ck_assert_int_eq(ag_dist_allgather(d, mine, all, sizeof mine, &e), AG_OK);   /* one rank's: a copy */
    ck_assert_str_eq(all, "abcd");
    ck_assert(g[0] == 1.5f && g[1] == -2 && g[2] == 3);
    ck_assert(l[0] == 0.25 && l[1] == 7);
    ck_assert_int_eq(e.status, AG_OK);
    ag_dist_end(d, true);
    ag_dist_end(NULL, false);
}
END_TEST

Suite *dist_suite(void)
{
    Suite *s = suite_create("dist");
    TCase *tc = tcase_create("none");
    tcase_add_test(tc, test_dist_none_is_one_rank);
    suite_add_tcase(s, tc);
    return s;
}
