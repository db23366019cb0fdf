/* client.c -- char_lm as a client of the library's trainer (train/train.h: ag_train_client): the
 * calls ag_train_run makes, in its signatures, user an lm_run (run.h). char_lm's own loop
 * (train.c, train_log.c) calls these same functions, so that the switch to ag_train_run changes
 * who calls them, not what they do. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include "run.h"

/* printf at buf + *len, *len moved past what fitted in buf [n] (NUL-terminated). */
static void put(char *buf, size_t n, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t n, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = *len < n ? vsnprintf(buf + *len, n - *len, fmt, ap) : 0;
    va_end(ap);
    *len = w > 0 && *len + (size_t)w < n ? *len + (size_t)w : n;
}

// --- a step ---

ag_status lm_client_draw(void *user, ag_rng *rng, ag_error *err)
{
    lm_run *R = user;
    const lm_config *c = &R->cfg;
    ag_rng fixed = lm_overfit_rng(c);   /* --overfit-batch: the same B windows at every step */
    lm_draw_windows(R->data.off, c->batch_size, R->data.n_train, c->model.block_size, c->overfit_batch ? &fixed : rng);
    return (void)err, AG_OK;   // off [B]
}

/* Why a forward gave no usable loss: an op that went non-finite (--detect-anomaly names it),
 * another error, or a loss that is NaN or Inf. AG_OK when loss is a finite number. */
static ag_status loss_failed(const lm_run *R, long it, ag_status s, const char *why, bool have, double lv,
                             ag_error *err)
{
    if (s != AG_ERR_NONFINITE && (!have || s))
        return ag_seterr(err, s ? s : AG_ERR_ARG, "iteration %ld: %s", it, why ? why : "forward failed");
    if (isfinite(lv) && !s) return AG_OK;
    char kept[LM_KEPT_MAX];
    lm_run_kept(R, kept, sizeof kept);
    if (s == AG_ERR_NONFINITE)
        return ag_seterr(err, s, "iteration %ld: %s; stopped before the optimizer step; %s", it, why, kept);
    return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the loss is %g; stopped before the optimizer step; %s "
                     "(try a lower --lr)", it, lm_shown(lv), kept);
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
            if (!isfinite(t->data[i])) {
                char kept[LM_KEPT_MAX];
                lm_run_kept(R, kept, sizeof kept);
                return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the %s step made %s non-finite (element %zu "
                                 "is %g; lr %g); %s", it, optimizer, t->name, i, lm_shown((double)t->data[i]), lr,
                                 kept);
            }
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
    lm_format_duration(eta, sizeof eta, b->deadline ? b->deadline - lm_budget_now(R->o) : ema_s * (double)(steps - it - 1));
    if (b->fixing) snprintf(of, sizeof of, "?");
    else snprintf(of, sizeof of, "%ld", steps);
    snprintf(buf, n, "iter %ld/%s  loss %.4f  lr %.2e  %.0f tok/s  %s %s", it, of, loss, lr, (double)B * T / ema_s,
             b->deadline ? "left" : "ETA", eta);
}

void lm_client_eval_text(void *user, long it, double tl, double vl, double score, char *buf, size_t n)
{
    const lm_run *R = user;
    size_t len = 0;
    (void)score;   /* char_lm's loss is its measure */
    put(buf, n, &len, "iter %ld: train %.4f", it, tl);
    if (R->data.n_val > 0) put(buf, n, &len, " val %.4f", vl);
    if (!R->cfg.log_attn_stats) return;
    put(buf, n, &len, "\n  attention entropy / peak weight:");
    for (int l = 0; l < R->cfg.model.n_layer; l++)
        put(buf, n, &len, "  L%d %.3f / %.3f", l, R->rep.entropy[l], R->rep.peak[l]);
}
