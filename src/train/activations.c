/* activations.c -- --log-activations of any run (train.h, lesson 14): what flows through a
 * model built of ag_block's named "blocks.<l>", read off the tape of one forward pass, into
 * DIR/activations.csv and DIR/activations.png. Moved out of char_lm (issue 31), so that every
 * program on the trainer has it; which forward is read is the program's (char_lm: a batch of
 * its validation split; ag_train_run: the client's loss on a batch of a stream of its own).
 *
 * The tape is read node by node (debug.h's ag_tape_foreach), and per block l:
 *   rms_L<l>        the residual stream's size leaving block l, sqrt(mean x^2) of its last add
 *                   (rms_in: entering block 0, the first input of its first add). Each block
 *                   adds its branches to it; lesson 13's scaled init of w_o and fc2 keeps it from
 *                   growing with depth, and LayerNorm hides the growth from the blocks' inputs.
 *   act_mean_L<l>, act_std_L<l>
 *                   the MLP activation's inputs (fc1's outputs; SwiGLU: the gate's)
 *   act_dead_L<l>   the share of those inputs where the activation's slope is below 0.012 in size:
 *                   x < -3 for GELU (x < -6 for SiLU). Such a unit passes almost no gradient
 *                   back to fc1: it is "dead" for that input (saturated, for tanh).
 *   score_min_L<l>, score_max_L<l>
 *                   the attention scores q.k / sqrt(D) (the "scale" node's output) over the keys a
 *                   query may see (where the mask of the masked_fill after it is non-zero: causal,
 *                   key padding; all keys without one). A wide range makes softmax nearly
 *                   one-hot, and its gradient vanishes (lesson 2). Only attention op by op leaves
 *                   its scores on the tape: fused, the two columns are NaN. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "train.h"
#include "train_impl.h"
#include "../tensor/debug.h"    /* ag_tape_foreach, ag_ctx_set_grad */
#include "../tensor/kernel.h"   /* ag__broadcast_mask: a mask's strides over the scores */

#define DEAD_SLOPE_GELU (-3.0)   /* GELU'(-3) = -0.012; below it the slope is smaller still */
#define DEAD_SLOPE_SILU (-6.0)   /* SiLU'(-6) = -0.012 */

typedef struct {
    int L;
    double rms_in, *rms;              /* [L] */
    double *sum, *sumsq;              /* [L] over the activation's inputs */
    size_t *n, *dead;                 /* [L] */
    double *lo, *hi;                  /* [L] the scores' range */
    const ag_tensor **scaled;         /* [L] block l's scores (its "scale" node's output), until read */
} act_reader;

struct ag_activations {
    FILE *csv;                        /* DIR/activations.csv, or NULL (a rank other than 0) */
    char *dir;                        /* DIR, for messages */
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

/* The scaled scores s [B,H,T,T] where mask (broadcast over them as masked_fill reads it; NULL:
 * everywhere) is non-zero. */
static void add_scores(act_reader *r, int l, const ag_tensor *s, const ag_tensor *mask)
{
    int n[AG_MAX_DIMS];
    size_t ms[AG_MAX_DIMS], i = 0;
    if (mask && !ag__broadcast_mask(s, mask, n, ms)) return;
    for (int a = 0; a < (mask ? n[0] : 1); a++)
        for (int b = 0; b < (mask ? n[1] : 1); b++)
            for (int c = 0; c < (mask ? n[2] : 1); c++)
                for (int d = 0; d < (mask ? n[3] : (int)ag_numel(s)); d++, i++) {
                    if (mask && mask->data[a * ms[0] + b * ms[1] + c * ms[2] + d * ms[3]] == 0) continue;
                    r->lo[l] = fmin(r->lo[l], (double)s->data[i]);
                    r->hi[l] = fmax(r->hi[l], (double)s->data[i]);
                }
    r->scaled[l] = NULL;
}

static void read_node(const ag_node *n, void *user)
{
    act_reader *r = user;
    const char *op = n->op->name;
    int l;
    if (!strcmp(op, "add") && (l = block_of(n->scope, "")) >= 0 && l < r->L) {
        if (l == 0 && isnan(r->rms_in)) r->rms_in = rms_of(n->in[0]);   /* the stream entering block 0 */
        r->rms[l] = rms_of(n->out);
    } else if ((l = block_of(n->scope, "mlp")) >= 0 && l < r->L) {
        if (!strcmp(op, "gelu")) add_activation(r, l, n->in[0], DEAD_SLOPE_GELU);
        else if (!strcmp(op, "silu")) add_activation(r, l, n->in[0], DEAD_SLOPE_SILU);
    } else if ((l = block_of(n->scope, "attn")) >= 0 && l < r->L) {
        if (!strcmp(op, "scale")) r->scaled[l] = n->out;
        else if (!strcmp(op, "masked_fill") && n->in[0] == r->scaled[l]) add_scores(r, l, n->in[0], n->in[1]);
        else if (!strcmp(op, "softmax") && n->in[0] == r->scaled[l]) add_scores(r, l, n->in[0], NULL);
    }
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
        r->scaled[l] = NULL;
    }
}

/* 1 + the highest l of a parameter named "blocks.<l>.", or 0 */
static int layers_of(const ag_params *P)
{
    int L = 0;
    for (int e = 0; e < P->n; e++) {
        int l, k = 0;
        if (sscanf(P->entries[e].t->name, "blocks.%d.%n", &l, &k) == 1 && k > 0 && l >= 0 && l + 1 > L) L = l + 1;
    }
    return L;
}

/* activations.csv's header for L blocks (malloc'd; NULL on OOM). */
static char *header(int L)
{
    static const char *const cols[] = {"rms", "act_mean", "act_std", "act_dead", "score_min", "score_max", NULL};
    return ag_csv_layer_head("iter,rms_in", cols, L);
}

ag_activations *ag_activations_open(const ag_params *P, const char *dir, bool write, long start, ag_error *err)
{
    int L = layers_of(P);
    if (L == 0) return ag_seterr(err, AG_ERR_ARG, "--log-activations: the model has no block named blocks.<l>"), NULL;
    ag_activations *a = calloc(1, sizeof *a);
    double *d = a ? calloc((size_t)L * 6, sizeof *d) : NULL;
    size_t *z = d ? calloc((size_t)L * 2, sizeof *z) : NULL;
    const ag_tensor **sc = z ? calloc((size_t)L, sizeof *sc) : NULL;
    if (a) a->dir = strdup(dir), a->r = (act_reader){.L = L, .rms = d, .n = z, .scaled = sc};
    if (!sc || !a->dir) {
        ag_activations_free(a);
        return ag_seterr(err, AG_ERR_NOMEM, "--log-activations: out of memory"), NULL;
    }
    a->r.sum = d + L, a->r.sumsq = d + 2 * L, a->r.lo = d + 3 * L, a->r.hi = d + 4 * L, a->r.dead = z + L;
    char *head = write ? header(L) : NULL;
    ag_status s = !write ? AG_OK : head ? ag_csv_open(dir, "activations.csv", head, start, &a->csv, err)
                                        : ag_seterr(err, AG_ERR_NOMEM, "activations.csv: out of memory");
    free(head);
    if (s) ag_activations_free(a);
    return s ? NULL : a;
}

int ag_activations_layers(const ag_activations *a) { return a->r.L; }

void ag_activations_read(ag_activations *a, const ag_ctx *ctx)
{
    reader_clear(&a->r);
    ag_tape_foreach(ctx, read_node, &a->r);
}

static double mean_of(const act_reader *r, int l) { return r->n[l] ? r->sum[l] / (double)r->n[l] : NAN; }

static double std_of(const act_reader *r, int l)
{
    double m = mean_of(r, l);
    return r->n[l] ? sqrt(fmax(0, r->sumsq[l] / (double)r->n[l] - m * m)) : NAN;
}

static double dead_of(const act_reader *r, int l) { return r->n[l] ? (double)r->dead[l] / (double)r->n[l] : NAN; }

/* the scores' range: NaN where none were on the tape (attention fused) */
static double lo_of(const act_reader *r, int l) { return r->lo[l] <= r->hi[l] ? r->lo[l] : NAN; }
static double hi_of(const act_reader *r, int l) { return r->lo[l] <= r->hi[l] ? r->hi[l] : NAN; }

/* One line of the log: "activations: rms in 1.00 -> L0 1.12 L1 1.31 | dead L0 0.0% ... | scores ..." */
static void log_line(FILE *f, const act_reader *r)
{
    fprintf(f, "  activations: rms in %.3g ->", r->rms_in);
    for (int l = 0; l < r->L; l++) fprintf(f, " L%d %.3g", l, r->rms[l]);
    fputs(" | dead", f);
    for (int l = 0; l < r->L; l++) fprintf(f, " L%d %.1f%%", l, 100 * dead_of(r, l));
    fputs(" | scores", f);
    for (int l = 0; l < r->L; l++) fprintf(f, " L%d %.3g..%.3g", l, lo_of(r, l), hi_of(r, l));
    fputs("\n", f);
}

ag_status ag_activations_record(ag_activations *a, long it, FILE *log, ag_error *err)
{
    const act_reader *r = &a->r;
    if (log) log_line(log, r);
    if (!a->csv) return AG_OK;
    bool ok = fprintf(a->csv, "%ld,%.6g", it, r->rms_in) >= 0;
    for (int l = 0; ok && l < r->L; l++)
        ok = fprintf(a->csv, ",%.6g,%.6g,%.6g,%.6g,%.6g,%.6g", r->rms[l], mean_of(r, l), std_of(r, l), dead_of(r, l),
                     lo_of(r, l), hi_of(r, l)) >= 0;
    if (ok && fputs("\n", a->csv) >= 0 && fflush(a->csv) == 0) return AG_OK;
    return ag_seterr(err, AG_ERR_IO, "%s/activations.csv: write failed: %s; stopped, the last checkpoint is kept",
                     a->dir, strerror(errno));
}

void ag_activations_free(ag_activations *a)
{
    if (!a) return;
    if (a->csv) fclose(a->csv);
    free(a->dir);
    free(a->r.rms);
    free(a->r.n);
    free(a->r.scaled);
    free(a);
}

#define TAG_ACTS 0x616374697673ull   /* "activs": the activation statistics' batch */

/* The client's loss on a batch of a stream of its own, from seed and it, on ctx's tape. */
static ag_status client_loss(const ag_train_client *c, ag_ctx *ctx, uint64_t seed, long it, ag_error *err)
{
    ag_rng rng;   /* a stream of its own for each evaluation: the run's batches stay as they were */
    ag_rng_seed(&rng, ag_seed_at(seed, TAG_ACTS, (uint64_t)it));
    ag_tensor *loss = NULL;
    ag_micro all;   /* the whole batch in one pass, as one process runs a step */
    ag_micro_of(1, 0, 1, 0, c->batch, ag_seed_at(seed, TAG_ACTS ^ 1, (uint64_t)it), &all);
    ag_status s = c->draw(c->user, &rng, err);   /* the kept batch is drawn again at the next step */
    return s ? s : c->loss(c->user, ctx, &all, &loss, err);
}

ag_status ag_activations_measure(ag_activations *a, ag_ctx *ctx, const ag_train_client *c, uint64_t seed, long it,
                                 FILE *log, ag_error *err)
{
    if (!c->loss && !c->activations_forward)
        return ag_seterr(err, AG_ERR_ARG, "--log-activations: the client has no loss call to read");
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, true);   /* the tape records every op: the reading needs its nodes */
    ag_status s = c->activations_forward ? c->activations_forward(c->user, ctx, seed, it, err)
                                         : client_loss(c, ctx, seed, it, err);
    if (s == AG_OK && ag_ctx_status(ctx)) s = ag_seterr(err, ag_ctx_status(ctx), "--log-activations: %s",
                                                        ag_ctx_error(ctx));
    if (s == AG_OK) ag_activations_read(a, ctx);
    ag_ctx_reset(ctx);
    return s ? s : ag_activations_record(a, it, log, err);
}

/* activations.gp's first panel, the residual stream's RMS, into s [cap] from len; the new length */
#define PUT(...) len += (size_t)snprintf(s + len, len < cap ? cap - len : 0, __VA_ARGS__)
static size_t plot_rms(char *s, size_t cap, size_t len, int n_layer)
{
    PUT("# activations.gp -- written by %s train --log-activations; redraw with: gnuplot activations.gp\n"
        "# activations.csv columns: iter,rms_in, then per block l (from column 3 + 6 l):\n"
        "# rms_Ll,act_mean_Ll,act_std_Ll,act_dead_Ll,score_min_Ll,score_max_Ll\n"
        "set terminal pngcairo size 960,1080 font ',10' noenhanced\n"
        "if (!exists('out')) out = 'activations.png'\n"
        "set output out\n"
        "set datafile separator ','\n"
        "set grid\n"
        "set key below\n"
        "set lmargin 10\n"
        "set multiplot layout 3,1 title '%s: what flows through the model (lesson 14)'\n"
        "set title 'the residual stream: its RMS entering block 0 and leaving each block'\n"
        "set ylabel 'RMS'\n"
        "plot 'activations.csv' using 1:2 with lines lw 2 dt 2 lc rgb '#808080' title 'in (tokens + positions)'",
        ag__train_program(), ag__train_program());
    for (int l = 0; l < n_layer; l++)
        PUT(", \\\n     '' using 1:%d with lines lw 2 lc %d title 'after block %d'", 3 + 6 * l, l + 1, l);
    return len;
}

/* activations.png, from activations.csv: three panels over the iterations, one line per block. */
ag_status ag_plot_activations(const char *dir, int n_layer, ag_error *err)
{
    size_t cap = 4096 + (size_t)n_layer * 768, len = 0;
    char *s = malloc(cap);
    if (!s) return ag_seterr(err, AG_ERR_NOMEM, "activations.gp: out of memory");
    len = plot_rms(s, cap, len, n_layer);
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
    return ag__plot_built(dir, "activations.gp", "activations.png", s, len < cap, err);
}
