/* params.c -- registration, flat allocation, init and lookup of a model's parameters. */
#include <stdlib.h>
#include <string.h>
#include "params.h"
#include "../tensor/alloc.h"
#include "../tensor/rng.h"

ag_params *ag_params_new(void) { return calloc(1, sizeof(ag_params)); }

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
    free(P);
}

ag_tensor *ag_params_add(ag_params *P, const char *name, int ndim, const int *shape,
                         ag_init_kind init, double init_std, bool decay)
{
    if (P->data || ndim < 1 || ndim > AG_MAX_DIMS || ag_params_find(P, name)) return NULL;
    for (int i = 0; i < ndim; i++)
        if (shape[i] <= 0) return NULL;
    if (P->n == P->cap) {
        int cap = P->cap ? 2 * P->cap : 32;
        ag_param_entry *e = realloc(P->entries, (size_t)cap * sizeof *e);
        if (!e) return NULL;
        P->entries = e;
        P->cap = cap;
    }
    ag_tensor *t = calloc(1, sizeof *t);
    char *nm = strdup(name);
    if (!t || !nm) {
        free(t);
        free(nm);
        return NULL;
    }
    ag_tensor_set_shape(t, ndim, shape);
    t->requires_grad = true;
    t->name = nm;
    ag_param_entry *e = &P->entries[P->n++];
    e->t = t;
    e->offset = P->total;
    e->init = init;
    e->init_std = init_std;
    e->decay = decay;
    P->total += ag_numel(t);
    return t;
}

ag_status ag_params_alloc(ag_params *P)
{
    size_t bytes = (P->total ? P->total : 1) * sizeof(ag_real);
    P->data = ag__alloc_big(bytes, true);
    P->grad = ag__alloc_big(bytes, true);
    P->m = ag__alloc_big(bytes, true);
    P->v = ag__alloc_big(bytes, true);
    if (!P->data || !P->grad || !P->m || !P->v) {
        free(P->data); free(P->grad); free(P->m); free(P->v);
        P->data = P->grad = P->m = P->v = NULL;
        return AG_ERR_NOMEM;
    }
    for (int i = 0; i < P->n; i++) {
        P->entries[i].t->data = P->data + P->entries[i].offset;
        P->entries[i].t->grad = P->grad + P->entries[i].offset;
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

void ag_params_zero_grad(ag_params *P)
{
    if (P->grad) memset(P->grad, 0, P->total * sizeof(ag_real));
}

ag_tensor *ag_params_find(const ag_params *P, const char *name)
{
    for (int i = 0; i < P->n; i++)
        if (strcmp(P->entries[i].t->name, name) == 0) return P->entries[i].t;
    return NULL;
}
