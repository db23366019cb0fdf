/* train_eval.c -- the evaluation of a training run every eval_interval steps (run.h): the mean
 * loss of each split (client.c: lm_client_evaluate_train, lm_client_evaluate); with
 * --log-attn-stats the attention statistics of one batch; then the divergence test, the log
 * line, the checkpoint (the best one too, when it is) and the plots. (The `eval` command's deterministic loss of a whole file is eval.c.) */
#include <math.h>
#include <stdio.h>
#include "attn.h"
#include "run.h"

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
    ag_status s = ag_gpt_attn_record(ctx, R->learn.m.g, D->x, B, T, rep->attn);      // attn[l] [B,H,T,T]
    if (s) {
        ag_seterr(err, s, "attention statistics: %s", ag_ctx_error(ctx));
        ag_ctx_reset(ctx);
        return s;
    }
    size_t len = 0;
    rep->stats[0] = '\0';
    for (int l = 0; l < L; l++) {
        ag_attn_stats(rep->attn[l]->data, B, R->cfg.model.n_head, T, &rep->entropy[l], &rep->peak[l]);
        ag_msg_append(rep->stats, rep->stats_cap, &len, ",%.6f,%.6f", rep->entropy[l], rep->peak[l]);
    }
    ag_ctx_reset(ctx);
    return AG_OK;
}

/* The mean loss of each split at iteration it (val NaN without a validation split), on done
 * batches a split. A resumed run's first evaluation is the one its checkpoint holds. */
static ag_status losses(lm_run *R, long it, double *tl, double *vl, long *done, ag_error *err)
{
    const lm_train_state *st = &R->learn.st;
    *done = R->cfg.eval_iters;
    if (R->ctl.resumed && it == R->ctl.start && st->has_eval) {
        *tl = st->eval_train;
        *vl = st->eval_val;
        return AG_OK;
    }
    double score;
    *vl = NAN;
    R->ctl.it = it;
    ag_status s = ag_ddp_check_weights(R->ctl.ddp, it, err);   /* the ranks still agree */
    if (s == AG_OK) s = lm_client_evaluate_train(R, R->learn.ctx, tl, err);
    if (s == AG_OK) s = lm_client_evaluate(R, R->learn.ctx, vl, &score, err);
    *done = R->ctl.eval_done;
    return s;
}

// --- divergence, and the best checkpoint ---

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
    char above[160] = "";
    bool val_bad = R->data.n_val > 0 && !(isfinite(vl) && vl <= limit);   /* the loss the run is judged by */
    bool train_bad = !val_bad;
    double bad = train_bad ? tl : vl;
    if (isfinite(bad))
        snprintf(above, sizeof above, ", above the divergence limit %.4g (max(2 ln V, 4 x the best evaluation, "
                 "%.4f at iteration %ld))", limit, st->best_loss, st->best_iter);
    return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the evaluation's %s loss is %g%s: the model has "
                     "diverged; stopped; %s (try a lower --lr)", it, train_bad ? "train" : "val", lm_shown(bad),
                     above, LM_KEPT(R));
}

/* The run's lowest evaluation loss so far: this one's, when lower (its checkpoint then
 * becomes DIR/best: lm_ckpt_save). */
static void note_best(lm_run *R, long it, double tl, double vl)
{
    lm_train_state *st = &R->learn.st;
    double loss = R->data.n_val > 0 ? vl : tl;   /* validation, or training without a validation split */
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
