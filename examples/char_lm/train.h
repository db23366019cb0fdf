/* train.h -- char_lm's training run, which the program and the tests call: lm_train runs char_lm's
 * client (client.c) on the library's trainer (train/train.h: ag_train_run; ../shared/MODEL.md).
 * --resume takes the checkpoint's hyper-parameters but the flags in opts.given, --init-from its weights
 * and vocabulary; neither may change the model's shape (ag_fields_merge). Errors: a status and one line
 * in err; main.c exits 2 for AG_ERR_ARG (the arguments do not fit the data or the checkpoint), else 1. */
#ifndef LM_TRAIN_H
#define LM_TRAIN_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include "attograd.h"
#include "config.h"

typedef struct {
    const char *data_path;       /* UTF-8 text */
    const char *out_dir;         /* checkpoint directory; created (with parents) if missing */
    const char *init_from;       /* a checkpoint directory, or NULL */
    bool resume;
    bool overwrite;              /* as ag_train_opts' (without it such an out_dir: AG_ERR_ARG) */
    lm_config cfg;               /* every hyper-parameter (vocab_size is ignored: the data's) */
    const bool *given;           /* [LM_N_FIELDS] flags the user gave, or NULL (none) */
    bool config_given;           /* --config was given (its model shape must match on resume) */
    FILE *log;                   /* progress and evaluation lines, or NULL: quiet */
    FILE *warn;                  /* warnings (no gnuplot, ...), or NULL */
    bool plot;                   /* draw loss.png with gnuplot */
    bool report;                 /* DIR/report.md at the end, its sample kept in lm_train_result */
    const char *commit;          /*   and the build's commit on it (NULL: unknown) */
    long log_every;              /* the progress line's steps (0: 10), as ag_train_opts' */
    ag_progress_mode progress;   /* --progress (train/train.h) */
    const volatile sig_atomic_t *stop;  /* ag_train_opts' stop (during the setup: nothing written) */
    double *losses;              /* if not NULL: losses[it] = the loss of step it, */
    long n_losses;               /*   for it < n_losses (tests compare runs with it) */
    FILE *trace;                 /* --trace-shapes: the trace goes here (NULL: none) */
    bool trace_only;             /* --trace-only: stop after the trace */
    const char *trace_graph;     /* --trace-graph FILE.dot: the traced pass's tape there too (NULL: none) */
    /* Tests' hooks (NULL: none): before each optimizer step (a poisoned weight for --detect-anomaly);
     * the clock --time-budget reads (NULL: ag_now_s), which before_step and before_batch (before each
     * evaluation batch) advance, so that what the budget decides does not depend on the machine's load. */
    void (*before_step)(long it, ag_gpt *g, void *user);
    void *hook_user;
    double (*clock)(void *user);
    void (*before_batch)(void *user);
    ag_dist *dist;               /* as ag_train_opts': every rank calls lm_train with the same */
    int grad_accum;              /*   options; rank 0 alone should be given a log */
    int shards;                  /* --shards (nn.h: ag_gpt_shards_choose; 0: its default) */
    bool tune_threads;           /* the default --threads: ag_thread_tuner between steps */
    double budget_spent;         /* seconds of --time-budget before lm_train (recipe.h's probe) */
} lm_train_opts;

typedef struct {
    long iter;                   /* where the run stopped (max_iters unless interrupted) */
    bool interrupted;
    double train_loss, val_loss; /* the last evaluation (val NaN without a validation split) */
    long n_params;
    int vocab_size;
    int stop_signal;             /* interrupted: the signal (with several ranks, the one they agreed on) */
    bool out_of_time;            /* --time-budget ended it before max_iters (ag_train_result's) */
    bool ranks_compared;         /* several ranks compared their setups: an argument error is alike */
    bool error_shared;           /* several ranks: the error is every rank's alike: rank 0 says it */
    char *sample;                /* opts.report: the card's sample (malloc'd: the caller frees it), or NULL */
} lm_train_result;

ag_status lm_train(const lm_train_opts *o, lm_train_result *r, ag_error *err);
/* The pictures a train may draw into its directory, NULL-terminated (train_log.c). */
extern const char *const lm_pictures[];

#endif
