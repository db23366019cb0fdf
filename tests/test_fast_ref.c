/* test_fast_ref.c -- every fast kernel equals its reference kernel (see fastref.h): random
 * shapes with odd sizes and tails (lengths that are not a multiple of the 16 reduction lanes or
 * the 32-column blocks, single rows and columns), and shapes past AG_PAR_MIN so the threaded
 * paths run. One TCase per op; each loops over seeds. */
#include <check.h>
#include "fastref.h"

#define N_SEEDS 8

/* a dimension: mostly small and odd, sometimes 1, sometimes a lane multiple plus a tail */
static int pick_dim(uint64_t *st)
{
    static const int dims[] = { 1, 2, 3, 5, 7, 15, 16, 17, 31, 33, 47, 64, 65, 100 };
    return dims[fr_rand_int(st, 0, (int)(sizeof dims / sizeof dims[0]) - 1)];
}

// --- softmax (fast/softmax.c) ---

static ag_tensor *build_softmax(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_softmax(ctx, in[0]);
}

START_TEST(test_softmax_fast_equals_reference)
{
    uint64_t st = 1000 + (uint64_t)_i;
    fr_input x = { 3, { pick_dim(&st), pick_dim(&st), pick_dim(&st) }, -4, 4, false };
    FR_ASSERT("softmax", build_softmax, &x, 1, NULL, st);
    fr_input big = { 2, { 130, 129 }, -30, 30, false }; /* past AG_PAR_MIN: threaded rows */
    FR_ASSERT("softmax (threaded)", build_softmax, &big, 1, NULL, st);
}
END_TEST

Suite *fast_ref_suite(void)
{
    Suite *s = suite_create("fast_ref");
    TCase *tc = tcase_create("softmax");
    tcase_add_loop_test(tc, test_softmax_fast_equals_reference, 0, N_SEEDS);
    suite_add_tcase(s, tc);
    return s;
}
