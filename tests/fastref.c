/* fastref.c -- see fastref.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "fastref.h"

int fr_rand_int(uint64_t *state, int lo, int hi)
{
    ag_rng r;
    ag_rng_seed(&r, (*state)++);
    return lo + (int)ag_rng_below(&r, (uint64_t)(hi - lo + 1));
}

typedef struct {
    ag_ctx *ctx;
    ag_tensor *leaf[AG_MAX_INPUTS];
    ag_tensor *y;
} fr_run;

/* Builds the inputs (same seed: same values on both sides), runs the op and its backward. */
static int run_side(fr_run *run, bool reference, bool fresh, fr_build_fn build, const fr_input *inputs, int n,
                    void *user, uint64_t seed, char *msg, size_t msglen)
{
    ag_ctx *ctx = run->ctx = ag_ctx_new();
    if (!ctx) return snprintf(msg, msglen, "out of memory"), -1;
    ag_ctx_set_reference_kernels(ctx, reference);
    ag_tensor *in[AG_MAX_INPUTS] = { 0 };
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        const fr_input *d = &inputs[i];
        ag_tensor *t = d->no_grad ? ag_tensor_new(ctx, d->ndim, d->shape) : ag_tensor_leaf(ctx, d->ndim, d->shape);
        if (!t) break;
        for (size_t e = 0; e < ag_numel(t); e++) t->data[e] = (ag_real)(d->lo + (d->hi - d->lo) * ag_rng_uniform(&r));
        if (t->grad) /* accumulate mode: the backward must add to what is there */
            for (size_t e = 0; e < ag_numel(t); e++) t->grad[e] = fresh ? 0 : (ag_real)ag_rng_normal(&r);
        run->leaf[i] = t;
        in[i] = fresh && !d->no_grad ? ag_scale(ctx, t, 1) : t;
    }
    run->y = ag_ctx_status(ctx) == AG_OK ? build(ctx, in, user) : NULL;
    if (!run->y) return snprintf(msg, msglen, "build failed: %s", ag_ctx_error(ctx) ? ag_ctx_error(ctx) : "?"), -1;
    if (!run->y->requires_grad) return 0; /* nothing to differentiate (every input no_grad) */
    size_t ny = ag_numel(run->y);
    ag_real *dy = ag_ctx_alloc(ctx, ny * sizeof *dy);
    if (!dy) return snprintf(msg, msglen, "out of memory"), -1;
    for (size_t e = 0; e < ny; e++) dy[e] = (ag_real)ag_rng_normal(&r);
    if (ag_backward_from(ctx, run->y, dy) != AG_OK)
        return snprintf(msg, msglen, "backward failed: %s", ag_ctx_error(ctx)), -1;
    return 0;
}

/* The tolerance scales with the largest |ref| of the tensor: a gradient is a sum of terms of
 * both signs, and where they cancel, float rounding in another summation order leaves an error
 * of the size of the terms, not of the (small) result. */
int fr_compare(const char *what, const char *mode, const char *tensor, const ag_real *fast, const ag_real *ref,
               size_t n, char *msg, size_t msglen)
{
    double scale = 0;
    for (size_t e = 0; e < n; e++)
        if (isfinite(ref[e]) && fabs(ref[e]) > scale) scale = fabs(ref[e]);
    int bad = 0;
    for (size_t e = 0; e < n; e++) {
        double f = fast[e], r = ref[e];
        /* an infinite reference is met only by itself (its |r| would make any tolerance infinite) */
        bool same = (isnan(f) && isnan(r)) || f == r ||
                    (isfinite(r) && fabs(f - r) <= FR_ATOL + FR_RTOL * (fabs(r) + scale));
        if (!same && bad++ == 0)
            snprintf(msg, msglen,
                     "%s (%s): the fast kernel differs from the reference: %s[%zu]: fast %.9g, reference %.9g "
                     "(largest |reference| %.3g)", what, mode, tensor, e, f, r, scale);
    }
    return bad;
}

static int check_mode(const char *what, bool fresh, fr_build_fn build, const fr_input *inputs, int n, void *user,
                      uint64_t seed, char *msg, size_t msglen)
{
    fr_run ref = { 0 }, fast = { 0 };
    const char *mode = fresh ? "fresh gradients" : "accumulating";
    int bad = run_side(&ref, true, fresh, build, inputs, n, user, seed, msg, msglen);
    if (bad == 0) bad = run_side(&fast, false, fresh, build, inputs, n, user, seed, msg, msglen);
    if (bad == 0 && !ag_same_shape(ref.y, fast.y)) bad = -1, snprintf(msg, msglen, "%s: output shapes differ", what);
    if (bad == 0) bad = fr_compare(what, mode, "output", fast.y->data, ref.y->data, ag_numel(ref.y), msg, msglen);
    for (int i = 0; bad == 0 && i < n; i++) {
        if (inputs[i].no_grad) continue;
        char name[32];
        snprintf(name, sizeof name, "d(input %d)", i);
        const ag_tensor *a = fast.leaf[i], *b = ref.leaf[i];
        if (!a->grad || !b->grad) {
            if (a->grad != b->grad) bad = -1, snprintf(msg, msglen, "%s: %s exists on one side only", what, name);
            continue;
        }
        bad = fr_compare(what, mode, name, a->grad, b->grad, ag_numel(a), msg, msglen);
    }
    ag_ctx_free(ref.ctx);
    ag_ctx_free(fast.ctx);
    return bad;
}

int fr_check(const char *what, fr_build_fn build, const fr_input *inputs, int n_inputs, void *user,
             uint64_t seed, char *msg, size_t msglen)
{
    msg[0] = '\0';
    int bad = check_mode(what, false, build, inputs, n_inputs, user, seed, msg, msglen);
    if (bad == 0) bad = check_mode(what, true, build, inputs, n_inputs, user, seed, msg, msglen);
    return bad;
}
