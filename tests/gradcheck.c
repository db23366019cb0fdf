/* gradcheck.c -- see gradcheck.h: the tests' wrappers around ag_gradcheck. */
#include <stdio.h>
#include <stdlib.h>
#include "gradcheck.h"

gc_opts gc_defaults(const char *name) { return ag_gradcheck_defaults(name); }

/* gc_check's, on one table (o->kernels) */
static int check_on(const gc_opts *o, gc_build_fn build, ag_tensor **in, int n_in, void *user, char *msg,
                    size_t msglen)
{
    ag_gradcheck_result *r = calloc(n_in > 0 ? (size_t)n_in : 1, sizeof *r);
    ag_error err = { 0 };
    if (!r) {
        snprintf(msg, msglen, "%s: out of memory", o->name);
        return -1;
    }
    int fails = -1;
    if (ag_gradcheck(NULL, build, user, in, n_in, o, r, &err) != AG_OK) {
        snprintf(msg, msglen, "%s", err.msg);
    } else {
        size_t failed = ag_gradcheck_failed(r, n_in);
        fails = failed > (size_t)1 << 30 ? 1 << 30 : (int)failed;
        ag_gradcheck_message(o, r, n_in, msg, msglen);
    }
    free(r);
    return fails;
}

/* The reference table first: a wrong reference backward fails by its own name, and a fast twin
 * is then blamed only when the reference it must equal is right. */
int gc_check(const gc_opts *o, gc_build_fn build, ag_tensor **in, int n_in, void *user, char *msg, size_t msglen)
{
    static const char *const tables[2] = { "reference", "fast" };
    if (o->kernels) return check_on(o, build, in, n_in, user, msg, msglen);  /* one table asked for */
    int fails = 0;
    for (int t = 0; t < 2 && fails == 0; t++) {
        gc_opts on = *o;
        on.kernels = tables[t];
        fails = check_on(&on, build, in, n_in, user, msg, msglen);
    }
    return fails;
}

ag_tensor *gc_tensor_new(int ndim, const int *shape, uint64_t seed, double lo, double hi)
{
    ag_rng r;
    ag_rng_seed(&r, seed);
    return ag_gradcheck_input(NULL, ndim, shape, &r, lo, hi);
}

void gc_tensor_free(ag_tensor *t) { ag_tensor_free_owned(t); }

void gc_randomize_params(ag_params *P, uint64_t seed)
{
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (int e = 0; e < P->n; e++) {
        ag_tensor *t = P->entries[e].t;
        double base = P->entries[e].init == AG_INIT_ONES ? 1 : 0;
        double half = P->entries[e].init == AG_INIT_ONES ? 0.3 : 0.5;
        for (size_t i = 0; i < ag_numel(t); i++) t->data[i] = (ag_real)(base + half * (2 * ag_rng_uniform(&r) - 1));
    }
}
