/* gradcheck.c -- the central-difference gradient check; gradcheck.h explains what it checks.
 *
 * Order of work: one forward and ag_backward_from(out, R) for the analytic gradients (every
 * input's grad started at a random value and restored afterwards), then two forwards per
 * checked element, grad mode off. Sums are taken in double, whatever ag_real is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../tensor/rng.h"
#include "../tensor/speed.h" /* the kernel tables */
#include "gradcheck.h"

ag_gradcheck_opts ag_gradcheck_defaults(const char *name)
{
#ifdef AG_DOUBLE
    ag_gradcheck_opts o = { name, 1e-6, 1e-8, 1e-6, 64, 1234, NULL };
#else
    ag_gradcheck_opts o = { name, 1e-2, 2e-2, 5e-2, 32, 1234, NULL };
#endif
    return o;
}

/* What one check carries from step to step. */
typedef struct {
    ag_ctx *ctx;
    ag_gradcheck_fn build;
    void *user;
    ag_tensor **in;          /* [n_in] the caller's inputs */
    int n_in;
    const ag_gradcheck_opts *o;
    const char *name;        /* o->name, or "gradcheck" */
    ag_rng rng;              /* R, then the starting grads, then the element sample */
    size_t n_out;
    ag_real *R;              /* [n_out] the upstream gradient: L = sum(out * R) */
    ag_real **analytic;      /* [n_in][numel(in[k])] */
    ag_real **saved_grad;    /* [n_in][numel(in[k])] the caller's grads, put back at the end */
} check;

// --- preconditions: refuse what would crash or mislead, with the reason ---

static ag_status check_args(const check *c, ag_gradcheck_result *results, ag_error *err)
{
    const ag_gradcheck_opts *o = c->o;
    if (!c->build || !c->in || c->n_in <= 0 || !results)
        return ag_seterr(err, AG_ERR_ARG, "ag_gradcheck %s: needs a build function, at least one input and a result per input",
                         c->name);
    if (!(o->eps > 0) || !(o->atol >= 0) || !(o->rtol >= 0) || o->max_elems < 0)
        return ag_seterr(err, AG_ERR_ARG, "ag_gradcheck %s: eps %g must be > 0, atol %g, rtol %g and max_elems %d >= 0",
                         c->name, o->eps, o->atol, o->rtol, o->max_elems);
    for (int k = 0; k < c->n_in; k++) {
        const ag_tensor *t = c->in[k];
        if (!t || !t->data || !t->grad)   /* requires_grad false is fine: see ag_gradcheck in gradcheck.h */
            return ag_seterr(err, AG_ERR_ARG, "ag_gradcheck %s: input %d needs data and a grad buffer "
                             "(make it with ag_tensor_new_owned, or pass a parameter)", c->name, k);
        if (t->in_arena)
            return ag_seterr(err, AG_ERR_ARG, "ag_gradcheck %s: input %d lives in a ctx arena and would be gone after the "
                             "checker's first ag_ctx_reset: make it with ag_tensor_new_owned", c->name, k);
        for (int i = 0; i < k; i++)
            if (c->in[i] == t)
                return ag_seterr(err, AG_ERR_ARG, "ag_gradcheck %s: input %d is input %d again: pass each tensor once",
                                 c->name, k, i);
    }
    return AG_OK;
}

// --- one evaluation of the loss ---

/* *out = build(inputs) in a freshly reset ctx; the build's error when it returns NULL */
static ag_status build_out(check *c, const char *when, ag_tensor **out, ag_error *err)
{
    ag_ctx_reset(c->ctx);
    *out = c->build(c->ctx, c->in, c->user);
    if (*out) return AG_OK;
    ag_status s = ag_ctx_status(c->ctx);
    return ag_seterr(err, s != AG_OK ? s : AG_ERR_ARG, "ag_gradcheck %s: build failed %s: %s", c->name, when,
                     ag_ctx_error(c->ctx) ? ag_ctx_error(c->ctx) : "it returned NULL without an error");
}

/* *L = sum(out * R), accumulated in double */
static ag_status eval_loss(check *c, double *L, ag_error *err)
{
    ag_tensor *out;
    ag_status s = build_out(c, "(during the differences)", &out, err);
    if (s != AG_OK) return s;
    if (ag_numel(out) != c->n_out)
        return ag_seterr(err, AG_ERR_SHAPE, "ag_gradcheck %s: the output changed size from %zu to %zu elements",
                         c->name, c->n_out, ag_numel(out));
    double sum = 0;
    for (size_t i = 0; i < c->n_out; i++) sum += (double)out->data[i] * (double)c->R[i];
    *L = sum;
    return AG_OK;
}

// --- the analytic gradients: one backward from R ---

/* Gradients must accumulate (+=), never overwrite: every input's grad starts at a known random
 * value that is subtracted afterwards, so a backward that writes `=` fails. The caller's own
 * grads are put back. */
static ag_status analytic_pass(check *c, ag_error *err)
{
    ag_tensor *out;
    ag_status s = build_out(c, "(the first forward)", &out, err);
    if (s != AG_OK) return s;
    c->n_out = ag_numel(out);
    c->R = malloc(c->n_out * sizeof(ag_real));
    if (!c->R) return ag_seterr(err, AG_ERR_NOMEM, "ag_gradcheck %s: out of memory", c->name);
    for (size_t i = 0; i < c->n_out; i++) c->R[i] = (ag_real)(2 * ag_rng_uniform(&c->rng) - 1);
    for (int k = 0; k < c->n_in; k++) {
        ag_real *g = c->in[k]->grad, *start = c->analytic[k];
        size_t n = ag_numel(c->in[k]);
        memcpy(c->saved_grad[k], g, n * sizeof(ag_real));
        for (size_t j = 0; j < n; j++) start[j] = g[j] = (ag_real)(ag_rng_uniform(&c->rng) - 0.5);
    }
    s = ag_backward_from(c->ctx, out, c->R);
    for (int k = 0; k < c->n_in; k++) {
        ag_real *g = c->in[k]->grad, *a = c->analytic[k];
        size_t n = ag_numel(c->in[k]);
        for (size_t j = 0; j < n; j++) a[j] = g[j] - a[j];   /* the gradient minus its start */
        memcpy(g, c->saved_grad[k], n * sizeof(ag_real));
    }
    if (s != AG_OK)
        return ag_seterr(err, s, "ag_gradcheck %s: backward failed: %s", c->name, ag_ctx_error(c->ctx));
    return AG_OK;
}

// --- the numeric gradients: a central difference per element ---

/* An element's tolerance, atol + rtol |numeric|: it passes when |analytic - numeric| <= tol */
static double tolerance(const ag_gradcheck_opts *o, double numeric)
{
    return o->atol + o->rtol * fabs(numeric);
}

/* How many tolerances apart the two are: <= 1 passes. Equal values are 0 (even at a zero
 * tolerance); a NaN anywhere is +inf, the worst there is. */
static double tol_ratio(double analytic, double numeric, double tol)
{
    double diff = fabs(analytic - numeric);
    if (diff == 0) return 0;
    double r = diff / tol;
    return isnan(r) ? INFINITY : r;
}

/* What the worst element is chosen by: the ratio, except that an element whose gradients are
 * both exactly 0 ranks below every other (it tests nothing), so it is named only when every
 * element is one. A larger |a - n| - tol would not do: a right gradient of 5 has a larger
 * tolerance, so a larger margin, than a 0-against-0 element. */
static double worst_key(double analytic, double numeric, double ratio)
{
    return analytic == 0 && numeric == 0 ? -1 : ratio;
}

static ag_status numeric_pass(check *c, int k, ag_gradcheck_result *r, ag_error *err)
{
    ag_tensor *x = c->in[k];
    size_t n = ag_numel(x);
    size_t max = (size_t)c->o->max_elems;
    size_t count = max > 0 && n > max ? max : n;
    double worst = -INFINITY;
    *r = (ag_gradcheck_result){ .checked = count };
    for (size_t e = 0; e < count; e++) {
        size_t j = count == n ? e : (size_t)ag_rng_below(&c->rng, n);
        ag_real saved = x->data[j];
        double Lp = 0, Lm = 0;
        x->data[j] = (ag_real)(saved + c->o->eps);
        ag_status s = eval_loss(c, &Lp, err);
        x->data[j] = (ag_real)(saved - c->o->eps);
        if (s == AG_OK) s = eval_loss(c, &Lm, err);
        x->data[j] = saved;
        if (s != AG_OK) return s;
        /* the step that was really taken, after rounding x +- eps to ag_real */
        double h = ((double)(ag_real)(saved + c->o->eps) - (double)(ag_real)(saved - c->o->eps)) / 2;
        double num = (Lp - Lm) / (2 * h), ana = (double)c->analytic[k][j];
        double tol = tolerance(c->o, num), ratio = tol_ratio(ana, num, tol);
        if (!(fabs(ana - num) <= tol)) r->failed++;
        if (worst_key(ana, num, ratio) > worst) {
            worst = worst_key(ana, num, ratio);
            r->worst = j;
            r->analytic = ana;
            r->numeric = num;
            r->tol = tol;
            r->ratio = ratio;
        }
    }
    r->name = x->name;
    return AG_OK;
}

// --- the check ---

static ag_status run(check *c, ag_gradcheck_result *results, ag_error *err)
{
    for (int k = 0; k < c->n_in; k++) {
        size_t n = ag_numel(c->in[k]);
        c->analytic[k] = malloc(n * sizeof(ag_real));
        c->saved_grad[k] = malloc(n * sizeof(ag_real));
        if (!c->analytic[k] || !c->saved_grad[k])
            return ag_seterr(err, AG_ERR_NOMEM, "ag_gradcheck %s: out of memory", c->name);
    }
    ag_ctx_set_grad(c->ctx, true);
    ag_status s = analytic_pass(c, err);
    if (s != AG_OK) return s;
    ag_ctx_set_grad(c->ctx, false);                /* nothing recorded while differencing */
    for (int k = 0; k < c->n_in && s == AG_OK; k++) s = numeric_pass(c, k, &results[k], err);
    return s;
}

/* opts->kernels, when it names a table, on the check's ctx */
static ag_status use_table(ag_ctx *ctx, const ag_gradcheck_opts *o, ag_error *err)
{
    ag_kernels_id table;
    if (!o->kernels) return AG_OK;
    if (ag_kernels_parse(o->kernels, "ag_gradcheck: kernels ", &table, err) != AG_OK) return AG_ERR_ARG;
    ag_ctx_set_kernels(ctx, table);
    return AG_OK;
}

ag_status ag_gradcheck(ag_ctx *ctx, ag_gradcheck_fn build, void *user, ag_tensor *const *inputs,
                       int n_inputs, const ag_gradcheck_opts *opts, ag_gradcheck_result *results,
                       ag_error *err)
{
    ag_gradcheck_opts defaults = ag_gradcheck_defaults(NULL);
    const ag_gradcheck_opts *o = opts ? opts : &defaults;
    check c = { .build = build, .user = user, .in = (ag_tensor **)inputs, .n_in = n_inputs, .o = o,
                .name = o->name ? o->name : "gradcheck" };
    ag_status s = check_args(&c, results, err);
    if (s != AG_OK) return s;
    c.ctx = ctx ? ctx : ag_ctx_new();
    c.analytic = calloc((size_t)n_inputs, sizeof *c.analytic);
    c.saved_grad = calloc((size_t)n_inputs, sizeof *c.saved_grad);
    if (!c.ctx || !c.analytic || !c.saved_grad) {
        s = ag_seterr(err, AG_ERR_NOMEM, "ag_gradcheck %s: out of memory", c.name);
    } else if ((s = use_table(c.ctx, o, err)) == AG_OK) {
        bool grad_was = ag_ctx_grad_enabled(c.ctx);
        ag_rng_seed(&c.rng, o->seed);
        s = run(&c, results, err);
        ag_ctx_reset(c.ctx);
        ag_ctx_set_grad(c.ctx, grad_was);
    }
    for (int k = 0; c.analytic && k < n_inputs; k++) free(c.analytic[k]);
    for (int k = 0; c.saved_grad && k < n_inputs; k++) free(c.saved_grad[k]);
    free(c.analytic);
    free(c.saved_grad);
    free(c.R);
    if (!ctx) ag_ctx_free(c.ctx);
    return s;
}

// --- reading the results ---

size_t ag_gradcheck_failed(const ag_gradcheck_result *results, int n)
{
    size_t failed = 0;
    for (int k = 0; results && k < n; k++) failed += results[k].failed;
    return failed;
}

/* How far the worst element is from its tolerance, in relative terms where the numeric
 * gradient is not 0: "relative error 1.68 > tolerance 1.01e-06 (1.7e+06 times over)" */
static void describe_error(char *buf, size_t len, const ag_gradcheck_result *r)
{
    double diff = fabs(r->analytic - r->numeric), n = fabs(r->numeric);
    const char *cmp = r->failed ? ">" : "<=";
    if (r->analytic == 0 && r->numeric == 0)
        snprintf(buf, len, "both exactly 0, as is every element checked");
    else if (n > 0 && isfinite(n))
        snprintf(buf, len, "relative error %.3g %s tolerance %.3g (%.2g %s)", diff / n, cmp, r->tol / n, r->ratio,
                 r->failed ? "times over" : "of it");
    else
        snprintf(buf, len, "error %.3g %s tolerance %.3g, the numeric gradient being %g (%.2g %s)", diff, cmp, r->tol,
                 r->numeric, r->ratio, r->failed ? "times over" : "of it");
}

/* "input 3 (fc1.weight) element 17: analytic 0.1 numeric 0.1, relative error ..." */
static void describe(char *buf, size_t len, int k, const ag_gradcheck_result *r)
{
    char name[160] = "", error[160];
    if (r->name) snprintf(name, sizeof name, " (%s)", r->name);
    describe_error(error, sizeof error, r);
    snprintf(buf, len, "input %d%s element %zu: analytic %.10g numeric %.10g, %s", k, name, r->worst, r->analytic,
             r->numeric, error);
}

char *ag_gradcheck_message(const ag_gradcheck_opts *opts, const ag_gradcheck_result *results, int n,
                           char *buf, size_t len)
{
    if (len == 0) return buf;
    const char *name = opts && opts->name ? opts->name : "gradcheck";
    size_t checked = 0, failed = ag_gradcheck_failed(results, n);
    int worst = 0;                       /* the input of the worst element over all inputs */
    for (int k = 0; results && k < n; k++) {
        const ag_gradcheck_result *r = &results[k], *w = &results[worst];
        checked += r->checked;
        if (worst_key(r->analytic, r->numeric, r->ratio) > worst_key(w->analytic, w->numeric, w->ratio)) worst = k;
    }
    char what[448] = "no inputs";
    if (results && n > 0) describe(what, sizeof what, worst, &results[worst]);
    char build[32]; /* "f64", or "reference, f64" when the options name the table */
    snprintf(build, sizeof build, "%s%s%s", opts && opts->kernels ? opts->kernels : "",
             opts && opts->kernels ? ", " : "", AG_REAL_NAME);
    if (failed)
        snprintf(buf, len, "%s (%s): FAIL %s; %zu of %zu elements fail", name, build, what, failed, checked);
    else
        snprintf(buf, len, "%s (%s): ok, %d input%s, %zu elements, worst %s", name, build, n, n == 1 ? "" : "s",
                 checked, what);
    return buf;
}

// --- inputs ---

ag_tensor *ag_gradcheck_input(const char *name, int ndim, const int *shape, ag_rng *rng, double lo, double hi)
{
    ag_tensor *t = ag_tensor_new_owned(ndim, shape);
    if (!t) return NULL;
    t->name = name;
    for (size_t i = 0, n = ag_numel(t); i < n; i++) t->data[i] = (ag_real)(lo + (hi - lo) * ag_rng_uniform(rng));
    return t;
}
