/* gradcheck.h -- the tests' face of the library's gradient check (src/check/gradcheck.h, where
 * the loss sum(out * R), the tolerances and the per-build defaults are explained).
 *
 * What is left here is for check: GC_ASSERT fails the running test with the check's one-line
 * message ("rmsnorm (reference, f64): FAIL input 0 element 26: analytic ... numeric ..., relative error
 * 3.51 > tolerance 1.29e-06 (2.7e+06 times over); 48 of 56 elements fail"), and gc_tensor_new
 * fills a persistent input with seeded uniform values. */
#ifndef AG_TESTS_GRADCHECK_H
#define AG_TESTS_GRADCHECK_H

#include <stddef.h>
#include "attograd.h"

typedef ag_gradcheck_fn gc_build_fn;
typedef ag_gradcheck_opts gc_opts;

/* The defaults of this build (float or double): ag_gradcheck_defaults. */
gc_opts gc_defaults(const char *name);

/* Runs ag_gradcheck in a private ctx on both kernel tables, reference then fast (o->kernels
 * NULL), or on the one o->kernels names. Returns the number of failing elements of the first
 * table that fails (0 = pass on both); then msg gets the check's one-line message, which names
 * the table ("softmax (reference, f64): FAIL ..."). -1 when the check could not run (a bad
 * input, the build failed, OOM): msg gets the reason. */
int gc_check(const gc_opts *o, gc_build_fn build, ag_tensor **inputs, int n_inputs, void *user,
             char *msg, size_t msglen);

/* A persistent leaf filled uniformly in [lo, hi) from seed: ag_gradcheck_input with its own
 * generator and no name. NULL on OOM. Free with gc_tensor_free (= ag_tensor_free_owned). */
ag_tensor *gc_tensor_new(int ndim, const int *shape, uint64_t seed, double lo, double hi);
void gc_tensor_free(ag_tensor *t);

/* Every parameter of P uniform in [-0.5, 0.5) and the norm weights (AG_INIT_ONES) in 1 +- 0.3,
 * from seed: far from the tiny init, so attention is not uniform and every path carries
 * gradient (the layers' and the model's gradient checks start here). */
void gc_randomize_params(ag_params *P, uint64_t seed);

/* Asserts with check that gc_check passes (a ck_assert_msg with its message). */
#define GC_ASSERT(opts, build, inputs, n, user)                                           \
    do {                                                                                  \
        char gc_msg_[AG_GRADCHECK_MSG];                                                   \
        int gc_fail_ = gc_check((opts), (build), (inputs), (n), (user), gc_msg_, sizeof gc_msg_); \
        ck_assert_msg(gc_fail_ == 0, "%s", gc_msg_);                                      \
    } while (0)

#endif
