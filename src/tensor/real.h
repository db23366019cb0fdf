/* real.h -- the scalar type of attograd.
 *
 * ag_real is float by default. Building with -DAG_DOUBLE switches every tensor, kernel and
 * BLAS call to double: the gradient checks run in that build so that central differences are
 * accurate to ~1e-8 and a backward that is off by a factor of 2 or misses a term cannot hide
 * behind float32 rounding. */
#ifndef AG_REAL_H
#define AG_REAL_H

#include <math.h>

/* AG_EXP, AG_TANH, ...: the libm function of ag_real's own precision (expf on floats: calling
 * the double exp on a float is correct but several times slower). */
#ifdef AG_DOUBLE
typedef double ag_real;
#define AG_REAL_NAME "f64"
#define AG_EXP exp
#define AG_LOG log
#define AG_TANH tanh
#define AG_SQRT sqrt
#else
typedef float ag_real;
#define AG_REAL_NAME "f32"
#define AG_EXP expf
#define AG_LOG logf
#define AG_TANH tanhf
#define AG_SQRT sqrtf
#endif

#endif
