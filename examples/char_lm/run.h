/* run.h -- one training run of char_lm (lm_train, train.h) on the library's trainer: its state and the
 * calls between its files (train.c first, then client.c, train_setup.c, train_log.c, train_agree.c).
 * Internal to lm_train: nothing outside these files includes it. */
#ifndef LM_RUN_H
#define LM_RUN_H

#include <stdio.h>
#include <sys/types.h>
#include "checkpoint.h"
#include "train/train.h"
#include "train.h"

/* --seed's random streams, seeded as char_lm always seeded them (tensor/rng.h: ag_seed_at), so
 * that saved runs replay bit for bit: the batch sampler is (seed, LM_TAG_BATCH), drawn once; the
 * others (seed ^ tag, it), afresh at each iteration, so evaluating never changes training. */
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
    ag_train_state from;     /* --resume: st as the trainer takes it (ag_train_opts.resumed) */
    ag_ctx *ctx;             /* the trainer's ctx (lm_client_start): every forward and backward of the run */
    ag_gpt_shards *shards;   /* each pass's windows split over the threads (nn.h) */
    int n_shards;            /*   how many (ag_gpt_shards_choose) */
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
    long saved_at;           /* the iteration of the last checkpoint, as far as this rank knows (-1: none) */
    ag_lock lock;            /* on out_dir, for the whole run: the trainer's too */
    ag_ddp *ddp;             /* the trainer's split over ranks (train/ddp.h), NULL outside it */
    ag_budget budget;        /* --time-budget, the trainer's */
    long it;                 /* the iteration in hand (the client's messages name it, its evaluation seeds on it) */
    ag_rng eval_rng;         /* an evaluation's batches, both splits: from (seed, it) afresh */
    long eval_done;          /*   its fewest batches of a split (--time-budget may cut them) */
    ag_error pending;        /* a failure of the attention statistics (in the log's words call), for the next call */
} lm_control;

typedef struct {
    lm_ckpt_user ck;         /* first: what lm_ckpt_format reads of the trainer's client (checkpoint.h) */
    const lm_train_opts *o;
    lm_train_result *res;    /* lm_train's: the setup sets ranks_compared and error_shared */
    lm_config cfg;           /* every hyper-parameter: the flags, merged with a checkpoint's */
    lm_data data;
    lm_learner learn;
    lm_report rep;
    lm_control ctl;
} lm_run;

// --- train.c: signals, the run on the trainer ---

/* The stop request: this process's signal, or the ranks' agreed one (ag_ddp_stop). 0: none. */
int lm_run_stop_requested(const lm_run *R);
/* What a stopped run keeps (rank 0 writes DIR), for its message, in a buffer that lives as long as the block. */
#define LM_KEPT(R) ag_train_kept(ag_dist_rank((R)->o->dist) == 0, (R)->o->out_dir, "iteration", (R)->ctl.saved_at, \
                                 (char[1024]){""}, 1024)
/* A number for a message: NaN without its sign, so that it reads "nan", never "-nan". */
static inline double lm_shown(double v) { return v != v ? __builtin_nan("") : v; }

// --- client.c: char_lm's ag_train_client (train/train.h), user an lm_run ---

ag_train_client lm_client(lm_run *R, char *cols, size_t n);   /* metrics.csv's own columns in cols [n] */
ag_train_opts lm_client_opts(lm_run *R);

// --- train_agree.c: several ranks, as train/ddp.h's calls (alone: AG_OK, or mine) ---

ag_status lm_run_handshake(lm_run *R, ag_error *err);   /* ag_build_handshake */
/* ag_share_start, then rank 0's checkpoint config, vocabulary and state to all (the weights: ag_ddp_share_start) */
ag_status lm_run_share_start(lm_run *R, ag_status mine, const ag_error *why, ag_error *err);
ag_status lm_run_agree(lm_run *R, ag_error *err);   /* ag_fields_agree of what each rank holds */

// --- train_setup.c ---

/* Everything before the trainer; a stop signal ends it early with AG_OK: the caller looks at it. */
ag_status lm_run_setup(lm_run *R, ag_error *err);
void lm_run_free(lm_run *R);   /* everything the run holds, the lock last */

// --- train_log.c ---

void lm_log_warn(void *R, const char *msg);   /* an lm_run: ag_train_opts' warn */
void lm_log_header(const lm_run *R);
/* loss.png (and attn.png, dynamics.png, activations.png) in the background; the last one waited for. */
void lm_log_plots(lm_run *R, bool last);
void lm_log_end(const lm_run *R, const lm_train_result *r);
/* The trainer's end of the run (its last pictures, with o->report its card) in char_lm's words. */
void lm_log_card(lm_run *R, ag_train_client *c, ag_train_opts *o);

#endif
