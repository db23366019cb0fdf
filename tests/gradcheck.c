/* gradcheck.c -- see gradcheck.h. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gradcheck.h"

gc_opts gc_defaults(const char *name)
{
#ifdef AG_DOUBLE
    gc_opts o = { name, 1e-6, 1e-8, 1e-6, 64, 1234 };
#else
    gc_opts o = { name, 1e-2, 2e-2, 5e-2, 32, 1234 };
#endif
    return o;
}

ag_tensor *gc_tensor_new(int ndim, const int *shape, uint64_t seed, double lo, double hi)
{
    ag_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    ag_tensor_set_shape(t, ndim, shape);
    size_t n = ag_numel(t);
    t->data = malloc(n * sizeof(ag_real));
    t->grad = calloc(n, sizeof(ag_real));
    if (!t->data || !t->grad) {
        gc_tensor_free(t);
        return NULL;
    }
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) t->data[i] = (ag_real)(lo + (hi - lo) * ag_rng_uniform(&r));
    t->requires_grad = true;
    return t;
}

void gc_tensor_free(ag_tensor *t)
{
    if (!t) return;
    free(t->data);
    free(t->grad);
    free(t);
}

/* L = sum(out * R), accumulated in double */
static int eval_loss(ag_ctx *ctx, gc_build_fn build, ag_tensor **in, void *user, const ag_real *R,
                     size_t n_out, double *L)
{
    ag_ctx_reset(ctx);
    ag_tensor *out = build(ctx, in, user);
    if (!out || ag_numel(out) != n_out) return -1;
    double s = 0;
    for (size_t i = 0; i < n_out; i++) s += (double)out->data[i] * (double)R[i];
    *L = s;
    return 0;
}

int gc_check(const gc_opts *o, gc_build_fn build, ag_tensor **in, int n_in, void *user,
             char *msg, size_t msglen)
{
    int fails = 0;
    msg[0] = '\0';
    /* the harness's own preconditions: an input without a grad buffer would be compared with
     * whatever memory its grad pointer holds */
    ck_assert_msg(n_in > 0 && in != NULL, "%s: gradcheck needs at least one input", o->name);
    for (int k = 0; k < n_in; k++)
        ck_assert_msg(in[k] && in[k]->grad && in[k]->requires_grad,
                      "%s: gradcheck input %d needs requires_grad and a grad buffer (gc_tensor_new or a parameter)",
                      o->name, k);
    ag_ctx *ctx = ag_ctx_new();
    if (!ctx) {
        snprintf(msg, msglen, "%s: no memory for a ctx", o->name);
        return -1;
    }
    /* analytic gradient: backward from out with upstream R */
    ag_tensor *out = build(ctx, in, user);
    if (!out) {
        snprintf(msg, msglen, "%s: build failed: %s", o->name, ag_ctx_error(ctx) ? ag_ctx_error(ctx) : "?");
        ag_ctx_free(ctx);
        return -1;
    }
    size_t n_out = ag_numel(out);
    ag_real *R = malloc(n_out * sizeof(ag_real));
    ag_real **analytic = calloc((size_t)n_in, sizeof *analytic);
    if (!R || !analytic) { fails = -1; snprintf(msg, msglen, "%s: out of memory", o->name); goto done; }
    ag_rng rng;
    ag_rng_seed(&rng, o->seed);
    for (size_t i = 0; i < n_out; i++) R[i] = (ag_real)(2 * ag_rng_uniform(&rng) - 1);
    /* Gradients must accumulate (+=), never overwrite: start every input's grad at a known
     * random value and subtract it afterwards, so a backward that writes `=` fails. */
    ag_real **before = calloc((size_t)n_in, sizeof *before);
    if (!before) { fails = -1; goto done; }
    for (int k = 0; k < n_in; k++) {
        size_t n = ag_numel(in[k]);
        before[k] = malloc(n * sizeof(ag_real));
        if (!before[k]) { fails = -1; goto done_before; }
        for (size_t j = 0; j < n; j++) before[k][j] = in[k]->grad[j] = (ag_real)(ag_rng_uniform(&rng) - 0.5);
    }
    if (ag_backward_from(ctx, out, R) != AG_OK) {
        snprintf(msg, msglen, "%s: backward failed: %s", o->name, ag_ctx_error(ctx));
        fails = -1;
        goto done_before;
    }
    for (int k = 0; k < n_in; k++) {
        size_t n = ag_numel(in[k]);
        analytic[k] = malloc(n * sizeof(ag_real));
        if (!analytic[k]) { fails = -1; goto done_before; }
        for (size_t j = 0; j < n; j++) analytic[k][j] = in[k]->grad[j] - before[k][j];
    }
done_before:
    for (int k = 0; k < n_in; k++) free(before[k]);
    free(before);
    if (fails) goto done;
    /* numeric gradient, with grad mode off (nothing recorded) */
    ag_ctx_set_grad(ctx, false);
    for (int k = 0; k < n_in; k++) {
        size_t n = ag_numel(in[k]);
        size_t count = (o->max_elems > 0 && n > (size_t)o->max_elems) ? (size_t)o->max_elems : n;
        for (size_t c = 0; c < count; c++) {
            size_t j = count == n ? c : (size_t)ag_rng_below(&rng, n);
            ag_real saved = in[k]->data[j];
            double Lp, Lm;
            in[k]->data[j] = (ag_real)(saved + o->eps);
            int e1 = eval_loss(ctx, build, in, user, R, n_out, &Lp);
            in[k]->data[j] = (ag_real)(saved - o->eps);
            int e2 = eval_loss(ctx, build, in, user, R, n_out, &Lm);
            in[k]->data[j] = saved;
            double h = ((double)(ag_real)(saved + o->eps) - (double)(ag_real)(saved - o->eps)) / 2;
            if (e1 || e2) {
                snprintf(msg, msglen, "%s: build failed during differences", o->name);
                fails = -1;
                goto done;
            }
            double num = (Lp - Lm) / (2 * h);
            double ana = (double)analytic[k][j];
            if (!(fabs(ana - num) <= o->atol + o->rtol * fabs(num))) {
                if (fails == 0)
                    snprintf(msg, msglen, "%s (%s): input %d element %zu: analytic %.10g numeric %.10g",
                             o->name, AG_REAL_NAME, k, j, ana, num);
                fails++;
            }
        }
    }
done:
    if (analytic)
        for (int k = 0; k < n_in; k++) free(analytic[k]);
    free(analytic);
    free(R);
    ag_ctx_free(ctx);
    return fails;
}
