/* adam_coef.h -- the coefficients of one parameter's Adam update at one step: what adam.c's
 * coef_of computes from the config, the learning rate, the step count and the clip factor, and
 * what its loop and its fast twin (fast/adam.c) read. Private to the library, not installed. */
#ifndef AG_OPTIM_ADAM_COEF_H
#define AG_OPTIM_ADAM_COEF_H

#include "optim.h"

typedef struct {
    ag_real keep;               /* p *= keep: 1 - lr wd for AdamW's decay, else 1 */
    ag_real l2;                 /* g += l2 p: Adam's wd (L2), else 0 */
    ag_real b1, b2, a1, a2;     /* beta1, beta2, 1 - beta1, 1 - beta2 */
    ag_real step;               /* lr / (1 - beta1^t): the first bias correction folded in */
    ag_real inv_sqrt_bc2;       /* 1 / sqrt(1 - beta2^t): the second */
    ag_real eps;
    ag_real gs;                 /* every gradient is taken as gs g (a clip factor, or 1) */
} adam_coef;

#endif
