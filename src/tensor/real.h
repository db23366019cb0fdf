/* real.h -- the scalar type of attograd.
 *
 * ag_real is float by default. Building with -DAG_DOUBLE switches every tensor, kernel and
 * BLAS call to double: the gradient checks run in that build so that central differences are
 * accurate to ~1e-8 and a backward that is off by a factor of 2 or misses a term cannot hide
 * behind float32 rounding. */
#ifndef AG_REAL_H
#define AG_REAL_H

#include <cblas.h>

#ifdef AG_DOUBLE
typedef double ag_real;
#define AG_GEMM cblas_dgemm
#define AG_REAL_NAME "f64"
#else
typedef float ag_real;
#define AG_GEMM cblas_sgemm
#define AG_REAL_NAME "f32"
#endif

#endif
