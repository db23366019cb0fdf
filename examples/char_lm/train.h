/* train.h -- the training loop of char_lm, as a library function the program and the tests
 * both call.
 *
 * One run (../shared/MODEL.md, "Optimisation" and "Evaluation"):
 *   for it = start .. max_iters:
 *     if it % eval_interval == 0 or it == max_iters:
 *         mean loss of eval_iters random batches of each split (no-grad mode; the batches
 *         are drawn from an RNG seeded by (seed, it), so evaluating never changes training);
 *         a finite loss not above max(2 ln V, 4 x the best so far), or stop (a diverged
 *         model is never saved: train/train.h's ag_divergence_limit says why this rule); checkpoint (one unit:
 *         checkpoint.h; DIR/best too when this evaluation is the lowest), loss.png
 *     if it == max_iters: stop
 *     lr = ag_lr_at(it); a batch of B random windows from the training split (the run's
 *     batch RNG, saved in every checkpoint); forward, backward; clip; a finite loss and
 *     gradient norm or stop before the optimizer touches the weights; optimizer step t = it+1;
 *     one row of DIR/metrics.csv
 *
 * --resume (opts.resume): the model, its vocabulary, the Adam moments, the iteration, the
 * optimizer step and the batch RNG come from DIR, so the run continues with exactly the losses
 * of an uninterrupted one. The hyper-parameters are the checkpoint's, except those whose flags
 * are marked in opts.given (e.g. a larger --max-iters); the model's shape may not change
 * (AG_ERR_ARG). metrics.csv keeps its rows before the resumed iteration.
 * --init-from (opts.init_from): a new run whose weights and vocabulary are another
 * checkpoint's; the model's shape is that checkpoint's (flags that contradict it: AG_ERR_ARG).
 *
 * --time-budget (cfg.time_budget, seconds): the run ends, its final evaluation and checkpoint
 * written, within that time of lm_train's start. The first steps are timed, then the steps
 * that fit become max_iters (and lr_decay_iters, so the cosine ends with the budget), saved as
 * budget_iters for --resume, and fitted again at the evaluations of the budget's first fifth
 * (the machine's speed wanders); before each iteration a check ends the run early, with its
 * evaluation and checkpoint, if the machine slowed down since (train/budget.h, kept by the
 * library's trainer, ag_train_run, which runs this loop with char_lm's client: client.c).
 *
 * --trace-shapes (opts.trace): after the model is built, one forward pass of a few training
 * windows is printed op by op (tools.h); opts.trace_only stops there (nothing is written).
 * --detect-anomaly (cfg.detect_anomaly): the training ctx checks every op output and every
 * gradient, so the first one that goes NaN/Inf stops the step with AG_ERR_NONFINITE and a
 * message naming the op, its shape and its layer (attention then runs op by op, so the op is
 * the matmul of the scores, the softmax, ... rather than the fused kernel); after each
 * optimizer step the weights are checked too. Either way the optimizer never takes the step and
 * the last checkpoint stays (a checkpoint with a non-finite weight is never written: the
 * trainer's save refuses it, ag_ckpt_check_finite).
 * --log-attn-stats (cfg.log_attn_stats): at each evaluation one batch (of the validation split,
 * or the training split without one) runs with every layer's attention weights recorded;
 * metrics.csv gains, per layer l, attn_entropy_L<l> (the mean entropy, in nats, of the
 * attention rows over queries t >= 1, heads and batch: ln(t+1) for uniform weights, 0 for a
 * one-hot row) and attn_max_L<l> (the mean over the same rows of the largest weight: 1/(t+1)
 * uniform, 1 saturated). Query 0 sees only itself (weight 1, entropy 0) and is left out. The
 * companion plot DIR/attn.png is redrawn with loss.png.
 *
 * ERRORS: the function returns a status and one line in the ag_error err; main.c prints it. AG_ERR_ARG means
 * "the arguments do not fit the data or the checkpoint" (block_size longer than the text, a
 * different model shape on --resume, ...), so main.c exits 2 for it and 1 for the rest.
 * A non-finite loss, evaluation loss or gradient norm, or a diverged evaluation, is
 * AG_ERR_NONFINITE; the last checkpoint and the best stay intact, and the message names them.
 *
 * THE RUN DIRECTORY (issue 12): out_dir is locked (train/train.h) from before a --resume reads it to
 * the end of the run (a directory that does not exist yet: from its creation), so a second run
 * there is AG_ERR_ARG at once, as is an out_dir inside another run directory (a ckpt-N of one);
 * what a killed run left there is removed (ag_ckpt_clean: this run's own, nothing else) before
 * the first checkpoint; a stop signal is looked at between the stages of the setup and
 * every MiB of reading and decoding the text (then nothing is written), before each step and
 * before each evaluation batch. */
#ifndef LM_TRAIN_H
#define LM_TRAIN_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include "attograd.h"
#include "config.h"

/* How the progress line is written (--progress: auto, lines, tty), as train/train.h's
 * ag_progress_mode says. */
typedef ag_progress_mode lm_progress;
#define LM_PROGRESS_AUTO AG_PROGRESS_AUTO
#define LM_PROGRESS_LINES AG_PROGRESS_LINES
#define LM_PROGRESS_TTY AG_PROGRESS_TTY

typedef struct {
    const char *data_path;       /* UTF-8 text */
    const char *out_dir;         /* checkpoint directory; created (with parents) if missing */
    const char *init_from;       /* a checkpoint directory, or NULL */
    bool resume;
    bool overwrite;              /* start over in an out_dir that holds a checkpoint; without
                                    it (and without resume) that is an AG_ERR_ARG */
    lm_config cfg;               /* every hyper-parameter (vocab_size is ignored: the data's) */
    const bool *given;           /* [LM_N_FIELDS] flags the user gave, or NULL (none) */
    bool config_given;           /* --config was given (its model shape must match on resume) */
    FILE *log;                   /* progress and evaluation lines, or NULL: quiet */
    FILE *warn;                  /* warnings (no gnuplot, ...), or NULL */
    bool plot;                   /* draw loss.png with gnuplot */
    bool report;                 /* DIR/report.md at the end, its sample kept in lm_train_result */
    const char *commit;          /*   and the build's commit on it (NULL: unknown) */
    long log_every;              /* progress line every this many steps when log is not a
                                    terminal (0: 10); on a terminal every step, in place */
    lm_progress progress;        /* which of the two (lm_progress) */
    const volatile sig_atomic_t *stop;  /* when *stop becomes non-zero (a signal): finish the
                                    step or evaluation batch, write a checkpoint, return AG_OK
                                    with interrupted (during the setup: nothing written) */
    double *losses;              /* if not NULL: losses[it] = the loss of step it, */
    long n_losses;               /*   for it < n_losses (tests compare runs with it) */
    FILE *trace;                 /* --trace-shapes: the trace goes here (NULL: none) */
    bool trace_only;             /* --trace-only: stop after the trace */
    const char *trace_graph;     /* --trace-graph FILE.dot: the traced pass's tape there too (NULL: none) */
    /* A hook for tests and experiments: called before each optimizer step with the model
     * (e.g. to poison a weight and watch --detect-anomaly catch it). NULL: none. */
    void (*before_step)(long it, ag_gpt *g, void *user);
    void *hook_user;
    /* The clock --time-budget reads, in seconds (NULL: the wall clock, ag_now_s). A test gives
     * one that its before_step advances by a set time a step, so that what the budget decides
     * does not depend on how busy the machine is. */
    double (*clock)(void *user);
    /* Called before each evaluation batch (NULL: none): a test's simulated clock advances by an
     * evaluation batch's time, so that evaluations cost time too. */
    void (*before_batch)(void *user);
    /* Data parallelism (train/ddp.h): the job of ranks this process is one of (NULL: alone), and
     * --grad-accum (0 or 1: one micro-batch per step). Every rank calls lm_train
     * with the same options; rank 0 alone writes the checkpoints, metrics.csv and the plots, and
     * should be the only one given a log. */
    ag_dist *dist;
    int grad_accum;
    /* --shards: each pass's windows in this many shards, one thread each (ag_gpt_shards, nn.h);
     * 1 the plain step; 0 the default (ag_gpt_shards_default): the threads, at least 2, and 1
     * with dropout */
    int shards;
    /* The default --threads: between steps, the threads set (ag_threads) or one, whichever is
     * faster now (ag_thread_tuner, speed.h: a busy machine); the same bits either way. */
    bool tune_threads;
    /* Seconds of --time-budget spent before lm_train: the recipe's probe (recipe.h). */
    double budget_spent;
} lm_train_opts;

typedef struct {
    long iter;                   /* where the run stopped (max_iters unless interrupted) */
    bool interrupted;
    double train_loss, val_loss; /* the last evaluation (val NaN without a validation split) */
    long n_params;
    int vocab_size;
    int stop_signal;             /* interrupted: the signal that stopped it (with several
                                    ranks, the one they agreed on, whichever rank caught it) */
    bool out_of_time;            /* --time-budget ran out before max_iters (the machine slowed
                                    down after the count was fixed): ended at iter, with its
                                    evaluation and checkpoint, the schedule not finished */
    bool ranks_compared;         /* several ranks compared their setups (train_agree.c): an
                                    argument error after that is the same on every rank */
    bool error_shared;           /* several ranks: the error is every rank's alike (rank 0's
                                    own, sent to all, or the builds differ): rank 0 says it */
    char *sample;                /* opts.report: the card's sample (malloc'd: the caller frees it), or NULL */
} lm_train_result;

ag_status lm_train(const lm_train_opts *o, lm_train_result *r, ag_error *err);
/* The pictures a train may draw into its directory, NULL-terminated (train_log.c). */
extern const char *const lm_pictures[];

#endif
