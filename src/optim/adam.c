/* adam.c -- Adam and AdamW (Kingma & Ba 2015; Loshchilov & Hutter 2019), as MODEL.md defines
 * them, with t the step count from 1:
 *
 *   AdamW:  p -= lr*wd*p                       (decoupled decay, on decay params only)
 *           m = b1 m + (1-b1) g;   v = b2 v + (1-b2) g^2
 *           p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 *   Adam:   the same without the first line; on decay params g += wd*p (L2) before the moments.
 *
 * The bias corrections 1/(1-b^t) undo the moments' start at zero. Each parameter's decay
 * flag comes from its registration (2-D weights only), so
 * the loop runs over the entries and then over each entry's elements. Cannot fail. */
#include <math.h>
#include <omp.h>
#include "../tensor/kernel.h"
#include "optim.h"

// --- the shared update ---

/* m, v and p of n elements, for one parameter, on this thread; decoupled selects AdamW's decay,
 * l2 Adam's, gs scales the gradient (a clip factor, or 1). In ag_real, in the order PyTorch's
 * AdamW uses (p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g g;
 * p -= (lr/bc1) m / (sqrt(v)/sqrt(bc2) + eps)), so the loop vectorizes and rounds like the
 * reference; g * gs is PyTorch's clip_grad_norm_ g.mul_(coef), in ag_real too. */
static void adam_update(ag_real *p, const ag_real *g, ag_real *m, ag_real *v, size_t n, const ag_adam_cfg *c,
                        double lr, double bc1, double bc2, double decoupled, double l2, ag_real gs)
{
    const ag_real keep = (ag_real)(1 - lr * decoupled), wd2 = (ag_real)l2;
    const ag_real b1 = (ag_real)c->beta1, b2 = (ag_real)c->beta2, a1 = (ag_real)(1 - c->beta1),
                  a2 = (ag_real)(1 - c->beta2);
    const ag_real step = (ag_real)(lr / bc1), inv_sqrt_bc2 = (ag_real)(1 / sqrt(bc2)), eps = (ag_real)c->eps;
    for (size_t i = 0; i < n; i++) {
        ag_real gi = g[i] * gs + wd2 * p[i];
        ag_real pi = keep * p[i];
        ag_real mi = b1 * m[i] + a1 * gi;
        ag_real vi = b2 * v[i] + a2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step * mi / (AG_SQRT(vi) * inv_sqrt_bc2 + eps);
    }
}

/* One parallel region for the whole model: each thread takes its share of every parameter, so
 * there is no barrier between parameters (a model has dozens, many of them small). */
static void adam_steps(ag_params *P, const ag_adam_cfg *c, double lr, long t, bool decoupled, double grad_scale)
{
    double bc1 = 1 - pow(c->beta1, (double)t), bc2 = 1 - pow(c->beta2, (double)t);
    ag_real gs = (ag_real)grad_scale;
#pragma omp parallel if (P->total > 16384)
    {
        int part = omp_get_thread_num(), n_parts = omp_get_num_threads();
        for (int e = 0; e < P->n; e++) {
            const ag_param_entry *E = &P->entries[e];
            double wd = E->decay ? c->weight_decay : 0;
            size_t n = ag_numel(E->t);
            size_t i0, i1;
            ag__share(n, part, n_parts, &i0, &i1);
            size_t o = E->offset + i0;
            adam_update(P->data + o, P->grad + o, P->m + o, P->v + o, i1 - i0, c, lr, bc1, bc2,
                        decoupled ? wd : 0, decoupled ? 0 : wd, gs);
        }
    }
}

// --- the two optimizers ---

void ag_adamw_step_scaled(ag_params *P, const ag_adam_cfg *c, double lr, long t, double grad_scale)
{
    adam_steps(P, c, lr, t, true, grad_scale);
}
void ag_adam_step_scaled(ag_params *P, const ag_adam_cfg *c, double lr, long t, double grad_scale)
{
    adam_steps(P, c, lr, t, false, grad_scale);
}
void ag_adamw_step(ag_params *P, const ag_adam_cfg *c, double lr, long t) { adam_steps(P, c, lr, t, true, 1); }
void ag_adam_step(ag_params *P, const ag_adam_cfg *c, double lr, long t) { adam_steps(P, c, lr, t, false, 1); }
