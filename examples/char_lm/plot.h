/* plot.h -- the loss curve of a run, drawn by gnuplot from DIR/metrics.csv into DIR/loss.png.
 *
 * lm_plot_loss writes DIR/loss.gp (a plain gnuplot script: `cd DIR && gnuplot loss.gp` redraws
 * the curve by hand) and runs gnuplot on it in DIR. Nothing prints: if gnuplot is missing or
 * fails, the status is AG_ERR_IO and the ag_error err says so in one line; the caller decides whether that
 * is worth a warning (char_lm's training goes on without a picture). */
#ifndef LM_PLOT_H
#define LM_PLOT_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>
#include "attograd.h"

/* Every wait for gnuplot is bounded (plot.c says how): it is killed after lm_plot_timeout()
 * seconds (60, or $CHAR_LM_PLOT_TIMEOUT), and within a second of *stop becoming non-zero (a
 * stop signal; stop must live as long as the program: main.c's flag). Either is AG_ERR_IO. */
void lm_plot_set_stop(const volatile sig_atomic_t *stop);
double lm_plot_timeout(void);

/* with_val: draw the validation curve too (false when the run has no validation split). The
 * learning rate (metrics.csv's column 2) is drawn against the right-hand axis, and the line
 * ln V, the loss of a uniform guess over the V characters, where training starts. */
ag_status lm_plot_loss(const char *dir, bool with_val, int V, ag_error *err);
/* The same without waiting, so training goes on while gnuplot draws: *pid gets the gnuplot
 * process, for lm_plot_loss_wait. */
ag_status lm_plot_loss_start(const char *dir, bool with_val, int V, pid_t *pid, ag_error *err);
/* Reaps the plot started as pid: block waits for it (bounded, as said above); without block
 * only *done tells whether it has ended yet. Once *done, the status is lm_plot_loss's. */
ag_status lm_plot_loss_wait(pid_t pid, bool block, bool *done, const char *dir, ag_error *err);

/* --log-attn-stats: DIR/attn.gp and DIR/attn.png from the attn_entropy_L<l> and attn_max_L<l>
 * columns of DIR/metrics.csv (columns 7 + 2l and 8 + 2l), one curve per layer in two panels,
 * each with the value uniform weights would give (and ln T, the largest entropy of a row). */
ag_status lm_plot_attn_stats(const char *dir, int n_layer, int T, ag_error *err);

/* --log-dynamics: DIR/dynamics.gp and DIR/dynamics.png from DIR/dynamics.csv (dynamics.c): per
 * layer the gradient norms of the attention and MLP weights (top), and their update/weight
 * ratios with the learning rate on the right-hand axis (bottom), both on log scales. */
ag_status lm_plot_dynamics(const char *dir, int n_layer, ag_error *err);

/* Any picture of a run: writes script to DIR/gp and runs gnuplot on it in DIR, which draws
 * png (lr_find.c's lr_find.png). Errors as above. */
ag_status lm_plot_script(const char *dir, const char *gp, const char *png, const char *script, ag_error *err);

/* Heat maps of attention weights: W [n_maps, T, T], row i = query i, column j = key j; NaN
 * entries (the masked future) are drawn blank, the weights on a fixed colour scale [0, 1].
 * One panel per map (a grid when n_maps > 1) titled titles[k]; both axes labelled with
 * labels[T] (UTF-8, shown as given; gnuplot quoting is done here). png must end in ".png":
 * beside it go <base>.dat (the weights, one T x T block per map, blocks separated by two blank
 * lines: gnuplot's "index") and <base>.gp, the script gnuplot runs. */
ag_status lm_plot_attention(const char *png, const ag_real *W, int n_maps, int T, const char *const *labels,
                            const char *const *titles, const char *title, ag_error *err);

#endif
