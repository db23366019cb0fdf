/* train_eval.c -- the evaluation of a training run every eval_interval steps (run.h): the mean
 * loss of eval_iters random batches of each split in no-grad mode, from an RNG seeded by
 * (seed, it) afresh each time, so evaluating never changes training; with --log-attn-stats the
 * attention statistics of one batch; then the divergence test, the log line, the checkpoint
 * (the best one too, when it is) and the plots. (The `eval` command's deterministic loss of a whole file is eval.c.) */
#include <math.h>
#include <stdio.h>
#include "attn.h"
#include "run.h"

/* Mean loss over eval_iters random batches of ids [n] (fewer under --time-budget: its batch
 * count, and none after the clock passes end; *done says how many), in no-grad mode. A stop
 * signal ends it after the batch in hand; with several ranks they agree on it, and on the
 * clock, every round of batches. */
static ag_status estimate(lm_run *R, const int *ids, size_t n, ag_rng *rng, double end, double *out, long *done,
                          ag_error *err)
{
    int B = R->cfg.batch_size, T = R->cfg.model.block_size, ranks = ag_ddp_ranks(R->ctl.ddp);
    lm_data *D = &R->data;
    ag_ctx *ctx = R->learn.ctx;
    double sum = 0;
    ag_status s = AG_OK;
    bool late = false;
    long k, want = ag_budget_eval_batches(&R->ctl.budget);
    ag_ctx_set_grad(ctx, false);
    for (k = 0; k < want; k++) {
        if (k % ranks == 0 && (s = ag_ddp_agree_stop(R->ctl.ddp, err))) break;   /* a round */
        if (lm_run_stop_requested(R)) break;          /* a signal ends it at once */
        if (k > 0 && k % ranks == 0 && ((s = ag_budget_eval_late(&R->ctl.budget, end, &late, err)) || late)) break;
        double t0 = lm_budget_now(R->o);
        if (R->o->before_batch) R->o->before_batch(R->o->hook_user);
        lm_draw_windows(D->off, B, n, T, rng);
        if (!ag_ddp_mine(R->ctl.ddp, k)) continue;   /* another rank's batch (train/ddp.h) */
        lm_fill_windows(D->x, D->y, ids, D->off, B, T);                          // x, y [B,T]
        ag_ctx_reset(ctx);
        ag_tensor *loss = NULL;
        const ag_forward_opts fo = { .composed_attention = R->cfg.detect_anomaly };   /* as in the step */
        ag_gpt_forward(ctx, R->learn.m.g, D->x, D->y, B, T, &fo, &loss);         // loss [1]
        if (!loss) {
            s = ag_ctx_status(ctx) ? ag_ctx_status(ctx) : AG_ERR_ARG;
            ag_seterr(err, s, "evaluation: %s", ag_ctx_error(ctx) ? ag_ctx_error(ctx) : "forward failed");
            break;
        }
        sum += (double)loss->data[0];
        ag_budget_batch(&R->ctl.budget, lm_budget_now(R->o) - t0);
    }
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, true);
    if (s == AG_OK) s = ag_ddp_sum(R->ctl.ddp, &sum, err);   /* every rank's batches */
    *done = k;
    *out = k > 0 ? sum / (double)k : NAN;
    return s;
}

ag_status lm_run_probe(lm_run *R, double *window_s, ag_error *err)
{
    int T = R->cfg.model.block_size;
    lm_data *D = &R->data;
    ag_ctx *ctx = R->learn.ctx;
    ag_rng rng;   /* its own stream: the batch sampler and the evaluations stay as they are */
    ag_rng_seed(&rng, ag_splitmix64(R->cfg.seed ^ LM_TAG_EVAL ^ LM_SEED_SALT));
    lm_draw_windows(D->off, 1, D->n_train, T, &rng);
    lm_fill_windows(D->x, D->y, D->text.ids, D->off, 1, T);                     // x, y [1,T]
    const ag_forward_opts fo = { .composed_attention = R->cfg.detect_anomaly };
    ag_status s = AG_OK;
    ag_ctx_set_grad(ctx, false);
    for (int k = 0; k < 2 && s == AG_OK; k++) {   /* twice: the first pass is cold (the arena grows) */
        double t0 = lm_budget_now(R->o);   /* a test's simulated clock: no time (before_batch is a batch's) */
        ag_ctx_reset(ctx);
        ag_tensor *loss = NULL;
        ag_gpt_forward(ctx, R->learn.m.g, D->x, D->y, 1, T, &fo, &loss);       // loss [1]
        s = loss ? AG_OK : ag_ctx_status(ctx) ? ag_ctx_status(ctx) : AG_ERR_ARG;
        if (s) ag_seterr(err, s, "evaluation: %s", ag_ctx_error(ctx) ? ag_ctx_error(ctx) : "forward failed");
        *window_s = lm_budget_now(R->o) - t0;
    }
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, true);
    return s;
}

/* --log-attn-stats: one batch (validation split, else training) through the model with every
 * layer's attention weights recorded; rep.entropy[l] and rep.peak[l] get their statistics, and
 * rep.stats the metrics.csv columns ",entropy_0,peak_0,entropy_1,...". */
static ag_status attn_stats(lm_run *R, long it, ag_error *err)
{
    int B = R->cfg.batch_size, T = R->cfg.model.block_size, L = R->cfg.model.n_layer;
    lm_data *D = &R->data;
    lm_report *rep = &R->rep;
    ag_ctx *ctx = R->learn.ctx;
    ag_rng rng;
    ag_rng_seed(&rng, ag_seed_at(R->cfg.seed, LM_TAG_STATS, (uint64_t)it));
    bool val = D->n_val > 0;
    const int *ids = D->text.ids + (val ? D->n_train : 0);
    lm_draw_windows(D->off, B, val ? D->n_val : D->n_train, T, &rng);
    lm_fill_windows(D->x, D->y, ids, D->off, B, T);                              // x [B,T]
    ag_ctx_reset(ctx);
    ag_status s = lm_attn_record(ctx, R->learn.m.g, D->x, B, T, rep->attn);      // attn[l] [B,H,T,T]
    if (s) {
        ag_seterr(err, s, "attention statistics: %s", ag_ctx_error(ctx));
        ag_ctx_reset(ctx);
        return s;
    }
    size_t len = 0, n = rep->stats_cap;
    rep->stats[0] = '\0';
    for (int l = 0; l < L; l++) {
        lm_attn_stats(rep->attn[l]->data, B, R->cfg.model.n_head, T, &rep->entropy[l], &rep->peak[l]);
        int w = snprintf(rep->stats + len, len < n ? n - len : 0, ",%.6f,%.6f", rep->entropy[l], rep->peak[l]);
        if (w > 0) len += (size_t)w;
    }
    ag_ctx_reset(ctx);
    return AG_OK;
}

/* The mean loss of each split at iteration it (val NaN without a validation split), on done
 * batches a split. A resumed run's first evaluation is the one its checkpoint holds. */
static ag_status losses(lm_run *R, long it, double *tl, double *vl, long *done, ag_error *err)
{
    const lm_train_state *st = &R->learn.st;
    const lm_data *D = &R->data;
    *done = R->cfg.eval_iters;
    if (R->ctl.resumed && it == R->ctl.start && st->has_eval) {
        *tl = st->eval_train;
        *vl = st->eval_val;
        return AG_OK;
    }
    ag_status s = ag_ddp_check_weights(R->ctl.ddp, it, err);   /* the ranks still agree */
    if (s) return s;
    ag_rng rng;
    ag_rng_seed(&rng, ag_seed_at(R->cfg.seed, LM_TAG_EVAL, (uint64_t)it));
    const ag_budget *b = &R->ctl.budget;
    s = estimate(R, D->text.ids, D->n_train, &rng, ag_budget_eval_end(b, D->n_val > 0), tl, done, err);
    *vl = NAN;
    long val_done = *done;
    if (s == AG_OK && D->n_val > 0)
        s = estimate(R, D->text.ids + D->n_train, D->n_val, &rng, ag_budget_eval_end(b, false), vl, &val_done, err);
    if (val_done < *done) *done = val_done;
    return s;
}

// --- divergence, and the best checkpoint ---

/* The loss a run is judged by: validation, or training without a validation split. */
static double judged(const lm_run *R, double tl, double vl) { return R->data.n_val > 0 ? vl : tl; }

/* Divergence (issue 19): an evaluation loss that is not finite, or above
 *     limit = max(2 ln V, 4 x the lowest evaluation loss so far)
 * (train/train.h: ag_divergence_limit says why those two). A run's first evaluation has no best
 * to compare with: only a non-finite loss stops it. Train and validation losses are both held
 * to it. */
static double divergence_limit(const lm_run *R)
{
    const lm_train_state *st = &R->learn.st;
    return ag_divergence_limit(2 * log((double)R->data.text.vocab.V), st->best_loss, st->best_iter >= 0);
}

/* A diverged model is never saved: the error, naming what stays on disk. */
static ag_status diverged(const lm_run *R, long it, double tl, double vl, double limit, ag_error *err)
{
    const lm_train_state *st = &R->learn.st;
    char kept[LM_KEPT_MAX], above[160] = "";
    lm_run_kept(R, kept, sizeof kept);
    bool val_bad = R->data.n_val > 0 && !(isfinite(vl) && vl <= limit);   /* the loss the run is judged by */
    bool train_bad = !val_bad;
    double bad = train_bad ? tl : vl;
    if (isfinite(bad))
        snprintf(above, sizeof above, ", above the divergence limit %.4g (max(2 ln V, 4 x the best evaluation, "
                 "%.4f at iteration %ld))", limit, st->best_loss, st->best_iter);
    return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the evaluation's %s loss is %g%s: the model has "
                     "diverged; stopped; %s (try a lower --lr)", it, train_bad ? "train" : "val", lm_shown(bad),
                     above, kept);
}

/* The run's lowest evaluation loss so far: this one's, when lower (its checkpoint then
 * becomes DIR/best: lm_ckpt_save). */
static void note_best(lm_run *R, long it, double tl, double vl)
{
    lm_train_state *st = &R->learn.st;
    double loss = judged(R, tl, vl);
    if (st->best_iter >= 0 && !(loss < st->best_loss)) return;
    st->best_iter = it;
    st->best_loss = loss;
}

ag_status lm_run_evaluate(lm_run *R, long it, bool last, lm_train_result *r, ag_error *err)
{
    const lm_config *c = &R->cfg;
    lm_log_blank_eval(R);
    if (it % c->eval_interval != 0 && !last) return AG_OK;
    if (R->ctl.budget.no_eval) return lm_run_checkpoint(R, it, NULL, err);   /* not one batch fits the budget */
    double tl, vl;
    long done;
    lm_budget_eval_start(R, last);   /* --time-budget: when it must end */
    ag_status s = losses(R, it, &tl, &vl, &done, err);
    if (s || lm_run_stop_requested(R)) return s;   /* stopped halfway: the loop writes the checkpoint */
    ag_budget_eval_done(&R->ctl.budget, it, last, done);
    double limit = divergence_limit(R);
    bool val_bad = R->data.n_val > 0 && !(isfinite(vl) && vl <= limit);
    if (!(isfinite(tl) && tl <= limit) || val_bad) return diverged(R, it, tl, vl, limit, err);
    r->train_loss = tl;
    r->val_loss = vl;
    if (c->log_attn_stats && (s = attn_stats(R, it, err))) return s;
    lm_log_eval(R, it, tl, vl);
    if ((s = lm_activations_record(R, it, err))) return s;   /* --log-activations */
    note_best(R, it, tl, vl);
    if ((s = lm_run_checkpoint(R, it, (const double[2]){ tl, vl }, err))) return s;
    if (last && (s = lm_log_last_row(R, it, err))) return s;
    if ((s = lm_log_flush(R, err))) return s;
    if (R->rep.plot_ok && it > 0) lm_log_plots(R, last);
    return AG_OK;
}
