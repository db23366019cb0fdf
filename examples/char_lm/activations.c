/* activations.c -- --log-activations (lesson 14): what flows through the model, at each
 * evaluation, into DIR/activations.csv and DIR/activations.png (run.h).
 *
 * One batch (the validation split, else the training one; its own random stream, so the run's
 * losses do not change) goes through the model with the tape on and attention op by op, so its
 * scores are a tensor of their own. The tape is then read node by node (debug.h's
 * ag_tape_foreach), and per block l:
 *   rms_L<l>        the residual stream's size leaving block l, sqrt(mean x^2) of its last add
 *                   (rms_in: entering block 0, tokens + positions). Each block adds its
 *                   branches to it; lesson 13's scaled init of w_o and fc2 keeps it from growing
 *                   with depth, and LayerNorm hides the growth from the blocks' inputs.
 *   act_mean_L<l>, act_std_L<l>
 *                   the MLP activation's inputs (fc1's outputs; SwiGLU: the gate's)
 *   act_dead_L<l>   the share of those inputs where the activation's slope is below 0.012 in size:
 *                   x < -3 for GELU (x < -6 for SiLU). Such a unit passes almost no gradient
 *                   back to fc1: it is "dead" for that input (saturated, for tanh).
 *   score_min_L<l>, score_max_L<l>
 *                   the attention scores q.k / sqrt(D) over the keys a query may see. A wide
 *                   range makes softmax nearly one-hot, and its gradient vanishes (lesson 2).
 * Rank 0 alone writes (train/ddp.h). Without the flag nothing here runs. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plot.h"
#include "run.h"

#define DEAD_SLOPE_GELU (-3.0)   /* GELU'(-3) = -0.012; below it the slope is smaller still */
#define DEAD_SLOPE_SILU (-6.0)   /* SiLU'(-6) = -0.012 */

typedef struct {
    int L;
    double rms_in, *rms;              /* [L] */
    double *sum, *sumsq;              /* [L] over the activation's inputs */
    size_t *n, *dead;                 /* [L] */
    double *lo, *hi;                  /* [L] the scores' range */
    int T;                            /* the batch's window length (the scores' causal rows) */
} act_reader;

struct lm_activations {
    FILE *csv;                        /* DIR/activations.csv, or NULL (a rank other than 0) */
    act_reader r;
};

/* l for a scope "blocks.<l>" (part "") or "blocks.<l>.<part>", else -1 */
static int block_of(const char *scope, const char *part)
{
    int l, n = 0;
    if (!scope || sscanf(scope, "blocks.%d%n", &l, &n) != 1) return -1;
    const char *rest = scope + n;
    if (!*part) return *rest ? -1 : l;
    return rest[0] == '.' && !strcmp(rest + 1, part) ? l : -1;
}

static double rms_of(const ag_tensor *t)
{
    size_t n = ag_numel(t);
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)t->data[i] * (double)t->data[i];
    return n ? sqrt(s / (double)n) : NAN;
}

/* The activation's inputs x [B,T,F]: their moments, and how many lie below the dead line. */
static void add_activation(act_reader *r, int l, const ag_tensor *x, double dead_below)
{
    size_t n = ag_numel(x);
    for (size_t i = 0; i < n; i++) {
        double v = (double)x->data[i];
        r->sum[l] += v;
        r->sumsq[l] += v * v;
        r->dead[l] += v < dead_below;
    }
    r->n[l] += n;
}

/* The scaled scores s [B,H,T,T]: row t sees keys 0..t (the causal mask, applied after). */
static void add_scores(act_reader *r, int l, const ag_tensor *s)
{
    int T = s->shape[s->ndim - 1];
    size_t rows = ag_rows(s);
    for (size_t i = 0; i < rows; i++) {
        const ag_real *row = s->data + i * (size_t)T;   // [T] the scores of query t
        int t = (int)(i % (size_t)T);
        for (int k = 0; k <= t; k++) {
            r->lo[l] = fmin(r->lo[l], (double)row[k]);
            r->hi[l] = fmax(r->hi[l], (double)row[k]);
        }
    }
}

static void read_node(const ag_node *n, void *user)
{
    act_reader *r = user;
    const char *op = n->op->name;
    int l;
    if (!strcmp(op, "add") && n->scope && !strcmp(n->scope, "pos_emb")) r->rms_in = rms_of(n->out);
    else if (!strcmp(op, "add") && (l = block_of(n->scope, "")) >= 0 && l < r->L) r->rms[l] = rms_of(n->out);
    else if ((l = block_of(n->scope, "mlp")) >= 0 && l < r->L) {
        if (!strcmp(op, "gelu")) add_activation(r, l, n->in[0], DEAD_SLOPE_GELU);
        else if (!strcmp(op, "silu")) add_activation(r, l, n->in[0], DEAD_SLOPE_SILU);
    } else if (!strcmp(op, "scale") && (l = block_of(n->scope, "attn")) >= 0 && l < r->L)
        add_scores(r, l, n->out);
}

static void reader_clear(act_reader *r)
{
    r->rms_in = NAN;
    for (int l = 0; l < r->L; l++) {
        r->rms[l] = NAN;
        r->sum[l] = r->sumsq[l] = 0;
        r->n[l] = r->dead[l] = 0;
        r->lo[l] = INFINITY;
        r->hi[l] = -INFINITY;
    }
}

#define LM_TAG_ACTS 0x616374697673ull   /* "activs": the activation statistics' batch */
#define ACT_WINDOWS 8                   /* windows in the batch: enough for stable statistics */

static bool put_header(const lm_run *R, FILE *out)
{
    bool ok = fputs("iter,rms_in", out) >= 0;
    for (int l = 0; ok && l < R->cfg.model.n_layer; l++)
        ok = fprintf(out, ",rms_L%d,act_mean_L%d,act_std_L%d,act_dead_L%d,score_min_L%d,score_max_L%d", l, l, l, l,
                     l, l) >= 0;
    return ok && fputs("\n", out) >= 0;
}

/* The buffers and the file, at the run's first evaluation. */
static ag_status start(lm_run *R, ag_error *err)
{
    int L = R->cfg.model.n_layer;
    lm_activations *a = R->rep.acts = calloc(1, sizeof *a);
    double *d = a ? calloc((size_t)L * 6, sizeof *d) : NULL;
    size_t *z = d ? calloc((size_t)L * 2, sizeof *z) : NULL;
    if (!z) {
        free(d);
        return ag_seterr(err, AG_ERR_NOMEM, "--log-activations: out of memory");
    }
    a->r = (act_reader){ .L = L, .rms = d, .sum = d + L, .sumsq = d + 2 * L, .lo = d + 3 * L, .hi = d + 4 * L,
                         .n = z, .dead = z + L };
    return ag_ddp_writer(R->ctl.ddp) ? lm_log_open_csv(R, "activations.csv", put_header, &a->csv, err) : AG_OK;
}

/* One forward pass of the statistics' batch for iteration it, its tape read into r. */
static ag_status measure(lm_run *R, long it, act_reader *r, ag_error *err)
{
    int B = R->cfg.batch_size < ACT_WINDOWS ? R->cfg.batch_size : ACT_WINDOWS, T = R->cfg.model.block_size;
    lm_data *D = &R->data;
    ag_rng rng;
    ag_rng_seed(&rng, ag_splitmix64((R->cfg.seed ^ LM_TAG_ACTS ^ ((uint64_t)it * LM_GOLDEN + LM_SEED_SALT)) - LM_GOLDEN));
    bool val = D->n_val > 0;
    lm_draw_windows(D->off, B, val ? D->n_val : D->n_train, T, &rng);
    lm_fill_windows(D->x, D->y, D->text.ids + (val ? D->n_train : 0), D->off, B, T);   // x [B,T]
    ag_ctx *ctx = R->learn.ctx;
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, true);   /* the tape records every op: the reading below needs its nodes */
    ag_gpt_forward(ctx, R->learn.m.g, D->x, NULL, B, T, &(ag_forward_opts){ .composed_attention = true }, NULL);
    ag_status s = ag_ctx_status(ctx);
    if (s) ag_seterr(err, s, "--log-activations: %s", ag_ctx_error(ctx));
    reader_clear(r);
    r->T = T;
    if (!s) ag_tape_foreach(ctx, read_node, r);
    ag_ctx_reset(ctx);
    return s;
}

static double mean_of(const act_reader *r, int l) { return r->n[l] ? r->sum[l] / (double)r->n[l] : NAN; }

static double std_of(const act_reader *r, int l)
{
    double m = mean_of(r, l);
    return r->n[l] ? sqrt(fmax(0, r->sumsq[l] / (double)r->n[l] - m * m)) : NAN;
}

static double dead_of(const act_reader *r, int l) { return r->n[l] ? (double)r->dead[l] / (double)r->n[l] : NAN; }

/* One line of the log: "activations: rms in 1.00 -> L0 1.12 L1 1.31 | dead L0 0.0% ... | scores ..." */
static void log_line(lm_run *R, const act_reader *r)
{
    FILE *f = R->o->log;
    if (!f) return;
    fprintf(f, "  activations: rms in %.3g ->", r->rms_in);
    for (int l = 0; l < r->L; l++) fprintf(f, " L%d %.3g", l, r->rms[l]);
    fputs(" | dead", f);
    for (int l = 0; l < r->L; l++) fprintf(f, " L%d %.1f%%", l, 100 * dead_of(r, l));
    fputs(" | scores", f);
    for (int l = 0; l < r->L; l++) fprintf(f, " L%d %.3g..%.3g", l, r->lo[l], r->hi[l]);
    fputs("\n", f);
}

ag_status lm_activations_record(lm_run *R, long it, ag_error *err)
{
    if (!R->cfg.log_activations) return AG_OK;
    ag_status s = R->rep.acts ? AG_OK : start(R, err);
    if (s) return s;
    lm_activations *a = R->rep.acts;
    act_reader *r = &a->r;
    if ((s = measure(R, it, r, err))) return s;
    log_line(R, r);
    if (!a->csv) return AG_OK;
    bool ok = fprintf(a->csv, "%ld,%.6g", it, r->rms_in) >= 0;
    for (int l = 0; ok && l < r->L; l++)
        ok = fprintf(a->csv, ",%.6g,%.6g,%.6g,%.6g,%.6g,%.6g", r->rms[l], mean_of(r, l), std_of(r, l), dead_of(r, l),
                     r->lo[l], r->hi[l]) >= 0;
    if (ok && fputs("\n", a->csv) >= 0 && fflush(a->csv) == 0) return AG_OK;
    return ag_seterr(err, AG_ERR_IO, "%s/activations.csv: write failed: %s; stopped, the last checkpoint is kept",
                     R->o->out_dir, strerror(errno));
}

void lm_activations_free(lm_activations *a)
{
    if (!a) return;
    if (a->csv) fclose(a->csv);
    free(a->r.rms);
    free(a->r.n);
    free(a);
}

/* activations.png, from activations.csv: three panels over the iterations, one line per block. */
ag_status lm_activations_plot(const char *dir, int n_layer, ag_error *err)
{
    size_t cap = 4096 + (size_t)n_layer * 768, len = 0;
    char *s = malloc(cap);
    if (!s) return ag_seterr(err, AG_ERR_NOMEM, "activations.gp: out of memory");
#define PUT(...) len += (size_t)snprintf(s + len, len < cap ? cap - len : 0, __VA_ARGS__)
    PUT("# activations.gp -- written by char_lm train --log-activations; redraw with: gnuplot activations.gp\n"
        "# activations.csv columns: iter,rms_in, then per block l (from column 3 + 6 l):\n"
        "# rms_Ll,act_mean_Ll,act_std_Ll,act_dead_Ll,score_min_Ll,score_max_Ll\n"
        "set terminal pngcairo size 960,1080 font ',10' noenhanced\n"
        "if (!exists('out')) out = 'activations.png'\n"
        "set output out\n"
        "set datafile separator ','\n"
        "set grid\n"
        "set key below\n"
        "set lmargin 10\n"
        "set multiplot layout 3,1 title 'char_lm: what flows through the model (lesson 14)'\n"
        "set title 'the residual stream: its RMS entering block 0 and leaving each block'\n"
        "set ylabel 'RMS'\n"
        "plot 'activations.csv' using 1:2 with lines lw 2 dt 2 lc rgb '#808080' title 'in (tokens + positions)'");
    for (int l = 0; l < n_layer; l++)
        PUT(", \\\n     '' using 1:%d with lines lw 2 lc %d title 'after block %d'", 3 + 6 * l, l + 1, l);
    PUT("\nset title 'dead MLP units: share of activation inputs where its slope is under 0.012 (GELU: x < -3)'\n"
        "set ylabel 'share (%%)'\n"
        "set yrange [0:*]\n"
        "plot ");
    for (int l = 0; l < n_layer; l++)
        PUT("%s'activations.csv' using 1:(100 * column(%d)) with lines lw 2 lc %d title 'block %d'", l ? ", \\\n     " : "",
            6 + 6 * l, l + 1, l);
    PUT("\nset title 'attention scores q.k / sqrt(D): lowest and highest over the keys a query sees'\n"
        "set ylabel 'score'\n"
        "set xlabel 'iteration'\n"
        "set autoscale y\n"
        "plot ");
    for (int l = 0; l < n_layer; l++)
        PUT("%s'activations.csv' using 1:%d:%d with filledcurves fs transparent solid 0.2 lc %d notitle, \\\n"
            "     '' using 1:%d with lines lw 2 lc %d title 'block %d (max)', '' using 1:%d with lines lw 1 lc %d "
            "notitle", l ? ", \\\n     " : "", 7 + 6 * l, 8 + 6 * l, l + 1, 8 + 6 * l, l + 1, l, 7 + 6 * l, l + 1);
    PUT("\nunset multiplot\n");
#undef PUT
    ag_status st = len < cap ? ag_plot_script(dir, "activations.gp", "activations.png", s, err)
                             : ag_seterr(err, AG_ERR_NOMEM, "activations.gp: script too long");
    free(s);
    return st;
}
