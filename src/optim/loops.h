/* loops.h -- the optimizer's loop over every weight that has three targets (AG_TARGETS in
 * tensor/fast/fast.h): Adam(W)'s update (adam.c). Private to the library and its tests, not
 * installed.
 *
 * It has no sum across elements, and no target fuses a multiply-add, so the three give the
 * same bits; tests/test_fast_targets.c compares them. */
#ifndef AG_OPTIM_LOOPS_H
#define AG_OPTIM_LOOPS_H

#include <stddef.h>
#include "../tensor/fast/fast.h"

/* The coefficients of one parameter's Adam update at one step, in ag_real (adam.c says how they
 * come from the config, the learning rate, the step count and the clip factor). The update
 * reads nothing but an element's own p, g, m and v. */
typedef struct {
    ag_real keep;           /* p *= keep: 1 - lr wd for AdamW's decay, else 1 */
    ag_real l2;             /* g += l2 p: Adam's wd (L2), else 0 */
    ag_real b1, b2, a1, a2; /* beta1, beta2, 1 - beta1, 1 - beta2 */
    ag_real step;           /* lr / (1 - beta1^t) */
    ag_real inv_sqrt_bc2;   /* 1 / sqrt(1 - beta2^t) */
    ag_real eps;
    ag_real gs;             /* every gradient is taken as gs g (a clip factor, or 1) */
} ag__adam_coef;

/* p, m, v [n] updated from g [n] */
AG_TARGETS_DECL(ag__adam_update, (ag_real *p, const ag_real *g, ag_real *m, ag_real *v, size_t n,
                                  const ag__adam_coef *k));

#endif
