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
 * then over each one's elements: adam_steps. A big model on several threads takes
 * adam_steps_threaded instead, the same updates shared among the threads (tests/test_optim.c
 * proves the two equal, bit for bit). The loop over the elements has plain, AVX2 and AVX-512
 * targets (loops.h), the same bits on each. Cannot fail. */
#include <math.h>
#include <omp.h>
#include "loops.h"
#include "optim.h"

/* a model this big (elements) is worth waking the other threads for */
#define ADAM_PAR_MIN 16384

/* what one step needs besides the buffers */
typedef struct {
    const ag_adam_cfg *c;
    double lr;
    double bc1, bc2;   /* the bias corrections 1 - b1^t, 1 - b2^t */
    bool decoupled;    /* AdamW's decay, else Adam's L2 */
    ag_real gs;        /* every gradient is taken as gs * g (a clip factor, or 1) */
} adam_step;

/* The coefficients of one parameter's update (decay: it is a decay parameter). In ag_real, in
 * the order PyTorch's AdamW uses (p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g g;
 * p -= (lr/bc1) m / (sqrt(v)/sqrt(bc2) + eps)), so the loop vectorizes and rounds like the
 * reference; g * gs is PyTorch's clip_grad_norm_ g.mul_(coef), in ag_real too. */
static ag__adam_coef adam_coef(const adam_step *a, bool decay)
{
    const ag_adam_cfg *c = a->c;
    double wd = decay ? c->weight_decay : 0;
    return (ag__adam_coef){ .keep = (ag_real)(1 - a->lr * (a->decoupled ? wd : 0)),
                            .l2 = (ag_real)(a->decoupled ? 0 : wd),
                            .b1 = (ag_real)c->beta1, .b2 = (ag_real)c->beta2,
                            .a1 = (ag_real)(1 - c->beta1), .a2 = (ag_real)(1 - c->beta2),
                            .step = (ag_real)(a->lr / a->bc1), .inv_sqrt_bc2 = (ag_real)(1 / sqrt(a->bc2)),
                            .eps = (ag_real)c->eps, .gs = a->gs };
}

/* m, v and p of n elements of one parameter */
static inline __attribute__((always_inline)) void adam_update(ag_real *p, const ag_real *g, ag_real *m, ag_real *v,
                                                              size_t n, const ag__adam_coef *k)
{
    const ag_real keep = k->keep, l2 = k->l2, b1 = k->b1, b2 = k->b2, a1 = k->a1, a2 = k->a2;
    const ag_real step = k->step, inv_sqrt_bc2 = k->inv_sqrt_bc2, eps = k->eps, gs = k->gs;
    for (size_t i = 0; i < n; i++) {
        ag_real gi = g[i] * gs + l2 * p[i];
        ag_real pi = keep * p[i];
        ag_real mi = b1 * m[i] + a1 * gi;
        ag_real vi = b2 * v[i] + a2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step * mi / (AG_SQRT(vi) * inv_sqrt_bc2 + eps);
    }
}

/* the loop in three targets (loops.h): AVX-512's is 2.5x the plain one here */
AG_TARGETS(ag__adam_update, adam_update,
           (ag_real *p, const ag_real *g, ag_real *m, ag_real *v, size_t n, const ag__adam_coef *k),
           (p, g, m, v, n, k))

typedef void (*adam_update_fn)(ag_real *p, const ag_real *g, ag_real *m, ag_real *v, size_t n,
                               const ag__adam_coef *k);

/* One step: every parameter, every element of it. */
static void adam_steps(ag_params *P, const adam_step *a, adam_update_fn update)
{
    for (int e = 0; e < P->n; e++) {
        const ag_param_entry *E = &P->entries[e];
        size_t o = E->offset;
        ag__adam_coef k = adam_coef(a, E->decay);
        update(P->data + o, P->grad + o, P->m + o, P->v + o, ag_numel(E->t), &k);
    }
}

/* The same step shared among the threads: one parallel region for the whole model, each
 * thread taking its share of every parameter, so there is no barrier between parameters (a
 * model has dozens, many of them small). An element's update reads nothing but its own p, g,
 * m and v, so the result is adam_steps', bit for bit. */
static void adam_steps_threaded(ag_params *P, const adam_step *a, adam_update_fn update)
{
#pragma omp parallel
    {
        size_t part = (size_t)omp_get_thread_num(), n_parts = (size_t)omp_get_num_threads();
        for (int e = 0; e < P->n; e++) {
            const ag_param_entry *E = &P->entries[e];
            size_t n = ag_numel(E->t), i0 = n * part / n_parts, i1 = n * (part + 1) / n_parts;
            size_t o = E->offset + i0;
            ag__adam_coef k = adam_coef(a, E->decay);
            update(P->data + o, P->grad + o, P->m + o, P->v + o, i1 - i0, &k);
        }
    }
}

static void adam_run(ag_params *P, const ag_adam_cfg *c, double lr, long t, bool decoupled, double grad_scale)
{
    adam_step a = { c, lr, 1 - pow(c->beta1, (double)t), 1 - pow(c->beta2, (double)t), decoupled,
                    (ag_real)grad_scale };
#ifdef AG_REFERENCE
    adam_update_fn update = ag__adam_update_plain; /* the reference library: plain loops only */
#else
    adam_update_fn update = AG_PICK(ag__adam_update);
#endif
    if (P->total > ADAM_PAR_MIN && omp_get_max_threads() > 1) adam_steps_threaded(P, &a, update);
    else adam_steps(P, &a, update);
}

// --- the two optimizers ---

void ag_adamw_step_scaled(ag_params *P, const ag_adam_cfg *c, double lr, long t, double grad_scale)
{
    adam_run(P, c, lr, t, true, grad_scale);
}
void ag_adam_step_scaled(ag_params *P, const ag_adam_cfg *c, double lr, long t, double grad_scale)
{
    adam_run(P, c, lr, t, false, grad_scale);
}
void ag_adamw_step(ag_params *P, const ag_adam_cfg *c, double lr, long t) { adam_run(P, c, lr, t, true, 1); }
void ag_adam_step(ag_params *P, const ag_adam_cfg *c, double lr, long t) { adam_run(P, c, lr, t, false, 1); }
