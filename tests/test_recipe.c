/* test_recipe.c -- the library's recipe choice (train/recipe.h) from given step times and a
 * simulated clock, nothing timed (char_lm's recipes on it: examples/char_lm/tests/test_budget.c):
 *
 *   pick   each candidate's step time by its cost ratio, the steps it gets in the budget left,
 *          the last that gets its min_steps (else the first); a bad table is one line
 *   line   the choice and why, without and with a next one up
 *   close  the next one up close to its min_steps: its step timed too, the pick again
 *   probe  three warm-up steps not timed, then steps until 2% of the budget, their mean; the
 *          ranks' sum; a stop (here or on another rank) makes it 0; a step's error ends it */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include "tcases.h"
#include "train/recipe.h"

static const ag_recipe table[3] = {{"S", 1, 0}, {"M", 2, 100}, {"L", 4, 300}};

START_TEST(test_recipe_pick)
{
    ag_recipe_choice ch;
    ag_error e = {0};
    /* M at 0.5 s: (201 - 0 - 1) 0.95 = 190 s left; S 1900 steps, M 380, L 95 (< 300): M */
    ck_assert_int_eq(ag_recipe_pick(table, 3, 1, 201, 0, 0.5, &ch, &e), AG_OK);
    ck_assert(ch.step_s[0] == 0.25 && ch.step_s[1] == 0.5 && ch.step_s[2] == 1.0);
    ck_assert(ch.steps[0] == 760 && ch.steps[1] == 380 && ch.steps[2] == 190);
    ck_assert_int_eq(ch.pick, 1);
    /* twice as fast: L's 380 steps */
    ck_assert_int_eq(ag_recipe_pick(table, 3, 1, 201, 0, 0.25, &ch, &e), AG_OK);
    ck_assert_int_eq(ch.pick, 2);
    /* the probe's time counts: 10 s of it leave too little for M */
    ck_assert_int_eq(ag_recipe_pick(table, 3, 1, 60, 10, 0.5, &ch, &e), AG_OK);
    ck_assert(ch.pick == 0 && ch.probe_s == 10 && ch.budget_s == 60 && ch.steps[1] == 93);
    /* nothing left: no steps, the first */
    ck_assert_int_eq(ag_recipe_pick(table, 3, 1, 0.5, 0.2, 0.5, &ch, &e), AG_OK);
    ck_assert(ch.pick == 0 && ch.steps[0] == 0);
    /* a table it cannot take */
    ck_assert(ag_recipe_pick(table, 0, 0, 60, 0, 0.5, &ch, &e) == AG_ERR_ARG && strstr(e.msg, "1 to 8"));
    e = (ag_error){0};   /* the first error stays: a fresh one each */
    ck_assert(ag_recipe_pick(table, 3, 3, 60, 0, 0.5, &ch, &e) == AG_ERR_ARG && strstr(e.msg, "reference 3"));
    const ag_recipe bad[2] = {{"A", 1, 0}, {"B", 0, 5}};
    e = (ag_error){0};
    ck_assert(ag_recipe_pick(bad, 2, 0, 60, 0, 0.5, &ch, &e) == AG_ERR_ARG && strstr(e.msg, "B's cost 0"));
}
END_TEST

START_TEST(test_recipe_line)
{
    ag_recipe_choice ch;
    ag_error e = {0};
    char line[256];
    ck_assert_int_eq(ag_recipe_pick(table, 3, 1, 201, 0, 0.5, &ch, &e), AG_OK);
    ag_recipe_line(line, sizeof line, table, 3, &ch, "medium");
    ck_assert_str_eq(line, "time budget 3m21s at 0.5 s a step: about 380 steps -> recipe M (medium); L would get 190, "
                           "it needs 300");
    ck_assert_int_eq(ag_recipe_pick(table, 3, 1, 601, 0, 0.5, &ch, &e), AG_OK);   /* the last: no why-not */
    ag_recipe_line(line, sizeof line, table, 3, &ch, NULL);
    ck_assert_str_eq(line, "time budget 10m01s at 1 s a step: about 570 steps -> recipe L");
    ag_recipe_line(line, 20, table, 3, &ch, "x");   /* cut, still a string */
    ck_assert_uint_eq(strlen(line), 19);
}
END_TEST

START_TEST(test_recipe_close_call)
{
    ag_recipe_choice ch;
    ag_error e = {0};
    char line[256];
    /* AG_RECIPE_CLOSE of L's 300 is 225: M at 0.424 s, L's 224 steps, no close call; at
     * 0.422 s, 225, one; the top one picked, none */
    ck_assert_int_eq(ag_recipe_pick(table, 3, 1, 201, 0, 0.424, &ch, &e), AG_OK);
    ck_assert(ch.pick == 1 && ch.steps[2] == 224 && ag_recipe_close_call(table, &ch) == -1);
    ck_assert_int_eq(ag_recipe_pick(table, 3, 1, 201, 0, 0.422, &ch, &e), AG_OK);
    ck_assert(ch.pick == 1 && ch.steps[2] == 225 && ag_recipe_close_call(table, &ch) == 2);
    ck_assert_int_eq(ag_recipe_pick(table, 3, 1, 201, 0, 0.25, &ch, &e), AG_OK);
    ck_assert(ch.pick == 2 && ag_recipe_close_call(table, &ch) == -1);
    /* M at 0.4 s: L predicted 237 steps (79%): timed; at 0.6 s (not 0.8) it gets 316 and is taken */
    ck_assert_int_eq(ag_recipe_pick(table, 3, 1, 201, 0, 0.4, &ch, &e), AG_OK);
    ck_assert(ch.pick == 1 && ch.steps[2] == 237 && ag_recipe_close_call(table, &ch) == 2);
    ag_recipe_timed(table, 2, 0.6, 0, &ch);
    ck_assert(ch.pick == 2 && ch.steps[2] == 316 && ch.steps[1] == 475 && ch.timed[2]);
    ck_assert_int_eq(ag_recipe_close_call(table, &ch), -1);
    /* timed slower, its probe's 10 s spent: M stays, with fewer steps, and the line says L was timed */
    ck_assert_int_eq(ag_recipe_pick(table, 3, 1, 201, 0, 0.4, &ch, &e), AG_OK);
    ag_recipe_timed(table, 2, 0.9, 10, &ch);
    ck_assert(ch.pick == 1 && ch.probe_s == 10 && ch.steps[1] == 451 && ch.steps[2] == 200);
    ck_assert_int_eq(ag_recipe_close_call(table, &ch), -1);   /* timed already */
    ag_recipe_line(line, sizeof line, table, 3, &ch, NULL);
    ck_assert_str_eq(line, "time budget 3m21s at 0.4 s a step: about 451 steps -> recipe M; L would get 200 "
                           "(its steps timed), it needs 300");
    /* the ones above the timed one follow its measured ratio: M timed at 3x S's 0.1 s, L at 2x M */
    ck_assert_int_eq(ag_recipe_pick(table, 3, 0, 201, 0, 0.1, &ch, &e), AG_OK);
    ag_recipe_timed(table, 1, 0.3, 0, &ch);
    ck_assert(ch.step_s[0] == 0.1 && ch.step_s[1] == 0.3 && fabs(ch.step_s[2] - 0.6) < 1e-12 && !ch.timed[2]);
    /* nothing measured (a stop): nothing changes */
    ag_recipe_timed(table, 2, 0, 0, &ch);
    ck_assert(fabs(ch.step_s[2] - 0.6) < 1e-12 && !ch.timed[2]);
}
END_TEST

// --- the probe, on a simulated clock: step k takes step_s[k] seconds ---

typedef struct {
    double now;
    long calls, stop_at, fail_at;   /* stop_at: the call after which the stop signal comes */
    volatile sig_atomic_t stop;
    double other_rank[3];           /* what a second rank adds to the sum */
} sim;

static double sim_clock(void *user) { return ((sim *)user)->now; }

static ag_status sim_step(void *user, long t, ag_error *err)
{
    sim *m = user;
    ck_assert_int_eq(t, m->calls + 1);
    m->calls++;
    if (m->calls == m->fail_at) return ag_seterr(err, AG_ERR_NOMEM, "step %ld: out of memory", t);
    m->now += t <= 3 ? 1.0 : 0.0625;   /* the warm-up steps slow: not timed */
    if (m->calls == m->stop_at) m->stop = SIGINT;
    return AG_OK;
}

static ag_status sim_sum(void *user, double *v, int n, ag_error *err)
{
    (void)err;
    ck_assert_int_eq(n, 3);
    for (int i = 0; i < n; i++) v[i] += ((sim *)user)->other_rank[i];
    return AG_OK;
}

static ag_status probe(sim *m, double budget_s, bool ranks, double *step_s, ag_error *e)
{
    ag_recipe_probe_opts o = {.step = sim_step, .user = m, .clock = sim_clock, .clock_user = m,
                              .sum = ranks ? sim_sum : NULL, .sum_user = m, .stop = &m->stop};
    return ag_recipe_probe(&o, budget_s, step_s, e);
}

START_TEST(test_recipe_probe)
{
    ag_error e = {0};
    double step = -1;
    sim m = {0};
    /* 100 s: 2 s of steps timed after the 3 warm-up ones, 32 of 1/16 s */
    ck_assert_int_eq(probe(&m, 100, false, &step, &e), AG_OK);
    ck_assert(step == 0.0625 && m.calls == 35);
    /* 1 s: at least 0.2 s, at least 3 steps; an hour: at most 3 s */
    m = (sim){0};
    ck_assert(probe(&m, 1, false, &step, &e) == AG_OK && m.calls == 3 + 4);
    m = (sim){0};
    ck_assert(probe(&m, 3600, false, &step, &e) == AG_OK && m.calls == 3 + 48);
    /* a second rank at 3/16 s a step: the mean of the two, on both */
    m = (sim){.other_rank = {0.1875, 1, 0}};
    ck_assert(probe(&m, 100, true, &step, &e) == AG_OK && step == 0.125);
    /* a stop in the probe: after the step in hand, then 0; or on the other rank */
    m = (sim){.stop_at = 5};
    ck_assert(probe(&m, 100, false, &step, &e) == AG_OK && step == 0 && m.calls == 5);
    m = (sim){.other_rank = {0.0625, 1, 1}};
    ck_assert(probe(&m, 100, true, &step, &e) == AG_OK && step == 0 && m.calls == 35);
    /* a step's error ends it */
    m = (sim){.fail_at = 4};
    ck_assert(probe(&m, 100, false, &step, &e) == AG_ERR_NOMEM && m.calls == 4 && strstr(e.msg, "step 4"));
}
END_TEST

Suite *recipe_suite(void)
{
    Suite *s = suite_create("recipe");
    TCase *choice = tcase_create("choice"), *timed = tcase_create("probe on a simulated clock");
    ADD_TESTS(choice, test_recipe_pick, test_recipe_line, test_recipe_close_call);
    tcase_add_test(timed, test_recipe_probe);
    suite_add_tcase(s, choice);
    suite_add_tcase(s, timed);
    return s;
}
