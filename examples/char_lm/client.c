/* client.c -- char_lm as a client of the library's trainer (train/train.h: ag_train_client):
 * the calls ag_train_run makes, in its signatures, user an lm_run (run.h), and the options it
 * runs with (lm_client, lm_client_opts). The trainer steps, evaluates, checkpoints (in char_lm's
 * files: lm_ckpt_format), writes metrics.csv and keeps the time budget; these calls are what is
 * char_lm's: a batch of windows, the pass split over threads, its optimizers, the losses of both
 * splits, the attention statistics, the log's words. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"
#include "tensor/debug.h"   /* ag_now_s */

// --- a step ---

// --- --time-budget: the trainer keeps it (train/budget.h); the count it fixes goes into the config ---

/* The count the budget fixed (if it did), in the config that every later checkpoint saves:
 * max_iters, budget_iters (so that --resume continues that schedule exactly), lr_decay_iters
 * (it followed the count, or stayed apart). */
static void take_count(lm_run *R)
{
    const ag_budget *b = &R->ctl.budget;
    lm_config *c = &R->cfg;
    if (!b->count) return;
    c->max_iters = c->budget_iters = b->count;
    if (b->sched) c->lr_decay_iters = b->sched->lr_decay_iters;
}

/* The evaluation in hand is the run's final one. */
static bool final_eval(const lm_run *R) { return R->ctl.it >= R->ctl.budget.steps || R->ctl.budget.out_of_time; }

// --- a step ---

/* The step's batch: B windows of the training split, drawn by the run's sampler (checkpointed);
 * first the test hook before a step, and a failure left by the log's words (the attention
 * statistics). */
static ag_status draw(void *user, ag_rng *rng, ag_error *err)
{
    lm_run *R = user;
    const lm_config *c = &R->cfg;
    const lm_train_opts *o = R->o;
    if (R->ctl.pending.status) return ag_seterr(err, R->ctl.pending.status, "%s", R->ctl.pending.msg);
    take_count(R);
    if (o->before_step) o->before_step(R->ctl.it, R->learn.m.g, o->hook_user);
    R->rep.step_t0 = ag_now_s();
    ag_rng fixed = lm_overfit_rng(c);   /* --overfit-batch: the same B windows at every step */
    lm_draw_windows(R->data.off, c->batch_size, R->data.n_train, c->model.block_size, c->overfit_batch ? &fixed : rng);
    return AG_OK;   // off [B]
}

/* Why a forward gave no usable loss: an op that went non-finite (--detect-anomaly names it),
 * another error, or a loss that is NaN or Inf. AG_OK when loss is a finite number. */
static ag_status loss_failed(const lm_run *R, long it, ag_status s, const char *why, bool have, double lv,
                             ag_error *err)
{
    if (s != AG_ERR_NONFINITE && (!have || s))
        return ag_seterr(err, s ? s : AG_ERR_ARG, "iteration %ld: %s", it, why ? why : "forward failed");
    if (isfinite(lv) && !s) return AG_OK;
    if (s == AG_ERR_NONFINITE)
        return ag_seterr(err, s, "iteration %ld: %s; stopped before the optimizer step; %s", it, why, LM_KEPT(R));
    return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the loss is %g; stopped before the optimizer step; %s "
                     "(try a lower --lr)", it, lm_shown(lv), LM_KEPT(R));
}

static ag_status pass(void *user, ag_ctx *ctx, ag_micro *mb, double *loss, ag_error *err)
{
    lm_run *R = user;
    lm_data *D = &R->data;
    int T = R->cfg.model.block_size;
    ag_error why = {0};
    (void)ctx;   /* the shards hold theirs, made for it (ag_gpt_shards_new) */
    lm_fill_windows(D->x, D->y, D->text.ids, D->off + mb->first, mb->b, T);   // x, y [b,T] token ids
    const ag_forward_opts fo = { .train = true, .seed = mb->seed, .composed_attention = R->cfg.detect_anomaly };
    *loss = 0;
    ag_status s = ag_gpt_shards_pass(R->learn.shards, D->x, D->y, mb->b, T, &fo, mb->dloss, loss, &why);
    return loss_failed(R, R->ctl.it, s, s ? why.msg : NULL, s == AG_OK || s == AG_ERR_NONFINITE, s ? 0 : *loss, err);
}

/* --detect-anomaly: the optimizer is no op on the tape, so check what it wrote. */
static ag_status weights_finite(const lm_run *R, long it, double lr, ag_error *err)
{
    const ag_params *P = R->learn.m.g->params;
    const char *optimizer = ag_switch_name(&lm_optimizer_switch, R->cfg.optimizer);
    for (int e = 0; e < P->n; e++) {
        const ag_tensor *t = P->entries[e].t;
        for (size_t i = 0; i < ag_numel(t); i++)
            if (!isfinite(t->data[i]))
                return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the %s step made %s non-finite (element %zu "
                                 "is %g; lr %g); %s", it, optimizer, t->name, i, lm_shown((double)t->data[i]), lr,
                                 LM_KEPT(R));
    }
    return AG_OK;
}

static ag_status update(void *user, ag_params *P, double lr, long t, double clip, ag_error *err)
{
    const lm_run *R = user;
    const lm_config *c = &R->cfg;
    ag_adam_cfg ac = {c->beta1, c->beta2, 1e-8, c->weight_decay};
    switch (c->optimizer) {
    case LM_ADAMW: ag_adamw_step_scaled(P, &ac, lr, t, clip); break;   /* the clip folded in */
    case LM_ADAM: ag_adam_step_scaled(P, &ac, lr, t, clip); break;
    case LM_SGD:
        if (clip != 1) ag_scale_grads(P, clip);
        ag_sgd_step(P, lr, c->momentum);
        break;
    }
    return c->detect_anomaly ? weights_finite(R, R->ctl.it, lr, err) : AG_OK;
}

/* The seed of step it's dropout masks: --seed's stream "dropout" at it (run.h). */
static uint64_t step_seed(void *user, long it) { return lm_dropout_seed(((lm_run *)user)->cfg.seed, it); }

/* After step it: its loss for the tests (opts.losses), its time for metrics.csv's tokens/s. */
static void after_step(void *user, long it, double loss, double lr)
{
    lm_run *R = user;
    const lm_train_opts *o = R->o;
    (void)lr;
    if (o->losses && it < o->n_losses) o->losses[it] = loss;
    R->rep.step_s = ag_now_s() - R->rep.step_t0;
    R->ctl.it = it + 1;
}

/* metrics.csv's own columns of a row: tokens_per_s (a step's), then with --log-attn-stats two a
 * layer, filled on the row that carries an evaluation. */
static void row(void *user, long it, bool step, bool evaluated, char *buf, size_t n)
{
    const lm_run *R = user;
    double dt = R->rep.step_s, tokens = (double)R->cfg.batch_size * R->cfg.model.block_size;
    size_t len = 0;
    (void)it;
    buf[0] = '\0';
    if (step) ag_msg_append(buf, n, &len, "%.1f", tokens / (dt > 0 ? dt : 1e-9));
    for (int l = 0; R->cfg.log_attn_stats && l < R->cfg.model.n_layer; l++) {
        if (evaluated) ag_msg_append(buf, n, &len, ",%.6f,%.6f", R->rep.entropy[l], R->rep.peak[l]);
        else ag_msg_append(buf, n, &len, ",,");
    }
}

// --- the log's words ---

static void progress_text(void *user, long it, long steps, double loss, double lr, double ema_s, const ag_budget *b,
                          char *buf, size_t n)
{
    const lm_run *R = user;
    int B = R->cfg.batch_size, T = R->cfg.model.block_size;
    char eta[32], of[24];   /* with --time-budget: the time left, and "?" until the count is fixed */
    ag_format_duration(eta, sizeof eta, b->deadline ? b->deadline - ag_budget_now(b) : ema_s * (double)(steps - it - 1));
    if (b->fixing) snprintf(of, sizeof of, "?");
    else snprintf(of, sizeof of, "%ld", steps);
    snprintf(buf, n, "iter %ld/%s  loss %.4f  lr %.2e  %.0f tok/s  %s %s", it, of, loss, lr, (double)B * T / ema_s,
             b->deadline ? "left" : "ETA", eta);
}

/* --log-attn-stats: one batch (validation split, else training) through the model with every
 * layer's attention weights recorded; rep.entropy[l] and rep.peak[l] get their statistics. */
static ag_status attn_stats(lm_run *R, long it, ag_error *err)
{
    int B = R->cfg.batch_size, T = R->cfg.model.block_size, L = R->cfg.model.n_layer;
    lm_data *D = &R->data;
    lm_report *rep = &R->rep;
    ag_ctx *ctx = R->learn.ctx;
    ag_rng rng;
    ag_rng_seed(&rng, ag_seed_at(R->cfg.seed, LM_TAG_STATS, (uint64_t)it));
    bool val = D->n_val > 0;
    lm_draw_windows(D->off, B, val ? D->n_val : D->n_train, T, &rng);
    lm_fill_windows(D->x, D->y, D->text.ids + (val ? D->n_train : 0), D->off, B, T);   // x [B,T]
    ag_ctx_reset(ctx);
    ag_status s = ag_gpt_attn_record(ctx, R->learn.m.g, D->x, B, T, rep->attn);      // attn[l] [B,H,T,T]
    if (s) ag_seterr(err, s, "attention statistics: %s", ag_ctx_error(ctx));
    for (int l = 0; s == AG_OK && l < L; l++)
        ag_attn_stats(rep->attn[l]->data, B, R->cfg.model.n_head, T, &rep->entropy[l], &rep->peak[l]);
    ag_ctx_reset(ctx);
    return s;
}

/* The evaluation at iteration it, said once the trainer judged it (not diverged): first the
 * attention statistics it shows (a failure stops the run at the next call), the plots while
 * the run goes on (the final ones come after it: lm_train), then its line. */
static void eval_text(void *user, long it, double tl, double vl, double score, char *buf, size_t n)
{
    lm_run *R = user;
    size_t len = 0;   /* ag_msg_append: train/ddp.h */
    buf[0] = '\0';
    (void)score;   /* char_lm's loss is its measure */
    R->ctl.saved_at = it;   /* its checkpoint follows */
    if (R->cfg.log_attn_stats && !R->ctl.pending.status) attn_stats(R, it, &R->ctl.pending);
    if (R->rep.plot_ok && it > 0 && !final_eval(R)) lm_log_plots(R, false);
    ag_msg_append(buf, n, &len, "iter %ld: train %.4f", it, tl);
    if (R->data.n_val > 0) ag_msg_append(buf, n, &len, " val %.4f", vl);
    if (!R->cfg.log_attn_stats) return;
    ag_msg_append(buf, n, &len, "\n  attention entropy / peak weight:");
    for (int l = 0; l < R->cfg.model.n_layer; l++)
        ag_msg_append(buf, n, &len, "  L%d %.3f / %.3f", l, R->rep.entropy[l], R->rep.peak[l]);
}

// --- an evaluation: the mean loss of eval_iters random batches of each split in no-grad mode, from
// an RNG seeded by (seed, it) afresh each time, so that evaluating never changes training ---

ag_status lm_client_forward(lm_run *R, ag_ctx *ctx, const int *ids, int b, double *loss, ag_error *err)
{
    lm_data *D = &R->data;
    int T = R->cfg.model.block_size;
    lm_fill_windows(D->x, D->y, ids, D->off, b, T);                              // x, y [b,T]
    ag_ctx_reset(ctx);
    ag_tensor *l = NULL;
    const ag_forward_opts fo = { .composed_attention = R->cfg.detect_anomaly };   /* as in the step */
    ag_gpt_forward(ctx, R->learn.m.g, D->x, D->y, b, T, &fo, &l);               // loss [1]
    *loss = l ? (double)l->data[0] : NAN;
    ag_status s = l ? AG_OK : ag_ctx_status(ctx) ? ag_ctx_status(ctx) : AG_ERR_ARG;
    if (s) ag_seterr(err, s, "evaluation: %s", ag_ctx_error(ctx) ? ag_ctx_error(ctx) : "forward failed");
    return s;
}

/* Mean loss over eval_iters random batches of ids [n] from ctl.eval_rng (fewer under --time-budget:
 * its batch count, and none after the clock passes end; *done says how many). A stop signal
 * ends it after the batch in hand; with several ranks they agree on it, and on the clock,
 * every round of batches. */
static ag_status estimate(lm_run *R, ag_ctx *ctx, const int *ids, size_t n, double end, double *out, long *done,
                          ag_error *err)
{
    int B = R->cfg.batch_size, ranks = ag_ddp_ranks(R->ctl.ddp);
    double sum = 0, loss;
    ag_status s = AG_OK;
    bool late = false;
    long k, want = ag_budget_eval_batches(&R->ctl.budget);
    ag_ctx_set_grad(ctx, false);
    for (k = 0; k < want; k++) {
        if (k % ranks == 0 && (s = ag_ddp_agree_stop(R->ctl.ddp, err))) break;   /* a round */
        if (lm_run_stop_requested(R)) break;          /* a signal ends it at once */
        if (k > 0 && k % ranks == 0 && ((s = ag_budget_eval_late(&R->ctl.budget, end, &late, err)) || late)) break;
        double t0 = ag_budget_now(&R->ctl.budget);
        if (R->o->before_batch) R->o->before_batch(R->o->hook_user);
        lm_draw_windows(R->data.off, B, n, R->cfg.model.block_size, &R->ctl.eval_rng);
        if (!ag_ddp_mine(R->ctl.ddp, k)) continue;   /* another rank's batch (train/ddp.h) */
        if ((s = lm_client_forward(R, ctx, ids, B, &loss, err))) break;
        sum += loss;
        ag_budget_batch(&R->ctl.budget, ag_budget_now(&R->ctl.budget) - t0);
    }
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, true);
    if (s == AG_OK) s = ag_ddp_sum(R->ctl.ddp, &sum, err);   /* every rank's batches */
    *done = k;
    *out = k > 0 ? sum / (double)k : NAN;
    return s;
}

/* The training split's loss at iteration ctl.it (its evaluation bounded by the budget from here;
 * the evaluation's stream seeded here); ctl.eval_done: the fewest batches of a split. */
static ag_status evaluate_train(void *user, ag_ctx *ctx, double *tl, ag_error *err)
{
    lm_run *R = user;
    const lm_data *D = &R->data;
    take_count(R);   /* a count the budget fitted again before this evaluation's checkpoint */
    ag_budget_eval_start(&R->ctl.budget, final_eval(R));
    ag_rng_seed(&R->ctl.eval_rng, ag_seed_at(R->cfg.seed, LM_TAG_EVAL, (uint64_t)R->ctl.it));
    return estimate(R, ctx, D->text.ids, D->n_train, ag_budget_eval_end(&R->ctl.budget, D->n_val > 0), tl,
                    &R->ctl.eval_done, err);
}

/* Then the validation split's (NaN without one; score NaN), and what the budget learns of it. */
static ag_status evaluate(void *user, ag_ctx *ctx, double *vl, double *score, ag_error *err)
{
    lm_run *R = user;
    const lm_data *D = &R->data;
    long done = R->ctl.eval_done;   /* the training split's, which goes on to draw from the same stream */
    *vl = *score = NAN;
    ag_status s = D->n_val > 0 ? estimate(R, ctx, D->text.ids + D->n_train, D->n_val,
                                          ag_budget_eval_end(&R->ctl.budget, false), vl, &done, err) : AG_OK;
    if (done < R->ctl.eval_done) R->ctl.eval_done = done;
    if (s || lm_run_stop_requested(R)) return s;   /* cut short: the trainer saves as it is */
    ag_budget_eval_done(&R->ctl.budget, R->ctl.it, final_eval(R), R->ctl.eval_done);
    if (D->n_val > 0 && isnan(*vl))   /* the trainer's divergence rule would take a NaN for no validation split */
        return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the evaluation's val loss is nan: the model has "
                         "diverged; stopped; %s (try a lower --lr)", R->ctl.it, LM_KEPT(R));
    return AG_OK;
}

/* --log-activations (lesson 14): the forward the trainer reads at an evaluation: a batch of up
 * to 8 windows (the validation split, else the training one) from its own stream, so that the
 * run's losses do not change, attention op by op so that its scores are a tensor of their own. */
#define LM_TAG_ACTS 0x616374697673ull   /* "activs": the activation statistics' batch */
static ag_status activations_forward(void *user, ag_ctx *ctx, uint64_t seed, long it, ag_error *err)
{
    lm_run *R = user;
    int B = R->cfg.batch_size < 8 ? R->cfg.batch_size : 8, T = R->cfg.model.block_size;
    lm_data *D = &R->data;
    ag_rng rng;
    (void)seed, (void)err;   /* char_lm's own stream; a failure is on the ctx */
    ag_rng_seed(&rng, ag_seed_at(R->cfg.seed, LM_TAG_ACTS, (uint64_t)it));
    bool val = D->n_val > 0;
    lm_draw_windows(D->off, B, val ? D->n_val : D->n_train, T, &rng);
    lm_fill_windows(D->x, D->y, D->text.ids + (val ? D->n_train : 0), D->off, B, T);   // x [B,T]
    ag_gpt_forward(ctx, R->learn.m.g, D->x, NULL, B, T, &(ag_forward_opts){.composed_attention = true}, NULL);
    return AG_OK;
}

// --- the run ---

/* Before iteration start, nothing timed: one window of the training text through the model in
 * no-grad mode (twice: the first pass is cold, the arena grows; its own stream, so that the
 * batch sampler and the evaluations stay as they are) tells what an evaluation batch of B windows
 * costs (ag_budget_probe: too little time for one a split ends the run at once with a
 * checkpoint). A test's simulated clock gives it no time (before_batch is a batch's). */
static ag_status probe(lm_run *R, long it, ag_error *err)
{
    ag_ctx *ctx = R->learn.ctx;
    ag_budget *b = &R->ctl.budget;
    if (!b->deadline || b->eval_s >= 0 || b->step_s > 0) return AG_OK;
    ag_rng rng;
    ag_rng_seed(&rng, ag_splitmix64(R->cfg.seed ^ LM_TAG_EVAL ^ LM_SEED_SALT));
    lm_draw_windows(R->data.off, 1, R->data.n_train, R->cfg.model.block_size, &rng);
    ag_status s = AG_OK;
    double window = 0, loss;
    bool last = false;
    ag_ctx_set_grad(ctx, false);
    for (int k = 0; k < 2 && s == AG_OK; k++) {
        double t0 = ag_budget_now(&R->ctl.budget);
        s = lm_client_forward(R, ctx, R->data.text.ids, 1, &loss, err);   // x, y [1,T]; loss [1]
        window = ag_budget_now(&R->ctl.budget) - t0;
    }
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, true);
    return s ? s : ag_budget_probe(b, it, window, R->cfg.batch_size, "window", &last, err);
}

/* Once the trainer opened the run: its ctx made ready (--detect-anomaly, the shards), the
 * header said, the budget's probe. */
static ag_status start(void *user, ag_ctx *ctx, const ag_train_state *st, ag_error *err)
{
    lm_run *R = user;
    ag_error why = {0};
    R->learn.ctx = ctx;
    R->ctl.it = st->step;
    ag_ctx_set_detect_anomaly(ctx, R->cfg.detect_anomaly);
    ag_ctx_set_recycle_grads(ctx, true);   /* only the parameters' gradients are read */
    if (!(R->learn.shards = ag_gpt_shards_new(R->learn.m.g, ctx, R->learn.n_shards, &why)))
        return ag_seterr(err, why.status, "%s", why.msg);
    if (!R->o->trace) lm_log_header(R);   /* with --trace-shapes it came before the trace */
    ag_status s = ag_log_written(R->o->log, R->o->out_dir, err);   /* a full disk under the header: at once */
    return s ? s : probe(R, st->step, err);
}

/* The trainer's warnings and notes, as char_lm says them. */
static void warn(void *R, const char *line) { lm_log_warn(R, line); }

ag_train_client lm_client(lm_run *R, char *cols, size_t n)
{
    static const char *const attn[] = {"attn_entropy", "attn_max", NULL};
    const lm_config *c = &R->cfg;
    char *head = ag_csv_layer_head("tokens_per_s", attn, c->log_attn_stats ? c->model.n_layer : 0);
    snprintf(cols, n, "%.*s", head ? (int)strcspn(head, "\n") : 0, head ? head : "");
    free(head);
    return (ag_train_client){.name = "char_lm", .params = R->learn.m.g->params, .user = R, .batch = c->batch_size,
                             .batch_flag = "--batch-size",
                             .draw = draw, .pass = pass, .update = update, .step_seed = step_seed, .start = start,
                             .after_step = after_step, .evaluate = evaluate, .evaluate_train = evaluate_train,
                             .activations_forward = activations_forward, .columns = cols, .row = row,
                             .no_score = true, .progress_text = progress_text, .eval_text = eval_text,
                             .count = "iteration", .lr_name = "--lr", .format = &lm_ckpt_format, .unit = "windows"};
}

ag_train_opts lm_client_opts(lm_run *R)
{
    const lm_train_opts *o = R->o;
    const lm_config *c = &R->cfg;
    long log_every = o->log_every > 0 ? o->log_every : 10;
    return (ag_train_opts){.out_dir = o->out_dir, .make_parents = true, .steps = c->max_iters, .resume = o->resume,
                           .resumed = R->ctl.resumed ? &R->learn.from : NULL,   /* read by the setup */
                           .overwrite = o->overwrite, .seed = ag_seed_at(c->seed, 0, LM_TAG_BATCH),
                           .every = c->eval_interval, .log_every = log_every, .log_first = true,
                           .sched = {c->lr, c->min_lr, c->warmup_iters, c->lr_decay_iters}, .grad_clip = c->grad_clip,
                           .log_dynamics = c->log_dynamics ? log_every : 0, .log_activations = c->log_activations,
                           .lr_find_lo = c->lr_find, .threads = o->tune_threads ? ag_threads() : 0, .log = o->log,
                           .budget = &R->ctl.budget, .dist = o->dist, .grad_accum = o->grad_accum,
                           .ddp_out = &R->ctl.ddp, .stop = o->stop, .progress = o->progress,
                           .build_checked = true,   /* the setup's handshake, first of all (train_agree.c) */
                           .warn = warn, .warn_user = R, .lock = &R->ctl.lock, .no_pictures = true, .no_report = true,
                           .eval_at_start = true, .diverge_floor_name = "2 ln V",
                           .diverge_floor = 2 * log((double)R->data.text.vocab.V)};
}
