/* schedule.c -- the learning rate at iteration it (0-based), MODEL.md:
 *
 *   it < warmup:            lr * (it+1) / (warmup+1)           linear warmup
 *   it > lr_decay_iters:    min_lr
 *   otherwise:              r = (it - warmup) / (lr_decay_iters - warmup)
 *                           min_lr + 0.5 (1 + cos(pi r)) (lr - min_lr)     cosine decay
 *                           min_lr + (1 - r) (lr - min_lr)                 or linear decay
 *
 * The linear decay to min_lr 0 was reported to beat the cosine on long runs (Bergsma et al. 2025,
 * "Straight to zero"); char_lm's --lr-schedule linear measured it (docs/performance.md).
 * A pure function of the iteration, so a resumed run gets the same rate. Cannot fail. */
#include <math.h>
#include "optim.h"

AG_SWITCH_DEFINE(ag_lr_shape_switch, "lr_schedule", AG_LR_SHAPES);

double ag_lr_at(const ag_lr_schedule *s, long it)
{
    if (it < s->warmup_iters) return s->lr * (double)(it + 1) / (double)(s->warmup_iters + 1);
    if (it > s->lr_decay_iters) return s->min_lr;
    long span = s->lr_decay_iters - s->warmup_iters;
    double r = span > 0 ? (double)(it - s->warmup_iters) / (double)span : 0; /* span 0: it == warmup */
    double fall = s->shape == AG_LR_LINEAR ? 1 - r : 0.5 * (1 + cos(M_PI * r));   /* 1 -> 0 */
    return s->min_lr + fall * (s->lr - s->min_lr);
}
