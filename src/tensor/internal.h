/* internal.h -- helpers shared by the op files; not installed, not part of the API. */
#ifndef AG_INTERNAL_H
#define AG_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "ops.h"

/* "[2,3,8]" for error messages: `char b[AG_SHAPE_BUF]; ag_shape_str(t, b, sizeof b)` */
#define AG_SHAPE_BUF 48

/* The start of every op: a NULL input or an earlier error makes the op a no-op that returns
 * NULL, so a forward pass reads straight through and is checked once at the end. */
static inline bool ag__skip(ag_ctx *ctx, const ag_tensor *a, const ag_tensor *b)
{
    return ag_ctx_status(ctx) != AG_OK || !a || !b;
}

/* The end of every op: y unless an error happened on the way (OOM while recording). */
static inline ag_tensor *ag__done(ag_ctx *ctx, ag_tensor *y)
{
    return ag_ctx_status(ctx) == AG_OK ? y : NULL;
}

/* exp for the kernels (softmax, cross-entropy, attention, GELU).
 * Double build: libm's exp. Float build: a branch-free polynomial that the compiler vectorizes
 * (libm's expf is a call per element): x = n ln2 + r with |r| <= ln2/2, e^r by Cephes' degree-6
 * polynomial, 2^n built in the exponent bits (in two halves, so n = 128 does not overflow).
 * Max relative error 8e-8 over [-87.3, 88.7] (expf's own: 6e-8); exp(x) = +inf above
 * 88.72, 0 below -87.33 (the smallest normal float; no subnormals), NaN stays NaN. */
#ifdef AG_DOUBLE
static inline double ag__exp(double x) { return exp(x); }
#else
static inline float ag__exp(float x)
{
    const float hi = 88.72283905f, lo = -87.33654475f;
    float xc = x > hi ? hi : x;                        /* clamp (NaN passes through) */
    xc = xc < lo ? lo : xc;
    float t = xc * 1.44269504088896341f + 12582912.0f;  /* round(x / ln2) in t's low bits */
    int32_t ti;
    memcpy(&ti, &t, sizeof ti);
    float n = t - 12582912.0f;
    int32_t ni = ti - 0x4B400000;                       /* the same n as an integer */
    float r = xc - n * 0.693359375f - n * -2.12194440e-4f; /* x - n ln2, ln2 split in two */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;                           /* e^r */
    int32_t n1 = ni / 2, n2 = ni - n1;
    uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
    float s1, s2;                                       /* 2^n1 * 2^n2 = 2^n */
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    float y = p * s1 * s2;
    y = x > hi ? INFINITY : y;
    return x < lo ? 0.0f : y;
}
#endif

#endif
