/* budget.h -- a time budget for a training run of any model (budget.c; train.h includes it):
 * the run ends, its final evaluation and checkpoint written, within budget_s seconds of t0.
 *
 * A program fills the fields marked "set" and calls, at each iteration it of its loop:
 *
 *   ag_budget_start                  once, before the first iteration
 *   ag_budget_check (it, &last)      before the iteration's evaluation: the step before it
 *                                    timed; last becomes true when one more step and the final
 *                                    evaluation would end past the deadline
 *   (the evaluation, when due or last: ag_budget_eval_start, then per batch ag_budget_batch and
 *    ag_budget_eval_late, then ag_budget_eval_done)
 *   ag_budget_calibrate (it, &last)  after it, before the step: the evaluation timed, and (fit)
 *                                    once enough steps are timed the step count fixed
 *
 * With fit the budget also chooses the step count: how many steps and evaluations fit (the
 * comment at the top of budget.c tells how, and why from the sixth step), written to steps
 * and count, and to the schedule's end (sched) when that followed the count. Without fit the
 * count is the program's and the budget a bound only. Everything reads clock (a test's
 * simulated one; NULL: the wall clock), so what the budget decides is exact on a simulated
 * clock. Several ranks agree through sum: every decision is summed over them, so all stop,
 * and fix the same count, at the same iteration.
 *
 * Nothing prints: a line worth a log (a pause, the count fixed, out of time) goes to say. */
#ifndef AG_TRAIN_BUDGET_H
#define AG_TRAIN_BUDGET_H

#include <stdbool.h>
#include "../optim/optim.h"
#include "../tensor/tensor.h"

typedef struct {
    // --- set by the program before ag_budget_start ---
    double budget_s;         /* the budget in seconds; <= 0: none (every call does nothing) */
    double t0;               /* set: when the run began on clock (the budget counts from here) */
    double spent_s;          /* of the budget, spent before t0 (char_lm's recipe probe) */
    double (*clock)(void *user);   /* the clock in seconds (NULL: ag_now_s) */
    void *clock_user;
    /* The sum of *v over the ranks, in place (NULL: one process). */
    ag_status (*sum)(void *user, double *v, ag_error *err);
    void *sum_user;
    int ranks;               /* how many (0 or 1: one) */
    void (*say)(void *user, const char *line);   /* a line for the log (NULL: none) */
    void *say_user;
    char as_said[32];        /* the budget as the program writes it ("5m"); "": "<budget_s> s" */
    long start;              /* the run's first iteration (> 0 on a resume) */
    long steps;              /* the step count: the most the budget may fit (fit), then its count */
    bool fit;                /* fit the count (false: the count is fixed, the budget a bound only) */
    long warmup;             /* the warmup's iterations: the count is fixed at the latest after them */
    long eval_every;         /* an evaluation every this many iterations, and at the last */
    long eval_iters;         /* the batches a split of an evaluation takes (none timed: its estimate) */
    int splits;              /* the splits an evaluation reads (2: train and validation; 0 or 1: one) */
    double final_s;          /* the final evaluation's extra time (a plot it waits for) */
    ag_lr_schedule *sched;   /* its end follows the count when it was at it, and a run out of time
                                says its rate there (NULL: none) */

    // --- what it measured and decided ---
    double deadline;         /* when the run must have ended (t0 + budget_s); 0: no budget */
    bool fixing;             /* the step count is not fixed yet: the steps are being timed */
    long count;              /* the count fitted in this run (0: none yet) */
    double t_check;          /* when ag_budget_check last ran (before an evaluation) */
    double t_steps;          /* when the last step began (after its iteration's evaluation) */
    double step_s, step_last;   /* the smoothed step time, the last step's */
    double timed_s;          /* the calibration: the time of the steps it timed, */
    long timed;              /*   and how many (after the count is fixed: the steps since) */
    double recent_s;         /* after the count is fixed, the time of the steps since the last */
    long recent;             /*   evaluation, and how many */
    long ceiling;            /* steps before the count was fixed: no count goes above it */
    bool refit;              /* the count, fixed in this run, may still be fitted again */
    double eval_s;           /* the last evaluation's time, its checkpoint included; < 0: none timed */
    bool out_of_time;        /* the deadline ended the run before its step count */
    long eval_batches;       /* the batches a split an evaluation takes: eval_iters, or fewer when the
                                run's first evaluation did not fit; 0: eval_iters */
    double eval_end;         /* when the evaluation in hand must end (INFINITY: no budget) */
    int pauses;              /* steps in a row far slower than the others (a pause: not timed) */
    double batch_s;          /* the fastest evaluation batch of the run (the first ones are cold); 0: none */
    bool no_eval;            /* not even one evaluation batch fits: the run ends with a checkpoint alone */
} ag_budget;

#define AG_BUDGET_END_MARGIN_S 0.1   /* the final evaluation ends this long before the deadline */

/* The budget's clock: b->clock if given, else ag_now_s. */
double ag_budget_now(const ag_budget *b);
/* The sum of *v over the ranks (b->sum; one process: *v as it is). */
ag_status ag_budget_sum(const ag_budget *b, double *v, ag_error *err);
/* Before ag_budget_start (budget_s, t0, spent_s, clock and ranks set): the program's own setup
 * since t0 (reading its data) took what was left of the budget, on one process (several ranks
 * agree at the first step). Not when spent_s took it all already (a probe on a machine that
 * slow): that run ends at its start as any that has no room. */
bool ag_budget_setup_late(const ag_budget *b);
/* AG_ERR_ARG when ag_budget_setup_late, what the setup was reading named: "time budget: 5m ran
 * out while reading data.txt (0.0184 s used): nothing trained or written; give a longer
 * --time-budget". */
ag_status ag_budget_setup_check(const ag_budget *b, const char *reading, ag_error *err);
/* The deadline, and the clock's first reading; nothing without a budget. */
void ag_budget_start(ag_budget *b);
/* Before iteration it and its evaluation: the step that ended timed; when an evaluation is due,
 * the count fitted again to the latest steps; *last when one more step and the final
 * evaluation would end past the deadline (any rank's say-so). */
ag_status ag_budget_check(ag_budget *b, long it, bool *last, ag_error *err);
/* After iteration it and its evaluation (evaluated: one ran there), before its step: the
 * evaluation timed, and with fit, once enough steps are timed (at the latest at the end of the
 * warmup, so that no step's rate depends on it), the step count fixed. After the run's first
 * evaluation, *last when not even one step fits (said in one line). */
ag_status ag_budget_calibrate(ag_budget *b, long it, bool evaluated, bool *last, ag_error *err);
/* The time an evaluation with its checkpoint takes: the last one timed, or an estimate. */
double ag_budget_eval_time(const ag_budget *b);
/* Before the run's first iteration it, nothing timed: item_s, the time one item of an
 * evaluation batch took (a probe's: char_lm's one window), tells whether one batch of items
 * (item, their name: "window") a split fits before the deadline. When not (on any rank), the
 * run says so in one line and ends at once with a checkpoint and no evaluation: *last, no_eval
 * and out_of_time. */
ag_status ag_budget_probe(ag_budget *b, long it, double item_s, int items, const char *item, bool *last,
                          ag_error *err);

/* ag_budget_probe with the item's time measured: forward(user, err) puts one item of an
 * evaluation batch through the model on ctx in no-grad mode, twice (the first is cold: an arena
 * grows), the second timed on the budget's clock. Nothing without a deadline or once anything
 * is timed (a resumed run's). forward's error is returned. */
ag_status ag_budget_probe_item(ag_budget *b, long it, ag_ctx *ctx, ag_status (*forward)(void *user, ag_error *err),
                               void *user, int items, const char *item, ag_error *err);

// --- evaluations bounded by the deadline ---

/* Before an evaluation (last: the final one): when it must end. The run's first one, nothing
 * timed yet, gets a tenth of the budget; the final one what is left; the others all but the
 * final one's time. */
void ag_budget_eval_start(ag_budget *b, bool last);
/* The end of the evaluation's first split when half is true (the second gets the rest), else
 * of the whole; INFINITY without a budget. */
double ag_budget_eval_end(const ag_budget *b, bool half);
/* The batches a split an evaluation takes (eval_iters, or fewer: ag_budget_eval_done). */
long ag_budget_eval_batches(const ag_budget *b);
/* Inside a split, before a batch (at a round of the ranks): *late when the clock is past end
 * (any rank's), so that the split ends there. */
ag_status ag_budget_eval_late(const ag_budget *b, double end, bool *late, ag_error *err);
/* After the evaluation at it took done batches a split: fewer than asked is said; at the run's
 * first evaluation the later ones take as many. */
void ag_budget_eval_done(ag_budget *b, long it, bool last, long done);
/* An evaluation batch took dt seconds of the budget's clock. */
void ag_budget_batch(ag_budget *b, double dt);

/* A duration as a log writes it, in buf [n]: "1h30m", "2m05s", "42s", and under 10 s with its
 * tenth when that shows ("0.5s", never "0s" for half a second). A negative, NaN or absurd one
 * (over 4e6 s: a budget is at most 1000h) is "0s". Cannot fail. */
void ag_format_duration(char *buf, size_t n, double s);

#endif
