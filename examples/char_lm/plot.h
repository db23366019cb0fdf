/* plot.h -- char_lm's own pictures, drawn by the library's plotter (train/train.h: loss.png,
 * the bounded waits for gnuplot, ag_plot_set_stop) in plot_lm.c. Nothing prints: if gnuplot is
 * missing or fails, the status is AG_ERR_IO and err says so in one line. */
#ifndef LM_PLOT_H
#define LM_PLOT_H

#include "attograd.h"

/* --log-attn-stats: DIR/attn.gp and DIR/attn.png from the attn_entropy_L<l> and attn_max_L<l>
 * columns of DIR/metrics.csv (columns 7 + 2l and 8 + 2l), one curve per layer in two panels,
 * each with the value uniform weights would give (and ln T, the largest entropy of a row). */
ag_status lm_plot_attn_stats(const char *dir, int n_layer, int T, ag_error *err);

/* Heat maps of attention weights: W [n_maps, T, T], row i = query i, column j = key j; NaN
 * entries (the masked future) are drawn blank, the weights on a fixed colour scale [0, 1].
 * One panel per map (a grid when n_maps > 1) titled titles[k]; both axes labelled with
 * labels[T] (UTF-8, shown as given; gnuplot quoting is done here). png must end in ".png":
 * beside it go <base>.dat (the weights, one T x T block per map, blocks separated by two blank
 * lines: gnuplot's "index") and <base>.gp, the script gnuplot runs. */
ag_status lm_plot_attention(const char *png, const ag_real *W, int n_maps, int T, const char *const *labels,
                            const char *const *titles, const char *title, ag_error *err);

#endif
