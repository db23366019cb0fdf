/* lesson.h -- what every lesson's exercise shares: inputs that survive ag_ctx_reset, filled
 * with seeded values, and one ag_gradcheck call that prints its verdict.
 *
 * Built only against the installed double library (see README.md in this directory):
 *   cc -std=c11 -Wall -Wextra 01-qkv.c $(pkg-config --cflags --libs attograd-f64)
 * Every exercise exits 0 when every gradient agrees, 1 when one does not, 2 when a check could
 * not run. */
#ifndef LESSON_H
#define LESSON_H

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <attograd/attograd.h>

#ifndef AG_DOUBLE
#error "build against the double library: pkg-config --cflags --libs attograd-f64"
#endif

/* A leaf outside any ctx (ag_gradcheck resets its ctx before every evaluation), named for the
 * messages, filled uniformly in [lo, hi) from rng. NULL on OOM. Free with ag_tensor_free_owned. */
static inline ag_tensor *lesson_input(const char *name, int ndim, const int *shape, ag_rng *rng, double lo,
                                      double hi)
{
    ag_tensor *t = ag_tensor_new_owned(ndim, shape);
    if (!t) return NULL;
    t->name = name;
    for (size_t i = 0; i < ag_numel(t); i++) t->data[i] = lo + (hi - lo) * ag_rng_uniform(rng);
    return t;
}

/* Checks d sum(build(in) * R) / d in[k] for every k (double defaults: rtol 1e-6) and prints one
 * line per input and the verdict. 0 pass, 1 fail, 2 the check could not run. */
static inline int lesson_check(const char *name, ag_gradcheck_fn build, void *user, ag_tensor **in, int n)
{
    enum { MAX_IN = 16 };
    ag_gradcheck_opts opts = ag_gradcheck_defaults(name);
    ag_gradcheck_result r[MAX_IN];
    ag_error err = { 0 };
    if (n > MAX_IN || ag_gradcheck(NULL, build, user, in, n, &opts, r, &err) != AG_OK) {
        fprintf(stderr, "%s: the check could not run: %s\n", name, n > MAX_IN ? "too many inputs" : err.msg);
        return 2;
    }
    for (int k = 0; k < n; k++)
        printf("  %-4s %3zu checked, %zu fail; worst element %3zu: analytic %+.10f numeric %+.10f\n",
               in[k]->name ? in[k]->name : "?", r[k].checked, r[k].failed, r[k].worst, r[k].analytic,
               r[k].numeric);
    char line[AG_GRADCHECK_MSG];
    puts(ag_gradcheck_message(&opts, r, n, line, sizeof line));
    return ag_gradcheck_failed(r, n) ? 1 : 0;
}

/* A [rows, cols] block of numbers, one row a line, after a title. */
static inline void lesson_print(const char *title, const ag_real *m, int rows, int cols)
{
    printf("%s\n", title);
    for (int r = 0; r < rows; r++) {
        printf("  ");
        for (int c = 0; c < cols; c++) printf(" %8.4f", (double)m[r * cols + c]);
        printf("\n");
    }
}

/* Frees n inputs (NULL ok) and returns rc, for `return lesson_done(in, n, rc)`. */
static inline int lesson_done(ag_tensor **in, int n, int rc)
{
    for (int k = 0; k < n; k++) ag_tensor_free_owned(in[k]);
    return rc;
}

#endif
