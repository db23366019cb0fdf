/* run.h -- one training run of char_lm (lm_train, train.h) on the library's trainer
 * (train/train.h: ag_train_run, which runs the steps, evaluations, checkpoints, metrics.csv, the
 * time budget and the ranks): char_lm's state, grouped by concern, and the named calls between
 * its files.
 *
 *   train.c        lm_train: the setup, then ag_train_run with char_lm's client; read it first
 *   client.c       the client: the step's batch, pass and update, the evaluation, the log's
 *                  words, metrics.csv's own columns: ag_train_client's calls
 *   train_setup.c  everything before the trainer: the lock, the text, the model (a
 *                  checkpoint's with --resume or --init-from), the buffers, the ranks
 *   train_log.c    what the run says beside the trainer: its header, the plots, the end
 *   train_agree.c  several ranks: before they start, that they hold the same run
 *   checkpoint.h   the checkpoint files (lm_ckpt_format: the trainer writes them); train/ddp.h
 *                  the ranks and micro-batches; data/corpus.h the batches (ag_windows_draw, _fill)
 *
 * Internal to lm_train: nothing outside these files includes it. */
#ifndef LM_RUN_H
#define LM_RUN_H

#include <stdio.h>
#include <sys/types.h>
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
    lm_train_state st;       /* where the run starts and the text's fields its checkpoints keep (checkpoint.h) */
    ag_train_state from;     /* --resume: st as the trainer takes it (ag_train_opts.resumed: not read again) */
    ag_ctx *ctx;             /* the trainer's ctx (lm_client_start): every forward and backward of the run */
    ag_gpt_shards *shards;   /* each pass's windows split over the threads (nn.h; one: the plain pass) */
    int n_shards;            /*   how many the setup chose (1: the plain step), memory counted */
} lm_learner;

/* What the run reports beside the trainer's log and metrics.csv (rank 0 alone writes files). */
typedef struct {
    ag_tensor **attn;        /* [n_layer] of [B,H,T,T]: recorded attention weights (--log-attn-stats) */
    double *entropy, *peak;  /* [n_layer] their statistics at the last evaluation */
    ag_progress prog;        /* the log before the trainer's (the setup's notes, --progress) */
    bool plot_ok;            /* draw loss.png (no more after a failure) */
    pid_t plot_pid;          /* a loss.png still being drawn in the background, or 0 */
    char *sample;            /* the card's sample (lm_log_card), for lm_train_result's */
    double t_start;          /* the run's start (after the setup) */
    double step_t0, step_s;  /* the step in hand's start, the last step's time (metrics.csv's tokens/s) */
} lm_report;

/* Where the run stands, and what may end it. */
typedef struct {
    long start;              /* the first iteration of this run: 0, or where --resume picks up */
    bool resumed;
    long saved_at;           /* the iteration of the last checkpoint, as far as this rank knows (-1: none) */
    ag_lock lock;            /* on out_dir, for the whole run (train/train.h), the trainer's too */
    ag_ddp *ddp;             /* the trainer's split over ranks and micro-batches (train/ddp.h), NULL outside it */
    ag_budget budget;        /* --time-budget (train/budget.h), the trainer's */
    long it;                 /* the iteration in hand (the client's messages name it, its evaluation seeds on it) */
    ag_rng eval_rng;         /* an evaluation's batches, both splits: from (seed, it) afresh */
    long eval_done;          /*   its fewest batches of a split (--time-budget may cut them) */
    ag_error pending;        /* a failure of the attention statistics (in the log's words call), for the next call */
    bool compared;           /* the ranks have compared what they hold (lm_run_agree) */
    bool shared;             /* the error is every rank's alike (rank 0's, shared, or the
                                handshake's): rank 0 alone says it */
} lm_control;

typedef struct {
    lm_ckpt_user ck;         /* first: what lm_ckpt_format reads of the trainer's client (checkpoint.h) */
    const lm_train_opts *o;
    lm_config cfg;           /* every hyper-parameter: the flags, merged with a checkpoint's */
    lm_data data;
    lm_learner learn;
    lm_report rep;
    lm_control ctl;
} lm_run;

// --- train.c: signals, the run on the trainer ---

/* The stop request: this process's signal, or with several ranks the one they agreed on at
 * the last step's reduction, so that all stop at the same iteration (train/ddp.h). 0: none. */
int lm_run_stop_requested(const lm_run *R);
/* A stop signal came to this process, for the checks inside the setup. With several ranks
 * those wait for the first step's reduction, where the ranks agree (lm_run_stop_requested), so
 * that no rank leaves a collective the others are in (an evaluation agrees every round of
 * batches: ag_ddp_agree_stop). */
bool lm_run_signal_seen(const lm_run *R);
/* This process writes the run directory: rank 0, or alone. */
bool lm_run_writer(const lm_run *R);
/* What a run that stops on an error leaves, read from the run directory so that it is true:
 * "kept: DIR/ckpt-00000020, the latest and the best" (in buf [LM_KEPT_MAX], returned), for the
 * message; LM_KEPT(R) in a temporary buffer that lives as long as the enclosing block. */
#define LM_KEPT_MAX 1024
#define LM_KEPT(R) lm_run_kept(R, (char[LM_KEPT_MAX]){""})
const char *lm_run_kept(const lm_run *R, char *buf);
/* The budget's clock: o->clock if given (a test's), else ag_now_s. */
double lm_budget_now(const lm_train_opts *o);
/* A number for a message: NaN without its sign, so that it reads "nan", never "-nan". */
static inline double lm_shown(double v) { return v != v ? __builtin_nan("") : v; }

// --- client.c: char_lm's calls of ag_train_client (train/train.h says what each does), user an lm_run ---

/* The trainer's client of R (its model, its calls, metrics.csv's columns in cols [n]) and its
 * options (the flags as train.h's lm_train_opts and the config give them). */
ag_train_client lm_client(lm_run *R, char *cols, size_t n);
ag_train_opts lm_client_opts(lm_run *R);
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

/* Everything before the trainer (lock, data, model, optimizer state, buffers, the ranks'
 * agreement). A stop signal between the stages ends it early with AG_OK: the caller looks at
 * the signal. */
ag_status lm_run_setup(lm_run *R, ag_error *err);
/* True when there is nothing to train: --trace-only, or a resumed run already at --max-iters
 * (r says where it stands; the run directory is tidied all the same). */
bool lm_run_nothing_to_do(lm_run *R, lm_train_result *r);
/* Rank 0's run directory, locked since the setup, before the trainer opens it (a new one it
 * makes and locks itself): a first checkpoint of this same run that a kill left uncommitted
 * removed, refused when it holds another run's checkpoint (unless --overwrite: the trainer then
 * starts over it). */
ag_status lm_run_open_dir(lm_run *R, ag_error *err);
/* Everything the run holds, the lock last. */
void lm_run_free(lm_run *R);

// --- train_log.c ---

void lm_log_warn(const lm_run *R, const char *msg);
void lm_log_header(const lm_run *R);
/* loss.png (and attn.png, dynamics.png, activations.png) in the background; the last one waited for. */
void lm_log_plots(lm_run *R, bool last);
void lm_log_end(const lm_run *R, const lm_train_result *r);
/* The trainer's end of the run in char_lm's words: the last pictures (lm_pictures, this run's on
 * the card), and with o->report the card, its config and sample char_lm's. */
void lm_log_card(lm_run *R, ag_train_client *c, ag_train_opts *o);

#endif
