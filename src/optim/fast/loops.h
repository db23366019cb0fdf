/* fast/loops.h -- the optimizer's loop over every weight that has three targets (AG_TARGETS in
 * tensor/fast/fast.h): Adam(W)'s update (fast/adam.c, the fast twin of adam.c's loop). Private to
 * the library and its tests, not installed.
 *
 * It has no sum across elements, and no target fuses a multiply-add, so the three give the
 * same bits; tests/test_fast_targets.c compares them. */
#ifndef AG_OPTIM_LOOPS_H
#define AG_OPTIM_LOOPS_H

#include <stddef.h>
#include "../../tensor/fast/fast.h"
#include "../adam_coef.h"

/* p, m, v [n] updated from g [n] */
AG_TARGETS_DECL(ag__adam_update, (ag_real *p, const ag_real *g, ag_real *m, ag_real *v, size_t n,
                                  const adam_coef *k));

#endif
