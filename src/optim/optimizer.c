/* optimizer.c -- the update rules by name (optim.h: ag_optimizer): one switch over adam.c's,
 * muon.c's and sgd.c's steps. Fails only as Muon's first step can. */
#include "muon.h"

AG_SWITCH_DEFINE(ag_optimizer_switch, "optimizer", AG_OPTIMIZERS);

ag_status ag_optimizer_step(ag_optimizer k, ag_params *P, const ag_adam_cfg *c, double momentum, double lr, long t,
                       double clip)
{
    switch (k) {
    case AG_ADAMW: ag_adamw_step_scaled(P, c, lr, t, clip); break;
    case AG_ADAM: ag_adam_step_scaled(P, c, lr, t, clip); break;
    case AG_MUON: return ag_muon_step(P, c, lr, t, clip);
    case AG_SGD:
        if (clip != 1) ag_scale_grads(P, clip);
        ag_sgd_step(P, lr, momentum);
        break;
    }
    return AG_OK;
}
