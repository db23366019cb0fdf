/* activations.c -- --log-activations (lesson 14): what flows through the model, at each
 * evaluation, into DIR/activations.csv and DIR/activations.png (run.h). The reading of the tape
 * and the files are the library's (train/train.h: ag_activations, ag_plot_activations); this is
 * the forward they read: one batch (the validation split, else the training one; its own random
 * stream, so the run's losses do not change) through the model with the tape on and attention
 * op by op, so its scores are a tensor of their own. Rank 0 alone writes (train/ddp.h). Without the
 * flag nothing here runs. */
#include "run.h"

#define LM_TAG_ACTS 0x616374697673ull   /* "activs": the activation statistics' batch */
#define ACT_WINDOWS 8                   /* windows in the batch: enough for stable statistics */

/* One forward pass of the statistics' batch for iteration it, its tape read into a. */
static ag_status measure(lm_run *R, long it, ag_activations *a, ag_error *err)
{
    int B = R->cfg.batch_size < ACT_WINDOWS ? R->cfg.batch_size : ACT_WINDOWS, T = R->cfg.model.block_size;
    lm_data *D = &R->data;
    ag_rng rng;
    ag_rng_seed(&rng, ag_seed_at(R->cfg.seed, LM_TAG_ACTS, (uint64_t)it));
    bool val = D->n_val > 0;
    lm_draw_windows(D->off, B, val ? D->n_val : D->n_train, T, &rng);
    lm_fill_windows(D->x, D->y, D->text.ids + (val ? D->n_train : 0), D->off, B, T);   // x [B,T]
    ag_ctx *ctx = R->learn.ctx;
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, true);   /* the tape records every op: the reading needs its nodes */
    ag_gpt_forward(ctx, R->learn.m.g, D->x, NULL, B, T, &(ag_forward_opts){ .composed_attention = true }, NULL);
    ag_status s = ag_ctx_status(ctx);
    if (s) ag_seterr(err, s, "--log-activations: %s", ag_ctx_error(ctx));
    else ag_activations_read(a, ctx);
    ag_ctx_reset(ctx);
    return s;
}

ag_status lm_activations_record(lm_run *R, long it, ag_error *err)
{
    if (!R->cfg.log_activations) return AG_OK;
    if (!R->rep.acts) {   /* the reader and the file, at the run's first evaluation */
        R->rep.acts = ag_activations_open(R->learn.m.g->params, R->o->out_dir, ag_ddp_writer(R->ctl.ddp),
                                          R->ctl.resumed ? R->ctl.start : -1, err);
        if (!R->rep.acts) return err->status;
    }
    ag_status s = measure(R, it, R->rep.acts, err);
    return s ? s : ag_activations_record(R->rep.acts, it, R->o->log, err);
}
