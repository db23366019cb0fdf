/* plot.h -- char_lm's attention statistics picture, the library's (train/plot_attn.h): attn.gp
 * and attn.png from the attn_entropy_L<l>, attn_max_L<l> columns of DIR/metrics.csv, which are
 * its columns 7 + 2l and 8 + 2l. */
#ifndef LM_PLOT_H
#define LM_PLOT_H

#include "attograd.h"

#define LM_ATTN_STATS_COL 7
#define lm_plot_attn_stats(dir, n_layer, T, err) ag_plot_attn_stats(dir, LM_ATTN_STATS_COL, n_layer, T, err)

#endif
