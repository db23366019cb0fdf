/* budget.c -- a time budget for a training run of any model (budget.h): the run ends, its final
 * evaluation and checkpoint written, within the budget counted from the program's start (t0).
 * The figures below are char_lm's (its flags: --max-iters is steps, --min-lr the schedule's
 * min_lr, --resume a run that goes on from its checkpoint).
 *
 * THE COUNT. The first steps are timed, from the sixth one (the first ones grow the arena,
 * fault in the buffers and start the thread pools: tiny's steps 1-3 took 44, 15 and 7 ms here
 * against 4 ms from the fifth on, and a count fitted to them ended a 3 s budget after 0.6 s),
 * until they add up to CAL_SHARE of the budget and number CAL_MIN_STEPS, or at the latest when
 * the warmup ends: up to iteration warmup_iters the rate of a step,
 * lr (it+1)/(warmup+1) and then lr itself, does not depend on the count, so the steps taken
 * before the count is known are exactly those of a run that knew it from the start. Then the
 * count N is the largest for which
 *     (N - it) step + (the evaluations in (it, N], the final one included) eval
 *         <= deadline - now - max(RESERVE_SHARE budget, RESERVE_STEPS step) - final_s
 * where step is the mean timed step, eval the last evaluation's time with its checkpoint
 * (iteration 0's evaluation comes before step 0; none timed: 2 eval_iters forward passes at a
 * third of a step each) and the reserve leaves room for a machine whose speed wanders. N, at
 * most steps, becomes steps and count, and the schedule's end (unless that was set apart
 * from steps); a program saves it in every later checkpoint (char_lm's budget_iters), so that
 * --resume continues that schedule exactly. A resumed run whose checkpoint came before the count times its own
 * first steps the same way; a resumed run with the count has its own budget as a bound only.
 *
 * THE REFIT. A shared machine's speed wanders (here by 10-30% within minutes), and the first
 * steps are a small sample: a 10-minute run whose first 100 steps ran at 53k tokens/s and the
 * rest at 68k ended after 461 s. So before each evaluation the count is fitted the same way to
 * the slower of the steps since it was last fitted and those since the last evaluation, and
 * taken when it moves by more than REFIT_MIN, either way, to the end of the run. (Refits were
 * first allowed only in the budget's first fifth, then 40%: 10-minute runs whose machine slowed down after it
 * ran out of time at 90-96% of their schedule, the rate not yet at --min-lr, and one whose
 * machine sped up used 554 s of 600.) Before the evaluation, so that its checkpoint carries the
 * count the steps after it follow, and --resume stays exact. The cosine then ends at the new
 * count, and its rate jumps at that step (refit() has the sizes).
 *
 * THE DEADLINE. Before each iteration: if the evaluation due there, one more step (the larger
 * of the smoothed and the last step time) and the final evaluation would end past the deadline,
 * this iteration is the last. Its evaluation and checkpoint are written and the run ends before
 * its count, its last steps at the rate the schedule had there: above --min-lr by
 * 0.5 (1 + cos(pi r)) (lr - min_lr), r the share of the decay done (0.1% of lr - min_lr at
 * r = 0.98, 2.4% at r = 0.9). That happens only when the machine slowed down after the last
 * refit (after the last evaluation, or by less than REFIT_MIN); --resume finishes the schedule.
 *
 * With several ranks (sum: char_lm's ddp.h) every decision is summed over the ranks, so that
 * all stop, and fix the same count, at the same iteration. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include "train.h"
#include "../tensor/debug.h"   /* ag_now_s */

#define CAL_SHARE 0.02       /* the steps timed before the count is fixed: 2% of the budget */
#define CAL_MIN_STEPS 3      /*   and at least 3 of them (fewer when the warmup is shorter) */
#define CAL_SKIP 5           /* the steps before them, slower than the rest: not timed */
#define RESERVE_SHARE 0.02   /* the count aims to end 2% of the budget early, */
#define RESERVE_STEPS 10     /*   or 10 steps' time if more (a budget of seconds: 2% is 2 steps) */
#define REFIT_MIN 0.02       /* the count fitted again at an evaluation is taken when it moves more */
#define EVAL0_SHARE 0.1      /* the run's first evaluation, nothing timed yet, takes at most this share */
#define END_MARGIN_S AG_BUDGET_END_MARGIN_S   /* the final evaluation ends this long before the deadline */
#define PAUSE_FACTOR 5       /* a step this many times the smoothed one: the process was paused */
#define PAUSE_SAID_S 1.0     /*   said in the log from this long (shorter: a busy machine's hiccup) */
#define STEP_BATCHES 3       /* a step takes about 3 evaluation batches' time (forward, backward) */

double ag_budget_now(const ag_budget *b) { return b->clock ? b->clock(b->clock_user) : ag_now_s(); }

bool ag_budget_setup_late(const ag_budget *b)
{
    return b->budget_s > 0 && b->spent_s < b->budget_s && b->ranks <= 1 &&
           ag_budget_now(b) - b->t0 + b->spent_s > b->budget_s;
}

ag_status ag_budget_setup_check(const ag_budget *b, const char *reading, ag_error *err)
{
    if (!ag_budget_setup_late(b)) return AG_OK;
    char d[32];
    ag_format_duration(d, sizeof d, b->budget_s);
    return ag_seterr(err, AG_ERR_ARG, "time budget: %s ran out while reading %s (%.3g s used): nothing trained or "
                     "written; give a longer --time-budget", d, reading, ag_budget_now(b) - b->t0 + b->spent_s);
}

ag_status ag_budget_sum(const ag_budget *b, double *v, ag_error *err)
{
    return b->sum ? b->sum(b->sum_user, v, err) : AG_OK;
}

static int ranks(const ag_budget *b) { return b->ranks > 1 ? b->ranks : 1; }
static double splits(const ag_budget *b) { return b->splits > 1 ? 2 : 1; }

/* One line for the program's log (printf-style). */
static void say(const ag_budget *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const ag_budget *b, const char *fmt, ...)
{
    if (!b->say) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    b->say(b->say_user, line);
}

void ag_budget_start(ag_budget *b)
{
    b->eval_end = INFINITY;
    if (!(b->budget_s > 0)) return;
    b->t0 -= b->spent_s;   /* the budget began before the run: char_lm's recipe probe */
    b->deadline = b->t0 + b->budget_s;
    b->fixing = b->fit;
    b->ceiling = b->steps;
    b->eval_s = -1;   /* none timed yet */
    if (!b->as_said[0]) snprintf(b->as_said, sizeof b->as_said, "%g s", b->budget_s);
    b->t_check = b->t_steps = ag_budget_now(b);
}

/* An evaluation with its checkpoint: the last one timed, or an estimate from the step time. */
double ag_budget_eval_time(const ag_budget *b)
{
    if (b->eval_s >= 0) return b->eval_s;
    return 2.0 * (double)b->eval_iters * b->step_s / 3 + 0.1;
}

/* The final evaluation: an evaluation, and what it waits for (char_lm: loss.png drawn). */
static double final_time(const ag_budget *b) { return ag_budget_eval_time(b) + b->final_s; }

/* The step of iteration it - 1 ended now: its time, and the calibration's (the steps it times
 * before the count is fixed, and those since, for a refit) */
static void time_step(ag_budget *b, long it, double now)
{
    if (it <= b->start) return;
    double dt = now - b->t_steps;
    if (b->step_s > 0 && dt > PAUSE_FACTOR * b->step_s && b->pauses++ == 0) {   /* one step: a pause (L3) */
        if (dt >= PAUSE_SAID_S)
            say(b, "time budget: step %ld took %.3g s, %.0fx the others (the process was stopped?): its time "
                "counts against the budget, not as a step's", it - 1, dt, dt / b->step_s);
        return;
    }
    b->pauses = 0;   /* two in a row: the machine slowed down */
    b->step_last = dt;
    b->step_s = b->step_s > 0 ? 0.9 * b->step_s + 0.1 * dt : dt;
    if ((b->fixing && it - 1 >= b->start + CAL_SKIP) || b->refit) {
        b->timed_s += dt;
        b->timed++;
    }
    if (b->refit) {
        b->recent_s += dt;
        b->recent++;
    }
}

static ag_status refit(ag_budget *b, long it, double now, ag_error *err);

/* The deadline ends the run at iteration it, before its count: said in one line. */
static void out_of_time(ag_budget *b, long it, bool *last)
{
    *last = b->out_of_time = true;
    if (b->fixing)
        say(b, "time budget: out of time at iteration %ld, before the step count was fixed (a step %.3g s, an "
            "evaluation %.3g s): ending here", it, b->step_s, ag_budget_eval_time(b));
    else if (b->sched)
        say(b, "time budget: out of time at iteration %ld of %ld (the machine slowed down?); ending here, the "
            "rate at %.3g, not yet --min-lr %.3g (--resume finishes the schedule)", it, b->steps,
            ag_lr_at(b->sched, it - 1), b->sched->min_lr);
    else
        say(b, "time budget: out of time at iteration %ld of %ld: ending here, with its evaluation and checkpoint",
            it, b->steps);
}

ag_status ag_budget_check(ag_budget *b, long it, bool *last, ag_error *err)
{
    if (!b->deadline || b->no_eval) return AG_OK;
    double now = ag_budget_now(b);
    time_step(b, it, now);
    b->t_check = now;
    if (*last || !(b->step_s > 0)) return AG_OK;
    bool due = b->eval_every > 0 && it % b->eval_every == 0;
    ag_status s = due && b->refit ? refit(b, it, now, err) : AG_OK;   /* before this evaluation's checkpoint */
    if (s) return s;
    double more = (due ? ag_budget_eval_time(b) : 0) + fmax(b->step_s, b->step_last) + final_time(b);
    double late = now + more > b->deadline;
    if ((s = ag_budget_sum(b, &late, err))) return s;   /* one rank out of time: all stop */
    if (late > 0) out_of_time(b, it, last);
    return AG_OK;
}

/* Evaluations in (it, n], the final one at n included. */
static long evals_after(long it, long n, long every)
{
    if (every <= 0) return 1;
    return n / every - it / every + (n % every != 0);
}

/* The time of the steps it .. n-1 and of the evaluations after them. */
static double cost(long it, long n, long every, double step, double eval)
{
    return (double)(n - it) * step + (double)evals_after(it, n, every) * eval;
}

/* The largest count n > it whose steps and evaluations after it fit in avail seconds (at least
 * it + 1: the step in hand; at most the ceiling). */
static long fit_count(const ag_budget *b, long it, double step, double eval, double avail)
{
    long every = b->eval_every, max = b->ceiling;
    double spread = every > 0 ? eval / (double)every : 0;   /* evaluations spread over the steps */
    double guess = (double)it + floor((avail - eval) / (step + spread));
    long n = guess <= (double)it + 1 ? it + 1 : guess >= (double)max ? max : (long)guess;
    while (n > it + 1 && cost(it, n, every, step, eval) > avail) n--;
    while (n < max && cost(it, n + 1, every, step, eval) <= avail) n++;
    return n;
}

/* The count is n from now on: the schedule's end, the run's end, and the checkpoints' record.
 * A refit (again) logs what changed. */
static void fix_count(ag_budget *b, long it, long n, double step, double eval, bool again)
{
    long was = b->steps;
    if (b->sched && b->sched->lr_decay_iters == b->steps) b->sched->lr_decay_iters = n;   /* it followed the count */
    b->steps = b->count = n;
    double spare = b->deadline - ag_budget_now(b) - cost(it, n, b->eval_every, step, eval);
    if (again)
        say(b, "time budget: at iteration %ld the steps take %.4g s (the %ld since the count was last fitted): "
            "%ld steps in all instead of %ld, planned to end %.3g s before the deadline", it, step, b->timed, n, was,
            spare);
    else
        say(b, "time budget: %ld steps in all (%.4g s each, timed over %ld; an evaluation %.3g s), planned to end "
            "%.3g s before the deadline", n, step, b->timed, eval, spare);
    b->refit = b->fixing || b->refit;   /* a count fixed in this run may be fitted again (not one resumed) */
    b->timed_s = b->timed = 0;           /* a refit times the steps from here: the machine's speed now */
    b->fixing = false;
}

/* The time left for steps and evaluations at now: the deadline less the reserve (a machine
 * whose speed wanders) and the final evaluation's extra. */
static double available(const ag_budget *b, double now, double step)
{
    double reserve = fmax(RESERVE_SHARE * b->budget_s, RESERVE_STEPS * step);
    return b->deadline - now - reserve - b->final_s;
}

/* The count that fits after iteration it at these times: the ranks' mean, the same on each. */
static ag_status plan(ag_budget *b, long it, double now, double step, long *n, ag_error *err)
{
    double fit = (double)fit_count(b, it, step, ag_budget_eval_time(b), available(b, now, step));
    ag_status s = ag_budget_sum(b, &fit, err);
    *n = (long)floor(fit / ranks(b));
    return s;
}

/* Before each evaluation (so that its checkpoint carries the count the steps after it follow):
 * the count fitted again to the slower of the steps since it was last fitted and those since the
 * last evaluation (the machine's speed now; a mean over an evaluation's interval, which one
 * thread tuner's probe does not move), taken when it moves by more than REFIT_MIN. The cosine
 * then ends at the new count, and its rate above min_lr jumps at that step: at a fifth of the
 * decay, 1.04x for 30% more steps, 0.90x for 30% fewer; at 40% of it, 1.20x for 30% more; at
 * 70%, 0.57x for 10% fewer; at 90%, 2x for 5% more, which is 2.5% of lr - min_lr: where the
 * cosine is flat its relative jumps are large and its absolute ones small. */
static ag_status refit(ag_budget *b, long it, double now, ag_error *err)
{
    double recent = b->recent >= CAL_MIN_STEPS ? b->recent_s / (double)b->recent : 0;
    b->recent_s = b->recent = 0;
    if (b->timed < CAL_MIN_STEPS) return AG_OK;   /* the same on every rank: the steps are */
    double step = fmax(b->timed_s / (double)b->timed, recent);
    long n;
    ag_status s = plan(b, it, now + ag_budget_eval_time(b), step, &n, err);   /* after the evaluation due here */
    if (s) return s;
    if (fabs((double)(n - b->steps)) > REFIT_MIN * (double)b->steps)
        fix_count(b, it, n, step, ag_budget_eval_time(b), true);
    return AG_OK;
}

/* After the run's first evaluation: *last when even one step (STEP_BATCHES of its batches) and
 * a final evaluation of a batch a split would end past the deadline, said in one line. */
static void room_for_a_step(ag_budget *b, long it, double now, bool *last)
{
    double batch = b->batch_s, step = b->step_s > 0 ? b->step_s : STEP_BATCHES * batch;
    if (now + step + splits(b) * batch + END_MARGIN_S <= b->deadline) return;
    say(b, "time budget: %s is too short for this run: an evaluation batch takes %.3g s and a step about %.3g s, "
        "and %.3g s are left; ending at iteration %ld with its evaluation and checkpoint", b->as_said, batch, step,
        b->deadline - now, it);
    *last = b->out_of_time = true;
}

ag_status ag_budget_calibrate(ag_budget *b, long it, bool evaluated, bool *last, ag_error *err)
{
    if (!b->deadline) return AG_OK;
    double now = ag_budget_now(b);
    bool first = b->eval_s < 0;
    if (evaluated) b->eval_s = now - b->t_check;
    if (first && b->batch_s > 0 && ranks(b) <= 1) room_for_a_step(b, it, now, last);
    if (*last) return AG_OK;
    b->t_steps = now;
    if (!b->fixing || it == b->start) return AG_OK;   /* nothing timed yet */
    double ready = (b->timed >= CAL_MIN_STEPS && b->timed_s >= CAL_SHARE * b->budget_s) || it > b->warmup;
    ag_status s = ag_budget_sum(b, &ready, err);   /* all ranks fix the count at one iteration */
    if (s || !(ready > 0)) return s;
    double step = b->timed ? b->timed_s / (double)b->timed : b->step_s;
    long n;
    if ((s = plan(b, it, now, step, &n, err))) return s;
    fix_count(b, it, n, step, ag_budget_eval_time(b), false);
    return AG_OK;
}

// --- evaluations bounded by the deadline (issue 35) ---

void ag_budget_eval_start(ag_budget *b, bool last)
{
    b->eval_end = INFINITY;
    if (!b->deadline) return;
    double now = ag_budget_now(b), end = b->deadline - END_MARGIN_S - b->final_s;
    if (!last && b->eval_s < 0) end = fmin(end, now + EVAL0_SHARE * b->budget_s);   /* nothing timed yet */
    else if (!last) end = b->deadline - final_time(b);   /* the final evaluation keeps its time */
    b->eval_end = end;
}

double ag_budget_eval_end(const ag_budget *b, bool half)
{
    if (!half || !isfinite(b->eval_end)) return b->eval_end;
    double now = ag_budget_now(b);
    return now + (b->eval_end - now) / 2;
}

long ag_budget_eval_batches(const ag_budget *b)
{
    return b->eval_batches > 0 && b->eval_batches < b->eval_iters ? b->eval_batches : b->eval_iters;
}

ag_status ag_budget_eval_late(const ag_budget *b, double end, bool *late, ag_error *err)
{
    *late = false;
    if (!b->deadline) return AG_OK;
    double past = ag_budget_now(b) > end;
    ag_status s = ag_budget_sum(b, &past, err);   /* every rank ends the split at the same batch */
    *late = past > 0;
    return s;
}

void ag_budget_eval_done(ag_budget *b, long it, bool last, long done)
{
    long want = ag_budget_eval_batches(b);
    if (!b->deadline || done >= want) return;
    if (!last && b->eval_s < 0) {
        b->eval_batches = done;
        say(b, "time budget: an evaluation of %ld batches a split does not fit in %.0f%% of the budget: %ld "
            "batch%s a split from here on", want, 100 * EVAL0_SHARE, done, done == 1 ? "" : "es");
    } else {
        say(b, "time budget: the %sevaluation at iteration %ld on %ld of %ld batches a split (the time left)",
            last ? "final " : "", it, done, want);
    }
}

void ag_budget_batch(ag_budget *b, double dt)
{
    if (dt > 0 && (b->batch_s <= 0 || dt < b->batch_s)) b->batch_s = dt;
}

ag_status ag_budget_probe(ag_budget *b, long it, double item_s, int items, const char *item, bool *last,
                          ag_error *err)
{
    double now = ag_budget_now(b), batch = item_s * items, splits = b->splits > 1 ? b->splits : 1;
    double late = now + splits * batch + AG_BUDGET_END_MARGIN_S > b->deadline;
    ag_status s = ag_budget_sum(b, &late, err);   /* all ranks end, or none */
    if (s || !(late > 0)) return s;
    char line[512];
    snprintf(line, sizeof line, "time budget: %s is too short for this run: one evaluation batch takes about %.3g s "
             "(a %s %.3g s, %d a batch), and %.3g s are left; ending at iteration %ld with a checkpoint, no evaluation",
             b->as_said, batch, item, item_s, items, b->deadline - now, it);
    if (b->say) b->say(b->say_user, line);
    *last = b->no_eval = b->out_of_time = true;
    return AG_OK;
}

ag_status ag_budget_probe_item(ag_budget *b, long it, ag_ctx *ctx, ag_status (*forward)(void *user, ag_error *err),
                               void *user, int items, const char *item, ag_error *err)
{
    if (!b->deadline || b->eval_s >= 0 || b->step_s > 0) return AG_OK;
    ag_status s = AG_OK;
    double item_s = 0;
    bool last = false;
    ag_ctx_set_grad(ctx, false);
    for (int k = 0; k < 2 && s == AG_OK; k++) {
        double t0 = ag_budget_now(b);
        s = forward(user, err);
        item_s = ag_budget_now(b) - t0;
    }
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, true);
    return s ? s : ag_budget_probe(b, it, item_s, items, item, &last, err);
}

void ag_format_duration(char *buf, size_t n, double s)
{
    if (!(s >= 0) || s > 4e6) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else if (s < 10 && fabs(s - (double)t) >= 0.05) snprintf(buf, n, "%.1fs", s);   /* 0.5s, never "0s" */
    else snprintf(buf, n, "%lds", t);
}
