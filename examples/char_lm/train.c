/* train.c -- char_lm's training run (train.h): the setup (train_setup.c), the trainer (ag_train_run) with
 * char_lm's client (client.c), the last lines (train_log.c). Shapes: MODEL.md's B, T = block_size, V. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "run.h"
#include "tensor/debug.h"   /* ag_now_s */

int lm_run_stop_requested(const lm_run *R)
{
    if (ag_ddp_ranks(R->ctl.ddp) > 1) return ag_ddp_stop(R->ctl.ddp);
    return R->o->stop ? *R->o->stop : 0;
}

/* The trainer's run from where the setup left it, as lm_train reports it. */
static ag_status train_loop(lm_run *R, lm_train_result *r, ag_error *err)
{
    char cols[16384];   /* metrics.csv's own columns: 2 a layer of up to 256 */
    ag_train_client c = lm_client(R, cols, sizeof cols);
    ag_train_opts to = lm_client_opts(R);
    lm_log_card(R, &c, &to);   /* the last pictures, the card */
    ag_train_result res;
    R->ck = (lm_ckpt_user){.g = R->learn.m.g, .cfg = &R->cfg, .vocab = &R->data.text.vocab, .data = R->learn.st};
    R->ctl.saved_at = R->o->resume ? R->ctl.start : -1;
    R->rep.t_start = ag_now_s();
    ag_status s = ag_train_run(&c, &to, &res, err);
    r->iter = res.step;
    r->stop_signal = res.stop_signal;
    r->interrupted = res.stop_signal != 0;
    r->out_of_time = res.out_of_time;
    if (!isnan(res.val_loss) || !isnan(res.train_loss)) r->train_loss = res.train_loss, r->val_loss = res.val_loss;
    r->sample = R->rep.sample;
    return s;
}

/* True when there is nothing to train: --trace-only, or a resumed run already at --max-iters
 * (r says where it stands; the run directory is tidied all the same). */
static bool nothing_to_do(lm_run *R, lm_train_result *r)
{
    const lm_train_opts *o = R->o;
    const lm_train_state *st = &R->learn.st;
    long start = r->iter = R->ctl.start;   /* where it stands (a run's result replaces it) */
    if (o->trace && o->trace_only) return true;
    if (!o->resume || start < R->cfg.max_iters) return false;
    if (ag_dist_rank(o->dist) == 0)   /* a kill after the last commit may have left the superseded checkpoint */
        ag_ckpt_tidy(o->out_dir, &lm_ckpt_kind, 0, lm_log_warn, R);
    if (o->log)
        fprintf(o->log, "%s is already at iteration %ld (--max-iters %ld): nothing to do\n", o->out_dir, start,
                R->cfg.max_iters);
    if (st->has_eval) {
        r->train_loss = st->eval_train;
        r->val_loss = st->eval_val;
    }
    return true;
}

ag_status lm_train(const lm_train_opts *o, lm_train_result *r, ag_error *err)
{
    lm_run R = {.o = o, .res = r, .rep.plot_ok = o->plot,
                .ctl.budget = {.clock = o->clock, .clock_user = o->hook_user}};
    R.ctl.budget.t0 = ag_budget_now(&R.ctl.budget);   /* --time-budget counts from here */
    memset(r, 0, sizeof *r);
    ag_status s = lm_run_setup(&R, err);             /* lock, data, model, optimizer state, buffers */
    if (s == AG_OK && lm_run_stop_requested(&R)) {   /* a signal during the setup: nothing written */
        r->interrupted = true;
        r->stop_signal = lm_run_stop_requested(&R);   /* main.c exits 128 + it, as after a step */
        r->iter = R.ctl.start;
        if (o->log) fprintf(o->log, "interrupted before training started; nothing written\n");
        lm_run_free(&R);
        return AG_OK;
    }
    if (s == AG_OK) {
        r->n_params = (long)R.learn.m.g->params->total;
        r->vocab_size = R.data.text.vocab.V;
        r->train_loss = r->val_loss = NAN;
        if (o->trace) {   /* --trace-shapes: the header, then a forward of a few training windows, op by op */
            lm_log_header(&R);
            const ag_gpt_trace_opts to = {.train = true, .what = "the training text", .graph = o->trace_graph,
                                          .unit = "characters"};
            s = ag_gpt_trace_windows(o->trace, R.learn.m.g, R.data.text.ids, R.data.n_train, &to, err);
        }
    }
    if (s == AG_OK && !nothing_to_do(&R, r)) {        /* --trace-only; --max-iters reached before */
        s = train_loop(&R, r, err);                   /* the trainer makes DIR, refuses another run's */
        if (s == AG_OK) lm_log_end(&R, r);
    }
    lm_run_free(&R);
    return s;
}
