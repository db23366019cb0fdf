/* blas.h -- the BLAS matrix product for ag_real; private to the library (not installed), so a
 * program that includes attograd.h does not get cblas.h and its names with it. */
#ifndef AG_BLAS_H
#define AG_BLAS_H

#include <cblas.h>
#include "real.h"

#ifdef AG_DOUBLE
#define AG_GEMM cblas_dgemm
#else
#define AG_GEMM cblas_sgemm
#endif

#endif
