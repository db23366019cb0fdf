/* plot_attn.h -- pictures of attention, for any model that records its weights (a GPT's:
 * nn.h's ag_gpt_attn_record, drawn by lm/lm.h's ag_gpt_plot_attention): heat maps of one
 * layer's heads, and the entropy and peak of every layer over a run. Drawn by the library's
 * plotter (train.h: ag_plot_script, ag_plot_run, every wait for gnuplot bounded). Nothing
 * prints: if gnuplot is missing or fails, the status is AG_ERR_IO and err says so in one line. */
#ifndef AG_TRAIN_PLOT_ATTN_H
#define AG_TRAIN_PLOT_ATTN_H

#include "../tensor/real.h"
#include "../tensor/tensor.h"

typedef struct {
    const ag_real *A;            /* [H,T,T] one layer's weights for one sequence: row i = query i,
                                    column j = key j; keys j > i are the masked future, drawn blank */
    int H, T;
    int layer;                   /* for the panels' titles, "layer L, head h" */
    int head;                    /* the head drawn, or -1: every head, one panel each, in a grid */
    const char *const *labels;   /* [T] the tokens on both axes (UTF-8, shown as given; gnuplot
                                    quoting is done here) */
    const char *title;           /* over all panels */
    const char *by;              /* the script's first line says "written by <by>" ("char_lm attn") */
    const char *what;            /* png's name in messages ("--out") */
} ag_attn_picture;

/* Heat maps of p's weights on a fixed colour scale [0, 1], into png, which must end in ".png"
 * (AG_ERR_ARG, "<what> must end in .png (got 'x')"). Beside it go <base>.dat (the weights, one
 * T x T block per panel, blocks separated by two blank lines: gnuplot's "index"; NaN above the
 * diagonal) and <base>.gp, the script gnuplot runs in png's directory. */
ag_status ag_plot_attention(const char *png, const ag_attn_picture *p, ag_error *err);

/* DIR/attn.gp and DIR/attn.png from DIR/metrics.csv's attn_entropy_L<l> and attn_max_L<l>
 * columns (col + 2l and col + 1 + 2l, counted from 1), one curve per layer in two panels, each
 * with the value uniform weights over T positions would give (and ln T, the largest entropy of
 * a row). */
ag_status ag_plot_attn_stats(const char *dir, int col, int n_layer, int T, ag_error *err);

#endif
