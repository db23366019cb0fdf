/* recipe.h -- a time budget picks its recipe from the compute it measures (recipe.c), for any
 * program: a table of candidate recipes, each with a name, a relative cost of one step (its
 * FLOPs, say) and the steps it needs; the reference one's step timed on this machine; every
 * candidate's step predicted by its cost ratio; the largest that gets its steps taken.
 *
 *   ag_recipe_probe   time steps of the reference recipe for ~2% of the budget (a client's step
 *                     function; a stop signal ends it; the ranks share the mean)
 *   ag_recipe_pick    every candidate's step time and steps in the budget left, and the pick
 *   ag_recipe_close_call, ag_recipe_timed   the next one up close to its steps: its own steps
 *                     timed too, and the pick again
 *   ag_recipe_line    the one line that says the choice and why
 *
 * char_lm's recipes S, M, L are its own (examples/char_lm/recipe.c), a GPT's FLOPs and step
 * nn.h's (ag_gpt_step_flops, ag_gpt_probe); docs/performance.md, "The recipe follows the compute". */
#ifndef AG_TRAIN_RECIPE_H
#define AG_TRAIN_RECIPE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include "../tensor/tensor.h"

#define AG_RECIPE_MAX 8   /* candidates in a table, at most */

typedef struct {
    const char *name;   /* what the line names: "M" */
    double cost;        /* of one step, relative to the others (> 0): its FLOPs, say */
    long min_steps;     /* taken when it gets at least this many steps in the budget */
} ag_recipe;

typedef struct {
    int pick;                        /* index into the table */
    int n;                           /* candidates in the table */
    double budget_s;                 /* the whole budget */
    double probe_s;                  /* the probes' time, spent of the budget */
    double step_s[AG_RECIPE_MAX];    /* each candidate's step time: predicted, or measured where timed */
    long steps[AG_RECIPE_MAX];       /* the steps each would get */
    bool timed[AG_RECIPE_MAX];       /* its step time measured, not predicted */
} ag_recipe_choice;

/* The choice among table[n] (smallest first) for a budget of budget_s seconds, probe_s of which
 * the probe took, the reference table[ref]'s step measured at ref_step_s: each step time is
 * ref_step_s times the cost ratio; the steps each gets are what is left of the budget (less 1 s
 * of setup, then 95%: evaluations, checkpoints, the budget's reserve) over it; the pick is the
 * last that gets at least its min_steps, else the first. Deterministic. AG_ERR_ARG and a message
 * when n is not 1..AG_RECIPE_MAX, ref not in the table or a cost not > 0. */
ag_status ag_recipe_pick(const ag_recipe *table, int n, int ref, double budget_s, double probe_s, double ref_step_s,
                         ag_recipe_choice *ch, ag_error *err);

/* A close call: the next recipe up from the pick, not yet timed, is predicted at least
 * AG_RECIPE_CLOSE of its min_steps, so its own step time could take it (a cost ratio is a model:
 * FLOPs miss how well a machine runs each shape; a cost that leaves out a share of the step
 * that does not grow with the recipe, an optimizer's, overrates the larger one). Its index, to
 * time its steps too, or -1. */
#define AG_RECIPE_CLOSE 0.75
int ag_recipe_close_call(const ag_recipe *table, const ag_recipe_choice *ch);
/* Candidate i's step measured at step_s, its probe probe_s more of the budget: i and the larger
 * ones take the measured over the predicted ratio, every count the budget left, the pick again. */
void ag_recipe_timed(const ag_recipe *table, int i, double step_s, double probe_s, ag_recipe_choice *ch);

/* "time budget 10m00s at 0.0387 s a step: about 14,534 steps -> recipe M (WHAT); L would get
 * 6,581 (its steps timed), it needs 7,000": the pick, what describes it (NULL: no brackets),
 * and why not the next one up (when there is one). One line, no newline. */
void ag_recipe_line(char *buf, size_t n, const ag_recipe *table, int n_table, const ag_recipe_choice *ch,
                    const char *what);

typedef struct {
    ag_status (*step)(void *user, long t, ag_error *err);   /* one step of the reference recipe, t = 1, 2, ... */
    void *user;
    double (*clock)(void *user);   /* seconds (NULL: ag_now_s); a test's simulated one */
    void *clock_user;
    /* The sum of v[n] over the ranks, in place (NULL: one process). */
    ag_status (*sum)(void *user, double *v, int n, ag_error *err);
    void *sum_user;
    const volatile sig_atomic_t *stop;   /* non-zero (a signal): end after the step in hand; may be NULL */
} ag_recipe_probe_opts;

/* The reference recipe's step time: o->step called, the first 3 not timed (an arena grows, thread
 * pools start), then timed until they add up to 2% of budget_s (0.2 s to 3 s; at least 3 steps,
 * at most 200). Every rank times its own and they share the mean, so all choose alike. When a
 * stop came (on any rank), *step_s is 0 on every rank. A step's error ends it, returned. */
ag_status ag_recipe_probe(const ag_recipe_probe_opts *o, double budget_s, double *step_s, ag_error *err);

#endif
