/* dynamics.c -- how one optimizer step moves the weights, per group of parameters (see
 * train.h): the gradient norm of each group before the step, and the norm of its update
 * relative to its weights after it. The update is whatever the optimizer did (AdamW's decay
 * included), so it is measured, not predicted: the weights are copied before the update
 * (ag_dynamics_watch) and compared after it (ag_dynamics_measure). Moved out of char_lm's
 * dynamics.c (issue 31); which parameters form a group (char_lm: a layer's attention, its
 * MLP) is the program's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "train.h"

struct ag_dynamics {
    int *group;                /* [P->n] the group of each parameter, -1: none */
    int n_groups;
    ag_real *before;           /* [P->total] the weights before the watched step's update */
    double *gsq, *wsq, *dsq;   /* [n_groups] sum of dW^2, of W^2 (before), of (W_after - W_before)^2 */
};

ag_dynamics *ag_dynamics_new(const ag_params *P, const int *group, int n_groups, ag_error *err)
{
    ag_dynamics *d = calloc(1, sizeof *d);
    if (d) {
        d->group = malloc((size_t)P->n * sizeof *d->group);
        d->before = malloc(P->total * sizeof *d->before);
        d->gsq = calloc((size_t)n_groups * 3 + 1, sizeof *d->gsq);
    }
    if (!d || !d->group || !d->before || !d->gsq) {
        ag_dynamics_free(d);
        ag_seterr(err, AG_ERR_NOMEM, "dynamics: out of memory");
        return NULL;
    }
    memcpy(d->group, group, (size_t)P->n * sizeof *d->group);
    d->n_groups = n_groups;
    d->wsq = d->gsq + n_groups;
    d->dsq = d->wsq + n_groups;
    return d;
}

void ag_dynamics_watch(ag_dynamics *d, const ag_params *P)
{
    memset(d->gsq, 0, (size_t)d->n_groups * 3 * sizeof *d->gsq);
    for (int e = 0; e < P->n; e++) {
        if (d->group[e] < 0) continue;
        const ag_real *g = P->entries[e].t->grad;   // the group's dW, before any clip
        size_t n = ag_numel(P->entries[e].t);
        double sum = 0;
        for (size_t i = 0; i < n; i++) sum += (double)g[i] * (double)g[i];
        d->gsq[d->group[e]] += sum;
    }
    memcpy(d->before, P->data, P->total * sizeof *d->before);
}

void ag_dynamics_measure(ag_dynamics *d, const ag_params *P, double *grad_norm, double *update)
{
    for (int e = 0; e < P->n; e++) {
        if (d->group[e] < 0) continue;
        const ag_real *w0 = d->before + P->entries[e].offset, *w1 = P->data + P->entries[e].offset;
        size_t n = ag_numel(P->entries[e].t);
        double wsq = 0, dsq = 0;
        for (size_t i = 0; i < n; i++) {
            double w = (double)w0[i], dw = (double)w1[i] - w;
            wsq += w * w;
            dsq += dw * dw;
        }
        d->wsq[d->group[e]] += wsq;
        d->dsq[d->group[e]] += dsq;
    }
    for (int k = 0; k < d->n_groups; k++) {
        grad_norm[k] = sqrt(d->gsq[k]);
        update[k] = d->wsq[k] > 0 ? sqrt(d->dsq[k] / d->wsq[k]) : NAN;
    }
}

void ag_dynamics_free(ag_dynamics *d)
{
    if (!d) return;
    free(d->group);
    free(d->before);
    free(d->gsq);
    free(d);
}
