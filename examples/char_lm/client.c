/* client.c -- char_lm as a client of the library's trainer: the calls of ag_train_client
 * (train/train.h says what each does), user an lm_run (run.h), and the options it runs with
 * (lm_client, lm_client_opts). What is char_lm's: a batch of windows, the pass split over
 * threads, the losses of both splits, the attention statistics, the evaluation's words. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"
#include "tensor/debug.h"   /* ag_now_s */

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

/* The step's batch: B windows of the training split, drawn by the run's sampler; first the test
 * hook, and a failure left by the evaluation's attention statistics. */
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
    ag_windows_draw(R->data.off, c->batch_size, R->data.n_train, c->model.block_size, c->overfit_batch ? &fixed : rng);
    return AG_OK;   // off [B]
}

/* Why a pass gave no loss: an op that went non-finite (--detect-anomaly names it), or another error. */
static ag_status pass_failed(const lm_run *R, ag_status s, const char *why, ag_error *err)
{
    if (s == AG_ERR_NONFINITE)
        return ag_seterr(err, s, "iteration %ld: %s; stopped before the optimizer step; %s", R->ctl.it, why, LM_KEPT(R));
    return ag_seterr(err, s, "iteration %ld: %s", R->ctl.it, why);
}

static ag_status pass(void *user, ag_ctx *ctx, ag_micro *mb, double *loss, ag_error *err)
{
    lm_run *R = user;
    lm_data *D = &R->data;
    int T = R->cfg.model.block_size;
    ag_error why = {0};
    (void)ctx;   /* the shards hold theirs, made for it (ag_gpt_shards_new) */
    ag_windows_fill(D->x, D->y, D->text.ids, D->off + mb->first, mb->b, T);   // x, y [b,T] token ids
    const ag_forward_opts fo = { .train = true, .seed = mb->seed, .composed_attention = R->cfg.detect_anomaly };
    *loss = 0;
    ag_status s = ag_gpt_shards_pass(R->learn.shards, D->x, D->y, mb->b, T, &fo, mb->dloss, loss, &why);
    return s ? pass_failed(R, s, why.msg, err) : AG_OK;
}

/* --detect-anomaly: the optimizer is no op on the tape, so check what it wrote. */
static ag_status weights_finite(const lm_run *R, long it, double lr, ag_error *err)
{
    size_t i;
    const ag_tensor *t = ag_params_nonfinite(R->learn.m.g->params, &i);
    if (!t) return AG_OK;
    return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the %s step made %s non-finite (element %zu is %g; lr %g); "
                     "%s", it, ag_switch_name(&ag_optimizer_switch, R->cfg.optimizer), t->name, i,
                     lm_shown((double)t->data[i]), lr, LM_KEPT(R));
}

static ag_status update(void *user, ag_params *P, double lr, long t, double clip, ag_error *err)
{
    const lm_run *R = user;
    const lm_config *c = &R->cfg;
    ag_adam_cfg ac = {.beta1 = c->beta1, .beta2 = c->beta2, .eps = 1e-8, .weight_decay = c->weight_decay,
                      .adamw_lr_scale = c->adamw_lr_scale};
    ag_status s = ag_optimizer_step(c->optimizer, P, &ac, c->momentum, lr, t, clip);
    if (s) return ag_seterr(err, s, "%s", ag_params_error(P));
    return c->detect_anomaly ? weights_finite(R, R->ctl.it, lr, err) : AG_OK;
}

/* The seed of step it's dropout masks: --seed's stream "dropout" at it (run.h). */
static uint64_t step_seed(void *user, long it)
{
    return ag_seed_at(((lm_run *)user)->cfg.seed, LM_TAG_DROP, (uint64_t)it);
}

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

// --- the evaluation's words ---

/* B windows of the validation split (else the training one) in data.x, from --seed's stream tag
 * at it: a batch of their own for the statistics, so that the run's losses do not change. */
static void side_batch(lm_run *R, uint64_t tag, long it, int B)
{
    lm_data *D = &R->data;
    int T = R->cfg.model.block_size;
    bool val = D->n_val > 0;
    ag_rng rng;
    ag_rng_seed(&rng, ag_seed_at(R->cfg.seed, tag, (uint64_t)it));
    ag_windows_draw(D->off, B, val ? D->n_val : D->n_train, T, &rng);
    ag_windows_fill(D->x, D->y, D->text.ids + (val ? D->n_train : 0), D->off, B, T);   // x [B,T]
}

/* The evaluation at iteration it, said once the trainer judged it (not diverged): first the
 * attention statistics it shows (a failure stops the run at the next call), the plots while
 * the run goes on (the final ones at its end: lm_log_card), then its line. */
static void eval_text(void *user, long it, double tl, double vl, double score, char *buf, size_t n)
{
    lm_run *R = user;
    size_t len = 0;   /* ag_msg_append: train/ddp.h */
    buf[0] = '\0';
    (void)score;   /* char_lm's loss is its measure */
    R->ctl.saved_at = it;   /* its checkpoint follows */
    if (R->cfg.log_attn_stats && !R->ctl.pending.status) {   /* --log-attn-stats: rep.entropy, rep.peak */
        side_batch(R, LM_TAG_STATS, it, R->cfg.batch_size);   // x [B,T]
        ag_gpt_attn_layer_stats(R->learn.ctx, R->learn.m.g, R->data.x, R->cfg.batch_size, R->cfg.model.block_size,
                                R->rep.attn, R->rep.entropy, R->rep.peak, &R->ctl.pending);
    }
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

/* b windows of ids at data.off through the model in no-grad mode: their mean loss in *loss. */
static ag_status lm_client_forward(lm_run *R, ag_ctx *ctx, const int *ids, int b, double *loss, ag_error *err)
{
    lm_data *D = &R->data;
    int T = R->cfg.model.block_size;
    const ag_forward_opts fo = { .composed_attention = R->cfg.detect_anomaly };   /* as in the step */
    ag_windows_fill(D->x, D->y, ids, D->off, b, T);   // x, y [b,T]
    return ag_gpt_loss(ctx, R->learn.m.g, D->x, D->y, b, T, &fo, "evaluation", loss, err);
}

/* The split an evaluation reads, ids [n], for eval_batch. */
typedef struct {
    lm_run *R;
    const int *ids;
    size_t n;
} lm_split;

/* An evaluation batch of B windows from ctl.eval_rng, after the test hook, and its loss when it
 * is this rank's (ag_ddp_eval_mean). */
static ag_status eval_batch(void *user, bool mine, double *loss, ag_error *err)
{
    const lm_split *sp = user;
    lm_run *R = sp->R;
    if (R->o->before_batch) R->o->before_batch(R->o->hook_user);
    ag_windows_draw(R->data.off, R->cfg.batch_size, sp->n, R->cfg.model.block_size, &R->ctl.eval_rng);
    return mine ? lm_client_forward(R, R->learn.ctx, sp->ids, R->cfg.batch_size, loss, err) : AG_OK;
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
    lm_split sp = {R, D->text.ids, D->n_train};
    return ag_ddp_eval_mean(R->ctl.ddp, &R->ctl.budget, ctx, eval_batch, &sp, R->o->stop,
                            ag_budget_eval_end(&R->ctl.budget, D->n_val > 0), tl, &R->ctl.eval_done, err);
}

/* Then the validation split's (NaN without one; score NaN), and what the budget learns of it. */
static ag_status evaluate(void *user, ag_ctx *ctx, double *vl, double *score, ag_error *err)
{
    lm_run *R = user;
    const lm_data *D = &R->data;
    long done = R->ctl.eval_done;   /* the training split's, which goes on to draw from the same stream */
    *vl = *score = NAN;
    lm_split sp = {R, D->text.ids + D->n_train, D->n_val};
    ag_status s = D->n_val > 0 ? ag_ddp_eval_mean(R->ctl.ddp, &R->ctl.budget, ctx, eval_batch, &sp, R->o->stop,
                                                  ag_budget_eval_end(&R->ctl.budget, false), vl, &done, err) : AG_OK;
    if (done < R->ctl.eval_done) R->ctl.eval_done = done;
    if (s || lm_run_stop_requested(R)) return s;   /* cut short: the trainer saves as it is */
    ag_budget_eval_done(&R->ctl.budget, R->ctl.it, final_eval(R), R->ctl.eval_done);
    if (D->n_val > 0 && isnan(*vl))   /* the trainer's divergence rule would take a NaN for no validation split */
        return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the evaluation's val loss is nan: the model has "
                         "diverged; stopped; %s (try a lower --lr)", R->ctl.it, LM_KEPT(R));
    return AG_OK;
}

/* --log-activations (lesson 14): up to 8 windows (as side_batch's) from a stream of their own,
 * attention op by op so that its scores are a tensor of their own. */
#define LM_TAG_ACTS 0x616374697673ull   /* "activs": the activation statistics' batch */
static ag_status activations_forward(void *user, ag_ctx *ctx, uint64_t seed, long it, ag_error *err)
{
    lm_run *R = user;
    int B = R->cfg.batch_size < 8 ? R->cfg.batch_size : 8;
    (void)seed, (void)err;   /* char_lm's own stream; a failure is on the ctx */
    side_batch(R, LM_TAG_ACTS, it, B);   // x [B,T]
    const ag_forward_opts fo = {.composed_attention = true};
    ag_gpt_forward(ctx, R->learn.m.g, R->data.x, NULL, B, R->cfg.model.block_size, &fo, NULL);
    return AG_OK;
}

// --- the run ---

/* --time-budget: one window of the training text (a stream of its own: the batches and
 * evaluations stay as they are), what the budget's probe times (ag_budget_probe_item). */
static ag_status probe_window(void *user, ag_error *err)
{
    lm_run *R = user;
    double loss;
    ag_rng rng;
    ag_rng_seed(&rng, ag_splitmix64(R->cfg.seed ^ LM_TAG_EVAL ^ LM_SEED_SALT));
    ag_windows_draw(R->data.off, 1, R->data.n_train, R->cfg.model.block_size, &rng);
    return lm_client_forward(R, R->learn.ctx, R->data.text.ids, 1, &loss, err);   // x, y [1,T]; loss [1]
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
    return s ? s : ag_budget_probe_item(&R->ctl.budget, st->step, ctx, probe_window, R, R->cfg.batch_size, "window",
                                        err);
}

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
                             .no_score = true, .eval_text = eval_text, .progress_word = "iter",
                             .progress_rate = "tok/s", .units_per_step = (double)c->batch_size * c->model.block_size,
                             .count = "iteration", .lr_name = "--lr", .format = &lm_ckpt_format, .unit = "windows"};
}

ag_train_opts lm_client_opts(lm_run *R)
{
    const lm_train_opts *o = R->o;
    const lm_config *c = &R->cfg;
    long log_every = o->log_every > 0 ? o->log_every : 10;
    return (ag_train_opts){.out_dir = o->out_dir, .make_parents = true, .steps = c->max_iters, .resume = o->resume,
                           .resumed = R->o->resume ? &R->learn.from : NULL,   /* read by the setup */
                           .overwrite = o->overwrite, .seed = ag_seed_at(c->seed, 0, LM_TAG_BATCH),
                           .every = c->eval_interval, .log_every = log_every, .log_first = true,
                           .sched = {c->lr, c->min_lr, c->warmup_iters, c->lr_decay_iters, c->lr_schedule},
                           .grad_clip = c->grad_clip,
                           .log_dynamics = c->log_dynamics ? log_every : 0, .log_activations = c->log_activations,
                           .lr_find_lo = c->lr_find, .threads = o->tune_threads ? ag_threads() : 0, .log = o->log,
                           .budget = &R->ctl.budget, .dist = o->dist, .grad_accum = o->grad_accum,
                           .ddp_out = &R->ctl.ddp, .stop = o->stop, .progress = o->progress,
                           .build_checked = true,   /* the setup's handshake, first of all (train_agree.c) */
                           .warn = lm_log_warn, .warn_user = R, .lock = &R->ctl.lock, .no_pictures = true,
                           .no_report = true, .eval_at_start = true, .diverge_floor_name = "2 ln V",
                           .diverge_floor = 2 * log((double)R->data.text.vocab.V)};
}
