/* muon.h -- Muon, an optimizer for the hidden matrices (muon.c has the formulas): the update of
 * each matrix params.h marks `hidden` (a Linear's weight, not an embedding or the output head) is
 * its momentum orthogonalized, at the size of an AdamW update; every other parameter takes AdamW's
 * step. char_lm's --optimizer muon; ag_optimizer_step (optim.h) by name. */
#ifndef AG_OPTIM_MUON_H
#define AG_OPTIM_MUON_H

#include "optim.h"

#define AG_MUON_MOMENTUM 0.95   /* buf = 0.95 buf + g */
#define AG_MUON_SCALE 0.2       /* the update's size: 0.2 sqrt(max(rows, cols)) */

/* One step, every gradient taken as grad_scale * g (a clip folded in, as ag_adamw_step_scaled):
 * the hidden matrices by Muon, their momentum in P->m (P->v stays 0), the rest by AdamW with c,
 * at lr times c->adamw_lr_scale (0: 1).
 * AG_ERR_NOMEM, why in P->err, when its scratch (P->work, made at the first step, again only if
 * the threads grow) cannot be made; it cannot fail otherwise. */
ag_status ag_muon_step(ag_params *P, const ag_adam_cfg *c, double lr, long t, double grad_scale);

/* NS5 in place: X [m,n] row-major, m <= n, becomes about U V^T of X = U S V^T (every singular
 * value mapped into about 0.7-1.2). work holds m n + 2 m m elements. Cannot fail. */
void ag_muon_orthogonalize(ag_real *X, int m, int n, ag_real *work);
/* NS5's FLOPs on a rows x cols matrix, m its smaller side and n its larger: five rounds of
 * X X^T (2 m m n), A A (2 m m m) and B X (2 m m n). A step's share of a time budget's cost
 * (nn.h: ag_gpt_muon_flops). */
double ag_muon_flops(int rows, int cols);

/* AdamW's step (adam.c) on every parameter but the hidden matrices: Muon's other half. */
void ag_adamw_step_not_hidden(ag_params *P, const ag_adam_cfg *c, double lr, long t, double grad_scale);

#endif
