/* plot.h -- the loss curve of a run, drawn by gnuplot from DIR/metrics.csv into DIR/loss.png.
 *
 * lm_plot_loss writes DIR/loss.gp (a plain gnuplot script: `cd DIR && gnuplot loss.gp` redraws
 * the curve by hand) and runs gnuplot on it in DIR. Nothing prints: if gnuplot is missing or
 * fails, the status is AG_ERR_IO and err says so in one line; the caller decides whether that
 * is worth a warning (char_lm's training goes on without a picture). */
#ifndef LM_PLOT_H
#define LM_PLOT_H

#include <stdbool.h>
#include "attograd.h"

/* with_val: draw the validation curve too (false when the run has no validation split). */
ag_status lm_plot_loss(const char *dir, bool with_val, char *err, size_t errlen);

#endif
