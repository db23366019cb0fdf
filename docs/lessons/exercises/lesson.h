/* lesson.h -- what every lesson's exercise shares: one ag_gradcheck call that prints its
 * verdict, a matrix printer, and freeing the inputs. The inputs themselves come from the
 * installed library: ag_gradcheck_input (<attograd/check/gradcheck.h>) makes a leaf that
 * survives ag_ctx_reset, filled with seeded values.
 *
 * Built only against the installed double library (see README.md in this directory):
 *   cc -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra 01-qkv.c $(pkg-config --cflags --libs attograd-f64)
 * (-D_DEFAULT_SOURCE: -std=c11 alone hides M_PI and the other POSIX names of <math.h>.)
 * Every exercise exits 0 when every gradient agrees, 1 when one does not, 2 when a check could
 * not run. */
#ifndef LESSON_H
#define LESSON_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <attograd/attograd.h>

#ifndef AG_DOUBLE
#error "build against the double library: pkg-config --cflags --libs attograd-f64"
#endif

/* Checks d sum(build(in) * R) / d in[k] for every k (double defaults: rtol 1e-6) and prints one
 * line per input (its worst element, and how many of its tolerances apart the two gradients
 * are there: above 1 fails) and the verdict. 0 pass, 1 fail, 2 the check could not run. */
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
        printf("  %-4s %3zu checked, %zu fail; worst element %3zu: analytic %+.10f numeric %+.10f, %.2g x tol\n",
               in[k]->name ? in[k]->name : "?", r[k].checked, r[k].failed, r[k].worst, r[k].analytic,
               r[k].numeric, r[k].ratio);
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

/* The seed of an exercise whose figures depend on the random draw: argv[1] when given (a whole
 * number), else def, so `./02-scale 7` shows another draw. 0 ok; 2 after a one-line error. */
static inline int lesson_seed(int argc, char **argv, uint64_t def, uint64_t *seed)
{
    *seed = def;
    if (argc < 2) return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(argv[1], &end, 10);
    if (argc > 2 || end == argv[1] || *end || argv[1][0] == '-' || errno == ERANGE) {
        fprintf(stderr, "usage: %s [SEED]: SEED a whole number from 0 to 2^64 - 1 (got '%s'%s)\n", argv[0], argv[1],
                argc > 2 ? " and more" : "");
        return 2;
    }
    *seed = v;
    return 0;
}

/* Frees n inputs (NULL ok) and returns rc, for `return lesson_done(in, n, rc)`. */
static inline int lesson_done(ag_tensor **in, int n, int rc)
{
    for (int k = 0; k < n; k++) ag_tensor_free_owned(in[k]);
    return rc;
}

#endif
