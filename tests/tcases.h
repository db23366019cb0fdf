/* tcases.h -- a TCase's tests added in one call, in the order written:
 *     ADD_TESTS(tc, test_a, test_b, test_c);
 * is tcase_add_test(tc, test_a); tcase_add_test(tc, test_b); tcase_add_test(tc, test_c);
 * A loop test, or one that expects a signal or an exit code, keeps its own check call. */
#ifndef TESTS_TCASES_H
#define TESTS_TCASES_H

#include <check.h>

/* tcase_add_test for each of tests, a NULL-terminated list, in order */
void tcases_add(TCase *tc, const TTest *const *tests);
#define ADD_TESTS(tc, ...) tcases_add((tc), (const TTest *const[]){ __VA_ARGS__, NULL })

#endif
