/* dynamics.c -- how one optimizer step moves the weights, per group of parameters (see
 * train.h): the gradient norm of each group before the step, and the norm of its update
 * relative to its weights after it. The update is whatever the optimizer did (AdamW's decay
 * included), so it is measured, not predicted: the weights are copied before the update
 * (ag_dynamics_watch) and compared after it (ag_dynamics_measure).
 *
 * Then --log-dynamics's file for a model built of ag_block's (ag_dynamics_log): each layer's
 * attention weights and its MLP weights as two groups, a row of DIR/dynamics.csv at each step a
 * program logs, and DIR/dynamics.png drawn from it (ag_plot_dynamics). Every program on the
 * trainer has it (char_lm, reverse); when a step is logged stays the program's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "train.h"
#include "train_impl.h"

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

// --- a run's dynamics.csv, per layer of ag_block's ---

struct ag_dynamics_log {
    FILE *csv;              /* DIR/dynamics.csv, or NULL (measured, not written: a rank other than 0) */
    char *dir;              /* DIR, for messages */
    ag_dynamics *m;         /* group 2 l: layer l's attention weights, 2 l + 1: its MLP's */
    int n_layer;
    double *gn, *up;        /* [2 n_layer] per group: ||dW||, the update / weight ratio */
    long watched;           /* the step being measured, or -1 */
    double norm, clip;      /* its global gradient norm and clip factor */
};

/* 2 l or 2 l + 1 for the 2-D weights under blocks.<l>.attn. and blocks.<l>.mlp., else -1 */
static int group_of(const ag_tensor *t)
{
    int l, n = 0;
    char kind[8];
    if (t->ndim != 2 || sscanf(t->name, "blocks.%d.%4[a-z].%n", &l, kind, &n) != 2 || n == 0 || l < 0) return -1;
    return !strcmp(kind, "attn") ? 2 * l : !strcmp(kind, "mlp") ? 2 * l + 1 : -1;
}

/* dynamics.csv's header for n_layer layers (malloc'd; NULL on OOM). */
static char *header(int n_layer)
{
    static const char *const cols[] = {"grad_attn", "grad_mlp", "update_attn", "update_mlp", NULL};
    return ag_csv_layer_head("iter,lr,grad_norm,clip", cols, n_layer);
}

/* The measure of P's layers (d->n_layer of them) and its buffers. */
static ag_status measure_new(ag_dynamics_log *d, const ag_params *P, ag_error *err)
{
    int *group = malloc((size_t)P->n * sizeof *group + 1);
    if (!group) return ag_seterr(err, AG_ERR_NOMEM, "dynamics: out of memory");
    for (int e = 0; e < P->n; e++) {
        group[e] = group_of(P->entries[e].t);
        if (group[e] >= 0 && group[e] / 2 + 1 > d->n_layer) d->n_layer = group[e] / 2 + 1;
    }
    ag_status s = AG_OK;
    if (d->n_layer == 0) s = ag_seterr(err, AG_ERR_ARG, "dynamics: the model has no layer of ag_block's weights "
                                       "(blocks.<l>.attn.*, blocks.<l>.mlp.*) to measure");
    if (s == AG_OK && !(d->gn = malloc(4 * (size_t)d->n_layer * sizeof *d->gn)))
        s = ag_seterr(err, AG_ERR_NOMEM, "dynamics: out of memory");
    if (s == AG_OK && !(d->m = ag_dynamics_new(P, group, 2 * d->n_layer, err))) s = AG_ERR_NOMEM;
    free(group);
    if (s == AG_OK) d->up = d->gn + 2 * d->n_layer;
    return s;
}

ag_dynamics_log *ag_dynamics_log_open(const ag_params *P, const char *dir, bool write, long start, ag_error *err)
{
    ag_dynamics_log *d = calloc(1, sizeof *d);
    if (!d || !(d->dir = strdup(dir))) {
        free(d);
        ag_seterr(err, AG_ERR_NOMEM, "dynamics: out of memory");
        return NULL;
    }
    d->watched = -1;
    ag_status s = measure_new(d, P, err);
    char *head = s == AG_OK && write ? header(d->n_layer) : NULL;
    if (s == AG_OK && write && !head) s = ag_seterr(err, AG_ERR_NOMEM, "dynamics: out of memory");
    if (s == AG_OK && write) s = ag_csv_open(dir, "dynamics.csv", head, start, &d->csv, err);
    free(head);
    if (s == AG_OK) return d;
    ag_dynamics_log_free(d);
    return NULL;
}

void ag_dynamics_log_watch(ag_dynamics_log *d, const ag_params *P, long it, double norm, double clip)
{
    ag_dynamics_watch(d->m, P);   // dW before the clip, W before the update
    d->watched = it;
    d->norm = norm;
    d->clip = clip;
}

ag_status ag_dynamics_log_record(ag_dynamics_log *d, const ag_params *P, long it, double lr, ag_error *err)
{
    if (d->watched != it) return AG_OK;
    ag_dynamics_measure(d->m, P, d->gn, d->up);
    d->watched = -1;
    if (!d->csv) return AG_OK;
    bool ok = fprintf(d->csv, "%ld,%.6g,%.6g,%.6g", it, lr, d->norm, d->clip) >= 0;
    for (int l = 0, a = 0, m = 1; ok && l < d->n_layer; l++, a += 2, m += 2)
        ok = fprintf(d->csv, ",%.6g,%.6g,%.6g,%.6g", d->gn[a], d->gn[m], d->up[a], d->up[m]) >= 0;
    if (ok && fputs("\n", d->csv) >= 0 && fflush(d->csv) == 0) return AG_OK;
    return ag_seterr(err, AG_ERR_IO, "%s/dynamics.csv: write failed: %s; stopped, the last checkpoint is kept", d->dir,
                     strerror(errno));
}

int ag_dynamics_log_layers(const ag_dynamics_log *d) { return d->n_layer; }

void ag_dynamics_log_free(ag_dynamics_log *d)
{
    if (!d) return;
    if (d->csv) fclose(d->csv);
    ag_dynamics_free(d->m);
    free(d->gn);
    free(d->dir);
    free(d);
}

// --- dynamics.png ---

ag_status ag_plot_dynamics(const char *dir, int n_layer, ag_error *err)
{
    size_t cap = 4096 + (size_t)n_layer * 512, len = 0;
    char *s = malloc(cap);
    if (!s) return ag_seterr(err, AG_ERR_NOMEM, "dynamics.gp: out of memory");
#define PUT(...) len += (size_t)snprintf(s + len, len < cap ? cap - len : 0, __VA_ARGS__)
    const char *prog = ag__train_program();
    PUT("# dynamics.gp -- written by %s train --log-dynamics; redraw by hand with: gnuplot dynamics.gp\n"
        "# dynamics.csv columns: iter,lr,grad_norm,clip, then per layer l (from column 5 + 4 l):\n"
        "# grad_attn_Ll,grad_mlp_Ll,update_attn_Ll,update_mlp_Ll\n"
        "set terminal pngcairo size 960,860 font ',10' noenhanced\n"
        "if (!exists('out')) out = 'dynamics.png'\n"
        "set output out\n"
        "set datafile separator ','\n"
        "set grid\n"
        "set key below\n"
        "set lmargin 10\n"
        "set rmargin 10\n"
        "set logscale y\n"
        "set format y '%%.0e'\n"
        "set multiplot layout 2,1 title '%s: how each step moves the weights (solid: attention, dashed: MLP)'\n"
        "set title 'gradient norm ||dW|| per layer, before the clip'\n"
        "set ylabel '||dW||'\n"
        "plot ", prog, prog);
    for (int l = 0; l < n_layer; l++)
        PUT("%s'dynamics.csv' using 1:%d with lines lw 2 lc %d title 'attn L%d', \\\n"
            "     '' using 1:%d with lines lw 2 dt 2 lc %d title 'mlp L%d'", l ? ", \\\n     " : "", 5 + 4 * l, l + 1, l,
            6 + 4 * l, l + 1, l);
    PUT("\nset title 'update / weight ||W_after - W_before|| / ||W_before|| per step'\n"
        "set ylabel 'update / weight'\n"
        "set xlabel 'iteration'\n"
        "set y2label 'learning rate'\n"
        "set y2tics\n"
        "set ytics nomirror\n"
        "set logscale y2\n"
        "set format y2 '%%.0e'\n"
        "# the 1e-3 line inside the frame, not on it (autoscale put it there: issue 33)\n"
        "lo = 4e-4\n"
        "do for [c = 7:%d:4] { do for [k = 0:1] { stats 'dynamics.csv' using (column(c + k)) nooutput;"
        " if (STATS_min > 0 && STATS_min / 2.5 < lo) { lo = STATS_min / 2.5 } } }\n"
        "set yrange [lo:*]\n"
        "plot 1e-3 with lines dt 3 lw 1.5 lc rgb '#808080' title '1e-3 (makemore rule of thumb)', \\\n"
        "     'dynamics.csv' using 1:2 axes x1y2 with lines lw 1.5 lc rgb '#2ca02c' title 'learning rate (right)'",
        3 + 4 * n_layer);
    for (int l = 0; l < n_layer; l++)
        PUT(", \\\n     '' using 1:%d with lines lw 2 lc %d title 'attn L%d', \\\n"
            "     '' using 1:%d with lines lw 2 dt 2 lc %d title 'mlp L%d'", 7 + 4 * l, l + 1, l, 8 + 4 * l, l + 1, l);
    PUT("\nunset multiplot\n");
#undef PUT
    return ag__plot_built(dir, "dynamics.gp", "dynamics.png", s, len < cap, err);
}
