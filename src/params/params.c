/* params.c -- registration, flat allocation, init and lookup of a model's parameters. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "params.h"
#include "../tensor/rng.h"
#include "../tensor/speed.h" /* ag_alloc_big: the flat buffers on huge pages; AG_KERNELS */

ag_params *ag_params_new(void)
{
    ag_kernels_id kernels;
    ag_error err = { 0 };
    if (ag_kernels_from_env(&kernels, &err) != AG_OK) return NULL; /* AG_KERNELS names no table */
    ag_params *P = calloc(1, sizeof(ag_params));                    /* err: AG_OK, "" */
    if (P) P->kernels = kernels;
    return P;
}

void ag_params_free(ag_params *P)
{
    if (!P) return;
    for (int i = 0; i < P->n; i++) {
        free((char *)P->entries[i].t->name);
        free(P->entries[i].t);
    }
    free(P->entries);
    free(P->data);
    free(P->grad);
    free(P->m);
    free(P->v);
    free(P->work);
    free(P);
}

// --- registration ---

/* "[2,0]" for a message. */
static void shape_text(char *buf, size_t n, int ndim, const int *shape)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ",%d" : "%d", shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* Why name cannot be registered (AG_ERR_ARG, recorded), or AG_OK. */
static ag_status check_new(ag_params *P, const char *name, int ndim, const int *shape)
{
    if (!name) return ag_params_fail(P, AG_ERR_ARG, "ag_params_add: no name");
    if (P->data) return ag_params_fail(P, AG_ERR_ARG, "%s: registered after ag_params_alloc", name);
    if (ag_params_find(P, name)) return ag_params_fail(P, AG_ERR_ARG, "%s: registered twice", name);
    if (ndim < 1 || ndim > AG_MAX_DIMS || !shape)
        return ag_params_fail(P, AG_ERR_ARG, "%s: %d dims (1..%d allowed)", name, ndim, AG_MAX_DIMS);
    size_t numel = 1;
    bool positive = true;
    for (int i = 0; i < ndim; i++) {
        positive = positive && shape[i] > 0;
        if (positive) numel = numel > SIZE_MAX / (size_t)shape[i] ? SIZE_MAX : numel * (size_t)shape[i];
    }
    char sb[64];
    shape_text(sb, sizeof sb, ndim, shape);
    if (!positive) return ag_params_fail(P, AG_ERR_ARG, "%s: bad shape %s (every dim must be > 0)", name, sb);
    /* strides are ints (ag_tensor) */
    if (numel > INT_MAX)
        return ag_params_fail(P, AG_ERR_ARG, "%s: shape %s has more than %d elements", name, sb, INT_MAX);
    /* four buffers of total elements must stay addressable */
    if (numel > SIZE_MAX / 4 / sizeof(ag_real) - P->total)
        return ag_params_fail(P, AG_ERR_NOMEM, "%s: too many parameters to hold in memory", name);
    return AG_OK;
}

/* Makes room for one more entry; AG_ERR_NOMEM (recorded) when it cannot. */
static ag_status grow(ag_params *P, const char *name)
{
    if (P->n < P->cap) return AG_OK;
    int cap = P->cap ? 2 * P->cap : 32;
    ag_param_entry *e = realloc(P->entries, (size_t)cap * sizeof *e);
    if (!e) return ag_params_fail(P, AG_ERR_NOMEM, "%s: out of memory", name);
    P->entries = e;
    P->cap = cap;
    return AG_OK;
}

/* ag_params_add with a status: AG_ERR_ARG or AG_ERR_NOMEM, the reason recorded in P. */
static ag_status add(ag_tensor **out, ag_params *P, const char *name, int ndim, const int *shape,
                     ag_init_kind init, double init_std, bool decay)
{
    *out = NULL;
    ag_status s = check_new(P, name, ndim, shape);
    if (s == AG_OK) s = grow(P, name);
    if (s != AG_OK) return s;
    ag_tensor *t = calloc(1, sizeof *t);
    char *nm = strdup(name);
    if (!t || !nm) {
        free(t);
        free(nm);
        return ag_params_fail(P, AG_ERR_NOMEM, "%s: out of memory", name);
    }
    ag_tensor_set_shape(t, ndim, shape);
    t->requires_grad = true;
    t->name = nm;
    P->entries[P->n++] = (ag_param_entry){ .t = t, .offset = P->total, .init = init, .init_std = init_std,
                                           .decay = decay, .hidden = false };   /* a Linear marks its weight */
    P->total += ag_numel(t);
    *out = t;
    return AG_OK;
}

ag_tensor *ag_params_add(ag_params *P, const char *name, int ndim, const int *shape,
                         ag_init_kind init, double init_std, bool decay)
{
    ag_tensor *t = NULL;
    if (P) add(&t, P, name, ndim, shape, init, init_std, decay);
    return t;
}

/* the entry of the parameter with this name, or NULL */
static ag_param_entry *entry_named(const ag_params *P, const char *name)
{
    for (int i = 0; i < P->n; i++)
        if (strcmp(P->entries[i].t->name, name) == 0) return &P->entries[i];
    return NULL;
}

ag_status ag_params_set_decay(ag_params *P, const char *name, bool decay)
{
    ag_param_entry *e = entry_named(P, name);
    if (!e) return ag_params_fail(P, AG_ERR_ARG, "%s: no such parameter (its weight decay cannot be set)", name);
    e->decay = decay;
    return AG_OK;
}

ag_status ag_params_set_hidden(ag_params *P, const char *name, bool hidden)
{
    ag_param_entry *e = entry_named(P, name);
    if (!e) return ag_params_fail(P, AG_ERR_ARG, "%s: no such parameter (it cannot be marked hidden)", name);
    if (e->t->ndim != 2) return ag_params_fail(P, AG_ERR_ARG, "%s: %d-D, only a matrix can be hidden", name, e->t->ndim);
    e->hidden = hidden;
    return AG_OK;
}

ag_status ag_params_name(ag_params *P, char *name, size_t size, const char *prefix, const char *suffix)
{
    int n = snprintf(name, size, "%s.%s", prefix, suffix);
    if (n < 0 || (size_t)n >= size)
        return ag_params_fail(P, AG_ERR_ARG, "%s.%s: name longer than %zu characters", prefix, suffix, size - 1);
    return AG_OK;
}

ag_status ag_params_register(ag_tensor **t, ag_params *P, const char *prefix, const char *suffix, int ndim,
                             const int *shape, ag_init_kind init, double init_std, bool decay)
{
    char name[128];
    *t = NULL;
    ag_status s = ag_params_name(P, name, sizeof name, prefix, suffix);
    return s != AG_OK ? s : add(t, P, name, ndim, shape, init, init_std, decay);
}

ag_status ag_params_alloc(ag_params *P)
{
    if (!P) return AG_ERR_ARG;
    if (P->data) return ag_params_fail(P, AG_ERR_ARG, "ag_params_alloc: already allocated");
    size_t bytes = (P->total ? P->total : 1) * sizeof(ag_real);   /* check_new keeps 4 * bytes in size_t */
    P->data = ag_alloc_big(bytes, true);
    P->grad = ag_alloc_big(bytes, true);
    P->m = ag_alloc_big(bytes, true);
    P->v = ag_alloc_big(bytes, true);
    if (!P->data || !P->grad || !P->m || !P->v) {
        free(P->data); free(P->grad); free(P->m); free(P->v);
        P->data = P->grad = P->m = P->v = NULL;
        return ag_params_fail(P, AG_ERR_NOMEM, "ag_params_alloc: out of memory for 4 buffers of %zu parameters",
                              P->total);
    }
    for (int i = 0; i < P->n; i++) {
        P->entries[i].t->data = P->data + P->entries[i].offset;
        P->entries[i].t->grad = P->grad + P->entries[i].offset;
    }
    return AG_OK;
}

ag_status ag_params_alloc_grads(ag_params *P, const ag_params *weights)
{
    if (!P || !weights) return AG_ERR_ARG;
    if (P->data || P->grad) return ag_params_fail(P, AG_ERR_ARG, "ag_params_alloc_grads: already allocated");
    if (P->n != weights->n || P->total != weights->total)
        return ag_params_fail(P, AG_ERR_ARG, "ag_params_alloc_grads: %d parameters of %zu elements, the weights' "
                              "store has %d of %zu", P->n, P->total, weights->n, weights->total);
    P->grad = ag_alloc_big((P->total ? P->total : 1) * sizeof(ag_real), true);
    if (!P->grad)
        return ag_params_fail(P, AG_ERR_NOMEM, "ag_params_alloc_grads: out of memory for %zu gradients", P->total);
    for (int i = 0; i < P->n; i++) {   /* the same registrations, so the same offsets */
        const ag_tensor *w = weights->entries[i].t;
        P->entries[i].t->data = w->data;
        P->entries[i].t->grad = P->grad + P->entries[i].offset;
        P->entries[i].t->requires_grad = w->requires_grad;
    }
    return AG_OK;
}

void ag_params_init(ag_params *P, uint64_t seed)
{
    ag_rng rng;
    ag_rng_seed(&rng, seed);
    for (int i = 0; i < P->n; i++) {
        ag_param_entry *e = &P->entries[i];
        size_t n = ag_numel(e->t);
        for (size_t j = 0; j < n; j++) {
            switch (e->init) {
            case AG_INIT_ZEROS: e->t->data[j] = 0; break;
            case AG_INIT_ONES: e->t->data[j] = 1; break;
            case AG_INIT_NORMAL: e->t->data[j] = (ag_real)(e->init_std * ag_rng_normal(&rng)); break;
            }
        }
    }
}

/* every gradient = 0, split over the threads: one core alone clearing megabytes made the other
 * wait (baby: 3.3 MB a step) */
void ag_params_zero_grad(ag_params *P)
{
    ag_real *g = P->grad;
    size_t n = g ? P->total : 0;
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (size_t i = 0; i < n; i++) g[i] = 0;
}

ag_tensor *ag_params_find(const ag_params *P, const char *name)
{
    const ag_param_entry *e = entry_named(P, name);
    return e ? e->t : NULL;
}

const ag_tensor *ag_params_nonfinite(const ag_params *P, size_t *i)
{
    for (int e = 0; e < P->n; e++) {
        const ag_tensor *t = P->entries[e].t;
        for (*i = 0; *i < ag_numel(t); (*i)++)
            if (!isfinite(t->data[*i])) return t;
    }
    return NULL;
}

// --- errors ---

const char *ag_params_error(const ag_params *P) { return P && P->err.status != AG_OK ? P->err.msg : NULL; }

ag_status ag_params_fail(ag_params *P, ag_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ag_vseterr(P ? &P->err : NULL, s, fmt, ap);
    va_end(ap);
    return s;
}
