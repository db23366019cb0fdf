/* cli.h -- the command line of char_lm: parsing and validation, with no I/O.
 *
 *   char_lm train  --data FILE --out DIR [--config tiny|baby|small] [hyper-parameter flags]
 *                  [--threads N] [--resume] [--init-from DIR]
 *   char_lm sample --ckpt DIR [--prompt TEXT] [--max-new-tokens N] [--temperature F]
 *                  [--top-k N] [--seed N]
 *   char_lm eval   --ckpt DIR --data FILE
 *
 * Everything that can be checked without reading a file is checked here, before any work:
 * unknown flags, missing values, numbers (the whole string must parse; ranges), and relations
 * such as n_embd % n_head. main.c prints the message as "char_lm: error: <message>" and exits 2.
 * The parsed strings point into argv. Flags may be written "--lr 3e-4" or "--lr=3e-4". */
#ifndef LM_CLI_H
#define LM_CLI_H

#include <stdbool.h>
#include "config.h"

typedef enum { LM_CMD_NONE = 0, LM_CMD_TRAIN, LM_CMD_SAMPLE, LM_CMD_EVAL } lm_command;

typedef struct {
    const char *data;          /* --data, required */
    const char *out;           /* --out, required: the checkpoint directory */
    const char *config_name;   /* --config (default "baby") */
    bool config_given;         /* --config was on the command line */
    const char *init_from;     /* --init-from DIR, or NULL */
    bool resume;               /* --resume */
    int threads;               /* --threads, 0: the default (min(2, cores)) */
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
} lm_sample_args;

typedef struct {
    const char *ckpt;          /* --ckpt, required */
    const char *data;          /* --data, required */
} lm_eval_args;

typedef struct {
    lm_command cmd;
    bool help;                 /* --help: print lm_cli_usage(cmd) and exit 0 */
    lm_train_args train;
    lm_sample_args sample;
    lm_eval_args eval;
} lm_cli;

/* Parses argv[1..argc-1]. AG_OK: run cli->cmd (or print help when cli->help).
 * AG_ERR_ARG: message in err (one line, no "char_lm: error:" prefix). */
ag_status lm_cli_parse(lm_cli *cli, int argc, char **argv, char *err, size_t errlen);

/* The usage text of a subcommand (LM_CMD_NONE: the overview). A static string. */
const char *lm_cli_usage(lm_command cmd);

#endif
