/* cli.h -- char_lm's command line: train, sample, eval and attn (their flags: help/<command>.txt),
 * parsed with no I/O. All that can be checked without reading a file is checked here, before any
 * work; main.c prints the message as "char_lm: error: <message>" and exits 2. The parsed strings
 * point into argv. */
#ifndef LM_CLI_H
#define LM_CLI_H

#include <stdbool.h>
#include "config.h"
#include "train.h"

#define LM_DIST_TIMEOUT_S 60   /* --dist-timeout's default (docs/distributed.md) */

typedef enum { LM_CMD_NONE = 0, LM_CMD_TRAIN, LM_CMD_SAMPLE, LM_CMD_EVAL, LM_CMD_ATTN } lm_command;

/* The flags of every command that runs the model (train, sample, eval). */
typedef struct {
    bool shapes;               /* --trace-shapes: one forward pass op by op first */
    bool only;                 /* --trace-only (implies it): stop after it */
    const char *graph;         /* --trace-graph FILE.dot (implies it): the traced tape as dot too */
    const char *kernels;       /* --kernels reference|fast; NULL: AG_KERNELS, or fast (tensor/speed.h) */
} lm_trace_args;

typedef struct {
    const char *data;          /* --data, required */
    const char *out;           /* --out, required: the checkpoint directory */
    const char *config_name;   /* --config (default "baby") */
    bool config_given;         /* --config was on the command line */
    bool pick_recipe;          /* --time-budget without --config, --resume or --init-from: the
                                  recipe follows the machine's speed (recipe.h), chosen before
                                  the run; cfg holds the flags given until then */
    const char *init_from;     /* --init-from DIR, or NULL */
    bool resume;               /* --resume */
    bool overwrite;            /* --overwrite: a new run over an existing checkpoint */
    int threads;               /* --threads, 0: the default (min(2, cores)) */
    int shards;                /* --shards N, each step's windows over N threads; 0: the default */
    int grad_accum;            /* --grad-accum K, micro-batches per step; 0: one (train/ddp.h) */
    double dist_timeout;       /* --dist-timeout: seconds a rank waits for the others (0: no limit) */
    ag_progress_mode progress;     /* --progress auto (default), lines or tty (train.h) */
    int checkpoint_signal;     /* --checkpoint-signal: a signal that, as SIGUSR1 always does, stops
                                  with a checkpoint and exit 75 (main.c); default SIGUSR1 */
    lm_trace_args trace;
    lm_config cfg;             /* the preset, then every flag applied; vocab_size 0 */
    bool given[LM_N_FIELDS];   /* given[i]: lm_fields[i]'s flag was on the command line */
} lm_train_args;

typedef struct {
    const char *ckpt;          /* --ckpt, required */
    const char *prompt;        /* --prompt, NULL: a newline if in the vocabulary, else token 0 */
    long max_new_tokens;       /* default 500 */
    double temperature;        /* > 0, default 1.0 */
    int top_k;                 /* 0: off (default) */
    uint64_t seed;             /* default 1337 */
    lm_trace_args trace;
    const char *from;          /* --from: "latest" (default) or "best" (AG_CKPT_LATEST, AG_CKPT_BEST) */
} lm_sample_args;

typedef struct {
    const char *ckpt;          /* --ckpt, required */
    const char *data;          /* --data, required */
    lm_trace_args trace;
    const char *from;          /* --from, as sample's */
} lm_eval_args;

typedef struct {
    const char *ckpt;          /* --ckpt, required */
    const char *from;          /* --from, as sample's */
    const char *prompt;        /* --prompt, required, non-empty */
    int layer;                 /* --layer, default 0 (checked against the model in tools.c) */
    int head;                  /* --head, -1 (default): every head of the layer in a grid */
    const char *out;           /* --out, required: the .png (a .dat and a .gp beside it) */
} lm_attn_args;

typedef struct {
    lm_command cmd;
    bool help;                 /* --help: print lm_cli_usage(cmd) and exit 0 */
    lm_train_args train;
    lm_sample_args sample;
    lm_eval_args eval;
    lm_attn_args attn;
} lm_cli;

/* Parses argv[1..argc-1]. AG_OK: run cli->cmd (or print help when cli->help); AG_ERR_ARG: the message. */
ag_status lm_cli_parse(lm_cli *cli, int argc, char **argv, ag_error *err);

/* The usage text of a subcommand (LM_CMD_NONE: the overview); train's is written again at each call. */
const char *lm_cli_usage(lm_command cmd);

#endif
