/* fast/adam.h -- the one call from adam.c into its fast twin (fast/adam.c). Private to the
 * library, not installed. */
#ifndef AG_OPTIM_FAST_ADAM_H
#define AG_OPTIM_FAST_ADAM_H

#include <stdbool.h>
#include "../adam_coef.h"

/* A model past this many elements takes the fast twin: worth waking the other threads for. */
#define AG_ADAM_FAST_MIN 16384

/* adam.c's step with its coefficients k[decay] (adam_coef.h), when the fast twin takes it: every thread a share of
 * every parameter, the element loop in the widest target the CPU runs (fast/loops.h), the same
 * bits as adam.c's loop. false (nothing done) for a model of AG_ADAM_FAST_MIN elements or fewer,
 * and always in a REFERENCE=1 build, which has no fast twin. */
#ifdef AG_REFERENCE
static inline bool ag__adam_fast(ag_params *P, const adam_coef k[2])
{
    (void)P, (void)k;
    return false;
}
#else
bool ag__adam_fast(ag_params *P, const adam_coef k[2]);
#endif

#endif
