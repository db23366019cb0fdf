/* run_tests.c -- runs every suite in tests/ with check.
 *
 * The Makefile writes build/gen/suites.inc with one SUITE(name) line for each
 * `Suite *name_suite(void)` it finds in the test files, so a new test file needs no edit here.
 * CK_RUN_SUITE=softmax runs one suite, CK_INCLUDE_TAGS=gelu the test cases tagged so (make test-op);
 * CK_FORK=no runs all in one process (for sanitizers).
 * Exits non-zero when any test fails (llm.c's test_gpt2.c printed a verdict and returned 0), and
 * with 77 when no test ran (tests/run_suites.sh lets a filter by tag find none). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#define NO_TEST_RAN 77   /* automake's "skipped": still a failure to anyone who only tests != 0 */

#define SUITE(name) Suite *name##_suite(void);
#include "suites.inc"
#undef SUITE

int main(void)
{
    SRunner *sr = srunner_create(NULL);
#define SUITE(name) srunner_add_suite(sr, name##_suite());
#include "suites.inc"
#undef SUITE
    srunner_run_all(sr, CK_NORMAL);
    /* the suites assert; this runner only refuses to call a run with no test in it a pass
     * (an empty build/gen/suites.inc, or CK_RUN_SUITE naming no suite) */
    if (srunner_ntests_run(sr) == 0) {
        fprintf(stderr, "run_tests: no test ran\n");
        srunner_free(sr);
        return NO_TEST_RAN;
    }
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
