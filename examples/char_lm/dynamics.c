/* dynamics.c -- --log-dynamics: how each step moves the weights, at every log step (lm_log_due:
 * every 10 steps and the last), into DIR/dynamics.csv and DIR/dynamics.png (run.h).
 *
 * Per layer l, for its attention weights (w_q, w_k, w_v, w_o) and its MLP weights (fc1, fc2, or
 * SwiGLU's three), each group taken as one vector:
 *   grad_attn_L<l>, grad_mlp_L<l>       ||dW||, before the clip: which layers get gradient
 *   update_attn_L<l>, update_mlp_L<l>   ||W_after - W_before|| / ||W_before||: how far one step
 *                                       moves them, relative to their size. Adam moves each
 *                                       element by about lr (exactly lr at its first step), so
 *                                       this is about lr / rms(W); a layer far below the others
 *                                       barely learns, far above them it may diverge
 * with the step's learning rate, global gradient norm and clip factor in front. The library
 * measures and writes the rows (train/train.h: ag_dynamics_log, the weights copied at a log
 * step before the update, lm_dynamics_watch, and compared after it, lm_dynamics_record) and
 * draws the picture (ag_plot_dynamics); when is char_lm's. Other steps cost one test. Rank 0
 * alone writes (train/ddp.h). */
#include "run.h"

ag_status lm_dynamics_watch(lm_run *R, long it, double norm, double gscale, ag_error *err)
{
    if (!R->cfg.log_dynamics || !lm_log_due(R, it)) return AG_OK;
    const ag_params *P = R->learn.m.g->params;
    if (!R->rep.dyn) {   /* the measure and the file, at the first log step of the run */
        R->rep.dyn = ag_dynamics_log_open(P, R->o->out_dir, ag_ddp_writer(R->ctl.ddp),
                                          R->ctl.resumed ? R->ctl.start : -1, err);
        if (!R->rep.dyn) return err->status;
    }
    ag_dynamics_log_watch(R->rep.dyn, P, it, norm, gscale);   // dW before the clip, W before the update
    return AG_OK;
}

ag_status lm_dynamics_record(lm_run *R, long it, double lr, ag_error *err)
{
    return R->rep.dyn ? ag_dynamics_log_record(R->rep.dyn, R->learn.m.g->params, it, lr, err) : AG_OK;
}
