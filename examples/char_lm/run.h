/* run.h -- one training run of char_lm (lm_train, train.h): its state, grouped by concern, and
 * the named calls that the loop and the step in train.c make into the files around them.
 *
 *   train.c        the step and the loop: read it first, top to bottom
 *   client.c       the step's batch, pass and update, the log's words: ag_train_client's calls
 *   train_setup.c  everything before the first step: the lock, the text, the model (a
 *                  checkpoint's with --resume or --init-from), the buffers, the ranks
 *   train_eval.c   the evaluation every eval_interval steps: the losses of both splits, the
 *                  attention statistics, then a checkpoint
 *   train_log.c    what the run reports: the log lines, DIR/metrics.csv, the plots
 *   train_agree.c  several ranks: before they start, that they hold the same run
 *   dynamics.c     --log-dynamics: gradient norms and update ratios per layer, DIR/dynamics.csv
 *   train_budget.c --time-budget: the run's view of the library's budget (train/budget.h)
 *   checkpoint.h   the checkpoint files; train/ddp.h the ranks and micro-batches; train/train.h the lock;
 *                  batch.h the batches and the dropout seed of a step
 *
 * Internal to lm_train: nothing outside these files includes it. */
#ifndef LM_RUN_H
#define LM_RUN_H

#include <stdio.h>
#include <sys/types.h>
#include "batch.h"
#include "checkpoint.h"
#include "train/train.h"
#include "train.h"

/* --seed's random streams, seeded as char_lm always seeded them, so that saved runs replay bit
 * for bit: stream (a, b) starts from
 *     ag_seed_at(a, 0, b) = ag_splitmix64((a ^ (b * golden + LM_SEED_SALT)) - golden)
 * (tensor/rng.h; splitmix64's finaliser alone: ag_splitmix64 adds the golden step itself).
 * The batch sampler is (seed, LM_TAG_BATCH), drawn once; the others are (seed ^ tag, it), afresh
 * at each iteration it, so evaluating more or less often never changes the training losses. */
#define LM_SEED_SALT 0x632BE59BD9B4E019ull
#define LM_TAG_BATCH 0x62617463686573ull       /* "batches": the batch sampler */
#define LM_TAG_EVAL 0x6576616c7561ull          /* "evalua": evaluation batches */
#define LM_TAG_DROP 0x64726f706f7574ull        /* "dropout": the dropout masks of a step */
#define LM_TAG_STATS 0x6174746e737473ull       /* "attnsts": the attention statistics' batch */

/* The text and the batches drawn from it. */
typedef struct {
    ag_corpus text;          /* text.ids [n] token ids, text.vocab their characters */
    size_t n_train, n_val;   /* the split: ids [0, n_train) train, [n_train, n) validate */
    size_t *off;             /* [B] the window offsets of a batch, into its split */
    int *x, *y;              /* [B,T] a batch: inputs, and targets (each input's next token) */
} lm_data;

/* The model and what the optimizer carries from step to step. */
typedef struct {
    lm_model m;              /* m.g, the GPT: its params hold weights, grads, Adam's m and v */
    lm_train_state st;       /* the iteration, the optimizer's t, the batch sampler (checkpoint.h) */
    ag_lr_schedule sched;    /* linear warmup, cosine decay (optim.h) */
    ag_ctx *ctx;             /* every forward and backward of the run: activations, the tape */
    ag_gpt_shards *shards;   /* each pass's windows split over the threads (nn.h; one: the plain pass) */
    int n_shards;            /*   how many the setup chose (1: the plain step), memory counted */
    ag_thread_tuner threads; /* the default --threads: 2, or 1 while that is faster (speed.h) */
} lm_learner;

/* What the run reports (rank 0 alone writes files: train/ddp.h). */
typedef struct {
    FILE *metrics;           /* DIR/metrics.csv, or NULL (a rank other than 0, or not open yet) */
    char train_col[32], val_col[32];   /* this row's evaluation columns ("" between evaluations) */
    char *stats;             /* its attention columns ",e0,p0,e1,p1..." (",,,," between them) */
    size_t stats_cap;
    ag_tensor **attn;        /* [n_layer] of [B,H,T,T]: recorded attention weights (--log-attn-stats) */
    double *entropy, *peak;  /* [n_layer] their statistics at the last evaluation */
    ag_dynamics_log *dyn;    /* --log-dynamics (dynamics.c), from the first log step; or NULL */
    ag_activations *acts;    /* --log-activations (activations.c), from the first evaluation; or NULL */
    ag_progress prog;        /* the progress line, the smoothed step time (--progress: train/train.h) */
    bool plot_ok;            /* draw loss.png (no more after a failure) */
    pid_t plot_pid;          /* a loss.png still being drawn in the background, or 0 */
    double t_start;          /* the run's start */
} lm_report;

/* Where the run stands, and what may end it. */
typedef struct {
    long start;              /* the first iteration of this run: 0, or where --resume picks up */
    bool resumed;
    long saved_at;           /* the iteration of the checkpoint on disk, or -1 */
    uint64_t replaces;       /* --overwrite: the run whose checkpoints go once ours is committed (0: none) */
    ag_lock lock;            /* on out_dir, for the whole run (train/train.h) */
    ag_ddp *ddp;             /* several ranks or micro-batches per step (train/ddp.h); NULL: neither */
    ag_budget budget;        /* --time-budget (train_budget.c, train/budget.h) */
    long it;                 /* the iteration in hand (the client's messages name it, its evaluation seeds on it) */
    ag_rng eval_rng;         /* an evaluation's batches, both splits: from (seed, it) afresh */
    long eval_done;          /*   its fewest batches of a split (--time-budget may cut them) */
    bool compared;           /* the ranks have compared what they hold (lm_run_agree) */
    bool shared;             /* the error is every rank's alike (rank 0's, shared, or the
                                handshake's): rank 0 alone says it */
} lm_control;

typedef struct {
    const lm_train_opts *o;
    lm_config cfg;           /* every hyper-parameter: the flags, merged with a checkpoint's */
    lm_data data;
    lm_learner learn;
    lm_report rep;
    lm_control ctl;
} lm_run;

// --- train.c: batches (batch.h), signals, checkpoints ---

/* The stop request: this process's signal, or with several ranks the one they agreed on at
 * the last step's reduction, so that all stop at the same iteration (train/ddp.h). 0: none. */
int lm_run_stop_requested(const lm_run *R);
/* A stop signal came to this process, for the checks inside the setup. With several ranks
 * those wait for the first step's reduction, where the ranks agree (lm_run_stop_requested), so
 * that no rank leaves a collective the others are in (an evaluation agrees every round of
 * batches: ag_ddp_agree_stop). */
bool lm_run_signal_seen(const lm_run *R);
/* The checkpoint of the run before iteration it, with the evaluation done there (eval: its
 * train and val loss) or none (NULL); rank 0 writes it. Skipped when it is the one on disk. */
ag_status lm_run_checkpoint(lm_run *R, long it, const double *eval, ag_error *err);
/* What a run that stops on an error leaves, read from the run directory so that it is true:
 * "kept: DIR/ckpt-00000020, the latest and the best" (in buf [LM_KEPT_MAX], returned), for the
 * message; LM_KEPT(R) in a temporary buffer that lives as long as the enclosing block. */
#define LM_KEPT_MAX 1024
#define LM_KEPT(R) lm_run_kept(R, (char[LM_KEPT_MAX]){""})
const char *lm_run_kept(const lm_run *R, char *buf);
/* A number for a message: NaN without its sign, so that it reads "nan", never "-nan". */
static inline double lm_shown(double v) { return v != v ? __builtin_nan("") : v; }

// --- client.c: char_lm's calls of ag_train_client (train/train.h says what each does), user an lm_run ---

ag_status lm_client_draw(void *user, ag_rng *rng, ag_error *err);
ag_status lm_client_pass(void *user, ag_ctx *ctx, ag_micro *mb, double *loss, ag_error *err);   /* errors worded */
ag_status lm_client_update(void *user, ag_params *P, double lr, long t, double clip, ag_error *err);
void lm_client_progress_text(void *user, long it, long steps, double loss, double lr, double ema_s,
                             const ag_budget *b, char *buf, size_t n);
void lm_client_eval_text(void *user, long it, double tl, double vl, double score, char *buf, size_t n);
/* The losses at iteration ctl.it: the training split's (the evaluation's stream seeded here), then
 * the validation split's (NaN without one; score NaN); ctl.eval_done: the fewest batches of a split. */
ag_status lm_client_evaluate_train(void *user, ag_ctx *ctx, double *tl, ag_error *err);
ag_status lm_client_evaluate(void *user, ag_ctx *ctx, double *vl, double *score, ag_error *err);
/* b windows of ids at data.off through the model in no-grad mode: their mean loss in *loss. */
ag_status lm_client_forward(lm_run *R, ag_ctx *ctx, const int *ids, int b, double *loss, ag_error *err);

// --- train_agree.c ---

/* Several ranks, before anything else: every rank shows the others its build (a fixed-size
 * record: version, protocol, a hash of the layouts exchanged later); a difference is
 * AG_ERR_ARG on every rank, naming the builds, instead of a hang or a garbled exchange. */
ag_status lm_run_handshake(lm_run *R, ag_error *err);
/* Several ranks: rank 0 opened the run (the lock, a checkpoint read: outcome mine, its message
 * in why) while the others waited; every rank gets that outcome (a failure becomes every
 * rank's, ctl.shared) and the checkpoint's config, vocabulary, iteration and train state, so
 * that no other rank reads the run directory (its weights and moments follow in
 * ag_ddp_share_start). Alone: mine, as it is. */
ag_status lm_run_share_start(lm_run *R, ag_status mine, const ag_error *why, ag_error *err);
/* Several ranks: each rank's own setup (its text, the config's checks, the model) went as mine
 * (its message in why); every rank gets every outcome, and a failure anywhere is every rank's
 * (ctl.shared): rank 0 says it once, "rank R: " before a message that is not its own. Alone:
 * mine, as it is. */
ag_status lm_run_share_outcome(lm_run *R, ag_status mine, const ag_error *why, ag_error *err);

/* Several ranks: every rank compares what it holds (the config, the parameter count, the
 * vocabulary, the text, --grad-accum, the shards, --threads, where the run starts) with every
 * other's, before anything of a size they could disagree on is sent; a difference is AG_ERR_ARG
 * on every rank, naming the fields and ranks. Sets ctl.compared once the comparison is made.
 * Alone: AG_OK. */
ag_status lm_run_agree(lm_run *R, ag_error *err);

// --- train_setup.c ---

/* Everything before the first step (lock, data, model, optimizer state, buffers, ranks). A
 * stop signal between the stages ends it early with AG_OK: the caller looks at the signal. */
ag_status lm_run_setup(lm_run *R, ag_error *err);
/* The checkpoint of learn.st (lm_ckpt_save) into the run directory this train locked. When
 * its path no longer names it (moved away while the run went on, a new directory made in its
 * place), the checkpoint is written into the locked one where it now is, and AG_ERR_IO says
 * where, so that the run stops with nothing lost and nothing written into the stranger. */
ag_status lm_run_save(lm_run *R, ag_error *err);
/* True when there is nothing to train: --trace-only, or a resumed run already at --max-iters
 * (r says where it stands; the run directory is tidied all the same). */
bool lm_run_nothing_to_do(lm_run *R, lm_train_result *r);
/* The run directory: created if missing and locked, refused when it holds another run's
 * checkpoint (unless --overwrite), cleaned of what a killed run left (only this run's
 * superseded checkpoints go: ag_ckpt_clean); metrics.csv opened in it and the run's header
 * logged. Rank 0 only. */
ag_status lm_run_open_dir(lm_run *R, ag_error *err);
/* Everything the run holds, the lock last. */
void lm_run_free(lm_run *R);

// --- train_eval.c ---

/* Every eval_interval steps and at the end (last): the losses (and the attention statistics),
 * a log line, a checkpoint (the best one too, when it is), the plots; at the end also the last
 * row of metrics.csv. Otherwise only this iteration's evaluation columns are blanked. A loss
 * that is not finite or above max(2 ln V, 4 x the best so far) is divergence: AG_ERR_NONFINITE,
 * and the diverged model is never saved. */
ag_status lm_run_evaluate(lm_run *R, long it, bool last, lm_train_result *r, ag_error *err);

// --- train_budget.c: --time-budget on train/budget.h's ag_budget ---

/* The budget's view of the run (its config, ranks, log), then ag_budget_start. */
void lm_budget_start(lm_run *R);
/* The budget's clock: o->clock if given (a test's), else ag_now_s. */
double lm_budget_now(const lm_train_opts *o);
/* ag_budget_check (before iteration it's evaluation), after the probe of one window when
 * nothing is timed yet; a count it fits again goes into the config. */
ag_status lm_budget_check(lm_run *R, long it, bool *last, ag_error *err);
/* ag_budget_calibrate (after iteration it's evaluation, before its step); a count it fixes
 * goes into the config: max_iters, lr_decay_iters (when it followed), budget_iters. */
ag_status lm_budget_calibrate(lm_run *R, long it, bool *last, ag_error *err);
/* ag_budget_eval_start, loss.png's wait counted in the final evaluation's time. */
void lm_budget_eval_start(lm_run *R, bool last);

// --- train_log.c ---

void lm_log_warn(const lm_run *R, const char *msg);
/* One line of the log (printf-style; on a terminal the progress line is cleared first). */
void lm_log_line(const lm_run *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* New run: a fresh DIR/metrics.csv; resume: the rows before the first iteration kept. */
ag_status lm_log_open_metrics(lm_run *R, ag_error *err);
/* Iteration it is a log step: every log_every (10) steps, and the last one. */
bool lm_log_due(const lm_run *R, long it);
void lm_log_header(const lm_run *R);
/* The step's row of metrics.csv (on disk before it returns), its loss in opts.losses, and the
 * progress line; t0 is when the step began. */
ag_status lm_log_step(lm_run *R, long it, double lr, double loss, double t0, ag_error *err);
/* The evaluation at iteration it: its columns in this row, its log line. */
void lm_log_eval(lm_run *R, long it, double tl, double vl);
/* Between evaluations the row's train_loss, val_loss and attention columns stay empty. */
void lm_log_blank_eval(lm_run *R);
/* The last row, which no step writes: iteration it's evaluation alone. */
ag_status lm_log_last_row(lm_run *R, long it, ag_error *err);
/* Every row so far on disk: a full disk is reported at the first row it refuses. */
ag_status lm_log_flush(lm_run *R, ag_error *err);
/* loss.png (and attn.png) in the background; the last one waited for. */
void lm_log_plots(lm_run *R, bool last);
/* Everything logged so far is out of the process (a log on a full disk: AG_ERR_IO at once). */
ag_status lm_log_written(const lm_run *R, ag_error *err);
/* Ends an unfinished progress line before an error or an interruption is reported. */
void lm_log_break(const lm_run *R);
void lm_log_end(const lm_run *R, const lm_train_result *r);

// --- dynamics.c (--log-dynamics; nothing happens without it) ---

/* Before the update of a log step: each layer's gradient norms, and a copy of the weights. The
 * first call opens DIR/dynamics.csv (rank 0) and allocates what the measure needs
 * (ag_dynamics_log: train/train.h; rep.dyn, freed by ag_dynamics_log_free). */
ag_status lm_dynamics_watch(lm_run *R, long it, double norm, double gscale, ag_error *err);
/* After the update of the step watched: the update/weight ratios, and the row of dynamics.csv. */
ag_status lm_dynamics_record(lm_run *R, long it, double lr, ag_error *err);

// --- activations.c (--log-activations; nothing happens without it) ---

/* At an evaluation: one batch through the model, per block its residual stream's RMS, its MLP
 * activation's inputs and its attention scores' range; a row of DIR/activations.csv (rank 0)
 * and a line of the log. The first call opens the file (ag_activations: train/train.h; rep.acts,
 * freed by ag_activations_free). The run's losses do not change. */
ag_status lm_activations_record(lm_run *R, long it, ag_error *err);

#endif
