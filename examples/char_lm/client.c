/* client.c -- char_lm as a client of the library's trainer (train/train.h: ag_train_client): the
 * calls ag_train_run makes, in its signatures, user an lm_run (run.h). char_lm's own loop
 * (train.c, train_log.c) calls these same functions, so that the switch to ag_train_run changes
 * who calls them, not what they do. */
#include <math.h>
#include <stdio.h>
#include "run.h"

// --- a step ---

ag_status lm_client_draw(void *user, ag_rng *rng, ag_error *err)
{
    lm_run *R = user;
    const lm_config *c = &R->cfg;
    ag_rng fixed = lm_overfit_rng(c);   /* --overfit-batch: the same B windows at every step */
    lm_draw_windows(R->data.off, c->batch_size, R->data.n_train, c->model.block_size, c->overfit_batch ? &fixed : rng);
    (void)err;   // off [B]
    return AG_OK;
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

ag_status lm_client_pass(void *user, ag_ctx *ctx, ag_micro *mb, double *loss, ag_error *err)
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

ag_status lm_client_update(void *user, ag_params *P, double lr, long t, double clip, ag_error *err)
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

// --- the log's words ---

void lm_client_progress_text(void *user, long it, long steps, double loss, double lr, double ema_s,
                             const ag_budget *b, char *buf, size_t n)
{
    const lm_run *R = user;
    int B = R->cfg.batch_size, T = R->cfg.model.block_size;
    char eta[32], of[24];   /* with --time-budget: the time left, and "?" until the count is fixed */
    ag_format_duration(eta, sizeof eta, b->deadline ? b->deadline - lm_budget_now(R->o) : ema_s * (double)(steps - it - 1));
    if (b->fixing) snprintf(of, sizeof of, "?");
    else snprintf(of, sizeof of, "%ld", steps);
    snprintf(buf, n, "iter %ld/%s  loss %.4f  lr %.2e  %.0f tok/s  %s %s", it, of, loss, lr, (double)B * T / ema_s,
             b->deadline ? "left" : "ETA", eta);
}

void lm_client_eval_text(void *user, long it, double tl, double vl, double score, char *buf, size_t n)
{
    const lm_run *R = user;
    size_t len = 0;   /* ag_msg_append: train/ddp.h */
    buf[0] = '\0';
    (void)score;   /* char_lm's loss is its measure */
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
        double t0 = lm_budget_now(R->o);
        if (R->o->before_batch) R->o->before_batch(R->o->hook_user);
        lm_draw_windows(R->data.off, B, n, R->cfg.model.block_size, &R->ctl.eval_rng);
        if (!ag_ddp_mine(R->ctl.ddp, k)) continue;   /* another rank's batch (train/ddp.h) */
        if ((s = lm_client_forward(R, ctx, ids, B, &loss, err))) break;
        sum += loss;
        ag_budget_batch(&R->ctl.budget, lm_budget_now(R->o) - t0);
    }
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, true);
    if (s == AG_OK) s = ag_ddp_sum(R->ctl.ddp, &sum, err);   /* every rank's batches */
    *done = k;
    *out = k > 0 ? sum / (double)k : NAN;
    return s;
}

ag_status lm_client_evaluate_train(void *user, ag_ctx *ctx, double *tl, ag_error *err)
{
    lm_run *R = user;
    const lm_data *D = &R->data;
    ag_rng_seed(&R->ctl.eval_rng, ag_seed_at(R->cfg.seed, LM_TAG_EVAL, (uint64_t)R->ctl.it));
    return estimate(R, ctx, D->text.ids, D->n_train, ag_budget_eval_end(&R->ctl.budget, D->n_val > 0), tl,
                    &R->ctl.eval_done, err);
}

ag_status lm_client_evaluate(void *user, ag_ctx *ctx, double *vl, double *score, ag_error *err)
{
    lm_run *R = user;
    const lm_data *D = &R->data;
    long done = R->ctl.eval_done;   /* the training split's, which goes on to draw from the same stream */
    *vl = *score = NAN;
    ag_status s = D->n_val > 0 ? estimate(R, ctx, D->text.ids + D->n_train, D->n_val,
                                          ag_budget_eval_end(&R->ctl.budget, false), vl, &done, err) : AG_OK;
    if (done < R->ctl.eval_done) R->ctl.eval_done = done;
    return s;
}
