/* adam.c -- Adam and AdamW (Kingma & Ba 2015; Loshchilov & Hutter 2019), as MODEL.md defines
 * them, with t the step count from 1:
 *
 *   AdamW:  p -= lr*wd*p                       (decoupled decay, on decay params only)
 *           m = b1 m + (1-b1) g;   v = b2 v + (1-b2) g^2
 *           p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 *   Adam:   the same without the first line; on decay params g += wd*p (L2) before the moments.
 *
 * The bias corrections 1/(1-b^t) undo the moments' start at zero. Each parameter's decay flag
 * comes from its registration (2-D weights only), so a step is a loop over the parameters and
 * then over each one's elements. That loop is the reference; its fast twin, fast/adam.c, takes
 * over for a model past AG_ADAM_FAST_MIN elements on the fast table (every thread a share of
 * every parameter, the loop in wider vectors) and gives the same bits (tests/test_optim.c,
 * tests/test_fast_targets.c). Cannot fail. */
#include <math.h>
#include "adam_coef.h"
#include "fast/adam.h"
#include "muon.h"   /* ag_adamw_step_not_hidden */
#include "../tensor/speed.h" /* AG_KERNELS_FAST */

/* In ag_real, in the order PyTorch's AdamW uses (p *= 1 - lr wd; m = b1 m + (1-b1) g;
 * v = b2 v + (1-b2) g g; p -= (lr/bc1) m / (sqrt(v)/sqrt(bc2) + eps)), so the loop rounds like
 * the reference; g * gs is PyTorch's clip_grad_norm_ g.mul_(coef), in ag_real too. */
static adam_coef coef_of(const ag_adam_cfg *c, double lr, long t, bool decoupled, ag_real gs, bool decay)
{
    double wd = decay ? c->weight_decay : 0;
    double bc1 = 1 - pow(c->beta1, (double)t), bc2 = 1 - pow(c->beta2, (double)t);
    return (adam_coef){ .keep = (ag_real)(1 - lr * (decoupled ? wd : 0)), .l2 = (ag_real)(decoupled ? 0 : wd),
                        .b1 = (ag_real)c->beta1, .b2 = (ag_real)c->beta2,
                        .a1 = (ag_real)(1 - c->beta1), .a2 = (ag_real)(1 - c->beta2),
                        .step = (ag_real)(lr / bc1), .inv_sqrt_bc2 = (ag_real)(1 / sqrt(bc2)),
                        .eps = (ag_real)c->eps, .gs = gs };
}

/* p, m and v of one parameter's n elements, from its gradient g (k by value: no pointer into the
 * loop that the compiler would have to read again after every store) */
static void adam_update(ag_real *p, const ag_real *g, ag_real *m, ag_real *v, size_t n, const adam_coef k)
{
    for (size_t i = 0; i < n; i++) {
        ag_real gi = g[i] * k.gs + k.l2 * p[i];     /* the clipped gradient (+ Adam's L2) */
        ag_real pi = k.keep * p[i];                  /* AdamW's decoupled decay */
        ag_real mi = k.b1 * m[i] + k.a1 * gi;       /* the first moment */
        ag_real vi = k.b2 * v[i] + k.a2 * gi * gi;  /* the second */
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - k.step * mi / (AG_SQRT(vi) * k.inv_sqrt_bc2 + k.eps);
    }
}

/* One step: every parameter (the hidden matrices too, unless Muon's take them), every element. */
static void adam_run(ag_params *P, const ag_adam_cfg *c, double lr, long t, bool decoupled, double scale,
                     bool with_hidden)
{
    ag_real gs = (ag_real)scale;
    adam_coef k[2] = { coef_of(c, lr, t, decoupled, gs, false), coef_of(c, lr, t, decoupled, gs, true) };
    if (with_hidden && P->kernels == AG_KERNELS_FAST && ag__adam_fast(P, k)) return;   /* the fast twin, fast/adam.c */
    for (int e = 0; e < P->n; e++) {
        const ag_param_entry *E = &P->entries[e];
        if (E->hidden && !with_hidden) continue;
        size_t o = E->offset;
        adam_update(P->data + o, P->grad + o, P->m + o, P->v + o, ag_numel(E->t), k[E->decay]);
    }
}

// --- the two optimizers ---

void ag_adamw_step_scaled(ag_params *P, const ag_adam_cfg *c, double lr, long t, double grad_scale)
{
    adam_run(P, c, lr, t, true, grad_scale, true);
}
void ag_adam_step_scaled(ag_params *P, const ag_adam_cfg *c, double lr, long t, double grad_scale)
{
    adam_run(P, c, lr, t, false, grad_scale, true);
}
void ag_adamw_step(ag_params *P, const ag_adam_cfg *c, double lr, long t) { adam_run(P, c, lr, t, true, 1, true); }
void ag_adam_step(ag_params *P, const ag_adam_cfg *c, double lr, long t) { adam_run(P, c, lr, t, false, 1, true); }
void ag_adamw_step_not_hidden(ag_params *P, const ag_adam_cfg *c, double lr, long t, double scale)
{ adam_run(P, c, lr, t, true, scale, false); }
