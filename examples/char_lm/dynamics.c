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
 * with the step's learning rate, global gradient norm and clip factor in front. The update is
 * whatever the optimizer did (AdamW's decay included), so it is measured, not predicted: the
 * weights before the update are copied at a log step (lm_dynamics_watch), and compared after
 * it (lm_dynamics_record). Other steps cost one test. Rank 0 alone writes (ddp.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"

struct lm_dynamics {
    FILE *csv;              /* DIR/dynamics.csv, or NULL (a rank other than 0) */
    int *group;             /* [P->n] 2 l: attention weight of layer l, 2 l + 1: MLP weight, -1: none */
    ag_real *before;        /* [P->total] the weights before the watched step's update */
    double *gsq, *wsq, *dsq;   /* [2 L] per group: sum of dW^2, of W^2 (before), of (W_after - W_before)^2 */
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

/* The buffers and the file, at the first log step of the run. */
static ag_status start(lm_run *R, ag_error *err)
{
    const ag_params *P = R->learn.m.g->params;
    int G = 2 * R->cfg.model.n_layer;
    lm_dynamics *d = R->rep.dyn = calloc(1, sizeof *d);
    if (d) {
        d->group = malloc((size_t)P->n * sizeof *d->group);
        d->before = malloc(P->total * sizeof *d->before);
        d->gsq = calloc((size_t)G * 3, sizeof *d->gsq);
    }
    if (!d || !d->group || !d->before || !d->gsq) return ag_seterr(err, AG_ERR_NOMEM, "--log-dynamics: out of memory");
    d->wsq = d->gsq + G;
    d->dsq = d->wsq + G;
    d->watched = -1;
    for (int e = 0; e < P->n; e++) d->group[e] = group_of(P->entries[e].t);
    return lm_ddp_writer(R->ctl.ddp) ? lm_log_open_csv(R, "dynamics.csv", put_header, &d->csv, err) : AG_OK;
}

ag_status lm_dynamics_watch(lm_run *R, long it, double norm, double gscale, ag_error *err)
{
    if (!R->cfg.log_dynamics || !lm_log_due(R, it)) return AG_OK;
    ag_status s = R->rep.dyn ? AG_OK : start(R, err);
    if (s) return s;
    lm_dynamics *d = R->rep.dyn;
    const ag_params *P = R->learn.m.g->params;
    int G = 2 * R->cfg.model.n_layer;
    memset(d->gsq, 0, (size_t)G * 3 * sizeof *d->gsq);
    for (int e = 0; e < P->n; e++) {
        if (d->group[e] < 0) continue;
        const ag_real *g = P->entries[e].t->grad;   // the group's dW, before the clip
        size_t n = ag_numel(P->entries[e].t);
        double sum = 0;
        for (size_t i = 0; i < n; i++) sum += (double)g[i] * (double)g[i];
        d->gsq[d->group[e]] += sum;
    }
    memcpy(d->before, P->data, P->total * sizeof *d->before);
    d->watched = it;
    d->norm = norm;
    d->gscale = gscale;
    return AG_OK;
}

ag_status lm_dynamics_record(lm_run *R, long it, double lr, ag_error *err)
{
    lm_dynamics *d = R->rep.dyn;
    if (!d || d->watched != it) return AG_OK;
    const ag_params *P = R->learn.m.g->params;
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
    d->watched = -1;
    if (!d->csv) return AG_OK;
    bool ok = fprintf(d->csv, "%ld,%.6g,%.6g,%.6g", it, lr, d->norm, d->gscale) >= 0;
    for (int l = 0; ok && l < R->cfg.model.n_layer; l++) {
        double ua = d->wsq[2 * l] > 0 ? sqrt(d->dsq[2 * l] / d->wsq[2 * l]) : NAN;
        double um = d->wsq[2 * l + 1] > 0 ? sqrt(d->dsq[2 * l + 1] / d->wsq[2 * l + 1]) : NAN;
        ok = fprintf(d->csv, ",%.6g,%.6g,%.6g,%.6g", sqrt(d->gsq[2 * l]), sqrt(d->gsq[2 * l + 1]), ua, um) >= 0;
    }
    if (ok && fputs("\n", d->csv) >= 0 && fflush(d->csv) == 0) return AG_OK;
    return ag_seterr(err, AG_ERR_IO, "%s/dynamics.csv: write failed: %s; stopped, the last checkpoint is kept",
                     R->o->out_dir, strerror(errno));
}

void lm_dynamics_free(lm_dynamics *d)
{
    if (!d) return;
    if (d->csv) fclose(d->csv);
    free(d->group);
    free(d->before);
    free(d->gsq);
    free(d);
}
