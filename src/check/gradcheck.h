/* gradcheck.h -- a central-difference gradient check for any op or layer, yours included.
 * src/check/ owns the proof that a backward is right; the tests and your own ops use it.
 *
 * You give a function that builds an output from input tensors; ag_gradcheck compares the
 * gradient your backwards compute with one measured by finite differences:
 *
 *   loss        L(inputs) = sum(out * R), R a fixed random tensor (from opts.seed).
 *               Never sum(out): softmax rows always sum to 1, so a sum-loss has zero gradient
 *               through a softmax and a broken softmax backward would pass. R weights every
 *               output element differently, so every path to the inputs counts.
 *   analytic    ag_backward_from(out, R), after starting every input's grad at a random value
 *               (subtracted afterwards): a backward that writes `=` instead of `+=` fails.
 *   numeric     (L(x + eps) - L(x - eps)) / 2eps, one element at a time, with grad mode off
 *               (every element, or a seeded random sample of max_elems per bigger input).
 *   pass        |analytic - numeric| <= atol + rtol * |numeric| for every element checked.
 *   worst       per input, the element with the least margin: the largest
 *               |analytic - numeric| / (atol + rtol |numeric|). Not the largest difference
 *               minus the tolerance: that would call a 0-against-0 element (no test at all)
 *               worse than a right gradient of 5, whose tolerance is larger.
 *
 * Precision: central differences in float are only good to a few percent, so a dropped term
 * or a factor of 2 in a small part of a gradient can hide. Check in the double build
 * (-DAG_DOUBLE: the libattograd_f64 library, `pkg-config attograd-f64`), where the defaults
 * are rtol 1e-6 and such mistakes fail at once.
 *
 * Inputs must survive ag_ctx_reset: the checker resets its ctx before every evaluation. Make
 * them with ag_gradcheck_input (below: seeded values) or ag_tensor_new_owned (tensor.h), or
 * pass parameters (ag_params). A tensor made in a ctx (ag_tensor_new, ag_tensor_leaf, an op
 * output) is refused with AG_ERR_ARG.
 *
 * Example (a whole program: examples/out_of_tree/custom_op.c):
 *
 *   static ag_tensor *build(ag_ctx *ctx, ag_tensor **in, void *user)
 *   {
 *       (void)user;
 *       return my_op(ctx, in[0], in[1]);                         // [2,3]
 *   }
 *   ...
 *   int shape[2] = { 2, 3 };
 *   ag_rng rng;
 *   ag_rng_seed(&rng, 1);                       // values away from kinks: pick lo, hi for your op
 *   ag_tensor *in[2] = { ag_gradcheck_input("a", 2, shape, &rng, -1, 1),
 *                        ag_gradcheck_input("b", 2, shape, &rng, -1, 1) };
 *   ag_gradcheck_opts o = ag_gradcheck_defaults("my_op");
 *   ag_gradcheck_result r[2];
 *   ag_error err = { 0 };
 *   char line[AG_GRADCHECK_MSG];
 *   if (ag_gradcheck(NULL, build, NULL, in, 2, &o, r, &err) != AG_OK)
 *       fprintf(stderr, "error: %s\n", err.msg);                // the check could not run
 *   else if (ag_gradcheck_failed(r, 2))
 *       fprintf(stderr, "%s\n", ag_gradcheck_message(&o, r, 2, line, sizeof line));
 */
#ifndef AG_GRADCHECK_H
#define AG_GRADCHECK_H

#include <stddef.h>
#include <stdint.h>
#include "../tensor/rng.h"
#include "../tensor/tensor.h"

/* Builds the output from the inputs in ctx. Called once per side of every difference, so it
 * must be deterministic (a dropout takes a fixed seed). NULL on error (the ctx says why). */
typedef ag_tensor *(*ag_gradcheck_fn)(ag_ctx *ctx, ag_tensor **inputs, void *user);

typedef struct {
    const char *name;   /* shows in the message ("rmsnorm"); NULL ok */
    double eps;         /* the central-difference step */
    double atol, rtol;  /* an element passes when |analytic - numeric| <= atol + rtol |numeric| */
    int max_elems;      /* elements checked per input; 0 = every element */
    uint64_t seed;      /* R, the starting gradients and the element sample */
    const char *kernels; /* "reference" or "fast": the kernel table to check (speed.h), set on
                          * the check's ctx and named in the message ("softmax (reference, f64):
                          * FAIL ..."); NULL (the default): the ctx's table, unnamed */
} ag_gradcheck_opts;

/* The defaults of this build: in double (AG_DOUBLE) eps 1e-6, atol 1e-8, rtol 1e-6; in float
 * eps 1e-2, atol 2e-2, rtol 5e-2. max_elems 64 (double) / 32 (float), seed 1234. Cannot fail. */
ag_gradcheck_opts ag_gradcheck_defaults(const char *name);

/* What the check found for one input. */
typedef struct {
    size_t checked;     /* elements compared (a sample repeats an element now and then) */
    size_t failed;      /* of those, outside the tolerance: 0 = this input's gradient agrees */
    size_t worst;       /* flat index of the worst element: the one with the least margin, the
                         * largest ratio below; a NaN is the worst. An element whose gradients
                         * are both exactly 0 is the worst only when every element is. */
    double analytic;    /* the gradients at `worst` */
    double numeric;
    double tol;         /* its tolerance, atol + rtol |numeric| */
    double ratio;       /* |analytic - numeric| / tol: <= 1 passes, 1e6 fails by a million times
                         * (0 when both are 0; +inf for a NaN, or any error at a zero tol) */
    const char *name;   /* the input's name (a parameter's: "fc1.weight"), or NULL */
} ag_gradcheck_result;

/* Checks d sum(build(inputs) * R) / d inputs[k] for every k.
 *   ctx      where build runs; it is reset before every evaluation (so nothing the caller made
 *            in it survives) and its settings apply (reference kernels, anomaly detection).
 *            NULL: a private ctx, made and freed here.
 *   inputs   [n_inputs] leaves with a grad buffer, outside any ctx (ag_tensor_new_owned,
 *            parameters). One with requires_grad false (a frozen parameter, such as attention's
 *            keys' bias: src/nn/attention.c) gets no gradient from the backward, so its analytic
 *            gradient is 0 and the check proves that its numeric one is 0 too: that freezing it
 *            loses nothing.
 *   results  [n_inputs], filled on AG_OK.
 * Returns AG_OK when the check ran, whatever it found: read results (ag_gradcheck_failed,
 * ag_gradcheck_message). Otherwise the check itself failed and err says why: AG_ERR_ARG (no
 * inputs, an input in an arena or without a grad buffer, a bad option), the build's or the
 * backward's own error (build returned NULL; the output changed size between evaluations),
 * AG_ERR_NOMEM. The inputs' data and grads are left as they were found. */
ag_status ag_gradcheck(ag_ctx *ctx, ag_gradcheck_fn build, void *user, ag_tensor *const *inputs,
                       int n_inputs, const ag_gradcheck_opts *opts, ag_gradcheck_result *results,
                       ag_error *err);

/* Failing elements over all n results: 0 = the backward agrees with the differences. */
size_t ag_gradcheck_failed(const ag_gradcheck_result *results, int n);

/* One line, no newline, into buf (always NUL-terminated); returns buf. It names the worst
 * element over all inputs (the largest ratio) and says how far it is from its tolerance, as a
 * relative error |a - n| / |n| against the relative tolerance rtol + atol / |n| (an absolute
 * error against atol where the numeric gradient is 0). On failure (examples/out_of_tree with
 * exp(x) for exp(-x) in its backward):
 *   "softplus(x) (f64): FAIL input 0 (x) element 4: analytic -0.8121210747 numeric -0.164066465,
 *    relative error 3.95 > tolerance 1.06e-06 (3.7e+06 times over); 12 of 12 elements fail"
 * and otherwise:
 *   "softplus(x) (f64): ok, 1 input, 12 elements, worst input 0 (x) element 4: analytic
 *    -0.1640664651 numeric -0.164066465, relative error 4.13e-10 <= tolerance 1.06e-06 (0.00039 of it)"
 * (each one line). "(x)" is the input's name, when it has one. */
#define AG_GRADCHECK_MSG 512
char *ag_gradcheck_message(const ag_gradcheck_opts *opts, const ag_gradcheck_result *results, int n,
                           char *buf, size_t len);

/* An input for ag_gradcheck: a leaf outside any ctx (ag_tensor_new_owned, so it survives the
 * checker's ag_ctx_reset) named name (NULL ok; shows in the messages), its elements drawn
 * uniformly in [lo, hi) from rng, in order. NULL on a bad shape or OOM. Free it with
 * ag_tensor_free_owned. */
ag_tensor *ag_gradcheck_input(const char *name, int ndim, const int *shape, ag_rng *rng, double lo, double hi);

#endif
