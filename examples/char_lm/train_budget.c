/* train_budget.c -- --time-budget (run.h) on the library's budget (train/budget.h, whose
 * budget.c tells how the count is fitted, refitted and the deadline kept): the run ends, its
 * final evaluation and checkpoint written, within the budget counted from the start of
 * lm_train. What is char_lm's is here: the budget's view of the run (the config, the ranks,
 * the log, loss.png's wait), the count it fixes written back into the config (budget_iters, so
 * that every later checkpoint carries it and --resume continues that schedule exactly), and
 * the probe of one window before anything is timed. */
#include "run.h"
#include "tensor/debug.h"   /* ag_now_s */

#define FINAL_PLOT_S 0.5     /* the final evaluation draws loss.png and waits for it */

double lm_budget_now(const lm_train_opts *o)
{
    return o->clock ? o->clock(o->hook_user) : ag_now_s();
}

static ag_status ranks_sum(void *ddp, double *v, ag_error *err) { return ag_ddp_sum(ddp, v, err); }
static void log_line(void *R, const char *line) { lm_log_line(R, "%s", line); }

/* The budget, with what it reads of the run as it stands now (no loss.png after a failed one). */
static ag_budget *budget(lm_run *R)
{
    ag_budget *b = &R->ctl.budget;
    b->final_s = R->rep.plot_ok ? FINAL_PLOT_S : 0;
    return b;
}

/* The count the budget fixed (if it did), in the config that every later checkpoint saves. */
static void take_count(lm_run *R)
{
    lm_config *c = &R->cfg;
    if (!R->ctl.budget.count) return;
    c->max_iters = c->budget_iters = R->ctl.budget.count;
    c->lr_decay_iters = R->learn.sched.lr_decay_iters;   /* it followed the count, or stayed apart */
}

void lm_budget_start(lm_run *R)
{
    const lm_config *c = &R->cfg;
    ag_budget *b = budget(R);
    b->budget_s = c->time_budget;
    b->spent_s = R->o->budget_spent;   /* the recipe's probe (recipe.h) */
    b->clock = R->o->clock;
    b->clock_user = R->o->hook_user;
    b->sum = ranks_sum;
    b->sum_user = R->ctl.ddp;
    b->ranks = ag_ddp_ranks(R->ctl.ddp);
    b->say = log_line;
    b->say_user = R;
    ag_format_duration(b->as_said, sizeof b->as_said, c->time_budget);
    b->start = R->ctl.start;
    b->steps = c->max_iters;
    b->fit = c->budget_iters == 0;   /* a resumed run whose checkpoint has the count: a bound only */
    b->warmup = c->warmup_iters;
    b->eval_every = c->eval_interval;
    b->eval_iters = c->eval_iters;
    b->splits = R->data.n_val > 0 ? 2 : 1;
    b->sched = &R->learn.sched;
    ag_budget_start(b);
}

/* Before the run's first iteration, nothing timed: one window of the training text through the
 * model in no-grad mode (twice: the first pass is cold, the arena grows; its own stream, so that
 * the batch sampler and the evaluations stay as they are) tells what an evaluation batch of B
 * windows costs (ag_budget_probe: too little time for one a split ends the run at once with a
 * checkpoint). A test's simulated clock gives it no time (before_batch is a batch's). */
static ag_status probe(lm_run *R, long it, bool *last, ag_error *err)
{
    ag_ctx *ctx = R->learn.ctx;
    ag_rng rng;
    ag_rng_seed(&rng, ag_splitmix64(R->cfg.seed ^ LM_TAG_EVAL ^ LM_SEED_SALT));
    lm_draw_windows(R->data.off, 1, R->data.n_train, R->cfg.model.block_size, &rng);
    ag_status s = AG_OK;
    double window = 0, loss;
    ag_ctx_set_grad(ctx, false);
    for (int k = 0; k < 2 && s == AG_OK; k++) {
        double t0 = lm_budget_now(R->o);
        s = lm_client_forward(R, ctx, R->data.text.ids, 1, &loss, err);   // x, y [1,T]; loss [1]
        window = lm_budget_now(R->o) - t0;
    }
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, true);
    return s ? s : ag_budget_probe(&R->ctl.budget, it, window, R->cfg.batch_size, "window", last, err);
}

ag_status lm_budget_check(lm_run *R, long it, bool *last, ag_error *err)
{
    ag_budget *b = budget(R);
    if (!b->deadline) return AG_OK;
    ag_status s = it == R->ctl.start && b->eval_s < 0 && !(b->step_s > 0) ? probe(R, it, last, err) : AG_OK;
    if (s == AG_OK) s = ag_budget_check(b, it, last, err);   /* a refit before this evaluation's checkpoint */
    take_count(R);
    return s;
}

ag_status lm_budget_calibrate(lm_run *R, long it, bool *last, ag_error *err)
{
    bool from_ckpt = R->ctl.resumed && it == R->ctl.start && R->learn.st.has_eval;   /* not evaluated here */
    bool evaluated = it % R->cfg.eval_interval == 0 && !from_ckpt;
    ag_status s = ag_budget_calibrate(budget(R), it, evaluated, last, err);
    take_count(R);
    return s;
}

void lm_budget_eval_start(lm_run *R, bool last) { ag_budget_eval_start(budget(R), last); }
