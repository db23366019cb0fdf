/* test_train_budget.c -- the library's time budget (train/budget.h: ag_budget) on a simulated
 * clock, driven as a training loop drives it, so that every figure is exact and nothing
 * depends on the machine (char_lm's --time-budget runs on it: examples/char_lm/tests/test_budget.c):
 *
 *   sixth    the steps are timed from the sixth: five slow first steps do not move the count,
 *            which fills the budget less its reserve; the run ends at it, inside the budget
 *   bound    without fit (a count the program fixed), a machine that slows down ends the run
 *            early, its final evaluation ending before the deadline, said in one line
 *   refit    steps that slow down after the count was fixed: a shorter count at the next
 *            evaluation, still inside the budget
 *   pause    one step 100 times the others (the process stopped) is said, and not timed
 *   evals    the first evaluation, nothing timed, gets a tenth of the budget; one that runs
 *            late ends early and the later ones take as many batches
 *   probe    before anything is timed, a probe's time of one item: a batch a split that cannot
 *            end before the deadline ends the run at once with a checkpoint, said in one line
 *   item     ag_budget_probe_item times an item's second pass (the first is cold), in no-grad mode
 *   mean     ag_ddp_eval_mean: an evaluation split's mean loss, ended by a stop or the clock
 *   duration ag_format_duration writes a budget as a log does: "0.5s", never "0s"; "1m30s",
 *            "1h30m"; a negative or NaN one "0s"
 *   loop     ag_train_run (loop.c) on the simulated clock, a toy model whose evaluation takes
 *            a hundred steps' time and comes due only at the end: the run ends out of time
 *            with its final evaluation and checkpoint inside the budget, DIR/latest whole
 *   own      the same run on the program's own budget (opts.budget): its evaluate times its
 *            batches on it, and what the budget decided is the program's to read; a probe in
 *            its start call that finds no room for one evaluation batch ends the run at once,
 *            with a checkpoint and no evaluation, and no room for a step after the first
 *            evaluation ends it there; with fit, the run's steps and the end of its schedule
 *            are the count the budget fixes */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "attograd.h"
#include "proc.h"
#include "tcases.h"

/* AdamW as MODEL.md has it, without weight decay (its fields named: a new one reads as 0) */
#define ADAM_NO_DECAY {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0}

/* A loop on a simulated clock: each step takes step_s (first_s for the first five, later_s
 * from iteration later_at on, 100 step_s at pause_at), each evaluation eval_s; the lines the
 * budget says, kept. */
typedef struct {
    double now, step_s, first_s, eval_s, later_s;
    long later_at, pause_at;
    char said[4096];
    long evals;
} sim;

static double sim_now(void *user) { return ((sim *)user)->now; }

static void sim_say(void *user, const char *line)
{
    sim *s = user;
    size_t n = strlen(s->said);
    snprintf(s->said + n, sizeof s->said - n, "%s\n", line);
}

/* A budget of budget_s on s's clock, evaluating every `every` (10 batches a split). */
static ag_budget budget_on(sim *s, double budget_s, long steps, bool fit, long every)
{
    ag_budget b = {.budget_s = budget_s, .clock = sim_now, .clock_user = s, .say = sim_say, .say_user = s,
                   .steps = steps, .fit = fit, .warmup = 1000000, .eval_every = every, .eval_iters = 10, .splits = 2};
    b.t0 = s->now;
    ag_budget_start(&b);
    return b;
}

/* The time step it takes on s's clock. */
static double step_time(const sim *s, long it)
{
    if (it == s->pause_at) return 100 * s->step_s;
    if (it < 5) return s->first_s;
    return s->later_at && it >= s->later_at ? s->later_s : s->step_s;
}

/* The loop (train.h's, char_lm's): before each iteration the check, the evaluation when due,
 * then the calibration and a step. Its last iteration in *end_it; the clock at the end. */
static double drive(sim *s, ag_budget *b, long *end_it)
{
    ag_error err = {0};
    for (long it = 0;; it++) {
        bool last = it == b->steps;
        ck_assert_int_eq(ag_budget_check(b, it, &last, &err), AG_OK);
        bool due = it % b->eval_every == 0 || last;
        if (due) s->now += s->eval_s, s->evals++;
        if (!last) ck_assert_int_eq(ag_budget_calibrate(b, it, due, &last, &err), AG_OK);
        if (last) {
            *end_it = it;
            return s->now;
        }
        s->now += step_time(s, it);
    }
}

/* A budget of budget_s on s's clock (budget_on) and the loop on it (drive): where it ended. */
typedef struct {
    ag_budget b;
    long end;   /* the last iteration */
    double t;   /* the clock then */
} ran;

static ran run(sim *s, double budget_s, long steps, bool fit, long every)
{
    ran r = {.b = budget_on(s, budget_s, steps, fit, every)};
    r.t = drive(s, &r.b, &r.end);
    return r;
}

/* The run ended at the count it fixed, inside the budget. */
static void at_its_count(const ran *r)
{
    ck_assert_msg(r->b.count > 0 && r->end == r->b.count && r->b.steps == r->b.count && !r->b.out_of_time,
                  "ended at iteration %ld, the count %ld", r->end, r->b.count);
    ck_assert_msg(r->t <= r->b.deadline, "ended at %.3f, the deadline %.3f", r->t, r->b.deadline);
}

START_TEST(test_timed_from_the_sixth_step)
{
    sim s = {.step_s = 1.0 / 64, .first_s = 0.25, .eval_s = 1.0 / 16};   /* binary fractions: exact sums */
    ran r = run(&s, 10, 1000000, true, 100);
    /* 2% of the budget (0.2 s) of steps 5..17 timed, the count fixed at 18 from their 1/64 s alone */
    ck_assert_msg(strstr(s.said, "(0.01562 s each, timed over 13;"), "%s", s.said);
    at_its_count(&r);
    /* the reserve: 2% of the budget or 10 steps, whichever is more (0.2 s); less a step of slack */
    ck_assert_msg(r.t >= r.b.deadline - 0.2 - 2.0 / 64 - 1.0 / 16, "ended %.3f s early", r.b.deadline - r.t);
}
END_TEST

START_TEST(test_bound_only)
{
    sim s = {.step_s = 0.01, .first_s = 0.01, .eval_s = 0.05, .later_s = 0.04, .later_at = 300};
    ran r = run(&s, 5, 1000000, false, 50);
    ck_assert_msg(r.b.out_of_time && r.b.count == 0 && r.b.steps == 1000000, "count %ld", r.b.count);
    ck_assert_msg(r.t <= r.b.deadline && r.t > r.b.deadline - 0.5, "ended at %.3f, deadline %.3f", r.t,
                  r.b.deadline);
    char want[160];
    snprintf(want, sizeof want, "time budget: out of time at iteration %ld of 1000000: ending here, with its "
             "evaluation and checkpoint\n", r.end);
    ck_assert_str_eq(s.said, want);
}
END_TEST

START_TEST(test_refit_after_a_slowdown)
{
    sim s = {.step_s = 0.01, .first_s = 0.01, .eval_s = 0.05, .later_s = 0.015, .later_at = 200};
    ran r = run(&s, 10, 1000000, true, 100);
    ck_assert_msg(strstr(s.said, "time budget: at iteration 300 the steps take 0.015 s"), "%s", s.said);
    at_its_count(&r);
}
END_TEST

START_TEST(test_pause_not_timed)
{
    sim s = {.step_s = 0.02, .first_s = 0.02, .eval_s = 0.05, .pause_at = 10};
    ran r = run(&s, 60, 1000000, true, 100);
    ck_assert_msg(strstr(s.said, "time budget: step 10 took 2 s, 100x the others (the process was stopped?)"), "%s",
                  s.said);
    ck_assert_msg(strstr(s.said, "(0.02 s each,"), "the pause was timed: %s", s.said);
    at_its_count(&r);
}
END_TEST

START_TEST(test_evaluations_bounded)
{
    sim s = {0};
    ag_budget b = budget_on(&s, 10, 1000, true, 100);
    ag_budget_eval_start(&b, false);   /* nothing timed: a tenth of the budget */
    ck_assert(ag_budget_eval_end(&b, false) == 1.0);
    ck_assert(ag_budget_eval_end(&b, true) == 0.5);   /* the first split: half of it */
    ag_error err = {0};
    bool late;
    s.now = 0.9;
    ck_assert(ag_budget_eval_late(&b, 1.0, &late, &err) == AG_OK && !late);
    s.now = 1.1;
    ck_assert(ag_budget_eval_late(&b, 1.0, &late, &err) == AG_OK && late);
    ag_budget_eval_done(&b, 0, false, 4);
    ck_assert_int_eq(ag_budget_eval_batches(&b), 4);
    ck_assert_str_eq(s.said, "time budget: an evaluation of 10 batches a split does not fit in 10% of the budget: "
                     "4 batches a split from here on\n");
    ag_budget_eval_start(&b, true);   /* the final one: all but the margin */
    ck_assert(ag_budget_eval_end(&b, false) == 10 - AG_BUDGET_END_MARGIN_S);
    ag_budget none = {.eval_iters = 10};
    ag_budget_start(&none);   /* no budget: unbounded */
    ag_budget_eval_start(&none, false);
    ck_assert(isinf(ag_budget_eval_end(&none, true)) && ag_budget_eval_batches(&none) == 10);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// ag_train_run on the simulated clock: four logits learn a class, each step and evaluation
// moving the clock

typedef struct {
    sim clock;
    ag_params *P;
    ag_tensor *w;   /* [1,4] the logits */
    ag_budget *budget;   /* own: the program's budget, its evaluation batches timed on it */
} toy;

/* A step's batch: nothing to draw (the one item is class 2), but the step's time passes */
static ag_status toy_draw(void *user, ag_rng *rng, ag_error *err)
{
    (void)rng, (void)err;
    toy *t = user;
    t->clock.now += t->clock.step_s;
    return AG_OK;
}

static ag_status toy_loss(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err)
{
    (void)mb, (void)err;
    *loss = ag_cross_entropy(ctx, ((toy *)user)->w, (const int[]){2});   // [1]
    return AG_OK;
}

static ag_status toy_eval(void *user, ag_ctx *ctx, double *val, double *score, ag_error *err)
{
    (void)err;
    toy *t = user;
    if (t->budget) ag_budget_batch(t->budget, t->clock.eval_s);   /* own: one batch of eval_s */
    t->clock.now += t->clock.eval_s;
    t->clock.evals++;
    *val = (double)ag_cross_entropy(ctx, t->w, (const int[]){2})->data[0];   // [1]
    *score = NAN;
    return AG_OK;
}

/* The toy at 50 s on its clock: a step 0.01 s, an evaluation 1 s; the logits at 0. */
static toy toy_new(void)
{
    toy t = {.clock = {.now = 50, .step_s = 0.01, .eval_s = 1}, .P = ag_params_new()};
    t.w = ag_params_add(t.P, "w", 2, (const int[]){1, 4}, AG_INIT_ZEROS, 0, false);
    ck_assert(t.w && ag_params_alloc(t.P) == AG_OK);
    return t;
}

START_TEST(test_train_run_ends_in_time)
{
    toy t = toy_new();
    char root[] = "/tmp/ag_train_budget_XXXXXX";
    ck_assert(mkdtemp(root));
    const char *dir = proc_path(root, "run");
    const ag_train_client c = {.name = "toy", .params = t.P, .user = &t, .batch = 1, .draw = toy_draw,
                               .loss = toy_loss, .evaluate = toy_eval};
    const ag_train_opts o = {.out_dir = dir, .steps = 1000000, .time_budget_s = 5, .every = 1000,
                             .sched = {.lr = 0.1, .min_lr = 0.1, .lr_decay_iters = 1000000},
                             .adam = ADAM_NO_DECAY, .clock = sim_now, .clock_user = &t.clock};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    /* two evaluations (the first, timed, and the final one), both inside the 5 s from 50 */
    ck_assert_msg(r.out_of_time && t.clock.evals == 2 && t.clock.now <= 55, "out of time %d, %ld evaluations, "
                  "ended at %.3f", r.out_of_time, t.clock.evals, t.clock.now);
    ck_assert_msg(r.step > 200 && t.clock.now > 54, "%ld steps, ended at %.3f", r.step, t.clock.now);
    char want[64];
    snprintf(want, sizeof want, "ckpt-%08ld", r.step);
    ck_assert_str_eq(r.ckpt, want);
    ag_params_zero_grad(t.P);
    long step = -1;   /* the checkpoint DIR/latest names loads, at the step the run ended */
    ck_assert_msg(ag_train_load(dir, &c, &step, &err) == AG_OK && step == r.step, "%s (step %ld)", err.msg, step);
    ag_params_free(t.P);
    proc_remove_tree(root);
}
END_TEST

/* t trained on the program's own budget b (its clock t's) into a directory of its own, `steps`
 * steps, an evaluation every `every`, start the client's start call (NULL: none): the result. */
static ag_train_result own_run(toy *t, ag_budget *b, long steps, long every,
                               ag_status (*start)(void *, ag_ctx *, const ag_train_state *, ag_error *))
{
    char root[] = "/tmp/ag_train_budget_XXXXXX";
    ck_assert(mkdtemp(root));
    b->clock = sim_now;
    b->clock_user = &t->clock;
    t->budget = b;
    const ag_train_client c = {.name = "toy", .params = t->P, .user = t, .batch = 1, .draw = toy_draw,
                               .loss = toy_loss, .evaluate = toy_eval, .start = start};
    const ag_train_opts o = {.out_dir = proc_path(root, "run"), .steps = steps, .every = every, .budget = b,
                             .sched = {.lr = 0.1, .min_lr = 0.01, .lr_decay_iters = steps},
                             .adam = ADAM_NO_DECAY};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    proc_remove_tree(root);
    return r;
}

START_TEST(test_train_run_own_budget)
{
    toy t = toy_new();
    ag_budget b = {.budget_s = 20, .final_s = 0.5, .eval_iters = 1, .splits = 1};   /* a step: a few 1 s batches */
    ag_train_result r = own_run(&t, &b, 1000000, 1000, NULL);
    ck_assert_msg(r.out_of_time && b.out_of_time && t.clock.evals >= 2 && t.clock.now <= 70, "out of time %d, %ld "
                  "evaluations, ended at %.3f", r.out_of_time, t.clock.evals, t.clock.now);
    ck_assert_msg(b.t0 == 50 && b.deadline == 70 && b.batch_s == 1, "t0 %g, deadline %g, its batches %g s", b.t0,
                  b.deadline, b.batch_s);
    ck_assert_int_eq(b.steps, 1000000);   /* set by the loop: the program left it 0 */
    ag_params_free(t.P);
}
END_TEST

/* The program's budget with fit: the loop's steps are the count it fixes, the run ends there,
 * inside the budget, not out of time, the schedule's end following the count. */
START_TEST(test_train_run_own_count)
{
    toy t = toy_new();
    ag_budget b = {.budget_s = 20, .fit = true, .warmup = 20, .eval_iters = 1, .splits = 1};
    ag_train_result r = own_run(&t, &b, 1000000, 100000, NULL);
    ck_assert_msg(b.count > 100 && r.step == b.count && !r.out_of_time && t.clock.now <= 70, "count %ld, ended at "
                  "step %ld (out of time %d) at %.3f", b.count, r.step, r.out_of_time, t.clock.now);
    ck_assert_msg(b.sched && b.sched->lr_decay_iters == b.count, "the schedule's end did not follow the count");
    ag_params_free(t.P);
}
END_TEST

/* own_probe's start call: one evaluation item takes 10 s of a 5 s budget */
static ag_status toy_probe(void *user, ag_ctx *ctx, const ag_train_state *st, ag_error *err)
{
    (void)ctx;
    toy *t = user;
    bool last = false;
    return ag_budget_probe(t->budget, st->step, 10, 1, "item", &last, err);
}

/* No room in the program's 5 s budget, and the run ends at step 0, saved, out of time: after its
 * first evaluation when that showed no room for a step (its batches take 1 s, a step is taken for
 * a few) and the final evaluation; at once, with no evaluation, when a probe in the client's start
 * call finds no room for one evaluation batch. */
START_TEST(test_train_run_no_room)
{
    ag_status (*const starts[2])(void *, ag_ctx *, const ag_train_state *, ag_error *) = {NULL, toy_probe};
    for (int k = 0; k < 2; k++) {
        toy t = toy_new();
        ag_budget b = {.budget_s = 5, .eval_iters = 1, .splits = 1};
        ag_train_result r = own_run(&t, &b, 1000, 100, starts[k]);
        ck_assert_msg(r.out_of_time && r.step == 0 && t.clock.evals == 1 - k, "%s: out of time %d, step %ld, %ld "
                      "evaluations", k ? "probe" : "first evaluation", r.out_of_time, r.step, t.clock.evals);
        ck_assert_str_eq(r.ckpt, "ckpt-00000000");
        ag_params_free(t.P);
    }
}
END_TEST

START_TEST(test_probe)
{
    sim s = {.now = 100};
    ag_budget b = budget_on(&s, 1.0, 1000, true, 10);
    ag_error err = {0};
    bool last = false;
    ck_assert_int_eq(ag_budget_probe(&b, 0, 0.01, 4, "window", &last, &err), AG_OK);   /* 2 x 0.04 s: it fits */
    ck_assert(!last && !b.no_eval && !b.out_of_time && s.said[0] == '\0');
    ck_assert_int_eq(ag_budget_probe(&b, 0, 0.2, 4, "window", &last, &err), AG_OK);    /* 2 x 0.8 s: it does not */
    ck_assert(last && b.no_eval && b.out_of_time);
    ck_assert_str_eq(s.said, "time budget: 1 s is too short for this run: one evaluation batch takes about 0.8 s (a "
                     "window 0.2 s, 4 a batch), and 1 s are left; ending at iteration 0 with a checkpoint, no "
                     "evaluation\n");
}
END_TEST

/* ag_budget_probe_item: the item's second pass is the one timed (the first is cold), in no-grad
 * mode; nothing without a deadline. */
typedef struct {
    sim *s;
    ag_ctx *ctx;
    int calls;
    bool grad_seen;
} item_probe;

static ag_status probe_forward(void *user, ag_error *err)
{
    item_probe *p = user;
    (void)err;
    p->grad_seen |= ag_ctx_grad_enabled(p->ctx);
    p->s->now += p->calls++ == 0 ? 5.0 : 0.2;   /* cold, then 0.2 s */
    return AG_OK;
}

START_TEST(test_probe_item)
{
    sim s = {.now = 100};
    ag_ctx *ctx = ag_ctx_new();
    item_probe p = {.s = &s, .ctx = ctx};
    ag_error err = {0};
    ag_budget none = {.eval_iters = 10};
    ag_budget_start(&none);
    ck_assert(ag_budget_probe_item(&none, 0, ctx, probe_forward, &p, 4, "window", &err) == AG_OK && p.calls == 0);
    ag_budget b = budget_on(&s, 6.5, 1000, true, 10);
    ck_assert_int_eq(ag_budget_probe_item(&b, 0, ctx, probe_forward, &p, 4, "window", &err), AG_OK);
    ck_assert(p.calls == 2 && !p.grad_seen && ag_ctx_grad_enabled(ctx));
    ck_assert(b.no_eval && b.out_of_time);   /* 2 x 0.8 s past the 1.3 s left */
    ck_assert_msg(strstr(s.said, "one evaluation batch takes about 0.8 s (a window 0.2 s, 4 a batch)"), "%s", s.said);
    ag_ctx_free(ctx);
}
END_TEST

/* ag_ddp_eval_mean alone (no ag_ddp): the mean of the batches' losses; a stop ends it after the
 * batch in hand; past the end on the budget's clock, no batch more; each batch timed on it. */
typedef struct {
    sim *s;
    int calls;
    volatile sig_atomic_t *stop;
    int stop_at;
} eval_sim;

static ag_status eval_sim_batch(void *user, bool mine, double *loss, ag_error *err)
{
    eval_sim *e = user;
    (void)err;
    ck_assert(mine);   /* alone: every batch is this process's */
    *loss = ++e->calls;
    e->s->now += 0.1;
    if (e->stop && e->calls == e->stop_at) *e->stop = SIGINT;
    return e->calls == 99 ? AG_ERR_NOMEM : AG_OK;
}

START_TEST(test_eval_mean)
{
    sim s = {0};
    ag_ctx *ctx = ag_ctx_new();
    ag_error err = {0};
    double mean;
    long done;
    ag_budget none = {.eval_iters = 10, .clock = sim_now, .clock_user = &s};   /* no budget, the clock simulated */
    ag_budget_start(&none);
    eval_sim e = {.s = &s};
    ck_assert(ag_ddp_eval_mean(NULL, &none, ctx, eval_sim_batch, &e, NULL, INFINITY, &mean, &done, &err) == AG_OK);
    ck_assert(done == 10 && mean == 5.5 && ag_ctx_grad_enabled(ctx));
    ck_assert(fabs(none.batch_s - 0.1) < 1e-9);   /* each batch timed */
    volatile sig_atomic_t stop = 0;
    e = (eval_sim){.s = &s, .stop = &stop, .stop_at = 3};
    ck_assert(ag_ddp_eval_mean(NULL, &none, ctx, eval_sim_batch, &e, &stop, INFINITY, &mean, &done, &err) == AG_OK);
    ck_assert(done == 3 && mean == 2);   /* the batch in hand, then no more */
    ag_budget b = budget_on(&s, 100, 1000, true, 10);
    e = (eval_sim){.s = &s};
    ck_assert(ag_ddp_eval_mean(NULL, &b, ctx, eval_sim_batch, &e, NULL, s.now + 0.25, &mean, &done, &err) == AG_OK);
    ck_assert(done == 3 && mean == 2);   /* 0.3 s past the end of 0.25 s */
    e = (eval_sim){.s = &s, .calls = 97};
    ck_assert(ag_ddp_eval_mean(NULL, &none, ctx, eval_sim_batch, &e, NULL, INFINITY, &mean, &done, &err) ==
              AG_ERR_NOMEM);
    ck_assert(done == 1 && ag_ctx_grad_enabled(ctx));
    ag_ctx_free(ctx);
}
END_TEST

/* A program's setup that took the budget: refused with the figures; not on several ranks, not
 * without a budget, not when what was spent before (a probe) took it all already. */
START_TEST(test_setup_late)
{
    sim s = {.now = 100};
    ag_budget b = {.budget_s = 2, .t0 = 100, .spent_s = 0.5, .clock = sim_now, .clock_user = &s};
    ag_error err = {0};
    s.now = 101.4;   /* 1.9 s of 2 */
    ck_assert(!ag_budget_setup_late(&b));
    ck_assert_int_eq(ag_budget_setup_check(&b, "data.txt", &err), AG_OK);
    s.now = 101.75;
    ck_assert(ag_budget_setup_late(&b));
    ck_assert_int_eq(ag_budget_setup_check(&b, "data.txt", &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "time budget: 2s ran out while reading data.txt (2.25 s used): nothing trained or "
                              "written; give a longer --time-budget");
    b.ranks = 2;
    ck_assert(!ag_budget_setup_late(&b));
    b.ranks = 1;
    b.spent_s = 2;
    ck_assert(!ag_budget_setup_late(&b));
    b.budget_s = 0;
    ck_assert(!ag_budget_setup_late(&b));
}
END_TEST

START_TEST(test_format_duration)
{
    static const struct { double s; const char *want; } cases[] = {
        {0.5, "0.5s"}, {0.25, "0.2s"}, {2.5, "2.5s"}, {3, "3s"}, {9.96, "10s"}, {42, "42s"}, {59.6, "1m00s"},
        {90, "1m30s"}, {3599.4, "59m59s"}, {5400, "1h30m"}, {-1, "0s"}, {NAN, "0s"}, {5e6, "0s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[32];
        ag_format_duration(buf, sizeof buf, cases[i].s);
        ck_assert_msg(strcmp(buf, cases[i].want) == 0, "%g s written '%s', not '%s'", cases[i].s, buf, cases[i].want);
    }
    char small[4];   /* cut, never past the buffer */
    ag_format_duration(small, sizeof small, 5400);
    ck_assert_str_eq(small, "1h3");
}
END_TEST

Suite *train_budget_suite(void)
{
    Suite *s = suite_create("train_budget");
    TCase *t = tcase_create("simulated clock");
    tcase_add_test(t, test_format_duration);
    tcase_add_test(t, test_probe);
    tcase_add_test(t, test_probe_item);
    tcase_add_test(t, test_eval_mean);
    tcase_add_test(t, test_setup_late);
    ADD_TESTS(t, test_timed_from_the_sixth_step, test_bound_only, test_refit_after_a_slowdown, test_pause_not_timed,
              test_evaluations_bounded);
    suite_add_tcase(s, t);
    TCase *loop = tcase_create("ag_train_run");
    tcase_set_timeout(loop, 120);   /* loss.png's gnuplot runs on the wall clock */
    ADD_TESTS(loop, test_train_run_ends_in_time, test_train_run_own_budget, test_train_run_own_count,
              test_train_run_no_room);
    suite_add_tcase(s, loop);
    return s;
}
