/* fastref.h -- proves an op's fast kernels (src/tensor/fast/<op>.c) equal to its reference
 * kernels (src/tensor/ops/<op>.c).
 *
 * fr_check runs the same build function twice on the same random inputs: once in a ctx that
 * asks for the reference kernels (ag_ctx_set_reference_kernels) and once in a default ctx, then
 * compares the outputs and, after a backward from the same random upstream gradient, every
 * input's gradient. Each case runs in two modes, so both ways a backward meets a gradient are
 * covered: "accumulate" (the inputs are leaves whose gradients already hold random values: the
 * backward must add) and "fresh" (each input first goes through ag_scale(x, 1), so the op's
 * backward is the first to touch the gradient: the fast kernels then write instead of adding).
 * An element agrees when |fast - ref| <= atol + rtol (|ref| + max |ref| of its tensor): FR_RTOL
 * and FR_ATOL below, loose enough for float sums of terms that cancel, taken in another order,
 * tight in the double build (a dropped term or a wrong factor is off by the terms' own size).
 * In a REFERENCE=1 build both runs take the reference kernels and the check is trivially true. */
#ifndef AG_FASTREF_H
#define AG_FASTREF_H

#include <stdint.h>
#include "attograd.h"

#ifdef AG_DOUBLE
#define FR_RTOL 1e-12
#define FR_ATOL 1e-13
#else
#define FR_RTOL 2e-5
#define FR_ATOL 2e-6
#endif

typedef ag_tensor *(*fr_build_fn)(ag_ctx *ctx, ag_tensor **inputs, void *user);

typedef struct {
    int ndim;
    int shape[AG_MAX_DIMS];
    double lo, hi;      /* inputs uniform in [lo, hi) */
    bool no_grad;       /* an input that takes no gradient (a mask) */
} fr_input;

/* Returns 0 when fast and reference agree on the output and every gradient, in both modes;
 * otherwise the number of disagreeing elements, and msg names the first (what, mode, tensor,
 * element, both values). -1 when a build failed (msg gets the ctx error). */
int fr_check(const char *what, fr_build_fn build, const fr_input *inputs, int n_inputs, void *user,
             uint64_t seed, char *msg, size_t msglen);

/* The elements of fast and ref (n each) that disagree, by the rule above (NaN agrees with NaN,
 * an infinity with itself); msg describes the first, naming what, mode and tensor. */
int fr_compare(const char *what, const char *mode, const char *tensor, const ag_real *fast, const ag_real *ref,
               size_t n, char *msg, size_t msglen);

/* A random int in [lo, hi] from *state (for picking shapes). */
int fr_rand_int(uint64_t *state, int lo, int hi);

#define FR_ASSERT(what, build, inputs, n, user, seed)                                      \
    do {                                                                                   \
        char fr_msg_[512];                                                                 \
        int fr_bad_ = fr_check((what), (build), (inputs), (n), (user), (seed), fr_msg_, sizeof fr_msg_); \
        ck_assert_msg(fr_bad_ == 0, "%s", fr_msg_);                                        \
    } while (0)

#endif
