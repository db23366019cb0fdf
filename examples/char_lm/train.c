/* train.c -- char_lm's training step and loop (train.h has the whole recipe, MODEL.md the math).
 *
 * Read train_step first: one optimizer step, top to bottom, as llm.c's train loop reads: the
 * learning rate, a batch, forward, loss, backward, the gradient clip, the AdamW update. Then
 * train_loop: evaluate when due, stop when asked, else step. Everything else of a run sits
 * behind one named call each, in the files run.h lists: the setup (train_setup.c), the
 * evaluation (train_eval.c), the log and metrics.csv (train_log.c), the checkpoint
 * (lm_run_checkpoint, checkpoint.h), the signals (lm_run_stop_requested), the lock (train/train.h,
 * taken in the setup) and the ranks' reduction (ag_ddp_reduce, train/ddp.h).
 *
 * Shapes use MODEL.md's letters: B windows per step, T = block_size, V the vocabulary; with
 * several ranks or --grad-accum a micro-batch has b = B / (ranks x K) windows. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "run.h"
#include "tensor/debug.h"   /* ag_now_s */
#include "trace.h"

// --- a batch: windows of T+1 tokens at random offsets (MODEL.md, "Vocabulary and data"),
// the library's (data/corpus.h), so that a program replaying a step draws the same ---

void lm_draw_windows(size_t *off, int B, size_t n, int T, ag_rng *rng) { ag_windows_draw(off, B, n, T, rng); }

void lm_fill_windows(int *x, int *y, const int *ids, const size_t *off, int b, int T)
{
    ag_windows_fill(x, y, ids, off, b, T);
}

uint64_t lm_dropout_seed(uint64_t seed, long it) { return ag_seed_at(seed, LM_TAG_DROP, (uint64_t)it); }

// --- one optimizer step ---

static ag_status norm_failed(const lm_run *R, long it, double norm, ag_error *err)
{
    return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the gradient norm is %g; stopped before the optimizer "
                     "step; %s (try a lower --lr)", it, lm_shown(norm), LM_KEPT(R));
}

/* One optimizer step at iteration it. Until the update a failure leaves the weights, and the
 * last checkpoint, as they were. It allocates nothing: the buffers are the run's, and the
 * ctx's arena has reached its high-water mark at the first step. */
static ag_status train_step(lm_run *R, long it, ag_error *err)
{
    const lm_config *c = &R->cfg;
    lm_learner *L = &R->learn;
    ag_params *P = L->m.g->params;   /* flat buffers: the weights W, their gradients dW, Adam's m, v */
    double t0 = ag_now_s();

    // the learning rate: a linear warmup to --lr, then a cosine decay to --min-lr (--lr-find: a sweep)
    double lr = c->lr_find > 0 ? ag_lr_range_at(c->lr_find, c->lr, c->max_iters, it) : ag_lr_at(&L->sched, it);

    // the batch: B windows of the training split, drawn by the run's sampler (checkpointed)
    R->ctl.it = it;
    ag_status s = lm_client_draw(R, &L->st.rng, err);   // off [B] (client.c: char_lm's calls of ag_train_client)

    // forward, loss, backward: this rank's K micro-batches (train/ddp.h: several ranks, --grad-accum;
    // alone, one of all B windows), each one's windows split over the workers (nn.h: shards),
    // each adding its share to dW; dropout masks from --seed's stream "dropout" at it (run.h)
    uint64_t drop = lm_dropout_seed(c->seed, it);
    ag_params_zero_grad(P);                                                   // dW = 0
    double loss = 0;
    ag_micro mb;
    for (int j = 0; s == AG_OK && ag_ddp_micro(R->ctl.ddp, j, c->batch_size, drop, &mb); j++) {
        ag_ctx_reset(L->ctx);                                                 // the last pass's tape goes
        double l;
        s = lm_client_pass(R, L->ctx, &mb, &l, err);   // x, y [b,T]; logits [b,T,V]; l; dW += dloss dl/dW
        loss += (double)mb.dloss * l;                  // its share of the step's loss (train/ddp.h)
    }
    if (s == AG_OK) s = ag_ddp_reduce(R->ctl.ddp, &loss, err);   // over the ranks: one dW, the mean loss
    if (s) return s;

    // the gradient clip: the factor that brings the global norm of dW down to --grad-clip
    double norm = ag_grad_norm(P);
    if (!isfinite(norm)) return norm_failed(R, it, norm, err);
    double gscale = ag_clip_scale(norm, c->grad_clip);                        // 1 when under it
    if ((s = lm_dynamics_watch(R, it, norm, gscale, err))) return s;         // --log-dynamics: dW, W

    // AdamW, with g = gscale dW: W -= lr wd W; W -= lr m_hat / (sqrt(v_hat) + eps) (adam.c)
    if ((s = lm_client_update(R, P, lr, ++L->st.step, gscale, err))) return s;   // --detect-anomaly: W checked
    ag_ctx_reset(L->ctx);
    ag_thread_tuner_step(&L->threads, ag_now_s() - t0);   // the default --threads: 2, or 1 while faster
    return lm_log_step(R, it, lr, loss, t0, err);   // metrics.csv's row, the progress line
}

// --- signals and checkpoints ---

int lm_run_stop_requested(const lm_run *R)
{
    if (ag_ddp_ranks(R->ctl.ddp) > 1) return ag_ddp_stop(R->ctl.ddp);
    return R->o->stop ? *R->o->stop : 0;
}

bool lm_run_signal_seen(const lm_run *R)
{
    return ag_dist_size(R->o->dist) <= 1 && R->o->stop && *R->o->stop;   /* no ddp yet in the setup */
}

ag_status lm_run_checkpoint(lm_run *R, long it, const double *eval, ag_error *err)
{
    lm_train_state *st = &R->learn.st;
    if (R->ctl.saved_at == it) return AG_OK;
    st->iter = it;
    st->has_eval = eval != NULL;
    if (eval) {
        st->eval_train = eval[0];
        st->eval_val = eval[1];
    }
    ag_status s = lm_log_flush(R, err);   /* metrics.csv's rows up to it first */
    bool writer = ag_ddp_writer(R->ctl.ddp);
    if (s == AG_OK && writer) s = lm_run_save(R, err);   /* into the locked directory (train_setup.c) */
    if (s) return s;
    R->ctl.saved_at = it;
    st->prev_hash = ag_weights_hash(R->learn.m.g->params);   /* the next checkpoint follows this one */
    if (writer && R->ctl.replaces) {   /* --overwrite: the old run goes once ours is committed */
        char left[1024], note[1200];
        ag_ckpt_clean(R->o->out_dir, &lm_ckpt_kind, R->ctl.replaces, left, sizeof left, note, sizeof note);
        R->ctl.replaces = 0;
    }
    return AG_OK;
}

const char *lm_run_kept(const lm_run *R, char *buf)
{
    if (ag_ddp_writer(R->ctl.ddp)) ag_ckpt_kept(R->o->out_dir, buf, LM_KEPT_MAX);   /* rank 0 holds the directory */
    else snprintf(buf, LM_KEPT_MAX, "the checkpoint of iteration %ld is kept", R->ctl.saved_at);
    return buf;
}

/* A stop signal (Ctrl-C) before iteration it: a checkpoint of where the run stands. */
static ag_status stop_early(lm_run *R, long it, lm_train_result *r, ag_error *err)
{
    r->stop_signal = lm_run_stop_requested(R);
    ag_status s = lm_run_checkpoint(R, it, NULL, err);
    if (s) return s;
    lm_log_break(R);
    r->interrupted = true;
    r->iter = it;
    return AG_OK;
}

// --- the loop ---

/* train.h's loop: evaluate when due, stop at max_iters, at the time budget or when asked, else
 * one step. */
static ag_status train_loop(lm_run *R, lm_train_result *r, ag_error *err)
{
    const lm_train_opts *o = R->o;
    R->rep.t_start = ag_now_s();
    lm_budget_start(R);
    for (long it = R->ctl.start;; it++) {
        if (lm_run_stop_requested(R)) return stop_early(R, it, r, err);   // a signal: checkpoint, return
        bool last = it == R->cfg.max_iters;
        ag_status s = lm_budget_check(R, it, &last, err);                // --time-budget: no time for more
        if (s == AG_OK) s = lm_run_evaluate(R, it, last, r, err);        // when due: losses, checkpoint
        if (s) return s;
        if (lm_run_stop_requested(R)) return stop_early(R, it, r, err);   // one came during it
        if (last) {
            r->iter = it;
            r->out_of_time = R->ctl.budget.out_of_time;
            return AG_OK;
        }
        if ((s = lm_budget_calibrate(R, it, &last, err))) return s;       // --time-budget: fix the count
        if (last) {                                                       // not even one step fits in it
            r->iter = it;
            r->out_of_time = true;
            return lm_log_last_row(R, it, err);
        }
        if (o->before_step) o->before_step(it, R->learn.m.g, o->hook_user);
        if ((s = train_step(R, it, err))) {
            lm_log_break(R);
            return s;
        }
    }
}

/* --trace-shapes: the run's header, then one forward pass of a few training windows, op by op. */
static ag_status trace(lm_run *R, ag_error *err)
{
    lm_log_header(R);
    return lm_trace_text(R->o->trace, R->learn.m.g, R->data.text.ids, R->data.n_train, true, "the training text", err);
}

ag_status lm_train(const lm_train_opts *o, lm_train_result *r, ag_error *err)
{
    lm_run R = {.o = o, .rep.plot_ok = o->plot, .ctl.budget.t0 = lm_budget_now(o)};   /* --time-budget counts from here */
    memset(r, 0, sizeof *r);
    ag_status s = lm_run_setup(&R, err);             /* lock, data, model, optimizer state, buffers */
    r->ranks_compared = R.ctl.compared;
    r->error_shared = R.ctl.shared;
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
        if (o->trace) s = trace(&R, err);             /* --trace-shapes */
    }
    if (s == AG_OK && !lm_run_nothing_to_do(&R, r)) { /* --trace-only; --max-iters reached before */
        s = lm_run_open_dir(&R, err);                 /* mkdir -p, --overwrite, metrics.csv */
        if (s == AG_OK) s = train_loop(&R, r, err);
        if (s == AG_OK) lm_log_end(&R, r);
    }
    lm_run_free(&R);
    return s;
}
