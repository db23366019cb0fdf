/* gradcheck.h -- central-difference gradient checks for any op or layer.
 *
 * The checked function is  L(inputs) = sum(out * R)  with R a fixed random tensor, never
 * sum(out): softmax rows always sum to 1, so a sum-loss has zero gradient through softmax and
 * would pass a broken backward. The analytic gradient comes from ag_backward_from(out, R);
 * the numeric one from (L(x+eps) - L(x-eps)) / 2eps per element (a seeded random subset of at
 * most max_elems elements per input when an input is bigger). An element passes when
 * |analytic - numeric| <= atol + rtol * |numeric|.
 *
 * Built twice: in the double build (AG_DOUBLE) the defaults are tight (rtol 1e-6), so a factor
 * of 2, a dropped term or a missing transpose fails; in the float build they are loose. */
#ifndef AG_GRADCHECK_H
#define AG_GRADCHECK_H

#include <stddef.h>
#include "attograd.h"

/* Builds the output from the inputs in ctx. Called many times; must be deterministic. */
typedef ag_tensor *(*gc_build_fn)(ag_ctx *ctx, ag_tensor **inputs, void *user);

typedef struct {
    const char *name;   /* shows in the failure message */
    double eps, atol, rtol;
    int max_elems;      /* per input; 0 = every element */
    uint64_t seed;      /* for R and for the element subset */
} gc_opts;

/* Defaults for this build (float or double). */
gc_opts gc_defaults(const char *name);

/* Returns the number of failing elements (0 = pass). On failure, msg gets the first one:
 * op name, input index, element, analytic and numeric values. -1 if the build itself failed
 * (msg gets the ctx error). inputs must outlive ctx resets (gc_tensor_new or parameters). */
int gc_check(const gc_opts *o, gc_build_fn build, ag_tensor **inputs, int n_inputs, void *user,
             char *msg, size_t msglen);

/* A persistent leaf tensor (malloc'ed, not in any ctx) filled uniformly in [lo, hi) from seed,
 * requires_grad true and with a grad buffer. Free with gc_tensor_free. */
ag_tensor *gc_tensor_new(int ndim, const int *shape, uint64_t seed, double lo, double hi);
void gc_tensor_free(ag_tensor *t);

/* Asserts with check that gc_check passes (a ck_assert_msg naming the first failure). */
#define GC_ASSERT(opts, build, inputs, n, user)                                           \
    do {                                                                                  \
        char gc_msg_[512];                                                                \
        int gc_fail_ = gc_check((opts), (build), (inputs), (n), (user), gc_msg_, sizeof gc_msg_); \
        ck_assert_msg(gc_fail_ == 0, "%s", gc_msg_);                                      \
    } while (0)

#endif
