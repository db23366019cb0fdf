/* train_impl.h -- what the files of src/train share and no program sees (never installed). */
#ifndef AG_TRAIN_IMPL_H
#define AG_TRAIN_IMPL_H

#include "train.h"

/* The program's name (ag_train_name): "char_lm", or "attograd" until one is given. */
const char *ag__train_program(void);
/* getenv("<env>_<suffix>"): $CHAR_LM_PLOT_TIMEOUT for suffix "PLOT_TIMEOUT" in char_lm. */
const char *ag__train_getenv(const char *suffix);

/* A picture whose script s (malloc'd, freed here) was built into a buffer: ag_plot_script's,
 * or AG_ERR_NOMEM "<gp>: script too long" when it did not fit (plot.c). */
ag_status ag__plot_built(const char *dir, const char *gp, const char *png, char *s, bool fits, ag_error *err);

/* After the run's first commit over another (opts->overwrite): that run's checkpoints removed
 * (ag_ckpt_clean with `also` = old, its run_id), what stays left to the next run's tidy. */
void ag__loop_replace(const char *dir, const ag_train_client *c, uint64_t old);
/* AG_ERR_ARG when DIR lies inside another run's directory (ag_ckpt_outside_runs), or the
 * client's format lacks a part. */
ag_status ag__loop_outside_runs(const char *dir, const ag_train_client *c, ag_error *err);
/* The locked DIR opened for the run: with o->resume a lost latest recovered (a warning on
 * o->log) and DIR/latest read into c->params and st; else the run's identity drawn, and a DIR
 * that holds a run refused, or with o->overwrite started over (*replaces: the old run, else 0). Then what a killed run left is removed: temporary files, this
 * run's superseded checkpoints, nothing else (what stays, and a best written again: a warning). */
ag_status ag__loop_open(const char *dir, const ag_train_client *c, const ag_train_opts *o, ag_train_state *st,
                        uint64_t *replaces, ag_error *err);

#endif
