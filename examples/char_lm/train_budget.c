/* train_budget.c -- --time-budget (run.h): the run ends, its final evaluation and checkpoint
 * written, within the budget counted from the start of lm_train.
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
 *         <= deadline - now - max(RESERVE_SHARE budget, RESERVE_STEPS step) - (with plots) FINAL_PLOT_S
 * where step is the mean timed step, eval the last evaluation's time with its checkpoint
 * (iteration 0's evaluation comes before step 0; none timed: 2 eval_iters forward passes at a
 * third of a step each) and the reserve leaves room for a machine whose speed wanders. N, at
 * most --max-iters, becomes max_iters, lr_decay_iters (unless that was set apart from
 * max_iters) and budget_iters, so every later checkpoint carries it and --resume continues
 * that schedule exactly. A resumed run whose checkpoint came before the count times its own
 * first steps the same way; a resumed run with the count has its own budget as a bound only.
 *
 * THE REFIT. A shared machine's speed wanders (here by 10-30% within minutes), and the first
 * steps are a small sample: a 10-minute run whose first 100 steps ran at 53k tokens/s and the
 * rest at 68k ended after 461 s. So before each evaluation the count is fitted the same way to
 * the slower of the steps since it was last fitted and those since the last evaluation, and
 * taken when it moves by more than REFIT_MIN, either way, to the end of the run. (Refits were first allowed
 * only in the budget's first fifth, then 40%: 10-minute runs whose machine slowed down after it
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
 * With several ranks (train/ddp.h) every decision is summed over the ranks, so that all stop, and
 * fix the same count, at the same iteration. */
#include <math.h>
#include "run.h"
#include "tensor/debug.h"   /* ag_now_s */

#define CAL_SHARE 0.02       /* the steps timed before the count is fixed: 2% of the budget */
#define CAL_MIN_STEPS 3      /*   and at least 3 of them (fewer when the warmup is shorter) */
#define CAL_SKIP 5           /* the steps before them, slower than the rest: not timed */
#define RESERVE_SHARE 0.02   /* the count aims to end 2% of the budget early, */
#define RESERVE_STEPS 10     /*   or 10 steps' time if more (a budget of seconds: 2% is 2 steps) */
#define FINAL_PLOT_S 0.5     /* the final evaluation draws loss.png and waits for it */
#define REFIT_MIN 0.02       /* the count fitted again at an evaluation is taken when it moves more */
#define EVAL0_SHARE 0.1      /* the run's first evaluation, nothing timed yet, takes at most this share */
#define END_MARGIN_S 0.1     /* the final evaluation ends this long before the deadline: its checkpoint */
#define PAUSE_FACTOR 5       /* a step this many times the smoothed one: the process was paused */
#define PAUSE_SAID_S 1.0     /*   said in the log from this long (shorter: a busy machine's hiccup) */
#define STEP_BATCHES 3       /* a step takes about 3 evaluation batches' time (forward, backward) */

double lm_budget_now(const lm_train_opts *o)
{
    return o->clock ? o->clock(o->hook_user) : ag_now_s();
}

void lm_budget_start(lm_run *R)
{
    lm_budget *b = &R->ctl.budget;
    b->eval_end = INFINITY;
    if (!(R->cfg.time_budget > 0)) return;
    b->t0 -= R->o->budget_spent;   /* the budget began before lm_train: the recipe's probe (recipe.h) */
    b->deadline = b->t0 + R->cfg.time_budget;
    b->fixing = R->cfg.budget_iters == 0;
    b->ceiling = R->cfg.max_iters;
    b->eval_s = -1;   /* none timed yet */
    b->t_check = b->t_steps = lm_budget_now(R->o);
}

/* An evaluation with its checkpoint: the last one timed, or an estimate from the step time. */
static double eval_time(const lm_run *R)
{
    const lm_budget *b = &R->ctl.budget;
    if (b->eval_s >= 0) return b->eval_s;
    return 2.0 * (double)R->cfg.eval_iters * b->step_s / 3 + 0.1;
}

/* The final evaluation: an evaluation, and loss.png drawn while the run waits. */
static double final_time(const lm_run *R) { return eval_time(R) + (R->rep.plot_ok ? FINAL_PLOT_S : 0); }

/* The step of iteration it - 1 ended now: its time, and the calibration's (the steps it times
 * before the count is fixed, and those since, for a refit) */
static void time_step(lm_run *R, long it, double now)
{
    lm_budget *b = &R->ctl.budget;
    if (it <= R->ctl.start) return;
    double dt = now - b->t_steps;
    if (b->step_s > 0 && dt > PAUSE_FACTOR * b->step_s && b->pauses++ == 0) {   /* one step: a pause (L3) */
        if (dt >= PAUSE_SAID_S)
            lm_log_line(R, "time budget: step %ld took %.3g s, %.0fx the others (the process was stopped?): its time "
                        "counts against the budget, not as a step's", it - 1, dt, dt / b->step_s);
        return;
    }
    b->pauses = 0;   /* two in a row: the machine slowed down */
    b->step_last = dt;
    b->step_s = b->step_s > 0 ? 0.9 * b->step_s + 0.1 * dt : dt;
    if ((b->fixing && it - 1 >= R->ctl.start + CAL_SKIP) || b->refit) {
        b->timed_s += dt;
        b->timed++;
    }
    if (b->refit) {
        b->recent_s += dt;
        b->recent++;
    }
}

static ag_status refit(lm_run *R, long it, double now, ag_error *err);

/* Before the run's first iteration, nothing timed: one window through the model tells what an
 * evaluation batch of B windows costs. When not even one a split fits before the deadline, the
 * run says so in one line and ends at once with a checkpoint (*last, no_eval). */
static ag_status probe(lm_run *R, long it, bool *last, ag_error *err)
{
    lm_budget *b = &R->ctl.budget;
    double window, splits = R->data.n_val > 0 ? 2 : 1;
    ag_status s = lm_run_probe(R, &window, err);
    if (s) return s;
    double now = lm_budget_now(R->o), batch = window * R->cfg.batch_size;
    double late = now + splits * batch + END_MARGIN_S > b->deadline;
    if ((s = ag_ddp_sum(R->ctl.ddp, &late, err)) || !(late > 0)) return s;   /* all ranks end, or none */
    char d[32];
    lm_format_duration(d, sizeof d, R->cfg.time_budget);
    lm_log_line(R, "time budget: %s is too short for this run: one evaluation batch takes about %.3g s (a window "
                "%.3g s, %d a batch), and %.3g s are left; ending at iteration %ld with a checkpoint, no evaluation",
                d, batch, window, R->cfg.batch_size, b->deadline - now, it);
    *last = b->no_eval = b->out_of_time = true;
    return AG_OK;
}

ag_status lm_budget_check(lm_run *R, long it, bool *last, ag_error *err)
{
    lm_budget *b = &R->ctl.budget;
    if (!b->deadline) return AG_OK;
    ag_status ps = it == R->ctl.start && b->eval_s < 0 && !(b->step_s > 0) ? probe(R, it, last, err) : AG_OK;
    if (ps || b->no_eval) return ps;
    double now = lm_budget_now(R->o);
    time_step(R, it, now);
    b->t_check = now;
    if (*last || !(b->step_s > 0)) return AG_OK;
    bool due = it % R->cfg.eval_interval == 0;
    ag_status s = due && b->refit ? refit(R, it, now, err) : AG_OK;   /* before this evaluation's checkpoint */
    if (s) return s;
    double more = (due ? eval_time(R) : 0) + fmax(b->step_s, b->step_last) + final_time(R);
    double late = now + more > b->deadline;
    if ((s = ag_ddp_sum(R->ctl.ddp, &late, err))) return s;   /* one rank out of time: all stop */
    if (!(late > 0)) return AG_OK;
    *last = b->out_of_time = true;
    if (b->fixing)
        lm_log_line(R, "time budget: out of time at iteration %ld, before the step count was fixed (a step %.3g s, "
                    "an evaluation %.3g s): ending here", it, b->step_s, eval_time(R));
    else
        lm_log_line(R, "time budget: out of time at iteration %ld of %ld (the machine slowed down?); ending here, the "
                    "rate at %.3g, not yet --min-lr %.3g (--resume finishes the schedule)", it, R->cfg.max_iters,
                    ag_lr_at(&R->learn.sched, it - 1), R->cfg.min_lr);
    return AG_OK;
}

/* Evaluations in (it, n], the final one at n included. */
static long evals_after(long it, long n, long every)
{
    return n / every - it / every + (n % every != 0);
}

/* The time of the steps it .. n-1 and of the evaluations after them. */
static double cost(long it, long n, long every, double step, double eval)
{
    return (double)(n - it) * step + (double)evals_after(it, n, every) * eval;
}

/* The largest count n > it whose steps and evaluations after it fit in avail seconds (at least
 * it + 1: the step in hand; at most max_iters). */
static long fit_count(const lm_run *R, long it, double step, double eval, double avail)
{
    long every = R->cfg.eval_interval, max = R->ctl.budget.ceiling;
    double guess = (double)it + floor((avail - eval) / (step + eval / (double)every));   /* evaluations spread */
    long n = guess <= (double)it + 1 ? it + 1 : guess >= (double)max ? max : (long)guess;
    while (n > it + 1 && cost(it, n, every, step, eval) > avail) n--;
    while (n < max && cost(it, n + 1, every, step, eval) <= avail) n++;
    return n;
}

/* The count is n from now on: the schedule's end, the run's end, and the checkpoints' record.
 * A refit (again) logs what changed. */
static void fix_count(lm_run *R, long it, long n, double step, double eval, bool again)
{
    lm_config *c = &R->cfg;
    lm_budget *b = &R->ctl.budget;
    long was = c->max_iters;
    if (c->lr_decay_iters == c->max_iters) c->lr_decay_iters = n;   /* it followed the count */
    c->max_iters = c->budget_iters = n;
    R->learn.sched.lr_decay_iters = c->lr_decay_iters;
    double spare = b->deadline - lm_budget_now(R->o) - cost(it, n, c->eval_interval, step, eval);
    if (again)
        lm_log_line(R, "time budget: at iteration %ld the steps take %.4g s (the %ld since the count was last "
                    "fitted): %ld steps in all instead of %ld, planned to end %.3g s before the deadline", it, step,
                    b->timed, n, was, spare);
    else
        lm_log_line(R, "time budget: %ld steps in all (%.4g s each, timed over %ld; an evaluation %.3g s), planned "
                    "to end %.3g s before the deadline", n, step, b->timed, eval, spare);
    b->refit = b->fixing || b->refit;   /* a count fixed in this run may be fitted again (not one resumed) */
    b->timed_s = b->timed = 0;           /* a refit times the steps from here: the machine's speed now */
    b->fixing = false;
}

/* The time left for steps and evaluations at now: the deadline less the reserve (a machine
 * whose speed wanders) and the final plot. */
static double available(const lm_run *R, double now, double step)
{
    const lm_budget *b = &R->ctl.budget;
    double reserve = fmax(RESERVE_SHARE * R->cfg.time_budget, RESERVE_STEPS * step);
    return b->deadline - now - reserve - (R->rep.plot_ok ? FINAL_PLOT_S : 0);
}

/* The count that fits after iteration it at these times: the ranks' mean, the same on each. */
static ag_status plan(lm_run *R, long it, double now, double step, long *n, ag_error *err)
{
    double fit = (double)fit_count(R, it, step, eval_time(R), available(R, now, step));
    ag_status s = ag_ddp_sum(R->ctl.ddp, &fit, err);
    *n = (long)floor(fit / ag_ddp_ranks(R->ctl.ddp));
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
static ag_status refit(lm_run *R, long it, double now, ag_error *err)
{
    lm_budget *b = &R->ctl.budget;
    double recent = b->recent >= CAL_MIN_STEPS ? b->recent_s / (double)b->recent : 0;
    b->recent_s = b->recent = 0;
    if (b->timed < CAL_MIN_STEPS) return AG_OK;   /* the same on every rank: the steps are */
    double step = fmax(b->timed_s / (double)b->timed, recent);
    long n;
    ag_status s = plan(R, it, now + eval_time(R), step, &n, err);   /* after the evaluation due here */
    if (s) return s;
    if (fabs((double)(n - R->cfg.max_iters)) > REFIT_MIN * (double)R->cfg.max_iters)
        fix_count(R, it, n, step, eval_time(R), true);
    return AG_OK;
}

/* After the run's first evaluation: *last when even one step (STEP_BATCHES of its batches) and
 * a final evaluation of a batch a split would end past the deadline, said in one line. */
static void room_for_a_step(lm_run *R, long it, double now, bool *last)
{
    lm_budget *b = &R->ctl.budget;
    double splits = R->data.n_val > 0 ? 2 : 1, batch = b->batch_s;
    double step = b->step_s > 0 ? b->step_s : STEP_BATCHES * batch;
    if (now + step + splits * batch + END_MARGIN_S <= b->deadline) return;
    char d[32];
    lm_format_duration(d, sizeof d, R->cfg.time_budget);
    lm_log_line(R, "time budget: %s is too short for this run: an evaluation batch takes %.3g s and a step about "
                "%.3g s, and %.3g s are left; ending at iteration %ld with its evaluation and checkpoint", d, batch,
                step, b->deadline - now, it);
    *last = b->out_of_time = true;
}

ag_status lm_budget_calibrate(lm_run *R, long it, bool *last, ag_error *err)
{
    lm_budget *b = &R->ctl.budget;
    if (!b->deadline) return AG_OK;
    double now = lm_budget_now(R->o);
    bool from_ckpt = R->ctl.resumed && it == R->ctl.start && R->learn.st.has_eval;   /* not evaluated here */
    bool first = b->eval_s < 0;
    if (it % R->cfg.eval_interval == 0 && !from_ckpt) b->eval_s = now - b->t_check;
    if (first && b->batch_s > 0 && ag_ddp_ranks(R->ctl.ddp) <= 1) room_for_a_step(R, it, now, last);
    if (*last) return AG_OK;
    b->t_steps = now;
    if (!b->fixing || it == R->ctl.start) return AG_OK;   /* nothing timed yet */
    double ready = (b->timed >= CAL_MIN_STEPS && b->timed_s >= CAL_SHARE * R->cfg.time_budget) ||
                   it > R->cfg.warmup_iters;
    ag_status s = ag_ddp_sum(R->ctl.ddp, &ready, err);   /* all ranks fix the count at one iteration */
    if (s || !(ready > 0)) return s;
    double step = b->timed ? b->timed_s / (double)b->timed : b->step_s;
    long n;
    if ((s = plan(R, it, now, step, &n, err))) return s;
    fix_count(R, it, n, step, eval_time(R), false);
    return AG_OK;
}

// --- evaluations bounded by the deadline (issue 35) ---

void lm_budget_eval_start(lm_run *R, bool last)
{
    lm_budget *b = &R->ctl.budget;
    b->eval_end = INFINITY;
    if (!b->deadline) return;
    double now = lm_budget_now(R->o), end = b->deadline - END_MARGIN_S - (R->rep.plot_ok ? FINAL_PLOT_S : 0);
    if (!last && b->eval_s < 0) end = fmin(end, now + EVAL0_SHARE * R->cfg.time_budget);   /* nothing timed yet */
    else if (!last) end = b->deadline - final_time(R);   /* the final evaluation keeps its time */
    b->eval_end = end;
}

double lm_budget_eval_end(const lm_run *R, bool half)
{
    const lm_budget *b = &R->ctl.budget;
    if (!half || !isfinite(b->eval_end)) return b->eval_end;
    double now = lm_budget_now(R->o);
    return now + (b->eval_end - now) / 2;
}

long lm_budget_eval_batches(const lm_run *R)
{
    long n = R->ctl.budget.eval_batches;
    return n > 0 && n < R->cfg.eval_iters ? n : R->cfg.eval_iters;
}

ag_status lm_budget_eval_late(lm_run *R, double end, bool *late, ag_error *err)
{
    *late = false;
    if (!R->ctl.budget.deadline) return AG_OK;
    double past = lm_budget_now(R->o) > end;
    ag_status s = ag_ddp_sum(R->ctl.ddp, &past, err);   /* every rank ends the split at the same batch */
    *late = past > 0;
    return s;
}

void lm_budget_eval_done(lm_run *R, long it, bool last, long done)
{
    lm_budget *b = &R->ctl.budget;
    long want = lm_budget_eval_batches(R);
    if (!b->deadline || done >= want) return;
    if (!last && b->eval_s < 0) {
        b->eval_batches = done;
        lm_log_line(R, "time budget: an evaluation of %ld batches a split does not fit in %.0f%% of the budget: %ld "
                    "batch%s a split from here on", want, 100 * EVAL0_SHARE, done, done == 1 ? "" : "es");
    } else {
        lm_log_line(R, "time budget: the %sevaluation at iteration %ld on %ld of %ld batches a split (the time left)",
                    last ? "final " : "", it, done, want);
    }
}

void lm_budget_batch(lm_run *R, double dt)
{
    lm_budget *b = &R->ctl.budget;
    if (dt > 0 && (b->batch_s <= 0 || dt < b->batch_s)) b->batch_s = dt;
}
