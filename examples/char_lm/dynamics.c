/* dynamics.c -- --log-dynamics: how each step moves the weights, at every log step (lm_log_due:
 * every 10 steps and the last), into DIR/dynamics.csv and DIR/dynamics.png (run.h).
 *
 * Per layer l, for its attention weights (w_q, w_k, w_v, w_o) and its MLP weights (fc1, fc2, or
 * SwiGLU's three), each group taken as one vector:
 *   grad_attn_L<l>, grad_mlp_L<l>       ||dW||, before the clip: which layers get gradient
 *   update_attn_L<l>, update_mlp_L<l>   ||W_after - W_before|| / ||W_before||: how far one step
 *                                       moves them, relative to their size. Adam moves each
 *                                       element by about lr (exactly lr at its first step), so
 *                                       this is about lr / rms(W); a layer far below the others
 *                                       barely learns, far above them it may diverge
 * with the step's learning rate, global gradient norm and clip factor in front. The library
 * measures (train/train.h: ag_dynamics, the weights copied at a log step before the update,
 * lm_dynamics_watch, and compared after it, lm_dynamics_record); the groups, the rows and when
 * are char_lm's. Other steps cost one test. Rank 0 alone writes (ddp.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"

struct lm_dynamics {
    FILE *csv;              /* DIR/dynamics.csv, or NULL (a rank other than 0) */
    ag_dynamics *m;         /* the measure; group 2 l: attention weights of layer l, 2 l + 1: MLP's */
    double *gn, *up;        /* [2 L] per group: ||dW||, the update / weight ratio */
    long watched;           /* the step being measured, or -1 */
    double norm, gscale;    /* its global gradient norm and clip factor */
};

static bool put_header(const lm_run *R, FILE *out)
{
    bool ok = fputs("iter,lr,grad_norm,clip", out) >= 0;
    for (int l = 0; ok && l < R->cfg.model.n_layer; l++)
        ok = fprintf(out, ",grad_attn_L%d,grad_mlp_L%d,update_attn_L%d,update_mlp_L%d", l, l, l, l) >= 0;
    return ok && fputs("\n", out) >= 0;
}

/* 2 l or 2 l + 1 for the 2-D weights under blocks.<l>.attn. and blocks.<l>.mlp., else -1 */
static int group_of(const ag_tensor *t)
{
    int l, n = 0;
    char kind[8];
    if (t->ndim != 2 || sscanf(t->name, "blocks.%d.%4[a-z].%n", &l, kind, &n) != 2 || n == 0) return -1;
    return !strcmp(kind, "attn") ? 2 * l : !strcmp(kind, "mlp") ? 2 * l + 1 : -1;
}

/* The measure and the file, at the first log step of the run. */
static ag_status start(lm_run *R, ag_error *err)
{
    const ag_params *P = R->learn.m.g->params;
    int G = 2 * R->cfg.model.n_layer;
    lm_dynamics *d = R->rep.dyn = calloc(1, sizeof *d);
    int *group = malloc((size_t)P->n * sizeof *group);
    if (d) d->gn = malloc(2 * (size_t)G * sizeof *d->gn);
    for (int e = 0; group && e < P->n; e++) group[e] = group_of(P->entries[e].t);
    if (d && d->gn && group) d->m = ag_dynamics_new(P, group, G, err);
    free(group);
    if (!d || !d->m) return ag_seterr(err, AG_ERR_NOMEM, "--log-dynamics: out of memory");
    d->up = d->gn + G;
    d->watched = -1;
    return lm_ddp_writer(R->ctl.ddp) ? lm_log_open_csv(R, "dynamics.csv", put_header, &d->csv, err) : AG_OK;
}

ag_status lm_dynamics_watch(lm_run *R, long it, double norm, double gscale, ag_error *err)
{
    if (!R->cfg.log_dynamics || !lm_log_due(R, it)) return AG_OK;
    ag_status s = R->rep.dyn ? AG_OK : start(R, err);
    if (s) return s;
    lm_dynamics *d = R->rep.dyn;
    ag_dynamics_watch(d->m, R->learn.m.g->params);   // dW before the clip, W before the update
    d->watched = it;
    d->norm = norm;
    d->gscale = gscale;
    return AG_OK;
}

ag_status lm_dynamics_record(lm_run *R, long it, double lr, ag_error *err)
{
    lm_dynamics *d = R->rep.dyn;
    if (!d || d->watched != it) return AG_OK;
    ag_dynamics_measure(d->m, R->learn.m.g->params, d->gn, d->up);
    d->watched = -1;
    if (!d->csv) return AG_OK;
    bool ok = fprintf(d->csv, "%ld,%.6g,%.6g,%.6g", it, lr, d->norm, d->gscale) >= 0;
    for (int l = 0, a = 0, m = 1; ok && l < R->cfg.model.n_layer; l++, a += 2, m += 2)
        ok = fprintf(d->csv, ",%.6g,%.6g,%.6g,%.6g", d->gn[a], d->gn[m], d->up[a], d->up[m]) >= 0;
    if (ok && fputs("\n", d->csv) >= 0 && fflush(d->csv) == 0) return AG_OK;
    return ag_seterr(err, AG_ERR_IO, "%s/dynamics.csv: write failed: %s; stopped, the last checkpoint is kept",
                     R->o->out_dir, strerror(errno));
}

void lm_dynamics_free(lm_dynamics *d)
{
    if (!d) return;
    if (d->csv) fclose(d->csv);
    ag_dynamics_free(d->m);
    free(d->gn);
    free(d);
}
