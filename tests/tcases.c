/* tcases.c -- see tcases.h. */
#include "tcases.h"

void tcases_add(TCase *tc, const TTest *const *tests)
{
    for (; *tests; tests++) tcase_add_test(tc, *tests);
}
